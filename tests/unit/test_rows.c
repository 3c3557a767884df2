/* test_rows.c — row invariance (DESIGN.md §3) and capture/commit rollback, bit for bit:
 *   - each row of a T-row forward (T = 2..8) equals single-token decode (memcmp of logits and hidden);
 *   - so does each row of a 600-token prefill (bf16 model: the prefill-chunk paths);
 *   - model_state_commit(keep) after a capturing T-row forward leaves a state whose next step is
 *     bit-identical to a state that only ever forwarded those keep rows;
 *   - the MTP head's multi-row call equals its single-row calls.
 * Run on the dense golden checkpoint (HF layout, GQA, partial RoPE, Hv = 2·Hk, fp32 weights), and
 * the first and last on the bf16 checkpoint models/qwen35-tiny-code too, whose matmuls take the bf16
 * kernels (AMX tiles, AVX512-BF16 dot products or the FMA kernel, whichever this CPU runs). */
#include <stdio.h>

#include "fwd_util.h"
#include "rows_util.h"
#include "test.h"

static const char *k_dir = "tests/data/goldens/qwen3_5_dense";
#define PREFIX 5

static mtplx_model *g_model;
static golden g_gold;

/* Forward tokens[0..n) of g_model as one call into s (rows_util.h). */
static int fwd(model_state *s, const int32_t *tok, int n, float *logits, float *hidden, int capture) {
    return fwd_rows(g_model, s, tok, n, logits, hidden, capture);
}

static void check_prefill_rows(void) {
    const model_config *c = model_config_of(g_model);
    check_rows_match_stepwise(g_model, g_gold.ids, PREFIX, 8, c->vocab_size, c->hidden_size);
}

/* A long prefill in one call — a whole chunk of the backend's prefill rows and a partial one (600
 * tokens at the default 512 rows, src/model/state.c; MTPLX_PREFILL_ROWS=128 makes it 150: the ARM64 run
 * under qemu, where the rows cost); >32-row matmuls packed once, attention in 32-query blocks over
 * 64-key tiles, row ops split over the pool — against the same tokens as single-token decode steps for
 * the first half and one call from the middle for the rest (its chunk boundaries fall elsewhere):
 * every row's hidden state and the last rows' logits, bit for bit. */
static void check_long_prefill(void) {
    enum { NL = 4 };
    const int chunk = model_prefill_rows(g_model), N = chunk + chunk * 11 / 64, half = N / 2;
    const model_config *c = model_config_of(g_model);
    int V = c->vocab_size, H = c->hidden_size;
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(g_model, N + 1, 1, &a, &err) == 0);
    REQUIRE(model_state_new(g_model, N + 1, 1, &b, &err) == 0);
    int32_t *tok = malloc(sizeof(int32_t) * N);
    float *la = malloc(sizeof(float) * NL * V), *ha = malloc(sizeof(float) * N * H);
    float *lb = malloc(sizeof(float) * NL * V), *hb = malloc(sizeof(float) * N * H);
    for (int i = 0; i < N; i++) tok[i] = (int32_t)((i * 7919 + 13) % V);
    fwd_request req = {.logits = la, .logits_from = N - NL, .hidden = ha};
    REQUIRE(model_forward(g_model, a, tok, N, &req, &err) == 0);
    for (int t = 0; t < half; t++) {
        fwd_request one = {.hidden = hb + (size_t)t * H};
        REQUIRE(model_forward(g_model, b, tok + t, 1, &one, &err) == 0);
    }
    fwd_request rest = {.logits = lb, .logits_from = N - half - NL, .hidden = hb + (size_t)half * H};
    REQUIRE(model_forward(g_model, b, tok + half, N - half, &rest, &err) == 0);
    int bad = -1;
    for (int t = 0; t < N && bad < 0; t++)
        if (memcmp(ha + (size_t)t * H, hb + (size_t)t * H, sizeof(float) * H)) bad = t;
    CHECK_MSG(bad < 0, "%d-token prefill: row %d's hidden differs from %s", N, bad,
              bad < half ? "stepwise decode" : "the call from the middle");
    CHECK_MSG(!memcmp(la, lb, sizeof(float) * NL * V), "%d-token prefill: last rows' logits differ (max|d| %.3g)", N,
              max_abs_diff(la, lb, NL * V));
    free(tok), free(la), free(ha), free(lb), free(hb);
    model_state_free(a);
    model_state_free(b);
}

TEST(test_prefill_rows_match_stepwise_decode) { check_prefill_rows(); }
TEST(test_bf16_long_prefill_matches_stepwise_decode) { check_long_prefill(); }
TEST(test_bf16_prefill_rows_match_stepwise_decode) { check_prefill_rows(); }

TEST(test_commit_matches_state_that_saw_only_kept_rows) {
    const model_config *c = model_config_of(g_model);
    int V = c->vocab_size, H = c->hidden_size;
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(g_model, 64, 8, &a, &err) == 0);
    REQUIRE(model_state_new(g_model, 64, 8, &b, &err) == 0);
    float *la = malloc(sizeof(float) * 2 * V), *lb = malloc(sizeof(float) * 2 * V);
    float *ha = malloc(sizeof(float) * 2 * H), *hb = malloc(sizeof(float) * 2 * H);
    const int32_t *tok = g_gold.ids + PREFIX;
    int32_t probe[2] = {g_gold.ids[20], g_gold.ids[3]};
    for (int T = 2; T <= 8; T++) {
        for (int keep = 1; keep <= T; keep++) {
            model_state_reset(a);
            model_state_reset(b);
            REQUIRE(fwd(a, g_gold.ids, PREFIX, NULL, NULL, 0) == 0);
            REQUIRE(fwd(b, g_gold.ids, PREFIX, NULL, NULL, 0) == 0);
            REQUIRE(fwd(a, tok, T, NULL, NULL, 1) == 0);
            CHECK_MSG(model_state_commit(a, keep, &err) == 0, "commit: %s", err.msg);
            CHECK_INT(model_state_len(a), PREFIX + keep);
            REQUIRE(fwd(b, tok, keep, NULL, NULL, 0) == 0);
            /* two more steps: the rolled-back state must evolve identically */
            REQUIRE(fwd(a, probe, 2, la, ha, 0) == 0);
            REQUIRE(fwd(b, probe, 2, lb, hb, 0) == 0);
            CHECK_MSG(!memcmp(la, lb, sizeof(float) * 2 * V), "T=%d keep=%d: next-step logits differ (max|d| %.3g)",
                      T, keep, max_abs_diff(la, lb, (size_t)2 * V));
            CHECK_MSG(!memcmp(ha, hb, sizeof(float) * 2 * H), "T=%d keep=%d: next-step hidden differs", T, keep);
        }
    }
    free(la), free(lb), free(ha), free(hb);
    model_state_free(a);
    model_state_free(b);
}

TEST(test_commit_refuses_without_capture_or_bad_keep) {
    mtplx_err err = {0};
    model_state *a = NULL;
    REQUIRE(model_state_new(g_model, 32, 4, &a, &err) == 0);
    REQUIRE(fwd(a, g_gold.ids, 3, NULL, NULL, 0) == 0);
    CHECK_INT(model_state_commit(a, 1, &err), MTPLX_EINVAL);
    REQUIRE(fwd(a, g_gold.ids + 3, 3, NULL, NULL, 1) == 0);
    CHECK_INT(model_state_commit(a, 0, &err), MTPLX_EINVAL);
    CHECK_INT(model_state_commit(a, 4, &err), MTPLX_EINVAL);
    CHECK_INT(model_state_commit(a, 2, &err), 0);
    CHECK_INT(model_state_commit(a, 2, &err), MTPLX_EINVAL); /* the capture is consumed */
    CHECK_INT(model_state_len(a), 5);
    /* capturing more rows than max_rows is refused, not overflowed */
    fwd_request req = {.capture = 1};
    CHECK_INT(model_forward(g_model, a, g_gold.ids, 5, &req, &err), MTPLX_EINVAL);
    model_state_free(a);
}

TEST(test_forward_rejects_bad_input) {
    mtplx_err err = {0};
    model_state *a = NULL;
    REQUIRE(model_state_new(g_model, 4, 2, &a, &err) == 0);
    int32_t bad[2] = {1, model_config_of(g_model)->vocab_size};
    CHECK_INT(model_forward(g_model, a, bad, 2, NULL, &err), MTPLX_EINVAL);
    CHECK(strstr(err.msg, "vocabulary") != NULL);
    bad[1] = -1;
    CHECK_INT(model_forward(g_model, a, bad, 2, NULL, &err), MTPLX_EINVAL);
    CHECK_INT(model_state_len(a), 0);
    CHECK_INT(model_forward(g_model, a, g_gold.ids, 5, NULL, &err), MTPLX_ERANGE); /* capacity 4 */
    CHECK_INT(model_forward(g_model, a, g_gold.ids, 0, NULL, &err), MTPLX_EINVAL);
    model_state_free(a);
}

static void check_mtp_rows(void) {
    const model_config *c = model_config_of(g_model);
    int H = c->hidden_size, T = 8;
    mtplx_err err = {0};
    model_state *s = NULL;
    REQUIRE(model_state_new(g_model, 64, 8, &s, &err) == 0);
    float *hid = malloc(sizeof(float) * (size_t)T * H), *oa = malloc(sizeof(float) * (size_t)T * H),
          *ob = malloc(sizeof(float) * (size_t)T * H);
    REQUIRE(fwd(s, g_gold.ids, T, NULL, hid, 0) == 0);
    mtp_state *ma = NULL, *mb = NULL;
    REQUIRE(mtp_state_new(g_model, 16, &ma, &err) == 0);
    REQUIRE(mtp_state_new(g_model, 16, &mb, &err) == 0);
    REQUIRE(model_mtp_forward(g_model, ma, hid, g_gold.ids + 1, T - 1, oa, &err) == 0);
    for (int t = 0; t + 1 < T; t++)
        REQUIRE(model_mtp_forward(g_model, mb, hid + (size_t)t * H, g_gold.ids + 1 + t, 1, ob + (size_t)t * H, &err) == 0);
    CHECK(!memcmp(oa, ob, sizeof(float) * (size_t)(T - 1) * H));
    /* trim + re-append gives the same row again */
    CHECK_INT(mtp_state_trim(mb, 3, &err), 0);
    CHECK_INT(mtp_state_len(mb), 3);
    REQUIRE(model_mtp_forward(g_model, mb, hid + 3 * (size_t)H, g_gold.ids + 4, 1, ob, &err) == 0);
    CHECK(!memcmp(oa + 3 * (size_t)H, ob, sizeof(float) * H));
    CHECK_INT(mtp_state_trim(mb, 9, &err), MTPLX_EINVAL);
    /* hidden_out may alias hidden */
    mtp_state *mc = NULL;
    REQUIRE(mtp_state_new(g_model, 16, &mc, &err) == 0);
    memcpy(ob, hid, sizeof(float) * (size_t)T * H);
    REQUIRE(model_mtp_forward(g_model, mc, ob, g_gold.ids + 1, T - 1, ob, &err) == 0);
    CHECK(!memcmp(oa, ob, sizeof(float) * (size_t)(T - 1) * H));
    mtp_state_free(mc);
    free(hid), free(oa), free(ob);
    mtp_state_free(ma);
    mtp_state_free(mb);
    model_state_free(s);
}

TEST(test_mtp_rows_match_single_rows) { check_mtp_rows(); }
TEST(test_bf16_mtp_rows_match_single_rows) { check_mtp_rows(); }

/* Swap the model under test to dir and its golden. */
static int use_model(const char *dir, const char *gold) {
    mtplx_err err = {0};
    if (g_model) golden_close(&g_gold), model_free(g_model), g_model = NULL;
    if (model_load(dir, &g_model, &err) || golden_open(gold, &g_gold, &err)) {
        fprintf(stderr, "cannot load %s: %s\n", dir, err.msg);
        return -1;
    }
    return 0;
}

int main(void) {
    if (use_model(k_dir, "tests/data/goldens/qwen3_5_dense/golden.safetensors")) return 1;
    RUN(test_prefill_rows_match_stepwise_decode);
    RUN(test_commit_matches_state_that_saw_only_kept_rows);
    RUN(test_commit_refuses_without_capture_or_bad_keep);
    RUN(test_forward_rejects_bad_input);
    RUN(test_mtp_rows_match_single_rows);
    if (use_model("models/qwen35-tiny-code", "models/qwen35-tiny-code/golden.safetensors")) return 1;
    RUN(test_bf16_prefill_rows_match_stepwise_decode);
    RUN(test_bf16_long_prefill_matches_stepwise_decode);
    RUN(test_bf16_mtp_rows_match_single_rows);
    golden_close(&g_gold);
    model_free(g_model);
    return TEST_SUMMARY();
}
