/* sbuf.c — see sbuf.h. */
#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int sbuf_reserve(sbuf *b, size_t extra) {
    if (extra > ((size_t)-1) / 2 - b->len) return -1;
    size_t need = b->len + extra + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int sbuf_append(sbuf *b, const void *s, size_t n) {
    if (sbuf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int sbuf_puts(sbuf *b, const char *s) { return sbuf_append(b, s, strlen(s)); }

int sbuf_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || sbuf_reserve(b, (size_t)n)) return -1;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

void sbuf_consume(sbuf *b, size_t n) {
    if (n >= b->len) {
        sbuf_clear(b);
        return;
    }
    memmove(b->p, b->p + n, b->len - n);
    b->len -= n;
    b->p[b->len] = 0;
}

void sbuf_clear(sbuf *b) {
    b->len = 0;
    if (b->p) b->p[0] = 0;
}

char *sbuf_take(sbuf *b) {
    if (!b->p && sbuf_reserve(b, 0)) return NULL;
    char *p = b->p;
    b->p = NULL;
    b->len = b->cap = 0;
    return p;
}

void sbuf_free(sbuf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}
