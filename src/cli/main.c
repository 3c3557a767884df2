/* main.c — `mtplx` entry point: finds the subcommand and hands over argv. The only place (with the
 * subcommands it calls) that turns errors into exit codes. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/file.h"
#include "commands.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} command;

static const command k_commands[] = {
    {"run", cmd_run, "generate text from a prompt (AR or MTP speculative)"},
    {"chat", cmd_chat, "(not built yet) interactive chat; use `run --chat` or `serve`"},
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
};

static void usage(FILE *f) {
    fprintf(f, "usage: mtplx <command> [options]   (mtplx <command> --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        fprintf(f, "  %-11s %s\n", k_commands[i].name, k_commands[i].summary);
    fprintf(f, "\n--model DIR defaults to the embedded model (%s).\n", cli_default_model());
}

void cli_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mtplx %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

const char *cli_default_model(void) {
    static char path[PATH_MAX + 64];
    const char *env = getenv("MTPLX_MODEL");
    if (env && *env) return env;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0; /* .../build */
            snprintf(path, sizeof path, "%s/../models/qwen35-tiny-code", exe);
            if (file_is_dir(path)) return path;
        }
    }
    return "models/qwen35-tiny-code";
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
        if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "mtplx: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
