/* pull.c — download a repository snapshot into the cache (hub.h has the contract and the layout).
 *
 * Order of work: revision -> commit, tree -> file list (size, blob id, LFS sha256), a free-space
 * check, then `jobs` threads take files from a shared index. Each file is written to
 * blobs/<etag>.incomplete, hashed as it arrives (a resumed file's present prefix is hashed first),
 * checked, renamed to blobs/<etag> and linked into snapshots/<commit>/. A failed check deletes the
 * partial file; a cut transfer keeps it, and the next attempt (or the next pull) asks for the rest
 * with `Range: bytes=N-`. A server that answers a range with 200 gets the file from the start. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../base/sha256.h"
#include "hub.h"
#include "hub_internal.h"

typedef struct {
    char path[1024];     /* repo-relative path */
    uint64_t size;       /* bytes */
    char etag[80];       /* blob name: LFS sha256, else the git blob id */
    char sha256[65];     /* expected sha256 (LFS files), "" when the hub gives none */
} pull_file;

typedef struct {
    const hub_pull_opts *o;
    const hub_ref *ref;
    char endpoint[1024];
    char token[4096];         /* "" when none */
    char token_src[HUB_PATH_MAX];
    char cache[HUB_PATH_MAX];
    char repo_dir[HUB_PATH_MAX];
    char commit[41];
    pull_file *files;
    int n_files;

    pthread_mutex_t mu;       /* guards everything below */
    int next;                 /* next file index to take */
    int failed;               /* 1 after the first error: workers stop */
    mtplx_err first_err;
    uint64_t done, total;     /* progress bytes */
    int downloaded, resumed;
    uint64_t fetched;
} pull_job;

int hub_skip_default(const char *path) {
    static const char *k_ext[] = {".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf", ".ot",
                                  ".tflite", ".onnx_data"};
    if (!strncmp(path, "original/", 9) || strstr(path, "/original/")) return 1;
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof k_ext / sizeof k_ext[0]; i++) {
        size_t k = strlen(k_ext[i]);
        if (n > k && !strcmp(path + n - k, k_ext[i])) return 1;
    }
    return 0;
}

/* ---- small helpers ---- */

static int mkdir_p(const char *path) {
    char tmp[HUB_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

/* The token: $HF_TOKEN (or the older $HUGGING_FACE_HUB_TOKEN), else the first line of the token
 * file ($HF_TOKEN_PATH, else $HF_HOME/token, else ~/.cache/huggingface/token). src names where
 * it came from, or the file that was looked for. */
static void find_token(char *tok, size_t n, char *src, size_t srcn) {
    const char *v = getenv("HF_TOKEN");
    tok[0] = 0;
    if (v && *v) {
        snprintf(tok, n, "%s", v);
        snprintf(src, srcn, "HF_TOKEN");
        return;
    }
    if ((v = getenv("HUGGING_FACE_HUB_TOKEN")) && *v) {
        snprintf(tok, n, "%s", v);
        snprintf(src, srcn, "HUGGING_FACE_HUB_TOKEN");
        return;
    }
    if ((v = getenv("HF_TOKEN_PATH")) && *v) snprintf(src, srcn, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v) snprintf(src, srcn, "%s/token", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) snprintf(src, srcn, "%s/huggingface/token", v);
    else snprintf(src, srcn, "%s/.cache/huggingface/token", getenv("HOME") ? getenv("HOME") : "");
    if (hub_read_line(src, tok, n) != 0) tok[0] = 0;
}

/* URL-escape each '/'-separated segment of s (keeping the slashes) into out[n]. */
static void escape_path(const char *s, char *out, size_t n) {
    out[0] = 0;
    size_t used = 0;
    while (*s) {
        size_t seg = strcspn(s, "/");
        char *e = curl_easy_escape(NULL, s, (int)seg);
        used += (size_t)snprintf(out + used, used < n ? n - used : 0, "%s%s", e ? e : "", s[seg] ? "/" : "");
        curl_free(e);
        s += seg + (s[seg] ? 1 : 0);
    }
}

/* Move the job's progress by delta bytes (negative when a restart drops counted bytes); fetched
 * counts bytes that came over the network now. */
static void add_progress(pull_job *J, int64_t delta, uint64_t fetched) {
    pthread_mutex_lock(&J->mu);
    J->done = (uint64_t)((int64_t)J->done + delta);
    J->fetched += fetched;
    progress_report(&J->o->progress, J->done, J->total);
    pthread_mutex_unlock(&J->mu);
}

static void fail(pull_job *J, const mtplx_err *e) {
    pthread_mutex_lock(&J->mu);
    if (!J->failed) {
        J->failed = 1;
        J->first_err = *e;
    }
    pthread_mutex_unlock(&J->mu);
}

static int job_failed(pull_job *J) {
    pthread_mutex_lock(&J->mu);
    int f = J->failed;
    pthread_mutex_unlock(&J->mu);
    return f;
}

/* ---- metadata ---- */

static int api_get(pull_job *J, const char *url, const char *what, json_t **out, hub_http_meta *meta, mtplx_err *err) {
    char *body;
    int rc = hub_http_get(url, J->token[0] ? J->token : NULL, &body, NULL, meta, err);
    if (rc) return rc;
    if (meta->status != 200) {
        free(body);
        return hub_http_status_error(meta, what, J->token[0] != 0, J->token_src, err);
    }
    json_error_t je;
    *out = json_loads(body, 0, &je);
    free(body);
    if (!*out) return err_set(err, MTPLX_EBADFILE, "%s: the hub's answer is not JSON (%s)", url, je.text);
    return 0;
}

/* revision -> commit (GET /api/models/REPO/revision/REV: {"sha": ...}) */
static int resolve_commit(pull_job *J, mtplx_err *err) {
    char url[3072], what[600];
    /* a revision with '/' (refs/pr/1) is one path segment on the API: escape it whole */
    char *e = curl_easy_escape(NULL, J->ref->revision, 0);
    if (!e) return err_set(err, MTPLX_ENOMEM, "out of memory");
    snprintf(url, sizeof url, "%s/api/models/%s/revision/%s", J->endpoint, J->ref->repo, e);
    curl_free(e);
    snprintf(what, sizeof what, "%s@%s", J->ref->repo, J->ref->revision);
    json_t *o;
    hub_http_meta meta;
    int rc = api_get(J, url, what, &o, &meta, err);
    if (rc) return rc;
    const char *sha = json_string_value(json_object_get(o, "sha"));
    if (!sha || !hub_is_commit(sha)) {
        json_decref(o);
        return err_set(err, MTPLX_EBADFILE, "%s: the hub's revision answer has no 40-hex \"sha\"", url);
    }
    snprintf(J->commit, sizeof J->commit, "%s", sha);
    json_decref(o);
    return 0;
}

static int selected(const pull_job *J, const char *path) {
    if (J->o->include) {
        for (const char *const *g = J->o->include; *g; g++)
            if (fnmatch(*g, path, 0) == 0) return 1;
        return 0;
    }
    return J->o->all_files || !hub_skip_default(path);
}

/* One tree entry into a pull_file (skipped when not a file or not selected). */
static int add_entry(pull_job *J, json_t *e, int *cap, mtplx_err *err) {
    const char *type = json_string_value(json_object_get(e, "type"));
    const char *path = json_string_value(json_object_get(e, "path"));
    const char *oid = json_string_value(json_object_get(e, "oid"));
    json_t *lfs = json_object_get(e, "lfs");
    if (!type || strcmp(type, "file") || !path || !selected(J, path)) return 0;
    if (!*path || path[0] == '/' || strstr(path, "..") || strlen(path) >= sizeof J->files[0].path)
        return err_set(err, MTPLX_EBADFILE, "%s: the hub lists an unsafe path '%s'", J->ref->repo, path);
    const char *sha = lfs ? json_string_value(json_object_get(lfs, "oid")) : NULL;
    json_t *size = lfs ? json_object_get(lfs, "size") : json_object_get(e, "size");
    if (!json_is_integer(size) || json_integer_value(size) < 0 || !(sha || oid))
        return err_set(err, MTPLX_EBADFILE, "%s: tree entry '%s' lacks a size or an oid", J->ref->repo, path);
    if (J->n_files == *cap) {
        *cap = *cap ? 2 * *cap : 32;
        pull_file *nf = realloc(J->files, (size_t)*cap * sizeof *nf);
        if (!nf) return err_set(err, MTPLX_ENOMEM, "out of memory");
        J->files = nf;
    }
    pull_file *f = &J->files[J->n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", path);
    f->size = (uint64_t)json_integer_value(size);
    const char *etag = sha ? sha : oid;
    for (const char *c = etag; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')) || c - etag > 70)
            return err_set(err, MTPLX_EBADFILE, "%s: '%s' has a malformed oid", J->ref->repo, path);
    snprintf(f->etag, sizeof f->etag, "%s", etag);
    if (sha && strlen(sha) == 64) snprintf(f->sha256, sizeof f->sha256, "%s", sha);
    J->n_files++;
    return 0;
}

/* files of the commit (GET /api/models/REPO/tree/COMMIT?recursive=true, following Link: next) */
static int list_files(pull_job *J, mtplx_err *err) {
    char url[3072], what[600];
    snprintf(url, sizeof url, "%s/api/models/%s/tree/%s?recursive=true", J->endpoint, J->ref->repo, J->commit);
    snprintf(what, sizeof what, "%s@%s (file list)", J->ref->repo, J->commit);
    int cap = 0;
    for (int page = 0; page < 1000; page++) {
        json_t *a;
        hub_http_meta meta;
        int rc = api_get(J, url, what, &a, &meta, err);
        if (rc) return rc;
        if (!json_is_array(a)) {
            json_decref(a);
            return err_set(err, MTPLX_EBADFILE, "%s: the hub's tree answer is not an array", url);
        }
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e) {
            if ((rc = add_entry(J, e, &cap, err))) {
                json_decref(a);
                return rc;
            }
        }
        json_decref(a);
        if (!meta.next[0]) return 0;
        snprintf(url, sizeof url, "%s", meta.next);
    }
    return err_set(err, MTPLX_EBADFILE, "%s: more than 1000 pages of files", J->ref->repo);
}

/* Smallest first: config, index and tokenizer files land before the weight shards, so a pull cut
 * short leaves a snapshot whose index names the shards it still lacks (`mtplx models` shows it). */
static int by_size(const void *a, const void *b) {
    const pull_file *x = a, *y = b;
    return x->size != y->size ? (x->size < y->size ? -1 : 1) : strcmp(x->path, y->path);
}

/* ---- one file ---- */

typedef struct {
    pull_job *J;
    pull_file *f;
    CURL *curl;
    int fd;               /* the .incomplete, opened for writing at its end */
    sha256_ctx sha;
    uint64_t have;        /* bytes in the .incomplete (the prefix plus what arrived) */
    uint64_t counted;     /* of them, counted into the job's progress */
    int started;          /* first body byte seen: the status was checked */
    long status;
    int write_errno;      /* write() failure (ENOSPC: disk full) */
    int restarted;        /* the server ignored the Range: started over */
    int too_long;         /* more bytes came than the hub's file list says the file has */
} fetch_ctx;

static size_t on_data(char *buf, size_t size, size_t nmemb, void *user) {
    fetch_ctx *x = user;
    size_t n = size * nmemb;
    if (!x->started) {
        x->started = 1;
        curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &x->status);
        if (x->status != 200 && x->status != 206) return 0; /* an error body: not file content */
        if (x->status == 200 && x->have > 0) { /* the server ignored the Range header: start over */
            if (ftruncate(x->fd, 0) || lseek(x->fd, 0, SEEK_SET) < 0) {
                x->write_errno = errno;
                return 0;
            }
            sha256_init(&x->sha);
            add_progress(x->J, -(int64_t)x->counted, 0);
            x->have = x->counted = 0;
            x->restarted = 1;
        }
    }
    if (job_failed(x->J)) return 0; /* another file failed: stop */
    if (x->have + n > x->f->size) { /* more than the hub said: not the file listed */
        x->too_long = 1;
        return 0;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = write(x->fd, buf + off, n - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            x->write_errno = errno;
            return 0;
        }
        off += (size_t)w;
    }
    sha256_update(&x->sha, buf, n);
    x->have += n;
    x->counted += n;
    add_progress(x->J, (int64_t)n, n);
    return n;
}

/* Hash the first `len` bytes of path into sha. Returns 0 or -1. */
static int hash_prefix(const char *path, uint64_t len, sha256_ctx *sha) {
    enum { CHUNK = 1 << 20 };
    int fd = open(path, O_RDONLY);
    unsigned char *buf = fd >= 0 ? malloc(CHUNK) : NULL;
    int rc = buf ? 0 : -1;
    while (!rc && len > 0) {
        ssize_t r = read(fd, buf, len < CHUNK ? (size_t)len : CHUNK);
        if (r <= 0) {
            rc = -1;
            break;
        }
        sha256_update(sha, buf, (size_t)r);
        len -= (uint64_t)r;
    }
    free(buf);
    if (fd >= 0) close(fd);
    return rc;
}

enum { FETCH_OK = 0, FETCH_RETRY = 1, FETCH_FATAL = 2 };

/* One transfer attempt of f into inc. Returns FETCH_OK with x->sha holding the whole file's hash,
 * FETCH_RETRY (a cut or failed transfer: the .incomplete holds what arrived) or FETCH_FATAL, with
 * err set in both failure cases. */
static int fetch_attempt(pull_job *J, pull_file *f, const char *inc, fetch_ctx *x, mtplx_err *err) {
    struct stat st;
    x->have = stat(inc, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (x->have > f->size) { /* not this file: start over */
        if (truncate(inc, 0)) return err_set(err, MTPLX_EIO, "%s: %s", inc, strerror(errno)), FETCH_FATAL;
        x->have = 0;
    }
    sha256_init(&x->sha);
    if (x->have && hash_prefix(inc, x->have, &x->sha))
        return err_set(err, MTPLX_EIO, "reading %s: %s", inc, strerror(errno)), FETCH_FATAL;
    add_progress(J, (int64_t)x->have - (int64_t)x->counted, 0);
    x->counted = x->have;
    int resuming = x->have > 0;
    if (x->have == f->size) return FETCH_OK; /* the previous attempt got it all */

    x->fd = open(inc, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (x->fd < 0) return err_set(err, MTPLX_EIO, "%s: %s", inc, strerror(errno)), FETCH_FATAL;
    char path_esc[3200], url[4800], range[64];
    escape_path(f->path, path_esc, sizeof path_esc);
    snprintf(url, sizeof url, "%s/%s/resolve/%s/%s", J->endpoint, J->ref->repo, J->commit, path_esc);
    hub_http_meta meta;
    struct curl_slist *hdrs;
    CURL *c = hub_curl_new(url, J->token[0] ? J->token : NULL, &meta, &hdrs, err);
    if (!c) {
        close(x->fd);
        return FETCH_FATAL;
    }
    char cerr[CURL_ERROR_SIZE] = "";
    x->curl = c;
    x->started = 0;
    x->status = 0;
    x->write_errno = 0;
    x->restarted = 0;
    x->too_long = 0;
    if (resuming) {
        snprintf(range, sizeof range, "%llu-", (unsigned long long)x->have);
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    }
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    CURLcode rc = curl_easy_perform(c);
    if (!x->status) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
    meta.status = x->status;
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    int cerrno = close(x->fd) ? errno : 0;
    x->fd = -1;
    if (!x->write_errno && cerrno) x->write_errno = cerrno;

    char what[1400];
    snprintf(what, sizeof what, "%s: %s", J->ref->repo, f->path);
    if (x->write_errno == ENOSPC || x->write_errno == EDQUOT)
        return err_set(err, MTPLX_EIO, "%s: disk full writing %s (%llu of %llu bytes there; free space and pull again "
                       "to resume)", what, inc, (unsigned long long)x->have, (unsigned long long)f->size), FETCH_FATAL;
    if (x->write_errno)
        return err_set(err, MTPLX_EIO, "%s: writing %s: %s", what, inc, strerror(x->write_errno)), FETCH_FATAL;
    if (job_failed(J)) return err_set(err, MTPLX_ECANCELED, "%s: stopped", what), FETCH_FATAL;
    if (x->status == 416) { /* our range is past the end: the partial file is not this file */
        if (truncate(inc, 0)) return err_set(err, MTPLX_EIO, "%s: %s", inc, strerror(errno)), FETCH_FATAL;
        return err_set(err, MTPLX_EIO, "%s: the hub refused the resume range; starting over", what), FETCH_RETRY;
    }
    if (x->status >= 400) {
        hub_http_status_error(&meta, what, J->token[0] != 0, J->token_src, err);
        return x->status >= 500 ? FETCH_RETRY : FETCH_FATAL;
    }
    /* for an LFS file the hub's X-Linked-Etag is its sha256: it must be the one the tree listed */
    if (f->sha256[0] && strlen(meta.linked_etag) == 64 && strcmp(meta.linked_etag, f->sha256))
        return err_set(err, MTPLX_EBADFILE, "%s: the hub's file list says blob %s but the download says %s", what,
                       f->etag, meta.linked_etag), FETCH_FATAL;
    if (x->too_long) { /* neither a retry nor a resume can fix the hub's metadata */
        unlink(inc);
        return err_set(err, MTPLX_EBADFILE, "%s: the download is longer than the %llu bytes the hub lists; the partial "
                       "file was deleted", what, (unsigned long long)f->size), FETCH_FATAL;
    }
    if (resuming && !x->restarted) {
        pthread_mutex_lock(&J->mu);
        J->resumed++;
        pthread_mutex_unlock(&J->mu);
    }
    if (rc != CURLE_OK || x->have < f->size)
        return err_set(err, MTPLX_EIO, "%s: transfer cut after %llu of %llu bytes (%s); `mtplx pull` again resumes it",
                       what, (unsigned long long)x->have, (unsigned long long)f->size,
                       cerr[0] ? cerr : rc != CURLE_OK ? curl_easy_strerror(rc) : "connection closed early"),
               FETCH_RETRY;
    return FETCH_OK;
}

/* Link snapshots/<commit>/<path> -> ../../blobs/<etag> (one more ../ per directory in path). */
static int link_file(pull_job *J, const pull_file *f, mtplx_err *err) {
    char link[HUB_PATH_MAX + 1100], target[HUB_PATH_MAX];
    snprintf(link, sizeof link, "%s/snapshots/%s/%s", J->repo_dir, J->commit, f->path);
    char *slash = strrchr(link, '/');
    *slash = 0;
    if (mkdir_p(link)) return err_set(err, MTPLX_EIO, "%s: %s", link, strerror(errno));
    *slash = '/';
    size_t used = 0;
    target[0] = 0;
    for (const char *p = f->path; (p = strchr(p, '/')); p++) used += (size_t)snprintf(target + used, sizeof target - used, "../");
    snprintf(target + used, sizeof target - used, "../../blobs/%s", f->etag);
    unlink(link);
    if (symlink(target, link)) return err_set(err, MTPLX_EIO, "linking %s: %s", link, strerror(errno));
    return 0;
}

/* Fetch (or find cached) one file, verify it, link it. Returns 0 or an error. */
static int fetch_file(pull_job *J, pull_file *f, mtplx_err *err) {
    char blob[HUB_PATH_MAX + 200], inc[HUB_PATH_MAX + 220], lock[HUB_PATH_MAX + 300];
    snprintf(blob, sizeof blob, "%s/blobs/%s", J->repo_dir, f->etag);
    struct stat st;
    if (stat(blob, &st) == 0 && (uint64_t)st.st_size == f->size) {
        add_progress(J, (int64_t)f->size, 0);
        return link_file(J, f, err);
    }
    /* one process per blob at a time (huggingface_hub's lock place: <cache>/.locks/<repo folder>/) */
    const char *folder = strrchr(J->repo_dir, '/') + 1;
    snprintf(lock, sizeof lock, "%s/.locks/%s", J->cache, folder);
    if (mkdir_p(lock)) return err_set(err, MTPLX_EIO, "%s: %s", lock, strerror(errno));
    snprintf(lock + strlen(lock), sizeof lock - strlen(lock), "/%s.lock", f->etag);
    int lfd = open(lock, O_RDWR | O_CREAT, 0644);
    if (lfd < 0) return err_set(err, MTPLX_EIO, "%s: %s", lock, strerror(errno));
    if (flock(lfd, LOCK_EX | LOCK_NB)) {
        close(lfd);
        return err_set(err, MTPLX_EIO, "%s: %s is being downloaded by another process (lock %s)", J->ref->repo,
                       f->path, lock);
    }
    snprintf(inc, sizeof inc, "%s.incomplete", blob);
    fetch_ctx x = {.J = J, .f = f, .fd = -1};
    int rc = FETCH_FATAL;
    for (int attempt = 0; attempt <= J->o->retries; attempt++) {
        if (attempt) sleep(attempt < 4 ? (unsigned)attempt : 4u);
        rc = fetch_attempt(J, f, inc, &x, err);
        if (rc != FETCH_RETRY) break;
    }
    if (rc == FETCH_OK) {
        unsigned char d[32];
        char hex[65];
        sha256_final(&x.sha, d);
        sha256_hex(d, hex);
        if (f->sha256[0] && strcmp(hex, f->sha256)) {
            unlink(inc); /* never used, never resumed from */
            rc = FETCH_FATAL;
            err_set(err, MTPLX_EBADFILE, "%s: %s: checksum mismatch: the hub says sha256 %s, the download has %s; the "
                    "partial file was deleted", J->ref->repo, f->path, f->sha256, hex);
        } else if (rename(inc, blob)) {
            rc = FETCH_FATAL;
            err_set(err, MTPLX_EIO, "renaming %s: %s", inc, strerror(errno));
        } else {
            pthread_mutex_lock(&J->mu);
            J->downloaded++;
            pthread_mutex_unlock(&J->mu);
        }
    }
    close(lfd);
    if (rc != FETCH_OK) return err->code ? err->code : MTPLX_EIO;
    return link_file(J, f, err);
}

static void *worker(void *arg) {
    pull_job *J = arg;
    for (;;) {
        pthread_mutex_lock(&J->mu);
        int i = J->failed || J->next >= J->n_files ? -1 : J->next++;
        pthread_mutex_unlock(&J->mu);
        if (i < 0) return NULL;
        mtplx_err e;
        err_clear(&e);
        if (fetch_file(J, &J->files[i], &e)) fail(J, &e);
    }
}

/* Refuse to start when the missing bytes do not fit on the cache's file system. */
static int check_space(pull_job *J, mtplx_err *err) {
    uint64_t need = 0;
    for (int i = 0; i < J->n_files; i++) {
        char p[HUB_PATH_MAX + 220];
        struct stat st;
        snprintf(p, sizeof p, "%s/blobs/%s", J->repo_dir, J->files[i].etag);
        if (stat(p, &st) == 0 && (uint64_t)st.st_size == J->files[i].size) continue;
        uint64_t have = 0;
        strcat(p, ".incomplete");
        if (stat(p, &st) == 0 && (uint64_t)st.st_size <= J->files[i].size) have = (uint64_t)st.st_size;
        need += J->files[i].size - have;
    }
    char blobs[HUB_PATH_MAX + 8];
    snprintf(blobs, sizeof blobs, "%s/blobs", J->repo_dir);
    struct statvfs vs;
    if (statvfs(blobs, &vs) == 0) {
        uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
        if (need > avail)
            return err_set(err, MTPLX_EIO, "disk full: %s needs %.2f GB more but %s has %.2f GB free", J->ref->repo,
                           need / 1e9, blobs, avail / 1e9);
    }
    return 0;
}

/* Write refs/<revision> = commit (not for a revision that is the commit itself). */
static int write_ref(pull_job *J, mtplx_err *err) {
    if (!strcmp(J->ref->revision, J->commit)) return 0;
    char p[HUB_PATH_MAX + 300], tmp[HUB_PATH_MAX + 320];
    snprintf(p, sizeof p, "%s/refs/%s", J->repo_dir, J->ref->revision);
    char *slash = strrchr(p, '/');
    *slash = 0;
    if (mkdir_p(p)) return err_set(err, MTPLX_EIO, "%s: %s", p, strerror(errno));
    *slash = '/';
    snprintf(tmp, sizeof tmp, "%s.tmp%d", p, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return err_set(err, MTPLX_EIO, "%s: %s", tmp, strerror(errno));
    int bad = fputs(J->commit, f) < 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, p)) {
        unlink(tmp);
        return err_set(err, MTPLX_EIO, "writing %s: %s", p, strerror(errno));
    }
    return 0;
}

static void init_curl(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int hub_pull(const hub_ref *r, const hub_pull_opts *o, hub_pull_result *res, mtplx_err *err) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_curl); /* curl_global_init is not thread-safe: once, before any thread */

    pull_job *J = calloc(1, sizeof *J);
    if (!J) return err_set(err, MTPLX_ENOMEM, "out of memory");
    J->o = o;
    J->ref = r;
    pthread_mutex_init(&J->mu, NULL);
    const char *ep = o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    snprintf(J->endpoint, sizeof J->endpoint, "%s", ep && *ep ? ep : "https://huggingface.co");
    size_t el = strlen(J->endpoint);
    while (el > 0 && J->endpoint[el - 1] == '/') J->endpoint[--el] = 0;
    if (o->token) {
        snprintf(J->token, sizeof J->token, "%s", o->token);
        snprintf(J->token_src, sizeof J->token_src, "--token");
    } else {
        find_token(J->token, sizeof J->token, J->token_src, sizeof J->token_src);
    }
    int rc = 0;
    if (o->cache) snprintf(J->cache, sizeof J->cache, "%s", o->cache);
    else rc = hub_cache_dir(J->cache, sizeof J->cache, err);
    if (!rc) rc = hub_repo_dir(J->cache, r->repo, J->repo_dir, sizeof J->repo_dir, err);
    if (!rc) rc = resolve_commit(J, err);
    if (!rc) rc = list_files(J, err);
    if (!rc && J->n_files > 1) qsort(J->files, (size_t)J->n_files, sizeof *J->files, by_size);
    if (!rc && J->n_files == 0)
        rc = err_set(err, MTPLX_EIO, "%s@%s: no files to download (%s)", r->repo, r->revision,
                     o->include ? "nothing matches --include" : "the repository is empty");
    char blobs[HUB_PATH_MAX + 8];
    snprintf(blobs, sizeof blobs, "%s/blobs", J->repo_dir);
    if (!rc && mkdir_p(blobs)) rc = err_set(err, MTPLX_EIO, "%s: %s", blobs, strerror(errno));
    if (!rc) rc = check_space(J, err);
    if (!rc) {
        for (int i = 0; i < J->n_files; i++) J->total += J->files[i].size;
        progress_report(&o->progress, 0, J->total);
        int jobs = o->jobs > 0 ? o->jobs : 4;
        if (jobs > J->n_files) jobs = J->n_files;
        if (jobs > 64) jobs = 64;
        pthread_t th[64];
        int started = 0;
        for (; started < jobs; started++)
            if (pthread_create(&th[started], NULL, worker, J)) break;
        if (!started) worker(J);
        for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
        if (J->failed) {
            *err = J->first_err;
            rc = err->code ? err->code : MTPLX_EIO;
        }
    }
    if (!rc) rc = write_ref(J, err);
    if (!rc && res) {
        memset(res, 0, sizeof *res);
        snprintf(res->commit, sizeof res->commit, "%s", J->commit);
        snprintf(res->dir, sizeof res->dir, "%.4000s/snapshots/%s", J->repo_dir, J->commit);
        res->files = J->n_files;
        res->downloaded = J->downloaded;
        res->resumed = J->resumed;
        res->bytes_total = J->total;
        res->bytes_fetched = J->fetched;
    }
    pthread_mutex_destroy(&J->mu);
    free(J->files);
    free(J);
    return rc;
}
