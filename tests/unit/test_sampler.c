/* test_sampler.c — the RNG against published vectors, and the sampler's shaping order and
 * validation on small hand-made logits (expected values derived by hand in the comments). */
#include <math.h>
#include <stdint.h>

#include "../../src/backend/backend.h"
#include "../../src/engine/rng.h"
#include "../../src/engine/sampler.h"
#include "test.h"

TEST(test_rng_matches_published_vectors) {
    /* xoshiro256** from state {1,2,3,4}: the reference implementation's published outputs. */
    rng_state r = {{1, 2, 3, 4}};
    const uint64_t want[] = {11520ull, 0ull, 1509978240ull, 1215971899390074240ull};
    for (int i = 0; i < 4; i++) CHECK(rng_next(&r) == want[i]);
    /* splitmix64 from 0: published first outputs, which rng_seed(0) puts in s[0..3]. */
    rng_seed(&r, 0);
    CHECK(r.s[0] == 0xE220A8397B1DCDAFull);
    CHECK(r.s[1] == 0x6E789E6AA1B965F4ull);
    CHECK(r.s[2] == 0x06C45D188009454Full);
    CHECK(r.s[3] == 0xF88BB8A8724C81ECull);
}

TEST(test_rng_uniform_range_and_determinism) {
    rng_state a, b;
    rng_seed(&a, 42);
    rng_seed(&b, 42);
    double sum = 0;
    for (int i = 0; i < 100000; i++) {
        double u = rng_uniform(&a);
        CHECK(u >= 0 && u < 1);
        CHECK(u == rng_uniform(&b));
        sum += u;
    }
    CHECK_NEAR(sum / 100000, 0.5, 0.005); /* sd of the mean = 0.29/316 ≈ 0.0009 */
    rng_seed(&b, 43);
    rng_seed(&a, 42);
    CHECK(rng_next(&a) != rng_next(&b));
}

static sampler *S;
static sampler_dist D;

static sampler_params neutral(void) {
    sampler_params sp = {1.0f, 1.0f, 0, 0.0f, 0.0f, 0.0f, 1.0f};
    return sp;
}

static int build(const float *l, sampler_params sp, int pen) {
    mtplx_err e;
    err_clear(&e);
    return sampler_build(S, l, &sp, pen, &D, &e);
}

TEST(test_validation_names_the_field) {
    struct {
        sampler_params sp;
        const char *field;
    } bad[] = {
        {{-0.1f, 1, 0, 0, 0, 0, 1}, "temperature"},
        {{NAN, 1, 0, 0, 0, 0, 1}, "temperature"},
        {{1, 0.0f, 0, 0, 0, 0, 1}, "top_p"},
        {{1, 1.5f, 0, 0, 0, 0, 1}, "top_p"},
        {{1, NAN, 0, 0, 0, 0, 1}, "top_p"},
        {{1, 1, -1, 0, 0, 0, 1}, "top_k"},
        {{1, 1, 0, 1.0f, 0, 0, 1}, "min_p"},
        {{1, 1, 0, -0.5f, 0, 0, 1}, "min_p"},
        {{1, 1, 0, 0, 2.5f, 0, 1}, "presence_penalty"},
        {{1, 1, 0, 0, 0, -3.0f, 1}, "frequency_penalty"},
        {{1, 1, 0, 0, 0, 0, 0.0f}, "repetition_penalty"},
        {{1, 1, 0, 0, 0, 0, -1.0f}, "repetition_penalty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mtplx_err e;
        err_clear(&e);
        CHECK_INT(sampler_params_validate(&bad[i].sp, &e), MTPLX_EINVAL);
        CHECK_MSG(strstr(e.msg, bad[i].field) != NULL, "case %zu: message '%s' does not name %s", i, e.msg,
                  bad[i].field);
    }
    sampler_params ok = {0, 1, 0, 0, -2, 2, 1};
    CHECK_INT(sampler_params_validate(&ok, NULL), 0);
}

TEST(test_nan_and_inf_logits_are_rejected) {
    float l[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    l[3] = NAN;
    CHECK_INT(build(l, neutral(), 0), MTPLX_EINVAL);
    l[3] = INFINITY;
    CHECK_INT(build(l, neutral(), 0), MTPLX_EINVAL);
    for (int i = 0; i < 8; i++) l[i] = -INFINITY;
    CHECK_INT(build(l, neutral(), 0), MTPLX_EINVAL);
    /* -inf alone excludes a token */
    float m[8] = {0, 0, 0, 0, 0, 0, 0, -INFINITY};
    REQUIRE(build(m, neutral(), 0) == 0);
    CHECK_INT(D.n, 7);
    CHECK_NEAR(sampler_dist_prob(&D, 7), 0, 0);
    CHECK_NEAR(sampler_dist_prob(&D, 0), 1.0 / 7, 1e-15);
}

TEST(test_greedy_is_argmax_lowest_id_on_ties) {
    float l[8] = {0, 3, 1, 3, -2, 0, 0, 0};
    sampler_params sp = neutral();
    sp.temperature = 0;
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 1);
    CHECK_INT(D.ids[0], 1);
    CHECK_NEAR(D.probs[0], 1, 0);
}

TEST(test_temperature_softmax) {
    float l[8] = {0, 1, 2, 0.5f, -1, 0, 0, 3};
    sampler_params sp = neutral();
    sp.temperature = 0.7f;
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 8);
    double z = 0;
    for (int i = 0; i < 8; i++) z += exp(l[i] / (double)0.7f);
    for (int i = 0; i < 8; i++) CHECK_NEAR(sampler_dist_prob(&D, i), exp(l[i] / (double)0.7f) / z, 1e-12);
}

/* probabilities 0.5, 0.3, 0.15, 0.05 on ids 2, 0, 3, 1 (and 0 elsewhere via -inf) */
static void four(float *l) {
    for (int i = 0; i < 8; i++) l[i] = -INFINITY;
    l[2] = logf(0.5f);
    l[0] = logf(0.3f);
    l[3] = logf(0.15f);
    l[1] = logf(0.05f);
}

TEST(test_top_k_keeps_the_largest_and_renormalizes) {
    float l[8];
    four(l);
    sampler_params sp = neutral();
    sp.top_k = 2;
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 2);
    CHECK_INT(D.ids[0], 2);
    CHECK_INT(D.ids[1], 0);
    CHECK_NEAR(D.probs[0], 0.5 / 0.8, 1e-6);
    /* ties at the boundary keep the lower id */
    float t[8] = {1, 2, 2, 2, 0, 0, 0, 0};
    sp.top_k = 2;
    REQUIRE(build(t, sp, 0) == 0);
    CHECK_INT(D.ids[0], 1);
    CHECK_INT(D.ids[1], 2);
}

TEST(test_top_p_keeps_while_mass_before_is_below) {
    float l[8];
    four(l);
    sampler_params sp = neutral();
    sp.top_p = 0.79f; /* before: 0 | 0.5 | 0.8 -> keep 2 */
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 2);
    CHECK_NEAR(sampler_dist_prob(&D, 0), 0.3 / 0.8, 1e-6);
    sp.top_p = 0.81f; /* 0.8 < 0.81 -> keep 3 */
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 3);
    CHECK_NEAR(sampler_dist_prob(&D, 3), 0.15 / 0.95, 1e-6);
    sp.top_p = 0.1f; /* the first is always kept */
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 1);
    CHECK_INT(D.ids[0], 2);
}

TEST(test_top_k_then_top_p_on_the_renormalized_set) {
    /* top_k 2 -> {0.625, 0.375}; top_p 0.6: before-mass 0 < 0.6 keep, 0.625 >= 0.6 stop -> 1 id.
     * (top_p first over the full distribution would keep 2 ids: 0 | 0.5 < 0.6.) */
    float l[8];
    four(l);
    sampler_params sp = neutral();
    sp.top_k = 2;
    sp.top_p = 0.6f;
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 1);
    CHECK_INT(D.ids[0], 2);
}

TEST(test_min_p_relative_to_max) {
    float l[8];
    four(l);
    sampler_params sp = neutral();
    sp.min_p = 0.35f; /* threshold 0.175: keeps 0.5 and 0.3 */
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_INT(D.n, 2);
    CHECK_NEAR(sampler_dist_prob(&D, 2), 0.5 / 0.8, 1e-6);
    CHECK_NEAR(sampler_dist_prob(&D, 3), 0, 0);
}

TEST(test_presence_frequency_and_repetition_penalties) {
    float l[8] = {1, 1, 1, 1, 2, -2, 0, 0};
    sampler_reset(S);
    int32_t prompt[] = {5};
    sampler_note_prompt(S, prompt, 1);
    sampler_note_token(S, 0);
    sampler_note_token(S, 0);
    sampler_note_token(S, 1);
    sampler_note_token(S, 4);
    sampler_params sp = neutral();
    sp.presence_penalty = 0.5f;
    sp.frequency_penalty = 0.25f;
    sp.repetition_penalty = 2.0f;
    REQUIRE(build(l, sp, 1) == 0);
    /* expected penalised logits: id0: 1/2 - 0.25*2 - 0.5 = -0.5; id1: 1/2 - 0.25 - 0.5 = -0.25;
     * id4: 2/2 - 0.25 - 0.5 = 0.25; id5 (prompt only, negative): -2*2 = -4; others unchanged. */
    const double want[8] = {-0.5, -0.25, 1, 1, 0.25, -4, 0, 0};
    double z = 0;
    for (int i = 0; i < 8; i++) z += exp(want[i]);
    for (int i = 0; i < 8; i++) CHECK_NEAR(sampler_dist_prob(&D, i), exp(want[i]) / z, 1e-7);
    /* without penalties (the draft's q) nothing changes */
    REQUIRE(build(l, sp, 0) == 0);
    CHECK_NEAR(sampler_dist_prob(&D, 0), sampler_dist_prob(&D, 2), 1e-15);
    /* greedy sees the penalties too: id 4 (2.0) loses to ids 2, 3 (1.0) */
    sp.temperature = 0;
    REQUIRE(build(l, sp, 1) == 0);
    CHECK_INT(D.ids[0], 2);
    sampler_reset(S);
}

TEST(test_sample_walks_the_cumulative_mass) {
    float l[8];
    four(l);
    REQUIRE(build(l, neutral(), 0) == 0);
    /* id order: 0 (0.3), 1 (0.05), 2 (0.5), 3 (0.15) */
    CHECK_INT(sampler_dist_sample(&D, 0.0), 0);
    CHECK_INT(sampler_dist_sample(&D, 0.2999), 0);
    CHECK_INT(sampler_dist_sample(&D, 0.3001), 1);
    CHECK_INT(sampler_dist_sample(&D, 0.3501), 2);
    CHECK_INT(sampler_dist_sample(&D, 0.8501), 3);
    CHECK_INT(sampler_dist_sample(&D, 0.9999999999), 3);
}

TEST(test_empirical_frequencies_match_the_distribution) {
    float l[8] = {0.1f, 1.2f, -0.4f, 2.0f, 0.7f, -1.0f, 0.0f, 1.5f};
    sampler_params sp = neutral();
    sp.temperature = 0.8f;
    sp.top_k = 5;
    sp.top_p = 0.9f;
    REQUIRE(build(l, sp, 0) == 0);
    rng_state r;
    rng_seed(&r, 7);
    int cnt[8] = {0};
    const int N = 200000;
    for (int i = 0; i < N; i++) cnt[sampler_dist_sample(&D, rng_uniform(&r))]++;
    for (int i = 0; i < 8; i++) {
        double pr = sampler_dist_prob(&D, i), sd = sqrt(pr * (1 - pr) / N);
        CHECK_NEAR((double)cnt[i] / N, pr, 5 * sd + 1e-12);
    }
}

/* ---- the fast selection against a plain full sort on a real-size vocabulary ---- */
#define BIGV 5003 /* not a multiple of the selection block */

static const float *g_rank_v;
static int rank_cmp(const void *a, const void *b) { /* larger first, lower id on ties */
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    float vx = g_rank_v[x], vy = g_rank_v[y];
    if (vx != vy) return vx > vy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Reference of the documented order by the book: penalties are not used here; sort every finite id
 * by rank, cut to top_k, softmax in double, walk top_p, then min_p. Returns the support size. */
static int reference(const float *l, int V, sampler_params sp, int32_t *ids, double *pr) {
    int n = 0;
    for (int j = 0; j < V; j++)
        if (l[j] != -INFINITY) ids[n++] = j;
    g_rank_v = l;
    qsort(ids, (size_t)n, sizeof *ids, rank_cmp);
    if (sp.temperature == 0) {
        pr[0] = 1;
        return 1;
    }
    if (sp.top_k > 0 && sp.top_k < n) n = sp.top_k;
    double sum = 0, mx = l[ids[0]];
    int m = 0;
    for (int i = 0; i < n; i++) {
        double e = exp(((double)l[ids[i]] - mx) / sp.temperature);
        if (e <= 0) continue;
        ids[m] = ids[i], pr[m++] = e, sum += e;
    }
    n = m;
    for (int i = 0; i < n; i++) pr[i] /= sum;
    if (sp.top_p < 1) {
        double before = 0;
        int keep = 0;
        while (keep < n && (keep == 0 || before < sp.top_p)) before += pr[keep++];
        n = keep, sum = 0;
        for (int i = 0; i < n; i++) sum += pr[i];
        for (int i = 0; i < n; i++) pr[i] /= sum;
    }
    if (sp.min_p > 0) {
        double thr = sp.min_p * pr[0];
        m = 0, sum = 0;
        for (int i = 0; i < n; i++)
            if (pr[i] >= thr) ids[m] = ids[i], pr[m++] = pr[i], sum += pr[i];
        n = m;
        for (int i = 0; i < n; i++) pr[i] /= sum;
    }
    return n;
}

TEST(test_large_vocabulary_matches_a_full_sort) {
    static float l[BIGV];
    static int32_t ids[BIGV];
    static double pr[BIGV];
    sampler *big;
    sampler_dist d;
    mtplx_err e;
    err_clear(&e);
    REQUIRE(sampler_new(BIGV, &big, &e) == 0);
    REQUIRE(sampler_dist_init(&d, BIGV, &e) == 0);
    rng_state r;
    rng_seed(&r, 11);
    const sampler_params cfgs[] = {
        {0.6f, 0.95f, 20, 0, 0, 0, 1}, {1.0f, 1.0f, 1, 0, 0, 0, 1},  {0.0f, 1.0f, 0, 0, 0, 0, 1},
        {0.0f, 0.5f, 20, 0, 0, 0, 1},  {1.0f, 1.0f, 64, 0, 0, 0, 1}, {0.8f, 0.9f, 0, 0.05f, 0, 0, 1},
        {1.3f, 1.0f, 17, 0.1f, 0, 0, 1}, {1.0f, 0.7f, BIGV - 1, 0, 0, 0, 1},
    };
    for (int trial = 0; trial < 48; trial++) {
        /* shapes: rising values (the heap root moves often), coarse values (many ties), a few -inf,
         * and mostly -inf (fewer live ids than top_k) */
        int shape = trial % 4;
        for (int j = 0; j < BIGV; j++) {
            double u = rng_uniform(&r);
            l[j] = shape == 0 ? (float)(j * 1e-3 + u) : shape == 1 ? (float)(int)(u * 8) : (float)(u * 12 - 6);
            if (shape == 2 && rng_uniform(&r) < 0.05) l[j] = -INFINITY;
            if (shape == 3 && rng_uniform(&r) < 0.997) l[j] = -INFINITY;
        }
        for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
            int n = reference(l, BIGV, cfgs[c], ids, pr);
            REQUIRE(sampler_build(big, l, &cfgs[c], 0, &d, &e) == 0);
            CHECK_MSG(d.n == n, "trial %d cfg %zu: support %d, reference %d", trial, c, d.n, n);
            for (int i = 0; i < n && i < d.n; i++) {
                /* supports in rank order (sorted paths) or id order: compare as sets via prob */
                double got = sampler_dist_prob(&d, ids[i]);
                CHECK_MSG(fabs(got - pr[i]) <= 1e-12 * pr[i] + 1e-300, "trial %d cfg %zu id %d: %.17g vs %.17g",
                          trial, c, ids[i], got, pr[i]);
            }
        }
    }
    /* a NaN or +inf anywhere (inside the first k, a skipped block, the tail) is EINVAL with its index */
    const int at[] = {3, 700, BIGV - 2};
    for (int i = 0; i < 3; i++)
        for (int inf = 0; inf < 2; inf++) {
            for (int j = 0; j < BIGV; j++) l[j] = (float)(j % 7);
            l[at[i]] = inf ? INFINITY : NAN;
            for (int c = 0; c < 3; c++) {
                err_clear(&e);
                CHECK_INT(sampler_build(big, l, &cfgs[c], 0, &d, &e), MTPLX_EINVAL);
                char want[32];
                snprintf(want, sizeof want, "logit %d ", at[i]);
                CHECK_MSG(strstr(e.msg, want) != NULL, "message '%s' lacks '%s'", e.msg, want);
            }
        }
    sampler_dist_free(&d);
    sampler_free(big);
}

/* sampler_build_top over the logits_top list of a row (be_logits_top_host, the reference of the
 * device op) gives bit for bit sampler_build's distribution on the whole row: rows with ties, -0 and
 * +0, -inf entries (some rows with fewer finite entries than top_k), lists longer than top_k; a
 * NaN / +inf gives the same error; a list shorter than top_k or a non-truncating sampler is refused. */
TEST(test_build_from_top_list_matches_the_whole_row) {
    enum { TV = 3000, KMAX = 64 };
    sampler *s2;
    sampler_dist a, b;
    mtplx_err e;
    REQUIRE(sampler_new(TV, &s2, &e) == 0);
    REQUIRE(sampler_dist_init(&a, TV, &e) == 0);
    REQUIRE(sampler_dist_init(&b, TV, &e) == 0);
    static float l[TV];
    static int32_t top[2 * KMAX + 2];
    const sampler_params cfgs[] = {
        {0, 1, 0, 0, 0, 0, 1},          {0.6f, 0.95f, 20, 0, 0, 0, 1}, {1, 1, 5, 0.1f, 0, 0, 1},
        {0.7f, 0.5f, 50, 0.05f, 0, 0, 1}, {1.3f, 1, 1, 0, 0, 0, 1},     {0.2f, 0.9f, 64, 0, 0, 0, 1}};
    rng_state r;
    rng_seed(&r, 7);
    int compared = 0;
    for (int trial = 0; trial < 60; trial++) {
        int live = trial % 5 == 0 ? 3 + trial % 17 : TV; /* the rest -inf */
        for (int j = 0; j < TV; j++) {
            double u = rng_uniform(&r);
            l[j] = trial % 3 == 0 ? (float)(int)(u * 12) - 6.0f : (float)(u * 8 - 4); /* many ties */
            if (l[j] == 0.0f && (j & 1)) l[j] = -0.0f;
        }
        if (live < TV)
            for (int j = 0; j < TV; j++)
                if ((int)(rng_uniform(&r) * TV) >= live) l[j] = -INFINITY;
        l[(int)(rng_uniform(&r) * TV)] = 9.0f; /* at least one finite entry */
        for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0]; c++) {
            int k = sampler_top_needed(&cfgs[c], 0, TV);
            REQUIRE(k > 0);
            int kl = trial % 2 ? KMAX : k; /* the list may hold more than top_k */
            be_logits_top_host(NULL, top, l, TV, 1, TV, kl);
            int ra = sampler_build(s2, l, &cfgs[c], 0, &a, &e);
            int rb = sampler_build_top(s2, top, kl, &cfgs[c], &b, &e);
            CHECK_INT(rb, ra);
            if (ra || rb) continue;
            CHECK_MSG(a.n == b.n, "trial %d cfg %zu: support %d vs %d", trial, c, a.n, b.n);
            CHECK(memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n) == 0);
            CHECK(memcmp(a.probs, b.probs, sizeof(double) * (size_t)a.n) == 0);
            compared++;
        }
    }
    CHECK(compared > 300);
    /* NaN / +inf: the same message, with the first bad index */
    for (int inf = 0; inf < 2; inf++) {
        for (int j = 0; j < TV; j++) l[j] = (float)(j % 11);
        l[1234] = inf ? INFINITY : NAN;
        l[2345] = NAN;
        be_logits_top_host(NULL, top, l, TV, 1, TV, 20);
        char ma[sizeof e.msg], mb[sizeof e.msg];
        CHECK_INT(sampler_build(s2, l, &cfgs[1], 0, &a, &e), MTPLX_EINVAL);
        snprintf(ma, sizeof ma, "%s", e.msg);
        CHECK_INT(sampler_build_top(s2, top, 20, &cfgs[1], &b, &e), MTPLX_EINVAL);
        snprintf(mb, sizeof mb, "%s", e.msg);
        CHECK_MSG(strcmp(ma, mb) == 0, "'%s' vs '%s'", ma, mb);
        CHECK(strstr(mb, "logit 1234 ") != NULL);
    }
    /* a list that cannot serve the sampler */
    for (int j = 0; j < TV; j++) l[j] = (float)(j % 11);
    be_logits_top_host(NULL, top, l, TV, 1, TV, 10);
    CHECK_INT(sampler_build_top(s2, top, 10, &cfgs[1], &b, &e), MTPLX_EINVAL); /* top_k 20 > 10 listed */
    const sampler_params whole = {0.8f, 0.9f, 0, 0, 0, 0, 1};
    CHECK_INT(sampler_build_top(s2, top, 10, &whole, &b, &e), MTPLX_EINVAL); /* top_k off: reads every id */
    sampler_dist_free(&a);
    sampler_dist_free(&b);
    sampler_free(s2);
}

int main(void) {
    mtplx_err e;
    if (sampler_new(8, &S, &e) || sampler_dist_init(&D, 8, &e)) return 1;
    RUN(test_rng_matches_published_vectors);
    RUN(test_rng_uniform_range_and_determinism);
    RUN(test_validation_names_the_field);
    RUN(test_nan_and_inf_logits_are_rejected);
    RUN(test_greedy_is_argmax_lowest_id_on_ties);
    RUN(test_temperature_softmax);
    RUN(test_top_k_keeps_the_largest_and_renormalizes);
    RUN(test_top_p_keeps_while_mass_before_is_below);
    RUN(test_top_k_then_top_p_on_the_renormalized_set);
    RUN(test_min_p_relative_to_max);
    RUN(test_presence_frequency_and_repetition_penalties);
    RUN(test_sample_walks_the_cumulative_mass);
    RUN(test_empirical_frequencies_match_the_distribution);
    RUN(test_large_vocabulary_matches_a_full_sort);
    RUN(test_build_from_top_list_matches_the_whole_row);
    sampler_dist_free(&D);
    sampler_free(S);
    return TEST_SUMMARY();
}
