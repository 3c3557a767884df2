/* main.c — `mtplx` entry point: finds the subcommand and hands over argv. The only place (with the
 * subcommands it calls) that turns errors into exit codes. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backend/device.h"
#include "../base/file.h"
#include "../hub/hub.h"
#include "commands.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command k_commands[] = {
    {"run", cmd_run, "generate text from a prompt (AR or MTP speculative)"},
    {"chat", cmd_chat, "chat with a model in the terminal (multi-turn, streaming, no server)"},
    {"logits", cmd_logits, "compute logits/hidden (and MTP logits) for a token sequence"},
    {"tokenize", cmd_tokenize, "text -> token ids"},
    {"detokenize", cmd_detokenize, "token ids -> text"},
    {"template", cmd_template, "render an OpenAI chat request with the chat template"},
    {"serve", cmd_serve, "OpenAI- and Anthropic-compatible HTTP server"},
    {"bench", cmd_bench, "benchmark AR vs MTP depths, memory bandwidth, verify cost"},
    {"tune", cmd_tune, "measure and save the fastest MTP depth for a model"},
    {"inspect", cmd_inspect, "describe a checkpoint and its compatibility tier"},
    {"convert", cmd_convert, "quantize a checkpoint to MLX affine q4/q8"},
    {"synth", cmd_synth, "write a random-weight checkpoint at real shapes"},
    {"pull", cmd_pull, "download a checkpoint from a Hugging Face-compatible hub into the cache"},
    {"models", cmd_models, "list cached and local models (size, format, tier, MTP); `models rm`"},
    {"doctor", cmd_doctor, "check the machine and the install; print what to fix"},
    {"version", cmd_version, "print the commit this binary was built from, its compiler and backends (also --version)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: mtplx <command> [options]   (mtplx <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-11s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\n--model DIR defaults to the embedded model (%s);\n"
               "--model ORG/NAME[@REVISION] uses a model from the cache (see `mtplx pull`).\n"
               "--device cpu|cuda|cuda:N (run, serve, bench, logits, tune) picks the backend; default: cuda:0 when\n"
               "this build has CUDA (make CUDA=1) and a GPU is visible, else cpu (also: MTPLX_DEVICE). Now: %s.\n",
               cli_default_model(), be_device_resolved());
}

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mtplx %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int cli_resolve_model(const char *spec, char *dir, size_t n, mtplx_err *err) {
    hub_ref r;
    char cache[HUB_PATH_MAX];
    int rc = hub_parse_ref(spec, &r, err);
    if (!rc) rc = hub_cache_dir(cache, sizeof cache, err);
    if (!rc) rc = hub_resolve(cache, &r, dir, n, NULL, err);
    return rc;
}

/* <dir of /proc/self/exe>/../models/qwen35-tiny-code into out (n bytes). Returns 0, or -1 when the
 * binary's path cannot be read or does not fit. */
static int embedded_dir(char *out, size_t n) {
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return -1;
    exe[len] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return -1;
    *slash = 0; /* .../build */
    int w = snprintf(out, n, "%s/../models/qwen35-tiny-code", exe);
    return w > 0 && (size_t)w < n ? 0 : -1;
}

const char *cli_default_model(void) {
    static char path[PATH_MAX + 64];
    const char *env = getenv("MTPLX_MODEL");
    if (env && *env && !file_is_dir(env) && hub_looks_like_ref(env) &&
        cli_resolve_model(env, path, sizeof path, NULL) == 0)
        return path;
    if (env && *env) return env;
    if (embedded_dir(path, sizeof path) == 0 && file_is_dir(path)) return path;
    return "models/qwen35-tiny-code";
}

int cli_embedded_file(const char *name, char *out, size_t n) {
    char dir[PATH_MAX + 64], real[PATH_MAX];
    if (embedded_dir(dir, sizeof dir)) return -1;
    int w = snprintf(out, n, "%s/%s", dir, name);
    if (w <= 0 || (size_t)w >= n || !file_exists(out)) return -1;
    if (realpath(out, real) && strlen(real) < n) memcpy(out, real, strlen(real) + 1); /* without the build/.. */
    return 0;
}

/* Every `--model X` whose X is not a directory but reads as ORG/NAME[@REVISION] becomes the cached
 * snapshot's directory, so every command takes cached models without knowing the cache. The
 * replaced argv strings are heap copies that live as long as the process. Returns 0, or -1 after
 * printing why (not cached: the message says which `mtplx pull` fetches it). */
static int resolve_model_args(const char *cmd, int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--model")) continue;
        const char *v = argv[++i];
        if (file_is_dir(v) || !hub_looks_like_ref(v)) continue;
        char dir[HUB_PATH_MAX];
        mtplx_err err;
        err_clear(&err);
        if (cli_resolve_model(v, dir, sizeof dir, &err)) {
            cli_error(cmd, "--model %s: not a directory, and %s", v, err.msg);
            return -1;
        }
        char *copy = strdup(dir);
        if (!copy) return -1;
        argv[i] = copy;
    }
    return 0;
}

/* The commands that load a model for inference take `--device cpu|cuda[:N]` (backend/device.h): it is
 * taken out of argv here (*argc shrinks) and becomes the process's default device. Returns 0, or 2
 * after printing why (bad spec, no CUDA in this build, no such GPU). */
static int take_device_arg(const char *cmd, int *argc, char **argv) {
    static const char *const takes[] = {"run", "serve", "bench", "logits", "tune"};
    int ok = 0;
    for (size_t i = 0; i < sizeof takes / sizeof *takes; i++) ok |= !strcmp(cmd, takes[i]);
    if (!ok) return 0;
    for (int i = 1; i < *argc; i++) {
        const char *v = NULL;
        int used = 0;
        if (!strcmp(argv[i], "--device")) {
            if (i + 1 >= *argc) return cli_error(cmd, "--device needs cpu, cuda or cuda:N"), 2;
            v = argv[i + 1], used = 2;
        } else if (!strncmp(argv[i], "--device=", 9)) {
            v = argv[i] + 9, used = 1;
        } else {
            continue;
        }
        mtplx_err err;
        err_clear(&err);
        if (be_device_set_default(v, &err)) return cli_error(cmd, "--device: %s", err.msg), 2;
        for (int j = i; j + used <= *argc; j++) argv[j] = argv[j + used]; /* argv[argc] is NULL */
        *argc -= used;
        i--;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V"))) return cmd_version(argc - 1, argv + 1);
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name)) {
            if (resolve_model_args(argv[1], argc - 1, argv + 1)) return 1;
            int sub_argc = argc - 1, drc = take_device_arg(argv[1], &sub_argc, argv + 1);
            if (drc) return drc;
            return k_commands[i].fn(sub_argc, argv + 1);
        }
    fprintf(stderr, "mtplx: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
