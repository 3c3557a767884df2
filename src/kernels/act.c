/* act.c — vector activations (see act.h). Portable, AVX2, AVX-512 and NEON (vec_neon.c) paths chosen
 * by cpu_isa();
 * every element is computed by itself, so results do not depend on n or on a row's neighbours. */
#include "act.h"

#include "cpu.h"
#include "neon.h"
#include "simd_math.h"

#if defined(__x86_64__)
SM_TGT512 static void swiglu_avx512(float *y, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 g = sm_silu512(_mm512_maskz_loadu_ps(m, gate + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(m, up + i)));
    }
}

SM_TGT256 static void swiglu_avx2(float *y, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i += 8) {
        __m256i m = sm_mask256(n - i < 8 ? n - i : 8);
        __m256 g = sm_silu256(_mm256_maskload_ps(gate + i, m));
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(g, _mm256_maskload_ps(up + i, m)));
    }
}

#endif

void kern_swiglu(float *y, const float *gate, const float *up, int n) {
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) {
        swiglu_avx512(y, gate, up, n);
        return;
    }
    if (isa == KERN_ISA_AVX2) {
        swiglu_avx2(y, gate, up, n);
        return;
    }
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) {
        swiglu_neon(y, gate, up, n);
        return;
    }
#endif
    (void)isa;
    for (int i = 0; i < n; i++) y[i] = act_silu(gate[i]) * up[i];
}

#if defined(__x86_64__)
SM_TGT512 static void mul_sigmoid_avx512(float *y, const float *gate, int n) {
    for (int i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 g = sm_sigmoid512(_mm512_maskz_loadu_ps(m, gate + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, y + i), g));
    }
}

SM_TGT256 static void mul_sigmoid_avx2(float *y, const float *gate, int n) {
    for (int i = 0; i < n; i += 8) {
        __m256i m = sm_mask256(n - i < 8 ? n - i : 8);
        __m256 g = sm_sigmoid256(_mm256_maskload_ps(gate + i, m));
        _mm256_maskstore_ps(y + i, m, _mm256_mul_ps(_mm256_maskload_ps(y + i, m), g));
    }
}

#endif

void kern_mul_sigmoid(float *y, const float *gate, int n) {
    kern_isa isa = cpu_isa();
#if defined(__x86_64__)
    if (isa >= KERN_ISA_AVX512) {
        mul_sigmoid_avx512(y, gate, n);
        return;
    }
    if (isa == KERN_ISA_AVX2) {
        mul_sigmoid_avx2(y, gate, n);
        return;
    }
#elif defined(__aarch64__)
    if (KERN_ISA_IS_NEON(isa)) {
        mul_sigmoid_neon(y, gate, n);
        return;
    }
#endif
    (void)isa;
    for (int i = 0; i < n; i++) y[i] *= act_sigmoid(gate[i]);
}

#if defined(__x86_64__)
/* Four vectors a step, then masked tails: the pass streams both arrays. */
SM_TGT512 static void add_avx512(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        _Pragma("GCC unroll 4") for (int u = 0; u < 64; u += 16)
            _mm512_storeu_ps(y + i + u, _mm512_add_ps(_mm512_loadu_ps(y + i + u), _mm512_loadu_ps(x + i + u)));
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
    }
}

SM_TGT256 static void add_avx2(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}
#endif

void kern_add(float *y, const float *x, size_t n) {
#if defined(__x86_64__)
    kern_isa isa = cpu_isa();
    if (isa >= KERN_ISA_AVX512) {
        add_avx512(y, x, n);
        return;
    }
    if (isa == KERN_ISA_AVX2) {
        add_avx2(y, x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++) y[i] += x[i];
}
