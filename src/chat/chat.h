/* chat.h — a model's chat template and how an OpenAI chat request becomes a prompt.
 *
 * Rendering follows Hugging Face `apply_chat_template`: the template sees `messages`, `tools`
 * (None when the request has none), `documents`, `add_generation_prompt`, the special tokens of
 * tokenizer_config.json (bos_token, eos_token, ...) and any `chat_template_kwargs` of the request
 * (e.g. enable_thinking). The request is first adapted the way vLLM's OpenAI server does:
 * content given as a list of text parts is joined with "\n" (or kept as parts when the template
 * iterates over message content), null content becomes "", `tool_calls[].function.arguments`
 * given as a JSON string is parsed into an object (invalid JSON becomes {}), empty tool_calls are
 * dropped, and only the fields vLLM forwards reach the template (role, content, tool_calls,
 * tool_call_id, name, reasoning/reasoning_content). See docs/chat-templates.md. */
#ifndef MTPLX_CHAT_CHAT_H
#define MTPLX_CHAT_CHAT_H

#include <jansson.h>
#include <stddef.h>

#include "../base/err.h"
#include "jinja.h"

typedef struct chat_template chat_template;

/* Load the chat template(s) of a model or tokenizer directory: chat_template.jinja (which wins, as in
 * transformers) or tokenizer_config.json "chat_template" (a string, or a list of {name, template}),
 * plus additional_chat_templates/<name>.jinja; and the special tokens from tokenizer_config.json.
 * Returns 0 and *out (free with chat_template_free), or an error naming the file. A directory with
 * no template at all gives MTPLX_EUNSUPPORTED. */
int chat_template_load(const char *dir, chat_template **out, mtplx_err *err);

/* Build from template source and an optional tokenizer_config JSON object (special tokens). */
int chat_template_from_source(const char *src, size_t len, json_t *tokenizer_config, chat_template **out,
                              mtplx_err *err);

void chat_template_free(chat_template *t);

/* Render an OpenAI chat-completions request body (a JSON object with "messages" and optionally
 * "tools", "documents", "chat_template_kwargs", "add_generation_prompt" (default true),
 * "continue_final_message" (default false)). `limits` may be NULL. On success *prompt is a
 * NUL-terminated heap string (caller frees) of *len bytes. Bad requests give MTPLX_EINVAL naming the
 * field; template failures MTPLX_ETEMPLATE with the template line. */
int chat_render(const chat_template *t, json_t *request, const jinja_limits *limits, char **prompt, size_t *len,
                mtplx_err *err);

/* The same from request bytes: validates the JSON (and its UTF-8) first. */
int chat_render_json(const chat_template *t, const char *body, size_t body_len, const jinja_limits *limits,
                     char **prompt, size_t *len, mtplx_err *err);

/* Convert an OpenAI request into the template variables (the adaptation above), without rendering.
 * Returns a new JSON object (caller json_decref's) or NULL with err set. */
json_t *chat_build_vars(const chat_template *t, json_t *request, mtplx_err *err);

#endif
