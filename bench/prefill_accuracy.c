/* prefill_accuracy.c — how far a prefill is from the model's HF golden, and which tokens greedy
 * decoding picks after prompts cut from the model's val_code.txt (bench/zen.md "Session 5, prefill
 * precision"). Used to judge a lower-precision prefill against the bar (goldens <= 1e-3,
 * greedy identical): run it on two builds and compare the lines.
 *
 *   prefill_accuracy MODEL NPROMPT PLEN GEN
 *
 * Prints max |logits - golden| and max |hidden - golden| of one prefill over MODEL/golden.safetensors
 * (when present), then for NPROMPT prompts of PLEN tokens at evenly spread offsets of val_code.txt the
 * GEN greedy tokens after a prefill and single-token decode steps, and an FNV-1a hash of them all.
 * Built like prefill_bench: gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -o build/bench/prefill_accuracy
 * bench/prefill_accuracy.c build/libmtplx.a -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lm. */
#include <stdio.h>

#include "../src/tokenizer/tokenizer.h"
#include "../tests/unit/fwd_util.h"

/* One prefill over the golden's ids: its distance from the reference. Returns 0, or -1 if it
 * could not run (a missing golden is not an error: nothing is printed). */
static int golden_line(mtplx_model *m, const char *dir) {
    char path[1024];
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    mtplx_err err = {0};
    golden g;
    if (golden_open(path, &g, &err)) return 0;
    int V = model_config_of(m)->vocab_size, H = model_config_of(m)->hidden_size, rc = -1;
    model_state *s = NULL;
    float *lg = malloc(sizeof(float) * (size_t)g.T * V), *hd = malloc(sizeof(float) * (size_t)g.T * H);
    fwd_request req = {.logits = lg, .hidden = hd};
    if (lg && hd && !model_state_new(m, g.T + 8, 8, &s, &err) && !model_forward(m, s, g.ids, g.T, &req, &err)) {
        printf("golden T=%d max|dlogits|=%.3g max|dhidden|=%.3g argmax mismatches %d\n", g.T,
               max_abs_diff(lg, g.logits, (size_t)g.T * V), max_abs_diff(hd, g.hidden, (size_t)g.T * H),
               argmax_mismatches(lg, g.logits, g.T, V));
        rc = 0;
    } else {
        fprintf(stderr, "golden: %s\n", err.msg);
    }
    model_state_free(s);
    free(lg), free(hd);
    golden_close(&g);
    return rc;
}

/* The whole of dir/val_code.txt tokenized into *ids (caller frees). Returns the count or -1. */
static int val_tokens(const char *dir, const tokenizer *tk, int32_t **ids) {
    char path[1024];
    snprintf(path, sizeof path, "%s/val_code.txt", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *txt = malloc((size_t)n + 1);
    int got = txt && fread(txt, 1, (size_t)n, f) == (size_t)n, count = -1;
    fclose(f);
    mtplx_err err = {0};
    if (got && tok_encode(tk, txt, (size_t)n, ids, &count, &err)) count = -1;
    free(txt);
    return count;
}

int main(int argc, char **argv) {
    if (argc != 5) return fprintf(stderr, "usage: prefill_accuracy MODEL NPROMPT PLEN GEN\n"), 2;
    const char *dir = argv[1];
    int np = atoi(argv[2]), plen = atoi(argv[3]), gen = atoi(argv[4]);
    if (np < 1 || plen < 1 || gen < 1) return fprintf(stderr, "NPROMPT, PLEN, GEN must be >= 1\n"), 2;
    mtplx_err err = {0};
    mtplx_model *m = NULL;
    tokenizer *tk = NULL;
    if (model_load(dir, &m, &err) || tok_load(dir, &tk, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    if (golden_line(m, dir)) return 1;
    int32_t *ids = NULL;
    int nid = val_tokens(dir, tk, &ids);
    if (nid < plen + 1) return fprintf(stderr, "%s/val_code.txt: too short or unreadable\n", dir), 1;
    int V = model_config_of(m)->vocab_size;
    model_state *s = NULL;
    float *lg = malloc(sizeof(float) * (size_t)V);
    if (!lg || model_state_new(m, plen + gen + 8, 8, &s, &err)) return fprintf(stderr, "state: %s\n", err.msg), 1;
    unsigned long long h = 1469598103934665603ull;
    for (int p = 0; p < np; p++) {
        int off = (int)((long)(nid - plen - 1) * p / np);
        model_state_reset(s);
        fwd_request req = {.logits = lg, .logits_from = plen - 1};
        if (model_forward(m, s, ids + off, plen, &req, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        printf("prompt %d (offset %d):", p, off);
        for (int k = 0; k < gen; k++) {
            int32_t t = argmax(lg, V);
            printf(" %d", t);
            h = (h ^ (unsigned)t) * 1099511628211ull;
            fwd_request step = {.logits = lg};
            if (model_forward(m, s, &t, 1, &step, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        }
        printf("\n");
    }
    printf("greedy tokens hash %016llx\n", h);
    free(ids), free(lg);
    model_state_free(s);
    tok_free(tk);
    model_free(m);
    return 0;
}
