/* cmd_synth.c — `mtplx synth`: write a random-weight checkpoint at real shapes (src/model/synth.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../model/synth.h"
#include "commands.h"
#include "progress.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx synth (--preset NAME | --config F) --out DIR [--dtype bf16|q8|q4] [--group-size N]\n"
            "                   [--seed S] [--quiet] [--json]\n"
            "Writes config.json + sharded safetensors with seeded random weights at the config's shapes.\n"
            "  --preset NAME    bench-2b (qwen3_5_text, hidden 2048, 24 layers 3 GDN : 1 attention, vocab 151936,\n"
            "                   untied, one MTP layer); qwen35-27b (Qwen3.5/3.6 27B dense: hidden 5120, 64 layers,\n"
            "                   vocab 248320, one MTP layer); qwen35-27b-16l (the same, 16 of its 64 layers);\n"
            "                   qwen35-35b-a3b (Qwen3.5/3.6 35B-A3B MoE: hidden 2048, 40 layers, 256 experts\n"
            "                   top 8 of width 512 + a shared expert, vocab 248320, one MTP layer);\n"
            "                   qwen35-35b-a3b-10l (the same, 10 of its 40 layers)\n"
            "  --config F       any qwen3_5 / qwen3_5_text config.json instead of a preset\n"
            "  --dtype D        bf16 (default), q8 or q4 (MLX affine, bf16 scales/biases)\n"
            "  --group-size N   quantization group: 32, 64 (default) or 128\n"
            "  --seed S         default 0\n"
            "  --quiet          no progress on stderr (shown when writing takes over a second; not with --json)\n"
            "exit: 0 ok, 1 runtime error, 2 usage error\n");
}

int cmd_synth(int argc, char **argv) {
    synth_opts o = {.group_size = 64};
    int json = 0, quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return usage(stdout), 0;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--quiet")) quiet = 1;
        else if (!v) return cli_error("synth", "%s needs a value", a), usage(stderr), 2;
        else if (!strcmp(a, "--preset")) o.preset = v, i++;
        else if (!strcmp(a, "--config")) o.config_path = v, i++;
        else if (!strcmp(a, "--out")) o.out_dir = v, i++;
        else if (!strcmp(a, "--seed")) o.seed = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--group-size")) o.group_size = atoi(v), i++;
        else if (!strcmp(a, "--dtype")) {
            if (!strcmp(v, "bf16")) o.bits = 0;
            else if (!strcmp(v, "q8")) o.bits = 8;
            else if (!strcmp(v, "q4")) o.bits = 4;
            else return cli_error("synth", "--dtype %s: expected bf16, q8 or q4", v), 2;
            i++;
        } else return cli_error("synth", "unknown option %s", a), usage(stderr), 2;
    }
    if (!o.out_dir || (!o.preset == !o.config_path))
        return cli_error("synth", "need --out and exactly one of --preset / --config"), usage(stderr), 2;
    mtplx_err err = {0};
    uint64_t bytes = 0;
    double t0 = clock_now();
    cli_progress pr;
    cli_progress_start(&pr, "synth", "shards", 1.0, !json && !quiet);
    o.progress = cli_progress_sink(&pr);
    int rc = synth_write(&o, &bytes, &err);
    cli_progress_finish(&pr, rc == 0);
    if (rc) {
        cli_error("synth", "%s", err.msg);
        return err.code == MTPLX_EINVAL ? 2 : 1;
    }
    double dt = clock_now() - t0;
    if (json) printf("{\"out\": \"%s\", \"bytes\": %llu, \"seconds\": %.1f}\n", o.out_dir, (unsigned long long)bytes, dt);
    else printf("wrote %s: %.2f GB of tensors in %.1f s\n", o.out_dir, bytes / 1e9, dt);
    return 0;
}
