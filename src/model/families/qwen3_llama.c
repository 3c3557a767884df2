/* qwen3_llama.c — the attention-only families qwen3 and llama: every layer is grouped-query
 * attention with a dense SwiGLU MLP, all shared defaults (config.c, weights.c, forward.c); qwen3
 * adds per-head q/k RMSNorms. Neither has an MTP head, so both run autoregressively only. */
#include "family_ops.h"

const model_family family_qwen3 = {
    .arch = ARCH_QWEN3,
    .name = "qwen3",
    .model_types = {"qwen3"},
    .runnable = 1,
    .mtp = 0,
    .reason = "attention-only family without an MTP head (AR only)",
    .qk_norm = 1,
    .attn_mixer = MIXER_ATTN,
};

const model_family family_llama = {
    .arch = ARCH_LLAMA,
    .name = "llama",
    .model_types = {"llama"},
    .runnable = 1,
    .mtp = 0,
    .reason = "attention-only family without an MTP head (AR only)",
    .attn_mixer = MIXER_ATTN,
};
