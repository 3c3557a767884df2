/* vec_neon.c — the NEON activations and norm pieces (neon.h). Every element is computed by itself
 * (sm_exp4 and friends, simd_math.h); the sum of squares keeps element i in lane i mod 4 and reduces
 * once with sm_hsum4, so it depends only on the vector's own values and length. */
#if defined(__aarch64__)
#include "neon.h"
#include "simd_math.h"

void swiglu_neon(float *y, const float *gate, const float *up, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(sm_silu4(vld1q_f32(gate + i)), vld1q_f32(up + i)));
    if (i < n)
        sm_store4_part(y + i, vmulq_f32(sm_silu4(sm_load4_part(gate + i, n - i)), sm_load4_part(up + i, n - i)), n - i);
}

void mul_sigmoid_neon(float *y, const float *gate, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_f32(vld1q_f32(y + i), sm_sigmoid4(vld1q_f32(gate + i))));
    if (i < n)
        sm_store4_part(y + i, vmulq_f32(sm_load4_part(y + i, n - i), sm_sigmoid4(sm_load4_part(gate + i, n - i))),
                       n - i);
}

float sumsq_neon(const float *x, int n) {
    float32x4_t a = vdupq_n_f32(0.f);
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t v = vld1q_f32(x + i);
        a = vfmaq_f32(a, v, v);
    }
    if (i < n) {
        float32x4_t v = sm_load4_part(x + i, n - i);
        a = vfmaq_f32(a, v, v);
    }
    return sm_hsum4(a);
}

/* Four elements [i, i + 4) of the norm scaling (norm.c). */
static inline float32x4_t scale4(float32x4_t xv, float32x4_t wv, const float *z, int i, int left, float32x4_t vi) {
    float32x4_t v = vmulq_f32(vmulq_f32(xv, vi), wv);
    if (z) v = vmulq_f32(v, sm_silu4(left >= 4 ? vld1q_f32(z + i) : sm_load4_part(z + i, left)));
    return v;
}

void scale_neon(float *y, const float *x, const float *w, const float *z, int n, float inv, float mul) {
    const float32x4_t vi = vdupq_n_f32(inv), vm = vdupq_n_f32(mul);
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, scale4(vld1q_f32(x + i), w ? vld1q_f32(w + i) : vm, z, i, 4, vi));
    if (i < n) {
        int left = n - i;
        float32x4_t v = scale4(sm_load4_part(x + i, left), w ? sm_load4_part(w + i, left) : vm, z, i, left, vi);
        sm_store4_part(y + i, v, left);
    }
}
#endif /* __aarch64__ */
