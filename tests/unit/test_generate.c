/* test_generate.c — generation on the embedded model: greedy MTP at every depth 1..5 (and adaptive
 * depth) is token-identical to AR (and AR to the HF golden continuation), on 22 distinct prompts
 * (held-out code at many offsets, prose and other formats, chat-rendered requests with tools and
 * thinking), including generations that end on a stop id or on max_tokens in the middle of a cycle,
 * with drafts accepted and rejected at every position; plus parameter validation, seeds and stats. */
#include <stdint.h>
#include <stdlib.h>

#include "../../src/base/file.h"
#include "../../src/chat/chat.h"
#include "../../src/engine/generate.h"
#include "../../src/model/safetensors.h"
#include "../../src/tokenizer/tokenizer.h"
#include "gen_tally.h"
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

/* ---- distinct prompts: held-out code at many offsets and lengths, hand-written prose and other
 * formats, and chat requests rendered by the chat module (the path of `mtplx run --chat` and the
 * server), including a tool-call request, a tool response and a thinking turn ---- */

typedef struct {
    char name[40];   /* what the prompt is, for messages */
    int32_t *ids;    /* [n] token ids (heap) */
    int n;
} test_prompt;

#define MAX_PROMPTS 32
static test_prompt PR[MAX_PROMPTS];
static int N_PR;

static int prompt_add_text(const tokenizer *tok, const char *name, const char *text, size_t len) {
    mtplx_err e;
    test_prompt *p = &PR[N_PR];
    if (N_PR >= MAX_PROMPTS || tok_encode(tok, text, len, &p->ids, &p->n, &e) || p->n == 0) {
        fprintf(stderr, "setup: prompt %s: %s\n", name, N_PR >= MAX_PROMPTS ? "too many prompts" : e.msg);
        return 1;
    }
    snprintf(p->name, sizeof p->name, "%s", name);
    N_PR++;
    return 0;
}

/* Render an OpenAI chat request (JSON text) with the model's template, then tokenize it. */
static int prompt_add_chat(const tokenizer *tok, const chat_template *ct, const char *name, const char *request) {
    mtplx_err e;
    char *text = NULL;
    size_t len = 0;
    if (chat_render_json(ct, request, strlen(request), NULL, &text, &len, &e)) {
        fprintf(stderr, "setup: chat prompt %s: %s\n", name, e.msg);
        return 1;
    }
    int rc = prompt_add_text(tok, name, text, len);
    free(text);
    return rc;
}

static const char *const PROSE[][2] = {
    {"prose story", "The lighthouse keeper climbed the spiral stairs every evening at dusk, counting the steps as "
                    "he went. There were one hundred and twelve of them, and on the night the storm came"},
    {"markdown", "# Installing the package\n\nThis guide explains how to install the library on a fresh "
                 "machine.\n\n## Requirements\n\n- "},
    {"c code", "static int count_words(const char *s) {\n    int n = 0, in_word = 0;\n    for (; *s; s++) {\n"},
    {"shell", "#!/bin/sh\nset -eu\nfor f in *.txt; do\n    "},
    {"json", "{\n  \"name\": \"example\",\n  \"version\": \"1.0.0\",\n  \"dependencies\": {\n"},
    {"sql", "SELECT customers.name, COUNT(orders.id) AS n_orders\nFROM customers\nLEFT JOIN orders ON "},
    {"numbers", "1, 2, 3, 5, 8, 13, 21, 34,"},
    {"two tokens", "def "},
};

static const char *const CHATS[][2] = {
    {"chat thinking",
     "{\"messages\":[{\"role\":\"user\",\"content\":\"Write a Python function that checks whether a string "
     "is a palindrome.\"}]}"},
    {"chat no thinking",
     "{\"messages\":[{\"role\":\"system\",\"content\":\"You are a terse assistant.\"},{\"role\":\"user\","
     "\"content\":\"Explain what a hash map is in two sentences.\"}],\"chat_template_kwargs\":"
     "{\"enable_thinking\":false}}"},
    {"chat tool request",
     "{\"messages\":[{\"role\":\"user\",\"content\":\"What is the weather in Lisbon right now, in celsius?\"}],"
     "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Current "
     "weather for a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},"
     "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}}]}"},
    {"chat tool response",
     "{\"messages\":[{\"role\":\"user\",\"content\":\"List the files in /tmp and tell me the largest.\"},"
     "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"I need the directory listing first.\","
     "\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"arguments\":"
     "\"{\\\"path\\\": \\\"/tmp\\\"}\"}}]},{\"role\":\"tool\",\"content\":\"a.log 120\\nb.bin 4096\\nc.txt 12\"}],"
     "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"parameters\":{\"type\":\"object\","
     "\"properties\":{\"path\":{\"type\":\"string\"}}}}}]}"},
};

/* Build PR[]: code snippets of the held-out file (val_code.txt, never trained on) at spread
 * offsets, each starting at a line start, with lengths from a line to a few screens; PROSE; CHATS. */
static int prompts_build(void) {
    mtplx_err e;
    tokenizer *tok = NULL;
    chat_template *ct = NULL;
    size_t code_len = 0;
    char *code = file_read_all(MODEL_DIR "/val_code.txt", &code_len, &e);
    if (!code || tok_load(MODEL_DIR, &tok, &e) || chat_template_load(MODEL_DIR, &ct, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        free(code);
        tok_free(tok);
        return 1;
    }
    static const size_t lens[] = {40, 160, 400, 700, 1200};
    int rc = 0;
    for (int i = 0; i < 10 && !rc; i++) {
        size_t off = (size_t)i * (code_len / 10) + 997 * (size_t)i; /* spread, not aligned to anything */
        while (off < code_len && off > 0 && code[off - 1] != '\n') off++;
        size_t len = lens[i % 5];
        if (off + len > code_len) len = code_len - off;
        char name[40];
        snprintf(name, sizeof name, "code @%zu +%zu", off, len);
        rc = prompt_add_text(tok, name, code + off, len);
    }
    for (size_t i = 0; i < sizeof PROSE / sizeof PROSE[0] && !rc; i++)
        rc = prompt_add_text(tok, PROSE[i][0], PROSE[i][1], strlen(PROSE[i][1]));
    for (size_t i = 0; i < sizeof CHATS / sizeof CHATS[0] && !rc; i++) rc = prompt_add_chat(tok, ct, CHATS[i][0], CHATS[i][1]);
    free(code);
    tok_free(tok);
    chat_template_free(ct);
    return rc;
}

static void prompts_free(void) {
    for (int i = 0; i < N_PR; i++) free(PR[i].ids);
    N_PR = 0;
}

/* Greedy MTP at depths 1..5 and adaptive depth 6 is token-identical to AR on every distinct prompt,
 * with enough tokens that drafts at every position are both accepted and rejected; every third prompt
 * also stops at a token AR emits half-way (a stop inside a cycle), the rest end on max_tokens or EOS. */
TEST(test_greedy_mtp_identical_to_ar_on_distinct_prompts) {
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(M, &s, &e) == 0);
    gen_session_set_prompt_cache(s, 1); /* as `run --samples`: prefill twice per prompt (AR, then with */
    const int san = test_sanitized();   /* the MTP history at depth 1), later depths restore it */
    const int max_tokens = san ? 16 : 48, n_modes = 6; /* depths 1..5, then adaptive depth 6 */
    pos_tally tally[6];
    memset(tally, 0, sizeof tally);
    int stops_hit = 0, lengths_hit = 0, prompts_run = 0;
    for (int i = 0; i < N_PR; i++) {
        if (san && i != 6 && i != 13 && i != 19) continue; /* ASan (~10x slower): code, shell, chat */
        prompts_run++;
        if (getenv("TEST_VERBOSE")) printf("  prompt %-28s %4d tokens\n", PR[i].name, PR[i].n);
        gen_params ar = greedy(0, max_tokens);
        int32_t *ref;
        int n_ref;
        gen_stats st;
        if (run(s, PR[i].ids, PR[i].n, &ar, &ref, &n_ref, &st)) break;
        if (i % 3 == 0 && n_ref >= 3) { /* stop at the token AR emits at the middle */
            int32_t stop = ref[n_ref / 2];
            ar.stop_ids[ar.n_stop_ids++] = stop;
            free(ref);
            if (run(s, PR[i].ids, PR[i].n, &ar, &ref, &n_ref, &st)) break;
            CHECK_INT(ref[n_ref - 1], stop);
            CHECK_STR(st.finish_reason, "stop");
            stops_hit++;
        } else if (!strcmp(st.finish_reason, "length"))
            lengths_hit++;
        const char *ref_finish = st.finish_reason;
        for (int mode = 0; mode < n_modes; mode++) {
            if (san && mode != 1 && mode != 4 && mode != 5) continue; /* ASan: depths 2, 5, adaptive */
            gen_params p = ar;
            p.depth = mode + 1;
            if (mode == 5) p.draft_min_conf = 0.5f; /* adaptive; greedy q is one point, so it drafts all 6 */
            int32_t *out;
            int n;
            if (run(s, PR[i].ids, PR[i].n, &p, &out, &n, &st)) break;
            int first = -1;
            for (int k = 0; first < 0 && k < n && k < n_ref; k++)
                if (out[k] != ref[k]) first = k;
            CHECK_MSG(first < 0 && n == n_ref, "prompt '%s' (%d tokens): depth %d%s differs from AR at token %d (%d vs %d tokens)",
                      PR[i].name, PR[i].n, p.depth, mode == 5 ? " adaptive" : "", first, n, n_ref);
            CHECK_STR(st.finish_reason, ref_finish);
            for (int k = 0; k + 1 < n; k++) /* nothing after a stop id is ever emitted */
                for (int j = 0; j < p.n_stop_ids; j++) CHECK(out[k] != p.stop_ids[j]);
            tally_add(&tally[mode], &st, n, p.depth);
            free(out);
        }
        free(ref);
    }
    printf("greedy MTP == AR on %d distinct prompts x %d tokens; draft outcomes per position (accepted / rejected):\n",
           prompts_run, max_tokens);
    for (int mode = 0; mode < n_modes; mode++) {
        int depth = mode + 1;
        if (san && mode != 1 && mode != 4 && mode != 5) continue;
        printf("  depth %d%s:", depth, mode == 5 ? " adaptive" : "");
        for (int i = 0; i < depth; i++) printf(" %ld/%ld", tally[mode].acc[i], tally[mode].rej[i]);
        printf("  all accepted: %ld\n", tally[mode].bonus);
        for (int i = 0; i < depth && i < 5 && !san; i++) /* ASan runs too few tokens to assert this */
            CHECK_MSG(tally[mode].acc[i] > 0 && tally[mode].rej[i] > 0,
                      "depth %d position %d: %ld accepted, %ld rejected (both must occur, or the test is trivial)",
                      depth, i + 1, tally[mode].acc[i], tally[mode].rej[i]);
        CHECK_MSG(san || tally[mode].bonus > 0, "depth %d: no cycle accepted every draft", depth);
    }
    CHECK(prompts_run >= (san ? 3 : 20));
    CHECK(stops_hit >= (san ? 1 : 6));
    CHECK(lengths_hit >= (san ? 1 : 6));
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

/* model_mtp_forward_head (the MTP layer, then one row through a head, with the output rows downloaded
 * behind the head on a device) gives bit for bit what model_mtp_forward and then model_lm_head_top /
 * model_lm_head_list give: hidden rows, expanded logits or lists, and the MTP KV rows it appends (the
 * next step's outputs agree too), also when it continues from its kept row with no rows in or out;
 * continuing with more than one row or after a trim, or a logits row outside the call, is EINVAL. */
TEST(test_mtp_forward_head_equals_the_two_calls) {
    enum { T = 3, K = 20 };
    mtplx_err e;
    const int V = model_config_of(M)->vocab_size, H = model_config_of(M)->hidden_size;
    mtp_state *a = NULL, *b = NULL;
    REQUIRE(mtp_state_new(M, 64, &a, &e) == 0 && mtp_state_new(M, 64, &b, &e) == 0);
    float *hid = malloc(sizeof(float) * T * H), *ha = malloc(sizeof(float) * T * H), *hb = malloc(sizeof(float) * T * H);
    float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
    int32_t lista[2 * K + 2], listb[2 * K + 2];
    REQUIRE(hid && ha && hb && la && lb);
    for (int i = 0; i < T * H; i++) hid[i] = (float)sin(0.23 * i + 0.7);
    const struct {
        head_kind head;
        int top, list, lrow;
    } steps[] = {{HEAD_TARGET, K, 0, 2}, {HEAD_DRAFT, K, 1, 0}, {HEAD_DRAFT, 0, 0, 0}, {HEAD_TARGET, K, 1, 1}};
    int32_t next[T] = {G[1], G[2], G[3]};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
        const int n = k == 0 ? T : 1 + (int)(k % 2), lr = steps[k].lrow < n ? steps[k].lrow : n - 1;
        const float *in = k == 0 ? hid : ha; /* chained: the last outputs go in again, both ways alike */
        REQUIRE(model_mtp_forward(M, a, in, next, n, ha, &e) == 0);
        int rc = steps[k].list ? model_lm_head_list(M, steps[k].head, ha + (size_t)lr * H, 1, la, steps[k].top, lista, &e)
                               : model_lm_head_top(M, steps[k].head, ha + (size_t)lr * H, 1, la, steps[k].top, &e);
        REQUIRE(rc == 0);
        REQUIRE(model_mtp_forward_head(M, b, k == 0 ? hid : hb, next, n, hb, steps[k].head, lr, lb, steps[k].top,
                                       steps[k].list ? listb : NULL, &e) == 0);
        CHECK_MSG(!memcmp(ha, hb, sizeof(float) * (size_t)n * H), "step %zu: hidden rows differ", k);
        if (steps[k].list)
            CHECK_MSG(!memcmp(lista, listb, sizeof lista), "step %zu: lists differ", k);
        else
            CHECK_MSG(!memcmp(la, lb, sizeof(float) * V), "step %zu: logits differ", k);
        CHECK_INT(mtp_state_len(a), mtp_state_len(b));
        next[0] = G[4 + k];
    }
    /* a chain of draft steps the way the engine runs them alone: b continues from its kept row (NULL rows
     * in) and sends nothing back but the last step's rows; a trim ends what is kept */
    int lr = 1; /* the last call's logits row */
    for (int k = 0; k < 4; k++) {
        REQUIRE(model_mtp_forward(M, a, ha + (size_t)lr * H, next, 1, ha, &e) == 0);
        REQUIRE(model_lm_head_list(M, HEAD_DRAFT, ha, 1, la, K, lista, &e) == 0);
        REQUIRE(model_mtp_forward_head(M, b, NULL, next, 1, k == 3 ? hb : NULL, HEAD_DRAFT, 0, lb, K, listb, &e) == 0);
        CHECK_MSG(!memcmp(lista, listb, sizeof lista), "chained step %d: lists differ", k);
        lr = 0;
        next[0] = G[10 + k];
    }
    CHECK_MSG(!memcmp(ha, hb, sizeof(float) * H), "chained steps: hidden rows differ");
    CHECK_INT(model_mtp_forward_head(M, b, NULL, next, 2, NULL, HEAD_DRAFT, 0, lb, K, listb, &e), MTPLX_EINVAL);
    CHECK_INT(model_mtp_forward_head(M, b, NULL, next, 1, NULL, HEAD_DRAFT, 0, lb, K, listb, &e), 0); /* still kept */
    REQUIRE(mtp_state_trim(b, mtp_state_len(b) - 1, &e) == 0);
    CHECK_INT(model_mtp_forward_head(M, b, NULL, next, 1, NULL, HEAD_DRAFT, 0, lb, K, listb, &e), MTPLX_EINVAL);
    CHECK_INT(model_mtp_forward_head(M, b, hid, next, 1, hb, HEAD_TARGET, 1, lb, K, NULL, &e), MTPLX_EINVAL);
    mtp_state_free(a), mtp_state_free(b);
    free(hid), free(ha), free(hb), free(la), free(lb);
}

/* The subset draft head's T-row call (3 rows spread from compact rows) gives each row's single-row
 * logits, and its lists (model_lm_head_list, made from the compact rows with subset indices mapped to
 * ids) equal the lists of those spread rows. */
static void head_rows_and_lists_agree(mtplx_model *mv, int H, int V, int n) {
    enum { T = 3, K = 8 };
    mtplx_err e;
    float *hid = malloc(sizeof(float) * T * H), *rows = malloc(sizeof(float) * T * V), *one = malloc(sizeof(float) * V);
    float *scr = malloc(sizeof(float) * T * V); /* model_lm_head_list's scratch: T rows */
    int32_t lists[T][2 * K + 2], want[2 * K + 2];
    REQUIRE(hid && rows && one && scr);
    for (int i = 0; i < T * H; i++) hid[i] = (float)cos(0.11 * i + 0.5);
    REQUIRE(model_lm_head(mv, HEAD_DRAFT, hid, T, rows, &e) == 0);
    REQUIRE(model_lm_head_list(mv, HEAD_DRAFT, hid, T, scr, K, &lists[0][0], &e) == 0);
    for (int t = 0; t < T; t++) {
        REQUIRE(model_lm_head(mv, HEAD_DRAFT, hid + (size_t)t * H, 1, one, &e) == 0);
        CHECK_MSG(!memcmp(one, rows + (size_t)t * V, sizeof(float) * V), "subset %d: row %d of a %d-row call differs", n,
                  t, T);
        model_logits_list(rows + (size_t)t * V, V, K, want);
        CHECK_MSG(!memcmp(want, lists[t], sizeof want), "subset %d: row %d's list differs from its row's", n, t);
    }
    free(hid), free(rows), free(one), free(scr);
}

/* The draft head over a vocabulary subset (docs/speculative.md, "Draft vocabulary subset"):
 * tok_common_ids ranks the added tokens first, then this tokenizer's ids in merge order (its
 * vocabulary ids follow its merges list, checked in tokenizer.json); the subset head's logits are the
 * full draft head's on the subset and -inf (q = 0) elsewhere; greedy MTP stays token-identical to AR
 * with a subset so small (64 ids: the added tokens and bytes) that almost every draft is rejected and
 * the residual emits ids outside it, and with a 4096-id q4 draft that still agrees often. */
TEST(test_draft_vocab_subset_keeps_greedy_identical) {
    mtplx_err e;
    tokenizer *tok = NULL;
    REQUIRE(tok_load(MODEL_DIR, &tok, &e) == 0);
    const int V = model_config_of(M)->vocab_size, H = model_config_of(M)->hidden_size;
    int n_added = 0;
    for (int j = 0; j < V; j++) n_added += tok_is_added(tok, j);
    CHECK(n_added > 0 && n_added < 64);
    static int32_t ids[4096];
    const int sizes[2] = {64, 4096};
    float *hid = malloc(sizeof(float) * H), *full = malloc(sizeof(float) * V), *sub = malloc(sizeof(float) * V);
    REQUIRE(hid && full && sub);
    for (int k = 0; k < H; k++) hid[k] = (float)sin(0.37 * k + 1.0); /* any hidden row */
    REQUIRE(model_lm_head(M, HEAD_DRAFT, hid, 1, full, &e) == 0);
    for (int c = 0; c < 2; c++) {
        const int n = sizes[c];
        REQUIRE(tok_common_ids(tok, V, n, ids, &e) == 0);
        int added = 0, next = 0, ordered = 1;
        for (int i = 0; i < n; i++) {
            CHECK(i == 0 || ids[i] > ids[i - 1]);
            if (tok_is_added(tok, ids[i])) { added++; continue; }
            while (tok_is_added(tok, next)) next++;
            ordered &= ids[i] == next++; /* the smallest non-added ids, in order */
        }
        CHECK_INT(added, n_added);
        CHECK_MSG(ordered, "subset %d: not the lowest merge ranks", n);
        mtplx_model *mv;
        REQUIRE(model_load(MODEL_DIR, &mv, &e) == 0);
        int rc = model_draft_vocab(mv, ids, n, &e);
        if (rc == MTPLX_EUNSUPPORTED) { /* a backend without a draft vocabulary (none today) */
            model_free(mv);
            free(hid), free(full), free(sub);
            tok_free(tok);
            SKIP("%s", e.msg);
        }
        REQUIRE(rc == 0);
        CHECK_INT(model_draft_vocab_size(mv), n);
        REQUIRE(model_lm_head(mv, HEAD_DRAFT, hid, 1, sub, &e) == 0);
        int in = 0, bad = 0;
        for (int j = 0; j < V; j++) {
            if (in < n && ids[in] == j) bad += fabsf(sub[j] - full[j]) > 1e-4f * (1 + fabsf(full[j])), in++;
            else bad += !(isinf(sub[j]) && sub[j] < 0);
        }
        CHECK_MSG(bad == 0, "subset %d: %d logits differ from the full head's (or are not -inf outside)", n, bad);
        head_rows_and_lists_agree(mv, H, V, n);
        mtplx_err e2;
        CHECK_INT(model_draft_vocab(mv, ids, n, &e2), MTPLX_EINVAL); /* only once */
        if (c == 1) REQUIRE(model_quantize_draft(mv, 4, 64, 1, &e) == 0); /* quantizes the subset rows only */
        gen_session *s, *sv;
        REQUIRE(gen_session_new(M, &s, &e) == 0);
        REQUIRE(gen_session_new(mv, &sv, &e) == 0);
        int drafted = 0, accepted = 0, outside = 0, emitted = 0;
        for (int i = 0; i < N_PR; i += test_sanitized() ? 7 : 2) {
            gen_params p = greedy(0, test_sanitized() ? 12 : 32);
            int32_t *ref, *out;
            int n_ref, n_out;
            gen_stats st;
            if (run(s, PR[i].ids, PR[i].n, &p, &ref, &n_ref, &st)) break;
            p.depth = 1 + i % 5;
            if (run(sv, PR[i].ids, PR[i].n, &p, &out, &n_out, &st)) break;
            int same = n_out == n_ref;
            for (int k = 0; same && k < n_out; k++) same = out[k] == ref[k];
            CHECK_MSG(same, "prompt '%s', depth %d, draft vocabulary %d: output differs from AR", PR[i].name, p.depth, n);
            for (int k = 0; k < n_out; k++) {
                int hit = 0;
                for (int j = 0; j < n && !hit; j++) hit = ids[j] == out[k];
                outside += !hit;
            }
            drafted += st.drafted;
            accepted += st.accepted;
            emitted += n_out;
            free(ref);
            free(out);
        }
        printf("draft vocabulary %d: greedy == AR, %d/%d drafts accepted, %d of %d emitted ids outside the subset\n",
               n, accepted, drafted, outside, emitted);
        if (c == 0)
            CHECK_MSG(outside > emitted / 2, "64-id subset: only %d of %d emitted ids outside it", outside, emitted);
        else CHECK_MSG(accepted > drafted / 3, "4096-id q4 draft acceptance %d/%d", accepted, drafted);
        gen_session_free(s);
        gen_session_free(sv);
        model_free(mv);
    }
    mtplx_model *mv;
    REQUIRE(model_load(MODEL_DIR, &mv, &e) == 0);
    int32_t desc[2] = {5, 3};
    CHECK_INT(model_draft_vocab(mv, desc, 2, &e), MTPLX_EINVAL); /* ids must ascend */
    CHECK_INT(model_draft_vocab_size(mv), 0);
    model_free(mv);
    free(hid);
    free(full);
    free(sub);
    tok_free(tok);
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
    if (prompts_build()) return 1;
    RUN(test_greedy_matches_hf_golden_at_every_depth);
    RUN(test_greedy_mtp_identical_to_ar_on_distinct_prompts);
    RUN(test_quantized_draft_keeps_greedy_identical);
    RUN(test_draft_vocab_subset_keeps_greedy_identical);
    RUN(test_mtp_forward_head_equals_the_two_calls);
    RUN(test_callback_sees_every_token_and_can_cancel);
    RUN(test_seeded_sampling_is_reproducible_and_reports_seed);
    RUN(test_adaptive_depth_stops_drafting_early);
    RUN(test_bad_params_are_einval_naming_the_field);
    prompts_free();
    st_close(g);
    model_free(M);
    return TEST_SUMMARY();
}
