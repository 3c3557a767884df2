/* hub_internal.h — helpers shared by the hub's files (cache.c, http.c, pull.c); not for other layers. */
#ifndef MTPLX_HUB_INTERNAL_H
#define MTPLX_HUB_INTERNAL_H

#include <curl/curl.h>
#include <stddef.h>

#include "../base/err.h"

/* First line of a small file, without the newline, into out[n]. Returns 0 or -1. */
int hub_read_line(const char *path, char *out, size_t n);

/* 1 when s is a full 40-hex lower-case commit id. */
int hub_is_commit(const char *s);

/* What the response headers said (of the last response, except `linked_etag` / `repo_commit`,
 * which a redirect's first response carries and the CDN's does not). */
typedef struct {
    long status;             /* HTTP status of the final response (0: none) */
    char error_code[64];     /* X-Error-Code (RepoNotFound, GatedRepo, EntryNotFound, ...) */
    char error_msg[256];     /* X-Error-Message */
    char linked_etag[80];    /* X-Linked-Etag, else ETag, quotes and W/ stripped */
    char repo_commit[64];    /* X-Repo-Commit */
    char next[2048];         /* Link: <URL>; rel="next" (pagination) */
} hub_http_meta;

/* A curl handle for url with the hub's common settings: bearer token (may be NULL; libcurl does not
 * forward it to another host on a redirect), redirects followed, a stall timeout, headers parsed
 * into *meta. *hdrs is the header list to free with curl_slist_free_all after the transfer.
 * Returns NULL with err set on failure. */
CURL *hub_curl_new(const char *url, const char *token, hub_http_meta *meta, struct curl_slist **hdrs, mtplx_err *err);

/* GET url into a NUL-terminated heap body (caller frees *body). Returns 0 when the transfer worked
 * (meta->status may still be an error status), or EIO with curl's message. */
int hub_http_get(const char *url, const char *token, char **body, size_t *len, hub_http_meta *meta, mtplx_err *err);

/* An error for an HTTP error status of a hub request: 401/403 (gated/private, which token), 404
 * (repo/revision/file, from X-Error-Code), others with the status and the hub's message. `what`
 * names the request ("ORG/NAME@main", "ORG/NAME: config.json"). Returns the code set (EIO). */
int hub_http_status_error(const hub_http_meta *m, const char *what, int have_token, const char *token_src,
                          mtplx_err *err);

#endif
