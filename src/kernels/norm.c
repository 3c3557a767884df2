/* norm.c — RMS and L2 normalisation of one vector (see norm.h).
 *
 * The AVX-512 / AVX2 paths keep the sum of squares in vector lanes (element i in lane i mod 16, or
 * mod 8) and reduce them once in a fixed order (NEON, vec_neon.c: lane i mod 4); the scaling is elementwise. A vector's result
 * depends only on its own n values, so rows stay invariant (DESIGN.md §3). The path is cpu_isa()'s. */
#include "norm.h"

#include <math.h>
#include <stddef.h>

#include "act.h"
#include "cpu.h"
#include "neon.h"
#include "simd_math.h"

/* ---- sums of squares ---- */

static float sumsq_portable(const float *x, int n) {
    float ss = 0.f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    return ss;
}

#if defined(__x86_64__)
SM_TGT512 static float sumsq_avx512(const float *x, int n) {
    __m512 a = _mm512_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        a = _mm512_fmadd_ps(v, v, a);
    }
    if (i < n) {
        __m512 v = _mm512_maskz_loadu_ps((__mmask16)((1u << (n - i)) - 1), x + i);
        a = _mm512_fmadd_ps(v, v, a);
    }
    return _mm512_reduce_add_ps(a);
}

SM_TGT256 static float sumsq_avx2(const float *x, int n) {
    __m256 a = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a = _mm256_fmadd_ps(v, v, a);
    }
    if (i < n) {
        __m256 v = _mm256_maskload_ps(x + i, sm_mask256(n - i));
        a = _mm256_fmadd_ps(v, v, a);
    }
    return sm_hsum256(a);
}
#endif

/* ---- y = (x · inv) · (w ? w : mul), then · silu(z) when z (× 1 is exact, so mul = 1 is x · inv) ---- */

static void scale_portable(float *y, const float *x, const float *w, const float *z, int n, float inv, float mul) {
    if (w)
        for (int i = 0; i < n; i++) y[i] = (x[i] * inv) * w[i];
    else
        for (int i = 0; i < n; i++) y[i] = (x[i] * inv) * mul;
    if (z)
        for (int i = 0; i < n; i++) y[i] *= act_silu(z[i]);
}

#if defined(__x86_64__)
SM_TGT512 static void scale_avx512(float *y, const float *x, const float *w, const float *z, int n, float inv,
                                   float mul) {
    __m512 vi = _mm512_set1_ps(inv), vm = _mm512_set1_ps(mul);
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vi);
        v = _mm512_mul_ps(v, w ? _mm512_maskz_loadu_ps(m, w + i) : vm);
        if (z) v = _mm512_mul_ps(v, sm_silu512(_mm512_maskz_loadu_ps(m, z + i)));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}

SM_TGT256 static void scale_avx2(float *y, const float *x, const float *w, const float *z, int n, float inv,
                                 float mul) {
    __m256 vi = _mm256_set1_ps(inv), vm = _mm256_set1_ps(mul);
    for (int i = 0; i < n; i += 8) {
        __m256i m = sm_mask256(n - i < 8 ? n - i : 8);
        __m256 v = _mm256_mul_ps(_mm256_maskload_ps(x + i, m), vi);
        v = _mm256_mul_ps(v, w ? _mm256_maskload_ps(w + i, m) : vm);
        if (z) v = _mm256_mul_ps(v, sm_silu256(_mm256_maskload_ps(z + i, m)));
        _mm256_maskstore_ps(y + i, m, v);
    }
}

#endif

static float sumsq(const float *x, int n, kern_isa isa) {
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) return sumsq_avx512(x, n);
    if (isa == KERN_ISA_AVX2) return sumsq_avx2(x, n);
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) return sumsq_neon(x, n);
#endif
    return sumsq_portable(x, n);
}

static void scale(float *y, const float *x, const float *w, const float *z, int n, float inv, float mul,
                  kern_isa isa) {
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) {
        scale_avx512(y, x, w, z, n, inv, mul);
        return;
    }
    if (isa == KERN_ISA_AVX2) {
        scale_avx2(y, x, w, z, n, inv, mul);
        return;
    }
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) {
        scale_neon(y, x, w, z, n, inv, mul);
        return;
    }
#endif
    scale_portable(y, x, w, z, n, inv, mul);
}

void kern_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    kern_isa isa = cpu_isa();
    float inv = 1.0f / sqrtf(sumsq(x, n, isa) / (float)n + eps);
    scale(y, x, w, NULL, n, inv, 1.0f, isa);
}

void kern_rmsnorm_gated(float *y, const float *x, const float *w, const float *z, int n, float eps) {
    kern_isa isa = cpu_isa();
    float inv = 1.0f / sqrtf(sumsq(x, n, isa) / (float)n + eps);
    scale(y, x, w, z, n, inv, 1.0f, isa);
}

void kern_rmsnorm_rows(float *y, int ldy, const float *x, int ldx, const float *w, int n, int rows, float eps) {
    kern_isa isa = cpu_isa();
    for (int t = 0; t < rows; t++) {
        const float *xt = x + (long)t * ldx;
        float inv = 1.0f / sqrtf(sumsq(xt, n, isa) / (float)n + eps);
        scale(y + (long)t * ldy, xt, w, NULL, n, inv, 1.0f, isa);
    }
}

void kern_l2norm(float *y, const float *x, int n, float eps, float scale_by) {
    kern_isa isa = cpu_isa();
    float inv = 1.0f / sqrtf(sumsq(x, n, isa) + eps);
    scale(y, x, NULL, NULL, n, inv, scale_by, isa);
}
