/* matmul_qpack_avx2_tmpl.h — the packed AVX2 kernel's block loop, included twice by
 * matmul_qpack_avx2.c (and by nothing else): once with the plain AVX2 group sums, once with the
 * AVX-VNNI ones. The includer defines
 *   QA2_INL       the inline-function attributes (with the target of the instance)
 *   QA2_TGT       the target attribute of the exported function
 *   QA2_GROUP_Q4  the q4 group sums (group_q4_both's arguments)
 *   QA2_GROUP_Q8  the q8 group sums (group_q8_both's arguments)
 *   QA2_FN(name)  the instance's name for name (a suffix)
 * and this file undefines them. No include guard: that is the point. */

/* One 16-row block (its first nr rows real) × TT (1-4) activation rows from t0; BITS and NV = vectors
 * per group (q4: gs/8, q8: gs/4) compile-time after inlining. Both 8-row halves in one pass, sharing
 * each activation broadcast (the halves used to be two passes, each broadcasting again: L2-resident,
 * one thread, Zen 4, q4 +7 / +17 / +27-32 / +1-12% at 1 / 2 / 3 / 4 rows, q8 +5-12 / +5 / +4-6 / 0-6%;
 * bench/zen.md "Session 11"). */
QA2_INL void QA2_FN(block)(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, const int BITS,
                           const int NV, float *y, int ldy, int nr) {
    const int G = p->G, K = qa->K, f32 = p->sdt == DT_F32;
    int pf, pf2;
    kern_qpack_prefetch(qa->T, &pf, &pf2);
    const uint8_t *qb = p->q + (size_t)bi * G * p->gstride;
    const int8_t *ab = qa->a + (size_t)t0 * K;
    __m256 acc[2][4];
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < TT; t++) acc[h][t] = _mm256_setzero_ps();
    const uint8_t *qg = qb;
    const int8_t *ag = ab;
    for (int g = 0; g < G; g++, qg += p->gstride, ag += p->gs) {
        prefetch_group(qg, pf, pf2, NV, f32);
        __m256i is0[4], is1[4];
        if (BITS == 4) QA2_GROUP_Q4(qg, ag, (size_t)K, TT, NV, is0, is1);
        else QA2_GROUP_Q8(qg, ag, (size_t)K, TT, NV, qa->asum + (size_t)t0 * G + g, (size_t)G, is0, is1);
        epilogue(p, qg, qa, t0, g, 0, TT, is0, acc[0]);
        epilogue(p, qg, qa, t0, g, 1, TT, is1, acc[1]);
    }
    store_half(y, ldy, bi, 0, t0, TT, nr, acc[0]);
    if (nr > 8) store_half(y, ldy, bi, 1, t0, TT, nr - 8, acc[1]);
}

/* block() with TT and the vectors per group as constants (group size 32, 64 or 128). */
QA2_INL void QA2_FN(block_tt)(const kern_qpack *p, const qact *qa, int bi, int t0, const int TT, float *y, int ldy,
                              int nr) {
    if (p->bits == 4 && p->gs == 64) QA2_FN(block)(p, qa, bi, t0, TT, 4, 8, y, ldy, nr);
    else if (p->bits == 4 && p->gs == 32) QA2_FN(block)(p, qa, bi, t0, TT, 4, 4, y, ldy, nr);
    else if (p->bits == 4) QA2_FN(block)(p, qa, bi, t0, TT, 4, 16, y, ldy, nr);
    else if (p->gs == 64) QA2_FN(block)(p, qa, bi, t0, TT, 8, 16, y, ldy, nr);
    else if (p->gs == 32) QA2_FN(block)(p, qa, bi, t0, TT, 8, 8, y, ldy, nr);
    else QA2_FN(block)(p, qa, bi, t0, TT, 8, 32, y, ldy, nr);
}

/* mm_qrows_packed_avx2 / mm_qrows_packed_avxvnni (matmul_q.h): rows [r0, r1) of y for every activation
 * row, in tiles of 4 activation rows (the last one 1-3). */
QA2_TGT void QA2_FN(mm_qrows_packed)(float *y, int ldy, const qact *qa, const kern_weight *w, int r0, int r1) {
    const kern_qpack *p = w->packed;
    for (int bi = r0 / 16; bi * 16 < r1; bi++) {
        int nr = r1 - bi * 16 < 16 ? r1 - bi * 16 : 16;
        int t = 0;
        for (; t + 4 <= qa->T; t += 4) QA2_FN(block_tt)(p, qa, bi, t, 4, y, ldy, nr);
        switch (qa->T - t) {
        case 3: QA2_FN(block_tt)(p, qa, bi, t, 3, y, ldy, nr); break;
        case 2: QA2_FN(block_tt)(p, qa, bi, t, 2, y, ldy, nr); break;
        case 1: QA2_FN(block_tt)(p, qa, bi, t, 1, y, ldy, nr); break;
        default: break;
        }
    }
}

#undef QA2_INL
#undef QA2_TGT
#undef QA2_GROUP_Q4
#undef QA2_GROUP_Q8
#undef QA2_FN
