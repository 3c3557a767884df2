/* prefix_cache.h — reuse of prefilled sequences across requests (docs/prefix-cache.md).
 *
 * Entries are checkpoints of a sequence at length L, keyed by their exact tokens [0, L): the KV
 * pages of those positions (shared with the sequence pool, copy-on-write), the Gated DeltaNet conv
 * and recurrent states at L (model_snap) and, when taken with an MTP state, the MTP head's history of
 * L - 1 rows plus the trunk's post-norm hidden at L - 1 (the input of the MTP pair that the next
 * token completes). A request restores the deepest entry whose tokens are a prefix of its prompt
 * and prefills only the rest; an entry is never used for other tokens (the tokens are compared, not
 * only hashed), so a request served from the cache gives exactly the tokens it gives cold.
 *
 * Memory: the GDN copies are the cache's own RAM, bounded by ram_bytes (LRU eviction); the KV pages
 * are pages of the scheduler's pool, which the scheduler takes back (prefix_cache_reclaim, LRU)
 * when admitting a request needs them. Thread-safe; every call that touches states or pages must be
 * made with the model held (sched_lock), the cache's own lock is taken inside. */
#ifndef MTPLX_ENGINE_PREFIX_CACHE_H
#define MTPLX_ENGINE_PREFIX_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../model/model.h"
#include "../model/snapshot.h"

typedef struct prefix_cache prefix_cache;

typedef struct {
    size_t ram_bytes;   /* budget of the cache's own memory (GDN copies, tokens, hiddens); 0 = default */
    int spacing;        /* prompt tokens between checkpoints; 0 = prefix_cache_spacing_rule */
    const char *disk_dir; /* the disk tier's directory (prefix_disk.h), NULL = no disk tier */
    size_t disk_bytes;  /* its byte budget; 0 = PREFIX_DISK_DEFAULT_BYTES */
} prefix_cache_config;

/* Default RAM budget when ram_bytes is 0. */
#define PREFIX_CACHE_DEFAULT_RAM ((size_t)1 << 30)

/* The checkpoint spacing for model m (docs/prefix-cache.md): the smallest multiple of the KV page
 * whose KV bytes reach one checkpoint's GDN bytes, clamped to [64, 4096] — so checkpoints never cost
 * more memory than the KV they cover, and a hit between two of them re-prefills < spacing tokens. */
int prefix_cache_spacing_rule(const mtplx_model *m);

/* A cache over the pages of pool (of model m). Returns 0 and *out or ENOMEM. Free it before the pool.
 * With c->disk_dir, entries evicted from RAM and the conversations marked by prefix_cache_persist
 * are also written there (prefix_disk.h); a directory that cannot be used (read-only, full, not
 * creatable) is reported on stderr and the cache works from RAM only. */
int prefix_cache_new(const mtplx_model *m, seq_pool *pool, const prefix_cache_config *c, prefix_cache **out, mtplx_err *err);
/* Writes the marked entries (prefix_cache_persist) and finishes the disk tier's queue first: call it
 * while no sequence runs. */
void prefix_cache_free(prefix_cache *pc);
int prefix_cache_spacing(const prefix_cache *pc);

/* The pages a restore lent to a sequence: the cache keeps counting them against the scheduler's
 * page budget (prefix_cache_reclaim) until they are returned, even if their entry is evicted
 * meanwhile, so the sequence need not reserve them. */
typedef struct {
    int32_t *ids[2];   /* trunk, MTP page ids (heap) */
    int n[2];
} prefix_lease;

/* Restore into s (and ms, when need_mtp) the deepest entry whose tokens are a prefix of
 * tokens[0, max_len) (with an MTP history when need_mtp; then hidden [H] gets the trunk's hidden at
 * L - 1), and fill *lease with its pages (return it with prefix_cache_return once s no longer holds
 * them). Returns L (0: nothing restored, s, ms and lease unchanged) or a negative error code. */
int prefix_cache_restore(prefix_cache *pc, const int32_t *tokens, int max_len, int need_mtp, model_state *s,
                         mtp_state *ms, float *hidden, prefix_lease *lease, mtplx_err *err);
void prefix_cache_return(prefix_cache *pc, prefix_lease *lease);   /* a zeroed lease is fine */

/* Add a checkpoint: snap (model_snap_take + model_snap_attach, ownership passes to the cache), whose
 * tokens are tokens[0, L), L = model_snap_len(snap). With an MTP history (model_snap_mtp_len =
 * L - 1) hidden [H] must be the trunk's post-norm hidden at L - 1. An existing entry for the same
 * tokens is only refreshed (snap freed), or replaced when snap adds the MTP history. Then evicts
 * least recently used entries past the RAM budget. Returns 0 or ENOMEM (snap freed either way). */
int prefix_cache_put(prefix_cache *pc, const int32_t *tokens, model_snap *snap, const float *hidden, mtplx_err *err);

/* The disk tier: the depth of the deepest checkpoint on disk that is a prefix of tokens[0, max_len)
 * and deeper than min_L (0: none, or no disk tier). No I/O: the tier's index is in memory. */
int prefix_cache_disk_probe(prefix_cache *pc, const int32_t *tokens, int max_len, int need_mtp, int min_L);

/* Restore that checkpoint (the deepest deeper than min_L) into the empty states s (and ms, with
 * hidden as for prefix_cache_restore): reads the file, checks it (size, fingerprint, checksum,
 * tokens) and writes its KV into fresh pages of s's own (the caller has reserved them: call after
 * admission). A file that fails is logged, removed and never used; the next deepest is tried.
 * Returns L, or 0 (nothing restored: the states are empty again). Call with the model held. */
int prefix_cache_disk_restore(prefix_cache *pc, const int32_t *tokens, int max_len, int need_mtp, int min_L,
                              model_state *s, mtp_state *ms, float *hidden, mtplx_err *err);

/* Ask for the entry of exactly tokens[0, L) on the disk tier (not only when it is evicted): a
 * conversation's state after a turn, which a later turn — or the next server — resumes. The entry
 * is only marked: serialising it copies its KV and GDN state under the model lock, a stall of every
 * running stream (about a second for a 27B model at 20k tokens, an estimate), so it is written by
 * prefix_cache_persist_marked (gen_session_persist calls it on an idle scheduler), or when it is
 * evicted, or at prefix_cache_sync / prefix_cache_free. No-op without a disk tier or when it is
 * there already. Model held. */
void prefix_cache_persist(prefix_cache *pc, const int32_t *tokens, int L);

/* Write the marked entries that are not on disk yet into the disk tier's queue. Returns how many.
 * Model held (the copy reads the KV pages). */
int prefix_cache_persist_marked(prefix_cache *pc);

/* Write the marked entries, then wait until the disk tier's queued writes are on disk (tests;
 * `mtplx run` before it exits). Model held. */
void prefix_cache_sync(prefix_cache *pc);

/* 1 when an entry for exactly tokens[0, L) exists (with an MTP history when need_mtp). */
int prefix_cache_has(prefix_cache *pc, const int32_t *tokens, int L, int need_mtp);

/* Evict least recently used entries until the pages the cache accounts for — referenced by an entry
 * or lent (the larger count of the trunk's and the MTP head's pools) — are at most max_pages, or no
 * entry is left. Returns the pages it accounts for afterwards. */
int prefix_cache_reclaim(prefix_cache *pc, int max_pages);
/* The same with pc as a void pointer: the hook for sched_set_reclaim. */
int prefix_cache_reclaim_hook(void *pc, int max_pages);

/* Count a finished lookup: prompt tokens and how many of them came from the cache. */
void prefix_cache_note(prefix_cache *pc, int prompt_tokens, int cached_tokens);

typedef struct {
    uint64_t lookups;        /* requests that looked */
    uint64_t hits;           /* ... and restored something */
    uint64_t prompt_tokens;  /* prompt tokens of those requests */
    uint64_t cached_tokens;  /* of which restored (prefill tokens saved) */
    uint64_t evictions;      /* entries dropped for the RAM budget or for pages */
    uint64_t stores;         /* entries made */
    int entries;
    size_t ram_bytes;        /* the cache's own memory now */
    size_t ram_budget;
    int pages_held;          /* distinct trunk pages the entries reference */
    int pages_counted;       /* pages referenced or lent: counted against the page budget (max of pools) */
    size_t page_bytes;       /* bytes of one KV page (trunk + MTP) */
    int disk;                /* 1: a disk tier was asked for (--cache-dir) */
    int disk_on;             /* ... and works: opened, and no write error turned it off since */
    int disk_files;
    size_t disk_bytes, disk_budget;
    uint64_t disk_hits;      /* restores from disk */
    uint64_t disk_writes;    /* files written */
    uint64_t disk_evictions; /* files removed for the disk budget */
    uint64_t disk_errors;    /* write errors, corrupt / truncated / unreadable files */
    int disk_marked;         /* entries prefix_cache_persist marked that wait for an idle moment */
} prefix_cache_stats;

void prefix_cache_get_stats(prefix_cache *pc, prefix_cache_stats *out);

#endif
