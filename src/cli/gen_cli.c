/* gen_cli.c — see gen_cli.h. */
#include "gen_cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/file.h"
#include "../engine/tune.h"
#include "commands.h"

int cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        cli_error(cmd, "%s needs an integer in [%ld, %ld], got '%s'", flag, lo, hi, s ? s : "(nothing)");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = s && *s != '-' ? strtoull(s, &end, 10) : 0;
    if (!s || !*s || *s == '-' || *end || errno) {
        cli_error(cmd, "%s needs a non-negative integer, got '%s'", flag, s ? s : "(nothing)");
        return -1;
    }
    *out = v;
    return 0;
}

int cli_parse_float(const char *cmd, const char *flag, const char *s, float *out) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v)) {
        cli_error(cmd, "%s needs a number, got '%s'", flag, s ? s : "(nothing)");
        return -1;
    }
    *out = (float)v;
    return 0;
}

int cli_parse_ids(const char *cmd, const char *flag, const char *s, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    if (!s || !*s) {
        cli_error(cmd, "%s needs a comma-separated list of token ids", flag);
        return -1;
    }
    size_t cap = 1;
    for (const char *c = s; *c; c++) cap += *c == ',';
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    int k = 0;
    const char *c = s;
    for (;;) {
        char *end;
        errno = 0;
        long x = strtol(c, &end, 10);
        if (end == c || errno || x < 0 || x > INT32_MAX || (*end && *end != ',')) {
            cli_error(cmd, "%s: '%s' is not a list of non-negative token ids", flag, s);
            free(v);
            return -1;
        }
        v[k++] = (int32_t)x;
        if (!*end) break;
        c = end + 1;
    }
    *ids = v;
    *n = k;
    return 0;
}

int cli_sampler_flag(const char *cmd, int argc, char **argv, int *i, gen_params *p, unsigned *set) {
    const char *f = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long l;
    int rc = 0;
    unsigned bit;
    if (!strcmp(f, "--temperature")) rc = cli_parse_float(cmd, f, v, &p->temperature), bit = CLI_SET_TEMPERATURE;
    else if (!strcmp(f, "--top-p")) rc = cli_parse_float(cmd, f, v, &p->top_p), bit = CLI_SET_TOP_P;
    else if (!strcmp(f, "--min-p")) rc = cli_parse_float(cmd, f, v, &p->min_p), bit = CLI_SET_MIN_P;
    else if (!strcmp(f, "--presence-penalty")) rc = cli_parse_float(cmd, f, v, &p->presence_penalty), bit = CLI_SET_PRESENCE;
    else if (!strcmp(f, "--frequency-penalty")) rc = cli_parse_float(cmd, f, v, &p->frequency_penalty), bit = CLI_SET_FREQUENCY;
    else if (!strcmp(f, "--repetition-penalty")) rc = cli_parse_float(cmd, f, v, &p->repetition_penalty), bit = CLI_SET_REPETITION;
    else if (!strcmp(f, "--draft-min-conf")) rc = cli_parse_float(cmd, f, v, &p->draft_min_conf), bit = CLI_SET_DRAFT_MIN_CONF;
    else if (!strcmp(f, "--top-k")) {
        rc = cli_parse_long(cmd, f, v, 0, INT_MAX, &l), bit = CLI_SET_TOP_K;
        if (!rc) p->top_k = (int)l;
    } else if (!strcmp(f, "--max-tokens")) {
        rc = cli_parse_long(cmd, f, v, 1, 1 << 24, &l), bit = CLI_SET_MAX_TOKENS;
        if (!rc) p->max_tokens = (int)l;
    } else
        return 0;
    if (rc) return -1;
    if (set) *set |= bit;
    (*i)++;
    return 1;
}

void cli_sampler_apply(gen_params *dst, const gen_params *flags, unsigned set) {
    if (set & CLI_SET_TEMPERATURE) dst->temperature = flags->temperature;
    if (set & CLI_SET_TOP_P) dst->top_p = flags->top_p;
    if (set & CLI_SET_TOP_K) dst->top_k = flags->top_k;
    if (set & CLI_SET_MIN_P) dst->min_p = flags->min_p;
    if (set & CLI_SET_PRESENCE) dst->presence_penalty = flags->presence_penalty;
    if (set & CLI_SET_FREQUENCY) dst->frequency_penalty = flags->frequency_penalty;
    if (set & CLI_SET_REPETITION) dst->repetition_penalty = flags->repetition_penalty;
    if (set & CLI_SET_MAX_TOKENS) dst->max_tokens = flags->max_tokens;
    if (set & CLI_SET_DRAFT_MIN_CONF) dst->draft_min_conf = flags->draft_min_conf;
}

/* The text bench prompts are cut from (cli_bench_prompts' order) into path (n bytes). Returns 0, or -1
 * with a message. A checkpoint without val_code.txt (any real one) falls back to the embedded model's
 * code sample, said on stderr: the prompts then come from another text than the model's own. */
static int prompts_source(const char *cmd, const char *model_dir, const char *file, char *path, size_t n) {
    if (file) {
        snprintf(path, n, "%s", file);
        if (file_exists(path) && !file_is_dir(path)) return 0;
        return cli_error(cmd, "--prompts-file %s: no such file", file), -1;
    }
    snprintf(path, n, "%s/val_code.txt", model_dir);
    if (file_exists(path)) return 0;
    if (cli_embedded_file("val_code.txt", path, n) == 0) {
        fprintf(stderr, "mtplx %s: %s has no val_code.txt: prompts are cut from the embedded model's code sample %s "
                "(--prompts-file F for another text)\n", cmd, model_dir, path);
        return 0;
    }
    cli_error(cmd, "%s has no val_code.txt and the embedded model's code sample is not installed: pass "
              "--prompts-file F (any UTF-8 text; the prompts are cut from it)", model_dir);
    return -1;
}

int cli_bench_prompts(const char *cmd, const char *model_dir, const char *file, const tokenizer *tok, int n,
                      int target_tokens, int32_t ***prompts, int **lens, char *src_path, size_t src_n) {
    char path[PATH_MAX + 64];
    if (prompts_source(cmd, model_dir, file, path, sizeof path)) return -1;
    if (src_path && src_n) snprintf(src_path, src_n, "%s", path);
    mtplx_err err;
    err_clear(&err);
    size_t len;
    char *text = file_read_all(path, &len, &err);
    if (!text) {
        cli_error(cmd, "%s (the text bench prompts are cut from)", err.msg);
        return -1;
    }
    int32_t **P = calloc((size_t)n, sizeof *P);
    int *L = calloc((size_t)n, sizeof *L);
    int rc = P && L ? 0 : -1;
    /* Each prompt: starting at the first line start after offset i*len/n, about 5 bytes per target
     * token of text, then the token ids truncated to target_tokens. */
    for (int i = 0; i < n && !rc; i++) {
        size_t off = (size_t)((double)i * len / n);
        while (off > 0 && off < len && text[off - 1] != '\n') off++;
        size_t want = (size_t)target_tokens * 6 + 64;
        if (off + want > len) want = len - off;
        while (want > 0 && off + want < len && ((unsigned char)text[off + want] & 0xC0) == 0x80)
            want--; /* end on a UTF-8 character boundary */
        int32_t *ids;
        int m;
        if (tok_encode(tok, text + off, want, &ids, &m, &err)) {
            cli_error(cmd, "%s: encoding prompt %d: %s", path, i, err.msg);
            rc = -1;
            break;
        }
        if (m > target_tokens) m = target_tokens;
        if (m < 1) {
            free(ids);
            cli_error(cmd, "%s: prompt %d is empty", path, i);
            rc = -1;
            break;
        }
        P[i] = ids;
        L[i] = m;
    }
    free(text);
    if (rc) {
        cli_free_prompts(P, L, n);
        return -1;
    }
    *prompts = P;
    *lens = L;
    return 0;
}

void cli_free_prompts(int32_t **prompts, int *lens, int n) {
    if (prompts)
        for (int i = 0; i < n; i++) free(prompts[i]);
    free(prompts);
    free(lens);
}

void cli_load_note(const char *cmd, const mtplx_model *m) {
    const char *n = model_load_note(m);
    if (n && *n) fprintf(stderr, "mtplx %s: note: %s\n", cmd, n);
}

int cli_draft_quant(const char *cmd, mtplx_model *m, const char *spec, int *code) {
    mtplx_err err;
    err_clear(&err);
    draft_quant q;
    if (draft_quant_parse(spec ? spec : DRAFT_QUANT_DEFAULT, &q, &err)) {
        cli_error(cmd, "%s", err.msg);
        *code = 2;
        return -1;
    }
    char note[sizeof err.msg + 96];
    if (model_draft_quant_apply(m, &q, !spec, note, sizeof note, &err) == 0) { /* !spec: the user did not ask */
        if (*note) fprintf(stderr, "mtplx %s: note: %s\n", cmd, note);
        return 0;
    }
    cli_error(cmd, "draft quantization: %s", err.msg);
    *code = 1;
    return -1;
}

int cli_draft_vocab(const char *cmd, mtplx_model *m, const char *model_dir, const char *spec, int *code) {
    long n;
    if (!spec) spec = CLI_DRAFT_VOCAB_DEFAULT;
    if (cli_parse_long(cmd, "--draft-vocab", spec, 0, INT32_MAX, &n)) {
        *code = 2;
        return -1;
    }
    int V = model_config_of(m)->vocab_size;
    if (n == 0 || n >= V || !model_has_mtp(m)) return 0; /* the full head */
    mtplx_err err;
    err_clear(&err);
    tokenizer *tok = NULL;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    int rc = ids ? 0 : err_set(&err, MTPLX_ENOMEM, "out of memory");
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", model_dir);
    if (!rc && !file_exists(tpath)) { /* e.g. a synthetic checkpoint: BPE ids follow merge order anyway */
        fprintf(stderr, "mtplx %s: note: no tokenizer.json: the draft vocabulary is ids 0..%ld\n", cmd, n - 1);
        for (long i = 0; i < n; i++) ids[i] = (int32_t)i;
    } else {
        if (!rc) rc = tok_load(model_dir, &tok, &err);
        if (!rc) rc = tok_common_ids(tok, V, (int)n, ids, &err);
    }
    if (!rc) rc = model_draft_vocab(m, ids, (int)n, &err);
    tok_free(tok);
    free(ids);
    if (!rc) return 0;
    cli_error(cmd, "--draft-vocab: %s", err.msg);
    *code = 1;
    return -1;
}

void cli_depth_default(const char *model_dir, int has_mtp, unsigned set, int *depth, gen_params *p) {
    if (*depth >= 0) return;
    float conf = GEN_DEFAULT_MIN_CONF;
    if (!has_mtp) {
        *depth = 0;
        return;
    }
    if (!tune_lookup(model_dir, depth, &conf)) *depth = GEN_DEFAULT_DEPTH, conf = GEN_DEFAULT_MIN_CONF;
    if (!(set & CLI_SET_DRAFT_MIN_CONF)) p->draft_min_conf = conf;
}

int cli_depth_entry(const char **p, int *depth, float *conf, int *adaptive) {
    char *end;
    long d = strtol(*p, &end, 10);
    if (end == *p || d < 0 || d > GEN_MAX_DEPTH) return 1;
    *depth = (int)d, *conf = 0, *adaptive = 0, *p = end;
    if (**p == '@') {
        double x = strtod(*p + 1, &end);
        if (end == *p + 1 || !(x >= 0 && x < 1)) return 2;
        *conf = (float)x, *adaptive = 1, *p = end;
    }
    if (**p == ',') (*p)++;
    else if (**p) return 3;
    return 0;
}
