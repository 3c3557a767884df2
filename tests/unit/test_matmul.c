/* test_matmul.c — kern_matmul on dense f32/f16/bf16 weights, every ISA path this CPU runs:
 *   - row invariance: every row of a T-row call (T = 1..16, and 40 > MM_TMAX) is bit-identical to
 *     the same activation row computed alone (T = 1);
 *   - split invariance: a row computed inside a large (thread-split) matrix is bit-identical to the
 *     same weight row computed as a 1-row matrix;
 *   - the AVX-512 path runs bf16 weights through each of its kernels: the FMA kernel on even/odd
 *     packed activations (bf16dp knob off, bf16x on), the widening FMA kernel (both off) and, on a CPU
 *     with avx512_bf16, the VDPBF16PS kernel (bf16dp on); each pair must really differ in bits;
 *   - accuracy: |y - ref| <= 1e-5 * Σ|x·w| + 1e-30 against kern_matmul_ref (fp32, sequential sum; the
 *     bound covers reassociation of an fp32 sum of K terms, K <= 1100). */
#include <stdint.h>

#include "../../src/kernels/cpu.h"
#include "../../src/kernels/knobs.h"
#include "../../src/kernels/matmul.h"
#include "cmp.h"
#include "test.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / (1ull << 23))) - 1.0f;
}

/* A random weight of the given dtype; *store gets the allocation (caller frees). */
static kern_weight make_weight(mtplx_dtype dt, int rows, int cols, void **store) {
    size_t n = (size_t)rows * cols;
    kern_weight w = {.dtype = dt, .rows = rows, .cols = cols};
    if (dt == DT_F32) {
        float *p = malloc(n * 4);
        for (size_t i = 0; i < n; i++) p[i] = frand();
        *store = p;
    } else {
        uint16_t *p = malloc(n * 2);
        for (size_t i = 0; i < n; i++) p[i] = dt == DT_BF16 ? f32_to_bf16(frand()) : f32_to_f16(frand());
        *store = p;
    }
    w.data = *store;
    return w;
}

static const mtplx_dtype k_dtypes[] = {DT_F32, DT_F16, DT_BF16};
static const int k_shapes[][2] = {{37, 77}, {64, 256}, {33, 300}, {130, 1100}, {50, 96}, {16, 32}, {70, 1700}, {24, 120}};

/* For each shape/dtype: T = 1..16 and 40 rows vs T = 1, and vs the reference. */
static void check_row_invariance(kern_isa isa) {
    REQUIRE(cpu_isa_set(isa) == 0);
    int ldx_pad = 3, ldy_pad = 5;
    for (size_t d = 0; d < 3; d++) {
        for (size_t s = 0; s < sizeof k_shapes / sizeof k_shapes[0]; s++) {
            int N = k_shapes[s][0], K = k_shapes[s][1], TM = 40;
            void *store;
            kern_weight w = make_weight(k_dtypes[d], N, K, &store);
            kern_pack_set *packs = NULL; /* the AMX copy, when this path uses one */
            mtplx_err err = {0};
            REQUIRE(kern_pack_set_add(&packs, &w, &err) == 0);
            int ldx = K + ldx_pad, ldy = N + ldy_pad;
            float *x = malloc(sizeof(float) * TM * ldx), *y = malloc(sizeof(float) * TM * ldy);
            float *y1 = malloc(sizeof(float) * TM * N), *yr = malloc(sizeof(float) * N);
            float *absw = malloc(sizeof(float) * K);
            for (int i = 0; i < TM * ldx; i++) x[i] = frand() * 2.0f;
            for (int t = 0; t < TM; t++) kern_matmul(y1 + (size_t)t * N, N, x + (size_t)t * ldx, ldx, 1, &w);
            /* accuracy of the T = 1 rows against the reference */
            double worst = 0;
            for (int t = 0; t < TM; t++) {
                kern_matmul_ref(yr, N, x + (size_t)t * ldx, ldx, 1, &w);
                for (int r = 0; r < N; r++) {
                    kern_weight_row(&w, r, absw);
                    double mag = 0;
                    for (int c = 0; c < K; c++) mag += fabs((double)x[(size_t)t * ldx + c] * absw[c]);
                    double dlt = fabs((double)y1[(size_t)t * N + r] - yr[r]);
                    if (!(dlt <= 1e-5 * mag + 1e-30)) worst = cmp_worst(worst, dlt); /* NaN -> inf */
                }
            }
            CHECK_MSG(worst == 0, "%s %s %dx%d: |y - ref| up to %g beyond tolerance", cpu_isa_name(isa),
                      dtype_name(w.dtype), N, K, worst);
            int Ts[] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 40};
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                int T = Ts[ti];
                /* rows start at varying offsets so each x row meets different neighbours */
                int off = (int)(ti % 5);
                if (off + T > TM) off = TM - T;
                for (int i = 0; i < TM * ldy; i++) y[i] = NAN;
                kern_matmul(y, ldy, x + (size_t)off * ldx, ldx, T, &w);
                int mism = 0;
                for (int t = 0; t < T; t++)
                    mism += memcmp(y + (size_t)t * ldy, y1 + (size_t)(off + t) * N, sizeof(float) * N) != 0;
                CHECK_MSG(mism == 0, "%s %s %dx%d T=%d: %d rows differ from the T=1 result", cpu_isa_name(isa),
                          dtype_name(w.dtype), N, K, T, mism);
                /* padding between rows untouched */
                int clobber = 0;
                for (int t = 0; t < T; t++)
                    for (int r = N; r < ldy; r++) clobber += !isnan(y[(size_t)t * ldy + r]);
                CHECK_INT(clobber, 0);
            }
            free(x), free(y), free(y1), free(yr), free(absw), free(store);
            kern_pack_set_free(packs);
        }
    }
}

/* A big matrix goes through the thread pool; each of its rows must equal the same row computed in a
 * small matrix: a 1-row matrix, or for AMX (which works on aligned 16-row blocks and leaves a short
 * tail to AVX-512) the row's own 16-row block as a matrix. */
static void check_split_invariance(kern_isa isa) {
    REQUIRE(cpu_isa_set(isa) == 0);
    int N = test_sanitized() ? 300 : 1500, K = 1024, T = 5;
    for (size_t d = 0; d < 3; d++) {
        void *store;
        kern_weight w = make_weight(k_dtypes[d], N, K, &store);
        kern_pack_set *packs = NULL;
        mtplx_err err = {0};
        REQUIRE(kern_pack_set_add(&packs, &w, &err) == 0);
        float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N), yr[5 * 16];
        for (int i = 0; i < T * K; i++) x[i] = frand();
        kern_matmul(y, N, x, K, T, &w);
        int mism = 0;
        size_t es = dtype_size(w.dtype);
        for (int r = 0; r < N; r++) {
            int blk = isa == KERN_ISA_AMX ? 16 : 1, rb = r / blk * blk;
            kern_weight one = w;
            one.rows = N - rb < blk ? N - rb : blk;
            one.data = (const unsigned char *)w.data + (size_t)rb * K * es;
            one.amx = NULL;
            REQUIRE(kern_pack_set_add(&packs, &one, &err) == 0);
            kern_matmul(yr, 16, x, K, T, &one);
            for (int t = 0; t < T; t++) mism += memcmp(&yr[t * 16 + r - rb], &y[(size_t)t * N + r], 4) != 0;
        }
        CHECK_MSG(mism == 0, "%s %s: %d elements differ between the split and the 1-row call",
                  cpu_isa_name(isa), dtype_name(w.dtype), mism);
        /* the pool's other way to cut the rows (equal pieces instead of guided ones): the same bits */
        kern_knobs k = *kern_knobs_get(), k0 = k;
        k0.mm_guided = !k.mm_guided;
        kern_knobs_set(&k0);
        float *y2 = malloc(sizeof(float) * T * N);
        kern_matmul(y2, N, x, K, T, &w);
        kern_knobs_set(&k);
        CHECK_MSG(!memcmp(y, y2, sizeof(float) * T * N), "%s %s: guided and equal pieces differ", cpu_isa_name(isa),
                  dtype_name(w.dtype));
        free(y2);
        if (isa == KERN_ISA_AMX && w.dtype == DT_BF16) CHECK(w.amx != NULL); /* the AMX path really ran */
        free(x), free(y), free(store);
        kern_pack_set_free(packs);
    }
}

/* Skip the calling test when this CPU cannot run `isa` (kern_isa): it is not tested here. */
#define SKIP_WITHOUT_ISA(isa)                                                                           \
    do {                                                                                            \
        if (!cpu_isa_supported(isa))                                                                \
            SKIP("this CPU's best path is %s: the %s kernels are not tested", cpu_isa_name(cpu_best_isa()), \
                 cpu_isa_name(isa));                                                                \
    } while (0)

TEST(test_portable_row_invariant_and_accurate) { check_row_invariance(KERN_ISA_PORTABLE); }
TEST(test_portable_split_invariant) { check_split_invariance(KERN_ISA_PORTABLE); }
TEST(test_avx2_row_invariant_and_accurate) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX2);
    check_row_invariance(KERN_ISA_AVX2);
}
TEST(test_avx2_split_invariant) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX2);
    check_split_invariance(KERN_ISA_AVX2);
}
/* Switch bf16 weights on the AVX-512 path between the VDPBF16PS kernel (1) and the FMA kernels (0). */
static void set_bf16dp(int on) {
    kern_knobs k = *kern_knobs_get();
    k.bf16dp = on;
    kern_knobs_set(&k);
}
/* ... and, with bf16dp off, between the FMA kernel on even/odd packed activations (1) and the
 * widening one (0). */
static void set_bf16x(int on) {
    kern_knobs k = *kern_knobs_get();
    k.bf16x = on;
    kern_knobs_set(&k);
}

TEST(test_avx512_row_invariant_and_accurate) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX512);
    set_bf16dp(0);
    check_row_invariance(KERN_ISA_AVX512);
    set_bf16x(0);
    check_row_invariance(KERN_ISA_AVX512);
    set_bf16x(1);
    set_bf16dp(1);
}
TEST(test_avx512_split_invariant) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX512);
    set_bf16dp(0);
    check_split_invariance(KERN_ISA_AVX512);
    set_bf16x(0);
    check_split_invariance(KERN_ISA_AVX512);
    set_bf16x(1);
    set_bf16dp(1);
}
/* Outputs of a 3-row bf16 call (64 x 300 weight) on the path in force that differ between two knob
 * settings (set(a), set(b)). */
static int bf16_outputs_differ(void (*set)(int), int a, int b) {
    void *store;
    kern_weight w = make_weight(DT_BF16, 64, 300, &store);
    float x[3 * 300], ya[3 * 64], yb[3 * 64];
    for (int i = 0; i < 3 * 300; i++) x[i] = frand();
    set(a);
    kern_matmul(ya, 64, x, 300, 3, &w);
    set(b);
    kern_matmul(yb, 64, x, 300, 3, &w);
    int differ = 0;
    for (int i = 0; i < 3 * 64; i++) differ += ya[i] != yb[i];
    free(store);
    return differ;
}
/* The bf16x knob really switches kernels: even/odd sums and the widening kernel's 16-wide ones give
 * different low bits on a 300-input dot product for most outputs. */
TEST(test_avx512_bf16x_path_taken) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX512);
    REQUIRE(cpu_isa_set(KERN_ISA_AVX512) == 0);
    set_bf16dp(0);
    int differ = bf16_outputs_differ(set_bf16x, 1, 0);
    set_bf16x(1);
    set_bf16dp(1);
    CHECK_MSG(differ > 3 * 64 / 4, "only %d of %d outputs differ between the two FMA kernels", differ, 3 * 64);
}

#define SKIP_WITHOUT_BF16DP()                                                                       \
    do {                                                                                            \
        SKIP_WITHOUT_ISA(KERN_ISA_AVX512);                                                          \
        if (!cpu_get_features()->avx512bf16) SKIP("no avx512_bf16: the VDPBF16PS kernel is not tested"); \
    } while (0)

TEST(test_avx512bf16_row_invariant_and_accurate) {
    SKIP_WITHOUT_BF16DP();
    set_bf16dp(1);
    check_row_invariance(KERN_ISA_AVX512);
}
TEST(test_avx512bf16_split_invariant) {
    SKIP_WITHOUT_BF16DP();
    set_bf16dp(1);
    check_split_invariance(KERN_ISA_AVX512);
}
/* The knob really switches kernels: the hi/lo bf16 split and the FMA kernel's fp32 products give
 * different low bits on a 300-input dot product for almost every output. */
TEST(test_avx512bf16_path_taken) {
    SKIP_WITHOUT_BF16DP();
    REQUIRE(cpu_isa_set(KERN_ISA_AVX512) == 0);
    int differ = bf16_outputs_differ(set_bf16dp, 1, 0);
    set_bf16dp(1);
    CHECK_MSG(differ > 3 * 64 / 4, "only %d of %d outputs differ between the two kernels", differ, 3 * 64);
}

TEST(test_amx_row_invariant_and_accurate) {
    SKIP_WITHOUT_ISA(KERN_ISA_AMX);
    check_row_invariance(KERN_ISA_AMX);
}
TEST(test_amx_split_invariant) {
    SKIP_WITHOUT_ISA(KERN_ISA_AMX);
    check_split_invariance(KERN_ISA_AMX);
}

/* AArch64: one dense NEON kernel serves every NEON level (cpu.h); the plain level is tested, and
 * under qemu each CPU model (tests/arm64.sh) runs it. */
TEST(test_neon_row_invariant_and_accurate) {
    SKIP_WITHOUT_ISA(KERN_ISA_NEON);
    check_row_invariance(KERN_ISA_NEON);
}
TEST(test_neon_split_invariant) {
    SKIP_WITHOUT_ISA(KERN_ISA_NEON);
    check_split_invariance(KERN_ISA_NEON);
}

TEST(test_isa_override_names) {
    kern_isa i;
    CHECK(cpu_isa_parse("avx512", &i) == 0 && i == KERN_ISA_AVX512);
    CHECK(cpu_isa_parse("portable", &i) == 0 && i == KERN_ISA_PORTABLE);
    CHECK(cpu_isa_parse("sse9", &i) == -1);
    CHECK_STR(cpu_isa_name(KERN_ISA_AVX2), "avx2");
    CHECK(cpu_isa_parse("amx", &i) == 0 && i == KERN_ISA_AMX);
    CHECK(cpu_isa_set((kern_isa)7) == -1);
    CHECK(cpu_isa_parse("neon-i8mm", &i) == 0 && i == KERN_ISA_NEON_I8MM);
    CHECK(cpu_isa_parse("neon-dot", &i) == 0 && i == KERN_ISA_NEON_DOT);
    CHECK_STR(cpu_isa_name(KERN_ISA_NEON), "neon");
    /* a CPU runs the portable path and its own architecture's levels only */
    CHECK(cpu_isa_supported(KERN_ISA_PORTABLE));
    CHECK(!(cpu_isa_supported(KERN_ISA_AVX2) && cpu_isa_supported(KERN_ISA_NEON)));
    CHECK(cpu_isa_supported(cpu_best_isa()));
    kern_isa foreign = KERN_ISA_IS_NEON(cpu_best_isa()) ? KERN_ISA_AVX2 : KERN_ISA_NEON;
    CHECK(cpu_isa_set(foreign) == -1);
}

int main(void) {
    printf("cpu: best path %s\n", cpu_isa_name(cpu_best_isa()));
    RUN(test_portable_row_invariant_and_accurate);
    RUN(test_portable_split_invariant);
    RUN(test_avx2_row_invariant_and_accurate);
    RUN(test_avx2_split_invariant);
    RUN(test_avx512_row_invariant_and_accurate);
    RUN(test_avx512_split_invariant);
    RUN(test_avx512_bf16x_path_taken);
    RUN(test_avx512bf16_row_invariant_and_accurate);
    RUN(test_avx512bf16_split_invariant);
    RUN(test_avx512bf16_path_taken);
    RUN(test_amx_row_invariant_and_accurate);
    RUN(test_amx_split_invariant);
    RUN(test_neon_row_invariant_and_accurate);
    RUN(test_neon_split_invariant);
    RUN(test_isa_override_names);
    return TEST_SUMMARY();
}
