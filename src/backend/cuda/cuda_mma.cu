/* cuda_mma.cu — tensor-core matmul for decode and verify (R = 1..16 rows per pass; the stream-K
 * kernels take 1..32 for bf16) on bf16 weights and MLX affine q4 / q8 weights, read straight from the
 * checkpoint layout (docs/architecture.md, "The CUDA backend"; bench/cuda.md for the measurements).
 *
 * The kernels below are the fallback: by default the matmul itself runs in cuda_mma_sk.cu (stream-K
 * split, same arithmetic; calls of 48 rows or more in cuda_gemm.cu, same bits) and this file prepares
 * its activations; these run with $MTPLX_CUDA_SK=0 and for q weights with f32 scales or K % 128 != 0.
 *
 * Numerics follow the CPU backend's fast paths, so the GPU and the CPU agree to fp32 rounding:
 *   - bf16: each activation row x is split once per call into x_hi = bf16(x) and x_lo = bf16(x − x_hi)
 *     (as matmul_bf16dp.c); every weight fragment meets both halves in mma.sync m16n8k16 (bf16 × bf16
 *     products are exact, fp32 accumulation).
 *   - q4 / q8: activations are quantized per weight group to int8 exactly as qact_fill_portable
 *     (d = max|x| / 127, a = rint(x · 127 / max|x|)); the integer group sums come from mma.sync
 *     m16n8k32 u8 × s8 (exact), and each group adds (float)Σqa · (s·d) and b · (d·Σa), as
 *     mm_qrows_portable (docs/kernels.md, "MLX affine quantized weights").
 *
 * Work split: a block of MMA_WARPS warps owns 16 consecutive outputs (one mma M tile) and one of
 * `ksplit` K ranges; its warps take the 32-wide K blocks (bf16) or weight groups (q) of that range in
 * turn, every warp streaming both 16-byte halves of its 16 weight rows while the activations (a few KB)
 * come from L1 / L2. The warps' partial tiles are added in warp order; with ksplit > 1 each block
 * stores its partial, and the last block of a tile to finish (a counter per tile) adds the ksplit
 * partials in range order. ksplit depends only on the weight's shape and the GPU, never on R.
 *
 * Batch invariance (DESIGN.md §3): a row of x is one column of the mma B operand; the hardware computes
 * each output column from its own column only, the K order and the reductions are fixed, so a row's
 * bits do not depend on R or on its neighbours (test_backend_cuda checks R = 1..20 against solo rows). */
#include "cuda_internal.cuh"

#include <cuda_bf16.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../../base/dtype.h"
#include "../../kernels/knobs.h"
}

#define MMA_WARPS 4      /* warps per block: they split the block's K range */
#define MMA_ROWS 16      /* activation rows per pass (two mma N tiles of 8) */
#define MMA_BLOCKS 2048  /* aim for about this many blocks per call when choosing ksplit */
#define MMA_GROUP_MAX 4  /* weights of a matmul_n in one grouped stream-K launch (cuda_mma_sk.cu's SK_JOBS_MAX) */

/* Per-thread device scratch: prepared activations, split-K partials and tile counters. Per host
 * thread because two threads may run forwards on one backend (server executors): each stages its own
 * activations; kernels of the backend's one stream (CU_STREAM) run one after another, so partials and counters
 * are never shared by two live kernels. Device memory is freed at process exit. */
typedef struct {
    void *x;           /* prepared activations */
    size_t x_cap;
    float *ws;         /* [ksplit][16][N] partials */
    size_t ws_cap;     /* floats */
    unsigned *cnt;     /* [tiles] finished blocks per tile, zero between calls */
    size_t cnt_cap;
} mma_scratch;

static thread_local mma_scratch tls_mma;

/* Makes *p hold at least `bytes` device bytes (contents lost when it grows; zeroed when `zero`). */
static void scratch_grow(void **p, size_t *cap, size_t bytes, int zero) {
    if (bytes <= *cap) return;
    size_t nc = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes + bytes / 2;
    cu_graph_break();
    CU_CHECK(cudaFree(*p), "matmul scratch"); /* synchronizes: no kernel still uses it */
    *p = NULL;
    CU_CHECK(cudaMalloc(p, nc), "matmul scratch");
    /* graph-safe: after cu_graph_break above */
    if (zero) CU_CHECK(cudaMemsetAsync(*p, 0, nc, CU_STREAM), "matmul scratch");
    *cap = nc;
}

/* ------------------------------------------------------------------ activation preparation */

/* xh / xl [R][K] from x: split_one of every entry. */
__global__ void k_split_x(__nv_bfloat16 *xh, __nv_bfloat16 *xl, const float *x, int ldx, int K) {
    CU_PDL_ENTRY();
    int k = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
    if (k >= K) return;
    split_one(xh, xl, x[(size_t)r * ldx + k], r, k, K);
}

/* One warp per (group g, row r): qact_group of row r of x. */
template <int GS, int BITS>
__global__ void k_qact(int8_t *a, float2 *db, const float *x, int ldx, int K) {
    CU_PDL_ENTRY();
    constexpr int PER = GS / 32;
    int g = blockIdx.x, r = blockIdx.y, lane = threadIdx.x;
    const float *xg = x + (size_t)r * ldx + (size_t)g * GS;
    float v[PER];
#pragma unroll
    for (int j = 0; j < PER; j++) v[j] = xg[lane + 32 * j];
    qact_group<GS, BITS>(a, db, v, g, r, lane, K);
}

/* ------------------------------------------------------------------ the shared epilogue */

/* Adds the block's warps' tiles (c: this thread's 4 values per N tile, rows g / g + 8, columns 2t /
 * 2t + 1) in warp order; then writes y (ksplit 1) or the block's partial, and the last block of the
 * tile adds the partials of ranges 0..ksplit-1 in order into y. */
template <int NT>
__device__ __forceinline__ void mma_finish(float (*c)[4], float *y, int ldy, int N, int R, int ksplit, float *ws,
                                           unsigned *cnt) {
    __shared__ float red[MMA_WARPS][16][NT * 8];
    __shared__ int last;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int mt = blockIdx.x, ks = blockIdx.y, n0 = mt * 16;
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        red[warp][g][nt * 8 + 2 * t] = c[nt][0];
        red[warp][g][nt * 8 + 2 * t + 1] = c[nt][1];
        red[warp][g + 8][nt * 8 + 2 * t] = c[nt][2];
        red[warp][g + 8][nt * 8 + 2 * t + 1] = c[nt][3];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < 16 * NT * 8; e += blockDim.x) {
        int i = e / (NT * 8), j = e % (NT * 8);
        if (j >= R || n0 + i >= N) continue;
        float v = red[0][i][j];
#pragma unroll
        for (int w = 1; w < MMA_WARPS; w++) v += red[w][i][j];
        if (ksplit == 1) y[(size_t)j * ldy + n0 + i] = v;
        else ws[((size_t)ks * 16 + j) * N + n0 + i] = v;
    }
    if (ksplit == 1) return;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&cnt[mt], 1u) == (unsigned)ksplit - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = threadIdx.x; e < 16 * NT * 8; e += blockDim.x) {
        int i = e / (NT * 8), j = e % (NT * 8);
        if (j >= R || n0 + i >= N) continue;
        float v = __ldcg(&ws[(size_t)j * N + n0 + i]);
        for (int s = 1; s < ksplit; s++) v += __ldcg(&ws[((size_t)s * 16 + j) * N + n0 + i]);
        y[(size_t)j * ldy + n0 + i] = v;
    }
    if (threadIdx.x == 0) cnt[mt] = 0;
}

/* ------------------------------------------------------------------ bf16 */

/* y[j][n] = Σ_k (xh + xl)[j][k] · W[n][k] for j < R (<= 8·NT), K % 32 == 0. Thread (g, t) of a warp
 * loads 8 consecutive inputs (16 bytes) of weight rows n0+g and n0+g+8 per 32-wide block; the mma's
 * logical K order is a fixed permutation of the block, the same for A and B. */
template <int NT>
__global__ void __launch_bounds__(MMA_WARPS * 32) k_mm_bf16(float *y, int ldy, const uint16_t *W, int N, int K,
                                                           const uint16_t *xh, const uint16_t *xl, int R, int ksplit,
                                                           float *ws, unsigned *cnt) {
    CU_PDL_ENTRY();
    constexpr int U = NT == 1 ? 4 : 2; /* K blocks in flight per warp */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int n0 = blockIdx.x * 16, ks = blockIdx.y;
    int ra = min(n0 + g, N - 1), rb = min(n0 + g + 8, N - 1);
    const uint4 *wa = (const uint4 *)(W + (size_t)ra * K) + t, *wb = (const uint4 *)(W + (size_t)rb * K) + t;
    int nkb = K / 32, kb0 = (int)((long long)ks * nkb / ksplit), kb1 = (int)((long long)(ks + 1) * nkb / ksplit);
    const uint4 *bh[NT], *bl[NT];
    bool bv[NT];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        int row = nt * 8 + g;
        bv[nt] = row < R;
        bh[nt] = (const uint4 *)(xh + (size_t)(bv[nt] ? row : 0) * K) + t;
        bl[nt] = (const uint4 *)(xl + (size_t)(bv[nt] ? row : 0) * K) + t;
    }
    float c[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.f;
    const uint4 z = make_uint4(0, 0, 0, 0);
    for (int kb = kb0 + warp; kb < kb1; kb += MMA_WARPS * U) {
        uint4 A0[U], A1[U], BH[U][NT], BL[U][NT];
#pragma unroll
        for (int u = 0; u < U; u++) {
            int k = kb + u * MMA_WARPS;
            bool ok = k < kb1;
            A0[u] = ok ? __ldcs(wa + (size_t)k * 4) : z;
            A1[u] = ok ? __ldcs(wb + (size_t)k * 4) : z;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                BH[u][nt] = ok && bv[nt] ? __ldg(bh[nt] + (size_t)k * 4) : z;
                BL[u][nt] = ok && bv[nt] ? __ldg(bl[nt] + (size_t)k * 4) : z;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (kb + u * MMA_WARPS >= kb1) break;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                cu_mma_bf16(c[nt], A0[u].x, A1[u].x, A0[u].y, A1[u].y, BH[u][nt].x, BH[u][nt].y);
                cu_mma_bf16(c[nt], A0[u].z, A1[u].z, A0[u].w, A1[u].w, BH[u][nt].z, BH[u][nt].w);
                cu_mma_bf16(c[nt], A0[u].x, A1[u].x, A0[u].y, A1[u].y, BL[u][nt].x, BL[u][nt].y);
                cu_mma_bf16(c[nt], A0[u].z, A1[u].z, A0[u].w, A1[u].w, BL[u][nt].z, BL[u][nt].w);
            }
        }
    }
    mma_finish<NT>(c, y, ldy, N, R, ksplit, ws, cnt);
}

/* ------------------------------------------------------------------ q4 / q8 */

template <int WPT> struct words;
template <> struct words<1> {
    static __device__ __forceinline__ void ld(uint32_t *v, const uint32_t *p) { v[0] = __ldcs(p); }
};
template <> struct words<2> {
    static __device__ __forceinline__ void ld(uint32_t *v, const uint32_t *p) {
        uint2 a = __ldcs((const uint2 *)p);
        v[0] = a.x, v[1] = a.y;
    }
};
template <> struct words<4> {
    static __device__ __forceinline__ void ld(uint32_t *v, const uint32_t *p) {
        uint4 a = __ldcs((const uint4 *)p);
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
    }
};
template <> struct words<8> {
    static __device__ __forceinline__ void ld(uint32_t *v, const uint32_t *p) {
        words<4>::ld(v, p), words<4>::ld(v + 4, p + 4);
    }
};

/* Activation words (cached loads) of the same widths. */
template <int N_>
__device__ __forceinline__ void ld_act(uint32_t *v, const uint32_t *p) {
#pragma unroll
    for (int i = 0; i < N_; i += 2) {
        uint2 a = __ldg((const uint2 *)(p + i));
        v[i] = a.x, v[i + 1] = a.y;
    }
}

__device__ __forceinline__ float sb_at(const void *p, int sdt, size_t i) {
    if (sdt == DT_BF16) return cu_bf16(__ldg((const uint16_t *)p + i));
    if (sdt == DT_F16) return __half2float(__ushort_as_half(__ldg((const unsigned short *)p + i)));
    return __ldg((const float *)p + i);
}

/* y[j][n] = Σ_g (Σ_{k∈g} q[n][k]·a[j][k]) · (s[n][g]·d[j][g]) + Σ_g b[n][g]·bd[j][g]. A block's warps take
 * whole groups; per group thread (g, t) loads WPT consecutive weight words of rows n0+g and n0+g+8
 * (the group's t-th quarter) and the matching activation words. */
template <int BITS, int GS, int NT>
__global__ void __launch_bounds__(MMA_WARPS * 32) k_mm_q(float *y, int ldy, const uint32_t *W, const void *S,
                                                        const void *Bs, int sdt, int N, int K, const uint32_t *xa,
                                                        const float2 *xdb, int R, int ksplit,
                                                        float *ws, unsigned *cnt) {
    CU_PDL_ENTRY();
    constexpr int GW = GS * BITS / 32;         /* weight words per row and group */
    constexpr int WPT = GW / 4;                /* ... per thread */
    constexpr int APT = GS / 16;               /* activation words (4 int8) per thread and group */
    constexpr int NMMA = GS / 32;
    constexpr int U0 = (NT == 1 ? 8 : 4) / WPT, U = U0 < 1 ? 1 : U0; /* groups in flight per warp */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    int n0 = blockIdx.x * 16, ks = blockIdx.y, G = K / GS;
    int ra = min(n0 + g, N - 1), rb = min(n0 + g + 8, N - 1);
    size_t wpr = (size_t)K * BITS / 32;
    const uint32_t *wa = W + (size_t)ra * wpr + t * WPT, *wb = W + (size_t)rb * wpr + t * WPT;
    int g0 = (int)((long long)ks * G / ksplit), g1 = (int)((long long)(ks + 1) * G / ksplit);
    const uint32_t *ap[NT];
    bool bv[NT], cv[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        int row = nt * 8 + g;
        bv[nt] = row < R;
        ap[nt] = xa + (size_t)(bv[nt] ? row : 0) * (K / 4) + t * APT;
        cv[nt][0] = nt * 8 + 2 * t < R, cv[nt][1] = nt * 8 + 2 * t + 1 < R;
    }
    float acc[NT][4], bacc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[nt][i] = bacc[nt][i] = 0.f;
    for (int gb = g0 + warp; gb < g1; gb += MMA_WARPS * U) {
        uint32_t A0[U][WPT], A1[U][WPT], B[U][NT][APT];
        float sa[U], sbv[U], ba[U], bb[U], D[U][NT][4]; /* scales, biases; activation d, d·Σa */
#pragma unroll
        for (int u = 0; u < U; u++) { /* every load of U groups first: bytes in flight */
            int gi = gb + u * MMA_WARPS;
            if (gi >= g1) break;
            words<WPT>::ld(A0[u], wa + (size_t)gi * GW);
            words<WPT>::ld(A1[u], wb + (size_t)gi * GW);
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                if (bv[nt]) ld_act<APT>(B[u][nt], ap[nt] + (size_t)gi * (GS / 4));
                else
#pragma unroll
                    for (int i = 0; i < APT; i++) B[u][nt][i] = 0;
            }
            sa[u] = sb_at(S, sdt, (size_t)ra * G + gi), sbv[u] = sb_at(S, sdt, (size_t)rb * G + gi);
            ba[u] = sb_at(Bs, sdt, (size_t)ra * G + gi), bb[u] = sb_at(Bs, sdt, (size_t)rb * G + gi);
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                int c0 = nt * 8 + 2 * t;
                float2 e0 = cv[nt][0] ? __ldg(xdb + (size_t)c0 * G + gi) : make_float2(0.f, 0.f);
                float2 e1 = cv[nt][1] ? __ldg(xdb + (size_t)(c0 + 1) * G + gi) : make_float2(0.f, 0.f);
                D[u][nt][0] = e0.x, D[u][nt][1] = e1.x, D[u][nt][2] = e0.y, D[u][nt][3] = e1.y;
            }
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
            int gi = gb + u * MMA_WARPS;
            if (gi >= g1) break;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                int ic[4] = {0, 0, 0, 0};
#pragma unroll
                for (int s = 0; s < NMMA; s++) {
                    if (BITS == 4)
                        cu_mma_u8s8(ic, A0[u][s] & 0x0F0F0F0Fu, A1[u][s] & 0x0F0F0F0Fu, (A0[u][s] >> 4) & 0x0F0F0F0Fu,
                                 (A1[u][s] >> 4) & 0x0F0F0F0Fu, B[u][nt][2 * s], B[u][nt][2 * s + 1]);
                    else
                        cu_mma_u8s8(ic, A0[u][2 * s], A1[u][2 * s], A0[u][2 * s + 1], A1[u][2 * s + 1], B[u][nt][2 * s],
                                 B[u][nt][2 * s + 1]);
                }
                float d0 = D[u][nt][0], d1 = D[u][nt][1], e0 = D[u][nt][2], e1 = D[u][nt][3];
                acc[nt][0] = fmaf((float)ic[0], __fmul_rn(sa[u], d0), acc[nt][0]);
                acc[nt][1] = fmaf((float)ic[1], __fmul_rn(sa[u], d1), acc[nt][1]);
                acc[nt][2] = fmaf((float)ic[2], __fmul_rn(sbv[u], d0), acc[nt][2]);
                acc[nt][3] = fmaf((float)ic[3], __fmul_rn(sbv[u], d1), acc[nt][3]);
                bacc[nt][0] = fmaf(ba[u], e0, bacc[nt][0]);
                bacc[nt][1] = fmaf(ba[u], e1, bacc[nt][1]);
                bacc[nt][2] = fmaf(bb[u], e0, bacc[nt][2]);
                bacc[nt][3] = fmaf(bb[u], e1, bacc[nt][3]);
            }
        }
    }
    float c[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++) c[nt][i] = __fadd_rn(acc[nt][i], bacc[nt][i]);
    mma_finish<NT>(c, y, ldy, N, R, ksplit, ws, cnt);
}

/* ------------------------------------------------------------------ dispatch */

static int g_sms = 0; /* multiprocessors of the current GPU (read once) */

/* K ranges per tile for a weight of N outputs and `units` K units (32-wide blocks or groups):
 * about MMA_BLOCKS blocks per call, at least 4 units per warp. A function of the shape only. */
static int ksplit_of(int N, int units) {
    if (!g_sms) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev);
        if (g_sms <= 0) g_sms = 132;
    }
    int tiles = (N + 15) / 16;
    int want = (MMA_BLOCKS * g_sms / 132 + tiles - 1) / tiles;
    int most = units / (4 * MMA_WARPS);
    if (want > most) want = most;
    return want < 1 ? 1 : want;
}

int cu_mma_enabled(void) { return cu_set.mma; }

/* bf16 with whole 32-wide blocks, and quantized weights unless the process asked for fp32 activations
 * (the CPU's qact_f32 knob, $MTPLX_QACT=f32 / kern_matmul_set_qact_f32: the quantized goldens compare
 * that mode with the dequantized model; the CUDA-core kernel computes it). */
int cu_mma_handles(const be_weight *w) {
    if (w->dtype == DT_BF16) return w->cols % 32 == 0;
    return w->dtype == DT_U32 && !kern_knobs_get()->qact_f32;
}

/* The preparation a weight needs: 1 bf16 split, 2 q4 layout, 3 q8 layout (with the group in the key). */
static int prep_kind(const be_weight *w) {
    if (w->dtype == DT_BF16) return 1;
    return (w->bits == 4 ? 2 : 3) + 4 * w->group_size;
}

/* ------------------------------------------------------------------ preparation shared across ops
 *
 * The activations in the thread's scratch are described by t_prep; a top-level matmul / matmul_n op
 * that finds them prepared from the same x (same rows, stride, K and kind) by the op just before it
 * (cu_op_seq one less) or earlier in the same op skips its k_split_x / k_qact. Every op of the table
 * advances cu_op_seq, so any op between producer and consumer (which could write x) breaks the chain;
 * a matmul whose output overlaps x clears it; preparation inside a nested op (the MoE block) clears it
 * since it overwrites the scratch. Producers: prep_x itself, and the element-wise ops that write a
 * matmul's input (rmsnorm, swiglu), which prepare their output in the same kernel when t_hint says
 * which kind the matmul reading that address last needed — the arithmetic of the stand-alone kernels
 * (split_one, qact_group), so the bits are the same as without the fusion. $MTPLX_CUDA_FUSE=0: off. */
typedef struct {
    const float *x;
    int ldx, R, K, kind;
    unsigned long seq; /* cu_op_seq of the op that produced or last used them */
    int valid;
} prep_rec;

/* The preparation kind and K the last top-level preparation from address x needed (a guess for the
 * op that writes x next time; a wrong guess costs a second preparation, never a wrong result). */
typedef struct {
    const float *x;
    int K, kind;
} prep_hint;

#define PREP_HINTS 16

static thread_local prep_rec t_prep;
static thread_local prep_hint t_hint[PREP_HINTS];
static thread_local int t_hint_at;

static int fuse_enabled(void) { return cu_fuse_enabled(); }

static void hint_note(const float *x, int K, int kind) {
    for (int i = 0; i < PREP_HINTS; i++)
        if (t_hint[i].x == x) {
            t_hint[i].K = K, t_hint[i].kind = kind;
            return;
        }
    t_hint[t_hint_at] = (prep_hint){x, K, kind};
    t_hint_at = (t_hint_at + 1) % PREP_HINTS;
}

static int hint_kind(const float *x, int K) {
    for (int i = 0; i < PREP_HINTS; i++)
        if (t_hint[i].x == x && t_hint[i].K == K) return t_hint[i].kind;
    return 0;
}

/* A matmul wrote y (R rows of N outputs, stride ldy): the preparation is stale if y overlaps its x. */
static void prep_clobber(const float *y, int ldy, int R, int N) {
    if (!t_prep.valid || R <= 0) return;
    const float *ye = y + (size_t)(R - 1) * ldy + N;
    const float *xe = t_prep.x + (size_t)(t_prep.R - 1) * t_prep.ldx + t_prep.K;
    if (y < xe && t_prep.x < ye) t_prep.valid = 0;
}

/* Makes the scratch hold the prepared activations' bytes; returns it. */
static void *prep_space(int kind, int R, int K) {
    mma_scratch *s = &tls_mma;
    if (kind == 1) {
        scratch_grow(&s->x, &s->x_cap, (size_t)R * K * 4, 0);
    } else {
        int G = K / (kind / 4);
        size_t ab = ((size_t)R * K + 255) & ~(size_t)255;
        scratch_grow(&s->x, &s->x_cap, ab + (size_t)R * G * 8, 0);
    }
    return s->x;
}

/* Records that the scratch now holds x prepared (by a top-level op), or clears the record. */
static void prep_set(const float *x, int ldx, int R, int K, int kind) {
    if (cu_op_depth != 1) {
        t_prep.valid = 0;
        return;
    }
    /* the hint keeps the first kind an op needed from x (a matmul_n over mixed weights prepares twice) */
    if (!(t_prep.valid && t_prep.x == x && t_prep.seq == cu_op_seq)) hint_note(x, K, kind);
    t_prep = (prep_rec){x, ldx, R, K, kind, cu_op_seq, 1};
}

/* Prepares R rows of x for weights of kind `kind` and K inputs into the thread's scratch (nothing to
 * do when t_prep says they are there). */
static void prep_x(int kind, const float *x, int ldx, int R, int K) {
    mma_scratch *s = &tls_mma;
    if (cu_op_depth == 1 && t_prep.valid && t_prep.x == x && t_prep.ldx == ldx && t_prep.R == R && t_prep.K == K &&
        t_prep.kind == kind && (t_prep.seq == cu_op_seq || t_prep.seq + 1 == cu_op_seq) && fuse_enabled()) {
        t_prep.seq = cu_op_seq;
        return;
    }
    prep_set(x, ldx, R, K, kind);
    if (kind == 1) {
        scratch_grow(&s->x, &s->x_cap, (size_t)R * K * 4, 0);
        __nv_bfloat16 *xh = (__nv_bfloat16 *)s->x, *xl = xh + (size_t)R * K;
        cu_launch(k_split_x, dim3((K + 255) / 256, R), 256, 0, xh, xl, x, ldx, K);
        CU_LAUNCHED("matmul split");
        return;
    }
    int gs = kind / 4, bits = kind % 4 == 2 ? 4 : 8, G = K / gs;
    size_t ab = ((size_t)R * K + 255) & ~(size_t)255;
    scratch_grow(&s->x, &s->x_cap, ab + (size_t)R * G * 8, 0);
    int8_t *a = (int8_t *)s->x;
    float2 *db = (float2 *)((char *)s->x + ab);
    dim3 grid(G, R);
#define QACT(GS_, B_) cu_launch(k_qact<GS_, B_>, grid, 32, 0, a, db, x, ldx, K)
    if (bits == 4) {
        if (gs == 32) QACT(32, 4);
        else if (gs == 64) QACT(64, 4);
        else QACT(128, 4);
    } else {
        if (gs == 32) QACT(32, 8);
        else if (gs == 64) QACT(64, 8);
        else QACT(128, 8);
    }
#undef QACT
    CU_LAUNCHED("matmul qact");
}

/* One block per row: k_rmsnorm's arithmetic (cuda_backend.cu; with o, the deferred x += o first),
 * and the row prepared as KIND (1: bf16 split; else q of group GS, BITS) into xp, for R = gridDim.x
 * rows of K = n inputs. Every value is computed as k_rmsnorm computes it and the sum of squares runs
 * over the same entries in the same order (cu_rms_threads(n) = T threads, thread i: i, i + T, ...), so
 * the bits are the same. A thread loads B entries (a warp B groups) before it uses any of them: one
 * block per row means that at decode the kernel's time is its dependent round trips to L2, B times
 * fewer this way (B = 1: one per entry / group, $MTPLX_CUDA_RMS_BATCH=1; bench/cuda.md, "Session 6"),
 * and about 4 entries a thread since session 7 (up to 1,024 threads) make most rows one batch. The q
 * branch reads entries other threads added: cu_block_sum's barriers order those writes before it. */
template <int KIND, int GS, int BITS, int B>
__global__ void __launch_bounds__(1024) k_rmsnorm_prep(float *y, int ldy, float *x, int ldx, const float *o, const float *w, int n,
                               float eps, void *xp) {
    CU_PDL_ENTRY();
    __shared__ float sh[33];
    int r = blockIdx.x, R = gridDim.x, bd = blockDim.x;
    float *xt = x + (size_t)r * ldx;
    float *yt = y + (size_t)r * ldy;
    const float *ot = o ? o + (size_t)r * n : NULL;
    float s = 0.f;
    for (int i0 = threadIdx.x; i0 < n; i0 += B * bd) {
        float v[B], e[B];
#pragma unroll
        for (int u = 0; u < B; u++) {
            int i = i0 + u * bd;
            v[u] = i < n ? xt[i] : 0.f;
            e[u] = ot && i < n ? ot[i] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < B; u++) {
            int i = i0 + u * bd;
            if (i >= n) break;
            if (ot) v[u] = v[u] + e[u], xt[i] = v[u];
            s = fmaf(v[u], v[u], s);
        }
    }
    float inv = 1.0f / sqrtf(cu_block_sum(s, sh) / (float)n + eps);
    if (KIND == 1) {
        __nv_bfloat16 *xh = (__nv_bfloat16 *)xp, *xl = xh + (size_t)R * n;
        for (int i0 = threadIdx.x; i0 < n; i0 += B * bd) {
            float xv[B], wv[B];
#pragma unroll
            for (int u = 0; u < B; u++) {
                int i = i0 + u * bd;
                xv[u] = i < n ? xt[i] : 0.f;
                wv[u] = i < n ? w[i] : 0.f;
            }
#pragma unroll
            for (int u = 0; u < B; u++) {
                int i = i0 + u * bd;
                if (i >= n) break;
                float v = (xv[u] * inv) * wv[u];
                yt[i] = v;
                split_one(xh, xl, v, r, i, n);
            }
        }
    } else {
        constexpr int PER = GS / 32;
        size_t ab = ((size_t)R * n + 255) & ~(size_t)255;
        int8_t *a = (int8_t *)xp;
        float2 *db = (float2 *)((char *)xp + ab);
        int lane = threadIdx.x & 31, nw = bd >> 5, G = n / GS;
        for (int g0 = threadIdx.x >> 5; g0 < G; g0 += B * nw) { /* warp-uniform bounds: qact_group shuffles */
            float xv[B][PER], wv[B][PER];
#pragma unroll
            for (int u = 0; u < B; u++)
#pragma unroll
                for (int j = 0; j < PER; j++) {
                    int g = g0 + u * nw, k = g * GS + lane + 32 * j;
                    xv[u][j] = g < G ? xt[k] : 0.f;
                    wv[u][j] = g < G ? w[k] : 0.f;
                }
#pragma unroll
            for (int u = 0; u < B; u++) {
                int g = g0 + u * nw;
                if (g >= G) break;
                float v[PER];
#pragma unroll
                for (int j = 0; j < PER; j++) {
                    int k = g * GS + lane + 32 * j;
                    v[j] = (xv[u][j] * inv) * wv[u][j];
                    yt[k] = v[j];
                }
                qact_group<GS, BITS>(a, db, v, g, r, lane, n);
            }
        }
    }
}

/* y = silu(g) · u (k_swiglu's arithmetic, cuda_backend.cu), prepared as KIND into xp for R rows of K
 * = n inputs. bf16: one thread per entry, grid (ceil(n / 256), R); q: one warp per group, grid (G, R). */
template <int KIND, int GS, int BITS>
__global__ void k_swiglu_prep(float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int n, int R,
                              void *xp) {
    CU_PDL_ENTRY();
    int t = blockIdx.y;
    if (KIND == 1) {
        int c = blockIdx.x * blockDim.x + threadIdx.x;
        if (c >= n) return;
        float v = cu_silu(g[(size_t)t * ldg + c]) * u[(size_t)t * ldu + c];
        y[(size_t)t * ldy + c] = v;
        __nv_bfloat16 *xh = (__nv_bfloat16 *)xp, *xl = xh + (size_t)R * n;
        split_one(xh, xl, v, t, c, n);
    } else {
        constexpr int PER = GS / 32;
        size_t ab = ((size_t)R * n + 255) & ~(size_t)255;
        int gi = blockIdx.x, lane = threadIdx.x;
        float v[PER];
#pragma unroll
        for (int j = 0; j < PER; j++) {
            int c = gi * GS + lane + 32 * j;
            v[j] = cu_silu(g[(size_t)t * ldg + c]) * u[(size_t)t * ldu + c];
            y[(size_t)t * ldy + c] = v[j];
        }
        qact_group<GS, BITS>((int8_t *)xp, (float2 *)((char *)xp + ab), v, gi, t, lane, n);
    }
}

/* Dispatches KIND-templated launches: L(KIND, GS, BITS) for a preparation kind. */
#define PREP_DISPATCH(kind, L)                                                                                         \
    do {                                                                                                               \
        switch (kind) {                                                                                                \
        case 1: L(1, 32, 4); break;                                                                                    \
        case 2 + 4 * 32: L(2, 32, 4); break;                                                                           \
        case 2 + 4 * 64: L(2, 64, 4); break;                                                                           \
        case 2 + 4 * 128: L(2, 128, 4); break;                                                                         \
        case 3 + 4 * 32: L(3, 32, 8); break;                                                                           \
        case 3 + 4 * 64: L(3, 64, 8); break;                                                                           \
        default: L(3, 128, 8); break;                                                                                  \
        }                                                                                                              \
    } while (0)

int cu_mma_rmsnorm(float *y, int ldy, float *x, int ldx, const float *o, const float *w, int n, int R, float eps) {
    if (!fuse_enabled() || cu_op_depth != 1 || !cu_mma_enabled()) return 0;
    int kind = hint_kind(y, n);
    if (!kind || (kind != 1 && n % (kind / 4))) return 0;
    void *xp = prep_space(kind, R, n);
#define RMS_L(KD, GS_, B_)                                                                                             \
    cu_launch(cu_set.rms_batch == 1 ? k_rmsnorm_prep<KD, GS_, B_, 1> : k_rmsnorm_prep<KD, GS_, B_, 4>, R,            \
              cu_rms_threads(n), 0, y, ldy, x, ldx, o, w, n, eps, xp)
    PREP_DISPATCH(kind, RMS_L);
#undef RMS_L
    CU_LAUNCHED("rmsnorm prep");
    prep_set(y, ldy, R, n, kind);
    return 1;
}

int cu_mma_swiglu(float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int n, int R) {
    if (!fuse_enabled() || cu_op_depth != 1 || !cu_mma_enabled()) return 0;
    int kind = hint_kind(y, n);
    if (!kind || (kind != 1 && n % (kind / 4))) return 0;
    void *xp = prep_space(kind, R, n);
    dim3 grid(kind == 1 ? (n + 255) / 256 : n / (kind / 4), R);
    int threads = kind == 1 ? 256 : 32;
#define SWI_L(KD, GS_, B_) cu_launch(k_swiglu_prep<KD, GS_, B_>, grid, threads, 0, y, ldy, g, ldg, u, ldu, n, R, xp)
    PREP_DISPATCH(kind, SWI_L);
#undef SWI_L
    CU_LAUNCHED("swiglu prep");
    prep_set(y, ldy, R, n, kind);
    return 1;
}

int cu_prep_begin(const float *y, int ldy, int R, int K, int unit, cu_prep_out *p) {
    p->kind = 0;
    if (!fuse_enabled() || !cu_set.fuse_seq || cu_op_depth != 1 || !cu_mma_enabled() || R <= 0) return 0;
    int kind = hint_kind(y, K);
    if (!kind || (kind != 1 && (K % (kind / 4) || unit % (kind / 4)))) return 0;
    *p = (cu_prep_out){prep_space(kind, R, K), kind, R, K};
    (void)ldy;
    return 1;
}

void cu_prep_done(const cu_prep_out *p, const float *y, int ldy) {
    if (p->kind) prep_set(y, ldy, p->R, p->K, p->kind);
}

/* y = x · Wᵀ from activations already prepared for w's kind (prep_x with the same R and K). */
static void mma_run(be_backend *be, float *y, int ldy, int R, const be_weight *w) {
    const cu_wdev *dv = cu_weight(cu_of(be), w);
    mma_scratch *s = &tls_mma;
    int N = w->rows, K = w->cols, tiles = (N + 15) / 16;
    int units = w->dtype == DT_BF16 ? K / 32 : K / w->group_size;
    int ksplit = ksplit_of(N, units);
    int sk = w->dtype == DT_BF16 ? cu_sk_enabled() : cu_sk_q_handles(w, dv);
    if (ksplit > 1 && !sk) {
        scratch_grow((void **)&s->ws, &s->ws_cap, (size_t)ksplit * 16 * N * sizeof(float), 0);
        scratch_grow((void **)&s->cnt, &s->cnt_cap, (size_t)tiles * sizeof(unsigned), 1);
    }
    if (sk && cu_gemm_takes(w, R)) { /* many rows: the GEMM, same bits as the loop below (cuda_gemm.cu) */
        if (w->dtype == DT_BF16)
            cu_gemm_bf16(y, ldy, dv, w, (const uint16_t *)s->x, (const uint16_t *)s->x + (size_t)R * K, R);
        else
            cu_gemm_q(y, ldy, dv, w, s->x, (const float *)((const char *)s->x + (((size_t)R * K + 255) & ~(size_t)255)), R);
        prep_clobber(y, ldy, R, N);
        return;
    }
    dim3 grid(tiles, ksplit), blk(MMA_WARPS * 32);
    /* rows a launch takes (a row's bits are the same in any pass) */
    const int pass = !sk ? MMA_ROWS : w->dtype == DT_BF16 ? cu_set.sk_rows : SK_Q_ROWS;
    for (int r0 = 0; r0 < R; r0 += pass) {
        int rows = R - r0 < pass ? R - r0 : pass;
        float *yr = y + (size_t)r0 * ldy;
        if (w->dtype == DT_BF16) {
            const uint16_t *xh = (const uint16_t *)s->x + (size_t)r0 * K, *xl = (const uint16_t *)s->x + (size_t)(R + r0) * K;
            if (sk) {
                cu_sk_bf16(yr, ldy, dv, w, xh, xl, rows);
                continue;
            }
            if (rows <= 8)
                cu_launch(k_mm_bf16<1>, grid, blk, 0, yr, ldy, (const uint16_t *)dv->data, N, K, xh, xl, rows, ksplit, s->ws, s->cnt);
            else
                cu_launch(k_mm_bf16<2>, grid, blk, 0, yr, ldy, (const uint16_t *)dv->data, N, K, xh, xl, rows, ksplit, s->ws, s->cnt);
        } else {
            int gs = w->group_size, G = K / gs;
            size_t ab = ((size_t)R * K + 255) & ~(size_t)255;
            const uint32_t *xa = (const uint32_t *)((const int8_t *)s->x + (size_t)r0 * K);
            const float2 *db = (const float2 *)((const char *)s->x + ab) + (size_t)r0 * G;
            if (sk) {
                cu_sk_q(yr, ldy, dv, w, xa, (const float *)db, rows);
                continue;
            }
            const uint32_t *W = (const uint32_t *)dv->data;
            int sdt = (int)w->scale_dtype;
#define QMM(B_, GS_, NT_)                                                                                              \
    cu_launch(k_mm_q<B_, GS_, NT_>, grid, blk, 0, yr, ldy, W, dv->scales, dv->biases, sdt, N, K, xa, db, rows, ksplit, s->ws,   \
                                        s->cnt)
#define QMM_NT(B_, GS_)                                                                                                \
    do {                                                                                                               \
        if (rows <= 8) QMM(B_, GS_, 1);                                                                                \
        else QMM(B_, GS_, 2);                                                                                          \
    } while (0)
            if (w->bits == 4) {
                if (gs == 32) QMM_NT(4, 32);
                else if (gs == 64) QMM_NT(4, 64);
                else QMM_NT(4, 128);
            } else {
                if (gs == 32) QMM_NT(8, 32);
                else if (gs == 64) QMM_NT(8, 64);
                else QMM_NT(8, 128);
            }
#undef QMM_NT
#undef QMM
        }
        CU_LAUNCHED("matmul mma");
    }
    prep_clobber(y, ldy, R, N);
}

void cu_prep_clobber(const float *y, int ldy, int R, int N) { prep_clobber(y, ldy, R, N); }

void cu_mma_matmul(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w) {
    prep_x(prep_kind(w), x, ldx, R, w->cols);
    mma_run(be, y, ldy, R, w);
}

/* The stream-K kernel computes w (with the activations prepared for its kind). */
static int sk_runs(be_backend *be, const be_weight *w) {
    return w->dtype == DT_BF16 ? cu_sk_enabled() : cu_sk_q_handles(w, cu_weight(cu_of(be), w));
}

/* m outputs of one kind and K, all run by the stream-K kernel, from activations already prepared for
 * that kind: grouped launches (cu_sk_*_n), up to SK_ROWS (q: SK_Q_ROWS) rows at a time; each output
 * bit-identical to mma_run's. */
static void mma_run_sk_n(be_backend *be, const be_mm_out *outs, int m, int R) {
    mma_scratch *s = &tls_mma;
    const be_weight *w0 = outs[0].w;
    int K = w0->cols;
    if (cu_gemm_takes(w0, R)) { /* many rows: one GEMM per weight, each bit-identical to its grouped output */
        for (int j = 0; j < m; j++) mma_run(be, outs[j].y, outs[j].ldy, R, outs[j].w);
        return;
    }
    cu_sk_out o[MMA_GROUP_MAX];
    const int pass = w0->dtype == DT_BF16 ? cu_set.sk_rows : SK_Q_ROWS;
    for (int r0 = 0; r0 < R; r0 += pass) {
        int rows = R - r0 < pass ? R - r0 : pass;
        for (int j = 0; j < m; j++)
            o[j] = (cu_sk_out){outs[j].y + (size_t)r0 * outs[j].ldy, outs[j].ldy, outs[j].w, cu_weight(cu_of(be), outs[j].w)};
        if (w0->dtype == DT_BF16) {
            const uint16_t *xh = (const uint16_t *)s->x + (size_t)r0 * K, *xl = (const uint16_t *)s->x + (size_t)(R + r0) * K;
            cu_sk_bf16_n(o, m, xh, xl, rows);
        } else {
            int G = K / w0->group_size;
            size_t ab = ((size_t)R * K + 255) & ~(size_t)255;
            const int8_t *xa = (const int8_t *)s->x + (size_t)r0 * K;
            const float2 *db = (const float2 *)((const char *)s->x + ab) + (size_t)r0 * G;
            cu_sk_q_n(o, m, xa, (const float *)db, rows);
        }
    }
    for (int j = 0; j < m; j++) prep_clobber(outs[j].y, outs[j].ldy, R, outs[j].w->rows);
}

/* ------------------------------------------------------------------ thin bf16 weights beside q ones */

#define THIN_N 64      /* output rows at most of a "thin" weight */
#define THIN_THREADS 256
#define THIN_ROWS 8    /* activation rows a block takes (each reads the weight row once for them) */

typedef struct {
    float *y;
    int ldy, N;
    const uint16_t *w; /* bf16 [N][K] */
} thin_job;

typedef struct {
    thin_job j[MMA_GROUP_MAX];
    int n;
} thin_jobs;

/* Block (ob, rb): outputs ob·opb .. ob·opb + opb - 1 of the jobs' outputs in order (one after another),
 * activation rows THIN_ROWS·rb .. + THIN_ROWS - 1: y[t][n] = Σ_k x[t][k]·w[n][k] in fp32 — thread i sums
 * k = i, i + THIN_THREADS, ... with FMA in k order, the warps fold by xor butterflies, and warp sums
 * add in warp order. An output's arithmetic is the same whatever rows or outputs share the block or
 * the launch (DESIGN.md §3); opb only trades blocks for re-reads of the activations (from L1). */
__global__ void __launch_bounds__(THIN_THREADS) k_thin_bf16(thin_jobs js, int total, int opb, const float *x, int ldx,
                                                            int K, int R) {
    CU_PDL_ENTRY();
    __shared__ float sh[THIN_THREADS / 32][THIN_ROWS];
    const int t0 = blockIdx.y * THIN_ROWS, nr = R - t0 < THIN_ROWS ? R - t0 : THIN_ROWS;
    const int lane = threadIdx.x & 31, wp = threadIdx.x >> 5;
    for (int q = 0; q < opb; q++) {
        int o = blockIdx.x * opb + q;
        if (o >= total) break;
        thin_job jb = js.j[0];
#pragma unroll
        for (int i = 1; i < MMA_GROUP_MAX; i++) /* unrolled: the jobs stay in parameter space */
            if (i < js.n && o >= jb.N) o -= jb.N, jb = js.j[i];
        const uint16_t *wr = jb.w + (size_t)o * K;
        float acc[THIN_ROWS];
#pragma unroll
        for (int r = 0; r < THIN_ROWS; r++) acc[r] = 0.f;
        for (int k = threadIdx.x; k < K; k += THIN_THREADS) {
            const float wv = __uint_as_float((uint32_t)wr[k] << 16);
#pragma unroll
            for (int r = 0; r < THIN_ROWS; r++)
                if (r < nr) acc[r] = fmaf(wv, __ldg(x + (size_t)(t0 + r) * ldx + k), acc[r]);
        }
#pragma unroll
        for (int r = 0; r < THIN_ROWS; r++) {
            for (int off = 16; off > 0; off >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], off);
            if (lane == 0) sh[wp][r] = acc[r];
        }
        __syncthreads();
        if (threadIdx.x < nr) {
            float v = 0.f;
            for (int i = 0; i < THIN_THREADS / 32; i++) v += sh[i][threadIdx.x];
            jb.y[(size_t)(t0 + threadIdx.x) * jb.ldy + o] = v;
        }
        __syncthreads();
    }
}

/* 1 when w is a thin bf16 weight: a matmul_n that also holds quantized weights (a q checkpoint keeps a
 * GDN layer's b / a projections in bf16) computes it with k_thin_bf16 from the fp32 activations — no
 * bf16 preparation of them and no stream-K launch of its own (27B-16l q4: 4k prefill +6%, decode +0.5%;
 * bench/cuda.md, "Session 17"). Which kernel computes a weight then depends on the call's weights only, never on its
 * row count, and a model computes such a weight through one call. $MTPLX_CUDA_THIN=0: every weight
 * through the mma kernels (other bits for the thin weights: a comparison knob). */
static int thin_weight(const be_weight *w) {
    return cu_set.thin && w->dtype == DT_BF16 && w->rows > 0 && w->rows <= THIN_N && w->cols % 2 == 0;
}

/* Runs the thin weights of outs (all of them when the call also holds a quantized weight, else none) in
 * launches of up to MMA_GROUP_MAX; returns 1 when it ran any. */
static int thin_run(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R) {
    int mixed = 0, any = 0;
    for (int i = 0; i < n; i++) {
        const be_weight *w = outs[i].w;
        if (w->rows > 0 && w->dtype != DT_BF16 && cu_mma_handles(w)) mixed = 1;
        any |= thin_weight(w);
    }
    if (!mixed || !any) return 0;
    thin_jobs js = {};
    int rows = 0, K = 0;
    for (int i = 0; i <= n; i++) {
        if (i == n || js.n == MMA_GROUP_MAX) {
            /* a decode / verify call: one output a block (latency); more rows: 8 a block, so the activations
             * are read from L2 an eighth as often */
            const int opb = R <= THIN_ROWS ? 1 : 8;
            if (js.n) {
                cu_launch(k_thin_bf16, dim3((rows + opb - 1) / opb, (R + THIN_ROWS - 1) / THIN_ROWS), THIN_THREADS, 0, js,
                          rows, opb, x, ldx, K, R);
                CU_LAUNCHED("matmul thin");
            }
            js.n = 0, rows = 0;
            if (i == n) break;
        }
        const be_weight *w = outs[i].w;
        if (!thin_weight(w)) continue;
        js.j[js.n++] = (thin_job){outs[i].y, outs[i].ldy, w->rows, (const uint16_t *)cu_weight(cu_of(be), w)->data};
        rows += w->rows, K = w->cols;
    }
    for (int i = 0; i < n; i++)
        if (thin_weight(outs[i].w)) prep_clobber(outs[i].y, outs[i].ldy, R, outs[i].w->rows);
    return 1;
}

/* Consecutive weights of one kind and K that the stream-K kernel runs go out as one grouped launch
 * ($MTPLX_CUDA_SK_GROUP=0: one launch per weight, a comparison knob; same bits either way). */
void cu_mma_matmul_n(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R) {
    const int group = cu_set.sk_group;
    const int thin = thin_run(be, outs, n, x, ldx, R);
    int prepared = -1, pk = 0;
    for (int i = 0; i < n;) {
        const be_weight *w = outs[i].w;
        if (w->rows <= 0 || (thin && thin_weight(w))) {
            i++;
            continue;
        }
        if (!cu_mma_handles(w)) {
            cu_matmul(be, outs[i].y, outs[i].ldy, x, ldx, R, w);
            i++;
            continue;
        }
        int kind = prep_kind(w);
        if (prepared != kind || pk != w->cols) prep_x(kind, x, ldx, R, w->cols), prepared = kind, pk = w->cols;
        int m = 1;
        if (group && sk_runs(be, w))
            while (i + m < n && m < MMA_GROUP_MAX && outs[i + m].w->rows > 0 && cu_mma_handles(outs[i + m].w) &&
                   prep_kind(outs[i + m].w) == kind && outs[i + m].w->cols == w->cols && sk_runs(be, outs[i + m].w) &&
                   !(thin && thin_weight(outs[i + m].w)))
                m++;
        if (m > 1) mma_run_sk_n(be, outs + i, m, R);
        else mma_run(be, outs[i].y, outs[i].ldy, R, w);
        i += m;
    }
}
