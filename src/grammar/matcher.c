/* matcher.c — token masks over a vocabulary, per-sequence matcher state with rollback, and the
 * bounded-thinking prelude; see grammar.h.
 *
 * The mask of a state: the vocabulary's byte strings are sorted, so the ids sharing a prefix form
 * a contiguous range; a depth-first walk steps the automaton one byte per level and drops a whole
 * range as soon as its prefix kills every parse. Tokens that span several grammar symbols (`"},`)
 * or end inside a UTF-8 character are handled by the byte automaton itself. Masks are cached per
 * state (the serialized stack set), so a string's body or a repeated structure costs one walk. */
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "grammar_int.h"

struct grammar_vocab {
    int V;
    int n_sorted;          /* ids with text bytes (not special, not empty) */
    int32_t *sorted;       /* [n_sorted] those ids, by their bytes */
    char **bytes;          /* [V] owned copies (NULL: none) */
    int *len;              /* [V] */
    int max_len;           /* longest token in bytes */
};

static int cmp_ids_ctx(const void *a, const void *b, void *ctx) {
    const grammar_vocab *v = ctx;
    int x = *(const int32_t *)a, y = *(const int32_t *)b;
    int m = v->len[x] < v->len[y] ? v->len[x] : v->len[y];
    int c = memcmp(v->bytes[x], v->bytes[y], (size_t)m);
    if (c) return c;
    if (v->len[x] != v->len[y]) return v->len[x] < v->len[y] ? -1 : 1;
    return (x > y) - (x < y);
}

int grammar_vocab_from_bytes(const char *const *toks, const size_t *lens, const uint8_t *special, int n,
                             grammar_vocab **out, mtplx_err *err) {
    *out = NULL;
    if (n <= 0) return err_set(err, MTPLX_EINVAL, "grammar vocab: empty vocabulary");
    grammar_vocab *v = mem_zalloc(1, sizeof *v, "grammar vocab", err);
    if (!v) return MTPLX_ENOMEM;
    v->V = n;
    v->sorted = mem_alloc((size_t)n, sizeof *v->sorted, "grammar vocab", err);
    v->bytes = mem_zalloc((size_t)n, sizeof *v->bytes, "grammar vocab", err);
    v->len = mem_zalloc((size_t)n, sizeof *v->len, "grammar vocab", err);
    if (!v->sorted || !v->bytes || !v->len) {
        grammar_vocab_free(v);
        return MTPLX_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        if (!toks[i] || lens[i] == 0 || lens[i] > 4096 || (special && special[i])) continue;
        v->bytes[i] = malloc(lens[i]);
        if (!v->bytes[i]) {
            grammar_vocab_free(v);
            return err_set(err, MTPLX_ENOMEM, "grammar vocab: out of memory");
        }
        memcpy(v->bytes[i], toks[i], lens[i]);
        v->len[i] = (int)lens[i];
        if (v->len[i] > v->max_len) v->max_len = v->len[i];
        v->sorted[v->n_sorted++] = i;
    }
    qsort_r(v->sorted, (size_t)v->n_sorted, sizeof *v->sorted, cmp_ids_ctx, v);
    *out = v;
    return 0;
}

int grammar_vocab_new(const tokenizer *t, grammar_vocab **out, mtplx_err *err) {
    *out = NULL;
    int n = tok_vocab_size(t);
    const char **b = calloc((size_t)(n > 0 ? n : 1), sizeof *b);
    size_t *l = calloc((size_t)(n > 0 ? n : 1), sizeof *l);
    uint8_t *sp = calloc((size_t)(n > 0 ? n : 1), 1);
    int rc = 0;
    if (!b || !l || !sp) rc = err_set(err, MTPLX_ENOMEM, "grammar vocab: out of memory");
    int known = 0;
    for (int i = 0; !rc && i < n; i++) {
        known += tok_token_bytes(t, i, &b[i], &l[i]);
        sp[i] = (uint8_t)tok_is_special(t, i);
    }
    if (!rc && known == 0)
        rc = err_set(err, MTPLX_EUNSUPPORTED, "structured output needs a byte-level BPE tokenizer (token bytes unknown)");
    if (!rc) rc = grammar_vocab_from_bytes(b, l, sp, n, out, err);
    free(b);
    free(l);
    free(sp);
    return rc;
}

void grammar_vocab_free(grammar_vocab *v) {
    if (!v) return;
    for (int i = 0; v->bytes && i < v->V; i++) free(v->bytes[i]);
    free(v->bytes);
    free(v->len);
    free(v->sorted);
    free(v);
}

int grammar_vocab_size(const grammar_vocab *v) { return v->V; }

/* ---- the matcher ---- */

#define HIST 33 /* states kept for rollback: GEN_MAX_DEPTH drafts and then some */

enum { PH_THINK, PH_FORCE, PH_GRAMMAR, PH_DONE };

typedef struct {
    int phase;   /* PH_* */
    int count;   /* PH_THINK: thinking tokens so far; PH_FORCE: closing ids already forced */
    gset st;     /* PH_GRAMMAR: the automaton state */
} mstate;

typedef struct {
    uint64_t h;
    uint32_t klen;      /* 0 = empty slot */
    unsigned char *key; /* serialized state */
    uint32_t *bits;     /* [W] */
    int ended;          /* accepting, and no text token may follow */
} centry;

struct grammar_matcher {
    const grammar *g;
    const grammar_vocab *v;
    int W;                     /* bitset words */
    int32_t stop[16];
    int n_stop;
    int has_think;
    grammar_think think;
    int32_t close_ids[8];
    mstate *hist;              /* [HIST] ring: hist[cur] is the current state */
    int cur, n_hist;           /* n_hist: advances that rollback can undo */
    gset **level;              /* [v->max_len + 1] walk scratch */
    unsigned char *key;        /* [sizeof(gset)] serialization scratch */
    uint32_t *tmp;             /* [W] masks outside the cache (thinking, forced ids) */
    uint32_t *think_bits;      /* [W] every id but the stop ids */
    centry *cache;             /* [cache_slots] open addressing */
    int cache_slots, cache_used, cache_cap;
    grammar_stats stats;
};

static void gset_copy(gset *d, const gset *s) {
    d->n = s->n;
    for (int i = 0; i < s->n; i++) {
        d->s[i].n = s->s[i].n;
        memcpy(d->s[i].f, s->s[i].f, (size_t)s->s[i].n * sizeof(gframe));
    }
}

static void cache_clear(grammar_matcher *m) {
    for (int i = 0; i < m->cache_slots; i++) {
        free(m->cache[i].key);
        free(m->cache[i].bits);
    }
    memset(m->cache, 0, (size_t)m->cache_slots * sizeof *m->cache);
    m->cache_used = 0;
}

void grammar_matcher_reset(grammar_matcher *m) {
    mstate *s = &m->hist[0];
    m->cur = 0;
    m->n_hist = 0;
    s->count = 0;
    s->phase = m->has_think ? (m->think.budget > 0 ? PH_THINK : PH_FORCE) : PH_GRAMMAR;
    gset_init(m->g, &s->st);
}

int grammar_matcher_new(const grammar *g, const grammar_vocab *v, const int32_t *stop_ids, int n_stop,
                        const grammar_think *think, grammar_matcher **out, mtplx_err *err) {
    *out = NULL;
    if (n_stop < 0 || n_stop > 16) return err_set(err, MTPLX_EINVAL, "grammar: at most 16 stop ids");
    for (int i = 0; i < n_stop; i++)
        if (stop_ids[i] < 0 || stop_ids[i] >= v->V) return err_set(err, MTPLX_EINVAL, "grammar: stop id %d outside the vocabulary", stop_ids[i]);
    if (think) {
        if (think->budget < 0 || think->n_close < 1 || think->n_close > 8)
            return err_set(err, MTPLX_EINVAL, "grammar: thinking needs a budget >= 0 and 1..8 closing ids");
        for (int i = 0; i < think->n_close; i++)
            if (think->close_ids[i] < 0 || think->close_ids[i] >= v->V)
                return err_set(err, MTPLX_EINVAL, "grammar: closing id %d outside the vocabulary", think->close_ids[i]);
    }
    grammar_matcher *m = mem_zalloc(1, sizeof *m, "grammar matcher", err);
    if (!m) return MTPLX_ENOMEM;
    m->g = g;
    m->v = v;
    m->W = (v->V + 31) / 32;
    m->n_stop = n_stop;
    if (n_stop) memcpy(m->stop, stop_ids, (size_t)n_stop * sizeof *stop_ids);
    if (think) {
        m->has_think = 1;
        m->think = *think;
        memcpy(m->close_ids, think->close_ids, (size_t)think->n_close * sizeof(int32_t));
        m->think.close_ids = m->close_ids;
    }
    size_t bits_bytes = (size_t)m->W * 4;
    m->cache_cap = (int)((64u << 20) / (bits_bytes + 256));
    if (m->cache_cap > 4096) m->cache_cap = 4096;
    if (m->cache_cap < 16) m->cache_cap = 16;
    m->cache_slots = 2 * m->cache_cap;
    m->hist = mem_alloc(HIST, sizeof *m->hist, "grammar matcher history", err);
    m->level = mem_zalloc((size_t)v->max_len + 2, sizeof *m->level, "grammar matcher", err);
    m->key = mem_alloc(1, sizeof(gset) + 64, "grammar matcher", err);
    m->tmp = mem_alloc((size_t)m->W, sizeof(uint32_t), "grammar matcher", err);
    m->think_bits = mem_alloc((size_t)m->W, sizeof(uint32_t), "grammar matcher", err);
    m->cache = mem_zalloc((size_t)m->cache_slots, sizeof *m->cache, "grammar mask cache", err);
    if (!m->hist || !m->level || !m->key || !m->tmp || !m->think_bits || !m->cache) {
        grammar_matcher_free(m);
        return MTPLX_ENOMEM;
    }
    memset(m->think_bits, 0, bits_bytes);
    for (int i = 0; i < v->V; i++) m->think_bits[i >> 5] |= 1u << (i & 31);
    if (!(think && think->allow_stop))
        for (int i = 0; i < n_stop; i++) m->think_bits[stop_ids[i] >> 5] &= ~(1u << (stop_ids[i] & 31));
    grammar_matcher_reset(m);
    *out = m;
    return 0;
}

void grammar_matcher_free(grammar_matcher *m) {
    if (!m) return;
    if (m->cache) cache_clear(m);
    free(m->cache);
    if (m->level)
        for (int i = 0; i <= m->v->max_len + 1; i++) free(m->level[i]);
    free(m->level);
    free(m->hist);
    free(m->key);
    free(m->tmp);
    free(m->think_bits);
    free(m);
}

/* Set the bits of the ids in sorted[lo..hi) (all sharing their first pos bytes, which took the
 * automaton to state st) that the grammar allows, recursing one byte at a time. */
static int walk(grammar_matcher *m, int lo, int hi, int pos, const gset *st, uint32_t *bits, int *n_text) {
    const grammar_vocab *v = m->v;
    int i = lo;
    while (i < hi && v->len[v->sorted[i]] == pos) { /* ids that end here */
        int32_t id = v->sorted[i++];
        bits[id >> 5] |= 1u << (id & 31);
        (*n_text)++;
    }
    if (i >= hi) return 0;
    if (!m->level[pos + 1]) {
        m->level[pos + 1] = malloc(sizeof(gset));
        if (!m->level[pos + 1]) return MTPLX_ENOMEM;
    }
    gset *next = m->level[pos + 1];
    while (i < hi) {
        const int c = (unsigned char)v->bytes[v->sorted[i]][pos];
        int a = i + 1, b = hi; /* the end of the group with byte c at pos */
        while (a < b) {
            int mid = a + (b - a) / 2;
            if ((unsigned char)v->bytes[v->sorted[mid]][pos] <= c) a = mid + 1;
            else b = mid;
        }
        m->stats.steps++;
        if (gset_step(m->g, st, c, next)) {
            int rc = walk(m, i, a, pos + 1, next, bits, n_text);
            if (rc) return rc;
        }
        i = a;
    }
    return 0;
}

/* The cache entry of grammar state st, computed on a miss. NULL on allocation failure. */
static centry *mask_of(grammar_matcher *m, const gset *st, mtplx_err *err) {
    size_t kl = gset_serialize(st, m->key);
    uint64_t h = gr_hash(m->key, kl, GR_HASH_SEED);
    size_t slot = (size_t)(h % (uint64_t)m->cache_slots);
    for (;;) {
        centry *e = &m->cache[slot];
        if (!e->klen) break;
        if (e->h == h && e->klen == kl && !memcmp(e->key, m->key, kl)) return e;
        slot = (slot + 1) % (size_t)m->cache_slots;
    }
    if (m->cache_used >= m->cache_cap) {
        cache_clear(m);
        slot = (size_t)(h % (uint64_t)m->cache_slots);
    }
    m->stats.computed++;
    centry *e = &m->cache[slot];
    e->key = malloc(kl);
    e->bits = calloc((size_t)m->W, sizeof(uint32_t));
    if (!e->key || !e->bits) {
        free(e->key);
        free(e->bits);
        e->key = NULL;
        e->bits = NULL;
        err_set(err, MTPLX_ENOMEM, "grammar: out of memory for a mask");
        return NULL;
    }
    memcpy(e->key, m->key, kl);
    int n_text = 0;
    if (walk(m, 0, m->v->n_sorted, 0, st, e->bits, &n_text)) {
        free(e->key);
        free(e->bits);
        e->key = NULL;
        e->bits = NULL;
        err_set(err, MTPLX_ENOMEM, "grammar: out of memory for a mask");
        return NULL;
    }
    const int acc = gset_accepting(m->g, st);
    if (acc)
        for (int i = 0; i < m->n_stop; i++) e->bits[m->stop[i] >> 5] |= 1u << (m->stop[i] & 31);
    e->ended = acc && n_text == 0;
    e->h = h;
    e->klen = (uint32_t)kl;
    m->cache_used++;
    return e;
}

const uint32_t *grammar_matcher_mask(grammar_matcher *m, mtplx_err *err) {
    const mstate *s = &m->hist[m->cur];
    m->stats.masks++;
    switch (s->phase) {
    case PH_THINK: return m->think_bits;
    case PH_FORCE: {
        memset(m->tmp, 0, (size_t)m->W * 4);
        int32_t id = m->close_ids[s->count];
        m->tmp[id >> 5] |= 1u << (id & 31);
        return m->tmp;
    }
    case PH_GRAMMAR: {
        centry *e = mask_of(m, &s->st, err);
        return e ? e->bits : NULL;
    }
    default:
        memset(m->tmp, 0, (size_t)m->W * 4);
        return m->tmp;
    }
}

static int is_stop(const grammar_matcher *m, int32_t tok) {
    for (int i = 0; i < m->n_stop; i++)
        if (m->stop[i] == tok) return 1;
    return 0;
}

/* Next state of s after tok into d. Returns 0 or EINVAL (tok not allowed). */
static int next_state(grammar_matcher *m, const mstate *s, int32_t tok, mstate *d, mtplx_err *err) {
    d->phase = s->phase;
    d->count = s->count;
    d->st.n = 0;
    switch (s->phase) {
    case PH_THINK:
        if (is_stop(m, tok)) {
            if (!m->think.allow_stop) return err_set(err, MTPLX_EINVAL, "grammar: a stop id inside the thinking block");
            d->phase = PH_DONE;
            return 0;
        }
        gset_copy(&d->st, &s->st);
        if (tok == m->close_ids[0]) d->phase = PH_GRAMMAR, d->count = 0;
        else if (++d->count >= m->think.budget) d->phase = PH_FORCE, d->count = 0;
        return 0;
    case PH_FORCE:
        if (tok != m->close_ids[s->count]) return err_set(err, MTPLX_EINVAL, "grammar: token %d is not the forced closing tag", tok);
        gset_copy(&d->st, &s->st);
        if (++d->count == m->think.n_close) d->phase = PH_GRAMMAR, d->count = 0;
        return 0;
    case PH_GRAMMAR: {
        if (is_stop(m, tok)) {
            if (!gset_accepting(m->g, &s->st)) return err_set(err, MTPLX_EINVAL, "grammar: stop id %d before the output is complete", tok);
            d->phase = PH_DONE;
            return 0;
        }
        const grammar_vocab *v = m->v;
        if (tok < 0 || tok >= v->V || !v->bytes[tok])
            return err_set(err, MTPLX_EINVAL, "grammar: token %d has no text the grammar can take", tok);
        static __thread gset tmp;
        const gset *cur = &s->st;
        for (int i = 0; i < v->len[tok]; i++) {
            gset *dst = (i % 2 == v->len[tok] % 2) ? &tmp : &d->st; /* the last step lands in d->st */
            if (!gset_step(m->g, cur, (unsigned char)v->bytes[tok][i], dst))
                return err_set(err, MTPLX_EINVAL, "grammar: token %d is not allowed here", tok);
            cur = dst;
        }
        return 0;
    }
    default: return err_set(err, MTPLX_EINVAL, "grammar: the output is already complete");
    }
}

int grammar_matcher_advance(grammar_matcher *m, int32_t tok, mtplx_err *err) {
    int nx = (m->cur + 1) % HIST;
    int rc = next_state(m, &m->hist[m->cur], tok, &m->hist[nx], err);
    if (rc) return rc;
    m->cur = nx;
    if (m->n_hist < HIST - 1) m->n_hist++;
    return 0;
}

void grammar_matcher_rollback(grammar_matcher *m, int n) {
    if (n > m->n_hist) n = m->n_hist;
    m->cur = ((m->cur - n) % HIST + HIST) % HIST;
    m->n_hist -= n;
}

int grammar_matcher_history(const grammar_matcher *m) { return m->n_hist; }

int grammar_matcher_ended(grammar_matcher *m) {
    const mstate *s = &m->hist[m->cur];
    if (s->phase == PH_DONE) return 1;
    if (s->phase != PH_GRAMMAR) return 0;
    mtplx_err e;
    centry *c = mask_of(m, &s->st, &e);
    return c ? c->ended : 0;
}

int grammar_matcher_vocab_size(const grammar_matcher *m) { return m->v->V; }

int grammar_matcher_thinking(const grammar_matcher *m) {
    int p = m->hist[m->cur].phase;
    return p == PH_THINK || p == PH_FORCE;
}

grammar_stats grammar_matcher_stats(const grammar_matcher *m) { return m->stats; }
