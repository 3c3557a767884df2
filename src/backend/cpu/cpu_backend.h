/* cpu_backend.h — the CPU backend's internals, for the files of src/backend/cpu/ and for tests that call the
 * kernels directly (docs/architecture.md, "The CPU backend"). The model layer includes backend.h
 * only.
 *
 * The CPU backend owns: the settings read once from the environment (kernel path, threads,
 * repacking, prefetch distances: cpu_settings_from_env), the process-wide thread pool the kernels
 * split work over, the repacked weight copies (qpack / AMX), and the thread-local matmul scratch it
 * reserves at state creation. Its ops are the kernels of src/kernels/, which only this directory
 * (and the kernel benchmarks / tests) call. */
#ifndef MTPLX_BACKEND_CPU_BACKEND_H
#define MTPLX_BACKEND_CPU_BACKEND_H

#include "../../kernels/knobs.h"
#include "../../kernels/matmul.h"
#include "../backend.h"

#define CPU_CACHE_PATH_MAX 1024
#define CPU_ATT_SPLIT_DEFAULT -1 /* cpu_settings.att_split: auto (cpu_seq.c, ATT_SPLIT_AUTO_*) */
/* cpu_settings.prefill_rows: a chunk's rows then meet each routed expert of a MoE layer ~16 times
 * instead of ~4 at 128 (256 experts, 8 a token): a 35B-A3B shape's prefill ~20% faster, dense models
 * level or a little faster (docs/kernels.md "Prefill chunks") */
#define CPU_PREFILL_ROWS_DEFAULT 512

/* Everything a user can tune about the CPU backend, read once at creation. */
typedef struct {
    kern_knobs knobs;   /* kernel path, threads, repacking, prefetch distances (knobs.h) */
    char pack_cache[CPU_CACHE_PATH_MAX]; /* directory of the repacked-weight cache, "" = off */
    int fuse;           /* 1: fused row ops (an RMSNorm or SwiGLU inside the next matmul's packing,
                           the residual add inside the next RMSNorm); 0: separate ops ($MTPLX_FUSE=0;
                           same bits either way) */
    int att_split;      /* keys from which a decode-sized attention call spreads each KV head's keys
                           and value dims over the pool (cpu_seq.c); 0 = never; -1 (default) = auto:
                           from ATT_SPLIT_AUTO_KEYS when the pool has ATT_SPLIT_AUTO_THREADS threads a
                           KV head ($MTPLX_ATT_SPLIT; same bits either way) */
    int pack_experts;   /* routed MoE experts packed like every other weight: 1 always, 0 never, -1
                           (default) when the copy fits in memory beside the checkpoint
                           ($MTPLX_PACK_EXPERTS; cpu_routed_copies) */
    int prefill_rows;   /* be_caps.prefill_rows ($MTPLX_PREFILL_ROWS, 32..4096; default 512) */
} cpu_settings;

/* The defaults, overridden by MTPLX_KERNEL (portable|avx2|avx512|amx|neon|neon-dot|neon-i8mm; a path
 * this CPU cannot run gives the best it can, as `mtplx doctor` says), MTPLX_NO_AMX (0 / 1),
 * MTPLX_THREADS (1..256; 0 = the CPUs this process may run on), MTPLX_QPACK (0 / 1), MTPLX_QACT
 * (int8 / f32), MTPLX_QAMX_MIN (1..4096), MTPLX_AMX_PF, MTPLX_QPACK_PF, MTPLX_QPACK_PF2 (bytes, 0..1 MiB),
 * MTPLX_BF16DP, MTPLX_BF16X, MTPLX_BF16_PF, MTPLX_MM_GUIDED, MTPLX_FUSE (0 / 1), MTPLX_QPACK_MIX (-1..1),
 * MTPLX_ATT_SPLIT (keys; 0 = off; default: auto), MTPLX_PREFILL_ROWS (32..4096), MTPLX_PACK_EXPERTS (0 / 1;
 * default: auto), MTPLX_PACK_CACHE (a directory, or 0 = off; default $XDG_CACHE_HOME/mtplx/qpack, else
 * $HOME/.cache/mtplx/qpack). Unset or empty variables keep the default. Returns 0, or MTPLX_EINVAL
 * naming the first variable whose value is not of its kind (base/env.h); *s holds the defaults in its
 * place, so a caller that only wants the pack cache directory may go on. */
int cpu_settings_from_env(cpu_settings *s, mtplx_err *err);

/* Install the settings into the kernels and create the thread pool (process-wide: the kernels have
 * one set of knobs and one pool, so every CPU backend of a process shares them). be_cpu_new does
 * this for the first backend of a process only; later backends adopt the knobs in force. */
void cpu_settings_apply(const cpu_settings *s);

/* A CPU backend with these settings. Returns 0 and *out, or an error. */
int be_cpu_new(const cpu_settings *s, be_backend **out, mtplx_err *err);

/* Private state of one CPU backend instance. */
typedef struct {
    cpu_settings settings;
    kern_pack_set *packs;   /* repacked weight copies, or NULL */
    int max_k;              /* widest prepared weight (inputs), for the matmul scratch bound */
    int min_group;          /* smallest quantization group among prepared weights, 0 = none */
    int needs_scratch;      /* 1: some prepared weight takes quantized / AMX-packed activations */
} cpu_ctx;

/* cpu_packcache.c: give w its VNNI copy from the cache directory dir (mapped from the file when
 * one holds exactly this weight's copy, else repacked and written there). Returns 1 when w->packed
 * is set, 0 when the cache does not apply (off, small copy, no copy for this weight, I/O trouble:
 * the caller repacks as usual), -1 with err set on out of memory. */
int cpu_packcache_prepare(const char *dir, kern_pack_set **set, kern_weight *w, mtplx_err *err);

/* The same for n small weights at once (a MoE layer's routed experts: each copy under the 1 MiB a
 * file of its own needs), kept in one file keyed by all of them. Returns 1 when every ws[i]->packed
 * is set, 0 when the cache does not apply to the group (any weight without a VNNI copy or with one
 * already, under 1 MiB in all, off, I/O trouble: nothing was set, the caller prepares them one by
 * one), -1 with err set on out of memory (some of them may have their copy). */
int cpu_packcache_prepare_group(const char *dir, kern_pack_set **set, kern_weight *const *ws, int n, mtplx_err *err);

/* cpu_seq.c / cpu_moe.c: the sequence ops and how many pool tasks a piece of work gets. */
int cpu_tasks(double work, int items, int max_tasks);

/* Rows [t0, t1) of a row-parallel op (cpu_rows_run). */
typedef void (*cpu_rows_fn)(void *ctx, int t0, int t1);

/* fn over rows [0, R) of an op touching `elems` elements in all: on the caller for small ops
 * (decode), else split into contiguous row ranges over the pool (prefill chunks). Every row's
 * arithmetic is the same whichever task runs it (cpu_seq.c). */
void cpu_rows_run(int R, double elems, cpu_rows_fn fn, void *ctx);
size_t cpu_attn_scratch_floats(const be_backend *be, int capacity, int rotary_dim);
void cpu_attention(be_backend *be, const be_attn_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch);
void cpu_mla(be_backend *be, const be_mla_args *a, const be_seq_kv *kv, int pos0, int R, float *scratch);
void cpu_gdn(be_backend *be, const be_gdn_args *a, int R);
void cpu_gdn_replay(be_backend *be, float *dst, const float *start, const float *tape_k, const float *tape_g,
                    const float *tape_d, int keep, int Hk, int Hv, int Dk, int Dv);
int cpu_moe_scratch_new(be_backend *be, int rows, int hidden, int inter, int n_experts, int top_k,
                        be_moe_scratch **out, mtplx_err *err);
void cpu_moe_scratch_free(be_backend *be, be_moe_scratch *s);
void cpu_moe(be_backend *be, float *out, int ldo, const float *x, int ldx, int R, const moe_weights *w,
             be_moe_scratch *s);

#endif
