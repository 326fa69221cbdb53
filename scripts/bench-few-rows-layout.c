/* The AVX2 few-row product's weight stream, outside maskd: the measurement behind
** "what bounds the few-row product" (BENCHMARKS.md, issue 14, "On a real AVX2 CPU").
** C[16 x N] = x[16 x K] W[N x K]^T with W from memory (COPIES copies, cycled), as a
** fill-mask of 16 tokens multiplies a Linear layer's weights, in two layouts:
**   rows    W as maskd keeps it (row-major), read as engine/nn/gemm_avx2.c's skinny_unit
**           reads it: units of 12 rows, 2 tiles of 6 rows taking turns every 64 steps of
**           K, so 6 rows are read at once in 256-byte pieces; with no prefetch, with the
**           kernel's own (the next unit's rows into L2, row by row) and with one that asks
**           for the next unit's 36 KB in address order.
**   packed  the same 12-row units stored [unit][tile][k][6]: the tile's 6 weights at k
**           side by side, so the whole product reads W front to back.
** Both add each output's K products in one chain, in order: the same bits (checked).
** Then the stream alone, the same bytes summed: in address order, and in the rows
** layout's order (12 rows in turns of 64 floats).
**
**   gcc -O3 -march=x86-64-v3 -fopenmp scripts/bench-few-rows-layout.c -o /tmp/few-rows-layout
**   OMP_NUM_THREADS=2 /tmp/few-rows-layout            # base's QKV / FFN-up shape, 3072 x 768
**   OMP_NUM_THREADS=2 /tmp/few-rows-layout 768 3072   # FFN down
**
** Prints each variant's median and best over 5 passes of the copies, in rounds. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { COPIES = 48, UNIT = 12, R = 6, TURN = 64, M = 16, PASSES = 5 };
static int N = 3072, K = 768;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The 6-row tile's step k: 6 broadcasts against x's 2 vectors (16 rows). */
#define TILE_STEP(acc, w6, x)                                                     \
  for (int i = 0; i < R; i++) {                                                   \
    __m256 wi = _mm256_broadcast_ss((w6)[i]);                                     \
    acc[i][0] = _mm256_fmadd_ps(wi, _mm256_load_ps(x), acc[i][0]);                \
    acc[i][1] = _mm256_fmadd_ps(wi, _mm256_load_ps((x) + 8), acc[i][1]);          \
  }

/* The 6-row tile's accumulators into the unit's rows s.. of tile. */
static inline void save_tile(float tile[UNIT][M], int s, __m256 acc[R][2]) {
  for (int i = 0; i < R; i++) {
    _mm256_store_ps(tile[s + i], acc[i][0]);
    _mm256_store_ps(tile[s + i] + 8, acc[i][1]);
  }
}

/* The unit's outputs (rows j0.. of W) into C's columns. */
static void store_unit(float *out, int j0, float tile[UNIT][M]) {
  for (int i = 0; i < UNIT && j0 + i < N; i++)
    for (int r = 0; r < M; r++) out[(size_t)r * N + j0 + i] = tile[i][r];
}

/* Row-major W; prefetch 0: none, 1: the kernel's, 2: the next unit in address order. */
static void product_rows(const float *W, const float *xt, float *out, int prefetch) {
#pragma omp parallel for schedule(static)
  for (int j0 = 0; j0 < N; j0 += UNIT) {
    float tile[UNIT][M] __attribute__((aligned(32)));
    const char *next = (const char *)(W + (size_t)(j0 + UNIT) * K);
    size_t line = 0, lines = j0 + UNIT < N ? (size_t)UNIT * K / 16 : 0;
    for (int k0 = 0; k0 < K; k0 += TURN)
      for (int s = 0; s < UNIT; s += R) {
        __m256 acc[R][2];
        const float *rows[R];
        for (int i = 0; i < R; i++) {
          rows[i] = W + (size_t)(j0 + s + i) * K;
          acc[i][0] = k0 ? _mm256_load_ps(tile[s + i]) : _mm256_setzero_ps();
          acc[i][1] = k0 ? _mm256_load_ps(tile[s + i] + 8) : _mm256_setzero_ps();
        }
#pragma GCC unroll 4
        for (int k = k0; k < k0 + TURN; k++) {
          if ((k & 15) == 0 && prefetch == 1)
            for (int i = 0; i < R; i++) {
              _mm_prefetch((const char *)(rows[i] + k + TURN), _MM_HINT_T0);
              _mm_prefetch((const char *)(rows[i] + (size_t)UNIT * K + k), _MM_HINT_T1);
            }
          if ((k & 15) == 0 && prefetch == 2)
            for (int i = 0; i < R && line < lines; i++, line++) _mm_prefetch(next + 64 * line, _MM_HINT_NTA);
          const float *w6[R];
          for (int i = 0; i < R; i++) w6[i] = rows[i] + k;
          const float *x = xt + (size_t)k * M;
          TILE_STEP(acc, w6, x)
        }
        save_tile(tile, s, acc);
      }
    store_unit(out, j0, tile);
  }
}

/* W packed [unit][tile][k][6]: each tile's whole K in one pass, read in address order. */
static void product_packed(const float *P, const float *xt, float *out) {
#pragma omp parallel for schedule(static)
  for (int j0 = 0; j0 < N; j0 += UNIT) {
    float tile[UNIT][M] __attribute__((aligned(32)));
    for (int s = 0; s < UNIT; s += R) {
      const float *p = P + (size_t)j0 * K + (size_t)s * K;
      __m256 acc[R][2];
      for (int i = 0; i < R; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 4
      for (int k = 0; k < K; k++) {
        const float *w6[R];
        for (int i = 0; i < R; i++) w6[i] = p + (size_t)k * R + i;
        const float *x = xt + (size_t)k * M;
        TILE_STEP(acc, w6, x)
      }
      save_tile(tile, s, acc);
    }
    store_unit(out, j0, tile);
  }
}

/* The bytes of W summed, in address order (turns 0) or in the rows layout's turns. */
static float stream(const float *W, int turns) {
  float total = 0;
#pragma omp parallel reduction(+ : total)
  {
    __m256 a = _mm256_setzero_ps(), b = a;
#pragma omp for schedule(static)
    for (int j0 = 0; j0 < N; j0 += UNIT) {
      int step = turns ? TURN : K;
      for (int k0 = 0; k0 < K; k0 += step)
        for (int r = 0; r < UNIT; r++) {
          const float *p = W + (size_t)(j0 + r) * K + k0;
          for (int i = 0; i < step; i += 16) {
            a = _mm256_add_ps(a, _mm256_load_ps(p + i));
            b = _mm256_add_ps(b, _mm256_load_ps(p + i + 8));
          }
        }
    }
    float o[8];
    _mm256_storeu_ps(o, _mm256_add_ps(a, b));
    total += o[0];
  }
  return total;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc > 2) N = atoi(argv[1]), K = atoi(argv[2]);
  if (N <= 0 || K <= 0 || N % UNIT || K % TURN) {
    fprintf(stderr, "N must be a multiple of %d and K of %d\n", UNIT, TURN);
    return 2;
  }
  size_t n = (size_t)N * K;
  float *W = aligned_alloc(64, n * 4 * COPIES), *P = aligned_alloc(64, n * 4 * COPIES);
  float *xt = aligned_alloc(64, (size_t)K * M * 4), *o1 = aligned_alloc(64, (size_t)M * N * 4),
        *o2 = aligned_alloc(64, (size_t)M * N * 4);
  if (!W || !P || !xt || !o1 || !o2) return 1;
  for (size_t i = 0; i < n * COPIES; i++) W[i] = (float)((i * 2654435761u) % 1000) * 1e-3f;
  for (int i = 0; i < K * M; i++) xt[i] = (float)(i % 13) * 0.1f;
  for (int c = 0; c < COPIES; c++)
    for (int j0 = 0; j0 < N; j0 += UNIT)
      for (int s = 0; s < UNIT; s += R)
        for (int k = 0; k < K; k++)
          for (int i = 0; i < R; i++)
            P[c * n + (size_t)j0 * K + (size_t)s * K + (size_t)k * R + i] = W[c * n + (size_t)(j0 + s + i) * K + k];
  product_rows(W, xt, o1, 1);
  product_packed(P, xt, o2);
  for (int i = 0; i < M * N; i++)
    if (o1[i] != o2[i]) { fprintf(stderr, "the layouts differ at %d: %.9g %.9g\n", i, o1[i], o2[i]); return 1; }
  printf("%d x %d x %d, W from memory (%d copies of %.1f MB), %d threads; the layouts give the same bits\n", M, N,
         K, COPIES, n * 4 / 1e6, omp_get_max_threads());
  const char *names[] = {"rows, no prefetch", "rows, the kernel's prefetch", "rows, next unit in order",
                         "packed", "stream in address order", "stream in the rows' turns"};
  volatile float sink = 0;
  for (int round = 0; round < 3; round++) {
    for (int v = 0; v < 6; v++) {
      double t[PASSES * COPIES];
      for (int rep = 0; rep < PASSES * COPIES; rep++) {
        size_t c = (size_t)(rep % COPIES) * n;
        double t0 = now();
        if (v < 3) product_rows(W + c, xt, o1, v);
        else if (v == 3) product_packed(P + c, xt, o2);
        else sink += stream(W + c, v == 5);
        t[rep] = now() - t0;
      }
      qsort(t, PASSES * COPIES, sizeof *t, cmp);
      double med = t[PASSES * COPIES / 2];
      printf("  %-28s median %.3f ms (best %.3f)  %5.1f GB/s\n", names[v], med * 1e3, t[0] * 1e3, n * 4 / med / 1e9);
    }
    printf("\n");
  }
  (void)sink;
  return 0;
}
