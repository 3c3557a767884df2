/* gdn.c — Gated DeltaNet conv and recurrence (see gdn.h). Plain C paths, and AVX-512 (conv, step,
 * replay) / AVX2 (conv, step, replay) / NEON (conv, step, replay: gdn_neon.c) paths chosen by cpu_isa(); tests
 * compare them against the plain ones. */
#include "gdn.h"

#include <stddef.h>

#include "act.h"
#include "cpu.h"
#include "neon.h"
#include "simd_math.h"

static void conv1d_silu_portable(float *y, int ldy, const float *x, int ldx, const float *w, int channels, int kc,
                                 int rows) {
    for (int t = 0; t < rows; t++) {
        float *yt = y + (long)t * ldy;
        for (int c = 0; c < channels; c++) {
            const float *wc = w + (long)c * kc;
            float acc = 0.f;
            for (int j = 0; j < kc; j++) acc += wc[j] * x[(long)(t + j) * ldx + c];
            yt[c] = act_silu(acc);
        }
    }
}

#define CONV_KMAX 8 /* taps held in registers by the SIMD paths; wider kernels take the portable path */

#if defined(__x86_64__)
/* 16 channels at a time: their kc taps are gathered once (w is [channel][tap]) and reused for every
 * row; each output is Σ_j w·x by FMA in tap order, then the vector SiLU. */
SM_TGT512 static void conv1d_silu_avx512(float *y, int ldy, const float *x, int ldx, const float *w, int channels,
                                        int kc, int rows) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(kc));
    for (int c = 0; c < channels; c += 16) {
        __mmask16 m = channels - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (channels - c)) - 1);
        __m512 wv[CONV_KMAX];
        for (int j = 0; j < kc; j++)
            wv[j] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, idx, w + (long)c * kc + j, 4);
        for (int t = 0; t < rows; t++) {
            __m512 acc = _mm512_setzero_ps();
            for (int j = 0; j < kc; j++)
                acc = _mm512_fmadd_ps(wv[j], _mm512_maskz_loadu_ps(m, x + (long)(t + j) * ldx + c), acc);
            _mm512_mask_storeu_ps(y + (long)t * ldy + c, m, sm_silu512(acc));
        }
    }
}

SM_TGT256 static void conv1d_silu_avx2(float *y, int ldy, const float *x, int ldx, const float *w, int channels,
                                      int kc, int rows) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(kc));
    for (int c = 0; c < channels; c += 8) {
        __m256i m = sm_mask256(channels - c < 8 ? channels - c : 8);
        __m256 wv[CONV_KMAX];
        for (int j = 0; j < kc; j++)
            wv[j] = _mm256_mask_i32gather_ps(_mm256_setzero_ps(), w + (long)c * kc + j, idx, _mm256_castsi256_ps(m), 4);
        for (int t = 0; t < rows; t++) {
            __m256 acc = _mm256_setzero_ps();
            for (int j = 0; j < kc; j++)
                acc = _mm256_fmadd_ps(wv[j], _mm256_maskload_ps(x + (long)(t + j) * ldx + c, m), acc);
            _mm256_maskstore_ps(y + (long)t * ldy + c, m, sm_silu256(acc));
        }
    }
}
#endif

void kern_conv1d_silu(float *y, int ldy, const float *x, int ldx, const float *w, int channels, int kc,
                      int rows) {
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (kc <= CONV_KMAX && isa >= KERN_ISA_AVX512) conv1d_silu_avx512(y, ldy, x, ldx, w, channels, kc, rows);
    else if (kc <= CONV_KMAX && isa == KERN_ISA_AVX2) conv1d_silu_avx2(y, ldy, x, ldx, w, channels, kc, rows);
    else
#elif defined(__aarch64__)
    if (kc <= CONV_KMAX && KERN_ISA_IS_NEON(isa)) conv1d_silu_neon(y, ldy, x, ldx, w, channels, kc, rows);
    else
#endif
        conv1d_silu_portable(y, ldy, x, ldx, w, channels, kc, rows);
    (void)isa;
}

/* The state update shared by the forward step and the replay, so both round identically. Kept out
 * of line so that both callers run the very same machine code (no per-call-site contraction or
 * vectorisation choices). */
__attribute__((noinline)) static void gdn_update_row(float *dst, const float *src, const float *k, float d, float g, int dk) {
    for (int j = 0; j < dk; j++) dst[j] = g * src[j] + d * k[j];
}

/* AVX-512 step (dk % 16 == 0): the two dot products keep 16 lane sums combined by one fixed
 * reduction instead of one serial sum — the serial chains made this the slowest part of a decode
 * step on real shapes (Dk = Dv = 128, 32 heads: ~30 ms per row on one core vs ~1 ms vectorised). The
 * state update is the same mul, mul, add per element as gdn_update_row (no FMA), so the replay stays
 * bit-identical. Chosen once per process by cpu_isa(), like the matmul paths.
 * Four value rows run interleaved, each with exactly the one-row operation sequence (so the bits do
 * not change): one row's FMA chain, reduction and scalar delta are a long dependency chain, and a
 * head's state is L2-resident from the second row of a verify call on, so the step was latency-bound. */
#if defined(__x86_64__)
#define GDN_ROWS4(X) X(0) X(1) X(2) X(3)
__attribute__((target("avx512f,avx2,fma"))) static void gdn_step_avx512(float *S_dst, const float *S_src,
                                                                     const float *q, const float *k,
                                                                     const float *v, float g, float beta,
                                                                     float *y, float *delta_out, int dk, int dv) {
    const __m512 vg = _mm512_set1_ps(g);
    int i = 0;
    for (; i + 4 <= dv; i += 4) {
#define DECL(r)                                                                                                       \
    const float *src##r = S_src + (long)(i + r) * dk;                                                                 \
    float *dst##r = S_dst + (long)(i + r) * dk;                                                                       \
    __m512 a##r = _mm512_setzero_ps(), o##r = _mm512_setzero_ps();
        GDN_ROWS4(DECL)
#undef DECL
        for (int j = 0; j < dk; j += 16) {
            const __m512 kj = _mm512_loadu_ps(k + j);
#define DOT(r) a##r = _mm512_fmadd_ps(_mm512_loadu_ps(src##r + j), kj, a##r);
            GDN_ROWS4(DOT)
#undef DOT
        }
#define DELTA(r)                                                                                                      \
    const float d##r = beta * (v[i + r] - g * _mm512_reduce_add_ps(a##r));                                           \
    const __m512 vd##r = _mm512_set1_ps(d##r);
        GDN_ROWS4(DELTA)
#undef DELTA
        for (int j = 0; j < dk; j += 16) {
            const __m512 kj = _mm512_loadu_ps(k + j), qj = _mm512_loadu_ps(q + j);
#define UPD(r)                                                                                                        \
    {                                                                                                                 \
        __m512 nv = _mm512_add_ps(_mm512_mul_ps(vg, _mm512_loadu_ps(src##r + j)), _mm512_mul_ps(vd##r, kj));       \
        _mm512_storeu_ps(dst##r + j, nv);                                                                             \
        o##r = _mm512_fmadd_ps(nv, qj, o##r);                                                                         \
    }
            GDN_ROWS4(UPD)
#undef UPD
        }
#define OUT(r)                                                                                                        \
    y[i + r] = _mm512_reduce_add_ps(o##r);                                                                            \
    if (delta_out) delta_out[i + r] = d##r;
        GDN_ROWS4(OUT)
#undef OUT
    }
    for (; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        __m512 a = _mm512_setzero_ps();
        for (int j = 0; j < dk; j += 16) a = _mm512_fmadd_ps(_mm512_loadu_ps(src + j), _mm512_loadu_ps(k + j), a);
        float kv = _mm512_reduce_add_ps(a);
        float d = beta * (v[i] - g * kv);
        const __m512 vd = _mm512_set1_ps(d);
        __m512 o = _mm512_setzero_ps();
        for (int j = 0; j < dk; j += 16) {
            __m512 nv = _mm512_add_ps(_mm512_mul_ps(vg, _mm512_loadu_ps(src + j)), _mm512_mul_ps(vd, _mm512_loadu_ps(k + j)));
            _mm512_storeu_ps(dst + j, nv);
            o = _mm512_fmadd_ps(nv, _mm512_loadu_ps(q + j), o);
        }
        y[i] = _mm512_reduce_add_ps(o);
        if (delta_out) delta_out[i] = d;
    }
}
#undef GDN_ROWS4
#endif

/* AVX2 step (dk % 16 == 0): the AVX-512 step's scheme with each 16-lane vector as two 8-lane halves
 * (element j in half (j % 16) / 8, lane j % 8), the halves added and then reduced in one fixed order
 * (hsum8). Same mul, mul, add update as gdn_update_row, so kern_gdn_replay's AVX2 path (below)
 * reproduces the state bit for bit. Four value rows interleaved, each with the one-row sequence. */
#if defined(__x86_64__)
SM_INL256 float gdn_hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 16 columns of one state row's update, new = g·old + d·k (mul, mul, add, as gdn_update_row), stored at
 * dst and returned as its two halves (src and dst may be the same row). */
SM_INL256 void gdn_update16_avx2(const float *src, float *dst, __m256 vg, __m256 vd, __m256 k0, __m256 k1, __m256 *n0,
                                 __m256 *n1) {
    *n0 = _mm256_add_ps(_mm256_mul_ps(vg, _mm256_loadu_ps(src)), _mm256_mul_ps(vd, k0));
    *n1 = _mm256_add_ps(_mm256_mul_ps(vg, _mm256_loadu_ps(src + 8)), _mm256_mul_ps(vd, k1));
    _mm256_storeu_ps(dst, *n0);
    _mm256_storeu_ps(dst + 8, *n1);
}

SM_TGT256 static void gdn_step_avx2(float *S_dst, const float *S_src, const float *q, const float *k, const float *v,
                                    float g, float beta, float *y, float *delta_out, int dk, int dv) {
    const __m256 vg = _mm256_set1_ps(g);
    for (int i = 0; i < dv;) {
        const int nr = dv - i >= 4 ? 4 : 1;
        __m256 a0[4], a1[4], o0[4], o1[4], vd[4];
        float d[4];
        for (int r = 0; r < nr; r++) a0[r] = a1[r] = o0[r] = o1[r] = _mm256_setzero_ps();
        for (int j = 0; j < dk; j += 16) {
            const __m256 k0 = _mm256_loadu_ps(k + j), k1 = _mm256_loadu_ps(k + j + 8);
            for (int r = 0; r < nr; r++) {
                const float *src = S_src + (long)(i + r) * dk + j;
                a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(src), k0, a0[r]);
                a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(src + 8), k1, a1[r]);
            }
        }
        for (int r = 0; r < nr; r++) {
            d[r] = beta * (v[i + r] - g * gdn_hsum8(_mm256_add_ps(a0[r], a1[r])));
            vd[r] = _mm256_set1_ps(d[r]);
        }
        for (int j = 0; j < dk; j += 16) {
            const __m256 k0 = _mm256_loadu_ps(k + j), k1 = _mm256_loadu_ps(k + j + 8);
            const __m256 q0 = _mm256_loadu_ps(q + j), q1 = _mm256_loadu_ps(q + j + 8);
            for (int r = 0; r < nr; r++) {
                __m256 n0, n1;
                gdn_update16_avx2(S_src + (long)(i + r) * dk + j, S_dst + (long)(i + r) * dk + j, vg, vd[r], k0, k1,
                                  &n0, &n1);
                o0[r] = _mm256_fmadd_ps(n0, q0, o0[r]);
                o1[r] = _mm256_fmadd_ps(n1, q1, o1[r]);
            }
        }
        for (int r = 0; r < nr; r++) {
            y[i + r] = gdn_hsum8(_mm256_add_ps(o0[r], o1[r]));
            if (delta_out) delta_out[i + r] = d[r];
        }
        i += nr;
    }
}
#endif

void kern_gdn_step(float *S_dst, const float *S_src, const float *q, const float *k, const float *v,
                   float g, float beta, float *y, float *delta_out, int dk, int dv) {
#if defined(__x86_64__)
    if (dk % 16 == 0 && cpu_isa() >= KERN_ISA_AVX512) {
        gdn_step_avx512(S_dst, S_src, q, k, v, g, beta, y, delta_out, dk, dv);
        return;
    }
    if (dk % 16 == 0 && cpu_isa() == KERN_ISA_AVX2) {
        gdn_step_avx2(S_dst, S_src, q, k, v, g, beta, y, delta_out, dk, dv);
        return;
    }
#elif defined(__aarch64__)
    if (dk % 4 == 0 && KERN_ISA_IS_NEON(cpu_isa())) {
        gdn_step_neon(S_dst, S_src, q, k, v, g, beta, y, delta_out, dk, dv);
        return;
    }
#endif
    for (int i = 0; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        float kv = 0.f;
        for (int j = 0; j < dk; j++) kv += src[j] * k[j];
        float d = beta * (v[i] - g * kv);
        gdn_update_row(dst, src, k, d, g, dk);
        float acc = 0.f;
        for (int j = 0; j < dk; j++) acc += dst[j] * q[j];
        y[i] = acc;
        if (delta_out) delta_out[i] = d;
    }
}

#if defined(__x86_64__)
/* The horizontal sums of the NR (8, 4 or 1) vectors a into s[0..NR), by _mm512_reduce_add_ps's tree. */
SM_INL512 void gdn_hsums(float *s, const __m512 *a, const int NR) {
    if (NR == 1) {
        s[0] = _mm512_reduce_add_ps(a[0]);
        return;
    }
    _Pragma("GCC unroll 2") for (int r = 0; r < NR; r += 4) _mm_storeu_ps(s + r, sm_hsum4_512(a[r], a[r + 1], a[r + 2], a[r + 3]));
}

/* One step over value rows [i, i + NR) (NR = 8, 4 or 1) of a multi-step call, with the running dot
 * products a[r] = S_src row · k of this step already summed lane-wise: writes the rows' new state, y
 * and delta, and, with NEXT (kn non-NULL), leaves in a[r] the next step's S row · kn summed lane-wise
 * from the stored values. Per row the operations and their order are gdn_step_avx512's: the lane
 * sums reduced by _mm512_reduce_add_ps's tree (four rows at a time, sm_hsum4_512), delta = beta · (v −
 * g · S k) in single precision (the four-lane mul, sub, mul round as the scalar ones do), the update
 * mul, mul, add, the output's FMA chain over the columns in order. Eight rows give eight independent
 * chains: a step of four was bound by one row's latency (reduction → delta → update → next sum). */
SM_INL512 void gdn_fused_rows(__m512 *a, const float *src, float *dst, const float *q, const float *k,
                              const float *kn, const float *v, float g, float beta, float *yo, float *dout, int dk,
                              const int NR, const int NEXT) {
    float sum[8], dr[8];
    __m512 vd[8], o[8], an[8];
    gdn_hsums(sum, a, NR);
    if (NR == 1) {
        dr[0] = beta * (v[0] - g * sum[0]);
    } else {
        const __m128 vg4 = _mm_set1_ps(g), vb4 = _mm_set1_ps(beta);
        _Pragma("GCC unroll 2") for (int r = 0; r < NR; r += 4)
            _mm_storeu_ps(dr + r, _mm_mul_ps(vb4, _mm_sub_ps(_mm_loadu_ps(v + r), _mm_mul_ps(vg4, _mm_loadu_ps(sum + r)))));
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
        vd[r] = _mm512_set1_ps(dr[r]);
        o[r] = _mm512_setzero_ps(), an[r] = _mm512_setzero_ps();
    }
    const __m512 vg = _mm512_set1_ps(g);
    for (int j = 0; j < dk; j += 16) {
        const __m512 kj = _mm512_loadu_ps(k + j), qj = _mm512_loadu_ps(q + j);
        const __m512 knj = NEXT ? _mm512_loadu_ps(kn + j) : kj;
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) {
            __m512 nv = _mm512_add_ps(_mm512_mul_ps(vg, _mm512_loadu_ps(src + (long)r * dk + j)), _mm512_mul_ps(vd[r], kj));
            _mm512_storeu_ps(dst + (long)r * dk + j, nv);
            o[r] = _mm512_fmadd_ps(nv, qj, o[r]);
            if (NEXT) an[r] = _mm512_fmadd_ps(nv, knj, an[r]);
        }
    }
    gdn_hsums(yo, o, NR);
    if (dout) {
        _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) dout[r] = dr[r];
    }
    _Pragma("GCC unroll 8") for (int r = 0; r < NR; r++) a[r] = an[r];
}

/* The AVX-512 multi-step (see kern_gdn_steps): value rows in blocks of 8 (then 4, then singles; blocks
 * of 4 below GDN_WIDE_STEPS steps), each block carried through all R steps while its state rows (4 KiB
 * at dk = 128) stay in L1, the rows ahead prefetched. The first step's S k is the plain dot product of gdn_step_avx512; every later one
 * comes out of the previous step's update pass. Per row the operations and their order are those of
 * gdn_step_avx512. Cold state (DRAM), 18 layers × 32 heads of 128 × 128, one thread (`/tmp` driver):
 * R = 1 / 2 = 8.1–8.6 / 12.6–14.0 ms without the prefetch and with R = 1 on gdn_step_avx512; 7.3–8.0
 * / 8.6 ms with it (blocks of 4). Blocks of 8 instead of 4, 12 heads of 64 × 64 × 512 rows (a small
 * model's layer), one thread: bench/zen.md "Session 6". */
#define GDN_PF_ROWS 8    /* state rows ahead of a block that the multi-step kernel prefetches */
#define GDN_WIDE_STEPS 8 /* from this many steps a call takes blocks of 8 rows (decode and verify keep 4:
                          * their state comes from DRAM and their blocks are short, so the prefetch
                          * pattern measured above stays theirs) */

SM_TGT512 static void gdn_steps_avx512(float *S_dst, const float *S_src, const float *q0, const float *k0, int ldqk,
                                      const float *v0, int ldv, const float *gs, const float *betas, float *y0,
                                      int ldy, float *d0, int ldd, int R, int dk, int dv) {
    const int wide = R >= GDN_WIDE_STEPS;
    for (int i = 0; i < dv;) {
        const int nr = wide && dv - i >= 8 ? 8 : dv - i >= 4 ? 4 : 1;
        /* the state rows GDN_PF_ROWS ahead, as many as the block has (at least 4; past the head's
         * end: the next head's, contiguous; a prefetch beyond the buffer is harmless): the passes
         * below are compute, and without this the next block's DRAM reads only started when it did */
        for (long o = 0; o < (long)(nr > 4 ? nr : 4) * dk; o += 16) {
            _mm_prefetch((const char *)(S_src + (long)(i + GDN_PF_ROWS) * dk + o), _MM_HINT_T0);
            _mm_prefetch((const char *)(S_dst + (long)(i + GDN_PF_ROWS) * dk + o), _MM_HINT_T0);
        }
        __m512 a[8];
        for (int r = 0; r < nr; r++) {
            const float *src = S_src + (long)(i + r) * dk;
            a[r] = _mm512_setzero_ps();
            for (int j = 0; j < dk; j += 16)
                a[r] = _mm512_fmadd_ps(_mm512_loadu_ps(src + j), _mm512_loadu_ps(k0 + j), a[r]);
        }
        for (int t = 0; t < R; t++) {
            const float *src = (t == 0 ? S_src : S_dst) + (long)i * dk, *q = q0 + (long)t * ldqk, *k = k0 + (long)t * ldqk;
            const float *kn = t + 1 < R ? k + ldqk : NULL, *v = v0 + (long)t * ldv + i;
            float *dst = S_dst + (long)i * dk, *yo = y0 + (long)t * ldy + i, *dout = d0 ? d0 + (long)t * ldd + i : NULL;
            const float g = gs[t], beta = betas[t];
            if (nr == 8 && kn) gdn_fused_rows(a, src, dst, q, k, kn, v, g, beta, yo, dout, dk, 8, 1);
            else if (nr == 8) gdn_fused_rows(a, src, dst, q, k, kn, v, g, beta, yo, dout, dk, 8, 0);
            else if (nr == 4 && kn) gdn_fused_rows(a, src, dst, q, k, kn, v, g, beta, yo, dout, dk, 4, 1);
            else if (nr == 4) gdn_fused_rows(a, src, dst, q, k, kn, v, g, beta, yo, dout, dk, 4, 0);
            else if (kn) gdn_fused_rows(a, src, dst, q, k, kn, v, g, beta, yo, dout, dk, 1, 1);
            else gdn_fused_rows(a, src, dst, q, k, kn, v, g, beta, yo, dout, dk, 1, 0);
        }
        i += nr;
    }
}
#endif

#if defined(__x86_64__)
/* One step over value rows [i, i + NR) (NR = 4 or 1) of an AVX2 multi-step call: gdn_fused_rows's
 * scheme in gdn_step_avx2's arithmetic. (a0, a1)[r] hold this step's S row · k as two 8-lane halves
 * (element j in half (j % 16) / 8, lane j % 8); the rows' new state, y and delta are written and, with
 * NEXT, (a0, a1)[r] leave holding the next step's S row · kn from the stored values, by the same FMA
 * chain over the columns that gdn_step_avx2's first pass would run on them. */
SM_INL256 void gdn_fused_rows_avx2(__m256 *a0, __m256 *a1, const float *src, float *dst, const float *q,
                                   const float *k, const float *kn, const float *v, float g, float beta, float *yo,
                                   float *dout, int dk, const int NR, const int NEXT) {
    float dr[4];
    __m256 vd[4], o0[4], o1[4], b0[4], b1[4];
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
        dr[r] = beta * (v[r] - g * gdn_hsum8(_mm256_add_ps(a0[r], a1[r])));
        vd[r] = _mm256_set1_ps(dr[r]);
        o0[r] = o1[r] = b0[r] = b1[r] = _mm256_setzero_ps();
    }
    const __m256 vg = _mm256_set1_ps(g);
    for (int j = 0; j < dk; j += 16) {
        const __m256 k0 = _mm256_loadu_ps(k + j), k1 = _mm256_loadu_ps(k + j + 8);
        const __m256 q0 = _mm256_loadu_ps(q + j), q1 = _mm256_loadu_ps(q + j + 8);
        _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
            __m256 n0, n1;
            gdn_update16_avx2(src + (long)r * dk + j, dst + (long)r * dk + j, vg, vd[r], k0, k1, &n0, &n1);
            o0[r] = _mm256_fmadd_ps(n0, q0, o0[r]);
            o1[r] = _mm256_fmadd_ps(n1, q1, o1[r]);
            if (NEXT) {
                b0[r] = _mm256_fmadd_ps(n0, _mm256_loadu_ps(kn + j), b0[r]);
                b1[r] = _mm256_fmadd_ps(n1, _mm256_loadu_ps(kn + j + 8), b1[r]);
            }
        }
    }
    _Pragma("GCC unroll 4") for (int r = 0; r < NR; r++) {
        yo[r] = gdn_hsum8(_mm256_add_ps(o0[r], o1[r]));
        if (dout) dout[r] = dr[r];
        a0[r] = b0[r], a1[r] = b1[r];
    }
}

/* The AVX2 multi-step (kern_gdn_steps): value rows in blocks of 4 (then singles), each carried through
 * all R steps while its state rows stay in L1, the rows ahead prefetched; each step after the first
 * takes its S k from the previous step's update pass, so a step reads and writes the state once
 * instead of reading it twice. Per row the operations and their order are gdn_step_avx2's (same bits:
 * test_fwd_kernels `test_gdn_steps_equal_single_steps`). */
SM_TGT256 static void gdn_steps_avx2(float *S_dst, const float *S_src, const float *q0, const float *k0, int ldqk,
                                     const float *v0, int ldv, const float *gs, const float *betas, float *y0, int ldy,
                                     float *d0, int ldd, int R, int dk, int dv) {
    for (int i = 0; i < dv;) {
        const int nr = dv - i >= 4 ? 4 : 1;
        for (long o = 0; o < 4L * dk; o += 16) { /* as gdn_steps_avx512: the next blocks' rows, early */
            _mm_prefetch((const char *)(S_src + (long)(i + GDN_PF_ROWS) * dk + o), _MM_HINT_T0);
            _mm_prefetch((const char *)(S_dst + (long)(i + GDN_PF_ROWS) * dk + o), _MM_HINT_T0);
        }
        __m256 a0[4], a1[4];
        for (int r = 0; r < nr; r++) {
            const float *src = S_src + (long)(i + r) * dk;
            a0[r] = a1[r] = _mm256_setzero_ps();
            for (int j = 0; j < dk; j += 16) {
                a0[r] = _mm256_fmadd_ps(_mm256_loadu_ps(src + j), _mm256_loadu_ps(k0 + j), a0[r]);
                a1[r] = _mm256_fmadd_ps(_mm256_loadu_ps(src + j + 8), _mm256_loadu_ps(k0 + j + 8), a1[r]);
            }
        }
        for (int t = 0; t < R; t++) {
            const float *src = (t == 0 ? S_src : S_dst) + (long)i * dk, *q = q0 + (long)t * ldqk, *k = k0 + (long)t * ldqk;
            const float *kn = t + 1 < R ? k + ldqk : NULL, *v = v0 + (long)t * ldv + i;
            float *dst = S_dst + (long)i * dk, *yo = y0 + (long)t * ldy + i, *dout = d0 ? d0 + (long)t * ldd + i : NULL;
            if (nr == 4 && kn) gdn_fused_rows_avx2(a0, a1, src, dst, q, k, kn, v, gs[t], betas[t], yo, dout, dk, 4, 1);
            else if (nr == 4) gdn_fused_rows_avx2(a0, a1, src, dst, q, k, kn, v, gs[t], betas[t], yo, dout, dk, 4, 0);
            else if (kn) gdn_fused_rows_avx2(a0, a1, src, dst, q, k, kn, v, gs[t], betas[t], yo, dout, dk, 1, 1);
            else gdn_fused_rows_avx2(a0, a1, src, dst, q, k, kn, v, gs[t], betas[t], yo, dout, dk, 1, 0);
        }
        i += nr;
    }
}
#endif

void kern_gdn_steps(float *S_dst, const float *S_src, const float *q, const float *k, int ldqk, const float *v,
                    int ldv, const float *g, const float *beta, float *y, int ldy, float *delta_out, int ldd, int R,
                    int dk, int dv) {
    if (R < 1) return;
#if defined(__x86_64__)
    if (dk % 16 == 0 && cpu_isa() >= KERN_ISA_AVX512) {
        gdn_steps_avx512(S_dst, S_src, q, k, ldqk, v, ldv, g, beta, y, ldy, delta_out, ldd, R, dk, dv);
        return;
    }
    if (dk % 16 == 0 && cpu_isa() == KERN_ISA_AVX2 && R > 1) { /* one step: gdn_step_avx2 as before */
        gdn_steps_avx2(S_dst, S_src, q, k, ldqk, v, ldv, g, beta, y, ldy, delta_out, ldd, R, dk, dv);
        return;
    }
#endif
    for (int t = 0; t < R; t++)
        kern_gdn_step(S_dst, t == 0 ? S_src : S_dst, q + (long)t * ldqk, k + (long)t * ldqk, v + (long)t * ldv, g[t],
                      beta[t], y + (long)t * ldy, delta_out ? delta_out + (long)t * ldd : NULL, dk, dv);
}

#if defined(__x86_64__)
/* The AVX-512 replay: the very update of gdn_step_avx512 (mul, mul, add per element), so a replayed
 * state is bit-identical to the forward's. */
SM_TGT512 static void gdn_replay_avx512(float *S_dst, const float *S_src, const float *k, const float *delta, float g,
                                       int dk, int dv) {
    const __m512 vg = _mm512_set1_ps(g);
    for (int i = 0; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        const __m512 vd = _mm512_set1_ps(delta[i]);
        for (int j = 0; j < dk; j += 16)
            _mm512_storeu_ps(dst + j, _mm512_add_ps(_mm512_mul_ps(vg, _mm512_loadu_ps(src + j)),
                                                    _mm512_mul_ps(vd, _mm512_loadu_ps(k + j))));
    }
}
#endif

#if defined(__x86_64__)
/* The AVX2 replay: gdn_step_avx2's update (mul, mul, add per element). */
SM_TGT256 static void gdn_replay_avx2(float *S_dst, const float *S_src, const float *k, const float *delta, float g,
                                      int dk, int dv) {
    const __m256 vg = _mm256_set1_ps(g);
    for (int i = 0; i < dv; i++) {
        const float *src = S_src + (long)i * dk;
        float *dst = S_dst + (long)i * dk;
        const __m256 vd = _mm256_set1_ps(delta[i]);
        for (int j = 0; j < dk; j += 8)
            _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_mul_ps(vg, _mm256_loadu_ps(src + j)),
                                                    _mm256_mul_ps(vd, _mm256_loadu_ps(k + j))));
    }
}
#endif

void kern_gdn_replay(float *S_dst, const float *S_src, const float *k, const float *delta, float g,
                     int dk, int dv) {
#if defined(__x86_64__)
    if (dk % 16 == 0 && cpu_isa() >= KERN_ISA_AVX512) {
        gdn_replay_avx512(S_dst, S_src, k, delta, g, dk, dv);
        return;
    }
    if (dk % 16 == 0 && cpu_isa() == KERN_ISA_AVX2) {
        gdn_replay_avx2(S_dst, S_src, k, delta, g, dk, dv);
        return;
    }
#elif defined(__aarch64__)
    if (dk % 4 == 0 && KERN_ISA_IS_NEON(cpu_isa())) {
        gdn_replay_neon(S_dst, S_src, k, delta, g, dk, dv);
        return;
    }
#endif
    for (int i = 0; i < dv; i++)
        gdn_update_row(S_dst + (long)i * dk, S_src + (long)i * dk, k, delta[i], g, dk);
}
