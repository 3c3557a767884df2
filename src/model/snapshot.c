/* snapshot.c — saved points of pooled sequences (snapshot.h, docs/prefix-cache.md). */
#include "snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
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

