/* synth.h — random-weight checkpoints at real shapes, for benchmarks (`mtplx synth`).
 *
 * The config comes from a preset or a config.json; every tensor the Qwen3.5 loader binds is written
 * (HF layout, prefix `model.`, MTP head `mtp.*`), seeded per tensor name so the output does not
 * depend on write order. Weight scales keep activations finite: linear weights are uniform with
 * std 1/sqrt(fan_in) (output projections further / sqrt(2·layers)), zero-centred norms 0 (effective
 * 1), GDN norms 1, A_log log U(1,16), dt_bias 0. With bits 4/8 every linear weight except the GDN
 * gate projections (in_proj_a / in_proj_b) and the embedding-free small tensors is MLX-affine
 * quantized and config.json gets `quantization` / `quantization_config`. */
#ifndef MTPLX_MODEL_SYNTH_H
#define MTPLX_MODEL_SYNTH_H

#include <stdint.h>

#include "../base/err.h"
#include "../base/progress.h"

typedef struct {
    const char *preset;       /* "bench-2b", or NULL when config_path is set */
    const char *config_path;  /* a config.json to use instead of a preset (qwen3_5 / qwen3_5_text) */
    const char *out_dir;      /* created if missing */
    int bits;                 /* 0 = bf16 dense, 4 or 8 = MLX affine */
    int group_size;           /* 32, 64 or 128 (quantized only) */
    uint64_t seed;
    progress_sink progress;   /* (shards written, shards); fn NULL: none */
} synth_opts;

/* Write config.json, model-XXXXX-of-YYYYY.safetensors shards and model.safetensors.index.json.
 * *total_bytes (may be NULL) gets the tensor bytes written. Returns 0 or an error. */
int synth_write(const synth_opts *o, uint64_t *total_bytes, mtplx_err *err);

/* The JSON text of a preset's config, or NULL for an unknown name. */
const char *synth_preset_config(const char *name);

#endif
