/* sampler.h — logits -> the exact distribution a token is drawn from, and the draw itself.
 *
 * Order (fixed, documented in docs/speculative.md):
 *   1. penalties on the raw logits, only when asked (p, never q):
 *        presence/frequency (OpenAI): l[j] -= frequency·count[j] + presence·[count[j] > 0],
 *        counts over completion tokens; repetition (CTRL/HF): for ids seen in the prompt or the
 *        completion, l > 0 ? l / r : l · r;
 *   2. temperature: l / T (T == 0: greedy argmax, lowest id on ties, a one-point distribution);
 *   3. top_k: keep the k largest (ties broken by lower id);
 *   4. top_p: softmax over what is left, walk by descending probability and keep a token while the
 *      mass before it is < top_p (the first is always kept), renormalize;
 *   5. min_p: keep tokens with prob >= min_p · max prob, renormalize;
 *   6. sample with one uniform u in [0, 1) by walking the cumulative mass.
 * The result of 1–5 is returned as a sparse distribution in double (sampler_dist): for a draft
 * this is q, for verification p, exactly the law the token is drawn from (DESIGN.md §3.2).
 *
 * Logits must be finite or -inf (-inf = excluded token); NaN or +inf is EINVAL. */
#ifndef MTPLX_ENGINE_SAMPLER_H
#define MTPLX_ENGINE_SAMPLER_H

#include <stdint.h>

#include "../base/err.h"

typedef struct {
    float temperature;        /* >= 0; 0 = greedy */
    float top_p;              /* (0, 1]; 1 = off */
    int top_k;                /* >= 0; 0 = off */
    float min_p;              /* [0, 1); 0 = off */
    float presence_penalty;   /* [-2, 2] */
    float frequency_penalty;  /* [-2, 2] */
    float repetition_penalty; /* > 0; 1 = off */
} sampler_params;

/* A distribution over token ids with a sparse support. */
typedef struct {
    int n;            /* support size (>= 1 after a successful build) */
    int cap;          /* entries allocated in ids/probs (the vocabulary size) */
    int32_t *ids;     /* [cap]: support ids (descending probability when a truncation sorted them,
                         else ascending id) */
    double *probs;    /* [cap]: probability of ids[i]; > 0, sums to 1 up to rounding */
} sampler_dist;

/* Per-generation scratch and penalty state for one vocabulary. */
typedef struct {
    int vocab;           /* V */
    float *work;         /* [V] penalised logits */
    int32_t *idx;        /* [V] candidate ids */
    double *dense;       /* [V] all zero between calls (scratch for sparse lookups) */
    int32_t *counts;     /* [V] occurrences in the completion so far */
    uint8_t *seen;       /* [V] bit 1: in completion, bit 2: in prompt */
    int32_t *seen_ids;   /* [V] ids with seen != 0, n_seen of them */
    int n_seen;
} sampler;

/* Check every field; EINVAL with a message naming the field ("top_p must be in (0, 1], got 1.5"). */
int sampler_params_validate(const sampler_params *sp, mtplx_err *err);

/* A sampler for vocabulary size V (> 0). Returns 0 or ENOMEM; free with sampler_free. */
int sampler_new(int vocab, sampler **out, mtplx_err *err);
void sampler_free(sampler *s);
/* Forget prompt and completion history (keeps buffers). */
void sampler_reset(sampler *s);
/* Record prompt ids (repetition penalty) / one completion id (all penalties). Out-of-range ids
 * are ignored (callers validate ids before). */
void sampler_note_prompt(sampler *s, const int32_t *ids, int n);
void sampler_note_token(sampler *s, int32_t id);

/* Space for a distribution over V ids. Returns 0 or ENOMEM; release with sampler_dist_free. */
int sampler_dist_init(sampler_dist *d, int vocab, mtplx_err *err);
void sampler_dist_free(sampler_dist *d);

/* Build the distribution of logits[V] under sp (penalties applied only when with_penalties).
 * Returns 0, or EINVAL for a NaN/+inf logit or when every logit is -inf. Does not allocate. */
int sampler_build(sampler *s, const float *logits, const sampler_params *sp, int with_penalties,
                  sampler_dist *out, mtplx_err *err);

/* The same distribution as sampler_build(s, row, sp, 0, out) where row holds a vocabulary's logits
 * of which `top` lists the k best-ranked (be_ops.logits_top's layout: k ids best first, -1 past the
 * last, k values as float bits, then the row's first NaN / +inf id or -1 and its value): greedy or
 * 0 < top_k < V, no penalties, k >= top_k (1 greedy). Reads nothing else, so it costs O(top_k), not
 * O(V). Uses s->work's entries at the listed ids as scratch. Returns 0 or EINVAL (sampler_build's
 * errors, or a list that cannot serve sp). */
int sampler_build_top(sampler *s, const int32_t *top, int k, const sampler_params *sp, sampler_dist *out,
                      mtplx_err *err);

/* k > 0 when sampler_build under sp (with_penalties as there) reads of a row of V logits only its k
 * best-ranked entries (larger first, lower id on ties) and the first NaN / +inf: greedy (1) or
 * top_k in (0, V) without penalties; else 0 (the whole row). A forward may then return only those
 * (fwd_request.logits_top). */
int sampler_top_needed(const sampler_params *sp, int with_penalties, int V);

/* The id that u in [0, 1) selects by the cumulative mass of d (the last id absorbs rounding). */
int32_t sampler_dist_sample(const sampler_dist *d, double u);
/* The same draw as an index into d->ids / d->probs. */
int sampler_dist_sample_index(const sampler_dist *d, double u);

/* d's probability of id (0 when outside the support). Linear in the support size. */
double sampler_dist_prob(const sampler_dist *d, int32_t id);

#endif
