/* test_generate_dist.c — at temperature > 0 the MTP speculative output has the same distribution as
 * plain AR decoding, at every position a cycle can emit.
 * Seeded generations of `depth + 2` tokens (so draft positions 1..depth, the bonus after a full
 * block, and the next cycle are all reached) under MTP at depths 1-5 and adaptive depth 4 (drafting
 * stops once Π q(y) < 0.3), T = 1.0 without truncation, are compared position by position with AR
 * generations of 7 tokens from the same prompt; depth 2 at T = 0.6 / top_p 0.95 / top_k 20 with AR
 * there (4 tokens each). Depths 2, 4 and the adaptive arm draft with the default q4 draft copies,
 * 1, 3, 5 with the unquantized draft head; one more arm per setting (depth 3 at T = 1.0, depth 2 at
 * T = 0.6) drafts with the q4 head over a 64-id vocabulary subset (model_draft_vocab: q = 0 outside,
 * so most drafts are rejected and the residual emits ids the draft can never propose). The marginal
 * law of each token position is compared with a two-sample chi-square test of homogeneity (rare bins
 * pooled, chi2.h): 44 comparisons, each must pass at α = 0.0002 (Bonferroni: family-wise error ≤ 1%;
 * the seeds are fixed, so the outcome is
 * deterministic). N = 1500 samples per arm (40 under the sanitizer build: that run only exercises
 * the code — every depth, accepted and rejected drafts, the residual — it has no power).
 * Positive controls: the debug broken residual (subtract q only at the drafted id) at depth 2 must be
 * rejected at α = 0.001 on the joint law of tokens 1-2 (in-test), and the planted p/p acceptance at
 * draft positions >= 3 (tests/mutations/accept_pp_pos3.patch) must make this test fail. The exact
 * law is proven separately (test_spec_exact.c). */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/engine/generate.h"
#include "../../src/model/safetensors.h"
#include "../../src/tokenizer/tokenizer.h"
#include "chi2.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"
#define ALPHA 0.001       /* the broken-residual control must be rejected at this level */
#define ALPHA_POS 0.0002  /* per position comparison: 44 of them, family-wise error <= 1% */

static mtplx_model *M, *MQ, *MV; /* MQ: same checkpoint with the default q4 draft copies (head + MTP
                                  * layer); MV: the same over a 64-id draft vocabulary (model_draft_vocab) */
static gen_session *S, *SQ, *SV;
#define SUBSET_N 64 /* the added tokens and the first bytes: most of p's mass lies outside */
static const int32_t *G; /* golden ids: the prompts are prefixes */

/* n generations of base->max_tokens (mt) tokens with seeds seed0.. ; out[i*mt + k] = token k of sample
 * i (-1 when the generation ended before). */
static int sample(gen_session *sess, const gen_params *base, int depth, int broken, uint64_t seed0, int n,
                  const int32_t *prompt, int n_prompt, int32_t *out) {
    const int mt = base->max_tokens;
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
        for (int k = 0; k < mt; k++) out[i * mt + k] = k < nt ? t[k] : -1; /* -1: ended early (stop id) */
        free(t);
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Chi-square two-sample test on one key per sample: a[i*sa + k] (or, when joint, the pair
 * (a[i*sa], a[i*sa + 1])) against the same of b with stride sb. */
static chi2_result compare(const int32_t *a, int sa, const int32_t *b, int sb, int n, int k, int joint) {
    int64_t *ka = malloc(sizeof(int64_t) * n), *kb = malloc(sizeof(int64_t) * n);
    int64_t *all = malloc(sizeof(int64_t) * 2 * n), *ca = calloc(2 * n, sizeof(int64_t)),
            *cb = calloc(2 * n, sizeof(int64_t));
    for (int i = 0; i < n; i++) {
        const int32_t *x = a + (size_t)sa * i, *y = b + (size_t)sb * i;
        ka[i] = joint ? (int64_t)(x[0] + 1) * 1000003 + (x[1] + 1) : x[k];
        kb[i] = joint ? (int64_t)(y[0] + 1) * 1000003 + (y[1] + 1) : y[k];
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
    int depth;
    int q4;     /* 1: draft with the q4 draft copies; 2: the q4 draft over the 64-id vocabulary subset */
    float conf; /* draft_min_conf (adaptive depth; 0 = fixed depth) */
} arm;

typedef struct {
    const char *name;
    float temperature, top_p;
    int top_k;
    int n_prompt;    /* golden prefix length */
    int ar_tokens;   /* tokens per AR sample: the longest depth + 2 */
    arm arms[7];     /* MTP arms, depth 0 ends the list */
} setting;

/* T = 0.6 uses a 13-token prefix: at 9 tokens its first token is nearly certain after top_p/top_k
 * (one bin); at 13 the first token has 17 candidates (2.0 nats). */
static const setting k_settings[] = {
    {"T=1.0", 1.0f, 1.0f, 0, 9, 7, {{1, 0, 0}, {2, 1, 0}, {3, 0, 0}, {4, 1, 0}, {5, 0, 0}, {4, 1, 0.3f}, {3, 2, 0}}},
    {"T=0.6 top_p 0.95 top_k 20", 0.6f, 0.95f, 20, 13, 4, {{2, 1, 0}, {2, 2, 0}}},
};

static int N;            /* samples per arm */
/* golden prefix of 9 tokens: diverse first tokens, and a draft that differs from the target often
 * enough that the broken residual moves the joint law of tokens 1-2 by a chi-square distance of
 * ≈ 0.095 (computed exactly at T = 1: N = 1500 per arm gives a noncentrality ≈ 70) */
static int n_prompt = 9;
static int32_t *AR1; /* the AR arm at T = 1.0 (7 tokens per sample), shared with the broken-residual test */

TEST(test_mtp_distribution_equals_ar_every_position) {
    int32_t *ar = malloc(sizeof(int32_t) * 7 * N), *mtp = malloc(sizeof(int32_t) * 7 * N);
    REQUIRE(ar && mtp);
    int comparisons = 0, skipped = 0; /* skipped: the comparisons of arms this backend cannot run */
    double pmin = 1;
    for (size_t s = 0; s < sizeof k_settings / sizeof k_settings[0]; s++) {
        const setting *st = &k_settings[s];
        gen_params p;
        gen_params_default(&p);
        p.temperature = st->temperature;
        p.top_p = st->top_p;
        p.top_k = st->top_k;
        p.max_tokens = st->ar_tokens;
        if (sample(S, &p, 0, 0, 1000000, N, G, st->n_prompt, ar)) break;
        if (s == 0) memcpy(AR1, ar, sizeof(int32_t) * 7 * N);
        for (int k = 0; k < 7 && st->arms[k].depth; k++) {
            const arm *a = &st->arms[k];
            if (a->q4 == 2 && !SV) { /* no draft vocabulary on this backend: SKIP printed in main */
                skipped += a->depth + 2;
                continue;
            }
            gen_params pa = p;
            pa.draft_min_conf = a->conf;
            pa.max_tokens = a->depth + 2; /* positions 1..depth drafted, the bonus, the next cycle */
            if (sample(a->q4 == 2 ? SV : a->q4 ? SQ : S, &pa, a->depth, 0, 2000000 + 100000 * a->depth + 50000 * (a->conf > 0) + 25000 * (a->q4 == 2), N, G,
                       st->n_prompt, mtp))
                break;
            for (int pos = 0; pos < pa.max_tokens; pos++) {
                chi2_result r = compare(ar, st->ar_tokens, mtp, pa.max_tokens, N, pos, 0);
                comparisons++;
                if (r.p < pmin) pmin = r.p;
                fprintf(stderr, "  %s depth %d%s%s token %d: chi2 %.1f df %d p %.4g\n", st->name, a->depth,
                        a->q4 == 2 ? " (q4 draft, 64-id vocabulary)" : a->q4 ? " (q4 draft)" : "", a->conf > 0 ? " (adaptive, min conf 0.3)" : "", pos + 1, r.stat,
                        r.df, r.p);
                /* the comparison has real bins (the sanitizer's 100 samples may pool a position into one) */
                if (!test_sanitized()) CHECK(r.df >= 2);
                CHECK_MSG(r.p >= ALPHA_POS, "%s depth %d%s token %d: p = %g < %g — MTP distribution differs from AR",
                          st->name, a->depth, a->conf > 0 ? " (adaptive)" : "", pos + 1, r.p, ALPHA_POS);
            }
        }
    }
    fprintf(stderr, "  %d comparisons, smallest p %.4g (each must be >= %g)\n", comparisons, pmin, ALPHA_POS);
    CHECK_INT(comparisons + skipped, 44);
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
        chi2_result r = compare(AR1, 7, bad, 3, N, 0, 1);
        fprintf(stderr, "  broken residual, depth 2, tokens 1-2 joint: chi2 %.1f df %d p %.3g\n", r.stat, r.df, r.p);
        CHECK_MSG(r.p < ALPHA, "the broken residual was not detected (p = %g)", r.p);
    }
    free(bad);
}

/* m drafts with the q4 copies over the SUBSET_N ids tok_common_ids ranks first. Returns 0 or an error. */
static int subset_draft(mtplx_model *m, mtplx_err *e) {
    tokenizer *tok = NULL;
    int32_t ids[SUBSET_N];
    int rc = tok_load(MODEL_DIR, &tok, e);
    if (!rc) rc = tok_common_ids(tok, model_config_of(m)->vocab_size, SUBSET_N, ids, e);
    if (!rc) rc = model_draft_vocab(m, ids, SUBSET_N, e);
    if (!rc) rc = model_quantize_draft(m, 4, 64, 1, e);
    tok_free(tok);
    return rc;
}

int main(void) {
    setenv("MTPLX_THREADS", "1", 0); /* thousands of tiny forwards: one thread wastes no CPU on handoffs */
    mtplx_err e;
    st_set *g = NULL;
    if (model_load(MODEL_DIR, &M, &e) || st_open_file(MODEL_DIR "/golden.safetensors", &g, &e) ||
        gen_session_new(M, &S, &e) || model_load(MODEL_DIR, &MQ, &e) || model_quantize_draft(MQ, 4, 64, 1, &e) ||
        gen_session_new(MQ, &SQ, &e) || model_load(MODEL_DIR, &MV, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    int rc = subset_draft(MV, &e);
    if (rc == MTPLX_EUNSUPPORTED) { /* a backend without a draft vocabulary (none today): the other arms run */
        printf("SKIP test_mtp_distribution_equals_ar_every_position (64-id vocabulary arms): %s\n", e.msg);
    } else if (rc || gen_session_new(MV, &SV, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    const st_tensor *ids = st_find(g, "input_ids");
    if (!ids || ids->dtype != DT_I32) return 1;
    G = ids->data;
    gen_session_set_prompt_cache(S, 1);
    gen_session_set_prompt_cache(SQ, 1);
    if (SV) gen_session_set_prompt_cache(SV, 1);
    const char *env = getenv("MTPLX_DIST_SAMPLES");
    N = env ? atoi(env) : test_sanitized() ? 40 : 1500;
    AR1 = calloc(7 * (size_t)N, sizeof *AR1);
    if (!AR1) return 1;
    RUN(test_mtp_distribution_equals_ar_every_position);
    RUN(test_broken_residual_is_caught); /* needs the full sample size for power: skipped under ASan */
    free(AR1);
    gen_session_free(S);
    gen_session_free(SQ);
    gen_session_free(SV);
    st_close(g);
    model_free(M);
    model_free(MQ);
    model_free(MV);
    return TEST_SUMMARY();
}
