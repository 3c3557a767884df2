/* convert.c — see convert.h. The whole output is built in memory and written as one file (fine for
 * the checkpoints this runs on here; a sharded writer is future work). */
#include "convert.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/dtype.h"
#include "../base/fault.h"
#include "../base/file.h"
#include "../base/mem.h"
#include "../kernels/quant.h"
#include "safetensors.h"

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

int convert_should_quantize(const char *name, int ndim, const int64_t *shape, int group_size) {
    if (ndim != 2 || !ends_with(name, ".weight") || shape[1] % group_size || shape[0] < 1) return 0;
    static const char *k_dense[] = {"norm.weight", "layernorm.weight", "in_proj_a.weight", "in_proj_b.weight",
                                    "in_proj_ba.weight", "mlp.gate.weight", "shared_expert_gate.weight",
                                    "conv1d.weight"};
    for (size_t i = 0; i < sizeof k_dense / sizeof k_dense[0]; i++)
        if (ends_with(name, k_dense[i])) return 0;
    return 1;
}

static int copy_file(const char *from, const char *to, mtplx_err *err) {
    size_t n;
    char *buf = file_read_all(from, &n, err);
    if (!buf) return err->code;
    FILE *f = fault_io_point(to) ? NULL : fopen(to, "wb");
    int ok = f && !fault_io_point(to) && fwrite(buf, 1, n, f) == n;
    if (f && fclose(f)) ok = 0;
    free(buf);
    return ok ? 0 : err_set(err, MTPLX_EIO, "convert: cannot write %s", to);
}

static float elem(const st_tensor *t, size_t i) {
    switch (t->dtype) {
    case DT_BF16: return bf16_to_f32(((const uint16_t *)t->data)[i]);
    case DT_F16: return f16_to_f32(((const uint16_t *)t->data)[i]);
    default: return ((const float *)t->data)[i];
    }
}

int convert_checkpoint(const convert_opts *o, convert_stats *st, mtplx_err *err) {
    if (!quant_format_ok(o->bits, o->group_size))
        return err_set(err, MTPLX_EINVAL, "convert: bits %d / group size %d not supported (4 or 8; 32, 64, 128)",
                       o->bits, o->group_size);
    if (!strcmp(o->in_dir, o->out_dir)) return err_set(err, MTPLX_EINVAL, "convert: --out must differ from --model");
    memset(st, 0, sizeof *st);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", o->in_dir);
    json_error_t je;
    json_t *cfg = json_load_file(path, 0, &je);
    if (!cfg) return err_set(err, MTPLX_EBADFILE, "%s: %s (line %d)", path, je.text, je.line);
    if (json_object_get(cfg, "quantization") || json_object_get(cfg, "quantization_config")) {
        json_decref(cfg);
        return err_set(err, MTPLX_EUNSUPPORTED, "convert: %s is already quantized", o->in_dir);
    }
    st_set *in = NULL;
    int rc = st_open_dir(o->in_dir, &in, err);
    if (rc) return json_decref(cfg), rc;
    if (mkdir(o->out_dir, 0755) && errno != EEXIST) {
        rc = err_set(err, MTPLX_EIO, "convert: cannot create %s: %s", o->out_dir, strerror(errno));
        goto done;
    }
    int n = st_count(in), n_items = 0;
    st_write_item *items = calloc((size_t)n * 3, sizeof *items);
    void **bufs = calloc((size_t)n * 3, sizeof *bufs);
    char (*names)[512] = calloc((size_t)n * 3, sizeof *names);
    if (!items || !bufs || !names) {
        rc = err_set(err, MTPLX_ENOMEM, "convert: out of memory");
        goto free_items;
    }
    for (int i = 0; i < n && !rc; i++) {
        const st_tensor *t = st_at(in, i);
        st->bytes_in += t->nbytes;
        int dense_float = t->dtype == DT_F32 || t->dtype == DT_BF16 || t->dtype == DT_F16;
        if (!dense_float || !convert_should_quantize(t->name, t->ndim, t->shape, o->group_size)) {
            items[n_items] = (st_write_item){t->name, t->dtype, t->ndim, {0}, t->data};
            memcpy(items[n_items].shape, t->shape, sizeof t->shape);
            n_items++;
            st->kept++;
            st->bytes_out += t->nbytes;
            continue;
        }
        int rows = (int)t->shape[0], cols = (int)t->shape[1], G = cols / o->group_size;
        mtplx_dtype sdt = t->dtype;
        float *f = mem_alloc((size_t)rows * cols, sizeof(float), t->name, err);
        uint32_t *q = mem_alloc(quant_weight_bytes(rows, cols, o->bits), 1, t->name, err);
        void *sc = mem_alloc(quant_scales_bytes(rows, cols, o->group_size, sdt), 1, t->name, err);
        void *bi = mem_alloc(quant_scales_bytes(rows, cols, o->group_size, sdt), 1, t->name, err);
        if (!f || !q || !sc || !bi) {
            free(f), free(q), free(sc), free(bi);
            rc = MTPLX_ENOMEM;
            break;
        }
        for (size_t k = 0; k < (size_t)rows * cols; k++) f[k] = elem(t, k);
        rc = quant_affine(f, rows, cols, o->bits, o->group_size, sdt, q, sc, bi, err);
        free(f);
        size_t bl = strlen(t->name) - strlen(".weight");
        snprintf(names[n_items], sizeof names[0], "%s", t->name);
        snprintf(names[n_items + 1], sizeof names[0], "%.*s.scales", (int)bl, t->name);
        snprintf(names[n_items + 2], sizeof names[0], "%.*s.biases", (int)bl, t->name);
        items[n_items] = (st_write_item){names[n_items], DT_U32, 2, {rows, (int64_t)cols * o->bits / 32}, q};
        items[n_items + 1] = (st_write_item){names[n_items + 1], sdt, 2, {rows, G}, sc};
        items[n_items + 2] = (st_write_item){names[n_items + 2], sdt, 2, {rows, G}, bi};
        bufs[n_items] = q, bufs[n_items + 1] = sc, bufs[n_items + 2] = bi;
        st->bytes_out += quant_weight_bytes(rows, cols, o->bits) + 2 * quant_scales_bytes(rows, cols, o->group_size, sdt);
        n_items += 3;
        st->quantized++;
        if (rc) err_prefix(err, "convert: %s", t->name);
        progress_report(&o->progress, (uint64_t)i + 1, (uint64_t)n);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/model.safetensors", o->out_dir);
        rc = st_write_file(path, items, n_items, "{\"format\": \"mlx\"}", err);
    }
    if (!rc) {
        json_t *q = json_pack("{s:i, s:i, s:s}", "group_size", o->group_size, "bits", o->bits, "mode", "affine");
        json_object_set(cfg, "quantization", q);
        json_object_set_new(cfg, "quantization_config", q);
        snprintf(path, sizeof path, "%s/config.json", o->out_dir);
        if (json_dump_file(cfg, path, JSON_INDENT(2))) rc = err_set(err, MTPLX_EIO, "convert: cannot write %s", path);
    }
    static const char *k_copy[] = {"generation_config.json", "tokenizer.json", "tokenizer_config.json",
                                   "special_tokens_map.json", "chat_template.jinja", "README.md"};
    for (size_t i = 0; !rc && i < sizeof k_copy / sizeof k_copy[0]; i++) {
        char from[4096];
        snprintf(from, sizeof from, "%s/%s", o->in_dir, k_copy[i]);
        snprintf(path, sizeof path, "%s/%s", o->out_dir, k_copy[i]);
        if (file_exists(from)) rc = copy_file(from, path, err);
    }
free_items:
    if (bufs)
        for (int i = 0; i < n * 3; i++) free(bufs[i]);
    free(items), free(bufs), free(names);
done:
    st_close(in);
    json_decref(cfg);
    return rc;
}
