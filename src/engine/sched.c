/* sched.c — continuous batching (sched.h, docs/architecture.md "The scheduler").
 *
 * A sequence's thread that needs the model queues a request ("sub") and waits. Whoever finds the
 * queue ready — every running sequence is waiting (a sequence counts from its first request: until then it
 * is setting up on the host), or the oldest request has waited wait_ms —
 * becomes the executor for one step: it takes the queued requests in arrival order while they fit
 * the row budget, runs one merged trunk forward and one merged MTP forward (plus the draft heads)
 * with the model to itself, marks them done and wakes their owners. Requests that did not fit keep
 * their place for the next step. There is no scheduler thread: the executor is always a thread
 * that is waiting anyway. */
#include "sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../backend/device.h"
#include "../base/clock.h"
#include "../base/mem.h"
#include "generate.h"

typedef enum { SUB_TRUNK = 0, SUB_MTP = 1 } sub_kind;

/* One queued request: a sequence's rows for the next merged forward. */
typedef struct sub {
    sub_kind kind;
    fwd_seq f;          /* SUB_TRUNK */
    mtp_seq q;          /* SUB_MTP */
    head_kind head;     /* SUB_MTP with logits: the head, and which row's logits */
    int logits_row;
    float *logits;      /* [V] host, or NULL */
    int top;            /* with logits: model_lm_head_top's k (0: the whole row) */
    int32_t *list;      /* with logits and top > 0, or NULL: the row's logits_top list goes here instead
                           ([2·top + 2], model_lm_head_list; logits is scratch) */
    int rows;
    int prompt;         /* 1: rows of a prompt (a chunk of it), 0: decoding rows */
    double t;           /* clock_now() when queued */
    int done, rc;
    mtplx_err err;
    pthread_cond_t cv;  /* its owner waits here: done, or it heads the queue and may run the step */
    struct sub *next;
} sub;

struct sched {
    const mtplx_model *m;
    sched_config cfg;
    seq_pool *pool;
    model_batch *batch;
    int V, H;
    float *head_in;          /* [max_batch_rows][H] hidden rows gathered for the draft heads */
    float *head_out;         /* [max_batch_rows][V] their logits */
    int32_t *head_tops;      /* [max_batch_rows][2·MODEL_TOP_MAX + 2] their logits_top lists */
    pthread_mutex_t mu;      /* everything below */
    pthread_cond_t cv;       /* admission: sequences left (slots and pages freed) */
    pthread_mutex_t exec;    /* the model: merged forwards and per-sequence work (sched_lock) */
    sub *head, *tail;        /* queued requests, oldest first */
    int n_pending;           /* queued requests (one per waiting sequence) */
    int n_active, n_waiting; /* joined sequences; sequences waiting to join */
    int n_fresh;             /* joined sequences that have not submitted yet (setting up on the host:
                                scratch, states, a cache restore) */
    double fresh_until;      /* clock_now() after which steps stop waiting for them: wait_ms after the
                                latest join (a burst of requests still shares its first steps) */
    int n_prefill;           /* joined sequences inside a prompt (trunk or MTP history) forward */
    int pages_reserved;
    uint64_t n_left;         /* sched_leave calls so far: a join's reclaim count is stale after one */
    int executing;           /* 1 while some thread runs a step */
    double t_step;           /* clock_now() when the last step ended (0: none yet) */
    int last_trunk;          /* 1: the last step ran trunk rows (the gap after it is a cycle's, costs.cycle_ms) */
    int (*reclaim)(void *user, int max_pages); /* sched_set_reclaim, or NULL */
    void *reclaim_user;
    uint64_t forwards, rows, seq_parts; /* counters, under exec */
    FILE *trace;             /* cfg.trace_path opened, or NULL; written by the executing thread only */
    double t0;               /* clock_now() at creation: the trace's time origin */
    uint64_t steps, trunk_forwards, late_steps;
    double kind_ms[2];       /* time inside the steps' trunk / MTP forwards (heads included), ms */
    double gap_ms;           /* time from a step's end to the next one's start, ms */
    /* the depth policy's cost model (sched_cost.h), under mu; used once sched_calibrate ran */
    int costs_on;
    sched_costs costs;
    double decode_rows;      /* decoding (not prompt) rows of the recent trunk steps, moving average */
    /* drafts made / accepted at each position, each older one weighing (1 - 1/ACCEPT_WINDOW) less */
    double tried[GEN_MAX_DEPTH], acc[GEN_MAX_DEPTH];
    unsigned probe;          /* sched_depth_cap calls answered 0 by the measured policy (POLICY_PROBE) */
};

static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

void sched_config_default(sched_config *c, int max_seqs, int capacity) {
    memset(c, 0, sizeof *c);
    c->max_seqs = max_seqs;
    int cpu = !strcmp(be_device_resolved(), "cpu");
    c->capacity = capacity;
    c->wait_ms = 2.0;
    /* MTPLX_SCHED_ALIGN=0: the scheduler before session 6 (every queued request in every step), for
     * side-by-side measurements (bench/batching.md, "Session 6") */
    const char *al = getenv("MTPLX_SCHED_ALIGN");
    c->align_phases = !(al && !strcmp(al, "0"));
    const char *mh = getenv("MTPLX_SCHED_MTP_HEAD"); /* 0: the two-call MTP step, for comparisons */
    c->mtp_head = !(mh && !strcmp(mh, "0"));
    const char *sp = getenv("MTPLX_SCHED_SPIN_US"); /* 0 (default): sleep until woken */
    c->spin_us = sp ? atof(sp) : 0;
    if (!(c->spin_us > 0)) c->spin_us = 0;
    if (c->spin_us > 1000) c->spin_us = 1000;
    const char *tr = getenv("MTPLX_SCHED_TRACE"); /* a file: one line per step (sched.h, trace_path) */
    c->trace_path = tr && *tr ? tr : NULL;
    /* bench/batching.md: on a 2-core Zen 5, 8 streams run fastest as AR steps; on the H200, 8 and 16
     * streams ran 12-47% faster when every stream kept its MTP depth (knee 64 against 8) */
    c->knee_rows = cpu ? 8 : 64;
}

void sched_config_resolve(sched_config *c, const mtplx_model *m) {
    /* a prompt read while nobody decodes: the backend's prefill chunk (be_caps.prefill_rows: 512 rows
     * on the CPU and on CUDA unless MTPLX_PREFILL_ROWS / MTPLX_CUDA_PREFILL_ROWS say otherwise). On the
     * CPU a MoE layer's routed experts then meet ~16 of its rows each instead of ~2 (a 35B-A3B shape's
     * 3,167-token prompt through serve: 13.0 s at 64, 10.5 s at 512; bench/zen.md "Session 25"); on
     * the GPU the many-row GEMM reads each weight once per chunk (bench/cuda.md "Session 26") */
    if (c->prefill_chunk <= 0) c->prefill_chunk = model_prefill_rows(m);
    if (c->max_batch_rows <= 0)
        c->max_batch_rows = imax(imax(128, c->prefill_chunk), imin(c->max_seqs, BATCH_SEQS_MAX) * (GEN_MAX_DEPTH + 1));
}

int sched_new(const mtplx_model *m, const sched_config *cfg, sched **out, mtplx_err *err) {
    *out = NULL;
    sched_config cr = *cfg, *c = &cr;
    sched_config_resolve(c, m);
    if (c->max_seqs < 1 || c->max_seqs > BATCH_SEQS_MAX)
        return err_set(err, MTPLX_EINVAL, "max sequences %d outside [1, %d]", c->max_seqs, BATCH_SEQS_MAX);
    if (c->capacity < 1 || c->prefill_chunk < 1 || c->max_batch_rows < imax(c->prefill_chunk, GEN_MAX_DEPTH + 1))
        return err_set(err, MTPLX_EINVAL,
                       "batch rows %d must cover a prefill chunk (%d) and a verify (%d rows); capacity %d",
                       c->max_batch_rows, c->prefill_chunk, GEN_MAX_DEPTH + 1, c->capacity);
    sched *s = mem_zalloc(1, sizeof *s, "scheduler", err);
    if (!s) return MTPLX_ENOMEM;
    s->m = m;
    s->cfg = *c;
    int P = model_kv_page_size();
    if (s->cfg.kv_pages <= 0) s->cfg.kv_pages = c->max_seqs * ((c->capacity + P - 1) / P);
    s->V = model_config_of(m)->vocab_size;
    s->H = model_config_of(m)->hidden_size;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_mutex_init(&s->exec, NULL);
    s->t0 = clock_now();
    int rc = seq_pool_new(m, s->cfg.kv_pages, &s->pool, err);
    if (!rc && c->trace_path) {
        s->trace = fopen(c->trace_path, "w");
        if (!s->trace) rc = err_set(err, MTPLX_EIO, "scheduler trace %s: %s", c->trace_path, strerror(errno));
        else {
            setvbuf(s->trace, NULL, _IOLBF, 0); /* each step's line is on disk when the step ends */
            fprintf(s->trace, "# t_ms gap_ms lock_ms | trunk seqs rows prompt_rows ms | mtp seqs rows prompt_rows ms "
                              "| running waiting\n# t_ms from clock_now() = %.3f ms\n", s->t0 * 1e3);
        }
    }
    if (!rc) rc = model_batch_new(m, s->cfg.max_batch_rows, s->cfg.capacity, &s->batch, err);
    if (!rc) {
        s->head_in = mem_aligned((size_t)s->cfg.max_batch_rows * s->H * sizeof(float), "draft head rows", err);
        s->head_out = mem_aligned((size_t)s->cfg.max_batch_rows * s->V * sizeof(float), "draft head logits", err);
        s->head_tops = mem_alloc((size_t)s->cfg.max_batch_rows * (2 * MODEL_TOP_MAX + 2), sizeof(int32_t),
                                 "draft head lists", err);
        if (!s->head_in || !s->head_out || !s->head_tops) rc = MTPLX_ENOMEM;
    }
    if (rc) {
        sched_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void sched_free(sched *s) {
    if (!s) return;
    model_batch_free(s->batch);
    seq_pool_free(s->pool);
    free(s->head_in);
    free(s->head_out);
    free(s->head_tops);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->exec);
    if (s->trace) fclose(s->trace);
    free(s);
}

seq_pool *sched_pool(sched *s) { return s->pool; }
const sched_config *sched_config_of(const sched *s) { return &s->cfg; }
void sched_lock(sched *s) { pthread_mutex_lock(&s->exec); }
void sched_unlock(sched *s) { pthread_mutex_unlock(&s->exec); }

static int pages_for(int positions) {
    int P = model_kv_page_size();
    return (positions + P - 1) / P;
}

/* ------------------------------------------------------------------ admission */

static void deadline_in(struct timespec *ts, double seconds) {
    clock_gettime(CLOCK_REALTIME, ts);
    long ns = ts->tv_nsec + (long)(seconds * 1e9);
    ts->tv_sec += ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
}

/* The cancel check of the sequence this thread joined (sched_join sets it, sched_leave clears it):
 * a generation keeps its whole decode loop on the thread that joined (docs/architecture.md, "The
 * scheduler"), so sched_forward / sched_mtp poll it between the chunks of a prompt, and a hang-up or
 * a shutdown's cancel does not wait for a long prefill to end. */
static _Thread_local struct {
    int (*fn)(void *user);
    void *user;
} tl_cancel;
static _Thread_local sched *tl_fresh; /* the sched this thread joined and has not submitted to yet */

/* This thread's sequence submits: it is no longer fresh. Called with mu held. */
static void fresh_done(sched *s) {
    if (tl_fresh != s) return;
    tl_fresh = NULL;
    s->n_fresh--;
}

/* 1 when every joined sequence has a request queued, not counting those that joined more than wait_ms
 * ago and have not submitted yet: the step need wait no longer. A sequence setting up for milliseconds
 * (a GPU thread's first scratch, a long prompt's buffers) otherwise made every step wait wait_ms for it,
 * a 2 ms gap per step in every other stream (bench/batching.md "Session 27"). Called with mu held. */
static int all_queued(const sched *s) {
    int fresh = s->n_fresh > 0 && clock_now() >= s->fresh_until ? s->n_fresh : 0;
    return s->n_pending >= s->n_active - fresh;
}

/* 1 when the joined sequence's cancel check says stop. */
static int joined_cancelled(void) { return tl_cancel.fn && tl_cancel.fn(tl_cancel.user); }

int sched_join(sched *s, int positions, int (*cancelled)(void *user), void *user, mtplx_err *err) {
    int pages = pages_for(positions);
    if (positions > s->cfg.capacity)
        return err_set(err, MTPLX_ERANGE, "the request needs %d positions; a sequence holds at most %d (--ctx)",
                       positions, s->cfg.capacity);
    if (pages > s->cfg.kv_pages)
        return err_set(err, MTPLX_ERANGE, "the request needs %d KV pages; the pool has %d (--kv-pages)", pages,
                       s->cfg.kv_pages);
    pthread_mutex_lock(&s->mu);
    s->n_waiting++;
    for (;;) {
        int held = 0;
        if (s->reclaim && s->n_active < s->cfg.max_seqs) { /* pages a cache holds count against the budget */
            int room = s->cfg.kv_pages - s->pages_reserved - pages;
            uint64_t left = s->n_left;
            pthread_mutex_unlock(&s->mu);
            pthread_mutex_lock(&s->exec);
            held = s->reclaim(s->reclaim_user, room > 0 ? room : 0);
            pthread_mutex_unlock(&s->exec);
            pthread_mutex_lock(&s->mu);
            /* a sequence that left meanwhile may have stored its pages in the cache after held was
             * counted, and its reservation no longer covers them: count again */
            if (s->n_left != left) continue;
        }
        if (s->n_active < s->cfg.max_seqs && s->pages_reserved + pages + held <= s->cfg.kv_pages) break;
        if (cancelled && cancelled(user)) {
            s->n_waiting--;
            pthread_mutex_unlock(&s->mu);
            return err_set(err, MTPLX_ECANCELED, "cancelled while waiting for a sequence slot");
        }
        struct timespec ts;
        deadline_in(&ts, 0.05);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
    }
    s->n_waiting--;
    s->n_active++;
    s->n_fresh++;
    tl_fresh = s;
    double until = clock_now() + s->cfg.wait_ms / 1000.0;
    if (until > s->fresh_until) s->fresh_until = until;
    s->pages_reserved += pages;
    pthread_mutex_unlock(&s->mu);
    /* this thread may run merged forwards for everyone: their scratch must not be allocated then */
    int rc = model_reserve_thread(s->m, s->cfg.max_batch_rows, err);
    if (rc) sched_leave(s, positions);
    else tl_cancel.fn = cancelled, tl_cancel.user = user;
    return rc;
}

void sched_set_reclaim(sched *s, int (*reclaim)(void *user, int max_pages), void *user) {
    pthread_mutex_lock(&s->mu);
    s->reclaim = reclaim;
    s->reclaim_user = user;
    pthread_mutex_unlock(&s->mu);
}

/* Wake the owner of the oldest queued request, who decides whether to run a step now (everyone
 * waits, or its deadline passed) or to wait on. Waking one owner, not every waiting thread, keeps a
 * step's wake-ups at one per request: with many sequences a broadcast per request cost a storm of
 * futex wake-ups that grew with the square of the sequences. Called with mu held. */
static void wake_head(sched *s) {
    if (s->head) pthread_cond_signal(&s->head->cv);
}

void sched_leave(sched *s, int positions) {
    tl_cancel.fn = NULL, tl_cancel.user = NULL;
    pthread_mutex_lock(&s->mu);
    fresh_done(s);
    s->n_active--;
    s->pages_reserved -= pages_for(positions);
    s->n_left++;
    pthread_cond_broadcast(&s->cv);
    wake_head(s); /* one fewer sequence to wait for: the queue may be ready now */
    pthread_mutex_unlock(&s->mu);
}

int sched_idle(sched *s) {
    pthread_mutex_lock(&s->mu);
    int idle = s->n_active == 0 && s->n_waiting == 0;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

/* ------------------------------------------------------------------ one step */

/* The kind the next step runs: MTP when a decoding sequence's MTP request (a draft) is queued; else,
 * with both a trunk request and a prompt's MTP history queued, the kind the last step did not run;
 * else the kind that is queued. A step runs one kind only, and the
 * draft steps go first, so that the sequences of a cycle line up: a sequence that reaches its verify
 * waits there while the others finish drafting, and the verifies of all of them then share one trunk
 * forward. Serving every queued request in every step instead lets sequences that are out of phase
 * stay so: each step then runs a trunk forward (a few sequences' verifies) and an MTP forward (the
 * others' drafts), and a small model on a GPU, whose forward costs about the same for 1 or 40 rows,
 * pays a whole trunk forward per draft step (bench/batching.md, "Session 6"). A trunk request waits
 * at most for the deepest draft chain queued before it (GEN_MAX_DEPTH steps). A prompt's MTP history
 * does not count as a draft: it is hundreds of chunks, each queued as the last one ends, and letting
 * it pick the kind held every decoding sequence's verify until the whole history was read (a 9-15 ms
 * gap in the streams beside a 4,000-token prompt on a GPU, bench/batching.md "Session 27"). Nor may
 * a long prompt's trunk chunks hold other prompts' histories (requests that arrive together): trunk
 * requests and histories take turns, so neither waits more than one step for the other. Called with
 * mu held. */
static sub_kind next_kind(const sched *s) {
    int trunk = 0, history = 0;
    for (const sub *x = s->head; x; x = x->next) {
        if (x->kind == SUB_MTP && !x->prompt) return SUB_MTP;
        trunk |= x->kind == SUB_TRUNK;
        history |= x->kind == SUB_MTP;
    }
    if (trunk && history) return s->last_trunk ? SUB_MTP : SUB_TRUNK;
    return history ? SUB_MTP : SUB_TRUNK;
}

/* Take queued requests of kind k (k < 0: of both kinds), oldest first, while each kind's rows fit
 * max_batch_rows and its parts fit BATCH_SEQS_MAX (the first always goes); the others keep their
 * place. Called with mu held; returns the taken list. */
static sub *take_ready(sched *s, int k) {
    int rows[2] = {0, 0}, parts[2] = {0, 0};
    sub *taken = NULL, **tail = &taken, **pp = &s->head;
    s->tail = NULL;
    while (*pp) {
        sub *x = *pp;
        int j = x->kind;
        if ((k >= 0 && j != k) || (taken && rows[j] + x->rows > s->cfg.max_batch_rows) || parts[j] == BATCH_SEQS_MAX) {
            s->tail = x;
            pp = &x->next;
            continue;
        }
        rows[j] += x->rows;
        parts[j]++;
        *pp = x->next;
        x->next = NULL;
        *tail = x;
        tail = &x->next;
        s->n_pending--;
    }
    return taken;
}

/* What the head call of one head kind gives the MTP requests of a step that want logits from it: k
 * rows, lists of `top` when every one of them wants its row's list (sub.list), else rows of model_lm_head_top
 * at the largest top any of them asks for, or 0 (whole rows) when one wants the whole row. A row's best
 * k' >= k logits hold its best k, so each still reads exactly what a call of its own would give
 * (tests/unit/test_sched.c, test_draft_top_rows). */
typedef struct {
    int k, top, lists;
} head_plan;

static head_plan heads_plan(sub **q, int n, int kind) {
    head_plan p = {0, 0, 1};
    int whole = 0;
    for (int i = 0; i < n; i++)
        if (q[i]->logits && (int)q[i]->head == kind) {
            p.k++;
            p.top = imax(p.top, q[i]->top);
            whole |= q[i]->top <= 0;
            p.lists &= q[i]->list != NULL;
        }
    p.lists &= !whole;
    if (whole) p.top = 0;
    return p;
}

/* Hands each request of head kind `kind` its part of the head call's output (s->head_out rows, or
 * s->head_tops lists of p.top): its logits row, or the first x->top entries of its row's list (the k
 * best, in rank order), or a list made from its row (be_logits_top_host: the same k best). */
static void heads_deliver(sched *s, sub **q, int n, int kind, head_plan p) {
    for (int i = 0, k = 0; i < n; i++) {
        sub *x = q[i];
        if (!x->logits || (int)x->head != kind) continue;
        const float *row = s->head_out + (size_t)k * s->V;
        const int32_t *l = s->head_tops + (size_t)k++ * (2 * p.top + 2);
        if (!x->list) {
            memcpy(x->logits, row, sizeof(float) * s->V);
        } else if (!p.lists) {
            model_logits_list(row, s->V, x->top, x->list);
        } else { /* the first x->top of this row's list of `top`, then its NaN / +inf entry */
            memcpy(x->list, l, sizeof(int32_t) * (size_t)x->top);
            memcpy(x->list + x->top, l + p.top, sizeof(int32_t) * (size_t)x->top);
            x->list[2 * x->top] = l[2 * p.top], x->list[2 * x->top + 1] = l[2 * p.top + 1];
        }
    }
}

/* The draft heads of an MTP step's requests after model_mtp_forward_batch: their rows gathered on the
 * host, one head call per head kind (heads_plan), each request given its part (heads_deliver). */
static int run_heads(sched *s, sub **q, int n, mtplx_err *err) {
    for (int kind = HEAD_TARGET; kind <= HEAD_MTP; kind++) {
        head_plan p = heads_plan(q, n, kind);
        if (!p.k) continue;
        for (int i = 0, k = 0; i < n; i++)
            if (q[i]->logits && (int)q[i]->head == kind)
                memcpy(s->head_in + (size_t)k++ * s->H, q[i]->q.hidden_out + (size_t)q[i]->logits_row * s->H,
                       sizeof(float) * s->H);
        int rc = p.lists ? model_lm_head_list(s->m, (head_kind)kind, s->head_in, p.k, s->head_out, p.top, s->head_tops, err)
                         : model_lm_head_top(s->m, (head_kind)kind, s->head_in, p.k, s->head_out, p.top, err);
        if (rc) return rc;
        heads_deliver(s, q, n, kind, p);
    }
    return 0;
}

/* An MTP step's forward and heads. When the requests that want logits all use one head (a decode
 * step's drafts), the head runs behind the layer in one call (model_mtp_forward_batch_head: one wait,
 * the rows never go through the host); otherwise the layer, then run_heads. Returns 0 or an error. */
static int run_mtp(sched *s, sub **q, int n, const mtp_seq *g, mtplx_err *err) {
    int kind = -1, mixed = 0;
    for (int i = 0; i < n; i++)
        if (q[i]->logits) {
            mixed |= kind >= 0 && kind != (int)q[i]->head;
            kind = (int)q[i]->head;
        }
    if (kind < 0 || mixed || !s->cfg.mtp_head) {
        int rc = model_mtp_forward_batch(s->m, s->batch, g, n, err);
        return rc ? rc : run_heads(s, q, n, err);
    }
    head_plan p = heads_plan(q, n, kind);
    int lrow[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) lrow[i] = q[i]->logits ? q[i]->logits_row : -1;
    mtp_batch_head h = {(head_kind)kind, lrow, p.top, s->head_out, p.lists ? s->head_tops : NULL};
    int rc = model_mtp_forward_batch_head(s->m, s->batch, g, n, &h, err);
    if (!rc) heads_deliver(s, q, n, kind, p);
    return rc;
}

/* One merged forward of n requests of one kind; on an error, each request is retried alone so
 * that only the one at fault fails (a failed batch changed no state). */
static void run_kind(sched *s, sub **q, int n, sub_kind kind) {
    if (!n) return;
    fwd_seq f[BATCH_SEQS_MAX];
    mtp_seq g[BATCH_SEQS_MAX];
    int R = 0;
    for (int i = 0; i < n; i++) {
        f[i] = q[i]->f;
        g[i] = q[i]->q;
        R += q[i]->rows;
    }
    mtplx_err err = {0};
    int rc = kind == SUB_TRUNK ? model_forward_batch(s->m, s->batch, f, n, &err) : run_mtp(s, q, n, g, &err);
    if (rc && n > 1) {
        for (int i = 0; i < n; i++) run_kind(s, &q[i], 1, kind);
        return;
    }
    for (int i = 0; i < n; i++) {
        q[i]->rc = rc;
        if (rc) q[i]->err = err;
    }
    s->forwards++;
    s->trunk_forwards += kind == SUB_TRUNK;
    s->rows += (uint64_t)R;
    s->seq_parts += (uint64_t)n;
}

/* One line of the step trace (sched.h, trace_path): the step began at t (clock_now()), gap ms after
 * the previous step ended, waited lock_ms for the model; per kind its n sequences, their rows, how
 * many of those were prompt rows, and its forward's ms. Running / waiting are read without mu (a
 * diagnostic may be a step stale). */
static void trace_step(sched *s, double t, double gap, double lock_ms, sub *const q[2][BATCH_SEQS_MAX],
                       const int n[2], const int rows[2], const double ms[2]) {
    int prompt[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n[k]; i++) prompt[k] += q[k][i]->prompt ? q[k][i]->rows : 0;
    fprintf(s->trace, "%.3f %.3f %.3f | %d %d %d %.3f | %d %d %d %.3f | %d %d\n", (t - s->t0) * 1e3,
            s->t_step > 0 ? gap * 1e3 : 0.0, lock_ms, n[0], rows[0], prompt[0], ms[0], n[1], rows[1], prompt[1], ms[1],
            s->n_active, s->n_waiting);
}

/* Run one step: the requests of one kind (next_kind), or with align_phases off every queued request
 * (trunk forward, then MTP forward). Called with mu held; releases it while the model runs. */
static void run_step(sched *s) {
    s->executing = 1;
    double t_begin = clock_now();
    double gap = t_begin - s->t_step; /* since the last step: the sequences' own work between steps */
    if (s->t_step > 0 && s->n_active > 0) s->gap_ms += gap * 1e3;
    if (s->costs_on && s->t_step > 0 && all_queued(s) && gap < 0.01) {
        double *g = s->last_trunk ? &s->costs.cycle_ms : &s->costs.step_ms; /* whose work the gap was */
        *g += 0.2 * (gap * 1e3 - *g);
    }
    sub *taken = take_ready(s, s->cfg.align_phases ? (int)next_kind(s) : -1);
    pthread_mutex_unlock(&s->mu);
    sub *q[2][BATCH_SEQS_MAX];
    int n[2] = {0, 0};
    for (sub *x = taken; x; x = x->next) q[x->kind][n[x->kind]++] = x;
    double ms[2] = {0, 0};
    int rows[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < n[k]; i++) rows[k] += q[k][i]->rows;
    double t_lock = clock_now();
    pthread_mutex_lock(&s->exec);
    t_lock = clock_now() - t_lock;
    s->steps++;
    for (int k = 0; k < 2; k++) {
        double t0 = clock_now();
        run_kind(s, q[k], n[k], (sub_kind)k);
        ms[k] = (clock_now() - t0) * 1e3;
    }
    s->kind_ms[0] += ms[0];
    s->kind_ms[1] += ms[1];
    pthread_mutex_unlock(&s->exec);
    if (s->trace) trace_step(s, t_begin, gap, t_lock * 1e3, q, n, rows, ms);
    pthread_mutex_lock(&s->mu);
    if (s->costs_on) { /* keep the policy's costs current (sched_cost.h) */
        if (n[SUB_TRUNK]) sched_cost_note_trunk(&s->costs, n[SUB_TRUNK], rows[SUB_TRUNK], ms[SUB_TRUNK]);
        int dr = 0;
        for (int i = 0; i < n[SUB_TRUNK]; i++) dr += q[SUB_TRUNK][i]->prompt ? 0 : q[SUB_TRUNK][i]->rows;
        if (dr) s->decode_rows += 0.2 * (dr - s->decode_rows);
        if (n[SUB_MTP]) sched_cost_note(&s->costs.mtp, rows[SUB_MTP], ms[SUB_MTP]);
    }
    for (sub *x = taken, *nx; x; x = nx) {
        nx = x->next; /* x belongs to its owner once done: read the link first */
        __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE); /* spin_done reads it without mu */
        pthread_cond_signal(&x->cv);
    }
    s->executing = 0;
    s->t_step = clock_now();
    s->last_trunk = n[SUB_TRUNK] > 0;
    wake_head(s); /* requests queued during the step, or left out of it */
}

/* When the queue may run without the sequences that are not waiting: wait_ms after the later of its
 * oldest request's arrival and the end of the last step. Counting from the step's end matters for
 * requests left queued by earlier steps (next_kind): they are old, but the sequences that step
 * served are only now sampling their next rows, and a step run without them would split the cycle
 * again. Called with mu held. */
static double ready_at(const sched *s) {
    double t = s->head->t > s->t_step ? s->head->t : s->t_step;
    return t + s->cfg.wait_ms / 1000.0;
}

/* Poll x->done for up to spin_us without mu, instead of sleeping on x->cv: a woken thread takes
 * tens of microseconds to run again, and each of a cycle's steps waits for the last sequence to come
 * back. Called and returns with mu held. */
static void spin_done(sched *s, sub *x) {
    pthread_mutex_unlock(&s->mu);
    double end = clock_now() + s->cfg.spin_us * 1e-6;
    while (!__atomic_load_n(&x->done, __ATOMIC_ACQUIRE) && clock_now() < end) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    pthread_mutex_lock(&s->mu);
}

/* Queue x and wait until some step ran it (possibly this thread's). Returns x's result. */
static int submit(sched *s, sub *x, mtplx_err *err) {
    pthread_cond_init(&x->cv, NULL);
    pthread_mutex_lock(&s->mu);
    x->t = clock_now();
    x->next = NULL;
    if (s->head) s->tail->next = x;
    else s->head = x;
    s->tail = x;
    s->n_pending++;
    fresh_done(s);
    int spun = 0;
    while (!x->done) {
        if (!s->executing && s->head && (all_queued(s) || clock_now() >= ready_at(s))) {
            s->late_steps += !all_queued(s);
            run_step(s);
            continue;
        }
        if (s->executing || s->head != x) { /* the executor or the head's owner will wake us */
            if (s->executing && !spun && s->cfg.spin_us > 0) { /* or poll for the running step's end */
                spin_done(s, x);
                spun = 1;
                continue;
            }
            pthread_cond_wait(&x->cv, &s->mu);
        } else { /* we head the queue: run it at its deadline unless the others arrive first */
            struct timespec ts;
            deadline_in(&ts, ready_at(s) - clock_now() + 1e-4);
            pthread_cond_timedwait(&x->cv, &s->mu, &ts);
        }
    }
    pthread_mutex_unlock(&s->mu);
    pthread_cond_destroy(&x->cv);
    if (x->rc && err) *err = x->err;
    return x->rc;
}

/* ------------------------------------------------------------------ requests */

/* Count a sequence in (d = 1) or out of (d = -1) a prompt forward; d = 0 does nothing. */
static void prefill_mark(sched *s, int d) {
    if (!d) return;
    pthread_mutex_lock(&s->mu);
    s->n_prefill += d;
    pthread_mutex_unlock(&s->mu);
}

/* Prompt rows one sequence with `left` prompt rows to go puts in the next step: prefill_chunk when
 * no other sequence decodes and the rest fits one chunk or nobody else is joined; else what the
 * measured costs allow for the decoding ones (sched_prefill_rows; at least one: a sequence reading a
 * short prompt decodes a step later) or, without costs, knee_rows (at least 8), so that their steps
 * cost about what they cost without the prompt and they keep streaming (the long prompt then takes
 * more steps). Counting only the sequences decoding now gave a long prompt that arrived with short
 * ones chunks of prefill_chunk rows: 60-80 ms steps on two CPU cores that the short ones, decoding by
 * then, waited for; short prompts arriving together still go in one step each (bench/batching.md
 * "Session 27"). */
static int prefill_rows(sched *s, int left) {
    pthread_mutex_lock(&s->mu);
    int decoding = s->n_active - s->n_prefill, rows = s->cfg.prefill_chunk;
    if (decoding > 0 || (s->n_active > 1 && left > s->cfg.prefill_chunk))
        rows = s->costs_on ? sched_prefill_rows(&s->costs, imax(decoding, 1), s->decode_rows, s->n_prefill,
                                                s->cfg.prefill_chunk)
                           : imin(s->cfg.prefill_chunk, imax(s->cfg.knee_rows, 8));
    pthread_mutex_unlock(&s->mu);
    return rows;
}

int sched_forward(sched *s, model_state *st, const int32_t *tokens, int T, const fwd_request *req, mtplx_err *err) {
    if (T < 1) return err_set(err, MTPLX_EINVAL, "sched_forward: T = %d rows (need >= 1)", T);
    fwd_request r = req ? *req : (fwd_request){0};
    if (T > s->cfg.max_batch_rows && r.capture)
        return err_set(err, MTPLX_EINVAL, "sched_forward: capturing %d rows, a forward holds %d", T,
                       s->cfg.max_batch_rows);
    int H = s->H, V = s->V, rc = 0, prompt = T > GEN_MAX_DEPTH + 1; /* longer than any verify: a prompt */
    prefill_mark(s, prompt);
    for (int c0 = 0, R; c0 < T && !rc; c0 += R) {
        if (c0 > 0 && joined_cancelled()) {
            rc = err_set(err, MTPLX_ECANCELED, "cancelled during the prompt (%d of %d rows done)", c0, T);
            break;
        }
        R = imin(r.capture ? T : prefill_rows(s, T - c0), T - c0);
        sub x = {.kind = SUB_TRUNK, .rows = R, .prompt = prompt};
        fwd_request p = {NULL, 0, r.hidden ? r.hidden + (size_t)c0 * H : NULL, r.capture, r.logits_top, NULL};
        if (r.logits && r.logits_from < c0 + R) {
            int t0 = imax(r.logits_from - c0, 0);
            p.logits = r.logits + (size_t)(c0 + t0 - r.logits_from) * V;
            p.logits_from = t0;
            if (r.top_out) p.top_out = r.top_out + (size_t)(c0 + t0 - r.logits_from) * (2 * (size_t)r.logits_top + 2);
        }
        x.f = (fwd_seq){st, tokens + c0, R, p};
        rc = submit(s, &x, err);
    }
    prefill_mark(s, -prompt);
    return rc;
}

int sched_mtp(sched *s, mtp_state *st, const float *hidden, const int32_t *next, int T, float *hidden_out,
              head_kind head, int logits_row, float *logits, int top, int32_t *list, mtplx_err *err) {
    if (T < 1) return err_set(err, MTPLX_EINVAL, "sched_mtp: T = %d rows (need >= 1)", T);
    if (list && (!logits || top < 1 || top > MODEL_TOP_MAX || top >= s->V))
        return err_set(err, MTPLX_EINVAL, "sched_mtp: a logits list needs a logits row and top in [1, %d], got %d",
                       imin(MODEL_TOP_MAX, s->V - 1), top);
    if (logits && (logits_row < 0 || logits_row >= T))
        return err_set(err, MTPLX_EINVAL, "sched_mtp: logits row %d outside [0, %d)", logits_row, T);
    int H = s->H, rc = 0, prompt = T > GEN_MAX_DEPTH + 1; /* the MTP history of a prompt */
    prefill_mark(s, prompt);
    for (int c0 = 0, R; c0 < T && !rc; c0 += R) {
        if (c0 > 0 && joined_cancelled()) {
            rc = err_set(err, MTPLX_ECANCELED, "cancelled during the MTP history of the prompt (%d of %d rows)", c0, T);
            break;
        }
        R = imin(prefill_rows(s, T - c0), T - c0);
        sub x = {.kind = SUB_MTP, .rows = R, .head = head, .top = top, .prompt = prompt};
        x.q = (mtp_seq){st, hidden + (size_t)c0 * H, next + c0, R, hidden_out + (size_t)c0 * H};
        if (logits && logits_row >= c0 && logits_row < c0 + R) {
            x.logits = logits;
            x.logits_row = logits_row - c0;
            x.list = list;
        }
        rc = submit(s, &x, err);
    }
    prefill_mark(s, -prompt);
    return rc;
}

/* The acceptance the policy assumes at each position (out[0..GEN_MAX_DEPTH)): the drafts reported so
 * far, the older ones fading (ACCEPT_WINDOW), each position starting from a prior worth
 * ACCEPT_PRIOR_CYCLES cycles. The first position's prior is 0.75; a deeper one's is the position
 * before it times the first position's estimate (a draft is accepted about as often as the one before
 * it, given that one was), so positions the policy has not drafted lately follow what the drafts it
 * did make say. Called with mu held. */
#define ACCEPT_PRIOR_CYCLES 32.0
/* Drafts a position's estimate remembers, about: a server's workload changes (another language, another
 * temperature), and counts kept from its start would hold an estimate made from hours-old requests. */
#define ACCEPT_WINDOW 1024.0
/* A measured policy that answers 0 drafts stops measuring what could change its mind (no MTP steps,
 * no acceptance), so a transient bad estimate would hold it at plain AR; every POLICY_PROBE-th such
 * answer is 1 instead (at most 1/POLICY_PROBE of those cycles pay for one draft). */
#define POLICY_PROBE 32u
static void accept_estimate(const sched *s, double *out) {
    double prior = 0.75;
    for (int i = 0; i < GEN_MAX_DEPTH; i++) {
        out[i] = (s->acc[i] + ACCEPT_PRIOR_CYCLES * prior) / (s->tried[i] + ACCEPT_PRIOR_CYCLES);
        prior = out[i] * out[0];
    }
}

int sched_depth_cap(sched *s, int depth) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_active > 0 ? s->n_active : 1, cap;
    if (s->costs_on) {
        sched_costs c = s->costs;
        accept_estimate(s, c.accept);
        cap = sched_depth_best(&c, n, depth);
        if (cap == 0 && depth > 0 && ++s->probe % POLICY_PROBE == 0) cap = 1;
    } else {
        cap = s->cfg.knee_rows / n - 1;
    }
    pthread_mutex_unlock(&s->mu);
    return cap < 0 ? 0 : cap > depth ? depth : cap;
}

void sched_note_cycle(sched *s, int drafted, int accepted) {
    if (drafted <= 0) return;
    pthread_mutex_lock(&s->mu);
    const double keep = 1.0 - 1.0 / ACCEPT_WINDOW;
    for (int i = 0; i < drafted && i < GEN_MAX_DEPTH; i++) {
        s->tried[i] = s->tried[i] * keep + 1.0;
        s->acc[i] = s->acc[i] * keep + (i < accepted);
    }
    pthread_mutex_unlock(&s->mu);
}

/* The best of reps runs of a trunk forward of n fresh sequences × r rows (every row's logits back,
 * as a verify asks them: top 20 where the draft heads use it too), in ms; < 0 on an error. */
static double time_trunk(sched *s, model_state **st, const int32_t *tok, int n, int r, int reps, mtplx_err *err) {
    double best = -1;
    fwd_seq f[BATCH_SEQS_MAX];
    for (int i = 0; i < n; i++) {
        f[i] = (fwd_seq){st[i], tok + (size_t)i * r, r, {s->head_out + (size_t)i * r * s->V, 0, NULL, 0, 0}};
        f[i].req.logits_top = s->V > 20 ? 20 : 0;
    }
    for (int k = 0; k < reps; k++) {
        for (int i = 0; i < n; i++) model_state_reset(st[i]);
        double t0 = clock_now();
        if (model_forward_batch(s->m, s->batch, f, n, err)) return -1;
        double ms = (clock_now() - t0) * 1e3;
        if (best < 0 || ms < best) best = ms;
    }
    return best;
}

/* The same for an MTP forward of one row of each of n sequences and their draft heads (top-20 lists, as
 * a decode step's drafts at top_k 20 take them: run_mtp). */
static double time_mtp(sched *s, mtp_state **mt, const float *hid, const int32_t *tok, int n, int reps,
                       mtplx_err *err) {
    double best = -1;
    mtp_seq g[BATCH_SEQS_MAX];
    int lrow[BATCH_SEQS_MAX] = {0}, top = s->V > 20 ? 20 : 0;
    for (int i = 0; i < n; i++) g[i] = (mtp_seq){mt[i], hid + (size_t)i * s->H, tok + i, 1, s->head_in + (size_t)i * s->H};
    mtp_batch_head h = {HEAD_DRAFT, lrow, top, s->head_out, top ? s->head_tops : NULL};
    for (int k = 0; k < reps; k++) {
        for (int i = 0; i < n; i++) mtp_state_reset(mt[i]);
        double t0 = clock_now();
        if (model_mtp_forward_batch_head(s->m, s->batch, g, n, &h, err)) return -1;
        double ms = (clock_now() - t0) * 1e3;
        if (best < 0 || ms < best) best = ms;
    }
    return best;
}

/* The trunk at 1, 2, 4, ... rows in all, each as 1, 2, 4, 8 rows per sequence where that many
 * sequences fit (the smallest forwards first, so a slow model still gets the points a policy needs
 * at low load), then the MTP step of 1, 2, 4, ... sequences; each while its budget lasts. */
static int calibrate_points(sched *s, sched_costs *c, model_state **st, mtp_state **mt, int nmax, int rmax,
                            const int32_t *tok, const float *hid, double budget_s, mtplx_err *err) {
    double t_end = clock_now() + budget_s;
    int first = 1;
    for (int R = 1; R <= rmax && clock_now() < t_end; R *= 2)
        for (int r = 1; r <= 8 && r <= R && clock_now() < t_end; r *= 2) {
            if (R / r > nmax) continue;
            double ms = time_trunk(s, st, tok, R / r, r, first ? 3 : 2, err); /* the first warms up */
            if (ms < 0) return err->code ? err->code : MTPLX_EINTERNAL;
            sched_cost_note_trunk(c, R / r, R, ms);
            first = 0;
        }
    t_end = clock_now() + budget_s / 2;
    for (int n = 1; mt && n <= nmax && clock_now() < t_end; n *= 2) {
        double ms = time_mtp(s, mt, hid, tok, n, n == 1 ? 3 : 2, err);
        if (ms < 0) return err->code ? err->code : MTPLX_EINTERNAL;
        sched_cost_note(&c->mtp, n, ms);
    }
    return 0;
}

int sched_calibrate(sched *s, double budget_s, mtplx_err *err) {
    /* at most 16 sequences of at most 8 rows: more sequences read the curves past their last point,
     * and each calibration sequence holds a whole GDN state (150 MB on the 27B) while it runs */
    const int H = s->H, rps = 8;
    int rmax = imin(1 << (SCHED_COST_BINS - 1), imin(s->cfg.max_batch_rows, s->cfg.capacity));
    int nmax = imin(imin(s->cfg.max_seqs, 16), s->cfg.kv_pages / pages_for(rps));
    if (rmax < 1 || nmax < 1)
        return err_set(err, MTPLX_ERANGE, "depth policy calibration: the pool's %d pages hold no forward",
                       s->cfg.kv_pages);
    rmax = imin(rmax, nmax * rps);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)rmax);
    float *hid = calloc((size_t)nmax * H, sizeof(float));
    model_state **st = calloc((size_t)nmax, sizeof *st);
    mtp_state **mt = calloc((size_t)nmax, sizeof *mt);
    int rc = tok && hid && st && mt ? 0 : err_set(err, MTPLX_ENOMEM, "depth policy calibration: out of memory");
    for (int i = 0; !rc && i < rmax; i++) tok[i] = (int32_t)((1 + 7 * i) % s->V);
    for (int i = 0; !rc && i < nmax; i++) hid[(size_t)i * H + i % H] = 1;
    pthread_mutex_lock(&s->exec);
    if (!rc) rc = model_reserve_thread(s->m, s->cfg.max_batch_rows, err);
    int has_mtp = model_has_mtp(s->m);
    for (int i = 0; !rc && i < nmax; i++) { /* no capture: a small tape */
        rc = model_state_new_in(s->pool, rps, GEN_MAX_DEPTH + 1, &st[i], err);
        if (!rc && has_mtp) rc = mtp_state_new_in(s->pool, rps, &mt[i], err);
    }
    sched_costs c;
    memset(&c, 0, sizeof c);
    if (!rc) rc = calibrate_points(s, &c, st, has_mtp ? mt : NULL, nmax, rmax, tok, hid, budget_s, err);
    for (int i = 0; i < nmax && st && mt; i++) {
        model_state_free(st[i]);
        mtp_state_free(mt[i]);
    }
    pthread_mutex_unlock(&s->exec);
    free(tok);
    free(hid);
    free(st);
    free(mt);
    if (rc) return err_prefix(err, "depth policy calibration");
    int points = 0; /* a slope needs 1, 2 and 4 rows at least: a model too slow for that keeps the knee */
    for (int b = 0; b < SCHED_COST_BINS; b++) {
        int any = 0;
        for (int k = 0; k < SCHED_COST_RBINS; k++) any |= c.trunk[k].rows[b] > 0;
        points += any;
    }
    if (has_mtp && (points < 3 || c.mtp.rows[0] <= 0))
        return err_set(err, MTPLX_ERANGE, "depth policy calibration: %d trunk row counts measured in %.2f s "
                       "(a forward is too slow for the budget)", points, budget_s);
    pthread_mutex_lock(&s->mu);
    s->costs = c;
    s->costs_on = has_mtp;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void sched_costs_set(sched *s, const sched_costs *c) {
    pthread_mutex_lock(&s->mu);
    s->costs = *c;
    s->costs_on = 1;
    pthread_mutex_unlock(&s->mu);
}

int sched_costs_get(sched *s, sched_costs *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->costs;
    accept_estimate(s, out->accept);
    int on = s->costs_on;
    pthread_mutex_unlock(&s->mu);
    return on;
}

void sched_get_stats(sched *s, sched_stats *o) {
    pthread_mutex_lock(&s->mu);
    o->running = s->n_active;
    o->waiting = s->n_waiting;
    o->pages_reserved = s->pages_reserved;
    o->pages_total = s->cfg.kv_pages;
    o->gap_ms = s->gap_ms;
    pthread_mutex_unlock(&s->mu);
    int used, total;
    pthread_mutex_lock(&s->exec); /* forward counters change only under exec (pages: the pool's lock) */
    seq_pool_pages(s->pool, &used, &total);
    o->forwards = s->forwards;
    o->rows = s->rows;
    o->seq_parts = s->seq_parts;
    o->steps = s->steps;
    o->late_steps = s->late_steps;
    o->trunk_forwards = s->trunk_forwards;
    o->trunk_ms = s->kind_ms[0];
    o->mtp_ms = s->kind_ms[1];
    pthread_mutex_unlock(&s->exec);
    o->pages_used = used;
}
