/* convert.h — quantize a checkpoint to MLX affine q4/q8 (`mtplx convert`).
 *
 * Which tensors are quantized: every 2-D `*.weight` of a linear layer or embedding whose input width
 * is a multiple of the group size — projections, MLP, LM head, embedding (QuantizedEmbedding),
 * mtp.fc and the MTP layer. Kept dense (as stored): norms, conv1d, A_log, dt_bias, biases, routers
 * (`mlp.gate.weight`, `shared_expert_gate`) and the GDN gate projections `in_proj_a` / `in_proj_b`
 * (a few rows that set decay and write strength; tiny, and sensitive). Scales/biases take the
 * source dtype (f32 stays f32, bf16 stays bf16). Names and layout are kept, so the output loads
 * like the input; config.json gains `quantization` and `quantization_config`. */
#ifndef MTPLX_MODEL_CONVERT_H
#define MTPLX_MODEL_CONVERT_H

#include <stdint.h>

#include "../base/err.h"
#include "../base/progress.h"

typedef struct {
    const char *in_dir;
    const char *out_dir;     /* created if missing; must differ from in_dir */
    int bits;                /* 4 or 8 */
    int group_size;          /* 32, 64 or 128 */
    progress_sink progress;  /* (tensors done, tensors) as they are converted; fn NULL: none */
} convert_opts;

typedef struct {
    int quantized;           /* tensors quantized */
    int kept;                /* tensors copied as they were */
    uint64_t bytes_in, bytes_out;
} convert_stats;

/* 1 when a tensor of this name and shape is quantized by convert. */
int convert_should_quantize(const char *name, int ndim, const int64_t *shape, int group_size);

/* Read in_dir (config.json + safetensors), write out_dir/model.safetensors + config.json (+ the
 * tokenizer / generation files copied). Returns 0 or an error naming the file or tensor. */
int convert_checkpoint(const convert_opts *o, convert_stats *st, mtplx_err *err);

#endif
