/* cmd_pull.c — `mtplx pull ORG/NAME[@REVISION]`: download a checkpoint from a Hugging Face–compatible
 * hub into the local cache (src/hub/hub.h), with a progress bar on stderr. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../hub/hub.h"
#include "commands.h"
#include "gen_cli.h"
#include "progress.h"

#define PULL_MAX_INCLUDE 32

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx pull ORG/NAME[@REVISION] [--jobs N] [--retries N] [--include GLOB]... [--all]\n"
            "                  [--quiet] [--json]\n"
            "\n"
            "Download a checkpoint from a Hugging Face-compatible hub into the local cache (the same layout\n"
            "as huggingface_hub's, so both tools share it). REVISION is a branch, tag or commit (default\n"
            "main). An interrupted download resumes where it stopped on the next pull; every LFS file is\n"
            "checked against the hub's sha256 and a mismatching file is deleted, never used. Afterwards\n"
            "`--model ORG/NAME[@REVISION]` works on every command.\n"
            "\n"
            "  --jobs N         files downloaded at once (default 4)\n"
            "  --retries N      extra attempts per file after a cut transfer, each resuming (default 3)\n"
            "  --include GLOB   only files matching GLOB (fnmatch; repeatable), e.g. '*.json'\n"
            "  --all            every file (default: skip other frameworks' weights: *.bin, *.pt, *.pth,\n"
            "                   *.ckpt, *.h5, *.msgpack, *.onnx, *.gguf, *.ot, *.tflite, original/)\n"
            "  --quiet          no progress on stderr\n"
            "  --json           one JSON object on stdout (no progress): repo, revision, commit, dir, files,\n"
            "                   downloaded, resumed, bytes, bytes_fetched\n"
            "\n"
            "environment: HF_ENDPOINT (default https://huggingface.co), HF_TOKEN (else the token file\n"
            "$HF_TOKEN_PATH, $HF_HOME/token or ~/.cache/huggingface/token), HF_HUB_CACHE / HF_HOME (cache:\n"
            "$HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub)\n"
            "exit: 0 ok, 1 runtime error (not found, gated, disk full, checksum, network), 2 usage error\n");
}

int cmd_pull(int argc, char **argv) {
    const char *spec = NULL;
    const char *include[PULL_MAX_INCLUDE + 1] = {0};
    int n_include = 0, json = 0, quiet = 0;
    hub_pull_opts o = {.jobs = 4, .retries = 3};
    long l;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) quiet = 1;
        else if (!strcmp(a, "--all")) o.all_files = 1;
        else if (!strcmp(a, "--jobs")) {
            if (cli_parse_long("pull", a, v, 1, 64, &l)) return 2;
            o.jobs = (int)l, i++;
        } else if (!strcmp(a, "--retries")) {
            if (cli_parse_long("pull", a, v, 0, 100, &l)) return 2;
            o.retries = (int)l, i++;
        } else if (!strcmp(a, "--include")) {
            if (!v) return cli_error("pull", "--include needs a glob"), 2;
            if (n_include == PULL_MAX_INCLUDE) return cli_error("pull", "at most %d --include", PULL_MAX_INCLUDE), 2;
            include[n_include++] = v, i++;
        } else if (a[0] == '-') {
            cli_error("pull", "unknown option '%s' (see mtplx pull --help)", a);
            return 2;
        } else if (spec) {
            cli_error("pull", "one repository at a time ('%s' and '%s')", spec, a);
            return 2;
        } else {
            spec = a;
        }
    }
    if (!spec) return cli_error("pull", "which repository? (mtplx pull ORG/NAME[@REVISION])"), usage(stderr), 2;
    hub_ref r;
    mtplx_err err;
    err_clear(&err);
    if (hub_parse_ref(spec, &r, &err)) return cli_error("pull", "%s", err.msg), 2;
    if (n_include) o.include = include;
    cli_progress pr;
    cli_progress_start(&pr, "pull", NULL, 0, !quiet && !json);
    o.progress = cli_progress_sink(&pr);
    hub_pull_result res;
    int rc = hub_pull(&r, &o, &res, &err);
    cli_progress_finish(&pr, rc == 0);
    if (rc) {
        cli_error("pull", "%s", err.msg);
        if (json) {
            json_t *e = json_pack("{s:s, s:s, s:s}", "repo", r.repo, "revision", r.revision, "error", err.msg);
            json_dumpf(e, stdout, JSON_COMPACT);
            fputc('\n', stdout);
            json_decref(e);
        }
        return 1;
    }
    if (json) {
        json_t *o2 = json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:i, s:I, s:I}", "repo", r.repo, "revision", r.revision,
                               "commit", res.commit, "dir", res.dir, "files", res.files, "downloaded", res.downloaded,
                               "resumed", res.resumed, "bytes", (json_int_t)res.bytes_total, "bytes_fetched",
                               (json_int_t)res.bytes_fetched);
        json_dumpf(o2, stdout, JSON_COMPACT);
        fputc('\n', stdout);
        json_decref(o2);
    } else {
        printf("%s@%s (commit %.12s): %d files, %.1f MB: %d downloaded (%d of them resumed), %d already cached\n%s\n",
               r.repo, r.revision, res.commit, res.files, res.bytes_total / 1e6, res.downloaded, res.resumed,
               res.files - res.downloaded, res.dir);
    }
    return 0;
}
