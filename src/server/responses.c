/* responses.c — OpenAI Responses API (POST /v1/responses), stateless: the request's `input` items
 * and `instructions` become a chat request for the template; the output becomes reasoning, message
 * and function_call items, streamed as the Responses event sequence (response.created, …,
 * response.output_text.delta, …, response.completed). `previous_response_id` and stored responses
 * are refused: this server keeps no response state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sse.h"

/* ---- request ---- */

static int parts_text(const json_t *c, const char *where, sbuf *out, srv_reqerr *e) {
    if (json_is_string(c)) return sbuf_append(out, json_string_value(c), json_string_length(c)) ? reqerr(e, 500, where, "out of memory") : 0;
    if (!json_is_array(c)) return reqerr(e, 400, where, "'%s' must be a string or an array of content parts", where);
    size_t i;
    const json_t *p;
    json_array_foreach(c, i, p) {
        const json_t *ty = json_object_get(p, "type"), *tx = json_object_get(p, "text");
        const char *t = json_is_string(ty) ? json_string_value(ty) : "";
        if (strcmp(t, "input_text") && strcmp(t, "output_text") && strcmp(t, "text"))
            return reqerr(e, 400, where, "'%s[%zu]': content parts of type '%s' are not supported (text only)", where, i, t);
        if (!json_is_string(tx)) return reqerr(e, 400, where, "'%s[%zu].text' must be a string", where, i);
        if (out->len) sbuf_puts(out, "\n");
        sbuf_append(out, json_string_value(tx), json_string_length(tx));
    }
    return 0;
}

int responses_parse(const json_t *body, srv_backend *be, srv_job *j, json_t **render_req, int *enable_thinking, srv_reqerr *e) {
    *render_req = NULL;
    *enable_thinking = -1;
    const json_t *prev = json_object_get(body, "previous_response_id");
    if (prev && !json_is_null(prev))
        return reqerr(e, 400, "previous_response_id", "'previous_response_id' is not supported: this server keeps no response state; send the whole conversation as 'input'");
    if (json_is_true(json_object_get(body, "background")))
        return reqerr(e, 400, "background", "'background' responses are not supported");
    if (parse_sampling(body, be, &j->params, e)) return -1;
    long long mt;
    int r = get_int(body, "max_output_tokens", &mt, 1, 1 << 30, e);
    if (r < 0) return -1;
    if (r) j->params.max_tokens = (int)mt;
    if (get_bool(body, "stream", &j->stream, e) < 0) return -1;

    json_t *msgs = json_array();
    const json_t *ins = json_object_get(body, "instructions");
    if (ins && !json_is_null(ins)) {
        if (!json_is_string(ins)) return json_decref(msgs), reqerr(e, 400, "instructions", "'instructions' must be a string");
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "system", "content", ins));
    }
    const json_t *in = json_object_get(body, "input");
    if (json_is_string(in)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", "user", "content", in));
    } else if (json_is_array(in) && json_array_size(in) > 0) {
        size_t i;
        const json_t *it;
        json_t *pending_calls = NULL; /* consecutive function_call items form one assistant turn */
        json_array_foreach(in, i, it) {
            char where[48];
            snprintf(where, sizeof where, "input[%zu]", i);
            if (!json_is_object(it)) {
                json_decref(pending_calls);
                return json_decref(msgs), reqerr(e, 400, where, "'%s' must be an object", where);
            }
            const json_t *ty = json_object_get(it, "type");
            const char *t = json_is_string(ty) ? json_string_value(ty) : "message";
            if (!strcmp(t, "function_call")) {
                const json_t *id = json_object_get(it, "call_id"), *nm = json_object_get(it, "name"), *ar = json_object_get(it, "arguments");
                if (!json_is_string(id) || !json_is_string(nm) || !json_is_string(ar)) {
                    json_decref(pending_calls);
                    return json_decref(msgs), reqerr(e, 400, where, "'%s' needs string call_id, name and arguments", where);
                }
                if (!pending_calls) pending_calls = json_array();
                json_array_append_new(pending_calls, json_pack("{s:O,s:s,s:{s:O,s:O}}", "id", id, "type", "function", "function", "name", nm,
                                                               "arguments", ar));
                continue;
            }
            if (pending_calls) {
                json_array_append_new(msgs, json_pack("{s:s,s:n,s:o}", "role", "assistant", "content", "tool_calls", pending_calls));
                pending_calls = NULL;
            }
            if (!strcmp(t, "function_call_output")) {
                const json_t *id = json_object_get(it, "call_id"), *out = json_object_get(it, "output");
                if (!json_is_string(id)) return json_decref(msgs), reqerr(e, 400, where, "'%s.call_id' must be a string", where);
                sbuf text = {0};
                if (parts_text(out, where, &text, e)) return sbuf_free(&text), json_decref(msgs), -1;
                json_array_append_new(msgs, json_pack("{s:s,s:O,s:s%}", "role", "tool", "tool_call_id", id, "content", sbuf_str(&text), text.len));
                sbuf_free(&text);
            } else if (!strcmp(t, "message")) {
                const json_t *role = json_object_get(it, "role");
                const char *rl = json_is_string(role) ? json_string_value(role) : "";
                if (strcmp(rl, "user") && strcmp(rl, "assistant") && strcmp(rl, "system") && strcmp(rl, "developer"))
                    return json_decref(msgs), reqerr(e, 400, where, "'%s.role' must be user, assistant, system or developer", where);
                sbuf text = {0};
                if (parts_text(json_object_get(it, "content"), where, &text, e)) return sbuf_free(&text), json_decref(msgs), -1;
                json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", strcmp(rl, "developer") ? rl : "system", "content",
                                                      sbuf_str(&text), text.len));
                sbuf_free(&text);
            } else if (strcmp(t, "reasoning") != 0) {
                return json_decref(msgs), reqerr(e, 400, where, "input items of type '%s' are not supported", t);
            }
        }
        if (pending_calls) json_array_append_new(msgs, json_pack("{s:s,s:n,s:o}", "role", "assistant", "content", "tool_calls", pending_calls));
    } else {
        return json_decref(msgs), reqerr(e, 400, "input", "'input' is required: a string or a non-empty array of items");
    }

    json_t *tools = NULL;
    const json_t *tl = json_object_get(body, "tools");
    if (tl && !json_is_null(tl)) {
        if (!json_is_array(tl)) return json_decref(msgs), reqerr(e, 400, "tools", "'tools' must be an array");
        tools = json_array();
        size_t i;
        const json_t *t;
        json_array_foreach(tl, i, t) {
            const json_t *ty = json_object_get(t, "type"), *nm = json_object_get(t, "name"), *pa = json_object_get(t, "parameters");
            if (!json_is_object(t)) return json_decref(msgs), json_decref(tools), reqerr(e, 400, "tools", "'tools[%zu]' must be an object", i);
            if (!json_is_string(ty) || strcmp(json_string_value(ty), "function")) continue; /* hosted tools: not ours */
            if (!json_is_string(nm) || !json_string_length(nm) || (pa && !json_is_null(pa) && !json_is_object(pa)))
                return json_decref(msgs), json_decref(tools), reqerr(e, 400, "tools", "'tools[%zu]' needs a name and an object 'parameters'", i);
            json_t *f = json_pack("{s:O}", "name", nm);
            if (json_is_string(json_object_get(t, "description"))) json_object_set(f, "description", json_object_get(t, "description"));
            json_object_set_new(f, "parameters", json_is_object(pa) ? json_deep_copy(pa) : json_pack("{s:s}", "type", "object"));
            json_array_append_new(tools, json_pack("{s:s,s:o}", "type", "function", "function", f));
        }
        if (!json_array_size(tools)) json_decref(tools), tools = NULL;
    }
    const json_t *tc = json_object_get(body, "tool_choice");
    if (json_is_string(tc) && !strcmp(json_string_value(tc), "none")) json_decref(tools), tools = NULL;
    const json_t *rs = json_object_get(body, "reasoning");
    if (json_is_object(rs)) {
        const json_t *ef = json_object_get(rs, "effort");
        if (json_is_string(ef)) {
            const char *v = json_string_value(ef);
            *enable_thinking = !(strcmp(v, "none") == 0 || strcmp(v, "minimal") == 0);
        }
    }
    json_t *req = json_pack("{s:o}", "messages", msgs);
    if (tools) json_object_set(req, "tools", tools);
    j->tools = tools;
    j->api = API_RESPONSES;
    j->split_reasoning = 1;
    *render_req = req;
    if (structured_parse(body, be, j, e)) {
        json_decref(req);
        *render_req = NULL;
        return -1;
    }
    return 0;
}

/* ---- output ---- */

static json_t *usage_json(const srv_job *j) {
    int out = j->stats.completion_tokens ? j->stats.completion_tokens : j->n_completion;
    return json_pack("{s:i,s:{s:i},s:i,s:{s:i},s:i}", "input_tokens", j->n_prompt, "input_tokens_details", "cached_tokens", j->stats.cached_tokens,
                     "output_tokens", out, "output_tokens_details", "reasoning_tokens", 0, "total_tokens", j->n_prompt + out);
}

static json_t *reasoning_item(const srv_job *j, const char *id, const char *text, size_t n) {
    (void)j;
    return json_pack("{s:s,s:s,s:[],s:[{s:s,s:s%}]}", "type", "reasoning", "id", id, "summary", "content", "type", "reasoning_text",
                     "text", text, n);
}

static json_t *message_item(const char *id, const char *status, const char *text, size_t n, int with_part) {
    json_t *content = json_array();
    if (with_part)
        json_array_append_new(content, json_pack("{s:s,s:s%,s:[],s:[]}", "type", "output_text", "text", text, n, "annotations", "logprobs"));
    return json_pack("{s:s,s:s,s:s,s:s,s:o}", "type", "message", "id", id, "status", status, "role", "assistant", "content", content);
}

static json_t *call_item(const srv_call *c, const char *status, int with_args) {
    char id[64];
    snprintf(id, sizeof id, "fc_%s", c->id + 5);
    return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "type", "function_call", "id", id, "call_id", c->id, "name", c->name, "arguments",
                     with_args ? c->arguments : "", "status", status);
}

/* The response object; with final = 0 an in-progress shell without output. */
static json_t *response_json(const srv_job *j, int final) {
    const char *status = !final ? "in_progress" : j->failed ? "failed" : !strcmp(j->finish, "length") ? "incomplete" : "completed";
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:[],s:n,s:n}", "id", j->id, "object", "response", "created_at", (json_int_t)j->created,
                          "status", status, "model", j->model_id, "output", "error", "incomplete_details");
    if (!final) return o;
    json_t *out = json_object_get(o, "output");
    char id[80];
    if (j->stream) {
        /* exactly the items the stream announced, with the same ids */
        if (j->resp_items) json_array_extend(out, j->resp_items);
    } else {
        if (j->reasoning.len) {
            snprintf(id, sizeof id, "rs_%s", j->id + 5);
            json_array_append_new(out, reasoning_item(j, id, sbuf_str(&j->reasoning), j->reasoning.len));
        }
        if (j->content.len || (!j->n_calls && !j->reasoning.len)) {
            snprintf(id, sizeof id, "msg_%s", j->id + 5);
            json_array_append_new(out, message_item(id, "completed", sbuf_str(&j->content), j->content.len, 1));
        }
        for (int i = 0; i < j->n_calls; i++) json_array_append_new(out, call_item(&j->calls[i], "completed", 1));
    }
    if (!strcmp(status, "incomplete")) json_object_set_new(o, "incomplete_details", json_pack("{s:s}", "reason", "max_output_tokens"));
    if (j->failed) json_object_set_new(o, "error", json_pack("{s:s,s:s}", "code", "server_error", "message", j->err.msg));
    json_object_set_new(o, "usage", usage_json(j));
    json_object_set_new(o, "mtplx", job_stats_json(j));
    return o;
}

char *responses_body(const srv_job *j) {
    json_t *o = response_json(j, 1);
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* Remember a finished streamed item for the final response (takes a reference to item). */
static void keep_item(srv_job *j, json_t *item) {
    if (!j->resp_items) j->resp_items = json_array();
    json_array_append(j->resp_items, item);
}

static int ev(srv_job *j, const char *type, json_t *o) {
    json_object_set_new(o, "type", json_string(type));
    json_object_set_new(o, "sequence_number", json_integer(j->resp_seq++));
    return sse_event(&j->stage, type, o);
}

/* Close the open reasoning or message item, with its .done events. */
static int close_item(srv_job *j) {
    int kind = j->block_open, idx = j->n_blocks - 1, rc = 0;
    if (!kind) return 0;
    j->block_open = 0;
    const char *id = j->resp_item_id;
    const char *t = sbuf_str(&j->resp_text);
    size_t n = j->resp_text.len;
    if (kind == 1) {
        rc |= ev(j, "response.reasoning_text.done", json_pack("{s:s,s:i,s:i,s:s%}", "item_id", id, "output_index", idx, "content_index", 0, "text", t, n));
        json_t *item = reasoning_item(j, id, t, n);
        keep_item(j, item);
        rc |= ev(j, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", idx, "item", item));
    } else {
        rc |= ev(j, "response.output_text.done",
                 json_pack("{s:s,s:i,s:i,s:s%,s:[]}", "item_id", id, "output_index", idx, "content_index", 0, "text", t, n, "logprobs"));
        rc |= ev(j, "response.content_part.done",
                 json_pack("{s:s,s:i,s:i,s:{s:s,s:s%,s:[],s:[]}}", "item_id", id, "output_index", idx, "content_index", 0, "part", "type",
                           "output_text", "text", t, n, "annotations", "logprobs"));
        json_t *item = message_item(id, "completed", t, n, 1);
        keep_item(j, item);
        rc |= ev(j, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", idx, "item", item));
    }
    sbuf_clear(&j->resp_text);
    return rc ? -1 : 0;
}

int responses_begin(srv_job *j) {
    if (ev(j, "response.created", json_pack("{s:o}", "response", response_json(j, 0)))) return -1;
    return ev(j, "response.in_progress", json_pack("{s:o}", "response", response_json(j, 0)));
}

int responses_delta(srv_job *j, int is_reasoning, const char *s, size_t n) {
    int kind = is_reasoning ? 1 : 2, rc = 0;
    if (j->block_open != kind) {
        if (close_item(j)) return -1;
        int idx = j->n_blocks++;
        snprintf(j->resp_item_id, sizeof j->resp_item_id, "%s_%d_%s", is_reasoning ? "rs" : "msg", idx, j->id + 5);
        j->block_open = kind;
        if (is_reasoning) {
            rc |= ev(j, "response.output_item.added",
                     json_pack("{s:i,s:{s:s,s:s,s:[]}}", "output_index", idx, "item", "type", "reasoning", "id", j->resp_item_id, "summary"));
        } else {
            rc |= ev(j, "response.output_item.added",
                     json_pack("{s:i,s:o}", "output_index", idx, "item", message_item(j->resp_item_id, "in_progress", "", 0, 0)));
            rc |= ev(j, "response.content_part.added",
                     json_pack("{s:s,s:i,s:i,s:{s:s,s:s,s:[],s:[]}}", "item_id", j->resp_item_id, "output_index", idx, "content_index", 0, "part",
                               "type", "output_text", "text", "", "annotations", "logprobs"));
        }
    }
    if (sbuf_append(&j->resp_text, s, n)) return -1;
    json_t *d = json_stringn(s, n);
    if (!d) return -1;
    rc |= ev(j, is_reasoning ? "response.reasoning_text.delta" : "response.output_text.delta",
             is_reasoning ? json_pack("{s:s,s:i,s:i,s:o}", "item_id", j->resp_item_id, "output_index", j->n_blocks - 1, "content_index", 0, "delta", d)
                          : json_pack("{s:s,s:i,s:i,s:o,s:[]}", "item_id", j->resp_item_id, "output_index", j->n_blocks - 1, "content_index", 0,
                                      "delta", d, "logprobs"));
    return rc ? -1 : 0;
}

int responses_tool_call(srv_job *j, const srv_call *c, int index) {
    (void)index;
    if (close_item(j)) return -1;
    int idx = j->n_blocks++, rc = 0;
    json_t *item = call_item(c, "in_progress", 0);
    const char *id = json_string_value(json_object_get(item, "id"));
    char iid[64];
    snprintf(iid, sizeof iid, "%s", id);
    rc |= ev(j, "response.output_item.added", json_pack("{s:i,s:o}", "output_index", idx, "item", item));
    rc |= ev(j, "response.function_call_arguments.delta", json_pack("{s:s,s:i,s:s}", "item_id", iid, "output_index", idx, "delta", c->arguments));
    rc |= ev(j, "response.function_call_arguments.done",
             json_pack("{s:s,s:i,s:s,s:s}", "item_id", iid, "output_index", idx, "name", c->name, "arguments", c->arguments));
    json_t *done = call_item(c, "completed", 1);
    keep_item(j, done);
    rc |= ev(j, "response.output_item.done", json_pack("{s:i,s:o}", "output_index", idx, "item", done));
    return rc ? -1 : 0;
}

int responses_end(srv_job *j) {
    if (close_item(j)) return -1;
    json_t *r = response_json(j, 1);
    const char *type = j->failed ? "response.failed" : !strcmp(j->finish, "length") ? "response.incomplete" : "response.completed";
    return ev(j, type, json_pack("{s:o}", "response", r));
}
