/* rope_scaling.c — scaled RoPE inverse frequencies (see rope_scaling.h). */
#include "rope_scaling.h"

#include <math.h>
#include <string.h>

int kern_rope_scaling_kind_parse(const char *rope_type, rope_scaling_kind *out, mtplx_err *err) {
    if (!rope_type || !*rope_type || !strcmp(rope_type, "default")) {
        *out = ROPE_SCALING_NONE;
        return 0;
    }
    if (!strcmp(rope_type, "linear")) {
        *out = ROPE_SCALING_LINEAR;
        return 0;
    }
    if (!strcmp(rope_type, "llama3")) {
        *out = ROPE_SCALING_LLAMA3;
        return 0;
    }
    if (!strcmp(rope_type, "dynamic"))
        return err_set(err, MTPLX_EUNSUPPORTED,
                       "rope_type \"dynamic\" (NTK scaling recomputed from the running sequence length) "
                       "is not implemented; supported: default, linear, llama3");
    if (!strcmp(rope_type, "yarn"))
        return err_set(err, MTPLX_EUNSUPPORTED,
                       "rope_type \"yarn\" (YaRN frequency ramp and attention mscale) is not implemented; "
                       "supported: default, linear, llama3");
    return err_set(err, MTPLX_EUNSUPPORTED, "rope_type \"%s\" is not implemented; supported: default, linear, llama3",
                   rope_type);
}

int kern_rope_scaling_check(const rope_scaling *s, mtplx_err *err) {
    switch (s->kind) {
    case ROPE_SCALING_NONE:
        return 0;
    case ROPE_SCALING_LINEAR:
        if (!(s->factor > 0) || !isfinite(s->factor))
            return err_set(err, MTPLX_EINVAL, "rope scaling \"linear\": factor %g must be > 0", s->factor);
        return 0;
    case ROPE_SCALING_LLAMA3:
        if (!(s->factor >= 1) || !isfinite(s->factor))
            return err_set(err, MTPLX_EINVAL, "rope scaling \"llama3\": factor %g must be >= 1", s->factor);
        if (!(s->low_freq_factor > 0) || !(s->high_freq_factor > s->low_freq_factor) ||
            !isfinite(s->high_freq_factor))
            return err_set(err, MTPLX_EINVAL,
                           "rope scaling \"llama3\": need 0 < low_freq_factor (%g) < high_freq_factor (%g)",
                           s->low_freq_factor, s->high_freq_factor);
        if (s->orig_max_pos <= 0)
            return err_set(err, MTPLX_EINVAL,
                           "rope scaling \"llama3\": original_max_position_embeddings %d must be > 0", s->orig_max_pos);
        return 0;
    }
    return err_set(err, MTPLX_EINVAL, "rope scaling: unknown kind %d", (int)s->kind);
}

void kern_rope_scaled_inv_freq(float *inv_freq, int rotary_dim, double theta, const rope_scaling *s) {
    int half = rotary_dim / 2;
    for (int i = 0; i < half; i++) {
        /* base frequency as HF forms it: fp32 exponent, then 1 / theta^e */
        float e = (float)(2 * i) / (float)rotary_dim;
        double f = 1.0 / pow(theta, (double)e);
        if (s && s->kind == ROPE_SCALING_LINEAR) {
            f /= s->factor;
        } else if (s && s->kind == ROPE_SCALING_LLAMA3) {
            double old = (double)s->orig_max_pos;
            double low_wavelen = old / s->low_freq_factor;   /* longer than this: fully scaled */
            double high_wavelen = old / s->high_freq_factor; /* shorter than this: untouched */
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= s->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (old / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
                f = (1.0 - smooth) * f / s->factor + smooth * f;
            }
        }
        inv_freq[i] = (float)f;
    }
}
