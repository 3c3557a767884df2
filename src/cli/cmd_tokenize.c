/* cmd_tokenize.c — `mtplx tokenize` and `mtplx detokenize`: text <-> token ids with the tokenizer
 * of a model directory (a directory holding only tokenizer.json / tokenizer_config.json is enough).
 * Exit codes: 0 ok, 1 runtime error (tokenizer files, invalid UTF-8, bad id), 2 usage error. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"

static void tokenize_usage(FILE *f) {
    fprintf(f,
            "usage: mtplx tokenize [--model DIR] (--text T | --file F) [--json] [--tokenizer-json-only]\n"
            "\n"
            "Encodes text to token ids exactly like Hugging Face transformers'\n"
            "tokenizer.encode(text, add_special_tokens=False): special tokens written in the text are\n"
            "recognised, none are added.\n"
            "\n"
            "  --model DIR            model or tokenizer directory (default: %s)\n"
            "  --text T               the text (UTF-8)\n"
            "  --file F               read the text from file F ('-' for stdin)\n"
            "  --json                 print {\"ids\": [...]} instead of comma-separated ids\n"
            "  --tokenizer-json-only  use tokenizer.json as written, without the pipeline transformers 5\n"
            "                         rebuilds for some tokenizer_class values (docs/tokenizer.md)\n"
            "\n"
            "Exit status: 0 ok, 1 runtime error (tokenizer files, invalid UTF-8), 2 usage error.\n",
            cli_default_model());
}

static void detokenize_usage(FILE *f) {
    fprintf(f,
            "usage: mtplx detokenize [--model DIR] --ids 1,2,3 [--skip-special] [--json]\n"
            "                        [--tokenizer-json-only]\n"
            "\n"
            "Decodes token ids to text like transformers' tokenizer.decode(ids): bytes that do not form\n"
            "valid UTF-8 become U+FFFD.\n"
            "\n"
            "  --model DIR            model or tokenizer directory (default: %s)\n"
            "  --ids IDS              comma-separated token ids (optionally in [ ])\n"
            "  --skip-special         drop special tokens (skip_special_tokens=True)\n"
            "  --json                 print {\"text\": \"...\"} instead of the raw text\n"
            "  --tokenizer-json-only  use tokenizer.json as written (see mtplx tokenize --help)\n"
            "\n"
            "Exit status: 0 ok, 1 runtime error (tokenizer files, id outside the vocabulary), 2 usage error.\n",
            cli_default_model());
}

/* Read all of stdin into a malloc'd buffer; NULL on failure. */
static char *read_stdin(size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    for (;;) {
        if (n == cap) {
            char *g = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
            if (!g) { free(buf); return NULL; }
            buf = g;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n, stdin);
        n += r;
        if (r == 0) break;
    }
    if (ferror(stdin)) { free(buf); return NULL; }
    *len = n;
    return buf;
}

static int load(const char *cmd, const char *dir, unsigned flags, tokenizer **t) {
    mtplx_err err = {0};
    if (tok_load_ex(dir, flags, t, &err)) {
        cli_error(cmd, "%s", err.msg);
        return 1;
    }
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL;
    int json = 0;
    unsigned flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { tokenize_usage(stdout); return 0; }
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--tokenizer-json-only")) flags |= TOK_LOAD_FILE_ONLY;
        else if ((!strcmp(a, "--model") || !strcmp(a, "--text") || !strcmp(a, "--file")) && i + 1 < argc) {
            const char **dst = !strcmp(a, "--model") ? &model : !strcmp(a, "--text") ? &text : &file;
            *dst = argv[++i];
        } else {
            cli_error("tokenize", "%s '%s' (see mtplx tokenize --help)",
                      (!strcmp(a, "--model") || !strcmp(a, "--text") || !strcmp(a, "--file")) ? "missing value for" : "unknown option", a);
            return 2;
        }
    }
    if (!!text == !!file) {
        cli_error("tokenize", "give exactly one of --text or --file (see mtplx tokenize --help)");
        return 2;
    }
    size_t len = 0;
    char *owned = NULL;
    if (file) {
        if (!strcmp(file, "-")) owned = read_stdin(&len);
        else {
            mtplx_err err = {0};
            owned = file_read_all(file, &len, &err);
            if (!owned) { cli_error("tokenize", "%s", err.msg); return 1; }
        }
        if (!owned) { cli_error("tokenize", "cannot read stdin"); return 1; }
        text = owned;
    } else len = strlen(text);

    tokenizer *t;
    if (load("tokenize", model ? model : cli_default_model(), flags, &t)) { free(owned); return 1; }
    int32_t *ids = NULL;
    int n = 0;
    mtplx_err err = {0};
    int rc = tok_encode(t, text, len, &ids, &n, &err);
    if (rc) cli_error("tokenize", "%s", err.msg);
    else if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(arr, json_integer(ids[i]));
        json_t *obj = json_pack("{s:o}", "ids", arr);
        char *s = obj ? json_dumps(obj, 0) : NULL;
        if (s) printf("%s\n", s);
        else { cli_error("tokenize", "out of memory"); rc = 1; }
        free(s);
        json_decref(obj);
    } else {
        for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    free(owned);
    tok_free(t);
    return rc ? 1 : 0;
}

/* Parse "1,2,3" (optionally "[1, 2, 3]") into a malloc'd array; returns the count or -1. */
static int parse_ids(const char *s, int32_t **out) {
    int cap = 16, n = 0;
    int32_t *ids = malloc(sizeof *ids * (size_t)cap);
    if (!ids) return -1;
    const char *p = s;
    while (*p == ' ') p++;
    int bracket = *p == '[';
    if (bracket) p++;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (!*p || (bracket && *p == ']')) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < INT32_MIN || v > INT32_MAX) {
            cli_error("detokenize", "--ids: '%s' is not a comma-separated list of token ids", s);
            free(ids);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            int32_t *g = realloc(ids, sizeof *ids * (size_t)cap);
            if (!g) { free(ids); return -1; }
            ids = g;
        }
        ids[n++] = (int32_t)v;
        p = end;
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        if (*p == ',') p++;
        else if (*p && !(bracket && *p == ']')) {
            cli_error("detokenize", "--ids: unexpected '%c' in '%s'", *p, s);
            free(ids);
            return -1;
        }
    }
    if (bracket && *p != ']') {
        cli_error("detokenize", "--ids: missing ']' in '%s'", s);
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL, *ids_s = NULL;
    int json = 0, skip = 0;
    unsigned flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { detokenize_usage(stdout); return 0; }
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--skip-special")) skip = 1;
        else if (!strcmp(a, "--tokenizer-json-only")) flags |= TOK_LOAD_FILE_ONLY;
        else if ((!strcmp(a, "--model") || !strcmp(a, "--ids")) && i + 1 < argc) {
            if (!strcmp(a, "--model")) model = argv[++i];
            else ids_s = argv[++i];
        } else {
            cli_error("detokenize", "%s '%s' (see mtplx detokenize --help)",
                      (!strcmp(a, "--model") || !strcmp(a, "--ids")) ? "missing value for" : "unknown option", a);
            return 2;
        }
    }
    if (!ids_s) {
        cli_error("detokenize", "--ids is required (see mtplx detokenize --help)");
        return 2;
    }
    int32_t *ids;
    int n = parse_ids(ids_s, &ids);
    if (n < 0) return 2;
    tokenizer *t;
    if (load("detokenize", model ? model : cli_default_model(), flags, &t)) { free(ids); return 1; }
    char *text = NULL;
    size_t len = 0;
    mtplx_err err = {0};
    int rc = tok_decode(t, ids, n, skip, &text, &len, &err);
    if (rc) cli_error("detokenize", "%s", err.msg);
    else if (json) {
        json_t *obj = json_pack("{s:s%}", "text", text, len);
        char *s = obj ? json_dumps(obj, 0) : NULL;
        if (s) printf("%s\n", s);
        else { cli_error("detokenize", "out of memory"); rc = 1; }
        free(s);
        json_decref(obj);
    } else
        fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    tok_free(t);
    return rc ? 1 : 0;
}
