/* fault.h — allocation and I/O failure injection for the fault build (`make fault`: build/fault/,
 * ASan/UBSan plus -DMTPLX_FAULT). In every other build the hooks compile to nothing.
 *
 * In the fault build every malloc/calloc/realloc/strdup/strndup/aligned_alloc/posix_memalign made
 * by mtplx code (the link wraps them: -Wl,--wrap=..., so calls inside libc/jansson/libmicrohttpd
 * are not counted) and every file open/map/write that goes through src/base/file.c or the
 * safetensors writer is a numbered "point". Environment:
 *   MTPLX_FAULT_ALLOC=N   the N-th allocation point fails (1-based; 0 or unset: none)
 *   MTPLX_FAULT_IO=N      the N-th I/O point fails
 *   MTPLX_FAULT_PHASE=P   count from the first fault_phase(P) call instead of from the start; each
 *                         later fault_phase(P) restarts the count with the target N moved on by 1
 *                         (one server process then tries N, N+1, ... on successive requests)
 *   MTPLX_FAULT_REPORT=1  at exit print "mtplx-fault: alloc=A io=I fired=F" on stderr (points
 *                         counted in the last phase, faults injected in all); each injected fault
 *                         also prints "mtplx-fault: fired alloc|io #N" when it happens.
 * tests/fault/sweep.py runs scenarios over every N (docs/reliability.md). */
#ifndef MTPLX_BASE_FAULT_H
#define MTPLX_BASE_FAULT_H

#ifdef MTPLX_FAULT
/* 1 when this allocation / I/O point must fail (counts it either way). */
int fault_alloc_point(void);
int fault_io_point(const char *what);
/* Mark the start of phase `name` (see above). */
void fault_phase(const char *name);
#else
static inline int fault_alloc_point(void) { return 0; }
static inline int fault_io_point(const char *what) { (void)what; return 0; }
static inline void fault_phase(const char *name) { (void)name; }
#endif

#endif
