/* test_family_mtp.c — greedy speculative decoding with each family's own MTP head gives exactly
 * the tokens of plain greedy AR decoding (random weights: acceptance is low, identity must hold
 * anyway), at depths 1..3, using the model API directly: MTP drafts, one capturing verify forward,
 * model_state_commit of the accepted prefix, MTP history trimmed to committed (hidden, token) pairs. */
#include <stdio.h>

#include "fwd_util.h"
#include "test.h"

#define MAXD 4

/* Greedy AR: n tokens after prompt[P]. */
static int greedy_ar(const mtplx_model *m, const int32_t *prompt, int P, int n, int32_t *out) {
    mtplx_err err = {0};
    int V = model_config_of(m)->vocab_size;
    model_state *s = NULL;
    if (model_state_new(m, P + n + 1, 1, &s, &err)) return -1;
    float *logits = malloc(sizeof(float) * (size_t)V);
    fwd_request req = {.logits = logits, .logits_from = P - 1};
    int rc = model_forward(m, s, prompt, P, &req, &err);
    req.logits_from = 0;
    for (int i = 0; i < n && !rc; i++) {
        out[i] = argmax(logits, V);
        if (i + 1 < n) rc = model_forward(m, s, &out[i], 1, &req, &err);
    }
    if (rc) fprintf(stderr, "greedy_ar: %s\n", err.msg);
    free(logits);
    model_state_free(s);
    return rc;
}

/* Greedy MTP at depth d: n tokens after prompt[P]; *cycles / *accepted count verify calls and
 * accepted drafts. With oracle (the AR tokens) the MTP head still runs but the drafts are replaced
 * by the right tokens for the first (cycle mod d+1) positions and a wrong one after, so every
 * acceptance length and its commit/trim path is exercised (random weights alone accept ~nothing). */
static int greedy_mtp(const mtplx_model *m, const int32_t *prompt, int P, int n, int d, const int32_t *oracle,
                      int32_t *out, int *cycles, int *accepted) {
    mtplx_err err = {0};
    const model_config *c = model_config_of(m);
    int V = c->vocab_size, H = c->hidden_size, cap = P + n + MAXD + 2;
    model_state *s = NULL;
    mtp_state *ms = NULL;
    if (model_state_new(m, cap, d + 1, &s, &err) || mtp_state_new(m, cap, &ms, &err)) {
        fprintf(stderr, "greedy_mtp: %s\n", err.msg);
        model_state_free(s);
        return -1;
    }
    float *logits = malloc(sizeof(float) * (size_t)(P + MAXD + 1) * V);
    float *hidden = malloc(sizeof(float) * (size_t)(P + MAXD + 1) * H);
    float *hm = malloc(sizeof(float) * (size_t)(P + MAXD + 1) * H), *hprev = malloc(sizeof(float) * (size_t)H);
    float *dl = malloc(sizeof(float) * (size_t)V);
    int rc = 0, got = 0;
    *cycles = *accepted = 0;
    /* prefill: hidden of every prompt row; MTP history of the prompt pairs (hidden t, token t+1) */
    fwd_request req = {.logits = logits, .logits_from = P - 1, .hidden = hidden};
    if ((rc = model_forward(m, s, prompt, P, &req, &err))) goto done;
    if (P > 1 && (rc = model_mtp_forward(m, ms, hidden, prompt + 1, P - 1, hm, &err))) goto done;
    int32_t x = argmax(logits, V);           /* next token, already decided by the target */
    memcpy(hprev, hidden + (size_t)(P - 1) * H, sizeof(float) * H); /* hidden of the last committed row */
    while (got < n) {
        int32_t toks[MAXD + 1];
        toks[0] = x;
        int mlen = mtp_state_len(ms);
        const float *h = hprev;
        for (int j = 0; j < d; j++) { /* draft chain: depth j feeds on the previous MTP output */
            float *ho = hm + (size_t)(j % 2) * H;
            if ((rc = model_mtp_forward(m, ms, h, &toks[j], 1, ho, &err))) goto done;
            if ((rc = model_lm_head(m, HEAD_DRAFT, ho, 1, dl, &err))) goto done;
            toks[j + 1] = argmax(dl, V);
            if (oracle) {
                int32_t right = got + j + 1 < n ? oracle[got + j + 1] : 0;
                toks[j + 1] = j < *cycles % (d + 1) ? right : (right + 1) % V;
            }
            h = ho;
        }
        int k = d;
        if (model_state_len(s) + k + 1 > cap - 1) k = 0;
        fwd_request vr = {.logits = logits, .hidden = hidden, .capture = 1};
        if ((rc = model_forward(m, s, toks, k + 1, &vr, &err))) goto done;
        (*cycles)++;
        int j = 0;
        while (j < k && argmax(logits + (size_t)j * V, V) == toks[j + 1]) j++;
        *accepted += j;
        if ((rc = model_state_commit(s, j + 1, &err))) goto done;
        for (int i = 0; i <= j && got < n; i++) out[got++] = toks[i];
        /* MTP history: keep the (committed hidden, x) row, then add the accepted pairs */
        if ((rc = mtp_state_trim(ms, mlen + 1, &err))) goto done;
        if (j > 0 && (rc = model_mtp_forward(m, ms, hidden, toks + 1, j, hm, &err))) goto done;
        x = argmax(logits + (size_t)j * V, V);
        memcpy(hprev, hidden + (size_t)j * H, sizeof(float) * H);
    }
done:
    if (rc) fprintf(stderr, "greedy_mtp: %s\n", err.msg);
    free(logits);
    free(hidden);
    free(hm);
    free(hprev);
    free(dl);
    mtp_state_free(ms);
    model_state_free(s);
    return rc;
}

static void check_mtp_equals_ar(const char *dir) {
    mtplx_err err = {0};
    mtplx_model *m = NULL;
    char gpath[512];
    snprintf(gpath, sizeof gpath, "%s/golden.safetensors", dir);
    golden g;
    REQUIRE(golden_open(gpath, &g, &err) == 0);
    if (model_load(dir, &m, &err)) {
        T_FAIL("model_load(%s): %s", dir, err.msg);
        golden_close(&g);
        return;
    }
    REQUIRE(model_has_mtp(m));
    int P = 6, n = test_sanitized() ? 12 : 40;
    int32_t ar[64], sp[64];
    REQUIRE(greedy_ar(m, g.ids, P, n, ar) == 0);
    for (int mode = 0; mode < 2; mode++)
        for (int d = 1; d <= 3; d++) {
            int cycles = 0, acc = 0;
            REQUIRE(greedy_mtp(m, g.ids, P, n, d, mode ? ar : NULL, sp, &cycles, &acc) == 0);
            int first = -1;
            for (int i = 0; i < n && first < 0; i++)
                if (sp[i] != ar[i]) first = i;
            CHECK_MSG(first < 0, "%s depth %d%s: token %d differs (MTP %d, AR %d)", dir, d, mode ? " (oracle)" : "",
                      first, first >= 0 ? sp[first] : 0, first >= 0 ? ar[first] : 0);
            if (mode) CHECK_MSG(acc > 0, "%s depth %d: oracle drafts were never accepted", dir, d);
            printf("%-44s depth %d%s: %d tokens identical to AR, %d verify cycles, %d drafts accepted\n", dir, d,
                   mode ? " oracle" : "       ", n, cycles, acc);
        }
    model_free(m);
    golden_close(&g);
}

TEST(test_mtp_equals_ar_qwen3_5_moe) { check_mtp_equals_ar("tests/data/goldens/qwen3_5_moe"); }
TEST(test_mtp_equals_ar_qwen3_5_moe_b) { check_mtp_equals_ar("tests/data/goldens-extra/qwen3_5_moe_b"); }
TEST(test_mtp_equals_ar_qwen3_next) { check_mtp_equals_ar("tests/data/goldens/qwen3_next"); }
TEST(test_mtp_equals_ar_qwen3_next_b) { check_mtp_equals_ar("tests/data/goldens-extra/qwen3_next_b"); }
TEST(test_mtp_equals_ar_deepseek_v3_mtp) { check_mtp_equals_ar("tests/data/goldens-extra/deepseek_v3_mtp"); }

int main(void) {
    RUN(test_mtp_equals_ar_qwen3_5_moe);
    RUN(test_mtp_equals_ar_qwen3_5_moe_b);
    RUN(test_mtp_equals_ar_qwen3_next);
    RUN(test_mtp_equals_ar_qwen3_next_b);
    RUN(test_mtp_equals_ar_deepseek_v3_mtp);
    return TEST_SUMMARY();
}
