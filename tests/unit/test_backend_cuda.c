/* test_backend_cuda.c — the CUDA backend's ops against references on random inputs, and their row
 * invariance bit for bit within the backend (docs/architecture.md, "Adding a backend" item 4).
 * Skips on a build without CUDA or a machine without a GPU; scripts/gpu-test.sh runs it on a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/backend.h"
#include "../../src/backend/device.h"
#include "../../src/engine/sampler.h"
#include "../../src/kernels/matmul.h"
#include "../../src/kernels/matmul_q.h"
#include "../../src/kernels/moe.h"
#include "../../src/kernels/quant.h"
#include "test.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static void fill(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = frand();
}

static char g_why[1100]; /* why there is no CUDA backend here */

/* The CUDA backend, or NULL (g_why says why: no CUDA in this build, no usable GPU). */
static be_backend *cuda_new(void) {
    be_backend *be = NULL;
    mtplx_err err = {0};
    if (!be_device_has_cuda()) return snprintf(g_why, sizeof g_why, "built without CUDA (make CUDA=1)"), NULL;
    if (be_create("cuda", &be, &err)) return snprintf(g_why, sizeof g_why, "no usable GPU: %s", err.msg), NULL;
    return be;
}

/* A device buffer holding n floats of host (NULL: uninitialised); *b is freed by the caller. */
static float *dev_floats(be_backend *be, const float *host, size_t n, be_buf **b) {
    mtplx_err err = {0};
    if (be->ops->buf_alloc(be, n * sizeof(float), 0, "test", b, &err)) return NULL;
    float *p = be_buf_addr(be, *b);
    if (host) be->ops->upload(be, p, host, n * sizeof(float));
    return p;
}

/* The two device outputs of weight i of a matmul_n check (n floats each): dy[i] and dy[nw + i], their
 * buffers in by[i] and by[nw + i]. Returns 0, or -1 when either allocation failed. */
static int dev_out_pair(be_backend *be, int nw, int i, size_t n, float **dy, be_buf **by) {
    dy[i] = dev_floats(be, NULL, n, &by[i]);
    dy[nw + i] = dev_floats(be, NULL, n, &by[nw + i]);
    return dy[i] && dy[nw + i] ? 0 : -1;
}

/* One weight format: dense (bits 0, dtype) or MLX affine (bits, group, scale dtype: bf16 when 0). */
typedef struct {
    mtplx_dtype dtype;
    int bits, group;
    mtplx_dtype sdt;
} fmt;

/* w (rows x cols) in format f, its storage in *store (freed by the caller). */
static int make_weight(const float *wf, int rows, int cols, fmt f, be_weight *w, void **store) {
    memset(w, 0, sizeof *w);
    w->rows = rows, w->cols = cols;
    if (f.bits) {
        mtplx_dtype sdt = f.sdt ? f.sdt : DT_BF16;
        size_t wb = quant_weight_bytes(rows, cols, f.bits), sb = quant_scales_bytes(rows, cols, f.group, sdt);
        unsigned char *buf = malloc(wb + 2 * sb);
        mtplx_err err = {0};
        if (!buf || quant_affine(wf, rows, cols, f.bits, f.group, sdt, (uint32_t *)buf, buf + wb, buf + wb + sb, &err))
            return -1;
        w->dtype = DT_U32, w->data = buf, w->scales = buf + wb, w->biases = buf + wb + sb;
        w->scale_dtype = sdt, w->bits = f.bits, w->group_size = f.group;
        *store = buf;
        return 0;
    }
    size_t n = (size_t)rows * cols;
    w->dtype = f.dtype;
    if (f.dtype == DT_F32) {
        float *p = malloc(n * 4);
        if (!p) return -1;
        memcpy(p, wf, n * 4);
        w->data = p, *store = p;
        return 0;
    }
    uint16_t *p = malloc(n * 2);
    if (!p) return -1;
    for (size_t i = 0; i < n; i++) p[i] = f.dtype == DT_BF16 ? f32_to_bf16(wf[i]) : f32_to_f16(wf[i]);
    w->data = p, *store = p;
    return 0;
}

/* The CPU's int8-activation product of a quantized weight (qact_fill_portable + mm_qrows_portable):
 * what the GPU's tensor-core path computes, up to the order of the fp32 group terms. */
static void ref_int8(float *y, int ldy, const float *x, int K, int T, const be_weight *w) {
    int G = K / w->group_size;
    int8_t *a = malloc((size_t)T * K);
    float *d = malloc(sizeof(float) * T * G), *bd = malloc(sizeof(float) * T * G);
    if (!a || !d || !bd) abort();
    qact qa = {T, K, G, w->group_size, QA_NATURAL, a, d, bd, NULL};
    qact_fill_portable(x, K, &qa);
    mm_qrows_portable(y, ldy, &qa, w, 0, w->rows);
    free(a), free(d), free(bd);
}

/* 0 when quantized weights take fp32 activations on the GPU: $MTPLX_CUDA_MMA=0 (every format on the
 * CUDA-core kernel) or the qact_f32 knob. */
static int mma_on(void) {
    const char *v = getenv("MTPLX_CUDA_MMA");
    return !(v && !strcmp(v, "0")) && !kern_knobs_get()->qact_f32;
}

/* matmul in every checkpoint format against the fp32 reference of the same stored weight (quantized
 * weights on the tensor-core path: against the CPU's int8-activation product, and within int8
 * rounding of the fp32 one), and every row of an R-row call bit-identical to the row computed alone
 * (R = 1..36, rows in another order). N x K: a few tiles, each split among several warps (K = 384),
 * or one tile's K among many (K = 5120, N = 40: the stream-K partials of cuda_mma_sk.cu), or fewer
 * units than warps (N = 12, K = 256), or a partial last tile with each warp's range crossing tiles
 * (N = 520, K = 2048). */
static void matmul_check(be_backend *be, int N, int K) {
    enum { RMAX = 36 }; /* the stream-K kernel's 1..8-, 9..16- and 17..32-row instances, and two passes */
    const fmt fmts[] = {{DT_F32, 0, 0, 0},       {DT_BF16, 0, 0, 0},      {DT_F16, 0, 0, 0},
                        {DT_U32, 8, 64, 0},      {DT_U32, 4, 32, 0},      {DT_U32, 4, 128, 0},
                        {DT_U32, 8, 128, 0},     {DT_U32, 4, 64, 0},      {DT_U32, 8, 32, 0},
                        {DT_U32, 4, 64, DT_F16}, {DT_U32, 8, 64, DT_F32}};
    float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * RMAX * K);
    float *ref = malloc(sizeof(float) * RMAX * N), *got = malloc(sizeof(float) * RMAX * N), *one = malloc(sizeof(float) * N);
    REQUIRE(wf && x && ref && got && one);
    fill(wf, (size_t)N * K), fill(x, (size_t)RMAX * K);
    be_buf *bx, *by, *bx1;
    float *dx = dev_floats(be, x, (size_t)RMAX * K, &bx), *dy = dev_floats(be, NULL, (size_t)RMAX * N, &by);
    float *dx1 = dev_floats(be, NULL, K, &bx1);
    REQUIRE(dx && dy && dx1);
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
        be_weight w;
        void *store = NULL;
        mtplx_err err = {0};
        REQUIRE(make_weight(wf, N, K, fmts[fi], &w, &store) == 0);
        REQUIRE(be->ops->weight_prepare(be, &w, &err) == 0);
        kern_matmul_ref(ref, N, x, K, RMAX, &w);
        be->ops->matmul(be, dy, N, dx, K, RMAX, &w);
        be->ops->download(be, got, dy, sizeof(float) * RMAX * N);
        double worst = 0;
        for (int i = 0; i < RMAX * N; i++) {
            double d = fabs((double)got[i] - ref[i]) / (1.0 + fabs(ref[i]));
            if (d > worst) worst = d;
        }
        if (fmts[fi].bits && mma_on()) { /* int8 activations: up to 1/254 of a group's largest |x| per input,
                                             ~0.02 standard deviation over K = 384, growing as sqrt(K) */
            double tol = 0.2 * sqrt(K / 384.0);
            CHECK_MSG(worst < tol, "%dx%d format %zu: worst relative difference to fp32 %.3g (limit %.3g)", N, K, fi,
                      worst, tol);
            ref_int8(ref, N, x, K, RMAX, &w);
            worst = 0;
            for (int i = 0; i < RMAX * N; i++) {
                double d = fabs((double)got[i] - ref[i]) / (1.0 + fabs(ref[i]));
                if (d > worst) worst = d;
            }
        }
        CHECK_MSG(worst < 1e-4, "%dx%d format %zu: worst relative difference %.3g", N, K, fi, worst);
        for (int R = 1; R <= RMAX; R++) { /* rows R-1 .. 0 in reverse as an R-row call */
            float *xr = malloc(sizeof(float) * R * K);
            REQUIRE(xr);
            for (int t = 0; t < R; t++) memcpy(xr + (size_t)t * K, x + (size_t)(R - 1 - t) * K, sizeof(float) * K);
            be->ops->upload(be, dx, xr, sizeof(float) * R * K);
            be->ops->matmul(be, dy, N, dx, K, R, &w);
            float *yr = malloc(sizeof(float) * R * N);
            REQUIRE(yr);
            be->ops->download(be, yr, dy, sizeof(float) * R * N);
            for (int t = 0; t < R; t++) {
                be->ops->upload(be, dx1, x + (size_t)(R - 1 - t) * K, sizeof(float) * K);
                be->ops->matmul(be, dy, N, dx1, K, 1, &w);
                be->ops->download(be, one, dy, sizeof(float) * N);
                CHECK_MSG(memcmp(one, yr + (size_t)t * N, sizeof(float) * N) == 0,
                          "%dx%d format %zu: row %d of %d differs from the row alone", N, K, fi, t, R);
            }
            free(xr), free(yr);
        }
        be->ops->upload(be, dx, x, sizeof(float) * RMAX * K);
        free(store);
    }
    be->ops->buf_free(be, bx), be->ops->buf_free(be, by), be->ops->buf_free(be, bx1);
    free(wf), free(x), free(ref), free(got), free(one);
}

TEST(test_matmul_every_format_matches_reference_and_is_row_invariant) {
    be_backend *be = cuda_new();
    if (!be) SKIP("%s", g_why);
    matmul_check(be, 100, 384);
    matmul_check(be, 40, 5120);
    matmul_check(be, 12, 256); /* q: 2 (tile, span) units for 4 warps */
    matmul_check(be, 520, 2048); /* q: 528 units over 64 warps, bf16: 2112 over 132 */
    be_free(be);
}

/* The many-row GEMM (cuda_gemm.cu, from $MTPLX_CUDA_GEMM_MIN rows, default 48) against the stream-K
 * decode kernel, bit for bit: an 80-row call equals every R-row prefix call (R = 1..80: below the GEMM's
 * threshold the stream-K kernel, above it the GEMM with another grid) and five 16-row calls (stream-K)
 * row for row; and the 80 rows match the reference within the matmul check's limits. Shapes: a partial
 * last tile and block (N = 520, 100, 12), K not a multiple of the GEMM's 64-input bf16 stage (544,
 * K / 32 odd), one tile's K cut among many stream-K warps (40 x 5120), and enough rows for the
 * 128-row blocks (17000: 133 blocks x 2 activation tiles). */
static void gemm_check(be_backend *be, int N, int K, fmt f) {
    enum { RMAX = 80 };
    float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * RMAX * K);
    float *ref = malloc(sizeof(float) * RMAX * N), *all = malloc(sizeof(float) * RMAX * N), *got = malloc(sizeof(float) * RMAX * N);
    REQUIRE(wf && x && ref && all && got);
    fill(wf, (size_t)N * K), fill(x, (size_t)RMAX * K);
    be_buf *bx, *by, *bx16;
    float *dx = dev_floats(be, x, (size_t)RMAX * K, &bx), *dy = dev_floats(be, NULL, (size_t)RMAX * N, &by);
    float *dx16 = dev_floats(be, NULL, (size_t)16 * K, &bx16);
    REQUIRE(dx && dy && dx16);
    be_weight w;
    void *store = NULL;
    mtplx_err err = {0};
    REQUIRE(make_weight(wf, N, K, f, &w, &store) == 0);
    REQUIRE(be->ops->weight_prepare(be, &w, &err) == 0);
    be->ops->matmul(be, dy, N, dx, K, RMAX, &w);
    be->ops->download(be, all, dy, sizeof(float) * RMAX * N);
    if (f.bits && mma_on()) ref_int8(ref, N, x, K, RMAX, &w);
    else kern_matmul_ref(ref, N, x, K, RMAX, &w);
    double worst = 0;
    for (int i = 0; i < RMAX * N; i++) {
        double d = fabs((double)all[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (d > worst) worst = d;
    }
    /* the stream-K kernel's bits (checked below), 80 rows of them: the worst of 80·N outputs sits in the
     * tail of the bf16 activation split's error (2^-17 of each input) and moves with the cut of K into
     * partials: 520 x 2048 reached 1.12e-4 with the tile cut in about five partials (session 11), 40 x
     * 5120 1.2e-4 (fp32 accumulation over 160 spans). 1.5e-4, growing as sqrt(K) past K = 2048 */
    double lim = 1.5e-4 * (K > 2048 ? sqrt(K / 2048.0) : 1.0);
    CHECK_MSG(worst < lim, "%dx%d bits %d group %d: 80 rows, worst relative difference %.3g (limit %.3g)", N, K,
              f.bits, f.group, worst, lim);
    for (int R = 1; R <= RMAX; R++) {
        be->ops->matmul(be, dy, N, dx, K, R, &w);
        be->ops->download(be, got, dy, sizeof(float) * R * N);
        int bad = -1;
        for (int t = 0; t < R && bad < 0; t++)
            if (memcmp(got + (size_t)t * N, all + (size_t)t * N, sizeof(float) * N)) bad = t;
        CHECK_MSG(bad < 0, "%dx%d bits %d group %d: row %d of a %d-row call differs from the 80-row call", N, K, f.bits,
                  f.group, bad, R);
    }
    for (int b = 0; b < RMAX / 16; b++) {
        be->ops->upload(be, dx16, x + (size_t)16 * b * K, sizeof(float) * 16 * K);
        be->ops->matmul(be, dy, N, dx16, K, 16, &w);
        be->ops->download(be, got, dy, sizeof(float) * 16 * N);
        CHECK_MSG(memcmp(got, all + (size_t)16 * b * N, sizeof(float) * 16 * N) == 0,
                  "%dx%d bits %d group %d: rows %d..%d as a 16-row call differ from the 80-row call", N, K, f.bits,
                  f.group, 16 * b, 16 * b + 15);
    }
    be->ops->buf_free(be, bx), be->ops->buf_free(be, by), be->ops->buf_free(be, bx16);
    free(store), free(wf), free(x), free(ref), free(all), free(got);
}

TEST(test_gemm_bit_identical_to_stream_k) {
    be_backend *be = cuda_new();
    if (!be) SKIP("%s", g_why);
    const fmt fmts[] = {{DT_BF16, 0, 0, 0}, {DT_U32, 4, 64, 0},  {DT_U32, 8, 32, DT_F16},
                        {DT_U32, 4, 128, 0}, {DT_U32, 4, 32, 0}, {DT_U32, 8, 64, 0}};
    const int shapes[][2] = {{520, 2048}, {100, 384}, {40, 5120}, {12, 256}, {17000, 256}};
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++)
        for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) gemm_check(be, shapes[si][0], shapes[si][1], fmts[fi]);
    gemm_check(be, 136, 544, fmts[0]); /* bf16: 17 spans, the last 64-input stage half empty */
    be_free(be);
}

/* A rows x K weight of random values in format f, prepared on be (*store: its host bytes, the caller
 * frees). 0, or -1 when memory or the preparation failed. */
static int random_weight(be_backend *be, int rows, int K, fmt f, be_weight *w, void **store) {
    float *wf = malloc(sizeof(float) * rows * K);
    if (!wf) return -1;
    fill(wf, (size_t)rows * K);
    mtplx_err err = {0};
    int rc = make_weight(wf, rows, K, f, w, store) || be->ops->weight_prepare(be, w, &err) ? -1 : 0;
    free(wf);
    return rc;
}

/* matmul_n over weights of one format and mixed heights (a GDN in-projection's mix: two wide, two
 * of a few rows; cuda_mma_sk.cu runs them as one grouped launch) equals one matmul call per weight bit
 * for bit, for R = 1..36 rows; and two calls' outputs do not depend on each other. */
static void matmul_n_check(be_backend *be, fmt f) {
    enum { NW = 4, RMAX = 36, K = 512 }; /* stream-K passes of 32 rows: 1, then 2 from 33 */
    const int rows[NW] = {300, 136, 12, 12};
    be_weight w[NW];
    void *store[NW];
    be_buf *by[2 * NW], *bx;
    float *dy[2 * NW];
    float *x = malloc(sizeof(float) * RMAX * K), *a = malloc(sizeof(float) * RMAX * 300), *b = malloc(sizeof(float) * RMAX * 300);
    REQUIRE(x && a && b);
    fill(x, (size_t)RMAX * K);
    float *dx = dev_floats(be, x, (size_t)RMAX * K, &bx);
    REQUIRE(dx);
    for (int i = 0; i < NW; i++) {
        REQUIRE(random_weight(be, rows[i], K, f, &w[i], &store[i]) == 0);
        REQUIRE(dev_out_pair(be, NW, i, (size_t)RMAX * rows[i], dy, by) == 0);
    }
    for (int R = 1; R <= RMAX; R++) {
        be_mm_out outs[NW];
        for (int i = 0; i < NW; i++) outs[i] = (be_mm_out){dy[i], rows[i], &w[i]};
        be->ops->matmul_n(be, outs, NW, dx, K, R);
        for (int i = 0; i < NW; i++) be->ops->matmul(be, dy[NW + i], rows[i], dx, K, R, &w[i]);
        for (int i = 0; i < NW; i++) {
            be->ops->download(be, a, dy[i], sizeof(float) * R * rows[i]);
            be->ops->download(be, b, dy[NW + i], sizeof(float) * R * rows[i]);
            CHECK_MSG(memcmp(a, b, sizeof(float) * R * rows[i]) == 0,
                      "format bits %d: R=%d weight %d (%d rows) of matmul_n differs from matmul", f.bits, R, i, rows[i]);
        }
    }
    for (int i = 0; i < NW; i++) be->ops->buf_free(be, by[i]), be->ops->buf_free(be, by[NW + i]), free(store[i]);
    be->ops->buf_free(be, bx);
    free(x), free(a), free(b);
}

/* A matmul_n over quantized and thin bf16 weights (a q checkpoint's GDN in-projection: qkv and z in
 * q4, b and a of a few rows in bf16, which cuda_mma.cu's k_thin_bf16 computes from the fp32 rows): the
 * q outputs equal one matmul per weight bit for bit; the thin ones are Σ w·x within fp32 rounding of
 * the exact sum (|Δ| <= 1e-5 · Σ|w·x|); and every row of every output is bit-identical whether 1..20
 * rows share the call (the kernel takes rows in blocks of 8). */
TEST(test_matmul_n_mixed_thin_weights) {
    be_backend *be = cuda_new();
    if (!be) SKIP("%s", g_why);
    enum { NW = 4, RMAX = 20, K = 1536 };
    const int rows[NW] = {300, 136, 12, 7};
    const fmt fm[NW] = {{DT_U32, 4, 64, 0}, {DT_U32, 4, 64, 0}, {DT_BF16, 0, 0, 0}, {DT_BF16, 0, 0, 0}};
    be_weight w[NW];
    void *store[NW];
    be_buf *by[2 * NW], *bx;
    float *dy[2 * NW], *all[NW];
    float *x = malloc(sizeof(float) * RMAX * K), *a = malloc(sizeof(float) * RMAX * 300), *b = malloc(sizeof(float) * RMAX * 300);
    REQUIRE(x && a && b);
    fill(x, (size_t)RMAX * K);
    float *dx = dev_floats(be, x, (size_t)RMAX * K, &bx);
    REQUIRE(dx);
    for (int i = 0; i < NW; i++) {
        all[i] = malloc(sizeof(float) * RMAX * rows[i]);
        REQUIRE(all[i] && random_weight(be, rows[i], K, fm[i], &w[i], &store[i]) == 0);
        REQUIRE(dev_out_pair(be, NW, i, (size_t)RMAX * rows[i], dy, by) == 0);
    }
    for (int R = RMAX; R >= 1; R--) {
        be_mm_out outs[NW];
        for (int i = 0; i < NW; i++) outs[i] = (be_mm_out){dy[i], rows[i], &w[i]};
        be->ops->matmul_n(be, outs, NW, dx, K, R);
        for (int i = 0; i < NW; i++) {
            be->ops->download(be, a, dy[i], sizeof(float) * R * rows[i]);
            if (R == RMAX) memcpy(all[i], a, sizeof(float) * R * rows[i]);
            CHECK_MSG(memcmp(a, all[i], sizeof(float) * R * rows[i]) == 0,
                      "weight %d (%d rows): a %d-row call differs from the %d-row call", i, rows[i], R, RMAX);
            if (i >= 2) continue;
            be->ops->matmul(be, dy[NW + i], rows[i], dx, K, R, &w[i]);
            be->ops->download(be, b, dy[NW + i], sizeof(float) * R * rows[i]);
            CHECK_MSG(memcmp(a, b, sizeof(float) * R * rows[i]) == 0, "R=%d q weight %d of a mixed matmul_n differs from matmul", R, i);
        }
    }
    for (int i = 2; i < NW; i++) { /* the thin outputs against the exact sums of the bf16 weights */
        const uint16_t *wb = (const uint16_t *)w[i].data;
        double worst = 0;
        for (int t = 0; t < RMAX; t++)
            for (int n = 0; n < rows[i]; n++) {
                double sum = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    uint32_t u = (uint32_t)wb[(size_t)n * K + k] << 16;
                    float wv;
                    memcpy(&wv, &u, 4);
                    sum += (double)wv * x[(size_t)t * K + k], mag += fabs((double)wv * x[(size_t)t * K + k]);
                }
                double d = fabs(all[i][(size_t)t * rows[i] + n] - sum) / (mag + 1e-30);
                if (d > worst) worst = d;
            }
        CHECK_MSG(worst <= 1e-5, "thin weight %d: worst |error| / sum|w·x| %.3g", i, worst);
    }
    for (int i = 0; i < NW; i++) be->ops->buf_free(be, by[i]), be->ops->buf_free(be, by[NW + i]), free(store[i]), free(all[i]);
    be->ops->buf_free(be, bx);
    free(x), free(a), free(b);
    be_free(be);
}

TEST(test_matmul_n_equals_matmul_per_weight) {
    be_backend *be = cuda_new();
    if (!be) SKIP("%s", g_why);
    matmul_n_check(be, (fmt){DT_BF16, 0, 0, 0});
    matmul_n_check(be, (fmt){DT_U32, 4, 64, 0});
    matmul_n_check(be, (fmt){DT_U32, 8, 32, DT_F16});
    be_free(be);
}

/* Gated attention: a 6-row prefill equals 6 single-row decodes bit for bit, and matches the CPU
 * backend's result within fp32 rounding. */
/* Plain causal attention of R rows from position 0 in double precision (no norms, no RoPE: the
 * args' q_norm / k_norm NULL and rotary_dim 0), gated: the reference for long contexts. */
static void attn_naive(float *out, const float *big, int R, int bw, int qs, int k_off, int v_off, int nH, int nKV,
                       int Dh, float scale) {
    double *p = malloc(sizeof(double) * R);
    REQUIRE(p);
    for (int t = 0; t < R; t++)
        for (int h = 0; h < nH; h++) {
            const float *q = big + (size_t)t * bw + (size_t)h * qs;
            int kvh = h / (nH / nKV);
            double m = -1e300, l = 0;
            for (int j = 0; j <= t; j++) {
                const float *k = big + (size_t)j * bw + k_off + (size_t)kvh * Dh;
                double d = 0;
                for (int i = 0; i < Dh; i++) d += (double)q[i] * k[i];
                p[j] = d * scale;
                if (p[j] > m) m = p[j];
            }
            for (int j = 0; j <= t; j++) l += (p[j] = exp(p[j] - m));
            for (int i = 0; i < Dh; i++) {
                double o = 0;
                for (int j = 0; j <= t; j++) o += p[j] * big[(size_t)j * bw + v_off + (size_t)kvh * Dh + i];
                out[((size_t)t * nH + h) * Dh + i] = (float)(o / l / (1.0 + exp(-(double)q[Dh + i])));
            }
        }
    free(p);
}

/* CPU attention over 700 positions in 45 pages against attn_naive: within 1e-4. */
TEST(test_attention_long_cpu_matches_naive) {
    be_backend *cpu = NULL;
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    enum { R = 700, CAP = 720, PS = 16, nH = 4, nKV = 2, Dh = 64 };
    int qs = 2 * Dh, kvw = nKV * Dh, k_off = nH * qs, v_off = k_off + kvw, att_off = v_off + kvw, bw = att_off + nH * Dh;
    float *big = malloc(sizeof(float) * R * bw), *ref = malloc(sizeof(float) * R * nH * Dh);
    float *k = calloc((size_t)nKV * CAP * Dh, 4), *v = calloc((size_t)nKV * CAP * Dh, 4);
    float *sc = malloc(4 * cpu->ops->attn_scratch_floats(cpu, CAP, 1));
    int32_t pages[CAP / PS];
    REQUIRE(big && ref && k && v && sc);
    for (int i = 0; i < CAP / PS; i++) pages[i] = CAP / PS - 1 - i;
    fill(big, (size_t)R * bw);
    float inv_freq[1] = {1.0f};
    attn_naive(ref, big, R, bw, qs, k_off, v_off, nH, nKV, Dh, 0.125f);
    be_attn_args a = {big, bw, qs, k_off, v_off, att_off, nH, nKV, Dh, 0, 1, inv_freq, 1.0f, NULL, NULL, 1e-6f, 0.125f};
    be_seq_kv kv = {k, v, pages, CAP / PS, PS};
    cpu->ops->attention(cpu, &a, &kv, 0, R, sc);
    double worst = 0;
    for (int t = 0; t < R; t++)
        for (int i = 0; i < nH * Dh; i++) {
            double d = fabs((double)big[(size_t)t * bw + att_off + i] - ref[(size_t)t * nH * Dh + i]);
            if (d > worst) worst = d;
        }
    CHECK_MSG(worst < 1e-4, "CPU attention over 700 positions: worst |CPU - naive| %.3g", worst);
    free(big), free(ref), free(k), free(v), free(sc);
    be_free(cpu);
}

/* Attention of R rows from position 0 over a paged cache of CAP positions in pages of PS (the page
 * table in reverse pool order): the GPU within 1e-4 of the CPU backend, and each row decoded alone
 * bit-identical to its row of the R-row prefill, which writes the same KV. */
static void attn_check(be_backend *be, be_backend *cpu, int R, int CAP, int PS, int plain) {
    enum { nH = 4, nKV = 2, Dh = 64 };
    int qs = 2 * Dh, kvw = nKV * Dh, k_off = nH * qs, v_off = k_off + kvw, att_off = v_off + kvw, bw = att_off + nH * Dh;
    int npages = CAP / PS;
    /* static, filled once: a device backend keeps its copies of these keyed by address */
    static float inv_freq[Dh / 4], qn[Dh], kn[Dh];
    if (!inv_freq[0]) {
        for (int i = 0; i < Dh / 4; i++) inv_freq[i] = powf(10000.f, -2.0f * i / (Dh / 2));
        fill(qn, Dh), fill(kn, Dh);
    }
    size_t kvn = (size_t)nKV * CAP * Dh, sn = cpu->ops->attn_scratch_floats(cpu, CAP, Dh / 2);
    float *proj = malloc(sizeof(float) * R * bw), *cbig = malloc(sizeof(float) * R * bw);
    float *gall = malloc(sizeof(float) * R * bw), *grow = malloc(sizeof(float) * bw);
    float *ck = calloc(kvn, 4), *cv = calloc(kvn, 4), *sc = malloc(4 * sn);
    int32_t *pages = malloc(sizeof(int32_t) * npages);
    REQUIRE(proj && cbig && gall && grow && ck && cv && sc && pages);
    for (int i = 0; i < npages; i++) pages[i] = npages - 1 - i;
    fill(proj, (size_t)R * bw);
    be_attn_args a = {cbig, bw, qs, k_off, v_off, att_off, nH, nKV, Dh, Dh / 2, 1, inv_freq, 1.0f, qn, kn, 1e-6f,
                      0.125f};
    memcpy(cbig, proj, sizeof(float) * R * bw);
    be_seq_kv ckv = {ck, cv, pages, npages, PS};
    if (plain) { /* no norms, no RoPE: the reference is attn_naive, written where the CPU would write */
        a.rotary_dim = 0, a.q_norm = a.k_norm = NULL;
        float *ref = malloc(sizeof(float) * R * nH * Dh);
        REQUIRE(ref);
        attn_naive(ref, proj, R, bw, qs, k_off, v_off, nH, nKV, Dh, a.scale);
        for (int t = 0; t < R; t++) memcpy(cbig + (size_t)t * bw + att_off, ref + (size_t)t * nH * Dh, sizeof(float) * nH * Dh);
        free(ref);
    } else {
        cpu->ops->attention(cpu, &a, &ckv, 0, R, sc);
    }
    be_buf *bb, *bk1, *bv1, *bk2, *bv2;
    float *dbig = dev_floats(be, proj, (size_t)R * bw, &bb);
    float *k1 = dev_floats(be, NULL, kvn, &bk1), *v1 = dev_floats(be, NULL, kvn, &bv1);
    float *k2 = dev_floats(be, NULL, kvn, &bk2), *v2 = dev_floats(be, NULL, kvn, &bv2);
    REQUIRE(dbig && k1 && v1 && k2 && v2);
    /* positions past R are never written: zero them in both caches (device memory is not zeroed) */
    be->ops->fill_zero(be, k1, 4 * kvn), be->ops->fill_zero(be, v1, 4 * kvn);
    be->ops->fill_zero(be, k2, 4 * kvn), be->ops->fill_zero(be, v2, 4 * kvn);
    be_attn_args g = a;
    g.big = dbig;
    be_seq_kv kv1 = {k1, v1, pages, npages, PS}, kv2 = {k2, v2, pages, npages, PS};
    be->ops->attention(be, &g, &kv1, 0, R, NULL);
    be->ops->download(be, gall, dbig, sizeof(float) * R * bw);
    double worst = 0;
    for (int t = 0; t < R; t++)
        for (int i = 0; i < nH * Dh; i++) {
            double d = fabs((double)gall[(size_t)t * bw + att_off + i] - cbig[(size_t)t * bw + att_off + i]);
            if (d > worst) worst = d;
        }
    CHECK_MSG(worst < 1e-4, "attention R=%d%s: worst |GPU - %s| %.3g", R, plain ? " (plain)" : "", plain ? "naive" : "CPU",
              worst);
    int bad = -1;
    for (int t = 0; t < R; t++) {
        be->ops->upload(be, dbig, proj + (size_t)t * bw, sizeof(float) * bw);
        be->ops->attention(be, &g, &kv2, t, 1, NULL);
        be->ops->download(be, grow, dbig, sizeof(float) * bw);
        if (bad < 0 && memcmp(grow + att_off, gall + (size_t)t * bw + att_off, sizeof(float) * nH * Dh)) bad = t;
    }
    CHECK_MSG(bad < 0, "attention R=%d row %d: prefill and decode differ", R, bad);
    float *h1 = malloc(4 * kvn), *h2 = malloc(4 * kvn);
    REQUIRE(h1 && h2);
    be->ops->download(be, h1, k1, 4 * kvn), be->ops->download(be, h2, k2, 4 * kvn);
    CHECK(memcmp(h1, h2, 4 * kvn) == 0);
    be->ops->buf_free(be, bb), be->ops->buf_free(be, bk1), be->ops->buf_free(be, bv1);
    be->ops->buf_free(be, bk2), be->ops->buf_free(be, bv2);
    free(proj), free(cbig), free(gall), free(grow), free(ck), free(cv), free(sc), free(h1), free(h2), free(pages);
}

TEST(test_attention_prefill_equals_decode_and_cpu) {
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    attn_check(be, cpu, 6, 8, 4, 0); /* one chunk of keys */
    for (int plain = 1; plain >= 0; plain--) {
        attn_check(be, cpu, 250, 256, 16, plain); /* one chunk, 16 pages */
        attn_check(be, cpu, 300, 320, 16, plain); /* two chunks of 256 keys (cuda_seq.cu's ATT_CHUNK), merged */
        attn_check(be, cpu, 700, 720, 16, plain); /* three */
    }
    be_free(cpu);
    be_free(be);
}

/* GDN: a capturing R-row call replayed to keep = 0..R rows gives the state of a plain keep-row call
 * bit for bit; the outputs match the CPU backend within fp32 rounding. Key / value heads of 32 and of
 * 128, the real models' width (JK = 4 in cuda_seq.cu's register kernel; the goldens' heads are 8-64). */
enum { GR_HK = 2, GR_HV = 4, GR_DMAX = 128, GR_CASES = 2 };
/* The per-layer host arrays of each case: static and one set per case, because a device backend
 * keeps its copy of such an array keyed by the host address (weights do not change): two cases
 * sharing stack addresses would give the second case the first one's dt_bias. */
static float gr_negA[GR_CASES][GR_HV], gr_dtb[GR_CASES][GR_HV], gr_nrm[GR_CASES][GR_DMAX];

static void gdn_replay_case(be_backend *be, be_backend *cpu, int slot, int R, int Dk, int Dv) {
    enum { Hk = GR_HK, Hv = GR_HV };
    int kd = Hk * Dk, vd = Hv * Dv, b_off = vd, a_off = b_off + Hv, u_off = a_off + Hv, y_off = u_off + 2 * kd + vd;
    int bw = y_off + vd;
    size_t sn = (size_t)Hv * Dv * Dk;
    float *negA = gr_negA[slot], *dtb = gr_dtb[slot], *nrm = gr_nrm[slot];
    for (int i = 0; i < Hv; i++) negA[i] = -0.5f - 0.1f * i, dtb[i] = 0.1f * frand();
    for (int i = 0; i < Dv; i++) nrm[i] = 1.0f + 0.1f * frand();
    float *big = malloc(sizeof(float) * R * bw), *cbig = malloc(sizeof(float) * R * bw), *s0 = malloc(4 * sn);
    float *cs = malloc(4 * sn), *cq = malloc(sizeof(float) * R * kd), *ck = malloc(sizeof(float) * R * kd);
    float *gbig = malloc(sizeof(float) * R * bw), *st1 = malloc(4 * sn), *st2 = malloc(4 * sn);
    REQUIRE(big && cbig && s0 && cs && cq && ck && gbig && st1 && st2);
    fill(big, (size_t)R * bw);
    for (size_t i = 0; i < sn; i++) s0[i] = 0.1f * frand();
    memcpy(cbig, big, sizeof(float) * R * bw);
    be_gdn_args c = {cbig, bw, b_off, a_off, u_off, y_off, Hk, Hv, Dk, Dv, negA, dtb, nrm, 1e-6f,
                     s0, cs, cq, ck, NULL, NULL};
    cpu->ops->gdn(cpu, &c, R);
    be_buf *bb, *bs0, *bsd, *bq, *bk, *btg, *btd, *bs2;
    float *dbig = dev_floats(be, big, (size_t)R * bw, &bb), *ds0 = dev_floats(be, s0, sn, &bs0);
    float *dsd = dev_floats(be, NULL, sn, &bsd), *dq = dev_floats(be, NULL, (size_t)R * kd, &bq);
    float *dk = dev_floats(be, NULL, (size_t)R * kd, &bk), *tg = dev_floats(be, NULL, (size_t)R * Hv, &btg);
    float *td = dev_floats(be, NULL, (size_t)R * vd, &btd), *ds2 = dev_floats(be, NULL, sn, &bs2);
    REQUIRE(dbig && ds0 && dsd && dq && dk && tg && td && ds2);
    be_gdn_args g = {dbig, bw, b_off, a_off, u_off, y_off, Hk, Hv, Dk, Dv, negA, dtb, nrm, 1e-6f,
                     ds0, dsd, dq, dk, tg, td};
    be->ops->gdn(be, &g, R);
    be->ops->download(be, gbig, dbig, sizeof(float) * R * bw);
    be->ops->download(be, st1, dsd, 4 * sn);
    double worst = 0;
    for (int t = 0; t < R; t++)
        for (int i = 0; i < vd; i++) {
            double d = fabs((double)gbig[(size_t)t * bw + y_off + i] - cbig[(size_t)t * bw + y_off + i]);
            if (d > worst) worst = d;
        }
    for (size_t i = 0; i < sn; i++) {
        double d = fabs((double)st1[i] - cs[i]);
        if (d > worst) worst = d;
    }
    CHECK_MSG(worst < 1e-4, "gdn Dk %d: worst |GPU - CPU| %.3g", Dk, worst);
    for (int keep = 0; keep <= R; keep++) {
        be->ops->copy(be, ds2, dsd, 4 * sn);
        be->ops->gdn_replay(be, ds2, ds0, dk, tg, td, keep, Hk, Hv, Dk, Dv);
        be->ops->download(be, st2, ds2, 4 * sn);
        if (keep) { /* the plain call of `keep` rows, from the same inputs */
            be->ops->upload(be, dbig, big, sizeof(float) * R * bw);
            be_gdn_args p = g;
            p.dst = dsd, p.tape_g = NULL, p.tape_d = NULL;
            be_buf *bq2, *bk2;
            p.qn = dev_floats(be, NULL, (size_t)R * kd, &bq2), p.kn = dev_floats(be, NULL, (size_t)R * kd, &bk2);
            be->ops->gdn(be, &p, keep);
            be->ops->download(be, st1, dsd, 4 * sn);
            be->ops->buf_free(be, bq2), be->ops->buf_free(be, bk2);
        } else {
            memcpy(st1, s0, 4 * sn);
        }
        CHECK_MSG(memcmp(st1, st2, 4 * sn) == 0, "Dk %d: replay of %d rows differs from a %d-row call", Dk, keep, keep);
        /* restore the R-row state and tapes for the next keep */
        be->ops->upload(be, dbig, big, sizeof(float) * R * bw);
        be->ops->gdn(be, &g, R);
    }
    be_buf *bufs[] = {bb, bs0, bsd, bq, bk, btg, btd, bs2};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->ops->buf_free(be, bufs[i]);
    free(big), free(cbig), free(s0), free(cs), free(cq), free(ck), free(gbig), free(st1), free(st2);
}

TEST(test_gdn_replay_bit_identical_and_matches_cpu) {
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    gdn_replay_case(be, cpu, 0, 5, 32, 32);
    gdn_replay_case(be, cpu, 1, 9, 128, 128);
    be_free(cpu);
    be_free(be);
}

/* A check run on a fresh CPU backend, or on a fresh CUDA backend (the test skipped without one). */
static void on_cpu(void (*check)(be_backend *be)) {
    be_backend *cpu = NULL;
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    check(cpu);
    be_free(cpu);
}

static void on_cuda(void (*check)(be_backend *be)) {
    be_backend *be = cuda_new();
    if (!be) SKIP("%s", g_why);
    check(be);
    be_free(be);
}

/* ---- batched sequence ops (attention_seqs, mla_seqs, gdn_seqs) against per-sequence calls ---- */

enum { SQ_NH = 4, SQ_NKV = 2, SQ_DH = 64, SQ_PS = 4, SQ_PAGES = 4, SQ_MAXR = 5, SQ_MAXN = 8 };
enum { SQ_HK = 2, SQ_HV = 4, SQ_DK = 32, SQ_DV = 32, SQ_KC = 4 };
enum { SQ_KD = SQ_HK * SQ_DK, SQ_VD = SQ_HV * SQ_DV, SQ_C = 2 * SQ_KD + SQ_VD, SQ_SN = SQ_HV * SQ_DV * SQ_DK };
/* attention rows: q (gated: 2·Dh a head) | k | v | output */
enum { SQ_QS = 2 * SQ_DH, SQ_KOFF = SQ_NH * SQ_QS, SQ_VOFF = SQ_KOFF + SQ_NKV * SQ_DH, SQ_AOFF = SQ_VOFF + SQ_NKV * SQ_DH,
       SQ_ABW = SQ_AOFF + SQ_NH * SQ_DH };
/* GDN rows: z | b | a | u (pre-conv q k v, then the conv output) | y */
enum { SQ_BOFF = SQ_VD, SQ_AAOFF = SQ_BOFF + SQ_HV, SQ_UOFF = SQ_AAOFF + SQ_HV, SQ_YOFF = SQ_UOFF + SQ_C,
       SQ_GBW = SQ_YOFF + SQ_VD };

/* MLA rows: q (nH heads of Dn + Dr) | compressed kv (kv_lora, then the rope key) | kv_b out (Dn + Dv a
 * head) | output */
enum { SQ_MH = 2, SQ_MDN = 32, SQ_MDR = 16, SQ_MDV = 32, SQ_MKVL = 32, SQ_MDK = SQ_MDN + SQ_MDR };
enum { SQ_MCKV = SQ_MH * SQ_MDK, SQ_MKVB = SQ_MCKV + SQ_MKVL + SQ_MDR, SQ_MATT = SQ_MKVB + SQ_MH * (SQ_MDN + SQ_MDV),
       SQ_MBW = SQ_MATT + SQ_MH * SQ_MDV };

/* Per-layer host arrays the ops read (static: a device backend keeps copies keyed by address). */
static float sq_mla_freq[SQ_MDR / 2], sq_inv_freq[SQ_DH / 4], sq_qn[SQ_DH], sq_kn[SQ_DH], sq_conv_w[SQ_C * SQ_KC], sq_negA[SQ_HV],
    sq_dtb[SQ_HV], sq_norm[SQ_DV];

/* The per-layer arrays above, filled once. */
static void sq_init(void) {
    if (sq_inv_freq[0]) return;
    for (int i = 0; i < SQ_DH / 4; i++) sq_inv_freq[i] = powf(10000.f, -2.0f * i / (SQ_DH / 2));
    for (int i = 0; i < SQ_MDR / 2; i++) sq_mla_freq[i] = powf(10000.f, -2.0f * i / SQ_MDR);
    fill(sq_qn, SQ_DH), fill(sq_kn, SQ_DH), fill(sq_conv_w, SQ_C * SQ_KC), fill(sq_dtb, SQ_HV);
    for (int i = 0; i < SQ_HV; i++) sq_negA[i] = -0.5f - 0.1f * i;
    for (int i = 0; i < SQ_DV; i++) sq_norm[i] = 1.0f + 0.1f * frand();
}

/* Offsets (floats) of everything one check touches, in one arena of backend memory. Sequence i owns
 * SQ_PAGES private pages of the KV pools, a conv state, two recurrent states and a capture tape;
 * the shared conv window comes last (scratch: not compared). */
typedef struct {
    size_t abig, kpool, vpool, mbig, mk, mv, gbig, qk, seq0, seq_stride, win, total;
    size_t conv, rec0, rec1, twin, tk, tg, td; /* within a sequence's block */
} sq_layout;

static sq_layout sq_layout_of(int Rtot) {
    sq_layout L;
    size_t pool = (size_t)SQ_MAXN * SQ_PAGES * SQ_NKV * SQ_PS * SQ_DH, at = 0;
    L.abig = at, at += (size_t)Rtot * SQ_ABW;
    L.kpool = at, at += pool;
    L.vpool = at, at += pool;
    L.mbig = at, at += (size_t)Rtot * SQ_MBW;
    L.mk = at, at += (size_t)SQ_MAXN * SQ_PAGES * SQ_MH * SQ_PS * SQ_MDK;
    L.mv = at, at += (size_t)SQ_MAXN * SQ_PAGES * SQ_MH * SQ_PS * SQ_MDV;
    L.gbig = at, at += (size_t)Rtot * SQ_GBW;
    L.qk = at, at += 2 * (size_t)Rtot * SQ_KD;
    L.conv = 0, L.rec0 = (SQ_KC - 1) * SQ_C, L.rec1 = L.rec0 + SQ_SN, L.twin = L.rec1 + SQ_SN;
    L.tk = L.twin + (size_t)(SQ_KC - 1 + SQ_MAXR) * SQ_C, L.tg = L.tk + SQ_MAXR * SQ_KD, L.td = L.tg + SQ_MAXR * SQ_HV;
    L.seq_stride = L.td + SQ_MAXR * SQ_VD;
    L.seq0 = at, at += SQ_MAXN * L.seq_stride;
    L.win = at, at += (size_t)(SQ_KC - 1 + Rtot) * SQ_C;
    L.total = at;
    return L;
}

/* The gated attention and the MLA of n sequences (as[i] / ms[i]: their caches, positions and rows): one
 * attention_seqs and one mla_seqs call (batched), or what those must equal, one attention and one mla call
 * a sequence over its rows of a->big / ma->rows. */
static void sq_attn_mla(be_backend *be, const be_attn_args *a, const be_attn_seq *as, const be_mla_args *ma,
                        const be_attn_seq *ms, int n, float *scratch, int batched) {
    if (batched) {
        be->ops->attention_seqs(be, a, as, n, scratch);
        be->ops->mla_seqs(be, ma, ms, n, scratch);
        return;
    }
    for (int i = 0; i < n; i++) {
        be_attn_args ai = *a;
        ai.big = a->big + (size_t)as[i].r0 * a->ldb;
        be->ops->attention(be, &ai, &as[i].kv, as[i].pos0, as[i].R, scratch);
        be_mla_args mi = *ma;
        mi.rows = ma->rows + (size_t)ms[i].r0 * ma->ldr;
        be->ops->mla(be, &mi, &ms[i].kv, ms[i].pos0, ms[i].R, scratch);
    }
}

/* Zeroes the query and key parts of Rtot attention rows at abig (stride SQ_ABW), which the attention ops
 * leave unspecified; the gates and values stay. */
static void sq_mask_qk(float *abig, int Rtot) {
    for (int t = 0; t < Rtot; t++) {
        float *row = abig + (size_t)t * SQ_ABW;
        for (int j = 0; j < SQ_NH; j++) memset(row + j * SQ_QS, 0, sizeof(float) * SQ_DH);
        memset(row + SQ_KOFF, 0, sizeof(float) * SQ_NKV * SQ_DH);
    }
}

/* One layer of n random sequences (R_i rows at pos0_i — every R_i 1 when `decode` —, random page
 * tables; even ones capture their GDN rows) through attention_seqs + mla_seqs + gdn_seqs (mode 1),
 * through the per-sequence ops as the forward called them before (mode 0: attention; mla; copy,
 * conv1d_silu, copy, gdn), or through nothing (mode -1).
 * Returns the arena afterwards (the caller frees it) with the attention rows' query and key parts
 * zeroed (the op leaves them unspecified), and in *n_cmp the floats before the shared window; the
 * random draws depend on `seed` only. */
static float *sq_run(be_backend *be, int n, uint64_t seed, int mode, int decode, size_t *n_cmp) {
    g_rng = seed;
    int R[SQ_MAXN], pos0[SQ_MAXN], r0[SQ_MAXN], Rtot = 0;
    int32_t pages[SQ_MAXN][SQ_PAGES], perm[SQ_MAXN * SQ_PAGES];
    for (int i = 0; i < n; i++) {
        R[i] = 1 + (int)((frand() + 1.0f) * 0.5f * SQ_MAXR) % SQ_MAXR;
        if (decode) R[i] = 1;
        pos0[i] = (int)((frand() + 1.0f) * 0.5f * (SQ_PAGES * SQ_PS - R[i] + 1)) % (SQ_PAGES * SQ_PS - R[i] + 1);
        r0[i] = Rtot, Rtot += R[i];
    }
    for (int i = 0; i < SQ_MAXN * SQ_PAGES; i++) perm[i] = i;
    for (int i = SQ_MAXN * SQ_PAGES - 1; i > 0; i--) { /* a random pool order */
        int j = (int)((frand() + 1.0f) * 0.5f * (i + 1)) % (i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int i = 0; i < n; i++) memcpy(pages[i], perm + i * SQ_PAGES, sizeof pages[i]);
    sq_layout L = sq_layout_of(Rtot);
    *n_cmp = L.win;
    float *h = malloc(sizeof(float) * L.total);
    if (!h) return NULL;
    for (size_t i = 0; i < L.total; i++) h[i] = frand();
    for (int i = 0; i < n; i++) /* small recurrent states, as a model's */
        for (size_t j = 0; j < 2 * SQ_SN; j++) h[L.seq0 + i * L.seq_stride + L.rec0 + j] *= 0.1f;
    be_buf *b;
    mtplx_err err = {0};
    if (be->ops->buf_alloc(be, sizeof(float) * L.total, 0, "test arena", &b, &err)) return free(h), NULL;
    float *d = be_buf_addr(be, b);
    be->ops->upload(be, d, h, sizeof(float) * L.total);

    be_attn_args a = {d + L.abig, SQ_ABW, SQ_QS, SQ_KOFF, SQ_VOFF, SQ_AOFF, SQ_NH, SQ_NKV, SQ_DH, SQ_DH / 2, 1,
                      sq_inv_freq, 1.0f, sq_qn, sq_kn, 1e-6f, 0.125f};
    be_attn_seq as[SQ_MAXN];
    for (int i = 0; i < n; i++)
        as[i] = (be_attn_seq){{d + L.kpool, d + L.vpool, pages[i], SQ_PAGES, SQ_PS}, pos0[i], r0[i], R[i]};
    be_mla_args ma = {d + L.mbig, SQ_MBW, 0, SQ_MCKV, SQ_MKVB, SQ_MATT, SQ_MH, SQ_MDN, SQ_MDR, SQ_MDV, SQ_MKVL, 1,
                      sq_mla_freq, 1.0f, 0.1f};
    be_attn_seq ms[SQ_MAXN];
    for (int i = 0; i < n; i++)
        ms[i] = (be_attn_seq){{d + L.mk, d + L.mv, pages[i], SQ_PAGES, SQ_PS}, pos0[i], r0[i], R[i]};
    int rows_in_win = n == 1;
    be_gdn_seq gs[SQ_MAXN];
    for (int i = 0; i < n; i++) {
        float *q = d + L.seq0 + i * L.seq_stride;
        int cap = i % 2 == 0;
        gs[i] = (be_gdn_seq){r0[i], R[i], q + L.conv, cap ? q + L.twin : d + L.win, cap, q + L.rec0,
                             cap ? q + L.rec1 : q + L.rec0, d + L.qk + (size_t)r0[i] * SQ_KD,
                             cap ? q + L.tk : d + L.qk + (size_t)(Rtot + r0[i]) * SQ_KD, cap ? q + L.tg : NULL,
                             cap ? q + L.td : NULL};
    }
    be_gdn_args g = {d + L.gbig, SQ_GBW, SQ_BOFF, SQ_AAOFF, SQ_UOFF, SQ_YOFF, SQ_HK, SQ_HV, SQ_DK, SQ_DV, sq_negA,
                     sq_dtb, sq_norm, 1e-6f, NULL, NULL, NULL, NULL, NULL, NULL};
    be_conv_args cv = {sq_conv_w, SQ_C, SQ_KC, rows_in_win};
    size_t sc_n = be->ops->attn_scratch_floats(be, SQ_PAGES * SQ_PS, SQ_DH / 2);
    float *scratch = malloc(sizeof(float) * sc_n); /* host memory: only the CPU backend uses it */
    if (mode == 1) {
        sq_attn_mla(be, &a, as, &ma, ms, n, scratch, 1);
        be->ops->gdn_seqs(be, &g, &cv, gs, n);
    } else if (mode == 0) {
        const size_t f = sizeof(float);
        int kc1 = SQ_KC - 1;
        sq_attn_mla(be, &a, as, &ma, ms, n, scratch, 0);
        for (int i = 0; i < n; i++) {
            const be_gdn_seq *q = &gs[i];
            float *row0 = g.big + (size_t)q->r0 * SQ_GBW;
            be->ops->copy(be, q->win, q->conv, f * kc1 * SQ_C);
            if (!rows_in_win)
                for (int t = 0; t < q->R; t++)
                    be->ops->copy(be, q->win + (size_t)(kc1 + t) * SQ_C, row0 + (size_t)t * SQ_GBW + SQ_UOFF, f * SQ_C);
            be->ops->conv1d_silu(be, row0 + SQ_UOFF, SQ_GBW, q->win, SQ_C, sq_conv_w, SQ_C, SQ_KC, q->R);
            be->ops->copy(be, q->conv, q->win + (size_t)q->R * SQ_C, f * kc1 * SQ_C);
            be_gdn_args gi = g;
            gi.big = row0, gi.src = q->src, gi.dst = q->dst, gi.qn = q->qn, gi.kn = q->kn;
            gi.tape_g = q->tape_g, gi.tape_d = q->tape_d;
            be->ops->gdn(be, &gi, q->R);
        }
    }
    be->ops->download(be, h, d, sizeof(float) * L.total);
    be->ops->buf_free(be, b);
    free(scratch);
    sq_mask_qk(h + L.abig, Rtot);
    return h;
}

/* n = 1..8 random sequences through the batched ops and through per-sequence calls, with rows as
 * drawn and with one row a sequence (decode steps; a device backend may prepare the queries and keys
 * inside its attention blocks then): the whole arena but the attention inputs' queries and keys
 * (attention outputs and gates, KV pages, conv outputs and states, recurrent states, tapes, windows of
 * the capturing sequences) bit-identical; and the batched ops change something (a twentieth of the
 * compared floats; a fiftieth with one row a sequence). */
static void sq_check(be_backend *be) {
    sq_init();
    for (int c = 0; c < 2 * SQ_MAXN; c++) {
        int n = 1 + c % SQ_MAXN, dec = c >= SQ_MAXN;
        uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)n + 1;
        size_t nc;
        float *x = sq_run(be, n, seed, 1, dec, &nc), *y = sq_run(be, n, seed, 0, dec, &nc);
        float *z = sq_run(be, n, seed, -1, dec, &nc);
        REQUIRE(x && y && z);
        size_t differ = 0, first = 0, moved = 0;
        for (size_t i = 0; i < nc; i++) {
            if (memcmp(&x[i], &y[i], sizeof(float)) && differ++ == 0) first = i;
            moved += memcmp(&x[i], &z[i], sizeof(float)) != 0;
        }
        CHECK_MSG(differ == 0, "%s, %d sequences%s: %zu floats differ from per-sequence calls (first at %zu of %zu)",
                  be->ops->name, n, dec ? " of one row" : "", differ, first, nc);
        CHECK_MSG(moved > nc / (dec ? 50 : 20), "%s, %d sequences%s: the ops changed only %zu of %zu floats", be->ops->name, n,
                  dec ? " of one row" : "", moved, nc);
        free(z);
        free(x), free(y);
    }
}

/* ---- attention_seqs over long contexts (queries over several key chunks) against per-sequence calls ---- */

enum { LQ_PS = 16, LQ_PAGES = 64, LQ_MAXN = 4 }; /* 1,024 positions a sequence */

/* n sequences at positions pos0_i in [260, 1000) with R_i rows (1 when `decode`, else 1..5), their caches
 * holding random keys and values below pos0_i (random page tables), through attention_seqs + mla_seqs
 * (mode 1) or one attention and one mla call a sequence (mode 0). Returns the attention rows, the MLA rows
 * and the four caches afterwards, the attention rows' queries and keys zeroed (unspecified after the
 * op), in *n_cmp floats (the caller frees); the draws depend on `seed` only. */
static float *lq_run(be_backend *be, int n, uint64_t seed, int mode, int decode, size_t *n_cmp) {
    g_rng = seed;
    int R[LQ_MAXN], pos0[LQ_MAXN], r0[LQ_MAXN], Rtot = 0;
    int32_t pages[LQ_MAXN][LQ_PAGES];
    for (int i = 0; i < n; i++) {
        R[i] = decode ? 1 : 1 + (int)((frand() + 1.0f) * 2.5f) % SQ_MAXR;
        pos0[i] = 260 + (int)((frand() + 1.0f) * 370.0f) % 740;
        r0[i] = Rtot, Rtot += R[i];
        for (int j = 0; j < LQ_PAGES; j++) pages[i][j] = i + LQ_MAXN * (LQ_PAGES - 1 - j); /* interleaved, reversed */
    }
    size_t pool = (size_t)LQ_MAXN * LQ_PAGES * SQ_NKV * LQ_PS * SQ_DH, nb = (size_t)Rtot * SQ_ABW;
    size_t mpos = (size_t)LQ_MAXN * LQ_PAGES * SQ_MH * LQ_PS, mrows = nb + 2 * pool, mk = mrows + (size_t)Rtot * SQ_MBW;
    size_t mv = mk + mpos * SQ_MDK, total = mv + mpos * SQ_MDV;
    float *h = malloc(sizeof(float) * total);
    if (!h) return NULL;
    for (size_t i = 0; i < total; i++) h[i] = frand();
    be_buf *b;
    mtplx_err err = {0};
    if (be->ops->buf_alloc(be, sizeof(float) * total, 0, "test arena", &b, &err)) return free(h), NULL;
    float *d = be_buf_addr(be, b);
    be->ops->upload(be, d, h, sizeof(float) * total);
    be_attn_args a = {d, SQ_ABW, SQ_QS, SQ_KOFF, SQ_VOFF, SQ_AOFF, SQ_NH, SQ_NKV, SQ_DH, SQ_DH / 2, 1,
                      sq_inv_freq, 1.0f, sq_qn, sq_kn, 1e-6f, 0.125f};
    be_attn_seq as[LQ_MAXN];
    for (int i = 0; i < n; i++)
        as[i] = (be_attn_seq){{d + nb, d + nb + pool, pages[i], LQ_PAGES, LQ_PS}, pos0[i], r0[i], R[i]};
    be_mla_args ma = {d + mrows, SQ_MBW, 0, SQ_MCKV, SQ_MKVB, SQ_MATT, SQ_MH, SQ_MDN, SQ_MDR, SQ_MDV, SQ_MKVL, 1,
                      sq_mla_freq, 1.0f, 0.1f};
    be_attn_seq ms[LQ_MAXN];
    for (int i = 0; i < n; i++)
        ms[i] = (be_attn_seq){{d + mk, d + mv, pages[i], LQ_PAGES, LQ_PS}, pos0[i], r0[i], R[i]};
    float *scratch = malloc(sizeof(float) * be->ops->attn_scratch_floats(be, LQ_PAGES * LQ_PS, SQ_DH / 2));
    sq_attn_mla(be, &a, as, &ma, ms, n, scratch, mode == 1);
    be->ops->download(be, h, d, sizeof(float) * total);
    be->ops->buf_free(be, b);
    free(scratch);
    sq_mask_qk(h, Rtot);
    *n_cmp = total;
    return h;
}

/* 1..4 sequences of one row (decode steps) and of 1..5 rows over 260..1,000 keys through attention_seqs and
 * mla_seqs and through per-sequence attention and mla calls: outputs and caches bit-identical. */
static void lq_check(be_backend *be) {
    sq_init();
    for (int c = 0; c < 2 * LQ_MAXN; c++) {
        int n = 1 + c % LQ_MAXN, dec = c < LQ_MAXN;
        uint64_t seed = 0x2545f4914f6cdd1dull * (uint64_t)(c + 1);
        size_t nc = 0, nc2 = 0, differ = 0, first = 0;
        float *x = lq_run(be, n, seed, 1, dec, &nc), *y = lq_run(be, n, seed, 0, dec, &nc2);
        REQUIRE(x && y && nc == nc2);
        for (size_t i = 0; i < nc; i++)
            if (memcmp(&x[i], &y[i], sizeof(float)) && differ++ == 0) first = i;
        CHECK_MSG(differ == 0, "%s, %d sequences%s over 260..1000 keys: %zu floats differ from per-sequence calls "
                  "(first at %zu of %zu)", be->ops->name, n, dec ? " of one row" : "", differ, first, nc);
        free(x), free(y);
    }
}

TEST(test_attention_seqs_long_cpu_equal_per_sequence_calls) { on_cpu(lq_check); }

TEST(test_attention_seqs_long_cuda_equal_per_sequence_calls) { on_cuda(lq_check); }

/* The CPU backend's attention_seqs / mla_seqs / gdn_seqs (a loop over its per-sequence ops) equal the
 * per-sequence calls bit for bit, n = 1..8. */
TEST(test_seq_ops_cpu_equal_per_sequence_calls) { on_cpu(sq_check); }

/* The CUDA backend's batched sequence ops (one grid over all sequences) equal its per-sequence calls
 * bit for bit, n = 1..8: a row's bits do not depend on n or on the other sequences. */
TEST(test_seq_ops_cuda_equal_per_sequence_calls) { on_cuda(sq_check); }

/* ---- the batched commit (gdn_commit) against per-sequence copies and gdn_replay calls ---- */

/* n random commits (sequence i keeps 1..SQ_MAXR rows of a capture, random states, tapes and conv
 * windows, one arena) through gdn_commit (mode 1), through a copy + gdn_replay per sequence (mode 0,
 * what model_state_commit called per layer before), or through nothing (mode -1). Returns the arena
 * afterwards (the caller frees it) and its floats in *n_cmp; the draws depend on `seed` only. */
static float *cm_run(be_backend *be, int n, uint64_t seed, int mode, size_t *n_cmp) {
    g_rng = seed;
    const size_t conv = (size_t)(SQ_KC - 1) * SQ_C, win = (size_t)(SQ_KC - 1 + SQ_MAXR) * SQ_C;
    const size_t o_win = conv, o_dst = o_win + win, o_start = o_dst + SQ_SN, o_tk = o_start + SQ_SN;
    const size_t o_tg = o_tk + (size_t)SQ_MAXR * SQ_KD, o_td = o_tg + (size_t)SQ_MAXR * SQ_HV;
    const size_t stride = o_td + (size_t)SQ_MAXR * SQ_VD, total = stride * (size_t)n;
    int keep[SQ_MAXN];
    for (int i = 0; i < n; i++) keep[i] = 1 + (int)((frand() + 1.0f) * 0.5f * SQ_MAXR) % SQ_MAXR;
    float *h = malloc(sizeof(float) * total);
    if (!h) return NULL;
    for (size_t i = 0; i < total; i++) h[i] = frand();
    for (int i = 0; i < n; i++) { /* decays in (0, 1), small states and innovations, as a model's */
        float *q = h + (size_t)i * stride;
        for (size_t j = 0; j < 2 * SQ_SN; j++) q[o_dst + j] *= 0.1f;
        for (size_t j = 0; j < (size_t)SQ_MAXR * SQ_HV; j++) q[o_tg + j] = 0.5f + 0.45f * q[o_tg + j];
        for (size_t j = 0; j < (size_t)SQ_MAXR * SQ_VD; j++) q[o_td + j] *= 0.1f;
    }
    *n_cmp = total;
    be_buf *b;
    mtplx_err err = {0};
    if (be->ops->buf_alloc(be, sizeof(float) * total, 0, "test arena", &b, &err)) return free(h), NULL;
    float *d = be_buf_addr(be, b);
    be->ops->upload(be, d, h, sizeof(float) * total);
    be_gdn_commit it[SQ_MAXN];
    for (int i = 0; i < n; i++) {
        float *q = d + (size_t)i * stride;
        it[i] = (be_gdn_commit){q, q + o_win + (size_t)keep[i] * SQ_C, q + o_dst, q + o_start, q + o_tk, q + o_tg,
                                q + o_td, keep[i]};
    }
    if (mode == 1) {
        be->ops->gdn_commit(be, it, n, conv, SQ_HK, SQ_HV, SQ_DK, SQ_DV);
    } else if (mode == 0) {
        for (int i = 0; i < n; i++) {
            be->ops->copy(be, it[i].conv, it[i].conv_src, sizeof(float) * conv);
            be->ops->gdn_replay(be, it[i].dst, it[i].start, it[i].tape_k, it[i].tape_g, it[i].tape_d, keep[i], SQ_HK,
                                SQ_HV, SQ_DK, SQ_DV);
        }
    }
    be->ops->download(be, h, d, sizeof(float) * total);
    be->ops->buf_free(be, b);
    return h;
}

/* n = 1..8 commits through gdn_commit and through per-sequence calls: the whole arena (conv states,
 * replayed states, and everything the op must not touch) bit-identical; and the op changes something. */
static void cm_check(be_backend *be) {
    for (int n = 1; n <= SQ_MAXN; n++) {
        uint64_t seed = 0xd1b54a32d192ed03ull * (uint64_t)n + 7;
        size_t nc;
        float *x = cm_run(be, n, seed, 1, &nc), *y = cm_run(be, n, seed, 0, &nc), *z = cm_run(be, n, seed, -1, &nc);
        REQUIRE(x && y && z);
        size_t differ = 0, first = 0, moved = 0;
        for (size_t i = 0; i < nc; i++) {
            if (memcmp(&x[i], &y[i], sizeof(float)) && differ++ == 0) first = i;
            moved += memcmp(&x[i], &z[i], sizeof(float)) != 0;
        }
        CHECK_MSG(differ == 0, "%s, %d commits: %zu floats differ from per-sequence calls (first at %zu of %zu)",
                  be->ops->name, n, differ, first, nc);
        CHECK_MSG(moved > nc / 10, "%s, %d commits: the op changed only %zu of %zu floats", be->ops->name, n, moved, nc);
        free(x), free(y), free(z);
    }
}

/* The CPU backend's gdn_commit (a loop over copy and gdn_replay) equals those calls, n = 1..8. */
TEST(test_gdn_commit_cpu_equals_per_sequence_calls) { on_cpu(cm_check); }

/* The CUDA backend's gdn_commit (one launch over all items) equals its copies and gdn_replay calls bit
 * for bit, n = 1..8 (so, through test_gdn_replay_bit_identical_and_matches_cpu, a plain keep-row call). */
TEST(test_gdn_commit_cuda_equals_per_sequence_calls) { on_cuda(cm_check); }

/* ---- logits_top: what a top-k / greedy sampler reads of a logits row ---- */

enum { TP_V = 3001, TP_R = 6 };

/* Row t of TP_R random rows built to stress the rank: few distinct values (many ties), -0 next to +0,
 * -inf entries; row 5 also holds a NaN (at 2000) and a +inf (at 1000). */
static void tp_rows(float *x) {
    g_rng = 0x51ed2701u;
    for (int t = 0; t < TP_R; t++)
        for (int j = 0; j < TP_V; j++) {
            float r = frand(), *v = &x[(size_t)t * TP_V + j];
            *v = t % 2 ? r : (float)(int)(r * 8.0f) * 0.25f; /* even rows: ties */
            if (t == 2 && *v == 0.0f && (j & 1)) *v = -0.0f;
            if (t == 4 && j % 3) *v = -INFINITY;
        }
    x[5 * TP_V + 2000] = NAN;
    x[5 * TP_V + 1000] = INFINITY;
}

/* Row t of out (k a row) as a dense row: -inf but the ranked values and the first NaN / +inf (the
 * model layer's expansion, forward.c top_expand). */
static void tp_expand(float *row, const int32_t *o, int k) {
    for (int j = 0; j < TP_V; j++) row[j] = -INFINITY;
    for (int i = 0; i < k && o[i] >= 0; i++) memcpy(&row[o[i]], &o[k + i], sizeof(float));
    if (o[2 * k] >= 0) memcpy(&row[o[2 * k]], &o[2 * k + 1], sizeof(float));
}

/* The CPU's logits_top: for k = 1 / 7 / 20 / 64, sampler_build (greedy for k = 1, else T 0.7 with
 * top_k k, top_p 0.9) gives the same distribution bit for bit from the expanded rows as from the
 * whole rows, or the same error (NaN / +inf). */
TEST(test_logits_top_cpu_gives_the_sampler_the_same_distribution) {
    be_backend *cpu = NULL;
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    float *x = malloc(sizeof(float) * TP_R * TP_V), *row = malloc(sizeof(float) * TP_V);
    int32_t *o = malloc(sizeof(int32_t) * TP_R * (2 * BE_TOP_MAX + 2));
    sampler *smp = NULL;
    sampler_dist a, b;
    REQUIRE(x && row && o && sampler_new(TP_V, &smp, &err) == 0);
    REQUIRE(sampler_dist_init(&a, TP_V, &err) == 0 && sampler_dist_init(&b, TP_V, &err) == 0);
    tp_rows(x);
    static const int ks[] = {1, 7, 20, 64};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int k = ks[ki];
        sampler_params sp = {k == 1 ? 0.0f : 0.7f, 0.9f, k, 0, 0, 0, 1};
        CHECK_INT(sampler_top_needed(&sp, 0, TP_V), k);
        cpu->ops->logits_top(cpu, o, x, TP_V, TP_R, TP_V, k);
        for (int t = 0; t < TP_R; t++) {
            tp_expand(row, o + (size_t)t * (2 * k + 2), k);
            mtplx_err e1 = {0}, e2 = {0};
            int r1 = sampler_build(smp, x + (size_t)t * TP_V, &sp, 0, &a, &e1), r2 = sampler_build(smp, row, &sp, 0, &b, &e2);
            CHECK_MSG(r1 == r2 && !strcmp(e1.msg, e2.msg), "k %d row %d: rc %d '%s' vs %d '%s'", k, t, r1, e1.msg, r2,
                      e2.msg);
            if (r1 || r2) continue;
            CHECK_MSG(a.n == b.n && !memcmp(a.ids, b.ids, sizeof(int32_t) * a.n) &&
                          !memcmp(a.probs, b.probs, sizeof(double) * a.n),
                      "k %d row %d: the distributions differ (%d vs %d ids)", k, t, a.n, b.n);
        }
    }
    CHECK(o[5 * (2 * 64 + 2) + 2 * 64] == 1000); /* the first of the NaN and the +inf */
    sampler_dist_free(&a), sampler_dist_free(&b), sampler_free(smp);
    free(x), free(row), free(o);
    be_free(cpu);
}

/* logits_top of R rows of V logits (ldx apart) with k on the CPU (host x into o1) and on be (device dx
 * into dout, downloaded into o2): every word equal (ids, value bits, first NaN / +inf). */
static void top_compare_ld(be_backend *cpu, be_backend *be, const float *x, const float *dx, float *dout,
                           int32_t *o1, int32_t *o2, int V, int ldx, int R, int k) {
    size_t words = (size_t)R * (2 * k + 2);
    cpu->ops->logits_top(cpu, o1, x, ldx, R, V, k);
    be->ops->logits_top(be, (int32_t *)dout, dx, ldx, R, V, k);
    be->ops->download(be, o2, dout, sizeof(int32_t) * words);
    size_t first = 0, differ = 0;
    for (size_t i = 0; i < words; i++)
        if (o1[i] != o2[i] && differ++ == 0) first = i;
    CHECK_MSG(differ == 0, "V %d k %d: %zu words differ from the CPU's (first at %zu)", V, k, differ, first);
}

/* top_compare_ld of rows stored V apart. */
static void top_compare(be_backend *cpu, be_backend *be, const float *x, const float *dx, float *dout, int32_t *o1,
                        int32_t *o2, int V, int R, int k) {
    top_compare_ld(cpu, be, x, dx, dout, o1, o2, V, V, R, k);
}

/* The CUDA backend's logits_top equals the CPU's word for word (ids, value bits, first NaN / +inf). */
TEST(test_logits_top_cuda_equals_cpu) {
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    size_t W = (size_t)TP_R * (2 * BE_TOP_MAX + 2);
    float *x = malloc(sizeof(float) * TP_R * TP_V);
    int32_t *o1 = malloc(sizeof(int32_t) * W), *o2 = malloc(sizeof(int32_t) * W);
    REQUIRE(x && o1 && o2);
    tp_rows(x);
    be_buf *bx, *bo;
    float *dx = dev_floats(be, x, (size_t)TP_R * TP_V, &bx), *dout = dev_floats(be, NULL, W, &bo);
    REQUIRE(dx && dout);
    static const int ks[] = {1, 7, 20, 64};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) top_compare(cpu, be, x, dx, dout, o1, o2, TP_V, TP_R, ks[ki]);
    be->ops->buf_free(be, bx), be->ops->buf_free(be, bo);
    free(x), free(o1), free(o2);
    be_free(cpu);
    be_free(be);
}

/* Rows about the one-block limits of the CUDA top-k (4,096 and 8,192 ids: one block a row with 8 / 16
 * keys a thread; 4,097 the 16-key block; 8,193 the slices and a merge) equal the CPU's word for word
 * for k = 1 / 20 / 64: a row of ties, a row of logit-like values with a NaN and a +inf in its second
 * half, a row of -inf but for a few entries. */
TEST(test_logits_top_cuda_small_vocab_rows_equal_cpu) {
    enum { SR = 3 };
    static const int widths[] = {4096, 4097, 8192, 8193};
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    size_t W = (size_t)SR * (2 * BE_TOP_MAX + 2);
    float *x = malloc(sizeof(float) * SR * 8193);
    int32_t *o1 = malloc(sizeof(int32_t) * W), *o2 = malloc(sizeof(int32_t) * W);
    REQUIRE(x && o1 && o2);
    for (size_t wi = 0; wi < sizeof widths / sizeof *widths; wi++) {
        int V = widths[wi];
        g_rng = 0x5a11b0c5u + (unsigned)V;
        for (int j = 0; j < V; j++) {
            x[j] = (float)(int)(frand() * 8.0f) * 0.25f;
            x[V + j] = 4.0f * (frand() + frand() + frand());
            x[2 * V + j] = j % 1000 == 999 ? frand() : -INFINITY;
        }
        x[V + V - 2] = NAN, x[V + V / 2 + 1] = INFINITY;
        be_buf *bx, *bo;
        float *dx = dev_floats(be, x, (size_t)SR * V, &bx), *dout = dev_floats(be, NULL, W, &bo);
        REQUIRE(dx && dout);
        static const int ks[] = {1, 20, 64};
        for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++)
            top_compare(cpu, be, x, dx, dout, o1, o2, V, SR, ks[ki]);
        CHECK(o2[(2 * 64 + 2) + 2 * 64] == V / 2 + 1); /* row 1's first NaN / +inf */
        be->ops->buf_free(be, bx), be->ops->buf_free(be, bo);
    }
    free(x), free(o1), free(o2);
    be_free(cpu);
    be_free(be);
}

/* The CUDA top-k over long rows (70,001 ids: several batches of loads a thread, lists that fill and
 * then reject) equals the CPU's word for word: a row of many ties, a row with NaN, +inf and -inf. */
TEST(test_logits_top_cuda_long_rows_equal_cpu) {
    enum { LV = 70001, LR = 2 };
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    size_t W = (size_t)LR * (2 * BE_TOP_MAX + 2);
    float *x = malloc(sizeof(float) * LR * LV);
    int32_t *o1 = malloc(sizeof(int32_t) * W), *o2 = malloc(sizeof(int32_t) * W);
    REQUIRE(x && o1 && o2);
    g_rng = 0x7a11c0deu;
    for (int j = 0; j < LV; j++) {
        x[j] = (float)(int)(frand() * 16.0f) * 0.125f; /* 31 distinct values: ties everywhere */
        x[LV + j] = j % 7 == 3 ? -INFINITY : frand();
    }
    x[LV + 40000] = NAN, x[LV + 69999] = INFINITY, x[LV + 5] = NAN;
    be_buf *bx, *bo;
    float *dx = dev_floats(be, x, (size_t)LR * LV, &bx), *dout = dev_floats(be, NULL, W, &bo);
    REQUIRE(dx && dout);
    static const int ks[] = {1, 20, 64};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) top_compare(cpu, be, x, dx, dout, o1, o2, LV, LR, ks[ki]);
    CHECK(o2[(2 * 64 + 2) + 2 * 64] == 5); /* row 1's first NaN / +inf */
    be->ops->buf_free(be, bx), be->ops->buf_free(be, bo);
    free(x), free(o1), free(o2);
    be_free(cpu);
    be_free(be);
}

/* Rows of a real vocabulary (248,320 ids, 61 slices of the GPU's cut, stored 16 floats apart) and a
 * 1,100,003-id row (its slices' lists need a second level of merges): the CUDA top-k equals the CPU's
 * word for word for k = 1 / 20 / 64 — logit-like values, a row of five distinct values (ties across
 * slices), a +inf late in the first row, a row of NaN but for 13 finite entries (fewer than k: the list
 * ends in -1), a row of -inf, -0 and +0 — and a row's answer does not depend on the rows beside it. */
TEST(test_logits_top_cuda_vocab_rows_equal_cpu) {
    enum { VV = 248320, VLD = VV + 16, VR = 4, BV = 1100003 };
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    size_t W = (size_t)VR * (2 * BE_TOP_MAX + 2);
    float *x = malloc(sizeof(float) * (size_t)VR * VLD), *y = malloc(sizeof(float) * BV);
    int32_t *o1 = malloc(sizeof(int32_t) * W), *o2 = malloc(sizeof(int32_t) * W), *o3 = malloc(sizeof(int32_t) * W);
    REQUIRE(x && y && o1 && o2 && o3);
    g_rng = 0x70b5eed1u;
    for (int j = 0; j < VLD; j++) {
        x[j] = 4.0f * (frand() + frand() + frand()); /* logit-like: a bell of values */
        x[VLD + j] = (float)(int)(frand() * 2.5f);   /* -2 .. 2: five values, ties everywhere */
        x[2 * (size_t)VLD + j] = j % 20000 == 7 ? frand() : NAN;
        x[3 * (size_t)VLD + j] = j % 3 == 0 ? -INFINITY : j % 3 == 1 ? -0.0f : 0.0f;
    }
    x[200001] = INFINITY; /* row 0: its best and its first bad index */
    for (int j = 0; j < BV; j++) y[j] = frand() * 30.0f;
    y[BV - 1] = 31.0f, y[3] = 31.0f; /* the best value twice, in the first and the last slice */
    be_buf *bx, *by, *bo;
    float *dx = dev_floats(be, x, (size_t)VR * VLD, &bx), *dy = dev_floats(be, y, BV, &by);
    float *dout = dev_floats(be, NULL, W, &bo);
    REQUIRE(dx && dy && dout);
    static const int ks[] = {1, 20, 64};
    for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
        int k = ks[ki];
        top_compare_ld(cpu, be, x, dx, dout, o1, o2, VV, VLD, VR, k);
        top_compare_ld(cpu, be, y, dy, dout, o1, o3, BV, BV, 1, k);
        CHECK_INT(o3[0], 3); /* the tie of the best value goes to the lower id */
        size_t rw = (size_t)(2 * k + 2);
        be->ops->logits_top(be, (int32_t *)dout, dx + 2 * (size_t)VLD, VLD, 1, VV, k); /* row 2 alone */
        be->ops->download(be, o3, dout, sizeof(int32_t) * rw);
        CHECK_MSG(!memcmp(o3, o2 + 2 * rw, sizeof(int32_t) * rw), "k %d: row 2 alone differs from row 2 of 4", k);
    }
    /* k 64: row 0 starts with its +inf, which is also its first bad index; row 2 holds 13 ids, then -1,
     * and its first NaN at 0 */
    CHECK(o2[0] == 200001 && o2[128] == 200001);
    CHECK(o2[2 * 130 + 12] >= 0 && o2[2 * 130 + 13] == -1 && o2[2 * 130 + 128] == 0);
    be->ops->buf_free(be, bx), be->ops->buf_free(be, by), be->ops->buf_free(be, bo);
    free(x), free(y), free(o1), free(o2), free(o3);
    be_free(cpu);
    be_free(be);
}

/* ---- rmsnorm: one block a row, its thread count a function of the width ---- */

enum { RN_R = 3, RN_NMAX = 5120 };
static float rn_w[RN_NMAX]; /* static: the backend keeps a device copy keyed by the host address */

/* rmsnorm_rows at widths whose blocks have 256 / 512 / 1,024 threads (4,100 and 5,120: more entries
 * than threads, 4,100 not a multiple of the block) matches the CPU within 1e-5 of the row's largest
 * output, and each row of a 3-row call equals the same row normalised alone, bit for bit. */
TEST(test_rmsnorm_matches_cpu_and_is_row_invariant) {
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    size_t N = (size_t)RN_R * RN_NMAX;
    float *x = malloc(sizeof(float) * N), *yc = malloc(sizeof(float) * N), *yg = malloc(sizeof(float) * N);
    float *y1 = malloc(sizeof(float) * RN_NMAX);
    REQUIRE(x && yc && yg && y1);
    g_rng = 0x0b5e55edu;
    for (int i = 0; i < RN_NMAX; i++) rn_w[i] = 1.0f + 0.5f * frand();
    be_buf *bx, *by, *b1;
    float *dx = dev_floats(be, NULL, N, &bx), *dy = dev_floats(be, NULL, N, &by), *d1 = dev_floats(be, NULL, RN_NMAX, &b1);
    REQUIRE(dx && dy && d1);
    static const int ns[] = {512, 2048, 4100, 5120};
    for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
        int n = ns[ni];
        for (size_t i = 0; i < (size_t)RN_R * n; i++) x[i] = frand() * (1.0f + (float)(i % 5));
        be->ops->upload(be, dx, x, sizeof(float) * RN_R * n);
        cpu->ops->rmsnorm_rows(cpu, yc, n, x, n, rn_w, n, RN_R, 1e-6f);
        be->ops->rmsnorm_rows(be, dy, n, dx, n, rn_w, n, RN_R, 1e-6f);
        be->ops->download(be, yg, dy, sizeof(float) * RN_R * n);
        for (int t = 0; t < RN_R; t++) {
            double worst = 0, big = 0;
            for (int i = 0; i < n; i++) {
                size_t j = (size_t)t * n + i;
                double d = fabs((double)yg[j] - yc[j]);
                if (d > worst) worst = d;
                if (fabs((double)yc[j]) > big) big = fabs((double)yc[j]);
            }
            CHECK_MSG(worst <= 1e-5 * big, "n %d row %d: |GPU - CPU| %.3g of %.3g", n, t, worst, big);
            be->ops->rmsnorm_rows(be, d1, n, dx + (size_t)t * n, n, rn_w, n, 1, 1e-6f);
            be->ops->download(be, y1, d1, sizeof(float) * n);
            CHECK_MSG(!memcmp(y1, yg + (size_t)t * n, sizeof(float) * n), "n %d row %d: alone differs from 3 rows", n, t);
        }
    }
    be->ops->buf_free(be, bx), be->ops->buf_free(be, by), be->ops->buf_free(be, b1);
    free(x), free(yc), free(yg), free(y1);
    be_free(cpu);
    be_free(be);
}

/* ---- the MoE block against the CPU backend ---- */

enum { MO_H = 256, MO_I = 64, MO_S = 128, MO_E = 16, MO_K = 4, MO_RMAX = 20 };

/* One MoE layer's weights in format f (router and shared gate bf16, as checkpoints store them); the
 * routed experts' gate and up of a dense format share one [2I][H] block per expert (HF's fused
 * layout), quantized ones are separate (MLX's stacked layout). Storage in store[] (nstore entries). */
typedef struct {
    moe_weights w;
    moe_expert ex[MO_E];
    void *store[3 * MO_E + 8];
    int nstore;
} mo_layer;

/* A weight of rows x cols, uniform in ±scale, into *w (storage kept in L). */
static void mo_weight(mo_layer *L, int rows, int cols, float scale, fmt f, be_weight *w) {
    float *wf = malloc(sizeof(float) * rows * cols);
    REQUIRE(wf);
    for (int i = 0; i < rows * cols; i++) wf[i] = scale * frand();
    REQUIRE(make_weight(wf, rows, cols, f, w, &L->store[L->nstore++]) == 0);
    free(wf);
}

/* The router: logit e is 2·x[e] plus small cross terms, so rows steer their experts through x[0..E). */
static void mo_build(mo_layer *L, fmt f, int deepseek) {
    memset(L, 0, sizeof *L);
    const fmt bf = {DT_BF16, 0, 0, 0};
    float *rw = malloc(sizeof(float) * MO_E * MO_H);
    REQUIRE(rw);
    for (int e = 0; e < MO_E; e++)
        for (int h = 0; h < MO_H; h++) rw[e * MO_H + h] = h == e ? 2.0f : 0.02f * frand();
    REQUIRE(make_weight(rw, MO_E, MO_H, bf, &L->w.router_w, &L->store[L->nstore++]) == 0);
    free(rw);
    static float bias[MO_E]; /* the same values every call: the GPU keeps a copy keyed by address */
    for (int e = 0; e < MO_E; e++) bias[e] = 0.01f * (float)(e % 5) - 0.02f;
    L->w.router = deepseek ? (moe_router){MO_E, MO_K, MOE_SCORE_SIGMOID, 1, 4, 2, bias, 2.5f}
                           : (moe_router){MO_E, MO_K, MOE_SCORE_SOFTMAX, 1, 1, 1, NULL, 1.0f};
    float sh = 1.0f / sqrtf(MO_H), sd = 1.0f / sqrtf(MO_I);
    for (int e = 0; e < MO_E; e++) {
        moe_expert *x = &L->ex[e];
        if (!f.bits) { /* fused gate_up: up starts I rows after gate */
            mo_weight(L, 2 * MO_I, MO_H, sh, f, &x->gate);
            x->up = x->gate;
            x->gate.rows = x->up.rows = MO_I;
            x->up.data = (const char *)x->gate.data + (size_t)MO_I * MO_H * (f.dtype == DT_F32 ? 4 : 2);
        } else {
            mo_weight(L, MO_I, MO_H, sh, f, &x->gate);
            mo_weight(L, MO_I, MO_H, sh, f, &x->up);
        }
        mo_weight(L, MO_H, MO_I, sd, f, &x->down);
    }
    L->w.experts = L->ex;
    L->w.inter = MO_I;
    L->w.shared_inter = MO_S;
    mo_weight(L, MO_S, MO_H, sh, f, &L->w.shared.gate);
    mo_weight(L, MO_S, MO_H, sh, f, &L->w.shared.up);
    mo_weight(L, MO_H, MO_S, 1.0f / sqrtf(MO_S), f, &L->w.shared.down);
    L->w.shared_gated = 1;
    mo_weight(L, 1, MO_H, sh, bf, &L->w.shared_gate);
}

static void mo_free(mo_layer *L) {
    for (int i = 0; i < L->nstore; i++) free(L->store[i]);
}

/* Every weight of L prepared on be (what loading does). */
static void mo_prepare(be_backend *be, mo_layer *L) {
    mtplx_err err = {0};
    REQUIRE(be->ops->weight_prepare(be, &L->w.router_w, &err) == 0);
    REQUIRE(be->ops->weight_prepare(be, &L->w.shared_gate, &err) == 0);
    for (int e = 0; e <= MO_E; e++) {
        moe_expert *x = e < MO_E ? &L->ex[e] : &L->w.shared;
        REQUIRE(be->ops->weight_prepare(be, &x->gate, &err) == 0);
        REQUIRE(be->ops->weight_prepare(be, &x->up, &err) == 0);
        REQUIRE(be->ops->weight_prepare(be, &x->down, &err) == 0);
    }
}

/* Rows that choose experts in blocks of 4 (t % 4 == 0: experts 4j..4j+3, disjoint between rows 0, 4,
 * 8, 12, the same again from row 16), overlapping sets (t % 4 == 1: t, t+3, t+6, t+9 mod E), expert 5
 * and the rest by their own random values (t % 4 == 2), and copies of the row before (t % 4 == 3):
 * expert 5 gets 12 of the 20 rows (two tiles of cuda_moe.cu). */
static void mo_rows(float *x) {
    for (int t = 0; t < MO_RMAX; t++) {
        float *r = x + (size_t)t * MO_H;
        if (t % 4 == 3) {
            memcpy(r, r - MO_H, sizeof(float) * MO_H);
            continue;
        }
        for (int h = 0; h < MO_H; h++) r[h] = 0.3f * frand();
        if (t % 4 == 2) {
            r[5] = 3.0f;
            continue;
        }
        for (int e = 0; e < MO_E; e++) r[e] = -1.0f;
        for (int j = 0; j < MO_K; j++) r[t % 4 == 0 ? 4 * ((t / 4) % 4) + j : (t + 3 * j) % MO_E] = 3.0f;
    }
}

/* moe on the GPU against the CPU backend (quantized weights with fp32 activations on both: the
 * qact_f32 knob), then every row of R-row calls (R = 1..20, rows in reverse) bit-identical to the row
 * computed alone. */
static void moe_check(be_backend *be, be_backend *cpu, fmt f, int deepseek) {
    mo_layer L;
    mo_build(&L, f, deepseek);
    mo_prepare(be, &L);
    mtplx_err err = {0};
    REQUIRE(kern_moe_router_check(&L.w.router, &err) == 0);
    be_moe_scratch *gs = NULL, *cs = NULL;
    REQUIRE(be->ops->moe_scratch_new(be, MO_RMAX, MO_H, MO_S, MO_E, MO_K, &gs, &err) == 0);
    REQUIRE(cpu->ops->moe_scratch_new(cpu, MO_RMAX, MO_H, MO_S, MO_E, MO_K, &cs, &err) == 0);
    size_t n = (size_t)MO_RMAX * MO_H;
    float *x = malloc(4 * n), *ref = malloc(4 * n), *got = malloc(4 * n), *xr = malloc(4 * n), *one = malloc(4 * MO_H);
    REQUIRE(x && ref && got && xr && one);
    mo_rows(x);
    cpu->ops->moe(cpu, ref, MO_H, x, MO_H, MO_RMAX, &L.w, cs);
    be_buf *bx, *bo;
    float *dx = dev_floats(be, x, n, &bx), *dout = dev_floats(be, NULL, n, &bo);
    REQUIRE(dx && dout);
    be->ops->moe(be, dout, MO_H, dx, MO_H, MO_RMAX, &L.w, gs);
    be->ops->download(be, got, dout, 4 * n);
    double worst = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]) / (1.0 + fabs(ref[i]));
        if (d > worst) worst = d;
        if (fabs(ref[i]) > mag) mag = fabs(ref[i]);
    }
    CHECK_MSG(mag > 0.05, "format bits %d: the MoE output is too small to compare (%.3g)", f.bits, mag);
    CHECK_MSG(worst < 1e-4, "format bits %d dtype %d%s: worst relative difference to the CPU %.3g", f.bits,
              (int)f.dtype, deepseek ? " (grouped sigmoid router)" : "", worst);
    CHECK_MSG(memcmp(got + 2 * MO_H, got + 3 * MO_H, 4 * MO_H) == 0, "rows 2 and 3 (equal inputs) differ");
    for (int R = 1; R <= MO_RMAX; R++) {
        for (int t = 0; t < R; t++) memcpy(xr + (size_t)t * MO_H, x + (size_t)(R - 1 - t) * MO_H, 4 * MO_H);
        be->ops->upload(be, dx, xr, 4 * (size_t)R * MO_H);
        be->ops->moe(be, dout, MO_H, dx, MO_H, R, &L.w, gs);
        be->ops->download(be, got, dout, 4 * (size_t)R * MO_H);
        for (int t = 0; t < R; t++) {
            be->ops->upload(be, dx, x + (size_t)(R - 1 - t) * MO_H, 4 * MO_H);
            be->ops->moe(be, dout, MO_H, dx, MO_H, 1, &L.w, gs);
            be->ops->download(be, one, dout, 4 * MO_H);
            CHECK_MSG(memcmp(one, got + (size_t)t * MO_H, 4 * MO_H) == 0,
                      "format bits %d: MoE row %d of %d differs from the row alone", f.bits, t, R);
        }
    }
    be->ops->buf_free(be, bx), be->ops->buf_free(be, bo);
    be->ops->moe_scratch_free(be, gs), cpu->ops->moe_scratch_free(cpu, cs);
    free(x), free(ref), free(got), free(xr), free(one);
    mo_free(&L);
}

TEST(test_moe_cuda_matches_cpu_and_is_row_invariant) {
    be_backend *be = cuda_new(), *cpu = NULL;
    if (!be) SKIP("%s", g_why);
    mtplx_err err = {0};
    REQUIRE(be_create("cpu", &cpu, &err) == 0);
    int was = kern_knobs_get()->qact_f32;
    kern_matmul_set_qact_f32(1);
    moe_check(be, cpu, (fmt){DT_BF16, 0, 0, 0}, 0);
    moe_check(be, cpu, (fmt){DT_U32, 4, 64, 0}, 0);
    moe_check(be, cpu, (fmt){DT_U32, 4, 32, DT_F16}, 1);
    moe_check(be, cpu, (fmt){DT_U32, 8, 64, 0}, 0);
    moe_check(be, cpu, (fmt){DT_F32, 0, 0, 0}, 1);
    kern_matmul_set_qact_f32(was);
    be_free(cpu);
    be_free(be);
}

int main(void) {
    RUN(test_matmul_every_format_matches_reference_and_is_row_invariant);
    RUN(test_matmul_n_equals_matmul_per_weight);
    RUN(test_matmul_n_mixed_thin_weights);
    RUN(test_gemm_bit_identical_to_stream_k);
    RUN(test_attention_long_cpu_matches_naive);
    RUN(test_attention_prefill_equals_decode_and_cpu);
    RUN(test_gdn_replay_bit_identical_and_matches_cpu);
    RUN(test_seq_ops_cpu_equal_per_sequence_calls);
    RUN(test_seq_ops_cuda_equal_per_sequence_calls);
    RUN(test_attention_seqs_long_cpu_equal_per_sequence_calls);
    RUN(test_attention_seqs_long_cuda_equal_per_sequence_calls);
    RUN(test_gdn_commit_cpu_equals_per_sequence_calls);
    RUN(test_gdn_commit_cuda_equals_per_sequence_calls);
    RUN(test_logits_top_cpu_gives_the_sampler_the_same_distribution);
    RUN(test_logits_top_cuda_equals_cpu);
    RUN(test_logits_top_cuda_small_vocab_rows_equal_cpu);
    RUN(test_logits_top_cuda_long_rows_equal_cpu);
    RUN(test_logits_top_cuda_vocab_rows_equal_cpu);
    RUN(test_rmsnorm_matches_cpu_and_is_row_invariant);
    RUN(test_moe_cuda_matches_cpu_and_is_row_invariant);
    return TEST_SUMMARY();
}
