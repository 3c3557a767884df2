/* version.c — `mtplx --version` (also `mtplx version`): which build this binary is — the commit it
 * was compiled from, the compiler, the backends compiled in. The commit comes from the Makefile
 * (MTPLX_BUILD_COMMIT: `git describe --always --dirty` at build time, "unknown" outside a git
 * checkout), so it names the binary, not whatever the checkout holds when it runs. */
#include <stdio.h>
#include <string.h>

#include "../backend/device.h"
#include "commands.h"
#include "gen_cli.h"

#ifndef MTPLX_BUILD_COMMIT
#define MTPLX_BUILD_COMMIT "unknown"
#endif

const char *cli_build_commit(void) { return MTPLX_BUILD_COMMIT; }

int cmd_version(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: mtplx version   (or mtplx --version)\n\n"
               "Prints the commit this binary was built from (\"-dirty\": with uncommitted changes),\n"
               "the compiler, and the backends compiled in. `mtplx doctor` checks the machine.\n");
        return 0;
    }
    if (argc > 1) return cli_error("version", "takes no arguments (got '%s')", argv[1]), 2;
#if defined(__clang__)
    const char *cc = "clang " __clang_version__;
#elif defined(__GNUC__)
    const char *cc = "gcc " __VERSION__;
#else
    const char *cc = "an unknown C compiler";
#endif
    printf("mtplx %s\n", cli_build_commit());
    printf("built with %s for %s\n", cc,
#if defined(__x86_64__)
           "x86-64"
#elif defined(__aarch64__)
           "arm64"
#else
           "another architecture"
#endif
    );
    printf("backends: cpu%s\n", be_device_has_cuda() ? ", cuda" : " (no cuda in this build: make CUDA=1)");
    return 0;
}
