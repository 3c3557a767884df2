/* test_spec_math.c — the acceptance/residual math on small hand-made distributions (the exact
 * marginal of one speculative step equals p), and the chi-square machinery used by the
 * distribution tests, checked on synthetic samples and textbook quantiles. */
#include <math.h>
#include <stdint.h>

#include "../../src/engine/rng.h"
#include "../../src/engine/sampler.h"
#include "../../src/engine/spec.h"
#include "chi2.h"
#include "test.h"

#define V 6

static sampler_dist P, Q, R;
static double dense[V];

static void set(sampler_dist *d, const double *probs) {
    d->n = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] > 0) {
            d->ids[d->n] = i;
            d->probs[d->n++] = probs[i];
        }
}

/* marginal[x] = Σ_y q(y) [accept(y) δ_xy + (1 − accept(y)) resid_y(x)], computed exactly. */
static void marginal(const double *p, const double *q, spec_residual_kind kind, double *out) {
    set(&P, p);
    set(&Q, q);
    for (int x = 0; x < V; x++) out[x] = 0;
    for (int y = 0; y < V; y++) {
        if (q[y] <= 0) continue;
        double acc = spec_accept_ratio(p[y], q[y]);
        out[y] += q[y] * acc;
        if (acc < 1) {
            spec_residual(&P, &Q, y, kind, dense, &R);
            for (int i = 0; i < R.n; i++) out[R.ids[i]] += q[y] * (1 - acc) * R.probs[i];
        }
    }
}

static void random_dist(rng_state *r, double *d, int zeros) {
    double s = 0;
    for (int i = 0; i < V; i++) {
        d[i] = (zeros && rng_uniform(r) < 0.3) ? 0 : rng_uniform(r) + 0.01;
        s += d[i];
    }
    if (s == 0) {
        d[0] = 1;
        s = 1;
    }
    for (int i = 0; i < V; i++) d[i] /= s;
}

TEST(test_one_step_marginal_equals_p) {
    const double p[V] = {0.4, 0.3, 0.0, 0.2, 0.1, 0.0};
    const double q[V] = {0.1, 0.5, 0.2, 0.0, 0.1, 0.1}; /* q puts mass where p has none, misses id 3 */
    double m[V];
    marginal(p, q, SPEC_RESIDUAL_EXACT, m);
    for (int i = 0; i < V; i++) CHECK_NEAR(m[i], p[i], 1e-15);
    rng_state r;
    rng_seed(&r, 1);
    for (int t = 0; t < 500; t++) {
        double pp[V], qq[V];
        random_dist(&r, pp, t & 1);
        random_dist(&r, qq, t & 2);
        marginal(pp, qq, SPEC_RESIDUAL_EXACT, m);
        for (int i = 0; i < V; i++) CHECK_NEAR(m[i], pp[i], 1e-12);
    }
}

TEST(test_one_point_q_greedy_draft) {
    /* a greedy draft is a one-point q: the marginal is still p */
    const double p[V] = {0.25, 0.25, 0.5, 0, 0, 0};
    const double q[V] = {0, 1, 0, 0, 0, 0};
    double m[V];
    marginal(p, q, SPEC_RESIDUAL_EXACT, m);
    for (int i = 0; i < V; i++) CHECK_NEAR(m[i], p[i], 1e-15);
}

TEST(test_broken_residual_changes_the_marginal) {
    /* the debug variant (subtract q only at the drafted id) is wrong: its marginal is not p */
    const double p[V] = {0.4, 0.3, 0.0, 0.2, 0.1, 0.0};
    const double q[V] = {0.1, 0.5, 0.2, 0.0, 0.1, 0.1};
    double m[V], tv = 0;
    marginal(p, q, SPEC_RESIDUAL_BROKEN_DEBUG, m);
    for (int i = 0; i < V; i++) tv += fabs(m[i] - p[i]) / 2;
    CHECK_MSG(tv > 0.01, "broken residual total variation %g, expected a visible bias", tv);
}

TEST(test_zero_probability_draft_never_accepted) {
    CHECK_INT(spec_accept(0.0, 0.0, 0.3), 0); /* u = 0 and p(y) = 0: strict u < r rejects */
    CHECK_INT(spec_accept(0.0, 1e-300, 0.3), 1);
    CHECK_NEAR(spec_accept_ratio(0.0, 0.0), 0.0, 0);
    CHECK_NEAR(spec_accept_ratio(0.1, 0.0), 1.0, 0);
}

TEST(test_ratio_capped_at_one) {
    CHECK_NEAR(spec_accept_ratio(0.9, 0.1), 1.0, 0);
    CHECK_NEAR(spec_accept_ratio(0.1, 0.4), 0.25, 1e-16);
    CHECK_INT(spec_accept(0.9999999, 0.9, 0.1), 1);
    CHECK_INT(spec_accept(0.25, 0.1, 0.4), 0); /* u == r rejects */
}

TEST(test_residual_normalised_and_fallback) {
    const double p[V] = {0.5, 0.3, 0.2, 0, 0, 0};
    const double q[V] = {0.2, 0.6, 0.2, 0, 0, 0};
    set(&P, p);
    set(&Q, q);
    CHECK_INT(spec_residual(&P, &Q, 1, SPEC_RESIDUAL_EXACT, dense, &R), 0);
    CHECK_INT(R.n, 1); /* max(p − q, 0) = {0.3, 0, 0} */
    CHECK_INT(R.ids[0], 0);
    CHECK_NEAR(R.probs[0], 1.0, 1e-15);
    for (int i = 0; i < V; i++) CHECK_NEAR(dense[i], 0, 0); /* scratch left clean */
    /* p == q: no residual mass -> fallback to p */
    CHECK_INT(spec_residual(&P, &P, 0, SPEC_RESIDUAL_EXACT, dense, &R), 1);
    CHECK_INT(R.n, 3);
    double s = 0;
    for (int i = 0; i < R.n; i++) s += R.probs[i];
    CHECK_NEAR(s, 1, 1e-15);
    CHECK_NEAR(sampler_dist_prob(&R, 0), 0.5, 0);
    /* general case sums to one */
    const double p2[V] = {0.1, 0.2, 0.3, 0.15, 0.15, 0.1};
    const double q2[V] = {0.3, 0.1, 0.1, 0.3, 0.1, 0.1};
    set(&P, p2);
    set(&Q, q2);
    CHECK_INT(spec_residual(&P, &Q, 0, SPEC_RESIDUAL_EXACT, dense, &R), 0);
    s = 0;
    for (int i = 0; i < R.n; i++) s += R.probs[i];
    CHECK_NEAR(s, 1, 1e-15);
    CHECK_NEAR(sampler_dist_prob(&R, 2), 0.2 / 0.35, 1e-15); /* residual {0,.1,.2,0,.05,0} / .35 */
}

TEST(test_simulated_one_step_frequencies_match_p) {
    /* the same math driven by the RNG the engine uses, 2·10^5 trials, 5-sigma bands */
    const double p[V] = {0.05, 0.3, 0.25, 0.2, 0.15, 0.05};
    const double q[V] = {0.3, 0.3, 0.05, 0.05, 0.2, 0.1};
    set(&P, p);
    set(&Q, q);
    rng_state r;
    rng_seed(&r, 3);
    int cnt[V] = {0};
    const int N = 200000;
    for (int t = 0; t < N; t++) {
        int32_t y = sampler_dist_sample(&Q, rng_uniform(&r));
        if (spec_accept(rng_uniform(&r), p[y], q[y]))
            cnt[y]++;
        else {
            spec_residual(&P, &Q, y, SPEC_RESIDUAL_EXACT, dense, &R);
            cnt[sampler_dist_sample(&R, rng_uniform(&r))]++;
        }
    }
    for (int i = 0; i < V; i++) CHECK_NEAR((double)cnt[i] / N, p[i], 5 * sqrt(p[i] * (1 - p[i]) / N));
}

TEST(test_chi2_survival_textbook_values) {
    CHECK_NEAR(chi2_survival(3.841458820694124, 1), 0.05, 1e-9);
    CHECK_NEAR(chi2_survival(18.307038053275146, 10), 0.05, 1e-9);
    CHECK_NEAR(chi2_survival(6.634896601021214, 1), 0.01, 1e-9);
    for (double x = 0.1; x < 60; x *= 1.7) CHECK_NEAR(chi2_survival(x, 2), exp(-x / 2), 1e-12); /* df 2: e^{-x/2} */
    CHECK_NEAR(chi2_survival(0, 5), 1, 0);
}

/* Draw n samples from a Zipf-like law over nb bins (optionally perturbed) into counts. */
static void draw(rng_state *r, int nb, double tilt, int n, int64_t *counts) {
    double w[64], s = 0;
    for (int i = 0; i < nb; i++) {
        w[i] = 1.0 / (i + 1) * (i == 3 ? 1 + tilt : 1);
        s += w[i];
    }
    for (int i = 0; i < nb; i++) counts[i] = 0;
    for (int k = 0; k < n; k++) {
        double u = rng_uniform(r) * s, c = 0;
        int i = 0;
        for (; i < nb - 1; i++) {
            c += w[i];
            if (u < c) break;
        }
        counts[i]++;
    }
}

TEST(test_chi2_two_sample_size_and_power) {
    rng_state r;
    rng_seed(&r, 11);
    int64_t a[64], b[64];
    int rejections = 0;
    const int trials = 40;
    for (int t = 0; t < trials; t++) { /* same law: p-values spread over (0,1), few below 0.01 */
        draw(&r, 60, 0, 3000, a);
        draw(&r, 60, 0, 3000, b);
        chi2_result c = chi2_two_sample(a, b, 60);
        CHECK(c.df >= 10);
        if (c.p < 0.01) rejections++;
    }
    CHECK_MSG(rejections <= 3, "%d of %d same-law comparisons rejected at 1%%", rejections, trials);
    int detected = 0;
    for (int t = 0; t < 10; t++) { /* bin 3 doubled: detected */
        draw(&r, 60, 1.0, 6000, a);
        draw(&r, 60, 0, 6000, b);
        if (chi2_two_sample(a, b, 60).p < 0.001) detected++;
    }
    CHECK_MSG(detected >= 9, "doubling one bin detected only %d/10 times", detected);
}

int main(void) {
    mtplx_err e;
    if (sampler_dist_init(&P, V, &e) || sampler_dist_init(&Q, V, &e) || sampler_dist_init(&R, V, &e)) return 1;
    RUN(test_one_step_marginal_equals_p);
    RUN(test_one_point_q_greedy_draft);
    RUN(test_broken_residual_changes_the_marginal);
    RUN(test_zero_probability_draft_never_accepted);
    RUN(test_ratio_capped_at_one);
    RUN(test_residual_normalised_and_fallback);
    RUN(test_simulated_one_step_frequencies_match_p);
    RUN(test_chi2_survival_textbook_values);
    RUN(test_chi2_two_sample_size_and_power);
    sampler_dist_free(&P);
    sampler_dist_free(&Q);
    sampler_dist_free(&R);
    return TEST_SUMMARY();
}
