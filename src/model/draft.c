/* draft.c — draft-only quantized copies made at load time: the LM head used by HEAD_DRAFT and,
 * optionally, the MTP layer's matrices. They only change the draft proposal q; the engine samples
 * from exactly that q, so the output distribution is unchanged (reference §4.4). The target head
 * (p) is never touched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "../kernels/quant.h"
#include "../kernels/threadpool.h"
#include "model_internal.h"

#define DRAFT_CHUNK_ROWS 256

/* Chunks of DRAFT_CHUNK_ROWS rows quantized independently on the thread pool (the kernels' pool,
 * as quant_affine is a kernel; host-memory backends only). */
typedef struct {
    mtplx_model *m;
    const be_weight *src;
    int bits, gs, n_chunks;
    unsigned char *q, *sc, *bi;
    size_t qrow, srow;
    int rc;              /* first failure (under the pool's ordering: any failing chunk sets it) */
    mtplx_err err;
} quant_job;

static void quant_task(void *ctx, int task, int n_tasks) {
    quant_job *j = ctx;
    int cols = j->src->cols, rows = j->src->rows;
    float *tmp = malloc(sizeof(float) * (size_t)DRAFT_CHUNK_ROWS * cols);
    for (int c = task; c < j->n_chunks; c += n_tasks) {
        int r0 = c * DRAFT_CHUNK_ROWS, n = rows - r0 < DRAFT_CHUNK_ROWS ? rows - r0 : DRAFT_CHUNK_ROWS;
        int32_t ids[DRAFT_CHUNK_ROWS];
        mtplx_err e = {0};
        int rc = MTPLX_ENOMEM;
        if (tmp) {
            for (int r = 0; r < n; r++) ids[r] = r0 + r;
            j->m->be->ops->embed_rows(j->m->be, tmp, cols, j->src, ids, n); /* dequantize (host memory: CPU) */
            rc = quant_affine(tmp, n, cols, j->bits, j->gs, DT_BF16, (uint32_t *)(j->q + (size_t)r0 * j->qrow),
                              j->sc + (size_t)r0 * j->srow, j->bi + (size_t)r0 * j->srow, &e);
        }
        if (rc && __atomic_exchange_n(&j->rc, rc, __ATOMIC_ACQ_REL) == 0)
            j->err = tmp ? e : (mtplx_err){.code = MTPLX_ENOMEM};
        if (rc) break;
    }
    free(tmp);
}

/* The same on a device backend: each chunk is dequantized in device memory and downloaded, one
 * after another. Returns 0 or an error. */
static int quant_device_rows(mtplx_model *m, const be_weight *src, int bits, int gs, unsigned char *q,
                             unsigned char *sc, unsigned char *bi, size_t qrow, size_t srow, mtplx_err *err) {
    int rows = src->rows, cols = src->cols;
    float *tmp = mem_alloc((size_t)DRAFT_CHUNK_ROWS * cols, sizeof(float), "draft quantization rows", err);
    if (!tmp) return MTPLX_ENOMEM;
    be_buf *dev = NULL;
    int rc = m->be->ops->buf_alloc(m->be, sizeof(float) * DRAFT_CHUNK_ROWS * cols, 0, "draft quantization rows", &dev, err);
    float *rows_at = rc ? NULL : be_buf_addr(m->be, dev);
    for (int r0 = 0; r0 < rows && !rc; r0 += DRAFT_CHUNK_ROWS) {
        int n = rows - r0 < DRAFT_CHUNK_ROWS ? rows - r0 : DRAFT_CHUNK_ROWS;
        int32_t ids[DRAFT_CHUNK_ROWS];
        for (int r = 0; r < n; r++) ids[r] = r0 + r;
        m->be->ops->embed_rows(m->be, rows_at, cols, src, ids, n); /* dequantize rows r0.. */
        m->be->ops->download(m->be, tmp, rows_at, sizeof(float) * (size_t)n * cols);
        rc = quant_affine(tmp, n, cols, bits, gs, DT_BF16, (uint32_t *)(q + (size_t)r0 * qrow), sc + (size_t)r0 * srow,
                          bi + (size_t)r0 * srow, err);
    }
    m->be->ops->buf_free(m->be, dev);
    free(tmp);
    return rc;
}

/* One quantized copy: *dst becomes a DT_U32 be_weight over freshly allocated buffers, which are
 * appended to m->draft_bufs (freed by model_free), repacked for the VNNI kernel where the CPU has it
 * (the backend's prepared copy is owned by m->be, also freed by model_free). A source already in
 * the requested bits and group size is shared instead (*dst = *src, nothing allocated). */
static int quantize_copy(mtplx_model *m, const be_weight *src, int bits, int gs, be_weight *dst, mtplx_err *err) {
    int rows = src->rows, cols = src->cols;
    if (src->dtype == DT_U32 && src->bits == bits && src->group_size == gs) {
        /* already in the draft format (a q4 checkpoint under the default q4:64 draft): the
         * checkpoint's own weight and its prepared copy, exactly what a lossless requantization
         * would give; dequantizing and requantizing it only cost load time (issue 17) */
        *dst = *src;
        return 0;
    }
    if (cols % gs) return err_set(err, MTPLX_EINVAL, "draft quantization: %d columns are not a multiple of group size %d", cols, gs);
    size_t wb = quant_weight_bytes(rows, cols, bits), sb = quant_scales_bytes(rows, cols, gs, DT_BF16);
    size_t qrow = wb / rows, srow = sb / rows;
    unsigned char *q = mem_aligned(wb, "draft weights", err), *sc = mem_aligned(sb, "draft scales", err),
                  *bi = mem_aligned(sb, "draft biases", err);
    void **list = realloc(m->draft_bufs, sizeof(void *) * (size_t)(m->n_draft_bufs + 3));
    if (list) m->draft_bufs = list;
    if (!q || !sc || !bi || !list) {
        free(q);
        free(sc);
        free(bi);
        return err_set(err, MTPLX_ENOMEM, "draft quantization: out of memory");
    }
    int rc;
    if (m->be->caps.host_memory) {
        quant_job j = {m, src, bits, gs, (rows + DRAFT_CHUNK_ROWS - 1) / DRAFT_CHUNK_ROWS, q, sc, bi, qrow, srow, 0, {0}};
        tpool *pool = tpool_global();
        int tasks = tpool_threads(pool);
        if (tasks > j.n_chunks) tasks = j.n_chunks;
        if (tasks <= 1) quant_task(&j, 0, 1);
        else tpool_run(pool, tasks, quant_task, &j);
        rc = j.rc;
        if (rc) err_set(err, rc, "draft quantization: %s", j.err.msg[0] ? j.err.msg : "out of memory");
    } else {
        rc = quant_device_rows(m, src, bits, gs, q, sc, bi, qrow, srow, err);
    }
    m->draft_bufs[m->n_draft_bufs++] = q;
    m->draft_bufs[m->n_draft_bufs++] = sc;
    m->draft_bufs[m->n_draft_bufs++] = bi;
    if (rc) return rc;
    memset(dst, 0, sizeof *dst);
    dst->dtype = DT_U32;
    dst->rows = rows;
    dst->cols = cols;
    dst->data = q;
    dst->scales = sc;
    dst->biases = bi;
    dst->scale_dtype = DT_BF16;
    dst->bits = bits;
    dst->group_size = gs;
    /* the backend's copy (CPU: the fast VNNI kernel's layout, a no-op without it; owned by m->be) */
    return m->be->ops->weight_prepare(m->be, dst, err);
}

int model_quantize_draft(mtplx_model *m, int bits, int group_size, int mtp_layer, mtplx_err *err) {
    if (!quant_format_ok(bits, group_size))
        return err_set(err, MTPLX_EINVAL, "draft quantization: q%d with group size %d is not supported (4 or 8 bits, "
                       "group 32, 64 or 128)", bits, group_size);
    if (!m->has_mtp) return err_set(err, MTPLX_EUNSUPPORTED, "%s: no MTP head, nothing drafts", m->dir);
    be_weight head;
    int rc = quantize_copy(m, &m->draft_head, bits, group_size, &head, err);
    if (rc) return rc;
    if (mtp_layer) {
        if (m->fam.ds_mtp || m->mtp.layer.mixer != MIXER_ATTN || m->mtp.layer.ffn != FFN_DENSE)
            return err_set(err, MTPLX_EUNSUPPORTED, "draft quantization of the MTP layer: only the dense Qwen3.5 MTP layer");
        be_weight *ws[] = {&m->mtp.fc, &m->mtp.layer.attn.q, &m->mtp.layer.attn.k, &m->mtp.layer.attn.v,
                             &m->mtp.layer.attn.o, &m->mtp.layer.mlp.gate, &m->mtp.layer.mlp.up, &m->mtp.layer.mlp.down};
        be_weight qs[8];
        for (int i = 0; i < 8; i++)
            if ((rc = quantize_copy(m, ws[i], bits, group_size, &qs[i], err))) return rc;
        for (int i = 0; i < 8; i++) *ws[i] = qs[i];
        m->mtp_quantized = 1;
    }
    m->draft_head = head;
    return 0;
}

int draft_quant_parse(const char *spec, draft_quant *out, mtplx_err *err) {
    *out = (draft_quant){0, 64, 1};
    if (spec && !strcmp(spec, "none")) return 0;
    const char *p = spec ? spec : "";
    if (!strncmp(p, "q4", 2)) out->bits = 4;
    else if (!strncmp(p, "q8", 2)) out->bits = 8;
    if (out->bits) {
        p += 2;
        if (!strncmp(p, "-head", 5)) out->mtp_layer = 0, p += 5;
        if (*p == ':') {
            char *end;
            long g = strtol(p + 1, &end, 10);
            out->group_size = (g == 32 || g == 64 || g == 128) && end != p + 1 ? (int)g : 0;
            p = end;
        }
    }
    if (!out->bits || *p || !out->group_size)
        return err_set(err, MTPLX_EINVAL, "--draft-quant must be q4, q8, q4-head, q8-head (optionally :32, :64 or "
                       ":128 for the group size) or none, got '%s'", spec ? spec : "");
    return 0;
}

const char *draft_quant_name(const draft_quant *q, char *buf, size_t cap) {
    if (!q->bits) snprintf(buf, cap, "none");
    else snprintf(buf, cap, "q%d%s%s%d", q->bits, q->mtp_layer ? "" : "-head", ":", q->group_size);
    if (q->bits && q->group_size == 64) buf[strcspn(buf, ":")] = 0; /* the default group goes unsaid */
    return buf;
}

int model_draft_quant_apply(mtplx_model *m, draft_quant *q, int by_default, char *note, size_t cap, mtplx_err *err) {
    if (cap) note[0] = 0;
    if (!m->has_mtp) q->bits = 0;
    if (!q->bits) return 0; /* nothing drafts, or nothing to do */
    int rc = model_quantize_draft(m, q->bits, q->group_size, q->mtp_layer, err);
    if (rc == MTPLX_EUNSUPPORTED && q->mtp_layer) { /* e.g. an MoE MTP layer: quantize the head only */
        q->mtp_layer = 0;
        rc = model_quantize_draft(m, q->bits, q->group_size, 0, err);
    }
    if (rc == MTPLX_EINVAL && by_default) { /* e.g. hidden 48 with group 64: draft at full precision */
        snprintf(note, cap, "default draft quantization skipped (%s); drafting at full precision", err->msg);
        err_clear(err);
        q->bits = 0;
        return 0;
    }
    return rc;
}

/* Keep ptr in m->draft_bufs (freed by model_free); on failure free it. Returns 0 or ENOMEM. */
static int draft_keep(mtplx_model *m, void *ptr, mtplx_err *err) {
    void **list = realloc(m->draft_bufs, sizeof(void *) * (size_t)(m->n_draft_bufs + 1));
    if (!list) {
        free(ptr);
        return err_set(err, MTPLX_ENOMEM, "draft vocabulary: out of memory");
    }
    m->draft_bufs = list;
    m->draft_bufs[m->n_draft_bufs++] = ptr;
    return 0;
}

/* A host copy of `n` bytes-per-row slices of base at rows ids[0..k) (contiguous, in that order),
 * kept in m->draft_bufs. Returns the copy or NULL with err set. */
static unsigned char *gather_bytes(mtplx_model *m, const void *base, size_t row_bytes, const int32_t *ids, int k,
                                   const char *what, mtplx_err *err) {
    unsigned char *out = mem_aligned(row_bytes * (size_t)k, what, err);
    if (!out || draft_keep(m, out, err)) return NULL;
    for (int i = 0; i < k; i++)
        memcpy(out + (size_t)i * row_bytes, (const unsigned char *)base + (size_t)ids[i] * row_bytes, row_bytes);
    return out;
}

int model_draft_vocab(mtplx_model *m, const int32_t *ids, int n, mtplx_err *err) {
    const be_weight *src = &m->draft_head;
    const int V = m->cfg.vocab_size;
    if (!m->has_mtp) return err_set(err, MTPLX_EUNSUPPORTED, "%s: no MTP head, nothing drafts", m->dir);
    if (m->draft_ids) return err_set(err, MTPLX_EINVAL, "draft vocabulary: already set");
    /* the rows are gathered from the head's host copy (a be_weight's data is host memory on every
     * backend: the checkpoint's mapping or a quantized copy; a device backend keys its own copy by it),
     * and weight_prepare gives the subset its backend copy */
    if (n < 1 || n > V || src->rows != V)
        return err_set(err, MTPLX_EINVAL, "draft vocabulary: %d ids for a head of %d rows (vocabulary %d)", n,
                       src->rows, V);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V || (i && ids[i] <= ids[i - 1]))
            return err_set(err, MTPLX_EINVAL, "draft vocabulary: ids must ascend inside [0, %d) (entry %d is %d)", V, i,
                           ids[i]);
    int32_t *keep = malloc(sizeof(int32_t) * (size_t)n);
    if (!keep) return err_set(err, MTPLX_ENOMEM, "draft vocabulary: out of memory");
    memcpy(keep, ids, sizeof(int32_t) * (size_t)n);
    if (draft_keep(m, keep, err)) return MTPLX_ENOMEM;
    be_weight w;
    memset(&w, 0, sizeof w);
    w.dtype = src->dtype;
    w.rows = n;
    w.cols = src->cols;
    if (src->dtype == DT_U32) {
        size_t qrow = quant_weight_bytes(1, src->cols, src->bits);
        size_t srow = quant_scales_bytes(1, src->cols, src->group_size, src->scale_dtype);
        w.data = gather_bytes(m, src->data, qrow, ids, n, "draft vocabulary weights", err);
        w.scales = w.data ? gather_bytes(m, src->scales, srow, ids, n, "draft vocabulary scales", err) : NULL;
        w.biases = w.scales ? gather_bytes(m, src->biases, srow, ids, n, "draft vocabulary biases", err) : NULL;
        if (!w.biases) return err->code;
        w.scale_dtype = src->scale_dtype;
        w.bits = src->bits;
        w.group_size = src->group_size;
    } else {
        w.data = gather_bytes(m, src->data, dtype_size(src->dtype) * (size_t)src->cols, ids, n,
                              "draft vocabulary weights", err);
        if (!w.data) return err->code;
    }
    int rc = m->be->ops->weight_prepare(m->be, &w, err);
    if (rc) return rc;
    m->draft_head = w;
    m->draft_ids = keep;
    m->draft_n = n;
    return 0;
}

int model_draft_vocab_size(const mtplx_model *m) { return m->draft_ids ? m->draft_n : 0; }
