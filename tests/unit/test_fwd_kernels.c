/* test_fwd_kernels.c — the non-matmul kernels of a forward step on every ISA path this CPU runs
 * (portable, AVX2, AVX-512), against double-precision references computed here from the math:
 *   - attention of one query head over n cached keys (equal and unequal key/value widths, widths
 *     that are not multiples of the vector length, strided rows, n = 1..70, large score spreads);
 *   - a path's result for a query never depends on what else is in the buffers (the same query
 *     against a prefix of a longer cache gives the same bits as against a cache of exactly n keys).
 *   - RMSNorm (plain, gated, rows), L2 norm, SwiGLU, the sigmoid gate, the causal conv + SiLU: each
 *     element within a few ulps of the double-precision value (relative 2e-6; the vector exp is about
 *     an ulp from libm's);
 *   - the delta-rule step against its math in double (several value dims),
 *     in place = out of place, and the replay reproduces the step's state bit for bit;
 *   - kern_matmul_n (several weights of mixed formats over the same rows, one pool dispatch on a
 *     3-thread pool) gives bit for bit what kern_matmul gives for each weight, T = 1..6 and 40.
 * Attention tolerance: relative 5e-6 of Σ|p·v| (measured <= 6e-7: fp32 sums of a few hundred terms
 * plus the vector exp's ~1 ulp). */
#include <stdint.h>

#include "../../src/backend/cpu/cpu_backend.h"
#include "../../src/kernels/act.h"
#include "../../src/kernels/attention.h"
#include "../../src/kernels/cpu.h"
#include "../../src/kernels/gdn.h"
#include "../../src/kernels/matmul.h"
#include "../../src/kernels/norm.h"
#include "../../src/kernels/quant.h"
#include "cmp.h"
#include "test.h"

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / (1ull << 23))) - 1.0f;
}

/* each non-matmul kernel path (the NEON levels share one: neon.h); those this CPU cannot run are skipped */
static const kern_isa k_isas[] = {KERN_ISA_PORTABLE, KERN_ISA_AVX2, KERN_ISA_AVX512, KERN_ISA_NEON};

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
                    worst = cmp_worst(worst, e);
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

TEST(test_attention_group_equals_single_queries) {
    static const int shapes[][2] = {{128, 128}, {80, 144}, {192, 128}, {3, 2}, {64, 64}};
    /* several key tiles (64); groups of 1..37 queries, and (first two shapes, two start positions, to
     * keep the sanitizer run short) one full query block (KERN_ATT_GROUP_ROWS = 128) and one block
     * plus 5 */
    enum { NMAX = 300, QMAX = KERN_ATT_GROUP_ROWS + 5 };
    static const int big_nq[] = {KERN_ATT_GROUP_ROWS, QMAX};
    kern_isa saved = cpu_isa();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int dk = shapes[si][0], dv = shapes[si][1], ldk = dk + 3, ldv = dv + 1;
        float *k = malloc(sizeof(float) * NMAX * ldk), *v = malloc(sizeof(float) * NMAX * ldv);
        float *qs = malloc(sizeof(float) * QMAX * dk), *oa = malloc(sizeof(float) * QMAX * dv),
              *ob = malloc(sizeof(float) * QMAX * dv), *sc = malloc(sizeof(float) * KERN_ATT_GROUP_ROWS * NMAX);
        for (int i = 0; i < NMAX * ldk; i++) k[i] = frand();
        for (int i = 0; i < NMAX * ldv; i++) v[i] = frand();
        for (int i = 0; i < QMAX * dk; i++) qs[i] = 2.f * frand();
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            if (cpu_isa_set(k_isas[ii]) != 0) continue;
            for (int ni = 0; ni < 37 + (si < 2 ? 2 : 0); ni++) {
                int nq = ni < 37 ? ni + 1 : big_nq[ni - 37];
                int step = ni >= 37 ? NMAX - 1 - nq : nq < 6 ? 13 : 61; /* big groups: base 1 and NMAX - nq */
                for (int base = 1; base + nq <= NMAX; base += step) {
                    float *out[QMAX];
                    const float *q[QMAX];
                    int n[QMAX];
                    for (int i = 0; i < nq; i++) { /* a verify call's shape: rows t, then heads; n grows by row */
                        out[i] = oa + i * dv, q[i] = qs + i * dk, n[i] = base + i / 2;
                        kern_attention_head_kv(ob + i * dv, q[i], k, ldk, dk, v, ldv, dv, n[i], 0.2f, sc);
                    }
                    kern_attention_group(out, q, n, nq, k, ldk, dk, v, ldv, dv, 0.2f, sc, NMAX);
                    CHECK_MSG(!memcmp(oa, ob, sizeof(float) * nq * dv), "%s dk=%d dv=%d nq=%d base=%d: group != single",
                              cpu_isa_name(k_isas[ii]), dk, dv, nq, base);
                }
            }
        }
        free(k), free(v), free(qs), free(oa), free(ob), free(sc);
    }
    cpu_isa_set(saved);
}

/* The three-phase attention (kern_attention_scores_rows over several key ranges, _softmax, _wsum_rows
 * over several dim ranges) gives every query the bits of kern_attention_group_rows, on every path, over
 * paged rows (pages of 16, shuffled), for decode-sized groups with a verify's growing n. */
TEST(test_attention_phases_equal_group) {
    enum { PS = 16, NP = 40, NMAX = PS * NP, QM = 12 };
    static const int shapes[][2] = {{128, 128}, {80, 144}, {3, 2}};
    int32_t pages[NP];
    for (int i = 0; i < NP; i++) pages[i] = (i * 7) % NP; /* a permutation: 7 and 40 are coprime */
    kern_isa saved = cpu_isa();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int dk = shapes[si][0], dv = shapes[si][1];
        float *k = malloc(sizeof(float) * NMAX * dk), *v = malloc(sizeof(float) * NMAX * dv);
        float *qs = malloc(sizeof(float) * QM * dk), *oa = malloc(sizeof(float) * QM * dv),
              *ob = malloc(sizeof(float) * QM * dv), *sc = malloc(sizeof(float) * QM * NMAX);
        for (int i = 0; i < NMAX * dk; i++) k[i] = frand();
        for (int i = 0; i < NMAX * dv; i++) v[i] = frand();
        for (int i = 0; i < QM * dk; i++) qs[i] = 2.f * frand();
        kern_rows kr = {k, pages, (long)PS * dk, 4, dk}, vr = {v, pages, (long)PS * dv, 4, dv};
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            if (cpu_isa_set(k_isas[ii]) != 0) continue;
            for (int nq = 1; nq <= QM; nq += nq < 4 ? 1 : 4) {
                for (int base = 1; base + nq <= NMAX; base += 97) {
                    float *out[QM], *p[QM];
                    const float *q[QM];
                    int n[QM], nmax = 0;
                    for (int i = 0; i < nq; i++) {
                        out[i] = oa + i * dv, q[i] = qs + i * dk, p[i] = sc + (size_t)i * NMAX, n[i] = base + i / 3;
                        nmax = n[i] > nmax ? n[i] : nmax;
                    }
                    kern_attention_group_rows(out, q, n, nq, &kr, dk, &vr, dv, 0.2f, sc, NMAX);
                    memcpy(ob, oa, sizeof(float) * nq * dv);
                    memset(oa, 0, sizeof(float) * nq * dv);
                    /* keys in ranges of 64 and one odd cut, dims in ranges of 16 and the rest */
                    int cut = nmax / 3 | 1;
                    kern_attention_scores_rows(p, q, n, nq, &kr, dk, 0.2f, 0, cut);
                    for (int j0 = cut; j0 < nmax; j0 += 64)
                        kern_attention_scores_rows(p, q, n, nq, &kr, dk, 0.2f, j0, j0 + 64 < nmax ? j0 + 64 : nmax);
                    for (int i = 0; i < nq; i++) kern_attention_softmax(p[i], n[i]);
                    for (int d0 = 0; d0 < dv; d0 += d0 < 32 ? 16 : dv) {
                        float *o[QM];
                        for (int i = 0; i < nq; i++) o[i] = out[i] + d0;
                        kern_attention_wsum_rows(o, p, n, nq, &vr, d0, d0 < 32 ? (d0 + 16 < dv ? d0 + 16 : dv) : dv);
                    }
                    CHECK_MSG(!memcmp(oa, ob, sizeof(float) * nq * dv), "%s dk=%d dv=%d nq=%d base=%d: phases != group",
                              cpu_isa_name(k_isas[ii]), dk, dv, nq, base);
                }
            }
        }
        free(k), free(v), free(qs), free(oa), free(ob), free(sc);
    }
    cpu_isa_set(saved);
}

static double silu_d(double x) { return x / (1 + exp(-x)); }

/* |got - want| <= tol · (|want| + floor) for every element; reports the worst. */
static void check_close(const char *what, kern_isa isa, const float *got, const double *want, int n, double tol,
                        double floor) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs(got[i] - want[i]) / (fabs(want[i]) + floor);
        worst = cmp_worst(worst, e);
    }
    CHECK_MSG(worst <= tol, "%s on %s, n=%d: relative error %.3g > %g", what, cpu_isa_name(isa), n, worst, tol);
}

TEST(test_norms_and_activations_every_path) {
    static const int sizes[] = {1, 7, 16, 33, 64, 128, 512, 1000};
    enum { NMAX = 1000 };
    float x[NMAX], w[NMAX], z[NMAX], y[NMAX + 16];
    double want[NMAX];
    kern_isa saved = cpu_isa();
    for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
        kern_isa isa = k_isas[ii];
        if (cpu_isa_set(isa) != 0) continue;
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            int n = sizes[si];
            for (int i = 0; i < n; i++) x[i] = 4.f * frand(), w[i] = 1.f + frand(), z[i] = 12.f * frand();
            double ss = 0;
            for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
            double inv = 1 / sqrt(ss / n + 1e-6);
            for (int i = 0; i < n; i++) want[i] = x[i] * inv * w[i];
            y[n] = 777.f;
            kern_rmsnorm(y, x, w, n, 1e-6f);
            check_close("rmsnorm", isa, y, want, n, 2e-6, 1e-3);
            CHECK(y[n] == 777.f);
            kern_rmsnorm_rows(y, n, x, n, w, n, 1, 1e-6f);
            check_close("rmsnorm_rows", isa, y, want, n, 2e-6, 1e-3);
            for (int i = 0; i < n; i++) want[i] *= silu_d(z[i]);
            kern_rmsnorm_gated(y, x, w, z, n, 1e-6f);
            check_close("rmsnorm_gated", isa, y, want, n, 2e-6, 1e-3);
            double inv2 = 1 / sqrt(ss + 1e-6);
            for (int i = 0; i < n; i++) want[i] = x[i] * inv2 * 0.125;
            kern_l2norm(y, x, n, 1e-6f, 0.125f);
            check_close("l2norm", isa, y, want, n, 2e-6, 1e-3);
            for (int i = 0; i < n; i++) want[i] = silu_d(z[i]) * w[i];
            kern_swiglu(y, z, w, n);
            check_close("swiglu", isa, y, want, n, 2e-6, 1e-6);
            for (int i = 0; i < n; i++) y[i] = x[i], want[i] = x[i] / (1 + exp(-(double)z[i]));
            kern_mul_sigmoid(y, z, n);
            check_close("mul_sigmoid", isa, y, want, n, 2e-6, 1e-6);
            CHECK(y[n] == 777.f);
        }
        /* silu at the clamp edges stays finite and signed right */
        float big[4] = {-200.f, -90.f, 90.f, 200.f}, one[4] = {1, 1, 1, 1}, out[4];
        kern_swiglu(out, big, one, 4);
        CHECK_MSG(out[0] <= 0 && out[0] > -1e-30f && out[3] == 200.f && out[2] == 90.f, "%s: silu(+-200) = %g %g",
                  cpu_isa_name(isa), out[0], out[3]);
    }
    cpu_isa_set(saved);
}

/* kern_add on every path: each element is y + x rounded once (the plain sum, bit for bit), from any
 * start, with vector tails of every length, and nothing past n is written. */
TEST(test_add_every_path) {
    enum { NMAX = 300 };
    float x[NMAX], y0[NMAX], y[NMAX + 1];
    kern_isa saved = cpu_isa();
    for (int i = 0; i < NMAX; i++) x[i] = 3.f * frand(), y0[i] = frand() * 1e-3f;
    for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
        kern_isa isa = k_isas[ii];
        if (cpu_isa_set(isa) != 0) continue;
        for (int start = 0; start < 3; start++)
            for (int n = 0; n + start <= NMAX; n += n < 80 ? 1 : 37) {
                memcpy(y, y0, sizeof y0);
                y[NMAX] = 555.f;
                kern_add(y + start, x + start, (size_t)n);
                int bad = -1;
                for (int i = 0; i < NMAX && bad < 0; i++) {
                    float want = i >= start && i < start + n ? y0[i] + x[i] : y0[i];
                    if (memcmp(&y[i], &want, sizeof want)) bad = i;
                }
                CHECK_MSG(bad < 0 && y[NMAX] == 555.f, "%s start=%d n=%d: element %d wrong", cpu_isa_name(isa), start,
                          n, bad);
            }
    }
    cpu_isa_set(saved);
}

TEST(test_conv1d_silu_every_path) {
    enum { KC = 4, RMAX = 5 };
    static const int chans[] = {1, 13, 16, 100, 1024};
    kern_isa saved = cpu_isa();
    for (size_t ci = 0; ci < sizeof chans / sizeof *chans; ci++) {
        int C = chans[ci], ld = C + 3;
        float *x = malloc(sizeof(float) * (KC - 1 + RMAX) * ld), *w = malloc(sizeof(float) * C * KC);
        float *y = malloc(sizeof(float) * RMAX * ld), *y1 = malloc(sizeof(float) * ld);
        double *want = malloc(sizeof(double) * RMAX * C);
        for (int i = 0; i < (KC - 1 + RMAX) * ld; i++) x[i] = 2.f * frand();
        for (int i = 0; i < C * KC; i++) w[i] = frand();
        for (int t = 0; t < RMAX; t++)
            for (int c = 0; c < C; c++) {
                double acc = 0;
                for (int j = 0; j < KC; j++) acc += (double)w[c * KC + j] * x[(t + j) * ld + c];
                want[t * C + c] = silu_d(acc);
            }
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            kern_isa isa = k_isas[ii];
            if (cpu_isa_set(isa) != 0) continue;
            kern_conv1d_silu(y, ld, x, ld, w, C, KC, RMAX);
            for (int t = 0; t < RMAX; t++) check_close("conv1d_silu", isa, y + t * ld, want + t * C, C, 2e-6, 1.0); /* sums of |w·x| <= 8 */
            for (int t = 0; t < RMAX; t++) { /* each row alone: same bits */
                kern_conv1d_silu(y1, ld, x + t * ld, ld, w, C, KC, 1);
                CHECK_MSG(!memcmp(y1, y + t * ld, sizeof(float) * C), "%s C=%d row %d differs alone",
                          cpu_isa_name(isa), C, t);
            }
        }
        free(x), free(w), free(y), free(y1), free(want);
    }
    cpu_isa_set(saved);
}

TEST(test_gdn_replay_matches_step_every_path) {
    static const int dks[] = {16, 64, 24};
    kern_isa saved = cpu_isa();
    for (size_t di = 0; di < sizeof dks / sizeof *dks; di++) {
        int dk = dks[di], dv = 32;
        float *S = malloc(sizeof(float) * dv * dk), *A = malloc(sizeof(float) * dv * dk),
              *B = malloc(sizeof(float) * dv * dk);
        float q[64], k[64], v[32], y[32], delta[32];
        for (int i = 0; i < dv * dk; i++) S[i] = frand();
        for (int i = 0; i < dk; i++) q[i] = frand(), k[i] = frand();
        for (int i = 0; i < dv; i++) v[i] = frand();
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            if (cpu_isa_set(k_isas[ii]) != 0) continue;
            kern_gdn_step(A, S, q, k, v, 0.9f, 0.3f, y, delta, dk, dv);
            kern_gdn_replay(B, S, k, delta, 0.9f, dk, dv);
            CHECK_MSG(!memcmp(A, B, sizeof(float) * dv * dk), "%s dk=%d: replayed state differs from the step's",
                      cpu_isa_name(k_isas[ii]), dk);
        }
        free(S), free(A), free(B);
    }
    cpu_isa_set(saved);
}

/* The delta-rule step against the math in double: S' = g·S + delta ⊗ k, delta = beta·(v − g·S k),
 * y = S' q; value dims 64, 40, 128, 20, 17, and dk = 24 (no SIMD path). */
TEST(test_gdn_step_matches_reference_every_path) {
    static const int shapes[][2] = {{64, 64}, {64, 40}, {128, 128}, {24, 20}, {16, 17}};
    kern_isa saved = cpu_isa();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int dk = shapes[si][0], dv = shapes[si][1];
        float *S = malloc(sizeof(float) * dv * dk), *D = malloc(sizeof(float) * dv * dk);
        float q[128], k[128], v[128], y[128], delta[128];
        double *Sd = malloc(sizeof(double) * dv * dk), yd[128], dd[128];
        for (int i = 0; i < dv * dk; i++) S[i] = 0.5f * frand();
        for (int i = 0; i < dk; i++) q[i] = frand(), k[i] = frand();
        for (int i = 0; i < dv; i++) v[i] = frand();
        float g = 0.93f, beta = 0.4f;
        for (int i = 0; i < dv; i++) {
            double kv = 0, acc = 0;
            for (int j = 0; j < dk; j++) kv += (double)S[i * dk + j] * k[j];
            dd[i] = beta * (v[i] - g * kv);
            for (int j = 0; j < dk; j++) Sd[i * dk + j] = (double)g * S[i * dk + j] + dd[i] * k[j];
            for (int j = 0; j < dk; j++) acc += Sd[i * dk + j] * q[j];
            yd[i] = acc;
        }
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            kern_isa isa = k_isas[ii];
            if (cpu_isa_set(isa) != 0) continue;
            kern_gdn_step(D, S, q, k, v, g, beta, y, delta, dk, dv);
            double ey = 0, ed = 0, es = 0;
            for (int i = 0; i < dv; i++) {
                ey = cmp_worst(ey, fabs(y[i] - yd[i]));
                ed = cmp_worst(ed, fabs(delta[i] - dd[i]));
                for (int j = 0; j < dk; j++) es = cmp_worst(es, fabs(D[i * dk + j] - Sd[i * dk + j]));
            }
            /* magnitudes: |S k| <~ 0.5·dk/4, |y| similar; fp32 sums of dk terms */
            CHECK_MSG(ey <= 2e-5 && ed <= 2e-5 && es <= 1e-6, "%s dk=%d dv=%d: |dy| %.3g |ddelta| %.3g |dS| %.3g",
                      cpu_isa_name(isa), dk, dv, ey, ed, es);
            /* in place (S_dst == S_src) gives the same bits */
            float *P = malloc(sizeof(float) * dv * dk), y2[128];
            memcpy(P, S, sizeof(float) * dv * dk);
            kern_gdn_step(P, P, q, k, v, g, beta, y2, NULL, dk, dv);
            CHECK_MSG(!memcmp(P, D, sizeof(float) * dv * dk) && !memcmp(y2, y, sizeof(float) * dv),
                      "%s dk=%d dv=%d: in-place step differs", cpu_isa_name(isa), dk, dv);
            free(P);
        }
        free(S), free(D), free(Sd);
    }
    cpu_isa_set(saved);
}

/* kern_gdn_steps over R rows gives the bits of R kern_gdn_step calls (state, y, delta), on every
 * path, for R = 1..9 (the AVX-512 path takes blocks of 8 value rows from 8 steps on, of 4 below),
 * value dims with and without tails of 4-row and single-row blocks (22 = 8 + 8 + 4 + 1 + 1), dk = 24
 * (no SIMD path), and with S_dst == S_src. Rows' q/k/v/y/delta sit at strides wider than their
 * lengths. */
TEST(test_gdn_steps_equal_single_steps) {
    static const int shapes[][2] = {{128, 128}, {64, 22}, {16, 5}, {24, 20}};
    enum { LD = 160, RM = 9 };
    kern_isa saved = cpu_isa();
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        int dk = shapes[si][0], dv = shapes[si][1];
        size_t n = (size_t)dv * dk;
        float *S = malloc(sizeof(float) * n), *A = malloc(sizeof(float) * n), *B = malloc(sizeof(float) * n);
        float q[RM * LD], k[RM * LD], v[RM * LD], g[RM], beta[RM];
        float ya[RM * LD], yb[RM * LD], da[RM * LD], db[RM * LD];
        for (size_t i = 0; i < n; i++) S[i] = 0.5f * frand();
        for (int i = 0; i < RM * LD; i++) q[i] = frand(), k[i] = 0.3f * frand(), v[i] = frand();
        for (int t = 0; t < RM; t++) g[t] = 0.8f + 0.02f * t, beta[t] = 0.2f + 0.08f * t;
        for (size_t ii = 0; ii < sizeof k_isas / sizeof *k_isas; ii++) {
            kern_isa isa = k_isas[ii];
            if (cpu_isa_set(isa) != 0) continue;
            for (int R = 1; R <= RM; R++) {
                for (int t = 0; t < R; t++)
                    kern_gdn_step(A, t ? A : S, q + t * LD, k + t * LD, v + t * LD, g[t], beta[t], ya + t * LD,
                                  da + t * LD, dk, dv);
                kern_gdn_steps(B, S, q, k, LD, v, LD, g, beta, yb, LD, db, LD, R, dk, dv);
                int same = !memcmp(A, B, sizeof(float) * n);
                for (int t = 0; t < R; t++)
                    same = same && !memcmp(ya + t * LD, yb + t * LD, sizeof(float) * dv) &&
                           !memcmp(da + t * LD, db + t * LD, sizeof(float) * dv);
                CHECK_MSG(same, "%s dk=%d dv=%d R=%d: steps differ from single steps", cpu_isa_name(isa), dk, dv, R);
                memcpy(B, S, sizeof(float) * n); /* in place, no delta output */
                kern_gdn_steps(B, B, q, k, LD, v, LD, g, beta, yb, LD, NULL, 0, R, dk, dv);
                CHECK_MSG(!memcmp(A, B, sizeof(float) * n) && !memcmp(ya + (R - 1) * LD, yb + (R - 1) * LD,
                                                                      sizeof(float) * dv),
                          "%s dk=%d dv=%d R=%d: in-place steps differ", cpu_isa_name(isa), dk, dv, R);
            }
        }
        free(S), free(A), free(B);
    }
    cpu_isa_set(saved);
}

/* One weight of each format (bf16 with and without the AMX copy, f32, q4 with and without the packed
 * copy, q8, and tiny ones). */
TEST(test_matmul_n_matches_matmul) {
    enum { K = 256, TMAX = 300, NW = 7 };
    static const int rows[NW] = {300, 64, 8, 256, 96, 8, 1024};
    kern_weight w[NW];
    void *mem[NW][3] = {{0}};
    float *f = malloc(sizeof(float) * 1024 * K);
    kern_pack_set *packs = NULL;
    mtplx_err e = {0};
    for (int i = 0; i < NW; i++) {
        for (int j = 0; j < rows[i] * K; j++) f[j] = frand();
        w[i] = (kern_weight){.rows = rows[i], .cols = K};
        if (i == 0 || i == 2 || i == 6) { /* bf16 */
            uint16_t *p = malloc(sizeof(uint16_t) * rows[i] * K);
            for (int j = 0; j < rows[i] * K; j++) p[j] = f32_to_bf16(f[j]);
            w[i].dtype = DT_BF16, w[i].data = mem[i][0] = p;
            if (i != 2) REQUIRE(kern_pack_set_add(&packs, &w[i], &e) == 0); /* the AMX copy, where the CPU has AMX */
        } else if (i == 1) { /* f32 */
            float *p = malloc(sizeof(float) * rows[i] * K);
            memcpy(p, f, sizeof(float) * rows[i] * K);
            w[i].dtype = DT_F32, w[i].data = mem[i][0] = p;
        } else { /* q4 g64 (packed for i == 3), q8 g32 (i == 4), q4 g64 tiny (i == 5) */
            int bits = i == 4 ? 8 : 4, gs = i == 4 ? 32 : 64;
            mem[i][0] = malloc(quant_weight_bytes(rows[i], K, bits));
            mem[i][1] = malloc(quant_scales_bytes(rows[i], K, gs, DT_BF16));
            mem[i][2] = malloc(quant_scales_bytes(rows[i], K, gs, DT_BF16));
            REQUIRE(quant_affine(f, rows[i], K, bits, gs, DT_BF16, mem[i][0], mem[i][1], mem[i][2], &e) == 0);
            w[i] = (kern_weight){.dtype = DT_U32, .rows = rows[i], .cols = K, .data = mem[i][0], .scales = mem[i][1],
                                 .biases = mem[i][2], .scale_dtype = DT_BF16, .bits = bits, .group_size = gs};
            if (i == 3) REQUIRE(kern_pack_set_add(&packs, &w[i], &e) == 0);
        }
    }
    int ldx = K + 8, ldy = 1100;
    float *x = malloc(sizeof(float) * TMAX * ldx), *ya = malloc(sizeof(float) * NW * TMAX * ldy),
          *yb = malloc(sizeof(float) * TMAX * ldy);
    for (int i = 0; i < TMAX * ldx; i++) x[i] = frand();
    static const int Ts[] = {1, 2, 3, 4, 5, 6, 40};
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
        int T = Ts[ti];
        kern_mm_out outs[NW];
        for (int i = 0; i < NW; i++) outs[i] = (kern_mm_out){ya + (size_t)i * TMAX * ldy, ldy, &w[i]};
        kern_matmul_n(outs, NW, x, ldx, T);
        for (int i = 0; i < NW; i++) {
            kern_matmul(yb, ldy, x, ldx, T, &w[i]);
            int same = 1;
            for (int t = 0; t < T; t++)
                same &= !memcmp(yb + (size_t)t * ldy, outs[i].y + (size_t)t * ldy, sizeof(float) * rows[i]);
            CHECK_MSG(same, "T=%d weight %d (%d rows, dtype %d): kern_matmul_n differs from kern_matmul", T, i, rows[i],
                      (int)w[i].dtype);
        }
        /* a pair, and a single one */
        kern_matmul_n(outs + 2, 2, x, ldx, T);
        kern_matmul_n(outs + 6, 1, x, ldx, T);
    }
    /* bf16 weights only, more rows than one 32-row block (prefill chunks: the activations of every
     * block packed once, one dispatch over slices of weight rows; beyond 256 rows, groups of 256):
     * each row equals that row computed alone */
    static const int Tmany[] = {33, 100, 300};
    for (size_t ti = 0; ti < sizeof Tmany / sizeof *Tmany; ti++) {
        int T = Tmany[ti], wi[2] = {0, 6};
        kern_mm_out bo[2] = {{ya, ldy, &w[0]}, {ya + (size_t)TMAX * ldy, ldy, &w[6]}};
        memset(ya, 0xff, sizeof(float) * 2 * TMAX * ldy); /* NaN: a row left unwritten cannot pass */
        kern_matmul_n(bo, 2, x, ldx, T);
        for (int k = 0; k < 2; k++) {
            int same = 1;
            for (int t = 0; t < T; t++) {
                kern_matmul(yb, ldy, x + (size_t)t * ldx, ldx, 1, &w[wi[k]]);
                same &= !memcmp(yb, bo[k].y + (size_t)t * ldy, sizeof(float) * rows[wi[k]]);
            }
            CHECK_MSG(same, "T=%d bf16 weight %d: a row of kern_matmul_n differs from the row alone", T, wi[k]);
        }
    }
    kern_pack_set_free(packs);
    for (int i = 0; i < NW; i++) free(mem[i][0]), free(mem[i][1]), free(mem[i][2]);
    free(f), free(x), free(ya), free(yb);
}

int main(void) {
    setenv("MTPLX_THREADS", "3", 1); /* before the pool exists: kern_matmul_n splits even on 1 CPU */
    cpu_settings cpu;                 /* the CPU backend reads its knobs once, as at model load */
    cpu_settings_from_env(&cpu, NULL);
    cpu_settings_apply(&cpu);
    RUN(test_attention_matches_reference_every_path);
    RUN(test_attention_depends_only_on_its_keys);
    RUN(test_attention_group_equals_single_queries);
    RUN(test_attention_phases_equal_group);
    RUN(test_norms_and_activations_every_path);
    RUN(test_add_every_path);
    RUN(test_conv1d_silu_every_path);
    RUN(test_gdn_replay_matches_step_every_path);
    RUN(test_gdn_step_matches_reference_every_path);
    RUN(test_gdn_steps_equal_single_steps);
    RUN(test_matmul_n_matches_matmul);
    return TEST_SUMMARY();
}
