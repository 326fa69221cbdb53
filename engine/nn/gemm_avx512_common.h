/* What the AVX-512 product kernels share (gemm_avx512.c on floats,
** gemm_bf16_avx512bf16.c on pairs of bf16): lane masks, the 16x16 transpose of
** 32-bit lanes they pack with, the GELU epilogues of the blocked tile and the
** few-row product's last step.
** Include only from files compiled for x86-64-v4. */
#ifndef MASKD_GEMM_AVX512_COMMON_H
#define MASKD_GEMM_AVX512_COMMON_H

#include "engine/nn/fastmath.h"
#include "engine/nn/gemm_kernels.h"

#include <immintrin.h>

static inline __mmask16 lanes(int n) { return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1); }

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

/* The end of a peak loop (fma_loop, dot_loop): the 24 chains summed and stored
** through a volatile, so that the compiler keeps the loop. */
static inline void peak_loop_keep(const __m512 acc[24]) {
  __m512 s = acc[0];
  for (int i = 1; i < 24; i++) s = _mm512_add_ps(s, acc[i]);
  float out[16];
  _mm512_storeu_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
}

/* GELU of the n <= 32 values v into dst (masked to n). */
static inline void gelu_store(float *dst, __m512 v0, __m512 v1, __mmask16 m0, __mmask16 m1) {
  float x[32] __attribute__((aligned(64))), y[32] __attribute__((aligned(64)));
  _mm512_store_ps(x, v0);
  _mm512_store_ps(x + 16, v1);
#pragma omp simd
  for (int j = 0; j < 32; j++) y[j] = fast_gelu(x[j]);
  _mm512_mask_storeu_ps(dst, m0, _mm512_load_ps(y));
  _mm512_mask_storeu_ps(dst + 16, m1, _mm512_load_ps(y + 16));
}

/* v0, v1 times GELU' of the 32 values at p, those outside masks m0, m1 read as 0 (their lanes are never stored). */
static inline void gelu_grad_mul(__m512 *v0, __m512 *v1, const float *p, __mmask16 m0, __mmask16 m1) {
  float x[32] __attribute__((aligned(64))), y[32] __attribute__((aligned(64)));
  _mm512_store_ps(x, _mm512_maskz_loadu_ps(m0, p));
  _mm512_store_ps(x + 16, _mm512_maskz_loadu_ps(m1, p + 16));
#pragma omp simd
  for (int j = 0; j < 32; j++) y[j] = fast_gelu_grad(x[j]);
  *v0 = _mm512_mul_ps(*v0, _mm512_load_ps(y));
  *v1 = _mm512_mul_ps(*v1, _mm512_load_ps(y + 16));
}

/* The blocked tile's epilogue (its order of operations decides the bits; the
** bf16 emulation repeats it, gemm_bf16_tile_store_row): rows i < mr of acc
** (12 x 32, nr columns kept) into C. first: C = alpha acc + beta C + bias (C not
** read when beta == 0; bias NULL = none); otherwise C += alpha acc. last, with
** g: g (same ldc) = GELU(C), C not stored when g == c; with gp: C times GELU'(gp). */
static inline void blk_store(__m512 acc[12][2], float *c, int ldc, float alpha, float beta, const float *bias,
                             float *g, const float *gp, int first, int last, int mr, int nr) {
  __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
  __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(first ? beta : 1.0f);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (first && bias) { bias0 = _mm512_maskz_loadu_ps(m0, bias); bias1 = _mm512_maskz_loadu_ps(m1, bias + 16); }
  int read_c = !first || beta != 0.0f, act = last && g, keep_c = !act || g != c, grad = last && gp;
#pragma GCC unroll 12
  for (int i = 0; i < 12; i++) {
    if (i >= mr) break;
    float *ci = c + (size_t)i * ldc;
    __m512 r0 = _mm512_fmadd_ps(va, acc[i][0], bias0), r1 = _mm512_fmadd_ps(va, acc[i][1], bias1);
    if (read_c) {
      r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), r0);
      r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), r1);
    }
    if (grad) gelu_grad_mul(&r0, &r1, gp + (size_t)i * ldc, m0, m1);
    if (keep_c) {
      _mm512_mask_storeu_ps(ci, m0, r0);
      _mm512_mask_storeu_ps(ci + 16, m1, r1);
    }
    if (act) gelu_store(g + (size_t)i * ldc, r0, r1, m0, m1);
  }
}

/* gemm_few_rows_store (gemm_kernels.h), operation for operation and so bit for
** bit (alpha tile, plus beta C or 0, plus the bias or 0, each rounded; GELU by
** fast_gelu), in vectors: the tile's nr <= 16 rows of B by 16 rows of A at a
** time, transposed into 16 rows of C at columns j0 .. j0 + nr. The scalar loop
** it replaces was a tenth of a 16 x 3072 x 768 product at avx2 (gemm_avx2_common.h's
** few_rows_store_avx2 does the same there). */
static inline void few_rows_store_avx512(const float (*tile)[GEMM_FEW_ROWS_MAX], int M, int nr, int j0, float alpha,
                                         float beta, const float *bias, float *C, float *G, int ldc) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), zero = _mm512_setzero_ps();
  __mmask16 m = lanes(nr);
  __m512 vbias = bias ? _mm512_maskz_loadu_ps(m, bias + j0) : zero;
  for (int t0 = 0; t0 < M; t0 += 16) {
    __m512 r[16];   /* r[c]: row t0 + c of C at columns j0 .. j0 + nr (after the transpose) */
    for (int i = 0; i < 16; i++) r[i] = i < nr ? _mm512_load_ps(tile[i] + t0) : zero;
    transpose16(r);
    for (int c = 0; c < 16 && t0 + c < M; c++) {
      float *ct = C + (size_t)(t0 + c) * ldc + j0;
      __m512 v = _mm512_mul_ps(va, r[c]);
      v = _mm512_add_ps(v, beta != 0.0f ? _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, ct)) : zero);
      v = _mm512_add_ps(v, vbias);
      if (G) {
        float x[16] __attribute__((aligned(64))), y[16] __attribute__((aligned(64)));
        _mm512_store_ps(x, v);
#pragma omp simd
        for (int j = 0; j < 16; j++) y[j] = fast_gelu(x[j]);
        _mm512_mask_storeu_ps(G + (size_t)(t0 + c) * ldc + j0, m, _mm512_load_ps(y));
      }
      if (!G || G != C) _mm512_mask_storeu_ps(ct, m, v);
    }
  }
}

#endif
