/* generate.h — one generation request against a loaded model: prefill, then AR or MTP-speculative
 * decode, with the full sampler. This is the interface the CLI and the server call.
 *
 * (Draft of the contract; the speculative-decoding issue owns it and may extend it. Callers only
 * rely on what is documented here.) */
#ifndef MTPLX_ENGINE_GENERATE_H
#define MTPLX_ENGINE_GENERATE_H

#include <stdint.h>

#include "../base/err.h"
#include "../base/progress.h"
#include "../model/model.h"

#define GEN_MAX_DEPTH 8
/* The depth a generation takes when neither its caller nor `mtplx tune` chose one (run, chat, serve): the
 * adaptive depth, up to GEN_DEFAULT_DEPTH drafts a cycle, stopping once the drafts' product of q falls
 * below GEN_DEFAULT_MIN_CONF. On every model and device measured it beat each fixed depth (embedded and
 * small models, CPU and H100: +8-16% over depth 3 at T 0.6, more when greedy; bench/decode.md section 6). */
#define GEN_DEFAULT_DEPTH 6
#define GEN_DEFAULT_MIN_CONF 0.4f
#define GEN_MAX_STOP_IDS 16

/* Structured output hook (docs/structured-output.md): a per-sequence automaton over token ids that
 * the decode loop (cycle.c) consults. Its mask is applied to the target logits of every verify row
 * AND to every draft's logits before the sampler, the state advances with each emitted token and
 * with each draft, and drafts are rolled back before verification. Owned by the caller; NULL in
 * gen_params = unconstrained. */
typedef struct {
    void *ctx;
    int vocab; /* ids the mask covers; ids at or past it (a model vocabulary larger than the
                  tokenizer's) are never allowed */
    /* allowed next ids: bitset of ceil(vocab / 32) words (bit j % 32 of word j / 32), valid until
     * the next call; NULL with err set on failure */
    const uint32_t *(*mask)(void *ctx, mtplx_err *err);
    /* take tok (0), or an error when tok is not allowed */
    int (*advance)(void *ctx, int32_t tok, mtplx_err *err);
    /* undo the last n advances (n <= GEN_MAX_DEPTH + 1) */
    void (*rollback)(void *ctx, int n);
    /* 1 when the structure is complete and nothing may follow (the generation stops) */
    int (*ended)(void *ctx);
} gen_constraint;

typedef struct {
    float temperature;        /* 0 = greedy */
    float top_p;              /* (0, 1]; 1 = off */
    int top_k;                /* 0 = off */
    float min_p;              /* [0, 1); 0 = off */
    float presence_penalty;   /* [-2, 2], OpenAI formula over completion tokens */
    float frequency_penalty;  /* [-2, 2] */
    float repetition_penalty; /* > 0; 1 = off */
    uint64_t seed;            /* used when seed_set; else chosen and reported in gen_stats.seed */
    int seed_set;
    int max_tokens;           /* completion tokens at most (> 0) */
    int depth;                /* 0 = plain AR; 1..GEN_MAX_DEPTH MTP drafts per cycle */
    int32_t stop_ids[GEN_MAX_STOP_IDS]; /* token ids that end the turn (emitted, then stop) */
    int n_stop_ids;
    float draft_min_conf;     /* [0, 1); 0 = off. Adaptive depth: stop drafting once the product of
                                 q_i(y_i) over this cycle's drafts falls below it (the draft's own
                                 estimate that they all survive); depth is then the maximum. Uses
                                 draft-side values only, so the output law is unchanged. */
    int depth_auto;           /* 1: a scheduler may draft fewer than `depth` per cycle when many
                                 sequences share its forwards (sched_depth_cap); the output law is
                                 unchanged, but seeded tokens then depend on the load. 0: always
                                 `depth` (reproducible) */
    int draft_full_head;      /* 1: draft with HEAD_MTP (full precision) instead of HEAD_DRAFT (diagnostics) */
    int debug_broken_residual;/* DEBUG ONLY: 1 = deliberately wrong residual (subtracts q only at the
                                 drafted id); exists so the distribution test can show it catches it */
    const gen_constraint *constraint; /* NULL = unconstrained; else masks p and every q (see above) */
} gen_params;

/* Neutral defaults: temperature 1, top_p 1, top_k 0, min_p 0, penalties 0,
 * repetition 1, max_tokens 256, depth 0, no seed, no stop ids. */
void gen_params_default(gen_params *p);

typedef struct {
    uint64_t seed;            /* the seed actually used */
    int prompt_tokens;
    int completion_tokens;
    double prefill_s, decode_s;
    double prefill_tok_s, decode_tok_s;
    int depth;
    float draft_min_conf;     /* the adaptive depth's threshold it ran with (0 = fixed depth) */
    int cycles;               /* verify forwards (AR: decode steps) */
    int drafted;              /* draft tokens proposed */
    int accepted;             /* draft tokens accepted */
    int accepted_per_position[GEN_MAX_DEPTH]; /* cycles whose draft at position d was accepted */
    double acceptance_rate;   /* accepted / drafted (0 when nothing drafted) */
    double tokens_per_verify; /* committed tokens per verify forward */
    const char *finish_reason;/* "stop" (stop id hit), "length" (max_tokens), "cancel" */
    const char *rng;          /* RNG algorithm name (rng.h RNG_ALGORITHM) */
    double draft_s;           /* seconds in MTP draft steps (MTP layer + draft head + draft sampler) */
    double verify_s;          /* seconds in trunk verify / decode forwards */
    int prompt_cached;        /* 1: the prefill was restored (wholly or in part) from a cache */
    int cached_tokens;        /* prompt tokens restored from a cache instead of prefilled */
    double mtp_history_s;     /* decode seconds appending committed pairs to the MTP history
                                 (prefill's part counts in prefill_s) */
    double sample_s;          /* decode seconds in the target sampler: the verify rows' masks,
                                 distributions, acceptance tests and draws (cycle_step) */
} gen_stats;

/* Called with newly committed completion tokens, in order, as soon as they are final. Returning
 * non-zero cancels the generation at the next cycle (finish_reason "cancel"). */
typedef int (*gen_token_fn)(void *user, const int32_t *tokens, int n);

/* Validate p against a vocabulary of `vocab` ids; EINVAL naming the field. */
int gen_params_validate(const gen_params *p, int vocab, mtplx_err *err);

/* A reusable generation context: trunk + MTP state, sampler and buffers for one sequence at a time.
 * Many generations (e.g. `mtplx run --samples N`) reuse it without reallocating; buffers grow only
 * when a longer request comes. Not thread-safe: one generation at a time per session. */
typedef struct gen_session gen_session;

/* A session for model m. Returns 0 or ENOMEM; free with gen_session_free (the model outlives it). */
int gen_session_new(const mtplx_model *m, gen_session **out, mtplx_err *err);
void gen_session_free(gen_session *s);

/* Prompt cache (off by default): when on, the session keeps a copy of the states after its last
 * prefill, and a request with the same prompt ids restores them instead of prefilling again (the
 * results are identical; prefill_s then measures the copy). For many samples of one prompt. */
void gen_session_set_prompt_cache(gen_session *s, int on);

/* Prefix cache (src/engine/prefix_cache.h; NULL: none, the default): a session attached to a
 * scheduler restores the deepest cached prefix of each prompt, checkpoints its prefill and, after
 * the generation, the conversation. pc must be over the scheduler's pool and outlive the session;
 * it replaces the single-entry prompt cache. Call after gen_session_attach. */
struct prefix_cache;
void gen_session_set_prefix_cache(gen_session *s, struct prefix_cache *pc);

/* Longest sequence (prompt + completion) the session accepts: n > 0 replaces the model's
 * max_position_embeddings (which is only what it was trained for: RoPE has no table to run out
 * of and the states grow on demand), 0 restores it. The caller warns the user about quality. */
void gen_session_set_context(gen_session *s, int n);

/* Report prefill progress (prompt tokens done, prompt tokens) to p (p.fn NULL: off, the default);
 * the prompt then goes through the trunk in 512-token forwards (the same results). */
void gen_session_set_progress(gen_session *s, progress_sink p);

/* Run this session's generations through scheduler x (sched.h; NULL: alone, the default): its
 * states come from x's pool, its forwards are merged with those of the other sessions attached to
 * x, and each generation first waits for admission (a sequence slot and its KV pages). The tokens
 * are the same either way (row invariance). Call between generations; x outlives the session. */
struct sched;
void gen_session_attach(gen_session *s, struct sched *x);

/* While a generation waits for admission, cancelled(user) is polled; non-zero ends the request with
 * ECANCELED. NULL: not polled. */
void gen_session_set_cancel(gen_session *s, int (*cancelled)(void *user), void *user);

/* Same contract as gen_run, on the session's state (reset first). With a prefix cache that has a disk
 * tier, the request's conversation checkpoints are only marked for disk at its end; see
 * gen_session_persist. */
int gen_session_run(gen_session *s, const int32_t *prompt, int n_prompt, const gen_params *p,
                    gen_token_fn on_tokens, void *user, int32_t **out_tokens, int *n_out, gen_stats *stats,
                    mtplx_err *err);

/* The prefix cache's checkpoints marked for its disk tier (prefix_cache_persist), written now if no
 * sequence is joined or waiting in the session's scheduler (sched_idle); else left for the last of
 * them. Serialising them holds the model for as long as their copy (bench/prefix.md, "Writing to
 * disk off the streams' path"), so the server calls this after a response is complete: neither the
 * other streams nor this client wait for it. Marked entries are also written when evicted and at
 * prefix_cache_sync / prefix_cache_free. No-op without a prefix cache. */
void gen_session_persist(gen_session *s);

/* Generate from prompt[n_prompt] with fresh per-request state. Completion tokens go to on_tokens
 * (may be NULL) and, when out_tokens is non-NULL, into a heap array the caller frees.
 * Returns 0 or an error (EINVAL for bad params with a message naming the field). */
int gen_run(const mtplx_model *m, const int32_t *prompt, int n_prompt, const gen_params *p,
            gen_token_fn on_tokens, void *user, int32_t **out_tokens, int *n_out, gen_stats *stats,
            mtplx_err *err);

#endif
