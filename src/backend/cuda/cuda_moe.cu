/* cuda_moe.cu — the CUDA backend's routed-MoE block, all on the device (docs/architecture.md, "The
 * CUDA backend"):
 *
 *   1. router logits: cu_matmul (and the shared expert's gate logit);
 *   2. k_moe_route: one warp per row applies the CPU's kern_moe_route rule (softmax or sigmoid,
 *      correction bias, group selection, top-k by value with ties to the lower index, ascending
 *      order, the same sequential weight sum and normalisation);
 *   3. k_moe_plan: one block lists each expert's (row, slot) pairs in ascending row order and cuts
 *      them into tiles of up to 4 or 8 rows (cu_set.moe_trows; the shared expert first, as expert E with
 *      every row);
 *   4. k_moe_gu: per tile, a warp computes gate and up of MOE_GU_NO outputs at a time for the tile's rows
 *      and writes silu(gate)·up into the slots' rows of h; k_moe_down: MOE_DN_NO outputs of the down
 *      projection of h into the slots' rows of yk. Both read only the chosen experts' weights, in the
 *      checkpoint format, through a per-layer device table of the experts' device copies, every lane
 *      with all of its outputs' 16-byte chunks in flight at once; a block first stages its tile's rows in
 *      shared memory, then takes cu_set.moe_tloop groups of outputs in turn (prefill: bench/cuda.md,
 *      "Session 33");
 *   5. k_moe_combine: out = Σ_k w_k · yk[slot k] in slot (= ascending expert) order, then + the gated
 *      shared expert — the CPU's accumulation order.
 *
 * Calls of few rows (decode, verify: R <= cu_set.moe_slots) skip the plan: k_moe_gu_slot takes one slot a
 * grid row (its expert read from the route's idx), and k_moe_down_slots one input row a grid row, a warp per
 * slot, combining the slots' outputs through shared memory in the same order — two launches fewer a layer,
 * the same bits (a row's sums never depend on which rows share its tile).
 *
 * No host synchronisation inside the op (grids are sized for the worst case from R; surplus blocks
 * exit), so the forward stays capturable into a CUDA graph. Batch invariance (DESIGN.md §3): a lane
 * takes fixed 16-byte chunks of a weight row (moe_lpo: set by the weight's shape) and adds each row's
 * products in chunk order, then a fixed butterfly; which rows share a tile, and how many, never
 * changes a row's arithmetic.
 *
 * $MTPLX_CUDA_MOE=0 (cu_settings.moe) keeps the previous path for comparison: router logits
 * downloaded, kern_moe_route on the host, one gather / expert matmuls / scatter per chosen expert. A
 * layer whose experts the device kernels cannot read (mixed formats, widths not a multiple of a
 * 16-byte chunk) takes that path too. Both end with the same combine kernel (the shared expert's
 * output in slots R·K + t of yk). */
#include "cuda_internal.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../../base/dtype.h"
#include "../../kernels/moe.h"
}

#define MOE_RT_MIN 4   /* rows of one tile, the smaller choice (cu_set.moe_trows: 4 or 8) */
#define MOE_RT_MAX 8   /* and the larger */
#define MOE_TSTAGE_MAX (100 * 1024) /* bytes of staged rows a tiled block may take (opted in above 48 KB) */
#define MOE_WARPS 8    /* warps of a block */
#define MOE_TILE_BLOCKS 2 /* blocks an SM the tiled kernels are compiled for (registers: a tile's rows of sums) */
#define MOE_GU_NO 2    /* outputs of a warp in k_moe_gu (gate and up each) */
#define MOE_DN_NO 4    /* outputs of a warp in k_moe_down (2 at tiles of 8 rows: registers) */
#define MOE_DN_NO_RT(rt) ((rt) > 4 ? 2 : MOE_DN_NO)
#define MOE_SLOT_MAX 16 /* slots of a row (K + shared) up to which k_moe_down_slots takes a row (a warp each) */
#define MOE_SLOT_UNROLL 2 /* chunk iterations of a per-slot lane unrolled, so their loads go out together */
#define MOE_STAGE_MAX (44 * 1024) /* bytes of staged rows a per-slot block may take (under the 48 KB default) */

enum { MF_F32 = 0, MF_F16, MF_BF16, MF_Q8, MF_Q4 };

/* A weight format as the kernels are instantiated: kind, and for MLX affine its group and scale dtype. */
typedef struct {
    int F, gs, sdt;
} moe_fmt;

/* One weight's device copy: values, and scales / biases when quantized. */
typedef struct {
    const void *d, *s, *b;
} moe_dw;

/* One expert in the device table: gate, up, down and its width I. */
typedef struct {
    moe_dw w[3];
    int inter;
    int pad;
} moe_dex;

/* What the device path knows about one layer (built on its first call through a scratch). */
typedef struct {
    const moe_expert *key;   /* the layer's moe_weights.experts */
    int ok;                  /* 1: the device kernels run it; 0: the host-routed path */
    moe_dex *tab;            /* device [E + 1]: routed experts, then the shared one */
    moe_fmt gu, dn;          /* routed experts' gate/up and down formats */
    moe_fmt sgu, sdn;        /* the shared expert's */
    int merged;              /* 1: the shared expert runs in the routed experts' launches */
    const float *bias;       /* device copy of the correction bias, or NULL */
} moe_layer;

struct be_moe_scratch {
    int rows, H, I, E, K;
    /* device path */
    float *d_router;      /* [rows][E] router logits */
    int32_t *d_idx;       /* [rows][K] chosen experts */
    float *d_wts;         /* [rows][K] their weights */
    int32_t *d_slots;     /* [rows·(K+1)] slots grouped by expert: t·K + k routed, rows·K + t shared */
    int4 *d_tiles;        /* [tmax] (expert, first slot entry, rows, 0) */
    int *d_ntiles;        /* tiles in use */
    int tmax;             /* tile capacity */
    int ldh;              /* I rounded up to 4 */
    float *d_h;           /* [rows·(K+1)][ldh] silu(gate)·up per slot */
    float *d_yk;          /* [rows·(K+1)][H] expert outputs per slot */
    float *d_shg;         /* [rows] shared gate logits */
    moe_layer *layers;    /* layers seen, n_layers of cap_layers */
    int n_layers, cap_layers;
    /* host-routed path (allocated on first use) */
    int host_ready;
    float *h_router;      /* host copy of the router logits */
    int *h_idx;           /* [rows][K] */
    float *h_wts;         /* [rows][K] */
    float *route_tmp;     /* [2E] kern_moe_route scratch */
    int32_t *h_list;      /* [2][rows·K] rows grouped by expert, then their slots t·K + k */
    int32_t *d_list;      /* device copy */
    int *count;           /* [E] rows per expert */
    float *d_xg;          /* [rows][H] gathered rows of one expert */
    float *d_g, *d_u;     /* [rows][I] */
    float *d_xo;          /* [rows][H] one expert's outputs */
};

/* Tiles a call of R rows may need: the shared expert's ceil(R / RT), and for the routed experts at
 * most one partial tile per expert used beside R·K / RT full ones. */
static int tiles_shared(int R, int rt) { return (R + rt - 1) / rt; }
static int tiles_routed(int R, int E, int K, int rt) {
    int used = R * K < E ? R * K : E;
    return used + (R * K + rt - 1) / rt;
}

/* Rows of a tile this process uses: MTPLX_CUDA_MOE_TROWS, 4 or 8 (the same bits either way). */
static int tile_rows(void) { return cu_set.moe_trows == MOE_RT_MAX ? MOE_RT_MAX : MOE_RT_MIN; }

void cu_moe_scratch_free(be_backend *be, be_moe_scratch *f) {
    (void)be;
    if (!f) return;
    cu_graph_break();
    void *dev[] = {f->d_router, f->d_idx,  f->d_wts, f->d_slots, f->d_tiles, f->d_ntiles, f->d_h, f->d_yk,
                   f->d_shg,    f->d_list, f->d_xg,  f->d_g,     f->d_u,     f->d_xo};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
    for (int i = 0; i < f->n_layers; i++) cudaFree(f->layers[i].tab);
    free(f->layers);
    free(f->h_router);
    free(f->h_idx);
    free(f->h_wts);
    free(f->route_tmp);
    free(f->h_list);
    free(f->count);
    free(f);
}

/* cudaMalloc of n (>= 1) bytes into *p; 0 or -1. */
static int dev_alloc(void **p, size_t n) {
    if (cudaMalloc(p, n ? n : 1) == cudaSuccess) return 0;
    cudaGetLastError();
    *p = NULL;
    return -1;
}

int cu_moe_scratch_new(be_backend *be, int rows, int hidden, int inter, int n_experts, int top_k,
                       be_moe_scratch **out, mtplx_err *err) {
    *out = NULL;
    size_t R = (size_t)rows, E = (size_t)n_experts, K = (size_t)top_k, H = (size_t)hidden;
    be_moe_scratch *f = (be_moe_scratch *)calloc(1, sizeof *f);
    if (!f) return err_set(err, MTPLX_ENOMEM, "MoE scratch: out of host memory");
    f->rows = rows, f->H = hidden, f->I = inter, f->E = n_experts, f->K = top_k;
    f->ldh = (inter + 3) & ~3;
    f->tmax = tiles_shared(rows, MOE_RT_MIN) + tiles_routed(rows, n_experts, top_k, MOE_RT_MIN); /* the most tiles */
    size_t S = R * (K + 1);
    cu_graph_break();
    int bad = dev_alloc((void **)&f->d_router, sizeof(float) * R * E) || dev_alloc((void **)&f->d_idx, 4 * R * K) ||
              dev_alloc((void **)&f->d_wts, 4 * R * K) || dev_alloc((void **)&f->d_slots, 4 * S) ||
              dev_alloc((void **)&f->d_tiles, sizeof(int4) * (size_t)f->tmax) ||
              dev_alloc((void **)&f->d_ntiles, sizeof(int)) ||
              dev_alloc((void **)&f->d_h, sizeof(float) * S * (size_t)f->ldh) ||
              dev_alloc((void **)&f->d_yk, sizeof(float) * S * H) || dev_alloc((void **)&f->d_shg, sizeof(float) * R);
    if (bad) {
        cu_moe_scratch_free(be, f);
        return err_set(err, MTPLX_ENOMEM, "MoE scratch: %d rows x %d experts do not fit on the GPU", rows, n_experts);
    }
    *out = f;
    return 0;
}

/* The host-routed path's buffers, allocated on its first use (aborts when they do not fit). */
static void host_path_ready(be_moe_scratch *f) {
    if (f->host_ready) return;
    size_t R = (size_t)f->rows, E = (size_t)f->E, K = (size_t)f->K, H = (size_t)f->H, I = (size_t)f->I;
    f->h_router = (float *)malloc(sizeof(float) * R * E);
    f->h_idx = (int *)malloc(sizeof(int) * R * K);
    f->h_wts = (float *)malloc(sizeof(float) * R * K);
    f->route_tmp = (float *)malloc(sizeof(float) * 2 * E);
    f->h_list = (int32_t *)malloc(sizeof(int32_t) * 2 * R * K);
    f->count = (int *)malloc(sizeof(int) * E);
    if (!f->h_router || !f->h_idx || !f->h_wts || !f->route_tmp || !f->h_list || !f->count)
        cu_check(cudaErrorMemoryAllocation, "MoE host buffers");
    cu_graph_break();
    int bad = dev_alloc((void **)&f->d_list, 4 * 2 * R * K) || dev_alloc((void **)&f->d_xg, 4 * R * H) ||
              dev_alloc((void **)&f->d_g, 4 * R * I) || dev_alloc((void **)&f->d_u, 4 * R * I) ||
              dev_alloc((void **)&f->d_xo, 4 * R * H);
    if (bad) cu_check(cudaErrorMemoryAllocation, "MoE host-routed buffers");
    f->host_ready = 1;
}

/* ------------------------------------------------------------------ host-routed path */

/* xg[i] = x[rows[i]] for i < n (H floats each). */
__global__ void k_gather(float *xg, const float *x, int ldx, const int32_t *rows, int H) {
    int h = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (h < H) xg[(size_t)i * H + h] = x[(size_t)rows[i] * ldx + h];
}

/* yk[slots[i]] = xo[i] (H floats each). */
__global__ void k_scatter(float *yk, const float *xo, const int32_t *slots, int H) {
    int h = blockIdx.x * blockDim.x + threadIdx.x, i = blockIdx.y;
    if (h < H) yk[(size_t)slots[i] * H + h] = xo[(size_t)i * H + h];
}

static void moe_combine(be_moe_scratch *f, float *out, int ldo, int R, int shared, const float *shg);

/* The SwiGLU expert x over n rows of a (stride lda) into y (stride H). */
static void expert_rows(be_backend *be, const moe_expert *x, const float *a, int lda, int n, float *y,
                        be_moe_scratch *f) {
    int I = x->gate.rows;
    cu_matmul(be, f->d_g, f->I, a, lda, n, &x->gate);
    cu_matmul(be, f->d_u, f->I, a, lda, n, &x->up);
    cu_swiglu(f->d_g, f->I, f->d_g, f->I, f->d_u, f->I, I, n);
    cu_matmul(be, y, f->H, f->d_g, f->I, n, &x->down);
}

static void moe_host_routed(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
                            be_moe_scratch *f) {
    host_path_ready(f);
    int H = w->router_w.cols, E = w->router.n_experts, K = w->router.top_k;
    cu_matmul(be, f->d_router, E, x, ldx, R, &w->router_w);
    cu_memcpy_sync(f->h_router, f->d_router, sizeof(float) * (size_t)R * E, cudaMemcpyDeviceToHost, "moe router");
    for (int t = 0; t < R; t++)
        kern_moe_route(&w->router, f->h_router + (size_t)t * E, f->h_idx + (size_t)t * K, f->h_wts + (size_t)t * K,
                       f->route_tmp);
    /* rows grouped by expert (ascending expert, then ascending row), with their slots */
    memset(f->count, 0, sizeof(int) * E);
    for (int i = 0; i < R * K; i++) f->count[f->h_idx[i]]++;
    int n = R * K, at = 0;
    int32_t *rows = f->h_list, *slots = f->h_list + n;
    for (int e = 0; e < E; e++) {
        if (!f->count[e]) continue;
        for (int t = 0; t < R; t++)
            for (int k = 0; k < K; k++)
                if (f->h_idx[t * K + k] == e) rows[at] = t, slots[at] = t * K + k, at++;
    }
    cu_memcpy_sync(f->d_list, f->h_list, sizeof(int32_t) * 2 * n, cudaMemcpyHostToDevice, "moe routes");
    cu_memcpy_sync(f->d_wts, f->h_wts, sizeof(float) * n, cudaMemcpyHostToDevice, "moe weights");
    at = 0;
    for (int e = 0; e < E; e++) {
        int c = f->count[e];
        if (!c) continue;
        cu_launch_pdl(0, k_gather, dim3((H + 255) / 256, c), dim3(256), 0, f->d_xg, x, ldx, (const int32_t *)f->d_list + at, H);
        CU_LAUNCHED("moe gather");
        expert_rows(be, &w->experts[e], f->d_xg, H, c, f->d_xo, f);
        cu_launch_pdl(0, k_scatter, dim3((H + 255) / 256, c), dim3(256), 0, f->d_yk, (const float *)f->d_xo, (const int32_t *)f->d_list + n + at, H);
        CU_LAUNCHED("moe scatter");
        at += c;
    }
    const float *shg = NULL;
    if (w->shared_inter > 0) { /* into the shared slots R·K + t of yk */
        expert_rows(be, &w->shared, x, ldx, R, f->d_yk + (size_t)n * H, f);
        if (w->shared_gated) {
            cu_matmul(be, f->d_shg, 1, x, ldx, R, &w->shared_gate);
            shg = f->d_shg;
        }
    }
    moe_combine(f, out, ldo, R, w->shared_inter > 0, shg);
}

/* ------------------------------------------------------------------ device routing */

/* The route's scores of row L (one warp, lanes lane): score[e] (softmax or sigmoid) and choice[e] (score +
 * correction bias, the experts of groups not kept set to 0) in shared memory; gscore [G] and taken
 * [max(E, G)] are scratch. The softmax sum is a warp tree (the CPU adds in expert order; the two differ by
 * rounding only). */
__device__ __forceinline__ void route_scores(const float *L, int E, int score_fn, int G, int TG, const float *bias,
                                             float *score, float *choice, float *gscore, unsigned char *taken,
                                             int lane) {
    if (score_fn == MOE_SCORE_SOFTMAX) {
        float mx = L[0];
        for (int e = lane; e < E; e += 32) mx = fmaxf(mx, L[e]);
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        float sum = 0.f;
        for (int e = lane; e < E; e += 32) {
            float p = expf(L[e] - mx);
            score[e] = p;
            sum += p;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        for (int e = lane; e < E; e += 32) score[e] /= sum;
    } else {
        for (int e = lane; e < E; e += 32) score[e] = 1.0f / (1.0f + expf(-L[e]));
    }
    for (int e = lane; e < E; e += 32) choice[e] = score[e] + (bias ? bias[e] : 0.f);
    __syncwarp();
    if (G > 1) { /* group score = sum of its two best; keep TG groups, rank the others' experts as 0 */
        int per = E / G;
        for (int g = lane; g < G; g += 32) {
            const float *c = choice + g * per;
            int b0 = 0;
            for (int i = 1; i < per; i++)
                if (c[i] > c[b0]) b0 = i;
            int b1 = b0 == 0 ? 1 : 0;
            for (int i = 0; i < per; i++)
                if (i != b0 && c[i] > c[b1]) b1 = i;
            gscore[g] = c[b0] + c[b1];
        }
        __syncwarp();
        if (lane == 0) { /* the CPU's top_k_indices: taken[g] = 1 for the kept groups */
            for (int g = 0; g < G; g++) taken[g] = 0;
            for (int j = 0; j < TG; j++) {
                int best = -1;
                for (int g = 0; g < G; g++)
                    if (!taken[g] && (best < 0 || gscore[g] > gscore[best])) best = g;
                taken[best] = 1;
            }
        }
        __syncwarp();
        for (int e = lane; e < E; e += 32)
            if (!taken[e / per]) choice[e] = 0.f;
        __syncwarp();
    }
}

/* The best untaken entry of this lane's share (e = e0, e0 + es, ...: ascending, so ties keep the lower id),
 * then the warp's best by value, ties to the lower id: every lane gets (*bi, *bv); *bi < 0 when none is left. */
__device__ __forceinline__ void route_argmax(const float *choice, const unsigned char *taken, int e0, int es, int E,
                                             int *bi_, float *bv_) {
    int bi = -1;
    float bv = 0.f;
    for (int e = e0; e < E; e += es)
        if (!taken[e] && (bi < 0 || choice[e] > bv)) bi = e, bv = choice[e];
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) bi = oi, bv = ov;
    }
    *bi_ = bi, *bv_ = bv;
}

/* Lane 0: the K chosen ids sel (any order) ascending into idx[t], their weights (score, summed in that
 * order, normalised and scaled as the CPU does) into wts[t]. */
__device__ __forceinline__ void route_finish(int *sel, int K, const float *score, int score_fn, int norm, float scaling,
                                             int t, int32_t *idx, float *wts) {
    for (int i = 1; i < K; i++) /* ascending expert order */
        for (int j = i; j > 0 && sel[j - 1] > sel[j]; j--) {
            int s = sel[j];
            sel[j] = sel[j - 1];
            sel[j - 1] = s;
        }
    float w[MOE_MAX_TOPK], sum = 0.f;
    for (int j = 0; j < K; j++) {
        w[j] = score[sel[j]];
        sum += w[j];
    }
    if (norm) {
        if (score_fn == MOE_SCORE_SIGMOID) sum += 1e-20f;
        if (sum > 0)
            for (int j = 0; j < K; j++) w[j] /= sum;
    }
    if (scaling != 1.0f)
        for (int j = 0; j < K; j++) w[j] *= scaling;
    for (int j = 0; j < K; j++) idx[(size_t)t * K + j] = sel[j], wts[(size_t)t * K + j] = w[j];
}

/* Row blockIdx.x of logits [R][E] routed by the rule of kern_moe_route (src/kernels/moe.c), one warp:
 * expert ids ascending into idx[t][K], weights into wts[t][K]. Shared memory: score [E], choice [E],
 * gscore [G] floats, then taken [max(E, G)] bytes. Selection, ties, order and the weight sum are the
 * CPU's. NaN logits are not ranked as the CPU ranks them. */
__global__ void __launch_bounds__(32) k_moe_route(const float *logits, int E, int K, int score_fn, int norm, int G,
                                                  int TG, const float *bias, float scaling, int32_t *idx, float *wts) {
    CU_PDL_ENTRY();
    extern __shared__ float sm[];
    float *score = sm, *choice = sm + E, *gscore = sm + 2 * E;
    unsigned char *taken = (unsigned char *)(sm + 2 * E + G);
    int t = blockIdx.x, lane = threadIdx.x;
    route_scores(logits + (size_t)t * E, E, score_fn, G, TG, bias, score, choice, gscore, taken, lane);
    for (int e = lane; e < E; e += 32) taken[e] = 0;
    __syncwarp();
    int sel[MOE_MAX_TOPK];
    for (int j = 0; j < K; j++) { /* the largest untaken choice, lower index on ties */
        int bi;
        float bv;
        route_argmax(choice, taken, lane, 32, E, &bi, &bv);
        if (lane == 0) taken[bi] = 1, sel[j] = bi;
        __syncwarp();
    }
    if (lane == 0) route_finish(sel, K, score, score_fn, norm, scaling, t, idx, wts);
}

/* Block-wide exclusive prefix sum of v (one value per thread, blockDim.x <= 1024); *total gets the sum. */
__device__ int block_excl_scan(int v, int *sh32, int *total) {
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    int inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += u;
    }
    __syncthreads();
    if (lane == 31) sh32[wid] = inc;
    __syncthreads();
    if (threadIdx.x == 0) {
        int s = 0;
        for (int i = 0; i < nw; i++) {
            int c = sh32[i];
            sh32[i] = s;
            s += c;
        }
        sh32[32] = s;
    }
    __syncthreads();
    *total = sh32[32];
    return sh32[wid] + inc - v;
}

/* The tiles of a call (one block, blockDim.x >= E, a multiple of 32): the shared expert's rows first
 * (when `shared`: slots R·K + t, expert E), then per expert in ascending order the slots t·K + k of
 * the rows choosing it in ascending t, cut into tiles (expert, first entry, rows) of up to RT. */
__global__ void k_moe_plan(const int32_t *idx, int R, int K, int E, int shared, int RT, int32_t *slots, int4 *tiles,
                           int *ntiles) {
    CU_PDL_ENTRY();
    __shared__ int sh32[33];
    int e = threadIdx.x, c = 0;
    if (e < E)
        for (int t = 0; t < R; t++)
            for (int k = 0; k < K; k++) {
                int v = idx[t * K + k];
                if (v >= e) {
                    c += v == e;
                    break;
                }
            }
    int nt = (c + RT - 1) / RT, cs, ts;
    int so = block_excl_scan(c, sh32, &cs), to = block_excl_scan(nt, sh32, &ts);
    int s_slots = shared ? R : 0, s_tiles = shared ? (R + RT - 1) / RT : 0;
    for (int t = threadIdx.x; t < s_slots; t += blockDim.x) slots[t] = R * K + t;
    for (int i = threadIdx.x; i < s_tiles; i += blockDim.x)
        tiles[i] = make_int4(E, i * RT, R - i * RT < RT ? R - i * RT : RT, 0);
    if (c) {
        int base = s_slots + so, j = 0;
        for (int t = 0; t < R && j < c; t++)
            for (int k = 0; k < K; k++)
                if (idx[t * K + k] == e) {
                    slots[base + j++] = t * K + k;
                    break;
                }
        for (int i = 0; i < nt; i++)
            tiles[s_tiles + to + i] = make_int4(e, base + i * RT, c - i * RT < RT ? c - i * RT : RT, 0);
    }
    if (threadIdx.x == 0) *ntiles = s_tiles + ts;
}

/* ------------------------------------------------------------------ grouped expert matmuls */

/* Values of one 32-bit word of a 16-byte chunk, per format. */
template <int F> struct mf {
    static constexpr int VPW = F == MF_F32 ? 1 : F == MF_Q8 ? 4 : F == MF_Q4 ? 8 : 2;
    static constexpr int EPL = 4 * VPW; /* values of a 16-byte chunk */
};

__device__ __forceinline__ float moe_sb(const void *p, int sdt, size_t i) {
    if (sdt == DT_BF16) return cu_bf16(((const uint16_t *)p)[i]);
    if (sdt == DT_F16) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

/* The VPW values of word u (scale s, bias b when quantized: fmaf(s, q, b)). A quantized q becomes a float
 * through the exponent trick (2^23 + q, minus 2^23: exact, so the value (float)q would give) — two full-rate
 * operations where a conversion runs at a quarter of the FMA rate, which bounded the tiled prefill kernels. */
template <int F> __device__ __forceinline__ void moe_deq(uint32_t u, float s, float b, float *v) {
    if (F == MF_F32) {
        v[0] = __uint_as_float(u);
    } else if (F == MF_BF16) {
        v[0] = cu_bf16((uint16_t)(u & 0xffff)), v[1] = cu_bf16((uint16_t)(u >> 16));
    } else if (F == MF_F16) {
        v[0] = __half2float(__ushort_as_half((unsigned short)(u & 0xffff)));
        v[1] = __half2float(__ushort_as_half((unsigned short)(u >> 16)));
    } else {
        constexpr int BITS = F == MF_Q8 ? 8 : 4, VPW = mf<F>::VPW;
#pragma unroll
        for (int i = 0; i < VPW; i++) {
            float q = __uint_as_float(0x4B000000u | ((u >> (BITS * i)) & ((1u << BITS) - 1))) - 8388608.0f;
            v[i] = fmaf(s, q, b);
        }
    }
}

/* V floats of p (16-byte aligned rows when al; SM: p is in shared memory, staged by moe_stage). */
template <int V, int SM = 0> __device__ __forceinline__ void moe_ldx(const float *p, int al, float *v) {
    if (SM && V % 4 == 0) { /* staged chunks start 16-byte aligned, parts at multiples of V floats */
#pragma unroll
        for (int i = 0; i < V / 4; i++) {
            float4 a = ((const float4 *)p)[i];
            v[4 * i] = a.x, v[4 * i + 1] = a.y, v[4 * i + 2] = a.z, v[4 * i + 3] = a.w;
        }
    } else if (SM) {
#pragma unroll
        for (int i = 0; i < V; i++) v[i] = p[i];
    } else if (al && V % 4 == 0) {
#pragma unroll
        for (int i = 0; i < V / 4; i++) {
            float4 a = __ldg((const float4 *)p + i);
            v[4 * i] = a.x, v[4 * i + 1] = a.y, v[4 * i + 2] = a.z, v[4 * i + 3] = a.w;
        }
    } else if (al && V == 2) {
        float2 a = __ldg((const float2 *)p);
        v[0] = a.x, v[1] = a.y;
    } else {
#pragma unroll
        for (int i = 0; i < V; i++) v[i] = __ldg(p + i);
    }
}

/* Floats a staged chunk of EPL inputs takes in shared memory: 4 more than it holds, so that the lanes of a
 * warp, each reading its own chunk, spread over the banks (a stride of EPL floats would put them all on the
 * same ones: the plain row read from global memory is what kept the per-slot kernels on L1, session 32). */
__host__ __device__ constexpr int moe_sstride(int epl) { return epl + 4; }

/* dst (shared, moe_sstride(EPL) floats a chunk) = the n floats of src (n a multiple of EPL), by threads
 * tid, tid + nt, ... (16-byte loads when al). Values are copied, not computed: the sums that read them keep
 * their bits. */
template <int EPL>
__device__ __forceinline__ void moe_stage(float *dst, const float *src, int n, int al, int tid, int nt) {
    constexpr int SS = moe_sstride(EPL);
    if (al) {
        for (int i = tid; i < n / 4; i += nt) {
            int e = 4 * i;
            *(float4 *)(dst + (e / EPL) * SS + e % EPL) = __ldg((const float4 *)src + i);
        }
    } else {
        for (int e = tid; e < n; e += nt) dst[(e / EPL) * SS + e % EPL] = __ldg(src + e);
    }
}

__device__ __forceinline__ uint32_t word_of(const uint4 &q, int j) { return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w; }

/* Parts a 32-bit word's values are taken in by the expert sums (two when it holds two or more): the
 * values of an output and the inputs of a row are live for half a word at a time, which keeps the tiled
 * kernels' four rows in registers. A sum's order is unchanged: part after part, value after value. */
#define MOE_PARTS(F) (mf<F>::VPW >= 2 ? 2 : 1)

/* The PV values of part j (PV values each, words in order) of chunk q: moe_deq's, of the word holding them. */
template <int F, int PV> __device__ __forceinline__ void moe_deq_part(const uint4 &q, int j, float s, float b, float *v) {
    constexpr int VPW = mf<F>::VPW;
    float t[VPW];
    moe_deq<F>(word_of(q, j * PV / VPW), s, b, t);
#pragma unroll
    for (int i = 0; i < PV; i++) v[i] = t[(j * PV) % VPW + i];
}

/* Row of slot s: t for a routed slot t·K + k (s < RK), t for the shared slot RK + t. */
__device__ __forceinline__ int row_of_slot(int s, int RK, int K) { return s < RK ? s / K : s - RK; }

/* The tile of this block and whether it belongs to this launch (experts e_lo..e_hi). */
__device__ __forceinline__ int moe_tile(const int4 *tiles, const int *ntiles, int tile0, int e_lo, int e_hi, int4 *tl) {
    int tile = tile0 + blockIdx.y;
    if (tile >= *ntiles) return 0;
    *tl = tiles[tile];
    return tl->x >= e_lo && tl->x <= e_hi;
}

/* The lanes of a warp over the 16-byte chunks of weight rows with `chunks` chunks: LPO lanes per row
 * (32, or the largest power of two <= chunks when chunks < 32), so 32 / LPO rows side by side (lane l:
 * chunks l % LPO, + LPO, ... of row l / LPO of each group). Fixed by the weight's shape, never by
 * the rows of a call. */
__device__ __forceinline__ int moe_lpo(int chunks) {
    int l = 32;
    while (l > chunks) l >>= 1;
    return l;
}

/* Sum of v over the LPO lanes of this lane's group (butterfly; the same order for every row). */
__device__ __forceinline__ float moe_group_sum(float v, int lpo) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        if (o < lpo) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* h[slot][n] = silu(gate_n · x_row) · (up_n · x_row) for MOE_GU_NO consecutive outputs from n0 of expert ex
 * and nr (<= RT) input rows xr (Hin floats each) of slots sl[0..nr) (RT = 1: the one slot j0), the
 * warp's lanes as moe_lpo says. A row's sums depend on nothing but its own row and the expert: the tiled
 * kernels (RT = 4 or 8) and the per-slot one (RT = 1) give the same bits. */
template <int F, int RT, int SM = 0>
__device__ __forceinline__ void moe_gu_rows(const moe_dex *ex, int nr, const float *const *xr, int xal, int Hin, int gs,
                                            int sdt, int n0, int lane, const int32_t *sl, int j0, float *h, int ldh) {
    constexpr int VPW = mf<F>::VPW, EPL = mf<F>::EPL, NO = MOE_GU_NO, XS = SM ? moe_sstride(EPL) : EPL;
    int N = ex->inter, chunks = Hin / EPL, G = F >= MF_Q8 ? Hin / gs : 1, lpo = moe_lpo(chunks), sub = 32 / lpo;
    int grp = lane / lpo;
    float ag[RT][NO], au[RT][NO];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int s = 0; s < NO; s++) ag[r][s] = au[r][s] = 0.f;
    constexpr int UNR = RT == 1 ? MOE_SLOT_UNROLL : 1;
#pragma unroll UNR
    for (int c = lane % lpo; c < chunks; c += lpo) {
        uint4 qg[NO], qu[NO];
        float sg[NO], bg[NO], su[NO], bu[NO];
#pragma unroll
        for (int s = 0; s < NO; s++) { /* slot s: output n0 + s·sub + grp */
            int o = s * sub + grp, n = n0 + o;
            qg[s] = qu[s] = make_uint4(0, 0, 0, 0);
            sg[s] = bg[s] = su[s] = bu[s] = 0.f;
            if (o < NO && n < N) {
                qg[s] = __ldg((const uint4 *)ex->w[0].d + (size_t)n * chunks + c);
                qu[s] = __ldg((const uint4 *)ex->w[1].d + (size_t)n * chunks + c);
                if (F >= MF_Q8) {
                    size_t gi = (size_t)n * G + (size_t)c * EPL / gs;
                    sg[s] = moe_sb(ex->w[0].s, sdt, gi), bg[s] = moe_sb(ex->w[0].b, sdt, gi);
                    su[s] = moe_sb(ex->w[1].s, sdt, gi), bu[s] = moe_sb(ex->w[1].b, sdt, gi);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < 4 * MOE_PARTS(F); j++) { /* part j of the chunk: outputs' values once, rows' inputs once */
            constexpr int PV = VPW / MOE_PARTS(F);
            float vg[NO][PV], vu[NO][PV];
#pragma unroll
            for (int s = 0; s < NO; s++) {
                if (s * sub >= NO) break;
                moe_deq_part<F, PV>(qg[s], j, sg[s], bg[s], vg[s]);
                moe_deq_part<F, PV>(qu[s], j, su[s], bu[s], vu[s]);
            }
#pragma unroll
            for (int r = 0; r < RT; r++) {
                if (r >= nr) break;
                float xv[PV];
                moe_ldx<PV, SM>(xr[r] + (size_t)c * XS + j * PV, xal, xv);
#pragma unroll
                for (int s = 0; s < NO; s++) {
                    if (s * sub >= NO) break;
#pragma unroll
                    for (int i = 0; i < PV; i++)
                        ag[r][s] = fmaf(xv[i], vg[s][i], ag[r][s]), au[r][s] = fmaf(xv[i], vu[s][i], au[r][s]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RT; r++) {
        if (r >= nr) break;
#pragma unroll
        for (int s = 0; s < NO; s++) {
            if (s * sub >= NO) break;
            float g = moe_group_sum(ag[r][s], lpo), u = moe_group_sum(au[r][s], lpo);
            int o = s * sub + grp, n = n0 + o;
            if (lane % lpo == 0 && o < NO && n < N) h[(size_t)(RT == 1 ? j0 : sl[r]) * ldh + n] = cu_silu(g) * u;
        }
    }
}

/* h[slot][n] = silu(gate_n · x_row) · (up_n · x_row) for the rows of one tile; a warp computes
 * MOE_GU_NO consecutive outputs n at a time, the block's warps every gridDim.x · MOE_WARPS · MOE_GU_NO-th
 * group of them (moe_tile_grid), its lanes as moe_lpo says. Gate and up of an expert share format F (group
 * gs, scale dtype sdt); x rows are Hin floats. SM: the tile's rows staged in shared memory first
 * (moe_stage, moe_sstride(EPL) floats a chunk), so that a lane's read of its own chunk does not cost a
 * wavefront of its own (the unstaged read kept these kernels on L1, as it had the per-slot ones). */
template <int F, int SM, int RT>
__global__ void __launch_bounds__(32 * MOE_WARPS, MOE_TILE_BLOCKS)
    k_moe_gu(const moe_dex *tab, const int4 *tiles, const int *ntiles, int tile0, int e_lo, int e_hi,
             const int32_t *slots, int RK, int K, const float *x, int ldx, int xal, int Hin, int gs, int sdt,
             float *h, int ldh) {
    CU_PDL_ENTRY();
    extern __shared__ float4 moe_sm[];
    int4 tl;
    if (!moe_tile(tiles, ntiles, tile0, e_lo, e_hi, &tl)) return; /* the whole block: tl is the block's */
    const moe_dex *ex = &tab[tl.x];
    int N = ex->inter, nr = tl.z, lane = threadIdx.x & 31;
    const int32_t *sl = slots + tl.y;
    const float *xr[RT];
#pragma unroll
    for (int r = 0; r < RT; r++) xr[r] = r < nr ? x + (size_t)row_of_slot(sl[r], RK, K) * ldx : x;
    if (SM) {
        constexpr int EPL = mf<F>::EPL;
        float *xs = (float *)moe_sm;
        size_t rs = (size_t)(Hin / EPL) * moe_sstride(EPL);
#pragma unroll
        for (int r = 0; r < RT; r++)
            if (r < nr) moe_stage<EPL>(xs + r * rs, xr[r], Hin, xal, threadIdx.x, blockDim.x);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < RT; r++) xr[r] = xs + r * rs;
    }
    for (int n0 = (blockIdx.x * MOE_WARPS + (threadIdx.x >> 5)) * MOE_GU_NO; n0 < N; n0 += gridDim.x * MOE_WARPS * MOE_GU_NO)
        moe_gu_rows<F, RT, SM>(ex, nr, xr, xal, Hin, gs, sdt, n0, lane, sl, 0, h, ldh);
}

/* The same for one slot a grid row (blockIdx.y = slot j: routed t·K + k with expert idx[j] for j < RK,
 * the shared expert E of row j − RK after them) with no plan: calls of few rows (moe_slots). */
template <int F, int SM>
__global__ void __launch_bounds__(32 * MOE_WARPS, 3)
    k_moe_gu_slot(const moe_dex *tab, const int32_t *idx, int E, int RK, int K, const float *x, int ldx, int xal,
                  int Hin, int gs, int sdt, float *h, int ldh) {
    CU_PDL_ENTRY();
    extern __shared__ float4 moe_sm[];
    int j = blockIdx.y, lane = threadIdx.x & 31, n0 = (blockIdx.x * MOE_WARPS + (threadIdx.x >> 5)) * MOE_GU_NO;
    const float *xr[1] = {x + (size_t)row_of_slot(j, RK, K) * ldx};
    const moe_dex *ex = &tab[j < RK ? idx[j] : E]; /* its loads in flight during the staging */
    int N = ex->inter;
    if (SM) { /* the block's one input row, staged once for its warps (moe_stage) */
        moe_stage<mf<F>::EPL>((float *)moe_sm, xr[0], Hin, xal, threadIdx.x, blockDim.x);
        __syncthreads();
        xr[0] = (const float *)moe_sm;
    }
    if (n0 >= N) return;
    moe_gu_rows<F, 1, SM>(ex, 1, xr, xal, Hin, gs, sdt, n0, lane, NULL, j, h, ldh);
}

/* Down sums of MOE_DN_NO consecutive outputs from n0 of expert ex for nr (<= RT) rows hr of its width
 * (group-summed: v[r][s] for output n0 + s·sub + grp); like moe_gu_rows, the same bits for any RT. */
template <int F, int RT, int SM = 0, int NO = MOE_DN_NO>
__device__ __forceinline__ void moe_down_sums(const moe_dex *ex, int nr, const float *const *hr, int Hout, int gs,
                                              int sdt, int n0, int lane, float (*v)[NO]) {
    constexpr int VPW = mf<F>::VPW, EPL = mf<F>::EPL, XS = SM ? moe_sstride(EPL) : EPL;
    int Kin = ex->inter, chunks = Kin / EPL, G = F >= MF_Q8 ? Kin / gs : 1, lpo = moe_lpo(chunks), sub = 32 / lpo;
    int grp = lane / lpo;
    float acc[RT][NO];
#pragma unroll
    for (int r = 0; r < RT; r++)
#pragma unroll
        for (int s = 0; s < NO; s++) acc[r][s] = 0.f;
    constexpr int UNR = RT == 1 ? MOE_SLOT_UNROLL : 1;
#pragma unroll UNR
    for (int c = lane % lpo; c < chunks; c += lpo) {
        uint4 q[NO];
        float sc[NO], bi[NO];
#pragma unroll
        for (int s = 0; s < NO; s++) {
            int o = s * sub + grp, n = n0 + o;
            q[s] = make_uint4(0, 0, 0, 0);
            sc[s] = bi[s] = 0.f;
            if (o < NO && n < Hout) {
                q[s] = __ldg((const uint4 *)ex->w[2].d + (size_t)n * chunks + c);
                if (F >= MF_Q8) {
                    size_t gi = (size_t)n * G + (size_t)c * EPL / gs;
                    sc[s] = moe_sb(ex->w[2].s, sdt, gi), bi[s] = moe_sb(ex->w[2].b, sdt, gi);
                }
            }
        }
#pragma unroll
        for (int j = 0; j < 4 * MOE_PARTS(F); j++) { /* part j of the chunk: outputs' values once, rows' inputs once */
            constexpr int PV = VPW / MOE_PARTS(F);
            float w[NO][PV];
#pragma unroll
            for (int s = 0; s < NO; s++) {
                if (s * sub >= NO) break;
                moe_deq_part<F, PV>(q[s], j, sc[s], bi[s], w[s]);
            }
#pragma unroll
            for (int r = 0; r < RT; r++) {
                if (r >= nr) break;
                float xv[PV];
                moe_ldx<PV, SM>(hr[r] + (size_t)c * XS + j * PV, 1, xv);
#pragma unroll
                for (int s = 0; s < NO; s++) {
                    if (s * sub >= NO) break;
#pragma unroll
                    for (int i = 0; i < PV; i++) acc[r][s] = fmaf(xv[i], w[s][i], acc[r][s]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RT; r++) {
        if (r >= nr) break;
#pragma unroll
        for (int s = 0; s < NO; s++) {
            if (s * sub >= NO) break;
            v[r][s] = moe_group_sum(acc[r][s], lpo);
        }
    }
}

/* yk[slot][n] = down_n · h[slot] for the rows of one tile (n < Hout, NO = MOE_DN_NO_RT(RT) consecutive outputs
 * a warp at a time, the block's warps every gridDim.x · MOE_WARPS · NO-th group; inputs the expert's
 * width I; lanes as moe_lpo says; SM: the tile's rows of h staged as in k_moe_gu, ldh floats a row). */
template <int F, int SM, int RT>
__global__ void __launch_bounds__(32 * MOE_WARPS, MOE_TILE_BLOCKS)
    k_moe_down(const moe_dex *tab, const int4 *tiles, const int *ntiles, int tile0, int e_lo, int e_hi,
               const int32_t *slots, const float *h, int ldh, int Hout, int gs, int sdt, float *yk) {
    CU_PDL_ENTRY();
    extern __shared__ float4 moe_sm[];
    int4 tl;
    if (!moe_tile(tiles, ntiles, tile0, e_lo, e_hi, &tl)) return; /* the whole block */
    const moe_dex *ex = &tab[tl.x];
    int nr = tl.z, lane = threadIdx.x & 31;
    const int32_t *sl = slots + tl.y;
    const float *hr[RT];
#pragma unroll
    for (int r = 0; r < RT; r++) hr[r] = h + (size_t)(r < nr ? sl[r] : 0) * ldh;
    if (SM) {
        constexpr int EPL = mf<F>::EPL;
        float *hs = (float *)moe_sm;
        size_t rs = (size_t)(ldh / EPL) * moe_sstride(EPL);
#pragma unroll
        for (int r = 0; r < RT; r++)
            if (r < nr) moe_stage<EPL>(hs + r * rs, hr[r], ex->inter, 1, threadIdx.x, blockDim.x);
        __syncthreads();
#pragma unroll
        for (int r = 0; r < RT; r++) hr[r] = hs + r * rs;
    }
    int lpo = moe_lpo(ex->inter / mf<F>::EPL), sub = 32 / lpo, grp = lane / lpo;
    constexpr int NO = MOE_DN_NO_RT(RT);
    for (int n0 = (blockIdx.x * MOE_WARPS + (threadIdx.x >> 5)) * NO; n0 < Hout; n0 += gridDim.x * MOE_WARPS * NO) {
        float v[RT][NO];
        moe_down_sums<F, RT, SM, NO>(ex, nr, hr, Hout, gs, sdt, n0, lane, v);
#pragma unroll
        for (int r = 0; r < RT; r++) {
            if (r >= nr) break;
#pragma unroll
            for (int s = 0; s < NO; s++) {
                if (s * sub >= NO) break;
                int o = s * sub + grp, n = n0 + o;
                if (lane % lpo == 0 && o < NO && n < Hout) yk[(size_t)sl[r] * Hout + n] = v[r][s];
            }
        }
    }
}

/* The down projections of row t = blockIdx.y's slots and their combine, for MOE_DN_NO outputs from n0 =
 * blockIdx.x · MOE_DN_NO: warp k < K computes them for routed slot t·K + k (expert idx[t·K + k]), warp K for
 * the shared slot (expert E) when `shared`; then out[t][n] = Σ_k w[t][k] · y_k in slot order, + sigmoid(shg[t])
 * (1 without shg) · y_shared — k_moe_combine's expression on moe_down_sums' values, so the tiled path's bits,
 * with no plan and no yk round trip: calls of few rows (moe_slots). blockDim.x = 32 · (K + shared). */
template <int F, int SM>
__global__ void __launch_bounds__(32 * MOE_SLOT_MAX, 1)
    k_moe_down_slots(const moe_dex *tab, const int32_t *idx, const float *wts, int E, int R, int K, int shared,
                     const float *shg, const float *h, int ldh, int Hout, int gs, int sdt, float *out, int ldo) {
    CU_PDL_ENTRY();
    __shared__ float part[MOE_SLOT_MAX][MOE_DN_NO];
    extern __shared__ float4 moe_sm[];
    int t = blockIdx.y, k = threadIdx.x >> 5, lane = threadIdx.x & 31, n0 = blockIdx.x * MOE_DN_NO;
    int j = k < K ? t * K + k : R * K + t;
    const moe_dex *ex = &tab[k < K ? idx[j] : E];
    const float *hr[1] = {h + (size_t)j * ldh};
    if (SM) { /* each warp stages its slot's row (ldh floats a warp: the widest expert, moe_stage) */
        float *hs = (float *)moe_sm + (size_t)k * (ldh / mf<F>::EPL) * moe_sstride(mf<F>::EPL);
        moe_stage<mf<F>::EPL>(hs, hr[0], ex->inter, 1, lane, 32);
        __syncwarp();
        hr[0] = hs;
    }
    float v[1][MOE_DN_NO];
    moe_down_sums<F, 1, SM>(ex, 1, hr, Hout, gs, sdt, n0, lane, v);
    int lpo = moe_lpo(ex->inter / mf<F>::EPL), sub = 32 / lpo, grp = lane / lpo;
#pragma unroll
    for (int s = 0; s < MOE_DN_NO; s++) {
        if (s * sub >= MOE_DN_NO) break;
        int o = s * sub + grp;
        if (lane % lpo == 0 && o < MOE_DN_NO) part[k][o] = v[0][s];
    }
    __syncthreads();
    int o = threadIdx.x, n = n0 + o;
    if (o >= MOE_DN_NO || n >= Hout) return;
    float acc = 0.f;
    for (int i = 0; i < K; i++) acc += wts[(size_t)t * K + i] * part[i][o];
    if (shared) acc += (shg ? cu_sigmoid(shg[t]) : 1.0f) * part[K][o];
    out[(size_t)t * ldo + n] = acc;
}

/* out[t] = Σ_k w[t][k] · yk[t·K + k] in slot order, then + sigmoid(shg[t]) (1 when shg is NULL) ·
 * yk[R·K + t] when `shared`. */
__global__ void k_moe_combine(float *out, int ldo, const float *yk, const float *w, int R, int K, int H, int shared,
                              const float *shg) {
    CU_PDL_ENTRY();
    int h = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (h >= H) return;
    float acc = 0.f;
    for (int k = 0; k < K; k++) acc += w[(size_t)t * K + k] * yk[((size_t)t * K + k) * H + h];
    if (shared) acc += (shg ? cu_sigmoid(shg[t]) : 1.0f) * yk[((size_t)R * K + t) * H + h];
    out[(size_t)t * ldo + h] = acc;
}

static void moe_combine(be_moe_scratch *f, float *out, int ldo, int R, int shared, const float *shg) {
    cu_launch(k_moe_combine, dim3((f->H + 255) / 256, R), 256, 0, out, ldo, (const float *)f->d_yk,
              (const float *)f->d_wts, R, f->K, f->H, shared, shg);
    CU_LAUNCHED("moe combine");
}

/* ------------------------------------------------------------------ the layer table */

static int fmt_kind(const be_weight *w) {
    switch (w->dtype) {
    case DT_F32: return MF_F32;
    case DT_F16: return MF_F16;
    case DT_BF16: return MF_BF16;
    default: return w->bits == 8 ? MF_Q8 : MF_Q4;
    }
}

static moe_fmt fmt_of(const be_weight *w) {
    moe_fmt f = {fmt_kind(w), 0, 0};
    if (f.F >= MF_Q8) f.gs = w->group_size, f.sdt = (int)w->scale_dtype;
    return f;
}

static int fmt_eq(moe_fmt a, moe_fmt b) { return a.F == b.F && a.gs == b.gs && a.sdt == b.sdt; }
static int fmt_epl(moe_fmt f) { return f.F == MF_F32 ? 4 : f.F == MF_Q8 ? 16 : f.F == MF_Q4 ? 32 : 8; }

/* 1 when x (gate, up: I x H; down: H x I) can be read by the device kernels in formats gu / dn. */
static int expert_fits(const moe_expert *x, int I, int H, moe_fmt gu, moe_fmt dn) {
    const be_weight *g = &x->gate, *u = &x->up, *d = &x->down;
    if (g->dtype != DT_F32 && g->dtype != DT_F16 && g->dtype != DT_BF16 && g->dtype != DT_U32) return 0;
    if (d->dtype != DT_F32 && d->dtype != DT_F16 && d->dtype != DT_BF16 && d->dtype != DT_U32) return 0;
    if (!fmt_eq(fmt_of(g), gu) || !fmt_eq(fmt_of(u), gu) || !fmt_eq(fmt_of(d), dn)) return 0;
    if (g->rows != I || u->rows != I || g->cols != H || u->cols != H || d->rows != H || d->cols != I) return 0;
    if (H % fmt_epl(gu) || I % fmt_epl(dn)) return 0;
    if (gu.F >= MF_Q8 && (gu.gs < fmt_epl(gu) || H % gu.gs)) return 0;
    if (dn.F >= MF_Q8 && (dn.gs < fmt_epl(dn) || I % dn.gs)) return 0;
    return 1;
}

static moe_dex dex_of(cu_ctx *c, const moe_expert *x, int I) {
    moe_dex d;
    memset(&d, 0, sizeof d);
    const be_weight *w[3] = {&x->gate, &x->up, &x->down};
    for (int i = 0; i < 3; i++) {
        const cu_wdev *v = cu_weight(c, w[i]);
        d.w[i] = (moe_dw){v->data, v->scales, v->biases};
    }
    d.inter = I;
    return d;
}

/* The layer entry of w in f (built now on first sight: formats checked, device table uploaded). The
 * table holds the experts' device copies as they are then: a weight_prepare of an expert after the
 * layer's first forward through this scratch (a re-upload at a reused host address) would leave it
 * stale. Loading prepares every weight before the first forward, and scratch lives with a state. */
static const moe_layer *layer_of(be_backend *be, be_moe_scratch *f, const moe_weights *w) {
    for (int i = 0; i < f->n_layers; i++)
        if (f->layers[i].key == w->experts) return &f->layers[i];
    if (f->n_layers == f->cap_layers) {
        int nc = f->cap_layers ? 2 * f->cap_layers : 64;
        moe_layer *nl = (moe_layer *)realloc(f->layers, sizeof *nl * (size_t)nc);
        if (!nl) cu_check(cudaErrorMemoryAllocation, "MoE layer table");
        f->layers = nl, f->cap_layers = nc;
    }
    moe_layer *L = &f->layers[f->n_layers++];
    memset(L, 0, sizeof *L);
    L->key = w->experts;
    int E = w->router.n_experts, H = w->router_w.cols, I = w->inter, S = w->shared_inter;
    L->gu = fmt_of(&w->experts[0].gate), L->dn = fmt_of(&w->experts[0].down);
    int ok = I > 0 && I <= f->I && H == f->H && E == f->E && w->router.top_k == f->K;
    for (int e = 0; ok && e < E; e++) ok = expert_fits(&w->experts[e], I, H, L->gu, L->dn);
    if (ok && S > 0) {
        L->sgu = fmt_of(&w->shared.gate), L->sdn = fmt_of(&w->shared.down);
        ok = S <= f->I && expert_fits(&w->shared, S, H, L->sgu, L->sdn);
        L->merged = fmt_eq(L->sgu, L->gu) && fmt_eq(L->sdn, L->dn);
    }
    L->ok = ok;
    if (!ok) return L;
    cu_ctx *c = cu_of(be);
    moe_dex *h = (moe_dex *)calloc((size_t)E + 1, sizeof *h);
    if (!h) cu_check(cudaErrorMemoryAllocation, "MoE expert table");
    for (int e = 0; e < E; e++) h[e] = dex_of(c, &w->experts[e], I);
    if (S > 0) h[E] = dex_of(c, &w->shared, S);
    cu_graph_break();
    if (dev_alloc((void **)&L->tab, sizeof *h * ((size_t)E + 1))) cu_check(cudaErrorMemoryAllocation, "MoE expert table");
    cu_memcpy_sync(L->tab, h, sizeof *h * ((size_t)E + 1), cudaMemcpyHostToDevice, "MoE expert table");
    free(h);
    L->bias = w->router.correction_bias ? cu_vec(c, w->router.correction_bias, sizeof(float) * (size_t)E) : NULL;
    return L;
}

/* ------------------------------------------------------------------ launches */

/* L(F) with F the kernels' format constant for format kind k (MF_*). */
#define MOE_FMT_SWITCH(k, L)                                                                                           \
    do {                                                                                                               \
        switch (k) {                                                                                                   \
        case MF_F32: L(MF_F32); break;                                                                                 \
        case MF_F16: L(MF_F16); break;                                                                                 \
        case MF_BF16: L(MF_BF16); break;                                                                               \
        case MF_Q8: L(MF_Q8); break;                                                                                   \
        default: L(MF_Q4); break;                                                                                      \
        }                                                                                                              \
    } while (0)

/* Blocks a tile takes for n output groups of a block's warps (cu_set.moe_tloop groups a block, at least 1). */
static int tile_blocks(int n) {
    int per = cu_set.moe_tloop > 1 ? cu_set.moe_tloop : 1;
    return (n + per - 1) / per;
}

/* Shared memory a tiled block stages its rows in (rt rows in format fm, each row_stride floats wide before
 * padding), or 0 when staging is off ($MTPLX_CUDA_MOE_TSTAGE=0) or would not fit MOE_TSTAGE_MAX (the kernels
 * then read the rows from global memory: the same bits). */
static size_t tile_stage_bytes(moe_fmt fm, int row_stride, int rt) {
    int epl = fmt_epl(fm);
    size_t b = sizeof(float) * rt * (size_t)(row_stride / epl) * moe_sstride(epl);
    return cu_set.moe_tstage && b <= MOE_TSTAGE_MAX ? b : 0;
}

/* Lets kernel fn take sm bytes of dynamic shared memory when that is over the 48 KB default (each launch
 * asks: a cheap attribute call, and no per-instance flag to keep). */
static void tile_allow(const void *fn, size_t sm) {
    if (sm > 48 * 1024) CU_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm), "MoE smem");
}

/* k_moe_gu / k_moe_down in format fm over tiles tile0 .. tile0 + ny - 1, for experts e_lo .. e_hi; nx output
 * groups of MOE_WARPS · MOE_GU_NO outputs cover the widest expert. */
static void launch_gu(moe_fmt fm, be_moe_scratch *f, const moe_layer *L, int tile0, int ny, int e_lo, int e_hi,
                      int RK, const float *x, int ldx, int xal, int nx) {
    dim3 grid(tile_blocks(nx), ny);
    int H = f->H, rt = tile_rows();
    size_t sm = tile_stage_bytes(fm, H, rt);
#define GU2(F_, SM_, RT_)                                                                                               \
    (tile_allow((const void *)k_moe_gu<F_, SM_, RT_>, sm),                                                              \
     cu_launch(k_moe_gu<F_, SM_, RT_>, grid, 32 * MOE_WARPS, sm, (const moe_dex *)L->tab, (const int4 *)f->d_tiles,   \
               (const int *)f->d_ntiles, tile0, e_lo, e_hi, (const int32_t *)f->d_slots, RK, f->K, x, ldx, xal, H,     \
               fm.gs, fm.sdt, f->d_h, f->ldh))
#define GU1(F_, SM_) (rt == MOE_RT_MAX ? GU2(F_, SM_, MOE_RT_MAX) : GU2(F_, SM_, MOE_RT_MIN))
#define GU(F_) (sm ? GU1(F_, 1) : GU1(F_, 0))
    MOE_FMT_SWITCH(fm.F, GU);
#undef GU
#undef GU1
#undef GU2
    CU_LAUNCHED("moe gate/up");
}

static void launch_down(moe_fmt fm, be_moe_scratch *f, const moe_layer *L, int tile0, int ny, int e_lo, int e_hi) {
    int rt = tile_rows(), per = MOE_WARPS * MOE_DN_NO_RT(rt);
    dim3 grid(tile_blocks((f->H + per - 1) / per), ny);
    size_t sm = tile_stage_bytes(fm, f->ldh, rt);
#define DN2(F_, SM_, RT_)                                                                                               \
    (tile_allow((const void *)k_moe_down<F_, SM_, RT_>, sm),                                                            \
     cu_launch(k_moe_down<F_, SM_, RT_>, grid, 32 * MOE_WARPS, sm, (const moe_dex *)L->tab, (const int4 *)f->d_tiles, \
               (const int *)f->d_ntiles, tile0, e_lo, e_hi, (const int32_t *)f->d_slots, (const float *)f->d_h, f->ldh, \
               f->H, fm.gs, fm.sdt, f->d_yk))
#define DN1(F_, SM_) (rt == MOE_RT_MAX ? DN2(F_, SM_, MOE_RT_MAX) : DN2(F_, SM_, MOE_RT_MIN))
#define DN(F_) (sm ? DN1(F_, 1) : DN1(F_, 0))
    MOE_FMT_SWITCH(fm.F, DN);
#undef DN
#undef DN1
#undef DN2
    CU_LAUNCHED("moe down");
}

/* 1 when a call of R rows of layer L may take the per-slot kernels (k_moe_gu_slot, k_moe_down_slots): few
 * enough rows (cu_set.moe_slots), at most MOE_SLOT_MAX slots a row, and a shared expert, if any, in the
 * routed experts' format (one template instance for all of a row's slots). */
static int moe_slots_fit(const moe_layer *L, int R, int K, int S) {
    return R <= cu_set.moe_slots && K + (S > 0) <= MOE_SLOT_MAX && (S <= 0 || L->merged);
}

/* The per-slot path: gate / up a grid row per slot, then down and the combine a grid row per input row —
 * no plan, no yk round trip (two launches fewer than the tiled path, the same bits). */
static void moe_slots(be_moe_scratch *f, const moe_layer *L, float *out, int ldo, const float *x, int ldx, int R,
                      int S, int nxg, const float *shg) {
    int E = f->E, K = f->K, RK = R * K, ny = RK + (S > 0 ? R : 0), nw = K + (S > 0);
    int xal = ((uintptr_t)x % 16 == 0) && ldx % 4 == 0;
    moe_fmt gu = L->gu, dn = L->dn;
    /* shared memory of the staged rows (moe_stage): the block's input row; each warp's slot row */
    int egu = fmt_epl(gu), edn = fmt_epl(dn);
    size_t sgu = sizeof(float) * (size_t)(f->H / egu) * moe_sstride(egu);
    size_t sdn = sizeof(float) * (size_t)nw * ((f->ldh + edn - 1) / edn) * moe_sstride(edn);
    int gu_st = cu_set.moe_stage && sgu <= MOE_STAGE_MAX, dn_st = cu_set.moe_stage && sdn <= MOE_STAGE_MAX;
#define GUS(F_, SM_) cu_launch(k_moe_gu_slot<F_, SM_>, dim3(nxg, ny), 32 * MOE_WARPS, SM_ ? sgu : 0,                \
                               (const moe_dex *)L->tab, (const int32_t *)f->d_idx, E, RK, K, x, ldx, xal, f->H, gu.gs, \
                               gu.sdt, f->d_h, f->ldh)
#define GUS2(F_) (gu_st ? GUS(F_, 1) : GUS(F_, 0))
    MOE_FMT_SWITCH(gu.F, GUS2);
#undef GUS2
#undef GUS
    CU_LAUNCHED("moe gate/up slots");
    dim3 grid((f->H + MOE_DN_NO - 1) / MOE_DN_NO, R);
#define DNS(F_, SM_) cu_launch(k_moe_down_slots<F_, SM_>, grid, 32 * nw, SM_ ? sdn : 0, (const moe_dex *)L->tab,      \
                               (const int32_t *)f->d_idx, (const float *)f->d_wts, E, R, K, S > 0 ? 1 : 0, shg,      \
                               (const float *)f->d_h, f->ldh, f->H, dn.gs, dn.sdt, out, ldo)
#define DNS2(F_) (dn_st ? DNS(F_, 1) : DNS(F_, 0))
    MOE_FMT_SWITCH(dn.F, DNS2);
#undef DNS2
#undef DNS
    CU_LAUNCHED("moe down slots");
}

/* The route of R rows of router logits (f->d_router) into f->d_idx / f->d_wts, a warp a row (k_moe_route).
 * (Eight warps a row, each taking the top K of its share before one warp merges, kept the bits but was slower:
 * bench/cuda.md, "Session 33".) */
static void moe_route(be_moe_scratch *f, const moe_layer *L, const moe_router *rt, int R) {
    int E = f->E, K = f->K, G = rt->n_group > 1 ? rt->n_group : 1;
    size_t smem = sizeof(float) * (2 * (size_t)E + (size_t)G) + (size_t)(E > G ? E : G);
    cu_launch(k_moe_route, dim3(R), 32, smem, (const float *)f->d_router, E, K, (int)rt->score, rt->norm_topk, G,
              rt->topk_group, L->bias, rt->scaling, f->d_idx, f->d_wts);
    CU_LAUNCHED("moe route");
}

/* Router logits into f->d_router and, for a gated shared expert, its gate logit into f->d_shg: one matmul_n
 * launch when the two weights are of one kind (each output keeps its solo launch's bits: cuda_mma_sk.cu's
 * jobs), else two matmuls ($MTPLX_CUDA_MOE_GATE1=0 always two: a comparison knob). */
static void moe_router_logits(be_backend *be, be_moe_scratch *f, const moe_weights *w, const float *x, int ldx, int R) {
    int gated = w->shared_inter > 0 && w->shared_gated;
    const be_weight *a = &w->router_w, *b = &w->shared_gate;
    if (gated && cu_set.moe_gate1 && a->dtype == b->dtype && a->bits == b->bits && a->group_size == b->group_size) {
        be_mm_out mo[2] = {{f->d_router, f->E, a}, {f->d_shg, 1, b}};
        cu_matmul_n(be, mo, 2, x, ldx, R);
        return;
    }
    cu_matmul(be, f->d_router, f->E, x, ldx, R, a);
    if (gated) cu_matmul(be, f->d_shg, 1, x, ldx, R, b);
}

static void moe_device(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
                       be_moe_scratch *f, const moe_layer *L) {
    int E = f->E, K = f->K, S = w->shared_inter, RK = R * K;
    const moe_router *rt = &w->router;
    moe_router_logits(be, f, w, x, ldx, R);
    moe_route(f, L, rt, R);
    int Imax = S > w->inter ? S : w->inter;
    int nxg = (Imax + MOE_WARPS * MOE_GU_NO - 1) / (MOE_WARPS * MOE_GU_NO);
    const float *shg = S > 0 && w->shared_gated ? f->d_shg : NULL;
    if (moe_slots_fit(L, R, K, S)) {
        moe_slots(f, L, out, ldo, x, ldx, R, S, nxg, shg);
        return;
    }
    int nt = (E + 31) & ~31, trows = tile_rows();
    cu_launch(k_moe_plan, dim3(1), nt, 0, (const int32_t *)f->d_idx, R, K, E, S > 0 ? 1 : 0, trows, f->d_slots,
              f->d_tiles, f->d_ntiles);
    CU_LAUNCHED("moe plan");
    int ts = S > 0 ? tiles_shared(R, trows) : 0, tr = tiles_routed(R, E, K, trows);
    int xal = ((uintptr_t)x % 16 == 0) && ldx % 4 == 0;
    if (ts && !L->merged) {
        launch_gu(L->sgu, f, L, 0, ts, E, E, RK, x, ldx, xal, nxg);
        launch_gu(L->gu, f, L, ts, tr, 0, E - 1, RK, x, ldx, xal, nxg);
        launch_down(L->sdn, f, L, 0, ts, E, E);
        launch_down(L->dn, f, L, ts, tr, 0, E - 1);
    } else {
        launch_gu(L->gu, f, L, 0, ts + tr, 0, E, RK, x, ldx, xal, nxg);
        launch_down(L->dn, f, L, 0, ts + tr, 0, E);
    }
    moe_combine(f, out, ldo, R, S > 0, shg);
}

void cu_moe(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
            be_moe_scratch *f) {
    CU_PROF("moe");
    if (R <= 0) return;
    const moe_layer *L = cu_set.moe && R <= f->rows ? layer_of(be, f, w) : NULL;
    if (L && L->ok) moe_device(be, out, ldo, x, ldx, R, w, f, L);
    else moe_host_routed(be, out, ldo, x, ldx, R, w, f);
    cu_prep_clobber(out, ldo, R, f->H);
}
