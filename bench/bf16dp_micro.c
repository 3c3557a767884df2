/* bf16dp_micro.c — where the AVX512-BF16 matmul kernel loses time against the vdpbf16ps peak, in CPU
 * time of one thread (bench/zen.md "Prefill, session 4"). It includes src/kernels/matmul_bf16dp.c so
 * it can time the kernel's static tile directly; every figure is the best of REPS repeats, in ns per
 * VDPBF16PS and as a fraction of the peak measured between the repeats (16 independent chains, as in
 * bench/gemm_bench.c), so a slower clock moves both.
 *
 *   bf16dp_micro tile K NR TT REPS       the tile alone: TT activation rows against NR weight rows
 *                                        (NR·K·2 bytes, L2-sized for NR ≈ 200 at K = 640), repeated
 *   bf16dp_micro walk REPEAT REPS        mm_many's walk over the weight shapes of qwen35-small-code's
 *                                        12 layers (128 rows in 4 blocks, 256 KB slices, 133 MB
 *                                        streamed from DRAM), each slice's blocks run REPEAT times:
 *                                        time a + REPEAT·b separates the first pass over weights
 *                                        fresh from memory (a) from the passes over L2 (b)
 *                                        (bench/zen.md "Session 7")
 *   bf16dp_micro slices N K COUNT REPS   mm_many's walk on one thread: COUNT [N × K] weights, 128
 *                                        rows in 4 blocks of 32, 256 KB row slices, each slice met by
 *                                        every block (COUNT × N·K·2 bytes: L2, L3 or DRAM); the
 *                                        activations packed once, outside the timing
 *
 * Build: gcc -O2 -std=c17 -D_GNU_SOURCE -pthread -o build/bench/bf16dp_micro bench/bf16dp_micro.c
 *        build/libmtplx.a -lm (x86-64 with AVX512-BF16 only). */
#include "../src/kernels/matmul_bf16dp.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dp_peak.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint16_t *bf16_buf(size_t n) {
    uint16_t *p = aligned_alloc(64, (n * 2 + 63) & ~(size_t)63);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (uint16_t)(0x3f80 + (i * 2654435761u >> 28)); /* 1.0 .. 1.06 */
    return p;
}

static void report(const char *what, double best, double dps, double peak) {
    printf("%s: %.4f ns per vdpbf16ps, peak %.4f ns: %.1f%%\n", what, best / dps * 1e9, peak * 1e9,
           100.0 * peak / (best / dps));
}

TGT static int run_tile(int K, int NR, int TT, int reps) {
    if (TT < 1 || TT > BD_T || NR % BD_ROWS) return fprintf(stderr, "TT 1..%d, NR a multiple of 4\n", BD_T), 2;
    const int ks = k_pad(K) / 32, iters = 10;
    uint16_t *W = bf16_buf((size_t)NR * K), *xp = bf16_buf((size_t)TT * ks * 64);
    float *y = calloc((size_t)TT * NR, sizeof(float));
    double best = 1e30, peak = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        for (int it = 0; it < iters; it++)
            for (int rr = 0; rr < NR; rr += BD_ROWS) {
                size_t wrow[BD_ROWS];
                for (int i = 0; i < BD_ROWS; i++) wrow[i] = (size_t)(rr + i) * K;
                tile_any(W, wrow, BD_ROWS, xp, (size_t)TT * 64, K, y, NR, rr, TT, 0);
            }
        double dt = cpu_now() - t0, p = dp_peak_seconds(cpu_now);
        if (dt > 0 && dt < best) best = dt;
        if (p > 0 && p < peak) peak = p;
    }
    char what[96];
    snprintf(what, sizeof what, "tile K=%d NR=%d TT=%d", K, NR, TT);
    report(what, best, (double)iters * NR * TT * ks * 2, peak);
    free(W), free(xp), free(y);
    return 0;
}

TGT static int run_slices(int N, int K, int count, int reps) {
    const int T = 32, NB = 4, ks = k_pad(K) / 32, slice = (int)(256 * 1024 / ((size_t)K * 2)) / 16 * 16;
    uint16_t *W = bf16_buf((size_t)count * N * K);
    float *x = malloc(sizeof(float) * (size_t)NB * T * K), *y = malloc(sizeof(float) * (size_t)NB * T * N);
    for (size_t i = 0; i < (size_t)NB * T * K; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
    size_t blk = mm_bf16dp_pack_bytes(T, K);
    unsigned char *xp = aligned_alloc(64, (NB * blk + 63) & ~(size_t)63);
    double best = 1e30, peak = 1e30;
    for (int b = 0; b < NB; b++) mm_bf16dp_pack_x(xp + b * blk, x + (size_t)b * T * K, K, T, K);
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        for (int c = 0; c < count; c++) {
            kern_weight w = {0};
            w.data = W + (size_t)c * N * K, w.rows = N, w.cols = K, w.dtype = DT_BF16;
            for (int s0 = 0; s0 < N; s0 += slice)
                for (int b = 0; b < NB; b++)
                    mm_rows_bf16dp(y + (size_t)b * T * N, N, x, K, T, &w, s0, s0 + slice < N ? s0 + slice : N,
                                   xp + b * blk);
        }
        double dt = cpu_now() - t0, p = dp_peak_seconds(cpu_now);
        if (dt > 0 && dt < best) best = dt;
        if (p > 0 && p < peak) peak = p;
    }
    char what[96];
    snprintf(what, sizeof what, "slices [%d x %d] x%d, 128 rows", N, K, count);
    report(what, best, (double)count * NB * T * N * ks * 2, peak);
    free(W), free(x), free(y), free(xp);
    return 0;
}

TGT static int run_walk(int repeat, int reps) {
    enum { T = 32, NB = 4, KMAX = 1920, NMAX = 3840 };
    int shape[48][2], n = 0; /* per layer: input projections, output projection, gate+up, down */
    for (int l = 0; l < 12; l++) {
        shape[n][0] = l % 4 == 3 ? 1536 + 512 : 1280 + 768 + 24, shape[n++][1] = 640; /* q,k,v / qkv,z,b,a */
        shape[n][0] = 640, shape[n++][1] = 768;
        shape[n][0] = 2 * 1920, shape[n++][1] = 640;
        shape[n][0] = 640, shape[n++][1] = 1920;
    }
    size_t total = 0;
    double dps = 0;
    for (int i = 0; i < n; i++) {
        total += (size_t)shape[i][0] * shape[i][1];
        dps += (double)repeat * NB * T * shape[i][0] * (k_pad(shape[i][1]) / 32) * 2;
    }
    uint16_t *W = bf16_buf(total);
    float *x = malloc(sizeof(float) * NB * T * KMAX), *y = malloc(sizeof(float) * NB * T * NMAX);
    for (size_t i = 0; i < (size_t)NB * T * KMAX; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
    unsigned char *xp = aligned_alloc(64, NB * mm_bf16dp_pack_bytes(T, KMAX));
    double best = 1e30, peak = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            int N = shape[i][0], K = shape[i][1], slice = (int)(256 * 1024 / ((size_t)K * 2)) / 16 * 16;
            size_t blk = mm_bf16dp_pack_bytes(T, K);
            for (int b = 0; b < NB; b++) mm_bf16dp_pack_x(xp + b * blk, x + (size_t)b * T * K, K, T, K);
            kern_weight w = {0};
            w.data = W + off, w.rows = N, w.cols = K, w.dtype = DT_BF16;
            off += (size_t)N * K;
            for (int s0 = 0; s0 < N; s0 += slice)
                for (int rr = 0; rr < repeat; rr++)
                    for (int b = 0; b < NB; b++)
                        mm_rows_bf16dp(y + (size_t)b * T * N, N, x, K, T, &w, s0, s0 + slice < N ? s0 + slice : N,
                                       xp + b * blk);
        }
        double dt = cpu_now() - t0, p = dp_peak_seconds(cpu_now);
        if (dt > 0 && dt < best) best = dt;
        if (p > 0 && p < peak) peak = p;
    }
    char what[96];
    snprintf(what, sizeof what, "walk of the small model, 128 rows, repeat %d: %.2f ms", repeat, best * 1e3);
    report(what, best, dps, peak);
    free(W), free(x), free(y), free(xp);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "walk")) return run_walk(atoi(argv[2]), atoi(argv[3]));
    if (argc == 6 && !strcmp(argv[1], "tile")) return run_tile(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    if (argc == 6 && !strcmp(argv[1], "slices"))
        return run_slices(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    fprintf(stderr, "usage: bf16dp_micro tile K NR TT REPS | slices N K COUNT REPS | walk REPEAT REPS\n");
    return 2;
}
