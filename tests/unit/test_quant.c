/* test_quant.c — MLX affine quantizer and the quantized (q4/q8, group 32/64/128, bf16/f16/f32
 * scales) matmul paths:
 *   - quantizer: every value within |scale|/2 of its original (+ the far-end clipping MLX's edge
 *     rescaling allows, + the rounding of scale/bias to the stored dtype), the larger-magnitude edge of each group exact, q inside [0, 2^bits-1], negative
 *     scales produced when the positive edge is larger;
 *   - kern_matmul on every path this CPU runs: rows of T = 2..16 and 40 row calls bit-identical to
 *     T = 1; rows of a thread-split matrix bit-identical to 1-row matrices; and within the int8
 *     activation error bound of the fp32 reference (kern_matmul_ref on the dequantized weight):
 *     |y - ref| <= Σ_g (max_g|x| / 254) · Σ_{c in g} |w_c| · 1.01 + 1e-5 · Σ|x·w|;
 *   - the AMX-INT8 kernel (T >= 3 on repacked weights) bit-identical to the VNNI kernel;
 *   - the AVX2 kernel on the repacked weights (CPUs without VNNI) bit-identical to the VNNI kernel;
 *   - MTPLX_QACT=f32 path within 1e-5 · Σ|x·w| of the reference. */
#include <stdint.h>

#include "../../src/kernels/cpu.h"
#include "../../src/kernels/knobs.h"
#include "../../src/kernels/matmul.h"
#include "../../src/kernels/matmul_q.h"
#include "../../src/kernels/quant.h"
#include "cmp.h"
#include "test.h"

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / (1ull << 23))) - 1.0f;
}

typedef struct {
    kern_weight w;
    uint32_t *q;
    void *s, *b;
    float *deq;   /* [rows][cols] dequantized (the reference weight) */
} qmat;

static qmat make_qmat(int rows, int cols, int bits, int gs, mtplx_dtype sdt, float offset) {
    qmat m;
    float *f = malloc(sizeof(float) * rows * cols);
    for (int i = 0; i < rows * cols; i++) f[i] = frand() * 0.5f + offset;
    m.q = malloc(quant_weight_bytes(rows, cols, bits));
    m.s = malloc(quant_scales_bytes(rows, cols, gs, sdt));
    m.b = malloc(quant_scales_bytes(rows, cols, gs, sdt));
    mtplx_err e;
    int rc = quant_affine(f, rows, cols, bits, gs, sdt, m.q, m.s, m.b, &e);
    if (rc) fprintf(stderr, "quant_affine: %s\n", e.msg);
    m.w = (kern_weight){.dtype = DT_U32, .rows = rows, .cols = cols, .data = m.q, .scales = m.s,
                        .biases = m.b, .scale_dtype = sdt, .bits = bits, .group_size = gs};
    m.deq = f; /* reuse: overwrite with the dequantized rows */
    for (int r = 0; r < rows; r++) kern_weight_row(&m.w, r, m.deq + (size_t)r * cols);
    return m;
}

static void free_qmat(qmat *m) { free(m->q), free(m->s), free(m->b), free(m->deq); }

TEST(test_quantizer_error_and_edges) {
    const int bits_l[] = {4, 8}, gs_l[] = {32, 64, 128};
    const mtplx_dtype sdt_l[] = {DT_F32, DT_BF16};
    for (int bi = 0; bi < 2; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int si = 0; si < 2; si++) {
                int rows = 8, cols = 256, bits = bits_l[bi], gs = gs_l[gi];
                float *w = malloc(sizeof(float) * rows * cols), *d = malloc(sizeof(float) * cols);
                for (int i = 0; i < rows * cols; i++) w[i] = frand() * (1.0f + (float)(i / cols));
                for (int c = 0; c < cols; c++) w[c] = fabsf(w[c]); /* row 0: all positive -> negative scales */
                uint32_t *q = malloc(quant_weight_bytes(rows, cols, bits));
                float *s = malloc(quant_scales_bytes(rows, cols, gs, DT_F32)), *b = malloc(quant_scales_bytes(rows, cols, gs, DT_F32));
                mtplx_err e;
                REQUIRE(quant_affine(w, rows, cols, bits, gs, sdt_l[si], q, s, b, &e) == 0);
                kern_weight kw = {.dtype = DT_U32, .rows = rows, .cols = cols, .data = q, .scales = s, .biases = b,
                                  .scale_dtype = sdt_l[si], .bits = bits, .group_size = gs};
                int bad = 0, neg = 0, edge_bad = 0;
                for (int r = 0; r < rows; r++) {
                    kern_weight_row(&kw, r, d);
                    for (int g = 0; g < cols / gs; g++) {
                        float mn = INFINITY, mx = -INFINITY, sc = 0;
                        int gi2 = r * (cols / gs) + g;
                        sc = sdt_l[si] == DT_F32 ? s[gi2] : bf16_to_f32(((uint16_t *)s)[gi2]);
                        neg += sc < 0;
                        for (int i = 0; i < gs; i++) {
                            float v = w[(size_t)r * cols + g * gs + i];
                            mn = fminf(mn, v), mx = fmaxf(mx, v);
                        }
                        /* rounding: |scale|/2; the far end is clipped at q = 2^bits-1 when the rescaled
                         * |scale| (edge/q0) came out below range/n; bf16 scale/bias: up to 2^-8 relative */
                        float n = (float)((1 << bits) - 1);
                        float clip = fmaxf(0.f, (mx - mn) - n * fabsf(sc));
                        float tol = fabsf(sc) * 0.5001f + clip * 1.001f +
                                    (sdt_l[si] == DT_F32 ? 1e-6f : (fabsf(mn) + fabsf(mx)) * 0.0079f);
                        for (int i = 0; i < gs; i++) {
                            int c = g * gs + i;
                            bad += !cmp_close(d[c], w[(size_t)r * cols + c], tol);
                        }
                        if (sdt_l[si] == DT_F32) {
                            float edge = fabsf(mn) > fabsf(mx) ? mn : mx;
                            int found = 0;
                            for (int i = 0; i < gs; i++) found |= d[g * gs + i] == edge;
                            edge_bad += !found;
                        }
                    }
                }
                CHECK_MSG(bad == 0, "bits %d gs %d %s: %d values beyond scale/2", bits, gs, dtype_name(sdt_l[si]), bad);
                CHECK_MSG(edge_bad == 0, "bits %d gs %d: %d groups lost their edge value", bits, gs, edge_bad);
                CHECK_MSG(neg > 0, "bits %d gs %d: no negative scale produced for an all-positive row", bits, gs);
                free(w), free(d), free(q), free(s), free(b);
            }
}

TEST(test_quantizer_rejects_bad_formats) {
    float w[96] = {0};
    uint32_t q[96];
    float s[8], b[8];
    mtplx_err e;
    err_clear(&e);
    CHECK_INT(quant_affine(w, 1, 96, 3, 32, DT_F32, q, s, b, &e), MTPLX_EINVAL);
    CHECK_INT(quant_affine(w, 1, 96, 4, 64, DT_F32, q, s, b, &e), MTPLX_EINVAL);
    CHECK(strstr(e.msg, "multiple of the group size") != NULL);
    CHECK_INT(quant_affine(w, 1, 96, 4, 32, DT_I32, q, s, b, &e), MTPLX_EINVAL);
}

/* Row invariance, accuracy bound, split invariance for one format on the current path. */
static int g_packed; /* 1: run through kern_pack_set_add's repacked weights */

static void check_format(int bits, int gs, mtplx_dtype sdt, int N, int K) {
    const int TM = 40;
    qmat m = make_qmat(N, K, bits, gs, sdt, 0.1f);
    kern_pack_set *set = NULL;
    if (g_packed) {
        mtplx_err e;
        REQUIRE(kern_pack_set_add(&set, &m.w, &e) == 0);
        CHECK_MSG(m.w.packed != NULL || K % 64, "q%d gs%d %dx%d: not packed", bits, gs, N, K);
    }
    float *x = malloc(sizeof(float) * TM * K), *y = malloc(sizeof(float) * TM * N);
    float *y1 = malloc(sizeof(float) * TM * N), *yr = malloc(sizeof(float) * N);
    for (int i = 0; i < TM * K; i++) x[i] = frand() * (i % 97 == 0 ? 8.f : 1.f); /* some outliers */
    for (int t = 0; t < TM; t++) kern_matmul(y1 + (size_t)t * N, N, x + (size_t)t * K, K, 1, &m.w);
    int over = 0;
    double worst = 0;
    for (int t = 0; t < TM; t += 3) {
        const float *xt = x + (size_t)t * K;
        kern_matmul_ref(yr, N, xt, K, 1, &m.w);
        for (int r = 0; r < N; r++) {
            double bound = 0, mag = 0;
            for (int g = 0; g < K / gs; g++) {
                double amax = 0, wabs = 0;
                for (int i = 0; i < gs; i++) {
                    int c = g * gs + i;
                    amax = fmax(amax, fabs(xt[c]));
                    wabs += fabs(m.deq[(size_t)r * K + c]);
                    mag += fabs((double)xt[c] * m.deq[(size_t)r * K + c]);
                }
                bound += amax / 254.0 * wabs;
            }
            double dl = fabs((double)y1[(size_t)t * N + r] - yr[r]);
            if (!(dl <= bound * 1.01 + 1e-5 * mag)) over++, worst = cmp_worst(worst, dl / (bound + 1e-30));
        }
    }
    CHECK_MSG(over == 0, "%s q%d gs%d %s %dx%d: %d outputs beyond the int8 bound (worst %.3f x bound)",
              cpu_isa_name(cpu_isa()), bits, gs, dtype_name(sdt), N, K, over, worst);
    int Ts[] = {2, 3, 4, 5, 7, 8, 9, 13, 16, 40};
    for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
        int T = Ts[ti], off = (int)(ti % 4);
        if (off + T > TM) off = TM - T;
        kern_matmul(y, N, x + (size_t)off * K, K, T, &m.w);
        int mism = 0;
        for (int t = 0; t < T; t++) mism += memcmp(y + (size_t)t * N, y1 + (size_t)(off + t) * N, sizeof(float) * N) != 0;
        CHECK_MSG(mism == 0, "%s q%d gs%d %s: T=%d: %d rows differ from T=1", cpu_isa_name(cpu_isa()), bits, gs,
                  dtype_name(sdt), T, mism);
    }
    free(x), free(y), free(y1), free(yr);
    free_qmat(&m);
    kern_pack_set_free(set);
}

static void check_split(int bits, int gs) {
    int N = test_sanitized() ? 256 : 1024, K = 1024, T = 3;
    qmat m = make_qmat(N, K, bits, gs, DT_BF16, 0.f);
    kern_pack_set *set = NULL;
    mtplx_err e;
    if (g_packed) REQUIRE(kern_pack_set_add(&set, &m.w, &e) == 0 && m.w.packed);
    float *x = malloc(sizeof(float) * T * K), *y = malloc(sizeof(float) * T * N), yr[3];
    for (int i = 0; i < T * K; i++) x[i] = frand();
    kern_matmul(y, N, x, K, T, &m.w);
    int mism = 0, G = K / gs;
    kern_pack_set *one_set = NULL; /* one set for all the 1-row copies: they share its 64 MB slabs (a set a
                                    * row made the ASan build map and clear 64 MB per row: minutes) */
    for (int r = 0; r < N; r++) {
        kern_weight one = m.w;
        one.rows = 1;
        one.data = (const unsigned char *)m.q + (size_t)r * K * bits / 8;
        one.scales = (const uint16_t *)m.s + (size_t)r * G;
        one.biases = (const uint16_t *)m.b + (size_t)r * G;
        one.packed = NULL;
        if (g_packed) REQUIRE(kern_pack_set_add(&one_set, &one, &e) == 0);
        kern_matmul(yr, 1, x, K, T, &one);
        for (int t = 0; t < T; t++) mism += memcmp(&yr[t], &y[(size_t)t * N + r], 4) != 0;
    }
    kern_pack_set_free(one_set);
    CHECK_MSG(mism == 0, "%s q%d gs%d: %d elements differ between the split and 1-row calls", cpu_isa_name(cpu_isa()),
              bits, gs, mism);
    free(x), free(y);
    free_qmat(&m);
    kern_pack_set_free(set);
}

/* Skip the calling test when this CPU cannot run `isa` (kern_isa) with VNNI when `vnni`. */
#define SKIP_WITHOUT_ISA(isa, vnni)                                                                     \
    do {                                                                                            \
        if (!cpu_isa_supported(isa))                                                                \
            SKIP("this CPU's best path is %s: the %s kernels are not tested", cpu_isa_name(cpu_best_isa()), \
                 cpu_isa_name(isa));                                                                \
        if ((vnni) && !cpu_get_features()->avx512vnni) SKIP("this CPU has no AVX512-VNNI");         \
    } while (0)

static void check_path(kern_isa isa) {
    REQUIRE(cpu_isa_set(isa) == 0);
    const int bits_l[] = {4, 8}, gs_l[] = {32, 64, 128};
    const mtplx_dtype sdt_l[] = {DT_BF16, DT_F16, DT_F32};
    for (int bi = 0; bi < 2; bi++)
        for (int gi = 0; gi < 3; gi++) {
            check_format(bits_l[bi], gs_l[gi], sdt_l[(bi + gi) % 3], 37, 384);
            check_split(bits_l[bi], gs_l[gi]);
        }
    /* K % 128 == 64: the AVX-512 q4 kernel's 64-input chunks (K % 128 == 0 above: 128-input chunks) */
    check_format(4, 64, DT_BF16, 21, 320);
    /* K % 64 == 32 takes the AVX2 / portable route even on AVX-512 */
    check_format(4, 32, DT_BF16, 19, 96);
}

TEST(test_portable_int8_path) { check_path(KERN_ISA_PORTABLE); }
TEST(test_avx2_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX2, 0);
    check_path(KERN_ISA_AVX2);
}
/* The AVX2 activation quantizer (vectorized) gives the values of the portable one — a, d, bd and the
 * group sums — in both layouts it writes and every group size, with a zero group (d = 0), a group
 * whose amax is 127 so that half-way values (2.5, -3.5, ...) test round-to-nearest-even, and random
 * groups with an outlier. */
TEST(test_avx2_activation_fill_matches_portable) {
#if !defined(__x86_64__)
    SKIP("not an x86-64 build: no AVX2 quantizer");
#else
    SKIP_WITHOUT_ISA(KERN_ISA_AVX2, 0);
    enum { T = 3, K = 384 };
    static float x[T * K];
    for (int i = 0; i < T * K; i++) x[i] = frand() * (i % 37 == 0 ? 9.f : 1.f);
    for (int i = 0; i < 128; i++) x[i] = 0.f;                              /* row 0: zero groups */
    for (int i = 0; i < 128; i++) x[K + i] = i == 5 ? 127.f : (i % 9) - 4.5f + (i & 1); /* ties */
    const qa_layout lay[2] = {QA_NATURAL, QA_Q4_32};
    static int8_t a0[T * K], a1[T * K];
    static float d0[T * 12], d1[T * 12], b0[T * 12], b1[T * 12];
    static int32_t s1[T * 12];
    for (int l = 0; l < 2; l++)
        for (int gs = 32; gs <= 128; gs *= 2) {
            const int G = K / gs;
            qact q0 = {T, K, G, gs, lay[l], a0, d0, b0, NULL, NULL}, q1 = {T, K, G, gs, lay[l], a1, d1, b1, NULL, s1};
            qact_fill_portable(x, K, &q0);
            qact_fill_avx2(x, K, &q1);
            CHECK_MSG(!memcmp(a0, a1, sizeof a0), "layout %d gs %d: int8 activations differ", l, gs);
            CHECK_MSG(!memcmp(d0, d1, sizeof(float) * T * G) && !memcmp(b0, b1, sizeof(float) * T * G),
                      "layout %d gs %d: d or d·Σa differ", l, gs);
            for (int t = 0; t < T; t++)
                for (int g = 0; g < G; g++) {
                    int sum = 0;
                    for (int i = 0; i < gs; i++) sum += a0[t * K + g * gs + i]; /* a group's bytes stay in it */
                    CHECK_INT(s1[t * G + g], sum);
                }
        }
    CHECK(d0[0] == 0.f); /* the zero group */
#endif
}

/* Set the avxvnni knob (the AVX2 path's packed kernel with or without vpdpbusd on ymm). */
static void set_avxvnni(int on) {
    kern_knobs k = *kern_knobs_get();
    k.avxvnni = on;
    kern_knobs_set(&k);
}

/* AVX2 on the repacked weights (matmul_qpack_avx2.c): two 8-row halves per 16-row block, T = 1..4 per
 * tile (so 5, 7, 9, 13, 16, 40 mix tile sizes); without AVX-VNNI, and with it where the CPU has it. */
TEST(test_avx2_packed_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX2, 0);
    g_packed = 1;
    for (int vnni = 0; vnni <= cpu_get_features()->avxvnni; vnni++) {
        set_avxvnni(vnni);
        CHECK_INT(cpu_isa_set(KERN_ISA_AVX2) == 0 && cpu_avxvnni_used(), vnni);
        check_path(KERN_ISA_AVX2);
        check_format(4, 64, DT_BF16, 100, 2048); /* several blocks, a partial last block (rows 96..99) */
        check_format(8, 128, DT_F16, 109, 1024); /* a last block with rows in its second half */
    }
    set_avxvnni(1);
    g_packed = 0;
}

/* kern_matmul of every format at T = 1..5 (tiles of 4 + 1 on AVX2, of 5 on AVX-512) with a partial
 * last block, under path isa with the avxvnni knob set to vnni, into y[q4 / q8][gs 32 / 64 / 128][T - 1]. */
#define PK_N 45
#define PK_K 384
#define PK_T 5
static void packed_all_formats(kern_isa isa, int vnni, float y[2][3][PK_T][PK_T * PK_N]) {
    const mtplx_dtype sdt_l[] = {DT_BF16, DT_F16, DT_F32};
    for (int bits = 4; bits <= 8; bits += 4)
        for (int gi = 0, gs = 32; gs <= 128; gs *= 2, gi++) {
            mtplx_dtype sdt = sdt_l[(bits + gs / 32) % 3];
            g_rng = 0x9e3779b97f4a7c15ull + (uint64_t)(bits * 1000 + gs); /* the same inputs for every path */
            qmat m = make_qmat(PK_N, PK_K, bits, gs, sdt, 0.1f);
            kern_pack_set *set = NULL;
            mtplx_err e;
            REQUIRE(kern_pack_set_add(&set, &m.w, &e) == 0 && m.w.packed);
            float x[PK_T * PK_K];
            for (int i = 0; i < PK_T * PK_K; i++) x[i] = frand() * (i % 53 == 0 ? 8.f : 1.f);
            set_avxvnni(vnni);
            REQUIRE(cpu_isa_set(isa) == 0);
            for (int T = 1; T <= PK_T; T++) kern_matmul(y[bits / 8][gi][T - 1], PK_N, x, PK_K, T, &m.w);
            free_qmat(&m);
            kern_pack_set_free(set);
        }
    set_avxvnni(1);
    REQUIRE(cpu_isa_set(cpu_best_isa()) == 0);
}

/* The AVX2 packed kernel forms the same exact integer group sums as the AVX-512 VNNI kernel (with
 * vpmaddubsw chains, or with AVX-VNNI's vpdpbusd on ymm where the CPU has it: Intel's client cores from
 * Alder Lake on take that form) and runs the same float epilogue per lane, so all give the same bits:
 * every format, 1..5 rows, a partial last block. Each form is compared with the other AVX2 form where
 * the CPU runs both, and with AVX-512 VNNI where it has that. */
TEST(test_avx2_packed_forms_match) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX2, 0);
    int has_vnni = cpu_get_features()->avxvnni, has_512 = cpu_isa_supported(KERN_ISA_AVX512) && cpu_get_features()->avx512vnni;
    if (!has_vnni && !has_512) SKIP("this CPU has neither AVX-VNNI nor AVX512-VNNI: one form, nothing to compare");
    static float y[3][2][3][PK_T][PK_T * PK_N]; /* [AVX2, AVX2 + AVX-VNNI, AVX-512 VNNI] */
    const char *name[3] = {"AVX2", "AVX-VNNI", "AVX-512 VNNI"};
    packed_all_formats(KERN_ISA_AVX2, 0, y[0]);
    if (has_vnni) packed_all_formats(KERN_ISA_AVX2, 1, y[1]);
    if (has_512) packed_all_formats(KERN_ISA_AVX512, 1, y[2]);
    for (int f = 1; f < 3; f++) {
        if (f == 1 ? !has_vnni : !has_512) continue;
        for (int b = 0; b < 2; b++)
            for (int g = 0; g < 3; g++)
                for (int T = 1; T <= PK_T; T++)
                    CHECK_MSG(memcmp(y[0][b][g][T - 1], y[f][b][g][T - 1], sizeof(float) * (size_t)(T * PK_N)) == 0,
                              "q%d gs%d T=%d: the %s kernel differs from the AVX2 one", 4 + 4 * b, 32 << g, T, name[f]);
    }
}

TEST(test_avx512_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX512, 0);
    check_path(KERN_ISA_AVX512);
}
/* The VNNI packed kernel with both ways of feeding q4's and q8's activation quads from 2 rows on (shuffle mix
 * and broadcast operands only, $MTPLX_QPACK_MIX: which one a CPU takes by default depends on it), so
 * every machine checks both, and with q4's block pairs from 6 rows on ($MTPLX_QPACK_PAIR, default) and
 * without them: row invariance (T = 2..40 against T = 1, whose rows come from single blocks) and the
 * int8 bound each time. */
TEST(test_avx512_packed_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_AVX512, 1);
    kern_knobs saved = *kern_knobs_get(), k = saved;
    g_packed = 1;
    for (int v = 0; v < 3; v++) {
        int mix = v & 1;
        k.qpack_mix = mix;
        k.qpack_pair = v < 2;
        kern_knobs_set(&k);
        CHECK_INT(kern_knobs_get()->qpack_mix, mix);
        check_path(KERN_ISA_AVX512);
        check_format(4, 64, DT_BF16, 100, 2048); /* several blocks, a partial last block */
    }
    check_format(4, 64, DT_BF16, 40, 6144); /* long rows (an FFN down projection's) */
    check_format(8, 32, DT_F16, 40, 4160);
    g_packed = 0;
    kern_knobs_set(&saved);
}

/* AMX-INT8 on the repacked weights (T >= $MTPLX_QAMX_MIN, default 9): the T = 1 rows come from the
 * VNNI kernel, so the row invariance checks also prove both kernels give the same bits, for every
 * format and 9..40 rows (fewer rows check VNNI against itself). */
TEST(test_amx_packed_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_AMX, 1);
    g_packed = 1;
    check_path(KERN_ISA_AMX);
    check_format(4, 64, DT_BF16, 100, 2048);
    check_format(8, 128, DT_F32, 100, 2048);
    g_packed = 0;
    REQUIRE(cpu_isa_set(cpu_best_isa()) == 0);
}

/* AArch64: the three NEON integer kernels (widening multiplies, SDOT, USMMLA), each on its own. */
TEST(test_neon_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_NEON, 0);
    check_path(KERN_ISA_NEON);
}
TEST(test_neon_dot_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_NEON_DOT, 0);
    check_path(KERN_ISA_NEON_DOT);
}
TEST(test_neon_i8mm_int8_path) {
    SKIP_WITHOUT_ISA(KERN_ISA_NEON_I8MM, 0);
    check_path(KERN_ISA_NEON_I8MM);
    REQUIRE(cpu_isa_set(cpu_best_isa()) == 0);
}

/* The NEON levels differ only in how they form the exact integer group sums (matmul_q_neon.c), so
 * every level this CPU runs gives the same bits as the plain NEON level, for q4 and q8, odd row and
 * activation-row counts (the 2 × 2 tiles' partial cases). */
TEST(test_neon_levels_bit_identical) {
    SKIP_WITHOUT_ISA(KERN_ISA_NEON_DOT, 0);
    const int N = 37, K = 384, T = 5;
    int levels = 0;
    for (int bits = 4; bits <= 8; bits += 4) {
        qmat m = make_qmat(N, K, bits, bits == 4 ? 64 : 32, DT_BF16, 0.1f);
        float x[T * K], y0[T * N], y1[T * N];
        for (int i = 0; i < T * K; i++) x[i] = frand();
        REQUIRE(cpu_isa_set(KERN_ISA_NEON) == 0);
        kern_matmul(y0, N, x, K, T, &m.w);
        for (kern_isa isa = KERN_ISA_NEON_DOT; isa <= KERN_ISA_NEON_I8MM; isa++) {
            if (cpu_isa_set(isa) != 0) continue;
            levels++;
            kern_matmul(y1, N, x, K, T, &m.w);
            CHECK_MSG(memcmp(y0, y1, sizeof y0) == 0, "q%d: %s differs from neon", bits, cpu_isa_name(isa));
        }
        free_qmat(&m);
    }
    CHECK(levels >= 2);
    REQUIRE(cpu_isa_set(cpu_best_isa()) == 0);
}

TEST(test_f32_activation_path_matches_reference) {
    kern_matmul_set_qact_f32(1);
    const int N = 45, K = 256, T = 6;
    for (int bits = 4; bits <= 8; bits += 4) {
        qmat m = make_qmat(N, K, bits, 64, DT_BF16, 0.f);
        float x[T * K], y[T * N], yr[T * N];
        for (int i = 0; i < T * K; i++) x[i] = frand();
        kern_matmul(y, N, x, K, T, &m.w);
        kern_matmul_ref(yr, N, x, K, T, &m.w);
        int bad = 0;
        for (int t = 0; t < T; t++)
            for (int r = 0; r < N; r++) {
                double mag = 0;
                for (int c = 0; c < K; c++) mag += fabs((double)x[t * K + c] * m.deq[(size_t)r * K + c]);
                bad += !cmp_close(y[t * N + r], yr[t * N + r], 1e-5 * mag);
            }
        CHECK_MSG(bad == 0, "q%d: %d outputs of the f32-activation path off the reference", bits, bad);
        free_qmat(&m);
    }
    kern_matmul_set_qact_f32(0);
}

/* The packed kernels' prefetch distances: explicit knobs apply to every call; auto (-1, the
 * default) gives 4096 / 16384 except 1-row calls on AMD, which prefetch nothing (bench/zen.md,
 * "Session 5"). */
/* kern_matmul_each (one dispatch, each product over its own activations; the MoE down projections)
 * gives every product the bits kern_matmul gives it alone: q4 and q8 in the checkpoint's layout and
 * packed, products sharing an input and not, 1 to 3 rows (not the same for all), big enough to be
 * split over the pool. */
TEST(test_matmul_each_equals_single) {
    enum { NW = 5, T = 3 };
    const int rows[NW] = {2048, 512, 96, 2048, 256}, cols = 512, xof[NW] = {0, 1, 1, 2, 0};
    const int bits[NW] = {4, 4, 8, 8, 4}, gsz[NW] = {64, 32, 64, 128, 64};
    for (int pack = 0; pack < 2; pack++) {
        qmat m[NW];
        kern_pack_set *set = NULL;
        mtplx_err e;
        for (int k = 0; k < NW; k++) {
            m[k] = make_qmat(rows[k], cols, bits[k], gsz[k], DT_BF16, 0.f);
            if (pack) REQUIRE(kern_pack_set_add(&set, &m[k].w, &e) == 0);
        }
        float *x = malloc(sizeof(float) * 3 * T * cols);
        for (int i = 0; i < 3 * T * cols; i++) x[i] = frand();
        for (int t = 1; t <= T; t += T - 1) {
            kern_mm_out o[NW];
            const float *xs[NW];
            int ld[NW], ts[NW];
            float *y[NW], *y1[NW];
            for (int k = 0; k < NW; k++) {
                y[k] = malloc(sizeof(float) * T * rows[k]), y1[k] = malloc(sizeof(float) * T * rows[k]);
                o[k] = (kern_mm_out){y[k], rows[k], &m[k].w};
                xs[k] = x + (size_t)xof[k] * T * cols, ld[k] = cols;
                ts[k] = k == 4 && t > 1 ? t - 1 : t; /* product 4 shares product 0's input, with fewer rows */
                kern_matmul(y1[k], rows[k], xs[k], cols, ts[k], &m[k].w);
            }
            kern_matmul_each(o, NW, xs, ld, ts);
            for (int k = 0; k < NW; k++) {
                CHECK_MSG(!memcmp(y[k], y1[k], sizeof(float) * ts[k] * rows[k]),
                          "%s, T=%d: product %d (q%d gs%d) differs", pack ? "packed" : "checkpoint layout", ts[k], k,
                          bits[k], gsz[k]);
                free(y[k]), free(y1[k]);
            }
        }
        free(x);
        for (int k = 0; k < NW; k++) free_qmat(&m[k]);
        kern_pack_set_free(set);
    }
}

TEST(test_qpack_prefetch_policy) {
    kern_knobs saved = *kern_knobs_get(), k = kern_knobs_default();
    CHECK_INT(k.qpack_pf, -1);
    CHECK_INT(k.qpack_pf2, -1);
    kern_knobs_set(&k);
    int pf, pf2, amd = cpu_get_features()->amd;
    for (int T = 1; T <= 9; T++) {
        kern_qpack_prefetch(T, &pf, &pf2);
        int quiet = T == 1 && amd;
        CHECK_INT(pf, quiet ? 0 : 4096);
        CHECK_INT(pf2, quiet ? 0 : 16384);
    }
    k.qpack_pf = 2048, k.qpack_pf2 = 0;
    kern_knobs_set(&k);
    for (int T = 1; T <= 4; T++) {
        kern_qpack_prefetch(T, &pf, &pf2);
        CHECK_INT(pf, 2048);
        CHECK_INT(pf2, 0);
    }
    kern_knobs_set(&saved);
}

int main(void) {
    RUN(test_quantizer_error_and_edges);
    RUN(test_quantizer_rejects_bad_formats);
    RUN(test_matmul_each_equals_single);
    RUN(test_portable_int8_path);
    RUN(test_avx2_int8_path);
    RUN(test_avx2_activation_fill_matches_portable);
    RUN(test_avx2_packed_int8_path);
    RUN(test_avx2_packed_forms_match);
    RUN(test_avx512_int8_path);
    RUN(test_avx512_packed_int8_path);
    RUN(test_amx_packed_int8_path);
    RUN(test_neon_int8_path);
    RUN(test_neon_dot_int8_path);
    RUN(test_neon_i8mm_int8_path);
    RUN(test_neon_levels_bit_identical);
    RUN(test_f32_activation_path_matches_reference);
    RUN(test_qpack_prefetch_policy);
    kern_matmul_release_scratch();
    return TEST_SUMMARY();
}
