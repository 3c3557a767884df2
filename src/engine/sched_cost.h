/* sched_cost.h — the MTP depth policy's cost model (docs/architecture.md, "MTP depth under load";
 * bench/batching.md, "Session 6").
 *
 * With n sequences drafting d tokens a cycle, one cycle is one trunk forward of n·(d + 1) rows and
 * d MTP forwards (with the draft heads) of n rows, each of those d + 1 steps also paying the
 * rendezvous (step_ms), and it yields n·(1 + Σ_{i<d} accept[i]) tokens on average. The policy drafts
 * the d that gives the most tokens per millisecond. The costs are this model's on this machine:
 * measured once when the scheduler starts (sched_calibrate), then kept current from the steps it
 * runs; the acceptance from the cycles its sequences report. Pure functions here (tested in
 * tests/unit/test_sched.c); the measuring is in sched.c. */
#ifndef MTPLX_ENGINE_SCHED_COST_H
#define MTPLX_ENGINE_SCHED_COST_H

#include "generate.h"

#define SCHED_COST_BINS 10 /* forwards of about 1, 2, 4, ..., 512 rows */

/* One kind of forward's cost at a few row counts: bin i holds forwards of 2^i to 2^(i+1) - 1 rows. */
typedef struct {
    double rows[SCHED_COST_BINS]; /* the rows its cost was measured at (0: bin empty) */
    double ms[SCHED_COST_BINS];   /* that forward's cost, ms */
} sched_cost_curve;

typedef struct {
    sched_cost_curve trunk;        /* a trunk forward (verify / AR rows of all sequences) */
    sched_cost_curve mtp;          /* an MTP forward with the draft heads of its rows */
    double step_ms;                /* each step's cost besides its forward (waking the sequences) */
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

/* The drafts a cycle should make (0..depth) when n >= 1 sequences run, by tokens per millisecond;
 * ties go to fewer drafts. Returns depth when c is not usable (no trunk or MTP point). */
int sched_depth_best(const sched_costs *c, int n, int depth);

#endif
