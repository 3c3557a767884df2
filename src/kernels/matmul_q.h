/* matmul_q.h — internal: int8-quantized activations for the MLX-quantized (DT_U32) matmul paths.
 *
 * Numerics of the int8 path (every ISA): each activation row t is quantized per weight group g
 * (the same `group_size` as W): d[t,g] = max|x| / 127, a = rint(x / d) in [-127, 127]. Then
 *   y[t,r] = Σ_g d[t,g] · ( s[r,g] · Σ_{c∈g} q[r,c]·a[t,c]  +  b[r,g] · Σ_{c∈g} a[t,c] )
 * i.e. the exact dot product of the dequantized weight row and the dequantized activation row, up to
 * fp32 rounding. The integer sums are exact (vpdpbusd: unsigned q × signed a); the float sums follow
 * one fixed order per path, so rows are invariant to T and to the thread split. */
#ifndef MTPLX_KERNELS_MATMUL_Q_H
#define MTPLX_KERNELS_MATMUL_Q_H

#include "matmul_internal.h"
#include "quant.h"

typedef enum {
    QA_NATURAL = 0,  /* a in input order (portable path; q8 on every path) */
    QA_Q4_64 = 1,    /* per 64-element chunk: a[2j] at j, a[2j+1] at 32+j (AVX-512 q4 nibble order) */
    QA_Q4_32 = 2,    /* per 32-element chunk: a[2j] at j, a[2j+1] at 16+j (AVX2 q4 nibble order) */
    QA_Q4_128 = 3,   /* per 128-element chunk: a[2j] at j, a[2j+1] at 64+j (AVX-512 q4, K % 128 == 0:
                        one 64-byte load of a weight row = 128 inputs, low nibbles even, high odd) */
} qa_layout;

typedef struct {
    int T, K, G, gs;   /* rows, input features, groups per row (K / gs), group size */
    qa_layout layout;
    int8_t *a;         /* [T][K] quantized activations in `layout` order */
    float *d;          /* [T][G] activation scale per group */
    float *bd;         /* [T][G] d · Σ a over the group (multiplies the weight bias) */
    float *dv;         /* AVX-512 only: [T][K/64][16] d of the group each int32 lane of a chunk covers
                          (QA_Q4_128: [T][K/128][16]) */
    int32_t *asum;     /* AArch64 and AVX2 fills: [T][G] Σ a over the group (the same memory as dv) */
} qact;

/* A repacked quantized weight (kern_pack_set_add; matmul_qpack.c, read by the VNNI / AMX kernels there and
 * by the AVX2 kernel of matmul_qpack_avx2.c as two 8-row halves). Per block of 16 output rows (rows
 * past N are zero) and group g, one contiguous record of `gstride` bytes: the weights (q8: gs/4
 * vectors, vector kq = [row i][4 inputs 4kq..4kq+3]; q4: gs/8 vectors whose low nibbles hold quad j
 * and high nibbles quad j + gs/8), then the 16 scales and the 16 biases in `sdt` (bf16/f16 kept as
 * stored, f32 as f32: 32 or 64 bytes each), so a thread streams one sequential range. */
struct kern_qpack {
    int n_blocks, G, gs, bits;
    mtplx_dtype sdt;    /* DT_BF16, DT_F16 or DT_F32: how scales/biases are stored (as in the checkpoint) */
    size_t gbytes;      /* weight bytes of one (block, group): gs·16·bits/8 */
    size_t gstride;     /* bytes of one (block, group) record: gbytes + 64 (16-bit) or + 128 (f32) */
    uint8_t *q;         /* [n_blocks][G][gstride], 64-byte aligned */
    size_t bytes;       /* bytes at q (the copy; kern_qpack_bytes) */
    void (*release)(void *q, size_t bytes); /* frees q (free, or the owner's unmap) */
};

/* Software prefetch distances (bytes ahead, 0 = off) of the packed q4/q8 kernels for a call of T
 * activation rows: the MTPLX_QPACK_PF / MTPLX_QPACK_PF2 knobs when set, else 4096 into L1 and 16384
 * into L2 — except 1-row calls (decode) on AMD CPUs, which prefetch nothing: on a Zen 5 the
 * hardware prefetchers alone stream one block's records at the plain read rate, and the software
 * prefetches took it down to ~70% (docs/kernels.md, "Prefetch per CPU"). */
void kern_qpack_prefetch(int T, int *pf, int *pf2);

typedef void (*mm_qrows_fn)(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);

/* Quantize x[T][ldx] into qa (buffers already sized; the AVX2 and NEON fills also write qa->asum). */
void qact_fill_portable(const float *x, int ldx, qact *qa);
void qact_fill_avx2(const float *x, int ldx, qact *qa);
void qact_fill_avx512(const float *x, int ldx, qact *qa);
/* AArch64: also fills qa->asum. */
void qact_fill_neon(const float *x, int ldx, qact *qa);

void mm_qrows_portable(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
void mm_qrows_avx2(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
/* AVX-512 VNNI on kern_pack_set_add's repacked weights (w->packed; rows r0 multiple of 16). */
void mm_qrows_packed(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
/* AVX2 without VNNI on the same repacked weights (matmul_qpack_avx2.c): bit-identical to mm_qrows_packed;
 * reads qa->asum (q8). */
void mm_qrows_packed_avx2(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
/* The same with AVX-VNNI's vpdpbusd on ymm (cpu_features.avxvnni): bit-identical to both. */
void mm_qrows_packed_avxvnni(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
/* AMX-INT8 (TDPBSUD) on the same repacked weights: bit-identical to mm_qrows_packed (the integer group
 * sums are exact either way and the float epilogue is the same code); for calls with T >= 3. */
void mm_qrows_amx(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
void mm_qrows_avx512(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
/* AArch64 (matmul_q_neon.c): the integer group sums by widening multiplies (NEON), SDOT (NEON_DOT) or
 * SMMLA (NEON_I8MM), all exact, then one float epilogue: the three give bit-identical results. */
void mm_qrows_neon(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
void mm_qrows_neon_dot(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);
void mm_qrows_neon_i8mm(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1);

/* fp32-activation path (MTPLX_QACT=f32): dequantizes each group and takes fp32 dot products. */
void mm_rows_qf32_portable(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1);

/* Scale or bias number i of a quantized weight, as f32. */
static inline float q_scalar(const void *base, mtplx_dtype dt, size_t i) {
    switch (dt) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)base)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

#endif
