/* reasoning.h — streaming splitter of model output into reasoning and visible content.
 *
 * Text between the exact markers `<think>` and `</think>` is reasoning; everything else is content.
 * Only those two angle-bracketed markers switch modes (prose that says "think" never does). A
 * template that ends the generation prompt with an open `<think>` makes the model start inside
 * reasoning: create the parser with start_in_reasoning = 1 (see reasoning_prompt_opens_think).
 *
 * Streaming: text arrives in arbitrary chunks; a marker split across chunks is recognised, and a
 * possible marker prefix at the end of a chunk is held back until the next chunk (or the finish)
 * decides it, so a partial marker is never emitted. Markers themselves are never emitted.
 * Whitespace: leading whitespace of every reasoning or content segment is dropped, and so is the
 * trailing whitespace of a reasoning segment (the template writes "<think>\n...\n</think>\n\n").
 * Feeding the whole text at once gives exactly the concatenation of what chunked feeding gives. */
#ifndef MTPLX_CHAT_REASONING_H
#define MTPLX_CHAT_REASONING_H

#include <stddef.h>

#include "../base/sbuf.h"

/* Receives a piece of output: is_reasoning 1 for reasoning text, 0 for content. n > 0. Return 0 to
 * continue, non-zero to stop (the value is passed back out of reasoning_feed/finish). */
typedef int (*reasoning_emit_fn)(void *user, int is_reasoning, const char *s, size_t n);

typedef struct {
    int   in_reasoning;   /* 1 while inside a think block */
    int   seg_start;      /* 1 until the current segment has emitted non-whitespace */
    sbuf  pending;        /* unprocessed bytes: a possible marker prefix */
    sbuf  ws_hold;        /* trailing whitespace of a reasoning segment, emitted only if more follows */
    size_t n_reasoning;   /* bytes of reasoning emitted so far */
    size_t n_content;     /* bytes of content emitted so far */
} reasoning_parser;

void reasoning_init(reasoning_parser *r, int start_in_reasoning);

/* Feed n bytes. Returns 0, -1 on allocation failure, or the emit callback's non-zero value. */
int reasoning_feed(reasoning_parser *r, const char *s, size_t n, reasoning_emit_fn emit, void *user);

/* End of output: flush what was held back (an incomplete marker prefix is emitted as text).
 * Same returns as reasoning_feed. */
int reasoning_finish(reasoning_parser *r, reasoning_emit_fn emit, void *user);

void reasoning_free(reasoning_parser *r);

/* 1 when a rendered prompt leaves a think block open (its last `<think>` has no `</think>` after
 * it), i.e. the model's output starts inside reasoning. */
int reasoning_prompt_opens_think(const char *prompt);

#endif
