/* moe.c — MoE routing and routed-expert accumulation (see moe.h). */
#include "moe.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "act.h"       /* kern_swiglu: the SIMD SwiGLU of the dense FFN */
#include "matmul_internal.h" /* MM_TMAX: the rows a batched kern_matmul_each product takes */
#include "threadpool.h"

/* One window of a call: its experts (eid[ne], each with cnt rows gathered at off in the scratch). */
typedef struct moe_window {
    int ne, n;                                                         /* experts, gathered rows */
    int eid[MOE_MAX_EXPERTS], off[MOE_MAX_EXPERTS], cnt[MOE_MAX_EXPERTS];
} moe_window;

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
    s->order = mem_alloc((size_t)(rows > 0 ? rows : 1) * MOE_MAX_TOPK, sizeof(int), "MoE routes", err);
    s->window = mem_alloc(1, sizeof *s->window, "MoE window", err);
    if (!s->xg || !s->g || !s->u || !s->y || !s->rows_of || !s->w_of || !s->order || !s->window) {
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
    free(s->order);
    free(s->window);
    memset(s, 0, sizeof *s);
}

_Static_assert(2 * MOE_GU_BATCH <= KERN_MM_N_MAX && MOE_ROW_STEP <= KERN_MM_N_MAX, "MoE batches exceed a dispatch");

/* The slots p = t·K + j of a call's T·K routes sorted by (expert, row): a counting sort by expert
 * that visits the slots in order, so within an expert rows ascend and a row's first slot comes first.
 * order[T·K] receives the slots. */
static void pairs_sort(const int *idx, int n, int E, int *order) {
    int start[MOE_MAX_EXPERTS + 1];
    memset(start, 0, sizeof(int) * (size_t)(E + 1));
    for (int p = 0; p < n; p++) start[idx[p] + 1]++;
    for (int e = 0; e < E; e++) start[e + 1] += start[e];
    for (int p = 0; p < n; p++) order[start[idx[p]]++] = p;
}

/* The per-row work around a window's matmuls, split over the thread pool when the window is large:
 * ROWS_GATHER copies row rows_of[r] of x into row r of s->xg; ROWS_COMBINE adds w_of[r] · y[r] into
 * row rows_of[r] of out, r ascending. The combine splits the columns (two window rows may add into one
 * output row), the gather the rows; each element sees the same operations in the same order as on one
 * thread, so the bits do not depend on the split (a 512-row prefill chunk's window is ~4,000 rows of
 * 2,048 floats, copied and added while the other threads waited: bench/zen.md "Session 34"). */
enum { ROWS_GATHER, ROWS_COMBINE };
enum { ROWS_PAR_MIN = 1 << 16 }; /* floats of a window's rows from which the pool takes the work */

typedef struct {
    int what, n, H, ldo, ldx, cols; /* ROWS_*, window rows, row width, strides, columns a combine task */
    float *out;
    const float *x;
    const moe_scratch *s;
} rows_job;

static void rows_task(void *ctx, int task, int n_tasks) {
    const rows_job *j = ctx;
    const moe_scratch *s = j->s;
    if (j->what == ROWS_GATHER) {
        int r0 = (int)((long)j->n * task / n_tasks), r1 = (int)((long)j->n * (task + 1) / n_tasks);
        for (int r = r0; r < r1; r++)
            memcpy(s->xg + (size_t)r * j->H, j->x + (size_t)s->rows_of[r] * j->ldx, sizeof(float) * (size_t)j->H);
        return;
    }
    int h0 = task * j->cols, h1 = h0 + j->cols < j->H ? h0 + j->cols : j->H;
    for (int r = 0; r < j->n; r++) {
        float *o = j->out + (size_t)s->rows_of[r] * j->ldo;
        const float *y = s->y + (size_t)r * j->H;
        float wr = s->w_of[r];
        for (int h = h0; h < h1; h++) o[h] += wr * y[h];
    }
}

static void window_rows_par(int what, int n, int H, float *out, int ldo, const float *x, int ldx, const moe_scratch *s) {
    rows_job j = {what, n, H, ldo, ldx, H, out, x, s};
    tpool *pool = (size_t)n * H >= ROWS_PAR_MIN ? tpool_global() : NULL;
    int tasks = pool ? tpool_threads(pool) : 1;
    if (what == ROWS_COMBINE) { /* columns in multiples of 16 floats (a cache line) */
        j.cols = ((H + tasks - 1) / tasks + 15) & ~15;
        tasks = (H + j.cols - 1) / j.cols;
    }
    if (tasks > 1) tpool_run(pool, tasks, rows_task, &j);
    else rows_task(&j, 0, 1);
}

/* Gather the next window from the sorted slots order[*q ..): up to s->brows (expert, row) pairs, a
 * row routed twice to one expert counted once (its first slot, as in a per-expert loop). Rows go to
 * s->xg (a one-row call reads x itself, so every expert shares one quantized copy of it). An expert's
 * rows are cut into entries of at most MM_TMAX: kern_matmul_each batches products of up to that many
 * rows across the pool and sends a larger one to kern_matmul alone, weight after weight (prefill
 * chunks whose experts get more than MM_TMAX rows ran at the speed of 512-row chunks, bench/zen.md
 * "Session 33"); rows are row-invariant, so the cut keeps every bit. */
static void window_gather(moe_window *wd, const int *order, int n_slots, int *q, const float *x, int ldx, int T,
                          const int *idx, const float *w, int K, moe_scratch *s) {
    int H = s->hidden;
    wd->ne = wd->n = 0;
    for (; *q < n_slots && wd->n < s->brows; (*q)++) {
        int p = order[*q], e = idx[p], t = p / K;
        if (*q && idx[order[*q - 1]] == e && order[*q - 1] / K == t) continue;
        if (!wd->ne || wd->eid[wd->ne - 1] != e || wd->cnt[wd->ne - 1] == MM_TMAX) {
            if (wd->ne == MOE_MAX_EXPERTS) break; /* the window's entry list is full: the next one starts here */
            wd->eid[wd->ne] = e, wd->off[wd->ne] = wd->n, wd->cnt[wd->ne++] = 0;
        }
        s->rows_of[wd->n] = t;
        s->w_of[wd->n] = w[p];
        wd->cnt[wd->ne - 1]++, wd->n++;
    }
    if (T > 1) window_rows_par(ROWS_GATHER, wd->n, H, NULL, 0, x, ldx, s);
}

/* The window's experts, MOE_ROW_STEP at a time: gate / up projections as kern_matmul_each calls of
 * MOE_GU_BATCH experts, SwiGLU, the downs as one call, each product over its expert's rows. */
static void window_run(const moe_window *wd, const float *x, int ldx, int T, const moe_expert *experts, moe_scratch *s) {
    int H = s->hidden, I = s->inter;
    for (int i0 = 0; i0 < wd->ne; i0 += MOE_ROW_STEP) {
        int ni = wd->ne - i0 < MOE_ROW_STEP ? wd->ne - i0 : MOE_ROW_STEP;
        for (int b0 = i0; b0 < i0 + ni; b0 += MOE_GU_BATCH) {
            int nb = i0 + ni - b0 < MOE_GU_BATCH ? i0 + ni - b0 : MOE_GU_BATCH;
            kern_mm_out gu[2 * MOE_GU_BATCH];
            const float *xs[2 * MOE_GU_BATCH];
            int lds[2 * MOE_GU_BATCH], ts[2 * MOE_GU_BATCH];
            for (int i = b0; i < b0 + nb; i++) {
                const moe_expert *ex = &experts[wd->eid[i]];
                int k = 2 * (i - b0);
                gu[k] = (kern_mm_out){s->g + (size_t)wd->off[i] * I, I, &ex->gate};
                gu[k + 1] = (kern_mm_out){s->u + (size_t)wd->off[i] * I, I, &ex->up};
                xs[k] = xs[k + 1] = T > 1 ? s->xg + (size_t)wd->off[i] * H : x;
                lds[k] = lds[k + 1] = T > 1 ? H : ldx, ts[k] = ts[k + 1] = wd->cnt[i];
            }
            kern_matmul_each(gu, 2 * nb, xs, lds, ts);
        }
        kern_mm_out dn[MOE_ROW_STEP];
        const float *hs[MOE_ROW_STEP];
        int lds[MOE_ROW_STEP], ts[MOE_ROW_STEP];
        for (int i = i0; i < i0 + ni; i++) {
            const moe_expert *ex = &experts[wd->eid[i]];
            for (int r = wd->off[i]; r < wd->off[i] + wd->cnt[i]; r++)
                kern_swiglu(s->g + (size_t)r * I, s->g + (size_t)r * I, s->u + (size_t)r * I, ex->gate.rows);
            dn[i - i0] = (kern_mm_out){s->y + (size_t)wd->off[i] * H, H, &ex->down};
            hs[i - i0] = s->g + (size_t)wd->off[i] * I, lds[i - i0] = I, ts[i - i0] = wd->cnt[i];
        }
        kern_matmul_each(dn, ni, hs, lds, ts);
    }
}

/* Every call, one row or a prefill chunk, goes the same way: the routes sorted by (expert, row),
 * then windows of up to s->brows of them gathered, computed (window_run) and added to their rows in
 * window order — experts ascending, so every row sums its experts in ascending order, whichever
 * window holds them. An expert whose rows straddle two windows runs twice over its parts: the same
 * row functions, so the same bits (kern_matmul is row-invariant). A 35B-A3B decode step had ~1,000
 * hand-offs of ~0.6 MB matmuls, a prefill chunk two per expert: now 3 per 8 experts of a window. */
void kern_moe_experts(float *out, int ldo, const float *x, int ldx, int T, const moe_expert *experts,
                      int E, const int *idx, const float *w, int K, moe_scratch *s) {
    assert(T <= s->rows && K <= MOE_MAX_TOPK && E <= MOE_MAX_EXPERTS);
    int H = s->hidden, n_slots = T * K;
    pairs_sort(idx, n_slots, E, s->order);
    for (int t = 0; t < T; t++) memset(out + (size_t)t * ldo, 0, sizeof(float) * (size_t)H);
    moe_window *wd = s->window;
    for (int q = 0; q < n_slots;) {
        window_gather(wd, s->order, n_slots, &q, x, ldx, T, idx, w, K, s);
        window_run(wd, x, ldx, T, experts, s);
        window_rows_par(ROWS_COMBINE, wd->n, H, out, ldo, NULL, 0, s);
    }
}
