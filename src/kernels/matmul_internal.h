/* matmul_internal.h — the per-ISA pieces behind kern_matmul (not for use outside src/kernels).
 *
 * Each `mm_rows_*` computes output rows [r0, r1) for activation rows [0, T) of one call, T <= MM_TMAX.
 * Contract shared by every variant (row invariance, DESIGN.md §3): the value written for (t, r) is
 * computed by one fixed sequence of operations over x[t][0..K) and W[r][0..K) that depends neither on
 * T, nor on the other rows of the call, nor on r0/r1 (the thread split). */
#ifndef MTPLX_KERNELS_MATMUL_INTERNAL_H
#define MTPLX_KERNELS_MATMUL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "knobs.h"
#include "matmul.h"

#define MM_TMAX 32 /* activation rows per inner call; kern_matmul loops over larger T in blocks */

typedef void (*mm_rows_fn)(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                           int r0, int r1);

/* Dense f32/f16/bf16 weights. */
void mm_rows_dense_portable(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1);
void mm_rows_dense_avx2(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1);
void mm_rows_dense_avx512(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1);
void mm_rows_dense_neon(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1);

/* AMX-BF16 for bf16 weights carrying w->amx (matmul_amx.c): the caller packs the T <= MM_TMAX
 * activation rows once per call (mm_amx_pack_x into mm_amx_pack_bytes(T, K) bytes, 64-aligned) and
 * every task (rows r0 % 64 == 0) reads that copy; x is still needed for rows past the last full
 * 16-row block. mm_amx_pack_weight writes the w->amx copy (mm_amx_weight_elems elements). */
#if defined(__x86_64__)
size_t mm_amx_weight_elems(int rows, int cols);
void mm_amx_pack_weight(uint16_t *dst, const uint16_t *W, int rows, int cols);

size_t mm_amx_pack_bytes(int T, int K);
void mm_amx_pack_x(void *buf, const float *x, int ldx, int T, int K);
void mm_rows_bf16_amx(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1,
                      const void *xpack);
#else
/* No AMX off x86-64 (cpu.h): kern_matmul never takes the AMX path there (cpu_isa() is never
 * KERN_ISA_AMX) and kern_pack_set_add never makes a w->amx copy; these inert versions only keep the
 * shared call sites in matmul.c and matmul_qpack.c linkable. */
static inline size_t mm_amx_weight_elems(int rows, int cols) { return (void)rows, (void)cols, 0; }
static inline void mm_amx_pack_weight(uint16_t *dst, const uint16_t *W, int rows, int cols) {
    (void)dst, (void)W, (void)rows, (void)cols;
}
static inline size_t mm_amx_pack_bytes(int T, int K) { return (void)T, (void)K, 0; }
static inline void mm_amx_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    (void)buf, (void)x, (void)ldx, (void)T, (void)K;
}
static inline void mm_rows_bf16_amx(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0,
                                    int r1, const void *xpack) {
    (void)y, (void)ldy, (void)x, (void)ldx, (void)T, (void)w, (void)r0, (void)r1, (void)xpack;
}
#endif

/* AVX2 for bf16 weights (matmul_avx2.c): the caller packs the T <= MM_TMAX activation rows once per
 * call, each 16-input chunk as its 8 even then 8 odd inputs (mm_bf16x_pack_x into
 * mm_bf16x_pack_bytes(T, K) bytes); the weight is read from the checkpoint as is. */
#if defined(__x86_64__)
size_t mm_bf16x_pack_bytes(int T, int K);
void mm_bf16x_pack_x(void *buf, const float *x, int ldx, int T, int K);
void mm_rows_bf16x_avx2(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1,
                        const void *xpack);
#else
/* x86 only (pick_xpath in matmul.c never chooses it elsewhere); inert versions keep matmul.c linkable. */
static inline size_t mm_bf16x_pack_bytes(int T, int K) { return (void)T, (void)K, 0; }
static inline void mm_bf16x_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    (void)buf, (void)x, (void)ldx, (void)T, (void)K;
}
static inline void mm_rows_bf16x_avx2(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                                      int r0, int r1, const void *xpack) {
    (void)y, (void)ldy, (void)x, (void)ldx, (void)T, (void)w, (void)r0, (void)r1, (void)xpack;
}
#endif

/* AVX-512 FMA for bf16 weights with even/odd packed activations (matmul_avx512.c): the caller packs
 * the T <= MM_TMAX activation rows once per call, each 32-input chunk as its 16 even then 16 odd
 * inputs (mm_bf16x_avx512_pack_x into mm_bf16x_avx512_pack_bytes(T, K) bytes); the weight is read
 * from the checkpoint as is. */
#if defined(__x86_64__)
size_t mm_bf16x_avx512_pack_bytes(int T, int K);
void mm_bf16x_avx512_pack_x(void *buf, const float *x, int ldx, int T, int K);
void mm_rows_bf16x_avx512(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1,
                          const void *xpack);
#else
/* x86 only (pick_xpath in matmul.c never chooses it elsewhere); inert versions keep matmul.c linkable. */
static inline size_t mm_bf16x_avx512_pack_bytes(int T, int K) { return (void)T, (void)K, 0; }
static inline void mm_bf16x_avx512_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    (void)buf, (void)x, (void)ldx, (void)T, (void)K;
}
static inline void mm_rows_bf16x_avx512(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                                        int r0, int r1, const void *xpack) {
    (void)y, (void)ldy, (void)x, (void)ldx, (void)T, (void)w, (void)r0, (void)r1, (void)xpack;
}
#endif

/* AVX512-BF16 dot products for bf16 weights on CPUs without AMX (matmul_bf16dp.c): the caller packs
 * the T <= MM_TMAX activation rows once per call as hi/lo bf16 pairs (mm_bf16dp_pack_x into
 * mm_bf16dp_pack_bytes(T, K) bytes, 64-aligned); the weight is read from the checkpoint as is. */
#if defined(__x86_64__)
size_t mm_bf16dp_pack_bytes(int T, int K);
void mm_bf16dp_pack_x(void *buf, const float *x, int ldx, int T, int K);
void mm_rows_bf16dp(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1,
                    const void *xpack);
#else
/* x86 only (pick_xpath in matmul.c never chooses it elsewhere); inert versions keep matmul.c linkable. */
static inline size_t mm_bf16dp_pack_bytes(int T, int K) { return (void)T, (void)K, 0; }
static inline void mm_bf16dp_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    (void)buf, (void)x, (void)ldx, (void)T, (void)K;
}
static inline void mm_rows_bf16dp(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0,
                                  int r1, const void *xpack) {
    (void)y, (void)ldy, (void)x, (void)ldx, (void)T, (void)w, (void)r0, (void)r1, (void)xpack;
}
#endif

#endif
