/* cuda_gemm.cu — the many-row matmul (prefill chunks, many-stream batches) on tensor cores, for bf16
 * weights and MLX affine q4 / q8 weights read in their checkpoint layout, with activations prepared by
 * cuda_mma.cu exactly as for the decode kernels (bf16 hi / lo split; int8 per group with d and d·Σa).
 * docs/architecture.md, "The CUDA backend"; bench/cuda.md, "Session 7", for the measurements.
 *
 * Why: the stream-K kernels (cuda_mma_sk.cu) take at most 16 activation rows per pass and stream every
 * weight once per pass, so a 128-row prefill chunk read the weights 8 times at ~4% of the tensor cores'
 * peak. Here a block owns BM = 64·MT weight rows × GM_BN = 64 activation rows over the whole of K, its
 * 8 warps (4 along the weights × 2 along the activations) each a (16·MT) × 32 tile of mma fragments;
 * weight and activation tiles stream through shared memory in an ST-deep cp.async ring of KS-span
 * stages (sweep knobs: $MTPLX_CUDA_GEMM_MT / _KS / _ST, all the same bits), so each weight byte is read
 * once per 64 activation rows. Measured at 128 rows on 17408 × 5120: 1.7× (bf16) / 1.6× (q4) the
 * stream-K kernel, 56 / 108 TFLOP/s (bench/cuda.md, "Session 7: many-row GEMM").
 *
 * Batch invariance by construction: every output is bit-identical to the stream-K kernel's, so the
 * dispatch (cuda_mma.cu) may pick this kernel by row count. An output element of mma.sync depends only
 * on its own weight row, its own activation column and its accumulator, and this kernel issues, per
 * output, the same instructions on the same operand registers in the same order:
 *   - the same mma shapes with the weight as the m16 operand and activations as the n8 columns;
 *   - bf16: per 32-wide K block (a "span") thread (g, t) holds the 8 consecutive inputs 8t..8t+7 of
 *     rows g / g+8 and of its activation column, and the four mmas run hi (inputs 0..3 of each thread,
 *     then 4..7), then lo, as k_sk_bf16 does;
 *   - q4 / q8: the integer group sums are exact (any K arrangement gives the same integers); the float
 *     epilogue per group is k_sk_q's (fmaf of (float)Σqa with s·d, bias term with d·Σa, in group order);
 *   - the K chain: the stream-K split cuts each 16-row tile's spans into pieces (the warps' ranges over
 *     the tile-major units: cu_sk_warps, a function of the weight's shape and the GPU, never of R). Each
 *     piece is accumulated here from zero over its spans in order, and the pieces are added left to
 *     right in range order, as sk_flush adds the warps' partials (one piece: written as is).
 * test_backend_cuda checks it bit for bit against 16-row calls for R = 1..80 on odd shapes; wgmma (its
 * accumulation order not known to match mma.sync's) would give up that identity.
 *
 * Shared memory tiles are XOR-swizzled per 16-byte chunk so that the fragment loads (a quarter-warp
 * reads 2 rows × 64 bytes for bf16, a warp 8 rows × 16 bytes for q) hit distinct banks. */
#include "cuda_internal.cuh"

extern "C" {
#include "../../base/dtype.h"
}

#define GM_WARPS 8   /* 4 along the weight rows × 2 along the activation rows */
#define GM_BN 64     /* activation rows per block */

/* ------------------------------------------------------------------ helpers */

/* 8 bytes global → shared, asynchronously; zero-filled when !ok. */
__device__ __forceinline__ void gm_cp8(void *dst, const void *src, bool ok) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 8 : 0));
}


__device__ __forceinline__ float gm_half(uint32_t h, int f16) {
    return f16 ? __half2float(__ushort_as_half((unsigned short)h)) : __uint_as_float(h << 16);
}

/* The pieces of one 16-row tile: the stream-K warps' ranges over TU = T·P units cut it at the start of
 * each warp after its first; nb is the next cut as a span of the tile (P: none left). */
struct gm_piece {
    int nb;  /* span index of the next cut */
    int nw;  /* the warp whose range starts there */
};

/* The first cut of tile `tile` (P spans) under Wn warps over TU units. */
__device__ __forceinline__ gm_piece gm_piece_first(int tile, int P, long long TU, int Wn) {
    long long f = (long long)tile * P;
    int wf = (int)(((f + 1) * Wn + TU - 1) / TU - 1); /* cuda_mma_sk.cu's sk_owner */
    gm_piece p;
    p.nw = wf + 1;
    long long s = p.nw < Wn ? (long long)p.nw * TU / Wn : TU;
    p.nb = s - f < P ? (int)(s - f) : P;
    return p;
}

/* The cut after p. */
__device__ __forceinline__ void gm_piece_next(gm_piece &p, int tile, int P, long long TU, int Wn) {
    long long f = (long long)tile * P;
    p.nw++;
    long long s = p.nw < Wn ? (long long)p.nw * TU / Wn : TU;
    p.nb = s - f < P ? (int)(s - f) : P;
}

/* tot = the pieces so far added left to right (has: any yet), then c (the piece just ended). */
__device__ __forceinline__ void gm_fold(float *tot, const float *c, bool has) {
#pragma unroll
    for (int e = 0; e < 4; e++) tot[e] = has ? __fadd_rn(tot[e], c[e]) : c[e];
}

/* Writes this thread's fragment values of an MT × 4 warp tile: rows m0w + 16·mi + g (+8), columns
 * c0w + 8·ni + 2t (+1); v = tot (+ last piece) as sk_flush produces it. */
template <int MT>
__device__ __forceinline__ void gm_store(float *y, int ldy, int N, int R, int m0w, int c0w, float (*tot)[4][4],
                                         float (*acc)[4][4], const bool *has) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row = m0w + 16 * mi + g + 8 * (e >> 1), col = c0w + 8 * ni + 2 * t + (e & 1);
                float v = has[mi] ? __fadd_rn(tot[mi][ni][e], acc[mi][ni][e]) : acc[mi][ni][e];
                if (row < N && col < R) y[(size_t)col * ldy + row] = v;
            }
}

/* ------------------------------------------------------------------ bf16 */

/* y[j][n] = Σ_k (xh + xl)[j][k] · W[n][k] for j < R, n < N; K % 32 == 0. A stage is KS spans (32·KS
 * inputs: 64·KS bytes of each weight and activation row, so each row is requested in runs of that
 * length), ST stages in flight; chunk c of shared row r is stored at c ^ 4·(r & 1). */
/* Blocks a multiprocessor's 227 KB of shared memory holds of the bf16 kernel (its register bound). */
template <int MT, int KS, int ST>
struct gm_bf16_fit {
    static constexpr int v = ST * (64 * MT + 2 * GM_BN) * KS * 64 <= 113 * 1024 ? 2 : 1;
};

template <int MT, int KS, int ST>
__global__ void __launch_bounds__(GM_WARPS * 32, (gm_bf16_fit<MT, KS, ST>::v)) k_gemm_bf16(float *y, int ldy, const uint16_t *W, int N, int K,
                                                               const uint16_t *xh, const uint16_t *xl, int R,
                                                               long long TU, int Wn) {
    CU_PDL_ENTRY();
    extern __shared__ uint4 gm_smem[];
    constexpr int BM = 64 * MT, RC = KS * 4; /* weight rows per block, 16-byte chunks per shared row */
    constexpr int WCH = BM * RC, XCH = GM_BN * RC, SCH = WCH + 2 * XCH;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = warp & 3, wn = warp >> 2;
    const int m0 = blockIdx.x * BM, r0 = blockIdx.y * GM_BN;
    const int P = K / 32, KT = (P + KS - 1) / KS;

    auto load = [&](int kt, int slot) {
        uint4 *s = gm_smem + (size_t)slot * SCH;
        const int k0 = kt * 32 * KS;
#pragma unroll
        for (int i = 0; i < SCH / (GM_WARPS * 32); i++) {
            int c = tid + i * GM_WARPS * 32;
            int row, ch;
            const uint16_t *src;
            bool ok;
            uint4 *dst;
            if (c < WCH) {
                row = c / RC, ch = c % RC;
                ok = m0 + row < N && k0 + ch * 8 < K;
                src = ok ? W + (size_t)(m0 + row) * K + k0 + ch * 8 : W;
                dst = s + row * RC + (ch ^ ((row & 1) << 2));
            } else {
                int cc = c - WCH, lo = cc >= XCH;
                cc -= lo * XCH;
                row = cc / RC, ch = cc % RC;
                ok = r0 + row < R && k0 + ch * 8 < K;
                const uint16_t *x = lo ? xl : xh;
                src = ok ? x + (size_t)(r0 + row) * K + k0 + ch * 8 : x;
                dst = s + WCH + lo * XCH + row * RC + (ch ^ ((row & 1) << 2));
            }
            cu_cp16(dst, src, ok);
        }
    };

    float acc[MT][4][4], tot[MT][4][4];
    bool has[MT];
    gm_piece pc[MT];
#pragma unroll
    for (int mi = 0; mi < MT; mi++) {
        has[mi] = false;
        pc[mi] = gm_piece_first(blockIdx.x * (BM / 16) + wm * MT + mi, P, TU, Wn);
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = tot[mi][ni][e] = 0.f;
    }

#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < KT) load(s, s);
        cu_cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cu_cp_wait<ST - 2>();
        __syncthreads();
        if (kt + ST - 1 < KT) load(kt + ST - 1, (kt + ST - 1) % ST);
        cu_cp_commit();
        const uint4 *s = gm_smem + (size_t)(kt % ST) * SCH;
        const uint4 *sh = s + WCH, *sl = sh + XCH;
#pragma unroll
        for (int j = 0; j < KS; j++) {
            const int sp = kt * KS + j;
            if (sp >= P) break;
            uint4 A0[MT], A1[MT];
#pragma unroll
            for (int mi = 0; mi < MT; mi++) {
                int row = wm * 16 * MT + mi * 16 + g, ch = (j * 4 + t) ^ ((row & 1) << 2);
                A0[mi] = s[row * RC + ch];
                A1[mi] = s[(row + 8) * RC + ch];
            }
#pragma unroll
            for (int mi = 0; mi < MT; mi++)
                if (sp == pc[mi].nb) { /* a stream-K piece ends: fold it, the next starts from zero */
#pragma unroll
                    for (int ni = 0; ni < 4; ni++) {
                        gm_fold(tot[mi][ni], acc[mi][ni], has[mi]);
                        acc[mi][ni][0] = acc[mi][ni][1] = acc[mi][ni][2] = acc[mi][ni][3] = 0.f;
                    }
                    has[mi] = true;
                    gm_piece_next(pc[mi], blockIdx.x * (BM / 16) + wm * MT + mi, P, TU, Wn);
                }
#pragma unroll
            for (int ni = 0; ni < 4; ni++) {
                int col = wn * 32 + ni * 8 + g, ch = (j * 4 + t) ^ ((col & 1) << 2);
                const uint4 BH = sh[col * RC + ch], BL = sl[col * RC + ch];
#pragma unroll
                for (int mi = 0; mi < MT; mi++) {
                    float *c = acc[mi][ni];
                    cu_mma_bf16(c, A0[mi].x, A1[mi].x, A0[mi].y, A1[mi].y, BH.x, BH.y);
                    cu_mma_bf16(c, A0[mi].z, A1[mi].z, A0[mi].w, A1[mi].w, BH.z, BH.w);
                    cu_mma_bf16(c, A0[mi].x, A1[mi].x, A0[mi].y, A1[mi].y, BL.x, BL.y);
                    cu_mma_bf16(c, A0[mi].z, A1[mi].z, A0[mi].w, A1[mi].w, BL.z, BL.w);
                }
            }
        }
    }
    cu_cp_wait<0>();
    gm_store<MT>(y, ldy, N, R, m0 + wm * 16 * MT, r0 + wn * 32, tot, acc, has);
}

/* ------------------------------------------------------------------ q4 / q8 */

/* y[j][n] = Σ_g (Σ_{k∈g} q[n][k]·a[j][k]) · (s[n][g]·d[j][g]) + Σ_g b[n][g]·bd[j][g], K % 128 == 0,
 * 16-bit scales from cu_wdev.sbt. A stage is SPS 128-input spans: weight rows of 16·BITS·SPS bytes,
 * activation rows of 128·SPS bytes (k_qact's layout), the stage's scale pairs of the block's tiles
 * and the activation columns' (d, d·Σa); ST stages in flight. Swizzles: q4 rows of 64 bytes c ^ ((r >> 1)
 * & 3), longer c ^ (r & 7) (4-byte reads, 8 rows a wavefront); q8 and activation rows c ^ 2·(r & 3)
 * (8-byte reads, 4 rows a wavefront). Integer sums per 32 inputs (one m16n8k32): q4 thread t takes
 * word t of the 16 bytes (low nibbles: even inputs, paired with activation bytes 8t..8t+3, which k_qact
 * stores even inputs first; high nibbles: odd, bytes 8t+4..8t+7); q8 thread t takes bytes 8t..8t+7. */
template <int BITS, int GS, int MT, int SPS, int ST>
__global__ void __launch_bounds__(GM_WARPS * 32, MT == 1 ? 2 : 1)
    k_gemm_q(float *y, int ldy, const uint8_t *W, const uint2 *sbt, int f16, int N, int K, const uint8_t *xa,
             const float2 *xdb, int R, long long TU, int Wn) {
    CU_PDL_ENTRY();
    extern __shared__ uint4 gm_smem[];
    constexpr int S = 128 / GS, CPG = GS / 32, SG = S * SPS; /* groups per span, 32-input chunks per group,
                                                                 groups per stage */
    constexpr int BM = 64 * MT, TB = BM / 16;                 /* weight rows and tiles per block */
    constexpr int WRC = BITS * SPS, XRC = 8 * SPS;            /* 16-byte chunks per weight / activation row */
    constexpr int WCH = BM * WRC, XCH = GM_BN * XRC, SBC = TB * 4 * SG, DB = GM_BN * SG / 2;
    constexpr int SCH = WCH + XCH + SBC + DB;                 /* 16-byte chunks of a stage */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = warp & 3, wn = warp >> 2;
    const int m0 = blockIdx.x * BM, r0 = blockIdx.y * GM_BN, tile0 = blockIdx.x * TB;
    const int P = K / 128, G = K / GS, T = (N + 15) / 16, KT = (P + SPS - 1) / SPS;
    const size_t wrow = (size_t)K * BITS / 8; /* bytes per weight row */

    auto wsw = [](int row, int ch) { /* the weight swizzle */
        return BITS == 4 ? (WRC == 4 ? ch ^ ((row >> 1) & 3) : ch ^ (row & 7)) : ch ^ ((row & 3) << 1);
    };
    auto load = [&](int kt, int slot) {
        uint4 *s = gm_smem + (size_t)slot * SCH;
        const int sp0 = kt * SPS, nsp = P - sp0 < SPS ? P - sp0 : SPS; /* spans of this stage */
        for (int c = tid; c < WCH; c += GM_WARPS * 32) {
            int row = c / WRC, ch = c % WRC;
            bool ok = m0 + row < N && ch < nsp * BITS;
            cu_cp16(s + row * WRC + wsw(row, ch),
                    ok ? W + (size_t)(m0 + row) * wrow + (size_t)sp0 * 16 * BITS + ch * 16 : W, ok);
        }
        uint4 *sx = s + WCH;
        for (int c = tid; c < XCH; c += GM_WARPS * 32) {
            int row = c / XRC, ch = c % XRC;
            bool ok = r0 + row < R && ch < nsp * 8;
            cu_cp16(sx + row * XRC + (ch ^ ((row & 3) << 1)),
                    ok ? xa + (size_t)(r0 + row) * K + (size_t)sp0 * 128 + ch * 16 : xa, ok);
        }
        uint4 *ss = sx + XCH; /* [TB][SG][8] uint2 */
        for (int c = tid; c < SBC; c += GM_WARPS * 32) {
            int tl = c / (4 * SG), ch = c % (4 * SG);
            bool ok = tile0 + tl < T && ch < 4 * S * nsp;
            cu_cp16(ss + c,
                    ok ? (const void *)((const uint4 *)(sbt + ((size_t)(tile0 + tl) * G + (size_t)sp0 * S) * 8) + ch)
                       : (const void *)sbt,
                    ok);
        }
        float2 *sd = (float2 *)(ss + SBC); /* [GM_BN][SG] */
        for (int c = tid; c < GM_BN * SG; c += GM_WARPS * 32) {
            int col = c / SG, gi = c % SG;
            bool ok = r0 + col < R && gi < S * nsp;
            gm_cp8(sd + c, ok ? xdb + (size_t)(r0 + col) * G + (size_t)sp0 * S + gi : xdb, ok);
        }
    };

    float acc[MT][4][4], bacc[MT][4][4], tot[MT][4][4];
    bool has[MT];
    gm_piece pc[MT];
#pragma unroll
    for (int mi = 0; mi < MT; mi++) {
        has[mi] = false;
        pc[mi] = gm_piece_first(tile0 + wm * MT + mi, P, TU, Wn);
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = bacc[mi][ni][e] = tot[mi][ni][e] = 0.f;
    }

#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < KT) load(s, s);
        cu_cp_commit();
    }
    for (int kt = 0; kt < KT; kt++) {
        cu_cp_wait<ST - 2>();
        __syncthreads();
        if (kt + ST - 1 < KT) load(kt + ST - 1, (kt + ST - 1) % ST);
        cu_cp_commit();
        const uint4 *s = gm_smem + (size_t)(kt % ST) * SCH;
        const uint8_t *sw = (const uint8_t *)s, *sx = (const uint8_t *)(s + WCH);
        const uint2 *ss = (const uint2 *)(s + WCH + XCH);
        const float2 *sd = (const float2 *)(s + WCH + XCH + SBC);
#pragma unroll
        for (int j = 0; j < SPS; j++) {
            const int sp = kt * SPS + j;
            if (sp >= P) break;
#pragma unroll
            for (int mi = 0; mi < MT; mi++)
                if (sp == pc[mi].nb) { /* a stream-K piece ends: fold acc + bacc, the next starts from zero */
#pragma unroll
                    for (int ni = 0; ni < 4; ni++) {
                        float c[4];
#pragma unroll
                        for (int e = 0; e < 4; e++) c[e] = __fadd_rn(acc[mi][ni][e], bacc[mi][ni][e]);
                        gm_fold(tot[mi][ni], c, has[mi]);
#pragma unroll
                        for (int e = 0; e < 4; e++) acc[mi][ni][e] = bacc[mi][ni][e] = 0.f;
                    }
                    has[mi] = true;
                    gm_piece_next(pc[mi], tile0 + wm * MT + mi, P, TU, Wn);
                }
#pragma unroll
            for (int gs = 0; gs < S; gs++) {
                int ic[MT][4][4];
#pragma unroll
                for (int mi = 0; mi < MT; mi++)
#pragma unroll
                    for (int ni = 0; ni < 4; ni++) ic[mi][ni][0] = ic[mi][ni][1] = ic[mi][ni][2] = ic[mi][ni][3] = 0;
#pragma unroll
                for (int q = 0; q < CPG; q++) {
                    const int cc = j * 4 + gs * CPG + q; /* 32-input chunk of the stage */
                    uint2 B[4];
#pragma unroll
                    for (int ni = 0; ni < 4; ni++) {
                        int col = wn * 32 + ni * 8 + g, ch = (2 * cc + (t >> 1)) ^ ((col & 3) << 1);
                        B[ni] = *(const uint2 *)(sx + col * XRC * 16 + ch * 16 + (t & 1) * 8);
                    }
#pragma unroll
                    for (int mi = 0; mi < MT; mi++) {
                        int ra = wm * 16 * MT + mi * 16 + g, rb = ra + 8;
                        uint32_t a0, a1, a2, a3;
                        if (BITS == 4) {
                            uint32_t wa = *(const uint32_t *)(sw + ra * WRC * 16 + wsw(ra, cc) * 16 + t * 4);
                            uint32_t wb = *(const uint32_t *)(sw + rb * WRC * 16 + wsw(rb, cc) * 16 + t * 4);
                            a0 = wa & 0x0F0F0F0Fu, a1 = wb & 0x0F0F0F0Fu;
                            a2 = (wa >> 4) & 0x0F0F0F0Fu, a3 = (wb >> 4) & 0x0F0F0F0Fu;
                        } else {
                            uint2 wa = *(const uint2 *)(sw + ra * WRC * 16 + wsw(ra, 2 * cc + (t >> 1)) * 16 + (t & 1) * 8);
                            uint2 wb = *(const uint2 *)(sw + rb * WRC * 16 + wsw(rb, 2 * cc + (t >> 1)) * 16 + (t & 1) * 8);
                            a0 = wa.x, a1 = wb.x, a2 = wa.y, a3 = wb.y;
                        }
#pragma unroll
                        for (int ni = 0; ni < 4; ni++) cu_mma_u8s8(ic[mi][ni], a0, a1, a2, a3, B[ni].x, B[ni].y);
                    }
                }
                float2 D0[4], D1[4];
#pragma unroll
                for (int ni = 0; ni < 4; ni++) {
                    int c0 = wn * 32 + ni * 8 + 2 * t;
                    D0[ni] = sd[c0 * SG + j * S + gs], D1[ni] = sd[(c0 + 1) * SG + j * S + gs];
                }
#pragma unroll
                for (int mi = 0; mi < MT; mi++) {
                    const uint2 q = ss[((wm * MT + mi) * SG + j * S + gs) * 8 + g]; /* rows g, g+8: scale | bias << 16 */
                    const float sa = gm_half(q.x & 0xffffu, f16), ba = gm_half(q.x >> 16, f16);
                    const float sbb = gm_half(q.y & 0xffffu, f16), bb = gm_half(q.y >> 16, f16);
#pragma unroll
                    for (int ni = 0; ni < 4; ni++) {
                        float *a = acc[mi][ni], *b = bacc[mi][ni];
                        const int *c = ic[mi][ni];
                        a[0] = fmaf((float)c[0], __fmul_rn(sa, D0[ni].x), a[0]);
                        a[1] = fmaf((float)c[1], __fmul_rn(sa, D1[ni].x), a[1]);
                        a[2] = fmaf((float)c[2], __fmul_rn(sbb, D0[ni].x), a[2]);
                        a[3] = fmaf((float)c[3], __fmul_rn(sbb, D1[ni].x), a[3]);
                        b[0] = fmaf(ba, D0[ni].y, b[0]);
                        b[1] = fmaf(ba, D1[ni].y, b[1]);
                        b[2] = fmaf(bb, D0[ni].y, b[2]);
                        b[3] = fmaf(bb, D1[ni].y, b[3]);
                    }
                }
            }
        }
    }
    cu_cp_wait<0>();
#pragma unroll
    for (int mi = 0; mi < MT; mi++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = __fadd_rn(acc[mi][ni][e], bacc[mi][ni][e]);
    gm_store<MT>(y, ldy, N, R, m0 + wm * 16 * MT, r0 + wn * 32, tot, acc, has);
}

/* ------------------------------------------------------------------ dispatch */

/* MT for a weight of N rows at R activation rows: 128-row blocks from two blocks per multiprocessor,
 * else 64; $MTPLX_CUDA_GEMM_MT=1|2 forces it. A speed choice only: every MT (and every KS / ST below)
 * gives the same bits. (Measured on 17408 x 5120 at 64 rows: 0.245 ms a weight with 64-row blocks,
 * 0.27 with 128; bench/cuda.md, "Session 7".) */
static int gm_mt(int N, int R) {
    if (cu_set.gemm_mt == 1 || cu_set.gemm_mt == 2) return cu_set.gemm_mt;
    long long blocks = (long long)((N + 127) / 128) * ((R + GM_BN - 1) / GM_BN);
    return blocks >= 2LL * cu_sm_count() ? 2 : 1;
}

/* From 48 rows: below it the stream-K kernel, two or three passes over the weights, was as fast or
 * faster on the 27B shapes (bench/cuda.md, "Session 7"). A bf16 weight small enough that its 32-row
 * stream-K launches run their row groups side by side (cu_sk_bf16_small) stays there up to 127 rows: on
 * qwen35-small-code's shapes those passes beat the GEMM's few tiles at 48 and 64 rows (26-28k vs 18-22k
 * prefill tok/s) and lose from 128 (bench/cuda.md, "Session 18"). $MTPLX_CUDA_GEMM_MIN=N moves it for every
 * weight. A speed choice only: same bits either way. */
int cu_gemm_takes(const be_weight *w, int R) {
    int min = cu_set.gemm_min > 0 ? cu_set.gemm_min : cu_sk_bf16_small(w) ? 128 : 48;
    return cu_set.gemm && R >= min && w->rows > 0;
}

/* Launches kernel k with `smem` dynamic bytes (raising the kernel's limit once). */
template <class Kf, typename... Args>
static void gm_launch(Kf k, int *raised, dim3 grid, size_t smem, Args... args) {
    if (!*raised) {
        CU_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "gemm smem");
        *raised = 1;
    }
    cu_launch(k, grid, GM_WARPS * 32, smem, args...);
}

template <int MT, int KS, int ST>
static void gm_bf16_cfg(float *y, int ldy, const uint16_t *W, int N, int K, const uint16_t *xh, const uint16_t *xl,
                        int R, long long TU, int Wn) {
    static int raised = 0;
    constexpr int BM = 64 * MT;
    size_t smem = (size_t)ST * (BM + 2 * GM_BN) * KS * 4 * 16;
    dim3 grid((N + BM - 1) / BM, (R + GM_BN - 1) / GM_BN);
    gm_launch(k_gemm_bf16<MT, KS, ST>, &raised, grid, smem, y, ldy, W, N, K, xh, xl, R, TU, Wn);
}

template <int MT>
static void gm_bf16_mt(float *y, int ldy, const uint16_t *W, int N, int K, const uint16_t *xh, const uint16_t *xl,
                       int R, long long TU, int Wn) {
    /* spans per stage and stages: 2 and 3, or $MTPLX_CUDA_GEMM_KS=4|8, $MTPLX_CUDA_GEMM_ST=2|3|4 (sweep
     * knobs, within 10% of each other on 17408 x 5120; 8 spans only with 64-row blocks and 2 stages:
     * 192 KB of shared memory) */
    int ks = cu_set.gemm_ks == 4 || cu_set.gemm_ks == 8 ? cu_set.gemm_ks : 2;
    int st = cu_set.gemm_st ? cu_set.gemm_st : (ks == 2 ? 3 : 2);
    if (ks == 2 && st >= 4) gm_bf16_cfg<MT, 2, 4>(y, ldy, W, N, K, xh, xl, R, TU, Wn);
    else if (ks == 2) gm_bf16_cfg<MT, 2, 3>(y, ldy, W, N, K, xh, xl, R, TU, Wn);
    else if (ks == 4 && st >= 3) gm_bf16_cfg<MT, 4, 3>(y, ldy, W, N, K, xh, xl, R, TU, Wn);
    else if (ks == 4) gm_bf16_cfg<MT, 4, 2>(y, ldy, W, N, K, xh, xl, R, TU, Wn);
    else gm_bf16_cfg<1, 8, 2>(y, ldy, W, N, K, xh, xl, R, TU, Wn);
}

void cu_gemm_bf16(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const uint16_t *xh, const uint16_t *xl,
                  int R) {
    int N = w->rows, K = w->cols;
    long long TU = (long long)((N + 15) / 16) * (K / 32);
    int Wn = (int)cu_sk_warps(w);
    if (gm_mt(N, R) == 2) gm_bf16_mt<2>(y, ldy, (const uint16_t *)dv->data, N, K, xh, xl, R, TU, Wn);
    else gm_bf16_mt<1>(y, ldy, (const uint16_t *)dv->data, N, K, xh, xl, R, TU, Wn);
    CU_LAUNCHED("matmul gemm bf16");
}

template <int BITS, int GS, int MT, int SPS, int ST>
static void gm_q_cfg(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const void *xa, const float *xdb, int R,
                     long long TU, int Wn) {
    static int raised = 0;
    constexpr int SG = 128 / GS * SPS, BM = 64 * MT;
    constexpr int SCH = BM * BITS * SPS + GM_BN * 8 * SPS + (BM / 16) * 4 * SG + GM_BN * SG / 2;
    size_t smem = (size_t)ST * SCH * 16;
    int N = w->rows, K = w->cols;
    dim3 grid((N + BM - 1) / BM, (R + GM_BN - 1) / GM_BN);
    gm_launch(k_gemm_q<BITS, GS, MT, SPS, ST>, &raised, grid, smem, y, ldy, (const uint8_t *)dv->data,
              (const uint2 *)dv->sbt, w->scale_dtype == DT_F16 ? 1 : 0, N, K, (const uint8_t *)xa, (const float2 *)xdb,
              R, TU, Wn);
}

/* spans per stage: 2 with 3 stages (10% faster than 1 span on 17408 x 5120 q4 at 64-128 rows), or
 * $MTPLX_CUDA_GEMM_KS=1 (4 stages) / 4 (2 stages, 64-row blocks); a sweep knob */
template <int BITS, int GS>
static void gm_q_gs(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const void *xa, const float *xdb, int R,
                    long long TU, int Wn) {
    int ks = cu_set.gemm_ks;
    if (ks == 4) gm_q_cfg<BITS, GS, 1, 4, 2>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
    else if (gm_mt(w->rows, R) == 2) {
        if (ks == 1) gm_q_cfg<BITS, GS, 2, 1, 4>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
        else gm_q_cfg<BITS, GS, 2, 2, 3>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
    } else {
        if (ks == 1) gm_q_cfg<BITS, GS, 1, 1, 4>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
        else gm_q_cfg<BITS, GS, 1, 2, 3>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
    }
}

void cu_gemm_q(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const void *xa, const float *xdb, int R) {
    int N = w->rows, K = w->cols, gs = w->group_size;
    long long TU = (long long)((N + 15) / 16) * (K / 128);
    int Wn = (int)cu_sk_warps(w);
    if (w->bits == 4) {
        if (gs == 32) gm_q_gs<4, 32>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
        else if (gs == 64) gm_q_gs<4, 64>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
        else gm_q_gs<4, 128>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
    } else {
        if (gs == 32) gm_q_gs<8, 32>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
        else if (gs == 64) gm_q_gs<8, 64>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
        else gm_q_gs<8, 128>(y, ldy, dv, w, xa, xdb, R, TU, Wn);
    }
    CU_LAUNCHED("matmul gemm q");
}
