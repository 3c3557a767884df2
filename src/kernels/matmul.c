/* matmul.c — kern_matmul: picks the kernel path for the weight format and the CPU (cpu.h), splits
 * the output rows over the thread pool, and walks large T in blocks of MM_TMAX rows.
 *
 * Threads split output rows only: every output element is computed start to finish by one thread
 * with the path's fixed operation sequence, so results are identical for any thread count and any T
 * (row invariance, DESIGN.md §3). Small matrices run on the caller alone (a dispatch costs a few
 * microseconds). */
#include <assert.h>

#include "cpu.h"
#include "matmul_internal.h"
#include "threadpool.h"

typedef struct {
    mm_rows_fn fn;
    float *y;
    int ldy;
    const float *x;
    int ldx;
    int T;
    const kern_weight *w;
    int rows_per_task;   /* a multiple of 16 */
} mm_job;

static void mm_task(void *ctx, int i, int n) {
    (void)n;
    const mm_job *j = ctx;
    int r0 = i * j->rows_per_task;
    int r1 = r0 + j->rows_per_task;
    if (r1 > j->w->rows) r1 = j->w->rows;
    if (r0 < r1) j->fn(j->y, j->ldy, j->x, j->ldx, j->T, j->w, r0, r1);
}

static mm_rows_fn pick_rows_fn(const kern_weight *w) {
    kern_isa isa = cpu_isa();
    switch (w->dtype) {
    case DT_F32:
    case DT_F16:
    case DT_BF16:
        if (isa == KERN_ISA_AVX512) return mm_rows_dense_avx512;
        if (isa == KERN_ISA_AVX2) return mm_rows_dense_avx2;
        return mm_rows_dense_portable;
    default:
        return NULL;
    }
}

/* Rough single-core cost of a call in ns: streaming the weights (~30 GB/s) plus the FMAs
 * (~100 GFLOP/s). Calls above ~20 µs are worth splitting over the pool. */
static double mm_cost_ns(const kern_weight *w, int T) {
    double elems = (double)w->rows * w->cols;
    double bytes = w->dtype == DT_U32 ? elems * w->bits / 8 : elems * dtype_size(w->dtype);
    return bytes / 30.0 + 2.0 * elems * T / 100.0;
}

void kern_matmul(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w) {
    assert(ldx >= w->cols && ldy >= w->rows && T >= 0);
    mm_rows_fn fn = pick_rows_fn(w);
    if (!fn) {
        kern_matmul_ref(y, ldy, x, ldx, T, w);
        return;
    }
    tpool *pool = tpool_global();
    int threads = tpool_threads(pool);
    for (int t0 = 0; t0 < T; t0 += MM_TMAX) {
        int tt = T - t0 < MM_TMAX ? T - t0 : MM_TMAX;
        mm_job j = {fn, y + (size_t)t0 * ldy, ldy, x + (size_t)t0 * ldx, ldx, tt, w, 0};
        if (threads == 1 || w->rows < 32 || mm_cost_ns(w, tt) < 20000.0) {
            fn(j.y, ldy, j.x, ldx, tt, w, 0, w->rows);
            continue;
        }
        /* ~4 tasks per thread so a core taken by another process does not stall the call */
        int n_tasks = threads * 4;
        int rpt = (w->rows + n_tasks - 1) / n_tasks;
        rpt = (rpt + 15) & ~15;
        n_tasks = (w->rows + rpt - 1) / rpt;
        j.rows_per_task = rpt;
        tpool_run(pool, n_tasks, mm_task, &j);
    }
}
