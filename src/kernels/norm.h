/* norm.h — RMS normalisation of one vector.
 *
 * Zero-centred checkpoints (HF Qwen3.5: weight stored as w, applied as 1 + w) are handled by the
 * model loader, which stores the effective weight (1 + w, computed in fp32) once; the kernels here
 * always multiply by the weight they are given. */
#ifndef MTPLX_KERNELS_NORM_H
#define MTPLX_KERNELS_NORM_H

/* y[i] = x[i] / sqrt(mean(x²) + eps) · w[i] for i < n. w NULL means no weight (all ones).
 * y may alias x. The sum of squares is accumulated in order, in fp32. */
void kern_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* L2 normalisation as HF/FLA define it: y = x / sqrt(Σx² + eps) · scale. y may alias x. */
void kern_l2norm(float *y, const float *x, int n, float eps, float scale);

#endif
