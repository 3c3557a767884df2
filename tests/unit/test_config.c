/* test_config.c — config.json parsing: every golden family and the embedded model with the values
 * their config files hold, the nested text_config wrapper, legacy fields, and errors that name the
 * file and the field. */
#include "../../src/model/config.h"
#include "test.h"

static model_config g_cfg; /* large (quantization overrides): keep it off the stack */

static int load(const char *dir) {
    mtplx_err e;
    err_clear(&e);
    int rc = config_load(dir, &g_cfg, &e);
    if (rc) fprintf(stderr, "  %s: %s\n", dir, e.msg);
    return rc;
}

/* Expect config_parse(text) to fail with code and a message containing what and needle. */
static void expect_err(const char *text, int code, const char *needle) {
    mtplx_err e;
    err_clear(&e);
    int rc = config_parse(text, "x/config.json", &g_cfg, &e);
    CHECK_MSG(rc == code, "expected code %d, got %d (%s) for %s", code, rc, e.msg, text);
    CHECK_MSG(strstr(e.msg, "x/config.json") != NULL, "message lacks the file: %s", e.msg);
    CHECK_MSG(strstr(e.msg, needle) != NULL, "message lacks \"%s\": %s", needle, e.msg);
}

static int parse(const char *text) {
    mtplx_err e;
    err_clear(&e);
    int rc = config_parse(text, "x/config.json", &g_cfg, &e);
    if (rc) fprintf(stderr, "  parse: %s\n", e.msg);
    return rc;
}

TEST(test_embedded_model_config) {
    REQUIRE(load("models/qwen35-tiny-code") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_QWEN3_5);
    CHECK_STR(c->model_type, "qwen3_5_text");
    CHECK_STR(c->architecture, "Qwen3_5ForCausalLM");
    CHECK_INT(c->vocab_size, 8192);
    CHECK_INT(c->hidden_size, 512);
    CHECK_INT(c->n_layers, 6);
    CHECK_INT(c->intermediate_size, 1024);
    CHECK_INT(c->n_heads, 4);
    CHECK_INT(c->n_kv_heads, 2);
    CHECK_INT(c->head_dim, 128);
    CHECK_INT(c->rotary_dim, 32);
    CHECK_NEAR(c->rope_theta, 1e7, 0);
    CHECK_STR(c->rope_type, "default");
    CHECK_INT(c->lin_k_heads, 4);
    CHECK_INT(c->lin_v_heads, 8);
    CHECK_INT(c->lin_k_dim, 64);
    CHECK_INT(c->lin_v_dim, 64);
    CHECK_INT(c->conv_kernel, 4);
    CHECK_INT(c->tie_word_embeddings, 1);
    CHECK_INT(c->mtp_layers, 1);
    CHECK_INT(c->attn_output_gate, 1);
    CHECK_INT(c->qk_norm, 1);
    CHECK_INT(c->zero_centered_norm, 1);
    CHECK_INT(c->max_position_embeddings, 8192);
    CHECK_NEAR(c->rms_norm_eps, 1e-6, 1e-12);
    const layer_kind want[6] = {LAYER_GDN, LAYER_GDN, LAYER_ATTN, LAYER_GDN, LAYER_GDN, LAYER_ATTN};
    for (int i = 0; i < 6; i++) CHECK_INT(c->layer_kinds[i], want[i]);
    /* generation_config.json's list wins over config.json's single id */
    CHECK_INT(c->n_eos, 2);
    CHECK_INT(c->eos_ids[0], 8185);
    CHECK_INT(c->eos_ids[1], 8183);
    CHECK_INT(c->n_experts, 0);
    CHECK_INT(c->quant_bits, 0);
}

TEST(test_golden_qwen3_5_dense) {
    REQUIRE(load("tests/data/goldens/qwen3_5_dense") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_QWEN3_5);
    CHECK_INT(c->vocab_size, 256);
    CHECK_INT(c->hidden_size, 64);
    CHECK_INT(c->n_layers, 4);
    CHECK_INT(c->n_heads, 2);
    CHECK_INT(c->n_kv_heads, 1);
    CHECK_INT(c->head_dim, 32);
    CHECK_INT(c->rotary_dim, 8);
    CHECK_INT(c->lin_k_heads, 2);
    CHECK_INT(c->lin_v_heads, 4);
    CHECK_INT(c->lin_k_dim, 16);
    CHECK_INT(c->tie_word_embeddings, 1);
    CHECK_INT(c->mtp_layers, 1);
    CHECK_INT(c->n_eos, 0); /* eos_token_id null in both files */
    for (int i = 0; i < 4; i++) CHECK_INT(c->layer_kinds[i], i % 2 ? LAYER_ATTN : LAYER_GDN);
}

TEST(test_golden_qwen3_5_moe) {
    REQUIRE(load("tests/data/goldens/qwen3_5_moe") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_QWEN3_5_MOE);
    CHECK_INT(c->n_experts, 4);
    CHECK_INT(c->n_experts_per_tok, 2);
    CHECK_INT(c->moe_intermediate_size, 32);
    CHECK_INT(c->shared_expert_intermediate_size, 48);
    CHECK_INT(c->intermediate_size, 0);
    CHECK_INT(c->tie_word_embeddings, 0);
    CHECK_INT(c->mtp_layers, 1);
    for (int i = 0; i < 4; i++) CHECK_INT(c->layer_moe[i], 1);
    CHECK_INT(c->attn_output_gate, 1);
}

TEST(test_golden_qwen3_next) {
    REQUIRE(load("tests/data/goldens/qwen3_next") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_QWEN3_NEXT);
    CHECK_INT(c->n_experts, 4);
    CHECK_INT(c->intermediate_size, 128);
    CHECK_INT(c->decoder_sparse_step, 1);
    CHECK_INT(c->norm_topk_prob, 1);
    CHECK_INT(c->rotary_dim, 8);
    CHECK_INT(c->zero_centered_norm, 1);
    for (int i = 0; i < 4; i++) CHECK_INT(c->layer_moe[i], 1);
    CHECK_INT(c->layer_kinds[3], LAYER_ATTN);
    CHECK_INT(c->layer_kinds[2], LAYER_GDN);
}

TEST(test_golden_qwen3_dense) {
    REQUIRE(load("tests/data/goldens/qwen3_dense") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_QWEN3);
    CHECK_INT(c->n_layers, 3);
    CHECK_INT(c->qk_norm, 1);
    CHECK_INT(c->attn_output_gate, 0);
    CHECK_INT(c->zero_centered_norm, 0);
    CHECK_INT(c->rotary_dim, 32); /* full rotary */
    CHECK_NEAR(c->rope_theta, 1e6, 0);
    CHECK_INT(c->tie_word_embeddings, 1);
    CHECK_INT(c->mtp_layers, 0);
    for (int i = 0; i < 3; i++) CHECK_INT(c->layer_kinds[i], LAYER_ATTN);
}

TEST(test_golden_llama) {
    REQUIRE(load("tests/data/goldens/llama") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_LLAMA);
    CHECK_INT(c->qk_norm, 0);
    CHECK_INT(c->n_kv_heads, 1);
    CHECK_INT(c->head_dim, 32);
    CHECK_INT(c->rotary_dim, 32);
    CHECK_NEAR(c->rope_theta, 5e5, 0);
    CHECK_INT(c->tie_word_embeddings, 0);
    CHECK_INT(c->n_eos, 1);
    CHECK_INT(c->eos_ids[0], 2);
}

TEST(test_golden_deepseek_v3) {
    REQUIRE(load("tests/data/goldens/deepseek_v3") == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_DEEPSEEK_V3);
    CHECK_INT(c->q_lora_rank, 32);
    CHECK_INT(c->kv_lora_rank, 16);
    CHECK_INT(c->qk_nope_head_dim, 16);
    CHECK_INT(c->qk_rope_head_dim, 8);
    CHECK_INT(c->v_head_dim, 16);
    CHECK_INT(c->head_dim, 24);
    CHECK_INT(c->rotary_dim, 8);
    CHECK_INT(c->rope_interleave, 1);
    CHECK_INT(c->n_experts, 4);
    CHECK_INT(c->n_experts_per_tok, 2);
    CHECK_INT(c->n_shared_experts, 1);
    CHECK_INT(c->shared_expert_intermediate_size, 32);
    CHECK_INT(c->n_group, 2);
    CHECK_INT(c->topk_group, 1);
    CHECK_NEAR(c->routed_scaling_factor, 2.5, 0);
    CHECK_INT(c->first_k_dense_replace, 1);
    CHECK_INT(c->layer_moe[0], 0);
    CHECK_INT(c->layer_moe[1], 1);
    CHECK_INT(c->layer_moe[2], 1);
    CHECK_INT(c->mtp_layers, 1);
    CHECK_STR(c->scoring_func, "sigmoid");
    CHECK_INT(c->n_eos, 1);
    CHECK_INT(c->eos_ids[0], 1);
}

TEST(test_nested_text_config_wrapper) {
    const char *j = "{\"architectures\": [\"Qwen3_5ForConditionalGeneration\"], \"model_type\": \"qwen3_5\","
                    " \"tie_word_embeddings\": true, \"vision_config\": {\"depth\": 2},"
                    " \"text_config\": {\"vocab_size\": 300, \"hidden_size\": 96, \"num_hidden_layers\": 8,"
                    " \"intermediate_size\": 192, \"num_attention_heads\": 3, \"num_key_value_heads\": 1,"
                    " \"head_dim\": 64, \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 6,"
                    " \"linear_key_head_dim\": 16, \"linear_value_head_dim\": 24, \"full_attention_interval\": 4,"
                    " \"rope_theta\": 5000000, \"partial_rotary_factor\": 0.5, \"mtp_num_hidden_layers\": 1,"
                    " \"eos_token_id\": [5, 7]}}";
    REQUIRE(parse(j) == 0);
    model_config *c = &g_cfg;
    CHECK_INT(c->arch, ARCH_QWEN3_5);
    CHECK_STR(c->model_type, "qwen3_5");
    CHECK_STR(c->architecture, "Qwen3_5ForConditionalGeneration");
    CHECK_INT(c->hidden_size, 96);
    CHECK_INT(c->n_layers, 8);
    CHECK_INT(c->tie_word_embeddings, 1); /* top level, absent from text_config */
    CHECK_INT(c->rotary_dim, 32);
    CHECK_NEAR(c->rope_theta, 5e6, 0);
    CHECK_INT(c->lin_v_dim, 24);
    CHECK_INT(c->conv_kernel, 4); /* HF default */
    for (int i = 0; i < 8; i++) CHECK_INT(c->layer_kinds[i], (i + 1) % 4 == 0 ? LAYER_ATTN : LAYER_GDN);
    CHECK_INT(c->n_eos, 2);
    CHECK_INT(c->eos_ids[1], 7);
}

TEST(test_defaults_when_fields_absent) {
    /* no layer_types, no interval: HF default interval 4; no head_dim: hidden/heads; no
     * rope fields: theta 10000 and partial 0.25 for the hybrid family; tie defaults to false */
    const char *j = "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 10, \"hidden_size\": 64,"
                    " \"num_hidden_layers\": 4, \"intermediate_size\": 8, \"num_attention_heads\": 4}";
    REQUIRE(parse(j) == 0);
    CHECK_INT(g_cfg.head_dim, 16);
    CHECK_INT(g_cfg.n_kv_heads, 4);
    CHECK_INT(g_cfg.rotary_dim, 4);
    CHECK_NEAR(g_cfg.rope_theta, 10000, 0);
    CHECK_INT(g_cfg.tie_word_embeddings, 0);
    CHECK_INT(g_cfg.layer_kinds[3], LAYER_ATTN);
    CHECK_INT(g_cfg.layer_kinds[0], LAYER_GDN);
    CHECK_INT(g_cfg.lin_k_heads, 16);
    CHECK_INT(g_cfg.lin_v_heads, 32);
}

TEST(test_rope_scaling_and_quantization) {
    const char *j = "{\"model_type\": \"llama\", \"vocab_size\": 10, \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                    " \"intermediate_size\": 8, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
                    " \"rope_theta\": 500000.0, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0,"
                    " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 8192},"
                    " \"quantization\": {\"group_size\": 64, \"bits\": 4, \"model.layers.0.mlp.gate_proj\":"
                    " {\"group_size\": 32, \"bits\": 8}, \"lm_head\": false}}";
    REQUIRE(parse(j) == 0);
    CHECK_STR(g_cfg.rope_type, "llama3");
    CHECK_NEAR(g_cfg.rope_factor, 8, 0);
    CHECK_INT(g_cfg.rope_orig_max_pos, 8192);
    CHECK_NEAR(g_cfg.rope_theta, 5e5, 0);
    CHECK_STR(g_cfg.quant_method, "mlx");
    CHECK_INT(g_cfg.quant_bits, 4);
    CHECK_INT(g_cfg.quant_group_size, 64);
    REQUIRE(g_cfg.n_quant_overrides == 2);
    CHECK_STR(g_cfg.quant_overrides[0].module, "model.layers.0.mlp.gate_proj");
    CHECK_INT(g_cfg.quant_overrides[0].bits, 8);
    CHECK_INT(g_cfg.quant_overrides[0].group_size, 32);
    CHECK_STR(g_cfg.quant_overrides[1].module, "lm_head");
    CHECK_INT(g_cfg.quant_overrides[1].bits, 0);
}

TEST(test_unknown_model_type_is_not_a_parse_error) {
    REQUIRE(parse("{\"model_type\": \"mamba2\", \"hidden_size\": \"big\", \"num_hidden_layers\": 100000}") == 0);
    CHECK_INT(g_cfg.arch, ARCH_UNKNOWN);
    CHECK_STR(g_cfg.model_type, "mamba2");
    REQUIRE(parse("{}") == 0);
    CHECK_INT(g_cfg.arch, ARCH_UNKNOWN);
}

#define BASE "\"model_type\": \"qwen3_5_text\", \"vocab_size\": 10, \"intermediate_size\": 8, "

TEST(test_errors_name_file_and_field) {
    expect_err("{\"model_type\": ", MTPLX_EBADFILE, "invalid JSON");
    expect_err("[1]", MTPLX_EBADFILE, "not a JSON object");
    expect_err("{" BASE "\"num_hidden_layers\": 4, \"num_attention_heads\": 4}", MTPLX_EBADFILE, "\"hidden_size\" is missing");
    expect_err("{" BASE "\"hidden_size\": \"64\", \"num_hidden_layers\": 4, \"num_attention_heads\": 4}", MTPLX_EBADFILE,
               "\"hidden_size\" must be an integer");
    expect_err("{" BASE "\"hidden_size\": 0, \"num_hidden_layers\": 4, \"num_attention_heads\": 4}", MTPLX_EBADFILE,
               "\"hidden_size\" = 0 is out of range");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
               " \"num_key_value_heads\": 3}", MTPLX_EBADFILE, "\"num_key_value_heads\" = 3 does not divide");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
               " \"linear_num_key_heads\": 3, \"linear_num_value_heads\": 4}", MTPLX_EBADFILE, "\"linear_num_value_heads\"");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 3, \"num_attention_heads\": 4,"
               " \"layer_types\": [\"full_attention\"]}", MTPLX_EBADFILE, "\"layer_types\" has 1 entries");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
               " \"layer_types\": [\"mamba\"]}", MTPLX_EBADFILE, "\"layer_types\"[0]");
    expect_err("{\"model_type\": \"qwen3\", \"vocab_size\": 10, \"intermediate_size\": 8, \"hidden_size\": 64,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"layer_types\": [\"linear_attention\"]}",
               MTPLX_EBADFILE, "\"layer_types\"[0]");
    expect_err("{\"model_type\": \"qwen3\", \"vocab_size\": 10, \"intermediate_size\": 8, \"hidden_size\": 64,"
               " \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"layer_types\": [\"sliding_attention\"]}",
               MTPLX_EUNSUPPORTED, "sliding-window");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 600, \"num_attention_heads\": 4}",
               MTPLX_EUNSUPPORTED, "\"num_hidden_layers\" = 600");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
               " \"partial_rotary_factor\": 2}", MTPLX_EBADFILE, "partial_rotary_factor");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
               " \"eos_token_id\": [1, 99]}", MTPLX_EBADFILE, "\"eos_token_id\"[1]");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
               " \"tie_word_embeddings\": \"yes\"}", MTPLX_EBADFILE, "\"tie_word_embeddings\"");
    expect_err("{" BASE "\"hidden_size\": 64, \"num_hidden_layers\": 4, \"num_attention_heads\": 4,"
               " \"text_config\": 3}", MTPLX_EBADFILE, "\"text_config\"");
    expect_err("{\"model_type\": \"qwen3_5_moe_text\", \"vocab_size\": 10, \"hidden_size\": 64, \"num_hidden_layers\": 4,"
               " \"num_attention_heads\": 4, \"num_experts\": 2, \"num_experts_per_tok\": 3, \"moe_intermediate_size\": 8}",
               MTPLX_EBADFILE, "\"num_experts_per_tok\" = 3");
    expect_err("{\"model_type\": \"qwen3_next\", \"vocab_size\": 10, \"hidden_size\": 64, \"num_hidden_layers\": 4,"
               " \"num_attention_heads\": 4, \"num_experts\": 2, \"num_experts_per_tok\": 1, \"moe_intermediate_size\": 8,"
               " \"mlp_only_layers\": [1]}", MTPLX_EBADFILE, "\"intermediate_size\"");
}

TEST(test_load_missing_file) {
    mtplx_err e;
    err_clear(&e);
    CHECK_INT(config_load("/nonexistent", &g_cfg, &e), MTPLX_EIO);
    CHECK(strstr(e.msg, "/nonexistent/config.json") != NULL);
}

int main(void) {
    RUN(test_embedded_model_config);
    RUN(test_golden_qwen3_5_dense);
    RUN(test_golden_qwen3_5_moe);
    RUN(test_golden_qwen3_next);
    RUN(test_golden_qwen3_dense);
    RUN(test_golden_llama);
    RUN(test_golden_deepseek_v3);
    RUN(test_nested_text_config_wrapper);
    RUN(test_defaults_when_fields_absent);
    RUN(test_rope_scaling_and_quantization);
    RUN(test_unknown_model_type_is_not_a_parse_error);
    RUN(test_errors_name_file_and_field);
    RUN(test_load_missing_file);
    return TEST_SUMMARY();
}
