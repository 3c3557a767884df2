/* matmul_ref.c — portable reference matmul: converts one weight row at a time to f32 and takes
 * plain dot products. Slow but obviously right; the fast paths are tested against it. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>

#include "matmul.h"

static float load_scale(const kern_weight *w, size_t i) {
    switch (w->scale_dtype) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)w->scales)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)w->scales)[i]);
    default: return ((const float *)w->scales)[i];
    }
}

static float load_bias(const kern_weight *w, size_t i) {
    switch (w->scale_dtype) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)w->biases)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)w->biases)[i]);
    default: return ((const float *)w->biases)[i];
    }
}

void kern_weight_row(const kern_weight *w, int r, float *out) {
    size_t K = (size_t)w->cols, base = (size_t)r * K;
    switch (w->dtype) {
    case DT_F32:
        for (size_t c = 0; c < K; c++) out[c] = ((const float *)w->data)[base + c];
        break;
    case DT_BF16:
        for (size_t c = 0; c < K; c++) out[c] = bf16_to_f32(((const uint16_t *)w->data)[base + c]);
        break;
    case DT_F16:
        for (size_t c = 0; c < K; c++) out[c] = f16_to_f32(((const uint16_t *)w->data)[base + c]);
        break;
    case DT_U32: {
        const uint32_t *q = (const uint32_t *)w->data + (size_t)r * (K * w->bits / 32);
        size_t groups = K / w->group_size, per = 32 / w->bits;
        uint32_t mask = (1u << w->bits) - 1;
        for (size_t c = 0; c < K; c++) {
            uint32_t v = (q[c / per] >> (w->bits * (c % per))) & mask;
            size_t g = (size_t)r * groups + c / w->group_size;
            out[c] = load_scale(w, g) * (float)v + load_bias(w, g);
        }
        break;
    }
    default:
        assert(!"kern_weight_row: unsupported dtype");
    }
}

void kern_matmul_ref(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w) {
    assert(ldx >= w->cols && ldy >= w->rows);
    float *row = malloc(sizeof(float) * (size_t)w->cols);
    assert(row);
    for (int r = 0; r < w->rows; r++) {
        kern_weight_row(w, r, row);
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * ldx;
            float acc = 0.f;
            for (int c = 0; c < w->cols; c++) acc += xt[c] * row[c];
            y[(size_t)t * ldy + r] = acc;
        }
    }
    free(row);
}
