/* test_family_mtp.c — the real generation path (gen_session_run, what `mtplx run` and the server
 * call) on the MTP goldens of the MoE, Qwen3-Next and DeepSeek-V3 families (random weights):
 *   - greedy MTP at depths 1..5 and adaptive depth is token-identical to AR on several prompts;
 *   - sampled runs (T 2, where the random heads agree ~70% per draft) are reproducible from the
 *     seed, in a reused session and a fresh one, and see drafts accepted and rejected at every
 *     position 1..5, so every commit length runs through the engine for these states (GDN, MLA, MoE);
 *   - the MTP head with the history the engine keeps (fused pending rows, speculative rows trimmed
 *     after each verify) and the head it drafts with (HEAD_DRAFT: DeepSeek's shared_head) gives
 *     the HF goldens' mtp_logits;
 *   - model_state_commit of every keep length after a capturing verify forward leaves the state of
 *     plain AR decoding. Greedy drafts from random heads are almost never accepted, so the engine's
 *     greedy runs commit one row per cycle; this state-level check covers the longer commits exactly
 *     (sampled runs cover them in the engine, where no token-exact reference exists). */
#include <stdio.h>

#include "../../src/engine/generate.h"
#include "fwd_util.h"
#include "gen_tally.h"
#include "test.h"

#define TOL 1e-3
#define MAX_PROMPT 64

static const char *const DIRS[] = {
    "tests/data/goldens/qwen3_5_moe",       "tests/data/goldens-extra/qwen3_5_moe_b",
    "tests/data/goldens/qwen3_next",        "tests/data/goldens-extra/qwen3_next_b",
    "tests/data/goldens-extra/deepseek_v3_mtp",
};
#define N_DIRS ((int)(sizeof DIRS / sizeof DIRS[0]))

/* One family golden loaded with its model. */
typedef struct {
    const char *dir;
    mtplx_model *m;
    golden g;
    int32_t prompts[4][MAX_PROMPT]; /* golden prefix, whole golden, reversed, a two-token loop */
    int n_prompt[4];
} family;

static int family_open(const char *dir, family *f) {
    mtplx_err err = {0};
    char gpath[512];
    memset(f, 0, sizeof *f);
    f->dir = dir;
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    if (golden_open(gpath, &f->g, &err)) {
        T_FAIL("%s: golden: %s", dir, err.msg);
        return -1;
    }
    if (model_load(dir, &f->m, &err)) {
        T_FAIL("model_load(%s): %s", dir, err.msg);
        golden_close(&f->g);
        return -1;
    }
    int T = f->g.T < MAX_PROMPT ? f->g.T : MAX_PROMPT;
    f->n_prompt[0] = 6;
    f->n_prompt[1] = T;
    f->n_prompt[2] = T;
    f->n_prompt[3] = 16;
    memcpy(f->prompts[0], f->g.ids, 6 * sizeof(int32_t));
    for (int i = 0; i < T; i++) {
        f->prompts[1][i] = f->g.ids[i];
        f->prompts[2][i] = f->g.ids[T - 1 - i];
    }
    for (int i = 0; i < 16; i++) f->prompts[3][i] = f->g.ids[i % 2];
    return 0;
}

static void family_close(family *f) {
    model_free(f->m);
    golden_close(&f->g);
}

static gen_params params(int depth, int max_tokens, float temperature, uint64_t seed) {
    gen_params p;
    gen_params_default(&p);
    p.temperature = temperature;
    p.max_tokens = max_tokens;
    p.depth = depth;
    p.seed = seed;
    p.seed_set = 1;
    return p;
}

static int run(gen_session *s, const int32_t *prompt, int n, const gen_params *p, int32_t **out, int *n_out,
               gen_stats *st, const char *dir) {
    mtplx_err e;
    err_clear(&e);
    int rc = gen_session_run(s, prompt, n, p, NULL, NULL, out, n_out, st, &e);
    if (rc) T_FAIL("%s: gen_session_run (depth %d): %s", dir, p->depth, e.msg);
    return rc;
}

/* The mode-th run: depths 1..5, then adaptive (depth 6, draft_min_conf 1e-4: the random heads spread q
 * thin at T 2, so this cuts cycles after a few drafts; greedy q is one point and never cuts). */
static void set_mode(gen_params *p, int mode) {
    p->depth = mode + 1;
    p->draft_min_conf = mode == 5 ? 1e-4f : 0;
}

/* Greedy: every depth and adaptive depth give AR's tokens on each prompt. */
static void check_greedy(family *f) {
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(f->m, &s, &e) == 0);
    const int san = test_sanitized(), n_tok = san ? 24 : 40; /* ASan: 2 prompts of 4 */
    long accepted = 0, drafted = 0;
    for (int pi = 0; pi < 4; pi++) {
        if (san && pi % 2 == 0) continue;
        gen_params ar = params(0, n_tok, 0, 1);
        int32_t *ref, *out;
        int n_ref, n;
        gen_stats st;
        if (run(s, f->prompts[pi], f->n_prompt[pi], &ar, &ref, &n_ref, &st, f->dir)) break;
        CHECK_INT(n_ref, n_tok);
        for (int mode = 0; mode < 6; mode++) {
            gen_params p = ar;
            set_mode(&p, mode);
            if (run(s, f->prompts[pi], f->n_prompt[pi], &p, &out, &n, &st, f->dir)) break;
            int first = -1;
            for (int k = 0; first < 0 && k < n && k < n_ref; k++)
                if (out[k] != ref[k]) first = k;
            CHECK_MSG(first < 0 && n == n_ref, "%s prompt %d depth %d%s: token %d differs from AR (%d vs %d tokens)",
                      f->dir, pi, p.depth, mode == 5 ? " adaptive" : "", first, n, n_ref);
            accepted += st.accepted;
            drafted += st.drafted;
            free(out);
        }
        free(ref);
    }
    printf("%-42s greedy depths 1..5 + adaptive == AR (%ld of %ld random-head drafts accepted)\n", f->dir, accepted,
           drafted);
    gen_session_free(s);
}

/* Sampled at T 2: the same seed gives the same tokens and stats (again in the session, and in a
 * fresh gen_run); drafts are accepted and rejected at every position; adaptive depth drafts less. */
static void check_sampled(family *f) {
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(f->m, &s, &e) == 0);
    const int san = test_sanitized(), n_tok = san ? 64 : 160; /* ASan: 2 prompts of 4 */
    pos_tally tally[6];
    memset(tally, 0, sizeof tally);
    long ad_drafted = 0, ad_cycles = 0;
    for (int pi = 0; pi < 4; pi++) {
        if (san && pi % 2 == 0) continue;
        for (int mode = 0; mode < 6; mode++) {
            gen_params p = params(0, n_tok, 2.0f, 1000 + 10 * pi + mode);
            set_mode(&p, mode);
            int32_t *a, *b, *c;
            int na, nb, nc;
            gen_stats sa, sb, sc;
            if (run(s, f->prompts[pi], f->n_prompt[pi], &p, &a, &na, &sa, f->dir)) break;
            if (run(s, f->prompts[pi], f->n_prompt[pi], &p, &b, &nb, &sb, f->dir)) break;
            REQUIRE(gen_run(f->m, f->prompts[pi], f->n_prompt[pi], &p, NULL, NULL, &c, &nc, &sc, &e) == 0);
            int same = na == nb && na == nc && na == n_tok;
            for (int k = 0; same && k < na; k++) same = a[k] == b[k] && a[k] == c[k];
            for (int d = 0; same && d < p.depth; d++)
                same = sa.accepted_per_position[d] == sb.accepted_per_position[d] &&
                       sa.accepted_per_position[d] == sc.accepted_per_position[d];
            CHECK_MSG(same && sa.cycles == sb.cycles && sa.cycles == sc.cycles,
                      "%s prompt %d depth %d: seed %llu is not reproducible", f->dir, pi, p.depth,
                      (unsigned long long)p.seed);
            if (mode < 5) tally_add(&tally[mode], &sa, na, p.depth);
            if (mode == 5) {
                ad_drafted += sa.drafted;
                ad_cycles += sa.cycles;
            }
            free(a);
            free(b);
            free(c);
        }
    }
    printf("%-42s sampled T 2, accepted/rejected per position:", f->dir);
    for (int mode = 0; mode < 5; mode++) { /* (the tally assumes no adaptive cut) */
        printf(" | d%d", mode + 1);
        for (int i = 0; i < mode + 1; i++) printf(" %ld/%ld", tally[mode].acc[i], tally[mode].rej[i]);
    }
    printf(" | adaptive d6: %ld drafts in %ld cycles\n", ad_drafted, ad_cycles);
    for (int i = 0; i < 5 && !san; i++) /* depth 5: every position both ways, so every commit length ran */
        CHECK_MSG(tally[4].acc[i] > 0 && tally[4].rej[i] > 0, "%s depth 5 position %d: %ld accepted, %ld rejected",
                  f->dir, i + 1, tally[4].acc[i], tally[4].rej[i]);
    CHECK_MSG(san || tally[4].bonus > 0, "%s depth 5: no cycle accepted all 5 drafts", f->dir);
    CHECK_MSG(ad_drafted > ad_cycles && ad_drafted < 4 * ad_cycles, /* more than one a cycle, well below 6 */
              "%s adaptive depth 6: %ld drafts in %ld cycles (never stopped early, or drafted nothing)", f->dir,
              ad_drafted, ad_cycles);
    gen_session_free(s);
}

/* MTP logits as the engine produces them, against the goldens' mtp_logits (row t =
 * MTP(embed(ids[t+1]), hidden[t])): rows appended in fused groups of 1..3 (the pending committed
 * pairs plus the real pair of a cycle's first draft step), each group followed by two speculative
 * rows chained on the MTP's own output and then trimmed, as after a verify; HEAD_DRAFT, the head
 * the engine drafts with. The trunk hiddens are the golden's. */
static void check_mtp_logits(family *f) {
    mtplx_err err = {0};
    const int H = f->g.H, V = f->g.V, R = f->g.T - 1;
    REQUIRE(f->g.mtp_logits);
    mtp_state *ms = NULL;
    REQUIRE(mtp_state_new(f->m, f->g.T + 4, &ms, &err) == 0);
    float *mh = malloc(sizeof(float) * (size_t)(R + 2) * H), *ml = malloc(sizeof(float) * (size_t)R * V);
    float *spec = malloc(sizeof(float) * 2 * (size_t)H);
    int rc = 0;
    for (int t = 0, grp = 1; t < R && !rc; t += grp, grp = grp % 3 + 1) {
        int n = t + grp <= R ? grp : R - t;
        rc = model_mtp_forward(f->m, ms, f->g.hidden + (size_t)t * H, f->g.ids + t + 1, n, mh + (size_t)t * H, &err);
        int32_t y[2] = {f->g.ids[(t + 3) % f->g.T], f->g.ids[(t + 7) % f->g.T]};
        const float *h = mh + (size_t)(t + n - 1) * H;
        for (int j = 0; j < 2 && !rc; j++) { /* speculative draft steps, then the verify's trim */
            rc = model_mtp_forward(f->m, ms, h, &y[j], 1, spec + (size_t)j * H, &err);
            h = spec + (size_t)j * H;
        }
        if (!rc) rc = mtp_state_trim(ms, t + n, &err);
        if (!rc) CHECK_INT(mtp_state_len(ms), t + n);
    }
    CHECK_MSG(rc == 0, "%s: MTP history: %s", f->dir, err.msg);
    if (!rc) {
        CHECK(model_lm_head(f->m, HEAD_DRAFT, mh, R, ml, &err) == 0);
        double d = max_abs_diff(ml, f->g.mtp_logits, (size_t)R * V);
        int bad = argmax_mismatches(ml, f->g.mtp_logits, R, V);
        printf("%-42s MTP logits with trimmed speculative rows, draft head: max|d| %.3g, %d argmax mismatches\n",
               f->dir, d, bad);
        CHECK_MSG(d <= TOL, "%s: engine-pattern mtp_logits max|d| %.3g > %g", f->dir, d, TOL);
        CHECK_INT(bad, 0);
    }
    free(mh);
    free(ml);
    free(spec);
    mtp_state_free(ms);
}

/* After prefill + a capturing forward of [x, w_1..w_5] where w_1..w_j are AR's next tokens and the
 * rest wrong, commit(j + 1) leaves the state of AR decoding: the next AR steps give AR's logits. */
static void check_commit_lengths(family *f) {
    mtplx_err err = {0};
    const int V = f->g.V, P = 6, D = 5, n_ar = P + D + 6;
    model_state *ref = NULL, *s = NULL;
    REQUIRE(model_state_new(f->m, 64, D + 1, &ref, &err) == 0);
    float *lr = malloc(sizeof(float) * (size_t)n_ar * V), *ls = malloc(sizeof(float) * (size_t)(D + 1) * V);
    int32_t ar[32];
    memcpy(ar, f->g.ids, P * sizeof *ar); /* ar[P..] = greedy continuation; lr[t] = logits after ar[0..t] */
    fwd_request req = {.logits = lr, .logits_from = 0};
    int rc = model_forward(f->m, ref, ar, P, &req, &err);
    for (int t = P; t < n_ar && !rc; t++) {
        ar[t] = argmax(lr + (size_t)(t - 1) * V, V);
        fwd_request r1 = {.logits = lr + (size_t)t * V, .logits_from = 0};
        rc = model_forward(f->m, ref, &ar[t], 1, &r1, &err);
    }
    REQUIRE(rc == 0);
    double worst = 0;
    for (int j = 0; j <= D && !rc; j++) {
        rc = model_state_new(f->m, 64, D + 1, &s, &err);
        fwd_request pr = {.logits = ls, .logits_from = P - 1};
        if (!rc) rc = model_forward(f->m, s, ar, P, &pr, &err);
        int32_t seq[D + 1];
        for (int i = 0; i <= D; i++) seq[i] = i <= j ? ar[P + i] : (ar[P + i] + 1) % V;
        fwd_request vr = {.logits = ls, .logits_from = 0, .capture = 1};
        if (!rc) rc = model_forward(f->m, s, seq, D + 1, &vr, &err);
        if (!rc) rc = model_state_commit(s, j + 1, &err);
        if (!rc) CHECK_INT(model_state_len(s), P + j + 1);
        for (int t = P + j + 1; t < n_ar && !rc; t++) { /* continue AR from the committed state */
            fwd_request r1 = {.logits = ls, .logits_from = 0};
            rc = model_forward(f->m, s, &ar[t], 1, &r1, &err);
            double d = max_abs_diff(ls, lr + (size_t)t * V, V);
            if (!(d <= worst)) worst = d;
        }
        model_state_free(s);
        s = NULL;
    }
    CHECK_MSG(rc == 0, "%s: commit check: %s", f->dir, err.msg);
    CHECK_MSG(worst <= TOL, "%s: after commit, AR logits differ by %.3g", f->dir, worst);
    free(lr);
    free(ls);
    model_state_free(ref);
}

static void check_family(int i) {
    family f;
    if (family_open(DIRS[i], &f)) return;
    REQUIRE(model_has_mtp(f.m));
    check_greedy(&f);
    check_sampled(&f);
    check_mtp_logits(&f);
    check_commit_lengths(&f);
    family_close(&f);
}

TEST(test_qwen3_5_moe) { check_family(0); }
TEST(test_qwen3_5_moe_b) { check_family(1); }
TEST(test_qwen3_next) { check_family(2); }
TEST(test_qwen3_next_b) { check_family(3); }
TEST(test_deepseek_v3_mtp) { check_family(4); }

int main(void) {
    setenv("MTPLX_THREADS", "1", 0); /* tiny models: one thread wastes no CPU on handoffs */
    RUN(test_qwen3_5_moe);
    RUN(test_qwen3_5_moe_b);
    RUN(test_qwen3_next);
    RUN(test_qwen3_next_b);
    RUN(test_deepseek_v3_mtp);
    return TEST_SUMMARY();
}
