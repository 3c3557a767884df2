/* threadpool.c — persistent workers; spin-then-futex wake-up; tasks claimed with an atomic counter.
 *
 * One run is a "generation": the caller publishes fn/ctx/n_tasks, resets the task counter, bumps
 * `gen` and wakes sleepers. Every worker (busy or not) acknowledges each generation by decrementing
 * `unacked` after it has stopped claiming tasks, and the caller returns only when all tasks are done
 * and all workers have acknowledged; so no worker can read a later generation's fields with an
 * earlier generation's view. */
#include "threadpool.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../base/mem.h"

#define SPIN_ITERS 20000 /* ~50-100 µs of pause loops before a worker sleeps */

struct tpool {
    int n_threads;                /* caller included */
    pthread_t *threads;           /* [n_threads - 1] workers */
    pthread_mutex_t run_lock;     /* serializes tpool_run callers */
    /* the current generation's job (written by the caller before gen is bumped) */
    tpool_fn fn;
    void *ctx;
    int n_tasks;
    _Atomic int next_task;        /* next unclaimed task index */
    _Atomic int pending;          /* tasks not yet finished */
    _Atomic int unacked;          /* workers that have not finished with this generation */
    _Atomic uint32_t gen;         /* futex word: bumped once per run */
    _Atomic int sleepers;         /* workers inside futex_wait (or about to be) */
    _Atomic int stop;
};

static void futex_wait(_Atomic uint32_t *addr, uint32_t val) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr) {
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Claim and run tasks of the current generation until none are left. */
static void run_tasks(tpool *p) {
    int n = p->n_tasks;
    for (;;) {
        int i = atomic_fetch_add(&p->next_task, 1);
        if (i >= n) break;
        p->fn(p->ctx, i, n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    tpool *p = arg;
    uint32_t seen = 0; /* gen's value at creation: a run published before this thread started is still seen as new */
    for (;;) {
        uint32_t g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&p->sleepers, 1);
            futex_wait(&p->gen, seen);     /* returns at once if gen already moved */
            atomic_fetch_sub(&p->sleepers, 1);
            spins = 0;
        }
        seen = g;
        if (atomic_load(&p->stop)) break;
        run_tasks(p);
        atomic_fetch_sub_explicit(&p->unacked, 1, memory_order_release);
    }
    return NULL;
}

int tpool_new(int n_threads, tpool **out, mtplx_err *err) {
    if (n_threads < 1 || n_threads > 1024)
        return err_set(err, MTPLX_EINVAL, "thread pool: %d threads is out of range 1..1024", n_threads);
    tpool *p = mem_zalloc(1, sizeof *p, "thread pool", err);
    if (!p) return MTPLX_ENOMEM;
    p->n_threads = n_threads;
    pthread_mutex_init(&p->run_lock, NULL);
    if (n_threads > 1) {
        p->threads = mem_zalloc((size_t)n_threads - 1, sizeof(pthread_t), "thread pool", err);
        if (!p->threads) {
            free(p);
            return MTPLX_ENOMEM;
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
            p->n_threads = i + 1; /* keep the workers that started; tpool_free joins them */
            tpool_free(p);
            return err_set(err, MTPLX_ENOMEM, "thread pool: cannot create worker thread %d", i);
        }
    }
    *out = p;
    return 0;
}

void tpool_free(tpool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake_all(&p->gen);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->run_lock);
    free(p->threads);
    free(p);
}

int tpool_threads(const tpool *p) { return p ? p->n_threads : 1; }

void tpool_run(tpool *p, int n_tasks, tpool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, n_tasks);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    p->fn = fn;
    p->ctx = ctx;
    p->n_tasks = n_tasks;
    atomic_store(&p->next_task, 0);
    atomic_store(&p->pending, n_tasks);
    atomic_store(&p->unacked, p->n_threads - 1);
    atomic_fetch_add(&p->gen, 1);                 /* seq_cst: pairs with the sleepers check */
    if (atomic_load(&p->sleepers) > 0) futex_wake_all(&p->gen);
    run_tasks(p);
    /* wait for the workers; yield now and then in case one was preempted (a shared machine) */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0 ||
                        atomic_load_explicit(&p->unacked, memory_order_acquire) > 0;) {
        cpu_relax();
        if (++spins % 4096 == 0) sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}

static tpool *g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static void global_init(void) {
    int n = 0;
    const char *env = getenv("MTPLX_THREADS");
    if (env && *env) {
        n = atoi(env);
        if (n < 1 || n > 256) n = 0;
    }
    if (!n) {
        cpu_set_t set;
        CPU_ZERO(&set);
        n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1) n = 1;
        if (n > 256) n = 256;
    }
    if (tpool_new(n, &g_pool, NULL) != 0) g_pool = NULL;
}

tpool *tpool_global(void) {
    pthread_once(&g_pool_once, global_init);
    return g_pool;
}
