/* weight.h — how a stored weight matrix and a routed-MoE layer are described to a backend.
 *
 * A description, never a copy: `data`, `scales`, `biases` point into the mmap'd checkpoint (or into
 * a quantized copy the model layer owns). Every backend reads the same description; what a backend
 * derives from it at load (the CPU backend's repacked VNNI / AMX copies, a GPU backend's device
 * copy) hangs off the backend-private fields, filled by be_weight_prepare (backend.h) and never read
 * by the model layer. The CPU kernels use this very struct under the name kern_weight
 * (docs/architecture.md, "Weights"). */
#ifndef MTPLX_BACKEND_WEIGHT_H
#define MTPLX_BACKEND_WEIGHT_H

#include <stdint.h>

#include "../base/dtype.h"

struct kern_qpack; /* the CPU backend's repacked quantized weight (src/kernels/matmul_qpack.c) */

typedef struct be_weight {
    mtplx_dtype dtype;        /* DT_F32, DT_F16, DT_BF16, or DT_U32 for MLX affine quantized */
    int rows;                 /* output features N */
    int cols;                 /* input features K (logical, unpacked) */
    const void *data;         /* dense: [rows][cols] elements; quantized: uint32 [rows][cols*bits/32] */
    const void *scales;       /* quantized only: [rows][cols/group_size] of scale_dtype */
    const void *biases;       /* quantized only: same shape/dtype as scales; w = scale*q + bias */
    mtplx_dtype scale_dtype;  /* DT_BF16, DT_F16 or DT_F32 */
    int bits;                 /* quantized only: 4 or 8 */
    int group_size;           /* quantized only: 32, 64 or 128 */
    /* backend-private (CPU backend): set by be_weight_prepare, NULL until then */
    const struct kern_qpack *packed; /* quantized: copy in the AVX-512 VNNI row-block layout */
    const uint16_t *amx;      /* bf16, K % 32 == 0: the full 16-row blocks in AMX tile order */
} be_weight;

/* How a routed-MoE layer's router scores and picks experts. Plain values from the config. */
typedef enum {
    MOE_SCORE_SOFTMAX = 0,  /* Qwen: softmax over all experts, fp32 */
    MOE_SCORE_SIGMOID = 1,  /* DeepSeek-V3: independent sigmoids */
} moe_score_fn;

typedef struct {
    int n_experts;                 /* E (1..MOE_MAX_EXPERTS) */
    int top_k;                     /* K (1..min(E, MOE_MAX_TOPK)) */
    moe_score_fn score;
    int norm_topk;                 /* 1: divide the K weights by their sum */
    int n_group;                   /* expert groups for grouped selection; 1 = no grouping */
    int topk_group;                /* groups kept (1..n_group) */
    const float *correction_bias;  /* [E] added to scores for selection only; NULL = none */
    float scaling;                 /* routed_scaling_factor, multiplies the final weights (1 = none) */
} moe_router;

/* One routed expert: SwiGLU down(silu(gate·x) ⊙ up·x). Any of the numbered, fused gate_up or
 * stacked switch_mlp layouts is described as three weights. */
typedef struct {
    be_weight gate;  /* [I][H] */
    be_weight up;    /* [I][H] */
    be_weight down;  /* [H][I] */
} moe_expert;

/* Routed MoE block: y = Σ_k w_k · expert_k(x) + [sigmoid(shared_gate·x)] · shared(x). */
typedef struct {
    moe_router router;        /* E, K, scoring, grouping; correction_bias points into the family arena */
    be_weight router_w;       /* [E][H] router logits (fp32 accumulation) */
    moe_expert *experts;      /* [E] views into the checkpoint (numbered, fused gate_up, or switch_mlp) */
    int inter;                /* I: routed expert width */
    int shared_inter;         /* shared expert width, 0 = no shared expert */
    moe_expert shared;        /* valid when shared_inter > 0 */
    int shared_gated;         /* 1: Qwen's sigmoid(shared_expert_gate · x) scales the shared expert */
    be_weight shared_gate;    /* [1][H] when shared_gated */
} moe_weights;

#endif
