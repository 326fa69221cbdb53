/* How close can an AVX-512 float tile come to the FMA peak on this CPU, with
** nothing else around it? Issue 14 asks for the products at 85% of the peak;
** this probe times the blocked product's inner loop alone (gemm_avx512.c's
** blk_kernel: one row of the B panel in vectors, one element of each A row
** broadcast, a fused multiply-add per pair, the panels asked for 16 steps
** ahead) for four tile shapes of 24-28 accumulators, with the packed panels
** where a product keeps them:
**   L1  kc 128, one A panel and one B panel (a few KB);
**   L2  kc 768, 8 A panels against 8 B panels (about 1 MB, all in L2);
**   L3  kc 768, 8 A panels against 64 B panels (6 MB of B, as base's packed
**       B at NC 2048: each panel comes from L3 the first time a block reads it).
** Each figure is the best of 5 runs, against the peak of 24 independent chains
** of fused multiply-adds in registers measured in the same run. The last row is
** maskd's tile as it runs now: each of the 8 tiles over a B panel also asks for
** an eighth of the next panel into L2 (gemm.c's `ahead`); and the last table
** times a block's first tile over a panel against the 7 after it, in the L3
** placement, without and with that (BENCHMARKS.md, issue 14: "On an Intel Xeon
** with AMX"). Needs AVX-512:
**
**   gcc -O3 -march=x86-64-v4 -o /tmp/probe-tile scripts/probe-tile-avx512.c && /tmp/probe-tile
*/
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* An MR x (16 NV) tile of C from kc steps of packed panels a (MR floats a step)
** and b (16 NV floats a step), stored to c (rows ldc apart); with AHEAD, ahead's
** next 16 bytes asked for into L2 each step (kc x 4 floats in all). */
#define TILE(NAME, MR, NV, AHEAD)                                                                             \
  static __attribute__((noinline)) void NAME(int kc, const float *a, const float *b, float *c, int ldc,       \
                                             const float *ahead) {                                            \
    __m512 acc[MR][NV];                                                                                       \
    const char *l2 = (const char *)ahead;                                                                     \
    for (int i = 0; i < MR; i++)                                                                              \
      for (int v = 0; v < NV; v++) acc[i][v] = _mm512_setzero_ps();                                           \
    _Pragma("GCC unroll 4") for (int p = 0; p < kc; p++) {                                                    \
      for (int v = 0; v < NV; v++) _mm_prefetch((const char *)(b + 16 * 16 * NV + 16 * v), _MM_HINT_T0);     \
      if (AHEAD) {                                                                                            \
        _mm_prefetch(l2, _MM_HINT_T1);                                                                        \
        l2 += 16;                                                                                             \
      } else {                                                                                                \
        _mm_prefetch((const char *)(a + 16 * MR), _MM_HINT_T0);                                               \
      }                                                                                                       \
      __m512 bv[NV];                                                                                          \
      for (int v = 0; v < NV; v++) bv[v] = _mm512_load_ps(b + 16 * v);                                        \
      _Pragma("GCC unroll 16") for (int i = 0; i < MR; i++) {                                                 \
        __m512 ai = _mm512_set1_ps(a[i]);                                                                     \
        for (int v = 0; v < NV; v++) acc[i][v] = _mm512_fmadd_ps(ai, bv[v], acc[i][v]);                       \
      }                                                                                                       \
      a += MR;                                                                                                \
      b += 16 * NV;                                                                                           \
    }                                                                                                         \
    for (int i = 0; i < MR; i++)                                                                              \
      for (int v = 0; v < NV; v++) _mm512_storeu_ps(c + (size_t)i * ldc + 16 * v, acc[i][v]);                 \
  }
TILE(tile_12x32, 12, 2, 0)
TILE(tile_6x64, 6, 4, 0)
TILE(tile_8x48, 8, 3, 0)
TILE(tile_14x32, 14, 2, 0)
TILE(tile_12x32_ahead, 12, 2, 1)

typedef void (*Tile)(int, const float *, const float *, float *, int, const float *);
static const struct { const char *name; Tile tile; int mr, nr; } tiles[] = {
  {"12x32", tile_12x32, 12, 32}, {"6x64", tile_6x64, 6, 64}, {"8x48", tile_8x48, 8, 48},
  {"14x32", tile_14x32, 14, 32}, {"12x32 + ahead", tile_12x32_ahead, 12, 32},
};

/* FLOP/s of 24 independent chains of fused multiply-adds, best of 5. */
static double fma_peak(void) {
  double best = 0;
  for (int r = 0; r < 5; r++) {
    __m512 acc[24], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
    long iters = 10000000;
    double t = now();
    for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
      for (int i = 0; i < 24; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
    t = now() - t;
    __m512 s = acc[0];
    for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, acc[i]);
    volatile float sink = _mm512_reduce_add_ps(s);
    (void)sink;
    double rate = 2.0 * 16 * 24 * (double)iters / t;
    if (rate > best) best = rate;
  }
  return best;
}

/* Runs the tile over a_panels x b_panels tiles (B panel outer, as gemm.c's
** block_rows walks them; tile ir asks for share ir of the next B panel, as
** block_rows gives it), about 0.3 s a run, best of 5. Returns FLOP/s; with
** first and rest, also the mean seconds of a block's first tile over a panel and
** of the tiles after it (in the best run). */
static double tile_rate(Tile tile, int mr, int nr, int kc, int a_panels, int b_panels, double *first, double *rest) {
  float *a = aligned_alloc(64, (size_t)kc * mr * a_panels * sizeof(float));
  float *b = aligned_alloc(64, (size_t)kc * nr * (b_panels + 1) * sizeof(float));
  float *c = aligned_alloc(64, (size_t)mr * a_panels * nr * b_panels * sizeof(float));
  if (!a || !b || !c) {
    fprintf(stderr, "probe-tile: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < (size_t)kc * mr * a_panels; i++) a[i] = 1e-3f * (float)(i % 7);
  for (size_t i = 0; i < (size_t)kc * nr * (b_panels + 1); i++) b[i] = 1e-3f * (float)(i % 5);
  int ldc = nr * b_panels, shares = nr / 4;
  double flop = 2.0 * mr * nr * kc * a_panels * b_panels;
  long reps = (long)(0.3 * 2e11 / flop) + 1;
  double best = 1e30;
  for (int r = 0; r < 5; r++) {
    double t = now(), t_first = 0, t_rest = 0;
    for (long it = 0; it < reps; it++)
      for (int jr = 0; jr < b_panels; jr++) {
        const float *next = b + (size_t)(jr + 1) * kc * nr;
        for (int ir = 0; ir < a_panels; ir++) {
          double t0 = first ? now() : 0;
          tile(kc, a + (size_t)ir * kc * mr, b + (size_t)jr * kc * nr, c + (size_t)ir * mr * ldc + jr * nr, ldc,
               next + (size_t)(ir % shares) * kc * 4);
          if (first) *(ir == 0 ? &t_first : &t_rest) += now() - t0;
        }
      }
    t = now() - t;
    if (t < best) {
      best = t;
      if (first) {
        *first = t_first / ((double)reps * b_panels);
        *rest = t_rest / ((double)reps * b_panels * (a_panels - 1));
      }
    }
  }
  free(a);
  free(b);
  free(c);
  return flop * (double)reps / best;
}

int main(void) {
  double peak = fma_peak();
  printf("FMA peak (24 chains in registers, 1 thread): %.1f GFLOP/s\n", peak * 1e-9);
  printf("%-16s %18s %18s %18s\n", "tile", "L1 (kc 128)", "L2 (8 x 8 panels)", "L3 (8 x 64 panels)");
  for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
    int mr = tiles[t].mr, nr = tiles[t].nr, a_panels = 96 / mr, b_panels = 256 / nr;
    double l1 = tile_rate(tiles[t].tile, mr, nr, 128, 1, 1, NULL, NULL);
    double l2 = tile_rate(tiles[t].tile, mr, nr, 768, a_panels, b_panels, NULL, NULL);
    double l3 = tile_rate(tiles[t].tile, mr, nr, 768, a_panels, 8 * b_panels, NULL, NULL);
    printf("%-16s %10.1f (%3.0f%%) %10.1f (%3.0f%%) %10.1f (%3.0f%%)\n", tiles[t].name, l1 * 1e-9, 100 * l1 / peak,
           l2 * 1e-9, 100 * l2 / peak, l3 * 1e-9, 100 * l3 / peak);
  }
  double first, rest;
  printf("L3 placement, 12x32, microseconds a tile: a block's first over a panel / the 7 after it\n");
  tile_rate(tile_12x32, 12, 32, 768, 8, 64, &first, &rest);
  printf("  without ahead %6.2f / %6.2f\n", first * 1e6, rest * 1e6);
  tile_rate(tile_12x32_ahead, 12, 32, 768, 8, 64, &first, &rest);
  printf("  with ahead    %6.2f / %6.2f\n", first * 1e6, rest * 1e6);
  return 0;
}
