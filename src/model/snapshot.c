/* snapshot.c — saved points of pooled sequences (snapshot.h, docs/prefix-cache.md). */
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "../base/sha256.h"
#include "../kernels/cpu.h"
#include "../kernels/knobs.h"
#include "../kernels/matmul.h"
#include "family.h"

struct model_snap {
    const mtplx_model *m;
    int len;            /* trunk positions */
    kv_table kv;        /* references to the trunk pages of positions [0, len) */
    int mtp_len;        /* MTP rows, -1 when no MTP history was taken */
    kv_table mkv;       /* references to the MTP pages of rows [0, mtp_len) */
    be_buf *buf;        /* [n_gdn][(Kc-1)·conv_dim + Hv·Dv·Dk] GDN conv then recurrent state per layer */
    float *gdn;         /* be_buf_addr(buf) */
};

/* Floats of one GDN layer's conv and recurrent state. */
static size_t conv_floats(const mtplx_model *m) { return (size_t)(m->cfg.conv_kernel - 1) * m->conv_dim; }
static size_t rec_floats(const mtplx_model *m) {
    return (size_t)m->cfg.lin_v_heads * m->cfg.lin_v_dim * m->cfg.lin_k_dim;
}

size_t model_snap_state_bytes(const mtplx_model *m) {
    return sizeof(float) * (size_t)m->n_gdn * (conv_floats(m) + rec_floats(m));
}

int model_snap_take(const model_state *s, const mtp_state *ms, model_snap **out, mtplx_err *err) {
    *out = NULL;
    if (s->own || (ms && ms->own))
        return err_set(err, MTPLX_EUNSUPPORTED, "snapshot: only states of a sequence pool can be shared");
    const mtplx_model *m = s->m;
    model_snap *p = mem_zalloc(1, sizeof *p, "snapshot", err);
    if (!p) return MTPLX_ENOMEM;
    p->m = m;
    p->len = s->len;
    p->mtp_len = ms ? ms->len : -1;
    size_t bytes = model_snap_state_bytes(m);
    int rc = bytes ? m->be->ops->buf_alloc(m->be, bytes, 0, "snapshot GDN states", &p->buf, err) : 0;
    if (rc) {
        model_snap_free(p);
        return rc;
    }
    if (bytes) {
        model_state *sp = (model_state *)s; /* settling keeps s's values (state_settle) */
        state_settle(&sp, 1);
        p->gdn = be_buf_addr(m->be, p->buf);
        size_t C = conv_floats(m), Rf = rec_floats(m);
        for (int i = 0; i < m->n_gdn; i++) {
            float *d = p->gdn + (size_t)i * (C + Rf);
            be_copy(m->be, d, s->gdn[i].conv, sizeof(float) * C);
            be_copy(m->be, d + C, s->gdn[i].rec[s->cur], sizeof(float) * Rf);
        }
    }
    *out = p;
    return 0;
}

int model_snap_attach(model_snap *p, const model_state *s, const mtp_state *ms, mtplx_err *err) {
    if (p->kv.ids) return 0;
    if (s->m != p->m || s->len < p->len || (p->mtp_len >= 0 && (!ms || ms->len < p->mtp_len)))
        return err_set(err, MTPLX_EINVAL, "snapshot: the state no longer holds the snapshot's positions");
    int rc = kv_table_init(&p->kv, s->kv.pool, p->len > 0 ? p->len : 1, err);
    if (!rc) rc = kv_table_share(&p->kv, &s->kv, p->len, err);
    if (!rc && p->mtp_len >= 0) rc = kv_table_init(&p->mkv, ms->kv.pool, p->mtp_len > 0 ? p->mtp_len : 1, err);
    if (!rc && p->mtp_len >= 0) rc = kv_table_share(&p->mkv, &ms->kv, p->mtp_len, err);
    if (rc) { /* back to unattached */
        if (p->kv.ids) kv_table_free(&p->kv);
        if (p->mkv.ids) kv_table_free(&p->mkv);
    }
    return rc;
}

int model_snap_restore(const model_snap *p, model_state *s, mtp_state *ms, mtplx_err *err) {
    const mtplx_model *m = p->m;
    if (!p->kv.ids || s->m != m || s->kv.pool != p->kv.pool)
        return err_set(err, MTPLX_EINVAL, "snapshot: restoring into a state of another pool");
    if (ms && (p->mtp_len < 0 || ms->kv.pool != p->mkv.pool))
        return err_set(err, MTPLX_EINVAL, "snapshot: no MTP history of this pool to restore");
    if (p->len > s->capacity || (ms && p->mtp_len > ms->capacity))
        return err_set(err, MTPLX_ERANGE, "snapshot: %d positions do not fit a capacity of %d", p->len, s->capacity);
    int rc = kv_table_share(&s->kv, &p->kv, p->len, err);
    if (!rc && ms) rc = kv_table_share(&ms->kv, &p->mkv, p->mtp_len, err);
    if (rc) return rc;
    size_t C = conv_floats(m), Rf = rec_floats(m);
    for (int i = 0; i < m->n_gdn; i++) {
        const float *d = p->gdn + (size_t)i * (C + Rf);
        be_copy(m->be, s->gdn[i].conv, d, sizeof(float) * C);
        be_copy(m->be, s->gdn[i].rec[s->cur], d + C, sizeof(float) * Rf);
    }
    s->len = p->len;
    s->cap_rows = 0;
    s->pend_keep = 0; /* its GDN states were overwritten */
    if (ms) ms->len = p->mtp_len;
    return 0;
}

void model_snap_free(model_snap *p) {
    if (!p) return;
    if (p->kv.ids) kv_table_free(&p->kv);
    if (p->mkv.ids) kv_table_free(&p->mkv);
    if (p->buf) p->m->be->ops->buf_free(p->m->be, p->buf);
    free(p);
}

int model_snap_len(const model_snap *p) { return p->len; }
int model_snap_mtp_len(const model_snap *p) { return p->mtp_len; }

const int32_t *model_snap_pages(const model_snap *p, int mtp, int *n) {
    const kv_table *t = mtp ? &p->mkv : &p->kv;
    *n = t->ids ? t->n : 0;
    return t->ids;
}


/* ---- serialised form (snapshot.h) ---- */

/* Bytes of one page of pool p, every layer, keys then values per layer. */
static size_t pool_page_bytes(const kv_pool *p) {
    return sizeof(float) * (size_t)p->n_layers * (size_t)p->heads * KV_PAGE * (size_t)(p->kw + p->vw);
}

static size_t pages_of(int n) { return n > 0 ? (size_t)(n + KV_PAGE - 1) / KV_PAGE : 0; }

/* The pools a state of model m draws from have m's shapes; this describes one without a pool. */
static kv_pool shape_of(const mtplx_model *m, int n_layers) {
    kv_pool p;
    memset(&p, 0, sizeof p);
    family_kv_shape(m, &p.heads, &p.kw, &p.vw);
    p.n_layers = n_layers;
    return p;
}

size_t model_snap_blob_bytes(const mtplx_model *m, int L, int mtp_len) {
    kv_pool t = shape_of(m, m->n_attn), x = shape_of(m, m->has_mtp ? 1 : 0);
    return model_snap_state_bytes(m) + pages_of(L) * pool_page_bytes(&t) +
           (mtp_len >= 0 ? pages_of(mtp_len) * pool_page_bytes(&x) : 0);
}

/* Copy the pages ids[n] of pool p to (out = 1) or from (out = 0) the host bytes at h; returns h moved on. */
static unsigned char *pages_move(const kv_pool *p, const int32_t *ids, int n, unsigned char *h, int out) {
    be_backend *be = p->m->be;
    size_t kf = (size_t)p->heads * KV_PAGE * p->kw, vf = (size_t)p->heads * KV_PAGE * p->vw;
    for (int i = 0; i < n; i++)
        for (int l = 0; l < p->n_layers; l++) {
            float *k = p->k[l] + (size_t)ids[i] * kf, *v = p->v[l] + (size_t)ids[i] * vf;
            if (out) {
                be->ops->download(be, h, k, kf * sizeof(float));
                be->ops->download(be, h + kf * sizeof(float), v, vf * sizeof(float));
            } else {
                be->ops->upload(be, k, h, kf * sizeof(float));
                be->ops->upload(be, v, h + kf * sizeof(float), vf * sizeof(float));
            }
            h += (kf + vf) * sizeof(float);
        }
    return h;
}

int model_snap_write_blob(const model_snap *p, int with_mtp, void *dst, mtplx_err *err) {
    const mtplx_model *m = p->m;
    if (!p->kv.ids && p->len > 0) return err_set(err, MTPLX_EINVAL, "snapshot: not attached, no pages to write");
    unsigned char *h = dst;
    size_t g = model_snap_state_bytes(m);
    if (g) m->be->ops->download(m->be, h, p->gdn, g);
    h += g;
    if (p->kv.ids) h = pages_move(p->kv.pool, p->kv.ids, (int)pages_of(p->len), h, 1);
    if (with_mtp && p->mtp_len > 0 && p->mkv.ids) pages_move(p->mkv.pool, p->mkv.ids, (int)pages_of(p->mtp_len), h, 1);
    return 0;
}

int model_snap_read_blob(model_state *s, mtp_state *ms, int L, int mtp_len, const void *blob, size_t bytes,
                         mtplx_err *err) {
    const mtplx_model *m = s->m;
    if (s->own || (ms && ms->own) || s->len || (ms && ms->len))
        return err_set(err, MTPLX_EINVAL, "snapshot: a blob restores only into empty states of a sequence pool");
    if (L < 1 || bytes != model_snap_blob_bytes(m, L, mtp_len))
        return err_set(err, MTPLX_EINVAL, "snapshot: a blob of %zu bytes is not one of %d positions", bytes, L);
    if (ms && mtp_len < 0) return err_set(err, MTPLX_EINVAL, "snapshot: the blob has no MTP history");
    if (L > s->capacity || (ms && mtp_len > ms->capacity))
        return err_set(err, MTPLX_ERANGE, "snapshot: %d positions do not fit a capacity of %d", L, s->capacity);
    int rc = kv_table_prepare(&s->kv, 0, L, err);
    if (!rc && ms && mtp_len > 0) rc = kv_table_prepare(&ms->kv, 0, mtp_len, err);
    if (rc) {
        model_state_reset(s);
        if (ms) mtp_state_reset(ms);
        return rc;
    }
    const unsigned char *h = blob;
    size_t C = conv_floats(m), Rf = rec_floats(m);
    for (int i = 0; i < m->n_gdn; i++) {
        m->be->ops->upload(m->be, s->gdn[i].conv, h, sizeof(float) * C);
        m->be->ops->upload(m->be, s->gdn[i].rec[s->cur], h + sizeof(float) * C, sizeof(float) * Rf);
        h += sizeof(float) * (C + Rf);
    }
    h = pages_move(s->kv.pool, s->kv.ids, (int)pages_of(L), (unsigned char *)h, 0);
    if (ms && mtp_len > 0) pages_move(ms->kv.pool, ms->kv.ids, (int)pages_of(mtp_len), (unsigned char *)h, 0);
    s->len = L;
    s->cap_rows = 0;
    s->pend_keep = 0;
    if (ms) ms->len = mtp_len;
    return 0;
}

/* Hash a tensor's identity and a sample of its bytes: 64 at the start, at 1/3, at 2/3 and at the end. */
static void fp_tensor(sha256_ctx *c, const st_tensor *t) {
    sha256_update(c, t->name, strlen(t->name) + 1);
    int32_t d[2] = {(int32_t)t->dtype, t->ndim};
    sha256_update(c, d, sizeof d);
    sha256_update(c, t->shape, sizeof t->shape[0] * (size_t)t->ndim);
    uint64_t nb = t->nbytes;
    sha256_update(c, &nb, sizeof nb);
    const unsigned char *b = t->data;
    size_t w = nb < 64 ? nb : 64;
    size_t at[4] = {0, nb / 3, 2 * (nb / 3), nb - w};
    for (int i = 0; i < 4 && w; i++) sha256_update(c, b + (at[i] + w <= nb ? at[i] : nb - w), w);
}

void model_snap_fingerprint(const mtplx_model *m, unsigned char out[32]) {
    sha256_ctx c;
    sha256_init(&c);
    const char head[] = "mtplx prefix checkpoint v1";
    int32_t v[6] = {MODEL_SNAP_NUMERICS, KV_PAGE, m->hf_layout, m->mtp_quantized, m->n_attn, m->n_gdn};
    sha256_update(&c, head, sizeof head);
    sha256_update(&c, v, sizeof v);
    const char *be = m->be->ops->name ? m->be->ops->name : "?", *isa = cpu_isa_name(cpu_isa());
    /* the kernel choices within a path that change bits: bf16 kernel, quantized weights' activations */
    const char *bf16 = kern_matmul_bf16_kernel(), *qact = kern_knobs_get()->qact_f32 ? "f32" : "int8";
    sha256_update(&c, be, strlen(be) + 1);
    sha256_update(&c, isa, strlen(isa) + 1);
    sha256_update(&c, bf16, strlen(bf16) + 1);
    sha256_update(&c, qact, strlen(qact) + 1);
    /* which weights the backend repacked (MTPLX_QPACK, AMX copies, MoE experts by the memory rule): a
     * repacked quantized weight takes another kernel, with other bits; the copies' bytes say which */
    const uint64_t packed = m->be->ops->weight_bytes(m->be);
    sha256_update(&c, &packed, sizeof packed);
    sha256_update(&c, &m->cfg, sizeof m->cfg);
    for (int i = 0; i < st_count(m->st); i++) fp_tensor(&c, st_at(m->st, i));
    sha256_final(&c, out);
}
