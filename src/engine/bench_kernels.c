/* bench_kernels.c — see bench_kernels.h. Wall-clock timings (clock_now); the caller reports them
 * together with the machine's bandwidth measured in the same run. */
#include "bench_kernels.h"

#include <stdlib.h>
#include <string.h>

#include "../base/clock.h"
#include "../base/mem.h"
#include "../kernels/membw.h"
#include "../kernels/threadpool.h"
#include "../model/safetensors.h"

static volatile float g_sink;

int bench_membw_measure(size_t bytes, int reps, bench_membw *out, mtplx_err *err) {
    size_t n = bytes / sizeof(float);
    float *buf = mem_aligned(n * sizeof(float), "bandwidth buffer", err); /* zeroed: pages are touched */
    if (!buf) return MTPLX_ENOMEM;
    for (size_t i = 0; i < n; i += 1024) buf[i] = 1.0f;
    memset(out, 0, sizeof *out);
    out->bytes = n * sizeof(float);
    out->threads = tpool_threads(tpool_global());
    for (int r = 0; r < reps; r++) {
        double t0 = clock_now();
        g_sink += kern_stream_read(buf, n);
        double t1 = clock_now();
        g_sink += kern_stream_read_parallel(buf, n, 0);
        double t2 = clock_now();
        double one = out->bytes / (t1 - t0) / 1e9, all = out->bytes / (t2 - t1) / 1e9;
        if (one > out->gbs_one) out->gbs_one = one;
        if (all > out->gbs_all) out->gbs_all = all;
    }
    free(buf);
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int bench_verify_cost(const mtplx_model *m, int max_rows, int context, int reps, uint64_t seed, bench_verify *out,
                      mtplx_err *err) {
    if (max_rows < 1 || max_rows > BENCH_MAX_ROWS || reps < 1 || context < 1)
        return err_set(err, MTPLX_EINVAL, "verify-cost: rows 1..%d, reps >= 1, context >= 1", BENCH_MAX_ROWS);
    const model_config *c = model_config_of(m);
    int cap = context + (reps + 2) * max_rows + 8; /* a warm-up round, reps rounds, the last forward */
    model_state *s = NULL;
    int rc = model_state_new(m, cap, max_rows, &s, err);
    if (rc) return rc;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(context > max_rows ? context : max_rows));
    float *logits = malloc(sizeof(float) * (size_t)max_rows * c->vocab_size);
    double *times = malloc(sizeof(double) * (size_t)reps * (max_rows + 1));
    if (!tok || !logits || !times) {
        rc = err_set(err, MTPLX_ENOMEM, "verify-cost: out of memory");
        goto done;
    }
    for (int i = 0; i < context; i++) tok[i] = (int32_t)(next_rand(&seed) % (uint64_t)c->vocab_size);
    fwd_request pre = {.logits = logits, .logits_from = context - 1};
    if ((rc = model_forward(m, s, tok, context, &pre, err))) goto done;
    /* one untimed round warms caches, the pool and the scratch buffers */
    for (int rep = -1; rep < reps; rep++) {
        for (int R = 1; R <= max_rows; R++) {
            for (int i = 0; i < R; i++) tok[i] = (int32_t)(next_rand(&seed) % (uint64_t)c->vocab_size);
            fwd_request req = {.logits = logits, .logits_from = 0, .capture = 1};
            double t0 = clock_now();
            rc = model_forward(m, s, tok, R, &req, err);
            double dt = clock_now() - t0;
            if (rc) goto done;
            if ((rc = model_state_commit(s, 1, err))) goto done;
            if (rep >= 0) times[(size_t)R * reps + rep] = dt;
        }
    }
    memset(out, 0, sizeof *out);
    out->max_rows = max_rows, out->reps = reps, out->context = context;
    for (int R = 1; R <= max_rows; R++) {
        qsort(times + (size_t)R * reps, (size_t)reps, sizeof(double), cmp_double);
        double *t = times + (size_t)R * reps;
        out->median_s[R] = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    }
    for (int R = 1; R <= max_rows; R++) out->ratio[R] = out->median_s[R] / out->median_s[1];
done:
    free(tok), free(logits), free(times);
    model_state_free(s);
    return rc;
}

int bench_prefill_seconds(const mtplx_model *m, int tokens, int reps, uint64_t seed, double *seconds, mtplx_err *err) {
    const model_config *c = model_config_of(m);
    model_state *s = NULL;
    int rc = model_state_new(m, tokens + 1, 1, &s, err);
    if (rc) return rc;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)tokens);
    float *logits = malloc(sizeof(float) * (size_t)c->vocab_size);
    if (!tok || !logits) {
        rc = err_set(err, MTPLX_ENOMEM, "prefill bench: out of memory");
        goto done;
    }
    for (int i = 0; i < tokens; i++) tok[i] = (int32_t)(next_rand(&seed) % (uint64_t)c->vocab_size);
    *seconds = 1e30;
    for (int r = 0; r < reps; r++) {
        model_state_reset(s);
        fwd_request req = {.logits = logits, .logits_from = tokens - 1};
        double t0 = clock_now();
        if ((rc = model_forward(m, s, tok, tokens, &req, err))) goto done;
        double dt = clock_now() - t0;
        if (dt < *seconds) *seconds = dt;
    }
done:
    free(tok), free(logits);
    model_state_free(s);
    return rc;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int bench_weight_bytes(const char *dir, int tied, uint64_t *per_token, uint64_t *all, mtplx_err *err) {
    st_set *st = NULL;
    int rc = st_open_dir(dir, &st, err);
    if (rc) return rc;
    uint64_t tok = 0, tot = 0;
    for (int i = 0; i < st_count(st); i++) {
        const st_tensor *t = st_at(st, i);
        tot += t->nbytes;
        int is_mtp = !strncmp(t->name, "mtp.", 4) || strstr(t->name, ".mtp.") != NULL;
        int is_embed = strstr(t->name, "embed_tokens.") != NULL;
        if (is_mtp || has_suffix(t->name, "visual") || strstr(t->name, "visual.")) continue;
        if (is_embed && !tied) continue;
        tok += t->nbytes;
    }
    st_close(st);
    *per_token = tok;
    if (all) *all = tot;
    return 0;
}
