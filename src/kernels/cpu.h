/* cpu.h — which SIMD instruction sets this CPU offers, and which kernel path the process uses.
 *
 * Kernels are compiled for the baseline of the target (x86-64, or ARMv8-A with Advanced SIMD); SIMD
 * variants carry function-level target attributes and are chosen here at run time: CPUID + XGETBV on
 * x86-64, getauxval(AT_HWCAP / AT_HWCAP2) on AArch64. The isa knob (knobs.h; the CPU backend fills it
 * from `MTPLX_KERNEL=portable|avx2|avx512|amx|neon|neon-dot|neon-i8mm`) forces a path for tests and
 * benchmarks; a request the CPU cannot run (a weaker level of the same architecture excepted) falls
 * back to the best path it can. The x86 levels (1..3) and the AArch64 levels (4..6) are each ordered
 * by what they need; a process only ever sees PORTABLE and its own architecture's levels. */
#ifndef MTPLX_KERNELS_CPU_H
#define MTPLX_KERNELS_CPU_H

typedef enum {
    KERN_ISA_PORTABLE = 0, /* plain C */
    KERN_ISA_AVX2 = 1,     /* AVX2 + FMA + F16C */
    KERN_ISA_AVX512 = 2,   /* AVX-512 F/BW/VL (+ VNNI / BF16 when present, see cpu_features) */
    KERN_ISA_AMX = 3,      /* AVX-512 path plus AMX tiles (BF16 + INT8) for the matmuls; needs the
                              kernel's permission (arch_prctl), requested once at detection */
    KERN_ISA_NEON = 4,     /* AArch64 Advanced SIMD (every ARMv8-A CPU): f32 FMA, f16 widening,
                              int8 products by SMULL/SADALP */
    KERN_ISA_NEON_DOT = 5, /* + SDOT (FEAT_DotProd, ARMv8.2+: Neoverse N1 / Ampere Altra, Graviton2) */
    KERN_ISA_NEON_I8MM = 6,/* + SMMLA (FEAT_I8MM, ARMv8.6+: Graviton3/4, Grace, Neoverse N2/V1/V2) */
} kern_isa;

/* True for the AArch64 levels. */
#define KERN_ISA_IS_NEON(isa) ((isa) >= KERN_ISA_NEON && (isa) <= KERN_ISA_NEON_I8MM)

typedef struct {
    int avx2, fma, f16c;                 /* the AVX2 path needs all three */
    int avx512f, avx512bw, avx512vl;     /* the AVX-512 path needs all three */
    int avx512vnni;                      /* vpdpbusd on zmm (int8 dot products) */
    int avx512bf16;                      /* vdpbf16ps */
    int avxvnni;                         /* vpdpbusd on ymm (VEX encoding) */
    int amx_tile, amx_int8, amx_bf16;    /* CPUID + XCR0; Linux also wants an arch_prctl permission request before use */
    int amd;                             /* x86 vendor AMD (or Hygon): tuning defaults only, never correctness */
    int zmm_halves;                      /* AVX-512 run as two 256-bit halves (AMD family 19h: Zen 4):
                                            tuning only (matmul_qpack.c's q4 activation broadcasts) */
    int asimd;                           /* AArch64 Advanced SIMD (HWCAP_ASIMD) */
    int asimddp;                         /* SDOT/UDOT (HWCAP_ASIMDDP) */
    int i8mm;                            /* SMMLA/UMMLA/USMMLA (HWCAP2_I8MM) */
    int bf16;                            /* BFDOT/BFMMLA/BFCVT (HWCAP2_BF16); detected and reported, not
                                            used: see docs/kernels.md "ARM64" */
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

/* 1 when this CPU runs `isa` (PORTABLE always; the other architecture's levels never). */
int cpu_isa_supported(kern_isa isa);

/* Force a path (tests, benchmarks). Returns 0, or -1 (and changes nothing) when the CPU cannot run
 * it. Not meant to be called while other threads run kernels. */
int cpu_isa_set(kern_isa isa);

/* "portable", "avx2", "avx512", "amx", "neon", "neon-dot", "neon-i8mm". */
const char *cpu_isa_name(kern_isa isa);

/* 1 when the AVX2 path runs now (cpu_isa() is KERN_ISA_AVX2, forced or best), the CPU has AVX-VNNI
 * and the avxvnni knob is on: the packed q4 / q8 kernel then takes vpdpbusd on ymm (same bits). */
int cpu_avxvnni_used(void);

/* The name of path isa as benchmarks and `mtplx doctor` give it: cpu_isa_name(isa), or "avx2+avxvnni"
 * for the AVX2 path on a CPU with AVX-VNNI when avxvnni_knob is on. */
const char *cpu_path_label(kern_isa isa, int avxvnni_knob);

/* cpu_path_label of the path in use now, with the installed avxvnni knob. */
const char *cpu_path_name(void);

/* Parse a name as above; returns 0 and *out, or -1. */
int cpu_isa_parse(const char *s, kern_isa *out);

#endif
