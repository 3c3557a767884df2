/* cmd_inspect.c — `mtplx inspect`: describe a checkpoint and its compatibility tier.
 *
 * Exit status carries the tier so scripts can branch on it (docs/cli.md): 0 verified, 10 ar-only,
 * 20 unsupported, 30 not-a-model, 1 error (a malformed file), 2 usage. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/inspect.h"
#include "commands.h"

static const char k_help[] =
    "usage: mtplx inspect [--model DIR] [--context N] [--json]\n"
    "\n"
    "Describe a checkpoint: architecture, parameter count, dtypes and quantization, MTP head, the\n"
    "memory for weights and for the KV / Gated DeltaNet state cache at N positions, and the\n"
    "compatibility tier with its reason. Reads config.json and the safetensors headers only.\n"
    "\n"
    "  --model DIR    checkpoint directory (default: the embedded model)\n"
    "  --context N    positions for the cache memory estimate (default 4096)\n"
    "  --json         one JSON object on stdout\n"
    "\n"
    "tiers and exit status:\n"
    "  0   verified     runs, with its MTP head as the speculative drafter\n"
    "  10  ar-only      runs autoregressively (no MTP head, or no MTP support for the family)\n"
    "  20  unsupported  refused; the reason names what is missing\n"
    "  30  not-a-model  refused; no config.json or no weights\n"
    "  1   error        a file is malformed (the message names file and field/tensor)\n"
    "  2   usage error\n";

static int tier_exit(model_tier t) {
    switch (t) {
    case TIER_VERIFIED: return 0;
    case TIER_AR_ONLY: return 10;
    case TIER_UNSUPPORTED: return 20;
    default: return 30;
    }
}

static const char *mtp_layout_name(mtp_layout l) {
    return l == MTP_LAYOUT_QWEN ? "mtp.*" : l == MTP_LAYOUT_DEEPSEEK ? "model.layers.N.*" : NULL;
}

/* "46.3 MB" style, decimal units. */
static void fmt_bytes(char *buf, size_t cap, size_t b) {
    const char *u[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    double v = (double)b;
    int i = 0;
    while (v >= 1000 && i < 5) {
        v /= 1000;
        i++;
    }
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

static void fmt_params(char *buf, size_t cap, int64_t p) {
    if (p >= 1000000000) snprintf(buf, cap, "%.2f B", p / 1e9);
    else if (p >= 1000000) snprintf(buf, cap, "%.1f M", p / 1e6);
    else snprintf(buf, cap, "%lld", (long long)p);
}

static json_t *report_json(const inspect_report *r) {
    const model_config *c = &r->cfg;
    json_t *o = json_object();
    json_object_set_new(o, "model", json_string(r->dir));
    json_object_set_new(o, "tier", json_string(inspect_tier_name(r->tier)));
    json_object_set_new(o, "reason", json_string(r->reason));
    json_object_set_new(o, "exit_code", json_integer(tier_exit(r->tier)));
    if (!r->has_config) return o;
    json_object_set_new(o, "architecture", json_string(c->architecture));
    json_object_set_new(o, "model_type", json_string(c->model_type));
    json_object_set_new(o, "family", json_string(config_arch_name(c->arch)));
    if (!r->has_weights) return o;
    json_object_set_new(o, "params", json_integer(r->params));
    json_object_set_new(o, "params_mtp", json_integer(r->params_mtp));
    json_object_set_new(o, "params_ignored", json_integer(r->params_ignored));
    json_object_set_new(o, "tensors", json_integer(r->n_tensors));
    json_t *dt = json_object();
    for (int i = 0; i < DT_COUNT; i++)
        if (r->dtype_tensors[i]) {
            json_t *e = json_object();
            json_object_set_new(e, "tensors", json_integer(r->dtype_tensors[i]));
            json_object_set_new(e, "bytes", json_integer((json_int_t)r->dtype_bytes[i]));
            json_object_set_new(dt, dtype_name((mtplx_dtype)i), e);
        }
    json_object_set_new(o, "dtypes", dt);
    if (c->quant_method[0]) {
        json_t *q = json_object();
        json_object_set_new(q, "method", json_string(c->quant_method));
        json_object_set_new(q, "bits", json_integer(c->quant_bits));
        json_object_set_new(q, "group_size", json_integer(c->quant_group_size));
        json_object_set_new(q, "overrides", json_integer(c->n_quant_overrides));
        json_object_set_new(o, "quantization", q);
    } else {
        json_object_set_new(o, "quantization", json_null());
    }
    json_t *m = json_object();
    json_object_set_new(m, "present", json_boolean(r->mtp != MTP_LAYOUT_NONE));
    const char *lay = mtp_layout_name(r->mtp);
    json_object_set_new(m, "layout", lay ? json_string(lay) : json_null());
    json_object_set_new(m, "layers", json_integer(r->mtp_layers_found));
    json_object_set_new(m, "config_layers", json_integer(c->mtp_layers));
    json_object_set_new(o, "mtp", m);
    if (c->arch != ARCH_UNKNOWN) {
        json_t *s = json_object();
        json_object_set_new(s, "vocab_size", json_integer(c->vocab_size));
        json_object_set_new(s, "hidden_size", json_integer(c->hidden_size));
        json_object_set_new(s, "layers", json_integer(c->n_layers));
        json_object_set_new(s, "attention_layers", json_integer(r->n_attn_layers));
        json_object_set_new(s, "gdn_layers", json_integer(r->n_gdn_layers));
        json_object_set_new(s, "heads", json_integer(c->n_heads));
        json_object_set_new(s, "kv_heads", json_integer(c->n_kv_heads));
        json_object_set_new(s, "head_dim", json_integer(c->head_dim));
        json_object_set_new(s, "experts", json_integer(c->n_experts));
        json_object_set_new(s, "experts_per_token", json_integer(c->n_experts_per_tok));
        json_object_set_new(s, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
        json_object_set_new(s, "rope_type", json_string(c->rope_type));
        json_object_set_new(o, "shape", s);
        json_t *mem = json_object();
        json_object_set_new(mem, "context", json_integer(r->context));
        json_object_set_new(mem, "weights_bytes", json_integer((json_int_t)r->weight_bytes));
        json_object_set_new(mem, "kv_bytes_per_token", json_integer((json_int_t)r->kv_bytes_per_token));
        json_object_set_new(mem, "kv_cache_bytes", json_integer((json_int_t)r->kv_bytes));
        json_object_set_new(mem, "gdn_state_bytes", json_integer((json_int_t)r->gdn_state_bytes));
        json_object_set_new(mem, "mtp_kv_bytes", json_integer((json_int_t)r->mtp_kv_bytes));
        json_object_set_new(mem, "total_bytes", json_integer((json_int_t)r->total_bytes));
        json_object_set_new(o, "memory", mem);
    }
    return o;
}

static void report_text(const inspect_report *r) {
    const model_config *c = &r->cfg;
    char a[64], b[64], d[64], e[64], f[64];
    printf("model         %s\n", r->dir);
    printf("tier          %s: %s\n", inspect_tier_name(r->tier), r->reason);
    if (!r->has_config) return;
    printf("architecture  %s (model_type %s, family %s)\n", c->architecture[0] ? c->architecture : "-",
           c->model_type[0] ? c->model_type : "-", config_arch_name(c->arch));
    if (!r->has_weights) return;
    fmt_params(a, sizeof a, r->params);
    fmt_params(b, sizeof b, r->params_mtp);
    printf("parameters    %s trunk + %s MTP", a, b);
    if (r->params_ignored) {
        fmt_params(d, sizeof d, r->params_ignored);
        printf(" (+ %s ignored: vision)", d);
    }
    printf("\n");
    printf("tensors       %d:", r->n_tensors);
    for (int i = 0; i < DT_COUNT; i++)
        if (r->dtype_tensors[i]) {
            fmt_bytes(a, sizeof a, r->dtype_bytes[i]);
            printf(" %s %d (%s)", dtype_name((mtplx_dtype)i), r->dtype_tensors[i], a);
        }
    printf("\n");
    if (c->quant_method[0] && strcmp(c->quant_method, "mlx") == 0)
        printf("quantization  MLX affine %d-bit, group %d, %d per-module overrides\n", c->quant_bits, c->quant_group_size,
               c->n_quant_overrides);
    else if (c->quant_method[0])
        printf("quantization  %s\n", c->quant_method);
    else
        printf("quantization  none\n");
    if (r->mtp != MTP_LAYOUT_NONE)
        printf("MTP head      present: %s layout, %d layer(s) (config declares %d)\n", mtp_layout_name(r->mtp),
               r->mtp_layers_found, c->mtp_layers);
    else
        printf("MTP head      absent (config declares %d)\n", c->mtp_layers);
    if (c->arch == ARCH_UNKNOWN) return;
    printf("shape         vocab %d, hidden %d, %d layers (%d attention + %d Gated DeltaNet), %d heads / %d KV, head_dim %d",
           c->vocab_size, c->hidden_size, c->n_layers, r->n_attn_layers, r->n_gdn_layers, c->n_heads, c->n_kv_heads,
           c->head_dim);
    if (c->n_experts) printf(", %d experts top-%d", c->n_experts, c->n_experts_per_tok);
    printf(", rope %s\n", c->rope_type);
    fmt_bytes(a, sizeof a, r->weight_bytes);
    fmt_bytes(b, sizeof b, r->kv_bytes);
    fmt_bytes(d, sizeof d, r->kv_bytes_per_token);
    fmt_bytes(e, sizeof e, r->gdn_state_bytes);
    fmt_bytes(f, sizeof f, r->mtp_kv_bytes);
    printf("memory        weights %s; at %d positions (fp32): KV cache %s (%s/position), GDN state %s, MTP KV %s",
           a, r->context, b, d, e, f);
    fmt_bytes(a, sizeof a, r->total_bytes);
    printf("; total %s\n", a);
}

int cmd_inspect(int argc, char **argv) {
    const char *dir = NULL;
    int json = 0;
    long context = 4096;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            fputs(k_help, stdout);
            return 0;
        } else if (!strcmp(o, "--json")) {
            json = 1;
        } else if (!strcmp(o, "--model") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(o, "--context") && i + 1 < argc) {
            char *end;
            context = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || context < 1 || context > (1L << 30)) {
                cli_error("inspect", "--context wants a positive integer up to 2^30, got \"%s\"", argv[i]);
                return 2;
            }
        } else {
            cli_error("inspect", "unknown or incomplete option \"%s\" (see mtplx inspect --help)", o);
            return 2;
        }
    }
    if (!dir) dir = cli_default_model();
    inspect_report *r = calloc(1, sizeof *r);
    if (!r) {
        cli_error("inspect", "out of memory");
        return 1;
    }
    mtplx_err err;
    err_clear(&err);
    if (inspect_model(dir, (int)context, r, &err) != 0 || inspect_confirm_load(r, &err) != 0) {
        cli_error("inspect", "%s", err.msg);
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "model", json_string(dir));
            json_object_set_new(o, "error", json_string(err.msg));
            json_object_set_new(o, "exit_code", json_integer(1));
            json_dumpf(o, stdout, JSON_INDENT(2));
            fputc('\n', stdout);
            json_decref(o);
        }
        free(r);
        return 1;
    }
    if (json) {
        json_t *o = report_json(r);
        json_dumpf(o, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(o);
    } else {
        report_text(r);
    }
    int rc = tier_exit(r->tier);
    free(r);
    return rc;
}
