/* rng.c — xoshiro256** seeded by splitmix64; see rng.h. Written from the published algorithm
 * descriptions (splitmix64: Steele, Lea & Flood; xoshiro256**: Blackman & Vigna). */
#include "rng.h"

#include <stdio.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t splitmix64_next(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void rng_seed(rng_state *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64_next(&x);
    if (!(r->s[0] | r->s[1] | r->s[2] | r->s[3])) r->s[0] = 1; /* cannot happen; keep the invariant */
}

static inline uint64_t rotl(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

uint64_t rng_next(rng_state *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(rng_state *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

static uint64_t fresh64(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v) return v;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        size_t n = fread(&v, sizeof v, 1, f);
        fclose(f);
        if (n == 1) return v;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
    return splitmix64_next(&x);
}

uint64_t rng_fresh_seed(void) { return fresh64() >> 11; }
