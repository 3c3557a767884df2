/* matmul_avx512.c — AVX-512 path of kern_matmul for dense f32/f16/bf16 weights.
 *
 * A tile is 4 weight rows × TT activation rows (TT = 1..4): each 16-wide weight vector is loaded
 * (and widened to f32) once and FMA'd into the TT accumulators of its row, so a call over T rows
 * reads the weights from memory once (the 4-row block stays in L1 across the T tiles). Every output
 * element has its own accumulator chain over c = 0, 16, 32, ... (tail by zero-masked loads) and one
 * fixed horizontal reduction: the result is independent of T and of the tiling. bf16 (with the bf16_pf
 * knob): the first activation tile of a 4-row block prefetches the same columns of the block 4 rows
 * ahead into L2, as matmul_bf16dp.c does, so a decode row's four row streams keep the next block in
 * flight (the hardware prefetchers restart at every block change); prefetches change no bit.
 *
 * bf16 with packed activations (mm_rows_bf16x_avx512, the bf16x knob; pick_xpath in matmul.c takes it
 * on the AVX-512 path where the AVX512-BF16 kernel is not chosen, e.g. an Intel core without AMX): a
 * 64-byte load holds 32 weights as 16 pairs; the even weight of each pair widens to fp32 by one shift
 * and the odd one by one mask, instead of a widening shuffle and a shift per 16 weights (which took a
 * third of the FMA ports' slots in a 4 x 4 tile). The activations are packed once per call to match:
 * per 32-input chunk, the 16 even inputs then the 16 odd ones (zero past K). Output (t, r) is one
 * accumulator chain — per chunk fma(even), then fma(odd) — and one fixed horizontal sum, whatever the
 * tile: 4 weight rows x 4 activation rows, the rest of T as 4 x 3, 8 x 2 or 8 x 1 (mm_rows_bf16x_avx512
 * says in which order they meet the weights). */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <immintrin.h>

#include "matmul_internal.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL __m512 ld_f32(const void *p, size_t i) { return _mm512_loadu_ps((const float *)p + i); }
INL __m512 ldm_f32(const void *p, size_t i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const float *)p + i); }
INL __m512 ld_bf16(const void *p, size_t i) {
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
INL __m512 ldm_bf16(const void *p, size_t i, __mmask16 m) {
    __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
INL __m512 ld_f16(const void *p, size_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i)));
}
INL __m512 ldm_f16(const void *p, size_t i, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i));
}

/* One tile: weight rows wr[0..3] (row indices, duplicates allowed for a short last block; only
 * rows < nr are stored), activation rows x[0..TT). */
#define DEF_TILE(NAME, LD, LDM, ES)                                                                 \
    INL void NAME(const void *W, const size_t *wrow, int nr, const float *x, int ldx, int K,        \
                  float *y, int ldy, int r, const int TT, size_t pf) {                               \
        __m512 acc[4][4];                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                          \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) acc[i][t] = _mm512_setzero_ps();    \
        int c = 0;                                                                                   \
        for (; c + 16 <= K; c += 16) {                                                               \
            __m512 wv[4];                                                                            \
            if (pf)                                                                                  \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    _mm_prefetch((const char *)W + (wrow[i] + c) * ES + pf, _MM_HINT_T1);            \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LD(W, wrow[i] + c);          \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                   \
                __m512 xv = _mm512_loadu_ps(x + (size_t)t * ldx + c);                                \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);                               \
            }                                                                                        \
        }                                                                                            \
        if (c < K) {                                                                                 \
            __mmask16 m = (__mmask16)((1u << (K - c)) - 1);                                          \
            __m512 wv[4];                                                                            \
            _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) wv[i] = LDM(W, wrow[i] + c, m);      \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                   \
                __m512 xv = _mm512_maskz_loadu_ps(m, x + (size_t)t * ldx + c);                       \
                _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++)                                  \
                    acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);                               \
            }                                                                                        \
        }                                                                                            \
        _Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {                                        \
            if (i >= nr) break;                                                                      \
            _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++)                                     \
                y[(size_t)t * ldy + r + i] = _mm512_reduce_add_ps(acc[i][t]);                        \
        }                                                                                            \
    }

DEF_TILE(tile_f32, ld_f32, ldm_f32, 4)
DEF_TILE(tile_bf16, ld_bf16, ldm_bf16, 2)
DEF_TILE(tile_f16, ld_f16, ldm_f16, 2)

/* pf_bytes: the prefetch distance of a block's first activation tile (0: none). */
#define DEF_ROWS(NAME, TILE)                                                                        \
    static TGT void NAME(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,  \
                         int r0, int r1, size_t pf_bytes) {                                         \
        int K = w->cols;                                                                            \
        for (int r = r0; r < r1; r += 4) {                                                          \
            int nr = r1 - r < 4 ? r1 - r : 4;                                                       \
            size_t wrow[4], pf = pf_bytes;                                                          \
            for (int i = 0; i < 4; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;          \
            int t = 0;                                                                              \
            for (; t + 4 <= T; t += 4, pf = 0)                                                      \
                TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 4, pf); \
            switch (T - t) {                                                                        \
            case 3: TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 3, pf); break; \
            case 2: TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 2, pf); break; \
            case 1: TILE(w->data, wrow, nr, x + (size_t)t * ldx, ldx, K, y + (size_t)t * ldy, ldy, r, 1, pf); break; \
            default: break;                                                                         \
            }                                                                                       \
        }                                                                                           \
    }

DEF_ROWS(rows_f32, tile_f32)
DEF_ROWS(rows_bf16, tile_bf16)
DEF_ROWS(rows_f16, tile_f16)

TGT void mm_rows_dense_avx512(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                              int r0, int r1) {
    switch (w->dtype) {
    case DT_BF16: rows_bf16(y, ldy, x, ldx, T, w, r0, r1, kern_knobs_get()->bf16_pf ? (size_t)4 * w->cols * 2 : 0); break;
    case DT_F16: rows_f16(y, ldy, x, ldx, T, w, r0, r1, 0); break;
    default: rows_f32(y, ldy, x, ldx, T, w, r0, r1, 0); break;
    }
}

/* ---- bf16 with packed activations ---- */

/* Inputs rounded up to whole 32-element chunks. */
static int k_pad32(int K) { return (K + 31) & ~31; }

size_t mm_bf16x_avx512_pack_bytes(int T, int K) { return (size_t)T * (size_t)k_pad32(K) * 4; }

/* Row t of the packed activations at buf + t·k_pad32(K) floats: per chunk of 32 inputs, the 16 even
 * ones then the 16 odd ones; inputs past K are zero. */
TGT void mm_bf16x_avx512_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    const int kp = k_pad32(K);
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i od = _mm512_add_epi32(ev, _mm512_set1_epi32(1));
    for (int t = 0; t < T; t++) {
        const float *xr = x + (size_t)t * ldx;
        float *o = (float *)buf + (size_t)t * kp;
        for (int c = 0; c < K; c += 32, o += 32) {
            __mmask16 ma = 0xffff, mb = 0xffff;
            if (K - c < 32) { /* the tail chunk: loads masked to the inputs that exist */
                ma = K - c >= 16 ? 0xffff : (__mmask16)((1u << (K - c)) - 1);
                mb = K - c <= 16 ? 0 : (__mmask16)((1u << (K - c - 16)) - 1);
            }
            const __m512 a = _mm512_maskz_loadu_ps(ma, xr + c), b = _mm512_maskz_loadu_ps(mb, xr + c + 16);
            _mm512_storeu_ps(o, _mm512_permutex2var_ps(a, ev, b));
            _mm512_storeu_ps(o + 16, _mm512_permutex2var_ps(a, od, b));
        }
    }
}

/* acc[I][t] += weight chunk V (32 bf16 of row I, as 16 pairs) times packed chunk t at xc. */
#define BX_CHUNK(V, I)                                                                              \
    do {                                                                                            \
        const __m512i v_ = (V);                                                                     \
        const __m512 we_ = _mm512_castsi512_ps(_mm512_slli_epi32(v_, 16));                         \
        const __m512 wo_ = _mm512_castsi512_ps(_mm512_and_si512(v_, hi16));                        \
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) {                                     \
            acc[I][t] = _mm512_fmadd_ps(we_, _mm512_loadu_ps(xc + (size_t)t * kp), acc[I][t]);     \
            acc[I][t] = _mm512_fmadd_ps(wo_, _mm512_loadu_ps(xc + (size_t)t * kp + 16), acc[I][t]); \
        }                                                                                           \
    } while (0)

/* RW weight rows (wrow[i]: element offset of row i; the first nr are stored) x TT activation rows of
 * packed xp (kp floats a row) into y[t][r + i]; pf (bytes, 0 = none): prefetch that far ahead of each
 * weight row into L2, one line a row a chunk. */
INL void bx_tile(const uint16_t *W, const size_t *wrow, int nr, const float *xp, int kp, int K, float *y, int ldy,
                 int r, const int RW, const int TT, size_t pf) {
    const __m512i hi16 = _mm512_set1_epi32((int)0xffff0000u);
    __m512 acc[8][4];
    _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++)
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++) acc[i][t] = _mm512_setzero_ps();
    int c = 0;
    for (; c + 32 <= K; c += 32) {
        const float *xc = xp + c;
        if (pf)
            _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++)
                _mm_prefetch((const char *)(W + wrow[i] + c) + pf, _MM_HINT_T1);
        _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++)
            BX_CHUNK(_mm512_loadu_si512((const void *)(W + wrow[i] + c)), i);
    }
    if (c < K) { /* the weights past K load as zero, as the packed inputs are */
        const float *xc = xp + c;
        const __mmask32 m = (__mmask32)((1ull << (K - c)) - 1);
        _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++)
            BX_CHUNK(_mm512_maskz_loadu_epi16(m, W + wrow[i] + c), i);
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < RW; i++) {
        if (i >= nr) break;
        _Pragma("GCC unroll 4") for (int t = 0; t < TT; t++)
            y[(size_t)t * ldy + r + i] = _mm512_reduce_add_ps(acc[i][t]);
    }
}
#undef BX_CHUNK

/* Weight rows [r0, r1) in blocks of RW (the last block repeats its last row) x the TT activation rows
 * of packed xp; pf: prefetch each block's weights RW rows ahead into L2 (a first pass). */
INL void bx_pass(float *y, int ldy, const float *xp, int kp, const kern_weight *w, int r0, int r1, const int RW,
                 const int TT, int pf) {
    const int K = w->cols;
    const size_t pf_bytes = pf ? (size_t)RW * K * 2 : 0;
    for (int r = r0; r < r1; r += RW) {
        int nr = r1 - r < RW ? r1 - r : RW;
        size_t wrow[8];
        for (int i = 0; i < RW; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;
        bx_tile(w->data, wrow, nr, xp, kp, K, y, ldy, r, RW, TT, pf_bytes);
    }
}

/* Bytes of weight rows that the activation tiles pass over in turn: they stay in L2 after the first. */
#define BX_SLICE_BYTES (256 * 1024)

/* Weight rows [r0, r1) in L2-sized slices; per slice, the T activation rows in tiles of 4 (4 weight
 * rows a block: 16 chains), then one tile of the rest (3: blocks of 4; 2 or 1: blocks of 8, for
 * chains enough to hide the FMA latency), each tile over the slice's rows: a tile's packed rows stay
 * in L1 while the weights pass, from memory in the first pass (which prefetches when the bf16_pf knob
 * is on) and from L2 in the others. */
TGT void mm_rows_bf16x_avx512(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0,
                              int r1, const void *xpack) {
    (void)x, (void)ldx;
    const float *xp = xpack;
    const int kp = k_pad32(w->cols), pf0 = kern_knobs_get()->bf16_pf;
    int slice = (int)(BX_SLICE_BYTES / ((size_t)w->cols * 2)) / 8 * 8;
    if (slice < 8) slice = 8;
    for (int s0 = r0; s0 < r1; s0 += slice) {
        const int s1 = s0 + slice < r1 ? s0 + slice : r1;
        int pf = pf0, t = 0;
        for (; t + 4 <= T; t += 4, pf = 0)
            bx_pass(y + (size_t)t * ldy, ldy, xp + (size_t)t * kp, kp, w, s0, s1, 4, 4, pf);
        const float *xt = xp + (size_t)t * kp;
        float *yt = y + (size_t)t * ldy;
        switch (T - t) {
        case 3: bx_pass(yt, ldy, xt, kp, w, s0, s1, 4, 3, pf); break;
        case 2: bx_pass(yt, ldy, xt, kp, w, s0, s1, 8, 2, pf); break;
        case 1: bx_pass(yt, ldy, xt, kp, w, s0, s1, 8, 1, pf); break;
        default: break;
        }
    }
}
#endif /* __x86_64__ */
