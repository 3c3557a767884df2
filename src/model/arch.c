/* arch.c — the supported-architecture table (see arch.h). */
#include "arch.h"

static const arch_info k_arch[] = {
    {ARCH_UNKNOWN, "unknown", 0, 0, "unknown model_type"},
    {ARCH_QWEN3_5, "qwen3_5", 1, 1, ""},
    {ARCH_QWEN3_5_MOE, "qwen3_5_moe", 0, 0, "MoE feed-forward not implemented yet (issue 6)"},
    {ARCH_QWEN3_NEXT, "qwen3_next", 0, 0, "fused in_proj_qkvz/ba and MoE not implemented yet (issue 6)"},
    {ARCH_QWEN3, "qwen3", 0, 0, "attention-only families not implemented yet (issue 6)"},
    {ARCH_LLAMA, "llama", 0, 0, "attention-only families not implemented yet (issue 6)"},
    {ARCH_DEEPSEEK_V3, "deepseek_v3", 0, 0, "MLA attention and MoE not implemented yet (issue 6)"},
};

const arch_info *arch_info_of(model_arch arch) {
    for (unsigned i = 0; i < sizeof k_arch / sizeof k_arch[0]; i++)
        if (k_arch[i].arch == arch) return &k_arch[i];
    return &k_arch[0];
}
