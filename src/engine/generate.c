/* generate.c — one generation: prefill, then plain AR (depth 0) or the MTP speculative cycle.
 *
 * The cycle is the capture-commit variant with deferred correction (docs/speculative.md):
 *   x0 = the pending token (bonus or correction of the previous cycle, already emitted; the first
 *        cycle samples it from the prefill logits). Its trunk KV is not written yet.
 *   draft  y_d ~ q_d, d = 1..K, chaining the MTP head from (target hidden at the last committed
 *          position, x0); q_d is recorded exactly (the draft sampler's final distribution).
 *   verify one capturing trunk forward over [x0, y_1..y_K] (K+1 rows).
 *   accept y_i iff u < min(1, p_i(y_i)/q_i(y_i)); p_i carries the penalties, q_i never does.
 *   reject at i: emit c ~ normalize(max(p_i − q_i, 0)), keep rows [x0, y_1..y_{i-1}] with
 *          model_state_commit (no re-forward); c becomes the next pending x0.
 *   all accepted: bonus b ~ p from the last row becomes the next pending x0.
 * The MTP head's KV history holds only committed (target hidden, next token) pairs: draft step 1
 * writes the real pair (hidden, x0) at row O; the speculative rows O+1.. are trimmed after verify
 * and replaced by the target pairs (verify hidden[r], y_{r+1}) of the accepted drafts.
 * Depth 0 is the same loop with K = 0: a one-row forward and the bonus is the AR sample.
 * The sampling side of the loop (draws, acceptance, residual, bonus, emission) is cycle.c, driven
 * here through a cycle_model over the real model (model_driver) and the request RNG; the exact
 * proof of the output law drives the same cycle.c with stand-in logits (docs/speculative.md). */
#include "generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/mem.h"
#include "cycle.h"
#include "../model/snapshot.h"
#include "prefix_cache.h"
#include "rng.h"
#include "sampler.h"
#include "sched.h"

#define MTP_PREFILL_CHUNK 64

struct gen_session {
    const mtplx_model *m;
    int V, H;                      /* vocabulary, hidden size */
    int has_mtp;
    int capacity;                  /* positions the states were made for (0 = not made yet) */
    model_state *st;               /* trunk state, max_rows = GEN_MAX_DEPTH + 1 */
    mtp_state *mst;                /* MTP KV history; NULL without an MTP head */
    sampler *smp;
    sampler_dist p;                /* target distribution of the current row */
    sampler_dist q[GEN_MAX_DEPTH]; /* q_d: what draft d was drawn from */
    sampler_dist resid;            /* residual on rejection */
    float *logits;                 /* [GEN_MAX_DEPTH + 1][V] verify (or prefill last-row) logits */
    float *hidden;                 /* [GEN_MAX_DEPTH + 1][H] verify post-norm hiddens */
    float *cur_hidden;             /* [H] target hidden at the last committed position */
    float *dlogits;                /* [V] draft logits */
    int lists;                     /* 1: verify / draft rows as logits_top lists where the sampler allows
                                      (cycle_use_lists); $MTPLX_SAMPLER_LISTS=0: whole rows (comparison) */
    int32_t tops[(GEN_MAX_DEPTH + 1) * (2 * MODEL_TOP_MAX + 2)]; /* the verify rows' lists */
    int32_t dtops[2 * MODEL_TOP_MAX + 2];                       /* the draft row's list */
    float *dh;                     /* [GEN_MAX_DEPTH + 1][H] chained MTP post-norm hiddens */
    float *mtp_out;                /* [MTP_PREFILL_CHUNK][H] MTP outputs of history appends */
    float *hist_h;                 /* [GEN_MAX_DEPTH + 1][H] committed pairs not yet in the MTP history: */
    int32_t hist_t[GEN_MAX_DEPTH + 1]; /* target hiddens and next tokens, fused into the next draft step */
    float *pre_hidden;             /* [pre_cap][H] prefill hiddens (for the MTP history) */
    int pre_cap;
    int32_t *toks;                 /* [tok_cap] completion so far */
    int tok_cap;
    /* prompt cache (opt-in): the states right after the last prefill, to skip repeated prefills */
    int cache_on;
    model_state *snap;             /* trunk state after prefill of cache_ids */
    mtp_state *msnap;              /* MTP history after that prefill (when cache_mtp) */
    int32_t *cache_ids;            /* [cache_n] the cached prompt; NULL = nothing cached */
    int cache_n;
    int cache_mtp;                 /* 1: the MTP history and cache_hidden are valid too */
    int ctx_limit;                 /* > 0: longest prompt + completion, instead of max_position_embeddings */
    float *cache_logits;           /* [V] last prompt row's logits */
    float *cache_hidden;           /* [H] last prompt row's post-norm hidden */
    progress_sink progress;        /* prefill progress (prompt tokens done, prompt tokens); fn NULL: none */
    sched *exec;                   /* the scheduler forwards go through, or NULL (alone) */
    prefix_cache *pcache;          /* prefix cache over exec's pool, or NULL (then the prompt cache above) */
    model_snap **pend;             /* [pend_cap] checkpoints taken by this request, added to pcache when */
    float **pend_hidden;           /* it ends; their hidden at L - 1 ([H], NULL without MTP history) */
    int n_pend, pend_cap;
    int last_out;                  /* completion tokens of the last run in s->toks */
    int restored;                  /* positions restored from pcache before admission (0: none) */
    prefix_lease lease;            /* the pages that restore lent */
    int disk_want;                 /* the disk tier has a deeper prefix than RAM: restore it after admission */
    int ram_L;                     /* ... than this RAM depth */
    int (*cancelled)(void *user);  /* polled while waiting for admission */
    void *cancel_user;
};

/* The model calls of a session: straight to the model when alone, through the scheduler when
 * attached (which merges them with other sessions' rows; the results are the same). Per-sequence
 * state changes outside forwards (reset, commit, trim, copies) take the model with sess_lock. */
static int sess_forward(gen_session *s, const int32_t *tok, int T, const fwd_request *r, mtplx_err *err) {
    return s->exec ? sched_forward(s->exec, s->st, tok, T, r, err) : model_forward(s->m, s->st, tok, T, r, err);
}

/* MTP rows (hidden[T][H], next[T]) into out; with logits, also head(out[lrow]) into logits[V] (with
 * top = k > 0 only its k best exact, model_lm_head_top), or with list its logits_top list there
 * (model_lm_head_list; logits is then scratch). */
static int sess_mtp(gen_session *s, const float *hidden, const int32_t *next, int T, float *out, head_kind head,
                    int lrow, float *logits, int top, int32_t *list, mtplx_err *err) {
    if (s->exec) return sched_mtp(s->exec, s->mst, hidden, next, T, out, head, lrow, logits, top, list, err);
    if (logits) return model_mtp_forward_head(s->m, s->mst, hidden, next, T, out, head, lrow, logits, top, list, err);
    return model_mtp_forward(s->m, s->mst, hidden, next, T, out, err);
}

static void sess_lock(gen_session *s) {
    if (s->exec) sched_lock(s->exec);
}

static void sess_unlock(gen_session *s) {
    if (s->exec) sched_unlock(s->exec);
}

/* Forget the cached prompt; its snapshot states stay allocated for the next store. */
static void cache_forget(gen_session *s) {
    free(s->cache_ids);
    s->cache_ids = NULL;
    s->cache_n = 0;
}

static void cache_drop(gen_session *s) {
    cache_forget(s);
    model_state_free(s->snap);
    if (s->msnap) mtp_state_free(s->msnap);
    s->snap = NULL;
    s->msnap = NULL;
}

void gen_session_attach(gen_session *s, sched *x) {
    if (s->exec == x) return;
    cache_drop(s);
    s->pcache = NULL;
    model_state_free(s->st);
    if (s->mst) mtp_state_free(s->mst);
    s->st = NULL;
    s->mst = NULL;
    s->capacity = 0;
    s->exec = x;
}

void gen_session_set_prefix_cache(gen_session *s, prefix_cache *pc) {
    if (pc) cache_drop(s);
    s->pcache = s->exec ? pc : NULL;
}

void gen_session_set_cancel(gen_session *s, int (*cancelled)(void *user), void *user) {
    s->cancelled = cancelled;
    s->cancel_user = user;
}

void gen_session_set_prompt_cache(gen_session *s, int on) {
    if (!on) cache_drop(s);
    s->cache_on = on;
}

void gen_session_set_context(gen_session *s, int n) { s->ctx_limit = n > 0 ? n : 0; }

void gen_session_set_progress(gen_session *s, progress_sink p) { s->progress = p; }

/* With a progress sink the prompt goes through the trunk in forwards of this many tokens, with a
 * report after each; the CPU backend's prefill chunk is this size by default (be_caps.prefill_rows), so
 * the split costs nothing there. */
#define PREFILL_PROGRESS_TOKENS 512

/* The trunk over prompt[n] from an empty state: the last row's logits into s->logits and, when
 * want_hidden, every row's post-norm hidden into s->pre_hidden. Split forwards give the same bits
 * as one (forwards are row-invariant, DESIGN.md §3). Returns 0 or the forward's error. */
static int prefill_trunk(gen_session *s, const int32_t *prompt, int n, int want_hidden, mtplx_err *err) {
    int chunk = s->progress.fn ? PREFILL_PROGRESS_TOKENS : n;
    for (int c0 = 0; c0 < n; c0 += chunk) {
        int R = n - c0 < chunk ? n - c0 : chunk, last = c0 + R == n;
        fwd_request req = {last ? s->logits : NULL, R - 1, want_hidden ? s->pre_hidden + (size_t)c0 * s->H : NULL, 0};
        int rc = sess_forward(s, prompt + c0, R, &req, err);
        if (rc) return rc;
        progress_report(&s->progress, (uint64_t)(c0 + R), (uint64_t)n);
    }
    return 0;
}

void gen_params_default(gen_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_p = 1.0f;
    p->top_k = 0;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    p->max_tokens = 256;
    p->depth = 0;
}

static sampler_params target_params(const gen_params *p) {
    sampler_params sp = {p->temperature, p->top_p, p->top_k, p->min_p,
                         p->presence_penalty, p->frequency_penalty, p->repetition_penalty};
    return sp;
}

int gen_params_validate(const gen_params *p, int vocab, mtplx_err *err) {
    sampler_params sp = target_params(p);
    int rc = sampler_params_validate(&sp, err);
    if (rc) return rc;
    if (p->max_tokens <= 0) return err_set(err, MTPLX_EINVAL, "max_tokens must be > 0, got %d", p->max_tokens);
    if (p->depth < 0 || p->depth > GEN_MAX_DEPTH)
        return err_set(err, MTPLX_EINVAL, "depth must be in [0, %d], got %d", GEN_MAX_DEPTH, p->depth);
    if (!(p->draft_min_conf >= 0 && p->draft_min_conf < 1))
        return err_set(err, MTPLX_EINVAL, "draft_min_conf must be in [0, 1), got %g", p->draft_min_conf);
    if (p->n_stop_ids < 0 || p->n_stop_ids > GEN_MAX_STOP_IDS)
        return err_set(err, MTPLX_EINVAL, "stop ids: at most %d, got %d", GEN_MAX_STOP_IDS, p->n_stop_ids);
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] < 0 || p->stop_ids[i] >= vocab)
            return err_set(err, MTPLX_EINVAL, "stop id %d is outside the vocabulary [0, %d)", p->stop_ids[i], vocab);
    return 0;
}

int gen_session_new(const mtplx_model *m, gen_session **out, mtplx_err *err) {
    *out = NULL;
    const model_config *cfg = model_config_of(m);
    gen_session *s = mem_zalloc(1, sizeof *s, "generation session", err);
    if (!s) return MTPLX_ENOMEM;
    s->m = m;
    s->V = cfg->vocab_size;
    s->H = cfg->hidden_size;
    s->has_mtp = model_has_mtp(m);
    const char *ls = getenv("MTPLX_SAMPLER_LISTS");
    s->lists = !(ls && !strcmp(ls, "0"));
    const size_t V = (size_t)s->V, H = (size_t)s->H, R = GEN_MAX_DEPTH + 1;
    int rc = sampler_new(s->V, &s->smp, err);
    if (!rc) rc = sampler_dist_init(&s->p, s->V, err);
    if (!rc) rc = sampler_dist_init(&s->resid, s->V, err);
    for (int d = 0; !rc && d < GEN_MAX_DEPTH; d++) rc = sampler_dist_init(&s->q[d], s->V, err);
    if (!rc) {
        s->logits = mem_aligned(R * V * sizeof(float), "verify logits", err);
        s->hidden = mem_aligned(R * H * sizeof(float), "verify hidden", err);
        s->cur_hidden = mem_aligned(H * sizeof(float), "hidden", err);
        s->dlogits = mem_aligned(V * sizeof(float), "draft logits", err);
        s->dh = mem_aligned(R * H * sizeof(float), "draft hidden", err);
        s->mtp_out = mem_aligned(MTP_PREFILL_CHUNK * H * sizeof(float), "mtp history scratch", err);
        s->hist_h = mem_aligned(R * H * sizeof(float), "mtp pending pairs", err);
        s->cache_logits = mem_aligned(V * sizeof(float), "prompt cache logits", err);
        s->cache_hidden = mem_aligned(H * sizeof(float), "prompt cache hidden", err);
        if (!s->logits || !s->hidden || !s->cur_hidden || !s->dlogits || !s->dh || !s->mtp_out || !s->cache_logits ||
            !s->cache_hidden || !s->hist_h)
            rc = MTPLX_ENOMEM;
    }
    if (rc) {
        gen_session_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void gen_session_free(gen_session *s) {
    if (!s) return;
    for (int i = 0; i < s->n_pend; i++) model_snap_free(s->pend[i]), free(s->pend_hidden[i]);
    free(s->pend);
    free(s->pend_hidden);
    cache_drop(s);
    free(s->cache_logits);
    free(s->cache_hidden);
    model_state_free(s->st);
    if (s->mst) mtp_state_free(s->mst);
    sampler_free(s->smp);
    sampler_dist_free(&s->p);
    sampler_dist_free(&s->resid);
    for (int d = 0; d < GEN_MAX_DEPTH; d++) sampler_dist_free(&s->q[d]);
    free(s->logits);
    free(s->hidden);
    free(s->cur_hidden);
    free(s->dlogits);
    free(s->dh);
    free(s->mtp_out);
    free(s->hist_h);
    free(s->pre_hidden);
    free(s->toks);
    free(s);
}

/* Make sure states hold `need` positions and buffers hold n_prompt hiddens / max_tokens ids.
 * Allocation happens here, before the timed decode loop. */
static int session_reserve(gen_session *s, int need, int n_prompt, int max_tokens, mtplx_err *err) {
    if (s->exec && !s->st) { /* pooled states of the scheduler's capacity: pages come as they grow */
        int cap = sched_config_of(s->exec)->capacity, rc;
        sess_lock(s);
        rc = model_state_new_in(sched_pool(s->exec), cap, GEN_MAX_DEPTH + 1, &s->st, err);
        if (!rc && s->has_mtp) rc = mtp_state_new_in(sched_pool(s->exec), cap, &s->mst, err);
        sess_unlock(s);
        if (rc) return rc;
        s->capacity = cap;
    }
    if (need > s->capacity && s->exec)
        return err_set(err, MTPLX_ERANGE, "prompt + max_tokens needs %d positions; a sequence holds %d", need,
                       s->capacity);
    if (need > s->capacity) {
        cache_drop(s);
        int cap = need < 256 ? 256 : need;
        if (s->capacity && cap < 2 * s->capacity) cap = 2 * s->capacity;
        model_state_free(s->st);
        s->st = NULL;
        if (s->mst) mtp_state_free(s->mst);
        s->mst = NULL;
        s->capacity = 0;
        int rc = model_state_new(s->m, cap, GEN_MAX_DEPTH + 1, &s->st, err);
        if (rc) return rc;
        if (s->has_mtp) {
            rc = mtp_state_new(s->m, cap, &s->mst, err);
            if (rc) return rc;
        }
        s->capacity = cap;
    }
    if (n_prompt > s->pre_cap) {
        free(s->pre_hidden);
        s->pre_hidden = mem_aligned((size_t)n_prompt * s->H * sizeof(float), "prefill hidden", err);
        s->pre_cap = s->pre_hidden ? n_prompt : 0;
        if (!s->pre_hidden) return MTPLX_ENOMEM;
    }
    if (max_tokens > s->tok_cap) {
        free(s->toks);
        s->toks = mem_alloc((size_t)max_tokens, sizeof *s->toks, "completion tokens", err);
        s->tok_cap = s->toks ? max_tokens : 0;
        if (!s->toks) return MTPLX_ENOMEM;
    }
    return 0;
}

static int cache_copy(gen_session *s, int with_mtp, mtplx_err *err);

/* Remember the states after prefilling prompt (with the MTP history when with_mtp). */
static int cache_store(gen_session *s, const int32_t *prompt, int n, int with_mtp, mtplx_err *err) {
    cache_forget(s);
    /* on host memory no model lock: the snapshot's pages come from its own pool, only this session
     * writes the pages it copies, and holding the lock while the snapshot is allocated would stall
     * every other stream; a device backend's memory ops are not promised to be thread-safe */
    int lock = !model_memory_is_host(s->m);
    if (lock) sess_lock(s);
    int rc = cache_copy(s, with_mtp, err);
    if (lock) sess_unlock(s);
    if (rc) {
        cache_drop(s);
        return rc;
    }
    s->cache_ids = mem_alloc((size_t)n, sizeof *prompt, "prompt cache ids", err);
    if (!s->cache_ids) {
        cache_drop(s);
        return MTPLX_ENOMEM;
    }
    memcpy(s->cache_ids, prompt, (size_t)n * sizeof *prompt);
    s->cache_n = n;
    s->cache_mtp = with_mtp;
    memcpy(s->cache_logits, s->logits, (size_t)s->V * sizeof(float));
    if (with_mtp) memcpy(s->cache_hidden, s->cur_hidden, (size_t)s->H * sizeof(float));
    return 0;
}

/* The snapshot states (standalone, outside any scheduler's pool; allocated by the first store and kept:
 * on a GPU a state of the whole context is a device allocation, made under the model lock that every
 * other stream waits on — 3.4 ms a request in bench/batching.md "Session 27") as copies of the live
 * ones. */
static int cache_copy(gen_session *s, int with_mtp, mtplx_err *err) {
    int rc = s->snap ? 0 : model_state_new(s->m, s->capacity, 1, &s->snap, err);
    if (!rc && with_mtp && !s->msnap) rc = mtp_state_new(s->m, s->capacity, &s->msnap, err);
    if (!rc) rc = model_state_copy(s->snap, s->st, err);
    if (!rc && with_mtp) rc = mtp_state_copy(s->msnap, s->mst, err);
    return rc;
}

/* Append the committed pairs (hidden[r], next[r]), r < n, to the MTP history. */
static int mtp_append(gen_session *s, const float *hidden, const int32_t *next, int n, mtplx_err *err) {
    for (int r = 0; r < n; r += MTP_PREFILL_CHUNK) {
        int c = n - r < MTP_PREFILL_CHUNK ? n - r : MTP_PREFILL_CHUNK;
        int rc = sess_mtp(s, hidden + (size_t)r * s->H, next + r, c, s->mtp_out, HEAD_TARGET, 0, NULL, 0, NULL, err);
        if (rc) return rc;
    }
    return 0;
}

/* Checkpoint the live states now (their GDN states are copied; the KV pages are referenced when the
 * request ends, flush_checkpoints), with the trunk's hidden at L - 1 when mtp. Returns 0 or an error. */
static int checkpoint(gen_session *s, int mtp, const float *hidden, mtplx_err *err) {
    if (s->n_pend == s->pend_cap) {
        int cap = s->pend_cap ? 2 * s->pend_cap : 16;
        model_snap **p = realloc(s->pend, sizeof *p * (size_t)cap);
        if (p) s->pend = p;
        float **h = p ? realloc(s->pend_hidden, sizeof *h * (size_t)cap) : NULL;
        if (h) s->pend_hidden = h;
        if (!p || !h) return err_set(err, MTPLX_ENOMEM, "out of memory for %d checkpoints", cap);
        s->pend_cap = cap;
    }
    float *hc = NULL;
    if (mtp) {
        hc = mem_alloc((size_t)s->H, sizeof(float), "checkpoint hidden", err);
        if (!hc) return MTPLX_ENOMEM;
        memcpy(hc, hidden, sizeof(float) * (size_t)s->H);
    }
    model_snap *snap;
    sess_lock(s);
    int rc = model_snap_take(s->st, mtp ? s->mst : NULL, &snap, err);
    sess_unlock(s);
    if (rc) {
        free(hc);
        return rc;
    }
    s->pend[s->n_pend] = snap;
    s->pend_hidden[s->n_pend++] = hc;
    return 0;
}

/* The request's checkpoints into the prefix cache, before its states are reset: each references
 * its pages now (nothing writes them any more) and is keyed by its prefix of prompt + completion.
 * A checkpoint that cannot be kept is dropped (the cache is an optimisation, never an error). */
static void flush_checkpoints(gen_session *s, const int32_t *prompt, int n_prompt) {
    int n_ids = n_prompt + s->last_out;
    int32_t *ids = s->n_pend ? malloc(sizeof *ids * (size_t)n_ids) : NULL;
    if (ids) {
        memcpy(ids, prompt, sizeof *ids * (size_t)n_prompt);
        if (s->last_out) memcpy(ids + n_prompt, s->toks, sizeof *ids * (size_t)s->last_out);
    }
    sess_lock(s);
    int deepest = 0, in_prompt = 0;
    for (int i = 0; i < s->n_pend; i++) {
        mtplx_err e = {0};
        int L = model_snap_len(s->pend[i]);
        if (ids && L <= n_ids && !model_snap_attach(s->pend[i], s->st, s->pend_hidden[i] ? s->mst : NULL, &e)) {
            prefix_cache_put(s->pcache, ids, s->pend[i], s->pend_hidden[i], &e);
            deepest = L > deepest ? L : deepest;
            if (L <= n_prompt && L > in_prompt) in_prompt = L;
        } else
            model_snap_free(s->pend[i]);
        free(s->pend_hidden[i]);
    }
    /* the conversation so far (a turn's end) and the prompt's n - 1 (where a next turn that re-renders
     * the reply differently resumes): marked for the disk tier, for a later turn after RAM evicted
     * them or for the next server on the same --cache-dir; written once no stream runs (gen_session_persist) */
    if (ids && deepest) prefix_cache_persist(s->pcache, ids, deepest);
    if (ids && in_prompt && in_prompt < deepest) prefix_cache_persist(s->pcache, ids, in_prompt);
    sess_unlock(s);
    s->n_pend = 0;
    free(ids);
}

/* Restore into the (empty) states the deepest cached prefix of prompt[0, n - 1) (the last token
 * always runs: its row gives the first logits), before admission so that its pages need not be
 * reserved. Sets s->restored and s->lease; cur_hidden gets the hidden at L - 1 when mtp. With
 * use_disk, a deeper checkpoint on the disk tier wins: the RAM restore is undone and
 * s->disk_want set (its pages are the request's own, so it is read after admission). */
static int restore_prefix(gen_session *s, const int32_t *prompt, int n, int mtp, int use_disk, mtplx_err *err) {
    sess_lock(s);
    model_state_reset(s->st);
    if (s->mst) mtp_state_reset(s->mst);
    int L = prefix_cache_restore(s->pcache, prompt, n - 1, mtp, s->st, mtp ? s->mst : NULL, s->cur_hidden, &s->lease,
                                 err);
    sess_unlock(s);
    if (L < 0) return -L;
    s->restored = L;
    s->disk_want = use_disk && prefix_cache_disk_probe(s->pcache, prompt, n - 1, mtp, L) > L;
    s->ram_L = L;
    if (s->disk_want && L) {
        sess_lock(s);
        model_state_reset(s->st);
        if (s->mst) mtp_state_reset(s->mst);
        sess_unlock(s);
        prefix_cache_return(s->pcache, &s->lease);
        s->restored = 0;
    }
    return 0;
}

/* After admission, for s->disk_want: restore the disk tier's deepest checkpoint into the empty
 * states, into pages of the request's reservation; when no file deeper than RAM's passes its checks
 * (those that fail are logged and removed there), fall back to RAM's deepest checkpoint. Returns 0
 * or an error. */
static int restore_disk(gen_session *s, const int32_t *prompt, int n, int mtp, mtplx_err *err) {
    s->disk_want = 0;
    sess_lock(s);
    int L = prefix_cache_disk_restore(s->pcache, prompt, n - 1, mtp, s->ram_L, s->st, mtp ? s->mst : NULL,
                                      s->cur_hidden, err);
    sess_unlock(s);
    if (L < 0) return -L;
    if (L > 0) {
        s->restored = L;
        return 0;
    }
    return restore_prefix(s, prompt, n, mtp, 0, err); /* shares pages only: nothing to reserve */
}

/* Back to empty states and no lease (a restore that is not used). */
static void undo_restore(gen_session *s) {
    sess_lock(s);
    model_state_reset(s->st);
    if (s->mst) mtp_state_reset(s->mst);
    sess_unlock(s);
    if (s->pcache) prefix_cache_return(s->pcache, &s->lease);
    s->restored = 0;
}

/* Prefill prompt[n] through the prefix cache (docs/prefix-cache.md): from the restored prefix
 * (s->restored), forward the rest in segments that end on the cache's checkpoint grid and at n - 1, storing a
 * checkpoint at each segment end (trunk, GDN states and, with mtp, the MTP history of the pairs
 * whose next token lies inside the segment). Leaves the last row's logits in s->logits and, with
 * mtp, the last hidden in s->cur_hidden. *cached = the restored positions. Returns 0 or an error. */
static int prefill_cached(gen_session *s, const int32_t *prompt, int n, int mtp, int *cached, mtplx_err *err) {
    const size_t H = (size_t)s->H;
    int L = s->restored; /* restore_prefix ran before admission; cur_hidden holds the hidden at L - 1 */
    *cached = L;
    if (L > 0 && mtp) memcpy(s->pre_hidden + (size_t)(L - 1) * H, s->cur_hidden, H * sizeof(float));
    const int S = prefix_cache_spacing(s->pcache);
    for (int pos = L; pos < n;) {
        int end = (pos / S + 1) * S;
        if (end >= n - 1) end = pos < n - 1 ? n - 1 : n;
        if (s->progress.fn && end - pos > PREFILL_PROGRESS_TOKENS) end = pos + PREFILL_PROGRESS_TOKENS;
        fwd_request req = {end == n ? s->logits : NULL, end - pos - 1, mtp ? s->pre_hidden + (size_t)pos * H : NULL, 0};
        int rc = sess_forward(s, prompt + pos, end - pos, &req, err);
        if (!rc && mtp) { /* the pairs (h_j, x_{j+1}) with j + 1 < end */
            int j0 = pos > 0 ? pos - 1 : 0;
            rc = mtp_append(s, s->pre_hidden + (size_t)j0 * H, prompt + j0 + 1, end - 1 - j0, err);
        }
        if (!rc && end < n && !prefix_cache_has(s->pcache, prompt, end, mtp))
            rc = checkpoint(s, mtp, s->pre_hidden + (size_t)(end - 1) * H, err);
        if (rc) return rc;
        progress_report(&s->progress, (uint64_t)end, (uint64_t)n);
        pos = end;
    }
    if (mtp) memcpy(s->cur_hidden, s->pre_hidden + (size_t)(n - 1) * H, H * sizeof(float));
    return 0;
}

/* The real model as the cycle's cycle_model (cycle.h): draft = MTP layer + draft head, verify = one
 * capturing trunk forward, commit = trunk commit + MTP history bookkeeping. */
typedef struct {
    gen_session *s;
    int depth;
    head_kind dhead;   /* head the drafts use */
    int n_hist;        /* committed pairs in s->hist_h/hist_t waiting for the next draft step 1 */
    int drafted;       /* 1: this cycle ran draft step 1 (it appended the cycle's real pair) */
    int O;             /* MTP history row of this cycle's real pair (hidden, x0) */
    const float *h;    /* [H] input hidden of the next chained draft step */
    gen_stats *st;     /* mtp_history_s is added here */
    int32_t vseq[GEN_MAX_DEPTH + 1]; /* the last verify's rows [vn] and whether they still wait for */
    int vn, uncommitted;             /* their commit (a stop among accepted drafts skips it) */
    int top;           /* the verify rows' fwd_request.logits_top (cycle_state.top) */
    int dtop;          /* the draft rows' model_lm_head_top k (cycle_state.dtop) */
} model_driver;

/* Draft step d from token prev. Step 1 also appends the committed pairs of the last cycle: one MTP call
 * of n_hist + 1 rows (row-invariant, so identical to separate calls; the MTP weights are read once).
 * Alone (no scheduler) a draft's hidden row feeds only the next draft, so it stays in the MTP state
 * (model_mtp_forward_head with NULL rows); under a scheduler it comes back to s->dh. */
static int drv_draft(void *ctx, int d, int32_t prev, float *logits, int32_t *list, mtplx_err *err) {
    model_driver *v = ctx;
    gen_session *s = v->s;
    const size_t H = (size_t)s->H;
    float *hout = s->dh + (size_t)d * H;
    int rc, n = 1, lrow = 0;
    const float *hin = v->h;
    const int32_t *next = &prev;
    if (d == 1) {
        memcpy(s->hist_h + (size_t)v->n_hist * H, s->cur_hidden, H * sizeof(float));
        s->hist_t[v->n_hist] = prev;
        v->O = mtp_state_len(s->mst) + v->n_hist; /* the row of the real pair (hidden, x0) */
        v->drafted = 1;
        hin = s->hist_h, next = s->hist_t, n = v->n_hist + 1, lrow = v->n_hist;
        v->n_hist = 0;
    }
    if (!s->exec)
        return model_mtp_forward_head(s->m, s->mst, d == 1 ? hin : NULL, next, n, NULL, v->dhead, lrow, logits, v->dtop,
                                      list, err);
    rc = sess_mtp(s, hin, next, n, d == 1 ? s->mtp_out : hout, v->dhead, lrow, logits, v->dtop, list, err);
    if (d == 1) memcpy(hout, s->mtp_out + (size_t)lrow * H, H * sizeof(float));
    v->h = hout;
    return rc;
}

static int drv_verify(void *ctx, const int32_t *seq, int n, float *logits, int32_t *lists, mtplx_err *err) {
    model_driver *v = ctx;
    fwd_request vr = {logits, 0, v->depth > 0 ? v->s->hidden : NULL, n > 1, v->top, lists};
    memcpy(v->vseq, seq, sizeof *seq * (size_t)n);
    v->vn = n;
    v->uncommitted = 1;
    return sess_forward(v->s, seq, n, &vr, err);
}

/* The MTP history's invariant after every commit: its rows plus the pairs still waiting are one per
 * committed trunk position but the last (whose pair needs the next token). A broken history does
 * not change the output law, only the drafts' quality, so it would go unseen: check it. */
static int hist_check(const model_driver *v, mtplx_err *err) {
    int m = mtp_state_len(v->s->mst), t = model_state_len(v->s->st);
    if (m + v->n_hist != t - 1)
        return err_set(err, MTPLX_EINTERNAL, "MTP history out of step: %d rows + %d waiting for %d positions", m,
                       v->n_hist, t);
    return 0;
}

/* After a cycle without drafts (the scheduler capped the depth to 0): its real pair (the hidden
 * before x0, x0) joins the pairs waiting for the next draft step; when the buffer is full they go
 * into the MTP history now (no logits needed). Keeps the history complete for later drafts. */
static int hist_keep_ar(model_driver *v, const int32_t *seq, mtplx_err *err) {
    gen_session *s = v->s;
    const size_t H = (size_t)s->H;
    double th = clock_now();
    if (v->n_hist == GEN_MAX_DEPTH) { /* draft step 1 needs room for n_hist + 1 rows */
        int rc = sess_mtp(s, s->hist_h, s->hist_t, v->n_hist, s->mtp_out, HEAD_TARGET, 0, NULL, 0, NULL, err);
        if (rc) return err_prefix(err, "MTP history");
        v->n_hist = 0;
    }
    memcpy(s->hist_h + (size_t)v->n_hist * H, s->cur_hidden, H * sizeof(float));
    s->hist_t[v->n_hist++] = seq[0];
    memcpy(s->cur_hidden, s->hidden, H * sizeof(float));
    v->st->mtp_history_s += clock_now() - th;
    return hist_check(v, err);
}

static int drv_commit(void *ctx, const int32_t *seq, int n, int keep, mtplx_err *err) {
    model_driver *v = ctx;
    gen_session *s = v->s;
    const size_t H = (size_t)s->H;
    v->uncommitted = 0;
    if (keep < n) {
        sess_lock(s);
        int rc = model_state_commit(s->st, keep, err);
        sess_unlock(s);
        if (rc) return err_prefix(err, "commit");
    }
    if (v->depth > 0 && !v->drafted) return hist_keep_ar(v, seq, err);
    if (v->depth > 0) {
        double th = clock_now();
        memcpy(s->cur_hidden, s->hidden + (size_t)(keep - 1) * H, H * sizeof(float));
        sess_lock(s);
        int rc = mtp_state_trim(s->mst, v->O + 1, err); /* drop the speculative rows */
        sess_unlock(s);
        if (rc) return err_prefix(err, "MTP history");
        v->n_hist = keep - 1; /* target pairs (verify hidden[r], y_{r+1}), appended by the next draft */
        memcpy(s->hist_h, s->hidden, (size_t)v->n_hist * H * sizeof(float));
        memcpy(s->hist_t, seq + 1, (size_t)v->n_hist * sizeof(int32_t));
        v->st->mtp_history_s += clock_now() - th;
        v->drafted = 0;
        return hist_check(v, err);
    }
    return 0;
}

static int session_run(gen_session *s, const int32_t *prompt, int n_prompt, const gen_params *p,
                       gen_token_fn on_tokens, void *user, int32_t **out_tokens, int *n_out, gen_stats *stats,
                       mtplx_err *err);

/* After a generation: checkpoint the conversation (prompt + the n_out - 1 completion tokens in the
 * trunk; the last one is still pending) so that the next turn, whose prompt starts with it, pays
 * only for its new tokens. n_hist >= 0 (a speculative run): the committed MTP pairs still pending
 * are appended first, so the MTP history is complete. Skipped (0) when the trunk holds other rows
 * than those (a stop inside accepted drafts leaves rows past the output). Returns 0 or an error. */
static int store_turn(gen_session *s, int n_prompt, int n_out, int n_hist, mtplx_err *err) {
    int L = n_prompt + n_out - 1;
    if (n_out < 1 || model_state_len(s->st) != L || L <= n_prompt) return 0;
    if (n_hist > 0 && mtp_append(s, s->hist_h, s->hist_t, n_hist, err)) return err->code;
    int mtp = n_hist >= 0 && mtp_state_len(s->mst) == L - 1;
    return checkpoint(s, mtp, s->cur_hidden, err);
}

void gen_session_persist(gen_session *s) {
    if (!s->pcache || !s->exec || !sched_idle(s->exec)) return;
    sess_lock(s);
    prefix_cache_persist_marked(s->pcache);
    sess_unlock(s);
}

int gen_session_run(gen_session *s, const int32_t *prompt, int n_prompt, const gen_params *p,
                    gen_token_fn on_tokens, void *user, int32_t **out_tokens, int *n_out, gen_stats *stats,
                    mtplx_err *err) {
    if (!s->exec) return session_run(s, prompt, n_prompt, p, on_tokens, user, out_tokens, n_out, stats, err);
    if (out_tokens) *out_tokens = NULL;
    if (n_out) *n_out = 0;
    int rc = gen_params_validate(p, s->V, err);
    if (rc) return rc;
    if (n_prompt <= 0 || !prompt) return err_set(err, MTPLX_EINVAL, "prompt is empty (at least one token is needed)");
    int need = n_prompt + p->max_tokens + p->depth + 1, join = need;
    const sched_config *sc = sched_config_of(s->exec);
    s->restored = 0;
    s->disk_want = 0;
    if (s->pcache && need <= sc->capacity) {
        /* restore first: the pages it shares are the cache's to count (lent), not the request's. It
         * takes pages from index floor(L / P) on: the copy of the page the prefix ends inside, and
         * the growth after it. A restored MTP history holds L - 1 rows, so in the MTP pool that is
         * index floor((L - 1) / P): one page earlier when L falls on a page boundary */
        int P = model_kv_page_size(), mtp = p->depth > 0 && s->has_mtp;
        if ((rc = session_reserve(s, need, n_prompt, p->max_tokens, err)) ||
            (rc = restore_prefix(s, prompt, n_prompt, mtp, 1, err)))
            return rc;
        int kept = s->restored > 0 && mtp ? s->restored - 1 : s->restored; /* rows no write touches, every pool */
        join = need - kept / P * P;
        int lent = s->lease.n[0] > s->lease.n[1] ? s->lease.n[0] : s->lease.n[1];
        if (join > sc->capacity || (join + P - 1) / P + lent > sc->kv_pages) {
            undo_restore(s); /* it could never be admitted with the lease: cold fits */
            join = need;
        }
    }
    if ((rc = sched_join(s->exec, join, s->cancelled, s->cancel_user, err))) {
        undo_restore(s);
        return rc;
    }
    if (s->disk_want && (rc = restore_disk(s, prompt, n_prompt, p->depth > 0 && s->has_mtp, err))) {
        undo_restore(s);
        sched_leave(s->exec, join);
        return rc;
    }
    rc = session_run(s, prompt, n_prompt, p, on_tokens, user, out_tokens, n_out, stats, err);
    if (s->pcache) flush_checkpoints(s, prompt, n_prompt);
    undo_restore(s); /* give the pages back now: the next request may wait for them */
    sched_leave(s->exec, join);
    return rc;
}

static int session_run(gen_session *s, const int32_t *prompt, int n_prompt, const gen_params *p,
                       gen_token_fn on_tokens, void *user, int32_t **out_tokens, int *n_out, gen_stats *stats,
                       mtplx_err *err) {
    if (out_tokens) *out_tokens = NULL;
    if (n_out) *n_out = 0;
    s->last_out = 0;
    gen_stats st;
    memset(&st, 0, sizeof st);
    st.rng = RNG_ALGORITHM;
    const int V = s->V, H = s->H;
    int rc = gen_params_validate(p, V, err);
    if (rc) return rc;
    if (n_prompt <= 0 || !prompt) return err_set(err, MTPLX_EINVAL, "prompt is empty (at least one token is needed)");
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return err_set(err, MTPLX_EINVAL, "prompt token %d (at index %d) is outside the vocabulary [0, %d)",
                           prompt[i], i, V);
    const int depth = p->depth;
    if (depth > 0 && !s->has_mtp)
        return err_set(err, MTPLX_EUNSUPPORTED, "depth %d needs an MTP head, and this model has none (use depth 0)", depth);
    const int max_ctx = s->ctx_limit > 0 ? s->ctx_limit : model_config_of(s->m)->max_position_embeddings;
    long need = (long)n_prompt + p->max_tokens + depth + 1;
    if (max_ctx > 0 && (long)n_prompt + p->max_tokens > max_ctx)
        return err_set(err, MTPLX_ERANGE, "prompt (%d tokens) + max_tokens (%d) exceeds the model's context of %d",
                       n_prompt, p->max_tokens, max_ctx);
    if (need > (1L << 30)) return err_set(err, MTPLX_ERANGE, "prompt + max_tokens is too long");
    rc = session_reserve(s, (int)need, n_prompt, p->max_tokens, err);
    if (rc) return rc;

    st.seed = p->seed_set ? p->seed : rng_fresh_seed();
    st.depth = depth;
    st.draft_min_conf = depth > 0 ? p->draft_min_conf : 0;
    st.prompt_tokens = n_prompt;

    if (!s->restored) {
        sess_lock(s);
        model_state_reset(s->st);
        if (s->mst) mtp_state_reset(s->mst);
        sess_unlock(s);
    }
    sampler_reset(s->smp);
    sampler_note_prompt(s->smp, prompt, n_prompt);

    /* ---- prefill: trunk over the prompt, then the MTP history pairs (h_j, x_{j+1}), j < n-1 ---- */
    double t0 = clock_now();
    int cached = 0;
    int hit = !s->pcache && s->cache_on && s->cache_ids && s->cache_n == n_prompt && (depth == 0 || s->cache_mtp) &&
              !memcmp(s->cache_ids, prompt, (size_t)n_prompt * sizeof *prompt);
    if (hit) {
        sess_lock(s);
        rc = model_state_copy(s->st, s->snap, err);
        if (!rc && depth > 0) rc = mtp_state_copy(s->mst, s->msnap, err);
        sess_unlock(s);
        if (rc) return err_prefix(err, "prompt cache");
        memcpy(s->logits, s->cache_logits, (size_t)V * sizeof(float));
        memcpy(s->cur_hidden, s->cache_hidden, (size_t)H * sizeof(float));
        st.prompt_cached = 1;
        cached = n_prompt;
    } else if (s->pcache) {
        rc = prefill_cached(s, prompt, n_prompt, depth > 0, &cached, err);
        if (rc) return err_prefix(err, "prefill");
        prefix_cache_note(s->pcache, n_prompt, cached);
        st.prompt_cached = cached > 0;
    } else {
        rc = prefill_trunk(s, prompt, n_prompt, depth > 0, err);
        if (rc) return err_prefix(err, "prefill");
        if (depth > 0) {
            memcpy(s->cur_hidden, s->pre_hidden + (size_t)(n_prompt - 1) * H, (size_t)H * sizeof(float));
            rc = mtp_append(s, s->pre_hidden, prompt + 1, n_prompt - 1, err);
            if (rc) return err_prefix(err, "MTP history prefill");
        }
        if (s->cache_on) {
            rc = cache_store(s, prompt, n_prompt, depth > 0, err);
            if (rc) return err_prefix(err, "prompt cache");
        }
    }
    double t1 = clock_now();
    st.prefill_s = t1 - t0;
    st.cached_tokens = cached;

    /* ---- decode: the first token from the prefill logits, then cycles (cycle.c) ---- */
    cycle_state c;
    cycle_init(&c, p, V, s->smp, &s->p, s->q, &s->resid, s->logits, s->dlogits, s->toks, on_tokens, user, &st);
    if (s->lists) cycle_use_lists(&c, s->tops, s->dtops);
    cycle_rand_rng rr;
    cycle_rand_rng_init(&rr, st.seed);
    model_driver drv = {.s = s, .depth = depth, .dhead = p->draft_full_head ? HEAD_MTP : HEAD_DRAFT, .st = &st,
                        .top = c.top, .dtop = c.dtop};
    const cycle_model cm = {&drv, drv_draft, drv_verify, drv_commit};
    rc = cycle_first(&c, s->logits, &rr.base, err);
    while (!rc && !c.done) {
        int policy = s->exec && p->depth_auto && depth > 0, d0 = st.drafted, a0 = st.accepted;
        if (policy) c.depth_cap = sched_depth_cap(s->exec, depth);
        rc = cycle_step(&c, &cm, &rr.base, err);
        if (policy) sched_note_cycle(s->exec, st.drafted - d0, st.accepted - a0); /* the policy's acceptance */
    }
    if (rc) return rc;
    if (s->pcache && drv.uncommitted) { /* keep the verify rows up to the last emitted token */
        int keep = n_prompt + c.n - 1 - (model_state_len(s->st) - drv.vn);
        if (keep >= 1 && keep <= drv.vn) rc = drv_commit(&drv, drv.vseq, drv.vn, keep, err);
    }
    s->last_out = c.n;
    if (!rc && s->pcache) rc = store_turn(s, n_prompt, c.n, depth > 0 ? drv.n_hist : -1, err);
    if (rc) return err_prefix(err, "prefix cache");
    double t2 = clock_now();

    st.completion_tokens = c.n;
    st.decode_s = t2 - t1;
    st.prefill_tok_s = st.prefill_s > 0 ? n_prompt / st.prefill_s : 0;
    st.decode_tok_s = st.decode_s > 0 ? c.n / st.decode_s : 0;
    st.acceptance_rate = st.drafted ? (double)st.accepted / st.drafted : 0;
    st.tokens_per_verify = st.cycles ? (double)(c.n - 1) / st.cycles : 0;
    st.finish_reason = c.finish ? c.finish : "length";
    if (stats) *stats = st;
    if (out_tokens) {
        int32_t *o = mem_alloc((size_t)(c.n ? c.n : 1), sizeof *o, "completion", err);
        if (!o) return MTPLX_ENOMEM;
        memcpy(o, s->toks, (size_t)c.n * sizeof *o);
        *out_tokens = o;
    }
    if (n_out) *n_out = c.n;
    return 0;
}

int gen_run(const mtplx_model *m, const int32_t *prompt, int n_prompt, const gen_params *p,
            gen_token_fn on_tokens, void *user, int32_t **out_tokens, int *n_out, gen_stats *stats,
            mtplx_err *err) {
    gen_session *s;
    int rc = gen_session_new(m, &s, err);
    if (rc) return rc;
    rc = gen_session_run(s, prompt, n_prompt, p, on_tokens, user, out_tokens, n_out, stats, err);
    gen_session_free(s);
    return rc;
}
