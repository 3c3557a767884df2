/* kvpool.c — attention KV in fixed-size pages, page tables, and the sequence pool
 * (docs/architecture.md, "The sequence pool").
 *
 * A pool allocates its pages once, at creation, for every attention layer it spans; after that,
 * taking and dropping a page is a stack push/pop and a reference count — no allocation while a
 * sequence grows. A page table maps a sequence's positions to pages. Tables in the same pool may
 * share pages: fork and prefix reuse share them, and the first write into a shared page copies it
 * (kv_table_prepare). The attention ops read keys through the page table in key order, so a query's
 * bits never depend on where its keys live (kern_rows in src/kernels/attention.h). */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "family.h"

int model_kv_page_size(void) { return KV_PAGE; }

/* Floats of keys / values one page of one layer holds. */
static size_t page_k_floats(const kv_pool *p) { return (size_t)p->heads * KV_PAGE * p->kw; }
static size_t page_v_floats(const kv_pool *p) { return (size_t)p->heads * KV_PAGE * p->vw; }

int kv_pool_init(kv_pool *p, const mtplx_model *m, int n_layers, int n_pages, mtplx_err *err) {
    memset(p, 0, sizeof *p);
    p->m = m;
    pthread_mutex_init(&p->mu, NULL);
    family_kv_shape(m, &p->heads, &p->kw, &p->vw);
    if (n_layers <= 0 || n_pages <= 0) return 0; /* an empty pool: no attention layers or no pages */
    p->n_layers = n_layers;
    p->n_pages = n_pages;
    be_backend *be = m->be;
    p->kb = mem_zalloc((size_t)n_layers, sizeof *p->kb, "KV pool", err);
    p->vb = mem_zalloc((size_t)n_layers, sizeof *p->vb, "KV pool", err);
    p->k = mem_zalloc((size_t)n_layers, sizeof *p->k, "KV pool", err);
    p->v = mem_zalloc((size_t)n_layers, sizeof *p->v, "KV pool", err);
    p->ref = mem_zalloc((size_t)n_pages, sizeof *p->ref, "KV page counts", err);
    p->free_ids = mem_alloc((size_t)n_pages, sizeof *p->free_ids, "KV free pages", err);
    if (!p->kb || !p->vb || !p->k || !p->v || !p->ref || !p->free_ids) goto fail;
    for (int l = 0; l < n_layers; l++) {
        if (be->ops->buf_alloc(be, sizeof(float) * page_k_floats(p) * n_pages, 1, "KV cache keys", &p->kb[l], err) ||
            be->ops->buf_alloc(be, sizeof(float) * page_v_floats(p) * n_pages, 1, "KV cache values", &p->vb[l], err))
            goto fail;
        p->k[l] = be_buf_addr(be, p->kb[l]);
        p->v[l] = be_buf_addr(be, p->vb[l]);
    }
    for (int i = 0; i < n_pages; i++) p->free_ids[i] = n_pages - 1 - i; /* page 0 is taken first */
    p->n_free = n_pages;
    return 0;
fail:
    kv_pool_release(p);
    return err && err->code ? err->code : MTPLX_ENOMEM;
}

void kv_pool_release(kv_pool *p) {
    if (!p->m) return;
    be_backend *be = p->m->be;
    for (int l = 0; l < p->n_layers && p->kb; l++) {
        be->ops->buf_free(be, p->kb[l]);
        if (p->vb) be->ops->buf_free(be, p->vb[l]);
    }
    free(p->kb);
    free(p->vb);
    free(p->k);
    free(p->v);
    free(p->ref);
    free(p->free_ids);
    pthread_mutex_destroy(&p->mu);
    memset(p, 0, sizeof *p);
}

/* The page-count primitives; each takes p->mu, so tables on different threads may grow, trim,
 * share and free at once. */
static int pool_take(kv_pool *p, int32_t *id, mtplx_err *err) {
    pthread_mutex_lock(&p->mu);
    int ok = p->n_free > 0;
    if (ok) {
        *id = p->free_ids[--p->n_free];
        p->ref[*id] = 1;
    }
    pthread_mutex_unlock(&p->mu);
    if (!ok)
        return err_set(err, MTPLX_ENOMEM, "KV cache full: all %d pages of %d positions are in use", p->n_pages,
                       KV_PAGE);
    return 0;
}

static void pool_drop(kv_pool *p, int32_t id) {
    pthread_mutex_lock(&p->mu);
    if (--p->ref[id] == 0) p->free_ids[p->n_free++] = id;
    pthread_mutex_unlock(&p->mu);
}

/* Whether page id is held by one table only (then its holder may write it in place). */
static int pool_private(kv_pool *p, int32_t id) {
    pthread_mutex_lock(&p->mu);
    int one = p->ref[id] == 1;
    pthread_mutex_unlock(&p->mu);
    return one;
}

/* One more holder for each of the n pages in ids. */
static void pool_hold(kv_pool *p, const int32_t *ids, int n) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < n; i++) p->ref[ids[i]]++;
    pthread_mutex_unlock(&p->mu);
}

/* Page src_id of pool sp into page dst_id of pool dp (same shape), every layer. */
static void page_copy(kv_pool *dp, int32_t dst_id, const kv_pool *sp, int32_t src_id) {
    be_backend *be = dp->m->be;
    size_t kf = page_k_floats(dp), vf = page_v_floats(dp);
    for (int l = 0; l < dp->n_layers; l++) {
        be_copy(be, dp->k[l] + (size_t)dst_id * kf, sp->k[l] + (size_t)src_id * kf, sizeof(float) * kf);
        be_copy(be, dp->v[l] + (size_t)dst_id * vf, sp->v[l] + (size_t)src_id * vf, sizeof(float) * vf);
    }
}

int kv_table_init(kv_table *t, kv_pool *pool, int capacity, mtplx_err *err) {
    memset(t, 0, sizeof *t);
    t->pool = pool;
    t->max_pages = (capacity + KV_PAGE - 1) / KV_PAGE;
    t->ids = mem_alloc((size_t)(t->max_pages ? t->max_pages : 1), sizeof *t->ids, "KV page table", err);
    return t->ids ? 0 : MTPLX_ENOMEM;
}

void kv_table_free(kv_table *t) {
    if (t->pool && t->pool->n_pages)
        for (int i = 0; i < t->n; i++) pool_drop(t->pool, t->ids[i]);
    free(t->ids);
    memset(t, 0, sizeof *t);
}

int kv_table_prepare(kv_table *t, int pos0, int R, mtplx_err *err) {
    kv_pool *p = t->pool;
    if (!p->n_layers) return 0;
    int need = (pos0 + R + KV_PAGE - 1) / KV_PAGE;
    if (need > t->max_pages)
        return err_set(err, MTPLX_ERANGE, "KV page table: %d positions exceed the capacity %d", pos0 + R,
                       t->max_pages * KV_PAGE);
    for (int i = pos0 / KV_PAGE; i < t->n && i < need; i++) {
        if (pool_private(p, t->ids[i])) continue;
        int32_t id = 0;
        int rc = pool_take(p, &id, err);
        if (rc) return rc;
        page_copy(p, id, p, t->ids[i]);
        pool_drop(p, t->ids[i]);
        t->ids[i] = id;
    }
    while (t->n < need) {
        int rc = pool_take(p, &t->ids[t->n], err);
        if (rc) return rc;
        t->n++;
    }
    return 0;
}

void kv_table_trim(kv_table *t, int len) {
    int keep = (len + KV_PAGE - 1) / KV_PAGE;
    while (t->n > keep) pool_drop(t->pool, t->ids[--t->n]);
}

int kv_table_copy(kv_table *dst, const kv_table *src, int len, mtplx_err *err) {
    if (dst == src) return 0;
    kv_table_trim(dst, 0);
    int rc = kv_table_prepare(dst, 0, len, err);
    if (rc) return rc;
    for (int i = 0; i < dst->n; i++) page_copy(dst->pool, dst->ids[i], src->pool, src->ids[i]);
    return 0;
}

int kv_table_share(kv_table *dst, const kv_table *src, int len, mtplx_err *err) {
    if (dst->pool != src->pool) return err_set(err, MTPLX_EINVAL, "KV page table: sharing across pools");
    int n = (len + KV_PAGE - 1) / KV_PAGE;
    if (n > dst->max_pages)
        return err_set(err, MTPLX_ERANGE, "KV page table: %d positions exceed the capacity %d", len,
                       dst->max_pages * KV_PAGE);
    if (dst == src) return 0;
    pool_hold(src->pool, src->ids, n); /* before dropping: dst may hold them */
    kv_table_trim(dst, 0);
    memcpy(dst->ids, src->ids, sizeof(int32_t) * n);
    dst->n = n;
    return 0;
}

be_seq_kv kv_table_view(const kv_table *t, int layer) {
    const kv_pool *p = t->pool;
    be_seq_kv v = {p->k[layer], p->v[layer], t->ids, t->n, KV_PAGE};
    return v;
}

/* ------------------------------------------------------------------ the sequence pool */

size_t seq_pool_page_bytes(const mtplx_model *m) {
    int heads, kw, vw;
    family_kv_shape(m, &heads, &kw, &vw);
    size_t one = sizeof(float) * (size_t)heads * KV_PAGE * ((size_t)kw + (size_t)vw);
    return one * (size_t)(m->n_attn + (m->has_mtp ? 1 : 0));
}

int seq_pool_new(const mtplx_model *m, int pages, seq_pool **out, mtplx_err *err) {
    *out = NULL;
    if (pages < 1) return err_set(err, MTPLX_EINVAL, "seq_pool_new: %d pages (need >= 1)", pages);
    seq_pool *p = mem_zalloc(1, sizeof *p, "sequence pool", err);
    if (!p) return MTPLX_ENOMEM;
    p->m = m;
    int rc = kv_pool_init(&p->trunk, m, m->n_attn, pages, err);
    if (!rc && m->has_mtp) rc = kv_pool_init(&p->mtp, m, 1, pages, err);
    if (rc) {
        seq_pool_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void seq_pool_free(seq_pool *p) {
    if (!p) return;
    kv_pool_release(&p->trunk);
    kv_pool_release(&p->mtp);
    free(p);
}

void seq_pool_pages(seq_pool *p, int *used, int *total) {
    pthread_mutex_lock(&p->trunk.mu);
    *total = p->trunk.n_pages;
    *used = p->trunk.n_pages - p->trunk.n_free;
    pthread_mutex_unlock(&p->trunk.mu);
}
