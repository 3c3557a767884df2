/* cmd_chat.c — `mtplx chat`. Placeholder until issue 7 lands: refuses clearly instead of pretending. */
#include "commands.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("chat", "not implemented yet (tracked in issue 7)");
    return 1;
}
