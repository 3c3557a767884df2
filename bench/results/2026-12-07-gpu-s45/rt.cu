// Round-trip micro-benchmark (session 45): how long from "launch a kernel that writes a draft step's
// top-k answer (264 bytes)" to "the host has it", by the way the answer reaches the host:
//   memcpy : device buffer, cudaMemcpyAsync D2H into pinned memory, cudaStreamSynchronize (today's path)
//   mapped : the kernel writes pinned mapped host memory, cudaStreamSynchronize
//   spin   : the kernel writes mapped memory then a sequence number; the host spins on it
// Each iteration: K dependent kernels (a draft step's chain stand-in), the answer, the host reads it.
// nvcc -O3 -arch=sm_90 rt.cu -o rt && ./rt
#include <cstdio>
#include <cuda_runtime.h>
#include <chrono>
#define N_OUT 66
__global__ void k_link(float *x) { x[threadIdx.x] = x[threadIdx.x] * 0.5f + 1.f; }
__global__ void k_answer(int *out, volatile int *flag, const float *x, int seq) {
    int t = threadIdx.x;
    if (t < N_OUT) out[t] = seq + t + (int)x[0] * 0;
    if (flag) {
        __syncthreads();
        __threadfence_system();
        if (t == 0) *flag = seq;
    }
}
static double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
int main() {
    cudaSetDeviceFlags(cudaDeviceMapHost);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *x;
    int *dout, *hpin, *hmap, *dmap;
    cudaMalloc(&x, 1024 * 4);
    cudaMemset(x, 0, 4096);
    cudaMalloc(&dout, 4096);
    cudaMallocHost(&hpin, 4096);
    cudaHostAlloc(&hmap, 4096, cudaHostAllocMapped);
    cudaHostGetDevicePointer(&dmap, hmap, 0);
    volatile int *hflag = hmap + 512;
    int *dflag = dmap + 512;
    const char *names[3] = {"memcpy", "mapped", "spin"};
    for (int links = 0; links <= 12; links += 12)
        for (int round = 0; round < 2; round++)
            for (int mode = 0; mode < 3; mode++) {
                int iters = 2000, bad = 0;
                double t0 = 0;
                for (int i = -100; i < iters; i++) {
                    if (i == 0) t0 = now_us();
                    int seq = i + 1000 * (mode + 1) + 100000 * round;
                    for (int l = 0; l < links; l++) k_link<<<1, 256, 0, s>>>(x);
                    if (mode == 0) {
                        k_answer<<<1, 128, 0, s>>>(dout, nullptr, x, seq);
                        cudaMemcpyAsync(hpin, dout, N_OUT * 4, cudaMemcpyDeviceToHost, s);
                        cudaStreamSynchronize(s);
                        bad += hpin[0] != seq;
                    } else if (mode == 1) {
                        k_answer<<<1, 128, 0, s>>>(dmap, nullptr, x, seq);
                        cudaStreamSynchronize(s);
                        bad += ((volatile int *)hmap)[0] != seq;
                    } else {
                        k_answer<<<1, 128, 0, s>>>(dmap, dflag, x, seq);
                        while (*hflag != seq) {
                        }
                        bad += ((volatile int *)hmap)[N_OUT - 1] != seq + N_OUT - 1;
                    }
                }
                double us = (now_us() - t0) / iters;
                if (mode == 2) cudaStreamSynchronize(s);
                printf("links %2d round %d %-7s %7.2f us / round trip  (bad %d)\n", links, round, names[mode], us, bad);
            }
    printf("err: %s\n", cudaGetErrorString(cudaGetLastError()));
    return 0;
}
