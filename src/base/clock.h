/* clock.h — monotonic time for stats and benchmarks. */
#ifndef MTPLX_BASE_CLOCK_H
#define MTPLX_BASE_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double clock_now(void);

#endif
