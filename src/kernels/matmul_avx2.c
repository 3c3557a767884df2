/* matmul_avx2.c — AVX2+FMA path of kern_matmul for dense f32/f16/bf16 weights (CPUs without
 * AVX-512).
 *
 * f32 / f16: the scheme of matmul_avx512.c with 8-wide vectors and 4 weight rows × TT <= 2
 * activation rows per tile (16 ymm registers). The K % 8 tail is copied into zero-padded 8-element
 * buffers, so every output element sees the same operation sequence whatever T is.
 *
 * bf16 (mm_rows_bf16x_avx2, a packed-activation path: pick_xpath in matmul.c): a 32-byte load holds
 * 16 weights as 8 pairs; the even element of pair l widens to fp32 by one shift (v << 16) and the odd
 * one by one mask (v & 0xffff0000), instead of a widening shuffle and a shift per 8 weights. The
 * activations are packed once per call to match: per 16-input chunk, the 8 even inputs then the 8
 * odd ones (mm_bf16x_pack_x; inputs past K are zero, and the weight tail chunk is copied into a
 * zero-padded buffer). Output (t, r) is one accumulator chain — per chunk fma(even), then fma(odd) —
 * and one fixed horizontal sum (hsum8), whatever the tile; tiles are 8 weight rows × 1 activation row
 * (8 chains hide the FMA latency of a decode), 4 × 2, 4 × 3 and 3 × 4 (more activation rows: tiles
 * of 4), so a verify of up to 4 rows reads each weight vector once. */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "matmul_internal.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL __m256 ld_f32(const void *p, size_t i) { return _mm256_loadu_ps((const float *)p + i); }
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
DEF_ROWS(rows_f16, tile_f16)

/* f32 / f16 weights (bf16 ones take mm_rows_bf16x_avx2: kern_matmul never passes them here). */
TGT void mm_rows_dense_avx2(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                            int r0, int r1) {
    assert(w->dtype != DT_BF16);
    if (w->dtype == DT_F16) rows_f16(y, ldy, x, ldx, T, w, r0, r1);
    else rows_f32(y, ldy, x, ldx, T, w, r0, r1);
}

/* ---- bf16 with packed activations ---- */

/* Inputs rounded up to whole 16-element chunks. */
static int k_pad16(int K) { return (K + 15) & ~15; }

size_t mm_bf16x_pack_bytes(int T, int K) { return (size_t)T * (size_t)k_pad16(K) * 4; }

/* Row t of the packed activations at buf + t·k_pad16(K) floats: per chunk of 16 inputs, the 8 even
 * ones then the 8 odd ones; inputs past K are zero. */
TGT void mm_bf16x_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    const int kp = k_pad16(K);
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * ldx;
        float *o = (float *)buf + (size_t)t * kp;
        int c = 0;
        for (; c + 16 <= K; c += 16, o += 16) {
            /* a = x0..3 x8..11, b = x4..7 x12..15: the even / odd picks of each 128-bit half land in order */
            __m256 a = _mm256_loadu2_m128(xr + c + 8, xr + c), b = _mm256_loadu2_m128(xr + c + 12, xr + c + 4);
            _mm256_storeu_ps(o, _mm256_shuffle_ps(a, b, 0x88));
            _mm256_storeu_ps(o + 8, _mm256_shuffle_ps(a, b, 0xdd));
        }
        if (c < K) {
            for (int i = 0; i < 16; i++) o[(i & 1) * 8 + i / 2] = c + i < K ? xr[c + i] : 0.f;
        }
    }
}

/* acc[i][t] += the products of weight chunk wv (16 bf16 of row i) with packed chunk t. */
#define BX_CHUNK(WV, I)                                                                             \
    do {                                                                                            \
        const __m256i v_ = (WV);                                                                    \
        const __m256 we_ = _mm256_castsi256_ps(_mm256_slli_epi32(v_, 16));                          \
        const __m256 wo_ = _mm256_castsi256_ps(_mm256_and_si256(v_, hi16));                         \
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                      \
            acc[I][t] = _mm256_fmadd_ps(we_, _mm256_loadu_ps(xc + (size_t)t * kp), acc[I][t]);      \
            acc[I][t] = _mm256_fmadd_ps(wo_, _mm256_loadu_ps(xc + (size_t)t * kp + 8), acc[I][t]);  \
        }                                                                                           \
    } while (0)

/* RW weight rows (wrow[i]: element offset of row i; the first nr are stored) × TT activation rows of
 * packed xp (kp floats per row) into y[t][r + i]. */
INL void bx_tile(const uint16_t *W, const size_t *wrow, int nr, const float *xp, int kp, int K, float *y,
                 int ldy, int r, const int RW, const int TT) {
    const __m256i hi16 = _mm256_set1_epi32((int)0xffff0000u);
    __m256 acc[8][4];
    _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++)
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) acc[i][t] = _mm256_setzero_ps();
    int c = 0;
    for (; c + 16 <= K; c += 16) {
        const float *xc = xp + c;
        _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++)
            BX_CHUNK(_mm256_loadu_si256((const __m256i *)(W + wrow[i] + c)), i);
    }
    if (c < K) {
        const float *xc = xp + c;
        for (int i = 0; i < RW; i++) {
            _Alignas(32) uint16_t wb[16] = {0};
            memcpy(wb, W + wrow[i] + c, sizeof(uint16_t) * (size_t)(K - c));
            BX_CHUNK(_mm256_load_si256((const __m256i *)wb), i);
        }
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++) {
        if (i >= nr) break;
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) y[(size_t)t * ldy + r + i] = hsum8(acc[i][t]);
    }
}
#undef BX_CHUNK

/* Weight rows [r0, r1) in blocks of RW (the last block repeats its last row) × TT activation rows. */
INL void bx_rows(float *y, int ldy, const float *xp, int kp, const kern_weight *w, int r0, int r1, const int RW,
                 const int TT) {
    const int K = w->cols;
    for (int r = r0; r < r1; r += RW) {
        int nr = r1 - r < RW ? r1 - r : RW;
        size_t wrow[8];
        for (int i = 0; i < RW; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;
        bx_tile(w->data, wrow, nr, xp, kp, K, y, ldy, r, RW, TT);
    }
}

TGT void mm_rows_bf16x_avx2(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0,
                            int r1, const void *xpack) {
    (void)x, (void)ldx;
    const int kp = k_pad16(w->cols);
    const float *xp = xpack;
    int t = 0;
    for (; t + 4 <= T; t += 4) bx_rows(y + (size_t)t * ldy, ldy, xp + (size_t)t * kp, kp, w, r0, r1, 3, 4);
    switch (T - t) {
    case 3: bx_rows(y + (size_t)t * ldy, ldy, xp + (size_t)t * kp, kp, w, r0, r1, 4, 3); break;
    case 2: bx_rows(y + (size_t)t * ldy, ldy, xp + (size_t)t * kp, kp, w, r0, r1, 4, 2); break;
    case 1: bx_rows(y + (size_t)t * ldy, ldy, xp + (size_t)t * kp, kp, w, r0, r1, 8, 1); break;
    default: break;
    }
}
#endif /* __x86_64__ */
