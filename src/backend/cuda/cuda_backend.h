/* cuda_backend.h — the CUDA backend's C interface (docs/architecture.md, "The CUDA backend"): what
 * backend.c and the CLI call. Built only with `make CUDA=1`; the rest of the project is plain C and
 * never includes a CUDA header. */
#ifndef MTPLX_BACKEND_CUDA_BACKEND_H
#define MTPLX_BACKEND_CUDA_BACKEND_H

#include <stddef.h>

#include "../backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A CUDA backend on GPU `device` (0-based). Its memory is device memory (caps.host_memory = 0).
 * Returns 0 and *out, or an error naming the device and the CUDA error. */
int be_cuda_new(int device, be_backend **out, mtplx_err *err);

/* GPUs the CUDA runtime sees (0 when there is no driver or no GPU; never an error). */
int be_cuda_device_count(void);

/* Free and total bytes of device memory on GPU `device`, and its name (name_len bytes, may be 0).
 * Returns 0, or an error when the device cannot be queried. */
int be_cuda_mem_info(int device, size_t *free_bytes, size_t *total_bytes, char *name, size_t name_len,
                     mtplx_err *err);

/* Device-memory read bandwidth of GPU `device`: best GB/s (1e9 bytes/s) of `reps` streaming reads of a
 * `bytes` buffer (after one warm-up read). Returns 0 or an error. */
int be_cuda_membw(int device, size_t bytes, int reps, double *gbs, mtplx_err *err);

#ifdef __cplusplus
}
#endif

#endif
