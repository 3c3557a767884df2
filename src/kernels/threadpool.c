/* threadpool.c — persistent workers; spin-then-futex wake-up; tasks claimed by CAS on one ticket.
 *
 * The ticket packs (generation, n_tasks, next index) into 64 bits. A run stores fn/ctx, then
 * publishes a fresh ticket and bumps the futex word. A thread claims task i by CAS'ing the ticket
 * from (g, n, i) to (g, n, i+1); it read fn/ctx before that CAS, and a successful CAS proves run g
 * was still unfinished, so fn/ctx could not yet have been overwritten by a later run. Hence a worker
 * that wakes late (or never, on a loaded machine) costs nothing: the caller runs every task it can
 * claim itself and waits only for tasks that were claimed and are still running. */
#include "threadpool.h"

#include "knobs.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../base/mem.h"

#define SPIN_ITERS 20000 /* pause loops before a worker sleeps: ~50-100 µs on Intel, ~370 µs on Zen 5 */
#define TK_IDX_BITS 20
#define TK_N_BITS 20
#define TK_MASK ((1ull << 20) - 1)
#define TK_MAX_TASKS ((1 << 20) - 1)

struct tpool {
    int n_threads;                /* caller included */
    pthread_t *threads;           /* [n_threads - 1] workers */
    pthread_mutex_t run_lock;     /* serializes tpool_run callers */
    _Atomic(tpool_fn) fn;         /* the current run's job */
    _Atomic(void *) ctx;
    _Atomic uint64_t ticket;      /* gen << 40 | n_tasks << 20 | next index */
    _Atomic int pending;          /* tasks of the current run not yet finished */
    _Atomic uint32_t wake;        /* futex word: bumped once per run */
    _Atomic int sleepers;         /* workers inside futex_wait (or about to be) */
    _Atomic int wake_sent;        /* a futex wake was issued and no worker has returned from its wait yet */
    _Atomic int stop;
    uint64_t gen;                 /* caller side: generation of the last run */
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
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* 1 while this thread runs a task: a tpool_run from inside a task (a kernel that splits its rows,
 * called by a task of another split) runs its tasks inline instead of waiting for the run lock that
 * its own run holds. */
static _Thread_local int tl_in_task;

/* Claim and run tasks while the ticket has unclaimed ones. */
static void run_tasks(tpool *p) {
    for (;;) {
        uint64_t v = atomic_load_explicit(&p->ticket, memory_order_acquire);
        int idx = (int)(v & TK_MASK), n = (int)((v >> TK_IDX_BITS) & TK_MASK);
        if (idx >= n) return;
        tpool_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        if (!atomic_compare_exchange_weak_explicit(&p->ticket, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
            continue;
        tl_in_task = 1;
        fn(ctx, idx, n);
        tl_in_task = 0;
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    tpool *p = arg;
    uint32_t seen = 0; /* wake's value at creation: a run published before this thread started is still new */
    for (;;) {
        uint32_t w;
        int spins = 0;
        while ((w = atomic_load_explicit(&p->wake, memory_order_acquire)) == seen) {
            if (++spins < SPIN_ITERS) {
                cpu_relax();
                continue;
            }
            atomic_fetch_add(&p->sleepers, 1);
            futex_wait(&p->wake, seen); /* returns at once if wake already moved */
            atomic_fetch_sub(&p->sleepers, 1);
            atomic_store(&p->wake_sent, 0);
            spins = 0;
        }
        seen = w;
        if (atomic_load(&p->stop)) break;
        run_tasks(p);
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
    atomic_fetch_add(&p->wake, 1);
    futex_wake_all(&p->wake);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->run_lock);
    free(p->threads);
    free(p);
}

int tpool_threads(const tpool *p) { return p ? p->n_threads : 1; }

void tpool_run(tpool *p, int n_tasks, tpool_fn fn, void *ctx) {
    if (n_tasks <= 0) return;
    if (!p || p->n_threads == 1 || n_tasks == 1 || n_tasks > TK_MAX_TASKS || tl_in_task) {
        for (int i = 0; i < n_tasks; i++) fn(ctx, i, n_tasks);
        return;
    }
    pthread_mutex_lock(&p->run_lock);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->pending, n_tasks, memory_order_relaxed);
    p->gen = (p->gen + 1) & ((1ull << 24) - 1);
    atomic_store_explicit(&p->ticket, p->gen << 40 | (uint64_t)n_tasks << TK_IDX_BITS, memory_order_release);
    atomic_fetch_add(&p->wake, 1);                 /* seq_cst: pairs with the sleepers check */
    /* one wake per sleep: while a woken worker is still on its way back, later runs do not pay the
     * syscall again (the caller runs whatever tasks the worker misses; tpool_free wakes always) */
    if (atomic_load(&p->sleepers) > 0 && !atomic_exchange(&p->wake_sent, 1)) futex_wake_all(&p->wake);
    run_tasks(p);
    /* wait for tasks other threads claimed; yield now and then in case one was preempted */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0;) {
        cpu_relax();
        if (++spins % 4096 == 0) sched_yield();
    }
    pthread_mutex_unlock(&p->run_lock);
}

static tpool *g_pool;
static pthread_once_t g_pool_once = PTHREAD_ONCE_INIT;

static void global_init(void) {
    int n = kern_knobs_get()->threads; /* $MTPLX_THREADS, read by the CPU backend */
    if (n < 1 || n > 256) n = 0;
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
