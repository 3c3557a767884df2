/* gdn_neon.c — the NEON Gated DeltaNet conv and recurrence (neon.h; the math is gdn.h's).
 *
 * conv: 4 channels at a time, their kc taps gathered once and reused for every row; each output is
 * Σ_j w·x by FMA in tap order, then the vector SiLU — per channel the same sequence whatever the
 * channel count or row count. step: per value row, S·k and S'·q in 4 lanes (element j in lane j mod
 * 4) reduced once by sm_hsum4; the update S' = g·S + delta·k is mul, mul, add per element (no FMA),
 * the very operations of gdn_replay_neon, so a replayed state is bit-identical to the forward's. */
#if defined(__aarch64__)
#include "neon.h"
#include "simd_math.h"

#define CONV_KMAX 8

void conv1d_silu_neon(float *y, int ldy, const float *x, int ldx, const float *w, int channels, int kc, int rows) {
    for (int c = 0; c < channels; c += 4) {
        int nc = channels - c < 4 ? channels - c : 4;
        float32x4_t wv[CONV_KMAX];
        for (int j = 0; j < kc; j++) {
            float b[4] = {0.f, 0.f, 0.f, 0.f};
            for (int l = 0; l < nc; l++) b[l] = w[(long)(c + l) * kc + j];
            wv[j] = vld1q_f32(b);
        }
        for (int t = 0; t < rows; t++) {
            float32x4_t acc = vdupq_n_f32(0.f);
            for (int j = 0; j < kc; j++) {
                const float *xr = x + (long)(t + j) * ldx + c;
                acc = vfmaq_f32(acc, wv[j], nc == 4 ? vld1q_f32(xr) : sm_load4_part(xr, nc));
            }
            if (nc == 4) vst1q_f32(y + (long)t * ldy + c, sm_silu4(acc));
            else sm_store4_part(y + (long)t * ldy + c, sm_silu4(acc), nc);
        }
    }
}

/* dst[0..dk) = g·src + d·k, 4 lanes at a time (dk % 4 == 0). */
static inline float32x4_t gdn_update4(const float *src, const float *k, int j, float32x4_t vg, float32x4_t vd) {
    return vaddq_f32(vmulq_f32(vg, vld1q_f32(src + j)), vmulq_f32(vd, vld1q_f32(k + j)));
}

void gdn_step_neon(float *S_dst, const float *S_src, const float *q, const float *k, const float *v, float g,
                   float beta, float *y, float *delta_out, int dk, int dv) {
    const float32x4_t vg = vdupq_n_f32(g);
    for (int i = 0; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        float32x4_t a = vdupq_n_f32(0.f);
        for (int j = 0; j < dk; j += 4) a = vfmaq_f32(a, vld1q_f32(src + j), vld1q_f32(k + j));
        float d = beta * (v[i] - g * sm_hsum4(a));
        const float32x4_t vd = vdupq_n_f32(d);
        float32x4_t o = vdupq_n_f32(0.f);
        for (int j = 0; j < dk; j += 4) {
            float32x4_t nv = gdn_update4(src, k, j, vg, vd);
            vst1q_f32(dst + j, nv);
            o = vfmaq_f32(o, nv, vld1q_f32(q + j));
        }
        y[i] = sm_hsum4(o);
        if (delta_out) delta_out[i] = d;
    }
}

void gdn_replay_neon(float *S_dst, const float *S_src, const float *k, const float *delta, float g, int dk, int dv) {
    const float32x4_t vg = vdupq_n_f32(g);
    for (int i = 0; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        const float32x4_t vd = vdupq_n_f32(delta[i]);
        for (int j = 0; j < dk; j += 4) vst1q_f32(dst + j, gdn_update4(src, k, j, vg, vd));
    }
}
#endif /* __aarch64__ */
