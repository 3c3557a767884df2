/* openai.c — OpenAI Chat Completions and Completions: request validation into a job, and response
 * formatting (chat.completion / chat.completion.chunk / text_completion). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sse.h"

/* ---- requests ---- */

/* Content of a message as text: a string, null, or an array of text parts joined with "\n". */
static int content_text(const json_t *c, const char *where, json_t **out, srv_reqerr *e) {
    if (!c || json_is_null(c)) {
        *out = json_null();
        return 0;
    }
    if (json_is_string(c)) {
        *out = json_incref((json_t *)c);
        return 0;
    }
    if (!json_is_array(c)) return reqerr(e, 400, where, "'%s' must be a string, an array of content parts or null", where);
    sbuf b = {0};
    size_t i;
    const json_t *part;
    int first = 1;
    json_array_foreach(c, i, part) {
        const json_t *ty = json_object_get(part, "type");
        const json_t *tx = json_object_get(part, "text");
        if (json_is_string(part)) tx = part;
        else if (!json_is_object(part) || (ty && !json_is_string(ty)))
            return sbuf_free(&b), reqerr(e, 400, where, "'%s[%zu]' must be a content part object", where, i);
        else if (ty && strcmp(json_string_value(ty), "text") != 0)
            return sbuf_free(&b), reqerr(e, 400, where, "'%s[%zu]': content parts of type '%s' are not supported (text only)",
                                         where, i, json_string_value(ty));
        if (!json_is_string(tx)) return sbuf_free(&b), reqerr(e, 400, where, "'%s[%zu].text' must be a string", where, i);
        if (!first) sbuf_puts(&b, "\n");
        sbuf_append(&b, json_string_value(tx), json_string_length(tx));
        first = 0;
    }
    *out = json_stringn(sbuf_str(&b), b.len);
    sbuf_free(&b);
    return *out ? 0 : reqerr(e, 400, where, "'%s' is not valid UTF-8", where);
}

/* Validate OpenAI tools; returns a new array (or NULL when empty). */
static int parse_tools(const json_t *tools, json_t **out, srv_reqerr *e) {
    *out = NULL;
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools)) return reqerr(e, 400, "tools", "'tools' must be an array");
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        if (!json_is_object(t)) return reqerr(e, 400, "tools", "'tools[%zu]' must be an object", i);
        const json_t *ty = json_object_get(t, "type");
        if (ty && (!json_is_string(ty) || strcmp(json_string_value(ty), "function") != 0))
            return reqerr(e, 400, "tools", "'tools[%zu].type' must be \"function\"", i);
        const json_t *f = json_object_get(t, "function");
        if (!json_is_object(f)) return reqerr(e, 400, "tools", "'tools[%zu].function' must be an object", i);
        const json_t *nm = json_object_get(f, "name");
        if (!json_is_string(nm) || json_string_length(nm) == 0)
            return reqerr(e, 400, "tools", "'tools[%zu].function.name' must be a non-empty string", i);
        const json_t *pa = json_object_get(f, "parameters");
        if (pa && !json_is_null(pa) && !json_is_object(pa))
            return reqerr(e, 400, "tools", "'tools[%zu].function.parameters' must be an object", i);
    }
    if (json_array_size(tools) == 0) return 0;
    *out = json_deep_copy(tools);
    return 0;
}

static int parse_common(const json_t *body, srv_backend *be, srv_job *j, srv_reqerr *e) {
    long long i;
    int r;
    if (parse_sampling(body, be, &j->params, e)) return -1;
    const json_t *n = json_object_get(body, "n");
    if (n && !json_is_null(n) && !(json_is_integer(n) && json_integer_value(n) == 1))
        return reqerr(e, 400, "n", "'n' must be 1: this server generates one choice per request");
    const json_t *lp = json_object_get(body, "logprobs");
    if (lp && !json_is_null(lp) && !json_is_false(lp))
        return reqerr(e, 400, "logprobs", "'logprobs' is not supported by this server");
    const json_t *tlp = json_object_get(body, "top_logprobs");
    if (tlp && !json_is_null(tlp)) return reqerr(e, 400, "top_logprobs", "'top_logprobs' is not supported by this server");
    const json_t *lb = json_object_get(body, "logit_bias");
    if (lb && !json_is_null(lb) && !(json_is_object(lb) && json_object_size(lb) == 0))
        return reqerr(e, 400, "logit_bias", "'logit_bias' is not supported by this server");
    if ((r = get_bool(body, "stream", &j->stream, e)) < 0) return -1;
    const json_t *so = json_object_get(body, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) return reqerr(e, 400, "stream_options", "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &j->include_usage, e) < 0) return -1;
    }
    long long mt = j->params.max_tokens;
    if ((r = get_int(body, "max_tokens", &i, 1, 1 << 30, e)) < 0) return -1;
    if (r) mt = i;
    if ((r = get_int(body, "max_completion_tokens", &i, 1, 1 << 30, e)) < 0) return -1;
    if (r && !mt) mt = i;
    j->params.max_tokens = (int)mt;  /* 0: the rest of the context, set once the prompt is known */
    return parse_stops(json_object_get(body, "stop"), "stop", j, e);
}

int openai_parse_chat(const json_t *body, srv_backend *be, srv_job *j, json_t **render_req, int *enable_thinking,
                      srv_reqerr *e) {
    *render_req = NULL;
    *enable_thinking = -1;
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs)) return reqerr(e, 400, "messages", "'messages' is required and must be an array");
    if (json_array_size(msgs) == 0) return reqerr(e, 400, "messages", "'messages' must not be empty");
    if (parse_common(body, be, j, e)) return -1;

    json_t *tools = NULL;
    if (parse_tools(json_object_get(body, "tools"), &tools, e)) return -1;
    const json_t *tc = json_object_get(body, "tool_choice");
    if (tc && !json_is_null(tc)) {
        if (json_is_string(tc)) {
            const char *v = json_string_value(tc);
            if (strcmp(v, "none") && strcmp(v, "auto") && strcmp(v, "required"))
                return json_decref(tools), reqerr(e, 400, "tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or a function object");
            if (!strcmp(v, "none")) json_decref(tools), tools = NULL;
        } else if (!json_is_object(tc)) {
            return json_decref(tools), reqerr(e, 400, "tool_choice", "'tool_choice' must be a string or an object");
        }
    }

    json_t *out_msgs = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        char where[64];
        snprintf(where, sizeof where, "messages[%zu]", i);
        if (!json_is_object(m)) return json_decref(tools), json_decref(out_msgs), reqerr(e, 400, where, "'%s' must be an object", where);
        const json_t *role = json_object_get(m, "role");
        if (!json_is_string(role))
            return json_decref(tools), json_decref(out_msgs), reqerr(e, 400, where, "'%s.role' must be a string", where);
        const char *r = json_string_value(role);
        if (strcmp(r, "system") && strcmp(r, "developer") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool"))
            return json_decref(tools), json_decref(out_msgs),
                   reqerr(e, 400, where, "'%s.role' must be system, developer, user, assistant or tool; got '%s'", where, r);
        json_t *copy = json_deep_copy(m);
        if (!strcmp(r, "developer")) json_object_set_new(copy, "role", json_string("system"));
        snprintf(where, sizeof where, "messages[%zu].content", i);
        json_t *text;
        if (content_text(json_object_get(m, "content"), where, &text, e))
            return json_decref(copy), json_decref(tools), json_decref(out_msgs), -1;
        if (json_is_null(text) && strcmp(r, "assistant") != 0) {
            json_decref(text);
            text = json_string("");
        }
        json_object_set_new(copy, "content", text);
        const json_t *calls = json_object_get(m, "tool_calls");
        if (calls && !json_is_null(calls) && !json_is_array(calls))
            return json_decref(copy), json_decref(tools), json_decref(out_msgs),
                   reqerr(e, 400, where, "'messages[%zu].tool_calls' must be an array", i);
        json_array_append_new(out_msgs, copy);
    }

    const json_t *kw = json_object_get(body, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw))
            return json_decref(tools), json_decref(out_msgs), reqerr(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object");
        const json_t *et = json_object_get(kw, "enable_thinking");
        if (et && !json_is_boolean(et))
            return json_decref(tools), json_decref(out_msgs),
                   reqerr(e, 400, "chat_template_kwargs.enable_thinking", "'chat_template_kwargs.enable_thinking' must be a boolean");
        if (et) *enable_thinking = json_is_true(et);
    }
    int et;
    if (get_bool(body, "enable_thinking", &et, e) < 0) return json_decref(tools), json_decref(out_msgs), -1;
    else if (json_is_boolean(json_object_get(body, "enable_thinking"))) *enable_thinking = et;
    const json_t *re = json_object_get(body, "reasoning_effort");
    if (re && !json_is_null(re)) {
        const char *v = json_is_string(re) ? json_string_value(re) : "";
        if (!strcmp(v, "none") || !strcmp(v, "minimal")) *enable_thinking = 0;
        else if (!strcmp(v, "low") || !strcmp(v, "medium") || !strcmp(v, "high")) {
            if (*enable_thinking < 0) *enable_thinking = 1;
        } else
            return json_decref(tools), json_decref(out_msgs),
                   reqerr(e, 400, "reasoning_effort", "'reasoning_effort' must be none, minimal, low, medium or high");
    }

    json_t *req = json_object();
    json_object_set_new(req, "messages", out_msgs);
    if (tools) json_object_set(req, "tools", tools);
    if (kw && json_is_object(kw)) json_object_set_new(req, "chat_template_kwargs", json_deep_copy(kw));
    j->tools = tools;
    j->api = API_CHAT;
    j->split_reasoning = 1;
    *render_req = req;
    if (structured_parse(body, be, j, e)) {
        json_decref(req);
        *render_req = NULL;
        return -1;
    }
    return 0;
}

int openai_parse_completion(const json_t *body, srv_backend *be, srv_job *j, char **prompt_text, srv_reqerr *e) {
    *prompt_text = NULL;
    const json_t *p = json_object_get(body, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
    if (!json_is_string(p)) return reqerr(e, 400, "prompt", "'prompt' is required and must be a string");
    const json_t *echo = json_object_get(body, "echo");
    if (json_is_true(echo)) return reqerr(e, 400, "echo", "'echo' is not supported by this server");
    const json_t *bo = json_object_get(body, "best_of");
    if (bo && !json_is_null(bo) && !(json_is_integer(bo) && json_integer_value(bo) == 1))
        return reqerr(e, 400, "best_of", "'best_of' must be 1");
    const json_t *sfx = json_object_get(body, "suffix");
    if (sfx && !json_is_null(sfx)) return reqerr(e, 400, "suffix", "'suffix' is not supported by this server");
    if (parse_common(body, be, j, e)) return -1;
    if (!j->params.max_tokens) j->params.max_tokens = 16; /* the OpenAI default for completions */
    j->api = API_COMPLETIONS;
    j->split_reasoning = 0;
    *prompt_text = strdup(json_string_value(p));
    return *prompt_text ? 0 : reqerr(e, 500, "prompt", "out of memory");
}

/* ---- streaming ---- */

static json_t *chunk(const srv_job *j, json_t *choice) {
    json_t *choices = json_array();
    if (choice) json_array_append_new(choices, choice);
    return json_pack("{s:s,s:s,s:I,s:s,s:o}", "id", j->id, "object",
                     j->api == API_CHAT ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created,
                     "model", j->model_id, "choices", choices);
}

int openai_begin(srv_job *j) {
    if (j->api != API_CHAT) return 0;
    json_t *delta = json_pack("{s:s,s:s}", "role", "assistant", "content", "");
    return sse_data(&j->stage, chunk(j, json_pack("{s:i,s:o,s:n,s:n}", "index", 0, "delta", delta, "logprobs", "finish_reason")));
}

int openai_delta(srv_job *j, int is_reasoning, const char *s, size_t n) {
    json_t *text = json_stringn(s, n);
    if (!text) return -1;
    json_t *choice;
    if (j->api == API_CHAT)
        choice = json_pack("{s:i,s:{s:o},s:n,s:n}", "index", 0, "delta", is_reasoning ? "reasoning_content" : "content", text,
                           "logprobs", "finish_reason");
    else
        choice = json_pack("{s:i,s:o,s:n,s:n}", "index", 0, "text", text, "logprobs", "finish_reason");
    return sse_data(&j->stage, chunk(j, choice));
}

static json_t *call_json(const srv_call *c, int index, int with_index) {
    json_t *o = json_pack("{s:s,s:s,s:{s:s,s:s}}", "id", c->id, "type", "function", "function", "name", c->name, "arguments",
                          c->arguments);
    if (with_index) json_object_set_new(o, "index", json_integer(index));
    return o;
}

int openai_tool_call(srv_job *j, const srv_call *c, int index) {
    if (j->api != API_CHAT) return 0;
    json_t *delta = json_pack("{s:[o]}", "tool_calls", call_json(c, index, 1));
    return sse_data(&j->stage, chunk(j, json_pack("{s:i,s:o,s:n,s:n}", "index", 0, "delta", delta, "logprobs", "finish_reason")));
}

int openai_end(srv_job *j) {
    int rc = 0;
    if (j->failed) {
        json_t *ch = chunk(j, json_pack("{s:i,s:{},s:n,s:s}", "index", 0, "delta", "logprobs", "finish_reason", "error"));
        json_object_set_new(ch, "error", json_pack("{s:s,s:s,s:s}", "message", j->err.msg, "type", "server_error", "code",
                                                   err_code_name(j->err.code)));
        rc = sse_data(&j->stage, ch);
    } else {
        json_t *choice = j->api == API_CHAT
                             ? json_pack("{s:i,s:{},s:n,s:s}", "index", 0, "delta", "logprobs", "finish_reason", j->finish)
                             : json_pack("{s:i,s:s,s:n,s:s}", "index", 0, "text", "", "logprobs", "finish_reason", j->finish);
        json_t *ch = chunk(j, choice);
        json_object_set_new(ch, "mtplx", job_stats_json(j));
        rc = sse_data(&j->stage, ch);
        if (!rc && j->include_usage) {
            json_t *u = chunk(j, NULL);
            json_object_set_new(u, "usage", job_usage_json(j));
            rc = sse_data(&j->stage, u);
        }
    }
    return rc || sbuf_puts(&j->stage, "data: [DONE]\n\n") ? -1 : 0;
}

/* ---- non-streaming ---- */

char *openai_chat_body(const srv_job *j) {
    json_t *msg = json_pack("{s:s}", "role", "assistant");
    if (j->content.len || !j->n_calls) json_object_set_new(msg, "content", json_stringn(sbuf_str(&j->content), j->content.len));
    else json_object_set_new(msg, "content", json_null());
    if (j->reasoning.len) json_object_set_new(msg, "reasoning_content", json_stringn(sbuf_str(&j->reasoning), j->reasoning.len));
    if (j->n_calls) {
        json_t *calls = json_array();
        for (int i = 0; i < j->n_calls; i++) json_array_append_new(calls, call_json(&j->calls[i], i, 0));
        json_object_set_new(msg, "tool_calls", calls);
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:o,s:n,s:s}],s:o,s:o}", "id", j->id, "object", "chat.completion", "created",
                          (json_int_t)j->created, "model", j->model_id, "choices", "index", 0, "message", msg, "logprobs",
                          "finish_reason", j->finish, "usage", job_usage_json(j), "mtplx", job_stats_json(j));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

char *openai_completion_body(const srv_job *j) {
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:[{s:i,s:s%,s:n,s:s}],s:o,s:o}", "id", j->id, "object", "text_completion",
                          "created", (json_int_t)j->created, "model", j->model_id, "choices", "index", 0, "text",
                          sbuf_str(&j->content), j->content.len, "logprobs", "finish_reason", j->finish, "usage",
                          job_usage_json(j), "mtplx", job_stats_json(j));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
