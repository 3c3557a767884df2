/* prefix_cache.c — checkpoints of prefilled sequences, keyed by their tokens (prefix_cache.h,
 * docs/prefix-cache.md).
 *
 * Entries live in an array; a lookup hashes every prefix of the prompt once (hp[i] = hash of
 * tokens [0, i)), keeps the entries whose (L, hash) match and whose tokens compare equal, and
 * restores the deepest. Least recently used entries go first when the RAM budget or the
 * scheduler's page budget needs room. The pages an entry references are counted per page
 * (cache_ref), so the pages only the cache holds — the ones eviction frees — are known exactly. */
#include "prefix_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "prefix_disk.h"

typedef struct {
    int L;              /* positions */
    uint64_t hash;      /* prefix_hash of tokens [0, L) */
    int32_t *tokens;    /* [L] */
    model_snap *snap;
    float *hidden;      /* [H] trunk hidden at L - 1 when the snapshot holds an MTP history, else NULL */
    uint64_t used;      /* clock of the last store or restore (LRU) */
    size_t bytes;       /* own memory: GDN copy + tokens + hidden */
    int on_disk;        /* 1: written (or queued) to the disk tier */
    int marked;         /* 1: prefix_cache_persist asked for it on disk; prefix_cache_persist_marked writes it */
} pc_entry;

struct prefix_cache {
    const mtplx_model *m;
    seq_pool *pool;
    int H;
    int spacing;
    size_t budget;
    size_t snap_bytes;       /* model_snap_state_bytes */
    int n_pages;             /* pages of the pool */
    int32_t *cache_ref[2];   /* [n_pages] references the entries hold on each trunk / MTP page */
    int32_t *lent[2];        /* [n_pages] leases out on each trunk / MTP page */
    int pages_held;          /* pages with cache_ref > 0 */
    pc_entry *e;             /* [cap] */
    int n, cap;
    uint64_t clock;
    size_t bytes;
    uint64_t lookups, hits, prompt_tokens, cached_tokens, evictions, stores;
    prefix_disk *disk;       /* the disk tier, or NULL */
    int had_disk;            /* a disk tier was asked for */
    pthread_mutex_t mu;
};

int prefix_cache_spacing_rule(const mtplx_model *m) {
    int P = model_kv_page_size();
    size_t per_token = seq_pool_page_bytes(m) / (size_t)P;
    size_t snap = model_snap_state_bytes(m);
    long s = per_token ? (long)((snap + per_token - 1) / per_token) : 4096;
    s = (s + P - 1) / P * P;
    if (s < 64) s = 64;
    if (s > 4096) s = 4096;
    return (int)s;
}

int prefix_cache_new(const mtplx_model *m, seq_pool *pool, const prefix_cache_config *c, prefix_cache **out,
                     mtplx_err *err) {
    *out = NULL;
    prefix_cache *pc = mem_zalloc(1, sizeof *pc, "prefix cache", err);
    if (!pc) return MTPLX_ENOMEM;
    pc->m = m;
    pc->pool = pool;
    pc->H = model_config_of(m)->hidden_size;
    pc->spacing = c && c->spacing > 0 ? c->spacing : prefix_cache_spacing_rule(m);
    pc->budget = c && c->ram_bytes ? c->ram_bytes : PREFIX_CACHE_DEFAULT_RAM;
    pc->snap_bytes = model_snap_state_bytes(m);
    int used;
    seq_pool_pages(pool, &used, &pc->n_pages);
    pc->cache_ref[0] = mem_zalloc((size_t)pc->n_pages, sizeof(int32_t), "prefix cache page counts", err);
    pc->cache_ref[1] = mem_zalloc((size_t)pc->n_pages, sizeof(int32_t), "prefix cache page counts", err);
    pc->lent[0] = mem_zalloc((size_t)pc->n_pages, sizeof(int32_t), "prefix cache page counts", err);
    pc->lent[1] = mem_zalloc((size_t)pc->n_pages, sizeof(int32_t), "prefix cache page counts", err);
    if (!pc->cache_ref[0] || !pc->cache_ref[1] || !pc->lent[0] || !pc->lent[1]) {
        for (int k = 0; k < 2; k++) free(pc->cache_ref[k]), free(pc->lent[k]);
        free(pc);
        return MTPLX_ENOMEM;
    }
    pthread_mutex_init(&pc->mu, NULL);
    if (c && c->disk_dir) {
        unsigned char fp[32];
        model_snap_fingerprint(m, fp);
        mtplx_err e = {0};
        pc->had_disk = 1;
        if (prefix_disk_open(c->disk_dir, c->disk_bytes, fp, &pc->disk, &e))
            fprintf(stderr, "mtplx: prefix cache: no disk tier (%s); serving from RAM only\n", e.msg);
    }
    *out = pc;
    return 0;
}

/* Serialise snap (attached), keyed by tokens[0, L) with hash h, into the disk tier's write queue.
 * Called with mu and the model held; the file is written by the tier's thread. */
static void spill(prefix_cache *pc, const model_snap *snap, const int32_t *tokens, uint64_t h, const float *hidden) {
    int L = model_snap_len(snap), ml = model_snap_mtp_len(snap);
    if (!hidden || ml != L - 1) ml = -1, hidden = NULL; /* an MTP history is usable only complete, with its hidden */
    size_t bytes = model_snap_blob_bytes(pc->m, L, ml);
    void *blob = malloc(bytes ? bytes : 1);
    mtplx_err e = {0};
    if (!blob || model_snap_write_blob(snap, ml >= 0, blob, &e)) {
        free(blob);
        return;
    }
    prefix_disk_put(pc->disk, tokens, L, h, ml, hidden, pc->H, blob, bytes);
}

/* Before evicting entry i from RAM: keep it on disk when there is a tier. */
static void spill_entry(prefix_cache *pc, int i) {
    pc_entry *x = &pc->e[i];
    if (!pc->disk || x->on_disk) return;
    x->on_disk = 1;
    spill(pc, x->snap, x->tokens, x->hash, x->hidden);
}

static void entry_drop(prefix_cache *pc, int i) {
    pc_entry *x = &pc->e[i];
    for (int mtp = 0; mtp < 2; mtp++) {
        int n;
        const int32_t *ids = model_snap_pages(x->snap, mtp, &n);
        for (int k = 0; k < n; k++)
            if (--pc->cache_ref[mtp][ids[k]] == 0 && !mtp) pc->pages_held--;
    }
    model_snap_free(x->snap);
    free(x->tokens);
    free(x->hidden);
    pc->bytes -= x->bytes;
    pc->e[i] = pc->e[--pc->n];
}

void prefix_cache_free(prefix_cache *pc) {
    if (!pc) return;
    prefix_cache_persist_marked(pc);
    prefix_disk_close(pc->disk); /* finishes the queued writes */
    while (pc->n) entry_drop(pc, pc->n - 1);
    free(pc->e);
    for (int k = 0; k < 2; k++) free(pc->cache_ref[k]), free(pc->lent[k]);
    pthread_mutex_destroy(&pc->mu);
    free(pc);
}

int prefix_cache_spacing(const prefix_cache *pc) { return pc->spacing; }

/* FNV-1a over token ids, extended one token at a time. */
#define HASH_SEED 1469598103934665603ULL
static uint64_t hash_step(uint64_t h, int32_t t) {
    uint32_t u = (uint32_t)t;
    for (int b = 0; b < 4; b++) {
        h ^= (u >> (8 * b)) & 0xff;
        h *= 1099511628211ULL;
    }
    return h;
}

static uint64_t prefix_hash(const int32_t *t, int n) {
    uint64_t h = HASH_SEED;
    for (int i = 0; i < n; i++) h = hash_step(h, t[i]);
    return h;
}

/* The entry for exactly tokens [0, L) with hash h, or -1. Called with mu held. */
static int find_exact(prefix_cache *pc, const int32_t *tokens, int L, uint64_t h) {
    for (int i = 0; i < pc->n; i++)
        if (pc->e[i].L == L && pc->e[i].hash == h && !memcmp(pc->e[i].tokens, tokens, sizeof *tokens * (size_t)L))
            return i;
    return -1;
}

/* Pages the cache accounts for: referenced by an entry or lent, the larger count of the two pools.
 * Called with mu held. */
static int pages_counted(const prefix_cache *pc) {
    int most = 0;
    for (int mtp = 0; mtp < 2; mtp++) {
        int k = 0;
        for (int32_t id = 0; id < pc->n_pages; id++) k += pc->cache_ref[mtp][id] > 0 || pc->lent[mtp][id] > 0;
        if (k > most) most = k;
    }
    return most;
}

/* The least recently used entry, or -1 when empty. */
static int lru(const prefix_cache *pc) {
    int best = -1;
    for (int i = 0; i < pc->n; i++)
        if (best < 0 || pc->e[i].used < pc->e[best].used) best = i;
    return best;
}

int prefix_cache_restore(prefix_cache *pc, const int32_t *tokens, int max_len, int need_mtp, model_state *s,
                         mtp_state *ms, float *hidden, prefix_lease *lease, mtplx_err *err) {
    if (max_len <= 0) return 0;
    pthread_mutex_lock(&pc->mu);
    int best = -1;
    if (pc->n) {
        uint64_t *hp = malloc(sizeof *hp * ((size_t)max_len + 1));
        if (!hp) {
            pthread_mutex_unlock(&pc->mu);
            return -err_set(err, MTPLX_ENOMEM, "prefix cache: out of memory hashing %d tokens", max_len);
        }
        hp[0] = HASH_SEED;
        for (int i = 0; i < max_len; i++) hp[i + 1] = hash_step(hp[i], tokens[i]);
        for (int i = 0; i < pc->n; i++) {
            pc_entry *x = &pc->e[i];
            if (x->L > max_len || x->L < 1 || hp[x->L] != x->hash || (need_mtp && !x->hidden)) continue;
            if (best >= 0 && x->L <= pc->e[best].L) continue;
            if (!memcmp(x->tokens, tokens, sizeof *tokens * (size_t)x->L)) best = i;
        }
        free(hp);
    }
    int L = 0;
    if (best >= 0) {
        pc_entry *x = &pc->e[best];
        prefix_lease l = {{NULL, NULL}, {0, 0}};
        for (int m = 0; m < 2; m++) {
            const int32_t *ids = model_snap_pages(x->snap, m, &l.n[m]);
            if (m && !need_mtp) l.n[m] = 0;
            l.ids[m] = malloc(sizeof(int32_t) * (size_t)(l.n[m] ? l.n[m] : 1));
            if (l.ids[m] && l.n[m]) memcpy(l.ids[m], ids, sizeof(int32_t) * (size_t)l.n[m]);
        }
        int rc = !l.ids[0] || !l.ids[1] ? err_set(err, MTPLX_ENOMEM, "prefix cache: out of memory for a lease")
                                        : model_snap_restore(x->snap, s, need_mtp ? ms : NULL, err);
        if (rc) {
            free(l.ids[0]);
            free(l.ids[1]);
            pthread_mutex_unlock(&pc->mu);
            return -rc;
        }
        for (int m = 0; m < 2; m++)
            for (int k = 0; k < l.n[m]; k++) pc->lent[m][l.ids[m][k]]++;
        *lease = l;
        if (need_mtp) memcpy(hidden, x->hidden, sizeof(float) * (size_t)pc->H);
        x->used = ++pc->clock;
        L = x->L;
    }
    pthread_mutex_unlock(&pc->mu);
    return L;
}

void prefix_cache_return(prefix_cache *pc, prefix_lease *l) {
    pthread_mutex_lock(&pc->mu);
    for (int m = 0; m < 2; m++) {
        for (int k = 0; k < l->n[m]; k++) pc->lent[m][l->ids[m][k]]--;
        free(l->ids[m]);
        l->ids[m] = NULL;
        l->n[m] = 0;
    }
    pthread_mutex_unlock(&pc->mu);
}

int prefix_cache_has(prefix_cache *pc, const int32_t *tokens, int L, int need_mtp) {
    pthread_mutex_lock(&pc->mu);
    int i = find_exact(pc, tokens, L, prefix_hash(tokens, L));
    int has = i >= 0 && (!need_mtp || pc->e[i].hidden);
    pthread_mutex_unlock(&pc->mu);
    return has;
}

int prefix_cache_put(prefix_cache *pc, const int32_t *tokens, model_snap *snap, const float *hidden, mtplx_err *err) {
    int L = model_snap_len(snap), n;
    int mtp = hidden && model_snap_mtp_len(snap) == L - 1;
    if (L < 1 || !model_snap_pages(snap, 0, &n)) {
        model_snap_free(snap);
        return 0;
    }
    uint64_t h = prefix_hash(tokens, L);
    pthread_mutex_lock(&pc->mu);
    int old = find_exact(pc, tokens, L, h);
    size_t bytes = pc->snap_bytes + sizeof *tokens * (size_t)L + (mtp ? sizeof(float) * (size_t)pc->H : 0);
    if ((old >= 0 && (pc->e[old].hidden || !mtp)) || bytes > pc->budget) { /* known, or too big even alone */
        if (old >= 0) pc->e[old].used = ++pc->clock;
        else if (pc->disk && !prefix_disk_has(pc->disk, tokens, L, h, mtp)) /* RAM cannot hold it: disk can */
            spill(pc, snap, tokens, h, mtp ? hidden : NULL);
        pthread_mutex_unlock(&pc->mu);
        model_snap_free(snap);
        return 0;
    }
    pc_entry x = {L, h, NULL, snap, NULL, 0, bytes, 0};
    int rc = 0;
    if (pc->n == pc->cap) {
        int cap = pc->cap ? 2 * pc->cap : 16;
        pc_entry *e = realloc(pc->e, sizeof *e * (size_t)cap);
        if (!e) rc = err_set(err, MTPLX_ENOMEM, "prefix cache: out of memory for %d entries", cap);
        else pc->e = e, pc->cap = cap;
    }
    if (!rc) {
        x.tokens = mem_alloc((size_t)L, sizeof *tokens, "prefix cache tokens", err);
        if (mtp) x.hidden = mem_alloc((size_t)pc->H, sizeof(float), "prefix cache hidden", err);
        if (!x.tokens || (mtp && !x.hidden)) rc = MTPLX_ENOMEM;
    }
    if (rc) {
        free(x.tokens);
        free(x.hidden);
        pthread_mutex_unlock(&pc->mu);
        model_snap_free(snap);
        return rc;
    }
    memcpy(x.tokens, tokens, sizeof *tokens * (size_t)L);
    if (mtp) memcpy(x.hidden, hidden, sizeof(float) * (size_t)pc->H);
    if (old >= 0) entry_drop(pc, old); /* replaced by the one with an MTP history */
    for (int m = 0; m < 2; m++) {
        const int32_t *ids = model_snap_pages(snap, m, &n);
        for (int k = 0; k < n; k++)
            if (pc->cache_ref[m][ids[k]]++ == 0 && !m) pc->pages_held++;
    }
    x.used = ++pc->clock;
    pc->e[pc->n++] = x;
    pc->bytes += bytes;
    pc->stores++;
    while (pc->bytes > pc->budget && pc->n > 1) {
        int v = lru(pc);
        if (v == pc->n - 1) break; /* never the one just stored */
        spill_entry(pc, v);
        entry_drop(pc, v);
        pc->evictions++;
    }
    pthread_mutex_unlock(&pc->mu);
    return 0;
}

int prefix_cache_reclaim(prefix_cache *pc, int max_pages) {
    pthread_mutex_lock(&pc->mu);
    int held = pages_counted(pc);
    while (held > max_pages && pc->n) {
        int v = lru(pc);
        spill_entry(pc, v);
        entry_drop(pc, v);
        pc->evictions++;
        held = pages_counted(pc);
    }
    pthread_mutex_unlock(&pc->mu);
    return held;
}

int prefix_cache_reclaim_hook(void *pc, int max_pages) { return prefix_cache_reclaim(pc, max_pages); }

void prefix_cache_note(prefix_cache *pc, int prompt_tokens, int cached_tokens) {
    pthread_mutex_lock(&pc->mu);
    pc->lookups++;
    pc->hits += cached_tokens > 0;
    pc->prompt_tokens += (uint64_t)prompt_tokens;
    pc->cached_tokens += (uint64_t)cached_tokens;
    pthread_mutex_unlock(&pc->mu);
}

void prefix_cache_get_stats(prefix_cache *pc, prefix_cache_stats *o) {
    pthread_mutex_lock(&pc->mu);
    o->lookups = pc->lookups;
    o->hits = pc->hits;
    o->prompt_tokens = pc->prompt_tokens;
    o->cached_tokens = pc->cached_tokens;
    o->evictions = pc->evictions;
    o->stores = pc->stores;
    o->entries = pc->n;
    o->ram_bytes = pc->bytes;
    o->ram_budget = pc->budget;
    o->pages_held = pc->pages_held;
    o->pages_counted = pages_counted(pc);
    o->page_bytes = seq_pool_page_bytes(pc->m);
    o->disk_marked = 0;
    for (int i = 0; i < pc->n; i++) o->disk_marked += pc->e[i].marked;
    pthread_mutex_unlock(&pc->mu);
    o->disk = pc->had_disk;
    o->disk_on = 0, o->disk_files = 0, o->disk_bytes = o->disk_budget = 0;
    o->disk_hits = o->disk_writes = o->disk_evictions = o->disk_errors = 0;
    if (pc->disk) {
        prefix_disk_stats d;
        prefix_disk_get_stats(pc->disk, &d);
        o->disk_on = d.on, o->disk_files = d.files, o->disk_bytes = d.bytes, o->disk_budget = d.budget;
        o->disk_hits = d.hits, o->disk_writes = d.writes, o->disk_evictions = d.evictions, o->disk_errors = d.errors;
    }
}

/* ---- the disk tier (prefix_disk.h) ---- */

/* hp[0..n]: the prefix hashes of tokens (heap, caller frees), or NULL. */
static uint64_t *prefix_hashes(const int32_t *tokens, int n) {
    uint64_t *hp = malloc(sizeof *hp * ((size_t)n + 1));
    if (!hp) return NULL;
    hp[0] = HASH_SEED;
    for (int i = 0; i < n; i++) hp[i + 1] = hash_step(hp[i], tokens[i]);
    return hp;
}

int prefix_cache_disk_probe(prefix_cache *pc, const int32_t *tokens, int max_len, int need_mtp, int min_L) {
    if (!pc->disk || max_len <= min_L) return 0;
    uint64_t *hp = prefix_hashes(tokens, max_len);
    int L = hp ? prefix_disk_find(pc->disk, tokens, max_len, hp, need_mtp, min_L) : 0;
    free(hp);
    return L;
}

/* Read, check and restore the disk checkpoint of tokens[0, L). Returns 1 when restored, 0 when the
 * file failed (logged and removed) or the request cannot take it. */
static int disk_restore_one(prefix_cache *pc, const int32_t *tokens, int L, int need_mtp, model_state *s,
                            mtp_state *ms, float *hidden) {
    uint64_t h = prefix_hash(tokens, L);
    prefix_disk_loaded ld;
    mtplx_err e = {0};
    if (prefix_disk_read(pc->disk, tokens, L, h, need_mtp, &ld, &e)) return 0; /* logged and removed */
    /* the blob's layout depends on the MTP rows it holds, whether or not this request uses them */
    size_t want = model_snap_blob_bytes(pc->m, L, ld.mtp_len);
    int rc = ld.blob_bytes != want ? err_set(&e, MTPLX_EBADFILE, "blob of %zu bytes, %zu expected", ld.blob_bytes, want)
                                   : model_snap_read_blob(s, need_mtp ? ms : NULL, L, ld.mtp_len, ld.blob, ld.blob_bytes, &e);
    if (rc) {
        model_state_reset(s);
        if (ms) mtp_state_reset(ms);
        if (rc != MTPLX_ENOMEM && rc != MTPLX_ERANGE) /* else the file is fine; this request cannot take it */
            prefix_disk_reject(pc->disk, tokens, L, h, need_mtp, e.msg);
        prefix_disk_loaded_free(&ld);
        return 0;
    }
    if (need_mtp) memcpy(hidden, ld.hidden, sizeof(float) * (size_t)pc->H);
    prefix_disk_loaded_free(&ld);
    prefix_disk_note_hit(pc->disk);
    return 1;
}

int prefix_cache_disk_restore(prefix_cache *pc, const int32_t *tokens, int max_len, int need_mtp, int min_L,
                              model_state *s, mtp_state *ms, float *hidden, mtplx_err *err) {
    (void)err; /* every failure here is the file's: logged, and the request runs without it */
    for (int tries = 0; tries < 4; tries++) { /* a rejected file leaves the index: the next deepest is tried */
        int L = prefix_cache_disk_probe(pc, tokens, max_len, need_mtp, min_L);
        if (L <= 0) return 0;
        if (disk_restore_one(pc, tokens, L, need_mtp, s, ms, hidden)) return L;
    }
    return 0;
}

void prefix_cache_persist(prefix_cache *pc, const int32_t *tokens, int L) {
    if (!pc->disk || L < 1) return;
    uint64_t h = prefix_hash(tokens, L);
    pthread_mutex_lock(&pc->mu);
    int i = find_exact(pc, tokens, L, h);
    if (i >= 0 && !pc->e[i].on_disk) pc->e[i].marked = 1;
    pthread_mutex_unlock(&pc->mu);
}

int prefix_cache_persist_marked(prefix_cache *pc) {
    if (!pc->disk) return 0;
    int n = 0;
    pthread_mutex_lock(&pc->mu);
    for (int i = 0; i < pc->n; i++) {
        pc_entry *x = &pc->e[i];
        if (!x->marked) continue;
        x->marked = 0;
        if (!x->on_disk && prefix_disk_has(pc->disk, x->tokens, x->L, x->hash, x->hidden != NULL))
            x->on_disk = 1; /* an earlier server wrote it */
        n += !x->on_disk;
        spill_entry(pc, i);
    }
    pthread_mutex_unlock(&pc->mu);
    return n;
}

void prefix_cache_sync(prefix_cache *pc) {
    prefix_cache_persist_marked(pc);
    if (pc->disk) prefix_disk_sync(pc->disk);
}
