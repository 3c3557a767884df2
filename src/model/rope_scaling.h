/* rope_scaling.h — RoPE inverse frequencies under the scaling schemes found in real configs.
 *
 * `rope_parameters.rope_type` (or legacy `rope_scaling.type`) selects how the base frequencies
 * inv_freq[i] = theta^(-2i/d) are changed for long context:
 *   - default: unchanged.
 *   - linear:  inv_freq / factor (position interpolation).
 *   - llama3:  Llama-3.1 banded scaling: wavelengths longer than orig/low_freq_factor are divided by
 *              factor, shorter than orig/high_freq_factor kept, and the band between interpolated
 *              smoothly (HF modeling_rope_utils._compute_llama3_parameters).
 *   - yarn:    YaRN: per dimension a linear ramp between interpolated (inv_freq / factor) and
 *              original frequencies, the ramp ends found from beta_fast / beta_slow rotations over the
 *              original context; cos and sin are multiplied by an attention factor
 *              (mscale(factor, mscale) / mscale(factor, mscale_all_dim), or mscale(factor)), with
 *              mscale(f, m) = 0.1·m·ln f + 1 for f > 1, else 1.
 * `dynamic` (NTK, depends on the running sequence length), `longrope` and anything else are refused
 * with a reason: running them with plain RoPE would silently give wrong logits. */
#ifndef MTPLX_MODEL_ROPE_SCALING_H
#define MTPLX_MODEL_ROPE_SCALING_H

#include "../base/err.h"

typedef enum {
    ROPE_SCALING_NONE = 0,   /* "default" (or no rope_type at all) */
    ROPE_SCALING_LINEAR,     /* "linear" */
    ROPE_SCALING_LLAMA3,     /* "llama3" */
    ROPE_SCALING_YARN,       /* "yarn" */
} rope_scaling_kind;

typedef struct {
    rope_scaling_kind kind;
    double factor;              /* linear / llama3: > 0 (llama3: >= 1) */
    double low_freq_factor;     /* llama3 */
    double high_freq_factor;    /* llama3, > low_freq_factor */
    int orig_max_pos;           /* llama3 / yarn: original_max_position_embeddings, > 0 */
    double beta_fast, beta_slow;/* yarn: ramp ends in rotations (defaults 32 / 1; 0 means default) */
    double mscale;              /* yarn: 0 = absent */
    double mscale_all_dim;      /* yarn: 0 = absent */
} rope_scaling;

/* Map a rope_type string (NULL or "" = default) to a kind. Returns 0, or MTPLX_EUNSUPPORTED with a
 * message naming the type and why it is refused. */
int rope_scaling_kind_parse(const char *rope_type, rope_scaling_kind *out, mtplx_err *err);

/* Check the parameters of s for its kind. Returns 0 or MTPLX_EINVAL naming the bad field. */
int rope_scaling_check(const rope_scaling *s, mtplx_err *err);

/* inv_freq[i] for i < rotary_dim/2 under scaling s (NULL = none), rounded to fp32. s must have
 * passed rope_scaling_check. */
void rope_scaled_inv_freq(float *inv_freq, int rotary_dim, double theta, const rope_scaling *s);

/* The factor cos and sin are multiplied by (HF attention_scaling): YaRN's, else 1. */
double rope_attention_factor(const rope_scaling *s);

/* YaRN's magnitude scale: 0.1·m·ln(factor) + 1 for factor > 1, else 1. */
double rope_yarn_mscale(double factor, double m);

#endif
