/* progress.h — how long-running library work (a download, a checkpoint load, a conversion, a long
 * prefill) reports how far it is, without knowing how or whether it is shown. The CLI supplies a
 * sink that draws a bar on stderr (src/cli/progress.c); everyone else passes NULL. */
#ifndef MTPLX_BASE_PROGRESS_H
#define MTPLX_BASE_PROGRESS_H

#include <stdint.h>

/* done out of total units (bytes, tensors, tokens: the caller of the work knows which); total 0 =
 * unknown. Called from the thread doing the work; with several worker threads the reporting side
 * serialises calls itself. */
typedef void (*progress_fn)(void *user, uint64_t done, uint64_t total);

typedef struct {
    progress_fn fn;  /* NULL: report nothing */
    void *user;      /* passed back to fn */
} progress_sink;

static inline void progress_report(const progress_sink *p, uint64_t done, uint64_t total) {
    if (p && p->fn) p->fn(p->user, done, total);
}

#endif
