/* regex.c — the safe subset of JSON Schema `pattern` (ECMAScript syntax with the "u" flag, as ajv runs
 * it) and the string `format`s, compiled to a DFA over Unicode scalar values that the STRING node of
 * match.c steps with each decoded code point of the JSON string (docs/structured-output.md).
 *
 * Subset: literals; escapes \d \w \s \D \W \S \t \n \r \f \v \0 \xHH \uHHHH \u{H..} and escaped syntax
 * characters; classes [...] / [^...] with ranges; '.'; groups ( ) and (?: ); alternation |; quantifiers
 * * + ? {n} {n,} {n,m} (greedy); ^ at the start and $ at the end of a top-level alternative. Refused
 * with the reason: backreferences, lookaround, word boundaries, lazy quantifiers, unicode properties,
 * named groups, anchors elsewhere, and patterns whose expansion or DFA exceeds the limits below.
 * Unanchored ends match anywhere (JSON Schema patterns are searches, not full matches). */
#include <stdlib.h>
#include <string.h>

#include "grammar_int.h"

#define RX_MAX_NFA 10000   /* NFA states after expanding counted repetition */
#define RX_MAX_DFA 4000    /* DFA states */
#define RX_MAX_CELLS (2 << 20) /* DFA states x elementary intervals (the subset construction's work) */
#define RX_MAX_VIABLE (8 << 20) /* bytes of the (length, state) viability table */
#define RX_MAX_CP 0x10FFFF

/* ---- character sets: sorted, merged ranges of code points ---- */

typedef struct {
    uint32_t (*r)[2];
    int n, cap;
} cset;

static int cset_add(cset *s, uint32_t lo, uint32_t hi) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 8;
        void *p = realloc(s->r, (size_t)cap * sizeof *s->r);
        if (!p) return -1;
        s->r = p;
        s->cap = cap;
    }
    s->r[s->n][0] = lo;
    s->r[s->n][1] = hi;
    s->n++;
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return (x[0] > y[0]) - (x[0] < y[0]);
}

static void cset_norm(cset *s) {
    if (!s->n) return;
    qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_range);
    int m = 0;
    for (int i = 1; i < s->n; i++) {
        if (s->r[i][0] <= s->r[m][1] + 1) {
            if (s->r[i][1] > s->r[m][1]) s->r[m][1] = s->r[i][1];
        } else
            s->r[++m][0] = s->r[i][0], s->r[m][1] = s->r[i][1];
    }
    s->n = m + 1;
}

/* s = the complement of s over [0, RX_MAX_CP]. */
static int cset_negate(cset *s) {
    cset_norm(s);
    cset o = {0};
    uint32_t next = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->r[i][0] > next && cset_add(&o, next, s->r[i][0] - 1)) return -1;
        next = s->r[i][1] + 1;
    }
    if (next <= RX_MAX_CP && cset_add(&o, next, RX_MAX_CP)) return -1;
    free(s->r);
    *s = o;
    return 0;
}

/* \d \w \s (upper case: negated) into s. */
static int cset_class(cset *s, int c) {
    cset t = {0};
    int rc = 0;
    switch (c | 0x20) {
    case 'd': rc = cset_add(&t, '0', '9'); break;
    case 'w': rc = cset_add(&t, '0', '9') || cset_add(&t, 'A', 'Z') || cset_add(&t, 'a', 'z') || cset_add(&t, '_', '_'); break;
    default: { /* ECMAScript WhiteSpace and LineTerminator */
        static const uint32_t ws[][2] = {{9, 13}, {32, 32}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
                                         {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000},
                                         {0xfeff, 0xfeff}};
        for (size_t i = 0; i < sizeof ws / sizeof *ws && !rc; i++) rc = cset_add(&t, ws[i][0], ws[i][1]);
    }
    }
    if (!rc && c >= 'A' && c <= 'Z') rc = cset_negate(&t);
    for (int i = 0; i < t.n && !rc; i++) rc = cset_add(s, t.r[i][0], t.r[i][1]);
    free(t.r);
    return rc;
}

/* ---- syntax tree ---- */

typedef enum { RX_SET, RX_CAT, RX_ALT, RX_REP } rx_kind;

typedef struct rx_node {
    rx_kind kind;
    cset set;               /* SET */
    struct rx_node **kids;  /* CAT / ALT: n kids; REP: kids[0] */
    int n, cap;
    int min, max;           /* REP: max -1 = unbounded */
    long size;              /* NFA states when expanded (bounded by RX_MAX_NFA + 1) */
} rx_node;

static void rx_free(rx_node *n) {
    if (!n) return;
    for (int i = 0; i < n->n; i++) rx_free(n->kids[i]);
    free(n->kids);
    free(n->set.r);
    free(n);
}

static rx_node *rx_new(rx_kind k) {
    rx_node *n = calloc(1, sizeof *n);
    if (n) n->kind = k;
    return n;
}

static int rx_push(rx_node *p, rx_node *k) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 4;
        void *q = realloc(p->kids, (size_t)cap * sizeof *p->kids);
        if (!q) return -1;
        p->kids = q;
        p->cap = cap;
    }
    p->kids[p->n++] = k;
    return 0;
}

typedef struct {
    const char *s;   /* the pattern (UTF-8) */
    size_t i, n;
    const char *kw;  /* "pattern" or "format" (messages) */
    const char *path;
    mtplx_err *err;
    int depth;
} rx_parser;

static int rx_fail(rx_parser *p, const char *why) {
    return err_set(p->err, MTPLX_EUNSUPPORTED, "schema: '%s' at %s: %s (at offset %zu of the pattern)", p->kw, p->path,
                   why, p->i);
}

/* The next code point of the pattern (UTF-8), or -1 at the end / on bad UTF-8. */
static long rx_cp(rx_parser *p) {
    if (p->i >= p->n) return -1;
    unsigned char c = (unsigned char)p->s[p->i];
    int len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    if (!len || p->i + (size_t)len > p->n) return -1;
    long v = len == 1 ? c : c & (0x3f >> (len - 1));
    for (int k = 1; k < len; k++) v = (v << 6) | ((unsigned char)p->s[p->i + (size_t)k] & 0x3f);
    p->i += (size_t)len;
    return v;
}

static int hexv(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static long rx_hex(rx_parser *p, int digits) {
    long v = 0;
    for (int k = 0; k < digits; k++) {
        int h = p->i < p->n ? hexv(p->s[p->i]) : -1;
        if (h < 0) return -1;
        v = v * 16 + h;
        p->i++;
    }
    return v;
}

/* An escape after '\' into set s (in_class: inside [...], where \b is a backspace). Returns 0 or an error. */
static int rx_escape(rx_parser *p, cset *s, int in_class) {
    if (p->i >= p->n) return rx_fail(p, "a trailing backslash");
    int c = (unsigned char)p->s[p->i++];
    long v = -1;
    if (strchr("dDwWsS", c)) return cset_class(s, c) ? err_set(p->err, MTPLX_ENOMEM, "schema: out of memory") : 0;
    switch (c) {
    case 't': v = 9; break;
    case 'n': v = 10; break;
    case 'v': v = 11; break;
    case 'f': v = 12; break;
    case 'r': v = 13; break;
    case '0':
        if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') return rx_fail(p, "octal escapes are not supported");
        v = 0;
        break;
    case 'x': v = rx_hex(p, 2); break;
    case 'u':
        if (p->i < p->n && p->s[p->i] == '{') {
            p->i++;
            v = 0;
            int k = 0;
            while (p->i < p->n && hexv(p->s[p->i]) >= 0 && k < 6) v = v * 16 + hexv(p->s[p->i++]), k++;
            if (!k || p->i >= p->n || p->s[p->i] != '}' || v > RX_MAX_CP) return rx_fail(p, "a bad \\u{...} escape");
            p->i++;
        } else
            v = rx_hex(p, 4);
        break;
    case 'b':
        if (in_class) v = 8;
        else return rx_fail(p, "word boundaries (\\b) are assertions, not supported");
        break;
    case 'B': return rx_fail(p, "word boundaries (\\B) are assertions, not supported");
    case 'p':
    case 'P': return rx_fail(p, "unicode property escapes are not supported");
    case 'k': return rx_fail(p, "backreferences are not supported");
    case 'c': return rx_fail(p, "control escapes (\\c) are not supported");
    case '-':
        if (in_class) v = '-';
        break;
    default:
        if (c >= '1' && c <= '9') return rx_fail(p, "backreferences are not supported");
        if (strchr("^$\\.*+?()[]{}|/", c)) v = c;
    }
    if (v < 0) return rx_fail(p, "an unknown or malformed escape");
    return cset_add(s, (uint32_t)v, (uint32_t)v) ? err_set(p->err, MTPLX_ENOMEM, "schema: out of memory") : 0;
}

/* One class member (a code point or an escape) into s; *single = its code point, or -1 for a class. */
static int rx_class_atom(rx_parser *p, cset *s, long *single) {
    *single = -1;
    if (p->s[p->i] == '\\') {
        p->i++;
        int before = s->n, c = p->i < p->n ? (unsigned char)p->s[p->i] : 0;
        int rc = rx_escape(p, s, 1);
        if (rc) return rc;
        if (!strchr("dDwWsS", c) && s->n == before + 1) *single = s->r[s->n - 1][0];
        return 0;
    }
    long v = rx_cp(p);
    if (v < 0) return rx_fail(p, "invalid UTF-8");
    *single = v;
    return cset_add(s, (uint32_t)v, (uint32_t)v) ? err_set(p->err, MTPLX_ENOMEM, "schema: out of memory") : 0;
}

/* [...] after the '['. */
static int rx_class(rx_parser *p, cset *s) {
    int neg = 0;
    if (p->i < p->n && p->s[p->i] == '^') neg = 1, p->i++;
    for (;;) {
        if (p->i >= p->n) return rx_fail(p, "an unterminated character class");
        if (p->s[p->i] == ']') {
            p->i++;
            break;
        }
        long a, b;
        int rc = rx_class_atom(p, s, &a);
        if (rc) return rc;
        if (p->i + 1 < p->n && p->s[p->i] == '-' && p->s[p->i + 1] != ']') {
            p->i++;
            rc = rx_class_atom(p, s, &b);
            if (rc) return rc;
            if (a < 0 || b < 0) return rx_fail(p, "a range with a class (\\d, \\w, \\s) at an end");
            if (a > b) return rx_fail(p, "a character range out of order");
            s->n -= 2;
            if (cset_add(s, (uint32_t)a, (uint32_t)b)) return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
        }
    }
    cset_norm(s);
    if (neg && cset_negate(s)) return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
    return 0;
}

static int rx_alt(rx_parser *p, rx_node **out, int top);

/* Saturating product/sum for the expanded size. */
static long sz_mul(long a, long b) { return a > RX_MAX_NFA || b > RX_MAX_NFA ? RX_MAX_NFA + 1 : a * b; }

/* An atom (set or group) with its quantifiers. */
static int rx_piece(rx_parser *p, rx_node **out) {
    *out = NULL;
    rx_node *a = NULL;
    int c = (unsigned char)p->s[p->i], rc = 0;
    if (c == '(') {
        p->i++;
        if (p->i < p->n && p->s[p->i] == '?') {
            if (p->i + 1 < p->n && p->s[p->i + 1] == ':') p->i += 2;
            else if (p->i + 1 < p->n && p->s[p->i + 1] == '<' && p->i + 2 < p->n && p->s[p->i + 2] != '=' &&
                     p->s[p->i + 2] != '!')
                return rx_fail(p, "named groups are not supported (use ( ) or (?: ))");
            else return rx_fail(p, "lookaround assertions are not supported");
        }
        if (++p->depth > 100) return rx_fail(p, "groups nested deeper than 100");
        rc = rx_alt(p, &a, 0);
        p->depth--;
        if (rc) return rc;
        if (p->i >= p->n || p->s[p->i] != ')') {
            rx_free(a);
            return rx_fail(p, "an unbalanced '('");
        }
        p->i++;
    } else {
        a = rx_new(RX_SET);
        if (!a) return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
        a->size = 2;
        if (c == '[') p->i++, rc = rx_class(p, &a->set);
        else if (c == '\\') p->i++, rc = rx_escape(p, &a->set, 0);
        else if (c == '.') { /* any code point but the line terminators */
            p->i++;
            rc = cset_add(&a->set, 10, 10) || cset_add(&a->set, 13, 13) || cset_add(&a->set, 0x2028, 0x2029) ||
                         cset_negate(&a->set)
                     ? err_set(p->err, MTPLX_ENOMEM, "schema: out of memory")
                     : 0;
        } else if (c == '^' || c == '$') rc = rx_fail(p, "anchors ^ and $ are supported only at the ends of the pattern");
        else if (c == '*' || c == '+' || c == '?' || c == '{') rc = rx_fail(p, "a quantifier with nothing to repeat");
        else if (c == ')' || c == ']' || c == '}') rc = rx_fail(p, "an unbalanced bracket");
        else {
            long v = rx_cp(p);
            rc = v < 0 ? rx_fail(p, "invalid UTF-8") : cset_add(&a->set, (uint32_t)v, (uint32_t)v) ? MTPLX_ENOMEM : 0;
        }
        if (rc) {
            rx_free(a);
            return rc;
        }
        cset_norm(&a->set); /* sorted and merged: cset_has searches it */
    }
    while (p->i < p->n && strchr("*+?{", p->s[p->i])) {
        int q = p->s[p->i++];
        long mn = 0, mx = -1;
        if (q == '+') mn = 1;
        else if (q == '?') mx = 1;
        else if (q == '{') {
            size_t st = p->i;
            mn = 0;
            while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && mn < 100000) mn = mn * 10 + (p->s[p->i++] - '0');
            int ok = p->i > st;
            mx = mn;
            if (ok && p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                mx = -1;
                if (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
                    mx = 0;
                    while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9' && mx < 100000)
                        mx = mx * 10 + (p->s[p->i++] - '0');
                }
            }
            if (!ok || p->i >= p->n || p->s[p->i] != '}') {
                rx_free(a);
                return rx_fail(p, "a malformed {n,m} quantifier (a literal '{' must be escaped)");
            }
            p->i++;
            if (mx >= 0 && mn > mx) {
                rx_free(a);
                return rx_fail(p, "a {n,m} quantifier with n > m");
            }
        }
        if (p->i < p->n && p->s[p->i] == '?') {
            rx_free(a);
            return rx_fail(p, "lazy quantifiers are not supported");
        }
        rx_node *r = rx_new(RX_REP);
        if (!r || rx_push(r, a)) {
            rx_free(r);
            rx_free(a);
            return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
        }
        r->min = (int)mn;
        r->max = (int)mx;
        r->size = sz_mul(a->size, (mx >= 0 ? mx : mn + 1) + 1) + 2;
        a = r;
        if (a->size > RX_MAX_NFA) {
            rx_free(a);
            return rx_fail(p, "counted repetition expands beyond the automaton size limit");
        }
    }
    *out = a;
    return 0;
}

/* A concatenation up to '|' or ')' or the end; at the top level '^' may start it and '$' end it. */
static int rx_cat(rx_parser *p, rx_node **out, int top, int *anch_start, int *anch_end) {
    rx_node *cat = rx_new(RX_CAT);
    if (!cat) return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
    *anch_start = *anch_end = 0;
    if (top && p->i < p->n && p->s[p->i] == '^') *anch_start = 1, p->i++;
    while (p->i < p->n && p->s[p->i] != '|' && p->s[p->i] != ')') {
        if (top && p->s[p->i] == '$' && (p->i + 1 == p->n || p->s[p->i + 1] == '|')) {
            *anch_end = 1;
            p->i++;
            break;
        }
        rx_node *k;
        int rc = rx_piece(p, &k);
        if (!rc && rx_push(cat, k)) rx_free(k), rc = err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
        if (rc) {
            rx_free(cat);
            return rc;
        }
        cat->size += k->size;
        if (cat->size > RX_MAX_NFA) {
            rx_free(cat);
            return rx_fail(p, "the pattern expands beyond the automaton size limit");
        }
    }
    cat->size += 2;
    *out = cat;
    return 0;
}

/* Any code point, repeated (the unanchored end of a search). */
static rx_node *rx_any_star(void) {
    rx_node *s = rx_new(RX_SET), *r = rx_new(RX_REP);
    if (!s || !r || cset_add(&s->set, 0, RX_MAX_CP) || rx_push(r, s)) {
        rx_free(s);
        rx_free(r);
        return NULL;
    }
    s->size = 2;
    r->max = -1;
    r->size = 6;
    return r;
}

static int rx_alt(rx_parser *p, rx_node **out, int top) {
    rx_node *alt = rx_new(RX_ALT);
    if (!alt) return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
    for (;;) {
        rx_node *c = NULL;
        int as = 0, ae = 0, rc = rx_cat(p, &c, top, &as, &ae);
        if (!rc && top && (!as || !ae)) { /* unanchored: a search */
            rx_node *pre = as ? NULL : rx_any_star(), *post = ae ? NULL : rx_any_star();
            rx_node *w = rx_new(RX_CAT);
            if (!w || (!as && (!pre || rx_push(w, pre))) || rx_push(w, c) || (!ae && (!post || rx_push(w, post)))) {
                rc = err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
                rx_free(w);
            } else {
                w->size = c->size + 16;
                c = w;
            }
        }
        if (!rc && rx_push(alt, c)) rx_free(c), rc = err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
        if (rc) {
            rx_free(alt);
            return rc;
        }
        alt->size += c->size;
        if (alt->size > RX_MAX_NFA) {
            rx_free(alt);
            return rx_fail(p, "the pattern expands beyond the automaton size limit");
        }
        if (p->i < p->n && p->s[p->i] == '|') {
            p->i++;
            continue;
        }
        break;
    }
    alt->size += 2;
    *out = alt;
    return 0;
}

/* ---- NFA (Thompson): state i has a set (one edge to out1) or up to two epsilon edges ---- */

typedef struct {
    int set;       /* index into sets, -1 = epsilon state */
    int out1, out2;
} nstate;

typedef struct {
    nstate *s;
    int n, cap;
    cset *sets;
    int n_sets, cap_sets;
} nfa;

static int nfa_state(nfa *a, int set, int o1, int o2) {
    if (a->n >= RX_MAX_NFA) return -1;
    if (a->n == a->cap) {
        int cap = a->cap ? 2 * a->cap : 64;
        void *q = realloc(a->s, (size_t)cap * sizeof *a->s);
        if (!q) return -1;
        a->s = q;
        a->cap = cap;
    }
    a->s[a->n] = (nstate){set, o1, o2};
    return a->n++;
}

/* Build n into a with the exit state `next`; returns the entry state or -1. */
static int nfa_build(nfa *a, const rx_node *n, int next) {
    switch (n->kind) {
    case RX_SET: {
        if (a->n_sets == a->cap_sets) {
            int cap = a->cap_sets ? 2 * a->cap_sets : 16;
            void *q = realloc(a->sets, (size_t)cap * sizeof *a->sets);
            if (!q) return -1;
            a->sets = q;
            a->cap_sets = cap;
        }
        a->sets[a->n_sets] = n->set; /* shared, not owned */
        return nfa_state(a, a->n_sets++, next, -1);
    }
    case RX_CAT:
        for (int i = n->n - 1; i >= 0 && next >= 0; i--) next = nfa_build(a, n->kids[i], next);
        return next;
    case RX_ALT: {
        if (n->n == 1) return nfa_build(a, n->kids[0], next);
        int e = nfa_build(a, n->kids[n->n - 1], next);
        for (int i = n->n - 2; i >= 0 && e >= 0; i--) {
            int k = nfa_build(a, n->kids[i], next);
            e = k < 0 ? -1 : nfa_state(a, -1, k, e);
        }
        return e;
    }
    case RX_REP: {
        int e = next;
        if (n->max < 0) { /* kid* in front of next */
            int loop = nfa_state(a, -1, -1, next);
            if (loop < 0) return -1;
            int body = nfa_build(a, n->kids[0], loop);
            if (body < 0) return -1;
            a->s[loop].out1 = body;
            e = loop;
        } else
            for (int i = n->min; i < n->max && e >= 0; i++) { /* optional copies: (kid (kid ...)?)? */
                int body = nfa_build(a, n->kids[0], e);
                e = body < 0 ? -1 : nfa_state(a, -1, body, next);
            }
        for (int i = 0; i < n->min && e >= 0; i++) e = nfa_build(a, n->kids[0], e);
        return e;
    }
    }
    return -1;
}

/* ---- DFA by subset construction over the elementary intervals of all sets ---- */

typedef struct {
    uint64_t *bits;  /* [n * words] NFA state sets */
    int n, cap, words;
    int *hash;       /* open addressing, -1 empty */
    int hcap;
} dset;

static void closure(const nfa *a, uint64_t *b, int *stack) {
    int sp = 0;
    for (int w = 0; w < (a->n + 63) / 64; w++)
        for (uint64_t x = b[w]; x; x &= x - 1) stack[sp++] = w * 64 + __builtin_ctzll(x);
    while (sp) {
        const nstate *s = &a->s[stack[--sp]];
        if (s->set >= 0) continue;
        int o[2] = {s->out1, s->out2};
        for (int k = 0; k < 2; k++)
            if (o[k] >= 0 && !((b[o[k] >> 6] >> (o[k] & 63)) & 1)) b[o[k] >> 6] |= 1ULL << (o[k] & 63), stack[sp++] = o[k];
    }
}

/* The index of set b in d (added when new); -1 on ENOMEM or when over RX_MAX_DFA. */
static int dset_find(dset *d, const uint64_t *b) {
    uint64_t h = gr_hash(b, (size_t)d->words * 8, GR_HASH_SEED);
    for (int i = (int)(h % (uint64_t)d->hcap);; i = (i + 1) % d->hcap) {
        int e = d->hash[i];
        if (e < 0) {
            if (d->n >= RX_MAX_DFA) return -1;
            if (d->n == d->cap) {
                int cap = d->cap ? 2 * d->cap : 64;
                void *q = realloc(d->bits, (size_t)cap * (size_t)d->words * 8);
                if (!q) return -1;
                d->bits = q;
                d->cap = cap;
            }
            memcpy(d->bits + (size_t)d->n * (size_t)d->words, b, (size_t)d->words * 8);
            d->hash[i] = d->n;
            return d->n++;
        }
        if (!memcmp(d->bits + (size_t)e * (size_t)d->words, b, (size_t)d->words * 8)) return e;
    }
}

static int cset_has(const cset *s, uint32_t c) {
    int lo = 0, hi = s->n;
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (s->r[m][1] < c) lo = m + 1;
        else hi = m;
    }
    return lo < s->n && s->r[lo][0] <= c;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void gr_dfa_free(gr_dfa *d) {
    if (!d) return;
    free(d->first);
    free(d->edges);
    free(d->accept);
    free(d->viable);
    free(d);
}

/* Builds the DFA of the NFA from `start` (accepting state `fin`); dead states are dropped. */
static int dfa_from_nfa(const nfa *a, int start, int fin, gr_dfa **out, rx_parser *p) {
    int rc = 0;
    dset d = {0};
    uint64_t *cur = NULL;
    int *stack = NULL, *tr = NULL; /* tr: [states * intervals] transitions, -1 none */
    size_t tr_cap = 0;
    /* elementary intervals: boundaries of every set, surrogates cut out (a JSON string never holds one) */
    uint32_t *bd = NULL;
    int nb = 0, cb = 0;
#define BD(x)                                                                      \
    do {                                                                           \
        if (nb == cb) {                                                            \
            cb = cb ? 2 * cb : 64;                                                 \
            void *q_ = realloc(bd, (size_t)cb * sizeof *bd);                       \
            if (!q_) goto nomem;                                                   \
            bd = q_;                                                               \
        }                                                                          \
        bd[nb++] = (x);                                                            \
    } while (0)
    BD(0);
    BD(0xd800);
    BD(0xe000);
    BD(RX_MAX_CP + 1);
    for (int i = 0; i < a->n_sets; i++)
        for (int k = 0; k < a->sets[i].n; k++) {
            BD(a->sets[i].r[k][0]);
            BD(a->sets[i].r[k][1] + 1);
        }
#undef BD
    qsort(bd, (size_t)nb, sizeof *bd, cmp_u32);
    int m = 0;
    for (int i = 0; i < nb; i++)
        if (!m || bd[i] != bd[m - 1]) bd[m++] = bd[i];
    nb = m; /* intervals [bd[i], bd[i+1]) for i < nb - 1 */
    d.words = (a->n + 63) / 64;
    d.hcap = 2 * RX_MAX_DFA + 1;
    d.hash = malloc((size_t)d.hcap * sizeof *d.hash);
    cur = calloc((size_t)d.words, 8);
    stack = malloc((size_t)a->n * sizeof *stack);
    if (!d.hash || !cur || !stack) goto nomem;
    memset(d.hash, -1, (size_t)d.hcap * sizeof *d.hash);
    cur[start >> 6] |= 1ULL << (start & 63);
    closure(a, cur, stack);
    if (dset_find(&d, cur) < 0) goto nomem;
    const int ni = nb - 1;
    for (int s = 0; s < d.n; s++) {
        if ((size_t)(s + 1) * (size_t)ni > RX_MAX_CELLS) {
            rc = rx_fail(p, "the pattern's automaton has too many states");
            goto done;
        }
        if ((size_t)(s + 1) * (size_t)ni > tr_cap) {
            tr_cap = tr_cap ? 2 * tr_cap : (size_t)ni * 64;
            void *q = realloc(tr, tr_cap * sizeof *tr);
            if (!q) goto nomem;
            tr = q;
        }
        for (int iv = 0; iv < ni; iv++) {
            tr[(size_t)s * ni + iv] = -1;
            if (bd[iv] >= 0xd800 && bd[iv] < 0xe000) continue;
            memset(cur, 0, (size_t)d.words * 8);
            int any = 0;
            const uint64_t *src = d.bits + (size_t)s * (size_t)d.words;
            for (int w = 0; w < d.words; w++)
                for (uint64_t x = src[w]; x; x &= x - 1) {
                    const nstate *ns = &a->s[w * 64 + __builtin_ctzll(x)];
                    if (ns->set >= 0 && cset_has(&a->sets[ns->set], bd[iv]))
                        cur[ns->out1 >> 6] |= 1ULL << (ns->out1 & 63), any = 1;
                }
            if (!any) continue;
            closure(a, cur, stack);
            int t = dset_find(&d, cur);
            if (t < 0) {
                rc = d.n >= RX_MAX_DFA ? rx_fail(p, "the pattern's automaton has too many states") : MTPLX_ENOMEM;
                goto done;
            }
            tr[(size_t)s * ni + iv] = t;
        }
    }
    if (d.n <= 0) goto nomem;
    {
        /* trim: keep the states from which an accepting state is reachable */
        uint8_t *acc = calloc((size_t)d.n, 1), *live = calloc((size_t)d.n, 1);
        gr_dfa *D = calloc(1, sizeof *D);
        if (!acc || !live || !D) {
            free(acc), free(live), free(D);
            goto nomem;
        }
        for (int s = 0; s < d.n; s++) acc[s] = live[s] = (d.bits[(size_t)s * d.words + (fin >> 6)] >> (fin & 63)) & 1;
        for (int ch = 1; ch;) {
            ch = 0;
            for (int s = 0; s < d.n; s++)
                for (int iv = 0; iv < ni && !live[s]; iv++)
                    if (tr[(size_t)s * ni + iv] >= 0 && live[tr[(size_t)s * ni + iv]]) live[s] = 1, ch = 1;
        }
        D->n = d.n;
        D->accept = acc;
        D->first = calloc((size_t)d.n + 1, sizeof *D->first);
        size_t ne = 0, cap = 64;
        D->edges = malloc(cap * sizeof *D->edges);
        if (!D->first || !D->edges) {
            free(live);
            gr_dfa_free(D);
            goto nomem;
        }
        for (int s = 0; s < d.n; s++) {
            D->first[s] = (int)ne;
            for (int iv = 0; iv < ni; iv++) {
                int t = tr[(size_t)s * ni + iv];
                if (t < 0 || !live[s] || !live[t]) continue;
                if (ne && D->first[s] < (int)ne && D->edges[ne - 1].to == t && D->edges[ne - 1].hi + 1 == bd[iv]) {
                    D->edges[ne - 1].hi = bd[iv + 1] - 1; /* extend the previous edge */
                    continue;
                }
                if (ne == cap) {
                    cap *= 2;
                    void *q = realloc(D->edges, cap * sizeof *D->edges);
                    if (!q) {
                        free(live);
                        gr_dfa_free(D);
                        goto nomem;
                    }
                    D->edges = q;
                }
                D->edges[ne++] = (gr_edge){bd[iv], bd[iv + 1] - 1, t};
            }
        }
        D->first[d.n] = (int)ne;
        const int start_live = live[0];
        free(live);
        if (!start_live) {
            gr_dfa_free(D);
            rc = err_set(p->err, MTPLX_EINVAL, "schema: '%s' at %s matches no string", p->kw, p->path);
            goto done;
        }
        *out = D;
    }
    goto done;
nomem:
    rc = err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
done:
    free(bd);
    free(d.bits);
    free(d.hash);
    free(cur);
    free(stack);
    free(tr);
    return rc;
}

/* The state after code point c from s, or -1. */
int gr_dfa_step(const gr_dfa *d, int s, uint32_t c) {
    int lo = d->first[s], hi = d->first[s + 1];
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (d->edges[m].hi < c) lo = m + 1;
        else hi = m;
    }
    return lo < d->first[s + 1] && d->edges[lo].lo <= c ? d->edges[lo].to : -1;
}

int gr_dfa_viable(const gr_dfa *d, int count, int s) {
    if (count > d->cap) count = d->cap;
    return d->viable[(size_t)count * (size_t)d->n + (size_t)s];
}

int gr_dfa_range_viable(const gr_dfa *d, int s, int count, uint32_t lo, uint32_t hi) {
    int c1 = count + 1 > d->cap ? d->cap : count + 1;
    if (d->max_len >= 0 && count + 1 > d->max_len) return 0;
    for (int e = d->first[s]; e < d->first[s + 1]; e++)
        if (d->edges[e].lo <= hi && d->edges[e].hi >= lo && d->viable[(size_t)c1 * (size_t)d->n + (size_t)d->edges[e].to])
            return 1;
    return 0;
}

/* viable[c][s]: some accepted completion from state s after c code points (c saturates at cap) has a
 * total length in [min_len, max_len]. */
static int dfa_lengths(gr_dfa *d, int min_len, int max_len, rx_parser *p) {
    d->min_len = min_len;
    d->max_len = max_len;
    d->cap = max_len >= 0 ? max_len : min_len;
    size_t cells = ((size_t)d->cap + 1) * (size_t)d->n;
    if (cells > RX_MAX_VIABLE)
        return rx_fail(p, "the pattern with these minLength/maxLength bounds needs too large a table");
    d->viable = calloc(cells, 1);
    if (!d->viable) return err_set(p->err, MTPLX_ENOMEM, "schema: out of memory");
    uint8_t *top = d->viable + (size_t)d->cap * (size_t)d->n;
    if (max_len >= 0)
        for (int s = 0; s < d->n; s++) top[s] = d->accept[s] && d->cap >= min_len;
    else
        for (int ch = 1; ch;) { /* no upper bound: the count stays at cap; reachability of acceptance */
            ch = 0;
            for (int s = 0; s < d->n; s++) {
                if (top[s]) continue;
                int v = d->accept[s];
                for (int e = d->first[s]; e < d->first[s + 1] && !v; e++) v = top[d->edges[e].to];
                if (v) top[s] = 1, ch = 1;
            }
        }
    for (int c = d->cap - 1; c >= 0; c--) {
        uint8_t *row = d->viable + (size_t)c * (size_t)d->n, *nx = row + d->n;
        for (int s = 0; s < d->n; s++) {
            int v = d->accept[s] && c >= min_len;
            for (int e = d->first[s]; e < d->first[s + 1] && !v; e++) v = nx[d->edges[e].to];
            row[s] = (uint8_t)v;
        }
    }
    if (!d->viable[0]) return err_set(p->err, MTPLX_EINVAL, "schema: '%s' at %s with its length bounds matches no string",
                                      p->kw, p->path);
    return 0;
}

int gr_dfa_compile(const char *pattern, size_t len, const char *kw, const char *path, int min_len, int max_len,
                   gr_dfa **out, mtplx_err *err) {
    *out = NULL;
    rx_parser p = {pattern, 0, len, kw, path, err, 0};
    rx_node *root = NULL;
    int rc = rx_alt(&p, &root, 1);
    if (!rc && p.i < p.n) rc = rx_fail(&p, "an unbalanced ')'");
    nfa a = {0};
    if (!rc) {
        int fin = nfa_state(&a, -1, -1, -1);
        int start = fin < 0 ? -1 : nfa_build(&a, root, fin);
        if (start < 0) rc = a.n >= RX_MAX_NFA ? rx_fail(&p, "the pattern expands beyond the automaton size limit")
                                              : err_set(err, MTPLX_ENOMEM, "schema: out of memory");
        else {
            /* the DFA's state 0 is the start: dfa_from_nfa adds it first */
            rc = dfa_from_nfa(&a, start, fin, out, &p);
        }
    }
    if (!rc) {
        rc = dfa_lengths(*out, min_len, max_len, &p);
        if (rc) {
            gr_dfa_free(*out);
            *out = NULL;
        }
    }
    free(a.s);
    free(a.sets);
    rx_free(root);
    return rc;
}

int gr_dfa_match(const gr_dfa *d, const char *s, size_t n) {
    rx_parser p = {s, 0, n, "", "", NULL, 0};
    int st = 0, count = 0;
    while (p.i < p.n) {
        long c = rx_cp(&p);
        if (c < 0 || (st = gr_dfa_step(d, st, (uint32_t)c)) < 0) return 0;
        count++;
    }
    return d->accept[st] && count >= d->min_len && (d->max_len < 0 || count <= d->max_len);
}

/* ---- formats ---- */

#define RX_DATE                                                                                              \
    "(\\d{4}-(0[13578]|1[02])-(0[1-9]|[12]\\d|3[01])|\\d{4}-(0[469]|11)-(0[1-9]|[12]\\d|30)|\\d{4}-02-(0[1-9]|1\\d|2[0-8])" \
    "|(\\d\\d(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)-02-29)"
#define RX_TIME "([01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(\\.\\d{1,9})?([Zz]|[+-]([01]\\d|2[0-3]):[0-5]\\d)"
#define RX_H "[0-9A-Fa-f]{1,4}"
#define RX_PCHAR "([A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})"
#define RX_QCHAR "([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})"

static const struct {
    const char *name, *rx;
    int max_len; /* a length bound the format itself implies, -1 none */
} k_formats[] = {
    {"date", "^" RX_DATE "$", -1},
    {"time", "^" RX_TIME "$", -1},
    {"date-time", "^" RX_DATE "[Tt]" RX_TIME "$", -1},
    {"email", "^[A-Za-z0-9_%+-]+(\\.[A-Za-z0-9_%+-]+)*@([A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?\\.)+"
              "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$", -1},
    {"uuid", "^[0-9A-Fa-f]{8}-([0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}$", -1},
    {"ipv4", "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)$", -1},
    {"ipv6", "^((" RX_H ":){7}" RX_H "|(" RX_H ":){1,7}:|(" RX_H ":){1,6}:" RX_H "|(" RX_H ":){1,5}(:" RX_H "){1,2}|("
             RX_H ":){1,4}(:" RX_H "){1,3}|(" RX_H ":){1,3}(:" RX_H "){1,4}|(" RX_H ":){1,2}(:" RX_H "){1,5}|" RX_H
             ":(:" RX_H "){1,6}|:((:" RX_H "){1,7}|:))$", -1},
    {"uri", "^[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9._~-]+(:\\d{1,5})?(/" RX_PCHAR "*)*(\\?" RX_QCHAR "*)?(#" RX_QCHAR "*)?$",
     -1},
    {"hostname", "^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\\.?$", 253},
};

const char *gr_format_regex(const char *name, int *max_len) {
    for (size_t i = 0; i < sizeof k_formats / sizeof *k_formats; i++)
        if (!strcmp(name, k_formats[i].name)) {
            if (max_len) *max_len = k_formats[i].max_len;
            return k_formats[i].rx;
        }
    return NULL;
}
