/* spec.h — the acceptance and residual math of speculative sampling (Leviathan et al. / Chen et al.).
 *
 * Given the target distribution p and the proposal q a draft y was actually drawn from:
 *   accept y iff u < min(1, p(y) / q(y)) with u ~ U[0, 1) (strict: u = 0 never accepts p(y) = 0);
 *   on rejection draw from normalize(max(p − q, 0)), or from p when that has no mass.
 * Then the emitted token is distributed exactly as p whatever q is. All math in double. */
#ifndef MTPLX_ENGINE_SPEC_H
#define MTPLX_ENGINE_SPEC_H

#include "sampler.h"

/* min(1, p_y / q_y); when q_y == 0 (cannot happen for a real draft): 1 if p_y > 0 else 0. */
double spec_accept_ratio(double p_y, double q_y);

/* 1 iff u < spec_accept_ratio(p_y, q_y). */
int spec_accept(double u, double p_y, double q_y);

typedef enum {
    SPEC_RESIDUAL_EXACT = 0,       /* max(p − q, 0) over every id */
    SPEC_RESIDUAL_BROKEN_DEBUG = 1 /* DEBUG ONLY, deliberately wrong: subtracts q only at the drafted
                                      id (the bug the statistical test must catch) */
} spec_residual_kind;

/* out = normalize(max(p − q, 0)) (support ⊆ p's). `dense` is a [V] scratch that is all zero on
 * entry and left all zero. Returns 1 when the residual had no mass and out = p (fallback), else 0.
 * out must have cap >= p->n. Does not allocate. */
int spec_residual(const sampler_dist *p, const sampler_dist *q, int32_t drafted, spec_residual_kind kind,
                  double *dense, sampler_dist *out);

#endif
