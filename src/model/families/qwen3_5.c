/* qwen3_5.c — the qwen3_5 family (dense) and qwen3_5_moe: hybrid Gated DeltaNet + gated attention
 * layers (the shared forward's defaults: config.c's hybrid fields, weights.c's binder), the `mtp.*`
 * MTP layer, and for the MoE variant its routed experts with a gated shared expert. The Qwen MTP
 * layer and the shared expert are also used by qwen3_next.c (qwen3_5.h). */
#include <stdio.h>

#include "../family.h"
#include "qwen3_5.h"

/* ------------------------------------------------------------------ MTP layer */

void qwen_mtp_rows(const mtplx_model *m, fwd_scratch *scr, const attn_seg *as, int n, const float *hid,
                   const int32_t *next, int R, float *out) {
    const mtp_weights *w = &m->mtp;
    const layer_weights *L = &w->layer;
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, bw = scr->big_w;
    float eps = m->cfg.rms_norm_eps;
    size_t RH = (size_t)R * H;
    be_embed_norm_pair_rows(be, scr->big, bw, scr->a, &m->embed, next, hid, H, w->pre_fc_norm_embedding,
                            w->pre_fc_norm_hidden, H, R, eps);
    be_matmul(be, scr->x, H, scr->big, bw, R, &w->fc);
    rows_rmsnorm(m, scr->a, scr->x, L->in_norm, R);
    layer_attention(m, &L->attn, 0, as, n, R, scr);
    be_add(be, scr->x, scr->o, RH);
    rows_rmsnorm(m, scr->a, scr->x, L->post_norm, R);
    layer_ffn(m, L, R, scr);
    be_add(be, scr->x, scr->o, RH);
    rows_rmsnorm(m, out, scr->x, w->norm, R);
}

/* ------------------------------------------------------------------ MoE */

int qwen_bind_shared_expert(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, rc;
    char n[600];
    if (c->shared_expert_intermediate_size <= 0) return 0;
    w->shared_inter = c->shared_expert_intermediate_size;
    snprintf(n, sizeof n, "%smlp.shared_expert.", lp);
    if ((rc = family_bind_swiglu(m, n, w->shared_inter, H, &w->shared, err))) return rc;
    w->shared_gated = 1;
    snprintf(n, sizeof n, "%smlp.shared_expert_gate", lp);
    return family_linear_bind(m, n, 1, H, &w->shared_gate, err);
}

/* num_experts and the shared expert's width; every layer is MoE. */
static int parse_moe(cfg_ctx *c, model_config *cfg) {
    int rc;
    if ((rc = cfg_int(c, "num_experts", 1, 0, 1, &cfg->n_experts)) ||
        (rc = cfg_int(c, "shared_expert_intermediate_size", 0, 0, 0, &cfg->shared_expert_intermediate_size)))
        return rc;
    cfg->decoder_sparse_step = 1;
    if ((rc = cfg_moe_common(c, cfg))) return rc;
    for (int i = 0; i < cfg->n_layers; i++) cfg->layer_moe[i] = 1;
    return 0;
}

/* HF Qwen3.5-MoE always renormalises the top-k weights, whatever norm_topk_prob says. */
static void moe_router_of(const model_config *c, moe_router *r) { r->norm_topk = 1; }

/* ------------------------------------------------------------------ the entries */

const model_family family_qwen3_5 = {
    .arch = ARCH_QWEN3_5,
    .name = "qwen3_5",
    .model_types = {"qwen3_5", "qwen3_5_text"},
    .runnable = 1,
    .mtp = 1,
    .reason = "",
    .hybrid = 1,
    .attn_mixer = MIXER_ATTN,
    .bind_mtp = model_bind_qwen_mtp,
    .mtp_layout = MTP_LAYOUT_QWEN,
    .mtp_rows = qwen_mtp_rows,
};

const model_family family_qwen3_5_moe = {
    .arch = ARCH_QWEN3_5_MOE,
    .name = "qwen3_5_moe",
    .model_types = {"qwen3_5_moe", "qwen3_5_moe_text"},
    .runnable = 1,
    .mtp = 1,
    .reason = "",
    .hybrid = 1,
    .moe = 1,
    .parse_moe = parse_moe,
    .attn_mixer = MIXER_ATTN,
    .moe_router = moe_router_of,
    .bind_moe_extra = qwen_bind_shared_expert,
    .bind_mtp = model_bind_qwen_mtp,
    .mtp_layout = MTP_LAYOUT_QWEN,
    .mtp_rows = qwen_mtp_rows,
};
