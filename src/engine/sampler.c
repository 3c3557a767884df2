/* sampler.c — logit shaping and the exact sampled distribution; see sampler.h for the order. */
#include "sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"

int sampler_params_validate(const sampler_params *sp, mtplx_err *err) {
    if (!(sp->temperature >= 0) || isinf(sp->temperature))
        return err_set(err, MTPLX_EINVAL, "temperature must be a finite number >= 0, got %g", sp->temperature);
    if (!(sp->top_p > 0 && sp->top_p <= 1))
        return err_set(err, MTPLX_EINVAL, "top_p must be in (0, 1], got %g", sp->top_p);
    if (sp->top_k < 0) return err_set(err, MTPLX_EINVAL, "top_k must be >= 0 (0 = off), got %d", sp->top_k);
    if (!(sp->min_p >= 0 && sp->min_p < 1))
        return err_set(err, MTPLX_EINVAL, "min_p must be in [0, 1), got %g", sp->min_p);
    if (!(sp->presence_penalty >= -2 && sp->presence_penalty <= 2))
        return err_set(err, MTPLX_EINVAL, "presence_penalty must be in [-2, 2], got %g", sp->presence_penalty);
    if (!(sp->frequency_penalty >= -2 && sp->frequency_penalty <= 2))
        return err_set(err, MTPLX_EINVAL, "frequency_penalty must be in [-2, 2], got %g", sp->frequency_penalty);
    if (!(sp->repetition_penalty > 0) || isinf(sp->repetition_penalty))
        return err_set(err, MTPLX_EINVAL, "repetition_penalty must be a finite number > 0, got %g",
                       sp->repetition_penalty);
    return 0;
}

int sampler_new(int vocab, sampler **out, mtplx_err *err) {
    *out = NULL;
    if (vocab <= 0) return err_set(err, MTPLX_EINVAL, "sampler: vocabulary size must be > 0, got %d", vocab);
    sampler *s = mem_zalloc(1, sizeof *s, "sampler", err);
    if (!s) return MTPLX_ENOMEM;
    s->vocab = vocab;
    s->work = mem_alloc((size_t)vocab, sizeof *s->work, "sampler logits", err);
    s->idx = mem_alloc((size_t)vocab, sizeof *s->idx, "sampler ids", err);
    s->dense = mem_zalloc((size_t)vocab, sizeof *s->dense, "sampler dense", err);
    s->counts = mem_zalloc((size_t)vocab, sizeof *s->counts, "sampler counts", err);
    s->seen = mem_zalloc((size_t)vocab, sizeof *s->seen, "sampler seen", err);
    s->seen_ids = mem_alloc((size_t)vocab, sizeof *s->seen_ids, "sampler seen ids", err);
    if (!s->work || !s->idx || !s->dense || !s->counts || !s->seen || !s->seen_ids) {
        sampler_free(s);
        return MTPLX_ENOMEM;
    }
    *out = s;
    return 0;
}

void sampler_free(sampler *s) {
    if (!s) return;
    free(s->work);
    free(s->idx);
    free(s->dense);
    free(s->counts);
    free(s->seen);
    free(s->seen_ids);
    free(s);
}

void sampler_reset(sampler *s) {
    for (int i = 0; i < s->n_seen; i++) {
        s->counts[s->seen_ids[i]] = 0;
        s->seen[s->seen_ids[i]] = 0;
    }
    s->n_seen = 0;
}

static void note(sampler *s, int32_t id, uint8_t bit) {
    if (id < 0 || id >= s->vocab) return;
    if (!s->seen[id]) s->seen_ids[s->n_seen++] = id;
    s->seen[id] |= bit;
}

void sampler_note_prompt(sampler *s, const int32_t *ids, int n) {
    for (int i = 0; i < n; i++) note(s, ids[i], 2);
}

void sampler_note_token(sampler *s, int32_t id) {
    if (id < 0 || id >= s->vocab) return;
    note(s, id, 1);
    s->counts[id]++;
}

int sampler_dist_init(sampler_dist *d, int vocab, mtplx_err *err) {
    memset(d, 0, sizeof *d);
    d->ids = mem_alloc((size_t)vocab, sizeof *d->ids, "distribution ids", err);
    d->probs = mem_alloc((size_t)vocab, sizeof *d->probs, "distribution probs", err);
    if (!d->ids || !d->probs) {
        sampler_dist_free(d);
        return MTPLX_ENOMEM;
    }
    d->cap = vocab;
    return 0;
}

void sampler_dist_free(sampler_dist *d) {
    free(d->ids);
    free(d->probs);
    memset(d, 0, sizeof *d);
}

/* "a ranks before b": larger logit first, lower id on ties. */
static inline int ranks_before(const float *v, int32_t a, int32_t b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
}

/* Min-heap (worst ranked at the root) of k ids, then heap-sort into best-first order. */
static void heap_sift(const float *v, int32_t *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && ranks_before(v, h[w], h[l])) w = l;
        if (r < n && ranks_before(v, h[w], h[r])) w = r;
        if (w == i) return;
        int32_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

#define SEL_BLOCK 16

/* The first index in v[j0..j1) holding NaN or +inf, or -1. */
static int first_bad(const float *v, int j0, int j1) {
    for (int j = j0; j < j1; j++)
        if (!(v[j] < INFINITY)) return j;
    return -1;
}

/* Writes the k (1 <= k <= n) best-ranked ids of v[0..n) into out[0..k) in rank order (ids with -inf
 * values included only if needed), in one pass that also validates: returns the first index whose
 * value is NaN or +inf (out is then undefined), else -1.
 * Why it is fast: a candidate j only enters the heap if v[j] > v[root] (j is larger than every id
 * in the heap, so a tie never ranks it before the root); a block of SEL_BLOCK values that are all
 * <= the root's value is skipped after one branch-free (vectorizable) test. */
static int select_top_k(const float *v, int n, int k, int32_t *out) {
    int bad = first_bad(v, 0, k);
    if (bad >= 0) return bad;
    for (int i = 0; i < k; i++) out[i] = i;
    for (int i = k / 2 - 1; i >= 0; i--) heap_sift(v, out, k, i);
    int j = k;
    for (; j + SEL_BLOCK <= n; j += SEL_BLOCK) {
        const float thr = v[out[0]];
        int hit = 0, nonfinite = 0;
        for (int i = 0; i < SEL_BLOCK; i++) {
            hit |= v[j + i] > thr;
            nonfinite |= !(v[j + i] < INFINITY);
        }
        if (nonfinite) return first_bad(v, j, j + SEL_BLOCK);
        if (!hit) continue;
        for (int i = j; i < j + SEL_BLOCK; i++)
            if (v[i] > v[out[0]]) {
                out[0] = i;
                heap_sift(v, out, k, 0);
            }
    }
    for (; j < n; j++) {
        if (!(v[j] < INFINITY)) return j;
        if (v[j] > v[out[0]]) {
            out[0] = j;
            heap_sift(v, out, k, 0);
        }
    }
    /* heap sort: repeatedly move the worst to the end -> best first */
    for (int end = k - 1; end > 0; end--) {
        int32_t t = out[0];
        out[0] = out[end];
        out[end] = t;
        heap_sift(v, out, end, 0);
    }
    return -1;
}

static int cmp_rank(const void *a, const void *b, void *ctx) {
    const float *v = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    if (ranks_before(v, x, y)) return -1;
    if (ranks_before(v, y, x)) return 1;
    return 0;
}

static int dist_from_cands(const float *w, int n, int argmax, int sorted, const sampler_params *sp, sampler_dist *out,
                           mtplx_err *err);

int sampler_build(sampler *s, const float *logits, const sampler_params *sp, int with_penalties,
                  sampler_dist *out, mtplx_err *err) {
    const int V = s->vocab;
    /* penalties work on a copy; without them the logits are read in place */
    const float *w = logits;
    if (with_penalties) {
        int bad = first_bad(logits, 0, V);
        if (bad >= 0) return err_set(err, MTPLX_EINVAL, "sampler: logit %d is %s", bad, isnan(logits[bad]) ? "NaN" : "+inf");
        float *pw = s->work;
        memcpy(pw, logits, sizeof(float) * (size_t)V);
        const float pres = sp->presence_penalty, freq = sp->frequency_penalty, rep = sp->repetition_penalty;
        for (int i = 0; i < s->n_seen; i++) {
            int32_t id = s->seen_ids[i];
            if (pw[id] == -INFINITY) continue;
            if (rep != 1.0f) pw[id] = pw[id] > 0 ? pw[id] / rep : pw[id] * rep;
            int c = s->counts[id];
            if (c > 0) pw[id] -= freq * (float)c + pres;
        }
        w = pw;
    }
    /* Candidates: top_k (rank order; also greedy = top 1), all ids in rank order when top_p needs
     * it, else id order. Validation of the raw logits rides along with the selection pass. */
    int n = 0, sorted = 0, argmax = -1, bad = -1;
    int32_t *cand = out->ids;
    const int greedy = sp->temperature == 0;
    if (greedy || (sp->top_k > 0 && sp->top_k < V)) {
        n = greedy ? 1 : sp->top_k;
        bad = select_top_k(w, V, n, cand);
        argmax = cand[0];
        sorted = 1;
    } else {
        bad = first_bad(w, 0, V);
        for (int j = 0; bad < 0 && j < V; j++)
            if (w[j] != -INFINITY) {
                cand[n++] = j;
                if (argmax < 0 || w[j] > w[argmax]) argmax = j;
            }
        if (argmax >= 0 && sp->top_p < 1.0f && !greedy) {
            qsort_r(cand, (size_t)n, sizeof *cand, cmp_rank, (void *)w);
            sorted = 1;
        }
    }
    if (bad >= 0) return err_set(err, MTPLX_EINVAL, "sampler: logit %d is %s", bad, isnan(w[bad]) ? "NaN" : "+inf");
    return dist_from_cands(w, n, argmax, sorted, sp, out, err);
}

/* Steps 2-5 over the n candidates out->ids[0..n) (rank order when sorted) whose logits are w[id],
 * argmax the best of them: sampler_build's shared tail, also sampler_build_top's. */
static int dist_from_cands(const float *w, int n, int argmax, int sorted, const sampler_params *sp, sampler_dist *out,
                           mtplx_err *err) {
    int32_t *cand = out->ids;
    const int greedy = sp->temperature == 0;
    if (argmax < 0 || w[argmax] == -INFINITY)
        return err_set(err, MTPLX_EINVAL, "sampler: every logit is -inf (nothing to sample)");

    if (greedy) { /* one point */
        out->n = 1;
        out->ids[0] = argmax;
        out->probs[0] = 1.0;
        return 0;
    }

    /* softmax over the candidates, in double; -inf candidates (top_k larger than the live set) drop */
    const double T = sp->temperature, mx = w[argmax];
    double *p = out->probs, sum = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (w[cand[i]] == -INFINITY) continue;
        double e = exp(((double)w[cand[i]] - mx) / T);
        if (e <= 0) continue; /* underflow: probability 0 is outside the support */
        cand[m] = cand[i];
        p[m++] = e;
        sum += e;
    }
    n = m;
    for (int i = 0; i < n; i++) p[i] /= sum;

    if (sp->top_p < 1.0f && sorted) {
        double before = 0;
        int keep = 0;
        while (keep < n && (keep == 0 || before < (double)sp->top_p)) before += p[keep++];
        n = keep;
        sum = 0;
        for (int i = 0; i < n; i++) sum += p[i];
        for (int i = 0; i < n; i++) p[i] /= sum;
    }
    if (sp->min_p > 0) {
        double pmax = 0;
        for (int i = 0; i < n; i++)
            if (p[i] > pmax) pmax = p[i];
        double thr = (double)sp->min_p * pmax;
        m = 0;
        sum = 0;
        for (int i = 0; i < n; i++)
            if (p[i] >= thr) {
                cand[m] = cand[i];
                p[m++] = p[i];
                sum += p[i];
            }
        n = m;
        for (int i = 0; i < n; i++) p[i] /= sum;
    }
    out->n = n;
    return 0;
}

int sampler_build_top(sampler *s, const int32_t *top, int k, const sampler_params *sp, sampler_dist *out,
                      mtplx_err *err) {
    const int V = s->vocab, greedy = sp->temperature == 0;
    const int n = greedy ? 1 : sp->top_k;
    if (!greedy && (sp->top_k <= 0 || sp->top_k >= V))
        return err_set(err, MTPLX_EINVAL, "sampler_build_top: top_k %d does not truncate a vocabulary of %d ids",
                       sp->top_k, V);
    if (k < n) return err_set(err, MTPLX_EINVAL, "sampler_build_top: a list of %d logits for top_k %d", k, n);
    const int32_t bad = top[2 * k];
    if (bad >= 0) {
        float f;
        memcpy(&f, &top[2 * k + 1], sizeof f);
        return err_set(err, MTPLX_EINVAL, "sampler: logit %d is %s", bad, isnan(f) ? "NaN" : "+inf");
    }
    /* the n best ids in rank order, their logits placed at their ids in s->work (only those entries
     * are read): the same candidates and values select_top_k finds in the whole row */
    for (int i = 0; i < n; i++) {
        int32_t id = top[i];
        if (id < 0 || id >= V)
            return err_set(err, MTPLX_EINVAL, "sampler_build_top: entry %d of the list is id %d (vocabulary %d)", i,
                           id, V);
        out->ids[i] = id;
        memcpy(&s->work[id], &top[k + i], sizeof(float));
    }
    return dist_from_cands(s->work, n, out->ids[0], 1, sp, out, err);
}

int sampler_top_needed(const sampler_params *sp, int with_penalties, int V) {
    if (with_penalties) return 0; /* penalties move entries below the top into it */
    if (sp->temperature == 0) return 1;
    return sp->top_k > 0 && sp->top_k < V ? sp->top_k : 0;
}

int sampler_dist_sample_index(const sampler_dist *d, double u) {
    double c = 0;
    for (int i = 0; i < d->n; i++) {
        c += d->probs[i];
        if (u < c) return i;
    }
    return d->n - 1;
}

int32_t sampler_dist_sample(const sampler_dist *d, double u) { return d->ids[sampler_dist_sample_index(d, u)]; }

double sampler_dist_prob(const sampler_dist *d, int32_t id) {
    for (int i = 0; i < d->n; i++)
        if (d->ids[i] == id) return d->probs[i];
    return 0;
}
