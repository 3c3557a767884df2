/* cmd_run.c — `mtplx run`. Placeholder until issue 2 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("run", "not implemented yet (tracked in issue 2)");
    return 1;
}
