/* fuzz_moe_route.c — libFuzzer harness: arbitrary router descriptions and logits. Any description
 * kern_moe_router_check accepts must route every row to top_k distinct experts in ascending order,
 * each < n_experts, with finite weights when the logits and bias are finite; an impossible one is
 * refused. Never a crash or an out-of-range index. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/kernels/moe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8) return 0;
    moe_router r;
    r.n_experts = 1 + data[0] % 96;
    r.top_k = data[1] % 12;
    r.score = data[2] & 1 ? MOE_SCORE_SIGMOID : MOE_SCORE_SOFTMAX;
    r.norm_topk = (data[2] >> 1) & 1;
    r.n_group = 1 + data[3] % 9;
    r.topk_group = 1 + data[4] % 9;
    r.scaling = (data[5] % 8) * 0.5f;
    int use_bias = data[6] & 1;
    data += 8;
    size -= 8;
    int E = r.n_experts;
    float logits[96], bias[96], scratch[192], w[MOE_MAX_TOPK];
    int idx[MOE_MAX_TOPK];
    int finite = 1;
    for (int e = 0; e < E; e++) {
        float v = 0, b = 0;
        if (size >= 4) { memcpy(&v, data, 4); data += 4; size -= 4; }
        if (size >= 4 && use_bias) { memcpy(&b, data, 4); data += 4; size -= 4; }
        logits[e] = v;
        bias[e] = b;
        if (!isfinite(v) || !isfinite(b) || fabsf(v) > 1e30f || fabsf(b) > 1e30f) finite = 0;
    }
    r.correction_bias = use_bias ? bias : NULL;
    mtplx_err err;
    if (kern_moe_router_check(&r, &err) != 0) return 0;
    kern_moe_route(&r, logits, idx, w, scratch);
    for (int j = 0; j < r.top_k; j++) {
        if (idx[j] < 0 || idx[j] >= E) abort();
        if (j > 0 && idx[j] <= idx[j - 1]) abort();
        if (finite && !isfinite(w[j])) abort();
    }
    return 0;
}
