/* sse.h — SSE framing and typed JSON field access shared by the API files. */
#ifndef MTPLX_SERVER_SSE_H
#define MTPLX_SERVER_SSE_H

#include <jansson.h>

#include "internal.h"

/* Append "data: <obj>\n\n" (and "event: <name>\n" first). Steal the reference to obj.
 * Return 0 or -1 (allocation). */
int sse_data(sbuf *b, json_t *obj);
int sse_event(sbuf *b, const char *name, json_t *obj);

/* Optional typed fields: return 0 when absent/null, 1 when read into *out, -1 with e set when the
 * value has the wrong type or is out of range. get_number's range is [lo, hi] ((lo, hi] with lo_open). */
int get_number(const json_t *o, const char *key, double *out, double lo, double hi, int lo_open, srv_reqerr *e);
int get_int(const json_t *o, const char *key, long long *out, long long lo, long long hi, srv_reqerr *e);
int get_bool(const json_t *o, const char *key, int *out, srv_reqerr *e);
int parse_stops(const json_t *v, const char *name, srv_job *j, srv_reqerr *e);

#endif
