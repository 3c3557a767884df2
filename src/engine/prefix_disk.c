/* prefix_disk.c — checkpoint files of the prefix cache (prefix_disk.h, docs/prefix-cache.md).
 *
 * File `<hash>-<L>[m].mpc`: a 128-byte header (below), the L tokens, the hidden [H] when the MTP
 * history is complete, then the blob (model_snap_blob_bytes). The header holds its own checksum and
 * one of the payload, so a flipped byte anywhere is found. Writes go to `.tmp-<pid>-<n>` in the same
 * directory, are fsync'd, renamed, and the directory is fsync'd: a file under its final name is
 * always complete. */
#include "prefix_disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/fault.h"

#define MAGIC "MTPLXPC1"
#define VERSION 1
#define HDR_BYTES 128
#define QUEUE_CAP ((size_t)512 << 20) /* bytes of blobs waiting to be written, at most */

typedef struct {
    char magic[8];
    uint32_t version, hdr_bytes;
    unsigned char fp[32];   /* model_snap_fingerprint */
    int32_t L, mtp_len, H;  /* positions, MTP rows (-1 none), hidden floats stored (0 or H) */
    int32_t pad0;
    uint64_t hash;          /* prefix hash of the tokens (the cache's FNV-1a) */
    uint64_t blob_bytes;
    uint64_t file_bytes;    /* HDR_BYTES + 4L + 4H + blob_bytes */
    uint64_t payload_sum;   /* checksum of everything after the header */
    uint64_t hdr_sum;       /* checksum of the header bytes before this field */
} disk_hdr;
_Static_assert(sizeof(disk_hdr) <= HDR_BYTES, "header fits");

typedef struct {
    char name[64];      /* file name in the directory */
    int L, mtp_len;
    uint64_t hash;
    int32_t *tokens;    /* [L] */
    size_t bytes;       /* file bytes */
    uint64_t used;      /* LRU clock */
} disk_file;

typedef struct job {
    struct job *next;
    disk_hdr h;
    int32_t *tokens;    /* [L] */
    float *hidden;      /* [H] or NULL */
    void *blob;
    size_t bytes;       /* blob bytes */
} job;

struct prefix_disk {
    char dir[4096];
    unsigned char fp[32];
    size_t budget;
    int on;
    int pause_ms;           /* MTPLX_CACHE_WRITE_PAUSE_MS */
    disk_file *f;           /* [cap] index */
    int n, cap;
    size_t bytes;
    uint64_t clock;
    uint64_t hits, writes, evictions, errors, dropped;
    job *head, **tail;      /* write queue */
    size_t queued;          /* blob bytes queued */
    int busy;               /* the writer is writing a job */
    int stop;
    int has_thread;         /* the writer was started */
    unsigned seq;           /* temp file numbers */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv, idle;
};

/* 64-bit checksum of n bytes: four lanes, each word goes through a bijective multiply-xorshift, so
 * any change of one word changes its lane's result, hence the sum. Several GB/s. */
static uint64_t mix(uint64_t a) {
    a ^= a >> 29;
    a *= 0xbf58476d1ce4e5b9ULL;
    a ^= a >> 32;
    return a;
}

static void sum_words(uint64_t lane[4], const unsigned char *p, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            lane[k] = mix((lane[k] ^ w) * 0x9e3779b97f4a7c15ULL);
        }
    if (n - i) {
        unsigned char t[32] = {0};
        memcpy(t, p + i, n - i);
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, t + 8 * k, 8);
            lane[k] = mix((lane[k] ^ w) * 0x9e3779b97f4a7c15ULL);
        }
    }
}

typedef struct {
    uint64_t lane[4];   /* sum_words lanes */
    uint64_t n;         /* bytes fed */
} cksum;

static void cks_init(cksum *c) {
    for (int k = 0; k < 4; k++) c->lane[k] = 0x243f6a8885a308d3ULL * (uint64_t)(k + 1);
    c->n = 0;
}
static uint64_t cks_final(const cksum *c) {
    uint64_t r = c->n * 0x9e3779b97f4a7c15ULL;
    for (int k = 0; k < 4; k++) r = mix(r ^ c->lane[k]) + (uint64_t)k;
    return r;
}

/* Checksum of the concatenation of up to three parts, fed through a 32-byte carry. */
static uint64_t cks_parts(const void *a, size_t na, const void *b, size_t nb, const void *c, size_t nc) {
    cksum s;
    cks_init(&s);
    unsigned char carry[32];
    size_t cn = 0;
    const void *pp[3] = {a, b, c};
    size_t nn[3] = {na, nb, nc};
    for (int k = 0; k < 3; k++) {
        const unsigned char *p = pp[k];
        size_t n = nn[k];
        if (!n) continue;
        s.n += n;
        if (cn) { /* fill the carry first */
            size_t t = 32 - cn < n ? 32 - cn : n;
            memcpy(carry + cn, p, t);
            cn += t, p += t, n -= t;
            if (cn == 32) sum_words(s.lane, carry, 32), cn = 0;
        }
        size_t whole = n / 32 * 32;
        sum_words(s.lane, p, whole);
        memcpy(carry + cn, p + whole, n - whole);
        cn += n - whole;
    }
    if (cn) sum_words(s.lane, carry, cn);
    return cks_final(&s);
}

static uint64_t hdr_sum(const disk_hdr *h) { return cks_parts(h, offsetof(disk_hdr, hdr_sum), NULL, 0, NULL, 0); }

static void disk_log(const prefix_disk *d, const char *fmt, const char *name, const char *why) {
    fprintf(stderr, "mtplx: prefix cache disk tier (%s): ", d->dir);
    fprintf(stderr, fmt, name, why);
    fputc('\n', stderr);
}

static void path_of(const prefix_disk *d, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", d->dir, name);
}

/* ---- index (mu held) ---- */

static int index_find(const prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp) {
    for (int i = 0; i < d->n; i++) {
        const disk_file *f = &d->f[i];
        if (f->L == L && f->hash == hash && (!need_mtp || f->mtp_len == L - 1) &&
            !memcmp(f->tokens, tokens, sizeof *tokens * (size_t)L))
            return i;
    }
    return -1;
}

static void index_drop(prefix_disk *d, int i, int unlink_it) {
    if (unlink_it) {
        char p[4400];
        path_of(d, d->f[i].name, p, sizeof p);
        unlink(p);
    }
    d->bytes -= d->f[i].bytes;
    free(d->f[i].tokens);
    d->f[i] = d->f[--d->n];
}

static int index_add(prefix_disk *d, const disk_file *f) {
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 64;
        disk_file *e = realloc(d->f, sizeof *e * (size_t)cap);
        if (!e) return -1;
        d->f = e, d->cap = cap;
    }
    d->f[d->n++] = *f;
    d->bytes += f->bytes;
    return 0;
}

/* Remove least recently used files until the budget holds (keep: an index not to remove, or -1). */
static void index_trim(prefix_disk *d, int keep_L, uint64_t keep_hash) {
    while (d->bytes > d->budget && d->n) {
        int v = -1;
        for (int i = 0; i < d->n; i++)
            if (!(d->f[i].L == keep_L && d->f[i].hash == keep_hash) && (v < 0 || d->f[i].used < d->f[v].used)) v = i;
        if (v < 0) break;
        index_drop(d, v, 1);
        d->evictions++;
    }
}

/* ---- writing ---- */

static int write_all(int fd, const void *p, size_t n) {
    const unsigned char *b = p;
    while (n) {
        if (fault_io_point("prefix cache write")) {
            errno = ENOSPC; /* the fault build's stand-in for a full disk */
            return -1;
        }
        ssize_t w = write(fd, b, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        b += w, n -= (size_t)w;
    }
    return 0;
}

static void pause_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

/* Write job j as its final file. Returns 0, or -1 with errno (the temp file is removed). */
static int write_job(prefix_disk *d, const job *j, char *name, size_t name_n) {
    char tmp[4400], fin[4400], tname[64];
    unsigned seq;
    pthread_mutex_lock(&d->mu);
    seq = d->seq++;
    pthread_mutex_unlock(&d->mu);
    snprintf(tname, sizeof tname, ".tmp-%ld-%u", (long)getpid(), seq);
    snprintf(name, name_n, "%016llx-%d%s.mpc", (unsigned long long)j->h.hash, j->h.L, j->h.mtp_len == j->h.L - 1 ? "m" : "");
    path_of(d, tname, tmp, sizeof tmp);
    path_of(d, name, fin, sizeof fin);
    unsigned char hb[HDR_BYTES] = {0};
    memcpy(hb, &j->h, sizeof j->h);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    size_t nt = sizeof(int32_t) * (size_t)j->h.L, nh = sizeof(float) * (size_t)j->h.H;
    int rc = write_all(fd, hb, HDR_BYTES);
    if (!rc) rc = write_all(fd, j->tokens, nt);
    if (!rc && nh) rc = write_all(fd, j->hidden, nh);
    if (!rc && d->pause_ms) { /* tests: the window between a partial and a complete file */
        rc = write_all(fd, j->blob, j->bytes / 2);
        pause_ms(d->pause_ms);
        if (!rc) rc = write_all(fd, (const unsigned char *)j->blob + j->bytes / 2, j->bytes - j->bytes / 2);
    } else if (!rc)
        rc = write_all(fd, j->blob, j->bytes);
    if (!rc && fsync(fd)) rc = -1;
    int e = errno;
    if (close(fd) && !rc) rc = -1, e = errno;
    if (!rc && rename(tmp, fin)) rc = -1, e = errno;
    if (rc) {
        unlink(tmp);
        errno = e;
        return -1;
    }
    int dfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) fsync(dfd), close(dfd);
    return 0;
}

static void job_free(job *j) {
    if (!j) return;
    free(j->tokens);
    free(j->hidden);
    free(j->blob);
    free(j);
}

static void *writer_main(void *arg) {
    prefix_disk *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->head && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
        if (!d->head) break;
        job *j = d->head;
        d->head = j->next;
        if (!d->head) d->tail = &d->head;
        d->busy = 1;
        int skip = !d->on || index_find(d, j->tokens, j->h.L, j->h.hash, j->h.mtp_len == j->h.L - 1) >= 0;
        pthread_mutex_unlock(&d->mu);
        char name[64];
        int rc = skip ? 0 : write_job(d, j, name, sizeof name);
        int e = errno;
        pthread_mutex_lock(&d->mu);
        d->queued -= j->bytes;
        if (skip) {
        } else if (rc) {
            d->errors++;
            if (d->on) {
                d->on = 0;
                pthread_mutex_unlock(&d->mu);
                disk_log(d, "writing a checkpoint%s failed: %s; the disk tier is off, serving from RAM only", "", strerror(e));
                pthread_mutex_lock(&d->mu);
            }
        } else {
            disk_file f = {{0}, j->h.L, j->h.mtp_len, j->h.hash, j->tokens, (size_t)j->h.file_bytes, ++d->clock};
            snprintf(f.name, sizeof f.name, "%s", name);
            int old = index_find(d, j->tokens, j->h.L, j->h.hash, 0);
            if (old >= 0 && !strcmp(d->f[old].name, name)) index_drop(d, old, 0); /* rewritten under the same name */
            if (!index_add(d, &f)) j->tokens = NULL; /* the index owns them now */
            d->writes++;
            index_trim(d, j->h.L, j->h.hash);
        }
        d->busy = 0;
        pthread_cond_broadcast(&d->idle);
        pthread_mutex_unlock(&d->mu);
        job_free(j);
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ---- opening ---- */

/* Read and check a header; 0 when it is one of ours (any fingerprint), -1 otherwise. */
static int hdr_read(int fd, disk_hdr *h) {
    unsigned char b[HDR_BYTES];
    if (pread(fd, b, HDR_BYTES, 0) != HDR_BYTES) return -1;
    memcpy(h, b, sizeof *h);
    if (memcmp(h->magic, MAGIC, 8) || h->version != VERSION || h->hdr_bytes != HDR_BYTES || h->hdr_sum != hdr_sum(h))
        return -1;
    if (h->L < 1 || h->mtp_len < -1 || h->mtp_len > h->L || h->H < 0 || h->H > (1 << 20)) return -1;
    if (h->file_bytes != HDR_BYTES + 4 * (uint64_t)h->L + 4 * (uint64_t)h->H + h->blob_bytes) return -1;
    return 0;
}

/* Index one directory entry: ours and valid -> added; a dead writer's temp file, or a file that is
 * truncated or not a checkpoint -> removed with a log line; another fingerprint -> ignored. */
static void scan_one(prefix_disk *d, const char *name) {
    char p[4400];
    path_of(d, name, p, sizeof p);
    if (!strncmp(name, ".tmp-", 5)) {
        long pid = strtol(name + 5, NULL, 10);
        if (pid > 0 && pid != (long)getpid() && kill((pid_t)pid, 0) && errno == ESRCH) {
            unlink(p);
            disk_log(d, "removed %s, a write that did not finish%s", name, "");
        }
        return;
    }
    size_t ln = strlen(name);
    if (ln < 5 || strcmp(name + ln - 4, ".mpc") || ln >= 64) return;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    disk_hdr h;
    struct stat st;
    int ok = !fstat(fd, &st) && !hdr_read(fd, &h);
    if (ok && memcmp(h.fp, d->fp, 32)) { /* another model or build: not ours to judge or remove */
        close(fd);
        disk_log(d, "ignored %s: %s", name,
                 "written for another model, dtype, quantization or kernels (path, bf16 kernel, activations, "
                 "repacking)");
        return;
    }
    int32_t *t = ok && (uint64_t)st.st_size == h.file_bytes ? malloc(sizeof *t * (size_t)h.L) : NULL;
    if (t && pread(fd, t, sizeof *t * (size_t)h.L, HDR_BYTES) != (ssize_t)(sizeof *t * (size_t)h.L)) free(t), t = NULL;
    close(fd);
    if (!t) {
        unlink(p);
        d->errors++;
        disk_log(d, "removed %s: %s", name, ok ? "truncated" : "not a valid checkpoint header");
        return;
    }
    disk_file f = {{0}, h.L, h.mtp_len, h.hash, t, (size_t)h.file_bytes, (uint64_t)st.st_mtime};
    snprintf(f.name, sizeof f.name, "%s", name);
    if (index_add(d, &f)) free(t);
}

int prefix_disk_open(const char *dir, size_t budget, const unsigned char fp[32], prefix_disk **out, mtplx_err *err) {
    *out = NULL;
    if (strlen(dir) >= 4000) return err_set(err, MTPLX_EINVAL, "--cache-dir: path too long");
    if (mkdir(dir, 0755) && errno != EEXIST) return err_set(err, MTPLX_EIO, "%s: %s", dir, strerror(errno));
    prefix_disk *d = calloc(1, sizeof *d);
    if (!d) return err_set(err, MTPLX_ENOMEM, "out of memory for the disk tier");
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    memcpy(d->fp, fp, 32);
    d->budget = budget ? budget : PREFIX_DISK_DEFAULT_BYTES;
    d->tail = &d->head;
    const char *pm = getenv("MTPLX_CACHE_WRITE_PAUSE_MS");
    d->pause_ms = pm ? atoi(pm) : 0;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    pthread_cond_init(&d->idle, NULL);
    /* the probe: a read-only or full disk is found now, not at the first eviction */
    char probe[4400];
    snprintf(probe, sizeof probe, "%s/.tmp-%ld-probe", dir, (long)getpid());
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    char zero[4096] = {0};
    int rc = fd < 0 ? -1 : write_all(fd, zero, sizeof zero);
    if (!rc && fsync(fd)) rc = -1;
    int e = errno;
    if (fd >= 0) close(fd), unlink(probe);
    if (rc) {
        prefix_disk_close(d);
        return err_set(err, MTPLX_EIO, "%s is not writable: %s", dir, strerror(e));
    }
    DIR *dh = opendir(dir);
    if (!dh) {
        e = errno;
        prefix_disk_close(d);
        return err_set(err, MTPLX_EIO, "%s: %s", dir, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(dh))) scan_one(d, de->d_name);
    closedir(dh);
    for (int i = 0; i < d->n; i++) d->clock = d->f[i].used > d->clock ? d->f[i].used : d->clock;
    index_trim(d, -1, 0); /* a smaller --cache-disk than last time */
    d->on = 1;
    if (pthread_create(&d->th, NULL, writer_main, d)) {
        d->on = 0;
        prefix_disk_close(d);
        return err_set(err, MTPLX_ENOMEM, "cannot start the disk tier's writer thread");
    }
    d->has_thread = 1;
    *out = d;
    return 0;
}

void prefix_disk_close(prefix_disk *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->stop = 1;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (d->has_thread) pthread_join(d->th, NULL);
    while (d->head) {
        job *j = d->head;
        d->head = j->next;
        job_free(j);
    }
    while (d->n) index_drop(d, d->n - 1, 0);
    free(d->f);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    pthread_cond_destroy(&d->idle);
    free(d);
}

void prefix_disk_put(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int mtp_len, const float *hidden,
                     int H, void *blob, size_t bytes) {
    int with_h = hidden && mtp_len == L - 1;
    job *j = calloc(1, sizeof *j);
    if (j) j->tokens = malloc(sizeof *tokens * (size_t)L);
    if (j && with_h) j->hidden = malloc(sizeof(float) * (size_t)H);
    pthread_mutex_lock(&d->mu);
    int take = j && j->tokens && (!with_h || j->hidden) && d->on && !d->stop && d->queued + bytes <= QUEUE_CAP &&
               index_find(d, tokens, L, hash, with_h) < 0;
    if (!take) {
        if (!d->on || d->queued + bytes > QUEUE_CAP) d->dropped++;
        pthread_mutex_unlock(&d->mu);
        job_free(j);
        free(blob);
        return;
    }
    memcpy(j->tokens, tokens, sizeof *tokens * (size_t)L);
    if (with_h) memcpy(j->hidden, hidden, sizeof(float) * (size_t)H);
    j->blob = blob;
    j->bytes = bytes;
    disk_hdr *h = &j->h;
    memcpy(h->magic, MAGIC, 8);
    h->version = VERSION;
    h->hdr_bytes = HDR_BYTES;
    memcpy(h->fp, d->fp, 32);
    h->L = L, h->mtp_len = mtp_len, h->H = with_h ? H : 0;
    h->hash = hash;
    h->blob_bytes = bytes;
    h->file_bytes = HDR_BYTES + 4 * (uint64_t)L + 4 * (uint64_t)h->H + bytes;
    pthread_mutex_unlock(&d->mu);
    /* the checksum outside the lock: it reads only the job */
    h->payload_sum = cks_parts(j->tokens, 4 * (size_t)L, j->hidden, 4 * (size_t)h->H, blob, bytes);
    h->hdr_sum = hdr_sum(h);
    pthread_mutex_lock(&d->mu);
    j->next = NULL;
    *d->tail = j;
    d->tail = &j->next;
    d->queued += bytes;
    pthread_cond_signal(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

int prefix_disk_has(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp) {
    pthread_mutex_lock(&d->mu);
    int has = index_find(d, tokens, L, hash, need_mtp) >= 0;
    for (job *j = d->head; j && !has; j = j->next)
        has = j->h.L == L && j->h.hash == hash && (!need_mtp || j->h.H) &&
              !memcmp(j->tokens, tokens, sizeof *tokens * (size_t)L);
    pthread_mutex_unlock(&d->mu);
    return has;
}

int prefix_disk_find(prefix_disk *d, const int32_t *tokens, int max_len, const uint64_t *hp, int need_mtp, int min_L) {
    pthread_mutex_lock(&d->mu);
    int best = 0;
    for (int i = 0; i < d->n; i++) {
        const disk_file *f = &d->f[i];
        if (f->L <= min_L || f->L <= best || f->L > max_len || hp[f->L] != f->hash) continue;
        if (need_mtp && f->mtp_len != f->L - 1) continue;
        if (!memcmp(f->tokens, tokens, sizeof *tokens * (size_t)f->L)) best = f->L;
    }
    pthread_mutex_unlock(&d->mu);
    return best;
}

/* Drop the index entry of the key (its file removed), counting an error, with a log line. */
static void reject_locked(prefix_disk *d, int i, const char *why) {
    char name[64];
    snprintf(name, sizeof name, "%s", d->f[i].name);
    index_drop(d, i, 1);
    d->errors++;
    disk_log(d, "%s not used and removed: %s", name, why);
}

void prefix_disk_reject(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp, const char *why) {
    pthread_mutex_lock(&d->mu);
    int i = index_find(d, tokens, L, hash, need_mtp);
    if (i >= 0) reject_locked(d, i, why);
    pthread_mutex_unlock(&d->mu);
}

int prefix_disk_read(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp,
                     prefix_disk_loaded *out, mtplx_err *err) {
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&d->mu);
    int i = index_find(d, tokens, L, hash, need_mtp);
    if (i < 0) {
        pthread_mutex_unlock(&d->mu);
        return err_set(err, MTPLX_EINVAL, "disk tier: the checkpoint of %d tokens is gone", L);
    }
    char name[64], p[4400];
    snprintf(name, sizeof name, "%s", d->f[i].name);
    path_of(d, name, p, sizeof p);
    size_t want = d->f[i].bytes;
    d->f[i].used = ++d->clock;
    pthread_mutex_unlock(&d->mu);
    const char *why = NULL;
    unsigned char *buf = NULL;
    int fd = fault_io_point(p) ? -1 : open(p, O_RDONLY | O_CLOEXEC);
    struct stat st;
    disk_hdr h;
    if (fd < 0) why = "cannot be opened";
    else if (fstat(fd, &st) || (size_t)st.st_size != want) why = "truncated (size differs from its header)";
    else if (!(buf = malloc(want))) why = "out of memory reading it";
    else {
        size_t got = 0;
        while (got < want) {
            ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) break;
            got += (size_t)r;
        }
        memcpy(&h, buf, sizeof h);
        if (got != want) why = "short read";
        else if (memcmp(h.magic, MAGIC, 8) || h.version != VERSION || h.hdr_sum != hdr_sum(&h)) why = "header checksum mismatch";
        else if (memcmp(h.fp, d->fp, 32)) why = "another model's fingerprint";
        else if (h.file_bytes != want || h.L != L || h.hash != hash) why = "header does not match the index";
        else if (h.payload_sum != cks_parts(buf + HDR_BYTES, want - HDR_BYTES, NULL, 0, NULL, 0))
            why = "payload checksum mismatch (corrupt)";
        else if (memcmp(buf + HDR_BYTES, tokens, sizeof *tokens * (size_t)L)) why = "tokens differ from its key";
        else if (need_mtp && (h.mtp_len != L - 1 || !h.H)) why = "no MTP history";
    }
    if (fd >= 0) close(fd);
    if (why) {
        free(buf);
        pthread_mutex_lock(&d->mu);
        int k = index_find(d, tokens, L, hash, 0);
        if (k >= 0 && !strcmp(d->f[k].name, name)) reject_locked(d, k, why);
        pthread_mutex_unlock(&d->mu);
        return err_set(err, MTPLX_EBADFILE, "disk tier: %s: %s", name, why);
    }
    struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}}; /* the LRU order survives a restart */
    utimensat(AT_FDCWD, p, now, 0);
    out->L = L;
    out->mtp_len = h.mtp_len;
    out->hidden = h.H ? (const float *)(buf + HDR_BYTES + 4 * (size_t)L) : NULL;
    out->blob = buf + HDR_BYTES + 4 * (size_t)L + 4 * (size_t)h.H;
    out->blob_bytes = (size_t)h.blob_bytes;
    out->buf = buf;
    return 0;
}

void prefix_disk_loaded_free(prefix_disk_loaded *l) {
    free(l->buf);
    memset(l, 0, sizeof *l);
}

void prefix_disk_get_stats(prefix_disk *d, prefix_disk_stats *o) {
    pthread_mutex_lock(&d->mu);
    o->on = d->on;
    o->files = d->n;
    o->bytes = d->bytes;
    o->budget = d->budget;
    o->hits = d->hits;
    o->writes = d->writes;
    o->evictions = d->evictions;
    o->errors = d->errors;
    o->dropped = d->dropped;
    o->queued_bytes = d->queued;
    pthread_mutex_unlock(&d->mu);
}

void prefix_disk_note_hit(prefix_disk *d) {
    pthread_mutex_lock(&d->mu);
    d->hits++;
    pthread_mutex_unlock(&d->mu);
}

void prefix_disk_sync(prefix_disk *d) {
    pthread_mutex_lock(&d->mu);
    while (d->head || d->busy) pthread_cond_wait(&d->idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}
