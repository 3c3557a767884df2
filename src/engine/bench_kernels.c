/* bench_kernels.c — see bench_kernels.h. Wall-clock timings (clock_now); the caller reports them
 * together with the machine's bandwidth measured in the same run. */
#include "bench_kernels.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../backend/backend.h"
#include "../backend/device.h"
#include "../base/clock.h"
#include "../kernels/matmul.h"
#include "../kernels/membw.h"
#include "../kernels/threadpool.h"
#include "../model/safetensors.h"
#include "rng.h"

static volatile float g_sink;

float *bench_membw_buffer(size_t bytes) {
    size_t n = bytes / sizeof(float), huge = (size_t)2 << 20;
    size_t sz = (n * sizeof(float) + huge - 1) & ~(huge - 1);
    /* 2 MiB-aligned and marked for transparent huge pages before the first touch, like the packed
     * quantized weights (matmul_qpack.c), so both are read on the same page size */
    float *buf = aligned_alloc(huge, sz ? sz : huge);
    if (!buf) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(buf, sz, MADV_HUGEPAGE); /* advisory */
#endif
    memset(buf, 0, sz); /* pages are touched */
    for (size_t i = 0; i < n; i += 1024) buf[i] = 1.0f;
    return buf;
}

int bench_membw_measure(size_t bytes, int reps, bench_membw *out, mtplx_err *err) {
    size_t n = bytes / sizeof(float);
    float *buf = bench_membw_buffer(bytes);
    if (!buf) return err_set(err, MTPLX_ENOMEM, "bandwidth buffer: cannot allocate %zu bytes", bytes);
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

int bench_verify_cost(const mtplx_model *m, int max_rows, int context, int reps, int logits_top, uint64_t seed,
                      const float *bw, size_t bw_bytes, bench_verify *out, mtplx_err *err) {
    if (max_rows < 1 || max_rows > BENCH_MAX_ROWS || reps < 1 || context < 1 || logits_top < 0 ||
        logits_top > BE_TOP_MAX)
        return err_set(err, MTPLX_EINVAL, "verify-cost: rows 1..%d, reps >= 1, context >= 1, logits top 0..%d",
                       BENCH_MAX_ROWS, BE_TOP_MAX);
    const model_config *c = model_config_of(m);
    int cap = context + (reps + 2) * max_rows + 8; /* a warm-up round, reps rounds, the last forward */
    model_state *s = NULL;
    int rc = model_state_new(m, cap, max_rows, &s, err);
    if (rc) return rc;
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)(context > max_rows ? context : max_rows));
    float *logits = malloc(sizeof(float) * (size_t)max_rows * c->vocab_size);
    /* with a top: each row's list, as the engine takes a verify's rows (fwd_request.top_out) */
    int32_t *lists = malloc(sizeof(int32_t) * (size_t)max_rows * (2 * BE_TOP_MAX + 2));
    double *times = malloc(sizeof(double) * (size_t)reps * (max_rows + 2)); /* [R][reps], then GB/s [reps] */
    if (!tok || !logits || !lists || !times) {
        rc = err_set(err, MTPLX_ENOMEM, "verify-cost: out of memory");
        goto done;
    }
    for (int i = 0; i < context; i++) tok[i] = (int32_t)(next_rand(&seed) % (uint64_t)c->vocab_size);
    fwd_request pre = {.logits = logits, .logits_from = context - 1};
    if ((rc = model_forward(m, s, tok, context, &pre, err))) goto done;
    /* one untimed round warms caches, the pool and the scratch buffers */
    for (int rep = -1; rep < reps; rep++) {
        for (int R = 1; R <= max_rows; R++) {
            /* the bandwidth read evicts the caches: it goes before a different R each round */
            if (bw && rep >= 0 && R == 1 + rep % max_rows) {
                double t0 = clock_now();
                g_sink += kern_stream_read_parallel(bw, bw_bytes / sizeof(float), 0);
                times[(size_t)(max_rows + 1) * reps + rep] = bw_bytes / (clock_now() - t0) / 1e9;
            }
            for (int i = 0; i < R; i++) tok[i] = (int32_t)(next_rand(&seed) % (uint64_t)c->vocab_size);
            fwd_request req = {.logits = logits, .logits_from = 0, .capture = 1, .logits_top = logits_top,
                               .top_out = logits_top > 0 && logits_top < c->vocab_size ? lists : NULL};
            double t0 = clock_now();
            rc = model_forward(m, s, tok, R, &req, err);
            double dt = clock_now() - t0;
            if (rc) goto done;
            if ((rc = model_state_commit(s, 1, err))) goto done;
            model_state_settle(s); /* outside the timing: the next forward pays only for its own rows */
            if (rep >= 0) times[(size_t)R * reps + rep] = dt;
        }
    }
    memset(out, 0, sizeof *out);
    out->max_rows = max_rows, out->reps = reps, out->context = context, out->logits_top = logits_top;
    for (int R = 1; R <= max_rows; R++) {
        qsort(times + (size_t)R * reps, (size_t)reps, sizeof(double), cmp_double);
        double *t = times + (size_t)R * reps;
        out->median_s[R] = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    }
    for (int R = 1; R <= max_rows; R++) out->ratio[R] = out->median_s[R] / out->median_s[1];
    if (bw) {
        double *g = times + (size_t)(max_rows + 1) * reps;
        qsort(g, (size_t)reps, sizeof(double), cmp_double);
        out->membw_gbs = reps % 2 ? g[reps / 2] : 0.5 * (g[reps / 2 - 1] + g[reps / 2]);
    }
done:
    free(tok), free(logits), free(lists), free(times);
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

int bench_weight_bytes(const char *dir, int tied, double expert_frac, uint64_t *per_token, uint64_t *all,
                       mtplx_err *err) {
    st_set *st = NULL;
    int rc = st_open_dir(dir, &st, err);
    if (rc) return rc;
    uint64_t tok = 0, tot = 0;
    double routed = 0;
    for (int i = 0; i < st_count(st); i++) {
        const st_tensor *t = st_at(st, i);
        tot += t->nbytes;
        int is_mtp = !strncmp(t->name, "mtp.", 4) || strstr(t->name, ".mtp.") != NULL;
        int is_embed = strstr(t->name, "embed_tokens.") != NULL;
        if (is_mtp || has_suffix(t->name, "visual") || strstr(t->name, "visual.")) continue;
        if (is_embed && !tied) continue;
        if (strstr(t->name, ".mlp.experts.") || strstr(t->name, ".mlp.switch_mlp.")) routed += (double)t->nbytes;
        else tok += t->nbytes;
    }
    st_close(st);
    *per_token = tok + (uint64_t)(routed * expert_frac + 0.5);
    if (all) *all = tot;
    return 0;
}

/* Per-model buffers of bench_draft_cost. */
typedef struct {
    model_state *st;
    mtp_state *mst;
    sampler *smp;
    sampler_dist q;
    float *logits;  /* [context][V] prefill logits, then [V] draft logits */
    float *hidden;  /* [context][H] prefill hiddens */
    float *h;       /* [3][H] two chained draft hiddens, then the trunk hidden of the last position */
    double *t;      /* [4][steps] layer, head, sample, step seconds */
} draft_run;

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_draft_cost(const mtplx_model *const *models, int n, int context, int steps, int chain, uint64_t seed,
                     const sampler_params *sp, bench_draft *out, mtplx_err *err) {
    if (n < 1 || n > BENCH_MAX_DRAFT_MODELS || context < 2 || steps < 1 || chain < 1)
        return err_set(err, MTPLX_EINVAL, "draft-cost: 1..%d models, context >= 2, steps >= 1, chain >= 1",
                       BENCH_MAX_DRAFT_MODELS);
    draft_run *r = calloc((size_t)n, sizeof *r);
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)context);
    if (!r || !tok) {
        free(r), free(tok);
        return err_set(err, MTPLX_ENOMEM, "draft-cost: out of memory");
    }
    const model_config *c = model_config_of(models[0]);
    const int V = c->vocab_size, H = c->hidden_size;
    for (int i = 0; i < context; i++) tok[i] = (int32_t)(next_rand(&seed) % (uint64_t)V);
    rng_state rng;
    rng_seed(&rng, seed);
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        const mtplx_model *m = models[k];
        if (model_config_of(m)->vocab_size != V || model_config_of(m)->hidden_size != H || !model_has_mtp(m)) {
            rc = err_set(err, MTPLX_EINVAL, "draft-cost: the models must share one shape and have an MTP head");
            break;
        }
        draft_run *d = &r[k];
        d->logits = malloc(sizeof(float) * (size_t)context * V);
        d->hidden = malloc(sizeof(float) * (size_t)context * H);
        d->h = malloc(sizeof(float) * 3 * (size_t)H);
        d->t = malloc(sizeof(double) * 4 * (size_t)steps);
        if (!d->logits || !d->hidden || !d->h || !d->t) {
            rc = err_set(err, MTPLX_ENOMEM, "draft-cost: out of memory");
            break;
        }
        if ((rc = model_state_new(m, context + 1, 1, &d->st, err)) ||
            (rc = mtp_state_new(m, context + chain + 1, &d->mst, err)) || (rc = sampler_new(V, &d->smp, err)) ||
            (rc = sampler_dist_init(&d->q, V, err)))
            break;
        fwd_request req = {.logits = d->logits, .logits_from = context - 1, .hidden = d->hidden};
        if ((rc = model_forward(m, d->st, tok, context, &req, err))) break;
        memcpy(d->h + 2 * (size_t)H, d->hidden + (size_t)(context - 1) * H, sizeof(float) * (size_t)H);
        /* MTP history: pairs (h_j, x_{j+1}), j < context - 1 (outputs unused, written in place) */
        rc = model_mtp_forward(m, d->mst, d->hidden, tok + 1, context - 1, d->hidden, err);
    }
    const int base = context - 1, top = sampler_top_needed(sp, 0, V);
    int32_t cur[BENCH_MAX_DRAFT_MODELS];
    const float *hin[BENCH_MAX_DRAFT_MODELS];
    for (int i = -chain; i < steps && !rc; i++) { /* one untimed chain warms caches and buffers */
        for (int k = 0; k < n && !rc; k++) {
            draft_run *d = &r[k];
            const mtplx_model *m = models[k];
            int j = (i + chain) % chain;
            if (j == 0) {
                if ((rc = mtp_state_trim(d->mst, base, err))) break;
                hin[k] = d->h + 2 * (size_t)H;
                cur[k] = tok[context - 1];
            }
            float *hout = d->h + (size_t)(j & 1) * H;
            double t0 = clock_now();
            rc = model_mtp_forward(m, d->mst, hin[k], &cur[k], 1, hout, err);
            double t1 = clock_now();
            /* as a generation's draft step reads it: each row's k best only when the sampler needs no
             * more (a device backend then downloads lists, not the V-wide row) */
            if (!rc) rc = model_lm_head_top(m, HEAD_DRAFT, hout, 1, d->logits, top, err);
            double t2 = clock_now();
            if (!rc) rc = sampler_build(d->smp, d->logits, sp, 0, &d->q, err);
            if (!rc) cur[k] = sampler_dist_sample(&d->q, rng_uniform(&rng));
            double t3 = clock_now();
            hin[k] = hout;
            if (i >= 0) {
                d->t[i] = t1 - t0;
                d->t[steps + i] = t2 - t1;
                d->t[2 * steps + i] = t3 - t2;
                d->t[3 * steps + i] = t3 - t0;
            }
        }
    }
    for (int k = 0; k < n && !rc; k++) {
        draft_run *d = &r[k];
        out[k].layer_s = median_of(d->t, steps);
        out[k].head_s = median_of(d->t + steps, steps);
        out[k].sample_s = median_of(d->t + 2 * (size_t)steps, steps);
        out[k].step_s = median_of(d->t + 3 * (size_t)steps, steps);
    }
    for (int k = 0; k < n; k++) {
        draft_run *d = &r[k];
        model_state_free(d->st);
        if (d->mst) mtp_state_free(d->mst);
        sampler_free(d->smp);
        sampler_dist_free(&d->q);
        free(d->logits), free(d->hidden), free(d->h), free(d->t);
    }
    free(r), free(tok);
    return rc;
}

/* Σ_v min(p(v), q(v)); dense is a [V] scratch that is all zero on entry and left all zero. */
static double overlap(const sampler_dist *p, const sampler_dist *q, double *dense) {
    for (int i = 0; i < q->n; i++) dense[q->ids[i]] = q->probs[i];
    double s = 0;
    for (int i = 0; i < p->n; i++) {
        double a = p->probs[i], b = dense[p->ids[i]];
        s += a < b ? a : b;
    }
    for (int i = 0; i < q->n; i++) dense[q->ids[i]] = 0;
    return s;
}

int bench_draft_accept(const mtplx_model *const *models, int n, const int32_t *const *texts, const int *lens,
                       const int *score_from, int n_texts, int depth, const sampler_params *sp_p, const sampler_params *sp_q, double *alpha,
                       long *positions, mtplx_err *err) {
    if (n < 1 || depth < 1 || n_texts < 1)
        return err_set(err, MTPLX_EINVAL, "draft-accept: models >= 1, depth >= 1, texts >= 1");
    const model_config *c = model_config_of(models[0]);
    const int V = c->vocab_size, H = c->hidden_size;
    int Lmax = 0;
    for (int i = 0; i < n_texts; i++) Lmax = lens[i] > Lmax ? lens[i] : Lmax;
    float *logits = malloc(sizeof(float) * (size_t)Lmax * V), *hidden = malloc(sizeof(float) * (size_t)Lmax * H);
    float *dl = malloc(sizeof(float) * (size_t)V), *hd = malloc(sizeof(float) * 2 * (size_t)H);
    double *dense = calloc((size_t)V, sizeof(double));
    sampler *smp = NULL;
    sampler_dist p = {0}, q = {0};
    model_state *st = NULL;
    mtp_state *mst = NULL;
    int rc = 0;
    if (!logits || !hidden || !dl || !hd || !dense) rc = err_set(err, MTPLX_ENOMEM, "draft-accept: out of memory");
    if (!rc) rc = sampler_new(V, &smp, err);
    if (!rc) rc = sampler_dist_init(&p, V, err);
    if (!rc) rc = sampler_dist_init(&q, V, err);
    for (int k = 0; k < n * depth; k++) alpha[k] = 0;
    *positions = 0;
    for (int k = 0; k < n && !rc; k++) {
        const mtplx_model *m = models[k];
        if (model_config_of(m)->vocab_size != V || model_config_of(m)->hidden_size != H || !model_has_mtp(m)) {
            rc = err_set(err, MTPLX_EINVAL, "draft-accept: the models must share one shape and have an MTP head");
            break;
        }
        if ((rc = model_state_new(m, Lmax, 1, &st, err)) || (rc = mtp_state_new(m, Lmax + depth, &mst, err))) break;
        long npos = 0;
        for (int ti = 0; ti < n_texts && !rc; ti++) {
            const int32_t *x = texts[ti];
            int L = lens[ti];
            if (L < depth + 2) continue;
            model_state_reset(st);
            mtp_state_reset(mst);
            fwd_request req = {.logits = logits, .logits_from = 0, .hidden = hidden};
            if ((rc = model_forward(m, st, x, L, &req, err))) break;
            int j0 = score_from ? score_from[ti] : 0;
            if (j0 > L - 1 - depth) j0 = L - 1 - depth;
            /* history pairs (h_i, x_{i+1}), i < j0 (outputs unused: written over those h_i, not needed again) */
            if (j0 > 0 && (rc = model_mtp_forward(m, mst, hidden, x + 1, j0, hidden, err))) break;
            for (int j = j0; j + depth <= L - 1 && !rc; j++) {
                const float *h = hidden + (size_t)j * H;
                for (int d = 1; d <= depth && !rc; d++) {
                    float *out = hd + (size_t)(d & 1) * H;
                    rc = model_mtp_forward(m, mst, h, &x[j + d], 1, out, err);
                    if (!rc) rc = model_lm_head(m, HEAD_DRAFT, out, 1, dl, err);
                    if (!rc) rc = sampler_build(smp, dl, sp_q, 0, &q, err);
                    if (!rc) rc = sampler_build(smp, logits + (size_t)(j + d) * V, sp_p, 0, &p, err);
                    if (!rc) alpha[k * depth + d - 1] += overlap(&p, &q, dense);
                    h = out;
                }
                if (!rc) rc = mtp_state_trim(mst, j + 1, err); /* keep the true pair (h_j, x_{j+1}) */
                npos++;
            }
        }
        for (int d = 0; d < depth && npos; d++) alpha[k * depth + d] /= (double)npos;
        *positions = npos;
        model_state_free(st);
        mtp_state_free(mst);
        st = NULL, mst = NULL;
    }
    model_state_free(st);
    if (mst) mtp_state_free(mst);
    sampler_free(smp);
    sampler_dist_free(&p);
    sampler_dist_free(&q);
    free(logits), free(hidden), free(dl), free(hd), free(dense);
    return rc;
}

/* One random weight of bench_matmul's format; its buffers go to mem[0..2]. Returns 0 or ENOMEM. */
static int bench_matmul_weight(int bits, int gs, int n, int k, uint64_t *seed, kern_weight *w, void **mem,
                               mtplx_err *err) {
    size_t elems = (size_t)n * k, words = bits ? elems * bits / 32 : (elems + 1) / 2, groups = elems / gs;
    /* on 2 MiB-aligned huge pages, as the packed copies and (on kernels whose page cache holds large
     * folios, e.g. ext4 on Linux 6.18) a checkpoint's mmap'd bf16 rows are read in decode: on malloc'd 4
     * KiB pages the bf16 kernel read 45-48 GB/s, on huge pages 52-54 (2-thread Zen 5, bench/zen.md
     * "Session 19") */
    uint32_t *q = (uint32_t *)bench_membw_buffer(words * 4);
    uint16_t *s = bits ? malloc(groups * 2) : NULL, *b = bits ? malloc(groups * 2) : NULL;
    mem[0] = q, mem[1] = s, mem[2] = b;
    if (!q || (bits && (!s || !b))) return err_set(err, MTPLX_ENOMEM, "matmul bench: out of memory");
    for (size_t i = 0; i < words; i++) {
        uint64_t r = next_rand(seed);
        /* bf16: keep every element a modest normal number (exponent 0x3c, random mantissa and sign) */
        q[i] = bits ? (uint32_t)r : (uint32_t)((r & 0x807f807fu) | 0x3c003c00u);
    }
    for (size_t g = 0; bits && g < groups; g++) s[g] = 0x3c23, b[g] = 0xbda3; /* ~0.01 and ~-0.08 */
    *w = bits ? (kern_weight){.dtype = DT_U32, .rows = n, .cols = k, .data = q, .scales = s, .biases = b,
                              .scale_dtype = DT_BF16, .bits = bits, .group_size = gs}
              : (kern_weight){.dtype = DT_BF16, .rows = n, .cols = k, .data = q};
    return 0;
}

/* bench_matmul's timing rounds on a device backend (`--device cuda`): the weights uploaded once, x in
 * device memory, every pass closed by a 4-byte download so that its kernels have finished. */
static int bench_matmul_device(const kern_weight *w, int count, int n, int k, const float *x, int max_rows,
                               int reps, double *times, mtplx_err *err) {
    be_backend *be = NULL;
    int rc = be_create(NULL, &be, err);
    if (rc) return rc;
    be_buf *bx = NULL, *by = NULL;
    kern_weight *dw = calloc((size_t)count, sizeof *dw);
    if (!dw) rc = err_set(err, MTPLX_ENOMEM, "matmul bench: out of memory");
    if (!rc) rc = be->ops->buf_alloc(be, sizeof(float) * (size_t)max_rows * k, 0, "matmul bench x", &bx, err);
    if (!rc) rc = be->ops->buf_alloc(be, sizeof(float) * (size_t)max_rows * n, 0, "matmul bench y", &by, err);
    for (int i = 0; i < count && !rc; i++) dw[i] = w[i], rc = be->ops->weight_prepare(be, &dw[i], err);
    if (!rc) {
        float *dx = be_buf_addr(be, bx), *dy = be_buf_addr(be, by), probe;
        be->ops->upload(be, dx, x, sizeof(float) * (size_t)max_rows * k);
        for (int r = -1; r < reps; r++) /* one untimed round first */
            for (int T = 1; T <= max_rows; T++) {
                double t0 = clock_now();
                for (int i = 0; i < count; i++) be_matmul(be, dy, n, dx, k, T, &dw[i]);
                be->ops->download(be, &probe, dy, sizeof probe);
                if (r >= 0) times[(size_t)T * reps + r] = clock_now() - t0;
            }
    }
    be->ops->buf_free(be, bx);
    be->ops->buf_free(be, by);
    be_free(be);
    free(dw);
    return rc;
}

int bench_matmul(const char *format, int gs, int n, int k, int count, int max_rows, int reps, uint64_t seed,
                 bench_matmul_out *out, mtplx_err *err) {
    int bits = !strcmp(format, "q4") ? 4 : !strcmp(format, "q8") ? 8 : !strcmp(format, "bf16") ? 0 : -1;
    if (bits < 0) return err_set(err, MTPLX_EINVAL, "matmul bench: format '%s' (q4, q8 or bf16)", format);
    if (gs != 32 && gs != 64 && gs != 128) return err_set(err, MTPLX_EINVAL, "matmul bench: group size 32, 64 or 128");
    if (n < 1 || k < 64 || k % 64 || k % gs || count < 1 || max_rows < 1 || max_rows > BENCH_MATMUL_MAX_ROWS || reps < 1)
        return err_set(err, MTPLX_EINVAL, "matmul bench: need rows >= 1, cols a multiple of 64 and of the group size, count >= 1, "
                                          "1..%d activation rows, reps >= 1", BENCH_MATMUL_MAX_ROWS);
    int rc = 0;
    kern_weight *w = calloc((size_t)count, sizeof *w);
    void **mem = calloc((size_t)count * 3, sizeof *mem);
    float *x = malloc(sizeof(float) * (size_t)max_rows * k), *y = malloc(sizeof(float) * (size_t)max_rows * n);
    double *times = malloc(sizeof(double) * (size_t)reps * (max_rows + 1));
    kern_pack_set *packs = NULL;
    if (!w || !mem || !x || !y || !times) {
        rc = err_set(err, MTPLX_ENOMEM, "matmul bench: out of memory");
        goto done;
    }
    int on_gpu = strcmp(be_device_resolved(), "cpu") != 0;
    for (int i = 0; i < count && !rc; i++)
        if (!(rc = bench_matmul_weight(bits, gs, n, k, &seed, &w[i], mem + 3 * i, err)) && !on_gpu)
            rc = kern_pack_set_add(&packs, &w[i], err);
    if (rc) goto done;
    for (size_t i = 0; i < (size_t)max_rows * k; i++) x[i] = (float)(next_rand(&seed) % 2001) / 1000.0f - 1.0f;
    if (on_gpu && (rc = bench_matmul_device(w, count, n, k, x, max_rows, reps, times, err))) goto done;
    for (int r = -1; r < reps && !on_gpu; r++) /* one untimed round first */
        for (int T = 1; T <= max_rows; T++) {
            double t0 = clock_now();
            for (int i = 0; i < count; i++) kern_matmul(y, n, x, k, T, &w[i]);
            if (r >= 0) times[(size_t)T * reps + r] = clock_now() - t0;
        }
    memset(out, 0, sizeof *out);
    out->count = count, out->max_rows = max_rows, out->reps = reps;
    out->bytes = (double)count * n * k * (bits ? bits / 8.0 + 4.0 / gs : 2.0);
    for (int T = 1; T <= max_rows; T++) {
        double *t = times + (size_t)T * reps;
        qsort(t, (size_t)reps, sizeof(double), cmp_double);
        out->median_s[T] = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
    }
done:
    kern_pack_set_free(packs);
    for (int i = 0; mem && i < 3 * count; i++) free(mem[i]);
    free(w), free(mem), free(x), free(y), free(times);
    return rc;
}
