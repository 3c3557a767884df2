/* device.h — which device the backends of this process run on (`--device cpu|cuda[:N]`), and the
 * GPU memory preflight before a model is loaded onto it (docs/architecture.md, "The CUDA backend").
 *
 * be_create(NULL) (backend.h) resolves the device in this order: the default set here (the CLI's
 * --device), the MTPLX_DEVICE environment variable, then automatically: cuda:0 when the binary was
 * built with CUDA (`make CUDA=1`) and a GPU is visible, else cpu. */
#ifndef MTPLX_BACKEND_DEVICE_H
#define MTPLX_BACKEND_DEVICE_H

#include <stddef.h>

#include "../base/err.h"

/* Set the process-wide default device: "cpu", "cuda" (= cuda:0) or "cuda:N". Returns 0, or
 * MTPLX_EINVAL for a malformed spec, MTPLX_EUNSUPPORTED when the build has no CUDA, or an error when
 * GPU N does not exist. */
int be_device_set_default(const char *spec, mtplx_err *err);

/* The device be_create(NULL) would use now, as "cpu" or "cuda:N" (a static string). */
const char *be_device_resolved(void);

/* The resolved device in words, into out[n]: "cpu", or "cuda:N <GPU name>" ("cuda:N" when the name cannot
 * be read). For keys that must tell one device from another (the depth `mtplx tune` saves). */
void be_device_describe(char *out, size_t n);

/* 1 when this binary was built with the CUDA backend. */
int be_device_has_cuda(void);

/* When the resolved device is a GPU: refuse (MTPLX_ENOMEM, with the numbers) a checkpoint directory
 * whose *.safetensors bytes plus a working margin exceed the GPU's free memory. MTPLX_GPU_MEM_LIMIT
 * (bytes) caps the free memory seen (to test the refusal). Returns 0 on the CPU or when it fits. */
int be_device_preflight(const char *model_dir, mtplx_err *err);

/* When the resolved device is a GPU: its device-memory read bandwidth (best GB/s of `reps` reads of a
 * `bytes` buffer) into *gbs and its name into name. Returns 0, or MTPLX_EUNSUPPORTED on the CPU. */
int be_device_membw(size_t bytes, int reps, double *gbs, char *name, size_t name_len, mtplx_err *err);

#endif
