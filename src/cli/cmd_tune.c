/* cmd_tune.c — `mtplx tune`: measure AR, MTP depths 1..N and adaptive depths on this machine and device
 * and save the fastest for this model (or "none" when AR wins) where `run`, `chat` and `serve` find it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/bench.h"
#include "../engine/gen_config.h"
#include "../engine/tune.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"

/* The adaptive depths tune tries by default: the best entries of `bench --depths` with an adaptive
 * depth on the embedded and small models, on the CPU (6@0.4: +14-16% over depth 3 on the Xeon VM,
 * bench/decode.md section 6; AMD Zen 5, bench/zen.md) and on an H100 (8@0.4 +10-14%, 6@0.4 +6-7% over
 * depth 3; bench/cuda.md "Session 39"). */
#define TUNE_ADAPTIVE_DEFAULT "6@0.4,8@0.4"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx tune [--model DIR] [--max-depth N] [--adaptive LIST|none] [--prompts N] [--prompt-len N]\n"
            "                  [--prompts-file F] [--max-tokens N] [--repeats R] [--json]\n"
            "\n"
            "Benchmarks AR, MTP depths 1..N (default 5) and the adaptive depths of --adaptive like `mtplx bench`\n"
            "(interleaved, same seeds, temperature/top_p/top_k from generation_config.json) and saves the\n"
            "choice with the best median decode tok/s — depth 0 (\"none\") when nothing beats AR or acceptance\n"
            "collapsed — to $MTPLX_HOME/tuning.json (default ~/.mtplx/tuning.json), keyed by the resolved model\n"
            "path, the device (the CPU model, or the GPU with --device cuda) and the thread count. `mtplx run`,\n"
            "`chat` and `serve` use it as their default depth (with its --draft-min-conf when an adaptive depth\n"
            "won). A fixed depth within 2%% of the best is preferred when deeper; an adaptive depth is chosen\n"
            "only when it beats the best fixed depth by more than 2%%.\n"
            "\n"
            "  --max-depth N     deepest fixed depth tried (default 5)\n"
            "  --adaptive LIST   adaptive depths tried, D@X each (depth D, --draft-min-conf X): default\n"
            "                    %s; none = fixed depths only\n"
            "  --prompts N       prompts (default 4)   --prompt-len N   tokens each (default 64)\n"
            CLI_PROMPTS_FILE_HELP
            "  --max-tokens N    per generation (default 128)   --repeats R   passes (default 2)\n"
            "  --json            machine-readable result\n" CLI_DRAFT_QUANT_HELP CLI_DRAFT_VOCAB_HELP,
            TUNE_ADAPTIVE_DEFAULT);
}

/* Appends the D@X entries of list (comma-separated, or "none") to o after its fixed depths. A list the
 * user typed must fit o; the default list (typed 0) keeps what fits, with a note. Returns 0, or 2 after
 * printing an error. */
static int tune_parse_adaptive(const char *list, int typed, bench_decode_opts *o) {
    if (!strcmp(list, "none")) return 0;
    for (const char *p = list; *p;) {
        const char *entry = p;
        int d, ad;
        float x;
        if (cli_depth_entry(&p, &d, &x, &ad) || !ad || d < 1 || !(x > 0))
            return cli_error("tune", "--adaptive: '%s': expected D@X entries (depth 1..%d, X in (0, 1)) or none", list,
                             GEN_MAX_DEPTH), 2;
        if (o->n_depths >= BENCH_MAX_DEPTHS) {
            if (typed)
                return cli_error("tune", "--adaptive: at most %d entries with the fixed depths", BENCH_MAX_DEPTHS), 2;
            fprintf(stderr, "tune: %d entries at most (AR and the depths included): left out the adaptive ones "
                    "from '%s'\n", BENCH_MAX_DEPTHS, entry);
            return 0;
        }
        o->depths[o->n_depths] = d, o->min_conf[o->n_depths] = x, o->conf_set[o->n_depths++] = 1;
    }
    return 0;
}

/* 1 when entry k beat AR with acceptance that did not collapse. */
static int tune_viable(const bench_depth_result *res, int k) {
    double amax = 0;
    for (int d = 0; d < res[k].depth; d++)
        if (res[k].acceptance_per_position[d] > amax) amax = res[k].acceptance_per_position[d];
    return amax > 0.05 && res[k].median_tok_s > res[0].median_tok_s;
}

/* The entry tune saves, as its index in res (0: AR): the fastest viable fixed depth, or a deeper one
 * within 2% of it; then the fastest viable adaptive entry instead if it beats that by more than 2% (or
 * no fixed depth was viable). */
static int tune_pick(const bench_depth_result *res, const bench_decode_opts *o) {
    int best = 0, ad = 0;
    for (int k = 1; k < o->n_depths; k++) {
        if (!tune_viable(res, k)) continue;
        int *b = o->conf_set[k] ? &ad : &best;
        if (*b == 0 || res[k].median_tok_s > res[*b].median_tok_s) *b = k;
    }
    for (int k = best + 1; best > 0 && k < o->n_depths; k++)
        if (!o->conf_set[k] && tune_viable(res, k) && res[k].median_tok_s >= 0.98 * res[best].median_tok_s) best = k;
    if (ad && (best == 0 || res[ad].median_tok_s > 1.02 * res[best].median_tok_s)) best = ad;
    return best;
}

int cmd_tune(int argc, char **argv) {
    const char *model = NULL, *dq = NULL, *dv = NULL, *pfile = NULL, *adaptive = TUNE_ADAPTIVE_DEFAULT;
    int adaptive_typed = 0;
    long max_depth = 5, n_prompts = 4, plen = 64, max_tokens = 128, repeats = 2;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long *dst = NULL, lo = 1, hi = 100000;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (v && !strcmp(a, "--model")) model = argv[++i];
        else if (v && !strcmp(a, "--draft-quant")) dq = argv[++i];
        else if (v && !strcmp(a, "--draft-vocab")) dv = argv[++i];
        else if (v && !strcmp(a, "--prompts-file")) pfile = argv[++i];
        else if (v && !strcmp(a, "--adaptive")) adaptive = argv[++i], adaptive_typed = 1;
        else if (!strcmp(a, "--max-depth")) dst = &max_depth, hi = BENCH_MAX_DEPTHS - 1;
        else if (!strcmp(a, "--prompts")) dst = &n_prompts;
        else if (!strcmp(a, "--prompt-len")) dst = &plen;
        else if (!strcmp(a, "--max-tokens")) dst = &max_tokens;
        else if (!strcmp(a, "--repeats")) dst = &repeats, hi = BENCH_MAX_REPEATS;
        else {
            cli_error("tune", "unknown or incomplete option '%s' (see mtplx tune --help)", a);
            return 2;
        }
        if (dst) {
            if (cli_parse_long("tune", a, v, lo, hi, dst)) return 2;
            i++;
        }
    }
    if (!model) model = cli_default_model();
    mtplx_err err;
    err_clear(&err);
    mtplx_model *m = NULL;
    tokenizer *tok = NULL;
    int32_t **prompts = NULL;
    int *lens = NULL, rc = 1;
    bench_decode_opts o;
    memset(&o, 0, sizeof o);
    bench_depth_result res[BENCH_MAX_DEPTHS];
    o.n_depths = (int)max_depth + 1;
    for (int k = 0; k < o.n_depths; k++) o.depths[k] = k;
    if (tune_parse_adaptive(adaptive, adaptive_typed, &o)) return 2;
    if (model_load(model, &m, &err) || tok_load(model, &tok, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    cli_load_note("tune", m);
    if (cli_draft_vocab("tune", m, model, dv, &rc) || cli_draft_quant("tune", m, dq, &rc)) goto out;
    if (!model_has_mtp(m)) {
        cli_error("tune", "%s has no MTP head: nothing to tune (plain AR is the only mode)", model);
        goto out;
    }
    if (cli_bench_prompts("tune", model, pfile, tok, (int)n_prompts, (int)plen, &prompts, &lens, NULL, 0)) goto out;
    if (gen_params_from_model(m, &o.base, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    o.base.max_tokens = (int)max_tokens;
    o.repeats = (int)repeats;
    o.seed = 1;
    o.verbose = !json;
    if (!json) {
        fprintf(stderr, "tune: measuring AR, depths 1..%ld", max_depth);
        for (int k = (int)max_depth + 1; k < o.n_depths; k++)
            fprintf(stderr, "%s%d@%g", k == max_depth + 1 ? " and adaptive " : ",", o.depths[k], o.min_conf[k]);
        fprintf(stderr, " on %ld prompts (%ld tokens each, %ld passes)\n", n_prompts, max_tokens, repeats);
    }
    if (bench_decode(m, (const int32_t *const *)prompts, lens, (int)n_prompts, &o, res, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    const int best = tune_pick(res, &o);
    const float best_conf = o.conf_set[best] ? o.min_conf[best] : 0;
    char names[BENCH_MAX_DEPTHS][24];
    const char *np[BENCH_MAX_DEPTHS];
    double tps[BENCH_MAX_DEPTHS];
    for (int k = 0; k < o.n_depths; k++) {
        if (o.conf_set[k]) snprintf(names[k], sizeof names[k], "%d@%g", o.depths[k], o.min_conf[k]);
        else snprintf(names[k], sizeof names[k], "%d", o.depths[k]);
        np[k] = names[k], tps[k] = res[k].median_tok_s;
    }
    if (tune_store(model, o.depths[best], best_conf, np, tps, o.n_depths, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    char *path = tune_path(NULL);
    machine_facts mf;
    machine_facts_get(&mf);
    if (json) {
        json_t *r = json_object();
        for (int k = 0; k < o.n_depths; k++)
            json_object_set_new(r, names[k], json_pack("{s:f, s:f}", "median_decode_tok_s", res[k].median_tok_s,
                                                       "ratio_to_ar", res[k].ratio_to_ar));
        json_t *out = json_pack("{s:s, s:s, s:i, s:f, s:s, s:s?, s:o}", "model", model, "device", mf.device, "depth",
                                o.depths[best], "draft_min_conf", round((double)best_conf * 1e4) / 1e4, "verdict",
                                best ? "mtp_depth_wins" : "no_mtp_depth_beat_ar", "saved_to", path, "results", r);
        char *s = json_dumps(out, JSON_INDENT(2));
        if (s) puts(s);
        free(s);
        json_decref(out);
    } else {
        for (int k = 0; k < o.n_depths; k++)
            printf("%-7s %8.1f tok/s  x%.2f%s\n", k ? names[k] : "AR", res[k].median_tok_s, res[k].ratio_to_ar,
                   k == best ? "  <- chosen" : "");
        if (best && best_conf > 0)
            printf("saved depth %d with adaptive depth %g for %s on %s to %s\n", o.depths[best], best_conf, model,
                   mf.device, path ? path : "?");
        else if (best)
            printf("saved depth %d for %s on %s to %s\n", o.depths[best], model, mf.device, path ? path : "?");
        else
            printf("no MTP depth beat AR: saved \"none\" (depth 0) for %s on %s to %s\n", model, mf.device,
                   path ? path : "?");
    }
    free(path);
    rc = 0;
out:
    cli_free_prompts(prompts, lens, (int)n_prompts);
    if (tok) tok_free(tok);
    if (m) model_free(m);
    return rc;
}
