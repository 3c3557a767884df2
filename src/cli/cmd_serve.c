/* cmd_serve.c — `mtplx serve`. Placeholder until issue 7 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("serve", "not implemented yet (tracked in issue 7)");
    return 1;
}
