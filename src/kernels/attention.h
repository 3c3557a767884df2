/* attention.h — softmax attention of one query head against a run of cached keys/values.
 *
 * The reduction order over keys is fixed (key 0 first), independent of how many query rows the
 * caller processes, so a row's output is the same in a decode step and in a prefill/verify call
 * (row invariance, DESIGN.md §3). Causality is the caller's job: it passes only the keys a query
 * may see. */
#ifndef MTPLX_KERNELS_ATTENTION_H
#define MTPLX_KERNELS_ATTENTION_H

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
 * bit-identical to kern_attention_head_kv on that query alone; the AVX-512 path reads each key and
 * value chunk once for up to 4 queries. scores is scratch of 4 rows of lds >= max n[i] floats. */
void kern_attention_group(float *const *out, const float *const *q, const int *n, int nq, const float *k, int ldk,
                          int dk, const float *v, int ldv, int dv, float scale, float *scores, long lds);

#endif
