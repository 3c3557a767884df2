/* dtype.h — element types found in checkpoints, and scalar bf16/f16 <-> f32 conversion. */
#ifndef MTPLX_BASE_DTYPE_H
#define MTPLX_BASE_DTYPE_H

#include <stdint.h>
#include <string.h>

typedef enum {
    DT_F32 = 0,
    DT_F16,
    DT_BF16,
    DT_I32,
    DT_I64,
    DT_U32,   /* MLX packed quantized weights */
    DT_U8,
    DT_I8,
    DT_BOOL,
    DT_F64,
    DT_COUNT
} mtplx_dtype;

/* Bytes per element; 0 for an unknown value. */
size_t dtype_size(mtplx_dtype t);
/* Safetensors spelling ("F32", "BF16", ...); "?" for unknown. */
const char *dtype_name(mtplx_dtype t);
/* Parse a safetensors dtype string; returns 0 and sets *out, or -1 when unknown. */
int dtype_parse(const char *s, mtplx_dtype *out);

static inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round-to-nearest-even; NaN stays NaN. */
static inline uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

#endif
