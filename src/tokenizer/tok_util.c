/* tok_util.c — byte buffers, hash maps, UTF-8 and PCRE2 helpers used by the tokenizer. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

/* ---- tbuf ---- */

int tbuf_reserve(tbuf *b, size_t extra) {
    if (b->len + extra + 1 <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) return MTPLX_ENOMEM;
        cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) return MTPLX_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

int tbuf_put(tbuf *b, const void *s, size_t n) {
    if (tbuf_reserve(b, n)) return MTPLX_ENOMEM;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

int tbuf_putc(tbuf *b, int c) {
    char ch = (char)c;
    return tbuf_put(b, &ch, 1);
}

int tbuf_put_cp(tbuf *b, uint32_t cp) {
    unsigned char u[4];
    int n;
    if (cp < 0x80) { u[0] = (unsigned char)cp; n = 1; }
    else if (cp < 0x800) { u[0] = 0xC0 | (cp >> 6); u[1] = 0x80 | (cp & 63); n = 2; }
    else if (cp < 0x10000) { u[0] = 0xE0 | (cp >> 12); u[1] = 0x80 | ((cp >> 6) & 63); u[2] = 0x80 | (cp & 63); n = 3; }
    else { u[0] = 0xF0 | (cp >> 18); u[1] = 0x80 | ((cp >> 12) & 63); u[2] = 0x80 | ((cp >> 6) & 63); u[3] = 0x80 | (cp & 63); n = 4; }
    return tbuf_put(b, u, (size_t)n);
}

void tbuf_free(tbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* ---- strmap: FNV-1a, open addressing, linear probing ---- */

uint32_t strmap_hash(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h ? h : 1;
}

int strmap_init(strmap *m, size_t expect) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expect * 2) cap *= 2;
    m->cap = cap;
    m->hash = calloc(cap, sizeof *m->hash);
    m->klen = malloc(cap * sizeof *m->klen);
    m->koff = malloc(cap * sizeof *m->koff);
    m->val = malloc(cap * sizeof *m->val);
    if (!m->hash || !m->klen || !m->koff || !m->val) { strmap_free(m); return MTPLX_ENOMEM; }
    return 0;
}

static int strmap_grow(strmap *m) {
    strmap g = *m;
    size_t cap = m->cap * 2;
    g.hash = calloc(cap, sizeof *g.hash);
    g.klen = malloc(cap * sizeof *g.klen);
    g.koff = malloc(cap * sizeof *g.koff);
    g.val = malloc(cap * sizeof *g.val);
    if (!g.hash || !g.klen || !g.koff || !g.val) {
        free(g.hash); free(g.klen); free(g.koff); free(g.val);
        return MTPLX_ENOMEM;
    }
    g.cap = cap;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->hash[i]) continue;
        size_t j = m->hash[i] & (cap - 1);
        while (g.hash[j]) j = (j + 1) & (cap - 1);
        g.hash[j] = m->hash[i]; g.klen[j] = m->klen[i]; g.koff[j] = m->koff[i]; g.val[j] = m->val[i];
    }
    free(m->hash); free(m->klen); free(m->koff); free(m->val);
    *m = g;
    return 0;
}

int strmap_put(strmap *m, const char *s, size_t n, int32_t v) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m)) return MTPLX_ENOMEM;
    uint32_t h = strmap_hash(s, n);
    size_t j = h & (m->cap - 1);
    while (m->hash[j]) {
        if (m->hash[j] == h && m->klen[j] == n && !memcmp(m->keys.p + m->koff[j], s, n)) {
            m->val[j] = v;
            return 0;
        }
        j = (j + 1) & (m->cap - 1);
    }
    size_t off = m->keys.len;
    if (tbuf_put(&m->keys, s, n)) return MTPLX_ENOMEM;
    m->hash[j] = h; m->klen[j] = (uint32_t)n; m->koff[j] = off; m->val[j] = v;
    m->n++;
    return 0;
}

int32_t strmap_get(const strmap *m, const char *s, size_t n) {
    if (!m->cap) return -1;
    uint32_t h = strmap_hash(s, n);
    size_t j = h & (m->cap - 1);
    while (m->hash[j]) {
        if (m->hash[j] == h && m->klen[j] == n && !memcmp(m->keys.p + m->koff[j], s, n)) return m->val[j];
        j = (j + 1) & (m->cap - 1);
    }
    return -1;
}

void strmap_free(strmap *m) {
    free(m->hash); free(m->klen); free(m->koff); free(m->val);
    tbuf_free(&m->keys);
    memset(m, 0, sizeof *m);
}

/* ---- pairmap ---- */

static inline size_t pair_slot(uint64_t k, size_t cap) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdull; k ^= k >> 33;
    return (size_t)k & (cap - 1);
}

int pairmap_init(pairmap *m, size_t expect) {
    memset(m, 0, sizeof *m);
    size_t cap = 16;
    while (cap < expect * 2) cap *= 2;
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot) return MTPLX_ENOMEM;
    m->cap = cap;
    for (size_t i = 0; i < cap; i++) m->slot[i].key = UINT64_MAX;
    return 0;
}

static int pairmap_grow(pairmap *m) {
    pairmap g;
    if (pairmap_init(&g, m->cap)) return MTPLX_ENOMEM;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slot[i].key == UINT64_MAX) continue;
        size_t j = pair_slot(m->slot[i].key, g.cap);
        while (g.slot[j].key != UINT64_MAX) j = (j + 1) & (g.cap - 1);
        g.slot[j] = m->slot[i];
    }
    g.n = m->n;
    pairmap_free(m);
    *m = g;
    return 0;
}

void pairmap_put(pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t out) {
    if ((m->n + 1) * 2 > m->cap && pairmap_grow(m)) return;
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t j = pair_slot(k, m->cap);
    while (m->slot[j].key != UINT64_MAX) {
        if (m->slot[j].key == k) { m->slot[j].rank = rank; m->slot[j].out = out; return; }
        j = (j + 1) & (m->cap - 1);
    }
    m->slot[j] = (pair_slot_t){k, rank, out};
    m->n++;
}

bool pairmap_get(const pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *out) {
    if (!m->cap) return false;
    uint64_t k = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t j = pair_slot(k, m->cap);
    while (m->slot[j].key != UINT64_MAX) {
        if (m->slot[j].key == k) { *rank = m->slot[j].rank; *out = m->slot[j].out; return true; }
        j = (j + 1) & (m->cap - 1);
    }
    return false;
}

void pairmap_free(pairmap *m) {
    free(m->slot);
    memset(m, 0, sizeof *m);
}

/* ---- UTF-8 ---- */

int utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (!n) return 0;
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len;
    unsigned lo = 0x80, hi = 0xBF;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) { len = 2; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)len > n) return 0;
    if (s[1] < lo || s[1] > hi) return 0;
    v = (v << 6) | (s[1] & 0x3F);
    for (int i = 2; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

size_t utf8_first_invalid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { i++; continue; }
        uint32_t cp;
        int l = utf8_decode(s + i, n - i, &cp);
        if (!l) return i;
        i += (size_t)l;
    }
    return n;
}

/* Rust's Utf8Chunks: a broken sequence is its lead byte plus every following byte that was still
 * acceptable for that lead; the whole run is one U+FFFD. */
int utf8_lossy_append(tbuf *out, const unsigned char *s, size_t n) {
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        uint32_t cp;
        int l = utf8_decode(s + i, n - i, &cp);
        if (l) { i += (size_t)l; continue; }
        if (tbuf_put(out, s + run, i - run)) return MTPLX_ENOMEM;
        size_t k = 1;
        unsigned lo = 0x80, hi = 0xBF;
        int need = 0;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        if (need) {
            if (i + k < n && s[i + k] >= lo && s[i + k] <= hi) {
                k++;
                while (k <= (size_t)need && i + k < n && (s[i + k] & 0xC0) == 0x80) k++;
            }
        }
        if (tbuf_put(out, "\xEF\xBF\xBD", 3)) return MTPLX_ENOMEM;
        i += k;
        run = i;
    }
    return tbuf_put(out, s + run, n - run);
}

bool uc_is_whitespace(uint32_t c) {
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool uc_is_alnum_word(uint32_t c) {
    if (c == '_' || c == 0x200C || c == 0x200D) return true;
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_ME) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_PC;
}

bool uc_is_numeric(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* ---- regex ----
 * tokenizer.json patterns are written for Oniguruma (what `tokenizers` uses). PCRE2 with UCP agrees
 * on \p{..} classes, lookaround and (?i:..), but not on \s (PCRE2 adds U+180E) nor \w (PCRE2
 * lacks marks and join controls), so those two are rewritten into explicit classes first. */

#define ONIG_SPACE "\\t-\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
#define ONIG_WORD "\\p{L}\\p{Nl}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}\\x{24B6}-\\x{24E9}"

static int onig_to_pcre(const char *p, size_t n, tbuf *out) {
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        int rc = 0;
        if (c == '\\' && i + 1 < n) {
            char d = p[++i];
            const char *set = (d == 's' || d == 'S') ? ONIG_SPACE : (d == 'w' || d == 'W') ? ONIG_WORD : NULL;
            bool neg = d == 'S' || d == 'W';
            if (set && !in_class) {
                rc = tbuf_put(out, neg ? "[^" : "[", neg ? 2 : 1);
                if (!rc) rc = tbuf_put(out, set, strlen(set));
                if (!rc) rc = tbuf_putc(out, ']');
            } else if (set && !neg) {
                rc = tbuf_put(out, set, strlen(set));
            } else if (d == 'Q') { /* \Q...\E is literal: copy through */
                size_t e = i + 1;
                while (e + 1 < n && !(p[e] == '\\' && p[e + 1] == 'E')) e++;
                if (e + 1 >= n) e = n;
                rc = tbuf_put(out, p + i - 1, (e < n ? e + 2 : n) - (i - 1));
                i = e < n ? e + 1 : n;
            } else {
                rc = tbuf_putc(out, '\\');
                if (!rc) rc = tbuf_putc(out, d);
            }
        } else if (!in_class && c == '[') {
            in_class = true;
            rc = tbuf_putc(out, c);
            if (!rc && i + 1 < n && p[i + 1] == '^') rc = tbuf_putc(out, p[++i]);
            if (!rc && i + 1 < n && p[i + 1] == ']') rc = tbuf_putc(out, p[++i]); /* literal ] first */
        } else if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
            const char *e = memmem(p + i, n - i, ":]", 2);
            size_t end = e ? (size_t)(e - p) + 2 : n;
            rc = tbuf_put(out, p + i, end - i);
            i = end - 1;
        } else {
            if (in_class && c == ']') in_class = false;
            rc = tbuf_putc(out, c);
        }
        if (rc) return rc;
    }
    return 0;
}

int tregex_compile(tregex *r, const char *pattern, size_t len, mtplx_err *err) {
    memset(r, 0, sizeof *r);
    r->src = malloc(len + 1);
    if (!r->src) return err_set(err, MTPLX_ENOMEM, "regex: out of memory");
    memcpy(r->src, pattern, len);
    r->src[len] = 0;
    int ec;
    PCRE2_SIZE eo;
    tbuf conv = {0};
    if (onig_to_pcre(pattern, len, &conv) || tbuf_reserve(&conv, 0)) {
        tbuf_free(&conv);
        tregex_free(r);
        return err_set(err, MTPLX_ENOMEM, "regex: out of memory");
    }
    r->code = pcre2_compile((PCRE2_SPTR)conv.p, conv.len, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    tbuf_free(&conv);
    if (!r->code) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        err_set(err, MTPLX_EBADFILE, "regex /%.200s/ at offset %zu: %s", r->src, (size_t)eo, (char *)msg);
        tregex_free(r);
        return MTPLX_EBADFILE;
    }
    pcre2_jit_compile(r->code, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    return 0;
}

int tregex_next(const tregex *r, const char *s, size_t n, size_t start, pcre2_match_data *md, size_t *ms,
                size_t *me, mtplx_err *err) {
    if (start > n) return 0;
    int rc = pcre2_match(r->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) /* the interpreter keeps its frames on the heap */
        rc = pcre2_match(r->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return err_set(err, MTPLX_EINVAL, "regex /%.200s/: %s", r->src, (char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

void tregex_free(tregex *r) {
    if (r->code) pcre2_code_free(r->code);
    free(r->src);
    memset(r, 0, sizeof *r);
}
