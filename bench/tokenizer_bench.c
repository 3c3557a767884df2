/* tokenizer_bench.c — encode throughput of the tokenizer (MB/s of UTF-8 text), built and run by
 * bench/tokenizer.sh. Usage: tokenizer_bench TOKENIZER_DIR TEXT_FILE MIN_BYTES [REPEATS [file-only]]
 * The text file is repeated until it holds at least MIN_BYTES. Reports load time, a cold encode
 * (fresh tokenizer, empty word cache), warm encodes (cache filled) and a decode of the ids, all as
 * MB per second of CPU time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../src/base/file.h"
#include "../src/tokenizer/tokenizer.h"

/* CPU time of this process: on a shared, loaded machine it tracks the work done far better than
 * wall time (the encode is single-threaded). */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s TOKENIZER_DIR TEXT_FILE MIN_BYTES [REPEATS]\n", argv[0]);
        return 2;
    }
    size_t min_bytes = strtoull(argv[3], NULL, 10);
    int repeats = argc > 4 ? atoi(argv[4]) : 3;
    mtplx_err err = {0};
    size_t n;
    char *one = file_read_all(argv[2], &n, &err);
    if (!one) { fprintf(stderr, "%s\n", err.msg); return 1; }
    size_t total = 0, cap = min_bytes + n + 1;
    char *text = malloc(cap);
    while (total < min_bytes) { memcpy(text + total, one, n); total += n; }
    double t0 = now();
    tokenizer *t;
    if (tok_load_ex(argv[1], argc > 5 && !strcmp(argv[5], "file-only") ? TOK_LOAD_FILE_ONLY : 0, &t, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double t_load = now() - t0;
    int32_t *ids;
    int m;
    t0 = now();
    if (tok_encode(t, text, total, &ids, &m, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double t_cold = now() - t0;
    double best = 1e30;
    for (int r = 0; r < repeats; r++) {
        int32_t *ids2;
        int m2;
        t0 = now();
        tok_encode(t, text, total, &ids2, &m2, &err);
        double dt = now() - t0;
        if (dt < best) best = dt;
        if (m2 != m || memcmp(ids, ids2, (size_t)m * sizeof *ids)) { fprintf(stderr, "non-deterministic encode\n"); return 1; }
        free(ids2);
    }
    char *back;
    size_t bl;
    t0 = now();
    tok_decode(t, ids, m, 0, &back, &bl, &err);
    double t_dec = now() - t0;
    printf("%-60s bytes=%zu tokens=%d load=%.2fs encode_cold=%.1f MB/s encode_warm=%.1f MB/s decode=%.1f MB/s roundtrip=%s\n",
           argv[1], total, m, t_load, total / t_cold / 1e6, total / best / 1e6, bl / t_dec / 1e6,
           bl == total && !memcmp(back, text, total) ? "yes" : "no");
    free(back);
    free(ids);
    free(text);
    free(one);
    tok_free(t);
    return 0;
}
