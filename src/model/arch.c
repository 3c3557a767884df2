/* arch.c — the supported-architecture table (see arch.h). */
#include "arch.h"

static const arch_info k_arch[] = {
    {ARCH_UNKNOWN, "unknown", 0, 0, "unknown model_type"},
    {ARCH_QWEN3_5, "qwen3_5", 1, 1, ""},
    {ARCH_QWEN3_5_MOE, "qwen3_5_moe", 1, 1, ""},
    {ARCH_QWEN3_NEXT, "qwen3_next", 1, 1, ""},
    {ARCH_QWEN3, "qwen3", 1, 0, "attention-only family without an MTP head (AR only)"},
    {ARCH_LLAMA, "llama", 1, 0, "attention-only family without an MTP head (AR only)"},
    {ARCH_DEEPSEEK_V3, "deepseek_v3", 1, 1, ""},
};

const arch_info *arch_info_of(model_arch arch) {
    for (unsigned i = 0; i < sizeof k_arch / sizeof k_arch[0]; i++)
        if (k_arch[i].arch == arch) return &k_arch[i];
    return &k_arch[0];
}
