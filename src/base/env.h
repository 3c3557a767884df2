/* env.h — reading settings from environment variables, strictly.
 *
 * A variable that is unset or empty takes its default; one that is set must hold a value of its
 * kind, or the read fails with a message that names the variable, what it holds and what it may
 * hold. A typo then stops the program instead of silently running with the default (the CPU
 * backend's knobs: docs/architecture.md, "Knobs"). */
#ifndef MTPLX_BASE_ENV_H
#define MTPLX_BASE_ENV_H

#include "err.h"

/* $name as a whole decimal integer in [lo, hi] into *out, or def when unset or empty. Returns 0, or
 * MTPLX_EINVAL (and *out = def) for anything else ("abc", "12x", "", out of range). */
int env_int(const char *name, int def, int lo, int hi, int *out, mtplx_err *err);

/* $name as one of the n words in `words` into *out (its index), or def when unset or empty. Returns 0,
 * or MTPLX_EINVAL (and *out = def) naming the words. */
int env_word(const char *name, const char *const *words, int n, int def, int *out, mtplx_err *err);

/* $name as a switch, "0" or "1", into *out (def when unset or empty). Returns 0 or MTPLX_EINVAL. */
int env_switch(const char *name, int def, int *out, mtplx_err *err);

#endif
