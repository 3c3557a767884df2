/* commands.h — the `mtplx` subcommands. Each takes argc/argv starting at the subcommand name and
 * returns the process exit status (0 ok, 1 runtime error, 2 usage error; see docs/cli.md). */
#ifndef MTPLX_CLI_COMMANDS_H
#define MTPLX_CLI_COMMANDS_H

#include <stddef.h>

#include "../base/err.h"

int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_pull(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_version(int argc, char **argv);

/* `mtplx bench --membw / --verify-cost / --prefill` (cmd_bench_kernels.c); cmd_bench dispatches to
 * it when cmd_bench_is_kernel_mode says one of those flags is present. */
int cmd_bench_kernels(int argc, char **argv);
int cmd_bench_is_kernel_mode(int argc, char **argv);

/* The embedded default model directory: $MTPLX_MODEL if set, else models/qwen35-tiny-code next to
 * the binary's repository (build/mtplx -> ../models/...), else the same path relative to the cwd. */
const char *cli_default_model(void);
/* <the binary's repository>/models/qwen35-tiny-code/<name> (build/mtplx -> ../models/...) into out (n
 * bytes), whatever $MTPLX_MODEL says. Returns 0 when that file exists, else -1. */
int cli_embedded_file(const char *name, char *out, size_t n);

/* The cached snapshot directory of spec "ORG/NAME[@REVISION]" (src/hub) into dir[n]. Returns 0, or
 * an error saying it is not cached (and how to pull it). main() applies it to every --model value
 * that is not a directory. */
int cli_resolve_model(const char *spec, char *dir, size_t n, mtplx_err *err);

/* Print "mtplx <cmd>: <msg>" to stderr (for runtime errors). */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
