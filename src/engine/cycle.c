/* cycle.c — the decode loop (first token, speculative cycles, emission); see cycle.h and
 * docs/speculative.md ("The cycle"). */
#include "cycle.h"

#include <math.h>
#include <string.h>

#include "../base/clock.h"

static double rng_draw(cycle_rand *r, const sampler_dist *d) {
    (void)d;
    return rng_uniform(&((cycle_rand_rng *)r)->rng);
}

static double rng_accept(cycle_rand *r, double ratio) {
    (void)ratio;
    return rng_uniform(&((cycle_rand_rng *)r)->rng);
}

void cycle_rand_rng_init(cycle_rand_rng *r, uint64_t seed) {
    r->base.draw = rng_draw;
    r->base.accept = rng_accept;
    rng_seed(&r->rng, seed);
}

void cycle_init(cycle_state *c, const gen_params *p, int V, sampler *smp, sampler_dist *pd, sampler_dist *q,
                sampler_dist *resid, float *logits, float *dlogits, int32_t *toks, gen_token_fn fn, void *user,
                gen_stats *st) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->V = V;
    c->sp_p = (sampler_params){p->temperature,      p->top_p,             p->top_k,
                               p->min_p,            p->presence_penalty, p->frequency_penalty,
                               p->repetition_penalty};
    c->sp_q = c->sp_p; /* the draft sampler: same shaping, no penalties */
    c->sp_q.presence_penalty = c->sp_q.frequency_penalty = 0;
    c->sp_q.repetition_penalty = 1;
    c->pen = p->presence_penalty != 0 || p->frequency_penalty != 0 || p->repetition_penalty != 1;
    c->rkind = p->debug_broken_residual ? SPEC_RESIDUAL_BROKEN_DEBUG : SPEC_RESIDUAL_EXACT;
    c->smp = smp;
    c->pd = pd;
    c->q = q;
    c->resid = resid;
    c->logits = logits;
    c->dlogits = dlogits;
    c->toks = toks;
    c->fn = fn;
    c->user = user;
    c->depth_cap = -1;
    c->st = st;
    c->con = p->constraint;
    /* a mask moves entries below the top into it: whole rows then */
    c->top = c->con ? 0 : sampler_top_needed(&c->sp_p, c->pen, V);
    c->dtop = c->con ? 0 : sampler_top_needed(&c->sp_q, 0, V);
    c->tops = c->dtops = NULL;
}

void cycle_use_lists(cycle_state *c, int32_t *tops, int32_t *dtops) {
    c->tops = c->top > 0 ? tops : NULL;
    c->dtops = c->dtop > 0 ? dtops : NULL;
}

/* ---- structured output (docs/structured-output.md): the only place the constraint is used ---- */

/* Set logits[j] = -inf for every id the constraint forbids in its current state, and for the ids past
 * those its mask covers (no-op without a constraint). */
static int constrain(cycle_state *c, float *logits, mtplx_err *err) {
    if (!c->con) return 0;
    const uint32_t *m = c->con->mask(c->con->ctx, err);
    if (!m) return err->code ? err->code : MTPLX_EINTERNAL;
    const int n = c->con->vocab < c->V ? c->con->vocab : c->V;
    for (int j = 0; j < n; j++)
        if (!((m[j >> 5] >> (j & 31)) & 1)) logits[j] = -INFINITY;
    for (int j = n; j < c->V; j++) logits[j] = -INFINITY;
    return 0;
}

/* p of verify row i (0-based) of the last verify: from its list or its whole row. */
static int build_p(cycle_state *c, int i, mtplx_err *err) {
    if (c->tops)
        return sampler_build_top(c->smp, c->tops + (size_t)i * (2 * (size_t)c->top + 2), c->top, &c->sp_p, c->pd,
                                 err);
    int rc = constrain(c, c->logits + (size_t)i * c->V, err); /* p under the constraint's current state */
    return rc ? rc : sampler_build(c->smp, c->logits + (size_t)i * c->V, &c->sp_p, c->pen, c->pd, err);
}

/* Move the constraint past tok (a draft or an emitted token). */
static int con_advance(cycle_state *c, int32_t tok, mtplx_err *err) {
    return c->con ? c->con->advance(c->con->ctx, tok, err) : 0;
}

/* Append tok to the completion (penalty counts too, the constraint takes it) and report it. Returns 1
 * when the generation is over after it (cancel, stop id, structure complete or max_tokens; c->finish
 * says which), 0 when it goes on, or a negative error from the constraint. */
static int emit(cycle_state *c, int32_t tok, mtplx_err *err) {
    if (c->con) {
        int rc = con_advance(c, tok, err);
        if (rc) return rc;
    }
    c->toks[c->n++] = tok;
    sampler_note_token(c->smp, tok);
    if (c->fn && c->fn(c->user, &tok, 1)) {
        c->finish = "cancel";
        return 1;
    }
    for (int i = 0; i < c->p->n_stop_ids; i++)
        if (tok == c->p->stop_ids[i]) {
            c->finish = "stop";
            return 1;
        }
    if (c->con && c->con->ended(c->con->ctx)) { /* the structure is complete: nothing may follow */
        c->finish = "stop";
        return 1;
    }
    if (c->n >= c->p->max_tokens) {
        c->finish = "length";
        return 1;
    }
    return 0;
}

/* A draw from d with the uniform r gives for it. */
static int32_t draw(cycle_rand *r, const sampler_dist *d) { return sampler_dist_sample(d, r->draw(r, d)); }

int cycle_first(cycle_state *c, const float *logits, cycle_rand *r, mtplx_err *err) {
    if (c->con) { /* mask a copy: the caller's logits stay as they are */
        memcpy(c->dlogits, logits, (size_t)c->V * sizeof(float));
        int rc = constrain(c, c->dlogits, err);
        if (rc) return rc;
        logits = c->dlogits;
    }
    int rc = sampler_build(c->smp, logits, &c->sp_p, c->pen, c->pd, err);
    if (rc) return rc;
    c->x0 = draw(r, c->pd);
    rc = emit(c, c->x0, err);
    if (rc < 0) return rc;
    c->done = rc;
    return 0;
}

int cycle_step(cycle_state *c, const cycle_model *m, cycle_rand *r, mtplx_err *err) {
    const gen_params *p = c->p;
    gen_stats *st = c->st;
    int32_t seq[GEN_MAX_DEPTH + 1];
    int rc;
    int K = p->max_tokens - c->n;
    if (K > p->depth) K = p->depth;
    if (c->depth_cap >= 0 && K > c->depth_cap) K = c->depth_cap;
    /* draft */
    seq[0] = c->x0;
    if (K > 0) {
        double td = clock_now();
        double conf = 1; /* Π q_i(y_i) of this cycle's drafts (adaptive depth) */
        for (int d = 1; d <= K; d++) {
            rc = m->draft(m->ctx, d, seq[d - 1], c->dlogits, c->dtops, err);
            if (!rc && c->dtops) {
                rc = sampler_build_top(c->smp, c->dtops, c->dtop, &c->sp_q, &c->q[d - 1], err);
            } else if (!rc) {
                rc = constrain(c, c->dlogits, err); /* q_d is the masked draft law */
                if (!rc) rc = sampler_build(c->smp, c->dlogits, &c->sp_q, 0, &c->q[d - 1], err);
            }
            if (rc) return err_prefix(err, "draft %d", d);
            const sampler_dist *q = &c->q[d - 1];
            int idx = sampler_dist_sample_index(q, r->draw(r, q));
            seq[d] = q->ids[idx];
            conf *= q->probs[idx];
            if (c->con) { /* the next draft's mask is the state after this draft */
                if ((rc = con_advance(c, seq[d], err))) return err_prefix(err, "draft %d", d);
                if (d < K && c->con->ended(c->con->ctx)) K = d; /* nothing may follow it */
            }
            if (d < K && conf < p->draft_min_conf) K = d; /* the rest would likely be rejected */
        }
        if (c->con) c->con->rollback(c->con->ctx, K); /* verification re-advances what it accepts */
        st->drafted += K;
        st->draft_s += clock_now() - td;
    }
    /* verify (AR: decode) */
    double tv = clock_now();
    rc = m->verify(m->ctx, seq, K + 1, c->logits, c->tops, err);
    if (rc) return err_prefix(err, K > 0 ? "verify" : "decode");
    double ts = clock_now();
    st->verify_s += ts - tv;
    st->cycles++;
    /* accept loop: p_i from row i-1 (penalty counts include x0 and the accepted y_1..y_{i-1}) */
    int a = 0, rejected = 0;
    int32_t next = -1;
    for (int i = 1; i <= K; i++) {
        rc = build_p(c, i - 1, err); /* p_i under the constraint's state after y_1..y_{i-1} */
        if (rc) return rc;
        const int32_t y = seq[i];
        const double p_y = sampler_dist_prob(c->pd, y), q_y = sampler_dist_prob(&c->q[i - 1], y);
        if (spec_accept(r->accept(r, spec_accept_ratio(p_y, q_y)), p_y, q_y)) {
            a++;
            st->accepted++;
            st->accepted_per_position[i - 1]++;
            rc = emit(c, y, err);
            if (rc < 0) return rc;
            c->done = rc;
            if (c->done) return 0; /* nothing after a stop id or max_tokens is emitted */
        } else {
            spec_residual(c->pd, &c->q[i - 1], y, c->rkind, c->smp->dense, c->resid);
            next = draw(r, c->resid);
            rejected = 1;
            break;
        }
    }
    double tc = clock_now();
    st->sample_s += tc - ts;
    rc = m->commit(m->ctx, seq, K + 1, rejected ? a + 1 : K + 1, err);
    if (rc) return rc;
    if (!rejected) { /* bonus (AR: the next token) from the last row */
        tc = clock_now();
        rc = build_p(c, K, err);
        if (rc) return rc;
        next = draw(r, c->pd);
        st->sample_s += clock_now() - tc;
    }
    c->x0 = next;
    rc = emit(c, next, err);
    if (rc < 0) return rc;
    c->done = rc;
    return 0;
}
