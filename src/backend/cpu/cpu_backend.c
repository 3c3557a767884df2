/* cpu_backend.c — the CPU backend: settings read once from the environment, host-memory buffers,
 * repacked weights, and the row ops as calls into src/kernels/ (docs/architecture.md, "The CPU
 * backend"). The sequence ops (attention, MLA, GDN) are in cpu_seq.c, the MoE block in cpu_moe.c. */
#include "cpu_backend.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../base/env.h"
#include "../../base/mem.h"
#include "../../kernels/act.h"
#include "../../kernels/cpu.h"
#include "../../kernels/gdn.h"
#include "../../kernels/norm.h"
#include "../../kernels/threadpool.h"

/* ------------------------------------------------------------------ settings */

/* One strict read into *field; keeps the first error in *rc (every field still gets a value). */
#define KNOB_INT(field, name, lo, hi) \
    do { if (env_int(name, field, lo, hi, &(field), *rc ? NULL : err)) *rc = MTPLX_EINVAL; } while (0)
#define KNOB_SWITCH(field, name) \
    do { if (env_switch(name, field, &(field), *rc ? NULL : err)) *rc = MTPLX_EINVAL; } while (0)

/* The kernel knobs (knobs.h) from the environment, into k. */
static void knobs_from_env(kern_knobs *k, int *rc, mtplx_err *err) {
    static const char *const isas[] = {"portable", "avx2", "avx512", "amx", "neon", "neon-dot", "neon-i8mm"};
    int i;
    if (env_word("MTPLX_KERNEL", isas, 7, -1, &i, *rc ? NULL : err)) *rc = MTPLX_EINVAL;
    kern_isa want;
    if (i >= 0 && cpu_isa_parse(isas[i], &want) == 0) k->isa = (int)want;
    KNOB_SWITCH(k->no_amx, "MTPLX_NO_AMX");
    KNOB_INT(k->threads, "MTPLX_THREADS", 0, 256);
    KNOB_SWITCH(k->qpack, "MTPLX_QPACK");
    static const char *const qacts[] = {"int8", "f32"};
    if (env_word("MTPLX_QACT", qacts, 2, k->qact_f32, &k->qact_f32, *rc ? NULL : err)) *rc = MTPLX_EINVAL;
    KNOB_INT(k->qamx_min, "MTPLX_QAMX_MIN", 1, 4096);
    KNOB_INT(k->amx_pf, "MTPLX_AMX_PF", 0, 1 << 20);
    KNOB_INT(k->qpack_pf, "MTPLX_QPACK_PF", 0, 1 << 20);
    KNOB_INT(k->qpack_pf2, "MTPLX_QPACK_PF2", 0, 1 << 20);
    KNOB_SWITCH(k->bf16dp, "MTPLX_BF16DP");
    KNOB_SWITCH(k->bf16_pf, "MTPLX_BF16_PF");
    KNOB_INT(k->qpack_mix, "MTPLX_QPACK_MIX", -1, 1);
    KNOB_SWITCH(k->mm_guided, "MTPLX_MM_GUIDED");
    KNOB_SWITCH(k->qpack_pair, "MTPLX_QPACK_PAIR");
    KNOB_SWITCH(k->avxvnni, "MTPLX_AVXVNNI");
    KNOB_SWITCH(k->bf16x, "MTPLX_BF16X");
}

int cpu_settings_from_env(cpu_settings *s, mtplx_err *err) {
    int r = 0, *rc = &r;
    memset(s, 0, sizeof *s);
    s->knobs = kern_knobs_default();
    knobs_from_env(&s->knobs, rc, err);
    s->fuse = 1;
    KNOB_SWITCH(s->fuse, "MTPLX_FUSE");
    s->pack_experts = -1;
    KNOB_SWITCH(s->pack_experts, "MTPLX_PACK_EXPERTS");
    s->att_split = CPU_ATT_SPLIT_DEFAULT;
    KNOB_INT(s->att_split, "MTPLX_ATT_SPLIT", 0, 1 << 30);
    s->prefill_rows = CPU_PREFILL_ROWS_DEFAULT;
    KNOB_INT(s->prefill_rows, "MTPLX_PREFILL_ROWS", 32, 4096);
    const char *e, *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    /* the repacked-weight cache directory (cpu_packcache.c) */
    e = getenv("MTPLX_PACK_CACHE");
    if (e) {
        if (strcmp(e, "0")) snprintf(s->pack_cache, sizeof s->pack_cache, "%s", e);
    } else if (xdg && *xdg) {
        snprintf(s->pack_cache, sizeof s->pack_cache, "%s/mtplx/qpack", xdg);
    } else if (home && *home) {
        snprintf(s->pack_cache, sizeof s->pack_cache, "%s/.cache/mtplx/qpack", home);
    }
    return r;
}

static pthread_mutex_t g_apply_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_applied; /* settings installed in this process (under g_apply_lock) */

void cpu_settings_apply(const cpu_settings *s) {
    pthread_mutex_lock(&g_apply_lock);
    kern_knobs_set(&s->knobs);
    g_applied = 1;
    pthread_mutex_unlock(&g_apply_lock);
    (void)tpool_global(); /* the pool now, with the threads knob (a no-op if it exists) */
}

/* The first backend of a process installs its settings; later ones adopt the knobs in force, so a
 * program's own overrides (kern_matmul_set_qact_f32, cpu_isa_set in tests and benchmarks) survive
 * loading another model — as when the kernels read the environment once themselves. */
static void settings_adopt(cpu_settings *s) {
    pthread_mutex_lock(&g_apply_lock);
    int first = !g_applied;
    g_applied = 1;
    if (first) kern_knobs_set(&s->knobs);
    else s->knobs = *kern_knobs_get();
    pthread_mutex_unlock(&g_apply_lock);
    (void)tpool_global();
}

/* ------------------------------------------------------------------ memory */

struct be_buf {
    void *p;           /* byte 0, 64-byte aligned */
    void *base;        /* what the allocator returned (p is it rounded up to 64 bytes); freed */
    size_t bytes;
};

static int cpu_buf_alloc(be_backend *be, size_t bytes, int zero, const char *what, be_buf **out, mtplx_err *err) {
    (void)be;
    *out = NULL;
    be_buf *b = mem_zalloc(1, sizeof *b, what, err);
    if (!b) return err ? err->code : MTPLX_ENOMEM;
    /* 64-byte aligned: the kernels' vector loads of a row then do not straddle cache lines, and the
     * threads' pieces of a matmul's output rows (multiples of 16 floats) meet at line boundaries, so
     * no line is written by two cores (malloc gives 16 bytes past a page for large blocks; 2-4% of a
     * prefill, bench/zen.md "Session 7"). Over-allocated rather than aligned_alloc + memset, so a
     * large zeroed buffer (a KV pool) keeps calloc's untouched pages. */
    size_t n = bytes + 64;
    b->base = n < bytes ? NULL : zero ? mem_zalloc(n, 1, what, err) : mem_alloc(n, 1, what, err);
    if (!b->base) {
        if (n < bytes) err_set(err, MTPLX_ENOMEM, "%s: size overflow", what);
        free(b);
        return err ? err->code : MTPLX_ENOMEM;
    }
    b->p = (void *)(((uintptr_t)b->base + 63) & ~(uintptr_t)63);
    b->bytes = bytes;
    *out = b;
    return 0;
}

static void cpu_buf_free(be_backend *be, be_buf *b) {
    (void)be;
    if (!b) return;
    free(b->base);
    free(b);
}

static void *cpu_buf_addr(const be_buf *b) { return b ? b->p : NULL; }
static void cpu_copy(be_backend *be, void *dst, const void *src, size_t n) { (void)be, memcpy(dst, src, n); }
static void cpu_fill_zero(be_backend *be, void *dst, size_t n) { (void)be, memset(dst, 0, n); }

/* ------------------------------------------------------------------ weights and scratch */

/* What the backend must know of every weight it prepares: the matmul scratch's bounds. */
static void weight_note(cpu_ctx *c, const be_weight *w) {
    if (w->cols > c->max_k) c->max_k = w->cols;
    if (w->dtype == DT_U32) {
        c->needs_scratch = 1;
        if (!c->min_group || w->group_size < c->min_group) c->min_group = w->group_size;
    }
}

static int cpu_weight_prepare(be_backend *be, be_weight *w, mtplx_err *err) {
    cpu_ctx *c = be->impl;
    weight_note(c, w);
    int rc = cpu_packcache_prepare(c->settings.pack_cache, &c->packs, w, err);
    if (rc < 0) return err ? err->code : MTPLX_ENOMEM;
    rc = kern_pack_set_add(&c->packs, w, err); /* a no-op when the cache gave w its copy */
    if (!rc && w->dtype == DT_BF16) c->needs_scratch = 1; /* AMX / AVX512-BF16 packed activations */
    return rc;
}

/* ---- the sources of packed groups: cold */

typedef struct {
    uintptr_t lo, hi;
} byte_range;

static int range_cmp(const void *a, const void *b) {
    const byte_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Tell the kernel that the checkpoint bytes of the packed weights among ws (values, scales, biases)
 * are not needed again: madvise(MADV_COLD) on the whole pages they cover, merged. Decode reads the
 * packed copies only, and when those are pages of a pack-cache file they compete with the
 * checkpoint's pages for the page cache: a 19 GB MoE's experts packed on a 23.6 GiB machine re-read
 * both from disk at every token without this hint (bench/zen.md "Session 24"). Cold pages are
 * reclaimed first and kept while memory is ample (the next load hashes them from the page cache). A
 * hint: no error. */
static void sources_cold(be_weight *const *ws, int n) {
#ifdef MADV_COLD
    byte_range *r = malloc(sizeof *r * 3 * (size_t)(n > 0 ? n : 1));
    if (!r) return;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const be_weight *w = ws[i];
        if (!w->packed) continue;
        size_t qb = (size_t)w->rows * w->cols / 32 * w->bits * 4;
        size_t sb = (size_t)w->rows * (w->cols / w->group_size) * dtype_size(w->scale_dtype);
        r[m++] = (byte_range){(uintptr_t)w->data, (uintptr_t)w->data + qb};
        r[m++] = (byte_range){(uintptr_t)w->scales, (uintptr_t)w->scales + sb};
        r[m++] = (byte_range){(uintptr_t)w->biases, (uintptr_t)w->biases + sb};
    }
    qsort(r, (size_t)m, sizeof *r, range_cmp);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < m;) {
        byte_range u = r[i++];
        while (i < m && r[i].lo <= u.hi) u.hi = r[i].hi > u.hi ? r[i].hi : u.hi, i++;
        uintptr_t lo = (u.lo + page - 1) & ~(page - 1), hi = u.hi & ~(page - 1); /* whole pages only */
        if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_COLD);
    }
    free(r);
#else
    (void)ws, (void)n;
#endif
}

/* A MoE layer's experts: one pack-cache file for all their copies (each is under the 1 MiB a file of
 * its own needs, so without the group every load repacked them: 35B-A3B q4 ~0.3 s a layer on two
 * Zen 5 cores, bench/zen.md "Session 24"), else one by one. */
static int cpu_weights_prepare(be_backend *be, be_weight *const *ws, int n, mtplx_err *err) {
    cpu_ctx *c = be->impl;
    be_weight **group = calloc(n > 0 ? (size_t)n : 1, sizeof *group);
    if (!group) return err_set(err, MTPLX_ENOMEM, "preparing %d weights: out of memory", n);
    int g = 0, rc = 0;
    for (int i = 0; i < n; i++) {
        weight_note(c, ws[i]);
        if (!ws[i]->packed && kern_qpack_bytes(ws[i])) group[g++] = ws[i]; /* those with a VNNI copy */
    }
    rc = cpu_packcache_prepare_group(c->settings.pack_cache, &c->packs, group, g, err);
    free(group);
    if (rc < 0) return err ? err->code : MTPLX_ENOMEM;
    for (int i = 0; i < n; i++) /* the rest, or all of them when the group's file did not apply */
        if (!ws[i]->packed && (rc = cpu_weight_prepare(be, ws[i], err))) return rc;
    sources_cold(ws, n);
    return 0;
}

/* Routed experts get the packed copy when MTPLX_PACK_EXPERTS says so, else (auto) when that copy and
 * the whole checkpoint fit in 85% of the machine's memory together: the pack reads every expert of
 * the mapped checkpoint once, and with less memory the load spends its time evicting and re-reading
 * the checkpoint (bench/zen.md "Session 23": 15 GB of q4 35B-A3B on 23 GB, load 6 s -> 30-60 s). */
static int cpu_routed_copies(be_backend *be, uint64_t quant_bytes, uint64_t dense_bytes, uint64_t file_bytes,
                             char *note, size_t note_cap) {
    const cpu_ctx *c = be->impl;
    /* only what this CPU would copy: quantized experts where it packs (x86-64), dense ones for AMX */
    uint64_t copy = (kern_qpack_available() ? quant_bytes : 0) + (cpu_isa() == KERN_ISA_AMX ? dense_bytes : 0);
    if (!copy || !c->settings.knobs.qpack || c->settings.pack_experts == 1) return 1;
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    double ram = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
    if (c->settings.pack_experts < 0 && (double)(copy + file_bytes) <= 0.85 * ram) return 1;
    if (c->settings.pack_experts == 0)
        snprintf(note, note_cap, "routed experts left in the checkpoint's layout (MTPLX_PACK_EXPERTS=0): MoE decode "
                 "runs about half as fast");
    else
        snprintf(note, note_cap, "routed experts left in the checkpoint's layout: their packed copy (%.1f GB) and the "
                 "%.1f GB checkpoint need more than 85%% of this machine's %.1f GB of memory, so MoE decode runs about "
                 "half as fast; MTPLX_PACK_EXPERTS=1 packs them anyway (%s)", (double)copy / 1e9, (double)file_bytes / 1e9,
                 ram / 1e9, c->settings.pack_cache[0] ? "the first load then writes the copies to the pack cache, later "
                 "ones map them; each reads the checkpoint from disk" : "every load then re-reads the checkpoint from disk");
    return 0;
}

static size_t cpu_weight_bytes(const be_backend *be) {
    const cpu_ctx *c = be->impl;
    return c->packs ? kern_pack_set_bytes(c->packs) : 0;
}

static int cpu_reserve_rows(be_backend *be, int rows, int max_cols, mtplx_err *err) {
    const cpu_ctx *c = be->impl;
    (void)rows; /* kern_matmul works in blocks of at most 32 rows whatever R is */
    if (!c->needs_scratch) return 0;
    /* the smallest group any checkpoint here uses (32): weights bound without a prepared copy
     * (MoE experts) may use it too */
    int K = max_cols > c->max_k ? max_cols : c->max_k;
    return kern_matmul_reserve(kern_matmul_scratch_bound(K, 32), err);
}

/* ------------------------------------------------------------------ row ops */

static void cpu_matmul(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w) {
    (void)be;
    kern_matmul(y, ldy, x, ldx, R, w);
}

static void cpu_matmul_n(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R) {
    (void)be;
    _Static_assert(sizeof(be_mm_out) == sizeof(kern_mm_out) && BE_MM_N_MAX == KERN_MM_N_MAX, "be_mm_out layout");
    kern_matmul_n((const kern_mm_out *)outs, n, x, ldx, R);
}

/* The row ops split their rows over the pool for prefill-sized calls (cpu_rows_run); each row's
 * arithmetic is the kernel's, whichever thread runs it. */
typedef struct {
    float *y;
    const float *x, *x2, *w;
    int ldy, ldx, n, kc;
    float eps;
    const be_weight *wt;
    const int32_t *tokens;
} row_op;

static void embed_part(void *ctx, int t0, int t1) {
    const row_op *o = ctx;
    for (int t = t0; t < t1; t++) kern_weight_row(o->wt, o->tokens[t], o->y + (size_t)t * o->ldy);
}

static void cpu_embed_rows(be_backend *be, float *y, int ldy, const be_weight *w, const int32_t *tokens, int R) {
    (void)be;
    row_op o = {.y = y, .ldy = ldy, .wt = w, .tokens = tokens};
    cpu_rows_run(R, (double)R * w->cols, embed_part, &o);
}

static void rmsnorm_part(void *ctx, int t0, int t1) {
    const row_op *o = ctx;
    kern_rmsnorm_rows(o->y + (size_t)t0 * o->ldy, o->ldy, o->x + (size_t)t0 * o->ldx, o->ldx, o->w, o->n, t1 - t0,
                      o->eps);
}

static void cpu_rmsnorm_rows(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w, int n, int R,
                             float eps) {
    (void)be;
    row_op o = {.y = y, .x = x, .w = w, .ldy = ldy, .ldx = ldx, .n = n, .eps = eps};
    cpu_rows_run(R, (double)R * n, rmsnorm_part, &o);
}

/* x += o over elements [64·t0, 64·t1) ∩ [0, n): "rows" of 64 elements. */
static void add_part(void *ctx, int t0, int t1) {
    const row_op *o = ctx;
    size_t i0 = (size_t)t0 * 64, i1 = (size_t)t1 * 64 < (size_t)o->n ? (size_t)t1 * 64 : (size_t)o->n;
    if (i0 < i1) kern_add(o->y + i0, o->x + i0, i1 - i0);
}

static void cpu_add(be_backend *be, float *x, const float *o, size_t n) {
    (void)be;
    if (n > (size_t)1 << 30) { /* beyond the split's int range: on the caller */
        kern_add(x, o, n);
        return;
    }
    row_op op = {.y = x, .x = o, .n = (int)n};
    cpu_rows_run((int)((n + 63) / 64), (double)n, add_part, &op);
}

static void swiglu_part(void *ctx, int t0, int t1) {
    const row_op *o = ctx;
    for (int t = t0; t < t1; t++)
        kern_swiglu(o->y + (size_t)t * o->ldy, o->x + (size_t)t * o->ldy, o->x2 + (size_t)t * o->ldy, o->n);
}

static void cpu_swiglu_rows(be_backend *be, float *y, const float *g, const float *u, int ld, int n, int R) {
    (void)be;
    row_op o = {.y = y, .x = g, .x2 = u, .ldy = ld, .n = n};
    cpu_rows_run(R, (double)R * n, swiglu_part, &o);
}

static void conv_part(void *ctx, int t0, int t1) {
    const row_op *o = ctx;
    kern_conv1d_silu(o->y + (size_t)t0 * o->ldy, o->ldy, o->x + (size_t)t0 * o->ldx, o->ldx, o->w, o->n, o->kc,
                     t1 - t0);
}

static void cpu_conv1d_silu(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w, int C, int kc,
                            int R) {
    (void)be;
    row_op o = {.y = y, .x = x, .w = w, .ldy = ldy, .ldx = ldx, .n = C, .kc = kc};
    cpu_rows_run(R, (double)R * C * kc, conv_part, &o);
}

/* ---- fused row ops (backend.h): the row op runs inside the matmul's packing tasks (kern_matmul_n_pre)
 * for prefill chunks; decode rows, other formats and the fuse knob off take the separate ops. */

/* x += o (o may be NULL), then y = rmsnorm(x) · w, over rows [t0, t1) of stride n. */
typedef struct {
    float *x, *y;
    const float *o, *w;
    int n;
    float eps;
} add_norm_op;

static void add_norm_part(void *ctx, int t0, int t1) {
    const add_norm_op *p = ctx;
    size_t off = (size_t)t0 * p->n;
    if (p->o) kern_add(p->x + off, p->o + off, (size_t)(t1 - t0) * p->n);
    kern_rmsnorm_rows(p->y + off, p->n, p->x + off, p->n, p->w, p->n, t1 - t0, p->eps);
}

static void cpu_add_rmsnorm_rows(be_backend *be, float *x, const float *o, float *y, const float *w, int n, int R,
                                 float eps) {
    const cpu_ctx *c = be->impl;
    if (!c->settings.fuse) {
        if (o) cpu_add(be, x, o, (size_t)R * n);
        cpu_rmsnorm_rows(be, y, n, x, n, w, n, R, eps);
        return;
    }
    add_norm_op p = {x, y, o, w, n, eps};
    cpu_rows_run(R, (double)R * n * (o ? 2 : 1), add_norm_part, &p);
}

static void cpu_rmsnorm_matmul_n(be_backend *be, const be_mm_out *outs, int n_out, float *x, const float *o, float *a,
                                 const float *w, int H, int R, float eps) {
    const cpu_ctx *c = be->impl;
    add_norm_op p = {x, a, o, w, H, eps};
    if (c->settings.fuse && kern_matmul_n_pre((const kern_mm_out *)outs, n_out, a, H, R, add_norm_part, &p)) return;
    cpu_add_rmsnorm_rows(be, x, o, a, w, H, R, eps);
    cpu_matmul_n(be, outs, n_out, a, H, R);
}

static void cpu_swiglu_matmul(be_backend *be, float *y, int ldy, float *g, const float *u, int ld, int n, int R,
                              const be_weight *w) {
    const cpu_ctx *c = be->impl;
    row_op o = {.y = g, .x = g, .x2 = u, .ldy = ld, .n = n};
    kern_mm_out one = {y, ldy, w};
    if (c->settings.fuse && kern_matmul_n_pre(&one, 1, g, ld, R, swiglu_part, &o)) return;
    cpu_swiglu_rows(be, g, g, u, ld, n, R);
    cpu_matmul(be, y, ldy, g, ld, R, w);
}

static void cpu_destroy(be_backend *be);

static const be_ops cpu_ops = {
    .name = "cpu",
    .destroy = cpu_destroy,
    .buf_alloc = cpu_buf_alloc,
    .buf_free = cpu_buf_free,
    .buf_addr = cpu_buf_addr,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .fill_zero = cpu_fill_zero,
    .weight_prepare = cpu_weight_prepare,
    .weights_prepare = cpu_weights_prepare,
    .routed_copies = cpu_routed_copies,
    .weight_bytes = cpu_weight_bytes,
    .reserve_rows = cpu_reserve_rows,
    .attn_scratch_floats = cpu_attn_scratch_floats,
    .moe_scratch_new = cpu_moe_scratch_new,
    .moe_scratch_free = cpu_moe_scratch_free,
    .matmul = cpu_matmul,
    .matmul_n = cpu_matmul_n,
    .embed_rows = cpu_embed_rows,
    .rmsnorm_rows = cpu_rmsnorm_rows,
    .add = cpu_add,
    .swiglu_rows = cpu_swiglu_rows,
    .conv1d_silu = cpu_conv1d_silu,
    .add_rmsnorm_rows = cpu_add_rmsnorm_rows,
    .rmsnorm_matmul_n = cpu_rmsnorm_matmul_n,
    .swiglu_matmul = cpu_swiglu_matmul,
    .attention = cpu_attention,
    .mla = cpu_mla,
    .gdn = cpu_gdn,
    .attention_seqs = be_attention_seqs_loop,
    .mla_seqs = be_mla_seqs_loop,
    .gdn_seqs = be_gdn_seqs_loop,
    .gdn_replay = cpu_gdn_replay,
    .gdn_commit = be_gdn_commit_loop,
    .logits_top = be_logits_top_host,
    .moe = cpu_moe,
};

int be_cpu_new(const cpu_settings *s, be_backend **out, mtplx_err *err) {
    *out = NULL;
    be_backend *be = mem_zalloc(1, sizeof *be, "CPU backend", err);
    cpu_ctx *c = mem_zalloc(1, sizeof *c, "CPU backend", err);
    if (!be || !c) {
        free(be);
        free(c);
        return err ? err->code : MTPLX_ENOMEM;
    }
    c->settings = *s;
    settings_adopt(&c->settings);
    be->ops = &cpu_ops;
    be->caps.host_memory = 1;
    be->caps.prefill_rows = c->settings.prefill_rows;
    be->impl = c;
    *out = be;
    return 0;
}

/* Frees the CPU backend and its repacked copies (the pool and knobs are process-wide and stay). */
static void cpu_destroy(be_backend *be) {
    cpu_ctx *c = be->impl;
    kern_pack_set_free(c->packs);
    free(c);
    free(be);
}
