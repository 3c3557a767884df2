/* pipeline.c — one generation on the worker thread, and the text pipeline its tokens go through:
 *
 *   token ids -> streaming detokenizer -> UTF-8 guard -> reasoning splitter (chat) ->
 *   stop strings (content only) -> tool-call parser (when tools were given) -> formatter
 *
 * Every stage is streaming and holds back only what it cannot decide yet, so a streamed response
 * carries exactly the same text as the non-streamed one. A stop string ends generation through
 * the token callback's return value; so does a cancelled (disconnected) request. */
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "internal.h"

enum { PIPE_STOP = 2 };

/* ---- job lifecycle ---- */

srv_job *job_new(void) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->conn_fd = -1;
    /* gen_params_default's documented neutral values (set here so the server does not depend on
     * the engine's object file for a constant) */
    j->params.temperature = 1.0f;
    j->params.top_p = 1.0f;
    j->params.repetition_penalty = 1.0f;
    j->params.max_tokens = 256;
    return j;
}

void job_unref(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    json_decref(j->tools);
    grammar_matcher_free(j->matcher);
    grammar_free(j->grammar);
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->prompt);
    reasoning_free(&j->rp);
    toolcall_free(&j->tp);
    sbuf_free(&j->utf8_hold);
    sbuf_free(&j->stop_hold);
    sbuf_free(&j->stage);
    sbuf_free(&j->resp_text);
    json_decref(j->resp_items);
    sbuf_free(&j->content);
    sbuf_free(&j->reasoning);
    for (int i = 0; i < j->n_calls; i++) free(j->calls[i].id), free(j->calls[i].name), free(j->calls[i].arguments);
    free(j->calls);
    sbuf_free(&j->out);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void job_cancel(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->cancelled = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

static int job_is_cancelled(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    int c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

/* Move what the formatter produced to the HTTP thread. */
/* Out of memory for a stream's bytes: the client cannot get a complete stream any more, so the job
 * is cut (cancelled: generation stops, the HTTP side aborts the connection). Call with j->mu held. */
static void job_cut_locked(srv_job *j) {
    if (j->stream) j->cancelled = 1;
}

static void job_flush(srv_job *j) {
    if (!j->stage.len) return;
    pthread_mutex_lock(&j->mu);
    size_t handed = j->cancelled ? 0 : j->stage.len;
    if (!j->cancelled && sbuf_append(&j->out, j->stage.p, j->stage.len)) job_cut_locked(j), handed = 0;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->stream && handed) srv_trace_event(j->trace, 'f', j->trace_id, handed);
    sbuf_clear(&j->stage);
}

void srv_trace_event(srv_trace *t, char kind, unsigned long job, size_t bytes) {
    if (!t || !t->fp) return;
    pthread_mutex_lock(&t->mu); /* the time taken under the lock: the file's lines are in time order */
    fprintf(t->fp, "%.3f %c %lu %zu\n", clock_now() * 1e3, kind, job, bytes);
    pthread_mutex_unlock(&t->mu);
}

/* ---- stages, last to first ---- */

static int on_call(void *user, const tool_call *c) {
    srv_job *j = user;
    if (j->n_calls == j->cap_calls) {
        int cap = j->cap_calls ? 2 * j->cap_calls : 4;
        srv_call *nc = realloc(j->calls, (size_t)cap * sizeof *nc);
        if (!nc) return -1;
        j->calls = nc;
        j->cap_calls = cap;
    }
    srv_call *sc = &j->calls[j->n_calls];
    sc->id = strdup(c->id);
    sc->name = strdup(c->name);
    sc->arguments = strdup(c->arguments);
    if (!sc->id || !sc->name || !sc->arguments) {
        free(sc->id), free(sc->name), free(sc->arguments);
        return -1;
    }
    j->n_calls++;
    return fmt_tool_call(j, sc, j->n_calls - 1);
}

static int on_content(void *user, const char *s, size_t n) {
    srv_job *j = user;
    if (sbuf_append(&j->content, s, n)) return -1;
    return fmt_content(j, s, n);
}

static int to_tools(srv_job *j, const char *s, size_t n) {
    if (!n) return 0;
    if (j->tools) return toolcall_feed(&j->tp, s, n, on_content, on_call, j);
    return on_content(j, s, n);
}

/* Stop strings on the content channel: emit everything before the earliest match, hold back a
 * suffix that may still become one. */
static int to_stops(srv_job *j, const char *s, size_t n, int final) {
    if (j->stop_hit) return PIPE_STOP;
    if (j->n_stops == 0) return to_tools(j, s, n);
    if (sbuf_append(&j->stop_hold, s, n)) return -1;
    const char *h = sbuf_str(&j->stop_hold);
    size_t len = j->stop_hold.len, best = len;
    int which = -1;
    for (int i = 0; i < j->n_stops; i++) {
        const char *m = memmem(h, len, j->stops[i], strlen(j->stops[i]));
        if (m && (size_t)(m - h) < best) best = (size_t)(m - h), which = i;
    }
    if (which >= 0) {
        j->stop_hit = which + 1;
        int rc = to_tools(j, h, best);
        sbuf_clear(&j->stop_hold);
        return rc ? rc : PIPE_STOP;
    }
    size_t keep = 0;
    if (!final) {
        for (int i = 0; i < j->n_stops; i++) {
            size_t sl = strlen(j->stops[i]);
            for (size_t k = sl - 1 < len ? sl - 1 : len; k > keep; k--)
                if (memcmp(h + len - k, j->stops[i], k) == 0) {
                    keep = k;
                    break;
                }
        }
    }
    int rc = to_tools(j, h, len - keep);
    sbuf_consume(&j->stop_hold, len - keep);
    return rc;
}

static int on_split(void *user, int is_reasoning, const char *s, size_t n) {
    srv_job *j = user;
    if (is_reasoning) {
        if (sbuf_append(&j->reasoning, s, n)) return -1;
        return fmt_reasoning(j, s, n);
    }
    return to_stops(j, s, n, 0);
}

static int to_split(srv_job *j, const char *s, size_t n) {
    if (!n) return 0;
    if (j->split_reasoning) return reasoning_feed(&j->rp, s, n, on_split, j);
    return to_stops(j, s, n, 0);
}

/* Length of the valid UTF-8 sequence at s (1..4), 0 when s[0..n) is an incomplete but so far
 * valid prefix, -1 when invalid. */
static int utf8_seq(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len;
    unsigned min;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) len = 3, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) len = 4, min = 0x10000;
    else return -1;
    unsigned cp = c & (0x3f >> (len - 1));
    for (int i = 1; i < len; i++) {
        if ((size_t)i >= n) return 0;
        if ((s[i] & 0xc0) != 0x80) return -1;
        cp = (cp << 6) | (s[i] & 0x3f);
        if (i == 1 && len == 3 && c == 0xe0 && s[1] < 0xa0) return -1;
        if (i == 1 && len == 3 && c == 0xed && s[1] > 0x9f) return -1;  /* surrogates */
        if (i == 1 && len == 4 && c == 0xf0 && s[1] < 0x90) return -1;
        if (i == 1 && len == 4 && c == 0xf4 && s[1] > 0x8f) return -1;
    }
    return cp >= min ? len : -1;
}

/* UTF-8 guard: pass on only complete, valid UTF-8 (invalid bytes become U+FFFD; an incomplete
 * sequence at the end is held, or replaced when final). */
static int feed_text(srv_job *j, const char *s, size_t n, int final) {
    if (sbuf_append(&j->utf8_hold, s, n)) return -1;
    const unsigned char *p = (const unsigned char *)sbuf_str(&j->utf8_hold);
    size_t len = j->utf8_hold.len, i = 0, run = 0;
    int rc = 0;
    while (i < len && !rc) {
        int k = utf8_seq(p + i, len - i);
        if (k > 0) {
            i += (size_t)k;
            continue;
        }
        if (k == 0 && !final) break;
        rc = to_split(j, (const char *)p + run, i - run);
        if (!rc) rc = to_split(j, "\xef\xbf\xbd", 3);
        i += 1;
        run = i;
    }
    if (!rc && i > run) rc = to_split(j, (const char *)p + run, i - run);
    sbuf_consume(&j->utf8_hold, i);
    return rc;
}

typedef struct {
    srv_job     *j;
    srv_backend *be;
    int          stop;
} run_ctx;

static int on_tokens(void *user, const int32_t *tokens, int n) {
    run_ctx *c = user;
    srv_job *j = c->j;
    if (job_is_cancelled(j)) return 1;
    for (int i = 0; i < n && !c->stop; i++) {
        j->n_completion++;
        /* an end-of-turn id is never text, even when the tokenizer does not mark it special */
        int is_stop = 0;
        for (int k = 0; k < j->params.n_stop_ids; k++) is_stop |= tokens[i] == j->params.stop_ids[k];
        if (is_stop) continue;
        const char *text;
        size_t len;
        mtplx_err e;
        if (c->be->decoder_push(j->decoder, tokens[i], &text, &len, &e)) {
            j->failed = 1;
            j->err = e;
            c->stop = 1;
            break;
        }
        int rc = len ? feed_text(j, text, len, 0) : 0;
        if (rc) c->stop = 1;
        if (rc < 0) {
            j->failed = 1;
            err_set(&j->err, MTPLX_ENOMEM, "out of memory formatting the response");
        }
    }
    job_flush(j);
    return c->stop || job_is_cancelled(j);
}

static const char *finish_reason(const srv_job *j) {
    if (j->failed) return "error";
    if (j->stop_hit) return "stop";
    if (j->stats.finish_reason && strcmp(j->stats.finish_reason, "length") == 0) return "length";
    if (j->n_calls > 0) return "tool_calls";
    return "stop";
}

/* 1 when j's client went away (polled while the generation waits for room). */
static int job_cancelled(void *user) {
    srv_job *j = user;
    pthread_mutex_lock(&j->mu);
    int c = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    return c;
}

void pipeline_run(srv_job *j, srv_backend *be, int slot) {
    pthread_mutex_lock(&j->mu);
    j->started = 1;
    int cancelled = j->cancelled;
    pthread_mutex_unlock(&j->mu);
    run_ctx c = {.j = j, .be = be};
    int stream_failed = 0; /* the closing event could not be formatted (out of memory) */
    reasoning_init(&j->rp, j->start_in_reasoning);
    uint64_t idseed = 0;
    for (const char *p = j->id; *p; p++) idseed = idseed * 131 + (unsigned char)*p;
    toolcall_init(&j->tp, j->tools, idseed);
    mtplx_err e = {0};
    j->decoder = be->decoder_new(be->impl, &e);
    if (!j->decoder) {
        j->failed = 1;
        j->err = e;
    }
    if (!cancelled && !j->failed && fmt_begin(j)) { /* a stream's opening event, e.g. the role chunk */
        j->failed = 1;
        err_set(&j->err, MTPLX_ENOMEM, "out of memory formatting the response");
    }
    if (!cancelled && !j->failed) {
        job_flush(j);
        if (be->generate(be->impl, slot, j->prompt, j->n_prompt, &j->params, on_tokens, &c, job_cancelled, j,
                         &j->stats, &e)) {
            j->failed = 1;
            j->err = e;
        }
        if (!j->failed) {
            const char *text;
            size_t len;
            if (be->decoder_flush(j->decoder, &text, &len, &e) == 0 && len) feed_text(j, text, len, 0);
            feed_text(j, "", 0, 1);
            if (j->split_reasoning) reasoning_finish(&j->rp, on_split, j);
            if (!j->stop_hit) to_stops(j, "", 0, 1);
            if (j->tools) toolcall_finish(&j->tp, on_content, on_call, j);
        }
        j->finish = finish_reason(j);
        if (fmt_end(j)) stream_failed = 1;
    } else if (!cancelled) {
        /* failed before the first token: a stream still ends with its error event */
        j->finish = "error";
        if (fmt_end(j)) stream_failed = 1;
    }
    if (!j->finish) j->finish = j->failed ? "error" : "stop";
    /* The last bytes and `done` are published together: the HTTP side never sees the final event
     * without `done`, so a client that hangs up right after reading it had a complete answer and the
     * generation is not counted as cancelled. */
    pthread_mutex_lock(&j->mu);
    size_t handed = stream_failed || j->cancelled ? 0 : j->stage.len;
    if (stream_failed || (!j->cancelled && j->stage.len && sbuf_append(&j->out, j->stage.p, j->stage.len)))
        job_cut_locked(j), handed = 0;
    j->cancelled_before_done = j->cancelled;
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->stream && handed) srv_trace_event(j->trace, 'f', j->trace_id, handed);
    sbuf_clear(&j->stage);
    if (j->decoder) be->decoder_free(j->decoder);
    j->decoder = NULL;
    if (be->after) be->after(be->impl, slot); /* the client has everything: idle work may hold the model now */
}
