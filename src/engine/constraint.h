/* constraint.h — a grammar matcher (src/grammar) as the decode loop's gen_constraint hook, and
 * the thinking prelude's closing ids from a chat template's tokenizer. */
#ifndef MTPLX_ENGINE_CONSTRAINT_H
#define MTPLX_ENGINE_CONSTRAINT_H

#include "../grammar/grammar.h"
#include "generate.h"

/* A gen_constraint whose ctx is m (borrowed: m outlives every generation that uses it). */
gen_constraint gen_constraint_of_matcher(grammar_matcher *m);

/* The ids of "</think>" followed by "\n\n" (how the chat templates close a think block) in *ids
 * (at most cap); returns the count, or 0 when t has no "</think>" token. */
int gen_think_close_ids(const tokenizer *t, int32_t *ids, int cap);

#endif
