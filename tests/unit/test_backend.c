/* test_backend.c — the backend boundary (docs/architecture.md): choosing a backend, the CPU
 * backend's settings read once from the environment, buffers, and the row-invariance contract of
 * the ops as the model layer calls them (R rows at once ≡ the rows one by one, bit for bit). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/backend/backend.h"
#include "../../src/base/dtype.h"
#include "../../src/backend/cpu/cpu_backend.h"
#include "../../src/kernels/cpu.h"
#include "../../src/model/model_internal.h"
#include "test.h"

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* uniform in [-1, 1) */
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) / (double)(1 << 24)) * 2.0f - 1.0f;
}
static void fill(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = frand();
}

TEST(test_unknown_backend_refused_with_the_available_ones) {
    be_backend *be = (be_backend *)1;
    mtplx_err err = {0};
    CHECK_INT(be_create("nope", &be, &err), MTPLX_EINVAL);
    CHECK(be == NULL);
    CHECK_MSG(strstr(err.msg, "nope") && strstr(err.msg, "cpu"), "message: %s", err.msg);
}

TEST(test_cpu_settings_read_from_the_environment) {
    setenv("MTPLX_KERNEL", "avx2", 1);
    setenv("MTPLX_THREADS", "5", 1);
    setenv("MTPLX_QPACK", "0", 1);
    setenv("MTPLX_QACT", "f32", 1);
    setenv("MTPLX_QAMX_MIN", "3", 1);
    setenv("MTPLX_QPACK_PF", "128", 1);
    setenv("MTPLX_PREFILL_ROWS", "96", 1);
    setenv("MTPLX_PACK_EXPERTS", "", 1); /* empty: the default */
    cpu_settings s;
    mtplx_err err = {0};
    CHECK_INT(cpu_settings_from_env(&s, &err), 0);
    kern_knobs d = kern_knobs_default();
    CHECK_INT(s.knobs.isa, KERN_ISA_AVX2);
    CHECK_INT(s.knobs.threads, 5);
    CHECK_INT(s.knobs.qpack, 0);
    CHECK_INT(s.knobs.qact_f32, 1);
    CHECK_INT(s.knobs.qamx_min, 3);
    CHECK_INT(s.knobs.qpack_pf, 128);
    CHECK_INT(s.prefill_rows, 96);
    CHECK_INT(s.pack_experts, -1);
    const char *names[] = {"MTPLX_KERNEL", "MTPLX_THREADS", "MTPLX_QPACK", "MTPLX_QACT", "MTPLX_QAMX_MIN",
                           "MTPLX_QPACK_PF", "MTPLX_PREFILL_ROWS", "MTPLX_PACK_EXPERTS"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unsetenv(names[i]);
    CHECK_INT(cpu_settings_from_env(&s, &err), 0);
    CHECK_MSG(memcmp(&s.knobs, &d, sizeof d) == 0, "unset environment must give the defaults");
    CHECK_INT(s.prefill_rows, CPU_PREFILL_ROWS_DEFAULT);
}

/* A knob set to something that is not of its kind — a typo'd kernel path, a number with junk, one out
 * of range — fails the backend's creation with a message naming the variable and what it may hold,
 * instead of running silently with the default; the other knobs keep their defaults. */
TEST(test_bad_knobs_are_errors) {
    static const char *const bad[][3] = {
        {"MTPLX_KERNEL", "avx3", "avx512"},     {"MTPLX_THREADS", "abc", "[0, 256]"},
        {"MTPLX_THREADS", "4096", "[0, 256]"},  {"MTPLX_THREADS", "4x", "[0, 256]"},
        {"MTPLX_PREFILL_ROWS", "8", "[32, 4096]"}, {"MTPLX_QACT", "fp32", "int8, f32"},
        {"MTPLX_AMX_PF", "99999999", "1048576"}, {"MTPLX_FUSE", "off", "0, 1"},
        {"MTPLX_PACK_EXPERTS", "2", "0, 1"},    {"MTPLX_ATT_SPLIT", "-5", "[0,"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv(bad[i][0], bad[i][1], 1);
        cpu_settings s;
        mtplx_err err = {0};
        CHECK_INT(cpu_settings_from_env(&s, &err), MTPLX_EINVAL);
        CHECK_MSG(strstr(err.msg, bad[i][0]) && strstr(err.msg, bad[i][1]) && strstr(err.msg, bad[i][2]),
                  "%s=%s: %s", bad[i][0], bad[i][1], err.msg);
        CHECK_INT(s.prefill_rows, CPU_PREFILL_ROWS_DEFAULT);
        CHECK_INT(s.knobs.threads, 0);
        be_backend *be = NULL;
        err_clear(&err);
        CHECK_INT(be_create("cpu", &be, &err), MTPLX_EINVAL);
        CHECK(be == NULL && strstr(err.msg, bad[i][0]));
        unsetenv(bad[i][0]);
    }
}

/* A program's override (tests comparing a quantized model with its dequantized copy) survives the
 * backend that a model load creates afterwards. */
TEST(test_program_override_survives_backend_creation) {
    setenv("MTPLX_QACT", "int8", 1);
    kern_matmul_set_qact_f32(1);
    be_backend *be;
    mtplx_err err = {0};
    REQUIRE(be_create(NULL, &be, &err) == 0);
    CHECK_INT(kern_knobs_get()->qact_f32, 1);
    be_free(be);
    kern_matmul_set_qact_f32(0);
    unsetenv("MTPLX_QACT");
}

TEST(test_buffers_round_trip) {
    be_backend *be;
    mtplx_err err = {0};
    REQUIRE(be_create(NULL, &be, &err) == 0);
    CHECK_STR(be->ops->name, "cpu");
    CHECK_INT(be->caps.host_memory, 1);
    be_buf *a, *b;
    REQUIRE(be->ops->buf_alloc(be, 64 * sizeof(float), 1, "a", &a, &err) == 0);
    REQUIRE(be->ops->buf_alloc(be, 64 * sizeof(float), 0, "b", &b, &err) == 0);
    float host[64], back[64];
    fill(host, 64);
    float *pa = be_buf_addr(be, a), *pb = be_buf_addr(be, b);
    be_buf *big;
    REQUIRE(be->ops->buf_alloc(be, (size_t)1 << 20, 0, "big", &big, &err) == 0); /* malloc would mmap it */
    CHECK_MSG(((uintptr_t)pa | (uintptr_t)pb | (uintptr_t)be_buf_addr(be, big)) % 64 == 0,
              "buffers start on a cache line (vector loads, threads' output pieces)");
    be->ops->buf_free(be, big);
    be->ops->download(be, back, pa, sizeof back);
    for (int i = 0; i < 64; i++) CHECK_MSG(back[i] == 0.0f, "zeroed buffer: [%d] = %g", i, back[i]);
    be->ops->upload(be, pa, host, sizeof host);
    be_copy(be, pb, pa, sizeof host);
    be->ops->download(be, back, pb, sizeof back);
    CHECK(memcmp(back, host, sizeof host) == 0);
    be->ops->fill_zero(be, pb, sizeof host);
    be->ops->download(be, back, pb, sizeof back);
    CHECK(back[0] == 0.0f && back[63] == 0.0f);
    be->ops->buf_free(be, a);
    be->ops->buf_free(be, b);
    be_free(be);
}

/* matmul, rmsnorm and swiglu over R rows give each row the bits it gets alone. */
TEST(test_row_ops_are_row_invariant) {
    be_backend *be;
    mtplx_err err = {0};
    REQUIRE(be_create(NULL, &be, &err) == 0);
    enum { R = 7, K = 96, N = 80 };
    float *wf = malloc(sizeof(float) * N * K), *x = malloc(sizeof(float) * R * K), *y = malloc(sizeof(float) * R * K),
          *y1 = malloc(sizeof(float) * K), *nw = malloc(sizeof(float) * K);
    REQUIRE(wf && x && y && y1 && nw);
    fill(wf, (size_t)N * K);
    fill(x, (size_t)R * K);
    fill(nw, K);
    be_weight w = {.dtype = DT_F32, .rows = N, .cols = K, .data = wf};
    REQUIRE(be->ops->weight_prepare(be, &w, &err) == 0);
    be_matmul(be, y, N, x, K, R, &w);
    for (int t = 0; t < R; t++) {
        be_matmul(be, y1, N, x + (size_t)t * K, K, 1, &w);
        CHECK_MSG(memcmp(y1, y + (size_t)t * N, sizeof(float) * N) == 0, "matmul row %d differs alone", t);
    }
    be_rmsnorm_rows(be, y, K, x, K, nw, K, R, 1e-6f);
    for (int t = 0; t < R; t++) {
        be_rmsnorm_rows(be, y1, K, x + (size_t)t * K, K, nw, K, 1, 1e-6f);
        CHECK_MSG(memcmp(y1, y + (size_t)t * K, sizeof(float) * K) == 0, "rmsnorm row %d differs alone", t);
    }
    free(wf), free(x), free(y), free(y1), free(nw);
    be_free(be);
}

/* One pass of the fused row ops (backend.h) over T rows: x += o, a = rmsnorm(x)·nw, [g | u] = a·[G | U]ᵀ
 * into big (stride bw), g = silu(g)·u, y = g·Dᵀ; and a2 = rmsnorm(x2)·nw with no add. fused = 0: the
 * same as the separate ops. */
static void mlp_pass(be_backend *be, int fused, float *x, const float *o, float *a, float *x2, float *a2,
                     const float *nw, float *big, int bw, float *y, const be_weight *gate, const be_weight *up,
                     const be_weight *down, int H, int I, int T) {
    be_mm_out gu[2] = {{big, bw, gate}, {big + I, bw, up}};
    if (fused) {
        be_rmsnorm_matmul_n(be, gu, 2, x, o, a, nw, H, T, 1e-6f);
        be_swiglu_matmul(be, y, H, big, big + I, bw, I, T, down);
        be_add_rmsnorm_rows(be, x2, NULL, a2, nw, H, T, 1e-6f);
        return;
    }
    be->ops->add(be, x, o, (size_t)T * H);
    be->ops->rmsnorm_rows(be, a, H, x, H, nw, H, T, 1e-6f);
    be->ops->matmul_n(be, gu, 2, a, H, T);
    be->ops->swiglu_rows(be, big, big, big + I, bw, I, T);
    be->ops->matmul(be, y, H, big, bw, T, down);
    be->ops->rmsnorm_rows(be, a2, H, x2, H, nw, H, T, 1e-6f);
}

/* The fused row ops give the bits of their steps as separate ops — on the CPU backend with fusing on
 * (prefill-sized calls run the norm / SwiGLU inside the bf16 matmul's packing tasks), with it off
 * ($MTPLX_FUSE=0), and through backend.c's wrappers for a backend without them (NULL ops) — for
 * decode-, verify- and prefill-sized calls; widths with a tail past whole 32-input steps. */
TEST(test_fused_row_ops_equal_their_steps) {
    enum { H = 80, I = 144, TMAX = 300, BW = 2 * I + 8 };
    cpu_settings cs;
    REQUIRE(cpu_settings_from_env(&cs, NULL) == 0);
    be_backend *bes[2];
    mtplx_err err = {0};
    for (int f = 0; f < 2; f++) {
        cs.fuse = !f;
        REQUIRE(be_cpu_new(&cs, &bes[f], &err) == 0);
    }
    be_ops bare = *bes[0]->ops; /* a backend without the fused ops: backend.c runs the steps */
    bare.add_rmsnorm_rows = NULL, bare.rmsnorm_matmul_n = NULL, bare.swiglu_matmul = NULL;
    be_backend be_bare = *bes[0];
    be_bare.ops = &bare;
    be_backend *variants[3] = {bes[0], bes[1], &be_bare};
    float *wf = malloc(sizeof(float) * 2 * I * H);
    uint16_t *wb[3];
    be_weight w[3];
    for (int k = 0; k < 3; k++) {
        fill(wf, (size_t)I * H);
        REQUIRE((wb[k] = malloc(sizeof(uint16_t) * I * H)));
        for (int i = 0; i < I * H; i++) wb[k][i] = f32_to_bf16(wf[i]);
        w[k] = (be_weight){.dtype = DT_BF16, .rows = k < 2 ? I : H, .cols = k < 2 ? H : I, .data = wb[k]};
        REQUIRE(bes[0]->ops->weight_prepare(bes[0], &w[k], &err) == 0);
    }
    size_t nx = (size_t)TMAX * H, nb = (size_t)TMAX * BW;
    float *x0 = malloc(sizeof(float) * nx), *o = malloc(sizeof(float) * nx), *nw = malloc(sizeof(float) * H);
    float *ref[6], *got[6]; /* x, a, x2, a2, big, y */
    size_t len[6] = {nx, nx, nx, nx, nb, nx};
    for (int i = 0; i < 6; i++) REQUIRE((ref[i] = malloc(sizeof(float) * len[i])) && (got[i] = malloc(sizeof(float) * len[i])));
    fill(x0, nx), fill(o, nx), fill(nw, H);
    static const int Ts[] = {1, 4, 33, 128, 300};
    for (size_t ti = 0; ti < sizeof Ts / sizeof *Ts; ti++) {
        int T = Ts[ti];
        for (int v = -1; v < 3; v++) { /* -1: the reference, separate ops */
            float **b = v < 0 ? ref : got;
            memcpy(b[0], x0, sizeof(float) * nx), memcpy(b[2], o, sizeof(float) * nx);
            for (int i = 4; i < 6; i++) memset(b[i], 0xff, sizeof(float) * len[i]); /* NaN: unwritten rows fail */
            mlp_pass(v < 0 ? bes[1] : variants[v], v >= 0, b[0], o, b[1], b[2], b[3], nw, b[4], BW, b[5], &w[0],
                     &w[1], &w[2], H, I, T);
            if (v < 0) continue;
            static const char *names[6] = {"x", "a", "x2", "a2", "big", "y"};
            size_t used[6] = {(size_t)T * H, (size_t)T * H, (size_t)T * H, (size_t)T * H, (size_t)T * BW, (size_t)T * H};
            for (int i = 0; i < 6; i++) {
                int same = 1;
                for (size_t j = 0; j < used[i]; j++)
                    same &= i != 4 || (int)(j % BW) < 2 * I ? !memcmp(&ref[i][j], &got[i][j], sizeof(float)) : 1;
                CHECK_MSG(same, "T=%d variant %d: %s differs from the separate ops", T, v, names[i]);
            }
        }
    }
    for (int k = 0; k < 3; k++) free(wb[k]);
    for (int i = 0; i < 6; i++) free(ref[i]), free(got[i]);
    free(wf), free(x0), free(o), free(nw);
    be_free(bes[0]);
    be_free(bes[1]);
}

/* Attention over a sequence's paged KV: R rows at positions 0..R-1 in one call equal R one-row calls
 * (decode), outputs and the K/V written — with the two caches' pages in different pool orders, so
 * the op must follow the page table for every key it writes and reads. */
TEST(test_attention_op_prefill_equals_decode) {
    be_backend *be;
    mtplx_err err = {0};
    REQUIRE(be_create(NULL, &be, &err) == 0);
    enum { R = 6, nH = 4, nKV = 2, Dh = 16, CAP = 8 };
    int qs = 2 * Dh, kvw = nKV * Dh, k_off = nH * qs, v_off = k_off + kvw, att_off = v_off + kvw, bw = att_off + nH * Dh;
    float inv_freq[Dh / 4], qn[Dh], kn[Dh];
    for (int i = 0; i < Dh / 4; i++) inv_freq[i] = powf(10000.f, -2.0f * i / (Dh / 2));
    fill(qn, Dh), fill(kn, Dh);
    float *proj = malloc(sizeof(float) * R * bw), *big = malloc(sizeof(float) * R * bw);
    size_t kvn = (size_t)nKV * CAP * Dh, sn = be->ops->attn_scratch_floats(be, CAP, Dh / 2);
    float *k1 = calloc(kvn, 4), *v1 = calloc(kvn, 4), *k2 = calloc(kvn, 4), *v2 = calloc(kvn, 4), *sc = malloc(4 * sn);
    REQUIRE(proj && big && k1 && v1 && k2 && v2 && sc);
    fill(proj, (size_t)R * bw);
    be_attn_args a = {big, bw, qs, k_off, v_off, att_off, nH, nKV, Dh, Dh / 2, 1, inv_freq, 1.0f, qn, kn, 1e-6f,
                      0.25f};
    memcpy(big, proj, sizeof(float) * R * bw);
    enum { PS = 4, NP = CAP / PS };
    const int32_t pages1[NP] = {1, 0}, pages2[NP] = {0, 1};
    be_seq_kv kv1 = {k1, v1, pages1, NP, PS}, kv2 = {k2, v2, pages2, NP, PS};
    be->ops->attention(be, &a, &kv1, 0, R, sc);
    float *all = malloc(sizeof(float) * R * bw);
    REQUIRE(all);
    memcpy(all, big, sizeof(float) * R * bw);
    for (int t = 0; t < R; t++) {
        memcpy(big, proj + (size_t)t * bw, sizeof(float) * bw);
        be->ops->attention(be, &a, &kv2, t, 1, sc);
        CHECK_MSG(memcmp(big + att_off, all + (size_t)t * bw + att_off, sizeof(float) * nH * Dh) == 0,
                  "attention row %d: prefill and decode differ", t);
    }
    size_t page = (size_t)nKV * PS * Dh; /* floats of one page */
    for (int i = 0; i < NP; i++) {
        CHECK_MSG(memcmp(k1 + pages1[i] * page, k2 + pages2[i] * page, 4 * page) == 0, "keys of page %d differ", i);
        CHECK_MSG(memcmp(v1 + pages1[i] * page, v2 + pages2[i] * page, 4 * page) == 0, "values of page %d differ", i);
    }
    free(proj), free(big), free(all), free(k1), free(v1), free(k2), free(v2), free(sc);
    be_free(be);
}

/* A decode-sized attention call that spreads each KV head's keys and value dims over the pool
 * (cpu_settings.att_split: from 1 key, every call) gives the bits of the one-block-a-head path (0 =
 * never), gated and not: rows decoded one and two at a time over 300 positions of shuffled pages,
 * 3 query heads a KV head (so 3 and 6 queries a head). */
TEST(test_attention_split_equals_blocks) {
    enum { nH = 6, nKV = 2, Dh = 40, PS = 16, NP = 20, CAP = PS * NP, N = 300 };
    cpu_settings cs;
    REQUIRE(cpu_settings_from_env(&cs, NULL) == 0);
    be_backend *bes[2];
    mtplx_err err = {0};
    for (int f = 0; f < 2; f++) {
        cs.att_split = f; /* 0: never; 1: from 1 key */
        REQUIRE(be_cpu_new(&cs, &bes[f], &err) == 0);
    }
    int qs = 2 * Dh, kvw = nKV * Dh, k_off = nH * qs, v_off = k_off + kvw, att_off = v_off + kvw, bw = att_off + nH * Dh;
    float inv_freq[Dh / 4];
    for (int i = 0; i < Dh / 4; i++) inv_freq[i] = powf(10000.f, -2.0f * i / (Dh / 2));
    int32_t pages[NP];
    for (int i = 0; i < NP; i++) pages[i] = (i * 7) % NP;
    size_t kvn = (size_t)nKV * CAP * Dh, sn = bes[0]->ops->attn_scratch_floats(bes[0], CAP, Dh / 2);
    float *proj = malloc(sizeof(float) * N * bw), *big[2], *kc[2], *vc[2], *sc = malloc(4 * sn);
    REQUIRE(proj && sc);
    for (int f = 0; f < 2; f++) REQUIRE((big[f] = malloc(sizeof(float) * 2 * bw)) && (kc[f] = calloc(kvn, 4)) && (vc[f] = calloc(kvn, 4)));
    fill(proj, (size_t)N * bw);
    for (int gated = 0; gated < 2; gated++) {
        be_attn_args a = {NULL, bw, qs, k_off, v_off, att_off, nH, nKV, Dh, Dh / 2, gated, inv_freq, 1.0f, NULL, NULL,
                          1e-6f, 0.25f};
        int same = 1;
        for (int t = 0, R; t < N; t += R) {
            R = t % 3 == 2 && t + 2 <= N ? 2 : 1;
            for (int f = 0; f < 2; f++) {
                be_seq_kv kv = {kc[f], vc[f], pages, NP, PS};
                a.big = big[f];
                memcpy(big[f], proj + (size_t)t * bw, sizeof(float) * R * bw);
                bes[f]->ops->attention(bes[f], &a, &kv, t, R, sc);
            }
            for (int r = 0; r < R; r++)
                same &= !memcmp(big[0] + (size_t)r * bw + att_off, big[1] + (size_t)r * bw + att_off, sizeof(float) * nH * Dh);
        }
        CHECK_MSG(same, "gated=%d: the split attention differs from the blocks", gated);
    }
    for (int f = 0; f < 2; f++) free(big[f]), free(kc[f]), free(vc[f]), be_free(bes[f]);
    free(proj), free(sc);
}

/* One prefill (capturing, with a commit), decode rows and MTP rows of the embedded model, then a chain
 * of three draft steps through model_mtp_forward_head (rows in, then continued from the kept row with no
 * rows in or out, the last one's rows out); outputs into the given arrays (lists: [3][2·8 + 2]).
 * Returns 0 or an error. */
static int run_model(const mtplx_model *m, float *logits, float *hidden, float *mtp_out, int32_t *lists,
                     mtplx_err *err) {
    const int32_t toks[6] = {785, 3974, 13, 198, 220, 16};
    model_state *s = NULL;
    mtp_state *ms = NULL;
    int H = model_config_of(m)->hidden_size, V = model_config_of(m)->vocab_size, rc;
    if ((rc = model_state_new(m, 64, 4, &s, err)) || (rc = mtp_state_new(m, 64, &ms, err))) goto out;
    fwd_request rq = {logits, 0, hidden, 1};
    if ((rc = model_forward(m, s, toks, 4, &rq, err)) || (rc = model_state_commit(s, 3, err))) goto out;
    fwd_request r2 = {logits + (size_t)4 * V, 0, hidden + (size_t)4 * H, 0};
    if ((rc = model_forward(m, s, toks + 3, 3, &r2, err))) goto out;
    if ((rc = model_mtp_forward(m, ms, hidden, toks + 1, 5, mtp_out, err))) goto out;
    float *scr = mtp_out + (size_t)5 * H; /* [V] logits scratch after the 5 rows (lists wanted) */
    if ((rc = model_mtp_forward_head(m, ms, hidden + (size_t)4 * H, toks + 4, 2, NULL, HEAD_DRAFT, 1, scr, 8, lists, err)) ||
        (rc = model_mtp_forward_head(m, ms, NULL, toks + 2, 1, NULL, HEAD_DRAFT, 0, scr, 8, lists + 18, err)))
        goto out;
    rc = model_mtp_forward_head(m, ms, NULL, toks + 3, 1, mtp_out + (size_t)4 * H, HEAD_TARGET, 0, scr, 8, lists + 36, err);
out:
    model_state_free(s);
    mtp_state_free(ms);
    return rc;
}

/* The model layer must not rely on backend memory being host memory: with caps.host_memory = 0 it
 * stages every host array (logits, hidden rows, MTP input / output) through upload / download, and
 * the results must be the same bits. (The CPU backend's memory is host memory, so this runs; a
 * direct host access the model layer made would still "work" here, but every path the flag selects
 * is exercised.) */
TEST(test_model_without_host_memory_gives_the_same_bits) {
    mtplx_model *a = NULL, *b = NULL;
    mtplx_err err = {0};
    REQUIRE(model_load("models/qwen35-tiny-code", &a, &err) == 0);
    REQUIRE(model_load("models/qwen35-tiny-code", &b, &err) == 0);
    b->be->caps.host_memory = 0;
    int H = model_config_of(a)->hidden_size, V = model_config_of(a)->vocab_size;
    float *la = calloc((size_t)7 * V, 4), *lb = calloc((size_t)7 * V, 4), *ha = calloc((size_t)7 * H, 4),
          *hb = calloc((size_t)7 * H, 4), *ma = calloc((size_t)5 * H + V, 4), *mb = calloc((size_t)5 * H + V, 4);
    int32_t ta[3][18], tb[3][18];
    REQUIRE(la && lb && ha && hb && ma && mb);
    CHECK_MSG(run_model(a, la, ha, ma, &ta[0][0], &err) == 0, "%s", err.msg);
    CHECK_MSG(run_model(b, lb, hb, mb, &tb[0][0], &err) == 0, "%s", err.msg);
    CHECK(memcmp(la, lb, (size_t)7 * V * 4) == 0);
    CHECK(memcmp(ha, hb, (size_t)7 * H * 4) == 0);
    CHECK(memcmp(ma, mb, (size_t)5 * H * 4) == 0);
    CHECK_MSG(memcmp(ta, tb, sizeof ta) == 0, "draft chain lists differ");
    CHECK_MSG(ta[0][0] != ta[1][0] || ta[1][0] != ta[2][0] || ta[0][1] != ta[1][1], "the chain's lists were written");
    float mx = 0;
    for (size_t i = 0; i < (size_t)7 * V; i++) mx = fmaxf(mx, fabsf(la[i]));
    CHECK_MSG(mx > 0, "logits were written");
    b->be->caps.host_memory = 1;
    free(la), free(lb), free(ha), free(hb), free(ma), free(mb);
    model_free(a);
    model_free(b);
}

/* The repacked-weight cache (cpu_packcache.c): a miss writes one file and gives the same bits as
 * the in-memory repack; a hit maps it (still the same bits, no new file); a corrupted payload is
 * detected by its checksum and rewritten; another weight gets another file; "" switches it off. */
TEST(test_pack_cache_round_trip) {
    kern_weight probe = {.dtype = DT_U32, .rows = 512, .cols = 4096, .bits = 4, .group_size = 64, .scale_dtype = DT_BF16};
    if (!kern_qpack_bytes(&probe)) SKIP("no VNNI repacking on this CPU");
    char dir[64], cmd[400];
    snprintf(dir, sizeof dir, "/tmp/mtplx_packcache_%d", (int)getpid());
    const int N = 512, K = 4096, G = K / 64;
    uint32_t *q = malloc((size_t)N * K / 2); /* 4 bits each */
    uint16_t *sc = malloc((size_t)N * G * 2), *bi = malloc((size_t)N * G * 2);
    for (size_t i = 0; i < (size_t)N * K / 8; i++) q[i] = (uint32_t)(g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17);
    for (int i = 0; i < N * G; i++) sc[i] = f32_to_bf16(0.01f + 0.001f * frand()), bi[i] = f32_to_bf16(0.05f * frand());
    kern_weight w = probe;
    w.data = q, w.scales = sc, w.biases = bi;
    float *x = malloc(sizeof(float) * 3 * K), y0[3 * 512], y[3 * 512];
    fill(x, 3 * (size_t)K);
    mtplx_err err = {0};
    kern_pack_set *ref = NULL;
    kern_weight wr = w;
    REQUIRE(kern_pack_set_add(&ref, &wr, &err) == 0 && wr.packed);
    kern_matmul(y0, N, x, K, 3, &wr);
    /* miss, then hit, then a corrupted file */
    for (int round = 0; round < 3; round++) {
        kern_pack_set *set = NULL;
        kern_weight wc = w;
        CHECK_INT(cpu_packcache_prepare(dir, &set, &wc, &err), 1);
        REQUIRE(wc.packed != NULL);
        kern_matmul(y, N, x, K, 3, &wc);
        CHECK_MSG(!memcmp(y, y0, sizeof y), "round %d: cached copy gives other bits", round);
        kern_pack_set_free(set);
        snprintf(cmd, sizeof cmd, "test $(ls %s | grep -c '\\.qpack$') = 1 && test $(ls %s | wc -l) = 1", dir, dir);
        CHECK_MSG(system(cmd) == 0, "round %d: want exactly one cache file in %s", round, dir);
        if (round == 1) { /* flip one payload byte (past the 4 KiB header) */
            snprintf(cmd, sizeof cmd, "f=$(ls %s/*.qpack) && printf '\\377' | dd of=$f bs=1 seek=100000 conv=notrunc status=none", dir);
            REQUIRE(system(cmd) == 0);
        }
    }
    /* after the rebuild the file is whole again: a hit maps it (same bits) */
    snprintf(cmd, sizeof cmd, "test \"$(dd if=$(ls %s/*.qpack) bs=1 skip=100000 count=1 status=none | od -An -tx1 | tr -d ' ')\" != ff", dir);
    CHECK_MSG(system(cmd) == 0, "the corrupted cache file was not rewritten");
    /* another weight (one scale changed) gets its own file */
    sc[7] ^= 1;
    kern_pack_set *set2 = NULL;
    kern_weight w2 = w;
    CHECK_INT(cpu_packcache_prepare(dir, &set2, &w2, &err), 1);
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) = 2", dir);
    CHECK_MSG(system(cmd) == 0, "a changed weight must not reuse the cached copy");
    kern_pack_set_free(set2);
    kern_weight w3 = w;
    CHECK_INT(cpu_packcache_prepare("", &set2, &w3, &err), 0); /* off */
    CHECK(w3.packed == NULL);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    kern_pack_set_free(ref);
    free(q), free(sc), free(bi), free(x);
}

/* A random MLX q4 weight of N×K (group 64, bf16 scales) with its arrays in *mem (freed by the caller). */
static kern_weight rand_q4(int N, int K, void **mem) {
    size_t qb = (size_t)N * K / 2, sb = (size_t)N * (K / 64) * 2;
    unsigned char *p = malloc(qb + 2 * sb);
    uint32_t *q = (uint32_t *)p;
    uint16_t *sc = (uint16_t *)(p + qb), *bi = (uint16_t *)(p + qb + sb);
    for (size_t i = 0; i < qb / 4; i++) q[i] = (uint32_t)(g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17);
    for (size_t i = 0; i < sb / 2; i++) sc[i] = f32_to_bf16(0.01f + 0.001f * frand()), bi[i] = f32_to_bf16(0.05f * frand());
    *mem = p;
    return (kern_weight){.dtype = DT_U32, .rows = N, .cols = K, .data = q, .scales = sc, .biases = bi, .bits = 4,
                         .group_size = 64, .scale_dtype = DT_BF16};
}

/* The inode of the only .qpack file in dir, or 0 when there is not exactly one. */
static unsigned long only_qpack_inode(const char *dir) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) = 1 && stat -c %%i %s/*.qpack", dir, dir);
    FILE *f = popen(cmd, "r");
    unsigned long ino = 0;
    if (f && fscanf(f, "%lu", &ino) != 1) ino = 0;
    if (f) pclose(f);
    return ino;
}

/* A group of small weights (a MoE layer's experts, each copy under the 1 MiB a file of its own needs)
 * shares one cache file: a miss writes it and gives every weight the in-memory repack's bits; a hit
 * maps the same file (same inode, same bits); a corrupted byte in the last copy is caught and the
 * file rewritten; a changed weight keys another file; a group with a weight that has no VNNI copy,
 * or under 1 MiB in all, is not the cache's (0, nothing set). */
TEST(test_pack_cache_group) {
    kern_weight probe = {.dtype = DT_U32, .rows = 256, .cols = 1024, .bits = 4, .group_size = 64, .scale_dtype = DT_BF16};
    if (!kern_qpack_bytes(&probe)) SKIP("no VNNI repacking on this CPU");
    enum { NW = 12 }; /* 4 experts: gate, up [256 x 1024], down [1024 x 256] */
    char dir[64], cmd[400];
    snprintf(dir, sizeof dir, "/tmp/mtplx_packgroup_%d", (int)getpid());
    void *mem[NW];
    kern_weight w[NW], wr[NW];
    float *x = malloc(sizeof(float) * 3 * 1024), *y0[NW], y[3 * 1024];
    fill(x, 3 * 1024);
    mtplx_err err = {0};
    kern_pack_set *ref = NULL;
    for (int i = 0; i < NW; i++) {
        w[i] = i % 3 == 2 ? rand_q4(1024, 256, &mem[i]) : rand_q4(256, 1024, &mem[i]);
        CHECK(kern_qpack_bytes(&w[i]) < ((size_t)1 << 20));
        wr[i] = w[i];
        REQUIRE(kern_pack_set_add(&ref, &wr[i], &err) == 0 && wr[i].packed);
        y0[i] = malloc(sizeof(float) * 3 * (size_t)w[i].rows);
        kern_matmul(y0[i], w[i].rows, x, w[i].cols, 3, &wr[i]);
    }
    unsigned long ino[3] = {0};
    for (int round = 0; round < 3; round++) { /* miss, hit, corrupted */
        kern_pack_set *set = NULL;
        kern_weight wc[NW], *ws[NW];
        for (int i = 0; i < NW; i++) wc[i] = w[i], ws[i] = &wc[i];
        CHECK_INT(cpu_packcache_prepare_group(dir, &set, ws, NW, &err), 1);
        for (int i = 0; i < NW; i++) {
            REQUIRE(wc[i].packed != NULL);
            kern_matmul(y, wc[i].rows, x, wc[i].cols, 3, &wc[i]);
            CHECK_MSG(!memcmp(y, y0[i], sizeof(float) * 3 * (size_t)wc[i].rows), "round %d weight %d: other bits", round, i);
        }
        kern_pack_set_free(set);
        ino[round] = only_qpack_inode(dir);
        CHECK_MSG(ino[round] != 0, "round %d: want exactly one cache file in %s", round, dir);
        if (round == 1) { /* flip a byte near the end: inside the last copy */
            snprintf(cmd, sizeof cmd, "f=$(ls %s/*.qpack) && printf '\\377' | dd of=$f bs=1 seek=$(( $(stat -c %%s $f) - 100 )) "
                     "conv=notrunc status=none", dir);
            REQUIRE(system(cmd) == 0);
        }
    }
    CHECK_MSG(ino[1] == ino[0], "a hit must map the file, not rewrite it");
    CHECK_MSG(ino[2] != ino[1], "the corrupted file must be rewritten");
    /* one weight changed: another file */
    ((uint16_t *)w[NW - 1].scales)[3] ^= 1;
    kern_pack_set *set = NULL;
    kern_weight wc[NW], *ws[NW];
    for (int i = 0; i < NW; i++) wc[i] = w[i], ws[i] = &wc[i];
    CHECK_INT(cpu_packcache_prepare_group(dir, &set, ws, NW, &err), 1);
    snprintf(cmd, sizeof cmd, "test $(ls %s | wc -l) = 2", dir);
    CHECK_MSG(system(cmd) == 0, "a changed weight must not reuse the group's file");
    kern_pack_set_free(set);
    set = NULL;
    for (int i = 0; i < NW; i++) wc[i] = w[i];
    wc[4].cols = 32, wc[4].rows = 64; /* no VNNI copy for 32 inputs */
    CHECK_INT(cpu_packcache_prepare_group(dir, &set, ws, NW, &err), 0);
    wc[4] = w[4];
    CHECK_INT(cpu_packcache_prepare_group(dir, &set, ws, 3, &err), 0); /* under 1 MiB */
    CHECK_INT(cpu_packcache_prepare_group("", &set, ws, NW, &err), 0);
    for (int i = 0; i < NW; i++) CHECK(wc[i].packed == NULL);
    CHECK(set == NULL);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    kern_pack_set_free(ref);
    for (int i = 0; i < NW; i++) free(mem[i]), free(y0[i]);
    free(x);
}

/* be_logits_top_host (the CPU's logits_top and the reference of a device's) against a plain
 * reference: every id ranked by a full selection (larger value first, lower id on ties, -0 == +0, NaN
 * never listed), the list padded with -1 when fewer than k ids are not NaN, and the first NaN / +inf.
 * Rows with ties, -inf runs, NaN and +inf at the start, inside a skipped block and in the tail;
 * lengths that are not a multiple of the 16-entry blocks; k from 1 to 64; several rows at once. */
TEST(test_logits_top_host_matches_a_full_ranking) {
    enum { LV = 1000, R = 3 };
    static float x[R * LV];
    static int32_t got[R * (2 * BE_TOP_MAX + 2)];
    const int ks[] = {1, 2, 7, 20, 64};
    int checked = 0;
    for (int trial = 0; trial < 40; trial++) {
        int V = trial % 4 == 0 ? 50 + trial : LV - trial; /* short and long rows, ragged lengths */
        for (int i = 0; i < R * LV; i++) {
            float f = frand();
            x[i] = trial % 3 == 0 ? (float)(int)(f * 6) : f; /* many ties */
            if (x[i] == 0.0f && (i & 1)) x[i] = -0.0f;
            if (trial % 5 == 1 && (i % 7) < 5) x[i] = -INFINITY; /* mostly -inf */
        }
        if (trial % 6 == 2) x[3] = NAN, x[LV + 500] = INFINITY, x[2 * LV + V - 1] = NAN;
        if (trial % 6 == 4) x[LV + 37] = NAN, x[LV + 38] = INFINITY;
        for (int c = 0; c < 5; c++) {
            int k = ks[c];
            if (k >= V) continue;
            be_logits_top_host(NULL, got, x, LV, R, V, k);
            for (int t = 0; t < R; t++) {
                const float *v = x + (size_t)t * LV;
                const int32_t *o = got + (size_t)t * (2 * k + 2);
                int used[LV] = {0}, bad = -1;
                for (int j = 0; j < V; j++)
                    if (!(v[j] < INFINITY) && bad < 0) bad = j;
                for (int i = 0; i < k; i++) { /* the i-th best not yet taken, by a full scan */
                    int best = -1;
                    for (int j = 0; j < V; j++)
                        if (!used[j] && !isnan(v[j]) && (best < 0 || v[j] > v[best])) best = j;
                    if (best >= 0) used[best] = 1;
                    float want = best >= 0 ? v[best] : 0.0f, have;
                    memcpy(&have, &o[k + i], sizeof have);
                    CHECK_MSG(o[i] == best && (best < 0 || !memcmp(&have, &want, sizeof have)),
                              "trial %d k %d row %d entry %d: id %d, want %d", trial, k, t, i, o[i], best);
                }
                CHECK_MSG(o[2 * k] == bad, "trial %d k %d row %d: first bad %d, want %d", trial, k, t, o[2 * k], bad);
                checked++;
            }
        }
    }
    CHECK(checked > 400);
}

int main(void) {
    RUN(test_unknown_backend_refused_with_the_available_ones);
    RUN(test_cpu_settings_read_from_the_environment);
    RUN(test_bad_knobs_are_errors);
    RUN(test_program_override_survives_backend_creation);
    RUN(test_buffers_round_trip);
    RUN(test_row_ops_are_row_invariant);
    RUN(test_fused_row_ops_equal_their_steps);
    RUN(test_attention_op_prefill_equals_decode);
    RUN(test_attention_split_equals_blocks);
    RUN(test_model_without_host_memory_gives_the_same_bits);
    RUN(test_pack_cache_round_trip);
    RUN(test_pack_cache_group);
    RUN(test_logits_top_host_matches_a_full_ranking);
    return TEST_SUMMARY();
}
