/* mla.h — the pieces of DeepSeek multi-head latent attention (MLA) that differ from plain attention.
 *
 * MLA splits each query/key head into a "nope" part (no position) and a "rope" part, and its value
 * head width differs from the query/key width, so the score and the weighted sum have different
 * widths. DeepSeek-V3 checkpoints store the rope dims interleaved (rope_interleave: the pair that
 * rotates together is dims 2i and 2i+1); HF de-interleaves q and k the same way before a NeoX
 * rotation, which leaves q·k unchanged, so rotating the interleaved pairs in place is the same math.
 * Everything here is per row / per head, so results do not depend on the batch (DESIGN.md §3). */
#ifndef MTPLX_KERNELS_MLA_H
#define MTPLX_KERNELS_MLA_H

/* Rotate x[rotary_dim] in place with interleaved pairs: (x[2i], x[2i+1]) by angle i, using a cos_sin
 * table [cos(0..half) | sin(0..half)] (half = rotary_dim/2, angle i = pos · inv_freq[i]). */
void kern_rope_apply_interleaved(float *x, const float *cos_sin, int rotary_dim);

/* The same table the NeoX path uses: cos_sin[i] = cos(pos·inv_freq[i]), cos_sin[half+i] = sin(...),
 * the angle formed in fp32 like HF (float(pos) · inv_freq). */
void kern_mla_cos_sin(float *cos_sin, const float *inv_freq, int rotary_dim, int pos);

/* out[dv] = Σ_j softmax_j(scale · q[dk]·k_j) · v_j over keys j < n, key rows dk wide spaced ldk
 * floats apart, value rows dv wide spaced ldv apart. scores: scratch of n floats. Keys are reduced
 * in order (key 0 first) whatever the caller's batch. n >= 1. */
void kern_mla_attention_head(float *out, const float *q, const float *k, int ldk, int dk, const float *v,
                             int ldv, int dv, int n, float scale, float *scores);

#endif
