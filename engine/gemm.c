/* The matrix product (see gemm.h): OpenBLAS's sgemm, except for the product
** of a Linear layer on very few rows, which has a kernel of its own here.
**
** Why that one case: with few rows (a fill-mask request of 16 tokens) the
** cost of x W^T is reading W from memory, about 340 MB per forward pass of a
** base model. OpenBLAS packs W into panels first, reading it and writing it
** again, and read W at 10-11 GB/s on this machine; reading W in place, 12 rows
** at a time, reaches 20-21 GB/s (`maskd bench sgemm --mnk 16,3072,768 --bt
** --copies 36`, BENCHMARKS.md). For larger products a 12x32 blocked
** kernel of our own was tried: it beat OpenBLAS on operands already in cache,
** but lost 5-10% inside the model, where they come from memory. */
#include "engine/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

static void blas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
              A, lda, B, ldb, beta, C, ldc);
}

#if defined(__AVX512F__)
#include <immintrin.h>

/* The packed A^T of the few-row kernel, per thread, grown on first need and
** kept, so that after the first pass of a shape no product allocates. It is
** held under a pthread key, not _Thread_local, so that it is freed when the
** thread ends: the server runs passes on short-lived connection threads. */
typedef struct XtBuf { float *p; size_t cap; } XtBuf;
static pthread_key_t xt_key;
static pthread_once_t xt_once = PTHREAD_ONCE_INIT;

static void xt_free(void *v) {
  XtBuf *b = v;
  free(b->p);
  free(b);
}
static void xt_key_make(void) { (void)pthread_key_create(&xt_key, xt_free); }

/* The calling thread's buffer of at least n floats (64-byte aligned), or NULL. */
static float *xt_buffer(size_t n) {
  pthread_once(&xt_once, xt_key_make);
  XtBuf *b = pthread_getspecific(xt_key);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return NULL;
    if (pthread_setspecific(xt_key, b)) { free(b); return NULL; }
  }
  if (n > b->cap) {
    free(b->p);
    b->p = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
    b->cap = b->p ? n : 0;
  }
  return b->p;
}

static inline __mmask16 lanes(int n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1); }

/* Transposes the 16x16 block held in r (r[i] = row i) in place. */
static inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  /* u[4g + c], 128-bit lane L, holds column 4L + c of rows 4g..4g+3. */
  for (int c = 0; c < 4; c++) {
    __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88), w0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
    __m512 v1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88), w1 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
    r[c] = _mm512_shuffle_f32x4(v0, v1, 0x88);
    r[8 + c] = _mm512_shuffle_f32x4(v0, v1, 0xDD);
    r[4 + c] = _mm512_shuffle_f32x4(w0, w1, 0x88);
    r[12 + c] = _mm512_shuffle_f32x4(w0, w1, 0xDD);
  }
}

/* dst[c * ldd + i] = src[i * lds + c] for i < rows, c < cols (both <= 16):
** the first `rows` lanes of `cols` destination rows; lanes rows..width-1 of
** each destination row are zeroed up to `width` (<= 16). */
static inline void transpose_block(float *dst, int ldd, int width, const float *src, int lds, int rows, int cols) {
  __m512 r[16];
  __mmask16 cm = lanes(cols);
  for (int i = 0; i < 16; i++) r[i] = i < rows ? _mm512_maskz_loadu_ps(cm, src + (size_t)i * lds) : _mm512_setzero_ps();
  transpose16(r);
  __mmask16 wm = lanes(width);
  for (int c = 0; c < cols; c++) _mm512_mask_storeu_ps(dst + (size_t)c * ldd, wm, r[c]);
}

/* Few rows times a transposed weight, C[M, N] = alpha A[M, K] B[N, K]^T (+ beta C)
** with M <= 16 * NV: a Linear layer on a short input. There the cost is
** reading B (the weights, from memory) and packing it would read it twice, so
** this reads B in place: op(A)^T is packed once (K x 16NV, zero-padded), and
** each step of the kernel broadcasts one element from each of 12 rows of B
** (12 sequential streams) against one row of A^T, so C^T's 12 x M tile sits
** in 12 * NV registers. Threads split N. */
#define SKINNY_ROWS 12

static inline void skinny_tile(int NV, int K, const float *xt, const float *B, int ldb, int j0, int nr, float alpha,
                               float beta, float *C, int ldc, int M) {
  __m512 acc[SKINNY_ROWS][2];
  const float *w[SKINNY_ROWS];
#pragma GCC unroll 12
  for (int i = 0; i < SKINNY_ROWS; i++) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    w[i] = B + (size_t)(j0 + (i < nr ? i : 0)) * ldb;  /* rows past the edge repeat row 0; discarded */
  }
  for (int k = 0; k < K; k++) {
    __m512 x0 = _mm512_load_ps(xt + (size_t)k * 16 * NV), x1 = NV > 1 ? _mm512_load_ps(xt + (size_t)k * 32 + 16) : x0;
    if ((k & 15) == 0)
      for (int i = 0; i < SKINNY_ROWS; i++) _mm_prefetch((const char *)(w[i] + k + 128), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int i = 0; i < SKINNY_ROWS; i++) {
      __m512 wi = _mm512_set1_ps(w[i][k]);
      acc[i][0] = _mm512_fmadd_ps(wi, x0, acc[i][0]);
      if (NV > 1) acc[i][1] = _mm512_fmadd_ps(wi, x1, acc[i][1]);
    }
  }
  float tile[SKINNY_ROWS][32] __attribute__((aligned(64)));
#pragma GCC unroll 12
  for (int i = 0; i < SKINNY_ROWS; i++) {
    _mm512_store_ps(tile[i], acc[i][0]);
    if (NV > 1) _mm512_store_ps(tile[i] + 16, acc[i][1]);
  }
  for (int t = 0; t < M; t++)
    for (int i = 0; i < nr; i++) {
      float *c = C + (size_t)t * ldc + j0 + i;
      *c = alpha * tile[i][t] + (beta != 0.0f ? beta * *c : 0.0f);
    }
}

static void skinny_range(int NV, int M, int K, const float *xt, const float *B, int ldb, int j0, int j1, float alpha,
                         float beta, float *C, int ldc) {
  for (int j = j0; j < j1; j += SKINNY_ROWS) {
    int nr = j1 - j < SKINNY_ROWS ? j1 - j : SKINNY_ROWS;
    if (NV == 1) skinny_tile(1, K, xt, B, ldb, j, nr, alpha, beta, C, ldc, M);
    else skinny_tile(2, K, xt, B, ldb, j, nr, alpha, beta, C, ldc, M);
  }
}

/* 1 when done; 0 when the packed A^T cannot be allocated. */
static int gemm_skinny_nt(int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                          float *C, int ldc, int nt) {
  int NV = M <= 16 ? 1 : 2, w = 16 * NV;
  float *xt = xt_buffer((size_t)K * w);
  if (!xt) return 0;
  for (int k = 0; k < K; k += 16)
    transpose_block(xt + (size_t)k * w, w, 16, A + k, lda, M < 16 ? M : 16, K - k < 16 ? K - k : 16);
  if (NV > 1)
    for (int k = 0; k < K; k += 16)
      transpose_block(xt + (size_t)k * w + 16, w, 16, A + (size_t)16 * lda + k, lda, M - 16, K - k < 16 ? K - k : 16);
  int units = (N + SKINNY_ROWS - 1) / SKINNY_ROWS;
  if (nt > units) nt = units;
  if (nt <= 1) {
    skinny_range(NV, M, K, xt, B, ldb, 0, N, alpha, beta, C, ldc);
    return 1;
  }
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int j0 = (int)((long)units * t / n) * SKINNY_ROWS, j1 = (int)((long)units * (t + 1) / n) * SKINNY_ROWS;
    skinny_range(NV, M, K, xt, B, ldb, j0, j1 < N ? j1 : N, alpha, beta, C, ldc);
  }
  return 1;
}

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (!trans_a && trans_b && M <= 32 && N >= 4 * M && K > 0 && alpha != 0.0f &&
      gemm_skinny_nt(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, omp_in_parallel() ? 1 : omp_get_max_threads()))
    return;
  blas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *gemm_backend(void) { return "openblas+avx512-few-rows"; }

#else /* no AVX-512: OpenBLAS for every product */

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc) {
  if (M <= 0 || N <= 0) return;
  blas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *gemm_backend(void) { return "openblas"; }

#endif
