/* mtp.c — the MTP head (`mtp.*`) and its own KV cache.
 *
 * Row t: c = fc([pre_fc_norm_embedding(embed(next_tokens[t])) | pre_fc_norm_hidden(hidden[t])]),
 * then one full-attention decoder layer at MTP position len + t (causal over the MTP cache), then
 * mtp.norm. The output is post-norm: it feeds the LM head and, at depth > 1, the next MTP step. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "family.h"

#define MTP_CHUNK_ROWS 32

int mtp_state_new(const mtplx_model *m, int capacity, mtp_state **out, mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    if (!m->has_mtp) return err_set(err, MTPLX_EUNSUPPORTED, "%s: the model has no MTP head", m->dir);
    if (capacity < 1) return err_set(err, MTPLX_EINVAL, "mtp_state_new: capacity %d must be >= 1", capacity);
    mtp_state *s = mem_zalloc(1, sizeof *s, "MTP state", err);
    if (!s) return err->code;
    s->m = m;
    s->capacity = capacity;
    if (kv_layer_init(&s->kv, m, capacity, err) || fwd_scratch_init(&s->scr, m, MTP_CHUNK_ROWS, capacity, err)) {
        mtp_state_free(s);
        return err->code;
    }
    *out = s;
    return 0;
}

void mtp_state_free(mtp_state *s) {
    if (!s) return;
    kv_layer_free(s->m, &s->kv);
    fwd_scratch_free(&s->scr);
    free(s);
}

int mtp_state_len(const mtp_state *s) { return s->len; }

int mtp_state_trim(mtp_state *s, int new_len, mtplx_err *err) {
    if (new_len < 0 || new_len > s->len)
        return err_set(err, MTPLX_EINVAL, "mtp_state_trim: new length %d outside [0, %d]", new_len, s->len);
    s->len = new_len;
    return 0;
}

void mtp_state_reset(mtp_state *s) { s->len = 0; }

int model_mtp_forward(const mtplx_model *m, mtp_state *s, const float *hidden, const int32_t *next_tokens, int T,
                      float *hidden_out, mtplx_err *err) {
    if (!m->has_mtp) return err_set(err, MTPLX_EUNSUPPORTED, "%s: the model has no MTP head", m->dir);
    if (s->m != m) return err_set(err, MTPLX_EINVAL, "model_mtp_forward: state belongs to another model");
    if (T < 1) return err_set(err, MTPLX_EINVAL, "model_mtp_forward: T = %d rows (need >= 1)", T);
    if (T > s->capacity - s->len)
        return err_set(err, MTPLX_ERANGE, "model_mtp_forward: %d rows at MTP position %d exceed the capacity %d", T,
                       s->len, s->capacity);
    const model_config *c = &m->cfg;
    int H = c->hidden_size, V = c->vocab_size;
    for (int t = 0; t < T; t++)
        if (next_tokens[t] < 0 || next_tokens[t] >= V)
            return err_set(err, MTPLX_EINVAL, "model_mtp_forward: token %d (row %d) outside the vocabulary [0, %d)",
                           next_tokens[t], t, V);
    if (m->fam.ds_mtp) return deepseek_mtp_forward(m, s, hidden, next_tokens, T, hidden_out, err);
    const mtp_weights *w = &m->mtp;
    const layer_weights *L = &w->layer;
    fwd_scratch *scr = &s->scr;
    be_backend *be = m->be;
    float eps = c->rms_norm_eps;
    int bw = scr->big_w;
    for (int c0 = 0; c0 < T; c0 += scr->rows) {
        int R = T - c0 < scr->rows ? T - c0 : scr->rows;
        size_t RH = (size_t)R * H;
        const float *hid = fwd_stage_in(m, scr, hidden + (size_t)c0 * H, RH);
        be->ops->embed_rows(be, scr->a, H, &m->embed, next_tokens + c0, R);
        be_rmsnorm_rows(be, scr->big, bw, scr->a, H, w->pre_fc_norm_embedding, H, R, eps);
        be_rmsnorm_rows(be, scr->big + H, bw, hid, H, w->pre_fc_norm_hidden, H, R, eps);
        be_matmul(be, scr->x, H, scr->big, bw, R, &w->fc);
        rows_rmsnorm(m, scr->a, scr->x, L->in_norm, R);
        layer_attention(m, &L->attn, &s->kv, s->capacity, s->len, R, scr);
        be_add(be, scr->x, scr->o, RH);
        rows_rmsnorm(m, scr->a, scr->x, L->post_norm, R);
        layer_ffn(m, L, R, scr);
        be_add(be, scr->x, scr->o, RH);
        float *out = fwd_stage_out(m, scr, hidden_out + (size_t)c0 * H);
        rows_rmsnorm(m, out, scr->x, w->norm, R);
        fwd_stage_done(m, scr, hidden_out + (size_t)c0 * H, out, RH);
        s->len += R;
    }
    return 0;
}

int mtp_state_copy(mtp_state *dst, const mtp_state *src, mtplx_err *err) {
    if (dst->m != src->m) return err_set(err, MTPLX_EINVAL, "mtp_state_copy: states of different models");
    if (src->len > dst->capacity)
        return err_set(err, MTPLX_ERANGE, "mtp_state_copy: %d positions do not fit a capacity of %d", src->len,
                       dst->capacity);
    if (dst == src) return 0;
    kv_layer_copy(src->m, &dst->kv, dst->capacity, &src->kv, src->capacity, src->len);
    dst->len = src->len;
    return 0;
}
