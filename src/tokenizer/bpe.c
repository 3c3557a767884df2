/* bpe.c — the BPE model: one pre-tokenized word -> token ids.
 *
 * Follows the `tokenizers` library exactly: every character becomes a symbol (its vocab id; else
 * its bytes as <0xNN> tokens with byte_fallback; else the unk token, fused when fuse_unk; else it
 * is dropped), then merges are applied lowest rank first, leftmost first among equal ranks, with a
 * binary heap of candidate pairs and a doubly linked symbol list (O(n log n) per word). Results of
 * words shorter than CACHE_MAX_WORD bytes are kept in a word cache shared by all callers. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#define CACHE_MAX_WORD 256        /* bytes; longer words are not cached */
#define CACHE_MAX_ENTRIES 200000  /* cache is emptied when it reaches this many words ... */
#define CACHE_MAX_IDS (8u << 20)  /* ... or this many stored ids */

/* Merge candidates are (rank << 32 | pos) in a 4-ary min-heap: the smallest rank first, the
 * leftmost position among equal ranks, as in tokenizers' Word::merge_all. A popped candidate is
 * stale when the pair now at pos has another rank (the pair changed); that is the same test as
 * tokenizers' "same new id" check, because a changed pair always yields a longer token. */
typedef struct {
    uint64_t *v;
    int n, cap;
} heap;

static void sift_down(heap *h, int i) {
    uint64_t x = h->v[i];
    for (;;) {
        int c = 4 * i + 1;
        if (c >= h->n) break;
        int best = c;
        int end = c + 4 < h->n ? c + 4 : h->n;
        for (int k = c + 1; k < end; k++)
            if (h->v[k] < h->v[best]) best = k;
        if (h->v[best] >= x) break;
        h->v[i] = h->v[best];
        i = best;
    }
    h->v[i] = x;
}

static int heap_push(heap *h, uint64_t x) {
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 64;
        uint64_t *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (!v) return MTPLX_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    int i = h->n++;
    while (i > 0) {
        int p = (i - 1) / 4;
        if (h->v[p] <= x) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = x;
    return 0;
}

static uint64_t heap_pop(heap *h) {
    uint64_t top = h->v[0];
    h->v[0] = h->v[--h->n];
    if (h->n) sift_down(h, 0);
    return top;
}

#define CAND(rank, pos) (((uint64_t)(uint32_t)(rank) << 32) | (uint32_t)(pos))

/* One symbol of the word: a token id and its neighbours in the linked list (16 bytes, so a
 * merge touches one cache line per symbol). */
struct bpe_sym {
    int32_t id;
    int32_t prev, next;  /* indices, -1 at the ends */
    int32_t len;         /* bytes of the word it covers; 0 once merged into its left neighbour */
};

static int ensure_syms(enc_scratch *s, int n) {
    if (n <= s->sym_cap) return 0;
    int cap = s->sym_cap ? s->sym_cap : 64;
    while (cap < n) cap *= 2;
    struct bpe_sym *v = realloc(s->sym, (size_t)cap * sizeof *v);
    if (!v) return MTPLX_ENOMEM;
    s->sym = v;
    s->sym_cap = cap;
    return 0;
}

int out_push(enc_scratch *s, int32_t id) {
    if (s->n_ids == s->cap_ids) {
        int cap = s->cap_ids ? s->cap_ids * 2 : 256;
        int32_t *v = realloc(s->ids, (size_t)cap * sizeof *v);
        if (!v) return MTPLX_ENOMEM;
        s->ids = v;
        s->cap_ids = cap;
    }
    s->ids[s->n_ids++] = id;
    return 0;
}

/* ---- word cache ---- */

static bool cache_get(const tokenizer *t, const char *w, size_t n, enc_scratch *s, int *rc) {
    word_cache *c = (word_cache *)&t->cache;
    *rc = 0;
    pthread_mutex_lock(&c->mu);
    int32_t e = strmap_get(&c->map, w, n);
    if (e >= 0) {
        for (int i = 0; i < c->ent_len[e] && !*rc; i++) *rc = out_push(s, c->pool[c->ent_off[e] + i]);
    }
    pthread_mutex_unlock(&c->mu);
    return e >= 0;
}

static void cache_reset(word_cache *c) {
    strmap_free(&c->map);
    strmap_init(&c->map, 4096);
    c->n_ent = 0;
    c->pool_len = 0;
}

static void cache_put(const tokenizer *t, const char *w, size_t n, const int32_t *ids, int k) {
    word_cache *c = (word_cache *)&t->cache;
    pthread_mutex_lock(&c->mu);
    if (c->n_ent >= CACHE_MAX_ENTRIES || c->pool_len + (size_t)k > CACHE_MAX_IDS) cache_reset(c);
    if (!c->map.cap) goto out;
    if (c->n_ent == c->cap_ent) {
        int cap = c->cap_ent ? c->cap_ent * 2 : 1024;
        int32_t *o = realloc(c->ent_off, (size_t)cap * sizeof *o);
        if (!o) goto out;
        c->ent_off = o;
        int32_t *l = realloc(c->ent_len, (size_t)cap * sizeof *l);
        if (!l) goto out;
        c->ent_len = l;
        c->cap_ent = cap;
    }
    if (c->pool_len + (size_t)k > c->pool_cap) {
        size_t cap = c->pool_cap ? c->pool_cap : 4096;
        while (cap < c->pool_len + (size_t)k) cap *= 2;
        int32_t *p = realloc(c->pool, cap * sizeof *p);
        if (!p) goto out;
        c->pool = p;
        c->pool_cap = cap;
    }
    if (strmap_put(&c->map, w, n, c->n_ent)) goto out;
    if (k) memcpy(c->pool + c->pool_len, ids, (size_t)k * sizeof *ids);
    c->ent_off[c->n_ent] = (int32_t)c->pool_len;
    c->ent_len[c->n_ent] = k;
    c->n_ent++;
    c->pool_len += (size_t)k;
out:
    pthread_mutex_unlock(&c->mu);
}

/* ---- symbols ---- */

static int add_sym(enc_scratch *s, int *n, int32_t id, int32_t len) {
    if (ensure_syms(s, *n + 1)) return MTPLX_ENOMEM;
    s->sym[*n].id = id;
    s->sym[*n].len = len;
    (*n)++;
    return 0;
}

/* One character (or byte-level byte) that is not in the vocab: byte fallback, else unk (fused
 * when fuse_unk), else nothing. *unk carries a pending unk run between calls. */
static int unknown_char(const tokenizer *t, const char *cs, size_t cl, int32_t byte_len, enc_scratch *s, int *n,
                        int32_t *unk_len) {
    if (t->byte_fallback) {
        bool all = true;
        for (size_t i = 0; i < cl; i++)
            if (t->byte_fallback_id[(unsigned char)cs[i]] < 0) { all = false; break; }
        if (all) {
            if (*unk_len) { if (add_sym(s, n, t->unk_id, *unk_len)) return MTPLX_ENOMEM; *unk_len = 0; }
            for (size_t i = 0; i < cl; i++)
                if (add_sym(s, n, t->byte_fallback_id[(unsigned char)cs[i]], 1)) return MTPLX_ENOMEM;
            return 0;
        }
    }
    if (t->unk_id >= 0) {
        if (*unk_len && t->fuse_unk) *unk_len += byte_len;
        else {
            if (*unk_len && add_sym(s, n, t->unk_id, *unk_len)) return MTPLX_ENOMEM;
            *unk_len = byte_len;
        }
    }
    return 0;
}

static int known_char(const tokenizer *t, int32_t id, int32_t byte_len, enc_scratch *s, int *n, int32_t *unk_len) {
    if (*unk_len) {
        if (add_sym(s, n, t->unk_id, *unk_len)) return MTPLX_ENOMEM;
        *unk_len = 0;
    }
    return add_sym(s, n, id, byte_len);
}

/* Record a cut before the symbol about to be added when the previous symbol is a plain character
 * that can never merge with this one (tokenizer.joinable). */
static int note_char(const tokenizer *t, enc_scratch *s, int nsym, uint32_t cp, uint32_t *prev_cp, bool *prev_plain) {
    int32_t r, o;
    if (*prev_plain && t->joinable.n && !pairmap_get(&t->joinable, (int32_t)*prev_cp, (int32_t)cp, &r, &o)) {
        if (s->n_cut == s->cut_cap) {
            int cap = s->cut_cap ? s->cut_cap * 2 : 256;
            int32_t *v = realloc(s->cut, (size_t)cap * sizeof *v);
            if (!v) return MTPLX_ENOMEM;
            s->cut = v;
            s->cut_cap = cap;
        }
        s->cut[s->n_cut++] = nsym;
    }
    *prev_cp = cp;
    *prev_plain = true;
    return 0;
}

static int build_symbols(const tokenizer *t, const char *w, size_t n, bool raw, enc_scratch *s, int *nsym) {
    *nsym = 0;
    int32_t unk_len = 0;
    uint32_t prev_cp = 0;
    bool prev_plain = false;
    s->n_cut = 0;
    if (raw) {
        for (size_t i = 0; i < n; i++) {
            unsigned char b = (unsigned char)w[i];
            int32_t id = t->byte_sym[b];
            int rc;
            if (id >= 0) {
                uint32_t cp = 0;
                utf8_decode((const unsigned char *)t->byte_char[b], t->byte_char_len[b], &cp);
                rc = unk_len ? 0 : note_char(t, s, *nsym, cp, &prev_cp, &prev_plain);
                if (!rc) rc = known_char(t, id, 1, s, nsym, &unk_len);
            } else {
                int before = *nsym;
                rc = unknown_char(t, t->byte_char[b], t->byte_char_len[b], 1, s, nsym, &unk_len);
                if (*nsym != before || unk_len) prev_plain = false;
            }
            if (rc) return rc;
        }
    } else {
        const unsigned char *u = (const unsigned char *)w;
        size_t i = 0;
        char tmp[512];
        while (i < n) {
            uint32_t cp;
            int l = utf8_decode(u + i, n - i, &cp);
            if (!l) l = 1;
            bool first = i == 0, last = i + (size_t)l >= n;
            const char *cs = w + i;
            size_t cl = (size_t)l;
            size_t pl = (!first && t->cont_prefix) ? strlen(t->cont_prefix) : 0;
            size_t sl = (last && t->end_suffix) ? strlen(t->end_suffix) : 0;
            if (pl || sl) {
                if (pl + cl + sl > sizeof tmp) return MTPLX_EINVAL;
                memcpy(tmp, t->cont_prefix ? t->cont_prefix : "", pl);
                memcpy(tmp + pl, cs, cl);
                memcpy(tmp + pl + cl, t->end_suffix ? t->end_suffix : "", sl);
                cs = tmp;
                cl = pl + cl + sl;
            }
            int32_t id = strmap_get(&t->model_map, cs, cl);
            int rc;
            if (id >= 0) {
                rc = (unk_len || pl || sl) ? 0 : note_char(t, s, *nsym, cp, &prev_cp, &prev_plain);
                if (!rc) rc = known_char(t, id, l, s, nsym, &unk_len);
            } else {
                int before = *nsym;
                rc = unknown_char(t, cs, cl, l, s, nsym, &unk_len);
                if (*nsym != before || unk_len) prev_plain = false;
            }
            if (rc) return rc;
            i += (size_t)l;
        }
    }
    if (unk_len && add_sym(s, nsym, t->unk_id, unk_len)) return MTPLX_ENOMEM;
    return 0;
}

/* Merge the n symbols at y (a whole word or one segment between cuts). */
static int merge_all(const tokenizer *t, enc_scratch *s, struct bpe_sym *y, int n) {
    for (int i = 0; i < n; i++) {
        y[i].prev = i - 1;
        y[i].next = i + 1 < n ? i + 1 : -1;
    }
    heap h = {s->heap, 0, s->heap_cap};
    if (n > h.cap) {
        uint64_t *v = realloc(h.v, (size_t)n * sizeof *v);
        if (!v) return MTPLX_ENOMEM;
        h.v = v;
        h.cap = n;
    }
    int32_t rank, out;
    for (int i = 0; i + 1 < n; i++)
        if (pairmap_get(&t->merges, y[i].id, y[i + 1].id, &rank, &out)) h.v[h.n++] = CAND(rank, i);
    if (h.n > 1)
        for (int i = (h.n - 2) / 4; i >= 0; i--) sift_down(&h, i); /* heapify */
    int rc = 0;
    while (h.n && !rc) {
        uint64_t top = heap_pop(&h);
        int p = (int)(uint32_t)top;
        if (!y[p].len) continue;
        int nx = y[p].next;
        if (nx < 0) continue;
        if (!pairmap_get(&t->merges, y[p].id, y[nx].id, &rank, &out) || (uint32_t)rank != (uint32_t)(top >> 32))
            continue;
        y[p].id = out;
        y[p].len += y[nx].len;
        y[nx].len = 0;
        int nn = y[nx].next;
        y[p].next = nn;
        if (nn >= 0) y[nn].prev = p;
        int pv = y[p].prev;
        if (pv >= 0 && pairmap_get(&t->merges, y[pv].id, y[p].id, &rank, &out)) rc = heap_push(&h, CAND(rank, pv));
        if (!rc && nn >= 0 && pairmap_get(&t->merges, y[p].id, y[nn].id, &rank, &out)) rc = heap_push(&h, CAND(rank, p));
    }
    s->heap = h.v;
    s->heap_cap = h.cap;
    return rc;
}

/* Encode one word w[0..n) and append its ids to s->ids. raw: w is raw bytes of a byte-level
 * tokenizer (see tokenizer.bytelevel_last); otherwise w is the text the vocab is written in.
 * Returns 0 or an error code (err set). */
int bpe_encode_word(const tokenizer *t, const char *w, size_t n, bool raw, enc_scratch *s, mtplx_err *err) {
    if (!n) return 0;
    if (t->ignore_merges) {
        int32_t id;
        if (raw) {
            s->tmp.len = 0;
            for (size_t i = 0; i < n; i++)
                if (tbuf_put(&s->tmp, t->byte_char[(unsigned char)w[i]], t->byte_char_len[(unsigned char)w[i]]))
                    return err_set(err, MTPLX_ENOMEM, "bpe: out of memory");
            id = strmap_get(&t->model_map, s->tmp.p, s->tmp.len);
        } else id = strmap_get(&t->model_map, w, n);
        if (id >= 0) return out_push(s, id) ? err_set(err, MTPLX_ENOMEM, "bpe: out of memory") : 0;
    }
    int rc;
    bool cacheable = n < CACHE_MAX_WORD;
    if (cacheable && cache_get(t, w, n, s, &rc)) return rc ? err_set(err, MTPLX_ENOMEM, "bpe: out of memory") : 0;
    int nsym;
    rc = build_symbols(t, w, n, raw, s, &nsym);
    if (rc == MTPLX_EINVAL) return err_set(err, MTPLX_EINVAL, "bpe: subword prefix/suffix too long");
    if (!rc) {
        if (s->n_cut && nsym > 64) { /* independent segments: same merges, far better locality */
            int start = 0;
            for (int k = 0; k <= s->n_cut && !rc; k++) {
                int end = k < s->n_cut ? s->cut[k] : nsym;
                if (end > start) rc = merge_all(t, s, s->sym + start, end - start);
                start = end;
            }
        } else rc = merge_all(t, s, s->sym, nsym);
    }
    if (rc) return err_set(err, MTPLX_ENOMEM, "bpe: out of memory");
    int first = s->n_ids;
    for (int i = 0; i < nsym; i++)
        if (s->sym[i].len && out_push(s, s->sym[i].id)) return err_set(err, MTPLX_ENOMEM, "bpe: out of memory");
    /* a word may merge to no ids at all (every symbol empty): then s->ids can still be NULL */
    if (cacheable) cache_put(t, w, n, s->n_ids > first ? s->ids + first : NULL, s->n_ids - first);
    return 0;
}
