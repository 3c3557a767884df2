/* jinja_builtins.c — what templates can call: Jinja's filters and tests, HF's tojson /
 * raise_exception / strftime_now, the global functions (range, namespace, dict, joiner), Python
 * methods on str/dict/list, loop attributes, and attribute/item access with the sandbox's rules
 * (mutating methods such as list.append are refused, as ImmutableSandboxedEnvironment does). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <utf8proc.h>

#include "jinja_int.h"

/* ---- argument helpers ----------------------------------------------------------------------- */

/* Positional i or keyword `name`; dflt when neither was given (*given = 0). */
static jv arg(jargs *a, int i, const char *name, jv dflt, int *given) {
    if (i >= 0 && i < a->npos) {
        if (given) *given = 1;
        return a->pos[i];
    }
    for (int k = 0; k < a->nkw; k++)
        if (name && !strcmp(a->kwn[k], name)) {
            a->used |= 1u << k;
            if (given) *given = 1;
            return a->kwv[k];
        }
    if (given) *given = 0;
    return dflt;
}

static void args_end(jctx *c, jargs *a, int max_pos, const char *fname, int line) {
    if (a->npos > max_pos)
        jx_fail(c, line, "%s() takes at most %d positional argument%s (%d given)", fname, max_pos, max_pos == 1 ? "" : "s",
                a->npos);
    for (int k = 0; k < a->nkw; k++)
        if (!(a->used & (1u << k))) jx_fail(c, line, "%s() got an unexpected keyword argument '%s'", fname, a->kwn[k]);
}

static jargs no_args(void) {
    jargs a = {0};
    return a;
}

static void need_defined(jctx *c, jv v, int line) {
    if (v.k == JV_UNDEF) jx_fail(c, line, "%s", v.u.undef);
}

static const char *need_str(jctx *c, jv v, const char *what, int line, size_t *n) {
    need_defined(c, v, line);
    if (v.k != JV_STR) jx_fail(c, line, "%s must be a string, not %s", what, jv_type_name(&v));
    *n = v.u.s->n;
    return v.u.s->p;
}

static int64_t need_int(jctx *c, jv v, const char *what, int line) {
    need_defined(c, v, line);
    if (v.k == JV_INT) return v.u.i;
    if (v.k == JV_BOOL) return v.u.b;
    jx_fail(c, line, "%s must be an integer, not %s", what, jv_type_name(&v));
}

static jv mkstr(jctx *c, jbuf *b) { return jv_str(c, b->p ? b->p : "", b->n); }

static const char *obj_repr(jctx *c, jv v) {
    if (v.k == JV_NONE) return "None";
    return jv_strf(c, "%s object", jv_type_name(&v)).u.s->p;
}

static jv undef_attr(jctx *c, jv obj, const char *name) {
    if (obj.k == JV_NONE) return jv_undef(jv_strf(c, "'None' has no attribute '%s'", name).u.s->p);
    return jv_undef(jv_strf(c, "'%s' has no attribute '%s'", obj_repr(c, obj), name).u.s->p);
}

/* ---- string helpers ------------------------------------------------------------------------- */

typedef uint32_t (*cp_map)(uint32_t);
static uint32_t cp_upper(uint32_t cp) { return (uint32_t)utf8proc_toupper((utf8proc_int32_t)cp); }
static uint32_t cp_lower(uint32_t cp) { return (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp); }
static uint32_t cp_title(uint32_t cp) { return (uint32_t)utf8proc_totitle((utf8proc_int32_t)cp); }

static int cp_cased(uint32_t cp) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static void put_cp(jctx *c, jbuf *b, uint32_t cp) {
    char tmp[4];
    jb_put(c, b, tmp, u8_encode(cp, tmp));
}

/* Python's full (multi-character) case mappings that the simple per-code-point maps miss. */
static const char *special_case(uint32_t cp, cp_map f) {
    if (f == cp_upper) {
        switch (cp) {
        case 0xdf: return "SS";
        case 0x149: return "\xca\xbcN";
        case 0xfb00: return "FF";
        case 0xfb01: return "FI";
        case 0xfb02: return "FL";
        case 0xfb03: return "FFI";
        case 0xfb04: return "FFL";
        case 0xfb05: case 0xfb06: return "ST";
        }
    } else if (f == cp_title) {
        switch (cp) {
        case 0xdf: return "Ss";
        case 0xfb00: return "Ff";
        case 0xfb01: return "Fi";
        case 0xfb02: return "Fl";
        case 0xfb03: return "Ffi";
        case 0xfb04: return "Ffl";
        case 0xfb05: case 0xfb06: return "St";
        }
    } else if (f == cp_lower) {
        if (cp == 0x130) return "i\xcc\x87";
    }
    return NULL;
}

static void put_mapped(jctx *c, jbuf *b, uint32_t cp, cp_map f) {
    const char *sp = special_case(cp, f);
    if (sp) jb_puts(c, b, sp);
    else put_cp(c, b, f(cp));
}

static jv str_map(jctx *c, jv s, cp_map f) {
    jbuf b = {0};
    size_t i = 0;
    while (i < s.u.s->n) {
        size_t adv;
        uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
        put_mapped(c, &b, cp, f);
        i += adv;
    }
    jx_charge(c, s.u.s->n / 64);
    return mkstr(c, &b);
}

static jv str_capitalize(jctx *c, jv s) {
    jbuf b = {0};
    size_t i = 0;
    int first = 1;
    while (i < s.u.s->n) {
        size_t adv;
        uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
        put_mapped(c, &b, cp, first ? cp_title : cp_lower);
        first = 0;
        i += adv;
    }
    return mkstr(c, &b);
}

/* Python str.title(): titlecase after an uncased character, lowercase after a cased one. */
static jv str_pytitle(jctx *c, jv s) {
    jbuf b = {0};
    size_t i = 0;
    int prev_cased = 0;
    while (i < s.u.s->n) {
        size_t adv;
        uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
        int cased = cp_cased(cp);
        if (cased) put_mapped(c, &b, cp, prev_cased ? cp_lower : cp_title);
        else put_cp(c, &b, cp);
        prev_cased = cased;
        i += adv;
    }
    return mkstr(c, &b);
}

/* Jinja's |title: split on runs of [-\s({[<], upper the first char of each piece, lower the rest. */
static jv str_jtitle(jctx *c, jv s) {
    jbuf b = {0};
    size_t i = 0;
    int at_start = 1;
    while (i < s.u.s->n) {
        size_t adv;
        uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
        int sep = py_isspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        if (sep) { put_cp(c, &b, cp); at_start = 1; }
        else { put_mapped(c, &b, cp, at_start ? cp_upper : cp_lower); at_start = 0; }
        i += adv;
    }
    return mkstr(c, &b);
}

static int in_chars(uint32_t cp, const char *chars, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t adv;
        if (u8_decode(chars + i, n - i, &adv) == cp) return 1;
        i += adv;
    }
    return 0;
}

/* strip: which bit 1 = left, 2 = right; chars NULL = whitespace */
static jv str_strip(jctx *c, jv s, const char *chars, size_t nchars, int which) {
    const char *p = s.u.s->p;
    size_t n = s.u.s->n, st = 0, en = n;
    if (which & 1)
        while (st < en) {
            size_t adv;
            uint32_t cp = u8_decode(p + st, en - st, &adv);
            if (chars ? !in_chars(cp, chars, nchars) : !py_isspace(cp)) break;
            st += adv;
        }
    if (which & 2)
        while (en > st) {
            size_t b = en - 1;
            while (b > st && ((unsigned char)p[b] & 0xc0) == 0x80) b--;
            size_t adv;
            uint32_t cp = u8_decode(p + b, en - b, &adv);
            if (chars ? !in_chars(cp, chars, nchars) : !py_isspace(cp)) break;
            en = b;
        }
    jx_charge(c, n / 256);
    if (st == 0 && en == n) return s;
    return jv_str(c, p + st, en - st);
}

static jv str_replace(jctx *c, jv s, jv old, jv neu, int64_t count) {
    jbuf b = {0};
    const char *p = s.u.s->p;
    size_t n = s.u.s->n, on = old.u.s->n;
    int64_t done = 0;
    if (on == 0) {
        /* insert `neu` before every code point and at the end */
        size_t i = 0;
        while (i <= n && (count < 0 || done < count)) {
            jb_put(c, &b, neu.u.s->p, neu.u.s->n);
            done++;
            if (i == n) { i++; break; }
            size_t adv;
            u8_decode(p + i, n - i, &adv);
            jb_put(c, &b, p + i, adv);
            i += adv;
        }
        if (i < n) jb_put(c, &b, p + i, n - i);
        return mkstr(c, &b);
    }
    size_t i = 0;
    while (i < n) {
        const char *q = (count < 0 || done < count) ? memmem(p + i, n - i, old.u.s->p, on) : NULL;
        if (!q) { jb_put(c, &b, p + i, n - i); break; }
        size_t at = (size_t)(q - p);
        jb_put(c, &b, p + i, at - i);
        jb_put(c, &b, neu.u.s->p, neu.u.s->n);
        i = at + on;
        done++;
        jx_charge(c, 1);
    }
    jx_charge(c, n / 64);
    return mkstr(c, &b);
}

/* str.split / rsplit */
static jv str_split(jctx *c, jv s, jv sep, int64_t maxsplit, int right, int line) {
    const char *p = s.u.s->p;
    size_t n = s.u.s->n;
    jv out = jv_list(c, 4, 0);
    if (sep.k == JV_NONE || sep.k == JV_UNDEF) {
        if (sep.k == JV_UNDEF) need_defined(c, sep, line);
        /* whitespace runs; leading/trailing whitespace ignored */
        if (!right) {
            size_t i = 0;
            int64_t splits = 0;
            while (i < n) {
                size_t adv;
                while (i < n && py_isspace(u8_decode(p + i, n - i, &adv))) i += adv;
                if (i >= n) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    size_t e = n;
                    /* rest, with trailing whitespace stripped */
                    jv rest = jv_str(c, p + i, e - i);
                    jl_push(c, out, str_strip(c, rest, NULL, 0, 2));
                    break;
                }
                size_t st = i;
                while (i < n && !py_isspace(u8_decode(p + i, n - i, &adv))) i += adv;
                jl_push(c, out, jv_str(c, p + st, i - st));
                splits++;
            }
        } else {
            /* collect from the right */
            jv tmp = jv_list(c, 4, 0);
            size_t e = n;
            int64_t splits = 0;
            while (e > 0) {
                size_t b;
                size_t adv;
                while (e > 0) {
                    b = e - 1;
                    while (b > 0 && ((unsigned char)p[b] & 0xc0) == 0x80) b--;
                    if (!py_isspace(u8_decode(p + b, e - b, &adv))) break;
                    e = b;
                }
                if (e == 0) break;
                if (maxsplit >= 0 && splits >= maxsplit) {
                    jv rest = jv_str(c, p, e);
                    jl_push(c, tmp, str_strip(c, rest, NULL, 0, 1));
                    break;
                }
                size_t st = e;
                while (st > 0) {
                    b = st - 1;
                    while (b > 0 && ((unsigned char)p[b] & 0xc0) == 0x80) b--;
                    if (py_isspace(u8_decode(p + b, st - b, &adv))) break;
                    st = b;
                }
                jl_push(c, tmp, jv_str(c, p + st, e - st));
                e = st;
                splits++;
            }
            for (size_t k = tmp.u.l->n; k > 0; k--) jl_push(c, out, tmp.u.l->v[k - 1]);
        }
        jx_charge(c, n / 64 + out.u.l->n);
        return out;
    }
    size_t sn;
    const char *sp = need_str(c, sep, "separator", line, &sn);
    if (sn == 0) jx_fail(c, line, "empty separator");
    if (!right) {
        size_t i = 0;
        int64_t splits = 0;
        for (;;) {
            const char *q = (maxsplit < 0 || splits < maxsplit) ? memmem(p + i, n - i, sp, sn) : NULL;
            if (!q) { jl_push(c, out, jv_str(c, p + i, n - i)); break; }
            jl_push(c, out, jv_str(c, p + i, (size_t)(q - p) - i));
            i = (size_t)(q - p) + sn;
            splits++;
        }
    } else {
        jv tmp = jv_list(c, 4, 0);
        size_t e = n;
        int64_t splits = 0;
        for (;;) {
            size_t found = (size_t)-1;
            if ((maxsplit < 0 || splits < maxsplit) && e >= sn)
                for (size_t k = e - sn + 1; k > 0; k--)
                    if (!memcmp(p + k - 1, sp, sn)) { found = k - 1; break; }
            if (found == (size_t)-1) { jl_push(c, tmp, jv_str(c, p, e)); break; }
            jl_push(c, tmp, jv_str(c, p + found + sn, e - found - sn));
            e = found;
            splits++;
        }
        for (size_t k = tmp.u.l->n; k > 0; k--) jl_push(c, out, tmp.u.l->v[k - 1]);
    }
    jx_charge(c, n / 64 + out.u.l->n);
    return out;
}

/* Python str.splitlines() line boundaries */
static size_t line_break_at(const char *p, size_t n, size_t i, size_t *brk_len) {
    size_t adv;
    uint32_t cp = u8_decode(p + i, n - i, &adv);
    if (cp == '\r' && i + 1 < n && p[i + 1] == '\n') { *brk_len = 2; return 1; }
    switch (cp) {
    case '\n': case '\r': case 0x0b: case 0x0c: case 0x1c: case 0x1d: case 0x1e: case 0x85: case 0x2028: case 0x2029:
        *brk_len = adv;
        return 1;
    }
    *brk_len = adv;
    return 0;
}

static jv str_splitlines(jctx *c, const char *p, size_t n, int keepends) {
    jv out = jv_list(c, 4, 0);
    size_t st = 0, i = 0;
    while (i < n) {
        size_t bl;
        if (line_break_at(p, n, i, &bl)) {
            jl_push(c, out, jv_str(c, p + st, (keepends ? i + bl : i) - st));
            i += bl;
            st = i;
        } else i += bl;
    }
    if (st < n) jl_push(c, out, jv_str(c, p + st, n - st));
    jx_charge(c, n / 64 + out.u.l->n);
    return out;
}

static int64_t py_find(jctx *c, jv s, jv sub, int right) {
    (void)c;
    const char *p = s.u.s->p;
    size_t n = s.u.s->n, sn = sub.u.s->n;
    size_t at = (size_t)-1;
    if (!right) {
        const char *q = sn == 0 ? p : memmem(p, n, sub.u.s->p, sn);
        if (q) at = (size_t)(q - p);
    } else if (n >= sn) {
        for (size_t k = n - sn + 1; k > 0; k--)
            if (!memcmp(p + k - 1, sub.u.s->p, sn)) { at = k - 1; break; }
    }
    if (at == (size_t)-1) return -1;
    return (int64_t)u8_len(p, at);
}

static int64_t py_count(jv s, jv sub) {
    const char *p = s.u.s->p;
    size_t n = s.u.s->n, sn = sub.u.s->n;
    if (sn == 0) return (int64_t)u8_len(p, n) + 1;
    int64_t k = 0;
    size_t i = 0;
    const char *q;
    while (i <= n && (q = memmem(p + i, n - i, sub.u.s->p, sn))) {
        k++;
        i = (size_t)(q - p) + sn;
    }
    return k;
}

static int str_startswith(jctx *c, jv s, jv pre, int end, int line) {
    if (pre.k == JV_LIST && pre.u.l->tuple) {
        for (size_t i = 0; i < pre.u.l->n; i++)
            if (str_startswith(c, s, pre.u.l->v[i], end, line)) return 1;
        return 0;
    }
    need_defined(c, pre, line);
    if (pre.k != JV_STR)
        jx_fail(c, line, "%s first arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith",
                jv_type_name(&pre));
    size_t n = s.u.s->n, pn = pre.u.s->n;
    if (pn > n) return 0;
    return !memcmp(end ? s.u.s->p + n - pn : s.u.s->p, pre.u.s->p, pn);
}

/* ---- sorting (stable merge sort with a key) ------------------------------------------------- */

typedef struct {
    jctx *c;
    int line;
    int reverse;
} sort_ctx;

static int sort_less(sort_ctx *s, jv a, jv b) {
    int r = jv_cmp(s->c, a, b, s->line);
    return s->reverse ? r > 0 : r < 0;
}

/* sorts idx[] by keys[idx] */
static void merge_sort(sort_ctx *s, const jv *keys, size_t *idx, size_t *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(s, keys, idx, tmp, h);
    merge_sort(s, keys, idx + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        if (sort_less(s, keys[idx[j]], keys[idx[i]])) tmp[k++] = idx[j++];
        else tmp[k++] = idx[i++];
    }
    while (i < h) tmp[k++] = idx[i++];
    while (j < n) tmp[k++] = idx[j++];
    memcpy(idx, tmp, n * sizeof(size_t));
    jx_charge(s->c, n);
}

/* attribute getter for "a.b.0" paths (Jinja's make_attrgetter) */
static jv attr_path(jctx *c, jv item, jv attribute, int line) {
    if (attribute.k == JV_INT) return jx_getitem(c, item, attribute, line);
    size_t n;
    const char *p = need_str(c, attribute, "attribute", line, &n);
    size_t st = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '.') continue;
        jv part = jv_str(c, p + st, i - st);
        int isnum = i > st;
        for (size_t k = st; k < i; k++)
            if (p[k] < '0' || p[k] > '9') isnum = 0;
        if (isnum && i - st < 18) item = jx_getitem(c, item, jv_int(strtoll(part.u.s->p, NULL, 10)), line);
        else item = jx_getitem(c, item, part, line);
        st = i + 1;
    }
    return item;
}

static jv lower_key(jctx *c, jv v, int case_sensitive) {
    if (!case_sensitive && v.k == JV_STR) return str_map(c, v, cp_lower);
    return v;
}

static jv sorted_list(jctx *c, jlist *items, const jv *keys, int reverse, int line) {
    size_t n = items->n;
    size_t *idx = jx_alloc(c, (n + 1) * sizeof(size_t)), *tmp = jx_alloc(c, (n + 1) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) idx[i] = i;
    sort_ctx s = {c, line, reverse};
    merge_sort(&s, keys, idx, tmp, n);
    jv out = jv_list(c, n, 0);
    for (size_t i = 0; i < n; i++) jl_push(c, out, items->v[idx[i]]);
    return out;
}

/* ---- filters -------------------------------------------------------------------------------- */

enum {
    F_ABS, F_ATTR, F_BATCH, F_CAPITALIZE, F_CENTER, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE,
    F_FIRST, F_FLOAT, F_FORCEESCAPE, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH,
    F_LIST, F_LOWER, F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND,
    F_SAFE, F_SELECT, F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_TRUNCATE,
    F_UNIQUE, F_UPPER, F_WORDCOUNT, F_COUNT_FILTERS
};

static const char *k_filters[] = {
    "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape",
    "first", "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length",
    "list", "lower", "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round",
    "safe", "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "truncate",
    "unique", "upper", "wordcount",
};

int jx_filter_id(const char *name) {
    for (int i = 0; i < F_COUNT_FILTERS; i++)
        if (!strcmp(k_filters[i], name)) return i;
    return -1;
}

enum {
    T_BOOLEAN, T_CALLABLE, T_DEFINED, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_ESCAPED, T_EVEN, T_FALSE,
    T_FILTER, T_FLOATT, T_GE, T_GT, T_IN, T_INTEGER, T_ITERABLE, T_LE, T_LOWER, T_LT, T_MAPPING, T_NE,
    T_NONE, T_NUMBER, T_ODD, T_SAMEAS, T_SEQUENCE, TS_STRING, T_TEST, T_TRUE, T_UNDEFINED, T_UPPER,
    T_GREATERTHAN, T_LESSTHAN, T_COUNT_TESTS
};

static const char *k_tests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "escaped", "even", "false",
    "filter", "float", "ge", "gt", "in", "integer", "iterable", "le", "lower", "lt", "mapping", "ne",
    "none", "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined", "upper",
    "greaterthan", "lessthan",
};

int jx_test_id(const char *name) {
    for (int i = 0; i < T_COUNT_TESTS; i++)
        if (!strcmp(k_tests[i], name)) return i;
    return -1;
}

static jv html_escape(jctx *c, jv v) {
    jv s = jv_to_str(c, v);
    jbuf b = {0};
    for (size_t i = 0; i < s.u.s->n; i++) {
        char ch = s.u.s->p[i];
        switch (ch) {
        case '&': jb_puts(c, &b, "&amp;"); break;
        case '<': jb_puts(c, &b, "&lt;"); break;
        case '>': jb_puts(c, &b, "&gt;"); break;
        case '"': jb_puts(c, &b, "&#34;"); break;
        case '\'': jb_puts(c, &b, "&#39;"); break;
        default: jb_put(c, &b, &ch, 1);
        }
    }
    return mkstr(c, &b);
}

static size_t py_len(jctx *c, jv v, int line) {
    switch (v.k) {
    case JV_UNDEF: return 0;
    case JV_STR: return u8_len(v.u.s->p, v.u.s->n);
    case JV_LIST: return v.u.l->n;
    case JV_DICT: return v.u.d->n;
    case JV_LOOP: return v.u.loop->items->n;
    default: jx_fail(c, line, "object of type '%s' has no len()", jv_type_name(&v));
    }
}

/* Python int(str, base): optional sign/whitespace/underscores; returns 0 on failure */
static int parse_py_int(const char *p, size_t n, int base, int64_t *out) {
    size_t i = 0, e = n;
    while (i < e && py_isspace((unsigned char)p[i])) i++;
    while (e > i && py_isspace((unsigned char)p[e - 1])) e--;
    int neg = 0;
    if (i < e && (p[i] == '+' || p[i] == '-')) { neg = p[i] == '-'; i++; }
    if (i >= e) return 0;
    if (e - i > 2 && p[i] == '0' && base == 16 && (p[i + 1] | 0x20) == 'x') i += 2;
    else if (e - i > 2 && p[i] == '0' && base == 8 && (p[i + 1] | 0x20) == 'o') i += 2;
    else if (e - i > 2 && p[i] == '0' && base == 2 && (p[i + 1] | 0x20) == 'b') i += 2;
    uint64_t v = 0;
    int digits = 0;
    for (; i < e; i++) {
        char ch = p[i];
        if (ch == '_' && digits && i + 1 < e && p[i + 1] != '_') continue;
        int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10 : 99;
        if (d >= base) return 0;
        if (v > (uint64_t)INT64_MAX / (uint64_t)base) return 0;
        v = v * (uint64_t)base + (uint64_t)d;
        if (v > (uint64_t)INT64_MAX) return 0;
        digits++;
    }
    if (!digits) return 0;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

static int parse_py_float(const char *p, size_t n, double *out) {
    char buf[128];
    size_t i = 0, e = n, k = 0;
    while (i < e && py_isspace((unsigned char)p[i])) i++;
    while (e > i && py_isspace((unsigned char)p[e - 1])) e--;
    if (i >= e || e - i >= sizeof buf) return 0;
    for (; i < e; i++) {
        if (p[i] == '_') continue;
        buf[k++] = p[i];
    }
    buf[k] = 0;
    /* C accepts hex floats and "infinity"/"nan(...)" like Python mostly does; reject hex */
    for (size_t j = 0; j < k; j++)
        if (buf[j] == 'x' || buf[j] == 'X') return 0;
    char *end;
    double v = strtod(buf, &end);
    if (*end) return 0;
    *out = v;
    return 1;
}

static jv f_tojson(jctx *c, jv v, jargs *a, int line) {
    int g;
    jv ea = arg(a, 0, "ensure_ascii", jv_bool(0), NULL);
    jv ind = arg(a, 1, "indent", jv_none(), NULL);
    jv seps = arg(a, 2, "separators", jv_none(), &g);
    jv sk = arg(a, 3, "sort_keys", jv_bool(0), NULL);
    args_end(c, a, 4, "tojson", line);
    const char *indent = NULL;
    if (ind.k == JV_STR) indent = ind.u.s->p;
    else if (ind.k == JV_INT || ind.k == JV_BOOL) {
        int64_t w = ind.k == JV_INT ? ind.u.i : ind.u.b;
        if (w > 1000) jx_fail(c, line, "tojson indent too large");
        char *sp = jx_alloc(c, (size_t)(w > 0 ? w : 0) + 1);
        memset(sp, ' ', (size_t)(w > 0 ? w : 0));
        sp[w > 0 ? w : 0] = 0;
        indent = sp;
    } else if (ind.k != JV_NONE) jx_fail(c, line, "tojson indent must be an int, a string or None");
    const char *item_sep = indent ? "," : ", ", *key_sep = ": ";
    if (seps.k != JV_NONE) {
        if (seps.k != JV_LIST || seps.u.l->n != 2 || seps.u.l->v[0].k != JV_STR || seps.u.l->v[1].k != JV_STR)
            jx_fail(c, line, "tojson separators must be a pair of strings");
        item_sep = seps.u.l->v[0].u.s->p;
        key_sep = seps.u.l->v[1].u.s->p;
    }
    jbuf b = {0};
    jv_write_json(c, &b, v, jv_truthy(&ea), indent, item_sep, key_sep, jv_truthy(&sk), line);
    return mkstr(c, &b);
}

static jv f_indent(jctx *c, jv v, jargs *a, int line) {
    jv w = arg(a, 0, "width", jv_int(4), NULL);
    jv first = arg(a, 1, "first", jv_bool(0), NULL);
    jv blank = arg(a, 2, "blank", jv_bool(0), NULL);
    args_end(c, a, 3, "indent", line);
    jv ind;
    if (w.k == JV_STR) ind = w;
    else {
        int64_t n = need_int(c, w, "indent width", line);
        if (n < 0) n = 0;
        if (n > 10000) jx_fail(c, line, "indent width too large");
        char *sp = jx_alloc(c, (size_t)n + 1);
        memset(sp, ' ', (size_t)n);
        ind = jv_str(c, sp, (size_t)n);
    }
    jv s = jv_to_str(c, v);
    jbuf t = {0};
    jb_put(c, &t, s.u.s->p, s.u.s->n);
    jb_puts(c, &t, "\n");
    jv lines = str_splitlines(c, t.p, t.n, 0);
    jlist *L = lines.u.l;
    jbuf b = {0};
    if (jv_truthy(&blank)) {
        for (size_t i = 0; i < L->n; i++) {
            if (i) { jb_puts(c, &b, "\n"); jb_put(c, &b, ind.u.s->p, ind.u.s->n); }
            jb_put(c, &b, L->v[i].u.s->p, L->v[i].u.s->n);
        }
    } else {
        if (L->n) jb_put(c, &b, L->v[0].u.s->p, L->v[0].u.s->n);
        for (size_t i = 1; i < L->n; i++) {
            jb_puts(c, &b, "\n");
            if (L->v[i].u.s->n) jb_put(c, &b, ind.u.s->p, ind.u.s->n);
            jb_put(c, &b, L->v[i].u.s->p, L->v[i].u.s->n);
        }
    }
    if (jv_truthy(&first)) {
        jbuf r = {0};
        jb_put(c, &r, ind.u.s->p, ind.u.s->n);
        jb_put(c, &r, b.p ? b.p : "", b.n);
        return mkstr(c, &r);
    }
    return mkstr(c, &b);
}

/* select/reject/selectattr/rejectattr */
static jv f_select(jctx *c, jv v, jargs *a, int line, int attr, int want) {
    jlist *items = jv_iterate(c, v, line);
    int off = 0;
    jv attribute = jv_none();
    if (attr) {
        if (a->npos < 1) jx_fail(c, line, "missing parameter for attribute name");
        attribute = a->pos[0];
        off = 1;
    }
    int tid = -1;
    jargs targs = no_args();
    if (a->npos > off) {
        size_t n;
        const char *tn = need_str(c, a->pos[off], "test name", line, &n);
        tid = jx_test_id(tn);
        if (tid < 0) jx_fail(c, line, "no test named '%s'", tn);
        targs.pos = a->pos + off + 1;
        targs.npos = a->npos - off - 1;
        targs.kwn = a->kwn;
        targs.kwv = a->kwv;
        targs.nkw = a->nkw;
    } else if (a->nkw) {
        jx_fail(c, line, "unexpected keyword argument '%s'", a->kwn[0]);
    }
    jv out = jv_list(c, items->n, 0);
    for (size_t i = 0; i < items->n; i++) {
        jv x = attr ? attr_path(c, items->v[i], attribute, line) : items->v[i];
        int ok;
        if (tid >= 0) {
            jargs t = targs;
            t.used = 0;
            ok = jx_apply_test(c, tid, x, &t, line);
        } else ok = jv_truthy(&x);
        if (ok == want) jl_push(c, out, items->v[i]);
    }
    jx_charge(c, items->n);
    return out;
}

static jv f_map(jctx *c, jv v, jargs *a, int line) {
    jlist *items = jv_iterate(c, v, line);
    jv out = jv_list(c, items->n, 0);
    int g;
    jv attribute = arg(a, -1, "attribute", jv_none(), &g);
    if (g) {
        jv dflt = arg(a, -1, "default", jv_undef("no default"), NULL);
        args_end(c, a, 0, "map", line);
        for (size_t i = 0; i < items->n; i++) {
            jv x = attr_path(c, items->v[i], attribute, line);
            if (x.k == JV_UNDEF && dflt.k != JV_UNDEF) x = dflt;
            jl_push(c, out, x);
        }
        return out;
    }
    if (a->npos < 1) jx_fail(c, line, "map requires a filter name or attribute=");
    size_t n;
    const char *fname = need_str(c, a->pos[0], "filter name", line, &n);
    int fid = jx_filter_id(fname);
    if (fid < 0) jx_fail(c, line, "no filter named '%s'", fname);
    for (size_t i = 0; i < items->n; i++) {
        jargs fa = *a;
        fa.pos = a->pos + 1;
        fa.npos = a->npos - 1;
        fa.used = 0;
        jl_push(c, out, jx_apply_filter(c, fid, items->v[i], &fa, line));
    }
    return out;
}

static jv f_minmax(jctx *c, jv v, jargs *a, int line, int want_max) {
    jv cs = arg(a, 0, "case_sensitive", jv_bool(0), NULL);
    jv attribute = arg(a, 1, "attribute", jv_none(), NULL);
    args_end(c, a, 2, want_max ? "max" : "min", line);
    jlist *items = jv_iterate(c, v, line);
    if (!items->n) return jv_undef("No aggregated item, sequence was empty.");
    size_t best = 0;
    jv bk = {0};
    for (size_t i = 0; i < items->n; i++) {
        jv x = attribute.k != JV_NONE ? attr_path(c, items->v[i], attribute, line) : items->v[i];
        jv k = lower_key(c, x, jv_truthy(&cs));
        if (i == 0) { bk = k; continue; }
        int r = jv_cmp(c, k, bk, line);
        if (want_max ? r > 0 : r < 0) { best = i; bk = k; }
    }
    return items->v[best];
}

jv jx_apply_filter(jctx *c, int fid, jv v, jargs *a, int line) {
    int g;
    switch (fid) {
    case F_ABS:
        args_end(c, a, 0, "abs", line);
        need_defined(c, v, line);
        if (v.k == JV_INT) {
            if (v.u.i == INT64_MIN) jx_fail(c, line, "integer overflow");
            return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.k == JV_BOOL) return jv_int(v.u.b);
        if (v.k == JV_FLOAT) return jv_float(fabs(v.u.f));
        jx_fail(c, line, "bad operand type for abs(): '%s'", jv_type_name(&v));
    case F_ATTR: {
        jv name = arg(a, 0, "name", jv_undef("missing"), NULL);
        args_end(c, a, 1, "attr", line);
        size_t n;
        const char *nm = need_str(c, name, "attribute name", line, &n);
        if (v.k == JV_DICT) {
            /* attr() looks at attributes only, never at keys */
            static const char *dm[] = {"items", "keys", "values", "get", NULL};
            for (int i = 0; dm[i]; i++)
                if (!strcmp(dm[i], nm)) return jx_getattr(c, v, nm, line);
            return undef_attr(c, v, nm);
        }
        return jx_getattr(c, v, nm, line);
    }
    case F_BATCH: {
        jv cnt = arg(a, 0, "linecount", jv_undef("missing"), NULL);
        jv fill = arg(a, 1, "fill_with", jv_none(), &g);
        args_end(c, a, 2, "batch", line);
        int64_t k = need_int(c, cnt, "linecount", line);
        if (k <= 0) jx_fail(c, line, "batch size must be positive");
        jlist *items = jv_iterate(c, v, line);
        jv out = jv_list(c, 4, 0);
        jv cur = jv_list(c, 4, 0);
        for (size_t i = 0; i < items->n; i++) {
            if ((int64_t)cur.u.l->n == k) { jl_push(c, out, cur); cur = jv_list(c, 4, 0); }
            jl_push(c, cur, items->v[i]);
        }
        if (cur.u.l->n) {
            if (g) while ((int64_t)cur.u.l->n < k) jl_push(c, cur, fill);
            jl_push(c, out, cur);
        }
        return out;
    }
    case F_CAPITALIZE: args_end(c, a, 0, "capitalize", line); return str_capitalize(c, jv_to_str(c, v));
    case F_CENTER: {
        jv w = arg(a, 0, "width", jv_int(80), NULL);
        args_end(c, a, 1, "center", line);
        jv s = jv_to_str(c, v);
        int64_t width = need_int(c, w, "width", line);
        int64_t len = (int64_t)u8_len(s.u.s->p, s.u.s->n);
        if (width <= len) return s;
        if (width > 1000000) jx_fail(c, line, "center width too large");
        int64_t pad = width - len, left = pad / 2 + (pad & width & 1);
        jbuf b = {0};
        for (int64_t i = 0; i < left; i++) jb_puts(c, &b, " ");
        jb_put(c, &b, s.u.s->p, s.u.s->n);
        for (int64_t i = 0; i < pad - left; i++) jb_puts(c, &b, " ");
        return mkstr(c, &b);
    }
    case F_COUNT: case F_LENGTH:
        args_end(c, a, 0, "length", line);
        return jv_int((int64_t)py_len(c, v, line));
    case F_D: case F_DEFAULT: {
        jv dv = arg(a, 0, "default_value", jv_str(c, "", 0), NULL);
        jv boolean = arg(a, 1, "boolean", jv_bool(0), NULL);
        args_end(c, a, 2, "default", line);
        if (v.k == JV_UNDEF || (jv_truthy(&boolean) && !jv_truthy(&v))) return dv;
        return v;
    }
    case F_DICTSORT: {
        jv cs = arg(a, 0, "case_sensitive", jv_bool(0), NULL);
        jv by = arg(a, 1, "by", jv_cstr(c, "key"), NULL);
        jv rev = arg(a, 2, "reverse", jv_bool(0), NULL);
        args_end(c, a, 3, "dictsort", line);
        need_defined(c, v, line);
        if (v.k != JV_DICT) jx_fail(c, line, "dictsort expects a mapping, not %s", jv_type_name(&v));
        size_t bn;
        const char *bys = need_str(c, by, "by", line, &bn);
        int pos = !strcmp(bys, "key") ? 0 : !strcmp(bys, "value") ? 1 : -1;
        if (pos < 0) jx_fail(c, line, "You can only sort by either \"key\" or \"value\"");
        jdict *d = v.u.d;
        jv pairs = jv_list(c, d->n, 0);
        jv *keys = jx_alloc(c, (d->n + 1) * sizeof(jv));
        for (size_t i = 0; i < d->n; i++) {
            jv t = jv_list(c, 2, 1);
            jl_push(c, t, d->keys[i]);
            jl_push(c, t, d->vals[i]);
            jl_push(c, pairs, t);
            keys[i] = lower_key(c, pos ? d->vals[i] : d->keys[i], jv_truthy(&cs));
        }
        return sorted_list(c, pairs.u.l, keys, jv_truthy(&rev), line);
    }
    case F_E: case F_ESCAPE: case F_FORCEESCAPE:
        args_end(c, a, 0, "escape", line);
        return html_escape(c, v);
    case F_FIRST: {
        args_end(c, a, 0, "first", line);
        jlist *items = jv_iterate(c, v, line);
        if (!items->n) return jv_undef("No first item, sequence was empty.");
        return items->v[0];
    }
    case F_LAST: {
        args_end(c, a, 0, "last", line);
        jlist *items = jv_iterate(c, v, line);
        if (!items->n) return jv_undef("No last item, sequence was empty.");
        return items->v[items->n - 1];
    }
    case F_FLOAT: {
        jv dflt = arg(a, 0, "default", jv_float(0), NULL);
        args_end(c, a, 1, "float", line);
        need_defined(c, v, line);
        if (v.k == JV_FLOAT) return v;
        if (v.k == JV_INT || v.k == JV_BOOL) return jv_float((double)(v.k == JV_INT ? v.u.i : v.u.b));
        double f;
        if (v.k == JV_STR && parse_py_float(v.u.s->p, v.u.s->n, &f)) return jv_float(f);
        return dflt;
    }
    case F_INT: {
        jv dflt = arg(a, 0, "default", jv_int(0), NULL);
        jv base = arg(a, 1, "base", jv_int(10), NULL);
        args_end(c, a, 2, "int", line);
        need_defined(c, v, line);
        if (v.k == JV_INT) return v;
        if (v.k == JV_BOOL) return jv_int(v.u.b);
        if (v.k == JV_FLOAT) {
            if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return dflt;
            return jv_int((int64_t)v.u.f);
        }
        if (v.k == JV_STR) {
            int64_t b = need_int(c, base, "base", line), r;
            if (b < 2 || b > 36) jx_fail(c, line, "int() base must be >= 2 and <= 36");
            if (parse_py_int(v.u.s->p, v.u.s->n, (int)b, &r)) return jv_int(r);
            double f;
            if (parse_py_float(v.u.s->p, v.u.s->n, &f) && isfinite(f) && fabs(f) < 9.2e18) return jv_int((int64_t)f);
        }
        return dflt;
    }
    case F_FORMAT: {
        need_defined(c, v, line);
        if (v.k != JV_STR) jx_fail(c, line, "format filter expects a string");
        jv t = jv_list(c, (size_t)a->npos, 1);
        for (int i = 0; i < a->npos; i++) jl_push(c, t, a->pos[i]);
        if (a->nkw) jx_fail(c, line, "format filter with keyword arguments is not supported");
        return jx_percent_format(c, v, t, line);
    }
    case F_INDENT: return f_indent(c, v, a, line);
    case F_ITEMS: {
        args_end(c, a, 0, "items", line);
        if (v.k == JV_UNDEF) return jv_list(c, 1, 0);
        if (v.k != JV_DICT) jx_fail(c, line, "Can only get item pairs from a mapping.");
        jv out = jv_list(c, v.u.d->n, 0);
        for (size_t i = 0; i < v.u.d->n; i++) {
            jv t = jv_list(c, 2, 1);
            jl_push(c, t, v.u.d->keys[i]);
            jl_push(c, t, v.u.d->vals[i]);
            jl_push(c, out, t);
        }
        return out;
    }
    case F_JOIN: {
        jv d = arg(a, 0, "d", jv_str(c, "", 0), NULL);
        jv attribute = arg(a, 1, "attribute", jv_none(), NULL);
        args_end(c, a, 2, "join", line);
        jlist *items = jv_iterate(c, v, line);
        jv sep = jv_to_str(c, d);
        jbuf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (i) jb_put(c, &b, sep.u.s->p, sep.u.s->n);
            jv x = attribute.k != JV_NONE ? attr_path(c, items->v[i], attribute, line) : items->v[i];
            jv_write_str(c, &b, x);
        }
        jx_charge(c, items->n);
        return mkstr(c, &b);
    }
    case F_LIST: {
        args_end(c, a, 0, "list", line);
        jlist *items = jv_iterate(c, v, line);
        jv out = jv_list(c, items->n, 0);
        for (size_t i = 0; i < items->n; i++) jl_push(c, out, items->v[i]);
        return out;
    }
    case F_LOWER: args_end(c, a, 0, "lower", line); return str_map(c, jv_to_str(c, v), cp_lower);
    case F_UPPER: args_end(c, a, 0, "upper", line); return str_map(c, jv_to_str(c, v), cp_upper);
    case F_TITLE: args_end(c, a, 0, "title", line); return str_jtitle(c, jv_to_str(c, v));
    case F_MAP: return f_map(c, v, a, line);
    case F_MAX: return f_minmax(c, v, a, line, 1);
    case F_MIN: return f_minmax(c, v, a, line, 0);
    case F_SELECT: return f_select(c, v, a, line, 0, 1);
    case F_REJECT: return f_select(c, v, a, line, 0, 0);
    case F_SELECTATTR: return f_select(c, v, a, line, 1, 1);
    case F_REJECTATTR: return f_select(c, v, a, line, 1, 0);
    case F_REPLACE: {
        jv old = arg(a, 0, "old", jv_undef("missing"), NULL);
        jv neu = arg(a, 1, "new", jv_undef("missing"), NULL);
        jv cnt = arg(a, 2, "count", jv_none(), NULL);
        args_end(c, a, 3, "replace", line);
        jv s = jv_to_str(c, v);
        return str_replace(c, s, jv_to_str(c, old), jv_to_str(c, neu), cnt.k == JV_NONE ? -1 : need_int(c, cnt, "count", line));
    }
    case F_REVERSE: {
        args_end(c, a, 0, "reverse", line);
        need_defined(c, v, line);
        if (v.k == JV_STR) {
            jlist *ch = jv_iterate(c, v, line);
            jbuf b = {0};
            for (size_t i = ch->n; i > 0; i--) jb_put(c, &b, ch->v[i - 1].u.s->p, ch->v[i - 1].u.s->n);
            return mkstr(c, &b);
        }
        jlist *items = jv_iterate(c, v, line);
        jv out = jv_list(c, items->n, 0);
        for (size_t i = items->n; i > 0; i--) jl_push(c, out, items->v[i - 1]);
        return out;
    }
    case F_ROUND: {
        jv prec = arg(a, 0, "precision", jv_int(0), NULL);
        jv method = arg(a, 1, "method", jv_cstr(c, "common"), NULL);
        args_end(c, a, 2, "round", line);
        need_defined(c, v, line);
        int64_t p = need_int(c, prec, "precision", line);
        size_t mn;
        const char *m = need_str(c, method, "method", line, &mn);
        if (strcmp(m, "common") && strcmp(m, "ceil") && strcmp(m, "floor"))
            jx_fail(c, line, "method must be common, ceil or floor");
        if (v.k != JV_INT && v.k != JV_FLOAT && v.k != JV_BOOL)
            jx_fail(c, line, "type %s doesn't define __round__ method", jv_type_name(&v));
        if (!strcmp(m, "common")) {
            if (v.k != JV_FLOAT) return v.k == JV_BOOL ? jv_int(v.u.b) : v;
            if (p > 300 || p < -300) return v;
            if (p == 0) return jv_float(nearbyint(v.u.f));
            if (p > 0) {
                char buf[512];
                snprintf(buf, sizeof buf, "%.*f", (int)p, v.u.f);
                return jv_float(strtod(buf, NULL));
            }
            double sc = pow(10, (double)-p);
            return jv_float(nearbyint(v.u.f / sc) * sc);
        }
        double x = v.k == JV_FLOAT ? v.u.f : (double)(v.k == JV_INT ? v.u.i : v.u.b);
        double sc = pow(10, (double)p);
        return jv_float((!strcmp(m, "ceil") ? ceil(x * sc) : floor(x * sc)) / sc);
    }
    case F_SAFE: case F_STRING:
        args_end(c, a, 0, "string", line);
        return jv_to_str(c, v);
    case F_SORT: {
        jv rev = arg(a, 0, "reverse", jv_bool(0), NULL);
        jv cs = arg(a, 1, "case_sensitive", jv_bool(0), NULL);
        jv attribute = arg(a, 2, "attribute", jv_none(), NULL);
        args_end(c, a, 3, "sort", line);
        jlist *items = jv_iterate(c, v, line);
        jv *keys = jx_alloc(c, (items->n + 1) * sizeof(jv));
        for (size_t i = 0; i < items->n; i++) {
            jv x = attribute.k != JV_NONE ? attr_path(c, items->v[i], attribute, line) : items->v[i];
            keys[i] = lower_key(c, x, jv_truthy(&cs));
        }
        return sorted_list(c, items, keys, jv_truthy(&rev), line);
    }
    case F_SUM: {
        jv attribute = arg(a, 0, "attribute", jv_none(), NULL);
        jv start = arg(a, 1, "start", jv_int(0), NULL);
        args_end(c, a, 2, "sum", line);
        jlist *items = jv_iterate(c, v, line);
        int is_f = start.k == JV_FLOAT;
        int64_t si = start.k == JV_INT ? start.u.i : start.k == JV_BOOL ? start.u.b : 0;
        double sf = start.k == JV_FLOAT ? start.u.f : (double)si;
        if (start.k != JV_INT && start.k != JV_FLOAT && start.k != JV_BOOL) jx_fail(c, line, "sum start must be a number");
        for (size_t i = 0; i < items->n; i++) {
            jv x = attribute.k != JV_NONE ? attr_path(c, items->v[i], attribute, line) : items->v[i];
            need_defined(c, x, line);
            if (x.k == JV_FLOAT) {
                if (!is_f) { is_f = 1; sf = (double)si; }
                sf += x.u.f;
            } else if (x.k == JV_INT || x.k == JV_BOOL) {
                int64_t xi = x.k == JV_INT ? x.u.i : x.u.b;
                if (is_f) sf += (double)xi;
                else if (__builtin_add_overflow(si, xi, &si)) jx_fail(c, line, "integer overflow in sum");
            } else jx_fail(c, line, "unsupported operand type(s) for +: 'int' and '%s'", jv_type_name(&x));
        }
        return is_f ? jv_float(sf) : jv_int(si);
    }
    case F_TOJSON: return f_tojson(c, v, a, line);
    case F_TRIM: {
        jv chars = arg(a, 0, "chars", jv_none(), NULL);
        args_end(c, a, 1, "trim", line);
        jv s = jv_to_str(c, v);
        if (chars.k == JV_NONE) return str_strip(c, s, NULL, 0, 3);
        size_t n;
        const char *cs = need_str(c, chars, "chars", line, &n);
        return str_strip(c, s, cs, n, 3);
    }
    case F_TRUNCATE: {
        jv len = arg(a, 0, "length", jv_int(255), NULL);
        jv kill = arg(a, 1, "killwords", jv_bool(0), NULL);
        jv end = arg(a, 2, "end", jv_cstr(c, "..."), NULL);
        jv lee = arg(a, 3, "leeway", jv_int(5), NULL);
        args_end(c, a, 4, "truncate", line);
        jv s = jv_to_str(c, v);
        int64_t L = need_int(c, len, "length", line), lw = need_int(c, lee, "leeway", line);
        jv es = jv_to_str(c, end);
        int64_t elen = (int64_t)u8_len(es.u.s->p, es.u.s->n);
        if (L < elen) jx_fail(c, line, "expected length >= %lld, got %lld", (long long)elen, (long long)L);
        if (lw < 0) jx_fail(c, line, "expected leeway >= 0, got %lld", (long long)lw);
        int64_t slen = (int64_t)u8_len(s.u.s->p, s.u.s->n);
        if (slen <= L + lw) return s;
        size_t cut = u8_offset(s.u.s->p, s.u.s->n, (size_t)(L - elen));
        jbuf b = {0};
        if (jv_truthy(&kill)) jb_put(c, &b, s.u.s->p, cut);
        else {
            size_t k = cut;
            while (k > 0 && s.u.s->p[k - 1] != ' ') k--;
            jb_put(c, &b, s.u.s->p, k > 0 ? k - 1 : cut);
        }
        jb_put(c, &b, es.u.s->p, es.u.s->n);
        return mkstr(c, &b);
    }
    case F_UNIQUE: {
        jv cs = arg(a, 0, "case_sensitive", jv_bool(0), NULL);
        jv attribute = arg(a, 1, "attribute", jv_none(), NULL);
        args_end(c, a, 2, "unique", line);
        jlist *items = jv_iterate(c, v, line);
        jv seen = jv_dict(c, items->n);
        jv out = jv_list(c, items->n, 0);
        for (size_t i = 0; i < items->n; i++) {
            jv x = attribute.k != JV_NONE ? attr_path(c, items->v[i], attribute, line) : items->v[i];
            jv k = lower_key(c, x, jv_truthy(&cs));
            jv_hashable(c, k, line);
            if (jd_find(c, seen.u.d, k) >= 0) continue;
            jd_set(c, seen.u.d, k, jv_none());
            jl_push(c, out, items->v[i]);
        }
        return out;
    }
    case F_WORDCOUNT: {
        args_end(c, a, 0, "wordcount", line);
        jv s = jv_to_str(c, v);
        int64_t words = 0;
        int in = 0;
        size_t i = 0;
        while (i < s.u.s->n) {
            size_t adv;
            uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
            utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
            int w = cp == '_' || (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
                    (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
            if (w && !in) words++;
            in = w;
            i += adv;
        }
        return jv_int(words);
    }
    }
    jx_fail(c, line, "internal error: unknown filter %d", fid);
}

/* ---- tests ---------------------------------------------------------------------------------- */

static int is_number(const jv *v) { return v->k == JV_INT || v->k == JV_FLOAT || v->k == JV_BOOL; }

int jx_apply_test(jctx *c, int tid, jv v, jargs *a, int line) {
    jv other;
    switch (tid) {
    case T_DEFINED: args_end(c, a, 0, "defined", line); return v.k != JV_UNDEF;
    case T_UNDEFINED: args_end(c, a, 0, "undefined", line); return v.k == JV_UNDEF;
    case T_NONE: args_end(c, a, 0, "none", line); return v.k == JV_NONE;
    case T_BOOLEAN: args_end(c, a, 0, "boolean", line); return v.k == JV_BOOL;
    case T_TRUE: args_end(c, a, 0, "true", line); return v.k == JV_BOOL && v.u.b;
    case T_FALSE: args_end(c, a, 0, "false", line); return v.k == JV_BOOL && !v.u.b;
    case TS_STRING: args_end(c, a, 0, "string", line); return v.k == JV_STR;
    case T_NUMBER: args_end(c, a, 0, "number", line); return is_number(&v);
    case T_INTEGER: args_end(c, a, 0, "integer", line); return v.k == JV_INT;
    case T_FLOATT: args_end(c, a, 0, "float", line); return v.k == JV_FLOAT;
    case T_MAPPING: args_end(c, a, 0, "mapping", line); return v.k == JV_DICT;
    case T_ITERABLE:
        args_end(c, a, 0, "iterable", line);
        return v.k == JV_UNDEF || v.k == JV_STR || v.k == JV_LIST || v.k == JV_DICT;
    case T_SEQUENCE:
        args_end(c, a, 0, "sequence", line);
        return v.k == JV_UNDEF || v.k == JV_STR || v.k == JV_LIST || v.k == JV_DICT;
    case T_CALLABLE: args_end(c, a, 0, "callable", line); return v.k == JV_FUNC;
    case T_ESCAPED: args_end(c, a, 0, "escaped", line); return 0;
    case T_LOWER: case T_UPPER: {
        args_end(c, a, 0, tid == T_LOWER ? "lower" : "upper", line);
        jv s = jv_to_str(c, v);
        int any = 0;
        size_t i = 0;
        while (i < s.u.s->n) {
            size_t adv;
            uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
            if (cp_cased(cp)) {
                any = 1;
                if (tid == T_LOWER ? cp_lower(cp) != cp : cp_upper(cp) != cp) return 0;
            }
            i += adv;
        }
        return any;
    }
    case T_EVEN: case T_ODD: {
        args_end(c, a, 0, tid == T_EVEN ? "even" : "odd", line);
        need_defined(c, v, line);
        if (v.k == JV_INT || v.k == JV_BOOL) {
            int64_t x = v.k == JV_INT ? v.u.i : v.u.b;
            return ((x % 2) == 0) == (tid == T_EVEN);
        }
        if (v.k == JV_FLOAT) {
            double m = fmod(v.u.f, 2.0);
            if (m < 0) m += 2;
            return (m == 0) == (tid == T_EVEN);
        }
        jx_fail(c, line, "unsupported operand type(s) for %%: '%s' and 'int'", jv_type_name(&v));
    }
    case T_DIVISIBLEBY: {
        jv num = arg(a, 0, "num", jv_undef("divisibleby() missing argument 'num'"), NULL);
        args_end(c, a, 1, "divisibleby", line);
        need_defined(c, v, line);
        need_defined(c, num, line);
        if (!is_number(&v) || !is_number(&num)) jx_fail(c, line, "divisibleby needs numbers");
        if (v.k != JV_FLOAT && num.k != JV_FLOAT) {
            int64_t x = v.k == JV_INT ? v.u.i : v.u.b, y = num.k == JV_INT ? num.u.i : num.u.b;
            if (y == 0) jx_fail(c, line, "integer division or modulo by zero");
            return y == -1 || x % y == 0;
        }
        double x = v.k == JV_FLOAT ? v.u.f : (double)(v.k == JV_INT ? v.u.i : v.u.b);
        double y = num.k == JV_FLOAT ? num.u.f : (double)(num.k == JV_INT ? num.u.i : num.u.b);
        if (y == 0) jx_fail(c, line, "float modulo");
        return fmod(x, y) == 0;
    }
    case T_EQ: case T_EQUALTO: case T_NE: case T_LT: case T_LE: case T_GT: case T_GE: case T_GREATERTHAN:
    case T_LESSTHAN: case T_IN: case T_SAMEAS: {
        other = arg(a, 0, "other", jv_undef("the test is missing its argument"), NULL);
        args_end(c, a, 1, k_tests[tid], line);
        if (tid == T_EQ || tid == T_EQUALTO) return jv_eq(c, v, other);
        if (tid == T_NE) return !jv_eq(c, v, other);
        if (tid == T_SAMEAS) {
            if (v.k != other.k) return 0;
            if (v.k == JV_STR) return v.u.s == other.u.s;
            if (v.k == JV_LIST) return v.u.l == other.u.l;
            if (v.k == JV_DICT || v.k == JV_NS) return v.u.d == other.u.d;
            return jv_eq(c, v, other);
        }
        if (tid == T_IN) {
            /* `v is in(seq)` */
            jargs none = no_args();
            (void)none;
            if (other.k == JV_STR) {
                need_defined(c, v, line);
                if (v.k != JV_STR) jx_fail(c, line, "'in <string>' requires string as left operand, not %s", jv_type_name(&v));
                return v.u.s->n == 0 || memmem(other.u.s->p, other.u.s->n, v.u.s->p, v.u.s->n) != NULL;
            }
            if (other.k == JV_DICT) return jd_find(c, other.u.d, v) >= 0;
            jlist *items = jv_iterate(c, other, line);
            for (size_t i = 0; i < items->n; i++)
                if (jv_eq(c, items->v[i], v)) return 1;
            return 0;
        }
        need_defined(c, v, line);
        need_defined(c, other, line);
        int r = jv_cmp(c, v, other, line);
        switch (tid) {
        case T_LT: case T_LESSTHAN: return r < 0;
        case T_LE: return r <= 0;
        case T_GT: case T_GREATERTHAN: return r > 0;
        default: return r >= 0;
        }
    }
    case T_FILTER: case T_TEST: {
        jv name = arg(a, 0, "value", jv_undef("missing"), NULL);
        args_end(c, a, 1, k_tests[tid], line);
        if (name.k != JV_STR) return 0;
        return tid == T_FILTER ? jx_filter_id(name.u.s->p) >= 0 : jx_test_id(name.u.s->p) >= 0;
    }
    }
    jx_fail(c, line, "internal error: unknown test %d", tid);
}

/* ---- attribute and item access -------------------------------------------------------------- */

static const char *k_str_methods[] = {
    "startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "upper",
    "lower", "title", "capitalize", "replace", "find", "rfind", "index", "rindex", "count", "join",
    "format", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper", "isnumeric",
    "isdecimal", "zfill", "center", "ljust", "rjust", "removeprefix", "removesuffix", "swapcase",
    "partition", "rpartition", "casefold", NULL,
};
static const char *k_dict_methods[] = {"items", "keys", "values", "get", "copy", NULL};
static const char *k_dict_unsafe[] = {"pop", "popitem", "setdefault", "update", "clear", NULL};
static const char *k_list_methods[] = {"index", "count", "copy", NULL};
static const char *k_list_unsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear", NULL};

static int in_list(const char **names, const char *name) {
    for (int i = 0; names[i]; i++)
        if (!strcmp(names[i], name)) return 1;
    return 0;
}

static jv bound(jctx *c, jv self, const char *name) {
    jv f = jv_func(c, FN_METHOD, name);
    f.u.fn->self = self;
    return f;
}

static jv unsafe(jctx *c, jv obj, const char *name) {
    return jv_undef(jv_strf(c, "access to attribute '%s' of '%s' object is unsafe (the sandbox forbids mutating values)",
                            name, jv_type_name(&obj)).u.s->p);
}

static jv loop_attr(jctx *c, jloop *L, const char *name) {
    size_t n = L->items->n, i = L->i;
    if (!strcmp(name, "index")) return jv_int((int64_t)i + 1);
    if (!strcmp(name, "index0")) return jv_int((int64_t)i);
    if (!strcmp(name, "revindex")) return jv_int((int64_t)(n - i));
    if (!strcmp(name, "revindex0")) return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return jv_int((int64_t)n);
    if (!strcmp(name, "depth")) return jv_int(L->depth);
    if (!strcmp(name, "depth0")) return jv_int(L->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? L->items->v[i - 1] : jv_undef("there is no previous item");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? L->items->v[i + 1] : jv_undef("there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        jv f = jv_func(c, FN_LOOPCALL, name);
        f.u.fn->id = name[1] == 'y' ? 0 : 1;
        f.u.fn->loop = L;
        return f;
    }
    return jv_undef(jv_strf(c, "'LoopContext object' has no attribute '%s'", name).u.s->p);
}

jv jx_getattr(jctx *c, jv obj, const char *name, int line) {
    switch (obj.k) {
    case JV_UNDEF: jx_fail(c, line, "%s", obj.u.undef);
    case JV_DICT:
        if (in_list(k_dict_methods, name)) return bound(c, obj, name);
        if (in_list(k_dict_unsafe, name)) return unsafe(c, obj, name);
        {
            jv *v = jd_get_str(c, obj.u.d, name);
            if (v) return *v;
        }
        return undef_attr(c, obj, name);
    case JV_NS: {
        jv *v = jd_get_str(c, obj.u.d, name);
        if (v) return *v;
        return jv_undef(jv_strf(c, "'Namespace object' has no attribute '%s'", name).u.s->p);
    }
    case JV_STR:
        if (in_list(k_str_methods, name)) return bound(c, obj, name);
        return undef_attr(c, obj, name);
    case JV_LIST:
        if (in_list(k_list_methods, name)) return bound(c, obj, name);
        if (!obj.u.l->tuple && in_list(k_list_unsafe, name)) return unsafe(c, obj, name);
        return undef_attr(c, obj, name);
    case JV_LOOP: return loop_attr(c, obj.u.loop, name);
    default: return undef_attr(c, obj, name);
    }
}

jv jx_getitem(jctx *c, jv obj, jv key, int line) {
    if (obj.k == JV_UNDEF) jx_fail(c, line, "%s", obj.u.undef);
    int keyint = key.k == JV_INT || key.k == JV_BOOL;
    int64_t ki = key.k == JV_INT ? key.u.i : key.k == JV_BOOL ? key.u.b : 0;
    switch (obj.k) {
    case JV_LIST:
        if (keyint) {
            int64_t n = (int64_t)obj.u.l->n, i = ki < 0 ? ki + n : ki;
            if (i >= 0 && i < n) return obj.u.l->v[i];
            return jv_undef(jv_strf(c, "%s object has no element %lld", jv_type_name(&obj), (long long)ki).u.s->p);
        }
        break;
    case JV_STR:
        if (keyint) {
            int64_t n = (int64_t)u8_len(obj.u.s->p, obj.u.s->n), i = ki < 0 ? ki + n : ki;
            if (i >= 0 && i < n) {
                size_t off = u8_offset(obj.u.s->p, obj.u.s->n, (size_t)i), adv;
                u8_decode(obj.u.s->p + off, obj.u.s->n - off, &adv);
                return jv_str(c, obj.u.s->p + off, adv);
            }
            return jv_undef(jv_strf(c, "str object has no element %lld", (long long)ki).u.s->p);
        }
        break;
    case JV_DICT: {
        if (key.k == JV_UNDEF) jx_fail(c, line, "%s", key.u.undef);
        int hashable = !(key.k == JV_LIST && !key.u.l->tuple) && key.k != JV_DICT && key.k != JV_NS;
        if (hashable) {
            int i = jd_find(c, obj.u.d, key);
            if (i >= 0) return obj.u.d->vals[i];
        }
        break;
    }
    default: break;
    }
    if (key.k == JV_STR) return jx_getattr(c, obj, key.u.s->p, line);
    if (key.k == JV_UNDEF) jx_fail(c, line, "%s", key.u.undef);
    jbuf b = {0};
    jv_write_repr(c, &b, key);
    return jv_undef(jv_strf(c, "%s has no element %s", obj_repr(c, obj), b.p ? b.p : "").u.s->p);
}

/* ---- methods -------------------------------------------------------------------------------- */

/* Python str.format with {} / {0} / {name} fields and no format specs. */
static jv str_format(jctx *c, jv fmt, jargs *a, int line) {
    jbuf b = {0};
    const char *p = fmt.u.s->p;
    size_t n = fmt.u.s->n;
    int auto_idx = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (ch == '{' && i + 1 < n && p[i + 1] == '{') { jb_puts(c, &b, "{"); i++; continue; }
        if (ch == '}' && i + 1 < n && p[i + 1] == '}') { jb_puts(c, &b, "}"); i++; continue; }
        if (ch == '}') jx_fail(c, line, "Single '}' encountered in format string");
        if (ch != '{') { jb_put(c, &b, &ch, 1); continue; }
        size_t j = i + 1;
        while (j < n && p[j] != '}') j++;
        if (j >= n) jx_fail(c, line, "Single '{' encountered in format string");
        const char *field = p + i + 1;
        size_t fl = j - i - 1;
        if (memchr(field, ':', fl) || memchr(field, '!', fl) || memchr(field, '.', fl) || memchr(field, '[', fl))
            jx_fail(c, line, "str.format: format specs and field access are not supported");
        jv val;
        if (fl == 0) {
            if (auto_idx >= a->npos) jx_fail(c, line, "Replacement index %d out of range for positional args tuple", auto_idx);
            val = a->pos[auto_idx++];
        } else if (field[0] >= '0' && field[0] <= '9') {
            long k = strtol(field, NULL, 10);
            if (k >= a->npos) jx_fail(c, line, "Replacement index %ld out of range for positional args tuple", k);
            val = a->pos[k];
        } else {
            int found = -1;
            for (int k = 0; k < a->nkw; k++)
                if (strlen(a->kwn[k]) == fl && !memcmp(a->kwn[k], field, fl)) found = k;
            if (found < 0) jx_fail(c, line, "KeyError: '%.*s'", (int)fl, field);
            val = a->kwv[found];
        }
        jv_write_str(c, &b, val);
        i = j;
    }
    return mkstr(c, &b);
}

static int str_all(jv s, int (*pred)(uint32_t)) {
    if (!s.u.s->n) return 0;
    size_t i = 0;
    while (i < s.u.s->n) {
        size_t adv;
        if (!pred(u8_decode(s.u.s->p + i, s.u.s->n - i, &adv))) return 0;
        i += adv;
    }
    return 1;
}
static int p_digit(uint32_t cp) { return utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_ND; }
static int p_alpha(uint32_t cp) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static int p_numeric(uint32_t cp) {
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)cp);
    return k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO;
}
static int p_alnum(uint32_t cp) { return p_alpha(cp) || p_numeric(cp); }
static int p_space(uint32_t cp) { return py_isspace(cp); }

static jv pad_str(jctx *c, jv s, int64_t width, jv fill, int mode, int line) {
    /* mode 0 center, 1 ljust, 2 rjust */
    uint32_t fc = ' ';
    if (fill.k != JV_NONE) {
        size_t n;
        const char *f = need_str(c, fill, "fill character", line, &n);
        if (u8_len(f, n) != 1) jx_fail(c, line, "The fill character must be exactly one character long");
        size_t adv;
        fc = u8_decode(f, n, &adv);
    }
    int64_t len = (int64_t)u8_len(s.u.s->p, s.u.s->n);
    if (width <= len) return s;
    if (width > 1000000) jx_fail(c, line, "width too large");
    int64_t pad = width - len, left = mode == 1 ? 0 : mode == 2 ? pad : pad / 2 + (pad & width & 1);
    jbuf b = {0};
    for (int64_t i = 0; i < left; i++) put_cp(c, &b, fc);
    jb_put(c, &b, s.u.s->p, s.u.s->n);
    for (int64_t i = 0; i < pad - left; i++) put_cp(c, &b, fc);
    return mkstr(c, &b);
}

static jv call_str_method(jctx *c, jv s, const char *m, jargs *a, int line) {
    size_t n;
    int g;
    if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
        jv pre = arg(a, 0, NULL, jv_undef("startswith() takes at least 1 argument (0 given)"), NULL);
        jv st = arg(a, 1, NULL, jv_none(), &g);
        jv en = arg(a, 2, NULL, jv_none(), NULL);
        args_end(c, a, 3, m, line);
        jv target = s;
        if (g) {
            jv none = jv_none();
            target = jx_slice(c, s, st, en.k == JV_NONE ? none : en, none, line);
        }
        return jv_bool(str_startswith(c, target, pre, m[0] == 'e', line));
    }
    if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
        jv chars = arg(a, 0, "chars", jv_none(), NULL);
        args_end(c, a, 1, m, line);
        int which = m[0] == 'l' ? 1 : m[0] == 'r' ? 2 : 3;
        if (chars.k == JV_NONE) return str_strip(c, s, NULL, 0, which);
        const char *cs = need_str(c, chars, "strip chars", line, &n);
        return str_strip(c, s, cs, n, which);
    }
    if (!strcmp(m, "split") || !strcmp(m, "rsplit")) {
        jv sep = arg(a, 0, "sep", jv_none(), NULL);
        jv ms = arg(a, 1, "maxsplit", jv_int(-1), NULL);
        args_end(c, a, 2, m, line);
        return str_split(c, s, sep, need_int(c, ms, "maxsplit", line), m[0] == 'r', line);
    }
    if (!strcmp(m, "splitlines")) {
        jv ke = arg(a, 0, "keepends", jv_bool(0), NULL);
        args_end(c, a, 1, m, line);
        return str_splitlines(c, s.u.s->p, s.u.s->n, jv_truthy(&ke));
    }
    if (!strcmp(m, "upper")) { args_end(c, a, 0, m, line); return str_map(c, s, cp_upper); }
    if (!strcmp(m, "lower") || !strcmp(m, "casefold")) { args_end(c, a, 0, m, line); return str_map(c, s, cp_lower); }
    if (!strcmp(m, "title")) { args_end(c, a, 0, m, line); return str_pytitle(c, s); }
    if (!strcmp(m, "capitalize")) { args_end(c, a, 0, m, line); return str_capitalize(c, s); }
    if (!strcmp(m, "swapcase")) {
        args_end(c, a, 0, m, line);
        jbuf b = {0};
        size_t i = 0;
        while (i < s.u.s->n) {
            size_t adv;
            uint32_t cp = u8_decode(s.u.s->p + i, s.u.s->n - i, &adv);
            uint32_t lo = cp_lower(cp);
            put_cp(c, &b, lo != cp ? lo : cp_upper(cp));
            i += adv;
        }
        return mkstr(c, &b);
    }
    if (!strcmp(m, "replace")) {
        jv old = arg(a, 0, "old", jv_undef("replace() missing 'old'"), NULL);
        jv neu = arg(a, 1, "new", jv_undef("replace() missing 'new'"), NULL);
        jv cnt = arg(a, 2, "count", jv_int(-1), NULL);
        args_end(c, a, 3, m, line);
        need_str(c, old, "replace() argument 1", line, &n);
        need_str(c, neu, "replace() argument 2", line, &n);
        return str_replace(c, s, old, neu, need_int(c, cnt, "count", line));
    }
    if (!strcmp(m, "find") || !strcmp(m, "rfind") || !strcmp(m, "index") || !strcmp(m, "rindex") || !strcmp(m, "count")) {
        jv sub = arg(a, 0, NULL, jv_undef("missing argument"), NULL);
        args_end(c, a, 1, m, line);
        need_str(c, sub, "substring", line, &n);
        if (m[0] == 'c') return jv_int(py_count(s, sub));
        int64_t r = py_find(c, s, sub, m[0] == 'r');
        if (r < 0 && (!strcmp(m, "index") || !strcmp(m, "rindex"))) jx_fail(c, line, "substring not found");
        return jv_int(r);
    }
    if (!strcmp(m, "join")) {
        jv it = arg(a, 0, "iterable", jv_undef("join() takes exactly one argument (0 given)"), NULL);
        args_end(c, a, 1, m, line);
        need_defined(c, it, line);
        jlist *items = jv_iterate(c, it, line);
        jbuf b = {0};
        for (size_t i = 0; i < items->n; i++) {
            if (items->v[i].k != JV_STR)
                jx_fail(c, line, "sequence item %zu: expected str instance, %s found", i, jv_type_name(&items->v[i]));
            if (i) jb_put(c, &b, s.u.s->p, s.u.s->n);
            jb_put(c, &b, items->v[i].u.s->p, items->v[i].u.s->n);
        }
        return mkstr(c, &b);
    }
    if (!strcmp(m, "format")) return str_format(c, s, a, line);
    if (!strcmp(m, "isdigit") || !strcmp(m, "isdecimal")) { args_end(c, a, 0, m, line); return jv_bool(str_all(s, p_digit)); }
    if (!strcmp(m, "isnumeric")) { args_end(c, a, 0, m, line); return jv_bool(str_all(s, p_numeric)); }
    if (!strcmp(m, "isalpha")) { args_end(c, a, 0, m, line); return jv_bool(str_all(s, p_alpha)); }
    if (!strcmp(m, "isalnum")) { args_end(c, a, 0, m, line); return jv_bool(str_all(s, p_alnum)); }
    if (!strcmp(m, "isspace")) { args_end(c, a, 0, m, line); return jv_bool(str_all(s, p_space)); }
    if (!strcmp(m, "islower") || !strcmp(m, "isupper")) {
        jargs none = no_args();
        args_end(c, a, 0, m, line);
        return jv_bool(jx_apply_test(c, m[2] == 'l' ? T_LOWER : T_UPPER, s, &none, line));
    }
    if (!strcmp(m, "zfill")) {
        jv w = arg(a, 0, "width", jv_undef("zfill() missing width"), NULL);
        args_end(c, a, 1, m, line);
        int64_t width = need_int(c, w, "width", line), len = (int64_t)u8_len(s.u.s->p, s.u.s->n);
        if (width <= len) return s;
        if (width > 1000000) jx_fail(c, line, "width too large");
        jbuf b = {0};
        size_t st = 0;
        if (s.u.s->n && (s.u.s->p[0] == '-' || s.u.s->p[0] == '+')) { jb_put(c, &b, s.u.s->p, 1); st = 1; }
        for (int64_t i = 0; i < width - len; i++) jb_puts(c, &b, "0");
        jb_put(c, &b, s.u.s->p + st, s.u.s->n - st);
        return mkstr(c, &b);
    }
    if (!strcmp(m, "center") || !strcmp(m, "ljust") || !strcmp(m, "rjust")) {
        jv w = arg(a, 0, "width", jv_undef("missing width"), NULL);
        jv fill = arg(a, 1, "fillchar", jv_none(), NULL);
        args_end(c, a, 2, m, line);
        return pad_str(c, s, need_int(c, w, "width", line), fill, m[0] == 'c' ? 0 : m[0] == 'l' ? 1 : 2, line);
    }
    if (!strcmp(m, "removeprefix") || !strcmp(m, "removesuffix")) {
        jv x = arg(a, 0, NULL, jv_undef("missing argument"), NULL);
        args_end(c, a, 1, m, line);
        need_str(c, x, m, line, &n);
        int suffix = m[6] == 's';
        if (str_startswith(c, s, x, suffix, line))
            return suffix ? jv_str(c, s.u.s->p, s.u.s->n - n) : jv_str(c, s.u.s->p + n, s.u.s->n - n);
        return s;
    }
    if (!strcmp(m, "partition") || !strcmp(m, "rpartition")) {
        jv sep = arg(a, 0, NULL, jv_undef("missing argument"), NULL);
        args_end(c, a, 1, m, line);
        const char *sp = need_str(c, sep, "separator", line, &n);
        if (!n) jx_fail(c, line, "empty separator");
        jv out = jv_list(c, 3, 1);
        const char *q = NULL;
        if (m[0] == 'p') q = memmem(s.u.s->p, s.u.s->n, sp, n);
        else if (s.u.s->n >= n)
            for (size_t k = s.u.s->n - n + 1; k > 0; k--)
                if (!memcmp(s.u.s->p + k - 1, sp, n)) { q = s.u.s->p + k - 1; break; }
        if (!q) {
            jv e = jv_str(c, "", 0);
            if (m[0] == 'p') { jl_push(c, out, s); jl_push(c, out, e); jl_push(c, out, e); }
            else { jl_push(c, out, e); jl_push(c, out, e); jl_push(c, out, s); }
            return out;
        }
        size_t at = (size_t)(q - s.u.s->p);
        jl_push(c, out, jv_str(c, s.u.s->p, at));
        jl_push(c, out, sep);
        jl_push(c, out, jv_str(c, s.u.s->p + at + n, s.u.s->n - at - n));
        return out;
    }
    jx_fail(c, line, "str.%s is not supported", m);
}

static jv call_method(jctx *c, jfunc *fn, jargs *a, int line) {
    jv self = fn->self;
    const char *m = fn->name;
    if (self.k == JV_STR) return call_str_method(c, self, m, a, line);
    if (self.k == JV_DICT) {
        jdict *d = self.u.d;
        if (!strcmp(m, "items") || !strcmp(m, "keys") || !strcmp(m, "values")) {
            args_end(c, a, 0, m, line);
            jv out = jv_list(c, d->n, 0);
            for (size_t i = 0; i < d->n; i++) {
                if (m[0] == 'i') {
                    jv t = jv_list(c, 2, 1);
                    jl_push(c, t, d->keys[i]);
                    jl_push(c, t, d->vals[i]);
                    jl_push(c, out, t);
                } else jl_push(c, out, m[0] == 'k' ? d->keys[i] : d->vals[i]);
            }
            return out;
        }
        if (!strcmp(m, "get")) {
            jv key = arg(a, 0, NULL, jv_undef("get expected at least 1 argument, got 0"), NULL);
            jv dflt = arg(a, 1, NULL, jv_none(), NULL);
            args_end(c, a, 2, m, line);
            need_defined(c, key, line);
            jv_hashable(c, key, line);
            int i = jd_find(c, d, key);
            return i >= 0 ? d->vals[i] : dflt;
        }
        if (!strcmp(m, "copy")) {
            args_end(c, a, 0, m, line);
            jv out = jv_dict(c, d->n);
            for (size_t i = 0; i < d->n; i++) jd_set(c, out.u.d, d->keys[i], d->vals[i]);
            return out;
        }
    }
    if (self.k == JV_LIST) {
        jlist *l = self.u.l;
        if (!strcmp(m, "index") || !strcmp(m, "count")) {
            jv x = arg(a, 0, NULL, jv_undef("missing argument"), NULL);
            args_end(c, a, 1, m, line);
            int64_t k = 0;
            for (size_t i = 0; i < l->n; i++)
                if (jv_eq(c, l->v[i], x)) {
                    if (m[0] == 'i') return jv_int((int64_t)i);
                    k++;
                }
            if (m[0] == 'i') jx_fail(c, line, "value is not in list");
            return jv_int(k);
        }
        if (!strcmp(m, "copy")) {
            args_end(c, a, 0, m, line);
            jv out = jv_list(c, l->n, 0);
            for (size_t i = 0; i < l->n; i++) jl_push(c, out, l->v[i]);
            return out;
        }
    }
    jx_fail(c, line, "'%s' object has no method '%s'", jv_type_name(&self), m);
}

/* ---- global functions ----------------------------------------------------------------------- */

enum { GF_RANGE, GF_NAMESPACE, GF_DICT, GF_RAISE, GF_STRFTIME, GF_JOINER, GF_COUNT };
static const char *k_globals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now", "joiner"};

void jx_install_globals(jctx *c, scope *g) {
    for (int i = 0; i < GF_COUNT; i++) {
        jv f = jv_func(c, FN_BUILTIN, k_globals[i]);
        f.u.fn->id = i;
        jx_scope_set(c, g, k_globals[i], f);
    }
}

#define MAX_RANGE 100000

static jv call_builtin(jctx *c, jfunc *fn, jargs *a, int line) {
    switch (fn->id) {
    case GF_RANGE: {
        if (a->nkw) jx_fail(c, line, "range() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 3) jx_fail(c, line, "range expected 1 to 3 arguments, got %d", a->npos);
        int64_t start = 0, stop, step = 1;
        if (a->npos == 1) stop = need_int(c, a->pos[0], "range() argument", line);
        else {
            start = need_int(c, a->pos[0], "range() argument", line);
            stop = need_int(c, a->pos[1], "range() argument", line);
            if (a->npos == 3) step = need_int(c, a->pos[2], "range() argument", line);
        }
        if (step == 0) jx_fail(c, line, "range() arg 3 must not be zero");
        double cnt = step > 0 ? ceil(((double)stop - (double)start) / (double)step) : ceil(((double)start - (double)stop) / (double)-step);
        if (cnt < 0) cnt = 0;
        if (cnt > MAX_RANGE)
            jx_fail(c, line, "range too big: the sandbox blocks ranges larger than %d items", MAX_RANGE);
        jv out = jv_list(c, (size_t)cnt + 1, 0);
        for (int64_t i = 0; i < (int64_t)cnt; i++) jl_push(c, out, jv_int(start + i * step));
        jx_charge(c, (size_t)cnt);
        return out;
    }
    case GF_NAMESPACE: case GF_DICT: {
        if (a->npos > 1) jx_fail(c, line, "%s() expected at most 1 positional argument", fn->name);
        jv d = jv_dict(c, 4);
        if (fn->id == GF_NAMESPACE) d.k = JV_NS;
        if (a->npos == 1) {
            jv src = a->pos[0];
            if (src.k == JV_DICT || src.k == JV_NS) {
                for (size_t i = 0; i < src.u.d->n; i++) jd_set(c, d.u.d, src.u.d->keys[i], src.u.d->vals[i]);
            } else {
                jlist *items = jv_iterate(c, src, line);
                for (size_t i = 0; i < items->n; i++) {
                    jv p = items->v[i];
                    if (p.k != JV_LIST || p.u.l->n != 2) jx_fail(c, line, "dictionary update sequence element #%zu has wrong length", i);
                    jv_hashable(c, p.u.l->v[0], line);
                    jd_set(c, d.u.d, p.u.l->v[0], p.u.l->v[1]);
                }
            }
        }
        for (int k = 0; k < a->nkw; k++) jd_set(c, d.u.d, jv_cstr(c, a->kwn[k]), a->kwv[k]);
        return d;
    }
    case GF_RAISE: {
        jv msg = arg(a, 0, "message", jv_cstr(c, ""), NULL);
        jv s = jv_to_str(c, msg);
        jx_fail(c, line, "template raised an exception: %s", s.u.s->p);
    }
    case GF_STRFTIME: {
        jv f = arg(a, 0, "format", jv_undef("strftime_now() missing format"), NULL);
        args_end(c, a, 1, "strftime_now", line);
        size_t n;
        const char *fmt = need_str(c, f, "strftime_now format", line, &n);
        if (n > 256) jx_fail(c, line, "strftime_now format too long");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char buf[1024];
        size_t k = strftime(buf, sizeof buf, fmt, &tmv);
        return jv_str(c, buf, k);
    }
    case GF_JOINER: {
        jv sep = arg(a, 0, "sep", jv_cstr(c, ", "), NULL);
        args_end(c, a, 1, "joiner", line);
        jv j = jv_func(c, FN_JOINER, "joiner");
        j.u.fn->sep = sep;
        return j;
    }
    }
    jx_fail(c, line, "internal error: unknown builtin");
}

jv jx_call(jctx *c, jv fn, jargs *a, int line) {
    if (fn.k == JV_UNDEF) jx_fail(c, line, "%s", fn.u.undef);
    if (fn.k != JV_FUNC) jx_fail(c, line, "'%s' object is not callable", jv_type_name(&fn));
    jfunc *f = fn.u.fn;
    switch (f->kind) {
    case FN_BUILTIN: return call_builtin(c, f, a, line);
    case FN_METHOD: return call_method(c, f, a, line);
    case FN_MACRO: case FN_CALLER: return jx_call_macro(c, f, a, line);
    case FN_JOINER:
        args_end(c, a, 0, "joiner", line);
        if (!f->joiner_used) {
            f->joiner_used = 1;
            return jv_str(c, "", 0);
        }
        return f->sep;
    case FN_LOOPCALL: {
        jloop *L = f->loop;
        if (f->id == 0) {
            if (a->npos == 0) jx_fail(c, line, "no items for cycling given");
            return a->pos[L->i % (size_t)a->npos];
        }
        jv cur = jv_list(c, (size_t)a->npos, 0);
        for (int i = 0; i < a->npos; i++) jl_push(c, cur, a->pos[i]);
        int changed = !L->has_last_changed || !jv_eq(c, cur, L->last_changed);
        L->has_last_changed = 1;
        L->last_changed = cur;
        return jv_bool(changed);
    }
    }
    jx_fail(c, line, "object is not callable");
}
