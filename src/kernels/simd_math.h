/* simd_math.h — internal: vector exp and the activations built on it, for the AVX-512, AVX2 and
 * NEON paths of the non-matmul kernels (attention softmax, SiLU, sigmoid gates). Not for use outside
 * src/kernels. Each target sees only its own half (x86-64: immintrin.h; AArch64: arm_neon.h).
 *
 * exp(x) = 2^n · p(r), n = round(x · log2 e), r = x − n·ln 2 (two-constant Cody–Waite), p the
 * degree-6 Taylor polynomial (|r| <= 0.35: relative error about 1.2e-7, about one ulp). Inputs are
 * clamped to [-87.3, 88.7], so exp never overflows to inf and very negative x gives ~1e-38 instead
 * of 0 (callers only divide by 1 + exp or multiply by it). The lanes are independent and the
 * operation sequence is fixed, so a value's result never depends on where it sits in a vector:
 * row invariance (DESIGN.md §3) holds for every caller that goes element by element. Results differ
 * from libm's expf by an ulp or so; a process uses one path (cpu_isa()) throughout. */
#ifndef MTPLX_KERNELS_SIMD_MATH_H
#define MTPLX_KERNELS_SIMD_MATH_H

#define SM_EXP_HI 88.7f
#define SM_EXP_LO -87.3f
#define SM_LOG2E 1.44269504088896341f
#define SM_LN2_HI 0.693145751953125f      /* ln 2 rounded to 16 bits, n·LN2_HI exact */
#define SM_LN2_LO 1.42860682030941723e-6f /* ln 2 − LN2_HI */

/* Taylor coefficients 1/k!, k = 6..2 (Horner from the top). */
#define SM_P6 1.3888889e-3f
#define SM_P5 8.3333333e-3f
#define SM_P4 4.1666667e-2f
#define SM_P3 1.6666667e-1f
#define SM_P2 0.5f

#if defined(__x86_64__)
#include <immintrin.h>

#define SM_TGT512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))
#define SM_TGT256 __attribute__((target("avx2,fma")))
#define SM_INL512 static inline __attribute__((always_inline)) SM_TGT512
#define SM_INL256 static inline __attribute__((always_inline)) SM_TGT256

/* The horizontal sums of a, b, c, d as lanes 0..3, each by the tree of _mm512_reduce_add_ps
 * (halves of 8, then 4, then (q0 + q2) + (q1 + q3)), four vectors sharing each shuffle and add:
 * the bits are those of four separate reductions, at a third of the instructions (the bf16 matmul
 * and the Gated DeltaNet steps). */
SM_INL512 __m128 sm_hsum4_512(__m512 a, __m512 b, __m512 c, __m512 d) {
    /* p = lanes 0..7 + lanes 8..15: [p_a | p_b], [p_c | p_d] */
    __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(c, d, _MM_SHUFFLE(3, 2, 3, 2)));
    /* q = p_0..3 + p_4..7: 128-bit lane k holds q of vector k */
    __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(ab, cd, _MM_SHUFFLE(3, 1, 3, 1)));
    q = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2))); /* q0+q2, q1+q3, .. */
    q = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(2, 3, 0, 1))); /* element 0: the sum */
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), q));
}

SM_INL512 __m512 sm_exp512(__m512 x) {
    x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(SM_EXP_LO)), _mm512_set1_ps(SM_EXP_HI));
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(SM_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SM_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(SM_LN2_LO), r);
    __m512 p = _mm512_set1_ps(SM_P6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_P5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(SM_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

/* x · sigmoid(x) = x / (1 + e^-x). */
SM_INL512 __m512 sm_silu512(__m512 x) {
    __m512 e = sm_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

/* 1 / (1 + e^-x). */
SM_INL512 __m512 sm_sigmoid512(__m512 x) {
    __m512 e = sm_exp512(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

SM_INL256 __m256 sm_exp256(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(SM_EXP_LO)), _mm256_set1_ps(SM_EXP_HI));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(SM_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SM_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(SM_LN2_LO), r);
    __m256 p = _mm256_set1_ps(SM_P6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_P5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(SM_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    /* 2^n by building the exponent field: n in [-126, 128] after the clamp; 128 only when x rounds to
     * 88.7·log2e = 127.97 -> 128, so split as 2^(n-1)·2 to stay finite */
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(126)), 23);
    return _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), _mm256_set1_ps(2.0f));
}

SM_INL256 __m256 sm_silu256(__m256 x) {
    __m256 e = sm_exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

SM_INL256 __m256 sm_sigmoid256(__m256 x) {
    __m256 e = sm_exp256(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* Horizontal sum of 8 lanes in a fixed order: (0+4, 1+5, 2+6, 3+7), then pairs, then the last. */
SM_INL256 float sm_hsum256(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

SM_INL256 float sm_hmax256(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lanes [0, n) of an 8-lane mask, n in 0..8 (for maskload/maskstore tails). */
SM_INL256 __m256i sm_mask256(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#elif defined(__aarch64__)
/* ---- AArch64 Advanced SIMD (every ARMv8-A CPU: no target attribute needed) ---- */
#include <arm_neon.h>

#define SM_INLN static inline __attribute__((always_inline))

/* exp of 4 lanes: the AVX2 sequence (vfmsq is the fused x − n·c of vfnmadd; 2^n built in the
 * exponent field as 2^(n−1)·2). */
SM_INLN float32x4_t sm_exp4(float32x4_t x) {
    x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(SM_EXP_LO)), vdupq_n_f32(SM_EXP_HI));
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(SM_LOG2E)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(SM_LN2_HI));
    r = vfmsq_f32(r, n, vdupq_n_f32(SM_LN2_LO));
    float32x4_t p = vdupq_n_f32(SM_P6);
    p = vfmaq_f32(vdupq_n_f32(SM_P5), p, r);
    p = vfmaq_f32(vdupq_n_f32(SM_P4), p, r);
    p = vfmaq_f32(vdupq_n_f32(SM_P3), p, r);
    p = vfmaq_f32(vdupq_n_f32(SM_P2), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(126)), 23);
    return vmulq_f32(vmulq_f32(p, vreinterpretq_f32_s32(e)), vdupq_n_f32(2.0f));
}

/* x · sigmoid(x) = x / (1 + e^-x). */
SM_INLN float32x4_t sm_silu4(float32x4_t x) {
    float32x4_t e = sm_exp4(vnegq_f32(x));
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), e));
}

/* 1 / (1 + e^-x). */
SM_INLN float32x4_t sm_sigmoid4(float32x4_t x) {
    float32x4_t e = sm_exp4(vnegq_f32(x));
    return vdivq_f32(vdupq_n_f32(1.0f), vaddq_f32(vdupq_n_f32(1.0f), e));
}

/* Horizontal sum in a fixed order: (0+2, 1+3), then the pair. */
SM_INLN float sm_hsum4(float32x4_t v) {
    float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
    return vget_lane_f32(s, 0) + vget_lane_f32(s, 1);
}

/* Lanes [0, n) of v (n in 0..4) loaded from p, the others 0: never reads past p + n. */
SM_INLN float32x4_t sm_load4_part(const float *p, int n) {
    float b[4] = {0.f, 0.f, 0.f, 0.f};
    for (int i = 0; i < n; i++) b[i] = p[i];
    return vld1q_f32(b);
}

/* Store lanes [0, n) of v to p (n in 0..4). */
SM_INLN void sm_store4_part(float *p, float32x4_t v, int n) {
    float b[4];
    vst1q_f32(b, v);
    for (int i = 0; i < n; i++) p[i] = b[i];
}
#endif

#endif
