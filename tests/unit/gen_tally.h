/* gen_tally.h — per-position draft outcomes of speculative generations, derived from gen_stats
 * (shared by test_generate.c and test_family_mtp.c). Header-only. */
#ifndef MTPLX_TEST_GEN_TALLY_H
#define MTPLX_TEST_GEN_TALLY_H

#include "../../src/engine/generate.h"

/* Outcomes summed over generations. From gen_stats alone: every cycle drafts position 1; a cycle
 * reaches position i >= 2 iff it accepted i-1 drafts, except the one cycle whose accept loop ended
 * the generation (stop id or max_tokens on an accepted draft), at most one per generation and
 * recognisable as n == accepted + cycles (no token after its accept loop). So rejects at i are
 * acc[i-1] - acc[i], minus 1 at the unknown position where that cycle ended: rej and bonus are
 * lower bounds, exact whenever the generation ended after an accept loop. */
typedef struct {
    long acc[GEN_MAX_DEPTH]; /* drafts accepted at position i+1 */
    long rej[GEN_MAX_DEPTH]; /* drafts rejected at position i+1 (lower bound, see above) */
    long bonus;              /* cycles with every draft accepted (lower bound) */
} pos_tally;

/* Add one generation of n completion tokens at the given depth. Not for runs whose adaptive depth
 * (draft_min_conf) cut a cycle's drafts short: those stop before position depth without a reject. */
static inline void tally_add(pos_tally *t, const gen_stats *st, int n, int depth) {
    if (st->cycles == 0 || depth <= 0) return;
    int ended_in_loop = n == st->accepted + st->cycles; /* else n == accepted + cycles + 1 */
    for (int i = 0; i < depth; i++) {
        long reached = i == 0 ? st->cycles : st->accepted_per_position[i - 1] - ended_in_loop;
        long r = reached - st->accepted_per_position[i];
        t->acc[i] += st->accepted_per_position[i];
        t->rej[i] += r > 0 ? r : 0;
    }
    long b = st->accepted_per_position[depth - 1] - ended_in_loop;
    t->bonus += b > 0 ? b : 0;
}

#endif
