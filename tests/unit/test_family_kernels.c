/* test_family_kernels.c — the family-specific kernels against small hand computations: MoE routing
 * (softmax / sigmoid, grouped top-k with correction bias, norm_topk_prob, routed scaling), routed
 * expert accumulation (value and row invariance), RoPE scaling (linear, llama3, refusals) and the MLA
 * pieces (interleaved rotation, unequal q/k and v widths). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../src/base/err.h"
#include "../../src/kernels/matmul.h"
#include "../../src/kernels/mla.h"
#include "../../src/kernels/moe.h"
#include "../../src/model/rope_scaling.h"
#include "test.h"

static moe_router qwen_router(int E, int K, int norm) {
    moe_router r = {E, K, MOE_SCORE_SOFTMAX, norm, 1, 1, NULL, 1.0f};
    return r;
}

TEST(test_moe_softmax_topk_normalised) {
    float logits[4] = {1.f, 2.f, 3.f, 0.f}, scratch[8], w[2];
    int idx[2];
    moe_router r = qwen_router(4, 2, 1);
    CHECK_INT(kern_moe_router_check(&r, NULL), 0);
    kern_moe_route(&r, logits, idx, w, scratch);
    CHECK_INT(idx[0], 1); /* ascending expert order */
    CHECK_INT(idx[1], 2);
    double e2 = exp(2.0), e3 = exp(3.0);
    CHECK_NEAR(w[0], e2 / (e2 + e3), 1e-6);
    CHECK_NEAR(w[1], e3 / (e2 + e3), 1e-6);
}

TEST(test_moe_softmax_topk_unnormalised) {
    float logits[4] = {1.f, 2.f, 3.f, 0.f}, scratch[8], w[2];
    int idx[2];
    moe_router r = qwen_router(4, 2, 0);
    kern_moe_route(&r, logits, idx, w, scratch);
    double Z = exp(0.0) + exp(1.0) + exp(2.0) + exp(3.0);
    CHECK_INT(idx[0], 1);
    CHECK_INT(idx[1], 2);
    CHECK_NEAR(w[0], exp(2.0) / Z, 1e-6);
    CHECK_NEAR(w[1], exp(3.0) / Z, 1e-6);
}

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }

/* 8 experts in 4 groups of 2, keep 2 groups, top-3. The bias changes which groups win, but the
 * weights are the unbiased sigmoids, renormalised, times the scaling factor. */
TEST(test_moe_grouped_topk_with_bias_and_scaling) {
    float logits[8] = {0.5f, -1.f, 2.f, 0.1f, -0.5f, 1.5f, 0.f, 0.3f};
    float bias[8] = {0.f, 0.f, -1.f, -1.f, 0.4f, 0.4f, 0.f, 0.f};
    moe_router r = {8, 3, MOE_SCORE_SIGMOID, 1, 4, 2, bias, 2.5f};
    CHECK_INT(kern_moe_router_check(&r, NULL), 0);
    float scratch[16], w[3];
    int idx[3];
    kern_moe_route(&r, logits, idx, w, scratch);
    /* biased scores c = sigmoid(l) + b; group score = sum of its two (only) members */
    double c[8];
    for (int e = 0; e < 8; e++) c[e] = sigm(logits[e]) + bias[e];
    double g[4] = {c[0] + c[1], c[2] + c[3], c[4] + c[5], c[6] + c[7]};
    /* by hand: g0 = .622+.269 = .891, g1 = .881-1+.525-1 = -.594, g2 = .378+.4+.818+.4 = 1.996,
     * g3 = .5+.574 = 1.074 -> groups 2 and 3 kept; within them c4=.778 c5=1.218 c6=.5 c7=.574
     * -> experts 4, 5, 7. */
    CHECK(g[2] > g[3] && g[3] > g[0] && g[0] > g[1]);
    CHECK_INT(idx[0], 4);
    CHECK_INT(idx[1], 5);
    CHECK_INT(idx[2], 7);
    double s4 = sigm(-0.5), s5 = sigm(1.5), s7 = sigm(0.3), sum = s4 + s5 + s7;
    CHECK_NEAR(w[0], 2.5 * s4 / sum, 1e-6);
    CHECK_NEAR(w[1], 2.5 * s5 / sum, 1e-6);
    CHECK_NEAR(w[2], 2.5 * s7 / sum, 1e-6);
}

/* HF masks the experts of dropped groups with 0.0, not -inf: when every biased score of the kept
 * groups is negative, a dropped expert (score 0) outranks them. */
TEST(test_moe_grouped_dropped_experts_rank_as_zero) {
    float logits[4] = {3.f, 2.f, -3.f, -3.f};
    float bias[4] = {-2.f, -2.f, -2.f, -2.f};
    moe_router r = {4, 2, MOE_SCORE_SIGMOID, 0, 2, 1, bias, 1.0f};
    float scratch[8], w[2];
    int idx[2];
    kern_moe_route(&r, logits, idx, w, scratch);
    /* group 0 kept (c = -1.05, -1.12), group 1 dropped -> 0, 0: the top-2 are experts 2 and 3 */
    CHECK_INT(idx[0], 2);
    CHECK_INT(idx[1], 3);
    CHECK_NEAR(w[0], sigm(-3.0), 1e-7); /* unbiased, no renormalisation, scaling 1 */
}

TEST(test_moe_router_check_rejects_impossible) {
    mtplx_err e;
    moe_router r = qwen_router(4, 5, 1);
    CHECK_INT(kern_moe_router_check(&r, &e), MTPLX_EINVAL);
    CHECK(strstr(e.msg, "num_experts_per_tok") != NULL);
    moe_router g = {6, 2, MOE_SCORE_SIGMOID, 1, 4, 2, NULL, 1.0f};
    CHECK_INT(kern_moe_router_check(&g, &e), MTPLX_EINVAL);
    CHECK(strstr(e.msg, "n_group") != NULL);
}

/* Experts with H = 3, I = 2; expert e's weights are small distinct numbers. */
#define EH 3
#define EI 2
#define EE 3
static float g_w[EE][EI][EH], u_w[EE][EI][EH], d_w[EE][EH][EI];

static void make_experts(moe_expert *ex) {
    for (int e = 0; e < EE; e++) {
        for (int i = 0; i < EI; i++)
            for (int h = 0; h < EH; h++) {
                g_w[e][i][h] = 0.1f * (float)(e + 1) - 0.05f * (float)(i * EH + h);
                u_w[e][i][h] = 0.2f - 0.03f * (float)(e * 7 + i * EH + h);
            }
        for (int h = 0; h < EH; h++)
            for (int i = 0; i < EI; i++) d_w[e][h][i] = 0.3f * (float)(h - 1) + 0.1f * (float)(i + e);
        ex[e].gate = (kern_weight){.dtype = DT_F32, .rows = EI, .cols = EH, .data = g_w[e]};
        ex[e].up = (kern_weight){.dtype = DT_F32, .rows = EI, .cols = EH, .data = u_w[e]};
        ex[e].down = (kern_weight){.dtype = DT_F32, .rows = EH, .cols = EI, .data = d_w[e]};
    }
}

static void expert_by_hand(int e, const float *x, double *y) {
    double a[EI];
    for (int i = 0; i < EI; i++) {
        double g = 0, u = 0;
        for (int h = 0; h < EH; h++) {
            g += g_w[e][i][h] * x[h];
            u += u_w[e][i][h] * x[h];
        }
        a[i] = g / (1 + exp(-g)) * u;
    }
    for (int h = 0; h < EH; h++) {
        y[h] = 0;
        for (int i = 0; i < EI; i++) y[h] += d_w[e][h][i] * a[i];
    }
}

TEST(test_moe_experts_match_hand_sum) {
    moe_expert ex[EE];
    make_experts(ex);
    float x[2][EH] = {{1.f, -2.f, 0.5f}, {0.3f, 0.7f, -1.1f}};
    int idx[2][2] = {{0, 2}, {1, 2}};
    float w[2][2] = {{0.25f, 0.75f}, {0.6f, 0.4f}};
    moe_scratch s;
    REQUIRE(kern_moe_scratch_init(&s, 2, EH, EI, NULL) == 0);
    float out[2][EH];
    kern_moe_experts(&out[0][0], EH, &x[0][0], EH, 2, ex, EE, &idx[0][0], &w[0][0], 2, &s);
    for (int t = 0; t < 2; t++) {
        double y0[EH], y1[EH];
        expert_by_hand(idx[t][0], x[t], y0);
        expert_by_hand(idx[t][1], x[t], y1);
        for (int h = 0; h < EH; h++) CHECK_NEAR(out[t][h], w[t][0] * y0[h] + w[t][1] * y1[h], 1e-6);
    }
    kern_moe_scratch_free(&s);
}

/* A row's output is bit-identical whether it is computed alone or with a few other rows or with
 * many: 70 rows of 2 routes (140 pairs: two windows of the 128-row scratch, experts 1 and 2 split
 * between them) and 300 rows (600 pairs, windows of 300: every expert split), each against one-row
 * calls and a 5-row call. Every expert gets more than MM_TMAX (32) rows of a window here, so its rows
 * are also cut into entries of 32 (window_gather). */
TEST(test_moe_experts_row_invariant) {
    moe_expert ex[EE];
    make_experts(ex);
    enum { TMAX = 300, FEW = 5 };
    static float x[TMAX][EH], all[TMAX][EH];
    static int idx[TMAX][2];
    static float w[TMAX][2];
    for (int t = 0; t < TMAX; t++) {
        for (int h = 0; h < EH; h++) x[t][h] = sinf((float)(t * 3 + h)) * 1.7f;
        idx[t][0] = t % 2;
        idx[t][1] = 2;
        w[t][0] = 0.1f * (float)(t % 13 + 1);
        w[t][1] = 1.0f - w[t][0];
    }
    const int Ts[2] = {MOE_BATCH_ROWS / 2 + 6, TMAX};
    for (int c = 0; c < 2; c++) {
        int T = Ts[c];
        moe_scratch s;
        REQUIRE(kern_moe_scratch_init(&s, T, EH, EI, NULL) == 0);
        float few[FEW][EH], one[EH];
        kern_moe_experts(&all[0][0], EH, &x[0][0], EH, T, ex, EE, &idx[0][0], &w[0][0], 2, &s);
        kern_moe_experts(&few[0][0], EH, &x[0][0], EH, FEW, ex, EE, &idx[0][0], &w[0][0], 2, &s);
        for (int t = 0; t < T; t++) {
            kern_moe_experts(one, EH, x[t], EH, 1, ex, EE, idx[t], w[t], 2, &s);
            CHECK_MSG(memcmp(one, all[t], sizeof one) == 0, "row %d differs between the %d-row call and a single one", t, T);
            if (t < FEW) CHECK_MSG(memcmp(one, few[t], sizeof one) == 0, "row %d differs between the %d-row call and a single one", t, FEW);
        }
        kern_moe_scratch_free(&s);
    }
}

/* Windows wide enough that the gather of their rows and the weighted sum into the output go to the thread
 * pool (moe.c, window_rows_par: from 65,536 floats; here 600 rows of 256): every row still equals a one-row
 * call's (which stays on the calling thread), bit for bit, and two routes of one row to different experts
 * still add in expert order. */
TEST(test_moe_experts_wide_window_split_over_threads) {
    enum { WH = 256, WI = 16, WE = 4, WT = 300 };
    static float gw[WE][WI * WH], uw[WE][WI * WH], dw[WE][WH * WI], x[WT][WH], all[WT][WH];
    static int idx[WT][2];
    static float w[WT][2];
    moe_expert ex[WE];
    for (int e = 0; e < WE; e++) {
        for (int k = 0; k < WI * WH; k++) {
            gw[e][k] = 0.05f * sinf((float)(e * 131 + k));
            uw[e][k] = 0.05f * cosf((float)(e * 71 + 3 * k));
            dw[e][k] = 0.05f * sinf((float)(e * 17 + 5 * k + 1));
        }
        ex[e].gate = (kern_weight){.dtype = DT_F32, .rows = WI, .cols = WH, .data = gw[e]};
        ex[e].up = (kern_weight){.dtype = DT_F32, .rows = WI, .cols = WH, .data = uw[e]};
        ex[e].down = (kern_weight){.dtype = DT_F32, .rows = WH, .cols = WI, .data = dw[e]};
    }
    for (int t = 0; t < WT; t++) {
        for (int h = 0; h < WH; h++) x[t][h] = sinf((float)(t * 7 + h)) * 1.3f;
        idx[t][0] = t % 3, idx[t][1] = 3 - (t % 2); /* experts 0..2, then 2 or 3 */
        if (idx[t][1] == idx[t][0]) idx[t][1] = 3;
        w[t][0] = 0.05f * (float)(t % 17 + 1), w[t][1] = 1.0f - w[t][0];
    }
    moe_scratch s;
    REQUIRE(kern_moe_scratch_init(&s, WT, WH, WI, NULL) == 0);
    kern_moe_experts(&all[0][0], WH, &x[0][0], WH, WT, ex, WE, &idx[0][0], &w[0][0], 2, &s);
    float one[WH];
    int bad = 0;
    for (int t = 0; t < WT; t++) {
        kern_moe_experts(one, WH, x[t], WH, 1, ex, WE, idx[t], w[t], 2, &s);
        if (memcmp(one, all[t], sizeof one)) bad++;
    }
    CHECK_MSG(bad == 0, "%d of %d rows of the %d-row call differ from single-row calls", bad, WT, WT);
    kern_moe_scratch_free(&s);
}

TEST(test_rope_linear_divides_by_factor) {
    float base[8], lin[8];
    rope_scaling s = {ROPE_SCALING_LINEAR, 2.0, 0, 0, 0};
    CHECK_INT(rope_scaling_check(&s, NULL), 0);
    rope_scaled_inv_freq(base, 16, 10000.0, NULL);
    rope_scaled_inv_freq(lin, 16, 10000.0, &s);
    for (int i = 0; i < 8; i++) {
        CHECK_NEAR(base[i], pow(10000.0, -(2.0 * i) / 16.0), 1e-7 * base[i] + 1e-12);
        CHECK_NEAR(lin[i], base[i] / 2.0, 1e-7 * base[i]);
    }
}

/* theta 500000, d 16, factor 8, low 1, high 4, original context 16: wavelength bands are
 * (< 4: kept), [4, 16]: smoothed, (> 16: divided by 8). By hand: inv_freq[0] = 1, wavelength 2π
 * (medium): smooth = (16/2π − 1)/3 = 0.51549, f = (1 − smooth)/8 + smooth = 0.57605;
 * inv_freq[1] = 500000^(−1/8) = 0.19392, wavelength 32.4 (long) → 0.024240. */
TEST(test_rope_llama3_bands) {
    rope_scaling s = {ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 16};
    CHECK_INT(rope_scaling_check(&s, NULL), 0);
    float f[8];
    rope_scaled_inv_freq(f, 16, 500000.0, &s);
    CHECK_NEAR(f[0], 0.57605, 1e-4);
    CHECK_NEAR(f[1], 0.024240, 1e-5);
    for (int i = 2; i < 8; i++) CHECK_NEAR(f[i], pow(500000.0, -(2.0 * i) / 16.0) / 8.0, 1e-6 * f[i]);
    /* a high-frequency band is untouched: original context 1024 puts inv_freq[0] (wavelength 2π)
     * below 1024/4 */
    rope_scaling s2 = {ROPE_SCALING_LLAMA3, 8.0, 1.0, 4.0, 1024};
    rope_scaled_inv_freq(f, 16, 500000.0, &s2);
    CHECK_NEAR(f[0], 1.0, 0);
}

TEST(test_rope_scaling_refuses_unimplemented) {
    mtplx_err e;
    rope_scaling_kind k;
    CHECK_INT(rope_scaling_kind_parse("dynamic", &k, &e), MTPLX_EUNSUPPORTED);
    CHECK(strstr(e.msg, "dynamic") != NULL);
    CHECK_INT(rope_scaling_kind_parse("longrope", &k, &e), MTPLX_EUNSUPPORTED);
    CHECK(strstr(e.msg, "longrope") != NULL);
    CHECK_INT(rope_scaling_kind_parse("llama3", &k, &e), 0);
    CHECK_INT(k, ROPE_SCALING_LLAMA3);
    CHECK_INT(rope_scaling_kind_parse(NULL, &k, &e), 0);
    CHECK_INT(k, ROPE_SCALING_NONE);
    rope_scaling bad = {ROPE_SCALING_LLAMA3, 8.0, 4.0, 1.0, 16};
    CHECK_INT(rope_scaling_check(&bad, &e), MTPLX_EINVAL);
}

/* YaRN, d 8, theta 10000, factor 4, original context 4096, beta 32 / 1: the ramp ends are
 * floor(8·ln(4096/(32·2π)) / (2 ln 10000)) = floor(1.205) = 1 and ceil(8·ln(4096/2π) / 18.42) =
 * ceil(2.814) = 3, so dims 0, 1 keep theta^(-2i/8), dim 2 is half-way (ramp 0.5), dim 3 is divided by 4.
 * Attention factor: mscale 1 / mscale_all_dim 0.8 → (0.1 ln4 + 1) / (0.08 ln4 + 1); none → 0.1 ln4 + 1. */
TEST(test_rope_yarn_ramp_and_attention_factor) {
    rope_scaling s = {ROPE_SCALING_YARN, 4.0, 0, 0, 4096, 32, 1, 1.0, 0.8};
    CHECK_INT(rope_scaling_check(&s, NULL), 0);
    float f[4];
    rope_scaled_inv_freq(f, 8, 10000.0, &s);
    double b[4];
    for (int i = 0; i < 4; i++) b[i] = pow(10000.0, -(2.0 * i) / 8.0);
    CHECK_NEAR(f[0], b[0], 1e-7);
    CHECK_NEAR(f[1], b[1], 1e-7);
    CHECK_NEAR(f[2], 0.5 * b[2] + 0.5 * b[2] / 4, 1e-7);
    CHECK_NEAR(f[3], b[3] / 4, 1e-8);
    CHECK_NEAR(rope_attention_factor(&s), (0.1 * log(4.0) + 1) / (0.08 * log(4.0) + 1), 1e-12);
    s.mscale = s.mscale_all_dim = 0;
    CHECK_NEAR(rope_attention_factor(&s), 0.1 * log(4.0) + 1, 1e-12);
    rope_scaling none = {ROPE_SCALING_NONE, 1, 0, 0, 0, 0, 0, 0, 0};
    CHECK_NEAR(rope_attention_factor(&none), 1.0, 0);
}

/* Interleaved rotation equals HF's de-interleave + rotate-half up to the same permutation, so q·k
 * agrees with the NeoX computation on de-interleaved vectors. */
TEST(test_mla_interleaved_rope_matches_deinterleaved_neox) {
    enum { D = 8, HALF = 4 };
    float inv[HALF] = {1.f, 0.5f, 0.25f, 0.125f}, cs[D];
    float q[D] = {0.3f, -1.f, 0.7f, 0.2f, -0.4f, 0.9f, 1.1f, -0.6f};
    float k[D] = {-0.8f, 0.5f, 0.1f, 0.6f, 0.9f, -0.2f, 0.3f, 0.4f};
    int pq = 5, pk = 2;
    /* NeoX on de-interleaved copies: y[i] = x[2i], y[half+i] = x[2i+1] */
    double qn[D], kn[D];
    for (int i = 0; i < HALF; i++) {
        double aq = pq * inv[i], ak = pk * inv[i];
        double q1 = q[2 * i], q2 = q[2 * i + 1], k1 = k[2 * i], k2 = k[2 * i + 1];
        qn[i] = q1 * cos(aq) - q2 * sin(aq);
        qn[HALF + i] = q2 * cos(aq) + q1 * sin(aq);
        kn[i] = k1 * cos(ak) - k2 * sin(ak);
        kn[HALF + i] = k2 * cos(ak) + k1 * sin(ak);
    }
    double want = 0;
    for (int d = 0; d < D; d++) want += qn[d] * kn[d];
    kern_mla_cos_sin(cs, inv, D, pq);
    kern_rope_apply_interleaved(q, cs, D);
    kern_mla_cos_sin(cs, inv, D, pk);
    kern_rope_apply_interleaved(k, cs, D);
    double got = 0;
    for (int d = 0; d < D; d++) got += q[d] * k[d];
    CHECK_NEAR(got, want, 1e-5);
    /* and each pair is rotated: pair 0 of q at angle 5 */
    CHECK_NEAR(q[0], qn[0], 1e-6);
    CHECK_NEAR(q[1], qn[HALF], 1e-6);
}

TEST(test_mla_attention_unequal_widths) {
    /* two keys of width 3, values of width 2; scale 0.5 */
    float q[3] = {1.f, 0.f, 2.f};
    float k[2][3] = {{1.f, 1.f, 0.f}, {0.f, 1.f, 1.f}};
    float v[2][4] = {{1.f, 2.f, 99.f, 99.f}, {3.f, -1.f, 99.f, 99.f}}; /* ldv 4, dv 2 */
    float out[2], sc[2];
    kern_mla_attention_head(out, q, &k[0][0], 3, 3, &v[0][0], 4, 2, 2, 0.5f, sc);
    double s0 = 0.5 * 1, s1 = 0.5 * 2, p0 = exp(s0) / (exp(s0) + exp(s1)), p1 = 1 - p0;
    CHECK_NEAR(out[0], p0 * 1 + p1 * 3, 1e-6);
    CHECK_NEAR(out[1], p0 * 2 + p1 * -1, 1e-6);
}

int main(void) {
    RUN(test_moe_softmax_topk_normalised);
    RUN(test_moe_softmax_topk_unnormalised);
    RUN(test_moe_grouped_topk_with_bias_and_scaling);
    RUN(test_moe_grouped_dropped_experts_rank_as_zero);
    RUN(test_moe_router_check_rejects_impossible);
    RUN(test_moe_experts_match_hand_sum);
    RUN(test_moe_experts_row_invariant);
    RUN(test_moe_experts_wide_window_split_over_threads);
    RUN(test_rope_linear_divides_by_factor);
    RUN(test_rope_llama3_bands);
    RUN(test_rope_scaling_refuses_unimplemented);
    RUN(test_rope_yarn_ramp_and_attention_factor);
    RUN(test_mla_interleaved_rope_matches_deinterleaved_neox);
    RUN(test_mla_attention_unequal_widths);
    return TEST_SUMMARY();
}
