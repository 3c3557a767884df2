/* matmul_q_avx2.c — AVX2 path for MLX-quantized (q4/q8) weights with int8 activations (CPUs without
 * AVX-512 VNNI). Per 32-element chunk (always inside one group): q4 is 16 bytes split into low/high
 * nibbles (activations stored in that order, QA_Q4_32) and multiplied with vpmaddubsw (15·127·2 fits
 * int16), q8 is widened to int16 and multiplied with vpmaddwd (255·127·2 would not fit vpmaddubsw).
 * Lane sums are exact int32; then convert, × d[t,g], FMA × s[r,g] into one accumulator per
 * (row, t); the bias term Σ_g b·(d·Σa) is added in a fixed scalar order. Tiles: 2 rows × ≤ 2 t. */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <immintrin.h>
#include <math.h>

#include "matmul_q.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

/* Scalar quantizer compiled for AVX2 (rint becomes vroundss); also fills qa->asum. */
TGT void qact_fill_avx2(const float *x, int ldx, qact *qa) {
    const int K = qa->K, G = qa->G, gs = qa->gs;
    for (int t = 0; t < qa->T; t++) {
        const float *xt = x + (size_t)t * ldx;
        int8_t *at = qa->a + (size_t)t * K;
        for (int g = 0; g < G; g++) {
            const float *xg = xt + (size_t)g * gs;
            float amax = 0.f;
            for (int i = 0; i < gs; i++) { /* fmaxf's result, without its libm call (a NaN keeps amax) */
                float ax = fabsf(xg[i]);
                amax = ax > amax ? ax : amax;
            }
            float d = amax / 127.f, id = amax > 0.f ? 127.f / amax : 0.f;
            int sum = 0;
            for (int i = 0; i < gs; i++) {
                float v = rintf(xg[i] * id);
                v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
                int c = g * gs + i, pos = c;
                if (qa->layout == QA_Q4_32) {
                    int j = c & 31;
                    pos = (c & ~31) + ((j & 1) ? 16 + (j >> 1) : (j >> 1));
                }
                at[pos] = (int8_t)v;
                sum += (int)v;
            }
            qa->d[(size_t)t * G + g] = d;
            qa->bd[(size_t)t * G + g] = d * (float)sum;
            qa->asum[(size_t)t * G + g] = sum; /* the packed kernel's q8 correction (matmul_qpack_avx2.c) */
        }
    }
}

INL float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 exact int32 partial sums of q·a over one 32-element chunk. */
INL __m256i chunk_dot(const uint8_t *p, const int8_t *a, int bits) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i av = _mm256_loadu_si256((const __m256i *)a);
    if (bits == 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i m = _mm_set1_epi8(0x0f);
        __m256i wv = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m), _mm_and_si128(v, m));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(wv, av), ones);
    }
    __m256i wv = _mm256_loadu_si256((const __m256i *)p);
    __m256i w0 = _mm256_cvtepu8_epi16(_mm256_castsi256_si128(wv)), w1 = _mm256_cvtepu8_epi16(_mm256_extracti128_si256(wv, 1));
    __m256i a0 = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(av)), a1 = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(av, 1));
    return _mm256_add_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1));
}

INL void qtile(const kern_weight *w, const qact *qa, const uint8_t *const *wr, const size_t *goff, int nr,
               int t0, float *y, int ldy, int r, const int TT) {
    const int K = w->cols, bits = w->bits, nch = K / 32, gs = w->group_size, G = qa->G, cb = 32 * bits / 8;
    __m256 acc[2][2];
    for (int i = 0; i < 2; i++)
        for (int t = 0; t < TT; t++) acc[i][t] = _mm256_setzero_ps();
    for (int ch = 0; ch < nch; ch++) {
        int g = ch * 32 / gs;
        __m256 sv[2];
        for (int i = 0; i < 2; i++) sv[i] = _mm256_set1_ps(q_scalar(w->scales, w->scale_dtype, goff[i] + g));
        _Pragma("GCC unroll 2") for (int t = 0; t < TT; t++) {
            const int8_t *a = qa->a + (size_t)(t0 + t) * K + (size_t)ch * 32;
            __m256 dv = _mm256_set1_ps(qa->d[(size_t)(t0 + t) * G + g]);
            _Pragma("GCC unroll 2") for (int i = 0; i < 2; i++) {
                __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(chunk_dot(wr[i] + (size_t)ch * cb, a, bits)), dv);
                acc[i][t] = _mm256_fmadd_ps(f, sv[i], acc[i][t]);
            }
        }
    }
    for (int i = 0; i < nr; i++)
        for (int t = 0; t < TT; t++) {
            const float *bd = qa->bd + (size_t)(t0 + t) * G;
            float b = 0.f;
            for (int g = 0; g < G; g++) b += q_scalar(w->biases, w->scale_dtype, goff[i] + g) * bd[g];
            y[(size_t)(t0 + t) * ldy + r + i] = hsum8(acc[i][t]) + b;
        }
}

TGT void mm_qrows_avx2(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {
    const size_t row_bytes = (size_t)w->cols * w->bits / 8;
    for (int r = r0; r < r1; r += 2) {
        int nr = r1 - r < 2 ? r1 - r : 2;
        const uint8_t *wr[2];
        size_t goff[2];
        for (int i = 0; i < 2; i++) {
            int ri = r + (i < nr ? i : nr - 1);
            wr[i] = (const uint8_t *)w->data + (size_t)ri * row_bytes;
            goff[i] = (size_t)ri * qa->G;
        }
        int t = 0;
        for (; t + 2 <= qa->T; t += 2) qtile(w, qa, wr, goff, nr, t, y, ldy, r, 2);
        if (t < qa->T) qtile(w, qa, wr, goff, nr, t, y, ldy, r, 1);
    }
}
#endif /* __x86_64__ */
