/* tune.h — the per-machine depth choice saved by `mtplx tune` and read by `mtplx run`, `chat` and `serve`.
 *
 * Stored in $MTPLX_HOME/tuning.json (default ~/.mtplx/tuning.json) as
 *   {"version": 1, "entries": {"<key>": {"model", "cpu", "device", "threads", "depth", "draft_min_conf",
 *                                        "decode_tok_s": {"<entry>": tok/s, ...}, "time"}}}
 * keyed by "<resolved model path>|<CPU model>|<threads>" on the CPU and "<resolved model path>|cuda:N <GPU
 * name>|<threads>" on a GPU, so that a depth measured on one device is never used on another. depth 0 means
 * "AR won"; draft_min_conf > 0 means the adaptive depth won (depth is then its maximum; absent = 0). */
#ifndef MTPLX_ENGINE_TUNE_H
#define MTPLX_ENGINE_TUNE_H

#include <stddef.h>

#include "../base/err.h"

/* Facts about this machine used in keys and benchmark reports. */
typedef struct {
    char cpu[256];      /* /proc/cpuinfo "model name", or "unknown" */
    char device[192];   /* be_device_describe: "cpu" or "cuda:N <GPU name>" */
    int threads;        /* compute threads: $MTPLX_THREADS when set, else online CPUs */
} machine_facts;

void machine_facts_get(machine_facts *f);

/* Path of the tuning file (heap string, caller frees), or NULL with err. */
char *tune_path(mtplx_err *err);

/* Key for model_dir on this machine into out[n]. Returns 0, or EINVAL if model_dir cannot be resolved. */
int tune_key(const char *model_dir, char *out, size_t n, mtplx_err *err);

/* Saved choice for model_dir on this machine and device: returns 1 with *depth and *min_conf (the
 * adaptive-depth threshold, 0 = fixed depth; min_conf may be NULL) when found, 0 when absent (or the
 * file is missing / unreadable / malformed: tuning is advisory, a bad file is ignored). */
int tune_lookup(const char *model_dir, int *depth, float *min_conf);

/* Save depth and min_conf for model_dir on this machine and device, with the measured decode tok/s of
 * each candidate (names[i] such as "0", "3" or "6@0.4"; tok_s[i] < 0 = not measured). Writes atomically
 * (temp + rename). Returns 0 or an error naming the path. */
int tune_store(const char *model_dir, int depth, float min_conf, const char *const *names, const double *tok_s,
               int n, mtplx_err *err);

#endif
