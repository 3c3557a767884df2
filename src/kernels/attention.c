/* attention.c — one query head against cached keys (see attention.h).
 *
 * Three passes over the n keys: scores (one dot product per key), softmax (max, exp, sum), and the
 * weighted value sum. The AVX-512 and AVX2 paths give every key's dot product its own vector
 * accumulator chain over the head dims (4 keys are interleaved only for instruction-level
 * parallelism), reduce it in a fixed order, and sum exps and values in vector lanes whose layout
 * depends on n and the widths alone — so a query's result depends only on its own keys, never on how
 * many rows or heads the caller processes (row invariance). The path is chosen by cpu_isa(); the NEON
 * path (AArch64) lives in attention_neon.c with the same scheme in 4-lane vectors. */
#include "attention.h"

#include <math.h>

#include "cpu.h"
#include "neon.h"
#include "simd_math.h"

static void attention_portable(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv,
                               int n, float scale, float *scores) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float *kj = kern_row(k, j);
        float s = 0.f;
        for (int d = 0; d < dk; d++) s += q[d] * kj[d];
        s *= scale;
        scores[j] = s;
        if (s > mx) mx = s;
    }
    float sum = 0.f;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    float inv = 1.0f / sum;
    for (int d = 0; d < dv; d++) out[d] = 0.f;
    for (int j = 0; j < n; j++) {
        const float *vj = kern_row(v, j);
        float p = scores[j] * inv;
        for (int d = 0; d < dv; d++) out[d] += p * vj[d];
    }
}

#if defined(__x86_64__)
/* ---- AVX-512 ---- */

SM_INL512 __mmask16 mask16(int left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

/* scores[j] = scale · q·k_j for j in [j0, j0 + NK), NK <= 4, each key its own accumulator. */
SM_INL512 void dots512(float *scores, const float *q, const kern_rows *k, int dk, int j0, const int NK, float scale) {
    __m512 acc[4];
    const float *kr[4];
    for (int i = 0; i < NK; i++) {
        acc[i] = _mm512_setzero_ps();
        kr[i] = kern_row(k, j0 + i);
    }
    int d = 0;
    for (; d + 16 <= dk; d += 16) {
        __m512 qv = _mm512_loadu_ps(q + d);
        for (int i = 0; i < NK; i++)
            acc[i] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kr[i] + d), acc[i]);
    }
    if (d < dk) {
        __mmask16 m = mask16(dk - d);
        __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
        for (int i = 0; i < NK; i++)
            acc[i] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kr[i] + d), acc[i]);
    }
    for (int i = 0; i < NK; i++) scores[j0 + i] = _mm512_reduce_add_ps(acc[i]) * scale;
}

/* out[d0 .. d0 + 128) ∩ [0, dv) = Σ_j p_j · v_j over all n keys (8 accumulators, masked tail). */
SM_INL512 void wsum512(float *out, const kern_rows *v, int dv, int d0, int n, const float *p) {
    __m512 acc[8];
    __mmask16 m[8];
    for (int u = 0; u < 8; u++) {
        acc[u] = _mm512_setzero_ps();
        int left = dv - d0 - 16 * u;
        m[u] = left <= 0 ? 0 : mask16(left);
    }
    for (int j = 0; j < n; j++) {
        __m512 pj = _mm512_set1_ps(p[j]);
        const float *vj = kern_row(v, j) + d0;
        for (int u = 0; u < 8; u++) acc[u] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m[u], vj + 16 * u), acc[u]);
    }
    for (int u = 0; u < 8; u++) _mm512_mask_storeu_ps(out + d0 + 16 * u, m[u], acc[u]);
}

/* scores[0..n) = softmax(scores[0..n)): max (exact in any order), then exp and sum in 16 lanes,
 * reduced once, then the division as one multiply by 1/sum. */
SM_INL512 void softmax512(float *scores, int n) {
    int j;
    __m512 vmx = _mm512_set1_ps(-INFINITY);
    for (j = 0; j < n; j += 16) vmx = _mm512_max_ps(vmx, _mm512_mask_loadu_ps(vmx, mask16(n - j), scores + j));
    __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vmx));
    __m512 vs = _mm512_setzero_ps();
    for (j = 0; j < n; j += 16) {
        __mmask16 m = mask16(n - j);
        __m512 e = sm_exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, scores + j), mx));
        e = _mm512_maskz_mov_ps(m, e);
        _mm512_mask_storeu_ps(scores + j, m, e);
        vs = _mm512_add_ps(vs, e);
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vs));
    for (j = 0; j < n; j += 16) {
        __mmask16 m = mask16(n - j);
        _mm512_mask_storeu_ps(scores + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, scores + j), inv));
    }
}

SM_TGT512 static void attention_avx512(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v,
                                       int dv, int n, float scale, float *scores) {
    int j = 0;
    for (; j + 4 <= n; j += 4) dots512(scores, q, k, dk, j, 4, scale);
    for (; j < n; j++) dots512(scores, q, k, dk, j, 1, scale);
    softmax512(scores, n);
    for (int d0 = 0; d0 < dv; d0 += 128) wsum512(out, v, dv, d0, n, scores);
}

/* ---- AVX-512, several queries over one KV head ----
 * The same per-(query, key) and per-(query, value dim) operation sequences as attention_avx512 —
 * one accumulator per dot product over the dims in order, one per output element over the keys in
 * order — so every query's output is bit-identical to attention_avx512 on it alone. Grouping only
 * shares loads: a 4 × 4 (queries × keys) tile reads each key chunk once for 4 queries, and the
 * value sum reads each value chunk once for up to 4 queries. */

/* Scores of queries q[0..NQ) against keys [j0, j0 + 4), NQ <= 4. */
SM_INL512 void dots512_tile(float *const *sc, const float *const *q, const kern_rows *k, int dk, int j0, const int NQ,
                            float scale) {
    __m512 acc[4][4];
    const float *kr[4];
    for (int kk = 0; kk < 4; kk++) kr[kk] = kern_row(k, j0 + kk);
    for (int i = 0; i < NQ; i++)
        for (int kk = 0; kk < 4; kk++) acc[i][kk] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 16 <= dk; d += 16) {
        __m512 kv[4];
        for (int kk = 0; kk < 4; kk++) kv[kk] = _mm512_loadu_ps(kr[kk] + d);
        for (int i = 0; i < NQ; i++) {
            __m512 qv = _mm512_loadu_ps(q[i] + d);
            for (int kk = 0; kk < 4; kk++) acc[i][kk] = _mm512_fmadd_ps(qv, kv[kk], acc[i][kk]);
        }
    }
    if (d < dk) {
        __mmask16 m = mask16(dk - d);
        __m512 kv[4];
        for (int kk = 0; kk < 4; kk++) kv[kk] = _mm512_maskz_loadu_ps(m, kr[kk] + d);
        for (int i = 0; i < NQ; i++) {
            __m512 qv = _mm512_maskz_loadu_ps(m, q[i] + d);
            for (int kk = 0; kk < 4; kk++) acc[i][kk] = _mm512_fmadd_ps(qv, kv[kk], acc[i][kk]);
        }
    }
    for (int i = 0; i < NQ; i++)
        for (int kk = 0; kk < 4; kk++) sc[i][j0 + kk] = _mm512_reduce_add_ps(acc[i][kk]) * scale;
}

/* out_i[d0 .. d0 + 64) ∩ [0, dv) = Σ_{j < n_i} p_ij · v_j for queries i < NQ (NQ <= 4): keys below
 * the smallest n go through all NQ accumulator sets, then each query finishes its own keys. */
SM_INL512 void wsum512_group(float *const *out, const kern_rows *v, int dv, int d0, const int *n, float *const *p,
                             const int NQ) {
    __m512 acc[4][4];
    __mmask16 m[4];
    int nmin = n[0];
    for (int i = 1; i < NQ; i++) nmin = n[i] < nmin ? n[i] : nmin;
    for (int u = 0; u < 4; u++) {
        int left = dv - d0 - 16 * u;
        m[u] = left <= 0 ? 0 : mask16(left);
        for (int i = 0; i < NQ; i++) acc[i][u] = _mm512_setzero_ps();
    }
    for (int j = 0; j < nmin; j++) {
        const float *vj = kern_row(v, j) + d0;
        __m512 vv[4];
        for (int u = 0; u < 4; u++) vv[u] = _mm512_maskz_loadu_ps(m[u], vj + 16 * u);
        for (int i = 0; i < NQ; i++) {
            __m512 pj = _mm512_set1_ps(p[i][j]);
            for (int u = 0; u < 4; u++) acc[i][u] = _mm512_fmadd_ps(pj, vv[u], acc[i][u]);
        }
    }
    for (int i = 0; i < NQ; i++) {
        for (int j = nmin; j < n[i]; j++) {
            const float *vj = kern_row(v, j) + d0;
            __m512 pj = _mm512_set1_ps(p[i][j]);
            for (int u = 0; u < 4; u++) acc[i][u] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m[u], vj + 16 * u), acc[i][u]);
        }
        for (int u = 0; u < 4; u++) _mm512_mask_storeu_ps(out[i] + d0 + 16 * u, m[u], acc[i][u]);
    }
}

/* Up to 4 queries (NQ) over one KV head. */
SM_INL512 void group4_avx512(float *const *out, const float *const *q, const int *n, const int NQ, const kern_rows *k,
                             int dk, const kern_rows *v, int dv, float scale, float *const *sc) {
    int nmin = n[0];
    for (int i = 1; i < NQ; i++) nmin = n[i] < nmin ? n[i] : nmin;
    int j = 0;
    for (; j + 4 <= nmin; j += 4) dots512_tile(sc, q, k, dk, j, NQ, scale);
    for (int i = 0; i < NQ; i++) { /* each query's remaining keys, as attention_avx512 walks them */
        int ji = j;
        for (; ji + 4 <= n[i]; ji += 4) dots512(sc[i], q[i], k, dk, ji, 4, scale);
        for (; ji < n[i]; ji++) dots512(sc[i], q[i], k, dk, ji, 1, scale);
        softmax512(sc[i], n[i]);
    }
    for (int d0 = 0; d0 < dv; d0 += 64) wsum512_group(out, v, dv, d0, n, sc, NQ);
}

SM_TGT512 static void attention_group_avx512(float *const *out, const float *const *q, const int *n, int nq,
                                             const kern_rows *k, int dk, const kern_rows *v, int dv, float scale,
                                             float *scores, long lds) {
    for (int i0 = 0; i0 < nq; i0 += 4) {
        float *sc[4];
        int nb = nq - i0 < 4 ? nq - i0 : 4;
        for (int i = 0; i < nb; i++) sc[i] = scores + (long)i * lds;
        switch (nb) {
        case 4: group4_avx512(out + i0, q + i0, n + i0, 4, k, dk, v, dv, scale, sc); break;
        case 3: group4_avx512(out + i0, q + i0, n + i0, 3, k, dk, v, dv, scale, sc); break;
        case 2: group4_avx512(out + i0, q + i0, n + i0, 2, k, dk, v, dv, scale, sc); break;
        default: group4_avx512(out + i0, q + i0, n + i0, 1, k, dk, v, dv, scale, sc); break;
        }
    }
}

/* ---- AVX2 ---- */

SM_INL256 void dots256(float *scores, const float *q, const kern_rows *k, int dk, int j0, const int NK, float scale) {
    __m256 acc[4];
    const float *kr[4];
    for (int i = 0; i < NK; i++) {
        acc[i] = _mm256_setzero_ps();
        kr[i] = kern_row(k, j0 + i);
    }
    int d = 0;
    for (; d + 8 <= dk; d += 8) {
        __m256 qv = _mm256_loadu_ps(q + d);
        for (int i = 0; i < NK; i++)
            acc[i] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(kr[i] + d), acc[i]);
    }
    if (d < dk) {
        __m256i m = sm_mask256(dk - d);
        __m256 qv = _mm256_maskload_ps(q + d, m);
        for (int i = 0; i < NK; i++)
            acc[i] = _mm256_fmadd_ps(qv, _mm256_maskload_ps(kr[i] + d, m), acc[i]);
    }
    for (int i = 0; i < NK; i++) scores[j0 + i] = sm_hsum256(acc[i]) * scale;
}

/* out[d0 .. d0 + 64) ∩ [0, dv) = Σ_j p_j · v_j (8 accumulators of 8 lanes, masked tail). */
SM_INL256 void wsum256(float *out, const kern_rows *v, int dv, int d0, int n, const float *p) {
    __m256 acc[8];
    __m256i m[8];
    for (int u = 0; u < 8; u++) {
        acc[u] = _mm256_setzero_ps();
        int left = dv - d0 - 8 * u;
        m[u] = sm_mask256(left < 0 ? 0 : left > 8 ? 8 : left);
    }
    for (int j = 0; j < n; j++) {
        __m256 pj = _mm256_set1_ps(p[j]);
        const float *vj = kern_row(v, j) + d0;
        for (int u = 0; u < 8; u++) acc[u] = _mm256_fmadd_ps(pj, _mm256_maskload_ps(vj + 8 * u, m[u]), acc[u]);
    }
    for (int u = 0; u < 8; u++) _mm256_maskstore_ps(out + d0 + 8 * u, m[u], acc[u]);
}

SM_TGT256 static void attention_avx2(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv,
                                     int n, float scale, float *scores) {
    int j = 0;
    for (; j + 4 <= n; j += 4) dots256(scores, q, k, dk, j, 4, scale);
    for (; j < n; j++) dots256(scores, q, k, dk, j, 1, scale);
    __m256 vmx = _mm256_set1_ps(-INFINITY);
    for (j = 0; j + 8 <= n; j += 8) vmx = _mm256_max_ps(vmx, _mm256_loadu_ps(scores + j));
    float mxs = sm_hmax256(vmx);
    for (; j < n; j++) mxs = scores[j] > mxs ? scores[j] : mxs;
    __m256 mx = _mm256_set1_ps(mxs);
    __m256 vs = _mm256_setzero_ps();
    for (j = 0; j < n; j += 8) {
        __m256i m = sm_mask256(n - j < 8 ? n - j : 8);
        __m256 e = sm_exp256(_mm256_sub_ps(_mm256_maskload_ps(scores + j, m), mx));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
        _mm256_maskstore_ps(scores + j, m, e);
        vs = _mm256_add_ps(vs, e);
    }
    __m256 inv = _mm256_set1_ps(1.0f / sm_hsum256(vs));
    for (j = 0; j < n; j += 8) {
        __m256i m = sm_mask256(n - j < 8 ? n - j : 8);
        _mm256_maskstore_ps(scores + j, m, _mm256_mul_ps(_mm256_maskload_ps(scores + j, m), inv));
    }
    for (int d0 = 0; d0 < dv; d0 += 64) wsum256(out, v, dv, d0, n, scores);
}

#endif /* __x86_64__ */

/* A page table of one page: rows j < 2^30 of a flat array. */
static const int32_t flat_page[1] = {0};

kern_rows kern_rows_flat(const float *base, int ld) {
    kern_rows r = {base, flat_page, 0, 30, ld};
    return r;
}

void kern_attention_rows(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv, int n,
                         float scale, float *scores) {
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) attention_avx512(out, q, k, dk, v, dv, n, scale, scores);
    else if (isa == KERN_ISA_AVX2) attention_avx2(out, q, k, dk, v, dv, n, scale, scores);
    else
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) attention_neon(out, q, k, dk, v, dv, n, scale, scores);
    else
#endif
        attention_portable(out, q, k, dk, v, dv, n, scale, scores);
    (void)isa;
}

void kern_attention_head_kv(float *out, const float *q, const float *k, int ldk, int dk, const float *v,
                            int ldv, int dv, int n, float scale, float *scores) {
    kern_rows kr = kern_rows_flat(k, ldk), vr = kern_rows_flat(v, ldv);
    kern_attention_rows(out, q, &kr, dk, &vr, dv, n, scale, scores);
}

void kern_attention_head(float *out, const float *q, const float *k, const float *v, int ld, int n,
                         int dh, float scale, float *scores) {
    kern_attention_head_kv(out, q, k, ld, dh, v, ld, dh, n, scale, scores);
}

void kern_attention_group_rows(float *const *out, const float *const *q, const int *n, int nq, const kern_rows *k,
                               int dk, const kern_rows *v, int dv, float scale, float *scores, long lds) {
#if defined(__x86_64__)
    if (cpu_isa() >= KERN_ISA_AVX512) {
        attention_group_avx512(out, q, n, nq, k, dk, v, dv, scale, scores, lds);
        return;
    }
#endif
    for (int i = 0; i < nq; i++) kern_attention_rows(out[i], q[i], k, dk, v, dv, n[i], scale, scores + (i % 4) * lds);
}

void kern_attention_group(float *const *out, const float *const *q, const int *n, int nq, const float *k, int ldk,
                          int dk, const float *v, int ldv, int dv, float scale, float *scores, long lds) {
    kern_rows kr = kern_rows_flat(k, ldk), vr = kern_rows_flat(v, ldv);
    kern_attention_group_rows(out, q, n, nq, &kr, dk, &vr, dv, scale, scores, lds);
}
