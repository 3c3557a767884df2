/* gen_config.c — generation_config.json -> gen_params defaults; see gen_config.h. */
#include "gen_config.h"

#include <jansson.h>
#include <stdio.h>

#include "../base/file.h"

/* Read an optional number field into *out within [lo, hi] (hi_open: hi excluded). */
static int num_field(json_t *root, const char *path, const char *key, double lo, double hi, int hi_open,
                     double *out, int *found, mtplx_err *err) {
    *found = 0;
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v)) return err_set(err, MTPLX_EBADFILE, "%s: field %s must be a number", path, key);
    double x = json_number_value(v);
    if (!(x >= lo && (hi_open ? x < hi : x <= hi)))
        return err_set(err, MTPLX_EBADFILE, "%s: field %s = %g is out of range", path, key, x);
    *out = x;
    *found = 1;
    return 0;
}

int gen_params_from_model(const mtplx_model *m, gen_params *p, mtplx_err *err) {
    gen_params_default(p);
    const model_config *cfg = model_config_of(m);
    for (int i = 0; i < cfg->n_eos && p->n_stop_ids < GEN_MAX_STOP_IDS; i++)
        if (cfg->eos_ids[i] >= 0 && cfg->eos_ids[i] < cfg->vocab_size) p->stop_ids[p->n_stop_ids++] = cfg->eos_ids[i];
    char path[4096];
    snprintf(path, sizeof path, "%s/generation_config.json", model_dir(m));
    if (!file_exists(path)) return 0;
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!root) return err_set(err, MTPLX_EBADFILE, "%s: line %d: %s", path, je.line, je.text);
    int rc = 0, f;
    double x;
    if (!json_is_object(root)) {
        rc = err_set(err, MTPLX_EBADFILE, "%s: not a JSON object", path);
        goto out;
    }
    if ((rc = num_field(root, path, "temperature", 0, 1e6, 0, &x, &f, err))) goto out;
    if (f) p->temperature = (float)x;
    if ((rc = num_field(root, path, "top_p", 1e-9, 1, 0, &x, &f, err))) goto out;
    if (f) p->top_p = (float)x;
    if ((rc = num_field(root, path, "top_k", 0, 1e9, 0, &x, &f, err))) goto out;
    if (f) p->top_k = (int)x;
    if ((rc = num_field(root, path, "min_p", 0, 1, 1, &x, &f, err))) goto out;
    if (f) p->min_p = (float)x;
    if ((rc = num_field(root, path, "repetition_penalty", 1e-9, 1e6, 0, &x, &f, err))) goto out;
    if (f) p->repetition_penalty = (float)x;
    json_t *ds = json_object_get(root, "do_sample");
    if (ds && json_is_false(ds)) p->temperature = 0;
out:
    json_decref(root);
    return rc;
}
