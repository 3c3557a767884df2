/* test_toolcall.c — tool-call parser: both dialects, schema typing, several calls, streaming with
 * tags split anywhere, fallbacks for malformed/unclosed calls, unknown names passing through. */
#include "../../src/chat/toolcall.h"
#include "test.h"

/* tools: read_file(path: string), list_dir(path: string) as the tiny model was trained with, plus
 * a typed tool for the schema rules */
static const char *TOOLS_JSON =
    "[{\"type\":\"function\",\"function\":{\"name\":\"read_file\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"path\":{\"type\":\"string\"}},\"required\":[\"path\"]}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"list_dir\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"path\":{\"type\":\"string\"}}}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"typed\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"s\":{\"type\":\"string\"},\"i\":{\"type\":\"integer\"},\"n\":{\"type\":\"number\"},\"b\":{\"type\":\"boolean\"},"
    "\"o\":{\"type\":\"object\"},\"a\":{\"type\":\"array\"},\"sn\":{\"type\":[\"string\",\"null\"]}}}}}]";

typedef struct {
    sbuf text;
    sbuf calls;   /* "index|name|arguments\n" per call */
    char ids[8][40];
    int  n;
} out_t;

static int on_text(void *u, const char *s, size_t n) {
    out_t *o = u;
    if (n == 0) return 99;
    return sbuf_append(&o->text, s, n);
}

static int on_call(void *u, const tool_call *c) {
    out_t *o = u;
    if (o->n < 8) memcpy(o->ids[o->n], c->id, sizeof c->id);
    o->n++;
    return sbuf_printf(&o->calls, "%d|%s|%s\n", c->index, c->name, c->arguments);
}

static json_t *tools(void) {
    json_error_t je;
    return json_loads(TOOLS_JSON, 0, &je);
}

static void run(const char *text, size_t step, out_t *o) {
    memset(o, 0, sizeof *o);
    json_t *t = tools();
    toolcall_parser p;
    toolcall_init(&p, t, 42);
    size_t n = strlen(text);
    if (step == 0) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        CHECK_INT(toolcall_feed(&p, text + i, k, on_text, on_call, o), 0);
    }
    CHECK_INT(toolcall_finish(&p, on_text, on_call, o), 0);
    toolcall_free(&p);
    json_decref(t);
}

static void expect(const char *text, const char *want_text, const char *want_calls) {
    for (size_t step = 0; step <= 13; step++) {
        out_t o;
        run(text, step, &o);
        CHECK_MSG(strcmp(sbuf_str(&o.text), want_text) == 0, "step %zu text: want [%s] got [%s]", step, want_text,
                  sbuf_str(&o.text));
        CHECK_MSG(strcmp(sbuf_str(&o.calls), want_calls) == 0, "step %zu calls: want [%s] got [%s]", step,
                  want_calls, sbuf_str(&o.calls));
        sbuf_free(&o.text);
        sbuf_free(&o.calls);
    }
}

TEST(test_xml_call_as_the_tiny_model_writes_it) {
    expect("<tool_call>\n<function=read_file>\n<parameter=path>\njson/decoder.py\n</parameter>\n</function>\n</tool_call>",
           "", "0|read_file|{\"path\":\"json/decoder.py\"}\n");
}

TEST(test_text_before_call_is_content_whitespace_dropped) {
    expect("Let me look.\n\n<tool_call>\n<function=list_dir>\n<parameter=path>\n.\n</parameter>\n</function>\n</tool_call>\n",
           "Let me look.", "0|list_dir|{\"path\":\".\"}\n");
}

TEST(test_values_typed_by_schema) {
    expect("<tool_call><function=typed><parameter=s>\n123\n</parameter><parameter=i>\n7\n</parameter>"
           "<parameter=n>2.5</parameter><parameter=b>true</parameter><parameter=o>{\"k\": [1]}</parameter>"
           "<parameter=a>[1, \"x\"]</parameter><parameter=sn>null</parameter></function></tool_call>",
           "", "0|typed|{\"s\":\"123\",\"i\":7,\"n\":2.5,\"b\":true,\"o\":{\"k\":[1]},\"a\":[1,\"x\"],\"sn\":\"null\"}\n");
    /* invalid JSON for a typed parameter stays a string */
    expect("<tool_call><function=typed><parameter=i>seven</parameter><parameter=o>{broken</parameter></function></tool_call>",
           "", "0|typed|{\"i\":\"seven\",\"o\":\"{broken\"}\n");
}

TEST(test_multiline_string_value_keeps_inner_newlines) {
    expect("<tool_call>\n<function=read_file>\n<parameter=path>\n\nline1\nline2\n\n</parameter>\n</function>\n</tool_call>",
           "", "0|read_file|{\"path\":\"\\nline1\\nline2\\n\"}\n");
}

TEST(test_json_dialect_and_string_arguments) {
    expect("<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n</tool_call>", "",
           "0|read_file|{\"path\":\"a.py\"}\n");
    expect("<tool_call>{\"name\":\"list_dir\",\"arguments\":\"{\\\"path\\\": \\\"src\\\"}\"}</tool_call>", "",
           "0|list_dir|{\"path\":\"src\"}\n");
    expect("<tool_call>{\"name\":\"noargs\"}</tool_call>", "", "0|noargs|{}\n");
}

TEST(test_several_calls_get_indexes) {
    expect("<tool_call>\n<function=read_file>\n<parameter=path>\na\n</parameter>\n</function>\n</tool_call>\n"
           "<tool_call>\n{\"name\":\"list_dir\",\"arguments\":{\"path\":\"b\"}}\n</tool_call>",
           "", "0|read_file|{\"path\":\"a\"}\n1|list_dir|{\"path\":\"b\"}\n");
}

TEST(test_unknown_tool_passes_through) {
    expect("<tool_call><function=rm_rf><parameter=x>1</parameter></function></tool_call>", "",
           "0|rm_rf|{\"x\":1}\n");
}

TEST(test_malformed_falls_back_to_content) {
    expect("a <tool_call>oops</tool_call> b", "a <tool_call>oops</tool_call> b", "");
    expect("<tool_call><function=f><parameter=k>v</function></tool_call>",
           "<tool_call><function=f><parameter=k>v</function></tool_call>", "");
    expect("<tool_call><function=f>stray<parameter=k>v</parameter></function></tool_call>",
           "<tool_call><function=f>stray<parameter=k>v</parameter></function></tool_call>", "");
    expect("<tool_call>{\"name\": 3}</tool_call>", "<tool_call>{\"name\": 3}</tool_call>", "");
    expect("<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>",
           "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", "");
    /* duplicate parameter */
    expect("<tool_call><function=f><parameter=k>1</parameter><parameter=k>2</parameter></function></tool_call>",
           "<tool_call><function=f><parameter=k>1</parameter><parameter=k>2</parameter></function></tool_call>", "");
}

TEST(test_unclosed_call_becomes_content) {
    expect("x <tool_call>\n<function=read_file>\n<parameter=path>\na", "x <tool_call>\n<function=read_file>\n<parameter=path>\na", "");
}

TEST(test_partial_open_tag_held_then_flushed) {
    expect("text <tool_ca", "text <tool_ca", "");
    expect("a <tool b", "a <tool b", "");
}

TEST(test_plain_text_unchanged) {
    expect("def f(x):\n    return x < 3\n", "def f(x):\n    return x < 3\n", "");
}

TEST(test_ids_unique_and_shaped) {
    out_t o;
    run("<tool_call>{\"name\":\"a\"}</tool_call><tool_call>{\"name\":\"b\"}</tool_call>", 0, &o);
    CHECK_INT(o.n, 2);
    CHECK(strncmp(o.ids[0], "call_", 5) == 0 && strlen(o.ids[0]) == 29);
    CHECK(strcmp(o.ids[0], o.ids[1]) != 0);
    sbuf_free(&o.text);
    sbuf_free(&o.calls);
}

TEST(test_parse_body_direct) {
    char *name = NULL, *args = NULL;
    const char *body = "\n<function=read_file>\n<parameter=path>\nx.py\n</parameter>\n</function>\n";
    REQUIRE(toolcall_parse_body(body, strlen(body), NULL, &name, &args) == 0);
    CHECK_STR(name, "read_file");
    CHECK_STR(args, "{\"path\":\"x.py\"}");
    free(name);
    free(args);
    CHECK_INT(toolcall_parse_body("", 0, NULL, &name, &args), -1);
    CHECK_INT(toolcall_parse_body("<function=>", 11, NULL, &name, &args), -1);
}

int main(void) {
    RUN(test_xml_call_as_the_tiny_model_writes_it);
    RUN(test_text_before_call_is_content_whitespace_dropped);
    RUN(test_values_typed_by_schema);
    RUN(test_multiline_string_value_keeps_inner_newlines);
    RUN(test_json_dialect_and_string_arguments);
    RUN(test_several_calls_get_indexes);
    RUN(test_unknown_tool_passes_through);
    RUN(test_malformed_falls_back_to_content);
    RUN(test_unclosed_call_becomes_content);
    RUN(test_partial_open_tag_held_then_flushed);
    RUN(test_plain_text_unchanged);
    RUN(test_ids_unique_and_shaped);
    RUN(test_parse_body_direct);
    return TEST_SUMMARY();
}
