/* cuda_attn_micro.cu — can the prefill attention run on tensor cores and keep fp32 accuracy? A standalone
 * probe for issue 21's long prompts (bench/cuda.md "Session 36": at 16k keys the full 27B's attention is 45% of
 * its prefill, and its grouped blocks are fp32 arithmetic on CUDA cores). One block here is the unit of
 * src/backend/cuda/cuda_seq.cu's grouped attention at head width 256: QB = 32 queries of a KV head against one
 * chunk of 256 keys (no causal mask), giving each query's chunk-local softmax · V. Two kernels, same work:
 *
 *   f32   the CUDA-core way (the product's arithmetic of attn_core_gbody, simplified: scores a query per lane
 *         and key from shared memory, the chunk's softmax, then p · v a thread per two value dims)
 *   mma3  tensor cores, mma.sync m16n8k16 bf16 with fp32 accumulation, every fp32 operand split into bf16
 *         hi + lo halves and each product taken as hi·hi + hi·lo + lo·hi (the CPU's AMX path and the decode
 *         matmul keep fp32 accuracy the same way): Q·Kᵀ into shared memory, the same softmax, then P·V
 *
 * Both are checked against an fp64 host reference on a few blocks (the largest error relative to the largest
 * |output|), then timed over NB blocks reading NCH distinct chunks (a 16k-key prefill chunk's shape: 24 query
 * blocks a KV head, 4 KV heads, 64 chunks), with TFLOP/s counted as 4 · QB · 256 · 256 per block.
 *
 * Build and run (GPU machine): nvcc -O3 -arch=sm_90 -o /tmp/am bench/cuda_attn_micro.cu && /tmp/am
 * Nothing here is linked into mtplx. If mma3 is accurate to ~1e-6 and several times faster, the next step is
 * attention on tensor cores for every query count (decode too), so prefill ≡ decode stays bit-exact. */
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

enum { D = 256, QB = 32, CH = 256, KT = 64, NTH = 256, NCH = 64, NQB = 24, NKV = 4 };
enum { SP = CH + 4 };      /* fp32 score row stride (floats) */
enum { QP = D + 8 };       /* bf16 row stride of Q and of a staged key tile: rows 4 banks apart */
enum { VP = KT + 8 };      /* bf16 row stride of a staged, transposed value tile */
static const float SCALE = 0.0625f; /* 1 / sqrt(256) */

/* ---- the chunk's softmax over the scores in shared memory (both kernels): warp w takes queries 4w..4w+3,
 * p replaces the score; l[q] = Σ p ---- */
__device__ void chunk_softmax(float *S, float *l) {
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int q = 4 * w; q < 4 * w + 4; q++) {
        float *row = S + q * SP, m = -INFINITY;
        for (int k = lane; k < CH; k += 32) m = fmaxf(m, row[k]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float s = 0.f;
        for (int k = lane; k < CH; k += 32) {
            const float p = expf(row[k] - m);
            row[k] = p;
            s += p;
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) l[q] = s;
    }
}

/* ---- f32: CUDA cores ---- */
__global__ void __launch_bounds__(NTH) k_f32(const float *Q, const float *K, const float *V, float *O) {
    extern __shared__ __align__(16) float sm[];
    float *qs = sm, *kt = qs + QB * D, *S = kt + KT * (D + 4), *l = S + QB * SP; /* kt: keys or values */
    const int b = blockIdx.x, ch = b % NCH, qb = b / NCH % NQB, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const float *q0 = Q + (size_t)qb * QB * D, *k0 = K + (size_t)ch * CH * D, *v0 = V + (size_t)ch * CH * D;
    for (int i = tid; i < QB * D / 4; i += NTH) ((float4 *)qs)[i] = ((const float4 *)q0)[i];
    for (int t0 = 0; t0 < CH; t0 += KT) {
        __syncthreads();
        for (int i = tid; i < KT * D / 4; i += NTH) {
            const int r = i / (D / 4), c = i % (D / 4);
            *(float4 *)(kt + r * (D + 4) + 4 * c) = ((const float4 *)(k0 + (size_t)(t0 + r) * D))[c];
        }
        __syncthreads();
        for (int kk = lane; kk < KT; kk += 32) { /* queries w, w + 8, w + 16, w + 24: one key load for four */
            const float4 *k4 = (const float4 *)(kt + kk * (D + 4));
            float s[4] = {0.f, 0.f, 0.f, 0.f};
            for (int i = 0; i < D / 4; i++) {
                const float4 y = k4[i];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const float4 x = ((const float4 *)(qs + (w + 8 * j) * D))[i];
                    s[j] = fmaf(x.x, y.x, fmaf(x.y, y.y, fmaf(x.z, y.z, fmaf(x.w, y.w, s[j]))));
                }
            }
#pragma unroll
            for (int j = 0; j < 4; j++) S[(w + 8 * j) * SP + t0 + kk] = s[j] * SCALE;
        }
    }
    __syncthreads();
    chunk_softmax(S, l);
    const int pair = tid % (D / 2), qs0 = tid / (D / 2) * (QB / 2); /* 2 dims, 16 queries a thread */
    float2 o[QB / 2];
#pragma unroll
    for (int j = 0; j < QB / 2; j++) o[j] = make_float2(0.f, 0.f);
    for (int t0 = 0; t0 < CH; t0 += KT) {
        __syncthreads();
        for (int i = tid; i < KT * D / 4; i += NTH) {
            const int r = i / (D / 4), c = i % (D / 4);
            *(float4 *)(kt + r * (D + 4) + 4 * c) = ((const float4 *)(v0 + (size_t)(t0 + r) * D))[c];
        }
        __syncthreads();
        for (int kk = 0; kk < KT; kk++) {
            const float2 v = *(const float2 *)(kt + kk * (D + 4) + 2 * pair);
#pragma unroll
            for (int j = 0; j < QB / 2; j++) {
                const float p = S[(qs0 + j) * SP + t0 + kk];
                o[j].x = fmaf(p, v.x, o[j].x), o[j].y = fmaf(p, v.y, o[j].y);
            }
        }
    }
    float *out = O + (size_t)b * QB * D;
#pragma unroll
    for (int j = 0; j < QB / 2; j++) {
        const float inv = 1.f / l[qs0 + j];
        *(float2 *)(out + (qs0 + j) * D + 2 * pair) = make_float2(o[j].x * inv, o[j].y * inv);
    }
}

/* ---- mma3: tensor cores with bf16 hi / lo halves ---- */
__device__ __forceinline__ void split(float x, __nv_bfloat16 *h, __nv_bfloat16 *l) {
    *h = __float2bfloat16_rn(x);
    *l = __float2bfloat16_rn(x - __bfloat162float(*h));
}

/* two fp32 values as (hi pair, lo pair): the lower index in the low 16 bits, as the mma fragments want */
__device__ __forceinline__ void split2(float2 x, uint32_t *h, uint32_t *l) {
    __nv_bfloat16 h0, l0, h1, l1;
    split(x.x, &h0, &l0);
    split(x.y, &h1, &l1);
    *h = (uint32_t)__bfloat16_as_ushort(h0) | (uint32_t)__bfloat16_as_ushort(h1) << 16;
    *l = (uint32_t)__bfloat16_as_ushort(l0) | (uint32_t)__bfloat16_as_ushort(l1) << 16;
}

__device__ __forceinline__ void mma(float *c, const uint32_t *a, const uint32_t *b) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* c += a·b with both split: hi·hi + hi·lo + lo·hi */
__device__ __forceinline__ void mma3(float *c, const uint32_t *ah, const uint32_t *al, const uint32_t *bh,
                                     const uint32_t *bl) {
    mma(c, al, bh);
    mma(c, ah, bl);
    mma(c, ah, bh);
}

__device__ __forceinline__ uint32_t ld32(const __nv_bfloat16 *p) { return *(const uint32_t *)p; }

__global__ void __launch_bounds__(NTH) k_mma3(const float *Q, const float *K, const float *V, float *O) {
    extern __shared__ __align__(16) unsigned char smb[];
    __nv_bfloat16 *qh = (__nv_bfloat16 *)smb, *ql = qh + QB * QP;
    __nv_bfloat16 *th = ql + QB * QP, *tl = th + D * VP; /* a key tile [KT][QP] or a value tile [D][VP] */
    float *S = (float *)(tl + D * VP), *l = S + QB * SP;
    const int b = blockIdx.x, ch = b % NCH, qb = b / NCH % NQB, tid = threadIdx.x, w = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3, mt = w & 1; /* fragment row group, column pair; the warp's 16 queries */
    const float *q0 = Q + (size_t)qb * QB * D, *k0 = K + (size_t)ch * CH * D, *v0 = V + (size_t)ch * CH * D;
    for (int i = tid; i < QB * D; i += NTH) split(q0[i], qh + i / D * QP + i % D, ql + i / D * QP + i % D);
    /* pass 1: S = Q·Kᵀ · scale; warp w: queries 16·mt.., keys t0 + 16·(w >> 1) .. + 16 (two n-tiles of 8) */
    for (int t0 = 0; t0 < CH; t0 += KT) {
        __syncthreads();
        for (int i = tid; i < KT * D; i += NTH) split(k0[(size_t)t0 * D + i], th + i / D * QP + i % D, tl + i / D * QP + i % D);
        __syncthreads();
        float c[2][4] = {};
        const __nv_bfloat16 *ah = qh + (16 * mt + g) * QP + 2 * t, *al = ql + (16 * mt + g) * QP + 2 * t;
#pragma unroll 4
        for (int ks = 0; ks < D; ks += 16) {
            const uint32_t AH[4] = {ld32(ah + ks), ld32(ah + 8 * QP + ks), ld32(ah + ks + 8), ld32(ah + 8 * QP + ks + 8)};
            const uint32_t AL[4] = {ld32(al + ks), ld32(al + 8 * QP + ks), ld32(al + ks + 8), ld32(al + 8 * QP + ks + 8)};
#pragma unroll
            for (int n = 0; n < 2; n++) {
                const int key = 16 * (w >> 1) + 8 * n + g;
                const __nv_bfloat16 *bh = th + key * QP + ks + 2 * t, *bl = tl + key * QP + ks + 2 * t;
                const uint32_t BH[2] = {ld32(bh), ld32(bh + 8)}, BL[2] = {ld32(bl), ld32(bl + 8)};
                mma3(c[n], AH, AL, BH, BL);
            }
        }
#pragma unroll
        for (int n = 0; n < 2; n++) {
            const int col = t0 + 16 * (w >> 1) + 8 * n + 2 * t, row = 16 * mt + g;
            S[row * SP + col] = c[n][0] * SCALE, S[row * SP + col + 1] = c[n][1] * SCALE;
            S[(row + 8) * SP + col] = c[n][2] * SCALE, S[(row + 8) * SP + col + 1] = c[n][3] * SCALE;
        }
    }
    __syncthreads();
    chunk_softmax(S, l);
    /* pass 2: O = P·V; warp w: queries 16·mt.., value dims 64·(w >> 1) .. + 64 (eight n-tiles of 8) */
    float o[8][4] = {};
    for (int t0 = 0; t0 < CH; t0 += KT) {
        __syncthreads();
        for (int i = tid; i < KT * D; i += NTH) { /* V tile transposed: th[d][k] */
            const int k = i / D, d = i % D;
            split(v0[(size_t)(t0 + k) * D + d], th + d * VP + k, tl + d * VP + k);
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < KT; ks += 16) {
            const float *p0 = S + (16 * mt + g) * SP + t0 + ks + 2 * t, *p8 = p0 + 8 * SP;
            uint32_t AH[4], AL[4];
            split2(*(const float2 *)p0, &AH[0], &AL[0]);
            split2(*(const float2 *)p8, &AH[1], &AL[1]);
            split2(*(const float2 *)(p0 + 8), &AH[2], &AL[2]);
            split2(*(const float2 *)(p8 + 8), &AH[3], &AL[3]);
#pragma unroll
            for (int n = 0; n < 8; n++) {
                const int d = 64 * (w >> 1) + 8 * n + g;
                const __nv_bfloat16 *bh = th + d * VP + ks + 2 * t, *bl = tl + d * VP + ks + 2 * t;
                const uint32_t BH[2] = {ld32(bh), ld32(bh + 8)}, BL[2] = {ld32(bl), ld32(bl + 8)};
                mma3(o[n], AH, AL, BH, BL);
            }
        }
    }
    float *out = O + (size_t)b * QB * D;
    const int row = 16 * mt + g;
    const float i0 = 1.f / l[row], i8 = 1.f / l[row + 8];
#pragma unroll
    for (int n = 0; n < 8; n++) {
        const int d = 64 * (w >> 1) + 8 * n + 2 * t;
        *(float2 *)(out + row * D + d) = make_float2(o[n][0] * i0, o[n][1] * i0);
        *(float2 *)(out + (row + 8) * D + d) = make_float2(o[n][2] * i8, o[n][3] * i8);
    }
}

/* ---- host ---- */
static float frand(uint64_t *s) { /* splitmix64 → [-1, 1) */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* The largest |out - fp64 reference| over block b's outputs, divided by the largest |reference|. */
static double check_block(const float *Q, const float *K, const float *V, const float *O, int b) {
    const int ch = b % NCH, qb = b / NCH % NQB;
    double worst = 0, big = 0;
    static double s[CH];
    for (int q = 0; q < QB; q++) {
        const float *qq = Q + ((size_t)qb * QB + q) * D;
        double m = -1e300, l = 0;
        for (int k = 0; k < CH; k++) {
            const float *kk = K + ((size_t)ch * CH + k) * D;
            double d = 0;
            for (int i = 0; i < D; i++) d += (double)qq[i] * kk[i];
            s[k] = d * SCALE;
            if (s[k] > m) m = s[k];
        }
        for (int k = 0; k < CH; k++) s[k] = exp(s[k] - m), l += s[k];
        for (int i = 0; i < D; i++) {
            double r = 0;
            for (int k = 0; k < CH; k++) r += s[k] * V[((size_t)ch * CH + k) * D + i];
            r /= l;
            const double e = fabs(r - O[((size_t)b * QB + q) * D + i]);
            if (e > worst) worst = e;
            if (fabs(r) > big) big = fabs(r);
        }
    }
    return worst / big;
}

typedef void (*attn_fn)(const float *, const float *, const float *, float *);

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5, NB = NKV * NCH * NQB;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("%s, %d SMs; %d blocks of %d queries x %d keys x %d dims (%d distinct chunks)\n", p.name,
           p.multiProcessorCount, NB, QB, CH, D, NCH);
    const size_t nq = (size_t)NQB * QB * D, nk = (size_t)NCH * CH * D, no = (size_t)NB * QB * D;
    float *hQ = (float *)malloc(nq * 4), *hK = (float *)malloc(nk * 4), *hV = (float *)malloc(nk * 4),
          *hO = (float *)malloc(no * 4);
    uint64_t seed = 1;
    for (size_t i = 0; i < nq; i++) hQ[i] = 2.0f * frand(&seed); /* scores of a few units: a peaked softmax */
    for (size_t i = 0; i < nk; i++) hK[i] = frand(&seed), hV[i] = frand(&seed);
    float *Q, *K, *V, *O;
    CK(cudaMalloc(&Q, nq * 4));
    CK(cudaMalloc(&K, nk * 4));
    CK(cudaMalloc(&V, nk * 4));
    CK(cudaMalloc(&O, no * 4));
    CK(cudaMemcpy(Q, hQ, nq * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(K, hK, nk * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(V, hV, nk * 4, cudaMemcpyHostToDevice));
    struct {
        const char *name;
        attn_fn f;
        size_t smem;
    } v[] = {
        {"f32", k_f32, sizeof(float) * (QB * D + KT * (D + 4) + QB * SP + QB)},
        {"mma3", k_mma3, 2 * (2 * QB * QP + 2 * D * VP) + sizeof(float) * (QB * SP + QB)},
    };
    const double flop = 4.0 * QB * CH * D * NB;
    for (int i = 0; i < 2; i++) {
        CK(cudaFuncSetAttribute(v[i].f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)v[i].smem));
        CK(cudaMemset(O, 0, no * 4));
        v[i].f<<<NB, NTH, v[i].smem>>>(Q, K, V, O);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hO, O, no * 4, cudaMemcpyDeviceToHost));
        double err = 0;
        const int probe[4] = {0, 1, NB / 2 + 7, NB - 1};
        for (int j = 0; j < 4; j++) {
            const double e = check_block(hQ, hK, hV, hO, probe[j]);
            if (e > err) err = e;
        }
        cudaEvent_t a, z;
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&z));
        float best = 1e30f;
        for (int r = 0; r < reps; r++) {
            CK(cudaEventRecord(a));
            v[i].f<<<NB, NTH, v[i].smem>>>(Q, K, V, O);
            CK(cudaEventRecord(z));
            CK(cudaEventSynchronize(z));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, z));
            if (ms < best) best = ms;
        }
        printf("%-5s smem %6zu B: %8.3f ms (best of %d) = %6.1f TFLOP/s; max error / max |out| vs fp64: %.2e\n",
               v[i].name, v[i].smem, best, reps, flop / best / 1e9, err);
    }
    return 0;
}
