/* sched_cost.h — the MTP depth policy's cost model (docs/architecture.md, "MTP depth under load";
 * bench/batching.md, "Session 6").
 *
 * With n sequences drafting d tokens a cycle, one cycle is one trunk forward of n sequences × (d + 1)
 * rows and d MTP forwards (with the draft heads) of n rows, plus the sequences' own work between the
 * steps: once a cycle after the trunk step (acceptance, commit, sampling: cycle_ms) and once after each
 * MTP step (a draft's sampling: step_ms), and it yields n·(1 + Σ_{i<d} accept[i]) tokens on average. The
 * policy drafts the d that gives the most tokens per millisecond. (One gap for every step, as before
 * session 18, spread the once-a-cycle work over d + 1 steps: measured at depth 1, it charged a deeper
 * cycle for it d + 1 times and kept the policy shallow — 8 streams of qwen35-small-code on the GPU
 * drafted 1 where 3 was 17% faster; bench/batching.md "Session 18".) The costs are this model's on this machine:
 * measured once when the scheduler starts (sched_calibrate), then kept current from the steps it
 * runs; the acceptance from the cycles its sequences report. Pure functions here (tested in
 * tests/unit/test_sched_cost.c); the measuring is in sched.c.
 *
 * A trunk forward's cost may depend on how its rows split into sequences, not only on their number:
 * attention and the Gated DeltaNet recurrence run per sequence, the recurrence one row after another,
 * and the CPU backend splits some work per sequence. Cycles of n sequences at depth d forward n
 * sequences × (d + 1) rows, so that is the layout measured, and trunk costs are kept per bin of rows
 * a sequence (bench/batching.md, "Session 7"), each a curve over the forward's rows. */
#ifndef MTPLX_ENGINE_SCHED_COST_H
#define MTPLX_ENGINE_SCHED_COST_H

#include "generate.h"

#define SCHED_COST_BINS 10 /* forwards of about 1, 2, 4, ..., 512 rows */
#define SCHED_COST_RBINS 5 /* trunk forwards of 1, 2-3, 4-7, 8-15, 16+ rows per sequence */

/* One kind of forward's cost at a few row counts: bin i holds forwards of 2^i to 2^(i+1) - 1 rows. */
typedef struct {
    double rows[SCHED_COST_BINS]; /* the rows its cost was measured at (0: bin empty) */
    double ms[SCHED_COST_BINS];   /* that forward's cost, ms */
} sched_cost_curve;

typedef struct {
    sched_cost_curve trunk[SCHED_COST_RBINS]; /* a trunk forward (verify / AR rows of all sequences),
                                                 by the bin of its rows per sequence (sched_cost_rbin) */
    sched_cost_curve mtp;          /* an MTP forward with the draft heads of its rows */
    double cycle_ms;               /* the gap after a trunk step (the sequences' acceptance, commit,
                                      sampling and waking), ms, once a cycle */
    double step_ms;                /* the gap after an MTP step (a draft's sampling, waking), ms */
    double accept[GEN_MAX_DEPTH];  /* P(draft i + 1 is accepted) in a cycle that drafts it */
} sched_costs;

/* The bin of a forward of R >= 1 rows. */
int sched_cost_bin(int R);

/* Record a forward of R rows that cost ms into c's bin for R: the first sets it, later ones move it
 * a fifth of the way (rows too, so the bin's point stays where its forwards are). */
void sched_cost_note(sched_cost_curve *c, int R, double ms);

/* The cost of a forward of R rows: linear between the measured points around R; past the last,
 * extrapolated with the last two points' cost per row (never below the last point), before the
 * first, the first point's. Returns < 0 when c holds no point. */
double sched_cost_at(const sched_cost_curve *c, int R);

/* The rows-per-sequence bin of a trunk forward of R rows over n >= 1 sequences (of R / n, rounded down). */
int sched_cost_rbin(int n, int R);

/* Record a trunk forward of R rows over n sequences that cost ms (sched_cost_note into its bin). */
void sched_cost_note_trunk(sched_costs *c, int n, int R, double ms);

/* The cost of a trunk forward of R rows over n sequences: each bin's curve read at R (a bin with no
 * point reads the nearest bin that has one, the lower on a tie), linear in R / n between the bins of
 * 2^b and 2^(b+1) rows a sequence (the last bin: its own curve). < 0 when no bin holds a point. */
double sched_cost_trunk_at(const sched_costs *c, int n, int R);

/* The drafts a cycle should make (0..depth) when n >= 1 sequences run, by tokens per millisecond;
 * ties go to fewer drafts. Returns depth when c is not usable (no trunk or MTP point). */
int sched_depth_best(const sched_costs *c, int n, int depth);

/* The prompt rows a sequence may put into a step while `decoding` >= 1 other sequences decode,
 * about decode_rows rows a step (their recent average), and `prefilling` sequences (this one
 * included) read prompts: the step's prompt rows in all are the largest power of two from 8 whose
 * forward alone costs at most SCHED_PREFILL_STEP_GROWTH of the decoding step more than a 1-row
 * forward, shared evenly — but at least SCHED_PREFILL_MIN_ROWS each (the CPU's knee rule: many
 * prompts arriving together must not crawl behind one decoding stream) and at most prefill_chunk.
 * So while few prompts are read the decoding sequences' delivery gaps grow by about that fraction at
 * most (issue 12's gap bars: p99 at 8 streams, the longest gap beside a 4,000-token prompt); prompts
 * take more, cheaper steps. Measured on the GPU in bench/batching.md, "Session 7". */
#define SCHED_PREFILL_STEP_GROWTH 1.0
#define SCHED_PREFILL_MIN_ROWS 8
int sched_prefill_rows(const sched_costs *c, int decoding, double decode_rows, int prefilling, int prefill_chunk);

#endif
