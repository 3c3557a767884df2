/* matmul.c — kern_matmul: picks the kernel path for the weight format and the CPU (cpu.h), splits
 * the output rows over the thread pool, and walks large T in blocks of MM_TMAX rows.
 *
 * Threads split output rows only: every output element is computed start to finish by one thread
 * with the path's fixed operation sequence, so results are identical for any thread count and any T
 * (row invariance, DESIGN.md §3). Small matrices run on the caller alone (a dispatch costs a few
 * microseconds). */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "matmul_q.h"
#include "quant.h"
#include "threadpool.h"

typedef struct {
    mm_rows_fn fn;       /* dense / fp32-activation path, or NULL */
    mm_qrows_fn qfn;     /* int8-activation path for quantized weights, or NULL */
    const qact *qa;      /* qfn's quantized activations */
    float *y;
    int ldy;
    const float *x;
    int ldx;
    int T;
    const kern_weight *w;
    int rows_per_task;   /* a multiple of 16 (of 64 on the AMX path) */
    const void *xpack;   /* AMX path: activations packed by mm_amx_pack_x, else NULL */
} mm_job;

static void mm_task(void *ctx, int i, int n) {
    (void)n;
    const mm_job *j = ctx;
    int r0 = i * j->rows_per_task;
    int r1 = r0 + j->rows_per_task;
    if (r1 > j->w->rows) r1 = j->w->rows;
    if (r0 >= r1) return;
    if (j->qfn) j->qfn(j->y, j->ldy, j->qa, j->w, r0, r1);
    else if (j->xpack) mm_rows_bf16_amx(j->y, j->ldy, j->x, j->ldx, j->T, j->w, r0, r1, j->xpack);
    else j->fn(j->y, j->ldy, j->x, j->ldx, j->T, j->w, r0, r1);
}

static mm_rows_fn pick_dense_fn(void) {
    kern_isa isa = cpu_isa();
    if (isa >= KERN_ISA_AVX512) return mm_rows_dense_avx512;
    if (isa == KERN_ISA_AVX2) return mm_rows_dense_avx2;
    return mm_rows_dense_portable;
}

/* Rough single-core cost of a call in ns: streaming the weights (~30 GB/s) plus the FMAs
 * (~100 GFLOP/s). Calls above ~20 µs are worth splitting over the pool. */
static double mm_cost_ns(const kern_weight *w, int T) {
    double elems = (double)w->rows * w->cols;
    double bytes = w->dtype == DT_U32 ? elems * w->bits / 8 : elems * dtype_size(w->dtype);
    return bytes / 30.0 + 2.0 * elems * T / 100.0;
}

/* Run rows [0, rows) of one T-block, split over the pool when worth it. */
static void mm_run(mm_job *j) {
    tpool *pool = tpool_global();
    int threads = tpool_threads(pool);
    const kern_weight *w = j->w;
    if (threads == 1 || w->rows < 32 || mm_cost_ns(w, j->T) < 20000.0) {
        j->rows_per_task = w->rows;
        mm_task(j, 0, 1);
        return;
    }
    /* ~4 tasks per thread so a core taken by another process does not stall the call */
    int n_tasks = threads * 4;
    int rpt = (w->rows + n_tasks - 1) / n_tasks;
    rpt = j->xpack ? (rpt + 63) & ~63 : (rpt + 15) & ~15; /* AMX: whole 64-row groups */
    n_tasks = (w->rows + rpt - 1) / rpt;
    j->rows_per_task = rpt;
    tpool_run(pool, n_tasks, mm_task, j);
}

/* ---- quantized weights ---- */

/* Activation mode for quantized weights: int8 (default) or f32 ($MTPLX_QACT=f32), read once. */
static int g_qact_f32 = -1;
static int qact_f32(void) {
    if (g_qact_f32 < 0) {
        const char *e = getenv("MTPLX_QACT");
        g_qact_f32 = e && !strcmp(e, "f32");
    }
    return g_qact_f32;
}

void kern_matmul_set_qact_f32(int on) { g_qact_f32 = on ? 1 : 0; }

/* Grow-only scratch of the calling thread for quantized activations: allocates only when a call
 * needs more than any earlier call on this thread (the first decode/verify/prefill of a shape). */
static _Thread_local unsigned char *tl_scratch;
static _Thread_local size_t tl_scratch_size;
/* A thread-specific key whose destructor frees the scratch when a thread that used it exits
 * (server workers come and go). */
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static int g_scratch_key_ok;
static void scratch_key_make(void) { g_scratch_key_ok = pthread_key_create(&g_scratch_key, free) == 0; }

static void *scratch_get(size_t bytes) {
    if (bytes <= tl_scratch_size) return tl_scratch;
    pthread_once(&g_scratch_once, scratch_key_make);
    void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) return NULL;
    free(tl_scratch);
    tl_scratch = p;
    tl_scratch_size = bytes;
    if (g_scratch_key_ok) pthread_setspecific(g_scratch_key, p);
    return p;
}

void kern_matmul_release_scratch(void) {
    free(tl_scratch);
    tl_scratch = NULL;
    tl_scratch_size = 0;
    if (g_scratch_key_ok) pthread_setspecific(g_scratch_key, NULL);
}

/* Smallest T for which repacked quantized weights take the AMX kernel ($MTPLX_QAMX_MIN, default 6;
 * below it the VNNI kernel is as fast). Read once. */
static int g_qamx_min = -1;
static int qamx_min_rows(void) {
    if (g_qamx_min < 0) {
        const char *e = getenv("MTPLX_QAMX_MIN");
        int v = e ? atoi(e) : 6;
        g_qamx_min = v < 1 ? 1 : v;
    }
    return g_qamx_min;
}

static void matmul_quant(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w) {
    const int K = w->cols, gs = w->group_size;
    if (!quant_format_ok(w->bits, gs) || K % gs) {
        kern_matmul_ref(y, ldy, x, ldx, T, w);
        return;
    }
    kern_isa isa = cpu_isa();
    int vnni = cpu_get_features()->avx512vnni;
    mm_qrows_fn qfn = mm_qrows_portable;
    void (*fill)(const float *, int, qact *) = qact_fill_portable;
    qa_layout layout = QA_NATURAL;
    if (w->packed && isa >= KERN_ISA_AVX512 && vnni) {
        /* AMX for T >= qamx_min_rows(): same bits as the VNNI kernel, flat cost in T up to 16 */
        qfn = isa >= KERN_ISA_AMX && T >= qamx_min_rows() ? mm_qrows_amx : mm_qrows_packed;
        fill = qact_fill_avx512, layout = QA_NATURAL;
    } else if (isa >= KERN_ISA_AVX512 && vnni && K % 64 == 0) {
        qfn = mm_qrows_avx512, fill = qact_fill_avx512;
        layout = w->bits == 4 ? QA_Q4_64 : QA_NATURAL;
    } else if (isa >= KERN_ISA_AVX2) {
        qfn = mm_qrows_avx2, fill = qact_fill_avx2;
        layout = w->bits == 4 ? QA_Q4_32 : QA_NATURAL;
    }
    int tb = T < MM_TMAX ? T : MM_TMAX, G = K / gs;
    size_t a_bytes = ((size_t)tb * K + 63) & ~(size_t)63, g_bytes = ((size_t)tb * G * 4 + 63) & ~(size_t)63;
    size_t dv_bytes = (size_t)tb * (K / 64) * 16 * 4;
    unsigned char *buf = qact_f32() ? NULL : scratch_get(a_bytes + 2 * g_bytes + dv_bytes);
    for (int t0 = 0; t0 < T; t0 += MM_TMAX) {
        int tt = T - t0 < MM_TMAX ? T - t0 : MM_TMAX;
        mm_job j = {NULL, NULL, NULL, y + (size_t)t0 * ldy, ldy, x + (size_t)t0 * ldx, ldx, tt, w, 0, NULL};
        qact qa;
        if (!buf) {
            j.fn = mm_rows_qf32_portable; /* $MTPLX_QACT=f32, or no memory for the scratch */
        } else {
            qa = (qact){tt, K, G, gs, layout, (int8_t *)buf, (float *)(buf + a_bytes),
                        (float *)(buf + a_bytes + g_bytes), (float *)(buf + a_bytes + 2 * g_bytes)};
            fill(j.x, ldx, &qa);
            j.qfn = qfn;
            j.qa = &qa;
        }
        mm_run(&j);
    }
}

void kern_matmul(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w) {
    assert(ldx >= w->cols && ldy >= w->rows && T >= 0);
    if (w->dtype == DT_U32) {
        matmul_quant(y, ldy, x, ldx, T, w);
        return;
    }
    if (w->dtype != DT_F32 && w->dtype != DT_F16 && w->dtype != DT_BF16) {
        kern_matmul_ref(y, ldy, x, ldx, T, w);
        return;
    }
    mm_rows_fn fn = pick_dense_fn();
    void *xpack = NULL;
    if (w->amx && cpu_isa() >= KERN_ISA_AMX)
        xpack = scratch_get(mm_amx_pack_bytes(T < MM_TMAX ? T : MM_TMAX, w->cols));
    for (int t0 = 0; t0 < T; t0 += MM_TMAX) {
        int tt = T - t0 < MM_TMAX ? T - t0 : MM_TMAX;
        mm_job j = {fn, NULL, NULL, y + (size_t)t0 * ldy, ldy, x + (size_t)t0 * ldx, ldx, tt, w, 0, xpack};
        if (xpack) mm_amx_pack_x(xpack, j.x, ldx, tt, w->cols);
        mm_run(&j);
    }
}
