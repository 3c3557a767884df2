/* draft.c — draft-only quantized copies made at load time: the LM head used by HEAD_DRAFT and,
 * optionally, the MTP layer's matrices. They only change the draft proposal q; the engine samples
 * from exactly that q, so the output distribution is unchanged (reference §4.4). The target head
 * (p) is never touched. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "../kernels/quant.h"
#include "model_internal.h"

#define DRAFT_CHUNK_ROWS 256

/* One quantized copy: *dst becomes a DT_U32 be_weight over freshly allocated buffers, which are
 * appended to m->draft_bufs (freed by model_free), repacked for the VNNI kernel where the CPU has it
 * (the backend's prepared copy is owned by m->be, also freed by model_free). */
static int quantize_copy(mtplx_model *m, const be_weight *src, int bits, int gs, be_weight *dst, mtplx_err *err) {
    int rows = src->rows, cols = src->cols;
    if (cols % gs) return err_set(err, MTPLX_EINVAL, "draft quantization: %d columns are not a multiple of group size %d", cols, gs);
    size_t wb = quant_weight_bytes(rows, cols, bits), sb = quant_scales_bytes(rows, cols, gs, DT_BF16);
    size_t qrow = wb / rows, srow = sb / rows;
    unsigned char *q = mem_aligned(wb, "draft weights", err), *sc = mem_aligned(sb, "draft scales", err),
                  *bi = mem_aligned(sb, "draft biases", err);
    float *tmp = mem_alloc((size_t)DRAFT_CHUNK_ROWS * cols, sizeof(float), "draft quantization rows", err);
    void **list = realloc(m->draft_bufs, sizeof(void *) * (size_t)(m->n_draft_bufs + 3));
    if (list) m->draft_bufs = list;
    if (!q || !sc || !bi || !tmp || !list) {
        free(q);
        free(sc);
        free(bi);
        free(tmp);
        return err_set(err, MTPLX_ENOMEM, "draft quantization: out of memory");
    }
    /* a device backend dequantizes into its own memory, then the rows come down to tmp */
    be_buf *dev = NULL;
    float *rows_at = tmp;
    int rc = 0;
    if (!m->be->caps.host_memory) {
        rc = m->be->ops->buf_alloc(m->be, sizeof(float) * DRAFT_CHUNK_ROWS * cols, 0, "draft quantization rows", &dev, err);
        if (!rc) rows_at = be_buf_addr(m->be, dev);
    }
    for (int r0 = 0; r0 < rows && !rc; r0 += DRAFT_CHUNK_ROWS) {
        int n = rows - r0 < DRAFT_CHUNK_ROWS ? rows - r0 : DRAFT_CHUNK_ROWS;
        int32_t ids[DRAFT_CHUNK_ROWS];
        for (int r = 0; r < n; r++) ids[r] = r0 + r;
        m->be->ops->embed_rows(m->be, rows_at, cols, src, ids, n); /* dequantize rows r0.. */
        if (rows_at != tmp) m->be->ops->download(m->be, tmp, rows_at, sizeof(float) * (size_t)n * cols);
        rc = quant_affine(tmp, n, cols, bits, gs, DT_BF16, (uint32_t *)(q + (size_t)r0 * qrow), sc + (size_t)r0 * srow,
                          bi + (size_t)r0 * srow, err);
    }
    m->be->ops->buf_free(m->be, dev);
    free(tmp);
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
