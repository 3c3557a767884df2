/* qwen3_next.c — the qwen3_next family: the Qwen hybrid layers with MoE every decoder_sparse_step-th
 * layer (except mlp_only_layers), a gated shared expert and the `mtp.*` MTP layer (both from
 * qwen3_5.c), and its own fused GDN input projections: in_proj_qkvz and in_proj_ba, grouped by key
 * head (docs/families.md), regrouped at run time into the split layout the shared GDN layer reads. */
#include <stdio.h>

#include "../family.h"
#include "qwen3_5.h"

/* ------------------------------------------------------------------ config.json */

/* num_experts, the shared expert, decoder_sparse_step; layer i is MoE when (i + 1) % step == 0 and
 * it is not listed in mlp_only_layers. */
static int parse_moe(cfg_ctx *c, model_config *cfg) {
    int rc, step = 1;
    if ((rc = cfg_int(c, "num_experts", 1, 0, 1, &cfg->n_experts)) ||
        (rc = cfg_int(c, "shared_expert_intermediate_size", 0, 0, 0, &cfg->shared_expert_intermediate_size)) ||
        (rc = cfg_int(c, "decoder_sparse_step", 0, 1, 1, &step)))
        return rc;
    cfg->decoder_sparse_step = step;
    if ((rc = cfg_moe_common(c, cfg))) return rc;
    for (int i = 0; i < cfg->n_layers; i++) cfg->layer_moe[i] = (i + 1) % step == 0;
    json_t *mlo = cfg_get(c, "mlp_only_layers");
    if (!mlo) return 0;
    if (!json_is_array(mlo)) return cfg_bad(c, "mlp_only_layers", "must be an array of layer indices");
    for (size_t i = 0; i < json_array_size(mlo); i++) {
        json_t *e = json_array_get(mlo, i);
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= cfg->n_layers)
            return err_set(c->err, MTPLX_EBADFILE, "%s: field \"mlp_only_layers\"[%zu] is not a layer index", c->what, i);
        cfg->layer_moe[json_integer_value(e)] = 0;
    }
    return 0;
}

/* ------------------------------------------------------------------ fused GDN projections */

/* Bind in_proj_qkvz [Hk·(2·Dk + 2·r·Dv)][H] and in_proj_ba [Hk·2·r][H] when the layer under lp
 * stores them (r = Hv/Hk); leaves w->fused 0 for a split-layout checkpoint. Returns 0 or an error. */
static int bind_gdn_fused(mtplx_model *m, const char *lp, gdn_fused_weights *w, mtplx_err *err) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, Hk = c->lin_k_heads, r = c->lin_v_heads / c->lin_k_heads;
    int G = 2 * c->lin_k_dim + 2 * r * c->lin_v_dim, rc;
    char n[600];
    snprintf(n, sizeof n, "%slinear_attn.in_proj_qkvz.weight", lp);
    if (!st_find(m->st, n)) return 0;
    snprintf(n, sizeof n, "%slinear_attn.in_proj_qkvz", lp);
    if ((rc = family_linear_bind(m, n, Hk * G, H, &w->qkvz, err))) return rc;
    snprintf(n, sizeof n, "%slinear_attn.in_proj_ba", lp);
    if ((rc = family_linear_bind(m, n, Hk * 2 * r, H, &w->ba, err))) return rc;
    w->fused = 1;
    return 0;
}

/* Floats per row of s->fam: one row of both fused projections. */
static int scratch_row_floats(const model_config *c) {
    if (c->lin_k_heads <= 0) return 0;
    int r = c->lin_v_heads / c->lin_k_heads;
    return c->lin_k_heads * (2 * c->lin_k_dim + 2 * r * c->lin_v_dim) + 2 * c->lin_v_heads;
}

/* The fused projections of R rows of a[R][H] into s->fam, then regrouped into the split-form
 * outputs: qkv rows [q all heads | k all heads | v all heads] at qkv (row stride ldqkv), z / b / a
 * rows at z, b, av (row stride ld), exactly as in_proj_qkv / z / b / a would write them. */
static void gdn_project(const mtplx_model *m, const gdn_fused_weights *w, const float *a, int R, float *qkv,
                        int ldqkv, float *z, float *b, float *av, int ld, fwd_scratch *s) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size, Hk = c->lin_k_heads, Dk = c->lin_k_dim, Dv = c->lin_v_dim;
    int r = c->lin_v_heads / Hk, G = 2 * Dk + 2 * r * Dv, kd = Hk * Dk;
    int tw = s->fam_w, ba_off = Hk * G;
    const size_t f = sizeof(float);
    be_matmul(be, s->fam, tw, a, H, R, &w->qkvz);
    be_matmul(be, s->fam + ba_off, tw, a, H, R, &w->ba);
    for (int t = 0; t < R; t++) {
        const float *src = s->fam + (size_t)t * tw;
        float *q = qkv + (size_t)t * ldqkv, *zr = z + (size_t)t * ld, *br = b + (size_t)t * ld, *ar = av + (size_t)t * ld;
        for (int hk = 0; hk < Hk; hk++) {
            const float *g = src + (size_t)hk * G;
            be_copy(be, q + hk * Dk, g, f * Dk);                                    /* q */
            be_copy(be, q + kd + hk * Dk, g + Dk, f * Dk);                          /* k */
            be_copy(be, q + 2 * kd + hk * r * Dv, g + 2 * Dk, f * r * Dv);          /* v */
            be_copy(be, zr + hk * r * Dv, g + 2 * Dk + r * Dv, f * r * Dv);         /* z */
            const float *ba = src + ba_off + hk * 2 * r;
            be_copy(be, br + hk * r, ba, f * r);                                    /* b */
            be_copy(be, ar + hk * r, ba + r, f * r);                                /* a */
        }
    }
}

/* ------------------------------------------------------------------ the entry */

const model_family family_qwen3_next = {
    .arch = ARCH_QWEN3_NEXT,
    .name = "qwen3_next",
    .model_types = {"qwen3_next"},
    .runnable = 1,
    .mtp = 1,
    .reason = "",
    .hybrid = 1,
    .moe = 1,
    .parse_moe = parse_moe,
    .attn_mixer = MIXER_ATTN,
    .bind_moe_extra = qwen_bind_shared_expert,
    .bind_gdn_fused = bind_gdn_fused,
    .bind_mtp = model_bind_qwen_mtp,
    .mtp_layout = MTP_LAYOUT_QWEN,
    .scratch_row_floats = scratch_row_floats,
    .gdn_project = gdn_project,
    .mtp_rows = qwen_mtp_rows,
};
