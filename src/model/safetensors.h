/* safetensors.h — read-only, validated view of one or more .safetensors files.
 *
 * A checkpoint is either a single `model.safetensors` or shards listed by
 * `model.safetensors.index.json`. Files are mmap'd; tensors are returned as pointers into the
 * mapping, never copied. Every header is validated on open: header length, JSON, dtype names,
 * shape × dtype size == byte span, spans inside the file, no two spans overlapping, no duplicate
 * names across shards. A bad file gives an error naming the file, the tensor and what is wrong. */
#ifndef MTPLX_MODEL_SAFETENSORS_H
#define MTPLX_MODEL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/err.h"

#define ST_MAX_DIMS 8

typedef struct {
    const char *name;          /* tensor name as stored (owned by the st_set) */
    mtplx_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;          /* start of the tensor bytes inside the mapping; aligned to the
                                  element size (misaligned files are refused) */
    size_t nbytes;             /* == product(shape) * dtype_size(dtype) */
    const char *file;          /* path of the file holding it (owned by the st_set) */
} st_tensor;

typedef struct st_set st_set;  /* opaque: the mapped files and a name -> tensor index */

/* Open one .safetensors file. Returns 0 and *out, or an error code with err set. */
int st_open_file(const char *path, st_set **out, mtplx_err *err);

/* Open a checkpoint directory: model.safetensors.index.json if present (every shard it names must
 * exist and hold exactly the tensors mapped to it), else model.safetensors, else every *.safetensors
 * file in the directory. */
int st_open_dir(const char *dir, st_set **out, mtplx_err *err);

/* Validate a safetensors image already in memory (fuzzing, tests). The set points into `data`, which
 * the caller keeps alive and unchanged until st_close; `name` stands for the file in messages. */
int st_open_buffer(const void *data, size_t size, const char *name, st_set **out, mtplx_err *err);

void st_close(st_set *s);

/* The directory or file the set was opened from (for messages). Owned by the set. */
const char *st_where(const st_set *s);

/* The tensor `name` with exactly this shape, or NULL with err set to "missing tensor X (looked in
 * DIR)" or "FILE: tensor X: shape [a, b], expected [c, d]" (EBADFILE). Dtype is the caller's check. */
const st_tensor *st_require(const st_set *s, const char *name, int ndim, const int64_t *shape, mtplx_err *err);

/* Lookup by exact name; NULL when absent. */
const st_tensor *st_find(const st_set *s, const char *name);

/* Number of tensors and indexed access (stable order: sorted by name). */
int st_count(const st_set *s);
const st_tensor *st_at(const st_set *s, int i);

/* Total bytes of tensor data over all files. */
size_t st_total_bytes(const st_set *s);

/* Read a safetensors file into a map of fp32 arrays is the caller's business; writing one: */
typedef struct {
    const char *name;
    mtplx_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;          /* product(shape) * dtype_size bytes */
} st_write_item;

/* Write a single .safetensors file (metadata may be NULL: a JSON object of string values).
 * Returns 0 or an error code. */
int st_write_file(const char *path, const st_write_item *items, int n, const char *metadata_json,
                  mtplx_err *err);

#endif
