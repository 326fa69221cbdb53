/* Single-precision matrix product for the model.
**
** C = alpha op(A) op(B) + beta C, row-major, op(X) = X or X^T: the contract of
** cblas_sgemm(CblasRowMajor, ...), plus a variant that adds a bias to every
** row and can apply GELU as it stores, and one that multiplies by GELU's
** derivative as it stores (the FFN's backward). On a CPU with AVX2 or AVX-512 the work is done
** by kernels of our own (gemm.c), elsewhere by OpenBLAS. Each call says how
** many threads it may use (threads, at least 1): outside a parallel region the
** product runs on up to that many, inside one on the calling thread alone; no
** process-wide setting is read or changed for it (OpenBLAS: see gemm.c). beta
** == 0 means C is written without being read (it may hold garbage). Results do
** not depend on the thread count. */
#ifndef MASKD_GEMM_H
#define MASKD_GEMM_H

#include <stdint.h>

/* C[M,N] = alpha op(A)[M,K] op(B)[K,N] + beta C; trans_a/trans_b nonzero = transposed. */
void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc, int threads);

/* C[M,N] = op(A)[M,K] op(B)[K,N] + bias[N] on every row (bias NULL = none), C not
** read; with G != NULL also G = GELU(C) (exact erf, ldc too), and when G == C
** only G is stored. */
void gemm_f32_bias(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                   const float *bias, float *C, float *G, int ldc, int threads);

/* C[M,N] = (op(A)[M,K] op(B)[K,N]) * GELU'(P) elementwise, P[M,N] with ldc too, C
** not read: the gradient at P of GELU(P), given op(A) op(B) the gradient at GELU(P). */
void gemm_f32_gelu_grad(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        const float *P, float *C, int ldc, int threads);

/* What gemm_f32 runs: "avx512-blocked" / "avx2-blocked", "openblas+avx512-few-rows" /
** "openblas+avx2-few-rows" (MASKD_GEMM=openblas) or "openblas". */
const char *gemm_backend(void);

/* The measured rate of fused multiply-adds in registers, GFLOP/s on `threads`
** threads (about 0.2 s): the bound a product is measured against, at the level
** whose kernels run (at the generic level, the best level the CPU has, which
** OpenBLAS then uses); 0 when the CPU has no FMA. */
double gemm_fma_peak(int threads);

/* The bf16 products (gemm_bf16.c), PyTorch autocast's arithmetic for a matrix
** product: op(A) and op(B) rounded to bfloat16 (engine/core/bf16.h), the products
** exact, the sums in float, C float; the arguments and the bias, GELU and
** GELU' variants as their float counterparts above. Every level gives the same
** bits: vdpbf16ps at avx512bf16, its float emulation below (gemm_bf16_kernels.h),
** so a run does not change its numbers with the CPU it runs on. */
void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc, int threads);
void gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                    const float *bias, float *C, float *G, int ldc, int threads);
void gemm_bf16_gelu_grad(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                         int ldb, const float *P, float *C, int ldc, int threads);
/* C[M,N] = A[M,K] W^T + bias, G = GELU(C), as gemm_bf16_bias, with W[N,K] (ldw) held
** in bfloat16: a Linear layer whose weights are kept in bf16 (serving). */
void gemm_bf16w_bias(int M, int N, int K, const float *A, int lda, const uint16_t *W, int ldw, const float *bias,
                     float *C, float *G, int ldc, int threads);
/* What the bf16 products run: "avx512bf16-blocked", "avx512-bf16-emulated",
** "avx512-bf16-emulated+avx512bf16-few-rows" (below), ... */
const char *gemm_bf16_backend(void);
/* Which kernels the blocked bf16 product runs at the avx512bf16 level (every
** choice gives the same bits): AUTO, the default, takes vdpbf16ps where
** gemm_bf16_dot_ratio() >= 1 and the avx512 float emulation elsewhere (the few-row
** product keeps vdpbf16ps); the others force one, for tests and measurements. */
typedef enum { GEMM_BF16_BLOCKED_AUTO, GEMM_BF16_BLOCKED_VDPBF16PS, GEMM_BF16_BLOCKED_EMULATED } GemmBf16Blocked;
void gemm_bf16_blocked_select(GemmBf16Blocked choice);
/* vdpbf16ps's multiply-add rate over the float FMA's on one thread, in registers,
** measured once (about a millisecond); 0 where the CPU lacks AVX512-BF16. */
double gemm_bf16_dot_ratio(void);
/* 1 when a bf16 product of M x N runs vdpbf16ps (weights_bf16: B^T held in bf16,
** gemm_bf16w_bias, whose few rows take their own product). */
int gemm_bf16_runs_vdpbf16ps(int M, int N, int weights_bf16);

#endif
