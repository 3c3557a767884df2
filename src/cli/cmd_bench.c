/* cmd_bench.c — `mtplx bench`. Placeholder until issue 4 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("bench", "not implemented yet (tracked in issue 4)");
    return 1;
}
