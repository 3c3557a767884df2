/* rows_util.h — the row-invariance checks shared by test_rows.c (golden checkpoints, one thread) and
 * test_fwd_pool.c (the embedded model, work split over a thread pool): a forward of n rows, and
 * "each row of a T-row forward equals single-token decode, bit for bit". */
#ifndef MTPLX_TEST_ROWS_UTIL_H
#define MTPLX_TEST_ROWS_UTIL_H

#include "fwd_util.h"
#include "test.h"

/* Forward tok[0..n) as one call of m into s, logits / hidden of every row into the given buffers
 * (NULL: not wanted), capturing for a later commit when asked. Returns model_forward's status (the
 * test failed when it is not 0). */
static inline int fwd_rows(mtplx_model *m, model_state *s, const int32_t *tok, int n, float *logits, float *hidden,
                           int capture) {
    mtplx_err err = {0};
    fwd_request req = {.logits = logits, .hidden = hidden, .capture = capture};
    int rc = model_forward(m, s, tok, n, &req, &err);
    if (rc) T_FAIL("model_forward: %s", err.msg);
    return rc;
}

/* For T = 2..max_T (at most 8): after the same `prefix` tokens of ids in two fresh states, a T-row
 * forward of the next T ids (capturing when T is odd) gives, row by row, exactly the logits and
 * hidden of T single-token forwards (V logits, H hidden per row). */
static inline void check_rows_match_stepwise(mtplx_model *m, const int32_t *ids, int prefix, int max_T, int V, int H) {
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(m, 64, 8, &a, &err) == 0);
    REQUIRE(model_state_new(m, 64, 8, &b, &err) == 0);
    float *la = malloc(sizeof(float) * max_T * V), *ha = malloc(sizeof(float) * max_T * H);
    float *lb = malloc(sizeof(float) * max_T * V), *hb = malloc(sizeof(float) * max_T * H);
    for (int T = 2; T <= max_T; T++) {
        model_state_reset(a);
        model_state_reset(b);
        REQUIRE(fwd_rows(m, a, ids, prefix, NULL, NULL, 0) == 0);
        REQUIRE(fwd_rows(m, b, ids, prefix, NULL, NULL, 0) == 0);
        const int32_t *tok = ids + prefix;
        REQUIRE(fwd_rows(m, a, tok, T, la, ha, T % 2) == 0); /* with and without capture */
        for (int t = 0; t < T; t++) REQUIRE(fwd_rows(m, b, tok + t, 1, lb + (size_t)t * V, hb + (size_t)t * H, 0) == 0);
        for (int t = 0; t < T; t++) {
            CHECK_MSG(!memcmp(la + (size_t)t * V, lb + (size_t)t * V, sizeof(float) * V),
                      "T=%d row %d: logits differ from single-token decode (max|d| %.3g)", T, t,
                      max_abs_diff(la + (size_t)t * V, lb + (size_t)t * V, V));
            CHECK_MSG(!memcmp(ha + (size_t)t * H, hb + (size_t)t * H, sizeof(float) * H),
                      "T=%d row %d: hidden differs from single-token decode", T, t);
        }
    }
    free(la), free(ha), free(lb), free(hb);
    model_state_free(a);
    model_state_free(b);
}

#endif
