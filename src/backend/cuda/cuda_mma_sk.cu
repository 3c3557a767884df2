/* cuda_mma_sk.cu — the decode / verify matmul (R = 1..32 rows per launch for bf16, 1..16 for q) on
 * tensor cores with a stream-K work split, for MLX affine q4 / q8 weights (K % 128 == 0, 16-bit
 * scales) and bf16 weights (K % 32 == 0). Activations are prepared by cuda_mma.cu (int8 per group with d and d·Σa, or the bf16
 * hi / lo split); the numerics are those of cuda_mma.cu's kernels (its header comment), only the work
 * split and the memory access pattern differ (bench/cuda.md has the measurements).
 *
 * Work split: the weight is cut into 16-row tiles and each tile's K into spans (q: 128 inputs, bf16:
 * 32 inputs); the T·P (tile, span) units, tile-major, are cut into blocks · SK_WARPS equal
 * contiguous ranges, one per warp (the last warps idle when there are fewer units than warps: no
 * range is empty between two others, so a tile's warps are exactly first..last). A warp walks its
 * range U spans at a time (their loads issued together), keeping a 16 × (8·NT) mma accumulator per
 * tile it touches. A tile covered by one warp is written directly; otherwise each of its warps stores
 * its partial (slot tile + warp: unique, since both grow along the ranges) and the last to finish (a
 * counter per tile) adds the partials in warp order. So every warp reads the same number of bytes
 * (± one span), with no tail of half-empty waves, and a weight's blocks are the number the GPU holds
 * at once. Several weights over the same activations (matmul_n) go out as one launch whose grid is
 * their solo grids one after another (sk_job below).
 *
 * Batch invariance (DESIGN.md §3): the ranges depend on the weight's shape and the grid, and the grid
 * on the GPU (multiprocessors × resident blocks of the kernel, the same for every R), never on R; a
 * row of x is one mma column, computed from its own column only.
 *
 * q4 / q8 span layout: thread (g, t) of a warp loads 16 (q4) or 32 (q8) contiguous bytes of weight
 * rows n0+g and n0+g+8 at the t-th quarter of the span, and the matching 32 activation bytes (the
 * activation layout of cuda_mma.cu's k_qact makes mma j take bytes [8j, 8j+8) of them). A quarter
 * lies in one group (groups of 32 / 64 / 128 hold 1 / 2 / 4 quarters), so a span is S = 128 / GS
 * groups and each group's integer sums come from the span's 4 mmas with the activations of the other
 * groups' quarters masked to zero: S · 4 mmas per span, each exact ("masked quarters"). The other
 * layout ("group pieces", GA) gives thread t the t-th quarter of every group of the span instead
 * (S pieces of 16 / S or 32 / S bytes a row, and of 32 / S activation bytes), so mma j lies in group
 * j·S / 4 and a span takes 4 mmas, unmasked. Both give each group the same integer sum and then the
 * same float steps, so the same bits; sk_q_ga picks the faster one per launch. Scales and biases come
 * from the tile-interleaved copy made at upload (cu_wdev.sbt: per tile and group, rows i and i+8 side
 * by side), one 8-byte load per group for both of a thread's rows. */
#include "cuda_internal.cuh"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../../base/dtype.h"
}

#define SK_WARPS 4    /* warps per block */
#define SK_Q_BLOCKS 4 /* resident blocks per multiprocessor the q kernels are compiled for (<= 128 registers),
                       * so that the 9..16-row instance fits the grid sized for the 1..8-row one. No 17..32-row
                       * q instance: at 2 blocks / SM (its 32 accumulators spill at 4) it was 12-17% slower than
                       * two 16-row passes on the 27B shape in q4 (bench/cuda.md, session 9) */
#define SK_SLOT (16 * SK_ROWS) /* floats of one partial: 16 weight rows x up to SK_ROWS activation rows */
#define SK_RG (SK_ROWS / 8)     /* block rows (row groups of 8 activation rows) a bf16 launch may have */

/* Per-thread device scratch (see cuda_mma.cu's mma_scratch for why per thread): partials and tile
 * counters (zero between calls: the last warp of a tile resets its counter). */
typedef struct {
    float *ws;     /* [tiles + warps][SK_SLOT] partials: column (activation row) major */
    size_t ws_cap; /* floats */
    unsigned *cnt; /* [tiles] */
    size_t cnt_cap;
} sk_scratch;

static thread_local sk_scratch tls_sk;

/* One weight of a launch: y = x · Wᵀ with the stream-K split of `blocks` blocks that a launch of this
 * weight alone makes (sk_grid: a function of its shape and the GPU). A launch runs up to SK_JOBS_MAX
 * weights that read the same prepared activations (one matmul_n over weights of one kind): its grid is
 * the jobs' blocks one after another, and block b works as block b − (blocks of the jobs before) of its
 * job's own split, so every output's bits are those of the weight's solo launch. The later jobs' blocks
 * start as the earlier ones' retire: no drain and relaunch between the weights. */
typedef struct {
    float *y;
    int ldy, N, f16, blocks; /* f16: q scales and biases are f16 (else bf16) */
    const void *W;           /* bf16 values [N][K], or packed q words */
    const uint2 *sbt;        /* q: cu_wdev.sbt */
    float *ws;               /* this job's partials, [T + blocks·SK_WARPS][SK_SLOT] */
    unsigned *cnt;           /* this job's tile counters, [T] */
} sk_job;

#define SK_JOBS_MAX 4

typedef struct {
    sk_job j[SK_JOBS_MAX];
    int n;
} sk_jobs;

/* The job that block `bid` of a launch belongs to; bid becomes the block's index inside that job. */
__device__ __forceinline__ sk_job sk_job_of(const sk_jobs &js, int &bid) {
    sk_job jb = js.j[0];
#pragma unroll
    for (int i = 1; i < SK_JOBS_MAX; i++)
        if (i < js.n && bid >= jb.blocks) bid -= jb.blocks, jb = js.j[i];
    return jb;
}

/* Makes *p hold at least `bytes` zeroed device bytes (contents lost when it grows). */
static void sk_grow(void **p, size_t *cap, size_t bytes) {
    if (bytes <= *cap) return;
    size_t nc = bytes < ((size_t)1 << 20) ? ((size_t)1 << 20) : bytes + bytes / 2;
    cu_graph_break();
    CU_CHECK(cudaFree(*p), "matmul scratch"); /* synchronizes: no kernel still uses it */
    *p = NULL;
    CU_CHECK(cudaMalloc(p, nc), "matmul scratch");
    /* graph-safe: after cu_graph_break above */
    CU_CHECK(cudaMemsetAsync(*p, 0, nc, CU_STREAM), "matmul scratch");
    *cap = nc;
}

/* The warp whose range holds unit u: the largest w with floor(w·TU / Wn) <= u. */
__device__ __forceinline__ int sk_owner(long long u, int Wn, long long TU) {
    return (int)(((u + 1) * Wn + TU - 1) / TU - 1);
}

/* After warp w (of wf..wl, the warps holding parts of tile `tile`) stored its partial of columns
 * [c0, c1) (activation rows): the tile's last warp to get here adds the partials in warp order into y
 * and resets the tile's counter. */
__device__ __forceinline__ void sk_flush_last(float *y, int ldy, int N, int c0, int c1, int tile, int wf, int wl,
                                              float *ws, unsigned *cnt) {
    const int lane = threadIdx.x & 31, n0 = tile * 16;
    __threadfence();
    __syncwarp();
    unsigned last = 0;
    if (lane == 0) last = atomicAdd(&cnt[tile], 1u) == (unsigned)(wl - wf);
    last = __shfl_sync(0xffffffffu, last, 0);
    if (!last) return;
    __threadfence();
    for (int e = 16 * c0 + lane; e < 16 * c1; e += 32) {
        int i = e & 15, col = e >> 4;
        if (n0 + i >= N) continue;
        float v = __ldcg(ws + (size_t)(tile + wf) * SK_SLOT + e);
        for (int ww = wf + 1; ww <= wl; ww++) v += __ldcg(ws + (size_t)(tile + ww) * SK_SLOT + e);
        y[(size_t)col * ldy + n0 + i] = v;
    }
    if (lane == 0) cnt[tile] = 0;
}

/* Ends warp w's part of tile `tile` (P units): c holds this thread's fragment (rows g / g+8, columns
 * r0 + 2t / 2t+1 of each N tile). Writes y directly when the warp covers the whole tile, else stores the
 * partial, and the tile's last warp (of those with the same r0: cnt is their counters) adds the partials
 * in warp order into y. */
template <int NT>
__device__ __forceinline__ void sk_flush(float (*c)[4], float *y, int ldy, int N, int R, int tile, int w, int Wn,
                                         long long TU, int P, float *ws, unsigned *cnt, int r0 = 0) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, n0 = tile * 16;
    long long f = (long long)tile * P;
    int wf = sk_owner(f, Wn, TU), wl = sk_owner(f + P - 1, Wn, TU);
    if (wf == wl) {
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int row = n0 + g + 8 * (e >> 1), col = r0 + nt * 8 + 2 * t + (e & 1);
                if (col < R && row < N) y[(size_t)col * ldy + row] = c[nt][e];
            }
        return;
    }
    float *p = ws + (size_t)(tile + w) * SK_SLOT;
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int i = g + 8 * (e >> 1), col = r0 + nt * 8 + 2 * t + (e & 1);
            if (col < R) p[col * 16 + i] = c[nt][e];
        }
    sk_flush_last(y, ldy, N, r0, min(R, r0 + 8 * NT), tile, wf, wl, ws, cnt);
}

/* A 16-bit scale or bias as a float: F16 = 1 f16, else bf16 (a template argument, so the conversion is one
 * instruction instead of both and a select). */
template <int F16>
__device__ __forceinline__ float sk_half(uint32_t h) {
    return F16 ? __half2float(__ushort_as_half((unsigned short)h)) : __uint_as_float(h << 16);
}

/* ------------------------------------------------------------------ q4 / q8 */

/* NW 32-bit words from p (aligned to their size) into d, or zeros when !ok (a select, not a branch, so
 * that a batch's loads issue together): streamed (weights, read once) or through the read-only cache
 * (activations, read by every warp). */
template <int NW, bool STREAM>
__device__ __forceinline__ void sk_words(uint32_t *d, const uint32_t *p, bool ok) {
    if constexpr (NW == 1) {
        d[0] = ok ? (STREAM ? __ldcs(p) : __ldg(p)) : 0u;
    } else if constexpr (NW == 2) {
        const uint2 z = make_uint2(0, 0);
        const uint2 v = ok ? (STREAM ? __ldcs((const uint2 *)p) : __ldg((const uint2 *)p)) : z;
        d[0] = v.x, d[1] = v.y;
    } else {
        const uint4 z = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < NW / 4; i++) {
            const uint4 v = ok ? (STREAM ? __ldcs((const uint4 *)p + i) : __ldg((const uint4 *)p + i)) : z;
            d[4 * i] = v.x, d[4 * i + 1] = v.y, d[4 * i + 2] = v.z, d[4 * i + 3] = v.w;
        }
    }
}

/* y[j][n] = Σ_g (Σ_{k∈g} q[n][k]·a[j][k]) · (s[n][g]·d[j][g]) + Σ_g b[n][g]·bd[j][g] for j < R (<= 8·NT).
 * xa: int8 activations [R][K] (k_qact's layout), xdb: [R][G] (d, d·Σa). F16: every job's scales and
 * biases are f16 (else bf16). GA: the span layout where a thread takes a piece of every group (the
 * header's), else a quarter of the span each with the other groups masked; the same integer sums per
 * group, so the same bits. */
template <int BITS, int GS, int NT, int U, int F16, int GA>
__global__ void __launch_bounds__(SK_WARPS * 32, SK_Q_BLOCKS)
    k_sk_q(sk_jobs jobs, int K, const uint4 *xa, const float2 *xdb, int R) {
    CU_PDL_ENTRY();
    constexpr int S = 128 / GS;          /* groups per span */
    constexpr int WW = BITS;             /* weight words a thread takes of a row's span (16 or 32 bytes) */
    constexpr int NP = GA ? S : 1;       /* pieces those words come in: one per group, or one quarter */
    constexpr int PW = WW / NP, XW = 8 / NP; /* words of a weight piece and of an activation piece */
    int bid = blockIdx.x;
    const sk_job jb = sk_job_of(jobs, bid);
    float *y = jb.y, *ws = jb.ws;
    unsigned *cnt = jb.cnt;
    const uint32_t *W = (const uint32_t *)jb.W;
    const uint2 *sbt = jb.sbt;
    const int ldy = jb.ldy, N = jb.N;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int P = K / 128, G = K / GS, T = (N + 15) / 16;
    const long long TU = (long long)T * P;
    /* at most one warp per unit, so that every warp of [first, last] of a tile holds some of it */
    const int Wn = (int)min((long long)jb.blocks * SK_WARPS, TU), w = bid * SK_WARPS + (threadIdx.x >> 5);
    if (w >= Wn) return;
    long long u = (long long)w * TU / Wn;
    const long long end = (long long)(w + 1) * TU / Wn;
    const int quarter_group = t * 32 / GS; /* !GA: the group of the span that this thread's quarter lies in */
    const size_t row_w = (size_t)K * BITS / 32; /* words per weight row */
    const uint32_t *ap[NT];
    bool av[NT], cv[NT][2];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        int row = nt * 8 + g;
        av[nt] = row < R;
        ap[nt] = (const uint32_t *)xa + (size_t)(av[nt] ? row : 0) * (K / 4) + t * XW;
        cv[nt][0] = nt * 8 + 2 * t < R, cv[nt][1] = nt * 8 + 2 * t + 1 < R;
    }
    while (u < end) {
        const int tile = (int)(u / P), a = (int)(u - (long long)tile * P);
        const long long tend = (long long)(tile + 1) * P;
        const int b = (int)((end < tend ? end : tend) - (long long)tile * P);
        const int n0 = tile * 16, ra = min(n0 + g, N - 1), rb = min(n0 + g + 8, N - 1);
        const uint32_t *wa = W + (size_t)ra * row_w + t * PW, *wb = W + (size_t)rb * row_w + t * PW;
        const uint2 *sb = sbt + (size_t)tile * G * 8 + g;
        float acc[NT][4], bacc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[nt][e] = bacc[nt][e] = 0.f;
        for (int s0 = a; s0 < b; s0 += U) {
            uint32_t WA[U][WW], WB[U][WW], X[U][NT][8];
            uint2 SB[U][S];
#pragma unroll
            for (int v = 0; v < U; v++) { /* every load of U spans first: bytes in flight */
                const int sp = s0 + v;
                const bool ok = sp < b;
#pragma unroll
                for (int h = 0; h < NP; h++) {
                    sk_words<PW, true>(WA[v] + h * PW, wa + (size_t)sp * 4 * WW + h * (WW * 4 / NP), ok);
                    sk_words<PW, true>(WB[v] + h * PW, wb + (size_t)sp * 4 * WW + h * (WW * 4 / NP), ok);
                }
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int h = 0; h < NP; h++)
                        sk_words<XW, false>(X[v][nt] + h * XW, ap[nt] + (size_t)sp * 32 + h * (32 / NP), ok && av[nt]);
#pragma unroll
                for (int s = 0; s < S; s++) SB[v][s] = ok ? __ldg(sb + (size_t)(sp * S + s) * 8) : make_uint2(0, 0);
            }
#pragma unroll
            for (int v = 0; v < U; v++) {
                const int sp = s0 + v;
                if (sp >= b) break;
                /* XV: the span's (d, d·Σa) of both of the thread's columns up front, S groups side by side
                 * in the [R][G] rows: one 16-byte load per two groups (G and sp·S are even when S >= 2); else
                 * one 8-byte load per group and column where the group's mmas are done. Measured (H200, bench
                 * --matmul, bench/cuda.md "Session 15"): q4 g32 1 row 1.85 -> 2.10 TB/s, q4 g64 8 rows +2%;
                 * lost 3% for q4 g64 at 9..16 rows and 6% for q8 (their registers are fuller) */
                constexpr bool XV = BITS == 4 && (NT == 1 || GS == 32);
                float2 DX[NT][2][XV ? S : 1];
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float2 *src = xdb + (size_t)(nt * 8 + 2 * t + e) * G + (size_t)sp * S;
                        if constexpr (!XV) {
                            (void)src;
                        } else if constexpr (S == 1) {
                            DX[nt][e][0] = cv[nt][e] ? __ldg(src) : make_float2(0.f, 0.f);
                        } else {
#pragma unroll
                            for (int h = 0; h < S / 2; h++) {
                                const float4 q4 = cv[nt][e] ? __ldg((const float4 *)src + h) : make_float4(0.f, 0.f, 0.f, 0.f);
                                DX[nt][e][2 * h] = make_float2(q4.x, q4.y), DX[nt][e][2 * h + 1] = make_float2(q4.z, q4.w);
                            }
                        }
                    }
#pragma unroll
                for (int s = 0; s < S; s++) {
                    /* mma j takes weight word j (q4: low nibbles = even inputs, high = odd) or words 2j, 2j+1
                     * (q8), and activation words 2j, 2j+1; under GA group s's mmas are j = s·4/S ..
                     * (s+1)·4/S − 1, else all four, masked to the thread's quarter's group */
                    const uint32_t m = (GA || S == 1 || quarter_group == s) ? 0xffffffffu : 0u;
                    int ic[NT][4];
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) ic[nt][0] = ic[nt][1] = ic[nt][2] = ic[nt][3] = 0;
#pragma unroll
                    for (int j = GA ? s * 4 / S : 0; j < (GA ? (s + 1) * 4 / S : 4); j++) {
                        uint32_t a0, a1, a2, a3;
                        if (BITS == 4) {
                            a0 = WA[v][j] & 0x0F0F0F0Fu, a1 = WB[v][j] & 0x0F0F0F0Fu;
                            a2 = (WA[v][j] >> 4) & 0x0F0F0F0Fu, a3 = (WB[v][j] >> 4) & 0x0F0F0F0Fu;
                        } else {
                            a0 = WA[v][2 * j], a1 = WB[v][2 * j], a2 = WA[v][2 * j + 1], a3 = WB[v][2 * j + 1];
                        }
#pragma unroll
                        for (int nt = 0; nt < NT; nt++)
                            cu_mma_u8s8(ic[nt], a0, a1, a2, a3, X[v][nt][2 * j] & m, X[v][nt][2 * j + 1] & m);
                    }
                    const uint2 q = SB[v][s]; /* rows g, g+8: scale | bias << 16 */
                    const float sa = sk_half<F16>(q.x & 0xffffu), ba = sk_half<F16>(q.x >> 16);
                    const float sbb = sk_half<F16>(q.y & 0xffffu), bb = sk_half<F16>(q.y >> 16);
                    const int gi = sp * S + s;
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) {
                        const int c0 = nt * 8 + 2 * t;
                        const float2 z2 = make_float2(0.f, 0.f);
                        float2 D0, D1;
                        if constexpr (XV) {
                            D0 = DX[nt][0][s], D1 = DX[nt][1][s];
                        } else {
                            D0 = cv[nt][0] ? __ldg(xdb + (size_t)c0 * G + gi) : z2;
                            D1 = cv[nt][1] ? __ldg(xdb + (size_t)(c0 + 1) * G + gi) : z2;
                        }
                        acc[nt][0] = fmaf((float)ic[nt][0], __fmul_rn(sa, D0.x), acc[nt][0]);
                        acc[nt][1] = fmaf((float)ic[nt][1], __fmul_rn(sa, D1.x), acc[nt][1]);
                        acc[nt][2] = fmaf((float)ic[nt][2], __fmul_rn(sbb, D0.x), acc[nt][2]);
                        acc[nt][3] = fmaf((float)ic[nt][3], __fmul_rn(sbb, D1.x), acc[nt][3]);
                        bacc[nt][0] = fmaf(ba, D0.y, bacc[nt][0]);
                        bacc[nt][1] = fmaf(ba, D1.y, bacc[nt][1]);
                        bacc[nt][2] = fmaf(bb, D0.y, bacc[nt][2]);
                        bacc[nt][3] = fmaf(bb, D1.y, bacc[nt][3]);
                    }
                }
            }
        }
        float c[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) c[nt][e] = __fadd_rn(acc[nt][e], bacc[nt][e]);
        sk_flush<NT>(c, y, ldy, N, R, tile, w, Wn, TU, P, ws, cnt);
        u = (long long)tile * P + b;
    }
}

/* c + Σ_i a.byte[i] · b.byte[i], a's bytes unsigned (q weights), b's signed (k_qact's activations). */
__device__ __forceinline__ int sk_dp4a(uint32_t a, uint32_t b, int c) {
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* k_sk_q's y for R <= NR rows on the integer pipe (dp4a) instead of tensor cores. The mma kernel at one
 * row issues ~200 warp instructions per (tile, span) unit of 1 KB (q4; bench/cuda.md "Session 12": the
 * unpacking and masks of 8 mmas whose 7 other columns are empty, and a per-group epilogue for 4 (row,
 * column) pairs of which one is wanted), about 2 TB/s; this one issues a third fewer (ncu: 135; 1 row
 * +7%, 2..4 rows slower: "Session 16"). Same launch (the caller passes the mma kernel's grid, so the
 * same warps get the same ranges), each group's integer sum is exact in both, and the float steps
 * after it are the same in the same order for every (row, column): the same bits, so R = 1 here and
 * R > 1 there agree (DESIGN.md §3).
 *
 * Lane (r, h) = (lane / 2, lane % 2) takes weight row n0 + r of the tile, and of each span the 16-byte
 * chunks at bytes 32c + 16h (c < CH): a warp load reads 16 rows x 32 contiguous bytes. Activation bytes
 * follow the weight bytes (k_qact: q4 words 2i / 2i + 1 hold the inputs of weight word i's low / high
 * nibbles; q8 word i those of word i). The two lanes of a row trade their chunks' sums (one shuffle a
 * chunk), so both hold every group's sum and both run the row's float chain; lane h = 0 writes.
 * IL = 1 leaves no branch between a batch's spans and splits each chunk's dp4a chain in two, so a warp's
 * spans overlap their latencies (q4 +1-8%, the 27B q4 step 2.83 -> 2.77 ms; bench/cuda.md "Session 31"). */
template <int BITS, int GS, int U, int F16, int NR, int IL>
__global__ void __launch_bounds__(SK_WARPS * 32, SK_Q_BLOCKS)
    k_sk_qdp(sk_jobs jobs, int K, const uint4 *xa, const float2 *xdb, int R) {
    CU_PDL_ENTRY();
    constexpr int S = 128 / GS, CH = BITS / 2; /* groups per span, 16-byte chunks per lane and span */
    constexpr int AC = BITS == 4 ? 2 : 1;      /* 16-byte activation pieces per chunk */
    constexpr int CB = BITS == 4 ? 64 : 32;    /* inputs of a chunk pair (c, both h): its group is c·CB/GS.. */
    int bid = blockIdx.x;
    const sk_job jb = sk_job_of(jobs, bid);
    float *y = jb.y, *ws = jb.ws;
    unsigned *cnt = jb.cnt;
    const uint4 *W = (const uint4 *)jb.W;
    const uint2 *sbt = jb.sbt;
    const int ldy = jb.ldy, N = jb.N;
    const int lane = threadIdx.x & 31, r = lane >> 1, h = lane & 1;
    const int P = K / 128, G = K / GS, T = (N + 15) / 16;
    const long long TU = (long long)T * P;
    const int Wn = (int)min((long long)jb.blocks * SK_WARPS, TU), w = bid * SK_WARPS + (threadIdx.x >> 5);
    if (w >= Wn) return;
    long long u = (long long)w * TU / Wn;
    const long long end = (long long)(w + 1) * TU / Wn;
    const size_t row_v = (size_t)K * BITS / 128, xrow = (size_t)K / 16; /* uint4 a weight / activation row */
    const uint4 z = make_uint4(0, 0, 0, 0);
    while (u < end) {
        const int tile = (int)(u / P), a = (int)(u - (long long)tile * P);
        const long long tend = (long long)(tile + 1) * P;
        const int b = (int)((end < tend ? end : tend) - (long long)tile * P);
        const int n0 = tile * 16;
        const uint4 *wr = W + (size_t)min(n0 + r, N - 1) * row_v + h;
        const uint2 *sb = sbt + (size_t)tile * G * 8 + (r & 7);
        float acc[NR], bacc[NR];
#pragma unroll
        for (int j = 0; j < NR; j++) acc[j] = bacc[j] = 0.f;
        for (int s0 = a; s0 < b; s0 += U) {
            uint4 WV[U][CH];
            uint2 SB[U][S];
            float2 DX[U][NR][S];
#pragma unroll
            for (int v = 0; v < U; v++) { /* every load of U spans first: bytes in flight */
                const int sp = s0 + v;
                const bool ok = sp < b;
#pragma unroll
                for (int c = 0; c < CH; c++) WV[v][c] = ok ? __ldcs(wr + (size_t)sp * BITS + 2 * c) : z;
#pragma unroll
                for (int j = 0; j < NR; j++) {
#pragma unroll
                    for (int s = 0; s < S; s++)
                        DX[v][j][s] = ok && j < R ? __ldg(xdb + (size_t)j * G + sp * S + s) : make_float2(0.f, 0.f);
                }
#pragma unroll
                for (int s = 0; s < S; s++) SB[v][s] = ok ? __ldg(sb + (size_t)(sp * S + s) * 8) : make_uint2(0, 0);
            }
#pragma unroll
            for (int v = 0; v < U; v++) {
                /* IL: no branch between the batch's spans (one past b has zero weights, scales and d, so it
                 * adds +0 to sums that are never -0: the same bits), so their loads and dp4a chains
                 * interleave; else each span's chain runs after the last one's */
                if (!IL && s0 + v >= b) break;
                const bool okv = s0 + v < b;
                int ic[NR][S];
#pragma unroll
                for (int j = 0; j < NR; j++) {
                    /* the activations here, not with the batch: every warp of the multiprocessor reads the
                     * same bytes (L1 hits), and holding U spans of them took the registers the weights need */
                    uint4 XV[CH][AC];
#pragma unroll
                    for (int c = 0; c < CH; c++)
#pragma unroll
                        for (int e = 0; e < AC; e++)
                            XV[c][e] = j < R && okv ? __ldg(xa + j * xrow + (size_t)(s0 + v) * 8 + (2 * c + h) * AC + e) : z;
                    int cs[CH];
#pragma unroll
                    for (int c = 0; c < CH; c++) {
                        const uint32_t wv[4] = {WV[v][c].x, WV[v][c].y, WV[v][c].z, WV[v][c].w};
                        const uint32_t xv[8] = {XV[c][0].x, XV[c][0].y, XV[c][0].z,
                                                XV[c][0].w, XV[c][AC - 1].x, XV[c][AC - 1].y,
                                                XV[c][AC - 1].z, XV[c][AC - 1].w}; /* q8: 4 used */
                        int sum = 0, s2 = 0; /* IL: two chains (integers: exact in any order) */
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            if (BITS == 4) {
                                sum = sk_dp4a(wv[i] & 0x0F0F0F0Fu, xv[2 * i], sum);
                                if (IL) s2 = sk_dp4a((wv[i] >> 4) & 0x0F0F0F0Fu, xv[2 * i + 1], s2);
                                else sum = sk_dp4a((wv[i] >> 4) & 0x0F0F0F0Fu, xv[2 * i + 1], sum);
                            } else if (IL && (i & 1)) {
                                s2 = sk_dp4a(wv[i], xv[i], s2);
                            } else {
                                sum = sk_dp4a(wv[i], xv[i], sum);
                            }
                        }
                        cs[c] = sum + s2;
                    }
#pragma unroll
                    for (int s = 0; s < S; s++) ic[j][s] = 0;
#pragma unroll
                    for (int c = 0; c < CH; c++) { /* integer sums: exact in any order */
                        const int other = __shfl_xor_sync(0xffffffffu, cs[c], 1);
                        if constexpr (CB <= GS) {
                            ic[j][c * CB / GS] += cs[c] + other; /* both lanes' chunk c in one group */
                        } else {                                 /* lane h's in group c·CB/GS + h */
                            ic[j][c * CB / GS] += h ? other : cs[c];
                            ic[j][c * CB / GS + 1] += h ? cs[c] : other;
                        }
                    }
                }
#pragma unroll
                for (int s = 0; s < S; s++) { /* k_sk_q's float steps, group by group */
                    const uint32_t q = r < 8 ? SB[v][s].x : SB[v][s].y; /* scale | bias << 16 */
                    const float sa = sk_half<F16>(q & 0xffffu), ba = sk_half<F16>(q >> 16);
#pragma unroll
                    for (int j = 0; j < NR; j++) {
                        acc[j] = fmaf((float)ic[j][s], __fmul_rn(sa, DX[v][j][s].x), acc[j]);
                        bacc[j] = fmaf(ba, DX[v][j][s].y, bacc[j]);
                    }
                }
            }
        }
        const long long f = (long long)tile * P;
        const int wf = sk_owner(f, Wn, TU), wl = sk_owner(f + P - 1, Wn, TU);
        float *p = wf == wl ? y + n0 + r : ws + (size_t)(tile + w) * SK_SLOT + r;
        const int ld = wf == wl ? ldy : 16;
        if (h == 0 && (wf != wl || n0 + r < N))
#pragma unroll
            for (int j = 0; j < NR; j++)
                if (j < R) p[(size_t)j * ld] = __fadd_rn(acc[j], bacc[j]);
        if (wf != wl) sk_flush_last(y, ldy, N, 0, R, tile, wf, wl, ws, cnt);
        u = (long long)tile * P + b;
    }
}

/* ------------------------------------------------------------------ bf16 */

/* y[j][n] = Σ_k (xh + xl)[j][k] · W[n][k] for j < R, K % 32 == 0; the span is one 32-wide K block, laid
 * out as cuda_mma.cu's k_mm_bf16 (thread (g, t): 8 inputs of rows n0+g and n0+g+8). Block row
 * blockIdx.y takes rows [8·NT·y, 8·NT·(y + 1)) of x through the same split as every other block row
 * (a row group: rows are mma columns, each computed from its own column only, so the bits do not depend
 * on which block row or instance computes it); its tile counters are its own.
 * The 1..8-row instance with batches of 1..2 spans is compiled for 10 resident blocks (48 registers, no
 * spills; 9 at the compiler's own 56): a small model's MLP gate + up at 32 rows (300 blocks x 4 row
 * groups) then fits the GPU as block rows (sk_rg_batch). The other instances keep the compiler's choice
 * (a minimum of 1 would let it take up to 255 registers). */
template <int NT, int U>
__global__ void __launch_bounds__(SK_WARPS * 32, NT == 1 && U <= 2 ? 10 : 0)
    k_sk_bf16(sk_jobs jobs, int K, const uint16_t *xh, const uint16_t *xl, int R) {
    CU_PDL_ENTRY();
    int bid = blockIdx.x;
    const sk_job jb = sk_job_of(jobs, bid);
    float *y = jb.y, *ws = jb.ws;
    const uint16_t *W = (const uint16_t *)jb.W;
    const int ldy = jb.ldy, N = jb.N;
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int P = K / 32, T = (N + 15) / 16, r0 = (int)blockIdx.y * 8 * NT;
    unsigned *cnt = jb.cnt + (size_t)blockIdx.y * T;
    const long long TU = (long long)T * P;
    /* at most one warp per unit, so that every warp of [first, last] of a tile holds some of it */
    const int Wn = (int)min((long long)jb.blocks * SK_WARPS, TU), w = bid * SK_WARPS + (threadIdx.x >> 5);
    if (w >= Wn) return;
    long long u = (long long)w * TU / Wn;
    const long long end = (long long)(w + 1) * TU / Wn;
    const uint4 *bh[NT], *bl[NT];
    bool bv[NT];
#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
        int row = r0 + nt * 8 + g;
        bv[nt] = row < R;
        bh[nt] = (const uint4 *)(xh + (size_t)(bv[nt] ? row : 0) * K) + t;
        bl[nt] = (const uint4 *)(xl + (size_t)(bv[nt] ? row : 0) * K) + t;
    }
    const uint4 z = make_uint4(0, 0, 0, 0);
    while (u < end) {
        const int tile = (int)(u / P), a = (int)(u - (long long)tile * P);
        const long long tend = (long long)(tile + 1) * P;
        const int b = (int)((end < tend ? end : tend) - (long long)tile * P);
        const int n0 = tile * 16, ra = min(n0 + g, N - 1), rb = min(n0 + g + 8, N - 1);
        const uint4 *wa = (const uint4 *)(W + (size_t)ra * K) + t, *wb = (const uint4 *)(W + (size_t)rb * K) + t;
        float c[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.f;
        for (int s0 = a; s0 < b; s0 += U) {
            uint4 A0[U], A1[U], BH[U][NT], BL[U][NT];
#pragma unroll
            for (int v = 0; v < U; v++) {
                const int k = s0 + v;
                const bool ok = k < b;
                A0[v] = ok ? __ldcs(wa + (size_t)k * 4) : z;
                A1[v] = ok ? __ldcs(wb + (size_t)k * 4) : z;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    BH[v][nt] = ok && bv[nt] ? __ldg(bh[nt] + (size_t)k * 4) : z;
                    BL[v][nt] = ok && bv[nt] ? __ldg(bl[nt] + (size_t)k * 4) : z;
                }
            }
#pragma unroll
            for (int v = 0; v < U; v++) {
                if (s0 + v >= b) break;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    cu_mma_bf16(c[nt], A0[v].x, A1[v].x, A0[v].y, A1[v].y, BH[v][nt].x, BH[v][nt].y);
                    cu_mma_bf16(c[nt], A0[v].z, A1[v].z, A0[v].w, A1[v].w, BH[v][nt].z, BH[v][nt].w);
                    cu_mma_bf16(c[nt], A0[v].x, A1[v].x, A0[v].y, A1[v].y, BL[v][nt].x, BL[v][nt].y);
                    cu_mma_bf16(c[nt], A0[v].z, A1[v].z, A0[v].w, A1[v].w, BL[v][nt].z, BL[v][nt].w);
                }
            }
        }
        sk_flush<NT>(c, y, ldy, N, R, tile, w, Wn, TU, P, ws, cnt, r0);
        u = (long long)tile * P + b;
    }
}

/* ------------------------------------------------------------------ dispatch */

/* A sweep knob of cu_set (0: unset), or dflt (benchmark knobs; never a function of R). */
static int knob_or(int v, int dflt) { return v > 0 ? v : dflt; }

int cu_sm_count(void) {
    static int sms = 0;
    if (!sms) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (sms <= 0) sms = 132;
    }
    return sms;
}

/* The fewest units a warp takes of a weight whose tiles are P spans long: about a fifth of a tile, at
 * most 2·U ($MTPLX_CUDA_SK_MINU=N: N). A small weight is then cut into many short ranges (a tile in
 * about five partials) instead of few long ones: the tiny models' matmuls are latency chains, and
 * the ranges' batches of loads are their links (small-model shape, 1-row forward: bf16 0.71 -> 0.57-0.66
 * ms, q4 0.86-0.89 -> 0.63 ms against the old 2·U floor; bench/cuda.md "Session 11"); a large weight
 * keeps 2·U (the 27B's P = 40..544; fewer units a warp there cost 1-3% at 8 rows). */
static int sk_minu(int P, int U) {
    if (cu_set.sk_minu > 0) return cu_set.sk_minu;
    int m = (P + 4) / 5;
    return m < 1 ? 1 : m > 2 * U ? 2 * U : m;
}

/* Blocks of the launch for a weight of `units` (tile, span) units with tiles of P spans: the blocks the
 * GPU holds at once (occ: resident blocks per multiprocessor of the kernel's 1..8-row instance; the 9..16-
 * and bf16's 17..32-row ones, with U / 2 and U / 4 spans per batch, may hold fewer and then run in more
 * than one wave), fewer when a warp would get under sk_minu units. A function of the shape and the GPU
 * only. */
static int sk_grid(int occ, long long units, int P, int U) {
    long long blocks = (long long)cu_sm_count() * knob_or(cu_set.sk_bps, occ);
    long long most = units / ((long long)sk_minu(P, U) * SK_WARPS);
    if (blocks > most) blocks = most;
    return blocks < 1 ? 1 : (int)blocks;
}

/* Resident blocks per multiprocessor of a kernel, at least 1. */
template <class K1>
static int sk_occ(K1 k1) {
    int a = 1;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&a, k1, SK_WARPS * 32, 0);
    return a < 1 ? 1 : a;
}

/* Gives each job of js (.blocks set) its partials and tile counters, carved out of the thread's scratch. */
static void sk_scratch_for(sk_jobs *js) {
    size_t ws = 0, cnt = 0;
    for (int i = 0; i < js->n; i++) {
        size_t T = (size_t)(js->j[i].N + 15) / 16;
        ws += (T + (size_t)js->j[i].blocks * SK_WARPS) * SK_SLOT, cnt += T * SK_RG;
    }
    sk_scratch *s = &tls_sk;
    sk_grow((void **)&s->ws, &s->ws_cap, ws * sizeof(float));
    sk_grow((void **)&s->cnt, &s->cnt_cap, cnt * sizeof(unsigned));
    ws = cnt = 0;
    for (int i = 0; i < js->n; i++) {
        size_t T = (size_t)(js->j[i].N + 15) / 16;
        js->j[i].ws = s->ws + ws, js->j[i].cnt = s->cnt + cnt;
        ws += (T + (size_t)js->j[i].blocks * SK_WARPS) * SK_SLOT, cnt += T * SK_RG;
    }
}

/* Orders js's jobs by their blocks, fewest first: a small weight's warps walk their ranges in a few
 * dependent batches, so they start first and overlap the large weights instead of trailing them (the
 * order of jobs changes no output's bits). */
static void sk_jobs_sort(sk_jobs *js) {
    for (int i = 1; i < js->n; i++)
        for (int j = i; j > 0 && js->j[j].blocks < js->j[j - 1].blocks; j--) {
            sk_job t = js->j[j];
            js->j[j] = js->j[j - 1], js->j[j - 1] = t;
        }
}

/* Blocks of the launch of js: its jobs' blocks. */
static int sk_blocks_of(const sk_jobs *js) {
    int b = 0;
    for (int i = 0; i < js->n; i++) b += js->j[i].blocks;
    return b;
}

int cu_sk_enabled(void) { return cu_set.sk; }

int cu_sk_q_handles(const be_weight *w, const cu_wdev *dv) {
    return cu_sk_enabled() && dv->sbt && w->cols % 128 == 0;
}

/* Blocks of the solo split of an N x K q weight (the launch's and cu_sk_warps'). */
template <int BITS, int GS, int U>
static int sk_q_blocks(int N, int K) {
    static int occ = 0;
    if (!occ) occ = sk_occ(k_sk_q<BITS, GS, 1, U, 0, 0>); /* both scale types and layouts: one grid, one split */
    return sk_grid(occ, (long long)((N + 15) / 16) * (K / 128), K / 128, U);
}

/* Whether a launch of R rows takes the group-piece span layout (GA). Both layouts give the same bits,
 * so this is a speed choice and may depend on R. Measured on an H200 (bench/cuda.md, "Session 14"),
 * 16 weights of 17408 x 5120 and the 27B-16l step: with 9..16 rows (two mma column tiles, twice the
 * mmas a span) group pieces are faster for groups of 64 (q4 9 rows 1.46 against 1.34 TB/s, 27B 9-row
 * forward 4.42 -> 4.00 ms; q8 2.47 against 2.06 TB/s) and q8 with groups of 32; with 1..8 rows the
 * masked quarters are (q4 g64 1 row 2.08 against 1.97 TB/s, q8 3.0 against 2.78: a warp's weight loads
 * are twice as many and half as wide, and the mmas saved were not what bound it), except q4 with
 * groups of 32 at 1..2 rows (1.85 against 1.76 TB/s, 27B 1-row forward 3.25 -> 3.07 ms), whose 4-byte
 * pieces lose from 4 rows on. $MTPLX_CUDA_SK_GA = 0 / 1 forces one. */
static int sk_q_ga(int bits, int gs, int R) {
    if (cu_set.sk_ga >= 0) return cu_set.sk_ga;
    if (gs == 128) return 1; /* one layout */
    return bits == 4 && gs == 32 ? R <= 2 : R > 8;
}

/* Launches k_sk_qdp for R <= NR rows (the smallest instance of 1 / 2 / 4 that holds R), F16 from the jobs. */
template <int BITS, int GS, int NR>
static void sk_qdp_go(const sk_jobs &js, int blocks, int K, const uint4 *a, const float2 *d, int R) {
    constexpr int U = (BITS == 4 ? 4 : 2) / NR > 0 ? (BITS == 4 ? 4 : 2) / NR : 1; /* no spills at 128 registers */
    if (NR > 1 && R <= NR / 2) return sk_qdp_go<BITS, GS, (NR > 1 ? NR / 2 : 1)>(js, blocks, K, a, d, R);
    const int f = js.j[0].f16, il = cu_set.sk_il >= 0 ? cu_set.sk_il : BITS == 4; /* unset: q4 (cu_settings) */
    if (il) cu_launch(f ? k_sk_qdp<BITS, GS, U, 1, NR, 1> : k_sk_qdp<BITS, GS, U, 0, NR, 1>, blocks, SK_WARPS * 32, 0,
                      js, K, a, d, R);
    else cu_launch(f ? k_sk_qdp<BITS, GS, U, 1, NR, 0> : k_sk_qdp<BITS, GS, U, 0, NR, 0>, blocks, SK_WARPS * 32, 0,
                   js, K, a, d, R);
}

/* The rows up to which k_sk_qdp takes a launch instead of the mma kernel (same bits either way, so a
 * speed choice): $MTPLX_CUDA_SK_DP = 0 (never) / 1 / 2 / 4, else 1 (bench/cuda.md "Session 16"). */
static int sk_dp_rows(void) {
    return cu_set.sk_dp >= 0 ? cu_set.sk_dp : 1;
}

template <int BITS, int GS, int U, int GA>
static void sk_q_go(const sk_jobs &js, int blocks, int K, const uint4 *a, const float2 *d, int R) {
    constexpr int U2 = U > 1 ? U / 2 : 1;
    if (R <= sk_dp_rows()) return sk_qdp_go<BITS, GS, 4>(js, blocks, K, a, d, R);
    if (js.j[0].f16) { /* cu_sk_q_n puts only weights of one scale type in a launch */
        if (R <= 8) cu_launch(k_sk_q<BITS, GS, 1, U, 1, GA>, blocks, SK_WARPS * 32, 0, js, K, a, d, R);
        else cu_launch(k_sk_q<BITS, GS, 2, U2, 1, GA>, blocks, SK_WARPS * 32, 0, js, K, a, d, R);
    } else {
        if (R <= 8) cu_launch(k_sk_q<BITS, GS, 1, U, 0, GA>, blocks, SK_WARPS * 32, 0, js, K, a, d, R);
        else cu_launch(k_sk_q<BITS, GS, 2, U2, 0, GA>, blocks, SK_WARPS * 32, 0, js, K, a, d, R);
    }
}

template <int BITS, int GS, int U>
static void sk_q_launch(sk_jobs js, int K, const void *xa, const float *xdb, int R) {
    for (int i = 0; i < js.n; i++) js.j[i].blocks = sk_q_blocks<BITS, GS, U>(js.j[i].N, K);
    sk_jobs_sort(&js);
    sk_scratch_for(&js);
    int blocks = sk_blocks_of(&js);
    const uint4 *a = (const uint4 *)xa;
    const float2 *d = (const float2 *)xdb;
    if (sk_q_ga(BITS, GS, R)) sk_q_go<BITS, GS, U, 1>(js, blocks, K, a, d, R);
    else sk_q_go<BITS, GS, U, 0>(js, blocks, K, a, d, R);
    CU_LAUNCHED("matmul sk q");
}

/* U (spans per batch): q4 4 (group 32: 2, which needs no spills) and q8 2 unless $MTPLX_CUDA_SK_U says
 * 2 / 4 / 8 (q8: 1 / 2 / 4; bench/cuda.md has the sweep). */
template <int BITS, int GS>
static void sk_q_u(const sk_jobs &js, int K, const void *xa, const float *xdb, int R) {
    int u = knob_or(cu_set.sk_u, BITS == 4 && GS == 32 ? 2 : 4);
    if (u <= 2) sk_q_launch<BITS, GS, BITS == 4 ? 2 : 1>(js, K, xa, xdb, R);
    else if (u <= 4) sk_q_launch<BITS, GS, BITS == 4 ? 4 : 2>(js, K, xa, xdb, R);
    else sk_q_launch<BITS, GS, BITS == 4 ? 8 : 4>(js, K, xa, xdb, R);
}

void cu_sk_q_n(const cu_sk_out *outs, int n, const void *xa, const float *xdb, int R) {
    for (int i0 = 0; i0 < n;) {
        /* up to SK_JOBS_MAX weights a launch, all with the same scale type (the kernel's F16) */
        sk_jobs js = {};
        const int f16 = outs[i0].w->scale_dtype == DT_F16;
        while (js.n < SK_JOBS_MAX && i0 + js.n < n && (outs[i0 + js.n].w->scale_dtype == DT_F16) == f16) {
            const cu_sk_out *o = &outs[i0 + js.n];
            sk_job *jb = &js.j[js.n++];
            jb->y = o->y, jb->ldy = o->ldy, jb->N = o->w->rows;
            jb->f16 = f16, jb->W = o->dv->data, jb->sbt = (const uint2 *)o->dv->sbt;
        }
        const be_weight *w = outs[i0].w;
        int K = w->cols, gs = w->group_size;
        if (w->bits == 4) {
            if (gs == 32) sk_q_u<4, 32>(js, K, xa, xdb, R);
            else if (gs == 64) sk_q_u<4, 64>(js, K, xa, xdb, R);
            else sk_q_u<4, 128>(js, K, xa, xdb, R);
        } else {
            if (gs == 32) sk_q_u<8, 32>(js, K, xa, xdb, R);
            else if (gs == 64) sk_q_u<8, 64>(js, K, xa, xdb, R);
            else sk_q_u<8, 128>(js, K, xa, xdb, R);
        }
        i0 += js.n;
    }
}

void cu_sk_q(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const void *xa, const float *xdb, int R) {
    cu_sk_out o = {y, ldy, w, dv};
    cu_sk_q_n(&o, 1, xa, xdb, R);
}

/* Resident blocks per multiprocessor of the bf16 kernel's 1..8-row instance. */
template <int U>
static int sk_bf16_occ(void) {
    static int occ = 0;
    if (!occ) occ = sk_occ(k_sk_bf16<1, U>);
    return occ;
}

/* Blocks of the solo split of an N x K bf16 weight (the launch's and cu_sk_warps'). */
template <int U>
static int sk_bf16_blocks(int N, int K) {
    return sk_grid(sk_bf16_occ<U>(), (long long)((N + 15) / 16) * (K / 32), K / 32, U);
}

/* 1: a launch of `blocks` blocks over rg row groups runs them in block rows, all resident at once, with the
 * 1..8-row instance of U spans a batch. */
template <int U>
static int sk_rg_fits(int blocks, int rg) {
    return cu_set.sk_rg && (long long)blocks * rg <= (long long)cu_sm_count() * sk_bf16_occ<U>();
}

/* The spans a batch (U, U / 2 or U / 4) with which the block rows of a launch of `blocks` blocks (the
 * split of U spans a batch) over rg row groups run, or 0 when they run in each warp instead (cu_set.sk_rg).
 * A smaller batch takes fewer registers, so more blocks are resident at once: a grouped launch of a small
 * model's weights (GDN input projections: 162 blocks x 4 row groups) fits at U / 2 where it did not at U.
 * The batch only groups a warp's loads; its range and the order of its sums are the split's, so the bits
 * are the same every way. */
template <int U>
static int sk_rg_batch(int blocks, int rg) {
    if (rg <= 1 || cu_set.sk_rg == 3) return U;
    if (sk_rg_fits<U>(blocks, rg)) return U;
    if (cu_set.sk_rg < 2) return 0;
    constexpr int U2 = U >= 4 ? U / 2 : U, U4 = U >= 8 ? U / 4 : U;
    if (U2 < U && sk_rg_fits<U2>(blocks, rg)) return U2;
    if (U4 < U2 && sk_rg_fits<U4>(blocks, rg)) return U4;
    return 0;
}

template <int U>
static void sk_bf16_launch(sk_jobs js, int K, const uint16_t *xh, const uint16_t *xl, int R) {
    for (int i = 0; i < js.n; i++) js.j[i].blocks = sk_bf16_blocks<U>(js.j[i].N, K);
    sk_jobs_sort(&js);
    sk_scratch_for(&js);
    int blocks = sk_blocks_of(&js);
    const int rg = (R + 7) / 8, ub = sk_rg_batch<U>(blocks, rg);
    /* one row group a block row: a small weight's latency chain then runs once for every 8 rows side by
     * side instead of 2 or 4 row groups in turn in each warp */
    const dim3 grid(blocks, rg);
    constexpr int U2 = U >= 4 ? U / 2 : U, U4 = U >= 8 ? U / 4 : U;
    if (ub == U) cu_launch(k_sk_bf16<1, U>, grid, SK_WARPS * 32, 0, js, K, xh, xl, R);
    else if (ub == U2) cu_launch(k_sk_bf16<1, U2>, grid, SK_WARPS * 32, 0, js, K, xh, xl, R);
    else if (ub == U4) cu_launch(k_sk_bf16<1, U4>, grid, SK_WARPS * 32, 0, js, K, xh, xl, R);
    else if (R <= 16) cu_launch(k_sk_bf16<2, U / 2>, blocks, SK_WARPS * 32, 0, js, K, xh, xl, R);
    else cu_launch(k_sk_bf16<4, (U > 3 ? U / 4 : 1)>, blocks, SK_WARPS * 32, 0, js, K, xh, xl, R);
    CU_LAUNCHED("matmul sk bf16");
}

int cu_sk_bf16_small(const be_weight *w) {
    if (w->dtype != DT_BF16 || w->rows <= 0 || w->cols % 32) return 0;
    const int u = knob_or(cu_set.sk_bu, 8), rg = SK_ROWS / 8, N = w->rows, K = w->cols;
    return u <= 2 ? sk_rg_fits<2>(sk_bf16_blocks<2>(N, K), rg)
         : u <= 4 ? sk_rg_fits<4>(sk_bf16_blocks<4>(N, K), rg) : sk_rg_fits<8>(sk_bf16_blocks<8>(N, K), rg);
}

/* U: 8 K blocks per batch unless $MTPLX_CUDA_SK_BU says 2 / 4 (bench/cuda.md has the sweep). */
void cu_sk_bf16_n(const cu_sk_out *outs, int n, const uint16_t *xh, const uint16_t *xl, int R) {
    int u = knob_or(cu_set.sk_bu, 8);
    for (int i0 = 0; i0 < n; i0 += SK_JOBS_MAX) {
        sk_jobs js = {};
        js.n = n - i0 < SK_JOBS_MAX ? n - i0 : SK_JOBS_MAX;
        for (int i = 0; i < js.n; i++) {
            const cu_sk_out *o = &outs[i0 + i];
            js.j[i].y = o->y, js.j[i].ldy = o->ldy, js.j[i].N = o->w->rows, js.j[i].W = o->dv->data;
        }
        int K = outs[i0].w->cols;
        if (u <= 2) sk_bf16_launch<2>(js, K, xh, xl, R);
        else if (u <= 4) sk_bf16_launch<4>(js, K, xh, xl, R);
        else sk_bf16_launch<8>(js, K, xh, xl, R);
    }
}

void cu_sk_bf16(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const uint16_t *xh, const uint16_t *xl,
                int R) {
    cu_sk_out o = {y, ldy, w, dv};
    cu_sk_bf16_n(&o, 1, xh, xl, R);
}

/* Warps of w's solo stream-K split, min(blocks · SK_WARPS, units): the kernels' Wn, from the same
 * functions as the launches (so cuda_gemm.cu cuts each tile's K into the same pieces). */
long long cu_sk_warps(const be_weight *w) {
    int N = w->rows, K = w->cols, blocks;
    long long units;
    if (w->dtype == DT_BF16) {
        int u = knob_or(cu_set.sk_bu, 8);
        blocks = u <= 2 ? sk_bf16_blocks<2>(N, K) : u <= 4 ? sk_bf16_blocks<4>(N, K) : sk_bf16_blocks<8>(N, K);
        units = (long long)((N + 15) / 16) * (K / 32);
    } else {
        int gs = w->group_size, u = knob_or(cu_set.sk_u, w->bits == 4 && gs == 32 ? 2 : 4);
#define SKB(B_, GS_) (u <= 2 ? sk_q_blocks<B_, GS_, B_ == 4 ? 2 : 1>(N, K)                                               \
                      : u <= 4 ? sk_q_blocks<B_, GS_, B_ == 4 ? 4 : 2>(N, K) : sk_q_blocks<B_, GS_, B_ == 4 ? 8 : 4>(N, K))
        if (w->bits == 4) blocks = gs == 32 ? SKB(4, 32) : gs == 64 ? SKB(4, 64) : SKB(4, 128);
        else blocks = gs == 32 ? SKB(8, 32) : gs == 64 ? SKB(8, 64) : SKB(8, 128);
#undef SKB
        units = (long long)((N + 15) / 16) * (K / 128);
    }
    long long wn = (long long)blocks * SK_WARPS;
    return wn < units ? wn : units;
}
