/* cmd_chat.c — `mtplx chat`, the interactive REPL of DESIGN.md §1. Not built yet: it refuses
 * clearly and points at what exists (`run --chat` for one turn, `serve` for multi-turn clients). */
#include "commands.h"

int cmd_chat(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_error("chat", "the interactive chat is not built yet; use `mtplx run --chat --prompt TEXT` for one "
                      "turn or `mtplx serve` with an OpenAI/Anthropic client for conversations");
    return 1;
}
