/* test_synth.c — `mtplx synth` output: loads with model_load and gives finite logits for bf16, q8 and
 * q4; the same seed writes byte-identical files, another seed different weights; bad options are
 * refused with a reason; a 4-row prefill equals 4 single-row steps bit for bit (its GDN heads are big
 * enough, 4 x 128 x 128, to be split over the thread pool), and so does a capture/commit(keep 2 of 4)
 * rollback against a state that saw only the kept rows. Uses a small qwen3_5_text config (the
 * bench-2b preset is GBs). */
#include <math.h>
#include <unistd.h>

#include "../../src/model/model.h"
#include "../../src/model/model_internal.h"
#include "../../src/engine/bench_kernels.h"
#include "../../src/model/safetensors.h"
#include "../../src/model/synth.h"
#include "../../src/base/dtype.h"
#include "test.h"

static const char k_cfg[] =
    "{\"architectures\": [\"Qwen3_5ForCausalLM\"], \"model_type\": \"qwen3_5_text\", \"vocab_size\": 300,"
    " \"hidden_size\": 128, \"intermediate_size\": 256, \"num_hidden_layers\": 4, \"full_attention_interval\": 4,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 64, \"linear_num_key_heads\": 2,"
    " \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128,"
    " \"linear_conv_kernel_dim\": 4, \"rms_norm_eps\": 1e-06, \"tie_word_embeddings\": false,"
    " \"max_position_embeddings\": 4096, \"partial_rotary_factor\": 0.25, \"rope_parameters\": {\"rope_type\":"
    " \"default\", \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25}, \"mtp_num_hidden_layers\": 1}";

/* the same at MoE: 8 routed experts (top 2) of width 64 and a gated shared expert of width 64 */
static const char k_moe_cfg[] =
    "{\"architectures\": [\"Qwen3_5MoeForCausalLM\"], \"model_type\": \"qwen3_5_moe_text\", \"vocab_size\": 300,"
    " \"hidden_size\": 128, \"num_hidden_layers\": 4, \"full_attention_interval\": 4,"
    " \"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 64, \"linear_num_key_heads\": 2,"
    " \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128,"
    " \"linear_conv_kernel_dim\": 4, \"num_experts\": 8, \"num_experts_per_tok\": 2, \"norm_topk_prob\": true,"
    " \"moe_intermediate_size\": 64, \"shared_expert_intermediate_size\": 64, \"rms_norm_eps\": 1e-06,"
    " \"tie_word_embeddings\": false, \"max_position_embeddings\": 4096, \"partial_rotary_factor\": 0.25,"
    " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25},"
    " \"mtp_num_hidden_layers\": 1}";

static char g_tmp[256];

static int files_equal(const char *a, const char *b) {
    char cmd[700];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", a, b);
    return system(cmd) == 0;
}

static void synth_dir_cfg(const char *cfg_name, const char *name, int bits, uint64_t seed, char *out, size_t n) {
    snprintf(out, n, "%s/%s", g_tmp, name);
    char cfg[300];
    snprintf(cfg, sizeof cfg, "%s/%s", g_tmp, cfg_name);
    synth_opts o = {.config_path = cfg, .out_dir = out, .bits = bits, .group_size = 64, .seed = seed};
    mtplx_err e = {0};
    uint64_t bytes = 0;
    int rc = synth_write(&o, &bytes, &e);
    CHECK_MSG(rc == 0, "synth %s: %s", name, e.msg);
    CHECK(bytes > 0);
}

static void synth_dir(const char *name, int bits, uint64_t seed, char *out, size_t n) {
    synth_dir_cfg("cfg.json", name, bits, seed, out, n);
}

/* A 4-row prefill of ids into lg[4][300] (every logit finite), then the same ids one row at a time on
 * a fresh state, each row bit-identical to its prefill row. *mx gets max |logit|. */
static void check_prefill_equals_steps(mtplx_model *m, const int32_t *ids, int bits, float *lg, float *mx_out) {
    mtplx_err e = {0};
    model_state *s = NULL;
    REQUIRE(model_state_new(m, 16, 4, &s, &e) == 0);
    fwd_request req = {.logits = lg, .logits_from = 0};
    CHECK(model_forward(m, s, ids, 4, &req, &e) == 0);
    int bad = 0, mism = 0;
    float mx = 0, l1[300];
    for (int k = 0; k < 4 * 300; k++) bad += !isfinite(lg[k]), mx = fmaxf(mx, fabsf(lg[k]));
    CHECK_MSG(bad == 0, "bits %d: %d non-finite logits", bits, bad);
    model_state_free(s);
    REQUIRE(model_state_new(m, 16, 4, &s, &e) == 0);
    for (int t = 0; t < 4; t++) {
        fwd_request r1 = {.logits = l1, .logits_from = 0};
        CHECK(model_forward(m, s, ids + t, 1, &r1, &e) == 0);
        mism += memcmp(l1, lg + t * 300, sizeof l1) != 0;
    }
    CHECK_MSG(mism == 0, "bits %d: %d of 4 rows differ between prefill and stepwise decode", bits, mism);
    model_state_free(s);
    *mx_out = mx;
}

/* An MoE checkpoint in bf16 (HF fused experts) and q4 (MLX stacked experts): it loads as qwen3_5_moe
 * with its MTP layer, gives finite logits, prefill rows equal single-row steps, and bench_weight_bytes
 * counts exactly top-k / E of the routed experts' bytes (computed here from the shapes). */
TEST(test_synth_moe_loads_and_runs) {
    const int bits_l[] = {0, 4};
    for (int i = 0; i < 2; i++) {
        char dir[300], name[16];
        snprintf(name, sizeof name, "moe%d", bits_l[i]);
        synth_dir_cfg("moe.json", name, bits_l[i], 5, dir, sizeof dir);
        mtplx_model *m = NULL;
        mtplx_err e = {0};
        REQUIRE(model_load(dir, &m, &e) == 0 || (fprintf(stderr, "%s\n", e.msg), 0));
        CHECK(model_has_mtp(m) && model_config_of(m)->n_experts == 8);
        int32_t ids[4] = {3, 77, 150, 298};
        float lg[4 * 300], mx = 0;
        check_prefill_equals_steps(m, ids, bits_l[i], lg, &mx);
        model_free(m);
        /* routed experts: 4 trunk layers x 8 experts x (gate, up [64 x 128] + down [128 x 64]); bf16:
         * 2 bytes a weight; q4: half a byte a weight + a bf16 scale and bias per group of 64 */
        double per_expert = bits_l[i] ? 2.0 * 64 * (128 / 2 + 2 * 4) + 128.0 * (64 / 2 + 1 * 4) : 3.0 * 64 * 128 * 2;
        double routed = 4 * 8 * per_expert;
        uint64_t full = 0, frac = 0, all = 0;
        CHECK(bench_weight_bytes(dir, 0, 1.0, &full, &all, &e) == 0);
        CHECK(bench_weight_bytes(dir, 0, 2.0 / 8, &frac, NULL, &e) == 0);
        CHECK_MSG(fabs((double)(full - frac) - routed * 6 / 8) < 1, "bits %d: %llu - %llu != 3/4 of %.0f routed bytes",
                  bits_l[i], (unsigned long long)full, (unsigned long long)frac, routed);
    }
}

TEST(test_synth_loads_and_runs_every_dtype) {
    const int bits_l[] = {0, 8, 4};
    for (int i = 0; i < 3; i++) {
        char dir[300], name[16];
        snprintf(name, sizeof name, "m%d", bits_l[i]);
        synth_dir(name, bits_l[i], 7, dir, sizeof dir);
        mtplx_model *m = NULL;
        mtplx_err e = {0};
        REQUIRE(model_load(dir, &m, &e) == 0 || (fprintf(stderr, "%s\n", e.msg), 0));
        CHECK(model_has_mtp(m));
        int32_t ids[4] = {1, 50, 100, 299};
        float lg[4 * 300], mx = 0;
        /* finite logits, and row invariance through the whole forward: the same tokens one at a time */
        check_prefill_equals_steps(m, ids, bits_l[i], lg, &mx);
        CHECK_MSG(mx > 0 && mx < 1e4, "bits %d: max |logit| %g", bits_l[i], mx);
        /* rollback through the (threaded) replay: capture 4 rows, keep 2, step once more == a state
         * that only ever saw those 2 rows */
        model_state *a = NULL, *b = NULL;
        REQUIRE(model_state_new(m, 16, 4, &a, &e) == 0 && model_state_new(m, 16, 4, &b, &e) == 0);
        fwd_request cap = {.capture = 1}, plain = {0};
        CHECK(model_forward(m, a, ids, 4, &cap, &e) == 0 && model_state_commit(a, 2, &e) == 0);
        CHECK(model_forward(m, b, ids, 2, &plain, &e) == 0);
        float la[300], lb[300];
        fwd_request ra = {.logits = la, .logits_from = 0}, rb = {.logits = lb, .logits_from = 0};
        CHECK(model_forward(m, a, ids + 3, 1, &ra, &e) == 0 && model_forward(m, b, ids + 3, 1, &rb, &e) == 0);
        CHECK_MSG(!memcmp(la, lb, sizeof la), "bits %d: commit(2 of 4) differs from a state that saw 2 rows",
                  bits_l[i]);
        model_state_free(a);
        model_state_free(b);
        /* the default q4:64 draft copy of a q4:64 checkpoint shares its weights (no requantization
         * at load); other formats get fresh buffers */
        const void *head = m->draft_head.data, *fc = m->mtp.fc.data;
        CHECK(model_quantize_draft(m, 4, 64, 1, &e) == 0);
        CHECK_MSG((m->draft_head.data == head && m->mtp.fc.data == fc) == (bits_l[i] == 4),
                  "bits %d: draft copy %s the checkpoint's weights", bits_l[i],
                  m->draft_head.data == head ? "shares" : "does not share");
        CHECK(m->draft_head.dtype == DT_U32 && m->draft_head.bits == 4 && m->mtp_quantized);
        model_free(m);
    }
}

TEST(test_synth_is_deterministic_by_seed) {
    char a[300], b[300], c[300], fa[400], fb[400], fc[400];
    synth_dir("s1", 4, 42, a, sizeof a);
    synth_dir("s2", 4, 42, b, sizeof b);
    synth_dir("s3", 4, 43, c, sizeof c);
    snprintf(fa, sizeof fa, "%s/model-00002-of-00007.safetensors", a);
    snprintf(fb, sizeof fb, "%s/model-00002-of-00007.safetensors", b);
    snprintf(fc, sizeof fc, "%s/model-00002-of-00007.safetensors", c);
    CHECK_MSG(files_equal(fa, fb), "same seed, different shard");
    CHECK_MSG(!files_equal(fa, fc), "different seed, same shard");
    snprintf(fa, sizeof fa, "%s/model.safetensors.index.json", a);
    snprintf(fb, sizeof fb, "%s/model.safetensors.index.json", b);
    CHECK(files_equal(fa, fb));
}

/* splitmix64 as src/model/synth.c defines its weights: one stream
 * per tensor seeded by seed ^ FNV-1a(name), advanced once; uniform values in [-1, 1). */
static uint64_t ref_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The embedding of a 600-id vocabulary (76,800 values: more than one of the writer's parallel slices)
 * holds exactly the values of one sequential stream: the parallel fill jumps ahead correctly. */
TEST(test_synth_values_follow_one_stream) {
    char d[300];
    synth_dir_cfg("vocab600.json", "v600", 0, 5, d, sizeof d);
    st_set *set = NULL;
    mtplx_err e = {0};
    REQUIRE(st_open_dir(d, &set, &e) == 0);
    const char *name = "model.embed_tokens.weight";
    const st_tensor *t = st_find(set, name);
    REQUIRE(t && t->dtype == DT_BF16 && t->nbytes == 600 * 128 * 2);
    uint64_t h = 1469598103934665603ull, st;
    for (const char *p = name; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    st = 5 ^ h;
    ref_next(&st);
    const uint16_t *v = t->data;
    int bad = 0, first = -1;
    for (int i = 0; i < 600 * 128; i++) {
        float u = (float)((ref_next(&st) >> 40) * (1.0 / (1ull << 23))) - 1.0f;
        if (v[i] != f32_to_bf16(u * 1.7f) && !bad++) first = i;
    }
    CHECK_MSG(bad == 0, "%d of 76800 values differ from the sequential stream, the first at %d", bad, first);
    st_close(set);
}

TEST(test_synth_refuses_bad_options) {
    mtplx_err e = {0};
    synth_opts o = {.preset = "bench-9t", .out_dir = g_tmp, .group_size = 64};
    CHECK_INT(synth_write(&o, NULL, &e), MTPLX_EINVAL);
    CHECK(strstr(e.msg, "bench-9t") != NULL);
    synth_opts o2 = {.preset = "bench-2b", .out_dir = g_tmp, .bits = 3, .group_size = 64};
    CHECK_INT(synth_write(&o2, NULL, &e), MTPLX_EINVAL);
    CHECK(synth_preset_config("bench-2b") != NULL);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/mtplx_synth_%d", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", g_tmp);
    if (system(cmd)) return 1;
    snprintf(cmd, sizeof cmd, "%s/cfg.json", g_tmp);
    FILE *f = fopen(cmd, "w");
    if (!f) return 1;
    fputs(k_cfg, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/moe.json", g_tmp);
    if (!(f = fopen(cmd, "w"))) return 1;
    fputs(k_moe_cfg, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s/vocab600.json", g_tmp); /* k_cfg with 600 ids */
    if (!(f = fopen(cmd, "w"))) return 1;
    const char *vs = strstr(k_cfg, "\"vocab_size\": 300");
    fprintf(f, "%.*s\"vocab_size\": 600%s", (int)(vs - k_cfg), k_cfg, vs + strlen("\"vocab_size\": 300"));
    fclose(f);
    RUN(test_synth_loads_and_runs_every_dtype);
    RUN(test_synth_moe_loads_and_runs);
    RUN(test_synth_is_deterministic_by_seed);
    RUN(test_synth_values_follow_one_stream);
    RUN(test_synth_refuses_bad_options);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_tmp);
    return TEST_SUMMARY();
}
