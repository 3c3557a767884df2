/* arch.h — the table of model architectures and what this engine can do with each.
 *
 * One row per model_arch: whether the forward is implemented (runnable) and whether its MTP head
 * is. model_load refuses non-runnable families with the row's reason; `mtplx inspect` reads the same
 * table. A helper adding a family implements it and flips its row here. */
#ifndef MTPLX_MODEL_ARCH_H
#define MTPLX_MODEL_ARCH_H

#include "config.h"

typedef struct {
    model_arch arch;
    const char *name;       /* short family name ("qwen3_5") */
    int runnable;           /* 1: the trunk forward is implemented */
    int mtp;                /* 1: the MTP head (when the checkpoint has one) is implemented */
    const char *reason;     /* why not runnable / not MTP, "" when fully supported */
} arch_info;

/* The row for arch; never NULL (ARCH_UNKNOWN has a row too). */
const arch_info *arch_info_of(model_arch arch);

#endif
