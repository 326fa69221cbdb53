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

#include "engine/nn/fastmath.h"

#include <stddef.h>

/* The blocked product's depth: K is cut into equal slices of at most this
** (rounded up to 16), each a pass over C. Shared so both levels cut K alike. */
#ifndef GEMM_KC
#define GEMM_KC 768
#endif
/* The slices of K every product cuts, at every level and on every path (blocked
** or few-row, float or bf16): equal, at most GEMM_KC, rounded up to 16 (so even, and
** a short last slice does not cost a pass over C for little work: 1024 = 512 + 512,
** not 768 + 256); the step between them. Where C is rounded between slices decides
** the bits, so this one definition keeps them the same everywhere. */
static inline int gemm_slice_step(int K) {
  int slices = (K + GEMM_KC - 1) / GEMM_KC, step = slices ? ((K + slices - 1) / slices + 15) & ~15 : GEMM_KC;
  return step > GEMM_KC ? GEMM_KC : step;
}
/* The few-row product takes M <= GEMM_FEW_ROWS_MAX rows of A against B^T; its
** threads split N in units of GEMM_FEW_ROWS_UNIT rows of B. */
enum { GEMM_FEW_ROWS_MAX = 32, GEMM_FEW_ROWS_UNIT = 12 };
/* The units of N. */
static inline int gemm_few_rows_units(int N) { return (N + GEMM_FEW_ROWS_UNIT - 1) / GEMM_FEW_ROWS_UNIT; }
/* Thread t of n's share [*j0, *j1) of N's columns, in whole units (the last ends at N). */
static inline void gemm_few_rows_share(int N, int t, int n, int *j0, int *j1) {
  int units = gemm_few_rows_units(N);
  *j0 = (int)((long)units * t / n) * GEMM_FEW_ROWS_UNIT;
  *j1 = (int)((long)units * (t + 1) / n) * GEMM_FEW_ROWS_UNIT;
  if (*j1 > N) *j1 = N;
}

typedef struct GemmKernels {
  const char *backend;            /* gemm_backend()'s name for this level: "avx512-blocked" */
  const char *backend_openblas;   /* ... under MASKD_GEMM=openblas: "openblas+avx512-few-rows" */
  /* The blocked product (gemm.c's loops over blocks of C and slices of K call these):
  ** tile of C mr x nr, block of op(A) mc rows, block of op(B) nc columns. */
  int mr, nr, mc, nc;
  /* Packs the mc x kc block of op(A) at (i0, p0) into mr-row panels (panel q at
  ** dst + q mr kc, [p mr + i]), rows past mc zero. */
  void (*pack_a)(float *dst, const float *A, int lda, int trans_a, int i0, int mc, int p0, int kc);
  /* Packs the kc x nc block of op(B) at (p0, j0) into nr-column panels (panel q at
  ** dst + q nr kc, [p nr + j]), columns past nc zero. */
  void (*pack_b)(float *dst, const float *B, int ldb, int trans_b, int j0, int nc, int p0, int kc);
  /* The mr x nr (at most) tile of C at c from kc steps of the panels a and b. first:
  ** C = alpha acc + beta C + bias (C not read when beta == 0; bias NULL = none), else
  ** C += alpha acc. last, with g: g (ldc too) = GELU(C), C not stored when g == c;
  ** with gp: C times GELU'(gp). ahead: kc x 4 floats that later tiles will read (a
  ** share of the next B panel), which the tile may ask for into L2 as it goes; NULL
  ** for none. Only the time depends on it. */
  void (*tile)(int kc, const float *a, const float *b, const float *ahead, float *c, int ldc, float alpha, float beta,
               const float *bias, float *g, const float *gp, int first, int last, int mr, int nr);
  /* Where a B panel of a whole slice (kc x nr floats) does not fit in L1, gemm.c
  ** walks the slice in parts of at most kc_part steps, each part over all the
  ** block's tiles, so that the part of the B panel stays in L1 while they read it;
  ** 0 (or tile_part NULL): the whole slice at once. Each element's multiply-adds
  ** stay one sequence: a tile's accumulators wait in acc between parts, stored
  ** and loaded as the floats they are, so the bits do not change. */
  int kc_part;
  /* tile over kp steps of the panels a and b (a part of a slice): accumulators
  ** from zero when start, else from acc (mr x nr floats, as the tile's vectors
  ** lie); when finish, tile's epilogue, else the accumulators stored to acc. */
  void (*tile_part)(int kp, const float *a, const float *b, float *acc, int start, int finish, float *c, int ldc,
                    float alpha, float beta, const float *bias, float *g, const float *gp, int first, int last, int mr,
                    int nr);
  /* The few-row product's packed A: floats needed for M x K. */
  size_t (*few_rows_packed_size)(int M, int K);
  /* Packs A[M, K] (M <= GEMM_FEW_ROWS_MAX) into xt, the layout few_rows_range reads. */
  void (*few_rows_pack)(float *xt, const float *A, int lda, int M, int K);
  /* Columns [j0, j1) of C[M, N] = alpha A B^T + beta C + bias, G = GELU(C) as
  ** the tile; j0 a multiple of GEMM_FEW_ROWS_UNIT. B is read in place. */
  void (*few_rows_range)(int M, int K, const float *xt, const float *B, int ldb, int j0, int j1, float alpha,
                         float beta, const float *bias, float *C, float *G, int ldc);
  /* iters steps of independent fused multiply-adds held in registers, as many
  ** chains as keep every FMA unit busy; returns the flops done (the caller times it). */
  double (*fma_loop)(long iters);
} GemmKernels;

extern const GemmKernels gemm_kernels_avx2, gemm_kernels_avx512;

/* The few-row product's last step, in one place because it decides the bits
** (the AVX2 and AVX-512 kernels run it in vectors, few_rows_store_avx2 and
** few_rows_store_avx512 in gemm_avx{2,512}_common.h, with the same operations
** in the same order; test_gemm.c's is_one_fma_sequence
** holds both to it): tile[i][t] holds row t of A times row j0 + i of B, for
** t < M and i < nr; C[t, j0 + i] = alpha tile + beta C (C not read when beta
** is 0) + bias, unfused (the build keeps fp-contract off), and G = GELU(C),
** C not stored when G == C. */
static inline void gemm_few_rows_store(const float (*tile)[GEMM_FEW_ROWS_MAX], int M, int nr, int j0, float alpha,
                                       float beta, const float *bias, float *C, float *G, int ldc) {
  for (int t = 0; t < M; t++)
    for (int i = 0; i < nr; i++) {
      size_t at = (size_t)t * ldc + j0 + i;
      float v = alpha * tile[i][t] + (beta != 0.0f ? beta * C[at] : 0.0f) + (bias ? bias[j0 + i] : 0.0f);
      if (G) G[at] = fast_gelu(v);
      if (!G || G != C) C[at] = v;
    }
}

/* Asks for the lines of rows [0, mr) of a tile, w floats each, rows ld apart, into
** L1 before its steps: C's, which the epilogue reads or writes, and with them the
** GELU input whose derivative the last slice multiplies in (gp), which nothing else
** brings: the base model's FFN backward waited on it there, 9% of that product in a
** training step on an Intel Xeon (BENCHMARKS.md, issue 14). Only the time depends on it. */
static inline void gemm_prefetch_tile_rows(const float *p, size_t ld, int mr, int w) {
  for (int i = 0; i < mr; i++) {
    __builtin_prefetch(p + (size_t)i * ld, 0, 3);
    __builtin_prefetch(p + (size_t)i * ld + w - 1, 0, 3);
  }
}

/* 1 when a blocked product's threads share its steps (gemm.c's blocked_shared, and
** gemm_bf16.c's), 0 under MASKD_GEMM_SHARE=fixed: a fixed share of C each, to measure. */
int gemm_shared_steps(void);
/* Whether nt threads share the steps of a product whose split falls on M rows in
** blocks of mc: where the rows make at least 4 blocks a thread, enough to even out. */
static inline int gemm_share_rows(int M, int mc, int nt) { return (M + mc - 1) / mc >= 4 * nt && gemm_shared_steps(); }

/* The calling thread's packing buffer `slot` of at least n floats (64-byte aligned),
** grown on first need and kept (freed when the thread ends); NULL when it cannot be had. */
enum { GEMM_BUF_XT, GEMM_BUF_A, GEMM_BUF_B, GEMM_BUF_ACC, GEMM_BUF_COUNT };
float *gemm_thread_buffer(int slot, size_t n);

#endif
