/* The product's kernels for AVX2 + FMA (x86-64-v3; this file is compiled for
** that level alone and runs only where cpu_isa() says so): see gemm_kernels.h
** for the contract, and gemm.c's opening comment for why each exists. They are
** gemm_avx512.c's kernels at half the vector width and with 16 registers
** instead of 32, and compute every element of C by the same sequence of float
** operations (the same fused multiply-adds along K, in the same slices of K,
** the same epilogue), so that a run gives the same bits at either level:
** tests/unit/test_gemm.c compares the two bit for bit. */
#include "engine/nn/gemm_kernels.h"

#include "engine/nn/fastmath.h"
#include "engine/nn/gemm_avx2_common.h"

#include <immintrin.h>
#include <stdint.h>

/* dst[c * ldd + i] = src[i * lds + c] for i < 8, c < cols, rows past `rows` zero. */
static inline void transpose_block8(float *dst, int ldd, const float *src, int lds, int rows, int cols) {
  __m256 r[8];
  load_transposed(r, src, lds, rows, cols);
  for (int c = 0; c < cols; c++) _mm256_storeu_ps(dst + (size_t)c * ldd, r[c]);
}

/* Few rows times a transposed weight, C[M, N] = alpha A[M, K] B[N, K]^T (+ beta C)
** with M <= 8 * NV, read as gemm_avx512.c's skinny kernel reads it: B in place
** (packing it would read it twice), op(A)^T packed once (K x 8NV, zero-padded),
** each step broadcasting one element from each of R rows of B against one row
** of A^T. With 8-float vectors a row of A^T takes NV <= 4 registers, so a tile
** takes R = 12 / NV rows of B (12 accumulators of the 16 registers) and a unit
** of 12 rows is NV tiles. The tiles take turns along K, SKINNY_KB steps each
** (their accumulators wait in memory, exactly), so that all 12 rows of the unit
** stream from memory at once, as at avx512: tile after tile over the whole of
** K, 6 streams at a time read B at 5.6 GB/s instead of 8.8 (16 x 3072 x 768,
** --copies 36, one thread). */
#define SKINNY_ROWS GEMM_FEW_ROWS_UNIT
enum { SKINNY_KB = 64 };   /* 64 beat 128 and 256, and prefetching 256 ahead instead of one turn (16 x 3072 x 768) */

static inline void skinny_unit(int NV, int K, const float *xt, const float *B, int ldb, int j0, int nr, int n_total,
                               float alpha, float beta, const float *bias, float *C, float *G, int ldc, int M) {
  const int R = SKINNY_ROWS / NV;
  float tile[SKINNY_ROWS][GEMM_FEW_ROWS_MAX] __attribute__((aligned(32)));
  const float *w[SKINNY_ROWS];
  /* Rows past the edge repeat row 0; discarded. */
  for (int i = 0; i < SKINNY_ROWS; i++) w[i] = B + (size_t)(j0 + (i < nr ? i : 0)) * ldb;
  /* The next unit's rows, asked for into L2 as this unit reads its own (as gemm_avx512.c's
  ** skinny_tile); not when the rows lie a multiple of 4 KB apart (base's FFN down, 3072
  ** floats): every row's line at k then falls in one L1 set, and AMD's prefetcht1 fills L1
  ** too, so the next unit's lines evicted this unit's (16x768x3072 with B in L3, 2 threads:
  ** medians 0.68-0.97 ms without them, 0.82-0.97 with; BENCHMARKS.md, issue 14). */
  const float *next[SKINNY_ROWS];
  const int ask_next = ((size_t)ldb * sizeof(float)) % 4096 != 0;
  for (int i = 0; i < SKINNY_ROWS; i++)
    next[i] = B + (size_t)(j0 + SKINNY_ROWS + i < n_total ? j0 + SKINNY_ROWS + i : j0) * ldb;
  for (int k0 = 0; k0 < K; k0 += SKINNY_KB) {
    int k1 = K - k0 < SKINNY_KB ? K : k0 + SKINNY_KB;
    for (int s = 0; s < SKINNY_ROWS; s += R) {
      __m256 acc[SKINNY_ROWS][4];
      const float *const *ws = w + s;
#pragma GCC unroll 12
      for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) acc[i][v] = k0 ? _mm256_load_ps(tile[s + i] + 8 * v) : _mm256_setzero_ps();
      for (int k = k0; k < k1; k++) {
        const float *x = xt + (size_t)k * 8 * NV;
        if ((k & 15) == 0) {
          for (int i = 0; i < R; i++) _mm_prefetch((const char *)(ws[i] + k + SKINNY_KB), _MM_HINT_T0);
          if (ask_next)
            for (int i = 0; i < R; i++) _mm_prefetch((const char *)(next[s + i] + k), _MM_HINT_T1);
        }
#pragma GCC unroll 12
        for (int i = 0; i < R; i++) {
          __m256 wi = _mm256_broadcast_ss(ws[i] + k);
#pragma GCC unroll 4
          for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(wi, _mm256_load_ps(x + 8 * v), acc[i][v]);
        }
      }
#pragma GCC unroll 12
      for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < NV; v++) _mm256_store_ps(tile[s + i] + 8 * v, acc[i][v]);
    }
  }
  few_rows_store_avx2((const float (*)[GEMM_FEW_ROWS_MAX])tile, M, nr, j0, alpha, beta, bias, C, G, ldc);
}

static inline int few_rows_vectors(int M) { return (M + 7) / 8; }

static void few_rows_range(int M, int K, const float *xt, const float *B, int ldb, int j0, int j1, float alpha,
                           float beta, const float *bias, float *C, float *G, int ldc) {
  int NV = few_rows_vectors(M);
  for (int j = j0; j < j1; j += SKINNY_ROWS) {
    int nr = j1 - j < SKINNY_ROWS ? j1 - j : SKINNY_ROWS;
    /* NV spelled out, so that each instance keeps its accumulators in registers. */
    switch (NV) {
    case 1: skinny_unit(1, K, xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M); break;
    case 2: skinny_unit(2, K, xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M); break;
    case 3: skinny_unit(3, K, xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M); break;
    default: skinny_unit(4, K, xt, B, ldb, j, nr, j1, alpha, beta, bias, C, G, ldc, M); break;
    }
  }
}

/* op(A)^T, K x 8NV, zero-padded: 8 columns of it per vector. */
static size_t few_rows_packed_size(int M, int K) { return (size_t)K * 8 * few_rows_vectors(M); }

static void few_rows_pack(float *xt, const float *A, int lda, int M, int K) {
  int w = 8 * few_rows_vectors(M);
  for (int v = 0; 8 * v < M; v++)
    for (int k = 0; k < K; k += 8)
      transpose_block8(xt + (size_t)k * w + 8 * v, w, A + (size_t)8 * v * lda + k, lda, M - 8 * v < 8 ? M - 8 * v : 8,
                       K - k < 8 ? K - k : 8);
}

/* The blocked product, C = alpha op(A) op(B) + beta C + bias, for everything
** else: gemm_avx512.c's blocking (the same KC and slices of K, the same NC),
** with a 6 x 16 tile of C: 12 accumulators, 2 vectors of B and 1 broadcast
** of A fill 15 of the 16 registers. */
#ifndef BLK_MC
#define BLK_MC 96   /* a multiple of BLK_MR */
#endif
#ifndef BLK_NC
#define BLK_NC 2048
#endif
enum { BLK_MR = 6, BLK_NR = 16 };
/* A slice's B panel is GEMM_KC x 16 floats, 48 KB at 768: more than Zen 3's
** 32 KB of L1, so each tile read it again from L2. Parts of 256 steps (16 KB)
** stay in L1 across the block's tiles (gemm_kernels.h's kc_part): on a Zen 3,
** one thread, the base shapes' medians rose 4-14% (BENCHMARKS.md, issue 14). */
#ifndef BLK_KC_PART
#define BLK_KC_PART 256
#endif

/* A~ for the mc x kc block of op(A) at (i0, p0): MR-row panels, panel q at
** dst + q * MR * kc holding [p * MR + i] = op(A)[i0 + q MR + i][p0 + p], rows
** past mc zero. A transposed is read a whole row of the block at a time (rows
** lda apart, as gemm_avx512.c's pack_a says). */
static void pack_a(float *dst, const float *A, int lda, int trans_a, int i0, int mc, int p0, int kc) {
  if (trans_a) {
    for (int p = 0; p < kc; p++) {
      const float *src = A + (size_t)(p0 + p) * lda + i0;
      if (p + 8 < kc)
        for (int j = 0; j < mc; j += 16) _mm_prefetch((const char *)(src + (size_t)8 * lda + j), _MM_HINT_T0);
      for (int ir = 0; ir < mc; ir += BLK_MR) {
        float *d = dst + (size_t)ir * kc + (size_t)p * BLK_MR;
        int mr = mc - ir < BLK_MR ? mc - ir : BLK_MR;
        if (mr == BLK_MR) {
          _mm_storeu_ps(d, _mm_loadu_ps(src + ir));
          /* The 64-bit moves of emmintrin.h that promise no alignment. */
          _mm_storel_epi64((__m128i *)(d + 4), _mm_loadl_epi64((const __m128i *)(src + ir + 4)));
        } else
          for (int i = 0; i < BLK_MR; i++) d[i] = i < mr ? src[ir + i] : 0.0f;
      }
    }
  } else {
    for (int ir = 0; ir < mc; ir += BLK_MR) {
      const float *src = A + (size_t)(i0 + ir) * lda + p0;
      int mr = mc - ir < BLK_MR ? mc - ir : BLK_MR;
      for (int p = 0; p < kc; p += 8) {
        __m256 r[8];
        int cols = kc - p < 8 ? kc - p : 8;
        load_transposed(r, src + p, lda, mr, cols);
        /* 6 lanes per column: 4 + 2, so that no store reaches past the panel. */
        float *d = dst + (size_t)ir * kc + (size_t)p * BLK_MR;
        for (int c = 0; c < cols; c++) {
          _mm_storeu_ps(d + c * BLK_MR, _mm256_castps256_ps128(r[c]));
          _mm_storel_epi64((__m128i *)(d + c * BLK_MR + 4), _mm_castps_si128(_mm256_extractf128_ps(r[c], 1)));
        }
      }
    }
  }
}

/* B~ for the kc x nc block of op(B) at (p0, j0): NR-column panels, panel q at
** dst + q * NR * kc holding [p * NR + j] = op(B)[p0 + p][j0 + q NR + j],
** columns past nc zero. B not transposed is read 8 rows at a time, as
** gemm_avx512.c's pack_b does, so that consecutive stores fill one panel. */
static void pack_b(float *dst, const float *B, int ldb, int trans_b, int j0, int nc, int p0, int kc) {
  if (!trans_b) {
    for (int p8 = 0; p8 < kc; p8 += 8)
      for (int jr = 0; jr < nc; jr += BLK_NR) {
        int full = nc - jr >= BLK_NR;
        __m256i m0 = lanes(nc - jr), m1 = lanes(nc - jr - 8);
        for (int p = p8; p < p8 + 8 && p < kc; p++) {
          const float *src = B + (size_t)(p0 + p) * ldb + j0 + jr;
          float *d = dst + (size_t)jr * kc + (size_t)p * BLK_NR;
          if (full) {
            _mm256_store_ps(d, _mm256_loadu_ps(src));
            _mm256_store_ps(d + 8, _mm256_loadu_ps(src + 8));
          } else {
            _mm256_store_ps(d, _mm256_maskload_ps(src, m0));
            _mm256_store_ps(d + 8, _mm256_maskload_ps(src + 8, m1));
          }
        }
      }
  } else {
    for (int jr = 0; jr < nc; jr += BLK_NR)
      for (int h = 0; h < BLK_NR; h += 8) {
        int rows = nc - jr - h < 0 ? 0 : nc - jr - h > 8 ? 8 : nc - jr - h;
        const float *src = B + (size_t)(j0 + jr + h) * ldb + p0;
        for (int p = 0; p < kc; p += 8)
          transpose_block8(dst + (size_t)jr * kc + (size_t)p * BLK_NR + h, BLK_NR, src + p, ldb, rows,
                           kc - p < 8 ? kc - p : 8);
      }
  }
}

/* Stores the first nr (<= 16) lanes of v0, v1 to dst. */
static inline void store_row(float *dst, __m256 v0, __m256 v1, int nr) {
  if (nr == BLK_NR) {
    _mm256_storeu_ps(dst, v0);
    _mm256_storeu_ps(dst + 8, v1);
  } else {
    _mm256_maskstore_ps(dst, lanes(nr), v0);
    _mm256_maskstore_ps(dst + 8, lanes(nr - 8), v1);
  }
}

/* The first nr (<= 16) floats at src, the rest read as 0. */
static inline void load_row(const float *src, __m256 *v0, __m256 *v1, int nr) {
  if (nr == BLK_NR) {
    *v0 = _mm256_loadu_ps(src);
    *v1 = _mm256_loadu_ps(src + 8);
  } else {
    *v0 = _mm256_maskload_ps(src, lanes(nr));
    *v1 = _mm256_maskload_ps(src + 8, lanes(nr - 8));
  }
}

/* GELU of the nr <= 16 values v into dst. */
static inline void gelu_store(float *dst, __m256 v0, __m256 v1, int nr) {
  float x[16] __attribute__((aligned(32))), y[16] __attribute__((aligned(32)));
  _mm256_store_ps(x, v0);
  _mm256_store_ps(x + 8, v1);
#pragma omp simd
  for (int j = 0; j < 16; j++) y[j] = fast_gelu(x[j]);
  store_row(dst, _mm256_load_ps(y), _mm256_load_ps(y + 8), nr);
}

/* v0, v1 times GELU' of the nr <= 16 values at p, those past nr read as 0 (their lanes are never stored). */
static inline void gelu_grad_mul(__m256 *v0, __m256 *v1, const float *p, int nr) {
  float x[16] __attribute__((aligned(32))), y[16] __attribute__((aligned(32)));
  __m256 p0, p1;
  load_row(p, &p0, &p1, nr);
  _mm256_store_ps(x, p0);
  _mm256_store_ps(x + 8, p1);
#pragma omp simd
  for (int j = 0; j < 16; j++) y[j] = fast_gelu_grad(x[j]);
  *v0 = _mm256_mul_ps(*v0, _mm256_load_ps(y));
  *v1 = _mm256_mul_ps(*v1, _mm256_load_ps(y + 8));
}

/* The mr x nr tile of C at c from kp steps of packed panels a and b, with
** gemm_avx512.c's blk_kernel's epilogue, operation for operation. Accumulators
** from zero when start, else from acc (row i's 16 floats at acc + 16 i); when
** finish, the epilogue, else the accumulators back to acc (gemm_kernels.h's
** tile_part). The epilogue: first: C = alpha acc + beta C + bias (C not read
** when beta == 0; bias NULL = none); otherwise C += alpha acc. last, with g: g
** (same ldc) = GELU(C), and C is not stored at all when g == c; with gp: C is
** multiplied by GELU'(gp) (same ldc). */
static inline __attribute__((always_inline)) void
blk_tile(int kp, const float *a, const float *b, float *acc, int start, int finish, float *c, int ldc, float alpha,
         float beta, const float *bias, float *g, const float *gp, int first, int last, int mr, int nr) {
  __m256 r[BLK_MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < BLK_MR; i++)
    if (start) r[i][0] = r[i][1] = _mm256_setzero_ps();
    else {
      r[i][0] = _mm256_load_ps(acc + i * BLK_NR);
      r[i][1] = _mm256_load_ps(acc + i * BLK_NR + 8);
    }
  /* C's lines (and GELU's input's) are needed only after the kp steps: asking for them now hides the wait. */
  if (finish) gemm_prefetch_tile_rows(c, (size_t)ldc, mr, BLK_NR);
  if (finish && last && gp) gemm_prefetch_tile_rows(gp, (size_t)ldc, mr, BLK_NR);
  for (int p = 0; p < kp; p++) {
    __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < BLK_MR; i++) {
      __m256 ai = _mm256_broadcast_ss(a + i);
      r[i][0] = _mm256_fmadd_ps(ai, b0, r[i][0]);
      r[i][1] = _mm256_fmadd_ps(ai, b1, r[i][1]);
    }
    a += BLK_MR;
    b += BLK_NR;
  }
  if (!finish) {
#pragma GCC unroll 6
    for (int i = 0; i < BLK_MR; i++) {
      _mm256_store_ps(acc + i * BLK_NR, r[i][0]);
      _mm256_store_ps(acc + i * BLK_NR + 8, r[i][1]);
    }
    return;
  }
  __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(first ? beta : 1.0f);
  __m256 bias0 = _mm256_setzero_ps(), bias1 = _mm256_setzero_ps();
  if (first && bias) load_row(bias, &bias0, &bias1, nr);
  int read_c = !first || beta != 0.0f, act = last && g, keep_c = !act || g != c, grad = last && gp;
#pragma GCC unroll 6
  for (int i = 0; i < BLK_MR; i++) {
    if (i >= mr) break;
    float *ci = c + (size_t)i * ldc;
    __m256 r0 = _mm256_fmadd_ps(va, r[i][0], bias0), r1 = _mm256_fmadd_ps(va, r[i][1], bias1);
    if (read_c) {
      __m256 c0, c1;
      load_row(ci, &c0, &c1, nr);
      r0 = _mm256_fmadd_ps(vb, c0, r0);
      r1 = _mm256_fmadd_ps(vb, c1, r1);
    }
    if (grad) gelu_grad_mul(&r0, &r1, gp + (size_t)i * ldc, nr);
    if (keep_c) store_row(ci, r0, r1, nr);
    if (act) gelu_store(g + (size_t)i * ldc, r0, r1, nr);
  }
}

/* The whole slice at once (gemm_kernels.h's tile). */
static void blk_kernel(int kc, const float *a, const float *b, const float *ahead, float *c, int ldc, float alpha,
                       float beta, const float *bias, float *g, const float *gp, int first, int last, int mr, int nr) {
  (void)ahead;   /* measured on Intel's AVX-512 tile only (BENCHMARKS.md, issue 14) */
  blk_tile(kc, a, b, NULL, 1, 1, c, ldc, alpha, beta, bias, g, gp, first, last, mr, nr);
}

/* A part of a slice (gemm_kernels.h's tile_part). */
static void blk_kernel_part(int kp, const float *a, const float *b, float *acc, int start, int finish, float *c,
                            int ldc, float alpha, float beta, const float *bias, float *g, const float *gp, int first,
                            int last, int mr, int nr) {
  blk_tile(kp, a, b, acc, start, finish, c, ldc, alpha, beta, bias, g, gp, first, last, mr, nr);
}

/* The FMA peak's loop: 12 chains, more than the FMA units' latency times their
** count, so nothing but their throughput bounds it; the sum is returned through
** a volatile store so the loop is kept. */
static double fma_loop(long iters) {
  __m256 acc[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], x, y);
  __m256 s = acc[0];
  for (int i = 1; i < 12; i++) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  volatile float sink = out[0];
  (void)sink;
  return 2.0 * 8 * 12 * (double)iters;
}

const GemmKernels gemm_kernels_avx2 = {
  .backend = "avx2-blocked", .backend_openblas = "openblas+avx2-few-rows",
  .mr = BLK_MR, .nr = BLK_NR, .mc = BLK_MC, .nc = BLK_NC,
  .pack_a = pack_a, .pack_b = pack_b, .tile = blk_kernel,
  .kc_part = BLK_KC_PART, .tile_part = blk_kernel_part,
  .few_rows_packed_size = few_rows_packed_size, .few_rows_pack = few_rows_pack, .few_rows_range = few_rows_range,
  .fma_loop = fma_loop,
};
