/* backend.h — what the HTTP server needs from a loaded model, as a small table of functions.
 *
 * The real backend (backend_model.c) wires the tokenizer, the chat template and gen_run; the
 * server's unit tests use a scripted backend so the HTTP layer can be tested on exact text. Every
 * function except generate may be called from any HTTP thread concurrently; generate is called by
 * the n_slots worker threads, each with its own slot number, so up to n_slots generations run at
 * once (the real backend merges their forwards, src/engine/sched.h). */
#ifndef MTPLX_SERVER_BACKEND_H
#define MTPLX_SERVER_BACKEND_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../engine/generate.h"
#include "../grammar/grammar.h"
#include "../engine/prefix_cache.h"
#include "../engine/sched.h"

typedef struct srv_backend srv_backend;

struct srv_backend {
    void       *impl;
    const char *model_id;     /* reported as "model" in every response */
    const char *tier;         /* compatibility tier for /health ("mtp", "ar") */
    const char *family;       /* model family for /health ("qwen3_5", ...), or NULL */
    int         ctx;          /* context length in tokens (prompt + completion) */
    int         trained_ctx;  /* the model's max_position_embeddings (0 = unknown); ctx may exceed it */
    int         max_depth;    /* largest MTP depth this model supports (0 = AR only) */
    int         default_depth;/* depth used when a request does not ask for one */
    float       default_min_conf; /* its adaptive threshold (draft_min_conf; 0 = a fixed depth) */
    const char *draft;        /* the draft's weights as --draft-quant names them ("q4", "none"); NULL
                                 without an MTP head */
    const grammar_vocab *vocab;   /* token bytes for structured output (src/server/structured.c);
                                     NULL: not a byte-level tokenizer, structured requests get a 400 */
    grammar_tool_dialect tool_dialect; /* how the chat template writes tool calls (forced calls) */
    int         n_slots;      /* generations at once (worker threads); 0 is taken as 1 */
    int         kv_pages;     /* KV cache pages shared by the generations (0 = no limit to check) */
    int         kv_page_size; /* positions per page */

    /* Render an OpenAI chat request (messages, tools, chat_template_kwargs already validated
     * shapes; `enable_thinking` given separately: -1 = template default, 0/1 = forced) to prompt
     * text. *prompt is malloc'd (caller frees). Returns 0 or an error (ETEMPLATE/EINVAL). */
    int (*render_chat)(void *impl, const json_t *request, int enable_thinking, char **prompt, mtplx_err *err);

    /* Encode prompt text (special tokens in the text are recognised). *ids malloc'd. */
    int (*encode)(void *impl, const char *text, size_t len, int32_t **ids, int *n, mtplx_err *err);

    /* A streaming detokenizer for one request: push ids, get back complete UTF-8 text (pointer
     * valid until the next call). Special tokens (end of turn) decode to nothing. */
    void *(*decoder_new)(void *impl, mtplx_err *err);
    int (*decoder_push)(void *dec, int32_t id, const char **text, size_t *len, mtplx_err *err);
    int (*decoder_flush)(void *dec, const char **text, size_t *len, mtplx_err *err);
    void (*decoder_free)(void *dec);

    /* The model's defaults for a request (generation_config.json sampling values, end-of-turn stop
     * ids); the request's fields are applied on top. */
    void (*default_params)(void *impl, gen_params *p);

    /* Check sampler values against the model (EINVAL naming the field); may be NULL. */
    int (*validate)(void *impl, const gen_params *p, mtplx_err *err);

    /* gen_run on the loaded model by worker `slot` (0..n_slots-1; one generation per slot at a time).
     * While it waits for room (a sequence slot, KV pages), cancelled(cancel_user) is polled; non-zero
     * ends it with ECANCELED. */
    int (*generate)(void *impl, int slot, const int32_t *prompt, int n_prompt, const gen_params *p,
                    gen_token_fn on_tokens, void *user, int (*cancelled)(void *), void *cancel_user,
                    gen_stats *stats, mtplx_err *err);

    /* After generate's response is complete (its last bytes published): work that holds the model and
     * should delay no client — the prefix cache's writes to disk (gen_session_persist). May be NULL. */
    void (*after)(void *impl, int slot);

    /* The scheduler's counters for /metrics; NULL when there is none. */
    void (*sched_stats)(void *impl, sched_stats *out);
    /* The prefix cache's counters for /metrics (src/engine/prefix_cache.h); NULL when there is none. */
    void (*cache_stats)(void *impl, prefix_cache_stats *out);
};

#endif
