/* test_grammar_pattern.c — `pattern`, `format` and the keywords minProperties / maxProperties,
 * prefixItems / items: false, uniqueItems and multipleOf in the structured-output grammar
 * (src/grammar/regex.c, docs/structured-output.md).
 *
 * The oracle for patterns is PCRE2 (an independent regex engine): random patterns of the supported
 * subset are generated twice, once in the ECMAScript syntax the schema takes and once as an
 * equivalent PCRE2 pattern (JS '.' and \s spelled out as the classes ECMAScript defines), and random
 * strings — JSON-encoded with raw UTF-8, short escapes and \u escapes at random — must be accepted
 * by the grammar exactly when PCRE2 finds a match in the decoded string. Byte-level random walks
 * through the automaton never reach a dead end, and every string they finish matches under PCRE2.
 * Documents for the other keywords are written by hand from the JSON Schema meaning. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/sbuf.h"
#include "../../src/engine/rng.h"
#include "../../src/grammar/grammar_int.h"
#include "grammar_util.h"
#include "test.h"

static const acc_case k_cases[] = {
    /* patterns: searches unless anchored; the decoded value is matched (escapes count as their character) */
    {"{\"type\":\"string\",\"pattern\":\"^[a-c]+$\"}", "\"abca\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^[a-c]+$\"}", "\"abd\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^[a-c]+$\"}", "\"\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^[a-c]+$\"}", "\"\\u0061b\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"b\"}", "\"xxbxx\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"b\"}", "\"xxxx\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"ax\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"xb\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^a|b$\"}", "\"xax\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\d{4}$\"}", "\"555-1234\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^\\\\d{3}-\\\\d{4}$\"}", "\"555-123\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^\\\"\\\\\\\\$\"}", "\"\\\"\\\\\"", 1}, /* the value "\ is a quote and a backslash */
    {"{\"type\":\"string\",\"pattern\":\"^.$\"}", "\"\\n\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^.$\"}", "\"\xf0\x9f\x98\x80\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^\\\\s$\"}", "\"\\u3000\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^(ab){2,3}$\",\"maxLength\":4}", "\"abab\"", 1},
    {"{\"type\":\"string\",\"pattern\":\"^(ab){2,3}$\",\"maxLength\":4}", "\"ababab\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^x*$\",\"minLength\":2}", "\"x\"", 0},
    {"{\"type\":\"string\",\"pattern\":\"^x*$\",\"minLength\":2}", "\"xxx\"", 1},
    {"{\"enum\":[\"ab\",\"cd\",\"a\"],\"pattern\":\"^a\"}", "\"cd\"", 0},
    {"{\"enum\":[\"ab\",\"cd\",\"a\"],\"pattern\":\"^a\"}", "\"ab\"", 1},
    {"{\"enum\":[\"ab\",\"cd\",\"a\"],\"maxLength\":1}", "\"ab\"", 0},
    /* formats */
    {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\"", 1},
    {"{\"type\":\"string\",\"format\":\"date\"}", "\"2023-02-29\"", 0},
    {"{\"type\":\"string\",\"format\":\"date\"}", "\"1900-02-29\"", 0},
    {"{\"type\":\"string\",\"format\":\"date\"}", "\"2000-02-29\"", 1},
    {"{\"type\":\"string\",\"format\":\"date\"}", "\"2024-04-31\"", 0},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-12-01T23:15:00Z\"", 1},
    {"{\"type\":\"string\",\"format\":\"date-time\"}", "\"2024-12-01T24:15:00Z\"", 0},
    {"{\"type\":\"string\",\"format\":\"time\"}", "\"08:30:00.5+02:00\"", 1},
    {"{\"type\":\"string\",\"format\":\"email\"}", "\"a.b+c@ex-ample.org\"", 1},
    {"{\"type\":\"string\",\"format\":\"email\"}", "\"a..b@example.org\"", 0},
    {"{\"type\":\"string\",\"format\":\"uuid\"}", "\"123e4567-e89b-12d3-a456-426614174000\"", 1},
    {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"192.168.0.255\"", 1},
    {"{\"type\":\"string\",\"format\":\"ipv4\"}", "\"192.168.0.256\"", 0},
    {"{\"type\":\"string\",\"format\":\"ipv6\"}", "\"fe80::1\"", 1},
    {"{\"type\":\"string\",\"format\":\"ipv6\"}", "\"::\"", 1},
    {"{\"type\":\"string\",\"format\":\"ipv6\"}", "\"1::2::3\"", 0},
    {"{\"type\":\"string\",\"format\":\"uri\"}", "\"https://example.com:8080/a/b?q=1#f\"", 1},
    {"{\"type\":\"string\",\"format\":\"uri\"}", "\"not a uri\"", 0},
    {"{\"type\":\"string\",\"format\":\"hostname\"}", "\"a-b.example.com\"", 1},
    {"{\"type\":\"string\",\"format\":\"hostname\"}", "\"-ab.com\"", 0},
    {"{\"type\":\"integer\",\"format\":\"int32\"}", "2147483648", 0},
    {"{\"type\":\"integer\",\"format\":\"int32\"}", "-2147483648", 1},
    /* multipleOf (integers) */
    {"{\"type\":\"integer\",\"multipleOf\":7}", "49", 1},
    {"{\"type\":\"integer\",\"multipleOf\":7}", "50", 0},
    {"{\"type\":\"integer\",\"multipleOf\":7}", "-14", 1},
    {"{\"type\":\"integer\",\"multipleOf\":7}", "0", 1},
    {"{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":11,\"maximum\":19}", "15", 1},
    {"{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":11,\"maximum\":19}", "10", 0},
    {"{\"type\":\"number\",\"multipleOf\":2}", "4.0", 0}, /* a multiple of an integer is written as an integer */
    /* minProperties / maxProperties */
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2}", "{\"a\": 1}", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"minProperties\":2}", "{\"a\": 1, \"c\": 2}", 1},
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"maxProperties\":1}", "{\"a\": 1, \"c\": 2}", 0},
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{},\"c\":{}},\"maxProperties\":1}", "{}", 1},
    {"{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"b\"],\"maxProperties\":1}", "{\"a\": 1}", 0},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,\"maxProperties\":2}",
     "{\"x\": 1, \"y\": 2}", 1},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"},\"minProperties\":1,\"maxProperties\":2}",
     "{\"x\": 1, \"y\": 2, \"z\": 3}", 0},
    /* prefixItems, items: false */
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[1, \"a\"]", 1},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[1]", 1},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[1, \"a\", 2]", 0},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"},{\"type\":\"string\"}],\"items\":false}", "[\"a\"]", 0},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"boolean\"}}", "[1, true, false]", 1},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\"}],\"items\":{\"type\":\"boolean\"}}", "[1, 2]", 0},
    {"{\"type\":\"array\",\"items\":false}", "[]", 1},
    {"{\"type\":\"array\",\"items\":false}", "[1]", 0},
    /* uniqueItems over a finite set */
    {"{\"type\":\"array\",\"items\":{\"enum\":[1,12,\"x\"]},\"uniqueItems\":true}", "[1, 12, \"x\"]", 1},
    {"{\"type\":\"array\",\"items\":{\"enum\":[1,12,\"x\"]},\"uniqueItems\":true}", "[12, 1, 12]", 0},
    {"{\"type\":\"array\",\"items\":{\"enum\":[1,12,\"x\"]},\"uniqueItems\":true}", "[1, 1]", 0},
    {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true}", "[true, false]", 1},
    {"{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true}", "[true, true]", 0},
    {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true,\"maxItems\":1}", "[\"a\"]", 1},
};

TEST(test_documents_by_hand) { check_acc_cases(k_cases, sizeof k_cases / sizeof k_cases[0]); }

TEST(test_refusals_name_the_keyword_and_reason) {
    const char *bad[][3] = {
        {"{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "'pattern' at #", "backreference"},
        {"{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", "'pattern' at #", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"a(?<!b)\"}", "'pattern' at #", "lookaround"},
        {"{\"type\":\"string\",\"pattern\":\"a+?\"}", "'pattern' at #", "lazy"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "'pattern' at #", "boundar"},
        {"{\"type\":\"string\",\"pattern\":\"a^b\"}", "'pattern' at #", "anchors"},
        {"{\"type\":\"string\",\"pattern\":\"\\\\p{L}\"}", "'pattern' at #", "property"},
        {"{\"type\":\"string\",\"pattern\":\"((a{100}){100}){100}\"}", "'pattern' at #", "size limit"},
        {"{\"type\":\"string\",\"pattern\":\"(a|b\"}", "'pattern' at #", "unbalanced"},
        {"{\"properties\":{\"s\":{\"type\":\"string\",\"format\":\"regex\"}}}", "'format' 'regex' at #/properties/s", ""},
        {"{\"type\":\"string\",\"format\":\"email\",\"pattern\":\"a\"}", "'format' together with 'pattern'", ""},
        {"{\"type\":\"number\",\"multipleOf\":0.5}", "'multipleOf' 0.5 at #", "integer divisors"},
        {"{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}", "'uniqueItems' at #", "fixed values"},
        {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "'items' at #", "prefixItems"},
        {"{\"type\":\"array\",\"additionalItems\":false}", "'additionalItems' at #", ""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mtplx_err e;
        int rc = compile_status(bad[i][0], &e);
        CHECK_MSG(rc == MTPLX_EUNSUPPORTED, "%s: rc %d", bad[i][0], rc);
        CHECK_MSG(rc && strstr(e.msg, bad[i][1]) && strstr(e.msg, bad[i][2]), "message for %s: %s", bad[i][0],
                  rc ? e.msg : "(none)");
    }
    const char *empty[] = {"{\"type\":\"string\",\"pattern\":\"^[a]{5}$\",\"maxLength\":4}",
                           "{\"type\":\"string\",\"pattern\":\"^[^\\\\s\\\\S]$\"}",
                           "{\"type\":\"integer\",\"multipleOf\":10,\"minimum\":1,\"maximum\":9}",
                           "{\"type\":\"object\",\"properties\":{\"a\":{}},\"minProperties\":2}",
                           "{\"type\":\"object\",\"properties\":{\"a\":{},\"b\":{}},\"required\":[\"a\",\"b\"],\"maxProperties\":1}",
                           "{\"type\":\"array\",\"items\":{\"enum\":[1,2]},\"uniqueItems\":true,\"minItems\":3}",
                           "{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}"};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        mtplx_err e;
        int rc = compile_status(empty[i], &e);
        CHECK_MSG(rc == MTPLX_EINVAL, "%s: rc %d (%s)", empty[i], rc, rc ? e.msg : "compiled");
    }
}

/* ---- random patterns, twice: ECMAScript (the schema) and PCRE2 (the oracle) ---- */

static const char *const k_alpha[] = {"a", "b", "c", "0", "7", "-", ".", " ", "\"", "\\", "\n", "\r", "/",
                                      "\xc3\xa9", "\xe2\x82\xac", "\xe3\x80\x80", "\xf0\x9f\x98\x80", "_", "Z"};
#define N_ALPHA ((int)(sizeof k_alpha / sizeof k_alpha[0]))

typedef struct {
    sbuf js, pc;
} dual;

static void emit(dual *d, const char *js, const char *pc) {
    sbuf_printf(&d->js, "%s", js);
    sbuf_printf(&d->pc, "%s", pc ? pc : js);
}

/* A literal character of the alphabet (escaped where it is syntax). */
static void gen_literal(dual *d, rng_state *r) {
    const char *c = k_alpha[rng_next(r) % N_ALPHA];
    if (!strcmp(c, "\n")) emit(d, "\\n", NULL);
    else if (!strcmp(c, "\r")) emit(d, "\\r", NULL);
    else if (strchr(".\\/", c[0]) && c[1] == 0) {
        char b[3] = {'\\', c[0], 0};
        emit(d, b, c[0] == '/' ? c : b);
    } else
        emit(d, c, NULL);
}

#define PC_SPACE "\\t-\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}"

static void gen_atom(dual *d, rng_state *r, int depth);

static void gen_alt(dual *d, rng_state *r, int depth) {
    int n = 1 + (int)(rng_next(r) % 3);
    for (int i = 0; i < n; i++) {
        if (i) emit(d, "|", NULL);
        int m = 1 + (int)(rng_next(r) % 3);
        for (int k = 0; k < m; k++) gen_atom(d, r, depth);
    }
}

static void gen_atom(dual *d, rng_state *r, int depth) {
    int k = (int)(rng_next(r) % 12);
    if (depth > 1 && k >= 9) k = 0;
    switch (k) {
    case 0: case 1: case 2: gen_literal(d, r); break;
    case 3: emit(d, "[a-c0-9]", NULL); break;
    case 4: emit(d, "[^a\\-\xc3\xa9]", "[^a\\-\\x{e9}]"); break;
    case 5: {
        static const char *cl[][2] = {{"\\d", NULL}, {"\\w", NULL}, {"\\D", NULL}, {"\\W", NULL},
                                      {"\\s", "[" PC_SPACE "]"}, {"\\S", "[^" PC_SPACE "]"},
                                      {".", "[^\\n\\r\\x{2028}\\x{2029}]"}, {"\\u00e9", "\\x{e9}"}, {"\\x41", NULL},
                                      {"\\u{1F600}", "\\x{1f600}"}};
        int i = (int)(rng_next(r) % 10);
        emit(d, cl[i][0], cl[i][1]);
        break;
    }
    case 6: emit(d, "[\\d_.\"]", NULL); break;
    case 7: emit(d, "\\\\", NULL); break;
    case 8: emit(d, "\"", NULL); break;
    default:
        emit(d, rng_next(r) % 2 ? "(" : "(?:", NULL);
        gen_alt(d, r, depth + 1);
        emit(d, ")", NULL);
    }
    switch (rng_next(r) % 9) {
    case 0: emit(d, "*", NULL); break;
    case 1: emit(d, "+", NULL); break;
    case 2: emit(d, "?", NULL); break;
    case 3: emit(d, "{2}", NULL); break;
    case 4: emit(d, "{1,3}", NULL); break;
    case 5: emit(d, "{2,}", NULL); break;
    default: break;
    }
}

/* A random string of the alphabet (UTF-8) into s. */
static void gen_string(sbuf *s, rng_state *r) {
    int n = (int)(rng_next(r) % 9);
    for (int i = 0; i < n; i++) sbuf_printf(s, "%s", k_alpha[rng_next(r) % N_ALPHA]);
}

/* s (UTF-8, n bytes) as a JSON string, each character written raw, as a short escape or as \uXXXX at random. */
static void json_encode(sbuf *o, const char *s, size_t n, rng_state *r) {
    sbuf_printf(o, "\"");
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        int len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        uint32_t cp = len == 1 ? c : c & (0x3f >> (len - 1));
        for (int k = 1; k < len; k++) cp = (cp << 6) | ((unsigned char)s[i + (size_t)k] & 0x3f);
        int mode = (int)(rng_next(r) % 3);
        if (cp < 0x20 || cp == '"' || cp == '\\') mode = mode ? mode : 1;
        if (cp > 0xffff && mode == 2) mode = 0;
        if (mode == 1 && (cp == 0 || cp > 0x7f || !strchr("\"\\/\n\r", (int)cp))) mode = cp < 0x20 ? 2 : 0;
        if (mode == 0) sbuf_printf(o, "%.*s", len, s + i);
        else if (mode == 1) {
            char esc[3] = {'\\', cp == '\n' ? 'n' : cp == '\r' ? 'r' : (char)cp, 0};
            sbuf_printf(o, "%s", esc);
        }
        else sbuf_printf(o, "\\u%04x", cp);
        i += (size_t)len;
    }
    sbuf_printf(o, "\"");
}

/* 1 match, 0 none, -1 PCRE2 gave up (its backtracking hit the match limit: no verdict). */
static int pcre_search(pcre2_code *re, pcre2_match_data *md, const char *s, size_t n) {
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    return rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : -1;
}

/* Random byte walk through the automaton of g (a string schema): every state has a successor byte
 * until the closing quote; returns the finished JSON text in out (1), or 0 when it ran long. */
static int byte_walk(const grammar *g, rng_state *r, sbuf *out, const char *what) {
    static gset cur, nx;
    gset_init(g, &cur);
    for (int step = 0; step < 120; step++) {
        int ok[256], n = 0, quote = 0;
        for (int c = 0; c < 256; c++)
            if (gset_step(g, &cur, c, &nx)) ok[n++] = c, quote |= c == '"' && step > 0;
        if (!n) {
            CHECK_MSG(gset_accepting(g, &cur), "%s: dead end after %s", what, sbuf_str(out));
            return gset_accepting(g, &cur);
        }
        int c = quote && rng_uniform(r) < 0.25 ? '"' : ok[rng_next(r) % (uint64_t)n];
        gset_step(g, &cur, c, &nx);
        cur = nx;
        sbuf_printf(out, "%c", c);
        if (c == '"' && step > 0 && gset_accepting(g, &cur)) return 1;
    }
    return 0;
}

TEST(test_patterns_against_pcre2) {
    rng_state r;
    rng_seed(&r, 20261201);
    const int n_pat = test_sanitized() ? 100 : 800, n_str = 60;
    long compared = 0, matched = 0, walks = 0, mismatches = 0, too_big = 0, gave_up = 0;
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    for (int pi = 0; pi < n_pat; pi++) {
        dual d = {0};
        int as = rng_next(&r) % 2, ae = rng_next(&r) % 2;
        if (as) emit(&d, "^", NULL);
        gen_alt(&d, &r, 0);
        if (ae) emit(&d, "$", NULL);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)sbuf_str(&d.pc), d.pc.len, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        json_t *sch = json_pack("{s:s, s:s%}", "type", "string", "pattern", sbuf_str(&d.js), d.js.len);
        grammar *g = NULL;
        mtplx_err e;
        int rc = grammar_from_schema(sch, &g, &e);
        if (rc == MTPLX_EUNSUPPORTED && strstr(e.msg, "too many states")) /* a refusal the limits allow */
            too_big++;
        else if (!re || (rc && rc != MTPLX_EINVAL)) {
            T_FAIL("pattern %s / %s: pcre2 %s, grammar %s", sbuf_str(&d.js), sbuf_str(&d.pc), re ? "ok" : "refused",
                   rc ? e.msg : "ok");
        } else if (rc == MTPLX_EINVAL) { /* an empty language: PCRE2 must match nothing we try */
            for (int si = 0; si < n_str; si++) {
                sbuf s = {0};
                gen_string(&s, &r);
                CHECK_MSG(pcre_search(re, md, sbuf_str(&s), s.len) != 1, "%s called empty, matches %s", sbuf_str(&d.js), sbuf_str(&s));
                sbuf_free(&s);
            }
        } else {
            for (int si = 0; si < n_str; si++) {
                sbuf s = {0}, j = {0};
                gen_string(&s, &r);
                json_encode(&j, sbuf_str(&s), s.len, &r);
                int want = pcre_search(re, md, sbuf_str(&s), s.len), got = grammar_accepts(g, sbuf_str(&j), j.len);
                if (want < 0) gave_up++;
                else if (want != got && mismatches++ < 10)
                    T_FAIL("pattern %s (pcre2 %s) on %s: grammar %d, pcre2 %d", sbuf_str(&d.js), sbuf_str(&d.pc), sbuf_str(&j),
                           got, want);
                compared += want >= 0;
                matched += want > 0;
                sbuf_free(&s);
                sbuf_free(&j);
            }
            for (int w = 0; w < 4; w++) { /* walks: no dead ends, and what they finish matches */
                sbuf out = {0};
                if (byte_walk(g, &r, &out, sbuf_str(&d.js))) {
                    json_error_t je;
                    json_t *v = json_loadb(sbuf_str(&out), out.len, JSON_DECODE_ANY, &je);
                    CHECK_MSG(json_is_string(v), "walk of %s produced %s", sbuf_str(&d.js), sbuf_str(&out));
                    int want = json_is_string(v) ? pcre_search(re, md, json_string_value(v), json_string_length(v)) : 1;
                    gave_up += want < 0;
                    if (!want && mismatches++ < 10)
                        T_FAIL("walk of %s finished %s, which pcre2 does not match", sbuf_str(&d.js), sbuf_str(&out));
                    json_decref(v);
                    walks++;
                }
                sbuf_free(&out);
            }
        }
        grammar_free(g);
        json_decref(sch);
        pcre2_code_free(re);
        sbuf_free(&d.js);
        sbuf_free(&d.pc);
    }
    pcre2_match_data_free(md);
    printf("  %d patterns (%ld refused as too large), %ld strings compared (%ld matched), %ld finished walks, "
           "%ld left out (PCRE2 hit its backtracking limit)\n", n_pat, too_big, compared, matched, walks, gave_up);
    CHECK(compared > 1000 && matched > compared / 20 && walks > 100 && too_big < n_pat / 10);
}

/* The formats against PCRE2 spellings written here from their RFCs (ipv6 as the eight groups with
 * at most one "::"), on strings from walks (which must all match) and on mutated ones. */
TEST(test_format_walks_match) {
    static const char *fm[][2] = {
        {"date", "^\\d{4}-\\d\\d-\\d\\d$"},
        {"time", "^\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?([Zz]|[+-]\\d\\d:\\d\\d)$"},
        {"date-time", "^\\d{4}-\\d\\d-\\d\\d[Tt]\\d\\d:\\d\\d:\\d\\d(\\.\\d+)?([Zz]|[+-]\\d\\d:\\d\\d)$"},
        {"email", "^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$"},
        {"uuid", "^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$"},
        {"ipv4", "^(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})$"},
        {"ipv6", "^(?=.*:)(?!.*::.*::)[0-9a-fA-F:]{2,39}$"},
        {"uri", "^[A-Za-z][A-Za-z0-9+.-]*:\\S*$"},
        {"hostname", "^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\\.?$"},
    };
    rng_state r;
    rng_seed(&r, 99);
    pcre2_match_data *md = pcre2_match_data_create(8, NULL);
    for (size_t i = 0; i < sizeof fm / sizeof fm[0]; i++) {
        char sch[128];
        snprintf(sch, sizeof sch, "{\"type\":\"string\",\"format\":\"%s\"}", fm[i][0]);
        grammar *g = compile(sch);
        int ec;
        PCRE2_SIZE eo;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)fm[i][1], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &ec, &eo, NULL);
        REQUIRE(re);
        int done = 0;
        for (int w = 0; g && w < (test_sanitized() ? 20 : 200); w++) {
            sbuf out = {0};
            if (byte_walk(g, &r, &out, fm[i][0])) {
                json_t *v = json_loadb(sbuf_str(&out), out.len, JSON_DECODE_ANY, NULL);
                CHECK_MSG(v && pcre_search(re, md, json_string_value(v), json_string_length(v)) == 1, "format %s: walk gave %s",
                          fm[i][0], sbuf_str(&out));
                if (v && !strcmp(fm[i][0], "ipv4")) { /* each part at most 255 */
                    int a[4];
                    CHECK(sscanf(json_string_value(v), "%d.%d.%d.%d", &a[0], &a[1], &a[2], &a[3]) == 4 && a[0] < 256 &&
                          a[1] < 256 && a[2] < 256 && a[3] < 256);
                }
                json_decref(v);
                done++;
            }
            sbuf_free(&out);
        }
        CHECK_MSG(done > 0, "format %s: no walk finished", fm[i][0]);
        pcre2_code_free(re);
        grammar_free(g);
    }
    pcre2_match_data_free(md);
}

/* tool_choice "auto" with a strict tool: free text, any number of calls; a strict tool's arguments
 * follow its schema, another tool's call is free after its name; unknown names are not callable. */
TEST(test_strict_tools_under_auto) {
    json_t *tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"strict\":true,"
                               "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\","
                               "\"pattern\":\"^[A-Z][a-z]+$\"},\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":7}},"
                               "\"required\":[\"city\",\"days\"],\"additionalProperties\":false}}},"
                               "{\"type\":\"function\",\"function\":{\"name\":\"search\",\"parameters\":{\"type\":\"object\"}}}]",
                               0, NULL);
    REQUIRE(tools);
    CHECK(grammar_tool_is_strict(json_array_get(tools, 0)) && !grammar_tool_is_strict(json_array_get(tools, 1)));
    grammar *g;
    mtplx_err e;
    REQUIRE(!grammar_tool_calls_auto(tools, GRAMMAR_TOOLS_JSON, &g, &e));
    const char *call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
    const acc_case c[] = {
        {"", "", 0}, /* the automaton has no empty sentence here: the answer is at least one byte */
        {"", "Just an answer, <b>no</b> call: tool_call.", 1},
        {"", call, 1},
        {"", "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\nDone.", 1},
        {"", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"paris\", \"days\": 3}}\n</tool_call>", 0},
        {"", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 9}}\n</tool_call>", 0},
        {"", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", 0},
        {"", "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": 5, whatever}}\n</tool_call>", 1},
        {"", "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", 0},
        {"", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\", \"days\": 1}}\n</tool_call>\n"
             "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>", 1},
        {"", "text <tool_call>\n{\"name\": \"get_weather\"", 0}, /* an open call must finish */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++)
        CHECK_MSG(grammar_accepts(g, c[i].text, strlen(c[i].text)) == c[i].ok, "auto tools on %s: expected %d", c[i].text,
                  c[i].ok);
    grammar_free(g);
    /* the XML dialect: strict arguments as parameters; a raw-text string parameter cannot carry a pattern */
    int rc = grammar_tool_calls_auto(tools, GRAMMAR_TOOLS_XML, &g, &e);
    CHECK_MSG(rc == MTPLX_EUNSUPPORTED && strstr(e.msg, "'pattern'") && strstr(e.msg, "get_weather"), "%s", rc ? e.msg : "compiled");
    json_object_del(json_object_get(json_object_get(json_object_get(json_object_get(json_array_get(tools, 0), "function"),
                                                                     "parameters"), "properties"), "city"), "pattern");
    REQUIRE(!grammar_tool_calls_auto(tools, GRAMMAR_TOOLS_XML, &g, &e));
    const char *xml_ok = "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n"
                         "</parameter>\n</function>\n</tool_call>",
               *xml_bad = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n12\n"
                          "</parameter>\n</function>\n</tool_call>",
               *xml_free = "<tool_call>\n<function=search>\n<parameter=q>\nanything\n</parameter>\n</function>\n</tool_call>";
    CHECK(grammar_accepts(g, xml_ok, strlen(xml_ok)));
    CHECK(!grammar_accepts(g, xml_bad, strlen(xml_bad)));
    CHECK(grammar_accepts(g, xml_free, strlen(xml_free)));
    grammar_free(g);
    json_decref(tools);
}

int main(void) {
    RUN(test_documents_by_hand);
    RUN(test_refusals_name_the_keyword_and_reason);
    RUN(test_patterns_against_pcre2);
    RUN(test_format_walks_match);
    RUN(test_strict_tools_under_auto);
    return TEST_SUMMARY();
}
