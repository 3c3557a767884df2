/* fault.c — see fault.h. Everything here exists only in the fault build (-DMTPLX_FAULT). */
#include "fault.h"

#ifdef MTPLX_FAULT
/* the trace names an allocation's caller's caller: sound here, the fault build keeps frame pointers */
#pragma GCC diagnostic ignored "-Wframe-address"
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

/* One kind of point (allocations or I/O): how many were counted and which one fails. */
typedef struct {
    atomic_long count;   /* points seen since the phase began */
    atomic_long target;  /* the point that fails (1-based); 0 = none */
} fault_counter;

static fault_counter g_alloc, g_io;
static atomic_int g_fired;        /* faults injected so far */
static atomic_int g_armed = -1;   /* -1 = not read yet, 0 = waiting for the phase, 1 = counting */
static const char *g_phase;       /* MTPLX_FAULT_PHASE or NULL */
static int g_report;
static int g_trace_fd = -1;       /* MTPLX_FAULT_TRACE file: one "kind n caller" line per point */
static long g_step = 1;           /* MTPLX_FAULT_STEP: how far the target moves per phase entry */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static long env_long(const char *name) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : 0;
}

static void report_at_exit(void) {
    /* dprintf: stdio may be in any state at exit; one write per line */
    dprintf(2, "mtplx-fault: alloc=%ld io=%ld fired=%d\n", atomic_load(&g_alloc.count), atomic_load(&g_io.count),
            atomic_load(&g_fired));
}

static void fault_init(void) {
    atomic_store(&g_alloc.target, env_long("MTPLX_FAULT_ALLOC"));
    atomic_store(&g_io.target, env_long("MTPLX_FAULT_IO"));
    g_phase = getenv("MTPLX_FAULT_PHASE");
    if (g_phase && !*g_phase) g_phase = NULL;
    g_report = env_long("MTPLX_FAULT_REPORT") != 0;
    if (g_report) atexit(report_at_exit);
    const char *tr = getenv("MTPLX_FAULT_TRACE");
    if (tr && *tr) g_trace_fd = open(tr, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    g_step = env_long("MTPLX_FAULT_STEP");
    if (g_step < 1) g_step = 1;
    atomic_store(&g_armed, g_phase ? 0 : 1);
}

/* Count one point of kind c made from code address `caller` (called from `caller2`); 1 when it is the one that fails. */
static int point(fault_counter *c, const char *kind, const char *what, const void *caller, const void *caller2) {
    pthread_once(&g_once, fault_init);
    if (atomic_load(&g_armed) != 1) return 0;
    long n = atomic_fetch_add(&c->count, 1) + 1;
    if (g_trace_fd >= 0) dprintf(g_trace_fd, "%s %ld %p %p\n", kind, n, caller, caller2);
    if (n != atomic_load(&c->target)) return 0;
    atomic_fetch_add(&g_fired, 1);
    if (g_report) dprintf(2, "mtplx-fault: fired %s #%ld%s%s\n", kind, n, what ? " " : "", what ? what : "");
    return 1;
}

int fault_alloc_point(void) { return point(&g_alloc, "alloc", NULL, __builtin_return_address(0), NULL); }

int fault_io_point(const char *what) {
    if (point(&g_io, "io", what, __builtin_return_address(0), __builtin_return_address(1))) {
        errno = EIO;
        return 1;
    }
    return 0;
}

void fault_phase(const char *name) {
    pthread_once(&g_once, fault_init);
    if (!g_phase || strcmp(name, g_phase)) return;
    if (atomic_load(&g_armed) == 1) { /* a later entry: the next point along */
        if (atomic_load(&g_alloc.target) > 0) atomic_fetch_add(&g_alloc.target, g_step);
        if (atomic_load(&g_io.target) > 0) atomic_fetch_add(&g_io.target, g_step);
    }
    atomic_store(&g_alloc.count, 0);
    atomic_store(&g_io.count, 0);
    atomic_store(&g_armed, 1);
}

/* ---- the wrapped allocators (the link maps malloc to __wrap_malloc, __real_malloc to libc's) ---- */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **out, size_t align, size_t n);

/* an allocation point made by the code at address ra */
static int alloc_point_at(const void *ra, const void *ra2) { return point(&g_alloc, "alloc", NULL, ra, ra2); }

/* the wrappers' caller and its caller, for the trace (the fault build keeps frame pointers) */
#define CALLER __builtin_return_address(0), __builtin_return_address(1)

void *__wrap_malloc(size_t n) {
    if (alloc_point_at(CALLER)) return errno = ENOMEM, NULL;
    return __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
    if (alloc_point_at(CALLER)) return errno = ENOMEM, NULL;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
    if (alloc_point_at(CALLER)) return errno = ENOMEM, NULL;
    return __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
    if (alloc_point_at(CALLER)) return errno = ENOMEM, NULL;
    return __real_aligned_alloc(align, n);
}

int __wrap_posix_memalign(void **out, size_t align, size_t n) {
    if (alloc_point_at(CALLER)) return ENOMEM;
    return __real_posix_memalign(out, align, n);
}

/* strndup counted as one point made by `ra` (called from ra2) */
static char *dup_at(const char *s, size_t n, const void *ra, const void *ra2) {
    size_t len = strnlen(s, n);
    if (alloc_point_at(ra, ra2)) return errno = ENOMEM, NULL;
    char *d = __real_malloc(len + 1);
    if (!d) return NULL;
    memcpy(d, s, len);
    d[len] = 0;
    return d;
}

char *__wrap_strndup(const char *s, size_t n) { return dup_at(s, n, CALLER); }
char *__wrap_strdup(const char *s) { return dup_at(s, (size_t)-1, CALLER); }
#endif
