/* test_forward.c — the Qwen3.5 forward against HF fp32 goldens (prefill and token-by-token decode,
 * trunk and MTP head), greedy continuation of the embedded model, row invariance and capture/commit
 * rollback. */
#include <stdio.h>

#include "fwd_util.h"
#include "test.h"

#define TOL 1e-3

static const char *k_dense_dir = "tests/data/goldens/qwen3_5_dense";
static const char *k_dense_b_dir = "tests/data/goldens-extra/qwen3_5_dense_b";
static const char *k_dense_c_dir = "tests/data/goldens-extra/qwen3_5_dense_c";
static const char *k_tiny_dir = "models/qwen35-tiny-code";

/* Compare a model's prefill (one forward over all T tokens) and its MTP rows with a golden. */
static void check_golden_prefill(const char *dir) {
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    mtplx_err err = {0};
    golden g;
    REQUIRE(golden_open(gpath, &g, &err) == 0);
    mtplx_model *m = NULL;
    int rc = model_load(dir, &m, &err);
    CHECK_MSG(rc == 0, "model_load(%s): %s", dir, err.msg);
    if (rc) {
        golden_close(&g);
        return;
    }
    int T = g.T, V = g.V, H = g.H;
    CHECK_INT(model_config_of(m)->vocab_size, V);
    model_state *s = NULL;
    REQUIRE(model_state_new(m, T + 8, 8, &s, &err) == 0);
    float *logits = malloc(sizeof(float) * (size_t)T * V), *hidden = malloc(sizeof(float) * (size_t)T * H);
    fwd_request req = {.logits = logits, .hidden = hidden};
    CHECK_MSG(model_forward(m, s, g.ids, T, &req, &err) == 0, "forward: %s", err.msg);
    double dl = max_abs_diff(logits, g.logits, (size_t)T * V), dh = max_abs_diff(hidden, g.hidden, (size_t)T * H);
    printf("%s prefill: T=%d max|dlogits|=%.3g max|dhidden|=%.3g\n", dir, T, dl, dh);
    CHECK_MSG(dl <= TOL, "logits max|d| %.3g > %g", dl, TOL);
    CHECK_MSG(dh <= TOL, "hidden max|d| %.3g > %g", dh, TOL);
    CHECK_INT(argmax_mismatches(logits, g.logits, T, V), 0);
    if (g.mtp_logits) {
        CHECK(model_has_mtp(m));
        mtp_state *ms = NULL;
        REQUIRE(mtp_state_new(m, T, &ms, &err) == 0);
        float *mh = malloc(sizeof(float) * (size_t)T * H), *ml = malloc(sizeof(float) * (size_t)T * V);
        CHECK_MSG(model_mtp_forward(m, ms, hidden, g.ids + 1, T - 1, mh, &err) == 0, "mtp: %s", err.msg);
        CHECK(model_lm_head(m, HEAD_TARGET, mh, T - 1, ml, &err) == 0);
        double dm = max_abs_diff(ml, g.mtp_logits, (size_t)(T - 1) * V);
        printf("%s prefill: max|dmtp_logits|=%.3g\n", dir, dm);
        CHECK_MSG(dm <= TOL, "mtp_logits max|d| %.3g > %g", dm, TOL);
        CHECK_INT(argmax_mismatches(ml, g.mtp_logits, T - 1, V), 0);
        free(mh);
        free(ml);
        mtp_state_free(ms);
    }
    free(logits);
    free(hidden);
    model_state_free(s);
    model_free(m);
    golden_close(&g);
}

/* The same rows computed by T single-token decode steps (and T-1 single MTP steps). Under the
 * sanitizers only the first max_rows rows (0 = all) are stepped, to keep the suite fast. */
static void check_golden_stepwise(const char *dir, int max_rows) {
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    mtplx_err err = {0};
    golden g;
    REQUIRE(golden_open(gpath, &g, &err) == 0);
    mtplx_model *m = NULL;
    if (model_load(dir, &m, &err)) {
        T_FAIL("model_load(%s): %s", dir, err.msg);
        golden_close(&g);
        return;
    }
    int T = g.T, V = g.V, H = g.H;
    if (max_rows > 0 && T > max_rows) T = max_rows;
    model_state *s = NULL;
    REQUIRE(model_state_new(m, T, 1, &s, &err) == 0);
    float *logits = malloc(sizeof(float) * (size_t)T * V), *hidden = malloc(sizeof(float) * (size_t)T * H);
    for (int t = 0; t < T; t++) {
        fwd_request req = {.logits = logits + (size_t)t * V, .hidden = hidden + (size_t)t * H};
        CHECK_MSG(model_forward(m, s, g.ids + t, 1, &req, &err) == 0, "step %d: %s", t, err.msg);
    }
    CHECK_INT(model_state_len(s), T);
    double dl = max_abs_diff(logits, g.logits, (size_t)T * V), dh = max_abs_diff(hidden, g.hidden, (size_t)T * H);
    printf("%s stepwise: max|dlogits|=%.3g max|dhidden|=%.3g\n", dir, dl, dh);
    CHECK_MSG(dl <= TOL, "logits max|d| %.3g > %g", dl, TOL);
    CHECK_MSG(dh <= TOL, "hidden max|d| %.3g > %g", dh, TOL);
    CHECK_INT(argmax_mismatches(logits, g.logits, T, V), 0);
    if (g.mtp_logits) {
        mtp_state *ms = NULL;
        REQUIRE(mtp_state_new(m, T, &ms, &err) == 0);
        float *mh = malloc(sizeof(float) * (size_t)H), *ml = malloc(sizeof(float) * (size_t)T * V);
        for (int t = 0; t + 1 < T; t++) {
            CHECK(model_mtp_forward(m, ms, hidden + (size_t)t * H, g.ids + t + 1, 1, mh, &err) == 0);
            CHECK(model_lm_head(m, HEAD_TARGET, mh, 1, ml + (size_t)t * V, &err) == 0);
        }
        double dm = max_abs_diff(ml, g.mtp_logits, (size_t)(T - 1) * V);
        printf("%s stepwise: max|dmtp_logits|=%.3g\n", dir, dm);
        CHECK_MSG(dm <= TOL, "mtp_logits max|d| %.3g > %g", dm, TOL);
        CHECK_INT(argmax_mismatches(ml, g.mtp_logits, T - 1, V), 0);
        free(mh);
        free(ml);
        mtp_state_free(ms);
    }
    free(logits);
    free(hidden);
    model_state_free(s);
    model_free(m);
    golden_close(&g);
}

TEST(test_golden_qwen3_5_dense_prefill) { check_golden_prefill(k_dense_dir); }
TEST(test_golden_qwen3_5_dense_stepwise) { check_golden_stepwise(k_dense_dir, 0); }
/* other shapes: Dk 8 != Dv 16, Hv/Hk 3, head_dim 16, rotary 0.5, untied head, vocab 300 */
TEST(test_golden_qwen3_5_dense_b_prefill) { check_golden_prefill(k_dense_b_dir); }
TEST(test_golden_qwen3_5_dense_b_stepwise) { check_golden_stepwise(k_dense_b_dir, 0); }
/* Dk 16 > Dv 8, Hv/Hk 3, 5 layers (interval 3), 4/2 heads, untied, vocab 301, T = 40 > prefill chunk */
TEST(test_golden_qwen3_5_dense_c_prefill) { check_golden_prefill(k_dense_c_dir); }
TEST(test_golden_qwen3_5_dense_c_stepwise) { check_golden_stepwise(k_dense_c_dir, 0); }
TEST(test_golden_tiny_code_prefill) { check_golden_prefill(k_tiny_dir); }
TEST(test_golden_tiny_code_stepwise) { check_golden_stepwise(k_tiny_dir, test_sanitized() ? 12 : 0); }

/* Greedy decoding from the golden's prompt reproduces its continuation (HF generate, greedy). */
TEST(test_tiny_code_greedy_continuation) {
    mtplx_err err = {0};
    golden g;
    REQUIRE(golden_open("models/qwen35-tiny-code/golden.safetensors", &g, &err) == 0);
    mtplx_model *m = NULL;
    REQUIRE(model_load(k_tiny_dir, &m, &err) == 0);
    int P = g.prompt_len, N = test_sanitized() ? 8 : 40, V = g.V;
    REQUIRE(P > 0 && P + N <= g.T);
    model_state *s = NULL;
    REQUIRE(model_state_new(m, P + N, 1, &s, &err) == 0);
    float *logits = malloc(sizeof(float) * (size_t)V);
    fwd_request req = {.logits = logits, .logits_from = P - 1};
    REQUIRE(model_forward(m, s, g.ids, P, &req, &err) == 0);
    req.logits_from = 0;
    int ok = 1;
    for (int i = 0; i < N; i++) {
        int32_t next = argmax(logits, V);
        if (next != g.ids[P + i]) {
            T_FAIL("token %d: expected %d, got %d", i, g.ids[P + i], next);
            ok = 0;
            break;
        }
        if (i + 1 < N) REQUIRE(model_forward(m, s, &next, 1, &req, &err) == 0);
    }
    if (ok) printf("greedy: %d tokens match the golden continuation\n", N);
    free(logits);
    model_state_free(s);
    model_free(m);
    golden_close(&g);
}

/* model_state_bytes_per_token (bench's bandwidth accounting) on the embedded model: one more
 * position adds one KV row of every trunk attention layer — a KV page's bytes over its positions,
 * less the MTP layer's share (seq_pool_page_bytes, the allocator's own figure) — and at context 0 it
 * is that row plus every GDN layer's recurrent state and conv window, read and written. */
TEST(test_state_bytes_per_token) {
    mtplx_model *m = NULL;
    mtplx_err err = {0};
    REQUIRE(model_load(k_tiny_dir, &m, &err) == 0);
    const model_config *c = model_config_of(m);
    int n_attn = 0;
    for (int l = 0; l < c->n_layers; l++) n_attn += c->layer_kinds[l] == LAYER_ATTN;
    REQUIRE(n_attn > 0 && n_attn < c->n_layers); /* both kinds of layer */
    uint64_t pos = seq_pool_page_bytes(m) / (uint64_t)model_kv_page_size() / (uint64_t)(n_attn + model_has_mtp(m)) *
                   (uint64_t)n_attn;
    uint64_t rec = (uint64_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4;
    uint64_t conv = (uint64_t)(c->conv_kernel - 1) * (2u * c->lin_k_heads * c->lin_k_dim + c->lin_v_heads * c->lin_v_dim) * 4;
    uint64_t b0 = model_state_bytes_per_token(m, 0), b100 = model_state_bytes_per_token(m, 100);
    CHECK_MSG(b100 - b0 == 100 * pos, "100 positions add %llu bytes, the KV pages say %llu",
              (unsigned long long)(b100 - b0), (unsigned long long)(100 * pos));
    CHECK_MSG(b0 == (uint64_t)(c->n_layers - n_attn) * 2 * (rec + conv) + pos, "context 0: %llu bytes",
              (unsigned long long)b0);
    model_free(m);
}

int main(void) {
    RUN(test_golden_qwen3_5_dense_prefill);
    RUN(test_golden_qwen3_5_dense_stepwise);
    RUN(test_golden_qwen3_5_dense_b_prefill);
    RUN(test_golden_qwen3_5_dense_b_stepwise);
    RUN(test_golden_qwen3_5_dense_c_prefill);
    RUN(test_golden_qwen3_5_dense_c_stepwise);
    RUN(test_golden_tiny_code_prefill);
    RUN(test_golden_tiny_code_stepwise);
    RUN(test_tiny_code_greedy_continuation);
    RUN(test_state_bytes_per_token);
    return TEST_SUMMARY();
}
