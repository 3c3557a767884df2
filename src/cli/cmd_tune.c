/* cmd_tune.c — `mtplx tune`: measure AR and MTP depths 1..N on this machine and save the fastest
 * depth for this model (or "none" when AR wins) where `mtplx run` finds it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/bench.h"
#include "../engine/gen_config.h"
#include "../engine/tune.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx tune [--model DIR] [--max-depth N] [--prompts N] [--prompt-len N] [--max-tokens N]\n"
            "                  [--repeats R] [--json]\n"
            "\n"
            "Benchmarks AR and MTP depths 1..N (default 5) like `mtplx bench` (interleaved, same seeds,\n"
            "temperature/top_p/top_k from generation_config.json) and saves the depth with the best\n"
            "median decode tok/s — depth 0 (\"none\") when no depth beats AR or acceptance collapsed —\n"
            "to $MTPLX_HOME/tuning.json (default ~/.mtplx/tuning.json), keyed by the resolved model\n"
            "path, the CPU model and the thread count. `mtplx run` uses it as its default --depth.\n"
            "A depth within 2%% of the best is preferred when deeper.\n"
            "\n"
            "  --max-depth N     deepest depth tried (default 5)\n"
            "  --prompts N       prompts (default 4)   --prompt-len N   tokens each (default 64)\n"
            "  --max-tokens N    per generation (default 128)   --repeats R   passes (default 2)\n"
            "  --json            machine-readable result\n" CLI_DRAFT_QUANT_HELP CLI_DRAFT_VOCAB_HELP);
}

int cmd_tune(int argc, char **argv) {
    const char *model = NULL, *dq = NULL, *dv = NULL;
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
    if (cli_bench_prompts("tune", model, tok, (int)n_prompts, (int)plen, &prompts, &lens)) goto out;
    if (gen_params_from_model(m, &o.base, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    o.base.max_tokens = (int)max_tokens;
    o.n_depths = (int)max_depth + 1;
    for (int k = 0; k < o.n_depths; k++) o.depths[k] = k;
    o.repeats = (int)repeats;
    o.seed = 1;
    o.verbose = !json;
    if (!json) fprintf(stderr, "tune: measuring AR and depths 1..%ld on %ld prompts (%ld tokens each, %ld passes)\n",
                       max_depth, n_prompts, max_tokens, repeats);
    if (bench_decode(m, (const int32_t *const *)prompts, lens, (int)n_prompts, &o, res, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    /* winner: the best depth that beats AR with acceptance that did not collapse; within 2% of the
     * best, prefer deeper */
    int best = 0;
    double best_tps = res[0].median_tok_s, tps[BENCH_MAX_DEPTHS];
    for (int k = 0; k < o.n_depths; k++) tps[k] = res[k].median_tok_s;
    for (int k = 1; k < o.n_depths; k++) {
        double amax = 0;
        for (int d = 0; d < res[k].depth; d++)
            if (res[k].acceptance_per_position[d] > amax) amax = res[k].acceptance_per_position[d];
        if (amax <= 0.05 || res[k].median_tok_s <= res[0].median_tok_s) continue;
        if (best == 0 || res[k].median_tok_s > best_tps) {
            best = k;
            best_tps = res[k].median_tok_s;
        }
    }
    for (int k = best + 1; best > 0 && k < o.n_depths; k++)
        if (res[k].median_tok_s >= 0.98 * best_tps && res[k].median_tok_s > res[0].median_tok_s) best = k;
    if (tune_store(model, best, tps, o.n_depths, &err)) {
        cli_error("tune", "%s", err.msg);
        goto out;
    }
    char *path = tune_path(NULL);
    if (json) {
        json_t *r = json_object();
        for (int k = 0; k < o.n_depths; k++) {
            char key[16];
            snprintf(key, sizeof key, "%d", k);
            json_object_set_new(r, key, json_pack("{s:f, s:f}", "median_decode_tok_s", res[k].median_tok_s,
                                                  "ratio_to_ar", res[k].ratio_to_ar));
        }
        json_t *out = json_pack("{s:s, s:i, s:s, s:s?, s:o}", "model", model, "depth", best, "verdict",
                                best ? "mtp_depth_wins" : "no_mtp_depth_beat_ar", "saved_to", path, "results", r);
        char *s = json_dumps(out, JSON_INDENT(2));
        if (s) puts(s);
        free(s);
        json_decref(out);
    } else {
        for (int k = 0; k < o.n_depths; k++) {
            char name[16];
            snprintf(name, sizeof name, k ? "D%d" : "AR", k);
            printf("%-4s %8.1f tok/s  x%.2f%s\n", name, res[k].median_tok_s, res[k].ratio_to_ar,
                   k == best ? "  <- chosen" : "");
        }
        if (best)
            printf("saved depth %d for %s on this machine to %s\n", best, model, path ? path : "?");
        else
            printf("no MTP depth beat AR: saved \"none\" (depth 0) for %s to %s\n", model, path ? path : "?");
    }
    free(path);
    rc = 0;
out:
    cli_free_prompts(prompts, lens, (int)n_prompts);
    if (tok) tok_free(tok);
    if (m) model_free(m);
    return rc;
}
