/* cmd_template.c — `mtplx template`. Placeholder until issue 3 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_template(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("template", "not implemented yet (tracked in issue 3)");
    return 1;
}
