/* test_family_goldens.c — every non-Qwen3.5-dense family against its HF fp32 golden (public shape
 * and the other shapes in goldens-extra): one prefill forward over all T tokens and T single-token
 * decode steps, logits and post-norm hidden within 1e-3 with identical argmax, and the MTP head's
 * logits where the golden has them (qwen3_5_moe, qwen3_next, DeepSeek's model.layers.{N} layer). */
#include <stdio.h>

#include "fwd_util.h"
#include "test.h"

#define TOL 1e-3

static int argmax_mismatch_count(const float *a, const float *b, int T, int V) {
    int n = 0;
    for (int t = 0; t < T; t++) n += argmax(a + (size_t)t * V, V) != argmax(b + (size_t)t * V, V);
    return n;
}

/* MTP logits of rows 0..T-2 (MTP(embed(ids[t+1]), hidden[t])): as one call, or row by row. */
static double mtp_diff(const mtplx_model *m, const golden *g, const float *hidden, int T, int stepwise, int *mism) {
    mtplx_err err = {0};
    int H = g->H, V = g->V;
    mtp_state *ms = NULL;
    if (mtp_state_new(m, T, &ms, &err)) {
        T_FAIL("mtp_state_new: %s", err.msg);
        return 1e9;
    }
    float *mh = malloc(sizeof(float) * (size_t)T * H), *ml = malloc(sizeof(float) * (size_t)T * V);
    int R = T - 1;
    if (stepwise) {
        for (int t = 0; t < R; t++) {
            CHECK_MSG(model_mtp_forward(m, ms, hidden + (size_t)t * H, g->ids + t + 1, 1, mh + (size_t)t * H, &err) == 0,
                      "mtp step %d: %s", t, err.msg);
        }
    } else {
        CHECK_MSG(model_mtp_forward(m, ms, hidden, g->ids + 1, R, mh, &err) == 0, "mtp: %s", err.msg);
    }
    /* the MTP layer's own head: DeepSeek's shared_head.head, otherwise the LM head */
    CHECK(model_lm_head(m, HEAD_MTP, mh, R, ml, &err) == 0);
    double d = max_abs_diff(ml, g->mtp_logits, (size_t)R * V);
    *mism = argmax_mismatch_count(ml, g->mtp_logits, R, V);
    free(mh);
    free(ml);
    mtp_state_free(ms);
    return d;
}

/* stepwise = 0: one forward of all T tokens; 1: T decode steps. max_rows > 0 limits T. */
static void check_golden(const char *dir, int stepwise, int max_rows) {
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
    CHECK_INT(model_config_of(m)->vocab_size, V);
    model_state *s = NULL;
    REQUIRE(model_state_new(m, T, stepwise ? 1 : 8, &s, &err) == 0);
    float *logits = malloc(sizeof(float) * (size_t)T * V), *hidden = malloc(sizeof(float) * (size_t)T * H);
    if (stepwise) {
        for (int t = 0; t < T; t++) {
            fwd_request req = {.logits = logits + (size_t)t * V, .hidden = hidden + (size_t)t * H};
            CHECK_MSG(model_forward(m, s, g.ids + t, 1, &req, &err) == 0, "step %d: %s", t, err.msg);
        }
    } else {
        fwd_request req = {.logits = logits, .hidden = hidden};
        CHECK_MSG(model_forward(m, s, g.ids, T, &req, &err) == 0, "forward: %s", err.msg);
    }
    double dl = max_abs_diff(logits, g.logits, (size_t)T * V), dh = max_abs_diff(hidden, g.hidden, (size_t)T * H);
    printf("%-44s %s T=%d max|dlogits|=%.3g max|dhidden|=%.3g", dir, stepwise ? "decode " : "prefill", T, dl, dh);
    CHECK_MSG(dl <= TOL, "%s: logits max|d| %.3g > %g", dir, dl, TOL);
    CHECK_MSG(dh <= TOL, "%s: hidden max|d| %.3g > %g", dir, dh, TOL);
    CHECK_INT(argmax_mismatch_count(logits, g.logits, T, V), 0);
    if (g.mtp_logits) {
        CHECK_MSG(model_has_mtp(m), "%s: golden has mtp_logits but the model has no MTP head", dir);
        if (model_has_mtp(m)) {
            int mism = 0;
            double dm = mtp_diff(m, &g, hidden, T, stepwise, &mism);
            printf(" max|dmtp|=%.3g", dm);
            CHECK_MSG(dm <= TOL, "%s: mtp_logits max|d| %.3g > %g", dir, dm, TOL);
            CHECK_INT(mism, 0);
        }
    }
    printf("\n");
    free(logits);
    free(hidden);
    model_state_free(s);
    model_free(m);
    golden_close(&g);
}

static const char *k_dirs[] = {
    "tests/data/goldens/qwen3_5_moe",          "tests/data/goldens-extra/qwen3_5_moe_b",
    "tests/data/goldens/qwen3_next",           "tests/data/goldens-extra/qwen3_next_b",
    "tests/data/goldens/qwen3_dense",          "tests/data/goldens-extra/qwen3_dense_b",
    "tests/data/goldens/llama",                "tests/data/goldens-extra/llama_llama3rope",
    "tests/data/goldens-extra/llama_linearrope", "tests/data/goldens/deepseek_v3",
    "tests/data/goldens-extra/deepseek_v3_b",  "tests/data/goldens-extra/deepseek_v3_mtp",
    /* YaRN RoPE (tools/make_family_goldens.py): DeepSeek with mscale / mscale_all_dim, Qwen3 plain */
    "tests/data/goldens-family/deepseek_v3_yarn", "tests/data/goldens-family/qwen3_yarn",
    /* MLA without q LoRA, NeoX rope (rope_interleave false), 3 groups, tied head */
    "tests/data/goldens-family/deepseek_v3_noqlora",
};
#define N_DIRS (int)(sizeof k_dirs / sizeof k_dirs[0])

TEST(test_family_goldens_prefill) {
    for (int i = 0; i < N_DIRS; i++) check_golden(k_dirs[i], 0, 0);
}

TEST(test_family_goldens_stepwise_decode) {
    for (int i = 0; i < N_DIRS; i++) check_golden(k_dirs[i], 1, test_sanitized() ? 8 : 0);
}

/* Row invariance (DESIGN.md §3): the logits of a T-row forward are bit-identical to T single-row
 * decode steps, and to a verify-sized call (4 rows at a time), for every family. */
TEST(test_family_rows_bit_identical) {
    for (int i = 0; i < N_DIRS; i++) {
        char gpath[512];
        snprintf(gpath, sizeof gpath, "%s/golden.safetensors", k_dirs[i]);
        mtplx_err err = {0};
        golden g;
        REQUIRE(golden_open(gpath, &g, &err) == 0);
        mtplx_model *m = NULL;
        if (model_load(k_dirs[i], &m, &err)) {
            T_FAIL("model_load(%s): %s", k_dirs[i], err.msg);
            golden_close(&g);
            continue;
        }
        int T = g.T, V = g.V;
        float *a = malloc(sizeof(float) * (size_t)T * V), *b = malloc(sizeof(float) * (size_t)T * V);
        for (int chunk = 1; chunk <= 4; chunk += 3) {
            model_state *s1 = NULL, *s2 = NULL;
            REQUIRE(model_state_new(m, T, 8, &s1, &err) == 0 && model_state_new(m, T, 8, &s2, &err) == 0);
            fwd_request ra = {.logits = a};
            CHECK(model_forward(m, s1, g.ids, T, &ra, &err) == 0);
            for (int t = 0; t < T; t += chunk) {
                int n = T - t < chunk ? T - t : chunk;
                fwd_request rb = {.logits = b + (size_t)t * V};
                CHECK(model_forward(m, s2, g.ids + t, n, &rb, &err) == 0);
            }
            CHECK_MSG(memcmp(a, b, sizeof(float) * (size_t)T * V) == 0,
                      "%s: %d-row calls differ from one %d-row call (max %.3g)", k_dirs[i], chunk, T,
                      max_abs_diff(a, b, (size_t)T * V));
            model_state_free(s1);
            model_state_free(s2);
        }
        free(a);
        free(b);
        model_free(m);
        golden_close(&g);
    }
}

int main(void) {
    RUN(test_family_goldens_prefill);
    RUN(test_family_goldens_stepwise_decode);
    RUN(test_family_rows_bit_identical);
    return TEST_SUMMARY();
}
