/* tune.c — tuning.json read/write and machine facts; see tune.h. */
#include "tune.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../backend/device.h"

void machine_facts_get(machine_facts *f) {
    snprintf(f->cpu, sizeof f->cpu, "unknown");
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (fp) {
        char line[512];
        while (fgets(line, sizeof line, fp)) {
            if (strncmp(line, "model name", 10)) continue;
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            size_t n = strcspn(c, "\n");
            if (n >= sizeof f->cpu) n = sizeof f->cpu - 1;
            memcpy(f->cpu, c, n);
            f->cpu[n] = 0;
            break;
        }
        fclose(fp);
    }
    const char *env = getenv("MTPLX_THREADS");
    long t = env && *env ? strtol(env, NULL, 10) : 0;
    if (t <= 0) t = sysconf(_SC_NPROCESSORS_ONLN);
    f->threads = t > 0 ? (int)t : 1;
    be_device_describe(f->device, sizeof f->device);
}

static int home_dir(char *out, size_t n) {
    const char *h = getenv("MTPLX_HOME");
    if (h && *h) return snprintf(out, n, "%s", h) < (int)n ? 0 : -1;
    h = getenv("HOME");
    if (!h || !*h) return -1;
    return snprintf(out, n, "%s/.mtplx", h) < (int)n ? 0 : -1;
}

char *tune_path(mtplx_err *err) {
    char dir[PATH_MAX], *p = malloc(PATH_MAX + 16);
    if (!p) {
        err_set(err, MTPLX_ENOMEM, "tuning path");
        return NULL;
    }
    if (home_dir(dir, sizeof dir)) {
        free(p);
        err_set(err, MTPLX_EINVAL, "neither MTPLX_HOME nor HOME is set (or too long): nowhere to keep tuning.json");
        return NULL;
    }
    snprintf(p, PATH_MAX + 16, "%s/tuning.json", dir);
    return p;
}

int tune_key(const char *model_dir, char *out, size_t n, mtplx_err *err) {
    char real[PATH_MAX];
    if (!realpath(model_dir, real)) return err_set(err, MTPLX_EINVAL, "%s: %s", model_dir, strerror(errno));
    machine_facts f;
    machine_facts_get(&f);
    const char *dev = strcmp(f.device, "cpu") ? f.device : f.cpu; /* the CPU's key as before GPUs were told apart */
    if ((size_t)snprintf(out, n, "%s|%s|%d", real, dev, f.threads) >= n)
        return err_set(err, MTPLX_EINVAL, "%s: tuning key too long", model_dir);
    return 0;
}

int tune_lookup(const char *model_dir, int *depth, float *min_conf) {
    char key[PATH_MAX + 512];
    if (tune_key(model_dir, key, sizeof key, NULL)) return 0;
    char *path = tune_path(NULL);
    if (!path) return 0;
    json_t *root = json_load_file(path, 0, NULL);
    free(path);
    int found = 0;
    json_t *e = root ? json_object_get(json_object_get(root, "entries"), key) : NULL;
    json_t *d = e ? json_object_get(e, "depth") : NULL;
    json_t *mc = e ? json_object_get(e, "draft_min_conf") : NULL;
    double conf = mc && json_is_number(mc) ? json_number_value(mc) : 0;
    if (d && json_is_integer(d) && json_integer_value(d) >= 0 && json_integer_value(d) <= 64 && conf >= 0 && conf < 1) {
        *depth = (int)json_integer_value(d);
        if (min_conf) *min_conf = (float)conf;
        found = 1;
    }
    json_decref(root);
    return found;
}

int tune_store(const char *model_dir, int depth, float min_conf, const char *const *names, const double *tok_s,
               int n, mtplx_err *err) {
    char key[PATH_MAX + 512], dir[PATH_MAX];
    int rc = tune_key(model_dir, key, sizeof key, err);
    if (rc) return rc;
    if (home_dir(dir, sizeof dir))
        return err_set(err, MTPLX_EINVAL, "neither MTPLX_HOME nor HOME is set: nowhere to keep tuning.json");
    if (mkdir(dir, 0755) && errno != EEXIST) return err_set(err, MTPLX_EIO, "%s: %s", dir, strerror(errno));
    char *path = tune_path(err);
    if (!path) return err->code;
    json_t *root = json_load_file(path, 0, NULL); /* a missing or malformed file starts over */
    if (!root || !json_is_object(root) || !json_is_object(json_object_get(root, "entries"))) {
        json_decref(root);
        root = json_pack("{s:i, s:{}}", "version", 1, "entries");
    }
    machine_facts f;
    machine_facts_get(&f);
    char real[PATH_MAX];
    if (!realpath(model_dir, real)) snprintf(real, sizeof real, "%s", model_dir);
    json_t *tps = json_object();
    for (int i = 0; i < n; i++)
        if (tok_s[i] >= 0) json_object_set_new(tps, names[i], json_real(tok_s[i]));
    const double conf = round((double)min_conf * 1e4) / 1e4; /* 0.4, not 0.4000000059604645 */
    json_t *entry = json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:o, s:I}", "model", real, "cpu", f.cpu, "device",
                              f.device, "threads", f.threads, "depth", depth, "draft_min_conf", conf, "decode_tok_s",
                              tps, "time", (json_int_t)time(NULL));
    json_object_set_new(json_object_get(root, "entries"), key, entry);
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    rc = 0;
    if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_SORT_KEYS))
        rc = err_set(err, MTPLX_EIO, "%s: cannot write", tmp);
    else if (rename(tmp, path))
        rc = err_set(err, MTPLX_EIO, "%s: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    json_decref(root);
    free(path);
    return rc;
}
