/* matmul_portable.c — the plain-C path of kern_matmul for dense weights (any x86-64, any CPU).
 *
 * Each dot product keeps 8 partial sums (element c goes to sum c % 8) combined in a fixed tree, so
 * the compiler can vectorize it with SSE2 and the result is the same whatever T is. Unlike
 * kern_matmul_ref it converts weights on the fly and never allocates. */
#include "matmul_internal.h"

static inline float wload(const kern_weight *w, size_t i) {
    switch (w->dtype) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)w->data)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)w->data)[i]);
    default: return ((const float *)w->data)[i];
    }
}

/* dot(x[0..K), W row starting at element `base`) with 8 partial sums. */
static float dot_row(const kern_weight *w, size_t base, const float *x, int K) {
    float s[8] = {0};
    int c = 0;
    if (w->dtype == DT_F32) {
        const float *wr = (const float *)w->data + base;
        for (; c + 8 <= K; c += 8)
            for (int j = 0; j < 8; j++) s[j] += x[c + j] * wr[c + j];
    } else if (w->dtype == DT_BF16) {
        const uint16_t *wr = (const uint16_t *)w->data + base;
        for (; c + 8 <= K; c += 8)
            for (int j = 0; j < 8; j++) s[j] += x[c + j] * bf16_to_f32(wr[c + j]);
    } else {
        for (; c + 8 <= K; c += 8)
            for (int j = 0; j < 8; j++) s[j] += x[c + j] * wload(w, base + c + j);
    }
    for (int j = 0; c < K; c++, j++) s[j] += x[c] * wload(w, base + c);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void mm_rows_dense_portable(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                            int r0, int r1) {
    int K = w->cols;
    for (int r = r0; r < r1; r++)
        for (int t = 0; t < T; t++)
            y[(size_t)t * ldy + r] = dot_row(w, (size_t)r * K, x + (size_t)t * ldx, K);
}
