/* matmul_amx.c — AMX-BF16 path of kern_matmul for dense bf16 weights (K a multiple of 32).
 *
 * One TDPBF16PS multiplies a 16×32 bf16 tile by a 32×16 bf16 tile into 16×16 fp32 accumulators in
 * about the time the AVX-512 path spends on one 16×16 block of FMAs, so a call over several
 * activation rows costs about what one row costs: the weights are read once and the tile unit is
 * never the limit. The weight is the A tile exactly as it lies in the checkpoint (16 output rows ×
 * 32 inputs, row stride K·2 bytes): nothing is repacked or copied.
 *
 * Activations are fp32; rounding them to bf16 would cost ~3 significant digits. Each row x is split
 * into x_hi = bf16(x) and x_lo = bf16(x − x_hi), which together carry ~16 mantissa bits, and both go
 * into the B tile as separate columns: column t holds x_hi of row t, column 8+t its x_lo, so one
 * tile op serves 8 activation rows; y = C[:, t] + C[:, 8+t]. bf16×bf16 products are exact in fp32,
 * so the only differences from the fp32 reference are the 2^-17 split residue and the summation
 * order (the tile unit flushes denormal inputs and outputs to zero, far below these tolerances).
 *
 * Row invariance (DESIGN.md §3): output (t, r) is C[r][t] + C[r][8+t] of one fixed sequence of tile
 * ops over k = 0, 32, 64, ...; a C element depends only on its A row and its B column, so neither T,
 * nor the other rows, nor the thread split change it. Output rows past the last full 16-row block
 * are computed by the AVX-512 path (always the same rows of a given weight). */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <assert.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "matmul_internal.h"
#include "threadpool.h"

#define TGT __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))

enum { AMX_TROWS = 8 };   /* activation rows per B tile (hi + lo columns = 16) */

/* Tile register configuration (palette 1), the layout ldtilecfg reads. */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of tile i */
    uint8_t rows[16];   /* rows of tile i */
} __attribute__((packed, aligned(64))) amx_cfg;

/* Tiles: 0..3 accumulators, 4 and 6 weights, 5 and 7 activations; all 16 rows × 64 bytes. */
static TGT void amx_configure(void) {
    amx_cfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = 16;
        c.colsb[i] = 64;
    }
    _tile_loadconfig(&c);
}

size_t mm_amx_pack_bytes(int T, int K) {
    int nb = (T + AMX_TROWS - 1) / AMX_TROWS;
    return (size_t)nb * (size_t)(K / 32) * 1024;
}

/* Round-to-nearest-even fp32 → bf16 of 16 lanes (as 16-bit halves of 32-bit lanes). */
static inline TGT __m512i bf16_round(__m512 v) {
    __m512i b = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
    return _mm512_srli_epi32(r, 16);
}

/* Write activation rows x[0..T) (K % 32 == 0) as B tiles: block b (rows 8b..8b+7), k-step s is the
 * 1 KiB tile at buf + (b·K/32 + s)·1024: 16 rows (k pairs) × 16 columns × 2 bf16, column c < 8 =
 * x_hi of row 8b+c, column 8+c = x_lo; missing rows are zero. */
TGT void mm_amx_pack_x(void *buf, const float *x, int ldx, int T, int K) {
    int ks = K / 32;
    uint32_t *out = buf;
    memset(buf, 0, mm_amx_pack_bytes(T, K));
    for (int t = 0; t < T; t++) {
        int b = t / AMX_TROWS, col = t % AMX_TROWS;
        const float *xr = x + (size_t)t * ldx;
        for (int s = 0; s < ks; s++) {
            /* 32 inputs → hi/lo bf16, interleaved as the tile's k pairs */
            uint32_t *tile = out + ((size_t)b * ks + s) * 256;
            for (int h = 0; h < 2; h++) {
                __m512 v = _mm512_loadu_ps(xr + s * 32 + h * 16);
                __m512i hi = bf16_round(v);
                __m512 hif = _mm512_castsi512_ps(_mm512_slli_epi32(hi, 16));
                __m512i lo = bf16_round(_mm512_sub_ps(v, hif));
                uint32_t hv[16], lv[16];
                _mm512_storeu_si512(hv, hi);
                _mm512_storeu_si512(lv, lo);
                for (int p = 0; p < 8; p++) { /* k pair p of this half: inputs 2p, 2p+1 */
                    int row = h * 8 + p;
                    tile[row * 16 + col] = hv[2 * p] | (hv[2 * p + 1] << 16);
                    tile[row * 16 + 8 + col] = lv[2 * p] | (lv[2 * p + 1] << 16);
                }
            }
        }
    }
}

/* Sum the hi and lo columns of accumulator tile `acc` (16 output rows × 16 floats) into y. */
static void amx_store(float *y, int ldy, int r, const float *acc, int nt) {
    for (int t = 0; t < nt; t++)
        for (int i = 0; i < 16; i++) y[(size_t)t * ldy + r + i] = acc[i * 16 + t] + acc[i * 16 + 8 + t];
}

/* The packed copy (mm_amx_pack_weight): rows in groups of 64 = up to 4 full 16-row blocks; group g,
 * k-step s, block i is the 1 KiB tile at element ((g·4·ks) + s·nblk(g) + i)·512, so a group is read
 * as one sequential stream whatever the blocking below. Rows past the last full block are not
 * packed (the AVX-512 path reads them from the checkpoint). */
static int group_blocks(int rows, int g) {
    int left = rows / 16 - 4 * g;
    return left < 4 ? left : 4;
}

size_t mm_amx_weight_elems(int rows, int cols) { return (size_t)(rows / 16) * 16 * cols; }

typedef struct {
    uint16_t *dst;
    const uint16_t *W;
    int rows, cols, n_groups;
} pack_job;

/* Groups [task·n/n_tasks, (task+1)·n/n_tasks) of the copy. */
static void pack_task(void *ctx, int task, int n_tasks) {
    const pack_job *j = ctx;
    const int ks = j->cols / 32;
    int g0 = (int)((long)j->n_groups * task / n_tasks), g1 = (int)((long)j->n_groups * (task + 1) / n_tasks);
    for (int g = g0; g < g1; g++) {
        int nblk = group_blocks(j->rows, g);
        for (int s = 0; s < ks; s++)
            for (int i = 0; i < nblk; i++) {
                uint16_t *t = j->dst + ((size_t)g * 4 * ks + (size_t)s * nblk + i) * 512;
                for (int rr = 0; rr < 16; rr++)
                    memcpy(t + rr * 32, j->W + (size_t)(g * 64 + i * 16 + rr) * j->cols + s * 32, 64);
            }
    }
}

void mm_amx_pack_weight(uint16_t *dst, const uint16_t *W, int rows, int cols) {
    pack_job j = {dst, W, rows, cols, (rows / 16 + 3) / 4};
    tpool *pool = tpool_global();
    int tasks = 4 * tpool_threads(pool);
    /* groups are independent; small matrices are not worth a dispatch */
    if ((size_t)rows * cols < (1u << 20)) tasks = 1;
    if (tasks > j.n_groups) tasks = j.n_groups;
    if (tasks <= 1) pack_task(&j, 0, 1);
    else tpool_run(pool, tasks, pack_task, &j);
}

static TGT void store_tile(int c, float *acc) {
    switch (c) {
    case 0: _tile_stored(0, acc, 64); break;
    case 1: _tile_stored(1, acc, 64); break;
    case 2: _tile_stored(2, acc, 64); break;
    default: _tile_stored(3, acc, 64); break;
    }
}

/* Store accumulators: tile i*nb + b holds row block i (rows r + 16i ...), activation block b. */
static TGT void flush(float *y, int ldy, int r, int T, int nrb, int nb) {
    float acc[256] __attribute__((aligned(64)));
    for (int i = 0; i < nrb; i++)
        for (int b = 0; b < nb; b++) {
            store_tile(i * nb + b, acc);
            int nt = T - b * AMX_TROWS < AMX_TROWS ? T - b * AMX_TROWS : AMX_TROWS;
            amx_store(y + (size_t)b * AMX_TROWS * ldy, ldy, r + 16 * i, acc, nt);
        }
}

/* Tile ids are immediates, so each blocking is spelled out. Consecutive tile ops go to different
 * accumulators and loads alternate between two tile registers, so the unit pipelines them (a load
 * into a tile still being read waits). Every accumulator sums over k = 0, 32, ... in order: the
 * blocking never changes a result. XB(b): activation block b at step s; WT(i): weight tile of block
 * i at step s in group base `gp`. */
#define XB(b) (xb + ((size_t)(b) * ks + s) * 1024)
#define WT(i) (gp + ((size_t)s * nblk + (i)) * 512)

/* Software prefetch distance of the weight stream in bytes ($MTPLX_AMX_PF, 0 = off; default 2048).
 * Tile loads from DRAM get little help from the hardware prefetchers: a 1-row 512 MB call ran at
 * 0.70-1.19x the AVX-512 path's bandwidth without it, 0.89-1.02x with it (noisy shared VM). */
static int amx_prefetch_bytes(void) { return kern_knobs_get()->amx_pf; } /* $MTPLX_AMX_PF */

/* One activation block (T <= 8): all blocks of the group at once; the B tile alternates 5/7. */
static TGT void group_nb1(const uint16_t *gp, int nblk, const unsigned char *xb, int ks) {
    const int pf = amx_prefetch_bytes();
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int s = 0; s < ks; s++) {
        if (pf) { /* the group's next tiles; the stream runs on into the next group */
            const char *p = (const char *)WT(0) + pf;
            for (int o = 0; o < nblk * 1024; o += 64) _mm_prefetch(p + o, _MM_HINT_T0);
        }
        if (s & 1) {
            _tile_loadd(7, XB(0), 64);
            _tile_loadd(4, WT(0), 64); _tile_dpbf16ps(0, 4, 7);
            if (nblk > 1) { _tile_loadd(6, WT(1), 64); _tile_dpbf16ps(1, 6, 7); }
            if (nblk > 2) { _tile_loadd(4, WT(2), 64); _tile_dpbf16ps(2, 4, 7); }
            if (nblk > 3) { _tile_loadd(6, WT(3), 64); _tile_dpbf16ps(3, 6, 7); }
        } else {
            _tile_loadd(5, XB(0), 64);
            _tile_loadd(4, WT(0), 64); _tile_dpbf16ps(0, 4, 5);
            if (nblk > 1) { _tile_loadd(6, WT(1), 64); _tile_dpbf16ps(1, 6, 5); }
            if (nblk > 2) { _tile_loadd(4, WT(2), 64); _tile_dpbf16ps(2, 4, 5); }
            if (nblk > 3) { _tile_loadd(6, WT(3), 64); _tile_dpbf16ps(3, 6, 5); }
        }
    }
}

/* Two activation blocks (T 9..16): blocks i0, i0+1 (if < nblk) of the group. */
static TGT void group_nb2(const uint16_t *gp, int nblk, int i0, const unsigned char *xb, int ks) {
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int s = 0; s < ks; s++) {
        _tile_loadd(5, XB(0), 64); _tile_loadd(7, XB(1), 64);
        _tile_loadd(4, WT(i0), 64); _tile_dpbf16ps(0, 4, 5); _tile_dpbf16ps(1, 4, 7);
        if (i0 + 1 < nblk) { _tile_loadd(6, WT(i0 + 1), 64); _tile_dpbf16ps(2, 6, 5); _tile_dpbf16ps(3, 6, 7); }
    }
}

/* 3 or 4 activation blocks (T 17..32, prefill): block i of the group. */
static TGT void group_nbn(const uint16_t *gp, int nblk, int i, int nb, const unsigned char *xb, int ks) {
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int s = 0; s < ks; s++) {
        _tile_loadd(4, WT(i), 64);
        _tile_loadd(5, XB(0), 64); _tile_dpbf16ps(0, 4, 5);
        _tile_loadd(6, XB(1), 64); _tile_dpbf16ps(1, 4, 6);
        _tile_loadd(7, XB(2), 64); _tile_dpbf16ps(2, 4, 7);
        if (nb > 3) { _tile_loadd(5, XB(3), 64); _tile_dpbf16ps(3, 4, 5); }
    }
}

/* Output rows [r0, r1) (r0 % 64 == 0) for T <= 32 activation rows packed by mm_amx_pack_x. */
TGT void mm_rows_bf16_amx(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w,
                          int r0, int r1, const void *xpack) {
    const int K = w->cols, ks = K / 32, nb = (T + AMX_TROWS - 1) / AMX_TROWS;
    const unsigned char *xb = xpack;
    assert(K % 32 == 0 && nb >= 1 && nb <= 4 && r0 % 64 == 0 && w->amx);
    int full_end = w->rows / 16 * 16;
    if (full_end > r1) full_end = r1;
    if (full_end > r0) amx_configure();
    for (int r = r0; r < full_end; r += 64) {
        int g = r / 64, nblk = group_blocks(w->rows, g);
        const uint16_t *gp = w->amx + (size_t)g * 4 * ks * 512;
        if (nb == 1) {
            group_nb1(gp, nblk, xb, ks);
            flush(y, ldy, r, T, nblk, 1);
        } else if (nb == 2) {
            for (int i0 = 0; i0 < nblk; i0 += 2) {
                group_nb2(gp, nblk, i0, xb, ks);
                flush(y, ldy, r + 16 * i0, T, i0 + 1 < nblk ? 2 : 1, 2);
            }
        } else {
            for (int i = 0; i < nblk; i++) {
                group_nbn(gp, nblk, i, nb, xb, ks);
                flush(y, ldy, r + 16 * i, T, 1, nb);
            }
        }
    }
    if (full_end < r1) mm_rows_dense_avx512(y, ldy, x, ldx, T, w, full_end > r0 ? full_end : r0, r1);
}
#endif /* __x86_64__ */
