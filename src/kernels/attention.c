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

#include <assert.h>
#include <math.h>
#include <string.h>

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

/* The three phases (attention.h) on the portable path: attention_portable's loops, split. The
 * weights are stored already normalized (p = e · (1/sum), the product attention_portable forms per
 * key), so the value sum multiplies the same floats. */
static void scores_portable(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k, int dk,
                            float scale, int js, int je) {
    for (int i = 0; i < nq; i++)
        for (int j = js; j < je && j < n[i]; j++) {
            const float *kj = kern_row(k, j);
            float s = 0.f;
            for (int d = 0; d < dk; d++) s += q[i][d] * kj[d];
            s *= scale;
            sc[i][j] = s;
        }
}

static void softmax_portable(float *scores, int n) {
    float mx = -INFINITY, sum = 0.f;
    for (int j = 0; j < n; j++) mx = scores[j] > mx ? scores[j] : mx;
    for (int j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) scores[j] *= inv;
}

static void wsum_portable(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0, int d1) {
    for (int i = 0; i < nq; i++) {
        float *o = out[i];
        for (int d = d0; d < d1; d++) o[d - d0] = 0.f;
        for (int j = 0; j < n[i]; j++) {
            const float *vj = kern_row(v, j);
            float pj = p[i][j];
            for (int d = d0; d < d1; d++) o[d - d0] += pj * vj[d];
        }
    }
}

#if defined(__x86_64__)
/* ---- AVX-512 ---- */

SM_INL512 __mmask16 mask16(int left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

/* Sixteen horizontal sums at once: lane m of the result is the sum of a[m]'s 16 lanes, by the tree
 * _mm512_reduce_add_ps uses for one vector (lanes i + i+8, then i + i+4, i + i+2, i + i+1), so each
 * sum is bit-identical to _mm512_reduce_add_ps(a[m]) (float addition is commutative); 15 adds and
 * ~31 shuffles instead of ~8 instructions per vector. */
SM_INL512 __m512 hsum16(const __m512 *a) {
    __m512 s1[8], s2[4];
    _Pragma("GCC unroll 16") for (int p = 0; p < 8; p++) /* [h(a2p) | h(a2p+1)], h[i] = x[i] + x[i+8] */
        s1[p] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_f32x4(a[2 * p], a[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    _Pragma("GCC unroll 16") for (int r = 0; r < 4; r++) /* 128-bit lane l: h[0..4) + h[4..8) of a(4r + l) */
        s2[r] = _mm512_add_ps(_mm512_shuffle_f32x4(s1[2 * r], s1[2 * r + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(s1[2 * r], s1[2 * r + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* in lane l: [q0 + q2, q1 + q3] of a(l), then of a(4 + l) (t0); of a(8 + l), a(12 + l) (t1) */
    __m512 t0 = _mm512_add_ps(_mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(s2[0], s2[1], _MM_SHUFFLE(3, 2, 3, 2)));
    __m512 t1 = _mm512_add_ps(_mm512_shuffle_ps(s2[2], s2[3], _MM_SHUFFLE(1, 0, 1, 0)),
                              _mm512_shuffle_ps(s2[2], s2[3], _MM_SHUFFLE(3, 2, 3, 2)));
    /* lane l: the sums of a(l), a(4 + l), a(8 + l), a(12 + l): element 4l + c holds a(4c + l) */
    __m512 u = _mm512_add_ps(_mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(t0, t1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), u);
}

/* scores[j0 + i] = scale · q·kr[i] for i < NK <= 4, each key its own accumulator. */
SM_INL512 void dots512(float *scores, const float *q, const float *const *kr, int dk, int j0, const int NK, float scale) {
    __m512 acc[4];
    for (int i = 0; i < NK; i++) acc[i] = _mm512_setzero_ps();
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

/* scores[j0 + i] = scale · q·kr[i] for 16 keys: the same chains as dots512, reduced together by
 * hsum16. */
SM_INL512 void dots512_16(float *scores, const float *q, const float *const *kr, int dk, int j0, float scale) {
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 16 <= dk; d += 16) {
        __m512 qv = _mm512_loadu_ps(q + d);
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(qv, _mm512_loadu_ps(kr[i] + d), acc[i]);
    }
    if (d < dk) {
        __mmask16 m = mask16(dk - d);
        __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, kr[i] + d), acc[i]);
    }
    _mm512_storeu_ps(scores + j0, _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale)));
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
    const float *kr[16];
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        for (int i = 0; i < 16; i++) kr[i] = kern_row(k, j + i);
        dots512_16(scores, q, kr, dk, j, scale);
    }
    for (; j + 4 <= n; j += 4) {
        for (int i = 0; i < 4; i++) kr[i] = kern_row(k, j + i);
        dots512(scores, q, kr, dk, j, 4, scale);
    }
    for (; j < n; j++) {
        kr[0] = kern_row(k, j);
        dots512(scores, q, kr, dk, j, 1, scale);
    }
    softmax512(scores, n);
    for (int d0 = 0; d0 < dv; d0 += 128) wsum512(out, v, dv, d0, n, scores);
}

/* ---- AVX-512, several queries over one KV head ----
 * The same per-(query, key) and per-(query, value dim) operation sequences as attention_avx512 —
 * one accumulator per dot product over the dims in order, reduced by _mm512_reduce_add_ps's tree,
 * one accumulator per output element over the keys in order — so every query's output is
 * bit-identical to attention_avx512 on it alone. Grouping only shares loads and reductions: the
 * queries of a call go in blocks of up to ATT_QB, and each block walks the keys in tiles (ATT_KT
 * keys for prefill blocks, L1-sized: 64 keys of 128 dims are 32 KB; fewer for decode blocks, see
 * att_walk), so every key and value chunk comes from memory once per block instead of once per 4
 * queries (docs/kernels.md "Attention"). Inside a tile, 4 × 4 (queries ×
 * keys) dot products share their loads and one transposed reduction (hsum16); the value sum keeps
 * 4 queries × 64 dims of accumulators in registers and parks them in the output rows between tiles
 * (storing an fp32 partial sum does not round it). */

#define ATT_QB KERN_ATT_GROUP_ROWS /* queries per block (rows of score scratch the block needs) */
#define ATT_KT 64 /* keys per tile */

/* Scores of queries q[0..NQ) against the 4 keys kr[0..4) (key j0 first), NQ <= 4: 16 chains, one
 * transposed reduction. */
SM_INL512 void dots512_tile(float *const *sc, const float *const *q, const float *const *kr, int dk, int j0,
                            const int NQ, float scale) {
    __m512 acc[16];
    _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) acc[i] = _mm512_setzero_ps();
    int d = 0;
    for (; d + 16 <= dk; d += 16) {
        __m512 kv[4];
        _Pragma("GCC unroll 16") for (int kk = 0; kk < 4; kk++) kv[kk] = _mm512_loadu_ps(kr[kk] + d);
        _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++) {
            __m512 qv = _mm512_loadu_ps(q[i] + d);
            _Pragma("GCC unroll 16") for (int kk = 0; kk < 4; kk++) acc[4 * i + kk] = _mm512_fmadd_ps(qv, kv[kk], acc[4 * i + kk]);
        }
    }
    if (d < dk) {
        __mmask16 m = mask16(dk - d);
        __m512 kv[4];
        _Pragma("GCC unroll 16") for (int kk = 0; kk < 4; kk++) kv[kk] = _mm512_maskz_loadu_ps(m, kr[kk] + d);
        _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++) {
            __m512 qv = _mm512_maskz_loadu_ps(m, q[i] + d);
            _Pragma("GCC unroll 16") for (int kk = 0; kk < 4; kk++) acc[4 * i + kk] = _mm512_fmadd_ps(qv, kv[kk], acc[4 * i + kk]);
        }
    }
    float s[16] __attribute__((aligned(64)));
    _mm512_store_ps(s, _mm512_mul_ps(hsum16(acc), _mm512_set1_ps(scale)));
    _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++) memcpy(sc[i] + j0, s + 4 * i, 4 * sizeof(float));
}

/* out_i[d0 .. d0 + 64) ∩ [0, dv) += Σ_j p_ij · v_j over the keys j of one tile (row pointers
 * vr[j - j0]) in [j0, j1) ∩ [0, n_i), queries i < NQ <= 4, in key order; first: the accumulators
 * start at zero instead of at out_i. Keys below the group's smallest n go through all NQ
 * accumulator sets, then each query finishes its own keys. */
SM_INL512 void wsum512_tile(float *const *out, const float *const *vr, int dv, int d0, const int *n,
                            float *const *p, const int NQ, int j0, int j1, int first) {
    __m512 acc[4][4];
    __mmask16 m[4];
    int nmin = n[0];
    _Pragma("GCC unroll 16") for (int i = 1; i < NQ; i++) nmin = n[i] < nmin ? n[i] : nmin;
    _Pragma("GCC unroll 16") for (int u = 0; u < 4; u++) {
        int left = dv - d0 - 16 * u;
        m[u] = left <= 0 ? 0 : mask16(left);
        _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++)
            acc[i][u] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m[u], out[i] + d0 + 16 * u);
    }
    int jm = nmin < j1 ? nmin : j1;
    for (int j = j0; j < jm; j++) {
        const float *vj = vr[j - j0] + d0;
        __m512 vv[4];
        _Pragma("GCC unroll 16") for (int u = 0; u < 4; u++) vv[u] = _mm512_maskz_loadu_ps(m[u], vj + 16 * u);
        _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++) {
            __m512 pj = _mm512_set1_ps(p[i][j]);
            _Pragma("GCC unroll 16") for (int u = 0; u < 4; u++) acc[i][u] = _mm512_fmadd_ps(pj, vv[u], acc[i][u]);
        }
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++) {
        int je = n[i] < j1 ? n[i] : j1;
        for (int j = jm > j0 ? jm : j0; j < je; j++) {
            const float *vj = vr[j - j0] + d0;
            __m512 pj = _mm512_set1_ps(p[i][j]);
            _Pragma("GCC unroll 16") for (int u = 0; u < 4; u++) acc[i][u] = _mm512_fmadd_ps(pj, _mm512_maskz_loadu_ps(m[u], vj + 16 * u), acc[i][u]);
        }
        _Pragma("GCC unroll 16") for (int u = 0; u < 4; u++) _mm512_mask_storeu_ps(out[i] + d0 + 16 * u, m[u], acc[i][u]);
    }
}

/* The scores of up to 4 queries (NQ) for the keys of one tile [j0, j1) (row pointers kr[j - j0]):
 * 4 × 4 tiles below the group's smallest n (rounded down to 4), then each query's own remaining
 * keys (16, 4, then 1 at a time). */
SM_INL512 void scores4_tile(float *const *sc, const float *const *q, const int *n, const int NQ,
                            const float *const *kr, int dk, float scale, int j0, int j1) {
    int nmin = n[0];
    _Pragma("GCC unroll 16") for (int i = 1; i < NQ; i++) nmin = n[i] < nmin ? n[i] : nmin;
    int jt = (nmin & ~3) < j1 ? (nmin & ~3) : j1, j = j0;
    for (; j + 4 <= jt; j += 4) dots512_tile(sc, q, kr + (j - j0), dk, j, NQ, scale);
    _Pragma("GCC unroll 16") for (int i = 0; i < NQ; i++) {
        int ji = j, je = n[i] < j1 ? n[i] : j1;
        for (; ji + 16 <= je; ji += 16) dots512_16(sc[i], q[i], kr + (ji - j0), dk, ji, scale);
        for (; ji + 4 <= je; ji += 4) dots512(sc[i], q[i], kr + (ji - j0), dk, ji, 4, scale);
        for (; ji < je; ji++) dots512(sc[i], q[i], kr + (ji - j0), dk, ji, 1, scale);
    }
}

/* How a block walks its keys, and what it prefetches (into L2) while it does; the hardware
 * prefetchers lose a head's stream at each page (its pages are not contiguous), so every block
 * prefetches the rows it will reach. Prefetching and tile sizes change no arithmetic (each query's
 * operation sequence is fixed per key and per value element), so keying them on the block's size
 * keeps every query's bits.
 *
 * Prefill blocks (more than ATT_PF_EVERY_LINE_MAX queries) walk tiles of ATT_KT keys and prefetch
 * every other line of the next tile in one burst: their many queries find the tile in L2 / L3
 * anyway, and prefetching every line made a 4,096-token prefill 16% slower; blocks of up to
 * ATT_PF_EVERY_LINE_MAX queries prefetch every line of it, which made a 1-row decode at 16,000
 * positions 25-30% faster (AMD does not bring a line's pair along as Intel's spatial prefetcher
 * does; AMD Zen 5, bench/zen.md "Session 8").
 *
 * Blocks of at most ATT_FEW_MAX queries (a decode row's query heads of one KV head, a 2-row verify's)
 * are bound by how fast one core pulls the head from memory. They walk tiles of ATT_KT_FEW keys and
 * prefetch every line of the keys ATT_AHEAD_FEW further on, so the prefetches go out a few at a time
 * between the loads, evenly, a fixed distance ahead. The burst for a whole 64-key tile (32 KB at 128
 * dims: 512 prefetches) stalled the core on the full miss queue at each tile's start — half of the
 * attention's samples sat on the prefetch — and the tile's arithmetic waited behind it. On an AMD
 * Zen 5 the even walk reads a 3-query block's head ~35% faster; with 12 queries a block, more
 * arithmetic a key, the forward was slower with it (bench/zen.md "Session 22"). */
#define ATT_PF_EVERY_LINE_MAX 16
#define ATT_FEW_MAX 8
#define ATT_KT_FEW 4
#define ATT_AHEAD_FEW 32

typedef struct {
    int kt;    /* keys per tile */
    int ahead; /* keys between a tile's first key and the first key it prefetches */
    int step;  /* prefetch every `step` bytes of a row */
} att_walk;

static inline att_walk att_walk_for(int nb) {
    if (nb <= ATT_FEW_MAX) return (att_walk){ATT_KT_FEW, ATT_AHEAD_FEW, 64};
    if (nb <= ATT_PF_EVERY_LINE_MAX) return (att_walk){ATT_KT, ATT_KT, 64};
    return (att_walk){ATT_KT, ATT_KT, 128};
}

/* An L2 prefetch of floats [c0, c1) of rows [j1, j2) of r, every `step` bytes. */
static inline void att_prefetch_rows(const kern_rows *r, int c0, int c1, int j1, int j2, int step) {
    for (int j = j1; j < j2; j++) {
        const char *row = (const char *)(kern_row(r, j) + c0);
        for (int b = 0; b < (c1 - c0) * 4; b += step) _mm_prefetch(row + b, _MM_HINT_T1);
    }
}

/* The prefetch that goes with tile [j0, j1) of a walk over keys [js, je), floats [c0, c1) of each
 * row: the rows `ahead` keys on, and, with the first tile, every row up to there. */
static inline void att_walk_prefetch(const att_walk *wk, const kern_rows *r, int c0, int c1, int j0, int j1, int js,
                                     int je) {
    int a = j0 + wk->ahead, b = j1 + wk->ahead;
    if (j0 == js) a = j1;
    att_prefetch_rows(r, c0, c1, a < je ? a : je, b < je ? b : je, wk->step);
}

/* Row pointers of keys [j0, j1) of r. */
SM_INL512 void tile_rows(const float **rows, const kern_rows *r, int j0, int j1) {
    for (int j = j0; j < j1; j++) rows[j - j0] = kern_row(r, j);
}

/* scores4_tile for all nb queries, 4 at a time. */
SM_INL512 void scores_tile_all(float *const *sc, const float *const *q, const int *n, int nb, const float *const *rows,
                               int dk, float scale, int j0, int j1) {
    for (int g = 0; g < nb; g += 4) {
        switch (nb - g) {
        case 1: scores4_tile(sc + g, q + g, n + g, 1, rows, dk, scale, j0, j1); break;
        case 2: scores4_tile(sc + g, q + g, n + g, 2, rows, dk, scale, j0, j1); break;
        case 3: scores4_tile(sc + g, q + g, n + g, 3, rows, dk, scale, j0, j1); break;
        default: scores4_tile(sc + g, q + g, n + g, 4, rows, dk, scale, j0, j1); break;
        }
    }
}

/* wsum512_tile for all nb queries, 4 at a time, each over dims [0, dv) in 64-dim passes. */
SM_INL512 void wsum_tile_all(float *const *out, const float *const *rows, int dv, const int *n, float *const *p,
                             int nb, int j0, int j1) {
    for (int g = 0; g < nb; g += 4)
        for (int d0 = 0; d0 < dv; d0 += 64) {
            switch (nb - g) {
            case 1: wsum512_tile(out + g, rows, dv, d0, n + g, p + g, 1, j0, j1, j0 == 0); break;
            case 2: wsum512_tile(out + g, rows, dv, d0, n + g, p + g, 2, j0, j1, j0 == 0); break;
            case 3: wsum512_tile(out + g, rows, dv, d0, n + g, p + g, 3, j0, j1, j0 == 0); break;
            default: wsum512_tile(out + g, rows, dv, d0, n + g, p + g, 4, j0, j1, j0 == 0); break;
            }
        }
}

/* One block of nb <= ATT_QB queries: scores tile by tile, each query's softmax, the value sums tile
 * by tile. */
SM_INL512 void block_avx512(float *const *out, const float *const *q, const int *n, int nb, const kern_rows *k, int dk,
                            const kern_rows *v, int dv, float scale, float *scores, long lds) {
    float *sc[ATT_QB];
    const float *rows[ATT_KT];
    const att_walk wk = att_walk_for(nb);
    int nmax = 0;
    for (int i = 0; i < nb; i++) {
        sc[i] = scores + (long)i * lds;
        nmax = n[i] > nmax ? n[i] : nmax;
    }
    for (int j0 = 0; j0 < nmax; j0 += wk.kt) {
        int j1 = nmax - j0 < wk.kt ? nmax : j0 + wk.kt;
        tile_rows(rows, k, j0, j1);
        att_walk_prefetch(&wk, k, 0, dk, j0, j1, 0, nmax);
        scores_tile_all(sc, q, n, nb, rows, dk, scale, j0, j1);
    }
    for (int i = 0; i < nb; i++) softmax512(sc[i], n[i]);
    for (int j0 = 0; j0 < nmax; j0 += wk.kt) {
        int j1 = nmax - j0 < wk.kt ? nmax : j0 + wk.kt;
        tile_rows(rows, v, j0, j1);
        att_walk_prefetch(&wk, v, 0, dv, j0, j1, 0, nmax);
        wsum_tile_all(out, rows, dv, n, sc, nb, j0, j1);
    }
}

SM_TGT512 static void attention_group_avx512(float *const *out, const float *const *q, const int *n, int nq,
                                             const kern_rows *k, int dk, const kern_rows *v, int dv, float scale,
                                             float *scores, long lds) {
    for (int b0 = 0; b0 < nq; b0 += ATT_QB)
        block_avx512(out + b0, q + b0, n + b0, nq - b0 < ATT_QB ? nq - b0 : ATT_QB, k, dk, v, dv, scale, scores, lds);
}

/* The three phases (attention.h) on the AVX-512 path: block_avx512's tiles and prefetch walk, over
 * a key range (scores) or a dim range (value sums), in blocks of up to 4 queries' chains. */
SM_TGT512 static void scores_avx512(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k,
                                    int dk, float scale, int js, int je) {
    const float *rows[ATT_KT];
    const att_walk wk = att_walk_for(nq);
    for (int j0 = js; j0 < je; j0 += wk.kt) {
        int j1 = je - j0 < wk.kt ? je : j0 + wk.kt;
        tile_rows(rows, k, j0, j1);
        att_walk_prefetch(&wk, k, 0, dk, j0, j1, js, je);
        scores_tile_all(sc, q, n, nq, rows, dk, scale, j0, j1);
    }
}

SM_TGT512 static void softmax_avx512(float *scores, int n) { softmax512(scores, n); }

SM_TGT512 static void wsum_avx512(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0,
                                  int d1) {
    const float *rows[ATT_KT];
    const att_walk wk = att_walk_for(nq);
    int nmax = 0;
    for (int i = 0; i < nq; i++) nmax = n[i] > nmax ? n[i] : nmax;
    for (int j0 = 0; j0 < nmax; j0 += wk.kt) {
        int j1 = nmax - j0 < wk.kt ? nmax : j0 + wk.kt;
        att_walk_prefetch(&wk, v, d0, d1, j0, j1, 0, nmax);
        for (int j = j0; j < j1; j++) rows[j - j0] = kern_row(v, j) + d0; /* the rows moved to dim d0 */
        wsum_tile_all(out, rows, d1 - d0, n, p, nq, j0, j1);
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

/* scores[0, n) → their softmax, in place (max, exp of the differences, sum, one reciprocal). */
SM_INL256 void softmax256(float *scores, int n) {
    int j;
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
}

SM_TGT256 static void attention_avx2(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv,
                                     int n, float scale, float *scores) {
    int j = 0;
    for (; j + 4 <= n; j += 4) dots256(scores, q, k, dk, j, 4, scale);
    for (; j < n; j++) dots256(scores, q, k, dk, j, 1, scale);
    softmax256(scores, n);
    for (int d0 = 0; d0 < dv; d0 += 64) wsum256(out, v, dv, d0, n, scores);
}

/* wsum256 over keys [j0, je) only, continuing the partial sums in out (from zero when j0 == 0):
 * per output element the same fused multiply-adds in the same key order as wsum256. */
SM_INL256 void wsum256_part(float *out, const kern_rows *v, int dv, int d0, int j0, int je, const float *p) {
    __m256 acc[8];
    __m256i m[8];
    for (int u = 0; u < 8; u++) {
        int left = dv - d0 - 8 * u;
        m[u] = sm_mask256(left < 0 ? 0 : left > 8 ? 8 : left);
        acc[u] = j0 == 0 ? _mm256_setzero_ps() : _mm256_maskload_ps(out + d0 + 8 * u, m[u]);
    }
    for (int j = j0; j < je; j++) {
        __m256 pj = _mm256_set1_ps(p[j]);
        const float *vj = kern_row(v, j) + d0;
        for (int u = 0; u < 8; u++) acc[u] = _mm256_fmadd_ps(pj, _mm256_maskload_ps(vj + 8 * u, m[u]), acc[u]);
    }
    for (int u = 0; u < 8; u++) _mm256_maskstore_ps(out + d0 + 8 * u, m[u], acc[u]);
}

/* attention_avx2 for a block of nb queries sharing one KV head, key tile by key tile (ATT_KT), so
 * each tile comes from memory once for the block instead of once per query (a verify of R rows at
 * GQA group g read the KV g·R times). Each query's scores, softmax and value sums are attention_avx2's
 * operations in its order, so its bits are the same as alone (test_fwd_kernels). */
SM_INL256 void block_avx2(float *const *out, const float *const *q, const int *n, int nb, const kern_rows *k, int dk,
                          const kern_rows *v, int dv, float scale, float *scores, long lds) {
    const att_walk wk = att_walk_for(nb);
    int nmax = 0;
    for (int i = 0; i < nb; i++) nmax = n[i] > nmax ? n[i] : nmax;
    for (int j0 = 0; j0 < nmax; j0 += wk.kt) {
        int j1 = nmax - j0 < wk.kt ? nmax : j0 + wk.kt;
        att_walk_prefetch(&wk, k, 0, dk, j0, j1, 0, nmax);
        for (int i = 0; i < nb; i++) {
            int j = j0, je = n[i] < j1 ? n[i] : j1;
            for (; j + 4 <= je; j += 4) dots256(scores + i * lds, q[i], k, dk, j, 4, scale);
            for (; j < je; j++) dots256(scores + i * lds, q[i], k, dk, j, 1, scale);
        }
    }
    for (int i = 0; i < nb; i++) softmax256(scores + i * lds, n[i]);
    for (int j0 = 0; j0 < nmax; j0 += wk.kt) {
        int j1 = nmax - j0 < wk.kt ? nmax : j0 + wk.kt;
        att_walk_prefetch(&wk, v, 0, dv, j0, j1, 0, nmax);
        for (int i = 0; i < nb; i++) {
            int je = n[i] < j1 ? n[i] : j1;
            if (je <= j0) continue;
            for (int d0 = 0; d0 < dv; d0 += 64) wsum256_part(out[i], v, dv, d0, j0, je, scores + i * lds);
        }
    }
}

SM_TGT256 static void attention_group_avx2(float *const *out, const float *const *q, const int *n, int nq,
                                           const kern_rows *k, int dk, const kern_rows *v, int dv, float scale,
                                           float *scores, long lds) {
    for (int b0 = 0; b0 < nq; b0 += ATT_QB)
        block_avx2(out + b0, q + b0, n + b0, nq - b0 < ATT_QB ? nq - b0 : ATT_QB, k, dk, v, dv, scale, scores, lds);
}

/* The three phases (attention.h) on the AVX2 path: block_avx2's per-query dots, softmax and value sums. */
SM_TGT256 static void scores_avx2(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k,
                                  int dk, float scale, int js, int je) {
    const att_walk wk = att_walk_for(nq);
    for (int j0 = js; j0 < je; j0 += wk.kt) {
        int j1 = je - j0 < wk.kt ? je : j0 + wk.kt;
        att_walk_prefetch(&wk, k, 0, dk, j0, j1, js, je);
        for (int i = 0; i < nq; i++) {
            int j = j0, e = n[i] < j1 ? n[i] : j1;
            for (; j + 4 <= e; j += 4) dots256(sc[i], q[i], k, dk, j, 4, scale);
            for (; j < e; j++) dots256(sc[i], q[i], k, dk, j, 1, scale);
        }
    }
}

SM_TGT256 static void softmax_avx2(float *scores, int n) { softmax256(scores, n); }

SM_TGT256 static void wsum_avx2(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0,
                                int d1) {
    const att_walk wk = att_walk_for(nq);
    int nmax = 0;
    for (int i = 0; i < nq; i++) nmax = n[i] > nmax ? n[i] : nmax;
    for (int j0 = 0; j0 < nmax; j0 += wk.kt) {
        int j1 = nmax - j0 < wk.kt ? nmax : j0 + wk.kt;
        att_walk_prefetch(&wk, v, d0, d1, j0, j1, 0, nmax);
        for (int i = 0; i < nq; i++) {
            int e = n[i] < j1 ? n[i] : j1;
            if (e <= j0) continue;
            for (int d = d0; d < d1; d += 64) { /* rows and output moved to dim d */
                kern_rows vd = *v;
                vd.base += d;
                wsum256_part(out[i] + (d - d0), &vd, d1 - d, 0, j0, e, p[i]);
            }
        }
    }
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
    if (cpu_isa() == KERN_ISA_AVX2) {
        attention_group_avx2(out, q, n, nq, k, dk, v, dv, scale, scores, lds);
        return;
    }
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(cpu_isa())) {
        attention_group_neon(out, q, n, nq, k, dk, v, dv, scale, scores, lds);
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

void kern_attention_scores_rows(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k,
                                int dk, float scale, int j0, int j1) {
    int nmax = 0; /* no row at or past the queries' last key is touched (nor its page looked up) */
    for (int i = 0; i < nq; i++) nmax = n[i] > nmax ? n[i] : nmax;
    if (j1 > nmax) j1 = nmax;
    if (j0 >= j1) return;
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) scores_avx512(sc, q, n, nq, k, dk, scale, j0, j1);
    else if (isa == KERN_ISA_AVX2) scores_avx2(sc, q, n, nq, k, dk, scale, j0, j1);
    else
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) attention_scores_neon(sc, q, n, nq, k, dk, scale, j0, j1);
    else
#endif
        scores_portable(sc, q, n, nq, k, dk, scale, j0, j1);
    (void)isa;
}

void kern_attention_softmax(float *scores, int n) {
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) softmax_avx512(scores, n);
    else if (isa == KERN_ISA_AVX2) softmax_avx2(scores, n);
    else
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) attention_softmax_neon(scores, n);
    else
#endif
        softmax_portable(scores, n);
    (void)isa;
}

void kern_attention_wsum_rows(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0,
                              int d1) {
    assert(nq <= KERN_ATT_GROUP_ROWS && 0 <= d0 && d0 <= d1);
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) wsum_avx512(out, p, n, nq, v, d0, d1);
    else if (isa == KERN_ISA_AVX2) wsum_avx2(out, p, n, nq, v, d0, d1);
    else
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) attention_wsum_neon(out, p, n, nq, v, d0, d1);
    else
#endif
        wsum_portable(out, p, n, nq, v, d0, d1);
    (void)isa;
}
