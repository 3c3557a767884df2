/* attention.c — one query head against cached keys (see attention.h). */
#include "attention.h"

#include <math.h>

void kern_attention_head_kv(float *out, const float *q, const float *k, int ldk, int dk, const float *v,
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

void kern_attention_head(float *out, const float *q, const float *k, const float *v, int ld, int n,
                         int dh, float scale, float *scores) {
    kern_attention_head_kv(out, q, k, ld, dh, v, ld, dh, n, scale, scores);
}
