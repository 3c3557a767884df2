/* config_parse.h — the config.json field readers shared by config.c and the family files
 * (the files under families/ parse what only their architecture has). Private to the model layer.
 *
 * Every reader looks the key up in text_config first, then at the top level, and in lenient mode
 * (an unknown family, parsed only so `inspect` can report it) never fails. */
#ifndef MTPLX_MODEL_CONFIG_PARSE_H
#define MTPLX_MODEL_CONFIG_PARSE_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"

typedef struct cfg_ctx {
    json_t *t;                 /* text parameters (text_config or the root) */
    json_t *root;              /* top-level object */
    const char *what;          /* file name for messages */
    int lenient;               /* 1: unknown family, never fail on a missing/odd field */
    mtplx_err *err;
} cfg_ctx;

/* The value of `key` (text_config first, then root); NULL when absent or JSON null. */
json_t *cfg_get(const cfg_ctx *c, const char *key);
/* Integer field in [minv, INT_MAX] into *out. Absent: *out = def, or an error when required.
 * Returns 0 or the error code (err names the file and the field). */
int cfg_int(cfg_ctx *c, const char *key, int required, int def, int minv, int *out);
/* Number (integer or real) of object o, or of the config when o is NULL; absent: def. */
int cfg_num(cfg_ctx *c, json_t *o, const char *key, double def, double *out);
/* true / false (or 0 / 1); absent: def. */
int cfg_bool(cfg_ctx *c, const char *key, int def, int *out);
/* Set err to "<file>: field "<field>" <why>" and return its code. */
int cfg_bad(cfg_ctx *c, const char *field, const char *why);
/* snprintf(dst, cap, "%s", src or ""). */
void cfg_copy_str(char *dst, size_t cap, const char *src);

/* The routed-MoE fields every MoE family shares: num_experts_per_tok (<= n_experts, already
 * parsed), moe_intermediate_size, norm_topk_prob. Returns 0 or an error naming the field. */
int cfg_moe_common(cfg_ctx *c, model_config *cfg);

#endif
