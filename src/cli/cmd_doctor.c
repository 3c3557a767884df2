/* cmd_doctor.c — `mtplx doctor`: check the machine and the install and say what to fix
 * (src/engine/doctor.h). Exit status: 0 when nothing failed (warnings allowed), 1 when a check
 * failed, 2 usage error. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/doctor.h"
#include "commands.h"
#include "gen_cli.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx doctor [--model DIR] [--port P] [--cache DIR] [--no-checksums] [--json]\n"
            "\n"
            "Checks the machine and the install and prints what to fix: CPU features and the kernel path\n"
            "that runs, memory and the largest model that fits, transparent huge pages, threads vs CPUs,\n"
            "the model directory (config.json, every safetensors header, and the sha256 of each file of\n"
            "a hub-cache snapshot against its blob name), whether the serve port is free, and the hub\n"
            "cache's free space and permissions; the pack cache of repacked q4 / q8 weights (MTPLX_PACK_CACHE,\n"
            "default ~/.cache/mtplx/qpack): its files and size. The first line names the build\n"
            "(mtplx --version).\n"
            "\n"
            "  --model DIR      checkpoint to verify (default: %s)\n"
            "  --port P         port to test on 127.0.0.1 (default 8000)\n"
            "  --cache DIR      hub cache (default: $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub)\n"
            "  --no-checksums   skip hashing the weight files\n"
            "  --json           {\"version\", \"ok\": bool, \"checks\":\n"
            "                   [{\"name\", \"status\", \"detail\", \"fix\"}]}\n"
            "\n"
            "Exit status: 0 no check failed (warnings allowed), 1 a check failed, 2 usage error.\n",
            cli_default_model());
}

int cmd_doctor(int argc, char **argv) {
    doctor_opts o = {.port = 8000, .checksums = 1};
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--model") && v) {
            o.model_dir = v, i++;
        } else if (!strcmp(a, "--cache") && v) {
            o.cache_dir = v, i++;
        } else if (!strcmp(a, "--port") && v) {
            char *end;
            errno = 0;
            long p = strtol(v, &end, 10);
            if (!*v || *end || errno || p < 1 || p > 65535) {
                cli_error("doctor", "--port needs an integer in [1, 65535]; got '%s'", v);
                return 2;
            }
            o.port = (int)p, i++;
        } else if (!strcmp(a, "--no-checksums")) {
            o.checksums = 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else {
            cli_error("doctor", "unknown or incomplete option '%s' (see mtplx doctor --help)", a);
            return 2;
        }
    }
    if (!o.model_dir) o.model_dir = cli_default_model();
    doctor_report r;
    doctor_status worst = doctor_run(&o, &r);
    if (json) {
        json_t *arr = json_array();
        for (int i = 0; i < r.n; i++)
            json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s}", "name", r.checks[i].name, "status",
                                                 doctor_status_name(r.checks[i].status), "detail", r.checks[i].detail, "fix",
                                                 r.checks[i].fix));
        json_t *o2 =
            json_pack("{s:s,s:b,s:o}", "version", cli_build_commit(), "ok", worst != DOC_FAIL, "checks", arr);
        char *s = o2 ? json_dumps(o2, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o2);
        if (!s) {
            cli_error("doctor", "out of memory");
            return 1;
        }
        puts(s);
        free(s);
    } else {
        printf("mtplx %s (mtplx --version)\n", cli_build_commit()); /* which build a pasted report comes from */
        for (int i = 0; i < r.n; i++) {
            const doctor_check *c = &r.checks[i];
            printf("%-4s  %-10s  %s\n", doctor_status_name(c->status), c->name, c->detail);
            if (c->fix[0]) printf("      %-10s  fix: %s\n", "", c->fix);
        }
        printf("%s\n", worst == DOC_FAIL ? "doctor: problems found (fix the lines marked fail)"
                       : worst == DOC_WARN ? "doctor: usable, with warnings"
                                           : "doctor: all checks passed");
    }
    return worst == DOC_FAIL ? 1 : 0;
}
