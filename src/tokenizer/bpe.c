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

typedef struct {
    uint32_t rank, pos;
    int32_t out;
} merge_cand;

static inline bool cand_less(merge_cand a, merge_cand b) {
    return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos;
}

typedef struct {
    merge_cand *v;
    int n, cap;
} heap;

static int heap_push(heap *h, merge_cand c) {
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 64;
        merge_cand *v = realloc(h->v, (size_t)cap * sizeof *v);
        if (!v) return MTPLX_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    int i = h->n++;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!cand_less(c, h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
    return 0;
}

static merge_cand heap_pop(heap *h) {
    merge_cand top = h->v[0], last = h->v[--h->n];
    int i = 0;
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        merge_cand best = last;
        if (l < h->n && cand_less(h->v[l], best)) { m = l; best = h->v[l]; }
        if (r < h->n && cand_less(h->v[r], best)) { m = r; best = h->v[r]; }
        if (m == i) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int ensure_syms(enc_scratch *s, int n) {
    if (n <= s->sym_cap) return 0;
    int cap = s->sym_cap ? s->sym_cap : 64;
    while (cap < n) cap *= 2;
    int32_t *a = realloc(s->sym_id, (size_t)cap * sizeof *a);
    if (!a) return MTPLX_ENOMEM;
    s->sym_id = a;
    int32_t *b = realloc(s->sym_prev, (size_t)cap * sizeof *b);
    if (!b) return MTPLX_ENOMEM;
    s->sym_prev = b;
    int32_t *c = realloc(s->sym_next, (size_t)cap * sizeof *c);
    if (!c) return MTPLX_ENOMEM;
    s->sym_next = c;
    int32_t *d = realloc(s->sym_len, (size_t)cap * sizeof *d);
    if (!d) return MTPLX_ENOMEM;
    s->sym_len = d;
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
    s->sym_id[*n] = id;
    s->sym_len[*n] = len;
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

static int build_symbols(const tokenizer *t, const char *w, size_t n, bool raw, enc_scratch *s, int *nsym) {
    *nsym = 0;
    int32_t unk_len = 0;
    if (raw) {
        for (size_t i = 0; i < n; i++) {
            unsigned char b = (unsigned char)w[i];
            int32_t id = t->byte_sym[b];
            int rc = id >= 0 ? known_char(t, id, 1, s, nsym, &unk_len)
                             : unknown_char(t, t->byte_char[b], t->byte_char_len[b], 1, s, nsym, &unk_len);
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
            int rc = id >= 0 ? known_char(t, id, l, s, nsym, &unk_len) : unknown_char(t, cs, cl, l, s, nsym, &unk_len);
            if (rc) return rc;
            i += (size_t)l;
        }
    }
    if (unk_len && add_sym(s, nsym, t->unk_id, unk_len)) return MTPLX_ENOMEM;
    return 0;
}

static int merge_all(const tokenizer *t, enc_scratch *s, int n) {
    for (int i = 0; i < n; i++) {
        s->sym_prev[i] = i - 1;
        s->sym_next[i] = i + 1 < n ? i + 1 : -1;
    }
    heap h = {(merge_cand *)s->heap, 0, s->heap_cap};
    int rc = 0;
    for (int i = 0; i + 1 < n && !rc; i++) {
        int32_t rank, out;
        if (pairmap_get(&t->merges, s->sym_id[i], s->sym_id[i + 1], &rank, &out))
            rc = heap_push(&h, (merge_cand){(uint32_t)rank, (uint32_t)i, out});
    }
    while (h.n && !rc) {
        merge_cand top = heap_pop(&h);
        int p = (int)top.pos;
        if (!s->sym_len[p]) continue;
        int nx = s->sym_next[p];
        if (nx < 0) continue;
        int32_t rank, out;
        if (!pairmap_get(&t->merges, s->sym_id[p], s->sym_id[nx], &rank, &out) || out != top.out) continue;
        s->sym_id[p] = top.out;
        s->sym_len[p] += s->sym_len[nx];
        s->sym_len[nx] = 0;
        int nn = s->sym_next[nx];
        s->sym_next[p] = nn;
        if (nn >= 0) s->sym_prev[nn] = p;
        int pv = s->sym_prev[p];
        if (pv >= 0 && pairmap_get(&t->merges, s->sym_id[pv], s->sym_id[p], &rank, &out))
            rc = heap_push(&h, (merge_cand){(uint32_t)rank, (uint32_t)pv, out});
        if (!rc && nn >= 0 && pairmap_get(&t->merges, s->sym_id[p], s->sym_id[nn], &rank, &out))
            rc = heap_push(&h, (merge_cand){(uint32_t)rank, (uint32_t)p, out});
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
    if (!rc) rc = merge_all(t, s, nsym);
    if (rc) return err_set(err, MTPLX_ENOMEM, "bpe: out of memory");
    int first = s->n_ids;
    for (int i = 0; i < nsym; i++)
        if (s->sym_len[i] && out_push(s, s->sym_id[i])) return err_set(err, MTPLX_ENOMEM, "bpe: out of memory");
    if (cacheable) cache_put(t, w, n, s->ids + first, s->n_ids - first);
    return 0;
}
