/* cmd_synth.c — `mtplx synth`. Placeholder until issue 5 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("synth", "not implemented yet (tracked in issue 5)");
    return 1;
}
