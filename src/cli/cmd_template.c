/* cmd_template.c — `mtplx template`: render an OpenAI chat request with the model's chat template
 * and print the prompt, or with --json {"prompt": ..., "ids": [...]} where ids are the rendered
 * prompt encoded as HF does (special tokens written in the prompt are recognised, none are added).
 * Works on a directory that holds only tokenizer files.
 * Exit codes: 0 ok, 1 runtime error (bad request, template error, missing files), 2 usage error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../base/file.h"
#include "../chat/chat.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx template [--model DIR] --request F.json [--json]\n"
            "\n"
            "Renders an OpenAI chat-completions request body (messages, tools, chat_template_kwargs,\n"
            "add_generation_prompt, continue_final_message) with the chat template of DIR\n"
            "(chat_template.jinja or tokenizer_config.json), as HF apply_chat_template does after\n"
            "vLLM's request adaptation, and prints the prompt exactly (no trailing newline added).\n"
            "\n"
            "  --model DIR     model or tokenizer directory (default: %s)\n"
            "  --request F     the request JSON file ('-' reads stdin)\n"
            "  --json          print {\"prompt\": \"...\", \"ids\": [...]} with the prompt's token ids\n"
            "\n"
            "Exit status: 0 ok, 1 runtime error (bad request, template error), 2 usage error.\n",
            cli_default_model());
}

static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    if (!b) return NULL;
    for (;;) {
        if (n == cap) {
            char *g = realloc(b, cap * 2);
            if (!g) { free(b); return NULL; }
            b = g;
            cap *= 2;
        }
        size_t k = fread(b + n, 1, cap - n, stdin);
        n += k;
        if (k == 0) break;
    }
    *len = n;
    return b;
}

/* The prompt's ids as HF encodes the rendered chat (add_special_tokens=False: special tokens
 * written in the prompt are matched, none are added). *ids is malloc'd. */
static int encode_prompt(const char *model, const char *prompt, size_t len, int32_t **ids, int *n, mtplx_err *err) {
    tokenizer *tok = NULL;
    int rc = tok_load(model, &tok, err);
    if (rc) return rc;
    rc = tok_encode(tok, prompt, len, ids, n, err);
    tok_free(tok);
    return rc;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *request = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if ((!strcmp(a, "--model") || !strcmp(a, "--request")) && i + 1 < argc) {
            if (a[2] == 'm') model = argv[++i];
            else request = argv[++i];
        } else {
            cli_error("template", "unknown or incomplete option '%s'", a);
            usage(stderr);
            return 2;
        }
    }
    if (!request) {
        cli_error("template", "--request F.json is required");
        usage(stderr);
        return 2;
    }
    if (!model) model = cli_default_model();

    mtplx_err err = {0};
    size_t body_len = 0;
    char *body = !strcmp(request, "-") ? read_stdin(&body_len) : file_read_all(request, &body_len, &err);
    if (!body) {
        cli_error("template", "%s", err.msg[0] ? err.msg : "cannot read the request");
        return 1;
    }
    chat_template *ct = NULL;
    if (chat_template_load(model, &ct, &err)) {
        cli_error("template", "%s", err.msg);
        free(body);
        return 1;
    }
    char *prompt = NULL;
    size_t plen = 0;
    int rc = chat_render_json(ct, body, body_len, NULL, &prompt, &plen, &err);
    free(body);
    chat_template_free(ct);
    if (rc) {
        cli_error("template", "%s", err.msg);
        return 1;
    }
    if (!json) {
        fwrite(prompt, 1, plen, stdout);
        free(prompt);
        return 0;
    }
    int32_t *ids = NULL;
    int n = 0;
    if (encode_prompt(model, prompt, plen, &ids, &n, &err)) {
        cli_error("template", "tokenizing the prompt: %s", err.msg);
        free(prompt);
        return 1;
    }
    json_t *o = json_object(), *arr = json_array();
    json_object_set_new(o, "prompt", json_stringn(prompt, plen));
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
    json_object_set_new(o, "ids", arr);
    char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(o);
    free(ids);
    free(prompt);
    if (!s) {
        cli_error("template", "out of memory");
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}
