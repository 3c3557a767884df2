/* backend.c — choosing a backend at load (docs/architecture.md, "Adding a backend"), the process's
 * default device and the GPU memory preflight (device.h). */
#include "backend.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../kernels/moe.h"
#include "cpu/cpu_backend.h"
#include "device.h"
#ifdef MTPLX_CUDA
#include "cuda/cuda_backend.h"
#endif

static char g_default[32]; /* "" = not set */

int be_device_has_cuda(void) {
#ifdef MTPLX_CUDA
    return 1;
#else
    return 0;
#endif
}

static int gpu_count(void) {
#ifdef MTPLX_CUDA
    return be_cuda_device_count();
#else
    return 0;
#endif
}

/* Parse "cpu" | "cuda" | "cuda:N" into *gpu (-1 for cpu). Returns 0 or MTPLX_EINVAL. */
static int parse_spec(const char *spec, int *gpu, mtplx_err *err) {
    if (!strcmp(spec, "cpu")) return *gpu = -1, 0;
    if (!strcmp(spec, "cuda")) return *gpu = 0, 0;
    if (!strncmp(spec, "cuda:", 5)) {
        char *end;
        long n = strtol(spec + 5, &end, 10);
        if (end != spec + 5 && !*end && n >= 0 && n < (1L << 20)) return *gpu = (int)n, 0;
    }
    return err_set(err, MTPLX_EINVAL, "device must be cpu, cuda or cuda:N, got '%s'", spec);
}

/* Check that spec names a usable device. Returns 0 and *gpu, or an error. */
static int check_spec(const char *spec, int *gpu, mtplx_err *err) {
    int rc = parse_spec(spec, gpu, err);
    if (rc || *gpu < 0) return rc;
    if (!be_device_has_cuda())
        return err_set(err, MTPLX_EUNSUPPORTED, "device %s: this mtplx was built without CUDA (rebuild with make CUDA=1)",
                       spec);
    int n = gpu_count();
    if (*gpu >= n)
        return err_set(err, MTPLX_EINVAL, "device %s: %d GPU%s visible", spec, n, n == 1 ? "" : "s");
    return 0;
}

int be_device_set_default(const char *spec, mtplx_err *err) {
    int gpu;
    int rc = check_spec(spec, &gpu, err);
    if (rc) return rc;
    if (gpu < 0) snprintf(g_default, sizeof g_default, "cpu");
    else snprintf(g_default, sizeof g_default, "cuda:%d", gpu);
    return 0;
}

const char *be_device_resolved(void) {
    static char auto_spec[32];
    if (g_default[0]) return g_default;
    const char *e = getenv("MTPLX_DEVICE");
    int gpu;
    if (e && *e && !parse_spec(e, &gpu, NULL)) {
        if (gpu < 0) return "cpu";
        snprintf(auto_spec, sizeof auto_spec, "cuda:%d", gpu);
        return auto_spec;
    }
    return gpu_count() > 0 ? "cuda:0" : "cpu";
}

/* $MTPLX_DEVICE, when set, must name a device (be_device_resolved would otherwise fall back to the
 * default silently). Returns 0 or MTPLX_EINVAL naming it. */
static int device_env_check(mtplx_err *err) {
    int gpu;
    const char *env = getenv("MTPLX_DEVICE");
    if (env && *env && parse_spec(env, &gpu, err)) return err_prefix(err, "MTPLX_DEVICE");
    return 0;
}

int be_create(const char *name, be_backend **out, mtplx_err *err) {
    *out = NULL;
    int gpu;
    if (!name && !g_default[0] && device_env_check(err)) return MTPLX_EINVAL;
    if (!name) name = be_device_resolved();
    int rc = check_spec(name, &gpu, err);
    if (rc) return err_prefix(err, "backend");
    if (gpu < 0) {
        cpu_settings s;
        if (cpu_settings_from_env(&s, err)) return err_prefix(err, "CPU backend");
        return be_cpu_new(&s, out, err);
    }
#ifdef MTPLX_CUDA
    cu_settings cs;
    if (cu_settings_from_env(&cs, err)) return err_prefix(err, "CUDA backend");
    return be_cuda_new(gpu, &cs, out, err);
#else
    return err_set(err, MTPLX_EINTERNAL, "backend %s: no CUDA in this build", name);
#endif
}

void be_cpu_pack_cache_dir(char *out, size_t cap) {
    cpu_settings s;
    cpu_settings_from_env(&s, NULL); /* a bad knob is reported where a backend is made */
    snprintf(out, cap, "%s", s.pack_cache);
}

int be_env_check(mtplx_err *err) {
    if (device_env_check(err)) return MTPLX_EINVAL;
    cpu_settings s;
    if (cpu_settings_from_env(&s, err)) return err_prefix(err, "CPU backend");
#ifdef MTPLX_CUDA
    cu_settings cs;
    if (cu_settings_from_env(&cs, err)) return err_prefix(err, "CUDA backend");
#endif
    return 0;
}

void be_free(be_backend *be) {
    if (!be) return;
    be->ops->destroy(be);
}

void be_attention_seqs_loop(be_backend *be, const be_attn_args *a, const be_attn_seq *seqs, int n, float *scratch) {
    for (int i = 0; i < n; i++) {
        be_attn_args ai = *a;
        ai.big = a->big + (size_t)seqs[i].r0 * a->ldb;
        be->ops->attention(be, &ai, &seqs[i].kv, seqs[i].pos0, seqs[i].R, scratch);
    }
}

void be_mla_seqs_loop(be_backend *be, const be_mla_args *a, const be_attn_seq *seqs, int n, float *scratch) {
    for (int i = 0; i < n; i++) {
        be_mla_args ai = *a;
        ai.rows = a->rows + (size_t)seqs[i].r0 * a->ldr;
        be->ops->mla(be, &ai, &seqs[i].kv, seqs[i].pos0, seqs[i].R, scratch);
    }
}

void be_gdn_seqs_loop(be_backend *be, const be_gdn_args *a, const be_conv_args *cv, const be_gdn_seq *seqs, int n) {
    const size_t f = sizeof(float);
    int C = cv->C, kc1 = cv->kc - 1, ldb = a->ldb;
    for (int i = 0; i < n; i++) {
        const be_gdn_seq *q = &seqs[i];
        float *row0 = a->big + (size_t)q->r0 * ldb;
        be_copy(be, q->win, q->conv, f * (size_t)kc1 * C);
        if (!cv->rows_in_win)
            for (int t = 0; t < q->R; t++) be_copy(be, q->win + (size_t)(kc1 + t) * C, row0 + (size_t)t * ldb + a->u_off, f * C);
        be->ops->conv1d_silu(be, row0 + a->u_off, ldb, q->win, C, cv->w, C, cv->kc, q->R);
        be_copy(be, q->conv, q->win + (size_t)q->R * C, f * (size_t)kc1 * C);
        be_gdn_args ai = *a;
        ai.big = row0;
        ai.src = q->src, ai.dst = q->dst, ai.qn = q->qn, ai.kn = q->kn, ai.tape_g = q->tape_g, ai.tape_d = q->tape_d;
        be->ops->gdn(be, &ai, q->R);
    }
}

/* Entry j of row v into the best-first list o[0..*n) of at most k ids, and the first NaN / +inf into
 * *bad: a later id never wins a tie, so an entry that is not larger than the k-th is not taken. */
static inline void top_insert(const float *v, int j, int32_t *o, int *n, int k, int32_t *bad) {
    if (!(v[j] < INFINITY) && *bad < 0) *bad = j;
    if (isnan(v[j]) || (*n == k && !(v[j] > v[o[*n - 1]]))) return;
    int i = *n < k ? (*n)++ : k - 1;
    for (; i > 0 && v[j] > v[o[i - 1]]; i--) o[i] = o[i - 1];
    o[i] = j;
}

#define TOP_BLOCK 16

void be_logits_top_host(be_backend *be, int32_t *out, const float *x, int ldx, int R, int V, int k) {
    (void)be;
    for (int t = 0; t < R; t++) {
        const float *v = x + (size_t)t * ldx;
        int32_t *o = out + (size_t)t * (2 * k + 2), bad = -1;
        int n = 0, j = 0;
        for (; j < V && n < k; j++) top_insert(v, j, o, &n, k, &bad);
        /* a full list: a block of TOP_BLOCK entries none larger than the k-th and all finite changes
         * nothing (one branch-free test); otherwise its entries go in one by one, as above */
        for (; j + TOP_BLOCK <= V; j += TOP_BLOCK) {
            const float thr = v[o[k - 1]];
            int hit = 0;
            for (int i = 0; i < TOP_BLOCK; i++) hit |= (v[j + i] > thr) | !(v[j + i] < INFINITY);
            if (!hit) continue;
            for (int i = j; i < j + TOP_BLOCK; i++) top_insert(v, i, o, &n, k, &bad);
        }
        for (; j < V; j++) top_insert(v, j, o, &n, k, &bad);
        for (int i = 0; i < k; i++) {
            float f = i < n ? v[o[i]] : 0.0f;
            if (i >= n) o[i] = -1;
            memcpy(&o[k + i], &f, sizeof f);
        }
        o[2 * k] = bad;
        float f = bad >= 0 ? v[bad] : 0.0f;
        memcpy(&o[2 * k + 1], &f, sizeof f);
    }
}

void be_gdn_commit_loop(be_backend *be, const be_gdn_commit *items, int n, size_t conv_floats, int Hk, int Hv, int Dk,
                        int Dv) {
    for (int i = 0; i < n; i++) {
        const be_gdn_commit *q = &items[i];
        be_copy(be, q->conv, q->conv_src, sizeof(float) * conv_floats);
        be->ops->gdn_replay(be, q->dst, q->start, q->tape_k, q->tape_g, q->tape_d, q->keep, Hk, Hv, Dk, Dv);
    }
}

int be_moe_router_check(const moe_router *r, mtplx_err *err) { return kern_moe_router_check(r, err); }

int be_weights_prepare(be_backend *be, be_weight *const *ws, int n, mtplx_err *err) {
    if (be->ops->weights_prepare) return be->ops->weights_prepare(be, ws, n, err);
    for (int i = 0; i < n; i++) {
        int rc = be->ops->weight_prepare(be, ws[i], err);
        if (rc) return rc;
    }
    return 0;
}

#ifdef MTPLX_CUDA
/* Bytes of the *.safetensors files in dir (0 when none can be read). */
static size_t checkpoint_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors")) continue;
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!stat(path, &st)) total += (size_t)st.st_size;
    }
    closedir(d);
    return total;
}

/* 1 when dir/config.json declares an MLX quantization (a "quantization" key in its first 64 KiB),
 * 0 when it does not or cannot be read. */
static int checkpoint_quantized(const char *dir) {
    char path[4096], buf[65537];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "\"quantization\"") != NULL;
}
#endif

#define GIB 1073741824.0

int be_device_preflight(const char *model_dir, mtplx_err *err) {
    const char *spec = be_device_resolved();
    int gpu;
    int rc0 = check_spec(spec, &gpu, err); /* no CUDA in this build / no such GPU: say so now */
    if (rc0) return rc0;
    if (gpu < 0) return 0;
#ifdef MTPLX_CUDA
    size_t fr = 0, tot = 0;
    char name[128] = "";
    int rc = be_cuda_mem_info(gpu, &fr, &tot, name, sizeof name, err);
    if (rc) return rc;
    const char *lim = getenv("MTPLX_GPU_MEM_LIMIT");
    if (lim && *lim) {
        size_t cap = (size_t)strtoull(lim, NULL, 10);
        if (cap < fr) fr = cap;
    }
    size_t w = checkpoint_bytes(model_dir);
    /* weights as stored, plus a working margin: KV cache, states, scratch and the CUDA context;
     * quantized weights also get a tile-interleaved copy of their scales and biases at upload
     * (cuda_mma_sk.cu: up to 12.5% of a q4 group-64 weight's bytes) */
    size_t margin = (size_t)(0.5 * GIB) + w / 20 + (checkpoint_quantized(model_dir) ? w / 8 : 0);
    if (w + margin > fr)
        return err_set(err, MTPLX_ENOMEM,
                       "%s: the checkpoint's %.2f GiB of weights (+ %.2f GiB working memory) do not fit on GPU %d "
                       "(%s): %.2f GiB free of %.2f GiB; use --device cpu or a quantized checkpoint",
                       model_dir, w / GIB, margin / GIB, gpu, name, fr / GIB, tot / GIB);
    return 0;
#else
    return err_set(err, MTPLX_EINTERNAL, "device %s: no CUDA in this build", spec);
#endif
}

void be_device_describe(char *out, size_t n) {
    const char *spec = be_device_resolved();
    int gpu;
    if (!n) return;
    snprintf(out, n, "%s", spec);
    if (parse_spec(spec, &gpu, NULL) || gpu < 0) return;
#ifdef MTPLX_CUDA
    size_t fr, tot;
    char name[128] = "";
    if (!be_cuda_mem_info(gpu, &fr, &tot, name, sizeof name, NULL) && name[0]) snprintf(out, n, "%s %s", spec, name);
#endif
}

int be_device_membw(size_t bytes, int reps, double *gbs, char *name, size_t name_len, mtplx_err *err) {
    int gpu;
    *gbs = 0;
    if (parse_spec(be_device_resolved(), &gpu, err)) return err->code;
    if (gpu < 0) return err_set(err, MTPLX_EUNSUPPORTED, "device bandwidth: the device is the CPU");
#ifdef MTPLX_CUDA
    size_t fr, tot;
    int rc = be_cuda_mem_info(gpu, &fr, &tot, name, name_len, err);
    return rc ? rc : be_cuda_membw(gpu, bytes, reps, gbs, err);
#else
    (void)bytes, (void)reps, (void)name, (void)name_len;
    return err_set(err, MTPLX_EINTERNAL, "no CUDA in this build");
#endif
}

/* ------------------------------------------------------------------ fused row ops */

void be_add_rmsnorm_rows(be_backend *be, float *x, const float *o, float *y, const float *w, int n, int R, float eps) {
    if (be->ops->add_rmsnorm_rows) {
        be->ops->add_rmsnorm_rows(be, x, o, y, w, n, R, eps);
        return;
    }
    if (o) be->ops->add(be, x, o, (size_t)R * n);
    be->ops->rmsnorm_rows(be, y, n, x, n, w, n, R, eps);
}

void be_rmsnorm_matmul_n(be_backend *be, const be_mm_out *outs, int n_out, float *x, const float *o, float *a,
                         const float *w, int H, int R, float eps) {
    if (be->ops->rmsnorm_matmul_n) {
        be->ops->rmsnorm_matmul_n(be, outs, n_out, x, o, a, w, H, R, eps);
        return;
    }
    be_add_rmsnorm_rows(be, x, o, a, w, H, R, eps);
    be->ops->matmul_n(be, outs, n_out, a, H, R);
}

void be_swiglu_matmul(be_backend *be, float *y, int ldy, float *g, const float *u, int ld, int n, int R,
                      const be_weight *w) {
    if (be->ops->swiglu_matmul) {
        be->ops->swiglu_matmul(be, y, ldy, g, u, ld, n, R, w);
        return;
    }
    be->ops->swiglu_rows(be, g, g, u, ld, n, R);
    be->ops->matmul(be, y, ldy, g, ld, R, w);
}

void be_embed_norm_pair_rows(be_backend *be, float *y, int ldy, float *a, const be_weight *emb, const int32_t *tokens,
                             const float *h, int ldh, const float *we, const float *wh, int n, int R, float eps) {
    if (be->ops->embed_norm_pair_rows) {
        be->ops->embed_norm_pair_rows(be, y, ldy, a, emb, tokens, h, ldh, we, wh, n, R, eps);
        return;
    }
    be->ops->embed_rows(be, a, n, emb, tokens, R);
    be->ops->rmsnorm_rows(be, y, ldy, a, n, we, n, R, eps);
    be->ops->rmsnorm_rows(be, y + n, ldy, h, ldh, wh, n, R, eps);
}
