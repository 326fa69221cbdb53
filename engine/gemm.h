/* Single-precision matrix product for the model.
**
** C = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T: the contract of
** cblas_sgemm(CblasRowMajor, ...), which does the work, except for a Linear
** layer on few rows (A not transposed, B transposed, M <= 32), which on a CPU
** with AVX-512 runs a kernel that reads B in place instead of packing it (see
** gemm.c). That kernel uses omp_get_max_threads() threads outside a parallel
** region and the calling thread inside one. beta == 0 means C is written
** without being read (it may hold garbage). */
#ifndef MASKD_GEMM_H
#define MASKD_GEMM_H

/* C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C; trans_a/trans_b nonzero = transposed. */
void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc);

/* What gemm_f32 runs: "openblas+avx512-few-rows" or "openblas". */
const char *gemm_backend(void);

#endif
