/* test_fwd_pool.c — the forward with its per-head work split over a 3-thread pool (attention of all
 * rows × heads in one dispatch, the delta rule of all rows per value head), on the embedded model
 * whose shapes are big enough for the split to happen (the golden checkpoints of test_rows.c are
 * too small, so they run on the caller alone):
 *   - every row of a T-row forward (T = 2..5, with and without capture) equals single-token decode,
 *     bit for bit (row invariance, DESIGN.md §3);
 *   - commit after a capturing forward leaves a state whose next steps equal a state that saw only
 *     the kept rows;
 *   - the MTP head's multi-row call equals its single-row calls;
 *   - the prefill still matches the HF golden within test_forward.c's tolerance. */
#include <stdio.h>

#include "fwd_util.h"
#include "rows_util.h"
#include "test.h"

static const char *k_dir = "models/qwen35-tiny-code";
#define PREFIX 24
#define TOL 1e-3

static mtplx_model *g_model;
static golden g_gold;

/* Forward tokens[0..n) of g_model as one call into s (rows_util.h). */
static int fwd(model_state *s, const int32_t *tok, int n, float *logits, float *hidden, int capture) {
    return fwd_rows(g_model, s, tok, n, logits, hidden, capture);
}

TEST(test_prefill_matches_golden_on_pool) {
    int T = g_gold.T, V = g_gold.V, H = g_gold.H;
    mtplx_err err = {0};
    model_state *s = NULL;
    REQUIRE(model_state_new(g_model, T + 8, 8, &s, &err) == 0);
    float *lg = malloc(sizeof(float) * (size_t)T * V), *hd = malloc(sizeof(float) * (size_t)T * H);
    REQUIRE(fwd(s, g_gold.ids, T, lg, hd, 0) == 0);
    double dl = max_abs_diff(lg, g_gold.logits, (size_t)T * V), dh = max_abs_diff(hd, g_gold.hidden, (size_t)T * H);
    CHECK_MSG(dl <= TOL, "logits max|d| %.3g > %g", dl, TOL);
    CHECK_MSG(dh <= TOL, "hidden max|d| %.3g > %g", dh, TOL);
    CHECK_INT(argmax_mismatches(lg, g_gold.logits, T, V), 0);
    free(lg), free(hd);
    model_state_free(s);
}

TEST(test_rows_match_stepwise_on_pool) { check_rows_match_stepwise(g_model, g_gold.ids, PREFIX, 5, g_gold.V, g_gold.H); }

TEST(test_commit_on_pool) {
    int V = g_gold.V;
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(g_model, 64, 8, &a, &err) == 0);
    REQUIRE(model_state_new(g_model, 64, 8, &b, &err) == 0);
    float *la = malloc(sizeof(float) * 2 * V), *lb = malloc(sizeof(float) * 2 * V);
    const int32_t *tok = g_gold.ids + PREFIX;
    int32_t probe[2] = {g_gold.ids[20], g_gold.ids[3]};
    for (int keep = 1; keep <= 4; keep++) {
        model_state_reset(a);
        model_state_reset(b);
        REQUIRE(fwd(a, g_gold.ids, PREFIX, NULL, NULL, 0) == 0);
        REQUIRE(fwd(b, g_gold.ids, PREFIX, NULL, NULL, 0) == 0);
        REQUIRE(fwd(a, tok, 4, NULL, NULL, 1) == 0);
        CHECK_MSG(model_state_commit(a, keep, &err) == 0, "commit: %s", err.msg);
        REQUIRE(fwd(b, tok, keep, NULL, NULL, 0) == 0);
        REQUIRE(fwd(a, probe, 2, la, NULL, 0) == 0);
        REQUIRE(fwd(b, probe, 2, lb, NULL, 0) == 0);
        CHECK_MSG(!memcmp(la, lb, sizeof(float) * 2 * V), "keep=%d: next-step logits differ (max|d| %.3g)", keep,
                  max_abs_diff(la, lb, (size_t)2 * V));
    }
    free(la), free(lb);
    model_state_free(a);
    model_state_free(b);
}

TEST(test_mtp_rows_on_pool) {
    int H = g_gold.H, T = 40;
    mtplx_err err = {0};
    model_state *s = NULL;
    REQUIRE(model_state_new(g_model, 64, 8, &s, &err) == 0);
    float *hid = malloc(sizeof(float) * (size_t)T * H), *oa = malloc(sizeof(float) * (size_t)T * H),
          *ob = malloc(sizeof(float) * (size_t)T * H);
    REQUIRE(fwd(s, g_gold.ids, T, NULL, hid, 0) == 0);
    mtp_state *ma = NULL, *mb = NULL;
    REQUIRE(mtp_state_new(g_model, 64, &ma, &err) == 0);
    REQUIRE(mtp_state_new(g_model, 64, &mb, &err) == 0);
    /* a long prefix in one call, then 4 rows at once vs one at a time */
    REQUIRE(model_mtp_forward(g_model, ma, hid, g_gold.ids + 1, T - 5, oa, &err) == 0);
    REQUIRE(model_mtp_forward(g_model, mb, hid, g_gold.ids + 1, T - 5, ob, &err) == 0);
    CHECK(!memcmp(oa, ob, sizeof(float) * (size_t)(T - 5) * H));
    REQUIRE(model_mtp_forward(g_model, ma, hid + (size_t)(T - 5) * H, g_gold.ids + T - 4, 4, oa, &err) == 0);
    for (int t = 0; t < 4; t++)
        REQUIRE(model_mtp_forward(g_model, mb, hid + (size_t)(T - 5 + t) * H, g_gold.ids + T - 4 + t, 1,
                                  ob + (size_t)t * H, &err) == 0);
    CHECK(!memcmp(oa, ob, sizeof(float) * 4 * (size_t)H));
    free(hid), free(oa), free(ob);
    mtp_state_free(ma);
    mtp_state_free(mb);
    model_state_free(s);
}

int main(void) {
    setenv("MTPLX_THREADS", "3", 1); /* before the pool exists: split work even on a 1-CPU machine */
    mtplx_err err = {0};
    if (model_load(k_dir, &g_model, &err) || golden_open("models/qwen35-tiny-code/golden.safetensors", &g_gold, &err)) {
        fprintf(stderr, "cannot load %s: %s\n", k_dir, err.msg);
        return 1;
    }
    RUN(test_prefill_matches_golden_on_pool);
    RUN(test_rows_match_stepwise_on_pool);
    RUN(test_commit_on_pool);
    RUN(test_mtp_rows_on_pool);
    golden_close(&g_gold);
    model_free(g_model);
    return TEST_SUMMARY();
}
