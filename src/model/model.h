/* model.h — a loaded checkpoint and the forward passes over it.
 *
 * The model (weights, config) is immutable after load and shared; everything that changes while a
 * sequence is generated lives in a model_state (trunk KV caches, Gated DeltaNet conv + recurrent
 * states, per-row captures for rollback) and an mtp_state (the MTP head's own KV cache). Keeping
 * per-sequence state in its own struct is what later lets one forward carry several sequences.
 *
 * Invariants (DESIGN.md §3): every forward is row-invariant — the logits/hidden of a row computed in
 * a T-row call are bit-identical to the same row computed by T single-row calls; hot paths do not
 * allocate (buffers are sized when the state is created). */
#ifndef MTPLX_MODEL_MODEL_H
#define MTPLX_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../base/progress.h"
#include "config.h"

typedef struct mtplx_model mtplx_model;
typedef struct model_state model_state;
typedef struct mtp_state mtp_state;

/* Load a checkpoint directory (config.json + safetensors). Validates every tensor the config
 * implies (presence, shape, dtype). Returns 0 and *out, or an error naming file/tensor/problem. */
int model_load(const char *dir, mtplx_model **out, mtplx_err *err);
/* The same, reporting (layers bound, layers) to prog (may be NULL) as it goes: binding a layer reads
 * its weights from the mapped files and packs them for the kernels, which is what takes long on a
 * large checkpoint. */
int model_load_progress(const char *dir, const progress_sink *prog, mtplx_model **out, mtplx_err *err);
void model_free(mtplx_model *m);

const model_config *model_config_of(const mtplx_model *m);
const char *model_dir(const mtplx_model *m);
int model_has_mtp(const mtplx_model *m);          /* 1 when mtp.* weights are loaded */

/* ---- trunk state of one sequence ---- */

/* A state for up to `capacity` positions, and up to `max_rows` rows per forward call (prefill is
 * chunked internally, so max_rows bounds only verify/decode calls that capture). */
int model_state_new(const mtplx_model *m, int capacity, int max_rows, model_state **out, mtplx_err *err);
void model_state_free(model_state *s);
int model_state_len(const model_state *s);        /* committed positions held */
int model_state_capacity(const model_state *s);
void model_state_reset(model_state *s);           /* empty the sequence, keep the buffers */

/* Copy src's committed sequence into dst (same model, dst capacity >= src's length): the KV rows
 * 0..len-1, the GDN conv and recurrent states. dst's captures are dropped. For snapshots, forks and
 * prefix reuse; the copy continues bit-identically to src. Returns 0, EINVAL (other model) or ERANGE
 * (dst too small). */
int model_state_copy(model_state *dst, const model_state *src, mtplx_err *err);

/* What a forward returns. Any pointer may be NULL to skip that output. */
typedef struct {
    float *logits;        /* [T - logits_from][V]: row t - logits_from = logits after token t */
    int logits_from;      /* first row whose logits are wanted (prefill wants only T-1) */
    float *hidden;        /* [T][H] post-final-norm hidden of every row */
    int capture;          /* 1: record per-row GDN conv/recurrent states so that
                             model_state_commit can keep any prefix of this call's rows */
} fwd_request;

/* Run T new tokens at positions len..len+T-1 against the state, append them (KV and recurrent
 * state advance by T). Returns 0 or an error (ERANGE when capacity would be exceeded, EINVAL for
 * a token id outside the vocabulary). */
int model_forward(const mtplx_model *m, model_state *s, const int32_t *tokens, int T,
                  const fwd_request *req, mtplx_err *err);

/* After a capturing forward of T rows, keep only its first `keep` rows (1 <= keep <= T): attention
 * KV is trimmed, GDN conv and recurrent states are restored from the captures of row keep-1. No
 * re-forward. Returns 0, or EINVAL when there is no capture or keep is out of range. */
int model_state_commit(model_state *s, int keep, mtplx_err *err);

/* ---- LM heads ---- */

typedef enum {
    HEAD_TARGET = 0,      /* the checkpoint's LM head (or tied embedding) — defines p */
    HEAD_DRAFT = 1,       /* draft-only copy (may be quantized); falls back to the MTP head's own */
    HEAD_MTP = 2,         /* the MTP layer's own head at full precision: DeepSeek's shared_head.head,
                             else the target head (the reference for `logits --mtp`) */
} head_kind;

/* Make the draft cheap: replace HEAD_DRAFT by an MLX-affine quantized copy (bits 4 or 8, group 32,
 * 64 or 128) of the head it used, and with mtp_layer also quantize the MTP layer's matrices (fc,
 * attention, MLP; dense Qwen3.5 MTP layers only). Made once, after load and before any generation
 * (not thread-safe with running forwards). The target head is untouched, so p is unchanged; the
 * drafts' q changes, which exact speculative sampling allows. Note: model_mtp_forward (and
 * `logits --mtp`) then use the quantized MTP layer. Returns 0, EINVAL (format), EUNSUPPORTED
 * (no MTP head / MTP layer kind) or ENOMEM. Buffers are freed by model_free. */
int model_quantize_draft(mtplx_model *m, int bits, int group_size, int mtp_layer, mtplx_err *err);

/* logits[T][V] = head(hidden[T][H]). */
int model_lm_head(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits,
                  mtplx_err *err);

/* ---- MTP head ---- */

int mtp_state_new(const mtplx_model *m, int capacity, mtp_state **out, mtplx_err *err);
void mtp_state_free(mtp_state *s);
int mtp_state_len(const mtp_state *s);
/* Drop MTP KV rows back to new_len (<= len). */
int mtp_state_trim(mtp_state *s, int new_len, mtplx_err *err);
void mtp_state_reset(mtp_state *s);
/* Copy src's MTP KV rows 0..len-1 into dst (same model, capacity >= len). Returns 0 or an error. */
int mtp_state_copy(mtp_state *dst, const mtp_state *src, mtplx_err *err);

/* T MTP rows at MTP positions len..len+T-1: row t = MTP layer(fc(concat[norm(embed(next_tokens[t])),
 * norm(hidden[t])])), causal inside the call, appended to the MTP KV cache. hidden_out [T][H] gets
 * the post-`mtp.norm` output (feed it to model_lm_head for logits, and back in as the next depth's
 * hidden). hidden_out may be the same buffer as hidden. Returns 0 or an error (EUNSUPPORTED when the
 * model has no MTP head). */
int model_mtp_forward(const mtplx_model *m, mtp_state *s, const float *hidden, const int32_t *next_tokens,
                      int T, float *hidden_out, mtplx_err *err);

#endif
