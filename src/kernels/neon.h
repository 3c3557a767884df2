/* neon.h — internal: the AArch64 Advanced SIMD (NEON) paths of the non-matmul kernels, called by
 * the dispatchers in act.c, norm.c, gdn.c and attention.c when cpu_isa() is a NEON level (cpu.h).
 * Each follows its AVX2 sibling's scheme in 4-lane vectors: elementwise work lane by lane, sums in
 * lanes whose layout depends only on the vector's own length, reduced in one fixed order, so a row's
 * result never depends on its neighbours or on T (row invariance, DESIGN.md §3). Other targets see
 * no declarations. Not for use outside src/kernels. */
#ifndef MTPLX_KERNELS_NEON_H
#define MTPLX_KERNELS_NEON_H

#if defined(__aarch64__)
#include "attention.h" /* kern_rows */
/* vec_neon.c: y = silu(gate)·up; y *= sigmoid(gate); Σ x² (element i in lane i mod 4); and the norm
 * scaling y = (x·inv)·(w ? w : mul) [· silu(z)] (norm.c's scale_portable, elementwise). */
void swiglu_neon(float *y, const float *gate, const float *up, int n);
void mul_sigmoid_neon(float *y, const float *gate, int n);
float sumsq_neon(const float *x, int n);
void scale_neon(float *y, const float *x, const float *w, const float *z, int n, float inv, float mul);

/* gdn_neon.c: kern_conv1d_silu for kc <= 8; kern_gdn_step / kern_gdn_replay for dk % 4 == 0 (the
 * step's state update is the replay's: bit-identical states). */
void conv1d_silu_neon(float *y, int ldy, const float *x, int ldx, const float *w, int channels, int kc, int rows);
void gdn_step_neon(float *S_dst, const float *S_src, const float *q, const float *k, const float *v, float g,
                   float beta, float *y, float *delta_out, int dk, int dv);
void gdn_replay_neon(float *S_dst, const float *S_src, const float *k, const float *delta, float g, int dk, int dv);

/* attention_neon.c: kern_attention_rows's contract (attention.h): paged key / value rows. */
void attention_neon(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv,
                    int n, float scale, float *scores);
/* attention_neon.c: kern_attention_group_rows's contract (attention.h) for NEON CPUs. */
void attention_group_neon(float *const *out, const float *const *q, const int *n, int nq, const kern_rows *k, int dk,
                          const kern_rows *v, int dv, float scale, float *scores, long lds);
/* The three phases of attention.h's kern_attention_scores_rows / _softmax / _wsum_rows. */
void attention_scores_neon(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k, int dk,
                           float scale, int j0, int j1);
void attention_softmax_neon(float *scores, int n);
void attention_wsum_neon(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0, int d1);
#endif

#endif
