/* cmd_inspect.c — `mtplx inspect`. Placeholder until issue 6 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("inspect", "not implemented yet (tracked in issue 6)");
    return 1;
}
