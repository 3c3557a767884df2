/* matmul_qpack.c — quantized matmul on repacked weights: 16 output rows per zmm (AVX-512 VNNI).
 *
 * Why: with the MLX layout a dot product runs along K inside one row, so each (row, activation row,
 * 64 weights) costs a vpdpbusd, a convert, a multiply and an FMA — on a CPU with two 512-bit ports
 * that is compute-bound already at 1-2 activation rows. Repacked so that one 64-byte vector holds 4
 * consecutive inputs of 16 rows, a single broadcast activation quad feeds 16 rows per vpdpbusd, the
 * integer sums run over a whole group in int32, and the float work (convert, ×scale, ×d, bias) is
 * per (group, 16 rows), not per 64 weights per row.
 *
 * Layout per block of 16 rows (rows past N are zero): for each group g, q8: gs/4 vectors, vector kq
 * = [row i][4 inputs 4kq..4kq+3]; q4: gs/8 vectors, the low nibbles holding quad j and the high
 * nibbles quad j + gs/8. Scales and biases as f32 [block][g][16].
 *
 * Numerics per output (lane): Σ_g fma(b[g], bd[t,g], fma(cvt(Σ_{c∈g} q·a)·s[g], d[t,g], acc)) — the
 * same dequantized-weight × dequantized-activation product as matmul_q.h, in its own fixed order,
 * with no horizontal reduction; independent of T and of the split (blocks are whole). */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "matmul_internal.h"
#include "matmul_q.h"
#include "threadpool.h"

struct kern_qpack {
    int n_blocks, G, gs, bits;
    size_t gbytes;      /* bytes of one (block, group) of packed q */
    uint8_t *q;         /* [n_blocks][G][gbytes] */
    float *s, *b;       /* [n_blocks][G][16] */
};

struct kern_pack_set {
    kern_qpack **p;     /* quantized copies [n] */
    int n, cap;
    uint16_t **amx;     /* bf16 AMX copies [n_amx] */
    int n_amx, cap_amx;
    size_t bytes;
};

static int q_at(const kern_weight *w, int r, int c) {
    const uint32_t *qr = (const uint32_t *)w->data + (size_t)r * ((size_t)w->cols * w->bits / 32);
    return w->bits == 4 ? (int)((qr[c >> 3] >> (4 * (c & 7))) & 15u) : (int)((qr[c >> 2] >> (8 * (c & 3))) & 255u);
}

typedef struct {
    const kern_weight *w;
    kern_qpack *p;
} pack_job;

/* Pack 16-row blocks [task·nb/n_tasks, (task+1)·nb/n_tasks) of j->w into j->p. */
static void pack_task(void *ctx, int task, int n_tasks) {
    const pack_job *j = ctx;
    const kern_weight *w = j->w;
    kern_qpack *p = j->p;
    const int N = w->rows, gs = p->gs, G = p->G, nb = p->n_blocks;
    int b0 = (int)((long)nb * task / n_tasks), b1 = (int)((long)nb * (task + 1) / n_tasks);
    for (int bi = b0; bi < b1; bi++)
        for (int g = 0; g < G; g++) {
            uint8_t *dst = p->q + ((size_t)bi * G + g) * p->gbytes;
            float *ds = p->s + ((size_t)bi * G + g) * 16, *db = p->b + ((size_t)bi * G + g) * 16;
            for (int i = 0; i < 16; i++) {
                int r = bi * 16 + i;
                if (r >= N) {
                    ds[i] = db[i] = 0.f;
                    continue;
                }
                ds[i] = q_scalar(w->scales, w->scale_dtype, (size_t)r * G + g);
                db[i] = q_scalar(w->biases, w->scale_dtype, (size_t)r * G + g);
                int c0 = g * gs;
                if (w->bits == 8) {
                    for (int kq = 0; kq < gs / 4; kq++)
                        for (int e = 0; e < 4; e++) dst[kq * 64 + i * 4 + e] = (uint8_t)q_at(w, r, c0 + 4 * kq + e);
                } else {
                    int half = gs / 8;
                    for (int jq = 0; jq < half; jq++)
                        for (int e = 0; e < 4; e++)
                            dst[jq * 64 + i * 4 + e] = (uint8_t)(q_at(w, r, c0 + 4 * jq + e) |
                                                                 (q_at(w, r, c0 + 4 * (jq + half) + e) << 4));
                }
            }
        }
}

static kern_qpack *pack_build(const kern_weight *w) {
    const int N = w->rows, K = w->cols, gs = w->group_size, G = K / gs, nb = (N + 15) / 16;
    kern_qpack *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_blocks = nb, p->G = G, p->gs = gs, p->bits = w->bits;
    p->gbytes = (size_t)gs * 16 * w->bits / 8;
    p->q = aligned_alloc(64, (size_t)nb * G * p->gbytes);
    p->s = aligned_alloc(64, sizeof(float) * (size_t)nb * G * 16);
    p->b = aligned_alloc(64, sizeof(float) * (size_t)nb * G * 16);
    if (!p->q || !p->s || !p->b) {
        free(p->q), free(p->s), free(p->b), free(p);
        return NULL;
    }
    memset(p->q, 0, (size_t)nb * G * p->gbytes);
    pack_job j = {w, p};
    tpool *pool = tpool_global();
    int tasks = 4 * tpool_threads(pool);
    tpool_run(pool, nb < tasks ? nb : tasks, pack_task, &j); /* blocks are independent */
    return p;
}

/* The AMX-BF16 copy of a bf16 weight (see kern_pack_set_add). */
static int pack_add_amx(kern_pack_set **setp, kern_weight *w, mtplx_err *err) {
    if (w->amx || w->cols % 32 || w->rows < 16 || cpu_isa() < KERN_ISA_AMX) return 0;
    kern_pack_set *set = *setp;
    if (!set && !(set = *setp = calloc(1, sizeof *set)))
        return err_set(err, MTPLX_ENOMEM, "packing bf16 weights: out of memory");
    if (set->n_amx == set->cap_amx) {
        int cap = set->cap_amx ? set->cap_amx * 2 : 64;
        uint16_t **np = realloc(set->amx, sizeof *np * (size_t)cap);
        if (!np) return err_set(err, MTPLX_ENOMEM, "packing bf16 weights: out of memory");
        set->amx = np, set->cap_amx = cap;
    }
    size_t bytes = mm_amx_weight_elems(w->rows, w->cols) * 2;
    uint16_t *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!p) return err_set(err, MTPLX_ENOMEM, "packing a %dx%d bf16 weight: out of memory", w->rows, w->cols);
    mm_amx_pack_weight(p, w->data, w->rows, w->cols);
    set->amx[set->n_amx++] = p;
    set->bytes += bytes;
    w->amx = p;
    return 0;
}

int kern_pack_set_add(kern_pack_set **setp, kern_weight *w, mtplx_err *err) {
    const char *env = getenv("MTPLX_QPACK");
    if (env && !strcmp(env, "0")) return 0;
    if (w->dtype == DT_BF16) return pack_add_amx(setp, w, err);
    if (w->dtype != DT_U32 || w->packed || (env && !strcmp(env, "0"))) return 0;
    if (!quant_format_ok(w->bits, w->group_size) || w->cols % 64 || w->cols % w->group_size) return 0;
    if (cpu_best_isa() < KERN_ISA_AVX512 || !cpu_get_features()->avx512vnni) return 0;
    kern_pack_set *set = *setp;
    if (!set && !(set = *setp = calloc(1, sizeof *set)))
        return err_set(err, MTPLX_ENOMEM, "packing quantized weights: out of memory");
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 64;
        kern_qpack **np = realloc(set->p, sizeof *np * (size_t)cap);
        if (!np) return err_set(err, MTPLX_ENOMEM, "packing quantized weights: out of memory");
        set->p = np, set->cap = cap;
    }
    kern_qpack *p = pack_build(w);
    if (!p) return err_set(err, MTPLX_ENOMEM, "packing a %dx%d quantized weight: out of memory", w->rows, w->cols);
    set->p[set->n++] = p;
    set->bytes += (size_t)p->n_blocks * p->G * (p->gbytes + 2 * 16 * sizeof(float));
    w->packed = p;
    return 0;
}

void kern_pack_set_free(kern_pack_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) {
        free(set->p[i]->q), free(set->p[i]->s), free(set->p[i]->b);
        free(set->p[i]);
    }
    free(set->p);
    for (int i = 0; i < set->n_amx; i++) free(set->amx[i]);
    free(set->amx);
    free(set);
}

size_t kern_pack_set_bytes(const kern_pack_set *set) { return set ? set->bytes : 0; }

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL __m512i bcast_quad(const int8_t *a) {
    int32_t v;
    memcpy(&v, a, 4);
    return _mm512_set1_epi32(v);
}

/* One 16-row block × TT activation rows starting at t0. */
INL void qp_block(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, float *y, int ldy, int nr) {
    const int G = p->G, gs = p->gs, K = qa->K;
    __m512 acc[8];
    _Pragma("GCC unroll 8") for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *qb = p->q + (size_t)bi * G * p->gbytes;
    const __m512i lo = _mm512_set1_epi8(0x0f);
    for (int g = 0; g < G; g++) {
        __m512i is[8];
        _Pragma("GCC unroll 8") for (int t = 0; t < TT; t++) is[t] = _mm512_setzero_si512();
        const uint8_t *qg = qb + (size_t)g * p->gbytes;
        const int8_t *ag = qa->a + (size_t)t0 * K + (size_t)g * gs;
        if (p->bits == 4) {
            const int half = gs / 8;
            for (int j = 0; j < half; j++) {
                __m512i v = _mm512_load_si512(qg + (size_t)j * 64);
                __m512i w0 = _mm512_and_si512(v, lo), w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo);
                _Pragma("GCC unroll 8") for (int t = 0; t < TT; t++) {
                    const int8_t *at = ag + (size_t)t * K;
                    is[t] = _mm512_dpbusd_epi32(is[t], w0, bcast_quad(at + 4 * j));
                    is[t] = _mm512_dpbusd_epi32(is[t], w1, bcast_quad(at + 4 * (j + half)));
                }
            }
        } else {
            for (int kq = 0; kq < gs / 4; kq++) {
                __m512i w0 = _mm512_load_si512(qg + (size_t)kq * 64);
                _Pragma("GCC unroll 8") for (int t = 0; t < TT; t++)
                    is[t] = _mm512_dpbusd_epi32(is[t], w0, bcast_quad(ag + (size_t)t * K + 4 * kq));
            }
        }
        __m512 s = _mm512_load_ps(p->s + ((size_t)bi * G + g) * 16);
        __m512 b = _mm512_load_ps(p->b + ((size_t)bi * G + g) * 16);
        _Pragma("GCC unroll 8") for (int t = 0; t < TT; t++) {
            size_t dg = (size_t)(t0 + t) * G + g;
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(is[t]), s);
            acc[t] = _mm512_fmadd_ps(f, _mm512_set1_ps(qa->d[dg]), acc[t]);
            acc[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(qa->bd[dg]), acc[t]);
        }
    }
    __mmask16 m = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    _Pragma("GCC unroll 8") for (int t = 0; t < TT; t++)
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy + (size_t)bi * 16, m, acc[t]);
}

TGT void mm_qrows_packed(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {
    const kern_qpack *p = w->packed;
    for (int bi = r0 / 16; bi * 16 < r1; bi++) {
        int nr = r1 - bi * 16 < 16 ? r1 - bi * 16 : 16;
        int t = 0;
        for (; t + 8 <= qa->T; t += 8) qp_block(p, qa, bi, t, 8, y, ldy, nr);
        switch (qa->T - t) {
        case 7: qp_block(p, qa, bi, t, 7, y, ldy, nr); break;
        case 6: qp_block(p, qa, bi, t, 6, y, ldy, nr); break;
        case 5: qp_block(p, qa, bi, t, 5, y, ldy, nr); break;
        case 4: qp_block(p, qa, bi, t, 4, y, ldy, nr); break;
        case 3: qp_block(p, qa, bi, t, 3, y, ldy, nr); break;
        case 2: qp_block(p, qa, bi, t, 2, y, ldy, nr); break;
        case 1: qp_block(p, qa, bi, t, 1, y, ldy, nr); break;
        default: break;
        }
    }
}
