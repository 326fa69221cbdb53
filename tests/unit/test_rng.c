/* The seeded generator: reproducible, uniform enough, exact bounds. */
#include <string.h>

#include "engine/core/rng.h"
#include "tests/unit/check.h"

int main(void) {
  Rng a, b;
  rng_seed(&a, 42);
  rng_seed(&b, 42);
  int same = 1;
  for (int i = 0; i < 1000; i++) same &= rng_u64(&a) == rng_u64(&b);
  check(same, "rng_same_seed_same_stream", "streams differ");

  rng_seed(&b, 43);
  check(rng_u64(&a) != rng_u64(&b), "rng_other_seed_other_stream", "seeds 42 and 43 agree");

  /* rng_below: every value in range, each of 10 buckets within 5 sigma of n/10. */
  Rng r;
  rng_seed(&r, 7);
  int counts[10] = {0}, in_range = 1, n = 200000;
  for (int i = 0; i < n; i++) { uint32_t v = rng_below(&r, 10); if (v >= 10) in_range = 0; else counts[v]++; }
  double sigma = sqrt(n * 0.1 * 0.9);
  int uniform = 1;
  for (int i = 0; i < 10; i++) uniform &= fabs(counts[i] - n * 0.1) < 5 * sigma;
  check(in_range && uniform, "rng_below_uniform", "bucket counts off");

  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; i++) { double x = rng_normal(&r); sum += x; sum2 += x * x; }
  double mean = sum / n, var = sum2 / n - mean * mean;
  check(fabs(mean) < 0.01 && fabs(var - 1) < 0.02, "rng_normal_moments", "mean %g var %g", mean, var);

  double u_min = 1, u_max = 0;
  for (int i = 0; i < n; i++) { double u = rng_uniform(&r); if (u < u_min) u_min = u; if (u > u_max) u_max = u; }
  check(u_min >= 0 && u_max < 1 && u_min < 1e-3 && u_max > 1 - 1e-3, "rng_uniform_range", "[%g, %g]", u_min, u_max);

  Rng s1 = rng_split(&a, 1), s2 = rng_split(&a, 2);
  check(rng_u64(&s1) != rng_u64(&s2), "rng_split_streams_differ", "split streams agree");
  return check_exit();
}
