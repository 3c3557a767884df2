/* fuzz_reasoning.c — libFuzzer harness for the <think> splitter. Byte 0: chunk size and start mode;
 * the rest is model output. Checks: no crash/leak; chunked feeding gives the same two channels as
 * one-shot feeding; no emitted piece is empty. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/chat/reasoning.h"

typedef struct {
    sbuf ch[2];
} acc;

static int emit(void *u, int is_reasoning, const char *s, size_t n) {
    if (n == 0) abort();
    return sbuf_append(&((acc *)u)->ch[is_reasoning ? 1 : 0], s, n);
}

static void run(const uint8_t *d, size_t n, size_t step, int start, acc *o) {
    reasoning_parser r;
    reasoning_init(&r, start);
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        reasoning_feed(&r, (const char *)d + i, k, emit, o);
    }
    reasoning_finish(&r, emit, o);
    reasoning_free(&r);
}

static int same(const sbuf *a, const sbuf *b) {
    return a->len == b->len && (a->len == 0 || memcmp(a->p, b->p, a->len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t step = 1 + (data[0] >> 1) % 16;
    int start = data[0] & 1;
    data++, size--;
    acc a = {0}, b = {0};
    run(data, size, size ? size : 1, start, &a);
    run(data, size, step, start, &b);
    if (!same(&a.ch[0], &b.ch[0]) || !same(&a.ch[1], &b.ch[1])) abort();
    for (int c = 0; c < 2; c++) sbuf_free(&a.ch[c]), sbuf_free(&b.ch[c]);
    return 0;
}
