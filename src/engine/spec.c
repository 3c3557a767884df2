/* spec.c — acceptance ratio and residual distribution; see spec.h. */
#include "spec.h"

double spec_accept_ratio(double p_y, double q_y) {
    if (!(q_y > 0)) return p_y > 0 ? 1.0 : 0.0;
    double r = p_y / q_y;
    return r < 1.0 ? r : 1.0;
}

int spec_accept(double u, double p_y, double q_y) { return u < spec_accept_ratio(p_y, q_y); }

int spec_residual(const sampler_dist *p, const sampler_dist *q, int32_t drafted, spec_residual_kind kind,
                  double *dense, sampler_dist *out) {
    if (kind == SPEC_RESIDUAL_BROKEN_DEBUG) {
        dense[drafted] = sampler_dist_prob(q, drafted);
    } else {
        for (int i = 0; i < q->n; i++) dense[q->ids[i]] = q->probs[i];
    }
    double sum = 0;
    int n = 0;
    for (int i = 0; i < p->n; i++) {
        double r = p->probs[i] - dense[p->ids[i]];
        if (r > 0) {
            out->ids[n] = p->ids[i];
            out->probs[n++] = r;
            sum += r;
        }
    }
    if (kind == SPEC_RESIDUAL_BROKEN_DEBUG)
        dense[drafted] = 0;
    else
        for (int i = 0; i < q->n; i++) dense[q->ids[i]] = 0;
    if (n == 0 || !(sum > 0)) {
        for (int i = 0; i < p->n; i++) {
            out->ids[i] = p->ids[i];
            out->probs[i] = p->probs[i];
        }
        out->n = p->n;
        return 1;
    }
    for (int i = 0; i < n; i++) out->probs[i] /= sum;
    out->n = n;
    return 0;
}
