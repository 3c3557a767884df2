/* fuzz_safetensors.c — libFuzzer harness: validate arbitrary bytes as a safetensors image. Any input
 * must give either a set whose tensors all lie inside the buffer, or an error; never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* copy into an 8-byte aligned buffer, like a page-aligned mapping */
    void *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    st_set *s = NULL;
    mtplx_err e;
    if (st_open_buffer(buf, size, "fuzz", &s, &e) == 0) {
        const unsigned char *lo = buf, *hi = lo + size;
        for (int i = 0; i < st_count(s); i++) {
            const st_tensor *t = st_at(s, i);
            const unsigned char *p = t->data;
            if (p < lo || p + t->nbytes > hi || st_find(s, t->name) != t) abort();
        }
        st_close(s);
    }
    free(buf);
    return 0;
}
