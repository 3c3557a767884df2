/* cmd_logits.c — `mtplx logits`. Placeholder until issue 2 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("logits", "not implemented yet (tracked in issue 2)");
    return 1;
}
