/* http.c — the hub's HTTP requests through libcurl: handle setup, header parsing, small GETs, and
 * turning an error status into a message that says what to do. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub_internal.h"

/* Copy a header value (trimmed, surrounding quotes and a W/ prefix removed) into out[n]. */
static void header_value(const char *v, size_t len, char *out, size_t n, int unquote) {
    while (len && isspace((unsigned char)*v)) v++, len--;
    while (len && isspace((unsigned char)v[len - 1])) len--;
    if (unquote) {
        if (len >= 2 && v[0] == 'W' && v[1] == '/') v += 2, len -= 2;
        if (len >= 2 && v[0] == '"' && v[len - 1] == '"') v++, len -= 2;
    }
    if (len >= n) len = n - 1;
    memcpy(out, v, len);
    out[len] = 0;
}

/* libcurl header callback: one header line of any response in the redirect chain. */
static size_t on_header(char *buf, size_t size, size_t nitems, void *user) {
    hub_http_meta *m = user;
    size_t len = size * nitems;
    if (len >= 5 && !strncmp(buf, "HTTP/", 5)) { /* a new response: its own error headers */
        m->error_code[0] = m->error_msg[0] = m->next[0] = 0;
        return len;
    }
    const char *colon = memchr(buf, ':', len);
    if (!colon) return len;
    size_t klen = (size_t)(colon - buf), vlen = len - klen - 1;
    const char *v = colon + 1;
#define IS(name) (klen == sizeof(name) - 1 && !strncasecmp(buf, name, klen))
    if (IS("X-Error-Code")) header_value(v, vlen, m->error_code, sizeof m->error_code, 0);
    else if (IS("X-Error-Message")) header_value(v, vlen, m->error_msg, sizeof m->error_msg, 0);
    else if (IS("X-Repo-Commit")) header_value(v, vlen, m->repo_commit, sizeof m->repo_commit, 0);
    else if (IS("X-Linked-Etag")) header_value(v, vlen, m->linked_etag, sizeof m->linked_etag, 1);
    else if (IS("ETag") && !m->linked_etag[0]) header_value(v, vlen, m->linked_etag, sizeof m->linked_etag, 1);
    else if (IS("Link")) { /* <URL>; rel="next" */
        char tmp[2048];
        header_value(v, vlen, tmp, sizeof tmp, 0);
        const char *lt = strchr(tmp, '<'), *gt = lt ? strchr(lt, '>') : NULL;
        if (lt && gt && strstr(gt, "rel=\"next\"")) snprintf(m->next, sizeof m->next, "%.*s", (int)(gt - lt - 1), lt + 1);
    }
#undef IS
    return len;
}

CURL *hub_curl_new(const char *url, const char *token, hub_http_meta *meta, struct curl_slist **hdrs, mtplx_err *err) {
    *hdrs = NULL;
    memset(meta, 0, sizeof *meta);
    CURL *c = curl_easy_init();
    if (!c) {
        err_set(err, MTPLX_ENOMEM, "libcurl: cannot create a handle");
        return NULL;
    }
    if (token && *token) {
        char auth[4200];
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        *hdrs = curl_slist_append(*hdrs, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "mtplx/1 (+libcurl)");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L); /* resolve/ redirects to a CDN */
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled transfer fails after a minute */
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);        /* worker threads */
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, meta);
    return c;
}

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} membuf;

static size_t on_body(char *buf, size_t size, size_t nmemb, void *user) {
    membuf *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *np = cap <= (size_t)256 << 20 ? realloc(b->p, cap) : NULL; /* metadata, not weights */
        if (!np) {
            b->oom = 1;
            return 0;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, buf, n);
    b->len += n;
    b->p[b->len] = 0;
    return n;
}

int hub_http_get(const char *url, const char *token, char **body, size_t *len, hub_http_meta *meta, mtplx_err *err) {
    *body = NULL;
    struct curl_slist *hdrs;
    CURL *c = hub_curl_new(url, token, meta, &hdrs, err);
    if (!c) return err->code;
    membuf b = {0};
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, ""); /* JSON may come compressed */
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &meta->status);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    if (b.oom) {
        free(b.p);
        return err_set(err, MTPLX_ENOMEM, "%s: response too large", url);
    }
    if (rc != CURLE_OK) {
        free(b.p);
        return err_set(err, MTPLX_EIO, "%s: %s", url, cerr[0] ? cerr : curl_easy_strerror(rc));
    }
    if (!b.p) b.p = calloc(1, 1);
    if (!b.p) return err_set(err, MTPLX_ENOMEM, "out of memory");
    *body = b.p;
    if (len) *len = b.len;
    return 0;
}

int hub_http_status_error(const hub_http_meta *m, const char *what, int have_token, const char *token_src,
                          mtplx_err *err) {
    const char *hub_msg = m->error_msg[0] ? m->error_msg : "";
    const char *sep = m->error_msg[0] ? " — hub says: " : "";
    if (m->status == 404 || !strcmp(m->error_code, "RepoNotFound") || !strcmp(m->error_code, "RevisionNotFound") ||
        !strcmp(m->error_code, "EntryNotFound")) {
        const char *kind = !strcmp(m->error_code, "RevisionNotFound") ? "revision not found"
                           : !strcmp(m->error_code, "EntryNotFound") ? "file not found"
                           : !strcmp(m->error_code, "RepoNotFound") ? "repository not found"
                                                                     : "not found";
        int repo_level = strcmp(m->error_code, "RevisionNotFound") && strcmp(m->error_code, "EntryNotFound");
        return err_set(err, MTPLX_EIO, "%s: %s (HTTP %ld%s)%s%s", what, kind, m->status,
                       repo_level && !have_token ? "; a private repository looks the same without a token" : "", sep,
                       hub_msg);
    }
    if (m->status == 401 || m->status == 403) {
        if (!have_token)
            return err_set(err, MTPLX_EIO, "%s: HTTP %ld, the repository is gated or private and no token was sent: set "
                           "HF_TOKEN or write a token to %s%s%s", what, m->status, token_src, sep, hub_msg);
        return err_set(err, MTPLX_EIO, "%s: HTTP %ld, the token from %s was refused: for a gated repository, accept "
                       "its conditions on the hub page with this account%s%s", what, m->status, token_src, sep, hub_msg);
    }
    return err_set(err, MTPLX_EIO, "%s: HTTP %ld%s%s", what, m->status, sep, hub_msg);
}
