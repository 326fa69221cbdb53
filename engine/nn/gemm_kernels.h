/* The contract between gemm.c (the product's API, threads, OpenBLAS) and the
** kernels written for one instruction-set level (gemm_avx2.c, gemm_avx512.c),
** each compiled for its level alone (Makefile: a file's _avx2 / _avx512 suffix
** sets its -march). gemm.c picks the table of cpu_isa() at each call; the
** generic level has none and sends every product to OpenBLAS.
**
** Both tables compute every element of C as the same sequence of fused
** multiply-adds along K (in slices of the same depth, see GEMM_KC), so that the
** AVX2 and AVX-512 kernels give the same bits: a run does not change its numbers
** with the CPU's vector width. tests/unit/test_gemm.c checks it. */
#ifndef MASKD_GEMM_KERNELS_H
#define MASKD_GEMM_KERNELS_H

#include <stddef.h>

/* The blocked product's depth: K is cut into equal slices of at most this
** (rounded up to 16), each a pass over C. Shared so both levels cut K alike. */
#ifndef GEMM_KC
#define GEMM_KC 768
#endif
/* The few-row product takes M <= GEMM_FEW_ROWS_MAX rows of A against B^T; its
** threads split N in units of GEMM_FEW_ROWS_UNIT rows of B. */
enum { GEMM_FEW_ROWS_MAX = 32, GEMM_FEW_ROWS_UNIT = 12 };

typedef struct GemmKernels {
  const char *isa;   /* "avx2", "avx512" */
  int mr, nr;        /* the blocked kernel's tile of C: threads split M in mr rows or N in nr columns */
  /* C = alpha op(A) op(B) + beta C + bias on the calling thread, with G = GELU(C)
  ** (C not stored when G == C) or C *= GELU'(P) after the last slice of K; gemm.h's
  ** contract otherwise. 0, having written nothing, when its buffers cannot be had. */
  int (*blocked)(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, const float *bias, float *C, float *G, const float *P, int ldc);
  /* The few-row product's packed A: floats needed for M x K. */
  size_t (*few_rows_packed_size)(int M, int K);
  /* Packs A[M, K] (M <= GEMM_FEW_ROWS_MAX) into xt, the layout few_rows_range reads. */
  void (*few_rows_pack)(float *xt, const float *A, int lda, int M, int K);
  /* Columns [j0, j1) of C[M, N] = alpha A B^T + beta C + bias, G = GELU(C) as
  ** blocked(); j0 a multiple of GEMM_FEW_ROWS_UNIT. B is read in place. */
  void (*few_rows_range)(int M, int K, const float *xt, const float *B, int ldb, int j0, int j1, float alpha, float beta,
                         const float *bias, float *C, float *G, int ldc);
  /* iters steps of independent fused multiply-adds held in registers, as many
  ** chains as keep every FMA unit busy; returns the flops done (the caller times it). */
  double (*fma_loop)(long iters);
} GemmKernels;

extern const GemmKernels gemm_kernels_avx2, gemm_kernels_avx512;

/* The calling thread's packing buffer `slot` of at least n floats (64-byte aligned),
** grown on first need and kept (freed when the thread ends); NULL when it cannot be had. */
enum { GEMM_BUF_XT, GEMM_BUF_A, GEMM_BUF_B, GEMM_BUF_COUNT };
float *gemm_thread_buffer(int slot, size_t n);

#endif
