/* forward.c — the Qwen3.5 trunk forward over T rows: embedding, hybrid decoder layers (Gated
 * DeltaNet or gated full attention, then a dense SwiGLU MLP), final norm, LM head.
 *
 * Everything is fp32 and goes through the backend's ops (src/backend/backend.h): this file decides
 * what is computed in which order and never touches a kernel or dereferences backend memory
 * (docs/architecture.md). Every row goes through the same arithmetic whatever T is: ops are
 * row-invariant (matmuls, norms), attention reduces over keys in key order, the conv is a
 * fixed-order window sum and the delta rule is sequential. So a row's logits from a prefill or
 * verify call are bit-identical to computing it by single-token decode (DESIGN.md §3). Prefill is
 * processed in chunks of the scratch's row capacity; chunking does not change any row's arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "family.h"

static int imax(int a, int b) { return a > b ? a : b; }

float *fwd_scratch_alloc(fwd_scratch *s, size_t n, int zero, const char *what, mtplx_err *err) {
    if (s->n_bufs == FWD_SCRATCH_BUFS) {
        err_set(err, MTPLX_EINTERNAL, "forward scratch: more than %d buffers", FWD_SCRATCH_BUFS);
        return NULL;
    }
    be_buf *b;
    if (s->be->ops->buf_alloc(s->be, n * sizeof(float), zero, what, &b, err)) return NULL;
    s->bufs[s->n_bufs++] = b;
    return be_buf_addr(s->be, b);
}

const float *fwd_stage_in(const mtplx_model *m, fwd_scratch *s, const float *host, size_t n) {
    if (m->be->caps.host_memory) return host;
    m->be->ops->upload(m->be, s->o, host, sizeof(float) * n);
    return s->o;
}

float *fwd_stage_out(const mtplx_model *m, fwd_scratch *s, float *host) {
    return m->be->caps.host_memory ? host : s->host_out;
}

void fwd_stage_done(const mtplx_model *m, fwd_scratch *s, float *host, float *staged, size_t n) {
    (void)s;
    if (staged != host) m->be->ops->download(m->be, host, staged, sizeof(float) * n);
}

int fwd_scratch_init(fwd_scratch *s, const mtplx_model *m, int rows, int capacity, mtplx_err *err) {
    const model_config *c = &m->cfg;
    memset(s, 0, sizeof *s);
    s->be = m->be;
    int H = c->hidden_size, Dh = c->head_dim;
    int attn_w = m->q_width + 2 * c->n_kv_heads * Dh + c->n_heads * Dh;
    int gdn_w = 2 * m->value_dim + 2 * c->lin_v_heads + m->conv_dim;
    int mlp_w = 2 * c->intermediate_size;
    s->rows = rows;
    s->big_w = imax(imax(attn_w, gdn_w), imax(mlp_w, 2 * H));
    int kc1 = c->conv_kernel > 0 ? c->conv_kernel - 1 : 0;
    size_t RH = (size_t)rows * H;
    if (!(s->x = fwd_scratch_alloc(s, RH, 0, "forward scratch x", err))) goto fail;
    if (!(s->a = fwd_scratch_alloc(s, RH, 0, "forward scratch a", err))) goto fail;
    if (!(s->o = fwd_scratch_alloc(s, RH, 0, "forward scratch o", err))) goto fail;
    if (!(s->big = fwd_scratch_alloc(s, (size_t)rows * s->big_w, 0, "forward scratch", err))) goto fail;
    if (!(s->win = fwd_scratch_alloc(s, (size_t)(kc1 + rows) * imax(m->conv_dim, 1), 0, "conv window", err)))
        goto fail;
    if (!(s->qk = fwd_scratch_alloc(s, (size_t)imax(2 * rows * m->key_dim, 1), 0, "gdn q/k", err))) goto fail;
    s->capacity = imax(capacity, 1);
    int rot = imax(c->rotary_dim, c->qk_rope_head_dim);
    if (!(s->attn = fwd_scratch_alloc(s, m->be->ops->attn_scratch_floats(m->be, s->capacity, rot), 0,
                                      "attention scores", err)))
        goto fail;
    if (!m->be->caps.host_memory &&
        !(s->host_out = fwd_scratch_alloc(s, (size_t)rows * imax(c->vocab_size, H), 0, "output staging", err)))
        goto fail;
    if (family_scratch_init(s, m, rows, err)) goto fail;
    if (m->be->ops->reserve_rows(m->be, rows, m->max_cols, err)) goto fail;
    return 0;
fail:
    fwd_scratch_free(s);
    return err ? err->code : MTPLX_ENOMEM;
}

void fwd_scratch_free(fwd_scratch *s) {
    if (!s->be) return;
    family_scratch_free(s);
    for (int i = 0; i < s->n_bufs; i++) s->be->ops->buf_free(s->be, s->bufs[i]);
    memset(s, 0, sizeof *s);
}

int kv_layer_init(kv_layer *kv, const mtplx_model *m, int capacity, mtplx_err *err) {
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw); /* MLA caches keys and values of unequal widths */
    be_backend *be = m->be;
    memset(kv, 0, sizeof *kv);
    if (be->ops->buf_alloc(be, sizeof(float) * heads * capacity * kw, 1, "KV cache keys", &kv->kb, err) ||
        be->ops->buf_alloc(be, sizeof(float) * heads * capacity * vw, 1, "KV cache values", &kv->vb, err))
        return err ? err->code : MTPLX_ENOMEM;
    kv->k = be_buf_addr(be, kv->kb);
    kv->v = be_buf_addr(be, kv->vb);
    return 0;
}

void kv_layer_free(const mtplx_model *m, kv_layer *kv) {
    m->be->ops->buf_free(m->be, kv->kb);
    m->be->ops->buf_free(m->be, kv->vb);
    memset(kv, 0, sizeof *kv);
}

void kv_layer_copy(const mtplx_model *m, kv_layer *dst, int dst_cap, const kv_layer *src, int src_cap, int len) {
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw);
    for (int h = 0; h < heads; h++) {
        be_copy(m->be, dst->k + (size_t)h * dst_cap * kw, src->k + (size_t)h * src_cap * kw,
                sizeof(float) * (size_t)len * kw);
        be_copy(m->be, dst->v + (size_t)h * dst_cap * vw, src->v + (size_t)h * src_cap * vw,
                sizeof(float) * (size_t)len * vw);
    }
}

/* Gated attention: s->a [R][H] in, s->o [R][H] out. Row t is at position pos0 + t; the backend
 * writes the K/V of all R rows into the sequence's cache, then every (row, head) attends to
 * positions 0..pos0+t. */
void layer_attention(const mtplx_model *m, const attn_weights *w, kv_layer *kv, int capacity, int pos0,
                     int R, fwd_scratch *s) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size, Dh = c->head_dim, nKV = c->n_kv_heads;
    int kvw = nKV * Dh, qw = m->q_width, bw = s->big_w, gated = c->attn_output_gate;
    int k_off = qw, v_off = qw + kvw, att_off = qw + 2 * kvw;
    be_mm_out qkv[3] = {{s->big, bw, &w->q}, {s->big + k_off, bw, &w->k}, {s->big + v_off, bw, &w->v}};
    be_matmul_n(be, qkv, 3, s->a, H, R);
    be_attn_args a = {s->big, bw, Dh * (gated ? 2 : 1), k_off, v_off, att_off, c->n_heads, nKV, Dh, c->rotary_dim,
                      gated, m->rope_inv_freq, m->fam.rope_attn_factor, w->q_norm, w->k_norm, c->rms_norm_eps,
                      1.0f / sqrtf((float)Dh)};
    be_seq_kv skv = {kv->k, kv->v, capacity};
    be->ops->attention(be, &a, &skv, pos0, R, s->attn);
    be_matmul(be, s->o, H, s->big + att_off, bw, R, &w->o);
}

/* Gated DeltaNet: s->a in, s->o out. Advances the layer's conv state and recurrent state by R rows.
 * With capture, the start state rec[cur] is left untouched (the rows are written into rec[cur ^ 1])
 * and the innovation tape of every row is recorded for model_state_commit. */
static void layer_gdn(const mtplx_model *m, const gdn_weights *w, gdn_layer_state *st, int cur, int capture,
                      int R, fwd_scratch *s) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size, Hv = c->lin_v_heads;
    int C = m->conv_dim, kc1 = c->conv_kernel - 1, bw = s->big_w, kd = m->key_dim, vd = m->value_dim;
    int b_off = vd, a_off = vd + Hv, y_off = vd + 2 * Hv, u_off = 2 * vd + 2 * Hv;

    float *win = capture ? st->tape_win : s->win;
    be_copy(be, win, st->conv, sizeof(float) * (size_t)kc1 * C);
    if (w->fz.fused) { /* Qwen3-Next: in_proj_qkvz / in_proj_ba, regrouped into the split layout */
        family_gdn_project(m, &w->fz, s->a, R, win + (size_t)kc1 * C, C, s->big, s->big + b_off, s->big + a_off, bw, s);
    } else {
        be_mm_out in[4] = {{win + (size_t)kc1 * C, C, &w->qkv}, {s->big, bw, &w->z}, {s->big + b_off, bw, &w->b},
                           {s->big + a_off, bw, &w->a}};
        be_matmul_n(be, in, 4, s->a, H, R);
    }
    be->ops->conv1d_silu(be, s->big + u_off, bw, win, C, w->conv_w, C, c->conv_kernel, R);
    be_copy(be, st->conv, win + (size_t)R * C, sizeof(float) * (size_t)kc1 * C);

    be_gdn_args a = {s->big, bw, b_off, a_off, u_off, y_off, c->lin_k_heads, Hv, c->lin_k_dim, c->lin_v_dim,
                     w->neg_A, w->dt_bias, w->norm, c->rms_norm_eps, st->rec[cur],
                     capture ? st->rec[cur ^ 1] : st->rec[cur], s->qk,
                     capture ? st->tape_k : s->qk + (size_t)s->rows * kd, capture ? st->tape_g : NULL,
                     capture ? st->tape_d : NULL};
    be->ops->gdn(be, &a, R);
    be_matmul(be, s->o, H, s->big + y_off, bw, R, &w->out);
}

void layer_mlp(const mtplx_model *m, const mlp_weights *w, int R, fwd_scratch *s) {
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, I = m->cfg.intermediate_size, bw = s->big_w;
    be_mm_out gu[2] = {{s->big, bw, &w->gate}, {s->big + I, bw, &w->up}};
    be_matmul_n(be, gu, 2, s->a, H, R);
    be->ops->swiglu_rows(be, s->big, s->big, s->big + I, bw, I, R);
    be_matmul(be, s->o, H, s->big, bw, R, &w->down);
}

void rows_rmsnorm(const mtplx_model *m, float *y, const float *x, const float *w, int R) {
    int H = m->cfg.hidden_size;
    be_rmsnorm_rows(m->be, y, H, x, H, w, H, R, m->cfg.rms_norm_eps);
}

/* One chunk of R rows at positions s->len.. through the trunk; leaves post-final-norm rows in s->scr.a. */
static void trunk_chunk(const mtplx_model *m, model_state *s, const int32_t *tokens, int R, int capture) {
    const model_config *c = &m->cfg;
    fwd_scratch *scr = &s->scr;
    be_backend *be = m->be;
    int H = c->hidden_size;
    size_t RH = (size_t)R * H;
    be->ops->embed_rows(be, scr->x, H, &m->embed, tokens, R);
    for (int i = 0; i < c->n_layers; i++) {
        const layer_weights *L = &m->layers[i];
        rows_rmsnorm(m, scr->a, scr->x, L->in_norm, R);
        if (L->mixer == MIXER_ATTN)
            layer_attention(m, &L->attn, &s->kv[L->slot], s->capacity, s->len, R, scr);
        else if (L->mixer == MIXER_MLA)
            layer_mla(m, &L->mla, &s->kv[L->slot], s->capacity, s->len, R, scr);
        else
            layer_gdn(m, &L->gdn, &s->gdn[L->slot], s->cur, capture, R, scr);
        be_add(be, scr->x, scr->o, RH);
        rows_rmsnorm(m, scr->a, scr->x, L->post_norm, R);
        layer_ffn(m, L, R, scr);
        be_add(be, scr->x, scr->o, RH);
    }
    rows_rmsnorm(m, scr->a, scr->x, m->final_norm, R);
}

/* logits[R][V] (host memory) = hn[R][H] (backend memory) · Wᵀ: straight into the caller's array when
 * the backend computes in host memory, else through the staging rows and a download. */
static void fwd_head_rows(const mtplx_model *m, float *logits, const float *hn, int R, const be_weight *w,
                          fwd_scratch *scr) {
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, V = w->rows;
    for (int c0 = 0; c0 < R; c0 += scr->rows) { /* one pass on host-memory backends (R <= rows) */
        int n = R - c0 < scr->rows ? R - c0 : scr->rows;
        float *y = be->caps.host_memory ? logits + (size_t)c0 * V : scr->host_out;
        be_matmul(be, y, V, hn + (size_t)c0 * H, H, n, w);
        if (!be->caps.host_memory) be->ops->download(be, logits + (size_t)c0 * V, y, sizeof(float) * (size_t)n * V);
    }
}

int model_forward(const mtplx_model *m, model_state *s, const int32_t *tokens, int T, const fwd_request *req,
                  mtplx_err *err) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, V = c->vocab_size;
    if (s->m != m) return err_set(err, MTPLX_EINVAL, "model_forward: state belongs to another model");
    if (T < 1) return err_set(err, MTPLX_EINVAL, "model_forward: T = %d rows (need >= 1)", T);
    if (T > s->capacity - s->len)
        return err_set(err, MTPLX_ERANGE, "model_forward: %d new tokens at position %d exceed the context capacity %d",
                       T, s->len, s->capacity);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return err_set(err, MTPLX_EINVAL, "model_forward: token %d (row %d) outside the vocabulary [0, %d)",
                           tokens[t], t, V);
    int capture = req && req->capture;
    int logits_from = req ? req->logits_from : 0;
    if (req && req->logits && (logits_from < 0 || logits_from > T))
        return err_set(err, MTPLX_EINVAL, "model_forward: logits_from %d outside [0, %d]", logits_from, T);
    if (capture && T > s->max_rows)
        return err_set(err, MTPLX_EINVAL, "model_forward: capturing %d rows, state holds captures for %d", T,
                       s->max_rows);

    s->cap_rows = 0;
    int base = s->len;
    for (int c0 = 0; c0 < T; c0 += s->scr.rows) {
        int R = T - c0 < s->scr.rows ? T - c0 : s->scr.rows;
        trunk_chunk(m, s, tokens + c0, R, capture);
        const float *hn = s->scr.a;
        if (req && req->hidden) m->be->ops->download(m->be, req->hidden + (size_t)c0 * H, hn, sizeof(float) * (size_t)R * H);
        if (req && req->logits) {
            int t0 = logits_from > c0 ? logits_from - c0 : 0;
            if (t0 < R)
                fwd_head_rows(m, req->logits + (size_t)(c0 + t0 - logits_from) * V, hn + (size_t)t0 * H, R - t0,
                              &m->lm_head, &s->scr);
        }
        s->len += R;
    }
    if (capture) {
        s->cap_rows = T;
        s->cap_base = base;
        s->cur ^= 1;
    }
    return 0;
}

int model_lm_head(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, mtplx_err *err) {
    if (T < 0) return err_set(err, MTPLX_EINVAL, "model_lm_head: T = %d", T);
    if (which != HEAD_TARGET && which != HEAD_DRAFT && which != HEAD_MTP)
        return err_set(err, MTPLX_EINVAL, "model_lm_head: unknown head %d", (int)which);
    const be_weight *w = which == HEAD_DRAFT ? &m->draft_head : &m->lm_head;
    if (which == HEAD_MTP && m->fam.ds_mtp) w = &m->fam.ds_head; /* DeepSeek shared_head.head */
    if (T <= 0) return 0;
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    if (be->caps.host_memory) {
        be_matmul(be, logits, V, hidden, H, T, w);
        return 0;
    }
    /* a device backend: the rows go up, the logits come down, through buffers of this call */
    be_buf *x = NULL, *y = NULL;
    int rc = be->ops->buf_alloc(be, sizeof(float) * (size_t)T * H, 0, "head input rows", &x, err);
    if (!rc) rc = be->ops->buf_alloc(be, sizeof(float) * (size_t)T * V, 0, "head logits", &y, err);
    if (!rc) {
        be->ops->upload(be, be_buf_addr(be, x), hidden, sizeof(float) * (size_t)T * H);
        be_matmul(be, be_buf_addr(be, y), V, be_buf_addr(be, x), H, T, w);
        be->ops->download(be, logits, be_buf_addr(be, y), sizeof(float) * (size_t)T * V);
    }
    be->ops->buf_free(be, x);
    be->ops->buf_free(be, y);
    return rc;
}
