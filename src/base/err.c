/* err.c — see err.h. */
#include "err.h"

#include <stdio.h>
#include <string.h>

int err_set(mtplx_err *err, int code, const char *fmt, ...) {
    if (!err) return code;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return code;
}

int err_prefix(mtplx_err *err, const char *fmt, ...) {
    if (!err) return MTPLX_EINTERNAL;
    char head[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", head, old);
    return err->code;
}

void err_clear(mtplx_err *err) {
    if (!err) return;
    err->code = 0;
    err->msg[0] = 0;
}

const char *err_code_name(int code) {
    switch (code) {
    case MTPLX_OK: return "ok";
    case MTPLX_EINVAL: return "invalid argument";
    case MTPLX_ENOMEM: return "out of memory";
    case MTPLX_EIO: return "I/O error";
    case MTPLX_EBADFILE: return "malformed file";
    case MTPLX_EUNSUPPORTED: return "unsupported";
    case MTPLX_ERANGE: return "out of range";
    case MTPLX_ECANCELED: return "canceled";
    case MTPLX_ETEMPLATE: return "template error";
    case MTPLX_EINTERNAL: return "internal error";
    default: return "error";
    }
}
