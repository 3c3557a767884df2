/* matmul_bf16dp.c — AVX512-BF16 path of kern_matmul for dense bf16 weights on CPUs without AMX
 * tiles (AMD Zen 4/5, Intel Cooper Lake; docs/kernels.md "bf16 without AMX").
 *
 * VDPBF16PS multiplies 32 bf16 pairs and adds each pair's two products into one of 16 fp32 lanes.
 * The weight rows are read as they lie in the checkpoint (32 consecutive bf16 = one vector, the
 * pairs are adjacent inputs), so nothing is repacked and the per-element bf16 → fp32 widening of
 * the FMA path (matmul_avx512.c) disappears. Activations are fp32: as on the AMX path
 * (matmul_amx.c) each row x is split once per call into x_hi = bf16(x) and x_lo = bf16(x − x_hi),
 * ~16 mantissa bits together, and every weight vector meets both; bf16 × bf16 products are exact in
 * fp32, so the only differences from the fp32 reference are the 2^-17 split residue and the
 * summation order.
 *
 * Row invariance (DESIGN.md §3): output (t, r) is the horizontal sum of one accumulator chain over
 * k = 0, 32, 64, ... (the tail by a zero-masked weight load against zero-padded activations), two
 * VDPBF16PS per step (x_hi, then x_lo); neither T, nor the other rows of the tile, nor the thread
 * split change that sequence. A tile is 4 weight rows × up to 6 activation rows (24 chains; up to 4
 * when K > 1024, tile_rows), so a verify of 4 rows reads each weight vector once, like one row. The
 * horizontal sums of a tile are taken four at a time with shared shuffles, by the same tree as
 * _mm512_reduce_add_ps (sm_hsum4_512, simd_math.h). The activations are packed tile by tile, a
 * step's rows side by side (mm_bf16dp_pack_x), so a tile reads one contiguous block through one
 * pointer. More than 4 activation rows: L2-sized groups of weight rows, each passed over by every
 * activation tile (mm_rows_bf16dp); docs/kernels.md "bf16 without AMX".
 *
 * Software prefetch (the bf16_pf knob): while a block of 4 weight rows is read, the same columns of
 * the block 4 rows ahead are prefetched into L2, so the four row streams keep a whole block in
 * flight (the hardware prefetchers restart at every block change). */
#if defined(__x86_64__) /* AVX512-BF16: x86 only (inert versions in matmul_internal.h elsewhere) */
#include <assert.h>
#include <immintrin.h>
#include <string.h>

#include "matmul_internal.h"
#include "simd_math.h"

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma")))
#define INL static inline __attribute__((always_inline)) TGT

enum { BD_ROWS = 4, BD_T = 6 }; /* weight rows × at most this many activation rows per tile */

/* Inputs rounded up to whole 32-element steps. */
static int k_pad(int K) { return (K + 31) & ~31; }

size_t mm_bf16dp_pack_bytes(int T, int K) { return (size_t)T * (size_t)k_pad(K) * 4; }

/* Packed activations of one tile kept in L1 beside the weight block it meets: a 6-row tile only
 * while its rows take at most this many bytes (K <= 1024), else 4-row tiles (at K = 1920 a 6-row
 * tile's 46 KB of activations evicted the weights it was meeting). */
#define BD_TILE_X_BYTES (24 * 1024)

/* Rows of the next activation tile of a call with ks steps when rem rows are left: up to 6 (24
 * chains; 4 for long rows, above); with 6-row tiles 7 and 8 rows go as 4 + 3 and 4 + 4, so no tile
 * of 1 or 2 rows follows a full one. The packing and the kernel both walk a call's rows by it. */
static inline int tile_rows(int rem, int ks) {
    int tmax = (size_t)BD_T * ks * 128 <= BD_TILE_X_BYTES ? BD_T : 4;
    if (rem <= tmax) return rem;
    if (tmax == BD_T && (rem == 7 || rem == 8)) return 4;
    return tmax;
}

/* The packed activations, tile by tile (tile_rows): a tile of TT rows starting at row t0 occupies
 * ks·TT·128 bytes from buf + t0·ks·128, and its row t0 + j, step s, is 32 x_hi then 32 x_lo bf16
 * (128 bytes) at (s·TT + j)·128 from there — a step's rows side by side, so a tile reads them at
 * fixed offsets from one pointer moving through one contiguous block. Inputs past K are zero. */
/* x_hi and x_lo of the n <= 32 inputs at xr (zero past n) into o[0..32) and o[32..64). */
INL void pack_step(uint16_t *o, const float *xr, int n) {
    __mmask16 m0 = (__mmask16)(n >= 16 ? 0xffff : (1u << n) - 1);
    __mmask16 m1 = (__mmask16)(n >= 32 ? 0xffff : n > 16 ? (1u << (n - 16)) - 1 : 0);
    __m512 a = _mm512_maskz_loadu_ps(m0, xr), b = _mm512_maskz_loadu_ps(m1, xr + 16);
    /* cvtne2ps: round to nearest even; the second operand fills the low half */
    __m512bh hi = _mm512_cvtne2ps_pbh(b, a);
    __m512 ahi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256((__m512i)hi)), 16));
    __m512 bhi = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64((__m512i)hi, 1)), 16));
    __m512bh lo = _mm512_cvtne2ps_pbh(_mm512_sub_ps(b, bhi), _mm512_sub_ps(a, ahi));
    _mm512_storeu_si512(o, (__m512i)hi);
    _mm512_storeu_si512(o + 32, (__m512i)lo);
}

TGT void mm_bf16dp_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    const int ks = k_pad(K) / 32;
    uint16_t *o = buf; /* written in order: tile, step, row of the tile */
    for (int t0 = 0, tt; t0 < T; t0 += tt) {
        tt = tile_rows(T - t0, ks);
        const float *xt = x + (size_t)t0 * ldx;
        for (int s = 0; s < ks; s++) {
            int c = s * 32, n = K - c < 32 ? K - c : 32;
            for (int j = 0; j < tt; j++, o += 64) pack_step(o, xt + (size_t)j * ldx + c, n);
        }
    }
}

/* One tile: weight rows at W + wrow[0..3] (duplicates allowed in a short last block; rows >= nr are
 * not stored), TT packed activation rows from xp (row t of the tile, step s at xp + s·xstep + t·64).
 * pf: byte distance of the prefetch, 0 = none. */
INL void tile(const uint16_t *W, const size_t *wrow, int nr, const uint16_t *xp, size_t xstep, int K, float *y,
              int ldy, int r, const int TT, size_t pf) {
    __m512 acc[BD_ROWS][BD_T];
    const uint16_t *wp[BD_ROWS];
    _Pragma("GCC unroll 4") for (int i = 0; i < BD_ROWS; i++) wp[i] = W + wrow[i];
    _Pragma("GCC unroll 4") for (int i = 0; i < BD_ROWS; i++)
        _Pragma("GCC unroll 6") for (int t = 0; t < TT; t++) acc[i][t] = _mm512_setzero_ps();
    const int full = K / 32;
    const uint16_t *xs = xp;
    for (int s = 0; s < full; s++, xs += xstep) {
        __m512bh wv[BD_ROWS];
        _Pragma("GCC unroll 4") for (int i = 0; i < BD_ROWS; i++) {
            const uint16_t *p = wp[i] + (size_t)s * 32;
            if (pf) _mm_prefetch((const char *)p + pf, _MM_HINT_T1);
            wv[i] = (__m512bh)_mm512_loadu_si512(p);
        }
        _Pragma("GCC unroll 6") for (int t = 0; t < TT; t++) {
            __m512bh xh = (__m512bh)_mm512_loadu_si512(xs + t * 64), xl = (__m512bh)_mm512_loadu_si512(xs + t * 64 + 32);
            _Pragma("GCC unroll 4") for (int i = 0; i < BD_ROWS; i++) {
                acc[i][t] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[i][t], wv[i], xh), wv[i], xl);
            }
        }
    }
    if (full * 32 < K) { /* K % 32 inputs left: zero-masked weights against zero-padded activations */
        __mmask32 m = (__mmask32)((1u << (K - full * 32)) - 1);
        __m512bh wv[BD_ROWS];
        _Pragma("GCC unroll 4") for (int i = 0; i < BD_ROWS; i++)
            wv[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, wp[i] + (size_t)full * 32);
        _Pragma("GCC unroll 6") for (int t = 0; t < TT; t++) {
            __m512bh xh = (__m512bh)_mm512_loadu_si512(xs + t * 64), xl = (__m512bh)_mm512_loadu_si512(xs + t * 64 + 32);
            _Pragma("GCC unroll 4") for (int i = 0; i < BD_ROWS; i++) {
                acc[i][t] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(acc[i][t], wv[i], xh), wv[i], xl);
            }
        }
    }
    const __mmask8 sm = (__mmask8)((1u << nr) - 1);
    _Pragma("GCC unroll 6") for (int t = 0; t < TT; t++)
        _mm_mask_storeu_ps(y + (size_t)t * ldy + r, sm, sm_hsum4_512(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
}

/* A tile of TT = 1..BD_T activation rows (the compile-time shapes). */
INL void tile_any(const uint16_t *W, const size_t *wrow, int nr, const uint16_t *xp, size_t xstep, int K, float *y,
                  int ldy, int r, int TT, size_t pf) {
    switch (TT) {
    case 6: tile(W, wrow, nr, xp, xstep, K, y, ldy, r, 6, pf); break;
    case 5: tile(W, wrow, nr, xp, xstep, K, y, ldy, r, 5, pf); break;
    case 4: tile(W, wrow, nr, xp, xstep, K, y, ldy, r, 4, pf); break;
    case 3: tile(W, wrow, nr, xp, xstep, K, y, ldy, r, 3, pf); break;
    case 2: tile(W, wrow, nr, xp, xstep, K, y, ldy, r, 2, pf); break;
    case 1: tile(W, wrow, nr, xp, xstep, K, y, ldy, r, 1, pf); break;
    default: break;
    }
}

/* Weight rows [r, r + 4) clamped to [.., r1): their element offsets (a short last block repeats
 * its last row) and how many are real. */
static inline int block_rows(size_t *wrow, int r, int r1, int K) {
    int nr = r1 - r < BD_ROWS ? r1 - r : BD_ROWS;
    for (int i = 0; i < BD_ROWS; i++) wrow[i] = (size_t)(r + (i < nr ? i : nr - 1)) * K;
    return nr;
}

/* Bytes of weight rows kept in L2 while every 4-row activation tile passes over them (below), and
 * the packed activations up to which the call's rows all stay in L1 instead. */
#define BD_L2_BYTES (128 * 1024)
#define BD_L1_X_BYTES (32 * 1024)
/* Up to this many activation rows (decode, verify) every call takes the single pass. */
#define BD_SMALL_T 4

/* Output rows [r0, r1) for T <= MM_TMAX activation rows packed by mm_bf16dp_pack_x into xpack.
 *
 * While the packed rows fit in L1 (T <= 4, or T·K·4 bytes <= BD_L1_X_BYTES): one pass, each 4-row
 * weight block read once from memory and met by every activation tile while it is in L1. Beyond
 * that the rows are walked in L2-sized groups of weight rows; every activation tile (in L1) passes
 * over the whole group (in L2), and the tiles' passes prefetch the next group into L2 between them
 * (each block by one tile), so the weight stream from memory runs one group ahead of the arithmetic
 * instead of one 4-row block, at an even rate (bench/zen.md "Session 7").
 * Both orders call the same tile on the same (weight block, activation tile) pairs, so each
 * output element's operation sequence is unchanged (row invariance). */
TGT void mm_rows_bf16dp(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w, int r0, int r1,
                        const void *xpack) {
    (void)x, (void)ldx;
    const int K = w->cols, ks = k_pad(K) / 32;
    const uint16_t *W = w->data, *xp = xpack;
    assert(w->dtype == DT_BF16);
    const int pf_on = kern_knobs_get()->bf16_pf;
    size_t wrow[BD_ROWS];
    if (T <= BD_SMALL_T || (size_t)T * ks * 128 <= BD_L1_X_BYTES) {
        /* the same columns of the next 4-row block, while it lies inside the matrix */
        const size_t pf_blk = pf_on ? (size_t)BD_ROWS * K * 2 : 0;
        for (int r = r0; r < r1; r += BD_ROWS) {
            int nr = block_rows(wrow, r, r1, K);
            size_t pf = r + 2 * BD_ROWS <= w->rows ? pf_blk : 0;
            for (int t = 0, tt; t < T; t += tt) {
                tt = tile_rows(T - t, ks);
                tile_any(W, wrow, nr, xp + (size_t)t * ks * 64, (size_t)tt * 64, K, y + (size_t)t * ldy, ldy, r, tt, t ? 0 : pf);
            }
        }
        return;
    }
    int grp = BD_L2_BYTES / (2 * K) / BD_ROWS * BD_ROWS;
    if (grp < BD_ROWS) grp = BD_ROWS;
    int nt = 0; /* activation tiles of the call */
    for (int t = 0, tt; t < T; t += tt) tt = tile_rows(T - t, ks), nt++;
    for (int g0 = r0; g0 < r1; g0 += grp) {
        int g1 = g0 + grp < r1 ? g0 + grp : r1;
        /* the same columns grp rows further on, while those lie inside the matrix: block q of the
         * group by tile q mod nt, so the next group streams in over all the tiles' passes instead of
         * in a burst during the first one */
        size_t pf_grp = pf_on ? (size_t)grp * K * 2 : 0;
        for (int t = 0, tt, ti = 0; t < T; t += tt, ti++) {
            tt = tile_rows(T - t, ks);
            for (int r = g0, q = 0; r < g1; r += BD_ROWS, q++) {
                int nr = block_rows(wrow, r, g1, K);
                size_t pf = q % nt == ti && r + grp + BD_ROWS <= w->rows ? pf_grp : 0;
                tile_any(W, wrow, nr, xp + (size_t)t * ks * 64, (size_t)tt * 64, K, y + (size_t)t * ldy, ldy, r, tt, pf);
            }
        }
    }
}
#endif /* __x86_64__ */
