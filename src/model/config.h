/* config.h — architecture description parsed from a checkpoint's config.json.
 *
 * Real Qwen3.5 checkpoints are multimodal wrappers with the text parameters nested under
 * `text_config`; Qwen3-Next and the AR families are flat. This struct is the one place the rest of
 * the engine reads shapes from: nothing downstream hard-codes a dimension. */
#ifndef MTPLX_MODEL_CONFIG_H
#define MTPLX_MODEL_CONFIG_H

#include "../base/err.h"

#define CFG_MAX_LAYERS 512
#define CFG_MAX_EOS 8

typedef enum {
    ARCH_UNKNOWN = 0,
    ARCH_QWEN3_5,       /* qwen3_5 / qwen3_5_text: hybrid GDN + gated attention, dense MLP */
    ARCH_QWEN3_5_MOE,   /* qwen3_5_moe / qwen3_5_moe_text */
    ARCH_QWEN3_NEXT,    /* qwen3_next */
    ARCH_QWEN3,         /* qwen3: attention only */
    ARCH_LLAMA,         /* llama: attention only */
    ARCH_DEEPSEEK_V3,   /* deepseek_v3: MLA + MoE */
} model_arch;

typedef enum { LAYER_GDN = 0, LAYER_ATTN = 1 } layer_kind;

typedef struct {
    char model_type[64];        /* text model_type as found ("qwen3_5_text", ...) */
    char architecture[96];      /* architectures[0] of the top-level config, "" if absent */
    model_arch arch;

    int vocab_size;             /* V */
    int hidden_size;            /* H */
    int n_layers;               /* trunk layers (MTP layers not counted) */
    int intermediate_size;      /* dense SwiGLU width */
    float rms_norm_eps;
    int tie_word_embeddings;    /* 1: LM head = embed_tokens */
    int max_position_embeddings;
    layer_kind layer_kinds[CFG_MAX_LAYERS]; /* from layer_types or full_attention_interval */

    /* full attention */
    int n_heads;                /* query heads */
    int n_kv_heads;             /* GQA key/value heads */
    int head_dim;               /* Dh */
    int attn_output_gate;       /* 1: q_proj emits [query | gate] per head (Qwen3.5 / Next) */
    int qk_norm;                /* 1: q_norm / k_norm over Dh */
    int zero_centered_norm;     /* 1: decoder RMSNorms apply (1 + w) */
    double rope_theta;
    int rotary_dim;             /* dims rotated = head_dim * partial_rotary_factor (even) */

    /* Gated DeltaNet (linear attention) */
    int lin_k_heads;            /* Hk */
    int lin_v_heads;            /* Hv (multiple of Hk) */
    int lin_k_dim;              /* Dk */
    int lin_v_dim;              /* Dv */
    int conv_kernel;            /* Kc */

    /* MoE (0 experts = dense) */
    int n_experts;
    int n_experts_per_tok;
    int moe_intermediate_size;
    int shared_expert_intermediate_size;
    int norm_topk_prob;

    /* MTP */
    int mtp_layers;             /* mtp_num_hidden_layers or num_nextn_predict_layers */

    /* generation defaults (generation_config.json, then config.json) */
    int eos_ids[CFG_MAX_EOS];
    int n_eos;
} model_config;

/* Parse <dir>/config.json (and generation_config.json for EOS ids when present).
 * Returns 0, or an error naming the file and field (missing, wrong type, impossible value). */
int config_load(const char *dir, model_config *cfg, mtplx_err *err);

/* Parse from a JSON text already in memory (used by tests); `what` names it in errors. */
int config_parse(const char *json_text, const char *what, model_config *cfg, mtplx_err *err);

#endif
