/* mem.h — checked allocation that reports failure through mtplx_err instead of aborting. */
#ifndef MTPLX_BASE_MEM_H
#define MTPLX_BASE_MEM_H

#include <stddef.h>
#include "err.h"

/* malloc/calloc that set err (MTPLX_ENOMEM, naming `what`) and return NULL on failure or on a
 * size overflow of n*size. Free with free(). */
void *mem_alloc(size_t n, size_t size, const char *what, mtplx_err *err);
void *mem_zalloc(size_t n, size_t size, const char *what, mtplx_err *err);

/* 64-byte aligned, zeroed allocation for SIMD buffers; free with free(). */
void *mem_aligned(size_t bytes, const char *what, mtplx_err *err);

#endif
