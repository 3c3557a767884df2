/* fuzz_toolcall.c — libFuzzer harness for the streaming tool-call parser. Input byte 0 picks a chunk
 * size; the rest is model output. Checks: no crash/leak, and chunked feeding yields exactly the same
 * content and calls as one-shot feeding, and every emitted call's arguments are a JSON object. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/chat/toolcall.h"

typedef struct {
    sbuf out;
} acc;

static int on_text(void *u, const char *s, size_t n) {
    if (n == 0) abort();
    return sbuf_append(&((acc *)u)->out, s, n);
}

static int on_call(void *u, const tool_call *c) {
    json_error_t je;
    json_t *a = json_loads(c->arguments, JSON_ALLOW_NUL, &je);
    if (!json_is_object(a)) abort();
    json_decref(a);
    acc *o = u;
    return sbuf_printf(&o->out, "\x01%d|%s|%s\x01", c->index, c->name, c->arguments);
}

static void run(const json_t *tools, const uint8_t *d, size_t n, size_t step, acc *o) {
    toolcall_parser p;
    toolcall_init(&p, tools, 1);
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        toolcall_feed(&p, (const char *)d + i, k, on_text, on_call, o);
    }
    toolcall_finish(&p, on_text, on_call, o);
    toolcall_free(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t step = 1 + data[0] % 16;
    data++, size--;
    static json_t *tools;
    if (!tools) {
        json_error_t je;
        tools = json_loads("[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\","
                           "\"properties\":{\"path\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"},"
                           "\"o\":{\"type\":[\"object\",\"null\"]}}}}}]",
                           0, &je);
    }
    acc a = {0}, b = {0};
    run(tools, data, size, size ? size : 1, &a);
    run(tools, data, size, step, &b);
    if (a.out.len != b.out.len || (a.out.len && memcmp(a.out.p, b.out.p, a.out.len) != 0)) abort();
    sbuf_free(&a.out);
    sbuf_free(&b.out);
    return 0;
}
