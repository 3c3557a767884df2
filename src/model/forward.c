/* forward.c — the Qwen3.5 trunk forward over T rows: embedding, hybrid decoder layers (Gated
 * DeltaNet or gated full attention, then a dense SwiGLU MLP), final norm, LM head.
 *
 * Everything is fp32. Every row goes through the same arithmetic whatever T is: matmuls are
 * row-invariant (kern_matmul's contract), attention reduces over keys in key order, the conv is a
 * fixed-order window sum and the delta rule is sequential. So a row's logits from a prefill or
 * verify call are bit-identical to computing it by single-token decode (DESIGN.md §3). Prefill is
 * processed in chunks of the scratch's row capacity; chunking does not change any row's arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "../kernels/act.h"
#include "../kernels/attention.h"
#include "../kernels/gdn.h"
#include "../kernels/threadpool.h"
#include "../kernels/norm.h"
#include "../kernels/rope.h"
#include "family.h"

static int imax(int a, int b) { return a > b ? a : b; }

/* Work (multiply-adds) below which per-head attention or delta-rule steps stay on the calling thread:
 * a pool dispatch costs about 0.5 µs when the workers spin, so ~1-2 µs of work is worth splitting. */
#define FWD_SPLIT_WORK 16384.0
#define FWD_SCORE_SLOTS_MAX 64
#define ATT_BLOCK_MAX 16 /* queries per kern_attention_group call, at most (prefill load balance) */
#define ATT_SCORE_ROWS 4 /* score rows kern_attention_group needs per call (it runs 4 queries at a time) */

int fwd_scratch_init(fwd_scratch *s, const mtplx_model *m, int rows, int capacity, mtplx_err *err) {
    const model_config *c = &m->cfg;
    memset(s, 0, sizeof *s);
    int H = c->hidden_size, Dh = c->head_dim;
    int attn_w = m->q_width + 2 * c->n_kv_heads * Dh + c->n_heads * Dh;
    int gdn_w = 2 * m->value_dim + 2 * c->lin_v_heads + m->conv_dim;
    int mlp_w = 2 * c->intermediate_size;
    s->rows = rows;
    s->big_w = imax(imax(attn_w, gdn_w), imax(mlp_w, 2 * H));
    int kc1 = c->conv_kernel > 0 ? c->conv_kernel - 1 : 0;
    size_t RH = (size_t)rows * H;
    if (!(s->x = mem_alloc(RH, sizeof(float), "forward scratch x", err))) goto fail;
    if (!(s->a = mem_alloc(RH, sizeof(float), "forward scratch a", err))) goto fail;
    if (!(s->o = mem_alloc(RH, sizeof(float), "forward scratch o", err))) goto fail;
    if (!(s->big = mem_alloc((size_t)rows * s->big_w, sizeof(float), "forward scratch", err))) goto fail;
    if (!(s->win = mem_alloc((size_t)(kc1 + rows) * imax(m->conv_dim, 1), sizeof(float), "conv window", err)))
        goto fail;
    if (!(s->qk = mem_alloc((size_t)imax(2 * rows * m->key_dim, 1), sizeof(float), "gdn q/k", err))) goto fail;
    s->score_slots = 2 * tpool_threads(tpool_global());
    if (s->score_slots > FWD_SCORE_SLOTS_MAX) s->score_slots = FWD_SCORE_SLOTS_MAX;
    s->capacity = imax(capacity, 1);
    if (!(s->scores = mem_alloc((size_t)s->score_slots * ATT_SCORE_ROWS * s->capacity, sizeof(float),
                                "attention scores", err)))
        goto fail;
    if (!(s->cos_sin = mem_alloc((size_t)imax(c->rotary_dim, 1), sizeof(float), "rope", err))) goto fail;
    if (family_scratch_init(s, m, rows, err)) goto fail;
    return 0;
fail:
    fwd_scratch_free(s);
    return err ? err->code : MTPLX_ENOMEM;
}

void fwd_scratch_free(fwd_scratch *s) {
    free(s->x);
    free(s->a);
    free(s->o);
    free(s->big);
    free(s->win);
    free(s->qk);
    free(s->scores);
    free(s->cos_sin);
    family_scratch_free(s);
    memset(s, 0, sizeof *s);
}

/* The query heads of all rows of one attention call, as thread-pool tasks. The queries of KV head
 * j are (row t, head h) for h in j's group, t-major; they go in blocks of `bs` (one item each)
 * through kern_attention_group, which reads each key/value chunk once per 4 queries — from memory
 * for the first 4 of a block, from L2 after. Task `task` takes a contiguous range of items and its
 * own scores slot. The K/V of every row are already in the cache, so items are independent, and each
 * query's bits do not depend on its block. */
typedef struct {
    float *big;           /* [R][bw] projections: q (roped, normed) per head, then the outputs */
    const kv_layer *kv;
    int bw, R, nH, group, Dh, q_stride, att_off, gated, pos0, capacity, bs, blocks; /* bs: queries per item */
    float scale;
    float *scores;        /* [n_tasks][ATT_SCORE_ROWS][capacity] */
} attn_job;

static void attn_task(void *ctx, int task, int n_tasks) {
    const attn_job *j = ctx;
    int items = (j->nH / j->group) * j->blocks, Dh = j->Dh, per_kv = j->R * j->group;
    int i0 = (int)((long)items * task / n_tasks), i1 = (int)((long)items * (task + 1) / n_tasks);
    float *scores = j->scores + (size_t)task * ATT_SCORE_ROWS * j->capacity;
    for (int i = i0; i < i1; i++) {
        int kvh = i / j->blocks, b0 = (i % j->blocks) * j->bs;
        int nq = per_kv - b0 < j->bs ? per_kv - b0 : j->bs;
        float *out[ATT_BLOCK_MAX];
        const float *q[ATT_BLOCK_MAX];
        int n[ATT_BLOCK_MAX];
        for (int e = 0; e < nq; e++) {
            int t = (b0 + e) / j->group, h = kvh * j->group + (b0 + e) % j->group;
            float *row = j->big + (size_t)t * j->bw;
            q[e] = row + h * j->q_stride;
            out[e] = row + j->att_off + h * Dh;
            n[e] = j->pos0 + t + 1;
        }
        size_t base = (size_t)kvh * j->capacity * Dh;
        kern_attention_group(out, q, n, nq, j->kv->k + base, Dh, Dh, j->kv->v + base, Dh, Dh, j->scale, scores,
                             j->capacity);
        if (j->gated)
            for (int e = 0; e < nq; e++) kern_mul_sigmoid(out[e], q[e] + Dh, Dh);
    }
}

/* How many pool tasks to split `items` independent pieces of work into, `work` multiply-adds in all:
 * 1 (run on the caller) when there is one thread or too little work, else up to 2 per thread, at
 * most max_tasks. */
static int fwd_tasks(double work, int items, int max_tasks) {
    tpool *pool = tpool_global();
    int nth = tpool_threads(pool);
    if (nth < 2 || work < FWD_SPLIT_WORK || items < 2) return 1;
    int n = 2 * nth;
    if (n > items) n = items;
    if (n > max_tasks) n = max_tasks;
    return n < 1 ? 1 : n;
}

/* Gated attention: s->a [R][H] in, s->o [R][H] out. Row t is at position pos0 + t; the K/V of all R
 * rows are written into the cache first, then every (row, head) attends to positions 0..pos0+t —
 * all of them in one thread-pool dispatch. */
void layer_attention(const mtplx_model *m, const attn_weights *w, kv_layer *kv, int capacity, int pos0,
                     int R, fwd_scratch *s) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, Dh = c->head_dim, nH = c->n_heads, nKV = c->n_kv_heads, rd = c->rotary_dim;
    int kvw = nKV * Dh, qw = m->q_width, bw = s->big_w, group = nH / nKV, gated = c->attn_output_gate;
    int k_off = qw, v_off = qw + kvw, att_off = qw + 2 * kvw, q_stride = Dh * (gated ? 2 : 1);
    float eps = c->rms_norm_eps, scale = 1.0f / sqrtf((float)Dh);
    kern_mm_out qkv[3] = {{s->big, bw, &w->q}, {s->big + k_off, bw, &w->k}, {s->big + v_off, bw, &w->v}};
    kern_matmul_n(qkv, 3, s->a, H, R);
    for (int t = 0; t < R; t++) {
        float *row = s->big + (size_t)t * bw;
        int pos = pos0 + t;
        if (rd > 0) {
            kern_rope_cos_sin(s->cos_sin, m->rope_inv_freq, rd, pos);
            family_rope_scale_table(m, s->cos_sin, rd); /* YaRN attention factor */
        }
        for (int j = 0; j < nKV; j++) {
            float *kh = row + k_off + j * Dh;
            if (w->k_norm) kern_rmsnorm(kh, kh, w->k_norm, Dh, eps);
            if (rd > 0) kern_rope_apply(kh, s->cos_sin, rd);
            memcpy(kv->k + ((size_t)j * capacity + pos) * Dh, kh, sizeof(float) * Dh);
            memcpy(kv->v + ((size_t)j * capacity + pos) * Dh, row + v_off + j * Dh, sizeof(float) * Dh);
        }
        for (int h = 0; h < nH; h++) {
            float *qh = row + h * q_stride;
            if (w->q_norm) kern_rmsnorm(qh, qh, w->q_norm, Dh, eps);
            if (rd > 0) kern_rope_apply(qh, s->cos_sin, rd);
        }
    }
    /* blocks as large as the pool allows (each one reads its KV head from memory once), at most
     * ATT_BLOCK_MAX so a prefill's causal rows still spread evenly */
    int per_kv = R * group, split = (tpool_threads(tpool_global()) + nKV - 1) / nKV;
    int bs = (per_kv + split - 1) / split;
    bs = bs > ATT_BLOCK_MAX ? ATT_BLOCK_MAX : bs < 1 ? 1 : bs;
    int blocks = (per_kv + bs - 1) / bs;
    attn_job j = {s->big, kv, bw, R, nH, group, Dh, q_stride, att_off, gated, pos0, capacity, bs, blocks, scale,
                  s->scores};
    double work = (double)R * nH * 2.0 * Dh * (pos0 + (R + 1) / 2.0);
    int n_tasks = fwd_tasks(work, nKV * blocks, s->score_slots);
    if (n_tasks > 1) tpool_run(tpool_global(), n_tasks, attn_task, &j);
    else attn_task(&j, 0, 1);
    kern_matmul(s->o, H, s->big + att_off, bw, R, &w->o);
}

/* The delta-rule steps of all R rows for a range of value heads (a thread-pool task). A head's rows
 * run in order (row t reads the state row t - 1 wrote); heads are independent and each writes only
 * its own state, outputs and tape entries. */
typedef struct {
    const gdn_weights *w;
    gdn_layer_state *st;
    float *big;                  /* [R][bw] projections; y is written at y_off */
    const float *qn, *kn;        /* [R][Hk·Dk] normalised queries / keys */
    const float *src;            /* the start state [Hv][Dv][Dk] */
    float *dst;                  /* where the rows' states go (may equal src) */
    int R, bw, Hv, Dv, Dk, kd, ratio, b_off, a_off, y_off, u_off, capture;
    float eps;
    size_t head_sz;              /* Dv·Dk */
} gdn_heads_job;

#define GDN_STEP_ROWS 32 /* rows per kern_gdn_steps call (its g/beta arrays live on the stack) */

static void gdn_heads_task(void *ctx, int task, int n_tasks) {
    const gdn_heads_job *j = ctx;
    const gdn_weights *w = j->w;
    int h0 = (int)((long)j->Hv * task / n_tasks), h1 = (int)((long)j->Hv * (task + 1) / n_tasks);
    for (int hv = h0; hv < h1; hv++) {
        int hk = hv / j->ratio, Dv = j->Dv;
        float *S = j->dst + hv * j->head_sz;
        const float *S0 = j->src + hv * j->head_sz;
        for (int t0 = 0; t0 < j->R; t0 += GDN_STEP_ROWS) {
            int n = j->R - t0 < GDN_STEP_ROWS ? j->R - t0 : GDN_STEP_ROWS;
            float g[GDN_STEP_ROWS], beta[GDN_STEP_ROWS];
            for (int t = 0; t < n; t++) {
                const float *row = j->big + (size_t)(t0 + t) * j->bw;
                beta[t] = act_sigmoid(row[j->b_off + hv]);
                g[t] = expf(w->neg_A[hv] * act_softplus(row[j->a_off + hv] + w->dt_bias[hv]));
                if (j->capture) j->st->tape_g[(size_t)(t0 + t) * j->Hv + hv] = g[t];
            }
            float *row0 = j->big + (size_t)t0 * j->bw;
            float *delta = j->capture ? j->st->tape_d + ((size_t)t0 * j->Hv + hv) * Dv : NULL;
            kern_gdn_steps(S, t0 == 0 ? S0 : S, j->qn + (size_t)t0 * j->kd + hk * j->Dk,
                           j->kn + (size_t)t0 * j->kd + hk * j->Dk, j->kd, row0 + j->u_off + 2 * j->kd + hv * Dv,
                           j->bw, g, beta, row0 + j->y_off + hv * Dv, j->bw, delta, j->Hv * Dv, n, j->Dk, Dv);
        }
        /* gated RMSNorm of every row's output: plain weight, then × silu(z) */
        for (int t = 0; t < j->R; t++) {
            float *row = j->big + (size_t)t * j->bw, *y = row + j->y_off + hv * Dv;
            kern_rmsnorm_gated(y, y, w->norm, row + hv * Dv, Dv, j->eps);
        }
    }
}

/* Gated DeltaNet: s->a in, s->o out. Advances the layer's conv state and recurrent state by R rows.
 * With capture, the start state rec[cur] is left untouched (the rows are written into rec[cur ^ 1])
 * and the innovation tape of every row is recorded for model_state_commit. */
static void layer_gdn(const mtplx_model *m, const gdn_weights *w, gdn_layer_state *st, int cur, int capture,
                      int R, fwd_scratch *s) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, Hk = c->lin_k_heads, Hv = c->lin_v_heads, Dk = c->lin_k_dim, Dv = c->lin_v_dim;
    int C = m->conv_dim, kc1 = c->conv_kernel - 1, bw = s->big_w, kd = m->key_dim, vd = m->value_dim;
    int b_off = vd, a_off = vd + Hv, y_off = vd + 2 * Hv, u_off = 2 * vd + 2 * Hv, ratio = Hv / Hk;
    float eps = c->rms_norm_eps, qscale = 1.0f / sqrtf((float)Dk);
    size_t head_sz = (size_t)Dv * Dk;

    float *win = capture ? st->tape_win : s->win;
    memcpy(win, st->conv, sizeof(float) * (size_t)kc1 * C);
    if (w->fz.fused) { /* Qwen3-Next: in_proj_qkvz / in_proj_ba, regrouped into the split layout */
        family_gdn_project(m, &w->fz, s->a, R, win + (size_t)kc1 * C, C, s->big, s->big + b_off, s->big + a_off, bw, s);
    } else {
        kern_mm_out in[4] = {{win + (size_t)kc1 * C, C, &w->qkv}, {s->big, bw, &w->z}, {s->big + b_off, bw, &w->b},
                             {s->big + a_off, bw, &w->a}};
        kern_matmul_n(in, 4, s->a, H, R);
    }
    kern_conv1d_silu(s->big + u_off, bw, win, C, w->conv_w, C, c->conv_kernel, R);
    memcpy(st->conv, win + (size_t)R * C, sizeof(float) * (size_t)kc1 * C);

    /* normalised q and k of every row (value heads of one key head share them) */
    float *qn = s->qk, *kn = capture ? st->tape_k : s->qk + (size_t)s->rows * kd;
    for (int t = 0; t < R; t++) {
        const float *u = s->big + (size_t)t * bw + u_off;
        for (int h = 0; h < Hk; h++) {
            kern_l2norm(qn + (size_t)t * kd + h * Dk, u + h * Dk, Dk, 1e-6f, qscale);
            kern_l2norm(kn + (size_t)t * kd + h * Dk, u + kd + h * Dk, Dk, 1e-6f, 1.0f);
        }
    }
    float *dst = capture ? st->rec[cur ^ 1] : st->rec[cur];
    gdn_heads_job j = {w,     st,    s->big, qn,    kn,    st->rec[cur], dst,     R,   bw,  Hv, Dv,
                       Dk,    kd,    ratio,  b_off, a_off, y_off,        u_off,   capture, eps, head_sz};
    /* value heads are independent: split them over the pool, all rows in one dispatch */
    int n_tasks = fwd_tasks(3.0 * R * Hv * head_sz, Hv, Hv);
    if (n_tasks > 1) tpool_run(tpool_global(), n_tasks, gdn_heads_task, &j);
    else gdn_heads_task(&j, 0, 1);
    kern_matmul(s->o, H, s->big + y_off, bw, R, &w->out);
}

void layer_mlp(const mtplx_model *m, const mlp_weights *w, int R, fwd_scratch *s) {
    int H = m->cfg.hidden_size, I = m->cfg.intermediate_size, bw = s->big_w;
    kern_mm_out gu[2] = {{s->big, bw, &w->gate}, {s->big + I, bw, &w->up}};
    kern_matmul_n(gu, 2, s->a, H, R);
    for (int t = 0; t < R; t++) {
        float *row = s->big + (size_t)t * bw;
        kern_swiglu(row, row, row + I, I);
    }
    kern_matmul(s->o, H, s->big, bw, R, &w->down);
}

static void rows_rmsnorm(float *y, const float *x, const float *w, int R, int H, float eps) {
    kern_rmsnorm_rows(y, H, x, H, w, H, R, eps);
}

static void rows_add(float *x, const float *o, int R, int H) {
    size_t n = (size_t)R * H;
    for (size_t i = 0; i < n; i++) x[i] += o[i];
}

/* One chunk of R rows at positions s->len.. through the trunk; leaves post-final-norm rows in s->scr.a. */
static void trunk_chunk(const mtplx_model *m, model_state *s, const int32_t *tokens, int R, int capture) {
    const model_config *c = &m->cfg;
    fwd_scratch *scr = &s->scr;
    int H = c->hidden_size;
    float eps = c->rms_norm_eps;
    for (int t = 0; t < R; t++) kern_weight_row(&m->embed, tokens[t], scr->x + (size_t)t * H);
    for (int i = 0; i < c->n_layers; i++) {
        const layer_weights *L = &m->layers[i];
        rows_rmsnorm(scr->a, scr->x, L->in_norm, R, H, eps);
        if (L->mixer == MIXER_ATTN)
            layer_attention(m, &L->attn, &s->kv[L->slot], s->capacity, s->len, R, scr);
        else if (L->mixer == MIXER_MLA)
            layer_mla(m, &L->mla, &s->kv[L->slot], s->capacity, s->len, R, scr);
        else
            layer_gdn(m, &L->gdn, &s->gdn[L->slot], s->cur, capture, R, scr);
        rows_add(scr->x, scr->o, R, H);
        rows_rmsnorm(scr->a, scr->x, L->post_norm, R, H, eps);
        layer_ffn(m, L, R, scr);
        rows_add(scr->x, scr->o, R, H);
    }
    rows_rmsnorm(scr->a, scr->x, m->final_norm, R, H, eps);
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
        if (req && req->hidden) memcpy(req->hidden + (size_t)c0 * H, hn, sizeof(float) * (size_t)R * H);
        if (req && req->logits) {
            int t0 = logits_from > c0 ? logits_from - c0 : 0;
            if (t0 < R)
                kern_matmul(req->logits + (size_t)(c0 + t0 - logits_from) * V, V, hn + (size_t)t0 * H, H, R - t0,
                            &m->lm_head);
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
    const kern_weight *w = which == HEAD_DRAFT ? &m->draft_head : &m->lm_head;
    if (which == HEAD_MTP && m->fam.ds_mtp) w = &m->fam.ds_head; /* DeepSeek shared_head.head */
    if (T > 0) kern_matmul(logits, m->cfg.vocab_size, hidden, m->cfg.hidden_size, T, w);
    return 0;
}
