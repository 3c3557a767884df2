/* cmd_bench.c — `mtplx bench`. Placeholder until issue 4 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_bench(int argc, char **argv) {
    /* kernel-speed modes (--membw, --verify-cost, --prefill) live in cmd_bench_kernels.c */
    if (cmd_bench_is_kernel_mode(argc, argv)) return cmd_bench_kernels(argc, argv);
    cli_error("bench", "not implemented yet (tracked in issue 4)");
    return 1;
}
