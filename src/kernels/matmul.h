/* matmul.h — y = x · Wᵀ for T activation rows against one weight matrix, any stored format.
 *
 * The weight is described, never copied: `data` points into the mmap'd checkpoint. Every kernel
 * variant (portable C, AVX2, AVX-512, VNNI/BF16) must be row-invariant: row t of y depends only on
 * row t of x and W, with the same arithmetic whatever T is (DESIGN.md §3). */
#ifndef MTPLX_KERNELS_MATMUL_H
#define MTPLX_KERNELS_MATMUL_H

#include "../base/dtype.h"
#include "../base/err.h"
#include "../backend/weight.h"

typedef struct kern_qpack kern_qpack;     /* a repacked quantized weight (matmul_qpack.c) */
typedef struct kern_pack_set kern_pack_set;

/* The weight description is shared with every backend (src/backend/weight.h): dtype, shape,
 * checkpoint pointers, and the CPU's repacked copies (`packed`, `amx`, set by kern_pack_set_add). */
typedef be_weight kern_weight;

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

/* kern_matmul_n where product k reads its own Ts[k] activation rows xs[k] (row stride ldxs[k]): a MoE
 * step's experts, each over the rows routed to it, in one dispatch. Inputs that are the same pointer
 * with the same rows share one quantized / packed copy. Every output is bit-identical to
 * kern_matmul(out.y, out.ldy, xs[k], ldxs[k], Ts[k], out.w). */
void kern_matmul_each(const kern_mm_out *outs, int n, const float *const *xs, const int *ldxs, const int *Ts);

/* Writes activation rows [t0, t1) of a kern_matmul_n_pre call (ctx: the caller's). */
typedef void (*kern_rows_fn)(void *ctx, int t0, int t1);

/* kern_matmul_n whose activation rows are first written by pre, fused into the packing: each
 * packing task runs pre over its block of rows, then packs those rows while they are in cache, so
 * a row op in front of a matmul (an RMSNorm, SwiGLU) costs no pass over memory and no pool hand-off
 * of its own. Applies to prefill-sized calls of packed-activation weights (T > MM_TMAX rows, the
 * many-row path); returns 1 when it ran, 0 (nothing done) otherwise: the caller then runs pre and
 * kern_matmul_n itself. Every output is bit-identical to pre over all rows, then kern_matmul_n;
 * pre must write row t only from inputs of row t. */
int kern_matmul_n_pre(const kern_mm_out *outs, int n, const float *x, int ldx, int T, kern_rows_fn pre, void *ctx);

/* Dequantize/convert row r of W into out[cols] (embedding lookup, tied heads). */
void kern_weight_row(const kern_weight *w, int r, float *out);

/* Quantized weights take int8 activations by default (see matmul_q.h for the numerics);
 * on = 1 switches to fp32 activations (dequantize and FMA; slower, closer to the reference): the
 * qact_f32 knob (knobs.h; $MTPLX_QACT=f32 through the CPU backend). Not meant to be flipped while
 * kernels run. */
void kern_matmul_set_qact_f32(int on);

/* The kernel bf16 weights take now, beyond the path's name (cpu_isa_name), as benchmarks and the
 * prefix cache's fingerprint name it: "amx", "vdpbf16ps", "fma-evenodd" or "fma-widen" (the AVX-512
 * path by the bf16dp / bf16x knobs), "avx2-evenodd", "neon", "portable". Each gives other bits. */
const char *kern_matmul_bf16_kernel(void);

/* Bytes of activation scratch that any kern_matmul / kern_matmul_n call needs at most for weights of
 * at most K inputs and quantization groups of at least min_group (0 when there is no quantized
 * weight). */
size_t kern_matmul_scratch_bound(int K, int min_group);
/* Grow the calling thread's activation scratch to `bytes` now, so calls on this thread never
 * allocate. Returns 0 or MTPLX_ENOMEM with a message. A thread that did not reserve grows its scratch
 * on first use and stops the process with a message if that fails (no numeric fallback). */
int kern_matmul_reserve(size_t bytes, mtplx_err *err);

/* Free the calling thread's grow-only scratch for quantized activations (tests, thread exit). */
void kern_matmul_release_scratch(void);

/* Repack a weight for a faster kernel and attach the copy: a quantized weight for the AVX-512 VNNI
 * kernel (w->packed: 16 output rows per vector, so one activation quad broadcast feeds 16 rows); a
 * bf16 weight for the AMX-BF16 kernel (w->amx: 1 KiB tiles in the order the kernel streams them).
 * The copy is owned by *set (created on first use) and freed with kern_pack_set_free. A no-op
 * returning 0 when nothing applies (CPU without VNNI / AMX or the path switched off by
 * the isa knob, K % 64 != 0 resp. K % 32 != 0, fewer than 16 rows, f32/f16 weights,
 * the qpack knob off). Returns 0 or ENOMEM. */
int kern_pack_set_add(kern_pack_set **set, kern_weight *w, mtplx_err *err);
void kern_pack_set_free(kern_pack_set *set);

/* The VNNI copy of a quantized weight in pieces, for a caller that keeps it elsewhere (the CPU
 * backend's on-disk cache): kern_qpack_bytes is the size of the copy kern_pack_set_add would make
 * of w, 0 when it would make none; kern_qpack_fill writes it into mem (that many bytes, 64-byte
 * aligned) on the thread pool; kern_pack_set_adopt attaches mem holding those bytes as w->packed,
 * owned by *set from then on and handed to release(mem, bytes) by kern_pack_set_free. The layout
 * is versioned by KERN_QPACK_VERSION: bump it whenever kern_qpack_fill's output changes. */
#define KERN_QPACK_VERSION 1
size_t kern_qpack_bytes(const kern_weight *w);
/* 1 when this CPU repacks quantized weights at all: x86-64 with AVX2 or more (the VNNI / AMX kernels,
 * or matmul_qpack_avx2.c without VNNI) and $MTPLX_QPACK not 0; AArch64 reads the checkpoint's layout. */
int kern_qpack_available(void);
void kern_qpack_fill(const kern_weight *w, void *mem);
int kern_pack_set_adopt(kern_pack_set **set, kern_weight *w, void *mem, size_t bytes,
                        void (*release)(void *mem, size_t bytes), mtplx_err *err);
/* Bytes held by the packed copies. */
size_t kern_pack_set_bytes(const kern_pack_set *set);

/* The portable reference path; kept for tests that compare the SIMD paths against it. */
void kern_matmul_ref(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w);

#endif
