/* matmul_qpack.c — quantized matmul on repacked weights: 16 output rows per zmm (AVX-512 VNNI).
 * (CPUs with AVX2 but no VNNI read the same copy with matmul_qpack_avx2.c.)
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
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#include <emmintrin.h>
#endif

#include "cpu.h"
#include "matmul_internal.h"
#include "matmul_q.h"
#include "threadpool.h"

#define QP_HUGE ((size_t)2 << 20) /* transparent huge page size on x86-64 */

#define QP_SLAB ((size_t)64 << 20) /* bytes of one slab that small copies are carved from */

struct kern_pack_set {
    kern_qpack **p;     /* quantized copies [n] */
    int n, cap;
    unsigned char **slab; /* [n_slab] QP_SLAB-byte blocks holding the copies under QP_HUGE bytes */
    int n_slab, cap_slab;
    size_t slab_used;     /* bytes carved from the last slab */
    uint16_t **amx;     /* bf16 AMX copies [n_amx] */
    int n_amx, cap_amx;
    size_t bytes;
};

typedef struct {
    const kern_weight *w;
    kern_qpack *p;
} pack_job;

/* Raw 16-bit scale/bias number i (bf16 or f16 storage). */
static uint16_t raw16(const void *base, size_t i) { return ((const uint16_t *)base)[i]; }

/* One row's q4 group (gs inputs: source byte b holds input 2b in its low nibble, 2b + 1 in its high)
 * into its lanes of the packed record: byte e of lane word jq (at dst + 64·jq) takes input 4jq + e in
 * its low nibble and input 4(jq + gs/8) + e in its high one. With A, B the source's first and second
 * halves, the word for jq is [A0 lo | B0 lo<<4, A0 hi | B0 hi, A1 lo | B1 lo<<4, A1 hi | B1 hi] for
 * A0 A1 = A[2jq], A[2jq + 1] (B likewise): two nibble merges of the halves, then their bytes
 * interleaved (SSE2 on x86-64: ~20x the byte loop it replaced, which made the pack most of a MoE
 * checkpoint's load). */
static void pack_q4_row(uint8_t *dst, const uint8_t *src, int gs) {
    const int hb = gs / 4; /* bytes of each half */
#if defined(__x86_64__)
    const __m128i lo = _mm_set1_epi8(0x0f), hi = _mm_set1_epi8((char)0xf0);
    for (int c = 0; c < hb; c += 16) { /* 8 lane words a step (gs 32: the low half only) */
        __m128i a = hb >= 16 ? _mm_loadu_si128((const __m128i *)(src + c)) : _mm_loadl_epi64((const __m128i *)src);
        __m128i b = hb >= 16 ? _mm_loadu_si128((const __m128i *)(src + hb + c))
                             : _mm_loadl_epi64((const __m128i *)(src + hb));
        __m128i w0 = _mm_or_si128(_mm_and_si128(a, lo), _mm_slli_epi16(_mm_and_si128(b, lo), 4));
        __m128i w1 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), lo), _mm_and_si128(b, hi));
        uint32_t o[8];
        _mm_storeu_si128((__m128i *)o, _mm_unpacklo_epi8(w0, w1));
        _mm_storeu_si128((__m128i *)(o + 4), _mm_unpackhi_epi8(w0, w1));
        for (int k = 0; k < 8 && c / 2 + k < gs / 8; k++) memcpy(dst + (size_t)(c / 2 + k) * 64, &o[k], 4);
    }
#else
    for (int jq = 0; jq < gs / 8; jq++) {
        const uint8_t *a = src + 2 * jq, *b = src + hb + 2 * jq;
        uint8_t *d = dst + (size_t)jq * 64;
        d[0] = (uint8_t)((a[0] & 15) | (b[0] & 15) << 4), d[1] = (uint8_t)((a[0] >> 4) | (b[0] & 0xf0));
        d[2] = (uint8_t)((a[1] & 15) | (b[1] & 15) << 4), d[3] = (uint8_t)((a[1] >> 4) | (b[1] & 0xf0));
    }
#endif
}

/* Pack 16-row blocks [task·nb/n_tasks, (task+1)·nb/n_tasks) of j->w into j->p, writing every byte
 * of those blocks (the caller does not clear the copy: its first touch happens here, on all
 * threads). Each row's group is unpacked once into bytes, then interleaved. */
static void pack_task(void *ctx, int task, int n_tasks) {
    const pack_job *j = ctx;
    const kern_weight *w = j->w;
    kern_qpack *p = j->p;
    const int N = w->rows, gs = p->gs, G = p->G, nb = p->n_blocks;
    const size_t row_words = (size_t)w->cols * w->bits / 32;
    int b0 = (int)((long)nb * task / n_tasks), b1 = (int)((long)nb * (task + 1) / n_tasks);
    for (int bi = b0; bi < b1; bi++) {
        uint8_t *blk = p->q + (size_t)bi * G * p->gstride;
        if (bi * 16 + 16 > N) memset(blk, 0, (size_t)G * p->gstride); /* rows past N stay zero */
        /* row by row, each row's groups in order: the source is read as one sequential stream (group
         * by group over 16 rows was 16 streams of 32-byte steps: ~0.7 GB/s, latency-bound) while the
         * block's records (G · gstride bytes) stay in cache */
        for (int i = 0; i < 16 && bi * 16 + i < N; i++) {
            int r = bi * 16 + i;
            const uint32_t *qrow = (const uint32_t *)w->data + (size_t)r * row_words;
#if defined(__x86_64__)
            /* the row 4 ahead (the pack is latency-bound on a cold source: a task is only ~64 rows) */
            if (r + 4 < N)
                for (size_t o = 0; o < row_words * 4; o += 64) _mm_prefetch((const char *)(qrow + 4 * row_words) + o, _MM_HINT_T0);
#endif
            for (int g = 0; g < G; g++) {
                uint8_t *dst = blk + (size_t)g * p->gstride;
                uint8_t *sb = dst + p->gbytes; /* 16 scales then 16 biases */
                size_t gi = (size_t)r * G + g;
                if (p->sdt == DT_F32) {
                    float sv = q_scalar(w->scales, DT_F32, gi), bv = q_scalar(w->biases, DT_F32, gi);
                    memcpy(sb + 4 * i, &sv, 4), memcpy(sb + 64 + 4 * i, &bv, 4);
                } else {
                    uint16_t sv = raw16(w->scales, gi), bv = raw16(w->biases, gi);
                    memcpy(sb + 2 * i, &sv, 2), memcpy(sb + 32 + 2 * i, &bv, 2);
                }
                const uint32_t *qr = qrow + (size_t)g * gs * w->bits / 32;
                if (w->bits == 8) { /* input 4kq+e is byte e of word kq (little-endian) */
                    for (int kq = 0; kq < gs / 4; kq++) memcpy(dst + kq * 64 + i * 4, qr + kq, 4);
                } else {
                    pack_q4_row(dst + i * 4, (const uint8_t *)qr, gs);
                }
            }
        }
    }
}

/* The copy's geometry for w (no memory yet). */
static void pack_geometry(const kern_weight *w, kern_qpack *p) {
    const int N = w->rows, K = w->cols, gs = w->group_size;
    memset(p, 0, sizeof *p);
    p->n_blocks = (N + 15) / 16, p->G = K / gs, p->gs = gs, p->bits = w->bits;
    p->sdt = w->scale_dtype == DT_F32 ? DT_F32 : w->scale_dtype == DT_F16 ? DT_F16 : DT_BF16;
    p->gbytes = (size_t)gs * 16 * w->bits / 8;
    p->gstride = p->gbytes + (p->sdt == DT_F32 ? 128 : 64);
    p->bytes = (size_t)p->n_blocks * p->G * p->gstride;
}

/* Whether kern_pack_set_add repacks this quantized weight on this CPU. */
static int pack_applies(const kern_weight *w) {
    if (w->dtype != DT_U32 || !quant_format_ok(w->bits, w->group_size) || w->cols % 64 || w->cols % w->group_size)
        return 0;
    return kern_qpack_available();
}

int kern_qpack_available(void) {
    return kern_knobs_get()->qpack && !KERN_ISA_IS_NEON(cpu_best_isa()) && cpu_best_isa() >= KERN_ISA_AVX2;
}

size_t kern_qpack_bytes(const kern_weight *w) {
    if (!pack_applies(w)) return 0;
    kern_qpack p;
    pack_geometry(w, &p);
    return p.bytes;
}

void kern_qpack_fill(const kern_weight *w, void *mem) {
    kern_qpack p;
    pack_geometry(w, &p);
    p.q = mem;
    pack_job j = {w, &p};
    tpool *pool = tpool_global();
    int tasks = 4 * tpool_threads(pool);
    tpool_run(pool, p.n_blocks < tasks ? p.n_blocks : tasks, pack_task, &j); /* blocks are independent */
}

static void release_free(void *q, size_t bytes) { (void)bytes, free(q); }

static void release_none(void *q, size_t bytes) { (void)q, (void)bytes; } /* slab memory: freed with the set */

/* n bytes of 2 MiB-aligned memory marked for transparent huge pages (before the first touch: the
 * decode streams every byte once per token, and 4 KiB pages cost a TLB miss and, at load, a page
 * fault each 4 KiB), or NULL. */
static void *huge_alloc(size_t n) {
    void *q = aligned_alloc(QP_HUGE, (n + QP_HUGE - 1) & ~(QP_HUGE - 1));
#if defined(MADV_HUGEPAGE) && !defined(QP_NO_THP)
    if (q) (void)madvise(q, (n + QP_HUGE - 1) & ~(QP_HUGE - 1), MADV_HUGEPAGE); /* advisory */
#endif
    return q;
}

/* 64-byte-aligned room for a copy of n < QP_HUGE bytes in set's slabs (a new slab when the last one
 * is full), or NULL. The many small matrices of a MoE checkpoint (30,720 experts' projections of
 * ~0.6 MB in a 35B-A3B) would otherwise each be a heap block of 4 KiB pages: 3.5 M page faults and
 * TLB misses on every decode. */
static void *slab_carve(kern_pack_set *set, size_t n) {
    n = (n + 63) & ~(size_t)63;
    if (!set->n_slab || set->slab_used + n > QP_SLAB) {
        if (set->n_slab == set->cap_slab) {
            int cap = set->cap_slab ? 2 * set->cap_slab : 16;
            unsigned char **ns = realloc(set->slab, sizeof *ns * (size_t)cap);
            if (!ns) return NULL;
            set->slab = ns, set->cap_slab = cap;
        }
        if (!(set->slab[set->n_slab] = huge_alloc(QP_SLAB))) return NULL;
        set->n_slab++;
        set->slab_used = 0;
    }
    void *q = set->slab[set->n_slab - 1] + set->slab_used;
    set->slab_used += n;
    return q;
}

/* The packed copy of w: big copies on memory of their own, small ones carved from set's slabs. */
static kern_qpack *pack_build(kern_pack_set *set, const kern_weight *w) {
    kern_qpack *p = malloc(sizeof *p);
    if (!p) return NULL;
    pack_geometry(w, p);
    int small = p->bytes < QP_HUGE;
    p->q = small ? slab_carve(set, p->bytes) : huge_alloc(p->bytes);
    if (!p->q) {
        free(p);
        return NULL;
    }
    p->release = small ? release_none : release_free;
    kern_qpack_fill(w, p->q);
    return p;
}

/* Room for one more quantized copy in *setp (created on first use). */
static int set_reserve(kern_pack_set **setp, mtplx_err *err) {
    kern_pack_set *set = *setp;
    if (!set && !(set = *setp = calloc(1, sizeof *set)))
        return err_set(err, MTPLX_ENOMEM, "packing quantized weights: out of memory");
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 64;
        kern_qpack **np = realloc(set->p, sizeof *np * (size_t)cap);
        if (!np) return err_set(err, MTPLX_ENOMEM, "packing quantized weights: out of memory");
        set->p = np, set->cap = cap;
    }
    return 0;
}

int kern_pack_set_adopt(kern_pack_set **setp, kern_weight *w, void *mem, size_t bytes,
                        void (*release)(void *mem, size_t bytes), mtplx_err *err) {
    if (!pack_applies(w) || kern_qpack_bytes(w) != bytes || ((uintptr_t)mem & 63))
        return err_set(err, MTPLX_EINVAL, "adopting a packed copy of a %dx%d weight: wrong format or size", w->rows, w->cols);
    kern_qpack *p = malloc(sizeof *p);
    if (!p || set_reserve(setp, err)) {
        free(p);
        return err_set(err, MTPLX_ENOMEM, "packing quantized weights: out of memory");
    }
    pack_geometry(w, p);
    p->q = mem;
    p->release = release;
    (*setp)->p[(*setp)->n++] = p;
    (*setp)->bytes += p->bytes;
    w->packed = p;
    return 0;
}

/* The AMX-BF16 copy of a bf16 weight (see kern_pack_set_add). */
static int pack_add_amx(kern_pack_set **setp, kern_weight *w, mtplx_err *err) {
    if (w->amx || w->cols % 32 || w->rows < 16 || cpu_isa() != KERN_ISA_AMX) return 0;
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
    if (!kern_knobs_get()->qpack) return 0; /* $MTPLX_QPACK=0 */
    if (w->dtype == DT_BF16) return pack_add_amx(setp, w, err);
    if (w->packed || !pack_applies(w)) return 0;
    int rc = set_reserve(setp, err);
    if (rc) return rc;
    kern_pack_set *set = *setp;
    kern_qpack *p = pack_build(set, w);
    if (!p) return err_set(err, MTPLX_ENOMEM, "packing a %dx%d quantized weight: out of memory", w->rows, w->cols);
    set->p[set->n++] = p;
    set->bytes += p->bytes;
    w->packed = p;
    return 0;
}

void kern_pack_set_free(kern_pack_set *set) {
    if (!set) return;
    for (int i = 0; i < set->n; i++) {
        set->p[i]->release(set->p[i]->q, set->p[i]->bytes);
        free(set->p[i]);
    }
    free(set->p);
    for (int i = 0; i < set->n_amx; i++) free(set->amx[i]);
    free(set->amx);
    for (int i = 0; i < set->n_slab; i++) free(set->slab[i]);
    free(set->slab);
    free(set);
}

size_t kern_pack_set_bytes(const kern_pack_set *set) { return set ? set->bytes : 0; }

void kern_qpack_prefetch(int T, int *pf, int *pf2) {
    const kern_knobs *k = kern_knobs_get();
    int quiet = T == 1 && cpu_get_features()->amd; /* measured: bench/zen.md "Session 5" */
    *pf = k->qpack_pf >= 0 ? k->qpack_pf : quiet ? 0 : 4096;
    *pf2 = k->qpack_pf2 >= 0 ? k->qpack_pf2 : quiet ? 0 : 16384;
}

/* ---- the x86-64 kernels (AArch64 and other targets never pack: kern_pack_set_add) ---- */
#if defined(__x86_64__)
#include <immintrin.h>

/* Sanitizer builds (ASan: the unit tests' asan build, the fuzz build) compile the VNNI blocks with
 * the group size as a run-time value and without forced unrolling: the same source, far less code.
 * Fully unrolled, one instance per group size, clang took over 7 minutes on this file under
 * ASan + UBSan + coverage (34 s without the unrolling). */
#if defined(__SANITIZE_ADDRESS__)
#define QP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QP_SANITIZED 1
#endif
#endif
#ifdef QP_SANITIZED
#define QP_UNROLL(n)
#else
#define QP_STR(x) #x
#define QP_UNROLL(n) _Pragma(QP_STR(GCC unroll n))
#endif

#define TGT __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT

INL __m512i bcast_quad(const int8_t *a) {
    int32_t v;
    memcpy(&v, a, 4);
    return _mm512_set1_epi32(v);
}

/* acc += the 16 lanes' 4-byte dot products of w (unsigned) with the activation quad at a (signed),
 * broadcast: vpdpbusd with an embedded {1to16} memory operand, one fused load+op (GCC 12 does not
 * fold _mm512_set1_epi32 of a load into it, and issued a separate vpbroadcastd per vpdpbusd).
 * Sanitizer builds keep the intrinsic so the load is checked. */
INL __m512i dp_quad(__m512i acc, __m512i w, const int8_t *a) {
#ifdef QP_SANITIZED
    return _mm512_dpbusd_epi32(acc, w, bcast_quad(a));
#else
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(const int32_t *)a));
    return acc;
#endif
}

/* A weight vector loaded once into a register: without the empty asm GCC folds the load into each of
 * the two ANDs (low / high nibbles) that use it, two vector-load slots instead of one, and on Zen 5
 * the loop is bound by those slots (two per cycle; broadcast operands take them too). */
INL __m512i ld_vec(const uint8_t *p) {
    __m512i v = _mm512_load_si512(p);
#ifndef QP_SANITIZED
    __asm__("" : "+v"(v));
#endif
    return v;
}

/* acc += vpdpbusd(w, activation quad q at a, broadcast) for calls of several rows: quads 0-3 of every
 * 8 come from one 16-byte broadcast load (vbroadcasti32x4, shared by the 4 quads) and an in-lane
 * vpshufd, the others are broadcast operands. vpshufd issues 4 per cycle on Zen 5 while vector loads
 * (broadcast operands included) issue 2, and from 2 rows on those broadcasts were most of the loads.
 * The same dword reaches every lane either way: the same integer sums. */
INL __m512i dp_quad_mix(__m512i acc, __m512i w, const int8_t *a, const int q) {
    if ((q & 7) >= 4) return dp_quad(acc, w, a + 4 * q);
    __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(a + 4 * (q & ~3))));
    switch (q & 3) {
    case 0: b = _mm512_shuffle_epi32(b, (_MM_PERM_ENUM)0x00); break;
    case 1: b = _mm512_shuffle_epi32(b, (_MM_PERM_ENUM)0x55); break;
    case 2: b = _mm512_shuffle_epi32(b, (_MM_PERM_ENUM)0xaa); break;
    default: b = _mm512_shuffle_epi32(b, (_MM_PERM_ENUM)0xff); break;
    }
    return _mm512_dpbusd_epi32(acc, w, b);
}

/* 16 scales (or biases) of a (block, group) as f32; bf16/f16 widen exactly. */
INL __m512 ld_sb16(const uint8_t *p, mtplx_dtype sdt) {
    if (sdt == DT_F32) return _mm512_load_ps(p);
    __m256i h = _mm256_load_si256((const __m256i *)p);
    if (sdt == DT_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* The float part for one (block, group): acc[t] += (cvt(is[t])·s)·d[t,g] + b·bd[t,g], in this order.
 * Shared by the VNNI and AMX kernels so both give the same bits. */
INL void qp_epilogue(const kern_qpack *p, const uint8_t *qg, const qact *qa, int t0, int g, const int TT,
                     const __m512i *is, __m512 *acc) {
    const uint8_t *sb = qg + p->gbytes;
    __m512 s = ld_sb16(sb, p->sdt), b = ld_sb16(sb + (p->sdt == DT_F32 ? 64 : 32), p->sdt);
    QP_UNROLL(16) for (int t = 0; t < TT; t++) {
        size_t dg = (size_t)(t0 + t) * p->G + g;
        __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(is[t]), s);
        acc[t] = _mm512_fmadd_ps(f, _mm512_set1_ps(qa->d[dg]), acc[t]);
        acc[t] = _mm512_fmadd_ps(b, _mm512_set1_ps(qa->bd[dg]), acc[t]);
    }
}

/* Store the 16-row block bi of activation rows t0..t0+TT-1 (the first nr of its 16 rows). Shared by
 * the VNNI and AMX kernels. */
INL void qp_store_rows(float *y, int ldy, int bi, int t0, const int TT, int nr, const __m512 *acc) {
    __mmask16 m = nr >= 16 ? 0xffff : (__mmask16)((1u << nr) - 1);
    QP_UNROLL(16) for (int t = 0; t < TT; t++)
        _mm512_mask_storeu_ps(y + (size_t)(t0 + t) * ldy + (size_t)bi * 16, m, acc[t]);
}

/* Software prefetch of the packed weight stream (the blocks of a task are one contiguous stream):
 * each group prefetches its own lines twice, into L1 $MTPLX_QPACK_PF bytes ahead (default 4096) and
 * into L2 $MTPLX_QPACK_PF2 bytes ahead (default 16384); 0 turns either off. The far L2 prefetch
 * keeps more lines in flight than the L1 fill buffers allow and crosses the 4 KiB pages the
 * hardware streamer stops at. Interleaved in one process on 20 q4 12352x2048 matrices (idle VM,
 * Intel Xeon, bench/kernels.md): 1 thread 1-row 9.72 -> 8.67 ms and 2-row/1-row 1.10 -> 1.00; 2
 * threads 1-row 10.4/9.1/10.9 -> 8.5/8.1/9.3 ms. On an AMD Zen 5 the same prefetches slow a 1-row
 * call from DRAM (one core: ~70% of the plain read rate with them, ~90-100% without), while 4-row
 * calls still gain: kern_qpack_prefetch's defaults (bench/zen.md "Session 5"). */

/* Prefetch one group record: its `lines` lines of weights, then the line of scales and biases (two
 * lines when they are f32). */
INL void qp_prefetch_group(const kern_qpack *p, const uint8_t *qg, int pf, int pf2, const int lines) {
    const int f32 = p->sdt == DT_F32;
    /* one base pointer per distance, the lines at constant offsets from it (base + displacement;
     * without the empty asm GCC kept every pf + 64·o in a register of its own, parked in xmm
     * registers and moved back per prefetch: two instructions per line) */
    if (pf) {
        const char *a = (const char *)qg + pf;
#ifndef QP_SANITIZED
        __asm__("" : "+r"(a));
#endif
        QP_UNROLL(17) for (int o = 0; o <= lines; o++) _mm_prefetch(a + 64 * o, _MM_HINT_T0);
        if (f32) _mm_prefetch(a + 64 * (lines + 1), _MM_HINT_T0);
    }
    if (pf2) {
        const char *a = (const char *)qg + pf2;
#ifndef QP_SANITIZED
        __asm__("" : "+r"(a));
#endif
        QP_UNROLL(17) for (int o = 0; o <= lines; o++) _mm_prefetch(a + 64 * o, _MM_HINT_T1);
        if (f32) _mm_prefetch(a + 64 * (lines + 1), _MM_HINT_T1);
    }
}

/* q4 block: 16 rows × TT activation rows from t0, HALF = gs/8 weight vectors per group, both
 * compile-time after inlining so the group is one straight run of code (a run-time group loop made
 * GCC rotate the chain accumulators through register copies and spill, ~1.5× the instructions).
 * Chains: vector j feeds chains (j & 1)·2 + {0: low nibbles, 1: high nibbles} of each row (NC = 4)
 * or just {0, 1} (NC = 2, from 3 rows, to stay in registers). MIX (compile-time): from 2 rows, half
 * the activation quads by dp_quad_mix's shuffles (faster where the vector loads are the bound: Zen 5)
 * instead of broadcast operands only (faster where 512-bit ops are split in two and the shuffles take
 * the vpdpbusd's slots: Zen 4, cpu_features.zmm_halves; bench/zen.md "Session 11"). Same sums. */
INL void qp_block_q4(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, const int HALF, const int MIX,
                     float *y, int ldy, int nr) {
    const int G = p->G, K = qa->K, NC = TT <= 2 ? 4 : 2;
    int pf, pf2;
    kern_qpack_prefetch(qa->T, &pf, &pf2);
    const size_t gstride = p->gstride;
    __m512 acc[8];
    QP_UNROLL(8) for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *qg = p->q + (size_t)bi * G * gstride;
    const int8_t *ag = qa->a + (size_t)t0 * K;
    const __m512i lo = _mm512_set1_epi8(0x0f), hi = _mm512_set1_epi8((char)0xf0);
    for (int g = 0; g < G; g++, qg += gstride, ag += 8 * HALF) {
        qp_prefetch_group(p, qg, pf, pf2, HALF);
        __m512i is[8][4];
        QP_UNROLL(8) for (int t = 0; t < TT; t++)
            QP_UNROLL(4) for (int c = 0; c < NC; c++) is[t][c] = _mm512_setzero_si512();
        QP_UNROLL(16) for (int j = 0; j < HALF; j++) {
            const int c = NC == 4 ? 2 * (j & 1) : 0;
            __m512i v = ld_vec(qg + (size_t)j * 64);
            __m512i w0 = _mm512_and_si512(v, lo), w1 = _mm512_and_si512(v, hi);
            QP_UNROLL(8) for (int t = 0; t < TT; t++) {
                const int8_t *at = ag + (size_t)t * K;
                if (TT >= 2 && MIX) { /* 1 row: memory-bound, the broadcast operands suffice */
                    is[t][c] = dp_quad_mix(is[t][c], w0, at, j);
                    is[t][c + 1] = dp_quad_mix(is[t][c + 1], w1, at, j + HALF);
                    continue;
                }
                is[t][c] = dp_quad(is[t][c], w0, at + 4 * j);
                is[t][c + 1] = dp_quad(is[t][c + 1], w1, at + 4 * (j + HALF));
            }
        }
        __m512i sum[8];
        QP_UNROLL(8) for (int t = 0; t < TT; t++) {
            __m512i l = is[t][0], h = is[t][1];
            if (NC == 4) l = _mm512_add_epi32(l, is[t][2]), h = _mm512_add_epi32(h, is[t][3]);
            sum[t] = _mm512_add_epi32(l, _mm512_srai_epi32(h, 4));
        }
        qp_epilogue(p, qg, qa, t0, g, TT, sum, acc);
    }
    qp_store_rows(y, ldy, bi, t0, TT, nr, acc);
}

/* Two q4 blocks (rows 16·bi .. 16·bi + 31) × TT (<= 4) activation rows from t0: each activation quad is
 * broadcast once into a register and feeds both blocks' vpdpbusd, where qp_block_q4 broadcasts it for
 * every block (a memory operand or a shuffle per vpdpbusd). In L2 on a Zen 5 core a q4 call of 8 / 16 /
 * 64 rows ran at 57% of the vpdpbusd peak in 8-row single blocks (their 16 chains plus 8 float sums
 * spill) and 72% here (bench/qpack_micro.c; bench/zen.md "Session 26"). Chains per (block, row): low
 * and high nibbles; the same integer sums and the same epilogue per block as qp_block_q4, so the same
 * bits. */
INL void qp_pair_q4(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, const int HALF, float *y,
                    int ldy, int nr0, int nr1) {
    const int G = p->G, K = qa->K;
    int pf, pf2;
    kern_qpack_prefetch(qa->T, &pf, &pf2);
    const size_t gstride = p->gstride;
    __m512 acc0[4], acc1[4];
    QP_UNROLL(4) for (int t = 0; t < TT; t++) acc0[t] = acc1[t] = _mm512_setzero_ps();
    const uint8_t *qg = p->q + (size_t)bi * G * gstride, *qh = qg + (size_t)G * gstride;
    const int8_t *ag = qa->a + (size_t)t0 * K;
    const __m512i lo = _mm512_set1_epi8(0x0f), hi = _mm512_set1_epi8((char)0xf0);
    for (int g = 0; g < G; g++, qg += gstride, qh += gstride, ag += 8 * HALF) {
        qp_prefetch_group(p, qg, pf, pf2, HALF);
        qp_prefetch_group(p, qh, pf, pf2, HALF);
        __m512i is0[4][2], is1[4][2];
        QP_UNROLL(4) for (int t = 0; t < TT; t++) is0[t][0] = is0[t][1] = is1[t][0] = is1[t][1] = _mm512_setzero_si512();
        QP_UNROLL(16) for (int j = 0; j < HALF; j++) {
            __m512i v = ld_vec(qg + (size_t)j * 64), u = ld_vec(qh + (size_t)j * 64);
            __m512i v0 = _mm512_and_si512(v, lo), v1 = _mm512_and_si512(v, hi);
            __m512i u0 = _mm512_and_si512(u, lo), u1 = _mm512_and_si512(u, hi);
            QP_UNROLL(4) for (int t = 0; t < TT; t++) {
                const int8_t *at = ag + (size_t)t * K;
                __m512i b0 = bcast_quad(at + 4 * j), b1 = bcast_quad(at + 4 * (j + HALF));
                is0[t][0] = _mm512_dpbusd_epi32(is0[t][0], v0, b0);
                is1[t][0] = _mm512_dpbusd_epi32(is1[t][0], u0, b0);
                is0[t][1] = _mm512_dpbusd_epi32(is0[t][1], v1, b1);
                is1[t][1] = _mm512_dpbusd_epi32(is1[t][1], u1, b1);
            }
        }
        __m512i s0[4], s1[4];
        QP_UNROLL(4) for (int t = 0; t < TT; t++) {
            s0[t] = _mm512_add_epi32(is0[t][0], _mm512_srai_epi32(is0[t][1], 4));
            s1[t] = _mm512_add_epi32(is1[t][0], _mm512_srai_epi32(is1[t][1], 4));
        }
        qp_epilogue(p, qg, qa, t0, g, TT, s0, acc0);
        qp_epilogue(p, qh, qa, t0, g, TT, s1, acc1);
    }
    qp_store_rows(y, ldy, bi, t0, TT, nr0, acc0);
    qp_store_rows(y, ldy, bi + 1, t0, TT, nr1, acc1);
}

/* All activation rows through the block pair bi, bi + 1 (the second holding nr1 of its rows): 4-row
 * tiles, then the 1-3 rows left. */
INL void qp_pair_rows(const kern_qpack *p, const qact *qa, int bi, int nr1, float *y, int ldy) {
#ifdef QP_SANITIZED
#define QP_PAIR(TT) qp_pair_q4(p, qa, bi, t, TT, p->gs / 8, y, ldy, 16, nr1)
#else
#define QP_PAIR(TT)                                                                                                    \
    (p->gs == 64 ? qp_pair_q4(p, qa, bi, t, TT, 8, y, ldy, 16, nr1)                                                   \
     : p->gs == 32 ? qp_pair_q4(p, qa, bi, t, TT, 4, y, ldy, 16, nr1)                                                 \
                   : qp_pair_q4(p, qa, bi, t, TT, 16, y, ldy, 16, nr1))
#endif
    int t = 0;
    for (; t + 4 <= qa->T; t += 4) QP_PAIR(4);
    switch (qa->T - t) {
    case 3: QP_PAIR(3); break;
    case 2: QP_PAIR(2); break;
    case 1: QP_PAIR(1); break;
    default: break;
    }
#undef QP_PAIR
}

/* q8 block: 16 rows × TT activation rows from t0, QV = gs/4 weight vectors per group (compile-time,
 * as for q4); vector j feeds chain j % NC of each row. MIX as for q4: from 2 rows, half the quads by
 * dp_quad_mix's shuffles, or (MIX 0: Zen 4's 8-row tiles, qp_mix) broadcast operands only. Same sums. */
INL void qp_block_q8(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, const int QV, const int MIX,
                     float *y, int ldy, int nr) {
    const int G = p->G, K = qa->K, NC = TT <= 2 ? 4 : 2;
    int pf, pf2;
    kern_qpack_prefetch(qa->T, &pf, &pf2);
    const size_t gstride = p->gstride;
    __m512 acc[8];
    QP_UNROLL(8) for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *qg = p->q + (size_t)bi * G * gstride;
    const int8_t *ag = qa->a + (size_t)t0 * K;
    for (int g = 0; g < G; g++, qg += gstride, ag += 4 * QV) {
        qp_prefetch_group(p, qg, pf, pf2, QV);
        __m512i is[8][4];
        QP_UNROLL(8) for (int t = 0; t < TT; t++)
            QP_UNROLL(4) for (int c = 0; c < NC; c++) is[t][c] = _mm512_setzero_si512();
        QP_UNROLL(32) for (int j = 0; j < QV; j++) {
            __m512i w0 = _mm512_load_si512(qg + (size_t)j * 64);
            QP_UNROLL(8) for (int t = 0; t < TT; t++) {
                if (TT >= 2 && MIX) {
                    is[t][j % NC] = dp_quad_mix(is[t][j % NC], w0, ag + (size_t)t * K, j);
                    continue;
                }
                is[t][j % NC] = dp_quad(is[t][j % NC], w0, ag + (size_t)t * K + 4 * j);
            }
        }
        __m512i sum[8];
        QP_UNROLL(8) for (int t = 0; t < TT; t++) {
            __m512i a = _mm512_add_epi32(is[t][0], is[t][1]);
            if (NC == 4) a = _mm512_add_epi32(a, _mm512_add_epi32(is[t][2], is[t][3]));
            sum[t] = a;
        }
        qp_epilogue(p, qg, qa, t0, g, TT, sum, acc);
    }
    qp_store_rows(y, ldy, bi, t0, TT, nr, acc);
}

/* One 16-row block × TT activation rows starting at t0 (VNNI). The integer group sums run in
 * independent chains per activation row (vpdpbusd has a 4-5 cycle latency; one chain per row made
 * the 1-row call latency-bound) and are added at the end of the group — integer sums are exact, so
 * the chain count does not change any result. q4 high nibbles are used in place (byte & 0xf0 =
 * 16·q) and their sum shifted right by 4 (exact), saving a shift per vector. The group size is 32,
 * 64 or 128 (kern_pack_set_add packs only quant_format_ok formats). */
INL void qp_block(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, int mix, float *y, int ldy,
                  int nr) {
#ifdef QP_SANITIZED
    if (p->bits == 8) qp_block_q8(p, qa, bi, t0, TT, p->gs / 4, mix, y, ldy, nr);
    else qp_block_q4(p, qa, bi, t0, TT, p->gs / 8, mix, y, ldy, nr);
#else
/* the instance of block kernel FN for p's group size (N32 / N64 / N128 vectors a group) and MIX M */
#define QP_GS(FN, N32, N64, N128, M)                                                                                   \
    (p->gs == 64   ? FN(p, qa, bi, t0, TT, N64, M, y, ldy, nr)                                                        \
     : p->gs == 32 ? FN(p, qa, bi, t0, TT, N32, M, y, ldy, nr)                                                        \
                   : FN(p, qa, bi, t0, TT, N128, M, y, ldy, nr))
    const int m = TT >= 2 && mix; /* 1 row never mixes: one instance serves both */
    if (p->bits == 8) m ? QP_GS(qp_block_q8, 8, 16, 32, 1) : QP_GS(qp_block_q8, 8, 16, 32, 0);
    else m ? QP_GS(qp_block_q4, 4, 8, 16, 1) : QP_GS(qp_block_q4, 4, 8, 16, 0);
#undef QP_GS
#endif
}

/* Whether a TT-row tile of p takes half its activation quads by dp_quad_mix's shuffles: $MTPLX_QPACK_MIX
 * when set, else yes unless 512-bit operations run as two halves (Zen 4: bench/zen.md "Session 11") —
 * where q8 tiles of 2..7 rows still gain from them (in L2 on one thread, 4-6 rows 9-13% faster with
 * the shuffles, 8 rows 8% slower: bench/zen.md "Session 49"). Same integer sums either way. */
static inline int qp_mix(const kern_qpack *p, int TT, int knob, int halves) {
    if (knob >= 0) return knob;
    return !halves || (p->bits == 8 && TT < 8);
}

TGT void mm_qrows_packed(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {
    const kern_qpack *p = w->packed;
    const int knob = kern_knobs_get()->qpack_mix, halves = cpu_get_features()->zmm_halves;
    /* from 6 rows: at 5 (a depth-4 verify) one 4-row pair tile plus a 1-row pair ran 5% slower in L2
     * and 5-12% slower in bench-2b's 5-row forward than 5-row single blocks; at 4 level */
    const int pair = p->bits == 4 && qa->T >= 6 && kern_knobs_get()->qpack_pair;
    for (int bi = r0 / 16; bi * 16 < r1; bi++) {
        int nr = r1 - bi * 16 < 16 ? r1 - bi * 16 : 16;
        if (pair && nr == 16 && (bi + 1) * 16 < r1) { /* a whole block and some of the next */
            qp_pair_rows(p, qa, bi, r1 - (bi + 1) * 16 < 16 ? r1 - (bi + 1) * 16 : 16, y, ldy);
            bi++;
            continue;
        }
        int t = 0;
        for (; t + 8 <= qa->T; t += 8) qp_block(p, qa, bi, t, 8, qp_mix(p, 8, knob, halves), y, ldy, nr);
        switch (qa->T - t) {
        case 7: qp_block(p, qa, bi, t, 7, qp_mix(p, 7, knob, halves), y, ldy, nr); break;
        case 6: qp_block(p, qa, bi, t, 6, qp_mix(p, 6, knob, halves), y, ldy, nr); break;
        case 5: qp_block(p, qa, bi, t, 5, qp_mix(p, 5, knob, halves), y, ldy, nr); break;
        case 4: qp_block(p, qa, bi, t, 4, qp_mix(p, 4, knob, halves), y, ldy, nr); break;
        case 3: qp_block(p, qa, bi, t, 3, qp_mix(p, 3, knob, halves), y, ldy, nr); break;
        case 2: qp_block(p, qa, bi, t, 2, qp_mix(p, 2, knob, halves), y, ldy, nr); break;
        case 1: qp_block(p, qa, bi, t, 1, qp_mix(p, 1, knob, halves), y, ldy, nr); break;
        default: break;
        }
    }
}

/* ---- AMX-INT8 ---- */

#define TGT_AMX __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))
#define INL_AMX static inline __attribute__((always_inline)) TGT_AMX

/* The 64-byte tile configuration (palette 1). */
typedef struct {
    uint8_t palette, start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;

/* AMX tile numbers: two sets (A, B, C) used alternately by consecutive groups, so one group's
 * TDPBSUD does not wait for the previous group's tile store. */
#define QA_GROUP_TILES(TA, TB, TC)                                                   \
    do {                                                                             \
        _tile_zero(TC);                                                              \
        for (int ch = 0; ch < nch; ch++) {                                           \
            _tile_loadd(TB, bsrc + (size_t)ch * kc * 16, 64);                        \
            _tile_loadd(TA, ag + (size_t)ch * kc, K);                                \
            _tile_dpbsud(TC, TA, TB);                                                \
        }                                                                            \
    } while (0)

enum { QA_RING = 8, QA_LAG = 4 }; /* buffer ring depth; distance between the pipeline stages */

/* One 16-row block × TT (<= 16) activation rows from t0 (tiles configured for TT rows). Per group g:
 * C = Σ_chunks A[TT][kc] (signed activations) · B[kc/4][16·4] (unsigned weights in the packed VNNI
 * layout: one 64-byte row = 4 inputs of the 16 output rows), so C[t][i] is the exact integer group
 * sum of output row i — the number the VNNI kernel sums — then the shared float epilogue.
 * Software-pipelined over groups: iteration i unpacks group i (q4 → ub ring), runs the TDPs of group
 * i − QA_LAG, stores the C tile of group i − QA_LAG − 1 (→ cb ring; storing a C tile right after its
 * TDP stalled until the TDP finished: 2× slower) and runs the epilogue of group i − 2·QA_LAG, so no
 * stage waits on a store it has just issued (tile loads/stores do not forward to/from vector
 * registers) and the weight loads stay spread over the whole loop. q8 is read by the tile loads in
 * place. A ring of 8 with a lag of 4 measured ~15 % faster than 4 and 2. */
INL_AMX void qa_block(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, float *y, int ldy, int nr,
                      uint8_t *ub, int32_t *cb) {
    const int G = p->G, gs = p->gs, K = qa->K, kc = gs < 64 ? gs : 64, nch = gs / kc, half = gs / 8;
    const size_t ubg = (size_t)gs * 16; /* unpacked bytes per group */
    __m512 acc[16];
    QP_UNROLL(16) for (int t = 0; t < TT; t++) acc[t] = _mm512_setzero_ps();
    const uint8_t *qb = p->q + (size_t)bi * G * p->gstride;
    const __m512i lo = _mm512_set1_epi8(0x0f);
    for (int i = 0; i < G + 2 * QA_LAG; i++) {
        if (p->bits == 4 && i < G) {
            const uint8_t *qg = qb + (size_t)i * p->gstride;
            uint8_t *u = ub + (size_t)(i % QA_RING) * ubg;
            for (int j = 0; j < half; j++) {
                __m512i v = _mm512_load_si512(qg + (size_t)j * 64);
                _mm512_store_si512(u + (size_t)j * 64, _mm512_and_si512(v, lo));
                _mm512_store_si512(u + (size_t)(j + half) * 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo));
            }
        }
        const int gt = i - QA_LAG;
        if (gt >= 0 && gt < G) {
            const uint8_t *bsrc = p->bits == 4 ? ub + (size_t)(gt % QA_RING) * ubg : qb + (size_t)gt * p->gstride;
            const int8_t *ag = qa->a + (size_t)t0 * K + (size_t)gt * gs;
            if (gt & 1) QA_GROUP_TILES(3, 4, 5);
            else QA_GROUP_TILES(0, 1, 2);
        }
        const int gst = gt - 1; /* its C tile is stored one group later, once its TDPs are done */
        if (gst >= 0 && gst < G) {
            int32_t *cg = cb + (size_t)(gst % QA_RING) * 256;
            if (gst & 1) _tile_stored(5, cg, 64);
            else _tile_stored(2, cg, 64);
        }
        const int ge = i - 2 * QA_LAG;
        if (ge >= 0) {
            __m512i is[16];
            const int32_t *cg = cb + (size_t)(ge % QA_RING) * 256;
            QP_UNROLL(16) for (int t = 0; t < TT; t++) is[t] = _mm512_load_si512(cg + 16 * t);
            qp_epilogue(p, qb + (size_t)ge * p->gstride, qa, t0, ge, TT, is, acc);
        }
    }
    qp_store_rows(y, ldy, bi, t0, TT, nr, acc);
}

#define QA_CASE(n) \
    case n: qa_block(p, qa, bi, t0, n, y, ldy, nr, ub, cb); break

TGT_AMX void mm_qrows_amx(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {
    const kern_qpack *p = w->packed;
    const int T = qa->T, kc = p->gs < 64 ? p->gs : 64;
    _Alignas(64) uint8_t ub[QA_RING * 128 * 16]; /* ring of unpacked q4 groups (gs <= 128) */
    _Alignas(64) int32_t cb[QA_RING * 256];      /* ring of C tiles [16][16] */
    for (int t0 = 0; t0 < T; t0 += 16) {
        const int TT = T - t0 < 16 ? T - t0 : 16;
        amx_cfg cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.palette = 1;
        for (int s2 = 0; s2 < 2; s2++) { /* tiles A, B, C = 0, 1, 2 and 3, 4, 5 */
            cfg.rows[3 * s2] = (uint8_t)TT, cfg.colsb[3 * s2] = (uint16_t)kc;
            cfg.rows[3 * s2 + 1] = (uint8_t)(kc / 4), cfg.colsb[3 * s2 + 1] = 64;
            cfg.rows[3 * s2 + 2] = (uint8_t)TT, cfg.colsb[3 * s2 + 2] = 64;
        }
        _tile_loadconfig(&cfg);
        for (int bi = r0 / 16; bi * 16 < r1; bi++) {
            int nr = r1 - bi * 16 < 16 ? r1 - bi * 16 : 16;
            switch (TT) {
                QA_CASE(16); QA_CASE(15); QA_CASE(14); QA_CASE(13); QA_CASE(12); QA_CASE(11); QA_CASE(10);
                QA_CASE(9); QA_CASE(8); QA_CASE(7); QA_CASE(6); QA_CASE(5); QA_CASE(4); QA_CASE(3);
                QA_CASE(2); QA_CASE(1);
            default: break;
            }
        }
    }
    _tile_release();
}
#endif /* __x86_64__ */
