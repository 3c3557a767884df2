/* mtp.c — the MTP head (`mtp.*`) and its own KV cache.
 *
 * Row t: c = fc([pre_fc_norm_embedding(embed(next_tokens[t])) | pre_fc_norm_hidden(hidden[t])]),
 * then one full-attention decoder layer at MTP position len + t (causal over the MTP cache), then
 * mtp.norm. The output is post-norm: it feeds the LM head and, at depth > 1, the next MTP step.
 * The layer itself is the family's (model_family.mtp_rows: families/qwen3_5.c for the Qwen
 * `mtp.*` layer, families/deepseek_v3.c for DeepSeek's); this file owns states, checks and heads. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "family.h"
#include "families/family_ops.h"

#define MTP_CHUNK_ROWS 32

/* A state over kv pool `pool` (standalone when own != NULL: the pool is the state's, and it gets
 * a scratch of its own). */
static int mtp_state_make(const mtplx_model *m, kv_pool *pool, kv_pool *own, int capacity, mtp_state **out,
                          mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    if (!m->has_mtp) {
        if (own) kv_pool_release(own), free(own);
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: the model has no MTP head", m->dir);
    }
    mtp_state *s = mem_zalloc(1, sizeof *s, "MTP state", err);
    if (!s) {
        if (own) kv_pool_release(own), free(own);
        return err->code;
    }
    s->m = m;
    s->own = own;
    s->capacity = capacity;
    s->kept_row = -1;
    if (kv_table_init(&s->kv, pool, capacity, err) ||
        (own && fwd_scratch_init(&s->scr, m, MTP_CHUNK_ROWS, capacity, err))) {
        mtp_state_free(s);
        return err->code;
    }
    *out = s;
    return 0;
}

int mtp_state_new(const mtplx_model *m, int capacity, mtp_state **out, mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    if (!m->has_mtp) return err_set(err, MTPLX_EUNSUPPORTED, "%s: the model has no MTP head", m->dir);
    if (capacity < 1) return err_set(err, MTPLX_EINVAL, "mtp_state_new: capacity %d must be >= 1", capacity);
    kv_pool *own = mem_zalloc(1, sizeof *own, "MTP KV pool", err);
    if (!own) return err->code;
    int rc = kv_pool_init(own, m, 1, (capacity + KV_PAGE - 1) / KV_PAGE, err);
    if (rc) {
        free(own);
        return rc;
    }
    return mtp_state_make(m, own, own, capacity, out, err);
}

int mtp_state_new_in(seq_pool *pool, int capacity, mtp_state **out, mtplx_err *err) {
    *out = NULL;
    if (capacity < 1) return err_set(err, MTPLX_EINVAL, "mtp_state_new_in: capacity %d must be >= 1", capacity);
    return mtp_state_make(pool->m, &pool->mtp, NULL, capacity, out, err);
}

void mtp_state_free(mtp_state *s) {
    if (!s) return;
    kv_table_free(&s->kv);
    fwd_scratch_free(&s->scr);
    if (s->own) {
        kv_pool_release(s->own);
        free(s->own);
    }
    free(s);
}

int mtp_state_len(const mtp_state *s) { return s->len; }

int mtp_state_trim(mtp_state *s, int new_len, mtplx_err *err) {
    if (new_len < 0 || new_len > s->len)
        return err_set(err, MTPLX_EINVAL, "mtp_state_trim: new length %d outside [0, %d]", new_len, s->len);
    s->len = new_len;
    s->kept_row = -1;
    kv_table_trim(&s->kv, new_len);
    return 0;
}

void mtp_state_reset(mtp_state *s) {
    s->len = 0;
    s->kept_row = -1;
    kv_table_trim(&s->kv, 0);
}

/* Check one sequence's MTP rows. Returns 0 or an error naming the problem. */
static int mtp_check(const mtplx_model *m, const mtp_state *s, const int32_t *next_tokens, int T, mtplx_err *err) {
    if (!m->has_mtp) return err_set(err, MTPLX_EUNSUPPORTED, "%s: the model has no MTP head", m->dir);
    if (s->m != m) return err_set(err, MTPLX_EINVAL, "model_mtp_forward: state belongs to another model");
    if (T < 1) return err_set(err, MTPLX_EINVAL, "model_mtp_forward: T = %d rows (need >= 1)", T);
    if (T > s->capacity - s->len)
        return err_set(err, MTPLX_ERANGE, "model_mtp_forward: %d rows at MTP position %d exceed the capacity %d", T,
                       s->len, s->capacity);
    int V = m->cfg.vocab_size;
    for (int t = 0; t < T; t++)
        if (next_tokens[t] < 0 || next_tokens[t] >= V)
            return err_set(err, MTPLX_EINVAL, "model_mtp_forward: token %d (row %d) outside the vocabulary [0, %d)",
                           next_tokens[t], t, V);
    return 0;
}

int model_mtp_forward(const mtplx_model *m, mtp_state *s, const float *hidden, const int32_t *next_tokens, int T,
                      float *hidden_out, mtplx_err *err) {
    int rc = mtp_check(m, s, next_tokens, T, err);
    if (rc) return rc;
    if (!s->scr.be)
        return err_set(err, MTPLX_EINVAL, "model_mtp_forward: a pooled state has no scratch (use the batch call)");
    if ((rc = kv_table_prepare(&s->kv, s->len, T, err))) return rc;
    s->kept_row = -1; /* the layer works in the scratch */
    int H = m->cfg.hidden_size;
    fwd_scratch *scr = &s->scr;
    for (int c0 = 0; c0 < T; c0 += scr->rows) {
        int R = T - c0 < scr->rows ? T - c0 : scr->rows;
        size_t RH = (size_t)R * H;
        const float *hid = fwd_stage_in(m, scr, hidden + (size_t)c0 * H, RH);
        float *out = fwd_stage_out(m, scr, hidden_out + (size_t)c0 * H);
        attn_seg as = {&s->kv, s->len, 0, R};
        m->family->mtp_rows(m, scr, &as, 1, hid, next_tokens + c0, R, out); /* the family's MTP layer */
        fwd_stage_done(m, scr, hidden_out + (size_t)c0 * H, out, RH);
        s->len += R;
    }
    return 0;
}

int model_mtp_forward_head(const mtplx_model *m, mtp_state *s, const float *hidden, const int32_t *next_tokens, int T,
                           float *hidden_out, head_kind which, int lrow, float *logits, int top, int32_t *top_out,
                           mtplx_err *err) {
    if (lrow < 0 || lrow >= T)
        return err_set(err, MTPLX_EINVAL, "model_mtp_forward_head: logits row %d outside [0, %d)", lrow, T);
    int rc = mtp_check(m, s, next_tokens, T, err);
    if (rc) return rc;
    const int H = m->cfg.hidden_size, own = s->scr.be && T <= s->scr.rows;
    if (!hidden && (!own || T != 1 || s->kept_row < 0))
        return err_set(err, MTPLX_EINVAL, "model_mtp_forward_head: no kept row to continue from (%s)",
                       !own ? "a pooled state or too many rows" : T != 1 ? "one row only" : "none kept");
    if (!own && !hidden_out)
        return err_set(err, MTPLX_EINVAL, "model_mtp_forward_head: %d rows on a %s need rows out", T,
                       s->scr.be ? "state whose scratch holds fewer" : "pooled state");
    const int kept = s->kept_row;
    s->kept_row = -1;
    if (!own) { /* a pooled state (the error) or rows in several chunks: in two calls */
        rc = model_mtp_forward(m, s, hidden, next_tokens, T, hidden_out, err);
        if (rc) return rc;
        const float *h = hidden_out + (size_t)lrow * H;
        return top_out ? model_lm_head_list(m, which, h, 1, logits, top, top_out, err)
                       : model_lm_head_top(m, which, h, 1, logits, top, err);
    }
    if ((rc = kv_table_prepare(&s->kv, s->len, T, err))) return rc;
    fwd_scratch *scr = &s->scr;
    size_t RH = (size_t)T * H;
    const float *hid;
    if (hidden) {
        hid = fwd_stage_in(m, scr, hidden, RH);
    } else { /* the last call's logits row, still in `a`: into `o`, where the layer takes its input */
        m->be->ops->copy(m->be, scr->o, scr->a + (size_t)kept * H, sizeof(float) * (size_t)H);
        hid = scr->o;
    }
    attn_seg as = {&s->kv, s->len, 0, T};
    m->family->mtp_rows(m, scr, &as, 1, hid, next_tokens, T, scr->a); /* the family's MTP layer: out into `a` */
    s->len += T;
    /* the head reads its row where the layer left it; the output rows come down behind the head */
    rc = fwd_head_device_rows(m, which, scr->a + (size_t)lrow * H, 1, logits, top, top_out, hidden_out, scr->a, RH,
                              err);
    if (!rc) s->kept_row = lrow;
    return rc;
}

/* The checks and the MTP layer of model_mtp_forward_batch: the rows' hiddens gathered into `o`, the
 * layer's output left in the scratch's `a` (the rows of sequence i from r0s[i], Ts[i] of them; *R in
 * all). Nothing comes down. Returns 0 or an error (no state changed). */
static int mtp_batch_layer(const mtplx_model *m, model_batch *b, const mtp_seq *q, int n, int *R_out, int *r0s,
                           int *Ts, mtplx_err *err) {
    if (n < 1 || n > BATCH_SEQS_MAX)
        return err_set(err, MTPLX_EINVAL, "model_mtp_forward_batch: %d sequences (1..%d)", n, BATCH_SEQS_MAX);
    int R = 0, rc;
    for (int i = 0; i < n; i++) {
        if ((rc = mtp_check(m, q[i].s, q[i].next_tokens, q[i].T, err))) return rc;
        for (int j = 0; j < i; j++)
            if (q[j].s == q[i].s) return err_set(err, MTPLX_EINVAL, "model_mtp_forward_batch: sequence %d twice", i);
        if (q[i].s->len + q[i].T > b->scr.capacity)
            return err_set(err, MTPLX_ERANGE, "model_mtp_forward_batch: %d positions exceed the batch's capacity %d",
                           q[i].s->len + q[i].T, b->scr.capacity);
        R += q[i].T;
    }
    if (R > b->scr.rows)
        return err_set(err, MTPLX_EINVAL, "model_mtp_forward_batch: %d rows exceed the batch's %d", R, b->scr.rows);
    for (int i = 0; i < n; i++)
        if ((rc = kv_table_prepare(&q[i].s->kv, q[i].s->len, q[i].T, err))) return rc;
    fwd_scratch *scr = &b->scr;
    attn_seg *as = b->segs;
    /* gather: the rows' hiddens into `o` (free until the layer writes it) and their tokens */
    const float *hin[BATCH_SEQS_MAX] = {0};
    for (int i = 0, r0 = 0; i < n; r0 += q[i].T, i++) {
        as[i] = (attn_seg){&q[i].s->kv, q[i].s->len, r0, q[i].T};
        hin[i] = q[i].hidden, r0s[i] = r0, Ts[i] = q[i].T;
        memcpy(b->tokens + r0, q[i].next_tokens, sizeof(int32_t) * q[i].T);
    }
    batch_rows_in(m, b, scr->o, R, hin, Ts, n);
    /* both layer kinds read the gathered hiddens before anything writes `o`; the output goes to `a` */
    m->family->mtp_rows(m, scr, as, n, scr->o, b->tokens, R, scr->a); /* the family's MTP layer */
    for (int i = 0; i < n; i++) q[i].s->len += q[i].T;
    *R_out = R;
    return 0;
}

int model_mtp_forward_batch(const mtplx_model *m, model_batch *b, const mtp_seq *q, int n, mtplx_err *err) {
    int R, r0s[BATCH_SEQS_MAX], Ts[BATCH_SEQS_MAX];
    int rc = mtp_batch_layer(m, b, q, n, &R, r0s, Ts, err);
    if (rc) return rc;
    float *hout[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) hout[i] = q[i].hidden_out;
    batch_rows_out(m, b, b->scr.a, R, hout, r0s, Ts, n);
    return 0;
}

/* The head's input for model_mtp_forward_batch_head: the k wanted rows of `a` in sequence order, where
 * they are when they lie one after another (one sequence, or one row each), else copied into `o` (the
 * layer is done with it). */
static const float *head_rows_gather(const mtplx_model *m, fwd_scratch *scr, const int *lrow, const int *r0s, int n,
                                     int *k_out) {
    const size_t H = (size_t)m->cfg.hidden_size;
    int k = 0, first = -1, together = 1;
    for (int i = 0; i < n; i++)
        if (lrow[i] >= 0) {
            if (k == 0) first = r0s[i] + lrow[i];
            together &= r0s[i] + lrow[i] == first + k;
            k++;
        }
    *k_out = k;
    if (together) return scr->a + (size_t)(first < 0 ? 0 : first) * H;
    for (int i = 0, j = 0; i < n; i++)
        if (lrow[i] >= 0)
            m->be->ops->copy(m->be, scr->o + (size_t)j++ * H, scr->a + (size_t)(r0s[i] + lrow[i]) * H,
                             sizeof(float) * H);
    return scr->o;
}

int model_mtp_forward_batch_head(const mtplx_model *m, model_batch *b, const mtp_seq *q, int n,
                                 const mtp_batch_head *h, mtplx_err *err) {
    const char *fn = "model_mtp_forward_batch_head";
    if (n < 1 || n > BATCH_SEQS_MAX) return err_set(err, MTPLX_EINVAL, "%s: %d sequences (1..%d)", fn, n, BATCH_SEQS_MAX);
    if (h->lists && (h->top < 1 || h->top > MODEL_TOP_MAX || h->top >= m->cfg.vocab_size))
        return err_set(err, MTPLX_EINVAL, "%s: lists of %d (1..%d)", fn, h->top, MODEL_TOP_MAX);
    if (h->top < 0) return err_set(err, MTPLX_EINVAL, "%s: top %d", fn, h->top);
    for (int i = 0; i < n; i++)
        if (h->lrow[i] < -1 || h->lrow[i] >= q[i].T)
            return err_set(err, MTPLX_EINVAL, "%s: logits row %d of sequence %d outside [0, %d)", fn, h->lrow[i], i,
                           q[i].T);
    int R, k, r0s[BATCH_SEQS_MAX], Ts[BATCH_SEQS_MAX];
    int rc = mtp_batch_layer(m, b, q, n, &R, r0s, Ts, err);
    if (rc) return rc;
    fwd_scratch *scr = &b->scr;
    const float *x = head_rows_gather(m, scr, h->lrow, r0s, n, &k);
    /* all R output rows come down behind the head into the batch's host staging, when it has one */
    const size_t H = (size_t)m->cfg.hidden_size;
    float *host = batch_host_rows(m, b, R);
    rc = fwd_head_device_rows(m, h->which, x, k, h->logits, h->top, h->lists, host, scr->a, host ? (size_t)R * H : 0,
                              err);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        if (!q[i].hidden_out) continue;
        if (host) memcpy(q[i].hidden_out, host + (size_t)r0s[i] * H, sizeof(float) * (size_t)Ts[i] * H);
        else m->be->ops->download(m->be, q[i].hidden_out, scr->a + (size_t)r0s[i] * H, sizeof(float) * (size_t)Ts[i] * H);
    }
    return 0;
}

int mtp_state_copy(mtp_state *dst, const mtp_state *src, mtplx_err *err) {
    if (dst->m != src->m) return err_set(err, MTPLX_EINVAL, "mtp_state_copy: states of different models");
    if (src->len > dst->capacity)
        return err_set(err, MTPLX_ERANGE, "mtp_state_copy: %d positions do not fit a capacity of %d", src->len,
                       dst->capacity);
    if (dst == src) return 0;
    dst->kept_row = -1;
    int rc = kv_table_copy(&dst->kv, &src->kv, src->len, err);
    if (rc) return rc;
    dst->len = src->len;
    return 0;
}
