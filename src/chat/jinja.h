/* jinja.h — a Jinja2-subset template engine for Hugging Face chat templates.
 *
 * The dialect is the one transformers renders chat templates with: Jinja2 in an immutable sandbox,
 * trim_blocks=True, lstrip_blocks=True, the loopcontrols extension (break/continue), HF's `tojson`
 * (ensure_ascii=False, Python separators), `raise_exception(msg)` and `strftime_now(fmt)`.
 * Values follow Python: str() of a list prints its repr, `+` on str and int is an error, undefined
 * prints as "" but refuses arithmetic, calls and attribute access.
 *
 * A template is parsed once (jinja_parse) and rendered any number of times (jinja_render); both
 * report failures as MTPLX_ETEMPLATE with "line N: ..." in the message. Rendering is bounded by
 * jinja_limits, so a hostile template stops with an error instead of looping or eating memory.
 * Thread-safety: a parsed template is read-only during rendering; render it from several threads
 * at once freely. See docs/chat-templates.md for the supported subset. */
#ifndef MTPLX_CHAT_JINJA_H
#define MTPLX_CHAT_JINJA_H

#include <jansson.h>
#include <stddef.h>

#include "../base/err.h"

typedef struct jinja_template jinja_template;

/* Work bounds of one render; zero fields take the defaults below. */
typedef struct {
    size_t max_steps;   /* evaluated nodes + builtin work units (default 20,000,000) */
    size_t max_output;  /* bytes of rendered text (default 256 MiB) */
    size_t max_memory;  /* bytes of values allocated while rendering (default 1 GiB) */
    int max_depth;      /* nested macro calls (default 64) */
} jinja_limits;

/* Parse template source (UTF-8, `len` bytes, need not be NUL-terminated). Returns 0 and sets *out
 * (free with jinja_free), or MTPLX_ETEMPLATE/MTPLX_ENOMEM with err naming the line. */
int jinja_parse(const char *src, size_t len, jinja_template **out, mtplx_err *err);

void jinja_free(jinja_template *t);

/* Render with the variables of `vars` (a JSON object; its keys become template variables, JSON null
 * becomes None). `limits` may be NULL. On success returns 0 and sets *out to a NUL-terminated heap
 * string (caller frees) of *out_len bytes (the text may itself contain NUL bytes). */
int jinja_render(const jinja_template *t, json_t *vars, const jinja_limits *limits, char **out,
                 size_t *out_len, mtplx_err *err);

/* 1 when the template iterates over a message's content (`{% for part in message['content'] %}`
 * where message comes from iterating `messages`): such templates want OpenAI-style content part
 * lists rather than joined strings (vLLM's "openai" content format). */
int jinja_wants_content_parts(const jinja_template *t);

#endif
