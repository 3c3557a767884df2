/* hub.h — checkpoints from a Hugging Face–compatible hub, and the local cache they land in.
 *
 * Layer: hub sits on base only (DESIGN.md §2). It knows HTTP (through libcurl) and the hub's cache
 * layout, so it cannot live in base, which must not know HTTP; it knows nothing of tensors or
 * configs, so it is not model either. The CLI calls it (`mtplx pull`, `mtplx models`, and `--model
 * ORG/NAME` resolution); the server and the engine never do.
 *
 * The cache is laid out exactly like huggingface_hub's, so either tool can read what the other
 * wrote (docs/cli.md "Model cache"):
 *     <cache>/models--ORG--NAME/blobs/<etag>                 file contents; etag = LFS sha256, or the
 *                                                            git blob id for small non-LFS files
 *     <cache>/models--ORG--NAME/blobs/<etag>.incomplete      a download in progress (resumable)
 *     <cache>/models--ORG--NAME/snapshots/<commit>/<path>    relative symlink to ../../blobs/<etag>
 *     <cache>/models--ORG--NAME/refs/<revision>              the commit a branch / tag pointed to
 * <cache> is $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub. */
#ifndef MTPLX_HUB_HUB_H
#define MTPLX_HUB_HUB_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../base/progress.h"

#define HUB_PATH_MAX 4096

/* A repository reference "ORG/NAME[@REVISION]". */
typedef struct {
    char repo[256];      /* "ORG/NAME" */
    char revision[256];  /* branch, tag or commit; "main" when not given */
    int has_revision;    /* 1 when "@REVISION" was written */
} hub_ref;

/* Parse s into r. Returns 0, or EINVAL when s is not ORG/NAME[@REV] (one '/', names of letters,
 * digits, '-', '_', '.', not starting with '.' or '-'; a revision without "..", spaces or a leading
 * '/'). */
int hub_parse_ref(const char *s, hub_ref *r, mtplx_err *err);

/* 1 when s has the shape of a repository reference (hub_parse_ref would accept it). */
int hub_looks_like_ref(const char *s);

/* The cache root (see the header comment) into out[n]. Returns 0, or EINVAL when no environment
 * variable names it and $HOME is unset. */
int hub_cache_dir(char *out, size_t n, mtplx_err *err);

/* <cache>/models--ORG--NAME for repo "ORG/NAME" into out[n]. Returns 0 or ERANGE (too long). */
int hub_repo_dir(const char *cache, const char *repo, char *out, size_t n, mtplx_err *err);

/* The snapshot directory a reference points to in the cache: refs/<revision> names the commit (a
 * 40-hex revision may also name a snapshot directly). Returns 0 with dir filled (and commit[41]
 * when non-NULL), or EIO with a message that says the model is not cached and how to pull it. */
int hub_resolve(const char *cache, const hub_ref *r, char *dir, size_t n, char commit[41], mtplx_err *err);

/* One cached snapshot, as `mtplx models` lists it. */
typedef struct {
    char repo[256];            /* "ORG/NAME" */
    char commit[64];           /* snapshot directory name */
    char refs[256];            /* refs pointing at it, comma-separated ("main"), "" when none */
    char dir[HUB_PATH_MAX];    /* the snapshot directory */
    uint64_t bytes;            /* sum of the blob sizes its files link to */
    int files;                 /* files (links) in the snapshot */
    int incomplete;            /* 1 when a link points at a missing blob */
} hub_snapshot;

/* Every snapshot of every models--* repository under cache, sorted by repo then commit. *out is a
 * heap array (caller frees; NULL when none). A missing cache directory is an empty list. */
int hub_list(const char *cache, hub_snapshot **out, int *n, mtplx_err *err);

/* Remove from the cache: without a revision the whole repository directory; with one, that
 * snapshot, the refs pointing at it, and the blobs no other snapshot of the repo links to.
 * *freed (may be NULL) gets the bytes of blobs deleted. Returns 0, or EIO when nothing matches. */
int hub_remove(const char *cache, const hub_ref *r, uint64_t *freed, mtplx_err *err);

/* What `mtplx pull` asks for. */
typedef struct {
    const char *endpoint;       /* hub base URL; NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;          /* bearer token; NULL: $HF_TOKEN, else the token file */
    const char *cache;          /* cache root; NULL: hub_cache_dir() */
    int jobs;                   /* files downloaded at once (<= 0: 4) */
    int retries;                /* extra attempts per file after a transfer error (resuming) */
    int all_files;              /* 1: every file; 0: skip other frameworks' weights (hub_skip_default) */
    const char *const *include; /* NULL-terminated glob list: only matching paths (overrides the default) */
    progress_sink progress;     /* bytes done / total of the whole pull (incl. files already cached) */
} hub_pull_opts;

typedef struct {
    char commit[41];             /* the commit the revision resolved to */
    char dir[HUB_PATH_MAX];      /* its snapshot directory */
    int files;                   /* files in the snapshot */
    int downloaded;              /* of which fetched now (the rest were cached already) */
    int resumed;                 /* downloads that continued an .incomplete file with a Range request */
    uint64_t bytes_total;        /* size of all selected files */
    uint64_t bytes_fetched;      /* bytes transferred now */
} hub_pull_result;

/* Download r into the cache: resolve the revision to a commit (GET /api/models/REPO/revision/REV),
 * list its files with sizes and LFS sha256s (GET /api/models/REPO/tree/COMMIT?recursive=true), then
 * fetch each missing blob from /REPO/resolve/COMMIT/PATH (redirects followed, an existing
 * .incomplete continued with a Range request), check its size and, for LFS files, its sha256 (a
 * mismatch deletes the partial file: it is never used), and link it into the snapshot. Errors name
 * the cause: 404 repo/revision/file, 401/403 (gated or private: which token was used), disk full,
 * checksum mismatch, a cut transfer (the .incomplete stays for the next pull to resume).
 * Returns 0 with *res filled (res may be NULL), or the error code. */
int hub_pull(const hub_ref *r, const hub_pull_opts *o, hub_pull_result *res, mtplx_err *err);

/* 1 when path is a file that a default pull skips: weights in other frameworks' formats (*.bin,
 * *.pt, *.pth, *.ckpt, *.h5, *.msgpack, *.onnx, *.gguf, *.ot, *.tflite) and original/ folders. */
int hub_skip_default(const char *path);

#endif
