/* deepseek_v3.c — the deepseek_v3 family: its config fields (MLA shapes, grouped sigmoid routing),
 * multi-head latent attention (MLA), its MoE block's extras, and the MTP layer stored as
 * model.layers.{num_hidden_layers}.* (DeepSeek-V3 paper §2.2); the table entry is at the end.
 *
 * MLA per row (HF DeepseekV3Attention):
 *   q      = q_b(rmsnorm(q_a(x)))          (or q_proj(x) without q LoRA), per head [nope Dn | rope Dr]
 *   ckv    = kv_a(x) = [latent (kv_lora) | k_rope (Dr)]
 *   kvb    = kv_b(rmsnorm(latent)), per head [k_nope Dn | v Dv]
 *   key_h  = [k_nope_h | rope(k_rope)]  (one rotated rope key shared by every head)
 *   out_h  = softmax(q_h · key_h / sqrt(Dn + Dr)) · v_h ;  o_proj(concat out_h)
 * The KV cache keeps the expanded per-head keys and values ([nH][capacity][Dn+Dr] and
 * [nH][capacity][Dv]); caching the latent instead is a memory optimisation for later.
 * All norms of this family are plain RMSNorms (weight as stored). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../family.h"
#include "family_ops.h"

/* ------------------------------------------------------------------ config.json */

/* MLA shapes (q_lora_rank 0: a plain q_proj) and rope_interleave; the head is [nope | rope] wide
 * and only the rope part rotates. */
static int parse_attention(cfg_ctx *c, model_config *cfg) {
    int rc;
    if ((rc = cfg_int(c, "q_lora_rank", 0, 0, 0, &cfg->q_lora_rank)) ||
        (rc = cfg_int(c, "kv_lora_rank", 1, 0, 1, &cfg->kv_lora_rank)) ||
        (rc = cfg_int(c, "qk_nope_head_dim", 1, 0, 0, &cfg->qk_nope_head_dim)) ||
        (rc = cfg_int(c, "qk_rope_head_dim", 1, 0, 2, &cfg->qk_rope_head_dim)) ||
        (rc = cfg_int(c, "v_head_dim", 1, 0, 1, &cfg->v_head_dim)))
        return rc;
    if (cfg->qk_rope_head_dim % 2) return cfg_bad(c, "qk_rope_head_dim", "must be even");
    cfg->head_dim = cfg->qk_nope_head_dim + cfg->qk_rope_head_dim;
    cfg->rotary_dim = cfg->qk_rope_head_dim;
    return cfg_bool(c, "rope_interleave", 1, &cfg->rope_interleave);
}

/* n_routed_experts with grouped top-k (n_group / topk_group), sigmoid or softmax scores, shared
 * experts n_shared_experts × moe_intermediate_size wide; layers >= first_k_dense_replace and on
 * the moe_layer_freq grid are MoE. */
static int parse_moe(cfg_ctx *c, model_config *cfg) {
    int rc, step = 1;
    if ((rc = cfg_int(c, "n_routed_experts", 1, 0, 1, &cfg->n_experts)) ||
        (rc = cfg_int(c, "n_shared_experts", 0, 0, 0, &cfg->n_shared_experts)) ||
        (rc = cfg_int(c, "n_group", 0, 1, 1, &cfg->n_group)) || (rc = cfg_int(c, "topk_group", 0, 1, 1, &cfg->topk_group)) ||
        (rc = cfg_num(c, NULL, "routed_scaling_factor", 1.0, &cfg->routed_scaling_factor)) ||
        (rc = cfg_int(c, "first_k_dense_replace", 0, 0, 0, &cfg->first_k_dense_replace)) ||
        (rc = cfg_int(c, "moe_layer_freq", 0, 1, 1, &step)))
        return rc;
    json_t *sf = cfg_get(c, "scoring_func");
    cfg_copy_str(cfg->scoring_func, sizeof cfg->scoring_func, json_is_string(sf) ? json_string_value(sf) : "sigmoid");
    if (strcmp(cfg->scoring_func, "sigmoid") && strcmp(cfg->scoring_func, "softmax"))
        return err_set(c->err, MTPLX_EUNSUPPORTED, "%s: field \"scoring_func\" = \"%s\" is not supported", c->what,
                       cfg->scoring_func);
    if (cfg->n_experts % cfg->n_group || cfg->topk_group > cfg->n_group)
        return cfg_bad(c, "n_group", "must divide n_routed_experts and be >= topk_group");
    cfg->decoder_sparse_step = step;
    if ((rc = cfg_moe_common(c, cfg))) return rc;
    cfg->shared_expert_intermediate_size = cfg->n_shared_experts * cfg->moe_intermediate_size;
    for (int i = 0; i < cfg->n_layers; i++) cfg->layer_moe[i] = i >= cfg->first_k_dense_replace && i % step == 0;
    return 0;
}

/* ------------------------------------------------------------------ load */

static int check(const mtplx_model *m, mtplx_err *err) {
    const model_config *c = &m->cfg;
    if (c->kv_lora_rank <= 0 || c->qk_rope_head_dim <= 0 || c->qk_rope_head_dim % 2 || c->v_head_dim <= 0 ||
        c->qk_nope_head_dim < 0 || c->q_lora_rank < 0)
        return err_set(err, MTPLX_EBADFILE, "%s/config.json: MLA shapes impossible (kv_lora_rank %d, q_lora_rank %d, "
                       "qk_nope_head_dim %d, qk_rope_head_dim %d, v_head_dim %d)", m->dir, c->kv_lora_rank,
                       c->q_lora_rank, c->qk_nope_head_dim, c->qk_rope_head_dim, c->v_head_dim);
    return 0;
}

/* Sigmoid (or softmax) scores, grouped top-k, routed_scaling_factor on the weights. */
static void moe_router_of(const model_config *c, moe_router *r) {
    r->score = strcmp(c->scoring_func, "softmax") ? MOE_SCORE_SIGMOID : MOE_SCORE_SOFTMAX;
    r->n_group = c->n_group > 0 ? c->n_group : 1;
    r->topk_group = c->topk_group > 0 ? c->topk_group : 1;
    r->scaling = (float)c->routed_scaling_factor;
}

/* The router's e_score_correction_bias (when stored) and the ungated `shared_experts`. */
static int bind_moe_extra(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err) {
    const model_config *c = &m->cfg;
    char n[600];
    int rc;
    snprintf(n, sizeof n, "%smlp.gate.e_score_correction_bias", lp);
    if (st_find(m->st, n) && (rc = family_vec_bind(m, n, c->n_experts, 0.f, &w->router.correction_bias, err)))
        return rc;
    if (c->n_shared_experts <= 0) return 0;
    w->shared_inter = c->shared_expert_intermediate_size;
    snprintf(n, sizeof n, "%smlp.shared_experts.", lp);
    return family_bind_swiglu(m, n, w->shared_inter, c->hidden_size, &w->shared, err);
}

/* ------------------------------------------------------------------ forward sizes */

/* The cache keeps expanded per-head keys [Dn+Dr] and values [Dv] of every query head. */
static void kv_shape(const model_config *c, int *heads, int *k_width, int *v_width) {
    *heads = c->n_heads;
    *k_width = c->qk_nope_head_dim + c->qk_rope_head_dim;
    *v_width = c->v_head_dim;
}

/* Floats per row of the MLA projections in s->fam: qa | q | ckv | lat | kvb | att. */
static int scratch_row_floats(const model_config *c) {
    int nH = c->n_heads, Dn = c->qk_nope_head_dim, Dr = c->qk_rope_head_dim, Dv = c->v_head_dim;
    return c->q_lora_rank + nH * (Dn + Dr) + c->kv_lora_rank + Dr + c->kv_lora_rank + nH * (Dn + Dv) + nH * Dv;
}

/* ------------------------------------------------------------------ MLA */

int family_bind_mla(mtplx_model *m, const char *lp, mla_weights *w, mtplx_err *err) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, nH = c->n_heads, Dn = c->qk_nope_head_dim, Dr = c->qk_rope_head_dim, Dv = c->v_head_dim;
    int ql = c->q_lora_rank, kvl = c->kv_lora_rank, rc;
    char n[600];
    memset(w, 0, sizeof *w);
    if (ql > 0) {
        snprintf(n, sizeof n, "%sself_attn.q_a_proj", lp);
        if ((rc = family_linear_bind(m, n, ql, H, &w->q_a, err))) return rc;
        snprintf(n, sizeof n, "%sself_attn.q_a_layernorm.weight", lp);
        if ((rc = family_vec_bind(m, n, ql, 0.f, &w->q_a_norm, err))) return rc;
        snprintf(n, sizeof n, "%sself_attn.q_b_proj", lp);
        if ((rc = family_linear_bind(m, n, nH * (Dn + Dr), ql, &w->q_b, err))) return rc;
    } else {
        snprintf(n, sizeof n, "%sself_attn.q_proj", lp);
        if ((rc = family_linear_bind(m, n, nH * (Dn + Dr), H, &w->q_b, err))) return rc;
    }
    snprintf(n, sizeof n, "%sself_attn.kv_a_proj_with_mqa", lp);
    if ((rc = family_linear_bind(m, n, kvl + Dr, H, &w->kv_a, err))) return rc;
    snprintf(n, sizeof n, "%sself_attn.kv_a_layernorm.weight", lp);
    if ((rc = family_vec_bind(m, n, kvl, 0.f, &w->kv_a_norm, err))) return rc;
    snprintf(n, sizeof n, "%sself_attn.kv_b_proj", lp);
    if ((rc = family_linear_bind(m, n, nH * (Dn + Dv), kvl, &w->kv_b, err))) return rc;
    snprintf(n, sizeof n, "%sself_attn.o_proj", lp);
    return family_linear_bind(m, n, H, nH * Dv, &w->o, err);
}

void layer_mla(const mtplx_model *m, const mla_weights *w, int layer, const attn_seg *sg, int n, int R,
               fwd_scratch *s) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size, nH = c->n_heads, Dn = c->qk_nope_head_dim, Dr = c->qk_rope_head_dim, Dv = c->v_head_dim;
    int Dk = Dn + Dr, ql = c->q_lora_rank, kvl = c->kv_lora_rank, tw = s->fam_w;
    float eps = c->rms_norm_eps, scale = 1.0f / sqrtf((float)Dk) * m->fam.mla_softmax_mult;
    float *rows = s->fam;
    /* row layout: qa | q | ckv | lat | kvb | att */
    int o_qa = 0, o_q = ql, o_ckv = o_q + nH * Dk, o_lat = o_ckv + kvl + Dr, o_kvb = o_lat + kvl;
    int o_att = o_kvb + nH * (Dn + Dv);

    if (ql > 0) {
        be_matmul(be, rows + o_qa, tw, s->a, H, R, &w->q_a);
        be_rmsnorm_rows(be, rows + o_qa, tw, rows + o_qa, tw, w->q_a_norm, ql, R, eps);
        be_matmul(be, rows + o_q, tw, rows + o_qa, tw, R, &w->q_b);
    } else {
        be_matmul(be, rows + o_q, tw, s->a, H, R, &w->q_b);
    }
    be_matmul(be, rows + o_ckv, tw, s->a, H, R, &w->kv_a);
    be_rmsnorm_rows(be, rows + o_lat, tw, rows + o_ckv, tw, w->kv_a_norm, kvl, R, eps);
    be_matmul(be, rows + o_kvb, tw, rows + o_lat, tw, R, &w->kv_b);

    be_mla_args a = {rows, tw, o_q, o_ckv, o_kvb, o_att, nH, Dn, Dr, Dv, kvl, m->fam.rope_interleave,
                     m->rope_inv_freq, m->fam.rope_attn_factor, scale};
    be_attn_seq q[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) q[i] = (be_attn_seq){kv_table_view(sg[i].kv, layer), sg[i].pos0, sg[i].r0, sg[i].R};
    be->ops->mla_seqs(be, &a, q, n, s->attn);
    be_matmul(be, s->o, H, rows + o_att, tw, R, &w->o);
}

/* ------------------------------------------------------------------ MTP layer */

/* When the checkpoint holds `model.layers.{N}.eh_proj.weight` (N = num_hidden_layers), bind that
 * MTP layer (enorm, hnorm, eh_proj, its decoder block, shared_head.{norm,head}, its own
 * embed_tokens when present), set m->has_mtp and make HEAD_DRAFT its shared_head.head. Returns 0
 * (also when absent) or an error. */
static int bind_mtp_layer(mtplx_model *m, const char *prefix, mtplx_err *err) {
    const model_config *c = &m->cfg;
    family_model *f = &m->fam;
    int H = c->hidden_size, V = c->vocab_size, N = c->n_layers, rc;
    char lp[256], n[600];
    snprintf(lp, sizeof lp, "%slayers.%d.", prefix, N);
    snprintf(n, sizeof n, "%seh_proj.weight", lp);
    if (c->mtp_layers <= 0 || !st_find(m->st, n)) return 0;

    snprintf(n, sizeof n, "%sembed_tokens", lp);
    snprintf(n + strlen(n), sizeof n - strlen(n), ".weight");
    if (st_find(m->st, n)) {
        snprintf(n, sizeof n, "%sembed_tokens", lp);
        if ((rc = family_linear_view(m, n, V, H, &f->ds_embed, err))) return rc; /* rows looked up only */
    } else {
        f->ds_embed = m->embed;
    }
    snprintf(n, sizeof n, "%senorm.weight", lp);
    if ((rc = family_vec_bind(m, n, H, 0.f, &f->ds_enorm, err))) return rc;
    snprintf(n, sizeof n, "%shnorm.weight", lp);
    if ((rc = family_vec_bind(m, n, H, 0.f, &f->ds_hnorm, err))) return rc;
    snprintf(n, sizeof n, "%seh_proj", lp);
    if ((rc = family_linear_bind(m, n, H, 2 * H, &f->ds_eh_proj, err))) return rc;
    snprintf(n, sizeof n, "%sshared_head.norm.weight", lp);
    if ((rc = family_vec_bind(m, n, H, 0.f, &f->ds_head_norm, err))) return rc;
    snprintf(n, sizeof n, "%sshared_head.head", lp);
    if ((rc = family_linear_bind(m, n, V, H, &f->ds_head, err))) return rc;

    layer_weights *L = &m->mtp.layer;
    memset(L, 0, sizeof *L);
    L->mixer = MIXER_MLA;
    L->slot = 0;
    snprintf(n, sizeof n, "%sinput_layernorm.weight", lp);
    if ((rc = family_vec_bind(m, n, H, 0.f, &L->in_norm, err))) return rc;
    snprintf(n, sizeof n, "%spost_attention_layernorm.weight", lp);
    if ((rc = family_vec_bind(m, n, H, 0.f, &L->post_norm, err))) return rc;
    if ((rc = family_bind_mla(m, lp, &L->mla, err))) return rc;
    if (family_layer_is_moe(m, -1, lp)) {
        L->ffn = FFN_MOE;
        if ((rc = family_bind_moe(m, lp, &L->moe, err))) return rc;
    } else {
        int I = c->intermediate_size;
        L->ffn = FFN_DENSE;
        snprintf(n, sizeof n, "%smlp.gate_proj", lp);
        if ((rc = family_linear_bind(m, n, I, H, &L->mlp.gate, err))) return rc;
        snprintf(n, sizeof n, "%smlp.up_proj", lp);
        if ((rc = family_linear_bind(m, n, I, H, &L->mlp.up, err))) return rc;
        snprintf(n, sizeof n, "%smlp.down_proj", lp);
        if ((rc = family_linear_bind(m, n, H, I, &L->mlp.down, err))) return rc;
    }
    f->ds_mtp = 1;
    m->has_mtp = 1;
    m->draft_head = f->ds_head;
    return 0;
}

/* bind_mtp: the MTP layer, errors prefixed "MTP layer". */
static int bind_mtp(mtplx_model *m, const char *prefix, mtplx_err *err) {
    int rc = bind_mtp_layer(m, prefix, err);
    return rc ? err_prefix(err, "MTP layer") : 0;
}

/* The DeepSeek MTP layer over R gathered rows of n sequences: hid [R][H] (backend memory) and the
 * next tokens [R] in, the shared head's post-norm rows into out [R][H] (backend memory). */
static void mtp_rows(const mtplx_model *m, fwd_scratch *scr, const attn_seg *as, int n, const float *hid,
                       const int32_t *next, int R, float *out) {
    const model_config *c = &m->cfg;
    const family_model *f = &m->fam;
    const layer_weights *L = &m->mtp.layer;
    be_backend *be = m->be;
    int H = c->hidden_size, tw = scr->fam_w;
    float eps = c->rms_norm_eps;
    float *rows = scr->fam;
    size_t RH = (size_t)R * H;
    be_embed_norm_pair_rows(be, rows, tw, scr->a, &f->ds_embed, next, hid, H, f->ds_enorm, f->ds_hnorm, H, R, eps);
    be_matmul(be, scr->x, H, rows, tw, R, &f->ds_eh_proj);
    rows_rmsnorm(m, scr->a, scr->x, L->in_norm, R);
    layer_mla(m, &L->mla, 0, as, n, R, scr);
    be_add(be, scr->x, scr->o, RH);
    rows_rmsnorm(m, scr->a, scr->x, L->post_norm, R);
    layer_ffn(m, L, R, scr);
    be_add(be, scr->x, scr->o, RH);
    rows_rmsnorm(m, out, scr->x, f->ds_head_norm, R);
}

/* ------------------------------------------------------------------ the entry */

const model_family family_deepseek_v3 = {
    .arch = ARCH_DEEPSEEK_V3,
    .name = "deepseek_v3",
    .model_types = {"deepseek_v3"},
    .runnable = 1,
    .mtp = 1,
    .reason = "",
    .moe = 1,
    .parse_attention = parse_attention,
    .parse_moe = parse_moe,
    .attn_mixer = MIXER_MLA,
    .check = check,
    .moe_router = moe_router_of,
    .bind_moe_extra = bind_moe_extra,
    .bind_mtp = bind_mtp,
    .mtp_layout = MTP_LAYOUT_DEEPSEEK,
    .kv_shape = kv_shape,
    .scratch_row_floats = scratch_row_floats,
    .mtp_rows = mtp_rows,
};
