/* The bf16 products (gemm.h): the loops over blocks and slices of K, threads,
** and the choice of kernels (gemm_bf16_kernels.h). The loops are the float
** product's (gemm.c), on panels of bf16 pairs: the same split of the work, the
** same slices of K (which decide where C is rounded between passes, so every
** level's kernels give the same bits). There is no OpenBLAS fallback here: it
** has no bf16 product with this arithmetic, so every level has kernels of its
** own, the generic level included. */
#include "engine/nn/gemm.h"

#include "engine/nn/gemm_bf16_kernels.h"
#include "engine/core/cpu.h"

#include "engine/core/now.h"

#include <omp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

/* At avx512bf16 the blocked product, whose time is its multiply-adds, runs
** vdpbf16ps only where the instruction multiplies-adds at least as fast as the
** float FMA: twice as fast on AMD's Zen 5, but half as fast on Intel's cores with
** AVX512-BF16 (a Xeon with AMX, family 6 model 167: one vdpbf16ps every two
** cycles, about 100 GFLOP/s a thread against the FMA's 200), where the emulation, the
** same bits, ran the base model's training products 1.35x faster (BENCHMARKS.md,
** issue 15). There the blocked product takes the avx512 emulation's kernels and
** the few-row product keeps vdpbf16ps: it streams weights from memory, and its
** half-size rows still won (base fill-mask 1x16: 21 ms against 26 emulated). The
** rates are measured once, on first use, in about a millisecond. */
static double dot_ratio;   /* vdpbf16ps's multiply-add rate over the FMA's; 0 without AVX512-BF16 */
static GemmBf16Kernels emulated_blocked;   /* the avx512 emulation's blocked product, vdpbf16ps's few rows */
static pthread_once_t measured = PTHREAD_ONCE_INIT;
static _Atomic int blocked_choice = GEMM_BF16_BLOCKED_AUTO;

/* The best of 5 rates of a loop of registers (flops a second): the shortest run
** is the one nothing interrupted. */
static double loop_rate(double (*loop)(long)) {
  double best = 0;
  for (int rep = 0; rep < 5; rep++) {
    double t = now_monotonic(), flops = loop(20000), dt = now_monotonic() - t;
    if (dt > 0 && flops / dt > best) best = flops / dt;
  }
  return best;
}

static void measure(void) {
  emulated_blocked = gemm_bf16_kernels_avx512;
  emulated_blocked.backend = "avx512-bf16-emulated+avx512bf16-few-rows";
  emulated_blocked.few_rows_packed_size = gemm_bf16_kernels_avx512bf16.few_rows_packed_size;
  emulated_blocked.few_rows_pack = gemm_bf16_kernels_avx512bf16.few_rows_pack;
  emulated_blocked.few_rows_range = gemm_bf16_kernels_avx512bf16.few_rows_range;
  emulated_blocked.dot_loop = gemm_bf16_kernels_avx512bf16.dot_loop;
  if (cpu_isa_best() < CPU_ISA_AVX512BF16) return;
  double fma = loop_rate(gemm_kernels_avx512.fma_loop);
  dot_ratio = fma > 0 ? loop_rate(gemm_bf16_kernels_avx512bf16.dot_loop) / fma : 0;
}

double gemm_bf16_dot_ratio(void) {
  pthread_once(&measured, measure);
  return dot_ratio;
}

void gemm_bf16_blocked_select(GemmBf16Blocked choice) { atomic_store(&blocked_choice, choice); }

/* The kernels of a level: vdpbf16ps at avx512bf16 (its blocked product by the
** float emulation where the rates above say so), the float emulation below it. */
static const GemmBf16Kernels *kernels_of(CpuIsa isa) {
  switch (isa) {
  case CPU_ISA_AVX512BF16: {
    int choice = atomic_load(&blocked_choice);
    double ratio = gemm_bf16_dot_ratio();   /* also makes emulated_blocked */
    if (choice == GEMM_BF16_BLOCKED_VDPBF16PS || (choice == GEMM_BF16_BLOCKED_AUTO && ratio >= 1.0))
      return &gemm_bf16_kernels_avx512bf16;
    return &emulated_blocked;
  }
  case CPU_ISA_AVX512: return &gemm_bf16_kernels_avx512;
  case CPU_ISA_AVX2: return &gemm_bf16_kernels_avx2;
  default: return &gemm_bf16_kernels_generic;
  }
}

const char *gemm_bf16_backend(void) { return kernels_of(cpu_isa())->backend; }

/* product()'s test for the few-row product, shapes and operands. */
static int takes_few_rows(int M, int N, int weights_bf16) {
  return weights_bf16 && M <= GEMM_FEW_ROWS_MAX && N >= 4 * M;
}

int gemm_bf16_runs_vdpbf16ps(int M, int N, int weights_bf16) {
  const GemmBf16Kernels *k = kernels_of(cpu_isa());
  return takes_few_rows(M, N, weights_bf16) ? k->dot_loop != NULL : k == &gemm_bf16_kernels_avx512bf16;
}

/* Thread buffers hold floats; a panel of n uint16s takes n / 2 of them (64-byte aligned). */
static uint16_t *buffer16(int slot, size_t n) { return (uint16_t *)gemm_thread_buffer(slot, n / 2 + 16); }

/* The operands of one product. B is float, or bf16 when B16 != NULL. */
typedef struct Operands {
  int trans_a, trans_b, M, N, K;
  float alpha, beta;
  const float *A, *B, *bias, *P;
  const uint16_t *B16;
  int lda, ldb, ldc;
  float *C, *G;
} Operands;

/* The few-row product on nt threads splitting N (B16 in place); 0 when its buffer
** cannot be had. K goes in the blocked product's slices, as gemm.c's few-row
** product does and for the same reason: a Linear layer's rows get the same bits
** in a pass of few rows and of many. */
static int few_rows(const GemmBf16Kernels *k, const Operands *o, int nt) {
  int K = o->K, step = gemm_slice_step(K);
  size_t need = 0;
  for (int pc = 0; pc < K; pc += step) need += k->few_rows_packed_size(o->M, K - pc < step ? K - pc : step);
  uint16_t *xt = buffer16(GEMM_BUF_XT, need);
  if (!xt) return 0;
  size_t at = 0;
  for (int pc = 0; pc < K; pc += step) {
    int kc = K - pc < step ? K - pc : step;
    k->few_rows_pack(xt + at, o->A + pc, o->lda, o->M, kc);
    at += k->few_rows_packed_size(o->M, kc);
  }
  int units = gemm_few_rows_units(o->N);
  if (nt > units) nt = units;
#pragma omp parallel num_threads(nt) if (nt > 1)   /* one thread: no team to start */
  {
    int j0, j1;
    gemm_few_rows_share(o->N, omp_get_thread_num(), omp_get_num_threads(), &j0, &j1);
    size_t off = 0;
    for (int pc = 0; pc < K; pc += step) {
      int kc = K - pc < step ? K - pc : step, first = pc == 0, last = pc + kc >= K;
      k->few_rows_range(o->M, kc, xt + off, o->B16 + pc, o->ldb, j0, j1, o->alpha, first ? o->beta : 1.0f,
                        first ? o->bias : NULL, o->C, last ? o->G : NULL, o->ldc);
      off += k->few_rows_packed_size(o->M, kc);
    }
  }
  return 1;
}

/* The calling thread's packing buffers for a share of n columns; 0 when they cannot be had. */
static int panels(const GemmBf16Kernels *k, int n, uint16_t **pa, uint16_t **pb) {
  int ncmax = n < k->nc ? n : k->nc;
  size_t per = k->wide_panels ? 2 : 1;   /* uint16s an element takes */
  *pa = buffer16(GEMM_BUF_A, per * (size_t)(k->mc + k->mr - 1) / k->mr * k->mr * GEMM_KC);
  *pb = buffer16(GEMM_BUF_B, per * (size_t)GEMM_KC * ((ncmax + k->nr - 1) / k->nr) * k->nr);
  return *pa && *pb;
}

/* Rows [ic, ic + mc) of C in one step of the blocked product: against the packed
** B panel pb (nc columns from jc, kc steps of K from pc), A's block packed into pa. */
static void block_rows(const GemmBf16Kernels *k, const Operands *o, int ic, int mc, int jc, int nc, int pc, int kc,
                       uint16_t *pa, const uint16_t *pb) {
  int MR = k->mr, NR = k->nr, kp = (kc + 1) / 2;
  size_t per = k->wide_panels ? 2 : 1;
  k->pack_a(pa, o->A, o->lda, o->trans_a, ic, mc, pc, kc);
  int shares = (int)(per * NR / 8);   /* a panel is 2 per NR kp uint16s, a share 16 kp (the tile's `ahead`) */
  for (int jr = 0; jr < nc; jr += NR) {
    const uint16_t *next = jr + NR < nc ? pb + per * (size_t)(jr + NR) * 2 * kp : NULL;   /* as gemm.c's block_rows */
    for (int ir = 0; ir < mc; ir += MR) {
      size_t at = (size_t)(ic + ir) * o->ldc + jc + jr;
      const uint16_t *ahead = next && ir / MR < shares ? next + (size_t)(ir / MR) * 16 * kp : NULL;
      k->tile(kp, pa + per * (size_t)ir * 2 * kp, pb + per * (size_t)jr * 2 * kp, ahead, o->C + at, o->ldc, o->alpha,
              o->beta, o->bias ? o->bias + jc + jr : NULL, o->G ? o->G + at : NULL, o->P ? o->P + at : NULL, pc == 0,
              pc + kc >= o->K, mc - ir < MR ? mc - ir : MR, nc - jr < NR ? nc - jr : NR);
    }
  }
}

/* Rows [i0, i1) x columns [j0, j1) of C on the calling thread, whose panels() succeeded. */
static void blocked_serial(const GemmBf16Kernels *k, const Operands *o, int i0, int i1, int j0, int j1) {
  int MC = k->mc, NC = k->nc, K = o->K;
  uint16_t *pa, *pb;
  panels(k, j1 - j0, &pa, &pb);
  int step = gemm_slice_step(K);
  for (int jc = j0; jc < j1; jc += NC) {
    int nc = j1 - jc < NC ? j1 - jc : NC;
    for (int pc = 0; pc < K || (pc == 0 && K == 0); pc += step) {
      int kc = K - pc < step ? K - pc : step;
      k->pack_b(pb, o->B, o->B16, o->ldb, o->trans_b, jc, nc, pc, kc);
      for (int ic = i0; ic < i1; ic += MC) block_rows(k, o, ic, i1 - ic < MC ? i1 - ic : MC, jc, nc, pc, kc, pa, pb);
      if (K == 0) break;
    }
  }
}

/* All of C on nt threads sharing each step, as gemm.c's blocked_shared: every B
** panel packed once, its column panels divided among the threads (one thread's
** buffer, read by all), then the blocks of rows taken one at a time as threads
** come free. The same tiles over the same panels: the bits of one thread. 0 (C
** untouched) when a thread's buffers cannot be had. K > 0: a team runs only past a
** million multiply-adds (blocked). */
static int blocked_shared(const GemmBf16Kernels *k, const Operands *o, int nt) {
  int MC = k->mc, NC = k->nc, NR = k->nr, K = o->K, step = gemm_slice_step(K), blocks = (o->M + MC - 1) / MC;
  size_t per = k->wide_panels ? 2 : 1;
  uint16_t *pb = NULL;
  int failed = 0;
#pragma omp parallel num_threads(nt)
  {
    uint16_t *pa, *own_pb;
    int ok = panels(k, o->N, &pa, &own_pb);
#pragma omp single
    pb = own_pb;
    if (!ok || !pb) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp barrier
    int stop;
#pragma omp atomic read
    stop = failed;
    for (int jc = 0; !stop && jc < o->N; jc += NC) {
      int nc = o->N - jc < NC ? o->N - jc : NC, n_panels = (nc + NR - 1) / NR;
      for (int pc = 0; pc < K; pc += step) {
        int kc = K - pc < step ? K - pc : step, kp = (kc + 1) / 2;
#pragma omp for schedule(static)
        for (int q = 0; q < n_panels; q++)
          k->pack_b(pb + per * (size_t)q * NR * 2 * kp, o->B, o->B16, o->ldb, o->trans_b, jc + q * NR,
                    nc - q * NR < NR ? nc - q * NR : NR, pc, kc);
        /* (the loop's barrier: the panel is whole before a block reads it, and read
        ** by every block before the next step packs over it) */
#pragma omp for schedule(dynamic, 1)
        for (int blk = 0; blk < blocks; blk++) {
          int ic = blk * MC;
          block_rows(k, o, ic, o->M - ic < MC ? o->M - ic : MC, jc, nc, pc, kc, pa, pb);
        }
      }
    }
  }
  return !failed;
}

/* Threads split the longer of M and N, as gemm.c's blocked product does (rows
** shared step by step where they make enough blocks). Every thread has its
** buffers before any writes C; 0 (C untouched) when one cannot. */
static int blocked(const GemmBf16Kernels *k, const Operands *o, int nt) {
  int split_n = o->N > o->M && o->N >= 4 * k->nr * nt;
  int unit = split_n ? k->nr : k->mr, dim = split_n ? o->N : o->M, units = (dim + unit - 1) / unit;
  uint16_t *pa, *pb;
  if (nt > units) nt = units;
  if ((double)o->M * o->N * o->K < 1 << 20) nt = 1;
  if (nt <= 1) {
    if (!panels(k, o->N, &pa, &pb)) return 0;
    blocked_serial(k, o, 0, o->M, 0, o->N);
    return 1;
  }
  if (!split_n && gemm_share_rows(o->M, k->mc, nt) && blocked_shared(k, o, nt)) return 1;
  int failed = 0;
#pragma omp parallel num_threads(nt) shared(failed) private(pa, pb)
  {
    if (!panels(k, o->N, &pa, &pb)) {
#pragma omp atomic write
      failed = 1;
    }
#pragma omp barrier
    int t = omp_get_thread_num(), n = omp_get_num_threads(), stop;
#pragma omp atomic read
    stop = failed;
    int d0 = (int)((long)units * t / n) * unit, d1 = (int)((long)units * (t + 1) / n) * unit;
    if (d1 > dim) d1 = dim;
    if (!stop && d0 < d1) {
      if (split_n) blocked_serial(k, o, 0, o->M, d0, d1);
      else blocked_serial(k, o, d0, d1, 0, o->N);
    }
  }
  return !failed;
}

static void product(const Operands *o, int threads) {
  if (o->M <= 0 || o->N <= 0) return;
  int nt = omp_in_parallel() || threads < 1 ? 1 : threads;
  const GemmBf16Kernels *k = kernels_of(cpu_isa());
  if (takes_few_rows(o->M, o->N, o->B16 && !o->trans_a && o->trans_b) && o->K > 0 && o->alpha != 0.0f && !o->P &&
      few_rows(k, o, nt))
    return;
  /* Without memory for a thread's panels (a few hundred KB) nothing is left to
  ** compute with: OpenBLAS has no product with this arithmetic. */
  if (!blocked(k, o, nt)) {
    fprintf(stderr, "maskd: out of memory for the bf16 product's packing buffers\n");
    abort();
  }
}

void gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, int lda, const float *B,
               int ldb, float beta, float *C, int ldc, int threads) {
  Operands o = {trans_a, trans_b, M, N, K, alpha, beta, A, B, NULL, NULL, NULL, lda, ldb, ldc, C, NULL};
  product(&o, threads);
}

void gemm_bf16_bias(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                    const float *bias, float *C, float *G, int ldc, int threads) {
  Operands o = {trans_a, trans_b, M, N, K, 1.0f, 0.0f, A, B, bias, NULL, NULL, lda, ldb, ldc, C, G};
  product(&o, threads);
}

void gemm_bf16_gelu_grad(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda, const float *B,
                         int ldb, const float *P, float *C, int ldc, int threads) {
  Operands o = {trans_a, trans_b, M, N, K, 1.0f, 0.0f, A, B, NULL, P, NULL, lda, ldb, ldc, C, NULL};
  product(&o, threads);
}

void gemm_bf16w_bias(int M, int N, int K, const float *A, int lda, const uint16_t *W, int ldw, const float *bias,
                     float *C, float *G, int ldc, int threads) {
  Operands o = {0, 1, M, N, K, 1.0f, 0.0f, A, NULL, bias, NULL, W, lda, ldw, ldc, C, G};
  product(&o, threads);
}
