/* matmul_qpack_avx2.c — quantized matmul on repacked weights (kern_qpack, matmul_q.h) with AVX2 only
 * (no VNNI: AVX2-only CPUs, and AVX-512 CPUs without VNNI).
 *
 * Why the repacked layout: with the MLX layout every (row, activation row, 32 weights) needs its own
 * multiply, widening add, convert, scale multiply and FMA (matmul_q_avx2.c), so an AVX2 core is
 * compute-bound at a fraction of the memory bandwidth. In the repacked layout one 32-byte half of a
 * 64-byte vector holds 4 consecutive inputs of 8 output rows, so one broadcast activation quad feeds 8
 * rows per vpmaddubsw, the integer sums run over a whole group, and the float work is per (group, 8
 * rows). A 16-row block's vector holds two 8-row halves (rows 0-7: bytes 0-31, rows 8-15: bytes 32-63),
 * taken in one pass per group so each activation broadcast serves both and the weights stream in order.
 *
 * Integer group sums (exact, so they equal the VNNI kernel's vpdpbusd sums):
 *   q4: the nibbles (0..15) are vpmaddubsw's unsigned operand, the activations (-127..127) its signed
 *       one: an int16 pair sum is at most 2·15·127 = 3810 in magnitude (no saturation), the low- and
 *       high-nibble products of one vector add to at most 7620, and 4 vectors to at most 30480 <
 *       32767, so (for a 1-row tile) 4 vectors accumulate in int16 (vpaddw, never wrapping) before
 *       one vpmaddwd widens them to int32.
 *   q8: q (0..255) times a would saturate vpmaddubsw (2·255·127 > 32767), so the weight is taken as
 *       w' = q - 128 (xor 0x80, -128..127) and multiplied as |w'| (unsigned, <= 128) times
 *       sign(a, w') (vpsignb: -127..127): pair sums at most 2·128·127 = 32512, exact; vpmaddwd widens
 *       per vector; then Σ q·a = Σ w'·a + 128·Σ a, with Σ a per group from the activation fill
 *       (qa->asum).
 * The float epilogue per lane is the VNNI kernel's (matmul_qpack.c qp_epilogue): acc += (cvt(is)·s)·d
 * then += b·bd, in that order, so this path gives the same bits as the AVX-512 packed path, and like
 * it every output depends only on its own row and activation row (row- and split-invariant).
 *
 * CPUs with AVX-VNNI but no AVX-512 (Intel Alder Lake and later client cores, Sierra Forest) have
 * vpdpbusd on ymm: one instruction for the u8 × s8 products, their pair and quad sums and the int32
 * add. mm_qrows_packed_avxvnni forms the same group sums with it (q4: nibbles × activations; q8: q
 * itself × activations, 4·255·127 per lane and step, no offset or Σ a term), so it too gives the same
 * bits. Both kernels are one body (matmul_qpack_avx2_tmpl.h) compiled twice: the VNNI one needs its
 * own target attribute, and a function may only inline code whose target it has. */
#if defined(__x86_64__) /* x86-64 only; other targets compile this file empty */
#include <immintrin.h>
#include <string.h>

#include "matmul_q.h"

#define TGT __attribute__((target("avx2,fma,f16c")))
#define INL static inline __attribute__((always_inline)) TGT
#define TGTV __attribute__((target("avx2,fma,f16c,avxvnni")))
#define INLV static inline __attribute__((always_inline)) TGTV

/* The vector and row loops are unrolled in full (group size and tile rows are compile-time after
 * inlining) so the chains stay in registers; sanitizer builds skip the forced unrolling to keep their
 * compile time short (as matmul_qpack.c does). */
#if defined(__SANITIZE_ADDRESS__)
#define QA2_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define QA2_SANITIZED 1
#endif
#endif
#define QA2_B4_ROWS 1 /* activation rows up to which q4 sums 4 vectors in int16 (group_q4_both) */

#ifdef QA2_SANITIZED
#define UNROLL(n)
#else
#define UNROLL_STR(x) #x
#define UNROLL(n) _Pragma(UNROLL_STR(GCC unroll n))
#endif

/* The 4 activation bytes at a, broadcast to every 32-bit lane (one vpbroadcastd from memory). */
INL __m256i bcast4(const int8_t *a) {
    int32_t v;
    memcpy(&v, a, 4);
    return _mm256_set1_epi32(v);
}

/* 8 scales (or biases) of half h of a (block, group) record as f32; bf16 / f16 widen exactly. */
INL __m256 ld_sb8(const uint8_t *p, mtplx_dtype sdt, int h) {
    if (sdt == DT_F32) return _mm256_loadu_ps((const float *)p + 8 * h);
    __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * h));
    if (sdt == DT_F16) return _mm256_cvtph_ps(v);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16));
}

/* Prefetch one group record ($MTPLX_QPACK_PF / $MTPLX_QPACK_PF2 bytes ahead, as the VNNI kernel):
 * its `lines` lines of weights, then the scales and biases (one line, two when f32). */
INL void prefetch_group(const uint8_t *qg, int pf, int pf2, int lines, int f32) {
    if (pf) {
        UNROLL(33) for (int o = 0; o <= lines; o++) _mm_prefetch((const char *)qg + pf + 64 * o, _MM_HINT_T0);
        if (f32) _mm_prefetch((const char *)qg + pf + 64 * (lines + 1), _MM_HINT_T0);
    }
    if (pf2) {
        UNROLL(33) for (int o = 0; o <= lines; o++) _mm_prefetch((const char *)qg + pf2 + 64 * o, _MM_HINT_T1);
        if (f32) _mm_prefetch((const char *)qg + pf2 + 64 * (lines + 1), _MM_HINT_T1);
    }
}

/* acc[t] += (cvt(is[t])·s)·d[t,g] + b·bd[t,g] for half h of the record at qg (the VNNI order). */
INL void epilogue(const kern_qpack *p, const uint8_t *qg, const qact *qa, int t0, int g, int h, const int TT,
                  const __m256i *is, __m256 *acc) {
    const uint8_t *sb = qg + p->gbytes;
    __m256 s = ld_sb8(sb, p->sdt, h), b = ld_sb8(sb + (p->sdt == DT_F32 ? 64 : 32), p->sdt, h);
    UNROLL(4) for (int t = 0; t < TT; t++) {
        size_t dg = (size_t)(t0 + t) * p->G + g;
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(is[t]), s);
        acc[t] = _mm256_fmadd_ps(f, _mm256_set1_ps(qa->d[dg]), acc[t]);
        acc[t] = _mm256_fmadd_ps(b, _mm256_set1_ps(qa->bd[dg]), acc[t]);
    }
}

/* The 64-byte q4 vector at v: low nibbles (a) and high nibbles (b) of its rows 0-7 half (a0, b0) and
 * its rows 8-15 half (a1, b1); lo = 0x0f in every byte. */
INL void q4_unpack(const uint8_t *v, __m256i lo, __m256i *a0, __m256i *b0, __m256i *a1, __m256i *b1) {
    __m256i v0 = _mm256_loadu_si256((const __m256i *)v), v1 = _mm256_loadu_si256((const __m256i *)(v + 32));
    *a0 = _mm256_and_si256(v0, lo), *b0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), lo);
    *a1 = _mm256_and_si256(v1, lo), *b1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), lo);
}

/* Exact int32 group sums of both 8-row halves of a 16-row block (is0: rows 0-7, is1: rows 8-15) for TT
 * (1-4) activation rows, q4 with HALF = gs/8 vectors: vector j's low nibbles are inputs 4j..4j+3, its
 * high nibbles 4(j+HALF)..; ag = the group's inputs. Each activation quad is broadcast once for both
 * halves (the 64-byte vector's two 32-byte halves are separate operands). The int16 pair sums of B
 * consecutive vectors (B = 4 for one row; 1 from 2 rows on, where the int16 chains cost more in
 * register pressure than the saved vpmaddwd) are added before one vpmaddwd widens them. */
INL void group_q4_both(const uint8_t *qg, const int8_t *ag, size_t K, const int TT, const int HALF, __m256i *is0,
                       __m256i *is1) {
    const __m256i lo = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const int B = TT <= QA2_B4_ROWS ? 4 : 1;
    UNROLL(16) for (int jb = 0; jb < HALF; jb += B) {
        __m256i s0[4], s1[4];
        UNROLL(4) for (int j = jb; j < jb + B; j++) {
            __m256i a0, b0, a1, b1;
            q4_unpack(qg + (size_t)j * 64, lo, &a0, &b0, &a1, &b1);
            UNROLL(4) for (int t = 0; t < TT; t++) {
                const int8_t *at = ag + (size_t)t * K;
                __m256i x = bcast4(at + 4 * j), z = bcast4(at + 4 * (j + HALF));
                __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(a0, x), _mm256_maddubs_epi16(b0, z));
                __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(a1, x), _mm256_maddubs_epi16(b1, z));
                s0[t] = j == jb ? p0 : _mm256_add_epi16(s0[t], p0); /* |.| <= 4 · 7620 = 30480 */
                s1[t] = j == jb ? p1 : _mm256_add_epi16(s1[t], p1);
            }
        }
        UNROLL(4) for (int t = 0; t < TT; t++) {
            __m256i w0 = _mm256_madd_epi16(s0[t], ones), w1 = _mm256_madd_epi16(s1[t], ones);
            is0[t] = jb == 0 ? w0 : _mm256_add_epi32(is0[t], w0);
            is1[t] = jb == 0 ? w1 : _mm256_add_epi32(is1[t], w1);
        }
    }
}

/* The same for q8 with QV = gs/4 vectors (vector j: inputs 4j..4j+3); asum[t] = Σ a over the group. */
INL void group_q8_both(const uint8_t *qg, const int8_t *ag, size_t K, const int TT, const int QV, const int32_t *asum,
                       size_t G, __m256i *is0, __m256i *is1) {
    const __m256i bias = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    UNROLL(32) for (int j = 0; j < QV; j++) {
        __m256i ws0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(qg + (size_t)j * 64)), bias);
        __m256i ws1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(qg + (size_t)j * 64 + 32)), bias);
        __m256i wa0 = _mm256_abs_epi8(ws0), wa1 = _mm256_abs_epi8(ws1); /* |q - 128|: -128 is 0x80 = 128 unsigned */
        UNROLL(4) for (int t = 0; t < TT; t++) {
            __m256i x = bcast4(ag + (size_t)t * K + 4 * j);
            __m256i s0 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa0, _mm256_sign_epi8(x, ws0)), ones);
            __m256i s1 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa1, _mm256_sign_epi8(x, ws1)), ones);
            is0[t] = j == 0 ? s0 : _mm256_add_epi32(is0[t], s0);
            is1[t] = j == 0 ? s1 : _mm256_add_epi32(is1[t], s1);
        }
    }
    UNROLL(4) for (int t = 0; t < TT; t++) {
        __m256i a7 = _mm256_slli_epi32(_mm256_set1_epi32(asum[(size_t)t * G]), 7);
        is0[t] = _mm256_add_epi32(is0[t], a7), is1[t] = _mm256_add_epi32(is1[t], a7);
    }
}

/* Store the first nr (of 8) rows of half h of block bi for TT activation rows. */
INL void store_half(float *y, int ldy, int bi, int h, int t0, const int TT, int nr, const __m256 *acc) {
    for (int t = 0; t < TT; t++) {
        float *yt = y + (size_t)(t0 + t) * ldy + (size_t)bi * 16 + 8 * h;
        if (nr >= 8) {
            _mm256_storeu_ps(yt, acc[t]);
        } else {
            float tmp[8];
            _mm256_storeu_ps(tmp, acc[t]);
            memcpy(yt, tmp, sizeof(float) * (size_t)nr);
        }
    }
}

/* AVX-VNNI forms of group_q4_both / group_q8_both: the same exact int32 group sums (same arguments;
 * asum and G unused). One row keeps the low and high nibbles' products in separate chains (four
 * vpdpbusd chains instead of two: each vpdpbusd waits 5 cycles for the one before it in its chain);
 * from 2 rows on the rows give 4-8 chains, and 16 ymm registers leave no room to split them further. */
INLV void group_q4_vnni(const uint8_t *qg, const int8_t *ag, size_t K, const int TT, const int HALF, __m256i *is0,
                        __m256i *is1) {
    const __m256i lo = _mm256_set1_epi8(0x0f);
    __m256i h0 = _mm256_setzero_si256(), h1 = _mm256_setzero_si256();
    UNROLL(4) for (int t = 0; t < TT; t++) is0[t] = is1[t] = _mm256_setzero_si256();
    UNROLL(16) for (int j = 0; j < HALF; j++) {
        __m256i a0, b0, a1, b1;
        q4_unpack(qg + (size_t)j * 64, lo, &a0, &b0, &a1, &b1);
        UNROLL(4) for (int t = 0; t < TT; t++) {
            const int8_t *at = ag + (size_t)t * K;
            __m256i x = bcast4(at + 4 * j), z = bcast4(at + 4 * (j + HALF));
            is0[t] = _mm256_dpbusd_avx_epi32(is0[t], a0, x);
            is1[t] = _mm256_dpbusd_avx_epi32(is1[t], a1, x);
            if (TT == 1) {
                h0 = _mm256_dpbusd_avx_epi32(h0, b0, z);
                h1 = _mm256_dpbusd_avx_epi32(h1, b1, z);
            } else {
                is0[t] = _mm256_dpbusd_avx_epi32(is0[t], b0, z);
                is1[t] = _mm256_dpbusd_avx_epi32(is1[t], b1, z);
            }
        }
    }
    if (TT == 1) is0[0] = _mm256_add_epi32(is0[0], h0), is1[0] = _mm256_add_epi32(is1[0], h1);
}

INLV void group_q8_vnni(const uint8_t *qg, const int8_t *ag, size_t K, const int TT, const int QV, const int32_t *asum,
                        size_t G, __m256i *is0, __m256i *is1) {
    (void)asum, (void)G;
    UNROLL(4) for (int t = 0; t < TT; t++) is0[t] = is1[t] = _mm256_setzero_si256();
    UNROLL(32) for (int j = 0; j < QV; j++) {
        __m256i w0 = _mm256_loadu_si256((const __m256i *)(qg + (size_t)j * 64));
        __m256i w1 = _mm256_loadu_si256((const __m256i *)(qg + (size_t)j * 64 + 32));
        UNROLL(4) for (int t = 0; t < TT; t++) {
            __m256i x = bcast4(ag + (size_t)t * K + 4 * j);
            is0[t] = _mm256_dpbusd_avx_epi32(is0[t], w0, x);
            is1[t] = _mm256_dpbusd_avx_epi32(is1[t], w1, x);
        }
    }
}

/* The kernel body twice: plain AVX2, then AVX-VNNI. */
#define QA2_INL INL
#define QA2_TGT TGT
#define QA2_GROUP_Q4 group_q4_both
#define QA2_GROUP_Q8 group_q8_both
#define QA2_FN(name) name##_avx2
#include "matmul_qpack_avx2_tmpl.h"

#define QA2_INL INLV
#define QA2_TGT TGTV
#define QA2_GROUP_Q4 group_q4_vnni
#define QA2_GROUP_Q8 group_q8_vnni
#define QA2_FN(name) name##_avxvnni
#include "matmul_qpack_avx2_tmpl.h"
#endif /* __x86_64__ */
