/* cuda_graph.cu — step graphs: a forward's launches recorded on the host and replayed as one CUDA
 * graph, patched in place when only their arguments changed (docs/architecture.md, "Step graphs").
 *
 * Between cu_graph_record (a forward's embedding) and cu_graph_break (its download, or anything that
 * makes the host wait or changes device allocations), the calling thread's kernel launches, device
 * copies and zero fills are not issued: cu_launch appends each to a list — the kernel, its grid,
 * block, shared bytes and PDL attribute, and its arguments' bytes as the kernel takes them. At the
 * break the list is matched against the graphs this thread keeps (same row count, same ops with the
 * same kernels): on a match, the nodes whose arguments or grid changed are patched in the executable
 * graph and the graph is launched; otherwise the list is issued into a stream capture, instantiated
 * and kept (least recently used of GRAPH_SLOTS goes) — from the second time such a list is met; the
 * first time it is issued eagerly from the record. A replay therefore runs exactly the kernels and
 * arguments that eager issue would queue (bit-identical; gpu-test.sh `launch_machinery_bit_identical`),
 * the host pays a copy of a launch's argument bytes instead of a launch (~2-3 us each), and stream
 * capture happens only when the op sequence changes (a new row count, an attention grid that grew
 * with the context, ...). Session 4's graphs captured every step anew, which cost the host what eager
 * launches cost and lost to them on small models (bench/cuda.md, "Session 4"); this is the replay
 * without re-capture that section asked for. Measured (bench/cuda.md, "Session 17"): a 1-row forward
 * of the embedded model is recorded in 17-20 us of host time instead of issued in 110, but its GPU time
 * stays 0.17 ms (programmatic dependent launch already hid the launch gaps: the kernels' own latency
 * is the step), so graphs are level with eager launches and stay off by default. */
#include "cuda_internal.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REC_KERNEL, REC_COPY, REC_ZERO };

/* One recorded op. */
typedef struct {
    int kind;                 /* REC_KERNEL / REC_COPY / REC_ZERO */
    const char *what;         /* the op's name (cu_launched), for errors at capture */
    const void *func;         /* kernel: its host stub */
    dim3 grid, block;
    unsigned smem;            /* kernel: dynamic shared bytes */
    int pdl;                  /* kernel: launched with programmatic stream serialization */
    int arg0, narg;           /* kernel: its arguments' offsets are argoff[arg0 .. arg0 + narg) */
    size_t bytes0, nbytes;    /* kernel: its argument bytes are arena[bytes0 .. bytes0 + nbytes) */
    void *dst;                /* copy / zero: destination */
    const void *src;          /* copy: source */
    size_t n;                 /* copy / zero: bytes */
    cudaMemcpyKind ck;        /* copy: direction */
} rec_op;

/* A recorded op list with its argument bytes. */
typedef struct {
    rec_op *op;
    int n, cap;
    unsigned char *arena;     /* argument bytes; each kernel's start 16-byte aligned, padding zeroed */
    size_t an, acap;
    size_t *argoff;           /* arena offset of each argument */
    int na, nacap;
    uint64_t shape;           /* hash of the ops' kinds and kernels (a quick mismatch test) */
} rec_list;

/* A kept executable graph and the list it was last launched with. */
typedef struct {
    cudaGraph_t g;            /* what exec was instantiated from (its nodes are the patch handles) */
    cudaGraphExec_t exec;     /* NULL: free */
    int rows;
    int patchable;            /* every op has its node (else a change rebuilds) */
    rec_list l;
    cudaGraphNode_t *node;    /* [l.n] */
    unsigned long used;       /* LRU tick */
} graph_slot;

#define GRAPH_SLOTS 8

thread_local int cu_rec_on;
static thread_local rec_list t_rec;
static thread_local int t_rows;
static thread_local graph_slot t_slot[GRAPH_SLOTS];
static thread_local unsigned long t_tick;
static thread_local cudaStream_t t_cap; /* capture stream, created on first use */
static int g_in_flight;                 /* recordings not yet launched, all threads (atomic) */
static long g_launches, g_builds, g_updates, g_patched, g_eager;

static void *grow(void *p, size_t elem, int *cap, int need) {
    if (need <= *cap) return p;
    int nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(p, elem * (size_t)nc);
    if (!q) {
        fprintf(stderr, "mtplx: step graph: out of host memory\n");
        abort();
    }
    *cap = nc;
    return q;
}

static void arena_reserve(rec_list *l, size_t need) {
    if (need <= l->acap) return;
    size_t nc = l->acap ? l->acap : 4096;
    while (nc < need) nc *= 2;
    unsigned char *q = (unsigned char *)realloc(l->arena, nc);
    if (!q) {
        fprintf(stderr, "mtplx: step graph: out of host memory\n");
        abort();
    }
    l->arena = q, l->acap = nc;
}

static rec_op *rec_push(int kind, const void *key) {
    rec_list *l = &t_rec;
    l->op = (rec_op *)grow(l->op, sizeof(rec_op), &l->cap, l->n + 1);
    rec_op *o = &l->op[l->n++];
    *o = rec_op();
    o->kind = kind;
    l->shape = (l->shape ^ (uint64_t)(uintptr_t)key ^ (uint64_t)kind) * 0x100000001b3ULL;
    return o;
}

void cu_rec_kernel(const void *func, dim3 grid, dim3 block, size_t smem, int pdl) {
    rec_op *o = rec_push(REC_KERNEL, func);
    rec_list *l = &t_rec;
    size_t at = (l->an + 15) & ~(size_t)15;
    arena_reserve(l, at);
    memset(l->arena + l->an, 0, at - l->an);
    l->an = at;
    o->func = func, o->grid = grid, o->block = block, o->smem = (unsigned)smem, o->pdl = pdl;
    o->arg0 = l->na, o->bytes0 = at;
}

void cu_rec_arg(const void *p, size_t size, size_t align) {
    rec_list *l = &t_rec;
    rec_op *o = &l->op[l->n - 1];
    size_t at = (l->an + align - 1) & ~(align - 1);
    arena_reserve(l, at + size);
    memset(l->arena + l->an, 0, at - l->an);
    memcpy(l->arena + at, p, size);
    l->an = at + size;
    l->argoff = (size_t *)grow(l->argoff, sizeof(size_t), &l->nacap, l->na + 1);
    l->argoff[l->na++] = at;
    o->narg++;
    o->nbytes = l->an - o->bytes0;
}

void cu_rec_name(const char *what) {
    if (t_rec.n) t_rec.op[t_rec.n - 1].what = what;
}

void cu_copy_async(void *dst, const void *src, size_t n, cudaMemcpyKind kind, const char *what) {
    if (!n) return;
    if (!cu_rec_on) {
        CU_CHECK(cudaMemcpyAsync(dst, src, n, kind, CU_STREAM), what);
        return;
    }
    rec_op *o = rec_push(REC_COPY, (const void *)(uintptr_t)(kind + 1));
    o->what = what, o->dst = dst, o->src = src, o->n = n, o->ck = kind;
}

void cu_zero_async(void *dst, size_t n, const char *what) {
    if (!n) return;
    if (!cu_rec_on) {
        CU_CHECK(cudaMemsetAsync(dst, 0, n, CU_STREAM), what);
        return;
    }
    rec_op *o = rec_push(REC_ZERO, NULL);
    o->what = what, o->dst = dst, o->n = n;
}

int cu_graph_in_flight(void) { return __atomic_load_n(&g_in_flight, __ATOMIC_SEQ_CST); }

void cu_graph_counts(long *launches, long *builds, long *updates, long *patched, long *eager) {
    *launches = g_launches, *builds = g_builds, *updates = g_updates, *patched = g_patched, *eager = g_eager;
}

void cu_graph_record(int rows) {
    cu_graph_break();
    t_rec.n = 0, t_rec.an = 0, t_rec.na = 0, t_rec.shape = 0xcbf29ce484222325ULL;
    t_rows = rows;
    cu_rec_on = 1;
    __atomic_fetch_add(&g_in_flight, 1, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------------------ matching and patching */

/* 1 when b has a's ops with a's kernels (arguments, grids and copy addresses may differ). */
static int same_ops(const rec_list *a, const rec_list *b) {
    if (a->n != b->n || a->shape != b->shape) return 0;
    for (int i = 0; i < a->n; i++) {
        const rec_op *x = &a->op[i], *y = &b->op[i];
        if (x->kind != y->kind || x->func != y->func || x->pdl != y->pdl || x->narg != y->narg ||
            x->nbytes != y->nbytes || x->ck != y->ck)
            return 0;
    }
    return 1;
}

static int dim_eq(dim3 a, dim3 b) { return a.x == b.x && a.y == b.y && a.z == b.z; }

/* The kernel node parameters of op o of list l (argv: room for o->narg pointers into l's arena). */
static cudaKernelNodeParams kernel_params(const rec_list *l, const rec_op *o, void **argv) {
    for (int j = 0; j < o->narg; j++) argv[j] = l->arena + l->argoff[o->arg0 + j];
    cudaKernelNodeParams p = {};
    p.func = (void *)o->func;
    p.gridDim = o->grid;
    p.blockDim = o->block;
    p.sharedMemBytes = o->smem;
    p.kernelParams = argv;
    return p;
}

static cudaError_t patch_op(graph_slot *e, int i, const rec_list *l) {
    const rec_op *o = &l->op[i], *was = &e->l.op[i];
    if (o->kind == REC_COPY)
        return o->dst == was->dst && o->src == was->src && o->n == was->n
                   ? cudaSuccess
                   : (g_patched++, cudaGraphExecMemcpyNodeSetParams1D(e->exec, e->node[i], o->dst, o->src, o->n, o->ck));
    if (o->kind == REC_ZERO) {
        if (o->dst == was->dst && o->n == was->n) return cudaSuccess;
        cudaMemsetParams p = {};
        p.dst = o->dst, p.elementSize = 1, p.width = o->n, p.height = 1;
        g_patched++;
        return cudaGraphExecMemsetNodeSetParams(e->exec, e->node[i], &p);
    }
    if (dim_eq(o->grid, was->grid) && dim_eq(o->block, was->block) && o->smem == was->smem &&
        !memcmp(l->arena + o->bytes0, e->l.arena + was->bytes0, o->nbytes))
        return cudaSuccess;
    void *argv[64];
    if (o->narg > 64) return cudaErrorInvalidValue;
    cudaKernelNodeParams p = kernel_params(l, o, argv);
    g_patched++;
    return cudaGraphExecKernelNodeSetParams(e->exec, e->node[i], &p);
}

/* Patches e's executable graph to run list l; 0 when a node could not be patched (rebuild). */
static int slot_patch(graph_slot *e, const rec_list *l) {
    if (!e->patchable) return 0;
    for (int i = 0; i < l->n; i++)
        if (patch_op(e, i, l) != cudaSuccess) {
            cudaGetLastError();
            return 0;
        }
    return 1;
}

/* ------------------------------------------------------------------ building */

static void list_copy(rec_list *to, const rec_list *from) {
    to->op = (rec_op *)grow(to->op, sizeof(rec_op), &to->cap, from->n);
    memcpy(to->op, from->op, sizeof(rec_op) * (size_t)from->n);
    to->n = from->n;
    arena_reserve(to, from->an);
    memcpy(to->arena, from->arena, from->an);
    to->an = from->an;
    to->argoff = (size_t *)grow(to->argoff, sizeof(size_t), &to->nacap, from->na);
    memcpy(to->argoff, from->argoff, sizeof(size_t) * (size_t)from->na);
    to->na = from->na;
    to->shape = from->shape;
}

/* Queues op o of l on stream s (the capture stream). */
static void issue_op(const rec_list *l, const rec_op *o, cudaStream_t s) {
    const char *what = o->what ? o->what : "step graph";
    if (o->kind == REC_COPY) {
        CU_CHECK(cudaMemcpyAsync(o->dst, o->src, o->n, o->ck, s), what);
        return;
    }
    if (o->kind == REC_ZERO) {
        CU_CHECK(cudaMemsetAsync(o->dst, 0, o->n, s), what);
        return;
    }
    void *argv[64];
    if (o->narg > 64) CU_CHECK(cudaErrorInvalidValue, what);
    for (int j = 0; j < o->narg; j++) argv[j] = l->arena + l->argoff[o->arg0 + j];
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = o->grid;
    cfg.blockDim = o->block;
    cfg.dynamicSmemBytes = o->smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = o->pdl ? 1 : 0;
    CU_CHECK(cudaLaunchKernelExC(&cfg, o->func, argv), what);
}

static void slot_clear(graph_slot *e) {
    if (e->exec) cudaGraphExecDestroy(e->exec);
    if (e->g) cudaGraphDestroy(e->g);
    e->exec = NULL, e->g = NULL;
}

/* Captures list l into e's graph (each op's node taken from the capture as it is added) and
 * instantiates it. */
static void slot_build(graph_slot *e, const rec_list *l, int rows) {
    if (!t_cap) CU_CHECK(cudaStreamCreateWithFlags(&t_cap, cudaStreamNonBlocking), "graph stream");
    list_copy(&e->l, l);
    int cap = 0;
    e->node = (cudaGraphNode_t *)grow(NULL, sizeof(cudaGraphNode_t), &cap, l->n);
    e->patchable = 1;
    CU_CHECK(cudaStreamBeginCapture(t_cap, cudaStreamCaptureModeRelaxed), "graph capture");
    for (int i = 0; i < l->n; i++) {
        issue_op(l, &l->op[i], t_cap);
        cudaStreamCaptureStatus st;
        const cudaGraphNode_t *dep = NULL;
        size_t nd = 0;
        CU_CHECK(cudaStreamGetCaptureInfo(t_cap, &st, NULL, NULL, &dep, NULL, &nd), "graph capture");
        e->node[i] = nd == 1 ? dep[0] : NULL;
        if (!e->node[i]) e->patchable = 0;
    }
    CU_CHECK(cudaStreamEndCapture(t_cap, &e->g), "graph capture");
    CU_CHECK(cudaGraphInstantiate(&e->exec, e->g, 0), "graph instantiate");
    e->rows = rows;
}

static graph_slot *slot_find(const rec_list *l, int rows) {
    for (int i = 0; i < GRAPH_SLOTS; i++) {
        graph_slot *e = &t_slot[i];
        if (e->exec && e->rows == rows && same_ops(&e->l, l)) return e;
    }
    return NULL;
}

static graph_slot *slot_lru(void) {
    graph_slot *lru = &t_slot[0];
    for (int i = 0; i < GRAPH_SLOTS; i++) {
        graph_slot *e = &t_slot[i];
        if (!e->exec) return e;
        if (e->used < lru->used) lru = e;
    }
    return lru;
}

/* 1 when an op list of this row count and shape was met before (the last SEEN_MAX lists that found no
 * graph); else remembers it. A sequence met once (a prompt's odd-sized chunk, a verify after a partial
 * acceptance) is issued eagerly instead of captured: capture and instantiation cost far more than one
 * eager issue. */
#define SEEN_MAX 16
static int seen_before(const rec_list *l, int rows) {
    static thread_local uint64_t seen[SEEN_MAX];
    static thread_local int at;
    uint64_t key = (l->shape ^ (uint64_t)rows * 0x9E3779B97F4A7C15ULL) * 0x100000001b3ULL ^ (uint64_t)l->n;
    for (int i = 0; i < SEEN_MAX; i++)
        if (seen[i] == key) return 1;
    seen[at] = key, at = (at + 1) % SEEN_MAX;
    return 0;
}

/* Launches list l on the backend's stream: through a kept graph, patched, when one with the same ops
 * exists; else eagerly the first time such a list is met, and through a new graph (replacing the least
 * recently used) from the second time on. */
static void graph_run(const rec_list *l, int rows) {
    graph_slot *e = slot_find(l, rows);
    if (e && slot_patch(e, l)) {
        list_copy(&e->l, l);
        g_updates++;
    } else if (!e && !seen_before(l, rows)) {
        for (int i = 0; i < l->n; i++) issue_op(l, &l->op[i], cu_stream_g);
        g_eager++;
        return;
    } else {
        if (!e) e = slot_lru();
        free(e->node);
        e->node = NULL;
        slot_clear(e);
        slot_build(e, l, rows);
        g_builds++;
    }
    e->used = ++t_tick;
    CU_CHECK(cudaGraphLaunch(e->exec, cu_stream_g), "graph launch");
    g_launches++;
}

void cu_graph_break(void) {
    if (!cu_rec_on) return;
    cu_rec_on = 0;
    if (t_rec.n) graph_run(&t_rec, t_rows);
    __atomic_fetch_sub(&g_in_flight, 1, __ATOMIC_SEQ_CST);
}
