/* The AVX2 blocked kernel's inner loop alone, outside maskd: the measurement behind
** "the kernel itself is not the limit" (BENCHMARKS.md, issue 14, "On a real AVX2 CPU").
** The 6 x 16 tile of engine/nn/gemm_avx2.c (12 accumulators, 2 vectors of B, 1
** broadcast of A per row) over kc steps of packed panels, cycling through `tiles`
** A panels against one B panel, as a block's tiles do: kc 256 keeps the B panel in a
** 32 KB L1 (16 KB), kc 768 does not (48 KB). One thread; best of 5 timings.
**
**   gcc -O3 -march=x86-64-v3 scripts/bench-avx2-tile.c -o /tmp/avx2-tile
**   for i in 1 2 3; do /tmp/avx2-tile 256 16; /tmp/avx2-tile 768 16; done
**
** Prints GFLOP/s for each (compare with `maskd bench sgemm`'s FMA peak for one thread). */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One tile: kc steps of a (6 floats a step) against b (16 floats a step), stored to c. */
__attribute__((noinline)) static void tile(int kc, const float *a, const float *b, float *c) {
  __m256 r[6][2];   /* every loop over it unrolled, or gcc keeps it in memory */
#pragma GCC unroll 6
  for (int i = 0; i < 6; i++) r[i][0] = r[i][1] = _mm256_setzero_ps();
  for (int p = 0; p < kc; p++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      r[i][0] = _mm256_fmadd_ps(ai, b0, r[i][0]);
      r[i][1] = _mm256_fmadd_ps(ai, b1, r[i][1]);
    }
    a += 6;
    b += 16;
  }
#pragma GCC unroll 6
  for (int i = 0; i < 6; i++) {
    _mm256_storeu_ps(c + 16 * i, r[i][0]);
    _mm256_storeu_ps(c + 16 * i + 8, r[i][1]);
  }
}

int main(int argc, char **argv) {
  if (argc != 3 || atoi(argv[1]) < 1 || atoi(argv[2]) < 1) {
    fprintf(stderr, "usage: %s KC TILES\n", argv[0]);
    return 2;
  }
  int kc = atoi(argv[1]), tiles = atoi(argv[2]);
  float *a = aligned_alloc(64, sizeof(float) * 6 * (size_t)kc * tiles);
  float *b = aligned_alloc(64, sizeof(float) * 16 * (size_t)kc), c[96];
  if (!a || !b) return 1;
  for (size_t i = 0; i < 6 * (size_t)kc * tiles; i++) a[i] = 1e-3f * (float)(i % 7);
  for (size_t i = 0; i < 16 * (size_t)kc; i++) b[i] = 1e-3f * (float)(i % 5);
  long reps = (long)(4e9 / (192.0 * kc * tiles));
  double best = 0;
  for (int round = 0; round < 5; round++) {
    double t0 = now();
    for (long r = 0; r < reps; r++)
      for (int t = 0; t < tiles; t++) tile(kc, a + (size_t)6 * kc * t, b, c);
    double g = (double)reps * tiles * kc * 192.0 / (now() - t0) * 1e-9;
    if (g > best) best = g;
  }
  printf("kc %d, %d tiles: %.1f GFLOP/s (c %g)\n", kc, tiles, best, c[5]);
  free(a);
  free(b);
  return 0;
}
