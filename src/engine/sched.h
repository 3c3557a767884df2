/* sched.h — continuous batching: many generations share one forward per step
 * (docs/architecture.md, "The scheduler").
 *
 * Each generation runs its own decode loop (generate.c + cycle.c: prefill chunks, draft, verify,
 * accept/commit) on its own thread, with its own sampler, seed, depth and stop conditions. Where
 * that loop would call the model, it hands its rows to the scheduler and waits: the rows of every
 * running sequence that is waiting are merged into one trunk forward (model_forward_batch) and one
 * MTP forward (model_mtp_forward_batch, with the draft heads), and the last sequence to arrive — or
 * the first one after a short wait for sequences still sampling — runs them for everyone. So a
 * request is a state machine whose states are the points where it waits for rows; the scheduler
 * merges the rows of all of them into one forward per step. Sequences join and leave between
 * forwards. Because every op is row-invariant, a sequence's tokens do not depend on which others
 * share its forwards (tests/unit/test_sched.c).
 *
 * Memory: one sequence pool (KV pages) for all; a sequence is admitted (sched_join) only when the
 * pages its whole request could need are free, so a running sequence never runs out of pages. */
#ifndef MTPLX_ENGINE_SCHED_H
#define MTPLX_ENGINE_SCHED_H

#include <stdint.h>

#include "../base/err.h"
#include "../model/model.h"
#include "sched_cost.h"

typedef struct sched sched;

typedef struct {
    int max_seqs;        /* sequences generating at once (>= 1) */
    int max_batch_rows;  /* rows in one forward (>= prefill_chunk and >= GEN_MAX_DEPTH + 1); 0 (the
                            default) = max(128, prefill_chunk, max_seqs verifies), sched_config_resolve */
    int prefill_chunk;   /* prompt rows of one sequence in one forward when it runs alone; while
                            others decode, cut by the measured costs (sched_prefill_rows). 0 (the
                            default) = the model's: sched_config_resolve */
    int capacity;        /* positions one sequence may hold (prompt + completion + draft rows) */
    int kv_pages;        /* pages in the pool; 0 = max_seqs sequences of `capacity` positions */
    double wait_ms;      /* how long a ready forward waits for sequences still sampling */
    int knee_rows;       /* rows a trunk forward carries at about the cost of one (memory-bound);
                            the depth policy keeps the running sequences' verify rows near it */
    int align_phases;    /* 1: a step runs one kind of rows, drafts first, so that the sequences'
                            cycles line up and their verifies share one trunk forward (sched.c,
                            next_kind); 0: every queued request in every step (a trunk and an MTP
                            forward whenever sequences are out of phase). Default 1;
                            MTPLX_SCHED_ALIGN=0 in sched_config_default gives 0 */
    int mtp_head;        /* 1: an MTP step's drafts go through the head behind the layer in one call
                            (model_mtp_forward_batch_head: one wait a step); 0: the layer, its rows
                            down, the heads' rows up again (before session 19). Default 1;
                            MTPLX_SCHED_MTP_HEAD=0 in sched_config_default gives 0 */
    double spin_us;      /* > 0: a sequence waiting for the running step polls for its end this long
                            before sleeping (a wake-up costs tens of microseconds; spinning costs a
                            core: for hosts with cores to spare beside a GPU). Default 0;
                            MTPLX_SCHED_SPIN_US in sched_config_default, at most 1000 */
    const char *trace_path; /* non-NULL: one line per step into this file (sched.c, trace_step:
                               when it began, the idle gap before it, the wait for the model, each
                               kind's sequences / rows / prompt rows / ms, running and waiting
                               sequences). Default NULL; MTPLX_SCHED_TRACE in sched_config_default */
} sched_config;

/* Fill c with defaults for `max_seqs` sequences of `capacity` positions. prefill_chunk and
 * max_batch_rows are left 0: the model decides them (sched_config_resolve, which sched_new calls). */
void sched_config_default(sched_config *c, int max_seqs, int capacity);

/* Replace a 0 prefill_chunk by m's backend's prefill chunk (be_caps.prefill_rows: 512 rows on the
 * CPU and on CUDA; MTPLX_PREFILL_ROWS / MTPLX_CUDA_PREFILL_ROWS move run and serve alike) and a 0
 * max_batch_rows by one that covers the chunk and max_seqs verifies. Values already set are kept. */
void sched_config_resolve(sched_config *c, const mtplx_model *m);

/* Create a scheduler over m (pool and batch scratch allocated here). Returns 0 and *out or an error
 * (also when cfg->trace_path cannot be opened for writing). */
int sched_new(const mtplx_model *m, const sched_config *c, sched **out, mtplx_err *err);
void sched_free(sched *s);    /* no sequence may be running */

seq_pool *sched_pool(sched *s);
const sched_config *sched_config_of(const sched *s);

/* Admission of a sequence that may reach `positions` positions (trunk and MTP pages). Waits until
 * a sequence slot and the pages are free; cancelled(user) (may be NULL) is polled while waiting and
 * ends the wait with ECANCELED. Returns 0 (then call sched_leave when done), ERANGE when the request
 * can never fit (the message names the numbers and the flag to raise), or ECANCELED. */
int sched_join(sched *s, int positions, int (*cancelled)(void *user), void *user, mtplx_err *err);
void sched_leave(sched *s, int positions);

/* 1 when no sequence is joined or waiting to join: work that holds the model now (the prefix cache's
 * write-through to disk) delays nobody's stream. A snapshot: a request may join right after. */
int sched_idle(sched *s);

/* Pages of the pool held by something other than the running sequences (the prefix cache,
 * src/engine/prefix_cache.h). reclaim(user, max_pages) gives back what it can until it holds at most
 * max_pages pages that no sequence holds too, and returns how many it holds then; sched_join counts
 * those against the page budget and calls reclaim, with the model held, before admitting. */
void sched_set_reclaim(sched *s, int (*reclaim)(void *user, int max_pages), void *user);

/* A joined sequence's trunk rows (model_forward's contract) or MTP rows (model_mtp_forward's), run
 * in the next merged forward; blocks until done. A prompt goes in chunks; between them the cancel
 * check given to sched_join (on this thread) is polled, and a cancel ends the call with ECANCELED
 * (the state then holds the chunks done: the caller discards or trims it). With logits != NULL, the MTP call also gives the
 * logits of row logits_row through head `head` (model_lm_head_top: with top = k > 0 only the row's k
 * best are exact, the rest -inf; a device then downloads 2k + 2 words instead of V floats); with list
 * != NULL as well, that row's logits_top list goes there instead (model_lm_head_list; logits is then
 * scratch). */
int sched_forward(sched *s, model_state *st, const int32_t *tokens, int T, const fwd_request *req, mtplx_err *err);
int sched_mtp(sched *s, mtp_state *st, const float *hidden, const int32_t *next, int T, float *hidden_out,
              head_kind head, int logits_row, float *logits, int top, int32_t *list, mtplx_err *err);

/* The MTP depth policy under load (docs/architecture.md, "MTP depth under load"): the most drafts a
 * cycle of a depth_auto request may make now, with n sequences running. After sched_calibrate: the
 * depth with the most tokens per millisecond under the measured costs (sched_cost.h), except that one
 * call in 32 that it answers 0 gets 1 (so that acceptance and the MTP step stay measured); before (or
 * without): knee_rows / n - 1. Clamped to [0, depth]. */
int sched_depth_cap(sched *s, int depth);

/* A depth_auto sequence's cycle: it drafted `drafted` tokens and the first `accepted` were accepted
 * (the policy's acceptance estimate, over about the last 1,024 drafts at each position). */
void sched_note_cycle(sched *s, int drafted, int accepted);

/* Measure this model's trunk and MTP forward costs on this machine (scratch sequences of 1, 2, 4, ...
 * rows, while budget_s seconds last) and from then on choose depths by them (sched_depth_cap),
 * keeping them current from the steps run. Call before any sequence joins (it takes the model and
 * pool pages). Returns 0, or an error (then the knee rule stays): ERANGE when the budget did not
 * cover forwards of 1, 2 and 4 rows (a model too slow for it). Models without an MTP head measure
 * nothing. */
int sched_calibrate(sched *s, double budget_s, mtplx_err *err);

/* Choose depths by the costs c from now on, as if sched_calibrate had measured them (tests; a
 * calibration kept from an earlier run). c->accept is ignored: the acceptance is the scheduler's own
 * estimate. Kept current from the steps run, as measured costs are. */
void sched_costs_set(sched *s, const sched_costs *c);

/* The policy's current costs and acceptance into *out (sched_cost.h); returns 1 when it uses them. */
int sched_costs_get(sched *s, sched_costs *out);

/* Hold the model for per-sequence work that must not overlap a forward (commit, trim, copies). */
void sched_lock(sched *s);
void sched_unlock(sched *s);

typedef struct {
    uint64_t forwards;       /* merged forwards run (trunk and MTP) */
    uint64_t rows;           /* rows they carried */
    uint64_t seq_parts;      /* sequence parts they carried (a sequence's rows in one forward) */
    uint64_t steps;          /* steps run (one executor turn: a trunk forward, an MTP forward, or both) */
    uint64_t trunk_forwards; /* merged trunk forwards among `forwards` */
    uint64_t late_steps;     /* steps run at their deadline (wait_ms) with some sequence's request missing */
    double trunk_ms, mtp_ms; /* time inside them (trunk; MTP with the draft heads), ms */
    double gap_ms;           /* time between one step's end and the next one's start while
                                sequences run (their sampling, commits, wake-ups), ms */
    int running;             /* joined sequences */
    int waiting;             /* sequences waiting in sched_join */
    int pages_used;          /* KV pages held by sequences now (trunk pool) */
    int pages_reserved;      /* pages promised to running sequences */
    int pages_total;
} sched_stats;

void sched_get_stats(sched *s, sched_stats *out);

#endif
