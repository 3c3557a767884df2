/* test_batch.c — batch invariance at the model layer (docs/architecture.md, "Batch forward"), bit for
 * bit, on every family's golden checkpoint:
 *   - sequences run together through model_forward_batch (random subsets per forward, prefill
 *     chunks mixed with 1..4-row capturing verify steps, random commits, late joins, early leaves)
 *     give exactly the logits and hiddens each gives alone through model_forward (some sequences
 *     taking their rows as logits_top lists: those of the solo rows);
 *   - MTP rows of several sequences through model_mtp_forward_batch equal model_mtp_forward alone;
 *   - a fork shares pages copy-on-write: both branches continue exactly as unshared copies would,
 *     and the parent's earlier positions are not disturbed by the child's writes;
 *   - the pool's pages all come back when the states are freed, and an exhausted pool is an error,
 *     not a crash;
 *   - threads that fork, write (copy-on-write) and free their states in one pool at once lose no
 *     page (the pool's counts are shared by every thread: a server's sessions end on their own). */
#include <pthread.h>
#include <stdio.h>

#include "fwd_util.h"
#include "test.h"

#define NSEQ 6
#define STEPS 7
#define CAP 96

static const char *k_dirs[] = {"tests/data/goldens/qwen3_5_dense", "tests/data/goldens/qwen3_5_moe",
                               "tests/data/goldens/qwen3_next",    "tests/data/goldens/deepseek_v3",
                               "tests/data/goldens/qwen3_dense",   "tests/data/goldens/llama"};

/* xorshift: the plan's randomness (fixed seed per family, so a failure reproduces). */
#define LIST_K 20 /* logits_top of the sequences that take their rows as lists */

static uint32_t rnd(uint32_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* One step of a sequence's plan: T tokens (step 0 is the prompt), captured when 2..4 rows, then
 * keep of them committed. */
typedef struct {
    int T, capture, keep;
    int32_t tok[24];
} step;

typedef struct {
    step st[STEPS];
    float *logits[STEPS]; /* [T][V] each, the solo run's */
    float *hidden[STEPS]; /* [T][H] */
} plan;

static void plan_make(plan *p, uint32_t *seed, int V, int H) {
    for (int k = 0; k < STEPS; k++) {
        step *s = &p->st[k];
        s->T = k == 0 ? 3 + (int)(rnd(seed) % 20) : 1 + (int)(rnd(seed) % 4);
        s->capture = k > 0 && s->T > 1;
        s->keep = s->capture ? 1 + (int)(rnd(seed) % s->T) : s->T;
        for (int t = 0; t < s->T; t++) s->tok[t] = (int32_t)(rnd(seed) % (uint32_t)V);
        p->logits[k] = malloc(sizeof(float) * s->T * V);
        p->hidden[k] = malloc(sizeof(float) * s->T * H);
    }
}

static void plan_free(plan *p) {
    for (int k = 0; k < STEPS; k++) free(p->logits[k]), free(p->hidden[k]);
}

/* The plan alone, through model_forward on a standalone state. */
static int plan_solo(const mtplx_model *m, plan *p, mtplx_err *err) {
    model_state *s;
    int rc = model_state_new(m, CAP, 4, &s, err);
    for (int k = 0; !rc && k < STEPS; k++) {
        step *q = &p->st[k];
        fwd_request r = {p->logits[k], 0, p->hidden[k], q->capture};
        rc = model_forward(m, s, q->tok, q->T, &r, err);
        if (!rc && q->capture) rc = model_state_commit(s, q->keep, err);
    }
    model_state_free(s);
    return rc;
}

static void batch_family(const char *dir) {
    mtplx_err err = {0};
    mtplx_model *m;
    if (model_load(dir, &m, &err)) {
        T_FAIL("%s: %s", dir, err.msg);
        return;
    }
    const model_config *c = model_config_of(m);
    int V = c->vocab_size, H = c->hidden_size;
    uint32_t seed = 0x9e3779b9u ^ (uint32_t)strlen(dir);
    plan p[NSEQ];
    for (int i = 0; i < NSEQ; i++) {
        plan_make(&p[i], &seed, V, H);
        REQUIRE(plan_solo(m, &p[i], &err) == 0);
    }
    seq_pool *pool;
    model_batch *b;
    REQUIRE(seq_pool_new(m, NSEQ * ((CAP + model_kv_page_size() - 1) / model_kv_page_size()), &pool, &err) == 0);
    REQUIRE(model_batch_new(m, 64, CAP, &b, &err) == 0);
    model_state *s[NSEQ] = {0};
    int next[NSEQ] = {0}, join[NSEQ], done = 0, forwards = 0, multi = 0;
    for (int i = 0; i < NSEQ; i++) join[i] = i < 2 ? 0 : (int)(rnd(&seed) % 6); /* late joins */
    float *lg = malloc(sizeof(float) * 24 * V * NSEQ), *hd = malloc(sizeof(float) * 24 * H * NSEQ);
    int32_t *ls = malloc(sizeof(int32_t) * 24 * (2 * LIST_K + 2) * NSEQ);
    int lists = 0;
    for (int tick = 0; done < NSEQ && tick < 200; tick++) {
        fwd_seq q[NSEQ];
        int who[NSEQ], n = 0;
        for (int i = 0; i < NSEQ; i++) {
            if (next[i] == STEPS || tick < join[i] || rnd(&seed) % 10 < 3) continue; /* idle this forward */
            if (!s[i]) REQUIRE(model_state_new_in(pool, CAP, 4, &s[i], &err) == 0);
            step *t = &p[i].st[next[i]];
            fwd_request r = {lg + (size_t)n * 24 * V, 0, hd + (size_t)n * 24 * H, t->capture};
            if (i % 3 && V > LIST_K) /* rows as logits_top lists: runs of list and row sequences mixed */
                r.logits_top = LIST_K, r.top_out = ls + (size_t)n * 24 * (2 * LIST_K + 2);
            q[n] = (fwd_seq){s[i], t->tok, t->T, r};
            who[n++] = i;
        }
        if (!n) continue;
        REQUIRE(model_forward_batch(m, b, q, n, &err) == 0);
        forwards++, multi += n > 1;
        for (int j = 0; j < n; j++) {
            int i = who[j], k = next[i];
            step *t = &p[i].st[k];
            if (q[j].req.top_out) {
                for (int r = 0; r < t->T; r++) {
                    int32_t want[2 * LIST_K + 2];
                    model_logits_list(p[i].logits[k] + (size_t)r * V, V, LIST_K, want);
                    CHECK_MSG(!memcmp(q[j].req.top_out + (size_t)r * (2 * LIST_K + 2), want, sizeof want),
                              "%s: seq %d step %d row %d (batch of %d): logits list differs from solo's row", dir, i,
                              k, r, n);
                }
                lists++;
            } else
                CHECK_MSG(!memcmp(q[j].req.logits, p[i].logits[k], sizeof(float) * t->T * V),
                          "%s: seq %d step %d (%d rows, batch of %d): logits differ from solo", dir, i, k, t->T, n);
            CHECK_MSG(!memcmp(q[j].req.hidden, p[i].hidden[k], sizeof(float) * t->T * H),
                      "%s: seq %d step %d: hidden differs from solo", dir, i, k);
            if (t->capture) REQUIRE(model_state_commit(s[i], t->keep, &err) == 0);
            if (++next[i] == STEPS || (i == NSEQ - 1 && next[i] == STEPS - 2)) { /* one leaves early */
                model_state_free(s[i]);
                s[i] = NULL;
                next[i] = STEPS;
                done++;
            }
        }
    }
    CHECK_MSG(done == NSEQ && multi > 0, "%s: %d of %d sequences finished, %d of %d forwards batched", dir, done,
              NSEQ, multi, forwards);
    int used, total;
    seq_pool_pages(pool, &used, &total);
    CHECK_MSG(used == 0, "%s: %d of %d pages still held after every state was freed", dir, used, total);
    CHECK_MSG(lists > 0 || V <= LIST_K, "%s: no sequence took its rows as lists", dir);
    free(lg), free(hd), free(ls);
    for (int i = 0; i < NSEQ; i++) plan_free(&p[i]);
    model_batch_free(b);
    seq_pool_free(pool);
    model_free(m);
}

TEST(test_batch_equals_solo_every_family) {
    for (size_t i = 0; i < sizeof k_dirs / sizeof *k_dirs; i++) batch_family(k_dirs[i]);
}

/* model_mtp_forward_batch_head over the same rows as mtp_family's (solo: each sequence's output rows
 * alone) in three calls: the output rows equal the solo rows, and the head's output equals
 * model_lm_head_list / model_lm_head_top over the solo rows it picked. Call 0 takes lists of rows that
 * are not next to each other (the device gathers them), call 1 whole rows, call 2 top rows from rows
 * that lie together (one row a sequence). */
static void mtp_head_family(const char *dir, const mtplx_model *m, seq_pool *pool, model_batch *b, int N,
                            const float *hid, const int32_t (*tok)[8], const float *solo) {
    mtplx_err err = {0};
    int H = model_config_of(m)->hidden_size, V = model_config_of(m)->vocab_size, K = V > LIST_K ? LIST_K : V - 1;
    const int Ts[3][3] = {{4, 1, 1}, {1, 2, 2}, {1, 1, 1}}; /* mtp_family's 6, 4 and 4 rows */
    const int lrows[3][3] = {{2, 0, 0}, {0, -1, 1}, {0, 0, -1}};
    const head_kind which[3] = {HEAD_MTP, HEAD_TARGET, HEAD_DRAFT};
    const int tops[3] = {K, 0, K};
    float *got = malloc(sizeof(float) * 8 * H * N), *lg = malloc(sizeof(float) * 3 * V), *ref = malloc(sizeof(float) * 3 * V);
    float *x = malloc(sizeof(float) * 3 * H);
    int32_t ls[3 * (2 * MODEL_TOP_MAX + 2)], rl[3 * (2 * MODEL_TOP_MAX + 2)];
    mtp_state *s[3];
    for (int i = 0; i < N; i++) REQUIRE(mtp_state_new_in(pool, 32, &s[i], &err) == 0);
    int off[3] = {0, 0, 0};
    for (int call = 0; call < 3; call++) {
        mtp_seq q[3];
        int k = 0;
        for (int i = 0; i < N; i++) {
            q[i] = (mtp_seq){s[i], hid + ((size_t)i * 8 + off[i]) * H, tok[i] + off[i], Ts[call][i],
                             got + ((size_t)i * 8 + off[i]) * H};
            int lr = lrows[call][i];
            if (lr >= 0) memcpy(x + (size_t)k++ * H, solo + ((size_t)i * 8 + off[i] + lr) * H, sizeof(float) * H);
            off[i] += Ts[call][i];
        }
        mtp_batch_head h = {which[call], lrows[call], tops[call], lg, call == 0 ? ls : NULL};
        REQUIRE(model_mtp_forward_batch_head(m, b, q, N, &h, &err) == 0);
        if (call == 0) {
            REQUIRE(model_lm_head_list(m, which[call], x, k, ref, K, rl, &err) == 0);
            CHECK_MSG(!memcmp(ls, rl, sizeof(int32_t) * (size_t)k * (2 * K + 2)), "%s: batched MTP head lists differ", dir);
        } else {
            REQUIRE(model_lm_head_top(m, which[call], x, k, ref, tops[call], &err) == 0);
            CHECK_MSG(!memcmp(lg, ref, sizeof(float) * (size_t)k * V), "%s: batched MTP head rows differ (call %d)", dir,
                      call);
        }
    }
    for (int i = 0; i < N; i++)
        CHECK_MSG(!memcmp(got + (size_t)i * 8 * H, solo + (size_t)i * 8 * H, sizeof(float) * off[i] * H),
                  "%s: MTP sequence %d's rows differ with the head behind them", dir, i);
    const int bad = 3; /* a logits row past the sequence's rows: refused before anything runs */
    mtp_seq q1 = {s[0], hid, tok[0], 2, got};
    mtp_batch_head hb = {HEAD_MTP, &bad, 0, lg, NULL};
    int len = mtp_state_len(s[0]);
    CHECK_INT(model_mtp_forward_batch_head(m, b, &q1, 1, &hb, &err), MTPLX_EINVAL);
    CHECK_INT(mtp_state_len(s[0]), len);
    for (int i = 0; i < N; i++) mtp_state_free(s[i]);
    free(got), free(lg), free(ref), free(x);
}

/* MTP rows of three sequences in one batch call equal each one's rows alone. */
static void mtp_family(const char *dir) {
    mtplx_err err = {0};
    mtplx_model *m;
    REQUIRE(model_load(dir, &m, &err) == 0);
    if (!model_has_mtp(m)) {
        model_free(m);
        return;
    }
    int H = model_config_of(m)->hidden_size, V = model_config_of(m)->vocab_size;
    enum { N = 3 };
    const int rows[N][2] = {{5, 1}, {1, 3}, {2, 2}}; /* two calls per sequence */
    uint32_t seed = 77;
    float *hid = malloc(sizeof(float) * 8 * H * N), *solo = malloc(sizeof(float) * 8 * H * N),
          *got = malloc(sizeof(float) * 8 * H * N);
    int32_t tok[N][8];
    for (int i = 0; i < 8 * H * N; i++) hid[i] = (float)((int)(rnd(&seed) % 2001) - 1000) / 500.f;
    for (int i = 0; i < N; i++)
        for (int t = 0; t < 8; t++) tok[i][t] = (int32_t)(rnd(&seed) % (uint32_t)V);
    for (int i = 0; i < N; i++) {
        mtp_state *s;
        REQUIRE(mtp_state_new(m, 32, &s, &err) == 0);
        const float *h = hid + (size_t)i * 8 * H;
        REQUIRE(model_mtp_forward(m, s, h, tok[i], rows[i][0], solo + (size_t)i * 8 * H, &err) == 0);
        REQUIRE(model_mtp_forward(m, s, h + (size_t)rows[i][0] * H, tok[i] + rows[i][0], rows[i][1],
                                  solo + ((size_t)i * 8 + rows[i][0]) * H, &err) == 0);
        mtp_state_free(s);
    }
    seq_pool *pool;
    model_batch *b;
    REQUIRE(seq_pool_new(m, 8, &pool, &err) == 0);
    REQUIRE(model_batch_new(m, 16, 32, &b, &err) == 0);
    mtp_state *s[N];
    for (int i = 0; i < N; i++) REQUIRE(mtp_state_new_in(pool, 32, &s[i], &err) == 0);
    for (int call = 0; call < 2; call++) {
        mtp_seq q[N];
        for (int i = 0; i < N; i++) {
            int off = call ? rows[i][0] : 0;
            q[i] = (mtp_seq){s[i], hid + ((size_t)i * 8 + off) * H, tok[i] + off, rows[i][call],
                             got + ((size_t)i * 8 + off) * H};
        }
        REQUIRE(model_mtp_forward_batch(m, b, q, N, &err) == 0);
    }
    for (int i = 0; i < N; i++)
        CHECK_MSG(!memcmp(got + (size_t)i * 8 * H, solo + (size_t)i * 8 * H, sizeof(float) * (rows[i][0] + rows[i][1]) * H),
                  "%s: MTP sequence %d differs in a batch", dir, i);
    for (int i = 0; i < N; i++) mtp_state_free(s[i]);
    mtp_head_family(dir, m, pool, b, N, hid, (const int32_t (*)[8])tok, solo);
    free(hid), free(solo), free(got);
    model_batch_free(b);
    seq_pool_free(pool);
    model_free(m);
}

TEST(test_mtp_batch_equals_solo) {
    for (size_t i = 0; i < sizeof k_dirs / sizeof *k_dirs; i++) mtp_family(k_dirs[i]);
    mtp_family("models/qwen35-tiny-code");
}

/* Fork at a position inside a page (the second: NPRE = a page and 5): parent and child continue with
 * different tokens (the parent first, then the child, then the parent again and both together); each
 * equals a standalone state fed the same tokens, so the child's writes never reach the parent's pages
 * nor the reverse. */
TEST(test_fork_copy_on_write) {
    mtplx_err err = {0};
    mtplx_model *m;
    REQUIRE(model_load(k_dirs[0], &m, &err) == 0);
    int V = model_config_of(m)->vocab_size, P = model_kv_page_size(), NPRE = P + 5, FCAP = 4 * P;
    int32_t pre[256 + 5], a[6], c[5];
    REQUIRE(NPRE <= (int)(sizeof pre / sizeof *pre));
    uint32_t seed = 5;
    for (int i = 0; i < NPRE; i++) pre[i] = (int32_t)(rnd(&seed) % (uint32_t)V);
    for (int i = 0; i < 5; i++) a[i] = (int32_t)(rnd(&seed) % (uint32_t)V), c[i] = (int32_t)(rnd(&seed) % (uint32_t)V);
    a[5] = c[0];
    float *ref_a = malloc(sizeof(float) * 6 * V), *ref_c = malloc(sizeof(float) * 5 * V);
    float *got_a = malloc(sizeof(float) * 6 * V), *got_c = malloc(sizeof(float) * 5 * V);
    model_state *r;
    REQUIRE(model_state_new(m, FCAP, 4, &r, &err) == 0);
    fwd_request q0 = {0};
    REQUIRE(model_forward(m, r, pre, NPRE, &q0, &err) == 0);
    fwd_request qa = {ref_a, 0, NULL, 0};
    REQUIRE(model_forward(m, r, a, 6, &qa, &err) == 0);
    model_state_reset(r);
    REQUIRE(model_forward(m, r, pre, NPRE, &q0, &err) == 0);
    fwd_request qc = {ref_c, 0, NULL, 0};
    REQUIRE(model_forward(m, r, c, 5, &qc, &err) == 0);
    model_state_free(r);

    seq_pool *pool;
    model_batch *b;
    REQUIRE(seq_pool_new(m, 12, &pool, &err) == 0);
    REQUIRE(model_batch_new(m, NPRE > 32 ? NPRE : 32, FCAP, &b, &err) == 0);
    model_state *p, *k;
    REQUIRE(model_state_new_in(pool, FCAP, 4, &p, &err) == 0);
    REQUIRE(model_state_new_in(pool, FCAP, 4, &k, &err) == 0);
    fwd_seq s0 = {p, pre, NPRE, {0}};
    REQUIRE(model_forward_batch(m, b, &s0, 1, &err) == 0);
    int used0, total;
    seq_pool_pages(pool, &used0, &total);
    REQUIRE(model_state_fork(k, p, &err) == 0);
    int used1;
    seq_pool_pages(pool, &used1, &total);
    CHECK_MSG(used1 == used0, "fork took %d pages; it should share all", used1 - used0);
    fwd_seq s1 = {p, a, 3, {got_a, 0, NULL, 0}};
    REQUIRE(model_forward_batch(m, b, &s1, 1, &err) == 0);
    fwd_seq s2 = {k, c, 4, {got_c, 0, NULL, 0}};
    REQUIRE(model_forward_batch(m, b, &s2, 1, &err) == 0);
    fwd_seq s3[2] = {{k, c + 4, 1, {got_c + (size_t)4 * V, 0, NULL, 0}}, {p, a + 3, 3, {got_a + (size_t)3 * V, 0, NULL, 0}}};
    REQUIRE(model_forward_batch(m, b, s3, 2, &err) == 0);
    CHECK_MSG(!memcmp(got_a, ref_a, sizeof(float) * 6 * V), "the parent's continuation differs after a fork");
    CHECK_MSG(!memcmp(got_c, ref_c, sizeof(float) * 5 * V), "the child's continuation differs after a fork");
    model_state_free(k);
    model_state_free(p);
    /* a pool of one page: the second page is refused with an error */
    seq_pool *tiny;
    REQUIRE(seq_pool_new(m, 1, &tiny, &err) == 0);
    REQUIRE(model_state_new_in(tiny, FCAP, 4, &p, &err) == 0);
    fwd_seq s4 = {p, pre, NPRE, {0}};
    CHECK(model_forward_batch(m, b, &s4, 1, &err) == MTPLX_ENOMEM);
    CHECK_MSG(strstr(err.msg, "KV cache full") != NULL, "exhausted pool: %s", err.msg);
    model_state_free(p);
    seq_pool_free(tiny);
    free(ref_a), free(ref_c), free(got_a), free(got_c);
    model_batch_free(b);
    seq_pool_free(pool);
    model_free(m);
}

/* Threads sharing one pool: each forks the parent (sharing its pages) and resets (every page
 * dropped), ROUNDS times, all at once; every WRITE_EVERY rounds it first writes one row into the
 * shared last page (copy-on-write: a page taken, one dropped). As in the scheduler, forwards take turns (`exec`: the backend runs one
 * forward at a time) while forks and resets do not. Counts updated without the pool's lock lose
 * increments, and pages stay held (or are freed twice) at the end. */
#define POOL_THREADS 4
#define ROUNDS 100000
#define WRITE_EVERY 500

typedef struct {
    mtplx_model *m;
    seq_pool *pool;
    model_state *parent;
    pthread_mutex_t *exec;
    int rc;
} pool_job;

static void *pool_churn(void *arg) {
    pool_job *j = arg;
    mtplx_err err = {0};
    model_batch *b = NULL;
    model_state *k = NULL;
    int32_t tok = 7;
    j->rc = model_batch_new(j->m, 4, 64, &b, &err) || model_state_new_in(j->pool, 64, 4, &k, &err);
    for (int r = 0; !j->rc && r < ROUNDS; r++) {
        fwd_seq one = {k, &tok, 1, {0}};
        j->rc = model_state_fork(k, j->parent, &err);
        if (!j->rc && r % WRITE_EVERY == 0) {
            pthread_mutex_lock(j->exec);
            j->rc = model_forward_batch(j->m, b, &one, 1, &err);
            pthread_mutex_unlock(j->exec);
        }
        model_state_reset(k);
    }
    model_state_free(k);
    model_batch_free(b);
    return NULL;
}

TEST(test_pool_shared_by_threads) {
    mtplx_err err = {0};
    mtplx_model *m;
    REQUIRE(model_load(k_dirs[0], &m, &err) == 0);
    seq_pool *pool;
    model_batch *b;
    model_state *parent;
    REQUIRE(seq_pool_new(m, 64, &pool, &err) == 0);
    REQUIRE(model_batch_new(m, 32, 64, &b, &err) == 0);
    REQUIRE(model_state_new_in(pool, 64, 4, &parent, &err) == 0);
    int32_t pre[21] = {0};
    for (int i = 0; i < 21; i++) pre[i] = 3 + 5 * i;
    fwd_seq s0 = {parent, pre, 21, {0}};
    REQUIRE(model_forward_batch(m, b, &s0, 1, &err) == 0);
    int used0, total;
    seq_pool_pages(pool, &used0, &total);
    pool_job j[POOL_THREADS];
    pthread_t th[POOL_THREADS];
    pthread_mutex_t exec = PTHREAD_MUTEX_INITIALIZER;
    for (int i = 0; i < POOL_THREADS; i++) {
        j[i] = (pool_job){m, pool, parent, &exec, 0};
        REQUIRE(pthread_create(&th[i], NULL, pool_churn, &j[i]) == 0);
    }
    for (int i = 0; i < POOL_THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < POOL_THREADS; i++) CHECK_MSG(j[i].rc == 0, "thread %d failed", i);
    int used1;
    seq_pool_pages(pool, &used1, &total);
    CHECK_MSG(used1 == used0, "%d pages held after the threads freed everything; the parent holds %d", used1, used0);
    model_state_free(parent);
    seq_pool_pages(pool, &used1, &total);
    CHECK_MSG(used1 == 0, "%d of %d pages still held after every state was freed", used1, total);
    model_batch_free(b);
    seq_pool_free(pool);
    model_free(m);
}

int main(void) {
    RUN(test_batch_equals_solo_every_family);
    RUN(test_mtp_batch_equals_solo);
    RUN(test_fork_copy_on_write);
    RUN(test_pool_shared_by_threads);
    return TEST_SUMMARY();
}
