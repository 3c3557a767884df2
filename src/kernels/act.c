/* act.c — vector activations (see act.h). */
#include "act.h"

void kern_swiglu(float *y, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) y[i] = act_silu(gate[i]) * up[i];
}
