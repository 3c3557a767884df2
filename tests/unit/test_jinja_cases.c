/* test_jinja_cases.c — the engine against real Jinja2: tests/data/jinja-cases.json holds templates
 * with their output (or the exception) from Jinja2 configured as Hugging Face configures it, made
 * by tools/jinja_goldens.py. Each case must render byte-identically, or fail where Jinja fails. */
#include <jansson.h>

#include "../../src/chat/jinja.h"
#include "test.h"

TEST(test_cases_match_jinja2) {
    json_error_t je;
    json_t *ref = json_load_file("tests/data/jinja-cases.json", 0, &je);
    REQUIRE(ref);
    size_t i;
    json_t *c;
    int n = 0;
    json_array_foreach(json_object_get(ref, "cases"), i, c) {
        const char *name = json_string_value(json_object_get(c, "name"));
        json_t *tpl = json_object_get(c, "template");
        json_t *want = json_object_get(c, "out");
        json_t *want_err = json_object_get(c, "error");
        mtplx_err err = {0};
        jinja_template *t = NULL;
        char *out = NULL;
        size_t len = 0;
        int rc = jinja_parse(json_string_value(tpl), json_string_length(tpl), &t, &err);
        if (!rc) rc = jinja_render(t, json_object_get(c, "vars"), NULL, &out, &len, &err);
        n++;
        if (want_err) {
            if (!rc) T_FAIL("%s: Jinja2 raised %s, we rendered \"%s\"", name, json_string_value(want_err), out);
            else if (getenv("TEST_VERBOSE"))
                fprintf(stderr, "  %s\n    jinja: %s\n    ours:  %s\n", name, json_string_value(want_err), err.msg);
            CHECK_MSG(!rc || err.msg[0], "%s: error without a message", name);
        } else if (rc) {
            T_FAIL("%s: %s", name, err.msg);
        } else if (len != json_string_length(want) || memcmp(out, json_string_value(want), len)) {
            T_FAIL("%s:\n    want: %s\n    got:  %s", name, json_string_value(want), out);
        }
        free(out);
        jinja_free(t);
    }
    CHECK_MSG(n > 100, "only %d cases", n);
    json_decref(ref);
}

int main(void) {
    RUN(test_cases_match_jinja2);
    return TEST_SUMMARY();
}
