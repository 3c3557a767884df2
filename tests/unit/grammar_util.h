/* grammar_util.h — helpers of the structured-output grammar tests (test_grammar.c,
 * test_grammar_pattern.c): compile a schema, check documents written by hand, and the status of a
 * schema the grammar must refuse. Include after test.h. */
#ifndef MTPLX_TEST_GRAMMAR_UTIL_H
#define MTPLX_TEST_GRAMMAR_UTIL_H

#include <string.h>

#include "../../src/grammar/grammar_int.h"
#include "test.h"

/* The grammar of a JSON schema, or NULL (the current test failed, the reason printed). Free with
 * grammar_free. */
static grammar *compile(const char *schema) {
    grammar *g = NULL;
    mtplx_err e;
    if (grammar_from_schema_text(schema, strlen(schema), &g, &e)) {
        T_FAIL("schema %s: %s", schema, e.msg);
        return NULL;
    }
    return g;
}

/* A document and whether the grammar of the schema must accept it. */
typedef struct {
    const char *schema;
    const char *text;
    int ok;
} acc_case;

/* Each of the n cases: the grammar of its schema accepts its text exactly when ok is set. */
static void check_acc_cases(const acc_case *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        grammar *g = compile(cases[i].schema);
        if (!g) continue;
        int got = grammar_accepts(g, cases[i].text, strlen(cases[i].text));
        CHECK_MSG(got == cases[i].ok, "schema %s on %s: expected %s, got %s", cases[i].schema, cases[i].text,
                  cases[i].ok ? "accept" : "reject", got ? "accept" : "reject");
        grammar_free(g);
    }
}

/* Compiles schema and returns the status: 0 (the grammar is freed again) or the error code, its
 * message in *e. */
static int compile_status(const char *schema, mtplx_err *e) {
    grammar *g = NULL;
    int rc = grammar_from_schema_text(schema, strlen(schema), &g, e);
    if (!rc) grammar_free(g);
    return rc;
}

#endif
