/* doctor.h — `mtplx doctor`: checks of the machine and the install, each with what to fix.
 * docs/reliability.md lists the checks. */
#ifndef MTPLX_ENGINE_DOCTOR_H
#define MTPLX_ENGINE_DOCTOR_H

#include "../base/err.h"

typedef enum { DOC_OK = 0, DOC_WARN = 1, DOC_FAIL = 2 } doctor_status;

/* One check's verdict. */
typedef struct {
    char name[32];          /* "cpu", "memory", "huge_pages", "threads", "model", "port", "cache", "pack_cache" */
    doctor_status status;
    char detail[768];       /* what was found */
    char fix[384];          /* what to do about it; "" when nothing */
} doctor_check;

typedef struct {
    const char *model_dir;  /* checkpoint directory to verify; NULL = skip the model check */
    const char *cache_dir;  /* NULL = the hub cache (hub_cache_dir) */
    int port;               /* TCP port `serve` would use on 127.0.0.1 */
    int checksums;          /* 1: sha256 every HF-cache blob of the model (slow for big models) */
} doctor_opts;

#define DOCTOR_MAX_CHECKS 12

typedef struct {
    doctor_check checks[DOCTOR_MAX_CHECKS];
    int n;
} doctor_report;

/* Run every check into r. Returns the worst status. Never fails as a whole: a check that cannot run
 * reports itself as failed. */
doctor_status doctor_run(const doctor_opts *o, doctor_report *r);

/* "ok", "warn", "fail". */
const char *doctor_status_name(doctor_status s);

#endif
