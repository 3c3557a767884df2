/* cuda_moe.cu — the CUDA backend's routed-MoE block: router matmul on the GPU, top-k routing of
 * each row on the host (the CPU's kern_moe_route, so the choice of experts is the CPU's bit for bit
 * given the same logits), the routed experts grouped by expert (gather, SwiGLU expert over its rows,
 * scatter into the row's slot k), then one combine kernel that adds each row's K slots in slot order
 * and the gated shared expert. Every step is per row or row-invariant (matmul), so a row's output
 * does not depend on which rows share the call (DESIGN.md §3). */
#include "cuda_internal.cuh"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../../kernels/moe.h"
}

struct be_moe_scratch {
    int rows, H, I, E, K;
    float *d_router;      /* [rows][E] router logits */
    float *h_router;      /* host copy */
    int *h_idx;           /* [rows][K] chosen experts (host) */
    float *h_wts;         /* [rows][K] their weights (host) */
    float *route_tmp;     /* [2E] kern_moe_route scratch */
    int32_t *h_list;      /* [2][rows·K] host: rows grouped by expert, then their slots t·K + k */
    int32_t *d_list;      /* device copy */
    int *count;           /* [E] rows per expert (host) */
    float *d_wts;         /* [rows][K] */
    float *d_xg;          /* [rows][H] gathered rows of one expert */
    float *d_g, *d_u;     /* [rows][I] */
    float *d_xo;          /* [rows][H] one expert's outputs */
    float *d_yk;          /* [rows][K][H] every row's K expert outputs */
    float *d_sh;          /* [rows][H] shared expert */
    float *d_shg;         /* [rows] shared gate logits */
};

void cu_moe_scratch_free(be_backend *be, be_moe_scratch *f) {
    (void)be;
    if (!f) return;
    cu_graph_break();
    float *dev[] = {f->d_router, f->d_wts, f->d_xg, f->d_g, f->d_u, f->d_xo, f->d_yk, f->d_sh, f->d_shg};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
    cudaFree(f->d_list);
    free(f->h_router);
    free(f->h_idx);
    free(f->h_wts);
    free(f->route_tmp);
    free(f->h_list);
    free(f->count);
    free(f);
}

int cu_moe_scratch_new(be_backend *be, int rows, int hidden, int inter, int n_experts, int top_k,
                       be_moe_scratch **out, mtplx_err *err) {
    *out = NULL;
    size_t R = (size_t)rows, E = (size_t)n_experts, K = (size_t)top_k, H = (size_t)hidden, I = (size_t)inter;
    be_moe_scratch *f = (be_moe_scratch *)calloc(1, sizeof *f);
    if (!f) return err_set(err, MTPLX_ENOMEM, "MoE scratch: out of host memory");
    f->rows = rows, f->H = hidden, f->I = inter, f->E = n_experts, f->K = top_k;
    f->h_router = (float *)malloc(sizeof(float) * R * E);
    f->h_idx = (int *)malloc(sizeof(int) * R * K);
    f->h_wts = (float *)malloc(sizeof(float) * R * K);
    f->route_tmp = (float *)malloc(sizeof(float) * 2 * E);
    f->h_list = (int32_t *)malloc(sizeof(int32_t) * 2 * R * K);
    f->count = (int *)malloc(sizeof(int) * E);
    int ok = f->h_router && f->h_idx && f->h_wts && f->route_tmp && f->h_list && f->count;
    cu_graph_break();
    struct {
        float **p;
        size_t n;
    } d[] = {{&f->d_router, R * E}, {&f->d_wts, R * K}, {&f->d_xg, R * H}, {&f->d_g, R * I}, {&f->d_u, R * I},
             {&f->d_xo, R * H},     {&f->d_yk, R * K * H}, {&f->d_sh, R * H}, {&f->d_shg, R}};
    for (size_t i = 0; ok && i < sizeof d / sizeof *d; i++)
        ok = cudaMalloc((void **)d[i].p, sizeof(float) * (d[i].n ? d[i].n : 1)) == cudaSuccess;
    if (ok) ok = cudaMalloc((void **)&f->d_list, sizeof(int32_t) * 2 * R * K) == cudaSuccess;
    if (!ok) {
        cudaGetLastError();
        cu_moe_scratch_free(be, f);
        return err_set(err, MTPLX_ENOMEM, "MoE scratch: %d rows x %d experts do not fit on the GPU", rows, n_experts);
    }
    *out = f;
    return 0;
}

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

/* out[t] = Σ_k w[t][k] · yk[t][k] in slot order, + sigmoid(shg[t]) · sh[t] (or 1 · sh[t] when not
 * gated; nothing without a shared expert). */
__global__ void k_combine(float *out, int ldo, const float *yk, const float *w, int K, int H, const float *sh,
                          const float *shg) {
    int h = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (h >= H) return;
    float acc = 0.f;
    for (int k = 0; k < K; k++) acc += w[(size_t)t * K + k] * yk[((size_t)t * K + k) * H + h];
    if (sh) acc += (shg ? cu_sigmoid(shg[t]) : 1.0f) * sh[(size_t)t * H + h];
    out[(size_t)t * ldo + h] = acc;
}

/* The SwiGLU expert x over n rows of a (stride lda) into y (stride H). */
static void expert_rows(be_backend *be, const moe_expert *x, const float *a, int lda, int n, float *y,
                        be_moe_scratch *f) {
    int I = x->gate.rows;
    cu_matmul(be, f->d_g, f->I, a, lda, n, &x->gate);
    cu_matmul(be, f->d_u, f->I, a, lda, n, &x->up);
    cu_swiglu(f->d_g, f->I, f->d_g, f->I, f->d_u, f->I, I, n);
    cu_matmul(be, y, f->H, f->d_g, f->I, n, &x->down);
}

void cu_moe(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
            be_moe_scratch *f) {
    CU_PROF("moe");
    if (R <= 0) return;
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
        k_gather<<<dim3((H + 255) / 256, c), 256, 0, CU_STREAM>>>(f->d_xg, x, ldx, f->d_list + at, H);
        CU_LAUNCHED("moe gather");
        expert_rows(be, &w->experts[e], f->d_xg, H, c, f->d_xo, f);
        k_scatter<<<dim3((H + 255) / 256, c), 256, 0, CU_STREAM>>>(f->d_yk, f->d_xo, f->d_list + n + at, H);
        CU_LAUNCHED("moe scatter");
        at += c;
    }
    const float *sh = NULL, *shg = NULL;
    if (w->shared_inter > 0) {
        expert_rows(be, &w->shared, x, ldx, R, f->d_sh, f);
        sh = f->d_sh;
        if (w->shared_gated) {
            cu_matmul(be, f->d_shg, 1, x, ldx, R, &w->shared_gate);
            shg = f->d_shg;
        }
    }
    k_combine<<<dim3((H + 255) / 256, R), 256, 0, CU_STREAM>>>(out, ldo, f->d_yk, f->d_wts, K, H, sh, shg);
    CU_LAUNCHED("moe combine");
}
