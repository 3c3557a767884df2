/* norm.h — RMS normalisation of one vector (plain, gated, or a block of rows), L2 normalisation.
 *
 * Zero-centred checkpoints (HF Qwen3.5: weight stored as w, applied as 1 + w) are handled by the
 * model loader, which stores the effective weight (1 + w, computed in fp32) once; the kernels here
 * always multiply by the weight they are given. Each has a portable, an AVX2 and an AVX-512 path
 * (cpu_isa()); a vector's result depends only on its own values. */
#ifndef MTPLX_KERNELS_NORM_H
#define MTPLX_KERNELS_NORM_H

/* y[i] = x[i] / sqrt(mean(x²) + eps) · w[i] for i < n. w NULL means no weight (all ones).
 * y may alias x. The sum of squares is accumulated in fp32 (in a fixed lane order on SIMD paths). */
void kern_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* Gated RMSNorm (Gated DeltaNet output): y[i] = rmsnorm(x)[i] · silu(z[i]). y may alias x. */
void kern_rmsnorm_gated(float *y, const float *x, const float *w, const float *z, int n, float eps);

/* kern_rmsnorm of `rows` rows of n floats, x rows ldx apart, y rows ldy apart. */
void kern_rmsnorm_rows(float *y, int ldy, const float *x, int ldx, const float *w, int n, int rows, float eps);

/* L2 normalisation as HF/FLA define it: y = x / sqrt(Σx² + eps) · scale. y may alias x. */
void kern_l2norm(float *y, const float *x, int n, float eps, float scale);

#endif
