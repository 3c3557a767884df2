/* synth.c — see synth.h. One shard per trunk layer (plus embedding, head and MTP shards) keeps the
 * memory needed to a layer's tensors; matrices are generated in row blocks. */
#include "synth.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/dtype.h"
#include "../base/file.h"
#include "../base/mem.h"
#include "../kernels/quant.h"
#include "../kernels/threadpool.h"
#include "config.h"
#include "safetensors.h"

static const char k_bench_2b[] =
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\","
    " \"vocab_size\": 151936, \"hidden_size\": 2048, \"intermediate_size\": 6144,"
    " \"num_hidden_layers\": 24, \"full_attention_interval\": 4,"
    " \"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 256,"
    " \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 32, \"linear_key_head_dim\": 128,"
    " \"linear_value_head_dim\": 128, \"linear_conv_kernel_dim\": 4,"
    " \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": false, \"max_position_embeddings\": 32768,"
    " \"partial_rotary_factor\": 0.25, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0,"
    " \"partial_rotary_factor\": 0.25}, \"attn_output_gate\": true,"
    " \"mtp_num_hidden_layers\": 1, \"eos_token_id\": 151645, \"torch_dtype\": \"bfloat16\"}";

/* Qwen3.5 / 3.6 27B dense text configuration (hidden 5120, 64 layers of 3 GDN : 1 gated attention,
 * 24 query / 4 KV heads of 256, GDN 16 key / 48 value heads of 128, FFN 17408, vocab 248320, one MTP
 * layer), as the public config.json files give it (bench/cuda.md cites the source). The -16l variant
 * keeps 16 of the 64 layers (the same per-layer shapes), for a disk or a quick measurement; per-token
 * figures scale by layer count. */
#define QWEN35_27B(LAYERS)                                                                                    \
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\","                      \
    " \"vocab_size\": 248320, \"hidden_size\": 5120, \"intermediate_size\": 17408,"                            \
    " \"num_hidden_layers\": " #LAYERS ", \"full_attention_interval\": 4,"                                      \
    " \"num_attention_heads\": 24, \"num_key_value_heads\": 4, \"head_dim\": 256,"                             \
    " \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 48, \"linear_key_head_dim\": 128,"             \
    " \"linear_value_head_dim\": 128, \"linear_conv_kernel_dim\": 4,"                                          \
    " \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": false, \"max_position_embeddings\": 262144,"          \
    " \"partial_rotary_factor\": 0.25, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0," \
    " \"partial_rotary_factor\": 0.25}, \"attn_output_gate\": true,"                                          \
    " \"mtp_num_hidden_layers\": 1, \"eos_token_id\": 248044, \"torch_dtype\": \"bfloat16\"}"
static const char k_qwen35_27b[] = QWEN35_27B(64);
static const char k_qwen35_27b_16l[] = QWEN35_27B(16);

/* Qwen3.5 / 3.6 35B-A3B MoE text configuration: hidden 2048, 40 layers of 3 GDN : 1 gated attention,
 * 16 query / 2 KV heads of 256, GDN 16 key / 32 value heads of 128, every layer MoE with 256 routed
 * experts (top 8, renormalized) of width 512 plus a gated shared expert of width 512, vocab 248320,
 * one MTP layer (MoE too); bench/cuda.md ("The synthetic 35B-A3B shape") gives the source. The -10l
 * variant keeps 10 of the 40 layers (the same per-layer shapes). */
#define QWEN35_35B_A3B(LAYERS)                                                                                \
    "{\"architectures\": [\"Qwen3_5MoeForCausalLM\"], \"model_type\": \"qwen3_5_moe_text\","               \
    " \"vocab_size\": 248320, \"hidden_size\": 2048, \"num_hidden_layers\": " #LAYERS ","                      \
    " \"full_attention_interval\": 4, \"num_attention_heads\": 16, \"num_key_value_heads\": 2,"              \
    " \"head_dim\": 256, \"linear_num_key_heads\": 16, \"linear_num_value_heads\": 32,"                      \
    " \"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128, \"linear_conv_kernel_dim\": 4,"          \
    " \"num_experts\": 256, \"num_experts_per_tok\": 8, \"norm_topk_prob\": true,"                           \
    " \"moe_intermediate_size\": 512, \"shared_expert_intermediate_size\": 512,"                             \
    " \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": false, \"max_position_embeddings\": 262144,"        \
    " \"partial_rotary_factor\": 0.25, \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0," \
    " \"partial_rotary_factor\": 0.25}, \"attn_output_gate\": true,"                                          \
    " \"mtp_num_hidden_layers\": 1, \"eos_token_id\": 248044, \"torch_dtype\": \"bfloat16\"}"
static const char k_qwen35_35b_a3b[] = QWEN35_35B_A3B(40);
static const char k_qwen35_35b_a3b_10l[] = QWEN35_35B_A3B(10);

const char *synth_preset_config(const char *name) {
    if (name && !strcmp(name, "bench-2b")) return k_bench_2b;
    if (name && !strcmp(name, "qwen35-27b")) return k_qwen35_27b;
    if (name && !strcmp(name, "qwen35-27b-16l")) return k_qwen35_27b_16l;
    if (name && !strcmp(name, "qwen35-35b-a3b")) return k_qwen35_35b_a3b;
    if (name && !strcmp(name, "qwen35-35b-a3b-10l")) return k_qwen35_35b_a3b_10l;
    return NULL;
}

/* ---- deterministic randomness: splitmix64 seeded by (seed, tensor name) ---- */

typedef struct {
    uint64_t s;
} srng;

static uint64_t srng_next(srng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float srng_unif(srng *r) { return (float)((srng_next(r) >> 40) * (1.0 / (1ull << 23))) - 1.0f; }

static srng srng_for(uint64_t seed, const char *name) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    srng r = {seed ^ h};
    srng_next(&r);
    return r;
}

/* ---- tensors of one shard ---- */

typedef enum { FILL_LINEAR, FILL_ZERO, FILL_ONE, FILL_ALOG, FILL_CONV, FILL_EMBED } fill_kind;

typedef struct {
    char name[200];
    int ndim;
    int64_t shape[3];
    fill_kind fill;
    float scale;    /* FILL_LINEAR: half-width of the uniform distribution */
    int quantize;   /* 1: MLX affine when the checkpoint is quantized */
} tspec;

typedef struct {
    tspec t[24];
    int n;
} shard;

static void add(shard *s, const char *prefix, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2,
                fill_kind f, float scale, int quantize) {
    tspec *t = &s->t[s->n++];
    if (snprintf(t->name, sizeof t->name, "%s%s", prefix, name) >= (int)sizeof t->name) t->name[0] = 0; /* never: short names */
    t->ndim = ndim;
    t->shape[0] = d0, t->shape[1] = d1, t->shape[2] = d2;
    t->fill = f;
    t->scale = scale;
    t->quantize = quantize;
}

/* uniform half-width for std 1/sqrt(fan_in) (times extra) */
static float lin(int64_t fan_in, float extra) { return sqrtf(3.0f / (float)fan_in) * extra; }

static void add_attention(shard *s, const char *p, const model_config *c, float out_scale) {
    int64_t H = c->hidden_size, Dh = c->head_dim, qw = (int64_t)c->n_heads * Dh * (c->attn_output_gate ? 2 : 1);
    char sp[200];
    snprintf(sp, sizeof sp, "%sself_attn.", p);
    add(s, sp, "q_proj.weight", 2, qw, H, 0, FILL_LINEAR, lin(H, 1), 1);
    add(s, sp, "k_proj.weight", 2, (int64_t)c->n_kv_heads * Dh, H, 0, FILL_LINEAR, lin(H, 1), 1);
    add(s, sp, "v_proj.weight", 2, (int64_t)c->n_kv_heads * Dh, H, 0, FILL_LINEAR, lin(H, 1), 1);
    add(s, sp, "o_proj.weight", 2, H, (int64_t)c->n_heads * Dh, 0, FILL_LINEAR, lin((int64_t)c->n_heads * Dh, out_scale), 1);
    add(s, sp, "q_norm.weight", 1, Dh, 0, 0, FILL_ZERO, 0, 0);
    add(s, sp, "k_norm.weight", 1, Dh, 0, 0, FILL_ZERO, 0, 0);
}

static void add_gdn(shard *s, const char *p, const model_config *c, float out_scale) {
    int64_t H = c->hidden_size, Hk = c->lin_k_heads, Hv = c->lin_v_heads, Dk = c->lin_k_dim, Dv = c->lin_v_dim;
    int64_t conv_dim = 2 * Hk * Dk + Hv * Dv;
    char sp[200];
    snprintf(sp, sizeof sp, "%slinear_attn.", p);
    add(s, sp, "in_proj_qkv.weight", 2, conv_dim, H, 0, FILL_LINEAR, lin(H, 1), 1);
    add(s, sp, "in_proj_z.weight", 2, Hv * Dv, H, 0, FILL_LINEAR, lin(H, 1), 1);
    add(s, sp, "in_proj_b.weight", 2, Hv, H, 0, FILL_LINEAR, lin(H, 1), 0);
    add(s, sp, "in_proj_a.weight", 2, Hv, H, 0, FILL_LINEAR, lin(H, 1), 0);
    add(s, sp, "out_proj.weight", 2, H, Hv * Dv, 0, FILL_LINEAR, lin(Hv * Dv, out_scale), 1);
    add(s, sp, "conv1d.weight", 3, conv_dim, 1, c->conv_kernel, FILL_CONV, 0, 0);
    add(s, sp, "A_log", 1, Hv, 0, 0, FILL_ALOG, 0, 0);
    add(s, sp, "dt_bias", 1, Hv, 0, 0, FILL_ZERO, 0, 0);
    add(s, sp, "norm.weight", 1, Dv, 0, 0, FILL_ONE, 0, 0);
}

/* The MoE block of a qwen3_5_moe layer: router, routed experts, gated shared expert. Experts are
 * stacked: HF's fused layout (experts.gate_up_proj [E, 2I, H], experts.down_proj [E, H, I]) in bf16,
 * MLX's switch_mlp.{gate,up,down}_proj [E, ...] when quantized (HF's fused tensors are never
 * quantized); the router and the shared expert's gate stay bf16. */
static void add_moe(shard *s, const char *p, const model_config *c, float out_scale, int quantized) {
    int64_t H = c->hidden_size, E = c->n_experts, I = c->moe_intermediate_size, S = c->shared_expert_intermediate_size;
    char sp[200];
    snprintf(sp, sizeof sp, "%smlp.", p);
    add(s, sp, "gate.weight", 2, E, H, 0, FILL_LINEAR, lin(H, 1), 0);
    if (quantized) {
        add(s, sp, "switch_mlp.gate_proj.weight", 3, E, I, H, FILL_LINEAR, lin(H, 1), 1);
        add(s, sp, "switch_mlp.up_proj.weight", 3, E, I, H, FILL_LINEAR, lin(H, 1), 1);
        add(s, sp, "switch_mlp.down_proj.weight", 3, E, H, I, FILL_LINEAR, lin(I, out_scale), 1);
    } else {
        add(s, sp, "experts.gate_up_proj", 3, E, 2 * I, H, FILL_LINEAR, lin(H, 1), 0);
        add(s, sp, "experts.down_proj", 3, E, H, I, FILL_LINEAR, lin(I, out_scale), 0);
    }
    if (S > 0) {
        add(s, sp, "shared_expert.gate_proj.weight", 2, S, H, 0, FILL_LINEAR, lin(H, 1), 1);
        add(s, sp, "shared_expert.up_proj.weight", 2, S, H, 0, FILL_LINEAR, lin(H, 1), 1);
        add(s, sp, "shared_expert.down_proj.weight", 2, H, S, 0, FILL_LINEAR, lin(S, out_scale), 1);
        add(s, sp, "shared_expert_gate.weight", 2, 1, H, 0, FILL_LINEAR, lin(H, 1), 0);
    }
}

static void add_mlp_norms(shard *s, const char *p, const model_config *c, float out_scale, int quantized) {
    int64_t H = c->hidden_size, I = c->intermediate_size;
    char sp[200];
    snprintf(sp, sizeof sp, "%smlp.", p);
    if (c->n_experts > 0) {
        add_moe(s, p, c, out_scale, quantized);
    } else {
        add(s, sp, "gate_proj.weight", 2, I, H, 0, FILL_LINEAR, lin(H, 1), 1);
        add(s, sp, "up_proj.weight", 2, I, H, 0, FILL_LINEAR, lin(H, 1), 1);
        add(s, sp, "down_proj.weight", 2, H, I, 0, FILL_LINEAR, lin(I, out_scale), 1);
    }
    add(s, p, "input_layernorm.weight", 1, H, 0, 0, FILL_ZERO, 0, 0);
    add(s, p, "post_attention_layernorm.weight", 1, H, 0, 0, FILL_ZERO, 0, 0);
}

#define SRNG_GAMMA 0x9e3779b97f4a7c15ull /* srng_next's step: the k-th value ahead is k steps of it */

/* Fill n values of tensor t as f32 into out, taking them from the stream r (advanced by the values
 * drawn: none for FILL_ZERO / FILL_ONE, one per value otherwise). */
static void fill_values(const tspec *t, srng *r, size_t n, float *out) {
    for (size_t i = 0; i < n; i++) {
        switch (t->fill) {
        case FILL_LINEAR: out[i] = srng_unif(r) * t->scale; break;
        case FILL_EMBED: out[i] = srng_unif(r) * 1.7f; break; /* std ~1 */
        case FILL_ZERO: out[i] = 0.f; break;
        case FILL_ONE: out[i] = 1.f; break;
        case FILL_ALOG: out[i] = logf(1.0f + 7.5f * (srng_unif(r) + 1.0f)); break;
        case FILL_CONV: out[i] = srng_unif(r) * 0.5f; break;
        }
    }
}

/* The next n values of tensor t's stream, on all threads: splitmix64's state after k values is its
 * state now plus k steps, so a task starts its slice at its own offset and every value is the one a
 * single pass would give (the file's bytes do not depend on the thread count; test_synth checks them
 * against one sequential stream). Output f32, or bf16 when bf16 is set. */
typedef struct {
    const tspec *t;
    uint64_t s0; /* the stream's state before value 0 */
    size_t n;
    float *f32;
    uint16_t *bf16;
} fill_job;

#define FILL_SLICE 65536 /* values per task */

static void fill_task(void *ctx, int i, int n_tasks) {
    (void)n_tasks;
    fill_job *j = ctx;
    size_t a = (size_t)i * FILL_SLICE, b = a + FILL_SLICE < j->n ? a + FILL_SLICE : j->n;
    int draws = j->t->fill != FILL_ZERO && j->t->fill != FILL_ONE;
    srng r = {j->s0 + (draws ? (uint64_t)a * SRNG_GAMMA : 0)};
    if (j->f32) {
        fill_values(j->t, &r, b - a, j->f32 + a);
        return;
    }
    float tmp[1024];
    for (size_t c = a; c < b; c += 1024) {
        size_t m = b - c < 1024 ? b - c : 1024;
        fill_values(j->t, &r, m, tmp);
        for (size_t k = 0; k < m; k++) j->bf16[c + k] = f32_to_bf16(tmp[k]);
    }
}

/* n values of t's stream r into f32 or bf16 (one of them NULL) on the global pool; r advances past them. */
static void fill_parallel(const tspec *t, srng *r, size_t n, float *f32, uint16_t *bf16) {
    fill_job j = {t, r->s, n, f32, bf16};
    tpool_run(tpool_global(), (int)((n + FILL_SLICE - 1) / FILL_SLICE), fill_task, &j);
    if (t->fill != FILL_ZERO && t->fill != FILL_ONE) r->s += (uint64_t)n * SRNG_GAMMA;
}

/* Generated tensor bytes held until the shard is written. */
typedef struct {
    void *buf[3];
    st_write_item items[3];
    int n;
} gen_out;

/* Quantize 64-row slices of a row block in parallel. */
typedef struct {
    const float *f;
    int rows, cols, bits, gs;
    uint32_t *q;
    uint16_t *sc, *bi;
    int rc;
} qjob;

static void quant_task(void *ctx, int i, int n) {
    (void)n;
    qjob *j = ctx;
    int r0 = i * 64, r1 = r0 + 64 < j->rows ? r0 + 64 : j->rows;
    size_t words = (size_t)j->cols * j->bits / 32, G = (size_t)j->cols / j->gs;
    if (quant_affine(j->f + (size_t)r0 * j->cols, r1 - r0, j->cols, j->bits, j->gs, DT_BF16, j->q + r0 * words,
                     j->sc + r0 * G, j->bi + r0 * G, NULL))
        j->rc = MTPLX_EINVAL;
}

static int gen_tensor(const tspec *t, const synth_opts *o, gen_out *g, mtplx_err *err) {
    int64_t rows = t->shape[0], cols = 1;
    for (int i = 1; i < t->ndim; i++) cols *= t->shape[i];
    srng r = srng_for(o->seed, t->name);
    int quant = o->bits && t->quantize && t->ndim >= 2 && t->shape[t->ndim - 1] % o->group_size == 0;
    if (quant && t->ndim == 3) rows = t->shape[0] * t->shape[1], cols = t->shape[2]; /* stacked experts */
    const int64_t block = 1024;
    float *tmp = mem_alloc((size_t)block * (size_t)cols, sizeof(float), "synth rows", err);
    if (!tmp) return MTPLX_ENOMEM;
    memset(g, 0, sizeof *g);
    if (!quant) {
        uint16_t *dst = mem_alloc((size_t)rows * (size_t)cols, 2, t->name, err);
        if (!dst) return free(tmp), MTPLX_ENOMEM;
        fill_parallel(t, &r, (size_t)rows * (size_t)cols, NULL, dst);
        g->buf[0] = dst;
        g->items[0] = (st_write_item){t->name, DT_BF16, t->ndim, {t->shape[0], t->shape[1], t->shape[2]}, dst};
        g->n = 1;
        free(tmp);
        return 0;
    }
    int64_t words = cols * o->bits / 32, G = cols / o->group_size;
    uint32_t *q = mem_alloc((size_t)rows * (size_t)words, 4, t->name, err);
    uint16_t *sc = mem_alloc((size_t)rows * (size_t)G, 2, t->name, err);
    uint16_t *bi = mem_alloc((size_t)rows * (size_t)G, 2, t->name, err);
    if (!q || !sc || !bi) return free(tmp), free(q), free(sc), free(bi), MTPLX_ENOMEM;
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
        int64_t r1 = r0 + block < rows ? r0 + block : rows;
        fill_parallel(t, &r, (size_t)(r1 - r0) * (size_t)cols, tmp, NULL);
        qjob j = {tmp, (int)(r1 - r0), (int)cols, o->bits, o->group_size, q + (size_t)r0 * words, sc + (size_t)r0 * G,
                  bi + (size_t)r0 * G, 0};
        tpool_run(tpool_global(), (j.rows + 63) / 64, quant_task, &j); /* rows are independent */
        if (j.rc) return free(tmp), free(q), free(sc), free(bi), err_set(err, j.rc, "synth: quantize %s", t->name);
    }
    free(tmp);
    static _Thread_local char names[3][200];
    size_t bl = strlen(t->name) - strlen(".weight");
    snprintf(names[0], sizeof names[0], "%s", t->name);
    snprintf(names[1], sizeof names[1], "%.*s.scales", (int)bl, t->name);
    snprintf(names[2], sizeof names[2], "%.*s.biases", (int)bl, t->name);
    g->buf[0] = q, g->buf[1] = sc, g->buf[2] = bi;
    g->items[0] = (st_write_item){names[0], DT_U32, 2, {rows, words}, q};
    g->items[1] = (st_write_item){names[1], DT_BF16, 2, {rows, G}, sc};
    g->items[2] = (st_write_item){names[2], DT_BF16, 2, {rows, G}, bi};
    if (t->ndim == 3) /* [E, N, K] -> [E, N, words] and [E, N, groups] */
        for (int k = 0; k < 3; k++) {
            st_write_item *it = &g->items[k];
            it->ndim = 3;
            it->shape[2] = it->shape[1], it->shape[0] = t->shape[0], it->shape[1] = t->shape[1];
        }
    g->n = 3;
    return 0;
}

static size_t item_bytes(const st_write_item *it) {
    size_t n = dtype_size(it->dtype);
    for (int i = 0; i < it->ndim; i++) n *= (size_t)it->shape[i];
    return n;
}

/* Generate and write one shard; record its tensor names in weight_map. */
static int write_shard(const shard *s, const synth_opts *o, const char *fname, json_t *weight_map, uint64_t *total,
                       mtplx_err *err) {
    gen_out *g = calloc((size_t)s->n, sizeof *g);
    st_write_item *items = calloc((size_t)s->n * 3, sizeof *items);
    /* the names of quantized items live in a per-call buffer of gen_tensor: copy them */
    char (*names)[200] = calloc((size_t)s->n * 3, sizeof *names);
    int rc = 0, n = 0;
    if (!g || !items || !names) {
        rc = err_set(err, MTPLX_ENOMEM, "synth: out of memory");
        goto done;
    }
    for (int i = 0; i < s->n && !rc; i++) {
        if ((rc = gen_tensor(&s->t[i], o, &g[i], err))) break;
        for (int k = 0; k < g[i].n; k++) {
            items[n] = g[i].items[k];
            snprintf(names[n], sizeof names[n], "%s", g[i].items[k].name);
            items[n].name = names[n];
            json_object_set_new(weight_map, names[n], json_string(fname));
            *total += item_bytes(&items[n]);
            n++;
        }
    }
    if (!rc) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", o->out_dir, fname);
        rc = st_write_file(path, items, n, "{\"format\": \"pt\"}", err);
    }
done:
    if (g)
        for (int i = 0; i < s->n; i++)
            for (int k = 0; k < 3; k++) free(g[i].buf[k]);
    free(g), free(items), free(names);
    return rc;
}

int synth_write(const synth_opts *o, uint64_t *total_bytes, mtplx_err *err) {
    if (o->bits && !quant_format_ok(o->bits, o->group_size))
        return err_set(err, MTPLX_EINVAL, "synth: bits %d / group size %d not supported (4 or 8; 32, 64, 128)", o->bits,
                       o->group_size);
    char *text = NULL;
    const char *cfg_text;
    if (o->config_path) {
        text = file_read_all(o->config_path, NULL, err);
        if (!text) return err->code;
        cfg_text = text;
    } else if (!(cfg_text = synth_preset_config(o->preset))) {
        return err_set(err, MTPLX_EINVAL, "synth: unknown preset \"%s\" (known: bench-2b, qwen35-27b, qwen35-27b-16l, qwen35-35b-a3b, qwen35-35b-a3b-10l)", o->preset ? o->preset : "");
    }
    model_config c;
    int rc = config_parse(cfg_text, o->config_path ? o->config_path : o->preset, &c, err);
    if (rc) return free(text), rc;
    if (c.arch != ARCH_QWEN3_5 && c.arch != ARCH_QWEN3_5_MOE)
        return free(text), err_set(err, MTPLX_EUNSUPPORTED, "synth: model_type %s: only qwen3_5 / qwen3_5_text dense "
                                   "and qwen3_5_moe / qwen3_5_moe_text configs are generated", c.model_type);
    if (mkdir(o->out_dir, 0755) && errno != EEXIST)
        return free(text), err_set(err, MTPLX_EIO, "synth: cannot create %s: %s", o->out_dir, strerror(errno));

    /* config.json: the given config, plus the quantization block */
    json_error_t je;
    json_t *cfg = json_loads(cfg_text, 0, &je);
    free(text);
    if (!cfg) return err_set(err, MTPLX_EBADFILE, "synth: config: %s", je.text);
    if (o->bits) {
        json_t *q = json_pack("{s:i, s:i, s:s}", "group_size", o->group_size, "bits", o->bits, "mode", "affine");
        json_object_set(cfg, "quantization", q);
        json_object_set_new(cfg, "quantization_config", q);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", o->out_dir);
    if (json_dump_file(cfg, path, JSON_INDENT(2))) {
        json_decref(cfg);
        return err_set(err, MTPLX_EIO, "synth: cannot write %s", path);
    }
    json_decref(cfg);

    int n_shards = 1 + c.n_layers + !c.tie_word_embeddings + (c.mtp_layers > 0), idx = 0;
    float out_scale = 1.0f / sqrtf(2.0f * (float)c.n_layers);
    json_t *index = json_object(), *wmap = json_object();
    uint64_t total = 0;
    char fname[64];
    shard *s = malloc(sizeof *s);
    if (!s) return json_decref(index), json_decref(wmap), err_set(err, MTPLX_ENOMEM, "synth: out of memory");
    /* embedding + final norm */
    s->n = 0;
    add(s, "model.", "embed_tokens.weight", 2, c.vocab_size, c.hidden_size, 0, FILL_EMBED, 0, 1);
    add(s, "model.", "norm.weight", 1, c.hidden_size, 0, 0, FILL_ZERO, 0, 0);
    snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", ++idx, n_shards);
    rc = write_shard(s, o, fname, wmap, &total, err);
    progress_report(&o->progress, (uint64_t)idx, (uint64_t)n_shards);
    for (int l = 0; l < c.n_layers && !rc; l++) {
        char p[64];
        snprintf(p, sizeof p, "model.layers.%d.", l);
        s->n = 0;
        if (c.layer_kinds[l] == LAYER_ATTN) add_attention(s, p, &c, out_scale);
        else add_gdn(s, p, &c, out_scale);
        add_mlp_norms(s, p, &c, out_scale, o->bits != 0);
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", ++idx, n_shards);
        rc = write_shard(s, o, fname, wmap, &total, err);
        progress_report(&o->progress, (uint64_t)idx, (uint64_t)n_shards);
    }
    if (!rc && !c.tie_word_embeddings) {
        s->n = 0;
        add(s, "", "lm_head.weight", 2, c.vocab_size, c.hidden_size, 0, FILL_LINEAR, lin(c.hidden_size, 1), 1);
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", ++idx, n_shards);
        rc = write_shard(s, o, fname, wmap, &total, err);
        progress_report(&o->progress, (uint64_t)idx, (uint64_t)n_shards);
    }
    if (!rc && c.mtp_layers > 0) {
        int64_t H = c.hidden_size;
        s->n = 0;
        add(s, "mtp.", "fc.weight", 2, H, 2 * H, 0, FILL_LINEAR, lin(2 * H, 1), 1);
        add(s, "mtp.", "pre_fc_norm_embedding.weight", 1, H, 0, 0, FILL_ZERO, 0, 0);
        add(s, "mtp.", "pre_fc_norm_hidden.weight", 1, H, 0, 0, FILL_ZERO, 0, 0);
        add(s, "mtp.", "norm.weight", 1, H, 0, 0, FILL_ZERO, 0, 0);
        add_attention(s, "mtp.layers.0.", &c, out_scale);
        add_mlp_norms(s, "mtp.layers.0.", &c, out_scale, o->bits != 0);
        snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", ++idx, n_shards);
        rc = write_shard(s, o, fname, wmap, &total, err);
        progress_report(&o->progress, (uint64_t)idx, (uint64_t)n_shards);
    }
    free(s);
    if (!rc) {
        json_object_set_new(index, "metadata", json_pack("{s:I}", "total_size", (json_int_t)total));
        json_object_set(index, "weight_map", wmap);
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", o->out_dir);
        if (json_dump_file(index, path, JSON_INDENT(1))) rc = err_set(err, MTPLX_EIO, "synth: cannot write %s", path);
    }
    json_decref(wmap);
    json_decref(index);
    if (!rc && total_bytes) *total_bytes = total;
    return rc;
}
