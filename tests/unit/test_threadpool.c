/* test_threadpool.c — every task of every run executes exactly once, runs do not bleed into each
 * other, and bad sizes are refused. */
#include <stdatomic.h>

#include "../../src/kernels/threadpool.h"
#include "test.h"

typedef struct {
    _Atomic int hits[257];
    int run_id;
    _Atomic int wrong_run;
} count_ctx;

static void count_task(void *ctx, int i, int n) {
    count_ctx *c = ctx;
    if (n != c->run_id % 200 + 1) atomic_fetch_add(&c->wrong_run, 1);
    atomic_fetch_add(&c->hits[i], 1);
}

static void check_pool(tpool *p, int runs) {
    count_ctx c;
    for (int r = 0; r < runs; r++) {
        int n = r % 200 + 1;
        for (int i = 0; i < 257; i++) atomic_store(&c.hits[i], 0);
        atomic_store(&c.wrong_run, 0);
        c.run_id = r;
        tpool_run(p, n, count_task, &c);
        int bad = 0;
        for (int i = 0; i < 257; i++) bad += atomic_load(&c.hits[i]) != (i < n ? 1 : 0);
        CHECK_MSG(bad == 0, "run %d (n=%d): %d task slots not executed exactly once", r, n, bad);
        CHECK_INT(atomic_load(&c.wrong_run), 0);
        if (bad) return;
    }
}

TEST(test_every_task_runs_once_per_run) {
    tpool *p = NULL;
    mtplx_err e;
    REQUIRE(tpool_new(2, &p, &e) == 0);
    CHECK_INT(tpool_threads(p), 2);
    check_pool(p, test_sanitized() ? 200 : 1000);
    tpool_free(p);
}

TEST(test_single_thread_pool_runs_on_caller) {
    tpool *p = NULL;
    mtplx_err e;
    REQUIRE(tpool_new(1, &p, &e) == 0);
    check_pool(p, 50);
    tpool_free(p);
}

TEST(test_global_pool_exists_and_works) {
    tpool *p = tpool_global();
    REQUIRE(p != NULL);
    CHECK(tpool_threads(p) >= 1);
    check_pool(p, 100);
}

/* A task that splits its own work over the same pool (a kernel called from inside another
 * kernel's task): the inner runs complete inline, every inner task once, and nothing deadlocks
 * (before the fix the inner tpool_run waited for the run lock its outer run held). */
typedef struct {
    tpool *p;
    _Atomic int inner[4][8];
} nest_ctx;

typedef struct {
    nest_ctx *c;
    int outer;
} nest_inner;

static void inner_task(void *ctx, int i, int n) {
    nest_inner *x = ctx;
    (void)n;
    atomic_fetch_add(&x->c->inner[x->outer][i], 1);
}

static void outer_task(void *ctx, int i, int n) {
    (void)n;
    nest_inner x = {ctx, i};
    tpool_run(((nest_ctx *)ctx)->p, 8, inner_task, &x);
}

TEST(test_nested_run_completes_inline) {
    tpool *p = NULL;
    mtplx_err e;
    REQUIRE(tpool_new(2, &p, &e) == 0);
    for (int r = 0; r < 200; r++) {
        nest_ctx c = {.p = p};
        tpool_run(p, 4, outer_task, &c);
        int bad = 0;
        for (int o = 0; o < 4; o++)
            for (int i = 0; i < 8; i++) bad += atomic_load(&c.inner[o][i]) != 1;
        CHECK_MSG(bad == 0, "round %d: %d inner tasks not run exactly once", r, bad);
        if (bad) break;
    }
    tpool_free(p);
}

TEST(test_bad_thread_count_refused) {
    tpool *p = NULL;
    mtplx_err e;
    err_clear(&e);
    CHECK_INT(tpool_new(0, &p, &e), MTPLX_EINVAL);
    CHECK(strstr(e.msg, "out of range") != NULL);
    CHECK(p == NULL);
}

int main(void) {
    RUN(test_every_task_runs_once_per_run);
    RUN(test_single_thread_pool_runs_on_caller);
    RUN(test_global_pool_exists_and_works);
    RUN(test_nested_run_completes_inline);
    RUN(test_bad_thread_count_refused);
    return TEST_SUMMARY();
}
