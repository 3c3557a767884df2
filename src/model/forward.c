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
    if (!(s->scores = mem_alloc((size_t)imax(capacity, 1), sizeof(float), "attention scores", err))) goto fail;
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

/* Gated attention: s->a [R][H] in, s->o [R][H] out. Row t is at position pos0 + t; its K/V are
 * written into the cache there before it attends to positions 0..pos0+t. */
void layer_attention(const mtplx_model *m, const attn_weights *w, kv_layer *kv, int capacity, int pos0,
                     int R, fwd_scratch *s) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, Dh = c->head_dim, nH = c->n_heads, nKV = c->n_kv_heads, rd = c->rotary_dim;
    int kvw = nKV * Dh, qw = m->q_width, bw = s->big_w, group = nH / nKV, gated = c->attn_output_gate;
    int k_off = qw, v_off = qw + kvw, att_off = qw + 2 * kvw;
    float eps = c->rms_norm_eps, scale = 1.0f / sqrtf((float)Dh);
    kern_matmul(s->big, bw, s->a, H, R, &w->q);
    kern_matmul(s->big + k_off, bw, s->a, H, R, &w->k);
    kern_matmul(s->big + v_off, bw, s->a, H, R, &w->v);
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
            float *qh = row + h * Dh * (gated ? 2 : 1);
            float *out = row + att_off + h * Dh;
            int j = h / group;
            if (w->q_norm) kern_rmsnorm(qh, qh, w->q_norm, Dh, eps);
            if (rd > 0) kern_rope_apply(qh, s->cos_sin, rd);
            kern_attention_head(out, qh, kv->k + (size_t)j * capacity * Dh, kv->v + (size_t)j * capacity * Dh, Dh,
                                pos + 1, Dh, scale, s->scores);
            if (gated) {
                const float *gate = qh + Dh;
                for (int d = 0; d < Dh; d++) out[d] *= act_sigmoid(gate[d]);
            }
        }
    }
    kern_matmul(s->o, H, s->big + att_off, bw, R, &w->o);
}

/* The delta-rule steps of all R rows for a range of value heads (a thread-pool task; each head
 * writes only its own state, outputs and tape entries). Heads outer, rows inner: a head's state
 * (Dv·Dk floats) stays in this core's cache across the R rows, so a verify call reads and writes
 * each state once instead of once per row. Row t's arithmetic is the same as a one-row call's. */
typedef struct {
    const gdn_weights *w;
    gdn_layer_state *st;
    float *big;                 /* s->big: row t at big + t·bw */
    const float *qn, *kn;       /* [R][kd] normalised queries / keys; row stride kd */
    const float *src;
    float *dst;
    int R, bw, Hv, Dv, Dk, kd, ratio, b_off, a_off, y_off, u_off, capture;
    float eps;
    size_t head_sz;
} gdn_heads_job;

static void gdn_heads_task(void *ctx, int task, int n_tasks) {
    const gdn_heads_job *j = ctx;
    const gdn_weights *w = j->w;
    int h0 = (int)((long)j->Hv * task / n_tasks), h1 = (int)((long)j->Hv * (task + 1) / n_tasks);
    for (int hv = h0; hv < h1; hv++) {
        int hk = hv / j->ratio, Dv = j->Dv;
        float *dst = j->dst + hv * j->head_sz;
        for (int t = 0; t < j->R; t++) {
            float *row = j->big + (size_t)t * j->bw;
            const float *src = t == 0 ? j->src + hv * j->head_sz : dst;
            const float *qn = j->qn + (size_t)t * j->kd, *kn = j->kn + (size_t)t * j->kd;
            float beta = act_sigmoid(row[j->b_off + hv]);
            float g = expf(w->neg_A[hv] * act_softplus(row[j->a_off + hv] + w->dt_bias[hv]));
            float *y = row + j->y_off + hv * Dv;
            float *delta = j->capture ? j->st->tape_d + ((size_t)t * j->Hv + hv) * Dv : NULL;
            if (j->capture) j->st->tape_g[(size_t)t * j->Hv + hv] = g;
            kern_gdn_step(dst, src, qn + hk * j->Dk, kn + hk * j->Dk, row + j->u_off + 2 * j->kd + hv * Dv, g, beta,
                          y, delta, j->Dk, Dv);
            /* gated RMSNorm: plain weight, then × silu(z) */
            const float *z = row + hv * Dv;
            kern_rmsnorm(y, y, w->norm, Dv, j->eps);
            for (int i = 0; i < Dv; i++) y[i] *= act_silu(z[i]);
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
        kern_matmul(win + (size_t)kc1 * C, C, s->a, H, R, &w->qkv);
        kern_matmul(s->big, bw, s->a, H, R, &w->z);
        kern_matmul(s->big + b_off, bw, s->a, H, R, &w->b);
        kern_matmul(s->big + a_off, bw, s->a, H, R, &w->a);
    }
    kern_conv1d_silu(s->big + u_off, bw, win, C, w->conv_w, C, c->conv_kernel, R);
    memcpy(st->conv, win + (size_t)R * C, sizeof(float) * (size_t)kc1 * C);

    const float *src = st->rec[cur];
    float *dst = capture ? st->rec[cur ^ 1] : st->rec[cur];
    float *qn = s->qk, *kn = capture ? st->tape_k : s->qk + (size_t)R * kd;
    for (int t = 0; t < R; t++) {
        const float *u = s->big + (size_t)t * bw + u_off;
        for (int h = 0; h < Hk; h++) {
            kern_l2norm(qn + (size_t)t * kd + h * Dk, u + h * Dk, Dk, 1e-6f, qscale);
            kern_l2norm(kn + (size_t)t * kd + h * Dk, u + kd + h * Dk, Dk, 1e-6f, 1.0f);
        }
    }
    gdn_heads_job j = {w, st, s->big, qn, kn, src, dst, R, bw, Hv, Dv, Dk, kd, ratio, b_off, a_off, y_off, u_off,
                       capture, eps, head_sz};
    /* value heads are independent: split them over the pool when the states are big enough */
    tpool *pool = tpool_global();
    int nth = tpool_threads(pool);
    if (nth > 1 && (size_t)Hv * head_sz >= ((size_t)1 << 16))
        tpool_run(pool, Hv < 2 * nth ? Hv : 2 * nth, gdn_heads_task, &j);
    else
        gdn_heads_task(&j, 0, 1);
    kern_matmul(s->o, H, s->big + y_off, bw, R, &w->out);
}

void layer_mlp(const mtplx_model *m, const mlp_weights *w, int R, fwd_scratch *s) {
    int H = m->cfg.hidden_size, I = m->cfg.intermediate_size, bw = s->big_w;
    kern_matmul(s->big, bw, s->a, H, R, &w->gate);
    kern_matmul(s->big + I, bw, s->a, H, R, &w->up);
    for (int t = 0; t < R; t++) {
        float *row = s->big + (size_t)t * bw;
        kern_swiglu(row, row, row + I, I);
    }
    kern_matmul(s->o, H, s->big, bw, R, &w->down);
}

static void rows_rmsnorm(float *y, const float *x, const float *w, int R, int H, float eps) {
    for (int t = 0; t < R; t++) kern_rmsnorm(y + (size_t)t * H, x + (size_t)t * H, w, H, eps);
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
