/* cmd_tune.c — `mtplx tune`. Placeholder until issue 4 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_tune(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("tune", "not implemented yet (tracked in issue 4)");
    return 1;
}
