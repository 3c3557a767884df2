/* cuda_seq.cu — the CUDA backend's sequence ops: gated attention and MLA over a sequence's paged KV
 * cache, the Gated DeltaNet recurrence with per-row capture, and its replay (docs/architecture.md,
 * "The CUDA backend").
 *
 * KV addressing is paged: position p of head h lives in page pages[p / page_size] at
 * k + ((page · heads + h) · page_size + p % page_size) · width. The contiguous be_seq_kv of today is
 * the one-page case (page 0, page_size = capacity), so the kernels are already the paged ones.
 *
 * Row invariance (DESIGN.md §3): a query's keys are cut into chunks of ATT_CHUNK positions, one block
 * per (row, head, chunk), each with a fixed assignment of the chunk's keys to warps (tile i of 32 keys to
 * warp i mod ATT_WARPS, online softmax a tile at a time) and a fixed merge of the warps, then of the chunks in
 * order; the cut depends
 * only on the query's own key count, so its bits depend only on its keys (never on the rows beside
 * it); grouped blocks (several queries of one KV head sharing the staged keys) repeat those operations
 * query by query, so a query's bits do not depend on which queries share its block either; the delta rule runs a head's rows in order in one block; the state update is one function
 * shared by the step and the replay, so the replay is bit-identical. */
#include "cuda_internal.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <type_traits>

/* The launches of this file: with PDL like the rest of the backend's (every kernel here starts with
 * CU_PDL_ENTRY), or plain with $MTPLX_CUDA_SEQ_PDL=0 (session 6's launches; a comparison knob). */
template <typename... KArgs, typename... Args>
static inline void seq_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
    cu_launch_pdl(cu_pdl_enabled() && cu_set.seq_pdl, k, grid, block, smem, args...);
}

#define ATT_WARPS 8 /* a chunk's 8 tiles, one a warp: a decode query's latency is one tile's chain */
#define ATT_MAXO 8   /* value dims per lane: head widths up to 256 */
#define ATT_TILE 32   /* keys a warp scores at once, one a lane */
#define ATT_CHUNK 256 /* keys per attention block: a query over n keys is ceil(n / ATT_CHUNK) blocks, merged
                       * by k_attn_merge (one block per query left long contexts latency-bound: 0.65 ms a
                       * layer at 3,000 keys when a warp still walked its keys one at a time) */
#define ATT_PART_BUDGET ((size_t)64 << 20) /* floats of chunk partials one launch may write (256 MB) */

/* A sequence's KV cache of one layer as the kernels address it. */
typedef struct {
    float *k, *v;
    const int32_t *pages; /* device page table, or NULL: everything in page 0 */
    int page_size, heads, kw, vw;
} kv_view;

/* The view of kv for a layer with `heads` cached heads of widths kw / vw: the host page table is
 * staged to the device (the staged table stays valid for the op's kernels: the next staging copy is
 * ordered after them). */
static kv_view kv_view_of(cu_ctx *c, const be_seq_kv *kv, int heads, int kw, int vw) {
    kv_view v;
    v.k = kv->k;
    v.v = kv->v;
    v.pages = cu_stage_idx(c, kv->pages, (size_t)kv->n_pages);
    v.page_size = kv->page_size;
    v.heads = heads;
    v.kw = kw;
    v.vw = vw;
    return v;
}

/* The cache row of position pos of head h: its first float is at row · width of k (or v). Without a page
 * table every position is below page_size (page 0 is the whole cache); a power-of-two page size (the
 * pool's) takes a shift and a mask instead of an integer division, which a decode query's key loop pays
 * for every key (session 43: a sixth of a one-row attention block's instructions). */
__device__ __forceinline__ long long kv_row(const kv_view &kv, int h, int pos) {
    const int ps = kv.page_size;
    if (!kv.pages) return (long long)h * ps + pos;
    int page, off;
    if ((ps & (ps - 1)) == 0) {
        page = pos >> (__ffs(ps) - 1);
        off = pos & (ps - 1);
    } else {
        page = pos / ps;
        off = pos % ps;
    }
    return ((long long)kv.pages[page] * kv.heads + h) * ps + off;
}

__device__ __forceinline__ size_t kv_slot(const kv_view &kv, int h, int pos, int width) {
    return (size_t)kv_row(kv, h, pos) * width;
}

/* cos / sin of RoPE frequency i at pos, as kern_rope_cos_sin (double-precision cos of the fp32
 * angle), times the YaRN attention factor f. */
__device__ __forceinline__ void rope_cs(const float *inv_freq, int i, int pos, float f, float *c, float *s) {
    float ang = (float)pos * inv_freq[i];
    *c = (float)cos((double)ang);
    *s = (float)sin((double)ang);
    if (f != 1.0f) *c *= f, *s *= f;
}

/* ------------------------------------------------------------------ gated attention */

typedef struct {
    float *big;
    int ldb, q_stride, k_off, v_off, n_heads, n_kv, Dh, rd, pos0;
    const float *inv_freq, *q_norm, *k_norm;
    float rope_factor, eps;
} attn_prep_args;

/* Threads of a k_attn_prep block, and the partition of a head's sum of squares in every form of the
 * prep (attn_norm_rope): thread i < 128 sums entries i, i + 128, ... */
#define ATT_PREP_THREADS 128

/* buf[0..Dh) = the head at src, RMS-normalised by nw (when not NULL), then RoPE at pos on its first rd
 * dims (NeoX halves), for a block of at least ATT_PREP_THREADS threads: the first 128 take the sum of
 * squares as a 128-thread block does and the others add zeros, so cu_block_sum's total, and every bit
 * after it, is the same for 128 threads (k_attn_prep) and 256 (a core block's fused prep). Ends with
 * __syncthreads. */
__device__ __forceinline__ void attn_norm_rope(const attn_prep_args &a, float *buf, const float *src, const float *nw,
                                               int pos, float *sh) {
    const int Dh = a.Dh;
    for (int i = threadIdx.x; i < Dh; i += blockDim.x) buf[i] = src[i];
    if (nw) {
        __syncthreads();
        float s = 0.f;
        if (threadIdx.x < ATT_PREP_THREADS)
            for (int i = threadIdx.x; i < Dh; i += ATT_PREP_THREADS) s = fmaf(buf[i], buf[i], s);
        float inv = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(cu_block_sum(s, sh), (float)Dh), a.eps));
        for (int i = threadIdx.x; i < Dh; i += blockDim.x) buf[i] = __fmul_rn(__fmul_rn(buf[i], inv), nw[i]);
    }
    __syncthreads();
    int half = a.rd / 2;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float c, s, x1 = buf[i], x2 = buf[i + half];
        rope_cs(a.inv_freq, i, pos, a.rope_factor, &c, &s);
        /* each product rounded, as the CPU's C; spelled out so that no kernel's inlining contracts it */
        buf[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, s));
        buf[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, s));
    }
    __syncthreads();
}

/* Block (t, h): per-head RMSNorm and RoPE of query head h (h < nH) or of key head h - nH, whose key
 * and value then go into the cache at position pos0 + t. */
__device__ __forceinline__ void attn_prep_body(const attn_prep_args &a, const kv_view &kv, int t, int h) {
    extern __shared__ float buf[]; /* [Dh] */
    __shared__ float sh[33];
    int Dh = a.Dh, pos = a.pos0 + t;
    float *row = a.big + (size_t)t * a.ldb;
    int is_q = h < a.n_heads, j = h - a.n_heads;
    float *p = is_q ? row + (size_t)h * a.q_stride : row + a.k_off + (size_t)j * Dh;
    attn_norm_rope(a, buf, p, is_q ? a.q_norm : a.k_norm, pos, sh);
    for (int i = threadIdx.x; i < Dh; i += blockDim.x) p[i] = buf[i];
    if (!is_q) {
        float *kd = kv.k + kv_slot(kv, j, pos, Dh), *vd = kv.v + kv_slot(kv, j, pos, Dh);
        const float *vs = row + a.v_off + (size_t)j * Dh;
        for (int i = threadIdx.x; i < Dh; i += blockDim.x) kd[i] = buf[i], vd[i] = vs[i];
    }
}

__global__ void k_attn_prep(attn_prep_args a, kv_view kv) {
    CU_PDL_ENTRY();
    attn_prep_body(a, kv, blockIdx.x, blockIdx.y);
}

typedef struct {
    float *big;
    int ldb, q_off, q_stride, att_off, group, Dk, Dv, gated, pos0;
    float scale;
    float *part; /* chunk partials (m, l, o[Dv]) of queries over more than ATT_CHUNK keys: slot
                  * ((z · rows + t - t0) · heads + h) · S + chunk, z the sequence's index in the launch */
    int S, t0, rows, heads; /* chunks a query may have in this call, first row, rows of the slots, query heads */
    int z0;                 /* a batched launch's first sequence (its table index) */
    cu_prep_out prep;       /* the outputs prepared for the output projection too (cu_prep_from), or kind 0 */
    int prep_r0;            /* the prepared rows' index of row 0 of a.big */
    int *cnt;               /* one-query blocks: a query's chunks counted as they finish, slot
                             * (z · rows + t - t0) · heads + h, zero between launches; the last one merges
                             * (attn_merge_last). NULL: k_attn_merge runs after the launch */
} attn_core_args;

/* attn_norm_rope of a query head (q from qsrc, norm qn) and a key head (kb from ksrc, norm kn) at one
 * position side by side, for a block of at least 2 · ATT_PREP_THREADS threads: threads 0..127 take the
 * query's sum of squares and threads 128..255 the key's, each over attn_norm_rope's partition, and each
 * total adds its four warps' sums in warp order as cu_block_sum does (the other four warps' zeros leave
 * it unchanged), so both heads get attn_norm_rope's bits; the cos / sin of pos are computed once for
 * both. One chain of barriers where two calls had two. Ends with __syncthreads. */
static_assert(ATT_WARPS * 32 >= 2 * ATT_PREP_THREADS, "a one-query block prepares a query and a key head side by side");
__device__ __forceinline__ void attn_norm_rope_pair(const attn_prep_args &a, float *q, const float *qsrc,
                                                    const float *qn, float *kb, const float *ksrc, const float *kn,
                                                    int pos) {
    __shared__ float ws[2 * ATT_PREP_THREADS / 32 + 2];
    const int Dh = a.Dh, tid = threadIdx.x, side = tid >= ATT_PREP_THREADS;
    for (int i = tid; i < Dh; i += blockDim.x) q[i] = qsrc[i], kb[i] = ksrc[i];
    __syncthreads();
    float s = 0.f;
    if (tid < 2 * ATT_PREP_THREADS) {
        const float *b = side ? kb : q;
        for (int i = tid - side * ATT_PREP_THREADS; i < Dh; i += ATT_PREP_THREADS) s = fmaf(b[i], b[i], s);
    }
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((tid & 31) == 0 && tid < 2 * ATT_PREP_THREADS) ws[tid >> 5] = s;
    __syncthreads();
    if (tid == 0 || tid == 32) { /* warp 0 totals the query's four warps, warp 1 the key's */
        constexpr int nw = ATT_PREP_THREADS / 32;
        const int w0 = tid == 0 ? 0 : nw;
        float t = 0.f;
        for (int i = 0; i < nw; i++) t += ws[w0 + i];
        ws[2 * nw + (tid != 0)] = t;
    }
    __syncthreads();
    constexpr int nw2 = 2 * ATT_PREP_THREADS / 32;
    const float iq = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(ws[nw2], (float)Dh), a.eps));
    const float ik = 1.0f / sqrtf(__fadd_rn(__fdiv_rn(ws[nw2 + 1], (float)Dh), a.eps));
    for (int i = tid; i < Dh; i += blockDim.x) {
        if (qn) q[i] = __fmul_rn(__fmul_rn(q[i], iq), qn[i]);
        if (kn) kb[i] = __fmul_rn(__fmul_rn(kb[i], ik), kn[i]);
    }
    __syncthreads();
    const int half = a.rd / 2;
    for (int i = tid; i < half; i += blockDim.x) {
        float c, sn;
        rope_cs(a.inv_freq, i, pos, a.rope_factor, &c, &sn);
        const float x1 = q[i], x2 = q[i + half], y1 = kb[i], y2 = kb[i + half];
        q[i] = __fsub_rn(__fmul_rn(x1, c), __fmul_rn(x2, sn));
        q[i + half] = __fadd_rn(__fmul_rn(x2, c), __fmul_rn(x1, sn));
        kb[i] = __fsub_rn(__fmul_rn(y1, c), __fmul_rn(y2, sn));
        kb[i + half] = __fadd_rn(__fmul_rn(y2, c), __fmul_rn(y1, sn));
    }
    __syncthreads();
}

/* attn_prep_body's work for one-query block (t, h) of a call whose sequences have one row each
 * (k_attn_core_seqs_fp): query head h normalised and rotated into q (shared, Dh floats) and, when
 * `last` (the block's chunk holds position pos0 + t), key head kvh the same way into kb (shared, Dh
 * floats; both heads at once, attn_norm_rope_pair), then that key and its value into the cache at
 * pos0 + t. Nothing is written back to big. The query heads of one KV head all have a last-chunk block,
 * and each writes the same bits into the cache row; a block reads that row only after its own writes
 * and the __syncthreads that ends this. */
__device__ __forceinline__ void attn_fused_prep(const attn_prep_args &p, const kv_view &kv, int t, int h, int kvh,
                                                bool last, float *q, float *kb) {
    __shared__ float sh[33];
    const int pos = p.pos0 + t, Dh = p.Dh;
    const float *row = p.big + (size_t)t * p.ldb;
    if (!last) {
        attn_norm_rope(p, q, row + (size_t)h * p.q_stride, p.q_norm, pos, sh);
        return;
    }
    attn_norm_rope_pair(p, q, row + (size_t)h * p.q_stride, p.q_norm, kb, row + p.k_off + (size_t)kvh * Dh, p.k_norm,
                        pos);
    float *kd = kv.k + kv_slot(kv, kvh, pos, Dh), *vd = kv.v + kv_slot(kv, kvh, pos, Dh);
    const float *vs = row + p.v_off + (size_t)kvh * Dh;
    for (int i = threadIdx.x; i < Dh; i += blockDim.x) kd[i] = kb[i], vd[i] = vs[i];
    __syncthreads();
}

/* Chunk partial slot of row t (t0 <= t < t0 + rows), head h, chunk c of the launch's sequence z. */
__device__ __forceinline__ float *attn_part_slot(const attn_core_args &a, int z, int t, int h, int c) {
    return a.part + ((((size_t)z * a.rows + (t - a.t0)) * a.heads + h) * a.S + c) * (size_t)(a.Dv + 2);
}

__device__ __forceinline__ void attn_merge_last(const attn_core_args &a, int t, int h, int z, int chunks);

/* Block (t, h, c): query head h of row t attends to chunk c of positions 0..pos0+t of KV head h / group.
 * A query of one chunk writes its output (× sigmoid(gate) when gated, the gate following the Dk query
 * floats) to att_off; otherwise the chunk's (max, sum, unnormalized o) go to its partial slot
 * (sequence z) for k_attn_merge. fp: the prep's arguments when the block does its prep itself
 * (attn_fused_prep: one row a sequence), else NULL (k_attn_prep has run). */
__device__ __forceinline__ void attn_core_body(const attn_core_args &a, const kv_view &kv, int t, int h, int c, int z,
                                               const attn_prep_args *fp = nullptr) {
    extern __shared__ __align__(16) float sm[]; /* q[Dk], then per warp: m, l, o[Dv]; then the merge factors */
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    int Dk = a.Dk, Dv = a.Dv, kvh = h / a.group, nk = a.pos0 + t + 1;
    int chunks = (nk + ATT_CHUNK - 1) / ATT_CHUNK;
    if (c >= chunks) return;
    int j0 = c * ATT_CHUNK, n = min(nk, j0 + ATT_CHUNK); /* this block's keys: j0 .. n-1 */
    float *row = a.big + (size_t)t * a.ldb;
    const float *qg = row + a.q_off + (size_t)h * a.q_stride;
    float *q = sm, *part = sm + Dk;
    if (fp) {
        attn_fused_prep(*fp, kv, t, h, kvh, c == chunks - 1, q, part); /* part: the key until the loop ends */
    } else {
        for (int i = threadIdx.x; i < Dk; i += blockDim.x) q[i] = qg[i];
        __syncthreads();
    }
    float m = -INFINITY, l = 0.f, o[ATT_MAXO];
#pragma unroll
    for (int i = 0; i < ATT_MAXO; i++) o[i] = 0.f;
    /* the key rows as float4, a key scored by four lanes (Dk % 16 == 0), else by one lane */
    const bool k4q = Dk % 16 == 0 && (uintptr_t)kv.k % 16 == 0;
    /* the value rows as float4 when Dv is a multiple of 128: lane owns dims 4·lane + 128·i .. + 3 (else
     * lane + 32·i); either way each dim's sum runs over the keys in the same order */
    const bool v4 = Dv % 128 == 0 && (uintptr_t)kv.v % 16 == 0;
    /* tile i of ATT_TILE keys (from j0) goes to warp i mod ATT_WARPS. Its scores: in round r (of 4) the
     * lanes 4u'..4u'+3 score key 8r + u', lane p of the four summing the float4s p, p + 4, ... of the key
     * row (each x, y, z, w in turn), the four partials added as (p0 + p1) + (p2 + p3); so a warp load
     * reads 64 contiguous bytes of 8 key rows instead of 16 bytes of 32. Lane u then holds key u's
     * score and cache row. The warp takes the tile's max and sum (online softmax, one rescale a tile),
     * then adds the tile's value rows in key order, each key's cache row passed from its lane (no page
     * lookup a key) */
    for (int jt = j0 + w * ATT_TILE; jt < n; jt += ATT_WARPS * ATT_TILE) {
        const int nt = min(ATT_TILE, n - jt);
        float sc = -INFINITY;
        long long kr_row = 0;
        if (k4q) {
            const float4 *q4 = (const float4 *)q;
            const int part = lane & 3;
            float raw = 0.f;
#pragma unroll
            for (int r = 0; r < ATT_TILE / 8; r++) {
                const int u = 8 * r + (lane >> 2);
                float d = 0.f;
                long long ru = 0;
                if (u < nt) {
                    ru = kv_row(kv, kvh, jt + u);
                    const float4 *k4 = (const float4 *)(kv.k + ru * Dk);
#pragma unroll 8
                    for (int i = part; i < Dk / 4; i += 4) {
                        const float4 x = q4[i], y = k4[i];
                        d = fmaf(x.x, y.x, d);
                        d = fmaf(x.y, y.y, d);
                        d = fmaf(x.z, y.z, d);
                        d = fmaf(x.w, y.w, d);
                    }
                }
                d += __shfl_xor_sync(0xffffffffu, d, 1);
                d += __shfl_xor_sync(0xffffffffu, d, 2);
                const float dl = __shfl_sync(0xffffffffu, d, 4 * (lane & 7));
                const long long rl = __shfl_sync(0xffffffffu, ru, 4 * (lane & 7));
                if ((lane >> 3) == r) raw = dl, kr_row = rl;
            }
            if (lane < nt) sc = raw * a.scale;
        } else if (lane < nt) {
            kr_row = kv_row(kv, kvh, jt + lane);
            const float *kr = kv.k + kr_row * Dk;
            float d = 0.f;
            for (int i = 0; i < Dk; i++) d = fmaf(q[i], kr[i], d);
            sc = d * a.scale;
        }
        float mt = sc;
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, s));
        const float mn = fmaxf(m, mt), corr = expf(m - mn);
        const float p = lane < nt ? expf(sc - mn) : 0.f;
        float ps = p;
#pragma unroll
        for (int s = 16; s > 0; s >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, s);
        l = l * corr + ps;
#pragma unroll
        for (int i = 0; i < ATT_MAXO; i++) o[i] *= corr;
        if (v4) {
#pragma unroll 8
            for (int u = 0; u < nt; u++) {
                const float pu = __shfl_sync(0xffffffffu, p, u);
                const float *vr = kv.v + __shfl_sync(0xffffffffu, kr_row, u) * Dv;
#pragma unroll
                for (int i = 0; i < ATT_MAXO / 4; i++) {
                    int dd = 4 * lane + 128 * i;
                    if (dd < Dv) {
                        const float4 x = *(const float4 *)(vr + dd);
                        o[4 * i] = fmaf(pu, x.x, o[4 * i]);
                        o[4 * i + 1] = fmaf(pu, x.y, o[4 * i + 1]);
                        o[4 * i + 2] = fmaf(pu, x.z, o[4 * i + 2]);
                        o[4 * i + 3] = fmaf(pu, x.w, o[4 * i + 3]);
                    }
                }
            }
        } else {
#pragma unroll 4
            for (int u = 0; u < nt; u++) {
                const float pu = __shfl_sync(0xffffffffu, p, u);
                const float *vr = kv.v + __shfl_sync(0xffffffffu, kr_row, u) * Dv;
#pragma unroll
                for (int i = 0; i < ATT_MAXO; i++) {
                    int dd = lane + 32 * i;
                    if (dd < Dv) o[i] = fmaf(pu, vr[dd], o[i]);
                }
            }
        }
        m = mn;
    }
    float *mine = part + (size_t)w * (Dv + 2);
    if (lane == 0) mine[0] = m, mine[1] = l;
#pragma unroll
    for (int i = 0; i < ATT_MAXO; i++) {
        int dd = v4 ? 4 * lane + 128 * (i >> 2) + (i & 3) : lane + 32 * i;
        if (dd < Dv) mine[2 + dd] = o[i];
    }
    __syncthreads();
    /* the warps' merge factors expf(m_x - M), each computed once (thread x) instead of by every thread for
     * L and again for each of its dims: the same values and the same sums in the same order */
    float *ex = part + (size_t)ATT_WARPS * (Dv + 2);
    float M = -INFINITY;
    for (int x = 0; x < ATT_WARPS; x++) M = fmaxf(M, part[(size_t)x * (Dv + 2)]);
    if (threadIdx.x < ATT_WARPS) ex[threadIdx.x] = expf(part[(size_t)threadIdx.x * (Dv + 2)] - M);
    __syncthreads();
    float L = 0.f;
    for (int x = 0; x < ATT_WARPS; x++) L += part[(size_t)x * (Dv + 2) + 1] * ex[x];
    float *out = row + a.att_off + (size_t)h * Dv, *slot = chunks > 1 ? attn_part_slot(a, z, t, h, c) : NULL;
    if (slot && threadIdx.x == 0) slot[0] = M, slot[1] = L;
    for (int dd = threadIdx.x; dd < Dv; dd += blockDim.x) {
        float acc = 0.f;
        for (int x = 0; x < ATT_WARPS; x++) acc += part[(size_t)x * (Dv + 2) + 2 + dd] * ex[x];
        if (slot) {
            slot[2 + dd] = acc;
            continue;
        }
        float r = acc / L;
        if (a.gated) r *= cu_sigmoid(qg[Dk + dd]);
        out[dd] = r;
    }
    if (a.prep.kind && !slot) cu_prep_from(a.prep, out, Dv, h * Dv, a.prep_r0 + t); /* slot: the same for the block */
    if (slot && a.cnt) attn_merge_last(a, t, h, z, chunks);
}

/* Block (t, h) of a query over more than one chunk: its chunks' partials merged in chunk order (the
 * same formula as the warps' merge above), normalized, gated, written to att_off. */
__device__ __forceinline__ void attn_merge_body(const attn_core_args &a, int t, int h, int z) {
    int nk = a.pos0 + t + 1, chunks = (nk + ATT_CHUNK - 1) / ATT_CHUNK, Dv = a.Dv;
    if (chunks <= 1) return;
    const float *p0 = attn_part_slot(a, z, t, h, 0);
    const size_t st = (size_t)(Dv + 2);
    float M = -INFINITY, L = 0.f;
    /* __ldcg (through L2 only): other blocks of the launch wrote these when the last block merges */
    for (int c = 0; c < chunks; c++) M = fmaxf(M, __ldcg(p0 + c * st));
    for (int c = 0; c < chunks; c++) L += __ldcg(p0 + c * st + 1) * expf(__ldcg(p0 + c * st) - M);
    float *row = a.big + (size_t)t * a.ldb, *out = row + a.att_off + (size_t)h * Dv;
    const float *qg = row + a.q_off + (size_t)h * a.q_stride;
    for (int dd = threadIdx.x; dd < Dv; dd += blockDim.x) {
        float acc = 0.f;
        for (int c = 0; c < chunks; c++) acc += __ldcg(p0 + c * st + 2 + dd) * expf(__ldcg(p0 + c * st) - M);
        float r = acc / L;
        if (a.gated) r *= cu_sigmoid(qg[a.Dk + dd]);
        out[dd] = r;
    }
    if (a.prep.kind) cu_prep_from(a.prep, out, Dv, h * Dv, a.prep_r0 + t);
}

/* After a block wrote its chunk's partial slot (row t, head h, sequence z of the launch): counts the
 * chunk in a.cnt, and the block that counts the query's last chunk runs attn_merge_body (the same
 * arithmetic as k_attn_merge's block, whatever the thread count) and zeroes the counter for the next
 * launch. Each block's slot writes are fenced before its count; the merge reads the slots through L2. */
__device__ __forceinline__ void attn_merge_last(const attn_core_args &a, int t, int h, int z, int chunks) {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        int *n = a.cnt + ((size_t)z * a.rows + (t - a.t0)) * a.heads + h;
        last = atomicAdd(n, 1) == chunks - 1;
        if (last) *n = 0;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    attn_merge_body(a, t, h, z);
}

__global__ void __launch_bounds__(ATT_WARPS * 32) k_attn_core(attn_core_args a, kv_view kv) {
    CU_PDL_ENTRY();
    attn_core_body(a, kv, a.t0 + blockIdx.x, blockIdx.y, blockIdx.z, 0);
}

__global__ void k_attn_merge(attn_core_args a) {
    CU_PDL_ENTRY();
    attn_merge_body(a, a.t0 + blockIdx.x, blockIdx.y, 0);
}

/* ------------------------------------------------------------------ queries of one KV head together */

/* attn_core_body reads a chunk's key and value rows once per (row, query head): a verify of R rows of a
 * model with G query heads a KV head reads them R · G times (the 27B shape's 8-row verify at 16,384 keys:
 * 6.4 GB a layer from L2, twice the 1-row step; bench/cuda.md "Session 20"). A grouped block takes QB
 * queries of one KV head of one sequence and one chunk, stages each key tile and then each value tile of
 * the chunk in shared memory once (cp.async, two slots: the next tile is in flight while this one is
 * used), and gives every query exactly attn_core_body's arithmetic, so each output keeps its bits whatever
 * queries share a block ($MTPLX_CUDA_ATT_GROUP=0: one query a block; gpu-test compares both):
 *
 *   - a chunk's tile i of 32 keys is attn_core_body's warp i, which starts from m = -inf, l = 0, o = 0:
 *     its max is the tile's max score, its sum the tile's butterfly sum of p, its o[d] the chain of
 *     fmaf(p_u, v_u[d], .) over the tile's keys in order;
 *   - a score is the four-lane sum of attn_core_body's k4q path: lane p's fmaf chain over float4s p, p + 4,
 *     ..., then (s0 + s1) + (s2 + s3);
 *   - the tiles are merged in tile order with attn_core_body's expressions (empty tiles included).
 *
 * Pass 1 (warp w = queries w, w + 8, ..., lane u = key u of the staged tile): scores, each (query, tile)'s
 * max, sum and p. Pass 2 (thread = two value dims and a set of the queries): each tile's o, folded into the merge as
 * soon as it is complete (the merge's max over the tiles is known after pass 1). Needs Dk = DK and Dv =
 * DV and 16-byte aligned caches (attn_qb and its callers check). */
template <int QB, int DK, int DV>
struct att_g_shape {
    static constexpr int KS = DK + 4; /* staged key row stride: lane-per-key float4 reads hit distinct banks */
    static constexpr int BUF = 32 * KS > 32 * DV ? 32 * KS : 32 * DV; /* floats of one staging slot */
    static constexpr int NP = DV / 2;                                  /* pass 2: value dim pairs */
    static constexpr int QS = ATT_WARPS * 32 / NP;                     /* threads a dim pair (query sets) */
    static constexpr int Q = (QB + QS - 1) / QS;                       /* queries a thread accumulates */
    static constexpr int QP = QS * Q;                                  /* p floats a key (QB padded) */
    static constexpr size_t floats = 2 * (size_t)BUF + (size_t)QB * DK + (size_t)ATT_CHUNK * QP + 2 * QB * ATT_WARPS;
};
static_assert(ATT_CHUNK == ATT_WARPS * ATT_TILE, "a chunk is one tile a warp (attn_core_body)");

/* Queues the copy of keys jt .. jt + n - 1 (n <= 32; rows past n zero-filled) of KV head kvh, key rows
 * (W = DK floats, stride S) or value rows, into slot dst: 8 threads a key, each looking its row up once. */
template <int W, int S>
__device__ __forceinline__ void att_stage(float *dst, const float *base, const kv_view &kv, int kvh, int jt, int n) {
    constexpr int TPK = ATT_WARPS * 32 / ATT_TILE, per = W / 4 / TPK; /* threads a key; 16-byte pieces a thread */
    const int u = threadIdx.x / TPK, f0 = threadIdx.x % TPK;
    const bool ok = u < n;
    const float *src = ok ? base + kv_row(kv, kvh, jt + u) * W : base;
#pragma unroll
    for (int k = 0; k < per; k++) {
        const int f = f0 + TPK * k;
        cu_cp16(dst + u * S + 4 * f, src + (ok ? 4 * f : 0), ok);
    }
}

/* Pass 1 for queries w + ATT_WARPS·i, i < NQ (keys of the tile: lim[i], <= 0 none) on the staged key tile
 * kt: lane u's score as attn_core_body's four lanes of key u make it, the tile's softmax; p to
 * pr[u · QP + query], max and sum to m[query · ATT_WARPS] / l[...] (lane 0). The NQ queries share each key
 * load; each query's chains are the one-query ones, so NQ does not change a bit. */
template <int QP, int DK, int KS, int NQ>
__device__ __forceinline__ void att_g_scores(const float *kt, const float *qs, float *pr, float *m, float *l,
                                             int w, const int *lim, float scale) {
    const int u = threadIdx.x & 31;
    const float4 *k4 = (const float4 *)(kt + u * KS);
    float s[NQ][4];
#pragma unroll
    for (int q = 0; q < NQ; q++) s[q][0] = s[q][1] = s[q][2] = s[q][3] = 0.f;
#pragma unroll
    for (int i = 0; i < DK / 16; i++)
#pragma unroll
        for (int p = 0; p < 4; p++) {
            const float4 y = k4[4 * i + p];
#pragma unroll
            for (int q = 0; q < NQ; q++) {
                const float4 x = ((const float4 *)(qs + (w + ATT_WARPS * q) * DK))[4 * i + p];
                s[q][p] = fmaf(x.x, y.x, s[q][p]);
                s[q][p] = fmaf(x.y, y.y, s[q][p]);
                s[q][p] = fmaf(x.z, y.z, s[q][p]);
                s[q][p] = fmaf(x.w, y.w, s[q][p]);
            }
        }
#pragma unroll
    for (int q = 0; q < NQ; q++) {
        const int qq = w + ATT_WARPS * q, nt = min(ATT_TILE, lim[q]);
        if (nt <= 0) {
            pr[u * QP + qq] = 0.f;
            continue;
        }
        const float raw = (s[q][0] + s[q][1]) + (s[q][2] + s[q][3]);
        const float sc = u < nt ? raw * scale : -INFINITY;
        float mt = sc;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
        const float mn = fmaxf(-INFINITY, mt); /* attn_core_body's first tile: m = -inf before it */
        const float p = u < nt ? expf(sc - mn) : 0.f;
        float ps = p;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
        pr[u * QP + qq] = p;
        if (u == 0) m[qq * ATT_WARPS] = mn, l[qq * ATT_WARPS] = ps; /* l · corr + ps with l = 0 */
    }
}

/* Pass 2 for one value tile vt (keys 0 .. ntm - 1 staged) and this thread's Q queries (lim[j]: keys of
 * query j in the tile, 0 for none or no such query): o[j] += p · v over dims 2·pair, 2·pair + 1, keys in
 * order; the keys every query has run without checks, the rest check each query's count. */
template <int Q, int QP, int DV>
__device__ __forceinline__ void att_g_values(const float *vt, const float *pt, int pair, int q0, const int *lim,
                                             int ntm, float2 *o) {
    int lmin = ntm;
#pragma unroll
    for (int j = 0; j < Q; j++) lmin = min(lmin, lim[j]);
    lmin = max(lmin, 0);
    int u = 0;
#pragma unroll 4
    for (; u < lmin; u++) {
        const float2 v = *(const float2 *)(vt + u * DV + 2 * pair);
#pragma unroll
        for (int j = 0; j < Q; j++) {
            const float p = pt[u * QP + q0 + j];
            o[j].x = fmaf(p, v.x, o[j].x);
            o[j].y = fmaf(p, v.y, o[j].y);
        }
    }
    for (; u < ntm; u++) {
        const float2 v = *(const float2 *)(vt + u * DV + 2 * pair);
#pragma unroll
        for (int j = 0; j < Q; j++) {
            if (u >= lim[j]) continue;
            const float p = pt[u * QP + q0 + j];
            o[j].x = fmaf(p, v.x, o[j].x);
            o[j].y = fmaf(p, v.y, o[j].y);
        }
    }
}

template <int QB, int DK, int DV>
__device__ __forceinline__ void attn_core_gbody(const attn_core_args &a, const kv_view &kv, int x, int kvh, int c,
                                                int z, int rows_here) {
    using SH = att_g_shape<QB, DK, DV>;
    constexpr int KS = SH::KS, BUF = SH::BUF, NP = SH::NP, Q = SH::Q, QP = SH::QP, NTH = ATT_WARPS * 32;
    extern __shared__ __align__(16) float sm[]; /* 2 slots, q[QB][DK], p[256][QP], m[QB][8], l[QB][8] */
    float *ring = sm, *qs = ring + 2 * BUF, *pr = qs + QB * DK, *ms = pr + ATT_CHUNK * QP, *ls = ms + QB * ATT_WARPS;
    const int tid = threadIdx.x, w = tid >> 5, G = a.group, j0 = c * ATT_CHUNK;
    /* query qq: local row (x · QB + qq) / G, head kvh · G + (x · QB + qq) % G; its keys here end at qend */
    auto qend = [&](int qq) {
        const int tl = (x * QB + qq) / G, nk = a.pos0 + a.t0 + tl + 1;
        return qq < QB && tl < rows_here && nk > j0 ? min(nk, j0 + ATT_CHUNK) : j0;
    };
    int nmax = j0;
#pragma unroll
    for (int qq = 0; qq < QB; qq++) nmax = max(nmax, qend(qq));
    if (nmax <= j0) return;
    const int ntl = (nmax - j0 + ATT_TILE - 1) / ATT_TILE; /* tiles with keys of some query */
    att_stage<DK, KS>(ring, kv.k, kv, kvh, j0, nmax - j0);
    cu_cp_commit();
    for (int i = tid; i < QB * DK; i += NTH) {
        const int qq = i / DK, e = x * QB + qq;
        qs[i] = qend(qq) > j0 ? a.big[(size_t)(a.t0 + e / G) * a.ldb + a.q_off + (size_t)(kvh * G + e % G) * a.q_stride +
                                      i % DK]
                              : 0.f;
    }
    for (int i = tid; i < QB * ATT_WARPS; i += NTH) ms[i] = -INFINITY, ls[i] = 0.f;
    for (int i = tid; i < ATT_CHUNK * QP; i += NTH)
        if (i % QP >= QB) pr[i] = 0.f; /* padding queries */
    constexpr int NQ = QB > ATT_WARPS ? QB / ATT_WARPS : 1; /* queries a warp scores: w, w + 8, ... */
    static_assert(QB <= ATT_WARPS || QB % ATT_WARPS == 0, "a warp's queries are w + 8·i");
    int wend[NQ];
#pragma unroll
    for (int q = 0; q < NQ; q++) wend[q] = w + ATT_WARPS * q < QB ? qend(w + ATT_WARPS * q) : j0;
    /* pass 1: slot t & 1 holds key tile t; the next stage (key tile t + 1, or value tile 0) is queued first */
    for (int t = 0; t < ntl; t++) {
        const int jt = j0 + t * ATT_TILE;
        float *next = ring + ((t + 1) & 1) * BUF;
        if (t + 1 < ntl) att_stage<DK, KS>(next, kv.k, kv, kvh, jt + ATT_TILE, nmax - jt - ATT_TILE);
        else att_stage<DV, DV>(next, kv.v, kv, kvh, j0, nmax - j0);
        cu_cp_commit();
        cu_cp_wait<1>();
        __syncthreads();
        if (w < QB) {
            int lim[NQ];
#pragma unroll
            for (int q = 0; q < NQ; q++) lim[q] = wend[q] - jt;
            att_g_scores<QP, DK, KS, NQ>(ring + (t & 1) * BUF, qs, pr + t * ATT_TILE * QP, ms + t, ls + t, w, lim,
                                         a.scale);
        }
        __syncthreads();
    }
    /* pass 2: thread (pair, set) takes dims 2·pair, 2·pair + 1 of queries q0 .. q0 + Q - 1; the merge's max
     * and sum of each query first (attn_core_body's, over all 8 tiles), then slot (ntl + t) & 1 holds value
     * tile t and each tile's o goes into the merge as soon as it is complete */
    const int pair = tid % NP, q0 = tid / NP * Q;
    float M[Q], L[Q];
    float2 acc[Q];
    int qe[Q];
#pragma unroll
    for (int j = 0; j < Q; j++) {
        const int qq = min(q0 + j, QB - 1);
        qe[j] = qend(q0 + j);
        M[j] = -INFINITY, L[j] = 0.f, acc[j] = make_float2(0.f, 0.f);
        for (int y = 0; y < ATT_WARPS; y++) M[j] = fmaxf(M[j], ms[qq * ATT_WARPS + y]);
        for (int y = 0; y < ATT_WARPS; y++) L[j] += ls[qq * ATT_WARPS + y] * expf(ms[qq * ATT_WARPS + y] - M[j]);
    }
    for (int t = 0; t < ATT_WARPS; t++) {
        float2 o[Q];
#pragma unroll
        for (int j = 0; j < Q; j++) o[j] = make_float2(0.f, 0.f);
        if (t < ntl) {
            const int jt = j0 + t * ATT_TILE, s = ntl + t;
            if (t + 1 < ntl)
                att_stage<DV, DV>(ring + ((s + 1) & 1) * BUF, kv.v, kv, kvh, jt + ATT_TILE, nmax - jt - ATT_TILE);
            cu_cp_commit();
            cu_cp_wait<1>();
            __syncthreads();
            int lim[Q];
#pragma unroll
            for (int j = 0; j < Q; j++) lim[j] = max(qe[j] - jt, 0);
            if (q0 < QB)
                att_g_values<Q, QP, DV>(ring + (s & 1) * BUF, pr + t * ATT_TILE * QP, pair, q0, lim,
                                        min(ATT_TILE, nmax - jt), o);
            __syncthreads();
        }
#pragma unroll
        for (int j = 0; j < Q; j++) {
            const int qq = min(q0 + j, QB - 1);
            acc[j].x += o[j].x * expf(ms[qq * ATT_WARPS + t] - M[j]);
            acc[j].y += o[j].y * expf(ms[qq * ATT_WARPS + t] - M[j]);
        }
    }
#pragma unroll
    for (int j = 0; j < Q; j++) {
        const int qq = q0 + j;
        if (qq >= QB || qe[j] <= j0) continue;
        const int e = x * QB + qq, t = a.t0 + e / G, h = kvh * G + e % G, d = 2 * pair;
        const int chunks = (a.pos0 + t + 1 + ATT_CHUNK - 1) / ATT_CHUNK;
        float *row = a.big + (size_t)t * a.ldb;
        if (chunks > 1) {
            float *slot = attn_part_slot(a, z, t, h, c);
            if (d == 0) slot[0] = M[j], slot[1] = L[j];
            slot[2 + d] = acc[j].x, slot[3 + d] = acc[j].y;
            continue;
        }
        float r0 = acc[j].x / L[j], r1 = acc[j].y / L[j];
        if (a.gated) {
            const float *g = row + a.q_off + (size_t)h * a.q_stride + DK + d;
            r0 *= cu_sigmoid(g[0]);
            r1 *= cu_sigmoid(g[1]);
        }
        row[a.att_off + (size_t)h * DV + d] = r0;
        row[a.att_off + (size_t)h * DV + d + 1] = r1;
    }
}

/* Blocks an SM the compiler must leave room for: a 16-query block at width 256 takes 98 KB of shared memory,
 * so two fit an SM when each thread keeps to 128 registers. One block of 8 warps an SM (the 32-query blocks:
 * 134 KB, 201 registers) left the kernel latency-bound, 0.53 eligible warps a scheduler (bench/cuda.md
 * "Session 37"). */
#define ATT_G_MINB(QB) ((QB) == 16 ? 2 : 1)

template <int QB, int D>
__global__ void __launch_bounds__(ATT_WARPS * 32, ATT_G_MINB(QB))
    k_attn_core_g(attn_core_args a, kv_view kv, int rows_here) {
    CU_PDL_ENTRY();
    attn_core_gbody<QB, D, D>(a, kv, blockIdx.x, blockIdx.y, blockIdx.z, 0, rows_here);
}

template <int QB, int D>
static size_t attn_g_smem() {
    return sizeof(float) * att_g_shape<QB, D, D>::floats;
}

/* Bytes of shared memory a block may opt in to on this device (the big prefill blocks need up to 134 KB). */
static size_t cu_smem_optin(void) {
    static int b = 0;
    if (!b) {
        int dev = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&b, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
        if (b <= 0) b = 48 * 1024;
    }
    return (size_t)b;
}

/* Shared memory of the big grouped instances (16 or 32 queries, head width 128 or 256). */
static size_t attn_g_big_smem(int qb, int d) {
    if (d == 128) return qb == 32 ? attn_g_smem<32, 128>() : attn_g_smem<16, 128>();
    return qb == 32 ? attn_g_smem<32, 256>() : attn_g_smem<16, 256>();
}

/* Queries a grouped block takes for a launch of `rows` rows a sequence over nseq sequences, nH query
 * heads and S chunks: of 8, 6, 4 and 2, the one that leaves the fewest empty places for rows · group
 * queries (ties: the larger); or 0 for one-query blocks: $MTPLX_CUDA_ATT_GROUP=0, a single query a KV head,
 * head widths other than 128 / 256, Dk != Dv, a cache not 16-byte aligned (`aligned` 0), or (unless =2)
 * fewer grouped blocks than multiprocessors — a grouped block walks its chunk's 16 staged tiles in turn,
 * so a short context with few queries runs faster as one-query blocks side by side (27B-16l q4 at 256
 * keys: 1 row 2.40 vs 2.35 ms; bench/cuda.md "Session 21"). A launch of 64 queries or more (a prefill
 * chunk) takes 16 instead (up to $MTPLX_CUDA_ATT_QB: 32 is a knob) when that grid still fills the GPU and the
 * device lets a block have its shared memory (32 at width 256: 134 KB; an sm_89 card allows 99 KB). 16-query
 * blocks run two an SM (ATT_G_MINB) and beat one 32-query block an SM (27B-16l q4 prefill +1.5% at 4k,
 * +3.7% at 16k, +5.6% at 32k; bench/cuda.md "Session 39"). Any choice gives every query the same bits, so
 * it may follow the rows and keys. */
static int attn_qb(const attn_core_args &a, int rows, int aligned, int nseq, int nH, int S) {
    if (!cu_set.att_group || !aligned || a.Dk != a.Dv || (a.Dk != 128 && a.Dk != 256)) return 0;
    const int q = rows * a.group;
    if (q <= 1) return 0;
    static const int cand[4] = {8, 6, 4, 2};
    int best = 0, waste = 1 << 30;
    for (int i = 0; i < 4; i++) {
        const int wq = (q + cand[i] - 1) / cand[i] * cand[i] - q;
        if (wq < waste) best = cand[i], waste = wq;
    }
    const long long per = (long long)(nH / a.group) * S * nseq; /* blocks a query block */
    const int all = cu_set.att_group == 2;
    if (!all && (q + best - 1) / best * per < cu_sm_count()) return 0;
    /* from 64 queries (prefill chunks) up to att_qb a block, while the grid still fills the GPU and at most
     * an eighth of the places are empty: each staged tile is then read once for 16 (or 32) queries instead of
     * 8 (the 27B at 16k keys: attention 45% of the prefill, bench/cuda.md "Session 36") */
    for (int big = cu_set.att_qb; big > 8 && q >= 64; big /= 2) {
        const int nb = (q + big - 1) / big;
        const bool fits = attn_g_big_smem(big, a.Dk) <= cu_smem_optin();
        if (fits && (nb * big - q) * 8 <= q && (all || nb * per >= cu_sm_count())) return big;
    }
    return best;
}

/* Lets kernel fn take more than 48 KB of dynamic shared memory (once a kernel), and, for minb blocks an SM
 * (ATT_G_MINB), the largest shared-memory carveout: the driver otherwise sizes it for one block. */
static void attn_g_allow(const void *fn, size_t smem, int minb) {
    if (smem > 48 * 1024)
        CU_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), "attention smem");
    if (minb > 1)
        CU_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared),
                 "attention carveout");
}

/* Launches instance <QB, D> of the grouped kernel template KERN (k_attn_core_g or k_attn_core_seqs_g) on
 * grid with the kernel's arguments; the first launch of each instance allows its shared memory. */
#define ATT_G_LAUNCH(KERN, QB, D, grid, ...)                                                                     \
    do {                                                                                                       \
        static int allowed_;                                                                                   \
        const size_t gs_ = attn_g_smem<QB, D>();                                                               \
        if (!__atomic_load_n(&allowed_, __ATOMIC_ACQUIRE)) {                                                   \
            attn_g_allow((const void *)KERN<QB, D>, gs_, ATT_G_MINB(QB));                                      \
            __atomic_store_n(&allowed_, 1, __ATOMIC_RELEASE);                                                  \
        }                                                                                                      \
        seq_launch(KERN<QB, D>, grid, ATT_WARPS * 32, gs_, __VA_ARGS__);                                       \
    } while (0)

/* The instance for qb queries a block (attn_qb) and head width D (128 or 256). */
#define ATT_G_SWITCH(KERN, qb, D, grid, ...)                                                                     \
    do {                                                                                                       \
        const int k_ = (qb) * 1000 + (D);                                                                      \
        if (k_ == 2128) ATT_G_LAUNCH(KERN, 2, 128, grid, __VA_ARGS__);                                         \
        else if (k_ == 4128) ATT_G_LAUNCH(KERN, 4, 128, grid, __VA_ARGS__);                                    \
        else if (k_ == 6128) ATT_G_LAUNCH(KERN, 6, 128, grid, __VA_ARGS__);                                    \
        else if (k_ == 8128) ATT_G_LAUNCH(KERN, 8, 128, grid, __VA_ARGS__);                                    \
        else if (k_ == 2256) ATT_G_LAUNCH(KERN, 2, 256, grid, __VA_ARGS__);                                    \
        else if (k_ == 4256) ATT_G_LAUNCH(KERN, 4, 256, grid, __VA_ARGS__);                                    \
        else if (k_ == 6256) ATT_G_LAUNCH(KERN, 6, 256, grid, __VA_ARGS__);                                    \
        else if (k_ == 16128) ATT_G_LAUNCH(KERN, 16, 128, grid, __VA_ARGS__);                                  \
        else if (k_ == 32128) ATT_G_LAUNCH(KERN, 32, 128, grid, __VA_ARGS__);                                  \
        else if (k_ == 16256) ATT_G_LAUNCH(KERN, 16, 256, grid, __VA_ARGS__);                                  \
        else if (k_ == 32256) ATT_G_LAUNCH(KERN, 32, 256, grid, __VA_ARGS__);                                  \
        else ATT_G_LAUNCH(KERN, 8, 256, grid, __VA_ARGS__);                                                    \
    } while (0)

/* Per-thread device buffer for the chunk partials (grown as needed; contents lost when it grows). */
static float *attn_part_buf(size_t floats) {
    static thread_local void *buf = NULL;
    static thread_local size_t cap = 0; /* bytes */
    cu_scratch_grow(&buf, &cap, floats * sizeof(float), ((size_t)1 << 18) * sizeof(float), "attention partials");
    return (float *)buf;
}

/* Per-thread device counters for attn_merge_last, at least n ints, zero (zeroed when they grow; each
 * launch leaves them zero). */
static int *attn_count_buf(size_t n) {
    static thread_local void *buf = NULL;
    static thread_local size_t cap = 0; /* bytes */
    if (n * sizeof(int) > cap) {
        cu_scratch_grow(&buf, &cap, n * sizeof(int), (size_t)4096 * sizeof(int), "attention merge counters");
        /* graph-safe: cu_scratch_grow has called cu_graph_break */
        CU_CHECK(cudaMemsetAsync(buf, 0, cap, CU_STREAM), "attention merge counters");
    }
    return (int *)buf;
}

/* The launches of a call whose longest query sees max_keys keys (nseq sequences of at most maxR rows,
 * nH query heads): returns S, the chunks a query may have; *seqs sequences and *group rows per launch,
 * so that a launch's grid has at most 65,535 (sequence, chunk) pairs and its partials fit
 * ATT_PART_BUDGET; *part gets the buffer (NULL when no query has more than one chunk). */
static int attn_split(int max_keys, int maxR, int nseq, int nH, int Dv, float **part, int *seqs, int *group) {
    int S = (max_keys + ATT_CHUNK - 1) / ATT_CHUNK;
    *part = NULL, *seqs = nseq, *group = maxR;
    if (S <= 1) return 1;
    size_t per = (size_t)nH * S * (Dv + 2); /* floats of one row of one sequence */
    size_t ns = (size_t)nseq, by_grid = 65535 / (size_t)S, by_mem = ATT_PART_BUDGET / per;
    if (ns > by_grid) ns = by_grid;
    if (ns > by_mem) ns = by_mem;
    if (ns < 1) ns = 1;
    size_t g = ATT_PART_BUDGET / (per * ns);
    *seqs = (int)ns;
    *group = g < 1 ? 1 : g < (size_t)maxR ? (int)g : maxR;
    *part = attn_part_buf(per * ns * (size_t)*group);
    return S;
}

static void attn_core(attn_core_args a, const kv_view &kv, int R, int nH) {
    if (a.Dv > 32 * ATT_MAXO) cu_check(cudaErrorInvalidValue, "attention: value heads wider than 256");
    size_t smem = sizeof(float) * ((size_t)a.Dk + ATT_WARPS * (size_t)(a.Dv + 3)); /* attn_core_body */
    int group, ns;
    a.S = attn_split(a.pos0 + R, R, 1, nH, a.Dv, &a.part, &ns, &group);
    a.rows = group, a.heads = nH, a.z0 = 0;
    for (a.t0 = 0; a.t0 < R; a.t0 += group) {
        int rows = R - a.t0 < group ? R - a.t0 : group, qb = attn_qb(a, rows, ((uintptr_t)kv.k | (uintptr_t)kv.v) % 16 == 0, 1, nH, a.S);
        if (qb) {
            dim3 grid((rows * a.group + qb - 1) / qb, nH / a.group, a.S);
            ATT_G_SWITCH(k_attn_core_g, qb, a.Dk, grid, a, kv, rows);
        } else {
            seq_launch(k_attn_core, dim3(rows, nH, a.S), ATT_WARPS * 32, smem, a, kv);
        }
        CU_LAUNCHED("attention");
        if (a.S > 1) {
            seq_launch(k_attn_merge, dim3(rows, nH), 128, 0, a);
            CU_LAUNCHED("attention merge");
        }
    }
}

void cu_attention(be_backend *be, const be_attn_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch) {
    CU_PROF("attention");
    (void)scratch;
    if (R <= 0) return;
    cu_ctx *c = cu_of(be);
    int Dh = a->head_dim, rd = a->rotary_dim;
    kv_view v = kv_view_of(c, kv, a->n_kv_heads, Dh, Dh);
    attn_prep_args p = {a->big, a->ldb, a->q_stride, a->k_off, a->v_off, a->n_heads, a->n_kv_heads, Dh, rd, pos0,
                        cu_vec(c, a->inv_freq, sizeof(float) * (rd / 2 > 0 ? rd / 2 : 1)),
                        cu_vec(c, a->q_norm, sizeof(float) * Dh), cu_vec(c, a->k_norm, sizeof(float) * Dh),
                        a->rope_factor, a->eps};
    seq_launch(k_attn_prep, dim3(R, a->n_heads + a->n_kv_heads), ATT_PREP_THREADS, sizeof(float) * Dh, p, v);
    CU_LAUNCHED("attention prep");
    attn_core_args q = {a->big, a->ldb, 0, a->q_stride, a->att_off, a->n_heads / a->n_kv_heads, Dh, Dh, a->gated,
                        pos0, a->scale, NULL, 1, 0, R, a->n_heads, 0};
    attn_core(q, v, R, a->n_heads);
}

/* ------------------------------------------------------------------ MLA */

typedef struct {
    float *rows;
    int ldr, q_off, ckv_off, kvb_off, n_heads, Dn, Dr, Dv, kv_lora, interleave, pos0;
    const float *inv_freq;
    float rope_factor;
} mla_prep_args;

/* Rotate pair i of x (Dr dims): NeoX halves (i, i + Dr/2) or interleaved (2i, 2i + 1). */
__device__ __forceinline__ void rope_pair(float *x, int i, int Dr, int inter, float c, float s) {
    int i1 = inter ? 2 * i : i, i2 = inter ? 2 * i + 1 : i + Dr / 2;
    float x1 = x[i1], x2 = x[i2];
    x[i1] = x1 * c - x2 * s;
    x[i2] = x2 * c + x1 * s;
}

/* Block t: RoPE of row t's shared rope key and of every query head's rope part, then each head's
 * key [nope | rope] and value into the cache at pos0 + t. */
__device__ __forceinline__ void mla_prep_body(const mla_prep_args &a, const kv_view &kv, int t) {
    int pos = a.pos0 + t, Dr = a.Dr, half = Dr / 2, Dk = a.Dn + Dr;
    float *row = a.rows + (size_t)t * a.ldr, *kr = row + a.ckv_off + a.kv_lora;
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float c, s;
        rope_cs(a.inv_freq, i, pos, a.rope_factor, &c, &s);
        rope_pair(kr, i, Dr, a.interleave, c, s);
    }
    for (int x = threadIdx.x; x < a.n_heads * half; x += blockDim.x) {
        int h = x / half, i = x % half;
        float c, s;
        rope_cs(a.inv_freq, i, pos, a.rope_factor, &c, &s);
        rope_pair(row + a.q_off + (size_t)h * Dk + a.Dn, i, Dr, a.interleave, c, s);
    }
    __syncthreads();
    for (int h = 0; h < a.n_heads; h++) {
        const float *kvb = row + a.kvb_off + (size_t)h * (a.Dn + a.Dv);
        float *kd = kv.k + kv_slot(kv, h, pos, Dk), *vd = kv.v + kv_slot(kv, h, pos, a.Dv);
        for (int i = threadIdx.x; i < Dk; i += blockDim.x) kd[i] = i < a.Dn ? kvb[i] : kr[i - a.Dn];
        for (int i = threadIdx.x; i < a.Dv; i += blockDim.x) vd[i] = kvb[a.Dn + i];
    }
}

__global__ void k_mla_prep(mla_prep_args a, kv_view kv) {
    CU_PDL_ENTRY();
    mla_prep_body(a, kv, blockIdx.x);
}

void cu_mla(be_backend *be, const be_mla_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch) {
    CU_PROF("mla");
    (void)scratch;
    if (R <= 0) return;
    cu_ctx *c = cu_of(be);
    int Dk = a->nope_dim + a->rope_dim;
    kv_view v = kv_view_of(c, kv, a->n_heads, Dk, a->v_dim);
    mla_prep_args p = {a->rows, a->ldr, a->q_off, a->ckv_off, a->kvb_off, a->n_heads, a->nope_dim, a->rope_dim,
                       a->v_dim, a->kv_lora, a->interleave, pos0,
                       cu_vec(c, a->inv_freq, sizeof(float) * (a->rope_dim / 2 > 0 ? a->rope_dim / 2 : 1)),
                       a->rope_factor};
    seq_launch(k_mla_prep, dim3(R), 128, 0, p, v);
    CU_LAUNCHED("mla prep");
    attn_core_args q = {a->rows, a->ldr, a->q_off, Dk, a->att_off, 1, Dk, a->v_dim, 0, pos0, a->scale};
    attn_core(q, v, R, a->n_heads);
}

/* ------------------------------------------------------------------ Gated DeltaNet */

/* The state update of one element, shared by the step and the replay: g·s + d·k rounded as two
 * products and a sum (no FMA contraction), so both give the same bits. */
__device__ __forceinline__ float gdn_upd(float s, float g, float d, float k) {
    return __fadd_rn(__fmul_rn(g, s), __fmul_rn(d, k));
}

/* Block (t, x): L2-normalised q (x < Hk, × Dk^-½) or k (x >= Hk) head of row t. */
__device__ __forceinline__ void gdn_l2_body(const float *big, int ldb, int u_off, int Hk, int Dk, float *qn, float *kn,
                                            int t, int x) {
    __shared__ float sh[33];
    int is_k = x >= Hk, h = x % Hk, kd = Hk * Dk;
    const float *src = big + (size_t)t * ldb + u_off + (is_k ? kd : 0) + (size_t)h * Dk;
    float *dst = (is_k ? kn : qn) + (size_t)t * kd + (size_t)h * Dk;
    float s = 0.f;
    for (int i = threadIdx.x; i < Dk; i += blockDim.x) s = fmaf(src[i], src[i], s);
    float inv = 1.0f / sqrtf(cu_block_sum(s, sh) + 1e-6f), mul = is_k ? 1.0f : 1.0f / sqrtf((float)Dk);
    for (int i = threadIdx.x; i < Dk; i += blockDim.x) dst[i] = (src[i] * inv) * mul;
}

__global__ void k_gdn_l2(const float *big, int ldb, int u_off, int Hk, int Dk, float *qn, float *kn) {
    CU_PDL_ENTRY();
    gdn_l2_body(big, ldb, u_off, Hk, Dk, qn, kn, blockIdx.x, blockIdx.y);
}

typedef struct {
    float *big;
    int ldb, b_off, a_off, u_off, y_off, Hk, Hv, Dk, Dv, R;
    const float *neg_A, *dt_bias, *norm;
    float eps;
    const float *src;
    float *qn, *kn; /* read, or with gdn_reg_body's L2 written */
    float *dst, *tape_g, *tape_d;
    int split;      /* blocks per value head of the register step (gdn_split); 1 for the others */
    int xp;         /* 1: the register step's warp sums by warp_sum8 (cu_set.gdn_xpose), 0: by butterflies */
    cu_prep_out prep; /* the normalised outputs prepared for the out-projection too (cu_prep_from), or kind 0 */
    int prep_r0;      /* the prepared rows' index of this call's row 0 */
} gdn_k_args;

/* Block hv: value head hv's rows in order. Thread i owns value row i of the state, kept transposed
 * in shared memory (S_T[j][i], conflict-free), then the gated RMSNorm of each row's output. */
__device__ __forceinline__ void gdn_smem_body(const gdn_k_args &a, int hv) {
    extern __shared__ float sm[];
    __shared__ float sh[33];
    int i = threadIdx.x, Dk = a.Dk, Dv = a.Dv, kd = a.Hk * Dk, hk = hv / (a.Hv / a.Hk);
    float *S = sm, *qs = sm + (size_t)Dk * Dv, *ks = qs + Dk;
    const float *src = a.src + (size_t)hv * Dv * Dk;
    for (int x = threadIdx.x; x < Dv * Dk; x += blockDim.x) S[(x % Dk) * Dv + x / Dk] = src[x];
    for (int t = 0; t < a.R; t++) {
        __syncthreads();
        for (int j = threadIdx.x; j < Dk; j += blockDim.x) {
            qs[j] = a.qn[(size_t)t * kd + (size_t)hk * Dk + j];
            ks[j] = a.kn[(size_t)t * kd + (size_t)hk * Dk + j];
        }
        __syncthreads();
        float *row = a.big + (size_t)t * a.ldb;
        float beta = cu_sigmoid(row[a.b_off + hv]);
        float sp = row[a.a_off + hv] + a.dt_bias[hv];
        sp = sp > 20.0f ? sp : log1pf(expf(sp));
        float g = expf(a.neg_A[hv] * sp);
        if (a.tape_g && i == 0) a.tape_g[(size_t)t * a.Hv + hv] = g;
        float y = 0.f;
        if (i < Dv) {
            float kv = 0.f;
            for (int j = 0; j < Dk; j++) kv = fmaf(S[j * Dv + i], ks[j], kv);
            float d = beta * (row[a.u_off + 2 * kd + hv * Dv + i] - g * kv);
            for (int j = 0; j < Dk; j++) {
                float s = gdn_upd(S[j * Dv + i], g, d, ks[j]);
                S[j * Dv + i] = s;
                y = fmaf(s, qs[j], y);
            }
            if (a.tape_d) a.tape_d[((size_t)t * a.Hv + hv) * Dv + i] = d;
        }
        float inv = 1.0f / sqrtf(cu_block_sum(i < Dv ? y * y : 0.f, sh) / (float)Dv + a.eps);
        if (i < Dv) row[a.y_off + hv * Dv + i] = ((y * inv) * a.norm[i]) * cu_silu(row[hv * Dv + i]);
    }
    __syncthreads();
    float *dst = a.dst + (size_t)hv * Dv * Dk;
    for (int x = threadIdx.x; x < Dv * Dk; x += blockDim.x) dst[x] = S[(x % Dk) * Dv + x / Dk];
}

__global__ void k_gdn(gdn_k_args a) {
    CU_PDL_ENTRY();
    gdn_smem_body(a, blockIdx.x);
}

/* The same step with the state in registers: warp w of value head hv owns value rows 8w .. 8w+7, lane l
 * holds S[i][l + 32m] (m < JK = Dk / 32) of each, read and written coalesced. Per row: kv_i and y_i are
 * a lane partial (FMA over m) then a warp butterfly, the update is gdn_upd (so the replay matches bit
 * for bit), then the gated RMSNorm over the head (cu_block_sum). Dk a multiple of 32 up to 128, Dv <= 128
 * (GDN_REG_THREADS).
 * FUSED = 1: block hv holds the whole head and normalises each row's output itself. FUSED = 0: the head's
 * warps are cut into a.split blocks (block hv·split + p takes warps p·ceil(W / split) .. of the head's W),
 * which write the raw outputs; k_gdn_norm then normalises them with the fused step's arithmetic. A value
 * row's numbers never leave its warp, so both give the same bits; the cut spreads a long prompt's or a
 * verify's row chain over more multiprocessors (one block per head used 48 of 132 on the 27B shape, each
 * issuing 16 warps' ~850 instructions a row: bench/cuda.md, "Session 14").
 * L2 = 1: the row's q and k are L2-normalised here from the conv output (gdn_l2_fused) instead of read
 * from qn / kn, which the block of the key head's first value head then writes (the tape and the
 * commit read kn): one launch fewer per GDN step, the same bits as k_gdn_l2. */
#define GDN_RPW 8 /* value rows per warp (warp_sum8 sums 8 values) */
#define GDN_PC 8  /* rows whose q / k norms and gates a GDN block computes ahead of the recurrence */
#define GDN_PB 4  /* of those, the rows a warp loads before it normalises any when Dk <= 64 (2·JK + 2 registers
                   * each; half as many for Dk of 96 / 128, whose 4 spilled) */
static_assert(GDN_RPW == 8, "gdn_reg_body's warp sums take 8 rows");
#define GDN_REG_THREADS 512 /* the register kernel's largest block (value heads up to 16 · GDN_RPW = 128 wide): its
                             * launch bounds, so the compiler keeps a thread's registers within what 512 threads
                             * may hold (the state, the row in flight and the next row's inputs) */

#define CU_FULL 0xffffffffu

/* The warp's 32-lane sums of 8 values a lane with 9 shuffles where 8 xor butterflies (v += shfl_xor(v,
 * o), o = 16 .. 1) take 40, and the same bits: at o = 16, 8 and 4 a lane keeps the half of its values
 * that its lane bit picks and adds the partner's value of each (the butterfly's pair, in its order),
 * so lane L ends with the sum of value 4·L₄ + 2·L₃ + L₂ (its lane bits 4, 3, 2), which o = 2, 1 finish.
 * Returns that sum (warp_sum8_lane says which lane holds value r). */
__device__ __forceinline__ float warp_sum8_spread(const float *v, int lane) {
    const bool h4 = lane & 16, h3 = lane & 8, h2 = lane & 4;
    float a[4], b[2];
#pragma unroll
    for (int j = 0; j < 4; j++) a[j] = (h4 ? v[j + 4] : v[j]) + __shfl_xor_sync(CU_FULL, h4 ? v[j] : v[j + 4], 16);
#pragma unroll
    for (int j = 0; j < 2; j++) b[j] = (h3 ? a[j + 2] : a[j]) + __shfl_xor_sync(CU_FULL, h3 ? a[j] : a[j + 2], 8);
    float c = (h2 ? b[1] : b[0]) + __shfl_xor_sync(CU_FULL, h2 ? b[0] : b[1], 4);
    c += __shfl_xor_sync(CU_FULL, c, 2);
    return c + __shfl_xor_sync(CU_FULL, c, 1);
}

/* The lowest lane holding value r's sum after warp_sum8_spread. */
__device__ __forceinline__ int warp_sum8_lane(int r) { return (r >> 2 & 1) << 4 | (r >> 1 & 1) << 3 | (r & 1) << 2; }

/* v[r] -> its 32-lane sum s[r] on every lane, the bits of 8 butterflies: warp_sum8_spread, then each
 * sum read from a lane holding it (17 shuffles). */
__device__ __forceinline__ void warp_sum8(const float *v, float *s, int lane) {
    const float c = warp_sum8_spread(v, lane);
#pragma unroll
    for (int r = 0; r < 8; r++) s[r] = __shfl_sync(CU_FULL, c, warp_sum8_lane(r));
}

/* gdn_l2_vals for q and k at once with warp_sum8 (the same bits): the 2·JK squares' sums, zeros up to 8. */
template <int JK>
__device__ __forceinline__ void gdn_l2_vals2(const float *xq, float mulq, float *outq, const float *xk, float *outk,
                                             int lane) {
    float v[8], sm[8];
#pragma unroll
    for (int m = 0; m < 4; m++) v[m] = m < JK ? fmaf(xq[m], xq[m], 0.f) : 0.f, v[4 + m] = m < JK ? fmaf(xk[m], xk[m], 0.f) : 0.f;
    warp_sum8(v, sm, lane);
    float tq = 0.f, tk = 0.f;
#pragma unroll
    for (int m = 0; m < 4; m++) tq += sm[m], tk += sm[4 + m];
    const float iq = 1.0f / sqrtf(tq + 1e-6f), ik = 1.0f / sqrtf(tk + 1e-6f);
#pragma unroll
    for (int m = 0; m < JK; m++) outq[m] = (xq[m] * iq) * mulq, outk[m] = (xk[m] * ik) * 1.0f;
}

/* Lane l's share of the L2-normalised head (Dk = 32·JK floats; the lane's entries l + 32m in x[m]) into out[m],
 * × mul: k_gdn_l2's arithmetic with its 128 threads (Dk <= 128: thread i owns entry i, so warp m holds
 * entries 32m..32m+31): each entry's square, the same butterfly per warp, the warp sums added in warp
 * order to 0 (warps past JK add their zero), then (x · inv) · mul. Every warp calls it whole. */
template <int JK>
__device__ __forceinline__ void gdn_l2_vals(const float *x, float mul, float *out) {
    float tot = 0.f;
#pragma unroll
    for (int m = 0; m < 4; m++) {
        float v = 0.f;
        if (m < JK) {
            v = fmaf(x[m], x[m], 0.f);
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        }
        tot += v;
    }
    float inv = 1.0f / sqrtf(tot + 1e-6f);
#pragma unroll
    for (int m = 0; m < JK; m++) out[m] = (x[m] * inv) * mul;
}

/* Row t of value head hv from its raw q / k (the lane's entries l + 32m) and gate inputs:
 * q and k L2-normalised when L2 (taped to qn / kn by the key head's first block), else as read, into
 * pq / pk; beta and g into pbg (g taped by the head's first block). */
template <int JK, int L2>
__device__ __forceinline__ void gdn_prep_row(const gdn_k_args &a, const float *nq, const float *nk, float braw, float araw,
                                             int t, int hv, int hk, int part, int tape_qk, float dtb, float nA, int lane,
                                             float *pq, float *pk, float *pbg) {
    const int Dk = a.Dk, kd = a.Hk * Dk;
    float qr[JK], kr[JK];
    if (L2) {
        if (a.xp) {
            gdn_l2_vals2<JK>(nq, 1.0f / sqrtf((float)Dk), qr, nk, kr, lane);
        } else {
            gdn_l2_vals<JK>(nq, 1.0f / sqrtf((float)Dk), qr);
            gdn_l2_vals<JK>(nk, 1.0f, kr);
        }
        if (tape_qk) {
#pragma unroll
            for (int m = 0; m < JK; m++) {
                a.qn[(size_t)t * kd + (size_t)hk * Dk + lane + 32 * m] = qr[m];
                a.kn[(size_t)t * kd + (size_t)hk * Dk + lane + 32 * m] = kr[m];
            }
        }
    } else {
#pragma unroll
        for (int m = 0; m < JK; m++) kr[m] = nk[m], qr[m] = nq[m];
    }
#pragma unroll
    for (int m = 0; m < JK; m++) pq[lane + 32 * m] = qr[m], pk[lane + 32 * m] = kr[m];
    if (lane == 0) {
        float sp = araw + dtb;
        sp = sp > 20.0f ? sp : log1pf(expf(sp));
        const float g = expf(nA * sp);
        pbg[0] = cu_sigmoid(braw), pbg[1] = g;
        if (a.tape_g && part == 0) a.tape_g[(size_t)t * a.Hv + hv] = g;
    }
}

template <int JK, int L2, int FUSED>
__device__ __forceinline__ void gdn_reg_body(const gdn_k_args &a, int bx) {
    __shared__ float yv[FUSED ? 32 * GDN_RPW : 1];
    __shared__ float sh[33];
    const int hv = FUSED ? bx : bx / a.split, part = FUSED ? 0 : bx - hv * a.split;
    const int wpb = FUSED ? 0 : ((a.Dv + GDN_RPW - 1) / GDN_RPW + a.split - 1) / a.split; /* warps a block */
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, Dk = a.Dk, Dv = a.Dv;
    int kd = a.Hk * Dk, hk = hv / (a.Hv / a.Hk), i0 = (part * wpb + w) * GDN_RPW;
    float S[GDN_RPW][JK];
    const float *src = a.src + (size_t)hv * Dv * Dk;
#pragma unroll
    for (int r = 0; r < GDN_RPW; r++)
#pragma unroll
        for (int m = 0; m < JK; m++) S[r][m] = i0 + r < Dv ? src[(size_t)(i0 + r) * Dk + lane + 32 * m] : 0.f;
    /* Each chunk of up to GDN_PC rows first has its q / k normalised and its beta / g computed, a row a
     * warp, into shared memory (none of it depends on the state: taken off the rows' dependent chain,
     * and done once a block instead of by every warp); then the rows run in order. A warp loads the raw
     * inputs of up to GDN_PB of its chunk rows before it normalises any, and the chunk's value inputs
     * (its own 8 value rows) and z gates go to shared memory with them, so a chunk costs about one round
     * trip to L2 instead of one per row and per step (same arithmetic either way). */
    const float dtb = a.dt_bias[hv], nA = a.neg_A[hv];
    __shared__ float pq[GDN_PC][32 * JK], pk[GDN_PC][32 * JK], pbg[GDN_PC][2];
    __shared__ float pu[GDN_REG_THREADS / 32][GDN_PC][GDN_RPW], pz[FUSED ? GDN_PC : 1][FUSED ? 32 * GDN_RPW : 1];
    const int nwarps = blockDim.x >> 5, tape_qk = part == 0 && hv % (a.Hv / a.Hk) == 0;
    auto prep_rows = [&](int c0, int pc) { /* rows c0 .. c0 + pc - 1 into pq / pk / pbg / pu / pz */
        __syncthreads(); /* the previous chunk's rows have been read */
#pragma unroll
        for (int h = 0; h < GDN_PC / 4; h++) { /* lane l: value i0 + l % 8 of chunk row 4h + l / 8 */
            const int tt = 4 * h + (lane >> 3), r = lane & 7;
            if (tt < pc) pu[w][tt][r] = i0 + r < Dv ? a.big[(size_t)(c0 + tt) * a.ldb + a.u_off + 2 * kd + hv * Dv + i0 + r] : 0.f;
        }
        if (FUSED && (int)threadIdx.x < 32 * GDN_RPW) {
#pragma unroll
            for (int tt = 0; tt < GDN_PC; tt++)
                if (tt < pc) pz[tt][threadIdx.x] = (int)threadIdx.x < Dv ? a.big[(size_t)(c0 + tt) * a.ldb + hv * Dv + threadIdx.x] : 0.f;
        }
        constexpr int PB = JK <= 2 ? GDN_PB : GDN_PB / 2;
        for (int j0 = w; j0 < pc; j0 += PB * nwarps) {
            float nq[PB][JK], nk[PB][JK], braw[PB], araw[PB];
#pragma unroll
            for (int b = 0; b < PB; b++) { /* every load first (a row past the chunk reads row c0) */
                const int tt = j0 + b * nwarps, t = c0 + (tt < pc ? tt : 0);
                const float *row = a.big + (size_t)t * a.ldb;
                const float *qs = L2 ? row + a.u_off + (size_t)hk * Dk : a.qn + (size_t)t * kd + (size_t)hk * Dk;
                const float *ks = L2 ? qs + kd : a.kn + (size_t)t * kd + (size_t)hk * Dk;
#pragma unroll
                for (int m = 0; m < JK; m++) nq[b][m] = qs[lane + 32 * m], nk[b][m] = ks[lane + 32 * m];
                braw[b] = row[a.b_off + hv], araw[b] = row[a.a_off + hv];
            }
#pragma unroll
            for (int b = 0; b < PB; b++) {
                const int tt = j0 + b * nwarps, t = c0 + tt;
                if (tt >= pc) break; /* warp-uniform */
                gdn_prep_row<JK, L2>(a, nq[b], nk[b], braw[b], araw[b], t, hv, hk, part, tape_qk, dtb, nA, lane, pq[tt],
                                     pk[tt], pbg[tt]);
            }
        }
        __syncthreads();
    };
    for (int t = 0; t < a.R; t++) {
        float *row = a.big + (size_t)t * a.ldb;
        const int tt = t % GDN_PC;
        if (tt == 0) prep_rows(t, a.R - t < GDN_PC ? a.R - t : GDN_PC);
        float kr[JK], qr[JK], nu[GDN_RPW];
#pragma unroll
        for (int m = 0; m < JK; m++) kr[m] = pk[tt][lane + 32 * m], qr[m] = pq[tt][lane + 32 * m];
#pragma unroll
        for (int r = 0; r < GDN_RPW; r++) nu[r] = pu[w][tt][r];
        const float beta = pbg[tt][0], g = pbg[tt][1];
        /* the warp's GDN_RPW value rows are independent chains: each phase runs them side by side (a row
         * past Dv holds zeros and stores nothing), so their butterflies overlap instead of queueing; every
         * row's numbers are those of one row at a time */
        float kv[GDN_RPW], d[GDN_RPW], y[GDN_RPW];
#pragma unroll
        for (int r = 0; r < GDN_RPW; r++) {
            kv[r] = 0.f;
#pragma unroll
            for (int m = 0; m < JK; m++) kv[r] = fmaf(S[r][m], kr[m], kv[r]);
        }
        if (a.xp) {
            float kp[GDN_RPW];
#pragma unroll
            for (int r = 0; r < GDN_RPW; r++) kp[r] = kv[r];
            warp_sum8(kp, kv, lane);
        } else {
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int r = 0; r < GDN_RPW; r++) kv[r] += __shfl_xor_sync(0xffffffffu, kv[r], o);
        }
#pragma unroll
        for (int r = 0; r < GDN_RPW; r++) {
            d[r] = beta * (nu[r] - g * kv[r]);
            y[r] = 0.f;
#pragma unroll
            for (int m = 0; m < JK; m++) {
                S[r][m] = gdn_upd(S[r][m], g, d[r], kr[m]);
                y[r] = fmaf(S[r][m], qr[m], y[r]);
            }
        }
        /* xp: lane warp_sum8_lane(r) stores row r's sums; else every lane holds every sum and lane r does */
        int ro = lane;
        if (a.xp) {
            y[0] = warp_sum8_spread(y, lane);
            ro = (lane & 3) ? GDN_RPW : 4 * (lane >> 4 & 1) + 2 * (lane >> 3 & 1) + (lane >> 2 & 1);
        } else {
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int r = 0; r < GDN_RPW; r++) y[r] += __shfl_xor_sync(0xffffffffu, y[r], o);
        }
        if (ro < GDN_RPW && i0 + ro < Dv) {
            float yo = y[0], dd = d[0];
#pragma unroll
            for (int r = 1; r < GDN_RPW; r++)
                if (ro == r) yo = a.xp ? yo : y[r], dd = d[r];
            const int i = i0 + ro;
            if (FUSED) yv[i] = yo;
            else row[a.y_off + hv * Dv + i] = yo; /* raw: k_gdn_norm normalises it */
            if (a.tape_d) a.tape_d[((size_t)t * a.Hv + hv) * Dv + i] = dd;
        }
        if (!FUSED) continue;
        const float zg = (int)threadIdx.x < 32 * GDN_RPW ? pz[tt][threadIdx.x] : 0.f;
        __syncthreads();
        int i = threadIdx.x;
        float yi = i < Dv ? yv[i] : 0.f;
        float inv = 1.0f / sqrtf(cu_block_sum(yi * yi, sh) / (float)Dv + a.eps);
        const float out = i < Dv ? ((yi * inv) * a.norm[i]) * cu_silu(zg) : 0.f;
        if (i < Dv) row[a.y_off + hv * Dv + i] = out;
        if (a.prep.kind) cu_prep_from(a.prep, row + a.y_off + hv * Dv, Dv, hv * Dv, a.prep_r0 + t);
        __syncthreads();
    }
    float *dst = a.dst + (size_t)hv * Dv * Dk;
#pragma unroll
    for (int r = 0; r < GDN_RPW; r++)
#pragma unroll
        for (int m = 0; m < JK; m++)
            if (i0 + r < Dv) dst[(size_t)(i0 + r) * Dk + lane + 32 * m] = S[r][m];
}

template <int JK, int L2, int FUSED>
__global__ void __launch_bounds__(GDN_REG_THREADS) k_gdn_reg(gdn_k_args a) {
    CU_PDL_ENTRY();
    gdn_reg_body<JK, L2, FUSED>(a, blockIdx.x);
}

/* Block (t, hv): the gated RMSNorm of value head hv's raw output in row t (the split step's), with the
 * fused step's arithmetic: thread i < Dv holds y_i, the same warp sums (the fused block's warps past Dv
 * add zero) in the same order, then ((y·inv)·norm)·silu(z). Threads: (Dv + 31) / 32 · 32. */
__device__ __forceinline__ void gdn_norm_body(float *big, int ldb, int y_off, int Dv, const float *norm, float eps, int t,
                                              int hv, const cu_prep_out &prep, int prow) {
    __shared__ float sh[33];
    const int i = threadIdx.x;
    float *row = big + (size_t)t * ldb;
    const float yi = i < Dv ? row[y_off + hv * Dv + i] : 0.f, zg = i < Dv ? row[hv * Dv + i] : 0.f;
    const float inv = 1.0f / sqrtf(cu_block_sum(yi * yi, sh) / (float)Dv + eps);
    const float out = i < Dv ? ((yi * inv) * norm[i]) * cu_silu(zg) : 0.f;
    if (i < Dv) row[y_off + hv * Dv + i] = out;
    if (prep.kind) cu_prep_from(prep, row + y_off + hv * Dv, Dv, hv * Dv, prow); /* prow: row t of the prepared rows */
}

__global__ void k_gdn_norm(float *big, int ldb, int y_off, int Dv, const float *norm, float eps, cu_prep_out prep) {
    CU_PDL_ENTRY();
    gdn_norm_body(big, ldb, y_off, Dv, norm, eps, blockIdx.x, blockIdx.y, prep, blockIdx.x);
}

/* Blocks per value head for the register step (gdn_reg_body): $MTPLX_CUDA_GDN_SPLIT when set (capped at
 * one warp a block), else the least power of two that gives the call's heads (Hv per sequence, n
 * sequences) at least one block per multiprocessor, for calls of at least 2 rows a sequence (a 1-row
 * step keeps its fused norm: no extra launch). Any choice gives the same bits (gdn_reg_body). */
static int gdn_split(int Hv, int Dv, int n, int max_rows) {
    int W = (Dv + GDN_RPW - 1) / GDN_RPW, s = 1;
    if (cu_set.gdn_split) return cu_set.gdn_split < W ? cu_set.gdn_split : W;
    if (max_rows < 2) return 1;
    while (2 * s <= W && (long long)Hv * n * s < cu_sm_count()) s *= 2;
    return s;
}

static size_t gdn_smem(int Dk, int Dv) { return sizeof(float) * ((size_t)Dk * Dv + 2 * (size_t)Dk); }

static void gdn_smem_allow(const void *fn, size_t smem) {
    if (smem > 48 * 1024) CU_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                                   "gdn shared memory");
}

/* 0 when $MTPLX_CUDA_GDN=0: the shared-memory kernel k_gdn for every head shape (a comparison knob). */
static int gdn_reg_on(void) { return cu_set.gdn_reg; }

void cu_gdn(be_backend *be, const be_gdn_args *a, int R) {
    CU_PROF("gdn");
    if (R <= 0) return;
    cu_ctx *c = cu_of(be);
    int Hk = a->Hk, Dk = a->Dk;
    gdn_k_args k = {a->big, a->ldb, a->b_off, a->a_off, a->u_off, a->y_off, Hk, a->Hv, Dk, a->Dv, R,
                    cu_vec(c, a->neg_A, sizeof(float) * a->Hv), cu_vec(c, a->dt_bias, sizeof(float) * a->Hv),
                    cu_vec(c, a->norm, sizeof(float) * a->Dv), a->eps, a->src, a->qn, a->kn, a->dst, a->tape_g,
                    a->tape_d, 1, cu_set.gdn_xpose};
    int JK = Dk / 32, warps = (a->Dv + GDN_RPW - 1) / GDN_RPW;
    if (Dk % 32 == 0 && JK >= 1 && JK <= 4 && a->Dv <= GDN_REG_THREADS / 32 * GDN_RPW && gdn_reg_on()) {
        /* the register kernel, q / k normalised inside: warps rows-of-8 each; fused, at least one full warp
         * for the block sums; split, a block's share of the warps, then the norm launch */
        k.split = gdn_split(a->Hv, a->Dv, 1, R);
        const int fused = k.split == 1;
        cu_prep_begin(a->big + a->y_off, a->ldb, R, a->Hv * a->Dv, a->Dv, &k.prep);
        int threads = fused ? 32 * (warps > (a->Dv + 31) / 32 ? warps : (a->Dv + 31) / 32)
                            : 32 * ((warps + k.split - 1) / k.split);
        if (!cu_set.gdn_l2) {
            seq_launch(k_gdn_l2, dim3(R, 2 * Hk), 128, 0, (const float *)a->big, a->ldb, a->u_off, Hk, Dk, a->qn, a->kn);
            CU_LAUNCHED("gdn l2norm");
        }
        const dim3 g(a->Hv * k.split);
#define GDN_F(JK_, L2_) fused ? seq_launch(k_gdn_reg<JK_, L2_, 1>, g, threads, 0, k) \
                              : seq_launch(k_gdn_reg<JK_, L2_, 0>, g, threads, 0, k)
#define GDN_L(JK_) cu_set.gdn_l2 ? GDN_F(JK_, 1) : GDN_F(JK_, 0)
        switch (JK) {
        case 1: GDN_L(1); break;
        case 2: GDN_L(2); break;
        case 3: GDN_L(3); break;
        default: GDN_L(4); break;
        }
#undef GDN_L
#undef GDN_F
        CU_LAUNCHED("gdn");
        if (!fused) {
            seq_launch(k_gdn_norm, dim3(R, a->Hv), (a->Dv + 31) / 32 * 32, 0, a->big, a->ldb, a->y_off, a->Dv, k.norm,
                       a->eps, k.prep);
            CU_LAUNCHED("gdn norm");
        }
        cu_prep_done(&k.prep, a->big + a->y_off, a->ldb);
        return;
    }
    seq_launch(k_gdn_l2, dim3(R, 2 * Hk), 128, 0, (const float *)a->big, a->ldb, a->u_off, Hk, Dk, a->qn, a->kn);
    CU_LAUNCHED("gdn l2norm");
    size_t smem = gdn_smem(Dk, a->Dv);
    gdn_smem_allow((const void *)k_gdn, smem);
    int threads = (a->Dv + 31) / 32 * 32;
    seq_launch(k_gdn, dim3(a->Hv), threads, smem, k);
    CU_LAUNCHED("gdn");
}

/* Block hv: the state before the call, then the first `keep` taped updates, into dst. */
__global__ void k_gdn_replay(float *dst, const float *start, const float *tape_k, const float *tape_g,
                             const float *tape_d, int keep, int Hk, int Hv, int Dk, int Dv) {
    CU_PDL_ENTRY();
    extern __shared__ float sm[];
    int hv = blockIdx.x, i = threadIdx.x, kd = Hk * Dk, hk = hv / (Hv / Hk);
    float *S = sm, *ks = sm + (size_t)Dk * Dv;
    const float *src = start + (size_t)hv * Dv * Dk;
    for (int x = threadIdx.x; x < Dv * Dk; x += blockDim.x) S[(x % Dk) * Dv + x / Dk] = src[x];
    for (int t = 0; t < keep; t++) {
        __syncthreads();
        for (int j = threadIdx.x; j < Dk; j += blockDim.x) ks[j] = tape_k[(size_t)t * kd + (size_t)hk * Dk + j];
        __syncthreads();
        if (i < Dv) {
            float g = tape_g[(size_t)t * Hv + hv], d = tape_d[((size_t)t * Hv + hv) * Dv + i];
            for (int j = 0; j < Dk; j++) S[j * Dv + i] = gdn_upd(S[j * Dv + i], g, d, ks[j]);
        }
    }
    __syncthreads();
    float *o = dst + (size_t)hv * Dv * Dk;
    for (int x = threadIdx.x; x < Dv * Dk; x += blockDim.x) o[x] = S[(x % Dk) * Dv + x / Dk];
}

void cu_gdn_replay(be_backend *be, float *dst, const float *start, const float *tape_k, const float *tape_g,
                   const float *tape_d, int keep, int Hk, int Hv, int Dk, int Dv) {
    (void)be;
    CU_PROF("gdn_replay");
    size_t smem = gdn_smem(Dk, Dv);
    gdn_smem_allow((const void *)k_gdn_replay, smem);
    seq_launch(k_gdn_replay, dim3(Hv), (Dv + 31) / 32 * 32, smem, dst, start, tape_k, tape_g, tape_d, keep, Hk ? Hk : 1,
              Hv, Dk, Dv);
    CU_LAUNCHED("gdn replay");
}

/* ------------------------------------------------------------------ batched sequence ops */

/* attention_seqs / gdn_seqs over all sequences of one layer in a fixed number of launches (2 for
 * attention, 2 for the GDN: conv, then the recurrence with its L2 norms — 3 with the shared-memory
 * kernel, which takes them from k_gdn_l2_seqs), whatever n is: a grid axis runs over the
 * sequences, and one staged table (a single async copy through the index ring) gives each block its
 * sequence's rows, positions, page table and state pointers. Each block then runs the same device
 * code as the per-sequence kernel above on that sequence, so the results are bit-identical to the
 * per-sequence calls and a row's bits do not depend on n (tests/unit/test_backend_cuda.c).
 * $MTPLX_CUDA_SEQ_BATCH=0: the per-sequence calls instead (be_*_seqs_loop; a comparison knob). */

/* 0 when $MTPLX_CUDA_SEQ_BATCH=0 (read once). */
static int seq_batch_on(void) { return cu_set.seq_batch; }

/* A sequence of an attention_seqs call as the kernels read it (staged; pages_off < 0: no page table). */
typedef struct {
    float *k, *v;
    int pages_off;   /* int32 entries from the staged table's start to its page table */
    int page_size, pos0, r0, R, pad;
} cu_attn_seq;

/* A host buffer of at least `words` int32 for building a staged table (per thread, grown as needed,
 * kept for the thread's life: its contents are copied to the pinned ring before the op returns). */
static int32_t *seq_host(size_t words) {
    static thread_local int32_t *buf = NULL;
    static thread_local size_t cap = 0;
    if (words > cap) {
        size_t nc = words < 4096 ? 4096 : 2 * words;
        int32_t *nb = (int32_t *)realloc(buf, nc * sizeof(int32_t));
        if (!nb) cu_check(cudaErrorMemoryAllocation, "sequence table (host)");
        buf = nb;
        cap = nc;
    }
    return buf;
}

/* A call's sequence table passed inline as a kernel parameter: up to SEQ_TAB_WORDS int32 (attention:
 * 10 a sequence plus its page table; GDN 20; commit 16), which covers decode and verify batches of
 * up to ~25 sequences. A table copied to the device through the index ring costs a host-to-device
 * copy in the stream before the op's kernels (GPU time per layer, and no programmatic overlap across
 * it); inline, it travels with the launch. Larger tables are staged as before (dev). Kernels read it
 * through seq_tab_of: a __grid_constant__ parameter may be addressed. */
#define SEQ_TAB_WORDS 512
typedef struct __align__(16) {
    int32_t w[SEQ_TAB_WORDS];
} seq_tab;

/* The table of `words` int32 at h for a launch: copied into *inl when it fits (returns NULL), else
 * staged on the device (returns its address). */
static const int32_t *seq_tab_put(cu_ctx *c, const int32_t *h, size_t words, seq_tab *inl) {
    if (words <= SEQ_TAB_WORDS && cu_set.seq_inline) {
        memcpy(inl->w, h, words * sizeof(int32_t));
        return NULL;
    }
    return cu_stage_idx(c, h, words);
}

__device__ __forceinline__ const int32_t *seq_tab_of(const seq_tab &inl, const int32_t *dev) {
    return dev ? dev : inl.w;
}

/* The table of an attention_seqs / mla_seqs call: n cu_attn_seq, then every sequence's page
 * table, inline in *inl or staged (seq_tab_put: the device address or NULL). *maxR: the most rows of a
 * sequence (0: nothing to do, nothing staged). */
static const int32_t *stage_attn_seqs(cu_ctx *c, const be_attn_seq *seqs, int n, int *maxR, seq_tab *inl) {
    const size_t dw = sizeof(cu_attn_seq) / sizeof(int32_t);
    size_t words = n * dw;
    for (int i = 0; i < n; i++) words += seqs[i].kv.pages ? (size_t)seqs[i].kv.n_pages : 0;
    int32_t *h = seq_host(words);
    cu_attn_seq *d = (cu_attn_seq *)h;
    size_t at = n * dw;
    *maxR = 0;
    for (int i = 0; i < n; i++) {
        const be_attn_seq *q = &seqs[i];
        d[i] = (cu_attn_seq){q->kv.k, q->kv.v, q->kv.pages ? (int)at : -1, q->kv.page_size, q->pos0, q->r0, q->R, 0};
        if (q->kv.pages) {
            memcpy(h + at, q->kv.pages, sizeof(int32_t) * (size_t)q->kv.n_pages);
            at += (size_t)q->kv.n_pages;
        }
        if (q->R > *maxR) *maxR = q->R;
    }
    return *maxR > 0 ? seq_tab_put(c, h, words, inl) : NULL;
}

__device__ __forceinline__ kv_view seq_view(const kv_view &base, const cu_attn_seq &q, const int32_t *tab) {
    kv_view v = base;
    v.k = q.k;
    v.v = q.v;
    v.pages = q.pages_off < 0 ? NULL : tab + q.pages_off;
    v.page_size = q.page_size;
    return v;
}

/* Block (t, h, i): k_attn_prep's block (t, h) for sequence i (nothing when t >= its rows). */
__global__ void k_attn_prep_seqs(attn_prep_args a, kv_view base, const __grid_constant__ seq_tab inl,
                                 const int32_t *dtab) {
    CU_PDL_ENTRY();
    const int32_t *tab = seq_tab_of(inl, dtab);
    cu_attn_seq q = ((const cu_attn_seq *)tab)[blockIdx.z];
    if ((int)blockIdx.x >= q.R) return;
    a.big += (size_t)q.r0 * a.ldb;
    a.pos0 = q.pos0;
    attn_prep_body(a, seq_view(base, q, tab), blockIdx.x, blockIdx.y);
}

/* Block (t, h, i · S + c): k_attn_core's block (t, h, c) for sequence i, with the prep's arguments p (its big
 * and pos0 set here from the sequence's table entry) when the block does the prep itself (attn_fused_prep),
 * else NULL. */
__device__ __forceinline__ void attn_core_seqs_block(attn_core_args a, attn_prep_args *p, const kv_view &base,
                                                     const seq_tab &inl, const int32_t *dtab) {
    const int32_t *tab = seq_tab_of(inl, dtab);
    const int z = blockIdx.z / a.S, t = a.t0 + blockIdx.x;
    cu_attn_seq q = ((const cu_attn_seq *)tab)[a.z0 + z];
    if (t >= q.R) return;
    a.big += (size_t)q.r0 * a.ldb;
    a.pos0 = q.pos0, a.prep_r0 = q.r0;
    if (p) p->big = a.big, p->pos0 = q.pos0;
    attn_core_body(a, seq_view(base, q, tab), t, blockIdx.y, blockIdx.z % a.S, z, p);
}

__global__ void __launch_bounds__(ATT_WARPS * 32)
    k_attn_core_seqs(attn_core_args a, kv_view base, const __grid_constant__ seq_tab inl, const int32_t *dtab) {
    CU_PDL_ENTRY();
    attn_core_seqs_block(a, nullptr, base, inl, dtab);
}

/* k_attn_core_seqs with k_attn_prep_seqs' work inside (every sequence of the call has one row). At least 2
 * blocks a multiprocessor lets the compiler take 128 registers (no spills; at its own choice of 80 it spilled
 * 36 / 144 bytes of stores / loads once the merge factors and the key's prep were added, session 43). */
__global__ void __launch_bounds__(ATT_WARPS * 32, 2) k_attn_core_seqs_fp(attn_core_args a, attn_prep_args p, kv_view base,
                                                                    const __grid_constant__ seq_tab inl,
                                                                    const int32_t *dtab) {
    CU_PDL_ENTRY();
    attn_core_seqs_block(a, &p, base, inl, dtab);
}

/* Block (x, KV head, i · S + c): k_attn_core_g's block for sequence i. */
template <int QB, int D>
__global__ void __launch_bounds__(ATT_WARPS * 32, ATT_G_MINB(QB))
    k_attn_core_seqs_g(attn_core_args a, kv_view base, const __grid_constant__ seq_tab inl, const int32_t *dtab,
                       int rows) {
    CU_PDL_ENTRY();
    const int32_t *tab = seq_tab_of(inl, dtab);
    const int z = blockIdx.z / a.S;
    cu_attn_seq q = ((const cu_attn_seq *)tab)[a.z0 + z];
    const int here = min(rows, q.R - a.t0);
    if (here <= 0) return;
    a.big += (size_t)q.r0 * a.ldb;
    a.pos0 = q.pos0;
    const kv_view kv = seq_view(base, q, tab);
    attn_core_gbody<QB, D, D>(a, kv, blockIdx.x, blockIdx.y, blockIdx.z % a.S, z, here);
}

/* Block (t, h, i): k_attn_merge's block (t, h) for sequence i. */
__global__ void k_attn_merge_seqs(attn_core_args a, const __grid_constant__ seq_tab inl, const int32_t *dtab) {
    CU_PDL_ENTRY();
    const int32_t *tab = seq_tab_of(inl, dtab);
    const int t = a.t0 + blockIdx.x;
    cu_attn_seq q = ((const cu_attn_seq *)tab)[a.z0 + blockIdx.z];
    if (t >= q.R) return;
    a.big += (size_t)q.r0 * a.ldb;
    a.pos0 = q.pos0, a.prep_r0 = q.r0;
    attn_merge_body(a, t, blockIdx.y, blockIdx.z);
}

/* The attention of an attention_seqs / mla_seqs call (q: its arguments; nH query heads; maxR: the most
 * rows of a sequence): every sequence's queries in chunks of keys, then the merges, in launches of
 * attn_split's sequences and rows. fp: attention_seqs' prep, not yet launched (NULL: mla_seqs, whose
 * prep has run): inside the one-query blocks when every sequence has one row and every launch takes
 * one-query blocks ($MTPLX_CUDA_FUSE_ATT_PREP=0: never), else k_attn_prep_seqs first. */
static void attn_core_seqs(attn_core_args q, const kv_view &base, const seq_tab &inl, const int32_t *tab,
                           const be_attn_seq *seqs, int n, int maxR, int nH, const attn_prep_args *fp) {
    size_t smem = sizeof(float) * ((size_t)q.Dk + ATT_WARPS * (size_t)(q.Dv + 3)); /* attn_core_body */
    int max_keys = 0, group, ns;
    for (int i = 0; i < n; i++)
        if (seqs[i].R > 0 && seqs[i].pos0 + seqs[i].R > max_keys) max_keys = seqs[i].pos0 + seqs[i].R;
    q.S = attn_split(max_keys, maxR, n, nH, q.Dv, &q.part, &ns, &group);
    q.rows = group, q.heads = nH;
    int aligned = 1, rows_all = 0, sum = 0, lo = 0;
    for (int i = 0; i < n; i++) {
        aligned &= ((uintptr_t)seqs[i].kv.k | (uintptr_t)seqs[i].kv.v) % 16 == 0;
        if (seqs[i].R > 0) {
            sum += seqs[i].R, rows_all = seqs[i].r0 + seqs[i].R > rows_all ? seqs[i].r0 + seqs[i].R : rows_all;
            lo = i == 0 || seqs[i].r0 < lo ? seqs[i].r0 : lo;
        }
    }
    bool fused = fp && cu_set.fuse_att_prep && maxR == 1;
    for (int z0 = 0; fused && z0 < n; z0 += ns) fused = !attn_qb(q, 1, aligned, n - z0 < ns ? n - z0 : ns, nH, q.S);
    if (fp && !fused) {
        seq_launch(k_attn_prep_seqs, dim3(maxR, fp->n_heads + fp->n_kv, n), ATT_PREP_THREADS, sizeof(float) * fp->Dh,
                   *fp, base, inl, tab);
        CU_LAUNCHED("attention prep");
    }
    /* the output projection's input prepared here: when one launch of one-query blocks (and its merge)
     * writes every output and the sequences' rows are exactly rows 0 .. rows_all - 1 */
    q.z0 = 0, q.t0 = 0;
    if (n <= ns && maxR <= group && sum == rows_all && lo == 0 && !attn_qb(q, maxR, aligned, n, nH, q.S))
        cu_prep_begin(q.big + q.att_off, q.ldb, rows_all, nH * q.Dv, q.Dv, &q.prep);
    for (q.z0 = 0; q.z0 < n; q.z0 += ns) {
        int nz = n - q.z0 < ns ? n - q.z0 : ns;
        for (q.t0 = 0; q.t0 < maxR; q.t0 += group) {
            int rows = maxR - q.t0 < group ? maxR - q.t0 : group, qb = attn_qb(q, rows, aligned, nz, nH, q.S);
            if (qb) {
                dim3 grid((rows * q.group + qb - 1) / qb, nH / q.group, nz * q.S);
                ATT_G_SWITCH(k_attn_core_seqs_g, qb, q.Dk, grid, q, base, inl, tab, rows);
            } else {
                /* one-query blocks: the last chunk of a query merges (attn_merge_last) */
                attn_core_args o = q;
                o.cnt = q.S > 1 && cu_set.att_merge_last ? attn_count_buf((size_t)nz * q.rows * nH) : NULL;
                if (fused) seq_launch(k_attn_core_seqs_fp, dim3(rows, nH, nz * q.S), ATT_WARPS * 32, smem, o, *fp, base, inl, tab);
                else seq_launch(k_attn_core_seqs, dim3(rows, nH, nz * q.S), ATT_WARPS * 32, smem, o, base, inl, tab);
                if (o.cnt) qb = -1; /* merged */
            }
            CU_LAUNCHED("attention");
            if (q.S > 1 && qb >= 0) {
                seq_launch(k_attn_merge_seqs, dim3(rows, nH, nz), 128, 0, q, inl, tab);
                CU_LAUNCHED("attention merge");
            }
        }
    }
    cu_prep_done(&q.prep, q.big + q.att_off, q.ldb);
}

void cu_attention_seqs(be_backend *be, const be_attn_args *a, const be_attn_seq *seqs, int n, float *scratch) {
    CU_PROF("attention_seqs"); /* first: every op of the table opens one (cuda_internal.cuh) */
    if (n <= 0) return;
    if (!seq_batch_on()) {
        be_attention_seqs_loop(be, a, seqs, n, scratch);
        return;
    }
    cu_ctx *c = cu_of(be);
    int Dh = a->head_dim, rd = a->rotary_dim, maxR;
    if (Dh > 32 * ATT_MAXO) cu_check(cudaErrorInvalidValue, "attention: value heads wider than 256");
    seq_tab inl;
    const int32_t *tab = stage_attn_seqs(c, seqs, n, &maxR, &inl);
    if (!maxR) return;
    kv_view base = {NULL, NULL, NULL, 0, a->n_kv_heads, Dh, Dh};
    attn_prep_args p = {a->big, a->ldb, a->q_stride, a->k_off, a->v_off, a->n_heads, a->n_kv_heads, Dh, rd, 0,
                        cu_vec(c, a->inv_freq, sizeof(float) * (rd / 2 > 0 ? rd / 2 : 1)),
                        cu_vec(c, a->q_norm, sizeof(float) * Dh), cu_vec(c, a->k_norm, sizeof(float) * Dh),
                        a->rope_factor, a->eps};
    attn_core_args q = {a->big, a->ldb, 0, a->q_stride, a->att_off, a->n_heads / a->n_kv_heads, Dh, Dh, a->gated, 0,
                        a->scale};
    attn_core_seqs(q, base, inl, tab, seqs, n, maxR, a->n_heads, &p);
}

/* Block (t, i): k_mla_prep's block t for sequence i. */
__global__ void k_mla_prep_seqs(mla_prep_args a, kv_view base, const __grid_constant__ seq_tab inl, const int32_t *dtab) {
    CU_PDL_ENTRY();
    const int32_t *tab = seq_tab_of(inl, dtab);
    cu_attn_seq q = ((const cu_attn_seq *)tab)[blockIdx.y];
    if ((int)blockIdx.x >= q.R) return;
    a.rows += (size_t)q.r0 * a.ldr;
    a.pos0 = q.pos0;
    mla_prep_body(a, seq_view(base, q, tab), blockIdx.x);
}

void cu_mla_seqs(be_backend *be, const be_mla_args *a, const be_attn_seq *seqs, int n, float *scratch) {
    CU_PROF("mla_seqs"); /* first: every op of the table opens one (cuda_internal.cuh) */
    if (n <= 0) return;
    if (!seq_batch_on()) {
        be_mla_seqs_loop(be, a, seqs, n, scratch);
        return;
    }
    cu_ctx *c = cu_of(be);
    int Dk = a->nope_dim + a->rope_dim, maxR;
    if (a->v_dim > 32 * ATT_MAXO) cu_check(cudaErrorInvalidValue, "attention: value heads wider than 256");
    seq_tab inl;
    const int32_t *tab = stage_attn_seqs(c, seqs, n, &maxR, &inl);
    if (!maxR) return;
    kv_view base = {NULL, NULL, NULL, 0, a->n_heads, Dk, a->v_dim};
    mla_prep_args p = {a->rows, a->ldr, a->q_off, a->ckv_off, a->kvb_off, a->n_heads, a->nope_dim, a->rope_dim,
                       a->v_dim, a->kv_lora, a->interleave, 0,
                       cu_vec(c, a->inv_freq, sizeof(float) * (a->rope_dim / 2 > 0 ? a->rope_dim / 2 : 1)),
                       a->rope_factor};
    seq_launch(k_mla_prep_seqs, dim3(maxR, n), 128, 0, p, base, inl, tab);
    CU_LAUNCHED("mla prep");
    attn_core_args q = {a->rows, a->ldr, a->q_off, Dk, a->att_off, 1, Dk, a->v_dim, 0, 0, a->scale};
    attn_core_seqs(q, base, inl, tab, seqs, n, maxR, a->n_heads, NULL);
}

/* A sequence of a gdn_seqs call as the kernels read it (staged). */
typedef struct {
    const float *src;
    float *dst, *qn, *kn, *tape_g, *tape_d, *conv, *win;
    int r0, R, keep_win, pad;
} cu_gdn_seq;

#define CV_KMAX 8 /* conv kernels up to this width run in k_conv_seqs */
#define CV_ROWS 8 /* rows whose inputs a k_conv_seqs thread loads at once (with the conv state: a verify of up
                   * to 8 drafts is one round trip to L2) */

/* Thread (c, i): channel c of sequence i's rows in order, the window's last kc-1 inputs in registers:
 * y_t = silu(Σ_j w[c][j] · x[t + j]) with FMA in tap order (k_conv1d_silu's arithmetic), written over
 * the row's input at u_off (the thread has read it first: inputs in groups of CV_ROWS rows); then the conv state = the last kc-1
 * inputs, and with keep_win the window (state, then rows) in win. */
__global__ void k_conv_seqs(const __grid_constant__ seq_tab inl, const int32_t *dtab, float *big, int ldb, int u_off,
                            const float *w, int C, int kc, int rows_in_win) {
    int c = blockIdx.x * blockDim.x + threadIdx.x, kc1 = kc - 1, cc = c < C ? c : C - 1;
    float hs[CV_KMAX], wr[CV_KMAX];
#pragma unroll
    for (int j = 0; j < CV_KMAX; j++) wr[j] = j < kc1 ? w[(size_t)cc * kc + j] : 0.f;
    float wl = w[(size_t)cc * kc + kc1]; /* the weights are no kernel's output: read before the wait */
    CU_PDL_ENTRY();
    cu_gdn_seq q = ((const cu_gdn_seq *)seq_tab_of(inl, dtab))[blockIdx.y];
    if (c >= C) return;
#pragma unroll
    for (int j = 0; j < CV_KMAX; j++) hs[j] = j < kc1 ? q.conv[(size_t)j * C + c] : 0.f;
    for (int t0 = 0; t0 < q.R; t0 += CV_ROWS) {
        float xs[CV_ROWS]; /* a group's inputs loaded together (prefill rows: latency, not bandwidth) */
#pragma unroll
        for (int u = 0; u < CV_ROWS; u++) { /* every load before any store (win and big may alias for the compiler) */
            int t = t0 + u;
            if (t < q.R) xs[u] = rows_in_win ? q.win[(size_t)(kc1 + t) * C + c] : big[(size_t)(q.r0 + t) * ldb + u_off + c];
        }
        if (q.keep_win && t0 == 0) { /* the state's copy */
#pragma unroll
            for (int j = 0; j < CV_KMAX; j++)
                if (j < kc1) q.win[(size_t)j * C + c] = hs[j];
        }
        if (q.keep_win && !rows_in_win) {
#pragma unroll
            for (int u = 0; u < CV_ROWS; u++)
                if (t0 + u < q.R) q.win[(size_t)(kc1 + t0 + u) * C + c] = xs[u];
        }
#pragma unroll
        for (int u = 0; u < CV_ROWS; u++) {
            int t = t0 + u;
            if (t >= q.R) break;
            float x = xs[u], acc = 0.f;
#pragma unroll
            for (int j = 0; j < CV_KMAX; j++)
                if (j < kc1) acc = fmaf(wr[j], hs[j], acc);
            acc = fmaf(wl, x, acc);
            big[(size_t)(q.r0 + t) * ldb + u_off + c] = cu_silu(acc);
#pragma unroll
            for (int j = 0; j < CV_KMAX - 1; j++)
                if (j < kc1) hs[j] = j + 1 < kc1 ? hs[j + 1] : x;
        }
    }
    if (q.R <= 0 && q.keep_win) {
#pragma unroll
        for (int j = 0; j < CV_KMAX; j++)
            if (j < kc1) q.win[(size_t)j * C + c] = hs[j];
    }
#pragma unroll
    for (int j = 0; j < CV_KMAX; j++)
        if (j < kc1) q.conv[(size_t)j * C + c] = hs[j];
}

/* Block (t, x, i): k_gdn_l2's block (t, x) for sequence i. */
__global__ void k_gdn_l2_seqs(const __grid_constant__ seq_tab inl, const int32_t *dtab, const float *big, int ldb,
                              int u_off, int Hk, int Dk) {
    CU_PDL_ENTRY();
    cu_gdn_seq q = ((const cu_gdn_seq *)seq_tab_of(inl, dtab))[blockIdx.z];
    if ((int)blockIdx.x >= q.R) return;
    gdn_l2_body(big + (size_t)q.r0 * ldb, ldb, u_off, Hk, Dk, q.qn, q.kn, blockIdx.x, blockIdx.y);
}

/* a with sequence q's rows, states and tapes. */
__device__ __forceinline__ gdn_k_args gdn_seq_args(gdn_k_args a, const cu_gdn_seq &q) {
    a.big += (size_t)q.r0 * a.ldb;
    a.R = q.R;
    a.src = q.src, a.dst = q.dst, a.qn = q.qn, a.kn = q.kn, a.tape_g = q.tape_g, a.tape_d = q.tape_d;
    a.prep_r0 = q.r0;
    return a;
}

/* Block (b, i): k_gdn_reg's block b for sequence i. */
template <int JK, int L2, int FUSED>
__global__ void __launch_bounds__(GDN_REG_THREADS)
    k_gdn_reg_seqs(gdn_k_args a, const __grid_constant__ seq_tab inl, const int32_t *dtab) {
    CU_PDL_ENTRY();
    cu_gdn_seq q = ((const cu_gdn_seq *)seq_tab_of(inl, dtab))[blockIdx.y];
    if (q.R <= 0) return;
    gdn_reg_body<JK, L2, FUSED>(gdn_seq_args(a, q), blockIdx.x);
}

/* Block (t, hv, i): k_gdn_norm's block (t, hv) for sequence i. */
__global__ void k_gdn_norm_seqs(const __grid_constant__ seq_tab inl, const int32_t *dtab, float *big, int ldb, int y_off,
                                int Dv, const float *norm, float eps, cu_prep_out prep) {
    CU_PDL_ENTRY();
    cu_gdn_seq q = ((const cu_gdn_seq *)seq_tab_of(inl, dtab))[blockIdx.z];
    if ((int)blockIdx.x >= q.R) return;
    gdn_norm_body(big + (size_t)q.r0 * ldb, ldb, y_off, Dv, norm, eps, blockIdx.x, blockIdx.y, prep, q.r0 + blockIdx.x);
}

/* Block (hv, i): k_gdn's block hv for sequence i. */
__global__ void k_gdn_seqs(gdn_k_args a, const __grid_constant__ seq_tab inl, const int32_t *dtab) {
    CU_PDL_ENTRY();
    cu_gdn_seq q = ((const cu_gdn_seq *)seq_tab_of(inl, dtab))[blockIdx.y];
    if (q.R <= 0) return;
    gdn_smem_body(gdn_seq_args(a, q), blockIdx.x);
}

void cu_gdn_seqs(be_backend *be, const be_gdn_args *a, const be_conv_args *cv, const be_gdn_seq *seqs, int n) {
    CU_PROF("gdn_seqs"); /* first: every op of the table opens one (cuda_internal.cuh) */
    if (n <= 0) return;
    if (!seq_batch_on() || cv->kc < 1 || cv->kc > CV_KMAX) {
        be_gdn_seqs_loop(be, a, cv, seqs, n);
        return;
    }
    cu_ctx *c = cu_of(be);
    int Hk = a->Hk, Dk = a->Dk, Hv = a->Hv, Dv = a->Dv, maxR = 0, rows = 0, sum = 0, lo = 0;
    const size_t dw = sizeof(cu_gdn_seq) / sizeof(int32_t);
    cu_gdn_seq *h = (cu_gdn_seq *)seq_host(n * dw);
    for (int i = 0; i < n; i++) {
        const be_gdn_seq *q = &seqs[i];
        h[i] = (cu_gdn_seq){q->src, q->dst, q->qn, q->kn, q->tape_g, q->tape_d, q->conv, q->win, q->r0, q->R,
                            q->keep_win, 0};
        if (q->R > maxR) maxR = q->R;
        if (q->R > 0) {
            sum += q->R, rows = q->r0 + q->R > rows ? q->r0 + q->R : rows;
            lo = i == 0 || q->r0 < lo ? q->r0 : lo;
        }
    }
    /* the out-projection's input is prepared here only when the sequences' rows are exactly rows 0 .. rows-1 */
    const int rows_tiled = sum == rows && lo == 0;
    if (maxR <= 0) return;
    seq_tab inl;
    const int32_t *d = seq_tab_put(c, (const int32_t *)h, n * dw, &inl);
    const float *cw = cu_vec(c, cv->w, sizeof(float) * (size_t)cv->C * cv->kc);
    seq_launch(k_conv_seqs, dim3((cv->C + 127) / 128, n), 128, 0, inl, d, a->big, a->ldb, a->u_off, cw, cv->C, cv->kc,
              cv->rows_in_win);
    CU_LAUNCHED("gdn conv");
    gdn_k_args k = {a->big, a->ldb, a->b_off, a->a_off, a->u_off, a->y_off, Hk, Hv, Dk, Dv, 0,
                    cu_vec(c, a->neg_A, sizeof(float) * Hv), cu_vec(c, a->dt_bias, sizeof(float) * Hv),
                    cu_vec(c, a->norm, sizeof(float) * Dv), a->eps, NULL, NULL, NULL, NULL, NULL, NULL, 1,
                    cu_set.gdn_xpose};
    int JK = Dk / 32, warps = (Dv + GDN_RPW - 1) / GDN_RPW;
    if (Dk % 32 == 0 && JK >= 1 && JK <= 4 && Dv <= GDN_REG_THREADS / 32 * GDN_RPW && gdn_reg_on()) {
        /* q / k normalised inside the step (gdn_reg_body's L2): 2 launches ($MTPLX_CUDA_GDN_L2=0: 3), and
         * the norm's when the heads are split (gdn_split) */
        k.split = gdn_split(Hv, Dv, n, maxR);
        const int fused = k.split == 1;
        if (rows_tiled) cu_prep_begin(a->big + a->y_off, a->ldb, rows, Hv * Dv, Dv, &k.prep);
        int threads = fused ? 32 * (warps > (Dv + 31) / 32 ? warps : (Dv + 31) / 32) : 32 * ((warps + k.split - 1) / k.split);
        dim3 g(Hv * k.split, n);
        if (!cu_set.gdn_l2) {
            seq_launch(k_gdn_l2_seqs, dim3(maxR, 2 * Hk, n), 128, 0, inl, d, (const float *)a->big, a->ldb, a->u_off, Hk,
                      Dk);
            CU_LAUNCHED("gdn l2norm");
        }
#define GDN_F(JK_, L2_) fused ? seq_launch(k_gdn_reg_seqs<JK_, L2_, 1>, g, threads, 0, k, inl, d) \
                              : seq_launch(k_gdn_reg_seqs<JK_, L2_, 0>, g, threads, 0, k, inl, d)
#define GDN_L(JK_) cu_set.gdn_l2 ? GDN_F(JK_, 1) : GDN_F(JK_, 0)
        switch (JK) {
        case 1: GDN_L(1); break;
        case 2: GDN_L(2); break;
        case 3: GDN_L(3); break;
        default: GDN_L(4); break;
        }
#undef GDN_L
#undef GDN_F
        CU_LAUNCHED("gdn");
        if (!fused) {
            seq_launch(k_gdn_norm_seqs, dim3(maxR, Hv, n), (Dv + 31) / 32 * 32, 0, inl, d, a->big, a->ldb, a->y_off, Dv,
                       k.norm, a->eps, k.prep);
            CU_LAUNCHED("gdn norm");
        }
        cu_prep_done(&k.prep, a->big + a->y_off, a->ldb);
        return;
    }
    seq_launch(k_gdn_l2_seqs, dim3(maxR, 2 * Hk, n), 128, 0, inl, d, (const float *)a->big, a->ldb, a->u_off, Hk, Dk);
    CU_LAUNCHED("gdn l2norm");
    size_t smem = gdn_smem(Dk, Dv);
    gdn_smem_allow((const void *)k_gdn_seqs, smem);
    seq_launch(k_gdn_seqs, dim3(Hv, n), (Dv + 31) / 32 * 32, smem, k, inl, d);
    CU_LAUNCHED("gdn");
}

/* ------------------------------------------------------------------ batched commit */

/* One item of a gdn_commit call as the kernel reads it (staged; the fields of be_gdn_commit). */
typedef struct {
    float *conv;
    const float *conv_src;
    float *dst;
    const float *start, *tape_k, *tape_g, *tape_d;
    int keep, pad;
} cu_commit_item;

/* Block (b, i): a grid-stride share of item i's work units: unit x < E / V is V consecutive state elements
 * (hv, r, j..j+V-1) of E = Hv·Dv·Dk, each replayed alone (gdn_upd per kept row in row order, the arithmetic
 * of k_gdn_replay and of the step, which touch each element the same way: V only groups independent
 * chains), E / V <= x < E / V + conv_floats one float of the conv-state copy. V = 4 takes float4 loads
 * and stores (cu_gdn_commit checks Dk % 4 and the alignment). Indices are 32-bit (E + conv_floats < 2^31). */
template <int V>
__global__ void k_gdn_commit(const __grid_constant__ seq_tab inl, const int32_t *dtab, unsigned conv_floats, int Hk,
                             int Hv, int Dk, int Dv) {
    CU_PDL_ENTRY();
    cu_commit_item q = ((const cu_commit_item *)seq_tab_of(inl, dtab))[blockIdx.y];
    const unsigned EV = (unsigned)Hv * Dv * Dk / V, all = EV + conv_floats, ud = (unsigned)Dk, uv = (unsigned)Dv;
    const unsigned kd = (unsigned)(Hk * Dk), ratio = (unsigned)(Hv / Hk);
    typedef typename std::conditional<V == 4, float4, float>::type vec;
    for (unsigned x = blockIdx.x * blockDim.x + threadIdx.x; x < all; x += gridDim.x * blockDim.x) {
        if (x >= EV) {
            q.conv[x - EV] = q.conv_src[x - EV];
            continue;
        }
        const unsigned e = x * V, row = e / ud, j = e - row * ud, hv = row / uv, r = row - hv * uv, hk = hv / ratio;
        const float *tg = q.tape_g + hv, *td = q.tape_d + (size_t)hv * Dv + r, *tk = q.tape_k + (size_t)hk * Dk + j;
        vec v = ((const vec *)q.start)[x];
        for (int t = 0; t < q.keep; t++) {
            const float g = tg[(size_t)t * Hv], d = td[(size_t)t * Hv * Dv];
            const vec k = *(const vec *)(tk + (size_t)t * kd);
            if constexpr (V == 4) {
                v.x = gdn_upd(v.x, g, d, k.x), v.y = gdn_upd(v.y, g, d, k.y);
                v.z = gdn_upd(v.z, g, d, k.z), v.w = gdn_upd(v.w, g, d, k.w);
            } else {
                v = gdn_upd(v, g, d, k);
            }
        }
        ((vec *)q.dst)[x] = v;
    }
}

/* 0 when $MTPLX_CUDA_COMMIT=0: gdn_commit as copies and gdn_replay calls per item; 2: one element a
 * thread (comparison knobs). */
static int commit_batch_on(void) { return cu_set.commit; }

void cu_gdn_commit(be_backend *be, const be_gdn_commit *items, int n, size_t conv_floats, int Hk, int Hv, int Dk,
                   int Dv) {
    CU_PROF("gdn_commit"); /* first: every op of the table opens one (cuda_internal.cuh) */
    if (n <= 0) return;
    if (!commit_batch_on() || (size_t)Hv * Dv * Dk + conv_floats >= ((size_t)1 << 31)) {
        be_gdn_commit_loop(be, items, n, conv_floats, Hk, Hv, Dk, Dv);
        return;
    }
    cu_ctx *c = cu_of(be);
    const size_t dw = sizeof(cu_commit_item) / sizeof(int32_t);
    cu_commit_item *h = (cu_commit_item *)seq_host(n * dw);
    for (int i = 0; i < n; i++) {
        const be_gdn_commit *q = &items[i];
        h[i] = (cu_commit_item){q->conv, q->conv_src, q->dst, q->start, q->tape_k, q->tape_g, q->tape_d, q->keep, 0};
    }
    /* four elements a thread where every item's state and key tape allow float4 (the same arithmetic) */
    int v4 = Dk % 4 == 0 && cu_set.commit != 2;
    for (int i = 0; i < n && v4; i++) {
        const be_gdn_commit *q = &items[i];
        v4 = (((uintptr_t)q->start | (uintptr_t)q->dst | (uintptr_t)q->tape_k) & 15) == 0;
    }
    seq_tab inl;
    const int32_t *d = seq_tab_put(c, (const int32_t *)h, n * dw, &inl);
    size_t all = (size_t)Hv * Dv * Dk / (v4 ? 4 : 1) + conv_floats, blocks = (all + 255) / 256;
    /* up to one unit a thread (a function of the state's shape, never of n): the replay of an element
     * is a short dependent chain, so the op's time is its threads' chains one after the other */
    const dim3 grid((unsigned)(blocks < 4096 ? blocks : 4096), n);
    if (v4) seq_launch(k_gdn_commit<4>, grid, 256, 0, inl, d, (unsigned)conv_floats, Hk ? Hk : 1, Hv, Dk, Dv);
    else seq_launch(k_gdn_commit<1>, grid, 256, 0, inl, d, (unsigned)conv_floats, Hk ? Hk : 1, Hv, Dk, Dv);
    CU_LAUNCHED("gdn commit");
}
