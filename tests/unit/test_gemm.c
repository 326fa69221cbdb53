/* gemm_f32 against a double-precision product computed here, over shapes
** that hit every edge of the blocking (partial register tiles in M and N,
** K slices shorter than a block, several K slices), all four transpose
** combinations, alpha/beta, leading dimensions wider than the matrix, C
** holding NaN when beta is 0, one and several threads, and a call from
** inside a parallel region; the few-row kernel (M <= 32 against a transposed
** weight) and the base model's shapes. Every check runs at every
** instruction-set level the CPU has (generic = OpenBLAS, avx2, avx512; a level
** it lacks is reported SKIP), and the two kernel levels are checked to give the
** same bits (gemm_kernels.h). */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "engine/core/cpu.h"
#include "engine/nn/gemm.h"
#include "engine/nn/gemm_kernels.h"
#include "tests/unit/check.h"

static uint64_t state = 88172645463325252ull;
static float uniform(void) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17;
  return (float)((state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Element (i, j) of op(A) op(B) in double; *mag = the sum of |terms|, the scale of its rounding error. */
static double dot(int ta, int tb, int K, const float *A, int lda, const float *B, int ldb, int i, int j, double *mag) {
  double s = 0, m = 0;
  for (int k = 0; k < K; k++) {
    double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
    double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
    s += a * b;
    m += fabs(a * b);
  }
  *mag = m;
  return s;
}

/* Product under test, run outside a parallel region with `threads` threads,
** or (threads 0) inside a two-thread region, as the attention's per-head
** products are, asking for two (it must run on the calling thread alone);
** bias/G NULL: gemm_f32, otherwise gemm_f32_bias (alpha 1, beta 0). */
static void run_product(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                        int ldb, float beta, const float *bias, float *C, float *G, int ldc, int threads, int with_bias) {
  int nt = threads ? threads : 2;
#pragma omp parallel num_threads(2) if (!threads)
#pragma omp single
  {
    if (with_bias) gemm_f32_bias(ta, tb, M, N, K, A, lda, B, ldb, bias, C, G, ldc, nt);
    else gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nt);
  }
}

/* Runs one product and compares every element of C (inside and outside the
** M x N window: the margin of ldc must stay untouched) with the reference. */
/* threads 0: the product runs inside a parallel region of two threads, as the
** attention's per-head products do (one thread's product, never the few-row
** kernel's threads). */
/* Whether row i of an M x N x K product is compared with the reference: all
** of them, except in products big enough (the base model's) that the double
** reference would dominate the run, where the first and last rows and every
** 53rd are (the blocking's edges fall in the first and last rows and columns). */
static int row_checked(int i, int M, int N, int K) {
  return (double)M * N * K < 3e7 || i < 8 || i >= M - 8 || i % 53 == 0;
}

static int sanitized;   /* MASKD_ASAN: a smaller batch (check.h's check_element_sampled samples the reference) */

static int one(int ta, int tb, int M, int N, int K, float alpha, float beta, int pad, int threads, double *worst) {
  int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  int arows = ta ? K : M, brows = tb ? N : K;
  float *A = malloc(sizeof(float) * ((size_t)arows * lda + 1)), *B = malloc(sizeof(float) * ((size_t)brows * ldb + 1));
  float *C = malloc(sizeof(float) * ((size_t)M * ldc + 1)), *C0 = malloc(sizeof(float) * ((size_t)M * ldc + 1));
  for (size_t i = 0; i < (size_t)arows * lda; i++) A[i] = uniform();
  for (size_t i = 0; i < (size_t)brows * ldb; i++) B[i] = uniform();
  for (size_t i = 0; i < (size_t)M * ldc; i++) C0[i] = beta == 0.0f ? NAN : uniform();
  memcpy(C, C0, sizeof(float) * (size_t)M * ldc);
  run_product(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, NULL, ldc, threads, 0);
  int ok = 1;
  for (int i = 0; i < M && ok; i++)
    for (int j = 0; j < ldc; j++) {
      size_t at = (size_t)i * ldc + j;
      if (j >= N) {
        if (memcmp(&C[at], &C0[at], sizeof(float))) { ok = 0; break; }
        continue;
      }
      if (!row_checked(i, M, N, K) || !check_element_sampled(i, j, M, N, K)) continue;
      double mag, s = dot(ta, tb, K, A, lda, B, ldb, i, j, &mag);
      double want = alpha * s + (beta == 0.0f ? 0.0 : (double)beta * C0[at]);
      double err = fabs(C[at] - want) / (fabs(alpha) * mag + fabs(beta) + 1.0);
      if (err > *worst || err != err) *worst = err;
      if (!(err < 1e-6)) ok = 0;
    }
  free(A); free(B); free(C); free(C0);
  return ok;
}

/* gemm_f32_bias: C = op(A) op(B) + bias and G = GELU(C), G apart from C or
** in place (G == C), against the double reference with the exact erf. */
static int with_bias(int ta, int tb, int M, int N, int K, int in_place, int threads, double *worst) {
  int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
  float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
  float *bias = malloc(sizeof(float) * (size_t)N), *C = malloc(sizeof(float) * (size_t)M * N);
  float *G = in_place ? C : malloc(sizeof(float) * (size_t)M * N);
  for (size_t i = 0; i < (size_t)M * K; i++) A[i] = uniform();
  for (size_t i = 0; i < (size_t)K * N; i++) B[i] = uniform();
  for (int j = 0; j < N; j++) bias[j] = uniform();
  for (size_t i = 0; i < (size_t)M * N; i++) C[i] = G[i] = NAN;
  run_product(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, bias, C, G, ldc, threads, 1);
  int ok = 1;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      if (!check_element_sampled(i, j, M, N, K)) continue;
      double mag, s = dot(ta, tb, K, A, lda, B, ldb, i, j, &mag) + bias[j];
      mag += fabs(bias[j]);
      double gelu = 0.5 * s * (1 + erf(s / sqrt(2.0)));
      size_t at = (size_t)i * ldc + j;
      double err = fabs(G[at] - gelu) / (mag + 1.0);
      if (!in_place) err = fmax(err, fabs(C[at] - s) / (mag + 1.0));
      if (err > *worst || err != err) *worst = err;
      if (!(err < 1e-6)) ok = 0;
    }
  free(A); free(B); free(bias); free(C);
  if (!in_place) free(G);
  return ok;
}

/* gemm_f32_gelu_grad: C = (op(A) op(B)) GELU'(P) elementwise, against the double
** reference with the exact Phi(p) + p phi(p); threads 0 runs it inside a region. */
static int with_gelu_grad(int ta, int tb, int M, int N, int K, int threads, double *worst) {
  int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
  float *A = malloc(sizeof(float) * (size_t)M * K), *B = malloc(sizeof(float) * (size_t)K * N);
  float *P = malloc(sizeof(float) * (size_t)M * N), *C = malloc(sizeof(float) * (size_t)M * N);
  for (size_t i = 0; i < (size_t)M * K; i++) A[i] = uniform();
  for (size_t i = 0; i < (size_t)K * N; i++) B[i] = uniform();
  for (size_t i = 0; i < (size_t)M * N; i++) { P[i] = 4 * uniform(); C[i] = NAN; }
#pragma omp parallel num_threads(2) if (!threads)
#pragma omp single
  gemm_f32_gelu_grad(ta, tb, M, N, K, A, lda, B, ldb, P, C, ldc, threads ? threads : 2);
  int ok = 1;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      if (!check_element_sampled(i, j, M, N, K)) continue;
      double mag, s = dot(ta, tb, K, A, lda, B, ldb, i, j, &mag), p = P[(size_t)i * ldc + j];
      double grad = 0.5 * (1 + erf(p / sqrt(2.0))) + p * exp(-0.5 * p * p) / sqrt(2 * M_PI);
      double err = fabs(C[(size_t)i * ldc + j] - s * grad) / (mag + 1.0);
      if (err > *worst || err != err) *worst = err;
      if (!(err < 1e-6)) ok = 0;
    }
  free(A); free(B); free(P); free(C);
  return ok;
}

/* A few-row product on a thread of its own, which then ends: under ASan its
** packing buffer must be freed with it (the server's connection threads). */
static void *product_on_thread(void *ok) {
  double w = 0;
  *(int *)ok = one(0, 1, 16, 200, 300, 1.0f, 0.0f, 0, 1, &w);
  return NULL;
}

/* "gemm_<level>_<what>", the name of one check at one level. */
static const char *level_name(CpuIsa isa, const char *what) {
  static char name[128];
  snprintf(name, sizeof name, "gemm_%s_%s", cpu_isa_name(isa), what);
  return name;
}

/* Every product check of one level, named by it, at the level cpu_isa() runs now. */
static const char *const level_checks[] = {"shapes",          "few_rows",         "base_shapes",
                                           "bias_and_gelu",   "times_gelu_derivative", "inside_parallel_region",
                                           "on_a_thread_that_ends", "empty_k_scales_c"};

static void level_checks_run(CpuIsa isa) {
  /* Shapes around the register tiles (12 x 32 at avx512, 6 x 16 at avx2), the
  ** 768-deep K slice and the A blocks; K = 0, 1 and odd; several slices of K. */
  static const int dims[][3] = {{1, 1, 1},      {12, 32, 256},  {13, 33, 257}, {11, 31, 255}, {5, 70, 3},
                                {120, 64, 512}, {121, 96, 600}, {300, 40, 17}, {16, 768, 100}, {1, 100, 1000},
                                {250, 250, 250}, {64, 128, 64}, {128, 64, 128}, {37, 5, 900},  {2, 300, 33},
                                {7, 19, 0},     {20, 37, 1},    {6, 16, 769},  {7, 17, 1537}, {95, 47, 2000},
                                /* few rows by many columns: the few-row path when B is transposed */
                                {20, 200, 50}, {32, 500, 70}, {31, 130, 17}, {16, 97, 3072},
                                /* past the A block and the 2048-column B block of each thread */
                                {193, 40, 100}, {385, 70, 513}, {40, 4200, 30}};
  double worst = 0;
  int bad = 0, runs = 0;
  for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int variant = 0; variant < 4; variant++) {
        float alpha = variant == 0 ? 1.0f : variant == 1 ? 0.125f : variant == 2 ? -1.5f : 0.5f;
        float beta = variant == 0 ? 0.0f : variant == 1 ? 1.0f : variant == 2 ? 0.5f : (d & 1) ? 0.0f : 2.0f;
        int pad = variant >= 2 ? 3 : 0, threads = variant == 1 ? 1 : variant == 3 ? 0 : 2;
        runs++;
        if (!one(t & 1, t >> 1, dims[d][0], dims[d][1], dims[d][2], alpha, beta, pad, threads, &worst)) {
          if (!bad) printf("# first mismatch: ta=%d tb=%d M=%d N=%d K=%d alpha=%g beta=%g pad=%d threads=%d\n", t & 1,
                           t >> 1, dims[d][0], dims[d][1], dims[d][2], alpha, beta, pad, threads);
          bad++;
        }
      }
  check(bad == 0, level_name(isa, "shapes"), "%d of %d products differ (worst relative error %.3g)", bad, runs, worst);
  printf("# gemm backend %s, %d products, worst relative error %.3g\n", gemm_backend(), runs, worst);

  /* The few-row kernel: every M a vector count can leave (1..4 vectors of 8 at
  ** avx2, 1..2 of 16 at avx512), N >= 4M with a partial unit of 12 rows of B, K
  ** odd and past one slice. */
  static const int few_m[] = {1, 5, 8, 9, 16, 17, 24, 31, 32};
  int few_bad = 0, few_runs = 0;
  double few_worst = 0;
  for (size_t m = 0; m < sizeof few_m / sizeof few_m[0]; m++)
    for (int variant = 0; variant < 4; variant++) {
      int M = few_m[m], N = 4 * M + 13 + 12 * variant, K = variant == 3 ? 1001 : 3 + 64 * variant;
      float alpha = variant == 2 ? -0.75f : 1.0f, beta = variant == 1 ? 0.5f : 0.0f;
      few_runs++;
      int pad = variant & 1 ? 5 : 0, threads = variant == 3 ? 0 : 1 + (variant & 1);
      few_bad += !one(0, 1, M, N, K, alpha, beta, pad, threads, &few_worst);
    }
  check(few_bad == 0, level_name(isa, "few_rows"), "%d of %d few-row products differ (worst %.3g)", few_bad, few_runs,
        few_worst);

  /* The base model's products (batch 8 x 128 tokens): a Linear layer's forward
  ** (x W^T), its input gradient (dy W) and weight gradient (dy^T x). Under the
  ** sanitizers the batch is 50 rows (the model's widths stay; 50 leaves a tail in the
  ** row blocks of 6 and 12): the plain build checks the full batch, and the double
  ** reference of 1024 rows takes a minute under ASan. */
  const int R = sanitized ? 50 : 1024;
  const int base[][5] = {{R, 768, 768, 0, 1},  {R, 3072, 768, 0, 1}, {R, 2304, 768, 0, 1},
                         {R, 768, 3072, 0, 0}, {R, 768, 2304, 0, 0}, {3072, 768, R, 1, 0},
                         {768, 768, R, 1, 0},  {16, 3072, 768, 0, 1}};
  int base_bad = 0, base_runs = 0;
  double base_worst = 0;
  for (size_t d = 0; d < sizeof base / sizeof base[0]; d++) {
    base_runs++;
    base_bad += !one(base[d][3], base[d][4], base[d][0], base[d][1], base[d][2], 1.0f, d & 1 ? 1.0f : 0.0f, 0,
                     d == 0 ? 1 : 2, &base_worst);
  }
  check(base_bad == 0, level_name(isa, "base_shapes"), "%d of %d products differ (worst %.3g)", base_bad, base_runs,
        base_worst);

  static const int bdims[][3] = {{13, 33, 257}, {1, 70, 5}, {200, 300, 600}, {16, 300, 70}, {32, 130, 9},
                                 {9, 40, 100},  {24, 100, 31}, {40, 50, 1600}};
  int bias_bad = 0, bias_runs = 0;
  double bias_worst = 0;
  for (size_t d = 0; d < sizeof bdims / sizeof bdims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int variant = 0; variant < 3; variant++) {
        bias_runs++;
        bias_bad += !with_bias(t & 1, t >> 1, bdims[d][0], bdims[d][1], bdims[d][2], variant == 1, variant == 2 ? 0 : 2,
                               &bias_worst);
      }
  check(bias_bad == 0, level_name(isa, "bias_and_gelu"), "%d of %d products with bias and GELU differ (worst %.3g)",
        bias_bad, bias_runs, bias_worst);

  /* Past one slice of K too: the derivative is applied once, at the last. */
  static const int gdims[][3] = {{13, 33, 257}, {200, 300, 1600}, {16, 300, 70},
                                 {32, 130, 9},  {150, 40, 800},   {7, 21, 1}};
  int grad_bad = 0, grad_runs = 0;
  double grad_worst = 0;
  for (size_t d = 0; d < sizeof gdims / sizeof gdims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int threads = 0; threads < 3; threads++) {
        grad_runs++;
        grad_bad += !with_gelu_grad(t & 1, t >> 1, gdims[d][0], gdims[d][1], gdims[d][2], threads, &grad_worst);
      }
  check(grad_bad == 0, level_name(isa, "times_gelu_derivative"), "%d of %d products times GELU' differ (worst %.3g)",
        grad_bad, grad_runs, grad_worst);

  /* Called from inside a parallel region, each thread runs its own product. */
  int inner_ok = 1;
#pragma omp parallel num_threads(2) reduction(& : inner_ok)
  {
    double w = 0;
    inner_ok = one(omp_get_thread_num(), 1, 70, 90, 300, 1.0f, 0.0f, 1, 1, &w) &&
               one(0, 1, 9 + omp_get_thread_num() * 20, 200, 300, 1.0f, 0.0f, 1, 2, &w);
  }
  check(inner_ok, level_name(isa, "inside_parallel_region"), "a product run inside a parallel region differs");

  int thread_ok = 0;
  pthread_t th;
  int started = pthread_create(&th, NULL, product_on_thread, &thread_ok) == 0;
  if (started) pthread_join(th, NULL);
  check(started && thread_ok, level_name(isa, "on_a_thread_that_ends"), "the product on a short-lived thread differs");

  /* K = 0 scales C by beta (zero when beta is 0, even over NaN). */
  float A[4] = {1, 2, 3, 4}, C[4] = {NAN, NAN, NAN, NAN}, D[4] = {1, 2, 3, 4};
  gemm_f32(0, 0, 2, 2, 0, 1.0f, A, 1, A, 2, 0.0f, C, 2, 1);
  gemm_f32(0, 0, 2, 2, 0, 1.0f, A, 1, A, 2, 2.0f, D, 2, 1);
  check(C[0] == 0 && C[3] == 0 && D[0] == 2 && D[3] == 8, level_name(isa, "empty_k_scales_c"), "C = %g %g, D = %g %g",
        C[0], C[3], D[0], D[3]);
}

/* The inputs of one product of bits_product's kinds, made from `seed`: A, B,
** bias and P (GELU' at P), and C (NaN where beta is 0 and it must not be read)
** with G after it in out (2 M ldc floats: G NaN). */
typedef struct Inputs { float *A, *B, *bias, *P; int lda, ldb, ldc; } Inputs;
static Inputs inputs_make(int kind, int ta, int tb, int M, int N, int K, float beta, int pad, uint64_t seed,
                          float *out) {
  Inputs in = {NULL, NULL, NULL, NULL, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad};
  size_t na = (size_t)(ta ? K : M) * in.lda + 1, nb = (size_t)(tb ? N : K) * in.ldb + 1, nc = (size_t)M * in.ldc;
  in.A = malloc(sizeof(float) * na), in.B = malloc(sizeof(float) * nb), in.bias = malloc(sizeof(float) * (N + 1));
  in.P = malloc(sizeof(float) * (nc + 1));
  state = seed;
  for (size_t i = 0; i < na; i++) in.A[i] = uniform();
  for (size_t i = 0; i < nb; i++) in.B[i] = uniform();
  for (int j = 0; j < N; j++) in.bias[j] = uniform();
  for (size_t i = 0; i < nc; i++) {
    in.P[i] = 4 * uniform();
    out[i] = beta == 0.0f && kind == 0 ? NAN : uniform();
    out[nc + i] = NAN;
  }
  return in;
}
static void inputs_free(Inputs *in) { free(in->A); free(in->B); free(in->bias); free(in->P); }

/* One product of each kind (0 gemm_f32, 1 bias and G apart, 2 bias and G in
** place, 3 times GELU'), its outputs (C, then G) into out (2 M ldc floats), at
** the level cpu_isa() runs now, from inputs made from `seed`. */
static void bits_product(int kind, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad, int threads,
                         uint64_t seed, float *out) {
  Inputs in = inputs_make(kind, ta, tb, M, N, K, beta, pad, seed, out);
  float *C = out, *G = kind == 2 ? out : out + (size_t)M * in.ldc;
  if (kind == 0) gemm_f32(ta, tb, M, N, K, alpha, in.A, in.lda, in.B, in.ldb, beta, C, in.ldc, threads);
  else if (kind == 3) gemm_f32_gelu_grad(ta, tb, M, N, K, in.A, in.lda, in.B, in.ldb, in.P, C, in.ldc, threads);
  else gemm_f32_bias(ta, tb, M, N, K, in.A, in.lda, in.B, in.ldb, in.bias, C, G, in.ldc, threads);
  inputs_free(&in);
}

/* The blocked product's arithmetic, written out one element at a time in
** scalar fmaf (correctly rounded, as the vector instructions are): K cut into
** gemm_slice_step's slices (gemm_kernels.h); in each slice one
** chain of fused multiply-adds from zero; the slice's epilogue on it (the first:
** alpha acc + bias, then + beta C where C is read; the others: C + alpha acc);
** after the last, G = GELU(C) or C times GELU'(P). kind and the outputs as
** bits_product's. */
static void sequence_reference(int kind, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad,
                               uint64_t seed, float *out) {
  Inputs in = inputs_make(kind, ta, tb, M, N, K, beta, pad, seed, out);
  const float *A = in.A, *B = in.B;
  int lda = in.lda, ldb = in.ldb, ldc = in.ldc;
  float *C = out, *G = kind == 2 ? out : out + (size_t)M * ldc;
  if (kind) alpha = 1.0f, beta = 0.0f;
  int step = gemm_slice_step(K);
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      size_t at = (size_t)i * ldc + j;
      float c = C[at];
      for (int pc = 0; pc < K || (pc == 0 && K == 0); pc += step) {
        float acc = 0.0f;
        for (int p = pc; p < K && p < pc + step; p++) {
          float a = ta ? A[(size_t)p * lda + i] : A[(size_t)i * lda + p];
          acc = fmaf(a, tb ? B[(size_t)j * ldb + p] : B[(size_t)p * ldb + j], acc);
        }
        if (pc == 0) {
          float r = fmaf(alpha, acc, kind == 1 || kind == 2 ? in.bias[j] : 0.0f);
          c = beta != 0.0f ? fmaf(beta, c, r) : r;
        } else
          c = fmaf(1.0f, c, fmaf(alpha, acc, 0.0f));
        if (K == 0) break;
      }
      if (kind == 3) c *= fast_gelu_grad(in.P[at]);
      if (kind == 1 || kind == 2) G[at] = fast_gelu(c);
      if (kind != 2) C[at] = c;
    }
  inputs_free(&in);
}

/* Two ways of computing one product: bits_product's arguments, outputs into a and b. */
typedef void ProductPair(int kind, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad, int threads,
                         uint64_t seed, float *a, float *b);

/* How many of the products over shapes (M, N, K) come out with other bits the two
** ways of pair: all four transposes and bits_product's four kinds, alpha, beta, the
** padding and the threads varied by shape; with linear, only a Linear layer's calls
** (A as it is, B transposed, alpha 1, beta 0, kinds 0-2: the few-row path's). *runs
** counts the products. */
static int products_differ(const int (*shapes)[3], size_t n_shapes, int linear, uint64_t seed, ProductPair *pair,
                           int *runs) {
  int bad = 0;
  for (size_t d = 0; d < n_shapes; d++)
    for (int t = 0; t < (linear ? 1 : 4); t++)
      for (int kind = 0; kind < (linear ? 3 : 4); kind++) {
        int M = shapes[d][0], N = shapes[d][1], K = shapes[d][2], ta = linear ? 0 : t & 1, tb = linear ? 1 : t >> 1;
        /* Under the sanitizers the scalar reference of a large product is most of the
        ** test's time (about 100 s a level): there, a large shape runs A and B both as
        ** they are and both transposed, the mixed transposes on the smaller shapes. */
        if (sanitized && (t == 1 || t == 2) && (double)M * N * K > 4e6) continue;
        float alpha = kind || linear ? 1.0f : (d & 1) ? -0.375f : 1.0f;
        float beta = kind || linear ? 0.0f : (d & 2) ? 0.5f : 0.0f;
        int pad = (int)(d % 3), threads = 1 + (int)(d & 1);
        size_t n = 2 * (size_t)M * (N + pad) + 1;
        float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n);
        pair(kind, ta, tb, M, N, K, alpha, beta, pad, threads, ++seed, a, b);
        ++*runs;
        if (memcmp(a, b, sizeof(float) * (n - 1))) {
          if (!bad) printf("# first difference: kind=%d ta=%d tb=%d M=%d N=%d K=%d\n", kind, ta, tb, M, N, K);
          bad++;
        }
        free(a); free(b);
      }
  return bad;
}

/* The product at the level in use, and the sequence it should be. */
static void product_and_sequence(int kind, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad,
                                 int threads, uint64_t seed, float *a, float *b) {
  bits_product(kind, ta, tb, M, N, K, alpha, beta, pad, threads, seed, a);
  sequence_reference(kind, ta, tb, M, N, K, alpha, beta, pad, seed, b);
}

/* Each level's blocked product is that one sequence to the bit, whatever its
** tile, its blocks and the parts it walks a slice in (gemm_kernels.h), and so is
** the few-row product where a Linear layer calls it (alpha 1, beta 0): the same
** text gives the same bits in a pass of few rows and of many. */
static void sequence_checks_run(CpuIsa isa) {
  if (strstr(gemm_backend(), "openblas")) {
    check_skip(level_name(isa, "is_one_fma_sequence"), "MASKD_GEMM=openblas: OpenBLAS's order, not the blocked one");
    return;
  }
  /* Small widths: the scalar reference is the cost (past the A block in M, past
  ** each thread's B block in N, K in one slice, several, and parts of both; the
  ** shapes at odd places run on two threads; 40 columns make two B panels at
  ** avx512, so that a tile gets the next one's share). */
  static const int shapes[][3] = {{40, 33, 257}, {6, 16, 768},  {47, 17, 769},  {100, 20, 600}, {37, 5, 900},
                                  {13, 17, 2000}, {300, 40, 17}, {33, 19, 0},   {34, 4100, 20}, {193, 20, 513},
                                  {45, 24, 1001}, {20, 30, 1536}, {97, 20, 255}, {100, 100, 100},
                                  /* enough blocks of rows for threads to share the steps (gemm.c's
                                  ** blocked_shared: checked below), each on one thread and on two */
                                  {1100, 40, 160}, {1100, 40, 160}, {1100, 16, 800}, {1100, 16, 800}};
  /* The few-row path (M <= 32 against B^T): K past one slice and not. */
  static const int few[][3] = {{16, 100, 3072}, {5, 64, 1537}, {32, 200, 800}, {9, 50, 769}, {1, 40, 300},
                               {24, 130, 2304}};
  /* The 1100-row shapes are there to take the shared path: they must, at every level. */
  const GemmKernels *k = isa >= CPU_ISA_AVX512 ? &gemm_kernels_avx512 : &gemm_kernels_avx2;
  if (!gemm_shared_steps())
    check_skip(level_name(isa, "shapes_take_the_shared_path"), "MASKD_GEMM_SHARE=fixed: no thread shares steps");
  else
    check(gemm_share_rows(1100, k->mc, 2), level_name(isa, "shapes_take_the_shared_path"),
          "1100 rows in blocks of %d make too few blocks for 2 threads to share", k->mc);
  int runs = 0;
  int bad = products_differ(shapes, sizeof shapes / sizeof shapes[0], 0, 1000, product_and_sequence, &runs) +
            products_differ(few, sizeof few / sizeof few[0], 1, 2000, product_and_sequence, &runs);
  check(bad == 0, level_name(isa, "is_one_fma_sequence"), "%d of %d products differ in some bit from the sequence",
        bad, runs);
}

/* The product at avx2, and at avx512. */
static void avx2_and_avx512(int kind, int ta, int tb, int M, int N, int K, float alpha, float beta, int pad,
                            int threads, uint64_t seed, float *a, float *b) {
  Err err;
  cpu_isa_select(CPU_ISA_AVX2, &err);
  bits_product(kind, ta, tb, M, N, K, alpha, beta, pad, threads, seed, a);
  cpu_isa_select(CPU_ISA_AVX512, &err);
  bits_product(kind, ta, tb, M, N, K, alpha, beta, pad, threads, seed, b);
}

/* The AVX2 and the AVX-512 kernels give the same bits (gemm_kernels.h): the
** same products at both levels, compared byte for byte. */
static void levels_agree(void) {
  static const int shapes[][3] = {{1, 1, 1},     {13, 33, 257},  {6, 16, 768},  {7, 17, 769},  {121, 96, 600},
                                  {37, 5, 900},  {95, 47, 2000}, {300, 40, 17}, {7, 19, 0},    {40, 4200, 30},
                                  {1, 40, 300},  {5, 64, 77},    {9, 50, 1001}, {17, 90, 64},  {24, 100, 31},
                                  {31, 140, 800}, {32, 200, 1600}, {250, 250, 250}};
  int runs = 0, bad = products_differ(shapes, sizeof shapes / sizeof shapes[0], 0, 1, avx2_and_avx512, &runs);
  check(bad == 0, "gemm_avx2_matches_avx512_bits", "%d of %d products differ in some bit", bad, runs);
}

int main(void) {
  sanitized = getenv("MASKD_ASAN") != NULL;
  static const CpuIsa levels[] = {CPU_ISA_GENERIC, CPU_ISA_AVX2, CPU_ISA_AVX512};
  for (size_t l = 0; l < sizeof levels / sizeof levels[0]; l++) {
    Err err = {0};
    if (cpu_isa_select(levels[l], &err) != 0) {
      for (size_t c = 0; c < sizeof level_checks / sizeof level_checks[0]; c++)
        check_skip(level_name(levels[l], level_checks[c]), err.msg);
      check_skip(level_name(levels[l], "is_one_fma_sequence"), err.msg);
      continue;
    }
    level_checks_run(levels[l]);
    if (levels[l] != CPU_ISA_GENERIC) sequence_checks_run(levels[l]);
  }
  if (cpu_isa_best() >= CPU_ISA_AVX512) levels_agree();
  else check_skip("gemm_avx2_matches_avx512_bits", "this CPU lacks AVX-512: one kernel level, nothing to compare");
  return check_exit();
}
