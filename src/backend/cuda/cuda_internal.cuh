/* cuda_internal.cuh — shared by the CUDA backend's .cu files: its context, device copies of weights
 * and small host vectors, error checking, and the per-file op entry points (docs/architecture.md,
 * "The CUDA backend").
 *
 * All work goes to one stream, CU_STREAM: a non-blocking stream the first backend creates (the legacy
 * default stream with $MTPLX_CUDA_STREAM=0), so ops run in call order. Every launch and copy names
 * it; a copy the host must see finished (download, upload, staging, the MoE routes) is an async copy
 * followed by a synchronization of that stream (cu_memcpy_sync), never a plain cudaMemcpy, which runs
 * on the legacy stream and is not ordered with a non-blocking one. A stream other than the legacy one
 * is what CUDA graph capture needs (docs/architecture.md, "The CUDA backend"). A CUDA error inside an op cannot be returned (ops are
 * void, backend.h): it is printed with the op's name and the process aborts, since a device fault
 * leaves the context unusable. */
#ifndef MTPLX_BACKEND_CUDA_INTERNAL_CUH
#define MTPLX_BACKEND_CUDA_INTERNAL_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>

extern "C" {
#include "../../base/err.h"
#include "cuda_backend.h"
}

/* One weight's device copy in checkpoint format (bf16 / f16 / f32 values, or MLX affine packed
 * uint32 with its scales and biases). */
typedef struct {
    const void *host;      /* key: the host description's data pointer */
    void *data, *scales, *biases;
    /* MLX weights with 16-bit scales and K % 128 == 0: scales and biases again, interleaved per 16-row
     * tile for cuda_mma_sk.cu: uint32 [ceil(N/16)][G][8][2], entry (i, h) of a group = row
     * 16·tile + i + 8h as scale | bias << 16 (zero past N); else NULL */
    void *sbt;
    size_t bytes;          /* device bytes of all four */
} cu_wdev;

/* One small host array (norm weights, RoPE frequencies, ...) copied to the device on first use. */
typedef struct {
    const void *host;      /* key */
    void *dev;
    size_t bytes;
} cu_vdev;

/* Private state of one CUDA backend. */
typedef struct {
    int device;
    pthread_mutex_t lock;  /* guards the two tables (ops may run on a server worker thread) */
    cu_wdev *w;            /* open-addressing table of weight copies, w_cap slots */
    size_t w_cap, w_n;
    cu_vdev *v;            /* open-addressing table of vector copies, v_cap slots */
    size_t v_cap, v_n;
    size_t weight_bytes;   /* device bytes held by weight copies */
    int32_t *d_idx;        /* device staging for host index arrays too big for the ring */
    size_t idx_cap;        /* int32 entries of d_idx */
    int32_t *d_ring;       /* [CU_IDX_RING] device ring for small index arrays (tokens, page tables) */
    int32_t *h_ring;       /* [CU_IDX_RING] its pinned host mirror: copies run async, in stream order */
    size_t ring_at;        /* next free entry (under lock); wrapping waits for the device */
    int ring_failed;       /* the ring could not be allocated: blocking copies into d_idx instead */
} cu_ctx;

/* The knobs in force (cuda_backend.h, cu_settings): installed by the first be_cuda_new, read by the
 * files' switches below; no file reads the environment itself. */
extern cu_settings cu_set;

/* The stream all of the backend's kernels and copies are queued on (set once, by the first be_cuda_new). */
extern cudaStream_t cu_stream_g;
#define CU_STREAM cu_stream_g

/* Step graphs (cuda_graph.cu): a forward's ops from its embedding to the first point that needs the
 * host to wait (its download) are recorded and replayed as one CUDA graph. Anything that synchronizes,
 * allocates or frees device memory calls cu_graph_break first, which ends the recording and launches
 * what was recorded (no-op when this thread is not recording). */
void cu_graph_break(void);

/* Grows the device scratch buffer *p (capacity *cap bytes) to hold `bytes`: at least `min` bytes, then
 * 1.5x what is asked, so growth is rare. Contents are lost when it grows (the old buffer is freed after
 * a graph break and the synchronizing cudaFree: no kernel still uses it). Aborts with `what` on error. */
void cu_scratch_grow(void **p, size_t *cap, size_t bytes, size_t min, const char *what);

/* Programmatic dependent launch (sm_90): cu_launch queues kernel k on CU_STREAM with the
 * programmatic-serialization attribute, so the GPU may launch it (and make its blocks resident) while
 * the kernel before it finishes, instead of after. Every kernel launched this way starts with
 * CU_PDL_ENTRY: griddepcontrol.wait blocks until the previous kernel has completed and its writes are
 * visible (so nothing of stream order is lost: no thread reads or writes memory before that), then
 * allows the next kernel to be launched. $MTPLX_CUDA_PDL=0: plain launches (the entry is then a
 * no-op). Saves the GPU's gap between back-to-back kernels (bench/cuda.md, "Session 4"). */
int cu_pdl_enabled(void);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define CU_PDL_ENTRY() asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory")
#else
#define CU_PDL_ENTRY() ((void)0)
#endif

/* cp.async (sm_80+), for kernels that stage global memory in shared memory: cu_cp16 queues 16 bytes
 * global → shared (zero-filled when !ok; src must still be a valid address), cu_cp_commit closes the
 * group of copies queued so far, cu_cp_wait<N> waits until at most N groups are still in flight. */
__device__ __forceinline__ void cu_cp16(void *dst, const void *src, bool ok) {
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cu_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N_>
__device__ __forceinline__ void cu_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N_));
}

/* Step graphs (cuda_graph.cu): while cu_rec_on, this thread's launches, device copies and zero fills
 * are recorded, not issued, and cu_graph_break replays them as one graph. cu_rec_kernel starts a
 * kernel's record, cu_rec_arg appends one argument's bytes as the kernel takes it; cu_copy_async /
 * cu_zero_async record or issue a copy / fill on CU_STREAM (abort on error with `what`). */
extern thread_local int cu_rec_on;
void cu_rec_kernel(const void *func, dim3 grid, dim3 block, size_t smem, int pdl);
void cu_rec_arg(const void *p, size_t size, size_t align);
void cu_rec_name(const char *what);
void cu_copy_async(void *dst, const void *src, size_t n, cudaMemcpyKind kind, const char *what);
void cu_zero_async(void *dst, size_t n, const char *what);
/* Starts recording a forward of `rows` rows on this thread (cu_graph_break launches it). */
void cu_graph_record(int rows);
/* Recordings in flight on any thread (the index ring must not wrap under one). */
int cu_graph_in_flight(void);
/* Step graphs launched, built (captured), updated in place, nodes patched, and recorded forwards issued
 * eagerly (met for the first time), since start. */
void cu_graph_counts(long *launches, long *builds, long *updates, long *patched, long *eager);

template <typename T>
static inline void cu_rec_arg_t(const T &v) {
    cu_rec_arg(&v, sizeof(T), alignof(T));
}

template <typename... KArgs, typename... Args>
static inline void cu_launch_pdl(int pdl, void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
    static_assert(sizeof...(KArgs) == sizeof...(Args), "cu_launch: one value per kernel parameter");
    if (cu_rec_on) { /* each value converted to its parameter's type, as a launch would */
        cu_rec_kernel((const void *)k, grid, block, smem, pdl);
        (cu_rec_arg_t<KArgs>(args), ...);
        return;
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = CU_STREAM;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    cudaLaunchKernelEx(&cfg, k, args...);
}

/* cu_launch_pdl with the process's PDL setting. */
template <typename... KArgs, typename... Args>
static inline void cu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem, Args... args) {
    cu_launch_pdl(cu_pdl_enabled(), k, grid, block, smem, args...);
}

/* n bytes copied on CU_STREAM after every queued op, and the host waits for the copy (what a
 * blocking cudaMemcpy did on the legacy stream). Aborts on error with `what`. */
void cu_memcpy_sync(void *dst, const void *src, size_t n, cudaMemcpyKind kind, const char *what);

#define CU_IDX_RING ((size_t)1 << 20) /* int32 entries: 4 MiB on the device + 4 MiB pinned */

/* Abort with the op name on a CUDA error (see the header comment). */
void cu_check(cudaError_t e, const char *what);
#define CU_CHECK(call, what) cu_check((call), (what))
#define CU_LAUNCHED(what) cu_launched(what)
/* cu_check of the last launch; counts it for the profile. */
void cu_launched(const char *what);
/* Launches counted by cu_launched so far (the process's, relaxed). */
long cu_launch_count(void);
/* cuda_top.cu: when the last logits_top wrote its answer into mapped host memory (cu_settings.top_mapped)
 * and this download (dst <- src, n bytes) is the first since, of that answer, with no launch between:
 * waits for the answer's row flags and copies it to dst; returns 1. Otherwise returns 0 (download as
 * usual). */
int cu_top_mirror_take(void *dst, const void *src, size_t n);

/* $MTPLX_CUDA_STEPS=1: marks the start of a forward (its embedding of `rows` rows) for the step table
 * (cuda_backend.cu, "step timing"). */
void cu_step_begin(int rows);

/* $MTPLX_CUDA_PROFILE=1: each op (the outermost on its thread) is bracketed by two CUDA events on the
 * stream, and at exit a table on stderr gives per op its calls, kernel launches and the GPU
 * time between its events (kernels plus any wait for the host to launch them) — where a decode step's
 * time goes (bench/cuda.md). Off: one branch per op. `name` must be a string literal. */
struct cu_prof {
    int slot;
    /* keep_add: leave a deferred residual add pending (the op takes it; cuda_backend.cu) */
    explicit cu_prof(const char *name, int keep_add = 0);
    ~cu_prof();
};
#define CU_PROF(name) cu_prof cu_prof_here_(name)
#define CU_PROF_KEEP_ADD(name) cu_prof cu_prof_here_(name, 1)
/* 0 when $MTPLX_CUDA_FUSE=0: no deferred add, no activation preparation shared across ops. */
int cu_fuse_enabled(void);
/* Every op of the table opens a cu_prof first, profiled or not: cu_op_depth is how many are open on
 * this thread (1 inside a top-level op), cu_op_seq counts the top-level ops this thread began (the
 * prepared-activation reuse of cuda_mma.cu keys on it). */
extern thread_local int cu_op_depth;
extern thread_local unsigned long cu_op_seq;

static inline cu_ctx *cu_of(be_backend *be) { return (cu_ctx *)be->impl; }

/* The device copy of w (uploaded now if weight_prepare never saw it). Never NULL (aborts on OOM). */
const cu_wdev *cu_weight(cu_ctx *c, const be_weight *w);
/* The device copy of `bytes` of host array h (h itself when it already is device memory; NULL for
 * NULL). Host arrays passed this way must not change after first use (they are model weights). */
const float *cu_vec(cu_ctx *c, const float *h, size_t bytes);
/* n int32 of a host array copied into the backend's index staging (valid until the next call). */
const int32_t *cu_stage_idx(cu_ctx *c, const int32_t *h, size_t n);

/* cuda_matmul.cu */
void cu_matmul(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w);
void cu_matmul_n(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R);
void cu_embed_rows(be_backend *be, float *y, int ldy, const be_weight *w, const int32_t *tokens, int R);
void cu_embed_norm_pair_rows(be_backend *be, float *y, int ldy, float *a, const be_weight *emb, const int32_t *tokens,
                             const float *h, int ldh, const float *we, const float *wh, int n, int R, float eps);
/* y[t·ldy + c] = silu(g[t·ldg + c]) · u[t·ldu + c] for c < n, t < R. */
void cu_swiglu(float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int n, int R);

/* cuda_mma.cu: tensor-core decode / verify matmul for bf16 (K % 32 == 0) and MLX q4 / q8 weights. */
int cu_mma_handles(const be_weight *w);
int cu_mma_enabled(void); /* 0 when $MTPLX_CUDA_MMA=0 (the CUDA-core kernel for every format; a benchmark knob) */
void cu_mma_matmul(be_backend *be, float *y, int ldy, const float *x, int ldx, int R, const be_weight *w);
/* n products of one x, the activations prepared once per weight kind; other weights via cu_matmul. */
void cu_mma_matmul_n(be_backend *be, const be_mm_out *outs, int n, const float *x, int ldx, int R);
/* Fused producers (cuda_mma.cu, "preparation shared across ops"): rmsnorm / swiglu of R rows that also
 * prepare their output for the matmul expected to read it next. Return 0 (nothing done: run the plain
 * kernel) or 1 (y written, bit-identical to the plain kernel). */
int cu_mma_rmsnorm(float *y, int ldy, float *x, int ldx, const float *o, const float *w, int n, int R, float eps);
int cu_mma_swiglu(float *y, int ldy, const float *g, int ldg, const float *u, int ldu, int n, int R);
/* A matmul wrote R rows of N outputs at y (stride ldy): forget prepared activations it overwrote. */
void cu_prep_clobber(const float *y, int ldy, int R, int N);

/* ------------------------------------------------------------------ activation preparation (cuda_mma.cu)
 *
 * A matmul's input prepared for its weight's kind: bf16 split into hi / lo halves, or q int8 per group
 * with (d, d·Σa). Defined here because producers in other files (the GDN step) prepare their output
 * in their own kernels, with this same arithmetic, so the bits are those of the stand-alone kernels. */

/* Entry (r, k) of xh / xl [R][K] = bf16(v), bf16(v − bf16(v)) (round to nearest even, as
 * _mm512_cvtne2ps_pbh). Shared by every kernel that prepares bf16 activations. */
__device__ __forceinline__ void split_one(__nv_bfloat16 *xh, __nv_bfloat16 *xl, float v, int r, int k, int K) {
    __nv_bfloat16 h = __float2bfloat16_rn(v);
    xh[(size_t)r * K + k] = h;
    xl[(size_t)r * K + k] = __float2bfloat16_rn(v - __bfloat162float(h));
}

/* One warp's part of k_qact for group g of row r, from the group's values v[j] = x[g·GS + lane + 32j]:
 * a [R][K] int8 (q4: per 8 inputs the even ones, then the odd ones, the order of the nibbles in a
 * weight word), db [R][G] = (d, d · Σa), as qact_fill_portable. Shared by every kernel that prepares
 * q activations, so they quantize identically. */
template <int GS, int BITS>
__device__ __forceinline__ void qact_group(int8_t *a, float2 *db, const float *v, int g, int r, int lane, int K) {
    constexpr int PER = GS / 32;
    int G = K / GS;
    float amax = 0.f;
#pragma unroll
    for (int j = 0; j < PER; j++) amax = fmaxf(amax, fabsf(v[j]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float dd = amax / 127.f, id = amax > 0.f ? 127.f / amax : 0.f;
    int sum = 0;
#pragma unroll
    for (int j = 0; j < PER; j++) {
        float q = rintf(v[j] * id);
        q = fminf(fmaxf(q, -127.f), 127.f);
        int k = g * GS + lane + 32 * j;
        int pos = BITS == 4 ? (k & ~7) | ((k & 1) << 2) | ((k & 7) >> 1) : k;
        a[(size_t)r * K + pos] = (int8_t)q;
        sum += (int)q;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) db[(size_t)r * G + g] = make_float2(dd, dd * (float)sum);
}

/* Where and how a producer kernel prepares its output for the matmul that reads it next (cuda_mma.cu's
 * "preparation shared across ops"): kind 0 nothing, 1 bf16 split, else q4 / q8 with group gs = kind / 4;
 * xp the thread's preparation scratch for R rows of K inputs. */
typedef struct {
    void *xp;
    int kind, R, K;
} cu_prep_out;

/* Whether a top-level op writing y (R rows of K values, stride ldy) in blocks of `unit` values each
 * should prepare them (a matmul read y with a known kind last time; unit a multiple of the q group):
 * fills *p and returns 1, else returns 0 with p->kind = 0. The op then launches its kernels with *p (each
 * block that writes a span of y calls cu_prep_from on it) and calls cu_prep_done. */
int cu_prep_begin(const float *y, int ldy, int R, int K, int unit, cu_prep_out *p);
void cu_prep_done(const cu_prep_out *p, const float *y, int ldy);

/* Block-wide (every thread of the block calls it, the same number of times, after writing src): prepares
 * the n values at src, entries c0 .. c0 + n - 1 of row `row` of the matmul's input, into p's scratch —
 * bf16 a thread an entry, q a warp a group (the block's own writes are visible after its barrier). */
__device__ __forceinline__ void cu_prep_from(const cu_prep_out &p, const float *src, int n, int c0, int row) {
    __syncthreads();
    if (p.kind == 1) {
        __nv_bfloat16 *xh = (__nv_bfloat16 *)p.xp;
        for (int i = threadIdx.x; i < n; i += blockDim.x) split_one(xh, xh + (size_t)p.R * p.K, src[i], row, c0 + i, p.K);
        return;
    }
    const int gs = p.kind / 4, lane = threadIdx.x & 31;
    const size_t ab = ((size_t)p.R * p.K + 255) & ~(size_t)255;
    int8_t *a = (int8_t *)p.xp;
    float2 *db = (float2 *)((char *)p.xp + ab);
    for (int g = threadIdx.x >> 5; g < n / gs; g += blockDim.x >> 5) { /* warp-uniform: qact_group shuffles */
        float x[4];
#pragma unroll
        for (int j = 0; j < 4; j++) x[j] = j < gs / 32 ? src[g * gs + lane + 32 * j] : 0.f;
        const int G = (c0 + g * gs) / gs;
        switch (p.kind) {
        case 2 + 4 * 32: qact_group<32, 4>(a, db, x, G, row, lane, p.K); break;
        case 2 + 4 * 64: qact_group<64, 4>(a, db, x, G, row, lane, p.K); break;
        case 2 + 4 * 128: qact_group<128, 4>(a, db, x, G, row, lane, p.K); break;
        case 3 + 4 * 32: qact_group<32, 8>(a, db, x, G, row, lane, p.K); break;
        case 3 + 4 * 64: qact_group<64, 8>(a, db, x, G, row, lane, p.K); break;
        default: qact_group<128, 8>(a, db, x, G, row, lane, p.K); break;
        }
    }
}

#define SK_ROWS 32   /* activation rows per bf16 stream-K launch (four mma N tiles of 8) */
#define SK_Q_ROWS 16 /* ... per q4 / q8 launch (cuda_mma_sk.cu says why) */
/* cuda_mma_sk.cu: the stream-K tensor-core matmul (its header comment). R <= SK_ROWS (q: SK_Q_ROWS);
 * activations prepared by cuda_mma.cu (q: int8 [R][K] and (d, d·Σa) [R][G]; bf16: hi and lo [R][K]). $MTPLX_CUDA_SK=0: off. */
int cu_sk_enabled(void);
int cu_sk_q_handles(const be_weight *w, const cu_wdev *dv);
void cu_sk_q(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const void *xa, const float *xdb, int R);
void cu_sk_bf16(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const uint16_t *xh, const uint16_t *xl,
                int R);
/* One output of a grouped call: y (stride ldy) = x · Wᵀ for weight w (device copy dv). */
typedef struct {
    float *y;
    int ldy;
    const be_weight *w;
    const cu_wdev *dv;
} cu_sk_out;
/* n outputs over the same prepared activations (weights of one kind and K), in launches of up to 4
 * weights each; every output bit-identical to its weight's cu_sk_q / cu_sk_bf16 call. */
void cu_sk_q_n(const cu_sk_out *outs, int n, const void *xa, const float *xdb, int R);
void cu_sk_bf16_n(const cu_sk_out *outs, int n, const uint16_t *xh, const uint16_t *xl, int R);

/* Warps of w's solo stream-K split (the kernels' Wn; a function of w's shape and the GPU, never of R). */
long long cu_sk_warps(const be_weight *w);
/* Multiprocessors of the current GPU (queried once; 132 if the query fails). The stream-K split is a
 * function of it and the weight's shape, never of R; the GEMM's tile choice may follow R too (its bits
 * do not change with it). */
int cu_sm_count(void);

/* cuda_gemm.cu: the many-row tensor-core matmul (its header comment), every output bit-identical to the
 * stream-K kernel's; same prepared activations and weights as cu_sk_bf16 / cu_sk_q, any R. */
int cu_gemm_takes(const be_weight *w, int R); /* 1: run R rows of w here ($MTPLX_CUDA_GEMM, _GEMM_MIN) */
int cu_sk_bf16_small(const be_weight *w);    /* 1: w is bf16 and a 32-row stream-K launch of it alone runs its
                                                row groups side by side (cuda_mma_sk.cu) */
void cu_gemm_bf16(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const uint16_t *xh, const uint16_t *xl,
                  int R);
void cu_gemm_q(float *y, int ldy, const cu_wdev *dv, const be_weight *w, const void *xa, const float *xdb, int R);

/* cuda_seq.cu */
void cu_attention(be_backend *be, const be_attn_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch);
void cu_mla(be_backend *be, const be_mla_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch);
void cu_gdn(be_backend *be, const be_gdn_args *a, int R);
void cu_attention_seqs(be_backend *be, const be_attn_args *a, const be_attn_seq *seqs, int n, float *scratch);
void cu_mla_seqs(be_backend *be, const be_mla_args *a, const be_attn_seq *seqs, int n, float *scratch);
void cu_gdn_seqs(be_backend *be, const be_gdn_args *a, const be_conv_args *cv, const be_gdn_seq *seqs, int n);
void cu_gdn_replay(be_backend *be, float *dst, const float *start, const float *tape_k, const float *tape_g,
                   const float *tape_d, int keep, int Hk, int Hv, int Dk, int Dv);
void cu_logits_top(be_backend *be, int32_t *out, const float *x, int ldx, int R, int V, int k);
void cu_gdn_commit(be_backend *be, const be_gdn_commit *items, int n, size_t conv_floats, int Hk, int Hv, int Dk,
                   int Dv);

/* cuda_moe.cu */
int cu_moe_scratch_new(be_backend *be, int rows, int hidden, int inter, int n_experts, int top_k,
                       be_moe_scratch **out, mtplx_err *err);
void cu_moe_scratch_free(be_backend *be, be_moe_scratch *s);
void cu_moe(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
            be_moe_scratch *s);

/* Block-wide sum of v over blockDim.x threads (a multiple of 32, at most 1024) in a fixed order:
 * warp butterflies, then warp 0 adds the warp sums in warp order. Every thread gets the total. */
__device__ __forceinline__ float cu_block_sum(float v, float *sh32) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) sh32[w] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f;
        for (int i = 0; i < nw; i++) s += sh32[i];
        sh32[32] = s;
    }
    __syncthreads();
    return sh32[32];
}

/* cu_block_sum of a and of b with one set of barriers: *ta, *tb get the bits cu_block_sum gives each
 * (the same butterflies, the warp sums added in warp order). sh: 66 floats of shared memory. */
__device__ __forceinline__ void cu_block_sum2(float a, float b, float *sh, float *ta, float *tb) {
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_xor_sync(0xffffffffu, a, o);
        b += __shfl_xor_sync(0xffffffffu, b, o);
    }
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) sh[w] = a, sh[32 + w] = b;
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0.f, t = 0.f;
        for (int i = 0; i < nw; i++) s += sh[i], t += sh[32 + i];
        sh[64] = s, sh[65] = t;
    }
    __syncthreads();
    *ta = sh[64], *tb = sh[65];
}

/* Threads of the one block that normalises a row of n entries (k_rmsnorm and k_rmsnorm_prep use the
 * same count, so their sums of squares run in the same order): about 4 entries a thread, a multiple
 * of 32 from 256 (session 6's count for every width: rows up to 1,024 entries keep its bits) to 1,024
 * (hidden 5,120: 3.28 -> 3.16 ms a 27B-16l q4 step, bench/cuda.md "Session 7: small-op latency"). A
 * function of n (and of the knob) only, never of the row count. */
static inline int cu_rms_threads(int n) {
    if (cu_set.rms_threads) return cu_set.rms_threads; /* MTPLX_CUDA_RMS_THREADS (a comparison knob) */
    int t = ((n + 3) / 4 + 31) / 32 * 32;
    return t < 256 ? 256 : t > 1024 ? 1024 : t;
}

/* The two tensor-core instructions of the matmul kernels (cuda_mma.cu, cuda_mma_sk.cu, cuda_gemm.cu):
 * c += A·B for one 16 × 8 output tile, A the weight fragment (m16), B the activation fragment (n8).
 * One definition, so that every kernel issues the same arithmetic: their bit identity rests on it. */
__device__ __forceinline__ void cu_mma_bf16(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void cu_mma_u8s8(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                            uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ float cu_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float cu_silu(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float cu_bf16(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

#endif
