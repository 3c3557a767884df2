/* cpu_moe.c — the CPU backend's routed-MoE block: router matmul, per-row top-k routing, the routed
 * experts grouped by expert (kern_moe_experts), and the shared expert with its optional sigmoid gate.
 * Every step is per row or row-invariant, so a row's output does not depend on its batch (moe.h). */
#include <stdlib.h>

#include "../../base/mem.h"
#include "../../kernels/act.h"
#include "../../kernels/moe.h"
#include "cpu_backend.h"

struct be_moe_scratch {
    float *router;       /* [R][E] router logits */
    int *idx;            /* [R][K] chosen experts */
    float *wts;          /* [R][K] their weights */
    float *route_tmp;    /* [2E] kern_moe_route scratch */
    float *sh_gate;      /* [R] shared-expert gate logits */
    float *sh_g, *sh_u;  /* [R][inter] shared expert's gate / up projections (then silu(g)·u in sh_g) */
    float *sh_out;       /* [R][H] shared expert output */
    int inter;           /* row stride of sh_g / sh_u */
    moe_scratch moe;     /* kern_moe_experts buffers */
};

void cpu_moe_scratch_free(be_backend *be, be_moe_scratch *f) {
    (void)be;
    if (!f) return;
    free(f->router);
    free(f->idx);
    free(f->wts);
    free(f->route_tmp);
    free(f->sh_gate);
    free(f->sh_g);
    free(f->sh_u);
    free(f->sh_out);
    kern_moe_scratch_free(&f->moe);
    free(f);
}

int cpu_moe_scratch_new(be_backend *be, int rows, int hidden, int inter, int n_experts, int top_k,
                        be_moe_scratch **out, mtplx_err *err) {
    size_t R = (size_t)rows, E = (size_t)n_experts, K = (size_t)top_k;
    be_moe_scratch *f = mem_zalloc(1, sizeof *f, "MoE scratch", err);
    *out = NULL;
    if (!f) return MTPLX_ENOMEM;
    if (!(f->router = mem_alloc(R * E, sizeof(float), "router logits", err))) goto fail;
    if (!(f->idx = mem_alloc(R * K, sizeof(int), "routes", err))) goto fail;
    if (!(f->wts = mem_alloc(R * K, sizeof(float), "route weights", err))) goto fail;
    if (!(f->route_tmp = mem_alloc(2 * E, sizeof(float), "router scratch", err))) goto fail;
    if (!(f->sh_gate = mem_alloc(R, sizeof(float), "shared gate", err))) goto fail;
    if (!(f->sh_out = mem_alloc(R * hidden, sizeof(float), "shared expert", err))) goto fail;
    if (!(f->sh_g = mem_alloc(R * (size_t)inter, sizeof(float), "shared expert", err))) goto fail;
    if (!(f->sh_u = mem_alloc(R * (size_t)inter, sizeof(float), "shared expert", err))) goto fail;
    f->inter = inter;
    if (kern_moe_scratch_init(&f->moe, rows, hidden, inter, err)) goto fail;
    *out = f;
    return 0;
fail:
    cpu_moe_scratch_free(be, f);
    return MTPLX_ENOMEM;
}

/* The routed-MoE block. Everything that reads x alone — the router, the shared expert's gate / up
 * projections and its sigmoid gate — goes to the pool as one kern_matmul_n (one hand-off instead of
 * three a layer; each output has kern_matmul's bits), then the routes, the routed experts, and the
 * shared expert's down projection added with its gate. */
void cpu_moe(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
             be_moe_scratch *f) {
    (void)be;
    int H = w->router_w.cols, E = w->router.n_experts, K = w->router.top_k, n = 0;
    kern_mm_out in[4];
    in[n++] = (kern_mm_out){f->router, E, &w->router_w};
    if (w->shared_inter > 0) {
        in[n++] = (kern_mm_out){f->sh_g, f->inter, &w->shared.gate};
        in[n++] = (kern_mm_out){f->sh_u, f->inter, &w->shared.up};
        if (w->shared_gated) in[n++] = (kern_mm_out){f->sh_gate, 1, &w->shared_gate};
    }
    kern_matmul_n(in, n, x, ldx, R);
    for (int t = 0; t < R; t++)
        kern_moe_route(&w->router, f->router + (size_t)t * E, f->idx + (size_t)t * K, f->wts + (size_t)t * K,
                       f->route_tmp);
    kern_moe_experts(out, ldo, x, ldx, R, w->experts, E, f->idx, f->wts, K, &f->moe);
    if (w->shared_inter <= 0) return;
    int I = w->shared.gate.rows;
    for (int t = 0; t < R; t++) {
        float *g = f->sh_g + (size_t)t * f->inter;
        const float *u = f->sh_u + (size_t)t * f->inter;
        for (int i = 0; i < I; i++) g[i] = act_silu(g[i]) * u[i];
    }
    kern_matmul(f->sh_out, H, f->sh_g, f->inter, R, &w->shared.down);
    for (int t = 0; t < R; t++) {
        float g = w->shared_gated ? act_sigmoid(f->sh_gate[t]) : 1.0f;
        float *o = out + (size_t)t * ldo;
        const float *y = f->sh_out + (size_t)t * H;
        for (int h = 0; h < H; h++) o[h] += g * y[h];
    }
}
