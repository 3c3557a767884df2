/* gemm_bench.c — CPU-time figures for the bf16 matmul path with many activation rows (bench/gemm.md).
 *
 * The machine this was written on is shared and `perf` has no hardware counters there, so nothing
 * here is wall clock: every figure is the minimum over --reps of the CPU time of one call (the
 * calling thread's clock with MTPLX_THREADS=1, the process's otherwise), which an interruption can
 * only lengthen. Built against a libmtplx.a by bench/gemm.sh.
 *
 *   gemm_bench matmul N K COUNT REPS T...   COUNT random bf16 [N x K] weights (COUNT > 1: streamed
 *                                            from memory), kern_matmul with T rows; per T the sum over
 *                                            the weights of each call's best time, GFLOP/s, and the
 *                                            fraction of the vdpbf16ps peak measured in the same run
 *   gemm_bench forward MODEL REPS R...      after a 512-token prefill (its CPU ms per token printed),
 *                                            the best CPU time of an R-row decode-position forward
 *
 * Peak: 16 independent VDPBF16PS zmm chains; the kernel spends two per 32 products (activations
 * split into hi and lo bf16, docs/kernels.md), so its fp32-equivalent peak is 32 multiply-adds per
 * two instructions. */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/backend/cpu/cpu_backend.h"
#include "../src/kernels/matmul.h"
#include "../src/model/model.h"

#include "dp_peak.h"

/* CPU seconds of the calling thread (one-thread runs) or of the process. */
static double cpu_seconds(void) {
    static int per_thread = -1;
    if (per_thread < 0) {
        const char *t = getenv("MTPLX_THREADS");
        per_thread = t && atoi(t) == 1;
    }
    struct timespec ts;
    clock_gettime(per_thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The matmul mode; returns the exit status. */
static int bench_matmul(int n, int k, int count, int reps, int argc, char **argv) {
    uint16_t *wdata = malloc((size_t)count * n * k * 2);
    kern_weight *w = calloc((size_t)count, sizeof *w);
    double *best = malloc(sizeof(double) * (size_t)count);
    int tmax = 1;
    for (int a = 0; a < argc; a++)
        if (atoi(argv[a]) > tmax) tmax = atoi(argv[a]);
    float *x = malloc(sizeof(float) * (size_t)tmax * k), *y = malloc(sizeof(float) * (size_t)tmax * n);
    if (!wdata || !w || !best || !x || !y) return fprintf(stderr, "out of memory\n"), 1;
    srand(1);
    for (size_t i = 0; i < (size_t)count * n * k; i++) {
        float f = (rand() / (float)RAND_MAX - 0.5f) * 0.1f;
        uint32_t u;
        memcpy(&u, &f, 4);
        wdata[i] = (uint16_t)(u >> 16);
    }
    for (size_t i = 0; i < (size_t)tmax * k; i++) x[i] = rand() / (float)RAND_MAX - 0.5f;
    for (int i = 0; i < count; i++)
        w[i] = (kern_weight){.dtype = DT_BF16, .rows = n, .cols = k, .data = wdata + (size_t)i * n * k};
    for (int a = 0; a < argc; a++) {
        int t = atoi(argv[a]);
        double peak = 1e9;
        for (int i = 0; i < count; i++) best[i] = 1e9;
        for (int r = 0; r < reps; r++) {
            double p = dp_peak_seconds(cpu_seconds);
            if (p < peak) peak = p;
            for (int i = 0; i < count; i++) {
                double t0 = cpu_seconds();
                kern_matmul(y, n, x, k, t, &w[i]);
                double s = cpu_seconds() - t0;
                if (s < best[i]) best[i] = s;
            }
        }
        double sum = 0;
        for (int i = 0; i < count; i++) sum += best[i];
        double flop = 2.0 * n * k * t * count, peak_flops = 32.0 / peak;
        printf("[%d x %d] x%d T=%-4d %9.3f ms %7.1f GFLOP/s %5.1f%% of %.0f (peak this run) %6.1f GB/s\n", n, k,
               count, t, sum * 1e3, flop / sum * 1e-9, 100.0 * flop / sum / peak_flops, peak_flops * 1e-9,
               (double)n * k * 2 * count / sum * 1e-9);
    }
    free(wdata), free(w), free(best), free(x), free(y);
    return 0;
}

/* The forward mode; returns the exit status. */
static int bench_forward(const char *dir, int reps, int argc, char **argv) {
    mtplx_model *m = NULL;
    mtplx_err err = {0};
    if (model_load(dir, &m, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    const model_config *c = model_config_of(m);
    const int ctx = 512; /* prefill tokens before the timed forwards */
    for (int a = 0; a < argc; a++) {
        int rows = atoi(argv[a]);
        model_state *s = NULL;
        if (model_state_new(m, ctx + (reps + 1) * rows + 8, rows, &s, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        int32_t *tok = malloc(sizeof(int32_t) * (size_t)(ctx > rows ? ctx : rows));
        float *logits = malloc(sizeof(float) * (size_t)(ctx > rows ? ctx : rows) * c->vocab_size);
        if (!tok || !logits) return fprintf(stderr, "out of memory\n"), 1;
        for (int i = 0; i < ctx; i++) tok[i] = (int32_t)((i * 7919) % c->vocab_size);
        fwd_request pre = {.logits = logits, .logits_from = ctx - 1};
        double t0 = cpu_seconds();
        if (model_forward(m, s, tok, ctx, &pre, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        double prefill = cpu_seconds() - t0, best = 1e9;
        for (int r = 0; r < reps; r++) {
            for (int i = 0; i < rows; i++) tok[i] = (int32_t)((r * 131 + i * 17) % c->vocab_size);
            fwd_request req = {.logits = logits, .logits_from = 0, .capture = 1};
            t0 = cpu_seconds();
            if (model_forward(m, s, tok, rows, &req, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
            double d = cpu_seconds() - t0;
            if (d < best) best = d;
            if (model_state_commit(s, 1, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        }
        printf("R=%-3d forward %8.3f ms CPU (%.3f ms per row)   prefill %d tokens: %.3f ms CPU per token\n", rows,
               best * 1e3, best * 1e3 / rows, ctx, prefill * 1e3 / ctx);
        model_state_free(s);
        free(tok), free(logits);
    }
    model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    cpu_settings cs; /* MTPLX_THREADS, MTPLX_KERNEL, ... as the CPU backend reads them */
    mtplx_err kerr = {0};
    if (cpu_settings_from_env(&cs, &kerr)) return fprintf(stderr, "%s\n", kerr.msg), 2;
    cpu_settings_apply(&cs);
    if (argc >= 7 && !strcmp(argv[1], "matmul"))
        return bench_matmul(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), argc - 6, argv + 6);
    if (argc >= 5 && !strcmp(argv[1], "forward")) return bench_forward(argv[2], atoi(argv[3]), argc - 4, argv + 4);
    fprintf(stderr, "usage: gemm_bench matmul N K COUNT REPS T... | gemm_bench forward MODEL REPS R...\n");
    return 2;
}
