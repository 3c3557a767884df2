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
#include "families/family_ops.h"

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
    s->capacity = (imax(capacity, 1) + KV_PAGE - 1) / KV_PAGE * KV_PAGE; /* whole pages */
    int rot = imax(c->rotary_dim, c->qk_rope_head_dim);
    if (!(s->attn = fwd_scratch_alloc(s, m->be->ops->attn_scratch_floats(m->be, s->capacity, rot), 0,
                                      "attention scores", err)))
        goto fail;
    if (!m->be->caps.host_memory &&
        !(s->host_out = fwd_scratch_alloc(s, (size_t)rows * imax(c->vocab_size, H), 0, "output staging", err)))
        goto fail;
    if (!m->be->caps.host_memory) {
        size_t tw = (size_t)rows * (2 * BE_TOP_MAX + 2);
        if (!(s->top = (int32_t *)fwd_scratch_alloc(s, tw, 0, "top logits", err))) goto fail;
        if (!(s->top_host = mem_alloc(tw, sizeof(int32_t), "top logits (host)", err))) goto fail;
    }
    if (family_scratch_init(s, m, rows, err)) goto fail;
    if (m->be->ops->reserve_rows(m->be, rows, m->max_cols, err)) goto fail;
    return 0;
fail:
    fwd_scratch_free(s);
    return err ? err->code : MTPLX_ENOMEM;
}

void fwd_scratch_free(fwd_scratch *s) {
    if (!s->be) return;
    free(s->top_host);
    family_scratch_free(s);
    for (int i = 0; i < s->n_bufs; i++) s->be->ops->buf_free(s->be, s->bufs[i]);
    memset(s, 0, sizeof *s);
}

/* The input projections of a mixer: outs = s->a · Wᵀ; with norm non-NULL, s->a is first made from
 * s->x as the layer's input RMSNorm (after adding res into s->x when res is non-NULL: the previous
 * layer's output), fused into the projections where the backend can (be_rmsnorm_matmul_n). */
static void mixer_in_matmul_n(const mtplx_model *m, fwd_scratch *s, const be_mm_out *outs, int n_out, const float *res,
                              const float *norm, int R) {
    int H = m->cfg.hidden_size;
    if (norm) be_rmsnorm_matmul_n(m->be, outs, n_out, s->x, res, s->a, norm, H, R, m->cfg.rms_norm_eps);
    else be_matmul_n(m->be, outs, n_out, s->a, H, R);
}

/* layer_attention with the input RMSNorm (and residual add) of mixer_in_matmul_n in front. */
static void layer_attention_in(const mtplx_model *m, const attn_weights *w, int layer, const attn_seg *sg, int n, int R,
                               fwd_scratch *s, const float *res, const float *norm) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size, Dh = c->head_dim, nKV = c->n_kv_heads;
    int kvw = nKV * Dh, qw = m->q_width, bw = s->big_w, gated = c->attn_output_gate;
    int k_off = qw, v_off = qw + kvw, att_off = qw + 2 * kvw;
    be_mm_out qkv[3] = {{s->big, bw, &w->q}, {s->big + k_off, bw, &w->k}, {s->big + v_off, bw, &w->v}};
    mixer_in_matmul_n(m, s, qkv, 3, res, norm, R);
    be_attn_args a = {s->big, bw, Dh * (gated ? 2 : 1), k_off, v_off, att_off, c->n_heads, nKV, Dh, c->rotary_dim,
                      gated, m->rope_inv_freq, m->fam.rope_attn_factor, w->q_norm, w->k_norm, c->rms_norm_eps,
                      1.0f / sqrtf((float)Dh)};
    be_attn_seq q[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) q[i] = (be_attn_seq){kv_table_view(sg[i].kv, layer), sg[i].pos0, sg[i].r0, sg[i].R};
    be->ops->attention_seqs(be, &a, q, n, s->attn);
    be_matmul(be, s->o, H, s->big + att_off, bw, R, &w->o);
}

/* Gated attention: s->a [R][H] in, s->o [R][H] out, over the rows of n sequences. The projections
 * and the output matmul run once over all R rows; one attention_seqs call then writes each sequence's
 * K/V into its pages of layer `layer` and attends each of its (row, head) pairs to positions
 * 0..pos0+t of that sequence. */
void layer_attention(const mtplx_model *m, const attn_weights *w, int layer, const attn_seg *sg, int n, int R,
                     fwd_scratch *s) {
    layer_attention_in(m, w, layer, sg, n, R, s, NULL, NULL);
}

/* One sequence's rows in a trunk forward. */
typedef struct {
    model_state *s;
    int r0, R;       /* its rows in the scratch */
    int capture;     /* 1: record per-row GDN states for model_state_commit */
} trunk_seg;

/* Gated DeltaNet: s->a in (made first from s->x, res and norm as mixer_in_matmul_n says when norm is
 * non-NULL), s->o out, over the rows of n sequences; advances each one's conv state
 * and recurrent state (GDN layer `slot`) by its rows. With capture, a sequence's start state
 * rec[cur] is left untouched (its rows are written into rec[cur ^ 1]) and the innovation tape of
 * every row is recorded for model_state_commit. One sequence projects straight into its conv
 * window; several project into `big` first and gdn_seqs copies their rows behind their own conv
 * states. */
static void layer_gdn(const mtplx_model *m, const gdn_weights *w, int slot, const trunk_seg *sg, int n, int R,
                      fwd_scratch *s, const float *res, const float *norm) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size, Hv = c->lin_v_heads;
    int C = m->conv_dim, kc1 = c->conv_kernel - 1, bw = s->big_w, kd = m->key_dim, vd = m->value_dim;
    int b_off = vd, a_off = vd + Hv, y_off = vd + 2 * Hv, u_off = 2 * vd + 2 * Hv;

    float *win0 = sg[0].capture ? sg[0].s->gdn[slot].tape_win : s->win;
    float *qkv = n == 1 ? win0 + (size_t)kc1 * C : s->big + u_off;
    int ldq = n == 1 ? C : bw;
    if (w->fz.fused) { /* Qwen3-Next: in_proj_qkvz / in_proj_ba, regrouped into the split layout */
        if (norm) be_add_rmsnorm_rows(be, s->x, res, s->a, norm, H, R, c->rms_norm_eps);
        m->family->gdn_project(m, &w->fz, s->a, R, qkv, ldq, s->big, s->big + b_off, s->big + a_off, bw, s);
    } else {
        be_mm_out in[4] = {{qkv, ldq, &w->qkv}, {s->big, bw, &w->z}, {s->big + b_off, bw, &w->b},
                           {s->big + a_off, bw, &w->a}};
        mixer_in_matmul_n(m, s, in, 4, res, norm, R);
    }
    be_gdn_seq q[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) {
        gdn_layer_state *st = &sg[i].s->gdn[slot];
        int cur = sg[i].s->cur, cap = sg[i].capture, r0 = sg[i].r0;
        q[i] = (be_gdn_seq){r0, sg[i].R, st->conv, cap ? st->tape_win : s->win, cap, st->rec[cur],
                            cap ? st->rec[cur ^ 1] : st->rec[cur], s->qk + (size_t)r0 * kd,
                            cap ? st->tape_k : s->qk + (size_t)(s->rows + r0) * kd, cap ? st->tape_g : NULL,
                            cap ? st->tape_d : NULL};
    }
    be_gdn_args a = {s->big, bw, b_off, a_off, u_off, y_off, c->lin_k_heads, Hv, c->lin_k_dim, c->lin_v_dim,
                     w->neg_A, w->dt_bias, w->norm, c->rms_norm_eps, NULL, NULL, NULL, NULL, NULL, NULL};
    be_conv_args cv = {w->conv_w, C, c->conv_kernel, n == 1};
    be->ops->gdn_seqs(be, &a, &cv, q, n);
    be_matmul(be, s->o, H, s->big + y_off, bw, R, &w->out);
}

void layer_mlp(const mtplx_model *m, const mlp_weights *w, int R, fwd_scratch *s) {
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, I = m->cfg.intermediate_size, bw = s->big_w;
    be_mm_out gu[2] = {{s->big, bw, &w->gate}, {s->big + I, bw, &w->up}};
    be_matmul_n(be, gu, 2, s->a, H, R);
    be_swiglu_matmul(be, s->o, H, s->big, s->big + I, bw, I, R, &w->down);
}

/* The residual add of the mixer's output s->o into s->x, the post-attention RMSNorm (norm) into s->a,
 * then the dense MLP of layer_mlp into s->o — as be_add, rows_rmsnorm and layer_mlp, through the
 * backend's fused ops (the norm inside the gate/up matmul's packing, SwiGLU inside the down
 * projection's). */
static void layer_mlp_residual(const mtplx_model *m, const mlp_weights *w, const float *norm, int R, fwd_scratch *s) {
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, I = m->cfg.intermediate_size, bw = s->big_w;
    be_mm_out gu[2] = {{s->big, bw, &w->gate}, {s->big + I, bw, &w->up}};
    be_rmsnorm_matmul_n(be, gu, 2, s->x, s->o, s->a, norm, H, R, m->cfg.rms_norm_eps);
    be_swiglu_matmul(be, s->o, H, s->big, s->big + I, bw, I, R, &w->down);
}

void rows_rmsnorm(const mtplx_model *m, float *y, const float *x, const float *w, int R) {
    int H = m->cfg.hidden_size;
    be_rmsnorm_rows(m->be, y, H, x, H, w, H, R, m->cfg.rms_norm_eps);
}

/* The rows of n sequences (tokens[R], gathered) through the trunk; leaves post-final-norm rows in
 * scr->a. sg[i] are the sequences' rows, at positions sg[i].s->len... */
static void trunk_rows(const mtplx_model *m, fwd_scratch *scr, const trunk_seg *sg, const attn_seg *as, int n,
                       const int32_t *tokens, int R) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    int H = c->hidden_size;
    float eps = c->rms_norm_eps;
    be->ops->embed_rows(be, scr->x, H, &m->embed, tokens, R);
    /* each residual add goes with the RMSNorm after it, and that norm with the matmul after it where
     * the backend fuses them (be_add_rmsnorm_rows, be_rmsnorm_matmul_n; the first layer has no add) */
    for (int i = 0; i < c->n_layers; i++) {
        const layer_weights *L = &m->layers[i];
        const float *res = i ? scr->o : NULL;
        if (L->mixer == MIXER_ATTN) {
            layer_attention_in(m, &L->attn, L->slot, as, n, R, scr, res, L->in_norm);
        } else if (L->mixer == MIXER_MLA) {
            be_add_rmsnorm_rows(be, scr->x, res, scr->a, L->in_norm, H, R, eps);
            layer_mla(m, &L->mla, L->slot, as, n, R, scr);
        } else {
            layer_gdn(m, &L->gdn, L->slot, sg, n, R, scr, res, L->in_norm);
        }
        if (L->ffn == FFN_DENSE) {
            layer_mlp_residual(m, &L->mlp, L->post_norm, R, scr);
        } else {
            be_add_rmsnorm_rows(be, scr->x, scr->o, scr->a, L->post_norm, H, R, eps);
            layer_ffn(m, L, R, scr);
        }
    }
    be_add_rmsnorm_rows(be, scr->x, scr->o, scr->a, m->final_norm, H, R, eps);
}

/* n host rows of V logits from logits_top's output o (k a row): -inf, then the k ranked values and the
 * first NaN / +inf at their ids (fwd_request.logits_top). */
static void top_expand(float *logits, int V, const int32_t *o, int n, int k) {
    for (int t = 0; t < n; t++, o += 2 * k + 2) {
        float *row = logits + (size_t)t * V;
        for (int j = 0; j < V; j++) row[j] = -INFINITY;
        for (int i = 0; i < k && o[i] >= 0; i++) memcpy(&row[o[i]], &o[k + i], sizeof(float));
        if (o[2 * k] >= 0) memcpy(&row[o[2 * k]], &o[2 * k + 1], sizeof(float));
    }
}

/* logits[R][V] (host memory) = hn[R][H] (backend memory) · Wᵀ: straight into the caller's array when
 * the backend computes in host memory, else through the staging rows and a download — of whole rows,
 * or with top = k (fwd_request.logits_top) of each row's k best only. With top_out (and top = k > 0)
 * the rows' lists go there instead ([R][2k + 2]; fwd_request.top_out), logits being scratch: a device
 * with the logits_top op downloads only the lists, any other backend lists its host rows. */
static void fwd_head_rows(const mtplx_model *m, float *logits, const float *hn, int R, const be_weight *w,
                          fwd_scratch *scr, int top, int32_t *top_out) {
    be_backend *be = m->be;
    int H = m->cfg.hidden_size, V = w->rows;
    top = top > 0 && top <= BE_TOP_MAX && top < V ? top : 0;
    if (!top) top_out = NULL;
    int dev_top = top && be->caps.logits_top && V >= be->caps.logits_top_min_vocab && scr->top;
    const size_t words = 2 * (size_t)top + 2;
    for (int c0 = 0; c0 < R; c0 += scr->rows) { /* one pass on host-memory backends (R <= rows) */
        int n = R - c0 < scr->rows ? R - c0 : scr->rows;
        float *y = be->caps.host_memory ? logits + (size_t)c0 * V : scr->host_out;
        float *rows = logits + (size_t)c0 * V;
        be_matmul(be, y, V, hn + (size_t)c0 * H, H, n, w);
        if (dev_top && !be->caps.host_memory) {
            int32_t *lists = top_out ? top_out + (size_t)c0 * words : scr->top_host;
            be->ops->logits_top(be, scr->top, y, V, n, V, top);
            be->ops->download(be, lists, scr->top, sizeof(int32_t) * (size_t)n * words);
            if (!top_out) top_expand(rows, V, lists, n, top);
            continue;
        }
        if (!be->caps.host_memory) be->ops->download(be, rows, y, sizeof(float) * (size_t)n * V);
        if (top_out) be_logits_top_host(be, top_out + (size_t)c0 * words, rows, V, n, V, top);
    }
}

/* Check one sequence's part of a forward: tokens, rows, capture, logits range. Returns 0 or EINVAL /
 * ERANGE with a message that names the problem. */
static int fwd_check(const mtplx_model *m, const model_state *s, const int32_t *tokens, int T, const fwd_request *req,
                     mtplx_err *err) {
    int V = m->cfg.vocab_size;
    if (s->m != m) return err_set(err, MTPLX_EINVAL, "model_forward: state belongs to another model");
    if (T < 1) return err_set(err, MTPLX_EINVAL, "model_forward: T = %d rows (need >= 1)", T);
    if (T > s->capacity - s->len)
        return err_set(err, MTPLX_ERANGE, "model_forward: %d new tokens at position %d exceed the context capacity %d",
                       T, s->len, s->capacity);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return err_set(err, MTPLX_EINVAL, "model_forward: token %d (row %d) outside the vocabulary [0, %d)",
                           tokens[t], t, V);
    if (req && req->logits && (req->logits_from < 0 || req->logits_from > T))
        return err_set(err, MTPLX_EINVAL, "model_forward: logits_from %d outside [0, %d]", req->logits_from, T);
    if (req && req->top_out && (!req->logits || req->logits_top < 1 || req->logits_top > BE_TOP_MAX ||
                                req->logits_top >= V))
        return err_set(err, MTPLX_EINVAL, "model_forward: logits lists need logits rows and logits_top in [1, %d], got %d",
                       V - 1 < BE_TOP_MAX ? V - 1 : BE_TOP_MAX, req->logits_top);
    if (req && req->capture && T > s->max_rows)
        return err_set(err, MTPLX_EINVAL, "model_forward: capturing %d rows, state holds captures for %d", T,
                       s->max_rows);
    return 0;
}

/* After a sequence's rows ran: its length and capture bookkeeping. */
static void fwd_advance(model_state *s, int R, int capture, int base) {
    s->len += R;
    if (capture) {
        s->cap_rows = s->len - base;
        s->cap_base = base;
        s->cur ^= 1;
    }
}

int model_forward(const mtplx_model *m, model_state *s, const int32_t *tokens, int T, const fwd_request *req,
                  mtplx_err *err) {
    int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    int rc = fwd_check(m, s, tokens, T, req, err);
    if (rc) return rc;
    if (!s->scr.be)
        return err_set(err, MTPLX_EINVAL, "model_forward: a pooled state has no scratch (use model_forward_batch)");
    if ((rc = kv_table_prepare(&s->kv, s->len, T, err))) return rc;
    int capture = req && req->capture;
    int logits_from = req ? req->logits_from : 0;
    state_settle(&s, 1);
    s->cap_rows = 0;
    int base = s->len;
    for (int c0 = 0; c0 < T; c0 += s->scr.rows) {
        int R = T - c0 < s->scr.rows ? T - c0 : s->scr.rows;
        trunk_seg sg = {s, 0, R, capture};
        attn_seg as = {&s->kv, s->len, 0, R};
        trunk_rows(m, &s->scr, &sg, &as, 1, tokens + c0, R);
        const float *hn = s->scr.a;
        if (req && req->logits) {
            int t0 = logits_from > c0 ? logits_from - c0 : 0;
            if (t0 < R)
                fwd_head_rows(m, req->logits + (size_t)(c0 + t0 - logits_from) * V, hn + (size_t)t0 * H, R - t0,
                              &m->lm_head, &s->scr, req->logits_top,
                              req->top_out ? req->top_out + (size_t)(c0 + t0 - logits_from) * (2 * req->logits_top + 2)
                                           : NULL);
        }
        /* after the head (which writes only the staging rows and lists): a device's logits come down
         * first, so the head was queued behind the trunk without a wait between them */
        if (req && req->hidden) m->be->ops->download(m->be, req->hidden + (size_t)c0 * H, hn, sizeof(float) * (size_t)R * H);
        s->len += R;
    }
    s->len = base;
    fwd_advance(s, T, capture, base);
    return 0;
}

/* ------------------------------------------------------------------ batches */

int model_batch_new(const mtplx_model *m, int rows, int capacity, model_batch **out, mtplx_err *err) {
    *out = NULL;
    if (rows < 1 || capacity < 1)
        return err_set(err, MTPLX_EINVAL, "model_batch_new: rows %d and capacity %d must be >= 1", rows, capacity);
    model_batch *b = mem_zalloc(1, sizeof *b, "forward batch", err);
    if (!b) return MTPLX_ENOMEM;
    int rc = fwd_scratch_init(&b->scr, m, rows, capacity, err);
    if (!rc) {
        b->tokens = mem_alloc((size_t)rows, sizeof *b->tokens, "batch tokens", err);
        b->logits = mem_aligned((size_t)rows * m->cfg.vocab_size * sizeof(float), "batch logits", err);
        b->tops = mem_alloc((size_t)rows * (2 * BE_TOP_MAX + 2), sizeof *b->tops, "batch logits lists", err);
        b->segs = mem_alloc(BATCH_SEQS_MAX, sizeof *b->segs, "batch sequences", err);
        if (!b->tokens || !b->logits || !b->tops || !b->segs) rc = MTPLX_ENOMEM;
    }
    if (rc) {
        model_batch_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

void model_batch_free(model_batch *b) {
    if (!b) return;
    fwd_scratch_free(&b->scr);
    free(b->tokens);
    free(b->logits);
    free(b->tops);
    free(b->segs);
    free(b);
}

/* Check a batch before anything runs: distinct states, rows and page-table sizes that fit the
 * scratch, every sequence's part valid. Returns the rows in all, or -1 with err set. */
static int batch_check(const mtplx_model *m, const model_batch *b, const fwd_seq *q, int n, mtplx_err *err) {
    if (n < 1 || n > BATCH_SEQS_MAX) {
        err_set(err, MTPLX_EINVAL, "model_forward_batch: %d sequences (1..%d)", n, BATCH_SEQS_MAX);
        return -1;
    }
    int R = 0;
    for (int i = 0; i < n; i++) {
        if (fwd_check(m, q[i].s, q[i].tokens, q[i].T, &q[i].req, err)) return -1;
        for (int j = 0; j < i; j++)
            if (q[j].s == q[i].s) {
                err_set(err, MTPLX_EINVAL, "model_forward_batch: sequence %d appears twice", i);
                return -1;
            }
        if (q[i].s->len + q[i].T > b->scr.capacity) {
            err_set(err, MTPLX_ERANGE, "model_forward_batch: %d positions exceed the batch's capacity %d",
                    q[i].s->len + q[i].T, b->scr.capacity);
            return -1;
        }
        R += q[i].T;
    }
    if (R > b->scr.rows) {
        err_set(err, MTPLX_EINVAL, "model_forward_batch: %d rows exceed the batch's %d", R, b->scr.rows);
        return -1;
    }
    return R;
}

float *batch_host_rows(const mtplx_model *m, const model_batch *b, int R) {
    if (m->be->caps.host_memory || (size_t)R * m->cfg.hidden_size > (size_t)b->scr.rows * m->cfg.vocab_size)
        return NULL;
    return b->logits;
}

void batch_rows_out(const mtplx_model *m, model_batch *b, const float *dev, int R, float *const *dst, const int *r0,
                    const int *T, int n) {
    size_t H = (size_t)m->cfg.hidden_size;
    float *host = batch_host_rows(m, b, R);
    if (host) m->be->ops->download(m->be, host, dev, sizeof(float) * (size_t)R * H);
    for (int i = 0; i < n; i++) {
        if (!dst[i]) continue;
        if (host) memcpy(dst[i], host + (size_t)r0[i] * H, sizeof(float) * (size_t)T[i] * H);
        else m->be->ops->download(m->be, dst[i], dev + (size_t)r0[i] * H, sizeof(float) * (size_t)T[i] * H);
    }
}

void batch_rows_in(const mtplx_model *m, model_batch *b, float *dev, int R, const float *const *src, const int *T,
                   int n) {
    size_t H = (size_t)m->cfg.hidden_size;
    float *host = batch_host_rows(m, b, R);
    for (int i = 0, r0 = 0; i < n; r0 += T[i], i++) {
        if (host) memcpy(host + (size_t)r0 * H, src[i], sizeof(float) * (size_t)T[i] * H);
        else m->be->ops->upload(m->be, dev + (size_t)r0 * H, src[i], sizeof(float) * (size_t)T[i] * H);
    }
    if (host) m->be->ops->upload(m->be, dev, host, sizeof(float) * (size_t)R * H);
}

/* The logits of every sequence that wants them: runs of consecutive wanted rows (the same logits_top,
 * lists or rows alike) go through the head together (the head's weights are read once per run), into
 * the caller's array when the run is one sequence's, else into the batch's staging rows (b->logits,
 * b->tops) and copied out. */
static void batch_logits(const mtplx_model *m, model_batch *b, const fwd_seq *q, int n) {
    int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    const float *hn = b->scr.a;
    for (int i = 0, r0 = 0; i < n;) {
        if (!q[i].req.logits || q[i].req.logits_from >= q[i].T) {
            r0 += q[i].T;
            i++;
            continue;
        }
        int j = i + 1, first = r0 + q[i].req.logits_from, end = r0 + q[i].T, top = q[i].req.logits_top;
        int lists = top > 0 && q[i].req.top_out;
        while (j < n && q[j].req.logits && q[j].req.logits_from == 0 && q[j].req.logits_top == top &&
               (top > 0 && q[j].req.top_out) == lists)
            end += q[j++].T;
        if (j == i + 1) {
            fwd_head_rows(m, q[i].req.logits, hn + (size_t)first * H, end - first, &m->lm_head, &b->scr, top,
                          lists ? q[i].req.top_out : NULL);
        } else {
            fwd_head_rows(m, b->logits, hn + (size_t)first * H, end - first, &m->lm_head, &b->scr, top,
                          lists ? b->tops : NULL);
            const float *src = b->logits;
            const int32_t *tsrc = b->tops;
            for (int k = i; k < j; k++) {
                size_t rows = (size_t)(q[k].T - q[k].req.logits_from);
                if (lists) {
                    memcpy(q[k].req.top_out, tsrc, rows * (2 * (size_t)top + 2) * sizeof(int32_t));
                    tsrc += rows * (2 * (size_t)top + 2);
                } else {
                    memcpy(q[k].req.logits, src, rows * V * sizeof(float));
                    src += rows * V;
                }
            }
        }
        for (int k = i; k < j; k++) r0 += q[k].T;
        i = j;
    }
}

int model_forward_batch(const mtplx_model *m, model_batch *b, const fwd_seq *q, int n, mtplx_err *err) {
    int R = batch_check(m, b, q, n, err);
    if (R < 0) return err->code;
    for (int i = 0; i < n; i++) {
        int rc = kv_table_prepare(&q[i].s->kv, q[i].s->len, q[i].T, err);
        if (rc) return rc;
    }
    trunk_seg sg[BATCH_SEQS_MAX];
    model_state *st[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) st[i] = q[i].s;
    state_settle(st, n); /* the commits of the last cycle, one call per GDN layer for all sequences */
    attn_seg *as = b->segs;
    for (int i = 0, r0 = 0; i < n; r0 += q[i].T, i++) {
        sg[i] = (trunk_seg){q[i].s, r0, q[i].T, q[i].req.capture};
        as[i] = (attn_seg){&q[i].s->kv, q[i].s->len, r0, q[i].T};
        memcpy(b->tokens + r0, q[i].tokens, sizeof(int32_t) * q[i].T);
        q[i].s->cap_rows = 0;
    }
    trunk_rows(m, &b->scr, sg, as, n, b->tokens, R);
    float *hd[BATCH_SEQS_MAX];
    int r0[BATCH_SEQS_MAX], T[BATCH_SEQS_MAX], any = 0;
    for (int i = 0; i < n; i++) hd[i] = q[i].req.hidden, r0[i] = sg[i].r0, T[i] = q[i].T, any |= hd[i] != NULL;
    /* the head first, queued right behind the layers; then the hidden rows come down (batch_logits has
     * copied its rows out of b->logits, which batch_rows_out may use as staging) */
    batch_logits(m, b, q, n);
    if (any) batch_rows_out(m, b, b->scr.a, R, hd, r0, T, n);
    for (int i = 0; i < n; i++) fwd_advance(q[i].s, q[i].T, q[i].req.capture, q[i].s->len);
    return 0;
}

/* One row of a subset head's output, in place: row[0..n) holds the logits of ids[0..n) (strictly
 * ascending); afterwards row[ids[i]] holds them and every other entry of row[0..V) is -inf. Walking
 * down from the last id is safe because ids[i] >= i: each write lands at or above the entry just read
 * and every entry still to read lies below it. */
static void head_spread_subset(float *row, int V, const int32_t *ids, int n) {
    int hi = V - 1; /* everything above hi is already final */
    for (int i = n - 1; i >= 0; i--) {
        float v = row[i];
        for (int j = hi; j > ids[i]; j--) row[j] = -INFINITY;
        row[ids[i]] = v;
        hi = ids[i] - 1;
    }
    for (int j = hi; j >= 0; j--) row[j] = -INFINITY;
}

/* T compact rows of n subset logits (logits[t·n + i] is id ids[i]'s) spread in place to T rows of V
 * (row t at logits + t·V, −inf outside the subset); logits holds T·V floats. Rows are moved last
 * first: row t's destination starts at t·V >= t·n and ends past the compact rows before it. */
static void head_rows_to_vocab(float *logits, int T, int V, const int32_t *ids, int n) {
    for (int t = T - 1; t >= 0; t--) {
        float *row = logits + (size_t)t * V;
        memmove(row, logits + (size_t)t * n, sizeof(float) * (size_t)n);
        head_spread_subset(row, V, ids, n);
    }
}

/* The lists of T rows of subset logits (be_ops.logits_top's layout: k ids, k values, the first
 * NaN / +inf index and its bits) with their indices into the subset replaced by vocabulary ids. */
static void head_lists_to_vocab(int32_t *lists, int T, int k, const int32_t *ids) {
    for (int t = 0; t < T; t++, lists += 2 * k + 2) {
        for (int i = 0; i < k; i++)
            if (lists[i] >= 0) lists[i] = ids[lists[i]];
        if (lists[2 * k] >= 0) lists[2 * k] = ids[lists[2 * k]];
    }
}

int model_lm_head(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, mtplx_err *err) {
    return model_lm_head_top(m, which, hidden, T, logits, 0, err);
}

/* The device staging of model_lm_head_top for T rows: grown to the most rows asked so far (the old
 * buffers go first). Called with head_lock held; returns 0 or an error. */
static int head_staging(mtplx_model *mm, int T, mtplx_err *err) {
    be_backend *be = mm->be;
    if (T <= mm->head_rows) return 0;
    int H = mm->cfg.hidden_size, V = mm->cfg.vocab_size;
    be->ops->buf_free(be, mm->head_x), be->ops->buf_free(be, mm->head_y), be->ops->buf_free(be, mm->head_top);
    free(mm->head_top_host);
    mm->head_x = mm->head_y = mm->head_top = NULL, mm->head_top_host = NULL, mm->head_rows = 0;
    size_t tw = (size_t)T * (2 * BE_TOP_MAX + 2);
    int rc = be->ops->buf_alloc(be, sizeof(float) * (size_t)T * H, 0, "head input rows", &mm->head_x, err);
    if (!rc) rc = be->ops->buf_alloc(be, sizeof(float) * (size_t)T * V, 0, "head logits", &mm->head_y, err);
    if (!rc && be->caps.logits_top) {
        rc = be->ops->buf_alloc(be, sizeof(int32_t) * tw, 0, "head top logits", &mm->head_top, err);
        if (!rc && !(mm->head_top_host = mem_alloc(tw, sizeof(int32_t), "head top logits (host)", err))) rc = MTPLX_ENOMEM;
    }
    if (!rc) mm->head_rows = T;
    return rc;
}

_Static_assert(MODEL_TOP_MAX == BE_TOP_MAX, "model.h's list size is the backend's");

void model_logits_list(const float *row, int V, int k, int32_t *out) { be_logits_top_host(NULL, out, row, V, 1, V, k); }

/* An extra download that a device head puts between its launch and its own download, so that one wait
 * covers both: n floats from backend memory `dev` to host memory `host` (nothing when host is NULL). */
typedef struct {
    float *host;
    const float *dev;
    size_t n;
} head_also;

/* model_lm_head_top, or with top_out model_lm_head_list; the rows come from host memory (hidden) or,
 * on a device backend, from backend memory (x_dev, then hidden is unused), and `also` is downloaded
 * after the head's kernels were queued (model_mtp_forward_head). Returns 0 or an error. */
static int lm_head_rows_in(const mtplx_model *m, head_kind which, const float *hidden, const float *x_dev, int T,
                           float *logits, int top, int32_t *top_out, head_also also, mtplx_err *err) {
    if (T < 0) return err_set(err, MTPLX_EINVAL, "model_lm_head: T = %d", T);
    if (which != HEAD_TARGET && which != HEAD_DRAFT && which != HEAD_MTP)
        return err_set(err, MTPLX_EINVAL, "model_lm_head: unknown head %d", (int)which);
    int H = m->cfg.hidden_size, V = m->cfg.vocab_size;
    if (top_out && (top < 1 || top > BE_TOP_MAX || top >= V))
        return err_set(err, MTPLX_EINVAL, "model_lm_head_list: top %d outside [1, %d]", top,
                       V - 1 < BE_TOP_MAX ? V - 1 : BE_TOP_MAX);
    const be_weight *w = which == HEAD_DRAFT ? &m->draft_head : &m->lm_head;
    if (which == HEAD_MTP && m->fam.ds_mtp) w = &m->fam.ds_head; /* DeepSeek shared_head.head */
    be_backend *be = m->be;
    if (T <= 0) {
        if (also.host) be->ops->download(be, also.host, also.dev, sizeof(float) * also.n);
        return 0;
    }
    /* A draft vocabulary subset's head has Vw = draft_n rows: its logits are computed Vw to a row, then
     * listed with the lists' ids mapped to the vocabulary (head_lists_to_vocab), or spread to their ids
     * as whole rows (head_rows_to_vocab) */
    const int sub = which == HEAD_DRAFT && m->draft_ids, Vw = sub ? m->draft_n : V;
    if (be->caps.host_memory) {
        if (also.host && also.host != also.dev) memcpy(also.host, also.dev, sizeof(float) * also.n);
        be_matmul(be, logits, Vw, hidden, H, T, w);
        if (sub && top_out && top < Vw) { /* the lists straight from the compact rows (logits: scratch) */
            be_logits_top_host(be, top_out, logits, Vw, T, Vw, top);
            head_lists_to_vocab(top_out, T, top, m->draft_ids);
            return 0;
        }
        if (sub) head_rows_to_vocab(logits, T, V, m->draft_ids, Vw);
        if (top_out) be_logits_top_host(be, top_out, logits, V, T, V, top);
        return 0;
    }
    /* a device backend: the rows go up (unless they are there), the logits come down (whole rows, or each
     * row's `top` best through logits_top, as fwd_head_rows), through the model's head staging */
    int dev_top = be->caps.logits_top && Vw >= be->caps.logits_top_min_vocab && top > 0 && top <= BE_TOP_MAX &&
                  top < Vw && w->rows == Vw;
    mtplx_model *mm = (mtplx_model *)m; /* head staging only (struct mtplx_model) */
    pthread_mutex_lock(&mm->head_lock);
    int rc = head_staging(mm, T, err);
    if (!rc) {
        float *x = be_buf_addr(be, mm->head_x), *y = be_buf_addr(be, mm->head_y);
        if (x_dev) x = (float *)x_dev;
        else be->ops->upload(be, x, hidden, sizeof(float) * (size_t)T * H);
        be_matmul(be, y, Vw, x, H, T, w);
        int32_t *o = dev_top ? be_buf_addr(be, mm->head_top) : NULL, *lists = top_out ? top_out : mm->head_top_host;
        if (dev_top) be->ops->logits_top(be, o, y, Vw, T, Vw, top);
        if (also.host) be->ops->download(be, also.host, also.dev, sizeof(float) * also.n);
        if (dev_top) {
            be->ops->download(be, lists, o, sizeof(int32_t) * (size_t)T * (2 * top + 2));
            if (sub) head_lists_to_vocab(lists, T, top, m->draft_ids);
            if (!top_out) top_expand(logits, V, lists, T, top);
        } else {
            be->ops->download(be, logits, y, sizeof(float) * (size_t)T * Vw);
            if (sub) head_rows_to_vocab(logits, T, V, m->draft_ids, Vw);
            if (top_out) be_logits_top_host(be, top_out, logits, V, T, V, top);
        }
    }
    pthread_mutex_unlock(&mm->head_lock);
    return rc;
}

static int lm_head_rows(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, int top,
                        int32_t *top_out, mtplx_err *err) {
    return lm_head_rows_in(m, which, hidden, NULL, T, logits, top, top_out, (head_also){0}, err);
}

int fwd_head_device_rows(const mtplx_model *m, head_kind which, const float *x_dev, int T, float *logits, int top,
                         int32_t *top_out, float *also_host, const float *also_dev, size_t also_n, mtplx_err *err) {
    return lm_head_rows_in(m, which, x_dev, x_dev, T, logits, top, top_out, (head_also){also_host, also_dev, also_n},
                           err);
}

int model_lm_head_top(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, int top,
                      mtplx_err *err) {
    return lm_head_rows(m, which, hidden, T, logits, top, NULL, err);
}

int model_lm_head_list(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, int top,
                       int32_t *top_out, mtplx_err *err) {
    if (!top_out) return err_set(err, MTPLX_EINVAL, "model_lm_head_list: no list output");
    return lm_head_rows(m, which, hidden, T, logits, top, top_out, err);
}
