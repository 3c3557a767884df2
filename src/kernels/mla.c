/* mla.c — interleaved RoPE and unequal-width attention for MLA (see mla.h). */
#include "mla.h"

#include "attention.h"

#include <math.h>

void kern_rope_apply_interleaved(float *x, const float *cos_sin, int rotary_dim) {
    int half = rotary_dim / 2;
    const float *c = cos_sin, *s = cos_sin + half;
    for (int i = 0; i < half; i++) {
        float x1 = x[2 * i], x2 = x[2 * i + 1];
        x[2 * i] = x1 * c[i] - x2 * s[i];
        x[2 * i + 1] = x2 * c[i] + x1 * s[i];
    }
}

void kern_mla_cos_sin(float *cos_sin, const float *inv_freq, int rotary_dim, int pos) {
    int half = rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        cos_sin[i] = (float)cos((double)ang);
        cos_sin[half + i] = (float)sin((double)ang);
    }
}

void kern_mla_attention_head(float *out, const float *q, const float *k, int ldk, int dk, const float *v,
                             int ldv, int dv, int n, float scale, float *scores) {
    kern_attention_head_kv(out, q, k, ldk, dk, v, ldv, dv, n, scale, scores);
}
