/* cmd_bench.c — `mtplx bench`: benchmark modes. Each mode is one function (the decode comparison
 * of AR vs MTP depths is the default); a mode is picked by its flag in k_modes, so new modes
 * (memory bandwidth, verify cost) are added as one more entry without touching the others. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/device.h"
#include "../engine/bench.h"
#include "../engine/gen_config.h"
#include "../engine/tune.h"
#include "../kernels/cpu.h"
#include "../kernels/matmul.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"

static void usage_decode(FILE *f) {
    fprintf(f,
            "usage: mtplx bench [--model DIR] [--depths 0,1,2,3] [--prompts N] [--prompt-len N]\n"
            "                   [--prompts-file F] [--max-tokens N] [--repeats R] [--seed S] [--json]\n"
            "                   [sampler flags]\n"
            "\n"
            "Decode speed of plain AR (depth 0) and each MTP depth on the same prompts and seeds.\n"
            "Prompts are cut from the model directory's val_code.txt (--prompts-file: another text; a\n"
            "checkpoint without one takes the embedded model's code sample, said on stderr). Runs are\n"
            "interleaved (for each pass and prompt: AR, D1, D2, ...) and the whole set is repeated; the\n"
            "median pass is reported with the ratio to AR, acceptance per draft position, tokens per\n"
            "verify, and the draft / verify milliseconds per cycle.\n"
            "\n"
            "  --depths LIST     depths to compare (default 0,1,2,3,6@0.4: AR, fixed depths and the\n"
            "                    adaptive depth `run` takes untuned; 0 = AR); D@X = depth D with\n"
            "                    adaptive depth X (--draft-min-conf) for that entry only: 0,3,6@0.5\n"
            "  --prompts N       prompts (default 8)\n"
            "  --prompt-len N    prompt tokens each (default 64)\n" CLI_PROMPTS_FILE_HELP
            "  --repeats R       passes (default 3)\n"
            "  --seed S          prompt i uses seed S+i at every depth (default 1)\n"
            "  --json            machine-readable result\n" CLI_DRAFT_QUANT_HELP CLI_DRAFT_VOCAB_HELP CLI_SAMPLER_HELP
            "Sampler defaults: the model's generation_config.json; --max-tokens defaults to 128.\n"
            "Other modes: --membw, --verify-cost, --prefill, --draft-cost, --draft-accept, --matmul\n"
            "(see mtplx bench --membw --help).\n");
}

/* --depths LIST: comma-separated depths, each optionally D@X (adaptive depth with draft_min_conf X
 * for that entry only). Returns 0, or -1 with a message. */
static int parse_depths(const char *v, bench_decode_opts *o) {
    if (!v || !*v) return cli_error("bench", "--depths needs a list like 0,3,6@0.5"), -1;
    int n = 0;
    for (const char *p = v; *p; n++) {
        int d, ad;
        float x;
        int r = cli_depth_entry(&p, &d, &x, &ad);
        if (r == 1)
            return cli_error("bench", "--depths: '%s': each entry is a depth 0..%d, optionally @X", v, GEN_MAX_DEPTH), -1;
        if (n == BENCH_MAX_DEPTHS) return cli_error("bench", "--depths: at most %d entries", BENCH_MAX_DEPTHS), -1;
        if (r == 2) return cli_error("bench", "--depths: '%s': the @X after a depth is in [0, 1)", v), -1;
        if (r == 3) return cli_error("bench", "--depths: unexpected '%c' in '%s'", *p, v), -1;
        o->depths[n] = d, o->min_conf[n] = x, o->conf_set[n] = ad;
    }
    o->n_depths = n;
    return 0;
}

static int mode_decode(int argc, char **argv) {
    const char *model = NULL, *dq = NULL, *dv = NULL, *pfile = NULL;
    bench_decode_opts o;
    memset(&o, 0, sizeof o);
    int depths_given = 0, json = 0;
    long n_prompts = 8, plen = 64, repeats = 3, l;
    uint64_t seed = 1;
    gen_params flags;
    gen_params_default(&flags);
    unsigned set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = cli_sampler_flag("bench", argc, argv, &i, &flags, &set);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage_decode(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (v && !strcmp(a, "--model")) model = argv[++i];
        else if (v && !strcmp(a, "--draft-quant")) dq = argv[++i];
        else if (v && !strcmp(a, "--draft-vocab")) dv = argv[++i];
        else if (v && !strcmp(a, "--prompts-file")) pfile = argv[++i];
        else if (!strcmp(a, "--depths")) {
            if (parse_depths(v, &o)) return 2;
            depths_given = 1;
            i++;
        } else if (!strcmp(a, "--prompts")) {
            if (cli_parse_long("bench", a, v, 1, 10000, &n_prompts)) return 2;
            i++;
        } else if (!strcmp(a, "--prompt-len")) {
            if (cli_parse_long("bench", a, v, 1, 100000, &plen)) return 2;
            i++;
        } else if (!strcmp(a, "--repeats")) {
            if (cli_parse_long("bench", a, v, 1, BENCH_MAX_REPEATS, &repeats)) return 2;
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_u64("bench", a, v, &seed)) return 2;
            i++;
        } else {
            cli_error("bench", "unknown or incomplete option '%s' (see mtplx bench --help)", a);
            return 2;
        }
    }
    (void)l;
    if (!depths_given) { /* AR, depths 1..3, and what `run` drafts when nothing was tuned */
        for (int k = 0; k < 4; k++) o.depths[k] = k;
        o.depths[4] = GEN_DEFAULT_DEPTH, o.min_conf[4] = GEN_DEFAULT_MIN_CONF, o.conf_set[4] = 1;
        o.n_depths = 5;
    }
    if (!model) model = cli_default_model();
    mtplx_err err;
    err_clear(&err);
    mtplx_model *m = NULL;
    tokenizer *tok = NULL;
    int32_t **prompts = NULL;
    int *lens = NULL, rc = 1;
    char psrc[PATH_MAX + 64]; /* the text the prompts were cut from */
    bench_depth_result res[BENCH_MAX_DEPTHS];
    if (model_load(model, &m, &err) || tok_load(model, &tok, &err)) {
        cli_error("bench", "%s", err.msg);
        goto out;
    }
    cli_load_note("bench", m);
    if (cli_draft_vocab("bench", m, model, dv, &rc) || cli_draft_quant("bench", m, dq, &rc)) goto out;
    if (cli_bench_prompts("bench", model, pfile, tok, (int)n_prompts, (int)plen, &prompts, &lens, psrc, sizeof psrc))
        goto out;
    if (gen_params_from_model(m, &o.base, &err)) {
        cli_error("bench", "%s", err.msg);
        goto out;
    }
    o.base.max_tokens = 128;
    cli_sampler_apply(&o.base, &flags, set); /* every flag typed wins, even one equal to a built-in default */
    o.repeats = (int)repeats;
    o.seed = seed;
    o.verbose = !json;
    if (bench_decode(m, (const int32_t *const *)prompts, lens, (int)n_prompts, &o, res, &err)) {
        cli_error("bench", "%s", err.msg);
        rc = err.code == MTPLX_EINVAL ? 2 : 1;
        goto out;
    }
    machine_facts mf;
    machine_facts_get(&mf);
    /* the kernel path the forwards took (a GPU names itself), as every bench table names it */
    const char *kernel = strcmp(be_device_resolved(), "cpu") ? be_device_resolved() : cpu_path_name();
    /* and on the CPU which of the path's bf16 kernels (they differ in speed and bits) */
    const int on_cpu = !strcmp(be_device_resolved(), "cpu");
    const char *bf16 = on_cpu ? kern_matmul_bf16_kernel() : "";
    const char *commit = cli_build_commit();
    if (json) {
        json_t *rs = json_array();
        for (int k = 0; k < o.n_depths; k++) {
            bench_depth_result *b = &res[k];
            json_t *acc = json_array(), *runs = json_array();
            for (int d = 0; d < b->depth; d++) json_array_append_new(acc, json_real(b->acceptance_per_position[d]));
            for (int r = 0; r < o.repeats; r++) json_array_append_new(runs, json_real(b->tok_s[r]));
            json_array_append_new(
                rs, json_pack("{s:i, s:f, s:f, s:o, s:f, s:f, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:i, s:i, s:i}", "depth",
                              b->depth, "draft_min_conf", b->draft_min_conf, "median_decode_tok_s", b->median_tok_s, "decode_tok_s_per_pass", runs,
                              "ratio_to_ar", b->ratio_to_ar, "prefill_tok_s", b->prefill_tok_s,
                              "acceptance_per_position", acc, "acceptance_rate", b->acceptance_rate,
                              "tokens_per_verify", b->tokens_per_verify, "draft_ms_per_cycle", b->draft_ms_per_cycle,
                              "verify_ms_per_cycle", b->verify_ms_per_cycle, "history_ms_per_cycle",
                              b->history_ms_per_cycle, "other_ms_per_cycle", b->other_ms_per_cycle, "cycles_per_pass",
                              b->cycles, "completion_tokens_per_pass", b->completion_tokens, "drafted_per_pass", b->drafted));
        }
        json_t *out = json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:s, s:i, s:s}, s:{s:i, s:s, s:i, s:i, s:i, s:I, s:f, s:f, s:i, s:f, s:f}, s:o}",
            "mode", "decode", "model", model, "machine", "cpu", mf.cpu, "kernel", kernel, "bf16_kernel", bf16,
            "threads", mf.threads, "commit", commit, "settings", "prompts", (int)n_prompts, "prompts_file", psrc,
            "prompt_len", (int)plen, "max_tokens", o.base.max_tokens, "repeats", o.repeats, "seed",
            (json_int_t)seed, "temperature", o.base.temperature, "top_p", o.base.top_p, "top_k", o.base.top_k,
            "min_p", o.base.min_p, "draft_min_conf", o.base.draft_min_conf, "results", rs);
        char *s = json_dumps(out, JSON_INDENT(2));
        if (s) puts(s);
        free(s);
        json_decref(out);
    } else {
        printf("mtplx bench (decode): %s\n", model);
        printf("machine: %s, kernel %s%s%s%s, %d threads, commit %s\n", mf.cpu, kernel, on_cpu ? " (bf16 " : "", bf16,
               on_cpu ? ")" : "", mf.threads, commit);
        printf("%ld prompts x %ld tokens from %s, max_tokens %d, temperature %g, top_p %g, top_k %d, "
               "min_p %g, seeds %llu.., %d interleaved passes (median)\n",
               n_prompts, plen, psrc, o.base.max_tokens, o.base.temperature, o.base.top_p, o.base.top_k, o.base.min_p,
               (unsigned long long)seed, o.repeats);
        if (o.base.draft_min_conf > 0) printf("adaptive depth: --draft-min-conf %g\n", o.base.draft_min_conf);
        printf("%-6s %10s %7s %10s %7s %9s %9s %9s  %s\n", "depth", "decode/s", "xAR", "tok/verify", "drafts",
               "draft ms", "verify ms", "other ms", "acceptance per position");
        for (int k = 0; k < o.n_depths; k++) {
            bench_depth_result *b = &res[k];
            char name[24];
            if (!b->depth) snprintf(name, sizeof name, "AR");
            else if (b->draft_min_conf > 0) snprintf(name, sizeof name, "D%d@%g", b->depth, b->draft_min_conf);
            else snprintf(name, sizeof name, "D%d", b->depth);
            printf("%-6s %10.1f %7.2f %10.2f %7.2f %9.3f %9.3f %9.3f ", name, b->median_tok_s, b->ratio_to_ar,
                   b->tokens_per_verify, b->cycles ? (double)b->drafted / b->cycles : 0.0, b->draft_ms_per_cycle,
                   b->verify_ms_per_cycle,
                   b->history_ms_per_cycle + b->other_ms_per_cycle);
            for (int d = 0; d < b->depth; d++) printf(" %.3f", b->acceptance_per_position[d]);
            printf("\n");
        }
        printf("(drafts and ms are per cycle = per verify forward; other = MTP history appends + acceptance + "
               "sampling)\n");
    }
    rc = 0;
out:
    cli_free_prompts(prompts, lens, (int)n_prompts);
    if (tok) tok_free(tok);
    if (m) model_free(m);
    return rc;
}

typedef struct {
    const char *flag;           /* selects the mode; NULL = the default mode */
    int (*fn)(int argc, char **argv);
} bench_mode;

static const bench_mode k_modes[] = {
    {NULL, mode_decode},
};

int cmd_bench(int argc, char **argv) {
    /* kernel-speed modes (--membw, --verify-cost, --prefill) live in cmd_bench_kernels.c */
    if (cmd_bench_is_kernel_mode(argc, argv)) return cmd_bench_kernels(argc, argv);
    for (size_t k = 0; k < sizeof k_modes / sizeof k_modes[0]; k++) {
        if (!k_modes[k].flag) continue;
        for (int i = 1; i < argc; i++)
            if (!strcmp(argv[i], k_modes[k].flag)) return k_modes[k].fn(argc, argv);
    }
    for (size_t k = 0; k < sizeof k_modes / sizeof k_modes[0]; k++)
        if (!k_modes[k].flag) return k_modes[k].fn(argc, argv);
    return 2;
}
