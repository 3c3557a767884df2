/* mem.c — see mem.h. */
#include "mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int mul_overflows(size_t n, size_t size, size_t *out) {
    if (size && n > SIZE_MAX / size) return 1;
    *out = n * size;
    return 0;
}

void *mem_alloc(size_t n, size_t size, const char *what, mtplx_err *err) {
    size_t bytes;
    if (mul_overflows(n, size, &bytes)) {
        err_set(err, MTPLX_ENOMEM, "%s: size overflow (%zu x %zu)", what, n, size);
        return NULL;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (!p) err_set(err, MTPLX_ENOMEM, "%s: cannot allocate %zu bytes", what, bytes);
    return p;
}

void *mem_zalloc(size_t n, size_t size, const char *what, mtplx_err *err) {
    size_t bytes;
    if (mul_overflows(n, size, &bytes)) {
        err_set(err, MTPLX_ENOMEM, "%s: size overflow (%zu x %zu)", what, n, size);
        return NULL;
    }
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) err_set(err, MTPLX_ENOMEM, "%s: cannot allocate %zu bytes", what, bytes);
    return p;
}

void *mem_aligned(size_t bytes, const char *what, mtplx_err *err) {
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes) {
        err_set(err, MTPLX_ENOMEM, "%s: size overflow", what);
        return NULL;
    }
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p) {
        err_set(err, MTPLX_ENOMEM, "%s: cannot allocate %zu bytes", what, bytes);
        return NULL;
    }
    memset(p, 0, rounded ? rounded : 64);
    return p;
}
