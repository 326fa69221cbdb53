/* The bf16 product's kernels for AVX512-BF16 (x86-64-v4 + AVX512_BF16; this file
** is compiled for that level alone and runs only where cpu_isa() says so): see
** gemm_bf16_kernels.h for the arithmetic, which vdpbf16ps performs one pair of
** K per lane, twice the multiply-adds of an fp32 FMA in the same slot.
**
** The layouts are the fp32 kernels' (gemm_avx512.c) with a pair of bf16 where
** those hold a float: a 32-bit lane holds op(X)[r][2q] (low half) and
** op(X)[r][2q + 1] (high half). Rows of X along K are converted 32 floats at a
** time (vcvtne2ps2bf16: the rounding of bf16.h, bit for bit) into 16 pairs and
** transposed as 16 x 16 32-bit lanes, as the fp32 kernels transpose floats. */
#include "engine/nn/gemm_bf16_kernels.h"

#include "engine/core/bf16.h"
#include "engine/nn/gemm_avx512_common.h"

#include <immintrin.h>
#include <string.h>

enum { MR = 12, NR = 32, MC = 96, NC = 2048 };

static inline __mmask32 lanes32(int n) { return n >= 32 ? 0xFFFFFFFFu : n <= 0 ? 0 : (__mmask32)((1u << n) - 1); }

/* rows (<= 16) rows of src (lds apart), each cols (<= 32) elements along K from
** src (float, or bf16 when src16), as pairs: dst[c * ldd + i] = pair c of row i
** for c < (cols + 1) / 2, lanes rows..width-1 zero (width <= 16). */
static inline void pairs_transposed(uint32_t *dst, int ldd, int width, const float *src, const uint16_t *src16,
                                    int lds, int rows, int cols) {
  __m512 r[16];
  for (int i = 0; i < 16; i++) {
    if (i >= rows) { r[i] = _mm512_setzero_ps(); continue; }
    if (src16) {
      r[i] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(lanes32(cols), src16 + (size_t)i * lds));
    } else {
      const float *s = src + (size_t)i * lds;
      _mm_prefetch((const char *)(s + 64), _MM_HINT_T0);
      __m512 lo = _mm512_maskz_loadu_ps(lanes(cols), s), hi = _mm512_maskz_loadu_ps(lanes(cols - 16), s + 16);
      r[i] = _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
  transpose16(r);
  __mmask16 wm = lanes(width);
  for (int c = 0; c < (cols + 1) / 2; c++) _mm512_mask_storeu_ps((float *)(dst + (size_t)c * ldd), wm, r[c]);
}

/* 16 pairs from two rows of 16 floats (masked to n): lane j = (even[j], odd[j]). */
static inline __m512i pair_rows(const float *even, const float *odd, int n) {
  __mmask16 m = lanes(n);
  __m512i e = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, even)));
  __m512i o = odd ? _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, odd)))
                  : _mm512_setzero_si512();
  return _mm512_or_si512(e, _mm512_slli_epi32(o, 16));
}

/* Packs the mc x kc block of op(A) at (i0, p0): MR-row panels, panel q at
** dst + q MR 2 kp, its lane [p MR + i] the pair p of row q MR + i. */
static void pack_a(uint16_t *dst16, const float *A, int lda, int trans_a, int i0, int mc, int p0, int kc) {
  uint32_t *dst = (uint32_t *)dst16;
  int kp = (kc + 1) / 2;
  if (!trans_a) {
    for (int ir = 0; ir < mc; ir += MR)
      for (int p = 0; p < kc; p += 32)
        pairs_transposed(dst + (size_t)ir * kp + (size_t)p / 2 * MR, MR, MR, A + (size_t)(i0 + ir) * lda + p0 + p,
                         NULL, lda, mc - ir < MR ? mc - ir : MR, kc - p < 32 ? kc - p : 32);
  } else {   /* rows lda apart, a few lines of each: the pair 4 ahead asked for, as gemm_avx512.c's pack_a does */
    for (int q = 0; q < kp; q++) {
      const float *even = A + (size_t)(p0 + 2 * q) * lda + i0, *odd = 2 * q + 1 < kc ? even + lda : NULL;
      if (2 * q + 9 < kc)
        for (int j = 0; j < mc; j += 16) {
          _mm_prefetch((const char *)(even + (size_t)8 * lda + j), _MM_HINT_T0);
          _mm_prefetch((const char *)(even + (size_t)9 * lda + j), _MM_HINT_T0);
        }
      for (int ir = 0; ir < mc; ir += MR) {
        int n = mc - ir < MR ? mc - ir : MR;
        _mm512_mask_storeu_epi32(dst + (size_t)ir * kp + (size_t)q * MR, lanes(MR),
                                 pair_rows(even + ir, odd ? odd + ir : NULL, n));
      }
    }
  }
}

/* Packs the kc x nc block of op(B) at (p0, j0): NR-column panels, panel q at
** dst + q NR 2 kp, its lane [p NR + j] the pair p of column q NR + j. */
static void pack_b(uint16_t *dst16, const float *B, const uint16_t *B16, int ldb, int trans_b, int j0, int nc, int p0,
                   int kc) {
  uint32_t *dst = (uint32_t *)dst16;
  int kp = (kc + 1) / 2;
  if (trans_b) {
    for (int jr = 0; jr < nc; jr += NR)
      for (int h = 0; h < NR; h += 16) {
        int rows = nc - jr - h < 0 ? 0 : nc - jr - h > 16 ? 16 : nc - jr - h;
        size_t at = (size_t)(j0 + jr + h) * ldb + p0;
        for (int p = 0; p < kc; p += 32)
          pairs_transposed(dst + (size_t)jr * kp + (size_t)p / 2 * NR + h, NR, 16, B16 ? NULL : B + at + p,
                           B16 ? B16 + at + p : NULL, ldb, rows, kc - p < 32 ? kc - p : 32);
      }
  } else if (!B16) {
    /* Four pairs (8 rows of B) at a time, as gemm_avx512.c's pack_b: pair by pair,
    ** each row's pieces went to panels kp * 128 bytes apart, the same L1 set for
    ** every panel; four pairs fill 512 bytes of one panel before the next. */
    for (int q4 = 0; q4 < kp; q4 += 4)
      for (int jr = 0; jr < nc; jr += NR)
        for (int q = q4; q < q4 + 4 && q < kp; q++) {
          const float *even = B + (size_t)(p0 + 2 * q) * ldb + j0, *odd = 2 * q + 1 < kc ? even + ldb : NULL;
          for (int h = 0; h < NR; h += 16) {
            int n = nc - jr - h;
            _mm512_storeu_si512(dst + (size_t)jr * kp + (size_t)q * NR + h,
                                n > 0 ? pair_rows(even + jr + h, odd ? odd + jr + h : NULL, n) : _mm512_setzero_si512());
          }
        }
  } else {   /* bf16 B not transposed: no caller multiplies by one; element by element */
    for (int jr = 0; jr < nc; jr += NR)
      for (int q = 0; q < kp; q++)
        for (int j = 0; j < NR; j++) {
          int k = p0 + 2 * q, col = j0 + jr + j, in = jr + j < nc;
          uint32_t lo = in ? B16[(size_t)k * ldb + col] : 0, hi = in && 2 * q + 1 < kc ? B16[(size_t)(k + 1) * ldb + col] : 0;
          dst[(size_t)jr * kp + (size_t)q * NR + j] = lo | hi << 16;
        }
  }
}

static void tile(int kp, const uint16_t *a16, const uint16_t *b16, const uint16_t *ahead, float *c, int ldc,
                 float alpha, float beta, const float *bias, float *g, const float *gp, int first, int last, int mr,
                 int nr) {
  (void)ahead;   /* not yet measured with this tile, which runs where vdpbf16ps is the faster (Zen 4 and 5) */
  const uint32_t *a = (const uint32_t *)a16;
  const __m512i *b = (const __m512i *)b16;
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  gemm_prefetch_tile_rows(c, (size_t)ldc, mr, 32);   /* C's lines and GELU's input's, for the epilogue */
  if (last && gp) gemm_prefetch_tile_rows(gp, (size_t)ldc, mr, 32);
  for (int p = 0; p < kp; p++) {
    __m512bh b0 = (__m512bh)_mm512_load_si512(b), b1 = (__m512bh)_mm512_load_si512(b + 1);
#pragma GCC unroll 12
    for (int i = 0; i < MR; i++) {
      __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], ai, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], ai, b1);
    }
    a += MR;
    b += 2;
  }
  blk_store(acc, c, ldc, alpha, beta, bias, g, gp, first, last, mr, nr);
}

/* The few-row product: xt holds op(A)^T as pairs, (K + 1) / 2 rows of 16 (M <= 16)
** or 32 lanes; each step broadcasts one pair from each of 12 rows of B (read in
** place: 12 sequential streams) against them, as gemm_avx512.c's skinny tile. */
static size_t few_rows_packed_size(int M, int K) { return (size_t)(K + 1) / 2 * 2 * (M <= 16 ? 16 : 32); }

static void few_rows_pack(uint16_t *xt16, const float *A, int lda, int M, int K) {
  uint32_t *xt = (uint32_t *)xt16;
  int w = M <= 16 ? 16 : 32;
  for (int h = 0; h < w; h += 16)
    for (int k = 0; k < K; k += 32)
      pairs_transposed(xt + (size_t)k / 2 * w + h, w, 16, A + (size_t)h * lda + k, NULL, lda,
                       M - h < 16 ? M - h : 16, K - k < 32 ? K - k : 32);
}

static inline uint32_t load_pair(const uint16_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline void skinny_tile(int NV, int K, const uint32_t *xt, const uint16_t *B, int ldb, int j0, int nr,
                               int n_total, float alpha, float beta, const float *bias, float *C, float *G, int ldc,
                               int M) {
  enum { ROWS = GEMM_FEW_ROWS_UNIT };
  __m512 acc[ROWS][2];
  const uint16_t *w[ROWS], *next[ROWS];
#pragma GCC unroll 12
  for (int i = 0; i < ROWS; i++) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    w[i] = B + (size_t)(j0 + (i < nr ? i : 0)) * ldb;   /* rows past the edge repeat row j0; discarded */
    next[i] = B + (size_t)(j0 + ROWS + i < n_total ? j0 + ROWS + i : j0) * ldb;
  }
  int kfull = K / 2;
  for (int p = 0; p < kfull; p++) {
    __m512bh x0 = (__m512bh)_mm512_load_si512(xt + (size_t)p * 16 * NV);
    __m512bh x1 = NV > 1 ? (__m512bh)_mm512_load_si512(xt + (size_t)p * 32 + 16) : x0;
    if ((p & 15) == 0) {   /* a line of each row per 16 pairs: the next lines into L1, the next tile's into L2 */
      for (int i = 0; i < ROWS; i++) _mm_prefetch((const char *)(w[i] + 2 * p + 256), _MM_HINT_T0);
      for (int i = 0; i < ROWS; i++) _mm_prefetch((const char *)(next[i] + 2 * p), _MM_HINT_T1);
    }
#pragma GCC unroll 12
    for (int i = 0; i < ROWS; i++) {
      __m512bh wi = (__m512bh)_mm512_set1_epi32((int)load_pair(w[i] + 2 * p));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x0, wi);
      if (NV > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x1, wi);
    }
  }
  if (K & 1) {   /* the last element alone, paired with zero */
    __m512bh x0 = (__m512bh)_mm512_load_si512(xt + (size_t)kfull * 16 * NV);
    __m512bh x1 = NV > 1 ? (__m512bh)_mm512_load_si512(xt + (size_t)kfull * 32 + 16) : x0;
    for (int i = 0; i < ROWS; i++) {
      __m512bh wi = (__m512bh)_mm512_set1_epi32((int)w[i][K - 1]);
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], x0, wi);
      if (NV > 1) acc[i][1] = _mm512_dpbf16_ps(acc[i][1], x1, wi);
    }
  }
  float out[ROWS][GEMM_FEW_ROWS_MAX] __attribute__((aligned(64)));
#pragma GCC unroll 12
  for (int i = 0; i < ROWS; i++) {
    _mm512_store_ps(out[i], acc[i][0]);
    if (NV > 1) _mm512_store_ps(out[i] + 16, acc[i][1]);
  }
  few_rows_store_avx512((const float (*)[GEMM_FEW_ROWS_MAX])out, M, nr, j0, alpha, beta, bias, C, G, ldc);
}

static void few_rows_range(int M, int K, const uint16_t *xt, const uint16_t *B, int ldb, int j0, int j1, float alpha,
                           float beta, const float *bias, float *C, float *G, int ldc) {
  for (int j = j0; j < j1; j += GEMM_FEW_ROWS_UNIT) {
    int nr = j1 - j < GEMM_FEW_ROWS_UNIT ? j1 - j : GEMM_FEW_ROWS_UNIT;
    if (M <= 16) skinny_tile(1, K, (const uint32_t *)xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M);
    else skinny_tile(2, K, (const uint32_t *)xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M);
  }
}

/* vdpbf16ps's rate in registers, as gemm_avx512.c's fma_loop measures the FMA's:
** 24 chains, more than the instruction's latency times its units on any CPU known. */
static double dot_loop(long iters) {
  __m512 acc[24];
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3F803F80), y = (__m512bh)_mm512_set1_epi32(0x33003300);
  for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  peak_loop_keep(acc);
  return 4.0 * 16 * 24 * (double)iters;
}

const GemmBf16Kernels gemm_bf16_kernels_avx512bf16 = {
  .backend = "avx512bf16-blocked",
  .mr = MR, .nr = NR, .mc = MC, .nc = NC,
  .pack_a = pack_a, .pack_b = pack_b, .tile = tile,
  .few_rows_packed_size = few_rows_packed_size, .few_rows_pack = few_rows_pack, .few_rows_range = few_rows_range,
  .dot_loop = dot_loop,
};
