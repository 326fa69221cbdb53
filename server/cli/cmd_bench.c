/* maskd bench: throughput of a fresh model on synthetic batches, and the
** machine's matrix-product peak (maskd's gemm_f32, with OpenBLAS's beside it)
** that the achieved GFLOP/s is measured against.
**
**   maskd bench train|infer --config CONFIG.json|tiny|small|base --batch B --seq T --steps N
**                           [--threads N] [--warmup N] [--seed S] [--peak GFLOPS] [--keep-dropout]
**                           [--precision fp32|bf16] [--json]
**   maskd bench sgemm [--n N | --mnk M,N,K [--at] [--bt] [--copies N]] [--threads N] [--reps N]
**                     [--precision fp32|bf16] [--json]
**   mpirun -np 2 maskd bench comm [--config C] [--reps N] [--json]
**
** FLOPs are counted from the shapes, not measured: a forward pass is the
** multiply-adds of its matrix products (Q/K/V/output projections, both
** attention products, the FFN, the head at the labelled rows only); a training
** step is three times that (the backward pass computes the gradient of both
** operands of every product). Embedding lookups, LayerNorm, GELU, softmax and
** the optimizer are left out: they are memory-bound work that the count would
** only flatter. */
#include <cblas.h>
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/config.h"
#include "engine/core/bf16.h"
#include "engine/core/now.h"
#include "engine/core/cpu.h"
#include "engine/core/err.h"
#include "engine/nn/gemm.h"
#include "engine/nn/kernels_info.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"
#include "engine/core/platform.h"
#include "engine/core/rng.h"
#include "engine/dist/dist.h"
#include "server/cli/commands.h"
#include "server/cli/rank_identity.h"

typedef struct BenchArgs {
  const char *mode, *config;
  int batch, seq, steps, threads, warmup, reps, json, keep_dropout, ta, tb, copies;
  int bf16;   /* --precision: 0 fp32, 1 bf16 */
  long m, n, k;
  double peak;
  long seed;
} BenchArgs;

static void bench_defaults(void *p) {
  BenchArgs *a = p;
  memset(a, 0, sizeof *a);
  a->threads = platform_cpu_count();
  a->warmup = 2;
  a->reps = 10;
  a->copies = 1;
  a->seed = 1;
  a->m = a->n = a->k = 2048;
}

/* --n N: a square product, N x N times N x N. */
static int parse_square(const char *v, void *args) {
  BenchArgs *a = args;
  long n;
  if (cli_parse_long(v, 1, 65536, &n)) return -1;
  a->m = a->n = a->k = n;
  return 0;
}

/* --mnk M,N,K: three sizes in [1, 65536]. */
static int parse_mnk(const char *v, void *args) {
  BenchArgs *a = args;
  long m, n, k;
  char tail;
  if (sscanf(v, "%ld,%ld,%ld%c", &m, &n, &k, &tail) != 3 || m < 1 || n < 1 || k < 1 || m > 65536 || n > 65536 ||
      k > 65536)
    return -1;
  a->m = m; a->n = n; a->k = k;
  return 0;
}

enum { BENCH_TRAIN, BENCH_INFER, BENCH_SGEMM, BENCH_COMM, BENCH_MEMORY };
static const char *const bench_modes[] = {"train", "infer", "sgemm", "comm", "memory"};
#define MODEL_MODES (1u << BENCH_TRAIN | 1u << BENCH_INFER)
#define SGEMM_MODE (1u << BENCH_SGEMM)
#define COMM_MODE (1u << BENCH_COMM)
#define MEMORY_MODE (1u << BENCH_MEMORY)
#define OFF(f) offsetof(BenchArgs, f)
static const CliOpt bench_opts[] = {
  {.name = "--config", .kind = CLI_STRING, .off = OFF(config), .arg = "C",
   .help = "an HF config.json, or a preset: tiny (V8000 H128 L2 A2 I512),\n"
           "small (V8000 H256 L4 A4 I1024), base (V32000 H768 L12 A12 I3072)"},
  {.name = "--batch", .kind = CLI_INT, .off = OFF(batch), .lo = 1, .hi = 1 << 16, .arg = "B", .help = "batch size"},
  {.name = "--seq", .kind = CLI_INT, .off = OFF(seq), .lo = 1, .hi = 1 << 16, .arg = "T", .help = "sequence length"},
  {.name = "--steps", .kind = CLI_INT, .off = OFF(steps), .lo = 1, .hi = 1000000, .arg = "N",
   .help = "number of timed steps", .modes = MODEL_MODES},
  {.name = "--threads", .kind = CLI_INT, .off = OFF(threads), .lo = 1, .hi = 1024, .arg = "N", .def = "the CPU count",
   .help = "threads for BLAS and the model's loops"},
  {.name = "--warmup", .kind = CLI_INT, .off = OFF(warmup), .lo = 0, .hi = 1000000, .arg = "N", .def = CLI_DEFAULT,
   .help = "untimed steps first", .modes = MODEL_MODES},
  {.name = "--seed", .kind = CLI_LONG, .off = OFF(seed), .lo = 0, .hi = 0x7fffffffffffffffL, .arg = "S",
   .def = CLI_DEFAULT, .help = "seed of the weights and the synthetic batch", .modes = MODEL_MODES},
  {.name = "--peak", .kind = CLI_DOUBLE, .off = OFF(peak), .flo = 0, .fhi = 1e9, .open = CLI_OPEN_LO | CLI_OPEN_HI,
   .arg = "GFLOPS", .def = "measured, about 1 s",
   .help = "the product's peak in GFLOP/s to report against (measured: 2048^3 at --precision)",
   .modes = MODEL_MODES},
  {.name = "--keep-dropout", .kind = CLI_FLAG, .off = OFF(keep_dropout),
   .help = "keep the config's dropout (default: dropout 0, as the PyTorch comparison)", .modes = MODEL_MODES},
  {.name = "--n", .kind = CLI_CUSTOM, .arg = "N", .parse = parse_square, .expect = "an integer in [1, 65536]",
   .def = "2048", .help = "a square product N x N times N x N", .modes = SGEMM_MODE},
  {.name = "--mnk", .kind = CLI_CUSTOM, .arg = "M,N,K", .parse = parse_mnk,
   .expect = "three sizes M,N,K in [1, 65536]", .help = "an M x K times K x N product", .modes = SGEMM_MODE},
  {.name = "--at", .kind = CLI_FLAG, .off = OFF(ta), .help = "A transposed (dy^T x, a weight gradient)", .modes = SGEMM_MODE},
  {.name = "--bt", .kind = CLI_FLAG, .off = OFF(tb), .help = "B transposed (x W^T, a Linear layer)", .modes = SGEMM_MODE},
  {.name = "--copies", .kind = CLI_INT, .off = OFF(copies), .lo = 1, .hi = 4096, .arg = "N", .def = CLI_DEFAULT,
   .help = "copies of B to cycle through, so it comes from memory", .modes = SGEMM_MODE},
  {.name = "--reps", .kind = CLI_INT, .off = OFF(reps), .lo = 1, .hi = 100000, .arg = "N", .def = CLI_DEFAULT,
   .help = "timed products (comm: timed transfers; memory: timed passes)", .modes = SGEMM_MODE | COMM_MODE | MEMORY_MODE},
  {.name = "--precision", .kind = CLI_CHOICE, .off = OFF(bf16), .arg = "fp32|bf16", .def = CLI_DEFAULT,
   .help = "the matrix products' arithmetic: bf16 inputs with float sums (gemm_bf16); train: the\n"
           "model's Linear layers at bf16 (float master weights); infer: weights kept in bf16, as\n"
           "serving keeps them; sgemm: the bf16 product (--bt: B held in bf16, a served weight)",
   .modes = MODEL_MODES | SGEMM_MODE},
  {.name = "--json", .kind = CLI_FLAG, .off = OFF(json), .help = "one JSON object on stdout instead of the text report"},
};
#undef OFF

const CliSpec cli_spec_bench = {
  .name = "bench",
  .usage =
    "usage: maskd bench train|infer --config CONFIG.json|tiny|small|base --batch B --seq T --steps N\n"
    "                              [--threads N] [--warmup N] [--seed S] [--peak GFLOPS] [--keep-dropout]\n"
    "                              [--precision fp32|bf16] [--json]\n"
    "       maskd bench sgemm [--n N | --mnk M,N,K [--at] [--bt] [--copies N] | --config C --batch B --seq T]\n"
    "                         [--threads N] [--reps N] [--precision fp32|bf16] [--json]\n"
    "       mpirun -np 2 maskd bench comm [--config C] [--reps N] [--json]\n"
    "       maskd bench memory [--config C] [--threads N] [--reps N] [--json]\n"
    "\n"
    "train: timed AdamW training steps (forward, backward, optimizer with lr 1e-3, weight decay 0.01 and\n"
    "       clipping at norm 1) of a freshly initialised model on one synthetic batch with 15% of\n"
    "       the positions labelled; the MLM head runs at the labelled rows only. The report splits\n"
    "       the step into phases, and its matrix products by Linear layer (QKV, attn.out, ffn.up,\n"
    "       ffn.down, head), to set beside sgemm --config's products timed alone.\n"
    "infer: timed forward passes returning the logits at those same positions.\n"
    "sgemm: the C = A*B single-precision speed of maskd's product (the one the model uses) and\n"
    "       of OpenBLAS's, side by side (default 2048^3); with --config/--batch/--seq, each\n"
    "       matrix product of a training step of that model timed alone, and their sum: the\n"
    "       step time if nothing else cost anything. --bt takes B transposed (x W^T, a Linear\n"
    "       layer), --at A transposed (dy^T x, its weight gradient); --copies N cycles through\n"
    "       N copies of B so it comes from memory, as weights do.\n"
    "comm: under mpirun with 2 ranks, what MPI moves between them for a gradient of the model\n"
    "       (--config, default base): one rank's whole gradient sent one way, and both ranks\n"
    "       sending each other half of it at once (the exchange of data-parallel training), in\n"
    "       GB/s, beside memcpy of the same bytes within one process.\n"
    "memory: the rate one thread and --threads threads read 1 GiB from memory, and the least\n"
    "       time a forward pass on a few rows can take with the model's (--config, default\n"
    "       base) weights: every Linear weight and the decoder read once at that rate.\n"
    "\n",
  .tail = "Step times are medians; tokens/s counts every position of the batch.\n",
  .opts = bench_opts,
  .n_opts = (int)(sizeof bench_opts / sizeof bench_opts[0]),
  .modes = bench_modes,
  .n_modes = 5,
  .args_size = sizeof(BenchArgs),
  .defaults = bench_defaults,
  .col = 20,
};

/* 0: parsed; 1: --help printed; -1: refused (one line on stderr). */
static int parse_args(int argc, char **argv, BenchArgs *a) {
  bench_defaults(a);
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { cli_help(stdout, &cli_spec_bench); return 1; }
  if (argc < 2) { fprintf(stderr, "maskd bench: missing mode: train, infer, sgemm, comm or memory (maskd bench --help)\n"); return -1; }
  a->mode = argv[1];
  int mode = cli_mode(&cli_spec_bench, a->mode);
  if (mode < 0) {
    fprintf(stderr, "maskd bench: unknown mode '%s': expected train, infer, sgemm, comm or memory\n", a->mode);
    return -1;
  }
  int parsed = cli_parse(&cli_spec_bench, "bench", mode, argc, argv, 2, a, NULL, NULL);
  if (parsed) return parsed;
  if (mode == BENCH_COMM || mode == BENCH_MEMORY) return 0;
  if (mode == BENCH_SGEMM) {
    if (a->config && (!a->batch || !a->seq)) {
      fprintf(stderr, "maskd bench sgemm: --config needs --batch and --seq\n");
      return -1;
    }
    return 0;
  }
  if (!a->config) { fprintf(stderr, "maskd bench %s: --config is required\n", a->mode); return -1; }
  if (!a->batch) { fprintf(stderr, "maskd bench %s: --batch is required\n", a->mode); return -1; }
  if (!a->seq) { fprintf(stderr, "maskd bench %s: --seq is required\n", a->mode); return -1; }
  if (!a->steps) { fprintf(stderr, "maskd bench %s: --steps is required\n", a->mode); return -1; }
  return 0;
}

static void set_threads(int threads) {
  openblas_set_num_threads(threads);
  omp_set_num_threads(threads);
  platform_pin_threads(threads);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median of n values (sorts them). */
static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Who computes a timed product: maskd's gemm_f32, OpenBLAS's cblas_sgemm, or
** maskd's bf16 product: gemm_bf16 on float operands (training's Linear layers),
** or gemm_bf16w_bias with B^T held in bf16 (a served weight; needs --bt, no --at). */
enum { BY_MASKD, BY_OPENBLAS, BY_MASKD_BF16, BY_MASKD_BF16W };

/* One product C = op(A) op(B); B16 (BY_MASKD_BF16W's bf16 B) replaces B when given. */
static void product(int by, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                    const uint16_t *B16, int ldb, float *C) {
  int nt = omp_get_max_threads();
  if (by == BY_OPENBLAS)
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A, lda,
                B, ldb, 0.0f, C, N);
  else if (by == BY_MASKD_BF16W)
    gemm_bf16w_bias(M, N, K, A, lda, B16, ldb, NULL, C, NULL, N, nt);
  else if (by == BY_MASKD_BF16)
    gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, nt);
  else
    gemm_f32(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N, nt);
}

/* B's bytes per element as the product reads it. */
static int b_bytes(int by) { return by == BY_MASKD_BF16W ? 2 : 4; }

/* 1 when vdpbf16ps computes the M x N product: two multiply-adds per 32-bit lane. */
static int by_dpbf16(int by, long M, long N) {
  return (by == BY_MASKD_BF16 || by == BY_MASKD_BF16W) && gemm_bf16_runs_vdpbf16ps((int)M, (int)N, by == BY_MASKD_BF16W);
}

/* The bound a product's GFLOP/s is measured against, from the measured FMA peak:
** vdpbf16ps's measured rate relative to it (2x on Zen 5, 0.5x on Intel's cores);
** the float emulation of bf16 runs at the FMA's rate. */
static double peak_of(int by, long M, long N, double fma) {
  return by_dpbf16(by, M, N) ? gemm_bf16_dot_ratio() * fma : fma;
}

/* What peak_of() is: "FMA" or "vdpbf16ps". */
static const char *peak_name(int by, long M, long N) { return by_dpbf16(by, M, N) ? "vdpbf16ps" : "FMA"; }

/* Median GFLOP/s of reps C = A*B products (row-major, M x K times K x N) after one
** untimed call, by maskd's product or OpenBLAS's; with copies > 1 the products
** take B from that many copies in turn, so that B comes from memory, not cache,
** as a model's weights do. -1 when the matrices cannot be allocated. */
/* per_thread: every thread of a parallel region runs its own products (32 in a
** row) on one thread, as the attention's per-head products run in the model,
** many to a region (C one per thread). */
static double sgemm_gflops_t(int by, int ta, int tb, long M, long N, long K, int reps, int copies,
                             int per_thread, double *best) {
  /* Allocated as the model allocates its tensors (64-byte lines, huge pages):
  ** rows that straddle cache lines would slow the product by about 10%. */
  int teams = per_thread ? omp_get_max_threads() : 1;
  size_t c_stride = ((size_t)(M * N) + 15) & ~(size_t)15;
  float *A = platform_alloc_floats((size_t)(M * K));
  float *B = platform_alloc_floats((size_t)(K * N) * (size_t)copies);
  float *C = platform_alloc_floats(c_stride * (size_t)teams);
  /* A weight held in bf16 (B^T, as serving keeps it): its copies are converted once, here. */
  size_t b_elems = (size_t)(K * N) * (size_t)copies;
  uint16_t *B16 = b_bytes(by) == 2 ? (uint16_t *)platform_alloc_floats(b_elems / 2 + 1) : NULL;
  double *t = malloc(sizeof(double) * (size_t)reps);
  double g = -1;
  if (A && B && C && t && (B16 || b_bytes(by) == 4)) {
    Rng r;
    rng_seed(&r, 7);
    for (long i = 0; i < M * K; i++) A[i] = (float)rng_uniform(&r) - 0.5f;
    for (long i = 0; i < K * N * copies; i++) B[i] = (float)rng_uniform(&r) - 0.5f;
    if (B16)
      for (long i = 0; i < K * N * copies; i++) B16[i] = bf16_from_f32(B[i]);
    int lda = ta ? (int)M : (int)K, ldb = tb ? (int)K : (int)N;
    int inner = per_thread ? 32 : 1;
    double flop = 2.0 * (double)M * (double)N * (double)K * teams * inner;
    *best = 0;
    for (int i = -1; i < reps; i++) {   /* the first, untimed */
      const float *Bi = B + (size_t)(K * N) * (size_t)((i + 1) % copies);
      const uint16_t *B16i = B16 ? B16 + (size_t)(K * N) * (size_t)((i + 1) % copies) : NULL;
      double t0 = now_monotonic();
      if (per_thread) {
#pragma omp parallel num_threads(teams)
        for (int j = 0; j < inner; j++)
          product(by, ta, tb, (int)M, (int)N, (int)K, A, lda, Bi, B16i, ldb, C + c_stride * (size_t)omp_get_thread_num());
      } else {
        product(by, ta, tb, (int)M, (int)N, (int)K, A, lda, Bi, B16i, ldb, C);
      }
      if (i < 0) continue;
      t[i] = now_monotonic() - t0;
      if (flop / t[i] * 1e-9 > *best) *best = flop / t[i] * 1e-9;
    }
    g = flop / median(t, reps) * 1e-9;
  }
  free(A); free(B); free(C); free(B16); free(t);
  return g;
}

static double sgemm_gflops(int by, long M, long N, long K, int reps, double *best) {
  return sgemm_gflops_t(by, 0, 0, M, N, K, reps, 1, 0, best);
}

static int load_config(const char *spec, ModelConfig *c, Err *err);

/* One matrix-product shape of a training step: C(MxN) = op(A) op(B), `count` times. */
typedef struct Shape { const char *name; int ta, tb; long m, n, k, count; int per_thread; } Shape;

/* The products of one training step of a Linear layer y = x W^T (x: rows x in):
** forward, input gradient dx = dy W, weight gradient dW = dy^T x. */
static int linear_shapes(Shape *s, const char *name, long rows, long in, long out, long count, int need_dx) {
  int n = 0;
  s[n++] = (Shape){name, 0, 1, rows, out, in, count, 0};
  if (need_dx) s[n++] = (Shape){"  dx", 0, 0, rows, in, out, count, 0};
  s[n++] = (Shape){"  dW", 1, 0, out, in, rows, count, 0};
  return n;
}

/* --config with sgemm: times each matmul shape of a training step of that config
** and batch (attention as one head's product, counted B*A times, timed as the
** model runs them: one per thread at once), and the sum of count x time: the
** step time if everything but the matrix products were free. */
/* The kernels the numbers were measured with, so two results from different
** machines or MASKD_ISA settings are never compared by mistake: a line under
** the text header, and fields of the JSON object (printed after its "{"). */
/* With them, the precision of the products (bf16: the bf16 product's kernels too). */
static void print_kernels_text(int bf16) {
  char line[256];
  kernels_info_line(line, (int)sizeof line);
  printf("  %s\n", line);
  if (bf16 && gemm_bf16_dot_ratio() > 0)
    printf("  precision bf16: bf16 products by %s (vdpbf16ps multiplies-adds at %.2fx the FMA's rate)\n",
           gemm_bf16_backend(), gemm_bf16_dot_ratio());
  else if (bf16) printf("  precision bf16: bf16 products by %s\n", gemm_bf16_backend());
  else printf("  precision fp32\n");
}

static void print_kernels_json(int bf16) {
  KernelsInfo k;
  kernels_info(&k);
  printf("\"precision\":\"%s\",\"bf16_backend\":\"%s\",\"dot_ratio\":%.4f,", bf16 ? "bf16" : "fp32",
         gemm_bf16_backend(), gemm_bf16_dot_ratio());
  printf("\"isa\":\"%s\",\"isa_best\":\"%s\",\"avx512_bf16\":%d,\"cpu\":\"", k.isa, k.best, k.avx512_bf16);
  for (const char *c = k.cpu; *c; c++)   /* a model name is plain text; escape what JSON requires anyway */
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if ((unsigned char)*c < 0x20) printf("\\u%04x", (unsigned char)*c);
    else putchar(*c);
  printf("\",");
}

static int bench_sgemm_shapes(const BenchArgs *a) {
  ModelConfig c;
  Err err = {0};
  if (load_config(a->config, &c, &err)) { fprintf(stderr, "maskd bench sgemm: %s\n", err.msg); return 1; }
  long B = a->batch, T = a->seq, H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  long L = c.num_hidden_layers, A = c.num_attention_heads, d = H / A, BT = B * T;
  long n = (long)(0.15 * T + 0.5) < 1 ? B : B * (long)(0.15 * T + 0.5);
  Shape sh[32];
  int ns = 0;
  ns += linear_shapes(sh + ns, "QKV", BT, H, 3 * H, L, 1);
  ns += linear_shapes(sh + ns, "attn.out", BT, H, H, L, 1);
  ns += linear_shapes(sh + ns, "ffn.up", BT, H, F, L, 1);
  ns += linear_shapes(sh + ns, "ffn.down", BT, F, H, L, 1);
  ns += linear_shapes(sh + ns, "head.dense", n, H, H, 1, 1);
  ns += linear_shapes(sh + ns, "decoder", n, H, V, 1, 1);
  /* per head: S = Q K^T (T x T, K = d), ctx = P V (T x d, K = T); backward dP = dctx V^T,
  ** dV = P^T dctx, dQ = dS K, dK = dS^T Q. */
  sh[ns++] = (Shape){"QK^T/head", 0, 1, T, T, d, L * B * A, 1};
  sh[ns++] = (Shape){"PV/head", 0, 0, T, d, T, L * B * A, 1};
  sh[ns++] = (Shape){"  dP", 0, 1, T, T, d, L * B * A, 1};
  sh[ns++] = (Shape){"  dV", 1, 0, T, d, T, L * B * A, 1};
  sh[ns++] = (Shape){"  dQ", 0, 0, T, d, T, L * B * A, 1};
  sh[ns++] = (Shape){"  dK", 1, 0, T, d, T, L * B * A, 1};
  set_threads(a->threads);
  /* At bf16 every product is bf16 (float operands rounded as packed), as training
  ** does: the Linear layers' and the attention's per-head products (layer_kernels.inc). */
  int lin = a->bf16 ? BY_MASKD_BF16 : BY_MASKD;
  double total_t = 0, total_f = 0, fma = peak_of(lin, n, V, gemm_fma_peak(a->threads));
  if (!a->json) {
    printf("maskd bench sgemm: the matrix products of a training step of %s, batch %ld x seq %ld, head at %ld rows, "
           "%d threads, %s\n", a->config, B, T, n, a->threads, a->bf16 ? "bf16 Linear layers" : "fp32");
    print_kernels_text(a->bf16);
    printf("  %-11s %5s %6s %6s %6s %6s %9s %9s %9s\n", "product", "op", "M", "N", "K", "count", "GFLOP/s",
           "ms/step", "OpenBLAS");
  } else {
    printf("{");
    print_kernels_json(a->bf16);
    printf("\"mode\":\"sgemm-shapes\",\"config\":\"%s\",\"batch\":%ld,\"seq\":%ld,\"threads\":%d,\"shapes\":[",
           a->config, B, T, a->threads);
  }
  for (int i = 0; i < ns; i++) {
    int pt = sh[i].per_thread;
    double best = 0, g = sgemm_gflops_t(lin, sh[i].ta, sh[i].tb, sh[i].m, sh[i].n, sh[i].k, a->reps, 1,
                                        pt, &best);
    double gb = sgemm_gflops_t(BY_OPENBLAS, sh[i].ta, sh[i].tb, sh[i].m, sh[i].n, sh[i].k, a->reps, 1, pt, &best);
    if (g < 0 || gb < 0) { fprintf(stderr, "maskd bench sgemm: out of memory\n"); return 1; }
    double f = 2.0 * sh[i].m * sh[i].n * sh[i].k * sh[i].count, t = f / (g * 1e9);
    total_t += t; total_f += f;
    if (a->json)
      printf("%s{\"name\":\"%s\",\"ta\":%d,\"tb\":%d,\"m\":%ld,\"n\":%ld,\"k\":%ld,\"count\":%ld,"
             "\"gflops\":%.2f,\"ms_per_step\":%.4f,\"openblas_gflops\":%.2f}", i ? "," : "", sh[i].name, sh[i].ta,
             sh[i].tb, sh[i].m, sh[i].n, sh[i].k, sh[i].count, g, t * 1e3, gb);
    else
      printf("  %-11s %c%c %6ld %6ld %6ld %6ld %9.1f %9.2f %9.1f\n", sh[i].name, sh[i].ta ? 'T' : 'N',
             sh[i].tb ? 'T' : 'N', sh[i].m, sh[i].n, sh[i].k, sh[i].count, g, t * 1e3, gb);
  }
  double all = total_f / total_t * 1e-9;
  if (a->json)
    printf("],\"gflop_per_step\":%.6f,\"matmul_ms_per_step\":%.3f,\"gflops\":%.2f,\"fma_peak_gflops\":%.2f}\n",
           total_f * 1e-9, total_t * 1e3, all, fma);
  else
    printf("  all products: %.1f GFLOP in %.1f ms = %.1f GFLOP/s (%.0f%% of the %s peak, %.1f): a training step\n"
           "  cannot be faster than this (%.0f tokens/s)\n", total_f * 1e-9, total_t * 1e3, all,
           fma > 0 ? 100.0 * all / fma : 0.0, peak_name(lin, n, V), fma, (double)BT / total_t);
  return 0;
}

static int bench_sgemm(const BenchArgs *a) {
  if (a->config) return bench_sgemm_shapes(a);
  double best = 0;
  set_threads(a->threads);
  /* bf16 with B^T is a served Linear layer: B held in bf16 (half the bytes it streams); otherwise float operands. */
  int by = !a->bf16 ? BY_MASKD : a->tb && !a->ta ? BY_MASKD_BF16W : BY_MASKD_BF16;
  double best_b = 0, g = sgemm_gflops_t(by, a->ta, a->tb, a->m, a->n, a->k, a->reps, a->copies, 0, &best);
  double gb = sgemm_gflops_t(BY_OPENBLAS, a->ta, a->tb, a->m, a->n, a->k, a->reps, a->copies, 0, &best_b);
  if (g < 0 || gb < 0) {
    fprintf(stderr, "maskd bench sgemm: out of memory for %ldx%ldx%ld\n", a->m, a->n, a->k);
    return 1;
  }
  const char *core = openblas_get_corename();
  const char *backend = a->bf16 ? gemm_bf16_backend() : gemm_backend();
  double fma = gemm_fma_peak(a->threads), peak = peak_of(by, a->m, a->n, fma);
  double ms = 2.0 * a->m * a->n * a->k / (g * 1e9) * 1e3, b_gbs = g / (2.0 * a->m) * b_bytes(by);
  if (a->json) {
    printf("{");
    print_kernels_json(a->bf16);
    printf("\"mode\":\"sgemm\",\"m\":%ld,\"n\":%ld,\"k\":%ld,\"at\":%d,\"bt\":%d,\"copies\":%d,\"threads\":%d,"
           "\"reps\":%d,\"backend\":\"%s\",\"b_bytes\":%d,\"gflops_median\":%.2f,\"gflops_best\":%.2f,"
           "\"ms_median\":%.6f,\"openblas_gflops_median\":%.2f,\"openblas_gflops_best\":%.2f,\"openblas_core\":\"%s\","
           "\"fma_peak_gflops\":%.2f,\"peak_gflops\":%.2f,\"peak_fraction\":%.4f}\n",
           a->m, a->n, a->k, a->ta, a->tb, a->copies, a->threads, a->reps, backend, b_bytes(by), g, best, ms, gb,
           best_b, core ? core : "", fma, peak, peak > 0 ? g / peak : 0.0);
  } else {
    printf("maskd bench sgemm: %ldx%ldx%ld%s%s, %d copies of B%s, %d threads, %d reps: maskd (%s) %s %.1f GFLOP/s "
           "median (best %.1f, %.3f ms); OpenBLAS (core %s) fp32 %.1f (best %.1f); B read at %.1f vs %.1f GB/s\n",
           a->m, a->n, a->k, a->ta ? " A^T" : "", a->tb ? " B^T" : "", a->copies, by == BY_MASKD_BF16W ? " (bf16)" : "",
           a->threads, a->reps, backend, a->bf16 ? "bf16" : "fp32", g, best, ms, core ? core : "?", gb, best_b, b_gbs,
           gb / (2.0 * a->m) * 4.0);
    if (peak > 0)
      printf("  %s peak %.1f GFLOP/s (multiply-adds in registers): maskd at %.0f%%; FMA peak %.1f: OpenBLAS at %.0f%%\n",
             peak_name(by, a->m, a->n), peak, 100.0 * g / peak, fma, fma > 0 ? 100.0 * gb / fma : 0.0);
    print_kernels_text(a->bf16);
  }
  return 0;
}

/* Forward-pass matmul FLOPs for a batch with the head at head_rows rows. */
static double forward_flops(const ModelConfig *c, int B, int T, int head_rows) {
  double bt = (double)B * T, H = c->hidden_size, F = c->intermediate_size, V = c->vocab_size;
  double layer = 2.0 * bt * H * 3.0 * H      /* Q, K, V projections */
               + 2.0 * 2.0 * B * (double)T * T * H  /* scores Q.K^T and probabilities.V, all heads */
               + 2.0 * bt * H * H           /* attention output dense */
               + 2.0 * 2.0 * bt * H * F;    /* FFN up and down */
  double head = 2.0 * head_rows * (H * H + H * V);  /* head dense and tied decoder */
  return layer * c->num_hidden_layers + head;
}

/* Synthetic full-length sequences: ids in [5, V) (never a special or pad id),
** about 15% of the positions of each row (at least one) labelled with their
** original id and replaced by id 4, as a collator's [MASK]. */
static void make_batch(const ModelConfig *c, int B, int T, uint64_t seed, int32_t *ids, int32_t *labels,
                       int32_t *positions, int *n_labels) {
  Rng r;
  rng_seed(&r, seed ^ 0x5eedba7c4ULL);
  uint32_t lo = c->vocab_size > 5 ? 5u : 0u;
  int k = (int)(0.15 * T + 0.5);
  if (k < 1) k = 1;
  int *perm = malloc(sizeof(int) * (size_t)T);
  *n_labels = 0;
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      ids[b * T + t] = (int32_t)(lo + rng_below(&r, (uint32_t)c->vocab_size - lo));
      labels[b * T + t] = MODEL_IGNORE_LABEL;
      perm[t] = t;
    }
    for (int j = 0; j < k; j++) {  /* partial Fisher-Yates: k distinct positions */
      int s = j + (int)rng_below(&r, (uint32_t)(T - j));
      int tmp = perm[j]; perm[j] = perm[s]; perm[s] = tmp;
    }
    for (int j = 0; j < k; j++) {
      int p = b * T + perm[j];
      labels[p] = ids[p];
      if (c->vocab_size > 5) ids[p] = 4;
    }
  }
  for (int p = 0; p < B * T; p++)  /* positions in increasing order */
    if (labels[p] != MODEL_IGNORE_LABEL) positions[(*n_labels)++] = p;
  free(perm);
}

static int load_config(const char *spec, ModelConfig *c, Err *err) {
  if (!strcmp(spec, "tiny") || !strcmp(spec, "small") || !strcmp(spec, "base")) return config_preset(spec, c, err);
  return config_load(spec, c, err);
}

/* One train/infer benchmark: the model, its optimizer (train) or logits (infer), the
** synthetic batch, and what the timed steps measured. */
typedef struct BenchRun {
  int train;
  ModelConfig cfg;
  Model *m;
  AdamW *opt;
  AdamWSegment *segs;
  float *logits;
  int32_t *ids, *labels, *pos;
  int n_lab;
  double peak;
  double *t_step, *t_fwd, *t_bwd, *t_opt;   /* per step, warm-up included */
  double prof[MODEL_PHASE_COUNT], fb_sum, loss_first, loss_last;
  double prod_fwd[MODEL_PRODUCT_COUNT], prod_bwd[MODEL_PRODUCT_COUNT];   /* the matmul phase by product */
} BenchRun;

static void bench_run_free(BenchRun *r) {
  adamw_free(r->opt);
  model_free(r->m);
  free(r->segs); free(r->logits); free(r->ids); free(r->labels); free(r->pos);
  free(r->t_step); free(r->t_fwd); free(r->t_bwd); free(r->t_opt);
}

/* 1. The config, the sgemm peak, a fresh model, the batch, and the optimizer (train)
** or the logits (infer). -1 after one line on stderr. */
static int bench_setup(const BenchArgs *a, BenchRun *r) {
  Err err = {0};
  int B = a->batch, T = a->seq, total = a->warmup + a->steps;
  size_t bt = (size_t)B * (size_t)T;
  r->train = !strcmp(a->mode, "train");
  r->ids = malloc(sizeof(int32_t) * bt);
  r->labels = malloc(sizeof(int32_t) * bt);
  r->pos = malloc(sizeof(int32_t) * bt);
  r->t_step = calloc((size_t)total, sizeof(double));
  r->t_fwd = calloc((size_t)total, sizeof(double));
  r->t_bwd = calloc((size_t)total, sizeof(double));
  r->t_opt = calloc((size_t)total, sizeof(double));
  if (!r->ids || !r->labels || !r->pos || !r->t_step || !r->t_fwd || !r->t_bwd || !r->t_opt) {
    fprintf(stderr, "maskd bench %s: out of memory\n", a->mode);
    return -1;
  }
  ModelConfig *cfg = &r->cfg;
  if (load_config(a->config, cfg, &err)) {
    fprintf(stderr, "maskd bench %s: %s\n", a->mode, err.msg);
    return -1;
  }
  if (!a->keep_dropout) cfg->hidden_dropout_prob = cfg->attention_probs_dropout_prob = 0.0;
  int max_t = config_max_tokens(cfg);
  if (T > max_t) {
    fprintf(stderr, "maskd bench %s: --seq %d exceeds the %d positions of this config\n", a->mode, T, max_t);
    return -1;
  }
  set_threads(a->threads);
  double peak_best = 0;
  r->peak = a->peak;
  /* The peak is the 2048^3 product at the precision benchmarked. */
  if (r->peak <= 0) r->peak = sgemm_gflops(a->bf16 ? BY_MASKD_BF16 : BY_MASKD, 2048, 2048, 2048, 5, &peak_best);
  if (!(r->m = model_new(cfg, &err))) { fprintf(stderr, "maskd bench %s: %s\n", a->mode, err.msg); return -1; }
  model_init_weights(r->m, a->seed);
  model_set_threads(r->m, a->threads);
  /* bf16: training keeps float master weights and rounds as products read them;
  ** inference keeps the matrices in bf16 only, as serving does. */
  if (a->bf16 && r->train) model_set_precision(r->m, MODEL_BF16);
  if (a->bf16 && !r->train && model_keep_bf16_weights(r->m, 1, &err)) {
    fprintf(stderr, "maskd bench infer: %s\n", err.msg);
    return -1;
  }
  make_batch(cfg, B, T, a->seed, r->ids, r->labels, r->pos, &r->n_lab);
  if (model_plan(r->m, B, T, r->n_lab, r->train, &err)) {
    fprintf(stderr, "maskd bench %s: %s\n", a->mode, err.msg);
    return -1;
  }
  model_set_dropout(r->m, r->train && a->keep_dropout, a->seed);
  if (r->train) {
    int n = model_tensor_count(r->m);
    r->segs = malloc(sizeof *r->segs * (size_t)(n > 0 ? n : 1));
    if (!r->segs) { fprintf(stderr, "maskd bench train: out of memory\n"); return -1; }
    for (int i = 0; i < n; i++) {
      const ModelTensor *t = model_tensor(r->m, i);
      r->segs[i] = (AdamWSegment){t->offset, t->numel, t->decay};
    }
    AdamWConfig oc = adamw_defaults();
    oc.lr = 1e-3;
    oc.weight_decay = 0.01;
    oc.clip_norm = 1.0;
    oc.warmup_steps = 1;
    oc.total_steps = total + 1;
    if (!(r->opt = adamw_new(&oc, model_num_params(r->m), r->segs, n, &err))) {
      fprintf(stderr, "maskd bench train: %s\n", err.msg);
      return -1;
    }
  } else if (!(r->logits = malloc(sizeof(float) * (size_t)r->n_lab * (size_t)cfg->vocab_size))) {
    fprintf(stderr, "maskd bench infer: out of memory for the logits\n");
    return -1;
  }
  return 0;
}

/* 2. The steps, warm-up first: each one's forward, backward and optimizer times, and
** the model's own profile of the timed ones. -1 after one line on stderr. */
static int bench_steps(const BenchArgs *a, BenchRun *r) {
  Err err = {0};
  int total = a->warmup + a->steps;
  ModelBatch batch = {.batch = a->batch, .seq = a->seq, .input_ids = r->ids, .attention_mask = NULL,
                      .token_type_ids = NULL, .labels = r->labels};
  r->fb_sum = 0;
  for (int s = 0; s < total; s++) {
    if (s == a->warmup) model_profile_enable(r->m, 1);  /* resets: only timed steps count */
    double t0 = now_monotonic(), t1, t2, t3;
    if (r->train) {
      ModelLoss L;
      model_zero_grad(r->m);
      if (model_forward(r->m, &batch, &L, &err)) { fprintf(stderr, "maskd bench train: %s\n", err.msg); return -1; }
      t1 = now_monotonic();
      model_backward(r->m, 1.0f / (float)L.n_labels);
      t2 = now_monotonic();
      adamw_step(r->opt, model_params(r->m), model_grads(r->m));
      t3 = now_monotonic();
      if (s == 0) r->loss_first = L.loss_sum / L.n_labels;
      r->loss_last = L.loss_sum / L.n_labels;
    } else {
      if (model_logits_at(r->m, &batch, r->pos, r->n_lab, r->logits, &err)) {
        fprintf(stderr, "maskd bench infer: %s\n", err.msg);
        return -1;
      }
      t1 = t2 = t3 = now_monotonic();
    }
    r->t_step[s] = t3 - t0; r->t_fwd[s] = t1 - t0; r->t_bwd[s] = t2 - t1; r->t_opt[s] = t3 - t2;
    if (s >= a->warmup) r->fb_sum += t2 - t0;
  }
  model_profile_read(r->m, r->prof);
  model_profile_products(r->m, r->prod_fwd, r->prod_bwd);
  return 0;
}

/* 3. Medians of the timed steps, the FLOP counts, and the report (JSON or text). */
static void bench_report(const BenchArgs *a, BenchRun *r) {
  const ModelConfig *c = &r->cfg;
  int B = a->batch, T = a->seq, n_lab = r->n_lab, train = r->train, w = a->warmup, ns = a->steps;
  int total = w + ns;
  double peak = r->peak, fb_sum = r->fb_sum;
  const double *prof = r->prof;
  size_t bt = (size_t)B * (size_t)T;
  double step_min = r->t_step[w];
  for (int s = w; s < total; s++) if (r->t_step[s] < step_min) step_min = r->t_step[s];
  double step = median(r->t_step + w, ns), fwd = median(r->t_fwd + w, ns);
  double bwd = median(r->t_bwd + w, ns), op = median(r->t_opt + w, ns);
  double flop = forward_flops(c, B, T, n_lab) * (train ? 3.0 : 1.0);
  /* Model FLOPs (the full encoder, as the PyTorch model computes it) make the two
  ** implementations comparable; the peak fraction uses what maskd executes, which
  ** is less: it computes the last layer's queries, attention output and FFN at the
  ** labelled rows only (model_flops counts that). */
  double exec = model_flops(c, B, T, n_lab, train);
  double gflops = flop / step * 1e-9, tps = (double)bt / step, exec_gflops = exec / step * 1e-9;
  const char *mt = c->model_type == MODEL_ROBERTA ? "roberta" : "bert";
  if (a->json) {
    printf("{");
    print_kernels_json(a->bf16);
    printf("\"mode\":\"%s\",\"config\":\"%s\",\"model_type\":\"%s\",\"vocab_size\":%d,\"hidden_size\":%d,"
           "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"intermediate_size\":%d,\"params\":%zu,"
           "\"batch\":%d,\"seq\":%d,\"head_rows\":%d,\"threads\":%d,\"steps\":%d,\"warmup\":%d,"
           "\"step_ms_median\":%.6f,\"step_ms_min\":%.6f,\"tokens_per_s\":%.2f,\"gflop_per_step\":%.9g,"
           "\"gflops\":%.2f,\"executed_gflop_per_step\":%.9g,\"executed_gflops\":%.2f,"
           "\"peak_gflops\":%.2f,\"peak_fraction\":%.4f,"
           "\"phases_ms\":{\"forward\":%.3f,\"backward\":%.3f,\"optimizer\":%.3f}",
           a->mode, a->config, mt, c->vocab_size, c->hidden_size, c->num_hidden_layers,
           c->num_attention_heads, c->intermediate_size, model_num_params(r->m), B, T, n_lab, a->threads,
           ns, w, step * 1e3, step_min * 1e3, tps, flop * 1e-9, gflops, exec * 1e-9, exec_gflops, peak,
           exec_gflops / peak,
           fwd * 1e3, train ? bwd * 1e3 : 0.0, train ? op * 1e3 : 0.0);
    /* The model's own profile, mean ms per step; "other" is the rest of forward+backward. */
    printf(",\"profile_ms\":{");
    double psum = 0;
    for (int p = 0; p < MODEL_PHASE_COUNT; p++) {
      printf("\"%s\":%.3f,", model_phase_name(p), prof[p] / ns * 1e3);
      psum += prof[p];
    }
    printf("\"other\":%.3f}", (fb_sum - psum) / ns * 1e3);
    printf(",\"products_ms\":{");
    for (int p = 0; p < MODEL_PRODUCT_COUNT; p++)
      printf("%s\"%s\":{\"forward\":%.3f,\"backward\":%.3f}", p ? "," : "", model_product_name(p),
             r->prod_fwd[p] / ns * 1e3, r->prod_bwd[p] / ns * 1e3);
    printf("}");
    if (train) printf(",\"loss_first\":%.6f,\"loss_last\":%.6f", r->loss_first, r->loss_last);
    printf("}\n");
  } else {
    printf("maskd bench %s: %s (%s V%d H%d L%d A%d I%d, %.2fM params), batch %d x seq %d, %d threads, "
           "%d steps (+%d warm-up)\n", a->mode, a->config, mt, c->vocab_size, c->hidden_size,
           c->num_hidden_layers, c->num_attention_heads, c->intermediate_size, model_num_params(r->m) / 1e6,
           B, T, a->threads, ns, w);
    print_kernels_text(a->bf16);
    printf("  step %.2f ms median (min %.2f)   %.1f tokens/s\n", step * 1e3, step_min * 1e3, tps);
    printf("  model: %.2f GFLOP per step (%s, head at %d rows): %.1f GFLOP/s\n",
           flop * 1e-9, train ? "3x forward matmuls" : "forward matmuls", n_lab, gflops);
    printf("  executed: %.2f GFLOP (last layer at the labelled rows only): %.1f GFLOP/s = %.0f%% of the %s "
           "peak %.1f GFLOP/s\n", exec * 1e-9, exec_gflops, 100.0 * exec_gflops / peak,
           a->bf16 ? "bf16 product's" : "sgemm", peak);
    if (train) {
      printf("  phases (median ms): forward %.2f  backward %.2f  optimizer %.2f\n", fwd * 1e3, bwd * 1e3,
             op * 1e3);
      printf("  loss %.4f -> %.4f\n", r->loss_first, r->loss_last);
    }
    printf("  profile of %s (mean ms per step):", train ? "forward+backward" : "the forward");
    double psum = 0;
    for (int p = 0; p < MODEL_PHASE_COUNT; p++) {
      printf(" %s %.2f", model_phase_name(p), prof[p] / ns * 1e3);
      psum += prof[p];
    }
    printf(" other %.2f\n", (fb_sum - psum) / ns * 1e3);
    /* The matmul phase by Linear layer, to set beside bench sgemm --config's products timed alone. */
    printf("  matmul by product (mean ms per step%s):", train ? ", forward + backward" : "");
    for (int p = 0; p < MODEL_PRODUCT_COUNT; p++) {
      printf(" %s %.2f", model_product_name(p), r->prod_fwd[p] / ns * 1e3);
      if (train) printf(" + %.2f", r->prod_bwd[p] / ns * 1e3);
    }
    printf("\n");
  }
}

static int bench_model(const BenchArgs *a) {
  BenchRun r;
  memset(&r, 0, sizeof r);
  int rc = bench_setup(a, &r) || bench_steps(a, &r) ? 1 : 0;
  if (rc == 0) bench_report(a, &r);
  bench_run_free(&r);
  return rc;
}

/* comm: MPI between two ranks against memcpy, for a gradient the size of the model's. */
static int bench_comm(const BenchArgs *a) {
  if (!dist_launched()) {
    fprintf(stderr, "maskd bench comm: run it under mpirun with 2 ranks: mpirun -np 2 maskd bench comm --config base\n");
    return 2;
  }
  Err err = {0};
  Dist *d = dist_open(&err);
  if (!d) { fprintf(stderr, "maskd bench comm: %s\n", err.msg); return 1; }
  int me = dist_rank(d), rc = 1;
  ModelConfig c;
  Model *m = NULL;
  float *src = NULL, *dst = NULL;
  double *t_copy = NULL, *t_one = NULL, *t_both = NULL;
  if (dist_world(d) != 2) { if (me == 0) fprintf(stderr, "maskd bench comm: needs 2 ranks, mpirun started %d\n", dist_world(d)); goto done; }
  /* Two builds could differ in the model a preset gives, and so in the message sizes. */
  char exe[65];
  if (rank_identity_check(d, exe, &err)) {
    if (me == 0) fprintf(stderr, "maskd bench comm: %s\n", err.msg);
    goto done;
  }
  if (load_config(a->config ? a->config : "base", &c, &err) || !(m = model_new(&c, &err))) {
    if (me == 0) fprintf(stderr, "maskd bench comm: %s\n", err.msg);
    goto done;
  }
  size_t n = model_num_params(m), half = n / 2;
  src = platform_alloc_floats(n);
  dst = platform_alloc_floats(n);
  t_copy = malloc((size_t)a->reps * sizeof(double));
  t_one = malloc((size_t)a->reps * sizeof(double));
  t_both = malloc((size_t)a->reps * sizeof(double));
  if (!src || !dst || !t_copy || !t_one || !t_both) { fprintf(stderr, "maskd bench comm: out of memory\n"); goto done; }
  for (size_t i = 0; i < n; i++) src[i] = (float)(i & 1023), dst[i] = 0;   /* every page touched */
  for (int r = -1; r < a->reps; r++) {   /* round -1 warms up */
    double t0 = now_monotonic();
    memcpy(dst, src, n * sizeof(float));
    double tc = now_monotonic() - t0;
    DistReq q[2];
    dist_barrier(d, NULL);
    t0 = now_monotonic();
    if (me == 0) dist_isend_f32(d, src, n, 1, 7, &q[0]);
    else dist_irecv_f32(d, dst, n, 0, 7, &q[0]);
    dist_wait(d, q, 1);
    dist_barrier(d, NULL);
    double t1 = now_monotonic() - t0;
    t0 = now_monotonic();
    dist_isend_f32(d, src + (me ? 0 : half), me ? half : n - half, 1 - me, 8, &q[0]);
    dist_irecv_f32(d, dst + (me ? half : 0), me ? n - half : half, 1 - me, 8, &q[1]);
    dist_wait(d, q, 2);
    dist_barrier(d, NULL);
    double t2 = now_monotonic() - t0;
    if (r >= 0) { t_copy[r] = tc; t_one[r] = t1; t_both[r] = t2; }
  }
  double bytes = (double)n * sizeof(float), bh = (double)half * sizeof(float);
  double copy = bytes / median(t_copy, a->reps) / 1e9, one = bytes / median(t_one, a->reps) / 1e9;
  double both = bh / median(t_both, a->reps) / 1e9;
  if (me == 0) {
    if (a->json)
      printf("{\"floats\": %zu, \"memcpy_gb_s\": %.3f, \"send_gb_s\": %.3f, \"exchange_gb_s_each_way\": %.3f, \"reps\": %d}\n",
             n, copy, one, both, a->reps);
    else
      printf("gradient of %zu floats (%.0f MB), medians of %d:\n"
             "  memcpy in one process      %7.2f GB/s\n"
             "  MPI, one rank to the other %7.2f GB/s  (%.2f of memcpy)\n"
             "  MPI, both ways at once     %7.2f GB/s each way (half the gradient each)\n",
             n, bytes / 1e6, a->reps, copy, one, one / copy, both);
  }
  rc = 0;
done:
  model_free(m);
  free(src); free(dst); free(t_copy); free(t_one); free(t_both);
  dist_close(d);
  return rc;
}

/* The GB/s at which `threads` threads read the n words of buf, each its own
** contiguous part: median of reps passes. Integer sums, which the compiler
** vectorises at any level (a float sum it may not reorder), keep the reads live. */
static double read_rate(const uint64_t *buf, size_t n, int threads, int reps, double *times) {
  uint64_t sink = 0;
  for (int r = -1; r < reps; r++) {   /* pass -1 warms up */
    double t0 = now_monotonic();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      size_t t = (size_t)omp_get_thread_num(), nt = (size_t)omp_get_num_threads();
      size_t lo = n * t / nt, hi = n * (t + 1) / nt;
      uint64_t s = 0;
      for (size_t i = lo; i < hi; i++) s += buf[i];
      sink += s;
    }
    if (r >= 0) times[r] = now_monotonic() - t0;
  }
  if (sink == 1) fputc(' ', stderr);   /* never true for the fill below; keeps the sums */
  return (double)n * sizeof *buf / median(times, reps) / 1e9;
}

/* memory: read bandwidth, and the bound it puts on a forward pass over few rows. */
static int bench_memory(const BenchArgs *a) {
  Err err = {0};
  ModelConfig c;
  if (load_config(a->config ? a->config : "base", &c, &err)) {
    fprintf(stderr, "maskd bench memory: %s\n", err.msg);
    return 1;
  }
  size_t n = (size_t)1 << 27;   /* 1 GiB: far past any cache */
  uint64_t *buf = (uint64_t *)platform_alloc_floats(2 * n);
  double *times = malloc((size_t)a->reps * sizeof *times);
  if (!buf || !times) {
    fprintf(stderr, "maskd bench memory: out of memory (1 GiB)\n");
    free(buf); free(times);
    return 1;
  }
  platform_pin_threads(a->threads);
#pragma omp parallel for num_threads(a->threads) schedule(static)
  for (size_t i = 0; i < n; i++) buf[i] = i * 2 + 2;   /* each thread's pages on its node, every page touched */
  double one = read_rate(buf, n, 1, a->reps, times), all = read_rate(buf, n, a->threads, a->reps, times);
  double hid = c.hidden_size, inter = c.intermediate_size, layers = c.num_hidden_layers, vocab = c.vocab_size;
  double weight_bytes = 4.0 * (layers * (4 * hid * hid + 2 * hid * inter) + hid * hid + vocab * hid);
  double bound_ms = weight_bytes / (all * 1e9) * 1e3;
  if (a->json)
    printf("{\"read_gb_s_1_thread\": %.3f, \"read_gb_s\": %.3f, \"threads\": %d, \"weight_bytes\": %.0f, "
           "\"forward_bound_ms\": %.6f, \"reps\": %d}\n", one, all, a->threads, weight_bytes, bound_ms, a->reps);
  else
    printf("memory read, 1 GiB, medians of %d: 1 thread %.1f GB/s, %d threads %.1f GB/s\n"
           "the model's Linear weights and decoder: %.0f MB, read once in %.2f ms at %.1f GB/s: the least a\n"
           "forward pass over a few rows can take\n", a->reps, one, a->threads, all, weight_bytes / 1e6, bound_ms, all);
  free(buf);
  free(times);
  return 0;
}

int cmd_bench(int argc, char **argv) {
  BenchArgs a;
  int parsed = parse_args(argc, argv, &a);
  if (parsed) return parsed > 0 ? 0 : 2;
  if (!strcmp(a.mode, "comm")) return bench_comm(&a);
  if (!strcmp(a.mode, "memory")) return bench_memory(&a);
  return !strcmp(a.mode, "sgemm") ? bench_sgemm(&a) : bench_model(&a);
}
