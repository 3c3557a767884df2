/* prefill_bench.c — CPU time and wall time of a prefill (bench/zen.md "Prefill"). On a shared
 * machine the wall clock is noise; the process's CPU time (all threads: work plus the pool's spin
 * waits) is what this reports first, each figure the minimum over REPS, plus the wall minimum.
 *
 *   prefill_bench MODEL N REPS        N random tokens into a fresh state, REPS times
 *
 * Built against a libmtplx.a by bench/prefill.sh (or by hand: gcc -O2 ... bench/prefill_bench.c
 * build/libmtplx.a $(pkg-config --libs ...)). Threads: $MTPLX_THREADS as the CPU backend reads it. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../src/backend/cpu/cpu_backend.h"
#include "../src/kernels/threadpool.h"
#include "../src/model/model.h"

/* A thread-pool build with hand-off statistics (bench/prefill.sh STATS=1) defines these. */
__attribute__((weak)) void tpool_stats_reset(void);
__attribute__((weak)) void tpool_stats_print(void);

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4) return fprintf(stderr, "usage: prefill_bench MODEL N REPS\n"), 2;
    int n = atoi(argv[2]), reps = atoi(argv[3]);
    cpu_settings cs;
    mtplx_err kerr = {0};
    if (cpu_settings_from_env(&cs, &kerr)) return fprintf(stderr, "%s\n", kerr.msg), 2;
    cpu_settings_apply(&cs);
    mtplx_model *m = NULL;
    mtplx_err err = {0};
    if (model_load(argv[1], &m, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    const model_config *c = model_config_of(m);
    model_state *s = NULL;
    if (model_state_new(m, n + 1, 1, &s, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    if (!tok || !logits) return fprintf(stderr, "out of memory\n"), 1;
    unsigned long long r = 88172645463325252ull;
    for (int i = 0; i < n; i++) r ^= r << 13, r ^= r >> 7, r ^= r << 17, tok[i] = (int32_t)(r % (unsigned)c->vocab_size);
    double best_cpu = 1e30, best_wall = 1e30;
    if (tpool_stats_reset) tpool_stats_reset();
    for (int k = 0; k < reps; k++) {
        model_state_reset(s);
        fwd_request req = {.logits = logits, .logits_from = n - 1};
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
        if (model_forward(m, s, tok, n, &req, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        double dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0, dw = clock_s(CLOCK_MONOTONIC) - w0;
        if (dc < best_cpu) best_cpu = dc;
        if (dw < best_wall) best_wall = dw;
    }
    if (tpool_stats_print) tpool_stats_print();
    unsigned long long h = 1469598103934665603ull; /* FNV-1a of the last row's logits: same bits, same hash */
    const unsigned char *lb = (const unsigned char *)logits;
    for (size_t i = 0; i < sizeof(float) * (size_t)c->vocab_size; i++) h = (h ^ lb[i]) * 1099511628211ull;
    printf("prefill %d tokens, %d threads: CPU %.2f ms (%.4f ms/token), wall %.2f ms = %.0f tok/s; logits %016llx\n", n,
           tpool_threads(tpool_global()), best_cpu * 1e3, best_cpu * 1e3 / n, best_wall * 1e3, n / best_wall, h);
    model_state_free(s);
    model_free(m);
    free(tok), free(logits);
    return 0;
}
