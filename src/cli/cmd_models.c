/* cmd_models.c — `mtplx models`: the models this machine has (the hub cache, the embedded model,
 * directories given) with size, format, family, tier and MTP head (src/model/inspect.c reads only
 * config.json and the safetensors headers, so listing stays cheap); `mtplx models rm` deletes a
 * cached one. */
#include <ctype.h>
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/file.h"
#include "../hub/hub.h"
#include "../model/inspect.h"
#include "commands.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtplx models [DIR...] [--json]\n"
            "       mtplx models rm ORG/NAME[@REVISION] [--json]\n"
            "\n"
            "List the models in the hub cache (what `mtplx pull` wrote, and huggingface_hub's downloads), the\n"
            "embedded model and each DIR (or cached ORG/NAME[@REVISION]) given: name, format (bf16 / f16 / f32, or q4 / q8 for MLX affine),\n"
            "family, compatibility tier (as `mtplx inspect`), MTP head, size on disk and path.\n"
            "`rm ORG/NAME` deletes the cached repository; `rm ORG/NAME@REVISION` deletes that snapshot, its\n"
            "refs and the blobs no other snapshot uses.\n"
            "\n"
            "  --json   one JSON object: {\"cache\": DIR, \"models\": [{name, source (cache | embedded | local),\n"
            "           path, repo, commit, refs, bytes, format, family, tier, mtp, incomplete}]}\n"
            "           (rm: {\"removed\", \"bytes_freed\"})\n"
            "exit: 0 ok, 1 runtime error (rm: not cached), 2 usage error\n");
}

/* bf16 / f16 / f32 by the dtype holding most bytes, or q<bits> for a quantized checkpoint. */
static void format_of(const inspect_report *r, char *out, size_t n) {
    if (r->has_config && r->cfg.quant_method[0]) {
        if (!strcmp(r->cfg.quant_method, "mlx")) snprintf(out, n, "q%d", r->cfg.quant_bits);
        else snprintf(out, n, "%s", r->cfg.quant_method);
        return;
    }
    int best = -1;
    for (int i = 0; i < DT_COUNT; i++)
        if (r->dtype_bytes[i] && (best < 0 || r->dtype_bytes[i] > r->dtype_bytes[best])) best = i;
    snprintf(out, n, "%s", best < 0 ? "-" : dtype_name((mtplx_dtype)best));
    for (char *c = out; *c; c++) *c = (char)tolower((unsigned char)*c);
}

/* Bytes of the regular files directly in dir (a local checkpoint). */
static uint64_t dir_bytes(const char *dir) {
    uint64_t b = 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[HUB_PATH_MAX + 300];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) b += (uint64_t)st.st_size;
    }
    closedir(d);
    return b;
}

/* The first weight shard that model.safetensors.index.json names but dir lacks into missing[n]
 * (a download that failed part-way); "" when none is missing or there is no index. */
static void missing_shard(const char *dir, char *missing, size_t n) {
    char p[HUB_PATH_MAX + 300];
    missing[0] = 0;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    json_t *idx = json_load_file(p, 0, NULL);
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(idx, "weight_map"), k, v) {
        const char *f = json_string_value(v);
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, f ? f : "");
        if (f && stat(p, &st)) {
            snprintf(missing, n, "%s", f);
            break;
        }
    }
    json_decref(idx);
}

typedef struct {
    json_t *list;       /* JSON entries, also printed as the table */
    inspect_report *rep;/* scratch */
} lister;

static void add_model(lister *L, const char *name, const char *source, const char *path, uint64_t bytes,
                      const hub_snapshot *snap) {
    mtplx_err err;
    err_clear(&err);
    memset(L->rep, 0, sizeof *L->rep);
    int rc = inspect_model(path, 0, L->rep, &err);
    char fmt[40];
    format_of(L->rep, fmt, sizeof fmt);
    json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "name", name, "source", source, "path", path, "bytes",
                          (json_int_t)bytes);
    if (snap) {
        json_object_set_new(o, "repo", json_string(snap->repo));
        json_object_set_new(o, "commit", json_string(snap->commit));
        json_t *refs = json_array();
        char tmp[256];
        snprintf(tmp, sizeof tmp, "%s", snap->refs);
        for (char *t = strtok(tmp, ","); t; t = strtok(NULL, ",")) json_array_append_new(refs, json_string(t));
        json_object_set_new(o, "refs", refs);
    }
    char missing[256];
    missing_shard(path, missing, sizeof missing);
    if (snap || missing[0]) json_object_set_new(o, "incomplete", json_boolean((snap && snap->incomplete) || missing[0]));
    if (missing[0]) json_object_set_new(o, "missing", json_string(missing));
    if (rc) {
        json_object_set_new(o, "error", json_string(err.msg));
        json_object_set_new(o, "tier", json_string("error"));
    } else {
        json_object_set_new(o, "format", json_string(fmt));
        json_object_set_new(o, "family", json_string(L->rep->has_config ? config_arch_name(L->rep->cfg.arch) : "-"));
        json_object_set_new(o, "tier", json_string(inspect_tier_name(L->rep->tier)));
        json_object_set_new(o, "mtp", json_boolean(L->rep->mtp != MTP_LAYOUT_NONE));
    }
    json_array_append_new(L->list, o);
}

static const char *jstr(json_t *o, const char *k, const char *dflt) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

static void print_table(json_t *list) {
    printf("%-36s %-6s %-12s %-11s %-4s %9s  %s\n", "NAME", "FORMAT", "FAMILY", "TIER", "MTP", "SIZE", "PATH");
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o) {
        double b = (double)json_integer_value(json_object_get(o, "bytes"));
        char size[32];
        if (b >= 1e9) snprintf(size, sizeof size, "%.2f GB", b / 1e9);
        else snprintf(size, sizeof size, "%.1f MB", b / 1e6);
        json_t *mtp = json_object_get(o, "mtp");
        printf("%-36s %-6s %-12s %-11s %-4s %9s  %s%s\n", jstr(o, "name", "-"), jstr(o, "format", "-"),
               jstr(o, "family", "-"), jstr(o, "tier", "-"), mtp ? (json_is_true(mtp) ? "yes" : "no") : "-", size,
               jstr(o, "path", "-"), json_is_true(json_object_get(o, "incomplete")) ? "  (incomplete: pull again)" : "");
        if (json_object_get(o, "error")) printf("    %s\n", jstr(o, "error", ""));
    }
}

static int models_rm(int argc, char **argv, int json) {
    const char *spec = NULL;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) continue;
        if (argv[i][0] == '-' || spec) return cli_error("models", "rm takes one ORG/NAME[@REVISION]"), 2;
        spec = argv[i];
    }
    hub_ref r;
    mtplx_err err;
    err_clear(&err);
    if (!spec) return cli_error("models", "rm: which model? (mtplx models rm ORG/NAME[@REVISION])"), 2;
    if (hub_parse_ref(spec, &r, &err)) return cli_error("models", "%s", err.msg), 2;
    char cache[HUB_PATH_MAX];
    uint64_t freed = 0;
    if (hub_cache_dir(cache, sizeof cache, &err) || hub_remove(cache, &r, &freed, &err)) {
        cli_error("models", "rm: %s", err.msg);
        return 1;
    }
    if (json) printf("{\"removed\": \"%s\", \"bytes_freed\": %llu}\n", spec, (unsigned long long)freed);
    else printf("removed %s from %s (%.1f MB freed)\n", spec, cache, freed / 1e6);
    return 0;
}

int cmd_models(int argc, char **argv) {
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout), 0;
        if (!strcmp(argv[i], "--json")) json = 1;
    }
    if (argc > 1 && !strcmp(argv[1], "rm")) return models_rm(argc, argv, json);
    for (int i = 1; i < argc; i++)
        if (argv[i][0] == '-' && strcmp(argv[i], "--json"))
            return cli_error("models", "unknown option '%s' (see mtplx models --help)", argv[i]), 2;
    mtplx_err err;
    err_clear(&err);
    char cache[HUB_PATH_MAX];
    hub_snapshot *snaps = NULL;
    int n = 0;
    if (hub_cache_dir(cache, sizeof cache, &err) || hub_list(cache, &snaps, &n, &err)) {
        cli_error("models", "%s", err.msg);
        return 1;
    }
    lister L = {json_array(), calloc(1, sizeof(inspect_report))};
    if (!L.rep) return cli_error("models", "out of memory"), 1;
    for (int i = 0; i < n; i++) {
        char name[600];
        snprintf(name, sizeof name, "%s@%s", snaps[i].repo, snaps[i].refs[0] ? snaps[i].refs : snaps[i].commit);
        char *comma = strchr(name, ',');
        if (comma) *comma = 0; /* the first ref names it; --json lists them all */
        add_model(&L, name, "cache", snaps[i].dir, snaps[i].bytes, &snaps[i]);
    }
    const char *emb = cli_default_model();
    add_model(&L, "(embedded)", "embedded", emb, dir_bytes(emb), NULL);
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-') continue;
        char dir[HUB_PATH_MAX];
        const char *path = argv[i];
        if (!file_is_dir(path) && hub_looks_like_ref(path) && cli_resolve_model(path, dir, sizeof dir, NULL) == 0)
            path = dir; /* ORG/NAME: the cached snapshot */
        add_model(&L, argv[i], "local", path, dir_bytes(path), NULL);
    }
    if (json) {
        json_t *o = json_pack("{s:s, s:O}", "cache", cache, "models", L.list);
        json_dumpf(o, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(o);
    } else {
        print_table(L.list);
        printf("cache: %s\n", cache);
    }
    json_decref(L.list);
    free(L.rep);
    free(snaps);
    return 0;
}
