/* grammar.h — structured output: JSON Schema / json_object grammars compiled into a byte-level
 * pushdown automaton, and per-sequence matchers that turn its state into a mask over a tokenizer's
 * vocabulary (docs/structured-output.md).
 *
 * Three objects:
 *   grammar          a compiled grammar (immutable, may be shared by threads and sequences);
 *   grammar_vocab    the byte strings of one tokenizer's ids, sorted for the mask walk (immutable);
 *   grammar_matcher  one sequence's state: an optional bounded-thinking prelude, then the grammar;
 *                    advance(token) / rollback(n) follow accepted and rejected drafts, mask() gives
 *                    the ids allowed next (cached per state).
 * The layer sits between tokenizer/chat and engine: it knows token bytes, not models or sampling. */
#ifndef MTPLX_GRAMMAR_GRAMMAR_H
#define MTPLX_GRAMMAR_GRAMMAR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../tokenizer/tokenizer.h"

typedef struct grammar grammar;
typedef struct grammar_vocab grammar_vocab;
typedef struct grammar_matcher grammar_matcher;

/* Compile a JSON Schema (a JSON object or boolean). Supported: type (one or a list; "null" makes a
 * type nullable), nullable, properties, required, additionalProperties (bool or schema; absent =
 * false, as in OpenAI strict mode), minProperties, maxProperties, enum, const, anyOf, oneOf
 * (branches must not overlap), allOf of one schema, items (a schema or false), prefixItems,
 * minItems, maxItems, uniqueItems (items from at most 64 fixed values, or maxItems <= 1),
 * minLength, maxLength, pattern (the safe ECMAScript subset of regex.c), format (date, time,
 * date-time, email, uuid, ipv4, ipv6, uri, hostname; int32, int64, float, double on numbers),
 * minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (integer divisors), $ref to "#",
 * "#/$defs/N" or "#/definitions/N" (recursion allowed), and annotations (title, description,
 * default, examples, $schema, $id, $comment, ...).
 * Anything else is MTPLX_EUNSUPPORTED with a message naming the keyword and its JSON path; a schema
 * whose language is empty (minimum > maximum, ...) or too large (limits in grammar_int.h) is
 * MTPLX_EINVAL. Returns 0 and *out (grammar_free). */
int grammar_from_schema(const json_t *schema, grammar **out, mtplx_err *err);
/* The same from JSON text. */
int grammar_from_schema_text(const char *text, size_t n, grammar **out, mtplx_err *err);
/* Any JSON object (OpenAI response_format json_object). */
int grammar_json_object(grammar **out, mtplx_err *err);
/* Any UTF-8 text (a thinking budget without a response format). */
int grammar_free_text(grammar **out, mtplx_err *err);

/* Tool-call dialects for forced calls (the model's own format, see src/chat/toolcall.h). */
typedef enum {
    GRAMMAR_TOOLS_JSON = 0, /* <tool_call>\n{"name": "N", "arguments": ARGS}\n</tool_call> */
    GRAMMAR_TOOLS_XML = 1,  /* <tool_call>\n<function=N>\n<parameter=K>\nV\n</parameter>\n...</function>\n</tool_call> */
} grammar_tool_dialect;

/* A forced tool call: one of the tools in `tools` (an OpenAI tools array, or bare {"name",
 * "parameters"} / Anthropic {"name", "input_schema"} items), restricted to `only` when non-NULL,
 * with arguments constrained by each tool's parameter schema; `parallel` allows one or more calls
 * separated by a newline. Errors as grammar_from_schema, prefixed with the tool's name. */
int grammar_tool_calls(const json_t *tools, const char *only, int parallel, grammar_tool_dialect dialect,
                       grammar **out, mtplx_err *err);
/* Tool calls under tool_choice "auto": free text, where the model may open "<tool_call>" any number
 * of times; a call of a strict tool (OpenAI "strict": true) then has its arguments constrained by its
 * schema, a call of another tool is its name then free text up to "</tool_call>". Errors as
 * grammar_tool_calls. */
int grammar_tool_calls_auto(const json_t *tools, grammar_tool_dialect dialect, grammar **out, mtplx_err *err);
/* 1 when an OpenAI tool item (chat or Responses form) has "strict": true. */
int grammar_tool_is_strict(const json_t *tool);
void grammar_free(grammar *g);

/* 1 when bytes s[0..n) are a complete sentence of g, else 0 (tests and fuzzing). */
int grammar_accepts(const grammar *g, const char *s, size_t n);

/* The byte strings of t's ids. Special added tokens (tok_is_special) never match grammar text.
 * Returns 0 and *out, MTPLX_EUNSUPPORTED when t is not a byte-level tokenizer, or ENOMEM. */
int grammar_vocab_new(const tokenizer *t, grammar_vocab **out, mtplx_err *err);
/* The same from explicit byte strings (tests): toks[i] of lens[i] bytes, special[i] != 0 for
 * ids that never match text (special may be NULL). */
int grammar_vocab_from_bytes(const char *const *toks, const size_t *lens, const uint8_t *special, int n,
                             grammar_vocab **out, mtplx_err *err);
void grammar_vocab_free(grammar_vocab *v);
int grammar_vocab_size(const grammar_vocab *v);

/* Bounded thinking in front of the grammar: the sequence starts inside a think block; up to
 * `budget` tokens are free (stop ids excluded); the model may close the block itself with
 * `close_ids[0]`; when the budget runs out the close_ids are forced one by one. Then the grammar. */
typedef struct {
    int budget;                /* free thinking tokens (>= 0) */
    const int32_t *close_ids;  /* the template's closing tag tokens, e.g. "</think>" then "\n\n" */
    int n_close;               /* 1..8 */
    int allow_stop;            /* 1: stop ids may end the turn inside the think block (free text after
                                  it; with a structure to produce they never do) */
} grammar_think;

/* A matcher of g over v for one sequence. Stop ids are allowed exactly when the grammar has
 * completed a sentence. think may be NULL (no prelude). g and v outlive the matcher.
 * Returns 0 or ENOMEM / EINVAL (bad ids). */
int grammar_matcher_new(const grammar *g, const grammar_vocab *v, const int32_t *stop_ids, int n_stop,
                        const grammar_think *think, grammar_matcher **out, mtplx_err *err);
void grammar_matcher_free(grammar_matcher *m);
/* Back to the start (a new generation with the same grammar; the mask cache is kept). */
void grammar_matcher_reset(grammar_matcher *m);

/* The ids allowed next: a bitset of ceil(V / 32) words (bit j % 32 of word j / 32), owned by m and
 * valid until the next call on m. NULL with err set on allocation failure. */
const uint32_t *grammar_matcher_mask(grammar_matcher *m, mtplx_err *err);
/* Take tok. Returns 0, or MTPLX_EINVAL when tok is not allowed (the state is unchanged). */
int grammar_matcher_advance(grammar_matcher *m, int32_t tok, mtplx_err *err);
/* Undo the last n advances (n <= grammar_matcher_history). */
void grammar_matcher_rollback(grammar_matcher *m, int n);
/* How many advances rollback can undo (the last 32). */
int grammar_matcher_history(const grammar_matcher *m);
/* 1 when the grammar has completed a sentence that nothing may extend (only stop ids could follow). */
int grammar_matcher_ended(grammar_matcher *m);
/* 1 while inside the thinking prelude. */
int grammar_matcher_thinking(const grammar_matcher *m);
/* Ids the matcher's masks cover: its vocabulary's size (ids at or past it are never allowed). */
int grammar_matcher_vocab_size(const grammar_matcher *m);

/* Counters for benchmarks: masks asked for, masks computed (cache misses), token-walk steps. */
typedef struct {
    long masks, computed, steps;
} grammar_stats;
grammar_stats grammar_matcher_stats(const grammar_matcher *m);

#endif
