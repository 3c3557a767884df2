/* norm.c — RMS and L2 normalisation of one vector (see norm.h). */
#include "norm.h"

#include <math.h>

void kern_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    float ss = 0.f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    if (w)
        for (int i = 0; i < n; i++) y[i] = (x[i] * inv) * w[i];
    else
        for (int i = 0; i < n; i++) y[i] = x[i] * inv;
}

void kern_l2norm(float *y, const float *x, int n, float eps, float scale) {
    float ss = 0.f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss + eps);
    for (int i = 0; i < n; i++) y[i] = (x[i] * inv) * scale;
}
