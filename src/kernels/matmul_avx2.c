/* matmul_avx2.c — AVX2+FMA path of kern_matmul for dense f32/f16/bf16 weights (CPUs without
 * AVX-512). Same scheme as matmul_avx512.c with 8-wide vectors and 4 weight rows × TT ≤ 2 activation
 * rows per tile (16 ymm registers). The K % 8 tail is copied into zero-padded 8-element buffers, so
 * every output element sees the same operation sequence whatever T is. */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <immintrin.h>

#include "matmul_internal.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL __m256 ld_f32(const void *p, size_t i) { return _mm256_loadu_ps((const float *)p + i); }
INL __m256 ld_bf16(const void *p, size_t i) {
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)p + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
INL __m256 ld_f16(const void *p, size_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}

/* Fixed-order horizontal sum of 8 lanes. */
INL float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Copy the K % 8 tail (n < 8 elements of `esize` bytes starting at element i) into a zero-padded
 * 8-element buffer of the same format. */
static inline void tail_copy(void *dst, const void *src, size_t i, int n, size_t esize) {
    unsigned char *d = dst;
    for (size_t b = 0; b < 8 * esize; b++) d[b] = 0;
    const unsigned char *s = (const unsigned char *)src + i * esize;
    for (size_t b = 0; b < (size_t)n * esize; b++) d[b] = s[b];
}

#define DEF_TILE(NAME, LD, ESIZE)                                                                   \
    INL void NAME(const void *W, const size_t *wrow, int nr, const float *x, int ldx, int K,        \
                  float *y, int ldy, int r, const int TT) {                                          \
        __m256 acc[4][2];                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                          \
            _Pragma("GCC unroll 2") for (int t = 0; t < TT; t++) acc[i][t] = _mm256_setzero_ps();    \
        int c = 0;                                                                                   \
        for (; c + 8 <= K; c += 8) {                                                                 \
            __m256 wv[4];                                                                            \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LD(W, wrow[i] + c);          \
            _Pragma("GCC unroll 2") for (int t = 0; t < TT; t++) {                                   \
                __m256 xv = _mm256_loadu_ps(x + (size_t)t * ldx + c);                                \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    acc[i][t] = _mm256_fmadd_ps(wv[i], xv, acc[i][t]);                               \
            }                                                                                        \
        }                                                                                            \
        if (c < K) {                                                                                 \
            _Alignas(32) unsigned char wb[4][8 * 4];                                                 \
            _Alignas(32) float xb[8];                                                                \
            __m256 wv[4];                                                                            \
            for (int i = 0; i < 4; i++) {                                                            \
                tail_copy(wb[i], W, wrow[i] + c, K - c, ESIZE);                                      \
                wv[i] = LD(wb[i], 0);                                                                \
            }                                                                                        \
            for (int t = 0; t < TT; t++) {                                                           \
                tail_copy(xb, x + (size_t)t * ldx, c, K - c, 4);                                     \
                __m256 xv = _mm256_load_ps(xb);                                                      \
                for (int i = 0; i < 4; i++) acc[i][t] = _mm256_fmadd_ps(wv[i], xv, acc[i][t]);       \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                        \
            if (i >= nr) break;                                                                      \
            _Pragma("GCC unroll 2") for (int t = 0; t < TT; t++)                                     \
                y[(size_t)t * ldy + r + i] = hsum8(acc[i][t]);                                       \
        }                                                                                            \
    }

DEF_TILE(tile_f32, ld_f32, 4)
DEF_TILE(tile_bf16, ld_bf16, 2)
DEF_TILE(tile_f16, ld_f16, 2)

#define DEF_ROWS(NAME, TILE)                                                                        \
    static TGT void NAME(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,  \
                         int r0, int r1) {                                                          \
        int K = w->cols;                                                                            \
        for (int r = r0; r < r1; r += 4) {                                                          \
            int nr = r1 - r < 4 ? r1 - r : 4;                                                       \
            size_t wrow[4];                                                                         \
            for (int i = 0; i < 4; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;          \
            int t = 0;                                                                              \
            for (; t + 2 <= T; t += 2)                                                              \
                TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 2); \
            if (t < T)                                                                              \
                TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 1); \
        }                                                                                           \
    }

DEF_ROWS(rows_f32, tile_f32)
DEF_ROWS(rows_bf16, tile_bf16)
DEF_ROWS(rows_f16, tile_f16)

TGT void mm_rows_dense_avx2(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                            int r0, int r1) {
    switch (w->dtype) {
    case DT_BF16: rows_bf16(y, ldy, x, ldx, T, w, r0, r1); break;
    case DT_F16: rows_f16(y, ldy, x, ldx, T, w, r0, r1); break;
    default: rows_f32(y, ldy, x, ldx, T, w, r0, r1); break;
    }
}
#endif /* __x86_64__ */
