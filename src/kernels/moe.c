/* moe.c — MoE routing and routed-expert accumulation (see moe.h). */
#include "moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"

int kern_moe_router_check(const moe_router *r, mtplx_err *err) {
    if (r->n_experts < 1 || r->n_experts > MOE_MAX_EXPERTS)
        return err_set(err, MTPLX_EINVAL, "MoE: %d experts (must be 1..%d)", r->n_experts, MOE_MAX_EXPERTS);
    if (r->top_k < 1 || r->top_k > r->n_experts || r->top_k > MOE_MAX_TOPK)
        return err_set(err, MTPLX_EINVAL, "MoE: num_experts_per_tok %d with %d experts (must be 1..%d)",
                       r->top_k, r->n_experts, r->n_experts < MOE_MAX_TOPK ? r->n_experts : MOE_MAX_TOPK);
    if (r->score != MOE_SCORE_SOFTMAX && r->score != MOE_SCORE_SIGMOID)
        return err_set(err, MTPLX_EINVAL, "MoE: unknown scoring function %d", (int)r->score);
    if (r->n_group < 1 || r->n_experts % r->n_group != 0)
        return err_set(err, MTPLX_EINVAL, "MoE: n_group %d does not divide %d experts", r->n_group, r->n_experts);
    if (r->topk_group < 1 || r->topk_group > r->n_group)
        return err_set(err, MTPLX_EINVAL, "MoE: topk_group %d with n_group %d", r->topk_group, r->n_group);
    if (r->n_group > 1 && r->n_experts / r->n_group < 2)
        return err_set(err, MTPLX_EINVAL, "MoE: grouped routing needs >= 2 experts per group (%d experts, %d groups)",
                       r->n_experts, r->n_group);
    if (r->n_group > 1 && r->top_k > (r->n_experts / r->n_group) * r->topk_group)
        return err_set(err, MTPLX_EINVAL, "MoE: top-%d experts from %d groups of %d", r->top_k,
                       r->topk_group, r->n_experts / r->n_group);
    if (!(r->scaling > 0.f) || !isfinite(r->scaling))
        return err_set(err, MTPLX_EINVAL, "MoE: routed_scaling_factor %g must be > 0", (double)r->scaling);
    return 0;
}

/* Indices of the k largest values of v[n] into out[k], largest first; ties go to the lower index.
 * `taken` is scratch of n chars. O(k·n): k and n are small (k <= 64, n <= 1024). */
static void top_k_indices(const float *v, int n, int k, int *out, unsigned char *taken) {
    memset(taken, 0, (size_t)n);
    for (int j = 0; j < k; j++) {
        int best = -1;
        for (int i = 0; i < n; i++)
            if (!taken[i] && (best < 0 || v[i] > v[best])) best = i;
        taken[best] = 1;
        out[j] = best;
    }
}

void kern_moe_route(const moe_router *r, const float *logits, int *idx, float *w, float *scratch) {
    int E = r->n_experts, K = r->top_k;
    float *score = scratch;        /* [E] weights source: softmax or sigmoid */
    float *choice = scratch + E;   /* [E] what selection ranks */
    unsigned char taken[MOE_MAX_EXPERTS];
    int sel[MOE_MAX_TOPK];

    if (r->score == MOE_SCORE_SOFTMAX) {
        float mx = logits[0];
        for (int e = 1; e < E; e++)
            if (logits[e] > mx) mx = logits[e];
        float sum = 0.f;
        for (int e = 0; e < E; e++) {
            score[e] = expf(logits[e] - mx);
            sum += score[e];
        }
        for (int e = 0; e < E; e++) score[e] /= sum;
    } else {
        for (int e = 0; e < E; e++) score[e] = 1.0f / (1.0f + expf(-logits[e]));
    }
    for (int e = 0; e < E; e++) choice[e] = score[e] + (r->correction_bias ? r->correction_bias[e] : 0.f);

    if (r->n_group > 1) {
        /* group score = sum of the group's two best biased scores; keep topk_group groups and zero
         * the rest (HF masked_fill(..., 0.0): a dropped expert ranks as 0, not as -inf). */
        int G = r->n_group, per = E / G;
        float gscore[MOE_MAX_EXPERTS];
        for (int g = 0; g < G; g++) {
            const float *c = choice + g * per;
            int b0 = 0;
            for (int i = 1; i < per; i++)
                if (c[i] > c[b0]) b0 = i;
            int b1 = b0 == 0 ? 1 : 0;
            for (int i = 0; i < per; i++)
                if (i != b0 && c[i] > c[b1]) b1 = i;
            gscore[g] = c[b0] + c[b1];
        }
        int keep[MOE_MAX_EXPERTS];
        top_k_indices(gscore, G, r->topk_group, keep, taken);
        unsigned char kept[MOE_MAX_EXPERTS];
        memset(kept, 0, (size_t)G);
        for (int j = 0; j < r->topk_group; j++) kept[keep[j]] = 1;
        for (int e = 0; e < E; e++)
            if (!kept[e / per]) choice[e] = 0.f;
    }

    top_k_indices(choice, E, K, sel, taken);

    /* ascending expert order (the accumulation order of kern_moe_experts) */
    for (int i = 1; i < K; i++)
        for (int j = i; j > 0 && sel[j - 1] > sel[j]; j--) {
            int t = sel[j];
            sel[j] = sel[j - 1];
            sel[j - 1] = t;
        }
    float sum = 0.f;
    for (int j = 0; j < K; j++) {
        idx[j] = sel[j];
        w[j] = score[sel[j]];
        sum += w[j];
    }
    if (r->norm_topk) {
        /* HF DeepSeek adds 1e-20; Qwen's softmax top-k sum is always > 0 (the best expert has p >= 1/E),
         * but a bias or group mask may pick experts whose softmax underflowed to 0: leave those at 0 */
        if (r->score == MOE_SCORE_SIGMOID) sum += 1e-20f;
        if (sum > 0)
            for (int j = 0; j < K; j++) w[j] /= sum;
    }
    if (r->scaling != 1.0f)
        for (int j = 0; j < K; j++) w[j] *= r->scaling;
}

int kern_moe_scratch_init(moe_scratch *s, int rows, int hidden, int inter, mtplx_err *err) {
    memset(s, 0, sizeof *s);
    s->rows = rows;
    s->hidden = hidden;
    s->inter = inter;
    size_t RG = rows > MOE_BATCH_ROWS ? (size_t)rows : MOE_BATCH_ROWS;
    s->brows = (int)RG;
    s->xg = mem_alloc(RG * (size_t)hidden, sizeof(float), "MoE gathered rows", err);
    s->g = mem_alloc(RG * (size_t)inter, sizeof(float), "MoE gate", err);
    s->u = mem_alloc(RG * (size_t)inter, sizeof(float), "MoE up", err);
    s->y = mem_alloc(RG * (size_t)hidden, sizeof(float), "MoE expert output", err);
    s->rows_of = mem_alloc(RG, sizeof(int), "MoE row list", err);
    s->w_of = mem_alloc(RG, sizeof(float), "MoE row weights", err);
    if (!s->xg || !s->g || !s->u || !s->y || !s->rows_of || !s->w_of) {
        kern_moe_scratch_free(s);
        return MTPLX_ENOMEM;
    }
    return 0;
}

void kern_moe_scratch_free(moe_scratch *s) {
    free(s->xg);
    free(s->g);
    free(s->u);
    free(s->y);
    free(s->rows_of);
    free(s->w_of);
    memset(s, 0, sizeof *s);
}

/* silu(g[i]) · u[i] into g, i < I. */
static void swiglu_inplace(float *g, const float *u, int I) {
    for (int i = 0; i < I; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

_Static_assert(2 * MOE_GU_BATCH <= KERN_MM_N_MAX && MOE_ROW_STEP <= KERN_MM_N_MAX, "MoE batches exceed a dispatch");

/* kern_moe_experts for a few rows (T·K <= MOE_BATCH_ROWS: a decode or verify step). The (expert, row)
 * pairs are listed in ascending order (a row routed twice to one expert counts once, its first slot,
 * as in the loop), each expert's rows gathered into a block of their own (one row: every expert reads
 * x itself, so its int8 copy is made once), then per step of MOE_ROW_STEP experts their gate / up
 * projections go to the pool as kern_matmul_each calls of MOE_GU_BATCH experts and their downs as one,
 * each over its own rows; finally each row sums its experts in ascending order. A 35B-A3B decode step
 * had ~1,000 hand-offs of ~0.6 MB matmuls, a 4-row step ~60 a layer: now 3 per 8 experts. Same row
 * functions, same order: the same bits as the per-expert loop. */
static void experts_batched(float *out, int ldo, const float *x, int ldx, int T, const moe_expert *experts,
                            const int *idx, const float *w, int K, moe_scratch *s) {
    int H = s->hidden, I = s->inter, ne = 0, used = 0;
    int key[MOE_BATCH_ROWS], slot[MOE_BATCH_ROWS], eid[MOE_BATCH_ROWS], off[MOE_BATCH_ROWS], cnt[MOE_BATCH_ROWS];
    for (int p = 0; p < T * K; p++) { /* insertion sort by (expert, row), stable: first slot first */
        int k = idx[p] * T + p / K, q = used++;
        for (; q > 0 && key[q - 1] > k; q--) key[q] = key[q - 1], slot[q] = slot[q - 1];
        key[q] = k, slot[q] = p;
    }
    int n = 0;
    for (int q = 0; q < used; q++) {
        if (q && key[q] == key[q - 1]) continue; /* the same expert twice for one row */
        int e = key[q] / T, t = key[q] % T;
        if (!ne || eid[ne - 1] != e) eid[ne] = e, off[ne] = n, cnt[ne] = 0, ne++;
        s->rows_of[n] = t;
        s->w_of[n] = w[slot[q]];
        if (T > 1) memcpy(s->xg + (size_t)n * H, x + (size_t)t * ldx, sizeof(float) * (size_t)H);
        cnt[ne - 1]++, n++;
    }
    for (int i0 = 0; i0 < ne; i0 += MOE_ROW_STEP) {
        int ni = ne - i0 < MOE_ROW_STEP ? ne - i0 : MOE_ROW_STEP;
        for (int b0 = i0; b0 < i0 + ni; b0 += MOE_GU_BATCH) {
            int nb = i0 + ni - b0 < MOE_GU_BATCH ? i0 + ni - b0 : MOE_GU_BATCH;
            kern_mm_out gu[2 * MOE_GU_BATCH];
            const float *xs[2 * MOE_GU_BATCH];
            int lds[2 * MOE_GU_BATCH], ts[2 * MOE_GU_BATCH];
            for (int i = b0; i < b0 + nb; i++) {
                const moe_expert *ex = &experts[eid[i]];
                int k = 2 * (i - b0);
                gu[k] = (kern_mm_out){s->g + (size_t)off[i] * I, I, &ex->gate};
                gu[k + 1] = (kern_mm_out){s->u + (size_t)off[i] * I, I, &ex->up};
                xs[k] = xs[k + 1] = T > 1 ? s->xg + (size_t)off[i] * H : x;
                lds[k] = lds[k + 1] = T > 1 ? H : ldx, ts[k] = ts[k + 1] = cnt[i];
            }
            kern_matmul_each(gu, 2 * nb, xs, lds, ts);
        }
        kern_mm_out dn[MOE_ROW_STEP];
        const float *hs[MOE_ROW_STEP];
        int lds[MOE_ROW_STEP], ts[MOE_ROW_STEP];
        for (int i = i0; i < i0 + ni; i++) {
            const moe_expert *ex = &experts[eid[i]];
            for (int r = off[i]; r < off[i] + cnt[i]; r++)
                swiglu_inplace(s->g + (size_t)r * I, s->u + (size_t)r * I, ex->gate.rows);
            dn[i - i0] = (kern_mm_out){s->y + (size_t)off[i] * H, H, &ex->down};
            hs[i - i0] = s->g + (size_t)off[i] * I, lds[i - i0] = I, ts[i - i0] = cnt[i];
        }
        kern_matmul_each(dn, ni, hs, lds, ts);
    }
    for (int t = 0; t < T; t++) memset(out + (size_t)t * ldo, 0, sizeof(float) * (size_t)H);
    for (int r = 0; r < n; r++) { /* experts ascending, each one's rows: every row sums in expert order */
        float *o = out + (size_t)s->rows_of[r] * ldo;
        const float *y = s->y + (size_t)r * H;
        float wr = s->w_of[r];
        for (int h = 0; h < H; h++) o[h] += wr * y[h];
    }
}

void kern_moe_experts(float *out, int ldo, const float *x, int ldx, int T, const moe_expert *experts,
                      int E, const int *idx, const float *w, int K, moe_scratch *s) {
    int H = s->hidden;
    if ((long)T * K <= MOE_BATCH_ROWS) { /* s->brows >= MOE_BATCH_ROWS */
        experts_batched(out, ldo, x, ldx, T, experts, idx, w, K, s);
        return;
    }
    for (int t = 0; t < T; t++) memset(out + (size_t)t * ldo, 0, sizeof(float) * (size_t)H);
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < K; j++)
                if (idx[t * K + j] == e) {
                    s->rows_of[n] = t;
                    s->w_of[n] = w[t * K + j];
                    memcpy(s->xg + (size_t)n * H, x + (size_t)t * ldx, sizeof(float) * (size_t)H);
                    n++;
                    break;
                }
        if (n == 0) continue;
        const moe_expert *ex = &experts[e];
        int I = ex->gate.rows;
        kern_mm_out gu[2] = {{s->g, s->inter, &ex->gate}, {s->u, s->inter, &ex->up}};
        kern_matmul_n(gu, 2, s->xg, H, n); /* one hand-off and one activation pass for both */
        for (int r = 0; r < n; r++) swiglu_inplace(s->g + (size_t)r * s->inter, s->u + (size_t)r * s->inter, I);
        kern_matmul(s->y, H, s->g, s->inter, n, &ex->down);
        for (int r = 0; r < n; r++) {
            float *o = out + (size_t)s->rows_of[r] * ldo;
            const float *y = s->y + (size_t)r * H;
            float wr = s->w_of[r];
            for (int h = 0; h < H; h++) o[h] += wr * y[h];
        }
    }
}
