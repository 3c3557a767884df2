/* family.h — what the model layer needs beyond the Qwen3.5 dense forward: RoPE scaling and the
 * refusal of what we do not run, routed MoE feed-forwards (all three expert layouts), Qwen3-Next's
 * fused GDN projections, DeepSeek-V3 MLA attention and its MTP layer. weights.c / forward.c / mtp.c /
 * state.c call these at a handful of marked hooks; everything family-specific lives here, in
 * family.c and deepseek.c. */
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
 * affine-quantized) layouts, the shared expert(s) and Qwen's shared gate. Returns 0 or an error
 * naming the missing/misshapen tensor. */
int family_bind_moe(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err);

/* 1 when the GDN layer under lp stores Qwen3-Next's fused in_proj_qkvz / in_proj_ba. */
int family_gdn_is_fused(const mtplx_model *m, const char *lp);
/* Bind those two matrices (lp like "model.layers.0."). Returns 0 or an error. */
int family_bind_gdn_fused(mtplx_model *m, const char *lp, gdn_fused_weights *w, mtplx_err *err);

/* Bind MLA attention under lp (deepseek.c). */
int family_bind_mla(mtplx_model *m, const char *lp, mla_weights *w, mtplx_err *err);

/* DeepSeek-V3: when the checkpoint holds `model.layers.{N}.eh_proj.weight` (N = num_hidden_layers),
 * bind that MTP layer (enorm, hnorm, eh_proj, its decoder block, shared_head.{norm,head}, its own
 * embed_tokens when present), set m->has_mtp and make HEAD_DRAFT its shared_head.head. Returns 0
 * (also when absent) or an error. */
int deepseek_bind_mtp(mtplx_model *m, const char *prefix, mtplx_err *err);

/* Floats per position per head of the attention KV cache: keys and values (MLA: Dn+Dr and Dv,
 * otherwise head_dim both), and the number of cached heads. */
void family_kv_shape(const mtplx_model *m, int *heads, int *k_width, int *v_width);

/* Shared with deepseek.c: bind a linear [rows][cols] named base(.weight) (dense or MLX affine), and
 * copy a 1-D tensor of n elements into the family arena as fp32 plus `add`. */
int family_linear_bind(const mtplx_model *m, const char *base, int rows, int cols, be_weight *w, mtplx_err *err);
int family_vec_bind(mtplx_model *m, const char *name, int n, float add, const float **out, mtplx_err *err);

/* ---- forward (forward.c / mtp.c) ---- */

/* Extra scratch for R rows: the backend's MoE buffers (s->moe) and the family rows s->fam (fused GDN
 * projection rows, MLA projections; s->fam_w floats each). Returns 0 or ENOMEM. */
int family_scratch_init(fwd_scratch *s, const mtplx_model *m, int rows, mtplx_err *err);
void family_scratch_free(fwd_scratch *s);

/* The feed-forward of layer L over R rows: s->a in, s->o out (dense SwiGLU or routed MoE). */
void layer_ffn(const mtplx_model *m, const layer_weights *L, int R, fwd_scratch *s);

/* Qwen3-Next fused GDN projections of R rows of a[R][H]: writes the split-form outputs, qkv rows
 * [q all heads | k all heads | v all heads] at qkv (row stride ldqkv), z / b / a rows at z, b, av
 * (row stride ld), exactly as in_proj_qkv / z / b / a would. */
void family_gdn_project(const mtplx_model *m, const gdn_fused_weights *w, const float *a, int R, float *qkv,
                        int ldqkv, float *z, float *b, float *av, int ld, fwd_scratch *s);

/* MLA attention over the R rows of n sequences: s->a in, s->o out; projections and the output
 * matmul over all rows, then per sequence the keys/values of each row are written into its pages of
 * layer `layer` at its position before it attends (causal). */
void layer_mla(const mtplx_model *m, const mla_weights *w, int layer, const attn_seg *sg, int n, int R,
               fwd_scratch *s);

/* DeepSeek MTP rows over n sequences (mtp.c's mtp_rows contract). */
void deepseek_mtp_rows(const mtplx_model *m, fwd_scratch *scr, const attn_seg *as, int n, const float *hid,
                       const int32_t *next, int R, float *out);

#endif
