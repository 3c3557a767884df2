/* rope_scaling.h — RoPE inverse frequencies under the scaling schemes found in real configs.
 *
 * `rope_parameters.rope_type` (or legacy `rope_scaling.type`) selects how the base frequencies
 * inv_freq[i] = theta^(-2i/d) are changed for long context:
 *   - default: unchanged.
 *   - linear:  inv_freq / factor (position interpolation).
 *   - llama3:  Llama-3.1 banded scaling: wavelengths longer than orig/low_freq_factor are divided by
 *              factor, shorter than orig/high_freq_factor kept, and the band between interpolated
 *              smoothly (HF modeling_rope_utils._compute_llama3_parameters).
 * `dynamic` (NTK, depends on the running sequence length), `yarn`, `longrope` and anything else are
 * refused with a reason: running them with plain RoPE would silently give wrong logits. None of the
 * supported types changes the attention scale (HF attention_factor = 1). */
#ifndef MTPLX_KERNELS_ROPE_SCALING_H
#define MTPLX_KERNELS_ROPE_SCALING_H

#include "../base/err.h"

typedef enum {
    ROPE_SCALING_NONE = 0,   /* "default" (or no rope_type at all) */
    ROPE_SCALING_LINEAR,     /* "linear" */
    ROPE_SCALING_LLAMA3,     /* "llama3" */
} rope_scaling_kind;

typedef struct {
    rope_scaling_kind kind;
    double factor;              /* linear / llama3: > 0 (llama3: >= 1) */
    double low_freq_factor;     /* llama3 */
    double high_freq_factor;    /* llama3, > low_freq_factor */
    int orig_max_pos;           /* llama3: original_max_position_embeddings, > 0 */
} rope_scaling;

/* Map a rope_type string (NULL or "" = default) to a kind. Returns 0, or MTPLX_EUNSUPPORTED with a
 * message naming the type and why it is refused. */
int kern_rope_scaling_kind_parse(const char *rope_type, rope_scaling_kind *out, mtplx_err *err);

/* Check the parameters of s for its kind. Returns 0 or MTPLX_EINVAL naming the bad field. */
int kern_rope_scaling_check(const rope_scaling *s, mtplx_err *err);

/* inv_freq[i] for i < rotary_dim/2 under scaling s (NULL = none), rounded to fp32. s must have
 * passed kern_rope_scaling_check. */
void kern_rope_scaled_inv_freq(float *inv_freq, int rotary_dim, double theta, const rope_scaling *s);

#endif
