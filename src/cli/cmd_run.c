/* cmd_run.c — `mtplx run`: generate from a prompt, plain AR (--depth 0) or MTP speculative.
 *
 * One process loads the model once and can run many generations (--samples N with seeds
 * S..S+N-1, one JSON line each with --json), reusing one generation session. */
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"
#include "../chat/chat.h"
#include "../chat/reasoning.h"
#include "../engine/constraint.h"
#include "../engine/prefix_cache.h"
#include "../grammar/grammar.h"
#include "../engine/gen_config.h"
#include "../engine/generate.h"
#include "../engine/rng.h"
#include "../engine/sched.h"
#include "../base/clock.h"
#include <pthread.h>
#include "../tokenizer/tokenizer.h"
#include "commands.h"
#include "gen_cli.h"
#include "progress.h"

#define RUN_DEFAULT_THINKING 128 /* thinking budget in front of a grammar (--max-thinking-tokens) */

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx run [--model DIR] (--prompt TEXT | --prompt-file F | --prompt-tokens 1,2,3)\n"
            "                 [--chat] [--samples N [--parallel [--max-seqs M]]] [--seed S] [--depth N]\n"
            "                 [--json] [sampler flags] [--json-schema F | --grammar json] [--max-thinking-tokens N]\n"
            "                 [--cache-dir DIR [--cache-disk BYTES]]\n"
            "\n"
            "Generate a completion. Sampler defaults come from the model's generation_config.json and\n"
            "its EOS ids stop the generation.\n"
            "\n"
            "  --model DIR               checkpoint directory (default: the embedded model)\n"
            "  --prompt TEXT             prompt text (encoded with the model's tokenizer)\n"
            "  --prompt-file F           prompt text read from a file\n"
            "  --prompt-tokens 1,2,3     prompt as token ids\n"
            "  --chat                    render the prompt as a user message with the chat template\n"
            "  --samples N               N generations with seeds S, S+1, ... (default 1)\n"
            "  --parallel                run the N samples at once through the scheduler (continuous\n"
            "                            batching: their forwards are merged; the same tokens as one by\n"
            "                            one); outputs are printed in seed order when all are done, with\n"
            "                            an aggregate line on stderr\n"
            "  --max-seqs M              with --parallel: at most M at once (default min(N, 16))\n"
            "  --seed S                  RNG seed (xoshiro256** seeded by splitmix64; default: random,\n"
            "                            reported)\n"
            "  --depth N                 MTP drafts per cycle, 0 = plain AR (default: what `mtplx tune`\n"
            "                            saved for this model and device, else %d with --draft-min-conf %g)\n"
            "  --json                    one JSON object per generation: text, tokens, seed,\n"
            "                            finish_reason, stats\n"
            "  --quiet                   no progress on stderr (shown for a load or prefill > 1 s)\n"
            "  --cache-dir DIR           the prefix cache on disk, shared with `mtplx serve --cache-dir`: the\n"
            "                            deepest checkpoint of DIR that starts the prompt is restored instead\n"
            "                            of prefilled, and this run's prompt (all but its last token) and\n"
            "                            conversation are saved there for the next run\n"
            "                            (docs/prefix-cache.md); same tokens as cold\n"
            "  --cache-disk BYTES        byte budget of DIR's files (default 8589934592 = 8 GiB)\n"
            "  --json-schema F           structured output: the completion is JSON valid under the JSON\n"
            "                            Schema in file F (docs/structured-output.md)\n"
            "  --grammar json            structured output: any JSON object\n"
            "  --max-thinking-tokens N   with --chat and a grammar, when the template opens a think block:\n"
            "                            think at most N tokens, then close it (default %d)\n"
            CLI_DRAFT_QUANT_HELP CLI_DRAFT_VOCAB_HELP CLI_SAMPLER_HELP
            "\n"
            "Without --json the text goes to stdout as it is generated and a stats line to stderr.\n",
            GEN_DEFAULT_DEPTH, (double)GEN_DEFAULT_MIN_CONF, RUN_DEFAULT_THINKING);
}

typedef struct {
    tok_stream *ts;  /* NULL: print ids */
    int json;
    int first;
} stream_ctx;

/* Without --json: print each committed token as soon as it is final. */
static int on_tokens(void *user, const int32_t *toks, int n) {
    stream_ctx *c = user;
    if (c->json) return 0;
    for (int i = 0; i < n; i++) {
        if (c->ts) {
            const char *t;
            size_t len;
            mtplx_err e;
            if (tok_stream_push(c->ts, toks[i], &t, &len, &e) == 0 && len) fwrite(t, 1, len, stdout);
        } else {
            printf(c->first ? "%d" : " %d", toks[i]);
        }
        c->first = 0;
    }
    fflush(stdout);
    return 0;
}

static json_t *stats_json(const gen_stats *st) {
    json_t *acc = json_array();
    for (int d = 0; d < st->depth && d < GEN_MAX_DEPTH; d++)
        json_array_append_new(acc, json_real(st->cycles ? (double)st->accepted_per_position[d] / st->cycles : 0));
    return json_pack("{s:i, s:i, s:i, s:f, s:f, s:i, s:f, s:i, s:i, s:i, s:o, s:f, s:f, s:f, s:f, s:s}", "prompt_tokens",
                     st->prompt_tokens, "cached_tokens", st->cached_tokens, "completion_tokens", st->completion_tokens, "prefill_tok_s", st->prefill_tok_s,
                     "decode_tok_s", st->decode_tok_s, "depth", st->depth, "draft_min_conf", (double)st->draft_min_conf,
                     "cycles", st->cycles, "drafted", st->drafted,
                     "accepted", st->accepted, "accepted_per_position", acc, "acceptance_rate", st->acceptance_rate,
                     "tokens_per_verify", st->tokens_per_verify, "draft_ms", st->draft_s * 1e3, "verify_ms",
                     st->verify_s * 1e3, "rng", st->rng);
}

static void stats_line(const gen_stats *st) {
    if (st->cached_tokens > 0) fprintf(stderr, "[prompt %d tok (%d from the prefix cache)", st->prompt_tokens, st->cached_tokens);
    else fprintf(stderr, "[prompt %d tok", st->prompt_tokens);
    fprintf(stderr, ", %.1f tok/s prefill | completion %d tok, %.1f tok/s decode | depth %d",
            st->prefill_tok_s, st->completion_tokens, st->decode_tok_s, st->depth);
    if (st->depth > 0 && st->draft_min_conf > 0) fprintf(stderr, " (adaptive, min conf %g)", st->draft_min_conf);
    if (st->depth > 0) {
        fprintf(stderr, ", acceptance %.3f [", st->acceptance_rate);
        for (int d = 0; d < st->depth; d++)
            fprintf(stderr, d ? " %.2f" : "%.2f", st->cycles ? (double)st->accepted_per_position[d] / st->cycles : 0);
        fprintf(stderr, "], %.2f tok/verify", st->tokens_per_verify);
    }
    fprintf(stderr, " | %s | seed %llu (%s)]\n", st->finish_reason, (unsigned long long)st->seed, st->rng);
    const char *tv = getenv("MTPLX_TIMING"); /* where a token's host time goes (bench/cuda.md, session 5) */
    if (tv && *tv && strcmp(tv, "0")) {
        double dec = st->decode_s * 1e3, v = st->verify_s * 1e3, d = st->draft_s * 1e3, s = st->sample_s * 1e3;
        double h = st->mtp_history_s * 1e3, n = st->completion_tokens > 0 ? st->completion_tokens : 1;
        fprintf(stderr, "[decode %.1f ms = verify %.1f + draft %.1f + sample %.1f + mtp history %.1f + rest %.1f | "
                        "%.2f ms a token, %d cycles]\n",
                dec, v, d, s, h, dec - v - d - s - h, dec / n, st->cycles);
    }
}

/* The grammar of --json-schema F (or any JSON object when schema_file is NULL), the tokenizer's
 * vocabulary and a matcher stopping at p's stop ids, with a thinking prelude of think_budget tokens
 * when >= 0. Returns 0 or an error (the caller frees what was made). */
static int structured_setup(const char *schema_file, const tokenizer *tok, const gen_params *p, int think_budget,
                            grammar **gr, grammar_vocab **gv, grammar_matcher **gm, mtplx_err *err) {
    if (!tok) return err_set(err, MTPLX_EINVAL, "structured output needs the model's tokenizer");
    int rc;
    if (schema_file) {
        size_t n;
        char *txt = file_read_all(schema_file, &n, err);
        if (!txt) return err->code;
        rc = grammar_from_schema_text(txt, n, gr, err);
        free(txt);
        if (rc) return err_prefix(err, "--json-schema %s", schema_file);
    } else if ((rc = grammar_json_object(gr, err)))
        return rc;
    if ((rc = grammar_vocab_new(tok, gv, err))) return rc;
    int32_t close[8];
    grammar_think th = {think_budget, close, 0, 0};
    if (think_budget >= 0) {
        th.n_close = gen_think_close_ids(tok, close, 8);
        if (!th.n_close) return err_set(err, MTPLX_EINVAL, "the prompt opens a think block but the tokenizer has no </think>");
    }
    return grammar_matcher_new(*gr, *gv, p->stop_ids, p->n_stop_ids, think_budget >= 0 ? &th : NULL, gm, err);
}

/* One finished sample: a JSON line, or the rest of the streamed text (ts) — or all of it (whole:
 * decoded, or ids without a tokenizer) — and the stats line. Returns 0, or 1 after printing an error. */
static int print_sample(tokenizer *tok, tok_stream *ts, int json, int whole, const int32_t *toks, int n,
                        const gen_stats *st) {
    mtplx_err err;
    err_clear(&err);
    if (json) {
        char *text = NULL;
        if (tok && tok_decode(tok, toks, n, 1, &text, NULL, &err)) {
            cli_error("run", "%s", err.msg);
            return 1;
        }
        json_t *ids = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(ids, json_integer(toks[i]));
        json_t *o = json_pack("{s:s?, s:o, s:I, s:s, s:o}", "text", text, "tokens", ids, "seed", (json_int_t)st->seed,
                              "finish_reason", st->finish_reason, "stats", stats_json(st));
        if (!text) json_object_set_new(o, "text", json_null());
        char *line = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        if (line) puts(line);
        free(line);
        json_decref(o);
        free(text);
    } else {
        if (ts) {
            const char *t;
            size_t len;
            if (tok_stream_flush(ts, &t, &len, &err) == 0 && len) fwrite(t, 1, len, stdout);
        } else if (whole && tok) {
            char *text = NULL;
            if (tok_decode(tok, toks, n, 1, &text, NULL, &err)) {
                cli_error("run", "%s", err.msg);
                return 1;
            }
            fputs(text, stdout);
            free(text);
        } else if (whole) {
            for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", toks[i]);
        }
        putchar('\n');
        fflush(stdout);
        stats_line(st);
    }
    return 0;
}

/* One sample of --parallel, on its own thread and session attached to the shared scheduler. */
typedef struct {
    const mtplx_model *m;
    sched *x;
    const int32_t *prompt;
    int n_prompt;
    gen_params p;
    int32_t *toks;
    int n;
    gen_stats st;
    int rc;
    mtplx_err err;
} par_sample;

static void *par_main(void *arg) {
    par_sample *a = arg;
    gen_session *s;
    err_clear(&a->err);
    if ((a->rc = gen_session_new(a->m, &s, &a->err))) return NULL;
    gen_session_attach(s, a->x);
    a->rc = gen_session_run(s, a->prompt, a->n_prompt, &a->p, NULL, NULL, &a->toks, &a->n, &a->st, &a->err);
    gen_session_free(s);
    return NULL;
}

/* --samples N --parallel: N generations (seeds seed..) at once, max_seqs of them running, through
 * one scheduler; printed in seed order, then an aggregate line. Returns the exit status. */
static int run_parallel(const mtplx_model *m, tokenizer *tok, const int32_t *prompt, int n_prompt, const gen_params *p,
                        uint64_t seed, int n, int json, int max_seqs) {
    sched_config c;
    sched_config_default(&c, max_seqs, n_prompt + p->max_tokens + p->depth + 1);
    sched *x = NULL;
    mtplx_err err;
    err_clear(&err);
    par_sample *a = calloc((size_t)n, sizeof *a);
    pthread_t *th = calloc((size_t)n, sizeof *th);
    int rc = 1, started = 0;
    if (!a || !th) {
        cli_error("run", "out of memory for %d samples", n);
        goto out;
    }
    if (sched_new(m, &c, &x, &err)) {
        cli_error("run", "%s", err.msg);
        goto out;
    }
    double t0 = clock_now();
    for (; started < n; started++) {
        a[started] = (par_sample){m, x, prompt, n_prompt, *p};
        a[started].p.seed = seed + (uint64_t)started;
        a[started].p.seed_set = 1;
        if (pthread_create(&th[started], NULL, par_main, &a[started])) {
            cli_error("run", "cannot start a thread for sample %d", started);
            break;
        }
    }
    long tokens = 0;
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    double wall = clock_now() - t0;
    rc = started == n ? 0 : 1;
    for (int i = 0; i < started; i++) {
        if (a[i].rc) {
            cli_error("run", "sample %d: %s", i, a[i].err.msg);
            rc = a[i].err.code == MTPLX_EINVAL ? 2 : 1;
            continue;
        }
        tokens += a[i].n;
        if (!rc && print_sample(tok, NULL, json, 1, a[i].toks, a[i].n, &a[i].st)) rc = 1;
    }
    sched_stats ss;
    sched_get_stats(x, &ss);
    fprintf(stderr, "[%d samples at most %d at once: %ld tokens in %.2f s = %.1f tok/s aggregate | %.1f rows per "
                    "forward | %llu steps, %llu trunk + %llu MTP forwards | ms in trunk %.1f, MTP %.1f, between %.1f]\n",
            n, max_seqs, tokens, wall, wall > 0 ? tokens / wall : 0.0,
            ss.forwards ? (double)ss.rows / (double)ss.forwards : 0.0, (unsigned long long)ss.steps,
            (unsigned long long)ss.trunk_forwards, (unsigned long long)(ss.forwards - ss.trunk_forwards), ss.trunk_ms,
            ss.mtp_ms, ss.gap_ms);
out:
    for (int i = 0; a && i < n; i++) free(a[i].toks);
    free(a);
    free(th);
    sched_free(x);
    return rc;
}

int cmd_run(int argc, char **argv) {
    const char *model = NULL, *prompt_text = NULL, *prompt_file = NULL, *prompt_tokens = NULL, *dq = NULL, *dv = NULL;
    const char *schema_file = NULL, *grammar_kind = NULL;
    long think_budget = RUN_DEFAULT_THINKING;
    int json = 0, chat = 0, depth = -1, quiet = 0, parallel = 0;
    long samples = 1, l, max_seqs = 0, cache_disk = 0;
    const char *cache_dir = NULL;
    sched *cx = NULL;      /* --cache-dir: a one-sequence scheduler ... */
    prefix_cache *pc = NULL; /* ... and the prefix cache over its pool */
    uint64_t seed = 0;
    int seed_set = 0;
    /* sampler flags are parsed into `flags`; `set` records which ones were given */
    gen_params flags;
    gen_params_default(&flags);
    unsigned set = 0;
    int draft_full_head = 0, broken = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = cli_sampler_flag("run", argc, argv, &i, &flags, &set);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!strcmp(a, "--chat")) chat = 1;
        else if (!strcmp(a, "--parallel")) parallel = 1;
        else if (v && !strcmp(a, "--cache-dir")) cache_dir = argv[++i];
        else if (!strcmp(a, "--cache-disk")) {
            if (cli_parse_long("run", a, v, 1L << 20, LONG_MAX, &cache_disk)) return 2;
            i++;
        }
        else if (!strcmp(a, "--max-seqs")) {
            if (cli_parse_long("run", a, v, 1, BATCH_SEQS_MAX, &max_seqs)) return 2;
            i++;
        }
        else if (!strcmp(a, "--draft-full-head")) draft_full_head = 1; /* diagnostics */
        else if (!strcmp(a, "--debug-broken-residual")) broken = 1;        /* tests only: wrong on purpose */
        else if (v && !strcmp(a, "--model")) model = argv[++i];
        else if (v && !strcmp(a, "--draft-quant")) dq = argv[++i];
        else if (v && !strcmp(a, "--draft-vocab")) dv = argv[++i];
        else if (v && !strcmp(a, "--prompt")) prompt_text = argv[++i];
        else if (v && !strcmp(a, "--prompt-file")) prompt_file = argv[++i];
        else if (v && !strcmp(a, "--prompt-tokens")) prompt_tokens = argv[++i];
        else if (v && !strcmp(a, "--json-schema")) schema_file = argv[++i];
        else if (v && !strcmp(a, "--grammar")) grammar_kind = argv[++i];
        else if (!strcmp(a, "--max-thinking-tokens")) {
            if (cli_parse_long("run", a, v, 0, 1000000, &think_budget)) return 2;
            i++;
        }
        else if (!strcmp(a, "--samples")) {
            if (cli_parse_long("run", a, v, 1, 100000000, &samples)) return 2;
            i++;
        } else if (!strcmp(a, "--depth")) {
            if (cli_parse_long("run", a, v, 0, GEN_MAX_DEPTH, &l)) return 2;
            depth = (int)l;
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (cli_parse_u64("run", a, v, &seed)) return 2;
            if (seed > (1ull << 63) - 1) {
                cli_error("run", "--seed must be < 2^63");
                return 2;
            }
            seed_set = 1;
            i++;
        } else {
            cli_error("run", "unknown or incomplete option '%s' (see mtplx run --help)", a);
            return 2;
        }
    }
    if (!!prompt_text + !!prompt_file + !!prompt_tokens != 1) {
        cli_error("run", "give exactly one of --prompt, --prompt-file, --prompt-tokens");
        return 2;
    }
    if (chat && prompt_tokens) {
        cli_error("run", "--chat renders text; it cannot be combined with --prompt-tokens");
        return 2;
    }
    if (schema_file && grammar_kind) {
        cli_error("run", "give at most one of --json-schema and --grammar");
        return 2;
    }
    if (cache_dir && parallel) {
        cli_error("run", "--cache-dir cannot be combined with --parallel yet");
        return 2;
    }
    if ((schema_file || grammar_kind) && parallel) { /* one matcher per sample would be needed */
        cli_error("run", "--json-schema / --grammar cannot be combined with --parallel yet");
        return 2;
    }
    if (grammar_kind && strcmp(grammar_kind, "json")) {
        cli_error("run", "--grammar: only 'json' (any JSON object) is known, got '%s'", grammar_kind);
        return 2;
    }
    if (!model) model = cli_default_model();

    mtplx_err err;
    err_clear(&err);
    int rc = 1;
    mtplx_model *m = NULL;
    tokenizer *tok = NULL;
    gen_session *s = NULL;
    int32_t *prompt = NULL;
    char *file_text = NULL;
    int n_prompt = 0;
    tok_stream *ts = NULL;
    int opens_think = 0;            /* the rendered prompt leaves a think block open */
    grammar *gr = NULL;             /* --json-schema / --grammar */
    grammar_vocab *gv = NULL;
    grammar_matcher *gm = NULL;
    gen_constraint gc;

    cli_progress load_pr, pre_pr; /* shown only when the work takes over a second */
    cli_progress_start(&load_pr, "load", "layers", 1.0, !json && !quiet);
    progress_sink load_sink = cli_progress_sink(&load_pr);
    int lrc = model_load_progress(model, &load_sink, &m, &err);
    cli_progress_finish(&load_pr, lrc == 0);
    if (lrc) {
        cli_error("run", "%s", err.msg);
        return 1;
    }
    cli_load_note("run", m);
    if (cli_draft_vocab("run", m, model, dv, &rc) || cli_draft_quant("run", m, dq, &rc)) goto out;
    /* the tokenizer is optional with --prompt-tokens (ids are printed when it is missing) */
    char tpath[4096];
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", model);
    if (file_exists(tpath) && (tok_load(model, &tok, &err) || tok_cover_vocab(tok, model_config_of(m)->vocab_size, &err))) {
        cli_error("run", "%s", err.msg);
        goto out;
    }
    if (prompt_tokens) {
        if (cli_parse_ids("run", "--prompt-tokens", prompt_tokens, &prompt, &n_prompt)) {
            rc = 2;
            goto out;
        }
    } else {
        if (!tok) {
            cli_error("run", "--prompt/--prompt-file need the tokenizer (%s is missing); use --prompt-tokens", tpath);
            goto out;
        }
        const char *text = prompt_text;
        size_t len = prompt_text ? strlen(prompt_text) : 0;
        if (prompt_file) {
            file_text = file_read_all(prompt_file, &len, &err);
            if (!file_text) {
                cli_error("run", "%s", err.msg);
                goto out;
            }
            text = file_text;
        }
        char *rendered = NULL;
        if (chat) { /* the text becomes one user message rendered with the model's chat template */
            chat_template *ct = NULL;
            json_t *req = json_pack("{s:[{s:s, s:s%}]}", "messages", "role", "user", "content", text, len);
            int crc = req ? chat_template_load(model, &ct, &err) : err_set(&err, MTPLX_EINVAL, "prompt is not UTF-8");
            if (!crc) crc = chat_render(ct, req, NULL, &rendered, &len, &err);
            if (ct) chat_template_free(ct);
            json_decref(req);
            if (crc) {
                cli_error("run", "--chat: %s", err.msg);
                goto out;
            }
            text = rendered;
            opens_think = reasoning_prompt_opens_think(rendered);
        }
        int erc = tok_encode(tok, text, len, &prompt, &n_prompt, &err);
        free(rendered);
        if (erc) {
            cli_error("run", "encoding the prompt: %s", err.msg);
            goto out;
        }
        if (n_prompt == 0) {
            cli_error("run", "the prompt is empty");
            rc = 2;
            goto out;
        }
    }

    /* parameters: model defaults, then the flags that were given */
    gen_params p;
    if (gen_params_from_model(m, &p, &err)) {
        cli_error("run", "%s", err.msg);
        goto out;
    }
    cli_sampler_apply(&p, &flags, set); /* every flag typed wins, even one equal to a built-in default */
    cli_depth_default(model, model_has_mtp(m), set, &depth, &p);
    p.depth = depth;
    p.draft_full_head = draft_full_head;
    p.debug_broken_residual = broken;
    if (gen_params_validate(&p, model_config_of(m)->vocab_size, &err)) {
        cli_error("run", "%s", err.msg);
        rc = 2;
        goto out;
    }
    if (schema_file || grammar_kind) {
        if (structured_setup(schema_file, tok, &p, opens_think ? (int)think_budget : -1, &gr, &gv, &gm, &err)) {
            cli_error("run", "%s", err.msg);
            rc = err.code == MTPLX_EINVAL || err.code == MTPLX_EUNSUPPORTED ? 2 : 1;
            goto out;
        }
        gc = gen_constraint_of_matcher(gm);
        p.constraint = &gc;
    }
    if (!seed_set) seed = rng_fresh_seed();
    if (parallel) {
        rc = run_parallel(m, tok, prompt, n_prompt, &p, seed, (int)samples, json,
                          max_seqs ? (int)max_seqs : (samples < 16 ? (int)samples : 16));
        goto out;
    }
    if (gen_session_new(m, &s, &err)) {
        cli_error("run", "%s", err.msg);
        goto out;
    }
    if (cache_dir) { /* the server's code: a scheduler of one sequence and the prefix cache over its pool */
        sched_config c;
        sched_config_default(&c, 1, n_prompt + p.max_tokens + p.depth + 1);
        prefix_cache_config pcc = {0, 0, cache_dir, (size_t)cache_disk};
        if (sched_new(m, &c, &cx, &err) || prefix_cache_new(m, sched_pool(cx), &pcc, &pc, &err)) {
            cli_error("run", "%s", err.msg);
            goto out;
        }
        sched_set_reclaim(cx, prefix_cache_reclaim_hook, pc);
        gen_session_attach(s, cx);
        gen_session_set_prefix_cache(s, pc);
    } else
        gen_session_set_prompt_cache(s, samples > 1); /* N samples of one prompt: prefill once */
    if (tok && !json && tok_stream_new(tok, 1, &ts, &err)) {
        cli_error("run", "%s", err.msg);
        goto out;
    }
    for (long k = 0; k < samples; k++) {
        p.seed = seed + (uint64_t)k;
        p.seed_set = 1;
        if (gm) grammar_matcher_reset(gm);
        stream_ctx sc = {ts, json, 1};
        gen_stats st;
        int32_t *out_toks = NULL;
        int n_out = 0;
        cli_progress_start(&pre_pr, "prefill", "tok", 1.0, !json && !quiet);
        if (pre_pr.enabled) gen_session_set_progress(s, cli_progress_sink(&pre_pr));
        if (gen_session_run(s, prompt, n_prompt, &p, on_tokens, &sc, &out_toks, &n_out, &st, &err)) {
            cli_error("run", "%s", err.msg);
            rc = err.code == MTPLX_EINVAL ? 2 : 1;
            goto out;
        }
        if (print_sample(tok, ts, json, 0, out_toks, n_out, &st)) {
            free(out_toks);
            goto out;
        }
        free(out_toks);
    }
    rc = 0;
out:
    grammar_matcher_free(gm);
    grammar_vocab_free(gv);
    grammar_free(gr);
    if (ts) tok_stream_free(ts);
    gen_session_free(s);
    prefix_cache_free(pc); /* writes what is queued for the disk tier */
    sched_free(cx);
    free(prompt);
    free(file_text);
    if (tok) tok_free(tok);
    if (m) model_free(m);
    return rc;
}
