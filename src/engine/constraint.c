/* constraint.c — grammar matcher -> gen_constraint; see constraint.h. */
#include "constraint.h"

#include <stdlib.h>
#include <string.h>

static const uint32_t *m_mask(void *ctx, mtplx_err *err) { return grammar_matcher_mask(ctx, err); }
static int m_advance(void *ctx, int32_t tok, mtplx_err *err) { return grammar_matcher_advance(ctx, tok, err); }
static void m_rollback(void *ctx, int n) { grammar_matcher_rollback(ctx, n); }
static int m_ended(void *ctx) { return grammar_matcher_ended(ctx); }

gen_constraint gen_constraint_of_matcher(grammar_matcher *m) {
    gen_constraint c = {m, grammar_matcher_vocab_size(m), m_mask, m_advance, m_rollback, m_ended};
    return c;
}

int gen_think_close_ids(const tokenizer *t, int32_t *ids, int cap) {
    int32_t close = tok_token_to_id(t, "</think>", 8);
    if (close < 0 || cap < 1) return 0;
    int n = 0;
    ids[n++] = close;
    int32_t *nl = NULL;
    int nn = 0;
    mtplx_err e;
    if (!tok_encode(t, "\n\n", 2, &nl, &nn, &e))
        for (int i = 0; i < nn && n < cap; i++) ids[n++] = nl[i];
    free(nl);
    return n;
}
