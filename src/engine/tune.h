/* tune.h — the per-machine depth choice saved by `mtplx tune` and read by `mtplx run`.
 *
 * Stored in $MTPLX_HOME/tuning.json (default ~/.mtplx/tuning.json) as
 *   {"version": 1, "entries": {"<key>": {"model", "cpu", "threads", "depth", "decode_tok_s": {...}, "time"}}}
 * keyed by "<resolved model path>|<CPU model>|<threads>". depth 0 means "AR won". */
#ifndef MTPLX_ENGINE_TUNE_H
#define MTPLX_ENGINE_TUNE_H

#include <stddef.h>

#include "../base/err.h"

/* Facts about this machine used in keys and benchmark reports. */
typedef struct {
    char cpu[256];      /* /proc/cpuinfo "model name", or "unknown" */
    int threads;        /* compute threads: $MTPLX_THREADS when set, else online CPUs */
} machine_facts;

void machine_facts_get(machine_facts *f);

/* Path of the tuning file (heap string, caller frees), or NULL with err. */
char *tune_path(mtplx_err *err);

/* Key for model_dir on this machine into out[n]. Returns 0, or EINVAL if model_dir cannot be resolved. */
int tune_key(const char *model_dir, char *out, size_t n, mtplx_err *err);

/* Saved depth for model_dir on this machine: returns 1 and *depth when found, 0 when absent (or the
 * file is missing / unreadable / malformed: tuning is advisory, a bad file is ignored). */
int tune_lookup(const char *model_dir, int *depth);

/* Save depth for model_dir on this machine, with the measured decode tok/s per candidate
 * (tok_s[d] for d = 0..n_depths-1, negative = not measured). Writes atomically (temp + rename).
 * Returns 0 or an error naming the path. */
int tune_store(const char *model_dir, int depth, const double *tok_s, int n_depths, mtplx_err *err);

#endif
