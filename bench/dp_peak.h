/* dp_peak.h — the VDPBF16PS throughput loop shared by bench/gemm_bench.c and bench/bf16dp_micro.c
 * (DP_PEAK_LOOP: the same loop for any zmm dot-product instruction, e.g. bench/qpack_micro.c's vpdpbusd):
 * 16 independent accumulator chains of zmm dot products (two per cycle at a core's peak), timed with
 * the caller's clock. Returns seconds per instruction. x86-64 with AVX512-BF16 only. */
#ifndef MTPLX_BENCH_DP_PEAK_H
#define MTPLX_BENCH_DP_PEAK_H

/* 16 independent chains of INSN (an AVX-512 "op zmm30, zmm31, zmmN" dot product), n rounds. */
#define DP_PEAK_LOOP(INSN, n)                                                                              \
    __asm__ volatile("mov %0, %%rcx\n1:\n"                                                                 \
                     INSN " %%zmm30, %%zmm31, %%zmm0\n " INSN " %%zmm30, %%zmm31, %%zmm1\n"                 \
                     INSN " %%zmm30, %%zmm31, %%zmm2\n " INSN " %%zmm30, %%zmm31, %%zmm3\n"                 \
                     INSN " %%zmm30, %%zmm31, %%zmm4\n " INSN " %%zmm30, %%zmm31, %%zmm5\n"                 \
                     INSN " %%zmm30, %%zmm31, %%zmm6\n " INSN " %%zmm30, %%zmm31, %%zmm7\n"                 \
                     INSN " %%zmm30, %%zmm31, %%zmm8\n " INSN " %%zmm30, %%zmm31, %%zmm9\n"                 \
                     INSN " %%zmm30, %%zmm31, %%zmm10\n " INSN " %%zmm30, %%zmm31, %%zmm11\n"               \
                     INSN " %%zmm30, %%zmm31, %%zmm12\n " INSN " %%zmm30, %%zmm31, %%zmm13\n"               \
                     INSN " %%zmm30, %%zmm31, %%zmm14\n " INSN " %%zmm30, %%zmm31, %%zmm15\n"               \
                     "dec %%rcx\n jnz 1b\n"                                                                 \
                     :                                                                                     \
                     : "r"(n)                                                                              \
                     : "rcx", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
                       "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory")

static double dp_peak_seconds(double (*clock_s)(void)) {
    const long n = 300000;
    double t0 = clock_s();
    DP_PEAK_LOOP("vdpbf16ps", n);
    return (clock_s() - t0) / (n * 16.0);
}

#endif
