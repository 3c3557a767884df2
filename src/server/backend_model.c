/* backend_model.c — the server backend on a real checkpoint: tokenizer, chat template, model, a
 * scheduler (src/engine/sched.h) and one reusable generation session per worker slot, attached to it
 * so that the running generations share their forwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../chat/chat.h"
#include "../engine/gen_config.h"
#include "../engine/generate.h"
#include "../engine/tune.h"
#include "../model/model.h"
#include "../tokenizer/tokenizer.h"
#include "backend_model.h"

#define DEFAULT_CTX 8192       /* context when the checkpoint allows more and --ctx is not given */
#define DEFAULT_MAX_SEQS 4     /* generations at once when --max-seqs is not given */

typedef struct {
    mtplx_model   *model;
    tokenizer     *tok;
    chat_template *tmpl;
    sched         *sched;
    prefix_cache  *pcache;      /* over sched's pool; NULL with --cache-ram 0 */
    gen_session  **sess;        /* [n_slots], one per worker slot, attached to sched */
    int            n_slots;
    gen_params     defaults;    /* generation_config.json + end-of-turn ids */
    grammar_vocab *vocab;       /* structured output; NULL when the tokenizer is not byte-level */
    char           model_id[256];
    char           draft[32];   /* srv_backend.draft */
} model_backend;

static int mb_render(void *impl, const json_t *request, int enable_thinking, char **prompt, mtplx_err *err) {
    model_backend *b = impl;
    json_t *req = json_deep_copy(request);
    if (!req) return err_set(err, MTPLX_ENOMEM, "out of memory copying the request");
    if (enable_thinking >= 0) {
        json_t *kw = json_object_get(req, "chat_template_kwargs");
        if (!json_is_object(kw)) {
            kw = json_object();
            json_object_set_new(req, "chat_template_kwargs", kw);
        }
        json_object_set_new(kw, "enable_thinking", json_boolean(enable_thinking));
    }
    size_t len;
    int rc = chat_render(b->tmpl, req, NULL, prompt, &len, err);
    json_decref(req);
    return rc;
}

static int mb_encode(void *impl, const char *text, size_t len, int32_t **ids, int *n, mtplx_err *err) {
    model_backend *b = impl;
    return tok_encode(b->tok, text, len, ids, n, err);
}

static void *mb_dec_new(void *impl, mtplx_err *err) {
    model_backend *b = impl;
    tok_stream *s = NULL;
    if (tok_stream_new(b->tok, 1, &s, err)) return NULL;
    return s;
}

static int mb_dec_push(void *dec, int32_t id, const char **text, size_t *len, mtplx_err *err) {
    return tok_stream_push(dec, id, text, len, err);
}

static int mb_dec_flush(void *dec, const char **text, size_t *len, mtplx_err *err) {
    return tok_stream_flush(dec, text, len, err);
}

static void mb_dec_free(void *dec) { tok_stream_free(dec); }

static void mb_defaults(void *impl, gen_params *p) {
    model_backend *b = impl;
    *p = b->defaults;
}

static int mb_validate(void *impl, const gen_params *p, mtplx_err *err) {
    model_backend *b = impl;
    return gen_params_validate(p, model_config_of(b->model)->vocab_size, err);
}

static int mb_generate(void *impl, int slot, const int32_t *prompt, int n_prompt, const gen_params *p,
                       gen_token_fn fn, void *user, int (*cancelled)(void *), void *cancel_user, gen_stats *stats,
                       mtplx_err *err) {
    model_backend *b = impl;
    if (slot < 0 || slot >= b->n_slots) return err_set(err, MTPLX_EINTERNAL, "worker slot %d of %d", slot, b->n_slots);
    gen_session_set_cancel(b->sess[slot], cancelled, cancel_user);
    return gen_session_run(b->sess[slot], prompt, n_prompt, p, fn, user, NULL, NULL, stats, err);
}

static void mb_after(void *impl, int slot) {
    model_backend *b = impl;
    if (slot >= 0 && slot < b->n_slots) gen_session_persist(b->sess[slot]);
}

static void mb_sched_stats(void *impl, sched_stats *out) {
    model_backend *b = impl;
    sched_get_stats(b->sched, out);
}

static void mb_cache_stats(void *impl, prefix_cache_stats *out) {
    model_backend *b = impl;
    prefix_cache_get_stats(b->pcache, out);
}

/* With MTPLX_SCHED_VERBOSE=1 (else nothing): the depth policy's costs as the scheduler holds them now
 * (`when`: "at start" after the calibration, "at exit" after the steps run have kept them current) and
 * the depth it would choose for 1..64 sequences. */
static void mb_print_policy(sched *x, const char *when) {
    const char *v = getenv("MTPLX_SCHED_VERBOSE");
    sched_costs c;
    if (!v || !strcmp(v, "0") || !x || !sched_costs_get(x, &c)) return;
    for (int k = 0; k <= SCHED_COST_RBINS; k++) {
        const sched_cost_curve *cv = k == SCHED_COST_RBINS ? &c.mtp : &c.trunk[k];
        if (k < SCHED_COST_RBINS)
            fprintf(stderr, "mtplx serve: depth policy %s: trunk forward, %d+ rows a sequence: ms at rows", when, 1 << k);
        else
            fprintf(stderr, "mtplx serve: depth policy %s: MTP step + draft heads: ms at rows", when);
        for (int i = 0; i < SCHED_COST_BINS; i++)
            if (cv->rows[i] > 0) fprintf(stderr, " %.0f:%.3f", cv->rows[i], cv->ms[i]);
        fputc('\n', stderr);
    }
    fprintf(stderr, "mtplx serve: depth policy %s: gap after a trunk step %.3f ms, after an MTP step %.3f ms; "
            "acceptance by position", when, c.cycle_ms, c.step_ms);
    for (int i = 0; i < GEN_MAX_DEPTH; i++) fprintf(stderr, " %.2f", c.accept[i]);
    fputc('\n', stderr);
    for (int d = 3; d <= GEN_MAX_DEPTH; d += GEN_MAX_DEPTH - 3) {
        fprintf(stderr, "mtplx serve: depth policy %s: drafts (at most %d) for 1 2 4 8 16 32 64 sequences:", when, d);
        for (int n = 1; n <= 64; n *= 2) fprintf(stderr, " %d", sched_depth_best(&c, n, d));
        fputc('\n', stderr);
    }
}

/* Measure the depth policy's costs (sched_calibrate, 0.5 s at most); without them the knee rule
 * stays, and a line on stderr says so. MTPLX_SCHED_VERBOSE=1 prints the measured costs and the depth
 * chosen for 1..64 sequences, here and again when the server closes (mb_print_policy). */
static void mb_calibrate(sched *x, int knee_rows) {
    mtplx_err e;
    err_clear(&e);
    int rc = sched_calibrate(x, 0.5, &e);
    if (rc) {
        fprintf(stderr, "mtplx serve: %s; the MTP depth under load follows --knee-rows %d\n", e.msg, knee_rows);
        return;
    }
    mb_print_policy(x, "at start");
}

/* The scheduler and the sessions of every slot, for contexts of ctx tokens. */
static int mb_start_sched(model_backend *b, const srv_model_opts *o, int ctx, mtplx_err *err) {
    sched_config c;
    b->n_slots = o->max_seqs > 0 ? o->max_seqs : DEFAULT_MAX_SEQS;
    sched_config_default(&c, b->n_slots, ctx + GEN_MAX_DEPTH + 1);
    if (o->prefill_chunk > 0) c.prefill_chunk = o->prefill_chunk;
    if (o->max_batch_rows > 0) c.max_batch_rows = o->max_batch_rows;
    sched_config_resolve(&c, b->model); /* the model's chunk; a default max_batch_rows covers it */
    if (c.prefill_chunk > c.max_batch_rows) {
        fprintf(stderr, "mtplx serve: --prefill-chunk %d is more than --max-batch-rows %d: prompts enter %d rows a forward\n",
                c.prefill_chunk, c.max_batch_rows, c.max_batch_rows);
        c.prefill_chunk = c.max_batch_rows;
    }
    c.kv_pages = o->kv_pages;
    if (o->knee_rows > 0) c.knee_rows = o->knee_rows;
    int rc = sched_new(b->model, &c, &b->sched, err);
    if (rc) return rc;
    if (o->knee_rows <= 0) mb_calibrate(b->sched, c.knee_rows); /* the depth policy from measured costs */
    if (o->cache_ram_mb >= 0) { /* the prefix cache (docs/prefix-cache.md): its pages count against --kv-pages */
        prefix_cache_config pc = {(size_t)o->cache_ram_mb << 20, 0, o->cache_dir, o->cache_disk_bytes};
        if ((rc = prefix_cache_new(b->model, sched_pool(b->sched), &pc, &b->pcache, err))) return rc;
        sched_set_reclaim(b->sched, prefix_cache_reclaim_hook, b->pcache);
    }
    b->sess = calloc((size_t)b->n_slots, sizeof *b->sess);
    if (!b->sess) return err_set(err, MTPLX_ENOMEM, "out of memory for %d sessions", b->n_slots);
    for (int i = 0; i < b->n_slots; i++) {
        if ((rc = gen_session_new(b->model, &b->sess[i], err))) return rc;
        gen_session_attach(b->sess[i], b->sched);
        /* identical prompts (retries, a streamed and a non-streamed copy of one request) restore the
         * slot's last prefill instead of recomputing it; the results are the same either way */
        gen_session_set_prompt_cache(b->sess[i], 1);
        gen_session_set_prefix_cache(b->sess[i], b->pcache); /* replaces the above when there is one */
        gen_session_set_context(b->sess[i], ctx);
    }
    return 0;
}

static void add_stop_id(gen_params *p, int32_t id) {
    if (id < 0) return;
    for (int i = 0; i < p->n_stop_ids; i++)
        if (p->stop_ids[i] == id) return;
    if (p->n_stop_ids < GEN_MAX_STOP_IDS) p->stop_ids[p->n_stop_ids++] = id;
}

int backend_model_open(const char *dir, const srv_model_opts *o, srv_backend *out, mtplx_err *err) {
    memset(out, 0, sizeof *out);
    model_backend *b = calloc(1, sizeof *b);
    if (!b) return err_set(err, MTPLX_ENOMEM, "out of memory");
    int rc;
    if ((rc = model_load(dir, &b->model, err)) || (rc = tok_load(dir, &b->tok, err)) ||
        (rc = tok_cover_vocab(b->tok, model_config_of(b->model)->vocab_size, err)) ||
        (rc = chat_template_load(dir, &b->tmpl, err)) || (rc = gen_params_from_model(b->model, &b->defaults, err))) {
        out->impl = b;
        backend_model_close(out);
        return rc;
    }
    if (*model_load_note(b->model)) fprintf(stderr, "mtplx serve: note: %s\n", model_load_note(b->model));
    if (o->draft_vocab > 0 && o->draft_vocab < model_config_of(b->model)->vocab_size && model_has_mtp(b->model)) {
        /* the draft head over the most common ids only (docs/speculative.md, "Draft vocabulary subset") */
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)o->draft_vocab);
        rc = ids ? tok_common_ids(b->tok, model_config_of(b->model)->vocab_size, o->draft_vocab, ids, err)
                 : err_set(err, MTPLX_ENOMEM, "out of memory");
        if (!rc) rc = model_draft_vocab(b->model, ids, o->draft_vocab, err);
        free(ids);
        if (rc) {
            out->impl = b;
            backend_model_close(out);
            return rc;
        }
    }
    /* the draft's cheap copy, after the subset (it then quantizes only the subset's rows) */
    draft_quant dq;
    char note[sizeof err->msg + 96];
    if ((rc = draft_quant_parse(o->draft_quant ? o->draft_quant : DRAFT_QUANT_DEFAULT, &dq, err)) ||
        (rc = model_draft_quant_apply(b->model, &dq, !o->draft_quant, note, sizeof note, err))) {
        out->impl = b;
        backend_model_close(out);
        return rc;
    }
    if (*note) fprintf(stderr, "mtplx serve: note: %s\n", note);
    draft_quant_name(&dq, b->draft, sizeof b->draft);
    /* end of turn: the EOS ids of the model, plus the chat format's end-of-message token */
    const tok_config *tc = tok_get_config(b->tok);
    add_stop_id(&b->defaults, tc->eos_id);
    add_stop_id(&b->defaults, tok_token_to_id(b->tok, "<|im_end|>", 10));
    add_stop_id(&b->defaults, tok_token_to_id(b->tok, "<|endoftext|>", 13));

    /* model id: the directory's last path component */
    char path[256];
    snprintf(path, sizeof path, "%s", dir);
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/') path[--l] = 0;
    const char *base = strrchr(path, '/');
    snprintf(b->model_id, sizeof b->model_id, "%s", base ? base + 1 : path);

    const model_config *cfg = model_config_of(b->model);
    int max_ctx = cfg->max_position_embeddings > 0 ? cfg->max_position_embeddings : DEFAULT_CTX;
    /* requests that set no depth: `mtplx tune`'s choice, else the engine's adaptive default (as `run`); the
     * scheduler's depth policy may take fewer drafts under load */
    int depth = 0;
    float min_conf = 0;
    if (model_has_mtp(b->model) && !tune_lookup(dir, &depth, &min_conf))
        depth = GEN_DEFAULT_DEPTH, min_conf = GEN_DEFAULT_MIN_CONF;

    out->impl = b;
    out->model_id = b->model_id;
    out->tier = model_has_mtp(b->model) ? "mtp" : "ar";
    out->family = config_arch_name(cfg->arch);
    /* --ctx is honoured even past what the model was trained for (the caller warns; see
     * trained_ctx): positions are computed, not looked up, and KV pages are taken as sequences grow */
    out->ctx = o->ctx > 0 ? o->ctx : (max_ctx < DEFAULT_CTX ? max_ctx : DEFAULT_CTX);
    out->trained_ctx = cfg->max_position_embeddings;
    if ((rc = mb_start_sched(b, o, out->ctx, err))) {
        backend_model_close(out);
        return rc;
    }
    out->n_slots = b->n_slots;
    out->kv_pages = sched_config_of(b->sched)->kv_pages;
    out->kv_page_size = model_kv_page_size();
    out->sched_stats = mb_sched_stats;
    out->cache_stats = b->pcache ? mb_cache_stats : NULL;
    out->max_depth = model_has_mtp(b->model) ? GEN_MAX_DEPTH : 0;
    out->default_depth = depth;
    out->default_min_conf = min_conf;
    out->draft = model_has_mtp(b->model) ? b->draft : NULL;
    out->render_chat = mb_render;
    out->encode = mb_encode;
    out->decoder_new = mb_dec_new;
    out->decoder_push = mb_dec_push;
    out->decoder_flush = mb_dec_flush;
    out->decoder_free = mb_dec_free;
    out->default_params = mb_defaults;
    out->validate = mb_validate;
    out->generate = mb_generate;
    out->after = mb_after;
    mtplx_err verr; /* structured output: optional (a non-byte-level tokenizer has no token bytes) */
    if (!grammar_vocab_new(b->tok, &b->vocab, &verr)) out->vocab = b->vocab;
    const char *ct = tok_get_config(b->tok)->chat_template;
    out->tool_dialect = ct && strstr(ct, "<function=") ? GRAMMAR_TOOLS_XML : GRAMMAR_TOOLS_JSON;
    return 0;
}

void backend_model_close(srv_backend *be) {
    model_backend *b = be->impl;
    if (!b) return;
    for (int i = 0; b->sess && i < b->n_slots; i++) gen_session_free(b->sess[i]);
    free(b->sess);
    prefix_cache_free(b->pcache);
    mb_print_policy(b->sched, "at exit");
    sched_free(b->sched);
    grammar_vocab_free(b->vocab);
    chat_template_free(b->tmpl);
    tok_free(b->tok);
    model_free(b->model);
    free(b);
    memset(be, 0, sizeof *be);
}
