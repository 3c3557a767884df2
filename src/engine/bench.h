/* bench.h — benchmark modes behind `mtplx bench` (and `mtplx tune`). Each mode is one function
 * here so other modes (memory bandwidth, verify cost) can be added next to it without touching
 * the others. */
#ifndef MTPLX_ENGINE_BENCH_H
#define MTPLX_ENGINE_BENCH_H

#include <stdint.h>

#include "generate.h"

#define BENCH_MAX_DEPTHS (GEN_MAX_DEPTH + 1)
#define BENCH_MAX_REPEATS 64

typedef struct {
    int depths[BENCH_MAX_DEPTHS]; /* depths to compare, 0 = AR; run in this order, interleaved */
    int n_depths;
    float min_conf[BENCH_MAX_DEPTHS]; /* per entry draft_min_conf (adaptive depth) when conf_set[k], */
    int conf_set[BENCH_MAX_DEPTHS];   /* else base.draft_min_conf */
    int repeats;                  /* full passes over (prompt x depth); the median pass is reported */
    gen_params base;              /* sampler settings and max_tokens; depth and seed are set per run */
    uint64_t seed;                /* prompt i runs with seed + i at every depth (same seeds) */
    int verbose;                  /* 1: one progress line per pass on stderr */
} bench_decode_opts;

typedef struct {
    int depth;
    float draft_min_conf;         /* the adaptive-depth threshold this entry ran with (0 = fixed depth) */
    double median_tok_s;          /* median over passes of Σ completion tokens / Σ decode seconds */
    double tok_s[BENCH_MAX_REPEATS]; /* per pass */
    double ratio_to_ar;           /* median_tok_s / AR's median_tok_s (0 when AR was not run) */
    double prefill_tok_s;         /* Σ prompt tokens / Σ prefill seconds over all passes */
    int completion_tokens;        /* per pass */
    int cycles, drafted, accepted;/* per pass */
    double acceptance_per_position[GEN_MAX_DEPTH]; /* cycles whose draft d was accepted / cycles */
    double acceptance_rate;       /* accepted / drafted */
    double tokens_per_verify;     /* committed tokens per verify forward */
    double draft_ms_per_cycle;    /* MTP draft (layer + draft head + draft sampler), per cycle */
    double verify_ms_per_cycle;   /* trunk verify forward, per cycle */
    double history_ms_per_cycle;  /* MTP history appends, per cycle */
    double other_ms_per_cycle;    /* everything else in decode (acceptance, sampling, bookkeeping) */
} bench_depth_result;

/* AR and MTP depths on the same prompts and seeds. out[n_depths] is filled in o->depths order.
 * Returns 0 or the first generation error. */
int bench_decode(const mtplx_model *m, const int32_t *const *prompts, const int *lens, int n_prompts,
                 const bench_decode_opts *o, bench_depth_result *out, mtplx_err *err);

#endif
