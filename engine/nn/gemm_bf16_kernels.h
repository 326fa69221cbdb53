/* The contract between gemm_bf16.c (the bf16 product's API and loops) and the
** kernels of one instruction-set level: gemm_bf16_avx512bf16.c (vdpbf16ps) and
** the float emulation, gemm_bf16_emu.inc, compiled once per level
** (gemm_bf16_emu_{generic,avx2,avx512}.c).
**
** The arithmetic every table performs, and so the bits every level gives:
** op(A) and op(B) are rounded to bfloat16 (bf16.h) as they are packed; K is
** taken in pairs (2q, 2q+1), a last odd element paired with zero; each element
** of C accumulates, pair after pair, acc = (acc + a[2q+1] b[2q+1]) + a[2q] b[2q]
** with each sum rounded to float: vdpbf16ps's order (Intel's definition; checked
** on the instruction by tests/unit/test_gemm_bf16.c). A bf16 x bf16 product is
** exact in float, so the emulation computes each step as one fmaf and gives the
** same bits, subnormal results aside (the instruction flushes them to zero).
** The blocked product's slices of K and its epilogue are gemm_bf16.c's and the
** float product's (gemm_kernels.h): alpha acc + bias, then + beta C, each one
** fused multiply-add. */
#ifndef MASKD_GEMM_BF16_KERNELS_H
#define MASKD_GEMM_BF16_KERNELS_H

#include "engine/nn/gemm_kernels.h"

#include <stddef.h>
#include <stdint.h>

typedef struct GemmBf16Kernels {
  const char *backend;   /* gemm_bf16_backend()'s name: "avx512bf16-blocked", "avx2-bf16-emulated" */
  /* The blocked product: tile mr x nr, blocks of op(A) mc rows and of op(B) nc columns. */
  int mr, nr, mc, nc;
  /* 1 when the blocked product's panels hold each bf16 value widened to a float
  ** (4 bytes an element, not 2: the float emulation, whose tile then loads them
  ** as the fp32 tile does); the packing buffers are sized for it. */
  int wide_panels;
  /* Packs the mc x kc block of op(A) at (i0, p0), rounded to bf16, into mr-row
  ** panels of (kc + 1) / 2 pairs (panel q at dst + q mr 2 kp elements); rows past
  ** mc and the odd element past kc are zero. The order within a panel, and the
  ** element (bf16, or a float with wide_panels), are the table's own. */
  void (*pack_a)(uint16_t *dst, const float *A, int lda, int trans_a, int i0, int mc, int p0, int kc);
  /* Packs the kc x nc block of op(B) at (p0, j0) into nr-column panels the same
  ** way; B is float (rounded here), or bf16 already when B16 != NULL (then B is unused). */
  void (*pack_b)(uint16_t *dst, const float *B, const uint16_t *B16, int ldb, int trans_b, int j0, int nc, int p0,
                 int kc);
  /* The mr x nr (at most) tile of C at c from kp pairs of the panels a and b;
  ** first / last, alpha, beta, bias, g, gp as GemmKernels.tile. ahead: 16 kp
  ** uint16s (32 bytes a pair) that later tiles will read, which the tile may ask
  ** for into L2 as it goes (GemmKernels.tile's ahead); NULL for none. */
  void (*tile)(int kp, const uint16_t *a, const uint16_t *b, const uint16_t *ahead, float *c, int ldc, float alpha,
               float beta, const float *bias, float *g, const float *gp, int first, int last, int mr, int nr);
  /* The few-row product, A[M, K] (M <= GEMM_FEW_ROWS_MAX) times a bf16 B[N, K]^T
  ** read in place: uint16s the packed A needs, its packing, and columns [j0, j1)
  ** of C = alpha A B^T + beta C + bias, G = GELU(C), as GemmKernels' few rows
  ** (the last step by gemm_few_rows_store). */
  size_t (*few_rows_packed_size)(int M, int K);
  void (*few_rows_pack)(uint16_t *xt, const float *A, int lda, int M, int K);
  void (*few_rows_range)(int M, int K, const uint16_t *xt, const uint16_t *B, int ldb, int j0, int j1, float alpha,
                         float beta, const float *bias, float *C, float *G, int ldc);
  /* iters steps of independent vdpbf16ps held in registers, as GemmKernels.fma_loop
  ** (flops counted two multiply-adds a lane); NULL in the emulation's tables. */
  double (*dot_loop)(long iters);
} GemmBf16Kernels;

extern const GemmBf16Kernels gemm_bf16_kernels_generic, gemm_bf16_kernels_avx2, gemm_bf16_kernels_avx512,
    gemm_bf16_kernels_avx512bf16;

/* The blocked tile's last step, shared by every table because it decides the
** bits: row i of the tile (acc, nr values) into C as GemmKernels.tile's epilogue,
** r = fmaf(alpha, acc, bias); with C read, r = fmaf(beta or 1, C, r); times
** GELU'(gp); C kept unless G == C; G = GELU(r). */
static inline void gemm_bf16_tile_store_row(const float *acc, int nr, float *ci, float alpha, float beta,
                                            const float *bias, float *gi, const float *gpi, int first, int last) {
  int read_c = !first || beta != 0.0f, act = last && gi, keep_c = !act || gi != ci;
  float vb = first ? beta : 1.0f;
  for (int j = 0; j < nr; j++) {
    float r = fmaf(alpha, acc[j], first && bias ? bias[j] : 0.0f);
    if (read_c) r = fmaf(vb, ci[j], r);
    if (last && gpi) r = r * fast_gelu_grad(gpi[j]);
    if (keep_c) ci[j] = r;
    if (act) gi[j] = fast_gelu(r);
  }
}

#endif
