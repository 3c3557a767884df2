/* cuda_matmul.cu — y = x · Wᵀ for R rows, straight from the checkpoint format (f32, f16, bf16, MLX
 * affine q8 / q4 with groups of 32 / 64 / 128), and embedding rows (docs/architecture.md, "The CUDA
 * backend").
 *
 * One thread block computes NB consecutive outputs (4, or 2 for 9..16 rows: the activation loads are
 * shared by NB weight rows) for up to 16 rows: its 256 threads split K into chunks (4 f32 or 8 f16 /
 * bf16 / q8 / q4 values; chunk c to thread c mod 256), each dequantized once and multiplied into every
 * row; then the block adds its threads in a fixed order. A row's sum therefore depends only on K —
 * the same chunks, in the same order, through the same reduction — whatever R is and whichever rows
 * share the block: the kernel is batch-invariant (DESIGN.md §3), so a verify row equals the decode row
 * bit for bit. Decode (R = 1..16) reads each weight byte once per call; larger R runs blocks of 16
 * rows one after another (prefill: a tensor-core GEMM is future work, bench/cuda.md). */
#include "cuda_internal.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../../base/dtype.h"
}

#define MM_THREADS 256 /* threads per block: they split every output's K */
#define MM_ROWS_MAX 16 /* rows per launch */

enum { F_F32 = 0, F_F16, F_BF16, F_Q8, F_Q4 };

template <int F> struct fmt_info;
template <> struct fmt_info<F_F32> { static constexpr int EPL = 4; };
template <> struct fmt_info<F_F16> { static constexpr int EPL = 8; };
template <> struct fmt_info<F_BF16> { static constexpr int EPL = 8; };
template <> struct fmt_info<F_Q8> { static constexpr int EPL = 8; };
template <> struct fmt_info<F_Q4> { static constexpr int EPL = 8; };

/* Scale / bias i of an MLX affine weight stored as sdt (DT_F32, DT_F16 or DT_BF16). */
__device__ __forceinline__ float load_sb(const void *p, int sdt, size_t i) {
    if (sdt == DT_BF16) return cu_bf16(((const uint16_t *)p)[i]);
    if (sdt == DT_F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

/* Weight description as the kernels read it. */
typedef struct {
    const void *data, *scales, *biases;
    int N, K, gs, sdt;
} wdesc;

/* The EPL values of chunk `chunk` (values chunk·EPL ..) of weight row n, as floats. */
template <int F>
__device__ __forceinline__ void load_chunk(const wdesc &w, int n, int chunk, float *v) {
    constexpr int EPL = fmt_info<F>::EPL;
    size_t k0 = (size_t)chunk * EPL;
    if (F == F_F32) {
        float4 a = __ldg((const float4 *)((const float *)w.data + (size_t)n * w.K + k0));
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    } else if (F == F_F16 || F == F_BF16) {
        uint4 a = __ldg((const uint4 *)((const uint16_t *)w.data + (size_t)n * w.K + k0));
        uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            uint16_t lo = (uint16_t)(u[i] & 0xffff), hi = (uint16_t)(u[i] >> 16);
            if (F == F_BF16) v[2 * i] = cu_bf16(lo), v[2 * i + 1] = cu_bf16(hi);
            else v[2 * i] = __half2float(__ushort_as_half(lo)), v[2 * i + 1] = __half2float(__ushort_as_half(hi));
        }
    } else {
        constexpr int BITS = F == F_Q8 ? 8 : 4;
        size_t words = (size_t)w.K * BITS / 32;
        const uint32_t *src = (const uint32_t *)w.data + (size_t)n * words + k0 * BITS / 32;
        uint32_t u[2];
        if (F == F_Q8) {
            uint2 a = __ldg((const uint2 *)src);
            u[0] = a.x, u[1] = a.y;
        } else {
            u[0] = __ldg(src), u[1] = 0;
        }
        size_t g = (size_t)n * (w.K / w.gs) + k0 / w.gs;
        float s = load_sb(w.scales, w.sdt, g), b = load_sb(w.biases, w.sdt, g);
        constexpr int PER = 32 / BITS;
#pragma unroll
        for (int i = 0; i < EPL; i++) {
            uint32_t q = (u[i / PER] >> (BITS * (i % PER))) & ((1u << BITS) - 1);
            v[i] = s * (float)q + b;
        }
    }
}

/* Scalar value k of weight row n (any format; the path for dense rows whose width is not a multiple
 * of the chunk). */
template <int F>
__device__ __forceinline__ float load_one(const wdesc &w, int n, int k) {
    if (F == F_F32) return ((const float *)w.data)[(size_t)n * w.K + k];
    if (F == F_BF16) return cu_bf16(((const uint16_t *)w.data)[(size_t)n * w.K + k]);
    if (F == F_F16) return __half2float(((const __half *)w.data)[(size_t)n * w.K + k]);
    constexpr int BITS = F == F_Q8 ? 8 : 4, PER = 32 / BITS;
    size_t words = (size_t)w.K * BITS / 32;
    uint32_t q = (((const uint32_t *)w.data)[(size_t)n * words + k / PER] >> (BITS * (k % PER))) & ((1u << BITS) - 1);
    size_t g = (size_t)n * (w.K / w.gs) + k / w.gs;
    return load_sb(w.scales, w.sdt, g) * (float)q + load_sb(w.biases, w.sdt, g);
}

/* y[r·ldy + n] = Σ_k x[r·ldx + k] · W[n][k] for r < rows (<= RB), n < N. Block b computes outputs
 * b·NB .. b·NB + NB - 1: thread i of the block takes chunks i, i + MM_THREADS, ... of those weight rows
 * (each loaded once, used for every row), then the block adds its threads in a fixed order (warp
 * butterfly, then the warps in order). vec: rows are whole chunks (K % EPL == 0); xal: x rows are
 * 16-byte aligned. */
template <int F, int RB, int NB>
__global__ void __launch_bounds__(MM_THREADS) k_matmul(float *y, int ldy, const float *x, int ldx, int rows,
                                                      wdesc w, int vec, int xal) {
    CU_PDL_ENTRY();
    constexpr int EPL = fmt_info<F>::EPL;
    __shared__ float red[MM_THREADS / 32][RB * NB];
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    int n0 = blockIdx.x * NB;
    int nb = w.N - n0 < NB ? w.N - n0 : NB;
    float acc[RB][NB];
#pragma unroll
    for (int r = 0; r < RB; r++)
#pragma unroll
        for (int j = 0; j < NB; j++) acc[r][j] = 0.f;
    if (vec) {
        int chunks = w.K / EPL;
#pragma unroll 4
        for (int c = tid; c < chunks; c += MM_THREADS) {
            float wv[NB][EPL];
#pragma unroll
            for (int j = 0; j < NB; j++)
                if (j < nb) load_chunk<F>(w, n0 + j, c, wv[j]);
                else
#pragma unroll
                    for (int e = 0; e < EPL; e++) wv[j][e] = 0.f;
#pragma unroll
            for (int r = 0; r < RB; r++) {
                if (r >= rows) break;
                const float *xr = x + (size_t)r * ldx + (size_t)c * EPL;
                float xv[EPL];
                if (xal) {
#pragma unroll
                    for (int e = 0; e < EPL; e += 4) {
                        float4 a = __ldg((const float4 *)(xr + e));
                        xv[e] = a.x, xv[e + 1] = a.y, xv[e + 2] = a.z, xv[e + 3] = a.w;
                    }
                } else {
#pragma unroll
                    for (int e = 0; e < EPL; e++) xv[e] = __ldg(xr + e);
                }
#pragma unroll
                for (int j = 0; j < NB; j++)
#pragma unroll
                    for (int e = 0; e < EPL; e++) acc[r][j] = fmaf(xv[e], wv[j][e], acc[r][j]);
            }
        }
    } else {
        for (int k = tid; k < w.K; k += MM_THREADS) {
            float wv[NB];
#pragma unroll
            for (int j = 0; j < NB; j++) wv[j] = j < nb ? load_one<F>(w, n0 + j, k) : 0.f;
#pragma unroll
            for (int r = 0; r < RB; r++) {
                if (r >= rows) break;
                float xv = x[(size_t)r * ldx + k];
#pragma unroll
                for (int j = 0; j < NB; j++) acc[r][j] = fmaf(xv, wv[j], acc[r][j]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RB; r++)
#pragma unroll
        for (int j = 0; j < NB; j++) {
            float v = acc[r][j];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) red[warp][r * NB + j] = v;
        }
    __syncthreads();
    if (tid < rows * NB) {
        int r = tid / NB, j = tid % NB;
        if (j < nb) {
            float v = 0.f;
#pragma unroll
            for (int i = 0; i < MM_THREADS / 32; i++) v += red[i][r * NB + j];
            y[(size_t)r * ldy + n0 + j] = v;
        }
    }
}

template <int F>
static void launch_rows(float *y, int ldy, const float *x, int ldx, int rows, const wdesc &w, int vec, int xal) {
#define MM_GRID(NB) dim3((w.N + (NB) - 1) / (NB))
    if (rows <= 1) cu_launch(k_matmul<F, 1, 4>, MM_GRID(4), MM_THREADS, 0, y, ldy, x, ldx, rows, w, vec, xal);
    else if (rows <= 2) cu_launch(k_matmul<F, 2, 4>, MM_GRID(4), MM_THREADS, 0, y, ldy, x, ldx, rows, w, vec, xal);
    else if (rows <= 4) cu_launch(k_matmul<F, 4, 4>, MM_GRID(4), MM_THREADS, 0, y, ldy, x, ldx, rows, w, vec, xal);
    else if (rows <= 8) cu_launch(k_matmul<F, 8, 4>, MM_GRID(4), MM_THREADS, 0, y, ldy, x, ldx, rows, w, vec, xal);
    else cu_launch(k_matmul<F, 16, 2>, MM_GRID(2), MM_THREADS, 0, y, ldy, x, ldx, rows, w, vec, xal);
#undef MM_GRID
}

static int fmt_of(const be_weight *w) {
    switch (w->dtype) {
    case DT_F32: return F_F32;
    case DT_F16: return F_F16;
    case DT_BF16: return F_BF16;
    default: return w->bits == 8 ? F_Q8 : F_Q4;
    }
}

static const int epl_of[5] = {4, 8, 8, 8, 8};

/* The profile's name for a matmul op over n weights whose first is w: dflt ("matmul" / "matmul_n"), or
 * with $MTPLX_CUDA_PROFILE=2 one row per shape, "mm <n>x<N>x<K> <format>" (interned: the profile keys
 * on the pointer; bench/cuda.md reads the bytes per call off it). */
static const char *mm_prof_name(const char *dflt, const be_weight *w, int n) {
    if (cu_set.profile != 2 || !w || cu_op_depth) return dflt;
    static char names[32][40];
    static int used = 0;
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    char buf[40];
    const char *f = w->dtype == DT_BF16  ? "bf16"
                    : w->dtype == DT_F16 ? "f16"
                    : w->dtype == DT_F32 ? "f32"
                    : w->bits == 8       ? "q8"
                                         : "q4";
    snprintf(buf, sizeof buf, "mm %dx%dx%d %s", n, w->rows, w->cols, f);
    const char *r = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < used && !r; i++)
        if (!strcmp(names[i], buf)) r = names[i];
    if (!r && used < 32) strcpy(names[used], buf), r = names[used++];
    pthread_mutex_unlock(&lock);
    return r ? r : dflt;
}

void cu_matmul(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w) {
    CU_PROF(mm_prof_name("matmul", w, 1));
    if (R <= 0 || w->rows <= 0) return;
    if (cu_mma_enabled() && cu_mma_handles(w)) {
        cu_mma_matmul(be, y, ldy, x, ldx, R, w);
        return;
    }
    const cu_wdev *d = cu_weight(cu_of(be), w);
    wdesc wd = {d->data, d->scales, d->biases, w->rows, w->cols, w->group_size, (int)w->scale_dtype};
    int F = fmt_of(w);
    int vec = w->cols % epl_of[F] == 0;
    int xal = ((uintptr_t)x % 16 == 0) && ldx % 4 == 0;
    for (int r0 = 0; r0 < R; r0 += MM_ROWS_MAX) {
        int rows = R - r0 < MM_ROWS_MAX ? R - r0 : MM_ROWS_MAX;
        float *yr = y + (size_t)r0 * ldy;
        const float *xr = x + (size_t)r0 * ldx;
        switch (F) {
        case F_F32: launch_rows<F_F32>(yr, ldy, xr, ldx, rows, wd, vec, xal); break;
        case F_F16: launch_rows<F_F16>(yr, ldy, xr, ldx, rows, wd, vec, xal); break;
        case F_BF16: launch_rows<F_BF16>(yr, ldy, xr, ldx, rows, wd, vec, xal); break;
        case F_Q8: launch_rows<F_Q8>(yr, ldy, xr, ldx, rows, wd, vec, xal); break;
        default: launch_rows<F_Q4>(yr, ldy, xr, ldx, rows, wd, vec, xal); break;
        }
        CU_LAUNCHED("matmul");
    }
    cu_prep_clobber(y, ldy, R, w->rows);
}

void cu_matmul_n(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R) {
    CU_PROF(mm_prof_name("matmul_n", n > 0 ? outs[0].w : NULL, n));
    if (R <= 0) return;
    if (cu_mma_enabled()) {
        cu_mma_matmul_n(be, outs, n, x, ldx, R);
        return;
    }
    for (int i = 0; i < n; i++) cu_matmul(be, outs[i].y, outs[i].ldy, x, ldx, R, outs[i].w);
}

/* Up to EMB_INLINE token ids passed inline with the launch (a forward's first kernel then needs no
 * host-to-device copy queued before it; cuda_seq.cu's seq_tab does the same for the sequence tables). */
#define EMB_INLINE 64
typedef struct {
    int32_t t[EMB_INLINE];
} emb_tokens;

/* Row tok[t] of w, dequantized, into y + t·ldy (tok: dtok, or the inline ids when dtok is NULL). */
template <int F>
__global__ void k_embed(float *y, int ldy, wdesc w, const __grid_constant__ emb_tokens itok, const int32_t *dtok) {
    CU_PDL_ENTRY();
    int k = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (k < w.K) y[(size_t)t * ldy + k] = load_one<F>(w, dtok ? dtok[t] : itok.t[t], k);
}

void cu_embed_rows(be_backend *be, float *y, int ldy, const be_weight *w, const int32_t *tokens, int R) {
    CU_PROF("embed_rows");
    if (R <= 0) return;
    cu_step_begin(R);
    cu_ctx *c = cu_of(be);
    const cu_wdev *d = cu_weight(c, w);
    wdesc wd = {d->data, d->scales, d->biases, w->rows, w->cols, w->group_size, (int)w->scale_dtype};
    emb_tokens it = {};
    const int32_t *dt = NULL;
    if (R <= EMB_INLINE) memcpy(it.t, tokens, sizeof(int32_t) * (size_t)R);
    else dt = cu_stage_idx(c, tokens, (size_t)R);
    dim3 grid((w->cols + 255) / 256, R);
    switch (fmt_of(w)) {
    case F_F32: cu_launch(k_embed<F_F32>, grid, 256, 0, y, ldy, wd, it, dt); break;
    case F_F16: cu_launch(k_embed<F_F16>, grid, 256, 0, y, ldy, wd, it, dt); break;
    case F_BF16: cu_launch(k_embed<F_BF16>, grid, 256, 0, y, ldy, wd, it, dt); break;
    case F_Q8: cu_launch(k_embed<F_Q8>, grid, 256, 0, y, ldy, wd, it, dt); break;
    default: cu_launch(k_embed<F_Q4>, grid, 256, 0, y, ldy, wd, it, dt); break;
    }
    CU_LAUNCHED("embed_rows");
}

/* Block r (cu_rms_threads(n) threads, as k_rmsnorm): row r of the MTP input, y_r = [rmsnorm(row tok_r of w)
 * ⊙ we | rmsnorm(h_r) ⊙ wh], each half with k_rmsnorm's arithmetic — the embedding's entries are
 * load_one's (k_embed's values), each sum of squares runs over entries i, i + T, ... in that order and
 * through cu_block_sum, each output is (x · inv) · w — so the bits are those of embed_rows and two
 * rmsnorm_rows; then, with p.kind, the 2n-wide row prepared for the matmul that reads y next (the
 * stand-alone preparation's arithmetic, cu_prep_from). One launch instead of three or four: a tiny
 * model's draft step is a chain of such links. */
template <int F>
__global__ void __launch_bounds__(1024) k_embed_norm_pair(float *y, int ldy, wdesc w, const __grid_constant__ emb_tokens itok,
                                                          const int32_t *dtok, const float *h, int ldh, const float *we,
                                                          const float *wh, int n, float eps, cu_prep_out p) {
    CU_PDL_ENTRY();
    __shared__ float sh[66];
    const int r = blockIdx.x, tok = dtok ? dtok[r] : itok.t[r];
    float *yt = y + (size_t)r * ldy;
    const float *ht = h + (size_t)r * ldh;
    float s = 0.f, s2 = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = load_one<F>(w, tok, i);
        yt[i] = v; /* this thread's own entries: read back below */
        s = fmaf(v, v, s);
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) s2 = fmaf(ht[i], ht[i], s2);
    float ts, ts2;
    cu_block_sum2(s, s2, sh, &ts, &ts2); /* both norms' sums with one set of barriers, each cu_block_sum's bits */
    const float inv = 1.0f / sqrtf(ts / (float)n + eps);
    const float inv2 = 1.0f / sqrtf(ts2 / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        yt[i] = (yt[i] * inv) * we[i];
        yt[n + i] = (ht[i] * inv2) * wh[i];
    }
    if (p.kind) cu_prep_from(p, yt, 2 * n, 0, r);
}

void cu_embed_norm_pair_rows(be_backend *be, float *y, int ldy, float *a, const be_weight *emb, const int32_t *tokens,
                             const float *h, int ldh, const float *we, const float *wh, int n, int R, float eps) {
    if (!cu_set.fuse_mtp_in || R <= 0 || R > 65535 || emb->cols != n) { /* the three ops */
        be->ops->embed_rows(be, a, n, emb, tokens, R);
        be->ops->rmsnorm_rows(be, y, ldy, a, n, we, n, R, eps);
        be->ops->rmsnorm_rows(be, y + n, ldy, h, ldh, wh, n, R, eps);
        return;
    }
    CU_PROF("embed_norm_pair");
    cu_step_begin(R);
    cu_ctx *c = cu_of(be);
    const cu_wdev *d = cu_weight(c, emb);
    wdesc wd = {d->data, d->scales, d->biases, emb->rows, emb->cols, emb->group_size, (int)emb->scale_dtype};
    const float *dwe = cu_vec(c, we, sizeof(float) * n), *dwh = cu_vec(c, wh, sizeof(float) * n);
    emb_tokens it = {};
    const int32_t *dt = NULL;
    if (R <= EMB_INLINE) memcpy(it.t, tokens, sizeof(int32_t) * (size_t)R);
    else dt = cu_stage_idx(c, tokens, (size_t)R);
    cu_prep_out p;
    cu_prep_begin(y, ldy, R, 2 * n, 2 * n, &p);
    const int T = cu_rms_threads(n);
    switch (fmt_of(emb)) {
    case F_F32: cu_launch(k_embed_norm_pair<F_F32>, R, T, 0, y, ldy, wd, it, dt, h, ldh, dwe, dwh, n, eps, p); break;
    case F_F16: cu_launch(k_embed_norm_pair<F_F16>, R, T, 0, y, ldy, wd, it, dt, h, ldh, dwe, dwh, n, eps, p); break;
    case F_BF16: cu_launch(k_embed_norm_pair<F_BF16>, R, T, 0, y, ldy, wd, it, dt, h, ldh, dwe, dwh, n, eps, p); break;
    case F_Q8: cu_launch(k_embed_norm_pair<F_Q8>, R, T, 0, y, ldy, wd, it, dt, h, ldh, dwe, dwh, n, eps, p); break;
    default: cu_launch(k_embed_norm_pair<F_Q4>, R, T, 0, y, ldy, wd, it, dt, h, ldh, dwe, dwh, n, eps, p); break;
    }
    CU_LAUNCHED("embed_norm_pair");
    if (p.kind) cu_prep_done(&p, y, ldy);
}
