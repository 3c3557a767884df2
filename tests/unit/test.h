/* test.h — a minimal test harness: each test file defines TEST(name) functions and lists them in
 * main via RUN(name). A failing CHECK prints file:line, the expression and expected vs got, marks the
 * current test failed and continues. A test that cannot run here (the CPU lacks the instruction set
 * it checks, the sanitizer build is too slow for it) calls SKIP("why") and returns: it prints
 * "SKIP <test>: <why>" on stdout and counts as skipped, never as passed. main ends with
 * TEST_SUMMARY(), which prints "<file>: N passed, N failed, N skipped" and returns 1 on any failure,
 * else 77 (TEST_EXIT_SKIPPED, automake's "skipped") when every test skipped, else 0.
 * tests/run.sh reads that protocol: exit 77 counts the binary as skipped, and each "SKIP " line is
 * listed in the suite's closing report. */
#ifndef MTPLX_TEST_H
#define MTPLX_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed, t_skipped, t_cur_failed, t_cur_skipped;
static const char *t_cur_name;

#define TEST(name) static void name(void)

#define RUN(name)                                                       \
    do {                                                                \
        t_cur_name = #name;                                             \
        t_cur_failed = 0;                                               \
        t_cur_skipped = 0;                                              \
        name();                                                         \
        if (t_cur_failed) {                                             \
            t_failed++;                                                 \
            fprintf(stderr, "FAIL %s\n", #name);                        \
        } else if (t_cur_skipped) {                                     \
            t_skipped++;                                                \
        } else {                                                        \
            t_passed++;                                                 \
            if (getenv("TEST_VERBOSE")) fprintf(stderr, "ok   %s\n", #name); \
        }                                                               \
    } while (0)

#define T_FAIL(...)                                                     \
    do {                                                                \
        fprintf(stderr, "  %s:%d [%s] ", __FILE__, __LINE__, t_cur_name); \
        fprintf(stderr, __VA_ARGS__);                                   \
        fputc('\n', stderr);                                            \
        t_cur_failed = 1;                                               \
    } while (0)

#define CHECK(cond)                                                     \
    do {                                                                \
        if (!(cond)) T_FAIL("CHECK(%s) failed", #cond);                 \
    } while (0)

#define CHECK_MSG(cond, ...)                                            \
    do {                                                                \
        if (!(cond)) T_FAIL(__VA_ARGS__);                               \
    } while (0)

#define CHECK_INT(got, want)                                            \
    do {                                                                \
        long long g_ = (long long)(got), w_ = (long long)(want);        \
        if (g_ != w_) T_FAIL("%s: expected %lld, got %lld", #got, w_, g_); \
    } while (0)

#define CHECK_STR(got, want)                                            \
    do {                                                                \
        const char *g_ = (got), *w_ = (want);                           \
        if (!g_ || !w_ || strcmp(g_, w_) != 0)                          \
            T_FAIL("%s: expected \"%s\", got \"%s\"", #got, w_ ? w_ : "(null)", g_ ? g_ : "(null)"); \
    } while (0)

#define CHECK_NEAR(got, want, tol)                                      \
    do {                                                                \
        double g_ = (double)(got), w_ = (double)(want);                 \
        if (!(fabs(g_ - w_) <= (tol)))                                  \
            T_FAIL("%s: expected %.9g ± %g, got %.9g", #got, w_, (double)(tol), g_); \
    } while (0)

/* Stop the current test function when a precondition fails (e.g. a file did not load). */
#define REQUIRE(cond)                                                   \
    do {                                                                \
        if (!(cond)) {                                                  \
            T_FAIL("REQUIRE(%s) failed", #cond);                        \
            return;                                                     \
        }                                                               \
    } while (0)

/* Skip the rest of the current test: report why (printf format) and return. A test that already
 * failed a CHECK stays failed. */
#define SKIP(...)                                                       \
    do {                                                                \
        printf("SKIP %s: ", t_cur_name);                                \
        printf(__VA_ARGS__);                                            \
        putchar('\n');                                                  \
        fflush(stdout);                                                 \
        t_cur_skipped = 1;                                              \
        return;                                                         \
    } while (0)

/* The exit status of a binary whose tests all skipped (automake's convention; tests/run.sh). */
#define TEST_EXIT_SKIPPED 77

#define TEST_SUMMARY()                                                  \
    (printf("%s: %d passed, %d failed, %d skipped\n", __FILE__, t_passed, t_failed, t_skipped), \
     t_failed ? 1 : (t_passed == 0 && t_skipped > 0) ? TEST_EXIT_SKIPPED : 0)

/* 1 when running under the sanitizer build (heavy tests may shrink their workload). */
static inline int test_sanitized(void) { return getenv("MTPLX_SANITIZED") != NULL; }

#endif
