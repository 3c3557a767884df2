/* toolcall.h — streaming parser of tool calls in a model's visible output.
 *
 * Two dialects inside a `<tool_call>` … `</tool_call>` envelope:
 *   Qwen3.5 XML:  <function=NAME>\n<parameter=K>\nV\n</parameter>\n…</function>
 *                 (also <function=NAME>{JSON object}</function>)
 *   JSON (Qwen3 / Hermes): {"name": NAME, "arguments": {…}}   ("parameters" accepted; arguments
 *                 given as a JSON string holding an object are decoded)
 * XML parameter values lose one leading and one trailing newline and are typed by the tool's JSON
 * schema (parameters.properties[K].type): a type that allows "string" keeps the text verbatim;
 * number/integer/boolean/object/array/null decode it as JSON when it is valid JSON, else keep the
 * string. With no schema for the parameter (unknown tool or key) the value is JSON-decoded when
 * valid, else kept as a string. Unknown tool names pass through unchanged.
 *
 * Streaming: text is emitted as content up to a possible `<tool_call>` start (a partial tag at the
 * end of a chunk is held back); a call is emitted when its closing tag arrives. A call that does
 * not parse, or is not closed when the output ends, falls back to content verbatim — never an
 * error. Whitespace between/around calls is dropped once the turn has a call; whitespace in front
 * of a call is dropped too. Several calls per turn get indexes 0, 1, 2, … */
#ifndef MTPLX_CHAT_TOOLCALL_H
#define MTPLX_CHAT_TOOLCALL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/sbuf.h"

typedef struct {
    int         index;        /* 0-based position in the turn */
    char        id[40];       /* "call_" + 24 hex digits */
    const char *name;         /* NUL-terminated; valid during the callback only */
    const char *arguments;    /* compact JSON object text; valid during the callback only */
} tool_call;

/* Content text (n > 0) / a completed call. Return 0 to continue, non-zero to stop (passed back). */
typedef int (*toolcall_text_fn)(void *user, const char *s, size_t n);
typedef int (*toolcall_call_fn)(void *user, const tool_call *c);

typedef struct {
    const json_t *tools;      /* borrowed OpenAI tools array (or NULL): schemas for typing values */
    int      in_call;         /* 1 between <tool_call> and </tool_call> */
    int      n_calls;         /* calls emitted so far */
    int      after_call;      /* 1 right after a call: leading whitespace of content is dropped */
    int      n_fallback;      /* malformed or unclosed calls returned as content */
    sbuf     pending;         /* TEXT: undecided tail; CALL: the call body so far */
    sbuf     ws_hold;         /* trailing whitespace of content, emitted only when text follows */
    uint64_t id_state;        /* generator state for call ids */
    size_t   max_body;        /* a longer call body is given up on and returned as content */
} toolcall_parser;

/* tools: OpenAI tools array ([{"type":"function","function":{"name","parameters"}}] or bare
 * {"name","parameters"} items), borrowed for the parser's life; may be NULL. id_seed makes call ids
 * (different seeds give different ids). */
void toolcall_init(toolcall_parser *t, const json_t *tools, uint64_t id_seed);
int toolcall_feed(toolcall_parser *t, const char *s, size_t n, toolcall_text_fn on_text,
                  toolcall_call_fn on_call, void *user);
/* End of output: flush held text; an unclosed call becomes content. Same returns as feed. */
int toolcall_finish(toolcall_parser *t, toolcall_text_fn on_text, toolcall_call_fn on_call, void *user);
void toolcall_free(toolcall_parser *t);

/* Parse one envelope body (the text between <tool_call> and </tool_call>). Returns 0 and heap
 * strings *name and *arguments (compact JSON object; caller frees both), or -1 when the body is
 * not a well-formed call in either dialect. */
int toolcall_parse_body(const char *body, size_t n, const json_t *tools, char **name, char **arguments);

#endif
