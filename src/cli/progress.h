/* progress.h — the one progress display of the CLI: long work (pull, checkpoint load, convert,
 * synth, a long prefill) reports through a progress_sink (src/base/progress.h) and this draws it on
 * stderr. On a terminal one line is redrawn (bar, amount, rate, ETA); otherwise a plain line is
 * printed every few seconds and one at the end. Nothing is shown when disabled (--quiet, --json) or
 * before `delay_s` has passed, so quick work stays silent. MTPLX_PROGRESS_DELAY (seconds) overrides
 * every delay and MTPLX_PROGRESS_INTERVAL the plain-line period (tests set them). */
#ifndef MTPLX_CLI_PROGRESS_H
#define MTPLX_CLI_PROGRESS_H

#include <stdint.h>

#include "../base/progress.h"

typedef struct {
    char label[32];       /* "pull", "load", "convert", "prefill", ... */
    const char *unit;     /* NULL: bytes (kB/MB/GB and a rate per second); else a count noun ("tok") */
    int enabled;          /* 0: draw nothing */
    int tty;              /* stderr is a terminal */
    double delay_s;       /* silence before the first draw */
    double interval_s;    /* between plain lines when not a terminal */
    double t0;            /* start (clock_now) */
    double last;          /* last draw */
    uint64_t done, total; /* last reported */
    int shown;            /* a line was printed */
    int finished;         /* the final line was printed (done reached total) */
} cli_progress;

/* Start a display for `label`; unit NULL means bytes. enabled 0 makes every call a no-op. */
void cli_progress_start(cli_progress *p, const char *label, const char *unit, double delay_s, int enabled);

/* The sink to hand to library code (it calls back into p). */
progress_sink cli_progress_sink(cli_progress *p);

/* The work ended: a shown bar is completed with a final line (ok = 1) or just ended (ok = 0). A
 * report with done == total already printed the final line; then this does nothing. */
void cli_progress_finish(cli_progress *p, int ok);

#endif
