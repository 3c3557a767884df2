/* test_sched_cost.c — the depth policy's cost model (src/engine/sched_cost.h): the interpolation of
 * measured forward costs and the choice of depth on machines of known shape — a launch-bound GPU
 * (a forward costs the same for 1 or 512 rows: draft as deep as allowed), a compute-bound CPU (cost
 * grows with the rows: AR once many sequences run), and the cases in between. */
#include "../../src/engine/sched_cost.h"
#include "test.h"

TEST(test_bins) {
    CHECK_INT(sched_cost_bin(1), 0);
    CHECK_INT(sched_cost_bin(2), 1);
    CHECK_INT(sched_cost_bin(3), 1);
    CHECK_INT(sched_cost_bin(4), 2);
    CHECK_INT(sched_cost_bin(511), 8);
    CHECK_INT(sched_cost_bin(100000), SCHED_COST_BINS - 1);
}

static int near(double a, double b) { return a - b < 1e-9 && b - a < 1e-9; }

TEST(test_curve) {
    sched_cost_curve c;
    memset(&c, 0, sizeof c);
    CHECK(sched_cost_at(&c, 4) < 0); /* nothing measured */
    sched_cost_note(&c, 4, 2.0);
    CHECK(near(sched_cost_at(&c, 1), 2.0)); /* before the first point: the first point */
    CHECK(near(sched_cost_at(&c, 40), 2.0)); /* one point: no slope to extrapolate with */
    sched_cost_note(&c, 1, 1.0);
    sched_cost_note(&c, 8, 1.0);
    sched_cost_note(&c, 64, 3.0);
    CHECK(near(sched_cost_at(&c, 2), 1.0 + 1.0 / 3.0)); /* between (1, 1) and (4, 2) */
    CHECK(near(sched_cost_at(&c, 6), 1.5));              /* between (4, 2) and (8, 1) */
    CHECK(near(sched_cost_at(&c, 36), 2.0));             /* between (8, 1) and (64, 3) */
    CHECK(near(sched_cost_at(&c, 120), 5.0));            /* past (64, 3) at 2/56 ms a row */
    sched_cost_note(&c, 64, 8.0);                        /* a later forward moves the point a fifth */
    CHECK(near(sched_cost_at(&c, 64), 4.0));
    sched_cost_note(&c, 127, 4.0);                       /* rows too: the bin's point moves to 76.6 */
    CHECK(near(c.rows[6], 64 + 0.2 * 63) && near(c.ms[6], 4.0));
}

/* costs with trunk ms = a + b·R and MTP ms = e + f·R at 1..512 rows, acceptance alpha^(i+1) */
static void costs_make(sched_costs *c, double a, double b, double e, double f, double alpha, double step) {
    memset(c, 0, sizeof *c);
    for (int R = 1; R <= 512; R *= 2) {
        sched_cost_note(&c->trunk[0], R, a + b * R);
        sched_cost_note(&c->mtp, R, e + f * R);
    }
    double p = 1;
    for (int i = 0; i < GEN_MAX_DEPTH; i++) c->accept[i] = p *= alpha;
    c->step_ms = step;
}

TEST(test_depth_choice) {
    sched_costs c;
    /* launch-bound: every forward 1 ms, a draft step 0.1 ms: the deepest pays at any load */
    costs_make(&c, 1.0, 0, 0.1, 0, 0.8, 0);
    for (int n = 1; n <= 64; n *= 2) CHECK_INT(sched_depth_best(&c, n, 5), 5);
    /* compute-bound: 0.1 ms a trunk row and 0.05 an MTP row: a draft row costs as much as the token
     * it may give, so no draft pays once the fixed cost is spread */
    costs_make(&c, 0.2, 0.1, 0.05, 0.05, 0.8, 0);
    CHECK(sched_depth_best(&c, 1, 5) >= 1); /* alone the fixed cost dominates: draft */
    CHECK_INT(sched_depth_best(&c, 16, 5), 0);
    CHECK_INT(sched_depth_best(&c, 64, 5), 0);
    /* the knee in between: flat to 32 rows, then 0.05 ms a row: deep alone, AR at 32 sequences */
    memset(&c, 0, sizeof c);
    for (int R = 1; R <= 512; R *= 2) {
        sched_cost_note(&c.trunk[0], R, R <= 32 ? 1.0 : 1.0 + 0.05 * (R - 32));
        sched_cost_note(&c.mtp, R, 0.1);
    }
    for (int i = 0; i < GEN_MAX_DEPTH; i++) c.accept[i] = 0.7;
    CHECK_INT(sched_depth_best(&c, 1, 3), 3);
    int d8 = sched_depth_best(&c, 8, 3), d32 = sched_depth_best(&c, 32, 3);
    CHECK_MSG(d8 >= d32 && d32 <= 1, "deeper under more load: %d at 8 sequences, %d at 32", d8, d32);
    /* the steps' own cost counts: 5 ms a step makes every extra step a loss against 1 ms forwards */
    costs_make(&c, 1.0, 0, 0.1, 0, 0.5, 5.0);
    CHECK_INT(sched_depth_best(&c, 8, 5), 0);
    /* no draft is ever accepted: ties and losses go to AR */
    costs_make(&c, 1.0, 0, 0.0, 0, 0.0, 0);
    CHECK_INT(sched_depth_best(&c, 4, 5), 0);
    /* nothing measured: the request's depth */
    memset(&c, 0, sizeof c);
    CHECK_INT(sched_depth_best(&c, 4, 3), 3);
}

/* The sequences' work between steps is charged where it happens: once a cycle after the trunk step
 * (cycle_ms), once a draft step after each MTP step (step_ms). Session 18's 8 streams of
 * qwen35-small-code on the GPU: trunk 0.76 ms at 16 rows and 1.042 at 32 (linear between), an MTP step
 * 0.166 ms, acceptance 0.84 / 0.695 / 0.606 by position and ~0.42 ms a cycle besides the forwards at
 * depths 1 and 3 alike. Depth 3 measured 17% faster than depth 1, and that is the choice; the same
 * 0.42 ms spread over a depth-1 cycle's two steps (0.21 a step, the one-gap model) chose depth 1. */
TEST(test_cycle_work_is_charged_once_a_cycle) {
    sched_costs c;
    costs_make(&c, 0.478, 0.01763, 0.166, 0, 0, 0);
    c.accept[0] = 0.84, c.accept[1] = 0.695, c.accept[2] = 0.606;
    c.cycle_ms = 0.42;
    CHECK_INT(sched_depth_best(&c, 8, 3), 3);
    c.cycle_ms = 0, c.step_ms = 0.21; /* the gap of a depth-1 cycle's two steps, charged a step */
    CHECK_MSG(sched_depth_best(&c, 8, 3) < 3, "a gap per step keeps the policy shallow: %d", sched_depth_best(&c, 8, 3));
    /* a costly draft-step gap still stops deep drafting, a costly cycle gap alone does not */
    c.cycle_ms = 5.0, c.step_ms = 0;
    CHECK_INT(sched_depth_best(&c, 8, 3), 3);
    c.cycle_ms = 0, c.step_ms = 5.0;
    CHECK_INT(sched_depth_best(&c, 8, 3), 0);
}

TEST(test_rows_per_sequence) {
    sched_costs c;
    memset(&c, 0, sizeof c);
    CHECK_INT(sched_cost_rbin(1, 1), 0);
    CHECK_INT(sched_cost_rbin(8, 8), 0);
    CHECK_INT(sched_cost_rbin(8, 15), 0); /* rows a sequence, rounded down */
    CHECK_INT(sched_cost_rbin(8, 16), 1);
    CHECK_INT(sched_cost_rbin(8, 32), 2);
    CHECK_INT(sched_cost_rbin(1, 9), 3);
    CHECK_INT(sched_cost_rbin(1, 4096), SCHED_COST_RBINS - 1);
    CHECK(sched_cost_trunk_at(&c, 1, 1) < 0); /* nothing measured */
    sched_cost_note_trunk(&c, 1, 4, 2.0);    /* bin 2 only: every query reads it */
    CHECK(near(sched_cost_trunk_at(&c, 8, 8), 2.0));
    sched_cost_note_trunk(&c, 8, 8, 1.0); /* bin 0 */
    sched_cost_note_trunk(&c, 1, 64, 9.0); /* bin 4 */
    CHECK(near(sched_cost_trunk_at(&c, 8, 8), 1.0));  /* its own bin */
    CHECK(near(sched_cost_trunk_at(&c, 1, 4), 2.0));  /* bin 2 */
    CHECK(near(sched_cost_trunk_at(&c, 1, 16), 9.0)); /* bin 4, before its only point */
    CHECK(near(sched_cost_trunk_at(&c, 4, 8), 1.0));  /* bin 1 empty: bins 0 and 2 as near, the lower */
    CHECK(near(sched_cost_trunk_at(&c, 1, 8), 2.0));  /* bin 3 empty: bins 2 and 4 as near, the lower */
    CHECK(near(sched_cost_trunk_at(&c, 1, 6), 2.0));  /* 6 rows: half way between bin 2 and bin 3 (= bin 2) */
    sched_cost_note_trunk(&c, 1, 2, 1.5);             /* bin 1 */
    CHECK(near(sched_cost_trunk_at(&c, 1, 3), 1.75)); /* 3 rows: half way from bin 1 (1.5) to bin 2 (2.0) */
}

/* A GPU-like machine: a trunk forward costs 0.5 ms + 0.01 ms a row + 0.2 ms a row of its longest
 * sequence (the recurrence runs one row after another). Measured with every row in one sequence (the
 * old calibration), 8 sequences × 4 rows look like 1 × 32 rows and the policy stops drafting; kept
 * per rows-per-sequence bin, it drafts. */
TEST(test_policy_sees_the_split) {
    sched_costs one, split;
    memset(&one, 0, sizeof one);
    memset(&split, 0, sizeof split);
    for (int R = 1; R <= 64; R *= 2) {
        sched_cost_note(&one.trunk[0], R, 0.5 + 0.01 * R + 0.2 * R);
        for (int r = 1; r <= 8 && r <= R; r *= 2) sched_cost_note_trunk(&split, R / r, R, 0.5 + 0.01 * R + 0.2 * r);
        sched_cost_note(&one.mtp, R, 0.15);
        sched_cost_note(&split.mtp, R, 0.15);
    }
    for (int i = 0; i < GEN_MAX_DEPTH; i++) one.accept[i] = split.accept[i] = 0.8;
    int d_one = sched_depth_best(&one, 8, 3), d_split = sched_depth_best(&split, 8, 3);
    CHECK_MSG(d_one == 0 && d_split >= 2, "8 sequences: depth %d from one-sequence costs, %d from split costs", d_one,
              d_split);
    CHECK_INT(sched_depth_best(&split, 1, 3), sched_depth_best(&one, 1, 3)); /* alone both agree */
}

/* Prompt chunks beside decoding sequences: as large as keeps their step within 2x. Costs of the
 * small model on an H200 (bench/batching.md): 0.66 ms a row alone, + 0.03 ms a row. */
TEST(test_prefill_rows) {
    sched_costs c;
    memset(&c, 0, sizeof c);
    for (int R = 1; R <= 512; R *= 2)
        for (int r = 1; r <= 8 && r <= R; r *= 2) sched_cost_note_trunk(&c, R / r, R, 0.66 + 0.03 * (R - 1));
    /* 8 AR streams: a step 0.87 ms of room: 16 rows (0.45), not 32 (0.93) */
    CHECK_INT(sched_prefill_rows(&c, 8, 8.0, 1, 64), 16);
    /* 8 streams at D3: 32 rows a step, 1.59 ms: 32 rows (0.93), not 64 (1.89) */
    CHECK_INT(sched_prefill_rows(&c, 8, 32.0, 1, 64), 32);
    /* the same 32 rows shared by 2 prompts read at once: 16 each; by 7: 8 each at least */
    CHECK_INT(sched_prefill_rows(&c, 8, 32.0, 2, 64), 16);
    CHECK_INT(sched_prefill_rows(&c, 8, 32.0, 7, 64), 8);
    /* 64 streams at D3: 256 rows, 8.3 ms: 256 rows (7.65), 2 prompts 128 each, never past
     * prefill_chunk */
    CHECK_INT(sched_prefill_rows(&c, 64, 256.0, 2, 64), 64);
    CHECK_INT(sched_prefill_rows(&c, 64, 256.0, 2, 200), 128);
    CHECK_INT(sched_prefill_rows(&c, 64, 256.0, 1, 4), 4);
    /* no average yet: one row per decoding sequence */
    CHECK_INT(sched_prefill_rows(&c, 8, 0.0, 1, 64), 16);
    /* a slow forward (a CPU): 8 rows at least */
    memset(&c, 0, sizeof c);
    for (int R = 1; R <= 64; R *= 2) sched_cost_note_trunk(&c, 1, R, 4.0 + 1.0 * R);
    CHECK_INT(sched_prefill_rows(&c, 2, 2.0, 1, 64), 8);
    memset(&c, 0, sizeof c); /* nothing measured: 8 rows each */
    CHECK_INT(sched_prefill_rows(&c, 8, 8.0, 1, 64), 8);
    CHECK_INT(sched_prefill_rows(&c, 8, 8.0, 16, 64), 8);
    CHECK_INT(sched_prefill_rows(&c, 8, 8.0, 16, 4), 4);
}

int main(void) {
    RUN(test_bins);
    RUN(test_curve);
    RUN(test_depth_choice);
    RUN(test_cycle_work_is_charged_once_a_cycle);
    RUN(test_rows_per_sequence);
    RUN(test_policy_sees_the_split);
    RUN(test_prefill_rows);
    return TEST_SUMMARY();
}
