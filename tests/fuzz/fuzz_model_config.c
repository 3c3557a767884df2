/* fuzz_model_config.c — libFuzzer harness: model_load with an arbitrary config.json next to a fixed,
 * valid checkpoint (the qwen3_5_dense golden's weights), then, when it loads, a short capturing
 * forward, a commit and an MTP step. Whatever config.json says (sizes, layer patterns, head counts,
 * families), the result must be a clear error or a working model: never a crash, an overflow or an
 * allocation sized by the config alone. Run from the repository root (tests/run.sh does). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/model/model.h"

static char g_dir[PATH_MAX];

static int setup(void) {
    char cwd[PATH_MAX], src[PATH_MAX + 64], dst[PATH_MAX + 32];
    snprintf(g_dir, sizeof g_dir, "/tmp/mtplx_fuzz_model_XXXXXX");
    if (!mkdtemp(g_dir) || !getcwd(cwd, sizeof cwd)) return -1;
    snprintf(src, sizeof src, "%s/tests/data/goldens/qwen3_5_dense/model.safetensors", cwd);
    snprintf(dst, sizeof dst, "%s/model.safetensors", g_dir);
    return symlink(src, dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready = 0;
    if (!ready) {
        if (setup()) abort();
        ready = 1;
    }
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", g_dir);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fwrite(data, 1, size, f);
    fclose(f);
    mtplx_err err;
    mtplx_model *m = NULL;
    if (model_load(g_dir, &m, &err) != 0) {
        if (m || !err.msg[0]) abort(); /* an error always comes with a message and no model */
        return 0;
    }
    const model_config *c = model_config_of(m);
    int32_t ids[3] = {0, 1 % c->vocab_size, 2 % c->vocab_size};
    model_state *s = NULL;
    if (model_state_new(m, 8, 3, &s, &err) == 0) {
        float *hid = malloc(sizeof(float) * 3 * (size_t)c->hidden_size);
        fwd_request req = {.hidden = hid, .capture = 1};
        if (hid && model_forward(m, s, ids, 3, &req, &err) == 0 && model_state_commit(s, 2, &err) != 0) abort();
        mtp_state *ms = NULL;
        float *out = hid ? malloc(sizeof(float) * (size_t)c->hidden_size) : NULL;
        if (out && model_has_mtp(m) && mtp_state_new(m, 4, &ms, &err) == 0) {
            model_mtp_forward(m, ms, hid, ids + 1, 1, out, &err);
            mtp_state_free(ms);
        }
        free(out);
        free(hid);
        model_state_free(s);
    }
    model_free(m);
    return 0;
}
