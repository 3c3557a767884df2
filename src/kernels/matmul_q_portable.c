/* matmul_q_portable.c — plain-C paths for MLX-quantized weights: the int8-activation path (the
 * numerics of matmul_q.h, integer group sums) and the fp32-activation path. */
#include <math.h>

#include "matmul_q.h"

/* Element c of packed row qr (bits 4 or 8). */
static inline int q_get(const uint32_t *qr, int c, int bits) {
    return bits == 4 ? (int)((qr[c >> 3] >> (4 * (c & 7))) & 15u) : (int)((qr[c >> 2] >> (8 * (c & 3))) & 255u);
}

/* Position of input element c inside the activation buffer for a layout. */
static inline int qa_pos(qa_layout l, int c) {
    if (l == QA_Q4_128) {
        int base = c & ~127, j = c & 127;
        return base + ((j & 1) ? 64 + (j >> 1) : (j >> 1));
    }
    if (l == QA_Q4_64) {
        int base = c & ~63, j = c & 63;
        return base + ((j & 1) ? 32 + (j >> 1) : (j >> 1));
    }
    if (l == QA_Q4_32) {
        int base = c & ~31, j = c & 31;
        return base + ((j & 1) ? 16 + (j >> 1) : (j >> 1));
    }
    return c;
}

/* Shared scalar quantizer; the ISA files call it with their layout (the AVX-512 one vectorizes). */
void qact_fill_portable(const float *x, int ldx, qact *qa) {
    for (int t = 0; t < qa->T; t++) {
        const float *xt = x + (size_t)t * ldx;
        int8_t *at = qa->a + (size_t)t * qa->K;
        for (int g = 0; g < qa->G; g++) {
            const float *xg = xt + (size_t)g * qa->gs;
            float amax = 0.f;
            for (int i = 0; i < qa->gs; i++) amax = fmaxf(amax, fabsf(xg[i]));
            float d = amax / 127.f, id = amax > 0.f ? 127.f / amax : 0.f;
            int sum = 0;
            for (int i = 0; i < qa->gs; i++) {
                float v = rintf(xg[i] * id);
                if (v > 127.f) v = 127.f;
                if (v < -127.f) v = -127.f;
                int c = g * qa->gs + i;
                at[qa_pos(qa->layout, c)] = (int8_t)v;
                sum += (int)v;
            }
            qa->d[(size_t)t * qa->G + g] = d;
            qa->bd[(size_t)t * qa->G + g] = d * (float)sum;
        }
    }
}

void mm_qrows_portable(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {
    const int K = w->cols, G = qa->G, gs = qa->gs, bits = w->bits;
    const size_t words = (size_t)K * bits / 32;
    for (int r = r0; r < r1; r++) {
        const uint32_t *qr = (const uint32_t *)w->data + (size_t)r * words;
        for (int t = 0; t < qa->T; t++) {
            const int8_t *at = qa->a + (size_t)t * K;
            float acc = 0.f, bacc = 0.f;
            for (int g = 0; g < G; g++) {
                int isum = 0;
                for (int i = 0; i < gs; i++) {
                    int c = g * gs + i;
                    isum += q_get(qr, c, bits) * at[qa_pos(qa->layout, c)];
                }
                size_t gi = (size_t)r * G + g;
                acc += (float)isum * (q_scalar(w->scales, w->scale_dtype, gi) * qa->d[(size_t)t * G + g]);
                bacc += q_scalar(w->biases, w->scale_dtype, gi) * qa->bd[(size_t)t * G + g];
            }
            y[(size_t)t * ldy + r] = acc + bacc;
        }
    }
}

void mm_rows_qf32_portable(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0,
                           int r1) {
    const int K = w->cols, gs = w->group_size, G = K / gs, bits = w->bits;
    const size_t words = (size_t)K * bits / 32;
    for (int r = r0; r < r1; r++) {
        const uint32_t *qr = (const uint32_t *)w->data + (size_t)r * words;
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * ldx;
            float acc = 0.f;
            for (int g = 0; g < G; g++) {
                size_t gi = (size_t)r * G + g;
                float s = q_scalar(w->scales, w->scale_dtype, gi), b = q_scalar(w->biases, w->scale_dtype, gi);
                float qx = 0.f, xs = 0.f;
                for (int i = 0; i < gs; i++) {
                    int c = g * gs + i;
                    qx += (float)q_get(qr, c, bits) * xt[c];
                    xs += xt[c];
                }
                acc += s * qx + b * xs;
            }
            y[(size_t)t * ldy + r] = acc;
        }
    }
}
