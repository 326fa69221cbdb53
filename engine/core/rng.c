#include "engine/core/rng.h"

#include <math.h>

void rng_seed(Rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_u64(Rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint32_t rng_below(Rng *r, uint32_t n) {
  /* Lemire's multiply-and-reject: exact uniformity without a division per draw. */
  uint64_t m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
  uint32_t low = (uint32_t)m;
  if (low < n) {
    uint32_t threshold = (uint32_t)(-n) % n;
    while (low < threshold) {
      m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
      low = (uint32_t)m;
    }
  }
  return (uint32_t)(m >> 32);
}

double rng_uniform(Rng *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

double rng_normal(Rng *r) {
  /* Plain Box-Muller on (0,1]; the second half is discarded so the state stays 4 words. */
  double u1 = 1.0 - rng_uniform(r), u2 = rng_uniform(r);
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

Rng rng_split(const Rng *r, uint64_t stream) {
  uint64_t seed = r->s[0] ^ rotl(r->s[1], 13) ^ rotl(r->s[2], 29) ^ rotl(r->s[3], 47) ^ (stream * 0xd1342543de82ef95ULL);
  Rng out;
  rng_seed(&out, seed);
  return out;
}
