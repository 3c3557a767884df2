/* config.c — config.json (+ generation_config.json) -> model_config.
 *
 * Field lookup: the text parameters live either at the top level (flat configs) or under
 * `text_config` (multimodal wrappers such as Qwen3_5ForConditionalGeneration); every field is read
 * from text_config first, then from the top level. Defaults follow Hugging Face transformers'
 * config classes of each family (tie_word_embeddings false for all of them, full_attention_interval
 * 4, partial_rotary_factor 0.25 for the Qwen3.5/Next hybrids). An unknown model_type parses
 * leniently into ARCH_UNKNOWN so that `inspect` can report it; a known family is validated strictly
 * and every error names the file and the field. */
#include "config_parse.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"
#include "families/family_ops.h"

/* The value of `key` (text_config first, then root); NULL when absent or JSON null. */
json_t *cfg_get(const cfg_ctx *c, const char *key) {
    json_t *v = json_object_get(c->t, key);
    if ((!v || json_is_null(v)) && c->t != c->root) v = json_object_get(c->root, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* Integer field in [minv, INT_MAX]. Absent: *out = def, or an error when required. */
int cfg_int(cfg_ctx *c, const char *key, int required, int def, int minv, int *out) {
    json_t *v = cfg_get(c, key);
    if (!v) {
        *out = def;
        if (required && !c->lenient)
            return err_set(c->err, MTPLX_EBADFILE, "%s: field \"%s\" is missing", c->what, key);
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < minv || json_integer_value(v) > INT_MAX) {
        *out = def;
        if (c->lenient) return 0;
        if (!json_is_integer(v))
            return err_set(c->err, MTPLX_EBADFILE, "%s: field \"%s\" must be an integer", c->what, key);
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"%s\" = %lld is out of range (minimum %d)", c->what,
                       key, (long long)json_integer_value(v), minv);
    }
    *out = (int)json_integer_value(v);
    return 0;
}

/* Number (integer or real) from object o (or the ctx lookup when o is NULL). */
int cfg_num(cfg_ctx *c, json_t *o, const char *key, double def, double *out) {
    json_t *v = o ? json_object_get(o, key) : cfg_get(c, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v)) {
        *out = def;
        if (c->lenient) return 0;
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"%s\" must be a number", c->what, key);
    }
    *out = json_number_value(v);
    return 0;
}

int cfg_bool(cfg_ctx *c, const char *key, int def, int *out) {
    json_t *v = cfg_get(c, key);
    *out = def;
    if (!v) return 0;
    if (json_is_boolean(v)) *out = json_is_true(v);
    else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1))
        *out = (int)json_integer_value(v);
    else if (!c->lenient)
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"%s\" must be true or false", c->what, key);
    return 0;
}

void cfg_copy_str(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src ? src : "");
}

int cfg_bad(cfg_ctx *c, const char *fmt_field, const char *why) {
    return err_set(c->err, MTPLX_EBADFILE, "%s: field \"%s\" %s", c->what, fmt_field, why);
}

/* layer_types array, or full_attention_interval (HF default 4) for the hybrids; attention-only
 * families are all attention. */
static int parse_layers(cfg_ctx *c, model_config *cfg, int hybrid) {
    json_t *lt = cfg_get(c, "layer_types");
    if (lt) {
        if (!json_is_array(lt)) return c->lenient ? 0 : cfg_bad(c, "layer_types", "must be an array of strings");
        if ((int)json_array_size(lt) != cfg->n_layers) {
            if (c->lenient) return 0;
            return err_set(c->err, MTPLX_EBADFILE,
                           "%s: field \"layer_types\" has %zu entries but num_hidden_layers is %d", c->what,
                           json_array_size(lt), cfg->n_layers);
        }
        for (int i = 0; i < cfg->n_layers; i++) {
            json_t *e = json_array_get(lt, (size_t)i);
            const char *s = json_is_string(e) ? json_string_value(e) : NULL;
            if (s && strcmp(s, "full_attention") == 0) cfg->layer_kinds[i] = LAYER_ATTN;
            else if (s && strcmp(s, "linear_attention") == 0 && (hybrid || c->lenient)) cfg->layer_kinds[i] = LAYER_GDN;
            else if (c->lenient) cfg->layer_kinds[i] = LAYER_ATTN;
            else if (s && strcmp(s, "sliding_attention") == 0)
                return err_set(c->err, MTPLX_EUNSUPPORTED,
                               "%s: field \"layer_types\"[%d]: sliding-window attention layers are not supported",
                               c->what, i);
            else
                return err_set(c->err, MTPLX_EBADFILE, "%s: field \"layer_types\"[%d]: \"%.40s\" is not a %s layer type",
                               c->what, i, s ? s : "(not a string)", hybrid ? "known" : "supported");
        }
        return 0;
    }
    int interval = 4;
    if (hybrid) {
        if (cfg_int(c, "full_attention_interval", 0, 4, 1, &interval)) return c->err->code;
    }
    for (int i = 0; i < cfg->n_layers; i++)
        cfg->layer_kinds[i] = !hybrid || (i + 1) % interval == 0 ? LAYER_ATTN : LAYER_GDN;
    return 0;
}

/* rope_parameters (new) or rope_theta / partial_rotary_factor / rope_scaling (legacy). */
static int parse_rope(cfg_ctx *c, model_config *cfg, double def_partial) {
    json_t *rp = cfg_get(c, "rope_parameters"), *rs = cfg_get(c, "rope_scaling");
    if (rp && !json_is_object(rp)) {
        if (!c->lenient) return cfg_bad(c, "rope_parameters", "must be an object");
        rp = NULL;
    }
    if (rs && !json_is_object(rs)) {
        if (!c->lenient) return cfg_bad(c, "rope_scaling", "must be an object or null");
        rs = NULL;
    }
    double theta, partial;
    if (cfg_num(c, NULL, "rope_theta", 10000.0, &theta)) return c->err->code;
    if (rp && cfg_num(c, rp, "rope_theta", theta, &theta)) return c->err->code;
    if (cfg_num(c, NULL, "partial_rotary_factor", def_partial, &partial)) return c->err->code;
    if (rp && cfg_num(c, rp, "partial_rotary_factor", partial, &partial)) return c->err->code;
    /* the scaling description: rope_parameters when it names a type, else legacy rope_scaling */
    json_t *sc = NULL;
    const char *type = "default";
    for (int k = 0; k < 2 && !sc; k++) {
        json_t *o = k == 0 ? rp : rs;
        if (!o) continue;
        json_t *ty = json_object_get(o, "rope_type");
        if (!ty) ty = json_object_get(o, "type");
        if (json_is_string(ty)) {
            type = json_string_value(ty);
            sc = o;
        } else if (ty && !json_is_null(ty) && !c->lenient) {
            return cfg_bad(c, k == 0 ? "rope_parameters.rope_type" : "rope_scaling.type", "must be a string");
        }
    }
    cfg_copy_str(cfg->rope_type, sizeof cfg->rope_type, type);
    cfg->rope_theta = theta;
    double f = 1, lo = 1, hi = 4, bf = 32, bs = 1, ms = 1, msa = 0, omp = 0;
    if (sc) {
        if (cfg_num(c, sc, "factor", 1, &f) || cfg_num(c, sc, "low_freq_factor", 1, &lo) ||
            cfg_num(c, sc, "high_freq_factor", 4, &hi) || cfg_num(c, sc, "beta_fast", 32, &bf) ||
            cfg_num(c, sc, "beta_slow", 1, &bs) || cfg_num(c, sc, "mscale", 1, &ms) ||
            cfg_num(c, sc, "mscale_all_dim", 0, &msa) ||
            cfg_num(c, sc, "original_max_position_embeddings", 0, &omp))
            return c->err->code;
    }
    cfg->rope_factor = f;
    cfg->rope_low_freq_factor = lo;
    cfg->rope_high_freq_factor = hi;
    cfg->rope_beta_fast = bf;
    cfg->rope_beta_slow = bs;
    cfg->rope_mscale = ms;
    cfg->rope_mscale_all_dim = msa;
    cfg->rope_orig_max_pos = omp > 0 && omp < INT_MAX ? (int)omp : 0;
    if (!c->lenient) {
        if (!(theta > 0)) return cfg_bad(c, "rope_theta", "must be positive");
        if (!(partial > 0 && partial <= 1)) return cfg_bad(c, "partial_rotary_factor", "must be in (0, 1]");
        if (!(f > 0)) return cfg_bad(c, "rope factor", "must be positive");
    }
    if (partial > 0 && partial <= 1) cfg->rotary_dim = (int)(cfg->head_dim * partial);
    return 0;
}

/* MLX `quantization` or HF `quantization_config`. */
static int parse_quant(cfg_ctx *c, model_config *cfg) {
    json_t *q = json_object_get(c->root, "quantization");
    if (!q || json_is_null(q)) q = json_object_get(c->root, "quantization_config");
    if (!q || json_is_null(q)) return 0;
    if (!json_is_object(q)) return c->lenient ? 0 : cfg_bad(c, "quantization", "must be an object");
    json_t *m = json_object_get(q, "quant_method");
    int bits = 0, gs = 0;
    json_t *jb = json_object_get(q, "bits"), *jg = json_object_get(q, "group_size");
    if (jb && json_is_integer(jb)) bits = (int)json_integer_value(jb);
    if (jg && json_is_integer(jg)) gs = (int)json_integer_value(jg);
    cfg_copy_str(cfg->quant_method, sizeof cfg->quant_method,
             json_is_string(m) ? json_string_value(m) : (jb || jg) ? "mlx" : "unknown");
    cfg->quant_bits = bits;
    cfg->quant_group_size = gs;
    if (strcmp(cfg->quant_method, "mlx") != 0) return 0; /* other methods: named, inspect decides */
    if (!c->lenient && (bits < 1 || bits > 8 || gs < 1))
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"quantization\": bits %d / group_size %d impossible",
                       c->what, bits, gs);
    const char *k;
    json_t *v;
    json_object_foreach(q, k, v) {
        if (!json_is_object(v) && !json_is_boolean(v)) continue; /* bits, group_size, mode, ... */
        if (json_is_true(v)) continue;                            /* "quantize with the defaults" */
        if (cfg->n_quant_overrides >= CFG_MAX_QUANT_OVERRIDES) {
            if (c->lenient) return 0;
            return err_set(c->err, MTPLX_EUNSUPPORTED, "%s: field \"quantization\": more than %d per-module overrides",
                           c->what, CFG_MAX_QUANT_OVERRIDES);
        }
        if (strlen(k) >= sizeof cfg->quant_overrides[0].module) {
            if (c->lenient) continue;
            return err_set(c->err, MTPLX_EBADFILE, "%s: field \"quantization\": module name \"%.60s...\" too long",
                           c->what, k);
        }
        int ob = 0, og = gs;
        if (json_is_object(v)) {
            json_t *b2 = json_object_get(v, "bits"), *g2 = json_object_get(v, "group_size");
            ob = json_is_integer(b2) ? (int)json_integer_value(b2) : bits;
            og = json_is_integer(g2) ? (int)json_integer_value(g2) : gs;
            if (!c->lenient && (ob < 1 || ob > 8 || og < 1))
                return err_set(c->err, MTPLX_EBADFILE, "%s: field \"quantization.%s\": bits %d / group_size %d impossible",
                               c->what, k, ob, og);
        }
        int i = cfg->n_quant_overrides++;
        cfg_copy_str(cfg->quant_overrides[i].module, sizeof cfg->quant_overrides[i].module, k);
        cfg->quant_overrides[i].bits = ob;
        cfg->quant_overrides[i].group_size = og;
    }
    return 0;
}

/* eos_token_id: int, list of ints, or null. Replaces cfg's list when present. */
static int parse_eos(json_t *v, const char *what, int vocab, model_config *cfg, mtplx_err *err) {
    if (!v || json_is_null(v)) return 0;
    json_t *one[1] = {v};
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_integer(v))
        return err_set(err, MTPLX_EBADFILE, "%s: field \"eos_token_id\" must be an integer or a list of integers", what);
    if (n > CFG_MAX_EOS)
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: field \"eos_token_id\" lists %zu ids (at most %d)", what, n,
                       CFG_MAX_EOS);
    int ids[CFG_MAX_EOS];
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_is_array(v) ? json_array_get(v, i) : one[0];
        if (!json_is_integer(e) || json_integer_value(e) < 0 || (vocab > 0 && json_integer_value(e) >= vocab))
            return err_set(err, MTPLX_EBADFILE, "%s: field \"eos_token_id\"[%zu] is not a token id below vocab_size %d",
                           what, i, vocab);
        ids[i] = (int)json_integer_value(e);
    }
    memcpy(cfg->eos_ids, ids, n * sizeof ids[0]);
    cfg->n_eos = (int)n;
    return 0;
}

#define TRY(x) do { if ((rc = (x)) != 0) return rc; } while (0)

/* Sizes every family has: vocabulary, hidden, layers, dense MLP width (optional for MoE families),
 * norm epsilon, tying, attention heads and head_dim. */
static int parse_trunk(cfg_ctx *c, model_config *cfg, const model_family *f) {
    const char *what = c->what;
    int rc;
    TRY(cfg_int(c, "vocab_size", 1, 0, 1, &cfg->vocab_size));
    TRY(cfg_int(c, "hidden_size", 1, 0, 1, &cfg->hidden_size));
    TRY(cfg_int(c, "num_hidden_layers", 1, 0, 1, &cfg->n_layers));
    if (cfg->n_layers > CFG_MAX_LAYERS) {
        if (!c->lenient)
            return err_set(c->err, MTPLX_EUNSUPPORTED, "%s: field \"num_hidden_layers\" = %d exceeds the limit of %d",
                           what, cfg->n_layers, CFG_MAX_LAYERS);
        cfg->n_layers = CFG_MAX_LAYERS;
    }
    /* MoE families may have no dense MLP at all */
    TRY(cfg_int(c, "intermediate_size", !f->moe, 0, 1, &cfg->intermediate_size));
    double eps;
    TRY(cfg_num(c, NULL, "rms_norm_eps", 1e-6, &eps));
    if (!(eps > 0) && !c->lenient) return cfg_bad(c, "rms_norm_eps", "must be positive");
    cfg->rms_norm_eps = (float)eps;
    TRY(cfg_bool(c, "tie_word_embeddings", 0, &cfg->tie_word_embeddings));
    TRY(cfg_int(c, "max_position_embeddings", 0, 0, 1, &cfg->max_position_embeddings));
    TRY(cfg_int(c, "num_attention_heads", 1, 0, 1, &cfg->n_heads));
    TRY(cfg_int(c, "num_key_value_heads", 0, cfg->n_heads, 1, &cfg->n_kv_heads));
    if (!c->lenient && cfg->n_heads % cfg->n_kv_heads != 0)
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"num_key_value_heads\" = %d does not divide num_attention_heads = %d",
                       what, cfg->n_kv_heads, cfg->n_heads);
    int def_hd = cfg->n_heads > 0 && cfg->hidden_size % cfg->n_heads == 0 ? cfg->hidden_size / cfg->n_heads : 0;
    TRY(cfg_int(c, "head_dim", 0, def_hd, 1, &cfg->head_dim));
    if (!cfg->head_dim && !c->lenient)
        return cfg_bad(c, "head_dim", "is missing and hidden_size is not a multiple of num_attention_heads");
    return 0;
}

/* The Gated DeltaNet fields of the hybrid families (HF defaults when absent). */
static int parse_gdn(cfg_ctx *c, model_config *cfg) {
    int rc;
    TRY(cfg_int(c, "linear_num_key_heads", 0, 16, 1, &cfg->lin_k_heads));
    TRY(cfg_int(c, "linear_num_value_heads", 0, 32, 1, &cfg->lin_v_heads));
    TRY(cfg_int(c, "linear_key_head_dim", 0, 128, 1, &cfg->lin_k_dim));
    TRY(cfg_int(c, "linear_value_head_dim", 0, 128, 1, &cfg->lin_v_dim));
    TRY(cfg_int(c, "linear_conv_kernel_dim", 0, 4, 1, &cfg->conv_kernel));
    if (cfg->lin_v_heads % cfg->lin_k_heads != 0)
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"linear_num_value_heads\" = %d is not a multiple of linear_num_key_heads = %d",
                       c->what, cfg->lin_v_heads, cfg->lin_k_heads);
    return 0;
}

int cfg_moe_common(cfg_ctx *c, model_config *cfg) {
    int rc;
    TRY(cfg_int(c, "num_experts_per_tok", 1, 0, 1, &cfg->n_experts_per_tok));
    TRY(cfg_int(c, "moe_intermediate_size", 1, 0, 1, &cfg->moe_intermediate_size));
    TRY(cfg_bool(c, "norm_topk_prob", 1, &cfg->norm_topk_prob));
    if (cfg->n_experts_per_tok > cfg->n_experts)
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"num_experts_per_tok\" = %d exceeds the %d experts", c->what,
                       cfg->n_experts_per_tok, cfg->n_experts);
    return 0;
}

/* The family's MoE fields and layer_moe[] (its parse_moe), then: every dense layer needs
 * intermediate_size. */
static int parse_moe(cfg_ctx *c, model_config *cfg, const model_family *f) {
    int rc;
    TRY(f->parse_moe(c, cfg));
    for (int i = 0; i < cfg->n_layers; i++)
        if (!cfg->layer_moe[i] && cfg->intermediate_size <= 0)
            return err_set(c->err, MTPLX_EBADFILE, "%s: field \"intermediate_size\" is missing but layer %d has a dense MLP",
                           c->what, i);
    return 0;
}

/* Attention flavour, layers, RoPE (with the family's own attention fields, e.g. MLA), GDN, MoE. */
static int parse_layers_and_mixers(cfg_ctx *c, model_config *cfg, const model_family *f) {
    int rc;
    cfg->attn_output_gate = cfg->qk_norm = cfg->zero_centered_norm = f->hybrid;
    cfg->qk_norm |= f->qk_norm;
    TRY(parse_layers(c, cfg, f->hybrid));
    TRY(parse_rope(c, cfg, f->hybrid ? 0.25 : 1.0));
    if (f->parse_attention) TRY(f->parse_attention(c, cfg));
    if (!c->lenient && (cfg->rotary_dim <= 0 || cfg->rotary_dim % 2 || cfg->rotary_dim > cfg->head_dim))
        return err_set(c->err, MTPLX_EBADFILE, "%s: field \"partial_rotary_factor\": rotary dims %d of head_dim %d is not a positive even number",
                       c->what, cfg->rotary_dim, cfg->head_dim);
    if (f->hybrid) TRY(parse_gdn(c, cfg));
    if (f->parse_moe) TRY(parse_moe(c, cfg, f));
    return 0;
}

/* MTP layers, quantization and EOS ids (an unknown family ignores a malformed eos_token_id). */
static int parse_tail(cfg_ctx *c, model_config *cfg) {
    int rc, mtp = 0;
    TRY(cfg_int(c, "mtp_num_hidden_layers", 0, 0, 0, &mtp));
    if (!mtp) TRY(cfg_int(c, "num_nextn_predict_layers", 0, 0, 0, &mtp));
    cfg->mtp_layers = mtp;
    TRY(parse_quant(c, cfg));
    json_t *eos = cfg_get(c, "eos_token_id");
    if (c->lenient) {
        mtplx_err tmp;
        parse_eos(eos, c->what, cfg->vocab_size, cfg, &tmp);
        return 0;
    }
    return parse_eos(eos, c->what, cfg->vocab_size, cfg, c->err);
}

/* The whole config: model_type picks the family (families/table.c), whose entry says what else to
 * read. */
static int parse_root(json_t *root, const char *what, model_config *cfg, mtplx_err *err) {
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root)) return err_set(err, MTPLX_EBADFILE, "%s: not a JSON object", what);
    cfg_ctx c = {root, root, what, 0, err};
    json_t *tc = json_object_get(root, "text_config");
    if (tc && !json_is_null(tc)) {
        if (!json_is_object(tc)) return cfg_bad(&c, "text_config", "must be an object");
        c.t = tc;
    }
    json_t *ar = json_object_get(root, "architectures");
    if (json_is_array(ar) && json_is_string(json_array_get(ar, 0)))
        cfg_copy_str(cfg->architecture, sizeof cfg->architecture, json_string_value(json_array_get(ar, 0)));
    json_t *mt = json_object_get(c.t, "model_type");
    if (!json_is_string(mt)) mt = json_object_get(root, "model_type");
    if (json_is_string(mt)) cfg_copy_str(cfg->model_type, sizeof cfg->model_type, json_string_value(mt));
    const model_family *f = family_by_type(cfg->model_type);
    cfg->arch = f->arch;
    c.lenient = cfg->arch == ARCH_UNKNOWN;
    int rc;
    TRY(parse_trunk(&c, cfg, f));
    TRY(parse_layers_and_mixers(&c, cfg, f));
    return parse_tail(&c, cfg);
}
#undef TRY

int config_parse(const char *json_text, const char *what, model_config *cfg, mtplx_err *err) {
    memset(cfg, 0, sizeof *cfg);
    json_error_t je;
    json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
    if (!root) return err_set(err, MTPLX_EBADFILE, "%s: invalid JSON at line %d: %s", what, je.line, je.text);
    int rc = parse_root(root, what, cfg, err);
    json_decref(root);
    return rc;
}

int config_load(const char *dir, model_config *cfg, mtplx_err *err) {
    memset(cfg, 0, sizeof *cfg);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return err_set(err, MTPLX_EINVAL, "%s: path too long", dir);
    char *text = file_read_all(path, NULL, err);
    if (!text) return err->code;
    int rc = config_parse(text, path, cfg, err);
    free(text);
    if (rc) return rc;
    /* generation_config.json overrides the EOS ids when it names them */
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (!file_exists(path)) return 0;
    text = file_read_all(path, NULL, err);
    if (!text) return err->code;
    json_error_t je;
    json_t *g = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!g) return err_set(err, MTPLX_EBADFILE, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
    if (!json_is_object(g)) rc = err_set(err, MTPLX_EBADFILE, "%s: not a JSON object", path);
    else if (cfg->arch != ARCH_UNKNOWN) rc = parse_eos(json_object_get(g, "eos_token_id"), path, cfg->vocab_size, cfg, err);
    json_decref(g);
    return rc;
}
