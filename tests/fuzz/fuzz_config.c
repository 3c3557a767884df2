/* fuzz_config.c — libFuzzer harness: parse arbitrary bytes as config.json. Any input must give a
 * config whose validated fields are consistent, or an error; never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/model/config.h"

static model_config g_cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    mtplx_err e;
    if (config_parse(text, "fuzz/config.json", &g_cfg, &e) == 0 && g_cfg.arch != ARCH_UNKNOWN) {
        const model_config *c = &g_cfg;
        /* what a known family promises downstream code */
        if (c->n_layers < 1 || c->n_layers > CFG_MAX_LAYERS || c->hidden_size < 1 || c->vocab_size < 1 ||
            c->n_heads < 1 || c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads || c->head_dim < 1 ||
            c->rotary_dim < 2 || c->rotary_dim % 2 || c->rotary_dim > c->head_dim || c->n_eos > CFG_MAX_EOS)
            abort();
        if (c->lin_k_heads && c->lin_v_heads % c->lin_k_heads) abort();
        for (int i = 0; i < c->n_eos; i++)
            if (c->eos_ids[i] < 0 || c->eos_ids[i] >= c->vocab_size) abort();
    }
    free(text);
    return 0;
}
