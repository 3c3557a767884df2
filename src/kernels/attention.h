/* attention.h — softmax attention of one query head against a run of cached keys/values.
 *
 * The reduction order over keys is fixed (key 0 first), independent of how many query rows the
 * caller processes, so a row's output is the same in a decode step and in a prefill/verify call
 * (row invariance, DESIGN.md §3). Causality is the caller's job: it passes only the keys a query
 * may see. */
#ifndef MTPLX_KERNELS_ATTENTION_H
#define MTPLX_KERNELS_ATTENTION_H

#include <stdint.h>

/* Rows (keys or values of one head) of a paged cache: row j lives at
 * base + pages[j >> shift] · page_stride + (j mod 2^shift) · ld. A flat array is one page
 * (kern_rows_flat). Paging changes only where a row is read, never the order or the arithmetic of
 * a reduction, so a query's bits are the same over a paged and a flat copy of the same rows. */
typedef struct {
    const float *base;     /* row 0 of pool page 0 (with this head's offset inside a page) */
    const int32_t *pages;  /* pool page of each block of 2^shift rows */
    long page_stride;      /* floats from one pool page to the next */
    int shift;             /* log2 of the rows per page */
    int ld;                /* floats between consecutive rows inside a page */
} kern_rows;

static inline const float *kern_row(const kern_rows *r, int j) {
    return r->base + (long)r->pages[j >> r->shift] * r->page_stride + (long)(j & ((1 << r->shift) - 1)) * r->ld;
}

/* Rows spaced ld floats apart from base (one page of 2^30 rows). */
kern_rows kern_rows_flat(const float *base, int ld);

/* kern_attention_head_kv over paged rows: n >= 1 keys of dk floats, values of dv floats. */
void kern_attention_rows(float *out, const float *q, const kern_rows *k, int dk, const kern_rows *v, int dv, int n,
                         float scale, float *scores);

/* kern_attention_group over paged rows. */
void kern_attention_group_rows(float *const *out, const float *const *q, const int *n, int nq, const kern_rows *k,
                               int dk, const kern_rows *v, int dv, float scale, float *scores, long lds);

/* out[dh] = Σ_j softmax_j(scale · q·k_j) · v_j over keys j < n. k and v point at n rows of dh floats
 * spaced ld floats apart (a KV cache head). scores is scratch of n floats. n >= 1. */
void kern_attention_head(float *out, const float *q, const float *k, const float *v, int ld, int n,
                         int dh, float scale, float *scores);

/* The general form: key rows dk wide spaced ldk floats apart, value rows dv wide spaced ldv apart
 * (MLA has dk != dv); out[dv]. Same key order and arithmetic as kern_attention_head, which is the
 * case dk == dv, ldk == ldv. */
void kern_attention_head_kv(float *out, const float *q, const float *k, int ldk, int dk, const float *v,
                            int ldv, int dv, int n, float scale, float *scores);

/* nq queries that share one KV head (the heads of a GQA group, over the rows of a verify call):
 * query i reads q[i][dk], attends to keys [0, n[i]) and writes out[i][dv]. Each output is
 * bit-identical to kern_attention_head_kv on that query alone; the AVX-512 path takes the queries
 * in blocks of KERN_ATT_GROUP_ROWS and reads each key and value chunk once per block (key tiles):
 * 128, one prefill chunk's rows × a GQA group of 2 (docs/kernels.md "Attention"). scores is scratch
 * of min(nq, KERN_ATT_GROUP_ROWS) rows of lds >= max n[i] floats. */
#define KERN_ATT_GROUP_ROWS 128
void kern_attention_group(float *const *out, const float *const *q, const int *n, int nq, const float *k, int ldk,
                          int dk, const float *v, int ldv, int dv, float scale, float *scores, long lds);

/* The same attention in three phases, for a caller that spreads one KV head's keys (phase 1) and
 * value dims (phase 3) over threads, so a decode step over a long context reads each head once
 * with every thread instead of once per thread holding a head. Every output is bit-identical to
 * kern_attention_group_rows on the same queries (the same per-key dot products, softmax and
 * per-element value sums, on every ISA path), whatever the ranges.
 *   1. kern_attention_scores_rows: sc[i][j] = scale · q_i·k_j for keys j in [j0, j1) ∩ [0, n[i]);
 *      the key ranges of all calls must together cover [0, max n).
 *   2. kern_attention_softmax: sc[0..n) → the softmax weights, in place, once per query.
 *   3. kern_attention_wsum_rows: out_i[d - d0] = Σ_{j < n[i]} p_i[j] · v_j[d] for d in [d0, d1), keys
 *      in order (out_i holds the range only: a thread can sum into its own buffer and copy once, so
 *      threads on neighbouring ranges never write one cache line); nq <= KERN_ATT_GROUP_ROWS. */
void kern_attention_scores_rows(float *const *sc, const float *const *q, const int *n, int nq, const kern_rows *k,
                                int dk, float scale, int j0, int j1);
void kern_attention_softmax(float *scores, int n);
void kern_attention_wsum_rows(float *const *out, float *const *p, const int *n, int nq, const kern_rows *v, int d0,
                              int d1);

#endif
