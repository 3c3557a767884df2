/* table.h — the family table's ids and lookups: every model architecture this engine knows.
 *
 * A model_arch names one entry of the table in families/table.c; the entry (a model_family,
 * families/family_ops.h) holds everything that differs between architectures: the model_type
 * strings that select it, what config.json adds, how its tensors bind, its layer forward parts, its
 * MTP layer and its KV shape. Nothing else in the code base switches on the architecture
 * (docs/architecture.md, "Adding a model family"). */
#ifndef MTPLX_MODEL_FAMILIES_TABLE_H
#define MTPLX_MODEL_FAMILIES_TABLE_H

typedef enum {
    ARCH_UNKNOWN = 0,
    ARCH_QWEN3_5,       /* qwen3_5 / qwen3_5_text: hybrid GDN + gated attention, dense MLP */
    ARCH_QWEN3_5_MOE,   /* qwen3_5_moe / qwen3_5_moe_text */
    ARCH_QWEN3_NEXT,    /* qwen3_next */
    ARCH_QWEN3,         /* qwen3: attention only */
    ARCH_LLAMA,         /* llama: attention only */
    ARCH_DEEPSEEK_V3,   /* deepseek_v3: MLA + MoE */
    ARCH_COUNT          /* number of ids (keep last) */
} model_arch;

typedef struct model_family model_family; /* families/family_ops.h */

/* The entry of arch; never NULL (ARCH_UNKNOWN and out-of-range ids get the entry that runs
 * nothing). */
const model_family *family_of(model_arch arch);

/* The entry whose model_types list holds model_type (exact match); the unknown entry when none
 * does or model_type is NULL. */
const model_family *family_by_type(const char *model_type);

/* The table itself, for listings and tests: entries 0 .. family_count() - 1, in table order (the
 * unknown entry first). */
int family_count(void);
const model_family *family_at(int i);

#endif
