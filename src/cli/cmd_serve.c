/* cmd_serve.c — `mtplx serve`: load a model and serve the OpenAI and Anthropic APIs until SIGINT or
 * SIGTERM. Prints one line "mtplx serve: listening on http://HOST:PORT ..." to stdout once ready.
 * Signals (docs/server.md): SIGTERM or SIGINT drains (stop accepting, let running requests finish
 * for --drain-timeout seconds, cancel the rest, exit 0); a second SIGINT or SIGTERM exits at once
 * (status 128 + signal); SIGHUP reopens the --log-file.
 * Exit codes: 0 after a clean shutdown, 1 runtime error (model, bind), 2 usage error. */
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/file.h"
#include "../model/model.h"
#include "../server/backend_model.h"
#include "../server/server.h"
#include "commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx serve [--model DIR] [--host 127.0.0.1] [--port 8000]\n"
            "                   [--api-key K | --api-key-file F] [--max-queue N] [--max-body BYTES]\n"
            "                   [--depth N] [--ctx N] [--max-tokens N] [--temperature T] [--quiet]\n"
            "                   [--max-seqs N] [--max-batch-rows N] [--kv-pages N] [--prefill-chunk N]\n"
            "                   [--knee-rows N] [--cache-ram MIB] [--cache-dir DIR] [--cache-disk BYTES]\n"
            "                   [--max-connections N] [--max-connections-per-ip N] [--idle-timeout S]\n"
            "                   [--drain-timeout S] [--log-file F]\n"
            "\n"
            "OpenAI- and Anthropic-compatible HTTP server: POST /v1/chat/completions, /v1/completions,\n"
            "/v1/messages; GET /v1/models, /health, /metrics (Prometheus). See docs/server.md.\n"
            "\n"
            "  --model DIR         checkpoint directory (default: %s)\n"
            "  --host H            bind address (default 127.0.0.1); a non-loopback address needs an API key\n"
            "  --port P            TCP port (default 8000; 0 = any free port, printed when ready)\n"
            "  --api-key K         require K as `Authorization: Bearer K` or `x-api-key: K`\n"
            "  --api-key-file F    read the key from F (surrounding whitespace trimmed)\n"
            "                      (also $MTPLX_API_KEY when neither flag is given)\n"
            "  --max-queue N       requests waiting for the model at most (default 128); more get 429\n"
            "  --max-body BYTES    request body limit (default 8388608); more get 413\n"
            "  --depth N           default MTP depth (0 = AR; default: `mtplx tune`'s choice, else 6 with\n"
            "                      --draft-min-conf 0.4); a request's mtplx.depth runs that fixed depth\n"
            "  --draft-min-conf X  adaptive depth for requests that set no depth, in [0, 1): stop drafting a\n"
            "                      cycle once the drafts' product of q falls below X (default: tune's\n"
            "                      choice, else 0.4 without --depth and 0 with it)\n"
            "  --ctx N             context tokens (prompt + completion; default min(model max, 8192)); more\n"
            "                      than the model was trained for is served as asked, with a warning\n"
            "  --max-tokens N      completion tokens at most per request: a client asking for more gets\n"
            "                      this many (finish_reason length); default: the rest of the context\n"
            "  --temperature T     for requests that send none, in [0, 2] (0 = greedy; default: the\n"
            "                      model's generation_config.json); a request's own value wins\n"
            "  --quiet             no per-request log lines on stderr\n"
            "  --max-seqs N        generations at once (default 4): their rows share each forward\n"
            "                      (continuous batching, docs/architecture.md); more requests queue\n"
            "  --max-batch-rows N  rows in one forward at most (default max(128, prefill chunk,\n"
            "                      9 x max-seqs))\n"
            "  --kv-pages N        KV cache pages of 64 positions shared by all generations (default:\n"
            "                      max-seqs full contexts); a request waits until the pages its prompt +\n"
            "                      max_tokens could need are free, and one that can never fit gets an error\n"
            "  --prefill-chunk N   prompt tokens of one request per forward (default: the backend's chunk,\n"
            "                      512 on the CPU and on a GPU; MTPLX_PREFILL_ROWS / MTPLX_CUDA_PREFILL_ROWS):\n"
            "                      larger reads a long prompt faster, smaller lets a request that\n"
            "                      arrives meanwhile start sooner (with others decoding:\n"
            "                      what keeps their step within 2x its measured cost, at least 8 rows a\n"
            "                      prompt; with --knee-rows, max(N, 8))\n"
            "  --knee-rows N       MTP depth under load: a request that does not set mtplx.depth drafts\n"
            "                      at most N / running - 1 tokens per cycle (0 = AR steps). Default: the\n"
            "                      depth with the most tokens per ms under this model's forward costs,\n"
            "                      measured at start (0.5 s). The output distribution is the same, only\n"
            "                      the speed changes\n"
            "  --cache-ram MIB     prefix cache: a request restores the longest cached prefix of its prompt\n"
            "                      (earlier turns, shared system prompts) instead of prefilling it\n"
            "                      (docs/prefix-cache.md). MIB bounds its recurrent-state copies (default\n"
            "                      1024); its KV pages come from --kv-pages and are given back on demand.\n"
            "                      0 = off\n"
            "  --cache-dir DIR     the prefix cache's disk tier: checkpoints evicted from RAM and each\n"
            "                      conversation's state after a turn are written to DIR (checksummed,\n"
            "                      atomic, keyed by a fingerprint of the model and kernels), so long\n"
            "                      sessions survive RAM eviction and server restarts; a corrupt or\n"
            "                      foreign file is never used; an unwritable or full disk leaves the\n"
            "                      cache in RAM only, with a log line (docs/prefix-cache.md)\n"
            "  --cache-disk BYTES  byte budget of the files in --cache-dir, least recently used removed\n"
            "                      first (default 8589934592 = 8 GiB)\n"
            "  --draft-vocab N     draft head over the N most common token ids only (merge order of\n"
            "                      tokenizer.json; the output law is unchanged); 0 = full (default)\n"
            "  --draft-quant Q     the draft's own copy: q4 (default: LM head + MTP layer, group 64), q8,\n"
            "                      q4-head, q8-head (LM head only) or none; :32/:64/:128 sets the group\n"
            "                      size; as in run. p (the target) is never quantized\n"
            "  --max-connections N open client connections at most (default 1024; one thread each);\n"
            "                      more wait in the listen backlog until one closes\n"
            "  --max-connections-per-ip N  per client address (default 0 = no limit)\n"
            "  --idle-timeout S    close a connection silent for S seconds, e.g. a half-sent request or a\n"
            "                      client that stopped reading its stream (default 60; 0 = never)\n"
            "  --drain-timeout S   on SIGTERM/SIGINT, let running requests finish for up to S seconds\n"
            "                      before cancelling them (default 30)\n"
            "  --log-file F        append log lines (stderr) to F; SIGHUP reopens it (log rotation)\n"
            "\n"
            "Signals: SIGTERM or SIGINT stops accepting connections, answers new requests on open ones\n"
            "with 503, lets running requests finish (--drain-timeout), then exits 0; a second SIGTERM or\n"
            "SIGINT exits at once (status 128 + signal number); SIGHUP reopens --log-file.\n"
            "Exit status: 0 ok, 1 runtime error, 2 usage error.\n",
            cli_default_model());
}

static int parse_long(const char *flag, const char *v, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || !*v || *end || errno || x < lo || x > hi) {
        cli_error("serve", "%s needs an integer in [%ld, %ld]; got '%s'", flag, lo, hi, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

/* Read an API key file, trimmed; NULL with a message on failure or when empty. */
static char *read_key_file(const char *path) {
    mtplx_err err = {0};
    char *s = file_read_all(path, NULL, &err);
    if (!s) {
        cli_error("serve", "--api-key-file: %s", err.msg);
        return NULL;
    }
    char *b = s;
    while (*b == ' ' || *b == '\n' || *b == '\r' || *b == '\t') b++;
    size_t n = strlen(b);
    while (n && (b[n - 1] == ' ' || b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == '\t')) n--;
    if (!n) {
        cli_error("serve", "--api-key-file: %s is empty", path);
        free(s);
        return NULL;
    }
    char *k = strndup(b, n);
    free(s);
    return k;
}

/* Point stderr (the log) at the end of `path`, created if missing. Returns 0, or -1 with a message
 * on stderr as it was. */
static int log_reopen(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        cli_error("serve", "--log-file %s: %s", path, strerror(errno));
        return -1;
    }
    fflush(stderr);
    int rc = dup2(fd, STDERR_FILENO) < 0 ? -1 : 0;
    if (rc) cli_error("serve", "--log-file %s: %s", path, strerror(errno));
    close(fd);
    return rc;
}

static const char *sig_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

/* Take SIGHUP (reopen the log), SIGINT and SIGTERM from `sigs` (blocked in every thread) until a
 * shutdown: the first SIGINT/SIGTERM drains for up to drain_timeout seconds, a second one exits the
 * process at once. Returns when the drain is over; server_stop then cancels what still runs. */
static void wait_for_shutdown(srv_server *s, const sigset_t *sigs, const char *log_file, int drain_timeout) {
    struct timespec deadline = {0}, tick = {0, 100 * 1000000L};
    int draining = 0;
    for (;;) {
        int sig;
        if (!draining) {
            if (sigwait(sigs, &sig)) continue;
        } else {
            struct timespec now;
            clock_gettime(CLOCK_MONOTONIC, &now);
            int left = server_inflight(s);
            if (!left) {
                fprintf(stderr, "mtplx serve: drained, stopping\n");
                return;
            }
            if (now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)) {
                fprintf(stderr, "mtplx serve: drain timeout, cancelling %d request%s\n", left, left == 1 ? "" : "s");
                return;
            }
            sig = sigtimedwait(sigs, NULL, &tick);
            if (sig < 0) continue;
        }
        if (sig == SIGHUP) {
            if (log_file && log_reopen(log_file) == 0) fprintf(stderr, "mtplx serve: SIGHUP: reopened %s\n", log_file);
            else if (!log_file) fprintf(stderr, "mtplx serve: SIGHUP ignored (no --log-file)\n");
            continue;
        }
        if (draining) {
            fprintf(stderr, "mtplx serve: second %s, exiting now\n", sig_name(sig));
            _exit(128 + sig);
        }
        draining = 1;
        fprintf(stderr, "mtplx serve: %s received, draining (%d in flight, up to %d s; send it again to exit now)\n",
                sig_name(sig), server_inflight(s), drain_timeout);
        server_drain_begin(s);
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += drain_timeout;
    }
}

int cmd_serve(int argc, char **argv) {
    srv_config cfg;
    server_config_default(&cfg);
    const char *model = NULL, *key_file = NULL, *log_file = NULL;
    char *key = NULL;
    srv_model_opts mo = {0};
    long v;
    int drain_timeout = 30;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            free(key);
            return 0;
        } else if (!strcmp(a, "--model") && val) {
            model = val, i++;
        } else if (!strcmp(a, "--host") && val) {
            cfg.host = val, i++;
        } else if (!strcmp(a, "--port")) {
            if (parse_long(a, val, 0, 65535, &v)) goto usage_err;
            cfg.port = (int)v, i++;
        } else if (!strcmp(a, "--api-key") && val) {
            free(key);
            key = strdup(val), i++;
        } else if (!strcmp(a, "--api-key-file") && val) {
            key_file = val, i++;
        } else if (!strcmp(a, "--max-queue")) {
            if (parse_long(a, val, 1, 100000, &v)) goto usage_err;
            cfg.max_queue = (int)v, i++;
        } else if (!strcmp(a, "--max-body")) {
            if (parse_long(a, val, 1024, 1L << 30, &v)) goto usage_err;
            cfg.max_body = (size_t)v, i++;
        } else if (!strcmp(a, "--depth")) {
            if (parse_long(a, val, 0, GEN_MAX_DEPTH, &v)) goto usage_err;
            cfg.depth = (int)v, i++;
        } else if (!strcmp(a, "--draft-min-conf")) {
            char *end = NULL;
            double x = val ? strtod(val, &end) : -1;
            if (!val || end == val || *end || !(x >= 0 && x < 1)) {
                cli_error("serve", "--draft-min-conf needs a number in [0, 1); got '%s'", val ? val : "");
                goto usage_err;
            }
            cfg.min_conf = (float)x, i++;
        } else if (!strcmp(a, "--ctx")) {
            if (parse_long(a, val, 2, 1L << 24, &v)) goto usage_err;
            cfg.ctx = (int)v, i++;
        } else if (!strcmp(a, "--max-tokens")) {
            if (parse_long(a, val, 1, 1L << 24, &v)) goto usage_err;
            cfg.max_tokens = (int)v, i++;
        } else if (!strcmp(a, "--temperature")) {
            char *end;
            double t = val ? strtod(val, &end) : -1;
            if (!val || !*val || *end || !(t >= 0 && t <= 2)) {
                cli_error("serve", "--temperature needs a number in [0, 2]; got '%s'", val ? val : "");
                goto usage_err;
            }
            cfg.temperature = (float)t, i++;
        } else if (!strcmp(a, "--quiet")) {
            cfg.quiet = 1;
        } else if (!strcmp(a, "--max-seqs")) {
            if (parse_long(a, val, 1, 64, &v)) goto usage_err;
            mo.max_seqs = (int)v, i++;
        } else if (!strcmp(a, "--max-batch-rows")) {
            if (parse_long(a, val, GEN_MAX_DEPTH + 1, 1 << 16, &v)) goto usage_err;
            mo.max_batch_rows = (int)v, i++;
        } else if (!strcmp(a, "--kv-pages")) {
            if (parse_long(a, val, 1, 1L << 28, &v)) goto usage_err;
            mo.kv_pages = (int)v, i++;
        } else if (!strcmp(a, "--knee-rows")) {
            if (parse_long(a, val, 1, 1 << 16, &v)) goto usage_err;
            mo.knee_rows = (int)v, i++;
        } else if (!strcmp(a, "--cache-ram")) {
            if (parse_long(a, val, 0, 1L << 30, &v)) goto usage_err;
            mo.cache_ram_mb = v ? v : -1, i++;
        } else if (!strcmp(a, "--cache-dir") && val) {
            mo.cache_dir = val, i++;
        } else if (!strcmp(a, "--cache-disk")) {
            if (parse_long(a, val, 1L << 20, LONG_MAX, &v)) goto usage_err;
            mo.cache_disk_bytes = (size_t)v, i++;
        } else if (!strcmp(a, "--draft-vocab")) {
            if (parse_long(a, val, 0, INT32_MAX, &v)) goto usage_err;
            mo.draft_vocab = (int)v, i++;
        } else if (!strcmp(a, "--draft-quant") && val) {
            draft_quant dq;
            mtplx_err e;
            if (draft_quant_parse(val, &dq, &e)) {
                cli_error("serve", "%s", e.msg);
                goto usage_err;
            }
            mo.draft_quant = val, i++;
        } else if (!strcmp(a, "--prefill-chunk")) {
            if (parse_long(a, val, 1, 1 << 16, &v)) goto usage_err;
            mo.prefill_chunk = (int)v, i++;
        } else if (!strcmp(a, "--max-connections")) {
            if (parse_long(a, val, 1, 100000, &v)) goto usage_err;
            cfg.max_connections = (int)v, i++;
        } else if (!strcmp(a, "--max-connections-per-ip")) {
            if (parse_long(a, val, 0, 100000, &v)) goto usage_err;
            cfg.max_connections_per_ip = (int)v, i++;
        } else if (!strcmp(a, "--idle-timeout")) {
            if (parse_long(a, val, 0, 86400, &v)) goto usage_err;
            cfg.idle_timeout = (int)v, i++;
        } else if (!strcmp(a, "--drain-timeout")) {
            if (parse_long(a, val, 0, 86400, &v)) goto usage_err;
            drain_timeout = (int)v, i++;
        } else if (!strcmp(a, "--log-file") && val) {
            log_file = val, i++;
        } else {
            cli_error("serve", "unknown or incomplete option '%s' (see mtplx serve --help)", a);
            goto usage_err;
        }
    }
    if (key && key_file) {
        cli_error("serve", "give --api-key or --api-key-file, not both");
        goto usage_err;
    }
    if (key_file && !(key = read_key_file(key_file))) goto usage_err;
    if (!key && getenv("MTPLX_API_KEY") && *getenv("MTPLX_API_KEY")) key = strdup(getenv("MTPLX_API_KEY"));
    cfg.api_key = key;
    if (!key && !server_host_is_loopback(cfg.host)) {
        cli_error("serve", "refusing to listen on %s without an API key: pass --api-key or --api-key-file "
                           "(or bind a loopback address such as 127.0.0.1)", cfg.host);
        goto usage_err;
    }
    if (!model) model = cli_default_model();
    if (log_file && log_reopen(log_file)) goto usage_err;

    /* SIGINT/SIGTERM/SIGHUP are taken by sigwait below; every thread created from here inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    mtplx_err err = {0};
    srv_backend be;
    mo.ctx = cfg.ctx;
    if (backend_model_open(model, &mo, &be, &err)) {
        cli_error("serve", "%s", err.msg);
        free(key);
        return 1;
    }
    if (be.trained_ctx > 0 && be.ctx > be.trained_ctx)
        fprintf(stderr,
                "mtplx serve: warning: --ctx %d is more than this model was trained for (max_position_embeddings %d); "
                "it is served as asked, but text past %d tokens may be of lower quality\n",
                be.ctx, be.trained_ctx, be.trained_ctx);
    srv_server *s = NULL;
    if (server_start(&cfg, &be, &s, &err)) {
        cli_error("serve", "%s", err.msg);
        backend_model_close(&be);
        free(key);
        return err.code == MTPLX_EINVAL ? 2 : 1;
    }
    if (mo.draft_vocab > 0 && !strcmp(be.tier, "mtp"))
        fprintf(stderr, "mtplx serve: draft head over the %d most common token ids (--draft-vocab)\n", mo.draft_vocab);
    const char *h = cfg.host;
    int v6 = strchr(h, ':') && h[0] != '[';
    sched_stats ss;
    be.sched_stats(be.impl, &ss);
    int depth;
    float conf;
    server_default_depth(s, &depth, &conf);
    char adaptive[48] = "";
    if (depth > 0 && conf > 0) snprintf(adaptive, sizeof adaptive, " (adaptive, min conf %g)", conf);
    printf("mtplx serve: listening on http://%s%s%s:%d (model %s, tier %s, depth %d%s%s%s, ctx %d, %d at once, %d KV "
           "pages%s)\n", v6 ? "[" : "", h, v6 ? "]" : "", server_port(s), be.model_id, be.tier, depth, adaptive,
           be.draft ? ", draft-quant " : "", be.draft ? be.draft : "",
           cfg.ctx > 0 ? cfg.ctx : be.ctx, be.n_slots, ss.pages_total, key ? ", API key required" : "");
    fflush(stdout);
    wait_for_shutdown(s, &sigs, log_file, drain_timeout);
    server_stop(s);
    backend_model_close(&be);
    free(key);
    return 0;

usage_err:
    free(key);
    return 2;
}
