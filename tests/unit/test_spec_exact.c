/* test_spec_exact.c — the exact proof that speculative generation emits the AR law.
 *
 * The production decode loop (src/engine/cycle.c: cycle_first / cycle_step — the same functions
 * gen_session_run calls) is driven with
 *   - a stand-in model over a 4-token vocabulary: target and draft logits are fixed tables indexed by
 *     a hash of the context the model holds (the committed tokens plus the rows of the last verify,
 *     trimmed by commit, exactly as the real state is), so a wrong commit changes the logits;
 *   - a branch oracle as its cycle_rand: at each decision it returns one representative uniform per
 *     outcome (u = the left end of a token's cumulative interval; u = 0 to accept, u = ratio to
 *     reject) and multiplies the path weight by that outcome's probability (probs[i], ratio,
 *     1 - ratio). Zero-probability outcomes are not visited.
 * Every path of a cycle is replayed from a snapshot of the state (depth-first over the decisions).
 * Generation is followed unconditionally across cycles: after each cycle the resulting states are
 * merged by their emitted tokens (the merge checks that the whole state — penalty history, pending
 * token, model context — is equal, so merging assumes nothing) and each goes into the next cycle,
 * until max_tokens or a stop id. The result, in double, is the exact law of the emitted sequence;
 * it must equal the AR law to 1e-12, computed here independently from the tables and the sampler's
 * documented order (docs/speculative.md) and also by the same enumeration at depth 0.
 * Families of (p, q) include q = 0 where p > 0, p = 0 where q > 0, near-equal, equal, one-hot,
 * disjoint supports; settings include penalties (p only), top-k / top-p / min-p, greedy and a stop
 * id; depths 1-5 and adaptive depth 3, 6 tokens, for every family and setting.
 * Structured output (docs/structured-output.md): with a toy gen_constraint whose allowed set depends
 * on every token before it (and that can end the generation), the speculative law equals the AR law
 * of the masked target, for the families with finite logits, every setting and depths 1-4. The
 * same proof runs with the verify and draft rows given as logits_top lists (cycle_use_lists), as a
 * GPU with a large vocabulary gives them. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../src/engine/cycle.h"
#include "../../src/model/model.h"
#include "test.h"

#define V 4
#define NMAX 6      /* max_tokens at most */
#define CTX_MAX 32  /* prompt + completion + a verify block */
#define MAXDEC 64   /* decisions in one cycle at most */
#define NI -INFINITY
#define TOL 1e-12

/* ---------------- stand-in model ---------------- */

#define ROWS 7
typedef struct {
    const char *name;
    int aligned;      /* 0: draft logits = d[draft_row(chain, d)], a law of its own;
                         1: draft logits = t[r] + d[r] with r = target_row(chain): q is p of the same
                         context, perturbed (d = 0: q = p; -inf in d: q = 0 where p > 0) */
    float t[ROWS][V]; /* target logits, row chosen by hash of the context */
    float d[ROWS][V]; /* draft logits or offsets (see aligned) */
} family;

static const family k_families[] = {
    {"generic", 0,
     {{0.5f, -1, 1.25f, 0}, {-0.5f, 0.75f, 0.25f, 1.5f}, {2, 0, -1, 0.5f}, {0, 0, 0.125f, -0.25f},
      {1, 1.5f, -2, 0.25f}, {-1.5f, 0.5f, 1, 0.25f}, {0.75f, -0.5f, 0, 1.25f}},
     {{1.5f, 0, -1, 0.5f}, {0, -1, 1, 0.25f}, {-1, 2, 0, 0}, {0.5f, 0.5f, -0.5f, 1.5f},
      {-2, 0, 1, 1}, {1, -0.75f, 0.5f, -1.5f}, {0.25f, 1.25f, -0.5f, 0}}},
    {"q=0 where p>0", 1, /* q = p with some ids removed and the rest reweighted */
     {{0.5f, -1, 1.25f, 0}, {-0.5f, 0.75f, 0.25f, 1.5f}, {2, 0, -1, 0.5f}, {0, 0, 0.125f, -0.25f},
      {1, 1.5f, -2, 0.25f}, {-1.5f, 0.5f, 1, 0.25f}, {0.75f, -0.5f, 0, 1.25f}},
     {{1.5f, NI, -1, NI}, {NI, -1, 1, 0.25f}, {-1, 2, NI, NI}, {0.5f, NI, NI, NI},
      {NI, 0, 1, NI}, {1, -0.75f, NI, -1.5f}, {NI, NI, -0.5f, 0}}},
    {"p=0 where q>0", 0,
     {{0.5f, NI, 1.25f, NI}, {NI, 0.75f, 0.25f, 1.5f}, {2, NI, NI, 0.5f}, {0, 0, NI, NI},
      {1, 1.5f, NI, 0.25f}, {NI, NI, 1, 0.25f}, {0.75f, NI, 0, 1.25f}},
     {{1.5f, 0, -1, 0.5f}, {0, -1, 1, 0.25f}, {-1, 2, 0, 0}, {0.5f, 0.5f, -0.5f, 1.5f},
      {-2, 0, 1, 1}, {1, -0.75f, 0.5f, -1.5f}, {0.25f, 1.25f, -0.5f, 0}}},
    {"near-equal", 1, /* q = p with one logit moved by 2^-16: ratios within 2e-5 of 1 */
     {{0.5f, -1, 1.25f, 0}, {-0.5f, 0.75f, 0.25f, 1.5f}, {2, 0, -1, 0.5f}, {0, 0, 0.125f, -0.25f},
      {1, 1.5f, -2, 0.25f}, {-1.5f, 0.5f, 1, 0.25f}, {0.75f, -0.5f, 0, 1.25f}},
     {{0x1p-16f, 0, 0, 0}, {0, -0x1p-16f, 0, 0}, {0, 0, 0x1p-16f, 0}, {0, 0, 0, 0x1p-16f},
      {-0x1p-16f, 0, 0, 0}, {0, 0, 0, -0x1p-16f}, {0, 0x1p-16f, 0, 0}}},
    {"equal", 1, /* q = p (p without penalties): every draft accepted, a bonus closes each block */
     {{0.5f, -1, 1.25f, 0}, {-0.5f, 0.75f, 0.25f, 1.5f}, {2, 0, -1, 0.5f}, {0, 0, 0.125f, -0.25f},
      {1, 1.5f, -2, 0.25f}, {-1.5f, 0.5f, 1, 0.25f}, {0.75f, -0.5f, 0, 1.25f}},
     {{0}}},
    {"one-hot", 0, /* one-hot q everywhere, one-hot p in some rows */
     {{NI, NI, 1, NI}, {-0.5f, 0.75f, 0.25f, 1.5f}, {NI, 0, NI, NI}, {0, 0, 0.125f, -0.25f},
      {1, NI, NI, NI}, {-1.5f, 0.5f, 1, 0.25f}, {NI, NI, NI, 0}},
     {{NI, NI, 0, NI}, {0, NI, NI, NI}, {NI, 0, NI, NI}, {NI, NI, NI, 0},
      {NI, NI, 0, NI}, {NI, 0, NI, NI}, {0, NI, NI, NI}}},
    {"disjoint", 0, /* p on {0, 1}, q on {2, 3}: every draft rejected */
     {{0.5f, -1, NI, NI}, {-0.5f, 0.75f, NI, NI}, {2, 0, NI, NI}, {0, 0.25f, NI, NI},
      {1, 1.5f, NI, NI}, {-1.5f, 0.5f, NI, NI}, {0.75f, -0.5f, NI, NI}},
     {{NI, NI, -1, 0.5f}, {NI, NI, 1, 0.25f}, {NI, NI, 0, 0}, {NI, NI, -0.5f, 1.5f},
      {NI, NI, 1, 1}, {NI, NI, 0.5f, -1.5f}, {NI, NI, -0.5f, 0}}},
};
#define N_FAMILIES (int)(sizeof k_families / sizeof k_families[0])

/* Row of the target table for a context of n tokens (n >= 2). */
static int target_row(const int32_t *ctx, int n) { return (ctx[n - 1] * 5 + ctx[n - 2] * 3 + n) % ROWS; }
/* Row of the draft table for draft position d on a chain of n tokens. */
static int draft_row(const int32_t *chain, int n, int d) { return (chain[n - 1] * 3 + chain[n - 2] + 2 * d + n) % ROWS; }

/* The model state the stand-in keeps: what a real trunk state would hold. */
typedef struct {
    const family *f;
    int32_t ctx[CTX_MAX]; /* prompt + committed completion (+ the last verify's rows until commit) */
    int len;
    int32_t chain[CTX_MAX]; /* the current draft chain: committed context, x0, y_1.. */
    int chain_len;
    int last_n;           /* rows of the last verify (0 after commit) */
    int broken;           /* a protocol violation was seen */
} stand_in;

static int LISTS;           /* 1: the cycle takes its rows as logits_top lists (cycle_use_lists) */
static long g_list_rows;    /* rows the stand-in gave as lists */
static int g_top, g_dtop;   /* the list sizes the cycle asked for (cycle_state.top / dtop) */

/* With lists: row's list of k entries into list, then row poisoned with NaN (a cycle that read the row
 * instead of its list would fail with EINVAL). */
static void si_list(float *row, int k, int32_t *list) {
    model_logits_list(row, V, k, list);
    for (int j = 0; j < V; j++) row[j] = NAN;
    g_list_rows++;
}

static int si_draft(void *ctx, int d, int32_t prev, float *logits, int32_t *list, mtplx_err *err) {
    stand_in *m = ctx;
    if (d == 1) {
        memcpy(m->chain, m->ctx, sizeof(int32_t) * (size_t)m->len);
        m->chain_len = m->len;
    } else if (m->chain_len != m->len + d - 1)
        m->broken = 1;
    if (m->last_n || m->chain_len + 1 > CTX_MAX) m->broken = 1;
    m->chain[m->chain_len++] = prev;
    if (m->f->aligned) {
        int r = target_row(m->chain, m->chain_len);
        for (int j = 0; j < V; j++) logits[j] = m->f->t[r][j] + m->f->d[r][j];
    } else
        memcpy(logits, m->f->d[draft_row(m->chain, m->chain_len, d)], sizeof(float) * V);
    if (list) si_list(logits, g_dtop, list);
    (void)err;
    return 0;
}

static int si_verify(void *ctx, const int32_t *seq, int n, float *logits, int32_t *lists, mtplx_err *err) {
    stand_in *m = ctx;
    if (m->last_n || m->len + n > CTX_MAX) {
        m->broken = 1;
        return err_set(err, MTPLX_EINTERNAL, "stand-in: verify without commit");
    }
    for (int r = 0; r < n; r++) {
        m->ctx[m->len++] = seq[r];
        memcpy(logits + (size_t)r * V, m->f->t[target_row(m->ctx, m->len)], sizeof(float) * V);
        if (lists) si_list(logits + (size_t)r * V, g_top, lists + (size_t)r * (2 * g_top + 2));
    }
    m->last_n = n;
    return 0;
}

static int si_commit(void *ctx, const int32_t *seq, int n, int keep, mtplx_err *err) {
    stand_in *m = ctx;
    if (n != m->last_n || keep < 1 || keep > n) {
        m->broken = 1;
        return err_set(err, MTPLX_EINTERNAL, "stand-in: commit %d of %d rows after a verify of %d", keep, n, m->last_n);
    }
    m->len -= n - keep;
    m->last_n = 0;
    (void)seq;
    return 0;
}

/* ---------------- toy constraint (structured output) ---------------- */

/* Allowed next ids after t[0..n): not the previous id, never 0 after an odd number of tokens. The
 * generation is complete after "2 1". The state is the token list: advance pushes, rollback pops. */
static int toy_allowed(const int32_t *t, int n, int j) { return !(n > 0 && t[n - 1] == j) && !(j == 0 && n % 2 == 1); }
static int toy_complete(const int32_t *t, int n) { return n >= 2 && t[n - 2] == 2 && t[n - 1] == 1; }

typedef struct {
    int32_t t[CTX_MAX];
    int n;
    int bad; /* a forbidden token was advanced or rollback went too far */
} toy_con;

static toy_con TOY;

static const uint32_t *toy_mask(void *ctx, mtplx_err *err) {
    static uint32_t m;
    toy_con *c = ctx;
    m = 0;
    for (int j = 0; j < V; j++)
        if (toy_allowed(c->t, c->n, j)) m |= 1u << j;
    (void)err;
    return &m;
}
static int toy_advance(void *ctx, int32_t tok, mtplx_err *err) {
    toy_con *c = ctx;
    if (!toy_allowed(c->t, c->n, tok) || c->n >= CTX_MAX) {
        c->bad = 1;
        return err_set(err, MTPLX_EINVAL, "toy constraint: %d not allowed", tok);
    }
    c->t[c->n++] = tok;
    return 0;
}
static void toy_rollback(void *ctx, int n) {
    toy_con *c = ctx;
    if (n > c->n) c->bad = 1, n = c->n;
    c->n -= n;
}
static int toy_ended(void *ctx) {
    toy_con *c = ctx;
    return toy_complete(c->t, c->n);
}
static const gen_constraint k_toy = {&TOY, V, toy_mask, toy_advance, toy_rollback, toy_ended};
/* the same constraint over a tokenizer one id short of the model's vocabulary: its masks say nothing of
 * id V - 1, which the engine must then never allow */
static const gen_constraint k_toy_short = {&TOY, V - 1, toy_mask, toy_advance, toy_rollback, toy_ended};
static int CONSTRAINED; /* 1: the rig and the reference use the toy constraint; 2: k_toy_short */

/* ---------------- branch oracle ---------------- */

typedef struct {
    cycle_rand base; /* first */
    int path[MAXDEC];  /* branch taken at each decision of this run */
    int nbr[MAXDEC];   /* live branches at each decision */
    int k;             /* decisions made in this run */
    int fixed;         /* decisions < fixed replay path[]; later ones take their first branch */
    double w;          /* probability of the path so far */
    int bad;           /* an inconsistency (too many decisions, a representative u that misses) */
} oracle;

static double or_draw(cycle_rand *r, const sampler_dist *d) {
    oracle *o = (oracle *)r;
    if (o->k >= MAXDEC) {
        o->bad = 1;
        return 0;
    }
    if (o->k >= o->fixed) {
        o->path[o->k] = 0;
        o->nbr[o->k] = d->n;
    }
    int i = o->path[o->k++];
    double c = 0; /* the left end of i's interval, summed as sampler_dist_sample_index sums */
    for (int j = 0; j < i; j++) c += d->probs[j];
    if (sampler_dist_sample_index(d, c) != i) o->bad = 1; /* i's interval is empty in double */
    o->w *= d->probs[i];
    return c;
}

static double or_accept(cycle_rand *r, double ratio) {
    oracle *o = (oracle *)r;
    if (o->k >= MAXDEC) {
        o->bad = 1;
        return 0;
    }
    const int two = ratio > 0 && ratio < 1;
    if (o->k >= o->fixed) {
        o->path[o->k] = 0;
        o->nbr[o->k] = two ? 2 : 1;
    }
    int b = o->path[o->k++];
    if (!two) return 0; /* ratio >= 1: u = 0 accepts (w *= 1); ratio <= 0: u = 0 rejects */
    o->w *= b == 0 ? ratio : 1 - ratio;
    return b == 0 ? 0 : ratio; /* u < ratio accepts, u = ratio rejects */
}

/* Advance to the next path (depth-first). Returns 0 when every path was visited. */
static int oracle_next(oracle *o) {
    for (int j = o->k - 1; j >= 0; j--)
        if (o->path[j] + 1 < o->nbr[j]) {
            o->path[j]++;
            o->fixed = j + 1;
            return 1;
        }
    return 0;
}

/* ---------------- enumeration ---------------- */

/* Everything that carries from one cycle to the next. */
typedef struct {
    int32_t toks[NMAX];
    int n, done;
    int32_t x0;
    const char *finish;
    int32_t counts[V], seen_ids[V], n_seen;
    uint8_t seen[V];
    int32_t ctx[CTX_MAX];
    int len;
    int broken;
} snapshot;

typedef struct {
    gen_params p;
    sampler *smp;
    sampler_dist pd, q[GEN_MAX_DEPTH], resid;
    float logits[(GEN_MAX_DEPTH + 1) * V], dlogits[V];
    int32_t tops[(GEN_MAX_DEPTH + 1) * (2 * MODEL_TOP_MAX + 2)], dtops[2 * MODEL_TOP_MAX + 2];
    int32_t toks[NMAX];
    gen_stats st;
    cycle_state c;
    stand_in m;
    cycle_model cm;
} rig;

static void snap_take(const rig *g, snapshot *s) {
    memset(s, 0, sizeof *s);
    memcpy(s->toks, g->c.toks, sizeof(int32_t) * (size_t)g->c.n);
    s->n = g->c.n;
    s->done = g->c.done;
    s->x0 = g->c.x0;
    s->finish = g->c.finish;
    memcpy(s->counts, g->smp->counts, sizeof s->counts);
    memcpy(s->seen_ids, g->smp->seen_ids, sizeof s->seen_ids);
    memcpy(s->seen, g->smp->seen, sizeof s->seen);
    s->n_seen = g->smp->n_seen;
    memcpy(s->ctx, g->m.ctx, sizeof(int32_t) * (size_t)g->m.len);
    s->len = g->m.len;
    s->broken = g->m.broken || (!s->done && g->m.last_n); /* a cycle that goes on must have committed */
    if (CONSTRAINED && (TOY.bad || TOY.n != g->c.n || memcmp(TOY.t, g->c.toks, sizeof(int32_t) * (size_t)g->c.n)))
        s->broken = 1; /* the constraint must hold exactly the emitted tokens */
}

static void snap_restore(rig *g, const snapshot *s) {
    memcpy(g->c.toks, s->toks, sizeof s->toks);
    g->c.n = s->n;
    g->c.done = s->done;
    g->c.x0 = s->x0;
    g->c.finish = s->finish;
    memcpy(g->smp->counts, s->counts, sizeof s->counts);
    memcpy(g->smp->seen_ids, s->seen_ids, sizeof s->seen_ids);
    memcpy(g->smp->seen, s->seen, sizeof s->seen);
    g->smp->n_seen = s->n_seen;
    memcpy(g->m.ctx, s->ctx, sizeof s->ctx);
    g->m.len = s->len;
    g->m.last_n = 0;
    g->m.broken = 0;
    memcpy(TOY.t, s->toks, sizeof(int32_t) * (size_t)s->n); /* after a cycle the constraint holds the emitted tokens */
    TOY.n = s->n;
}

static int seq_index(const int32_t *t, int n) {
    int k = 0;
    for (int i = n - 1; i >= 0; i--) k = k * V + t[i];
    return k;
}

#define NSEQ 4096 /* V^NMAX */

/* One frontier: the states with n emitted tokens, indexed by their sequence. */
typedef struct {
    double prob[NSEQ];
    snapshot s[NSEQ];
    uint8_t live[NSEQ];
} level;

static level LV[NMAX + 1];
static const int32_t k_prompt[2] = {1, 2};

typedef struct {
    double law[NMAX + 1][NSEQ]; /* law[n][seq]: probability that the completion is exactly seq */
    long paths;                 /* cycle paths replayed */
    double p_pos[GEN_MAX_DEPTH]; /* expected number of accepted drafts at each position */
    double p_bonus;             /* expected number of bonus tokens after a full block of `depth` drafts */
    int failed;                 /* merge mismatch, protocol violation, oracle inconsistency */
} result;

static result RES, RES_AR;

/* Add one leaf: the state reached with probability w. */
static void leaf(rig *g, double w, result *res) {
    snapshot s;
    snap_take(g, &s);
    if (s.broken) {
        res->failed = 1;
        return;
    }
    int k = seq_index(s.toks, s.n);
    if (s.done) {
        res->law[s.n][k] += w;
        return;
    }
    level *L = &LV[s.n];
    if (!L->live[k]) {
        L->live[k] = 1;
        L->s[k] = s;
        L->prob[k] = w;
    } else {
        if (memcmp(&L->s[k], &s, sizeof s)) res->failed = 1; /* same tokens, different state */
        L->prob[k] += w;
    }
}

/* Replay every path of one cycle from state `from` (reached with probability w0); each end state
 * becomes a leaf. */
static void enumerate(rig *g, const snapshot *from, double w0, result *res) {
    oracle o = {{or_draw, or_accept}, {0}, {0}, 0, 0, 1, 0};
    mtplx_err e;
    do {
        o.k = 0;
        o.w = w0;
        g->st = (gen_stats){0};
        snap_restore(g, from);
        int rc = cycle_step(&g->c, &g->cm, &o.base, &e);
        res->paths++;
        if (rc || o.bad) {
            if (rc) fprintf(stderr, "  cycle error: %s\n", e.msg);
            res->failed = 1;
            return;
        }
        for (int d = 0; d < GEN_MAX_DEPTH; d++) res->p_pos[d] += o.w * g->st.accepted_per_position[d];
        if (g->p.depth > 0 && g->st.accepted == g->p.depth && g->c.n == from->n + g->p.depth + 1)
            res->p_bonus += o.w;
        if (o.w > 0) leaf(g, o.w, res);
    } while (oracle_next(&o));
}

typedef struct {
    const char *name;
    float temperature, top_p;
    int top_k;
    float min_p, presence, frequency, repetition;
    int stop_id; /* -1: none */
} setting;

static const setting k_settings[] = {
    {"T=1", 1.0f, 1.0f, 0, 0, 0, 0, 1, -1},
    {"T=0.8 top_k 3 top_p 0.8 min_p 0.05", 0.8f, 0.8f, 3, 0.05f, 0, 0, 1, -1},
    {"penalties pres 0.5 freq 0.25 rep 1.5", 1.0f, 1.0f, 0, 0, 0.5f, 0.25f, 1.5f, -1},
    {"T=1.25 top_k 2 pres -0.5 freq 0.75", 1.25f, 1.0f, 2, 0, -0.5f, 0.75f, 1, -1},
    {"greedy", 0.0f, 1.0f, 0, 0, 0, 0, 1, -1},
    {"stop id 3, top_p 0.9", 1.0f, 0.9f, 0, 0, 0, 0, 1, 3},
};
#define N_SETTINGS (int)(sizeof k_settings / sizeof k_settings[0])

static rig G;

static void rig_params(const setting *s, int depth, float conf, int max_tokens) {
    gen_params_default(&G.p);
    G.p.temperature = s->temperature;
    G.p.top_p = s->top_p;
    G.p.top_k = s->top_k;
    G.p.min_p = s->min_p;
    G.p.presence_penalty = s->presence;
    G.p.frequency_penalty = s->frequency;
    G.p.repetition_penalty = s->repetition;
    G.p.max_tokens = max_tokens;
    G.p.depth = depth;
    G.p.draft_min_conf = conf;
    G.p.constraint = CONSTRAINED == 2 ? &k_toy_short : CONSTRAINED ? &k_toy : NULL;
    if (s->stop_id >= 0) {
        G.p.stop_ids[0] = s->stop_id;
        G.p.n_stop_ids = 1;
    }
}

/* The exact law of the completion for family f, setting s, depth (conf: adaptive), max_tokens
 * (broken: the debug-only broken residual) into res->law. Returns 0, or -1 when the enumeration
 * failed (res->failed). */
static int exact_law(const family *f, const setting *s, int depth, float conf, int max_tokens, int broken,
                     result *res) {
    memset(res, 0, sizeof *res);
    memset(LV, 0, sizeof LV);
    rig_params(s, depth, conf, max_tokens);
    G.p.debug_broken_residual = broken;
    mtplx_err e;
    if (gen_params_validate(&G.p, V, &e)) {
        fprintf(stderr, "  params: %s\n", e.msg);
        return -1;
    }
    sampler_reset(G.smp);
    sampler_note_prompt(G.smp, k_prompt, 2);
    cycle_init(&G.c, &G.p, V, G.smp, &G.pd, G.q, &G.resid, G.logits, G.dlogits, G.toks, NULL, NULL, &G.st);
    if (LISTS) cycle_use_lists(&G.c, G.tops, G.dtops);
    g_top = G.c.top, g_dtop = G.c.dtop;
    memset(&G.m, 0, sizeof G.m);
    G.m.f = f;
    memcpy(G.m.ctx, k_prompt, sizeof k_prompt);
    G.m.len = 2;
    G.cm = (cycle_model){&G.m, si_draft, si_verify, si_commit};
    memcpy(G.logits, f->t[target_row(k_prompt, 2)], sizeof(float) * V); /* the prefill's last row */
    /* first token: from the fresh state */
    {
        oracle o = {{or_draw, or_accept}, {0}, {0}, 0, 0, 1, 0};
        do {
            o.k = 0;
            o.w = 1;
            sampler_reset(G.smp);
            sampler_note_prompt(G.smp, k_prompt, 2);
            G.c.n = 0;
            G.c.done = 0;
            G.c.finish = NULL;
            TOY.n = 0;
            TOY.bad = 0;
            if (cycle_first(&G.c, G.logits, &o.base, &e) || o.bad) {
                res->failed = 1;
                return -1;
            }
            res->paths++;
            leaf(&G, o.w, res);
        } while (oracle_next(&o));
    }
    for (int n = 1; n < max_tokens; n++)
        for (int k = 0; k < NSEQ; k++)
            if (LV[n].live[k]) enumerate(&G, &LV[n].s[k], LV[n].prob[k], res);
    return res->failed ? -1 : 0;
}

/* ---------------- the AR law, computed independently ---------------- */

/* p(.|context) per the documented sampler order: penalties (repetition on prompt + completion ids,
 * presence/frequency on completion counts, in float), temperature, top_k, softmax, top_p, min_p. */
static void ref_dist(const setting *s, const int32_t *comp, int n, double *out) {
    int32_t ctx[CTX_MAX];
    memcpy(ctx, k_prompt, sizeof k_prompt);
    memcpy(ctx + 2, comp, sizeof(int32_t) * (size_t)n);
    float l[V];
    memcpy(l, G.m.f->t[target_row(ctx, n + 2)], sizeof l);
    if (CONSTRAINED) /* the mask comes first: -inf ids take no penalty and no mass */
        for (int j = 0; j < V; j++)
            if (!toy_allowed(comp, n, j) || (CONSTRAINED == 2 && j == V - 1)) l[j] = NI;
    for (int j = 0; j < V; j++) {
        int cnt = 0, seen = j == k_prompt[0] || j == k_prompt[1];
        for (int i = 0; i < n; i++) cnt += comp[i] == j;
        if (l[j] == NI || !(seen || cnt)) continue;
        if (s->repetition != 1.0f) l[j] = l[j] > 0 ? l[j] / s->repetition : l[j] * s->repetition;
        if (cnt) l[j] -= s->frequency * (float)cnt + s->presence;
    }
    int order[V]; /* rank: larger logit first, lower id on ties */
    for (int j = 0; j < V; j++) order[j] = j;
    for (int a = 0; a < V; a++)
        for (int b = a + 1; b < V; b++)
            if (l[order[b]] > l[order[a]] || (l[order[b]] == l[order[a]] && order[b] < order[a])) {
                int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
    for (int j = 0; j < V; j++) out[j] = 0;
    if (s->temperature == 0) {
        out[order[0]] = 1;
        return;
    }
    int keep = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    double pr[V], sum = 0;
    for (int r = 0; r < keep; r++) {
        pr[r] = l[order[r]] == NI ? 0 : exp(((double)l[order[r]] - l[order[0]]) / s->temperature);
        sum += pr[r];
    }
    for (int r = 0; r < keep; r++) pr[r] /= sum;
    if (s->top_p < 1) {
        double before = 0;
        int k = 0;
        while (k < keep && pr[k] > 0 && (k == 0 || before < s->top_p)) before += pr[k++];
        keep = k;
        sum = 0;
        for (int r = 0; r < keep; r++) sum += pr[r];
        for (int r = 0; r < keep; r++) pr[r] /= sum;
    }
    if (s->min_p > 0) {
        sum = 0;
        for (int r = 0; r < keep; r++) {
            if (pr[r] < s->min_p * pr[0]) pr[r] = 0;
            sum += pr[r];
        }
        for (int r = 0; r < keep; r++) pr[r] /= sum;
    }
    for (int r = 0; r < keep; r++) out[order[r]] = pr[r];
}

/* law[n][seq] of AR sampling by recursion over prefixes. */
static void ref_law(const setting *s, int max_tokens, int32_t *prefix, int n, double w, double law[][NSEQ]) {
    double pr[V];
    ref_dist(s, prefix, n, pr);
    for (int j = 0; j < V; j++) {
        if (pr[j] == 0) continue;
        prefix[n] = j;
        if (n + 1 == max_tokens || j == s->stop_id || (CONSTRAINED && toy_complete(prefix, n + 1)))
            law[n + 1][seq_index(prefix, n + 1)] += w * pr[j];
        else
            ref_law(s, max_tokens, prefix, n + 1, w * pr[j], law);
    }
}

static double REF[NMAX + 1][NSEQ];

/* max |a - b| over all sequences, and |Σ a - 1|. */
static double law_diff(double a[][NSEQ], double b[][NSEQ], double *mass) {
    double m = 0, s = 0;
    for (int n = 0; n <= NMAX; n++)
        for (int k = 0; k < NSEQ; k++) {
            double d = fabs(a[n][k] - b[n][k]);
            if (d > m) m = d;
            s += a[n][k];
        }
    *mass = fabs(s - 1);
    return m;
}

static double g_worst, g_worst_ar; /* largest law differences seen: speculative, depth-0 enumeration */

/* One configuration: exact law at `depth` vs the independent AR law and the enumerated depth-0 law. */
static void check_config(int fi, int si, int depth, float conf, int max_tokens) {
    const family *f = &k_families[fi];
    const setting *s = &k_settings[si];
    G.m.f = f;
    memset(REF, 0, sizeof REF);
    int32_t prefix[NMAX];
    ref_law(s, max_tokens, prefix, 0, 1.0, REF);
    if (exact_law(f, s, 0, 0, max_tokens, 0, &RES_AR) || exact_law(f, s, depth, conf, max_tokens, 0, &RES)) {
        T_FAIL("%s / %s depth %d: enumeration failed (cycle error, protocol violation or unequal states "
               "with equal tokens)", f->name, s->name, depth);
        return;
    }
    double mass, mass_ar;
    double d_spec = law_diff(RES.law, REF, &mass), d_ar = law_diff(RES_AR.law, REF, &mass_ar);
    if (d_spec > g_worst) g_worst = d_spec;
    if (d_ar > g_worst_ar) g_worst_ar = d_ar;
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "  %-14s %-38s depth %d%s N %d: max|spec - AR| %.2e, max|AR enum - AR| %.2e, mass-1 %.1e, "
                "%ld paths, E[acc@3] %.3f, P(bonus) %.3f\n", f->name, s->name, depth, conf > 0 ? " adaptive" : "",
                max_tokens, d_spec, d_ar, mass, RES.paths, RES.p_pos[2], RES.p_bonus);
    CHECK_MSG(d_ar <= TOL && mass_ar <= TOL, "%s / %s: the depth-0 enumeration differs from the AR law by %.3g "
              "(mass off by %.3g): the stand-in or the reference is wrong", f->name, s->name, d_ar, mass_ar);
    CHECK_MSG(d_spec <= TOL && mass <= TOL, "%s / %s depth %d%s: the speculative law differs from the AR law by "
              "%.3g (max over %d-token completions; mass off by %.3g)", f->name, s->name, depth,
              conf > 0 ? " (adaptive)" : "", d_spec, max_tokens, mass);
}

/* Every family x setting at depth 3, 6 tokens: drafts at positions 1-3, the bonus after a full block
 * and the cycles after it, rejections continuing into later cycles, max_tokens cutting K. */
TEST(test_exact_law_depth3_all_families_and_settings) {
    for (int fi = 0; fi < N_FAMILIES; fi++)
        for (int si = 0; si < N_SETTINGS; si++) check_config(fi, si, 3, 0, 6);
}

/* Depths 1, 2, 4 and 5 and adaptive depth 3 (draft_min_conf 0.3: K varies with the drafts' own
 * probabilities), 6 tokens: full blocks + bonus followed by further cycles. */
TEST(test_exact_law_depths_1_2_4_5_adaptive) {
    for (int fi = 0; fi < N_FAMILIES; fi++)
        for (int si = 0; si < N_SETTINGS; si++) {
            check_config(fi, si, 1, 0, 6);
            check_config(fi, si, 2, 0, 6);
            check_config(fi, si, 4, 0, 6);
            check_config(fi, si, 5, 0, 6);
            check_config(fi, si, 3, 0.3f, 6);
        }
}

/* The enumeration really visits what it claims to prove: accepted drafts at position 3 and the
 * bonus after a full block of 3, with positive probability (generic family, T = 1). */
TEST(test_enumeration_covers_position3_and_bonus) {
    G.m.f = &k_families[0];
    REQUIRE(!exact_law(&k_families[0], &k_settings[0], 3, 0, 5, 0, &RES));
    CHECK_MSG(RES.p_pos[2] > 0.01, "accepted drafts at position 3: expected count %g", RES.p_pos[2]);
    CHECK_MSG(RES.p_bonus > 0.01, "bonus after 3 accepted drafts: probability %g", RES.p_bonus);
    REQUIRE(!exact_law(&k_families[4], &k_settings[0], 3, 0, 5, 0, &RES)); /* q = p: always a full block */
    CHECK_NEAR(RES.p_bonus, 1.0, 1e-12);
}

/* The debug-only broken residual must move the law (the proof can see a wrong residual). */
TEST(test_broken_residual_is_not_the_ar_law) {
    const family *f = &k_families[0];
    const setting *s = &k_settings[0];
    G.m.f = f;
    memset(REF, 0, sizeof REF);
    int32_t prefix[NMAX];
    ref_law(s, 5, prefix, 0, 1.0, REF);
    REQUIRE(!exact_law(f, s, 3, 0, 5, 1, &RES));
    double mass, d = law_diff(RES.law, REF, &mass);
    fprintf(stderr, "  broken residual, generic, depth 3: max|law - AR| = %.3g (mass-1 %.1e)\n", d, mass);
    CHECK_MSG(d > 1e-3, "the broken residual changed the law by only %g", d);
}

/* Structured output: masked p and masked q at every position; the exact law equals the AR law of the
 * masked target (families with finite logits: masks never empty a row). */
TEST(test_exact_law_under_a_constraint) {
    CONSTRAINED = 1;
    int configs = 0;
    for (int fi = 0; fi < N_FAMILIES; fi++) {
        int finite = 1;
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < V; j++) finite &= k_families[fi].t[r][j] != NI && k_families[fi].d[r][j] != NI;
        if (!finite) continue;
        for (int si = 0; si < N_SETTINGS; si++)
            for (int depth = 1; depth <= 4; depth++) {
                check_config(fi, si, depth, 0, 6);
                configs++;
            }
    }
    CONSTRAINED = 2; /* a mask shorter than the vocabulary: the ids past it masked too */
    for (int fi = 0; fi < N_FAMILIES; fi++) {
        int finite = 1;
        for (int r = 0; r < ROWS; r++)
            for (int j = 0; j < V; j++) finite &= k_families[fi].t[r][j] != NI && k_families[fi].d[r][j] != NI;
        if (finite) check_config(fi, 0, 3, 0, 6);
    }
    CONSTRAINED = 0;
    CHECK_INT(configs, 3 * N_SETTINGS * 4);
}

/* The same proof with the verify and draft rows given as logits_top lists (cycle_use_lists: what a
 * GPU with a large vocabulary downloads): the settings that truncate (greedy, top_k) build p and q
 * from the lists, the rest keep whole rows; every law still equals the AR law. */
TEST(test_exact_law_with_logits_lists) {
    LISTS = 1;
    g_list_rows = 0;
    for (int fi = 0; fi < N_FAMILIES; fi++)
        for (int si = 0; si < N_SETTINGS; si++) {
            check_config(fi, si, 3, 0, 6);
            check_config(fi, si, 1, 0, 6);
        }
    LISTS = 0;
    CHECK_MSG(g_list_rows > 1000, "only %ld rows came as lists", g_list_rows);
}

int main(void) {
    mtplx_err e;
    if (sampler_new(V, &G.smp, &e) || sampler_dist_init(&G.pd, V, &e) || sampler_dist_init(&G.resid, V, &e)) return 1;
    for (int d = 0; d < GEN_MAX_DEPTH; d++)
        if (sampler_dist_init(&G.q[d], V, &e)) return 1;
    RUN(test_exact_law_depth3_all_families_and_settings);
    RUN(test_exact_law_depths_1_2_4_5_adaptive);
    RUN(test_enumeration_covers_position3_and_bonus);
    RUN(test_broken_residual_is_not_the_ar_law);
    RUN(test_exact_law_under_a_constraint);
    RUN(test_exact_law_with_logits_lists);
    fprintf(stderr, "  largest |speculative law - AR law| over all configurations: %.3g (depth-0 enumeration: %.3g)\n",
            g_worst, g_worst_ar);
    sampler_free(G.smp);
    sampler_dist_free(&G.pd);
    sampler_dist_free(&G.resid);
    for (int d = 0; d < GEN_MAX_DEPTH; d++) sampler_dist_free(&G.q[d]);
    return TEST_SUMMARY();
}
