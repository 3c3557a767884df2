/* safetensors.c — validated, mmap'd view of .safetensors files and sharded checkpoints.
 *
 * File layout: 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data
 * section; offsets are relative to its start. Everything in the header is untrusted: each field is
 * checked before a pointer into the mapping is formed, and every error names the file and tensor.
 * A set owns its mappings and all strings; tensors are kept sorted by name for binary search. */
#include "safetensors.h"

#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/fault.h"
#include "../base/file.h"
#include "../base/mem.h"

/* Same cap as the reference implementation: a larger header is not a real checkpoint. */
#define ST_MAX_HEADER ((uint64_t)100000000)

typedef struct {
    char *path;                /* as opened (owned) */
    file_map map;              /* whole file; for buffers only data/size are set */
    int owns_map;              /* 1: unmap on close */
} st_file;

struct st_set {
    char *where;               /* directory or file path, for "looked in" messages (owned) */
    st_file *files;            /* [n_files] */
    int n_files, cap_files;
    st_tensor *tensors;        /* [n], sorted by name after open; names owned (malloc'd) */
    int n, cap;
    size_t total_bytes;        /* sum of nbytes */
};

typedef struct {               /* one tensor's span while checking overlaps */
    uint64_t begin, end;       /* data-section offsets, end exclusive */
    int idx;                   /* into set->tensors */
} st_span;

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static st_set *set_new(const char *where, mtplx_err *err) {
    st_set *s = mem_zalloc(1, sizeof *s, "safetensors set", err);
    if (!s) return NULL;
    s->where = dup_str(where);
    if (!s->where) {
        free(s);
        err_set(err, MTPLX_ENOMEM, "%s: out of memory", where);
        return NULL;
    }
    return s;
}

void st_close(st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) free((char *)s->tensors[i].name);
    for (int i = 0; i < s->n_files; i++) {
        if (s->files[i].owns_map) file_unmap(&s->files[i].map);
        free(s->files[i].path);
    }
    free(s->tensors);
    free(s->files);
    free(s->where);
    free(s);
}

static int grow(void **p, int *cap, int need, size_t elem, const char *what, mtplx_err *err) {
    if (need <= *cap) return 0;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np) return err_set(err, MTPLX_ENOMEM, "out of memory growing %s", what);
    *p = np;
    *cap = nc;
    return 0;
}

static int cmp_span(const void *a, const void *b) {
    const st_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

/* Read a JSON integer that must be >= 0. Returns 0, or -1 when absent/wrong type/negative. */
static int json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v)) return -1;
    json_int_t x = json_integer_value(v);
    if (x < 0) return -1;
    *out = (uint64_t)x;
    return 0;
}

/* Validate one tensor entry and append it to s. file_idx is the file in s->files holding it.
 * data/data_size describe the data section. Returns 0 or an error naming path and tensor. */
static int add_entry(st_set *s, int file_idx, const char *path, const char *name, json_t *v,
                     const unsigned char *data, uint64_t data_size, uint64_t data_file_off,
                     mtplx_err *err) {
    if (!json_is_object(v))
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: header entry is not a JSON object", path, name);
    if (name[0] == 0) return err_set(err, MTPLX_EBADFILE, "%s: tensor with an empty name", path);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd))
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: missing or non-string \"dtype\"", path, name);
    mtplx_dtype dt;
    if (dtype_parse(json_string_value(jd), &dt) != 0)
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: tensor %s: unknown dtype \"%.32s\"", path, name,
                       json_string_value(jd));
    if (!json_is_array(js))
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: missing or non-array \"shape\"", path, name);
    size_t nd = json_array_size(js);
    if (nd > ST_MAX_DIMS)
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: tensor %s: %zu dimensions (at most %d supported)", path,
                       name, nd, ST_MAX_DIMS);
    st_tensor t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.ndim = (int)nd;
    uint64_t count = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        uint64_t d;
        if (json_u64(json_array_get(js, i), &d) != 0 || d > (uint64_t)INT64_MAX)
            return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: shape[%zu] is not a non-negative integer", path,
                           name, i);
        t.shape[i] = (int64_t)d;
        if (__builtin_mul_overflow(count, d, &count)) overflow = 1;
    }
    uint64_t nbytes;
    if (overflow || __builtin_mul_overflow(count, (uint64_t)dtype_size(dt), &nbytes))
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: shape size overflows", path, name);
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: \"data_offsets\" is not an array of two integers",
                       path, name);
    uint64_t b, e;
    if (json_u64(json_array_get(jo, 0), &b) != 0 || json_u64(json_array_get(jo, 1), &e) != 0)
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: data_offsets are not non-negative integers", path,
                       name);
    if (e < b)
        return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: data_offsets [%llu, %llu] end before begin", path,
                       name, (unsigned long long)b, (unsigned long long)e);
    if (e > data_size)
        return err_set(err, MTPLX_EBADFILE,
                       "%s: tensor %s: data_offsets [%llu, %llu] outside the data section (%llu bytes; file "
                       "truncated?)",
                       path, name, (unsigned long long)b, (unsigned long long)e, (unsigned long long)data_size);
    if (e - b != nbytes)
        return err_set(err, MTPLX_EBADFILE,
                       "%s: tensor %s: shape × %s size is %llu bytes but data_offsets span %llu bytes", path,
                       name, dtype_name(dt), (unsigned long long)nbytes, (unsigned long long)(e - b));
    /* Kernels read elements in place: refuse a span that is not aligned to its element size. */
    if (nbytes > 0 && (data_file_off + b) % dtype_size(dt) != 0)
        return err_set(err, MTPLX_EUNSUPPORTED,
                       "%s: tensor %s: data at file offset %llu is not aligned to its %zu-byte elements "
                       "(re-save the file with a padded header)",
                       path, name, (unsigned long long)(data_file_off + b), dtype_size(dt));
    if (grow((void **)&s->tensors, &s->cap, s->n + 1, sizeof(st_tensor), "tensor table", err)) return err->code;
    t.name = dup_str(name);
    if (!t.name) return err_set(err, MTPLX_ENOMEM, "%s: out of memory", path);
    t.data = data + b;
    t.nbytes = (size_t)nbytes;
    t.file = s->files[file_idx].path;
    s->tensors[s->n++] = t;
    s->total_bytes += t.nbytes;
    return 0;
}

/* Parse and validate the header of one file already in s->files[file_idx]; append its tensors.
 * Returns 0 or an error naming the file (and tensor). */
static int parse_file(st_set *s, int file_idx, mtplx_err *err) {
    const char *path = s->files[file_idx].path;
    const unsigned char *p = s->files[file_idx].map.data;
    uint64_t size = s->files[file_idx].map.size;
    if (size < 8)
        return err_set(err, MTPLX_EBADFILE, "%s: file is %llu bytes, too short for the 8-byte header length",
                       path, (unsigned long long)size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | p[i];
    if (hlen > size - 8)
        return err_set(err, MTPLX_EBADFILE, "%s: header length %llu exceeds the file size %llu (truncated?)",
                       path, (unsigned long long)hlen, (unsigned long long)size);
    if (hlen > ST_MAX_HEADER)
        return err_set(err, MTPLX_EBADFILE, "%s: header length %llu is larger than the %llu-byte limit", path,
                       (unsigned long long)hlen, (unsigned long long)ST_MAX_HEADER);
    if (hlen < 2) return err_set(err, MTPLX_EBADFILE, "%s: header of %llu bytes is not a JSON object", path,
                                 (unsigned long long)hlen);
    json_error_t je;
    json_t *root = json_loadb((const char *)p + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return err_set(err, MTPLX_EBADFILE, "%s: header JSON invalid at byte %d: %s", path, je.position, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return err_set(err, MTPLX_EBADFILE, "%s: header JSON is not an object", path);
    }
    const unsigned char *data = p + 8 + hlen;
    uint64_t data_size = size - 8 - hlen;
    int first = s->n, rc = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) {
                rc = err_set(err, MTPLX_EBADFILE, "%s: __metadata__ is not a JSON object", path);
                break;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = err_set(err, MTPLX_EBADFILE, "%s: __metadata__ value \"%.64s\" is not a string", path, mk);
                    break;
                }
            }
            if (rc) break;
            continue;
        }
        if ((rc = add_entry(s, file_idx, path, key, v, data, data_size, 8 + hlen, err)) != 0) break;
    }
    json_decref(root);
    if (rc) return rc;
    /* No two non-empty spans may overlap. */
    int n = s->n - first;
    if (n > 1) {
        st_span *sp = mem_alloc((size_t)n, sizeof *sp, "span table", err);
        if (!sp) return err->code;
        int m = 0;
        for (int i = first; i < s->n; i++) {
            if (s->tensors[i].nbytes == 0) continue;
            uint64_t b = (uint64_t)((const unsigned char *)s->tensors[i].data - data);
            sp[m++] = (st_span){b, b + s->tensors[i].nbytes, i};
        }
        qsort(sp, (size_t)m, sizeof *sp, cmp_span);
        for (int i = 1; i < m; i++)
            if (sp[i].begin < sp[i - 1].end) {
                rc = err_set(err, MTPLX_EBADFILE, "%s: tensor %s: data_offsets [%llu, %llu] overlap tensor %s [%llu, %llu]",
                             path, s->tensors[sp[i].idx].name, (unsigned long long)sp[i].begin,
                             (unsigned long long)sp[i].end, s->tensors[sp[i - 1].idx].name,
                             (unsigned long long)sp[i - 1].begin, (unsigned long long)sp[i - 1].end);
                break;
            }
        free(sp);
    }
    return rc;
}

/* Append a file slot (path copied). Returns its index or an error code (< 0). */
static int add_file(st_set *s, const char *path, mtplx_err *err) {
    if (grow((void **)&s->files, &s->cap_files, s->n_files + 1, sizeof(st_file), "file table", err))
        return err->code;
    st_file *f = &s->files[s->n_files];
    memset(f, 0, sizeof *f);
    f->path = dup_str(path);
    if (!f->path) return err_set(err, MTPLX_ENOMEM, "%s: out of memory", path);
    return s->n_files++;
}

static int map_and_parse(st_set *s, const char *path, mtplx_err *err) {
    int fi = add_file(s, path, err);
    if (fi < 0) return fi;
    int rc = file_map_open(path, &s->files[fi].map, err);
    if (rc) return rc;
    s->files[fi].owns_map = 1;
    return parse_file(s, fi, err);
}

/* Sort by name and reject duplicates (naming both files). */
static int finish(st_set *s, mtplx_err *err) {
    if (s->n > 1) qsort(s->tensors, (size_t)s->n, sizeof(st_tensor), cmp_tensor);
    for (int i = 1; i < s->n; i++)
        if (strcmp(s->tensors[i].name, s->tensors[i - 1].name) == 0)
            return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: duplicate (also in %s)", s->tensors[i].file,
                           s->tensors[i].name, s->tensors[i - 1].file);
    return 0;
}

int st_open_file(const char *path, st_set **out, mtplx_err *err) {
    *out = NULL;
    st_set *s = set_new(path, err);
    if (!s) return err->code;
    int rc = map_and_parse(s, path, err);
    if (!rc) rc = finish(s, err);
    if (rc) {
        st_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int st_open_buffer(const void *data, size_t size, const char *name, st_set **out, mtplx_err *err) {
    *out = NULL;
    st_set *s = set_new(name, err);
    if (!s) return err->code;
    int fi = add_file(s, name, err), rc = fi < 0 ? fi : 0;
    if (!rc) {
        s->files[fi].map.data = data;
        s->files[fi].map.size = size;
        rc = parse_file(s, fi, err);
    }
    if (!rc) rc = finish(s, err);
    if (rc) {
        st_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int join_path(char *buf, size_t cap, const char *dir, const char *name, mtplx_err *err) {
    int n = snprintf(buf, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return err_set(err, MTPLX_EINVAL, "%s/%s: path too long", dir, name);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sharded checkpoint: open every shard the index names once, then check that the weight_map and the
 * shards' contents agree exactly. */
static int open_index(st_set *s, const char *dir, const char *index_path, mtplx_err *err) {
    size_t len;
    char *text = file_read_all(index_path, &len, err);
    if (!text) return err->code;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root)
        return err_set(err, MTPLX_EBADFILE, "%s: invalid JSON at line %d: %s", index_path, je.line, je.text);
    int rc = 0;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(wm)) {
        json_decref(root);
        return err_set(err, MTPLX_EBADFILE, "%s: no \"weight_map\" object", index_path);
    }
    /* Collect the distinct shard names, validating each. */
    size_t nw = json_object_size(wm);
    const char **shards = nw ? mem_alloc(nw, sizeof *shards, "shard list", err) : NULL;
    if (nw && !shards) {
        json_decref(root);
        return err->code;
    }
    size_t ns = 0;
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
        if (!json_is_string(v)) {
            rc = err_set(err, MTPLX_EBADFILE, "%s: weight_map entry for tensor %s is not a string", index_path, key);
            break;
        }
        const char *f = json_string_value(v);
        if (!f[0] || strchr(f, '/') || strcmp(f, "..") == 0 || strcmp(f, ".") == 0) {
            rc = err_set(err, MTPLX_EBADFILE, "%s: tensor %s: shard name \"%.128s\" is not a plain file name",
                         index_path, key, f);
            break;
        }
        shards[ns++] = f;
    }
    if (!rc && ns) {
        qsort(shards, ns, sizeof *shards, cmp_str);
        size_t u = 1;
        for (size_t i = 1; i < ns; i++)
            if (strcmp(shards[i], shards[u - 1]) != 0) shards[u++] = shards[i];
        ns = u;
    }
    char path[4096];
    for (size_t i = 0; !rc && i < ns; i++) {
        if ((rc = join_path(path, sizeof path, dir, shards[i], err))) break;
        if (!file_exists(path)) {
            /* name one tensor that points at it */
            const char *who = "";
            json_object_foreach(wm, key, v) if (strcmp(json_string_value(v), shards[i]) == 0) { who = key; break; }
            /* The embedded model ships its shards as .xz (Makefile: model); say how to unpack. */
            char xz[4200];
            snprintf(xz, sizeof xz, "%s.xz", path);
            if (file_exists(xz))
                rc = err_set(err, MTPLX_EIO, "%s: tensor %s: shard %s is still packed as %s; run `make model` "
                             "(or `xz -dk %s`)", index_path, who, path, xz, xz);
            else
                rc = err_set(err, MTPLX_EIO, "%s: tensor %s: shard %s does not exist", index_path, who, path);
            break;
        }
        rc = map_and_parse(s, path, err);
    }
    free(shards);
    if (!rc) rc = finish(s, err);
    /* Every mapped tensor is in the shard the index names, and every shard tensor is indexed. */
    if (!rc) {
        json_object_foreach(wm, key, v) {
            const st_tensor *t = st_find(s, key);
            const char *want = json_string_value(v);
            if (!t) {
                rc = err_set(err, MTPLX_EBADFILE, "%s: tensor %s: listed in the index for %s but not in that shard",
                             index_path, key, want);
                break;
            }
            const char *base = strrchr(t->file, '/');
            base = base ? base + 1 : t->file;
            if (strcmp(base, want) != 0) {
                rc = err_set(err, MTPLX_EBADFILE, "%s: tensor %s: the index says %s but it is in %s", index_path, key,
                             want, t->file);
                break;
            }
        }
    }
    if (!rc && (size_t)s->n != nw) {
        for (int i = 0; i < s->n; i++)
            if (!json_object_get(wm, s->tensors[i].name)) {
                rc = err_set(err, MTPLX_EBADFILE, "%s: tensor %s: present in the shard but missing from %s",
                             s->tensors[i].file, s->tensors[i].name, index_path);
                break;
            }
    }
    json_decref(root);
    return rc;
}

static int has_suffix(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

/* Every *.safetensors in dir except our own reference files (golden.safetensors), sorted. */
static int open_glob(st_set *s, const char *dir, mtplx_err *err) {
    DIR *d = opendir(dir);
    if (!d) return err_set(err, MTPLX_EIO, "%s: cannot open directory", dir);
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!has_suffix(de->d_name, ".safetensors") || de->d_name[0] == '.') continue;
        if (strcmp(de->d_name, "golden.safetensors") == 0) continue;
        if ((rc = grow((void **)&names, &cap, n + 1, sizeof *names, "file list", err))) break;
        if (!(names[n] = dup_str(de->d_name))) {
            rc = err_set(err, MTPLX_ENOMEM, "out of memory");
            break;
        }
        n++;
    }
    closedir(d);
    if (!rc && n == 0) rc = err_set(err, MTPLX_EIO, "%s: no model.safetensors, index or *.safetensors weights", dir);
    if (!rc) qsort(names, (size_t)n, sizeof *names, cmp_str);
    char path[4096];
    for (int i = 0; !rc && i < n; i++) {
        if (!(rc = join_path(path, sizeof path, dir, names[i], err))) rc = map_and_parse(s, path, err);
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    if (!rc) rc = finish(s, err);
    return rc;
}

int st_open_dir(const char *dir, st_set **out, mtplx_err *err) {
    *out = NULL;
    if (!file_is_dir(dir)) return err_set(err, MTPLX_EIO, "%s: not a directory", dir);
    st_set *s = set_new(dir, err);
    if (!s) return err->code;
    char path[4096];
    int rc = join_path(path, sizeof path, dir, "model.safetensors.index.json", err);
    if (!rc) {
        if (file_exists(path)) {
            rc = open_index(s, dir, path, err);
        } else if (!(rc = join_path(path, sizeof path, dir, "model.safetensors", err))) {
            if (file_exists(path)) {
                rc = map_and_parse(s, path, err);
                if (!rc) rc = finish(s, err);
            } else {
                rc = open_glob(s, dir, err);
            }
        }
    }
    if (rc) {
        st_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

const st_tensor *st_find(const st_set *s, const char *name) {
    if (!s || !name) return NULL;
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(s->tensors[mid].name, name);
        if (c == 0) return &s->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

int st_count(const st_set *s) { return s ? s->n : 0; }

const st_tensor *st_at(const st_set *s, int i) { return s && i >= 0 && i < s->n ? &s->tensors[i] : NULL; }

size_t st_total_bytes(const st_set *s) { return s ? s->total_bytes : 0; }

const char *st_where(const st_set *s) { return s ? s->where : ""; }

/* "[a, b, c]" into buf. */
static void fmt_shape(char *buf, size_t cap, int ndim, const int64_t *shape) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

const st_tensor *st_require(const st_set *s, const char *name, int ndim, const int64_t *shape, mtplx_err *err) {
    const st_tensor *t = st_find(s, name);
    if (!t) {
        err_set(err, MTPLX_EBADFILE, "missing tensor %s (looked in %s)", name, st_where(s));
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == shape[i];
    if (!ok) {
        char got[256], want[256];
        fmt_shape(got, sizeof got, t->ndim, t->shape);
        fmt_shape(want, sizeof want, ndim, shape);
        const char *base = strrchr(t->file, '/');
        err_set(err, MTPLX_EBADFILE, "%s: tensor %s: shape %s, expected %s", base ? base + 1 : t->file, name, got,
                want);
        return NULL;
    }
    return t;
}

/* ---- writing ---- */

typedef struct {
    int idx;                   /* into items */
    size_t esize;
} w_order;

static int cmp_worder(const void *a, const void *b) {
    const w_order *x = a, *y = b;
    if (x->esize != y->esize) return x->esize > y->esize ? -1 : 1;
    return x->idx - y->idx;
}

int st_write_file(const char *path, const st_write_item *items, int n, const char *metadata_json,
                  mtplx_err *err) {
    if (n < 0 || (n > 0 && !items)) return err_set(err, MTPLX_EINVAL, "%s: bad item list", path);
    json_t *root = json_object();
    w_order *ord = n ? mem_alloc((size_t)n, sizeof *ord, "write order", err) : NULL;
    if (!root || (n && !ord)) {
        json_decref(root);
        free(ord);
        return err_set(err, MTPLX_ENOMEM, "%s: out of memory", path);
    }
    int rc = 0;
    if (metadata_json) {
        json_error_t je;
        json_t *md = json_loads(metadata_json, 0, &je);
        int ok = json_is_object(md);
        const char *k;
        json_t *v;
        if (ok) json_object_foreach(md, k, v) if (!json_is_string(v)) ok = 0;
        if (!ok) {
            json_decref(md);
            rc = err_set(err, MTPLX_EINVAL, "%s: metadata must be a JSON object of strings", path);
        } else {
            json_object_set_new(root, "__metadata__", md);
        }
    }
    /* Write larger elements first so every span stays aligned to its element size. */
    for (int i = 0; !rc && i < n; i++) {
        const st_write_item *it = &items[i];
        if (!it->name || !it->name[0] || strcmp(it->name, "__metadata__") == 0)
            rc = err_set(err, MTPLX_EINVAL, "%s: item %d has no usable name", path, i);
        else if (dtype_size(it->dtype) == 0)
            rc = err_set(err, MTPLX_EINVAL, "%s: tensor %s: bad dtype", path, it->name);
        else if (it->ndim < 0 || it->ndim > ST_MAX_DIMS)
            rc = err_set(err, MTPLX_EINVAL, "%s: tensor %s: ndim %d", path, it->name, it->ndim);
        else if (json_object_get(root, it->name))
            rc = err_set(err, MTPLX_EINVAL, "%s: tensor %s: duplicate name", path, it->name);
        else if (json_object_set_new(root, it->name, json_null()))
            rc = err_set(err, MTPLX_EINVAL, "%s: tensor %s: name is not valid UTF-8", path, it->name);
        ord[i] = (w_order){i, dtype_size(it->dtype)};
    }
    if (!rc && n > 1) qsort(ord, (size_t)n, sizeof *ord, cmp_worder);
    uint64_t off = 0;
    size_t *sizes = n ? mem_alloc((size_t)n, sizeof *sizes, "sizes", err) : NULL;
    if (!rc && n && !sizes) rc = err->code;
    for (int j = 0; !rc && j < n; j++) {
        const st_write_item *it = &items[ord[j].idx];
        uint64_t cnt = 1, nb;
        int ovf = 0;
        for (int d = 0; d < it->ndim; d++) {
            if (it->shape[d] < 0) {
                ovf = 2;
                break;
            }
            if (__builtin_mul_overflow(cnt, (uint64_t)it->shape[d], &cnt)) ovf = 1;
        }
        if (ovf || __builtin_mul_overflow(cnt, (uint64_t)ord[j].esize, &nb) || nb > SIZE_MAX) {
            rc = err_set(err, MTPLX_EINVAL, "%s: tensor %s: bad shape", path, it->name);
            break;
        }
        if (nb && !it->data) {
            rc = err_set(err, MTPLX_EINVAL, "%s: tensor %s: no data", path, it->name);
            break;
        }
        sizes[ord[j].idx] = (size_t)nb;
        json_t *e = json_object(), *sh = json_array(), *of = json_array();
        json_object_set_new(e, "dtype", json_string(dtype_name(it->dtype)));
        for (int d = 0; d < it->ndim; d++) json_array_append_new(sh, json_integer(it->shape[d]));
        json_object_set_new(e, "shape", sh);
        json_array_append_new(of, json_integer((json_int_t)off));
        json_array_append_new(of, json_integer((json_int_t)(off + nb)));
        json_object_set_new(e, "data_offsets", of);
        json_object_set_new(root, it->name, e);
        off += nb;
    }
    char *hdr = rc ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!rc && !hdr) rc = err_set(err, MTPLX_ENOMEM, "%s: out of memory building the header", path);
    FILE *f = NULL;
    if (!rc && !(f = fault_io_point(path) ? NULL : fopen(path, "wb"))) rc = err_set(err, MTPLX_EIO, "%s: cannot create file", path);
    if (!rc) {
        size_t hl = strlen(hdr), padded = (hl + 7) & ~(size_t)7;
        unsigned char lenb[8];
        for (int i = 0; i < 8; i++) lenb[i] = (unsigned char)((uint64_t)padded >> (8 * i));
        int ok = !fault_io_point(path) && fwrite(lenb, 1, 8, f) == 8 && fwrite(hdr, 1, hl, f) == hl;
        for (size_t i = hl; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
        for (int j = 0; ok && j < n; j++) {
            size_t nb = sizes[ord[j].idx];
            if (nb) ok = fwrite(items[ord[j].idx].data, 1, nb, f) == nb;
        }
        if (fclose(f) != 0) ok = 0;
        if (!ok) {
            unlink(path);
            rc = err_set(err, MTPLX_EIO, "%s: write failed", path);
        }
    }
    free(hdr);
    free(sizes);
    free(ord);
    return rc;
}
