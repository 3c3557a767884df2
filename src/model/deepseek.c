/* deepseek.c — DeepSeek-V3: multi-head latent attention (MLA) and the MTP layer stored as
 * model.layers.{num_hidden_layers}.* (DeepSeek-V3 paper §2.2).
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

#include "family.h"

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

    for (int i = 0; i < n; i++) {
        be_mla_args a = {rows + (size_t)sg[i].r0 * tw, tw, o_q, o_ckv, o_kvb, o_att, nH, Dn, Dr, Dv, kvl,
                         m->fam.rope_interleave, m->rope_inv_freq, m->fam.rope_attn_factor, scale};
        be_seq_kv skv = kv_table_view(sg[i].kv, layer);
        be->ops->mla(be, &a, &skv, sg[i].pos0, sg[i].R, s->attn);
    }
    be_matmul(be, s->o, H, rows + o_att, tw, R, &w->o);
}

/* ------------------------------------------------------------------ MTP layer */

int deepseek_bind_mtp(mtplx_model *m, const char *prefix, mtplx_err *err) {
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
        if ((rc = family_linear_bind(m, n, V, H, &f->ds_embed, err))) return rc;
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

/* The DeepSeek MTP layer over R gathered rows of n sequences: hid [R][H] (backend memory) and the
 * next tokens [R] in, the shared head's post-norm rows into out [R][H] (backend memory). */
void deepseek_mtp_rows(const mtplx_model *m, fwd_scratch *scr, const attn_seg *as, int n, const float *hid,
                       const int32_t *next, int R, float *out) {
    const model_config *c = &m->cfg;
    const family_model *f = &m->fam;
    const layer_weights *L = &m->mtp.layer;
    be_backend *be = m->be;
    int H = c->hidden_size, tw = scr->fam_w;
    float eps = c->rms_norm_eps;
    float *rows = scr->fam;
    size_t RH = (size_t)R * H;
    be->ops->embed_rows(be, scr->a, H, &f->ds_embed, next, R);
    be_rmsnorm_rows(be, rows, tw, scr->a, H, f->ds_enorm, H, R, eps);
    be_rmsnorm_rows(be, rows + H, tw, hid, H, f->ds_hnorm, H, R, eps);
    be_matmul(be, scr->x, H, rows, tw, R, &f->ds_eh_proj);
    rows_rmsnorm(m, scr->a, scr->x, L->in_norm, R);
    layer_mla(m, &L->mla, 0, as, n, R, scr);
    be_add(be, scr->x, scr->o, RH);
    rows_rmsnorm(m, scr->a, scr->x, L->post_norm, R);
    layer_ffn(m, L, R, scr);
    be_add(be, scr->x, scr->o, RH);
    rows_rmsnorm(m, out, scr->x, f->ds_head_norm, R);
}
