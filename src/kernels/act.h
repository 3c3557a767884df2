/* act.h — scalar activations and gates used by the forward: SiLU, sigmoid, softplus.
 *
 * Plain fp32 C. They are inline so a hot loop that calls them per element stays one loop; every
 * caller gets the same arithmetic whatever the row count (row invariance, DESIGN.md §3). */
#ifndef MTPLX_KERNELS_ACT_H
#define MTPLX_KERNELS_ACT_H

#include <math.h>
#include <stddef.h>

/* 1 / (1 + e^-x). */
static inline float act_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

/* x · sigmoid(x). */
static inline float act_silu(float x) { return x / (1.0f + expf(-x)); }

/* log(1 + e^x), linear above 20 like torch.nn.functional.softplus (beta 1, threshold 20). */
static inline float act_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* y[i] = silu(gate[i]) · up[i] for i < n (SwiGLU). y may alias gate or up. SIMD paths use the
 * vector exp of simd_math.h (about an ulp from expf). */
void kern_swiglu(float *y, const float *gate, const float *up, int n);

/* y[i] *= sigmoid(gate[i]) for i < n (attention output gate). */
void kern_mul_sigmoid(float *y, const float *gate, int n);

/* y[i] += x[i] for i < n (the residual add): one rounding per element whatever the path, so the
 * bits do not depend on the vector width or on where a range starts. */
void kern_add(float *y, const float *x, size_t n);

#endif
