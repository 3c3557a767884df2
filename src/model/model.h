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
typedef struct seq_pool seq_pool;
typedef struct model_batch model_batch;

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
/* "" or one line the user should see about how the model was loaded (e.g. experts left in the
 * checkpoint's layout for want of memory, and how to change that). Owned by the model. */
const char *model_load_note(const mtplx_model *m);
/* 1 when the model's backend computes in host memory (the CPU backend): its memory ops are plain
 * memory copies that any thread may run beside a forward on other buffers. */
int model_memory_is_host(const mtplx_model *m);
/* Rows of the backend's prefill chunk (be_caps.prefill_rows; 128 when it names none). */
int model_prefill_rows(const mtplx_model *m);
/* Make forwards of up to `rows` rows allocation-free on the calling thread (the backend's
 * thread-local scratch; states and batches do this for the thread that makes them). A thread that
 * runs forwards for others (the scheduler's executor) calls it first. Returns 0 or ENOMEM. */
int model_reserve_thread(const mtplx_model *m, int rows, mtplx_err *err);

/* ---- trunk state of one sequence ---- */

/* A state for up to `capacity` positions, and up to `max_rows` rows per forward call (prefill is
 * chunked internally, so max_rows bounds only verify/decode calls that capture). */
int model_state_new(const mtplx_model *m, int capacity, int max_rows, model_state **out, mtplx_err *err);
void model_state_free(model_state *s);
int model_state_len(const model_state *s);        /* committed positions held */
int model_state_capacity(const model_state *s);
void model_state_reset(model_state *s);           /* empty the sequence, keep the buffers */

/* Bytes of a sequence's state that one decoded token moves besides the weights, at `context`
 * positions: every GDN layer's recurrent state (Hv·Dv·Dk fp32) and conv window read and written, every
 * attention layer's KV cache (fp32, family_kv_shape) read over the context and its new row written.
 * For bandwidth accounting (`mtplx bench --verify-cost`); the per-row captures of a verify are not in it. */
uint64_t model_state_bytes_per_token(const mtplx_model *m, int context);

/* Copy src's committed sequence into dst (same model, dst capacity >= src's length): the KV rows
 * 0..len-1, the GDN conv and recurrent states. dst's captures are dropped. For snapshots, forks and
 * prefix reuse; the copy continues bit-identically to src. Returns 0, EINVAL (other model) or ERANGE
 * (dst too small). */
int model_state_copy(model_state *dst, const model_state *src, mtplx_err *err);

/* The most entries a logits_top list holds (fwd_request.logits_top, top_out); BE_TOP_MAX. */
#define MODEL_TOP_MAX 64

/* What a forward returns. Any pointer may be NULL to skip that output. */
typedef struct {
    float *logits;        /* [T - logits_from][V]: row t - logits_from = logits after token t */
    int logits_from;      /* first row whose logits are wanted (prefill wants only T-1) */
    float *hidden;        /* [T][H] post-final-norm hidden of every row */
    int capture;          /* 1: record per-row GDN conv/recurrent states so that
                             model_state_commit can keep any prefix of this call's rows */
    int logits_top;       /* 0: whole logits rows. k in 1..BE_TOP_MAX: only each row's k best-ranked
                             logits (larger first, lower id on ties) and its first NaN / +inf are
                             exact, every other entry reads -inf: all that sampler_build reads with
                             top_k k (greedy: 1) and no penalties or mask, and a device backend then
                             downloads 2k+2 words a row instead of V floats */
    int32_t *top_out;     /* with logits_top = k > 0, or NULL: [T - logits_from][2k + 2] each row's list
                             in be_ops.logits_top's layout (k ids best first, -1 past the last; their
                             values as float bits; the first NaN / +inf id or -1, its value) instead
                             of the logits rows, which are then scratch (unspecified); what
                             sampler_build_top reads. Every backend fills it (a host-memory one from
                             its rows), a device one without copying a row's V floats to the host */
} fwd_request;

/* Run T new tokens at positions len..len+T-1 against the state, append them (KV and recurrent
 * state advance by T). Returns 0 or an error (ERANGE when capacity would be exceeded, EINVAL for
 * a token id outside the vocabulary). */
int model_forward(const mtplx_model *m, model_state *s, const int32_t *tokens, int T,
                  const fwd_request *req, mtplx_err *err);

/* ---- many sequences (docs/architecture.md, "The sequence pool" and "Batch forward") ---- */

/* Sequences in one model_forward_batch call, at most. */
#define BATCH_SEQS_MAX 64

/* A pool of KV pages shared by the sequences made in it: `pages` pages of model_kv_page_size()
 * positions for the trunk's attention layers, and as many for the MTP layer when the model has one.
 * Returns 0 and *out, or an error (ENOMEM naming the bytes). */
int seq_pool_new(const mtplx_model *m, int pages, seq_pool **out, mtplx_err *err);
void seq_pool_free(seq_pool *p);      /* every state made in it must be freed first */
int model_kv_page_size(void);         /* positions per KV page */
/* Bytes one KV page costs (trunk, plus the MTP layer's page when there is one). */
size_t seq_pool_page_bytes(const mtplx_model *m);
/* Pages of the trunk pool: *used held by some sequence, *total in all. */
void seq_pool_pages(seq_pool *p, int *used, int *total);

/* A trunk state whose KV pages come from pool (pages are taken as the sequence grows and dropped
 * when it shrinks or is freed). It has no scratch of its own: forward it with model_forward_batch.
 * Same arguments and errors as model_state_new. */
int model_state_new_in(seq_pool *pool, int capacity, int max_rows, model_state **out, mtplx_err *err);
int mtp_state_new_in(seq_pool *pool, int capacity, mtp_state **out, mtplx_err *err);

/* dst (a state of the same pool, any content) becomes a copy of src's committed sequence that
 * shares src's KV pages: no KV bytes are copied until one of them writes into a shared page
 * (copy-on-write). GDN states are copied. Returns 0, EINVAL (other pool) or ERANGE (capacity). */
int model_state_fork(model_state *dst, const model_state *src, mtplx_err *err);

/* Scratch for forwards of up to `rows` rows in all, over sequences of up to `capacity` positions. */
int model_batch_new(const mtplx_model *m, int rows, int capacity, model_batch **out, mtplx_err *err);
void model_batch_free(model_batch *b);

/* One sequence's part of a batch: T new tokens for state s, with what it wants back. */
typedef struct {
    model_state *s;
    const int32_t *tokens;   /* [T] host */
    int T;
    fwd_request req;         /* as for model_forward (logits rows from logits_from, hidden, capture) */
} fwd_seq;

/* One forward over the rows of n distinct sequences (Σ T <= the batch's rows, n <= BATCH_SEQS_MAX):
 * row-wise ops run once over all rows, attention and Gated DeltaNet per sequence. Every sequence
 * gets exactly the bits model_forward would give it alone (row invariance, DESIGN.md §3).
 * Everything is checked before anything runs; on error no state changed. */
int model_forward_batch(const mtplx_model *m, model_batch *b, const fwd_seq *seqs, int n, mtplx_err *err);

/* One sequence's MTP rows in a batch (see model_mtp_forward). */
typedef struct {
    mtp_state *s;
    const float *hidden;       /* [T][H] host */
    const int32_t *next_tokens;/* [T] host */
    int T;
    float *hidden_out;         /* [T][H] host */
} mtp_seq;

/* model_mtp_forward over n distinct sequences in one pass; same guarantees as model_forward_batch. */
int model_mtp_forward_batch(const mtplx_model *m, model_batch *b, const mtp_seq *seqs, int n, mtplx_err *err);

/* After a capturing forward of T rows, keep only its first `keep` rows (1 <= keep <= T): attention
 * KV is trimmed, GDN conv and recurrent states are restored from the captures of row keep-1. No
 * re-forward. Returns 0, or EINVAL when there is no capture or keep is out of range. */
int model_state_commit(model_state *s, int keep, mtplx_err *err);

/* The GDN part of a commit is deferred to the state's next forward (done there for all sequences at
 * once). This settles it now and waits for the backend: benchmarks call it so that a forward's time
 * does not include the previous commit. */
void model_state_settle(model_state *s);

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

/* A draft quantization as `run`, `chat`, `bench`, `tune` and `serve` name it (--draft-quant). */
typedef struct {
    int bits;       /* 4 or 8; 0 = none (the draft at the checkpoint's precision) */
    int group_size; /* 32, 64 or 128 */
    int mtp_layer;  /* 1: the MTP layer's matrices too ("q4"), 0: the LM head only ("q4-head") */
} draft_quant;
#define DRAFT_QUANT_DEFAULT "q4" /* measured: docs/speculative.md, "Draft head and layer" */
/* Parse "q4" | "q8", then optionally "-head", then optionally ":32" | ":64" | ":128" (group 64
 * otherwise), or "none". Returns 0, or EINVAL with a message naming the accepted forms. */
int draft_quant_parse(const char *spec, draft_quant *out, mtplx_err *err);
/* The spec that parses to q ("q4", "q8-head:128", "none") into buf[cap]; returns buf. */
const char *draft_quant_name(const draft_quant *q, char *buf, size_t cap);
/* Apply *q to m (nothing for bits 0 or a model without an MTP head) and leave in *q what was applied.
 * An MTP layer that cannot be quantized (an MoE or MLA one) keeps its precision and only the head is
 * quantized (mtp_layer becomes 0); when by_default (the user did not ask) a shape the format cannot
 * take (EINVAL, e.g. hidden 48 with group 64) leaves the draft at full precision (bits becomes 0) and
 * says so in note[cap] (else note is ""). Returns 0 or the error of model_quantize_draft. */
int model_draft_quant_apply(mtplx_model *m, draft_quant *q, int by_default, char *note, size_t cap, mtplx_err *err);

/* Make the draft head cover only the vocabulary subset ids[0..n) (strictly ascending, inside
 * [0, V)): the rows of HEAD_DRAFT's weight at those ids are copied once into one contiguous matrix
 * (so a draft step reads only those bytes), and model_lm_head(HEAD_DRAFT) then returns -inf for every
 * id outside the subset, i.e. q = 0 there. Exactness is unchanged: a token outside the subset is
 * never proposed but stays reachable through the residual max(p - q, 0) (docs/speculative.md,
 * "Draft vocabulary subset"). Call after load and BEFORE model_quantize_draft (which then quantizes
 * only the subset); host-memory backends only. Returns 0, EINVAL (ids, or a subset already set),
 * EUNSUPPORTED (no MTP head / device backend) or ENOMEM. Buffers are freed by model_free. */
int model_draft_vocab(mtplx_model *m, const int32_t *ids, int n, mtplx_err *err);
/* The draft head's subset size (0 = the full vocabulary). */
int model_draft_vocab_size(const mtplx_model *m);

/* logits[T][V] = head(hidden[T][H]);
 * HEAD_DRAFT over a subset (model_draft_vocab): -inf at every id outside it. */
int model_lm_head(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits,
                  mtplx_err *err);
/* The same where the caller reads only each row's `top` best logits (fwd_request.logits_top's
 * contract: k in 1..BE_TOP_MAX; 0 = whole rows): a device backend with the logits_top op then
 * downloads 2·top + 2 words a row instead of V floats, and every other entry reads -inf. A draft
 * step's sampler (no penalties, top_k or greedy) reads nothing else (sampler_top_needed). */
int model_lm_head_top(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, int top,
                      mtplx_err *err);
/* The same with the rows' lists in top_out ([T][2·top + 2], fwd_request.top_out's layout; top in
 * 1..BE_TOP_MAX and < V) instead of expanded rows: logits[T][V] is scratch (unspecified after). */
int model_lm_head_list(const mtplx_model *m, head_kind which, const float *hidden, int T, float *logits, int top,
                       int32_t *top_out, mtplx_err *err);
/* The list of a host row of V logits (fwd_request.top_out's layout, k in 1..MODEL_TOP_MAX, k < V): what
 * a forward would return for it. */
void model_logits_list(const float *row, int V, int k, int32_t *out);

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
/* model_mtp_forward, then row lrow's logits through head `which` as model_lm_head_top (top_out NULL) or
 * model_lm_head_list: the same numbers as those two calls. On a device backend the head reads the row
 * where the MTP layer left it and the output rows come down once, behind the head (one wait instead of
 * two, nothing uploaded in between). hidden_out NULL: the output rows are not wanted. hidden NULL (one
 * row, a standalone state): the input is the previous call's row lrow, kept where it was computed —
 * a chain of draft steps then moves no hidden row between host and device at all. Any other MTP call
 * on the state ends what is kept. Returns 0 or an error (EINVAL when hidden is NULL and nothing is
 * kept). */
int model_mtp_forward_head(const mtplx_model *m, mtp_state *s, const float *hidden, const int32_t *next_tokens, int T,
                           float *hidden_out, head_kind which, int lrow, float *logits, int top, int32_t *top_out,
                           mtplx_err *err);

/* The head of a batched MTP step (model_mtp_forward_batch_head): one row of each sequence that wants
 * logits, through one head, as model_lm_head_list (lists not NULL) or model_lm_head_top would give
 * them for those rows gathered in order. */
typedef struct {
    head_kind which;
    const int *lrow;  /* [n] the row of sequence i whose logits are wanted, in [0, T), or -1: none */
    int top;          /* lists: their length k (1..MODEL_TOP_MAX); else model_lm_head_top's top (0: whole) */
    float *logits;    /* [k][V] host, k = sequences with lrow >= 0 (their rows, or scratch with lists) */
    int32_t *lists;   /* [k][2·top + 2] host, or NULL: logits rows */
} mtp_batch_head;

/* model_mtp_forward_batch, then the head h over the wanted rows: the same numbers as those two calls
 * (tests/unit/test_batch.c). On a device backend the head reads the rows where the layer left them and
 * the sequences' output rows come down behind it: one wait a step, nothing uploaded in between. Returns
 * 0 or an error (EINVAL on a bad lrow or top, checked before anything runs). */
int model_mtp_forward_batch_head(const mtplx_model *m, model_batch *b, const mtp_seq *seqs, int n,
                                 const mtp_batch_head *h, mtplx_err *err);

#endif
