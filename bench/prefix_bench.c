/* prefix_bench.c — time to first token of a conversation's second turn, cold vs from the prefix
 * cache (docs/prefix-cache.md). Turn 1: the first HIST tokens of a text file as the prompt, 32
 * tokens generated; turn 2: turn 1 + its reply + NEW further tokens (other ones in each repetition,
 * so that every cached run is a first sight of its turn 2). The second turn runs alternately
 * on a session without the cache and on one with it, REPS times each, side by side (the machine's
 * load hits both alike); prints each TTFT (admission to first token), the medians and their ratio,
 * and the prompt tokens each forwarded.
 * Usage: prefix_bench MODEL_DIR TEXT_FILE [HIST=4000] [NEW=40] [REPS=3] [DEPTH=3] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/base/clock.h"
#include "../src/engine/generate.h"
#include "../src/engine/prefix_cache.h"
#include "../src/engine/sched.h"
#include "../src/tokenizer/tokenizer.h"

typedef struct {
    double t0, first;
} ttft;

static int on_tok(void *user, const int32_t *t, int n) {
    ttft *x = user;
    (void)t;
    if (n > 0 && x->first == 0) x->first = clock_now() - x->t0;
    return 0;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: prefix_bench MODEL_DIR TEXT_FILE [HIST] [NEW] [REPS] [DEPTH]\n");
        return 2;
    }
    int hist = argc > 3 ? atoi(argv[3]) : 4000, add = argc > 4 ? atoi(argv[4]) : 40;
    int reps = argc > 5 ? atoi(argv[5]) : 3, depth = argc > 6 ? atoi(argv[6]) : 3;
    mtplx_err e = {0};
    mtplx_model *m;
    tokenizer *tk;
    if (model_load(argv[1], &m, &e) || tok_load(argv[1], &tk, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) return perror(argv[2]), 1;
    static char text[1 << 22];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    int32_t *ids;
    int n;
    if (tok_encode(tk, text, len, &ids, &n, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    if (n < hist + add) return fprintf(stderr, "the text has %d tokens, need %d\n", n, hist + add), 1;
    if (depth > 0 && !model_has_mtp(m)) depth = 0;

    sched_config c;
    sched_config_default(&c, 2, hist + add + 256);
    sched *x;
    prefix_cache *pc;
    if (sched_new(m, &c, &x, &e) || prefix_cache_new(m, sched_pool(x), NULL, &pc, &e))
        return fprintf(stderr, "%s\n", e.msg), 1;
    sched_set_reclaim(x, prefix_cache_reclaim_hook, pc);
    gen_session *cold, *hot;
    if (gen_session_new(m, &cold, &e) || gen_session_new(m, &hot, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
    gen_session_attach(cold, x);
    gen_session_attach(hot, x);
    gen_session_set_prefix_cache(hot, pc);

    gen_params p;
    gen_params_default(&p);
    p.temperature = 0;
    p.depth = depth;
    p.max_tokens = 32;
    /* turn 1 through the cache: its conversation becomes the checkpoint turn 2 starts from */
    int32_t *reply;
    int n_reply;
    gen_stats st;
    if (gen_session_run(hot, ids, hist, &p, NULL, NULL, &reply, &n_reply, &st, &e))
        return fprintf(stderr, "turn 1: %s\n", e.msg), 1;
    int n2 = hist + n_reply + add;
    int32_t *turn2 = malloc(sizeof *turn2 * (size_t)n2);
    memcpy(turn2, ids, sizeof *ids * (size_t)hist);
    memcpy(turn2 + hist, reply, sizeof *reply * (size_t)n_reply);
    printf("model %s, depth %d, spacing %d; turn 2: %d prompt tokens (%d history + %d reply + %d new)\n", argv[1],
           depth, prefix_cache_spacing(pc), n2, hist, n_reply, add);

    p.max_tokens = 1;
    double tc[64], th[64];
    int32_t *a = NULL, *b = NULL;
    int na = 0, nb = 0, cached = 0;
    if (reps > 64) reps = 64;
    if (n < hist + reps * add) reps = (n - hist) / add;
    for (int r = 0; r < reps; r++) {
        /* each repetition's new message is other text: only the conversation checkpoint matches */
        memcpy(turn2 + hist + n_reply, ids + hist + (size_t)r * add, sizeof *ids * (size_t)add);
        ttft x1 = {clock_now(), 0}, x2;
        free(a), free(b);
        if (gen_session_run(cold, turn2, n2, &p, on_tok, &x1, &a, &na, &st, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
        x2 = (ttft){clock_now(), 0};
        if (gen_session_run(hot, turn2, n2, &p, on_tok, &x2, &b, &nb, &st, &e)) return fprintf(stderr, "%s\n", e.msg), 1;
        cached = st.cached_tokens;
        tc[r] = x1.first, th[r] = x2.first;
        printf("rep %d: cold TTFT %.4f s (%d tokens prefilled), cached TTFT %.4f s (%d prefilled, %d restored)%s\n", r,
               tc[r], n2, th[r], n2 - cached, cached, na == nb && !memcmp(a, b, sizeof *a * (size_t)na) ? "" : "  MISMATCH");
    }
    qsort(tc, (size_t)reps, sizeof *tc, cmp_d);
    qsort(th, (size_t)reps, sizeof *th, cmp_d);
    printf("median TTFT: cold %.4f s, cached %.4f s, ratio %.1fx; prefilled tokens ratio %.1fx\n", tc[reps / 2],
           th[reps / 2], tc[reps / 2] / th[reps / 2], (double)n2 / (n2 - cached));
    free(a), free(b), free(reply), free(turn2), free(ids);
    gen_session_free(cold);
    gen_session_free(hot);
    prefix_cache_free(pc);
    sched_free(x);
    tok_free(tk);
    model_free(m);
    return 0;
}
