/* test_family_layouts.c — the same MoE checkpoint stored in every expert layout users have gives
 * the same logits: numbered experts (the golden), fused `experts.gate_up_proj` [E,2I,H] +
 * `experts.down_proj` [E,H,I], MLX `switch_mlp.{gate,up,down}_proj` [E,..] in f32 and 8-bit affine
 * quantized (checked against the numbered layout holding the dequantized values). And checkpoints
 * this engine must not run are refused with a reason: dynamic / longrope RoPE, unknown model_type,
 * linear-layer biases. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/base/file.h"
#include "../../src/kernels/matmul.h"
#include "../../src/model/model_internal.h"
#include "../../src/model/snapshot.h"
#include "fwd_util.h"
#include "test.h"

static const char *k_moe = "tests/data/goldens/qwen3_5_moe";

typedef enum { LAYOUT_FUSED, LAYOUT_SWITCH, LAYOUT_SWITCH_Q8, LAYOUT_NUMBERED_DEQ } layout;

/* Arena of bytes the written items point into. */
typedef struct {
    unsigned char *buf[4096];
    int n;
} blobs;

static void *blob(blobs *b, size_t bytes) {
    void *p = calloc(1, bytes ? bytes : 1);
    b->buf[b->n++] = p;
    return p;
}

static void blobs_free(blobs *b) {
    for (int i = 0; i < b->n; i++) free(b->buf[i]);
}

static int copy_file(const char *from, const char *to) {
    mtplx_err err;
    size_t n;
    char *d = file_read_all(from, &n, &err);
    if (!d) return -1;
    FILE *f = fopen(to, "wb");
    int ok = f && fwrite(d, 1, n, f) == n;
    if (f) fclose(f);
    free(d);
    return ok ? 0 : -1;
}

/* 8-bit affine quantization of rows [rows][cols] with groups of gs: q = round((w - min) / s). */
static void quant8(const float *w, int rows, int cols, int gs, uint32_t *q, float *scales, float *biases, float *deq) {
    for (int r = 0; r < rows; r++)
        for (int g = 0; g < cols / gs; g++) {
            const float *x = w + (size_t)r * cols + g * gs;
            float lo = x[0], hi = x[0];
            for (int i = 1; i < gs; i++) {
                if (x[i] < lo) lo = x[i];
                if (x[i] > hi) hi = x[i];
            }
            float s = (hi - lo) / 255.f;
            if (s <= 0) s = 1e-7f;
            scales[r * (cols / gs) + g] = s;
            biases[r * (cols / gs) + g] = lo;
            for (int i = 0; i < gs; i++) {
                int c = g * gs + i;
                long v = lroundf((x[i] - lo) / s);
                if (v < 0) v = 0;
                if (v > 255) v = 255;
                q[(size_t)r * (cols / 4) + c / 4] |= (uint32_t)v << (8 * (c % 4));
                deq[(size_t)r * cols + c] = s * (float)v + lo;
            }
        }
}

/* Write dir/ = the qwen3_5_moe golden with its trunk experts re-stored in layout L. */
static int write_layout(const char *dir, layout L) {
    mtplx_err err = {0};
    st_set *st = NULL;
    char path[600];
    snprintf(path, sizeof path, "%s/model.safetensors", k_moe);
    if (st_open_file(path, &st, &err)) return -1;
    int E = 4, I = 32, H = 64, gs = 32, nl = 4;
    blobs b = {0};
    st_write_item *items = calloc((size_t)st_count(st) + 64, sizeof *items);
    int n = 0;
    for (int i = 0; i < st_count(st); i++) {
        const st_tensor *t = st_at(st, i);
        if (strstr(t->name, "model.layers.") == t->name && strstr(t->name, ".mlp.experts.")) continue;
        items[n++] = (st_write_item){t->name, t->dtype, t->ndim, {0}, t->data};
        memcpy(items[n - 1].shape, t->shape, sizeof t->shape);
    }
    for (int l = 0; l < nl; l++) {
        const float *g[4], *u[4], *dn[4];
        char nm[200];
        for (int e = 0; e < E; e++) {
            snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%d.gate_proj.weight", l, e);
            g[e] = st_find(st, nm)->data;
            snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%d.up_proj.weight", l, e);
            u[e] = st_find(st, nm)->data;
            snprintf(nm, sizeof nm, "model.layers.%d.mlp.experts.%d.down_proj.weight", l, e);
            dn[e] = st_find(st, nm)->data;
        }
        char *name;
#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), name = blob(&b, strlen(nm) + 1), strcpy(name, nm))
        size_t II = (size_t)I * H;
        if (L == LAYOUT_FUSED) {
            float *gu = blob(&b, sizeof(float) * E * 2 * II), *dd = blob(&b, sizeof(float) * E * II);
            for (int e = 0; e < E; e++) {
                memcpy(gu + (size_t)e * 2 * II, g[e], sizeof(float) * II);
                memcpy(gu + (size_t)e * 2 * II + II, u[e], sizeof(float) * II);
                memcpy(dd + (size_t)e * II, dn[e], sizeof(float) * II);
            }
            items[n++] = (st_write_item){NAME("model.layers.%d.mlp.experts.gate_up_proj", l), DT_F32, 3, {E, 2 * I, H}, gu};
            items[n++] = (st_write_item){NAME("model.layers.%d.mlp.experts.down_proj", l), DT_F32, 3, {E, H, I}, dd};
        } else if (L == LAYOUT_SWITCH) {
            const float **src[3] = {g, u, dn};
            const char *pn[3] = {"gate_proj", "up_proj", "down_proj"};
            for (int k = 0; k < 3; k++) {
                float *w = blob(&b, sizeof(float) * E * II);
                for (int e = 0; e < E; e++) memcpy(w + (size_t)e * II, src[k][e], sizeof(float) * II);
                int rows = k == 2 ? H : I, cols = k == 2 ? I : H;
                items[n++] = (st_write_item){NAME("model.layers.%d.mlp.switch_mlp.%s.weight", l, pn[k]), DT_F32, 3,
                                             {E, rows, cols}, w};
            }
        } else { /* 8-bit: switch_mlp quantized, or numbered holding the dequantized values */
            const float **src[3] = {g, u, dn};
            const char *pn[3] = {"gate_proj", "up_proj", "down_proj"};
            for (int k = 0; k < 3; k++) {
                int rows = k == 2 ? H : I, cols = k == 2 ? I : H, ng = cols / gs;
                uint32_t *q = blob(&b, sizeof(uint32_t) * E * rows * (cols / 4));
                float *sc = blob(&b, sizeof(float) * E * rows * ng), *bi = blob(&b, sizeof(float) * E * rows * ng);
                float *deq = blob(&b, sizeof(float) * E * II);
                for (int e = 0; e < E; e++)
                    quant8(src[k][e], rows, cols, gs, q + (size_t)e * rows * (cols / 4), sc + (size_t)e * rows * ng,
                           bi + (size_t)e * rows * ng, deq + (size_t)e * II);
                if (L == LAYOUT_SWITCH_Q8) {
                    items[n++] = (st_write_item){NAME("model.layers.%d.mlp.switch_mlp.%s.weight", l, pn[k]), DT_U32, 3,
                                                 {E, rows, cols / 4}, q};
                    items[n++] = (st_write_item){NAME("model.layers.%d.mlp.switch_mlp.%s.scales", l, pn[k]), DT_F32, 3,
                                                 {E, rows, ng}, sc};
                    items[n++] = (st_write_item){NAME("model.layers.%d.mlp.switch_mlp.%s.biases", l, pn[k]), DT_F32, 3,
                                                 {E, rows, ng}, bi};
                } else {
                    for (int e = 0; e < E; e++)
                        items[n++] = (st_write_item){NAME("model.layers.%d.mlp.experts.%d.%s.weight", l, e, pn[k]),
                                                     DT_F32, 2, {rows, cols}, deq + (size_t)e * II};
                }
            }
        }
#undef NAME
    }
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = st_write_file(path, items, n, NULL, &err);
    if (rc) fprintf(stderr, "write %s: %s\n", path, err.msg);
    char from[600], to[600];
    snprintf(from, sizeof from, "%s/config.json", k_moe);
    snprintf(to, sizeof to, "%s/config.json", dir);
    if (!rc) rc = copy_file(from, to);
    free(items);
    blobs_free(&b);
    st_close(st);
    return rc;
}

/* Prefill logits of the golden's tokens (T rows) for the checkpoint in dir; caller frees. */
static float *logits_of(const char *dir, const golden *g, mtplx_err *err) {
    mtplx_model *m = NULL;
    if (model_load(dir, &m, err)) return NULL;
    model_state *s = NULL;
    float *lg = malloc(sizeof(float) * (size_t)g->T * g->V);
    fwd_request req = {.logits = lg};
    if (model_state_new(m, g->T, 8, &s, err) || model_forward(m, s, g->ids, g->T, &req, err)) {
        free(lg);
        lg = NULL;
    }
    model_state_free(s);
    model_free(m);
    return lg;
}

static char g_tmp[256];

static void make_tmp(void) {
    if (g_tmp[0]) return;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mtplx_layouts_XXXXXX");
    if (!mkdtemp(g_tmp)) g_tmp[0] = 0;
}

TEST(test_moe_fused_and_switch_layouts_match_numbered) {
    make_tmp();
    REQUIRE(g_tmp[0]);
    mtplx_err err = {0};
    golden g;
    REQUIRE(golden_open("tests/data/goldens/qwen3_5_moe/golden.safetensors", &g, &err) == 0);
    float *ref = logits_of(k_moe, &g, &err);
    REQUIRE(ref);
    const char *names[2] = {"fused", "switch"};
    layout ls[2] = {LAYOUT_FUSED, LAYOUT_SWITCH};
    for (int i = 0; i < 2; i++) {
        char dir[400];
        snprintf(dir, sizeof dir, "%s/%s", g_tmp, names[i]);
        REQUIRE(write_layout(dir, ls[i]) == 0);
        float *lg = logits_of(dir, &g, &err);
        CHECK_MSG(lg != NULL, "%s: %s", names[i], err.msg);
        if (lg) {
            /* same values, same kernels: bit-identical */
            CHECK_MSG(memcmp(lg, ref, sizeof(float) * (size_t)g.T * g.V) == 0, "%s layout logits differ (max %.3g)",
                      names[i], max_abs_diff(lg, ref, (size_t)g.T * g.V));
            CHECK_MSG(max_abs_diff(lg, g.logits, (size_t)g.T * g.V) <= 1e-3, "%s layout vs golden", names[i]);
        }
        free(lg);
    }
    free(ref);
    golden_close(&g);
}

TEST(test_moe_mlx_quantized_switch_layout) {
    make_tmp();
    REQUIRE(g_tmp[0]);
    mtplx_err err = {0};
    golden g;
    REQUIRE(golden_open("tests/data/goldens/qwen3_5_moe/golden.safetensors", &g, &err) == 0);
    char dq[400], dd[400];
    snprintf(dq, sizeof dq, "%s/switch_q8", g_tmp);
    snprintf(dd, sizeof dd, "%s/numbered_deq", g_tmp);
    REQUIRE(write_layout(dq, LAYOUT_SWITCH_Q8) == 0);
    REQUIRE(write_layout(dd, LAYOUT_NUMBERED_DEQ) == 0);
    /* Same arithmetic on both sides: quantized weights with fp32 activations (the default int8
     * activations are a separate approximation, measured in tests/unit/test_quant.c). */
    kern_matmul_set_qact_f32(1);
    float *lq = logits_of(dq, &g, &err);
    kern_matmul_set_qact_f32(0);
    CHECK_MSG(lq != NULL, "q8: %s", err.msg);
    float *ld = logits_of(dd, &g, &err);
    CHECK_MSG(ld != NULL, "dequantized: %s", err.msg);
    if (lq && ld) {
        double d = max_abs_diff(lq, ld, (size_t)g.T * g.V);
        printf("MLX 8-bit switch_mlp vs dequantized numbered experts: max|d| = %.3g\n", d);
        CHECK_MSG(d <= 1e-4, "quantized switch_mlp logits differ by %.3g", d);
    }
    free(lq);
    free(ld);
    golden_close(&g);
}

/* Routed experts get the backend's packed copy like every other weight (MTPLX_PACK_EXPERTS unset: a
 * checkpoint this small fits in memory twice over), MTPLX_PACK_EXPERTS=0 leaves them in the
 * checkpoint's layout and says so in the load note, and both give the same logits up to the float
 * order of the two kernels (the int8 group sums are exact either way). */
TEST(test_moe_experts_packed_by_policy) {
    make_tmp();
    REQUIRE(g_tmp[0]);
    mtplx_err err = {0};
    golden g;
    REQUIRE(golden_open("tests/data/goldens/qwen3_5_moe/golden.safetensors", &g, &err) == 0);
    char dq[400];
    snprintf(dq, sizeof dq, "%s/switch_q8_pack", g_tmp);
    REQUIRE(write_layout(dq, LAYOUT_SWITCH_Q8) == 0);
    float *lg[2] = {NULL, NULL};
    const char *envs[2] = {NULL, "0"};
    unsigned char fp[2][32]; /* model_snap_fingerprint of each load */
    int any_packable = 0;
    for (int k = 0; k < 2; k++) {
        if (envs[k]) setenv("MTPLX_PACK_EXPERTS", envs[k], 1);
        else unsetenv("MTPLX_PACK_EXPERTS");
        mtplx_model *m = NULL;
        CHECK_MSG(model_load(dq, &m, &err) == 0, "%s", err.msg);
        REQUIRE(m);
        const moe_weights *mw = &m->layers[0].moe;
        REQUIRE(m->layers[0].ffn == FFN_MOE && mw->experts);
        const be_weight *gate = &mw->experts[mw->router.n_experts - 1].gate, *down = &mw->experts[0].down;
        /* the packed copies and MTPLX_PACK_EXPERTS are the CPU backend's; a GPU reads every expert in
         * the checkpoint's format (only the logits below apply there) */
        if (model_memory_is_host(m)) {
            int packable = kern_qpack_bytes(gate) > 0; /* this CPU has a packed q8 kernel for a 64-wide row */
            int packed_want = k == 0 && packable;
            any_packable |= packable;
            CHECK_MSG((gate->packed != NULL) == packed_want, "MTPLX_PACK_EXPERTS=%s: expert gate packed %d, want %d",
                      envs[k] ? envs[k] : "(unset)", gate->packed != NULL, packed_want);
            CHECK_MSG(down->packed == NULL, "a 32-wide down projection has no packed layout, yet it was packed");
            const char *note = model_load_note(m);
            if (k == 0) CHECK_MSG(!*note, "unexpected load note: %s", note);
            else CHECK_MSG(packable == !!strstr(note, "MTPLX_PACK_EXPERTS=0"), "load note \"%s\"", note);
        }
        model_snap_fingerprint(m, fp[k]);
        model_free(m);
        lg[k] = logits_of(dq, &g, &err);
        CHECK_MSG(lg[k] != NULL, "%s", err.msg);
        REQUIRE(lg[k]);
    }
    unsetenv("MTPLX_PACK_EXPERTS");
    /* packed experts give other bits: a prefix-cache file of one load must not restore into the other */
    if (any_packable) CHECK_MSG(memcmp(fp[0], fp[1], 32) != 0, "packed and unpacked experts: same fingerprint");
    double d = max_abs_diff(lg[0], lg[1], (size_t)g.T * g.V);
    printf("MoE logits, packed experts vs the checkpoint's layout: max|d| = %.3g\n", d);
    CHECK_MSG(d <= 1e-4, "packed and unpacked experts differ by %.3g", d);
    free(lg[0]);
    free(lg[1]);
    golden_close(&g);
}

/* A copy of a golden directory with `from` replaced by `to` in its config.json. */
static int write_config_variant(const char *src, const char *name, const char *from, const char *to, char *dir,
                                size_t dn) {
    make_tmp();
    if (!g_tmp[0]) return -1;
    snprintf(dir, dn, "%s/%s", g_tmp, name);
    mkdir(dir, 0755);
    char p[600];
    snprintf(p, sizeof p, "%s/config.json", src);
    mtplx_err err;
    char *cfg = file_read_all(p, NULL, &err);
    if (!cfg) return -1;
    char *at = strstr(cfg, from);
    if (!at) {
        free(cfg);
        return -1;
    }
    snprintf(p, sizeof p, "%s/config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) {
        free(cfg);
        return -1;
    }
    fprintf(f, "%.*s%s%s", (int)(at - cfg), cfg, to, at + strlen(from));
    fclose(f);
    free(cfg);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/model.safetensors", src);
    snprintf(b, sizeof b, "%s/model.safetensors", dir);
    return copy_file(a, b);
}

static void check_refused(const char *src, const char *name, const char *from, const char *to, const char *why) {
    char dir[400];
    REQUIRE(write_config_variant(src, name, from, to, dir, sizeof dir) == 0);
    mtplx_err err = {0};
    mtplx_model *m = NULL;
    int rc = model_load(dir, &m, &err);
    CHECK_MSG(rc == MTPLX_EUNSUPPORTED, "%s: model_load returned %d (%s), want unsupported", name, rc, err.msg);
    CHECK_MSG(strstr(err.msg, why) != NULL, "%s: reason \"%s\" does not mention \"%s\"", name, err.msg, why);
    printf("%s refused: %s\n", name, err.msg);
    model_free(m);
}

TEST(test_refuses_longrope) {
    check_refused("tests/data/goldens/llama", "longrope", "\"rope_type\": \"default\"",
                  "\"rope_type\": \"longrope\", \"factor\": 4.0, \"original_max_position_embeddings\": 512", "longrope");
}

TEST(test_refuses_dynamic_rope) {
    check_refused("tests/data/goldens/qwen3_dense", "dynamic", "\"rope_type\": \"default\"",
                  "\"rope_type\": \"dynamic\", \"factor\": 2.0", "dynamic");
}

TEST(test_refuses_unknown_architecture) {
    char dir[400];
    REQUIRE(write_config_variant("tests/data/goldens/llama", "mamba", "\"model_type\": \"llama\"",
                                 "\"model_type\": \"mamba2\"", dir, sizeof dir) == 0);
    mtplx_err err = {0};
    mtplx_model *m = NULL;
    int rc = model_load(dir, &m, &err);
    CHECK_MSG(rc != 0, "an unknown model_type loaded");
    CHECK_MSG(strstr(err.msg, "mamba2") != NULL, "reason \"%s\" does not name the model_type", err.msg);
    printf("mamba2 refused: %s\n", err.msg);
    model_free(m);
}

/* Llama with attention_bias: the bias tensors are there and no forward here applies them. */
TEST(test_refuses_linear_biases) {
    make_tmp();
    REQUIRE(g_tmp[0]);
    mtplx_err err = {0};
    st_set *st = NULL;
    REQUIRE(st_open_file("tests/data/goldens/llama/model.safetensors", &st, &err) == 0);
    int n = st_count(st);
    st_write_item *items = calloc((size_t)n + 1, sizeof *items);
    for (int i = 0; i < n; i++) {
        const st_tensor *t = st_at(st, i);
        items[i] = (st_write_item){t->name, t->dtype, t->ndim, {0}, t->data};
        memcpy(items[i].shape, t->shape, sizeof t->shape);
    }
    static float bias[64];
    items[n] = (st_write_item){"model.layers.1.self_attn.q_proj.bias", DT_F32, 1, {64}, bias};
    char dir[400], path[500], from[300];
    snprintf(dir, sizeof dir, "%s/bias", g_tmp);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    REQUIRE(st_write_file(path, items, n + 1, NULL, &err) == 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    snprintf(from, sizeof from, "tests/data/goldens/llama/config.json");
    REQUIRE(copy_file(from, path) == 0);
    mtplx_model *m = NULL;
    int rc = model_load(dir, &m, &err);
    CHECK_MSG(rc == MTPLX_EUNSUPPORTED, "model_load returned %d (%s)", rc, err.msg);
    CHECK_MSG(strstr(err.msg, "q_proj.bias") != NULL, "reason \"%s\" does not name the tensor", err.msg);
    printf("bias refused: %s\n", err.msg);
    model_free(m);
    free(items);
    st_close(st);
}

static void rm_tmp(void) {
    if (!g_tmp[0]) return;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
}

int main(void) {
    RUN(test_moe_fused_and_switch_layouts_match_numbered);
    RUN(test_moe_mlx_quantized_switch_layout);
    RUN(test_moe_experts_packed_by_policy);
    RUN(test_refuses_longrope);
    RUN(test_refuses_dynamic_rope);
    RUN(test_refuses_unknown_architecture);
    RUN(test_refuses_linear_biases);
    rm_tmp();
    return TEST_SUMMARY();
}
