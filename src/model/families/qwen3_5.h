/* qwen3_5.h — the Qwen parts qwen3_5.c lends to the other Qwen hybrid (qwen3_next.c): the
 * `mtp.*` MTP layer's rows and the gated shared expert of a MoE block. */
#ifndef MTPLX_MODEL_FAMILIES_QWEN3_5_H
#define MTPLX_MODEL_FAMILIES_QWEN3_5_H

#include "family_ops.h"

/* The Qwen MTP layer (family_mtp_rows_fn): post-`mtp.norm` rows into out. */
void qwen_mtp_rows(const mtplx_model *m, fwd_scratch *scr, const attn_seg *as, int n, const float *hid,
                   const int32_t *next, int R, float *out);

/* bind_moe_extra of the Qwen MoE families: `mlp.shared_expert.*` gated by `mlp.shared_expert_gate`
 * when shared_expert_intermediate_size > 0. Returns 0 or an error naming the tensor. */
int qwen_bind_shared_expert(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err);

#endif
