/* test_chat.c — chat.c's request adaptation and template selection. Expectations are relational:
 * an OpenAI-style request must render exactly like the already-adapted request HF would be given
 * (vLLM's preprocessing), and the template HF would pick must be the one rendered. */
#include <jansson.h>
#include <unistd.h>

#include "../../src/chat/chat.h"
#include "test.h"

/* A template that shows what it was given: role, content (repr), tool calls, extra fields. */
static const char *k_probe =
    "{% for m in messages %}[{{ m.role }}|{{ m.content is string }}|{{ m.content }}"
    "{% if m.tool_calls is defined %}|tc={% for t in m.tool_calls %}{{ t.function.name }}:{{ t.function.arguments | tojson }}"
    "{% endfor %}{% endif %}{% if m.reasoning_content is defined %}|r={{ m.reasoning_content }}{% endif %}"
    "{% if m.tool_call_id is defined %}|id={{ m.tool_call_id }}{% endif %}{% if m.name is defined %}|n={{ m.name }}{% endif %}"
    "{% if m.extra is defined %}|extra{% endif %}]{% endfor %}"
    "|tools={{ tools is none }}|agp={{ add_generation_prompt }}|bos={{ bos_token }}|think={{ enable_thinking }}";

static char *render(const chat_template *t, const char *req_json, mtplx_err *err) {
    char *out = NULL;
    size_t len = 0;
    if (chat_render_json(t, req_json, strlen(req_json), NULL, &out, &len, err)) return NULL;
    return out;
}

static chat_template *probe(void) {
    json_t *cfg = json_pack("{s:s, s:{s:s}}", "bos_token", "<s>", "eos_token", "content", "</s>");
    chat_template *t = NULL;
    mtplx_err err = {0};
    chat_template_from_source(k_probe, strlen(k_probe), cfg, &t, &err);
    json_decref(cfg);
    return t;
}

static void check_same(const chat_template *t, const char *a, const char *b) {
    mtplx_err e1 = {0}, e2 = {0};
    char *x = render(t, a, &e1), *y = render(t, b, &e2);
    if (!x || !y) T_FAIL("render failed: %s / %s", e1.msg, e2.msg);
    else CHECK_STR(x, y);
    free(x);
    free(y);
}

TEST(test_text_parts_join_with_newline) {
    chat_template *t = probe();
    REQUIRE(t);
    check_same(t, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},\"b\",{\"type\":\"input_text\",\"text\":\"c\"},{\"type\":\"text\",\"text\":null}]}]}",
               "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\nb\\nc\"}]}");
    chat_template_free(t);
}

TEST(test_null_content_becomes_empty_string) {
    chat_template *t = probe();
    REQUIRE(t);
    check_same(t, "{\"messages\":[{\"role\":\"assistant\",\"content\":null},{\"role\":\"user\"}]}",
               "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"\"}]}");
    chat_template_free(t);
}

TEST(test_string_arguments_are_parsed) {
    chat_template *t = probe();
    REQUIRE(t);
    check_same(t,
               "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":[1,2],\\\"b\\\":\\\"x\\\"}\"}},"
               "{\"id\":\"2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"not json\"}},{\"id\":\"3\",\"type\":\"function\",\"function\":{\"name\":\"h\",\"arguments\":null}}]}]}",
               "{\"messages\":[{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2],\"b\":\"x\"}}},"
               "{\"id\":\"2\",\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":{}}},{\"id\":\"3\",\"type\":\"function\",\"function\":{\"name\":\"h\",\"arguments\":{}}}]}]}");
    chat_template_free(t);
}

TEST(test_empty_tool_calls_dropped_and_fields_filtered) {
    chat_template *t = probe();
    REQUIRE(t);
    /* empty tool_calls disappear; unknown fields are not forwarded; name/tool_call_id are */
    check_same(t, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\",\"tool_calls\":[],\"extra\":1},{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":\"c\",\"name\":\"f\"}]}",
               "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"},{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":\"c\",\"name\":\"f\"}]}");
    mtplx_err err = {0};
    char *out = render(t, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"extra\":1}]}", &err);
    REQUIRE(out);
    CHECK_MSG(!strstr(out, "|extra"), "unknown message field reached the template: %s", out);
    free(out);
    chat_template_free(t);
}

TEST(test_reasoning_alias) {
    chat_template *t = probe();
    REQUIRE(t);
    check_same(t, "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\",\"reasoning\":\"why\"}]}",
               "{\"messages\":[{\"role\":\"assistant\",\"content\":\"a\",\"reasoning_content\":\"why\"}]}");
    chat_template_free(t);
}

TEST(test_template_variables) {
    chat_template *t = probe();
    REQUIRE(t);
    mtplx_err err = {0};
    char *a = render(t, "{\"messages\":[]}", &err);
    REQUIRE(a);
    /* tools is None when absent, add_generation_prompt defaults to true, bos_token from the config */
    CHECK_MSG(strstr(a, "|tools=True|agp=True|bos=<s>|think=") != NULL, "got %s", a);
    free(a);
    char *b = render(t, "{\"messages\":[],\"tools\":[],\"add_generation_prompt\":false,\"chat_template_kwargs\":{\"enable_thinking\":false,\"bos_token\":\"B\"}}", &err);
    REQUIRE(b);
    CHECK_MSG(strstr(b, "|tools=False|agp=False|bos=B|think=False") != NULL, "got %s", b);
    free(b);
    chat_template_free(t);
}

TEST(test_bad_requests_are_refused_with_a_reason) {
    chat_template *t = probe();
    REQUIRE(t);
    static const struct { const char *req, *want; } bad[] = {
        {"[1]", "JSON object"},
        {"{}", "messages"},
        {"{\"messages\":[1]}", "messages[0]"},
        {"{\"messages\":[{\"content\":\"x\"}]}", "role"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "content"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}", "image_url"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"no type\"}]}]}", "type"},
        {"{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"x\"}]}]}", "function"},
        {"{\"messages\":[],\"chat_template_kwargs\":[1]}", "chat_template_kwargs"},
        {"{\"messages\":[],\"add_generation_prompt\":\"yes\"}", "add_generation_prompt"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"continue_final_message\":true}", "continue_final_message"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"\\udc00\"}]}", "UTF-8"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mtplx_err err = {0};
        char *out = render(t, bad[i].req, &err);
        if (out) {
            T_FAIL("request %s was accepted: %s", bad[i].req, out);
            free(out);
            continue;
        }
        CHECK_MSG(strstr(err.msg, bad[i].want) != NULL, "request %s: message '%s' lacks '%s'", bad[i].req, err.msg, bad[i].want);
    }
    chat_template_free(t);
}

TEST(test_continue_final_message_cuts_after_content) {
    static const char *src = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</end>\n{% endfor %}";
    chat_template *t = NULL;
    mtplx_err err = {0};
    REQUIRE(!chat_template_from_source(src, strlen(src), NULL, &t, &err));
    char *full = render(t, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"The answer is\"}],\"add_generation_prompt\":false}", &err);
    char *cont = render(t, "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":\"The answer is\"}],\"add_generation_prompt\":false,\"continue_final_message\":true}", &err);
    REQUIRE(full && cont);
    /* the continued prompt is the full one cut right after the final message's text */
    const char *at = strstr(full, "The answer is");
    REQUIRE(at);
    size_t cut = (size_t)(at - full) + strlen("The answer is");
    CHECK_INT(strlen(cont), cut);
    CHECK(!strncmp(cont, full, cut));
    free(full);
    free(cont);
    chat_template_free(t);
}

TEST(test_named_templates_pick_tool_use_with_tools) {
    json_t *cfg = json_pack("{s:[{s:s,s:s},{s:s,s:s}]}", "chat_template", "name", "default", "template", "DEFAULT",
                            "name", "tool_use", "template", "TOOLS");
    char dir[] = "/tmp/mtplx_chat_XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_dump_file(cfg, path, 0);
    json_decref(cfg);
    chat_template *t = NULL;
    mtplx_err err = {0};
    REQUIRE(!chat_template_load(dir, &t, &err));
    char *a = render(t, "{\"messages\":[]}", &err);
    char *b = render(t, "{\"messages\":[],\"tools\":[]}", &err);
    REQUIRE(a && b);
    CHECK_STR(a, "DEFAULT");
    CHECK_STR(b, "TOOLS");
    free(a);
    free(b);
    chat_template_free(t);
    /* chat_template.jinja wins over the config's templates, as in transformers */
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "w");
    REQUIRE(f);
    fputs("FROM FILE\n", f);
    fclose(f);
    REQUIRE(!chat_template_load(dir, &t, &err));
    char *c = render(t, "{\"messages\":[],\"tools\":[]}", &err);
    REQUIRE(c);
    CHECK_STR(c, "FROM FILE");
    free(c);
    chat_template_free(t);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    unlink(path);
    rmdir(dir);
}

TEST(test_template_errors_name_the_line) {
    static const char *src = "ok\n{% for m in messages %}\n{{ m.content | nosuch }}\n{% endfor %}";
    chat_template *t = NULL;
    mtplx_err err = {0};
    CHECK(chat_template_from_source(src, strlen(src), NULL, &t, &err) == MTPLX_ETEMPLATE);
    CHECK_MSG(strstr(err.msg, "line 3") && strstr(err.msg, "nosuch"), "got '%s'", err.msg);
    chat_template_free(t);
}

int main(void) {
    RUN(test_text_parts_join_with_newline);
    RUN(test_null_content_becomes_empty_string);
    RUN(test_string_arguments_are_parsed);
    RUN(test_empty_tool_calls_dropped_and_fields_filtered);
    RUN(test_reasoning_alias);
    RUN(test_template_variables);
    RUN(test_bad_requests_are_refused_with_a_reason);
    RUN(test_continue_final_message_cuts_after_content);
    RUN(test_named_templates_pick_tool_use_with_tools);
    RUN(test_template_errors_name_the_line);
    return TEST_SUMMARY();
}
