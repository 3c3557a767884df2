/* cmd_bench_kernels.c — the kernel-speed modes of `mtplx bench`: --membw (machine read bandwidth),
 * --verify-cost (R-row vs 1-row decode-position forward, AR decode bandwidth use), --prefill N and
 * --draft-cost (one MTP draft step split into layer / head / sampling, per draft format), --matmul
 * (one kernel on random weights, T = 1..R rows).
 * cmd_bench hands over when one of these flags is present. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/bench_kernels.h"
#include "../backend/cpu/cpu_backend.h"
#include "../backend/device.h"
#include "../kernels/cpu.h"
#include "../kernels/matmul.h"
#include "../kernels/threadpool.h"
#include "../model/model.h"
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"

int cmd_bench_is_kernel_mode(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--membw") || !strcmp(argv[i], "--verify-cost") || !strcmp(argv[i], "--prefill") ||
            !strcmp(argv[i], "--draft-cost") || !strcmp(argv[i], "--draft-accept") || !strcmp(argv[i], "--matmul"))
            return 1;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx bench [--membw] [--verify-cost] [--prefill N] [--draft-cost] [--model DIR] [--rows R]\n"
            "                   [--reps N] [--context N] [--membw-mb MB] [--steps N] [--chain N]\n"
            "                   [--draft-quants LIST] [--draft-accept] [--depth D] [--prompts N]\n"
            "                   [--prompt-len N] [--prompts-file F] [--generate N] [--seed S] [--json]\n"
            "       mtplx bench --matmul q4|q8|bf16 [--shape NxK] [--group-size G] [--count N] [--rows R] [--reps N]\n"
            "                   [--json]\n"
            "  --membw         streaming read bandwidth over a buffer of --membw-mb MB (default 2048), one\n"
            "                  thread and all pool threads ($MTPLX_THREADS), best of 3; with --verify-cost the\n"
            "                  buffer is also read once per round between the forwards, and AR decode is\n"
            "                  reported as a fraction of the median of those reads\n"
            "  --verify-cost   median time of an R-row decode-position forward (all rows' logits) / median\n"
            "                  1-row time, R = 1..--rows (default 8), --reps (default 9) interleaved rounds\n"
            "                  after --context (default 256) prefilled tokens; also AR decode tok/s and GB/s\n"
            "                  of weights, and with the sequence state a token moves (GDN states read and\n"
            "                  written, KV read: model_state_bytes_per_token) counted as memory traffic;\n"
            "                  --logits-top K (1..64): each row's K best logits only, as lists, as a top_k = K\n"
            "                  verify takes them (a GPU then downloads 2K+2 words a row, not the vocabulary)\n"
            "  --prefill N     seconds and tokens/s to prefill N random tokens: the best of --reps\n"
            "                  (default 4 here) prefills, the first of which also faults the weights in\n"
            "  --draft-cost    one MTP draft step (layer, draft LM head, sampling q) per draft format, median\n"
            "                  ms over --steps (default 600) steps chained --chain (default 3) deep after\n"
            "                  --context prefilled tokens; formats --draft-quants LIST (default none,q8,q4,\n"
            "                  see --draft-quant; SPEC/nopack = without the VNNI repacking, SPEC@N =\n"
            "                  the draft head over N ids, see --draft-vocab: q4@4096), measured\n"
            "                  interleaved; sampling --temperature (0.6),\n"
            "                  --top-p (0.95), --top-k (20), --min-p (0)\n"
            "  --draft-accept  per draft format, the expected acceptance sum_v min(p, q_d) of draft\n"
            "                  positions d = 1..--depth (default 3), teacher-forced along --prompts N\n"
            "                  (default 4) texts of --prompt-len (default 256) tokens from val_code.txt\n"
            "                  (or --prompts-file F, as in the decode mode);\n"
            "                  same sampler flags and --draft-quants as --draft-cost; --generate N: score N\n"
            "                  tokens sampled from the model after each text instead (seeds --seed + i)\n"
            "  --matmul F      the matmul kernel alone: --count (default 20) random [N x K] weights of\n"
            "                  format F (--shape, default 12352x2048; q4/q8: MLX affine, groups of\n"
            "                  --group-size 32, 64 (default) or 128 inputs, repacked as at load), one pass\n"
            "                  over all of them per round for T = 1..--rows (default 8, at most 256)\n"
            "                  activation rows, --reps (default 9) interleaved rounds; median ms, GB/s of\n"
            "                  weights, TFLOP/s (2·N·K·T per weight) and the ratio to T = 1\n"
            "Timings are wall clock. Kernel path: $MTPLX_KERNEL; quantized activations: $MTPLX_QACT.\n"
            "exit: 0 ok, 1 runtime error, 2 usage error\n");
}

/* --draft-accept's texts: --prompts n of --prompt-len len tokens cut from --prompts-file file (NULL: the
 * model's val_code.txt, cli_bench_prompts), each followed by --generate gen sampled tokens when gen > 0. */
typedef struct {
    int n, len, gen;
    const char *file;
} accept_texts;

static int draft_accept(const char *dir, mtplx_model **ms, char specs[][32], int n, int depth, const accept_texts *tx,
                        uint64_t seed, const sampler_params *sp, int json);

/* --draft-cost: load one model per draft format in `list` (comma-separated --draft-quant specs), measure
 * them interleaved and print one line each (--draft-accept: draft_accept over tx instead). Returns the
 * exit code. */
static int draft_cost(const char *dir, const char *list, int context, int steps, int chain, uint64_t seed,
                      const gen_params *gp, int json, int accept, int depth, const accept_texts *tx) {
    mtplx_model *ms[BENCH_MAX_DRAFT_MODELS] = {0};
    char specs[BENCH_MAX_DRAFT_MODELS][32];
    int n = 0, code = 1;
    mtplx_err err = {0};
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (n == BENCH_MAX_DRAFT_MODELS || len == 0 || len >= sizeof specs[0])
            return cli_error("bench", "--draft-quants: 1..%d comma-separated formats", BENCH_MAX_DRAFT_MODELS), 2;
        memcpy(specs[n], p, len);
        specs[n++][len] = 0;
        p += len + (p[len] == ',');
    }
    sampler_params sp = {gp->temperature, gp->top_p, gp->top_k, gp->min_p, 0, 0, 1};
    if (sampler_params_validate(&sp, &err)) return cli_error("bench", "%s", err.msg), 2;
    bench_draft res[BENCH_MAX_DRAFT_MODELS];
    for (int k = 0; k < n; k++) {
        if (model_load(dir, &ms[k], &err)) {
            cli_error("bench", "%s", err.msg);
            goto out;
        }
        if (!k) cli_load_note("bench", ms[k]);
        /* "<spec>/nopack": the same copy without the VNNI repacking (for comparison) */
        char spec[32];
        snprintf(spec, sizeof spec, "%.31s", specs[k]);
        char *slash = strchr(spec, '/');
        int nopack = slash && !strcmp(slash, "/nopack");
        if (slash) *slash = 0;
        /* "<spec>@N": the draft head over the N most common ids (--draft-vocab N) */
        char *at = strchr(spec, '@');
        if (at) *at = 0;
        if (cli_draft_vocab("bench", ms[k], dir, at ? at + 1 : "0", &code)) goto out;
        const char *prev = getenv("MTPLX_QPACK");
        char saved[16];
        snprintf(saved, sizeof saved, "%s", prev ? prev : "");
        if (nopack) setenv("MTPLX_QPACK", "0", 1);
        int bad = cli_draft_quant("bench", ms[k], spec, &code);
        if (nopack) prev ? setenv("MTPLX_QPACK", saved, 1) : unsetenv("MTPLX_QPACK");
        if (bad) goto out;
    }
    if (accept) {
        code = draft_accept(dir, ms, specs, n, depth, tx, seed, &sp, json);
        goto out;
    }
    if (bench_draft_cost((const mtplx_model *const *)ms, n, context, steps, chain, seed, &sp, res, &err)) {
        cli_error("bench", "%s", err.msg);
        code = 1;
        goto out;
    }
    code = 0;
    int threads = tpool_threads(tpool_global());
    /* on a GPU (--device cuda) the device names the kernel */
    const char *isa = strcmp(be_device_resolved(), "cpu") ? be_device_resolved() : cpu_path_name();
    if (json) {
        printf("{\"kernel\": \"%s\", \"threads\": %d, \"model\": \"%s\", \"context\": %d, \"steps\": %d, "
               "\"draft_cost_ms\": {", isa, threads, dir, context, steps);
        for (int k = 0; k < n; k++)
            printf("%s\"%s\": {\"layer\": %.4f, \"head\": %.4f, \"sample\": %.4f, \"step\": %.4f}", k ? ", " : "",
                   specs[k], res[k].layer_s * 1e3, res[k].head_s * 1e3, res[k].sample_s * 1e3, res[k].step_s * 1e3);
        printf("}}\n");
    } else {
        printf("kernel %s, %d threads; %s: one draft step, median ms over %d steps (T %g, top_p %g, top_k %d)\n",
               isa, threads, dir, steps, sp.temperature, sp.top_p, sp.top_k);
        printf("%-12s %8s %8s %8s %8s\n", "draft", "layer", "head", "sample", "step");
        for (int k = 0; k < n; k++)
            printf("%-12s %8.4f %8.4f %8.4f %8.4f\n", specs[k], res[k].layer_s * 1e3, res[k].head_s * 1e3,
                   res[k].sample_s * 1e3, res[k].step_s * 1e3);
    }
out:
    for (int k = 0; k < n; k++) model_free(ms[k]);
    return code;
}

/* --draft-accept on the loaded models ms[n] (draft formats specs[n]); with gen > 0 each text is its
 * prompt plus gen tokens sampled (AR, seed + i) from the model, and only the generated part is
 * scored. Returns the exit code. */
static int draft_accept(const char *dir, mtplx_model **ms, char specs[][32], int n, int depth, const accept_texts *tx,
                        uint64_t seed, const sampler_params *sp, int json) {
    const int n_prompts = tx->n, plen = tx->len, gen = tx->gen;
    char psrc[PATH_MAX + 64]; /* the text the prompts were cut from */
    mtplx_err err = {0};
    tokenizer *tok = NULL;
    int32_t **prompts = NULL;
    int *lens = NULL, code = 1;
    double alpha[BENCH_MAX_DRAFT_MODELS * 16];
    long npos = 0;
    if (tok_load(dir, &tok, &err)) {
        cli_error("bench", "%s", err.msg);
        return 1;
    }
    int from[1000] = {0};
    if (cli_bench_prompts("bench", dir, tx->file, tok, n_prompts, plen, &prompts, &lens, psrc, sizeof psrc)) goto out;
    for (int i = 0; i < n_prompts && gen > 0; i++) {
        gen_params gp;
        gen_params_default(&gp);
        gp.temperature = sp->temperature, gp.top_p = sp->top_p, gp.top_k = sp->top_k, gp.min_p = sp->min_p;
        gp.max_tokens = gen, gp.seed = seed + (uint64_t)i, gp.seed_set = 1;
        int32_t *out = NULL, *text = NULL;
        int n_out = 0;
        if (gen_run(ms[0], prompts[i], lens[i], &gp, NULL, NULL, &out, &n_out, NULL, &err) ||
            !(text = realloc(prompts[i], sizeof(int32_t) * (size_t)(lens[i] + n_out)))) {
            free(out);
            cli_error("bench", "generating the texts: %s", err.code ? err.msg : "out of memory");
            goto out;
        }
        memcpy(text + lens[i], out, sizeof(int32_t) * (size_t)n_out);
        free(out);
        prompts[i] = text;
        from[i] = lens[i] - 1;
        lens[i] += n_out;
    }
    if (bench_draft_accept((const mtplx_model *const *)ms, n, (const int32_t *const *)prompts, lens, from, n_prompts,
                           depth, sp, sp, alpha, &npos, &err)) {
        cli_error("bench", "%s", err.msg);
        goto out;
    }
    code = 0;
    if (json) {
        printf("{\"model\": \"%s\", \"positions\": %ld, \"depth\": %d, \"acceptance\": {", dir, npos, depth);
        for (int k = 0; k < n; k++) {
            printf("%s\"%s\": [", k ? ", " : "", specs[k]);
            for (int d = 0; d < depth; d++) printf("%s%.5f", d ? ", " : "", alpha[k * depth + d]);
            printf("]");
        }
        printf("}}\n");
    } else {
        printf("%s: expected acceptance sum_v min(p, q_d), teacher-forced over %ld positions of %s (T %g, top_p %g, "
               "top_k %d)\n", dir, npos, gen > 0 ? "sampled continuations" : psrc, sp->temperature, sp->top_p,
               sp->top_k);
        printf("%-10s", "draft");
        for (int d = 1; d <= depth; d++) printf("   d=%d  ", d);
        printf(" E[tokens/verify] (independent positions)\n");
        for (int k = 0; k < n; k++) {
            printf("%-12s", specs[k]);
            double e = 1, run = 1;
            for (int d = 0; d < depth; d++) {
                printf(" %7.4f ", alpha[k * depth + d]);
                run *= alpha[k * depth + d];
                e += run;
            }
            printf(" %.3f\n", e);
        }
    }
out:
    cli_free_prompts(prompts, lens, n_prompts);
    tok_free(tok);
    return code;
}

/* --matmul: one kernel on random weights; prints one line per T (or one JSON object). Returns the
 * exit code. */
static int matmul_bench(const char *format, int gs, int n, int k, int count, int rows, int reps, uint64_t seed, int json) {
    mtplx_err err = {0};
    bench_matmul_out o;
    if (bench_matmul(format, gs, n, k, count, rows, reps, seed, &o, &err)) {
        cli_error("bench", "%s", err.msg);
        return err.code == MTPLX_EINVAL ? 2 : 1;
    }
    /* on a GPU (--device cuda) the device names the kernel */
    const char *isa = strcmp(be_device_resolved(), "cpu") ? be_device_resolved() : cpu_path_name();
    int threads = tpool_threads(tpool_global());
    if (json) {
        printf("{\"kernel\": \"%s\", \"threads\": %d, \"format\": \"%s\", \"shape\": [%d, %d], \"count\": %d, "
               "\"group_size\": %d, \"bytes\": %.0f, \"reps\": %d, \"ms\": {", isa, threads, format, n, k, count, gs,
               o.bytes, reps);
        for (int T = 1; T <= rows; T++) printf("%s\"%d\": %.4f", T > 1 ? ", " : "", T, o.median_s[T] * 1e3);
        printf("}, \"ratio\": {");
        for (int T = 1; T <= rows; T++) printf("%s\"%d\": %.4f", T > 1 ? ", " : "", T, o.median_s[T] / o.median_s[1]);
        printf("}}\n");
        return 0;
    }
    /* bf16 on the CPU: which of the path's bf16 kernels ran (they differ in speed and bits) */
    const int bf16_cpu = !strcmp(format, "bf16") && !strcmp(be_device_resolved(), "cpu");
    printf("kernel %s%s%s%s, %d threads: %d x [%d x %d] %s%s%.0d, %.1f MB per pass, median of %d rounds\n", isa,
           bf16_cpu ? " (bf16 " : "", bf16_cpu ? kern_matmul_bf16_kernel() : "", bf16_cpu ? ")" : "", threads, count, n,
           k, format, strcmp(format, "bf16") ? " group " : "", strcmp(format, "bf16") ? gs : 0, o.bytes / 1e6, reps);
    for (int T = 1; T <= rows; T++)
        printf("  T=%-2d %9.3f ms  %6.1f GB/s  %7.2f TFLOP/s  %.3fx T=1\n", T, o.median_s[T] * 1e3,
               o.bytes / o.median_s[T] / 1e9, 2.0 * count * n * (double)k * T / o.median_s[T] / 1e12,
               o.median_s[T] / o.median_s[1]);
    return 0;
}

int cmd_bench_kernels(int argc, char **argv) {
    /* these modes time the CPU kernels directly: install the CPU backend's settings (MTPLX_KERNEL,
     * MTPLX_THREADS, ...) the way creating the backend would (docs/architecture.md, "Knobs") */
    cpu_settings cpu;
    mtplx_err kerr;
    err_clear(&kerr);
    if (cpu_settings_from_env(&cpu, &kerr)) return cli_error("bench", "%s", kerr.msg), 2;
    cpu_settings_apply(&cpu);
    int membw = 0, verify = 0, prefill = 0, rows = 8, reps = 9, context = 256, json = 0, reps_set = 0, logits_top = 0;
    int dcost = 0, steps = 600, chain = 3, daccept = 0, depth = 3, n_prompts = 4, plen = 256, gen = 0;
    const char *dquants = "none,q8,q4";
    gen_params gp;
    gen_params_default(&gp);
    gp.temperature = 0.6f, gp.top_p = 0.95f, gp.top_k = 20;
    long membw_mb = 2048;
    unsigned long long seed = 1;
    const char *dir = NULL, *mm_format = NULL, *pfile = NULL;
    int mm_n = 12352, mm_k = 2048, mm_count = 20, mm_gs = 64;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        int r = cli_sampler_flag("bench", argc, argv, &i, &gp, NULL);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "--membw")) membw = 1;
        else if (!strcmp(a, "--draft-cost")) dcost = 1;
        else if (!strcmp(a, "--draft-accept")) daccept = 1;
        else if (!strcmp(a, "--verify-cost")) verify = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!v) return cli_error("bench", "%s needs a value (or is unknown)", a), usage(stderr), 2;
        else if (!strcmp(a, "--prefill")) prefill = atoi(v), i++;
        else if (!strcmp(a, "--model")) dir = v, i++;
        else if (!strcmp(a, "--rows")) rows = atoi(v), i++;
        else if (!strcmp(a, "--reps")) reps = atoi(v), reps_set = 1, i++;
        else if (!strcmp(a, "--context")) context = atoi(v), i++;
        else if (!strcmp(a, "--logits-top")) logits_top = atoi(v), i++;
        else if (!strcmp(a, "--steps")) steps = atoi(v), i++;
        else if (!strcmp(a, "--chain")) chain = atoi(v), i++;
        else if (!strcmp(a, "--draft-quants")) dquants = v, i++;
        else if (!strcmp(a, "--depth")) depth = atoi(v), i++;
        else if (!strcmp(a, "--prompts")) n_prompts = atoi(v), i++;
        else if (!strcmp(a, "--prompt-len")) plen = atoi(v), i++;
        else if (!strcmp(a, "--prompts-file")) pfile = v, i++;
        else if (!strcmp(a, "--generate")) gen = atoi(v), i++;
        else if (!strcmp(a, "--membw-mb")) membw_mb = atol(v), i++;
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--matmul")) mm_format = v, i++;
        else if (!strcmp(a, "--count")) mm_count = atoi(v), i++;
        else if (!strcmp(a, "--group-size")) mm_gs = atoi(v), i++;
        else if (!strcmp(a, "--shape")) {
            if (sscanf(v, "%dx%d", &mm_n, &mm_k) != 2) return cli_error("bench", "--shape wants NxK, got '%s'", v), 2;
            i++;
        }
        else return cli_error("bench", "unknown option %s", a), usage(stderr), 2;
    }
    if (mm_format && rows >= 1 && rows <= BENCH_MATMUL_MAX_ROWS && reps >= 1)
        return matmul_bench(mm_format, mm_gs, mm_n, mm_k, mm_count, rows, reps, seed, json);
    if (mm_format) return cli_error("bench", "--matmul: --rows 1..%d, --reps >= 1", BENCH_MATMUL_MAX_ROWS), 2;
    if (rows < 1 || rows > BENCH_MAX_ROWS || reps < 1 || context < 1 || membw_mb < 1 || prefill < 0)
        return cli_error("bench", "--rows 1..%d, --reps >= 1, --context >= 1, --membw-mb >= 1, --prefill >= 1",
                         BENCH_MAX_ROWS), 2;
    if (logits_top < 0 || logits_top > BE_TOP_MAX || (logits_top && !verify))
        return cli_error("bench", "--logits-top: 1..%d, with --verify-cost", BE_TOP_MAX), 2;
    if (mm_format) return matmul_bench(mm_format, mm_gs, mm_n, mm_k, mm_count, rows, reps, seed, json);
    if (!dir) dir = cli_default_model();
    if (dcost || daccept) {
        if (steps < 1 || chain < 1 || context < 2 || depth < 1 || depth > 16 || n_prompts < 1 || n_prompts > 1000 ||
            plen < 4 || plen > 100000 || gen < 0 || gen > 100000)
            return cli_error("bench", "--steps >= 1, --chain >= 1, --context >= 2, --depth 1..16, --prompts 1..1000, "
                             "--prompt-len 4..100000, --generate 0..100000"), 2;
        const accept_texts tx = {n_prompts, plen, gen, pfile};
        return draft_cost(dir, dquants, context, steps, chain, seed, &gp, json, daccept, depth, &tx);
    }
    mtplx_err err = {0};
    bench_membw bw = {0};
    /* on a GPU (--device cuda) the bandwidth is the GPU's device memory, measured once before the model */
    int on_gpu = strcmp(be_device_resolved(), "cpu") != 0;
    double gpu_gbs = 0;
    char gpu_name[128] = "";
    if (membw && on_gpu && be_device_membw((size_t)membw_mb << 20, 5, &gpu_gbs, gpu_name, sizeof gpu_name, &err)) {
        cli_error("bench", "%s", err.msg);
        return 1;
    }
    if (membw && !on_gpu && bench_membw_measure((size_t)membw_mb << 20, 3, &bw, &err)) {
        cli_error("bench", "%s", err.msg);
        return 1;
    }
    if (on_gpu) bw.bytes = (size_t)membw_mb << 20, bw.gbs_one = bw.gbs_all = gpu_gbs;
    mtplx_model *m = NULL;
    bench_verify vc = {0};
    double pre_s = 0;
    uint64_t wbytes = 0, allbytes = 0;
    if (verify || prefill) {
        if (model_load(dir, &m, &err)) {
            cli_error("bench", "%s", err.msg);
            return 1;
        }
        cli_load_note("bench", m);
        const model_config *c = model_config_of(m);
        size_t bw_bytes = (size_t)membw_mb << 20;
        float *bwbuf = membw && verify && !on_gpu ? bench_membw_buffer(bw_bytes) : NULL;
        if (membw && verify && !on_gpu && !bwbuf) err_set(&err, MTPLX_ENOMEM, "bandwidth buffer: cannot allocate %zu bytes", bw_bytes);
        if (err.code || bench_weight_bytes(dir, c->tie_word_embeddings,
                                              c->n_experts > 0 ? (double)c->n_experts_per_tok / c->n_experts : 1.0,
                                              &wbytes, &allbytes, &err) ||
            (verify && bench_verify_cost(m, rows, context, reps, logits_top, seed, bwbuf, bw_bytes, &vc, &err)) ||
            (prefill && bench_prefill_seconds(m, prefill, reps_set ? reps : 4, seed, &pre_s, &err))) {
            cli_error("bench", "%s", err.msg);
            free(bwbuf);
            model_free(m);
            return 1;
        }
        free(bwbuf);
        if (on_gpu && membw) vc.membw_gbs = gpu_gbs; /* measured before the model, not between forwards */
    }
    const char *isa = cpu_path_name();
    const char *qact = getenv("MTPLX_QACT") && !strcmp(getenv("MTPLX_QACT"), "f32") ? "f32" : "int8";
    int threads = tpool_threads(tpool_global());
    double dec_gbs = verify ? wbytes / vc.median_s[1] / 1e9 : 0;
    /* the sequence state a token moves besides the weights (GDN states, KV over the context) */
    uint64_t sbytes = m && verify ? model_state_bytes_per_token(m, context) : 0;
    double all_gbs = verify ? (double)(wbytes + sbytes) / vc.median_s[1] / 1e9 : 0;
    if (json) {
        printf("{\"kernel\": \"%s\", \"bf16_kernel\": \"%s\", \"threads\": %d, \"quant_activations\": \"%s\"", isa,
               on_gpu ? "" : kern_matmul_bf16_kernel(), threads, qact);
        printf(", \"device\": \"%s\"", be_device_resolved());
        if (membw)
            printf(", \"membw\": {\"bytes\": %zu, \"gbs_one_thread\": %.2f, \"gbs_all_threads\": %.2f}", bw.bytes,
                   bw.gbs_one, bw.gbs_all);
        if (m) printf(", \"model\": \"%s\", \"weight_bytes_per_token\": %llu", dir, (unsigned long long)wbytes);
        if (verify) {
            printf(", \"verify_cost\": {");
            for (int R = 1; R <= rows; R++) printf("%s\"%d\": %.4f", R > 1 ? ", " : "", R, vc.ratio[R]);
            printf("}, \"forward_ms\": {");
            for (int R = 1; R <= rows; R++) printf("%s\"%d\": %.3f", R > 1 ? ", " : "", R, vc.median_s[R] * 1e3);
            printf("}, \"reps\": %d, \"context\": %d, \"logits_top\": %d, \"ar_decode_tok_s\": %.3f, "
                   "\"ar_decode_gbs\": %.2f, \"state_bytes_per_token\": %llu, \"ar_decode_with_state_gbs\": %.2f",
                   reps, context, logits_top, 1.0 / vc.median_s[1], dec_gbs, (unsigned long long)sbytes, all_gbs);
            if (membw)
                printf(", \"membw_interleaved_gbs\": %.2f, \"ar_decode_fraction_of_membw\": %.3f, "
                       "\"ar_decode_with_state_fraction_of_membw\": %.3f",
                       vc.membw_gbs, dec_gbs / vc.membw_gbs, all_gbs / vc.membw_gbs);
        }
        if (prefill) printf(", \"prefill\": {\"tokens\": %d, \"seconds\": %.3f, \"tok_s\": %.2f}", prefill, pre_s, prefill / pre_s);
        printf("}\n");
    } else {
        if (on_gpu) printf("device %s (%s)\n", be_device_resolved(), gpu_name[0] ? gpu_name : "GPU");
        else
            printf("kernel %s (bf16 %s), %d threads, quantized activations %s\n", isa, kern_matmul_bf16_kernel(),
                   threads, qact);
        if (membw && on_gpu)
            printf("GPU device-memory read bandwidth (%zu MB buffer): %.1f GB/s (best of 5)\n", bw.bytes >> 20,
                   gpu_gbs);
        else if (membw)
            printf("memory read bandwidth (%zu MB buffer): %.1f GB/s one thread, %.1f GB/s %d threads\n", bw.bytes >> 20,
                   bw.gbs_one, bw.gbs_all, bw.threads);
        if (verify) {
            printf("%s: %.3f GB of weights read per decoded token; %.1f MB of sequence state moved per token at "
                   "context %d (GDN states read and written, KV read)\n", dir, wbytes / 1e9, sbytes / 1e6, context);
            if (logits_top) printf("logits: each row's %d best only (--logits-top)\n", logits_top);
            for (int R = 1; R <= rows; R++)
                printf("  %2d-row forward: %8.2f ms  (%.3fx 1-row)\n", R, vc.median_s[R] * 1e3, vc.ratio[R]);
            printf("AR decode: %.2f tok/s = %.1f GB/s of weights", 1.0 / vc.median_s[1], dec_gbs);
            if (membw && on_gpu)
                printf(" = %.0f%% of the GPU's %.1f GB/s", 100.0 * dec_gbs / vc.membw_gbs, vc.membw_gbs);
            else if (membw)
                printf(" = %.0f%% of the %.1f GB/s read between the forwards (median of %d rounds)",
                       100.0 * dec_gbs / vc.membw_gbs, vc.membw_gbs, reps);
            printf("\n");
            if (membw)
                printf("  with the sequence state: %.1f GB/s = %.0f%%\n", all_gbs, 100.0 * all_gbs / vc.membw_gbs);
        }
        if (prefill) printf("prefill %d tokens: %.2f s = %.1f tok/s\n", prefill, pre_s, prefill / pre_s);
    }
    model_free(m);
    return 0;
}
