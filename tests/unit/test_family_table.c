/* test_family_table.c — the family table (src/model/families/) is complete and is the one thing
 * that decides per architecture: every model_arch has exactly one entry, names and model_types are
 * unique, each entry's members agree with each other, config parsing takes the family's traits
 * from the entry its model_type selects, and a loaded model binds through that same entry. */
#include "../../src/model/families/family_ops.h"
#include "../../src/model/family.h"
#include "test.h"

static model_config g_cfg; /* large: keep it off the stack */

/* One config.json that every family can parse: the shared fields plus what the hybrids (GDN
 * defaults), the MoE families and DeepSeek's MLA read. %s is the model_type. */
static const char *k_config =
    "{\"model_type\": \"%s\", \"vocab_size\": 64, \"hidden_size\": 32, \"num_hidden_layers\": 4,"
    " \"intermediate_size\": 48, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8,"
    " \"linear_num_key_heads\": 2, \"linear_num_value_heads\": 4, \"linear_key_head_dim\": 8,"
    " \"linear_value_head_dim\": 8, \"num_experts\": 4, \"n_routed_experts\": 4, \"num_experts_per_tok\": 2,"
    " \"moe_intermediate_size\": 16, \"kv_lora_rank\": 16, \"qk_nope_head_dim\": 8, \"qk_rope_head_dim\": 4,"
    " \"v_head_dim\": 8}";

/* Every id 0 .. ARCH_COUNT-1 has one entry, family_of finds it, and the table holds nothing else. */
TEST(test_every_arch_has_exactly_one_entry) {
    CHECK_INT(family_count(), ARCH_COUNT);
    for (int a = 0; a < ARCH_COUNT; a++) {
        int n = 0;
        for (int i = 0; i < family_count(); i++) n += family_at(i)->arch == (model_arch)a;
        CHECK_MSG(n == 1, "model_arch %d has %d table entries (want 1)", a, n);
        CHECK_INT(family_of((model_arch)a)->arch, a);
    }
    CHECK(family_at(family_count()) == NULL);
    CHECK_INT(family_of(ARCH_COUNT)->arch, ARCH_UNKNOWN);
}

/* Names are unique and non-empty; a model_type selects exactly one family, the one listing it. */
TEST(test_names_and_model_types_unique) {
    for (int i = 0; i < family_count(); i++) {
        const model_family *f = family_at(i);
        CHECK_MSG(f->name && f->name[0], "entry %d has no name", i);
        CHECK_STR(config_arch_name(f->arch), f->name);
        for (int j = i + 1; j < family_count(); j++)
            CHECK_MSG(strcmp(f->name, family_at(j)->name) != 0, "name \"%s\" appears twice", f->name);
        for (int t = 0; t < FAMILY_MAX_TYPES && f->model_types[t]; t++) {
            const char *ty = f->model_types[t];
            int n = 0;
            for (int j = 0; j < family_count(); j++)
                for (int u = 0; u < FAMILY_MAX_TYPES && family_at(j)->model_types[u]; u++)
                    n += strcmp(ty, family_at(j)->model_types[u]) == 0;
            CHECK_MSG(n == 1, "model_type \"%s\" is listed %d times", ty, n);
            CHECK_INT(family_by_type(ty)->arch, f->arch);
            CHECK_INT(config_arch_from_type(ty), f->arch);
        }
        CHECK_MSG((f->arch == ARCH_UNKNOWN) == (f->model_types[0] == NULL), "%s: model_types", f->name);
    }
    CHECK_INT(family_by_type("mamba2")->arch, ARCH_UNKNOWN);
    CHECK_INT(family_by_type(NULL)->arch, ARCH_UNKNOWN);
}

/* The members that only make sense together are set together. */
TEST(test_entries_are_consistent) {
    for (int i = 0; i < family_count(); i++) {
        const model_family *f = family_at(i);
        CHECK_MSG(!f->moe == !f->parse_moe, "%s: moe %d but parse_moe %s", f->name, f->moe,
                  f->parse_moe ? "set" : "NULL");
        CHECK_MSG(!f->bind_gdn_fused == !f->gdn_project, "%s: bind_gdn_fused and gdn_project", f->name);
        CHECK_MSG(!f->bind_mtp == !f->mtp_rows, "%s: bind_mtp and mtp_rows", f->name);
        CHECK_MSG(!f->mtp || f->bind_mtp, "%s: mtp 1 without bind_mtp", f->name);
        CHECK_MSG(f->runnable || (f->reason && f->reason[0]), "%s: a family that does not run must say why", f->name);
        CHECK_MSG(f->mtp || (f->reason && f->reason[0]), "%s: no MTP support needs a reason", f->name);
        CHECK_MSG(f->attn_mixer == MIXER_ATTN || f->attn_mixer == MIXER_MLA, "%s: attn_mixer %d", f->name,
                  (int)f->attn_mixer);
        if (f->attn_mixer == MIXER_MLA) /* layer_mla uses s->fam rows and an MLA-shaped cache */
            CHECK_MSG(f->kv_shape && f->scratch_row_floats, "%s: MLA without kv_shape / scratch rows", f->name);
        CHECK_MSG(f->arch == ARCH_UNKNOWN || f->runnable, "%s: listed but not runnable", f->name);
    }
}

/* config_parse of one config under each model_type: the arch and the traits come from the entry. */
TEST(test_config_parsing_goes_through_the_table) {
    for (int i = 0; i < family_count(); i++) {
        const model_family *f = family_at(i);
        for (int t = 0; t < FAMILY_MAX_TYPES && f->model_types[t]; t++) {
            char text[1024];
            snprintf(text, sizeof text, k_config, f->model_types[t]);
            mtplx_err e;
            err_clear(&e);
            int rc = config_parse(text, "x/config.json", &g_cfg, &e);
            CHECK_MSG(rc == 0, "%s: %s", f->model_types[t], e.msg);
            if (rc) continue;
            const model_config *c = &g_cfg;
            int gdn = 0, moe = 0;
            for (int l = 0; l < c->n_layers; l++) gdn += c->layer_kinds[l] == LAYER_GDN, moe += c->layer_moe[l];
            CHECK_INT(c->arch, f->arch);
            CHECK_INT(c->attn_output_gate, f->hybrid);
            CHECK_INT(c->zero_centered_norm, f->hybrid);
            CHECK_INT(c->qk_norm, f->hybrid || f->qk_norm);
            CHECK_MSG((gdn > 0) == f->hybrid, "%s: %d GDN layers, hybrid %d", f->name, gdn, f->hybrid);
            CHECK_MSG((moe > 0) == f->moe && (c->n_experts > 0) == f->moe, "%s: %d MoE layers, %d experts, moe %d",
                      f->name, moe, c->n_experts, f->moe);
            CHECK_MSG((c->kv_lora_rank > 0) == (f->parse_attention != NULL), "%s: MLA fields read: %d", f->name,
                      c->kv_lora_rank);
        }
    }
    /* an unknown model_type parses leniently into the unknown entry */
    char text[1024];
    snprintf(text, sizeof text, k_config, "mamba2");
    mtplx_err e;
    err_clear(&e);
    CHECK_INT(config_parse(text, "x/config.json", &g_cfg, &e), 0);
    CHECK_INT(g_cfg.arch, ARCH_UNKNOWN);
}

/* model_load of each family's golden checkpoint binds through its entry: m->family is that entry,
 * attention layers got its attn_mixer, GDN layers only where config.json says, MoE blocks where
 * layer_moe says, and the KV shape is the entry's. */
TEST(test_binding_goes_through_the_table) {
    static const char *k_dirs[] = {"tests/data/goldens/qwen3_5_dense", "tests/data/goldens/qwen3_5_moe",
                                   "tests/data/goldens/qwen3_next",    "tests/data/goldens/qwen3_dense",
                                   "tests/data/goldens/llama",         "tests/data/goldens/deepseek_v3"};
    int seen[ARCH_COUNT] = {0};
    for (unsigned d = 0; d < sizeof k_dirs / sizeof k_dirs[0]; d++) {
        mtplx_model *m = NULL;
        mtplx_err e;
        err_clear(&e);
        int rc = model_load(k_dirs[d], &m, &e);
        CHECK_MSG(rc == 0, "%s: %s", k_dirs[d], e.msg);
        if (rc) continue;
        const model_config *c = &m->cfg;
        const model_family *f = family_of(c->arch);
        seen[c->arch]++;
        CHECK_MSG(m->family == f, "%s: m->family is not the table's entry for %s", k_dirs[d], f->name);
        for (int l = 0; l < c->n_layers; l++) {
            const layer_weights *L = &m->layers[l];
            int want = c->layer_kinds[l] == LAYER_ATTN ? (int)f->attn_mixer : MIXER_GDN;
            CHECK_MSG((int)L->mixer == want, "%s layer %d: mixer %d, want %d", k_dirs[d], l, (int)L->mixer, want);
            CHECK_MSG((L->ffn == FFN_MOE) == (c->layer_moe[l] != 0), "%s layer %d: ffn %d", k_dirs[d], l, (int)L->ffn);
        }
        int heads, kw, vw, h2, k2, v2;
        family_kv_shape(m, &heads, &kw, &vw);
        family_kv_shape_of(f, c, &h2, &k2, &v2);
        CHECK(heads == h2 && kw == k2 && vw == v2);
        CHECK_MSG(!m->has_mtp || f->mtp, "%s: an MTP head bound for a family without MTP support", k_dirs[d]);
        model_free(m);
    }
    for (int a = 1; a < ARCH_COUNT; a++) CHECK_MSG(seen[a] == 1, "family %s: %d goldens loaded", family_of((model_arch)a)->name, seen[a]);
}

int main(void) {
    RUN(test_every_arch_has_exactly_one_entry);
    RUN(test_names_and_model_types_unique);
    RUN(test_entries_are_consistent);
    RUN(test_config_parsing_goes_through_the_table);
    RUN(test_binding_goes_through_the_table);
    return TEST_SUMMARY();
}
