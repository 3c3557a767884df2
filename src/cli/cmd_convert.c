/* cmd_convert.c — `mtplx convert`: quantize a checkpoint to MLX affine q4/q8 (src/model/convert.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/convert.h"
#include "commands.h"
#include "progress.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx convert --q-bits 4|8 [--group-size N] --out DIR [--model DIR] [--quiet] [--json]\n"
            "Quantizes the linear layers and the embedding of a checkpoint to MLX affine format (uint32-packed\n"
            "weights + per-group scales/biases); norms, conv1d, A_log, dt_bias, GDN gate projections\n"
            "(in_proj_a/b) and routers stay dense. --group-size 32, 64 (default) or 128. Progress goes to\n"
            "stderr when it takes over a second (not with --quiet or --json).\n"
            "exit: 0 ok, 1 runtime error, 2 usage error\n");
}

int cmd_convert(int argc, char **argv) {
    convert_opts o = {.group_size = 64};
    int json = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!v) return cli_error("convert", "%s needs a value (or is unknown)", a), usage(stderr), 2;
        else if (!strcmp(a, "--q-bits")) o.bits = atoi(v), i++;
        else if (!strcmp(a, "--group-size")) o.group_size = atoi(v), i++;
        else if (!strcmp(a, "--out")) o.out_dir = v, i++;
        else if (!strcmp(a, "--model")) o.in_dir = v, i++;
        else return cli_error("convert", "unknown option %s", a), usage(stderr), 2;
    }
    if (!o.out_dir || (o.bits != 4 && o.bits != 8))
        return cli_error("convert", "need --out DIR and --q-bits 4 or 8"), usage(stderr), 2;
    if (!o.in_dir) o.in_dir = cli_default_model();
    mtplx_err err = {0};
    convert_stats st;
    cli_progress pr;
    cli_progress_start(&pr, "convert", "tensors", 1.0, !json && !quiet);
    o.progress = cli_progress_sink(&pr);
    int rc = convert_checkpoint(&o, &st, &err);
    cli_progress_finish(&pr, rc == 0);
    if (rc) {
        cli_error("convert", "%s", err.msg);
        return err.code == MTPLX_EINVAL ? 2 : 1;
    }
    if (json)
        printf("{\"out\": \"%s\", \"quantized\": %d, \"kept\": %d, \"bytes_in\": %llu, \"bytes_out\": %llu}\n", o.out_dir,
               st.quantized, st.kept, (unsigned long long)st.bytes_in, (unsigned long long)st.bytes_out);
    else
        printf("wrote %s: %d tensors quantized to q%d gs%d, %d kept; %.1f MB -> %.1f MB\n", o.out_dir, st.quantized,
               o.bits, o.group_size, st.kept, st.bytes_in / 1e6, st.bytes_out / 1e6);
    return 0;
}
