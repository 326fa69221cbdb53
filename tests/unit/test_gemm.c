/* gemm_f32 against a double-precision product computed here, over shapes
** that hit every edge of the blocking (partial register tiles in M and N,
** K slices shorter than a block, several K slices), all four transpose
** combinations, alpha/beta, leading dimensions wider than the matrix, C
** holding NaN when beta is 0, one and several threads, and a call from
** inside a parallel region. */
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "engine/nn/gemm.h"
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

int main(void) {
  /* Shapes around the 12 x 32 tile, the 256-deep K slice and the 120-row A block,
  ** and few-row products (M <= 32, N >= 4M) that take the skinny path when B is transposed. */
  static const int dims[][3] = {{1, 1, 1},     {12, 32, 256}, {13, 33, 257}, {11, 31, 255}, {5, 70, 3},
                                {120, 64, 512}, {121, 96, 600}, {300, 40, 17}, {16, 768, 100}, {1, 100, 1000},
                                {250, 250, 250}, {64, 128, 64}, {128, 64, 128}, {37, 5, 900}, {2, 300, 33},
                                /* few rows by many columns: the skinny path */
                                {20, 200, 50}, {32, 500, 70}, {31, 130, 17}, {16, 97, 3072},
                                /* past the 192-row A block and the 2048-column B block of each thread */
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
  check(bad == 0, "gemm_matches_double_reference", "%d of %d products differ (worst relative error %.3g)", bad, runs,
        worst);
  printf("# gemm backend %s, %d products, worst relative error %.3g\n", gemm_backend(), runs, worst);

  static const int bdims[][3] = {{13, 33, 257}, {1, 70, 5}, {200, 300, 600}, {16, 300, 70}, {32, 130, 9}};
  int bias_bad = 0, bias_runs = 0;
  double bias_worst = 0;
  for (size_t d = 0; d < sizeof bdims / sizeof bdims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int variant = 0; variant < 3; variant++) {
        bias_runs++;
        bias_bad += !with_bias(t & 1, t >> 1, bdims[d][0], bdims[d][1], bdims[d][2], variant == 1, variant == 2 ? 0 : 2,
                               &bias_worst);
      }
  check(bias_bad == 0, "gemm_bias_and_gelu", "%d of %d products with bias and GELU differ (worst %.3g)", bias_bad,
        bias_runs, bias_worst);

  /* Past one slice of K too: the derivative is applied once, at the last. */
  static const int gdims[][3] = {{13, 33, 257}, {200, 300, 1600}, {16, 300, 70}, {32, 130, 9}, {150, 40, 800}};
  int grad_bad = 0, grad_runs = 0;
  double grad_worst = 0;
  for (size_t d = 0; d < sizeof gdims / sizeof gdims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int threads = 0; threads < 3; threads++) {
        grad_runs++;
        grad_bad += !with_gelu_grad(t & 1, t >> 1, gdims[d][0], gdims[d][1], gdims[d][2], threads, &grad_worst);
      }
  check(grad_bad == 0, "gemm_times_gelu_derivative", "%d of %d products times GELU' differ (worst %.3g)", grad_bad,
        grad_runs, grad_worst);

  /* Called from inside a parallel region, each thread runs its own product. */
  int inner_ok = 1;
#pragma omp parallel num_threads(2) reduction(& : inner_ok)
  {
    double w = 0;
    inner_ok = one(omp_get_thread_num(), 1, 70, 90, 300, 1.0f, 0.0f, 1, 1, &w);
  }
  check(inner_ok, "gemm_inside_parallel_region", "a product run inside a parallel region differs");

  int thread_ok = 0;
  pthread_t th;
  int started = pthread_create(&th, NULL, product_on_thread, &thread_ok) == 0;
  if (started) pthread_join(th, NULL);
  check(started && thread_ok, "gemm_on_a_thread_that_ends", "the product on a short-lived thread differs");

  /* K = 0 scales C by beta (zero when beta is 0, even over NaN). */
  float A[4] = {1, 2, 3, 4}, C[4] = {NAN, NAN, NAN, NAN}, D[4] = {1, 2, 3, 4};
  gemm_f32(0, 0, 2, 2, 0, 1.0f, A, 1, A, 2, 0.0f, C, 2, 1);
  gemm_f32(0, 0, 2, 2, 0, 1.0f, A, 1, A, 2, 2.0f, D, 2, 1);
  check(C[0] == 0 && C[3] == 0 && D[0] == 2 && D[3] == 8, "gemm_empty_k_scales_c", "C = %g %g, D = %g %g", C[0], C[3],
        D[0], D[3]);
  return check_exit();
}
