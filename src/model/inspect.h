/* inspect.h — what a checkpoint directory holds and whether this engine can run it.
 *
 * Every command that loads a model calls inspect_require_runnable() (or inspect_model() and checks
 * the tier) first, so a checkpoint is either run correctly or refused with a reason — never run
 * badly (model_load calls it). The decision reads one table, the family table (families/table.c):
 * each family says whether its forward and its MTP head run. Only config.json and safetensors headers are read. */
#ifndef MTPLX_MODEL_INSPECT_H
#define MTPLX_MODEL_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/err.h"
#include "config.h"

typedef enum {
    TIER_VERIFIED = 0,      /* runs, with its MTP head as the drafter */
    TIER_AR_ONLY = 1,       /* runs autoregressively: no MTP head, or no MTP support for the family */
    TIER_UNSUPPORTED = 2,   /* refused: the reason names what is missing */
    TIER_NOT_A_MODEL = 3,   /* refused: no config.json or no weights */
} model_tier;

typedef enum { MTP_LAYOUT_NONE = 0, MTP_LAYOUT_QWEN, MTP_LAYOUT_DEEPSEEK } mtp_layout;

typedef struct {
    model_tier tier;
    char reason[600];           /* one sentence: why this tier */
    char dir[512];              /* the directory inspected */
    int has_config;             /* config.json parsed */
    model_config cfg;           /* valid when has_config */
    int has_weights;            /* safetensors opened and validated */

    int n_tensors;
    int64_t params;             /* logical trunk parameters (MLX U32 packed counted unpacked) */
    int64_t params_mtp;         /* logical parameters of the MTP head tensors */
    int64_t params_ignored;     /* vision tower etc., not loaded */
    size_t weight_bytes;        /* bytes of tensor data on disk (mmap'd) */
    size_t mtp_bytes;           /* of which MTP tensors */
    int dtype_tensors[DT_COUNT];/* tensors per dtype */
    size_t dtype_bytes[DT_COUNT];

    mtp_layout mtp;             /* MTP head found in the weights */
    int mtp_layers_found;       /* layers of it present */

    int context;                /* positions the memory figures are for */
    int n_attn_layers, n_gdn_layers;
    size_t kv_bytes_per_token;  /* trunk attention KV per position (fp32 K and V) */
    size_t kv_bytes;            /* trunk KV cache at `context` */
    size_t gdn_state_bytes;     /* GDN conv + recurrent states (fp32), independent of context */
    size_t mtp_kv_bytes;        /* MTP head KV cache at `context` (0 without MTP) */
    size_t total_bytes;         /* weights + kv + gdn state + mtp kv */
} inspect_report;

/* Inspect dir for a `context`-position sequence (<= 0: 4096). Returns 0 with rep filled — the tier
 * says whether it runs — or an error code when a file is present but malformed (config.json or a
 * safetensors header; the message names file and field/tensor). rep is caller-owned (it is large:
 * allocate it, do not put it on a small stack). */
int inspect_model(const char *dir, int context, inspect_report *rep, mtplx_err *err);

/* Confirm a runnable tier by loading the model (model_load: every tensor's presence, shape and
 * dtype): an unsupported tensor (e.g. a dtype or quantization layout the forward lacks) turns the
 * tier into unsupported with the loader's message, a verified model whose MTP head is not bound
 * into ar-only. Other load failures (missing tensor, bad shape) return the error. No-op for the
 * refused tiers. Weights are mmap'd, not read, so this stays cheap. */
int inspect_confirm_load(inspect_report *rep, mtplx_err *err);

/* The check every loading command runs first: 0 when dir is verified or ar-only (*tier_out, may be
 * NULL, gets which), else MTPLX_EUNSUPPORTED (unsupported), MTPLX_EIO (not a model) or the
 * malformed-file error, with err naming the reason. */
int inspect_require_runnable(const char *dir, model_tier *tier_out, mtplx_err *err);

/* "verified", "ar-only", "unsupported", "not-a-model". */
const char *inspect_tier_name(model_tier t);

#endif
