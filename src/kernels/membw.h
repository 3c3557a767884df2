/* membw.h — streaming reads for measuring memory read bandwidth (benchmarks only). */
#ifndef MTPLX_KERNELS_MEMBW_H
#define MTPLX_KERNELS_MEMBW_H

#include <stddef.h>

/* Sum of p[0..n) read front to back with the widest vector loads the CPU has. */
float kern_stream_read(const float *p, size_t n);

/* The same split into n_threads contiguous slices (0 = every pool thread) read concurrently by the
 * global pool; returns the sum of the slice sums. */
float kern_stream_read_parallel(const float *p, size_t n, int n_threads);

#endif
