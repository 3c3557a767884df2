/* jinja_value.c — the template engine's values with Python semantics: arena allocation, strings,
 * lists, ordered dicts, truthiness, equality and ordering, str()/repr(), json.dumps, UTF-8 helpers.
 * Everything is allocated in the render (or parse) arena; errors jump out through jx_fail. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "jinja_int.h"

/* ---- arena ---------------------------------------------------------------------------------- */

void *arena_alloc(arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    arena_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > (size_t)64 * 1024 ? n : (size_t)64 * 1024;
        if (b && b->cap * 2 > cap && b->cap < (size_t)4 << 20) cap = b->cap * 2 > n ? b->cap * 2 : n;
        if (a->total + cap + sizeof(arena_blk) > a->limit || cap > a->limit) return NULL;
        b = malloc(sizeof(arena_blk) + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        b->next = a->head;
        a->head = b;
        a->total += cap + sizeof(arena_blk);
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void arena_free_all(arena *a) {
    arena_blk *b = a->head;
    while (b) {
        arena_blk *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}

void *jx_alloc(jctx *c, size_t n) {
    void *p = arena_alloc(&c->ar, n);
    if (!p)
        jx_fail(c, c->cur_line, "render exceeded its memory budget (%zu bytes); the template builds values too large",
                c->lim.max_memory);
    return p;
}

void jx_charge(jctx *c, size_t units) {
    c->steps += units;
    if (c->steps > c->lim.max_steps)
        jx_fail(c, c->cur_line, "render exceeded its work budget (%zu steps); the template may loop forever",
                c->lim.max_steps);
}

/* ---- UTF-8 ---------------------------------------------------------------------------------- */

uint32_t u8_decode(const char *s, size_t n, size_t *adv) {
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0) { *adv = 0; return 0; }
    if (p[0] < 0x80) { *adv = 1; return p[0]; }
    if ((p[0] & 0xe0) == 0xc0 && n >= 2) { *adv = 2; return ((uint32_t)(p[0] & 0x1f) << 6) | (p[1] & 0x3f); }
    if ((p[0] & 0xf0) == 0xe0 && n >= 3) {
        *adv = 3;
        return ((uint32_t)(p[0] & 0x0f) << 12) | ((uint32_t)(p[1] & 0x3f) << 6) | (p[2] & 0x3f);
    }
    if ((p[0] & 0xf8) == 0xf0 && n >= 4) {
        *adv = 4;
        return ((uint32_t)(p[0] & 0x07) << 18) | ((uint32_t)(p[1] & 0x3f) << 12) | ((uint32_t)(p[2] & 0x3f) << 6) |
               (p[3] & 0x3f);
    }
    *adv = 1;
    return 0xfffd;
}

size_t u8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xc0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

int u8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c = p[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) { len = 2; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { len = 3; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { len = 4; cp = c & 0x07; min = 0x10000; }
        else return 0;
        if (n - i < len) return 0;
        for (size_t k = 1; k < len; k++) {
            if ((p[i + k] & 0xc0) != 0x80) return 0;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

size_t u8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80) k++;
    return k;
}

size_t u8_offset(const char *s, size_t n, size_t cp) {
    size_t k = 0, i = 0;
    for (; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (k == cp) return i;
            k++;
        }
    }
    return n;
}

/* Python str.isspace(): the Unicode White_Space-ish set Python uses (bidi WS/B/S or Zs). */
int py_isspace(uint32_t cp) {
    switch (cp) {
    case 0x09: case 0x0a: case 0x0b: case 0x0c: case 0x0d: case 0x1c: case 0x1d: case 0x1e: case 0x1f:
    case 0x20: case 0x85: case 0xa0: case 0x1680: case 0x2028: case 0x2029: case 0x202f: case 0x205f:
    case 0x3000:
        return 1;
    default:
        return cp >= 0x2000 && cp <= 0x200a;
    }
}

/* ---- strings, lists, dicts ------------------------------------------------------------------ */

jv jv_str(jctx *c, const char *p, size_t n) {
    jstr *s = jx_alloc(c, sizeof(jstr) + n + 1);
    s->n = n;
    if (n) memcpy(s->p, p, n);
    s->p[n] = 0;
    jv v = {.k = JV_STR};
    v.u.s = s;
    return v;
}

jv jv_strf(jctx *c, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    return jv_str(c, buf, (size_t)n);
}

jv jv_list(jctx *c, size_t cap, int tuple) {
    jlist *l = jx_alloc(c, sizeof(jlist));
    l->n = 0;
    l->cap = cap ? cap : 4;
    l->tuple = tuple;
    l->v = jx_alloc(c, l->cap * sizeof(jv));
    jv v = {.k = JV_LIST};
    v.u.l = l;
    return v;
}

void jl_push(jctx *c, jv list, jv item) {
    jlist *l = list.u.l;
    if (l->n == l->cap) {
        size_t cap = l->cap * 2;
        jv *nv = jx_alloc(c, cap * sizeof(jv));
        memcpy(nv, l->v, l->n * sizeof(jv));
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = item;
}

jv jv_dict(jctx *c, size_t cap) {
    jdict *d = jx_alloc(c, sizeof(jdict));
    memset(d, 0, sizeof *d);
    d->cap = cap ? cap : 4;
    d->keys = jx_alloc(c, d->cap * sizeof(jv));
    d->vals = jx_alloc(c, d->cap * sizeof(jv));
    jv v = {.k = JV_DICT};
    v.u.d = d;
    return v;
}

static uint64_t bytes_hash(const char *p, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static uint64_t key_hash(const jv *k) {
    switch (k->k) {
    case JV_STR: return bytes_hash(k->u.s->p, k->u.s->n);
    case JV_BOOL: return (uint64_t)k->u.b * 0x9e3779b97f4a7c15ull;
    case JV_INT: return (uint64_t)k->u.i * 0x9e3779b97f4a7c15ull;
    case JV_FLOAT:
        if (k->u.f == floor(k->u.f) && fabs(k->u.f) < 9e18) return (uint64_t)(int64_t)k->u.f * 0x9e3779b97f4a7c15ull;
        {
            uint64_t b;
            memcpy(&b, &k->u.f, 8);
            return b * 0x9e3779b97f4a7c15ull;
        }
    case JV_NONE: return 0x12345;
    default: return (uint64_t)(uintptr_t)k->u.l * 0x9e3779b97f4a7c15ull;
    }
}

static void dict_reindex(jctx *c, jdict *d) {
    size_t cap = 16;
    while (cap < d->n * 2 + 2) cap *= 2;
    d->idx = jx_alloc(c, cap * sizeof(uint32_t));
    memset(d->idx, 0, cap * sizeof(uint32_t));
    d->idx_cap = cap;
    for (size_t i = 0; i < d->n; i++) {
        size_t h = key_hash(&d->keys[i]) & (cap - 1);
        while (d->idx[h]) h = (h + 1) & (cap - 1);
        d->idx[h] = (uint32_t)(i + 1);
    }
}

int jd_find(jctx *c, const jdict *d, jv key) {
    if (d->idx) {
        size_t h = key_hash(&key) & (d->idx_cap - 1);
        while (d->idx[h]) {
            size_t i = d->idx[h] - 1;
            if (jv_eq(c, d->keys[i], key)) return (int)i;
            h = (h + 1) & (d->idx_cap - 1);
        }
        return -1;
    }
    for (size_t i = 0; i < d->n; i++)
        if (jv_eq(c, d->keys[i], key)) return (int)i;
    return -1;
}

jv *jd_get_str(jctx *c, const jdict *d, const char *key) {
    (void)c;
    size_t n = strlen(key);
    if (d->idx) {
        size_t h = bytes_hash(key, n) & (d->idx_cap - 1);
        while (d->idx[h]) {
            size_t i = d->idx[h] - 1;
            const jv *k = &d->keys[i];
            if (k->k == JV_STR && k->u.s->n == n && !memcmp(k->u.s->p, key, n)) return &d->vals[i];
            h = (h + 1) & (d->idx_cap - 1);
        }
        return NULL;
    }
    for (size_t i = 0; i < d->n; i++)
        if (d->keys[i].k == JV_STR && d->keys[i].u.s->n == n && !memcmp(d->keys[i].u.s->p, key, n))
            return &d->vals[i];
    return NULL;
}

void jd_set(jctx *c, jdict *d, jv key, jv val) {
    int i = jd_find(c, d, key);
    if (i >= 0) {
        d->vals[i] = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap * 2;
        jv *nk = jx_alloc(c, cap * sizeof(jv)), *nv = jx_alloc(c, cap * sizeof(jv));
        memcpy(nk, d->keys, d->n * sizeof(jv));
        memcpy(nv, d->vals, d->n * sizeof(jv));
        d->keys = nk;
        d->vals = nv;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    if (d->idx && d->n * 2 + 2 <= d->idx_cap) {
        size_t h = key_hash(&key) & (d->idx_cap - 1);
        while (d->idx[h]) h = (h + 1) & (d->idx_cap - 1);
        d->idx[h] = (uint32_t)d->n;
    } else if (d->n > 8) {
        dict_reindex(c, d);
    }
}

jv jv_func(jctx *c, int kind, const char *name) {
    jfunc *f = jx_alloc(c, sizeof(jfunc));
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->name = name;
    jv v = {.k = JV_FUNC};
    v.u.fn = f;
    return v;
}

jv jv_from_json(jctx *c, json_t *j) {
    jx_charge(c, 1);
    switch (json_typeof(j)) {
    case JSON_NULL: return jv_none();
    case JSON_TRUE: return jv_bool(1);
    case JSON_FALSE: return jv_bool(0);
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_STRING: return jv_str(c, json_string_value(j), json_string_length(j));
    case JSON_ARRAY: {
        size_t n = json_array_size(j);
        jv l = jv_list(c, n, 0);
        for (size_t i = 0; i < n; i++) jl_push(c, l, jv_from_json(c, json_array_get(j, i)));
        return l;
    }
    case JSON_OBJECT: {
        jv d = jv_dict(c, json_object_size(j));
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            /* jansson already dropped duplicate keys, so append without a lookup */
            jdict *dd = d.u.d;
            jv key = jv_cstr(c, k);
            if (dd->n == dd->cap) {
                jd_set(c, dd, key, jv_from_json(c, v));
                continue;
            }
            dd->keys[dd->n] = key;
            dd->vals[dd->n] = jv_from_json(c, v);
            dd->n++;
        }
        if (d.u.d->n > 8) dict_reindex(c, d.u.d);
        return d;
    }
    }
    return jv_none();
}

/* ---- Python semantics ----------------------------------------------------------------------- */

int jv_truthy(const jv *v) {
    switch (v->k) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0;
    case JV_STR: return v->u.s->n != 0;
    case JV_LIST: return v->u.l->n != 0;
    case JV_DICT: return v->u.d->n != 0;
    default: return 1;
    }
}

const char *jv_type_name(const jv *v) {
    switch (v->k) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return v->u.l->tuple ? "tuple" : "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_FUNC: return v->u.fn->kind == FN_MACRO ? "Macro" : "function";
    case JV_LOOP: return "LoopContext";
    }
    return "object";
}

static int is_num(const jv *v) { return v->k == JV_INT || v->k == JV_FLOAT || v->k == JV_BOOL; }
static double num_f(const jv *v) {
    return v->k == JV_FLOAT ? v->u.f : v->k == JV_INT ? (double)v->u.i : (double)v->u.b;
}
static int64_t num_i(const jv *v) { return v->k == JV_INT ? v->u.i : v->u.b; }

int jv_eq(jctx *c, jv a, jv b) {
    if (is_num(&a) && is_num(&b)) {
        if (a.k != JV_FLOAT && b.k != JV_FLOAT) return num_i(&a) == num_i(&b);
        return num_f(&a) == num_f(&b);
    }
    if (a.k != b.k) return 0;
    switch (a.k) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR: return a.u.s->n == b.u.s->n && !memcmp(a.u.s->p, b.u.s->p, a.u.s->n);
    case JV_LIST: {
        if (a.u.l->tuple != b.u.l->tuple || a.u.l->n != b.u.l->n) return 0;
        if (++c->nest > JX_MAX_NEST) jx_fail(c, c->cur_line, "value nested too deeply to compare");
        int eq = 1;
        for (size_t i = 0; i < a.u.l->n && eq; i++) eq = jv_eq(c, a.u.l->v[i], b.u.l->v[i]);
        c->nest--;
        jx_charge(c, a.u.l->n);
        return eq;
    }
    case JV_DICT: {
        if (a.u.d->n != b.u.d->n) return 0;
        if (++c->nest > JX_MAX_NEST) jx_fail(c, c->cur_line, "value nested too deeply to compare");
        int eq = 1;
        for (size_t i = 0; i < a.u.d->n && eq; i++) {
            int j = jd_find(c, b.u.d, a.u.d->keys[i]);
            eq = j >= 0 && jv_eq(c, a.u.d->vals[i], b.u.d->vals[j]);
        }
        c->nest--;
        jx_charge(c, a.u.d->n);
        return eq;
    }
    case JV_NS: return a.u.d == b.u.d;
    case JV_FUNC: return a.u.fn == b.u.fn;
    case JV_LOOP: return a.u.loop == b.u.loop;
    default: return 0;
    }
}

int jv_cmp(jctx *c, jv a, jv b, int line) {
    if (a.k == JV_UNDEF || b.k == JV_UNDEF)
        jx_fail(c, line, "%s", a.k == JV_UNDEF ? a.u.undef : b.u.undef);
    if (is_num(&a) && is_num(&b)) {
        if (a.k != JV_FLOAT && b.k != JV_FLOAT) {
            int64_t x = num_i(&a), y = num_i(&b);
            return x < y ? -1 : x > y;
        }
        double x = num_f(&a), y = num_f(&b);
        return x < y ? -1 : x > y;
    }
    if (a.k == JV_STR && b.k == JV_STR) {
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        int r = memcmp(a.u.s->p, b.u.s->p, n);
        if (r) return r < 0 ? -1 : 1;
        return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    }
    if (a.k == JV_LIST && b.k == JV_LIST && a.u.l->tuple == b.u.l->tuple) {
        if (++c->nest > JX_MAX_NEST) jx_fail(c, line, "value nested too deeply to compare");
        size_t n = a.u.l->n < b.u.l->n ? a.u.l->n : b.u.l->n;
        for (size_t i = 0; i < n; i++) {
            if (jv_eq(c, a.u.l->v[i], b.u.l->v[i])) continue;
            int r = jv_cmp(c, a.u.l->v[i], b.u.l->v[i], line);
            c->nest--;
            return r;
        }
        c->nest--;
        return a.u.l->n < b.u.l->n ? -1 : a.u.l->n > b.u.l->n;
    }
    jx_fail(c, line, "'<' not supported between instances of '%s' and '%s'", jv_type_name(&a), jv_type_name(&b));
}

void jv_hashable(jctx *c, jv k, int line) {
    if (k.k == JV_LIST && !k.u.l->tuple) jx_fail(c, line, "unhashable type: 'list'");
    if (k.k == JV_DICT) jx_fail(c, line, "unhashable type: 'dict'");
    if (k.k == JV_UNDEF) jx_fail(c, line, "%s", k.u.undef);
    if (k.k == JV_LIST)
        for (size_t i = 0; i < k.u.l->n; i++) jv_hashable(c, k.u.l->v[i], line);
}

/* ---- text output ---------------------------------------------------------------------------- */

void jb_put(jctx *c, jbuf *b, const char *p, size_t n) {
    if (n == 0) return;
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n + 1) {
            if (cap > ((size_t)1 << 40)) jx_fail(c, c->cur_line, "string too large");
            cap *= 2;
        }
        char *np = jx_alloc(c, cap);
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* Python repr() of a float: the shortest digits that round-trip, in fixed notation for exponents
 * -4..15 and scientific (e+XX / e-XX) otherwise, always with a '.0' or exponent for integers. */
void fmt_pyfloat(double f, char out[40]) {
    if (isnan(f)) { strcpy(out, "nan"); return; }
    if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { strcpy(out, signbit(f) ? "-0.0" : "0.0"); return; }
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0, neg = 0;
    const char *p = e;
    if (*p == '-') { neg = 1; p++; }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            *o++ = '0'; *o++ = '.';
            for (int i = 0; i < -exp - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else {
            for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static int py_isprintable(uint32_t cp) {
    if (cp == ' ') return 1;
    if (cp < 0x20 || cp == 0x7f) return 0;
    if (cp < 0x7f) return 1;
    utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
    switch (cat) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO: case UTF8PROC_CATEGORY_CN: case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_ZS:
        return 0;
    default: return 1;
    }
}

static void write_str_repr(jctx *c, jbuf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    jb_put(c, b, &q, 1);
    size_t i = 0;
    while (i < n) {
        size_t adv;
        uint32_t cp = u8_decode(s + i, n - i, &adv);
        char tmp[16];
        if (cp == (uint32_t)q || cp == '\\') { tmp[0] = '\\'; tmp[1] = (char)cp; jb_put(c, b, tmp, 2); }
        else if (cp == '\n') jb_puts(c, b, "\\n");
        else if (cp == '\r') jb_puts(c, b, "\\r");
        else if (cp == '\t') jb_puts(c, b, "\\t");
        else if (!py_isprintable(cp)) {
            if (cp < 0x100) snprintf(tmp, sizeof tmp, "\\x%02x", cp);
            else if (cp < 0x10000) snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", cp);
            jb_puts(c, b, tmp);
        } else jb_put(c, b, s + i, adv);
        i += adv;
    }
    jb_put(c, b, &q, 1);
}

static void write_any(jctx *c, jbuf *b, jv v, int repr) {
    char tmp[64];
    switch (v.k) {
    case JV_UNDEF: if (repr) jb_puts(c, b, "Undefined"); return;
    case JV_NONE: jb_puts(c, b, "None"); return;
    case JV_BOOL: jb_puts(c, b, v.u.b ? "True" : "False"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); jb_puts(c, b, tmp); return;
    case JV_FLOAT: fmt_pyfloat(v.u.f, tmp); jb_puts(c, b, tmp); return;
    case JV_STR:
        if (repr) write_str_repr(c, b, v.u.s->p, v.u.s->n);
        else jb_put(c, b, v.u.s->p, v.u.s->n);
        return;
    case JV_LIST: {
        if (++c->nest > JX_MAX_NEST) jx_fail(c, c->cur_line, "value nested too deeply to print");
        jx_charge(c, v.u.l->n);
        jb_puts(c, b, v.u.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jb_puts(c, b, ", ");
            write_any(c, b, v.u.l->v[i], 1);
        }
        if (v.u.l->tuple && v.u.l->n == 1) jb_puts(c, b, ",");
        jb_puts(c, b, v.u.l->tuple ? ")" : "]");
        c->nest--;
        return;
    }
    case JV_DICT: case JV_NS: {
        if (++c->nest > JX_MAX_NEST) jx_fail(c, c->cur_line, "value nested too deeply to print");
        jx_charge(c, v.u.d->n);
        jb_puts(c, b, v.k == JV_NS ? "<Namespace {" : "{");
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) jb_puts(c, b, ", ");
            write_any(c, b, v.u.d->keys[i], 1);
            jb_puts(c, b, ": ");
            write_any(c, b, v.u.d->vals[i], 1);
        }
        jb_puts(c, b, v.k == JV_NS ? "}>" : "}");
        c->nest--;
        return;
    }
    case JV_FUNC:
        jb_puts(c, b, "<function ");
        jb_puts(c, b, v.u.fn->name ? v.u.fn->name : "?");
        jb_puts(c, b, ">");
        return;
    case JV_LOOP: jb_puts(c, b, "<LoopContext>"); return;
    }
}

void jv_write_str(jctx *c, jbuf *b, jv v) { write_any(c, b, v, 0); }
void jv_write_repr(jctx *c, jbuf *b, jv v) { write_any(c, b, v, 1); }

jv jv_to_str(jctx *c, jv v) {
    if (v.k == JV_STR) return v;
    jbuf b = {0};
    jv_write_str(c, &b, v);
    return jv_str(c, b.p ? b.p : "", b.n);
}

/* ---- json.dumps ----------------------------------------------------------------------------- */

static void json_str(jctx *c, jbuf *b, const char *s, size_t n, int ensure_ascii) {
    jb_puts(c, b, "\"");
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[16];
        size_t adv = 1;
        if (ch == '"') esc = "\\\"";
        else if (ch == '\\') esc = "\\\\";
        else if (ch == '\n') esc = "\\n";
        else if (ch == '\r') esc = "\\r";
        else if (ch == '\t') esc = "\\t";
        else if (ch == '\b') esc = "\\b";
        else if (ch == '\f') esc = "\\f";
        else if (ch < 0x20) { snprintf(tmp, sizeof tmp, "\\u%04x", ch); esc = tmp; }
        else if (ch >= 0x80 && ensure_ascii) {
            uint32_t cp = u8_decode(s + i, n - i, &adv);
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
            } else snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            esc = tmp;
        }
        if (esc) {
            jb_put(c, b, s + i - run, run);
            run = 0;
            jb_puts(c, b, esc);
            i += adv;
        } else {
            run++;
            i++;
        }
    }
    jb_put(c, b, s + n - run, run);
    jb_puts(c, b, "\"");
}

typedef struct {
    int ensure_ascii, sort_keys, line;
    const char *indent, *item_sep, *key_sep;
} json_opts;

static void json_newline(jctx *c, jbuf *b, const json_opts *o, int level) {
    jb_puts(c, b, "\n");
    for (int i = 0; i < level; i++) jb_puts(c, b, o->indent);
}

static void json_key(jctx *c, jbuf *b, jv k, const json_opts *o) {
    char tmp[64];
    switch (k.k) {
    case JV_STR: json_str(c, b, k.u.s->p, k.u.s->n, o->ensure_ascii); return;
    case JV_BOOL: jb_puts(c, b, k.u.b ? "\"true\"" : "\"false\""); return;
    case JV_NONE: jb_puts(c, b, "\"null\""); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i); jb_puts(c, b, tmp); return;
    case JV_FLOAT: {
        char f[40];
        if (isnan(k.u.f)) strcpy(f, "NaN");
        else if (isinf(k.u.f)) strcpy(f, k.u.f < 0 ? "-Infinity" : "Infinity");
        else fmt_pyfloat(k.u.f, f);
        snprintf(tmp, sizeof tmp, "\"%s\"", f);
        jb_puts(c, b, tmp);
        return;
    }
    default:
        jx_fail(c, o->line, "keys must be str, int, float, bool or None, not %s", jv_type_name(&k));
    }
}

/* qsort has no context argument: the render in progress on this thread */
static __thread jctx *t_sort_ctx;
static int key_order(const void *x, const void *y) {
    const jv *a = x, *b = y;
    return jv_cmp(t_sort_ctx, *a, *b, t_sort_ctx->cur_line);
}

static void json_any(jctx *c, jbuf *b, jv v, const json_opts *o, int level) {
    char tmp[64];
    jx_charge(c, 1);
    switch (v.k) {
    case JV_NONE: jb_puts(c, b, "null"); return;
    case JV_BOOL: jb_puts(c, b, v.u.b ? "true" : "false"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); jb_puts(c, b, tmp); return;
    case JV_FLOAT:
        if (isnan(v.u.f)) jb_puts(c, b, "NaN");
        else if (isinf(v.u.f)) jb_puts(c, b, v.u.f < 0 ? "-Infinity" : "Infinity");
        else { fmt_pyfloat(v.u.f, tmp); jb_puts(c, b, tmp); }
        return;
    case JV_STR: json_str(c, b, v.u.s->p, v.u.s->n, o->ensure_ascii); return;
    case JV_LIST: {
        if (v.u.l->n == 0) { jb_puts(c, b, "[]"); return; }
        if (++c->nest > JX_MAX_NEST) jx_fail(c, o->line, "value nested too deeply for tojson");
        jb_puts(c, b, "[");
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) jb_puts(c, b, o->item_sep);
            if (o->indent) json_newline(c, b, o, level + 1);
            json_any(c, b, v.u.l->v[i], o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jb_puts(c, b, "]");
        c->nest--;
        return;
    }
    case JV_DICT: {
        jdict *d = v.u.d;
        if (d->n == 0) { jb_puts(c, b, "{}"); return; }
        if (++c->nest > JX_MAX_NEST) jx_fail(c, o->line, "value nested too deeply for tojson");
        size_t *order = jx_alloc(c, d->n * sizeof(size_t));
        for (size_t i = 0; i < d->n; i++) order[i] = i;
        if (o->sort_keys) {
            /* sort a copy of the keys, then map back to entries */
            jv *ks = jx_alloc(c, d->n * sizeof(jv));
            memcpy(ks, d->keys, d->n * sizeof(jv));
            jctx *saved = t_sort_ctx;
            t_sort_ctx = c;
            qsort(ks, d->n, sizeof(jv), key_order);
            t_sort_ctx = saved;
            for (size_t i = 0; i < d->n; i++) order[i] = (size_t)jd_find(c, d, ks[i]);
        }
        jb_puts(c, b, "{");
        for (size_t i = 0; i < d->n; i++) {
            if (i) jb_puts(c, b, o->item_sep);
            if (o->indent) json_newline(c, b, o, level + 1);
            json_key(c, b, d->keys[order[i]], o);
            jb_puts(c, b, o->key_sep);
            json_any(c, b, d->vals[order[i]], o, level + 1);
        }
        if (o->indent) json_newline(c, b, o, level);
        jb_puts(c, b, "}");
        c->nest--;
        return;
    }
    default:
        jx_fail(c, o->line, "Object of type %s is not JSON serializable", jv_type_name(&v));
    }
}

void jv_write_json(jctx *c, jbuf *b, jv v, int ensure_ascii, const char *indent, const char *item_sep,
                   const char *key_sep, int sort_keys, int line) {
    json_opts o = {ensure_ascii, sort_keys, line, indent, item_sep, key_sep};
    json_any(c, b, v, &o, 0);
}

/* ---- iteration ------------------------------------------------------------------------------ */

jlist *jv_iterate(jctx *c, jv v, int line) {
    switch (v.k) {
    case JV_UNDEF: {
        jv l = jv_list(c, 1, 0);
        return l.u.l;
    }
    case JV_LIST: return v.u.l;
    case JV_DICT: {
        jv l = jv_list(c, v.u.d->n, 0);
        for (size_t i = 0; i < v.u.d->n; i++) jl_push(c, l, v.u.d->keys[i]);
        return l.u.l;
    }
    case JV_STR: {
        jv l = jv_list(c, v.u.s->n, 0);
        size_t i = 0;
        while (i < v.u.s->n) {
            size_t adv;
            u8_decode(v.u.s->p + i, v.u.s->n - i, &adv);
            jl_push(c, l, jv_str(c, v.u.s->p + i, adv));
            i += adv;
        }
        jx_charge(c, v.u.s->n / 8);
        return l.u.l;
    }
    default:
        jx_fail(c, line, "'%s' object is not iterable", jv_type_name(&v));
    }
}
