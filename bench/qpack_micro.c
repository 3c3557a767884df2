/* qpack_micro.c — the repacked q4/q8 matmul kernel (src/kernels/matmul_qpack*.c) alone, in CPU time of
 * one thread, so that it can be measured on a loaded machine (bench/zen.md "Session 5"). Every figure
 * is the best of REPS repeats. The kernel path is the process's ($MTPLX_KERNEL: avx512 runs the VNNI
 * kernel, avx2 the AVX2 one); weights are random MLX q4/q8, group 64, bf16 scales, repacked as at load.
 *
 *   qpack_micro cache BITS N K T ITERS REPS   one [N × K] weight (L2-sized for N·K·bits/8 < 1 MB),
 *                                             ITERS passes per repeat: the compute ceiling, in weight
 *                                             bytes per ns and ns per 16-row group record, against the
 *                                             vpdpbusd peak (16 chains, two per cycle on Zen 5)
 *                                             measured between the repeats (a clock reference)
 *   qpack_micro dram BITS N K COUNT T REPS    COUNT such weights (from DRAM once COUNT·N·K·bits/8 is
 *                                             far above the L3), one pass per repeat, alternated with a
 *                                             plain streaming read (kern_stream_read) of as many bytes:
 *                                             the kernel's fraction of one core's read bandwidth
 *
 * Build: gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -o build/bench/qpack_micro bench/qpack_micro.c
 *        build/libmtplx.a -lm (x86-64 with AVX2 at least). Reads MTPLX_KERNEL=avx2, MTPLX_QPACK_PF,
 *        MTPLX_QPACK_PF2, MTPLX_QPACK_MIX and MTPLX_QPACK_PAIR as the CPU backend would. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/kernels/cpu.h"
#include "../src/kernels/knobs.h"
#include "../src/kernels/matmul.h"
#include "../src/kernels/matmul_q.h"
#ifdef QPM_KERNEL_SRC /* a kernel source compiled in (to time edits without rebuilding the library): */
#include QPM_KERNEL_SRC /* -Isrc/kernels -DQPM_KERNEL_SRC='"matmul_qpack.c"' */
#endif
#include "../src/kernels/membw.h"
#include "dp_peak.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Seconds per vpdpbusd of 16 independent chains (the clock reference). */
__attribute__((target("avx512f,avx512vnni"))) static double vnni_peak_seconds(void) {
    const long n = 300000;
    double t0 = cpu_now();
    DP_PEAK_LOOP("vpdpbusd", n);
    return (cpu_now() - t0) / (n * 16.0);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* A random repacked [n × k] weight of `bits` (group 64, bf16 scales); exits when out of memory. */
static void make_weight(kern_weight *w, int bits, int n, int k, kern_pack_set **set) {
    size_t elems = (size_t)n * k, words = elems * bits / 32, groups = elems / 64;
    uint32_t *q = malloc(words * 4);
    uint16_t *s = malloc(groups * 2), *b = malloc(groups * 2);
    if (!q || !s || !b) exit(1);
    for (size_t i = 0; i < words; i++) q[i] = (uint32_t)next_rand();
    for (size_t g = 0; g < groups; g++) s[g] = 0x3c23, b[g] = 0xbda3; /* ~0.01 and ~-0.08 */
    *w = (kern_weight){.dtype = DT_U32, .rows = n, .cols = k, .data = q, .scales = s, .biases = b,
                       .scale_dtype = DT_BF16, .bits = bits, .group_size = 64};
    mtplx_err err = {0};
    if (kern_pack_set_add(set, w, &err) || !w->packed) {
        fprintf(stderr, "packing failed (%s)\n", err.msg);
        exit(1);
    }
    free(q), free(s), free(b), w->data = w->scales = w->biases = NULL; /* the kernel reads the copy */
}

/* T quantized activation rows of K inputs (random x), filled by the path's own fill. */
static void make_qact(qact *qa, int T, int K, int vnni) {
    int G = K / 64;
    float *x = malloc(sizeof(float) * (size_t)T * K);
    for (size_t i = 0; i < (size_t)T * K; i++) x[i] = (float)((int)(next_rand() % 2001) - 1000) * 1e-3f;
    *qa = (qact){T, K, G, 64, QA_NATURAL, NULL, NULL, NULL, NULL, NULL};
    qa->a = aligned_alloc(64, ((size_t)T * K + 63) & ~(size_t)63);
    qa->d = malloc(sizeof(float) * T * G), qa->bd = malloc(sizeof(float) * T * G);
    qa->dv = aligned_alloc(64, sizeof(float) * (size_t)T * (K / 64) * 16);
    qa->asum = (int32_t *)qa->dv;
    if (vnni) qact_fill_avx512(x, K, qa);
    else qact_fill_avx2(x, K, qa);
    free(x);
}

static size_t packed_bytes(const kern_weight *w) { return w->packed->bytes; }

int main(int argc, char **argv) {
    if (argc < 8) {
        fprintf(stderr, "usage: qpack_micro cache BITS N K T ITERS REPS | dram BITS N K COUNT T REPS\n");
        return 2;
    }
    int dram = !strcmp(argv[1], "dram"), bits = atoi(argv[2]), N = atoi(argv[3]), K = atoi(argv[4]);
    int count = dram ? atoi(argv[5]) : 1, T = dram ? atoi(argv[6]) : atoi(argv[5]);
    int iters = dram ? 1 : atoi(argv[6]), reps = atoi(argv[7]);
    kern_knobs kn = kern_knobs_default(); /* the backend's environment knobs that matter here */
    const char *e;
    if ((e = getenv("MTPLX_KERNEL")) && !strcmp(e, "avx2")) kn.isa = KERN_ISA_AVX2;
    if ((e = getenv("MTPLX_QPACK_PF"))) kn.qpack_pf = atoi(e);
    if ((e = getenv("MTPLX_QPACK_PF2"))) kn.qpack_pf2 = atoi(e);
    if ((e = getenv("MTPLX_QPACK_MIX"))) kn.qpack_mix = atoi(e);
    if ((e = getenv("MTPLX_QPACK_PAIR"))) kn.qpack_pair = atoi(e);
    kern_knobs_set(&kn);
    kern_isa isa = cpu_isa();
    int vnni = isa >= KERN_ISA_AVX512 && cpu_get_features()->avx512vnni;
    mm_qrows_fn fn = vnni ? mm_qrows_packed : mm_qrows_packed_avx2;
    kern_pack_set *set = NULL;
    kern_weight *w = calloc((size_t)count, sizeof *w);
    size_t bytes = 0;
    for (int i = 0; i < count; i++) make_weight(&w[i], bits, N, K, &set), bytes += packed_bytes(&w[i]);
    qact qa;
    make_qact(&qa, T, K, vnni);
    float *y = aligned_alloc(64, sizeof(float) * (size_t)T * ((N + 15) & ~15));
    float *rd = dram ? aligned_alloc(64, (bytes + 63) & ~(size_t)63) : NULL;
    if (rd) memset(rd, 1, bytes);
    double best = 1e30, best_rd = 1e30, peak = 1e30, sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        for (int it = 0; it < iters; it++)
            for (int i = 0; i < count; i++) fn(y, N, &qa, &w[i], 0, N);
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
        sink += y[0];
        if (rd) {
            t0 = cpu_now();
            sink += kern_stream_read(rd, bytes / sizeof(float));
            dt = cpu_now() - t0;
            if (dt < best_rd) best_rd = dt;
        }
        if (vnni) {
            double p = vnni_peak_seconds();
            if (p < peak) peak = p;
        }
    }
    double recs = (double)iters * count * w[0].packed->n_blocks * w[0].packed->G;
    printf("%s q%d %dx%d x%d T=%d (%s, %.1f MB): %.2f GB/s of weights, %.2f ns per group record",
           dram ? "dram" : "cache", bits, N, K, count, T, vnni ? "vnni" : "avx2", bytes / 1e6,
           (double)iters * bytes / best * 1e-9, best / recs * 1e9);
    if (vnni) printf(" = %.1f vpdpbusd-peak slots (%.3f ns each)", best / recs / peak, peak * 1e9);
    if (rd) printf("; plain read %.2f GB/s: kernel at %.0f%%", bytes / best_rd * 1e-9, 100.0 * best_rd / best);
    printf("%s\n", sink == 12345.678 ? " " : "");
    kern_pack_set_free(set);
    return 0;
}
