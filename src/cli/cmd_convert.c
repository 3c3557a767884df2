/* cmd_convert.c — `mtplx convert`. Placeholder until issue 5 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_convert(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("convert", "not implemented yet (tracked in issue 5)");
    return 1;
}
