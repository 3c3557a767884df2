/* bench_kernels.h — machine and model-speed measurements behind `mtplx bench --membw` and
 * `--verify-cost`: memory read bandwidth, the cost of an R-row decode-position forward relative to a
 * 1-row forward (what an MTP verify of R-1 drafts costs), AR decode bandwidth use and prefill speed. */
#ifndef MTPLX_ENGINE_BENCH_KERNELS_H
#define MTPLX_ENGINE_BENCH_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "../base/err.h"
#include "../model/model.h"
#include "sampler.h"

#define BENCH_MAX_ROWS 32
#define BENCH_MATMUL_MAX_ROWS 256 /* --matmul: many-row calls too (the CUDA GEMM, prefill chunks of 128) */
#define BENCH_MAX_DRAFT_MODELS 8

typedef struct {
    size_t bytes;      /* buffer read (allocated and touched first) */
    int threads;       /* pool threads used for the all-core figure */
    double gbs_one;    /* best GB/s (1e9 bytes/s) reading it on one thread */
    double gbs_all;    /* best GB/s with every pool thread reading a slice */
} bench_membw;

/* Streaming-read bandwidth over a `bytes` buffer, best of `reps`. Returns 0 or ENOMEM. */
int bench_membw_measure(size_t bytes, int reps, bench_membw *out, mtplx_err *err);

typedef struct {
    int max_rows;                        /* R = 1..max_rows measured */
    int reps;                            /* timed forwards per R (interleaved over R) */
    int context;                         /* positions in the state before the first timed forward */
    int logits_top;                      /* 0: every row's whole logits; k: each row's k best (fwd_request) */
    double median_s[BENCH_MAX_ROWS + 1]; /* median seconds of an R-row forward, logits for every row */
    double ratio[BENCH_MAX_ROWS + 1];    /* median_s[R] / median_s[1] */
    double membw_gbs;                    /* with a bandwidth buffer: median GB/s of one all-thread read
                                            of it per round, between the forwards; else 0 */
} bench_verify;

/* Prefill `context` random tokens, then `reps` rounds of: for R = 1..max_rows, one capturing R-row
 * forward (all rows' logits, like a verify; logits_top k in 1..BE_TOP_MAX: each row's k best only, as a
 * top_k = k verify asks a device backend for them) followed by model_state_commit(1), so the position
 * advances by one per forward as in decoding. With bw (bw_bytes of touched memory, may be NULL) each
 * round also reads it once on all pool threads, so the bandwidth is measured in the same rounds as
 * the forwards (this VM's bandwidth drifts by ±20 % over seconds). Returns 0 or an error. */
int bench_verify_cost(const mtplx_model *m, int max_rows, int context, int reps, int logits_top, uint64_t seed,
                      const float *bw, size_t bw_bytes, bench_verify *out, mtplx_err *err);

/* A buffer of `bytes` (2 MiB-aligned, huge-page advised, every page touched) for bandwidth reads;
 * free() it. NULL when out of memory. */
float *bench_membw_buffer(size_t bytes);

/* Seconds to prefill `tokens` random tokens (logits of the last row only) on a fresh state, best of
 * `reps`. Returns 0 or an error. */
int bench_prefill_seconds(const mtplx_model *m, int tokens, int reps, uint64_t seed, double *seconds, mtplx_err *err);

typedef struct {
    int count;                           /* matrices, called back to back (one "pass") */
    double bytes;                        /* bytes of weights one pass reads (packed copies as streamed) */
    int max_rows, reps;
    double median_s[BENCH_MATMUL_MAX_ROWS + 1]; /* median seconds of a pass with T = 1..max_rows rows */
} bench_matmul_out;

/* Kernel speed alone: `count` random [n x k] weights of `format` ("q4" / "q8": MLX affine, groups of
 * gs = 32 / 64 / 128 inputs, bf16 scales, repacked as at load; "bf16": with its AMX copy where the CPU has AMX), more bytes than
 * the caches hold when count·n·k is large. Each round runs one pass of kern_matmul over all of them
 * for T = 1..max_rows (interleaved), `reps` rounds. Returns 0, EINVAL or ENOMEM. */
int bench_matmul(const char *format, int gs, int n, int k, int count, int max_rows, int reps, uint64_t seed,
                 bench_matmul_out *out, mtplx_err *err);

/* Bytes of weights one decode step reads: every tensor of the checkpoint in `dir` except the
 * embedding table (one row is read) and the MTP head (mtp.*); a tied head counts the embedding once;
 * the routed experts of an MoE layer (`.mlp.experts.`, `.mlp.switch_mlp.`: stacked or one tensor per
 * expert, all of one size) count `expert_frac` (= top-k / experts: a token reads exactly k of them;
 * 1 for dense models) of their bytes. *all gets the bytes of every tensor. Returns 0 or an error. */
int bench_weight_bytes(const char *dir, int tied, double expert_frac, uint64_t *per_token, uint64_t *all,
                       mtplx_err *err);

/* One draft step's parts, median seconds over the timed steps. */
typedef struct {
    double layer_s;    /* model_mtp_forward of one row (fc + the MTP decoder layer + norm) */
    double head_s;     /* model_lm_head(HEAD_DRAFT) of that row */
    double sample_s;   /* sampler_build of q under the draft's sampler params + the draw */
    double step_s;     /* the three together, timed as one */
} bench_draft;

/* Cost of one MTP draft step on model m (with whatever draft copies it carries): prefill `context`
 * random tokens through the trunk and the MTP history, then `steps` draft steps of one row each,
 * chained as in a depth-`steps` draft (the MTP state is trimmed back every `chain` steps so the
 * position stays near `context`). sp: the draft sampler (no penalties). models[n] are measured
 * interleaved step by step so that load on the machine hits them alike; out[n]. Returns 0 or an
 * error. */
int bench_draft_cost(const mtplx_model *const *models, int n, int context, int steps, int chain, uint64_t seed,
                     const sampler_params *sp, bench_draft *out, mtplx_err *err);

/* Expected acceptance of each draft model along real text, teacher-forced: for every position j of
 * each text, the MTP history holds the true pairs (h_i, x_{i+1}), i <= j, and the draft chain is run
 * d = 1..depth steps from (h_j, x_{j+1}) feeding the true tokens x_{j+1+d}; at each step
 * alpha_d += sum_v min(p(v), q_d(v)) = the probability that draft d is accepted given that its
 * context is the true text; p = the target's sampler distribution (sp_p, no penalties) for the token
 * x_{j+1+d}, q_d = the draft sampler's (sp_q) on HEAD_DRAFT. alpha[k * depth + d - 1] = the mean
 * over *positions (filled) positions for models[k]; only positions j >= score_from[i] of text i are
 * scored (score_from may be NULL = all), the earlier ones only fill the MTP history.
 * Deterministic (nothing is sampled). Returns 0 or an error. */
int bench_draft_accept(const mtplx_model *const *models, int n, const int32_t *const *texts, const int *lens,
                       const int *score_from, int n_texts, int depth, const sampler_params *sp_p, const sampler_params *sp_q, double *alpha,
                       long *positions, mtplx_err *err);

#endif
