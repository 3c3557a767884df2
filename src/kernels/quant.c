/* quant.c — the MLX affine quantizer (for `mtplx convert` and requantized draft heads). */
#include "quant.h"

#include <math.h>

int quant_format_ok(int bits, int group_size) {
    return (bits == 4 || bits == 8) && (group_size == 32 || group_size == 64 || group_size == 128);
}

size_t quant_weight_bytes(int rows, int cols, int bits) { return (size_t)rows * cols * bits / 8; }

size_t quant_scales_bytes(int rows, int cols, int group_size, mtplx_dtype scale_dtype) {
    return (size_t)rows * (cols / group_size) * dtype_size(scale_dtype);
}

static void store_scalar(void *base, size_t i, mtplx_dtype dt, float v) {
    switch (dt) {
    case DT_BF16: ((uint16_t *)base)[i] = f32_to_bf16(v); break;
    case DT_F16: ((uint16_t *)base)[i] = f32_to_f16(v); break;
    default: ((float *)base)[i] = v; break;
    }
}

int quant_affine(const float *w, int rows, int cols, int bits, int group_size, mtplx_dtype scale_dtype,
                 uint32_t *q, void *scales, void *biases, mtplx_err *err) {
    if (!quant_format_ok(bits, group_size))
        return err_set(err, MTPLX_EINVAL, "quantize: bits %d / group size %d not supported (4 or 8; 32, 64, 128)",
                       bits, group_size);
    if (rows < 0 || cols <= 0 || cols % group_size)
        return err_set(err, MTPLX_EINVAL, "quantize: %d columns is not a multiple of the group size %d", cols,
                       group_size);
    if (scale_dtype != DT_F32 && scale_dtype != DT_BF16 && scale_dtype != DT_F16)
        return err_set(err, MTPLX_EINVAL, "quantize: scale dtype %s not supported", dtype_name(scale_dtype));
    const int n = (1 << bits) - 1, per = 32 / bits, G = cols / group_size;
    const size_t words = (size_t)cols / per;
    for (int r = 0; r < rows; r++) {
        const float *wr = w + (size_t)r * cols;
        uint32_t *qr = q + (size_t)r * words;
        for (size_t i = 0; i < words; i++) qr[i] = 0;
        for (int g = 0; g < G; g++) {
            const float *wg = wr + (size_t)g * group_size;
            float wmin = wg[0], wmax = wg[0];
            for (int i = 1; i < group_size; i++) {
                wmin = fminf(wmin, wg[i]);
                wmax = fmaxf(wmax, wg[i]);
            }
            float scale = fmaxf((wmax - wmin) / (float)n, 1e-7f);
            float edge;
            if (fabsf(wmin) > fabsf(wmax)) {
                edge = wmin;
            } else {
                edge = wmax;
                scale = -scale;
            }
            float q0 = rintf(edge / scale), bias = 0.f;
            if (q0 != 0.f) {
                scale = edge / q0;
                bias = edge;
            }
            for (int i = 0; i < group_size; i++) {
                float v = rintf((wg[i] - bias) / scale);
                if (!(v >= 0.f)) v = 0.f; /* also maps NaN to 0 */
                if (v > (float)n) v = (float)n;
                int c = g * group_size + i;
                qr[c / per] |= (uint32_t)v << (bits * (c % per));
            }
            store_scalar(scales, (size_t)r * G + g, scale_dtype, scale);
            store_scalar(biases, (size_t)r * G + g, scale_dtype, bias);
        }
    }
    return 0;
}
