/* cpu_seq.c — the CPU backend's sequence ops: gated attention and MLA over a sequence's KV cache,
 * the Gated DeltaNet recurrence with per-row capture, and its replay (docs/architecture.md).
 *
 * Row invariance (DESIGN.md §3): attention reduces over keys in key order, every query's bits are
 * independent of how queries are grouped into tasks; the delta rule runs each head's rows in order;
 * the replay repeats the forward's update per row. Work is split over the kernels' thread pool by
 * heads, never inside one reduction, so results do not depend on the thread count either. */
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "../../kernels/act.h"
#include "../../kernels/attention.h"
#include "../../kernels/gdn.h"
#include "../../kernels/mla.h"
#include "../../kernels/norm.h"
#include "../../kernels/rope.h"
#include "../../kernels/threadpool.h"
#include "cpu_backend.h"

/* Work (multiply-adds) below which per-head attention or delta-rule steps stay on the calling thread:
 * a pool dispatch costs about 0.5 µs when the workers spin, so ~1-2 µs of work is worth splitting. */
#define CPU_SPLIT_WORK 16384.0
#define CPU_SCORE_SLOTS_MAX 64
#define ATT_BLOCK_MAX KERN_ATT_GROUP_ROWS /* queries per kern_attention_group call, at most */
#define ATT_SCORE_FLOATS (8 << 20) /* score scratch of all slots beyond which blocks shrink (32 MB) */

static int imax(int a, int b) { return a > b ? a : b; }

/* Attention tasks that can run at once: 2 × pool threads, at most 64. */
static int score_slots(void) {
    int n = 2 * tpool_threads(tpool_global());
    return n > CPU_SCORE_SLOTS_MAX ? CPU_SCORE_SLOTS_MAX : n;
}

/* Score rows per slot = the most queries of one kern_attention_group call: ATT_BLOCK_MAX (each block
 * reads its KV head once, so larger blocks read the cache fewer times per prefill chunk) while all
 * slots stay within ATT_SCORE_FLOATS, fewer for long contexts on many threads, never below 4. A
 * function of the capacity and the thread count only; no query's bits depend on it. */
static int score_rows(int capacity) {
    long per_row = (long)score_slots() * imax(capacity, 1);
    long rows = ATT_SCORE_FLOATS / per_row;
    return rows > ATT_BLOCK_MAX ? ATT_BLOCK_MAX : rows < 4 ? 4 : (int)rows;
}

/* Scratch layout: [score_slots][score_rows][capacity] scores (single-query callers use the first
 * capacity floats), then the rotary cos/sin table. */
size_t cpu_attn_scratch_floats(const be_backend *be, int capacity, int rotary_dim) {
    (void)be;
    return (size_t)score_slots() * score_rows(capacity) * imax(capacity, 1) + (size_t)imax(rotary_dim, 2);
}

static float *rope_table(float *scratch, int capacity) {
    return scratch + (size_t)score_slots() * score_rows(capacity) * imax(capacity, 1);
}

/* How many pool tasks to split `items` independent pieces of work into, `work` multiply-adds in all:
 * 1 (run on the caller) when there is one thread or too little work, else up to 2 per thread, at
 * most max_tasks. */
int cpu_tasks(double work, int items, int max_tasks) {
    tpool *pool = tpool_global();
    int nth = tpool_threads(pool);
    if (nth < 2 || work < CPU_SPLIT_WORK || items < 2) return 1;
    int n = 2 * nth;
    if (n > items) n = items;
    if (n > max_tasks) n = max_tasks;
    return n < 1 ? 1 : n;
}

/* Elements a row op must touch before its rows are split over the pool: ~10 µs of streaming work
 * against a hand-off of ~0.5-1 µs; decode's single rows stay on the caller. */
#define CPU_ROWS_SPLIT 32768.0
#define CPU_ROWS_PER_THREAD 4

typedef struct {
    cpu_rows_fn fn;
    void *ctx;
    int R;
} rows_job;

static void rows_task(void *ctx, int task, int n_tasks) {
    const rows_job *j = ctx;
    int t0 = (int)((long)j->R * task / n_tasks), t1 = (int)((long)j->R * (task + 1) / n_tasks);
    if (t0 < t1) j->fn(j->ctx, t0, t1);
}

void cpu_rows_run(int R, double elems, cpu_rows_fn fn, void *ctx) {
    int nth = tpool_threads(tpool_global());
    if (nth < 2 || R < 2 || elems < CPU_ROWS_SPLIT) {
        fn(ctx, 0, R);
        return;
    }
    /* up to CPU_ROWS_PER_THREAD tasks per thread of >= CPU_ROWS_SPLIT / 2 elements each, claimed in
     * turn: with one half per thread the op ended when the slower half did, and the halves' times
     * differed by up to 1.9× in a prefill (bench/zen.md "Session 6") */
    int n = nth * CPU_ROWS_PER_THREAD, by_size = (int)(elems / (CPU_ROWS_SPLIT / 2));
    if (n > by_size) n = by_size;
    if (n < nth) n = nth;
    if (n > R) n = R;
    rows_job j = {fn, ctx, R};
    tpool_run(tpool_global(), n, rows_task, &j);
}

static void rope_scale(float *cos_sin, int n, float f) {
    if (f == 1.0f) return;
    for (int i = 0; i < n; i++) cos_sin[i] *= f;
}

/* ------------------------------------------------------------------ gated attention */

/* The query heads of all rows of one attention call, as thread-pool tasks. The queries of KV head
 * j are (row t, head h) for h in j's group, t-major; they go in blocks of `bs` (one item each)
 * through kern_attention_group, which streams the KV head once per block. Each task has its own
 * scores slot and claims items one at a time until none are left (with 6 items of 128 queries on 2
 * threads, fixed ranges over 4 tasks gave one thread 4 items and the other 2). The K/V of every row
 * are already in the cache, so items are independent, and each query's bits do not depend on its
 * block or its task. */
typedef struct {
    float *big;           /* [R][bw] projections: q (roped, normed) per head, then the outputs */
    const be_seq_kv *kv;
    int bw, R, nH, group, Dh, q_stride, att_off, gated, pos0, capacity, bs, blocks; /* bs: queries per item */
    float scale;
    float *scores;        /* [n_tasks][score_rows(capacity)][capacity] */
    _Atomic int next;     /* the next unclaimed item */
} attn_job;

/* Page log2 of a be_seq_kv (page_size is a power of two). */
static int page_shift(const be_seq_kv *kv) {
    int s = 0;
    while ((1 << s) < kv->page_size) s++;
    return s;
}

/* Keys (or values, with w the value width) of head h as paged rows. */
static kern_rows head_rows(const be_seq_kv *kv, const float *pool, int heads, int h, int w) {
    kern_rows r = {pool + (size_t)h * kv->page_size * w, kv->pages, (long)heads * kv->page_size * w, page_shift(kv), w};
    return r;
}

/* Where position pos of head h is stored. */
static float *kv_at(const be_seq_kv *kv, float *pool, int heads, int h, int w, int pos) {
    int ps = kv->page_size;
    return pool + (((size_t)kv->pages[pos / ps] * heads + h) * ps + pos % ps) * w;
}

static void attn_task(void *ctx, int task, int n_tasks) {
    (void)n_tasks;
    attn_job *j = ctx;
    int items = (j->nH / j->group) * j->blocks, Dh = j->Dh, per_kv = j->R * j->group;
    float *scores = j->scores + (size_t)task * score_rows(j->capacity) * j->capacity;
    for (int i; (i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < items;) {
        int kvh = i / j->blocks, b0 = (i % j->blocks) * j->bs;
        int nq = per_kv - b0 < j->bs ? per_kv - b0 : j->bs;
        float *out[ATT_BLOCK_MAX];
        const float *q[ATT_BLOCK_MAX];
        int n[ATT_BLOCK_MAX];
        for (int e = 0; e < nq; e++) {
            int t = (b0 + e) / j->group, h = kvh * j->group + (b0 + e) % j->group;
            float *row = j->big + (size_t)t * j->bw;
            q[e] = row + h * j->q_stride;
            out[e] = row + j->att_off + h * Dh;
            n[e] = j->pos0 + t + 1;
        }
        int nkv = j->nH / j->group;
        kern_rows kr = head_rows(j->kv, j->kv->k, nkv, kvh, Dh), vr = head_rows(j->kv, j->kv->v, nkv, kvh, Dh);
        kern_attention_group_rows(out, q, n, nq, &kr, Dh, &vr, Dh, j->scale, scores, j->capacity);
        if (j->gated)
            for (int e = 0; e < nq; e++) kern_mul_sigmoid(out[e], q[e] + Dh, Dh);
    }
}

/* ---- decode over a long context: one head's keys and value dims spread over the pool ----
 *
 * With a few queries a KV head (decode, a short verify), attn_task gives each KV head's block to one
 * thread, so a step uses at most n_kv_heads threads (2 of 16 on a Qwen3.5 2B-class model). With
 * $MTPLX_ATT_SPLIT = N (cpu_settings.att_split; 0 = off), a decode-sized call over N keys or more
 * runs in three dispatches instead (attention.h's phases): scores over key chunks of every head, each
 * query's softmax, then value sums over 64-dim pieces of every head, every output bit-identical to the
 * one-block path (test_backend). By default (att_split -1) it runs from ATT_SPLIT_AUTO_KEYS keys when
 * the pool has at least ATT_SPLIT_AUTO_THREADS threads a KV head: on the GPU machine's 16-core Xeon
 * host, qwen35-small-code's shape (2 KV heads), a 1-row step at 16 threads took 1.49-1.73 ms against
 * 1.87-1.88 at 2,048 positions, 2.20-2.83 against 3.01-4.42 at 8,192, 3.2-3.4 against 5.0-7.4 at
 * 16,384 (8 threads: 3.4-4.4 against 5.1-6.4); on the 2-vCPU Zen 5 where it was written (one thread a
 * KV head) it was slower — phase 3 reads each value row in strided pieces (bench/zen.md "Sessions 22
 * and 26"). */
#define ATT_SPLIT_AUTO_KEYS 1024  /* keys */
#define ATT_SPLIT_AUTO_THREADS 4  /* pool threads a KV head */
#define ATT_SPLIT_MAX_QUERIES 8 /* per KV head: decode rows (attention.c's ATT_FEW_MAX) */
#define ATT_SPLIT_MIN_CHUNK 256 /* keys */
#define ATT_SPLIT_DIMS 64       /* value dims of a phase-3 piece: the kernels' 64-dim pass; sums on the stack */

typedef struct {
    const be_seq_kv *kv;
    int nkv, per_kv, Dh, kchunk, kchunks, dchunk, dchunks;
    float scale;
    float **out, **p;         /* [nkv · per_kv]: query e of KV head h at h · per_kv + e */
    const float **q;
    const int *n;
} attn_split_job;

static void attn_split_scores(void *ctx, int task, int n_tasks) {
    (void)n_tasks;
    const attn_split_job *j = ctx;
    int h = task / j->kchunks, c = task % j->kchunks, e0 = h * j->per_kv;
    kern_rows kr = head_rows(j->kv, j->kv->k, j->nkv, h, j->Dh);
    kern_attention_scores_rows(j->p + e0, j->q + e0, j->n + e0, j->per_kv, &kr, j->Dh, j->scale, c * j->kchunk,
                               (c + 1) * j->kchunk);
}

static void attn_split_softmax(void *ctx, int task, int n_tasks) {
    (void)n_tasks;
    const attn_split_job *j = ctx;
    kern_attention_softmax(j->p[task], j->n[task]);
}

static void attn_split_wsum(void *ctx, int task, int n_tasks) {
    (void)n_tasks;
    const attn_split_job *j = ctx;
    int h = task / j->dchunks, c = task % j->dchunks, e0 = h * j->per_kv;
    int d0 = c * j->dchunk, d1 = d0 + j->dchunk < j->Dh ? d0 + j->dchunk : j->Dh;
    kern_rows vr = head_rows(j->kv, j->kv->v, j->nkv, h, j->Dh);
    /* summed here, copied once: pieces of neighbouring dims share the outputs' cache lines */
    float sums[ATT_SPLIT_MAX_QUERIES * ATT_SPLIT_DIMS], *o[ATT_SPLIT_MAX_QUERIES];
    for (int e = 0; e < j->per_kv; e++) o[e] = sums + e * ATT_SPLIT_DIMS;
    kern_attention_wsum_rows(o, j->p + e0, j->n + e0, j->per_kv, &vr, d0, d1);
    for (int e = 0; e < j->per_kv; e++) memcpy(j->out[e0 + e] + d0, o[e], sizeof(float) * (d1 - d0));
}

/* Attention of rows [0, R) in the three phases when the call is decode-sized, long and the pool has
 * threads to spare; returns 0 (nothing done) otherwise. scores: the call's score scratch. */
static int attn_split_try(const be_attn_args *a, const be_seq_kv *kv, int pos0, int R, float *scores, int capacity) {
    int nH = a->n_heads, nKV = a->n_kv_heads, group = nH / nKV, per_kv = R * group, Dh = a->head_dim;
    int nth = tpool_threads(tpool_global()), nmax = pos0 + R, nq = nKV * per_kv;
    if (nth < 2 || per_kv > ATT_SPLIT_MAX_QUERIES || nq > 256 ||
        (size_t)nq * capacity > (size_t)score_slots() * score_rows(capacity) * capacity)
        return 0;
    float *out[256], *p[256];
    const float *q[256];
    int n[256];
    for (int h = 0; h < nKV; h++)
        for (int e = 0; e < per_kv; e++) { /* the order of attn_task's block: rows t, then the group's heads */
            int i = h * per_kv + e, t = e / group, hq = h * group + e % group;
            float *row = a->big + (size_t)t * a->ldb;
            q[i] = row + hq * a->q_stride;
            out[i] = row + a->att_off + hq * Dh;
            p[i] = scores + (size_t)i * capacity;
            n[i] = pos0 + t + 1;
        }
    /* about two key chunks a thread (whole 64-key tiles); value pieces of 64 dims */
    int want = (2 * nth + nKV - 1) / nKV;
    int kchunk = ((nmax + want - 1) / want + 63) / 64 * 64;
    if (kchunk < ATT_SPLIT_MIN_CHUNK) kchunk = ATT_SPLIT_MIN_CHUNK;
    int dchunk = ATT_SPLIT_DIMS;
    attn_split_job j = {kv, nKV, per_kv, Dh, kchunk, (nmax + kchunk - 1) / kchunk, dchunk, (Dh + dchunk - 1) / dchunk,
                        a->scale, out, p, q, n};
    tpool_run(tpool_global(), nKV * j.kchunks, attn_split_scores, &j);
    tpool_run(tpool_global(), nq, attn_split_softmax, &j);
    tpool_run(tpool_global(), nKV * j.dchunks, attn_split_wsum, &j);
    if (a->gated)
        for (int i = 0; i < nq; i++) kern_mul_sigmoid(out[i], q[i] + Dh, Dh);
    return 1;
}

/* The K/V of all R rows are written into the cache first, then every (row, head) attends to
 * positions 0..pos0+t — all of them in one thread-pool dispatch. */
/* The per-row part of attention for rows [t0, t1): q/k norms, RoPE, K/V written into the cache.
 * Rows are independent (each writes its own position), so they split over the pool. */
typedef struct {
    const be_attn_args *a;
    const be_seq_kv *kv;
    int pos0;
    float *cos_sin; /* the shared table when rows run on the caller alone, else NULL (a stack table) */
} attn_rows_job;

#define ROPE_STACK 512 /* rotary dims a task's own cos/sin table holds */

static void attn_rows(void *ctx, int t0, int t1) {
    const attn_rows_job *job = ctx;
    const be_attn_args *a = job->a;
    const be_seq_kv *kv = job->kv;
    int Dh = a->head_dim, nH = a->n_heads, nKV = a->n_kv_heads, rd = a->rotary_dim, bw = a->ldb, pos0 = job->pos0;
    float table[ROPE_STACK];
    float *cos_sin = job->cos_sin ? job->cos_sin : table;
    for (int t = t0; t < t1; t++) {
        float *row = a->big + (size_t)t * bw;
        int pos = pos0 + t;
        if (rd > 0) {
            kern_rope_cos_sin(cos_sin, a->inv_freq, rd, pos);
            rope_scale(cos_sin, rd, a->rope_factor); /* YaRN attention factor */
        }
        for (int j = 0; j < nKV; j++) {
            float *kh = row + a->k_off + j * Dh;
            if (a->k_norm) kern_rmsnorm(kh, kh, a->k_norm, Dh, a->eps);
            if (rd > 0) kern_rope_apply(kh, cos_sin, rd);
            memcpy(kv_at(kv, kv->k, nKV, j, Dh, pos), kh, sizeof(float) * Dh);
            memcpy(kv_at(kv, kv->v, nKV, j, Dh, pos), row + a->v_off + j * Dh, sizeof(float) * Dh);
        }
        for (int h = 0; h < nH; h++) {
            float *qh = row + h * a->q_stride;
            if (a->q_norm) kern_rmsnorm(qh, qh, a->q_norm, Dh, a->eps);
            if (rd > 0) kern_rope_apply(qh, cos_sin, rd);
        }
    }
}

void cpu_attention(be_backend *be, const be_attn_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch) {
    int Dh = a->head_dim, nH = a->n_heads, nKV = a->n_kv_heads, bw = a->ldb;
    int capacity = kv->n_pages * kv->page_size, group = nH / nKV;
    attn_rows_job rj = {a, kv, pos0, rope_table(scratch, capacity)};
    double row_elems = (double)R * (nH + 2 * nKV) * Dh;
    if (a->rotary_dim <= ROPE_STACK && row_elems >= CPU_ROWS_SPLIT) {
        rj.cos_sin = NULL;
        cpu_rows_run(R, row_elems, attn_rows, &rj);
    } else {
        attn_rows(&rj, 0, R);
    }
    const cpu_ctx *c = be->impl;
    int split_from = c->settings.att_split;
    if (split_from < 0) split_from = tpool_threads(tpool_global()) >= ATT_SPLIT_AUTO_THREADS * nKV ? ATT_SPLIT_AUTO_KEYS : 0;
    if (split_from && pos0 + R >= split_from && attn_split_try(a, kv, pos0, R, scratch, capacity))
        return;
    /* blocks as large as the pool allows (each one reads its KV head from memory once), at most
     * ATT_BLOCK_MAX so a prefill's causal rows still spread evenly, then evened out (384 queries go
     * as 3 × 128, 300 as 3 × 100, not 128 + 128 + 44) */
    int per_kv = R * group, split = (tpool_threads(tpool_global()) + nKV - 1) / nKV;
    int bs = (per_kv + split - 1) / split;
    int bmax = score_rows(capacity);
    bs = bs > bmax ? bmax : bs < 1 ? 1 : bs;
    int blocks = (per_kv + bs - 1) / bs;
    bs = (per_kv + blocks - 1) / blocks;
    attn_job j = {a->big, kv,     bw,       R,       nH,       group,  Dh,     a->q_stride, a->att_off,
                  a->gated, pos0, capacity, bs,      blocks,   a->scale, scratch};
    atomic_init(&j.next, 0);
    double work = (double)R * nH * 2.0 * Dh * (pos0 + (R + 1) / 2.0);
    int n_tasks = cpu_tasks(work, nKV * blocks, score_slots());
    if (n_tasks > 1) tpool_run(tpool_global(), n_tasks, attn_task, &j);
    else attn_task(&j, 0, 1);
}

/* ------------------------------------------------------------------ MLA */

void cpu_mla(be_backend *be, const be_mla_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch) {
    (void)be;
    int nH = a->n_heads, Dn = a->nope_dim, Dr = a->rope_dim, Dv = a->v_dim, Dk = Dn + Dr;
    int capacity = kv->n_pages * kv->page_size;
    float *cs = rope_table(scratch, capacity);
    for (int t = 0; t < R; t++) {
        float *row = a->rows + (size_t)t * a->ldr;
        int pos = pos0 + t;
        kern_mla_cos_sin(cs, a->inv_freq, Dr, pos);
        rope_scale(cs, Dr, a->rope_factor);
        float *k_rope = row + a->ckv_off + a->kv_lora;
        if (a->interleave) kern_rope_apply_interleaved(k_rope, cs, Dr);
        else kern_rope_apply(k_rope, cs, Dr);
        for (int h = 0; h < nH; h++) {
            float *kd = kv_at(kv, kv->k, nH, h, Dk, pos);
            const float *kvb = row + a->kvb_off + h * (Dn + Dv);
            memcpy(kd, kvb, sizeof(float) * Dn);
            memcpy(kd + Dn, k_rope, sizeof(float) * Dr);
            memcpy(kv_at(kv, kv->v, nH, h, Dv, pos), kvb + Dn, sizeof(float) * Dv);
        }
        for (int h = 0; h < nH; h++) {
            float *qh = row + a->q_off + h * Dk;
            if (a->interleave) kern_rope_apply_interleaved(qh + Dn, cs, Dr);
            else kern_rope_apply(qh + Dn, cs, Dr);
            kern_rows kr = head_rows(kv, kv->k, nH, h, Dk), vr = head_rows(kv, kv->v, nH, h, Dv);
            kern_attention_rows(row + a->att_off + h * Dv, qh, &kr, Dk, &vr, Dv, pos + 1, a->scale, scratch);
        }
    }
}

/* ------------------------------------------------------------------ Gated DeltaNet */

/* The delta-rule steps of all R rows for a range of value heads (a thread-pool task). A head's rows
 * run in order (row t reads the state row t - 1 wrote); heads are independent and each writes only
 * its own state, outputs and tape entries. */
typedef struct {
    const be_gdn_args *a;
    int R, kd, ratio;
    size_t head_sz;              /* Dv·Dk */
} gdn_heads_job;

#define GDN_STEP_ROWS 32 /* rows per kern_gdn_steps call (its g/beta arrays live on the stack) */
#define GDN_HEAD_TASK_ROWS 32 /* from this many rows a call gives each value head its own task */

static void gdn_heads_task(void *ctx, int task, int n_tasks) {
    const gdn_heads_job *j = ctx;
    const be_gdn_args *a = j->a;
    int Hv = a->Hv, bw = a->ldb;
    int h0 = (int)((long)Hv * task / n_tasks), h1 = (int)((long)Hv * (task + 1) / n_tasks);
    for (int hv = h0; hv < h1; hv++) {
        int hk = hv / j->ratio, Dv = a->Dv;
        float *S = a->dst + hv * j->head_sz;
        const float *S0 = a->src + hv * j->head_sz;
        for (int t0 = 0; t0 < j->R; t0 += GDN_STEP_ROWS) {
            int n = j->R - t0 < GDN_STEP_ROWS ? j->R - t0 : GDN_STEP_ROWS;
            float g[GDN_STEP_ROWS], beta[GDN_STEP_ROWS];
            for (int t = 0; t < n; t++) {
                const float *row = a->big + (size_t)(t0 + t) * bw;
                beta[t] = act_sigmoid(row[a->b_off + hv]);
                g[t] = expf(a->neg_A[hv] * act_softplus(row[a->a_off + hv] + a->dt_bias[hv]));
                if (a->tape_g) a->tape_g[(size_t)(t0 + t) * Hv + hv] = g[t];
            }
            float *row0 = a->big + (size_t)t0 * bw;
            float *delta = a->tape_d ? a->tape_d + ((size_t)t0 * Hv + hv) * Dv : NULL;
            kern_gdn_steps(S, t0 == 0 ? S0 : S, a->qn + (size_t)t0 * j->kd + hk * a->Dk,
                           a->kn + (size_t)t0 * j->kd + hk * a->Dk, j->kd, row0 + a->u_off + 2 * j->kd + hv * Dv,
                           bw, g, beta, row0 + a->y_off + hv * Dv, bw, delta, Hv * Dv, n, a->Dk, Dv);
        }
        /* gated RMSNorm of every row's output: plain weight, then × silu(z) */
        for (int t = 0; t < j->R; t++) {
            float *row = a->big + (size_t)t * bw, *y = row + a->y_off + hv * Dv;
            kern_rmsnorm_gated(y, y, a->norm, row + hv * Dv, Dv, a->eps);
        }
    }
}

/* L2-normalised q (scaled by 1/sqrt(Dk)) and k of rows [t0, t1). */
static void gdn_qk_rows(void *ctx, int t0, int t1) {
    const be_gdn_args *a = ctx;
    int Hk = a->Hk, Dk = a->Dk, kd = Hk * Dk;
    float qscale = 1.0f / sqrtf((float)Dk);
    for (int t = t0; t < t1; t++) {
        const float *u = a->big + (size_t)t * a->ldb + a->u_off;
        for (int h = 0; h < Hk; h++) {
            kern_l2norm(a->qn + (size_t)t * kd + h * Dk, u + h * Dk, Dk, 1e-6f, qscale);
            kern_l2norm(a->kn + (size_t)t * kd + h * Dk, u + kd + h * Dk, Dk, 1e-6f, 1.0f);
        }
    }
}

void cpu_gdn(be_backend *be, const be_gdn_args *a, int R) {
    (void)be;
    int Hk = a->Hk, Dk = a->Dk, kd = Hk * Dk;
    /* normalised q and k of every row (value heads of one key head share them) */
    cpu_rows_run(R, 2.0 * R * kd, gdn_qk_rows, (void *)a);
    size_t head_sz = (size_t)a->Dv * Dk;
    gdn_heads_job j = {a, R, kd, a->Hv / Hk, head_sz};
    /* value heads are independent: split them over the pool, all rows in one dispatch; a prefill
     * chunk's heads go one per task (12 heads as 4 tasks of 3 left one thread idle ~10% of the call
     * at the end on 2 threads, bench/zen.md "Session 6") */
    int n_tasks = cpu_tasks(3.0 * R * a->Hv * head_sz, a->Hv, a->Hv);
    if (n_tasks > 1 && R >= GDN_HEAD_TASK_ROWS) n_tasks = a->Hv;
    if (n_tasks > 1) tpool_run(tpool_global(), n_tasks, gdn_heads_task, &j);
    else gdn_heads_task(&j, 0, 1);
}

/* Replays the first `keep` taped rows of one GDN layer for a range of value heads (a thread-pool
 * task). Heads outer, rows inner, so a head's state stays in cache across the rows; each row's
 * arithmetic is kern_gdn_replay's, in row order, as in the forward. */
typedef struct {
    const float *tape_k, *tape_g, *tape_d;
    float *live;        /* the state after all captured rows, overwritten */
    const float *start; /* the state before the call */
    int keep, Hv, Dk, Dv, ratio, kd;
    size_t head_sz;
} replay_job;

static void replay_task(void *ctx, int task, int n_tasks) {
    const replay_job *j = ctx;
    int h0 = (int)((long)j->Hv * task / n_tasks), h1 = (int)((long)j->Hv * (task + 1) / n_tasks);
    for (int hv = h0; hv < h1; hv++)
        for (int t = 0; t < j->keep; t++) {
            float *dst = j->live + hv * j->head_sz;
            const float *src = t == 0 ? j->start + hv * j->head_sz : dst;
            kern_gdn_replay(dst, src, j->tape_k + (size_t)t * j->kd + (size_t)(hv / j->ratio) * j->Dk,
                            j->tape_d + ((size_t)t * j->Hv + hv) * j->Dv, j->tape_g[(size_t)t * j->Hv + hv], j->Dk,
                            j->Dv);
        }
}

void cpu_gdn_replay(be_backend *be, float *dst, const float *start, const float *tape_k, const float *tape_g,
                    const float *tape_d, int keep, int Hk, int Hv, int Dk, int Dv) {
    (void)be;
    size_t head_sz = (size_t)Dv * Dk;
    replay_job j = {tape_k, tape_g, tape_d, dst, start, keep, Hv, Dk, Dv, Hv / (Hk ? Hk : 1), Hk * Dk, head_sz};
    tpool *pool = tpool_global();
    int nth = tpool_threads(pool);
    if (nth > 1 && (size_t)Hv * head_sz * keep >= ((size_t)1 << 16))
        tpool_run(pool, Hv < 2 * nth ? Hv : 2 * nth, replay_task, &j);
    else
        replay_task(&j, 0, 1);
}
