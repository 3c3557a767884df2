/* cpu.c — run-time CPU feature detection (CPUID + XGETBV) and the kernel path choice. */
#include "cpu.h"

#include "knobs.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static cpu_features g_feat;
static kern_isa g_best, g_isa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

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
static void cpu_detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) goto choose;
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
    g_isa = g_best;
    int want = kern_knobs_get()->isa; /* $MTPLX_KERNEL, read by the CPU backend */
    if (want >= 0) g_isa = (kern_isa)want < g_best ? (kern_isa)want : g_best;
}

void cpu_knobs_changed(void) {
    pthread_once(&g_once, cpu_detect);
    int want = kern_knobs_get()->isa;
    if (want >= 0) g_isa = (kern_isa)want < g_best ? (kern_isa)want : g_best;
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

int cpu_isa_set(kern_isa isa) {
    pthread_once(&g_once, cpu_detect);
    if ((int)isa < 0 || isa > g_best) return -1;
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
    }
    return "?";
}

int cpu_isa_parse(const char *s, kern_isa *out) {
    if (!strcmp(s, "portable")) *out = KERN_ISA_PORTABLE;
    else if (!strcmp(s, "avx2")) *out = KERN_ISA_AVX2;
    else if (!strcmp(s, "avx512")) *out = KERN_ISA_AVX512;
    else if (!strcmp(s, "amx")) *out = KERN_ISA_AMX;
    else return -1;
    return 0;
}
