/* sched_cost.c — the depth policy's cost model; see sched_cost.h. */
#include "sched_cost.h"

int sched_cost_bin(int R) {
    int b = 0;
    while (b + 1 < SCHED_COST_BINS && (R >> (b + 1)) > 0) b++;
    return b;
}

void sched_cost_note(sched_cost_curve *c, int R, double ms) {
    int b = sched_cost_bin(R);
    if (c->rows[b] <= 0) {
        c->rows[b] = R;
        c->ms[b] = ms;
    } else {
        c->rows[b] += 0.2 * (R - c->rows[b]);
        c->ms[b] += 0.2 * (ms - c->ms[b]);
    }
}

double sched_cost_at(const sched_cost_curve *c, int R) {
    int lo = -1, hi = -1, last = -1, prev = -1; /* points below / above R; the last two points */
    for (int b = 0; b < SCHED_COST_BINS; b++) {
        if (c->rows[b] <= 0) continue;
        if (c->rows[b] <= R) lo = b;
        if (c->rows[b] >= R && hi < 0) hi = b;
        prev = last;
        last = b;
    }
    if (last < 0) return -1;
    if (lo >= 0 && hi >= 0) {
        if (lo == hi || c->rows[hi] == c->rows[lo]) return c->ms[lo];
        double f = (R - c->rows[lo]) / (c->rows[hi] - c->rows[lo]);
        return c->ms[lo] + f * (c->ms[hi] - c->ms[lo]);
    }
    if (lo < 0) return c->ms[hi]; /* fewer rows than any point */
    double per_row = 0; /* past the last point */
    if (prev >= 0 && c->rows[last] > c->rows[prev]) per_row = (c->ms[last] - c->ms[prev]) / (c->rows[last] - c->rows[prev]);
    if (per_row < 0) per_row = 0;
    return c->ms[last] + per_row * (R - c->rows[last]);
}

int sched_cost_rbin(int n, int R) {
    int r = R / (n > 0 ? n : 1), b = 0;
    while (b + 1 < SCHED_COST_RBINS && (r >> (b + 1)) > 0) b++;
    return b;
}

void sched_cost_note_trunk(sched_costs *c, int n, int R, double ms) {
    sched_cost_note(&c->trunk[sched_cost_rbin(n, R)], R, ms);
}

/* Bin b's curve at R, or the nearest bin's that holds a point (the lower on a tie); < 0: none. */
static double trunk_bin_at(const sched_costs *c, int b, int R) {
    for (int dist = 0; dist < SCHED_COST_RBINS; dist++)
        for (int side = -1; side <= 1; side += 2) {
            int k = b + side * dist;
            if (k < 0 || k >= SCHED_COST_RBINS || (dist == 0 && side > 0)) continue;
            double ms = sched_cost_at(&c->trunk[k], R);
            if (ms >= 0) return ms;
        }
    return -1;
}

double sched_cost_trunk_at(const sched_costs *c, int n, int R) {
    if (n < 1) n = 1;
    int b = sched_cost_rbin(n, R);
    double lo = trunk_bin_at(c, b, R), r = (double)R / n, r0 = (double)(1 << b);
    if (lo < 0 || b + 1 >= SCHED_COST_RBINS || r <= r0) return lo;
    double hi = trunk_bin_at(c, b + 1, R); /* between two bins' row counts a sequence: linear */
    return lo + (r - r0) / r0 * (hi - lo);
}

int sched_depth_best(const sched_costs *c, int n, int depth) {
    if (n < 1) n = 1;
    if (sched_cost_trunk_at(c, n, n) < 0 || sched_cost_at(&c->mtp, n) < 0) return depth;
    double best = -1, tokens = 1;
    int pick = 0;
    for (int d = 0; d <= depth; d++) {
        if (d > 0) tokens += c->accept[d - 1];
        double ms = sched_cost_trunk_at(c, n, n * (d + 1)) + d * (sched_cost_at(&c->mtp, n) + c->step_ms) + c->cycle_ms;
        double rate = ms > 0 ? n * tokens / ms : 0;
        if (rate > best * (1 + 1e-9)) best = rate, pick = d;
    }
    return pick;
}

int sched_prefill_rows(const sched_costs *c, int decoding, double decode_rows, int prefilling, int prefill_chunk) {
    int dr = decode_rows > decoding ? (int)(decode_rows + 0.5) : decoding, rows = 8;
    double base = sched_cost_trunk_at(c, decoding, dr), one = sched_cost_trunk_at(c, 1, 1);
    for (int k = 16; k <= prefill_chunk * (prefilling > 1 ? prefilling : 1) && base > 0 && one > 0; k *= 2)
        if (sched_cost_trunk_at(c, 1, k) - one <= SCHED_PREFILL_STEP_GROWTH * base) rows = k;
    rows /= prefilling > 1 ? prefilling : 1;
    if (rows < SCHED_PREFILL_MIN_ROWS) rows = SCHED_PREFILL_MIN_ROWS;
    return rows < prefill_chunk ? rows : prefill_chunk;
}
