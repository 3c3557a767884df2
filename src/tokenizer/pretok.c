/* pretok.c — tokenizer.json pre-tokenizers: Split (regex or literal, five behaviours, invert),
 * ByteLevel, Metaspace, Digits, Whitespace, WhitespaceSplit and Sequence.
 *
 * Each stage maps a list of pieces to a new list, following the `tokenizers` library: a pattern
 * cuts a piece into alternating match / non-match segments, the behaviour decides how segments
 * become pieces, and empty pieces are dropped. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

int plist_push(piece_list *l, size_t off, size_t len, bool at_origin) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 64;
        piece *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return MTPLX_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (piece){off, len, at_origin};
    return 0;
}

void plist_clear(piece_list *l) {
    l->n = 0;
    l->text.len = 0;
}

void plist_free(piece_list *l) {
    tbuf_free(&l->text);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int seg_push(enc_scratch *sc, int *n, size_t a, size_t b, bool m) {
    if (*n == sc->seg_cap) {
        int cap = sc->seg_cap ? sc->seg_cap * 2 : 256;
        size_t *na = realloc(sc->seg_a, (size_t)cap * sizeof *na);
        if (!na) return MTPLX_ENOMEM;
        sc->seg_a = na;
        size_t *nb = realloc(sc->seg_b, (size_t)cap * sizeof *nb);
        if (!nb) return MTPLX_ENOMEM;
        sc->seg_b = nb;
        bool *nm = realloc(sc->seg_m, (size_t)cap * sizeof *nm);
        if (!nm) return MTPLX_ENOMEM;
        sc->seg_m = nm;
        sc->seg_cap = cap;
    }
    sc->seg_a[*n] = a;
    sc->seg_b[*n] = b;
    sc->seg_m[*n] = m;
    (*n)++;
    return 0;
}

typedef enum { FIND_PATTERN, FIND_DIGIT, FIND_WHITESPACE, FIND_CHAR } find_kind;

/* Cut s[0..n) into segments (match / non-match) like tokenizers' Pattern::find_matches. A
 * character-predicate finder reports every matching character as its own match. */
static int find_segments(find_kind fk, const tpattern *pat, uint32_t ch, const char *s, size_t n, enc_scratch *sc,
                         int *nseg, mtplx_err *err) {
    *nseg = 0;
    if (!n) return seg_push(sc, nseg, 0, 0, false);
    size_t prev = 0;
    if (fk == FIND_PATTERN && pat->kind == PAT_STRING) {
        size_t pl = pat->str_len;
        if (!pl) return seg_push(sc, nseg, 0, n, false);
        size_t pos = 0;
        while (pos + pl <= n) {
            const char *hit = memmem(s + pos, n - pos, pat->str, pl);
            if (!hit) break;
            size_t a = (size_t)(hit - s);
            if (prev != a && seg_push(sc, nseg, prev, a, false)) return MTPLX_ENOMEM;
            if (seg_push(sc, nseg, a, a + pl, true)) return MTPLX_ENOMEM;
            prev = pos = a + pl;
        }
    } else if (fk == FIND_PATTERN) {
        size_t start = 0;
        for (;;) {
            size_t ms, me;
            int r = tregex_next(&pat->re, s, n, start, sc->md, &ms, &me, err);
            if (r < 0) return r;
            if (r == 0) break;
            if (me == ms) { /* empty match: skip one character, it cannot cut anything */
                if (ms >= n) break;
                uint32_t cp;
                int l = utf8_decode((const unsigned char *)s + ms, n - ms, &cp);
                start = ms + (size_t)(l ? l : 1);
                continue;
            }
            if (prev != ms && seg_push(sc, nseg, prev, ms, false)) return MTPLX_ENOMEM;
            if (seg_push(sc, nseg, ms, me, true)) return MTPLX_ENOMEM;
            prev = start = me;
        }
    } else {
        const unsigned char *u = (const unsigned char *)s;
        size_t i = 0;
        while (i < n) {
            uint32_t cp;
            int l = utf8_decode(u + i, n - i, &cp);
            if (!l) { cp = u[i]; l = 1; }
            bool m = fk == FIND_DIGIT ? uc_is_numeric(cp) : fk == FIND_WHITESPACE ? uc_is_whitespace(cp) : cp == ch;
            if (m) {
                if (prev < i && seg_push(sc, nseg, prev, i, false)) return MTPLX_ENOMEM;
                if (seg_push(sc, nseg, i, i + (size_t)l, true)) return MTPLX_ENOMEM;
                prev = i + (size_t)l;
            }
            i += (size_t)l;
        }
    }
    if (prev != n && seg_push(sc, nseg, prev, n, false)) return MTPLX_ENOMEM;
    return 0;
}

/* Turn segments into pieces of out per behaviour (tokenizers' NormalizedString::split). */
static int apply_behavior(split_behavior beh, bool invert, const char *s, bool at_origin, enc_scratch *sc, int nseg,
                          piece_list *out) {
    if (invert)
        for (int i = 0; i < nseg; i++) sc->seg_m[i] = !sc->seg_m[i];
    /* compute the final ranges in place into seg_a/seg_b, with seg_m = "remove" */
    int k = 0;
    bool prev_match = false;
    switch (beh) {
    case SPLIT_ISOLATED:
        for (int i = 0; i < nseg; i++) sc->seg_m[i] = false;
        k = nseg;
        break;
    case SPLIT_REMOVED:
        k = nseg;
        break;
    case SPLIT_CONTIGUOUS:
        for (int i = 0; i < nseg; i++) {
            bool m = sc->seg_m[i];
            if (m == prev_match && k > 0) sc->seg_b[k - 1] = sc->seg_b[i];
            else { sc->seg_a[k] = sc->seg_a[i]; sc->seg_b[k] = sc->seg_b[i]; sc->seg_m[k] = false; k++; }
            prev_match = m;
        }
        for (int i = 0; i < k; i++) sc->seg_m[i] = false;
        break;
    case SPLIT_MERGED_PREV:
        for (int i = 0; i < nseg; i++) {
            bool m = sc->seg_m[i];
            if (m && !prev_match && k > 0) sc->seg_b[k - 1] = sc->seg_b[i];
            else { sc->seg_a[k] = sc->seg_a[i]; sc->seg_b[k] = sc->seg_b[i]; k++; }
            prev_match = m;
        }
        for (int i = 0; i < k; i++) sc->seg_m[i] = false;
        break;
    case SPLIT_MERGED_NEXT: {
        /* fold from the right; results are written from the top of the array downwards */
        int top = nseg;
        for (int i = nseg - 1; i >= 0; i--) {
            bool m = sc->seg_m[i];
            if (m && !prev_match && top < nseg) sc->seg_a[top] = sc->seg_a[i];
            else { top--; sc->seg_a[top] = sc->seg_a[i]; sc->seg_b[top] = sc->seg_b[i]; }
            prev_match = m;
        }
        for (int i = top; i < nseg; i++) {
            sc->seg_a[k] = sc->seg_a[i]; sc->seg_b[k] = sc->seg_b[i]; sc->seg_m[k] = false; k++;
        }
        break;
    }
    }
    for (int i = 0; i < k; i++) {
        if (sc->seg_m[i]) continue;
        size_t a = sc->seg_a[i], b = sc->seg_b[i];
        if (b <= a) continue;
        size_t off = out->text.len;
        if (tbuf_put(&out->text, s + a, b - a) || plist_push(out, off, b - a, at_origin && a == 0)) return MTPLX_ENOMEM;
    }
    return 0;
}

static int split_one(find_kind fk, const tpattern *pat, uint32_t ch, split_behavior beh, bool invert, const char *s,
                     size_t n, bool at_origin, enc_scratch *sc, piece_list *out, mtplx_err *err) {
    int nseg;
    int rc = find_segments(fk, pat, ch, s, n, sc, &nseg, err);
    if (rc) return rc == MTPLX_ENOMEM ? err_set(err, rc, "pre-tokenizer: out of memory") : rc;
    rc = apply_behavior(beh, invert, s, at_origin, sc, nseg, out);
    return rc ? err_set(err, rc, "pre-tokenizer: out of memory") : 0;
}

static int put_bytelevel(const tokenizer *t, tbuf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (tbuf_put(b, t->byte_char[c], t->byte_char_len[c])) return MTPLX_ENOMEM;
    }
    return 0;
}

/* Apply pre-tokenizer p to every piece of in, appending the resulting pieces to out. A ByteLevel
 * stage maps bytes to its printable characters unless it is the pipeline's last stage and the
 * tokenizer uses the byte fast path (bpe.c then reads raw bytes). */
int pretok_apply(const tokenizer *t, const pretok *p, piece_list *in, piece_list *out, enc_scratch *sc, mtplx_err *err) {
    int rc = 0;
    switch (p->kind) {
    case PRE_SPLIT:
        for (int i = 0; i < in->n && !rc; i++)
            rc = split_one(FIND_PATTERN, &p->pat, 0, p->behavior, p->invert, in->text.p + in->v[i].off, in->v[i].len,
                           in->v[i].at_origin, sc, out, err);
        return rc;
    case PRE_DIGITS:
        for (int i = 0; i < in->n && !rc; i++)
            rc = split_one(FIND_DIGIT, NULL, 0, p->individual_digits ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS, false,
                           in->text.p + in->v[i].off, in->v[i].len, in->v[i].at_origin, sc, out, err);
        return rc;
    case PRE_WHITESPACE:
        for (int i = 0; i < in->n && !rc; i++)
            rc = split_one(FIND_PATTERN, &p->pat, 0, SPLIT_REMOVED, true, in->text.p + in->v[i].off, in->v[i].len,
                           in->v[i].at_origin, sc, out, err);
        return rc;
    case PRE_WHITESPACE_SPLIT:
        for (int i = 0; i < in->n && !rc; i++)
            rc = split_one(FIND_WHITESPACE, NULL, 0, SPLIT_REMOVED, false, in->text.p + in->v[i].off, in->v[i].len,
                           in->v[i].at_origin, sc, out, err);
        return rc;
    case PRE_BYTELEVEL: {
        bool raw = t->bytelevel_last;
        for (int i = 0; i < in->n && !rc; i++) {
            const char *s = in->text.p + in->v[i].off;
            size_t n = in->v[i].len;
            bool org = in->v[i].at_origin;
            sc->tmp.len = 0;
            if (p->add_prefix_space && !(n && s[0] == ' ')) {
                if (tbuf_putc(&sc->tmp, ' ')) return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            }
            if (tbuf_put(&sc->tmp, s, n)) return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            piece_list parts = {0};
            if (p->use_regex) {
                rc = split_one(FIND_PATTERN, &(tpattern){.kind = PAT_REGEX, .re = t->gpt2_re}, 0, SPLIT_ISOLATED, false,
                               sc->tmp.p, sc->tmp.len, org, sc, &parts, err);
            } else if (sc->tmp.len) {
                rc = tbuf_put(&parts.text, sc->tmp.p, sc->tmp.len) || plist_push(&parts, 0, sc->tmp.len, org)
                         ? err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory")
                         : 0;
            }
            for (int j = 0; j < parts.n && !rc; j++) {
                size_t off = out->text.len;
                const char *ps = parts.text.p + parts.v[j].off;
                int r2 = raw ? tbuf_put(&out->text, ps, parts.v[j].len) : put_bytelevel(t, &out->text, ps, parts.v[j].len);
                if (r2 || plist_push(out, off, out->text.len - off, parts.v[j].at_origin))
                    rc = err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            }
            plist_free(&parts);
        }
        return rc;
    }
    case PRE_METASPACE: {
        char rep[4];
        tbuf rb = {0};
        if (tbuf_put_cp(&rb, p->replacement)) return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
        size_t rl = rb.len;
        memcpy(rep, rb.p, rl);
        tbuf_free(&rb);
        for (int i = 0; i < in->n && !rc; i++) {
            const char *s = in->text.p + in->v[i].off;
            size_t n = in->v[i].len;
            bool org = in->v[i].at_origin;
            sc->tmp.len = 0;
            if (tbuf_reserve(&sc->tmp, n)) return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            bool starts_rep = (n >= 1 && s[0] == ' ') || (n >= rl && !memcmp(s, rep, rl));
            bool pre = !starts_rep && (p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && org));
            if (pre && tbuf_put(&sc->tmp, rep, rl)) return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            size_t a = 0;
            for (size_t k = 0; k < n; k++) {
                if (s[k] != ' ') continue;
                if (tbuf_put(&sc->tmp, s + a, k - a) || tbuf_put(&sc->tmp, rep, rl))
                    return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
                a = k + 1;
            }
            if (tbuf_put(&sc->tmp, s + a, n - a)) return err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            if (p->split) {
                tbuf keep = sc->tmp; /* split_one reuses sc->tmp? no: it only uses segments */
                rc = split_one(FIND_CHAR, NULL, p->replacement, SPLIT_MERGED_NEXT, false, keep.p, keep.len, org, sc, out,
                               err);
            } else if (sc->tmp.len) {
                size_t off = out->text.len;
                if (tbuf_put(&out->text, sc->tmp.p, sc->tmp.len) || plist_push(out, off, sc->tmp.len, org))
                    rc = err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
            }
        }
        return rc;
    }
    case PRE_SEQUENCE: {
        piece_list cur = {0}, nxt = {0};
        for (int i = 0; i < in->n; i++) {
            size_t off = cur.text.len;
            if (tbuf_put(&cur.text, in->text.p + in->v[i].off, in->v[i].len) ||
                plist_push(&cur, off, in->v[i].len, in->v[i].at_origin)) {
                rc = err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
                break;
            }
        }
        for (int s = 0; s < p->n_seq && !rc; s++) {
            plist_clear(&nxt);
            rc = pretok_apply(t, &p->seq[s], &cur, &nxt, sc, err);
            piece_list tmp = cur; cur = nxt; nxt = tmp;
        }
        for (int i = 0; i < cur.n && !rc; i++) {
            size_t off = out->text.len;
            if (tbuf_put(&out->text, cur.text.p + cur.v[i].off, cur.v[i].len) ||
                plist_push(out, off, cur.v[i].len, cur.v[i].at_origin))
                rc = err_set(err, MTPLX_ENOMEM, "pre-tokenizer: out of memory");
        }
        plist_free(&cur);
        plist_free(&nxt);
        return rc;
    }
    }
    return err_set(err, MTPLX_EINTERNAL, "pre-tokenizer: unknown stage");
}
