/* test_generate_dist.c — at temperature > 0 the MTP speculative output has the same distribution as
 * plain AR decoding. Thousands of seeded short generations (max_tokens 3) under AR and under MTP
 * (depths 1, 3 and adaptive 4 — drafting stops once Π q(y) < 0.3 — at temperature 1.0 without
 * truncation; depth 2 at 0.6 with top_p 0.95 / top_k 20; the depth-3, adaptive and depth-2 arms draft
 * with the default q4 draft copies; 1000 samples per arm) are compared
 * with a two-sample chi-square test of homogeneity (rare bins pooled, chi2.h) on the joint law of
 * the first two tokens and on the third token. Each comparison must pass at α = 0.001 (8
 * comparisons: family-wise error ≈ 0.8%; the seeds are fixed, so the outcome is deterministic).
 * The same test run against the deliberately broken residual (debug switch: subtract q only at the
 * drafted id) must reject at α = 0.001 — the test has the power to see a wrong residual. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/engine/generate.h"
#include "../../src/model/safetensors.h"
#include "chi2.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"
#define ALPHA 0.001

static mtplx_model *M, *MQ; /* MQ: same checkpoint with the default q4 draft copies (head + MTP layer) */
static gen_session *S, *SQ;
static const int32_t *G; /* golden ids: the prompts are prefixes */

/* n generations of 3 tokens with seeds seed0.. ; out[i*3 + k] = token k of sample i. */
static int sample(gen_session *sess, const gen_params *base, int depth, int broken, uint64_t seed0, int n,
                  const int32_t *prompt, int n_prompt, int32_t *out) {
    for (int i = 0; i < n; i++) {
        gen_params p = *base;
        p.depth = depth;
        p.debug_broken_residual = broken;
        p.seed = seed0 + (uint64_t)i;
        p.seed_set = 1;
        int32_t *t;
        int nt;
        mtplx_err e;
        if (gen_session_run(sess, prompt, n_prompt, &p, NULL, NULL, &t, &nt, NULL, &e)) {
            T_FAIL("depth %d: %s", depth, e.msg);
            return -1;
        }
        for (int k = 0; k < 3; k++) out[i * 3 + k] = k < nt ? t[k] : -1; /* -1: ended early (stop id) */
        free(t);
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Chi-square two-sample test on keys key(sample) of two sample sets. */
static chi2_result compare(const int32_t *a, const int32_t *b, int n, int which) {
    int64_t *ka = malloc(sizeof(int64_t) * n), *kb = malloc(sizeof(int64_t) * n);
    int64_t *all = malloc(sizeof(int64_t) * 2 * n), *ca = calloc(2 * n, sizeof(int64_t)),
            *cb = calloc(2 * n, sizeof(int64_t));
    for (int i = 0; i < n; i++) {
        const int32_t *x = a + 3 * i, *y = b + 3 * i;
        ka[i] = which == 0 ? (int64_t)(x[0] + 1) * 1000003 + (x[1] + 1) : x[2];
        kb[i] = which == 0 ? (int64_t)(y[0] + 1) * 1000003 + (y[1] + 1) : y[2];
        all[i] = ka[i];
        all[n + i] = kb[i];
    }
    qsort(all, 2 * (size_t)n, sizeof *all, cmp_i64);
    int nb = 0;
    for (int i = 0; i < 2 * n; i++)
        if (!nb || all[i] != all[nb - 1]) all[nb++] = all[i];
    for (int i = 0; i < n; i++) {
        ca[(int64_t *)bsearch(&ka[i], all, nb, sizeof *all, cmp_i64) - all]++;
        cb[(int64_t *)bsearch(&kb[i], all, nb, sizeof *all, cmp_i64) - all]++;
    }
    chi2_result r = chi2_two_sample(ca, cb, nb);
    free(ka);
    free(kb);
    free(all);
    free(ca);
    free(cb);
    return r;
}

typedef struct {
    const char *name;
    float temperature, top_p;
    int top_k;
    int depths[4];  /* MTP depths compared with AR, 0-terminated */
    int q4[4];      /* 1: that arm drafts with the q4 draft copies */
    float conf[4];  /* that arm's draft_min_conf (adaptive depth; 0 = fixed depth) */
    int n_prompt;   /* golden prefix length */
} setting;

/* T = 0.6 uses a 13-token prefix: at 9 tokens its first token is nearly certain after top_p/top_k
 * (one bin); at 13 the first token has 17 candidates (2.0 nats). */
static const setting k_settings[] = {
    {"T=1.0", 1.0f, 1.0f, 0, {1, 3, 4, 0}, {0, 1, 1, 0}, {0, 0, 0.3f, 0}, 9},
    {"T=0.6 top_p 0.95 top_k 20", 0.6f, 0.95f, 20, {2, 0, 0, 0}, {1, 0, 0, 0}, {0, 0, 0, 0}, 13},
};

static int N;            /* samples per arm */
/* golden prefix of 9 tokens: diverse first tokens, and a draft that differs from the target often
 * enough that the broken residual moves the joint law of tokens 1-2 by a chi-square distance of
 * ≈ 0.095 (computed exactly at T = 1: N = 1000 per arm gives a noncentrality ≈ 48) */
static int n_prompt = 9;
static int32_t *AR1; /* the AR arm at T = 1.0, shared with the broken-residual test */

TEST(test_mtp_distribution_equals_ar) {
    int32_t *ar = malloc(sizeof(int32_t) * 3 * N), *mtp = malloc(sizeof(int32_t) * 3 * N);
    REQUIRE(ar && mtp);
    for (size_t s = 0; s < sizeof k_settings / sizeof k_settings[0]; s++) {
        gen_params p;
        gen_params_default(&p);
        p.temperature = k_settings[s].temperature;
        p.top_p = k_settings[s].top_p;
        p.top_k = k_settings[s].top_k;
        p.max_tokens = 3;
        const int np = k_settings[s].n_prompt;
        if (sample(S, &p, 0, 0, 1000000, N, G, np, ar)) break;
        if (s == 0) memcpy(AR1, ar, sizeof(int32_t) * 3 * N);
        for (int k = 0; k < 4 && k_settings[s].depths[k]; k++) {
            int depth = k_settings[s].depths[k];
            int q4 = k_settings[s].q4[k];
            gen_params pa = p;
            pa.draft_min_conf = k_settings[s].conf[k];
            if (sample(q4 ? SQ : S, &pa, depth, 0, 2000000 + 100000 * depth, N, G, np, mtp)) break;
            for (int which = 0; which < 2; which++) {
                chi2_result r = compare(ar, mtp, N, which);
                fprintf(stderr, "  %s depth %d%s%s %s: chi2 %.1f df %d p %.4f\n", k_settings[s].name, depth,
                        q4 ? " (q4 draft)" : "", pa.draft_min_conf > 0 ? " (adaptive, min conf 0.3)" : "",
                        which ? "token 3" : "tokens 1-2 joint", r.stat, r.df, r.p);
                CHECK(r.df >= 3); /* the comparison has real bins */
                CHECK_MSG(r.p >= ALPHA, "%s depth %d %s: p = %g < %g — MTP distribution differs from AR",
                          k_settings[s].name, depth, which ? "token 3" : "tokens 1-2", r.p, ALPHA);
            }
        }
    }
    free(ar);
    free(mtp);
}

TEST(test_broken_residual_is_caught) {
    if (test_sanitized()) SKIP("sanitizer build: the shrunk sample size has no power to catch the bug");
    int32_t *bad = malloc(sizeof(int32_t) * 3 * N);
    REQUIRE(bad);
    gen_params p;
    gen_params_default(&p);
    p.temperature = 1.0f;
    p.max_tokens = 3;
    if (!sample(S, &p, 2, 1, 3000000, N, G, n_prompt, bad)) { /* same settings as the T = 1.0 AR arm */
        chi2_result r = compare(AR1, bad, N, 0);
        fprintf(stderr, "  broken residual, depth 2, tokens 1-2 joint: chi2 %.1f df %d p %.3g\n", r.stat, r.df, r.p);
        CHECK_MSG(r.p < ALPHA, "the broken residual was not detected (p = %g)", r.p);
    }
    free(bad);
}

int main(void) {
    setenv("MTPLX_THREADS", "1", 0); /* thousands of tiny forwards: one thread wastes no CPU on handoffs */
    mtplx_err e;
    st_set *g = NULL;
    if (model_load(MODEL_DIR, &M, &e) || st_open_file(MODEL_DIR "/golden.safetensors", &g, &e) ||
        gen_session_new(M, &S, &e) || model_load(MODEL_DIR, &MQ, &e) || model_quantize_draft(MQ, 4, 64, 1, &e) ||
        gen_session_new(MQ, &SQ, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    const st_tensor *ids = st_find(g, "input_ids");
    if (!ids || ids->dtype != DT_I32) return 1;
    G = ids->data;
    gen_session_set_prompt_cache(S, 1);
    gen_session_set_prompt_cache(SQ, 1);
    const char *env = getenv("MTPLX_DIST_SAMPLES");
    N = env ? atoi(env) : test_sanitized() ? 150 : 1000;
    AR1 = calloc(3 * (size_t)N, sizeof *AR1);
    if (!AR1) return 1;
    RUN(test_mtp_distribution_equals_ar);
    RUN(test_broken_residual_is_caught); /* needs the full sample size for power */
    free(AR1);
    gen_session_free(S);
    gen_session_free(SQ);
    st_close(g);
    model_free(M);
    model_free(MQ);
    return TEST_SUMMARY();
}
