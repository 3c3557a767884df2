/* moe.h — mixture-of-experts routing and routed-expert accumulation.
 *
 * Two router families exist in the checkpoints we run:
 *   - Qwen (qwen3_5_moe, qwen3_next): p = softmax_f32(logits); top-k of p; optionally renormalise the
 *     k weights to sum 1 (norm_topk_prob).
 *   - DeepSeek-V3: s = sigmoid(logits); selection uses s + e_score_correction_bias, first keeping the
 *     topk_group groups whose score (sum of their two best biased scores) is largest, then the top-k
 *     experts inside those groups (experts of dropped groups count as score 0, as HF masks them);
 *     weights are the *unbiased* s of the chosen experts, optionally renormalised (+1e-20), times
 *     routed_scaling_factor.
 * Routing is per row and depends on nothing else. The expert accumulation groups rows by expert
 * for the matmuls (kern_matmul is row-invariant) and adds each row's expert outputs in ascending
 * expert index, so a row's result does not depend on which other rows share the call (DESIGN.md §3). */
#ifndef MTPLX_KERNELS_MOE_H
#define MTPLX_KERNELS_MOE_H

#include "../base/err.h"
#include "matmul.h"

#define MOE_MAX_EXPERTS 1024
#define MOE_MAX_TOPK 64

/* moe_score_fn and moe_router (how one layer routes) are in src/backend/weight.h. */

/* Check a router description for impossible values (K > E, E not divisible by n_group, fewer than
 * two experts per group with grouping on, ...). Returns 0 or MTPLX_EINVAL with a message. */
int kern_moe_router_check(const moe_router *r, mtplx_err *err);

/* Route one row: from its router logits[E] choose K experts. idx[K] gets expert ids in ascending
 * order, w[K] their weights. scratch holds 2·E floats. Deterministic; ties go to the lower index. */
void kern_moe_route(const moe_router *r, const float *logits, int *idx, float *w, float *scratch);

/* moe_expert (one routed expert's three weights) is in src/backend/weight.h. */

/* The experts of one step of a kern_moe_experts window: their down projections go to the thread pool
 * in one kern_matmul_each (<= KERN_MM_N_MAX), their gate and up projections in two of MOE_GU_BATCH
 * experts (two products each). */
#define MOE_ROW_STEP 8
#define MOE_GU_BATCH 4
/* Gathered (row, expert) pairs a window holds at least (kern_moe_experts; more when the scratch has
 * more rows). */
#define MOE_BATCH_ROWS 128

struct moe_window; /* moe.c */

/* Scratch for kern_moe_experts over up to `rows` rows; allocate once (hot paths do not allocate). */
typedef struct {
    int rows;          /* row capacity R */
    int brows;         /* rows of the buffers below: max(R, MOE_BATCH_ROWS) */
    int hidden;        /* H */
    int inter;         /* I (largest expert width) */
    float *xg;         /* [brows][H] gathered input rows (of one expert, or of all in a batch) */
    float *g;          /* [brows][I] gate, then silu(gate)·up */
    float *u;          /* [brows][I] up */
    float *y;          /* [brows][H] expert output */
    int *rows_of;      /* [brows] row index of each gathered row */
    float *w_of;       /* [brows] routing weight of each gathered row */
    int *order;        /* [rows·MOE_MAX_TOPK] the call's route slots sorted by (expert, row) */
    struct moe_window *window; /* the window being computed (its expert list) */
} moe_scratch;

/* Allocate scratch for R rows of width H through experts of width I. Returns 0 or ENOMEM.
 * Free with kern_moe_scratch_free (safe on a zeroed struct). */
int kern_moe_scratch_init(moe_scratch *s, int rows, int hidden, int inter, mtplx_err *err);
void kern_moe_scratch_free(moe_scratch *s);

/* out[t][0..H) = Σ_j w[t·K+j] · expert_{idx[t·K+j]}(x[t]) for t < T (out is overwritten; rows spaced
 * ldo / ldx floats). idx rows must be ascending (as kern_moe_route gives) with ids < E. T must not
 * exceed s->rows, expert widths not s->inter. */
void kern_moe_experts(float *out, int ldo, const float *x, int ldx, int T, const moe_expert *experts,
                      int E, const int *idx, const float *w, int K, moe_scratch *s);

#endif
