/* config.h — architecture description parsed from a checkpoint's config.json.
 *
 * Real Qwen3.5 checkpoints are multimodal wrappers with the text parameters nested under
 * `text_config`; Qwen3-Next and the AR families are flat. This struct is the one place the rest of
 * the engine reads shapes from: nothing downstream hard-codes a dimension. */
#ifndef MTPLX_MODEL_CONFIG_H
#define MTPLX_MODEL_CONFIG_H

#include "../base/err.h"
#include "families/table.h"

#define CFG_MAX_LAYERS 512
#define CFG_MAX_EOS 8
#define CFG_MAX_QUANT_OVERRIDES 256

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

    unsigned char layer_moe[CFG_MAX_LAYERS]; /* 1: layer i's MLP is the routed MoE block (else dense) */
    int decoder_sparse_step;    /* qwen3_next: MoE every k-th layer (1 = all) */

    /* RoPE scaling (rope_parameters / legacy rope_scaling); rope_type "default" = none */
    char rope_type[32];         /* "default", "linear", "dynamic", "yarn", "llama3", ... as found */
    double rope_factor;         /* scaling factor (1 when none) */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    int rope_orig_max_pos;      /* original_max_position_embeddings (llama3 / yarn), 0 if absent */
    double rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim; /* yarn */
    int rope_interleave;        /* deepseek_v3: rotate interleaved pairs (rope_interleave) */

    /* DeepSeek-V3 MLA + routing (zero for other families) */
    int q_lora_rank;            /* 0: q_proj is a plain projection */
    int kv_lora_rank;
    int qk_nope_head_dim;
    int qk_rope_head_dim;       /* == rotary_dim */
    int v_head_dim;
    int n_shared_experts;       /* shared expert width = n_shared_experts * moe_intermediate_size */
    int n_group, topk_group;    /* grouped top-k routing */
    double routed_scaling_factor;
    int first_k_dense_replace;  /* layers < k use the dense MLP */
    char scoring_func[16];      /* "sigmoid" (V3) or "softmax" */

    /* Quantization (MLX `quantization` / HF `quantization_config`); bits 0 = none */
    char quant_method[32];      /* "mlx" for MLX affine, else HF quant_method ("fp8", ...), "" none */
    int quant_bits;             /* default bits per weight */
    int quant_group_size;       /* default elements per scale/bias group */
    int n_quant_overrides;
    struct {
        char module[112];       /* module path, e.g. "model.layers.0.mlp.gate" */
        int bits;               /* 0: left unquantized (override value `false`) */
        int group_size;
    } quant_overrides[CFG_MAX_QUANT_OVERRIDES];

    /* MTP */
    int mtp_layers;             /* mtp_num_hidden_layers or num_nextn_predict_layers */

    /* generation defaults (generation_config.json, then config.json) */
    int eos_ids[CFG_MAX_EOS];
    int n_eos;
} model_config;

/* Family lookups through the family table (families/table.c): model_type string -> arch
 * (ARCH_UNKNOWN when not recognised); arch -> short name ("unknown" for ARCH_UNKNOWN). */
model_arch config_arch_from_type(const char *model_type);
const char *config_arch_name(model_arch a);

/* Parse <dir>/config.json (and generation_config.json for EOS ids when present).
 * Returns 0, or an error naming the file and field (missing, wrong type, impossible value). */
int config_load(const char *dir, model_config *cfg, mtplx_err *err);

/* Parse from a JSON text already in memory (used by tests); `what` names it in errors. */
int config_parse(const char *json_text, const char *what, model_config *cfg, mtplx_err *err);

#endif
