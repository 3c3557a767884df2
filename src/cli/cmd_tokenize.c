/* cmd_tokenize.c — `mtplx tokenize`. Placeholder until issue 3 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("tokenize", "not implemented yet (tracked in issue 3)");
    return 1;
}
