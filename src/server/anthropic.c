/* anthropic.c — Anthropic Messages API: the request is translated into an OpenAI-shaped chat
 * request for the template (system, text, tool_use/tool_result and thinking blocks), and the output
 * events become Anthropic content blocks (thinking, text, tool_use) and stream events. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sse.h"

/* Text of a block list or string (tool_result content, system). Non-text blocks are refused. */
static int blocks_text(const json_t *c, const char *where, sbuf *out, srv_reqerr *e) {
    if (json_is_string(c)) return sbuf_append(out, json_string_value(c), json_string_length(c)) ? reqerr(e, 500, where, "out of memory") : 0;
    if (!c || json_is_null(c)) return 0;
    if (!json_is_array(c)) return reqerr(e, 400, where, "'%s' must be a string or an array of text blocks", where);
    size_t i;
    const json_t *b;
    json_array_foreach(c, i, b) {
        const json_t *ty = json_object_get(b, "type"), *tx = json_object_get(b, "text");
        if (!json_is_object(b) || !json_is_string(ty) || strcmp(json_string_value(ty), "text") || !json_is_string(tx))
            return reqerr(e, 400, where, "'%s[%zu]' must be a text block {\"type\":\"text\",\"text\":...}", where, i);
        if (out->len) sbuf_puts(out, "\n");
        sbuf_append(out, json_string_value(tx), json_string_length(tx));
    }
    return 0;
}

static void push_msg(json_t *msgs, const char *role, sbuf *text) {
    json_array_append_new(msgs, json_pack("{s:s,s:s%}", "role", role, "content", sbuf_str(text), text->len));
    sbuf_clear(text);
}

static int translate_message(const json_t *m, size_t idx, json_t *msgs, srv_reqerr *e) {
    char where[64];
    snprintf(where, sizeof where, "messages[%zu]", idx);
    if (!json_is_object(m)) return reqerr(e, 400, where, "'%s' must be an object", where);
    const json_t *role = json_object_get(m, "role");
    const char *r = json_is_string(role) ? json_string_value(role) : "";
    int user = !strcmp(r, "user"), assistant = !strcmp(r, "assistant");
    const json_t *c = json_object_get(m, "content");
    if (!strcmp(r, "system")) {
        /* a system message inside the conversation (the current API allows one anywhere; it applies
         * from its position on): string or text blocks, kept at its place */
        sbuf st = {0};
        char cw[80];
        snprintf(cw, sizeof cw, "%s.content", where);
        int rc = blocks_text(c, cw, &st, e);
        if (!rc) push_msg(msgs, "system", &st);
        sbuf_free(&st);
        return rc;
    }
    if (!user && !assistant)
        return reqerr(e, 400, where, "'%s.role' must be \"user\", \"assistant\" or \"system\"", where);
    if (json_is_string(c)) {
        json_array_append_new(msgs, json_pack("{s:s,s:O}", "role", r, "content", c));
        return 0;
    }
    if (!json_is_array(c)) return reqerr(e, 400, where, "'%s.content' must be a string or an array of blocks", where);
    sbuf text = {0}, thinking = {0};
    json_t *calls = json_array();
    size_t i;
    const json_t *b;
    int rc = 0;
    json_array_foreach(c, i, b) {
        snprintf(where, sizeof where, "messages[%zu].content[%zu]", idx, i);
        const json_t *ty = json_object_get(b, "type");
        const char *t = json_is_string(ty) ? json_string_value(ty) : "";
        if (!json_is_object(b) || !*t) {
            rc = reqerr(e, 400, where, "'%s' must be a content block with a \"type\"", where);
            break;
        }
        if (!strcmp(t, "text")) {
            const json_t *tx = json_object_get(b, "text");
            if (!json_is_string(tx)) {
                rc = reqerr(e, 400, where, "'%s.text' must be a string", where);
                break;
            }
            sbuf_append(&text, json_string_value(tx), json_string_length(tx));
        } else if (!strcmp(t, "tool_result") && user) {
            const json_t *id = json_object_get(b, "tool_use_id");
            if (!json_is_string(id)) {
                rc = reqerr(e, 400, where, "'%s.tool_use_id' must be a string", where);
                break;
            }
            if (text.len) push_msg(msgs, "user", &text);
            sbuf body = {0};
            if ((rc = blocks_text(json_object_get(b, "content"), where, &body, e))) {
                sbuf_free(&body);
                break;
            }
            json_array_append_new(msgs, json_pack("{s:s,s:O,s:s%}", "role", "tool", "tool_call_id", id, "content",
                                                  sbuf_str(&body), body.len));
            sbuf_free(&body);
        } else if (!strcmp(t, "tool_use") && assistant) {
            const json_t *id = json_object_get(b, "id"), *nm = json_object_get(b, "name"), *in = json_object_get(b, "input");
            if (!json_is_string(nm) || !json_is_string(id) || (in && !json_is_object(in))) {
                rc = reqerr(e, 400, where, "'%s' must have string id and name and an object input", where);
                break;
            }
            char *args = in ? json_dumps(in, JSON_COMPACT | JSON_PRESERVE_ORDER) : strdup("{}");
            json_array_append_new(calls, json_pack("{s:O,s:s,s:{s:O,s:s}}", "id", id, "type", "function", "function", "name", nm,
                                                   "arguments", args ? args : "{}"));
            free(args);
        } else if (!strcmp(t, "thinking") && assistant) {
            const json_t *th = json_object_get(b, "thinking");
            if (json_is_string(th)) sbuf_append(&thinking, json_string_value(th), json_string_length(th));
        } else if (!strcmp(t, "redacted_thinking")) {
            /* nothing we can show the template */
        } else {
            rc = reqerr(e, 400, where, "content blocks of type '%s' are not supported in %s messages", t, r);
            break;
        }
    }
    if (!rc) {
        if (assistant) {
            json_t *am = json_pack("{s:s,s:s%}", "role", "assistant", "content", sbuf_str(&text), text.len);
            if (thinking.len) json_object_set_new(am, "reasoning_content", json_stringn(thinking.p, thinking.len));
            if (json_array_size(calls)) json_object_set(am, "tool_calls", calls);
            json_array_append_new(msgs, am);
        } else if (text.len || json_array_size(c) == 0) {
            push_msg(msgs, "user", &text);
        }
    }
    json_decref(calls);
    sbuf_free(&text);
    sbuf_free(&thinking);
    return rc;
}

int anthropic_parse(const json_t *body, srv_backend *be, srv_job *j, json_t **render_req, int *enable_thinking,
                    srv_reqerr *e) {
    *render_req = NULL;
    *enable_thinking = -1;
    long long mt;
    int r = get_int(body, "max_tokens", &mt, 1, 1 << 30, e);
    if (r < 0) return -1;
    if (r == 0) return reqerr(e, 400, "max_tokens", "'max_tokens' is required and must be a positive integer");
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs)) return reqerr(e, 400, "messages", "'messages' is required and must be an array");
    if (json_array_size(msgs) == 0) return reqerr(e, 400, "messages", "'messages' must not be empty");
    if (parse_sampling(body, be, &j->params, e)) return -1;
    j->params.max_tokens = (int)mt;
    if (get_bool(body, "stream", &j->stream, e) < 0) return -1;
    if (parse_stops(json_object_get(body, "stop_sequences"), "stop_sequences", j, e)) return -1;

    json_t *out = json_array();
    const json_t *sys = json_object_get(body, "system");
    if (sys && !json_is_null(sys)) {
        sbuf st = {0};
        if (blocks_text(sys, "system", &st, e)) return sbuf_free(&st), json_decref(out), -1;
        push_msg(out, "system", &st);
        sbuf_free(&st);
    }
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) if (translate_message(m, i, out, e)) return json_decref(out), -1;

    json_t *tools = NULL;
    const json_t *tl = json_object_get(body, "tools");
    if (tl && !json_is_null(tl)) {
        if (!json_is_array(tl)) return json_decref(out), reqerr(e, 400, "tools", "'tools' must be an array");
        tools = json_array();
        const json_t *t;
        json_array_foreach(tl, i, t) {
            const json_t *nm = json_object_get(t, "name"), *ty = json_object_get(t, "type");
            if (!json_is_object(t) || !json_is_string(nm) || json_string_length(nm) == 0)
                return json_decref(out), json_decref(tools), reqerr(e, 400, "tools", "'tools[%zu].name' must be a non-empty string", i);
            if (json_is_string(ty) && strcmp(json_string_value(ty), "custom") != 0) continue; /* server tools */
            if (json_is_true(json_object_get(t, "defer_loading"))) continue; /* loaded by tool search: not in the prompt */
            const json_t *sch = json_object_get(t, "input_schema");
            if (sch && !json_is_object(sch))
                return json_decref(out), json_decref(tools), reqerr(e, 400, "tools", "'tools[%zu].input_schema' must be an object", i);
            json_t *f = json_pack("{s:O}", "name", nm);
            if (json_is_string(json_object_get(t, "description"))) json_object_set(f, "description", json_object_get(t, "description"));
            json_object_set_new(f, "parameters", sch ? json_deep_copy(sch) : json_pack("{s:s}", "type", "object"));
            json_array_append_new(tools, json_pack("{s:s,s:o}", "type", "function", "function", f));
        }
        if (json_array_size(tools) == 0) json_decref(tools), tools = NULL;
    }
    const json_t *tc = json_object_get(body, "tool_choice");
    if (tc && !json_is_null(tc)) {
        const json_t *ty = json_object_get(tc, "type");
        if (!json_is_object(tc) || !json_is_string(ty))
            return json_decref(out), json_decref(tools), reqerr(e, 400, "tool_choice", "'tool_choice' must be an object with a type");
        if (!strcmp(json_string_value(ty), "none")) json_decref(tools), tools = NULL;
    }
    const json_t *th = json_object_get(body, "thinking");
    if (th && !json_is_null(th)) {
        /* enabled / adaptive / between_tools: the model thinks (budget_tokens: structured.c);
         * disabled: no think block. display "omitted": thinking blocks carry no text. */
        const json_t *ty = json_object_get(th, "type"), *dp = json_object_get(th, "display");
        if (!json_is_object(th) || !json_is_string(ty))
            return json_decref(out), json_decref(tools), reqerr(e, 400, "thinking", "'thinking' must be an object with a type");
        const char *t = json_string_value(ty);
        if (strcmp(t, "enabled") && strcmp(t, "adaptive") && strcmp(t, "disabled") && strcmp(t, "between_tools"))
            return json_decref(out), json_decref(tools),
                   reqerr(e, 400, "thinking.type", "'thinking.type' must be enabled, adaptive, between_tools or disabled; got '%s'", t);
        *enable_thinking = strcmp(t, "disabled") != 0;
        if (json_is_string(dp) && !strcmp(json_string_value(dp), "omitted")) j->hide_reasoning = 1;
    }
    /* output_config.format (structured output) is structured.c's; server-side MCP would change what
     * the answer is: refuse, never ignore */
    const json_t *oc = json_object_get(body, "output_config");
    if (oc && !json_is_null(oc) && !json_is_object(oc))
        return json_decref(out), json_decref(tools), reqerr(e, 400, "output_config", "'output_config' must be an object");
    const json_t *mcp = json_object_get(body, "mcp_servers");
    if (mcp && !json_is_null(mcp) && !(json_is_array(mcp) && json_array_size(mcp) == 0))
        return json_decref(out), json_decref(tools),
               reqerr(e, 400, "mcp_servers", "'mcp_servers' is not supported: this server does not connect to MCP servers; run them in the client");
    json_t *req = json_pack("{s:o}", "messages", out);
    if (tools) json_object_set(req, "tools", tools);
    j->tools = tools;
    j->api = API_MESSAGES;
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

static const char *stop_reason(const srv_job *j) {
    if (!strcmp(j->finish, "tool_calls")) return "tool_use";
    if (!strcmp(j->finish, "length")) return "max_tokens";
    if (j->stop_hit) return "stop_sequence";
    return "end_turn";
}

static int close_block(srv_job *j) {
    if (!j->block_open) return 0;
    j->block_open = 0;
    return sse_event(&j->stage, "content_block_stop", json_pack("{s:s,s:i}", "type", "content_block_stop", "index", j->n_blocks - 1));
}

static int open_block(srv_job *j, json_t *block, int kind) {
    int rc = close_block(j);
    if (rc) return json_decref(block), rc;
    rc = sse_event(&j->stage, "content_block_start",
                   json_pack("{s:s,s:i,s:o}", "type", "content_block_start", "index", j->n_blocks, "content_block", block));
    j->n_blocks++;
    j->block_open = kind;
    return rc;
}

int anthropic_begin(srv_job *j) {
    json_t *msg = json_pack("{s:s,s:s,s:s,s:s,s:[],s:n,s:n,s:{s:i,s:i}}", "id", j->id, "type", "message", "role", "assistant",
                            "model", j->model_id, "content", "stop_reason", "stop_sequence", "usage", "input_tokens",
                            j->n_prompt, "output_tokens", 0);
    int rc = sse_event(&j->stage, "message_start", json_pack("{s:s,s:o}", "type", "message_start", "message", msg));
    return rc || sse_event(&j->stage, "ping", json_pack("{s:s}", "type", "ping")) ? -1 : 0;
}

int anthropic_delta(srv_job *j, int is_reasoning, const char *s, size_t n) {
    int kind = is_reasoning ? 1 : 2;
    if (j->block_open != kind) {
        json_t *b = is_reasoning ? json_pack("{s:s,s:s,s:s}", "type", "thinking", "thinking", "", "signature", "")
                                 : json_pack("{s:s,s:s}", "type", "text", "text", "");
        if (open_block(j, b, kind)) return -1;
    }
    if (is_reasoning && j->hide_reasoning) return 0; /* thinking.display "omitted" */
    json_t *text = json_stringn(s, n);
    if (!text) return -1;
    json_t *d = is_reasoning ? json_pack("{s:s,s:o}", "type", "thinking_delta", "thinking", text)
                             : json_pack("{s:s,s:o}", "type", "text_delta", "text", text);
    return sse_event(&j->stage, "content_block_delta",
                     json_pack("{s:s,s:i,s:o}", "type", "content_block_delta", "index", j->n_blocks - 1, "delta", d));
}

int anthropic_tool_call(srv_job *j, const srv_call *c, int index) {
    (void)index;
    if (open_block(j, json_pack("{s:s,s:s,s:s,s:{}}", "type", "tool_use", "id", c->id, "name", c->name, "input"), 3)) return -1;
    if (sse_event(&j->stage, "content_block_delta",
                  json_pack("{s:s,s:i,s:{s:s,s:s}}", "type", "content_block_delta", "index", j->n_blocks - 1, "delta", "type",
                            "input_json_delta", "partial_json", c->arguments)))
        return -1;
    return close_block(j);
}

int anthropic_end(srv_job *j) {
    if (j->failed)
        return sse_event(&j->stage, "error",
                         json_pack("{s:s,s:{s:s,s:s}}", "type", "error", "error", "type", "api_error", "message", j->err.msg));
    if (close_block(j)) return -1;
    if (j->n_blocks == 0) {
        if (open_block(j, json_pack("{s:s,s:s}", "type", "text", "text", ""), 2) || close_block(j)) return -1;
    }
    int out = j->stats.completion_tokens ? j->stats.completion_tokens : j->n_completion;
    /* Anthropic's input_tokens are the ones not read from the cache (docs/prefix-cache.md) */
    int cached = j->stats.cached_tokens;
    json_t *md = json_pack("{s:s,s:{s:s,s:s*},s:{s:i,s:i,s:i},s:o}", "type", "message_delta", "delta", "stop_reason",
                           stop_reason(j), "stop_sequence", j->stop_hit ? j->stops[j->stop_hit - 1] : NULL, "usage",
                           "input_tokens", j->n_prompt - cached, "cache_read_input_tokens", cached, "output_tokens", out,
                           "mtplx", job_stats_json(j));
    if (sse_event(&j->stage, "message_delta", md)) return -1;
    return sse_event(&j->stage, "message_stop", json_pack("{s:s}", "type", "message_stop"));
}

char *anthropic_body(const srv_job *j) {
    json_t *content = json_array();
    if (j->reasoning.len)
        json_array_append_new(content, json_pack("{s:s,s:s%,s:s}", "type", "thinking", "thinking", sbuf_str(&j->reasoning),
                                                 j->hide_reasoning ? 0 : j->reasoning.len, "signature", ""));
    if (j->content.len)
        json_array_append_new(content, json_pack("{s:s,s:s%}", "type", "text", "text", sbuf_str(&j->content), j->content.len));
    for (int i = 0; i < j->n_calls; i++) {
        json_error_t je;
        json_t *in = json_loads(j->calls[i].arguments, JSON_ALLOW_NUL, &je);
        if (!json_is_object(in)) json_decref(in), in = json_object();
        json_array_append_new(content, json_pack("{s:s,s:s,s:s,s:o}", "type", "tool_use", "id", j->calls[i].id, "name",
                                                 j->calls[i].name, "input", in));
    }
    if (json_array_size(content) == 0) json_array_append_new(content, json_pack("{s:s,s:s}", "type", "text", "text", ""));
    int out = j->stats.completion_tokens ? j->stats.completion_tokens : j->n_completion;
    int cached = j->stats.cached_tokens;
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:s*,s:{s:i,s:i,s:i},s:o}", "id", j->id, "type", "message", "role",
                          "assistant", "model", j->model_id, "content", content, "stop_reason", stop_reason(j),
                          "stop_sequence", j->stop_hit ? j->stops[j->stop_hit - 1] : NULL, "usage", "input_tokens",
                          j->n_prompt - cached, "cache_read_input_tokens", cached, "output_tokens", out, "mtplx",
                          job_stats_json(j));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}
