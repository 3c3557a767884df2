/* test_sched.c — continuous batching is exact (docs/architecture.md, "The scheduler"): 16 requests
 * with mixed depths (0..5), lengths, samplers (greedy, seeded T 0.6 / 1.0 with top-p, top-k,
 * min-p, penalties), stop ids, joins staggered in time and leaves mid-stream (cancels), run on
 * concurrent threads through one scheduler, give token for token what each gives alone; greedy
 * requests at every depth also equal greedy AR. Run with room for all 16 at once and with room for
 * 3 (admission waits), and with a row budget that forces prefill chunks to interleave. Also:
 * admission refuses a request that can never fit, with numbers; a cancel while waiting ends it;
 * every KV page is back in the pool at the end; a sequence leaving while a joiner counts the
 * prefix cache's pages does not let the joiner in on a stale count. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../src/engine/generate.h"
#include "../../src/engine/sampler.h"
#include "../../src/engine/sched.h"
#include "test.h"

#define MODEL_DIR "models/qwen35-tiny-code"
#define NREQ 16
/* Under ASan (about 13× slower) the completions are shorter and the middle configuration (16 slots,
 * the easiest) is left out; the row-budget and admission configurations stay. */
#ifdef __SANITIZE_ADDRESS__
#define MAX_TOKENS_SPAN 16
#define ASAN_BUILD 1
#else
#define MAX_TOKENS_SPAN 40
#define ASAN_BUILD 0
#endif

static mtplx_model *M;

typedef struct {
    int32_t prompt[64];
    int n_prompt;
    gen_params p;
    int cancel_after;   /* > 0: the token callback cancels after this many tokens */
    int delay_ms;       /* start this long after the others */
    /* results */
    int32_t *toks;
    int n;
    const char *finish;
    int rc;
    char msg[1100];
    int seen;           /* tokens the callback saw */
} req;

static uint32_t rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void req_make(req *r, int i, uint32_t *seed) {
    memset(r, 0, sizeof *r);
    r->n_prompt = 4 + (int)(rnd(seed) % 60);
    for (int t = 0; t < r->n_prompt; t++) r->prompt[t] = (int32_t)(rnd(seed) % 8000);
    gen_params_default(&r->p);
    r->p.depth = i % 6;
    r->p.max_tokens = 6 + (int)(rnd(seed) % MAX_TOKENS_SPAN);
    r->p.seed = 1000 + (uint64_t)i;
    r->p.seed_set = 1;
    switch (i % 4) {
    case 0: r->p.temperature = 0; break;
    case 1: r->p.temperature = 0.6f, r->p.top_p = 0.95f, r->p.top_k = 20; break;
    case 2: r->p.temperature = 1.0f, r->p.min_p = 0.05f, r->p.presence_penalty = 0.5f; break;
    default: r->p.temperature = 0.8f, r->p.repetition_penalty = 1.1f; break;
    }
    if (i % 5 == 2) { /* an end-of-turn id the model emits often enough to stop some runs early */
        r->p.stop_ids[0] = 198;
        r->p.n_stop_ids = 1;
    }
    r->cancel_after = i % 7 == 3 ? 3 : 0;
    r->delay_ms = (int)(rnd(seed) % 40);
}

static int on_tokens(void *user, const int32_t *t, int n) {
    (void)t;
    req *r = user;
    r->seen += n;
    return r->cancel_after > 0 && r->seen >= r->cancel_after;
}

static void req_run(gen_session *s, req *r) {
    mtplx_err e;
    err_clear(&e);
    gen_stats st;
    r->seen = 0;
    r->rc = gen_session_run(s, r->prompt, r->n_prompt, &r->p, on_tokens, r, &r->toks, &r->n, &st, &e);
    r->finish = r->rc ? NULL : st.finish_reason;
    snprintf(r->msg, sizeof r->msg, "%s", e.msg);
}

typedef struct {
    sched *x;
    req *r;
} job;

static void *job_main(void *arg) {
    job *j = arg;
    struct timespec d = {0, (long)j->r->delay_ms * 1000000L};
    nanosleep(&d, NULL);
    gen_session *s;
    mtplx_err e;
    if (gen_session_new(M, &s, &e)) {
        j->r->rc = e.code;
        return NULL;
    }
    gen_session_attach(s, j->x);
    req_run(s, j->r);
    gen_session_free(s);
    return NULL;
}

/* All requests at once through a scheduler of max_seqs slots and max_rows rows per forward; each
 * result against the solo one. */
static void run_batched(req *solo, int max_seqs, int max_rows, int chunk) {
    sched_config c;
    sched_config_default(&c, max_seqs, 160);
    c.max_batch_rows = max_rows;
    c.prefill_chunk = chunk;
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    req r[NREQ];
    job jobs[NREQ];
    pthread_t th[NREQ];
    for (int i = 0; i < NREQ; i++) {
        r[i] = solo[i];
        r[i].toks = NULL;
        jobs[i] = (job){x, &r[i]};
        REQUIRE(pthread_create(&th[i], NULL, job_main, &jobs[i]) == 0);
    }
    for (int i = 0; i < NREQ; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NREQ; i++) {
        CHECK_MSG(r[i].rc == 0, "slots %d: request %d failed: %s", max_seqs, i, r[i].msg);
        CHECK_MSG(r[i].n == solo[i].n && (r[i].n == 0 || !memcmp(r[i].toks, solo[i].toks, sizeof(int32_t) * r[i].n)),
                  "slots %d rows %d: request %d (depth %d, T %.1f) gave %d tokens, alone %d, or other tokens",
                  max_seqs, max_rows, i, r[i].p.depth, r[i].p.temperature, r[i].n, solo[i].n);
        CHECK_MSG(r[i].finish && solo[i].finish && !strcmp(r[i].finish, solo[i].finish),
                  "request %d finished %s, alone %s", i, r[i].finish ? r[i].finish : "-", solo[i].finish);
        free(r[i].toks);
    }
    sched_stats st;
    sched_get_stats(x, &st);
    CHECK_MSG(st.pages_used == 0 && st.pages_reserved == 0 && st.running == 0,
              "after all requests: %d pages used, %d reserved, %d running", st.pages_used, st.pages_reserved,
              st.running);
    CHECK_MSG(st.seq_parts > st.forwards, "no forward carried two sequences (%llu parts in %llu forwards)",
              (unsigned long long)st.seq_parts, (unsigned long long)st.forwards);
    sched_free(x);
}

TEST(test_batched_equals_solo) {
    req solo[NREQ];
    uint32_t seed = 12345;
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(M, &s, &e) == 0);
    for (int i = 0; i < NREQ; i++) {
        req_make(&solo[i], i, &seed);
        req_run(s, &solo[i]);
        REQUIRE(solo[i].rc == 0);
    }
    /* greedy MTP ≡ AR, alone */
    for (int i = 0; i < NREQ; i++) {
        if (solo[i].p.temperature != 0 || solo[i].cancel_after) continue;
        req ar = solo[i];
        ar.p.depth = 0;
        ar.toks = NULL;
        req_run(s, &ar);
        CHECK_MSG(ar.n == solo[i].n && !memcmp(ar.toks, solo[i].toks, sizeof(int32_t) * ar.n),
                  "request %d: greedy depth %d differs from AR", i, solo[i].p.depth);
        free(ar.toks);
    }
    gen_session_free(s);
    if (!ASAN_BUILD) run_batched(solo, NREQ, 128, 64);
    run_batched(solo, 3, 128, 64);   /* admission waits: at most 3 at once */
    run_batched(solo, 8, 24, 8);     /* prompts in 8-row chunks, forwards of at most 24 rows */
    for (int i = 0; i < NREQ; i++) free(solo[i].toks);
}

/* The depth policy: with knee_rows 1 every cycle of a depth_auto request is capped to 0 drafts (AR
 * steps, the MTP history kept by hist_keep_ar); with knee 3 two sequences get 0 and one alone gets 2,
 * so staggered requests switch between both; then with the costs measured (sched_calibrate: costs
 * filled, its scratch pages given back, caps in range). Greedy output must stay AR's; the cycles that do draft
 * must still be accepted about as often as with the policy off (a history missing pairs would make
 * the drafts guess from the wrong context). */
static void *depth_job(void *arg) {
    job *j = arg;
    struct timespec d = {0, (long)j->r->delay_ms * 1000000L};
    nanosleep(&d, NULL);
    gen_session *s;
    mtplx_err e;
    if (gen_session_new(M, &s, &e)) return NULL;
    gen_session_attach(s, j->x);
    gen_stats st;
    j->r->rc = gen_session_run(s, j->r->prompt, j->r->n_prompt, &j->r->p, NULL, NULL, &j->r->toks, &j->r->n, &st, &e);
    /* acceptance per mille, when enough drafts were made to compare (the exact check is hist_check) */
    j->r->seen = st.drafted >= 20 ? (int)(1000.0 * st.accepted / st.drafted) : -1;
    snprintf(j->r->msg, sizeof j->r->msg, "%s", e.msg);
    gen_session_free(s);
    return NULL;
}

TEST(test_depth_policy_keeps_greedy_and_history) {
    uint32_t seed = 99;
    req r[3];
    gen_session *s;
    mtplx_err e;
    REQUIRE(gen_session_new(M, &s, &e) == 0);
    int solo_acc[3];
    for (int i = 0; i < 3; i++) {
        req_make(&r[i], 0, &seed); /* greedy, depth 0 */
        r[i].p.max_tokens = ASAN_BUILD ? 30 : 60;
        r[i].p.n_stop_ids = 0;
        req ar = r[i];
        req_run(s, &ar);
        r[i].toks = ar.toks; /* AR's tokens, the reference */
        r[i].n = ar.n;
        req mtp = r[i];
        mtp.p.depth = 3;
        mtp.toks = NULL;
        gen_stats st;
        REQUIRE(gen_session_run(s, mtp.prompt, mtp.n_prompt, &mtp.p, NULL, NULL, &mtp.toks, &mtp.n, &st, &e) == 0);
        solo_acc[i] = (int)(1000.0 * st.accepted / st.drafted);
        free(mtp.toks);
    }
    gen_session_free(s);
    const int knees[3] = {1, 3, 0}; /* 0: the measured costs (sched_calibrate) */
    for (int k = 0; k < 3; k++) {
        sched_config c;
        sched_config_default(&c, 3, 160);
        c.knee_rows = knees[k];
        sched *x;
        REQUIRE(sched_new(M, &c, &x, &e) == 0);
        if (knees[k]) {
            CHECK_INT(sched_depth_cap(x, 3), knees[k] - 1); /* nothing running: as for one sequence */
        } else {
            REQUIRE(sched_calibrate(x, 2.0, &e) == 0); /* a budget that also covers 1, 2, 4 rows under ASan */
            sched_costs cs;
            CHECK(sched_costs_get(x, &cs) == 1);
            CHECK_MSG(cs.trunk[0].rows[0] == 1 && cs.trunk[0].ms[0] > 0 && cs.mtp.rows[0] == 1 && cs.mtp.ms[0] > 0,
                      "calibration: trunk %g rows %g ms, MTP %g rows %g ms", cs.trunk[0].rows[0], cs.trunk[0].ms[0],
                      cs.mtp.rows[0], cs.mtp.ms[0]);
            /* rows split into sequences as cycles split them: 2 sequences × 1 row and 1 × 2 rows apart,
             * 2 sequences × 4 rows (3 at most run here) in the 4-rows-a-sequence bin at 8 rows */
            CHECK_MSG(cs.trunk[0].rows[1] == 2 && cs.trunk[1].rows[1] == 2 && cs.trunk[2].rows[3] == 8,
                      "calibration layout: %g %g %g", cs.trunk[0].rows[1], cs.trunk[1].rows[1], cs.trunk[2].rows[3]);
            sched_stats ss;
            sched_get_stats(x, &ss);
            CHECK_MSG(ss.pages_used == 0, "calibration left %d pages in use", ss.pages_used);
            int d = sched_depth_cap(x, 3);
            CHECK(d >= 0 && d <= 3);
        }
        req q[3];
        job jobs[3];
        pthread_t th[3];
        for (int i = 0; i < 3; i++) {
            q[i] = r[i];
            q[i].p.depth = 3;
            q[i].p.depth_auto = 1;
            q[i].toks = NULL;
            q[i].delay_ms = 25 * i; /* joins at different times: the cap changes while they run */
            jobs[i] = (job){x, &q[i]};
            REQUIRE(pthread_create(&th[i], NULL, depth_job, &jobs[i]) == 0);
        }
        for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
        for (int i = 0; i < 3; i++) {
            CHECK_MSG(q[i].rc == 0, "knee %d request %d: %s", knees[k], i, q[i].msg);
            CHECK_MSG(q[i].n == r[i].n && !memcmp(q[i].toks, r[i].toks, sizeof(int32_t) * q[i].n),
                      "knee %d request %d: greedy with the depth policy differs from AR", knees[k], i);
            if (q[i].seen >= 0) /* some cycles drafted */
                CHECK_MSG(q[i].seen * 2 >= solo_acc[i], "knee %d request %d: acceptance %d/1000, without the policy %d",
                          knees[k], i, q[i].seen, solo_acc[i]);
            free(q[i].toks);
        }
        sched_free(x);
    }
    for (int i = 0; i < 3; i++) free(r[i].toks);
}

static int always(void *u) {
    (void)u;
    return 1;
}

/* One sequence of 4 pages' positions, a pool of 2 pages: longer than a sequence holds, more than the
 * pool holds (both refused at once, with the reason), then one that fits; the next waits for the slot. */
TEST(test_admission) {
    const int P = model_kv_page_size();
    sched_config c;
    sched_config_default(&c, 1, 4 * P);
    c.kv_pages = 2; /* 2P positions */
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    char cap[16];
    snprintf(cap, sizeof cap, "%d", 4 * P);
    CHECK(sched_join(x, 4 * P + 36, NULL, NULL, &e) == MTPLX_ERANGE);
    CHECK_MSG(strstr(e.msg, cap) != NULL, "too long: %s", e.msg);
    CHECK(sched_join(x, 2 * P + 8, NULL, NULL, &e) == MTPLX_ERANGE);
    CHECK_MSG(strstr(e.msg, "KV pages") != NULL, "too many pages: %s", e.msg);
    REQUIRE(sched_join(x, P + 4, NULL, NULL, &e) == 0);
    CHECK(sched_join(x, 10, always, NULL, &e) == MTPLX_ECANCELED); /* the one slot is taken */
    sched_leave(x, P + 4);
    sched_stats st;
    sched_get_stats(x, &st);
    CHECK(st.running == 0 && st.pages_reserved == 0 && st.waiting == 0);
    sched_free(x);
}

/* A fake prefix cache for test_reclaim_after_leave: it holds `held` pages; on its first call it also
 * plays a sequence that ends while the joiner waits for the model — it stores its `moved` pages in
 * the cache and leaves — after the cache counted what it holds, as a real cache's put and the
 * leaver's sched_leave may run between reclaim's count and the joiner's check. */
typedef struct {
    sched *x;
    int held, moved, leaver_positions, calls;
} fake_cache;

static int fake_reclaim(void *user, int max_pages) {
    fake_cache *f = user;
    if (f->held > max_pages) f->held = max_pages;
    int counted = f->held;
    if (f->calls++ == 0) {
        f->held += f->moved;
        sched_leave(f->x, f->leaver_positions);
    }
    return counted;
}

/* Admission counts the cache's pages against the budget: a sequence that leaves while a joiner's
 * reclaim runs must not let the joiner in on a stale count, or the running sequences plus the cache
 * outgrow the pool ("KV cache full" mid-prefill under load). Pool of 6 pages: A and C hold 3 each;
 * B (3 pages) waits; A stores its 3 pages in the cache and leaves inside B's reclaim; B may join
 * only once the cache is down to what fits beside C and B. */
TEST(test_reclaim_after_leave) {
    const int P = model_kv_page_size();
    sched_config c;
    sched_config_default(&c, 3, 3 * P);
    c.kv_pages = 6;
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    REQUIRE(sched_join(x, 3 * P, NULL, NULL, &e) == 0); /* A */
    REQUIRE(sched_join(x, 3 * P, NULL, NULL, &e) == 0); /* C */
    fake_cache f = {x, 0, 3, 3 * P, 0};
    sched_set_reclaim(x, fake_reclaim, &f);
    REQUIRE(sched_join(x, 3 * P, NULL, NULL, &e) == 0); /* B */
    sched_stats st;
    sched_get_stats(x, &st);
    CHECK_MSG(st.pages_reserved + f.held <= c.kv_pages, "admitted with %d pages reserved and %d cached of %d",
              st.pages_reserved, f.held, c.kv_pages);
    CHECK_MSG(f.calls >= 2, "the cache was asked %d time(s): its count after the leave was never taken", f.calls);
    sched_leave(x, 3 * P);
    sched_leave(x, 3 * P);
    sched_get_stats(x, &st);
    CHECK(st.running == 0 && st.pages_reserved == 0);
    sched_free(x);
}

/* MTPLX_SCHED_TRACE's file (sched_config.trace_path): one line per step, whose rows add up to what
 * ran — a 200-token prompt in 64-row chunks (4 steps, all prompt rows) and then one decoding row —
 * and a path that cannot be opened is an error at creation, not a silent no-trace. */
/* One step line of a scheduler trace (MTPLX_SCHED_TRACE; docs/architecture.md): trunk and MTP
 * sequences / rows / prompt rows / ms. */
typedef struct {
    double t, gap, lock, ms0, ms1;
    int n0, r0, p0, n1, r1, p1, run, wait;
} trace_line;

/* Parses line into *l; returns 1, or 0 for a comment or a malformed line. */
static int trace_parse(const char *line, trace_line *l) {
    return line[0] != '#' && sscanf(line, "%lf %lf %lf | %d %d %d %lf | %d %d %d %lf | %d %d", &l->t, &l->gap, &l->lock,
                                    &l->n0, &l->r0, &l->p0, &l->ms0, &l->n1, &l->r1, &l->p1, &l->ms1, &l->run,
                                    &l->wait) == 13;
}

TEST(test_step_trace) {
    char path[] = "/tmp/mtplx-sched-trace-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    sched_config c;
    sched_config_default(&c, 1, 256);
    c.prefill_chunk = 64;
    c.trace_path = path;
    sched_config_resolve(&c, M);
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    int32_t toks[201];
    for (int i = 0; i < 201; i++) toks[i] = 100 + i;
    model_state *st;
    REQUIRE(model_state_new_in(sched_pool(x), 256, c.max_batch_rows, &st, &e) == 0);
    REQUIRE(sched_join(x, 201, NULL, NULL, &e) == 0);
    CHECK(sched_forward(x, st, toks, 200, NULL, &e) == 0);
    CHECK(sched_forward(x, st, toks + 200, 1, NULL, &e) == 0);
    sched_leave(x, 201);
    model_state_free(st);
    sched_stats ss;
    sched_get_stats(x, &ss);
    sched_free(x); /* closes the trace */
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    char line[512];
    int lines = 0, rows = 0, prompt = 0, last_rows = -1, last_prompt = -1, bad = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        trace_line l = {0};
        if (!trace_parse(line, &l) || l.t < 0 || l.gap < 0 || l.ms0 < 0) bad++;
        lines++, rows += l.r0 + l.r1, prompt += l.p0 + l.p1, last_rows = l.r0, last_prompt = l.p0;
    }
    fclose(f);
    unlink(path);
    CHECK_MSG(!bad, "%d malformed trace lines", bad);
    CHECK_MSG(lines == (int)ss.steps && lines == 5, "%d trace lines for %llu steps (want 5)", lines,
              (unsigned long long)ss.steps);
    CHECK_MSG(rows == 201 && prompt == 200, "trace: %d rows, %d prompt rows (want 201, 200)", rows, prompt);
    CHECK_MSG(last_rows == 1 && last_prompt == 0, "trace: the last step has %d rows, %d prompt", last_rows, last_prompt);
    c.trace_path = "/nonexistent-mtplx-dir/trace.txt";
    CHECK(sched_new(M, &c, &x, &e) == MTPLX_EIO);
    CHECK_MSG(strstr(e.msg, "/nonexistent-mtplx-dir/trace.txt") != NULL, "message: %s", e.msg);
}

static int cancel_calls;
static int cancel_on_second(void *u) { /* says stop the second time it is asked */
    (void)u;
    return ++cancel_calls >= 2;
}

/* sched_config_resolve: a default config takes the model's prefill chunk (on the CPU the backend's,
 * be_caps.prefill_rows, which MTPLX_PREFILL_ROWS sets; on a GPU 64) and rows for the chunk and every
 * sequence's verify; values a caller set stay. */
TEST(test_config_resolve) {
    sched_config c;
    sched_config_default(&c, 3, 256);
    CHECK(c.prefill_chunk == 0 && c.max_batch_rows == 0);
    sched_config_resolve(&c, M);
    CHECK(c.prefill_chunk == model_prefill_rows(M));
    CHECK(c.max_batch_rows >= c.prefill_chunk && c.max_batch_rows >= 128 && c.max_batch_rows >= 3 * (GEN_MAX_DEPTH + 1));
    sched_config_default(&c, 40, 256);
    c.prefill_chunk = 16;
    sched_config_resolve(&c, M);
    CHECK(c.prefill_chunk == 16 && c.max_batch_rows == 40 * (GEN_MAX_DEPTH + 1));
    c.max_batch_rows = 24;
    sched_config_resolve(&c, M);
    CHECK(c.prefill_chunk == 16 && c.max_batch_rows == 24);
}

/* A cancel given to sched_join stops a prompt between its chunks (a hang-up or a shutdown during
 * a long prefill): the forward returns ECANCELED with the chunks before the cancel done; the next
 * sequence joined on this thread without a check runs its whole prompt. */
TEST(test_cancel_between_prompt_chunks) {
    sched_config c;
    sched_config_default(&c, 1, 256);
    c.prefill_chunk = 64;
    sched_config_resolve(&c, M);
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    int32_t toks[200];
    for (int i = 0; i < 200; i++) toks[i] = 100 + i;
    model_state *st;
    REQUIRE(model_state_new_in(sched_pool(x), 256, c.max_batch_rows, &st, &e) == 0);
    cancel_calls = 0;
    REQUIRE(sched_join(x, 200, cancel_on_second, NULL, &e) == 0);
    CHECK(sched_forward(x, st, toks, 200, NULL, &e) == MTPLX_ECANCELED);
    CHECK_MSG(model_state_len(st) == 128, "after the cancel: %d positions, want 128", model_state_len(st));
    CHECK(cancel_calls == 2);
    sched_leave(x, 200);
    model_state_reset(st);
    REQUIRE(sched_join(x, 200, NULL, NULL, &e) == 0);
    CHECK(sched_forward(x, st, toks, 200, NULL, &e) == 0);
    CHECK(model_state_len(st) == 200);
    sched_leave(x, 200);
    model_state_free(st);
    sched_free(x);
}

/* The rendezvous (sched.c, next_kind): NPH sequences whose cycles (CYC_DRAFTS one-row draft steps
 * with draft-head logits, then a verify of CYC_DRAFTS + 1 rows) start out of phase — sequence i first
 * makes i % (CYC_DRAFTS + 1) draft steps — all joined before any runs, with a deadline that never
 * fires, so every step waits for every sequence. Aligned, the draft steps go first until all
 * sequences reach their verify, and from then on each cycle is CYC_DRAFTS MTP forwards and ONE trunk
 * forward for everyone: exactly CYCLES trunk forwards. Not aligned, every step serves every queued
 * request, the phases stay apart and almost every step runs a trunk forward too. */
#define NPH 8
#define CYC_DRAFTS 3
#define CYCLES 6

typedef struct {
    sched *x;
    int i;
    pthread_barrier_t *go;
    int rc;
} phase_job;

static void *phase_main(void *arg) {
    phase_job *j = arg;
    mtplx_err e;
    const model_config *cfg = model_config_of(M);
    int H = cfg->hidden_size, V = cfg->vocab_size, cap = 64;
    float *h = calloc((size_t)H, sizeof(float)), *ho = calloc((size_t)H, sizeof(float));
    float *lg = malloc(sizeof(float) * (size_t)V);
    model_state *st = NULL;
    mtp_state *mt = NULL;
    j->rc = !h || !ho || !lg || sched_join(j->x, cap, NULL, NULL, &e) ? 1 : 0;
    if (!j->rc) j->rc = model_state_new_in(sched_pool(j->x), cap, CYC_DRAFTS + 1, &st, &e) ||
                        mtp_state_new_in(sched_pool(j->x), cap, &mt, &e);
    pthread_barrier_wait(j->go); /* everyone has joined: every step now waits for all of them */
    int32_t toks[CYC_DRAFTS + 1] = {101, 202, 303, 404}, nx = 7;
    for (int d = 0; !j->rc && d < j->i % (CYC_DRAFTS + 1); d++)
        j->rc = sched_mtp(j->x, mt, h, &nx, 1, ho, HEAD_DRAFT, 0, lg, 0, NULL, &e);
    for (int c = 0; !j->rc && c < CYCLES; c++) {
        j->rc = sched_forward(j->x, st, toks, CYC_DRAFTS + 1, NULL, &e);
        for (int d = 0; !j->rc && d < CYC_DRAFTS; d++) j->rc = sched_mtp(j->x, mt, h, &nx, 1, ho, HEAD_DRAFT, 0, lg, 0, NULL, &e);
    }
    model_state_free(st);
    if (mt) mtp_state_free(mt);
    sched_leave(j->x, cap);
    free(h), free(ho), free(lg);
    return NULL;
}

/* Runs the phased sequences with align_phases = align and spin_us = spin; *trunk and *steps get the
 * counts. */
static void run_phased(int align, double spin, uint64_t *trunk, uint64_t *steps) {
    sched_config c;
    sched_config_default(&c, NPH, 64);
    c.align_phases = align;
    c.spin_us = spin;
    c.wait_ms = 600000; /* never: a step runs when every sequence waits */
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, NPH);
    phase_job j[NPH];
    pthread_t th[NPH];
    for (int i = 0; i < NPH; i++) {
        j[i] = (phase_job){x, i, &go, 0};
        REQUIRE(pthread_create(&th[i], NULL, phase_main, &j[i]) == 0);
    }
    for (int i = 0; i < NPH; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < NPH; i++) CHECK_MSG(j[i].rc == 0, "align %d: sequence %d failed", align, i);
    sched_stats st;
    sched_get_stats(x, &st);
    *trunk = st.trunk_forwards;
    *steps = st.steps;
    CHECK_MSG(st.running == 0 && st.pages_used == 0, "align %d: %d running, %d pages used at the end", align,
              st.running, st.pages_used);
    pthread_barrier_destroy(&go);
    sched_free(x);
}

TEST(test_rendezvous_aligns_cycles) {
    uint64_t trunk, steps;
    for (int spin = 0; spin < 2; spin++) { /* sleeping until woken, and polling first (spin_us) */
        run_phased(1, spin ? 200 : 0, &trunk, &steps);
        CHECK_MSG(trunk == CYCLES, "aligned, spin %d: %llu trunk forwards for %d cycles (one per cycle expected)", spin,
                  (unsigned long long)trunk, CYCLES);
        CHECK_MSG(steps == CYCLES * (CYC_DRAFTS + 1) + CYC_DRAFTS, "aligned, spin %d: %llu steps, want %d", spin,
                  (unsigned long long)steps, CYCLES * (CYC_DRAFTS + 1) + CYC_DRAFTS);
    }
    run_phased(0, 0, &trunk, &steps);
    CHECK_MSG(trunk > 3 * CYCLES, "not aligned: only %llu trunk forwards for %d cycles (the phases should stay apart)",
              (unsigned long long)trunk, CYCLES);
}

/* A prompt's MTP history (sched_mtp of many rows, cut into prefill_rows chunks while another sequence
 * decodes) must not hold a decoding sequence's verifies: its chunks are prompt rows, not drafts, so
 * they do not make the step an MTP step (next_kind). One phased decoder (phase_main: CYCLES cycles of a
 * verify and CYC_DRAFTS drafts) beside a HIST-row history, every step waiting for both: every verify
 * runs while the history is still being read, never more than CYC_DRAFTS MTP steps apart. Before, the
 * history's chunks (each queued as the last one ended) kept every step an MTP step until it was done. */
#define HIST 480

typedef struct {
    sched *x;
    pthread_barrier_t *go;
    int rows, rc; /* the history's rows */
} hist_job;

static void *hist_main(void *arg) {
    hist_job *j = arg;
    mtplx_err e;
    int H = model_config_of(M)->hidden_size, T = j->rows;
    float *h = calloc((size_t)T * H, sizeof(float)), *ho = calloc((size_t)T * H, sizeof(float));
    int32_t *nx = malloc(sizeof(int32_t) * (size_t)T);
    mtp_state *mt = NULL;
    for (int i = 0; nx && i < T; i++) nx[i] = 100 + i % 500;
    int joined = h && ho && nx && sched_join(j->x, T + 8, NULL, NULL, &e) == 0;
    j->rc = !joined || mtp_state_new_in(sched_pool(j->x), T + 8, &mt, &e);
    pthread_barrier_wait(j->go);
    if (!j->rc) j->rc = sched_mtp(j->x, mt, h, nx, T, ho, HEAD_TARGET, 0, NULL, 0, NULL, &e);
    if (mt) mtp_state_free(mt);
    if (joined) sched_leave(j->x, T + 8);
    free(h), free(ho), free(nx);
    return NULL;
}

TEST(test_prompt_history_does_not_hold_verifies) {
    char path[] = "/tmp/mtplx-sched-hist-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    sched_config c;
    sched_config_default(&c, 2, HIST + 64);
    c.wait_ms = 600000; /* never: a step runs when both sequences wait */
    c.knee_rows = 8;    /* prompt chunks of 8 rows beside a decoder on every backend (a GPU's default is 64) */
    c.trace_path = path;
    sched_config_resolve(&c, M);
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    phase_job pj = {x, 0, &go, 0};
    hist_job hj = {x, &go, HIST, 0};
    pthread_t t1, t2;
    REQUIRE(pthread_create(&t1, NULL, phase_main, &pj) == 0);
    REQUIRE(pthread_create(&t2, NULL, hist_main, &hj) == 0);
    pthread_join(t1, NULL), pthread_join(t2, NULL);
    CHECK(pj.rc == 0 && hj.rc == 0);
    pthread_barrier_destroy(&go);
    sched_free(x); /* closes the trace */
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    char line[512];
    int hist_rows = 0, hist_steps = 0, verifies_during = 0, mtp_run = 0, worst_run = 0;
    while (fgets(line, sizeof line, f)) {
        trace_line l;
        if (!trace_parse(line, &l)) continue;
        if (l.r0 > 0) { /* a trunk step: the decoder's verify, after mtp_run MTP steps */
            if (hist_rows > 0 && hist_rows < HIST) {
                verifies_during++;
                if (mtp_run > worst_run) worst_run = mtp_run;
            }
            mtp_run = 0;
        } else {
            mtp_run++;
        }
        hist_rows += l.p1;
        hist_steps += l.p1 > 0;
    }
    fclose(f);
    unlink(path);
    CHECK_MSG(hist_rows == HIST && hist_steps >= 2 * CYCLES, "history: %d rows in %d steps (want %d rows, in chunks)",
              hist_rows, hist_steps, HIST);
    CHECK_MSG(verifies_during >= CYCLES - 1, "only %d of the decoder's %d verifies ran while the history was read",
              verifies_during, CYCLES);
    CHECK_MSG(worst_run <= CYC_DRAFTS, "%d MTP steps before a verify while the history was read (a cycle drafts %d)",
              worst_run, CYC_DRAFTS);
}

/* The other way round: a long prompt's trunk chunks must not hold another prompt's MTP history
 * (requests that arrive together: a 4,000-token prompt beside short ones). A 480-row prompt (chunks of
 * 32 alone) and a 64-row history that start together take turns (next_kind): never two trunk steps in
 * a row while the history waits (before, all the trunk chunks went first), and the prompt's chunks
 * beside the other sequence are the small ones (prefill_rows: before, prefill_chunk). */
typedef struct {
    sched *x;
    pthread_barrier_t *go;
    int rows, rc; /* the prompt's rows */
} prompt_job;

static void *prompt_main(void *arg) {
    prompt_job *j = arg;
    mtplx_err e;
    model_state *st = NULL;
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)j->rows);
    for (int i = 0; toks && i < j->rows; i++) toks[i] = 100 + i % 500;
    int joined = toks && sched_join(j->x, j->rows + 8, NULL, NULL, &e) == 0;
    j->rc = !joined || model_state_new_in(sched_pool(j->x), j->rows + 8, sched_config_of(j->x)->max_batch_rows, &st, &e);
    pthread_barrier_wait(j->go);
    if (!j->rc) j->rc = sched_forward(j->x, st, toks, j->rows, NULL, &e);
    model_state_free(st);
    if (joined) sched_leave(j->x, j->rows + 8);
    free(toks);
    return NULL;
}

TEST(test_long_prompt_does_not_hold_histories) {
    char path[] = "/tmp/mtplx-sched-turns-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    sched_config c;
    sched_config_default(&c, 2, 512);
    c.wait_ms = 600000; /* never: a step runs when both sequences wait */
    c.prefill_chunk = 32;
    c.knee_rows = 8; /* the CPU's default; a GPU's (64) would leave the neighbour rule at prefill_chunk */
    c.trace_path = path;
    sched_config_resolve(&c, M);
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, 2);
    prompt_job pj = {x, &go, 480, 0};
    hist_job hj = {x, &go, 64, 0};
    pthread_t t1, t2;
    REQUIRE(pthread_create(&t1, NULL, prompt_main, &pj) == 0);
    REQUIRE(pthread_create(&t2, NULL, hist_main, &hj) == 0);
    pthread_join(t1, NULL), pthread_join(t2, NULL);
    CHECK(pj.rc == 0 && hj.rc == 0);
    pthread_barrier_destroy(&go);
    sched_free(x);
    FILE *f = fopen(path, "r");
    REQUIRE(f != NULL);
    char line[512];
    int trunk_rows = 0, trunk_steps = 0, hist_rows = 0, streak = 0, worst = 0, first_chunk = -1;
    while (fgets(line, sizeof line, f)) {
        trace_line l;
        if (!trace_parse(line, &l)) continue;
        if (hist_rows < 64) { /* trunk steps in a row while the history waits */
            streak = l.r0 > 0 ? streak + 1 : 0;
            if (streak > worst) worst = streak;
        }
        if (l.r0 > 0 && first_chunk < 0) first_chunk = l.p0;
        trunk_rows += l.r0, trunk_steps += l.r0 > 0, hist_rows += l.p1;
    }
    fclose(f);
    unlink(path);
    CHECK_MSG(trunk_rows == 480 && trunk_steps >= 15 && hist_rows == 64, "trace: %d trunk rows in %d steps, %d history "
              "rows (want 480 in chunks of at most 32, 64)", trunk_rows, trunk_steps, hist_rows);
    CHECK_MSG(worst <= 1, "%d of the prompt's trunk steps in a row while the history waited (they take turns)", worst);
    /* and while the other sequence is joined the long prompt is cut by the rule for decoding neighbours
     * (knee_rows 8 without measured costs), not prefill_chunk: the other decodes a step later */
    CHECK_MSG(first_chunk == 8, "the long prompt's first chunk beside another sequence: %d rows (want 8)", first_chunk);
}

/* A sequence that has joined but not yet submitted (setting up on the host: a GPU thread's first scratch,
 * a long prompt's buffers) is waited for only wait_ms after its join (sched.c all_queued): before, every
 * step of every other sequence waited wait_ms for it (a 2 ms gap a step). A decoder runs FRESH_STEPS
 * one-row steps while a second sequence sits joined without submitting; at most the steps inside the
 * join's grace period run late (late_steps), then the late joiner's own request still runs. */
#define FRESH_STEPS 20

typedef struct {
    sched *x;
    pthread_barrier_t *joined, *done;
    int rc;
} late_job;

static void *late_main(void *arg) {
    late_job *j = arg;
    mtplx_err e;
    model_state *st = NULL;
    int32_t tok = 123;
    int joined = sched_join(j->x, 16, NULL, NULL, &e) == 0;
    pthread_barrier_wait(j->joined);
    pthread_barrier_wait(j->done); /* the decoder's steps ran meanwhile */
    j->rc = !joined || model_state_new_in(sched_pool(j->x), 16, 8, &st, &e) || sched_forward(j->x, st, &tok, 1, NULL, &e);
    model_state_free(st);
    if (joined) sched_leave(j->x, 16);
    return NULL;
}

TEST(test_fresh_sequence_does_not_hold_steps) {
    sched_config c;
    sched_config_default(&c, 2, 64);
    sched_config_resolve(&c, M); /* wait_ms: the default */
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    model_state *st;
    REQUIRE(model_state_new_in(sched_pool(x), 64, 8, &st, &e) == 0);
    REQUIRE(sched_join(x, 64, NULL, NULL, &e) == 0);
    pthread_barrier_t joined, done;
    pthread_barrier_init(&joined, NULL, 2);
    pthread_barrier_init(&done, NULL, 2);
    late_job j = {x, &joined, &done, 0};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, late_main, &j) == 0);
    pthread_barrier_wait(&joined);
    int32_t toks[FRESH_STEPS];
    for (int i = 0; i < FRESH_STEPS; i++) toks[i] = 200 + i;
    int rc = 0;
    for (int i = 0; i < FRESH_STEPS && !rc; i++) rc = sched_forward(x, st, toks + i, 1, NULL, &e);
    CHECK(rc == 0);
    sched_stats ss;
    sched_get_stats(x, &ss);
    pthread_barrier_wait(&done);
    pthread_join(th, NULL);
    CHECK(j.rc == 0);
    CHECK_MSG(ss.steps == FRESH_STEPS && ss.late_steps <= 2, "%llu of %llu steps waited for the sequence that had not "
              "submitted (at most 2: those inside its join's grace)", (unsigned long long)ss.late_steps,
              (unsigned long long)ss.steps);
    sched_leave(x, 64);
    model_state_free(st);
    sched_get_stats(x, &ss);
    CHECK_MSG(ss.running == 0 && ss.steps == FRESH_STEPS + 1, "%d running, %llu steps at the end", ss.running,
              (unsigned long long)ss.steps);
    pthread_barrier_destroy(&joined);
    pthread_barrier_destroy(&done);
    sched_free(x);
}

/* The draft heads' top-k rows (model_lm_head_top, sched.c run_heads): a draft sampler (no penalties,
 * top_k k or greedy) must read the same distribution from a top-k row as from the whole row, bit for
 * bit — on a device backend only the k best logits come down and the rest read -inf. NTOP sequences
 * whose draft steps share one merged MTP step (every one joined, a deadline that never fires) ask
 * for different k, once with one asking for whole rows (top 0: the step downloads whole rows) and
 * once without (the step downloads the largest k). Each one's distribution, from the merged step's
 * logits, against sampler_build over the whole row of its own model_lm_head call. One row of zeros
 * makes every logit 0: a full tie, ranked by id. The same with rows given as logits_top lists
 * (sched_mtp's list, sampler_build_top): all of a step's, or some. */
#define NTOP 4

typedef struct {
    sched *x;
    int top;           /* model_lm_head_top k asked (0: whole rows) */
    int top_k;         /* the draft sampler's top_k (0: greedy) */
    int zero;          /* 1: a hidden row of zeros */
    int list;          /* 1: the row's logits_top list (sched_mtp's list; sampler_build_top) */
    pthread_barrier_t *go;
    int rc, same;      /* 1: the distributions are bit-identical */
} top_job;

static void *top_main(void *arg) {
    top_job *j = arg;
    mtplx_err e;
    const model_config *cfg = model_config_of(M);
    int H = cfg->hidden_size, V = cfg->vocab_size, cap = 16;
    float *h = calloc((size_t)H, sizeof(float)), *ho = calloc((size_t)H, sizeof(float));
    float *lg = malloc(sizeof(float) * (size_t)V), *whole = malloc(sizeof(float) * (size_t)V);
    uint32_t seed = 77u + (uint32_t)j->top;
    for (int i = 0; h && !j->zero && i < H; i++) h[i] = (float)((int)(rnd(&seed) % 2001) - 1000) / 400.0f;
    mtp_state *mt = NULL;
    j->rc = !h || !ho || !lg || !whole || sched_join(j->x, cap, NULL, NULL, &e) ? 1 : 0;
    if (!j->rc) j->rc = mtp_state_new_in(sched_pool(j->x), cap, &mt, &e);
    pthread_barrier_wait(j->go);
    int32_t nx = 5 + j->top;
    int32_t lst[2 * MODEL_TOP_MAX + 2];
    int32_t *list = j->list ? lst : NULL;
    if (!j->rc) j->rc = sched_mtp(j->x, mt, h, &nx, 1, ho, HEAD_DRAFT, 0, lg, j->top, list, &e);
    if (j->zero) memset(ho, 0, sizeof(float) * (size_t)H); /* the head's input, for the reference too */
    if (!j->rc && j->zero)
        j->rc = list ? model_lm_head_list(M, HEAD_DRAFT, ho, 1, lg, j->top, list, &e)
                     : model_lm_head_top(M, HEAD_DRAFT, ho, 1, lg, j->top, &e);
    if (!j->rc) j->rc = model_lm_head(M, HEAD_DRAFT, ho, 1, whole, &e);
    sampler *smp = NULL;
    sampler_dist a, b;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b);
    if (!j->rc) j->rc = sampler_new(V, &smp, &e) || sampler_dist_init(&a, V, &e) || sampler_dist_init(&b, V, &e);
    sampler_params sp = {j->top_k ? 0.6f : 0.0f, 0.95f, j->top_k, 0, 0, 0, 1};
    if (!j->rc)
        j->rc = (list ? sampler_build_top(smp, list, j->top, &sp, &a, &e) : sampler_build(smp, lg, &sp, 0, &a, &e)) ||
                sampler_build(smp, whole, &sp, 0, &b, &e);
    j->same = !j->rc && a.n == b.n && a.n > 0 && !memcmp(a.ids, b.ids, sizeof(int32_t) * (size_t)a.n) &&
              !memcmp(a.probs, b.probs, sizeof(double) * (size_t)a.n);
    if (j->zero && j->same) j->same = a.ids[0] == 0; /* a full tie goes to the lowest id */
    sampler_dist_free(&a), sampler_dist_free(&b);
    sampler_free(smp);
    if (mt) mtp_state_free(mt);
    sched_leave(j->x, cap);
    free(h), free(ho), free(lg), free(whole);
    return NULL;
}

TEST(test_draft_top_rows) {
    /* per configuration: the k each sequence asks for (= its sampler's top_k; 1 = greedy), and which
     * take their row as a list (configuration 2: all of them, so the step's head gives lists;
     * configuration 3: some, so lists are made from the step's rows) */
    const int tops[4][NTOP] = {{1, 5, 20, 64}, {20, 0, 5, 1}, {1, 5, 20, 64}, {20, 5, 1, 64}};
    const int lists[4][NTOP] = {{0, 0, 0, 0}, {0, 0, 0, 0}, {1, 1, 1, 1}, {1, 0, 1, 1}};
    /* both MTP step paths: the head behind the layer (default), and the layer then the heads' own call */
    for (int cfgi = 0; cfgi < 8; cfgi++) {
        sched_config c;
        sched_config_default(&c, NTOP, 16);
        c.wait_ms = 600000; /* every draft row in one merged step */
        c.mtp_head = cfgi < 4;
        sched *x;
        mtplx_err e;
        REQUIRE(sched_new(M, &c, &x, &e) == 0);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, NTOP);
        top_job j[NTOP];
        pthread_t th[NTOP];
        for (int i = 0; i < NTOP; i++) {
            int k = tops[cfgi % 4][i];
            j[i] = (top_job){x, k, k == 1 ? 0 : k ? k : 20, i == NTOP - 1, lists[cfgi % 4][i], &go, 0, 0};
            REQUIRE(pthread_create(&th[i], NULL, top_main, &j[i]) == 0);
        }
        for (int i = 0; i < NTOP; i++) pthread_join(th[i], NULL);
        sched_stats st;
        sched_get_stats(x, &st);
        CHECK_MSG(st.steps == 1, "configuration %d (mtp_head %d): %llu steps, want the one merged draft step",
                  cfgi % 4, c.mtp_head, (unsigned long long)st.steps);
        for (int i = 0; i < NTOP; i++)
            CHECK_MSG(j[i].rc == 0 && j[i].same, "configuration %d (mtp_head %d), sequence %d (top %d, zero row %d): "
                      "rc %d, the draft distribution from the top-k row differs from the whole row's", cfgi % 4,
                      c.mtp_head, i, j[i].top, j[i].zero, j[i].rc);
        pthread_barrier_destroy(&go);
        sched_free(x);
    }
}

/* The policy's acceptance estimate (sched_note_cycle): from a prior toward what the cycles report;
 * positions not drafted lately follow the first position's estimate. A calibration whose budget
 * measures too little is refused and leaves the knee rule. */
TEST(test_accept_estimate) {
    sched_config c;
    sched_config_default(&c, 2, 64);
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    sched_costs k;
    sched_costs_get(x, &k);
    CHECK_MSG(k.accept[0] > 0.74 && k.accept[0] < 0.76 && k.accept[1] < k.accept[0], "prior %g %g", k.accept[0],
              k.accept[1]);
    for (int i = 0; i < 200; i++) sched_note_cycle(x, 1, 1); /* one draft a cycle, always accepted */
    sched_costs_get(x, &k);
    CHECK_MSG(k.accept[0] > 0.95, "after 200 accepted drafts: %g", k.accept[0]);
    CHECK_MSG(k.accept[1] > 0.9 && k.accept[1] <= k.accept[0] && k.accept[2] <= k.accept[1],
              "undrafted positions should follow the first: %g %g %g", k.accept[0], k.accept[1], k.accept[2]);
    for (int i = 0; i < 400; i++) sched_note_cycle(x, 3, i % 2); /* three drafts, half the first accepted */
    sched_costs_get(x, &k);
    CHECK_MSG(k.accept[0] < 0.75 && k.accept[1] < 0.1 && k.accept[2] < 0.1, "after rejections: %g %g %g",
              k.accept[0], k.accept[1], k.accept[2]);
    sched_note_cycle(x, 0, 0); /* an AR cycle reports nothing */
    /* a budget too small for forwards of 1, 2 and 4 rows: refused, the knee rule stays, no page kept */
    CHECK_INT(sched_calibrate(x, 0, &e), MTPLX_ERANGE);
    CHECK(sched_costs_get(x, &k) == 0);
    CHECK_INT(sched_depth_cap(x, 3), 3); /* knee_rows / 1 - 1 >= 3 */
    sched_stats ss;
    sched_get_stats(x, &ss);
    CHECK_INT(ss.pages_used, 0);
    sched_free(x);
}

/* The measured policy does not stay at plain AR on stale evidence: after drafts that all failed it
 * answers 0, yet one call in POLICY_PROBE (32) still drafts 1; and the acceptance estimate follows the
 * recent drafts (about the last 1,024) — with counts kept from the start, 600 accepted drafts after
 * 2,000 rejected ones would leave it at 0.23 — so once the probes are accepted again it drafts again.
 * Fixed costs (sched_costs_set), not a calibration: measured ones may make a draft pay even at
 * acceptance 0 when a 2-row forward times faster than a 1-row one. Trunk 1 + 0.05·R ms, MTP step
 * 0.3 + 0.01·R ms: one sequence drafts 1 when 1 + a > 1.41 / 1.05, i.e. at acceptance a > 0.34. */
TEST(test_policy_recovers) {
    sched_config c;
    sched_config_default(&c, 2, 64);
    sched *x;
    mtplx_err e;
    REQUIRE(sched_new(M, &c, &x, &e) == 0);
    sched_costs k;
    memset(&k, 0, sizeof k);
    for (int R = 1; R <= 512; R *= 2) {
        sched_cost_note(&k.trunk[0], R, 1.0 + 0.05 * R);
        sched_cost_note(&k.mtp, R, 0.3 + 0.01 * R);
    }
    sched_costs_set(x, &k);
    CHECK_INT(sched_depth_cap(x, 1), 1); /* the prior's 0.75 */
    for (int i = 0; i < 2000; i++) sched_note_cycle(x, 3, 0); /* every draft rejected */
    CHECK(sched_costs_get(x, &k) == 1);
    CHECK_MSG(k.accept[0] < 0.05, "after 2000 rejections: %g", k.accept[0]);
    int zero = 0, one = 0;
    for (int i = 0; i < 128; i++) {
        int d = sched_depth_cap(x, 3);
        zero += d == 0, one += d == 1;
    }
    CHECK_MSG(zero == 124 && one == 4, "128 calls at acceptance ~0: %d answered 0, %d answered 1", zero, one);
    for (int i = 0; i < 600; i++) sched_note_cycle(x, 1, 1); /* the probes' drafts accepted */
    sched_costs_get(x, &k);
    CHECK_MSG(k.accept[0] > 0.4, "600 accepted after 2000 rejected: %g", k.accept[0]);
    CHECK_MSG(sched_depth_cap(x, 1) == 1, "acceptance %g: still no drafts", k.accept[0]);
    sched_free(x);
}

int main(void) {
    mtplx_err e;
    /* a CPU chunk other than the default, so that test_config_resolve tells the backend's chunk
     * (be_caps.prefill_rows) from a fixed one; the tests below that need a chunk set their own */
    setenv("MTPLX_PREFILL_ROWS", "256", 0);
    if (model_load(MODEL_DIR, &M, &e)) {
        fprintf(stderr, "%s: %s\n", MODEL_DIR, e.msg);
        return 1;
    }
    RUN(test_batched_equals_solo);
    RUN(test_admission);
    RUN(test_reclaim_after_leave);
    RUN(test_config_resolve);
    RUN(test_cancel_between_prompt_chunks);
    RUN(test_step_trace);
    RUN(test_depth_policy_keeps_greedy_and_history);
    RUN(test_rendezvous_aligns_cycles);
    RUN(test_prompt_history_does_not_hold_verifies);
    RUN(test_long_prompt_does_not_hold_histories);
    RUN(test_fresh_sequence_does_not_hold_steps);
    RUN(test_draft_top_rows);
    RUN(test_accept_estimate);
    RUN(test_policy_recovers);
    model_free(M);
    return TEST_SUMMARY();
}
