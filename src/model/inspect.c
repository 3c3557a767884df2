/* inspect.c — classify a checkpoint directory into a compatibility tier, count its parameters and
 * estimate its memory, from config.json and the safetensors headers only.
 *
 * Order of the decision (first match wins): not a directory / no config.json / no weight files →
 * not-a-model; a config or weight feature we deliberately do not handle (unknown model_type, dtype,
 * RoPE scaling type, quantization method other than MLX affine) or a family the table marks not
 * runnable → unsupported; otherwise verified when the weights hold an MTP head the family can run,
 * else ar-only. A malformed file is an error, not a tier. inspect_confirm_load() then lets the
 * loader itself confirm a runnable tier (per-tensor dtypes and shapes only it knows). */
#include "inspect.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"
#include "rope_scaling.h"
#include "model.h"
#include "safetensors.h"
#include "families/family_ops.h"

const char *inspect_tier_name(model_tier t) {
    switch (t) {
    case TIER_VERIFIED: return "verified";
    case TIER_AR_ONLY: return "ar-only";
    case TIER_UNSUPPORTED: return "unsupported";
    case TIER_NOT_A_MODEL: return "not-a-model";
    }
    return "?";
}

static int starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* a*b saturating at SIZE_MAX (hostile configs must not wrap the memory figures) */
static size_t mul_sat(size_t a, size_t b) {
    size_t r;
    return __builtin_mul_overflow(a, b, &r) ? SIZE_MAX : r;
}

static size_t add_sat(size_t a, size_t b) { return a + b < a ? SIZE_MAX : a + b; }

/* 1 when dir holds something st_open_dir would read as weights. */
static int has_weight_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d)) != NULL)
        found = (ends_with(de->d_name, ".safetensors") && strcmp(de->d_name, "golden.safetensors") != 0 &&
                 de->d_name[0] != '.') ||
                strcmp(de->d_name, "model.safetensors.index.json") == 0;
    closedir(d);
    return found;
}

static int set_tier(inspect_report *r, model_tier t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int set_tier(inspect_report *r, model_tier t, const char *fmt, ...) {
    r->tier = t;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    return 0;
}

/* Layer index n when name is "<prefix>layers.<n>.<rest>", else -1. */
static int layer_index(const char *name, const char *prefix) {
    if (!starts_with(name, prefix)) return -1;
    const char *p = name + strlen(prefix);
    if (!starts_with(p, "layers.")) return -1;
    p += 7;
    long n = 0;
    if (*p < '0' || *p > '9') return -1;
    while (*p >= '0' && *p <= '9' && n < 1000000) n = n * 10 + (*p++ - '0');
    return *p == '.' ? (int)n : -1;
}

static int is_ignored(const char *n) {
    return starts_with(n, "model.visual.") || starts_with(n, "visual.") || starts_with(n, "vision_tower.") ||
           starts_with(n, "model.vision_tower.") || starts_with(n, "model.multi_modal_projector.") ||
           starts_with(n, "multi_modal_projector.");
}

/* MLX bits for the module owning tensor `name` ("<module>.weight"). */
static int mlx_bits_for(const model_config *c, const char *name) {
    size_t ml = strlen(name) - strlen(".weight");
    for (int i = 0; i < c->n_quant_overrides; i++)
        if (strlen(c->quant_overrides[i].module) == ml && strncmp(c->quant_overrides[i].module, name, ml) == 0)
            return c->quant_overrides[i].bits;
    return c->quant_bits;
}

/* Count parameters, dtypes and the MTP head. A U32 `.weight` is MLX packed: its bits come from the
 * config's quantization entry (per-module overrides honoured), else 8 is assumed (the forward infers
 * bits from shapes; real MLX checkpoints always carry the entry). */
static void count_tensors(const st_set *s, inspect_report *r) {
    const model_config *c = &r->cfg;
    int mlx = strcmp(c->quant_method, "mlx") == 0 && c->quant_bits > 0;
    int ds = family_of(c->arch)->mtp_layout == MTP_LAYOUT_DEEPSEEK; /* MTP as extra model.layers.N.* */
    int qwen_mtp_max = -1, ds_mtp_layers = 0, ds_seen[64] = {0};
    int has_qwen_fc = 0;
    r->n_tensors = st_count(s);
    r->weight_bytes = st_total_bytes(s);
    for (int i = 0; i < r->n_tensors; i++) {
        const st_tensor *t = st_at(s, i);
        r->dtype_tensors[t->dtype]++;
        r->dtype_bytes[t->dtype] += t->nbytes;
        int64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) elems = t->shape[d] && elems > INT64_MAX / t->shape[d] ? INT64_MAX : elems * t->shape[d];
        if (t->dtype == DT_U32 && ends_with(t->name, ".weight")) {
            int b = mlx ? mlx_bits_for(c, t->name) : 8;
            if (b > 0) elems = elems / b * 32 + (elems % b) * 32 / b;
        }
        /* MLX scales/biases of a packed weight are not parameters */
        if ((ends_with(t->name, ".scales") || ends_with(t->name, ".biases"))) {
            char w[600];
            size_t bl = strlen(t->name) - 7;
            if (bl + 8 < sizeof w) {
                memcpy(w, t->name, bl);
                memcpy(w + bl, ".weight", 8);
                const st_tensor *wt = st_find(s, w);
                if (wt && wt->dtype == DT_U32) elems = 0;
            }
        }
        int mtp = 0;
        if (starts_with(t->name, "mtp.") || starts_with(t->name, "model.mtp.")) {
            mtp = 1;
            int li = layer_index(t->name, starts_with(t->name, "mtp.") ? "mtp." : "model.mtp.");
            if (li > qwen_mtp_max) qwen_mtp_max = li;
            if (ends_with(t->name, "mtp.fc.weight")) has_qwen_fc = 1;
        } else if (ds) {
            int li = layer_index(t->name, "model.");
            if (li >= c->n_layers) {
                mtp = 1;
                if (strstr(t->name, ".eh_proj.") && li - c->n_layers < 64 && !ds_seen[li - c->n_layers]) {
                    ds_seen[li - c->n_layers] = 1;
                    ds_mtp_layers++;
                }
            }
        }
        if (is_ignored(t->name)) {
            r->params_ignored += elems;
        } else if (mtp) {
            r->params_mtp += elems;
            r->mtp_bytes += t->nbytes;
        } else {
            r->params += elems;
        }
    }
    if (has_qwen_fc && qwen_mtp_max >= 0) {
        r->mtp = MTP_LAYOUT_QWEN;
        r->mtp_layers_found = qwen_mtp_max + 1;
    } else if (ds_mtp_layers > 0) {
        r->mtp = MTP_LAYOUT_DEEPSEEK;
        r->mtp_layers_found = ds_mtp_layers;
    }
}

static void estimate_memory(inspect_report *r) {
    const model_config *c = &r->cfg;
    size_t per_layer_tok; /* bytes of K+V per attention layer per position, fp32 */
    int heads, kw, vw;
    family_kv_shape_of(family_of(c->arch), c, &heads, &kw, &vw);
    per_layer_tok = mul_sat((size_t)heads, mul_sat(add_sat((size_t)kw, (size_t)vw), 4));
    for (int i = 0; i < c->n_layers; i++) {
        if (c->layer_kinds[i] == LAYER_ATTN) r->n_attn_layers++;
        else r->n_gdn_layers++;
    }
    r->kv_bytes_per_token = mul_sat(per_layer_tok, (size_t)r->n_attn_layers);
    r->kv_bytes = mul_sat(r->kv_bytes_per_token, (size_t)r->context);
    if (r->n_gdn_layers) {
        size_t conv_dim = add_sat(mul_sat(2 * (size_t)c->lin_k_heads, (size_t)c->lin_k_dim),
                                  mul_sat((size_t)c->lin_v_heads, (size_t)c->lin_v_dim));
        size_t conv = mul_sat(conv_dim, (size_t)(c->conv_kernel > 0 ? c->conv_kernel - 1 : 0));
        size_t rec = mul_sat(mul_sat((size_t)c->lin_v_heads, (size_t)c->lin_k_dim), (size_t)c->lin_v_dim);
        r->gdn_state_bytes = mul_sat(mul_sat(add_sat(conv, rec), 4), (size_t)r->n_gdn_layers);
    }
    if (r->mtp != MTP_LAYOUT_NONE)
        r->mtp_kv_bytes = mul_sat(mul_sat(per_layer_tok, (size_t)r->mtp_layers_found), (size_t)r->context);
    r->total_bytes = add_sat(add_sat(r->weight_bytes, r->kv_bytes), add_sat(r->gdn_state_bytes, r->mtp_kv_bytes));
}

/* "qwen3_5 / qwen3_5_text, qwen3_5_moe / ..., deepseek_v3": the runnable families' model_types in
 * table order (a static buffer, built once). */
static const char *supported_list(void) {
    static char list[512];
    if (list[0]) return list;
    size_t k = 0;
    for (int i = 0; i < family_count(); i++) {
        const model_family *f = family_at(i);
        for (int t = 0; f->runnable && t < FAMILY_MAX_TYPES && f->model_types[t] && k < sizeof list; t++)
            k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k == 0 ? "" : t == 0 ? ", " : " / ", f->model_types[t]);
    }
    return list;
}

int inspect_model(const char *dir, int context, inspect_report *r, mtplx_err *err) {
    memset(r, 0, sizeof *r);
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    r->context = context > 0 ? context : 4096;
    if (!file_is_dir(dir)) return set_tier(r, TIER_NOT_A_MODEL, "%s is not a directory", dir);
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path)
        return err_set(err, MTPLX_EINVAL, "%s: path too long", dir);
    if (!file_exists(path))
        return set_tier(r, TIER_NOT_A_MODEL, "no config.json in %s", dir);
    mtplx_err ce;
    err_clear(&ce);
    int rc = config_load(dir, &r->cfg, &ce);
    if (rc == MTPLX_EUNSUPPORTED) return set_tier(r, TIER_UNSUPPORTED, "%s", ce.msg);
    if (rc) {
        if (err) *err = ce;
        return rc;
    }
    r->has_config = 1;
    if (!has_weight_files(dir))
        return set_tier(r, TIER_NOT_A_MODEL, "config.json (%s%s%s) but no safetensors weights in %s",
                        r->cfg.model_type[0] ? "model_type \"" : "no model_type", r->cfg.model_type,
                        r->cfg.model_type[0] ? "\"" : "", dir);
    st_set *s = NULL;
    err_clear(&ce);
    rc = st_open_dir(dir, &s, &ce);
    if (rc == MTPLX_EUNSUPPORTED) return set_tier(r, TIER_UNSUPPORTED, "%s", ce.msg);
    if (rc) {
        if (err) *err = ce;
        return rc;
    }
    r->has_weights = 1;
    count_tensors(s, r);
    int has_embed = st_find(s, "model.embed_tokens.weight") || st_find(s, "model.language_model.embed_tokens.weight") ||
                    st_find(s, "language_model.model.embed_tokens.weight");
    st_close(s);

    const model_config *c = &r->cfg;
    if (c->arch != ARCH_UNKNOWN) estimate_memory(r);
    if (c->arch == ARCH_UNKNOWN)
        return set_tier(r, TIER_UNSUPPORTED, "unknown model_type \"%s\"%s%s%s; supported families: %s",
                        c->model_type[0] ? c->model_type : "(none)", c->architecture[0] ? " (" : "", c->architecture,
                        c->architecture[0] ? ")" : "", supported_list());
    rope_scaling_kind rk;
    err_clear(&ce);
    if (rope_scaling_kind_parse(c->rope_type, &rk, &ce) != 0)
        return set_tier(r, TIER_UNSUPPORTED, "%s", ce.msg);
    if (c->quant_method[0] && strcmp(c->quant_method, "mlx") != 0)
        return set_tier(r, TIER_UNSUPPORTED, "quantization method \"%s\" is not supported (MLX affine only)",
                        c->quant_method);
    if (!has_embed)
        return set_tier(r, TIER_UNSUPPORTED, "no token embedding (model.embed_tokens.weight, "
                        "model.language_model.embed_tokens.weight or language_model.model.embed_tokens.weight) "
                        "among the %d tensors", r->n_tensors);
    const model_family *sup = family_of(c->arch);
    if (!sup->runnable)
        return set_tier(r, TIER_UNSUPPORTED, "the %s forward is not implemented: %s", sup->name, sup->reason);
    int right_layout = (sup->mtp_layout == MTP_LAYOUT_DEEPSEEK) == (r->mtp == MTP_LAYOUT_DEEPSEEK);
    if (r->mtp == MTP_LAYOUT_NONE)
        return set_tier(r, TIER_AR_ONLY, "no MTP head in the weights%s%s%s",
                        c->mtp_layers ? " (config.json declares one, but its tensors are absent)" : "",
                        !sup->mtp && sup->reason[0] ? "; " : "", !sup->mtp ? sup->reason : "");
    if (!right_layout || c->mtp_layers == 0)
        return set_tier(r, TIER_AR_ONLY, "MTP tensors present but config.json declares no MTP layers");
    if (r->mtp_layers_found < c->mtp_layers)
        return set_tier(r, TIER_AR_ONLY, "MTP head incomplete: config.json declares %d layers, the weights hold %d",
                        c->mtp_layers, r->mtp_layers_found);
    if (!sup->mtp)
        return set_tier(r, TIER_AR_ONLY, "MTP head present but the %s MTP drafter is not implemented yet%s%s",
                        config_arch_name(c->arch), sup->reason[0] ? ": " : "", sup->reason);
    return set_tier(r, TIER_VERIFIED, "%s with its MTP head (%s layout, %d layer%s) as the drafter",
                    config_arch_name(c->arch), r->mtp == MTP_LAYOUT_QWEN ? "mtp.*" : "model.layers.N.*",
                    r->mtp_layers_found, r->mtp_layers_found == 1 ? "" : "s");
}

int inspect_require_runnable(const char *dir, model_tier *tier_out, mtplx_err *err) {
    inspect_report *r = calloc(1, sizeof *r);
    if (!r) return err_set(err, MTPLX_ENOMEM, "out of memory inspecting %s", dir);
    int rc = inspect_model(dir, 0, r, err);
    if (!rc) {
        if (tier_out) *tier_out = r->tier;
        if (r->tier == TIER_UNSUPPORTED)
            rc = err_set(err, MTPLX_EUNSUPPORTED, "%s: unsupported model: %s", dir, r->reason);
        else if (r->tier == TIER_NOT_A_MODEL)
            rc = err_set(err, MTPLX_EIO, "%s: not a model: %s", dir, r->reason);
    }
    free(r);
    return rc;
}

int inspect_confirm_load(inspect_report *r, mtplx_err *err) {
    if (r->tier != TIER_VERIFIED && r->tier != TIER_AR_ONLY) return 0;
    mtplx_model *m = NULL;
    mtplx_err le;
    err_clear(&le);
    int rc = model_load(r->dir, &m, &le);
    if (rc == MTPLX_EUNSUPPORTED) return set_tier(r, TIER_UNSUPPORTED, "%s", le.msg);
    if (rc) {
        if (err) *err = le;
        return rc;
    }
    if (r->tier == TIER_VERIFIED && !model_has_mtp(m))
        set_tier(r, TIER_AR_ONLY, "the loader did not bind the MTP head");
    model_free(m);
    return 0;
}
