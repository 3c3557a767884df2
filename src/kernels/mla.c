/* mla.c — interleaved RoPE and unequal-width attention for MLA (see mla.h). */
#include "mla.h"

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
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = k + (long)j * ldk;
        float s = 0.f;
        for (int d = 0; d < dk; d++) s += q[d] * kj[d];
        s *= scale;
        scores[j] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.f;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    float inv = 1.0f / sum;
    for (int d = 0; d < dv; d++) out[d] = 0.f;
    for (int j = 0; j < n; j++) {
        const float *vj = v + (long)j * ldv;
        float p = scores[j] * inv;
        for (int d = 0; d < dv; d++) out[d] += p * vj[d];
    }
}
