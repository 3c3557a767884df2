/* test_grammar_dist.c — structured output keeps speculative decoding exact: on the real embedded
 * model, under a JSON Schema with several likely branches (enum values, key order, a boolean, an
 * integer, whitespace), constrained MTP at depths 2 and 4 has the same output law as constrained AR.
 * Seeded generations of the whole answer (at most MAXT tokens, the schema completes in fewer) at
 * T = 1.0 without truncation are compared with a two-sample chi-square test of homogeneity (rare
 * bins pooled, chi2.h): per token position and on the whole completion (joint), each at
 * α = 0.001 / comparisons (Bonferroni: family-wise error ≤ 0.1%; seeds are fixed, so the outcome is
 * deterministic). Every output that ended (not cut by MAXT; at most 10% are) must parse as JSON and be
 * accepted by the grammar. N = 200 samples per arm (16 and depth 2 only under the sanitizer: that run only
 * exercises the code).
 * Positive control: tests/mutations/grammar_mask_p_only.patch (the acceptance test and residual use
 * the unmasked q while drafts come from the masked q) must make this test fail. The exact law under a
 * constraint is proven separately (test_spec_exact.c, test_exact_law_under_a_constraint). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/engine/constraint.h"
#include "../../src/engine/gen_config.h"
#include "chi2.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"
#define MAXT 40
#define ALPHA_FAMILY 0.001

static mtplx_model *M;
static gen_session *S;
static tokenizer *TOK;
static grammar *G;
static grammar_vocab *GV;
static grammar_matcher *GM;
static int N;
static int32_t *PROMPT;
static int N_PROMPT;

static const char k_schema[] =
    "{\"type\":\"object\",\"properties\":{"
    "\"kind\":{\"enum\":[\"function\",\"class\",\"module\",\"method\"]},"
    "\"public\":{\"type\":\"boolean\"}},"
    "\"required\":[\"kind\",\"public\"],\"additionalProperties\":false}";

/* n generations with seeds seed0.. at depth; out[i * MAXT + k] = token k of sample i, -1 after the
 * end. Checks that every output completed and is a sentence of the grammar. */
static int sample(int depth, uint64_t seed0, int32_t *out) {
    gen_params p;
    mtplx_err e;
    if (gen_params_from_model(M, &p, &e)) {
        T_FAIL("params: %s", e.msg);
        return -1;
    }
    gen_constraint gc = gen_constraint_of_matcher(GM);
    p.temperature = 1.0f;
    p.top_p = 1.0f;
    p.top_k = 0;
    p.min_p = 0;
    p.repetition_penalty = 1.0f;
    p.max_tokens = MAXT;
    p.depth = depth;
    p.constraint = &gc;
    int invalid = 0, truncated = 0;
    for (int i = 0; i < N; i++) {
        p.seed = seed0 + (uint64_t)i;
        p.seed_set = 1;
        grammar_matcher_reset(GM);
        int32_t *t;
        int nt;
        gen_stats st;
        if (gen_session_run(S, PROMPT, N_PROMPT, &p, NULL, NULL, &t, &nt, &st, &e)) {
            T_FAIL("depth %d: %s", depth, e.msg);
            return -1;
        }
        for (int k = 0; k < MAXT; k++) out[i * MAXT + k] = k < nt ? t[k] : -1;
        char *text = NULL;
        size_t len = 0;
        if (strcmp(st.finish_reason, "stop")) /* cut by MAXT: legitimate, counted */
            truncated++;
        else if (!tok_decode(TOK, t, nt, 1, &text, &len, &e)) {
            json_t *j = json_loadb(text, len, 0, NULL);
            if ((!j || !grammar_accepts(G, text, len)) && invalid++ < 3)
                T_FAIL("depth %d seed %llu: the output is not a valid document: %s", depth, (unsigned long long)p.seed, text);
            json_decref(j);
        }
        free(text);
        free(t);
    }
    CHECK_MSG(test_sanitized() || truncated * 10 <= N, "depth %d: %d of %d outputs hit max_tokens %d", depth, truncated, N, MAXT);
    return invalid ? -1 : 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Key of sample i: token k, or (k < 0) a hash of the whole completion. */
static int64_t key_of(const int32_t *s, int k) {
    if (k >= 0) return s[k];
    uint64_t h = 1469598103934665603ULL;
    for (int j = 0; j < MAXT; j++) h = (h ^ (uint64_t)(uint32_t)s[j]) * 1099511628211ULL;
    return (int64_t)(h >> 1);
}

static chi2_result compare(const int32_t *a, const int32_t *b, int k) {
    int64_t *all = malloc(sizeof(int64_t) * 2 * N), *ca = calloc(2 * N, sizeof(int64_t)),
            *cb = calloc(2 * N, sizeof(int64_t));
    for (int i = 0; i < N; i++) {
        all[i] = key_of(a + (size_t)i * MAXT, k);
        all[N + i] = key_of(b + (size_t)i * MAXT, k);
    }
    int64_t *sorted = malloc(sizeof(int64_t) * 2 * N);
    memcpy(sorted, all, sizeof(int64_t) * 2 * N);
    qsort(sorted, 2 * (size_t)N, sizeof *sorted, cmp_i64);
    int nb = 0;
    for (int i = 0; i < 2 * N; i++)
        if (!nb || sorted[i] != sorted[nb - 1]) sorted[nb++] = sorted[i];
    for (int i = 0; i < 2 * N; i++) {
        int64_t *f = bsearch(&all[i], sorted, nb, sizeof *sorted, cmp_i64);
        (i < N ? ca : cb)[f - sorted]++;
    }
    chi2_result r = chi2_two_sample(ca, cb, nb);
    free(all);
    free(sorted);
    free(ca);
    free(cb);
    return r;
}

TEST(test_constrained_mtp_law_equals_constrained_ar) {
    int32_t *ar = malloc(sizeof(int32_t) * MAXT * N), *mtp = malloc(sizeof(int32_t) * MAXT * N);
    REQUIRE(ar && mtp);
    if (sample(0, 100000, ar)) goto done;
    const int depths[2] = {2, 4};
    /* positions that vary in the AR arm (forced positions pool to one bin and are not tests) */
    int comparisons = 0;
    double pmin = 1;
    const int n_depths = test_sanitized() ? 1 : 2; /* the sanitizer run only exercises the code */
    for (int di = 0; di < n_depths; di++) {
        if (sample(depths[di], 200000 + 100000 * (uint64_t)di, mtp)) break;
        for (int k = -1; k < MAXT; k++) {
            chi2_result r = compare(ar, mtp, k);
            if (r.df < 1) continue; /* one bin: nothing to compare (a forced token) */
            comparisons++;
            if (r.p < pmin) pmin = r.p;
            double alpha = ALPHA_FAMILY / (2 * (MAXT + 1));
            fprintf(stderr, "  depth %d %s %d: chi2 %.1f df %d p %.4g\n", depths[di], k < 0 ? "whole output" : "token",
                    k < 0 ? 0 : k + 1, r.stat, r.df, r.p);
            CHECK_MSG(test_sanitized() || r.p >= alpha, "depth %d %s %d: p = %g < %g — constrained MTP differs from "
                      "constrained AR", depths[di], k < 0 ? "whole output" : "token", k + 1, r.p, alpha);
        }
    }
    fprintf(stderr, "  %d comparisons, smallest p %.4g\n", comparisons, pmin);
    if (!test_sanitized()) CHECK(comparisons >= 10);
    grammar_stats gs = grammar_matcher_stats(GM);
    fprintf(stderr, "  masks %ld, computed %ld (cache hit rate %.3f), walk steps %ld\n", gs.masks, gs.computed,
            gs.masks ? 1 - (double)gs.computed / gs.masks : 0, gs.steps);
done:
    free(ar);
    free(mtp);
}

int main(void) {
    setenv("MTPLX_THREADS", "1", 0);
    mtplx_err e;
    const char *prompt = "<|im_start|>user\nDescribe the function read_file as JSON.<|im_end|>\n"
                         "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    if (model_load(MODEL_DIR, &M, &e) || gen_session_new(M, &S, &e) || tok_load(MODEL_DIR, &TOK, &e) ||
        tok_encode(TOK, prompt, strlen(prompt), &PROMPT, &N_PROMPT, &e) ||
        grammar_from_schema_text(k_schema, strlen(k_schema), &G, &e) || grammar_vocab_new(TOK, &GV, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    gen_params p;
    if (gen_params_from_model(M, &p, &e) || grammar_matcher_new(G, GV, p.stop_ids, p.n_stop_ids, NULL, &GM, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    gen_session_set_prompt_cache(S, 1);
    const char *env = getenv("MTPLX_DIST_SAMPLES");
    N = env ? atoi(env) : test_sanitized() ? 16 : 200;
    RUN(test_constrained_mtp_law_equals_constrained_ar);
    grammar_matcher_free(GM);
    grammar_vocab_free(GV);
    grammar_free(G);
    tok_free(TOK);
    free(PROMPT);
    gen_session_free(S);
    model_free(M);
    return TEST_SUMMARY();
}
