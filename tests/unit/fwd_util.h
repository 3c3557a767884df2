/* fwd_util.h — helpers shared by the forward tests: load a golden safetensors file, compare float
 * arrays, argmax. Header-only so each test binary stays one file plus the library. */
#ifndef MTPLX_TEST_FWD_UTIL_H
#define MTPLX_TEST_FWD_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/model/model.h"
#include "../../src/model/safetensors.h"
#include "cmp.h"

/* A golden: input ids and the fp32 reference tensors (NULL when absent). Owned by the st_set. */
typedef struct {
    st_set *st;
    int T, V, H;
    const int32_t *ids;     /* [T] */
    const float *logits;    /* [T][V] */
    const float *hidden;    /* [T][H] */
    const float *mtp_logits;/* [T-1][V] or NULL */
    int prompt_len;         /* 0 when the golden has none */
} golden;

static inline int golden_open(const char *path, golden *g, mtplx_err *err) {
    memset(g, 0, sizeof *g);
    if (st_open_file(path, &g->st, err)) return -1;
    const st_tensor *ids = st_find(g->st, "input_ids"), *lg = st_find(g->st, "logits"),
                    *hd = st_find(g->st, "hidden"), *ml = st_find(g->st, "mtp_logits"),
                    *pl = st_find(g->st, "prompt_len");
    if (!ids || !lg || !hd || ids->dtype != DT_I32 || lg->dtype != DT_F32 || hd->dtype != DT_F32) return -1;
    g->T = (int)ids->shape[0];
    g->V = (int)lg->shape[1];
    g->H = (int)hd->shape[1];
    g->ids = ids->data;
    g->logits = lg->data;
    g->hidden = hd->data;
    g->mtp_logits = ml && ml->dtype == DT_F32 ? ml->data : NULL;
    if (pl && pl->dtype == DT_I32) g->prompt_len = ((const int32_t *)pl->data)[0];
    return 0;
}

static inline void golden_close(golden *g) { st_close(g->st); }

/* max |a[i] - b[i]| over n elements; +inf when any a[i] or b[i] is NaN or infinite (in either array,
 * wherever it sits), so a `<= tol` check fails on it (cmp.h). */
static inline double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        m = cmp_worst(m, fabs((double)a[i] - (double)b[i]));
    }
    return m;
}

/* KL(softmax(ref) || softmax(got)) of each of `rows` rows of n logits: returns the largest (nats)
 * and stores the mean in *mean (may be NULL); +inf when any logit on either side is not finite. */
static inline double kl_rows(const float *ref, const float *got, int rows, int n, double *mean) {
    double worst = 0, sum = 0;
    for (int t = 0; t < rows; t++) {
        const float *p = ref + (size_t)t * n, *q = got + (size_t)t * n;
        double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, kl = 0;
        for (int i = 0; i < n; i++) {
            if (!isfinite(p[i]) || !isfinite(q[i])) {
                if (mean) *mean = INFINITY;
                return INFINITY;
            }
            mp = fmax(mp, p[i]), mq = fmax(mq, q[i]);
        }
        for (int i = 0; i < n; i++) zp += exp(p[i] - mp), zq += exp(q[i] - mq);
        for (int i = 0; i < n; i++) {
            double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
            kl += exp(lp) * (lp - lq);
        }
        worst = cmp_worst(worst, kl);
        sum += kl;
    }
    if (mean) *mean = rows ? sum / rows : 0;
    return worst;
}

static inline int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Rows of a and b [rows][n] whose argmax differs. */
static inline int argmax_mismatches(const float *a, const float *b, int rows, int n) {
    int bad = 0;
    for (int t = 0; t < rows; t++) bad += argmax(a + (size_t)t * n, n) != argmax(b + (size_t)t * n, n);
    return bad;
}

#endif
