/* cmp.h — NaN-safe "worst error" bookkeeping for tests that compare arrays (issue 20, item 2).
 * `if (!(d <= m)) m = d` or fmax(m, d) loses a NaN as soon as a later finite d is seen (fmax
 * ignores NaN outright; `if (d > m)` never takes one). Every comparison loop in tests/unit goes
 * through these, so any non-finite value makes the worst error +inf and the check fail. */
#ifndef MTPLX_TEST_CMP_H
#define MTPLX_TEST_CMP_H

#include <math.h>

/* The larger of the running worst m and a new error e; +inf (and stays +inf) once e is not finite. */
static inline double cmp_worst(double m, double e) {
    if (!isfinite(e) || !isfinite(m)) return INFINITY;
    return e > m ? e : m;
}

/* 1 when got and want are both finite and |got - want| <= tol; a NaN or inf on either side fails. */
static inline int cmp_close(double got, double want, double tol) {
    return isfinite(got) && isfinite(want) && fabs(got - want) <= tol;
}

#endif
