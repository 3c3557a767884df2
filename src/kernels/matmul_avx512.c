/* matmul_avx512.c — AVX-512 path of kern_matmul for dense f32/f16/bf16 weights.
 *
 * A tile is 4 weight rows × TT activation rows (TT = 1..4): each 16-wide weight vector is loaded
 * (and widened to f32) once and FMA'd into the TT accumulators of its row, so a call over T rows
 * reads the weights from memory once (the 4-row block stays in L1 across the T tiles). Every output
 * element has its own accumulator chain over c = 0, 16, 32, ... (tail by zero-masked loads) and one
 * fixed horizontal reduction: the result is independent of T and of the tiling. bf16 (with the bf16_pf
 * knob): the first activation tile of a 4-row block prefetches the same columns of the block 4 rows
 * ahead into L2, as matmul_bf16dp.c does, so a decode row's four row streams keep the next block in
 * flight (the hardware prefetchers restart at every block change); prefetches change no bit. */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <immintrin.h>

#include "matmul_internal.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL __m512 ld_f32(const void *p, size_t i) { return _mm512_loadu_ps((const float *)p + i); }
INL __m512 ldm_f32(const void *p, size_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const float *)p + i); }
INL __m512 ld_bf16(const void *p, size_t i) {
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
INL __m512 ldm_bf16(const void *p, size_t i, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
INL __m512 ld_f16(const void *p, size_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
}
INL __m512 ldm_f16(const void *p, size_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
}

/* One tile: weight rows wr[0..3] (row indices, duplicates allowed for a short last block; only
 * rows < nr are stored), activation rows x[0..TT). */
#define DEF_TILE(NAME, LD, LDM, ES)                                                                 \
    INL void NAME(const void *W, const size_t *wrow, int nr, const float *x, int ldx, int K,        \
                  float *y, int ldy, int r, const int TT, size_t pf) {                               \
        __m512 acc[4][4];                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                          \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) acc[i][t] = _mm512_setzero_ps();    \
        int c = 0;                                                                                   \
        for (; c + 16 <= K; c += 16) {                                                               \
            __m512 wv[4];                                                                            \
            if (pf)                                                                                  \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    _mm_prefetch((const char *)W + (wrow[i] + c) * ES + pf, _MM_HINT_T1);            \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LD(W, wrow[i] + c);          \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                   \
                __m512 xv = _mm512_loadu_ps(x + (size_t)t * ldx + c);                                \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);                               \
            }                                                                                        \
        }                                                                                            \
        if (c < K) {                                                                                 \
            __mmask16 m = (__mmask16)((1u << (K - c)) - 1);                                          \
            __m512 wv[4];                                                                            \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LDM(W, wrow[i] + c, m);      \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                   \
                __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)t * ldx + c);                       \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);                               \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                        \
            if (i >= nr) break;                                                                      \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++)                                     \
                y[(size_t)t * ldy + r + i] = _mm512_reduce_add_ps(acc[i][t]);                        \
        }                                                                                            \
    }

DEF_TILE(tile_f32, ld_f32, ldm_f32, 4)
DEF_TILE(tile_bf16, ld_bf16, ldm_bf16, 2)
DEF_TILE(tile_f16, ld_f16, ldm_f16, 2)

/* pf_bytes: the prefetch distance of a block's first activation tile (0: none). */
#define DEF_ROWS(NAME, TILE)                                                                        \
    static TGT void NAME(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,  \
                         int r0, int r1, size_t pf_bytes) {                                         \
        int K = w->cols;                                                                            \
        for (int r = r0; r < r1; r += 4) {                                                          \
            int nr = r1 - r < 4 ? r1 - r : 4;                                                       \
            size_t wrow[4], pf = pf_bytes;                                                          \
            for (int i = 0; i < 4; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;          \
            int t = 0;                                                                              \
            for (; t + 4 <= T; t += 4, pf = 0)                                                      \
                TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 4, pf); \
            switch (T - t) {                                                                        \
            case 3: TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 3, pf); break; \
            case 2: TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 2, pf); break; \
            case 1: TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 1, pf); break; \
            default: break;                                                                         \
            }                                                                                       \
        }                                                                                           \
    }

DEF_ROWS(rows_f32, tile_f32)
DEF_ROWS(rows_bf16, tile_bf16)
DEF_ROWS(rows_f16, tile_f16)

TGT void mm_rows_dense_avx512(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                              int r0, int r1) {
    switch (w->dtype) {
    case DT_BF16: rows_bf16(y, ldy, x, ldx, T, w, r0, r1, kern_knobs_get()->bf16_pf ? (size_t)4 * w->cols * 2 : 0); break;
    case DT_F16: rows_f16(y, ldy, x, ldx, T, w, r0, r1, 0); break;
    default: rows_f32(y, ldy, x, ldx, T, w, r0, r1, 0); break;
    }
}
#endif /* __x86_64__ */
