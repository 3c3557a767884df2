/* quant.h — MLX affine quantization (reference: mtplx-engine.md §1.9): w = scale·q + bias per group
 * of `group_size` consecutive input elements of one output row, q unsigned `bits` wide, packed
 * little-endian into uint32 (value j of a word at bits [bits·j, bits·j + bits)). */
#ifndef MTPLX_KERNELS_QUANT_H
#define MTPLX_KERNELS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "../base/dtype.h"
#include "../base/err.h"

/* 1 when (bits, group_size) is a format the kernels run: bits 4 or 8, group 32, 64 or 128. */
int quant_format_ok(int bits, int group_size);

/* Quantize w[rows][cols] (f32) the way MLX's affine quantizer does: per group, scale = (max-min)/n
 * (at least 1e-7); the larger-magnitude edge and zero become exactly representable; scales may come
 * out negative. Writes q[rows][cols*bits/32], scales/biases[rows][cols/group_size] in scale_dtype
 * (DT_F32, DT_BF16 or DT_F16; q is computed from the fp32 scale/bias, which are then rounded).
 * Returns 0, or EINVAL for an unsupported format or cols not a multiple of group_size. */
int quant_affine(const float *w, int rows, int cols, int bits, int group_size, mtplx_dtype scale_dtype,
                 uint32_t *q, void *scales, void *biases, mtplx_err *err);

/* Bytes of the packed weight, and of one scales (or biases) array, for a [rows][cols] matrix. */
size_t quant_weight_bytes(int rows, int cols, int bits);
size_t quant_scales_bytes(int rows, int cols, int group_size, mtplx_dtype scale_dtype);

#endif
