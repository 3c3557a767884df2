/* cpu.h — which SIMD instruction sets this CPU offers, and which kernel path the process uses.
 *
 * Kernels are compiled for baseline x86-64; SIMD variants carry function-level target attributes and
 * are chosen here at run time. The isa knob (knobs.h; the CPU backend fills it from
 * `MTPLX_KERNEL=portable|avx2|avx512|amx`) forces a path for tests and benchmarks; a request the CPU
 * cannot run falls back to the best path it can. */
#ifndef MTPLX_KERNELS_CPU_H
#define MTPLX_KERNELS_CPU_H

typedef enum {
    KERN_ISA_PORTABLE = 0, /* plain C */
    KERN_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C */
    KERN_ISA_AVX512 = 2,   /* AVX-512 F/BW/VL (+ VNNI / BF16 when present, see cpu_features) */
    KERN_ISA_AMX = 3,      /* AVX-512 path plus AMX tiles (BF16 + INT8) for the matmuls; needs the
                              kernel's permission (arch_prctl), requested once at detection */
} kern_isa;

typedef struct {
    int avx2, fma, f16c;                 /* the AVX2 path needs all three */
    int avx512f, avx512bw, avx512vl;     /* the AVX-512 path needs all three */
    int avx512vnni;                      /* vpdpbusd on zmm (int8 dot products) */
    int avx512bf16;                      /* vdpbf16ps */
    int avxvnni;                         /* vpdpbusd on ymm (VEX encoding) */
    int amx_tile, amx_int8, amx_bf16;    /* CPUID + XCR0; Linux also wants an arch_prctl permission request before use */
} cpu_features;

/* Features of this CPU (detected once, thread-safe). Never NULL. */
const cpu_features *cpu_get_features(void);

/* The best path this CPU runs. */
kern_isa cpu_best_isa(void);

/* Re-apply the isa knob after kern_knobs_set (detecting the CPU first if needed). */
void cpu_knobs_changed(void);

/* The path kernels use now: the isa knob if set (clamped to what the CPU runs), else
 * cpu_best_isa(). */
kern_isa cpu_isa(void);

/* Force a path (tests, benchmarks). Returns 0, or -1 (and changes nothing) when the CPU cannot run
 * it. Not meant to be called while other threads run kernels. */
int cpu_isa_set(kern_isa isa);

/* "portable", "avx2", "avx512", "amx". */
const char *cpu_isa_name(kern_isa isa);

/* Parse a name as above; returns 0 and *out, or -1. */
int cpu_isa_parse(const char *s, kern_isa *out);

#endif
