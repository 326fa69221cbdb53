/* The bf16 products (gemm.h's gemm_bf16*, gemm_bf16_kernels.h):
** - the premises, on the instruction itself where the CPU has AVX512-BF16:
**   bf16.h's rounding is vcvtneps2bf16's, bit for bit, subnormals and NaN
**   included; vdpbf16ps adds the odd pair's product first, then the even one's,
**   each sum rounded, which is what the float emulation computes;
** - every level's product against a double-precision product of the
**   bf16-rounded operands (within float accumulation's error), over shapes that
**   hit every edge of the blocking (odd K, partial tiles, several slices of K),
**   all four transposes, alpha/beta, bias, GELU, GELU', bf16 weights (few rows
**   and blocked), one and two threads, a call inside a parallel region;
** - the levels give the same bits: vdpbf16ps at avx512bf16 and the emulation at
**   avx512, avx2 and generic, on random inputs and on every product shape of the
**   base model (forward, both backward products, the few-row fill-mask products).
** A level the CPU lacks is reported SKIP by name. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>

#include "engine/core/cpu.h"
#include "engine/core/bf16.h"
#include "engine/nn/fastmath.h"
#include "engine/nn/gemm.h"
#include "engine/nn/gemm_bf16_kernels.h"
#include "tests/unit/check.h"

#include <immintrin.h>

static uint64_t state = 88172645463325252ull;
static uint64_t next_u64(void) {
  state ^= state << 13; state ^= state >> 7; state ^= state << 17;
  return state;
}
static float uniform(void) { return (float)((next_u64() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }

/* ---------------------------------------------------------------- premises */

__attribute__((target("avx512f,avx512bf16"))) static uint16_t hw_round(float x) {
  __m256bh h = _mm512_cvtneps_pbh(_mm512_set1_ps(x));
  uint16_t out[16];
  memcpy(out, &h, sizeof out);
  return out[0];
}

__attribute__((target("avx512f,avx512bf16"))) static void hw_dot(float *acc, const uint16_t *a, const uint16_t *b) {
  __m512 r = _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a), (__m512bh)_mm512_loadu_si512(b));
  _mm512_storeu_ps(acc, r);
}

static void premises(void) {
  if (!cpu_has_avx512_bf16()) {
    check_skip("bf16_rounding_is_vcvtneps2bf16", "this CPU lacks AVX512-BF16");
    check_skip("vdpbf16ps_adds_odd_then_even", "this CPU lacks AVX512-BF16");
    return;
  }
  long bad = 0, n = 0;
  for (long it = 0; it < 4000000; it++, n++) {
    uint32_t u = (uint32_t)next_u64();
    if (it % 4 == 0) u &= 0x807fffffu;                 /* subnormals and zeros */
    if (it % 97 == 0) u |= 0x7f800000u;                /* infinities and NaNs */
    float x;
    memcpy(&x, &u, sizeof x);
    bad += hw_round(x) != bf16_from_f32(x);
  }
  check(bad == 0, "bf16_rounding_is_vcvtneps2bf16", "%ld of %ld floats round differently", bad, n);
  bad = n = 0;
  for (int it = 0; it < 100000; it++) {
    uint16_t a[32], b[32];
    float acc[16], want[16];
    for (int i = 0; i < 32; i++) {   /* magnitudes 2^-10 .. 2^10: no subnormal product or sum */
      a[i] = bf16_from_f32(uniform() * ldexpf(1.0f, (int)(next_u64() % 21) - 10));
      b[i] = bf16_from_f32(uniform() * ldexpf(1.0f, (int)(next_u64() % 21) - 10));
    }
    for (int i = 0; i < 16; i++) {
      acc[i] = uniform() * ldexpf(1.0f, (int)(next_u64() % 21) - 10);
      want[i] = fmaf(bf16_to_f32(a[2 * i]), bf16_to_f32(b[2 * i]),
                     fmaf(bf16_to_f32(a[2 * i + 1]), bf16_to_f32(b[2 * i + 1]), acc[i]));
    }
    hw_dot(acc, a, b);
    for (int i = 0; i < 16; i++, n++) bad += memcmp(&acc[i], &want[i], sizeof(float)) != 0;
  }
  check(bad == 0, "vdpbf16ps_adds_odd_then_even", "%ld of %ld sums differ from the emulation's order", bad, n);
}

/* --------------------------------------------------------------- products */

/* One product's inputs and outputs; kind 0 gemm_bf16 (alpha, beta), 1 bias,
** 2 bias + GELU, 3 GELU', 4 bf16 weights (bias + GELU), 5 bf16 weights (bias). */
typedef struct Case {
  int kind, ta, tb, M, N, K, pad, threads;
  float alpha, beta;
} Case;

typedef struct Data {
  int lda, ldb, ldc;
  float *A, *B, *bias, *P, *C0, *C, *G;
  uint16_t *W;
} Data;

static int is_w(int kind) { return kind >= 4; }

static void data_make(const Case *c, Data *d) {
  int ra = c->ta ? c->K : c->M, ca = c->ta ? c->M : c->K, rb = c->tb ? c->N : c->K, cb = c->tb ? c->K : c->N;
  d->lda = ca + c->pad; d->ldb = cb + c->pad; d->ldc = c->N + c->pad;
  size_t na = (size_t)ra * d->lda + 1, nb = (size_t)rb * d->ldb + 1, nc = (size_t)c->M * d->ldc + 1;
  d->A = malloc(na * sizeof(float)); d->B = malloc(nb * sizeof(float)); d->W = malloc(nb * sizeof(uint16_t));
  d->bias = malloc(((size_t)c->N + 1) * sizeof(float)); d->P = malloc(nc * sizeof(float));
  d->C0 = malloc(nc * sizeof(float)); d->C = malloc(nc * sizeof(float)); d->G = malloc(nc * sizeof(float));
  for (size_t i = 0; i < na; i++) d->A[i] = uniform();
  for (size_t i = 0; i < nb; i++) { d->B[i] = uniform() * 0.05f; d->W[i] = bf16_from_f32(d->B[i]); }
  for (int i = 0; i <= c->N; i++) d->bias[i] = uniform();
  for (size_t i = 0; i < nc; i++) { d->P[i] = 2 * uniform(); d->C0[i] = c->beta != 0 ? uniform() : NAN; }
}

static void data_free(Data *d) {
  free(d->A); free(d->B); free(d->W); free(d->bias); free(d->P); free(d->C0); free(d->C); free(d->G);
}

static void run(const Case *c, Data *d) {
  size_t nc = (size_t)c->M * d->ldc + 1;
  memcpy(d->C, d->C0, nc * sizeof(float));
  for (size_t i = 0; i < nc; i++) d->G[i] = -7.0f;
  int nt = c->threads ? c->threads : 2;
#pragma omp parallel num_threads(2) if (!c->threads)
#pragma omp single
  {
    float *G = c->kind == 2 || c->kind == 4 ? d->G : NULL;
    switch (c->kind) {
    case 0: gemm_bf16(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d->A, d->lda, d->B, d->ldb, c->beta, d->C, d->ldc, nt); break;
    case 1: case 2: gemm_bf16_bias(c->ta, c->tb, c->M, c->N, c->K, d->A, d->lda, d->B, d->ldb, d->bias, d->C, G, d->ldc, nt); break;
    case 3: gemm_bf16_gelu_grad(c->ta, c->tb, c->M, c->N, c->K, d->A, d->lda, d->B, d->ldb, d->P, d->C, d->ldc, nt); break;
    default: gemm_bf16w_bias(c->M, c->N, c->K, d->A, d->lda, d->W, d->ldb, d->bias, d->C, G, d->ldc, nt); break;
    }
  }
}

static int sanitized;   /* MASKD_ASAN: smaller base shapes (check.h's check_element_sampled samples the reference) */

/* The largest error of C (and G) against the double product of the rounded
** operands, in units of the float accumulation's bound; NaN-free margins checked. */
static double worst_error(const Case *c, const Data *d, int *margin_bad) {
  double worst = 0;
  *margin_bad = 0;
  for (int i = 0; i < c->M; i++) {
    for (int j = 0; j < c->N; j++) {
      if (!check_element_sampled(i, j, c->M, c->N, c->K)) continue;
      double s = 0, mag = 0;
      for (int k = 0; k < c->K; k++) {
        double a = bf16_round(c->ta ? d->A[(size_t)k * d->lda + i] : d->A[(size_t)i * d->lda + k]);
        double b = bf16_round(c->tb ? d->B[(size_t)j * d->ldb + k] : d->B[(size_t)k * d->ldb + j]);
        s += a * b;
        mag += fabs(a * b);
      }
      size_t at = (size_t)i * d->ldc + j;
      double want = c->kind == 0 ? c->alpha * s + (c->beta != 0 ? c->beta * (double)d->C0[at] : 0) : s;
      if (c->kind == 1 || c->kind == 2 || c->kind >= 4) want += d->bias[j];
      if (c->kind == 3) want *= fast_gelu_grad(d->P[at]);
      double bound = (2.0 * c->K + 8) * ldexp(1.0, -24) * (fabs(c->alpha) * mag + fabs(want) + 1e-30) + 1e-30;
      double e = c->kind == 2 || c->kind == 4 ? 0 : fabs(d->C[at] - want) / bound;
      if (c->kind == 2 || c->kind == 4) {   /* G = GELU(C): compared through C's bound, GELU being 1-Lipschitz-ish */
        double g = 0.5 * want * (1 + erf(want / sqrt(2.0)));
        e = fabs(d->G[at] - g) / (1.2 * bound + 4e-7);
      }
      if (!(e <= worst) ) worst = e;
    }
    for (int j = c->N; j < d->ldc; j++) *margin_bad += !isnan(d->C[(size_t)i * d->ldc + j]) && c->beta == 0 && c->kind == 0;
  }
  return worst;
}

static const int shapes[][3] = {{1, 1, 1},    {13, 33, 257}, {6, 16, 768},  {7, 17, 769},  {121, 96, 601},
                                {37, 5, 900}, {95, 47, 2001}, {300, 40, 17}, {7, 19, 0},   {40, 4200, 31},
                                {1, 40, 300}, {16, 300, 77},  {9, 50, 1001}, {32, 200, 96}, {24, 100, 31},
                                {250, 250, 250}};
/* The checks hold every case of these shapes in arrays of 16 x 4 x 6 (shapes, transposes, kinds). */
_Static_assert(sizeof shapes / sizeof shapes[0] <= 16, "more shapes than the case arrays hold");

static Case case_of(size_t d, int t, int kind) {
  Case c = {kind, t & 1, t >> 1, shapes[d][0], shapes[d][1], shapes[d][2], (int)(d % 3), 1 + (int)(d & 1), 1, 0};
  if (is_w(kind)) c.ta = 0, c.tb = 1;
  if (kind == 0) { c.alpha = (d & 1) ? -0.375f : 1.0f; c.beta = (d & 2) ? 0.5f : 0.0f; }
  if (d % 5 == 4) c.threads = 0;   /* inside a parallel region */
  return c;
}

static void against_reference(CpuIsa isa) {
  char name[96];
  snprintf(name, sizeof name, "gemm_bf16_%s_matches_double_reference", cpu_isa_name(isa));
  double worst = 0;
  int bad_margin = 0, runs = 0;
  const char *where = "";
  static char buf[160];
  for (size_t d = 0; d < sizeof shapes / sizeof shapes[0]; d++) {
    if (isa == CPU_ISA_GENERIC && (double)shapes[d][0] * shapes[d][1] * shapes[d][2] > 2e6) continue;   /* libm fmaf */
    for (int t = 0; t < 4; t++)
      for (int kind = 0; kind < 6; kind++) {
        if (is_w(kind) && t) continue;
        Case c = case_of(d, t, kind);
        Data dt;
        data_make(&c, &dt);
        run(&c, &dt);
        int mb;
        double e = worst_error(&c, &dt, &mb);
        bad_margin += mb;
        runs++;
        if (!(e <= worst)) {
          worst = e;
          snprintf(buf, sizeof buf, "kind %d ta %d tb %d %dx%dx%d", kind, c.ta, c.tb, c.M, c.N, c.K);
          where = buf;
        }
        data_free(&dt);
      }
  }
  check(worst <= 1.0 && bad_margin == 0, name, "worst error %.3g of the bound (%s), %d margin elements written, %d runs",
        worst, where, bad_margin, runs);
}

/* The output of case c at the chosen level into out (C then G, the whole ldc). */
static void outputs(const Case *c, uint64_t seed, float *out, size_t n) {
  state = seed;
  Data d;
  data_make(c, &d);
  run(c, &d);
  size_t nc = (size_t)c->M * d.ldc;
  memcpy(out, d.C, nc * sizeof(float));
  memcpy(out + nc, d.G, nc * sizeof(float));
  (void)n;
  data_free(&d);
}

static size_t out_len(const Case *c) { return 2 * (size_t)c->M * (c->N + c->pad) + 1; }

/* Cases at `isa` and at `ref` give the same bits. */
static int same_bits(const Case *cs, int n_cases, CpuIsa isa, CpuIsa ref, char *where, int cap) {
  int bad = 0;
  Err err;
  for (int i = 0; i < n_cases; i++) {
    size_t n = out_len(&cs[i]);
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    cpu_isa_select(isa, &err);
    outputs(&cs[i], 1000 + (uint64_t)i, x, n);
    cpu_isa_select(ref, &err);
    outputs(&cs[i], 1000 + (uint64_t)i, y, n);
    if (memcmp(x, y, (n - 1) * sizeof(float))) {
      if (!bad) snprintf(where, (size_t)cap, "kind %d ta %d tb %d %dx%dx%d", cs[i].kind, cs[i].ta, cs[i].tb, cs[i].M,
                         cs[i].N, cs[i].K);
      bad++;
    }
    free(x); free(y);
  }
  return bad;
}

/* The base model's products (hidden 768, intermediate 3072, vocabulary 50265),
** a training batch of 512 rows and 80 labelled rows, and fill-mask's 16 rows:
** forward (x W^T + b, the FFN's GELU), the weight gradient (dY^T X), the input
** gradient (dY W, GELU' for the FFN), and the few-row products with bf16 weights. */
static int base_cases(Case *cs) {
  /* Under the sanitizers a batch of 40 rows, 44 labelled rows and a vocabulary of 5021
  ** (none a multiple of the 6- or 12-row tiles, 5021 past two 2048-column blocks and six
  ** 768-deep slices: the tails stay): the plain build checks the model's shapes, and
  ** these products, run twice at two levels, took half of the run under ASan. */
  int H = 768, I = 3072, V = sanitized ? 5021 : 50265, N = sanitized ? 40 : 512, Mh = sanitized ? 44 : 80, n = 0;
  const int lin[][2] = {{3 * H, H}, {H, H}, {I, H}, {H, I}};   /* (out, in) */
  for (int l = 0; l < 4; l++) {
    int o = lin[l][0], k = lin[l][1];
    cs[n++] = (Case){l == 2 ? 2 : 1, 0, 1, N, o, k, 0, 2, 1, 0};   /* forward */
    cs[n++] = (Case){0, 1, 0, o, k, N, 0, 2, 1, 1};                /* dW += dY^T X */
    cs[n++] = (Case){l == 3 ? 3 : 0, 0, 0, N, k, o, 0, 2, 1, 0};   /* dX = dY W (GELU' after the FFN) */
    cs[n++] = (Case){l == 2 ? 4 : 5, 0, 1, 16, o, k, 0, 2, 1, 0}; /* fill-mask, bf16 weights */
    cs[n++] = (Case){5, 0, 1, N, o, k, 0, 2, 1, 0};                /* bf16 weights, blocked */
  }
  cs[n++] = (Case){1, 0, 1, Mh, V, H, 0, 2, 1, 0};       /* decoder forward */
  cs[n++] = (Case){0, 1, 0, V, H, Mh, 0, 2, 1, 1};       /* decoder weight gradient */
  cs[n++] = (Case){0, 0, 0, Mh, H, V, 0, 2, 1, 0};       /* decoder input gradient */
  cs[n++] = (Case){5, 0, 1, 16, V, H, 0, 2, 1, 0};       /* fill-mask decoder */
  return n;
}

/* Every shape in every transpose and kind (bf16 weights only as a Linear layer takes
** them) into cs (16 x 4 x 6); returns how many. */
static int shape_cases(Case *cs) {
  int n = 0;
  for (size_t d = 0; d < sizeof shapes / sizeof shapes[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int kind = 0; kind < 6; kind++)
        if (!(is_w(kind) && t)) cs[n++] = case_of(d, t, kind);
  return n;
}

static void levels_agree(void) {
  CpuIsa best = cpu_isa_best();
  Case random_cases[16 * 4 * 6];
  int nr = shape_cases(random_cases);
  Case base[32];
  int nb = base_cases(base);
  /* Every level below the CPU's best against the best: vdpbf16ps against each
  ** emulation where the CPU has AVX512-BF16, else the emulations against one another. */
  if (best < CPU_ISA_AVX512BF16)
    check_skip("gemm_bf16_avx512bf16_matches_the_emulation_bits", "this CPU lacks AVX512-BF16 (vdpbf16ps)");
  for (int lv = CPU_ISA_GENERIC; lv < (int)best; lv++) {
    char name[96], where[160] = "";
    snprintf(name, sizeof name, "gemm_bf16_%s_matches_%s_bits", cpu_isa_name(best), cpu_isa_name((CpuIsa)lv));
    /* generic's libm fmaf is slow: the random shapes there, the base shapes at the level below the best */
    int bad = 0, runs = 0;
    if (lv == CPU_ISA_GENERIC) {
      Case small[16 * 4 * 6];
      int ns = 0;
      for (int i = 0; i < nr; i++)
        if ((double)random_cases[i].M * random_cases[i].N * random_cases[i].K <= 2e6) small[ns++] = random_cases[i];
      bad = same_bits(small, ns, best, CPU_ISA_GENERIC, where, sizeof where);
      runs = ns;
    } else {
      bad = same_bits(random_cases, nr, best, (CpuIsa)lv, where, sizeof where);
      if (lv == (int)best - 1) bad += same_bits(base, nb, best, (CpuIsa)lv, where, sizeof where);
      runs = nr + (lv == (int)best - 1 ? nb : 0);
    }
    check(bad == 0, name, "%d of %d products differ in some bit (first: %s)", bad, runs, where);
  }
  Err err;
  cpu_isa_select(best, &err);
}

/* At avx512bf16 the blocked product runs vdpbf16ps or the avx512 emulation by
** their measured rates (gemm.h): the choice follows the rate, and the emulation's
** blocked product beside vdpbf16ps's few rows (the table Intel's cores get) gives
** vdpbf16ps's bits. (The other checks force vdpbf16ps, so that they test it on
** every CPU that has it.) */
static void blocked_choice(void) {
  if (cpu_isa_best() < CPU_ISA_AVX512BF16) {
    check_skip("gemm_bf16_blocked_kernels_follow_the_measured_rate", "this CPU lacks AVX512-BF16 (vdpbf16ps)");
    check_skip("gemm_bf16_avx512bf16_emulated_blocked_matches_vdpbf16ps_bits", "this CPU lacks AVX512-BF16 (vdpbf16ps)");
    return;
  }
  Err err;
  cpu_isa_select(CPU_ISA_AVX512BF16, &err);
  double ratio = gemm_bf16_dot_ratio();
  gemm_bf16_blocked_select(GEMM_BF16_BLOCKED_AUTO);
  int dot = gemm_bf16_runs_vdpbf16ps(512, 768, 0), few = gemm_bf16_runs_vdpbf16ps(16, 768, 1);
  const char *auto_backend = gemm_bf16_backend();
  gemm_bf16_blocked_select(GEMM_BF16_BLOCKED_EMULATED);
  const char *emu_backend = gemm_bf16_backend();
  int emu_dot = gemm_bf16_runs_vdpbf16ps(512, 768, 0), emu_few = gemm_bf16_runs_vdpbf16ps(16, 768, 1);
  check(ratio > 0.1 && ratio < 10 && dot == (ratio >= 1.0) && few && !emu_dot && emu_few &&
            !strcmp(auto_backend, dot ? "avx512bf16-blocked" : emu_backend) &&
            !strcmp(emu_backend, "avx512-bf16-emulated+avx512bf16-few-rows"),
        "gemm_bf16_blocked_kernels_follow_the_measured_rate",
        "vdpbf16ps at %.2fx the FMA's rate: auto ran %s (blocked by vdpbf16ps %d, few rows %d), forced emulation %s",
        ratio, auto_backend, dot, few, emu_backend);
  printf("# vdpbf16ps multiplies-adds at %.2fx the FMA's rate here: the blocked bf16 product runs %s\n", ratio,
         auto_backend);

  Case cs[16 * 4 * 6];
  int n = shape_cases(cs), bad = 0;
  char where[160] = "";
  for (int i = 0; i < n; i++) {
    size_t len = out_len(&cs[i]);
    float *x = malloc(len * sizeof(float)), *y = malloc(len * sizeof(float));
    gemm_bf16_blocked_select(GEMM_BF16_BLOCKED_EMULATED);
    outputs(&cs[i], 3000 + (uint64_t)i, x, len);
    gemm_bf16_blocked_select(GEMM_BF16_BLOCKED_VDPBF16PS);
    outputs(&cs[i], 3000 + (uint64_t)i, y, len);
    if (memcmp(x, y, (len - 1) * sizeof(float)) && !bad++)
      snprintf(where, sizeof where, "kind %d ta %d tb %d %dx%dx%d", cs[i].kind, cs[i].ta, cs[i].tb, cs[i].M, cs[i].N,
               cs[i].K);
    free(x); free(y);
  }
  check(bad == 0, "gemm_bf16_avx512bf16_emulated_blocked_matches_vdpbf16ps_bits",
        "%d of %d products differ in some bit (first: %s)", bad, n, where);
  gemm_bf16_blocked_select(GEMM_BF16_BLOCKED_VDPBF16PS);
}

/* A Linear layer's rows get the same bits in a pass of few rows (the few-row
** kernel, bf16 weights read in place) as among many (the blocked one): the first
** 16 rows of a 40-row product against the same 16 alone, bias and GELU, K past one
** slice and not. The server batches concurrent requests so and answers each as alone. */
static void few_rows_as_many(CpuIsa isa) {
  static const int dims[][2] = {{64, 3072}, {100, 769}, {48, 300}, {200, 2304}};
  enum { FEW = 16, MANY = 40 };
  int bad = 0;
  for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
    int N = dims[d][0], K = dims[d][1];
    float *A = malloc(sizeof(float) * MANY * K), *bias = malloc(sizeof(float) * N);
    uint16_t *W = malloc(sizeof(uint16_t) * N * K);
    float *c1 = malloc(sizeof(float) * FEW * N), *g1 = malloc(sizeof(float) * FEW * N);
    float *c2 = malloc(sizeof(float) * MANY * N), *g2 = malloc(sizeof(float) * MANY * N);
    for (int i = 0; i < MANY * K; i++) A[i] = uniform();
    for (int i = 0; i < N * K; i++) W[i] = bf16_from_f32(uniform());
    for (int j = 0; j < N; j++) bias[j] = uniform();
    gemm_bf16w_bias(FEW, N, K, A, K, W, K, bias, c1, g1, N, 2);
    gemm_bf16w_bias(MANY, N, K, A, K, W, K, bias, c2, g2, N, 2);
    if (memcmp(c1, c2, sizeof(float) * FEW * N) || memcmp(g1, g2, sizeof(float) * FEW * N)) {
      if (!bad) printf("# first difference: N=%d K=%d\n", N, K);
      bad++;
    }
    free(A); free(bias); free(W); free(c1); free(g1); free(c2); free(g2);
  }
  char name[96];
  snprintf(name, sizeof name, "gemm_bf16_%s_few_rows_as_many", cpu_isa_name(isa));
  check(bad == 0, name, "%d of %d shapes give other bits to the same rows in a pass of %d rows", bad,
        (int)(sizeof dims / sizeof dims[0]), MANY);
}

/* Products with rows enough for two threads to share their steps (gemm_bf16.c's
** blocked_shared: 8 blocks and more) give the bits of one thread, at each kind of
** product and transpose, with K in one slice and several. */
static void threads_share_steps(CpuIsa isa) {
  static const int dims[][3] = {{700, 40, 300}, {800, 33, 1000}};
  /* The level's table (vdpbf16ps's at avx512bf16: main() selects it) must make
  ** enough blocks of these rows for 2 threads to share them, or this tests nothing. */
  const GemmBf16Kernels *k = isa >= CPU_ISA_AVX512BF16 ? &gemm_bf16_kernels_avx512bf16
                             : isa == CPU_ISA_AVX512    ? &gemm_bf16_kernels_avx512
                             : isa == CPU_ISA_AVX2      ? &gemm_bf16_kernels_avx2
                                                        : &gemm_bf16_kernels_generic;
  char name[96];
  snprintf(name, sizeof name, "gemm_bf16_%s_shapes_take_the_shared_path", cpu_isa_name(isa));
  if (!gemm_shared_steps()) check_skip(name, "MASKD_GEMM_SHARE=fixed: no thread shares steps");
  else check(gemm_share_rows(700, k->mc, 2), name, "700 rows in blocks of %d make too few blocks for 2 threads", k->mc);
  int bad = 0, runs = 0;
  char where[160] = "";
  for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
    for (int t = 0; t < 4; t++)
      for (int kind = 0; kind < 6; kind++) {
        if (is_w(kind) && t) continue;
        Case one = {kind, t & 1, t >> 1, dims[d][0], dims[d][1], dims[d][2], (int)d, 1, kind ? 1.0f : -0.5f,
                    kind == 0 && (d & 1) ? 0.5f : 0.0f};
        if (is_w(kind)) one.ta = 0, one.tb = 1;
        Case two = one;
        two.threads = 2;
        size_t n = out_len(&one);
        float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
        outputs(&one, 3000 + (uint64_t)runs, x, n);
        outputs(&two, 3000 + (uint64_t)runs, y, n);
        runs++;
        if (memcmp(x, y, (n - 1) * sizeof(float))) {
          if (!bad) snprintf(where, sizeof where, "kind %d ta %d tb %d %dx%dx%d", kind, one.ta, one.tb, one.M, one.N,
                             one.K);
          bad++;
        }
        free(x); free(y);
      }
  snprintf(name, sizeof name, "gemm_bf16_%s_threads_share_steps_same_bits", cpu_isa_name(isa));
  check(bad == 0, name, "%d of %d products on two threads differ from one thread's (first: %s)", bad, runs, where);
}

int main(void) {
  sanitized = getenv("MASKD_ASAN") != NULL;
  gemm_bf16_blocked_select(GEMM_BF16_BLOCKED_VDPBF16PS);   /* the avx512bf16 checks test vdpbf16ps itself */
  premises();
  for (int lv = CPU_ISA_GENERIC; lv < CPU_ISA_COUNT; lv++) {
    Err err = {0};
    char name[96];
    snprintf(name, sizeof name, "gemm_bf16_%s_matches_double_reference", cpu_isa_name((CpuIsa)lv));
    if (cpu_isa_select((CpuIsa)lv, &err)) {
      check_skip(name, err.msg);
      snprintf(name, sizeof name, "gemm_bf16_%s_few_rows_as_many", cpu_isa_name((CpuIsa)lv));
      check_skip(name, err.msg);
      snprintf(name, sizeof name, "gemm_bf16_%s_threads_share_steps_same_bits", cpu_isa_name((CpuIsa)lv));
      check_skip(name, err.msg);
      continue;
    }
    against_reference((CpuIsa)lv);
    few_rows_as_many((CpuIsa)lv);
    if (lv != CPU_ISA_GENERIC) {
      threads_share_steps((CpuIsa)lv);
    } else {
      snprintf(name, sizeof name, "gemm_bf16_%s_threads_share_steps_same_bits", cpu_isa_name((CpuIsa)lv));
      check_skip(name, "libm's fmaf makes products of 700 rows too slow here; the other levels share the schedule");
    }
  }
  levels_agree();
  blocked_choice();
  return check_exit();
}
