/* knob_ab.c — two settings of the CPU kernels' knobs side by side in one process: each round runs a
 * 1-row decode forward of a model with settings A and one with settings B (each first in every other
 * round: the first forward after the read finds colder caches), then a streaming read of 2 GiB on all
 * pool threads (the machine's read rate at that moment). On a VM whose bandwidth drifts by 2× within
 * minutes (bench/zen.md), separate runs of A and B compare two states of the machine; rounds alternated
 * within a second compare the settings. Rounds are then split by the read rate, so a result says which
 * state of the machine it holds in (bench/zen.md "Session 28").
 *
 *   knob_ab MODEL_DIR ROUNDS A B [SPLIT_GBS]
 *     A, B       comma lists of knob=value over: mm_guided, qpack_pf, qpack_pf2, qpack_pair, qpack_mix,
 *                bf16_pf ("-" = the defaults); the rest stay as the environment set them
 *                (MTPLX_THREADS, MTPLX_KERNEL, ...)
 *     SPLIT_GBS  read rate that separates the "fast" rounds from the "slow" ones (default 50)
 *
 * Prints per round "ms_A ms_B read_GB/s", then per state: mean forward ms of A and B, how many rounds B
 * won, B / A of the means and the median of the rounds' B / A. Build (after `make`):
 *   gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -o build/bench/knob_ab bench/knob_ab.c build/libmtplx.a \
 *       -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lcurl -lm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/kernels/knobs.h"
#include "../src/kernels/membw.h"
#include "../src/model/model.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Applies "name=value,..." to *k; returns 0, or -1 naming the bad entry on stderr. */
static int knobs_parse(const char *spec, kern_knobs *k) {
    if (!strcmp(spec, "-")) return 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '='), *end;
        if (!eq) goto bad;
        *eq = 0;
        long v = strtol(eq + 1, &end, 10);
        if (*end || end == eq + 1) goto bad;
        static const struct {
            const char *name;
            size_t off;
        } names[] = {{"mm_guided", offsetof(kern_knobs, mm_guided)}, {"qpack_pf", offsetof(kern_knobs, qpack_pf)},
                     {"qpack_pf2", offsetof(kern_knobs, qpack_pf2)}, {"qpack_pair", offsetof(kern_knobs, qpack_pair)},
                     {"qpack_mix", offsetof(kern_knobs, qpack_mix)}, {"bf16_pf", offsetof(kern_knobs, bf16_pf)}};
        size_t i = 0;
        while (i < sizeof names / sizeof *names && strcmp(names[i].name, tok)) i++;
        if (i == sizeof names / sizeof *names) goto bad;
        *(int *)((char *)k + names[i].off) = (int)v;
        continue;
    bad:
        fprintf(stderr, "knob_ab: bad knob setting '%s' in '%s'\n", tok, spec);
        return -1;
    }
    return 0;
}

static int cmp_dbl(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Means of A, B over the rounds whose read rate is on `fast`'s side of split, and the median of the
 * rounds' B / A (robust to a round the VM stalled); prints one line. ratio: scratch of n doubles. */
static void summary(const double (*r)[3], int n, double split, int fast, double *ratio) {
    double a = 0, b = 0, rd = 0;
    int k = 0, won = 0;
    for (int i = 0; i < n; i++) {
        if ((r[i][2] >= split) != fast) continue;
        a += r[i][0], b += r[i][1], rd += r[i][2], won += r[i][1] < r[i][0];
        ratio[k++] = r[i][1] / r[i][0];
    }
    if (!k) return;
    qsort(ratio, (size_t)k, sizeof *ratio, cmp_dbl);
    double med = k % 2 ? ratio[k / 2] : 0.5 * (ratio[k / 2 - 1] + ratio[k / 2]);
    printf("%s rounds (read %s %.0f GB/s): %d, read %.1f GB/s; A %.3f ms, B %.3f ms a forward (means); B faster "
           "in %d; B/A of the means %.3f, median of the rounds' B/A %.3f\n",
           fast ? "fast" : "slow", fast ? ">=" : "<", split, k, rd / k, a / k, b / k, won, b / a, med);
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: knob_ab MODEL_DIR ROUNDS A B [SPLIT_GBS]\n");
        return 2;
    }
    int rounds = atoi(argv[2]);
    double split = argc > 5 ? atof(argv[5]) : 50;
    if (rounds < 1 || rounds > 10000) return fprintf(stderr, "knob_ab: ROUNDS 1..10000\n"), 2;
    mtplx_model *m = NULL;
    mtplx_err err = {0};
    if (model_load(argv[1], &m, &err)) return fprintf(stderr, "knob_ab: %s\n", err.msg), 1;
    kern_knobs ka = *kern_knobs_get(), kb = ka; /* the environment's, as the backend read them */
    if (knobs_parse(argv[3], &ka) || knobs_parse(argv[4], &kb)) return 2;
    const model_config *c = model_config_of(m);
    const int ctx = 256;
    model_state *s = NULL;
    int32_t *tok = malloc(sizeof(int32_t) * ctx);
    float *logits = malloc(sizeof(float) * c->vocab_size);
    double(*res)[3] = malloc(sizeof *res * (size_t)rounds), *ratio = malloc(sizeof(double) * (size_t)rounds);
    size_t rbytes = (size_t)2 << 30;
    float *rd = aligned_alloc((size_t)2 << 20, rbytes);
    if (!tok || !logits || !res || !ratio || !rd) return fprintf(stderr, "knob_ab: out of memory\n"), 1;
    memset(rd, 1, rbytes);
    if (model_state_new(m, ctx + 2 * rounds + 8, 1, &s, &err)) return fprintf(stderr, "knob_ab: %s\n", err.msg), 1;
    for (int i = 0; i < ctx; i++) tok[i] = (int32_t)((i * 7919L) % c->vocab_size);
    fwd_request pre = {.logits = logits, .logits_from = ctx - 1};
    if (model_forward(m, s, tok, ctx, &pre, &err)) return fprintf(stderr, "knob_ab: %s\n", err.msg), 1;
    double sink = 0;
    for (int r = -1; r < rounds; r++) { /* round -1 warms up */
        double t[2];
        for (int o = 0; o < 2; o++) {
            const int v = o ^ (r & 1); /* A first in even rounds, B first in odd ones */
            kern_knobs_set(v ? &kb : &ka);
            int32_t tk = (int32_t)(((r + 2) * 31L + v) % c->vocab_size);
            fwd_request req = {.logits = logits, .logits_from = 0, .capture = 1};
            double t0 = now();
            if (model_forward(m, s, &tk, 1, &req, &err)) return fprintf(stderr, "knob_ab: %s\n", err.msg), 1;
            t[v] = now() - t0;
            if (model_state_commit(s, 1, &err)) return fprintf(stderr, "knob_ab: %s\n", err.msg), 1;
            model_state_settle(s);
        }
        double t0 = now();
        sink += kern_stream_read_parallel(rd, rbytes / sizeof(float), 0);
        double gbs = rbytes / (now() - t0) * 1e-9;
        if (r < 0) continue;
        res[r][0] = t[0] * 1e3, res[r][1] = t[1] * 1e3, res[r][2] = gbs;
        printf("%.3f %.3f %.1f\n", res[r][0], res[r][1], gbs);
    }
    summary((const double(*)[3])res, rounds, split, 1, ratio);
    summary((const double(*)[3])res, rounds, split, 0, ratio);
    if (sink == 1.5) printf("\n"); /* keeps the reads */
    model_state_free(s);
    model_free(m);
    free(tok), free(logits), free(res), free(ratio), free(rd);
    return 0;
}
