/* knobs.h — the tuning knobs of the CPU kernels, as plain values.
 *
 * Kernels never read the environment: the CPU backend (src/backend/cpu/cpu_backend.c) reads
 * MTPLX_KERNEL, MTPLX_THREADS, MTPLX_QPACK, ... once when it is created and hands them here with
 * kern_knobs_set (docs/architecture.md, "Knobs"). A program that calls kernels without creating a
 * backend (some unit tests) runs with kern_knobs_default(). */
#ifndef MTPLX_KERNELS_KNOBS_H
#define MTPLX_KERNELS_KNOBS_H

typedef struct {
    int isa;        /* forced kernel path (a kern_isa value, clamped to what the CPU runs), -1 = best */
    int no_amx;     /* 1: never ask the OS for AMX tiles (valgrind); read at CPU detection only */
    int threads;    /* threads of the process-wide pool, caller included; 0 = the CPUs we may run on;
                       read when the pool is created (first kernel call or backend creation) */
    int qpack;      /* 1: repack quantized / bf16 weights for the VNNI / AVX2 / AMX kernels at load */
    int qact_f32;   /* 1: quantized weights take fp32 activations (slower, closer to the reference) */
    int qamx_min;   /* smallest row count for which repacked quantized weights take AMX (>= 1) */
    int amx_pf;     /* AMX weight-stream prefetch distance, bytes (0 = off) */
    int qpack_pf;   /* packed q4/q8 weight prefetch distance into L1, bytes (0 = off, -1 = auto:
                       kern_qpack_prefetch, 4096 except 1-row calls on AMD) */
    int qpack_pf2;  /* ... into L2, bytes (0 = off, -1 = auto: 16384 except 1-row calls on AMD) */
    int bf16dp;     /* 1: bf16 weights take the AVX512-BF16 dot-product kernel where the CPU has
                       avx512_bf16 and the AMX path is not in use; 0: the AVX-512 FMA kernel; -1 (auto):
                       the dot-product kernel on AMD, the FMA one elsewhere (on an Intel core a 512-bit
                       vdpbf16ps issues at half an FMA's rate: bench/zen.md "Session 40") */
    int bf16_pf;    /* 1: the bf16 kernels without AMX (that one and the AVX-512 FMA ones) prefetch the
                       next weight block into L2; 0: off */
    int qpack_mix;  /* q4 / q8 VNNI calls of 2+ rows: 1 half the activation quads by shuffles (dp_quad_mix),
                       0 broadcast operands only, -1 auto (0 on cpu_features.zmm_halves, but 1 there
                       for q8 tiles of 2..7 rows: qp_mix in matmul_qpack.c; else 1) */
    int mm_guided;  /* 1: a matmul's rows go to the pool in shrinking pieces (mm_cut_pieces); 0: ~4
                       equal pieces a thread (the split before; same bits either way) */
    int qpack_pair; /* 1: q4 VNNI calls of 6+ rows run two 16-row blocks at once, each activation quad
                       broadcast once for both (qp_pair_q4); 0: one block at a time. Same sums */
    int avxvnni;    /* 1: the AVX2 path's packed q4 / q8 kernel uses vpdpbusd on ymm where the CPU has
                       AVX-VNNI (mm_qrows_packed_avxvnni); 0: vpmaddubsw chains only. Same bits */
    int bf16x;      /* 1: bf16 weights on the AVX-512 path, where the AVX512-BF16 kernel is not chosen, take
                       the FMA kernel on even/odd packed activations (mm_rows_bf16x_avx512); 0: the
                       widening FMA kernel (the one before; other bits) */
} kern_knobs;

/* The values used when nothing was set (the documented defaults of each knob). */
kern_knobs kern_knobs_default(void);

/* Install knobs (clamped to their ranges). isa applies at once (as cpu_isa_set would); no_amx and
 * threads only take effect if CPU detection / the pool have not happened yet. Not meant to be
 * called while kernels run. */
void kern_knobs_set(const kern_knobs *k);

/* Program overrides that later kern_knobs_set calls (a backend created afterwards) keep:
 * kern_matmul_set_qact_f32 pins qact_f32, cpu_isa_set pins the path. */
void kern_knobs_pin_qact_f32(int on);
void kern_knobs_pin_isa(void);

/* The knobs in force (never NULL). */
const kern_knobs *kern_knobs_get(void);

#endif
