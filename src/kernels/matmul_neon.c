/* matmul_neon.c — NEON path of kern_matmul for dense f32/f16/bf16 weights (AArch64, every level).
 *
 * matmul_avx2.c's scheme in 4-lane vectors: tiles of 4 weight rows × TT <= 2 activation rows; per
 * (row, activation row) two accumulators, for elements c ≡ 0..3 and 4..7 (mod 8), combined as
 * (lo + hi) and then sm_hsum4 — one fixed sequence per output element whatever T, the tile or the
 * thread split. bf16 widens exactly to f32 by a 16-bit shift (SHLL), f16 by FCVTL, so products and
 * sums are fp32 as on x86; BFDOT/BFMMLA are not used (they round differently from an fp32 FMA and
 * would change the numbers, docs/kernels.md "ARM64"). The K % 8 tail goes through zero-padded
 * 8-element copies. 4 × 2 × 2 accumulators + 8 weight + 2 activation vectors fit the 32 registers. */
#if defined(__aarch64__)
#include <arm_neon.h>
#include <string.h>

#include "matmul_internal.h"
#include "simd_math.h"

#define INL static inline __attribute__((always_inline))

/* Elements [i, i + 8) of a row as two f32 vectors. */
INL void ld_f32(const void *p, size_t i, float32x4_t *lo, float32x4_t *hi) {
    *lo = vld1q_f32((const float *)p + i);
    *hi = vld1q_f32((const float *)p + i + 4);
}
INL void ld_bf16(const void *p, size_t i, float32x4_t *lo, float32x4_t *hi) {
    uint16x8_t h = vld1q_u16((const uint16_t *)p + i);
    *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
    *hi = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
}
INL void ld_f16(const void *p, size_t i, float32x4_t *lo, float32x4_t *hi) {
    float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)p + i));
    *lo = vcvt_f32_f16(vget_low_f16(h));
    *hi = vcvt_high_f32_f16(h);
}

/* n < 8 elements of `esize` bytes from element i of src into a zero-padded 8-element buffer. */
static inline void tail_copy(void *dst, const void *src, size_t i, int n, size_t esize) {
    memset(dst, 0, 8 * esize);
    memcpy(dst, (const unsigned char *)src + i * esize, (size_t)n * esize);
}

#define DEF_TILE(NAME, LD, ESIZE)                                                                        \
    INL void NAME(const void *W, const size_t *wrow, int nr, const float *x, int ldx, int K, float *y,    \
                  int ldy, int r, const int TT) {                                                         \
        float32x4_t acc[4][2][2];                                                                         \
        for (int i = 0; i < 4; i++)                                                                       \
            for (int t = 0; t < TT; t++) acc[i][t][0] = acc[i][t][1] = vdupq_n_f32(0.f);                  \
        int c = 0;                                                                                        \
        for (; c + 8 <= K; c += 8) {                                                                      \
            float32x4_t wl[4], wh[4];                                                                     \
            for (int i = 0; i < 4; i++) LD(W, wrow[i] + c, &wl[i], &wh[i]);                               \
            for (int t = 0; t < TT; t++) {                                                                \
                float32x4_t xl = vld1q_f32(x + (size_t)t * ldx + c), xh = vld1q_f32(x + (size_t)t * ldx + c + 4); \
                for (int i = 0; i < 4; i++) {                                                             \
                    acc[i][t][0] = vfmaq_f32(acc[i][t][0], wl[i], xl);                                    \
                    acc[i][t][1] = vfmaq_f32(acc[i][t][1], wh[i], xh);                                    \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        if (c < K) {                                                                                      \
            unsigned char wb[4][8 * 4];                                                                   \
            float xb[8];                                                                                  \
            float32x4_t wl[4], wh[4];                                                                     \
            for (int i = 0; i < 4; i++) {                                                                 \
                tail_copy(wb[i], W, wrow[i] + c, K - c, ESIZE);                                           \
                LD(wb[i], 0, &wl[i], &wh[i]);                                                             \
            }                                                                                             \
            for (int t = 0; t < TT; t++) {                                                                \
                tail_copy(xb, x + (size_t)t * ldx, c, K - c, 4);                                          \
                float32x4_t xl = vld1q_f32(xb), xh = vld1q_f32(xb + 4);                                   \
                for (int i = 0; i < 4; i++) {                                                             \
                    acc[i][t][0] = vfmaq_f32(acc[i][t][0], wl[i], xl);                                    \
                    acc[i][t][1] = vfmaq_f32(acc[i][t][1], wh[i], xh);                                    \
                }                                                                                         \
            }                                                                                             \
        }                                                                                                 \
        for (int i = 0; i < nr; i++)                                                                      \
            for (int t = 0; t < TT; t++)                                                                  \
                y[(size_t)t * ldy + r + i] = sm_hsum4(vaddq_f32(acc[i][t][0], acc[i][t][1]));             \
    }

DEF_TILE(tile_f32, ld_f32, 4)
DEF_TILE(tile_bf16, ld_bf16, 2)
DEF_TILE(tile_f16, ld_f16, 2)

#define DEF_ROWS(NAME, TILE)                                                                             \
    static void NAME(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0,    \
                     int r1) {                                                                           \
        int K = w->cols;                                                                                 \
        for (int r = r0; r < r1; r += 4) {                                                               \
            int nr = r1 - r < 4 ? r1 - r : 4;                                                            \
            size_t wrow[4];                                                                              \
            for (int i = 0; i < 4; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;               \
            int t = 0;                                                                                   \
            for (; t + 2 <= T; t += 2)                                                                   \
                TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 2);    \
            if (t < T) TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 1); \
        }                                                                                                \
    }

DEF_ROWS(rows_f32, tile_f32)
DEF_ROWS(rows_bf16, tile_bf16)
DEF_ROWS(rows_f16, tile_f16)

void mm_rows_dense_neon(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1) {
    switch (w->dtype) {
    case DT_BF16: rows_bf16(y, ldy, x, ldx, T, w, r0, r1); break;
    case DT_F16: rows_f16(y, ldy, x, ldx, T, w, r0, r1); break;
    default: rows_f32(y, ldy, x, ldx, T, w, r0, r1); break;
    }
}
#endif /* __aarch64__ */
