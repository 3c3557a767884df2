/* structured.c — the structured-output fields of the three APIs -> a grammar and a thinking budget
 * on the job (docs/structured-output.md), and the per-request matcher that becomes the job's
 * gen_constraint once the prompt is rendered.
 *
 *   OpenAI chat:   response_format {type: json_object | json_schema {schema, ...} | text},
 *                  tool_choice "required" | {"type":"function","function":{"name"}} (forced call),
 *                  tool_choice "auto" (or none given) with "strict": true tools (constrained arguments),
 *                  parallel_tool_calls, reasoning_effort low/medium/high, mtplx.max_thinking_tokens
 *   Responses:     text.format {type: json_object | json_schema {schema, ...} | text},
 *                  tool_choice "required" | {"type":"function","name"}, reasoning.effort
 *   Anthropic:     tool_choice {type: any | tool {name}}, thinking.budget_tokens,
 *                  output_config.format {type: json_schema, schema}
 * A schema the grammar engine cannot compile is a 400 whose message names the keyword. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* reasoning_effort -> thinking tokens before the answer is forced (only when a think block is open) */
static int effort_budget(const char *v) {
    if (!strcmp(v, "low")) return 256;
    if (!strcmp(v, "medium")) return 1024;
    if (!strcmp(v, "high")) return 4096;
    return -1;
}

/* Compile a json_schema / json_object format object (OpenAI response_format, Responses text.format,
 * Anthropic output_config.format) into j->grammar. */
static int parse_format(const json_t *f, const char *param, srv_api api, srv_job *j, srv_reqerr *e) {
    if (!f || json_is_null(f)) return 0;
    const char *ty = json_string_value(json_object_get(f, "type"));
    if (!json_is_object(f) || !ty) return reqerr(e, 400, param, "'%s' must be an object with a type", param);
    if (!strcmp(ty, "text")) return 0;
    mtplx_err err = {0};
    int rc;
    if (!strcmp(ty, "json_object")) rc = grammar_json_object(&j->grammar, &err);
    else if (!strcmp(ty, "json_schema")) {
        /* OpenAI chat nests {name, schema, strict} under json_schema; Responses and Anthropic put schema beside type */
        const json_t *holder = api == API_CHAT ? json_object_get(f, "json_schema") : f;
        const json_t *schema = json_object_get(holder, "schema");
        if (!schema) return reqerr(e, 400, param, "'%s%s.schema' is required", param, api == API_CHAT ? ".json_schema" : "");
        rc = grammar_from_schema(schema, &j->grammar, &err);
    } else
        return reqerr(e, 400, param, "'%s.type' must be text, json_object or json_schema; got '%s'", param, ty);
    if (rc) return reqerr(e, rc == MTPLX_ENOMEM ? 500 : 400, param, "%s", err.msg);
    return 0;
}

/* A forced tool call: all tools (only = NULL) or the one named. */
static int force_tools(srv_backend *be, srv_job *j, const char *only, int parallel, const char *param, srv_reqerr *e) {
    if (!j->tools) return reqerr(e, 400, param, "'%s' forces a tool call but the request has no tools", param);
    mtplx_err err = {0};
    grammar_free(j->grammar); /* a forced call wins over a response format */
    j->grammar = NULL;
    int rc = grammar_tool_calls(j->tools, only, parallel, be->tool_dialect, &j->grammar, &err);
    if (rc) return reqerr(e, rc == MTPLX_ENOMEM ? 500 : 400, param, "%s", err.msg);
    return 0;
}

/* tool_choice "auto" with a strict tool: the model may answer or call; a strict tool's arguments
 * are constrained (grammar_tool_calls_auto). Nothing changes without a strict tool, or when a strict
 * tool's schema is outside the compiler's subset (then no call is constrained). */
static int strict_auto_tools(srv_backend *be, srv_job *j, srv_reqerr *e) {
    int strict = 0;
    for (size_t i = 0; i < json_array_size(j->tools); i++) strict |= grammar_tool_is_strict(json_array_get(j->tools, i));
    if (!strict) return 0;
    mtplx_err err = {0};
    int rc = grammar_tool_calls_auto(j->tools, be->tool_dialect, &j->grammar, &err);
    /* a schema outside the subset leaves the calls unconstrained, as they were before strict tools were
       honoured (agent clients send strict tools with tool_choice auto; a 400 would break them) */
    if (rc == MTPLX_EUNSUPPORTED) return 0;
    if (rc) return reqerr(e, rc == MTPLX_ENOMEM ? 500 : 400, "tools", "%s", err.msg);
    return 0;
}

int structured_parse(const json_t *body, srv_backend *be, srv_job *j, srv_reqerr *e) {
    j->think_budget = -1;
    const char *what = NULL; /* the field that asked for structure, named when it cannot be had */
    const json_t *tc = json_object_get(body, "tool_choice");
    int rc = 0;
    if (j->api == API_CHAT || j->api == API_RESPONSES) {
        const json_t *fmt = j->api == API_CHAT ? json_object_get(body, "response_format")
                                               : json_object_get(json_object_get(body, "text"), "format");
        what = j->api == API_CHAT ? "response_format" : "text.format";
        if ((rc = parse_format(fmt, what, j->api, j, e))) return rc;
        if (!j->grammar) what = NULL;
        const json_t *ptc = json_object_get(body, "parallel_tool_calls");
        int parallel = !json_is_false(ptc);
        if (json_is_string(tc) && !strcmp(json_string_value(tc), "required"))
            what = "tool_choice", rc = force_tools(be, j, NULL, parallel, "tool_choice", e);
        else if (json_is_object(tc)) {
            what = "tool_choice";
            const json_t *fn = j->api == API_CHAT ? json_object_get(tc, "function") : tc;
            const char *name = json_string_value(json_object_get(fn, "name"));
            if (!name) return reqerr(e, 400, "tool_choice", "'tool_choice' names no function");
            rc = force_tools(be, j, name, parallel, "tool_choice", e);
        }
        if (!rc && !j->grammar && be->vocab && (!tc || (json_is_string(tc) && !strcmp(json_string_value(tc), "auto"))))
            rc = strict_auto_tools(be, j, e);
        if (rc) return rc;
        const json_t *re = j->api == API_CHAT ? json_object_get(body, "reasoning_effort")
                                              : json_object_get(json_object_get(body, "reasoning"), "effort");
        if (json_is_string(re) && effort_budget(json_string_value(re)) >= 0) {
            j->think_budget = effort_budget(json_string_value(re));
            if (!what) what = j->api == API_CHAT ? "reasoning_effort" : "reasoning.effort";
        }
    } else if (j->api == API_MESSAGES) {
        const char *ty = json_string_value(json_object_get(tc, "type"));
        if (ty && !strcmp(ty, "any")) what = "tool_choice", rc = force_tools(be, j, NULL, 1, "tool_choice", e);
        else if (ty && !strcmp(ty, "tool")) {
            what = "tool_choice";
            const char *name = json_string_value(json_object_get(tc, "name"));
            if (!name) return reqerr(e, 400, "tool_choice.name", "'tool_choice' of type tool needs a name");
            rc = force_tools(be, j, name, !json_is_true(json_object_get(tc, "disable_parallel_tool_use")), "tool_choice", e);
        }
        if (!rc && !j->grammar) {
            rc = parse_format(json_object_get(json_object_get(body, "output_config"), "format"), "output_config.format",
                              API_MESSAGES, j, e);
            if (j->grammar) what = "output_config.format";
        }
        if (rc) return rc;
        const json_t *bt = json_object_get(json_object_get(body, "thinking"), "budget_tokens");
        if (bt) {
            if (!json_is_integer(bt) || json_integer_value(bt) < 0)
                return reqerr(e, 400, "thinking.budget_tokens", "'thinking.budget_tokens' must be an integer >= 0");
            j->think_budget = json_integer_value(bt) > 1 << 30 ? 1 << 30 : (int)json_integer_value(bt);
            if (!what) what = "thinking.budget_tokens";
        }
    }
    const json_t *mt = json_object_get(json_object_get(body, "mtplx"), "max_thinking_tokens");
    if (mt) {
        if (!json_is_integer(mt) || json_integer_value(mt) < 0)
            return reqerr(e, 400, "mtplx.max_thinking_tokens", "'mtplx.max_thinking_tokens' must be an integer >= 0");
        j->think_budget = json_integer_value(mt) > 1 << 30 ? 1 << 30 : (int)json_integer_value(mt);
        if (!what) what = "mtplx.max_thinking_tokens";
    }
    if ((j->grammar || j->think_budget >= 0) && !be->vocab) {
        if (!j->grammar) { /* a budget alone is advisory here: thinking stays unbounded, as agent clients expect */
            j->think_budget = -1;
            return 0;
        }
        return reqerr(e, 400, what ? what : "response_format", "'%s': structured output and thinking budgets need a "
                      "byte-level BPE tokenizer; this model's has none", what ? what : "response_format");
    }
    return 0;
}

int structured_attach(srv_backend *be, srv_job *j, mtplx_err *err) {
    /* a budget the completion cannot reach changes nothing (agent clients send large ones) */
    const int think = j->start_in_reasoning && j->think_budget >= 0 && j->think_budget < j->params.max_tokens;
    if (!j->grammar && !think) return 0;
    const int free_text = !j->grammar;
    if (!j->grammar) { /* a budget alone: free text after the think block */
        int rc = grammar_free_text(&j->grammar, err);
        if (rc) return rc;
    }
    int32_t *close = NULL;
    int n_close = 0;
    if (j->start_in_reasoning) { /* the template opened a think block: how it closes one */
        int rc = be->encode(be->impl, "</think>\n\n", 10, &close, &n_close, err);
        if (rc) return rc;
    }
    grammar_think th = {think ? j->think_budget : 1 << 30, close, n_close > 8 ? 8 : n_close, free_text};
    int rc = grammar_matcher_new(j->grammar, be->vocab, j->params.stop_ids, j->params.n_stop_ids,
                                 j->start_in_reasoning && n_close ? &th : NULL, &j->matcher, err);
    free(close);
    if (rc) return rc;
    j->con = gen_constraint_of_matcher(j->matcher);
    j->params.constraint = &j->con;
    return 0;
}
