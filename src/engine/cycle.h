/* cycle.h — the decode loop of one generation: the first token, then speculative cycles (draft,
 * verify, accept / residual / bonus, commit) or plain AR steps (depth 0), with emission, stop ids
 * and max_tokens.
 *
 * The loop sees the model only through cycle_model (draft logits, verify logits, commit) and its
 * randomness only through cycle_rand (one uniform per decision, with a hint saying what it is for).
 * generate.c drives it with the real model and the request RNG; tests/unit/test_spec_exact.c drives
 * the SAME functions with stand-in logit tables and a branch oracle that enumerates every outcome
 * with its exact probability (docs/speculative.md, "The exact proof"). No other copy of this logic
 * exists. */
#ifndef MTPLX_ENGINE_CYCLE_H
#define MTPLX_ENGINE_CYCLE_H

#include <stdint.h>

#include "../base/err.h"
#include "generate.h"
#include "rng.h"
#include "sampler.h"
#include "spec.h"

/* The model side of decoding. Every callback returns 0 or an error code with err set. */
typedef struct {
    void *ctx;
    /* logits[V] of draft position d (1-based); `prev` is the chain's input token: the pending x0 for
     * d = 1 (a new chain from the last committed position), else the draft y_{d-1}. With list != NULL
     * the row's logits_top list of cycle_state.dtop entries goes there instead (fwd_request.top_out's
     * layout) and logits is scratch. */
    int (*draft)(void *ctx, int d, int32_t prev, float *logits, int32_t *list, mtplx_err *err);
    /* One forward over seq[0..n) = [x0, y_1..y_{n-1}] after the committed tokens (the rows stay in
     * the state until commit). logits[n][V]: row r is the target's next-token logits after seq[r];
     * with lists != NULL each row's list of cycle_state.top entries instead ([n][2·top + 2]). */
    int (*verify)(void *ctx, const int32_t *seq, int n, float *logits, int32_t *lists, mtplx_err *err);
    /* The cycle goes on: keep the first `keep` (1..n) rows of the last verify of seq[0..n) and drop
     * the rest (keep == n: all drafts were accepted). Not called when the generation ended inside
     * the cycle. */
    int (*commit)(void *ctx, const int32_t *seq, int n, int keep, mtplx_err *err);
} cycle_model;

/* Where the uniforms come from. Each decision asks for one u in [0, 1) and passes what it will do
 * with it; the loop then decides with the production predicates (sampler_dist_sample_index,
 * spec_accept). The request RNG (cycle_rand_rng) ignores the hints; an exact enumerator returns one
 * representative u per outcome and weighs it by that outcome's probability. */
typedef struct cycle_rand cycle_rand;
struct cycle_rand {
    /* u for a draw from d: the loop takes d->ids[sampler_dist_sample_index(d, u)] */
    double (*draw)(cycle_rand *r, const sampler_dist *d);
    /* u for an acceptance test: the loop accepts iff spec_accept(u, p_y, q_y), i.e. u < ratio */
    double (*accept)(cycle_rand *r, double ratio);
};

/* The request RNG as a cycle_rand (xoshiro256**, rng.h): one rng_uniform per decision. */
typedef struct {
    cycle_rand base; /* must stay first */
    rng_state rng;
} cycle_rand_rng;

void cycle_rand_rng_init(cycle_rand_rng *r, uint64_t seed);

/* One generation's decode state: what carries from cycle to cycle (the penalty history in smp, the
 * completion, the pending token) plus scratch the caller owns. */
typedef struct {
    const gen_params *p;       /* request (depth, max_tokens, stop ids, adaptive depth, shaping) */
    int V;                     /* vocabulary size */
    sampler_params sp_p;       /* target shaping, penalties included */
    sampler_params sp_q;       /* draft shaping: the same without penalties */
    int pen;                   /* 1: p carries penalties */
    spec_residual_kind rkind;  /* exact, or the debug-only broken residual */
    sampler *smp;              /* penalty history: the caller notes the prompt, emission the completion */
    sampler_dist *pd;          /* scratch: target distribution of the current row */
    sampler_dist *q;           /* [GEN_MAX_DEPTH] q_d: what draft d was drawn from */
    sampler_dist *resid;       /* scratch: residual on rejection */
    float *logits;             /* [GEN_MAX_DEPTH + 1][V] verify logits (scratch) */
    float *dlogits;            /* [V] draft logits (scratch) */
    int32_t *toks;             /* [p->max_tokens] the completion */
    int n;                     /* completion tokens emitted */
    int32_t x0;                /* pending token: emitted, not yet in the model (valid when n > 0) */
    int done;                  /* 1: the generation is over (finish says why) */
    const char *finish;        /* "stop", "length", "cancel"; NULL while running */
    gen_token_fn fn;           /* emission callback (may be NULL) */
    void *user;
    gen_stats *st;             /* counters and draft/verify seconds are added here */
    const gen_constraint *con; /* structured output (p->constraint): masks p and q; NULL = none */
    int top;                   /* k > 0: sampler_build reads only the k best logits of each verify
                                  row (fwd_request.logits_top; 0: whole rows) */
    int dtop;                  /* the same for the draft rows (model_lm_head_top): the draft law
                                  q never has penalties, so only a mask needs whole rows */
    int32_t *tops;             /* NULL, or (cycle_use_lists) [GEN_MAX_DEPTH + 1][2·top + 2]: the verify rows
                                  come as logits_top lists and p is built from them (sampler_build_top:
                                  the same law, O(top) instead of O(V) a row) */
    int32_t *dtops;            /* the same for the draft row: NULL or [2·dtop + 2] */
    int depth_cap;             /* >= 0: this cycle drafts at most this many (the scheduler's load
                                  policy, set by the caller between cycles; 0 = a plain AR step);
                                  -1 = no cap. Only q changes, so the output law does not. */
} cycle_state;

/* Set c up for request p (already validated) over a vocabulary of V ids with caller-owned sampler
 * (prompt already noted), distributions (q: GEN_MAX_DEPTH of them, all with cap >= V) and buffers.
 * Does not allocate. */
void cycle_init(cycle_state *c, const gen_params *p, int V, sampler *smp, sampler_dist *pd, sampler_dist *q,
                sampler_dist *resid, float *logits, float *dlogits, int32_t *toks, gen_token_fn fn, void *user,
                gen_stats *st);

/* Take the verify and draft rows as logits_top lists where c->top / c->dtop allow (buffers of the
 * sizes cycle_state.tops / dtops give, caller-owned; NULL keeps whole rows). After cycle_init. */
void cycle_use_lists(cycle_state *c, int32_t *tops, int32_t *dtops);

/* Emit the first completion token, drawn from the target distribution of the last prompt row's
 * logits[V]. Returns 0 or an error (bad logits). */
int cycle_first(cycle_state *c, const float *logits, cycle_rand *r, mtplx_err *err);

/* One cycle: K = min(depth, tokens left) drafts (fewer with adaptive depth), one verify, the
 * acceptance tests, the residual or bonus token; emits what it decides and commits the kept rows
 * when the generation goes on. Call while !c->done. Returns 0 or an error from the model or the
 * sampler. */
int cycle_step(cycle_state *c, const cycle_model *m, cycle_rand *r, mtplx_err *err);

#endif
