/* The product's kernels for AVX-512 (x86-64-v4; this file is compiled for that
** level alone and runs only where cpu_isa() says so): see gemm_kernels.h for
** the contract, and gemm.c's opening comment for why each exists. The numbers
** behind each choice, with their commands, dates and commits, are in
** BENCHMARKS.md ("Measurements behind engine/nn/gemm.c"). */
#include "engine/nn/gemm_kernels.h"

#include "engine/nn/fastmath.h"

#include "engine/nn/gemm_avx512_common.h"

#include <immintrin.h>


/* dst[c * ldd + i] = src[i * lds + c] for i < rows, c < cols (both <= 16):
** the first `rows` lanes of `cols` destination rows; lanes rows..width-1 of
** each destination row are zeroed up to `width` (<= 16). Callers walk along
** the rows, up to 16 streams at once, more than the hardware prefetcher
** follows: each row's line 48 floats ahead is asked for here (packing a
** weight from memory is much faster so: BENCHMARKS.md, gemm.c's measurements). */
static inline void transpose_block(float *dst, int ldd, int width, const float *src, int lds, int rows, int cols) {
  __m512 r[16];
  __mmask16 cm = lanes(cols);
  for (int i = 0; i < rows; i++) _mm_prefetch((const char *)(src + (size_t)i * lds + 48), _MM_HINT_T0);
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
#define SKINNY_ROWS GEMM_FEW_ROWS_UNIT

static inline void skinny_tile(int NV, int K, const float *xt, const float *B, int ldb, int j0, int nr, int n_total,
                               float alpha, float beta, const float *bias, float *C, float *G, int ldc, int M) {
  __m512 acc[SKINNY_ROWS][2];
  const float *w[SKINNY_ROWS];
#pragma GCC unroll 12
  for (int i = 0; i < SKINNY_ROWS; i++) {
    acc[i][0] = acc[i][1] = _mm512_setzero_ps();
    w[i] = B + (size_t)(j0 + (i < nr ? i : 0)) * ldb;  /* rows past the edge repeat row 0; discarded */
  }
  /* The next tile's rows, asked for into L2 as this tile reads its own, one line
  ** of each row per line consumed: a tile's worth (36 KB at K 768) in flight,
  ** where the streams' own prefetch kept a few lines (16 x 3072 x 768 from
  ** memory: 155 -> 205 GFLOP/s on 2 threads; base fill-mask 1x16 18.4 -> 15.9 ms). */
  const float *next[SKINNY_ROWS];
  for (int i = 0; i < SKINNY_ROWS; i++)
    next[i] = B + (size_t)(j0 + SKINNY_ROWS + i < n_total ? j0 + SKINNY_ROWS + i : j0) * ldb;
  for (int k = 0; k < K; k++) {
    __m512 x0 = _mm512_load_ps(xt + (size_t)k * 16 * NV), x1 = NV > 1 ? _mm512_load_ps(xt + (size_t)k * 32 + 16) : x0;
    if ((k & 15) == 0) {
      for (int i = 0; i < SKINNY_ROWS; i++) _mm_prefetch((const char *)(w[i] + k + 128), _MM_HINT_T0);
      for (int i = 0; i < SKINNY_ROWS; i++) _mm_prefetch((const char *)(next[i] + k), _MM_HINT_T1);
    }
#pragma GCC unroll 12
    for (int i = 0; i < SKINNY_ROWS; i++) {
      __m512 wi = _mm512_set1_ps(w[i][k]);
      acc[i][0] = _mm512_fmadd_ps(wi, x0, acc[i][0]);
      if (NV > 1) acc[i][1] = _mm512_fmadd_ps(wi, x1, acc[i][1]);
    }
  }
  float tile[SKINNY_ROWS][GEMM_FEW_ROWS_MAX] __attribute__((aligned(64)));
#pragma GCC unroll 12
  for (int i = 0; i < SKINNY_ROWS; i++) {
    _mm512_store_ps(tile[i], acc[i][0]);
    if (NV > 1) _mm512_store_ps(tile[i] + 16, acc[i][1]);
  }
  few_rows_store_avx512((const float (*)[GEMM_FEW_ROWS_MAX])tile, M, nr, j0, alpha, beta, bias, C, G, ldc);
}

static void few_rows_range(int M, int K, const float *xt, const float *B, int ldb, int j0, int j1, float alpha,
                           float beta, const float *bias, float *C, float *G, int ldc) {
  int NV = M <= 16 ? 1 : 2;
  for (int j = j0; j < j1; j += SKINNY_ROWS) {
    int nr = j1 - j < SKINNY_ROWS ? j1 - j : SKINNY_ROWS;
    if (NV == 1) skinny_tile(1, K, xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M);
    else skinny_tile(2, K, xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M);
  }
}

/* op(A)^T, K x 16NV, zero-padded: 16 columns of it per vector. */
static size_t few_rows_packed_size(int M, int K) { return (size_t)K * (M <= 16 ? 16 : 32); }

static void few_rows_pack(float *xt, const float *A, int lda, int M, int K) {
  int w = M <= 16 ? 16 : 32;
  for (int k = 0; k < K; k += 16)
    transpose_block(xt + (size_t)k * w, w, 16, A + k, lda, M < 16 ? M : 16, K - k < 16 ? K - k : 16);
  if (w > 16)
    for (int k = 0; k < K; k += 16)
      transpose_block(xt + (size_t)k * w + 16, w, 16, A + (size_t)16 * lda + k, lda, M - 16, K - k < 16 ? K - k : 16);
}

/* The blocked product, C = alpha op(A) op(B) + beta C + bias, for everything
** else. op(B) is packed KC x NC at a time into NR-column panels, op(A) MC x KC
** at a time into MR-row panels, and the kernel computes an MR x NR tile of C
** in 24 registers, one rank-1 update per step of depth. KC is deep (768),
** deeper than L1 holds a B panel: the kernel streams both panels from L2,
** which keeps up, and every slice of K costs a read and a write of C, which
** comes from memory. In the model KC 768 beat KC 256 (MC 192 then) in both a
** base forward and a small training step (BENCHMARKS.md, gemm.c's
** measurements). Threads split M or N, each packing its own share of
** one operand and all of the other, so they never wait for one another
** inside a product. MC 132 (11 panels, a 405 KB block of A) beat 96 by 1.0-2.5%
** in the base model's products on an Intel Xeon (2 MB of L2; 192 the same, 264
** worse: BENCHMARKS.md, issue 14). GEMM_KC, BLK_MC and BLK_NC can be set when
** compiling, to measure. */
#ifndef BLK_MC
#define BLK_MC 132   /* a multiple of BLK_MR */
#endif
#ifndef BLK_NC
#define BLK_NC 2048
#endif
enum { BLK_MR = 12, BLK_NR = 32 };

/* A~ for the mc x kc block of op(A) at (i0, p0): MR-row panels, panel q at
** dst + q * MR * kc holding [p * MR + i] = op(A)[i0 + q MR + i][p0 + p], rows
** past mc zero. A transposed is read a whole row of the block at a time: the
** rows are lda apart, and reading 12 floats of each of kc rows per panel would
** walk a 4 KB stride through the same few L1 sets. */
static void pack_a(float *dst, const float *A, int lda, int trans_a, int i0, int mc, int p0, int kc) {
  if (trans_a) {
    for (int p = 0; p < kc; p++) {
      const float *src = A + (size_t)(p0 + p) * lda + i0;
      /* Rows lda apart, a few lines of each: ask for the row 8 ahead (a little
      ** faster on the weight gradients, `maskd bench sgemm --mnk 2304,768,1024
      ** --at`: BENCHMARKS.md, gemm.c's measurements). */
      if (p + 8 < kc)
        for (int j = 0; j < mc; j += 16) _mm_prefetch((const char *)(src + (size_t)8 * lda + j), _MM_HINT_T0);
      for (int ir = 0; ir < mc; ir += BLK_MR) {
        __mmask16 m = lanes(mc - ir < BLK_MR ? mc - ir : BLK_MR), full = lanes(BLK_MR);
        _mm512_mask_storeu_ps(dst + (size_t)ir * kc + (size_t)p * BLK_MR, full, _mm512_maskz_loadu_ps(m, src + ir));
      }
    }
  } else {
    for (int ir = 0; ir < mc; ir += BLK_MR) {
      const float *src = A + (size_t)(i0 + ir) * lda + p0;
      int mr = mc - ir < BLK_MR ? mc - ir : BLK_MR;
      for (int p = 0; p < kc; p += 16)
        transpose_block(dst + (size_t)ir * kc + (size_t)p * BLK_MR, BLK_MR, BLK_MR, src + p, lda, mr,
                        kc - p < 16 ? kc - p : 16);
    }
  }
}

/* B~ for the kc x nc block of op(B) at (p0, j0): NR-column panels, panel q at
** dst + q * NR * kc holding [p * NR + j] = op(B)[p0 + p][j0 + q NR + j],
** columns past nc zero. B not transposed is read 8 rows at a time: row by row,
** each row's 32-float pieces went to panels kc * 128 bytes apart, the same L1
** set for every panel; 8 rows fill 1 KB of one panel before the next. */
static void pack_b(float *dst, const float *B, int ldb, int trans_b, int j0, int nc, int p0, int kc) {
  if (!trans_b) {
    for (int p8 = 0; p8 < kc; p8 += 8)
      for (int jr = 0; jr < nc; jr += BLK_NR) {
        __mmask16 m0 = lanes(nc - jr), m1 = lanes(nc - jr - 16);
        for (int p = p8; p < p8 + 8 && p < kc; p++) {
          const float *src = B + (size_t)(p0 + p) * ldb + j0 + jr;
          float *d = dst + (size_t)jr * kc + (size_t)p * BLK_NR;
          _mm512_store_ps(d, _mm512_maskz_loadu_ps(m0, src));
          _mm512_store_ps(d + 16, _mm512_maskz_loadu_ps(m1, src + 16));
        }
      }
  } else {
    for (int jr = 0; jr < nc; jr += BLK_NR)
      for (int h = 0; h < BLK_NR; h += 16) {
        int rows = nc - jr - h < 0 ? 0 : nc - jr - h > 16 ? 16 : nc - jr - h;
        const float *src = B + (size_t)(j0 + jr + h) * ldb + p0;
        for (int p = 0; p < kc; p += 16)
          transpose_block(dst + (size_t)jr * kc + (size_t)p * BLK_NR + h, BLK_NR, 16, src + p, ldb, rows,
                          kc - p < 16 ? kc - p : 16);
      }
  }
}

/* The mr x nr tile of C at c from kc steps of packed panels a and b. first:
** C = alpha acc + beta C + bias (C not read when beta == 0; bias NULL = none);
** otherwise C += alpha acc. last, with g: g (same ldc) = GELU(C), and C is not
** stored at all when g == c; with gp: C is multiplied by GELU'(gp) (same ldc).
** ahead (kc x 4 floats, or NULL) is asked for into L2, 16 bytes a step. */
static void blk_kernel(int kc, const float *a, const float *b, const float *ahead, float *c, int ldc, float alpha,
                       float beta, const float *bias, float *g, const float *gp, int first, int last, int mr, int nr) {
  __m512 acc[BLK_MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < BLK_MR; i++) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  /* C's lines (and GELU's input's) are needed only after the kc steps: asking for them now hides the wait. */
  gemm_prefetch_tile_rows(c, (size_t)ldc, mr, BLK_NR);
  if (last && gp) gemm_prefetch_tile_rows(gp, (size_t)ldc, mr, BLK_NR);
  /* The panels come from L2 (B's is 96 KB at KC 768): each step asks for B's
  ** lines 16 steps ahead, and the loop is unrolled by 4. On an Intel Xeon (family
  ** 6 model 167) the base model's products went from 61-62% to 65-67% of the FMA
  ** peak (BENCHMARKS.md, issue 14); a shallower KC did nothing there. A's stream
  ** needs no asking (scripts/probe-tile-avx512.c). A block's first tile over a B
  ** panel read it from L3, half as slow again as the others there: the tiles
  ** before it ask for it into L2, a share each (`ahead`). */
  const char *l2 = (const char *)(ahead ? ahead : b);   /* without ahead: lines already read, a no-op */
#pragma GCC unroll 4
  for (int p = 0; p < kc; p++) {
    _mm_prefetch((const char *)(b + 16 * BLK_NR), _MM_HINT_T0);
    _mm_prefetch((const char *)(b + 16 * BLK_NR + 16), _MM_HINT_T0);
    _mm_prefetch(l2, _MM_HINT_T1);
    l2 += 16;
    __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 12
    for (int i = 0; i < BLK_MR; i++) {
      __m512 ai = _mm512_set1_ps(a[i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
    a += BLK_MR;
    b += BLK_NR;
  }
  blk_store(acc, c, ldc, alpha, beta, bias, g, gp, first, last, mr, nr);
}

/* The FMA peak's loop: 24 chains, more than the FMA units' latency times their
** count, so nothing but their throughput bounds it. */
static double fma_loop(long iters) {
  __m512 acc[24], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 24; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 24
    for (int i = 0; i < 24; i++) acc[i] = _mm512_fmadd_ps(acc[i], x, y);
  peak_loop_keep(acc);
  return 2.0 * 16 * 24 * (double)iters;
}

const GemmKernels gemm_kernels_avx512 = {
  .backend = "avx512-blocked", .backend_openblas = "openblas+avx512-few-rows",
  .mr = BLK_MR, .nr = BLK_NR, .mc = BLK_MC, .nc = BLK_NC,
  .pack_a = pack_a, .pack_b = pack_b, .tile = blk_kernel,
  .few_rows_packed_size = few_rows_packed_size, .few_rows_pack = few_rows_pack, .few_rows_range = few_rows_range,
  .fma_loop = fma_loop,
};
