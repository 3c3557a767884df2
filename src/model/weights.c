/* weights.c — model_load: read config.json, map the safetensors, and bind every tensor the config
 * implies to a be_weight (pointing into the mapping, never converted) or, for small vectors
 * (norms, conv kernels, gate parameters), to an fp32 copy owned by the model.
 *
 * Naming: trunk tensors live under `model.` or `model.language_model.` (multimodal wrappers; the
 * `model.visual.*` tower is ignored) or `language_model.model.` (MLX conversions); the head is
 * `lm_head.weight` (or the tied embedding); the MTP head is `mtp.*`. Layout: HF checkpoints store
 * conv1d weights as [C, 1, Kc] and zero-centred norms as w (applied as 1 + w); MLX conversions store
 * [C, Kc, 1] and norms already shifted. The conv weight of the first GDN layer decides which. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/device.h"
#include "../base/mem.h"
#include "family.h"
#include "families/family_ops.h"
#include "inspect.h"

typedef struct {
    mtplx_model *m;
    const char *prefix;      /* trunk prefix, e.g. "model." */
    mtplx_err *err;
    int no_pack;             /* 1: bind without a kernel copy (an embedding only looked up by row) */
} binder;

static const char *shape_str(const int64_t *shape, int ndim, char *buf, size_t n) {
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
    return buf;
}

/* Find `name` and check its shape against want[ndim]. Returns the tensor or NULL with err set
 * (missing tensor, or "shape [..], expected [..]"). */
static const st_tensor *require(binder *b, const char *name, int ndim, const int64_t *want) {
    const st_tensor *t = st_find(b->m->st, name);
    char got_s[128], want_s[128];
    if (!t) {
        err_set(b->err, MTPLX_EBADFILE, "%s: missing tensor %s (expected shape %s)", b->m->dir, name,
                shape_str(want, ndim, want_s, sizeof want_s));
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = t->shape[i] == want[i];
    if (!ok) {
        err_set(b->err, MTPLX_EBADFILE, "%s: tensor %s: shape %s, expected %s", t->file, name,
                shape_str(t->shape, t->ndim, got_s, sizeof got_s), shape_str(want, ndim, want_s, sizeof want_s));
        return NULL;
    }
    if (t->dtype != DT_F32 && t->dtype != DT_BF16 && t->dtype != DT_F16) {
        err_set(b->err, MTPLX_EUNSUPPORTED, "%s: tensor %s: dtype %s not supported (F32, BF16, F16)", t->file,
                name, dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

/* Bind a [rows][cols] matrix named prefix+name. Returns 0 or an error code. */
static int bind_matrix(binder *b, const char *prefix, const char *name, int rows, int cols, be_weight *w) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    int64_t want[2] = {rows, cols};
    /* MLX affine quantized (u32 weight + .scales/.biases): the family binder validates and describes it */
    const st_tensor *tq = st_find(b->m->st, full);
    size_t fl = strlen(full);
    if (tq && tq->dtype == DT_U32 && fl > 7 && !strcmp(full + fl - 7, ".weight")) {
        full[fl - 7] = 0;
        int rc = family_linear_view(b->m, full, rows, cols, w, b->err);
        if (!rc && cols > b->m->max_cols) b->m->max_cols = cols;
        /* the backend's copy (CPU: the fast VNNI kernel's layout; a no-op on CPUs without it) */
        return rc || b->no_pack ? rc : b->m->be->ops->weight_prepare(b->m->be, w, b->err);
    }
    const st_tensor *t = require(b, full, 2, want);
    if (!t) return b->err->code;
    memset(w, 0, sizeof *w);
    w->dtype = t->dtype;
    w->rows = rows;
    w->cols = cols;
    w->data = t->data;
    if (cols > b->m->max_cols) b->m->max_cols = cols;
    /* the backend's copy (CPU, bf16: AMX tile order; a no-op on CPUs without AMX) */
    return b->no_pack ? 0 : b->m->be->ops->weight_prepare(b->m->be, w, b->err);
}

static float elem_f32(const st_tensor *t, size_t i) {
    switch (t->dtype) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)t->data)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ((const float *)t->data)[i];
    }
}

/* Copy the tensor prefix+name of shape want[ndim] (n elements in all) to a new fp32 array owned by
 * the model, adding `add` to each element (1 for zero-centred norms of HF checkpoints). *out gets
 * the copy. The allocation happens only after the tensor was found with that shape, so its size is
 * bounded by the checkpoint itself, whatever config.json claims. */
static int bind_vec(binder *b, const char *prefix, const char *name, int ndim, const int64_t *want, float add,
                    const float **out) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const st_tensor *t = require(b, full, ndim, want);
    if (!t) return b->err->code;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (size_t)want[i];
    mtplx_model *m = b->m;
    if (m->n_vecs == m->cap_vecs) {
        int cap = m->cap_vecs ? 2 * m->cap_vecs : 64;
        float **g = realloc(m->vecs, sizeof *g * (size_t)cap);
        if (!g) return err_set(b->err, MTPLX_ENOMEM, "model vectors: out of memory");
        m->vecs = g;
        m->cap_vecs = cap;
    }
    float *dst = mem_alloc(n, sizeof(float), full, b->err);
    if (!dst) return b->err->code;
    m->vecs[m->n_vecs++] = dst;
    for (size_t i = 0; i < n; i++) dst[i] = elem_f32(t, i) + add;
    *out = dst;
    return 0;
}

/* A norm of n weights: effective weight 1 + w for zero-centred HF checkpoints, w as stored otherwise. */
static int bind_norm(binder *b, const char *prefix, const char *name, int n, const float **out) {
    int64_t want[1] = {n};
    float add = (b->m->cfg.zero_centered_norm && b->m->hf_layout) ? 1.0f : 0.0f;
    return bind_vec(b, prefix, name, 1, want, add, out);
}

static int bind_attention(binder *b, const char *lp, attn_weights *w) {
    const model_config *c = &b->m->cfg;
    int H = c->hidden_size, Dh = c->head_dim;
    int rc;
    char p[600];
    snprintf(p, sizeof p, "%sself_attn.", lp);
    if ((rc = bind_matrix(b, p, "q_proj.weight", b->m->q_width, H, &w->q))) return rc;
    if ((rc = bind_matrix(b, p, "k_proj.weight", c->n_kv_heads * Dh, H, &w->k))) return rc;
    if ((rc = bind_matrix(b, p, "v_proj.weight", c->n_kv_heads * Dh, H, &w->v))) return rc;
    if ((rc = bind_matrix(b, p, "o_proj.weight", H, c->n_heads * Dh, &w->o))) return rc;
    w->q_norm = w->k_norm = NULL;
    if (c->qk_norm) {
        if ((rc = bind_norm(b, p, "q_norm.weight", Dh, &w->q_norm))) return rc;
        if ((rc = bind_norm(b, p, "k_norm.weight", Dh, &w->k_norm))) return rc;
    }
    return 0;
}

static int bind_gdn(binder *b, const char *lp, gdn_weights *w) {
    mtplx_model *m = b->m;
    const model_config *c = &m->cfg;
    int H = c->hidden_size, Hv = c->lin_v_heads, Kc = c->conv_kernel;
    int rc;
    char p[600];
    snprintf(p, sizeof p, "%slinear_attn.", lp);
    memset(&w->fz, 0, sizeof w->fz);
    /* the family's fused input projections when the checkpoint stores them (Qwen3-Next) */
    if (m->family->bind_gdn_fused && (rc = m->family->bind_gdn_fused(m, lp, &w->fz, b->err))) return rc;
    if (!w->fz.fused) {
        if ((rc = bind_matrix(b, p, "in_proj_qkv.weight", m->conv_dim, H, &w->qkv))) return rc;
        if ((rc = bind_matrix(b, p, "in_proj_z.weight", m->value_dim, H, &w->z))) return rc;
        if ((rc = bind_matrix(b, p, "in_proj_b.weight", Hv, H, &w->b))) return rc;
        if ((rc = bind_matrix(b, p, "in_proj_a.weight", Hv, H, &w->a))) return rc;
    }
    if ((rc = bind_matrix(b, p, "out_proj.weight", H, m->value_dim, &w->out))) return rc;
    int64_t conv_shape[3] = {m->conv_dim, m->hf_layout ? 1 : Kc, m->hf_layout ? Kc : 1};
    if ((rc = bind_vec(b, p, "conv1d.weight", 3, conv_shape, 0.f, &w->conv_w))) return rc;
    int64_t hv[1] = {Hv};
    const float *A_log;
    if ((rc = bind_vec(b, p, "A_log", 1, hv, 0.f, &A_log))) return rc;
    /* A_log's fp32 copy becomes −exp(A_log) in place: the only use is g = exp(−exp(A_log)·softplus(·)). */
    float *negA = (float *)A_log;
    for (int i = 0; i < Hv; i++) negA[i] = -expf(negA[i]);
    w->neg_A = negA;
    if ((rc = bind_vec(b, p, "dt_bias", 1, hv, 0.f, &w->dt_bias))) return rc;
    int64_t dv[1] = {c->lin_v_dim};
    if ((rc = bind_vec(b, p, "norm.weight", 1, dv, 0.f, &w->norm))) return rc;
    return 0;
}

static int bind_mlp(binder *b, const char *lp, mlp_weights *w) {
    const model_config *c = &b->m->cfg;
    int H = c->hidden_size, I = c->intermediate_size;
    int rc;
    char p[600];
    snprintf(p, sizeof p, "%smlp.", lp);
    if ((rc = bind_matrix(b, p, "gate_proj.weight", I, H, &w->gate))) return rc;
    if ((rc = bind_matrix(b, p, "up_proj.weight", I, H, &w->up))) return rc;
    if ((rc = bind_matrix(b, p, "down_proj.weight", H, I, &w->down))) return rc;
    return 0;
}

/* Bind decoder layer `index` (-1: the MTP layer) whose tensors are under lp ("model.layers.3."). */
static int bind_layer(binder *b, const char *lp, int index, mixer_kind mixer, layer_weights *L) {
    int H = b->m->cfg.hidden_size, rc;
    L->mixer = mixer;
    L->ffn = FFN_DENSE;
    if ((rc = bind_norm(b, lp, "input_layernorm.weight", H, &L->in_norm))) return rc;
    if ((rc = bind_norm(b, lp, "post_attention_layernorm.weight", H, &L->post_norm))) return rc;
    if (mixer == MIXER_ATTN) rc = bind_attention(b, lp, &L->attn);
    else if (mixer == MIXER_MLA) rc = family_bind_mla(b->m, lp, &L->mla, b->err);
    else rc = bind_gdn(b, lp, &L->gdn);
    if (rc) return rc;
    if (family_layer_is_moe(b->m, index, lp)) { /* routed experts (family.c) */
        L->ffn = FFN_MOE;
        return family_bind_moe(b->m, lp, &L->moe, b->err);
    }
    return bind_mlp(b, lp, &L->mlp);
}

/* Checks that the config describes a forward this file can run without out-of-range shapes. */
static int check_config(const mtplx_model *m, mtplx_err *err) {
    const model_config *c = &m->cfg;
    if (c->vocab_size <= 0 || c->hidden_size <= 0 || c->n_layers <= 0 || c->n_layers > CFG_MAX_LAYERS ||
        (c->intermediate_size <= 0 && c->n_experts <= 0) || c->intermediate_size < 0)
        return err_set(err, MTPLX_EBADFILE, "%s/config.json: impossible sizes (vocab %d, hidden %d, layers %d, "
                       "intermediate %d)", m->dir, c->vocab_size, c->hidden_size, c->n_layers, c->intermediate_size);
    int any_attn = 0, any_gdn = 0;
    for (int i = 0; i < c->n_layers; i++) {
        if (c->layer_kinds[i] == LAYER_ATTN) any_attn = 1;
        else any_gdn = 1;
    }
    if (any_attn || c->mtp_layers > 0) {
        if (c->n_heads <= 0 || c->n_kv_heads <= 0 || c->head_dim <= 0 || c->n_heads % c->n_kv_heads)
            return err_set(err, MTPLX_EBADFILE, "%s/config.json: attention heads %d / kv heads %d / head_dim %d "
                           "impossible", m->dir, c->n_heads, c->n_kv_heads, c->head_dim);
        if (c->rotary_dim < 0 || c->rotary_dim > c->head_dim || c->rotary_dim % 2)
            return err_set(err, MTPLX_EBADFILE, "%s/config.json: rotary dims %d impossible for head_dim %d", m->dir,
                           c->rotary_dim, c->head_dim);
    }
    if (any_gdn) {
        if (c->lin_k_heads <= 0 || c->lin_v_heads <= 0 || c->lin_k_dim <= 0 || c->lin_v_dim <= 0 ||
            c->conv_kernel <= 0 || c->lin_v_heads % c->lin_k_heads)
            return err_set(err, MTPLX_EBADFILE, "%s/config.json: linear attention heads Hk %d Hv %d, dims Dk %d Dv %d, "
                           "conv %d impossible", m->dir, c->lin_k_heads, c->lin_v_heads, c->lin_k_dim,
                           c->lin_v_dim, c->conv_kernel);
    }
    if (!(c->rms_norm_eps > 0))
        return err_set(err, MTPLX_EBADFILE, "%s/config.json: rms_norm_eps must be > 0", m->dir);
    /* Hostile sizes: every width the forward derives must fit an int with room to spare (scratch rows
     * multiply them), whatever the tensors say. */
    const int64_t lim = (int64_t)1 << 26;
    const struct { const char *what; int64_t v; } widths[] = {
        {"vocab_size", c->vocab_size},
        {"hidden_size", c->hidden_size},
        {"intermediate_size", c->intermediate_size},
        {"moe_intermediate_size", c->moe_intermediate_size},
        {"num_attention_heads x head_dim x 2", (int64_t)c->n_heads * c->head_dim * 2},
        {"num_key_value_heads x head_dim", (int64_t)c->n_kv_heads * c->head_dim},
        {"linear key dims (2 x Hk x Dk)", 2 * (int64_t)c->lin_k_heads * c->lin_k_dim},
        {"linear value dims (Hv x Dv)", (int64_t)c->lin_v_heads * c->lin_v_dim},
        {"linear_conv_kernel_dim", c->conv_kernel},
        {"recurrent state (Hv x Dv x Dk)", (int64_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim},
    };
    for (unsigned i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i].v > lim)
            return err_set(err, MTPLX_EUNSUPPORTED, "%s/config.json: %s = %lld exceeds the supported %lld", m->dir,
                           widths[i].what, (long long)widths[i].v, (long long)lim);
    return 0;
}

/* Pick the trunk prefix by where the embedding lives. */
static const char *find_prefix(const st_set *st) {
    static const char *k_prefixes[] = {"model.", "model.language_model.", "language_model.model."};
    char name[128];
    for (unsigned i = 0; i < sizeof k_prefixes / sizeof k_prefixes[0]; i++) {
        snprintf(name, sizeof name, "%sembed_tokens.weight", k_prefixes[i]);
        if (st_find(st, name)) return k_prefixes[i];
    }
    return NULL;
}

/* The Qwen MTP head under mp ("mtp."). */
static int bind_mtp(binder *b, const char *mp) {
    mtplx_model *m = b->m;
    int H = m->cfg.hidden_size, rc;
    mtp_weights *w = &m->mtp;
    char lp[600];
    if ((rc = bind_norm(b, mp, "pre_fc_norm_embedding.weight", H, &w->pre_fc_norm_embedding))) return rc;
    if ((rc = bind_norm(b, mp, "pre_fc_norm_hidden.weight", H, &w->pre_fc_norm_hidden))) return rc;
    if ((rc = bind_matrix(b, mp, "fc.weight", H, 2 * H, &w->fc))) return rc;
    snprintf(lp, sizeof lp, "%slayers.0.", mp);
    if ((rc = bind_layer(b, lp, -1, MIXER_ATTN, &w->layer))) return rc;
    w->layer.slot = 0;
    if ((rc = bind_norm(b, mp, "norm.weight", H, &w->norm))) return rc;
    return 0;
}

static int load_into(mtplx_model *m, const char *dir, const progress_sink *prog, mtplx_err *err) {
    int rc;
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    /* the compatibility tier check every loading path shares with `mtplx inspect` */
    if ((rc = inspect_require_runnable(dir, NULL, err))) return rc;
    if ((rc = config_load(dir, &m->cfg, err))) return rc;
    const model_config *c = &m->cfg;
    m->family = family_of(c->arch);
    if (!m->family->runnable)
        return err_set(err, MTPLX_EUNSUPPORTED, "%s: model_type '%s' (%s): %s", dir, c->model_type, m->family->name,
                       m->family->reason);
    if ((rc = check_config(m, err))) return rc;
    if ((rc = family_model_init(m, err))) return rc; /* RoPE scaling / MoE / MLA checks, family arena */
    /* the backend, chosen at load with its settings read once (docs/architecture.md); on a GPU the
     * checkpoint must fit first (backend/device.h) */
    if ((rc = be_device_preflight(dir, err))) return rc;
    if ((rc = be_create(NULL, &m->be, err))) return rc;
    m->key_dim = c->lin_k_heads * c->lin_k_dim;
    m->value_dim = c->lin_v_heads * c->lin_v_dim;
    m->conv_dim = 2 * m->key_dim + m->value_dim;
    m->q_width = c->n_heads * c->head_dim * (c->attn_output_gate ? 2 : 1);

    if ((rc = st_open_dir(dir, &m->st, err))) return rc;
    const char *prefix = find_prefix(m->st);
    if (!prefix)
        return err_set(err, MTPLX_EBADFILE, "%s: no embedding tensor (looked for model.embed_tokens.weight, "
                       "model.language_model.embed_tokens.weight, language_model.model.embed_tokens.weight)", dir);

    if ((rc = family_check_tensors(m, prefix, err))) return rc; /* biases nothing here applies */
    family_experts_plan(m);

    /* Layout: HF [C,1,Kc] vs MLX [C,Kc,1], from the first GDN layer's conv weight. */
    m->hf_layout = 1;
    for (int i = 0; i < c->n_layers; i++) {
        if (c->layer_kinds[i] != LAYER_GDN) continue;
        char name[256];
        snprintf(name, sizeof name, "%slayers.%d.linear_attn.conv1d.weight", prefix, i);
        const st_tensor *t = st_find(m->st, name);
        if (t && t->ndim == 3 && t->shape[2] == 1 && c->conv_kernel != 1) m->hf_layout = 0;
        break;
    }

    m->layers = mem_zalloc((size_t)c->n_layers, sizeof *m->layers, "model layers", err);
    if (!m->layers) return err->code;
    int half = c->rotary_dim / 2;
    m->rope_inv_freq = mem_alloc((size_t)(half > 0 ? half : 1), sizeof(float), "rope table", err);
    if (!m->rope_inv_freq) return err->code;
    if (half > 0) family_rope_init(m); /* default, linear or llama3 */

    /* an untied embedding is only read row by row: no kernel copy (151936×2048 bf16 would be 622 MB) */
    binder b = {m, prefix, err, !c->tie_word_embeddings};
    if ((rc = bind_matrix(&b, prefix, "embed_tokens.weight", c->vocab_size, c->hidden_size, &m->embed))) return rc;
    b.no_pack = 0;
    for (int i = 0; i < c->n_layers; i++) {
        char lp[256];
        snprintf(lp, sizeof lp, "%slayers.%d.", prefix, i);
        mixer_kind mk = c->layer_kinds[i] == LAYER_ATTN ? m->family->attn_mixer : MIXER_GDN;
        if ((rc = bind_layer(&b, lp, i, mk, &m->layers[i]))) return rc;
        m->layers[i].slot = mk == MIXER_GDN ? m->n_gdn++ : m->n_attn++;
        progress_report(prog, (uint64_t)i + 1, (uint64_t)c->n_layers); /* binding reads + packs the weights */
    }
    if ((rc = bind_norm(&b, prefix, "norm.weight", c->hidden_size, &m->final_norm))) return rc;

    if (c->tie_word_embeddings) {
        m->lm_head = m->embed;
    } else {
        const char *head = st_find(m->st, "lm_head.weight") ? "" : "language_model.";
        if ((rc = bind_matrix(&b, head, "lm_head.weight", c->vocab_size, c->hidden_size, &m->lm_head))) return rc;
    }
    m->draft_head = m->lm_head;
    /* MTP layer: optional, the family's own layout (bound when the checkpoint holds it) */
    if (m->family->mtp && m->family->bind_mtp) return m->family->bind_mtp(m, prefix, err);
    return 0;
}

int model_bind_qwen_mtp(mtplx_model *m, const char *prefix, mtplx_err *err) {
    static const char *k_mtp_prefixes[] = {"mtp.", "model.mtp.", "language_model.mtp."};
    if (m->cfg.mtp_layers <= 0) return 0; /* bound when the config declares it and the tensors are there */
    binder b = {m, prefix, err, 0};
    for (unsigned i = 0; i < sizeof k_mtp_prefixes / sizeof k_mtp_prefixes[0]; i++) {
        char name[128];
        snprintf(name, sizeof name, "%sfc.weight", k_mtp_prefixes[i]);
        if (!st_find(m->st, name)) continue;
        if (bind_mtp(&b, k_mtp_prefixes[i])) return err_prefix(err, "MTP head");
        m->has_mtp = 1;
        break;
    }
    return 0;
}

int model_load(const char *dir, mtplx_model **out, mtplx_err *err) { return model_load_progress(dir, NULL, out, err); }

int model_load_progress(const char *dir, const progress_sink *prog, mtplx_model **out, mtplx_err *err) {
    mtplx_err local;
    if (!err) err = &local;
    *out = NULL;
    mtplx_model *m = mem_zalloc(1, sizeof *m, "model", err);
    if (!m) return err->code;
    pthread_mutex_init(&m->head_lock, NULL);
    int rc = load_into(m, dir, prog, err);
    if (rc) {
        model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void model_free(mtplx_model *m) {
    if (!m) return;
    if (m->st) st_close(m->st);
    for (int i = 0; i < m->n_vecs; i++) free(m->vecs[i]);
    free(m->vecs);
    free(m->layers);
    free(m->rope_inv_freq);
    family_model_free(m);
    for (int i = 0; i < m->n_draft_bufs; i++) free(m->draft_bufs[i]);
    free(m->draft_bufs);
    if (m->be) m->be->ops->buf_free(m->be, m->head_x), m->be->ops->buf_free(m->be, m->head_y);
    if (m->be) m->be->ops->buf_free(m->be, m->head_top);
    free(m->head_top_host);
    pthread_mutex_destroy(&m->head_lock);
    be_free(m->be); /* after everything that pointed at its prepared copies */
    free(m);
}

const model_config *model_config_of(const mtplx_model *m) { return &m->cfg; }
const char *model_dir(const mtplx_model *m) { return m->dir; }
int model_has_mtp(const mtplx_model *m) { return m->has_mtp; }
const char *model_load_note(const mtplx_model *m) { return m->fam.load_note; }
int model_memory_is_host(const mtplx_model *m) { return m->be->caps.host_memory; }
/* The backend's prefill chunk (be_caps.prefill_rows: 512 on the CPU and on CUDA); 128 rows when a
 * backend names none. */
int model_prefill_rows(const mtplx_model *m) {
    return m->be->caps.prefill_rows > 0 ? m->be->caps.prefill_rows : 128;
}
int model_reserve_thread(const mtplx_model *m, int rows, mtplx_err *err) {
    return m->be->ops->reserve_rows(m->be, rows, m->max_cols, err);
}
