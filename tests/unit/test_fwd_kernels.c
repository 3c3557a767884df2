/* test_fwd_kernels.c — the non-matmul kernels of a forward step on every ISA path this CPU runs
 * (portable, AVX2, AVX-512), against double-precision references computed here from the math:
 *   - attention of one query head over n cached keys (equal and unequal key/value widths, widths
 *     that are not multiples of the vector length, strided rows, n = 1..70, large score spreads);
 *   - a path's result for a query never depends on what else is in the buffers (the same query
 *     against a prefix of a longer cache gives the same bits as against a cache of exactly n keys).
 * Tolerance: relative 5e-6 of Σ|p·v| (measured <= 6e-7: fp32 sums of a few hundred terms plus the vector exp's
 * ~1 ulp). */
#include <stdint.h>

#include "../../src/kernels/attention.h"
#include "../../src/kernels/cpu.h"
#include "test.h"

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / (1ull << 23))) - 1.0f;
}

static const kern_isa k_isas[] = {KERN_ISA_PORTABLE, KERN_ISA_AVX2, KERN_ISA_AVX512};

/* Double-precision reference: out[dv] and Σ_j p_j |v_j[d]| per d (the error scale) into mag. */
static void attention_ref(double *out, double *mag, const float *q, const float *k, int ldk, int dk, const float *v,
                          int ldv, int dv, int n, float scale) {
    double s[128], mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        double acc = 0;
        for (int d = 0; d < dk; d++) acc += (double)q[d] * k[(size_t)j * ldk + d];
        s[j] = acc * scale;
        if (s[j] > mx) mx = s[j];
    }
    for (int j = 0; j < n; j++) sum += s[j] = exp(s[j] - mx);
    for (int d = 0; d < dv; d++) {
        out[d] = mag[d] = 0;
        for (int j = 0; j < n; j++) {
            out[d] += s[j] / sum * v[(size_t)j * ldv + d];
            mag[d] += s[j] / sum * fabs(v[(size_t)j * ldv + d]);
        }
    }
}

TEST(test_attention_matches_reference_every_path) {
    static const int shapes[][2] = {{128, 128}, {64, 64}, {3, 2}, {192, 128}, {17, 33}, {256, 256}, {80, 144}};
    enum { NMAX = 70 };
    kern_isa saved = cpu_isa();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int dk = shapes[si][0], dv = shapes[si][1], ldk = dk + 5, ldv = dv + 3;
        float *k = malloc(sizeof(float) * NMAX * ldk), *v = malloc(sizeof(float) * NMAX * ldv);
        float q[256], out[256 + 16], sc[NMAX];
        double ref[256], mag[256];
        for (int i = 0; i < NMAX * ldk; i++) k[i] = frand();
        for (int i = 0; i < NMAX * ldv; i++) v[i] = frand();
        for (int i = 0; i < dk; i++) q[i] = 3.0f * frand(); /* spread scores over ~e^±10 */
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            if (cpu_isa_set(k_isas[ii]) != 0) continue;
            for (int n = 1; n <= NMAX; n += (n < 20 ? 1 : 7)) {
                float scale = 1.0f / sqrtf((float)dk);
                for (int d = 0; d < dv + 16; d++) out[d] = 12345.f; /* sentinels past dv */
                kern_attention_head_kv(out, q, k, ldk, dk, v, ldv, dv, n, scale, sc);
                attention_ref(ref, mag, q, k, ldk, dk, v, ldv, dv, n, scale);
                double worst = 0;
                for (int d = 0; d < dv; d++) {
                    double e = fabs(out[d] - ref[d]) / (mag[d] + 1e-30);
                    if (e > worst) worst = e;
                }
                CHECK_MSG(worst <= 5e-6, "%s dk=%d dv=%d n=%d: relative error %.3g", cpu_isa_name(k_isas[ii]), dk, dv,
                          n, worst);
                CHECK_MSG(out[dv] == 12345.f, "%s dk=%d dv=%d: wrote past dv", cpu_isa_name(k_isas[ii]), dk, dv);
            }
        }
        free(k);
        free(v);
    }
    cpu_isa_set(saved);
}

TEST(test_attention_depends_only_on_its_keys) {
    /* the first n rows of a 60-key cache, then the same n keys copied into a fresh exact-size buffer
     * with different garbage around: identical bits on every path */
    enum { DK = 128, N = 60 };
    kern_isa saved = cpu_isa();
    float *k = malloc(sizeof(float) * N * DK), *v = malloc(sizeof(float) * N * DK);
    float *k2 = malloc(sizeof(float) * (N + 1) * DK), *v2 = malloc(sizeof(float) * (N + 1) * DK);
    float q[DK], a[DK], b[DK], sc[N + 1];
    for (int i = 0; i < N * DK; i++) k[i] = frand(), v[i] = frand();
    for (int i = 0; i < DK; i++) q[i] = frand();
    for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
        if (cpu_isa_set(k_isas[ii]) != 0) continue;
        for (int n = 1; n <= N; n++) {
            for (int i = 0; i < (N + 1) * DK; i++) k2[i] = v2[i] = 1e6f;
            memcpy(k2, k, sizeof(float) * n * DK);
            memcpy(v2, v, sizeof(float) * n * DK);
            for (int j = 0; j <= N; j++) sc[j] = -7.f;
            kern_attention_head(a, q, k, v, DK, n, DK, 0.1f, sc);
            kern_attention_head(b, q, k2, v2, DK, n, DK, 0.1f, sc);
            CHECK_MSG(!memcmp(a, b, sizeof a), "%s n=%d: result depends on memory past the keys",
                      cpu_isa_name(k_isas[ii]), n);
        }
    }
    cpu_isa_set(saved);
    free(k), free(v), free(k2), free(v2);
}

int main(void) {
    RUN(test_attention_matches_reference_every_path);
    RUN(test_attention_depends_only_on_its_keys);
    return TEST_SUMMARY();
}
