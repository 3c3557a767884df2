/* chi2.h — a two-sample chi-square test of homogeneity for token counts (test helper).
 *
 * Two samples of categorical outcomes (e.g. the first generated tokens, or pairs of them, under AR
 * and under MTP) are compared as a 2 x B contingency table. Bins whose pooled expected count in
 * either row is below 5 are merged into one "rare" bin (and dropped if that bin is still too small),
 * the statistic is Σ (obs − exp)² / exp, df = bins − 1, and the p-value is the chi-square survival
 * function Q(df/2, x/2) (regularized upper incomplete gamma, series / continued fraction). */
#ifndef MTPLX_TEST_CHI2_H
#define MTPLX_TEST_CHI2_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Regularized lower incomplete gamma P(a, x) by its power series (x < a + 1). */
static double chi2_gamma_p_series(double a, double x) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000; n++) {
        term *= x / (a + n);
        sum += term;
        if (fabs(term) < fabs(sum) * 1e-16) break;
    }
    return sum * exp(-x + a * log(x) - lgamma(a));
}

/* Regularized upper incomplete gamma Q(a, x) by the Lentz continued fraction (x >= a + 1). */
static double chi2_gamma_q_cf(double a, double x) {
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 10000; i++) {
        double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-16) break;
    }
    return exp(-x + a * log(x) - lgamma(a)) * h;
}

/* P(χ²_df > x). */
static double chi2_survival(double x, int df) {
    if (x <= 0) return 1.0;
    double a = df / 2.0, y = x / 2.0;
    return y < a + 1 ? 1.0 - chi2_gamma_p_series(a, y) : chi2_gamma_q_cf(a, y);
}

typedef struct {
    double stat;  /* chi-square statistic */
    int df;       /* degrees of freedom after pooling */
    double p;     /* p-value */
} chi2_result;

/* Homogeneity test of counts a[nb] vs b[nb] (same bin order). */
static chi2_result chi2_two_sample(const int64_t *a, const int64_t *b, int nb) {
    double na = 0, nbt = 0;
    for (int i = 0; i < nb; i++) {
        na += (double)a[i];
        nbt += (double)b[i];
    }
    double n = na + nbt, stat = 0;
    int bins = 0;
    double rare_a = 0, rare_b = 0;
    for (int i = 0; i < nb; i++) {
        double tot = (double)(a[i] + b[i]);
        if (tot == 0) continue;
        double ea = tot * na / n, eb = tot * nbt / n;
        if (ea < 5 || eb < 5) {
            rare_a += (double)a[i];
            rare_b += (double)b[i];
            continue;
        }
        stat += (a[i] - ea) * (a[i] - ea) / ea + (b[i] - eb) * (b[i] - eb) / eb;
        bins++;
    }
    double rt = rare_a + rare_b;
    if (rt > 0) {
        double ea = rt * na / n, eb = rt * nbt / n;
        if (ea >= 5 && eb >= 5) {
            stat += (rare_a - ea) * (rare_a - ea) / ea + (rare_b - eb) * (rare_b - eb) / eb;
            bins++;
        }
    }
    chi2_result r = {stat, bins - 1, 1.0};
    if (r.df >= 1) r.p = chi2_survival(stat, r.df);
    return r;
}

#endif
