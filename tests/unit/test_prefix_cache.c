/* test_prefix_cache.c — the prefix cache is exact (docs/prefix-cache.md): requests served from it
 * (a shared prefix that diverges mid-block, the same prompt again, the next turn of a conversation,
 * after LRU evictions and after the scheduler took pages back) give token for token what they give
 * cold, greedy and seeded, at depths 0, 1 and 3; the reported cached tokens are the deepest
 * checkpoint that is a prefix of the prompt, and a prompt that differs at token k reuses < k.
 * The disk tier (--cache-dir): restores from files give the cold tokens too — with a RAM budget too
 * small for any entry (everything goes through disk), and after a "restart" (a new cache on the same
 * directory); a flipped byte, a truncated file, a dead writer's temp file and a file of another
 * kernel path, bf16 kernel or activation mode for quantized weights are never used. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/engine/generate.h"
#include "../../src/engine/prefix_cache.h"
#include "../../src/engine/sched.h"
#include "../../src/kernels/cpu.h"
#include "../../src/kernels/knobs.h"
#include "../../src/kernels/matmul.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"
#define CAP 512

static mtplx_model *M;

typedef struct {
    int32_t *toks;
    int n;
    gen_stats st;
} result;

static uint32_t rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void params(gen_params *p, int depth, int sampled, int max_tokens) {
    gen_params_default(p);
    p->depth = depth;
    p->max_tokens = max_tokens;
    p->seed = 77 + (uint64_t)depth;
    p->seed_set = 1;
    p->temperature = sampled ? 0.8f : 0.0f;
    p->top_k = sampled ? 40 : 0;
}

static int run(gen_session *s, const int32_t *prompt, int n, const gen_params *p, result *r) {
    mtplx_err e;
    err_clear(&e);
    free(r->toks);
    memset(r, 0, sizeof *r);
    int rc = gen_session_run(s, prompt, n, p, NULL, NULL, &r->toks, &r->n, &r->st, &e);
    if (rc) T_FAIL("generation failed: %s", e.msg);
    return rc;
}

/* cold run of prompt vs cached run: same tokens; returns the cached run's cached_tokens */
static int same_as_cold(gen_session *cold, gen_session *hot, const int32_t *prompt, int n, const gen_params *p,
                        result *out) {
    result a = {0};
    if (run(cold, prompt, n, p, &a) || run(hot, prompt, n, p, out)) {
        free(a.toks);
        return -1;
    }
    CHECK_MSG(a.st.cached_tokens == 0, "the cold session reused %d tokens", a.st.cached_tokens);
    CHECK_MSG(a.n == out->n && !memcmp(a.toks, out->toks, sizeof(int32_t) * (size_t)a.n),
              "depth %d T %.1f prompt %d: cached run differs from cold (%d vs %d tokens, cached %d)", p->depth,
              p->temperature, n, out->n, a.n, out->st.cached_tokens);
    free(a.toks);
    return out->st.cached_tokens;
}

/* A scheduler on M for `seqs` sequences of `ctx` positions; kv_pages > 0 sets its KV page budget.
 * NULL (the test failed) when it cannot be made. Free with sched_free. */
static sched *new_sched(int seqs, int ctx, int kv_pages) {
    mtplx_err e;
    sched_config c;
    sched_config_default(&c, seqs, ctx);
    if (kv_pages > 0) c.kv_pages = kv_pages;
    sched *x = NULL;
    if (sched_new(M, &c, &x, &e)) T_FAIL("sched_new: %s", e.msg);
    return x;
}

/* A prefix cache on x's KV pool (pcc NULL: the defaults); with `reclaim`, x takes pages back from it
 * when it runs short. NULL (the test failed) when it cannot be made. Free with prefix_cache_free
 * (before x). */
static prefix_cache *new_cache(sched *x, const prefix_cache_config *pcc, int reclaim) {
    mtplx_err e;
    prefix_cache *pc = NULL;
    if (prefix_cache_new(M, sched_pool(x), pcc, &pc, &e)) {
        T_FAIL("prefix_cache_new: %s", e.msg);
        return NULL;
    }
    if (reclaim) sched_set_reclaim(x, prefix_cache_reclaim_hook, pc);
    return pc;
}

/* A generation session on M whose requests x schedules, served from pc unless pc is NULL. NULL (the
 * test failed) when it cannot be made. Free with gen_session_free. */
static gen_session *new_session(sched *x, prefix_cache *pc) {
    mtplx_err e;
    gen_session *s = NULL;
    if (gen_session_new(M, &s, &e)) {
        T_FAIL("gen_session_new: %s", e.msg);
        return NULL;
    }
    gen_session_attach(s, x);
    if (pc) gen_session_set_prefix_cache(s, pc);
    return s;
}

static void scenario(sched *x, prefix_cache *pc, int depth, int sampled) {
    gen_session *cold = new_session(x, NULL), *hot = new_session(x, pc);
    REQUIRE(cold && hot);
    const int S = prefix_cache_spacing(pc);
    const uint32_t V = (uint32_t)model_config_of(M)->vocab_size; /* token ids of any test model */
    uint32_t seed = 12345u + (uint32_t)depth * 7u + (uint32_t)sampled;
    int32_t base[200], other[200], turn2[400];
    for (int i = 0; i < 200; i++) base[i] = (int32_t)(rnd(&seed) % V);
    gen_params p;
    params(&p, depth, sampled, 12);
    result r = {0};

    /* 1. first sight of a 90-token prompt: nothing to reuse (fresh tokens), checkpoints stored */
    int got = same_as_cold(cold, hot, base, 90, &p, &r);
    CHECK_MSG(got == 0, "first request reused %d tokens", got);
    /* 2. the same prompt again: everything but the last token */
    got = same_as_cold(cold, hot, base, 90, &p, &r);
    CHECK_INT(got, 89);
    /* 3. diverges at token 60 (inside a block): the deepest grid checkpoint at or below 60 */
    memcpy(other, base, sizeof other);
    other[60] = (other[60] + 1) % V;
    got = same_as_cold(cold, hot, other, 80, &p, &r);
    CHECK_INT(got, 60 / S * S);
    /* 4. the next turn: prompt + completion + new tokens restores the whole first conversation */
    REQUIRE(run(hot, base, 90, &p, &r) == 0);
    int n1 = r.n;
    memcpy(turn2, base, sizeof(int32_t) * 90);
    memcpy(turn2 + 90, r.toks, sizeof(int32_t) * (size_t)n1);
    for (int i = 0; i < 20; i++) turn2[90 + n1 + i] = (int32_t)(rnd(&seed) % V);
    got = same_as_cold(cold, hot, turn2, 90 + n1 + 20, &p, &r);
    CHECK_MSG(got == 90 + n1 - 1, "second turn reused %d tokens, expected the conversation's %d", got, 90 + n1 - 1);
    /* 5. the next turn where the earlier reply was re-rendered differently (one token changed): the
     * cache must not serve the old reply; it falls back to a checkpoint before the change */
    turn2[90 + 3] = (turn2[90 + 3] + 5) % V;
    got = same_as_cold(cold, hot, turn2, 90 + n1 + 20, &p, &r);
    CHECK_MSG(got <= 93, "a changed reply still reused %d tokens", got);
    free(r.toks);
    gen_session_free(cold);
    gen_session_free(hot);
}

/* scenario() on a fresh scheduler (2 sequences of CAP positions) and cache (spacing 16): the cache's
 * stats at the end in *ps; returns the KV pages the scheduler still holds once the cache is freed,
 * or -1 (the test failed) when the scheduler or cache cannot be made. */
static int scenario_fresh(int depth, int sampled, prefix_cache_stats *ps) {
    sched *x = new_sched(2, CAP, 0);
    if (!x) return -1;
    prefix_cache_config pcc = {0, 16};
    prefix_cache *pc = new_cache(x, &pcc, 1);
    if (!pc) {
        sched_free(x);
        return -1;
    }
    scenario(x, pc, depth, sampled);
    prefix_cache_get_stats(pc, ps);
    prefix_cache_free(pc);
    sched_stats st;
    sched_get_stats(x, &st);
    sched_free(x);
    return st.pages_used;
}

TEST(test_cached_equals_cold) {
    static const int cases[4][2] = {{0, 0}, {1, 1}, {3, 0}, {3, 1}}; /* (depth, seeded) */
    for (int k = 0; k < 4; k++) {
        prefix_cache_stats ps;
        int pages_used = scenario_fresh(cases[k][0], cases[k][1], &ps);
        REQUIRE(pages_used >= 0);
        CHECK(ps.hits >= 3 && ps.cached_tokens > 0 && ps.entries > 0);
        CHECK_MSG(pages_used == 0, "%d pages still held after the cache was freed", pages_used);
    }
}

/* Every family the cache must serve (docs/prefix-cache.md): attention only (Llama, Qwen3), Gated
 * DeltaNet hybrids dense and MoE (Qwen3.5, Qwen3-Next), MLA (DeepSeek-V3), with and without an MTP
 * head. The tiny golden checkpoints of tests/data run the same cached-vs-cold scenario: greedy AR,
 * and seeded MTP at depth 2 where the checkpoint has an MTP layer. */
TEST(test_every_family) {
    static const char *dirs[] = {"tests/data/goldens/llama",        "tests/data/goldens/qwen3_dense",
                                 "tests/data/goldens/qwen3_5_dense", "tests/data/goldens/qwen3_5_moe",
                                 "tests/data/goldens/qwen3_next",    "tests/data/goldens/deepseek_v3",
                                 "tests/data/goldens-extra/deepseek_v3_mtp"};
    mtplx_model *embedded = M;
    mtplx_err e;
    int with_mtp = 0;
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        REQUIRE(model_load(dirs[k], &M, &e) == 0);
        for (int pass = 0; pass < 1 + model_has_mtp(M); pass++) {
            prefix_cache_stats ps;
            REQUIRE(scenario_fresh(pass ? 2 : 0, pass, &ps) >= 0);
            CHECK_MSG(ps.hits >= 3, "%s: %llu hits", dirs[k], (unsigned long long)ps.hits);
            with_mtp += pass;
        }
        model_free(M);
    }
    M = embedded;
    CHECK_MSG(with_mtp >= 4, "only %d of the families ran with an MTP head", with_mtp);
}

/* A RAM budget of ~8 checkpoints: entries are evicted (LRU) and the results stay exact; the cache's
 * own bytes never pass the budget. */
TEST(test_evictions_exact) {
    sched *x = new_sched(2, CAP, 0);
    REQUIRE(x);
    prefix_cache_config pcc = {0, 16};
    prefix_cache *pc;
    prefix_cache_stats ps;
    size_t per = 0;
    {   /* measure one entry's bytes with a big budget */
        prefix_cache *big = new_cache(x, &pcc, 0);
        REQUIRE(big);
        gen_session *s = new_session(x, big);
        REQUIRE(s);
        int32_t t[40];
        for (int i = 0; i < 40; i++) t[i] = i * 13 + 1;
        gen_params p;
        params(&p, 0, 0, 1);
        result r = {0};
        run(s, t, 40, &p, &r); /* checkpoints at 16, 32 and 39 */
        prefix_cache_get_stats(big, &ps);
        per = ps.ram_bytes / (size_t)(ps.entries ? ps.entries : 1);
        free(r.toks);
        gen_session_free(s);
        prefix_cache_free(big);
    }
    pcc.ram_bytes = per * 8 + per / 2; /* an 80-token prompt leaves 6 checkpoints (spacing 16) */
    pc = new_cache(x, &pcc, 1);
    REQUIRE(pc);
    gen_session *cold = new_session(x, NULL), *hot = new_session(x, pc);
    REQUIRE(cold && hot);
    uint32_t seed = 99;
    int32_t pr[4][200];
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 200; i++) pr[k][i] = (int32_t)(rnd(&seed) % 8000);
    result r = {0};
    static const int order[] = {0, 0, 1, 2, 3, 0, 0, 1}; /* 1..3 push 0 out; then it comes back */
    for (int i = 0; i < 8; i++) {
        int k = order[i];
        gen_params p;
        params(&p, k % 2 ? 3 : 0, i % 2, 12);
        int got = same_as_cold(cold, hot, pr[k], 80, &p, &r);
        if (i == 1 || i == 6) CHECK_MSG(got == 79, "request %d: reused %d of 80 tokens", i, got);
        prefix_cache_get_stats(pc, &ps);
        CHECK_MSG(ps.ram_bytes <= ps.ram_budget, "cache holds %zu bytes over its budget %zu", ps.ram_bytes,
                  ps.ram_budget);
    }
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.evictions > 0, "no eviction with a budget of ~8 entries (%d entries)", ps.entries);
    CHECK_MSG(ps.hits > 0, "no hit at all");
    free(r.toks);
    gen_session_free(cold);
    gen_session_free(hot);
    prefix_cache_free(pc);
    sched_free(x);
}

/* A pool just big enough for one request (8 pages of P positions): the cache's pages of an earlier
 * prompt must be given back when a different request needs them (admission would wait forever
 * otherwise); a request reusing them reserves only its own pages; one that could not fit with its
 * lease runs cold. Prompts of N = 6P + 4 tokens; a long completion fills 8 pages, a short one 7. */
TEST(test_pages_reclaimed) {
    const int P = model_kv_page_size(), N = 6 * P + 4;
    sched *x = new_sched(1, 8 * P, 8);
    REQUIRE(x);
    prefix_cache_config pcc = {0, P};
    prefix_cache *pc = new_cache(x, &pcc, 1);
    REQUIRE(pc);
    gen_session *s = new_session(x, pc);
    REQUIRE(s);
    int32_t *a = malloc(sizeof(int32_t) * (size_t)N), *b = malloc(sizeof(int32_t) * (size_t)N);
    REQUIRE(a && b);
    uint32_t seed = 5;
    for (int i = 0; i < N; i++) a[i] = (int32_t)(rnd(&seed) % 8000), b[i] = (int32_t)(rnd(&seed) % 8000);
    gen_params p;
    params(&p, 3, 0, P - 4); /* N + (P - 4) + depth 3 + 1 = 7P + 4 positions: 8 pages */
    result r = {0};
    REQUIRE(run(s, a, N, &p, &r) == 0);
    prefix_cache_stats ps;
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.pages_counted > 0, "the cache holds no pages after a request");
    REQUIRE(run(s, b, N, &p, &r) == 0); /* needs the whole pool: the cache must give its pages back */
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.evictions > 0, "admission did not evict");
    /* b again, with a shorter completion (7P positions, 7 pages): its restored pages are lent, it
     * reserves only its own */
    params(&p, 3, 0, P - 12);
    REQUIRE(run(s, b, N, &p, &r) == 0);
    CHECK_INT(r.st.cached_tokens, N - 1);
    /* b with the long completion again: with the lease it would need 9 of the 8 pages (the cache
     * keeps the page the prefix ends inside while the request copies it): it runs cold, it does
     * not wait forever */
    params(&p, 3, 0, P - 4);
    REQUIRE(run(s, b, N, &p, &r) == 0);
    CHECK_INT(r.st.cached_tokens, 0);
    free(r.toks);
    free(a), free(b);
    gen_session_free(s);
    prefix_cache_free(pc);
    sched_stats st;
    sched_get_stats(x, &st);
    CHECK_INT(st.pages_used, 0);
    sched_free(x);
}

/* A prefix restored on a page boundary with an MTP history: the MTP rows end one position earlier
 * (L - 1), inside the page before, which the request copies while the cache keeps the original, so
 * it needs one page more than the trunk. Found by the soak (tests/soak/soak.py --cache-ram 64: a
 * 500 "draft 1: KV cache full"). Here the pool holds exactly the cold request: reusing the prefix
 * would need 5 MTP pages of the 4, so the request must run cold instead of failing. */
TEST(test_mtp_page_boundary) {
    const int P = model_kv_page_size();
    sched *x = new_sched(1, 4 * P, 4);
    REQUIRE(x);
    prefix_cache_config pcc = {0, P};
    prefix_cache *pc = new_cache(x, &pcc, 1);
    REQUIRE(pc);
    gen_session *s = new_session(x, pc);
    REQUIRE(s);
    const int n = 2 * P + 1; /* the last checkpoint lies at n - 1 = 2P, a page boundary */
    int32_t *a = malloc(sizeof(int32_t) * (size_t)n);
    REQUIRE(a);
    for (int i = 0; i < n; i++) a[i] = 13 * i + 5;
    gen_params p;
    params(&p, 3, 0, 4 * P - n - 3 - 1); /* prompt + max_tokens + depth + 1 = the whole pool */
    result r = {0};
    REQUIRE(run(s, a, n, &p, &r) == 0);
    int cold = r.n;
    REQUIRE(run(s, a, n, &p, &r) == 0);
    CHECK_INT(r.n, cold);
    free(r.toks);
    free(a);
    gen_session_free(s);
    prefix_cache_free(pc);
    sched_free(x);
}

/* A request whose prompt + completion fill the whole context still runs when it restores a prefix
 * (its reservation never exceeds what it needs cold). */
TEST(test_full_context) {
    sched *x = new_sched(1, 48, 4); /* 4 pages: 3 for the sequence + the shared page its 2-token prefix ends inside */
    REQUIRE(x);
    prefix_cache *pc = new_cache(x, NULL, 1);
    REQUIRE(pc);
    gen_session *s = new_session(x, pc);
    REQUIRE(s);
    int32_t a[3] = {11, 22, 33};
    gen_params p;
    params(&p, 0, 0, 48 - 3 - 1); /* prompt + max_tokens + depth + 1 = the capacity */
    result r = {0};
    REQUIRE(run(s, a, 3, &p, &r) == 0);
    REQUIRE(run(s, a, 3, &p, &r) == 0);
    CHECK_INT(r.st.cached_tokens, 2);
    free(r.toks);
    gen_session_free(s);
    prefix_cache_free(pc);
    sched_free(x);
}

static int always(void *u) {
    (void)u;
    return 1;
}

/* A request that restored a prefix and is then cancelled while waiting for admission gives its
 * lease back: the cache counts only its entries' pages again, and the next request still hits. */
TEST(test_cancel_returns_lease) {
    mtplx_err e;
    sched *x = new_sched(1, 256, 0);
    REQUIRE(x);
    prefix_cache_config pcc = {0, 16};
    prefix_cache *pc = new_cache(x, &pcc, 1);
    REQUIRE(pc);
    gen_session *s = new_session(x, pc);
    REQUIRE(s);
    int32_t a[100];
    for (int i = 0; i < 100; i++) a[i] = 7 * i + 3;
    gen_params p;
    params(&p, 1, 0, 8);
    result r = {0};
    REQUIRE(run(s, a, 100, &p, &r) == 0);
    prefix_cache_stats before, after;
    prefix_cache_get_stats(pc, &before);
    REQUIRE(sched_join(x, 16, NULL, NULL, &e) == 0); /* the only slot is taken */
    gen_session_set_cancel(s, always, NULL);
    int32_t *t = NULL;
    int n = 0;
    CHECK_INT(gen_session_run(s, a, 100, &p, NULL, NULL, &t, &n, NULL, &e), MTPLX_ECANCELED);
    free(t);
    CHECK_MSG(before.pages_counted > 0, "nothing cached by the first request");
    sched_lock(x);
    int held = prefix_cache_reclaim(pc, 0); /* every entry evicted: only leases still out would count */
    sched_unlock(x);
    prefix_cache_get_stats(pc, &after);
    CHECK_MSG(held == 0 && after.entries == 0, "a cancelled request kept its lease: %d pages still counted", held);
    sched_stats st;
    sched_get_stats(x, &st);
    CHECK_MSG(st.pages_used == 0, "%d pages held after the cancel and a full eviction", st.pages_used);
    sched_leave(x, 16);
    gen_session_set_cancel(s, NULL, NULL);
    REQUIRE(run(s, a, 100, &p, &r) == 0);
    CHECK_INT(r.st.cached_tokens, 0);
    free(r.toks);
    gen_session_free(s);
    prefix_cache_free(pc);
    sched_get_stats(x, &st);
    CHECK_INT(st.pages_used, 0);
    sched_free(x);
}


/* ---- the disk tier ---- */

static prefix_cache *disk_cache(sched *x, size_t ram, const char *dir) {
    prefix_cache_config pcc = {ram, 16, dir, 0};
    return new_cache(x, &pcc, 1);
}

/* Files named *.mpc in dir: count, and the path of the largest in big[512] (of the checkpoint of
 * want_L positions when want_L > 0). */
static int mpc_files_of(const char *dir, char *big, int want_L) {
    DIR *d = opendir(dir);
    int n = 0;
    long most = -1;
    struct dirent *de;
    while (d && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 4 || strcmp(de->d_name + l - 4, ".mpc")) continue;
        const char *dash = strchr(de->d_name, '-');
        int is_L = dash && atoi(dash + 1) == want_L;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(p, &st)) continue;
        n++;
        if (big && (want_L <= 0 || is_L) && st.st_size > most) most = st.st_size, snprintf(big, 512, "%s", p);
    }
    if (d) closedir(d);
    return n;
}

static int mpc_files(const char *dir, char *big) { return mpc_files_of(dir, big, 0); }

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
}

static void disk_stats(prefix_cache *pc, prefix_cache_stats *ps) {
    prefix_cache_sync(pc);
    prefix_cache_get_stats(pc, ps);
}

/* Everything through disk (a 1-byte RAM budget holds no entry), then a restart on the same
 * directory: every restore equals cold, and the reused depths are those of the RAM tier. */
static void disk_scenario(int depth, int sampled) {
    char dir[] = "/tmp/mtplx-test-disk-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    sched *x = new_sched(2, CAP, 0);
    REQUIRE(x);
    prefix_cache *pc = disk_cache(x, 1, dir);
    REQUIRE(pc != NULL);
    gen_session *cold = new_session(x, NULL), *hot = new_session(x, pc);
    REQUIRE(cold && hot);
    uint32_t seed = 999u + (uint32_t)depth * 7u + (uint32_t)sampled;
    int32_t base[200], other[200], turn2[400];
    for (int i = 0; i < 200; i++) base[i] = (int32_t)(rnd(&seed) % 8000);
    gen_params p;
    params(&p, depth, sampled, 12);
    result r = {0};
    prefix_cache_stats ps;

    int got = same_as_cold(cold, hot, base, 90, &p, &r);
    CHECK_MSG(got == 0, "first request reused %d tokens", got);
    disk_stats(pc, &ps);
    CHECK_MSG(ps.entries == 0 && ps.disk_writes >= 5, "RAM entries %d, disk writes %llu: not through disk", ps.entries,
              (unsigned long long)ps.disk_writes);
    got = same_as_cold(cold, hot, base, 90, &p, &r); /* the n - 1 checkpoint, from disk */
    CHECK_INT(got, 89);
    memcpy(other, base, sizeof other);
    other[60] = (other[60] + 1) % 8000;
    got = same_as_cold(cold, hot, other, 80, &p, &r); /* a grid checkpoint, from disk */
    CHECK_INT(got, 48);
    REQUIRE(run(hot, base, 90, &p, &r) == 0);
    int n1 = r.n;
    memcpy(turn2, base, sizeof(int32_t) * 90);
    memcpy(turn2 + 90, r.toks, sizeof(int32_t) * (size_t)n1);
    for (int i = 0; i < 20; i++) turn2[90 + n1 + i] = (int32_t)(rnd(&seed) % 8000);
    disk_stats(pc, &ps);
    uint64_t hits = ps.disk_hits;
    CHECK_MSG(hits >= 3, "only %llu disk hits", (unsigned long long)hits);
    CHECK_MSG(ps.disk_bytes > 0 && ps.disk_files == mpc_files(dir, NULL), "index %d files, directory %d",
              ps.disk_files, mpc_files(dir, NULL));

    /* restart: a new cache (normal RAM budget) on the same directory resumes the conversation */
    gen_session_set_prefix_cache(hot, NULL);
    prefix_cache_free(pc);
    pc = disk_cache(x, 0, dir);
    REQUIRE(pc != NULL);
    gen_session_set_prefix_cache(hot, pc);
    got = same_as_cold(cold, hot, turn2, 90 + n1 + 20, &p, &r);
    CHECK_MSG(got == 90 + n1 - 1, "after a restart the second turn reused %d tokens, expected %d", got, 90 + n1 - 1);
    disk_stats(pc, &ps);
    CHECK_INT((long long)ps.disk_hits, 1);
    /* the same turn again: now from RAM (a deeper checkpoint of this request), still exact */
    got = same_as_cold(cold, hot, turn2, 90 + n1 + 20, &p, &r);
    CHECK_INT(got, 90 + n1 + 20 - 1);
    free(r.toks);
    gen_session_free(cold);
    gen_session_free(hot);
    prefix_cache_free(pc);
    sched_stats st;
    sched_get_stats(x, &st);
    CHECK_MSG(st.pages_used == 0, "%d pages still held after the cache was freed", st.pages_used);
    sched_free(x);
    rm_dir(dir);
}

TEST(test_disk_tier_exact) {
    static const int cases[4][2] = {{0, 0}, {1, 1}, {3, 0}, {3, 1}}; /* (depth, seeded) */
    for (int k = 0; k < 4; k++) disk_scenario(cases[k][0], cases[k][1]);
}

/* Damaged and foreign files: a flipped byte in the payload is found at restore (entry not used,
 * file removed, result still cold-exact); a truncated file and a dead writer's temp file are removed
 * at start; files written under another kernel path are ignored, never restored. */
/* A disk tier on dir opened under other numerics than the files were written with: it lists none of
 * them, a 110-token prompt reuses nothing, and the files stay (another process may own them). */
static void disk_files_ignored(sched *x, const char *dir, gen_session *cold, gen_session *hot, const int32_t *a,
                               const gen_params *p, result *r, const char *what) {
    int files = mpc_files(dir, NULL);
    prefix_cache *pc = disk_cache(x, 0, dir);
    REQUIRE(pc != NULL);
    prefix_cache_stats ps;
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.disk_files == 0, "%s: the tier listed %llu files", what, (unsigned long long)ps.disk_files);
    gen_session_set_prefix_cache(hot, pc);
    int got = same_as_cold(cold, hot, a, 110, p, r);
    CHECK_MSG(got == 0, "%s: %d tokens reused", what, got);
    gen_session_set_prefix_cache(hot, NULL);
    prefix_cache_sync(pc);
    prefix_cache_free(pc);
    CHECK_MSG(mpc_files(dir, NULL) >= files, "%s: files of other numerics were removed", what);
}

TEST(test_disk_tier_rejects_bad_files) {
    char dir[] = "/tmp/mtplx-test-disk-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    sched *x = new_sched(2, CAP, 0);
    REQUIRE(x);
    gen_session *cold = new_session(x, NULL), *hot = new_session(x, NULL);
    REQUIRE(cold && hot);
    int32_t a[120];
    uint32_t seed = 4242u;
    for (int i = 0; i < 120; i++) a[i] = (int32_t)(rnd(&seed) % 8000);
    gen_params p;
    params(&p, 1, 1, 8);
    result r = {0};
    prefix_cache_stats ps;

    prefix_cache *pc = disk_cache(x, 1, dir); /* write the files */
    REQUIRE(pc != NULL);
    gen_session_set_prefix_cache(hot, pc);
    REQUIRE(run(hot, a, 100, &p, &r) == 0);
    prefix_cache_sync(pc);
    gen_session_set_prefix_cache(hot, NULL);
    prefix_cache_free(pc);
    char big[512] = "";
    int files = mpc_files_of(dir, big, 99); /* the prompt's n - 1 checkpoint */
    REQUIRE(files >= 3 && big[0]);

    /* 1. a flipped byte in the middle of the deepest file a 110-token prompt can use (its KV) */
    FILE *f = fopen(big, "r+b");
    REQUIRE(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(ch ^ 0x10, f);
    fclose(f);
    pc = disk_cache(x, 0, dir);
    REQUIRE(pc != NULL);
    gen_session_set_prefix_cache(hot, pc);
    int got = same_as_cold(cold, hot, a, 110, &p, &r);
    CHECK_MSG(got < 99 && got > 0, "reused %d tokens: the corrupt deepest file (99) was used, or nothing", got);
    disk_stats(pc, &ps);
    CHECK_MSG(ps.disk_errors == 1, "disk errors %llu, expected the corrupt file", (unsigned long long)ps.disk_errors);
    CHECK_MSG(access(big, F_OK) != 0, "the corrupt file %s was not removed", big);
    gen_session_set_prefix_cache(hot, NULL);
    prefix_cache_free(pc);

    /* 2. a truncated file and a dead writer's temp file are removed when the tier opens */
    files = mpc_files(dir, big);
    REQUIRE(truncate(big, 1000) == 0);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/.tmp-999999999-0", dir);
    f = fopen(tmp, "wb");
    REQUIRE(f != NULL);
    fputs("half a checkpoint", f);
    fclose(f);
    pc = disk_cache(x, 0, dir);
    REQUIRE(pc != NULL);
    prefix_cache_get_stats(pc, &ps);
    CHECK_INT(ps.disk_files, files - 1);
    CHECK_MSG(access(big, F_OK) != 0 && access(tmp, F_OK) != 0, "a truncated or temp file survived the start");
    gen_session_set_prefix_cache(hot, pc);
    got = same_as_cold(cold, hot, a, 110, &p, &r);
    CHECK_MSG(got > 0, "nothing reused from the remaining files");
    gen_session_set_prefix_cache(hot, NULL);
    prefix_cache_free(pc);

    /* 3. another kernel path, another kernel within it, other activations for quantized weights
     * (another fingerprint each): the files are ignored, not removed */
    kern_isa was = cpu_isa();
    if (was != KERN_ISA_PORTABLE && !cpu_isa_set(KERN_ISA_PORTABLE)) {
        disk_files_ignored(x, dir, cold, hot, a, &p, &r, "another kernel path");
        cpu_isa_set(was);
    }
    kern_matmul_set_qact_f32(1);
    disk_files_ignored(x, dir, cold, hot, a, &p, &r, "fp32 activations for quantized weights");
    kern_matmul_set_qact_f32(0);
    const char *bf16 = kern_matmul_bf16_kernel();
    kern_knobs k = *kern_knobs_get(), k2 = k;
    k2.bf16x = !k.bf16x;
    kern_knobs_set(&k2);
    if (strcmp(bf16, kern_matmul_bf16_kernel())) /* the AVX-512 path's FMA kernels: other bits */
        disk_files_ignored(x, dir, cold, hot, a, &p, &r, "another bf16 kernel");
    kern_knobs_set(&k);
    free(r.toks);
    gen_session_free(cold);
    gen_session_free(hot);
    sched_free(x);
    rm_dir(dir);
}

/* A request's end only marks its conversation for disk (the copy holds the model); gen_session_persist,
 * which the server calls after each response, writes what is marked once the scheduler is idle and
 * not while another sequence runs (it would stall that stream); a marked entry is also written at
 * prefix_cache_free, and the next cache on the directory resumes from it. */
TEST(test_disk_write_waits_for_idle) {
    char dir[] = "/tmp/mtplx-test-disk-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    sched *x = new_sched(2, CAP, 0);
    REQUIRE(x);
    prefix_cache *pc = disk_cache(x, 0, dir);
    gen_session *s = new_session(x, pc);
    REQUIRE(pc && s);
    int32_t a[90], b[90];
    uint32_t seed = 777u;
    for (int i = 0; i < 90; i++) a[i] = (int32_t)(rnd(&seed) % 8000), b[i] = (int32_t)(rnd(&seed) % 8000);
    gen_params p;
    params(&p, 1, 0, 12);
    result r = {0};
    prefix_cache_stats ps;
    mtplx_err e;
    REQUIRE(sched_join(x, 16, NULL, NULL, &e) == 0); /* another stream runs */
    REQUIRE(run(s, a, 90, &p, &r) == 0);
    gen_session_persist(s);
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.disk_marked == 2, "%d entries marked with another stream running (the conversation and the "
              "prompt's n - 1 expected)", ps.disk_marked);
    sched_leave(x, 16);
    REQUIRE(run(s, b, 90, &p, &r) == 0); /* alone: the scheduler is idle after it */
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.disk_marked == 4, "%d entries marked before gen_session_persist (4 expected: the run writes none)",
              ps.disk_marked);
    gen_session_persist(s);
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.disk_marked == 0, "%d entries still marked after gen_session_persist on an idle scheduler",
              ps.disk_marked);
    disk_stats(pc, &ps);
    CHECK_MSG(ps.disk_writes == 4 && mpc_files(dir, NULL) == 4, "%llu writes, %d files: expected both requests' two",
              (unsigned long long)ps.disk_writes, mpc_files(dir, NULL));

    /* marked, then the server stops: prefix_cache_free writes it; a new cache resumes from the file */
    int32_t c[90];
    for (int i = 0; i < 90; i++) c[i] = (int32_t)(rnd(&seed) % 8000);
    REQUIRE(sched_join(x, 16, NULL, NULL, &e) == 0);
    REQUIRE(run(s, c, 90, &p, &r) == 0);
    gen_session_persist(s);
    sched_leave(x, 16);
    gen_session_set_prefix_cache(s, NULL);
    prefix_cache_free(pc);
    CHECK_INT(mpc_files(dir, NULL), 6);
    pc = disk_cache(x, 0, dir);
    REQUIRE(pc != NULL);
    gen_session_set_prefix_cache(s, pc);
    CHECK_INT(prefix_cache_disk_probe(pc, c, 90, 1, 0), 89);
    free(r.toks);
    gen_session_free(s);
    prefix_cache_free(pc);
    sched_free(x);
    rm_dir(dir);
}

/* A directory that cannot be written (a regular file in the way) leaves the cache in RAM only. */
TEST(test_disk_tier_unusable_dir) {
    char path[] = "/tmp/mtplx-test-notadir-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    sched *x = new_sched(1, CAP, 0);
    REQUIRE(x);
    char sub[600];
    snprintf(sub, sizeof sub, "%s/cache", path);
    prefix_cache *pc = disk_cache(x, 0, sub);
    REQUIRE(pc != NULL);
    prefix_cache_stats ps;
    prefix_cache_get_stats(pc, &ps);
    CHECK_MSG(ps.disk && !ps.disk_on, "a disk tier on an unusable directory");
    gen_session *s = new_session(x, pc);
    REQUIRE(s);
    int32_t a[60];
    for (int i = 0; i < 60; i++) a[i] = 11 * i + 5;
    gen_params p;
    params(&p, 0, 0, 4);
    result r = {0};
    REQUIRE(run(s, a, 60, &p, &r) == 0);
    REQUIRE(run(s, a, 60, &p, &r) == 0);
    CHECK_INT(r.st.cached_tokens, 59); /* RAM still serves */
    free(r.toks);
    gen_session_free(s);
    prefix_cache_free(pc);
    sched_free(x);
    unlink(path);
}

int main(void) {
    mtplx_err e;
    if (model_load(MODEL_DIR, &M, &e)) {
        fprintf(stderr, "%s: %s\n", MODEL_DIR, e.msg);
        return 1;
    }
    RUN(test_cached_equals_cold);
    RUN(test_every_family);
    RUN(test_evictions_exact);
    RUN(test_pages_reclaimed);
    RUN(test_cancel_returns_lease);
    RUN(test_full_context);
    RUN(test_mtp_page_boundary);
    RUN(test_disk_tier_exact);
    RUN(test_disk_tier_rejects_bad_files);
    RUN(test_disk_write_waits_for_idle);
    RUN(test_disk_tier_unusable_dir);
    model_free(M);
    return TEST_SUMMARY();
}
