/* encode.c — text -> ids: added tokens first, then normalizer, pre-tokenizer and BPE, in the
 * order and with the semantics of `tokenizers`' Tokenizer::encode (AddedVocabulary::
 * extract_and_normalize, then pre_tokenize, then the model). Also the added-token byte trie. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "tok_internal.h"

/* ---- trie ---- */

void trie_init(trie *tr) {
    memset(tr, 0, sizeof *tr);
}

static int trie_new_node(trie *tr) {
    if (tr->n_nodes == tr->cap_nodes) {
        int cap = tr->cap_nodes ? tr->cap_nodes * 2 : 256;
        int32_t *v = realloc(tr->tok, (size_t)cap * sizeof *v);
        if (!v) return -1;
        tr->tok = v;
        tr->cap_nodes = cap;
    }
    tr->tok[tr->n_nodes] = -1;
    return tr->n_nodes++;
}

/* Insert s[0..n) ending in token index tok_index (an earlier insert of the same string wins,
 * like a pattern set where the first of two equal patterns is reported). Returns 0 or ENOMEM. */
int trie_add(trie *tr, const char *s, size_t n, int32_t tok_index) {
    if (!n) return 0;
    if (!tr->n_nodes) {
        if (pairmap_init(&tr->edges, 256) || trie_new_node(tr) < 0) return MTPLX_ENOMEM;
    }
    int node = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)s[i];
        int32_t rank, child;
        if (!pairmap_get(&tr->edges, node, b, &rank, &child)) {
            child = trie_new_node(tr);
            if (child < 0) return MTPLX_ENOMEM;
            pairmap_put(&tr->edges, node, b, 0, child);
            if (!pairmap_get(&tr->edges, node, b, &rank, &child)) return MTPLX_ENOMEM;
        }
        node = child;
    }
    if (tr->tok[node] < 0) tr->tok[node] = tok_index;
    tr->first[(unsigned char)s[0] >> 3] |= (uint8_t)(1u << ((unsigned char)s[0] & 7));
    return 0;
}

void trie_free(trie *tr) {
    free(tr->tok);
    pairmap_free(&tr->edges);
    memset(tr, 0, sizeof *tr);
}

int trie_match(const trie *tr, const char *text, size_t n, size_t i, size_t *end) {
    if (!tr->n_nodes) return -1;
    unsigned char b0 = (unsigned char)text[i];
    if (!(tr->first[b0 >> 3] & (1u << (b0 & 7)))) return -1;
    int node = 0, best = -1;
    for (size_t k = i; k < n; k++) {
        int32_t rank, child;
        if (!pairmap_get(&tr->edges, node, (unsigned char)text[k], &rank, &child)) break;
        node = child;
        if (tr->tok[node] >= 0) {
            best = tr->tok[node];
            *end = k + 1;
        }
    }
    return best;
}

/* ---- scratch ---- */

int scratch_init(enc_scratch *s, mtplx_err *err) {
    memset(s, 0, sizeof *s);
    s->md = pcre2_match_data_create(4, NULL);
    if (!s->md) return err_set(err, MTPLX_ENOMEM, "tokenizer: out of memory");
    return 0;
}

void scratch_free(enc_scratch *s) {
    if (s->md) pcre2_match_data_free(s->md);
    plist_free(&s->a);
    plist_free(&s->b);
    plist_free(&s->c);
    plist_free(&s->d);
    tbuf_free(&s->norm);
    tbuf_free(&s->tmp);
    free(s->seg_a); free(s->seg_b); free(s->seg_m);
    free(s->sym);
    free(s->cut);
    free(s->heap);
    free(s->ids);
    memset(s, 0, sizeof *s);
}

/* ---- added-token splitting ---- */

static uint32_t last_char(const char *s, size_t n) {
    if (!n) return 0;
    size_t k = n - 1;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    uint32_t cp = 0;
    utf8_decode((const unsigned char *)s + k, n - k, &cp);
    return cp;
}

static uint32_t first_char(const char *s, size_t n) {
    uint32_t cp = 0;
    if (n) utf8_decode((const unsigned char *)s, n, &cp);
    return cp;
}

typedef int (*piece_fn)(const tokenizer *t, const char *s, size_t n, bool at_origin, enc_scratch *sc, mtplx_err *err);

/* Split s[0..n) on the added tokens of tr (AddedVocabulary::find_matches): matched tokens go to
 * the output, the text between them to fn. */
static int split_added(const tokenizer *t, const trie *tr, const char *s, size_t n, bool at_origin, piece_fn fn,
                       enc_scratch *sc, mtplx_err *err) {
    if (!tr->n_nodes) return fn(t, s, n, at_origin, sc, err);
    size_t start_offset = 0, i = 0;
    int rc;
    while (i < n) {
        size_t end;
        int k = trie_match(tr, s, n, i, &end);
        if (k < 0) { i++; continue; }
        const added_token *a = &t->added[k];
        size_t start = i, stop = end;
        i = end;
        if (a->single_word) {
            bool start_space = start == 0 || !uc_is_alnum_word(last_char(s, start));
            bool stop_space = stop == n || !uc_is_alnum_word(first_char(s + stop, n - stop));
            if (!start_space || !stop_space) continue;
        }
        if (a->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t k2 = ns - 1;
                while (k2 > 0 && ((unsigned char)s[k2] & 0xC0) == 0x80) k2--;
                uint32_t cp = 0;
                utf8_decode((const unsigned char *)s + k2, ns - k2, &cp);
                if (!uc_is_whitespace(cp)) break;
                ns = k2;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (a->rstrip) {
            while (stop < n) {
                uint32_t cp = 0;
                int l = utf8_decode((const unsigned char *)s + stop, n - stop, &cp);
                if (!l || !uc_is_whitespace(cp)) break;
                stop += (size_t)l;
            }
        }
        if (start_offset < start && (rc = fn(t, s + start_offset, start - start_offset, at_origin && start_offset == 0, sc, err)))
            return rc;
        if (out_push(sc, a->id)) return err_set(err, MTPLX_ENOMEM, "tokenizer: out of memory");
        start_offset = stop;
    }
    if (start_offset < n) return fn(t, s + start_offset, n - start_offset, at_origin && start_offset == 0, sc, err);
    return 0;
}

/* Pre-tokenize one normalized piece and BPE every word. */
static int model_piece(const tokenizer *t, const char *s, size_t n, bool at_origin, enc_scratch *sc, mtplx_err *err) {
    if (!n) return 0;
    if (!t->pre) return bpe_encode_word(t, s, n, false, sc, err);
    if (t->fast_split) { /* every regex match and every gap between matches is a word */
        size_t start = 0, prev = 0;
        for (;;) {
            size_t ms, me;
            int r = tregex_next(t->fast_split, s, n, start, sc->md, &ms, &me, err);
            if (r < 0) return r;
            if (r == 0) break;
            if (me == ms) {
                if (ms >= n) break;
                uint32_t cp;
                int l = utf8_decode((const unsigned char *)s + ms, n - ms, &cp);
                start = ms + (size_t)(l ? l : 1);
                continue;
            }
            int rc = 0;
            if (ms > prev) rc = bpe_encode_word(t, s + prev, ms - prev, t->bytelevel_last, sc, err);
            if (!rc) rc = bpe_encode_word(t, s + ms, me - ms, t->bytelevel_last, sc, err);
            if (rc) return rc;
            prev = start = me;
        }
        return prev < n ? bpe_encode_word(t, s + prev, n - prev, t->bytelevel_last, sc, err) : 0;
    }
    piece_list in = {0}, out = {0};
    int rc = 0;
    if (tbuf_put(&in.text, s, n) || plist_push(&in, 0, n, at_origin)) rc = err_set(err, MTPLX_ENOMEM, "tokenizer: out of memory");
    if (!rc) rc = pretok_apply(t, t->pre, &in, &out, sc, err);
    for (int i = 0; i < out.n && !rc; i++)
        rc = bpe_encode_word(t, out.text.p + out.v[i].off, out.v[i].len, t->bytelevel_last, sc, err);
    plist_free(&in);
    plist_free(&out);
    return rc;
}

/* Normalize a raw piece, then split it on the normalized added tokens. */
static int raw_piece(const tokenizer *t, const char *s, size_t n, bool at_origin, enc_scratch *sc, mtplx_err *err) {
    if (!n) return 0;
    if (!t->norm) return split_added(t, &t->trie_norm, s, n, at_origin, model_piece, sc, err);
    tbuf nb = {0};
    bool shifted = false;
    int rc = normalizer_apply(t->norm, s, n, &nb, sc, &shifted, err);
    if (!rc) rc = split_added(t, &t->trie_norm, nb.p ? nb.p : "", nb.len, at_origin && !shifted, model_piece, sc, err);
    tbuf_free(&nb);
    return rc;
}

int tok_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, int *n, mtplx_err *err) {
    *ids = NULL;
    *n = 0;
    if (!t) return err_set(err, MTPLX_EINVAL, "tok_encode: no tokenizer");
    if (!text && len) return err_set(err, MTPLX_EINVAL, "tok_encode: NULL text");
    size_t bad = utf8_first_invalid((const unsigned char *)text, len);
    if (bad != len)
        return err_set(err, MTPLX_EINVAL, "tok_encode: invalid UTF-8 at byte offset %zu (byte 0x%02X)", bad,
                       (unsigned)(unsigned char)text[bad]);
    if (len > (size_t)INT32_MAX / 2) return err_set(err, MTPLX_EINVAL, "tok_encode: text of %zu bytes is too long", len);
    enc_scratch sc;
    int rc = scratch_init(&sc, err);
    if (rc) return rc;
    rc = split_added(t, &t->trie_raw, len ? text : "", len, true, raw_piece, &sc, err);
    if (!rc) {
        *ids = malloc(((size_t)sc.n_ids + 1) * sizeof **ids);
        if (!*ids) rc = err_set(err, MTPLX_ENOMEM, "tok_encode: out of memory");
        else {
            if (sc.n_ids) memcpy(*ids, sc.ids, (size_t)sc.n_ids * sizeof **ids);
            *n = sc.n_ids;
        }
    }
    scratch_free(&sc);
    return rc;
}
