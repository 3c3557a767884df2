/* attention_neon.c — the NEON path of kern_attention_head_kv (neon.h; contract in attention.h).
 *
 * attention.c's AVX2 scheme in 4-lane vectors: every key's dot product has its own accumulator chain
 * over the head dims (4 keys interleaved only for instruction-level parallelism), reduced by
 * sm_hsum4 and scaled; softmax takes the exact max, then exp and the sum in 4 lanes whose layout
 * depends on n alone, one 1/sum; the value sum keeps one accumulator per output dim over the keys in
 * order. A query's output depends only on its own keys. Keys and values are read through the page
 * table (kern_rows, attention.h) in key order, as on x86. A group of queries over one KV head
 * (attention_group_neon) shares each key tile, with every query's arithmetic unchanged. */
#if defined(__aarch64__)
#include <math.h>

#include "neon.h"
#include "simd_math.h"

/* scores[j] = scale · q·k_j for j in [j0, j0 + NK), NK <= 4. */
static inline __attribute__((always_inline)) void dots4(float *scores, const float *q, const kern_rows *k, int dk,
                                                        int j0, const int NK, float scale) {
    float32x4_t acc[4];
    for (int i = 0; i < NK; i++) acc[i] = vdupq_n_f32(0.f);
    int d = 0;
    for (; d + 4 <= dk; d += 4) {
        float32x4_t qv = vld1q_f32(q + d);
        for (int i = 0; i < NK; i++) acc[i] = vfmaq_f32(acc[i], qv, vld1q_f32(kern_row(k, j0 + i) + d));
    }
    if (d < dk) {
        float32x4_t qv = sm_load4_part(q + d, dk - d);
        for (int i = 0; i < NK; i++)
            acc[i] = vfmaq_f32(acc[i], qv, sm_load4_part(kern_row(k, j0 + i) + d, dk - d));
    }
    for (int i = 0; i < NK; i++) scores[j0 + i] = sm_hsum4(acc[i]) * scale;
}

/* scores[0..n) = softmax(scores[0..n)). */
static void softmax4(float *scores, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = scores[j] > mx ? scores[j] : mx;
    const float32x4_t vmx = vdupq_n_f32(mx);
    float32x4_t vs = vdupq_n_f32(0.f);
    int j = 0;
    for (; j + 4 <= n; j += 4) {
        float32x4_t e = sm_exp4(vsubq_f32(vld1q_f32(scores + j), vmx));
        vst1q_f32(scores + j, e);
        vs = vaddq_f32(vs, e);
    }
    if (j < n) {
        /* lanes past n are zeroed before they join the sum */
        static const uint32_t keep[4][4] = {{0, 0, 0, 0}, {~0u, 0, 0, 0}, {~0u, ~0u, 0, 0}, {~0u, ~0u, ~0u, 0}};
        float32x4_t e = sm_exp4(vsubq_f32(sm_load4_part(scores + j, n - j), vmx));
        e = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), vld1q_u32(keep[n - j])));
        sm_store4_part(scores + j, e, n - j);
        vs = vaddq_f32(vs, e);
    }
    const float32x4_t inv = vdupq_n_f32(1.0f / sm_hsum4(vs));
    for (j = 0; j + 4 <= n; j += 4) vst1q_f32(scores + j, vmulq_f32(vld1q_f32(scores + j), inv));
    if (j < n) sm_store4_part(scores + j, vmulq_f32(sm_load4_part(scores + j, n - j), inv), n - j);
}

/* out[d0 .. d0 + 32) ∩ [0, dv) = Σ_j p_j · v_j over all n keys (8 accumulators of 4 lanes). */
static void wsum4(float *out, const kern_rows *v, int dv, int d0, int n, const float *p) {
    float32x4_t acc[8];
    int left = dv - d0;
    for (int u = 0; u < 8; u++) acc[u] = vdupq_n_f32(0.f);
    if (left >= 32) {
        for (int j = 0; j < n; j++) {
            const float *vj = kern_row(v, j) + d0;
            const float pj = p[j];
            for (int u = 0; u < 8; u++) acc[u] = vfmaq_n_f32(acc[u], vld1q_f32(vj + 4 * u), pj);
        }
        for (int u = 0; u < 8; u++) vst1q_f32(out + d0 + 4 * u, acc[u]);
        return;
    }
    for (int j = 0; j < n; j++) {
        const float *vj = kern_row(v, j) + d0;
        const float pj = p[j];
        for (int u = 0; u < 8 && 4 * u < left; u++) {
            int m = left - 4 * u;
            acc[u] = vfmaq_n_f32(acc[u], m >= 4 ? vld1q_f32(vj + 4 * u) : sm_load4_part(vj + 4 * u, m), pj);
        }
    }
    for (int u = 0; u < 8 && 4 * u < left; u++) {
        int m = left - 4 * u;
        if (m >= 4) vst1q_f32(out + d0 + 4 * u, acc[u]);
        else sm_store4_part(out + d0 + 4 * u, acc[u], m);
    }
}

/* wsum4 over keys [j0, je) only, continuing the partial sums in out (from zero when j0 == 0): per output
 * element the same fused multiply-adds in the same key order as wsum4. */
static void wsum4_part(float *out, const kern_rows *v, int dv, int d0, int j0, int je, const float *p) {
    float32x4_t acc[8];
    int left = dv - d0;
    for (int u = 0; u < 8 && 4 * u < left; u++) {
        int m = left - 4 * u;
        acc[u] = j0 == 0 ? vdupq_n_f32(0.f) : m >= 4 ? vld1q_f32(out + d0 + 4 * u) : sm_load4_part(out + d0 + 4 * u, m);
    }
    if (left >= 32) {
        for (int j = j0; j < je; j++) {
            const float *vj = kern_row(v, j) + d0;
            const float pj = p[j];
            for (int u = 0; u < 8; u++) acc[u] = vfmaq_n_f32(acc[u], vld1q_f32(vj + 4 * u), pj);
        }
        for (int u = 0; u < 8; u++) vst1q_f32(out + d0 + 4 * u, acc[u]);
        return;
    }
    for (int j = j0; j < je; j++) {
        const float *vj = kern_row(v, j) + d0;
        const float pj = p[j];
        for (int u = 0; u < 8 && 4 * u < left; u++) {
            int m = left - 4 * u;
            acc[u] = vfmaq_n_f32(acc[u], m >= 4 ? vld1q_f32(vj + 4 * u) : sm_load4_part(vj + 4 * u, m), pj);
        }
    }
    for (int u = 0; u < 8 && 4 * u < left; u++) {
        int m = left - 4 * u;
        if (m >= 4) vst1q_f32(out + d0 + 4 * u, acc[u]);
        else sm_store4_part(out + d0 + 4 * u, acc[u], m);
    }
}

void attention_neon(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv,
                    int n, float scale, float *scores) {
    int j = 0;
    for (; j + 4 <= n; j += 4) dots4(scores, q, k, dk, j, 4, scale);
    for (; j < n; j++) dots4(scores, q, k, dk, j, 1, scale);
    softmax4(scores, n);
    for (int d0 = 0; d0 < dv; d0 += 32) wsum4(out, v, dv, d0, n, scores);
}

#define ATT_NEON_KT 64 /* keys per tile of a block */

/* attention_neon for a block of nb <= KERN_ATT_GROUP_ROWS queries sharing one KV head, key tile by key
 * tile, so each tile comes from memory once for the block instead of once per query (a verify of R rows
 * at GQA group g read the KV g·R times). Each query's dots, softmax and value sums are attention_neon's
 * operations in its order (dots4 groups keys by 4 from the query's first key, and a tile is a multiple
 * of 4 keys), so its bits are the same as alone (test_fwd_kernels' group-vs-single check). */
static void block_neon(float *const *out, const float *const *q, const int *n, int nb, const kern_rows *k, int dk,
                       const kern_rows *v, int dv, float scale, float *scores, long lds) {
    int nmax = 0;
    for (int i = 0; i < nb; i++) nmax = n[i] > nmax ? n[i] : nmax;
    for (int j0 = 0; j0 < nmax; j0 += ATT_NEON_KT) {
        int j1 = nmax - j0 < ATT_NEON_KT ? nmax : j0 + ATT_NEON_KT;
        for (int i = 0; i < nb; i++) {
            int j = j0, je = n[i] < j1 ? n[i] : j1;
            for (; j + 4 <= je; j += 4) dots4(scores + i * lds, q[i], k, dk, j, 4, scale);
            for (; j < je; j++) dots4(scores + i * lds, q[i], k, dk, j, 1, scale);
        }
    }
    for (int i = 0; i < nb; i++) softmax4(scores + i * lds, n[i]);
    for (int j0 = 0; j0 < nmax; j0 += ATT_NEON_KT) {
        int j1 = nmax - j0 < ATT_NEON_KT ? nmax : j0 + ATT_NEON_KT;
        for (int i = 0; i < nb; i++) {
            int je = n[i] < j1 ? n[i] : j1;
            if (je <= j0) continue;
            for (int d0 = 0; d0 < dv; d0 += 32) wsum4_part(out[i], v, dv, d0, j0, je, scores + i * lds);
        }
    }
}

void attention_group_neon(float *const *out, const float *const *q, const int *n, int nq, const kern_rows *k, int dk,
                          const kern_rows *v, int dv, float scale, float *scores, long lds) {
    for (int b0 = 0; b0 < nq; b0 += KERN_ATT_GROUP_ROWS)
        block_neon(out + b0, q + b0, n + b0, nq - b0 < KERN_ATT_GROUP_ROWS ? nq - b0 : KERN_ATT_GROUP_ROWS, k, dk, v,
                   dv, scale, scores, lds);
}
/* The three phases (attention.h): block_neon's per-query dots, softmax4 and wsum4, split. dots4 groups
 * keys by 4 from the range's start, and a key's dot product has its own chain either way. */
void attention_scores_neon(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k, int dk,
                           float scale, int j0, int j1) {
    for (int i = 0; i < nq; i++) {
        int j = j0, je = n[i] < j1 ? n[i] : j1;
        for (; j + 4 <= je; j += 4) dots4(sc[i], q[i], k, dk, j, 4, scale);
        for (; j < je; j++) dots4(sc[i], q[i], k, dk, j, 1, scale);
    }
}

void attention_softmax_neon(float *scores, int n) { softmax4(scores, n); }

void attention_wsum_neon(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0, int d1) {
    for (int i = 0; i < nq; i++)
        for (int d = d0; d < d1; d += 32) { /* rows and output moved to dim d */
            kern_rows vd = *v;
            vd.base += d;
            wsum4(out[i] + (d - d0), &vd, d1 - d, 0, n[i], p[i]);
        }
}
#endif /* __aarch64__ */
