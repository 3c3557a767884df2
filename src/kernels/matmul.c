/* matmul.c — kern_matmul dispatch. For now only the portable path exists; the SIMD paths and the
 * thread pool (issue: CPU kernels at memory-bandwidth speed) plug in here behind run-time CPU
 * feature detection. */
#include "matmul.h"

void kern_matmul(float *y, int ldy, const float *x, int ldx, int T, const kern_weight *w) {
    kern_matmul_ref(y, ldy, x, ldx, T, w);
}
