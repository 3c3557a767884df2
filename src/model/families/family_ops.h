/* family_ops.h — model_family: everything one model architecture adds to the shared model layer,
 * as data and function pointers, one instance per architecture in its own file under
 * src/model/families/ and listed once in families/table.c.
 *
 * The shared code (config.c, weights.c, family.c, forward.c, mtp.c, kvpool.c, inspect.c) reads
 * these members instead of testing the architecture. A NULL pointer means "nothing beyond the
 * shared default", named at each member. The per-row hot path never goes through this struct: the
 * load binds each layer's mixer / feed-forward kind into layer_weights, and the forward calls
 * through here at most once per layer or per MTP call. How to add one: docs/architecture.md,
 * "Adding a model family". */
#ifndef MTPLX_MODEL_FAMILIES_FAMILY_OPS_H
#define MTPLX_MODEL_FAMILIES_FAMILY_OPS_H

#include "../config_parse.h"
#include "../inspect.h"
#include "../model_internal.h"
#include "table.h"

#define FAMILY_MAX_TYPES 4

/* The MTP layer over R gathered rows of n sequences: hid [R][H] (backend memory, the trunk's
 * pre-norm rows) and the next tokens [R] in, the rows the MTP head's LM head reads into
 * out [R][H] (backend memory). as: each sequence's rows and its MTP KV pages. */
typedef void (*family_mtp_rows_fn)(const mtplx_model *m, fwd_scratch *scr, const attn_seg *as, int n,
                                   const float *hid, const int32_t *next, int R, float *out);

struct model_family {
    /* ---- identity and support (model_load, `mtplx inspect`) ---- */
    model_arch arch;
    const char *name;                 /* short family name ("qwen3_5"), unique in the table */
    const char *model_types[FAMILY_MAX_TYPES]; /* config.json model_type values selecting it, NULL-ended */
    int runnable;                     /* 1: the trunk forward is implemented */
    int mtp;                          /* 1: its MTP head (when the checkpoint has one) is implemented */
    const char *reason;               /* why not runnable / no MTP, "" when fully supported */

    /* ---- config.json (config.c) ---- */
    int hybrid;    /* 1: Gated DeltaNet + gated attention (layer_types / full_attention_interval,
                      attention output gate, q/k norms, zero-centred norms, partial rotary 0.25) */
    int qk_norm;   /* 1: q_norm / k_norm on plain attention (implied by hybrid) */
    int moe;       /* 1: routed experts; intermediate_size becomes optional; parse_moe is set */
    /* Fields of its own attention, read after RoPE (may override head_dim / rotary_dim). NULL: none. */
    int (*parse_attention)(cfg_ctx *c, model_config *cfg);
    /* The MoE fields: router fields (n_experts first), cfg_moe_common, then layer_moe[] for every
     * layer. Set exactly when moe. Returns 0 or an error naming the field. */
    int (*parse_moe)(cfg_ctx *c, model_config *cfg);

    /* ---- load (weights.c, family.c) ---- */
    mixer_kind attn_mixer;  /* the mixer of LAYER_ATTN layers: MIXER_ATTN, or MIXER_MLA */
    /* Refuse config shapes its forward cannot run (after the shared checks). NULL: none. */
    int (*check)(const mtplx_model *m, mtplx_err *err);
    /* Adjust a router preset to {E, top-k, softmax, norm_topk_prob, 1 group, scale 1} to this
     * family's routing (scores, groups, scaling, renormalisation). NULL: keep it. */
    void (*moe_router)(const model_config *c, moe_router *r);
    /* Bind what a MoE block under lp holds beyond router and experts (shared experts, correction
     * biases). NULL: nothing. Returns 0 or an error naming the tensor. */
    int (*bind_moe_extra)(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err);
    /* When the GDN layer under lp stores fused input projections, bind them into w (w->fused = 1)
     * and return 0; return 0 leaving w->fused 0 for the split layout. NULL: split only. */
    int (*bind_gdn_fused)(mtplx_model *m, const char *lp, gdn_fused_weights *w, mtplx_err *err);
    /* Bind the MTP layer when the checkpoint holds one (sets m->has_mtp); 0 also when absent.
     * Called only when mtp is 1. NULL: none. */
    int (*bind_mtp)(mtplx_model *m, const char *prefix, mtplx_err *err);
    mtp_layout mtp_layout;  /* where `inspect` looks for MTP tensors: mtp.* or model.layers.N.* */

    /* ---- forward (state.c / kvpool.c / forward.c / mtp.c) ---- */
    /* KV cache floats per position per head (keys, values) and the cached heads. NULL: GQA,
     * n_kv_heads heads of head_dim both. */
    void (*kv_shape)(const model_config *c, int *heads, int *k_width, int *v_width);
    /* Floats per row of the family scratch rows (s->fam) its layer parts need. NULL: none. */
    int (*scratch_row_floats)(const model_config *c);
    /* The fused projections of R rows of a[R][H], regrouped into the split layout: qkv rows
     * [q | k | v] at qkv (stride ldqkv), z / b / a rows at z, b, av (stride ld), exactly as
     * in_proj_qkv / z / b / a would write them. Set with bind_gdn_fused; called per GDN layer. */
    void (*gdn_project)(const mtplx_model *m, const gdn_fused_weights *w, const float *a, int R, float *qkv,
                        int ldqkv, float *z, float *b, float *av, int ld, fwd_scratch *s);
    family_mtp_rows_fn mtp_rows;      /* its MTP layer's rows; set with bind_mtp */
};

/* KV floats per position per head and cached heads of family f for config c: f->kv_shape, or
 * grouped-query attention (n_kv_heads heads, head_dim keys and values). family.c. */
void family_kv_shape_of(const model_family *f, const model_config *c, int *heads, int *k_width, int *v_width);

#endif
