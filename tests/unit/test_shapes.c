/* test_shapes.c — the forward on a synthetic Qwen3.5 checkpoint of other shapes than the goldens:
 * 5 layers with full_attention_interval 3, 4 heads / 2 KV heads, Hv/Hk = 3, Dk = 16 != Dv = 8,
 * untied LM head, vocab 301, intermediate 96, plus an MTP head. Written with st_write_file into a
 * temp dir, in HF layout (prefix model., conv [C,1,Kc], zero-centred norms) and in MLX layout
 * (nested text_config, prefix model.language_model., conv [C,Kc,1], norms stored shifted) from the
 * same values, so both must give bit-identical logits. Checks prefill == stepwise decode and row
 * invariance bit for bit, commit rollback, and loader errors that name the tensor. */
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fwd_util.h"
#include "test.h"

enum { V = 301, H = 64, I = 96, L = 5, NH = 4, NKV = 2, DH = 32, HK = 2, HV = 6, DK = 16, DV = 8, KC = 4 };
#define CONV (2 * HK * DK + HV * DV)

static const char *k_text_cfg =
    "\"model_type\": \"qwen3_5_text\", \"vocab_size\": 301, \"hidden_size\": 64, \"intermediate_size\": 96,"
    "\"num_hidden_layers\": 5, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 32,"
    "\"linear_num_key_heads\": 2, \"linear_num_value_heads\": 6, \"linear_key_head_dim\": 16,"
    "\"linear_value_head_dim\": 8, \"linear_conv_kernel_dim\": 4, \"full_attention_interval\": 3,"
    "\"tie_word_embeddings\": false, \"rms_norm_eps\": 1e-6, \"max_position_embeddings\": 4096,"
    "\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25},"
    "\"mtp_num_hidden_layers\": 1";

typedef struct {
    st_write_item items[256];
    float *bufs[256];
    char names[256][128];
    int n;
    int mlx;            /* MLX layout: norms stored shifted, conv [C,Kc,1] */
    const char *prefix; /* trunk prefix */
} synth;

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Deterministic pseudo-random value in [-1, 1) from (seed, i). */
static float urand(uint64_t seed, size_t i) {
    uint64_t x = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 27, x *= 0x94d049bb133111ebull, x ^= x >> 31;
    return (float)((double)(x >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef enum { K_MAT, K_ZNORM, K_PNORM, K_ALOG, K_DTB, K_CONV } kind;

/* Add tensor `name` (under `pre`) with values keyed by its layout-independent name `key`. */
static void add(synth *s, const char *pre, const char *key, kind k, int ndim, int64_t d0, int64_t d1, int64_t d2) {
    snprintf(s->names[s->n], sizeof s->names[0], "%s%s", pre, key);
    st_write_item *it = &s->items[s->n];
    it->name = s->names[s->n];
    it->dtype = DT_F32;
    it->ndim = ndim;
    it->shape[0] = d0, it->shape[1] = d1, it->shape[2] = d2;
    size_t n = (size_t)d0 * (ndim > 1 ? d1 : 1) * (ndim > 2 ? d2 : 1);
    float *b = malloc(sizeof(float) * n);
    uint64_t seed = hash_name(key);
    for (size_t i = 0; i < n; i++) {
        float u = urand(seed, i);
        switch (k) {
        case K_MAT: b[i] = u * sqrtf(3.0f / (float)(ndim > 1 ? d1 : 1)); break;
        case K_ZNORM: b[i] = 0.2f * u + (s->mlx ? 1.0f : 0.0f); break;
        case K_PNORM: b[i] = 1.0f + 0.2f * u; break;
        case K_ALOG: b[i] = logf(0.5f + 3.75f * (u + 1.0f)); break;
        case K_DTB: b[i] = 0.5f * u; break;
        case K_CONV: b[i] = 0.3f * u; break;
        }
    }
    it->data = b;
    s->bufs[s->n++] = b;
}

static void add_attn_layer(synth *s, const char *pre, const char *lp) {
    char k[128];
#define A(name, kd, nd, a, b_) (snprintf(k, sizeof k, "%s%s", lp, name), add(s, pre, k, kd, nd, a, b_, 0))
    A("input_layernorm.weight", K_ZNORM, 1, H, 0);
    A("post_attention_layernorm.weight", K_ZNORM, 1, H, 0);
    A("self_attn.q_proj.weight", K_MAT, 2, 2 * NH * DH, H);
    A("self_attn.k_proj.weight", K_MAT, 2, NKV * DH, H);
    A("self_attn.v_proj.weight", K_MAT, 2, NKV * DH, H);
    A("self_attn.o_proj.weight", K_MAT, 2, H, NH * DH);
    A("self_attn.q_norm.weight", K_ZNORM, 1, DH, 0);
    A("self_attn.k_norm.weight", K_ZNORM, 1, DH, 0);
    A("mlp.gate_proj.weight", K_MAT, 2, I, H);
    A("mlp.up_proj.weight", K_MAT, 2, I, H);
    A("mlp.down_proj.weight", K_MAT, 2, H, I);
}

static void add_gdn_layer(synth *s, const char *pre, const char *lp) {
    char k[128];
    A("input_layernorm.weight", K_ZNORM, 1, H, 0);
    A("post_attention_layernorm.weight", K_ZNORM, 1, H, 0);
    A("linear_attn.in_proj_qkv.weight", K_MAT, 2, CONV, H);
    A("linear_attn.in_proj_z.weight", K_MAT, 2, HV * DV, H);
    A("linear_attn.in_proj_b.weight", K_MAT, 2, HV, H);
    A("linear_attn.in_proj_a.weight", K_MAT, 2, HV, H);
    A("linear_attn.out_proj.weight", K_MAT, 2, H, HV * DV);
    A("linear_attn.A_log", K_ALOG, 1, HV, 0);
    A("linear_attn.dt_bias", K_DTB, 1, HV, 0);
    A("linear_attn.norm.weight", K_PNORM, 1, DV, 0);
    snprintf(k, sizeof k, "%slinear_attn.conv1d.weight", lp);
    if (s->mlx) add(s, pre, k, K_CONV, 3, CONV, KC, 1);
    else add(s, pre, k, K_CONV, 3, CONV, 1, KC);
    A("mlp.gate_proj.weight", K_MAT, 2, I, H);
    A("mlp.up_proj.weight", K_MAT, 2, I, H);
    A("mlp.down_proj.weight", K_MAT, 2, H, I);
#undef A
}

/* Write the synthetic checkpoint into dir. `break_tensor` (or NULL) is written with one row too many. */
static int synth_write(const char *dir, int mlx, const char *break_tensor, const char *drop_tensor) {
    synth s = {.mlx = mlx, .prefix = mlx ? "model.language_model." : "model."};
    mkdir(dir, 0700);
    add(&s, s.prefix, "embed_tokens.weight", K_MAT, 2, V, H, 0);
    for (int i = 0; i < L; i++) {
        char lp[64];
        snprintf(lp, sizeof lp, "layers.%d.", i);
        if ((i + 1) % 3 == 0) add_attn_layer(&s, s.prefix, lp);
        else add_gdn_layer(&s, s.prefix, lp);
    }
    add(&s, s.prefix, "norm.weight", K_ZNORM, 1, H, 0, 0);
    add(&s, "", "lm_head.weight", K_MAT, 2, V, H, 0);
    add(&s, "mtp.", "pre_fc_norm_embedding.weight", K_ZNORM, 1, H, 0, 0);
    add(&s, "mtp.", "pre_fc_norm_hidden.weight", K_ZNORM, 1, H, 0, 0);
    add(&s, "mtp.", "fc.weight", K_MAT, 2, H, 2 * H, 0);
    add_attn_layer(&s, "mtp.", "layers.0.");
    add(&s, "mtp.", "norm.weight", K_ZNORM, 1, H, 0, 0);
    int n = 0;
    for (int i = 0; i < s.n; i++) {
        if (drop_tensor && !strcmp(s.items[i].name, drop_tensor)) continue;
        if (break_tensor && !strcmp(s.items[i].name, break_tensor)) {
            s.items[i].shape[0] -= 1; /* fewer rows: data stays in bounds, shape is wrong */
        }
        s.items[n++] = s.items[i];
    }
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    mtplx_err err = {0};
    int rc = st_write_file(path, s.items, n, NULL, &err);
    if (rc) fprintf(stderr, "st_write_file: %s\n", err.msg);
    for (int i = 0; i < s.n; i++) free(s.bufs[i]);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    if (mlx)
        fprintf(f, "{\"model_type\": \"qwen3_5\", \"architectures\": [\"Qwen3_5ForConditionalGeneration\"],"
                   " \"text_config\": {%s}}\n", k_text_cfg);
    else
        fprintf(f, "{\"architectures\": [\"Qwen3_5ForCausalLM\"], %s}\n", k_text_cfg);
    fclose(f);
    return rc;
}

static char g_tmp[256], g_hf[300], g_mlx[300];
static mtplx_model *g_m;
static int32_t g_ids[48];

static void rm_dir(const char *dir) {
    char p[512];
    snprintf(p, sizeof p, "%s/model.safetensors", dir), unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir), unlink(p);
    rmdir(dir);
}

TEST(test_synthetic_loads_with_its_shapes) {
    const model_config *c = model_config_of(g_m);
    CHECK_INT(c->vocab_size, V);
    CHECK_INT(c->lin_v_heads / c->lin_k_heads, 3);
    CHECK_INT(c->lin_k_dim, DK);
    CHECK_INT(c->lin_v_dim, DV);
    CHECK_INT(c->tie_word_embeddings, 0);
    CHECK_INT(c->layer_kinds[2], LAYER_ATTN);
    CHECK_INT(c->layer_kinds[4], LAYER_GDN);
    CHECK(model_has_mtp(g_m));
}

/* Prefill == stepwise decode == any row split, bit for bit; MTP likewise. T = 40 crosses the
 * internal prefill chunk (32 rows) of both the trunk and the MTP head. */
TEST(test_synthetic_prefill_equals_stepwise) {
    int T = 40;
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(g_m, T, 8, &a, &err) == 0);
    REQUIRE(model_state_new(g_m, T, 8, &b, &err) == 0);
    float *la = malloc(sizeof(float) * T * V), *lb = malloc(sizeof(float) * T * V);
    float *ha = malloc(sizeof(float) * T * H), *hb = malloc(sizeof(float) * T * H);
    fwd_request ra = {.logits = la, .hidden = ha};
    REQUIRE(model_forward(g_m, a, g_ids, T, &ra, &err) == 0);
    /* b: uneven row groups 1, 2, 3, ... with capture on, committing all rows */
    for (int t = 0, n = 1; t < T; t += n, n++) {
        if (n > T - t) n = T - t;
        if (n > 8) n = 8;
        fwd_request rb = {.logits = lb + (size_t)t * V, .hidden = hb + (size_t)t * H, .capture = 1};
        REQUIRE(model_forward(g_m, b, g_ids + t, n, &rb, &err) == 0);
        REQUIRE(model_state_commit(b, n, &err) == 0);
    }
    CHECK_MSG(!memcmp(la, lb, sizeof(float) * T * V), "logits differ (max|d| %.3g)", max_abs_diff(la, lb, (size_t)T * V));
    CHECK(!memcmp(ha, hb, sizeof(float) * T * H));
    /* the logits are not degenerate */
    double mx = 0;
    for (int i = 0; i < T * V; i++) mx = cmp_worst(mx, fabs(la[i]));
    CHECK(mx > 0.1 && isfinite(mx));
    mtp_state *ma = NULL, *mb = NULL;
    REQUIRE(mtp_state_new(g_m, T, &ma, &err) == 0);
    REQUIRE(mtp_state_new(g_m, T, &mb, &err) == 0);
    REQUIRE(model_mtp_forward(g_m, ma, ha, g_ids + 1, T - 1, hb, &err) == 0);
    float *row = malloc(sizeof(float) * H);
    for (int t = 0; t + 1 < T; t++) {
        REQUIRE(model_mtp_forward(g_m, mb, ha + (size_t)t * H, g_ids + t + 1, 1, row, &err) == 0);
        CHECK_MSG(!memcmp(row, hb + (size_t)t * H, sizeof(float) * H), "MTP row %d differs", t);
    }
    free(row);
    mtp_state_free(ma), mtp_state_free(mb);
    free(la), free(lb), free(ha), free(hb);
    model_state_free(a), model_state_free(b);
}

TEST(test_synthetic_commit_rollback) {
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(g_m, 32, 8, &a, &err) == 0);
    REQUIRE(model_state_new(g_m, 32, 8, &b, &err) == 0);
    float *la = malloc(sizeof(float) * V), *lb = malloc(sizeof(float) * V);
    for (int T = 2; T <= 8; T++)
        for (int keep = 1; keep <= T; keep++) {
            model_state_reset(a), model_state_reset(b);
            REQUIRE(model_forward(g_m, a, g_ids, 4, NULL, &err) == 0);
            REQUIRE(model_forward(g_m, b, g_ids, 4, NULL, &err) == 0);
            fwd_request cap = {.capture = 1};
            REQUIRE(model_forward(g_m, a, g_ids + 4, T, &cap, &err) == 0);
            REQUIRE(model_state_commit(a, keep, &err) == 0);
            REQUIRE(model_forward(g_m, b, g_ids + 4, keep, NULL, &err) == 0);
            fwd_request ra = {.logits = la}, rb = {.logits = lb};
            REQUIRE(model_forward(g_m, a, g_ids + 20, 1, &ra, &err) == 0);
            REQUIRE(model_forward(g_m, b, g_ids + 20, 1, &rb, &err) == 0);
            CHECK_MSG(!memcmp(la, lb, sizeof(float) * V), "T=%d keep=%d differs", T, keep);
        }
    free(la), free(lb);
    model_state_free(a), model_state_free(b);
}

/* HF layout and MLX layout (shifted norms, [C,Kc,1] conv, nested config, other prefix) agree exactly. */
TEST(test_synthetic_mlx_layout_matches_hf_layout) {
    mtplx_err err = {0};
    mtplx_model *mm = NULL;
    int rc = model_load(g_mlx, &mm, &err);
    CHECK_MSG(rc == 0, "load MLX layout: %s", err.msg);
    if (rc) return;
    int T = 12;
    model_state *a = NULL, *b = NULL;
    REQUIRE(model_state_new(g_m, T, 1, &a, &err) == 0);
    REQUIRE(model_state_new(mm, T, 1, &b, &err) == 0);
    float *la = malloc(sizeof(float) * T * V), *lb = malloc(sizeof(float) * T * V);
    fwd_request ra = {.logits = la}, rb = {.logits = lb};
    REQUIRE(model_forward(g_m, a, g_ids, T, &ra, &err) == 0);
    REQUIRE(model_forward(mm, b, g_ids, T, &rb, &err) == 0);
    CHECK_MSG(!memcmp(la, lb, sizeof(float) * T * V), "layouts differ (max|d| %.3g)", max_abs_diff(la, lb, (size_t)T * V));
    free(la), free(lb);
    model_state_free(a), model_state_free(b);
    model_free(mm);
}

/* A copied state (trunk and MTP) continues bit-identically to the original. */
TEST(test_state_copy_continues_identically) {
    mtplx_err err = {0};
    model_state *a = NULL, *b = NULL, *small = NULL;
    REQUIRE(model_state_new(g_m, 32, 4, &a, &err) == 0);
    REQUIRE(model_state_new(g_m, 40, 4, &b, &err) == 0);
    REQUIRE(model_state_new(g_m, 5, 4, &small, &err) == 0);
    float *ha = malloc(sizeof(float) * 9 * H), *hb = malloc(sizeof(float) * 9 * H);
    float *la = malloc(sizeof(float) * 3 * V), *lb = malloc(sizeof(float) * 3 * V);
    fwd_request r0 = {.hidden = ha};
    REQUIRE(model_forward(g_m, a, g_ids, 9, &r0, &err) == 0);
    REQUIRE(model_forward(g_m, b, g_ids + 30, 3, NULL, &err) == 0); /* garbage to overwrite */
    CHECK_INT(model_state_copy(b, a, &err), 0);
    CHECK_INT(model_state_len(b), 9);
    CHECK_INT(model_state_copy(small, a, &err), MTPLX_ERANGE);
    fwd_request ra = {.logits = la}, rb = {.logits = lb};
    REQUIRE(model_forward(g_m, a, g_ids + 9, 3, &ra, &err) == 0);
    REQUIRE(model_forward(g_m, b, g_ids + 9, 3, &rb, &err) == 0);
    CHECK(!memcmp(la, lb, sizeof(float) * 3 * V));
    mtp_state *ma = NULL, *mb = NULL;
    REQUIRE(mtp_state_new(g_m, 16, &ma, &err) == 0);
    REQUIRE(mtp_state_new(g_m, 16, &mb, &err) == 0);
    REQUIRE(model_mtp_forward(g_m, ma, ha, g_ids + 1, 7, hb, &err) == 0);
    CHECK_INT(mtp_state_copy(mb, ma, &err), 0);
    CHECK_INT(mtp_state_len(mb), 7);
    float *oa = malloc(sizeof(float) * H), *ob = malloc(sizeof(float) * H);
    REQUIRE(model_mtp_forward(g_m, ma, ha + 7 * H, g_ids + 8, 1, oa, &err) == 0);
    REQUIRE(model_mtp_forward(g_m, mb, ha + 7 * H, g_ids + 8, 1, ob, &err) == 0);
    CHECK(!memcmp(oa, ob, sizeof(float) * H));
    free(oa), free(ob), free(ha), free(hb), free(la), free(lb);
    mtp_state_free(ma), mtp_state_free(mb);
    model_state_free(a), model_state_free(b), model_state_free(small);
}

TEST(test_loader_names_wrong_shape_and_missing_tensor) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/bad", g_tmp);
    mtplx_err err = {0};
    mtplx_model *m = NULL;
    REQUIRE(synth_write(dir, 0, "model.layers.3.linear_attn.in_proj_z.weight", NULL) == 0);
    CHECK_INT(model_load(dir, &m, &err), MTPLX_EBADFILE);
    CHECK_MSG(strstr(err.msg, "model.layers.3.linear_attn.in_proj_z.weight") && strstr(err.msg, "[47, 64]") &&
                  strstr(err.msg, "[48, 64]"), "message: %s", err.msg);
    CHECK(m == NULL);
    rm_dir(dir);
    REQUIRE(synth_write(dir, 0, NULL, "model.layers.2.self_attn.k_norm.weight") == 0);
    CHECK_INT(model_load(dir, &m, &err), MTPLX_EBADFILE);
    CHECK_MSG(strstr(err.msg, "missing") && strstr(err.msg, "model.layers.2.self_attn.k_norm.weight"), "message: %s",
              err.msg);
    rm_dir(dir);
    /* the untied head is required when the config says untied */
    REQUIRE(synth_write(dir, 0, NULL, "lm_head.weight") == 0);
    CHECK_INT(model_load(dir, &m, &err), MTPLX_EBADFILE);
    CHECK_MSG(strstr(err.msg, "lm_head.weight") != NULL, "message: %s", err.msg);
    rm_dir(dir);
    /* hostile sizes in config.json: refused with a message naming the field, no overflow (UBSan) */
    static const char *huge[][3] = {
        {"\"head_dim\": 32", "\"head_dim\": 1073741824", "head_dim"},
        {"\"linear_value_head_dim\": 8", "\"linear_value_head_dim\": 2000000000", "Hv x Dv"},
        {"\"num_attention_heads\": 4", "\"num_attention_heads\": 2147483646", "num_attention_heads"},
        {"\"linear_conv_kernel_dim\": 4", "\"linear_conv_kernel_dim\": 2147483647", "linear_conv_kernel_dim"},
    };
    for (unsigned i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        REQUIRE(synth_write(dir, 0, NULL, NULL) == 0);
        const char *at = strstr(k_text_cfg, huge[i][0]);
        REQUIRE(at);
        char path[512];
        snprintf(path, sizeof path, "%s/config.json", dir);
        FILE *f = fopen(path, "w");
        REQUIRE(f);
        fprintf(f, "{%.*s%s%s}\n", (int)(at - k_text_cfg), k_text_cfg, huge[i][1], at + strlen(huge[i][0]));
        fclose(f);
        err.msg[0] = 0;
        CHECK_MSG(model_load(dir, &m, &err) != 0, "config with %s loaded", huge[i][1]);
        CHECK_MSG(strstr(err.msg, huge[i][2]) != NULL, "message for %s: %s", huge[i][1], err.msg);
        rm_dir(dir);
    }
    CHECK(model_load("/nonexistent/model", &m, &err) != 0);
    CHECK(err.msg[0] != 0);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mtplx_test_shapes_XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    snprintf(g_hf, sizeof g_hf, "%s/hf", g_tmp);
    snprintf(g_mlx, sizeof g_mlx, "%s/mlx", g_tmp);
    mtplx_err err = {0};
    if (synth_write(g_hf, 0, NULL, NULL) || synth_write(g_mlx, 1, NULL, NULL) || model_load(g_hf, &g_m, &err)) {
        fprintf(stderr, "synthetic checkpoint: %s\n", err.msg);
        return 1;
    }
    for (int i = 0; i < 48; i++) g_ids[i] = (int32_t)((i * 97 + 13) % V);
    RUN(test_synthetic_loads_with_its_shapes);
    RUN(test_synthetic_prefill_equals_stepwise);
    RUN(test_synthetic_commit_rollback);
    RUN(test_synthetic_mlx_layout_matches_hf_layout);
    RUN(test_state_copy_continues_identically);
    RUN(test_loader_names_wrong_shape_and_missing_tensor);
    model_free(g_m);
    rm_dir(g_hf);
    rm_dir(g_mlx);
    rmdir(g_tmp);
    return TEST_SUMMARY();
}
