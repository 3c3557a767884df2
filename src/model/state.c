/* state.c — per-sequence trunk state: attention KV caches, Gated DeltaNet conv and recurrent
 * states, the innovation tape of the last capturing forward, and rollback (model_state_commit).
 *
 * Rollback without copies: each GDN layer has two recurrent-state buffers. A capturing forward reads
 * its start state from rec[cur] and writes the rows' states into rec[cur ^ 1], then flips cur. To
 * keep only the first `keep` rows, commit replays the tape (decay g, innovation delta, normalised k
 * per row) from the untouched start state with the same update kern_gdn_step used, which gives the
 * state bit-identical to having forwarded only those rows. Attention KV is trimmed by moving len. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "../kernels/gdn.h"
#include "../kernels/threadpool.h"
#include "family.h"

/* Rows of scratch for prefill chunks when the caller asks for fewer capture rows. */
#define PREFILL_CHUNK_ROWS 32

static int kv_layer_init(kv_layer *kv, const mtplx_model *m, int capacity, mtplx_err *err) {
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw); /* MLA caches keys and values of unequal widths */
    kv->k = mem_zalloc((size_t)heads * capacity * kw, sizeof(float), "KV cache keys", err);
    kv->v = mem_zalloc((size_t)heads * capacity * vw, sizeof(float), "KV cache values", err);
    return kv->k && kv->v ? 0 : MTPLX_ENOMEM;
}

static void kv_layer_free(kv_layer *kv) {
    free(kv->k);
    free(kv->v);
}

static int gdn_state_init(gdn_layer_state *g, const mtplx_model *m, int max_rows, mtplx_err *err) {
    const model_config *c = &m->cfg;
    size_t C = (size_t)m->conv_dim, kc1 = (size_t)c->conv_kernel - 1;
    size_t rec = (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim;
    g->conv = mem_zalloc(kc1 ? kc1 * C : 1, sizeof(float), "GDN conv state", err);
    g->rec[0] = mem_zalloc(rec, sizeof(float), "GDN recurrent state", err);
    g->rec[1] = mem_zalloc(rec, sizeof(float), "GDN recurrent state", err);
    g->tape_win = mem_alloc((kc1 + max_rows) * C, sizeof(float), "GDN tape (conv)", err);
    g->tape_k = mem_alloc((size_t)max_rows * m->key_dim, sizeof(float), "GDN tape (k)", err);
    g->tape_g = mem_alloc((size_t)max_rows * c->lin_v_heads, sizeof(float), "GDN tape (g)", err);
    g->tape_d = mem_alloc((size_t)max_rows * m->value_dim, sizeof(float), "GDN tape (delta)", err);
    return g->conv && g->rec[0] && g->rec[1] && g->tape_win && g->tape_k && g->tape_g && g->tape_d ? 0 : MTPLX_ENOMEM;
}

static void gdn_state_free(gdn_layer_state *g) {
    free(g->conv);
    free(g->rec[0]);
    free(g->rec[1]);
    free(g->tape_win);
    free(g->tape_k);
    free(g->tape_g);
    free(g->tape_d);
}

int model_state_new(const mtplx_model *m, int capacity, int max_rows, model_state **out, mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    if (capacity < 1 || max_rows < 1)
        return err_set(err, MTPLX_EINVAL, "model_state_new: capacity %d and max_rows %d must be >= 1", capacity,
                       max_rows);
    model_state *s = mem_zalloc(1, sizeof *s, "model state", err);
    if (!s) return err->code;
    s->m = m;
    s->capacity = capacity;
    s->max_rows = max_rows;
    int rc = MTPLX_ENOMEM;
    s->kv = mem_zalloc((size_t)(m->n_attn ? m->n_attn : 1), sizeof *s->kv, "KV caches", err);
    s->gdn = mem_zalloc((size_t)(m->n_gdn ? m->n_gdn : 1), sizeof *s->gdn, "GDN states", err);
    if (!s->kv || !s->gdn) goto fail;
    for (int i = 0; i < m->n_attn; i++)
        if ((rc = kv_layer_init(&s->kv[i], m, capacity, err))) goto fail;
    for (int i = 0; i < m->n_gdn; i++)
        if ((rc = gdn_state_init(&s->gdn[i], m, max_rows, err))) goto fail;
    int rows = max_rows > PREFILL_CHUNK_ROWS ? max_rows : PREFILL_CHUNK_ROWS;
    if ((rc = fwd_scratch_init(&s->scr, m, rows, capacity, err))) goto fail;
    *out = s;
    return 0;
fail:
    model_state_free(s);
    return err->code ? err->code : rc;
}

void model_state_free(model_state *s) {
    if (!s) return;
    if (s->kv)
        for (int i = 0; i < s->m->n_attn; i++) kv_layer_free(&s->kv[i]);
    if (s->gdn)
        for (int i = 0; i < s->m->n_gdn; i++) gdn_state_free(&s->gdn[i]);
    free(s->kv);
    free(s->gdn);
    fwd_scratch_free(&s->scr);
    free(s);
}

int model_state_len(const model_state *s) { return s->len; }
int model_state_capacity(const model_state *s) { return s->capacity; }

void model_state_reset(model_state *s) {
    const mtplx_model *m = s->m;
    const model_config *c = &m->cfg;
    size_t rec = (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim;
    size_t conv = (size_t)(c->conv_kernel - 1) * m->conv_dim;
    for (int i = 0; i < m->n_gdn; i++) {
        memset(s->gdn[i].conv, 0, sizeof(float) * conv);
        memset(s->gdn[i].rec[0], 0, sizeof(float) * rec);
        memset(s->gdn[i].rec[1], 0, sizeof(float) * rec);
    }
    s->len = 0;
    s->cur = 0;
    s->cap_rows = 0;
}

/* Replays the first `keep` taped rows of one GDN layer for a range of value heads (a thread-pool
 * task). Heads outer, rows inner, so a head's state stays in cache across the rows; each row's
 * arithmetic is kern_gdn_replay's, in row order, as in the forward. */
typedef struct {
    const gdn_layer_state *g;
    float *live;        /* rec[cur]: the state after all captured rows, overwritten */
    const float *start; /* rec[cur ^ 1]: the state before the call */
    int keep, Hv, Dk, Dv, ratio, kd;
    size_t head_sz;
} replay_job;

static void replay_task(void *ctx, int task, int n_tasks) {
    const replay_job *j = ctx;
    int h0 = (int)((long)j->Hv * task / n_tasks), h1 = (int)((long)j->Hv * (task + 1) / n_tasks);
    for (int hv = h0; hv < h1; hv++)
        for (int t = 0; t < j->keep; t++) {
            float *dst = j->live + hv * j->head_sz;
            const float *src = t == 0 ? j->start + hv * j->head_sz : dst;
            kern_gdn_replay(dst, src, j->g->tape_k + (size_t)t * j->kd + (size_t)(hv / j->ratio) * j->Dk,
                            j->g->tape_d + ((size_t)t * j->Hv + hv) * j->Dv, j->g->tape_g[(size_t)t * j->Hv + hv],
                            j->Dk, j->Dv);
        }
}

int model_state_commit(model_state *s, int keep, mtplx_err *err) {
    if (s->cap_rows <= 0)
        return err_set(err, MTPLX_EINVAL, "model_state_commit: the last forward did not capture");
    if (keep < 1 || keep > s->cap_rows)
        return err_set(err, MTPLX_EINVAL, "model_state_commit: keep %d outside [1, %d]", keep, s->cap_rows);
    const mtplx_model *m = s->m;
    const model_config *c = &m->cfg;
    int Hv = c->lin_v_heads, Dk = c->lin_k_dim, Dv = c->lin_v_dim, ratio = Hv / (c->lin_k_heads ? c->lin_k_heads : 1);
    size_t C = (size_t)m->conv_dim, kc1 = (size_t)c->conv_kernel - 1, head_sz = (size_t)Dv * Dk;
    if (keep < s->cap_rows) {
        for (int i = 0; i < m->n_gdn; i++) {
            gdn_layer_state *g = &s->gdn[i];
            memcpy(g->conv, g->tape_win + (size_t)keep * C, sizeof(float) * kc1 * C);
            replay_job j = {g, g->rec[s->cur], g->rec[s->cur ^ 1], keep, Hv, Dk, Dv, ratio, m->key_dim, head_sz};
            tpool *pool = tpool_global();
            int nth = tpool_threads(pool);
            if (nth > 1 && (size_t)Hv * head_sz * keep >= ((size_t)1 << 16))
                tpool_run(pool, Hv < 2 * nth ? Hv : 2 * nth, replay_task, &j);
            else
                replay_task(&j, 0, 1);
        }
    }
    s->len = s->cap_base + keep;
    s->cap_rows = 0;
    return 0;
}

int model_state_copy(model_state *dst, const model_state *src, mtplx_err *err) {
    const mtplx_model *m = src->m;
    if (dst->m != m) return err_set(err, MTPLX_EINVAL, "model_state_copy: states of different models");
    if (src->len > dst->capacity)
        return err_set(err, MTPLX_ERANGE, "model_state_copy: %d positions do not fit a capacity of %d", src->len,
                       dst->capacity);
    if (dst == src) return 0;
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw);
    for (int i = 0; i < m->n_attn; i++)
        for (int h = 0; h < heads; h++) {
            memcpy(dst->kv[i].k + (size_t)h * dst->capacity * kw, src->kv[i].k + (size_t)h * src->capacity * kw,
                   sizeof(float) * (size_t)src->len * kw);
            memcpy(dst->kv[i].v + (size_t)h * dst->capacity * vw, src->kv[i].v + (size_t)h * src->capacity * vw,
                   sizeof(float) * (size_t)src->len * vw);
        }
    const model_config *c = &m->cfg;
    size_t rec = (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim;
    size_t conv = (size_t)(c->conv_kernel - 1) * m->conv_dim;
    for (int i = 0; i < m->n_gdn; i++) {
        memcpy(dst->gdn[i].conv, src->gdn[i].conv, sizeof(float) * conv);
        memcpy(dst->gdn[i].rec[dst->cur], src->gdn[i].rec[src->cur], sizeof(float) * rec);
    }
    dst->len = src->len;
    dst->cap_rows = 0;
    return 0;
}
