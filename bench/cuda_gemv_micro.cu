/* cuda_gemv_micro.cu — how fast can a 1-row bf16 matmul read its weights on this GPU, by access pattern?
 * A standalone probe for issue 21's "bf16 AR decode >= 85% of membw" (bench/cuda.md, session 28): the
 * decode kernel (src/backend/cuda/cuda_mma_sk.cu, k_sk_bf16) reads ~72% of the streaming-read rate. This
 * file times, on the same ~0.7 GB of random bf16 weights (4 x [17408 x 5120], the 27B FFN shape), and
 * each in its own launch:
 *
 *   read      the streaming read of be_cuda_membw (grid-stride uint4, 8 blocks of 512 an SM)
 *   sk        k_sk_bf16's pattern for 1 row: 16-row tiles x 32-wide K spans, stream-K ranges per warp,
 *             U spans a batch loaded into registers (thread (g, t): 16 bytes of rows g and g + 8), then
 *             4 mma.m16n8k16 a span (x as hi and lo halves); partial tiles added with atomics
 *   skload    the same loads, no mma (the pattern's own ceiling)
 *   bulk      the same units and the same mma a span, but each warp keeps D batches in flight in shared
 *             memory with cp.async.bulk (one copy per weight row of the batch, completion on an
 *             mbarrier), its lanes reading their fragments from shared memory
 *   bulkload  the bulk ring without the mma
 *
 * Build and run (GPU machine): nvcc -O3 -arch=sm_90 -o /tmp/gm bench/cuda_gemv_micro.cu && /tmp/gm
 * Nothing here is linked into mtplx; the y of sk and bulk are compared to show both computed the same. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

enum { N_ROWS = 17408, K_COLS = 5120, COUNT = 4, WARPS = 4 };

__global__ void k_read(const uint4 *p, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = __ldcs(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) atomicAdd(sink, acc);
}

__device__ __forceinline__ void mma_bf16(float *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The 4 mmas of one span for activation row 0 (lanes g = 0 hold it; the others multiply zeros). */
__device__ __forceinline__ void span_mma(float *c, uint4 A0, uint4 A1, uint4 BH, uint4 BL) {
    mma_bf16(c, A0.x, A1.x, A0.y, A1.y, BH.x, BH.y);
    mma_bf16(c, A0.z, A1.z, A0.w, A1.w, BH.z, BH.w);
    mma_bf16(c, A0.x, A1.x, A0.y, A1.y, BL.x, BL.y);
    mma_bf16(c, A0.z, A1.z, A0.w, A1.w, BL.z, BL.w);
}

/* Adds this warp's partial of tile `tile` (activation row 0 = mma column 0: lanes t = 0, c[0] / c[2]). */
__device__ __forceinline__ void flush(float *c, float *y, int tile, int g, int t) {
    if (t == 0) atomicAdd(y + tile * 16 + g, c[0]), atomicAdd(y + tile * 16 + g + 8, c[2]);
    c[0] = c[1] = c[2] = c[3] = 0.f;
}

/* k_sk_bf16's pattern for one activation row (see the header). LOAD: loads only. */
template <int U, bool LOAD>
__global__ void __launch_bounds__(WARPS * 32) k_sk(const uint16_t *W, const uint16_t *xh, const uint16_t *xl, float *y,
                                                   int N, int K, unsigned *sink) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int P = K / 32, T = N / 16;
    const long long TU = (long long)T * P;
    const int Wn = gridDim.x * WARPS, w = blockIdx.x * WARPS + (threadIdx.x >> 5);
    long long u = (long long)w * TU / Wn;
    const long long end = (long long)(w + 1) * TU / Wn;
    const uint4 *bh = (const uint4 *)xh + t, *bl = (const uint4 *)xl + t;
    const uint4 z = make_uint4(0, 0, 0, 0);
    unsigned acc = 0;
    while (u < end) {
        const int tile = (int)(u / P), a = (int)(u - (long long)tile * P);
        const long long tend = (long long)(tile + 1) * P;
        const int b = (int)((end < tend ? end : tend) - (long long)tile * P);
        const int n0 = tile * 16;
        const uint4 *wa = (const uint4 *)(W + (size_t)(n0 + g) * K) + t, *wb = (const uint4 *)(W + (size_t)(n0 + g + 8) * K) + t;
        float c[4] = {0.f, 0.f, 0.f, 0.f};
        for (int s0 = a; s0 < b; s0 += U) {
            uint4 A0[U], A1[U], BH[U], BL[U];
#pragma unroll
            for (int v = 0; v < U; v++) {
                const int k = s0 + v;
                const bool ok = k < b;
                A0[v] = ok ? __ldcs(wa + (size_t)k * 4) : z;
                A1[v] = ok ? __ldcs(wb + (size_t)k * 4) : z;
                if (!LOAD) {
                    BH[v] = ok && g == 0 ? __ldg(bh + (size_t)k * 4) : z;
                    BL[v] = ok && g == 0 ? __ldg(bl + (size_t)k * 4) : z;
                }
            }
#pragma unroll
            for (int v = 0; v < U; v++) {
                if (LOAD) acc ^= A0[v].x ^ A0[v].w ^ A1[v].y ^ A1[v].z;
                else if (s0 + v < b) span_mma(c, A0[v], A1[v], BH[v], BL[v]);
            }
        }
        if (!LOAD) flush(c, y, tile, g, t);
        u = (long long)tile * P + b;
    }
    if (acc == 0x9E3779B9u) atomicAdd(sink, acc);
}

/* ---- the bulk-copy ring ---- */

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect(uint32_t bar, uint32_t bytes) {
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(bar), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void bulk_copy(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W_%=;\n}" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

/* A warp's walk over its units in batches of at most U spans of one tile. */
struct walk {
    long long u, end;
    int P;
    /* the next batch: its tile, first span and span count; false when the range is done */
    __device__ bool next(int *tile, int *s0, int *nb, int U) {
        if (u >= end) return false;
        *tile = (int)(u / P), *s0 = (int)(u - (long long)*tile * P);
        long long tend = (long long)(*tile + 1) * P, e = end < tend ? end : tend;
        *nb = (int)(e - u < U ? e - u : U);
        u += *nb;
        return true;
    }
};

/* Row stride of a stage in shared memory: U spans of 64 bytes plus 64 (rows g and g + 1 then fall in
 * different halves of the banks: no conflicts for a quarter-warp's 16-byte loads). */
template <int U>
__host__ __device__ constexpr int ring_rs() { return U * 64 + 64; }

template <int U, int D, bool LOAD>
__global__ void __launch_bounds__(WARPS * 32) k_bulk(const uint16_t *W, const uint16_t *xh, const uint16_t *xl,
                                                     float *y, int N, int K, unsigned *sink) {
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ __align__(8) unsigned long long bars[WARPS][D];
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, wi = threadIdx.x >> 5;
    constexpr int RS = ring_rs<U>(), STAGE = 16 * RS;
    unsigned char *ring = smem + (size_t)wi * D * STAGE;
    const int P = K / 32, T = N / 16;
    const long long TU = (long long)T * P;
    const int Wn = gridDim.x * WARPS, w = blockIdx.x * WARPS + wi;
    walk cw = {(long long)w * TU / Wn, (long long)(w + 1) * TU / Wn, P}, pw = cw;
    if (lane == 0)
        for (int s = 0; s < D; s++) mbar_init(smem_u32(&bars[wi][s]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncwarp();
    /* lane 0 issues batch b into stage b % D */
    auto issue = [&](int stage) {
        int tile, s0, nb;
        if (!pw.next(&tile, &s0, &nb, U)) return;
        if (lane == 0) {
            const uint32_t bar = smem_u32(&bars[wi][stage]), dst = smem_u32(ring + (size_t)stage * STAGE);
            mbar_expect(bar, 16u * nb * 64);
            const uint16_t *src = W + (size_t)tile * 16 * K + (size_t)s0 * 32;
            for (int i = 0; i < 16; i++) bulk_copy(dst + i * RS, src + (size_t)i * K, nb * 64, bar);
        }
    };
    for (int s = 0; s < D; s++) issue(s);
    const uint4 *bh = (const uint4 *)xh + t, *bl = (const uint4 *)xl + t;
    const uint4 z = make_uint4(0, 0, 0, 0);
    float c[4] = {0.f, 0.f, 0.f, 0.f};
    unsigned acc = 0;
    int tile, s0, nb, cur = -1;
    for (int b = 0; cw.next(&tile, &s0, &nb, U); b++) {
        const int stage = b % D;
        if (!LOAD && tile != cur && cur >= 0) flush(c, y, cur, g, t);
        cur = tile;
        mbar_wait(smem_u32(&bars[wi][stage]), (b / D) & 1);
        const unsigned char *st = ring + (size_t)stage * STAGE;
#pragma unroll
        for (int v = 0; v < U; v++) {
            if (v >= nb) break;
            const uint4 A0 = *(const uint4 *)(st + g * RS + v * 64 + t * 16);
            const uint4 A1 = *(const uint4 *)(st + (g + 8) * RS + v * 64 + t * 16);
            if (LOAD) {
                acc ^= A0.x ^ A0.w ^ A1.y ^ A1.z;
                continue;
            }
            const int k = s0 + v;
            const uint4 BH = g == 0 ? __ldg(bh + (size_t)k * 4) : z, BL = g == 0 ? __ldg(bl + (size_t)k * 4) : z;
            span_mma(c, A0, A1, BH, BL);
        }
        __syncwarp();
        if (lane == 0) asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        issue(stage);
    }
    if (!LOAD && cur >= 0) flush(c, y, cur, g, t);
    if (acc == 0x9E3779B9u) atomicAdd(sink, acc);
}

/* ---- host ---- */

static int g_sms;

typedef void (*gemv_fn)(const uint16_t *, const uint16_t *, const uint16_t *, float *, int, int, unsigned *);

/* Best GB/s of `reps` passes over the COUNT weights with kernel f at its full residency (smem bytes of
 * dynamic shared memory a block); y[COUNT][N] zeroed before the last pass. */
static double time_gemv(gemv_fn f, size_t smem, uint16_t **W, const uint16_t *xh, const uint16_t *xl, float *y,
                        unsigned *sink, int reps, int *occ_out) {
    if (smem) CK(cudaFuncSetAttribute((const void *)f, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int occ = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, (const void *)f, WARPS * 32, smem));
    *occ_out = occ;
    const int grid = occ * g_sms;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    double best = 0;
    for (int r = 0; r <= reps; r++) {
        if (r == reps) CK(cudaMemset(y, 0, sizeof(float) * COUNT * N_ROWS));
        cudaEventRecord(e0);
        for (int i = 0; i < COUNT; i++) f<<<grid, WARPS * 32, smem>>>(W[i], xh, xl, y + (size_t)i * N_ROWS, N_ROWS, K_COLS, sink);
        cudaEventRecord(e1);
        CK(cudaEventSynchronize(e1));
        CK(cudaGetLastError());
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        double gbs = (double)COUNT * N_ROWS * K_COLS * 2 / (ms * 1e-3) / 1e9;
        if (r > 0 && gbs > best) best = gbs;
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return best;
}

__global__ void k_fill(uint16_t *p, size_t n, uint32_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
        p[i] = (uint16_t)(0x3c00 | (h & 0x7f) | ((h >> 8) & 1) << 15); /* bf16 in ±[0.0078, 0.0155) */
    }
}

static double max_rel(const float *a, const float *b, int n) {
    double m = 0, s = 0;
    for (int i = 0; i < n; i++) s = fmax(s, fabs((double)b[i]));
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return s > 0 ? m / s : m;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 3, reps = 5;
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    g_sms = p.multiProcessorCount;
    printf("%s, %d SMs, memory bus %d bits\n", p.name, g_sms, p.memoryBusWidth);
    size_t n = (size_t)N_ROWS * K_COLS;
    uint16_t *W[COUNT], *xh, *xl;
    float *y;
    unsigned *sink;
    for (int i = 0; i < COUNT; i++) {
        CK(cudaMalloc(&W[i], n * 2));
        k_fill<<<1024, 256>>>(W[i], n, 17u + i);
    }
    CK(cudaMalloc(&xh, K_COLS * 2));
    CK(cudaMalloc(&xl, K_COLS * 2));
    CK(cudaMalloc(&sink, 4));
    k_fill<<<64, 256>>>(xh, K_COLS, 99u);
    CK(cudaMemset(xl, 0, K_COLS * 2)); /* lo half zero: y is then the plain bf16 product */
    CK(cudaMalloc(&y, sizeof(float) * COUNT * N_ROWS));
    /* one buffer of the same bytes for the streaming read (the weights are separate allocations) */
    uint4 *rb;
    size_t rn = (size_t)COUNT * n * 2 / 16;
    CK(cudaMalloc(&rb, rn * 16));
    CK(cudaMemset(rb, 1, rn * 16));
    CK(cudaDeviceSynchronize());
    struct {
        const char *name;
        gemv_fn f;
        size_t smem;
    } v[] = {
        {"sk U=8", k_sk<8, false>, 0},
        {"skload U=8", k_sk<8, true>, 0},
        {"sk U=16", k_sk<16, false>, 0},
        {"bulk U=8 D=4", k_bulk<8, 4, false>, (size_t)WARPS * 4 * 16 * ring_rs<8>()},
        {"bulkload U=8 D=4", k_bulk<8, 4, true>, (size_t)WARPS * 4 * 16 * ring_rs<8>()},
        {"bulk U=8 D=2", k_bulk<8, 2, false>, (size_t)WARPS * 2 * 16 * ring_rs<8>()},
        {"bulk U=4 D=4", k_bulk<4, 4, false>, (size_t)WARPS * 4 * 16 * ring_rs<4>()},
        {"bulk U=4 D=6", k_bulk<4, 6, false>, (size_t)WARPS * 6 * 16 * ring_rs<4>()},
        {"bulk U=16 D=2", k_bulk<16, 2, false>, (size_t)WARPS * 2 * 16 * ring_rs<16>()},
        {"bulk U=16 D=3", k_bulk<16, 3, false>, (size_t)WARPS * 3 * 16 * ring_rs<16>()},
    };
    const int nv = sizeof v / sizeof v[0];
    float *hy = (float *)malloc(sizeof(float) * COUNT * N_ROWS), *hr = (float *)malloc(sizeof(float) * COUNT * N_ROWS);
    for (int r = 0; r < rounds; r++) {
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0), cudaEventCreate(&e1);
        double rbest = 0;
        for (int i = 0; i <= reps; i++) {
            cudaEventRecord(e0);
            k_read<<<g_sms * 8, 512>>>(rb, rn, sink);
            cudaEventRecord(e1);
            CK(cudaEventSynchronize(e1));
            float ms;
            cudaEventElapsedTime(&ms, e0, e1);
            double gbs = rn * 16.0 / (ms * 1e-3) / 1e9;
            if (i && gbs > rbest) rbest = gbs;
        }
        printf("round %d: read %.0f GB/s\n", r, rbest);
        for (int i = 0; i < nv; i++) {
            int occ = 0;
            double gbs = time_gemv(v[i].f, v[i].smem, W, xh, xl, y, sink, reps, &occ);
            double err = -1;
            if (!strstr(v[i].name, "load")) {
                CK(cudaMemcpy(hy, y, sizeof(float) * COUNT * N_ROWS, cudaMemcpyDeviceToHost));
                if (i == 0) memcpy(hr, hy, sizeof(float) * COUNT * N_ROWS);
                err = max_rel(hy, hr, COUNT * N_ROWS);
            }
            printf("  %-18s %5.0f GB/s = %5.1f%% of read  (%d blocks/SM, smem %zu B)%s", v[i].name, gbs, 100 * gbs / rbest, occ,
                   v[i].smem, err >= 0 ? "" : "\n");
            if (err >= 0) printf("  max |y - y_sk| / max|y_sk| %.1e\n", err);
        }
    }
    return 0;
}
