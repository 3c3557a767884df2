/* rope_scaling.c — scaled RoPE inverse frequencies (see rope_scaling.h). */
#include "rope_scaling.h"

#include <math.h>
#include <string.h>

int rope_scaling_kind_parse(const char *rope_type, rope_scaling_kind *out, mtplx_err *err) {
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
                       "is not implemented; supported: default, linear, llama3, yarn");
    if (!strcmp(rope_type, "yarn")) {
        *out = ROPE_SCALING_YARN;
        return 0;
    }
    return err_set(err, MTPLX_EUNSUPPORTED, "rope_type \"%s\" is not implemented; supported: default, linear, llama3, yarn",
                   rope_type);
}

int rope_scaling_check(const rope_scaling *s, mtplx_err *err) {
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
    case ROPE_SCALING_YARN:
        if (!(s->factor > 0) || !isfinite(s->factor))
            return err_set(err, MTPLX_EINVAL, "rope scaling \"yarn\": factor %g must be > 0", s->factor);
        if (s->orig_max_pos <= 0)
            return err_set(err, MTPLX_EINVAL,
                           "rope scaling \"yarn\": original_max_position_embeddings %d must be > 0", s->orig_max_pos);
        if (s->beta_fast < 0 || s->beta_slow < 0 || !isfinite(s->beta_fast) || !isfinite(s->beta_slow) ||
            s->mscale < 0 || s->mscale_all_dim < 0 || !isfinite(s->mscale) || !isfinite(s->mscale_all_dim))
            return err_set(err, MTPLX_EINVAL, "rope scaling \"yarn\": beta_fast %g / beta_slow %g / mscale %g / "
                           "mscale_all_dim %g must be finite and >= 0", s->beta_fast, s->beta_slow, s->mscale,
                           s->mscale_all_dim);
        return 0;
    }
    return err_set(err, MTPLX_EINVAL, "rope scaling: unknown kind %d", (int)s->kind);
}

double rope_yarn_mscale(double factor, double m) {
    return factor <= 1 ? 1.0 : 0.1 * m * log(factor) + 1.0;
}

double rope_attention_factor(const rope_scaling *s) {
    if (!s || s->kind != ROPE_SCALING_YARN) return 1.0;
    if (s->mscale > 0 && s->mscale_all_dim > 0)
        return rope_yarn_mscale(s->factor, s->mscale) / rope_yarn_mscale(s->factor, s->mscale_all_dim);
    return rope_yarn_mscale(s->factor, 1.0);
}

/* YaRN's dimension index at which a wavelength makes `rotations` turns over the original context. */
static double yarn_correction_dim(double rotations, int dim, double base, double orig) {
    return (dim * log(orig / (rotations * 2.0 * M_PI))) / (2.0 * log(base));
}

void rope_scaled_inv_freq(float *inv_freq, int rotary_dim, double theta, const rope_scaling *s) {
    int half = rotary_dim / 2;
    double lo = 0, hi = 0;
    if (s && s->kind == ROPE_SCALING_YARN) {
        double bf = s->beta_fast > 0 ? s->beta_fast : 32, bs = s->beta_slow > 0 ? s->beta_slow : 1;
        lo = floor(yarn_correction_dim(bf, rotary_dim, theta, s->orig_max_pos));
        hi = ceil(yarn_correction_dim(bs, rotary_dim, theta, s->orig_max_pos));
        if (lo < 0) lo = 0;
        if (hi > rotary_dim - 1) hi = rotary_dim - 1;
        if (lo == hi) hi += 0.001;
    }
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
        } else if (s && s->kind == ROPE_SCALING_YARN) {
            /* ramp 0 (low dims, short wavelengths): keep f; ramp 1: interpolate f / factor */
            double ramp = ((double)i - lo) / (hi - lo);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            f = (f / s->factor) * ramp + f * (1.0 - ramp);
        }
        inv_freq[i] = (float)f;
    }
}
