/* env.c — strict reads of environment variables (env.h). */
#include "env.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int env_int(const char *name, int def, int lo, int hi, int *out, mtplx_err *err) {
    *out = def;
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || *end || errno || n < lo || n > hi)
        return err_set(err, MTPLX_EINVAL, "%s=%s: expected a whole number in [%d, %d] (or unset it)", name, v, lo,
                       hi);
    *out = (int)n;
    return 0;
}

int env_word(const char *name, const char *const *words, int n, int def, int *out, mtplx_err *err) {
    *out = def;
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(v, words[i])) return *out = i, 0;
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        size_t l = strlen(list);
        snprintf(list + l, sizeof list - l, "%s%s", i ? ", " : "", words[i]);
    }
    return err_set(err, MTPLX_EINVAL, "%s=%s: expected one of %s (or unset it)", name, v, list);
}

int env_switch(const char *name, int def, int *out, mtplx_err *err) {
    static const char *const words[] = {"0", "1"};
    return env_word(name, words, 2, def, out, err);
}
