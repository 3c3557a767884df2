/* http.c — the HTTP layer on libmicrohttpd: one thread per connection, body accumulation with a
 * size limit, API-key check, routing, JSON error bodies in each API's shape, and the streaming
 * response that relays a job's SSE bytes while watching the client socket for a hang-up.
 *
 * Thread-per-connection mode lets a handler block: a non-streaming request waits for its job on the
 * connection's own thread, and the SSE reader callback blocks until the worker produced bytes. Both
 * wake every 250 ms to poll the socket (POLLRDHUP), so a client that goes away cancels its
 * generation at the engine's next cycle even when nothing is being written. */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"
#include "../base/fault.h"
#include "internal.h"
#include "sse.h"
#include "web.h"

#define HARD_BODY_CAP (64u << 20)  /* above this a too-large body is refused without reading it */

struct srv_server {
    srv_config        cfg;
    char             *host;
    char             *api_key;     /* NULL: no authentication */
    size_t            key_len;
    srv_backend      *be;
    struct MHD_Daemon *d;
    srv_queue         q;
    srv_metrics       m;
    int               port;
    int               ctx;
    int               depth;
    float             min_conf;  /* draft_min_conf of requests that set no depth (srv_config.min_conf) */
    pthread_mutex_t   be_mu;       /* serialises template rendering + encoding */
    pthread_mutex_t   log_mu;      /* guards ignored_seen */
    json_t           *ignored_seen;/* "endpoint field" -> true: ignored request fields already logged */
    atomic_int        inflight;    /* requests received and not yet completed (server_drain waits on it) */
    atomic_int        draining;    /* 1 after server_drain_begin: new requests get 503 */
    int               listen_fd;   /* the quiesced listening socket, closed by server_stop; -1 before */
    srv_trace         trace;       /* the delivery trace (cfg.sse_trace); fp NULL when off */
    atomic_ulong      trace_next;  /* the next request's number in it */
};

typedef struct {
    sbuf   body;
    int    too_big;
    int    endpoint;
    int    anthropic;             /* errors in Anthropic shape */
    int    responded;
    char   method[16];            /* for log lines */
    char   path[128];
} conn_ctx;

void server_config_default(srv_config *c) {
    memset(c, 0, sizeof *c);
    c->host = "127.0.0.1";
    c->port = 8000;
    c->max_queue = 128;
    c->max_body = 8u << 20;
    c->depth = -1;
    c->min_conf = -1;
    c->temperature = -1;
    c->max_connections = 1024;
    const char *tr = getenv("MTPLX_SSE_TRACE");
    c->sse_trace = tr && *tr ? tr : NULL;
    c->idle_timeout = 60;
}

int server_host_is_loopback(const char *host) {
    if (!host || !*host) return 0;
    if (!strcasecmp(host, "localhost")) return 1;
    char h[64];
    size_t n = strlen(host);
    if (n >= sizeof h) return 0;
    if (host[0] == '[' && host[n - 1] == ']') memcpy(h, host + 1, n - 2), h[n - 2] = 0;
    else memcpy(h, host, n + 1);
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, h, &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, h, &a6) == 1) return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

/* ---- responses ---- */

static void add_common_headers(struct MHD_Response *r) {
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
}

/* Queue body (malloc'd, taken) with status. */
static enum MHD_Result respond(srv_server *s, struct MHD_Connection *c, int status, const char *ctype, char *body,
                               const char *hname, const char *hval) {
    if (!body) {
        body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":\"oom\"}}");
        status = 500;
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    add_common_headers(r);
    if (hname) MHD_add_response_header(r, hname, hval);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    metrics_status(&s->m, status);
    return rc;
}

static const char *openai_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

static const char *anthropic_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static enum MHD_Result respond_error(srv_server *s, struct MHD_Connection *c, conn_ctx *cc, int status, const char *code,
                                     const char *param, const char *msg, const char *hname, const char *hval) {
    json_t *o;
    if (cc && cc->anthropic)
        o = json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", anthropic_type(status), "message", msg);
    else
        o = json_pack("{s:{s:s,s:s,s:s,s:s*}}", "error", "message", msg, "type", openai_type(status), "code", code, "param",
                      param && *param ? param : NULL);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (cc) cc->responded = 1;
    /* every refused request leaves a line: a client that gets 400 on each call is otherwise invisible */
    if (!s->cfg.quiet)
        fprintf(stderr, "mtplx serve: %s %s -> %d %s: %s\n", cc ? cc->method : "-", cc ? cc->path : "-", status,
                cc && cc->anthropic ? anthropic_type(status) : openai_type(status), msg);
    return respond(s, c, status, "application/json", body, hname, hval);
}

/* Top-level request fields each endpoint reads; anything else a client sends is ignored, and named
 * once per server in the log (docs/server.md lists what the known agent clients send). */
static const char *const KNOWN_SAMPLING[] = {"model", "temperature", "top_p", "top_k", "min_p", "presence_penalty",
                                             "frequency_penalty", "repetition_penalty", "seed", "mtplx", "stream", NULL};
static const char *const KNOWN_CHAT[] = {"messages", "max_tokens", "max_completion_tokens", "n", "logprobs", "top_logprobs",
                                         "logit_bias", "stream_options", "stop", "tools", "tool_choice", "chat_template_kwargs",
                                         "enable_thinking", "reasoning_effort", "response_format", "parallel_tool_calls", NULL};
static const char *const KNOWN_COMPLETIONS[] = {"prompt", "max_tokens", "max_completion_tokens", "n", "logprobs", "top_logprobs",
                                                "logit_bias", "stream_options", "stop", "echo", "best_of", "suffix", NULL};
static const char *const KNOWN_MESSAGES[] = {"messages", "system", "max_tokens", "stop_sequences", "tools", "tool_choice",
                                             "thinking", "output_config", "mcp_servers", NULL};
static const char *const KNOWN_RESPONSES[] = {"input", "instructions", "previous_response_id", "background", "max_output_tokens",
                                              "tools", "tool_choice", "reasoning", "text", "parallel_tool_calls", NULL};

static int in_list(const char *const *l, const char *k) {
    for (; *l; l++)
        if (!strcmp(*l, k)) return 1;
    return 0;
}

/* Log the fields of body that endpoint does not read, each (endpoint, field) once per server. */
static void log_ignored_fields(srv_server *s, const conn_ctx *cc, const json_t *body) {
    if (s->cfg.quiet) return;
    const char *const *known = cc->endpoint == EP_CHAT ? KNOWN_CHAT
                               : cc->endpoint == EP_COMPLETIONS ? KNOWN_COMPLETIONS
                               : cc->endpoint == EP_RESPONSES ? KNOWN_RESPONSES
                                                              : KNOWN_MESSAGES;
    char line[512] = "";
    size_t n = 0;
    const char *k;
    const json_t *v;
    pthread_mutex_lock(&s->log_mu);
    json_object_foreach((json_t *)body, k, v) {
        if (in_list(KNOWN_SAMPLING, k) || in_list(known, k)) continue;
        char key[260];
        snprintf(key, sizeof key, "%s %.120s", cc->path, k);
        if (!s->ignored_seen || json_object_get(s->ignored_seen, key)) continue;
        json_object_set_new(s->ignored_seen, key, json_true());
        if (n < sizeof line - 130) n += (size_t)snprintf(line + n, sizeof line - n, "%s%.120s", n ? ", " : "", k);
    }
    pthread_mutex_unlock(&s->log_mu);
    if (n) fprintf(stderr, "mtplx serve: %s %s: ignoring request fields %s\n", cc->method, cc->path, line);
}

/* ---- client liveness ---- */

static int peer_gone(int fd) {
    if (fd < 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

static void wait_tick(srv_job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

/* ---- streaming response ---- */

typedef struct {
    srv_job *job;
    double   last_send;
} stream_ctx;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *sc = cls;
    srv_job *j = sc->job;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->out.len) {
            size_t n = j->out.len < max ? j->out.len : max;
            memcpy(buf, j->out.p, n);
            sbuf_consume(&j->out, n);
            pthread_mutex_unlock(&j->mu);
            sc->last_send = clock_now();
            srv_trace_event(j->trace, 'w', j->trace_id, n);
            return (ssize_t)n;
        }
        if (j->done) {
            /* a job cut before it was done (out of memory, server stop) must not look complete */
            int cut = j->cancelled_before_done;
            pthread_mutex_unlock(&j->mu);
            return cut ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
        }
        if (j->cancelled) {
            pthread_mutex_unlock(&j->mu);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        wait_tick(j);
        if (!j->out.len && !j->done) {
            pthread_mutex_unlock(&j->mu);
            if (peer_gone(j->conn_fd)) {
                job_cancel(j);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            if (clock_now() - sc->last_send > 5.0) {
                /* keep-alive while queued or in a long prefill: an SSE comment / Anthropic ping */
                const char *ka = j->api == API_MESSAGES ? "event: ping\ndata: {\"type\":\"ping\"}\n\n" : ": keep-alive\n\n";
                size_t n = strlen(ka);
                if (n <= max) {
                    memcpy(buf, ka, n);
                    sc->last_send = clock_now();
                    return (ssize_t)n;
                }
            }
            pthread_mutex_lock(&j->mu);
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *sc = cls;
    job_cancel(sc->job);  /* no-op for the worker when the job is already done */
    job_unref(sc->job);
    free(sc);
}

/* ---- generation endpoints ---- */

/* Render a chat request (internal.h). A system message after the first position is allowed by the
 * APIs (Claude Code sends one) but many chat templates raise on it; then render again with those
 * messages as user turns, so the request is answered instead of refused. Call with be_mu held. */
int srv_render_prompt(srv_backend *be, json_t *req, int enable_thinking, char **prompt, mtplx_err *err) {
    int rc = be->render_chat(be->impl, req, enable_thinking, prompt, err);
    if (rc != MTPLX_ETEMPLATE) return rc;
    json_t *msgs = json_object_get(req, "messages");
    int changed = 0;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const json_t *r = json_object_get(m, "role");
        if (i > 0 && json_is_string(r) && !strcmp(json_string_value(r), "system")) {
            json_object_set_new(m, "role", json_string("user"));
            changed = 1;
        }
    }
    if (!changed) return rc;
    mtplx_err e2 = {0};
    if (be->render_chat(be->impl, req, enable_thinking, prompt, &e2)) return rc; /* report the first error */
    err_clear(err);
    return 0;
}

static enum MHD_Result handle_generate(srv_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    json_error_t je;
    json_t *body = json_loadb(sbuf_str(&cc->body), cc->body.len, 0, &je);
    if (!body) {
        char msg[400];
        snprintf(msg, sizeof msg, "request body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return respond_error(s, c, cc, 400, "invalid_json", NULL, msg, NULL, NULL);
    }
    if (!json_is_object(body)) {
        json_decref(body);
        return respond_error(s, c, cc, 400, "invalid_request", NULL, "request body must be a JSON object", NULL, NULL);
    }
    srv_job *j = job_new();
    if (!j) {
        json_decref(body);
        return respond_error(s, c, cc, 500, "oom", NULL, "out of memory", NULL, NULL);
    }
    s->be->default_params(s->be->impl, &j->params);
    if (s->cfg.temperature >= 0) j->params.temperature = s->cfg.temperature; /* --temperature; the request's wins */
    j->params.max_tokens = 0;
    j->params.depth = -1;
    j->params.draft_min_conf = -1; /* unset: resolved with the depth below */
    srv_reqerr e = {0};
    json_t *render_req = NULL;
    char *prompt = NULL;
    int enable_thinking = -1, rc;
    if (cc->endpoint == EP_CHAT) rc = openai_parse_chat(body, s->be, j, &render_req, &enable_thinking, &e);
    else if (cc->endpoint == EP_MESSAGES) rc = anthropic_parse(body, s->be, j, &render_req, &enable_thinking, &e);
    else if (cc->endpoint == EP_RESPONSES) rc = responses_parse(body, s->be, j, &render_req, &enable_thinking, &e);
    else if (cc->endpoint == EP_COUNT_TOKENS) {
        /* same body as /v1/messages; max_tokens is not needed to count */
        if (!json_object_get(body, "max_tokens")) json_object_set_new(body, "max_tokens", json_integer(1));
        rc = anthropic_parse(body, s->be, j, &render_req, &enable_thinking, &e);
    }
    else rc = openai_parse_completion(body, s->be, j, &prompt, &e);
    if (!rc) log_ignored_fields(s, cc, body);
    json_decref(body);
    if (rc) {
        json_decref(render_req);
        free(prompt);
        job_unref(j);
        return respond_error(s, c, cc, e.status ? e.status : 400, "invalid_request", e.param, e.msg, NULL, NULL);
    }

    mtplx_err err = {0};
    pthread_mutex_lock(&s->be_mu);
    rc = 0;
    if (render_req) rc = srv_render_prompt(s->be, render_req, enable_thinking, &prompt, &err);
    if (!rc) rc = s->be->encode(s->be->impl, prompt, strlen(prompt), &j->prompt, &j->n_prompt, &err);
    pthread_mutex_unlock(&s->be_mu);
    json_decref(render_req);
    if (rc) {
        free(prompt);
        job_unref(j);
        int status = (rc == MTPLX_ENOMEM || rc == MTPLX_EINTERNAL) ? 500 : 400;
        return respond_error(s, c, cc, status, rc == MTPLX_ETEMPLATE ? "template_error" : "invalid_request", "messages", err.msg,
                             NULL, NULL);
    }
    if (j->split_reasoning) j->start_in_reasoning = reasoning_prompt_opens_think(prompt);
    free(prompt);
    if (cc->endpoint == EP_COUNT_TOKENS) {
        json_t *o = json_pack("{s:i}", "input_tokens", j->n_prompt);
        char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        job_unref(j);
        cc->responded = 1;
        return respond(s, c, 200, "application/json", out, NULL, NULL);
    }
    if (j->n_prompt <= 0) {
        job_unref(j);
        return respond_error(s, c, cc, 400, "empty_prompt", "messages", "the prompt is empty after rendering", NULL, NULL);
    }
    if (j->n_prompt >= s->ctx) {
        /* each API's own wording, which its clients recognise (Claude Code compacts on Anthropic's,
         * OpenAI clients look for the code context_length_exceeded and these phrases) */
        char msg[400];
        const char *param = "messages";
        if (cc->endpoint == EP_MESSAGES)
            snprintf(msg, sizeof msg, "prompt is too long: %d tokens > %d maximum", j->n_prompt, s->ctx - 1);
        else if (cc->endpoint == EP_RESPONSES)
            param = "input", snprintf(msg, sizeof msg,
                                      "Your input exceeds the context window of this model: the input is %d tokens and the "
                                      "context is %d tokens. Please adjust your input and try again.",
                                      j->n_prompt, s->ctx);
        else {
            if (cc->endpoint == EP_COMPLETIONS) param = "prompt";
            snprintf(msg, sizeof msg,
                     "This model's maximum context length is %d tokens. However, your %s resulted in %d tokens "
                     "(at least one more is needed for the completion). Please reduce the length of the %s.",
                     s->ctx, param, j->n_prompt, param);
        }
        job_unref(j);
        return respond_error(s, c, cc, 400, "context_length_exceeded", param, msg, NULL, NULL);
    }
    int room = s->ctx - j->n_prompt;
    if (j->params.max_tokens <= 0 || j->params.max_tokens > room) j->params.max_tokens = room;
    if (s->cfg.max_tokens > 0 && j->params.max_tokens > s->cfg.max_tokens) j->params.max_tokens = s->cfg.max_tokens;
    /* mtplx.draft_min_conf: the request's threshold; else the server's with its depth, 0 (fixed) with a
     * pinned one */
    const float req_conf = j->params.draft_min_conf;
    if (j->params.depth < 0) { /* the server's depth, which the scheduler may lower under load */
        j->params.depth = s->depth;
        j->params.draft_min_conf = req_conf >= 0 ? req_conf : s->min_conf;
        j->params.depth_auto = 1;
    } else {
        j->params.draft_min_conf = req_conf >= 0 ? req_conf : 0;
    }
    if (s->be->kv_pages > 0) { /* a request the KV pool could never hold would wait forever */
        int need = j->n_prompt + j->params.max_tokens + j->params.depth + 1, P = s->be->kv_page_size;
        if ((need + P - 1) / P > s->be->kv_pages) {
            char msg[300];
            snprintf(msg, sizeof msg,
                     "the server's KV cache holds %d positions (--kv-pages %d); this request may need %d (prompt %d + "
                     "max_tokens %d + draft rows): lower max_tokens or restart the server with more --kv-pages",
                     s->be->kv_pages * P, s->be->kv_pages, need, j->n_prompt, j->params.max_tokens);
            job_unref(j);
            return respond_error(s, c, cc, 503, "kv_cache_too_small", "max_tokens", msg, NULL, NULL);
        }
    }
    if (s->be->validate && s->be->validate(s->be->impl, &j->params, &err)) {
        job_unref(j);
        return respond_error(s, c, cc, 400, "invalid_request", NULL, err.msg, NULL, NULL);
    }
    if (structured_attach(s->be, j, &err)) { /* structured output: the matcher, now that the prompt is known */
        job_unref(j);
        return respond_error(s, c, cc, err.code == MTPLX_ENOMEM ? 500 : 400, "invalid_request", NULL, err.msg, NULL, NULL);
    }

    char hex[33];
    srv_random_hex(hex, 32);
    snprintf(j->id, sizeof j->id, "%s%s",
             cc->endpoint == EP_CHAT ? "chatcmpl-" : cc->endpoint == EP_MESSAGES ? "msg_" : cc->endpoint == EP_RESPONSES ? "resp_" : "cmpl-",
             hex);
    j->created = (long long)time(NULL);
    j->model_id = s->be->model_id;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    j->conn_fd = ci ? ci->connect_fd : -1;
    if (s->trace.fp) j->trace = &s->trace, j->trace_id = atomic_fetch_add(&s->trace_next, 1);

    if (queue_push(&s->q, j)) {
        job_unref(j);
        return respond_error(s, c, cc, 429, "queue_full", NULL, "the server is busy: the request queue is full, retry later", "Retry-After",
                             "2");
    }

    if (j->stream) {
        stream_ctx *sc = calloc(1, sizeof *sc);
        if (!sc) {
            job_cancel(j);
            job_unref(j);
            return MHD_NO;
        }
        sc->job = j;
        sc->last_send = clock_now();
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, sc, stream_free);
        if (!r) {
            stream_free(sc);
            return MHD_NO;
        }
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        add_common_headers(r);
        enum MHD_Result q = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        metrics_status(&s->m, 200);
        cc->responded = 1;
        return q;
    }

    /* non-streaming: wait on this connection's thread, watching the socket */
    pthread_mutex_lock(&j->mu);
    while (!j->done) {
        wait_tick(j);
        if (j->done) break;
        pthread_mutex_unlock(&j->mu);
        int gone = peer_gone(j->conn_fd);
        pthread_mutex_lock(&j->mu);
        if (gone) j->cancelled = 1;
        if (j->cancelled) break;
    }
    int done = j->done, failed = j->failed;
    pthread_mutex_unlock(&j->mu);
    if (!done) {
        /* client gone (or server stopping): nobody to answer; the worker drops the job */
        job_unref(j);
        return MHD_NO;
    }
    if (failed) {
        enum MHD_Result q = respond_error(s, c, cc, j->err.code == MTPLX_EINVAL ? 400 : 500, err_code_name(j->err.code), NULL,
                                          j->err.msg, NULL, NULL);
        job_unref(j);
        return q;
    }
    char *out = cc->endpoint == EP_CHAT       ? openai_chat_body(j)
                : cc->endpoint == EP_MESSAGES ? anthropic_body(j)
                : cc->endpoint == EP_RESPONSES ? responses_body(j)
                                              : openai_completion_body(j);
    job_unref(j);
    cc->responded = 1;
    return respond(s, c, 200, "application/json", out, NULL, NULL);
}

/* ---- small endpoints ---- */

static enum MHD_Result handle_models(srv_server *s, struct MHD_Connection *c, conn_ctx *cc, const char *one) {
    json_int_t created = (json_int_t)time(NULL) - (json_int_t)(clock_now() - s->m.started);
    json_t *model = json_pack("{s:s,s:s,s:I,s:s,s:i,s:i}", "id", s->be->model_id, "object", "model", "created", created, "owned_by",
                              "mtplx", "context_length", s->ctx, "max_model_len", s->ctx);
    json_t *o;
    if (one) {
        if (strcmp(one, s->be->model_id) != 0) {
            json_decref(model);
            char msg[400];
            snprintf(msg, sizeof msg, "model '%.200s' does not exist; this server serves '%.60s'", one, s->be->model_id);
            return respond_error(s, c, cc, 404, "model_not_found", "model", msg, NULL, NULL);
        }
        o = model;
    } else {
        o = json_pack("{s:s,s:[o]}", "object", "list", "data", model);
    }
    char *body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    cc->responded = 1;
    return respond(s, c, 200, "application/json", body, NULL, NULL);
}

static enum MHD_Result handle_health(srv_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    int waiting, running;
    queue_counts(&s->q, &waiting, &running);
    json_t *o = json_pack("{s:s,s:s,s:s,s:s?,s:i,s:i,s:i,s:f,s:{s:i,s:i,s:i},s:b}", "status", "ok", "model", s->be->model_id,
                          "tier", s->be->tier, "family", s->be->family, "depth", s->depth, "max_depth", s->be->max_depth, "context", s->ctx, "uptime_s",
                          clock_now() - s->m.started, "queue", "waiting", waiting, "running", running, "max", s->cfg.max_queue,
                          "api_key_required", s->api_key != NULL);
    /* the default depth's adaptive threshold (0: a fixed depth), beside "depth" */
    json_object_set_new(o, "draft_min_conf", json_real(round((double)s->min_conf * 1e4) / 1e4));
    char *body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    cc->responded = 1;
    return respond(s, c, 200, "application/json", body, NULL, NULL);
}

static enum MHD_Result handle_metrics(srv_server *s, struct MHD_Connection *c, conn_ctx *cc) {
    int waiting, running;
    queue_counts(&s->q, &waiting, &running);
    cc->responded = 1;
    char *text = metrics_render(&s->m, waiting, running, s->cfg.max_queue), *proc = web_process_metrics();
    sbuf b = {0};
    if (text && (sbuf_puts(&b, text) || (proc && sbuf_puts(&b, proc)))) sbuf_free(&b);
    free(text);
    free(proc);
    return respond(s, c, 200, "text/plain; version=0.0.4; charset=utf-8", b.len ? sbuf_take(&b) : NULL, NULL, NULL);
}

/* A file of the embedded browser UI (web.h), served without the API key: the pages hold no data
 * and ask for the key themselves. */
static enum MHD_Result respond_web(srv_server *s, struct MHD_Connection *c, const web_file *f) {
    struct MHD_Response *r = MHD_create_response_from_buffer(f->len, (void *)f->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", web_content_type(f->name));
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Content-Security-Policy", "default-src 'self'; img-src 'self' data:");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    metrics_status(&s->m, 200);
    return rc;
}

/* ---- routing ---- */

typedef struct {
    const char *path;
    const char *method;
    int         endpoint;
} route;

static const route ROUTES[] = {
    {"/v1/chat/completions", "POST", EP_CHAT},
    {"/v1/completions", "POST", EP_COMPLETIONS},
    {"/v1/messages", "POST", EP_MESSAGES},
    {"/v1/messages/count_tokens", "POST", EP_COUNT_TOKENS},
    {"/v1/responses", "POST", EP_RESPONSES},
    {"/v1/models", "GET", EP_MODELS},
    {"/health", "GET", EP_HEALTH},
    {"/metrics", "GET", EP_METRICS},
};

/* Endpoint of url (EP_OTHER when unknown); *method_ok says whether method matches. */
static int route_of(const char *url, const char *method, int *method_ok, const char **model_arg) {
    *model_arg = NULL;
    for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++) {
        if (!strcmp(url, ROUTES[i].path)) {
            *method_ok = !strcmp(method, ROUTES[i].method) || (!strcmp(method, "HEAD") && !strcmp(ROUTES[i].method, "GET"));
            return ROUTES[i].endpoint;
        }
    }
    if (!strncmp(url, "/v1/models/", 11) && url[11]) {
        *model_arg = url + 11;
        *method_ok = !strcmp(method, "GET");
        return EP_MODELS;
    }
    *method_ok = 1;
    return EP_OTHER;
}

static int key_matches(const srv_server *s, const char *given) {
    if (!given) return 0;
    size_t gl = strlen(given);
    /* constant time in the key length: always walk the whole configured key */
    unsigned char diff = (unsigned char)(gl != s->key_len);
    for (size_t i = 0; i < s->key_len; i++) diff |= (unsigned char)(s->api_key[i] ^ (i < gl ? given[i] : 0));
    return diff == 0;
}

static int authorized(const srv_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (auth && !strncasecmp(auth, "Bearer ", 7)) {
        const char *k = auth + 7;
        while (*k == ' ') k++;
        if (key_matches(s, k)) return 1;
    }
    return key_matches(s, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"));
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_server *s = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        fault_phase("request"); /* the fault build's sweep counts failure points per request */
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        *con_cls = cc;
        atomic_fetch_add(&s->inflight, 1); /* on_completed takes it back */
        snprintf(cc->method, sizeof cc->method, "%s", method);
        snprintf(cc->path, sizeof cc->path, "%s", url);
        int method_ok;
        const char *model_arg;
        cc->endpoint = route_of(url, method, &method_ok, &model_arg);
        cc->anthropic = cc->endpoint == EP_MESSAGES || cc->endpoint == EP_COUNT_TOKENS;
        metrics_request(&s->m, cc->endpoint);
        if (!strcmp(method, "OPTIONS")) {
            cc->responded = 1;
            return respond(s, c, 204, "text/plain", strdup(""), NULL, NULL);
        }
        if (atomic_load(&s->draining)) /* server_drain: finish what runs, take nothing new */
            return respond_error(s, c, cc, 503, "shutting_down", NULL, "the server is shutting down", "Connection", "close");
        const web_file *wf = cc->endpoint == EP_OTHER && (!strcmp(method, "GET") || !strcmp(method, "HEAD")) ? web_file_for_url(url) : NULL;
        if (wf) {
            cc->responded = 1;
            return respond_web(s, c, wf);
        }
        if (!authorized(s, c))
            return respond_error(s, c, cc, 401, "invalid_api_key", NULL, "missing or invalid API key", "WWW-Authenticate", "Bearer");
        if (cc->endpoint == EP_OTHER) {
            char msg[300];
            snprintf(msg, sizeof msg, "no route for %.10s %.200s", method, url);
            return respond_error(s, c, cc, 404, "not_found", NULL, msg, NULL, NULL);
        }
        if (!method_ok) {
            const char *allow = "POST";
            for (size_t i = 0; i < sizeof ROUTES / sizeof *ROUTES; i++)
                if (ROUTES[i].endpoint == cc->endpoint) allow = ROUTES[i].method;
            char msg[200];
            snprintf(msg, sizeof msg, "method %.10s is not allowed on %.100s (use %s)", method, url, allow);
            return respond_error(s, c, cc, 405, "method_not_allowed", NULL, msg, "Allow", allow);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            unsigned long long n = strtoull(cl, NULL, 10);
            if (n > s->cfg.max_body) {
                cc->too_big = 1;
                if (n > HARD_BODY_CAP) {
                    char msg[200];
                    snprintf(msg, sizeof msg, "request body is %llu bytes; the limit is %zu bytes", n, s->cfg.max_body);
                    return respond_error(s, c, cc, 413, "request_too_large", NULL, msg, "Connection", "close");
                }
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cc->responded && !cc->too_big) {
            if (cc->body.len + *upload_size > s->cfg.max_body) {
                cc->too_big = 1;
                sbuf_free(&cc->body);
            } else if (sbuf_append(&cc->body, upload, *upload_size)) {
                cc->too_big = 1;
                sbuf_free(&cc->body);
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->responded) return MHD_YES;
    if (cc->too_big) {
        char msg[200];
        snprintf(msg, sizeof msg, "request body exceeds the limit of %zu bytes", s->cfg.max_body);
        return respond_error(s, c, cc, 413, "request_too_large", NULL, msg, NULL, NULL);
    }
    int method_ok;
    const char *model_arg;
    route_of(url, method, &method_ok, &model_arg);
    switch (cc->endpoint) {
    case EP_MODELS: return handle_models(s, c, cc, model_arg);
    case EP_HEALTH: return handle_health(s, c, cc);
    case EP_METRICS: return handle_metrics(s, c, cc);
    default: return handle_generate(s, c, cc);
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    sbuf_free(&cc->body);
    free(cc);
    *con_cls = NULL;
    atomic_fetch_sub(&((srv_server *)cls)->inflight, 1);
}

/* libmicrohttpd's own diagnostics ("Failed to send ...": a client went away) — only when not quiet */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    const srv_server *s = cls;
    if (s->cfg.quiet) return;
    fputs("mtplx serve: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---- lifecycle ---- */

int server_start(const srv_config *cfg, srv_backend *be, srv_server **out, mtplx_err *err) {
    *out = NULL;
    if (!cfg->host || !*cfg->host) return err_set(err, MTPLX_EINVAL, "--host is empty");
    int has_key = cfg->api_key && *cfg->api_key;
    if (!has_key && !server_host_is_loopback(cfg->host))
        return err_set(err, MTPLX_EINVAL, "refusing to listen on %s without an API key: use --api-key or --api-key-file, or a loopback --host",
                       cfg->host);
    if (cfg->port < 0 || cfg->port > 65535) return err_set(err, MTPLX_EINVAL, "--port %d is outside 0..65535", cfg->port);
    if (cfg->max_queue < 1) return err_set(err, MTPLX_EINVAL, "--max-queue must be at least 1");
    if (cfg->max_body < 1024) return err_set(err, MTPLX_EINVAL, "--max-body must be at least 1024 bytes");
    if (cfg->depth > be->max_depth)
        return err_set(err, MTPLX_EINVAL, "--depth %d exceeds what this model supports (%d)", cfg->depth, be->max_depth);
    if (cfg->ctx < 0) return err_set(err, MTPLX_EINVAL, "--ctx must be positive");
    if (cfg->max_tokens < 0) return err_set(err, MTPLX_EINVAL, "--max-tokens must be positive");
    if (cfg->temperature > 2) return err_set(err, MTPLX_EINVAL, "--temperature must be in [0, 2]");
    if (cfg->max_connections < 1) return err_set(err, MTPLX_EINVAL, "--max-connections must be at least 1");
    if (cfg->max_connections_per_ip < 0) return err_set(err, MTPLX_EINVAL, "--max-connections-per-ip must be 0 (off) or more");
    if (cfg->idle_timeout < 0) return err_set(err, MTPLX_EINVAL, "--idle-timeout must be 0 (none) or more seconds");

    srv_server *s = calloc(1, sizeof *s);
    if (!s) return err_set(err, MTPLX_ENOMEM, "out of memory");
    s->cfg = *cfg;
    s->listen_fd = -1;
    s->be = be;
    s->ctx = cfg->ctx > 0 ? cfg->ctx : be->ctx; /* what the user asked for, never silently less */
    s->depth = cfg->depth >= 0 ? cfg->depth : be->default_depth;
    s->min_conf = cfg->min_conf >= 0 ? cfg->min_conf : cfg->depth >= 0 ? 0 : be->default_min_conf;
    pthread_mutex_init(&s->be_mu, NULL);
    pthread_mutex_init(&s->log_mu, NULL);
    pthread_mutex_init(&s->trace.mu, NULL);
    s->ignored_seen = json_object();
    metrics_init(&s->m);
    if (has_key) {
        s->api_key = strdup(cfg->api_key);
        s->key_len = strlen(cfg->api_key);
    }
    s->host = strdup(cfg->host);
    s->cfg.host = s->host;
    s->cfg.api_key = s->api_key;
    if (cfg->sse_trace) {
        s->trace.fp = fopen(cfg->sse_trace, "w");
        if (!s->trace.fp) {
            int rc = err_set(err, MTPLX_EIO, "delivery trace %s: %s", cfg->sse_trace, strerror(errno));
            server_stop(s);
            return rc;
        }
        setvbuf(s->trace.fp, NULL, _IOLBF, 0); /* each event on disk as it happens, as the step trace */
        fprintf(s->trace.fp, "# t_ms kind job bytes (f: worker -> HTTP thread, w: HTTP thread -> socket)\n");
    }

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *ai = NULL;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", cfg->port);
    char h[256];
    size_t hl = strlen(cfg->host);
    if (hl >= sizeof h) hl = sizeof h - 1;
    memcpy(h, cfg->host, hl);
    h[hl] = 0;
    if (h[0] == '[' && hl > 1 && h[hl - 1] == ']') memmove(h, h + 1, hl - 2), h[hl - 2] = 0;
    int gai = getaddrinfo(h, portstr, &hints, &ai);
    if (gai || !ai) {
        int rc = err_set(err, MTPLX_EINVAL, "cannot resolve --host %s: %s", cfg->host, gai_strerror(gai));
        server_stop(s);
        return rc;
    }
    int rc = queue_start(&s->q, be, &s->m, cfg->max_queue, cfg->quiet, err);
    if (rc) {
        freeaddrinfo(ai);
        server_stop(s);
        return rc;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* the logger must be the first option, or libmicrohttpd warns that earlier options log elsewhere */
    s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_ip,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned)1, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->d) {
        rc = err_set(err, MTPLX_EIO, "cannot listen on %s:%d (address in use or not available)", cfg->host, cfg->port);
        server_stop(s);
        return rc;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    s->port = cfg->port;
    if (di && getsockname(di->listen_fd, (struct sockaddr *)&ss, &sl) == 0)
        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
    *out = s;
    return 0;
}

int server_port(const srv_server *s) { return s->port; }

void server_default_depth(const srv_server *s, int *depth, float *min_conf) {
    *depth = s->depth, *min_conf = s->min_conf;
}

/* Close the listening socket for new connections (once): MHD_quiesce_daemon stops accepting but
 * leaves the socket listening, so connects would wait in the backlog; shutdown() makes the kernel
 * refuse them. The descriptor itself is closed by server_stop after the daemon's threads are gone. */
static void stop_listening(srv_server *s) {
    if (!s->d || s->listen_fd >= 0) return;
    s->listen_fd = MHD_quiesce_daemon(s->d);
    if (s->listen_fd >= 0) shutdown(s->listen_fd, SHUT_RDWR);
}

void server_drain_begin(srv_server *s) {
    atomic_store(&s->draining, 1);
    stop_listening(s);
}

int server_inflight(srv_server *s) { return atomic_load(&s->inflight); }

void server_stop(srv_server *s) {
    if (!s) return;
    stop_listening(s);
    queue_stop(&s->q);             /* cancels running and queued jobs; their waiters wake up */
    if (s->d) MHD_stop_daemon(s->d);
    if (s->listen_fd >= 0) close(s->listen_fd);
    pthread_mutex_destroy(&s->be_mu);
    pthread_mutex_destroy(&s->log_mu);
    if (s->trace.fp) fclose(s->trace.fp);
    pthread_mutex_destroy(&s->trace.mu);
    json_decref(s->ignored_seen);
    pthread_mutex_destroy(&s->m.mu);
    free(s->api_key);
    free(s->host);
    free(s);
}
