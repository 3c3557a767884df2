/* test_grammar.c — the structured-output grammar engine (src/grammar): schema compilation and
 * refusals, the byte automaton on hand-written valid and invalid documents, token masks against a
 * brute-force check of every id of the real tokenizer, no dead ends on random walks, rollback,
 * the thinking prelude, and forced tool calls that the tool-call parser reads back.
 * The end-to-end check with an independent JSON Schema validator is tests/integration/grammar.sh. */
#include <stdlib.h>
#include <string.h>

#include "../../src/chat/toolcall.h"
#include "../../src/engine/rng.h"
#include "../../src/grammar/grammar_int.h"
#include "grammar_util.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"

static tokenizer *TOK;
static grammar_vocab *VOC;
static int32_t STOP[2];

/* Documents written by hand from the JSON grammar (RFC 8259) and the schema's meaning. */
static const acc_case k_cases[] = {
    {"{\"type\":\"integer\"}", "0", 1},
    {"{\"type\":\"integer\"}", "-12", 1},
    {"{\"type\":\"integer\"}", "012", 0},
    {"{\"type\":\"integer\"}", "1.5", 0},
    {"{\"type\":\"integer\",\"minimum\":10,\"maximum\":20}", "15", 1},
    {"{\"type\":\"integer\",\"minimum\":10,\"maximum\":20}", "9", 0},
    {"{\"type\":\"integer\",\"minimum\":10,\"maximum\":20}", "21", 0},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", "0", 0},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":0}", "-0", 0},
    {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":2}", "-1.25", 1},
    {"{\"type\":\"number\",\"minimum\":-1.5,\"maximum\":2}", "2.0001", 0},
    {"{\"type\":\"number\",\"exclusiveMaximum\":1}", "0.999", 1},
    {"{\"type\":\"number\",\"exclusiveMaximum\":1}", "1.0", 0},
    {"{\"type\":\"number\"}", "1e5", 1},
    {"{\"type\":\"number\"}", "1.", 0},
    {"{\"type\":\"number\"}", "-", 0},
    {"{\"type\":\"string\"}", "\"h\\u00e9 \\\"x\\\" \xc3\xa9\"", 1},
    {"{\"type\":\"string\"}", "\"\\ud800\"", 0},
    {"{\"type\":\"string\"}", "\"\xc3\"", 0},
    {"{\"type\":\"string\"}", "\"\xe0\x80\x80\"", 0},
    {"{\"type\":\"string\"}", "\"a\nb\"", 0},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9\xc3\xa9\"", 1},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\"", 0},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd\"", 0},
    {"{\"enum\":[\"red\",\"green\",1,null]}", "\"green\"", 1},
    {"{\"enum\":[\"red\",\"green\",1,null]}", "null", 1},
    {"{\"enum\":[\"red\",\"green\",1,null]}", "\"blue\"", 0},
    {"{\"enum\":[1,12]}", "12", 1},
    {"{\"enum\":[1,12]}", "1", 1},
    {"{\"const\":{\"a\":[1,2]}}", "{\"a\":[1,2]}", 1},
    {"{\"type\":[\"string\",\"null\"]}", "null", 1},
    {"{\"type\":\"string\",\"nullable\":true}", "\"x\"", 1},
    {"{\"type\":\"boolean\"}", "false", 1},
    {"{\"type\":\"boolean\"}", "fals", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     "{\"a\": 1, \"b\": \"x\"}", 1},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     "{\n  \"b\": \"x\",\n  \"a\": 1\n}", 1},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     "{\"b\": \"x\"}", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     "{\"a\": 1, \"a\": 2}", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}", "{\"c\": 1}", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
     "{\"c\": [1, {\"d\": null}]}", 1},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":true}",
     "{\"a\": \"not an integer\"}", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"string\"}}",
     "{\"x\": \"s\", \"a\": 3}", 1},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1, 2]", 1},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[]", 0},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}", "[1,2,3]", 0},
    {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
     "\"required\":[\"k\",\"x\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},\"y\":{\"type\":\"string\"}},"
     "\"required\":[\"k\",\"y\"]}]}",
     "{\"k\": \"b\", \"y\": \"s\"}", 1},
    {"{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
     "\"required\":[\"k\",\"x\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},\"y\":{\"type\":\"string\"}},"
     "\"required\":[\"k\",\"y\"]}]}",
     "{\"k\": \"b\", \"x\": 1}", 0},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":"
     "[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
     "{\"v\": 1, \"next\": {\"v\": 2, \"next\": null}}", 1},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":"
     "[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
     "{\"v\": 1, \"next\": {\"v\": 2}}", 0},
    {"{}", "[true, {\"a\": -0.5e3}, \"\"]", 1},
    /* a branch that can never finish is cut (no dead ends): only null is left of the anyOf */
    {"{\"$defs\":{\"loop\":{\"type\":\"object\",\"properties\":{\"y\":{\"$ref\":\"#/$defs/loop\"}},\"required\":[\"y\"]}},\"anyOf\":[{\"$ref\":\"#/$defs/loop\"},{\"type\":\"null\"}]}", "null", 1},
    {"{\"$defs\":{\"loop\":{\"type\":\"object\",\"properties\":{\"y\":{\"$ref\":\"#/$defs/loop\"}},\"required\":[\"y\"]}},\"anyOf\":[{\"$ref\":\"#/$defs/loop\"},{\"type\":\"null\"}]}", "{\"y\": null}", 0},
    {"{\"type\":\"object\"}", "  {}", 1},
    {"{\"type\":\"object\"}", "{} x", 0},
};

TEST(test_documents_accepted_and_rejected_by_hand) { check_acc_cases(k_cases, sizeof k_cases / sizeof k_cases[0]); }

TEST(test_json_object_mode_takes_objects_only) {
    grammar *g;
    mtplx_err e;
    REQUIRE(!grammar_json_object(&g, &e));
    const char *doc = "{\"a\": [1, \"x\", null], \"b\": {}}";
    CHECK(grammar_accepts(g, doc, strlen(doc)));
    CHECK(!grammar_accepts(g, "[1]", 3));
    CHECK(!grammar_accepts(g, "\"s\"", 3));
    grammar_free(g);
}

TEST(test_unsupported_keywords_are_named) {
    const char *bad[][2] = {{"{\"type\":\"string\",\"pattern\":\"^(?=a)\"}", "'pattern'"},
                            {"{\"type\":\"string\",\"format\":\"idn-email\"}", "'format'"},
                            {"{\"type\":\"number\",\"multipleOf\":0.01}", "'multipleOf'"},
                            {"{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}", "'not' at #/properties/a"},
                            {"{\"$ref\":\"http://x/y\"}", "$ref 'http://x/y'"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mtplx_err e;
        int rc = compile_status(bad[i][0], &e);
        CHECK_INT(rc, MTPLX_EUNSUPPORTED);
        CHECK_MSG(rc && strstr(e.msg, bad[i][1]), "message for %s: %s", bad[i][0], rc ? e.msg : "(none)");
    }
    /* limits: more enum values than GR_MAX_LITS is refused, not compiled */
    {
        sbuf big = {0};
        sbuf_printf(&big, "{\"enum\":[");
        for (int i = 0; i <= GR_MAX_LITS; i++) sbuf_printf(&big, "%s%d", i ? "," : "", i);
        sbuf_printf(&big, "]}");
        grammar *g;
        mtplx_err e;
        CHECK_INT(grammar_from_schema_text(sbuf_str(&big), big.len, &g, &e), MTPLX_EINVAL);
        sbuf_free(&big);
    }
    const char *empty[] = {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}",
                           "{\"enum\":[]}", "false", "{\"type\":\"integer\",\"exclusiveMinimum\":1,\"exclusiveMaximum\":2}",
                           "{\"$ref\":\"#\"}", "{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
                           "{\"type\":\"object\",\"properties\":{\"x\":{\"$ref\":\"#\"}},\"required\":[\"x\"]}"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        mtplx_err e;
        CHECK_INT(compile_status(empty[i], &e), MTPLX_EINVAL);
    }
}

/* Brute force: id is allowed iff its bytes, stepped one by one, leave a live parse (stop ids: iff
 * the state is accepting). */
static int allowed_brute(const grammar *g, const gset *st, int32_t id) {
    static gset a, b;
    if (id == STOP[0] || id == STOP[1]) return gset_accepting(g, st);
    const char *bytes;
    size_t n;
    if (tok_is_special(TOK, id) || !tok_token_bytes(TOK, id, &bytes, &n) || n == 0) return 0;
    const gset *cur = st;
    for (size_t i = 0; i < n; i++) {
        gset *dst = (i % 2) ? &b : &a;
        if (!gset_step(g, cur, (unsigned char)bytes[i], dst)) return 0;
        cur = dst;
    }
    return 1;
}

static const char *k_walk_schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\","
    "\"minimum\":0,\"maximum\":150},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"bb\",\"ccc\"]},\"maxItems\":3}},"
    "\"required\":[\"name\",\"age\"]}",
    "{\"anyOf\":[{\"type\":\"number\",\"minimum\":-3.5,\"maximum\":1000},{\"type\":\"array\",\"items\":{\"type\":\"boolean\"}},"
    "{\"type\":\"null\"}]}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}}",
    /* pattern / format strings (multi-byte tokens end inside code points and escapes), uniqueItems,
       maxProperties, prefixItems, multipleOf */
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"pattern\":\"^[a-z]{2}\\\\d{2,4}(-[A-Z\\u00e9]+)?$\"},"
    "\"when\":{\"type\":\"string\",\"format\":\"date-time\"},\"ip\":{\"type\":\"string\",\"format\":\"ipv6\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\",1,12]},\"uniqueItems\":true}},"
    "\"required\":[\"id\"],\"maxProperties\":2}",
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\",\"multipleOf\":7,\"maximum\":100},"
    "{\"type\":\"string\",\"pattern\":\"\\\\.\\\\s|^$\",\"maxLength\":5}],\"items\":false,\"minItems\":2}",
};

/* Random walks over the real vocabulary: at every step the mask equals the brute force on every id,
 * is never empty, and the finished text is accepted by the grammar and parses as JSON. */
TEST(test_masks_match_brute_force_and_never_dead_end) {
    rng_state r;
    rng_seed(&r, 7);
    const int V = grammar_vocab_size(VOC);
    for (size_t si = 0; si < sizeof k_walk_schemas / sizeof k_walk_schemas[0]; si++) {
        grammar *g = compile(k_walk_schemas[si]);
        if (!g) continue;
        grammar_matcher *m;
        mtplx_err e;
        REQUIRE(!grammar_matcher_new(g, VOC, STOP, 2, NULL, &m, &e));
        int walks = test_sanitized() ? 2 : 6, mismatches = 0;
        for (int w = 0; w < walks; w++) {
            grammar_matcher_reset(m);
            gset st;
            gset_init(g, &st);
            char text[4096];
            size_t tl = 0;
            for (int step = 0; step < 80; step++) {
                const uint32_t *mask = grammar_matcher_mask(m, &e);
                REQUIRE(mask);
                int32_t allowed[8192];
                int na = 0;
                for (int id = 0; id < V; id++) {
                    int bit = (mask[id >> 5] >> (id & 31)) & 1;
                    if (bit != allowed_brute(g, &st, id) && mismatches++ < 5)
                        T_FAIL("schema %zu step %d id %d: mask %d, brute force %d", si, step, id, bit, !bit);
                    if (bit && na < 8192) allowed[na++] = id;
                }
                CHECK_MSG(na > 0, "schema %zu: dead end after \"%.*s\"", si, (int)tl, text);
                if (!na) break;
                /* prefer a stop id when allowed half of the time, so that walks finish */
                int32_t pick = allowed[(int)(rng_uniform(&r) * na)];
                for (int i = 0; i < na; i++)
                    if ((allowed[i] == STOP[0] || allowed[i] == STOP[1]) && rng_uniform(&r) < 0.5) pick = allowed[i];
                if (pick == STOP[0] || pick == STOP[1]) {
                    CHECK(grammar_accepts(g, text, tl));
                    json_error_t je;
                    json_t *j = json_loadb(text, tl, JSON_DECODE_ANY, &je);
                    CHECK_MSG(j != NULL, "not JSON: %.*s", (int)tl, text);
                    json_decref(j);
                    break;
                }
                REQUIRE(!grammar_matcher_advance(m, pick, &e));
                const char *b;
                size_t bl;
                tok_token_bytes(TOK, pick, &b, &bl);
                if (tl + bl < sizeof text) memcpy(text + tl, b, bl), tl += bl;
                gset nx;
                for (size_t i = 0; i < bl; i++) {
                    gset_step(g, &st, (unsigned char)b[i], &nx);
                    st = nx;
                }
                if (grammar_matcher_ended(m)) {
                    CHECK(grammar_accepts(g, text, tl));
                    break;
                }
            }
        }
        grammar_stats gs = grammar_matcher_stats(m);
        CHECK(gs.computed <= gs.masks);
        grammar_matcher_free(m);
        grammar_free(g);
    }
}

TEST(test_rollback_restores_the_mask) {
    grammar *g = compile(k_walk_schemas[0]);
    REQUIRE(g);
    grammar_matcher *m;
    mtplx_err e;
    REQUIRE(!grammar_matcher_new(g, VOC, STOP, 2, NULL, &m, &e));
    const char *prefix = "{\"name\": \"Bo\", ";
    int32_t *ids;
    int n;
    REQUIRE(!tok_encode(TOK, prefix, strlen(prefix), &ids, &n, &e));
    const int W = (grammar_vocab_size(VOC) + 31) / 32;
    uint32_t *before = malloc((size_t)W * 4);
    memcpy(before, grammar_matcher_mask(m, &e), (size_t)W * 4);
    for (int i = 0; i < n; i++) REQUIRE(!grammar_matcher_advance(m, ids[i], &e));
    CHECK_INT(grammar_matcher_history(m), n);
    const uint32_t *mid = grammar_matcher_mask(m, &e);
    CHECK(memcmp(before, mid, (size_t)W * 4) != 0);
    grammar_matcher_rollback(m, n);
    CHECK(!memcmp(before, grammar_matcher_mask(m, &e), (size_t)W * 4));
    /* a forbidden token leaves the state as it was */
    int32_t bad = tok_token_to_id(TOK, "]", 1);
    CHECK_INT(grammar_matcher_advance(m, bad, &e), MTPLX_EINVAL);
    CHECK(!memcmp(before, grammar_matcher_mask(m, &e), (size_t)W * 4));
    free(before);
    free(ids);
    grammar_matcher_free(m);
    grammar_free(g);
}

TEST(test_thinking_budget_then_forced_close_then_grammar) {
    grammar *g = compile("{\"type\":\"boolean\"}");
    REQUIRE(g);
    int32_t close[4];
    close[0] = tok_token_to_id(TOK, "</think>", 8);
    close[1] = tok_token_to_id(TOK, "\xc4\x8a\xc4\x8a", 4); /* "\n\n" in the byte-level alphabet */
    REQUIRE(close[0] >= 0 && close[1] >= 0);
    grammar_think th = {3, close, 2, 0};
    grammar_matcher *m;
    mtplx_err e;
    REQUIRE(!grammar_matcher_new(g, VOC, STOP, 2, &th, &m, &e));
    int32_t word = tok_token_to_id(TOK, "def", 3);
    for (int i = 0; i < 3; i++) {
        const uint32_t *mk = grammar_matcher_mask(m, &e);
        CHECK(grammar_matcher_thinking(m));
        CHECK((mk[word >> 5] >> (word & 31)) & 1);
        CHECK(!((mk[STOP[0] >> 5] >> (STOP[0] & 31)) & 1)); /* no stop while thinking */
        REQUIRE(!grammar_matcher_advance(m, word, &e));
    }
    for (int k = 0; k < 2; k++) { /* budget spent: exactly the closing ids, in order */
        const uint32_t *mk = grammar_matcher_mask(m, &e);
        int count = 0;
        for (int id = 0; id < grammar_vocab_size(VOC); id++) count += (mk[id >> 5] >> (id & 31)) & 1;
        CHECK_INT(count, 1);
        CHECK((mk[close[k] >> 5] >> (close[k] & 31)) & 1);
        REQUIRE(!grammar_matcher_advance(m, close[k], &e));
    }
    CHECK(!grammar_matcher_thinking(m));
    int32_t *t;
    int nt;
    REQUIRE(!tok_encode(TOK, "true", 4, &t, &nt, &e));
    for (int i = 0; i < nt; i++) {
        CHECK(!grammar_matcher_ended(m));
        REQUIRE(!grammar_matcher_advance(m, t[i], &e));
    }
    free(t);
    CHECK(grammar_matcher_ended(m));
    /* the model may close the block itself */
    grammar_matcher_reset(m);
    REQUIRE(!grammar_matcher_advance(m, close[0], &e));
    CHECK(!grammar_matcher_thinking(m));
    grammar_matcher_free(m);
    grammar_free(g);
}

static int got_call(void *user, const tool_call *c) {
    char *out = user;
    snprintf(out, 512, "%s %s", c->name, c->arguments);
    return 0;
}
static int got_text(void *user, const char *s, size_t n) { return 0; }

TEST(test_forced_tool_call_in_both_dialects_parses_back) {
    const char *tools_s = "[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\","
                          "\"properties\":{\"path\":{\"type\":\"string\"},\"lines\":{\"type\":\"integer\",\"minimum\":1}},"
                          "\"required\":[\"path\"]}}}]";
    json_t *tools = json_loads(tools_s, 0, NULL);
    REQUIRE(tools);
    struct {
        grammar_tool_dialect d;
        const char *text, *bad;
    } cases[] = {
        {GRAMMAR_TOOLS_XML, "<tool_call>\n<function=read_file>\n<parameter=path>\na \"b\".py\n</parameter>\n"
                            "<parameter=lines>\n3\n</parameter>\n</function>\n</tool_call>",
         "<tool_call>\n<function=read_file>\n<parameter=lines>\n3\n</parameter>\n</function>\n</tool_call>"},
        {GRAMMAR_TOOLS_JSON, "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a \\\"b\\\".py\", \"lines\": 3}}\n</tool_call>",
         "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"lines\": 0, \"path\": \"x\"}}\n</tool_call>"},
    };
    for (int i = 0; i < 2; i++) {
        grammar *g;
        mtplx_err e;
        REQUIRE(!grammar_tool_calls(tools, NULL, 0, cases[i].d, &g, &e));
        CHECK_MSG(grammar_accepts(g, cases[i].text, strlen(cases[i].text)), "dialect %d", i);
        CHECK(!grammar_accepts(g, cases[i].bad, strlen(cases[i].bad)));
        toolcall_parser tp;
        char call[512] = "";
        toolcall_init(&tp, tools, 1);
        toolcall_feed(&tp, cases[i].text, strlen(cases[i].text), got_text, got_call, call);
        toolcall_finish(&tp, got_text, got_call, call);
        toolcall_free(&tp);
        CHECK_STR(call, "read_file {\"path\":\"a \\\"b\\\".py\",\"lines\":3}");
        grammar_free(g);
    }
    grammar *g;
    mtplx_err e;
    CHECK_INT(grammar_tool_calls(tools, "nope", 0, GRAMMAR_TOOLS_XML, &g, &e), MTPLX_EINVAL);
    json_decref(tools);
}

int main(void) {
    mtplx_err e;
    if (tok_load(MODEL_DIR, &TOK, &e) || grammar_vocab_new(TOK, &VOC, &e)) {
        fprintf(stderr, "setup: %s\n", e.msg);
        return 1;
    }
    STOP[0] = tok_token_to_id(TOK, "<|im_end|>", 10);
    STOP[1] = tok_token_to_id(TOK, "<|endoftext|>", 13);
    RUN(test_documents_accepted_and_rejected_by_hand);
    RUN(test_json_object_mode_takes_objects_only);
    RUN(test_unsupported_keywords_are_named);
    RUN(test_masks_match_brute_force_and_never_dead_end);
    RUN(test_rollback_restores_the_mask);
    RUN(test_thinking_budget_then_forced_close_then_grammar);
    RUN(test_forced_tool_call_in_both_dialects_parses_back);
    grammar_vocab_free(VOC);
    tok_free(TOK);
    return TEST_SUMMARY();
}
