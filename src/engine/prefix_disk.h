/* prefix_disk.h — the prefix cache's disk tier (docs/prefix-cache.md, "The disk tier").
 *
 * A directory of checkpoint files, one per entry, each keyed by its exact tokens and by the model
 * fingerprint (model_snap_fingerprint) in its header, so that a file from another model, dtype,
 * quantization or kernels (path, bf16 kernel, activations, repacking) is never used. Files are
 * written by a background thread as a temp file, fsync'd, then renamed into place (a crash leaves at
 * most a temp file, which the next start removes). Reading one back checks its size, fingerprint,
 * tokens and a 64-bit checksum of the whole payload; a file that fails is logged, removed and never
 * used. The files stay within a byte budget, least recently used first out. A write error (disk
 * full, read-only, I/O error) turns the tier off with one log line: the cache then keeps working from
 * RAM only.
 *
 * Thread-safe (own lock); nothing here touches the model: the caller serialises a checkpoint
 * (model_snap_write_blob) and restores the blob (model_snap_read_blob). */
#ifndef MTPLX_ENGINE_PREFIX_DISK_H
#define MTPLX_ENGINE_PREFIX_DISK_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"

typedef struct prefix_disk prefix_disk;

/* Default byte budget of the files when none is given. */
#define PREFIX_DISK_DEFAULT_BYTES ((size_t)8 << 30)

/* Open (creating it if needed) the tier in dir with a budget of `budget` bytes (0: the default) for
 * checkpoints of the model with fingerprint fp. Scans the directory: valid files of this
 * fingerprint join the index (their tokens are read, the payload is checked when used), files of
 * another fingerprint are left alone and ignored, truncated or unreadable ones and temp files of
 * dead writers are removed (one log line each). A probe file is written, fsync'd and removed, so a
 * read-only or full disk is found now. Returns 0 and *out, or an error (the caller serves without
 * the tier). Environment (tests): MTPLX_CACHE_WRITE_PAUSE_MS=N sleeps N ms in the middle of each
 * file write, making the window a kill can hit observable. */
int prefix_disk_open(const char *dir, size_t budget, const unsigned char fp[32], prefix_disk **out, mtplx_err *err);

/* Finish the queued writes, stop the writer, free everything (the files stay). NULL is fine. */
void prefix_disk_close(prefix_disk *d);

/* Queue a checkpoint for writing: its tokens [L] (hash = its prefix hash), MTP history rows
 * mtp_len (-1: none), hidden [H] (when mtp_len == L - 1, else NULL and H ignored) and blob[bytes].
 * Takes ownership of blob (freed by the tier); tokens and hidden are copied. Dropped silently when
 * the tier is off, the key is already on disk, or the queue holds more than its memory cap. */
void prefix_disk_put(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int mtp_len, const float *hidden,
                     int H, void *blob, size_t bytes);

/* 1 when a file (or a queued write) holds exactly tokens[0, L) with an MTP history when need_mtp. */
int prefix_disk_has(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp);

/* The deepest file whose tokens are a prefix of tokens[0, max_len) and deeper than min_L (hp: the
 * prefix hashes, hp[i] of tokens [0, i), [max_len + 1]), with an MTP history when need_mtp: returns
 * its L, or 0 when none. */
int prefix_disk_find(prefix_disk *d, const int32_t *tokens, int max_len, const uint64_t *hp, int need_mtp, int min_L);

/* A file read back and checked (prefix_disk_read); free with prefix_disk_loaded_free. */
typedef struct {
    int L, mtp_len;     /* trunk positions, MTP rows (-1: none) */
    const float *hidden;/* [H] trunk hidden at L - 1 when mtp_len == L - 1, else NULL */
    const void *blob;   /* model_snap_blob_bytes(m, L, mtp_len) bytes */
    size_t blob_bytes;
    void *buf;          /* the file's bytes (owned) */
} prefix_disk_loaded;

/* Read the file of the deepest match prefix_disk_find gave (same arguments, L = its result) and
 * check it: size, fingerprint, checksum, and that its tokens are tokens[0, L). Returns 0 and *out,
 * or an error after logging it and removing the file (it is never used). */
int prefix_disk_read(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp,
                     prefix_disk_loaded *out, mtplx_err *err);
void prefix_disk_loaded_free(prefix_disk_loaded *l);

/* Count a blob that could not be restored after reading (log it, remove the file). */
void prefix_disk_reject(prefix_disk *d, const int32_t *tokens, int L, uint64_t hash, int need_mtp, const char *why);

typedef struct {
    int on;               /* 1 while the tier works; 0 after a write error turned it off */
    int files;            /* checkpoint files in the index */
    size_t bytes;         /* their bytes */
    size_t budget;
    uint64_t hits;        /* checkpoints restored from disk */
    uint64_t writes;      /* files written */
    uint64_t evictions;   /* files removed for the budget */
    uint64_t errors;      /* write errors, corrupt / truncated / unreadable files */
    uint64_t dropped;     /* writes not made: queue full or the tier off */
    size_t queued_bytes;  /* bytes waiting in the write queue */
} prefix_disk_stats;

void prefix_disk_get_stats(prefix_disk *d, prefix_disk_stats *out);
void prefix_disk_note_hit(prefix_disk *d);

/* Wait until the write queue is empty (tests, and `mtplx run` before it exits). */
void prefix_disk_sync(prefix_disk *d);

#endif
