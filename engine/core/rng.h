/* The one seeded random generator of maskd (xoshiro256**, seeded by splitmix64).
** Its whole state is four words, so checkpoints save and restore it exactly. */
#ifndef MASKD_RNG_H
#define MASKD_RNG_H
#include <stdint.h>

typedef struct Rng { uint64_t s[4]; } Rng;

/* Seeds the generator; equal seeds give equal streams. */
void rng_seed(Rng *r, uint64_t seed);
/* Next 64 uniformly random bits. */
uint64_t rng_u64(Rng *r);
/* Uniform integer in [0, n) without modulo bias; n > 0. */
uint32_t rng_below(Rng *r, uint32_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double rng_uniform(Rng *r);
/* Standard normal sample (Box-Muller; one draw per call so the state stays four words). */
double rng_normal(Rng *r);
/* An independent generator derived from r and a stream number (r is not advanced). */
Rng rng_split(const Rng *r, uint64_t stream);

/* splitmix64's increment, 2^64 over the golden ratio (odd, so k * it visits every word). */
#define RNG_GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL
/* splitmix64's finaliser: a strong 64-bit mix of z. Inline because dropout runs it
** once per element. */
static inline uint64_t rng_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* One step of splitmix64: advances *state by RNG_GOLDEN_GAMMA and returns it mixed. */
static inline uint64_t rng_splitmix64(uint64_t *state) { return rng_mix64(*state += RNG_GOLDEN_GAMMA); }

#endif
