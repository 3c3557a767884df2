/* model_internal.h — the private layout of a loaded model and of per-sequence state, shared by the
 * files of the model layer (weights.c binds tensors, forward.c runs the trunk, mtp.c the MTP head,
 * state.c owns caches and captures). Nothing above the model layer includes this. */
#ifndef MTPLX_MODEL_INTERNAL_H
#define MTPLX_MODEL_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "config.h"
#include "family_types.h"
#include "model.h"
#include "safetensors.h"

/* Gated full attention (Qwen3.5: q_proj emits [query | gate] per head). */
typedef struct {
    be_weight q;        /* [nH·Dh·(gate ? 2 : 1)][H] */
    be_weight k, v;     /* [nKV·Dh][H] */
    be_weight o;        /* [H][nH·Dh] */
    const float *q_norm;  /* [Dh] effective weight (1 + w applied for zero-centred), NULL if none */
    const float *k_norm;  /* [Dh] */
} attn_weights;

/* Gated DeltaNet, split projections (Qwen3.5 naming). */
typedef struct {
    be_weight qkv;      /* [conv_dim][H], conv_dim = 2·Hk·Dk + Hv·Dv, rows laid out q | k | v */
    be_weight z;        /* [Hv·Dv][H] */
    be_weight b;        /* [Hv][H] */
    be_weight a;        /* [Hv][H] */
    be_weight out;      /* [H][Hv·Dv] */
    const float *conv_w;  /* [conv_dim][Kc], fp32 copy (HF [C,1,Kc] and MLX [C,Kc,1] share this order) */
    const float *neg_A;   /* [Hv] −exp(A_log), fp32 */
    const float *dt_bias; /* [Hv] */
    const float *norm;    /* [Dv] gated RMSNorm weight, applied as is (never 1 + w) */
    gdn_fused_weights fz; /* Qwen3-Next fused in_proj_qkvz/ba (fz.fused: qkv/z/b/a above unused) */
} gdn_weights;

/* Dense SwiGLU MLP. */
typedef struct {
    be_weight gate, up; /* [I][H] */
    be_weight down;     /* [H][I] */
} mlp_weights;

typedef enum { MIXER_GDN = 0, MIXER_ATTN = 1, MIXER_MLA = 2 } mixer_kind; /* MLA: family_types.h */
typedef enum { FFN_DENSE = 0, FFN_MOE = 1 } ffn_kind;  /* MoE: family_types.h */

/* One decoder layer: residual skeleton x += mixer(norm(x)); x += ffn(norm(x)). */
typedef struct {
    mixer_kind mixer;
    ffn_kind ffn;
    int slot;                 /* index among layers of the same mixer kind (KV cache / GDN state) */
    const float *in_norm;     /* [H] effective weight */
    const float *post_norm;   /* [H] */
    attn_weights attn;        /* valid when mixer == MIXER_ATTN */
    gdn_weights gdn;          /* valid when mixer == MIXER_GDN */
    mlp_weights mlp;          /* valid when ffn == FFN_DENSE */
    mla_weights mla;          /* valid when mixer == MIXER_MLA */
    moe_weights moe;          /* valid when ffn == FFN_MOE */
} layer_weights;

/* The MTP head (`mtp.*`): fc over [norm(embed) | norm(hidden)], one full-attention layer, a norm. */
typedef struct {
    const float *pre_fc_norm_embedding; /* [H] */
    const float *pre_fc_norm_hidden;    /* [H] */
    be_weight fc;                     /* [H][2H] */
    layer_weights layer;                /* mixer MIXER_ATTN, slot 0 of the MTP KV cache */
    const float *norm;                  /* [H] */
} mtp_weights;

struct mtplx_model {
    char dir[4096];
    /* model_lm_head's staging on a device backend, kept across calls (a draft step used to allocate
     * and free both, and a device free waits for the whole device): grown on demand under head_lock
     * (the only state a const model changes), freed by model_free */
    pthread_mutex_t head_lock;
    be_buf *head_x, *head_y;  /* [head_rows][H] input rows, [head_rows][V] logits */
    be_buf *head_top;         /* [head_rows][2·BE_TOP_MAX + 2] logits_top output (NULL without the op) */
    int32_t *head_top_host;   /* the same on the host (malloc) */
    int head_rows;
    model_config cfg;
    const model_family *family; /* its entry of the family table (families/family_ops.h) */
    st_set *st;               /* the mapped checkpoint; every be_weight points into it */
    int hf_layout;            /* 1: HF checkpoint (zero-centred norms get +1 at load) */
    be_weight embed;        /* [V][H] */
    be_weight lm_head;      /* [V][H] (the embedding when tied) */
    be_weight draft_head;   /* HEAD_DRAFT: for now the target head (hook for a quantized copy) */
    layer_weights *layers;    /* [n_layers] */
    const float *final_norm;  /* [H] */
    int n_attn, n_gdn;        /* layers of each mixer kind */
    int has_mtp;
    mtp_weights mtp;
    float *rope_inv_freq;     /* [rotary_dim/2] */
    be_backend *be;           /* the backend every forward of this model runs on (created at load, owns
                                 the repacked / device copies of the weights) */
    int max_cols;             /* widest matrix input (K) of any bound weight, for be reserve_rows */
    float **vecs;             /* fp32 copies of the small vectors (norms, conv, gates), one allocation
                                 each, sized by the tensor found (never by config.json alone) */
    int n_vecs, cap_vecs;
    /* derived sizes */
    int key_dim, value_dim, conv_dim;   /* Hk·Dk, Hv·Dv, 2·key_dim + value_dim */
    int q_width;                        /* q_proj outputs: nH·Dh·(gate ? 2 : 1) */
    family_model fam;                   /* MoE experts, MLA / DeepSeek MTP extras (family.c) */
    void **draft_bufs;                  /* [n_draft_bufs] quantized draft copies (draft.c), owned */
    int n_draft_bufs;
    int mtp_quantized;                  /* 1: the MTP layer's matrices are draft-quantized copies */
    const int32_t *draft_ids;           /* [draft_n] ascending vocabulary ids of draft_head's rows when the
                                           draft head covers a subset (draft.c; in draft_bufs), else NULL */
    int draft_n;                        /* rows of draft_head when draft_ids is set, else 0 */
};

#define FWD_SCRATCH_BUFS 12

/* Scratch for a forward over up to `rows` rows, in backend memory; sized at state creation, so
 * forward never allocates. The float pointers are backend addresses: the model layer passes them
 * to ops and never dereferences them (docs/architecture.md, "Memory"). */
typedef struct {
    be_backend *be;
    int rows;        /* row capacity R */
    int big_w;       /* floats per row of `big` */
    float *x;        /* [R][H] residual stream */
    float *a;        /* [R][H] normed block input */
    float *o;        /* [R][H] block output */
    float *big;      /* [R][big_w] projections of the current block */
    float *win;      /* [(Kc-1) + R][conv_dim] GDN conv window when not capturing */
    float *qk;       /* [2][R][Hk·Dk] normalised q, then k, of every row (GDN) */
    int capacity;    /* positions the attention scratch covers */
    float *attn;     /* be attn_scratch_floats(capacity, rotary dims): scores and RoPE table */
    float *fam;      /* [R][fam_w] fused GDN rows / MLA projections (family.c) */
    int fam_w;       /* floats per row of fam */
    float *host_out; /* [R][max(V, H)] staging for host outputs when the backend's memory is not host
                        memory (NULL on the CPU backend) */
    int32_t *top;    /* [R][2·BE_TOP_MAX + 2] logits_top output (backend memory), with host_out */
    int32_t *top_host; /* the same on the host (malloc) */
    be_moe_scratch *moe; /* MoE working buffers, or NULL */
    be_buf *bufs[FWD_SCRATCH_BUFS]; /* what to free */
    int n_bufs;
} fwd_scratch;

int fwd_scratch_init(fwd_scratch *s, const mtplx_model *m, int rows, int capacity, mtplx_err *err);
void fwd_scratch_free(fwd_scratch *s);

/* Host arrays in and out of a forward (docs/architecture.md, "Memory"). On a host-memory backend
 * these are the caller's arrays themselves; otherwise stage_in uploads n floats into the scratch's
 * `o` rows (free until the first layer writes them) and returns that address, stage_out returns the
 * staging rows to compute into and stage_done downloads n floats of them. */
const float *fwd_stage_in(const mtplx_model *m, fwd_scratch *s, const float *host, size_t n);
float *fwd_stage_out(const mtplx_model *m, fwd_scratch *s, float *host);
void fwd_stage_done(const mtplx_model *m, fwd_scratch *s, float *host, float *staged, size_t n);

/* model_lm_head_top (top_out NULL) or model_lm_head_list over T rows that are already in backend memory
 * (x_dev: a forward's staged output), so nothing goes up; when also_host is not NULL the also_n floats at
 * also_dev are downloaded to it after the head's kernels were queued, so that one wait covers the
 * forward, the head and both downloads (model_mtp_forward_head). Returns 0 or an error. */
int fwd_head_device_rows(const mtplx_model *m, head_kind which, const float *x_dev, int T, float *logits, int top,
                         int32_t *top_out, float *also_host, const float *also_dev, size_t also_n, mtplx_err *err);

/* n floats of backend memory (zeroed when zero) owned by s; NULL with err set on failure. */
float *fwd_scratch_alloc(fwd_scratch *s, size_t n, int zero, const char *what, mtplx_err *err);

/* Attention KV in fixed-size pages (docs/architecture.md, "The sequence pool"). A pool holds
 * n_pages pages for each of n_layers attention layers; page p of layer l keeps KV_PAGE positions of
 * every head: keys at k[l] + ((size_t)p · heads + h) · KV_PAGE · kw, values likewise with vw. A
 * page may be shared by several sequences (ref > 1): a sequence that writes into a shared page
 * first gets a private copy (copy-on-write). Tables of one pool live on different threads (a server
 * session frees or trims its sequence while the scheduler's step grows another), so `mu` guards
 * ref, free_ids and n_free; the page memory itself is only touched by its owner or under the
 * scheduler's exec lock. A page holds 64 positions: a head's keys (or values) of a page are one
 * contiguous run (32 KB at a head width of 128), which the CPU's hardware prefetchers stream; at 16
 * positions (8 KB runs, the other heads' between them) a 1-row decode of qwen35-small-code at 8,192
 * positions took 9–14% longer on a Zen 5 (bench/zen.md "Session 21"). The prefix cache's checkpoints
 * are whole pages and at least 64 positions apart either way (prefix_cache_spacing_rule). */
#define KV_PAGE_SHIFT 6
#define KV_PAGE (1 << KV_PAGE_SHIFT)

typedef struct {
    const mtplx_model *m;
    int n_layers;      /* attention layers each page spans */
    int heads, kw, vw; /* family_kv_shape */
    int n_pages;
    be_buf **kb, **vb; /* [n_layers] the buffers behind k and v */
    float **k, **v;    /* [n_layers] pool bases in backend memory */
    int32_t *ref;      /* [n_pages] sequences holding each page (0 = free) */
    int32_t *free_ids; /* [n_pages] stack of free pages, n_free of them */
    int n_free;
    pthread_mutex_t mu; /* guards ref, free_ids, n_free */
} kv_pool;

int kv_pool_init(kv_pool *p, const mtplx_model *m, int n_layers, int n_pages, mtplx_err *err);
void kv_pool_release(kv_pool *p);

/* One sequence's page table in a pool: ids[i] holds positions i·KV_PAGE .. (i+1)·KV_PAGE - 1. */
typedef struct {
    kv_pool *pool;
    int32_t *ids;      /* [max_pages] */
    int max_pages;     /* ceil(capacity / KV_PAGE) */
    int n;             /* pages held */
} kv_table;

int kv_table_init(kv_table *t, kv_pool *pool, int capacity, mtplx_err *err);
void kv_table_free(kv_table *t);   /* drops every page */
/* Hold pages for positions [0, pos0 + R) and make the pages that [pos0, pos0 + R) writes private.
 * Returns 0, or MTPLX_ENOMEM naming the pool when no page is free (the table is then unchanged
 * beyond the pages it could take). */
int kv_table_prepare(kv_table *t, int pos0, int R, mtplx_err *err);
/* Drop the pages wholly beyond the first len positions. */
void kv_table_trim(kv_table *t, int len);
/* dst (any pool of the same shape) gets a private copy of src's first len positions. */
int kv_table_copy(kv_table *dst, const kv_table *src, int len, mtplx_err *err);
/* dst (same pool) shares src's pages of the first len positions (copy-on-write). */
int kv_table_share(kv_table *dst, const kv_table *src, int len, mtplx_err *err);
/* The backend's view of layer l of the table. */
be_seq_kv kv_table_view(const kv_table *t, int layer);

/* Rows of one sequence in a forward over several: rows r0 .. r0 + R - 1 of the scratch are its
 * positions pos0 .., its KV lives in layer `layer` of kv. */
typedef struct {
    const kv_table *kv;
    int pos0, r0, R;
} attn_seg;

/* Per-GDN-layer recurrent state with a two-buffer scheme for zero-copy rollback: a capturing
 * forward reads rec[cur] as its starting state and writes rec[cur ^ 1], so the start state survives
 * until commit, which replays the innovation tape up to the kept row. */
typedef struct {
    float *conv;      /* [Kc-1][conv_dim] conv state: the last Kc-1 pre-conv qkv rows */
    float *rec[2];    /* [Hv][Dv][Dk] each */
    /* innovation tape of the last capturing forward (rows < max_rows) */
    float *tape_win;  /* [(Kc-1) + max_rows][conv_dim]: conv state before the call, then qkv rows */
    float *tape_k;    /* [max_rows][Hk][Dk] normalised keys */
    float *tape_g;    /* [max_rows][Hv] decays */
    float *tape_d;    /* [max_rows][Hv][Dv] innovations */
    be_buf *bufs[7];  /* the backend buffers behind the seven arrays above */
} gdn_layer_state;

struct model_state {
    const mtplx_model *m;
    kv_pool *own;     /* the private pool of a standalone state (model_state_new), else NULL */
    int capacity;     /* positions */
    int max_rows;     /* rows per capturing call */
    int len;          /* committed positions */
    int cur;          /* which rec[] buffer is live */
    int cap_rows;     /* rows of the last forward if it captured, else 0 */
    int cap_base;     /* len before that forward */
    int pend_keep;    /* rows kept by a model_state_commit whose GDN part (conv copy + replay of each
                         layer) is not done yet, else 0: the next forward does it for all its
                         sequences at once, any other reader of the GDN states first (state_settle) */
    kv_table kv;      /* attention KV pages, one table for all n_attn layers */
    gdn_layer_state *gdn; /* [n_gdn] */
    fwd_scratch scr;  /* a standalone state's own scratch (model_forward); scr.be == NULL in a pool */
};

struct mtp_state {
    const mtplx_model *m;
    kv_pool *own;     /* private pool of a standalone state, else NULL */
    int capacity;
    int len;
    kv_table kv;      /* the MTP layer's KV pages */
    fwd_scratch scr;  /* standalone only */
    int kept_row;     /* row of scr.a that holds the last model_mtp_forward_head call's logits row, or -1 */
};

/* A sequence pool (model.h): the KV pages of every sequence drawn from it. */
struct seq_pool {
    const mtplx_model *m;
    kv_pool trunk;    /* n_attn layers */
    kv_pool mtp;      /* the MTP layer (n_pages 0 without an MTP head) */
};

/* state.c: do the deferred GDN part of the commits of n states (pend_keep, model_state_commit): one
 * gdn_commit call per GDN layer for all of them (a device backend: one launch per layer, not two per
 * layer and sequence). States without one are skipped; n <= BATCH_SEQS_MAX. The states' values do
 * not change (only where they are held), so a const state may be settled. */
void state_settle(model_state *const *st, int n);

/* Scratch for forwards over rows of several sequences (model.h, model_forward_batch). */
struct model_batch {
    fwd_scratch scr;
    int32_t *tokens;  /* [rows] the rows' tokens, gathered */
    float *logits;    /* [rows][V] host staging of the LM head when rows of several sequences share a run */
    int32_t *tops;    /* [rows][2·BE_TOP_MAX + 2] the same for runs of logits lists (fwd_request.top_out) */
    attn_seg *segs;   /* [BATCH_SEQS_MAX] */
};

/* forward.c: the batch's host staging (b->logits, [rows][V] floats) as room for `R` rows of H floats, or
 * NULL when the backend works in host memory (its copies are memcpy: nothing to merge) or it is too small. */
float *batch_host_rows(const mtplx_model *m, const model_batch *b, int R);
/* forward.c: rows [r0[i], r0[i] + T[i]) of the backend rows dev[R][H] into host dst[i] (NULL: skipped),
 * for the n parts of a batch; with a device backend, one download of all R rows through the batch's
 * host staging (the host then waits for the device once, not once per part). */
void batch_rows_out(const mtplx_model *m, model_batch *b, const float *dev, int R, float *const *dst, const int *r0,
                    const int *T, int n);
/* forward.c: the parts' host rows src[i][T[i]][H], in order, into the backend rows dev[R][H]; with a
 * device backend, one upload through the batch's host staging. */
void batch_rows_in(const mtplx_model *m, model_batch *b, float *dev, int R, const float *const *src, const int *T,
                   int n);
/* forward.c: one full-attention layer over the R rows of n sequences (segments), each writing its
 * K/V into layer `layer` of its table at its positions; a[R][H] in, o[R][H] out. Shared by the
 * trunk and the MTP head. */
void layer_attention(const mtplx_model *m, const attn_weights *w, int layer, const attn_seg *sg, int n, int R,
                     fwd_scratch *s);
/* forward.c: per-row RMSNorm y = norm(x) ⊙ w of R rows of H floats (strides H) through the backend. */
void rows_rmsnorm(const mtplx_model *m, float *y, const float *x, const float *w, int R);
/* forward.c: dense MLP over R rows: a in, o out. */
void layer_mlp(const mtplx_model *m, const mlp_weights *w, int R, fwd_scratch *s);

#endif
