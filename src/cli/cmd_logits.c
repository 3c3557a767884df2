/* cmd_logits.c — `mtplx logits`: the model's logits, post-norm hiddens and (with --mtp) MTP-head
 * logits for a token sequence, by one prefill forward or (--step) by single-token decode steps.
 * Written to a safetensors file (--out) or summarised on stdout (shape and argmax per row, or JSON).
 * Exit codes: 0 ok, 1 runtime error (model, forward, file), 2 usage error. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"
#include "../model/safetensors.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx logits [--model DIR] (--tokens 1,2,3 | --text T) [--mtp] [--step]\n"
            "                    [--out F.safetensors] [--json]\n"
            "\n"
            "Runs the model over the tokens and reports, for every row t, the next-token logits after\n"
            "tokens[0..t] and the post-final-norm hidden state.\n"
            "\n"
            "  --model DIR   checkpoint directory (default: %s)\n"
            "  --tokens IDS  comma-separated token ids\n"
            "  --text T      text, tokenized with DIR's tokenizer.json (no special tokens added)\n"
            "  --mtp         also the MTP head: row t = lm_head(MTP(embed(tokens[t+1]), hidden[t])) at MTP\n"
            "                position t, for t < T-1 (needs a checkpoint with mtp.* weights)\n"
            "  --step        compute the same rows by T single-token decode steps with the cache (and the\n"
            "                MTP rows one at a time) instead of one prefill forward\n"
            "  --out F       write tensors input_ids [T] i32, logits [T,V] f32, hidden [T,H] f32 and, with\n"
            "                --mtp, mtp_logits [T-1,V] f32 to the safetensors file F\n"
            "  --json        print a JSON summary instead of text\n"
            "\n"
            "Without --out, prints the shapes and the argmax of every row.\n"
            "Exit status: 0 ok, 1 runtime error (bad model, bad token id, write failure), 2 usage error.\n",
            cli_default_model());
}

/* Parse "1,2,3" into a malloc'd array; returns the count, or -1 with a message on bad input, or
 * -2 with a message when out of memory (a runtime error, not a usage error). */
static int parse_tokens(const char *s, int32_t **out) {
    int cap = 16, n = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) {
        cli_error("logits", "--tokens: out of memory");
        return -2;
    }
    const char *p = s;
    while (*p) {
        while (*p == ' ') p++;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            cli_error("logits", "--tokens: '%s' is not a comma-separated list of non-negative token ids", s);
            free(ids);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            int32_t *g = realloc(ids, sizeof *ids * (size_t)cap);
            if (!g) {
                free(ids);
                cli_error("logits", "--tokens: out of memory");
                return -2;
            }
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') {
            p++;
            if (!*p) break;
        } else if (*p) {
            cli_error("logits", "--tokens: unexpected '%c' in '%s'", *p, s);
            free(ids);
            return -1;
        }
    }
    if (n == 0) {
        cli_error("logits", "--tokens: no token ids given");
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

static int argmax_row(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Print s as a JSON string literal. */
static void print_json_str(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

static void print_argmax_json(const char *key, const float *l, int rows, int V) {
    printf(", \"%s\": [", key);
    for (int t = 0; t < rows; t++) printf("%s%d", t ? ", " : "", argmax_row(l + (size_t)t * V, V));
    printf("]");
}

typedef struct {
    const char *model, *tokens, *text, *out;
    int mtp, step, json;
} logits_args;

/* Compute logits/hidden (and MTP logits) into the caller's buffers. Returns 0 or 1 (message printed). */
static int compute(const mtplx_model *m, const logits_args *a, const int32_t *ids, int T, float *logits, float *hidden,
                   float *mtp_logits) {
    const model_config *c = model_config_of(m);
    int V = c->vocab_size, H = c->hidden_size;
    mtplx_err err = {0};
    model_state *s = NULL;
    int rc = 1;
    mtp_state *ms = NULL;
    float *mh = NULL;
    if (model_state_new(m, T, 1, &s, &err)) goto fail;
    if (a->step) {
        for (int t = 0; t < T; t++) {
            fwd_request req = {.logits = logits + (size_t)t * V, .hidden = hidden + (size_t)t * H};
            if (model_forward(m, s, ids + t, 1, &req, &err)) goto fail;
        }
    } else {
        fwd_request req = {.logits = logits, .hidden = hidden};
        if (model_forward(m, s, ids, T, &req, &err)) goto fail;
    }
    if (mtp_logits && T > 1) {
        if (mtp_state_new(m, T, &ms, &err)) goto fail;
        if (!(mh = malloc(sizeof(float) * (size_t)(T - 1) * H))) {
            err_set(&err, MTPLX_ENOMEM, "out of memory for MTP hiddens");
            goto fail;
        }
        if (a->step) {
            for (int t = 0; t + 1 < T; t++)
                if (model_mtp_forward(m, ms, hidden + (size_t)t * H, ids + t + 1, 1, mh + (size_t)t * H, &err))
                    goto fail;
        } else if (model_mtp_forward(m, ms, hidden, ids + 1, T - 1, mh, &err)) {
            goto fail;
        }
        if (model_lm_head(m, HEAD_MTP, mh, T - 1, mtp_logits, &err)) goto fail;
    }
    rc = 0;
fail:
    if (rc) cli_error("logits", "%s", err.msg);
    free(mh);
    mtp_state_free(ms);
    model_state_free(s);
    return rc;
}

int cmd_logits(int argc, char **argv) {
    logits_args a = {0};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(o, "--mtp")) a.mtp = 1;
        else if (!strcmp(o, "--step")) a.step = 1;
        else if (!strcmp(o, "--json")) a.json = 1;
        else if (!strcmp(o, "--model") && has_val) a.model = argv[++i];
        else if (!strcmp(o, "--tokens") && has_val) a.tokens = argv[++i];
        else if (!strcmp(o, "--text") && has_val) a.text = argv[++i];
        else if (!strcmp(o, "--out") && has_val) a.out = argv[++i];
        else {
            int takes_val = !strcmp(o, "--model") || !strcmp(o, "--tokens") || !strcmp(o, "--text") || !strcmp(o, "--out");
            cli_error("logits", "%s '%s' (see mtplx logits --help)", takes_val ? "missing value for" : "unknown option", o);
            return 2;
        }
    }
    if (!!a.tokens + !!a.text != 1) {
        cli_error("logits", "give exactly one of --tokens or --text (see mtplx logits --help)");
        return 2;
    }
    const char *dir = a.model ? a.model : cli_default_model();
    mtplx_err err = {0};
    int32_t *ids = NULL;
    int T;
    if (a.text) { /* tokenized with the model directory's tokenizer.json, no special tokens added */
        tokenizer *tok = NULL;
        if (tok_load(dir, &tok, &err)) {
            cli_error("logits", "--text: %s", err.msg);
            return 1;
        }
        int rc = tok_encode(tok, a.text, strlen(a.text), &ids, &T, &err);
        tok_free(tok);
        if (rc) {
            cli_error("logits", "--text: %s", err.msg);
            return 1;
        }
        if (T == 0) {
            cli_error("logits", "--text: the text gives no tokens");
            free(ids);
            return 2;
        }
    } else if ((T = parse_tokens(a.tokens, &ids)) < 0) {
        return T == -2 ? 1 : 2;
    }
    if (a.mtp && T < 2) {
        cli_error("logits", "--mtp needs at least 2 tokens (row t pairs hidden t with token t+1)");
        free(ids);
        return 2;
    }
    mtplx_model *m = NULL;
    if (model_load(dir, &m, &err)) {
        cli_error("logits", "%s", err.msg);
        free(ids);
        return 1;
    }
    cli_load_note("logits", m);
    if (a.mtp && !model_has_mtp(m)) {
        cli_error("logits", "%s: --mtp: the checkpoint has no MTP head (mtp.* weights)", dir);
        model_free(m);
        free(ids);
        return 1;
    }
    const model_config *c = model_config_of(m);
    int V = c->vocab_size, H = c->hidden_size, rc = 1;
    float *logits = malloc(sizeof(float) * (size_t)T * V), *hidden = malloc(sizeof(float) * (size_t)T * H);
    float *mtp_logits = a.mtp ? malloc(sizeof(float) * (size_t)(T - 1) * V) : NULL;
    if (!logits || !hidden || (a.mtp && !mtp_logits)) {
        cli_error("logits", "out of memory for %d x %d logits", T, V);
        goto done;
    }
    if (compute(m, &a, ids, T, logits, hidden, mtp_logits)) goto done;
    if (a.out) {
        st_write_item items[4] = {
            {"input_ids", DT_I32, 1, {T}, ids},
            {"logits", DT_F32, 2, {T, V}, logits},
            {"hidden", DT_F32, 2, {T, H}, hidden},
            {"mtp_logits", DT_F32, 2, {T - 1, V}, mtp_logits},
        };
        if (st_write_file(a.out, items, a.mtp ? 4 : 3,
                          a.step ? "{\"mode\": \"step\"}" : "{\"mode\": \"prefill\"}", &err)) {
            cli_error("logits", "%s", err.msg);
            goto done;
        }
    }
    if (a.json) {
        printf("{\"model\": ");
        print_json_str(dir);
        printf(", \"mode\": \"%s\", \"tokens\": %d, \"vocab\": %d, \"hidden_size\": %d", a.step ? "step" : "prefill", T,
               V, H);
        if (a.out) {
            printf(", \"out\": ");
            print_json_str(a.out);
        }
        printf(", \"ids\": [");
        for (int t = 0; t < T; t++) printf("%s%d", t ? ", " : "", ids[t]);
        printf("]");
        print_argmax_json("argmax", logits, T, V);
        if (a.mtp) print_argmax_json("mtp_argmax", mtp_logits, T - 1, V);
        printf("}\n");
    } else {
        printf("%s: %d tokens, %s\n", dir, T, a.step ? "stepwise decode" : "one prefill forward");
        printf("logits [%d, %d], hidden [%d, %d]%s", T, V, T, H, a.mtp ? "" : "\n");
        if (a.mtp) printf(", mtp_logits [%d, %d]\n", T - 1, V);
        if (a.out) printf("wrote %s\n", a.out);
        printf("argmax:");
        for (int t = 0; t < T; t++) printf(" %d", argmax_row(logits + (size_t)t * V, V));
        printf("\n");
        if (a.mtp) {
            printf("mtp argmax:");
            for (int t = 0; t + 1 < T; t++) printf(" %d", argmax_row(mtp_logits + (size_t)t * V, V));
            printf("\n");
        }
    }
    rc = 0;
done:
    free(logits);
    free(hidden);
    free(mtp_logits);
    free(ids);
    model_free(m);
    return rc;
}
