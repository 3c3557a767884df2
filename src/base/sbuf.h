/* sbuf.h — a growable byte buffer (always NUL-terminated) for building text and JSON.
 *
 * Growth is geometric, so appending one token's text at a time stays amortised O(1). Used by the
 * streaming parsers (chat layer) and the HTTP layer for response bodies. */
#ifndef MTPLX_BASE_SBUF_H
#define MTPLX_BASE_SBUF_H

#include <stddef.h>

typedef struct {
    char  *p;      /* heap bytes, NUL-terminated when cap > 0; NULL when empty and never grown */
    size_t len;    /* bytes used, excluding the NUL */
    size_t cap;    /* bytes allocated */
} sbuf;

/* Append n bytes / a C string / printf-formatted text. Return 0, or -1 when allocation fails
 * (the buffer is left unchanged). */
int sbuf_append(sbuf *b, const void *s, size_t n);
int sbuf_puts(sbuf *b, const char *s);
int sbuf_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Drop the first n bytes (n > len drops all). */
void sbuf_consume(sbuf *b, size_t n);
/* Empty without freeing. */
void sbuf_clear(sbuf *b);
/* Give the heap string to the caller (who frees it; never NULL unless allocation fails) and reset. */
char *sbuf_take(sbuf *b);
void sbuf_free(sbuf *b);
/* The text, "" when never grown. */
static inline const char *sbuf_str(const sbuf *b) { return b->p ? b->p : ""; }

#endif
