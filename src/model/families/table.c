/* table.c — the family table (table.h): one entry per model_arch, each defined in its family's
 * file under src/model/families/. This list and the model_arch enum are the only places that
 * enumerate architectures; test_family_table checks that they agree. */
#include <stddef.h>
#include <string.h>

#include "../config.h"
#include "family_ops.h"

extern const model_family family_qwen3_5, family_qwen3_5_moe, family_qwen3_next, family_qwen3, family_llama,
    family_deepseek_v3;

/* What an unrecognised model_type gets: parsed leniently, runs nothing. */
static const model_family family_unknown = {
    .arch = ARCH_UNKNOWN,
    .name = "unknown",
    .reason = "unknown model_type",
    .attn_mixer = MIXER_ATTN,
};

/* Table order is listing order (`mtplx inspect`'s supported list). */
static const model_family *const k_families[] = {
    &family_unknown, &family_qwen3_5, &family_qwen3_5_moe, &family_qwen3_next,
    &family_qwen3,   &family_llama,   &family_deepseek_v3,
};

#define N_FAMILIES ((int)(sizeof k_families / sizeof k_families[0]))

int family_count(void) { return N_FAMILIES; }

const model_family *family_at(int i) { return i >= 0 && i < N_FAMILIES ? k_families[i] : NULL; }

const model_family *family_of(model_arch arch) {
    for (int i = 0; i < N_FAMILIES; i++)
        if (k_families[i]->arch == arch) return k_families[i];
    return &family_unknown;
}

const model_family *family_by_type(const char *model_type) {
    for (int i = 0; model_type && i < N_FAMILIES; i++)
        for (int t = 0; t < FAMILY_MAX_TYPES && k_families[i]->model_types[t]; t++)
            if (strcmp(model_type, k_families[i]->model_types[t]) == 0) return k_families[i];
    return &family_unknown;
}

model_arch config_arch_from_type(const char *model_type) { return family_by_type(model_type)->arch; }

const char *config_arch_name(model_arch a) { return family_of(a)->name; }
