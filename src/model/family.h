/* family.h — the model-layer parts several families share (family.c: RoPE scaling and refusals, the
 * family arena, routed MoE feed-forwards in all three expert layouts, family scratch, KV shape), the
 * binding helpers the family files use, and the layer parts of single families that the shared
 * forward calls by mixer / feed-forward kind (MLA, the Qwen MTP head). Which family does what is
 * said by the family table (families/family_ops.h), never by testing the architecture. */
#ifndef MTPLX_MODEL_FAMILY_H
#define MTPLX_MODEL_FAMILY_H

#include "model_internal.h"

/* ---- load time (weights.c) ---- */

/* Refuse, with a reason naming the field, what this engine cannot run correctly for m->cfg (RoPE
 * types other than default/linear/llama3, impossible MoE/MLA shapes, ...); then size the family
 * arena. Call after config_load and before binding. Returns 0 or an error. */
int family_model_init(mtplx_model *m, mtplx_err *err);
void family_model_free(mtplx_model *m);

/* Refuse checkpoints whose decoder tensors hold what no forward here applies: any `.bias` of a
 * trunk / MTP / head linear (Llama attention_bias or mlp_bias). prefix is the trunk prefix
 * ("model."); the vision tower is not looked at. Returns 0 or MTPLX_EUNSUPPORTED naming the tensor. */
int family_check_tensors(const mtplx_model *m, const char *prefix, mtplx_err *err);

/* Fill m->rope_inv_freq[rotary_dim/2] with the (possibly scaled) inverse frequencies and set the
 * YaRN attention factor / DeepSeek softmax multiplier. */
void family_rope_init(mtplx_model *m);

/* 1 when trunk layer i uses the routed MoE block (config: layer_moe from decoder_sparse_step,
 * mlp_only_layers, first_k_dense_replace); for the MTP layer (i = -1, tensors under lp) when its
 * checkpoint holds a router. */
int family_layer_is_moe(const mtplx_model *m, int i, const char *lp);

/* Bind the MoE block under lp ("model.layers.3."): router, experts in any of the numbered
 * (`mlp.experts.{e}.{gate,up,down}_proj.weight`), fused (`mlp.experts.gate_up_proj` [E,2I,H] +
 * `mlp.experts.down_proj` [E,H,I]) or MLX (`mlp.switch_mlp.{gate,up,down}_proj` [E,..], dense or
 * affine-quantized) layouts, with the family's routing (moe_router), then what the family adds
 * (bind_moe_extra: shared experts, correction biases). Returns 0 or an error naming the
 * missing/misshapen tensor. */
int family_bind_moe(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err);

/* Bind MLA attention under lp (families/deepseek_v3.c; the layer binder calls it for MIXER_MLA). */
int family_bind_mla(mtplx_model *m, const char *lp, mla_weights *w, mtplx_err *err);

/* Bind the Qwen MTP head (`mtp.*`, `model.mtp.*` or `language_model.mtp.*`: pre-fc norms, fc, one
 * attention decoder layer, norm) when config.json declares MTP layers and its fc weight is there;
 * sets m->has_mtp. weights.c, for the Qwen families' bind_mtp. Returns 0 (also when absent) or an
 * error prefixed "MTP head". */
int model_bind_qwen_mtp(mtplx_model *m, const char *prefix, mtplx_err *err);

/* Floats per position per head of the attention KV cache: keys and values (MLA: Dn+Dr and Dv,
 * otherwise head_dim both), and the number of cached heads: the family's kv_shape, or GQA
 * (family_kv_shape_of in families/family_ops.h works from a config alone). */
void family_kv_shape(const mtplx_model *m, int *heads, int *k_width, int *v_width);

/* For the family files: bind a linear [rows][cols] named base(.weight) (dense or MLX affine) and give
 * the backend its copy (weight_prepare: every weight the forward multiplies with); _view binds only
 * (a table read row by row: embeddings); and copy a 1-D tensor of n elements into the family arena
 * as fp32 plus `add`. */
int family_linear_bind(const mtplx_model *m, const char *base, int rows, int cols, be_weight *w, mtplx_err *err);
int family_linear_view(const mtplx_model *m, const char *base, int rows, int cols, be_weight *w, mtplx_err *err);
int family_vec_bind(mtplx_model *m, const char *name, int n, float add, const float **out, mtplx_err *err);
/* Bind a SwiGLU block p{gate,up,down}_proj of width I (dense or MLX affine) into x, prepared. */
/* Decide, once the backend and the checkpoint are open and before binding, whether the routed experts
 * get the backend's copy (family_model.experts_prepared), asked of the backend (be_ops.routed_copies)
 * with their bytes (tensors named *.mlp.experts.* or *.mlp.switch_mlp.*, quantized and dense) and the
 * checkpoint's. */
void family_experts_plan(mtplx_model *m);
int family_bind_swiglu(const mtplx_model *m, const char *p, int I, int H, moe_expert *x, mtplx_err *err);

/* ---- forward (forward.c / mtp.c) ---- */

/* Extra scratch for R rows: the backend's MoE buffers (s->moe) and the family rows s->fam (fused GDN
 * projection rows, MLA projections; s->fam_w floats each). Returns 0 or ENOMEM. */
int family_scratch_init(fwd_scratch *s, const mtplx_model *m, int rows, mtplx_err *err);
void family_scratch_free(fwd_scratch *s);

/* The feed-forward of layer L over R rows: s->a in, s->o out (dense SwiGLU or routed MoE). */
void layer_ffn(const mtplx_model *m, const layer_weights *L, int R, fwd_scratch *s);

/* MLA attention over the R rows of n sequences: s->a in, s->o out; projections and the output
 * matmul over all rows, then per sequence the keys/values of each row are written into its pages of
 * layer `layer` at its position before it attends (causal). */
void layer_mla(const mtplx_model *m, const mla_weights *w, int layer, const attn_seg *sg, int n, int R,
               fwd_scratch *s);


#endif
