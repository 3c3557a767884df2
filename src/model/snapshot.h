/* snapshot.h — a saved point of one sequence for the prefix cache (docs/prefix-cache.md).
 *
 * A snapshot of a pooled trunk state at length L holds references to the state's first
 * ceil(L / page) KV pages (shared, copy-on-write: no KV bytes are copied) and a copy of every Gated
 * DeltaNet layer's conv and recurrent state at L, which cannot be recomputed from the KV. With an
 * MTP state it also shares the MTP head's KV pages of its first mtp_len rows. Restoring it into a
 * state of the same pool makes that state continue bit-identically to the one it was taken from. */
#ifndef MTPLX_MODEL_SNAPSHOT_H
#define MTPLX_MODEL_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct model_snap model_snap;

/* Snapshot s's committed sequence of L positions (and, when ms != NULL, its MTP history of
 * mtp_state_len(ms) rows): the GDN states are copied now; the KV pages are referenced later by
 * model_snap_attach. Both must be states made in a seq_pool (model_state_new_in /
 * mtp_state_new_in). Call with the model held. Returns 0 and *out, EUNSUPPORTED for a standalone
 * state, or ENOMEM. */
int model_snap_take(const model_state *s, const mtp_state *ms, model_snap **out, mtplx_err *err);

/* Reference the KV pages of the snapshot's positions from s (and ms), the state it was taken from,
 * still holding at least those positions. Attach when s will not write into them again — when it
 * is about to be reset — so that the last, partly filled page is not copied by s's next write.
 * Returns 0, EINVAL (s shorter than the snapshot, or another pool) or ERANGE. Model held. */
int model_snap_attach(model_snap *snap, const model_state *s, const mtp_state *ms, mtplx_err *err);

/* s (and ms, when not NULL) become the snapshot's sequence: they share its pages and get its GDN
 * states. Returns 0, EINVAL (other pool, or ms given and the snapshot has no MTP history) or ERANGE
 * (capacity). Call with the model held. */
int model_snap_restore(const model_snap *snap, model_state *s, mtp_state *ms, mtplx_err *err);

void model_snap_free(model_snap *snap);  /* drops the page references; NULL is fine */

int model_snap_len(const model_snap *snap);      /* trunk positions L */
int model_snap_mtp_len(const model_snap *snap);  /* MTP history rows, or -1 when none was taken */
/* The trunk (mtp = 0) or MTP (mtp = 1) KV pages the snapshot holds: *n of them in ids (valid until
 * it is freed). */
const int32_t *model_snap_pages(const model_snap *snap, int mtp, int *n);
/* Bytes of the GDN copy one snapshot of model m holds (its own memory; pages are counted apart). */
size_t model_snap_state_bytes(const mtplx_model *m);

/* ---- serialised form, for the prefix cache's disk tier (docs/prefix-cache.md, "The disk tier") ---- */

/* Bytes of the serialised checkpoint of L trunk positions and an MTP history of mtp_len rows (-1:
 * none): the GDN copy, then for each of the ceil(L / page) trunk pages every attention layer's keys
 * then values, then the ceil(mtp_len / page) MTP pages likewise. Whole pages: the positions past L
 * in the last page are whatever the page held (no reader looks at them). */
size_t model_snap_blob_bytes(const mtplx_model *m, int L, int mtp_len);

/* Write snap (attached) into dst[model_snap_blob_bytes(m, len, with_mtp ? mtp_len : -1)], host
 * memory: with its MTP history only when with_mtp. Call with the model held. Returns 0 or EINVAL
 * (not attached). */
int model_snap_write_blob(const model_snap *snap, int with_mtp, void *dst, mtplx_err *err);

/* The reverse: s (and ms, when the blob has an MTP history and ms != NULL), empty states of a
 * sequence pool, take fresh pages for L positions (mtp_len rows) and get the blob's KV and GDN
 * state, so they continue bit-identically to the state the blob was written from. bytes must be
 * model_snap_blob_bytes(m, L, mtp_len). Call with the model held. Returns 0, EINVAL (size, standalone
 * or non-empty state), ERANGE (capacity) or ENOMEM (no free page; the states are then reset). */
int model_snap_read_blob(model_state *s, mtp_state *ms, int L, int mtp_len, const void *blob, size_t bytes,
                         mtplx_err *err);

/* SHA-256 identity of what a checkpoint's bits depend on: the format version, the numerics version
 * (MODEL_SNAP_NUMERICS, bumped whenever a kernel's results change), the backend, the CPU kernel
 * path and, within it, the bf16 kernel (kern_matmul_bf16_kernel: by CPU vendor and knobs), the
 * quantized weights' activations (int8 / f32) and the bytes of the backend's repacked weight copies
 * (which weights take the packed kernels: other bits), the configuration and every tensor's name, dtype,
 * shape and a sample of its bytes (start, two inner points, end), and whether the MTP layer runs
 * quantized copies. Two processes that give a prompt the same bits get the same fingerprint; a
 * different model, dtype, quantization or kernel gets another. 2: the AVX-512 bf16 FMA kernel on
 * even/odd packed activations (session 46). */
#define MODEL_SNAP_NUMERICS 2
void model_snap_fingerprint(const mtplx_model *m, unsigned char out[32]);
#endif
