/* err.h — error values that travel up the call stack with a message.
 *
 * Library code never exits: a failing function fills an mtplx_err and returns its code (< 0).
 * The caller may add context with err_prefix(); only the CLI's main() or the HTTP layer turns an
 * error into an exit code or an API error body. */
#ifndef MTPLX_BASE_ERR_H
#define MTPLX_BASE_ERR_H

#include <stdarg.h>

enum {
    MTPLX_OK = 0,
    MTPLX_EINVAL = -1,    /* a caller passed an impossible value (sampler setting, shape, flag) */
    MTPLX_ENOMEM = -2,    /* allocation failed */
    MTPLX_EIO = -3,       /* open/read/mmap failed */
    MTPLX_EBADFILE = -4,  /* a file exists but its content is malformed (checkpoint, JSON, tokenizer) */
    MTPLX_EUNSUPPORTED = -5, /* well-formed input we deliberately do not handle (architecture, dtype) */
    MTPLX_ERANGE = -6,    /* a length or index outside what the object holds (context full, bad id) */
    MTPLX_ECANCELED = -7, /* the caller asked to stop (client disconnected) */
    MTPLX_ETEMPLATE = -8, /* a chat template failed to parse or render */
    MTPLX_EINTERNAL = -9, /* a broken invariant of our own; a bug */
};

typedef struct {
    int  code;        /* one of the MTPLX_E* values, 0 when no error was set */
    char msg[1024];   /* human-readable, names the file / tensor / field at fault */
} mtplx_err;

/* Set err (may be NULL) to code and the formatted message; returns code so callers can write
 * `return err_set(err, MTPLX_EINVAL, "...")`. */
int err_set(mtplx_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prepend "context: " to an existing message; returns err->code (or code if err is NULL). */
int err_prefix(mtplx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reset err to "no error". */
void err_clear(mtplx_err *err);

/* Short name of an error code ("invalid argument", ...). Never NULL. */
const char *err_code_name(int code);

#endif
