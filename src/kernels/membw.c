/* membw.c — streaming read of a buffer, for measuring the machine's memory read bandwidth next to a
 * benchmark (`mtplx bench --membw`). The sum keeps the compiler from dropping the loads. */
#include "membw.h"
#include "cpu.h"
#include "threadpool.h"

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static float read_avx512(const float *p, size_t n) {
    __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a = _mm512_add_ps(a, _mm512_loadu_ps(p + i));
        b = _mm512_add_ps(b, _mm512_loadu_ps(p + i + 16));
        c = _mm512_add_ps(c, _mm512_loadu_ps(p + i + 32));
        d = _mm512_add_ps(d, _mm512_loadu_ps(p + i + 48));
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
    for (; i < n; i++) s += p[i];
    return s;
}

__attribute__((target("avx2"))) static float read_avx2(const float *p, size_t n) {
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a = _mm256_add_ps(a, _mm256_loadu_ps(p + i));
        b = _mm256_add_ps(b, _mm256_loadu_ps(p + i + 8));
        c = _mm256_add_ps(c, _mm256_loadu_ps(p + i + 16));
        d = _mm256_add_ps(d, _mm256_loadu_ps(p + i + 24));
    }
    __m256 v = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
    float t[8], s = 0;
    _mm256_storeu_ps(t, v);
    for (int j = 0; j < 8; j++) s += t[j];
    for (; i < n; i++) s += p[i];
    return s;
}
#endif

float kern_stream_read(const float *p, size_t n) {
#if defined(__x86_64__)
    kern_isa isa = cpu_isa();
    if (isa >= KERN_ISA_AVX512) return read_avx512(p, n);
    if (isa == KERN_ISA_AVX2) return read_avx2(p, n);
#endif
    /* plain C (also AArch64, where GCC vectorizes the 4 lanes with NEON at -O3) */
    float s[4] = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += p[i + j];
    for (; i < n; i++) s[0] += p[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

typedef struct {
    const float *p;
    size_t n;
    float part[256];
} read_job;

static void read_task(void *ctx, int i, int n_tasks) {
    read_job *j = ctx;
    size_t per = (j->n / (size_t)n_tasks) & ~(size_t)63;
    size_t a = per * (size_t)i, b = i == n_tasks - 1 ? j->n : a + per;
    j->part[i] = kern_stream_read(j->p + a, b - a);
}

float kern_stream_read_parallel(const float *p, size_t n, int n_threads) {
    tpool *pool = tpool_global();
    int tasks = n_threads > 0 ? n_threads : tpool_threads(pool);
    if (tasks > tpool_threads(pool)) tasks = tpool_threads(pool);
    if (tasks > 256) tasks = 256;
    read_job j = {p, n, {0}};
    tpool_run(pool, tasks, read_task, &j);
    float s = 0;
    for (int i = 0; i < tasks; i++) s += j.part[i];
    return s;
}
