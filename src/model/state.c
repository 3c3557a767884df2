/* state.c — per-sequence trunk state: attention KV caches, Gated DeltaNet conv and recurrent
 * states, the innovation tape of the last capturing forward, and rollback (model_state_commit).
 *
 * Rollback without copies: each GDN layer has two recurrent-state buffers. A capturing forward reads
 * its start state from rec[cur] and writes the rows' states into rec[cur ^ 1], then flips cur. To
 * keep only the first `keep` rows, commit replays the tape (decay g, innovation delta, normalised k
 * per row) from the untouched start state with the same update kern_gdn_step used, which gives the
 * state bit-identical to having forwarded only those rows (the backend's gdn_replay op). Attention KV is trimmed by moving len.
 *
 * The GDN part of a commit is deferred (pend_keep) until the state's next forward, which settles the
 * commits of all its sequences with one gdn_commit call per layer: through the scheduler every
 * sequence commits on its own thread after a merged verify, and doing each commit there cost two
 * launches per layer and sequence (bench/cuda.md, "Session 5, commit and download"). Whatever reads
 * or overwrites the GDN states outside a forward (copy, fork, snapshots, reset) settles or drops the
 * pending commit first. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "family.h"

/* One GDN layer's state arrays in backend memory (conv and recurrent states zeroed). */
static int gdn_state_init(gdn_layer_state *g, const mtplx_model *m, int max_rows, mtplx_err *err) {
    const model_config *c = &m->cfg;
    be_backend *be = m->be;
    size_t C = (size_t)m->conv_dim, kc1 = (size_t)c->conv_kernel - 1;
    size_t rec = (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim;
    struct {
        float **p;
        size_t n;
        int zero;
        const char *what;
    } a[7] = {{&g->conv, kc1 ? kc1 * C : 1, 1, "GDN conv state"},
              {&g->rec[0], rec, 1, "GDN recurrent state"},
              {&g->rec[1], rec, 1, "GDN recurrent state"},
              {&g->tape_win, (kc1 + max_rows) * C, 0, "GDN tape (conv)"},
              {&g->tape_k, (size_t)max_rows * m->key_dim, 0, "GDN tape (k)"},
              {&g->tape_g, (size_t)max_rows * c->lin_v_heads, 0, "GDN tape (g)"},
              {&g->tape_d, (size_t)max_rows * m->value_dim, 0, "GDN tape (delta)"}};
    for (int i = 0; i < 7; i++) {
        if (be->ops->buf_alloc(be, sizeof(float) * a[i].n, a[i].zero, a[i].what, &g->bufs[i], err))
            return err ? err->code : MTPLX_ENOMEM;
        *a[i].p = be_buf_addr(be, g->bufs[i]);
    }
    return 0;
}

static void gdn_state_free(const mtplx_model *m, gdn_layer_state *g) {
    for (int i = 0; i < 7; i++) m->be->ops->buf_free(m->be, g->bufs[i]);
}

/* A state over `pool` (standalone when own != NULL: the pool is the state's and it gets a scratch). */
static int state_make(const mtplx_model *m, kv_pool *pool, kv_pool *own, int capacity, int max_rows,
                      model_state **out, mtplx_err *err) {
    model_state *s = mem_zalloc(1, sizeof *s, "model state", err);
    if (!s) {
        if (own) kv_pool_release(own), free(own);
        return err->code;
    }
    s->m = m;
    s->own = own;
    s->capacity = capacity;
    s->max_rows = max_rows;
    int rc = kv_table_init(&s->kv, pool, capacity, err);
    s->gdn = mem_zalloc((size_t)(m->n_gdn ? m->n_gdn : 1), sizeof *s->gdn, "GDN states", err);
    if (rc || !s->gdn) goto fail;
    for (int i = 0; i < m->n_gdn; i++)
        if ((rc = gdn_state_init(&s->gdn[i], m, max_rows, err))) goto fail;
    int chunk = model_prefill_rows(m); /* scratch rows: a prefill chunk, or more capture rows */
    int rows = max_rows > chunk ? max_rows : chunk;
    if (own && (rc = fwd_scratch_init(&s->scr, m, rows, capacity, err))) goto fail;
    *out = s;
    return 0;
fail:
    model_state_free(s);
    return err->code ? err->code : MTPLX_ENOMEM;
}

uint64_t model_state_bytes_per_token(const mtplx_model *m, int context) {
    const model_config *c = &m->cfg;
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw);
    uint64_t kv_pos = (uint64_t)heads * (uint64_t)(kw + vw) * sizeof(float);
    uint64_t rec = (uint64_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * sizeof(float);
    uint64_t conv_ch = 2ull * c->lin_k_heads * c->lin_k_dim + (uint64_t)c->lin_v_heads * c->lin_v_dim;
    uint64_t conv = (uint64_t)(c->conv_kernel > 1 ? c->conv_kernel - 1 : 0) * conv_ch * sizeof(float);
    return (uint64_t)m->n_gdn * 2 * (rec + conv) + (uint64_t)m->n_attn * kv_pos * ((uint64_t)context + 1);
}

int model_state_new(const mtplx_model *m, int capacity, int max_rows, model_state **out, mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    if (capacity < 1 || max_rows < 1)
        return err_set(err, MTPLX_EINVAL, "model_state_new: capacity %d and max_rows %d must be >= 1", capacity,
                       max_rows);
    kv_pool *own = mem_zalloc(1, sizeof *own, "KV pool", err);
    if (!own) return err->code;
    int rc = kv_pool_init(own, m, m->n_attn, (capacity + KV_PAGE - 1) / KV_PAGE, err);
    if (rc) {
        free(own);
        return rc;
    }
    return state_make(m, own, own, capacity, max_rows, out, err);
}

int model_state_new_in(seq_pool *pool, int capacity, int max_rows, model_state **out, mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    if (capacity < 1 || max_rows < 1)
        return err_set(err, MTPLX_EINVAL, "model_state_new_in: capacity %d and max_rows %d must be >= 1", capacity,
                       max_rows);
    return state_make(pool->m, &pool->trunk, NULL, capacity, max_rows, out, err);
}

void model_state_free(model_state *s) {
    if (!s) return;
    kv_table_free(&s->kv);
    if (s->gdn)
        for (int i = 0; i < s->m->n_gdn; i++) gdn_state_free(s->m, &s->gdn[i]);
    free(s->gdn);
    fwd_scratch_free(&s->scr);
    if (s->own) {
        kv_pool_release(s->own);
        free(s->own);
    }
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
        m->be->ops->fill_zero(m->be, s->gdn[i].conv, sizeof(float) * conv);
        m->be->ops->fill_zero(m->be, s->gdn[i].rec[0], sizeof(float) * rec);
        m->be->ops->fill_zero(m->be, s->gdn[i].rec[1], sizeof(float) * rec);
    }
    s->len = 0;
    s->cur = 0;
    s->cap_rows = 0;
    s->pend_keep = 0;
    kv_table_trim(&s->kv, 0);
}

int model_state_commit(model_state *s, int keep, mtplx_err *err) {
    if (s->cap_rows <= 0)
        return err_set(err, MTPLX_EINVAL, "model_state_commit: the last forward did not capture");
    if (keep < 1 || keep > s->cap_rows)
        return err_set(err, MTPLX_EINVAL, "model_state_commit: keep %d outside [1, %d]", keep, s->cap_rows);
    if (keep < s->cap_rows && s->m->n_gdn > 0) s->pend_keep = keep; /* the tapes stay until the next forward */
    s->len = s->cap_base + keep;
    s->cap_rows = 0;
    kv_table_trim(&s->kv, s->len);
    return 0;
}

#define SETTLE_ITEMS 32 /* commits a gdn_commit call takes: every layer's at once for a model of up to 32 GDN
                          * layers and one sequence (a device backend runs a call as one launch) */

/* The pending commits of q[0..k) (k <= BATCH_SEQS_MAX, all with pend_keep > 0), every GDN layer's of
 * every state, in gdn_commit calls of up to SETTLE_ITEMS items (layer-major, in state order). */
static void settle_some(model_state *const *q, int k) {
    const mtplx_model *m = q[0]->m;
    const model_config *c = &m->cfg;
    size_t C = (size_t)m->conv_dim, kc1 = (size_t)c->conv_kernel - 1;
    be_gdn_commit it[SETTLE_ITEMS];
    int n = 0;
    for (int l = 0; l < m->n_gdn; l++)
        for (int i = 0; i < k; i++) {
            const model_state *s = q[i];
            const gdn_layer_state *g = &s->gdn[l];
            it[n++] = (be_gdn_commit){g->conv, g->tape_win + (size_t)s->pend_keep * C, g->rec[s->cur], g->rec[s->cur ^ 1],
                                      g->tape_k, g->tape_g, g->tape_d, s->pend_keep};
            if (n == SETTLE_ITEMS || (l == m->n_gdn - 1 && i == k - 1)) { /* full, or the last item */
                m->be->ops->gdn_commit(m->be, it, n, kc1 * C, c->lin_k_heads, c->lin_v_heads, c->lin_k_dim,
                                       c->lin_v_dim);
                n = 0;
            }
        }
    for (int i = 0; i < k; i++) q[i]->pend_keep = 0;
}

void state_settle(model_state *const *st, int n) {
    int i = 0;
    while (i < n) { /* in groups of at most BATCH_SEQS_MAX pending states: none is ever skipped */
        model_state *q[BATCH_SEQS_MAX];
        int k = 0;
        for (; i < n && k < BATCH_SEQS_MAX; i++)
            if (st[i]->pend_keep > 0) q[k++] = st[i];
        if (k) settle_some(q, k);
    }
}

/* Settle s's pending commit now and wait until the backend has applied it (a 4-byte download of a
 * state it wrote): for benchmarks, so that the next forward's time holds only that forward's work. */
void model_state_settle(model_state *s) {
    state_settle(&s, 1);
    if (s->m->n_gdn > 0) {
        float sink;
        s->m->be->ops->download(s->m->be, &sink, s->gdn[0].conv, sizeof sink);
    }
}

/* dst's live GDN conv and recurrent states = src's (src's pending commit settled first, dst's dropped). */
static void gdn_copy(model_state *dst, const model_state *src) {
    model_state *sp = (model_state *)src; /* settling keeps src's values (state_settle) */
    state_settle(&sp, 1);
    dst->pend_keep = 0;
    const mtplx_model *m = src->m;
    const model_config *c = &m->cfg;
    size_t rec = (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim;
    size_t conv = (size_t)(c->conv_kernel - 1) * m->conv_dim;
    for (int i = 0; i < m->n_gdn; i++) {
        be_copy(m->be, dst->gdn[i].conv, src->gdn[i].conv, sizeof(float) * conv);
        be_copy(m->be, dst->gdn[i].rec[dst->cur], src->gdn[i].rec[src->cur], sizeof(float) * rec);
    }
}

int model_state_copy(model_state *dst, const model_state *src, mtplx_err *err) {
    const mtplx_model *m = src->m;
    if (dst->m != m) return err_set(err, MTPLX_EINVAL, "model_state_copy: states of different models");
    if (src->len > dst->capacity)
        return err_set(err, MTPLX_ERANGE, "model_state_copy: %d positions do not fit a capacity of %d", src->len,
                       dst->capacity);
    if (dst == src) return 0;
    int rc = kv_table_copy(&dst->kv, &src->kv, src->len, err);
    if (rc) return rc;
    gdn_copy(dst, src);
    dst->len = src->len;
    dst->cap_rows = 0;
    return 0;
}

int model_state_fork(model_state *dst, const model_state *src, mtplx_err *err) {
    if (dst->m != src->m) return err_set(err, MTPLX_EINVAL, "model_state_fork: states of different models");
    if (src->len > dst->capacity)
        return err_set(err, MTPLX_ERANGE, "model_state_fork: %d positions do not fit a capacity of %d", src->len,
                       dst->capacity);
    if (dst == src) return 0;
    int rc = kv_table_share(&dst->kv, &src->kv, src->len, err);
    if (rc) return rc;
    gdn_copy(dst, src);
    dst->len = src->len;
    dst->cap_rows = 0;
    return 0;
}
