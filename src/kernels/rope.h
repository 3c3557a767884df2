/* rope.h — rotary position embedding, NeoX ("rotate half") form, possibly partial.
 *
 * Only the first rotary_dim dims of a head are rotated: dim i pairs with dim i + rotary_dim/2, with
 * angle = position · inv_freq[i], inv_freq[i] = theta^(-2i/rotary_dim). The remaining dims pass
 * through unchanged. */
#ifndef MTPLX_KERNELS_ROPE_H
#define MTPLX_KERNELS_ROPE_H

/* inv_freq[i] = 1 / theta^(2i/rotary_dim) for i < rotary_dim/2, rounded to fp32 (as HF does). */
void kern_rope_inv_freq(float *inv_freq, int rotary_dim, double theta);

/* cos_sin[0..half) = cos(pos·inv_freq), cos_sin[half..2·half) = sin(pos·inv_freq), half =
 * rotary_dim/2. The angle is formed in fp32 like HF's (float(pos) · inv_freq). */
void kern_rope_cos_sin(float *cos_sin, const float *inv_freq, int rotary_dim, int pos);

/* Rotate the first rotary_dim dims of one head x[head_dim] in place with a cos_sin table from
 * kern_rope_cos_sin. */
void kern_rope_apply(float *x, const float *cos_sin, int rotary_dim);

#endif
