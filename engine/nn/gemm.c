/* The matrix product (see gemm.h). Two kernels of our own, written once per
** instruction-set level (gemm_avx2.c, gemm_avx512.c; gemm_kernels.h), the level
** chosen by cpu_isa(); OpenBLAS's sgemm at the generic level, and as the
** fallback when a thread cannot have its packing buffers.
**
** A Linear layer on very few rows (a fill-mask request of 16 tokens) costs
** reading W from memory, about 340 MB per forward pass of a base model.
** Packing W first reads it and writes it again; the few-row kernel reads it in
** place, 12 rows at a time, about twice as fast as OpenBLAS reads it (`maskd bench
** sgemm --mnk 16,3072,768 --bt --copies 36`).
**
** Everything else takes the blocked kernel (its loops below, its packing and
** tile per level), a few percent faster than OpenBLAS on the base encoder's
** shapes (`maskd bench sgemm --config base --batch 8 --seq 128`). It also does
** what OpenBLAS cannot: the bias lands in the first store of C (OpenBLAS makes a
** pass over C first, to copy the bias in or to zero it), and the FFN's GELU
** (forward) or GELU's derivative (backward) is applied as the last store is made.
** MASKD_GEMM=openblas sends those products to OpenBLAS instead, to measure
** one against the other. The numbers behind each choice in this file, with their
** commands, dates and commits, are in BENCHMARKS.md ("Measurements behind
** engine/nn/gemm.c"); the comments here keep only the reasons. */
#include "engine/nn/gemm.h"

#include "engine/nn/fastmath.h"
#include "engine/nn/gemm_kernels.h"
#include "engine/core/cpu.h"
#include "engine/core/platform.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's sgemm on up to nt threads. The OpenMP build linked here (0.3.21) has
** no per-call count (openblas_set_num_threads_local came in 0.3.26): it reads the
** calling thread's OpenMP count, omp_get_max_threads(), a per-thread setting, so
** that is set to nt for the call and put back. What stays process-wide is
** inside OpenBLAS: it copies that count into a global of its own on every call
** whose count differs (and resizes its buffers), and once that global is 1 it
** stops reading the OpenMP count, so a 1-thread call would leave every later
** call on one thread: it is raised again here when nt > 1. Inside a parallel
** region OpenBLAS runs on the calling thread alone, as nt asks there. */
static void blas(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc, int nt) {
  int own = omp_in_parallel() ? nt : omp_get_max_threads();
  if (own != nt) omp_set_num_threads(nt);
  if (nt > 1 && !omp_in_parallel() && openblas_get_num_threads() == 1) openblas_set_num_threads(nt);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha,
              A, lda, B, ldb, beta, C, ldc);
  if (own != nt) omp_set_num_threads(own);
}

/* OpenBLAS with the bias (beta must then be 0), the GELU or the GELU's
** derivative at P applied over C afterwards: every product at the generic
** level, and a thread's share when the thread cannot have its packing buffers;
** nt threads as blas(). */
static void blas_epilogue(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda,
                          const float *B, int ldb, float beta, const float *bias, float *C, float *G, const float *P,
                          int ldc, int nt) {
  if (bias) {
    for (int i = 0; i < M; i++) memcpy(C + (size_t)i * ldc, bias, (size_t)N * sizeof(float));
    beta = 1.0f;
  }
  blas(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nt);
  if (G)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) G[(size_t)i * ldc + j] = fast_gelu(C[(size_t)i * ldc + j]);
  if (P)
    for (int i = 0; i < M; i++)
      for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] *= fast_gelu_grad(P[(size_t)i * ldc + j]);
}

/* Packing buffers, per thread, grown on first need and kept, so that after
** the first product of a shape none allocates. They are held under a pthread
** key, not _Thread_local, so that they are freed when the thread ends: the
** server runs passes on short-lived connection threads. */
typedef struct ThreadBufs { float *p[GEMM_BUF_COUNT]; size_t cap[GEMM_BUF_COUNT]; } ThreadBufs;
static pthread_key_t bufs_key;
static pthread_once_t bufs_once = PTHREAD_ONCE_INIT;

static void bufs_free(void *v) {
  ThreadBufs *b = v;
  for (int i = 0; i < GEMM_BUF_COUNT; i++) free(b->p[i]);
  free(b);
}
static void bufs_key_make(void) { (void)pthread_key_create(&bufs_key, bufs_free); }

float *gemm_thread_buffer(int slot, size_t n) {
  pthread_once(&bufs_once, bufs_key_make);
  ThreadBufs *b = pthread_getspecific(bufs_key);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return NULL;
    if (pthread_setspecific(bufs_key, b)) { free(b); return NULL; }
  }
  if (n > b->cap[slot]) {
    free(b->p[slot]);
    b->p[slot] = platform_alloc_floats(n);
    b->cap[slot] = b->p[slot] ? n : 0;
  }
  return b->p[slot];
}

/* The few-row product (see the opening comment) with threads splitting N; 1 when
** done, 0 when the packed A cannot be had. K goes in the blocked product's slices,
** each a call of the kernel that adds its chain to C (beta 1 after the first; the
** bias in the first, GELU in the last), so that a Linear layer (alpha 1, beta 0)
** gets the blocked product's bits: a text's answer does not change with how many
** rows share its pass (tests/unit/test_gemm.c, is_one_fma_sequence). */
static int few_rows(const GemmKernels *k, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, const float *bias, float *C, float *G, int ldc, int nt) {
  int step = gemm_slice_step(K);
  size_t need = 0;
  for (int pc = 0; pc < K; pc += step) need += k->few_rows_packed_size(M, K - pc < step ? K - pc : step);
  float *xt = gemm_thread_buffer(GEMM_BUF_XT, need);
  if (!xt) return 0;
  size_t at = 0;
  for (int pc = 0; pc < K; pc += step) {
    int kc = K - pc < step ? K - pc : step;
    k->few_rows_pack(xt + at, A + pc, lda, M, kc);
    at += k->few_rows_packed_size(M, kc);
  }
  int units = gemm_few_rows_units(N);
  if (nt > units) nt = units;
#pragma omp parallel num_threads(nt) if (nt > 1)   /* one thread: no team to start */
  {
    int j0, j1;
    gemm_few_rows_share(N, omp_get_thread_num(), omp_get_num_threads(), &j0, &j1);
    size_t off = 0;
    for (int pc = 0; pc < K; pc += step) {
      int kc = K - pc < step ? K - pc : step, first = pc == 0, last = pc + kc >= K;
      k->few_rows_range(M, kc, xt + off, B + pc, ldb, j0, j1, alpha, first ? beta : 1.0f, first ? bias : NULL, C,
                        last ? G : NULL, ldc);
      off += k->few_rows_packed_size(M, kc);
    }
  }
  return 1;
}

/* One block of rows of C in one step of the blocked product: rows [ic, ic + mc)
** against the packed B panel pb (nc columns from jc, kc steps of K from pc).
** A's block is packed part by part into pa, each part's panels one after another,
** so that the tiles of a part read A in one stream (the part from step q at
** pa + mcp q); acc holds a tile's accumulators between parts (k->tile_part). */
static void block_rows(const GemmKernels *k, int trans_a, int K, float alpha, const float *A, int lda, float beta,
                       const float *bias, float *C, float *G, const float *P, int ldc, int ic, int mc, int jc, int nc,
                       int pc, int kc, const float *pb, float *pa, float *acc) {
  int MR = k->mr, NR = k->nr;
  /* The slice's parts, of equal depth (see gemm_kernels.h's kc_part). */
  int parts = k->tile_part && k->kc_part > 0 ? (kc + k->kc_part - 1) / k->kc_part : 1;
  int kp = parts > 1 ? (kc + parts - 1) / parts : kc;
  size_t mcp = (size_t)(mc + MR - 1) / MR * MR;
  for (int q = 0; q < kc || q == 0; q += kp) {
    k->pack_a(pa + mcp * q, A, lda, trans_a, ic, mc, pc + q, kc - q < kp ? kc - q : kp);
    if (kc == 0) break;
  }
  for (int jr = 0; jr < nc; jr += NR)
    for (int q = 0; q < kc || q == 0; q += kp) {
      int kq = kc - q < kp ? kc - q : kp;
      /* The next B panel, which the tiles over this one bring into L2 a share
      ** each (kc x 4 floats: NR / 4 tiles cover it, where the block has that
      ** many) before a tile must wait on L3. Only the time depends on it. */
      const float *next = jr + NR < nc && parts == 1 ? pb + (size_t)(jr + NR) * kc : NULL;
      for (int ir = 0; ir < mc; ir += MR) {
        size_t at = (size_t)(ic + ir) * ldc + jc + jr;
        const float *a = pa + mcp * q + (size_t)ir * kq, *b = pb + (size_t)jr * kc + (size_t)q * NR;
        const float *ahead = next && ir / MR < NR / 4 ? next + (size_t)(ir / MR) * kc * 4 : NULL;
        int mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
        if (parts == 1)
          k->tile(kc, a, b, ahead, C + at, ldc, alpha, beta, bias ? bias + jc + jr : NULL, G ? G + at : NULL,
                  P ? P + at : NULL, pc == 0, pc + kc >= K, mr, nr);
        else
          k->tile_part(kq, a, b, acc + (size_t)ir * NR, q == 0, q + kq >= kc, C + at, ldc, alpha, beta,
                       bias ? bias + jc + jr : NULL, G ? G + at : NULL, P ? P + at : NULL, pc == 0, pc + kc >= K,
                       mr, nr);
      }
      if (kc == 0) break;
    }
}

/* The floats of the three packing buffers: A's block, B's panel, a block's accumulators. */
static size_t pack_a_floats(const GemmKernels *k) { return (size_t)(k->mc + k->mr - 1) / k->mr * k->mr * GEMM_KC; }
static size_t pack_b_floats(const GemmKernels *k, int N) {
  int ncmax = N < k->nc ? N : k->nc;
  return (size_t)GEMM_KC * ((ncmax + k->nr - 1) / k->nr) * k->nr;
}
static size_t acc_floats(const GemmKernels *k) { return (size_t)(k->mc + k->mr - 1) / k->mr * k->mr * k->nr; }

/* The blocked product on the calling thread with the level's packing and tile
** (gemm_kernels.h); 0, having written nothing, when its buffers cannot be had. K
** goes in gemm_slice_step's slices, one definition for every level and path, so that
** their bits are the same. */
static int blocked_serial(const GemmKernels *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta, const float *bias, float *C,
                          float *G, const float *P, int ldc) {
  float *pa = gemm_thread_buffer(GEMM_BUF_A, pack_a_floats(k));
  float *pb = gemm_thread_buffer(GEMM_BUF_B, pack_b_floats(k, N));
  float *acc = k->tile_part ? gemm_thread_buffer(GEMM_BUF_ACC, acc_floats(k)) : NULL;
  if (!pa || !pb || (k->tile_part && !acc)) return 0;
  int step = gemm_slice_step(K);
  for (int jc = 0; jc < N; jc += k->nc) {
    int nc = N - jc < k->nc ? N - jc : k->nc;
    for (int pc = 0; pc < K || (pc == 0 && K == 0); pc += step) {
      int kc = K - pc < step ? K - pc : step;
      k->pack_b(pb, B, ldb, trans_b, jc, nc, pc, kc);
      for (int ic = 0; ic < M; ic += k->mc)
        block_rows(k, trans_a, K, alpha, A, lda, beta, bias, C, G, P, ldc, ic, M - ic < k->mc ? M - ic : k->mc, jc,
                   nc, pc, kc, pb, pa, acc);
      if (K == 0) break;
    }
  }
  return 1;
}

/* The blocked product on nt threads that share its steps: each B panel is packed
** once, its column panels divided among the threads, and then the blocks of rows
** are handed out one at a time as threads come free. A fixed half each made the
** faster thread wait for the slower at the end of every product, and a shared
** host slows one core and not the other by up to a third (BENCHMARKS.md, issue 14);
** it also packed every panel twice. Each element of C gets the same multiply-adds
** in the same order as on one thread, so the bits do not change. 0, having written
** nothing, when a thread's buffers cannot be had. K > 0: a team runs only past a
** million multiply-adds (gemm_blocked). */
static int blocked_shared(const GemmKernels *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                          const float *A, int lda, const float *B, int ldb, float beta, const float *bias, float *C,
                          float *G, const float *P, int ldc, int nt) {
  int NR = k->nr, blocks = (M + k->mc - 1) / k->mc, step = gemm_slice_step(K);
  float *pb = NULL;
  int failed = 0;
#pragma omp parallel num_threads(nt)
  {
    float *pa = gemm_thread_buffer(GEMM_BUF_A, pack_a_floats(k));
    float *acc = k->tile_part ? gemm_thread_buffer(GEMM_BUF_ACC, acc_floats(k)) : NULL;
#pragma omp single
    pb = gemm_thread_buffer(GEMM_BUF_B, pack_b_floats(k, N));   /* one thread's buffer, read by all */
    if (!pa || !pb || (k->tile_part && !acc)) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp barrier
    int give_up;
#pragma omp atomic read
    give_up = failed;
    for (int jc = 0; !give_up && jc < N; jc += k->nc) {
      int nc = N - jc < k->nc ? N - jc : k->nc, panels = (nc + NR - 1) / NR;
      for (int pc = 0; pc < K; pc += step) {
        int kc = K - pc < step ? K - pc : step;
#pragma omp for schedule(static)
        for (int q = 0; q < panels; q++)
          k->pack_b(pb + (size_t)q * NR * kc, B, ldb, trans_b, jc + q * NR, nc - q * NR < NR ? nc - q * NR : NR, pc,
                    kc);
        /* (the loop's barrier: the panel is whole before any block reads it, and
        ** every block has read it before the next step packs over it) */
#pragma omp for schedule(dynamic, 1)
        for (int blk = 0; blk < blocks; blk++) {
          int ic = blk * k->mc;
          block_rows(k, trans_a, K, alpha, A, lda, beta, bias, C, G, P, ldc, ic, M - ic < k->mc ? M - ic : k->mc, jc,
                     nc, pc, kc, pb, pa, acc);
        }
      }
    }
  }
  return !failed;
}

/* One thread's share: blocked, or OpenBLAS on this thread alone when its
** buffers cannot be had (blocked_serial fails before it writes anything). */
static void blk_share(const GemmKernels *k, int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A,
                      int lda, const float *B, int ldb, float beta, const float *bias, float *C, float *G,
                      const float *P, int ldc) {
  if (!blocked_serial(k, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, P, ldc))
    blas_epilogue(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, P, ldc, 1);
}

/* Two switches for measuring one way against another, read once: MASKD_GEMM=openblas
** sends the products the blocked kernel would take to OpenBLAS, and
** MASKD_GEMM_SHARE=fixed gives each thread a fixed share of a product (no shared steps). */
static int openblas_wanted, shared_off;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_is(const char *name, const char *value) {
  const char *v = getenv(name);
  return v && strcmp(v, value) == 0;
}
static void env_read(void) {
  openblas_wanted = env_is("MASKD_GEMM", "openblas");
  shared_off = env_is("MASKD_GEMM_SHARE", "fixed");
}
static int use_openblas(void) {
  pthread_once(&env_once, env_read);
  return openblas_wanted;
}
int gemm_shared_steps(void) {
  pthread_once(&env_once, env_read);
  return !shared_off;
}

static void gemm_blocked(const GemmKernels *k, int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const float *A, int lda, const float *B, int ldb, float beta, const float *bias, float *C,
                         float *G, const float *P, int ldc, int nt) {
  /* Each thread packs all of the operand the split does not divide: split the
  ** longer side, so that the smaller operand is the one packed twice (4096-row
  ** activations times the small model's 256-column weights: BENCHMARKS.md,
  ** gemm.c's measurements). */
  int split_n = N > M && N >= 4 * k->nr * nt;
  int unit = split_n ? k->nr : k->mr, dim = split_n ? N : M, units = (dim + unit - 1) / unit;
  if (nt > units) nt = units;
  if ((double)M * N * K < 1 << 20) nt = 1;   /* below about a million steps, a team costs more than it saves */
  if (nt <= 1) {
    blk_share(k, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, P, ldc);
    return;
  }
  /* Rows in blocks handed out as threads come free, where there are enough blocks
  ** to even out; else (and when buffers fail) a fixed share each. */
  if (!split_n && gemm_share_rows(M, k->mc, nt) &&
      blocked_shared(k, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, P, ldc, nt))
    return;
#pragma omp parallel num_threads(nt)
  {
    int t = omp_get_thread_num(), n = omp_get_num_threads();
    int d0 = (int)((long)units * t / n) * unit, d1 = (int)((long)units * (t + 1) / n) * unit;
    if (d1 > dim) d1 = dim;
    if (split_n)
      blk_share(k, trans_a, trans_b, M, d1 - d0, K, alpha, A, lda, trans_b ? B + (size_t)d0 * ldb : B + d0, ldb, beta,
                bias ? bias + d0 : NULL, C + d0, G ? G + d0 : NULL, P ? P + d0 : NULL, ldc);
    else
      blk_share(k, trans_a, trans_b, d1 - d0, N, K, alpha, trans_a ? A + d0 : A + (size_t)d0 * lda, lda, B, ldb, beta,
                bias, C + (size_t)d0 * ldc, G ? G + (size_t)d0 * ldc : NULL, P ? P + (size_t)d0 * ldc : NULL, ldc);
  }
}

/* The kernels of a level; NULL at the generic level, which has none. */
static const GemmKernels *kernels_of(CpuIsa isa) {
  return isa >= CPU_ISA_AVX512 ? &gemm_kernels_avx512 : isa == CPU_ISA_AVX2 ? &gemm_kernels_avx2 : NULL;
}

/* The kernels of the level cpu_isa() chose. */
static const GemmKernels *kernels(void) { return kernels_of(cpu_isa()); }

static void product(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
                    int ldb, float beta, const float *bias, float *C, float *G, const float *P, int ldc, int threads) {
  if (M <= 0 || N <= 0) return;
  int nt = omp_in_parallel() || threads < 1 ? 1 : threads;
  const GemmKernels *k = kernels();
  if (k && !trans_a && trans_b && M <= GEMM_FEW_ROWS_MAX && N >= 4 * M && K > 0 && alpha != 0.0f && !P &&
      few_rows(k, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, ldc, nt))
    return;
  if (!k || use_openblas())
    blas_epilogue(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, P, ldc, nt);
  else
    gemm_blocked(k, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, bias, C, G, P, ldc, nt);
}

void gemm_f32(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
              int ldb, float beta, float *C, int ldc, int threads) {
  product(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, NULL, C, NULL, NULL, ldc, threads);
}

void gemm_f32_bias(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                   const float *bias, float *C, float *G, int ldc, int threads) {
  product(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, bias, C, G, NULL, ldc, threads);
}

void gemm_f32_gelu_grad(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                        const float *P, float *C, int ldc, int threads) {
  product(trans_a, trans_b, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, NULL, C, NULL, P, ldc, threads);
}

const char *gemm_backend(void) {
  const GemmKernels *k = kernels();
  return !k ? "openblas" : use_openblas() ? k->backend_openblas : k->backend;
}

double gemm_fma_peak(int threads) {
  const GemmKernels *k = kernels() ? kernels() : kernels_of(cpu_isa_best());
  if (!k) return 0;
  if (threads < 1) threads = 1;
  platform_pin_threads(threads);
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {   /* the best of 5: the clock ramps up, neighbours come and go */
    double flops = 0, t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    {
#pragma omp barrier
#pragma omp master
      t0 = omp_get_wtime();
      flops += k->fma_loop(4000000);
#pragma omp barrier
#pragma omp master
      t1 = omp_get_wtime();
    }
    double g = flops / (t1 - t0) * 1e-9;
    if (g > best) best = g;
  }
  return best;
}
