/* cmd_detokenize.c — `mtplx detokenize`. Placeholder until issue 3 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_detokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("detokenize", "not implemented yet (tracked in issue 3)");
    return 1;
}
