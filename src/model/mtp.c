/* mtp.c — the MTP head (`mtp.*`) and its own KV cache.
 *
 * Row t: c = fc([pre_fc_norm_embedding(embed(next_tokens[t])) | pre_fc_norm_hidden(hidden[t])]),
 * then one full-attention decoder layer at MTP position len + t (causal over the MTP cache), then
 * mtp.norm. The output is post-norm: it feeds the LM head and, at depth > 1, the next MTP step. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "../kernels/norm.h"
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
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw);
    s->kv.k = mem_zalloc((size_t)heads * capacity * kw, sizeof(float), "MTP KV keys", err);
    s->kv.v = mem_zalloc((size_t)heads * capacity * vw, sizeof(float), "MTP KV values", err);
    if (!s->kv.k || !s->kv.v || fwd_scratch_init(&s->scr, m, MTP_CHUNK_ROWS, capacity, err)) {
        mtp_state_free(s);
        return err->code;
    }
    *out = s;
    return 0;
}

void mtp_state_free(mtp_state *s) {
    if (!s) return;
    free(s->kv.k);
    free(s->kv.v);
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
    float eps = c->rms_norm_eps;
    for (int c0 = 0; c0 < T; c0 += scr->rows) {
        int R = T - c0 < scr->rows ? T - c0 : scr->rows;
        for (int t = 0; t < R; t++) {
            float *row = scr->big + (size_t)t * scr->big_w;
            float *e = scr->a + (size_t)t * H;
            kern_weight_row(&m->embed, next_tokens[c0 + t], e);
            kern_rmsnorm(row, e, w->pre_fc_norm_embedding, H, eps);
            kern_rmsnorm(row + H, hidden + (size_t)(c0 + t) * H, w->pre_fc_norm_hidden, H, eps);
        }
        kern_matmul(scr->x, H, scr->big, scr->big_w, R, &w->fc);
        for (int t = 0; t < R; t++)
            kern_rmsnorm(scr->a + (size_t)t * H, scr->x + (size_t)t * H, L->in_norm, H, eps);
        layer_attention(m, &L->attn, &s->kv, s->capacity, s->len, R, scr);
        for (size_t i = 0; i < (size_t)R * H; i++) scr->x[i] += scr->o[i];
        for (int t = 0; t < R; t++)
            kern_rmsnorm(scr->a + (size_t)t * H, scr->x + (size_t)t * H, L->post_norm, H, eps);
        layer_ffn(m, L, R, scr);
        for (size_t i = 0; i < (size_t)R * H; i++) scr->x[i] += scr->o[i];
        for (int t = 0; t < R; t++)
            kern_rmsnorm(hidden_out + (size_t)(c0 + t) * H, scr->x + (size_t)t * H, w->norm, H, eps);
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
    int heads, kw, vw;
    family_kv_shape(src->m, &heads, &kw, &vw);
    for (int h = 0; h < heads; h++) {
        memcpy(dst->kv.k + (size_t)h * dst->capacity * kw, src->kv.k + (size_t)h * src->capacity * kw,
               sizeof(float) * (size_t)src->len * kw);
        memcpy(dst->kv.v + (size_t)h * dst->capacity * vw, src->kv.v + (size_t)h * src->capacity * vw,
               sizeof(float) * (size_t)src->len * vw);
    }
    dst->len = src->len;
    return 0;
}
