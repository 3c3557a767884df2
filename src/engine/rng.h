/* rng.h — the request RNG: xoshiro256** (Blackman & Vigna, 2018) seeded through splitmix64.
 *
 * Every generation owns one rng_state seeded from the request seed, so the same request with the
 * same seed, depth and parameters gives the same tokens (DESIGN.md §3.7). The algorithm name is
 * reported with the seed (RNG_ALGORITHM) so a result can be reproduced elsewhere. */
#ifndef MTPLX_ENGINE_RNG_H
#define MTPLX_ENGINE_RNG_H

#include <stdint.h>

#define RNG_ALGORITHM "xoshiro256**/splitmix64"

typedef struct {
    uint64_t s[4]; /* xoshiro256** state; never all zero (splitmix64 seeding guarantees it) */
} rng_state;

/* Seed: s[i] = successive splitmix64 outputs starting from `seed`. */
void rng_seed(rng_state *r, uint64_t seed);

/* Next 64 random bits. */
uint64_t rng_next(rng_state *r);

/* Uniform double in [0, 1): the top 53 bits of rng_next scaled by 2^-53 (0 is possible, 1 is not). */
double rng_uniform(rng_state *r);

/* A seed from a good source (getrandom(2), falling back to /dev/urandom, then time ^ pid), in
 * [0, 2^53) so that it survives a round trip through a JSON number (double) exactly. */
uint64_t rng_fresh_seed(void);

#endif
