/* What the AVX2 product kernels share (gemm_avx2.c on floats,
** gemm_bf16_emu_avx2.c's few-row product on bf16 pairs widened to floats): lane
** masks, the 8x8 transpose of 32-bit lanes, and the few-row product's last step
** in vectors. Include only from files compiled for x86-64-v3. */
#ifndef MASKD_GEMM_AVX2_COMMON_H
#define MASKD_GEMM_AVX2_COMMON_H

#include "engine/nn/fastmath.h"
#include "engine/nn/gemm_kernels.h"

#include <immintrin.h>
#include <stdint.h>

/* Integer lane masks for _mm256_maskload_ps / _mm256_maskstore_ps (AVX2 has no
** mask registers): lanes(n) enables the first n of 8 lanes, n clamped to 0..8. */
static const int32_t lane_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline __m256i lanes(int n) {
  n = n < 0 ? 0 : n > 8 ? 8 : n;
  return _mm256_loadu_si256((const __m256i *)(lane_table + 8 - n));
}

/* Transposes the 8x8 block held in r (r[i] = row i) in place. */
static inline void transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  /* u[4g + c], 128-bit lane L, holds column 4L + c of rows 4g..4g+3. */
  for (int c = 0; c < 4; c++) {
    r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
  }
}

/* The 8x8 block at src (lds apart) with rows past `rows` and columns past
** `cols` (both <= 8) read as zero, transposed into r. */
static inline void block_transposed(__m256 r[8], const float *src, int lds, int rows, int cols) {
  if (cols == 8)
    for (int i = 0; i < 8; i++) r[i] = i < rows ? _mm256_loadu_ps(src + (size_t)i * lds) : _mm256_setzero_ps();
  else {
    __m256i cm = lanes(cols);
    for (int i = 0; i < 8; i++) r[i] = i < rows ? _mm256_maskload_ps(src + (size_t)i * lds, cm) : _mm256_setzero_ps();
  }
  transpose8(r);
}

/* block_transposed for callers that walk along the rows, up to 8 streams at once
** (the packings): each row's line 48 floats ahead is asked for here, as
** gemm_avx512.c's transpose_block does, and for the same reason. */
static inline void load_transposed(__m256 r[8], const float *src, int lds, int rows, int cols) {
  for (int i = 0; i < rows; i++) _mm_prefetch((const char *)(src + (size_t)i * lds + 48), _MM_HINT_T0);
  block_transposed(r, src, lds, rows, cols);
}

/* gemm_few_rows_store (gemm_kernels.h), operation for operation and so bit for
** bit (alpha tile, plus beta C or 0, plus the bias or 0, each rounded; GELU as
** gemm_avx2.c's tile takes it), in vectors: 8 x 8 blocks of the tile (rows of B
** by rows of A) transposed into 8 columns of 8 rows of C. The scalar loop was
** a tenth of a 16 x 3072 x 768 product from memory (2 threads). */
static inline void few_rows_store_avx2(const float (*tile)[GEMM_FEW_ROWS_MAX], int M, int nr, int j0, float alpha,
                                       float beta, const float *bias, float *C, float *G, int ldc) {
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta), zero = _mm256_setzero_ps();
  for (int i0 = 0; i0 < nr; i0 += 8) {
    int ni = nr - i0 < 8 ? nr - i0 : 8;
    __m256i m = lanes(ni);
    __m256 vbias = bias ? _mm256_maskload_ps(bias + j0 + i0, m) : zero;
    for (int t0 = 0; t0 < M; t0 += 8) {
      __m256 r[8];   /* r[c]: row t0 + c of C at columns j0 + i0 .. */
      block_transposed(r, tile[i0] + t0, GEMM_FEW_ROWS_MAX, ni, M - t0 < 8 ? M - t0 : 8);   /* in L1: no prefetch */
      for (int c = 0; c < 8 && t0 + c < M; c++) {
        float *ct = C + (size_t)(t0 + c) * ldc + j0 + i0;
        __m256 v = _mm256_mul_ps(va, r[c]);
        v = _mm256_add_ps(v, beta != 0.0f ? _mm256_mul_ps(vb, _mm256_maskload_ps(ct, m)) : zero);
        v = _mm256_add_ps(v, vbias);
        if (G) {
          float x[8] __attribute__((aligned(32))), y[8] __attribute__((aligned(32)));
          _mm256_store_ps(x, v);
#pragma omp simd
          for (int j = 0; j < 8; j++) y[j] = fast_gelu(x[j]);
          _mm256_maskstore_ps(G + (size_t)(t0 + c) * ldc + j0 + i0, m, _mm256_load_ps(y));
        }
        if (!G || G != C) _mm256_maskstore_ps(ct, m, v);
      }
    }
  }
}

#endif
