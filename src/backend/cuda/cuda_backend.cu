/* cuda_backend.cu — the CUDA backend: device memory, device copies of weights (checkpoint format,
 * uploaded once) and of the model's small host vectors, the element-wise row ops, and the ops table
 * (docs/architecture.md, "The CUDA backend"). Matmul / embedding are in cuda_matmul.cu, attention /
 * MLA / GDN in cuda_seq.cu, the MoE block in cuda_moe.cu.
 *
 * Row invariance (DESIGN.md §3): every kernel here computes a row with one thread block whose
 * reduction order depends only on the row's width, never on how many rows share the call. */
#include "cuda_internal.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {
#include "../../base/dtype.h"
#include "../../base/env.h"
}

cudaStream_t cu_stream_g = 0; /* the legacy default stream until the first be_cuda_new */

void cu_check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "mtplx: CUDA error in %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    abort();
}

/* ------------------------------------------------------------------ step timing */

/* $MTPLX_CUDA_STEPS=1: a forward is timed from its embedding (the first op of a trunk) to its first
 * download (the logits or hidden rows): host time to issue its ops, GPU time between two events at
 * those two points, wall time until the download returned, kernel launches and host synchronizations
 * in between; at exit a table per row count on stderr, and the GPU cost of back-to-back launches
 * queued on the stream and replayed from a CUDA graph (bench/cuda.md, "Session 4"). Instruments
 * only: a few clock reads and two events per forward. */
#define STEP_ROWS 33

typedef struct {
    int on;                          /* -1: not read yet */
    int active, rows;                /* a forward between embedding and download; its rows */
    double t0;                       /* host seconds at its embedding */
    long launches0, syncs0;
    cudaEvent_t ev0, ev1;
    long n[STEP_ROWS], launches[STEP_ROWS], syncs[STEP_ROWS];
    double issue_ms[STEP_ROWS], gpu_ms[STEP_ROWS], wall_ms[STEP_ROWS];
} step_table;

static step_table g_step = {.on = -1};
static long g_launches, g_syncs; /* every launch / host synchronization of the process (relaxed) */

static double host_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void step_print(void);

static int steps_on(void) {
    if (g_step.on < 0) {
        g_step.on = cu_set.steps;
        if (g_step.on) {
            cudaEventCreate(&g_step.ev0);
            cudaEventCreate(&g_step.ev1);
            atexit(step_print);
        }
    }
    return g_step.on;
}

static void graph_begin(int rows);
static int prof_on(void);

static thread_local int t_fwd_rows; /* rows of the forward the calling thread is issuing (profile_rows) */

void cu_step_begin(int rows) {
    t_fwd_rows = rows;
    if (!steps_on()) {
        graph_begin(rows);
        return;
    }
    cu_graph_break(); /* the previous chunk's recording: launched before ev0 */
    g_step.active = 1;
    g_step.rows = rows < STEP_ROWS ? rows : STEP_ROWS - 1;
    g_step.launches0 = __atomic_load_n(&g_launches, __ATOMIC_RELAXED);
    g_step.syncs0 = __atomic_load_n(&g_syncs, __ATOMIC_RELAXED);
    cudaEventRecord(g_step.ev0, CU_STREAM);
    g_step.t0 = host_now();
    graph_begin(rows);
}

/* Called by a download before its copy (issued = 1) and after it (issued = 0). */
static void step_mark(int issued) {
    if (g_step.on <= 0 || !g_step.active) return;
    int r = g_step.rows;
    if (issued) {
        g_step.issue_ms[r] += 1e3 * (host_now() - g_step.t0);
        g_step.launches[r] += __atomic_load_n(&g_launches, __ATOMIC_RELAXED) - g_step.launches0;
        g_step.syncs[r] += __atomic_load_n(&g_syncs, __ATOMIC_RELAXED) - g_step.syncs0;
        cudaEventRecord(g_step.ev1, CU_STREAM);
        return;
    }
    g_step.wall_ms[r] += 1e3 * (host_now() - g_step.t0);
    float ms = 0;
    cudaEventSynchronize(g_step.ev1);
    cudaEventElapsedTime(&ms, g_step.ev0, g_step.ev1);
    g_step.gpu_ms[r] += ms;
    g_step.n[r]++;
    g_step.active = 0;
}

__global__ void k_empty(int *p) {
    if (p) p[threadIdx.x] = 0;
}

/* Keeps one multiprocessor busy for about `ns` nanoseconds (so the host queues work behind it). */
__global__ void k_spin(long long ns) {
    long long t0 = clock64(), cycles = ns * 2; /* ~2 GHz */
    while (clock64() - t0 < cycles) {
    }
}

/* GPU microseconds per launch of n empty kernels queued behind a busy GPU (host ahead), from the
 * stream and from a graph holding the same launches; and host microseconds to queue one launch. */
static void launch_cost(int n, double *stream_us, double *graph_us, double *host_us) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float ms = 0;
    /* graph-safe: step_print ended any recording */
    k_spin<<<1, 1, 0, CU_STREAM>>>(20000000LL);
    cudaEventRecord(a, CU_STREAM);
    double t0 = host_now();
    /* graph-safe: step_print ended any recording */
    for (int i = 0; i < n; i++) k_empty<<<1, 32, 0, CU_STREAM>>>(NULL);
    *host_us = 1e6 * (host_now() - t0) / n;
    cudaEventRecord(b, CU_STREAM);
    cudaEventSynchronize(b);
    cudaEventElapsedTime(&ms, a, b);
    *stream_us = 1e3 * ms / n;
    *graph_us = 0;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    if (CU_STREAM && cudaStreamBeginCapture(CU_STREAM, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
        /* graph-safe: launch_cost's own capture */
        for (int i = 0; i < n; i++) k_empty<<<1, 32, 0, CU_STREAM>>>(NULL);
        if (cudaStreamEndCapture(CU_STREAM, &g) == cudaSuccess && cudaGraphInstantiate(&ge, g, 0) == cudaSuccess) {
            cudaGraphLaunch(ge, CU_STREAM); /* the first launch uploads the graph */
            /* graph-safe: step_print ended any recording */
            k_spin<<<1, 1, 0, CU_STREAM>>>(20000000LL);
            cudaEventRecord(a, CU_STREAM);
            cudaGraphLaunch(ge, CU_STREAM);
            cudaEventRecord(b, CU_STREAM);
            cudaEventSynchronize(b);
            cudaEventElapsedTime(&ms, a, b);
            *graph_us = 1e3 * ms / n;
            cudaGraphExecDestroy(ge);
            cudaGraphDestroy(g);
        }
    }
    cudaGetLastError();
    cudaEventDestroy(a);
    cudaEventDestroy(b);
}

static void step_print(void) {
    cu_graph_break();
    fprintf(stderr, "mtplx CUDA steps (embedding to first download, mean per forward)\n");
    fprintf(stderr, "  %4s %6s %9s %9s %9s %9s %7s\n", "rows", "steps", "issue ms", "gpu ms", "wall ms", "launches",
            "syncs");
    for (int r = 0; r < STEP_ROWS; r++) {
        if (!g_step.n[r]) continue;
        double k = 1.0 / (double)g_step.n[r];
        fprintf(stderr, "  %4d %6ld %9.3f %9.3f %9.3f %9.1f %7.1f\n", r, g_step.n[r], k * g_step.issue_ms[r],
                k * g_step.gpu_ms[r], k * g_step.wall_ms[r], k * (double)g_step.launches[r],
                k * (double)g_step.syncs[r]);
    }
    double su, gu, hu;
    launch_cost(1000, &su, &gu, &hu);
    fprintf(stderr, "  back-to-back empty kernels: %.2f us each on the GPU from the stream, %.2f us from a graph; "
                    "%.2f us of host time to queue one\n", su, gu, hu);
    long nl, nb, nu, np, ne;
    cu_graph_counts(&nl, &nb, &nu, &np, &ne);
    fprintf(stderr, "  step graphs: %ld launched, %ld built (captured), %ld patched in place (%ld nodes); %ld forwards "
                    "issued eagerly (first met)\n", nl, nb, nu, np, ne);
}

int cu_fuse_enabled(void) { return cu_set.fuse; }

int cu_pdl_enabled(void) { return cu_set.pdl; }

/* ------------------------------------------------------------------ step graphs
 *
 * A forward's ops, from its embedding (cu_step_begin) to the first call that makes the host wait or
 * touches device allocations (cu_graph_break: the logits download, an upload, a first-use weight copy,
 * a scratch that grows, ...), are recorded and replayed as one CUDA graph, patched in place when only
 * arguments changed (cuda_graph.cu). Off by default ($MTPLX_CUDA_GRAPH=1, read once, turns them on):
 * level with eager launches, whose gaps PDL already hides (bench/cuda.md, "Session 17"). Eager also
 * with the legacy stream, with $MTPLX_CUDA_PROFILE (events per op), and for good once a second thread
 * has used the CUDA backend (an op, a buffer, a weight): a recording is this thread's until its next
 * synchronizing call, and work another thread queues in the meantime would run before it. So graphs
 * serve a process that drives the GPU from one thread (`run`, `bench`, `logits`); a server whose
 * executor is not the loading thread runs eagerly. A recording in flight also keeps the shared index
 * ring from wrapping under it (stage_ring). */
static int g_threads; /* threads that have used the backend (atomic) */
static thread_local int t_seen;

static int graph_enabled(void) { return cu_set.graph && cu_stream_g && !prof_on(); }

/* Counts the calling thread among the backend's users (first call per thread). */
static void thread_note(void) {
    if (t_seen) return;
    t_seen = 1;
    __atomic_fetch_add(&g_threads, 1, __ATOMIC_SEQ_CST);
}

static void graph_begin(int rows) {
    thread_note();
    cu_graph_break(); /* a forward without a download (a prefill chunk) ends at the next one's start */
    if (!graph_enabled() || __atomic_load_n(&g_threads, __ATOMIC_SEQ_CST) != 1) return;
    cu_graph_record(rows);
}

void cu_scratch_grow(void **p, size_t *cap, size_t bytes, size_t min, const char *what) {
    if (bytes <= *cap) return;
    size_t nc = bytes < min ? min : bytes + bytes / 2;
    cu_graph_break();
    CU_CHECK(cudaFree(*p), what);
    *p = NULL;
    CU_CHECK(cudaMalloc(p, nc), what);
    *cap = nc;
}

void cu_memcpy_sync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, const char *what) {
    if (!n) return;
    cu_graph_break();
    /* graph-safe: after cu_graph_break above */
    CU_CHECK(cudaMemcpyAsync(dst, src, n, kind, CU_STREAM), what);
    CU_CHECK(cudaStreamSynchronize(CU_STREAM), what);
    __atomic_fetch_add(&g_syncs, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ profile */

#define PROF_OPS 48
#define PROF_PENDING 8192

typedef struct {
    const char *name[PROF_OPS];
    double ms[PROF_OPS];
    long calls[PROF_OPS], launches[PROF_OPS];
    int n;
    cudaEvent_t ev[2 * PROF_PENDING];  /* start / end of pending brackets */
    int pend_slot[PROF_PENDING], n_pend, n_ev;
    pthread_mutex_t lock;
} prof_table;

static prof_table g_prof = {.lock = PTHREAD_MUTEX_INITIALIZER};
static int g_prof_on = -1;
static thread_local int t_prof_slot = -1;
thread_local int cu_op_depth;
thread_local unsigned long cu_op_seq;

/* Adds the pending brackets' times (waits for the last one). Caller holds the lock. */
static void prof_drain(void) {
    if (!g_prof.n_pend) return;
    cudaEventSynchronize(g_prof.ev[2 * g_prof.n_pend - 1]);
    for (int i = 0; i < g_prof.n_pend; i++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, g_prof.ev[2 * i], g_prof.ev[2 * i + 1]);
        g_prof.ms[g_prof.pend_slot[i]] += ms;
    }
    g_prof.n_pend = 0;
}

static void prof_print(void) {
    pthread_mutex_lock(&g_prof.lock);
    prof_drain();
    double tot = 0;
    for (int i = 0; i < g_prof.n; i++) tot += g_prof.ms[i];
    fprintf(stderr, "mtplx CUDA profile (GPU ms between each op's events; %.1f ms in all)\n", tot);
    fprintf(stderr, "  %-14s %9s %9s %10s %9s %6s\n", "op", "calls", "launches", "ms", "us/call", "share");
    for (int i = 0; i < g_prof.n; i++)
        fprintf(stderr, "  %-14s %9ld %9ld %10.2f %9.2f %5.1f%%\n", g_prof.name[i], g_prof.calls[i], g_prof.launches[i],
                g_prof.ms[i], g_prof.calls[i] ? 1e3 * g_prof.ms[i] / g_prof.calls[i] : 0.0,
                tot > 0 ? 100.0 * g_prof.ms[i] / tot : 0.0);
    pthread_mutex_unlock(&g_prof.lock);
}

static int prof_on(void) {
    if (g_prof_on < 0) {
        g_prof_on = cu_set.profile;
        if (g_prof_on) atexit(prof_print);
    }
    return g_prof_on;
}

/* ------------------------------------------------------------------ the deferred residual add
 *
 * The forward always adds a block's output into the residual rows and then normalizes them
 * (trunk_rows: add, rmsnorm). A top-level add is therefore not launched at once: it is kept here, and
 * the next top-level op either takes it into its own kernel (rmsnorm of exactly those rows: x += o is
 * done by the norm's block, the same fp32 add, before it reads the row) or, for any other op, it is
 * launched first (cu_prof's constructor, buf_free, destroy). Per host thread, like the ops of one
 * forward; $MTPLX_CUDA_FUSE=0: off. */
typedef struct {
    float *x;
    const float *o;
    size_t n; /* floats; 0: nothing pending */
} add_pending;

static thread_local add_pending t_add;

__global__ void k_add(float *x, const float *o, size_t n) {
    CU_PDL_ENTRY();
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += o[i];
}

static void add_launch(float *x, const float *o, size_t n) {
    cu_launch(k_add, (unsigned)((n + 255) / 256), 256, 0, x, o, n);
    CU_LAUNCHED("add");
}

/* Launches the pending add, if any. */
static void add_flush(void) {
    if (!t_add.n) return;
    size_t n = t_add.n;
    t_add.n = 0;
    add_launch(t_add.x, t_add.o, n);
}

/* The pending add when it is exactly x[R][n] += o (contiguous rows), taken (no longer pending);
 * else NULL after launching whatever was pending. */
static const float *add_take(const float *x, int ldx, int n, int R) {
    if (t_add.n && t_add.x == x && ldx == n && t_add.n == (size_t)R * n) {
        t_add.n = 0;
        return t_add.o;
    }
    add_flush();
    return NULL;
}

cu_prof::cu_prof(const char *name, int keep_add) {
    slot = -1;
    if (cu_op_depth++) return;
    cu_op_seq++;
    thread_note();
    if (!keep_add) add_flush();
    if (!prof_on() || (cu_set.profile_rows && t_fwd_rows != cu_set.profile_rows)) return;
    pthread_mutex_lock(&g_prof.lock);
    int i = 0;
    while (i < g_prof.n && g_prof.name[i] != name) i++;
    if (i == g_prof.n && i < PROF_OPS) g_prof.name[g_prof.n++] = name;
    if (i < PROF_OPS) {
        if (g_prof.n_pend == PROF_PENDING) prof_drain();
        int e = 2 * g_prof.n_pend;
        while (g_prof.n_ev < e + 2) cudaEventCreate(&g_prof.ev[g_prof.n_ev++]);
        cudaEventRecord(g_prof.ev[e], CU_STREAM);
        g_prof.calls[i]++;
        slot = i;
    }
    pthread_mutex_unlock(&g_prof.lock);
    t_prof_slot = slot;
}

cu_prof::~cu_prof() {
    if (--cu_op_depth || slot < 0) return;
    pthread_mutex_lock(&g_prof.lock);
    int e = 2 * g_prof.n_pend;
    cudaEventRecord(g_prof.ev[e + 1], CU_STREAM);
    g_prof.pend_slot[g_prof.n_pend++] = slot;
    pthread_mutex_unlock(&g_prof.lock);
    t_prof_slot = -1;
}

void cu_launched(const char *what) {
    if (cu_rec_on) cu_rec_name(what); /* recorded, not launched: errors show at the graph's capture */
    cu_check(cudaGetLastError(), what);
    __atomic_fetch_add(&g_launches, 1, __ATOMIC_RELAXED);
    if (g_prof_on > 0 && t_prof_slot >= 0) __atomic_fetch_add(&g_prof.launches[t_prof_slot], 1, __ATOMIC_RELAXED);
}

long cu_launch_count(void) { return __atomic_load_n(&g_launches, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------------ device copies */

static size_t slot_of(const void *key, size_t cap) {
    uint64_t h = (uint64_t)(uintptr_t)key * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17) & (cap - 1);
}

static size_t dtype_bytes(mtplx_dtype d) { return d == DT_F32 ? 4 : 2; }

static void weight_free(cu_wdev *e);

/* e->sbt for a quantized w (cu_wdev): built on the host from w's 16-bit scales and biases, uploaded.
 * Returns 0, or MTPLX_ENOMEM with the sizes in err. */
static int sbt_upload(cu_ctx *c, const be_weight *w, cu_wdev *e, mtplx_err *err) {
    size_t N = (size_t)w->rows, G = (size_t)w->cols / (size_t)w->group_size, T = (N + 15) / 16;
    size_t n = T * G * 16;
    uint32_t *h = (uint32_t *)malloc(n * sizeof *h);
    if (!h) return err_set(err, MTPLX_ENOMEM, "CUDA backend: out of host memory for a %dx%d weight's scales", w->rows, w->cols);
    const uint16_t *s = (const uint16_t *)w->scales, *b = (const uint16_t *)w->biases;
    for (size_t t = 0; t < T; t++)
        for (size_t g = 0; g < G; g++)
            for (size_t i = 0; i < 16; i++) {
                size_t row = t * 16 + (i >> 1) + 8 * (i & 1); /* entry (i/2, i%2): rows i/2 and i/2 + 8 */
                h[(t * G + g) * 16 + i] = row < N ? (uint32_t)s[row * G + g] | (uint32_t)b[row * G + g] << 16 : 0u;
            }
    void *d = NULL;
    cudaError_t ce = cudaMalloc(&d, n * sizeof *h);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        free(h);
        return err_set(err, MTPLX_ENOMEM, "CUDA backend: GPU %d out of memory for a %dx%d weight's scales (%zu bytes)",
                       c->device, w->rows, w->cols, n * sizeof *h);
    }
    cu_memcpy_sync(d, h, n * sizeof *h, cudaMemcpyHostToDevice, "weight upload");
    free(h);
    e->sbt = d;
    e->bytes += n * sizeof *h;
    return 0;
}

/* Uploads w into *e (e->host already set). Returns 0, or MTPLX_ENOMEM with the sizes in err. */
static int weight_upload(cu_ctx *c, const be_weight *w, cu_wdev *e, mtplx_err *err) {
    size_t R = (size_t)w->rows, K = (size_t)w->cols, nb[3] = {0, 0, 0};
    const void *src[3] = {w->data, w->scales, w->biases};
    if (w->dtype == DT_U32) {
        nb[0] = R * (K * (size_t)w->bits / 32) * 4;
        nb[1] = nb[2] = R * (K / (size_t)w->group_size) * dtype_bytes(w->scale_dtype);
    } else if (w->dtype == DT_F32 || w->dtype == DT_BF16 || w->dtype == DT_F16) {
        nb[0] = R * K * dtype_bytes(w->dtype);
    } else {
        return err_set(err, MTPLX_EUNSUPPORTED, "CUDA backend: weight dtype %d not supported", (int)w->dtype);
    }
    void *dst[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (!nb[i]) continue;
        cudaError_t ce = cudaMalloc(&dst[i], nb[i]);
        if (ce != cudaSuccess) {
            size_t fr = 0, tot = 0;
            cudaGetLastError();
            cudaMemGetInfo(&fr, &tot);
            for (int j = 0; j < i; j++) cudaFree(dst[j]);
            return err_set(err, MTPLX_ENOMEM,
                           "CUDA backend: GPU %d out of memory for a %dx%d weight (%zu bytes; %.2f GiB free of "
                           "%.2f GiB, %.2f GiB already in weights)",
                           c->device, w->rows, w->cols, nb[i], fr / 1073741824.0, tot / 1073741824.0,
                           c->weight_bytes / 1073741824.0);
        }
        cu_memcpy_sync(dst[i], src[i], nb[i], cudaMemcpyHostToDevice, "weight upload");
    }
    e->data = dst[0];
    e->scales = dst[1];
    e->biases = dst[2];
    e->sbt = NULL;
    e->bytes = nb[0] + nb[1] + nb[2];
    if (w->dtype == DT_U32 && w->scale_dtype != DT_F32 && K % 128 == 0) {
        int rc = sbt_upload(c, w, e, err);
        if (rc) {
            weight_free(e);
            return rc;
        }
    }
    c->weight_bytes += e->bytes;
    return 0;
}

static void weight_free(cu_wdev *e) {
    cudaFree(e->data);
    cudaFree(e->scales);
    cudaFree(e->biases);
    cudaFree(e->sbt);
    e->data = e->scales = e->biases = e->sbt = NULL;
}

/* The slot for key in the weight table (grown to keep it at most half full). Caller holds the lock. */
static cu_wdev *wslot(cu_ctx *c, const void *key) {
    if (2 * (c->w_n + 1) > c->w_cap) {
        size_t nc = c->w_cap ? 2 * c->w_cap : 1024;
        cu_wdev *nt = (cu_wdev *)calloc(nc, sizeof *nt);
        if (!nt) cu_check(cudaErrorMemoryAllocation, "weight table");
        for (size_t i = 0; i < c->w_cap; i++) {
            if (!c->w[i].host) continue;
            size_t s = slot_of(c->w[i].host, nc);
            while (nt[s].host) s = (s + 1) & (nc - 1);
            nt[s] = c->w[i];
        }
        free(c->w);
        c->w = nt;
        c->w_cap = nc;
    }
    size_t s = slot_of(key, c->w_cap);
    while (c->w[s].host && c->w[s].host != key) s = (s + 1) & (c->w_cap - 1);
    return &c->w[s];
}

const cu_wdev *cu_weight(cu_ctx *c, const be_weight *w) {
    pthread_mutex_lock(&c->lock);
    cu_wdev *e = wslot(c, w->data);
    if (!e->host) {
        mtplx_err err;
        err_clear(&err);
        cu_graph_break();
        e->host = w->data;
        if (weight_upload(c, w, e, &err)) {
            fprintf(stderr, "mtplx: %s\n", err.msg);
            abort();
        }
        c->w_n++;
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

const float *cu_vec(cu_ctx *c, const float *h, size_t bytes) {
    if (!h) return NULL;
    pthread_mutex_lock(&c->lock);
    if (2 * (c->v_n + 1) > c->v_cap) {
        size_t nc = c->v_cap ? 2 * c->v_cap : 1024;
        cu_vdev *nt = (cu_vdev *)calloc(nc, sizeof *nt);
        if (!nt) cu_check(cudaErrorMemoryAllocation, "vector table");
        for (size_t i = 0; i < c->v_cap; i++) {
            if (!c->v[i].host) continue;
            size_t s = slot_of(c->v[i].host, nc);
            while (nt[s].host) s = (s + 1) & (nc - 1);
            nt[s] = c->v[i];
        }
        free(c->v);
        c->v = nt;
        c->v_cap = nc;
    }
    size_t s = slot_of(h, c->v_cap);
    while (c->v[s].host && c->v[s].host != h) s = (s + 1) & (c->v_cap - 1);
    cu_vdev *e = &c->v[s];
    if (e->host && e->bytes >= bytes) {
        pthread_mutex_unlock(&c->lock);
        return (const float *)e->dev;
    }
    cu_graph_break();
    if (!e->host) {
        cudaPointerAttributes at;
        if (cudaPointerGetAttributes(&at, h) == cudaSuccess &&
            (at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged)) {
            pthread_mutex_unlock(&c->lock);
            return h; /* already backend memory (a buffer of this backend) */
        }
        cudaGetLastError();
    } else {
        cudaFree(e->dev); /* asked for more bytes than the first use: re-copy */
        c->v_n--;
    }
    e->host = h;
    e->bytes = bytes;
    CU_CHECK(cudaMalloc(&e->dev, bytes ? bytes : 4), "vector upload");
    cu_memcpy_sync(e->dev, h, bytes, cudaMemcpyHostToDevice, "vector upload");
    c->v_n++;
    pthread_mutex_unlock(&c->lock);
    return (const float *)e->dev;
}

/* The ring path of cu_stage_idx: the host array is copied into the pinned mirror and sent with an
 * async copy on the stream, so the host does not wait for the queued kernels (a blocking
 * copy per attention call drained the GPU once per sequence and layer: bench/batching.md, "More
 * cores and a GPU"). A region is reused only after a wrap, which waits for the device first, so no
 * queued kernel or copy still reads it. Returns the device address, or NULL when the ring cannot be
 * had (the caller then stages the blocking way). Called with c->lock held. */
static const int32_t *stage_ring_to(cu_ctx *c, void *dst, const void *h, size_t bytes) {
    size_t n = (bytes + 3) / 4; /* ring entries */
    if (c->ring_failed || n > CU_IDX_RING / 8) return NULL;
    if (!c->d_ring) {
        cu_graph_break();
        if (cudaMalloc(&c->d_ring, CU_IDX_RING * sizeof(int32_t)) != cudaSuccess ||
            cudaMallocHost(&c->h_ring, CU_IDX_RING * sizeof(int32_t)) != cudaSuccess) {
            cudaGetLastError(); /* clear the failed allocation's error before the next launch check */
            c->ring_failed = 1;
            return NULL;
        }
        c->ring_at = 0;
    }
    if (c->ring_at + n > CU_IDX_RING) {
        cu_graph_break();
        /* another thread's recording may still hold regions it has not launched: stage the blocking way */
        if (cu_graph_in_flight()) return NULL;
        CU_CHECK(cudaStreamSynchronize(CU_STREAM), "index staging");
        c->ring_at = 0;
    }
    size_t at = c->ring_at;
    c->ring_at = (at + n + 31) & ~(size_t)31; /* 128-byte aligned starts */
    memcpy(c->h_ring + at, h, bytes);
    cu_copy_async(dst ? dst : c->d_ring + at, c->h_ring + at, bytes, cudaMemcpyHostToDevice, "index staging");
    return c->d_ring + at;
}

static const int32_t *stage_ring(cu_ctx *c, const int32_t *h, size_t n) {
    return stage_ring_to(c, NULL, h, n * sizeof(int32_t));
}

const int32_t *cu_stage_idx(cu_ctx *c, const int32_t *h, size_t n) {
    pthread_mutex_lock(&c->lock);
    const int32_t *d = stage_ring(c, h, n);
    pthread_mutex_unlock(&c->lock);
    if (d) return d;
    if (n > c->idx_cap) {
        cudaFree(c->d_idx);
        size_t nc = n < 4096 ? 4096 : 2 * n;
        CU_CHECK(cudaMalloc(&c->d_idx, nc * sizeof(int32_t)), "index staging");
        c->idx_cap = nc;
    }
    /* the previous user of d_idx may still be queued: a copy on the stream orders after it */
    cu_memcpy_sync(c->d_idx, h, n * sizeof(int32_t), cudaMemcpyHostToDevice, "index staging");
    return c->d_idx;
}

/* ------------------------------------------------------------------ memory ops */

struct be_buf {
    void *p;
    size_t bytes;
};

static int cu_buf_alloc(be_backend *be, size_t bytes, int zero, const char *what, be_buf **out, mtplx_err *err) {
    *out = NULL;
    thread_note();
    cu_graph_break();
    be_buf *b = (be_buf *)calloc(1, sizeof *b);
    if (!b) return err_set(err, MTPLX_ENOMEM, "%s: out of host memory", what);
    cudaError_t ce = cudaMalloc(&b->p, bytes ? bytes : 4);
    if (ce != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        free(b);
        return err_set(err, MTPLX_ENOMEM, "%s: %zu bytes do not fit on GPU %d (%.2f GiB free of %.2f GiB)", what,
                       bytes, cu_of(be)->device, fr / 1073741824.0, tot / 1073741824.0);
    }
    /* graph-safe: after cu_graph_break above */
    if (zero) CU_CHECK(cudaMemsetAsync(b->p, 0, bytes ? bytes : 4, CU_STREAM), what);
    b->bytes = bytes;
    *out = b;
    return 0;
}

static void cu_buf_free(be_backend *be, be_buf *b) {
    (void)be;
    if (!b) return;
    add_flush();
    cu_graph_break();
    cudaFree(b->p);
    free(b);
}

static void *cu_buf_addr(const be_buf *b) { return b ? b->p : NULL; }

#define CU_UP_ASYNC ((size_t)256 << 10) /* uploads up to this many bytes go through the pinned ring */

/* Host to device. Up to CU_UP_ASYNC bytes: copied into the index ring's pinned host half and sent with an
 * async copy in stream order (stage_ring_to), so the host does not wait for the queued kernels and the
 * copy (the MTP heads' hidden rows: one upload per draft forward); src may change once this returns.
 * Larger ones, or without the ring, or with $MTPLX_CUDA_UP_ASYNC=0: a blocking copy. */
static void cu_upload(be_backend *be, void *dst, const void *src, size_t n) {
    CU_PROF("upload");
    if (!n) return;
    if (n <= CU_UP_ASYNC && cu_set.up_async) {
        cu_ctx *c = cu_of(be);
        pthread_mutex_lock(&c->lock);
        const int32_t *d = stage_ring_to(c, dst, src, n);
        pthread_mutex_unlock(&c->lock);
        if (d) return;
    }
    cu_memcpy_sync(dst, src, n, cudaMemcpyHostToDevice, "upload");
}

#define CU_STAGE_MAX ((size_t)16 << 20) /* bytes of a thread's pinned download staging */

/* Pinned host staging for downloads, per thread (two threads may download at once); never freed. */
static thread_local void *t_stage;
static thread_local size_t t_stage_cap;

#define CU_DL_CHUNK ((size_t)128 << 10) /* bytes of a pipelined download's pieces (at least) */
#define CU_DL_PIECES 16                   /* at most this many pieces (events) per staging fill */

/* A staging fill of k bytes (k <= t_stage_cap) from src to dst in pieces: every piece's copy is queued
 * with an event behind it, and the host copies piece i out of the staging while the copy engine moves
 * piece i + 1 (a 1 MB logits row: the DMA and the host copy overlap instead of adding up). */
static void download_pieces(void *dst, const void *src, size_t k) {
    static thread_local cudaEvent_t ev[CU_DL_PIECES];
    static thread_local int have_ev;
    if (!have_ev) {
        for (int i = 0; i < CU_DL_PIECES; i++)
            CU_CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming), "download");
        have_ev = 1;
    }
    size_t piece = (k + CU_DL_PIECES - 1) / CU_DL_PIECES;
    piece = piece < CU_DL_CHUNK ? CU_DL_CHUNK : (piece + 4095) & ~(size_t)4095;
    int np = (int)((k + piece - 1) / piece);
    for (int i = 0; i < np; i++) {
        size_t at = (size_t)i * piece, len = k - at < piece ? k - at : piece;
        /* graph-safe: cu_download ended any recording */
        CU_CHECK(cudaMemcpyAsync((char *)t_stage + at, (const char *)src + at, len, cudaMemcpyDeviceToHost, CU_STREAM),
                 "download");
        CU_CHECK(cudaEventRecord(ev[i], CU_STREAM), "download");
    }
    for (int i = 0; i < np; i++) {
        size_t at = (size_t)i * piece, len = k - at < piece ? k - at : piece;
        CU_CHECK(cudaEventSynchronize(ev[i]), "download");
        memcpy((char *)dst + at, (const char *)t_stage + at, len);
    }
    __atomic_fetch_add(&g_syncs, 1, __ATOMIC_RELAXED);
}

/* Device to host through the thread's pinned staging (a DMA at full speed, then a host copy) in
 * pieces of at most CU_STAGE_MAX bytes, each pipelined from 2 · CU_DL_CHUNK bytes (download_pieces);
 * pageable and blocking when pinned memory cannot be had. */
static void cu_download(be_backend *be, void *dst, const void *src, size_t n) {
    CU_PROF("download");
    (void)be;
    if (!n) return;
    cu_graph_break();
    step_mark(1);
    if (cu_top_mirror_take(dst, src, n)) { /* a logits_top answer, already in host memory (cuda_top.cu) */
        __atomic_fetch_add(&g_syncs, 1, __ATOMIC_RELAXED);
        step_mark(0);
        return;
    }
    size_t want = n < CU_STAGE_MAX ? n : CU_STAGE_MAX;
    if (t_stage_cap < want) {
        cudaFreeHost(t_stage);
        t_stage = NULL, t_stage_cap = 0;
        size_t cap = want < ((size_t)1 << 20) ? ((size_t)1 << 20) : want;
        if (cudaMallocHost(&t_stage, cap) == cudaSuccess) t_stage_cap = cap;
        else cudaGetLastError();
    }
    if (!t_stage_cap) {
        cu_memcpy_sync(dst, src, n, cudaMemcpyDeviceToHost, "download");
    } else {
        for (size_t at = 0; at < n; at += t_stage_cap) {
            size_t k = n - at < t_stage_cap ? n - at : t_stage_cap;
            if (k >= 2 * CU_DL_CHUNK && cu_set.dl_pipe) {
                download_pieces((char *)dst + at, (const char *)src + at, k);
                continue;
            }
            cu_memcpy_sync(t_stage, (const char *)src + at, k, cudaMemcpyDeviceToHost, "download");
            memcpy((char *)dst + at, t_stage, k);
        }
    }
    step_mark(0);
}

static void cu_copy(be_backend *be, void *dst, const void *src, size_t n) {
    CU_PROF("copy");
    (void)be;
    if (n && dst != src) cu_copy_async(dst, src, n, cudaMemcpyDeviceToDevice, "copy");
}

static void cu_fill_zero(be_backend *be, void *dst, size_t n) {
    CU_PROF("fill_zero");
    (void)be;
    cu_zero_async(dst, n, "fill_zero");
}

/* ------------------------------------------------------------------ load time */

static int cu_weight_prepare(be_backend *be, be_weight *w, mtplx_err *err) {
    cu_ctx *c = cu_of(be);
    if (w->dtype == DT_U32 &&
        ((w->bits != 4 && w->bits != 8) || (w->group_size != 32 && w->group_size != 64 && w->group_size != 128) ||
         w->cols % w->group_size || (w->scale_dtype != DT_BF16 && w->scale_dtype != DT_F16 && w->scale_dtype != DT_F32)))
        return err_set(err, MTPLX_EUNSUPPORTED, "CUDA backend: quantized weight %dx%d: %d bits, group %d not supported",
                       w->rows, w->cols, w->bits, w->group_size);
    thread_note();
    cu_graph_break();
    pthread_mutex_lock(&c->lock);
    cu_wdev *e = wslot(c, w->data);
    int fresh = !e->host;
    if (!fresh) { /* prepare means "this is the content now": re-upload (a reused host address) */
        c->weight_bytes -= e->bytes;
        weight_free(e);
    }
    e->host = w->data;
    int rc = weight_upload(c, w, e, err);
    if (rc) e->host = fresh ? NULL : e->host;
    if (!rc && fresh) c->w_n++;
    if (rc && !fresh) { /* the slot keeps its key but has no copy: drop it by rebuilding lazily */
        e->data = e->scales = e->biases = e->sbt = NULL;
        e->bytes = 0;
    }
    pthread_mutex_unlock(&c->lock);
    return rc;
}

static size_t cu_weight_bytes(const be_backend *be) { return ((const cu_ctx *)be->impl)->weight_bytes; }

static int cu_reserve_rows(be_backend *be, int rows, int max_cols, mtplx_err *err) {
    (void)be, (void)rows, (void)max_cols, (void)err; /* kernels need no scratch beyond their buffers */
    return 0;
}

static size_t cu_attn_scratch_floats(const be_backend *be, int capacity, int rotary_dim) {
    (void)be, (void)capacity, (void)rotary_dim; /* RoPE and scores live in registers / shared memory */
    return 1;
}

/* ------------------------------------------------------------------ row ops */

/* One block per row (cu_rms_threads(n) threads): y = (x · inv) · w with inv = 1/sqrt(mean(x²) + eps),
 * as kern_rmsnorm_rows; with o, the row is first x += o (the deferred residual add; each thread adds
 * the entries it reads). */
__global__ void __launch_bounds__(1024) k_rmsnorm(float *y, int ldy, float *x, int ldx, const float *o, const float *w, int n, float eps) {
    CU_PDL_ENTRY();
    __shared__ float sh[33];
    float *xt = x + (size_t)blockIdx.x * ldx;
    float *yt = y + (size_t)blockIdx.x * ldy;
    float s = 0.f;
    if (o) {
        const float *ot = o + (size_t)blockIdx.x * n;
        for (int i = threadIdx.x; i < n; i += blockDim.x) xt[i] += ot[i];
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) s = fmaf(xt[i], xt[i], s);
    float inv = 1.0f / sqrtf(cu_block_sum(s, sh) / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yt[i] = (xt[i] * inv) * w[i];
}

static void cu_rmsnorm_rows(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w, int n, int R,
                            float eps) {
    if (R <= 0) return;
    CU_PROF_KEEP_ADD("rmsnorm");
    const float *dw = cu_vec(cu_of(be), w, sizeof(float) * n);
    const float *o = add_take(x, ldx, n, R);
    if (cu_mma_rmsnorm(y, ldy, (float *)x, ldx, o, dw, n, R, eps)) return;
    cu_launch(k_rmsnorm, R, cu_rms_threads(n), 0, y, ldy, (float *)x, ldx, o, dw, n, eps);
    CU_LAUNCHED("rmsnorm");
}

static void cu_add(be_backend *be, float *x, const float *o, size_t n) {
    CU_PROF("add");
    (void)be;
    if (!n) return;
    if (cu_op_depth == 1 && cu_fuse_enabled()) { /* the next op launches or takes it (see add_pending) */
        t_add = (add_pending){x, o, n};
        return;
    }
    add_launch(x, o, n);
}

__global__ void k_swiglu(float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int n) {
    CU_PDL_ENTRY();
    int c = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (c < n) y[(size_t)t * ldy + c] = cu_silu(g[(size_t)t * ldg + c]) * u[(size_t)t * ldu + c];
}

void cu_swiglu(float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int n, int R) {
    if (R <= 0 || n <= 0) return;
    cu_launch(k_swiglu, dim3((n + 255) / 256, R), 256, 0, y, ldy, g, ldg, u, ldu, n);
    CU_LAUNCHED("swiglu");
}

static void cu_swiglu_rows(be_backend *be, float *y, const float *g, const float *u, int ld, int n, int R) {
    CU_PROF("swiglu");
    (void)be;
    if (R > 0 && n > 0 && cu_mma_swiglu(y, ld, g, ld, u, ld, n, R)) return;
    cu_swiglu(y, ld, g, ld, u, ld, n, R);
}

/* y_t[c] = silu(Σ_j w[c][j] · x[t + j][c]), FMA in tap order (as the CPU's SIMD paths). */
__global__ void k_conv1d_silu(float *y, int ldy, const float *x, int ldx, const float *w, int C, int kc) {
    CU_PDL_ENTRY();
    int c = blockIdx.x * blockDim.x + threadIdx.x, t = blockIdx.y;
    if (c >= C) return;
    float acc = 0.f;
    for (int j = 0; j < kc; j++) acc = fmaf(w[(size_t)c * kc + j], x[(size_t)(t + j) * ldx + c], acc);
    y[(size_t)t * ldy + c] = cu_silu(acc);
}

static void cu_conv1d_silu(be_backend *be, float *y, int ldy, const float *x, int ldx, const float *w, int C, int kc,
                           int R) {
    if (R <= 0 || C <= 0) return;
    CU_PROF("conv1d_silu");
    const float *dw = cu_vec(cu_of(be), w, sizeof(float) * (size_t)C * kc);
    cu_launch(k_conv1d_silu, dim3((C + 127) / 128, R), 128, 0, y, ldy, x, ldx, dw, C, kc);
    CU_LAUNCHED("conv1d_silu");
}

/* ------------------------------------------------------------------ the backend */

static void cu_destroy(be_backend *be);

static be_ops make_ops(void) {
    be_ops o;
    memset(&o, 0, sizeof o);
    o.name = "cuda";
    o.destroy = cu_destroy;
    o.buf_alloc = cu_buf_alloc;
    o.buf_free = cu_buf_free;
    o.buf_addr = cu_buf_addr;
    o.upload = cu_upload;
    o.download = cu_download;
    o.copy = cu_copy;
    o.fill_zero = cu_fill_zero;
    o.weight_prepare = cu_weight_prepare;
    o.weight_bytes = cu_weight_bytes;
    o.reserve_rows = cu_reserve_rows;
    o.attn_scratch_floats = cu_attn_scratch_floats;
    o.moe_scratch_new = cu_moe_scratch_new;
    o.moe_scratch_free = cu_moe_scratch_free;
    o.matmul = cu_matmul;
    o.matmul_n = cu_matmul_n;
    o.embed_rows = cu_embed_rows;
    o.embed_norm_pair_rows = cu_embed_norm_pair_rows;
    o.rmsnorm_rows = cu_rmsnorm_rows;
    o.add = cu_add;
    o.swiglu_rows = cu_swiglu_rows;
    o.conv1d_silu = cu_conv1d_silu;
    o.attention = cu_attention;
    o.mla = cu_mla;
    o.gdn = cu_gdn;
    o.gdn_replay = cu_gdn_replay;
    o.gdn_commit = cu_gdn_commit;
    o.logits_top = cu_logits_top;
    o.attention_seqs = cu_attention_seqs;
    o.mla_seqs = cu_mla_seqs;
    o.gdn_seqs = cu_gdn_seqs;
    o.moe = cu_moe;
    return o;
}

static const be_ops cu_ops = make_ops();

extern "C" int be_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" int be_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes, char *name, size_t name_len,
                                mtplx_err *err) {
    int n = be_cuda_device_count();
    if (device < 0 || device >= n)
        return err_set(err, MTPLX_EINVAL, "CUDA device %d does not exist (%d GPU%s visible)", device, n,
                       n == 1 ? "" : "s");
    cudaError_t ce = cudaSetDevice(device);
    if (ce == cudaSuccess) ce = cudaMemGetInfo(free_bytes, total_bytes);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        return err_set(err, MTPLX_EIO, "CUDA device %d: %s", device, cudaGetErrorString(ce));
    }
    if (name && name_len) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, device) == cudaSuccess) snprintf(name, name_len, "%s", p.name);
        else snprintf(name, name_len, "GPU %d", device);
    }
    return 0;
}

/* ------------------------------------------------------------------ settings */

/* the defaults until a backend installs its own */
cu_settings cu_set = [] {
    cu_settings s = {}; /* by name: a positional list went stale when fields were added in the middle */
    s.stream = 1, s.seq_batch = 1, s.commit = 1, s.top = 1, s.top_min_vocab = 1, s.gdn_reg = 1;
    s.mma = 1, s.sk = 1, s.sk_group = 1, s.gemm = 1, s.moe = 1, s.moe_slots = 32, s.moe_stage = 1, s.moe_gate1 = 1;
    s.moe_tstage = 1, s.moe_tloop = 8, s.moe_trows = 8;
    s.gdn_l2 = 1, s.seq_inline = 1, s.seq_pdl = 1, s.up_async = 1, s.gdn_xpose = 1, s.att_group = 1;
    s.att_qb = 16;
    return s;
}();

/* Strict reads of the MTPLX_CUDA_* knobs (base/env.h): the first variable not of its kind is kept in
 * err and makes cu_settings_from_env fail; every knob still gets a value. */
typedef struct {
    int rc;
    mtplx_err *err;
} knob_reader;

/* $name as 0 / 1, def when unset or empty (the switches, on or off by default). */
static int knob_switch(knob_reader *k, const char *name, int def) {
    int v;
    if (env_switch(name, def, &v, k->rc ? NULL : k->err)) k->rc = MTPLX_EINVAL;
    return v;
}

/* $name as a whole number in [lo, hi], def when unset or empty (0 = the sweep knobs' "default"). */
static int knob_int(knob_reader *k, const char *name, int def, int lo, int hi) {
    int v;
    if (env_int(name, def, lo, hi, &v, k->rc ? NULL : k->err)) k->rc = MTPLX_EINVAL;
    return v;
}

#define SW(name, def) knob_switch(&k, name, def)
#define NUM(name) knob_int(&k, name, 0, 0, 1 << 30)

extern "C" int cu_settings_from_env(cu_settings *s, mtplx_err *err) {
    knob_reader k = {0, err};
    s->stream = SW("MTPLX_CUDA_STREAM", 1);
    /* on by default: embedded model AR +38-53%, D3 +24-32% (bench/cuda.md, "Session 5, final run") */
    s->fuse = SW("MTPLX_CUDA_FUSE", 1);
    s->pdl = SW("MTPLX_CUDA_PDL", 1);
    s->fuse_seq = SW("MTPLX_CUDA_FUSE_SEQ", 1);
    s->graph = SW("MTPLX_CUDA_GRAPH", 0);
    s->seq_batch = SW("MTPLX_CUDA_SEQ_BATCH", 1);
    s->commit = knob_int(&k, "MTPLX_CUDA_COMMIT", 1, 0, 2);
    s->top = SW("MTPLX_CUDA_TOP", 1);
    s->top_min_vocab = knob_int(&k, "MTPLX_CUDA_TOP_MIN_VOCAB", 1, 1, 1 << 30);
    s->top_row = SW("MTPLX_CUDA_TOP_ROW", 1);
    s->top_mapped = SW("MTPLX_CUDA_TOP_MAPPED", 1);
    s->fuse_mtp_in = SW("MTPLX_CUDA_FUSE_MTP_IN", 1);
    s->fuse_att_prep = SW("MTPLX_CUDA_FUSE_ATT_PREP", 1);
    s->att_merge_last = SW("MTPLX_CUDA_ATT_MERGE_LAST", 1);
    s->prefill_rows = knob_int(&k, "MTPLX_CUDA_PREFILL_ROWS", 512, 32, 4096);
    s->gdn_reg = SW("MTPLX_CUDA_GDN", 1);
    s->profile = knob_int(&k, "MTPLX_CUDA_PROFILE", 0, 0, 2);
    s->profile_rows = NUM("MTPLX_CUDA_PROFILE_ROWS");
    s->steps = SW("MTPLX_CUDA_STEPS", 0);
    s->verbose = SW("MTPLX_CUDA_VERBOSE", 0);
    s->mma = SW("MTPLX_CUDA_MMA", 1);
    s->sk = SW("MTPLX_CUDA_SK", 1);
    s->sk_group = SW("MTPLX_CUDA_SK_GROUP", 1);
    s->sk_u = NUM("MTPLX_CUDA_SK_U");
    s->sk_ga = SW("MTPLX_CUDA_SK_GA", -1);
    s->sk_dp = knob_int(&k, "MTPLX_CUDA_SK_DP", -1, 0, 4);
    s->sk_bu = NUM("MTPLX_CUDA_SK_BU");
    s->sk_bps = NUM("MTPLX_CUDA_SK_BPS");
    s->sk_minu = NUM("MTPLX_CUDA_SK_MINU");
    s->sk_il = SW("MTPLX_CUDA_SK_IL", -1);
    s->thin = SW("MTPLX_CUDA_THIN", 1);
    s->sk_rg = knob_int(&k, "MTPLX_CUDA_SK_RG", 2, 0, 3);
    static const char *const sk_rows[] = {"16", "32"};
    int skr = 1;
    if (env_word("MTPLX_CUDA_SK_ROWS", sk_rows, 2, 1, &skr, k.rc ? NULL : err)) k.rc = MTPLX_EINVAL;
    s->sk_rows = skr == 0 ? 16 : SK_ROWS;
    s->rms_batch = NUM("MTPLX_CUDA_RMS_BATCH");
    s->gemm = SW("MTPLX_CUDA_GEMM", 1);
    s->gemm_min = NUM("MTPLX_CUDA_GEMM_MIN");
    s->gemm_mt = NUM("MTPLX_CUDA_GEMM_MT");
    s->gemm_ks = NUM("MTPLX_CUDA_GEMM_KS");
    s->gemm_st = NUM("MTPLX_CUDA_GEMM_ST");
    s->moe = SW("MTPLX_CUDA_MOE", 1);
    s->moe_slots = knob_int(&k, "MTPLX_CUDA_MOE_SLOTS", 32, 0, 1 << 30);
    s->moe_stage = SW("MTPLX_CUDA_MOE_STAGE", 1);
    s->moe_gate1 = SW("MTPLX_CUDA_MOE_GATE1", 1);
    s->moe_tstage = SW("MTPLX_CUDA_MOE_TSTAGE", 1);
    s->moe_tloop = knob_int(&k, "MTPLX_CUDA_MOE_TLOOP", 8, 1, 1 << 20);
    /* tiles of 8 rows: 35B-A3B-10l q4 4k prefill 8,687-8,689 -> 9,082-9,083 tok/s on an H100 (bench/cuda.md,
       "Session 34"); 4 is kept for comparison */
    s->moe_trows = knob_int(&k, "MTPLX_CUDA_MOE_TROWS", 8, 4, 8);
    if (s->moe_trows != 4 && s->moe_trows != 8 && !k.rc)
        k.rc = err_set(err, MTPLX_EINVAL, "MTPLX_CUDA_MOE_TROWS=%d: expected 4 or 8", s->moe_trows);
    s->gdn_l2 = SW("MTPLX_CUDA_GDN_L2", 1);
    s->seq_inline = SW("MTPLX_CUDA_SEQ_INLINE", 1);
    s->dl_pipe = SW("MTPLX_CUDA_DL_PIPE", 0);
    s->seq_pdl = SW("MTPLX_CUDA_SEQ_PDL", 1);
    int rt = knob_int(&k, "MTPLX_CUDA_RMS_THREADS", 0, 0, 1024);
    if (rt % 32 && !k.rc) k.rc = err_set(err, MTPLX_EINVAL, "MTPLX_CUDA_RMS_THREADS=%d: expected a multiple of 32 in [32, 1024]", rt);
    s->rms_threads = rt >= 32 && rt % 32 == 0 ? rt : 0;
    s->up_async = SW("MTPLX_CUDA_UP_ASYNC", 1);
    s->gdn_split = NUM("MTPLX_CUDA_GDN_SPLIT");
    s->gdn_xpose = SW("MTPLX_CUDA_GDN_XPOSE", 1);
    s->att_group = knob_int(&k, "MTPLX_CUDA_ATT_GROUP", 1, 0, 2);
    s->att_qb = knob_int(&k, "MTPLX_CUDA_ATT_QB", 16, 8, 32);
    if (s->att_qb != 8 && s->att_qb != 16 && s->att_qb != 32 && !k.rc)
        k.rc = err_set(err, MTPLX_EINVAL, "MTPLX_CUDA_ATT_QB=%d: expected 8, 16 or 32", s->att_qb);
    return k.rc;
}

#undef SW
#undef NUM

extern "C" int be_cuda_new(int device, const cu_settings *s, be_backend **out, mtplx_err *err) {
    *out = NULL;
    size_t fr, tot;
    int rc = be_cuda_mem_info(device, &fr, &tot, NULL, 0, err);
    if (rc) return rc;
    cudaDeviceProp p;
    CU_CHECK(cudaGetDeviceProperties(&p, device), "device properties");
    if (p.major < 7)
        return err_set(err, MTPLX_EUNSUPPORTED, "CUDA device %d (%s) has compute capability %d.%d; this build needs sm_90",
                       device, p.name, p.major, p.minor);
    be_backend *be = (be_backend *)calloc(1, sizeof *be);
    cu_ctx *c = (cu_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return err_set(err, MTPLX_ENOMEM, "CUDA backend: out of host memory");
    }
    c->device = device;
    pthread_mutex_init(&c->lock, NULL);
    static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&stream_lock);
    static int stream_made = 0;
    if (!stream_made) { /* one stream per process, on the first backend's device; its settings rule */
        cu_set = *s;
        if (cu_set.stream) CU_CHECK(cudaStreamCreateWithFlags(&cu_stream_g, cudaStreamNonBlocking), "stream");
        stream_made = 1;
    }
    pthread_mutex_unlock(&stream_lock);
    be->ops = &cu_ops;
    be->caps.host_memory = 0;
    be->caps.logits_top = cu_set.top;
    be->caps.logits_top_min_vocab = cu_set.top_min_vocab;
    be->caps.prefill_rows = cu_set.prefill_rows;
    be->impl = c;
    if (s->verbose)
        fprintf(stderr, "mtplx: CUDA backend on GPU %d (%s, sm_%d%d, %.1f GiB free)\n", device, p.name, p.major,
                p.minor, fr / 1073741824.0);
    *out = be;
    return 0;
}

/* Frees every device copy and the backend (buffers are freed by their owners before this). */
static void cu_destroy(be_backend *be) {
    cu_ctx *c = cu_of(be);
    add_flush();
    cu_graph_break();
    cudaDeviceSynchronize();
    for (size_t i = 0; i < c->w_cap; i++)
        if (c->w[i].host) weight_free(&c->w[i]);
    for (size_t i = 0; i < c->v_cap; i++)
        if (c->v[i].host) cudaFree(c->v[i].dev);
    free(c->w);
    free(c->v);
    cudaFree(c->d_idx);
    cudaFree(c->d_ring);
    cudaFreeHost(c->h_ring);
    pthread_mutex_destroy(&c->lock);
    free(c);
    free(be);
}

/* ------------------------------------------------------------------ bandwidth */

/* Reads n uint4 once (grid-stride) and folds them into *sink so the loads cannot be dropped. */
__global__ void k_stream_read(const uint4 *p, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) atomicAdd(sink, acc);
}

extern "C" int be_cuda_membw(int device, size_t bytes, int reps, double *gbs, mtplx_err *err) {
    *gbs = 0;
    cu_graph_break();
    if (cudaSetDevice(device) != cudaSuccess) {
        cudaGetLastError();
        return err_set(err, MTPLX_EIO, "CUDA device %d cannot be used", device);
    }
    size_t n = bytes / sizeof(uint4);
    uint4 *buf = NULL;
    unsigned *sink = NULL;
    if (cudaMalloc(&buf, n * sizeof(uint4)) != cudaSuccess || cudaMalloc(&sink, sizeof(unsigned)) != cudaSuccess) {
        cudaGetLastError();
        cudaFree(buf);
        return err_set(err, MTPLX_ENOMEM, "bandwidth buffer: %zu bytes do not fit on GPU %d", bytes, device);
    }
    /* graph-safe: after cu_graph_break above */
    CU_CHECK(cudaMemsetAsync(buf, 1, n * sizeof(uint4), CU_STREAM), "membw");
    cudaDeviceProp p;
    CU_CHECK(cudaGetDeviceProperties(&p, device), "membw");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < reps + 1; r++) { /* the first read warms up */
        cudaEventRecord(e0, CU_STREAM);
        /* graph-safe: after cu_graph_break above */
        k_stream_read<<<p.multiProcessorCount * 8, 512, 0, CU_STREAM>>>(buf, n, sink);
        cudaEventRecord(e1, CU_STREAM);
        CU_CHECK(cudaEventSynchronize(e1), "membw");
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double g = n * sizeof(uint4) / (ms * 1e-3) / 1e9;
        if (r > 0 && g > *gbs) *gbs = g;
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(buf);
    cudaFree(sink);
    return 0;
}
