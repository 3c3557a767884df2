/* gdn.c — Gated DeltaNet conv and recurrence (see gdn.h). Plain C; SIMD paths go next to these and
 * are tested against them. */
#include "gdn.h"

#include "act.h"

void kern_conv1d_silu(float *y, int ldy, const float *x, int ldx, const float *w, int channels, int kc,
                      int rows) {
    for (int t = 0; t < rows; t++) {
        float *yt = y + (long)t * ldy;
        for (int c = 0; c < channels; c++) {
            const float *wc = w + (long)c * kc;
            float acc = 0.f;
            for (int j = 0; j < kc; j++) acc += wc[j] * x[(long)(t + j) * ldx + c];
            yt[c] = act_silu(acc);
        }
    }
}

/* The state update shared by the forward step and the replay, so both round identically. Kept out
 * of line so that both callers run the very same machine code (no per-call-site contraction or
 * vectorisation choices). */
__attribute__((noinline)) static void gdn_update_row(float *dst, const float *src, const float *k, float d, float g, int dk) {
    for (int j = 0; j < dk; j++) dst[j] = g * src[j] + d * k[j];
}

void kern_gdn_step(float *S_dst, const float *S_src, const float *q, const float *k, const float *v,
                   float g, float beta, float *y, float *delta_out, int dk, int dv) {
    for (int i = 0; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        float kv = 0.f;
        for (int j = 0; j < dk; j++) kv += src[j] * k[j];
        float d = beta * (v[i] - g * kv);
        gdn_update_row(dst, src, k, d, g, dk);
        float acc = 0.f;
        for (int j = 0; j < dk; j++) acc += dst[j] * q[j];
        y[i] = acc;
        if (delta_out) delta_out[i] = d;
    }
}

void kern_gdn_replay(float *S_dst, const float *S_src, const float *k, const float *delta, float g,
                     int dk, int dv) {
    for (int i = 0; i < dv; i++)
        gdn_update_row(S_dst + (long)i * dk, S_src + (long)i * dk, k, delta[i], g, dk);
}
