/* family.c — the model-layer parts several families share, driven by the family table's entries
 * (families/family_ops.h) and never by the architecture itself: RoPE scaling and refusals, the
 * family arena, routed MoE feed-forwards in every expert layout, the family scratch rows and the KV
 * shape. What only one family has (MLA, fused GDN projections, MTP layers) is in its file under
 * src/model/families/.
 *
 * Binding never copies a matrix: a be_weight points into the mapping (for stacked/fused expert
 * tensors, at the expert's slice). Small vectors are converted to fp32 into the family arena. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/mem.h"
#include "rope_scaling.h"
#include "family.h"
#include "families/family_ops.h"

/* ------------------------------------------------------------------ refusals and arena */

static rope_scaling rope_of(const model_config *c, mtplx_err *err, int *rc) {
    rope_scaling s = {ROPE_SCALING_NONE, c->rope_factor, c->rope_low_freq_factor, c->rope_high_freq_factor,
                      c->rope_orig_max_pos, c->rope_beta_fast, c->rope_beta_slow, c->rope_mscale,
                      c->rope_mscale_all_dim};
    *rc = rope_scaling_kind_parse(c->rope_type, &s.kind, err);
    if (!*rc && s.kind == ROPE_SCALING_YARN && s.orig_max_pos <= 0) s.orig_max_pos = c->max_position_embeddings;
    if (!*rc) *rc = rope_scaling_check(&s, err);
    return s;
}

/* family.h; the quantized / dense split lets the backend count only what it would copy. */
void family_experts_plan(mtplx_model *m) {
    family_model *f = &m->fam;
    f->experts_prepared = 1;
    if (m->cfg.n_experts <= 0) return;
    uint64_t quant = 0, dense = 0;
    for (int i = 0; i < st_count(m->st); i++) {
        const st_tensor *t = st_at(m->st, i);
        if (!strstr(t->name, ".mlp.experts.") && !strstr(t->name, ".mlp.switch_mlp.")) continue;
        size_t l = strlen(t->name);
        int qpart = t->dtype == DT_U32 || (l > 7 && (!strcmp(t->name + l - 7, ".scales") || !strcmp(t->name + l - 7, ".biases")));
        *(qpart ? &quant : &dense) += t->nbytes;
    }
    const be_ops *o = m->be->ops;
    f->load_note[0] = 0;
    f->experts_prepared = !o->routed_copies || o->routed_copies(m->be, quant, dense, st_total_bytes(m->st), f->load_note,
                                                                sizeof f->load_note);
}

int family_model_init(mtplx_model *m, mtplx_err *err) {
    const model_config *c = &m->cfg;
    int rc;
    rope_of(c, err, &rc);
    if (rc) return err_prefix(err, "%s/config.json", m->dir);
    if (c->n_experts > 0) {
        moe_router r = {c->n_experts, c->n_experts_per_tok, MOE_SCORE_SOFTMAX, 1, 1, 1, NULL, 1.0f};
        if (m->family->moe_router) m->family->moe_router(c, &r);
        if ((rc = be_moe_router_check(&r, err))) return err_prefix(err, "%s/config.json", m->dir);
        if (c->moe_intermediate_size <= 0)
            return err_set(err, MTPLX_EBADFILE, "%s/config.json: moe_intermediate_size %d must be > 0", m->dir,
                           c->moe_intermediate_size);
    }
    if (m->family->check && (rc = m->family->check(m, err))) return rc; /* e.g. MLA shapes */
    family_model *f = &m->fam;
    f->rope_interleave = c->rope_interleave;
    size_t H = (size_t)c->hidden_size, E = (size_t)(c->n_experts > 0 ? c->n_experts : 0);
    size_t per_layer = E + (size_t)c->q_lora_rank + (size_t)c->kv_lora_rank + 4 * H;
    f->vec_cap = per_layer * (size_t)(c->n_layers + 2) + 64;
    f->vec = mem_alloc(f->vec_cap, sizeof(float), "family vectors", err);
    if (!f->vec) return err->code;
    if (E) {
        f->experts_cap = E * (size_t)(c->n_layers + 2);
        f->experts = mem_zalloc(f->experts_cap, sizeof(moe_expert), "expert table", err);
        if (!f->experts) return err->code;
    }
    return 0;
}

void family_model_free(mtplx_model *m) {
    free(m->fam.vec);
    free(m->fam.experts);
    memset(&m->fam, 0, sizeof m->fam);
}

void family_rope_init(mtplx_model *m) {
    const model_config *c = &m->cfg;
    int rc;
    rope_scaling s = rope_of(c, NULL, &rc);
    if (c->rotary_dim > 0) rope_scaled_inv_freq(m->rope_inv_freq, c->rotary_dim, c->rope_theta, rc ? NULL : &s);
    m->fam.rope_attn_factor = rc ? 1.0f : (float)rope_attention_factor(&s);
    /* DeepSeek: any non-default RoPE with mscale_all_dim also sharpens the softmax by mscale² */
    double ms = 1.0;
    if (!rc && s.kind != ROPE_SCALING_NONE && c->rope_mscale_all_dim > 0)
        ms = rope_yarn_mscale(c->rope_factor, c->rope_mscale_all_dim);
    m->fam.mla_softmax_mult = (float)(ms * ms);
}

int family_layer_is_moe(const mtplx_model *m, int i, const char *lp) {
    const model_config *c = &m->cfg;
    if (c->n_experts <= 0) return 0;
    if (i < 0) {
        /* the MTP layer has no index of its own in the config; its tensors say which block it is
         * (a router `mlp.gate` means routed experts) */
        char n[600];
        snprintf(n, sizeof n, "%smlp.gate.weight", lp);
        return st_find(m->st, n) != NULL;
    }
    return i < CFG_MAX_LAYERS && c->layer_moe[i];
}

int family_check_tensors(const mtplx_model *m, const char *prefix, mtplx_err *err) {
    size_t pl = strlen(prefix);
    for (int i = 0; i < st_count(m->st); i++) {
        const char *n = st_at(m->st, i)->name;
        int ours = (!strncmp(n, prefix, pl) && !strncmp(n + pl, "layers.", 7)) || !strncmp(n, "mtp.", 4) ||
                   !strncmp(n, "lm_head.", 8) || strstr(n, ".mtp.") != NULL;
        size_t len = strlen(n);
        if (ours && len > 5 && !strcmp(n + len - 5, ".bias"))
            return err_set(err, MTPLX_EUNSUPPORTED, "%s: tensor %s: linear-layer biases (attention_bias / mlp_bias) "
                           "are not supported by this engine", m->dir, n);
    }
    return 0;
}

/* ------------------------------------------------------------------ binding helpers */

static const char *shape_s(const int64_t *shape, int ndim, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

static int shape_is(const st_tensor *t, int ndim, const int64_t *want) {
    if (t->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (t->shape[i] != want[i]) return 0;
    return 1;
}

static int bad_shape(const st_tensor *t, const char *name, int ndim, const int64_t *want, mtplx_err *err) {
    char g[128], w[128];
    return err_set(err, MTPLX_EBADFILE, "%s: tensor %s: shape %s, expected %s", t->file, name,
                   shape_s(t->shape, t->ndim, g, sizeof g), shape_s(want, ndim, w, sizeof w));
}

static int dense_dtype(mtplx_dtype d) { return d == DT_F32 || d == DT_BF16 || d == DT_F16; }

/* Bind a linear layer named base (+ ".weight", and for MLX affine quantization ".scales"/".biases")
 * whose logical shape is [rows][cols], or, with n_stack > 0, expert `e` of a stacked tensor
 * [n_stack][rows][cols]. Returns 0 or an error naming the tensor. */
static int bind_linear(const mtplx_model *m, const char *base, int n_stack, int e, int rows, int cols, be_weight *w,
                       mtplx_err *err) {
    char name[600];
    snprintf(name, sizeof name, "%s.weight", base);
    const st_tensor *t = st_find(m->st, name);
    int64_t want[3];
    int nd = 0;
    if (n_stack > 0) want[nd++] = n_stack;
    want[nd++] = rows;
    want[nd++] = cols;
    if (!t) {
        char ws[128];
        return err_set(err, MTPLX_EBADFILE, "%s: missing tensor %s (expected shape %s)", m->dir, name,
                       shape_s(want, nd, ws, sizeof ws));
    }
    memset(w, 0, sizeof *w);
    w->rows = rows;
    w->cols = cols;
    size_t per = (size_t)rows * cols; /* elements of one matrix */
    if (dense_dtype(t->dtype)) {
        if (!shape_is(t, nd, want)) return bad_shape(t, name, nd, want, err);
        w->dtype = t->dtype;
        w->data = (const char *)t->data + (size_t)e * per * dtype_size(t->dtype);
        return 0;
    }
    if (t->dtype != DT_U32)
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: tensor %s: dtype %s not supported (F32, BF16, F16, MLX U32)",
                       t->file, name, dtype_name(t->dtype));
    /* MLX affine: weight [.., rows, cols·bits/32] u32; scales/biases [.., rows, cols/group] */
    char sn[600], bn[600];
    snprintf(sn, sizeof sn, "%s.scales", base);
    snprintf(bn, sizeof bn, "%s.biases", base);
    const st_tensor *sc = st_find(m->st, sn), *bi = st_find(m->st, bn);
    if (!sc || !bi) return err_set(err, MTPLX_EBADFILE, "%s: quantized %s lacks %s", m->dir, name, !sc ? sn : bn);
    if (t->ndim != nd || sc->ndim != nd || (n_stack > 0 && t->shape[0] != n_stack) || t->shape[nd - 2] != rows)
        return bad_shape(t, name, nd, want, err);
    int64_t packed = t->shape[nd - 1], groups = sc->shape[nd - 1];
    int bits = packed > 0 && (packed * 32) % cols == 0 ? (int)(packed * 32 / cols) : 0;
    int gs = groups > 0 && cols % groups == 0 ? (int)(cols / groups) : 0;
    if ((bits != 4 && bits != 8) || (gs != 32 && gs != 64 && gs != 128))
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: tensor %s: %lld packed words and %lld groups per row of %d "
                       "inputs give bits %d / group size %d (supported: 4 or 8 bits, groups 32/64/128)",
                       t->file, name, (long long)packed, (long long)groups, cols, bits, gs);
    if (!dense_dtype(sc->dtype) || sc->dtype != bi->dtype || !shape_is(bi, sc->ndim, sc->shape) || sc->shape[nd - 2] != rows)
        return err_set(err, MTPLX_EBADFILE, "%s: %s / %s: scales and biases must share a float dtype and shape [.., %d, %lld]",
                       m->dir, sn, bn, rows, (long long)groups);
    w->dtype = DT_U32;
    w->bits = bits;
    w->group_size = gs;
    w->scale_dtype = sc->dtype;
    w->data = (const uint32_t *)t->data + (size_t)e * rows * (size_t)packed;
    size_t soff = (size_t)e * rows * (size_t)groups * dtype_size(sc->dtype);
    w->scales = (const char *)sc->data + soff;
    w->biases = (const char *)bi->data + soff;
    return 0;
}

/* Copy the 1-D tensor `name` of n elements into the family arena as fp32 (+ add). */
static int bind_vec(mtplx_model *m, const char *name, int n, float add, const float **out, mtplx_err *err) {
    const st_tensor *t = st_find(m->st, name);
    int64_t want[1] = {n};
    if (!t) return err_set(err, MTPLX_EBADFILE, "%s: missing tensor %s (expected shape [%d])", m->dir, name, n);
    if (!shape_is(t, 1, want)) return bad_shape(t, name, 1, want, err);
    if (!dense_dtype(t->dtype))
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: tensor %s: dtype %s (need F32, BF16 or F16)", t->file, name,
                       dtype_name(t->dtype));
    family_model *f = &m->fam;
    if (f->vec_used + (size_t)n > f->vec_cap)
        return err_set(err, MTPLX_EINTERNAL, "family arena too small for %s", name);
    float *dst = f->vec + f->vec_used;
    f->vec_used += (size_t)n;
    for (int i = 0; i < n; i++) {
        float v;
        if (t->dtype == DT_BF16) v = bf16_to_f32(((const uint16_t *)t->data)[i]);
        else if (t->dtype == DT_F16) v = f16_to_f32(((const uint16_t *)t->data)[i]);
        else v = ((const float *)t->data)[i];
        dst[i] = v + add;
    }
    *out = dst;
    return 0;
}

int family_vec_bind(mtplx_model *m, const char *name, int n, float add, const float **out, mtplx_err *err) {
    return bind_vec(m, name, n, add, out, err);
}

/* bind_linear's signature: the MoE binders pick it or bind_linear_prep. */
typedef int linear_binder(const mtplx_model *m, const char *base, int n_stack, int e, int rows, int cols, be_weight *w,
                          mtplx_err *err);

/* bind_linear, then the backend's copy of the weight (weight_prepare: on the CPU the packed layout of
 * the fast kernels, on a GPU the device upload) — for every weight the forward multiplies with. A
 * weight bound without it still works, through the CPU's slow MLX-layout kernel (~5x slower a byte)
 * or the GPU's upload on first use. */
static int bind_linear_prep(const mtplx_model *m, const char *base, int n_stack, int e, int rows, int cols,
                            be_weight *w, mtplx_err *err) {
    int rc = bind_linear(m, base, n_stack, e, rows, cols, w, err);
    return rc ? rc : m->be->ops->weight_prepare(m->be, w, err);
}

int family_linear_bind(const mtplx_model *m, const char *base, int rows, int cols, be_weight *w, mtplx_err *err) {
    return bind_linear_prep(m, base, 0, 0, rows, cols, w, err);
}

int family_linear_view(const mtplx_model *m, const char *base, int rows, int cols, be_weight *w, mtplx_err *err) {
    return bind_linear(m, base, 0, 0, rows, cols, w, err);
}

/* ------------------------------------------------------------------ MoE */

/* A SwiGLU block p{gate,up,down}_proj into x, with the backend's copies when prep. */
static int bind_swiglu(const mtplx_model *m, const char *p, int I, int H, moe_expert *x, int prep, mtplx_err *err) {
    linear_binder *bind = prep ? bind_linear_prep : bind_linear;
    char n[600];
    int rc;
    snprintf(n, sizeof n, "%sgate_proj", p);
    if ((rc = bind(m, n, 0, 0, I, H, &x->gate, err))) return rc;
    snprintf(n, sizeof n, "%sup_proj", p);
    if ((rc = bind(m, n, 0, 0, I, H, &x->up, err))) return rc;
    snprintf(n, sizeof n, "%sdown_proj", p);
    return bind(m, n, 0, 0, H, I, &x->down, err);
}

int family_bind_swiglu(const mtplx_model *m, const char *p, int I, int H, moe_expert *x, mtplx_err *err) {
    return bind_swiglu(m, p, I, H, x, 1, err);
}

/* The backend's copies of E routed experts' weights, as one unit (be_weights_prepare: on the CPU one
 * pack-cache file a layer). Returns 0 or an error. */
static int experts_prepare(const mtplx_model *m, moe_expert *x, int E, mtplx_err *err) {
    be_weight **ws = malloc(sizeof *ws * 3 * (size_t)E);
    if (!ws) return err_set(err, MTPLX_ENOMEM, "preparing %d experts: out of memory", E);
    for (int e = 0; e < E; e++) ws[3 * e] = &x[e].gate, ws[3 * e + 1] = &x[e].up, ws[3 * e + 2] = &x[e].down;
    int rc = be_weights_prepare(m->be, ws, 3 * E, err);
    free(ws);
    return rc;
}

int family_bind_moe(mtplx_model *m, const char *lp, moe_weights *w, mtplx_err *err) {
    const model_config *c = &m->cfg;
    family_model *f = &m->fam;
    int H = c->hidden_size, E = c->n_experts, I = c->moe_intermediate_size, rc;
    char n[600];
    memset(w, 0, sizeof *w);
    w->inter = I;
    moe_router *r = &w->router;
    *r = (moe_router){E, c->n_experts_per_tok, MOE_SCORE_SOFTMAX, c->norm_topk_prob, 1, 1, NULL, 1.0f};
    if (m->family->moe_router) m->family->moe_router(c, r);
    snprintf(n, sizeof n, "%smlp.gate", lp);
    if ((rc = bind_linear_prep(m, n, 0, 0, E, H, &w->router_w, err))) return rc;

    if (f->experts_used + (size_t)E > f->experts_cap)
        return err_set(err, MTPLX_EINTERNAL, "expert table too small at %s", lp);
    w->experts = f->experts + f->experts_used;
    f->experts_used += (size_t)E;
    char fused[600], mlx[600];
    snprintf(fused, sizeof fused, "%smlp.experts.gate_up_proj", lp);
    snprintf(mlx, sizeof mlx, "%smlp.switch_mlp.gate_proj.weight", lp);
    if (st_find(m->st, fused)) {
        /* fused: gate_up [E, 2I, H] (gate rows first), down [E, H, I]; both without ".weight" */
        const st_tensor *gu = st_find(m->st, fused);
        snprintf(n, sizeof n, "%smlp.experts.down_proj", lp);
        const st_tensor *dn = st_find(m->st, n);
        int64_t wgu[3] = {E, 2 * I, H}, wdn[3] = {E, H, I};
        if (!shape_is(gu, 3, wgu) || !dense_dtype(gu->dtype)) return bad_shape(gu, fused, 3, wgu, err);
        if (!dn) return err_set(err, MTPLX_EBADFILE, "%s: missing tensor %s (expected shape [%d, %d, %d])", m->dir, n, E, H, I);
        if (!shape_is(dn, 3, wdn) || !dense_dtype(dn->dtype)) return bad_shape(dn, n, 3, wdn, err);
        size_t eg = dtype_size(gu->dtype), ed = dtype_size(dn->dtype);
        for (int e = 0; e < E; e++) {
            moe_expert *x = &w->experts[e];
            const char *g0 = (const char *)gu->data + (size_t)e * 2 * I * H * eg;
            x->gate = (be_weight){.dtype = gu->dtype, .rows = I, .cols = H, .data = g0};
            x->up = (be_weight){.dtype = gu->dtype, .rows = I, .cols = H, .data = g0 + (size_t)I * H * eg};
            x->down = (be_weight){.dtype = dn->dtype, .rows = H, .cols = I,
                                    .data = (const char *)dn->data + (size_t)e * H * I * ed};
        }
    } else if (st_find(m->st, mlx)) {
        /* MLX: switch_mlp.{gate,up,down}_proj stacked [E, ...], dense or affine-quantized */
        for (int e = 0; e < E; e++) {
            moe_expert *x = &w->experts[e];
            snprintf(n, sizeof n, "%smlp.switch_mlp.gate_proj", lp);
            if ((rc = bind_linear(m, n, E, e, I, H, &x->gate, err))) return rc;
            snprintf(n, sizeof n, "%smlp.switch_mlp.up_proj", lp);
            if ((rc = bind_linear(m, n, E, e, I, H, &x->up, err))) return rc;
            snprintf(n, sizeof n, "%smlp.switch_mlp.down_proj", lp);
            if ((rc = bind_linear(m, n, E, e, H, I, &x->down, err))) return rc;
        }
    } else {
        for (int e = 0; e < E; e++) {
            snprintf(n, sizeof n, "%smlp.experts.%d.", lp, e);
            if ((rc = bind_swiglu(m, n, I, H, &w->experts[e], 0, err))) return rc;
        }
    }
    if (f->experts_prepared && (rc = experts_prepare(m, w->experts, E, err))) return rc;

    /* the family's own tensors: shared experts, routing biases */
    return m->family->bind_moe_extra ? m->family->bind_moe_extra(m, lp, w, err) : 0;
}

/* ------------------------------------------------------------------ forward scratch */

static int imax(int a, int b) { return a > b ? a : b; }

int family_scratch_init(fwd_scratch *s, const mtplx_model *m, int rows, mtplx_err *err) {
    const model_config *c = &m->cfg;
    int H = c->hidden_size, E = c->n_experts, K = c->n_experts_per_tok;
    if (E > 0) {
        int inter = imax(c->moe_intermediate_size, c->shared_expert_intermediate_size);
        if (m->be->ops->moe_scratch_new(m->be, rows, H, inter, E, K, &s->moe, err)) return err ? err->code : MTPLX_ENOMEM;
    }
    int own = m->family->scratch_row_floats ? m->family->scratch_row_floats(c) : 0;
    s->fam_w = imax(own, 2 * H); /* 2H: the MTP layer's [enorm | hnorm] rows */
    if (!(s->fam = fwd_scratch_alloc(s, (size_t)rows * s->fam_w, 0, "family rows", err))) return MTPLX_ENOMEM;
    return 0;
}

void family_scratch_free(fwd_scratch *s) {
    if (s->moe) s->be->ops->moe_scratch_free(s->be, s->moe);
    s->moe = NULL;
}

/* ------------------------------------------------------------------ MoE forward */

void layer_ffn(const mtplx_model *m, const layer_weights *L, int R, fwd_scratch *s) {
    int H = m->cfg.hidden_size;
    if (L->ffn == FFN_MOE) m->be->ops->moe(m->be, s->o, H, s->a, H, R, &L->moe, s->moe);
    else layer_mlp(m, &L->mlp, R, s);
}

void family_kv_shape(const mtplx_model *m, int *heads, int *k_width, int *v_width) {
    family_kv_shape_of(m->family, &m->cfg, heads, k_width, v_width);
}

void family_kv_shape_of(const model_family *f, const model_config *c, int *heads, int *k_width, int *v_width) {
    if (f->kv_shape) {
        f->kv_shape(c, heads, k_width, v_width);
        return;
    }
    *heads = c->n_kv_heads; /* grouped-query attention */
    *k_width = *v_width = c->head_dim;
}
