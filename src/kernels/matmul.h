/* matmul.h — y = x · Wᵀ for T activation rows against one weight matrix, any stored format.
 *
 * The weight is described, never copied: `data` points into the mmap'd checkpoint. Every kernel
 * variant (portable C, AVX2, AVX-512, VNNI/BF16) must be row-invariant: row t of y depends only on
 * row t of x and W, with the same arithmetic whatever T is (DESIGN.md §3). */
#ifndef MTPLX_KERNELS_MATMUL_H
#define MTPLX_KERNELS_MATMUL_H

#include "../base/dtype.h"
#include "../base/err.h"

typedef struct kern_qpack kern_qpack;   /* a repacked quantized weight (matmul_qpack.c) */
typedef struct kern_pack_set kern_pack_set;

typedef struct {
    mtplx_dtype dtype;        /* DT_F32, DT_F16, DT_BF16, or DT_U32 for MLX affine quantized */
    int rows;                 /* output features N */
    int cols;                 /* input features K (logical, unpacked) */
    const void *data;         /* dense: [rows][cols] elements; quantized: uint32 [rows][cols*bits/32] */
    const void *scales;       /* quantized only: [rows][cols/group_size] of scale_dtype */
    const void *biases;       /* quantized only: same shape/dtype as scales; w = scale*q + bias */
    mtplx_dtype scale_dtype;  /* DT_BF16, DT_F16 or DT_F32 */
    int bits;                 /* quantized only: 4 or 8 */
    int group_size;           /* quantized only: 32, 64 or 128 */
    const kern_qpack *packed; /* optional (quantized): kern_pack_set_add's copy in the layout of the
                                 AVX-512 VNNI row-block kernel; NULL = use data/scales/biases */
    const uint16_t *amx;      /* optional (bf16, K % 32 == 0): kern_pack_set_add's copy of the full
                                 16-row blocks in AMX tile order (matmul_amx.c); NULL = no AMX path */
} kern_weight;

/* y[t*ldy + r] = Σ_c x[t*ldx + c] · W[r][c] for t < T, r < rows. fp32 accumulation.
 * Precondition (asserted, callers validate shapes at load): ldx >= cols, ldy >= rows. */
void kern_matmul(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w);

/* One product of kern_matmul_n: y[t*ldy + r] = Σ_c x[t*ldx + c] · w[r][c]. */
typedef struct {
    float *y;
    int ldy;
    const kern_weight *w;
} kern_mm_out;

#define KERN_MM_N_MAX 8

/* n <= KERN_MM_N_MAX matmuls that read the same activations x[T][ldx] (q/k/v, gate/up, the GDN
 * input projections), split over the thread pool together in one dispatch, so small ones do not
 * each run alone on the caller or pay their own hand-off. Every output is bit-identical to
 * kern_matmul(out.y, out.ldy, x, ldx, T, out.w): the same row functions on the same rows. The
 * outputs must not overlap each other or x. */
void kern_matmul_n(const kern_mm_out *outs, int n, const float *x, int ldx, int T);

/* Dequantize/convert row r of W into out[cols] (embedding lookup, tied heads). */
void kern_weight_row(const kern_weight *w, int r, float *out);

/* Quantized weights take int8 activations by default (see matmul_q.h for the numerics);
 * on = 1 switches to fp32 activations (dequantize and FMA; slower, closer to the reference), as does
 * $MTPLX_QACT=f32 at start-up. Not meant to be flipped while kernels run. */
void kern_matmul_set_qact_f32(int on);

/* Free the calling thread's grow-only scratch for quantized activations (tests, thread exit). */
void kern_matmul_release_scratch(void);

/* Repack a weight for a faster kernel and attach the copy: a quantized weight for the AVX-512 VNNI
 * kernel (w->packed: 16 output rows per vector, so one activation quad broadcast feeds 16 rows); a
 * bf16 weight for the AMX-BF16 kernel (w->amx: 1 KiB tiles in the order the kernel streams them).
 * The copy is owned by *set (created on first use) and freed with kern_pack_set_free. A no-op
 * returning 0 when nothing applies (CPU without VNNI / AMX or the path switched off by
 * $MTPLX_KERNEL, K % 64 != 0 resp. K % 32 != 0, fewer than 16 rows, f32/f16 weights,
 * $MTPLX_QPACK=0). Returns 0 or ENOMEM. */
int kern_pack_set_add(kern_pack_set **set, kern_weight *w, mtplx_err *err);
void kern_pack_set_free(kern_pack_set *set);
/* Bytes held by the packed copies. */
size_t kern_pack_set_bytes(const kern_pack_set *set);

/* The portable reference path; kept for tests that compare the SIMD paths against it. */
void kern_matmul_ref(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w);

#endif
