/* model_internal.h — the private layout of a loaded model and of per-sequence state, shared by the
 * files of the model layer (weights.c binds tensors, forward.c runs the trunk, mtp.c the MTP head,
 * state.c owns caches and captures). Nothing above the model layer includes this. */
#ifndef MTPLX_MODEL_INTERNAL_H
#define MTPLX_MODEL_INTERNAL_H

#include <stdint.h>

#include "../backend/backend.h"
#include "arch.h"
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
    model_config cfg;
    const arch_info *arch;
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

/* n floats of backend memory (zeroed when zero) owned by s; NULL with err set on failure. */
float *fwd_scratch_alloc(fwd_scratch *s, size_t n, int zero, const char *what, mtplx_err *err);

/* KV cache of one attention layer, in backend memory: k and v are [nKV][capacity][Dh] (MLA:
 * family_kv_shape). */
typedef struct {
    float *k, *v;
    be_buf *kb, *vb;  /* the buffers behind k and v */
} kv_layer;

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
    int capacity;     /* positions */
    int max_rows;     /* rows per capturing call */
    int len;          /* committed positions */
    int cur;          /* which rec[] buffer is live */
    int cap_rows;     /* rows of the last forward if it captured, else 0 */
    int cap_base;     /* len before that forward */
    kv_layer *kv;     /* [n_attn] */
    gdn_layer_state *gdn; /* [n_gdn] */
    fwd_scratch scr;
};

struct mtp_state {
    const mtplx_model *m;
    int capacity;
    int len;
    kv_layer kv;
    fwd_scratch scr;
};

/* forward.c: one full-attention layer over R rows at positions pos0.., writing K/V into kv at those
 * positions; a[R][H] in, o[R][H] out. Shared by the trunk and the MTP head. */
void layer_attention(const mtplx_model *m, const attn_weights *w, kv_layer *kv, int capacity, int pos0,
                     int R, fwd_scratch *s);
/* forward.c: per-row RMSNorm y = norm(x) ⊙ w of R rows of H floats (strides H) through the backend. */
void rows_rmsnorm(const mtplx_model *m, float *y, const float *x, const float *w, int R);
/* forward.c: a KV buffer pair of family_kv_shape for `capacity` positions (zeroed). */
int kv_layer_init(kv_layer *kv, const mtplx_model *m, int capacity, mtplx_err *err);
void kv_layer_free(const mtplx_model *m, kv_layer *kv);
/* forward.c: copy the first len positions of every head of src (capacity src_cap) into dst. */
void kv_layer_copy(const mtplx_model *m, kv_layer *dst, int dst_cap, const kv_layer *src, int src_cap, int len);
/* forward.c: dense MLP over R rows: a in, o out. */
void layer_mlp(const mtplx_model *m, const mlp_weights *w, int R, fwd_scratch *s);

#endif
