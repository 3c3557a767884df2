/* sse.c — Server-Sent Events framing, event dispatch to the API formatters, and helpers shared by
 * the OpenAI and Anthropic files (usage/stats objects, ids, request errors, sampler fields). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "internal.h"
#include "sse.h"

/* Undo a partly appended frame: b back to its first `len` bytes. A client must never receive half a
 * frame (the fault-injection sweep, tests/fault/sweep.py, found "data: {..." cut by a failed append). */
static int frame_undo(sbuf *b, size_t len) {
    if (b->p && b->len > len) b->len = len, b->p[len] = 0;
    return -1;
}

int sse_data(sbuf *b, json_t *obj) {
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    if (!s) return -1;
    size_t len0 = b->len;
    int rc = sbuf_puts(b, "data: ") || sbuf_puts(b, s) || sbuf_puts(b, "\n\n");
    free(s);
    return rc ? frame_undo(b, len0) : 0;
}

int sse_event(sbuf *b, const char *name, json_t *obj) {
    size_t len0 = b->len;
    if (sbuf_printf(b, "event: %s\n", name)) {
        json_decref(obj);
        return frame_undo(b, len0);
    }
    return sse_data(b, obj) ? frame_undo(b, len0) : 0;
}

/* ---- dispatch ---- */

int fmt_begin(srv_job *j) {
    if (!j->stream) return 0;
    return j->api == API_MESSAGES ? anthropic_begin(j) : j->api == API_RESPONSES ? responses_begin(j) : openai_begin(j);
}

int fmt_reasoning(srv_job *j, const char *s, size_t n) {
    if (!j->stream) return 0;
    return j->api == API_MESSAGES ? anthropic_delta(j, 1, s, n) : j->api == API_RESPONSES ? responses_delta(j, 1, s, n) : openai_delta(j, 1, s, n);
}

int fmt_content(srv_job *j, const char *s, size_t n) {
    if (!j->stream) return 0;
    return j->api == API_MESSAGES ? anthropic_delta(j, 0, s, n) : j->api == API_RESPONSES ? responses_delta(j, 0, s, n) : openai_delta(j, 0, s, n);
}

int fmt_tool_call(srv_job *j, const srv_call *c, int index) {
    if (!j->stream) return 0;
    return j->api == API_MESSAGES ? anthropic_tool_call(j, c, index) : j->api == API_RESPONSES ? responses_tool_call(j, c, index) : openai_tool_call(j, c, index);
}

int fmt_end(srv_job *j) {
    if (!j->stream) return 0;
    return j->api == API_MESSAGES ? anthropic_end(j) : j->api == API_RESPONSES ? responses_end(j) : openai_end(j);
}

/* ---- shared objects ---- */

json_t *job_usage_json(const srv_job *j) {
    int c = j->stats.completion_tokens ? j->stats.completion_tokens : j->n_completion;
    return json_pack("{s:i,s:i,s:i,s:{s:i}}", "prompt_tokens", j->n_prompt, "completion_tokens", c, "total_tokens",
                     j->n_prompt + c, "prompt_tokens_details", "cached_tokens", j->stats.cached_tokens);
}

json_t *job_stats_json(const srv_job *j) {
    const gen_stats *s = &j->stats;
    json_t *acc = json_array();
    for (int d = 0; d < s->depth && d < GEN_MAX_DEPTH; d++) json_array_append_new(acc, json_integer(s->accepted_per_position[d]));
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    return json_pack("{s:s,s:i,s:f,s:i,s:i,s:o,s:f,s:f,s:f,s:f,s:s*}", "seed", seed, "depth", s->depth,
                     "draft_min_conf", round((double)s->draft_min_conf * 1e4) / 1e4, "cycles", s->cycles,
                     "drafted", s->drafted, "accepted_per_position", acc, "acceptance_rate",
                     isfinite(s->acceptance_rate) ? s->acceptance_rate : 0.0, "tokens_per_verify",
                     isfinite(s->tokens_per_verify) ? s->tokens_per_verify : 0.0, "prefill_tok_s",
                     isfinite(s->prefill_tok_s) ? s->prefill_tok_s : 0.0, "decode_tok_s",
                     isfinite(s->decode_tok_s) ? s->decode_tok_s : 0.0, "stop_sequence",
                     j->stop_hit ? j->stops[j->stop_hit - 1] : NULL);
}

void srv_random_hex(char *out, int n_hex) {
    unsigned char b[64];
    int nb = (n_hex + 1) / 2;
    if (nb > (int)sizeof b) nb = sizeof b;
    if (getrandom(b, (size_t)nb, 0) != nb) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 6364136223846793005ull + (uint64_t)ts.tv_sec;
        for (int i = 0; i < nb; i++) x = x * 6364136223846793005ull + 1442695040888963407ull, b[i] = (unsigned char)(x >> 56);
    }
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < n_hex; i++) out[i] = hx[(b[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
    out[n_hex] = 0;
}

int reqerr(srv_reqerr *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- typed field access ---- */

int get_number(const json_t *o, const char *key, double *out, double lo, double hi, int lo_open, srv_reqerr *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return reqerr(e, 400, key, "'%s' must be a number", key);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi || (lo_open && x == lo))
        return reqerr(e, 400, key, "'%s' must be in %s%g, %g]; got %g", key, lo_open ? "(" : "[", lo, hi, x);
    *out = x;
    return 1;
}

int get_int(const json_t *o, const char *key, long long *out, long long lo, long long hi, srv_reqerr *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return reqerr(e, 400, key, "'%s' must be an integer", key);
    long long x = json_integer_value(v);
    if (x < lo || x > hi) return reqerr(e, 400, key, "'%s' must be between %lld and %lld; got %lld", key, lo, hi, x);
    *out = x;
    return 1;
}

int get_bool(const json_t *o, const char *key, int *out, srv_reqerr *e) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return reqerr(e, 400, key, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return 1;
}

int parse_sampling(const json_t *body, srv_backend *be, gen_params *p, srv_reqerr *e) {
    double x;
    long long i;
    int r;
    if ((r = get_number(body, "temperature", &x, 0, 2, 0, e)) < 0) return -1;
    if (r) p->temperature = (float)x;
    if ((r = get_number(body, "top_p", &x, 0, 1, 1, e)) < 0) return -1;
    if (r) p->top_p = (float)x;
    if ((r = get_int(body, "top_k", &i, -1, 1 << 30, e)) < 0) return -1;
    if (r) p->top_k = i < 0 ? 0 : (int)i;
    if ((r = get_number(body, "min_p", &x, 0, 1, 0, e)) < 0) return -1;
    if (r) {
        if (x >= 1) return reqerr(e, 400, "min_p", "'min_p' must be in [0, 1); got %g", x);
        p->min_p = (float)x;
    }
    if ((r = get_number(body, "presence_penalty", &x, -2, 2, 0, e)) < 0) return -1;
    if (r) p->presence_penalty = (float)x;
    if ((r = get_number(body, "frequency_penalty", &x, -2, 2, 0, e)) < 0) return -1;
    if (r) p->frequency_penalty = (float)x;
    if ((r = get_number(body, "repetition_penalty", &x, 0, 10, 1, e)) < 0) return -1;
    if (r) p->repetition_penalty = (float)x;
    const json_t *seed = json_object_get(body, "seed");
    if (seed && !json_is_null(seed)) {
        if (!json_is_integer(seed)) return reqerr(e, 400, "seed", "'seed' must be an integer");
        p->seed = (uint64_t)json_integer_value(seed);
        p->seed_set = 1;
    }
    const json_t *m = json_object_get(body, "mtplx");
    if (m && !json_is_null(m)) {
        if (!json_is_object(m))
            return reqerr(e, 400, "mtplx", "'mtplx' must be an object like {\"depth\": 2, \"draft_min_conf\": 0.4}");
        if ((r = get_int(m, "depth", &i, 0, be->max_depth, e)) < 0) {
            snprintf(e->param, sizeof e->param, "mtplx.depth");
            snprintf(e->msg, sizeof e->msg, "'mtplx.depth' must be an integer between 0 and %d (this model's largest MTP depth)",
                     be->max_depth);
            return -1;
        }
        if (r) p->depth = (int)i;
        if ((r = get_number(m, "draft_min_conf", &x, 0, 1, 0, e)) < 0 || (r && x >= 1)) {
            snprintf(e->param, sizeof e->param, "mtplx.draft_min_conf");
            snprintf(e->msg, sizeof e->msg, "'mtplx.draft_min_conf' must be a number in [0, 1) (0: a fixed depth)");
            e->status = 400;
            return -1;
        }
        if (r) p->draft_min_conf = (float)x;
    }
    return 0;
}

/* stop: a string or an array of at most SRV_MAX_STOPS non-empty strings. */
int parse_stops(const json_t *v, const char *name, srv_job *j, srv_reqerr *e) {
    if (!v || json_is_null(v)) return 0;
    const json_t *one = v;
    size_t n = 1;
    if (json_is_array(v)) n = json_array_size(v);
    else if (!json_is_string(v)) return reqerr(e, 400, name, "'%s' must be a string or an array of strings", name);
    if (n > SRV_MAX_STOPS) return reqerr(e, 400, name, "'%s' may hold at most %d strings; got %zu", name, SRV_MAX_STOPS, n);
    for (size_t k = 0; k < n; k++) {
        if (json_is_array(v)) one = json_array_get(v, k);
        if (!json_is_string(one)) return reqerr(e, 400, name, "'%s' must be a string or an array of strings", name);
        if (json_string_length(one) == 0) continue;
        if (json_string_length(one) > 1024) return reqerr(e, 400, name, "'%s' strings are limited to 1024 bytes", name);
        char *s = strdup(json_string_value(one));
        if (!s) return reqerr(e, 500, name, "out of memory");
        j->stops[j->n_stops++] = s;
    }
    return 0;
}
