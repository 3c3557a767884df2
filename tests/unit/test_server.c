/* test_server.c — the HTTP server end to end over loopback sockets, on a scripted backend whose
 * "model" emits a given text one byte-token at a time. This pins down exact text behaviour
 * (reasoning split, stop strings across tokens, tool calls, UTF-8) that a real model cannot be
 * steered into, plus the error shapes, limits, auth, queueing and disconnect handling.
 * (tests/integration/server.sh drives the real model with the official SDKs.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../../src/base/sbuf.h"
#include "../../src/server/server.h"
#include "test.h"

/* ---- scripted backend: token id = byte value, 256 = end of turn ---- */

/* How long a test waits for something the server must do before it fails saying so. */
#define WAIT_LIMIT_S 10.0

typedef struct {
    const char     *script;     /* what the "model" writes */
    int             chunk;      /* tokens per callback */
    int             think;      /* 1: rendered prompt ends with an open <think> */
    int             hold;       /* 1: after its first callback a generation waits at the gate */
    pthread_mutex_t mu;         /* guards the gate fields below */
    pthread_cond_t  cv;         /* signalled when the gate opens or a generation arrives at it */
    int             released;   /* the gate is open: waiting generations go on */
    int             at_gate;    /* generations that have reached the gate (ever, since script()) */
    int             timed_out;  /* a generation waited WAIT_LIMIT_S, neither released nor cancelled */
    int             strict_system; /* 1: a system message after the first fails to render (like many templates) */
    int             free_delay_us; /* sleep in decoder_free (the worker's last step after generating) */
    float           last_temperature; /* what the last generation was asked to sample at */
} script_be;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The gate of a held generation: wait until the test opens it (returns 0) or the server cancels the
 * job (returns 1). Cancellation is read from the token callback called with no tokens: the server
 * answers whether the job is cancelled without anything being emitted. Waits at most WAIT_LIMIT_S,
 * then records timed_out and returns 1. */
static int sb_wait_gate(script_be *b, gen_token_fn fn, void *user) {
    double deadline = now_s() + WAIT_LIMIT_S;
    int stop = 0;
    pthread_mutex_lock(&b->mu);
    b->at_gate++;
    pthread_cond_broadcast(&b->cv);
    while (!b->released) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000000L; /* re-ask the server about cancellation every 5 ms */
        if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&b->cv, &b->mu, &ts);
        if (b->released) break;
        pthread_mutex_unlock(&b->mu);
        stop = fn(user, NULL, 0);
        pthread_mutex_lock(&b->mu);
        if (stop) break;
        if (now_s() > deadline) {
            b->timed_out = 1;
            stop = 1;
            break;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return stop;
}

/* Open the gate: held generations continue, later ones pass it. */
static void sb_release(script_be *b) {
    pthread_mutex_lock(&b->mu);
    b->released = 1;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

static int sb_render(void *impl, const json_t *req, int enable_thinking, char **prompt, mtplx_err *err) {
    script_be *b = impl;
    size_t mi;
    json_t *msg;
    json_array_foreach(json_object_get(req, "messages"), mi, msg) {
        if (b->strict_system && mi > 0 && !strcmp(json_string_value(json_object_get(msg, "role")), "system"))
            return err_set(err, MTPLX_ETEMPLATE, "System message must be at the beginning.");
    }
    char *s = json_dumps(json_object_get(req, "messages"), JSON_COMPACT);
    if (!s) return err_set(err, MTPLX_EINVAL, "no messages");
    char *t = json_object_get(req, "tools") ? json_dumps(json_object_get(req, "tools"), JSON_COMPACT) : NULL;
    size_t n = strlen(s), tn = t ? strlen(t) : 0;
    char *p = malloc(n + tn + 16);
    memcpy(p, s, n + 1);
    if (t) memcpy(p + n, t, tn + 1); /* the tools reach the prompt, as with a real template */
    free(s);
    free(t);
    if (b->think && enable_thinking != 0) strcat(p, "<think>\n");
    *prompt = p;
    return 0;
}

static int sb_encode(void *impl, const char *text, size_t len, int32_t **ids, int *n, mtplx_err *err) {
    (void)impl, (void)err;
    *ids = malloc((len ? len : 1) * sizeof **ids);
    for (size_t i = 0; i < len; i++) (*ids)[i] = (unsigned char)text[i];
    *n = (int)len;
    return 0;
}

typedef struct {
    char c;
} sb_dec;
/* the end-of-turn id 256 decodes to visible text here, as it would with a tokenizer that does not
 * mark EOS special: the server must still never show it */
static void *sb_dec_new(void *impl, mtplx_err *err) {
    (void)impl, (void)err;
    return calloc(1, sizeof(sb_dec));
}
static int sb_dec_push(void *dec, int32_t id, const char **text, size_t *len, mtplx_err *err) {
    (void)err;
    sb_dec *d = dec;
    if (id >= 256) {
        *text = "<eos>";
        *len = 5;
        return 0;
    }
    d->c = (char)id;
    *text = &d->c;
    *len = 1;
    return 0;
}
static int sb_dec_flush(void *dec, const char **text, size_t *len, mtplx_err *err) {
    (void)dec, (void)text, (void)err;
    *len = 0;
    return 0;
}
static script_be SB;
static void sb_dec_free(void *dec) {
    if (SB.free_delay_us) usleep((useconds_t)SB.free_delay_us);
    free(dec);
}
static void sb_defaults(void *impl, gen_params *p) {
    (void)impl;
    memset(p, 0, sizeof *p);
    p->temperature = 1;
    p->top_p = 1;
    p->repetition_penalty = 1;
    p->max_tokens = 256;
    p->stop_ids[p->n_stop_ids++] = 256;
}

static int sb_generate(void *impl, int slot, const int32_t *prompt, int n_prompt, const gen_params *p, gen_token_fn fn,
                       void *user, int (*cancelled)(void *), void *cancel_user, gen_stats *st, mtplx_err *err) {
    (void)prompt, (void)err, (void)slot, (void)cancelled, (void)cancel_user;
    script_be *b = impl;
    b->last_temperature = p->temperature;
    memset(st, 0, sizeof *st);
    st->prompt_tokens = n_prompt;
    st->depth = p->depth;
    size_t n = strlen(b->script);
    int32_t toks[64];
    size_t i = 0;
    st->finish_reason = "stop";
    for (;;) {
        int k = 0;
        while (k < b->chunk && i <= n && st->completion_tokens + k < p->max_tokens) toks[k++] = i < n ? (unsigned char)b->script[i++] : (i++, 256);
        if (k == 0) {
            st->finish_reason = i > n ? "stop" : "length";
            break;
        }
        st->completion_tokens += k;
        int first = st->completion_tokens == k;
        if (fn(user, toks, k) || (first && b->hold && sb_wait_gate(b, fn, user))) {
            st->finish_reason = "cancel";
            break;
        }
        if (toks[k - 1] == 256) break;
    }
    st->cycles = st->completion_tokens;
    return 0;
}

static script_be SB = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static srv_backend BE = {.impl = &SB, .model_id = "scripted", .tier = "test", .ctx = 4096, .max_depth = 3,
                         .render_chat = sb_render, .encode = sb_encode, .decoder_new = sb_dec_new,
                         .decoder_push = sb_dec_push, .decoder_flush = sb_dec_flush, .decoder_free = sb_dec_free,
                         .default_params = sb_defaults, .generate = sb_generate};

/* ---- a minimal HTTP/1.0 client ---- */

/* A connected socket, or -1. Reads time out after 30 s (then fail), so a server that never answers
 * fails the test instead of hanging it. */
static int connect_port(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {30, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_req(int fd, const char *method, const char *path, const char *hdrs, const char *body, size_t blen) {
    char head[1024];
    int n = snprintf(head, sizeof head, "%s %s HTTP/1.0\r\nHost: x\r\n%sContent-Length: %zu\r\nContent-Type: application/json\r\n\r\n",
                     method, path, hdrs ? hdrs : "", blen);
    if (write(fd, head, (size_t)n) != n) return -1;
    size_t off = 0;
    while (off < blen) {
        ssize_t w = write(fd, body + off, blen - off);
        if (w <= 0) return -1;
        off += (size_t)w;
    }
    return 0;
}

typedef struct {
    int  status;
    char *headers;
    char *body;
} resp;

static resp read_resp(int fd) {
    sbuf b = {0};
    char buf[8192];
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) sbuf_append(&b, buf, (size_t)r);
    close(fd);
    resp out = {0};
    const char *s = sbuf_str(&b);
    sscanf(s, "HTTP/1.%*d %d", &out.status);
    const char *sep = strstr(s, "\r\n\r\n");
    out.headers = strndup(s, sep ? (size_t)(sep - s) : strlen(s));
    out.body = strdup(sep ? sep + 4 : "");
    sbuf_free(&b);
    return out;
}

static resp http(int port, const char *method, const char *path, const char *hdrs, const char *body) {
    int fd = connect_port(port);
    if (fd < 0) return (resp){0, strdup(""), strdup("")};
    send_req(fd, method, path, hdrs, body ? body : "", body ? strlen(body) : 0);
    return read_resp(fd);
}

static void resp_free(resp *r) {
    free(r->headers);
    free(r->body);
}

static json_t *body_json(const resp *r) {
    json_error_t je;
    return json_loads(r->body, 0, &je);
}

/* Walk SSE "data:" lines of an OpenAI stream: concatenated content/reasoning, last finish_reason. */
typedef struct {
    sbuf content, reasoning;
    char finish[32];
    int  n_calls, done, usage_completion, bad_json;
    char call_name[64], call_args[256];
} oai_stream;

static void parse_oai_stream(const char *body, oai_stream *o) {
    memset(o, 0, sizeof *o);
    o->usage_completion = -1;
    for (const char *l = body; l && *l;) {
        const char *e = strchr(l, '\n');
        size_t n = e ? (size_t)(e - l) : strlen(l);
        if (n > 6 && !strncmp(l, "data: ", 6)) {
            if (!strncmp(l + 6, "[DONE]", 6)) o->done = 1;
            else {
                json_error_t je;
                json_t *c = json_loadb(l + 6, n - 6, 0, &je);
                if (!c) o->bad_json++;
                json_t *ch = json_array_get(json_object_get(c, "choices"), 0);
                json_t *d = json_object_get(ch, "delta");
                json_t *t = json_object_get(d, "content");
                if (json_is_string(t)) sbuf_append(&o->content, json_string_value(t), json_string_length(t));
                t = json_object_get(ch, "text");
                if (json_is_string(t)) sbuf_append(&o->content, json_string_value(t), json_string_length(t));
                t = json_object_get(d, "reasoning_content");
                if (json_is_string(t)) sbuf_append(&o->reasoning, json_string_value(t), json_string_length(t));
                json_t *tc = json_array_get(json_object_get(d, "tool_calls"), 0);
                if (tc) {
                    o->n_calls++;
                    snprintf(o->call_name, sizeof o->call_name, "%s", json_string_value(json_object_get(json_object_get(tc, "function"), "name")));
                    snprintf(o->call_args, sizeof o->call_args, "%s", json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")));
                }
                json_t *f = json_object_get(ch, "finish_reason");
                if (json_is_string(f)) snprintf(o->finish, sizeof o->finish, "%s", json_string_value(f));
                json_t *u = json_object_get(c, "usage");
                if (u) o->usage_completion = (int)json_integer_value(json_object_get(u, "completion_tokens"));
                json_decref(c);
            }
        }
        l = e ? e + 1 : NULL;
    }
}

static void oai_free(oai_stream *o) {
    sbuf_free(&o->content);
    sbuf_free(&o->reasoning);
}

static srv_server *start(const char *key, int max_queue, size_t max_body, int ctx) {
    srv_config c;
    server_config_default(&c);
    c.port = 0;
    c.api_key = key;
    c.quiet = 1;
    if (max_queue) c.max_queue = max_queue;
    if (max_body) c.max_body = max_body;
    c.ctx = ctx;
    srv_server *s = NULL;
    mtplx_err e = {0};
    if (server_start(&c, &BE, &s, &e)) fprintf(stderr, "server_start: %s\n", e.msg);
    return s;
}

static void script(const char *text, int chunk, int think) {
    SB.script = text;
    SB.chunk = chunk;
    SB.think = think;
    SB.strict_system = 0;
    SB.free_delay_us = 0;
    pthread_mutex_lock(&SB.mu);
    SB.hold = 0;
    SB.released = 0;
    SB.at_gate = 0;
    SB.timed_out = 0;
    pthread_mutex_unlock(&SB.mu);
}

static int sb_timed_out(void) {
    pthread_mutex_lock(&SB.mu);
    int t = SB.timed_out;
    pthread_mutex_unlock(&SB.mu);
    return t;
}

/* Hold the next generations at the gate after their first chunk (script() resets). */
static void script_hold(void) {
    pthread_mutex_lock(&SB.mu);
    SB.hold = 1;
    pthread_mutex_unlock(&SB.mu);
}

/* Wait until n generations have reached the gate; 0 after WAIT_LIMIT_S. */
static int wait_at_gate(int n) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)WAIT_LIMIT_S;
    pthread_mutex_lock(&SB.mu);
    int rc = 0;
    while (SB.at_gate < n && rc == 0) rc = pthread_cond_timedwait(&SB.cv, &SB.mu, &ts);
    int ok = SB.at_gate >= n;
    pthread_mutex_unlock(&SB.mu);
    return ok;
}

static const char *CHAT = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]%s}";

static char *chat_body(const char *extra) {
    char *b = malloc(strlen(CHAT) + strlen(extra) + 1);
    sprintf(b, CHAT, extra);
    return b;
}

/* ---- tests ---- */

TEST(test_chat_nonstream_splits_reasoning_and_reports_usage) {
    script("plan it\n</think>\n\nHello world", 3, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    char *b = chat_body("");
    resp r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    CHECK_INT(r.status, 200);
    json_t *j = body_json(&r);
    json_t *msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
    CHECK_STR(json_string_value(json_object_get(msg, "content")), "Hello world");
    CHECK_STR(json_string_value(json_object_get(msg, "reasoning_content")), "plan it");
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "finish_reason")), "stop");
    CHECK_STR(json_string_value(json_object_get(j, "object")), "chat.completion");
    /* the script's bytes + the end-of-turn token */
    CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "completion_tokens")), (int)strlen(SB.script) + 1);
    json_decref(j);
    resp_free(&r);
    free(b);
    server_stop(s);
}

TEST(test_stream_text_equals_nonstream_text) {
    const char *scripts[] = {"a\n</think>\n\nx <thi y </think z", "  \n</think>\n\n<b>bold</b> text\n", "no close tag at all"};
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    for (size_t k = 0; k < 3; k++) {
        for (int chunk = 1; chunk <= 4; chunk += 3) {
            script(scripts[k], chunk, 1);
            char *b = chat_body("");
            resp r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
            free(b);
            b = chat_body(",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
            resp rs = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
            free(b);
            CHECK_INT(rs.status, 200);
            CHECK(strstr(rs.headers, "text/event-stream") != NULL);
            json_t *j = body_json(&r);
            json_t *msg = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message");
            oai_stream o;
            parse_oai_stream(rs.body, &o);
            CHECK_STR(sbuf_str(&o.content), json_string_value(json_object_get(msg, "content")));
            const char *rc = json_string_value(json_object_get(msg, "reasoning_content"));
            CHECK_STR(sbuf_str(&o.reasoning), rc ? rc : "");
            CHECK_INT(o.done, 1);
            CHECK_INT(o.bad_json, 0);
            CHECK_STR(o.finish, "stop");
            CHECK_INT(o.usage_completion, (int)strlen(scripts[k]) + 1);
            oai_free(&o);
            json_decref(j);
            resp_free(&r);
            resp_free(&rs);
        }
    }
    server_stop(s);
}

TEST(test_stop_string_across_tokens_never_emitted) {
    script("abc STOP def", 1, 0);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    char *b = chat_body(",\"stream\":true,\"stop\":[\"STOP\",\"zz\"]");
    resp r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    oai_stream o;
    parse_oai_stream(r.body, &o);
    CHECK_STR(sbuf_str(&o.content), "abc ");
    CHECK_STR(o.finish, "stop");
    CHECK(strstr(r.body, "\"content\":\"S") == NULL && strstr(r.body, "\"content\":\"T") == NULL);
    oai_free(&o);
    resp_free(&r);
    free(b);
    /* a stop prefix that never completes is released at the end */
    script("abc ST", 1, 0);
    b = chat_body(",\"stop\":\"STOP\"");
    r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    json_t *j = body_json(&r);
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"), "content")),
              "abc ST");
    json_decref(j);
    resp_free(&r);
    free(b);
    server_stop(s);
}

static const char *TOOLS = ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\","
                           "\"properties\":{\"path\":{\"type\":\"string\"}}}}}]";
static const char *CALL = "ok\n</think>\n\n<tool_call>\n<function=read_file>\n<parameter=path>\n123\n</parameter>\n</function>\n</tool_call>";

TEST(test_tool_call_stream_and_nonstream) {
    script(CALL, 2, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    char extra[512];
    snprintf(extra, sizeof extra, "%s", TOOLS);
    char *b = chat_body(extra);
    resp r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    json_t *j = body_json(&r);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(ch, "finish_reason")), "tool_calls");
    json_t *tc = json_array_get(json_object_get(json_object_get(ch, "message"), "tool_calls"), 0);
    CHECK_STR(json_string_value(json_object_get(json_object_get(tc, "function"), "name")), "read_file");
    CHECK_STR(json_string_value(json_object_get(json_object_get(tc, "function"), "arguments")), "{\"path\":\"123\"}");
    CHECK(json_is_null(json_object_get(json_object_get(ch, "message"), "content")));
    json_decref(j);
    resp_free(&r);
    free(b);

    snprintf(extra, sizeof extra, "%s,\"stream\":true", TOOLS);
    b = chat_body(extra);
    r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    oai_stream o;
    parse_oai_stream(r.body, &o);
    CHECK_INT(o.n_calls, 1);
    CHECK_STR(o.call_name, "read_file");
    CHECK_STR(o.call_args, "{\"path\":\"123\"}");
    CHECK_STR(o.finish, "tool_calls");
    CHECK_STR(sbuf_str(&o.content), "");
    oai_free(&o);
    resp_free(&r);
    free(b);

    /* max_tokens cuts the call: finish is length and the partial call comes back as content */
    snprintf(extra, sizeof extra, "%s,\"max_tokens\":40", TOOLS);
    b = chat_body(extra);
    r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    j = body_json(&r);
    ch = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(ch, "finish_reason")), "length");
    CHECK(json_object_get(json_object_get(ch, "message"), "tool_calls") == NULL);
    CHECK(strncmp(json_string_value(json_object_get(json_object_get(ch, "message"), "content")), "<tool_call>", 11) == 0);
    json_decref(j);
    resp_free(&r);
    free(b);
    server_stop(s);
}

TEST(test_utf8_deltas_complete_and_invalid_bytes_replaced) {
    script("h\xc3\xa9llo \xe2\x82\xac \xff end", 1, 0);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    char *b = chat_body(",\"stream\":true");
    resp r = http(server_port(s), "POST", "/v1/chat/completions", NULL, b);
    oai_stream o;
    parse_oai_stream(r.body, &o);
    CHECK_INT(o.bad_json, 0);
    CHECK_STR(sbuf_str(&o.content), "h\xc3\xa9llo \xe2\x82\xac \xef\xbf\xbd end");
    oai_free(&o);
    resp_free(&r);
    free(b);
    server_stop(s);
}

TEST(test_completions_endpoint) {
    script("def f():\n    return 1\n", 5, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    resp r = http(server_port(s), "POST", "/v1/completions", NULL, "{\"prompt\":\"def\",\"max_tokens\":100}");
    json_t *j = body_json(&r);
    json_t *ch = json_array_get(json_object_get(j, "choices"), 0);
    CHECK_STR(json_string_value(json_object_get(ch, "text")), "def f():\n    return 1\n");
    CHECK_STR(json_string_value(json_object_get(j, "object")), "text_completion");
    CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "usage"), "prompt_tokens")), 3);
    json_decref(j);
    resp_free(&r);
    r = http(server_port(s), "POST", "/v1/completions", NULL, "{\"prompt\":\"def\",\"max_tokens\":4,\"stream\":true}");
    oai_stream o;
    parse_oai_stream(r.body, &o);
    CHECK_STR(sbuf_str(&o.content), "def ");
    CHECK_STR(o.finish, "length");
    CHECK_INT(o.done, 1);
    oai_free(&o);
    resp_free(&r);
    server_stop(s);
}

static void expect_error(int port, const char *method, const char *path, const char *hdrs, const char *body, int status,
                         const char *type, const char *needle) {
    resp r = http(port, method, path, hdrs, body);
    CHECK_MSG(r.status == status, "%s %s: expected %d, got %d (%s)", method, path, status, r.status, r.body);
    json_t *j = body_json(&r);
    json_t *e = json_object_get(j, "error");
    if (!strcmp(path, "/v1/messages")) {
        CHECK_STR(json_string_value(json_object_get(j, "type")), "error");
    } else {
        CHECK(json_is_string(json_object_get(e, "code")));
    }
    CHECK_STR(json_string_value(json_object_get(e, "type")), type);
    const char *m = json_string_value(json_object_get(e, "message"));
    CHECK_MSG(m && strstr(m, needle), "message [%s] lacks [%s]", m ? m : "(none)", needle);
    json_decref(j);
    resp_free(&r);
}

TEST(test_bad_requests_get_api_shaped_errors) {
    script("x", 1, 0);
    srv_server *s = start(NULL, 0, 4096, 64);
    REQUIRE(s);
    int p = server_port(s);
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\": [", 400, "invalid_request_error", "not valid JSON");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "[1,2]", 400, "invalid_request_error", "JSON object");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":\"hi\"}", 400, "invalid_request_error", "messages");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[]}", 400, "invalid_request_error", "empty");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"temperature\":\"hot\"}",
                 400, "invalid_request_error", "temperature");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"n\":2}", 400,
                 "invalid_request_error", "'n' must be 1");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"logprobs\":true}",
                 400, "invalid_request_error", "logprobs");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"mtplx\":{\"depth\":9}}",
                 400, "invalid_request_error", "mtplx.depth");
    expect_error(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"wizard\",\"content\":\"a\"}]}", 400,
                 "invalid_request_error", "role");
    /* the rendered prompt (the JSON of the messages here) is longer than the 64-token context */
    expect_error(p, "POST", "/v1/chat/completions", NULL,
                 "{\"messages\":[{\"role\":\"user\",\"content\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}]}", 400,
                 "invalid_request_error", "maximum context length is 64 tokens");
    expect_error(p, "GET", "/v2/nothing", NULL, NULL, 404, "not_found_error", "no route");
    expect_error(p, "GET", "/v1/chat/completions", NULL, NULL, 405, "invalid_request_error", "not allowed");
    expect_error(p, "POST", "/v1/messages", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}", 400, "invalid_request_error",
                 "max_tokens");
    expect_error(p, "POST", "/v1/messages", NULL, "{oops", 400, "invalid_request_error", "JSON");
    char *big = malloc(10000);
    memset(big, ' ', 9999);
    big[9999] = 0;
    big[0] = '{', big[9998] = '}';
    expect_error(p, "POST", "/v1/chat/completions", NULL, big, 413, "invalid_request_error", "limit");
    expect_error(p, "POST", "/v1/messages", NULL, big, 413, "request_too_large", "limit");
    free(big);
    /* unknown fields are ignored and the server still answers */
    resp r = http(p, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"frobnicate\":{\"x\":1}}");
    CHECK_INT(r.status, 200);
    resp_free(&r);
    server_stop(s);
}

TEST(test_api_key_required_and_checked) {
    script("x", 1, 0);
    srv_server *s = start("sekret-key", 0, 0, 0);
    REQUIRE(s);
    int p = server_port(s);
    expect_error(p, "GET", "/v1/models", NULL, NULL, 401, "authentication_error", "API key");
    expect_error(p, "GET", "/v1/models", "Authorization: Bearer sekret-kez\r\n", NULL, 401, "authentication_error", "API key");
    expect_error(p, "GET", "/v1/models", "Authorization: Bearer sekret-key-longer\r\n", NULL, 401, "authentication_error", "API key");
    expect_error(p, "POST", "/v1/messages", "x-api-key: nope\r\n", "{}", 401, "authentication_error", "API key");
    resp r = http(p, "GET", "/v1/models", "Authorization: Bearer sekret-key\r\n", NULL);
    CHECK_INT(r.status, 200);
    resp_free(&r);
    r = http(p, "GET", "/v1/models", "x-api-key: sekret-key\r\n", NULL);
    CHECK_INT(r.status, 200);
    CHECK(strstr(r.body, "\"scripted\"") != NULL);
    resp_free(&r);
    server_stop(s);
}

TEST(test_non_loopback_bind_refused_without_key) {
    srv_config c;
    server_config_default(&c);
    c.host = "0.0.0.0";
    c.port = 0;
    srv_server *s = NULL;
    mtplx_err e = {0};
    CHECK_INT(server_start(&c, &BE, &s, &e), MTPLX_EINVAL);
    CHECK(strstr(e.msg, "API key") != NULL);
    CHECK_INT(server_host_is_loopback("127.0.0.1"), 1);
    CHECK_INT(server_host_is_loopback("::1"), 1);
    CHECK_INT(server_host_is_loopback("[::1]"), 1);
    CHECK_INT(server_host_is_loopback("localhost"), 1);
    CHECK_INT(server_host_is_loopback("192.168.1.2"), 0);
    CHECK_INT(server_host_is_loopback("::"), 0);
}

static long long metric(int port, const char *name) {
    resp r = http(port, "GET", "/metrics", NULL, NULL);
    long long v = -1;
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *m = strstr(r.body, key);
    if (m) v = atoll(m + strlen(key));
    resp_free(&r);
    return v;
}

/* Poll the /metrics value `name` until it equals want (a queue count or counter the server updates
 * on its own threads); returns the last value read, which differs from want after WAIT_LIMIT_S. */
static long long wait_metric(int port, const char *name, long long want) {
    double deadline = now_s() + WAIT_LIMIT_S;
    long long v;
    while ((v = metric(port, name)) != want && now_s() < deadline) {
        struct timespec ts = {0, 2 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return v;
}

TEST(test_disconnect_cancels_and_next_request_works) {
    /* the generation writes one chunk, then stays at the gate until the server cancels it */
    script("0123456789", 1, 0);
    script_hold();
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    int p = server_port(s);
    int fd = connect_port(p);
    REQUIRE(fd >= 0);
    char *b = chat_body(",\"stream\":true");
    send_req(fd, "POST", "/v1/chat/completions", NULL, b, strlen(b));
    CHECK_MSG(wait_at_gate(1), "the generation did not start within %.0f s", WAIT_LIMIT_S);
    char buf[512];
    CHECK(read(fd, buf, sizeof buf) > 0); /* headers / first chunk arrived */
    close(fd);
    long long c = wait_metric(p, "mtplx_generations_cancelled_total", 1);
    CHECK_MSG(c == 1, "mtplx_generations_cancelled_total is %lld %.0f s after the client left, want 1", c, WAIT_LIMIT_S);
    CHECK_MSG(!sb_timed_out(), "the held generation was never cancelled: the server missed the disconnect");
    CHECK_INT(metric(p, "mtplx_completion_tokens_total"), 1); /* stopped at the gate, after one token */
    script("fine", 1, 0);
    resp r = http(p, "POST", "/v1/chat/completions", NULL, b);
    CHECK_INT(r.status, 200);
    oai_stream o;
    parse_oai_stream(r.body, &o);
    CHECK_STR(sbuf_str(&o.content), "fine");
    oai_free(&o);
    resp_free(&r);
    free(b);
    server_stop(s);
}

TEST(test_queue_full_answers_429_with_retry_after) {
    /* one running slot, one waiting place: A runs (held at the gate), C waits, B is refused */
    script("0123456789", 1, 0);
    script_hold();
    srv_server *s = start(NULL, 1, 0, 0);
    REQUIRE(s);
    int p = server_port(s);
    char *b = chat_body(",\"stream\":true");
    int a = connect_port(p);
    REQUIRE(a >= 0);
    send_req(a, "POST", "/v1/chat/completions", NULL, b, strlen(b));
    CHECK_MSG(wait_at_gate(1), "request A did not start generating within %.0f s", WAIT_LIMIT_S);
    long long v = wait_metric(p, "mtplx_queue_running", 1);
    CHECK_MSG(v == 1, "mtplx_queue_running is %lld while A generates, want 1", v);
    int c = connect_port(p);
    REQUIRE(c >= 0);
    send_req(c, "POST", "/v1/chat/completions", NULL, b, strlen(b));
    v = wait_metric(p, "mtplx_queue_waiting", 1);
    CHECK_MSG(v == 1, "mtplx_queue_waiting is %lld after C was sent, want 1", v);
    resp r = http(p, "POST", "/v1/chat/completions", NULL, b);
    CHECK_INT(r.status, 429);
    CHECK(strstr(r.headers, "Retry-After:") != NULL);
    CHECK(strstr(r.body, "rate_limit_error") != NULL);
    resp_free(&r);
    /* the two accepted streams complete normally once the gate opens */
    sb_release(&SB);
    resp ra = read_resp(a), rc = read_resp(c);
    CHECK_MSG(!sb_timed_out(), "a generation waited at the gate for %.0f s", WAIT_LIMIT_S);
    oai_stream o;
    parse_oai_stream(ra.body, &o);
    CHECK_STR(sbuf_str(&o.content), "0123456789");
    oai_free(&o);
    parse_oai_stream(rc.body, &o);
    CHECK_STR(sbuf_str(&o.content), "0123456789");
    oai_free(&o);
    resp_free(&ra);
    resp_free(&rc);
    free(b);
    server_stop(s);
}

TEST(test_anthropic_stream_event_order_and_blocks) {
    script(CALL, 64, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    const char *req = "{\"model\":\"m\",\"max_tokens\":500,\"stream\":true,\"system\":\"be brief\",\"messages\":[{\"role\":\"user\","
                      "\"content\":[{\"type\":\"text\",\"text\":\"show\"}]}],\"tools\":[{\"name\":\"read_file\",\"input_schema\":"
                      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}]}";
    resp r = http(server_port(s), "POST", "/v1/messages", NULL, req);
    CHECK_INT(r.status, 200);
    sbuf order = {0};
    for (const char *l = r.body; (l = strstr(l, "event: ")); l += 7) {
        const char *e = strchr(l, '\n');
        char ev[64];
        snprintf(ev, sizeof ev, "%.*s,", (int)(e - l - 7), l + 7);
        /* consecutive deltas of one block collapse (text arrives token by token) */
        size_t el = strlen(ev);
        if (!(order.len >= el && !strcmp(order.p + order.len - el, ev) && !strcmp(ev, "content_block_delta,"))) sbuf_puts(&order, ev);
    }
    CHECK_STR(sbuf_str(&order), "message_start,ping,content_block_start,content_block_delta,content_block_stop,content_block_start,"
                                "content_block_delta,content_block_stop,message_delta,message_stop,");
    CHECK(strstr(r.body, "\"stop_reason\":\"tool_use\"") != NULL);
    CHECK(strstr(r.body, "\"partial_json\":\"{\\\"path\\\":\\\"123\\\"}\"") != NULL);
    CHECK(strstr(r.body, "\"thinking_delta\",\"thinking\":\"o\"") != NULL);
    sbuf_free(&order);
    resp_free(&r);

    /* non-streaming: thinking block then tool_use with a parsed input object */
    const char *req2 = "{\"max_tokens\":500,\"messages\":[{\"role\":\"user\",\"content\":\"show\"}],\"tools\":[{\"name\":\"read_file\","
                       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}]}";
    r = http(server_port(s), "POST", "/v1/messages", NULL, req2);
    json_t *j = body_json(&r);
    json_t *content = json_object_get(j, "content");
    CHECK_INT(json_array_size(content), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(content, 0), "type")), "thinking");
    CHECK_STR(json_string_value(json_object_get(json_array_get(content, 1), "type")), "tool_use");
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(content, 1), "input"), "path")), "123");
    CHECK_STR(json_string_value(json_object_get(j, "stop_reason")), "tool_use");
    json_decref(j);
    resp_free(&r);
    server_stop(s);
}

TEST(test_responses_api_items_and_events) {
    script(CALL, 8, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    const char *req = "{\"model\":\"m\",\"instructions\":\"be brief\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
                      "\"input_text\",\"text\":\"show\"}]}],\"tools\":[{\"type\":\"function\",\"name\":\"read_file\",\"parameters\":"
                      "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}]%s}";
    char body[1024];
    snprintf(body, sizeof body, req, "");
    resp r = http(server_port(s), "POST", "/v1/responses", NULL, body);
    CHECK_INT(r.status, 200);
    json_t *j = body_json(&r);
    CHECK_STR(json_string_value(json_object_get(j, "object")), "response");
    CHECK_STR(json_string_value(json_object_get(j, "status")), "completed");
    json_t *out = json_object_get(j, "output");
    CHECK_INT(json_array_size(out), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(out, 0), "type")), "reasoning");
    json_t *fc = json_array_get(out, 1);
    CHECK_STR(json_string_value(json_object_get(fc, "type")), "function_call");
    CHECK_STR(json_string_value(json_object_get(fc, "name")), "read_file");
    CHECK_STR(json_string_value(json_object_get(fc, "arguments")), "{\"path\":\"123\"}");
    json_decref(j);
    resp_free(&r);

    snprintf(body, sizeof body, req, ",\"stream\":true");
    r = http(server_port(s), "POST", "/v1/responses", NULL, body);
    sbuf order = {0};
    for (const char *l = r.body; (l = strstr(l, "event: ")); l += 7) {
        const char *e = strchr(l, '\n');
        char ev[96];
        snprintf(ev, sizeof ev, "%.*s,", (int)(e - l - 7), l + 7);
        size_t el = strlen(ev);
        if (!(order.len >= el && !strcmp(order.p + order.len - el, ev) && strstr(ev, "text.delta"))) sbuf_puts(&order, ev);
    }
    CHECK_STR(sbuf_str(&order), "response.created,response.in_progress,response.output_item.added,response.reasoning_text.delta,"
                                "response.reasoning_text.done,response.output_item.done,response.output_item.added,"
                                "response.function_call_arguments.delta,response.function_call_arguments.done,response.output_item.done,"
                                "response.completed,");
    sbuf_free(&order);
    resp_free(&r);

    /* a cut turn is "incomplete" with the reason */
    snprintf(body, sizeof body, req, ",\"max_output_tokens\":5");
    r = http(server_port(s), "POST", "/v1/responses", NULL, body);
    j = body_json(&r);
    CHECK_STR(json_string_value(json_object_get(j, "status")), "incomplete");
    CHECK_STR(json_string_value(json_object_get(json_object_get(j, "incomplete_details"), "reason")), "max_output_tokens");
    json_decref(j);
    resp_free(&r);
    expect_error(server_port(s), "POST", "/v1/responses", NULL, "{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", 400,
                 "invalid_request_error", "no response state");
    server_stop(s);
}

/* Claude Code's shape: a system message inside `messages` (text blocks with cache_control), adaptive
 * thinking with display "omitted", and fields this server does not use (metadata, context
 * management, effort). Accepted on /v1/messages and /v1/messages/count_tokens; a template that
 * refuses a late system message gets it as a user turn instead of failing the request. */
static const char *CLAUDE_REQ =
    "{\"model\":\"m\",\"max_tokens\":32000,\"system\":[{\"type\":\"text\",\"text\":\"You are an agent.\",\"cache_control\":"
    "{\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"show\"}]},"
    "{\"role\":\"system\",\"content\":[{\"type\":\"text\",\"text\":\"# Environment\",\"cache_control\":{\"type\":"
    "\"ephemeral\"}}]}],\"thinking\":{\"type\":\"adaptive\",\"display\":\"omitted\"},\"metadata\":{\"user_id\":\"u\"},"
    "\"context_management\":{\"edits\":[{\"type\":\"clear_thinking_20251015\",\"keep\":\"all\"}]},\"output_config\":"
    "{\"effort\":\"high\"}%s}";

TEST(test_anthropic_accepts_system_messages_and_claude_code_fields) {
    script("secret plan\n</think>\n\nHello", 4, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    int p = server_port(s);
    char body[2048];
    snprintf(body, sizeof body, CLAUDE_REQ, "");
    resp r = http(p, "POST", "/v1/messages/count_tokens", NULL, body);
    CHECK_MSG(r.status == 200, "count_tokens: %d %s", r.status, r.body);
    json_t *j = body_json(&r);
    CHECK(json_integer_value(json_object_get(j, "input_tokens")) > 0);
    json_decref(j);
    resp_free(&r);

    r = http(p, "POST", "/v1/messages", NULL, body);
    CHECK_MSG(r.status == 200, "messages: %d %s", r.status, r.body);
    j = body_json(&r);
    json_t *content = json_object_get(j, "content");
    CHECK_INT(json_array_size(content), 2);
    CHECK_STR(json_string_value(json_object_get(json_array_get(content, 0), "type")), "thinking");
    CHECK_STR(json_string_value(json_object_get(json_array_get(content, 0), "thinking")), ""); /* display omitted */
    CHECK_STR(json_string_value(json_object_get(json_array_get(content, 1), "text")), "Hello");
    json_decref(j);
    resp_free(&r);

    /* streamed: the thinking block opens and closes without its text */
    snprintf(body, sizeof body, CLAUDE_REQ, ",\"stream\":true");
    r = http(p, "POST", "/v1/messages", NULL, body);
    CHECK_INT(r.status, 200);
    CHECK(strstr(r.body, "\"type\":\"thinking\"") != NULL);
    CHECK(strstr(r.body, "secret plan") == NULL);
    CHECK(strstr(r.body, "\"text\":\"H\"") != NULL || strstr(r.body, "Hell") != NULL);
    resp_free(&r);

    /* a template that refuses late system messages: rendered as a user turn, not a 400 */
    SB.strict_system = 1;
    snprintf(body, sizeof body, CLAUDE_REQ, "");
    r = http(p, "POST", "/v1/messages", NULL, body);
    CHECK_MSG(r.status == 200, "strict template: %d %s", r.status, r.body);
    resp_free(&r);
    SB.strict_system = 0;

    /* what would change the answer's shape is refused, naming the field */
    snprintf(body, sizeof body, CLAUDE_REQ, ",\"mcp_servers\":[{\"type\":\"url\",\"url\":\"http://x\",\"name\":\"x\"}]");
    expect_error(p, "POST", "/v1/messages", NULL, body, 400, "invalid_request_error", "mcp_servers");
    expect_error(p, "POST", "/v1/messages", NULL,
                 "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"output_config\":{\"format\":"
                 "{\"type\":\"json_schema\",\"schema\":{}}}}",
                 400, "invalid_request_error", "output_config.format");
    expect_error(p, "POST", "/v1/messages", NULL,
                 "{\"max_tokens\":5,\"messages\":[{\"role\":\"wizard\",\"content\":\"a\"}]}", 400,
                 "invalid_request_error", "\"system\"");
    server_stop(s);
}

/* A prompt over the context gets each API's own overflow error, the one its clients parse. */
TEST(test_context_overflow_wording_per_api) {
    script("x", 1, 0);
    srv_server *s = start(NULL, 0, 0, 64);
    REQUIRE(s);
    int p = server_port(s);
    const char *longtext = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    char body[512];
    snprintf(body, sizeof body, "{\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"%s\"}]}", longtext);
    resp r = http(p, "POST", "/v1/messages", NULL, body);
    CHECK_INT(r.status, 400);
    json_t *j = body_json(&r);
    json_t *e = json_object_get(j, "error");
    CHECK_STR(json_string_value(json_object_get(e, "type")), "invalid_request_error");
    const char *m = json_string_value(json_object_get(e, "message"));
    int n = 0, mx = 0;
    CHECK_MSG(m && sscanf(m, "prompt is too long: %d tokens > %d maximum", &n, &mx) == 2, "anthropic message: %s", m ? m : "-");
    CHECK(n > 64);
    CHECK_INT(mx, 63);
    json_decref(j);
    resp_free(&r);

    r = http(p, "POST", "/v1/chat/completions", NULL, body);
    j = body_json(&r);
    e = json_object_get(j, "error");
    CHECK_STR(json_string_value(json_object_get(e, "code")), "context_length_exceeded");
    CHECK_STR(json_string_value(json_object_get(e, "param")), "messages");
    m = json_string_value(json_object_get(e, "message"));
    CHECK_MSG(m && strstr(m, "maximum context length is 64 tokens"), "chat message: %s", m ? m : "-");
    json_decref(j);
    resp_free(&r);

    snprintf(body, sizeof body, "{\"max_tokens\":5,\"prompt\":\"%s\"}", longtext);
    r = http(p, "POST", "/v1/completions", NULL, body);
    j = body_json(&r);
    e = json_object_get(j, "error");
    CHECK_STR(json_string_value(json_object_get(e, "code")), "context_length_exceeded");
    CHECK_STR(json_string_value(json_object_get(e, "param")), "prompt");
    json_decref(j);
    resp_free(&r);

    snprintf(body, sizeof body, "{\"input\":\"%s\"}", longtext);
    r = http(p, "POST", "/v1/responses", NULL, body);
    CHECK_INT(r.status, 400);
    j = body_json(&r);
    e = json_object_get(j, "error");
    CHECK_STR(json_string_value(json_object_get(e, "code")), "context_length_exceeded");
    CHECK_STR(json_string_value(json_object_get(e, "param")), "input");
    m = json_string_value(json_object_get(e, "message"));
    CHECK_MSG(m && strstr(m, "input") && !strstr(m, "messages"), "responses message: %s", m ? m : "-");
    json_decref(j);
    resp_free(&r);
    server_stop(s);
}

/* --ctx larger than the backend's default is served as asked and reported, never cut. */
TEST(test_ctx_is_what_was_asked) {
    script("ok", 1, 0);
    srv_server *s = start(NULL, 0, 0, 3 * BE.ctx);
    REQUIRE(s);
    int p = server_port(s);
    resp r = http(p, "GET", "/health", NULL, NULL);
    json_t *j = body_json(&r);
    CHECK_INT(json_integer_value(json_object_get(j, "context")), 3 * BE.ctx);
    json_decref(j);
    resp_free(&r);
    r = http(p, "GET", "/v1/models", NULL, NULL);
    j = body_json(&r);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(json_object_get(j, "data"), 0), "context_length")), 3 * BE.ctx);
    json_decref(j);
    resp_free(&r);
    /* a prompt longer than the backend's default context fits */
    size_t n = (size_t)BE.ctx + 500;
    char *big = malloc(n + 128);
    int k = sprintf(big, "{\"prompt\":\"");
    memset(big + k, 'a', n);
    sprintf(big + k + n, "\",\"max_tokens\":2}");
    r = http(p, "POST", "/v1/completions", NULL, big);
    CHECK_MSG(r.status == 200, "long prompt: %d %s", r.status, r.body);
    resp_free(&r);
    free(big);
    server_stop(s);
}

/* Streamed Responses items carry the same ids in their events and in response.completed. */
TEST(test_responses_stream_ids_match_final) {
    script("think\n</think>\n\nsome text<tool_call>\n<function=read_file>\n<parameter=path>\n1\n</parameter>\n</function>\n</tool_call>",
           5, 1);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    const char *req = "{\"input\":\"show\",\"stream\":true,\"tools\":[{\"type\":\"function\",\"name\":\"read_file\","
                      "\"parameters\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}]}";
    resp r = http(server_port(s), "POST", "/v1/responses", NULL, req);
    CHECK_INT(r.status, 200);
    json_t *streamed = json_array(), *final = NULL;
    for (const char *l = r.body; (l = strstr(l, "data: ")); l += 6) {
        const char *e = strchr(l, '\n');
        json_error_t je;
        json_t *ev = json_loadb(l + 6, (size_t)(e - l - 6), 0, &je);
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (type && !strcmp(type, "response.output_item.done"))
            json_array_append(streamed, json_object_get(json_object_get(ev, "item"), "id"));
        if (type && !strcmp(type, "response.completed")) final = json_incref(json_object_get(json_object_get(ev, "response"), "output"));
        json_decref(ev);
    }
    REQUIRE(final);
    CHECK_INT(json_array_size(streamed), 3);
    CHECK_INT(json_array_size(final), json_array_size(streamed));
    for (size_t i = 0; i < json_array_size(streamed) && i < json_array_size(final); i++)
        CHECK_STR(json_string_value(json_object_get(json_array_get(final, i), "id")), json_string_value(json_array_get(streamed, i)));
    json_decref(streamed);
    json_decref(final);
    resp_free(&r);
    server_stop(s);
}

/* A stream that delivered everything ([DONE]) is not a cancel when the client hangs up right
 * after, even if the worker is still tidying up (the decoder free is slowed down here). */
TEST(test_completed_stream_then_hangup_is_not_cancelled) {
    script("all of it", 3, 0);
    SB.free_delay_us = 700000;
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    int p = server_port(s);
    int fd = connect_port(p);
    char *b = chat_body(",\"stream\":true");
    send_req(fd, "POST", "/v1/chat/completions", NULL, b, strlen(b));
    sbuf got = {0};
    char buf[4096];
    ssize_t k;
    while (!strstr(sbuf_str(&got), "data: [DONE]") && (k = read(fd, buf, sizeof buf)) > 0) sbuf_append(&got, buf, (size_t)k);
    CHECK(strstr(sbuf_str(&got), "data: [DONE]") != NULL);
    close(fd); /* hang up at once */
    for (int i = 0; i < 200 && metric(p, "mtplx_generations_total") < 1; i++) usleep(10000);
    CHECK_INT(metric(p, "mtplx_generations_total"), 1);
    CHECK_INT(metric(p, "mtplx_generations_cancelled_total"), 0);
    SB.free_delay_us = 0;
    sbuf_free(&got);
    free(b);
    server_stop(s);
}

/* Refused requests and ignored fields leave log lines; libmicrohttpd prints no option warning. */
TEST(test_log_lines_for_refusals_and_ignored_fields) {
    script("x", 1, 0);
    fflush(stderr);
    char path[] = "/tmp/mtplx_test_server_log_XXXXXX";
    int lfd = mkstemp(path);
    REQUIRE(lfd >= 0);
    int saved = dup(2);
    dup2(lfd, 2);
    srv_config c;
    server_config_default(&c);
    c.port = 0;
    c.quiet = 0;
    srv_server *s = NULL;
    mtplx_err e = {0};
    int rc = server_start(&c, &BE, &s, &e);
    if (!rc) {
        resp r = http(server_port(s), "POST", "/v1/chat/completions", NULL, "{\"messages\":3}");
        resp_free(&r);
        r = http(server_port(s), "POST", "/v1/messages", NULL,
                 "{\"max_tokens\":2,\"metadata\":{},\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}");
        resp_free(&r);
        server_stop(s);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    REQUIRE(rc == 0);
    FILE *f = fopen(path, "r");
    char log[8192] = "";
    size_t n = f ? fread(log, 1, sizeof log - 1, f) : 0;
    log[n] = 0;
    if (f) fclose(f);
    close(lfd);
    unlink(path);
    CHECK_MSG(strstr(log, "POST /v1/chat/completions -> 400 invalid_request_error: 'messages'") != NULL, "log: %s", log);
    CHECK_MSG(strstr(log, "POST /v1/messages: ignoring request fields metadata") != NULL, "log: %s", log);
    CHECK_MSG(strstr(log, "MHD_OPTION_EXTERNAL_LOGGER") == NULL, "log: %s", log);
}

/* --max-tokens caps what a client asks for, --temperature is the default a request can override;
 * deferred (tool-search) tools stay out of the prompt. */
TEST(test_server_max_tokens_temperature_and_deferred_tools) {
    script("abcdefgh", 1, 0);
    srv_config c;
    server_config_default(&c);
    c.port = 0;
    c.quiet = 1;
    c.max_tokens = 3;
    c.temperature = 0;
    srv_server *s = NULL;
    mtplx_err e = {0};
    REQUIRE(server_start(&c, &BE, &s, &e) == 0);
    const char *req = "{\"max_tokens\":32000,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[{\"name\":\"Ghost\","
                      "\"defer_loading\":true,\"input_schema\":{\"type\":\"object\"}},{\"name\":\"Read\",\"input_schema\":{}}]}";
    resp r = http(server_port(s), "POST", "/v1/messages", NULL, req);
    json_t *j = body_json(&r);
    CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(j, "content"), 0), "text")), "abc");
    CHECK_STR(json_string_value(json_object_get(j, "stop_reason")), "max_tokens");
    CHECK(SB.last_temperature == 0.0f); /* --temperature 0 for a request that sends none */
    json_decref(j);
    resp_free(&r);
    r = http(server_port(s), "POST", "/v1/chat/completions", NULL, "{\"temperature\":0.7,\"messages\":[{\"role\":\"user\",\"content\":\"a\"}]}");
    CHECK_INT(r.status, 200);
    CHECK(SB.last_temperature == 0.7f); /* the request's own value wins */
    resp_free(&r);
    r = http(server_port(s), "POST", "/v1/messages/count_tokens", NULL, req);
    j = body_json(&r);
    long long with_deferred = json_integer_value(json_object_get(j, "input_tokens"));
    json_decref(j);
    resp_free(&r);
    const char *req2 = "{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"tools\":[{\"name\":\"Read\",\"input_schema\":{}}]}";
    r = http(server_port(s), "POST", "/v1/messages/count_tokens", NULL, req2);
    j = body_json(&r);
    /* the scripted template renders only the messages, so the counts match only if Ghost never reached it */
    CHECK_INT(json_integer_value(json_object_get(j, "input_tokens")), with_deferred);
    json_decref(j);
    resp_free(&r);
    server_stop(s);
}

/* $MTPLX_SSE_TRACE (srv_config.sse_trace): a streamed request's bytes appear once as the worker's
 * hand-offs ('f') and once as socket writes ('w'), both adding up to the body the client got; a
 * non-streamed request writes no line; an unwritable path refuses to start. */
TEST(test_delivery_trace_counts_every_streamed_byte) {
    script("def f():\n    return 1\n", 3, 0);
    char path[] = "/tmp/mtplx-sse-trace-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    srv_config c;
    server_config_default(&c);
    c.port = 0, c.quiet = 1, c.sse_trace = path;
    srv_server *s = NULL;
    mtplx_err e = {0};
    REQUIRE(server_start(&c, &BE, &s, &e) == 0);
    resp r = http(server_port(s), "POST", "/v1/completions", NULL, "{\"prompt\":\"def\",\"max_tokens\":100}");
    CHECK_INT(r.status, 200);
    resp_free(&r);
    r = http(server_port(s), "POST", "/v1/completions", NULL, "{\"prompt\":\"def\",\"max_tokens\":6,\"stream\":true}");
    CHECK_INT(r.status, 200);
    size_t body = strlen(r.body);
    resp_free(&r);
    server_stop(s);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    char line[256];
    size_t fb = 0, wb = 0;
    int nf = 0, nw = 0, other = 0;
    double last = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        double t;
        char kind;
        unsigned long job;
        size_t n;
        CHECK_MSG(sscanf(line, "%lf %c %lu %zu", &t, &kind, &job, &n) == 4, "bad trace line: %s", line);
        CHECK_MSG(t >= last, "time went back: %s", line);
        last = t;
        if (job != 1) other++; /* the streamed request was the second: number 1 */
        if (kind == 'f') fb += n, nf++;
        else if (kind == 'w') wb += n, nw++;
        else other++;
    }
    fclose(f);
    unlink(path);
    CHECK(nf > 1 && nw >= 1);
    CHECK_INT(other, 0);
    CHECK_INT((long long)fb, (long long)body);
    CHECK_INT((long long)wb, (long long)body);
    c.sse_trace = "/nonexistent-mtplx-dir/trace.txt";
    CHECK(server_start(&c, &BE, &s, &e) == MTPLX_EIO);
    CHECK(strstr(e.msg, "delivery trace") != NULL);
}

TEST(test_health_models_metrics) {
    script("x", 1, 0);
    srv_server *s = start(NULL, 0, 0, 0);
    REQUIRE(s);
    int p = server_port(s);
    resp r = http(p, "GET", "/health", NULL, NULL);
    json_t *j = body_json(&r);
    CHECK_STR(json_string_value(json_object_get(j, "model")), "scripted");
    CHECK(json_is_object(json_object_get(j, "queue")));
    CHECK(json_is_number(json_object_get(j, "uptime_s")));
    json_decref(j);
    resp_free(&r);
    r = http(p, "GET", "/v1/models/scripted", NULL, NULL);
    CHECK_INT(r.status, 200);
    resp_free(&r);
    r = http(p, "GET", "/v1/models/other", NULL, NULL);
    CHECK_INT(r.status, 404);
    resp_free(&r);
    r = http(p, "POST", "/v1/messages/count_tokens", NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}");
    CHECK_INT(r.status, 200);
    j = body_json(&r);
    /* the scripted backend's prompt is the JSON of the messages, one token per byte */
    CHECK_INT(json_integer_value(json_object_get(j, "input_tokens")), (int)strlen("[{\"role\":\"user\",\"content\":\"hi\"}]"));
    json_decref(j);
    resp_free(&r);
    r = http(p, "GET", "/metrics", NULL, NULL);
    CHECK(strstr(r.headers, "text/plain") != NULL);
    CHECK(strstr(r.body, "# TYPE mtplx_requests_total counter") != NULL);
    CHECK(strstr(r.body, "mtplx_requests_total{endpoint=\"health\"} 1") != NULL);
    resp_free(&r);
    server_stop(s);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(test_chat_nonstream_splits_reasoning_and_reports_usage);
    RUN(test_stream_text_equals_nonstream_text);
    RUN(test_stop_string_across_tokens_never_emitted);
    RUN(test_tool_call_stream_and_nonstream);
    RUN(test_utf8_deltas_complete_and_invalid_bytes_replaced);
    RUN(test_completions_endpoint);
    RUN(test_bad_requests_get_api_shaped_errors);
    RUN(test_api_key_required_and_checked);
    RUN(test_non_loopback_bind_refused_without_key);
    RUN(test_disconnect_cancels_and_next_request_works);
    RUN(test_queue_full_answers_429_with_retry_after);
    RUN(test_anthropic_stream_event_order_and_blocks);
    RUN(test_responses_api_items_and_events);
    RUN(test_anthropic_accepts_system_messages_and_claude_code_fields);
    RUN(test_context_overflow_wording_per_api);
    RUN(test_ctx_is_what_was_asked);
    RUN(test_responses_stream_ids_match_final);
    RUN(test_completed_stream_then_hangup_is_not_cancelled);
    RUN(test_log_lines_for_refusals_and_ignored_fields);
    RUN(test_server_max_tokens_temperature_and_deferred_tools);
    RUN(test_health_models_metrics);
    RUN(test_delivery_trace_counts_every_streamed_byte);
    return TEST_SUMMARY();
}
