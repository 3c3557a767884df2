/* decode.c — ids -> text through the tokenizer.json decoder chain (ByteLevel, Metaspace,
 * ByteFallback, Fuse, Strip, Replace, Sequence), and the streaming detokenizer.
 *
 * Decoders work on a list of token strings exactly like `tokenizers`' decode_chain; the result is
 * the concatenation of the final list. A decoder that is exactly ByteLevel takes a fast path over
 * per-token byte strings precomputed at load. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "tok_internal.h"

typedef struct {
    tbuf    buf;
    size_t *off, *len;
    int     n, cap;
} strlist;

static int sl_push(strlist *l, const char *s, size_t n) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        size_t *o = realloc(l->off, (size_t)cap * sizeof *o);
        if (!o) return MTPLX_ENOMEM;
        l->off = o;
        size_t *q = realloc(l->len, (size_t)cap * sizeof *q);
        if (!q) return MTPLX_ENOMEM;
        l->len = q;
        l->cap = cap;
    }
    size_t off = l->buf.len;
    if (tbuf_put(&l->buf, s, n)) return MTPLX_ENOMEM;
    l->off[l->n] = off;
    l->len[l->n] = n;
    l->n++;
    return 0;
}

static void sl_free(strlist *l) {
    tbuf_free(&l->buf);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

#define SL_S(l, i) ((l)->buf.p + (l)->off[i])

static bool is_byte_token(const char *s, size_t n, unsigned char *b) {
    if (n != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return false;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = v * 16 + d;
    }
    *b = (unsigned char)v;
    return true;
}

/* The bytes a ByteLevel decoder makes of one token: each character mapped back to its byte, or
 * the token's own UTF-8 when some character is not a byte-level character. */
static int bytelevel_token(const tokenizer *t, const char *s, size_t n, tbuf *out) {
    size_t mark = out->len;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        int l = utf8_decode(u + i, n - i, &cp);
        if (!l || cp >= 0x180 || t->char_byte[cp] < 0) {
            out->len = mark;
            return tbuf_put(out, s, n);
        }
        if (tbuf_putc(out, t->char_byte[cp])) return MTPLX_ENOMEM;
        i += (size_t)l;
    }
    return 0;
}

static int replace_in(const tpattern *pat, const char *content, size_t clen, const char *s, size_t n, tbuf *out,
                      pcre2_match_data *md, mtplx_err *err) {
    size_t pos = 0;
    if (pat->kind == PAT_STRING) {
        size_t pl = pat->str_len;
        while (pl && pos + pl <= n) {
            const char *hit = memmem(s + pos, n - pos, pat->str, pl);
            if (!hit) break;
            size_t at = (size_t)(hit - s);
            if (tbuf_put(out, s + pos, at - pos) || tbuf_put(out, content, clen)) return MTPLX_ENOMEM;
            pos = at + pl;
        }
        return tbuf_put(out, s + pos, n - pos);
    }
    size_t start = 0;
    for (;;) {
        size_t ms, me;
        int r = tregex_next(&pat->re, s, n, start, md, &ms, &me, err);
        if (r < 0) return r;
        if (!r) break;
        if (me == ms) {
            if (ms >= n) break;
            uint32_t cp;
            int l = utf8_decode((const unsigned char *)s + ms, n - ms, &cp);
            start = ms + (size_t)(l ? l : 1);
            continue;
        }
        if (tbuf_put(out, s + pos, ms - pos) || tbuf_put(out, content, clen)) return MTPLX_ENOMEM;
        pos = start = me;
    }
    return tbuf_put(out, s + pos, n - pos);
}

/* Apply decoder d to the list in, producing out (decode_chain). Returns 0 or an error code. */
static int decode_chain(const tokenizer *t, const decoder *d, strlist *in, strlist *out, pcre2_match_data *md,
                        mtplx_err *err) {
    int rc = 0;
    tbuf tmp = {0};
    switch (d->kind) {
    case DEC_BYTELEVEL: {
        tbuf bytes = {0};
        for (int i = 0; i < in->n && !rc; i++) rc = bytelevel_token(t, SL_S(in, i), in->len[i], &bytes);
        if (!rc) rc = utf8_lossy_append(&tmp, (const unsigned char *)(bytes.p ? bytes.p : ""), bytes.len);
        if (!rc) rc = sl_push(out, tmp.p ? tmp.p : "", tmp.len);
        tbuf_free(&bytes);
        break;
    }
    case DEC_FUSE:
        for (int i = 0; i < in->n && !rc; i++) rc = tbuf_put(&tmp, SL_S(in, i), in->len[i]);
        if (!rc) rc = sl_push(out, tmp.p ? tmp.p : "", tmp.len);
        break;
    case DEC_REPLACE:
        for (int i = 0; i < in->n && !rc; i++) {
            tmp.len = 0;
            rc = replace_in(&d->pat, d->content, d->content_len, SL_S(in, i), in->len[i], &tmp, md, err);
            if (!rc) rc = sl_push(out, tmp.p ? tmp.p : "", tmp.len);
        }
        break;
    case DEC_BYTEFALLBACK: {
        tbuf run = {0};
        int nrun = 0;
        for (int i = 0; i <= in->n && !rc; i++) {
            unsigned char b;
            if (i < in->n && is_byte_token(SL_S(in, i), in->len[i], &b)) {
                rc = tbuf_putc(&run, b);
                nrun++;
                continue;
            }
            if (nrun) {
                if (utf8_first_invalid((const unsigned char *)run.p, run.len) == run.len) rc = sl_push(out, run.p, run.len);
                else
                    for (int k = 0; k < nrun && !rc; k++) rc = sl_push(out, "\xEF\xBF\xBD", 3);
                run.len = 0;
                nrun = 0;
            }
            if (i < in->n && !rc) rc = sl_push(out, SL_S(in, i), in->len[i]);
        }
        tbuf_free(&run);
        break;
    }
    case DEC_STRIP: {
        size_t cl = d->content_len;
        for (int i = 0; i < in->n && !rc; i++) {
            const char *s = SL_S(in, i);
            size_t a = 0, b = in->len[i];
            for (int k = 0; k < d->strip_start && cl && a + cl <= b && !memcmp(s + a, d->content, cl); k++) a += cl;
            for (int k = 0; k < d->strip_stop && cl && b >= a + cl && !memcmp(s + b - cl, d->content, cl); k++) b -= cl;
            rc = sl_push(out, s + a, b - a);
        }
        break;
    }
    case DEC_METASPACE:
        for (int i = 0; i < in->n && !rc; i++) {
            tmp.len = 0;
            const unsigned char *u = (const unsigned char *)SL_S(in, i);
            size_t n = in->len[i], k = 0;
            while (k < n && !rc) {
                uint32_t cp;
                int l = utf8_decode(u + k, n - k, &cp);
                if (!l) { cp = u[k]; l = 1; }
                if (cp == d->replacement) {
                    if (!(i == 0 && d->prepend != PREPEND_NEVER)) rc = tbuf_putc(&tmp, ' ');
                } else rc = tbuf_put(&tmp, u + k, (size_t)l);
                k += (size_t)l;
            }
            if (!rc) rc = sl_push(out, tmp.p ? tmp.p : "", tmp.len);
        }
        break;
    case DEC_BPE: { /* the word suffix becomes a space, except in the last token */
        tpattern lit = {.kind = PAT_STRING, .str = d->content, .str_len = d->content_len};
        for (int i = 0; i < in->n && !rc; i++) {
            tmp.len = 0;
            rc = replace_in(&lit, " ", i == in->n - 1 ? 0 : 1, SL_S(in, i), in->len[i], &tmp, md, err);
            if (!rc) rc = sl_push(out, tmp.p ? tmp.p : "", tmp.len);
        }
        break;
    }
    case DEC_SEQUENCE: {
        strlist cur = {0}, nxt = {0};
        for (int i = 0; i < in->n && !rc; i++) rc = sl_push(&cur, SL_S(in, i), in->len[i]);
        for (int s = 0; s < d->n_seq && !rc; s++) {
            nxt.n = 0;
            nxt.buf.len = 0;
            rc = decode_chain(t, &d->seq[s], &cur, &nxt, md, err);
            strlist x = cur; cur = nxt; nxt = x;
        }
        for (int i = 0; i < cur.n && !rc; i++) rc = sl_push(out, SL_S(&cur, i), cur.len[i]);
        sl_free(&cur);
        sl_free(&nxt);
        break;
    }
    }
    tbuf_free(&tmp);
    if (rc && !(err && err->code)) return err_set(err, MTPLX_ENOMEM, "decode: out of memory");
    return rc;
}

/* Token string of id for decoding, or NULL to skip it (a hole in the vocab, or a special token
 * when skipping). */
static const char *token_for_decode(const tokenizer *t, int32_t id, int skip_special, size_t *len) {
    int a = t->added_of_id[id];
    if (a >= 0) {
        if (skip_special && t->added[a].special) return NULL;
        *len = t->added[a].len;
        return t->added[a].content;
    }
    if (id >= t->n_model || !t->model_str[id]) return NULL;
    if (skip_special) {
        int32_t aid = strmap_get(&t->added_map, t->model_str[id], t->model_len[id]);
        if (aid >= 0 && t->added_of_id[aid] >= 0 && t->added[t->added_of_id[aid]].special) return NULL;
    }
    *len = t->model_len[id];
    return t->model_str[id];
}

/* Decode ids into out (appended, NUL-terminated). Returns 0 or an error (bad id: ERANGE). */
int decode_tokens(const tokenizer *t, const int32_t *ids, int n, int skip_special, tbuf *out, mtplx_err *err) {
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_ids)
            return err_set(err, MTPLX_ERANGE, "decode: token id %d at position %d is outside the vocabulary [0, %d)",
                           (int)ids[i], i, (int)t->n_ids);
    if (tbuf_reserve(out, 0)) return err_set(err, MTPLX_ENOMEM, "decode: out of memory");
    out->p[out->len] = 0;
    if (t->dec_bytelevel_only) {
        tbuf bytes = {0};
        int rc = 0;
        for (int i = 0; i < n && !rc; i++) {
            size_t l;
            if (!token_for_decode(t, ids[i], skip_special, &l)) continue;
            rc = tbuf_put(&bytes, t->dec_bytes[ids[i]], t->dec_len[ids[i]]);
        }
        if (!rc) rc = utf8_lossy_append(out, (const unsigned char *)(bytes.p ? bytes.p : ""), bytes.len);
        tbuf_free(&bytes);
        return rc ? err_set(err, MTPLX_ENOMEM, "decode: out of memory") : 0;
    }
    strlist toks = {0}, res = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        size_t l;
        const char *s = token_for_decode(t, ids[i], skip_special, &l);
        if (s) rc = sl_push(&toks, s, l);
    }
    if (rc) rc = err_set(err, MTPLX_ENOMEM, "decode: out of memory");
    if (!rc && !t->dec) {
        for (int i = 0; i < toks.n && !rc; i++)
            rc = (i && tbuf_putc(out, ' ')) || tbuf_put(out, SL_S(&toks, i), toks.len[i]) ? MTPLX_ENOMEM : 0;
        if (rc) rc = err_set(err, MTPLX_ENOMEM, "decode: out of memory");
    } else if (!rc) {
        pcre2_match_data *md = pcre2_match_data_create(4, NULL);
        if (!md) rc = err_set(err, MTPLX_ENOMEM, "decode: out of memory");
        if (!rc) rc = decode_chain(t, t->dec, &toks, &res, md, err);
        for (int i = 0; i < res.n && !rc; i++)
            if (tbuf_put(out, SL_S(&res, i), res.len[i])) rc = err_set(err, MTPLX_ENOMEM, "decode: out of memory");
        if (md) pcre2_match_data_free(md);
    }
    sl_free(&toks);
    sl_free(&res);
    return rc;
}

int tok_decode(const tokenizer *t, const int32_t *ids, int n, int skip_special, char **text, size_t *len,
               mtplx_err *err) {
    *text = NULL;
    if (len) *len = 0;
    if (!t) return err_set(err, MTPLX_EINVAL, "tok_decode: no tokenizer");
    if (n < 0 || (n && !ids)) return err_set(err, MTPLX_EINVAL, "tok_decode: bad id array");
    tbuf out = {0};
    int rc = decode_tokens(t, ids, n, skip_special, &out, err);
    if (rc) { tbuf_free(&out); return rc; }
    *text = out.p;
    if (len) *len = out.len;
    return 0;
}

/* ---- streaming ---- */

#define STREAM_MAX_PENDING 16  /* held tokens before a partial emit is attempted */
#define STREAM_MAX_HELD 256    /* held tokens after which text is emitted even if not provably final */

struct tok_stream {
    const tokenizer *t;
    int      skip_special;
    int32_t *win;        /* [cap] context tokens (last emitted chunk) then pending tokens */
    int      n, cap;
    int      prefix_n;   /* win[0..prefix_n) is the context */
    tbuf     prefix;     /* decode(win[0..prefix_n)) */
    tbuf     full;       /* scratch: decode of the window */
    tbuf     outb;       /* what the last call returned */
};

int tok_stream_new(const tokenizer *t, int skip_special, tok_stream **out, mtplx_err *err) {
    *out = NULL;
    tok_stream *s = mem_zalloc(1, sizeof *s, "tok_stream", err);
    if (!s) return MTPLX_ENOMEM;
    s->t = t;
    s->skip_special = skip_special;
    s->cap = 64;
    s->win = mem_alloc((size_t)s->cap, sizeof *s->win, "tok_stream window", err);
    if (!s->win || tbuf_reserve(&s->prefix, 256) || tbuf_reserve(&s->full, 256) || tbuf_reserve(&s->outb, 256)) {
        tok_stream_free(s);
        return err_set(err, MTPLX_ENOMEM, "tok_stream: out of memory");
    }
    s->prefix.p[0] = s->full.p[0] = s->outb.p[0] = 0;
    *out = s;
    return 0;
}

void tok_stream_free(tok_stream *s) {
    if (!s) return;
    free(s->win);
    tbuf_free(&s->prefix);
    tbuf_free(&s->full);
    tbuf_free(&s->outb);
    free(s);
}

static bool ends_with_fffd(const tbuf *b) {
    return b->len >= 3 && !memcmp(b->p + b->len - 3, "\xEF\xBF\xBD", 3);
}

static bool starts_with(const tbuf *a, const tbuf *p) {
    return a->len >= p->len && !memcmp(a->p, p->p, p->len);
}

/* 1 when the raw bytes of win[0..upto) (byte-level decoder) end inside a UTF-8 sequence that the
 * following bytes could still complete: a lead byte followed by fewer continuation bytes than it
 * needs, all of them acceptable so far. */
static bool window_ends_incomplete(const tok_stream *s, int upto) {
    unsigned char b[4];
    int n = 0;
    for (int i = upto - 1; i >= 0 && n < 4; i--) {
        size_t l;
        if (!token_for_decode(s->t, s->win[i], s->skip_special, &l)) continue;
        const char *tb = s->t->dec_bytes[s->win[i]];
        for (int k = (int)s->t->dec_len[s->win[i]] - 1; k >= 0 && n < 4; k--) b[n++] = (unsigned char)tb[k];
    }
    /* b holds the last n bytes, newest first */
    int lead = -1;
    for (int k = 0; k < n; k++)
        if ((b[k] & 0xC0) != 0x80) { lead = k; break; }
    if (lead < 0) return false;
    unsigned c = b[lead];
    int need = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    int have = lead + 1;
    if (!need || have >= need) return false;
    if (have >= 2) {
        unsigned c1 = b[lead - 1], lo = 0x80, hi = 0xBF;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
        if (c1 < lo || c1 > hi) return false;
    }
    return true;
}

/* Emit full[prefix.len..] and make win[from..upto) the new context. */
static int stream_emit(tok_stream *s, const tbuf *full, int from, int upto, mtplx_err *err) {
    if (tbuf_put(&s->outb, full->p + s->prefix.len, full->len - s->prefix.len))
        return err_set(err, MTPLX_ENOMEM, "tok_stream: out of memory");
    memmove(s->win, s->win + from, (size_t)(s->n - from) * sizeof *s->win);
    s->n -= from;
    s->prefix_n = upto - from;
    s->prefix.len = 0;
    return decode_tokens(s->t, s->win, s->prefix_n, s->skip_special, &s->prefix, err);
}

int tok_stream_push(tok_stream *s, int32_t id, const char **text, size_t *len, mtplx_err *err) {
    *text = "";
    *len = 0;
    if (id < 0 || id >= s->t->n_ids)
        return err_set(err, MTPLX_ERANGE, "tok_stream: token id %d is outside the vocabulary [0, %d)", (int)id,
                       (int)s->t->n_ids);
    s->outb.len = 0;
    s->outb.p[0] = 0;
    size_t tl;
    if (!token_for_decode(s->t, id, s->skip_special, &tl)) return 0; /* skipped: decodes to nothing */
    if (s->n == s->cap) {
        int32_t *w = realloc(s->win, (size_t)s->cap * 2 * sizeof *w);
        if (!w) return err_set(err, MTPLX_ENOMEM, "tok_stream: out of memory");
        s->win = w;
        s->cap *= 2;
    }
    s->win[s->n++] = id;
    s->full.len = 0;
    int rc = decode_tokens(s->t, s->win, s->n, s->skip_special, &s->full, err);
    if (rc) { s->n--; return rc; }
    if (s->full.len > s->prefix.len && !ends_with_fffd(&s->full) && starts_with(&s->full, &s->prefix)) {
        rc = stream_emit(s, &s->full, s->prefix_n, s->n, err);
    } else if (s->n - s->prefix_n > STREAM_MAX_PENDING) {
        /* A long run that still ends in U+FFFD (invalid bytes): emit all but the last 3 tokens when
         * that text is final — it ends in a real character, or (byte-level decoder) its bytes do not
         * end in an unfinished UTF-8 sequence — and is a prefix of the window's decode. Past
         * STREAM_MAX_HELD tokens anything decodable is emitted (other decoders), to bound the work per
         * push; a byte-level decoder never needs that (at most 3 bytes can be unfinished). */
        tbuf part = {0};
        int cut = s->n - 3;
        rc = decode_tokens(s->t, s->win, cut, s->skip_special, &part, err);
        bool final = !rc && !ends_with_fffd(&part);
        if (!rc && !final && s->t->dec_bytelevel_only) final = !window_ends_incomplete(s, cut);
        if (!rc && !final && !s->t->dec_bytelevel_only && s->n - s->prefix_n > STREAM_MAX_HELD) final = true;
        if (!rc && final && part.len > s->prefix.len && starts_with(&part, &s->prefix) && starts_with(&s->full, &part))
            rc = stream_emit(s, &part, s->prefix_n, cut, err);
        tbuf_free(&part);
    }
    if (rc) return rc;
    *text = s->outb.p;
    *len = s->outb.len;
    return 0;
}

int tok_stream_flush(tok_stream *s, const char **text, size_t *len, mtplx_err *err) {
    *text = "";
    *len = 0;
    s->outb.len = 0;
    s->outb.p[0] = 0;
    s->full.len = 0;
    int rc = decode_tokens(s->t, s->win, s->n, s->skip_special, &s->full, err);
    if (rc) return rc;
    size_t common = 0;
    while (common < s->prefix.len && common < s->full.len && s->prefix.p[common] == s->full.p[common]) common++;
    if (tbuf_put(&s->outb, s->full.p + common, s->full.len - common)) return err_set(err, MTPLX_ENOMEM, "tok_stream: out of memory");
    s->n = 0;
    s->prefix_n = 0;
    s->prefix.len = 0;
    s->prefix.p[0] = 0;
    *text = s->outb.p;
    *len = s->outb.len;
    return 0;
}

int tok_token_bytes(const tokenizer *t, int32_t id, const char **bytes, size_t *len) {
    if (!t->dec_bytelevel_only || id < 0 || id >= t->n_ids || !t->dec_bytes[id]) return 0;
    *bytes = t->dec_bytes[id];
    *len = t->dec_len[id];
    return 1;
}
