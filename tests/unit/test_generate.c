/* test_generate.c — generation on the embedded model: greedy MTP at every depth 1..5 is
 * token-identical to AR (and AR to the HF golden continuation), on >= 30 prompts of different
 * lengths, including generations that end on a stop id or on max_tokens in the middle of a cycle;
 * plus parameter validation, seeds and the stats. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/engine/generate.h"
#include "../../src/model/safetensors.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"

static mtplx_model *M;
static const int32_t *G; /* golden input_ids */
static int G_len, G_prompt;

static int run(gen_session *s, const int32_t *prompt, int n, gen_params *p, int32_t **out, int *n_out,
               gen_stats *st) {
    mtplx_err e;
    err_clear(&e);
    int rc = gen_session_run(s, prompt, n, p, NULL, NULL, out, n_out, st, &e);
    if (rc) T_FAIL("gen_session_run (depth %d): %s", p->depth, e.msg);
    return rc;
}

static gen_params greedy(int depth, int max_tokens) {
    gen_params p;
    gen_params_default(&p);
    p.temperature = 0;
    p.max_tokens = max_tokens;
    p.depth = depth;
    p.seed = 1;
    p.seed_set = 1;
    p.stop_ids[0] = 8185; /* the model's EOS ids */
    p.stop_ids[1] = 8183;
    p.n_stop_ids = 2;
    return p;
}

TEST(test_greedy_matches_hf_golden_at_every_depth) {
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(M, &s, &e) == 0);
    int want = G_len - G_prompt;
    for (int depth = 0; depth <= 5; depth++) {
        if (test_sanitized() && depth != 0 && depth != 3) continue; /* the sanitizer run checks the paths, */
        gen_params p = greedy(depth, want);                            /* the plain run every depth */
        int32_t *out;
        int n;
        gen_stats st;
        if (run(s, G, G_prompt, &p, &out, &n, &st)) break;
        CHECK_INT(n, want);
        for (int i = 0; i < n && i < want; i++)
            if (out[i] != G[G_prompt + i]) {
                T_FAIL("depth %d: token %d is %d, golden %d", depth, i, out[i], G[G_prompt + i]);
                break;
            }
        CHECK_STR(st.finish_reason, "length");
        CHECK_INT(st.depth, depth);
        if (depth > 0) {
            CHECK(st.drafted > 0);
            CHECK(st.accepted > 0); /* a trained MTP head agrees often under greedy */
            CHECK_NEAR(st.acceptance_rate, (double)st.accepted / st.drafted, 1e-12);
            int sum = 0;
            for (int d = 0; d < depth; d++) sum += st.accepted_per_position[d];
            CHECK_INT(sum, st.accepted);
            for (int d = 1; d < depth; d++) CHECK(st.accepted_per_position[d] <= st.accepted_per_position[d - 1]);
        } else {
            CHECK_INT(st.cycles, want - 1); /* AR: one decode forward per token after the first */
        }
        free(out);
    }
    gen_session_free(s);
}

/* >= 30 prompts: golden prefixes of many lengths; max_tokens 3..24 (ends mid-cycle at most
 * depths); every third prompt also stops at a token that AR emits half-way (stop mid-cycle). */
TEST(test_greedy_mtp_identical_to_ar_on_many_prompts) {
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(M, &s, &e) == 0);
    const int n_prompts = test_sanitized() ? 4 : 32;
    int stops_hit = 0, lengths_hit = 0;
    for (int i = 0; i < n_prompts; i++) {
        int len = 1 + (i * 13) % G_len;
        int max_tokens = 3 + (i * 7) % 22;
        gen_params ar = greedy(0, max_tokens);
        int32_t *ref;
        int n_ref;
        gen_stats st;
        if (run(s, G, len, &ar, &ref, &n_ref, &st)) break;
        if (i % 3 == 0 && n_ref >= 3) { /* stop at the token AR emits at the middle */
            int32_t stop = ref[n_ref / 2];
            ar.stop_ids[ar.n_stop_ids++] = stop;
            free(ref);
            if (run(s, G, len, &ar, &ref, &n_ref, &st)) break;
            CHECK_INT(ref[n_ref - 1], stop);
            CHECK_STR(st.finish_reason, "stop");
            stops_hit++;
        } else if (!strcmp(st.finish_reason, "length"))
            lengths_hit++;
        const char *ref_finish = st.finish_reason;
        for (int depth = 1; depth <= 5; depth++) {
            if (test_sanitized() && depth != 2 && depth != 5) continue;
            gen_params p = ar;
            p.depth = depth;
            int32_t *out;
            int n;
            if (run(s, G, len, &p, &out, &n, &st)) break;
            int same = n == n_ref;
            for (int k = 0; same && k < n; k++) same = out[k] == ref[k];
            CHECK_MSG(same, "prompt %d (len %d, max_tokens %d): depth %d differs from AR (%d vs %d tokens)", i, len,
                      max_tokens, depth, n, n_ref);
            CHECK_STR(st.finish_reason, ref_finish);
            /* nothing after a stop id is ever emitted */
            for (int k = 0; k + 1 < n; k++)
                for (int j = 0; j < p.n_stop_ids; j++) CHECK(out[k] != p.stop_ids[j]);
            free(out);
        }
        free(ref);
    }
    CHECK(stops_hit >= (test_sanitized() ? 1 : 8));
    CHECK(lengths_hit >= (test_sanitized() ? 1 : 8));
    gen_session_free(s);
}

/* The draft-only q4 copies (LM head + MTP layer) change q, never the output: greedy stays identical
 * to AR, and the drafts still agree with the target most of the time. */
TEST(test_quantized_draft_keeps_greedy_identical) {
    mtplx_model *mq;
    mtplx_err e;
    REQUIRE(model_load(MODEL_DIR, &mq, &e) == 0);
    REQUIRE(model_quantize_draft(mq, 4, 64, 1, &e) == 0);
    gen_session *s, *sq;
    REQUIRE(gen_session_new(M, &s, &e) == 0);
    REQUIRE(gen_session_new(mq, &sq, &e) == 0);
    int drafted = 0, accepted = 0;
    for (int i = 0; i < (test_sanitized() ? 2 : 6); i++) {
        int len = 3 + i * 8;
        gen_params p = greedy(0, 20);
        int32_t *ref, *out;
        int n_ref, n;
        gen_stats st;
        if (run(s, G, len, &p, &ref, &n_ref, &st)) break;
        p.depth = 2 + (i % 3);
        if (run(sq, G, len, &p, &out, &n, &st)) break;
        int same = n == n_ref;
        for (int k = 0; same && k < n; k++) same = out[k] == ref[k];
        CHECK_MSG(same, "prompt len %d, depth %d: q4 draft output differs from AR", len, p.depth);
        drafted += st.drafted;
        accepted += st.accepted;
        free(ref);
        free(out);
    }
    CHECK_MSG(accepted > drafted / 3, "q4 draft acceptance %d/%d", accepted, drafted);
    mtplx_err e2;
    CHECK_INT(model_quantize_draft(mq, 3, 64, 0, &e2), MTPLX_EINVAL); /* unsupported format named */
    gen_session_free(s);
    gen_session_free(sq);
    model_free(mq);
}

static int cancel_after_three(void *user, const int32_t *t, int n) {
    int *count = user;
    (void)t;
    *count += n;
    return *count >= 3;
}

TEST(test_callback_sees_every_token_and_can_cancel) {
    gen_params p = greedy(3, 20);
    int count = 0;
    int32_t *out;
    int n;
    gen_stats st;
    mtplx_err e;
    REQUIRE(gen_run(M, G, 10, &p, cancel_after_three, &count, &out, &n, &st, &e) == 0);
    CHECK_INT(n, 3);
    CHECK_INT(count, 3);
    CHECK_STR(st.finish_reason, "cancel");
    free(out);
}

TEST(test_seeded_sampling_is_reproducible_and_reports_seed) {
    gen_params p = greedy(2, 12);
    p.temperature = 0.8f;
    p.top_k = 40;
    p.seed = 12345;
    int32_t *a, *b;
    int na, nb;
    gen_stats sa, sb;
    mtplx_err e;
    REQUIRE(gen_run(M, G, 12, &p, NULL, NULL, &a, &na, &sa, &e) == 0);
    REQUIRE(gen_run(M, G, 12, &p, NULL, NULL, &b, &nb, &sb, &e) == 0);
    CHECK(sa.seed == 12345);
    CHECK_INT(na, nb);
    for (int i = 0; i < na && i < nb; i++) CHECK_INT(a[i], b[i]);
    free(a);
    free(b);
    p.seed_set = 0; /* a fresh seed is chosen and reported, within 2^53 */
    REQUIRE(gen_run(M, G, 12, &p, NULL, NULL, &a, &na, &sa, &e) == 0);
    CHECK(sa.seed < (1ull << 53));
    free(a);
}

/* Adaptive depth: sampled drafts stop early (fewer drafts than cycles x depth, at least one per
 * cycle), greedy never stops (q is one point, Π q(y) = 1) and stays identical to AR. */
TEST(test_adaptive_depth_stops_drafting_early) {
    gen_params p = greedy(4, 40);
    p.temperature = 1.0f;
    p.seed = 7;
    p.draft_min_conf = 0.5f;
    gen_stats st;
    mtplx_err e;
    int32_t *out;
    int n;
    REQUIRE(gen_run(M, G, 12, &p, NULL, NULL, &out, &n, &st, &e) == 0);
    free(out);
    CHECK(st.drafted >= st.cycles - 1); /* the last cycle may draft nothing (max_tokens) */
    CHECK_MSG(st.drafted < 4 * (st.cycles - 1), "drafted %d in %d cycles: adaptive depth never stopped", st.drafted,
              st.cycles);
    int32_t *ref, *ad;
    int nr, na;
    gen_params g = greedy(0, 24), ga = greedy(4, 24);
    ga.draft_min_conf = 0.9f;
    REQUIRE(gen_run(M, G, 12, &g, NULL, NULL, &ref, &nr, NULL, &e) == 0);
    REQUIRE(gen_run(M, G, 12, &ga, NULL, NULL, &ad, &na, &st, &e) == 0);
    CHECK_INT(na, nr);
    for (int i = 0; i < na && i < nr; i++) CHECK_INT(ad[i], ref[i]);
    free(ref);
    free(ad);
}

TEST(test_bad_params_are_einval_naming_the_field) {
    struct {
        const char *field;
        void (*set)(gen_params *);
    } cases[] = {
        {"temperature", NULL}, {"top_p", NULL}, {"top_k", NULL}, {"min_p", NULL},
        {"max_tokens", NULL},  {"depth", NULL}, {"stop id", NULL}, {"prompt", NULL},
        {"draft_min_conf", NULL}, {"draft_min_conf", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gen_params p = greedy(1, 5);
        int n_prompt = 5;
        int32_t bad_prompt[2] = {1, 99999};
        const int32_t *prompt = G;
        switch (i) {
        case 0: p.temperature = -1; break;
        case 1: p.top_p = 1.5f; break;
        case 2: p.top_k = -3; break;
        case 3: p.min_p = 1; break;
        case 4: p.max_tokens = 0; break;
        case 5: p.depth = GEN_MAX_DEPTH + 1; break;
        case 6: p.stop_ids[0] = -5; break;
        case 7: prompt = bad_prompt; n_prompt = 2; break;
        case 8: p.draft_min_conf = 1; break;
        case 9: p.draft_min_conf = NAN; break;
        }
        mtplx_err e;
        err_clear(&e);
        int32_t *out = NULL;
        int n;
        CHECK_INT(gen_run(M, prompt, n_prompt, &p, NULL, NULL, &out, &n, NULL, &e), MTPLX_EINVAL);
        CHECK_MSG(strstr(e.msg, cases[i].field) != NULL, "case %zu: '%s' does not name %s", i, e.msg, cases[i].field);
        CHECK(out == NULL);
    }
    gen_params p = greedy(0, 5);
    mtplx_err e;
    CHECK_INT(gen_run(M, G, 0, &p, NULL, NULL, NULL, NULL, NULL, &e), MTPLX_EINVAL);
}

int main(void) {
    setenv("MTPLX_THREADS", "1", 0); /* many tiny forwards: one thread wastes no CPU on handoffs */
    mtplx_err e;
    st_set *g = NULL;
    if (model_load(MODEL_DIR, &M, &e) || st_open_file(MODEL_DIR "/golden.safetensors", &g, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    const st_tensor *ids = st_find(g, "input_ids"), *pl = st_find(g, "prompt_len");
    if (!ids || !pl || ids->dtype != DT_I32 || pl->dtype != DT_I32) {
        fprintf(stderr, "setup: golden input_ids/prompt_len missing\n");
        return 1;
    }
    G = ids->data;
    G_len = (int)ids->shape[0];
    G_prompt = *(const int32_t *)pl->data;
    RUN(test_greedy_matches_hf_golden_at_every_depth);
    RUN(test_greedy_mtp_identical_to_ar_on_many_prompts);
    RUN(test_quantized_draft_keeps_greedy_identical);
    RUN(test_callback_sees_every_token_and_can_cancel);
    RUN(test_seeded_sampling_is_reproducible_and_reports_seed);
    RUN(test_adaptive_depth_stops_drafting_early);
    RUN(test_bad_params_are_einval_naming_the_field);
    st_close(g);
    model_free(M);
    return TEST_SUMMARY();
}
