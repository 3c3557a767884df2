/* gdn.h — Gated DeltaNet pieces: the causal depthwise conv1d over a window of rows, and one step of
 * the gated delta rule for one value head.
 *
 * The recurrent state of a value head is S[Dv][Dk] (value-major, fp32). One step with decay g,
 * learning rate beta, key k[Dk] (L2-normalised), value v[Dv], query q[Dk]:
 *     kv    = S k                      (per value dim, sum over Dk in order)
 *     delta = beta · (v − g·kv)        (= beta · (v − (g S) k))
 *     S'    = g·S + delta ⊗ k
 *     y     = S' q
 * kern_gdn_replay applies the same S' update from a stored delta (the "innovation tape"): replaying
 * a step gives a state bit-identical to the forward's, because both use gdn_update below. */
#ifndef MTPLX_KERNELS_GDN_H
#define MTPLX_KERNELS_GDN_H

/* y[t][c] = silu(Σ_{j<kc} w[c][j] · x[t + j][c]) for t < rows, c < channels: a causal depthwise
 * conv over a window x of (kc - 1 + rows) rows of `channels` floats, spaced ldx apart (the first
 * kc - 1 rows are the carried conv state). y rows are spaced ldy apart. */
void kern_conv1d_silu(float *y, int ldy, const float *x, int ldx, const float *w, int channels, int kc,
                      int rows);

/* One delta-rule step of one value head: reads S_src [dv][dk], writes S_dst (may equal S_src), y[dv]
 * and, when delta_out is non-NULL, the innovation delta[dv]. */
void kern_gdn_step(float *S_dst, const float *S_src, const float *q, const float *k, const float *v,
                   float g, float beta, float *y, float *delta_out, int dk, int dv);

/* R consecutive steps of one value head, bit-identical to R kern_gdn_step calls where step t reads
 * the state step t − 1 wrote (S_src for t = 0) and all write S_dst (may equal S_src). Step t takes
 * q + t·ldqk, k + t·ldqk, v + t·ldv, g[t], beta[t] and writes y + t·ldy and, when delta_out is non-NULL,
 * delta_out + t·ldd. The AVX-512 path reads the state once per step instead of twice (step t + 1's
 * S k is summed from the values step t stores, in the order the step would have reloaded them) and
 * prefetches it ahead. R < 1 does nothing. */
void kern_gdn_steps(float *S_dst, const float *S_src, const float *q, const float *k, int ldqk, const float *v,
                    int ldv, const float *g, const float *beta, float *y, int ldy, float *delta_out, int ldd, int R,
                    int dk, int dv);

/* S_dst = g·S_src + delta ⊗ k (S_dst may equal S_src): the state part of kern_gdn_step. */
void kern_gdn_replay(float *S_dst, const float *S_src, const float *k, const float *delta, float g,
                     int dk, int dv);

#endif
