/* cuda_backend.h — the CUDA backend's C interface (docs/architecture.md, "The CUDA backend"): what
 * backend.c and the CLI call. Built only with `make CUDA=1`; the rest of the project is plain C and
 * never includes a CUDA header. */
#ifndef MTPLX_BACKEND_CUDA_BACKEND_H
#define MTPLX_BACKEND_CUDA_BACKEND_H

#include <stddef.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA backend's knobs (docs/architecture.md, "Knobs"): read once from the environment by
 * cu_settings_from_env, at backend creation. They steer process-wide machinery (the one stream, the
 * launch attributes, the profile), so the first backend of a process installs its settings and later
 * ones adopt those in force. Every knob is bit-identical (a comparison or diagnostic switch). */
typedef struct {
    int stream;     /* 1: a non-blocking stream; MTPLX_CUDA_STREAM=0: the legacy default stream */
    int fuse;       /* MTPLX_CUDA_FUSE=1: deferred residual add + activation preparation shared across ops */
    int fuse_seq;   /* 1: the GDN step and attention also prepare their outputs for the out-projections
                     * (cuda_seq.cu); MTPLX_CUDA_FUSE_SEQ=0: a k_split_x / k_qact launch does (a comparison knob) */
    int pdl;        /* MTPLX_CUDA_PDL=1: programmatic dependent launch */
    int graph;      /* MTPLX_CUDA_GRAPH=1: step graphs (recorded, replayed and patched in place: cuda_graph.cu) */
    int seq_batch;  /* 1: attention_seqs / mla_seqs / gdn_seqs as one grid over the sequences;
                       MTPLX_CUDA_SEQ_BATCH=0: per-sequence calls */
    int commit;     /* 1: gdn_commit as one launch, four elements a thread where aligned; MTPLX_CUDA_COMMIT=2:
                       one element a thread; =0: a copy + gdn_replay per item (same bits every way) */
    int top;        /* 1: be_caps.logits_top (verify rows of a top-k / greedy sampler download only
                       their best logits); MTPLX_CUDA_TOP=0: whole rows */
    int top_min_vocab; /* be_caps.logits_top_min_vocab; MTPLX_CUDA_TOP_MIN_VOCAB=N, default 1 (every
                          vocabulary: with the sliced top-k an 8,192-id model's D3 ran 3-4% faster,
                          bench/cuda.md "Session 11"; one block a row had lost 5-10% there) */
    int top_row;    /* 1: rows of at most 8,192 ids select their top k in one launch of one block a row
                       (k_top_row) instead of slices and a merge; MTPLX_CUDA_TOP_ROW=0: two launches
                       (the same answer either way) */
    int top_mapped; /* 1: a logits_top answer of up to 64 KB is also written by its kernel into mapped host
                       memory with a flag a row, and the download that follows spins on the flags and copies
                       from there (no DMA, no stream wait: cuda_top.cu, top_mirror); MTPLX_CUDA_TOP_MAPPED=0: a
                       copy-engine download and a stream synchronize (the same bytes either way) */
    int fuse_mtp_in; /* 1: an MTP layer's input (embedding, two rmsnorms, the fc's preparation) in one launch
                        (embed_norm_pair_rows); MTPLX_CUDA_FUSE_MTP_IN=0: embed_rows and two rmsnorm_rows */
    int fuse_att_prep; /* 1: a call of attention_seqs whose sequences have one row each and whose keys go to
                          one-query blocks normalises and rotates its queries and new keys inside those blocks
                          (no k_attn_prep launch); MTPLX_CUDA_FUSE_ATT_PREP=0: the prep launch first (the same
                          bits) */
    int att_merge_last; /* 1: one-query attention blocks of a query over several key chunks merge them in the
                           block that finishes last (attn_merge_last); MTPLX_CUDA_ATT_MERGE_LAST=0: a
                           k_attn_merge launch after them (the same bits) */
    int prefill_rows; /* be_caps.prefill_rows; MTPLX_CUDA_PREFILL_ROWS=N (32..4096), default 512: a
                         4,096-token prefill of the 27B-16l q4 shape 5,990 tok/s at 128, 7,834 at 512,
                         8,076 at 1,024 (H100, bench/cuda.md "Session 26"); the chunk's scratch stages
                         rows x vocabulary floats (0.5 GB at 512 rows of a 248k vocabulary) */
    int gdn_reg;    /* 1: the register GDN kernel where the head shape allows; MTPLX_CUDA_GDN=0: the
                       shared-memory one */
    int profile;    /* MTPLX_CUDA_PROFILE=1: CUDA events around every op, a table at exit; =2: also one
                       row per matmul shape */
    int profile_rows; /* MTPLX_CUDA_PROFILE_ROWS=N: the profile counts only the ops of forwards of N rows
                         (from the embedding that starts a forward to the next one's) */
    int steps;      /* MTPLX_CUDA_STEPS=1: host / GPU time per forward, a table at exit */
    int verbose;    /* MTPLX_CUDA_VERBOSE=1: say which GPU the backend runs on */
    /* matmul kernel choice and sweeps (cuda_mma.cu, cuda_mma_sk.cu; never a function of R) */
    int mma;        /* 1: tensor-core matmul for bf16 / q4 / q8; MTPLX_CUDA_MMA=0: the CUDA-core kernel */
    int sk;         /* 1: the stream-K split (cuda_mma_sk.cu); MTPLX_CUDA_SK=0: the fixed-ksplit kernels */
    int sk_group;   /* 1: a matmul_n of one weight kind is one launch; MTPLX_CUDA_SK_GROUP=0: one per weight */
    int sk_u;       /* MTPLX_CUDA_SK_U=2|4|8: q spans per batch; 0: per format */
    int sk_ga;      /* q span layout (same bits either way): MTPLX_CUDA_SK_GA=1 a piece of every group per
                     * thread, =0 a quarter of the span per thread with the other groups masked; -1 (unset):
                     * the faster one for the launch's rows and format (cuda_mma_sk.cu, sk_q_ga) */
    int sk_dp;      /* q launches of up to this many rows on the integer-pipe kernel (same bits as the mma one):
                     * MTPLX_CUDA_SK_DP=0|1|2|4; -1 (unset): cuda_mma_sk.cu's sk_dp_rows */
    int sk_bu;      /* MTPLX_CUDA_SK_BU=2|4|8: bf16 K blocks per batch; 0: 8 */
    int sk_bps;     /* MTPLX_CUDA_SK_BPS=N: stream-K blocks per multiprocessor; 0: the kernel's occupancy */
    int sk_rows;    /* MTPLX_CUDA_SK_ROWS=16: bf16 stream-K launches of at most 16 activation rows (a comparison
                     * knob; default SK_ROWS = 32; same bits either way) */
    int sk_rg;      /* how a bf16 stream-K launch of 9..32 rows runs its row groups of 8 (MTPLX_CUDA_SK_RG; the
                       same bits every way): 0 two or four in each warp; 1 one a block row when the blocks fit the
                       GPU at once with the split's K batch; 2 (default) also with a half or quarter batch (more
                       blocks a multiprocessor); 3 one a block row always, in waves when they do not fit */
    int thin;       /* 1: thin bf16 weights (<= 64 rows) of a matmul_n that also holds quantized weights run on
                       k_thin_bf16 (cuda_mma.cu); MTPLX_CUDA_THIN=0: on the mma kernels (other bits) */
    int sk_il;      /* the integer-pipe kernel's spans of a batch without a branch between them and two dp4a chains
                       a chunk (same bits): MTPLX_CUDA_SK_IL=1 always, =0 never (a span's chain after the last
                       one's); -1 (unset): q4 only (bench/cuda.md "Session 31": q4 +1-8%, q8 -1-3%) */
    int sk_minu;    /* MTPLX_CUDA_SK_MINU=N: fewer stream-K warps for a weight of under N units (K spans /
                       blocks of a 16-row tile) per warp; 0: a fifth of a tile, at most 2·U (sk_minu) */
    int rms_batch;  /* entries a thread of the fused rmsnorm loads at once (cuda_mma.cu); MTPLX_CUDA_RMS_BATCH=1:
                       one at a time (same bits); 0: 4 */
    int gemm;       /* 1: calls of at least gemm_min rows on the many-row GEMM (cuda_gemm.cu, same bits as the
                       stream-K kernels); MTPLX_CUDA_GEMM=0: every row through the stream-K kernels */
    int gemm_min;   /* MTPLX_CUDA_GEMM_MIN=N: the GEMM from N rows; 0: 48 */
    int gemm_mt, gemm_ks, gemm_st; /* GEMM sweeps (same bits): MTPLX_CUDA_GEMM_MT=1|2 (64 / 128 weight rows a
                       block), _KS (spans a stage: bf16 32-input 2|4|8, q 128-input 1|2|4), _ST (bf16 stages) */
    int moe;        /* 1: the MoE block on the device (routing, grouped experts: cuda_moe.cu);
                       MTPLX_CUDA_MOE=0: top-k on the host and one launch per expert (comparison) */
    int moe_slots;  /* calls of up to this many rows run the device MoE a slot per grid row, no plan and the
                       combine inside the down launch (cuda_moe.cu, moe_slots; same bits as the tiles);
                       MTPLX_CUDA_MOE_SLOTS=N, 0: always tiles */
    int moe_stage;  /* 1: the per-slot kernels stage their input rows in shared memory (same bits);
                       MTPLX_CUDA_MOE_STAGE=0: each lane reads its chunks from global memory */
    int moe_tstage; /* 1: the tiled MoE kernels (calls of more than moe_slots rows) stage their tile's rows in
                       shared memory (same bits); MTPLX_CUDA_MOE_TSTAGE=0: each lane reads global memory */
    int moe_tloop;  /* output groups of MOE_WARPS warps a tiled MoE block computes in turn after staging
                       (MTPLX_CUDA_MOE_TLOOP=N, default 8; the same bits for any N) */
    int moe_trows;  /* rows of a tile of the tiled MoE kernels: 8, or 4 (MTPLX_CUDA_MOE_TROWS=4; same bits) */
    int moe_gate1;  /* 1: router and shared-gate logits in one matmul_n launch when the two weights share a kind
                       (same bits); MTPLX_CUDA_MOE_GATE1=0: two launches */
    /* session 7, small-op latency (bench/cuda.md, "Session 7: small-op latency"; comparison knobs) */
    int gdn_l2;     /* 1: the register GDN step L2-normalises q / k itself; MTPLX_CUDA_GDN_L2=0: a separate
                       launch first (same bits) */
    int seq_inline; /* 1: small sequence tables go with the launch as a kernel parameter (cuda_seq.cu);
                       MTPLX_CUDA_SEQ_INLINE=0: always copied to the device first (same bits) */
    int dl_pipe;    /* MTPLX_CUDA_DL_PIPE=1: downloads from 256 KB in pieces whose DMA and host copy
                       overlap; 0 (default: not measured yet): one DMA, then one host copy (same bits) */
    int seq_pdl;    /* 1 (with pdl): cuda_seq.cu's kernels launched with PDL like the others;
                       MTPLX_CUDA_SEQ_PDL=0: plain launches, as in session 6 (same bits) */
    int rms_threads; /* MTPLX_CUDA_RMS_THREADS=N (a multiple of 32 up to 1024): threads of a row's rmsnorm
                        block; 0: about 4 entries a thread (cu_rms_threads; session 6: 256). Bits differ
                        between counts */
    int gdn_split;  /* MTPLX_CUDA_GDN_SPLIT=N: blocks per value head of the register GDN step (1: one block with
                       the norm inside; capped at one warp a block); 0: cuda_seq.cu's gdn_split rule (same bits
                       for every N) */
    int gdn_xpose;  /* 1: the register GDN step's warp sums by halving exchanges (cuda_seq.cu, warp_sum8: 9-17
                       shuffles for 8 rows); MTPLX_CUDA_GDN_XPOSE=0: a 5-shuffle butterfly per row (same bits) */
    int att_group;  /* 1: attention launches with at least a block an SM take up to 8 queries of one KV head a
                       block, its key and value tiles staged once for them (cuda_seq.cu, attn_core_gbody);
                       MTPLX_CUDA_ATT_GROUP=2: every launch the shape allows; =0: a block a query (same bits) */
    int att_qb;     /* MTPLX_CUDA_ATT_QB=8|16|32: the most queries a grouped block takes when a launch has at least
                       64 (a prefill chunk's rows x group): fewer reads of each staged key and value tile a
                       query; 16 unless set (cuda_seq.cu, attn_qb; same bits for every value) */
    int up_async;   /* 1: uploads up to 256 KB through the pinned index ring, in stream order, without a
                       wait; MTPLX_CUDA_UP_ASYNC=0: a blocking copy each (same bits) */
} cu_settings;

/* s from the environment (MTPLX_CUDA_*; unset or empty: the defaults above). Read strictly
 * (base/env.h): switches are 0 / 1, numbers whole and in range. Returns 0, or MTPLX_EINVAL naming the
 * first variable not of its kind (s then holds the default in its place). */
int cu_settings_from_env(cu_settings *s, mtplx_err *err);

/* A CUDA backend on GPU `device` (0-based) with settings s (the first backend's are installed for the
 * process). Its memory is device memory (caps.host_memory = 0). Returns 0 and *out, or an error
 * naming the device and the CUDA error. */
int be_cuda_new(int device, const cu_settings *s, be_backend **out, mtplx_err *err);

/* GPUs the CUDA runtime sees (0 when there is no driver or no GPU; never an error). */
int be_cuda_device_count(void);

/* Free and total bytes of device memory on GPU `device`, and its name (name_len bytes, may be 0).
 * Returns 0, or an error when the device cannot be queried. */
int be_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes, char *name, size_t name_len,
                     mtplx_err *err);

/* Device-memory read bandwidth of GPU `device`: best GB/s (1e9 bytes/s) of `reps` streaming reads of a
 * `bytes` buffer (after one warm-up read). Returns 0 or an error. */
int be_cuda_membw(int device, size_t bytes, int reps, double *gbs, mtplx_err *err);

#ifdef __cplusplus
}
#endif

#endif
