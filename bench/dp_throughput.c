// bench/dp_throughput.c — issue rate of vdpbf16ps vs vpdpbusd on this core (bench/zen.md, "Session 45"):
// gcc -O2 -o /tmp/dp_throughput bench/dp_throughput.c && /tmp/dp_throughput
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
#define N 12
__attribute__((target("avx512f,avx512bf16"))) static double run_bf16(long it, float *sink) {
    __m512 acc[N]; __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3f81);
    for (int i = 0; i < N; i++) acc[i] = _mm512_setzero_ps();
    double t = now();
    for (long k = 0; k < it; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < N; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    t = now() - t;
    __m512 s = acc[0]; for (int i = 1; i < N; i++) s = _mm512_add_ps(s, acc[i]);
    *sink += _mm512_reduce_add_ps(s);
    return t / (it * N) * 1e9;
}
__attribute__((target("avx512f,avx512vnni"))) static double run_vnni(long it, int *sink) {
    __m512i acc[N], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int i = 0; i < N; i++) acc[i] = _mm512_setzero_si512();
    double t = now();
    for (long k = 0; k < it; k++) {
#pragma GCC unroll 12
        for (int i = 0; i < N; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
        __asm__ volatile("" : "+v"(a));
    }
    t = now() - t;
    __m512i s = acc[0]; for (int i = 1; i < N; i++) s = _mm512_add_epi32(s, acc[i]);
    *sink += _mm512_reduce_add_epi32(s);
    return t / (it * N) * 1e9;
}
int main(void) {
    float fs = 0; int is = 0; long it = 10000000;
    for (int r = 0; r < 5; r++) {
        double b = run_bf16(it, &fs), v = run_vnni(it, &is);
        printf("round %d: vdpbf16ps %.4f ns, vpdpbusd %.4f ns (per instruction; ratio %.2f)\n", r, b, v, v / b);
    }
    printf("%g %d\n", fs, is);
}
