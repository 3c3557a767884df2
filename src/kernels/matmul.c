/* matmul.c — kern_matmul: picks the kernel path for the weight format and the CPU (cpu.h), splits
 * the output rows over the thread pool, and walks large T in blocks of MM_TMAX rows.
 *
 * Threads split output rows only: every output element is computed start to finish by one thread
 * with the path's fixed operation sequence, so results are identical for any thread count and any T
 * (row invariance, DESIGN.md §3). Small matrices run on the caller alone (a dispatch costs a few
 * microseconds). */
#include <assert.h>
#include <pthread.h>
#include <stdio.h>
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
    const void *xpack;   /* packed-activation paths (xpath): activations packed by its pack, else NULL */
    const struct xpath *xp; /* that path, or NULL */
} mm_job;

/* A dense path that reads activations packed once per call (shared by every task of the call). */
typedef struct xpath {
    void (*rows)(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1,
                 const void *xpack);
    size_t (*bytes)(int T, int K);                                 /* scratch for T rows of K inputs */
    void (*pack)(void *buf, const float *x, int ldx, int T, int K); /* fill it */
    int row_align;                                                 /* r0 of every task: a multiple of it */
} xpath;

static const xpath g_xpath_amx = {mm_rows_bf16_amx, mm_amx_pack_bytes, mm_amx_pack_x, 64};
static const xpath g_xpath_bf16dp = {mm_rows_bf16dp, mm_bf16dp_pack_bytes, mm_bf16dp_pack_x, 16};
static const xpath g_xpath_bf16x_avx2 = {mm_rows_bf16x_avx2, mm_bf16x_pack_bytes, mm_bf16x_pack_x, 16};
static const xpath g_xpath_bf16x_avx512 = {mm_rows_bf16x_avx512, mm_bf16x_avx512_pack_bytes, mm_bf16x_avx512_pack_x,
                                           16};

/* Whether bf16 weights on the AVX-512 path take the AVX512-BF16 dot-product kernel: the bf16dp knob, or
 * by vendor when it is -1 (auto). On Zen 5 that kernel was the faster one (bench/zen.md); on an Intel
 * core without AMX a 512-bit vdpbf16ps issues at half an FMA's rate, and the exact hi / lo product takes
 * two, so the FMA kernel (matmul_avx512.c, with the same prefetch) decodes level and verifies and
 * prefills ~1.5-2x faster there (bench/zen.md "Session 40"). A property of the machine, never of the
 * row count: every call on a machine takes the same kernel, so the same bits. */
static int bf16dp_on(void) {
    const int k = kern_knobs_get()->bf16dp;
    return cpu_get_features()->avx512bf16 && (k == 1 || (k < 0 && cpu_get_features()->amd));
}

/* The packed-activation path of dense weight w on this CPU, or NULL: AMX tiles for a weight with
 * its AMX copy; on the AVX-512 path (no AMX, or $MTPLX_KERNEL=avx512) AVX512-BF16 dot products for
 * a bf16 weight where the CPU has them and bf16dp_on says so, else the FMA kernel on even/odd packed
 * activations (unless the bf16x knob is off: then the widening FMA kernel, no packing); the AVX2 bf16
 * kernel (even/odd packed activations) for every bf16 weight on the AVX2 path. */
static const xpath *pick_xpath(const kern_weight *w) {
    kern_isa isa = cpu_isa();
    if (w->amx && isa == KERN_ISA_AMX) return &g_xpath_amx;
    if (w->dtype == DT_BF16 && isa == KERN_ISA_AVX512 && bf16dp_on()) return &g_xpath_bf16dp;
    if (w->dtype == DT_BF16 && isa == KERN_ISA_AVX512 && kern_knobs_get()->bf16x) return &g_xpath_bf16x_avx512;
    if (w->dtype == DT_BF16 && isa == KERN_ISA_AVX2) return &g_xpath_bf16x_avx2;
    return NULL;
}

const char *kern_matmul_bf16_kernel(void) {
    switch (cpu_isa()) {
    case KERN_ISA_AMX: return "amx";
    case KERN_ISA_AVX512: return bf16dp_on() ? "vdpbf16ps" : kern_knobs_get()->bf16x ? "fma-evenodd" : "fma-widen";
    case KERN_ISA_AVX2: return "avx2-evenodd";
    case KERN_ISA_PORTABLE: return "portable";
    default: return "neon";
    }
}

/* Output rows [r0, r1) of one job, by its path's row function. */
static void mm_job_rows(const mm_job *j, int r0, int r1) {
    if (j->qfn) j->qfn(j->y, j->ldy, j->qa, j->w, r0, r1);
    else if (j->xpack) j->xp->rows(j->y, j->ldy, j->x, j->ldx, j->T, j->w, r0, r1, j->xpack);
    else j->fn(j->y, j->ldy, j->x, j->ldx, j->T, j->w, r0, r1);
}

static void mm_task(void *ctx, int i, int n) {
    (void)n;
    const mm_job *j = ctx;
    int r0 = i * j->rows_per_task;
    int r1 = r0 + j->rows_per_task;
    if (r1 > j->w->rows) r1 = j->w->rows;
    if (r0 >= r1) return;
    mm_job_rows(j, r0, r1);
}

static mm_rows_fn pick_dense_fn(void) {
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) return mm_rows_dense_avx512;
    if (isa == KERN_ISA_AVX2) return mm_rows_dense_avx2;
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) return mm_rows_dense_neon;
#endif
    (void)isa;
    return mm_rows_dense_portable;
}


/* Rough single-core cost of a call in ns: streaming the weights (~30 GB/s) plus the FMAs
 * (~100 GFLOP/s). Calls above ~20 µs are worth splitting over the pool. */
static double mm_cost_ns(const kern_weight *w, int T) {
    double elems = (double)w->rows * w->cols;
    double bytes = w->dtype == DT_U32 ? elems * w->bits / 8 : elems * dtype_size(w->dtype);
    return bytes / 30.0 + 2.0 * elems * T / 100.0;
}

/* Whole-call estimate above which kern_matmul_n splits its weights over the pool: a dispatch
 * costs about 0.5 µs while the workers spin, and the estimate runs several times over the time a
 * cache-resident matrix really takes. */
#define MM_N_SPLIT_NS 8000.0

typedef struct {
    int job, r0, r1; /* rows [r0, r1) of jobs[job] */
} mm_piece;

typedef struct {
    const mm_job *jobs;
    const mm_piece *pieces;
} mm_multi;

static void mm_multi_task(void *ctx, int i, int n) {
    (void)n;
    const mm_multi *m = ctx;
    const mm_piece *p = &m->pieces[i];
    mm_job_rows(&m->jobs[p->job], p->r0, p->r1);
}

#define MM_N_PIECES 256

/* Rows a piece of job j must be a multiple of: 16 (the packed layouts' row blocks), 64 on AMX. */
static int mm_row_align(const mm_job *j) { return j->xp && j->xp->row_align > 16 ? j->xp->row_align : 16; }

/* Cuts the rows of jobs[0..n) (cost[k] ns for the whole of weight k) into pieces that `threads`
 * threads claim in order, into out[] (MM_N_PIECES); returns their count. Guided (knob mm_guided):
 * each piece is about half of one thread's share of the work still uncut, at least a sixteenth of a
 * thread's share of the call (and a 128th of the call), so the pieces shrink toward the end and the
 * threads finish within one small piece of each other (with ~4 equal pieces a thread, the
 * last-claimed piece left the other thread idle for up to an eighth of a 2-thread call: bench/zen.md
 * "Session 14"). Otherwise each
 * weight gets ~4 equal pieces a thread in proportion to its cost. Pieces are aligned to the job's
 * row blocks and never span two weights, so a row's arithmetic is the same for any split. */
static int mm_cut_pieces(const mm_job *jobs, const double *cost, int n, int threads, mm_piece *out) {
    double total = 0;
    for (int k = 0; k < n; k++) total += cost[k];
    const int guided = kern_knobs_get()->mm_guided;
    /* pieces no smaller than a sixteenth of a thread's share, and no more than ~128 in all (many threads) */
    const double least = total / threads / 16 > total / 128 ? total / threads / 16 : total / 128;
    double left = total;
    int np = 0;
    for (int k = 0; k < n; k++) {
        int rows = jobs[k].w->rows, al = mm_row_align(&jobs[k]);
        double per_row = cost[k] / rows;
        int want = (int)(cost[k] / total * threads * 4 + 0.5), rpt;
        if (want < 1 || rows < 32) want = 1;
        rpt = ((rows + want - 1) / want + al - 1) / al * al;
        for (int r0 = 0; r0 < rows;) {
            if (guided) {
                double ns = left / (2.0 * threads);
                rpt = (int)((ns < least ? least : ns) / per_row);
                rpt = (rpt + al - 1) / al * al;
                if (rpt < al) rpt = al;
            }
            int r1 = r0 + rpt < rows && np < MM_N_PIECES - KERN_MM_N_MAX ? r0 + rpt : rows;
            out[np++] = (mm_piece){k, r0, r1};
            left -= (r1 - r0) * per_row;
            r0 = r1;
        }
    }
    return np;
}

/* Run rows [0, rows) of one T-block, split over the pool when worth it. */
static void mm_run(mm_job *j) {
    tpool *pool = tpool_global();
    int threads = tpool_threads(pool);
    const kern_weight *w = j->w;
    double cost = mm_cost_ns(w, j->T);
    if (threads == 1 || w->rows < 32 || cost < 20000.0) {
        j->rows_per_task = w->rows;
        mm_task(j, 0, 1);
        return;
    }
    /* several pieces a thread, so a core taken by another process does not stall the call */
    mm_piece pieces[MM_N_PIECES];
    int n = mm_cut_pieces(j, &cost, 1, threads, pieces);
    mm_multi m = {j, pieces};
    tpool_run(pool, n, mm_multi_task, &m);
}

/* ---- quantized weights ---- */

/* Bytes of one quantized-activation copy of tb rows of K inputs in groups of gs: the int8 values,
 * the group scales and sums, the VNNI dot-product scratch (on AArch64 the integer group sums asum,
 * which fit in it: G <= K/4). */
static void quant_sizes(int tb, int K, int gs, size_t *a_bytes, size_t *g_bytes, size_t *dv_bytes) {
    int G = K / gs, dvw = (K / 64) * 16 > G ? (K / 64) * 16 : G;
    *a_bytes = ((size_t)tb * K + 63) & ~(size_t)63;
    *g_bytes = ((size_t)tb * G * 4 + 63) & ~(size_t)63;
    *dv_bytes = (size_t)tb * dvw * 4;
}

/* Activation mode for quantized weights: int8 (default) or f32 (the qact_f32 knob, $MTPLX_QACT=f32). */
static int qact_f32(void) { return kern_knobs_get()->qact_f32; }

void kern_matmul_set_qact_f32(int on) { kern_knobs_pin_qact_f32(on); }

/* Grow-only scratch of the calling thread for quantized / AMX-packed activations. The CPU backend
 * reserves the largest size a forward of its row capacity needs (kern_matmul_reserve) when a state
 * is created, so the hot path does not allocate; a thread that never reserved grows it on first use.
 * There is no numeric fallback: if that growth fails, the process stops with a message (a different
 * activation path would change the numbers, docs/architecture.md "Scratch"). */
static _Thread_local unsigned char *tl_scratch;
static _Thread_local size_t tl_scratch_size;
/* A thread-specific key whose destructor frees the scratch when a thread that used it exits
 * (server workers come and go). */
static pthread_key_t g_scratch_key;
static pthread_once_t g_scratch_once = PTHREAD_ONCE_INIT;
static int g_scratch_key_ok;
static void scratch_key_make(void) { g_scratch_key_ok = pthread_key_create(&g_scratch_key, free) == 0; }

static void *scratch_grow(size_t bytes) {
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

static void *scratch_get(size_t bytes) {
    void *p = scratch_grow(bytes);
    if (!p) {
        fprintf(stderr, "mtplx: out of memory for %zu bytes of matmul activation scratch on a thread that did "
                        "not reserve it (kern_matmul_reserve)\n", bytes);
        abort();
    }
    return p;
}

int kern_matmul_reserve(size_t bytes, mtplx_err *err) {
    if (!scratch_grow(bytes))
        return err_set(err, MTPLX_ENOMEM, "matmul activation scratch: out of memory for %zu bytes", bytes);
    return 0;
}

size_t kern_matmul_scratch_bound(int K, int min_group) {
    if (K < 1) return 0;
    if (min_group < 32) min_group = 32;
    size_t a_bytes, g_bytes, dv_bytes;
    quant_sizes(MM_TMAX, K, min_group, &a_bytes, &g_bytes, &dv_bytes);
    size_t q = (a_bytes + 2 * g_bytes + dv_bytes + 63) & ~(size_t)63;
    size_t x = (mm_amx_pack_bytes(MM_TMAX, K) + 63) & ~(size_t)63;
    size_t xd = (mm_bf16dp_pack_bytes(MM_TMAX, K) + 63) & ~(size_t)63;
    size_t xe = (mm_bf16x_avx512_pack_bytes(MM_TMAX, K) + 63) & ~(size_t)63;
    if (xd > x) x = xd;
    if (xe > x) x = xe;
    return (size_t)KERN_MM_N_MAX * (q > x ? q : x);
}

void kern_matmul_release_scratch(void) {
    free(tl_scratch);
    tl_scratch = NULL;
    tl_scratch_size = 0;
    if (g_scratch_key_ok) pthread_setspecific(g_scratch_key, NULL);
}

/* Smallest T for which repacked quantized weights take the AMX kernel (the qamx_min knob,
 * $MTPLX_QAMX_MIN, default 9; below it the VNNI kernel is faster on weights streamed from DRAM by
 * both cores — bench/kernels.md). */
#if defined(__x86_64__)
static int qamx_min_rows(void) { return kern_knobs_get()->qamx_min; }
#endif

typedef void (*qact_fill_fn)(const float *x, int ldx, qact *qa);

/* The int8-activation path for quantized weight w in a call of T rows on this CPU: row function,
 * activation fill and the activation layout that function reads. */
static void quant_pick(const kern_weight *w, int T, mm_qrows_fn *qfn, qact_fill_fn *fill, qa_layout *layout) {
    kern_isa isa = cpu_isa();
    int vnni = cpu_get_features()->avx512vnni, K = w->cols;
    *qfn = mm_qrows_portable, *fill = qact_fill_portable, *layout = QA_NATURAL;
#if defined(__aarch64__)
    (void)vnni, (void)K, (void)T;
    if (KERN_ISA_IS_NEON(isa)) {
        *qfn = isa == KERN_ISA_NEON_I8MM ? mm_qrows_neon_i8mm
               : isa == KERN_ISA_NEON_DOT ? mm_qrows_neon_dot
                                          : mm_qrows_neon;
        *fill = qact_fill_neon;
        *layout = w->bits == 4 ? QA_Q4_32 : QA_NATURAL;
    }
#elif defined(__x86_64__)
    if (w->packed && isa >= KERN_ISA_AVX512 && vnni) {
        /* AMX for T >= qamx_min_rows(): same bits as the VNNI kernel, cheaper from ~9 rows (docs/kernels.md) */
        *qfn = isa >= KERN_ISA_AMX && T >= qamx_min_rows() ? mm_qrows_amx : mm_qrows_packed;
        *fill = qact_fill_avx512, *layout = QA_NATURAL;
    } else if (isa >= KERN_ISA_AVX512 && vnni && K % 64 == 0) {
        *qfn = mm_qrows_avx512, *fill = qact_fill_avx512;
        *layout = w->bits == 4 ? (K % 128 == 0 ? QA_Q4_128 : QA_Q4_64) : QA_NATURAL;
    } else if (isa >= KERN_ISA_AVX2 && w->packed) { /* AVX2 (or AVX-512 without VNNI) on the same copy */
        *qfn = cpu_avxvnni_used() ? mm_qrows_packed_avxvnni : mm_qrows_packed_avx2;
        *fill = qact_fill_avx2, *layout = QA_NATURAL;
    } else if (isa >= KERN_ISA_AVX2) {
        *qfn = mm_qrows_avx2, *fill = qact_fill_avx2;
        *layout = w->bits == 4 ? QA_Q4_32 : QA_NATURAL;
    }
#endif
}

/* Bytes of quantized activations for tb rows of K inputs in groups of gs: a, d + bd, dv. */

static void matmul_quant(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w) {
    const int K = w->cols, gs = w->group_size;
    if (!quant_format_ok(w->bits, gs) || K % gs) {
        kern_matmul_ref(y, ldy, x, ldx, T, w);
        return;
    }
    mm_qrows_fn qfn;
    qact_fill_fn fill;
    qa_layout layout;
    quant_pick(w, T, &qfn, &fill, &layout);
    int tb = T < MM_TMAX ? T : MM_TMAX, G = K / gs;
    size_t a_bytes, g_bytes, dv_bytes;
    quant_sizes(tb, K, gs, &a_bytes, &g_bytes, &dv_bytes);
    unsigned char *buf = qact_f32() ? NULL : scratch_get(a_bytes + 2 * g_bytes + dv_bytes);
    for (int t0 = 0; t0 < T; t0 += MM_TMAX) {
        int tt = T - t0 < MM_TMAX ? T - t0 : MM_TMAX;
        mm_job j = {NULL, NULL, NULL, y + (size_t)t0 * ldy, ldy, x + (size_t)t0 * ldx, ldx, tt, w, 0, NULL, NULL};
        qact qa;
        if (!buf) {
            j.fn = mm_rows_qf32_portable; /* the qact_f32 knob ($MTPLX_QACT=f32) */
        } else {
            qa = (qact){tt, K, G, gs, layout, (int8_t *)buf, (float *)(buf + a_bytes),
                        (float *)(buf + a_bytes + g_bytes), (float *)(buf + a_bytes + 2 * g_bytes),
                        (int32_t *)(buf + a_bytes + 2 * g_bytes)};
            fill(j.x, ldx, &qa);
            j.qfn = qfn;
            j.qa = &qa;
        }
        mm_run(&j);
    }
}

/* ---- many rows through a packed-activation path (prefill chunks) ---- */

/* Rows per call of mm_many: its T-blocks' packed activations all live in the scratch at once, and
 * kern_matmul_scratch_bound allows KERN_MM_N_MAX blocks. */
#define MM_MANY_TMAX (KERN_MM_N_MAX * MM_TMAX)
/* Bytes of weight rows a task keeps in L2 while every T-block passes over them. */
#define MM_MANY_SLICE_BYTES (256 * 1024)
#define MM_MANY_PIECES 256
/* Row pieces per thread of an mm_many dispatch, all weights together. The threads claim pieces in
 * order, so a call ends when the last claimed piece does: with 4 per thread (~140 µs each for a
 * 128-row chunk of a 640-wide model) one thread idled ~5% of the 2-thread matmul time at the ends of
 * the calls (bench/zen.md "Session 6"); 8 halve that tail, and a piece of >= 40 weight rows still
 * passes each of its rows over all the call's T-blocks. */
#define MM_MANY_PER_THREAD 8

/* One contiguous block of output rows of one weight of an mm_many call. */
typedef struct {
    int out, r0, r1;
} mm_many_piece;

typedef struct {
    const kern_mm_out *outs;    /* the call's weights (all on path xp, same K) */
    const xpath *xp;
    const float *x;
    int ldx, T, K;
    unsigned char *xpack;       /* T-block b's packed rows at xpack + b · blk_bytes */
    size_t blk_bytes;
    const mm_many_piece *pieces;
    kern_rows_fn pre;           /* writes rows of x before they are packed (kern_matmul_n_pre), or NULL */
    void *pre_ctx;
    int pre_row0;               /* x's row 0 is row pre_row0 of the pre call */
} mm_many_job;

/* Task i packs T-block i (the packing dispatch), after pre has written its rows. */
static void mm_many_pack_task(void *ctx, int i, int n) {
    (void)n;
    const mm_many_job *j = ctx;
    int t0 = i * MM_TMAX, tt = j->T - t0 < MM_TMAX ? j->T - t0 : MM_TMAX;
    if (j->pre) j->pre(j->pre_ctx, j->pre_row0 + t0, j->pre_row0 + t0 + tt);
    j->xp->pack(j->xpack + i * j->blk_bytes, j->x + (size_t)t0 * j->ldx, j->ldx, tt, j->K);
}

/* Piece i: its weight rows slice by slice (L2-sized), every T-block over each slice — the path's row
 * function on exactly the (rows, T-block) pairs kern_matmul's block loop would give it. */
static void mm_many_task(void *ctx, int i, int n) {
    (void)n;
    const mm_many_job *j = ctx;
    const mm_many_piece *p = &j->pieces[i];
    const kern_mm_out *o = &j->outs[p->out];
    int al = j->xp->row_align > 16 ? j->xp->row_align : 16;
    int slice = (int)(MM_MANY_SLICE_BYTES / ((size_t)j->K * dtype_size(o->w->dtype))) / al * al;
    if (slice < al) slice = al;
    for (int s0 = p->r0; s0 < p->r1; s0 += slice) {
        int s1 = s0 + slice < p->r1 ? s0 + slice : p->r1;
        for (int t0 = 0, b = 0; t0 < j->T; t0 += MM_TMAX, b++) {
            int tt = j->T - t0 < MM_TMAX ? j->T - t0 : MM_TMAX;
            j->xp->rows(o->y + (size_t)t0 * o->ldy, o->ldy, j->x + (size_t)t0 * j->ldx, j->ldx, tt, o->w, s0, s1,
                        j->xpack + b * j->blk_bytes);
        }
    }
}

/* y_k = x·W_kᵀ for the n <= KERN_MM_N_MAX weights of outs, all on path xp with K inputs, for
 * MM_TMAX < T <= MM_MANY_TMAX rows: the T-blocks packed once (over the pool), then one dispatch of
 * row pieces of every weight in proportion to its cost, so the weights come from memory once per
 * call instead of once per MM_TMAX rows and the whole call costs two pool hand-offs. Same bits as
 * kern_matmul's block loop. */
static void mm_many(const kern_mm_out *outs, int n, const xpath *xp, const float *x, int ldx, int T, int K,
                    kern_rows_fn pre, void *pre_ctx, int pre_row0) {
    int nb = (T + MM_TMAX - 1) / MM_TMAX;
    size_t blk = (xp->bytes(MM_TMAX, K) + 63) & ~(size_t)63;
    mm_many_piece pieces[MM_MANY_PIECES];
    mm_many_job j = {outs, xp, x, ldx, T, K, scratch_get(blk * nb), blk, pieces, pre, pre_ctx, pre_row0};
    tpool *pool = tpool_global();
    int threads = tpool_threads(pool), al = xp->row_align > 16 ? xp->row_align : 16;
    double cost[KERN_MM_N_MAX], total = 0;
    for (int k = 0; k < n; k++) total += cost[k] = mm_cost_ns(outs[k].w, T);
    int par = threads > 1 && total >= 20000.0;
    if (par) tpool_run(pool, nb, mm_many_pack_task, &j);
    else
        for (int b = 0; b < nb; b++) mm_many_pack_task(&j, b, nb);
    int n_pieces = 0;
    for (int k = 0; k < n; k++) {
        int rows = outs[k].w->rows;
        int want = par ? (int)(cost[k] / total * threads * MM_MANY_PER_THREAD + 0.5) : 1;
        if (want < 1 || rows < 32) want = 1;
        if (want > MM_MANY_PIECES / KERN_MM_N_MAX) want = MM_MANY_PIECES / KERN_MM_N_MAX; /* the array's bound */
        int rpt = (rows + want - 1) / want;
        rpt = (rpt + al - 1) / al * al;
        for (int r0 = 0; r0 < rows; r0 += rpt)
            pieces[n_pieces++] = (mm_many_piece){k, r0, r0 + rpt < rows ? r0 + rpt : rows};
    }
    if (par) tpool_run(pool, n_pieces, mm_many_task, &j);
    else
        for (int i = 0; i < n_pieces; i++) mm_many_task(&j, i, n_pieces);
}

/* kern_matmul_n / kern_matmul for T > MM_TMAX when every weight takes the same packed-activation
 * path with the same K: mm_many over groups of MM_MANY_TMAX rows, each packing task running pre
 * (when non-NULL) over its rows first. Returns 0 when it does not apply. */
static int mm_many_try(const kern_mm_out *outs, int n, const float *x, int ldx, int T, kern_rows_fn pre,
                       void *pre_ctx) {
    if (T <= MM_TMAX || n < 1) return 0;
    const xpath *xp = pick_xpath(outs[0].w);
    int K = outs[0].w->cols;
    if (!xp) return 0;
    for (int k = 1; k < n; k++)
        if (pick_xpath(outs[k].w) != xp || outs[k].w->cols != K) return 0;
    for (int t0 = 0; t0 < T; t0 += MM_MANY_TMAX) {
        kern_mm_out o[KERN_MM_N_MAX];
        for (int k = 0; k < n; k++) o[k] = (kern_mm_out){outs[k].y + (size_t)t0 * outs[k].ldy, outs[k].ldy, outs[k].w};
        mm_many(o, n, xp, x + (size_t)t0 * ldx, ldx, T - t0 < MM_MANY_TMAX ? T - t0 : MM_MANY_TMAX, K, pre,
                pre_ctx, t0);
    }
    return 1;
}

int kern_matmul_n_pre(const kern_mm_out *outs, int n, const float *x, int ldx, int T, kern_rows_fn pre, void *ctx) {
    assert(n >= 0 && n <= KERN_MM_N_MAX && T >= 0);
    for (int k = 0; k < n; k++) assert(ldx >= outs[k].w->cols && outs[k].ldy >= outs[k].w->rows);
    return mm_many_try(outs, n, x, ldx, T, pre, ctx);
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
    const xpath *xp = pick_xpath(w);
    kern_mm_out one = {y, ldy, w};
    if (xp && mm_many_try(&one, 1, x, ldx, T, NULL, NULL)) return;
    void *xpack = xp ? scratch_get(xp->bytes(T < MM_TMAX ? T : MM_TMAX, w->cols)) : NULL;
    for (int t0 = 0; t0 < T; t0 += MM_TMAX) {
        int tt = T - t0 < MM_TMAX ? T - t0 : MM_TMAX;
        mm_job j = {fn, NULL, NULL, y + (size_t)t0 * ldy, ldy, x + (size_t)t0 * ldx, ldx, tt, w, 0, xpack, xp};
        if (xpack) xp->pack(xpack, j.x, ldx, tt, w->cols);
        mm_run(&j);
    }
}

/* ---- several weights over the same activations ---- */

/* kern_matmul_n / kern_matmul_each: product k reads Ts[k] rows of xs[k] (row stride ldxs[k]); inputs
 * that are the same pointer with the same rows share one prepared activation copy. */
static void mm_n_run(const kern_mm_out *outs, int n, const float *const *xs, const int *ldxs, const int *Ts) {
    assert(n >= 0 && n <= KERN_MM_N_MAX);
    if (n == 0) return;
    int same = 1;
    for (int i = 1; i < n; i++) same &= xs[i] == xs[0] && ldxs[i] == ldxs[0] && Ts[i] == Ts[0];
    if (same && mm_many_try(outs, n, xs[0], ldxs[0], Ts[0], NULL, NULL)) return; /* prefill chunks of bf16 weights */
    /* the fast paths take one T-block of dense or int8-activation quantized weights; anything else
     * (large T, unusual formats, $MTPLX_QACT=f32) goes through kern_matmul one weight at a time,
     * before the scratch below is taken (kern_matmul may reallocate it) */
    int fast[KERN_MM_N_MAX], n_fast = 0;
    for (int i = 0; i < n; i++) {
        const kern_weight *w = outs[i].w;
        int T = Ts[i];
        assert(T >= 0 && ldxs[i] >= w->cols && outs[i].ldy >= w->rows);
        if (T == 0) continue;
        int dense = w->dtype == DT_F32 || w->dtype == DT_F16 || w->dtype == DT_BF16;
        int quant = w->dtype == DT_U32 && quant_format_ok(w->bits, w->group_size) && w->cols % w->group_size == 0 &&
                    !qact_f32();
        if (T <= MM_TMAX && (dense || quant)) fast[n_fast++] = i;
        else kern_matmul(outs[i].y, outs[i].ldy, xs[i], ldxs[i], T, w);
    }
    if (!n_fast) return;

    /* one activation copy per distinct preparation: quantized activations per (K, group size,
     * fill, layout), AMX-packed activations per K; all carved from the thread's scratch */
    mm_job jobs[KERN_MM_N_MAX];
    qact qas[KERN_MM_N_MAX];
    qact_fill_fn fills[KERN_MM_N_MAX];
    size_t qoff[KERN_MM_N_MAX][4]; /* a, d, bd, dv offsets into the scratch */
    int xk[KERN_MM_N_MAX];         /* K of each packed-activation copy */
    const float *qx[KERN_MM_N_MAX], *px[KERN_MM_N_MAX]; /* the input of each quantized / packed copy */
    int qldx[KERN_MM_N_MAX], pldx[KERN_MM_N_MAX], pT[KERN_MM_N_MAX]; /* (qact carries its own T) */
    const xpath *xpp[KERN_MM_N_MAX]; /* and its path */
    size_t xoff[KERN_MM_N_MAX];    /* its offset into the scratch */
    int qa_of[KERN_MM_N_MAX], xp_of[KERN_MM_N_MAX], n_qa = 0, n_xp = 0;
    size_t need = 0;
    mm_rows_fn dense_fn = pick_dense_fn();
    for (int k = 0; k < n_fast; k++) {
        const kern_mm_out *o = &outs[fast[k]];
        const kern_weight *w = o->w;
        const float *x = xs[fast[k]];
        int ldx = ldxs[fast[k]], T = Ts[fast[k]];
        jobs[k] = (mm_job){dense_fn, NULL, NULL, o->y, o->ldy, x, ldx, T, w, 0, NULL, NULL};
        qa_of[k] = xp_of[k] = -1;
        if (w->dtype != DT_U32) {
            const xpath *xp = pick_xpath(w);
            if (!xp) continue;
            jobs[k].xp = xp;
            for (int q = 0; q < n_xp; q++)
                if (xk[q] == w->cols && xpp[q] == xp && px[q] == x && pldx[q] == ldx && pT[q] == T) xp_of[k] = q;
            if (xp_of[k] < 0) {
                xk[n_xp] = w->cols;
                px[n_xp] = x, pldx[n_xp] = ldx, pT[n_xp] = T;
                xpp[n_xp] = xp;
                xoff[n_xp] = need;
                need += (xp->bytes(T, w->cols) + 63) & ~(size_t)63;
                xp_of[k] = n_xp++;
            }
            continue;
        }
        jobs[k].fn = NULL;
        qa_layout layout;
        qact_fill_fn fill;
        quant_pick(w, T, &jobs[k].qfn, &fill, &layout);
        for (int q = 0; q < n_qa; q++)
            if (qas[q].K == w->cols && qas[q].gs == w->group_size && qas[q].layout == layout && fills[q] == fill &&
                qx[q] == x && qldx[q] == ldx && qas[q].T == T)
                qa_of[k] = q;
        if (qa_of[k] < 0) {
            size_t a_bytes, g_bytes, dv_bytes;
            quant_sizes(T, w->cols, w->group_size, &a_bytes, &g_bytes, &dv_bytes);
            qas[n_qa] = (qact){T, w->cols, w->cols / w->group_size, w->group_size, layout, NULL, NULL, NULL, NULL, NULL};
            qoff[n_qa][0] = need;
            qoff[n_qa][1] = need + a_bytes;
            qoff[n_qa][2] = need + a_bytes + g_bytes;
            qoff[n_qa][3] = need + a_bytes + 2 * g_bytes;
            fills[n_qa] = fill;
            qx[n_qa] = x, qldx[n_qa] = ldx;
            need += (a_bytes + 2 * g_bytes + dv_bytes + 63) & ~(size_t)63;
            qa_of[k] = n_qa++;
        }
    }
    if (need) {
        unsigned char *buf = scratch_get(need);
        for (int q = 0; q < n_qa; q++) {
            qas[q].a = (int8_t *)(buf + qoff[q][0]);
            qas[q].d = (float *)(buf + qoff[q][1]);
            qas[q].bd = (float *)(buf + qoff[q][2]);
            qas[q].dv = (float *)(buf + qoff[q][3]);
            qas[q].asum = (int32_t *)(buf + qoff[q][3]);
            fills[q](qx[q], qldx[q], &qas[q]);
        }
        for (int q = 0; q < n_xp; q++) xpp[q]->pack(buf + xoff[q], px[q], pldx[q], pT[q], xk[q]);
        for (int k = 0; k < n_fast; k++) {
            if (qa_of[k] >= 0) jobs[k].qa = &qas[qa_of[k]];
            if (xp_of[k] >= 0) jobs[k].xpack = buf + xoff[xp_of[k]];
        }
    }

    /* split every weight's rows over the pool (mm_cut_pieces) */
    tpool *pool = tpool_global();
    int threads = tpool_threads(pool);
    double cost[KERN_MM_N_MAX], total = 0;
    for (int k = 0; k < n_fast; k++) total += cost[k] = mm_cost_ns(jobs[k].w, jobs[k].T);
    if (threads == 1 || total < MM_N_SPLIT_NS) {
        for (int k = 0; k < n_fast; k++) mm_job_rows(&jobs[k], 0, jobs[k].w->rows);
        return;
    }
    mm_piece pieces[MM_N_PIECES];
    int n_pieces = mm_cut_pieces(jobs, cost, n_fast, threads, pieces);
    mm_multi m = {jobs, pieces};
    tpool_run(pool, n_pieces, mm_multi_task, &m);
}

void kern_matmul_n(const kern_mm_out *outs, int n, const float *x, int ldx, int T) {
    assert(n >= 0 && n <= KERN_MM_N_MAX && T >= 0);
    const float *xs[KERN_MM_N_MAX];
    int ldxs[KERN_MM_N_MAX], Ts[KERN_MM_N_MAX];
    for (int i = 0; i < n && i < KERN_MM_N_MAX; i++) xs[i] = x, ldxs[i] = ldx, Ts[i] = T;
    mm_n_run(outs, n, xs, ldxs, Ts);
}

void kern_matmul_each(const kern_mm_out *outs, int n, const float *const *xs, const int *ldxs, const int *Ts) {
    mm_n_run(outs, n, xs, ldxs, Ts);
}
