/* matmul_q_neon.c — NEON paths for MLX-quantized (q4/q8) weights with int8 activations (AArch64).
 *
 * Numerics are matmul_q.h's. Tiles of 2 weight rows × TT <= 2 activation rows; per group g the four
 * exact integer sums isum[r,t] = Σ_{c∈g} q[r,c]·a[t,c] come from one of three kernels:
 *   NEON       widen to int16 and SMLAL into int32 lanes, reduced per group;
 *   NEON_DOT   SDOT on (q − 128) for q8 (q4 nibbles are 0..15, signed already), + 128·Σa per group
 *              (qact_fill_neon keeps Σa in qa->asum);
 *   NEON_I8MM  USMMLA: one instruction multiplies a 2 × 8 block of unsigned weights by 8 × 2 signed
 *              activations, giving all four sums [r0·t0, r0·t1, r1·t0, r1·t1] at once.
 * Integer sums are exact, so all three give the same isum, and one float epilogue follows per group
 * in the lanes [r0t0, r0t1, r1t0, r1t1]: acc += (float)isum·d[t,g]·s[r,g] (one FMA), bacc += b[r,g]·
 * bd[t,g] (one FMA); y = acc + bacc. Each lane's sequence depends only on its own (r, t): the three
 * levels are bit-identical to each other, and rows are invariant to T and to the thread split.
 * q4 activations are in QA_Q4_32 order (a[2j] at j, a[2j+1] at 16+j per 32-chunk), so the low
 * nibbles of 16 packed bytes meet a[0..16) of the chunk and the high nibbles a[16..32). */
#if defined(__aarch64__)
#include <arm_neon.h>

#include "matmul_q.h"

#define INL static inline __attribute__((always_inline))
#define TGT_DOT __attribute__((target("arch=armv8.2-a+dotprod")))
#define TGT_I8MM __attribute__((target("arch=armv8.2-a+dotprod+i8mm")))

void qact_fill_neon(const float *x, int ldx, qact *qa) {
    qact_fill_portable(x, ldx, qa);
    for (int t = 0; t < qa->T; t++)
        for (int g = 0; g < qa->G; g++) {
            const int8_t *a = qa->a + (size_t)t * qa->K + (size_t)g * qa->gs; /* a group stays in place in any layout */
            int32_t s = 0;
            for (int i = 0; i < qa->gs; i++) s += a[i];
            qa->asum[(size_t)t * qa->G + g] = s;
        }
}

/* ---- integer group sums: the four lanes [r0t0, r0t1, r1t0, r1t1] (lanes of t1 unused when TT = 1) ---- */

/* s += Σ of the 16 products w·a, widened (|w·a| <= 255·127 fits int16 lanes' int32 accumulation). */
INL int32x4_t mac16(int32x4_t s, uint8x16_t w, int8x16_t a) {
    int16x8_t wl = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(w))), wh = vreinterpretq_s16_u16(vmovl_high_u8(w));
    int16x8_t al = vmovl_s8(vget_low_s8(a)), ah = vmovl_high_s8(a);
    s = vmlal_s16(s, vget_low_s16(wl), vget_low_s16(al));
    s = vmlal_high_s16(s, wl, al);
    s = vmlal_s16(s, vget_low_s16(wh), vget_low_s16(ah));
    return vmlal_high_s16(s, wh, ah);
}

/* One chunk of 16 weights of rows 0/1: q8 as stored; q4 (half = 0 / 1) the low / high nibbles of the
 * 16 bytes that hold a 32-element chunk. */
INL uint8x16_t w16(const uint8_t *p, int bits, int half) {
    if (bits == 8) return vld1q_u8(p);
    uint8x16_t v = vld1q_u8(p);
    return half ? vshrq_n_u8(v, 4) : vandq_u8(v, vdupq_n_u8(0x0f));
}

/* Walk group g's 16-element chunks: weight pointers w0/w1 at the group, activations a0/a1 at the
 * group; BODY sees x0, x1 (weights, uint8x16_t) and y0, y1 (activations, int8x16_t). */
#define FOR_CHUNKS(...)                                                                                   \
    for (int c = 0; c < gs; c += 16) {                                                                    \
        const size_t wo = bits == 8 ? (size_t)c : (size_t)(c & ~31) / 2;                                  \
        const int half = (c & 16) != 0;                                                                   \
        const uint8x16_t x0 = w16(w0 + wo, bits, half), x1 = w16(w1 + wo, bits, half);                    \
        const int8x16_t y0 = vld1q_s8(a0 + c), y1 = vld1q_s8(a1 + c);                                     \
        __VA_ARGS__                                                                                       \
    }

INL int32x4_t isum_neon(const uint8_t *w0, const uint8_t *w1, const int8_t *a0, const int8_t *a1, int gs, int bits,
                        int32_t as0, int32_t as1, const int TT) {
    (void)as0, (void)as1;
    int32x4_t s00 = vdupq_n_s32(0), s01 = s00, s10 = s00, s11 = s00;
    FOR_CHUNKS({
        s00 = mac16(s00, x0, y0);
        s10 = mac16(s10, x1, y0);
        if (TT == 2) s01 = mac16(s01, x0, y1), s11 = mac16(s11, x1, y1);
    })
    int32_t l[4] = {vaddvq_s32(s00), vaddvq_s32(s01), vaddvq_s32(s10), vaddvq_s32(s11)};
    return vld1q_s32(l);
}

TGT_DOT INL int32x4_t isum_dot(const uint8_t *w0, const uint8_t *w1, const int8_t *a0, const int8_t *a1, int gs,
                               int bits, int32_t as0, int32_t as1, const int TT) {
    int32x4_t s00 = vdupq_n_s32(0), s01 = s00, s10 = s00, s11 = s00;
    const uint8x16_t off = vdupq_n_u8(bits == 8 ? 0x80 : 0); /* q8: q − 128 as int8 */
    FOR_CHUNKS({
        const int8x16_t z0 = vreinterpretq_s8_u8(veorq_u8(x0, off)), z1 = vreinterpretq_s8_u8(veorq_u8(x1, off));
        s00 = vdotq_s32(s00, z0, y0);
        s10 = vdotq_s32(s10, z1, y0);
        if (TT == 2) s01 = vdotq_s32(s01, z0, y1), s11 = vdotq_s32(s11, z1, y1);
    })
    const int32_t k = bits == 8 ? 128 : 0;
    int32_t l[4] = {vaddvq_s32(s00) + k * as0, vaddvq_s32(s01) + k * as1, vaddvq_s32(s10) + k * as0,
                    vaddvq_s32(s11) + k * as1};
    return vld1q_s32(l);
}

TGT_I8MM INL int32x4_t isum_i8mm(const uint8_t *w0, const uint8_t *w1, const int8_t *a0, const int8_t *a1, int gs,
                                 int bits, int32_t as0, int32_t as1, const int TT) {
    (void)as0, (void)as1, (void)TT; /* with TT = 1, a1 = a0: the t1 lanes are computed and dropped */
    int32x4_t s = vdupq_n_s32(0);
    FOR_CHUNKS({
        const uint64x2_t u0 = vreinterpretq_u64_u8(x0), u1 = vreinterpretq_u64_u8(x1);
        const int64x2_t v0 = vreinterpretq_s64_s8(y0), v1 = vreinterpretq_s64_s8(y1);
        s = vusmmlaq_s32(s, vreinterpretq_u8_u64(vzip1q_u64(u0, u1)), vreinterpretq_s8_s64(vzip1q_s64(v0, v1)));
        s = vusmmlaq_s32(s, vreinterpretq_u8_u64(vzip2q_u64(u0, u1)), vreinterpretq_s8_s64(vzip2q_s64(v0, v1)));
    })
    return s;
}

/* ---- the tile: rows r, r + nr − 1 (nr <= 2) × activation rows t0, t1 (t1 = t0 when TT = 1) ---- */

#define DEF_QTILE(NAME, ISUM, ATTR)                                                                      \
    ATTR INL void NAME(const kern_weight *w, const qact *qa, const uint8_t *wr0, const uint8_t *wr1,      \
                       size_t go0, size_t go1, int nr, int t0, int t1, float *y, int ldy, int r,          \
                       const int TT) {                                                                    \
        const int G = qa->G, gs = qa->gs, bits = w->bits, K = qa->K;                                      \
        const size_t gb = (size_t)gs * bits / 8;                                                          \
        const int8_t *at0 = qa->a + (size_t)t0 * K, *at1 = qa->a + (size_t)t1 * K;                        \
        const float *d0 = qa->d + (size_t)t0 * G, *d1 = qa->d + (size_t)t1 * G;                           \
        const float *bd0 = qa->bd + (size_t)t0 * G, *bd1 = qa->bd + (size_t)t1 * G;                       \
        const int32_t *as0 = qa->asum + (size_t)t0 * G, *as1 = qa->asum + (size_t)t1 * G;                 \
        float32x4_t acc = vdupq_n_f32(0.f), bacc = acc;                                                   \
        for (int g = 0; g < G; g++) {                                                                     \
            int32x4_t is = ISUM(wr0 + g * gb, wr1 + g * gb, at0 + (size_t)g * gs, at1 + (size_t)g * gs,   \
                                gs, bits, as0[g], as1[g], TT);                                            \
            float s0 = q_scalar(w->scales, w->scale_dtype, go0 + g);                                      \
            float s1 = q_scalar(w->scales, w->scale_dtype, go1 + g);                                      \
            float b0 = q_scalar(w->biases, w->scale_dtype, go0 + g);                                      \
            float b1 = q_scalar(w->biases, w->scale_dtype, go1 + g);                                      \
            const float dl[4] = {d0[g], d1[g], d0[g], d1[g]}, bdl[4] = {bd0[g], bd1[g], bd0[g], bd1[g]};  \
            const float sl[4] = {s0, s0, s1, s1}, bl[4] = {b0, b0, b1, b1};                               \
            float32x4_t f = vmulq_f32(vcvtq_f32_s32(is), vld1q_f32(dl));                                  \
            acc = vfmaq_f32(acc, f, vld1q_f32(sl));                                                       \
            bacc = vfmaq_f32(bacc, vld1q_f32(bl), vld1q_f32(bdl));                                        \
        }                                                                                                 \
        float o[4];                                                                                       \
        vst1q_f32(o, vaddq_f32(acc, bacc));                                                               \
        for (int i = 0; i < nr; i++)                                                                      \
            for (int t = 0; t < TT; t++) y[(size_t)(t ? t1 : t0) * ldy + r + i] = o[2 * i + t];           \
    }

DEF_QTILE(qtile_neon, isum_neon, )
DEF_QTILE(qtile_dot, isum_dot, TGT_DOT)
DEF_QTILE(qtile_i8mm, isum_i8mm, TGT_I8MM)

#define DEF_QROWS(NAME, TILE, ATTR)                                                                      \
    ATTR void NAME(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {             \
        const size_t row_bytes = (size_t)w->cols * w->bits / 8;                                           \
        for (int r = r0; r < r1; r += 2) {                                                                \
            int nr = r1 - r < 2 ? r1 - r : 2, rb = r + nr - 1;                                            \
            const uint8_t *wr0 = (const uint8_t *)w->data + (size_t)r * row_bytes;                        \
            const uint8_t *wr1 = (const uint8_t *)w->data + (size_t)rb * row_bytes;                       \
            size_t go0 = (size_t)r * qa->G, go1 = (size_t)rb * qa->G;                                     \
            int t = 0;                                                                                    \
            for (; t + 2 <= qa->T; t += 2) TILE(w, qa, wr0, wr1, go0, go1, nr, t, t + 1, y, ldy, r, 2);   \
            if (t < qa->T) TILE(w, qa, wr0, wr1, go0, go1, nr, t, t, y, ldy, r, 1);                       \
        }                                                                                                 \
    }

DEF_QROWS(mm_qrows_neon, qtile_neon, )
DEF_QROWS(mm_qrows_neon_dot, qtile_dot, TGT_DOT)
DEF_QROWS(mm_qrows_neon_i8mm, qtile_i8mm, TGT_I8MM)
#endif /* __aarch64__ */
