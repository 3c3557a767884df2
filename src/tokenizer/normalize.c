/* normalize.c — tokenizer.json normalizers: NFC/NFD/NFKC/NFKD (utf8proc), Lowercase, Replace,
 * Prepend, Strip and Sequence, applied to one piece of text (the text between added tokens). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

static bool all_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return false;
    return true;
}

static int map_chunk(const char *in, size_t n, int opts, tbuf *out, mtplx_err *err) {
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)in, (utf8proc_ssize_t)n, &dst, (utf8proc_option_t)opts);
    if (r < 0) return err_set(err, MTPLX_EINVAL, "normalizer: %s", utf8proc_errmsg(r));
    int rc = tbuf_put(out, dst, (size_t)r);
    free(dst);
    return rc ? err_set(err, MTPLX_ENOMEM, "normalizer: out of memory") : 0;
}

/* Unicode normalization form, applied only where it can change something. An ASCII character
 * followed by an ASCII character (or the end) neither composes with its neighbours nor changes, so
 * the text is cut at such characters and only the chunks between them that hold a "risky" byte go
 * through utf8proc: for NFC a lead byte >= 0xCC (code points >= U+0300; nothing below U+0340 is
 * changed by NFC), for the other forms any non-ASCII byte. */
static int unicode_form(const char *in, size_t n, int opts, tbuf *out, mtplx_err *err) {
    if (all_ascii(in, n)) return tbuf_put(out, in, n) ? err_set(err, MTPLX_ENOMEM, "normalizer: out of memory") : 0;
    unsigned char risky = (opts & (UTF8PROC_COMPOSE | UTF8PROC_COMPAT)) == UTF8PROC_COMPOSE ? 0xCC : 0x80;
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0, copied = 0;
    while (i < n) {
        if (s[i] < risky) { i++; continue; }
        /* chunk around the risky byte: back to just after the last safe ASCII, forward to the next */
        size_t a = i;
        while (a > copied && !(s[a - 1] < 0x80 && (a == n || s[a] < 0x80))) a--;
        size_t b = i + 1;
        while (b < n && !(s[b] < 0x80 && (b + 1 == n || s[b + 1] < 0x80))) b++;
        if (tbuf_put(out, in + copied, a - copied)) return err_set(err, MTPLX_ENOMEM, "normalizer: out of memory");
        int rc = map_chunk(in + a, b - a, opts, out, err);
        if (rc) return rc;
        copied = i = b;
    }
    return tbuf_put(out, in + copied, n - copied) ? err_set(err, MTPLX_ENOMEM, "normalizer: out of memory") : 0;
}

/* tokenizers' NormalizedString::lowercase: Rust's char::to_lowercase per code point (no
 * final-sigma context); U+0130 is the one common character that lowercases to two. */
static int lowercase(const char *in, size_t n, tbuf *out) {
    const unsigned char *s = (const unsigned char *)in;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = utf8_decode(s + i, n - i, &cp);
        if (!l) { cp = s[i]; l = 1; }
        int rc;
        if (cp < 0x80) rc = tbuf_putc(out, (cp >= 'A' && cp <= 'Z') ? (int)cp + 32 : (int)cp);
        else if (cp == 0x130) rc = tbuf_put(out, "i\xCC\x87", 3);
        else rc = tbuf_put_cp(out, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
        if (rc) return MTPLX_ENOMEM;
        i += (size_t)l;
    }
    return 0;
}

static int replace(const normalizer *nz, const char *in, size_t n, tbuf *out, enc_scratch *sc, bool *shifted, mtplx_err *err) {
    size_t pos = 0;
    if (nz->pat.kind == PAT_STRING) {
        size_t pl = nz->pat.str_len;
        if (!pl) return tbuf_put(out, in, n);
        while (pos < n) {
            const char *hit = pl <= n - pos ? memmem(in + pos, n - pos, nz->pat.str, pl) : NULL;
            if (!hit) break;
            size_t at = (size_t)(hit - in);
            if (at == 0 && !nz->content_len) *shifted = true;
            if (tbuf_put(out, in + pos, at - pos) || tbuf_put(out, nz->content, nz->content_len)) return MTPLX_ENOMEM;
            pos = at + pl;
        }
        return tbuf_put(out, in + pos, n - pos);
    }
    size_t start = 0;
    for (;;) {
        size_t ms, me;
        int r = tregex_next(&nz->pat.re, in, n, start, sc->md, &ms, &me, err);
        if (r < 0) return r;
        if (r == 0) break;
        if (me == ms) { /* empty match: nothing to replace, step one character */
            if (ms >= n) break;
            uint32_t cp;
            int l = utf8_decode((const unsigned char *)in + ms, n - ms, &cp);
            start = ms + (size_t)(l ? l : 1);
            continue;
        }
        if (ms == 0 && !nz->content_len) *shifted = true;
        if (tbuf_put(out, in + pos, ms - pos) || tbuf_put(out, nz->content, nz->content_len)) return MTPLX_ENOMEM;
        pos = start = me;
    }
    return tbuf_put(out, in + pos, n - pos);
}

static int strip(const normalizer *nz, const char *in, size_t n, tbuf *out, bool *shifted) {
    const unsigned char *s = (const unsigned char *)in;
    size_t a = 0, b = n;
    if (nz->strip_left) {
        while (a < n) {
            uint32_t cp;
            int l = utf8_decode(s + a, n - a, &cp);
            if (!l || !uc_is_whitespace(cp)) break;
            a += (size_t)l;
        }
    }
    if (nz->strip_right) {
        while (b > a) {
            size_t k = b - 1;
            while (k > a && (s[k] & 0xC0) == 0x80) k--;
            uint32_t cp;
            int l = utf8_decode(s + k, b - k, &cp);
            if (!l || !uc_is_whitespace(cp)) break;
            b = k;
        }
    }
    if (a > 0) *shifted = true;
    return tbuf_put(out, in + a, b - a);
}

/* Apply nz to in[0..n) and append the result to out (which must not alias in). *shifted is set
 * when leading characters were removed, so the result no longer starts at the piece's original
 * offset (Metaspace "first" looks at that). Returns 0 or an error code. */
int normalizer_apply(const normalizer *nz, const char *in, size_t n, tbuf *out, enc_scratch *sc, bool *shifted,
                     mtplx_err *err) {
    int rc = 0;
    switch (nz->kind) {
    case NORM_NFC: return unicode_form(in, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE, out, err);
    case NORM_NFD: return unicode_form(in, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, out, err);
    case NORM_NFKC: return unicode_form(in, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out, err);
    case NORM_NFKD: return unicode_form(in, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out, err);
    case NORM_LOWERCASE: rc = lowercase(in, n, out); break;
    case NORM_REPLACE: rc = replace(nz, in, n, out, sc, shifted, err); if (rc < 0 && err && err->code) return rc; break;
    case NORM_PREPEND:
        if (n) rc = tbuf_put(out, nz->content, nz->content_len);
        if (!rc) rc = tbuf_put(out, in, n);
        break;
    case NORM_STRIP: rc = strip(nz, in, n, out, shifted); break;
    case NORM_SEQUENCE: {
        tbuf cur = {0}, nxt = {0};
        if (tbuf_put(&cur, in, n)) return err_set(err, MTPLX_ENOMEM, "normalizer: out of memory");
        for (int i = 0; i < nz->n_seq; i++) {
            nxt.len = 0;
            if (tbuf_reserve(&nxt, 0)) { rc = MTPLX_ENOMEM; break; }
            nxt.p[0] = 0;
            rc = normalizer_apply(&nz->seq[i], cur.p, cur.len, &nxt, sc, shifted, err);
            if (rc) break;
            tbuf t = cur; cur = nxt; nxt = t;
        }
        if (!rc) rc = tbuf_put(out, cur.p, cur.len);
        tbuf_free(&cur);
        tbuf_free(&nxt);
        if (rc && err && err->code) return rc;
        break;
    }
    }
    return rc ? err_set(err, rc, "normalizer: out of memory") : 0;
}
