/* threadpool.h — a persistent pool of worker threads for splitting one kernel call across cores.
 *
 * Threads are created once. tpool_run hands out task indices 0..n_tasks-1 to the workers and to the
 * calling thread, and returns when all are done. Idle workers spin briefly (so back-to-back kernel
 * calls of one forward pay no wake-up) and then sleep on a futex. Which thread runs which task is
 * unspecified, so a task's result must not depend on it (the matmul gives each task whole output
 * rows; that keeps results bit-identical for any thread count). */
#ifndef MTPLX_KERNELS_THREADPOOL_H
#define MTPLX_KERNELS_THREADPOOL_H

#include "../base/err.h"

typedef struct tpool tpool;

/* One task: index `task` of `n_tasks`. */
typedef void (*tpool_fn)(void *ctx, int task, int n_tasks);

/* A pool running tasks on n_threads threads in total, the caller's included (n_threads - 1 workers
 * are created; 1 means everything runs on the caller). Returns 0 and *out, or an error. Free with
 * tpool_free. */
int tpool_new(int n_threads, tpool **out, mtplx_err *err);
void tpool_free(tpool *p);

/* Threads that run tasks, the caller included. */
int tpool_threads(const tpool *p);

/* Run fn(ctx, i, n_tasks) for every i < n_tasks and wait for all. Calls are serialized per pool
 * (a mutex); a call from inside a task (of any pool) runs its tasks inline on that thread, in index
 * order. n_tasks <= 0 does nothing. */
void tpool_run(tpool *p, int n_tasks, tpool_fn fn, void *ctx);

/* The process-wide pool the kernels use, created on first use (the CPU backend creates it at load)
 * with the threads knob (knobs.h, from $MTPLX_THREADS) if set (1..256), else the CPUs this process
 * may run on. Returns NULL only when no thread could be created
 * (kernels then run on the caller alone). */
tpool *tpool_global(void);

#endif
