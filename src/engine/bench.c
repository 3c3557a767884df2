/* bench.c — benchmark modes; see bench.h. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_decode(const mtplx_model *m, const int32_t *const *prompts, const int *lens, int n_prompts,
                 const bench_decode_opts *o, bench_depth_result *out, mtplx_err *err) {
    if (o->n_depths < 1 || o->n_depths > BENCH_MAX_DEPTHS)
        return err_set(err, MTPLX_EINVAL, "bench: 1..%d depths, got %d", BENCH_MAX_DEPTHS, o->n_depths);
    if (o->repeats < 1 || o->repeats > BENCH_MAX_REPEATS)
        return err_set(err, MTPLX_EINVAL, "bench: repeats must be in [1, %d], got %d", BENCH_MAX_REPEATS, o->repeats);
    if (n_prompts < 1) return err_set(err, MTPLX_EINVAL, "bench: no prompts");
    gen_session *s;
    int rc = gen_session_new(m, &s, err);
    if (rc) return rc;
    /* per depth, per pass accumulators */
    double tok[BENCH_MAX_DEPTHS][BENCH_MAX_REPEATS] = {{0}}, sec[BENCH_MAX_DEPTHS][BENCH_MAX_REPEATS] = {{0}};
    double pre_tok[BENCH_MAX_DEPTHS] = {0}, pre_s[BENCH_MAX_DEPTHS] = {0};
    double dr_s[BENCH_MAX_DEPTHS] = {0}, ve_s[BENCH_MAX_DEPTHS] = {0}, hi_s[BENCH_MAX_DEPTHS] = {0}, de_s[BENCH_MAX_DEPTHS] = {0};
    long cyc[BENCH_MAX_DEPTHS] = {0}, drafted[BENCH_MAX_DEPTHS] = {0}, acc[BENCH_MAX_DEPTHS] = {0};
    long accpos[BENCH_MAX_DEPTHS][GEN_MAX_DEPTH] = {{0}};
    for (int r = 0; r < o->repeats && !rc; r++) {
        for (int i = 0; i < n_prompts && !rc; i++) {
            for (int k = 0; k < o->n_depths; k++) { /* interleaved: AR, D1, D2, ... on one prompt */
                gen_params p = o->base;
                p.depth = o->depths[k];
                if (o->conf_set[k]) p.draft_min_conf = o->min_conf[k];
                p.seed = o->seed + (uint64_t)i;
                p.seed_set = 1;
                gen_stats st;
                rc = gen_session_run(s, prompts[i], lens[i], &p, NULL, NULL, NULL, NULL, &st, err);
                if (rc) {
                    err_prefix(err, "bench depth %d prompt %d", p.depth, i);
                    break;
                }
                tok[k][r] += st.completion_tokens;
                sec[k][r] += st.decode_s;
                pre_tok[k] += st.prompt_tokens;
                pre_s[k] += st.prefill_s;
                dr_s[k] += st.draft_s;
                ve_s[k] += st.verify_s;
                hi_s[k] += st.mtp_history_s;
                de_s[k] += st.decode_s;
                cyc[k] += st.cycles;
                drafted[k] += st.drafted;
                acc[k] += st.accepted;
                for (int d = 0; d < GEN_MAX_DEPTH; d++) accpos[k][d] += st.accepted_per_position[d];
            }
        }
        if (!rc && o->verbose) {
            fprintf(stderr, "bench pass %d/%d:", r + 1, o->repeats);
            for (int k = 0; k < o->n_depths; k++) {
                fprintf(stderr, " D%d", o->depths[k]);
                if (o->conf_set[k]) fprintf(stderr, "@%g", o->min_conf[k]); /* an adaptive entry */
                fprintf(stderr, " %.1f tok/s", sec[k][r] > 0 ? tok[k][r] / sec[k][r] : 0);
            }
            fputc('\n', stderr);
        }
    }
    gen_session_free(s);
    if (rc) return rc;
    double ar = 0;
    for (int k = 0; k < o->n_depths; k++) {
        bench_depth_result *b = &out[k];
        memset(b, 0, sizeof *b);
        b->depth = o->depths[k];
        b->draft_min_conf = o->conf_set[k] ? o->min_conf[k] : o->base.draft_min_conf;
        double v[BENCH_MAX_REPEATS];
        for (int r = 0; r < o->repeats; r++) b->tok_s[r] = v[r] = sec[k][r] > 0 ? tok[k][r] / sec[k][r] : 0;
        qsort(v, (size_t)o->repeats, sizeof v[0], cmp_double);
        b->median_tok_s = o->repeats % 2 ? v[o->repeats / 2] : (v[o->repeats / 2 - 1] + v[o->repeats / 2]) / 2;
        b->prefill_tok_s = pre_s[k] > 0 ? pre_tok[k] / pre_s[k] : 0;
        b->completion_tokens = (int)(tok[k][0]);
        b->cycles = (int)(cyc[k] / o->repeats);
        b->drafted = (int)(drafted[k] / o->repeats);
        b->accepted = (int)(acc[k] / o->repeats);
        for (int d = 0; d < b->depth && d < GEN_MAX_DEPTH; d++)
            b->acceptance_per_position[d] = cyc[k] ? (double)accpos[k][d] / cyc[k] : 0;
        b->acceptance_rate = drafted[k] ? (double)acc[k] / drafted[k] : 0;
        double all_tok = 0;
        for (int r = 0; r < o->repeats; r++) all_tok += tok[k][r];
        b->tokens_per_verify = cyc[k] ? (all_tok - (double)n_prompts * o->repeats) / cyc[k] : 0;
        b->draft_ms_per_cycle = cyc[k] ? 1e3 * dr_s[k] / cyc[k] : 0;
        b->verify_ms_per_cycle = cyc[k] ? 1e3 * ve_s[k] / cyc[k] : 0;
        b->history_ms_per_cycle = cyc[k] ? 1e3 * hi_s[k] / cyc[k] : 0;
        b->other_ms_per_cycle = cyc[k] ? 1e3 * (de_s[k] - dr_s[k] - ve_s[k] - hi_s[k]) / cyc[k] : 0;
        if (b->depth == 0 && !ar) ar = b->median_tok_s;
    }
    for (int k = 0; k < o->n_depths; k++) out[k].ratio_to_ar = ar > 0 ? out[k].median_tok_s / ar : 0;
    return 0;
}
