/* match.c — the byte-level automaton: one byte maps a set of parse stacks (grammar_int.h) to its
 * successors. Nodes close eagerly on their closing byte ('}', ']', '"', the last byte of the only
 * literal left); numbers, literals that are prefixes of others, whitespace runs and repetitions
 * "may end": the byte that does not extend them is offered to the parent instead (both ways are
 * tried, so every parse survives). */
#include <math.h>
#include <string.h>

#include "grammar_int.h"

#define GUARD 96 /* recursion of one byte step (pops and pushes without consuming); deeper = dropped */

uint64_t gr_hash(const void *p, size_t n, uint64_t h) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static gframe frame_start(int node) {
    gframe f;
    memset(&f, 0, sizeof f);
    f.node = node;
    return f;
}

static void stack_copy(gstack *d, const gstack *s) {
    d->n = s->n;
    memcpy(d->f, s->f, (size_t)s->n * sizeof(gframe));
}

static int push(gstack *s, int node) {
    if (s->n >= GR_MAX_DEPTH) return 0;
    s->f[s->n++] = frame_start(node);
    return 1;
}

/* Add s to out unless an equal stack is there or out is full (the parse is then dropped: the
 * language shrinks, every output stays valid). */
static void out_add(gset *out, const gstack *s) {
    for (int i = 0; i < out->n; i++)
        if (out->s[i].n == s->n && !memcmp(out->s[i].f, s->f, (size_t)s->n * sizeof(gframe))) return;
    if (out->n >= GR_MAX_STACKS) return;
    stack_copy(&out->s[out->n++], s);
}

static int is_ws(int c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* Whitespace between the tokens of an object or array (state in f->ws, 0 at the gap's start): one
 * space, or a newline followed by up to GR_MAX_INDENT spaces of indentation. A subset of what JSON
 * allows that keeps compact and pretty-printed output and stops a model from flooding whitespace.
 * Returns 1 when c is taken. */
static int gap_ws(gframe *f, int c) {
    if (f->ws == 0 && (c == ' ' || c == '\n')) {
        f->ws = c == ' ' ? 1 : 2;
        return 1;
    }
    if (f->ws >= 2 && c == ' ' && f->ws < 2 + GR_MAX_INDENT) {
        f->ws++;
        return 1;
    }
    return 0;
}

/* ---- numbers ---- */

enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };

/* Does [m1, m2] (magnitudes; m2 open when m2_open), with the sign neg, meet the node's bounds? */
static int num_hits(const gnode *g, int neg, double m1, double m2, int m2_open) {
    double L = neg ? -m2 : m1, H = neg ? -m1 : m2;
    int Lo = neg ? m2_open : 0, Ho = neg ? 0 : m2_open;
    if (g->is_int) {
        double lo = g->has_lo ? (g->lo_excl ? floor(g->lo) + 1 : ceil(g->lo)) : -INFINITY;
        double hi = g->has_hi ? (g->hi_excl ? ceil(g->hi) - 1 : floor(g->hi)) : INFINITY;
        if (Lo) L = floor(L) + 1; /* integers only: an open end moves in */
        if (Ho) H = ceil(H) - 1;
        L = fmax(L, lo);
        H = fmin(H, hi);
        if (g->multiple > 0) return ceil(L / g->multiple) * g->multiple <= H; /* a multiple in [L, H] */
        return L <= H;
    }
    if (g->has_lo) {
        if (g->lo > L) L = g->lo, Lo = g->lo_excl;
        else if (g->lo == L) Lo = Lo || g->lo_excl;
    }
    if (g->has_hi) {
        if (g->hi < H) H = g->hi, Ho = g->hi_excl;
        else if (g->hi == H) Ho = Ho || g->hi_excl;
    }
    return L < H || (L == H && !Lo && !Ho);
}

static double pow10i(int k) {
    double p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

/* Some completion of the number prefix in f is within the node's bounds. */
static int num_viable(const gnode *g, const gframe *f) {
    if (!g->has_lo && !g->has_hi && !(g->multiple > 0)) return 1;
    const int neg = f->ws & 1;
    const double v = f->u.v;
    switch (f->phase) {
    case N_MINUS: return num_hits(g, 1, 0, INFINITY, 0);
    case N_ZERO: return g->is_int ? num_hits(g, neg, 0, 0, 0) : num_hits(g, neg, 0, 1, 1);
    case N_INT:
        for (int k = 0; f->a + k <= GR_MAX_DIGITS; k++) {
            double s = pow10i(k);
            if (g->is_int ? num_hits(g, neg, v * s, (v + 1) * s - 1, 0) : num_hits(g, neg, v * s, (v + 1) * s, 1))
                return 1;
        }
        return 0;
    case N_DOT: return num_hits(g, neg, v, v + 1, 1);
    case N_FRAC: {
        double s = pow10i(f->b);
        return num_hits(g, neg, v / s, (v + 1) / s, 1);
    }
    default: return 1;
    }
}

/* The number in f, complete, is within bounds. */
static int num_in_bounds(const gnode *g, const gframe *f) {
    double x = f->u.v / pow10i(f->b);
    if (f->ws & 1) x = -x;
    if (g->has_lo && (g->lo_excl ? !(x > g->lo) : !(x >= g->lo))) return 0;
    if (g->has_hi && (g->hi_excl ? !(x < g->hi) : !(x <= g->hi))) return 0;
    return !(g->multiple > 0) || fmod(x, g->multiple) == 0;
}

/* Step a number frame by c. Returns 1 (consumed) or 0 (c does not extend it). */
static int num_byte(const gnode *g, gframe *f, int c) {
    const int digit = c >= '0' && c <= '9', bounded = g->has_lo || g->has_hi;
    switch (f->phase) {
    case N_START:
        if (c == '-') f->phase = N_MINUS, f->ws = 1;
        else if (c == '0') f->phase = N_ZERO;
        else if (digit) f->phase = N_INT, f->u.v = c - '0', f->a = 1;
        else return 0;
        break;
    case N_MINUS:
        if (c == '0') f->phase = N_ZERO;
        else if (digit) f->phase = N_INT, f->u.v = c - '0', f->a = 1;
        else return 0;
        break;
    case N_ZERO:
    case N_INT:
        if (digit && f->phase == N_INT && f->a < GR_MAX_DIGITS) f->u.v = f->u.v * 10 + (c - '0'), f->a++;
        else if (c == '.' && !g->is_int) f->phase = N_DOT;
        else if ((c == 'e' || c == 'E') && !g->is_int && !bounded) f->phase = N_E, f->a = 0;
        else return 0;
        break;
    case N_DOT:
    case N_FRAC:
        if (digit && f->a + f->b < GR_MAX_DIGITS) f->phase = N_FRAC, f->u.v = f->u.v * 10 + (c - '0'), f->b++;
        else if ((c == 'e' || c == 'E') && f->phase == N_FRAC && !bounded) f->phase = N_E, f->a = 0;
        else return 0;
        break;
    case N_E:
        if (c == '+' || c == '-') f->phase = N_ESIGN;
        else if (digit) f->phase = N_EXP, f->a = 1;
        else return 0;
        break;
    case N_ESIGN:
        if (digit) f->phase = N_EXP, f->a = 1;
        else return 0;
        break;
    case N_EXP:
        if (digit && f->a < GR_MAX_EXP_DIGITS) f->a++;
        else return 0;
        break;
    default: return 0;
    }
    return num_viable(g, f);
}

/* ---- strings (shared by STRING values and free object keys) ---- */

/* UTF-8 state in f->a: (continuation bytes left) << 16 | (lowest allowed next byte) << 8 | highest;
 * escape state in f->b: 0 none, 1 after '\', 2 + k after "\u" and k hex digits (bit 0x10: the first
 * was d/D, so 8..f next would make a surrogate, refused). Returns -1 (refused), 0 (inside a code
 * point), 1 (a code point completed), 2 (the closing quote). */
static int str_byte(gframe *f, int c) {
    if (f->a) {
        int left = f->a >> 16, lo = (f->a >> 8) & 0xff, hi = f->a & 0xff;
        if (c < lo || c > hi) return -1;
        left--;
        f->a = left ? (left << 16) | (0x80 << 8) | 0xbf : 0;
        return left ? 0 : 1;
    }
    if (f->b == 1) {
        if (c == 'u') {
            f->b = 2;
            return 0;
        }
        f->b = 0;
        return strchr("\"\\/bfnrt", c) && c ? 1 : -1;
    }
    if (f->b >= 2) {
        int k = (f->b & 0xf) - 2, hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (!hex) return -1;
        if (k == 0 && (c == 'd' || c == 'D')) f->b |= 0x10;
        if (k == 1 && (f->b & 0x10) && !(c >= '0' && c <= '7')) return -1;
        if (k == 3) {
            f->b = 0;
            return 1;
        }
        f->b++;
        return 0;
    }
    if (c == '"') return 2;
    if (c == '\\') {
        f->b = 1;
        return 0;
    }
    if (c < 0x20) return -1;
    if (c < 0x80) return 1;
    /* lead byte: the allowed range of the first continuation excludes overlongs and surrogates */
    if (c >= 0xc2 && c <= 0xdf) f->a = (1 << 16) | (0x80 << 8) | 0xbf;
    else if (c == 0xe0) f->a = (2 << 16) | (0xa0 << 8) | 0xbf;
    else if (c == 0xed) f->a = (2 << 16) | (0x80 << 8) | 0x9f;
    else if (c >= 0xe1 && c <= 0xef) f->a = (2 << 16) | (0x80 << 8) | 0xbf;
    else if (c == 0xf0) f->a = (3 << 16) | (0x90 << 8) | 0xbf;
    else if (c >= 0xf1 && c <= 0xf3) f->a = (3 << 16) | (0x80 << 8) | 0xbf;
    else if (c == 0xf4) f->a = (3 << 16) | (0x80 << 8) | 0x8f;
    else return -1;
    return 0;
}

/* A STRING frame with a pattern / format DFA takes byte c: the decoded code point steps the DFA
 * (state in the low 32 bits of u.bits, the code point decoded so far in the high 32; code points in
 * f->ws, saturating at the DFA's cap). A byte inside a code point (UTF-8 or \u escape) is taken only
 * when some completion of it leads to a viable state. Returns 1 (taken, the string goes on), 0 with
 * f->phase = 2 (the closing quote, accepted), or 0 (refused). */
static int str_dfa_byte(const gnode *n, gframe *f, int c) {
    const gr_dfa *d = n->dfa;
    int st = (int)(uint32_t)f->u.bits;
    uint32_t acc = (uint32_t)(f->u.bits >> 32), cp = 0;
    const int in_utf8 = f->a != 0, esc = f->b, lead = !in_utf8 && !esc && c >= 0x80;
    if (n->max >= 0 && f->ws >= n->max && !in_utf8 && !esc && c != '"') return 0;
    int r = str_byte(f, c);
    if (r < 0) return 0;
    if (r == 2) {
        if (!d->accept[st] || f->ws < d->min_len) return 0;
        f->phase = 2;
        return 0;
    }
    if (in_utf8) acc = (acc << 6) | (uint32_t)(c & 0x3f);
    else if (esc >= 2) acc = (acc << 4) | (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    else if (lead) acc = (uint32_t)c & (c >= 0xf0 ? 0x07 : c >= 0xe0 ? 0x0f : 0x1f);
    if (r == 1) {
        if (esc == 1) {
            static const char from[] = "\"\\/bfnrt", to[] = {'"', '\\', '/', 8, 12, 10, 13, 9};
            cp = (uint32_t)to[strchr(from, c) - from];
        } else
            cp = in_utf8 || esc >= 2 ? acc : (uint32_t)c;
        int t = gr_dfa_step(d, st, cp);
        if (t < 0 || !gr_dfa_viable(d, f->ws + 1, t)) return 0;
        if (f->ws < d->cap) f->ws++;
        f->u.bits = (uint32_t)t;
        return 1;
    }
    /* inside a code point: the code points that can still come form one interval */
    uint32_t lo, hi;
    if (f->a) {
        int left = f->a >> 16, blo = (f->a >> 8) & 0xff, bhi = f->a & 0xff, sh = 6 * (left - 1);
        lo = ((acc << 6) | (uint32_t)(blo & 0x3f)) << sh;
        hi = (((acc << 6) | (uint32_t)(bhi & 0x3f)) << sh) | ((1u << sh) - 1);
    } else if (f->b == 1) /* after '\': any escape; all of them lie in [0, 0xffff] */
        lo = 0, hi = 0xffff;
    else { /* \u and k hex digits */
        int k = (f->b & 0xf) - 2, sh = 4 * (4 - k);
        lo = acc << sh;
        hi = ((acc + 1) << sh) - 1;
    }
    if (!gr_dfa_range_viable(d, st, f->ws, lo, hi)) return 0;
    f->u.bits = (uint64_t)acc << 32 | (uint32_t)st;
    return 1;
}

/* ---- literal sets ---- */

/* Narrow the sorted literal range [*lo, *hi) sharing the first pos bytes to those whose byte pos is c. */
static void lits_narrow(char *const *strs, const int *lens, int *lo, int *hi, int pos, int c) {
    /* key(i) = byte pos of literal i, or -1 when it ends there; nondecreasing over the range */
#define KEY(i) (lens[i] > pos ? (unsigned char)strs[i][pos] : -1)
    int a = *lo, b = *hi;
    while (a < b) { /* first with key >= c */
        int mid = a + (b - a) / 2;
        if (KEY(mid) < c) a = mid + 1;
        else b = mid;
    }
    int e = a, f = *hi;
    while (e < f) { /* first with key > c */
        int mid = e + (f - e) / 2;
        if (KEY(mid) <= c) e = mid + 1;
        else f = mid;
    }
#undef KEY
    *lo = a;
    *hi = e;
}

/* ---- frames that may end, pops ---- */

static int may_end(const grammar *g, const gframe *f) {
    if (f->key) return 0;
    const gnode *n = &g->nodes[f->node];
    switch (n->kind) {
    case GN_NUMBER:
        return (f->phase == N_ZERO || f->phase == N_INT || f->phase == N_FRAC || f->phase == N_EXP) &&
               num_in_bounds(n, f);
    case GN_LITS: return f->phase == 1 && n->lens[f->a] == f->ws;
    case GN_WS: return 1;
    case GN_ANYTEXT: return f->a == 0;
    case GN_TEXT: return n->avoid && f->a == 0;
    case GN_SEQ: return f->phase == 0 && n->n == 0;
    case GN_REPEAT: return (f->phase == 0 || f->phase == 2) && f->a >= n->min;
    default: return 0;
    }
}

/* Pop the top frame (finished; `result` is a key's property index, -1 for a free key) and tell its
 * parent. Returns 1 when the stack is still a valid parse (0: too deep). */
static int pop_done(const grammar *g, gstack *s, int result, int guard) {
    if (guard > GUARD) return 0;
    const int was_key = s->f[s->n - 1].key, lit = s->f[s->n - 1].a; /* LITS: the literal matched */
    s->n--;
    if (s->n == 0) return 1; /* the sentence is complete */
    gframe *p = &s->f[s->n - 1];
    const gnode *n = &g->nodes[p->node];
    switch (n->kind) {
    case GN_OBJECT:
        if (was_key) {
            p->phase = 3;
            p->a = result;
            p->b++; /* properties written */
            if (result >= 0) p->u.bits |= 1ULL << result;
        } else {
            p->phase = 6;
            p->a = 0;
        }
        p->ws = 0;
        return 1;
    case GN_ARRAY:
        if (n->unique) { /* the item is a literal of the item node: each at most once */
            if ((p->u.bits >> lit) & 1) return 0;
            p->u.bits |= 1ULL << lit;
        }
        p->phase = 3;
        p->a++;
        p->ws = 0;
        return 1;
    case GN_SEQ:
        if (++p->a == n->n) return pop_done(g, s, 0, guard + 1);
        return push(s, n->kids[p->a]);
    case GN_REPEAT:
        if (p->phase == 3) { /* the separator is done: the next item */
            p->phase = 1;
            return push(s, n->kids[0]);
        }
        p->a++;
        if (n->max >= 0 && p->a >= n->max) return pop_done(g, s, 0, guard + 1);
        p->phase = 2;
        return 1;
    default: return 0; /* other nodes have no children */
    }
}

static void feed(const grammar *g, gstack *s, int c, gset *out, int guard);

/* Push a value of `node` and give it c. */
static void push_feed(const grammar *g, gstack *s, int node, int c, gset *out, int guard) {
    if (push(s, node)) feed(g, s, c, out, guard + 1);
}

/* maxProperties leaves room for one more optional property next to the required ones unwritten. */
static int optional_room(const gnode *n, const gframe *p) {
    return n->max_props < 0 || p->b + 1 + __builtin_popcountll(n->required & ~p->u.bits) <= n->max_props;
}

/* The declared properties object frame p may write next (a bit mask). */
static uint64_t keys_open(const gnode *n, const gframe *p) {
    uint64_t all = n->n >= 64 ? ~0ULL : (1ULL << n->n) - 1, left = all & ~p->u.bits;
    return optional_room(n, p) ? left : left & n->required;
}

/* Object frame p has a property left to write (declared ones unused, or others, within maxProperties). */
static int keys_left(const gnode *n, const gframe *p) {
    return keys_open(n, p) != 0 || (n->additional >= 0 && optional_room(n, p));
}

/* Object frame p of node n sees the opening quote of a key: push the key frames. */
static void key_start(const grammar *g, gstack *s, const gnode *n, gset *out) {
    gframe *p = &s->f[s->n - 1];
    p->phase = 2;
    p->ws = 0;
    if (s->n >= GR_MAX_DEPTH) return;
    gframe k = frame_start(p->node);
    k.key = 1;
    if (keys_open(n, p)) { /* declared keys: the range of all of them, the quote matched */
        k.a = 0;
        k.b = n->n;
        k.ws = 1;
        s->f[s->n++] = k;
        out_add(out, s);
        s->n--;
    }
    if (n->additional >= 0 && optional_room(n, p)) {
        k.phase = 1;
        k.a = k.b = 0;
        k.ws = 0;
        k.u.bits = GR_HASH_SEED;
        s->f[s->n++] = k;
        out_add(out, s);
        s->n--;
    }
}

static void key_byte(const grammar *g, gstack *s, int c, gset *out, int guard) {
    gframe *k = &s->f[s->n - 1];
    const gnode *n = &g->nodes[k->node];
    const uint64_t open = keys_open(n, &s->f[s->n - 2]);
    if (k->phase == 0) {
        int lo = k->a, hi = k->b;
        lits_narrow(n->strs, n->lens, &lo, &hi, k->ws, c);
        int live = 0;
        for (int i = lo; i < hi && !live; i++) live = (open >> i) & 1;
        if (!live) return;
        k->a = lo;
        k->b = hi;
        k->ws++;
        if (hi == lo + 1 && n->lens[lo] == k->ws) {
            if (pop_done(g, s, lo, guard)) out_add(out, s);
            return;
        }
        out_add(out, s);
        return;
    }
    int r = str_byte(k, c);
    if (r < 0) return;
    if (r == 2) {
        for (int i = 0; i < n->n; i++)
            if (n->key_hash[i] == k->u.bits) return; /* a declared name: that property's own schema applies */
        if (pop_done(g, s, -1, guard)) out_add(out, s);
        return;
    }
    k->u.bits = gr_hash(&c, 1, k->u.bits);
    out_add(out, s);
}

/* The top frame consumes c (one or more successor stacks go to out). */
static void consume(const grammar *g, gstack *s, int c, gset *out, int guard) {
    gframe *f = &s->f[s->n - 1];
    if (f->key) {
        key_byte(g, s, c, out, guard);
        return;
    }
    const gnode *n = &g->nodes[f->node];
    switch (n->kind) {
    case GN_OBJECT: {
        const int req_ok = (n->required & ~f->u.bits) == 0 && f->b >= n->min_props;
        switch (f->phase) {
        case 0:
            if (c == '{') f->phase = 1, out_add(out, s);
            return;
        case 1:
        case 7:
            if (is_ws(c)) {
                if (gap_ws(f, c)) out_add(out, s);
            } else if (c == '"' && keys_left(n, f)) key_start(g, s, n, out);
            else if (c == '}' && f->phase == 1 && req_ok) {
                if (pop_done(g, s, 0, guard)) out_add(out, s);
            }
            return;
        case 3:
            if (is_ws(c)) {
                if (gap_ws(f, c)) out_add(out, s);
            } else if (c == ':') f->phase = 4, f->ws = 0, out_add(out, s);
            return;
        case 4:
            if (is_ws(c)) {
                if (gap_ws(f, c)) out_add(out, s);
            } else {
                int vn = f->a >= 0 ? n->kids[f->a] : n->additional;
                f->phase = 5;
                f->ws = 0;
                push_feed(g, s, vn, c, out, guard);
            }
            return;
        case 6:
            if (is_ws(c)) {
                if (gap_ws(f, c)) out_add(out, s);
            } else if (c == ',' && keys_left(n, f)) f->phase = 7, f->ws = 0, out_add(out, s);
            else if (c == '}' && req_ok) {
                if (pop_done(g, s, 0, guard)) out_add(out, s);
            }
            return;
        default: return;
        }
    }
    case GN_ARRAY:
        switch (f->phase) {
        case 0:
            if (c == '[') f->phase = 1, out_add(out, s);
            return;
        case 1:
        case 4:
            if (is_ws(c)) {
                if (gap_ws(f, c)) out_add(out, s);
            } else if (c == ']' && f->phase == 1 && n->min == 0) {
                if (pop_done(g, s, 0, guard)) out_add(out, s);
            } else if (n->max != 0) {
                f->phase = 2;
                f->ws = 0;
                push_feed(g, s, n->kids[f->a < n->n ? f->a : n->n], c, out, guard);
            }
            return;
        case 3:
            if (is_ws(c)) {
                if (gap_ws(f, c)) out_add(out, s);
            } else if (c == ',' && (n->max < 0 || f->a < n->max)) f->phase = 4, f->ws = 0, out_add(out, s);
            /* (uniqueItems: max is at most the number of values, so a value is left after the comma) */
            else if (c == ']' && f->a >= n->min) {
                if (pop_done(g, s, 0, guard)) out_add(out, s);
            }
            return;
        default: return;
        }
    case GN_STRING: {
        if (f->phase == 0) {
            if (c == '"') f->phase = 1, out_add(out, s);
            return;
        }
        if (n->dfa) {
            if (str_dfa_byte(n, f, c)) out_add(out, s);
            else if (f->phase == 2 && pop_done(g, s, 0, guard)) out_add(out, s);
            return;
        }
        if (n->max >= 0 && f->ws >= n->max && f->a == 0 && f->b == 0 && c != '"') return; /* no room for a new character */
        int r = str_byte(f, c);
        if (r < 0) return;
        if (r == 2) {
            if (f->ws >= n->min && pop_done(g, s, 0, guard)) out_add(out, s);
            return;
        }
        if (r == 1 && (n->min > 0 || n->max >= 0)) {
            int cap = n->max >= 0 ? n->max : n->min;
            if (f->ws < cap) f->ws++;
        }
        out_add(out, s);
        return;
    }
    case GN_NUMBER:
        if (num_byte(n, f, c)) out_add(out, s);
        return;
    case GN_LITS: {
        int lo = f->phase ? f->a : 0, hi = f->phase ? f->b : n->n;
        lits_narrow(n->strs, n->lens, &lo, &hi, f->ws, c);
        if (lo >= hi) return;
        if (s->n >= 2 && g->nodes[s->f[s->n - 2].node].kind == GN_ARRAY && g->nodes[s->f[s->n - 2].node].unique &&
            !s->f[s->n - 2].key) { /* some literal of the range is not in the array yet */
            const uint64_t used = s->f[s->n - 2].u.bits;
            int live = 0;
            for (int i = lo; i < hi && !live; i++) live = !((used >> i) & 1);
            if (!live) return;
        }
        f->phase = 1;
        f->a = lo;
        f->b = hi;
        f->ws++;
        if (hi == lo + 1 && n->lens[lo] == f->ws) {
            if (pop_done(g, s, 0, guard)) out_add(out, s);
        } else
            out_add(out, s);
        return;
    }
    case GN_ANYOF:
        for (int i = 0; i < n->n; i++) {
            gstack t;
            stack_copy(&t, s);
            t.f[t.n - 1] = frame_start(n->kids[i]);
            feed(g, &t, c, out, guard + 1);
        }
        return;
    case GN_SEQ:
        if (f->phase == 0 && n->n > 0) {
            f->phase = 1;
            f->a = 0;
            push_feed(g, s, n->kids[0], c, out, guard);
        }
        return;
    case GN_REPEAT:
        if (f->phase == 0 || f->phase == 2) {
            if (n->max >= 0 && f->a >= n->max) return;
            if (f->phase == 2 && n->kids[1] >= 0) {
                f->phase = 3;
                push_feed(g, s, n->kids[1], c, out, guard);
            } else {
                f->phase = 1;
                push_feed(g, s, n->kids[0], c, out, guard);
            }
        }
        return;
    case GN_WS:
        if (is_ws(c) && f->ws < n->max) f->ws++, out_add(out, s);
        return;
    case GN_ANYTEXT:
        if (f->a || c >= 0x80) {
            if (str_byte(f, c) < 0) return;
        } else if (c == 0)
            return;
        out_add(out, s);
        return;
    case GN_TEXT: {
        const char *term = n->strs[0];
        const int tl = n->lens[0];
        if (f->a == 0 && (unsigned char)term[f->ws] == c) { /* the terminator goes on */
            if (++f->ws == tl) {
                if (!n->avoid && pop_done(g, s, 0, guard)) out_add(out, s);
                return;
            }
            out_add(out, s);
            return;
        }
        f->ws = f->a == 0 && (unsigned char)term[0] == c ? 1 : 0;
        if (f->ws == 0) {
            int r;
            if (f->a || c >= 0x80) {
                gframe probe = *f;
                probe.b = 0;
                r = str_byte(&probe, c);
                f->a = probe.a;
            } else /* raw text: quotes and backslashes are plain, control bytes other than \t \n \r are not */
                r = c >= 0x20 || c == '\n' || c == '\t' || c == '\r' ? 1 : -1;
            if (r < 0) return;
            if (n->max >= 0) {
                if (f->b >= n->max) return;
                f->b++;
            }
        }
        out_add(out, s);
        return;
    }
    }
}

static void feed(const grammar *g, gstack *s, int c, gset *out, int guard) {
    if (s->n == 0 || guard > GUARD) return; /* a complete sentence takes no more bytes */
    if (may_end(g, &s->f[s->n - 1])) {
        gstack t;
        stack_copy(&t, s);
        if (pop_done(g, &t, 0, guard)) feed(g, &t, c, out, guard + 1);
    }
    consume(g, s, c, out, guard);
}

void gset_init(const grammar *g, gset *out) {
    out->n = 1;
    out->s[0].n = 1;
    out->s[0].f[0] = frame_start(g->root);
}

int gset_step(const grammar *g, const gset *in, int c, gset *out) {
    out->n = 0;
    for (int i = 0; i < in->n; i++) {
        gstack t;
        stack_copy(&t, &in->s[i]);
        feed(g, &t, c, out, 0);
    }
    return out->n;
}

/* The stack can finish: pop frames that may end until it is empty. */
static int stack_can_finish(const grammar *g, const gstack *in) {
    gstack t;
    stack_copy(&t, in);
    for (int guard = 0; guard < GUARD; guard++) {
        if (t.n == 0) return 1;
        if (!may_end(g, &t.f[t.n - 1])) return 0;
        if (!pop_done(g, &t, 0, 0)) return 0;
    }
    return 0;
}

int gset_accepting(const grammar *g, const gset *s) {
    for (int i = 0; i < s->n; i++)
        if (stack_can_finish(g, &s->s[i])) return 1;
    return 0;
}

size_t gset_serialize(const gset *s, unsigned char *buf) {
    size_t o = 0;
    memcpy(buf + o, &s->n, sizeof s->n);
    o += sizeof s->n;
    for (int i = 0; i < s->n; i++) {
        memcpy(buf + o, &s->s[i].n, sizeof(int));
        o += sizeof(int);
        memcpy(buf + o, s->s[i].f, (size_t)s->s[i].n * sizeof(gframe));
        o += (size_t)s->s[i].n * sizeof(gframe);
    }
    return o;
}

int grammar_accepts(const grammar *g, const char *s, size_t n) {
    static __thread gset a, b; /* 15 KB each: kept off the stack */
    gset_init(g, &a);
    gset *cur = &a, *nxt = &b;
    for (size_t i = 0; i < n; i++) {
        if (!gset_step(g, cur, (unsigned char)s[i], nxt)) return 0;
        gset *t = cur;
        cur = nxt;
        nxt = t;
    }
    return gset_accepting(g, cur);
}
