/* test_reasoning.c — the <think> splitter: modes, markers split across chunks, whitespace rules,
 * and chunking invariance (any split of the text gives the same two channels). */
#include "../../src/chat/reasoning.h"
#include "test.h"

typedef struct {
    sbuf ch[2];     /* [0] content, [1] reasoning */
    int  calls;
} out2;

static int collect(void *user, int is_reasoning, const char *s, size_t n) {
    out2 *o = user;
    o->calls++;
    if (n == 0) return 99; /* never called with empty text */
    return sbuf_append(&o->ch[is_reasoning ? 1 : 0], s, n);
}

/* Split text into chunks of `step` bytes (0 = all at once). */
static void run(const char *text, int start_reasoning, size_t step, out2 *o) {
    memset(o, 0, sizeof *o);
    reasoning_parser r;
    reasoning_init(&r, start_reasoning);
    size_t n = strlen(text);
    if (step == 0) step = n ? n : 1;
    for (size_t i = 0; i < n; i += step) {
        size_t k = n - i < step ? n - i : step;
        CHECK_INT(reasoning_feed(&r, text + i, k, collect, o), 0);
    }
    CHECK_INT(reasoning_finish(&r, collect, o), 0);
    reasoning_free(&r);
}

static void free2(out2 *o) {
    sbuf_free(&o->ch[0]);
    sbuf_free(&o->ch[1]);
}

static void expect(const char *text, int start, const char *want_reasoning, const char *want_content) {
    for (size_t step = 0; step <= 9; step++) {
        out2 o;
        run(text, start, step, &o);
        CHECK_MSG(strcmp(sbuf_str(&o.ch[1]), want_reasoning) == 0, "step %zu reasoning: want [%s] got [%s]", step,
                  want_reasoning, sbuf_str(&o.ch[1]));
        CHECK_MSG(strcmp(sbuf_str(&o.ch[0]), want_content) == 0, "step %zu content: want [%s] got [%s]", step,
                  want_content, sbuf_str(&o.ch[0]));
        free2(&o);
    }
}

TEST(test_prompt_opened_think_block_starts_in_reasoning) {
    /* what the tiny model writes after a prompt ending in "<think>\n" */
    expect("The user wants to see a.py. I will read it with read_file.\n</think>\n\nHere it is.", 1,
           "The user wants to see a.py. I will read it with read_file.", "Here it is.");
}

TEST(test_explicit_think_block_in_content_mode) {
    expect("<think>\nplan\n</think>\n\nanswer", 0, "plan", "answer");
    expect("no reasoning at all\n", 0, "", "no reasoning at all\n");
}

TEST(test_empty_think_block_from_disabled_thinking) {
    expect("\n\n</think>\n\nJust content", 1, "", "Just content");
}

TEST(test_only_exact_markers_switch) {
    expect("I think <thinking> and <think > are prose; </think x> too", 0, "",
           "I think <thinking> and <think > are prose; </think x> too");
    expect("a < b and c <t d </thin", 1, "a < b and c <t d </thin", "");
}

TEST(test_partial_marker_is_held_then_flushed_as_text) {
    /* the output ends on a marker prefix: it is text, not swallowed */
    expect("reasoning </thi", 1, "reasoning </thi", "");
    expect("content <thin", 0, "", "content <thin");
}

TEST(test_reopen_inside_reasoning_is_swallowed_and_reentry_works) {
    expect("a<think>b</think>c<think>d</think>e", 1, "abd", "ce");
}

TEST(test_orphan_close_in_content_is_removed) {
    expect("x</think>y", 0, "", "xy");
}

TEST(test_no_partial_marker_ever_emitted) {
    /* byte-by-byte feeding: no emitted piece may contain '<' that later turns out to be a marker */
    const char *text = "r1</think>c1<think>r2</think>c2";
    out2 o;
    run(text, 1, 1, &o);
    CHECK_STR(sbuf_str(&o.ch[1]), "r1r2");
    CHECK_STR(sbuf_str(&o.ch[0]), "c1c2");
    free2(&o);
}

TEST(test_random_splits_match_whole_feed) {
    const char *texts[] = {
        "α β\n</think>\n\n<tool_call>\n<function=f>\n</function>\n</tool_call>",
        "<<think><</think>><think></think>< /think>",
        "  lead\n\n</think>  \n trail \n",
        "</think></think><think><think>x",
    };
    for (size_t t = 0; t < sizeof texts / sizeof *texts; t++) {
        for (int start = 0; start < 2; start++) {
            out2 whole;
            run(texts[t], start, 0, &whole);
            unsigned seed = 1234 + (unsigned)t;
            for (int trial = 0; trial < 50; trial++) {
                out2 o;
                memset(&o, 0, sizeof o);
                reasoning_parser r;
                reasoning_init(&r, start);
                size_t n = strlen(texts[t]), i = 0;
                while (i < n) {
                    seed = seed * 1103515245u + 12345u;
                    size_t k = 1 + (seed >> 16) % 7;
                    if (k > n - i) k = n - i;
                    reasoning_feed(&r, texts[t] + i, k, collect, &o);
                    i += k;
                }
                reasoning_finish(&r, collect, &o);
                reasoning_free(&r);
                CHECK_STR(sbuf_str(&o.ch[0]), sbuf_str(&whole.ch[0]));
                CHECK_STR(sbuf_str(&o.ch[1]), sbuf_str(&whole.ch[1]));
                free2(&o);
            }
            free2(&whole);
        }
    }
}

TEST(test_prompt_opens_think) {
    CHECK_INT(reasoning_prompt_opens_think("<|im_start|>assistant\n<think>\n"), 1);
    CHECK_INT(reasoning_prompt_opens_think("<|im_start|>assistant\n<think>\n\n</think>\n\n"), 0);
    CHECK_INT(reasoning_prompt_opens_think("<think>a</think> then <think>\n"), 1);
    CHECK_INT(reasoning_prompt_opens_think("plain"), 0);
}

static int stop_at_second(void *user, int is_reasoning, const char *s, size_t n) {
    (void)is_reasoning, (void)s, (void)n;
    int *k = user;
    return ++*k >= 2 ? 7 : 0;
}

TEST(test_callback_stop_value_is_returned) {
    reasoning_parser r;
    reasoning_init(&r, 0);
    int k = 0;
    CHECK_INT(reasoning_feed(&r, "a<think>b", 9, stop_at_second, &k), 7);
    reasoning_free(&r);
}

int main(void) {
    RUN(test_prompt_opened_think_block_starts_in_reasoning);
    RUN(test_explicit_think_block_in_content_mode);
    RUN(test_empty_think_block_from_disabled_thinking);
    RUN(test_only_exact_markers_switch);
    RUN(test_partial_marker_is_held_then_flushed_as_text);
    RUN(test_reopen_inside_reasoning_is_swallowed_and_reentry_works);
    RUN(test_orphan_close_in_content_is_removed);
    RUN(test_no_partial_marker_ever_emitted);
    RUN(test_random_splits_match_whole_feed);
    RUN(test_prompt_opens_think);
    RUN(test_callback_stop_value_is_returned);
    return TEST_SUMMARY();
}
