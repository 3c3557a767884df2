/* cpu.c — run-time CPU feature detection (GCC's __builtin_cpu_supports) and the kernel path choice. */
#include "cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static cpu_features g_feat;
static kern_isa g_best, g_isa;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void cpu_detect(void) {
    __builtin_cpu_init();
    g_feat.avx2 = __builtin_cpu_supports("avx2");
    g_feat.fma = __builtin_cpu_supports("fma");
    g_feat.f16c = __builtin_cpu_supports("f16c");
    g_feat.avx512f = __builtin_cpu_supports("avx512f");
    g_feat.avx512bw = __builtin_cpu_supports("avx512bw");
    g_feat.avx512vl = __builtin_cpu_supports("avx512vl");
    g_feat.avx512vnni = __builtin_cpu_supports("avx512vnni");
    g_feat.avx512bf16 = __builtin_cpu_supports("avx512bf16");
    g_feat.avxvnni = __builtin_cpu_supports("avxvnni");
    g_feat.amx_tile = __builtin_cpu_supports("amx-tile");
    g_feat.amx_int8 = __builtin_cpu_supports("amx-int8");
    g_feat.amx_bf16 = __builtin_cpu_supports("amx-bf16");
    int avx2 = g_feat.avx2 && g_feat.fma && g_feat.f16c;
    int avx512 = avx2 && g_feat.avx512f && g_feat.avx512bw && g_feat.avx512vl;
    g_best = avx512 ? KERN_ISA_AVX512 : avx2 ? KERN_ISA_AVX2 : KERN_ISA_PORTABLE;
    g_isa = g_best;
    kern_isa want;
    const char *env = getenv("MTPLX_KERNEL");
    if (env && *env && cpu_isa_parse(env, &want) == 0) g_isa = want < g_best ? want : g_best;
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
    return 0;
}

const char *cpu_isa_name(kern_isa isa) {
    switch (isa) {
    case KERN_ISA_PORTABLE: return "portable";
    case KERN_ISA_AVX2: return "avx2";
    case KERN_ISA_AVX512: return "avx512";
    }
    return "?";
}

int cpu_isa_parse(const char *s, kern_isa *out) {
    if (!strcmp(s, "portable")) *out = KERN_ISA_PORTABLE;
    else if (!strcmp(s, "avx2")) *out = KERN_ISA_AVX2;
    else if (!strcmp(s, "avx512")) *out = KERN_ISA_AVX512;
    else return -1;
    return 0;
}
