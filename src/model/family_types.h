/* family_types.h — weight layouts of the non-Qwen3.5-dense families, embedded in model_internal.h's
 * layer_weights / mtplx_model: the routed MoE feed-forward (qwen3_5_moe, qwen3_next, deepseek_v3),
 * DeepSeek's multi-head latent attention (MLA) and its MTP layer, and the fused Qwen3-Next GDN
 * projections. Types only; the code is in family.c (MoE, RoPE scaling, refusals) and the family
 * files families/deepseek_v3.c (MLA, DeepSeek MTP) and families/qwen3_next.c (fused GDN). */
#ifndef MTPLX_MODEL_FAMILY_TYPES_H
#define MTPLX_MODEL_FAMILY_TYPES_H

#include <stddef.h>

#include "../backend/weight.h"


/* moe_weights (the routed MoE block) is in src/backend/weight.h: backends run it as one op. */

/* DeepSeek-V3 multi-head latent attention. Head h's query is [nope (Dn) | rope (Dr)]; its key is
 * [kv_b(latent) nope part | the one shared rotated key of Dr dims]; its value is Dv wide. */
typedef struct {
    be_weight q_a;          /* [q_lora][H] when q_lora > 0 */
    const float *q_a_norm;    /* [q_lora] plain RMSNorm weight */
    be_weight q_b;          /* [nH·(Dn+Dr)][q_lora]; or q_proj [nH·(Dn+Dr)][H] when q_lora == 0 */
    be_weight kv_a;         /* [kv_lora + Dr][H]: latent then the shared rope key */
    const float *kv_a_norm;   /* [kv_lora] */
    be_weight kv_b;         /* [nH·(Dn+Dv)][kv_lora]: per head nope key then value */
    be_weight o;            /* [H][nH·Dv] */
} mla_weights;

/* Qwen3-Next fused GDN input projections (grouped by key head, see docs/families.md). */
typedef struct {
    int fused;                /* 1: the two matrices below replace in_proj_qkv/z/b/a */
    be_weight qkvz;         /* [Hk·(2·Dk + 2·r·Dv)][H], r = Hv/Hk */
    be_weight ba;           /* [Hk·2·r][H] */
} gdn_fused_weights;

/* Per-model family state (a field of mtplx_model): fp32 copies of small vectors and the expert
 * tables, plus DeepSeek's MTP layer. */
typedef struct {
    float *vec;               /* arena of fp32 vectors (correction biases, MLA and DeepSeek MTP norms) */
    size_t vec_used, vec_cap; /* floats */
    moe_expert *experts;      /* arena of expert views: E per MoE layer */
    size_t experts_used, experts_cap;
    int experts_prepared;     /* 1: routed experts get the backend's copy (be_ops.routed_copies) */
    char load_note[320];      /* "" or what the user should know about this load (model_load_note) */
    int rope_interleave;      /* MLA rope dims rotate as interleaved pairs */
    float rope_attn_factor;   /* cos/sin multiplier (YaRN attention factor; 1 otherwise) */
    float mla_softmax_mult;   /* DeepSeek: softmax scale multiplier mscale(factor, mscale_all_dim)² */
    /* DeepSeek MTP layer (model.layers.{N}.*) */
    int ds_mtp;               /* 1: bound; the mtp_weights' layer holds its decoder block */
    be_weight ds_embed;     /* [V][H] its embed_tokens (the trunk's when absent) */
    const float *ds_enorm;    /* [H] */
    const float *ds_hnorm;    /* [H] */
    be_weight ds_eh_proj;   /* [H][2H] over [enorm(embed) | hnorm(hidden)] */
    const float *ds_head_norm;/* [H] shared_head.norm */
    be_weight ds_head;      /* [V][H] shared_head.head (HEAD_DRAFT) */
} family_model;

#endif
