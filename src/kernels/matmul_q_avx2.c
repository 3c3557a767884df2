/* matmul_q_avx2.c — AVX2 path for MLX-quantized (q4/q8) weights with int8 activations (CPUs without
 * AVX-512 VNNI). Per 32-element chunk (always inside one group): q4 is 16 bytes split into low/high
 * nibbles (activations stored in that order, QA_Q4_32) and multiplied with vpmaddubsw (15·127·2 fits
 * int16), q8 is widened to int16 and multiplied with vpmaddwd (255·127·2 would not fit vpmaddubsw).
 * Lane sums are exact int32; then convert, × d[t,g], FMA × s[r,g] into one accumulator per
 * (row, t); the bias term Σ_g b·(d·Σa) is added in a fixed scalar order. Tiles: 2 rows × ≤ 2 t. */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <immintrin.h>

#include "matmul_q.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

/* 32 int32 lanes (v0..v3: elements 0..31 in order, each in [-127, 127]) as 32 int8 in order. */
INL __m256i pack32_epi8(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* One group of gs (a multiple of 32) activations: amax, then a = rint(x · 127/amax) clamped to ±127
 * (cvtps rounds to nearest-even, as rintf does), stored at `a` in natural order or, for QA_Q4_32,
 * each 32-element chunk's even elements then its odd ones. Returns Σ a; *d_out = amax / 127. The
 * same values as the scalar loop this replaced (and as qact_fill_avx512) for finite inputs. */
INL int quant_group(const float *xg, int gs, int q4_32, int8_t *a, float *d_out) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < gs; i += 8) mx = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(xg + i), absmask), mx);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    float id = amax > 0.f ? 127.f / amax : 0.f;
    *d_out = amax / 127.f;
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i evod = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10,
                                          12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < gs; c += 32) {
        __m256i v[4];
        for (int k = 0; k < 4; k++) {
            __m256i q = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + c + 8 * k), vid));
            v[k] = _mm256_min_epi32(_mm256_max_epi32(q, lo), hi);
            sum = _mm256_add_epi32(sum, v[k]);
        }
        __m256i b = pack32_epi8(v[0], v[1], v[2], v[3]);
        if (q4_32) /* even bytes of each 16-byte lane, then odd; then the lanes' evens side by side */
            b = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(b, evod), 0xd8);
        _mm256_storeu_si256((__m256i *)(a + c), b);
    }
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
    return _mm_cvtsi128_si32(s4);
}

/* The activation quantizer of the AVX2 paths (also fills qa->asum). Was scalar: 5% of an AVX2 prefill. */
TGT void qact_fill_avx2(const float *x, int ldx, qact *qa) {
    const int K = qa->K, G = qa->G, gs = qa->gs, q4_32 = qa->layout == QA_Q4_32;
    for (int t = 0; t < qa->T; t++) {
        const float *xt = x + (size_t)t * ldx;
        int8_t *at = qa->a + (size_t)t * K;
        for (int g = 0; g < G; g++) {
            float d;
            int sum = quant_group(xt + (size_t)g * gs, gs, q4_32, at + (size_t)g * gs, &d);
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
