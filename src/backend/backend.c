/* backend.c — choosing a backend at load (docs/architecture.md, "Adding a backend"). */
#include "backend.h"

#include <string.h>

#include "../kernels/moe.h"
#include "cpu/cpu_backend.h"

int be_create(const char *name, be_backend **out, mtplx_err *err) {
    *out = NULL;
    if (!name || !strcmp(name, "cpu")) {
        cpu_settings s;
        cpu_settings_from_env(&s);
        return be_cpu_new(&s, out, err);
    }
    return err_set(err, MTPLX_EINVAL, "unknown backend \"%s\" (available: cpu)", name);
}

void be_free(be_backend *be) {
    if (!be) return;
    be->ops->destroy(be);
}

int be_moe_router_check(const moe_router *r, mtplx_err *err) { return kern_moe_router_check(r, err); }
