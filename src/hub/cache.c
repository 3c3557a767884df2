/* cache.c — the local hub cache: reference parsing, where the cache is, resolving a reference to a
 * snapshot directory, listing and removing cached models. Layout: hub.h. No network here. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub.h"
#include "hub_internal.h"

/* A repo name part: [A-Za-z0-9._-]+, not starting with '.' or '-', no "..". */
static int name_ok(const char *s, size_t n) {
    if (n == 0 || n > 96 || s[0] == '.' || s[0] == '-') return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!isalnum(c) && c != '-' && c != '_' && c != '.') return 0;
        if (c == '.' && i + 1 < n && s[i + 1] == '.') return 0;
    }
    return 1;
}

/* A revision: printable, no spaces, no "..", not starting with '/' (refs/pr/1 has inner slashes). */
static int rev_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= 256 || s[0] == '/' || s[n - 1] == '/' || strstr(s, "..") || strstr(s, "//")) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || s[i] == '\\' || (unsigned char)s[i] >= 0x7f) return 0;
    return 1;
}

int hub_parse_ref(const char *s, hub_ref *r, mtplx_err *err) {
    memset(r, 0, sizeof *r);
    const char *at = strchr(s, '@');
    size_t repo_len = at ? (size_t)(at - s) : strlen(s);
    const char *slash = memchr(s, '/', repo_len);
    if (!slash || memchr(slash + 1, '/', repo_len - (size_t)(slash + 1 - s)) || !name_ok(s, (size_t)(slash - s)) ||
        !name_ok(slash + 1, repo_len - (size_t)(slash + 1 - s)))
        return err_set(err, MTPLX_EINVAL, "'%s' is not a repository reference ORG/NAME[@REVISION]", s);
    memcpy(r->repo, s, repo_len);
    if (at) {
        if (!rev_ok(at + 1)) return err_set(err, MTPLX_EINVAL, "'%s': bad revision '%s'", s, at + 1);
        snprintf(r->revision, sizeof r->revision, "%s", at + 1);
        r->has_revision = 1;
    } else {
        snprintf(r->revision, sizeof r->revision, "main");
    }
    return 0;
}

int hub_looks_like_ref(const char *s) {
    hub_ref r;
    return s && hub_parse_ref(s, &r, NULL) == 0;
}

int hub_cache_dir(char *out, size_t n, mtplx_err *err) {
    const char *v;
    int k;
    if ((v = getenv("HF_HUB_CACHE")) && *v) k = snprintf(out, n, "%s", v);
    else if ((v = getenv("HUGGINGFACE_HUB_CACHE")) && *v) k = snprintf(out, n, "%s", v);
    else if ((v = getenv("HF_HOME")) && *v) k = snprintf(out, n, "%s/hub", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) k = snprintf(out, n, "%s/huggingface/hub", v);
    else if ((v = getenv("HOME")) && *v) k = snprintf(out, n, "%s/.cache/huggingface/hub", v);
    else return err_set(err, MTPLX_EINVAL, "no model cache: set HF_HUB_CACHE, HF_HOME or HOME");
    if (k < 0 || (size_t)k >= n) return err_set(err, MTPLX_ERANGE, "model cache path too long");
    return 0;
}

int hub_repo_dir(const char *cache, const char *repo, char *out, size_t n, mtplx_err *err) {
    const char *slash = strchr(repo, '/');
    int k = slash ? snprintf(out, n, "%s/models--%.*s--%s", cache, (int)(slash - repo), repo, slash + 1)
                  : snprintf(out, n, "%s/models--%s", cache, repo);
    if (k < 0 || (size_t)k >= n) return err_set(err, MTPLX_ERANGE, "%s: cache path too long", repo);
    return 0;
}

int hub_read_line(const char *path, char *out, size_t n) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int ok = fgets(out, (int)n, f) != NULL;
    fclose(f);
    if (!ok) return -1;
    out[strcspn(out, "\r\n")] = 0;
    return 0;
}

int hub_is_commit(const char *s) {
    if (strlen(s) != 40) return 0;
    for (int i = 0; i < 40; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) return 0;
    return 1;
}

int hub_resolve(const char *cache, const hub_ref *r, char *dir, size_t n, char commit[41], mtplx_err *err) {
    char repo_dir[HUB_PATH_MAX], path[HUB_PATH_MAX + 300], c[128] = "";
    int rc = hub_repo_dir(cache, r->repo, repo_dir, sizeof repo_dir, err);
    if (rc) return rc;
    snprintf(path, sizeof path, "%s/refs/%s", repo_dir, r->revision);
    if (hub_read_line(path, c, sizeof c) != 0 || !hub_is_commit(c)) {
        if (hub_is_commit(r->revision)) snprintf(c, sizeof c, "%.40s", r->revision);
        else c[0] = 0;
    }
    if (c[0]) {
        int k = snprintf(dir, n, "%s/snapshots/%s", repo_dir, c);
        if (k < 0 || (size_t)k >= n) return err_set(err, MTPLX_ERANGE, "%s: cache path too long", r->repo);
        struct stat st;
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (commit) snprintf(commit, 41, "%s", c);
            return 0;
        }
    }
    return err_set(err, MTPLX_EIO, "%s@%s is not in the model cache %s (`mtplx pull %s%s%s` downloads it)", r->repo,
                   r->revision, cache, r->repo, r->has_revision ? "@" : "", r->has_revision ? r->revision : "");
}

/* ---- listing ---- */

/* Sum the sizes of the blobs the files under dir (recursively) link to; *files counts them,
 * *missing those whose target does not exist. */
static void snapshot_walk(const char *dir, uint64_t *bytes, int *files, int *missing) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[HUB_PATH_MAX + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat lst, st;
        if (lstat(p, &lst)) continue;
        if (S_ISDIR(lst.st_mode)) {
            snapshot_walk(p, bytes, files, missing);
            continue;
        }
        (*files)++;
        if (stat(p, &st)) (*missing)++;
        else *bytes += (uint64_t)st.st_size;
    }
    closedir(d);
}

/* Names of the refs (recursively: refs/pr/1) under refs_dir whose content is commit, appended
 * comma-separated to out. */
static void refs_of(const char *refs_dir, const char *prefix, const char *commit, char *out, size_t n) {
    DIR *d = opendir(refs_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[HUB_PATH_MAX + 256], name[512], c[128];
        snprintf(p, sizeof p, "%s/%s", refs_dir, e->d_name);
        snprintf(name, sizeof name, "%s%s", prefix, e->d_name);
        struct stat st;
        if (stat(p, &st)) continue;
        if (S_ISDIR(st.st_mode)) {
            char sub[520];
            snprintf(sub, sizeof sub, "%s/", name);
            refs_of(p, sub, commit, out, n);
        } else if (hub_read_line(p, c, sizeof c) == 0 && !strcmp(c, commit)) {
            size_t used = strlen(out);
            snprintf(out + used, n - used, "%s%s", used ? "," : "", name);
        }
    }
    closedir(d);
}

static int snap_cmp(const void *a, const void *b) {
    const hub_snapshot *x = a, *y = b;
    int c = strcmp(x->repo, y->repo);
    return c ? c : strcmp(x->commit, y->commit);
}

int hub_list(const char *cache, hub_snapshot **out, int *n, mtplx_err *err) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(cache);
    if (!d) return errno == ENOENT ? 0 : err_set(err, MTPLX_EIO, "%s: %s", cache, strerror(errno));
    hub_snapshot *v = NULL;
    int cnt = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "models--", 8)) continue;
        /* models--ORG--NAME -> ORG/NAME (the first "--" separates; names cannot contain "--"... they
         * can, but ORG cannot, which is what huggingface_hub assumes too) */
        char repo[256];
        snprintf(repo, sizeof repo, "%s", e->d_name + 8);
        char *sep = strstr(repo, "--");
        if (sep) {
            *sep = '/';
            memmove(sep + 1, sep + 2, strlen(sep + 2) + 1);
        }
        char snaps[HUB_PATH_MAX + 300];
        snprintf(snaps, sizeof snaps, "%s/%s/snapshots", cache, e->d_name);
        DIR *sd = opendir(snaps);
        if (!sd) continue;
        struct dirent *s;
        while ((s = readdir(sd))) {
            if (s->d_name[0] == '.') continue;
            if (cnt == cap) {
                cap = cap ? 2 * cap : 8;
                hub_snapshot *nv = realloc(v, (size_t)cap * sizeof *nv);
                if (!nv) {
                    closedir(sd);
                    closedir(d);
                    free(v);
                    return err_set(err, MTPLX_ENOMEM, "out of memory listing %s", cache);
                }
                v = nv;
            }
            hub_snapshot *h = &v[cnt++];
            memset(h, 0, sizeof *h);
            snprintf(h->repo, sizeof h->repo, "%s", repo);
            snprintf(h->commit, sizeof h->commit, "%.63s", s->d_name);
            if (snprintf(h->dir, sizeof h->dir, "%.3900s/%.150s", snaps, s->d_name) >= (int)sizeof h->dir) {
                cnt--;
                continue;
            }
            int missing = 0;
            snapshot_walk(h->dir, &h->bytes, &h->files, &missing);
            h->incomplete = missing > 0;
            char refs[HUB_PATH_MAX + 300];
            snprintf(refs, sizeof refs, "%s/%s/refs", cache, e->d_name);
            refs_of(refs, "", h->commit, h->refs, sizeof h->refs);
        }
        closedir(sd);
    }
    closedir(d);
    if (cnt) qsort(v, (size_t)cnt, sizeof *v, snap_cmp);
    *out = v;
    *n = cnt;
    return 0;
}

/* ---- removal ---- */

/* rm -r path (no symlink is followed). Adds the sizes of regular files removed to *bytes. */
static int remove_tree(const char *path, uint64_t *bytes) {
    struct stat st;
    if (lstat(path, &st)) return errno == ENOENT ? 0 : -1;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return -1;
        struct dirent *e;
        int rc = 0;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char p[HUB_PATH_MAX + 256];
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            rc |= remove_tree(p, bytes);
        }
        closedir(d);
        return rc | rmdir(path);
    }
    if (S_ISREG(st.st_mode) && bytes) *bytes += (uint64_t)st.st_size;
    return unlink(path);
}

/* Add the blob names (last path component of each link target) under dir to a list. */
static void collect_blob_names(const char *dir, char ***names, int *n, int *cap) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[HUB_PATH_MAX + 256], target[HUB_PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat lst;
        if (lstat(p, &lst)) continue;
        if (S_ISDIR(lst.st_mode)) {
            collect_blob_names(p, names, n, cap);
            continue;
        }
        ssize_t k = readlink(p, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = 0;
        const char *base = strrchr(target, '/');
        base = base ? base + 1 : target;
        if (*n == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            char **nv = realloc(*names, (size_t)*cap * sizeof *nv);
            if (!nv) return;
            *names = nv;
        }
        (*names)[(*n)++] = strdup(base);
    }
    closedir(d);
}

/* Delete refs under refs_dir (recursively) whose content is commit. */
static void remove_refs_to(const char *refs_dir, const char *commit) {
    DIR *d = opendir(refs_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[HUB_PATH_MAX + 256], c[128];
        snprintf(p, sizeof p, "%s/%s", refs_dir, e->d_name);
        struct stat st;
        if (stat(p, &st)) continue;
        if (S_ISDIR(st.st_mode)) remove_refs_to(p, commit);
        else if (hub_read_line(p, c, sizeof c) == 0 && !strcmp(c, commit)) unlink(p);
    }
    closedir(d);
}

int hub_remove(const char *cache, const hub_ref *r, uint64_t *freed, mtplx_err *err) {
    char repo_dir[HUB_PATH_MAX], snap[HUB_PATH_MAX], commit[41];
    uint64_t bytes = 0;
    int rc = hub_repo_dir(cache, r->repo, repo_dir, sizeof repo_dir, err);
    if (rc) return rc;
    struct stat st;
    if (stat(repo_dir, &st) || !S_ISDIR(st.st_mode))
        return err_set(err, MTPLX_EIO, "%s is not in the model cache %s", r->repo, cache);
    if (!r->has_revision) { /* blobs first: the bytes freed are the blobs' (refs and links are tiny) */
        char blobs[HUB_PATH_MAX + 8];
        snprintf(blobs, sizeof blobs, "%s/blobs", repo_dir);
        if (remove_tree(blobs, &bytes) || remove_tree(repo_dir, NULL))
            return err_set(err, MTPLX_EIO, "removing %s: %s", repo_dir, strerror(errno));
        if (freed) *freed = bytes;
        return 0;
    }
    if ((rc = hub_resolve(cache, r, snap, sizeof snap, commit, err))) return rc;
    if (remove_tree(snap, NULL)) return err_set(err, MTPLX_EIO, "removing %s: %s", snap, strerror(errno));
    char sub[HUB_PATH_MAX + 32];
    snprintf(sub, sizeof sub, "%s/refs", repo_dir);
    remove_refs_to(sub, commit);
    /* blobs still linked from the remaining snapshots stay */
    char **keep = NULL;
    int n_keep = 0, cap = 0;
    snprintf(sub, sizeof sub, "%s/snapshots", repo_dir);
    collect_blob_names(sub, &keep, &n_keep, &cap);
    snprintf(sub, sizeof sub, "%s/blobs", repo_dir);
    DIR *d = opendir(sub);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            int used = 0;
            for (int i = 0; i < n_keep && !used; i++) used = keep[i] && !strcmp(keep[i], e->d_name);
            if (used) continue;
            char p[HUB_PATH_MAX + 300];
            snprintf(p, sizeof p, "%s/%s", sub, e->d_name);
            remove_tree(p, &bytes);
        }
        closedir(d);
    }
    for (int i = 0; i < n_keep; i++) free(keep[i]);
    free(keep);
    if (freed) *freed = bytes;
    return 0;
}
