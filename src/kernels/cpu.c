/* cpu.c — run-time CPU feature detection (CPUID + XGETBV on x86-64, the kernel's hardware capability
 * words on AArch64) and the kernel path choice. */
#include "cpu.h"

#include "knobs.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CPU_X86 1
#elif defined(__aarch64__)
#include <sys/auxv.h>
#define CPU_ARM64 1
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static cpu_features g_feat;
static kern_isa g_best, g_isa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#ifdef CPU_X86
/* XCR0: which register states the OS saves (AVX needs YMM; AVX-512 needs opmask + ZMM). */
static uint64_t read_xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

/* Linux hands out the AMX tile-data state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
 * XFEATURE_XTILEDATA, process-wide, kernel >= 5.16). Returns 1 when granted. The no_amx knob
 * ($MTPLX_NO_AMX=1, read by the CPU backend) skips it (tools such as valgrind that do not emulate AMX). */
static int amx_request_permission(void) {
    if (kern_knobs_get()->no_amx) return 0;
#ifdef SYS_arch_prctl
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
#else
    return 0;
#endif
}

/* CPUID directly (GCC's and clang's __builtin_cpu_supports know different feature names). */
static void cpu_detect_arch(void) {
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) /* vendor string "AuthenticAMD" (Hygon: "HygonGenuine") */
        g_feat.amd = (b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u) ||
                     (b == 0x6f677948u && d == 0x6e65476eu && c == 0x656e6975u);
    if (!__get_cpuid(1, &a, &b, &c, &d)) goto choose;
    unsigned family = (a >> 8) & 0xf;
    if (family == 0xf) family += (a >> 20) & 0xff; /* the display family */
    int osxsave = (c >> 27) & 1;
    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    int os_avx = (xcr0 & 0x6) == 0x6, os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;
    int os_amx = (xcr0 & 0x60000) == 0x60000;
    g_feat.fma = os_avx && ((c >> 12) & 1);
    g_feat.f16c = os_avx && ((c >> 29) & 1);
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        g_feat.avx2 = os_avx && ((b >> 5) & 1);
        g_feat.avx512f = os_avx512 && ((b >> 16) & 1);
        g_feat.avx512bw = os_avx512 && ((b >> 30) & 1);
        g_feat.avx512vl = os_avx512 && ((b >> 31) & 1);
        g_feat.zmm_halves = g_feat.amd && family == 0x19 && g_feat.avx512f; /* Zen 3 has no AVX-512 */
        g_feat.avx512vnni = os_avx512 && ((c >> 11) & 1);
        g_feat.amx_bf16 = os_amx && ((d >> 22) & 1);
        g_feat.amx_tile = os_amx && ((d >> 24) & 1);
        g_feat.amx_int8 = os_amx && ((d >> 25) & 1);
        unsigned max_sub = a;
        if (max_sub >= 1) {
            __cpuid_count(7, 1, a, b, c, d);
            g_feat.avxvnni = os_avx && ((a >> 4) & 1);
            g_feat.avx512bf16 = os_avx512 && ((a >> 5) & 1);
        }
    }
choose:;
    int amx = g_feat.amx_tile && g_feat.amx_bf16 && g_feat.amx_int8 && amx_request_permission();
    int avx2 = g_feat.avx2 && g_feat.fma && g_feat.f16c;
    int avx512 = avx2 && g_feat.avx512f && g_feat.avx512bw && g_feat.avx512vl;
    g_best = avx512 && amx ? KERN_ISA_AMX : avx512 ? KERN_ISA_AVX512 : avx2 ? KERN_ISA_AVX2 : KERN_ISA_PORTABLE;
}
#elif defined(CPU_ARM64)
/* Linux's AArch64 hwcap bits (arch/arm64/include/uapi/asm/hwcap.h), spelled out so that an older
 * libc's headers are enough. */
#define ARM_HWCAP_ASIMD (1ul << 1)
#define ARM_HWCAP_ASIMDDP (1ul << 20)
#define ARM_HWCAP2_I8MM (1ul << 13)
#define ARM_HWCAP2_BF16 (1ul << 14)

static void cpu_detect_arch(void) {
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    g_feat.asimd = (hw & ARM_HWCAP_ASIMD) != 0;
    g_feat.asimddp = g_feat.asimd && (hw & ARM_HWCAP_ASIMDDP);
    g_feat.i8mm = g_feat.asimd && (hw2 & ARM_HWCAP2_I8MM);
    g_feat.bf16 = g_feat.asimd && (hw2 & ARM_HWCAP2_BF16);
    /* the levels are cumulative: i8mm without dotprod (no CPU ships it) runs the plain NEON path */
    g_best = !g_feat.asimd ? KERN_ISA_PORTABLE
             : g_feat.asimddp && g_feat.i8mm ? KERN_ISA_NEON_I8MM
             : g_feat.asimddp ? KERN_ISA_NEON_DOT
                              : KERN_ISA_NEON;
}
#else
static void cpu_detect_arch(void) { g_best = KERN_ISA_PORTABLE; }
#endif

/* 1 when `isa` is PORTABLE or a level of this build's architecture at most g_best. */
static int isa_runs(kern_isa isa) {
    if (isa == KERN_ISA_PORTABLE) return 1;
    if (KERN_ISA_IS_NEON(isa) != KERN_ISA_IS_NEON(g_best) || g_best == KERN_ISA_PORTABLE) return 0;
    return isa <= g_best;
}

/* The path for a wanted kern_isa value (-1 = best): a weaker level of this architecture as asked,
 * anything this CPU cannot run (a stronger level, the other architecture) the best it can. */
static kern_isa isa_for(int want) {
    if (want < 0 || !isa_runs((kern_isa)want)) return g_best;
    return (kern_isa)want;
}

static void cpu_detect(void) {
    cpu_detect_arch();
    g_isa = isa_for(kern_knobs_get()->isa); /* $MTPLX_KERNEL, read by the CPU backend */
}

void cpu_knobs_changed(void) {
    pthread_once(&g_once, cpu_detect);
    int want = kern_knobs_get()->isa;
    if (want >= 0) g_isa = isa_for(want);
}

const cpu_features *cpu_get_features(void) {
    pthread_once(&g_once, cpu_detect);
    return &g_feat;
}

kern_isa cpu_best_isa(void) {
    pthread_once(&g_once, cpu_detect);
    return g_best;
}

kern_isa cpu_isa(void) {
    pthread_once(&g_once, cpu_detect);
    return g_isa;
}

int cpu_isa_supported(kern_isa isa) {
    pthread_once(&g_once, cpu_detect);
    return (int)isa >= 0 && isa <= KERN_ISA_NEON_I8MM && isa_runs(isa);
}

int cpu_isa_set(kern_isa isa) {
    if (!cpu_isa_supported(isa)) return -1;
    g_isa = isa;
    kern_knobs_pin_isa(); /* a backend created later keeps this choice */
    return 0;
}

const char *cpu_isa_name(kern_isa isa) {
    switch (isa) {
    case KERN_ISA_PORTABLE: return "portable";
    case KERN_ISA_AVX2: return "avx2";
    case KERN_ISA_AVX512: return "avx512";
    case KERN_ISA_AMX: return "amx";
    case KERN_ISA_NEON: return "neon";
    case KERN_ISA_NEON_DOT: return "neon-dot";
    case KERN_ISA_NEON_I8MM: return "neon-i8mm";
    }
    return "?";
}

int cpu_avxvnni_used(void) {
    return cpu_isa() == KERN_ISA_AVX2 && cpu_get_features()->avxvnni && kern_knobs_get()->avxvnni;
}

const char *cpu_path_label(kern_isa isa, int avxvnni_knob) {
    return isa == KERN_ISA_AVX2 && cpu_get_features()->avxvnni && avxvnni_knob ? "avx2+avxvnni" : cpu_isa_name(isa);
}

const char *cpu_path_name(void) { return cpu_path_label(cpu_isa(), kern_knobs_get()->avxvnni); }

int cpu_isa_parse(const char *s, kern_isa *out) {
    if (!strcmp(s, "portable")) *out = KERN_ISA_PORTABLE;
    else if (!strcmp(s, "avx2")) *out = KERN_ISA_AVX2;
    else if (!strcmp(s, "avx512")) *out = KERN_ISA_AVX512;
    else if (!strcmp(s, "amx")) *out = KERN_ISA_AMX;
    else if (!strcmp(s, "neon")) *out = KERN_ISA_NEON;
    else if (!strcmp(s, "neon-dot")) *out = KERN_ISA_NEON_DOT;
    else if (!strcmp(s, "neon-i8mm")) *out = KERN_ISA_NEON_I8MM;
    else return -1;
    return 0;
}
