/* test.h — a minimal test harness: each test file defines TEST(name) functions and lists them in
 * main via RUN(name). A failing CHECK prints file:line, the expression and expected vs got, marks the
 * current test failed and continues. main ends with TEST_SUMMARY(), which prints
 * "<file>: N passed, N failed" and returns non-zero on any failure. */
#ifndef MTPLX_TEST_H
#define MTPLX_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed, t_cur_failed;
static const char *t_cur_name;

#define TEST(name) static void name(void)

#define RUN(name)                                                       \
    do {                                                                \
        t_cur_name = #name;                                             \
        t_cur_failed = 0;                                               \
        name();                                                         \
        if (t_cur_failed) {                                             \
            t_failed++;                                                 \
            fprintf(stderr, "FAIL %s\n", #name);                        \
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

#define TEST_SUMMARY()                                                  \
    (printf("%s: %d passed, %d failed\n", __FILE__, t_passed, t_failed), t_failed ? 1 : 0)

/* 1 when running under the sanitizer build (heavy tests may shrink their workload). */
static inline int test_sanitized(void) { return getenv("MTPLX_SANITIZED") != NULL; }

#endif
