/* rope.c — NeoX rotary embedding (see rope.h). */
#include "rope.h"

#include <math.h>

void kern_rope_inv_freq(float *inv_freq, int rotary_dim, double theta) {
    for (int i = 0; i < rotary_dim / 2; i++) {
        float e = (float)(2 * i) / (float)rotary_dim;
        inv_freq[i] = (float)(1.0 / pow(theta, (double)e));
    }
}

void kern_rope_cos_sin(float *cos_sin, const float *inv_freq, int rotary_dim, int pos) {
    int half = rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        float ang = (float)pos * inv_freq[i];
        cos_sin[i] = (float)cos((double)ang);
        cos_sin[half + i] = (float)sin((double)ang);
    }
}

void kern_rope_apply(float *x, const float *cos_sin, int rotary_dim) {
    int half = rotary_dim / 2;
    const float *c = cos_sin, *s = cos_sin + half;
    for (int i = 0; i < half; i++) {
        float x1 = x[i], x2 = x[i + half];
        x[i] = x1 * c[i] - x2 * s[i];
        x[i + half] = x2 * c[i] + x1 * s[i];
    }
}
