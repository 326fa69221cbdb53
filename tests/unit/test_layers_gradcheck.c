/* Each layer of engine/nn/layers.c against a double-precision reference written
** here from its definition: the float forward must equal the reference, and
** the float backward must equal central finite differences of the reference
** (h = 1e-6 in double: truncation ~h^2, rounding ~1e-16/h, both < 1e-9). The
** scalar differentiated is L = sum(out * w) for a fixed random w, so dout = w.
** Float results carry ~1e-7 relative rounding per operation over sums of a few
** dozen terms: forward within 1e-5 relative, gradients within 1e-4 of the
** largest entry; a wrong term or index is an O(1) error.
**
** The layers' loops are compiled once per instruction-set level (engine/nn/
** layer_kernels.h); every check runs at every level this CPU has, selected with
** cpu_isa_select, and carries the level in its name (layer_layernorm_backward_avx2);
** a level the CPU lacks is one SKIP line. Between them the checks call every
** entry of LayerKernels (column_sums through matmul_backward's bias gradient). */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/layers.h"
#include "engine/core/cpu.h"
#include "engine/core/rng.h"
#include "tests/unit/check.h"

/* Threads for every layer call (each attention scratch below has room for 8). */
enum { LAYER_THREADS = 2 };

static Rng rng;

/* The level the checks run at, and a check's name with it ("layer_gelu_backward_avx2"),
** from a ring of buffers so that a check's name and its reason may both use it. */
static const char *level = "";
static const char *N(const char *base) {
  static char ring[4][96];
  static int next;
  char *b = ring[next++ & 3];
  snprintf(b, sizeof ring[0], "%s_%s", base, level);
  return b;
}

static double *rnd(size_t n, double scale) {
  double *x = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) x[i] = rng_normal(&rng) * scale;
  return x;
}
static float *tof(const double *x, size_t n) {
  float *f = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
  return f;
}
/* Rounds the double inputs to float so both sides see the same numbers. */
static void round_to_float(double *x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = (float)x[i]; }

typedef double (*RefLoss)(void *ctx);

/* max |analytic - fd| / max |fd| over the n entries of x (x is perturbed in place and restored). */
static double fd_compare(RefLoss f, void *ctx, double *x, const float *analytic, size_t n) {
  double dmax = 0, gmax = 0;
  for (size_t i = 0; i < n; i++) {
    double s = x[i], h = 1e-6;
    x[i] = s + h; double lp = f(ctx);
    x[i] = s - h; double lm = f(ctx);
    x[i] = s;
    double fd = (lp - lm) / (2 * h);
    gmax = fmax(gmax, fabs(fd));
    dmax = fmax(dmax, fabs(fd - analytic[i]));
  }
  return dmax / (gmax > 1e-12 ? gmax : 1e-12);
}

static double rel_diff(const float *a, const double *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) { d = fmax(d, fabs(a[i] - b[i])); m = fmax(m, fabs(b[i])); }
  return d / (m > 1e-12 ? m : 1e-12);
}

/* ------------------------------------------------------------ matmul */
typedef struct { int n, k, o; double *in, *w, *b, *dout, *out; } MM;
static double mm_ref(void *c) {
  MM *m = c;
  double L = 0;
  for (int r = 0; r < m->n; r++)
    for (int j = 0; j < m->o; j++) {
      double s = m->b[j];
      for (int i = 0; i < m->k; i++) s += m->in[r * m->k + i] * m->w[j * m->k + i];
      if (m->out) m->out[r * m->o + j] = s;
      L += s * m->dout[r * m->o + j];
    }
  return L;
}
static void test_matmul(void) {
  MM m = {7, 5, 6, NULL, NULL, NULL, NULL, NULL};
  m.in = rnd(35, 1); m.w = rnd(30, 1); m.b = rnd(6, 1); m.dout = rnd(42, 1); m.out = calloc(42, sizeof(double));
  round_to_float(m.in, 35); round_to_float(m.w, 30); round_to_float(m.b, 6); round_to_float(m.dout, 42);
  float *in = tof(m.in, 35), *w = tof(m.w, 30), *b = tof(m.b, 6), *dout = tof(m.dout, 42), out[42];
  matmul_forward(LAYER_FP32, out, in, w, b, 7, 5, 6, LAYER_THREADS);
  mm_ref(&m);
  check(rel_diff(out, m.out, 42) < 1e-5, N("layer_matmul_forward"), "%.3g", rel_diff(out, m.out, 42));
  free(m.out);
  m.out = NULL;
  float din[35], dw[30] = {0}, db[6] = {0};
  matmul_backward(LAYER_FP32, din, dw, db, dout, in, w, 7, 5, 6, 0, 1, LAYER_THREADS);
  double e1 = fd_compare(mm_ref, &m, m.in, din, 35), e2 = fd_compare(mm_ref, &m, m.w, dw, 30);
  double e3 = fd_compare(mm_ref, &m, m.b, db, 6);
  check(e1 < 1e-4 && e2 < 1e-4 && e3 < 1e-4, N("layer_matmul_backward"), "din %.3g dw %.3g db %.3g", e1, e2, e3);
  /* Accumulation: a second backward doubles the parameter gradients and, with din_accumulate, din. */
  float din2[35];
  memcpy(din2, din, sizeof din);
  matmul_backward(LAYER_FP32, din2, dw, db, dout, in, w, 7, 5, 6, 1, 1, LAYER_THREADS);
  int acc = 1;
  for (int i = 0; i < 35; i++) acc &= fabsf(din2[i] - 2 * din[i]) <= 1e-5f * (1 + fabsf(din[i]));
  check(acc, N("layer_matmul_backward_accumulates"), "din/dw do not add up");
  free(m.in); free(m.w); free(m.b); free(m.dout); free(in); free(w); free(b); free(dout);
  /* Few rows take the weight-streaming kernel: 1 and 3 rows, 11 outputs (not a multiple of 4). */
  for (int rows = 1; rows <= 3; rows += 2) {
    MM f = {rows, 37, 11, rnd(rows * 37, 1), rnd(11 * 37, 1), rnd(11, 1), rnd(rows * 11, 1), calloc(rows * 11, sizeof(double))};
    round_to_float(f.in, rows * 37); round_to_float(f.w, 11 * 37); round_to_float(f.b, 11);
    float *fi = tof(f.in, rows * 37), *fw = tof(f.w, 11 * 37), *fb = tof(f.b, 11), fo[33];
    matmul_forward(LAYER_FP32, fo, fi, fw, fb, rows, 37, 11, LAYER_THREADS);
    mm_ref(&f);
    char nm[64];
    snprintf(nm, sizeof nm, "layer_matmul_forward_%d_rows_%s", rows, level);
    check(rel_diff(fo, f.out, rows * 11) < 1e-5, nm, "%.3g", rel_diff(fo, f.out, rows * 11));
    free(f.in); free(f.w); free(f.b); free(f.dout); free(f.out); free(fi); free(fw); free(fb);
  }
}

/* --------------------------------------------------------- layernorm */
typedef struct { int n, c; double *in, *w, *b, *dout, *out, eps; } LN;
static double ln_ref(void *ctx) {
  LN *l = ctx;
  double L = 0;
  for (int r = 0; r < l->n; r++) {
    double mu = 0, var = 0;
    for (int i = 0; i < l->c; i++) mu += l->in[r * l->c + i];
    mu /= l->c;
    for (int i = 0; i < l->c; i++) var += pow(l->in[r * l->c + i] - mu, 2);
    var /= l->c;
    for (int i = 0; i < l->c; i++) {
      double y = (l->in[r * l->c + i] - mu) / sqrt(var + l->eps) * l->w[i] + l->b[i];
      if (l->out) l->out[r * l->c + i] = y;
      L += y * l->dout[r * l->c + i];
    }
  }
  return L;
}
static void test_layernorm(void) {
  enum { n = 5, c = 70 };   /* 70 columns: a block of 64 and a remainder */
  LN l = {n, c, rnd(n * c, 2), rnd(c, 1), rnd(c, 1), rnd(n * c, 1), calloc(n * c, sizeof(double)), 1e-5};
  for (int i = 0; i < n * c; i++) l.in[i] += 3;   /* an offset: the two-pass variance must cope */
  round_to_float(l.in, n * c); round_to_float(l.w, c); round_to_float(l.b, c); round_to_float(l.dout, n * c);
  float *in = tof(l.in, n * c), *w = tof(l.w, c), *b = tof(l.b, c), *dout = tof(l.dout, n * c);
  float out[n * c], mean[n], rstd[n], din[n * c], dw[c] = {0}, db[c] = {0};
  layernorm_forward(out, mean, rstd, in, w, b, n, c, 1e-5f, LAYER_THREADS);
  ln_ref(&l);
  check(rel_diff(out, l.out, n * c) < 1e-5, N("layer_layernorm_forward"), "%.3g", rel_diff(out, l.out, n * c));
  free(l.out); l.out = NULL;
  layernorm_backward(din, dw, db, dout, in, mean, rstd, w, n, c, 0, 1, LAYER_THREADS);
  double e1 = fd_compare(ln_ref, &l, l.in, din, n * c), e2 = fd_compare(ln_ref, &l, l.w, dw, c);
  double e3 = fd_compare(ln_ref, &l, l.b, db, c);
  check(e1 < 1e-4 && e2 < 1e-4 && e3 < 1e-4, N("layer_layernorm_backward"), "din %.3g dw %.3g db %.3g", e1, e2, e3);
  free(l.in); free(l.w); free(l.b); free(l.dout); free(in); free(w); free(b); free(dout);
}

/* -------------------------------------------------------------- gelu */
typedef struct { int n; double *in, *dout; } GE;
static double gelu_ref(void *ctx) {
  GE *g = ctx;
  double L = 0;
  for (int i = 0; i < g->n; i++) L += 0.5 * g->in[i] * (1 + erf(g->in[i] / sqrt(2.0))) * g->dout[i];
  return L;
}
static void test_gelu(void) {
  enum { n = 400 };
  GE g = {n, rnd(n, 3), rnd(n, 1)};
  g.in[0] = 0; g.in[1] = -12; g.in[2] = 12; g.in[3] = 1e-4f;   /* the flat tails and the origin */
  round_to_float(g.in, n); round_to_float(g.dout, n);
  float *in = tof(g.in, n), *dout = tof(g.dout, n), out[n], pre[n], din[n], one = 1.0f;
  /* GELU is applied by the product that makes its input: n rows times a 1x1 identity. */
  matmul_gelu_forward(LAYER_FP32, pre, out, in, &one, NULL, n, 1, 1, LAYER_THREADS);
  double d = 0, dp = 0;
  for (int i = 0; i < n; i++) {
    d = fmax(d, fabs(out[i] - 0.5 * g.in[i] * (1 + erf(g.in[i] / sqrt(2.0)))));
    dp = fmax(dp, fabs(pre[i] - in[i]));
  }
  check(d < 1e-6 && dp == 0, N("layer_matmul_gelu_forward_exact_erf"), "max |gelu - exact| %.3g, |pre - x| %.3g", d, dp);
  float inplace[n];
  matmul_gelu_forward(LAYER_FP32, inplace, inplace, in, &one, NULL, n, 1, 1, LAYER_THREADS);
  check(!memcmp(inplace, out, sizeof out), N("layer_matmul_gelu_forward_in_place"), "GELU in place differs");
  gelu_backward(din, dout, in, n, LAYER_THREADS);
  double e = fd_compare(gelu_ref, &g, g.in, din, n);
  check(e < 1e-5, N("layer_gelu_backward"), "%.3g", e);
  double em = 0, ex = 0;
  for (int i = 0; i < 4000; i++) {
    float x = -9.0f + 18.0f * (float)i / 4000, y = x * 9.0f;
    em = fmax(em, fabs(layer_erff(x) - erf(x)));
    ex = fmax(ex, fabs(layer_expf(y) - exp((double)y)) / exp((double)y));
  }
  /* erf: Abramowitz-Stegun 7.1.26 (1.5e-7 in exact arithmetic, PyTorch's own vectorised
  ** erf) plus float rounding. */
  check(em < 4e-7 && ex < 5e-7, N("layer_erf_exp_accuracy"), "erf abs error %.3g, exp rel error %.3g", em, ex);
  /* GELU's derivative Phi(x) + x phi(x), through gelu_backward with dout = 1, against
  ** double: erf's error as above (2.2e-7 measured). */
  enum { NG = 4000 };
  float *gx = malloc(sizeof(float) * NG), *gone = malloc(sizeof(float) * NG), *gd = malloc(sizeof(float) * NG);
  for (int i = 0; i < NG; i++) { gx[i] = -9.0f + 18.0f * (float)i / NG; gone[i] = 1.0f; }
  gelu_backward(gd, gone, gx, NG, LAYER_THREADS);
  double eg = 0;
  for (int i = 0; i < NG; i++) {
    double x = gx[i], exact = 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    eg = fmax(eg, fabs(gd[i] - exact));
  }
  check(eg < 4e-7, N("layer_gelu_grad_accuracy"), "GELU'(x) abs error %.3g on [-9, 9]", eg);
  free(gx); free(gone); free(gd);
  check(layer_expf(-3e38f) == 0.0f && layer_expf(-100.0f) == 0.0f, N("layer_exp_underflows_to_zero"),
        "exp of the float minimum must be 0 for masked scores");
  /* A NaN (a damaged or diverged model's weights) stays NaN through exp and GELU,
  ** forward and backward, in the vector loops and their tails, and takes no undefined
  ** step on the way: the sanitizer build stopped at fast_expf's shift of the INT_MIN
  ** that converting NaN gave. The numbers beside it are untouched. */
  enum { NN = 37 };
  float nx[NN], npre[NN], nout[NN], nd[NN], n1[NN];
  for (int i = 0; i < NN; i++) { nx[i] = i % 3 == 0 ? NAN : 0.25f * (float)i - 4.0f; n1[i] = 1.0f; }
  matmul_gelu_forward(LAYER_FP32, npre, nout, nx, &one, NULL, NN, 1, 1, LAYER_THREADS);
  gelu_backward(nd, n1, nx, NN, LAYER_THREADS);
  int nan_ok = isnan(layer_expf(NAN)) && isnan(layer_erff(NAN));
  for (int i = 0; i < NN; i++)
    nan_ok &= i % 3 == 0 ? isnan(nout[i]) && isnan(nd[i]) : isfinite(nout[i]) && isfinite(nd[i]);
  check(nan_ok, N("layer_exp_gelu_nan_stays_nan"), "a NaN input must give NaN, and only there");
  free(g.in); free(g.dout); free(in); free(dout);
}

/* ---------------------------------------------------------- attention */
typedef struct { int B, T, C, A; double *qkv, *dout, *out; const float *mask; LayerDropout d; } AT;
static double att_ref(void *ctx) {
  AT *a = ctx;
  int hd = a->C / a->A;
  double L = 0, dscale = a->d.p > 0 ? 1.0 / (1.0 - (double)a->d.p) : 1;
  for (int b = 0; b < a->B; b++)
    for (int h = 0; h < a->A; h++)
      for (int q = 0; q < a->T; q++) {
        double s[16], mx = -INFINITY, sum = 0;
        for (int k = 0; k < a->T; k++) {
          double dot = 0;
          for (int j = 0; j < hd; j++)
            dot += a->qkv[(b * a->T + q) * 3 * a->C + h * hd + j] * a->qkv[(b * a->T + k) * 3 * a->C + a->C + h * hd + j];
          s[k] = a->mask && a->mask[b * a->T + k] != 0 ? -(double)FLT_MAX : dot / sqrt((double)hd);
          mx = fmax(mx, s[k]);
        }
        for (int k = 0; k < a->T; k++) { s[k] = exp(s[k] - mx); sum += s[k]; }
        for (int j = 0; j < hd; j++) {
          double acc = 0;
          for (int k = 0; k < a->T; k++) {
            size_t di = (((size_t)b * a->A + h) * a->T + q) * a->T + k;
            double keep = layer_dropout_keep(&a->d, di) ? dscale : 0;
            acc += s[k] / sum * keep * a->qkv[(b * a->T + k) * 3 * a->C + 2 * a->C + h * hd + j];
          }
          if (a->out) a->out[(b * a->T + q) * a->C + h * hd + j] = acc;
          L += acc * a->dout[(b * a->T + q) * a->C + h * hd + j];
        }
      }
  return L;
}
static void test_attention(float p, const char *name) {
  enum { B = 2, T = 7, C = 12, A = 3 };
  float mask[B * T] = {0};
  for (int t = 4; t < T; t++) mask[T + t] = -FLT_MAX;   /* row 1: last 3 keys are padding */
  AT a = {B, T, C, A, rnd(B * T * 3 * C, 1), rnd(B * T * C, 1), calloc(B * T * C, sizeof(double)), mask, {p, 99, 4, NULL, 0}};
  round_to_float(a.qkv, B * T * 3 * C); round_to_float(a.dout, B * T * C);
  float *qkv = tof(a.qkv, B * T * 3 * C), *dout = tof(a.dout, B * T * C);
  float ctx[B * T * C], att[B * A * T * T], dqkv[B * T * 3 * C], scratch[8 * 2 * T * T];
  attention_forward(LAYER_FP32, ctx, att, qkv, mask, B, T, C, A, &a.d, scratch, LAYER_THREADS);
  att_ref(&a);
  char nm[96];
  snprintf(nm, sizeof nm, "layer_attention_forward%s_%s", name, level);
  check(rel_diff(ctx, a.out, B * T * C) < 1e-5, nm, "%.3g", rel_diff(ctx, a.out, B * T * C));
  free(a.out); a.out = NULL;
  attention_backward(LAYER_FP32, dqkv, dout, qkv, att, B, T, C, A, &a.d, scratch, LAYER_THREADS);
  double e = fd_compare(att_ref, &a, a.qkv, dqkv, B * T * 3 * C);
  snprintf(nm, sizeof nm, "layer_attention_backward%s_%s", name, level);
  check(e < 1e-4, nm, "%.3g", e);
  free(a.qkv); free(a.dout); free(qkv); free(dout);
}

/* ------------------------------------------------- attention on rows */
/* attention_rows_* on a subset of the queries against the full attention above (which
** is checked against the reference): the same context and probabilities at those
** rows, and, for a dctx that is zero at the other rows, the same gradients. */
static void test_attention_rows(float p, const char *name) {
  enum { B = 2, T = 7, C = 12, A = 3, M = 5 };
  const int32_t qrows[M] = {1, 4, T + 0, T + 3, T + 6}, qstart[B + 1] = {0, 2, M};
  float mask[B * T] = {0};
  for (int t = 4; t < T; t++) mask[T + t] = -FLT_MAX;
  LayerDropout d = {p, 99, 4, NULL, 0};
  float qkv[B * T * 3 * C], q[M * C], kv[B * T * 2 * C], dctx_rows[M * C], dctx[B * T * C] = {0};
  for (int i = 0; i < B * T * 3 * C; i++) qkv[i] = (float)rng_normal(&rng);
  for (int i = 0; i < M * C; i++) dctx_rows[i] = (float)rng_normal(&rng);
  for (int r = 0; r < B * T; r++) memcpy(kv + r * 2 * C, qkv + r * 3 * C + C, 2 * C * sizeof(float));
  for (int m = 0; m < M; m++) {
    memcpy(q + m * C, qkv + qrows[m] * 3 * C, C * sizeof(float));
    memcpy(dctx + qrows[m] * C, dctx_rows + m * C, C * sizeof(float));
  }
  float ctx[B * T * C], att[B * A * T * T], dqkv[B * T * 3 * C], scratch[8 * 2 * T * T];
  float rctx[M * C], ratt[A * M * T], dq[M * C], dkv[B * T * 2 * C];
  attention_forward(LAYER_FP32, ctx, att, qkv, mask, B, T, C, A, &d, scratch, LAYER_THREADS);
  attention_backward(LAYER_FP32, dqkv, dctx, qkv, att, B, T, C, A, &d, scratch, LAYER_THREADS);
  attention_rows_forward(LAYER_FP32, rctx, ratt, q, kv, qrows, qstart, mask, B, T, C, A, M, &d, scratch, LAYER_THREADS);
  attention_rows_backward(LAYER_FP32, dq, dkv, dctx_rows, q, kv, ratt, qrows, qstart, B, T, C, A, M, &d, scratch, LAYER_THREADS);
  double ec = 0, ea = 0, eq = 0, ekv = 0, mq = 0, mkv = 0;
  for (int m = 0; m < M; m++) {
    int b = qrows[m] / T, t = qrows[m] % T;
    for (int i = 0; i < C; i++) {
      ec = fmax(ec, fabs(rctx[m * C + i] - ctx[qrows[m] * C + i]));
      eq = fmax(eq, fabs(dq[m * C + i] - dqkv[qrows[m] * 3 * C + i]));
      mq = fmax(mq, fabs(dqkv[qrows[m] * 3 * C + i]));
    }
    for (int h = 0; h < A; h++)
      for (int k = 0; k < T; k++)
        ea = fmax(ea, fabs(ratt[((size_t)h * M + m) * T + k] - att[(((size_t)b * A + h) * T + t) * T + k]));
  }
  for (int r = 0; r < B * T; r++)
    for (int i = 0; i < 2 * C; i++) {
      ekv = fmax(ekv, fabs(dkv[r * 2 * C + i] - dqkv[r * 3 * C + C + i]));
      mkv = fmax(mkv, fabs(dqkv[r * 3 * C + C + i]));
    }
  char nm[96];
  snprintf(nm, sizeof nm, "layer_attention_rows_forward%s_%s", name, level);
  check(ec < 1e-5 && ea < 1e-6, nm, "ctx %.3g, probabilities %.3g from the full attention's", ec, ea);
  snprintf(nm, sizeof nm, "layer_attention_rows_backward%s_%s", name, level);
  check(eq < 1e-5 * (1 + mq) && ekv < 1e-5 * (1 + mkv), nm, "dq %.3g, dkv %.3g from the full attention's", eq, ekv);
}

/* ------------------------------------------------------------ dropout */
/* dropout_forward_inplace and dropout_backward against layer_dropout_keep, on a length
** that is no multiple of a vector (the loops' tails). */
static void test_dropout(void) {
  enum { n = 1003 };
  LayerDropout d = {0.3f, 7, 11, NULL, 0};
  float x[n], y[n], back[n];
  for (int i = 0; i < n; i++) x[i] = (float)rng_normal(&rng);
  memcpy(y, x, sizeof x);
  dropout_forward_inplace(y, n, &d, LAYER_THREADS);
  dropout_backward(back, x, n, &d, LAYER_THREADS);
  float scale = 1.0f / (1.0f - d.p);
  int wrong = 0, dropped = 0;
  for (int i = 0; i < n; i++) {
    float want = layer_dropout_keep(&d, i) ? x[i] * scale : 0.0f;
    dropped += want == 0.0f;
    wrong += y[i] != want || back[i] != want;
  }
  check(!wrong && dropped > 200 && dropped < 400, N("layer_dropout_forward_backward"), "%d wrong of %d, %d dropped",
        wrong, n, dropped);
}

/* ---------------------------------------- residual + dropout + layernorm */
static void test_residual_layernorm(void) {
  enum { n = 6, c = 50 };
  float x[n * c], y[n * c], w[c], b[c], res[n * c], out[n * c], mean[n], rstd[n], out2[n * c], mean2[n], rstd2[n];
  for (int i = 0; i < n * c; i++) { x[i] = (float)rng_normal(&rng) + 2; y[i] = (float)rng_normal(&rng); }
  for (int i = 0; i < c; i++) { w[i] = (float)rng_normal(&rng); b[i] = (float)rng_normal(&rng); }
  LayerDropout d = {0.25f, 5, 3, NULL, 0};
  residual_layernorm_forward(res, out, mean, rstd, x, y, w, b, n, c, 1e-5f, &d, LAYER_THREADS);
  int sum_ok = 1, dropped = 0;
  double *ref = malloc(sizeof(double) * n * c), *lw = malloc(sizeof(double) * c), *lb = malloc(sizeof(double) * c);
  for (int i = 0; i < n * c; i++) {
    double k = layer_dropout_keep(&d, i) ? 1 / 0.75 : 0;
    dropped += k == 0;
    sum_ok &= fabs(res[i] - (x[i] + y[i] * k)) < 1e-6;
    ref[i] = res[i];
  }
  for (int i = 0; i < c; i++) { lw[i] = w[i]; lb[i] = b[i]; }
  double *zero = calloc(n * c, sizeof(double)), *lout = calloc(n * c, sizeof(double));
  LN l = {n, c, ref, lw, lb, zero, lout, 1e-5};
  ln_ref(&l);
  double e = rel_diff(out, lout, n * c);
  check(sum_ok && dropped > 0 && dropped < n * c && e < 1e-5, N("layer_residual_dropout_layernorm"),
        "sum %s, %d dropped, LayerNorm rel diff %.3g", sum_ok ? "ok" : "wrong", dropped, e);
  /* Not keeping the sum (inference) changes nothing in the output. */
  residual_layernorm_forward(NULL, out2, mean2, rstd2, x, y, w, b, n, c, 1e-5f, &d, LAYER_THREADS);
  check(!memcmp(out, out2, sizeof out) && !memcmp(mean, mean2, sizeof mean) && !memcmp(rstd, rstd2, sizeof rstd),
        N("layer_residual_layernorm_without_sum"), "the output differs when the sum is not kept");
  free(ref); free(lw); free(lb); free(zero); free(lout);
}

/* --------------------------------------------------------- embeddings */
static void test_embeddings(void) {
  enum { n = 6, c = 40, V = 5, P = 8, TT = 2 };
  int32_t ids[n] = {0, 2, 2, 4, 1, 2}, pos[n] = {2, 3, 4, 1, 1, 7}, types[n] = {0, 1, 1, 0, 1, 0};
  double *wte = rnd(V * c, 1), *wpe = rnd(P * c, 1), *tte = rnd(TT * c, 1), *dout = rnd(n * c, 1);
  float *fwte = tof(wte, V * c), *fwpe = tof(wpe, P * c), *ftte = tof(tte, TT * c), *fd = tof(dout, n * c);
  float out[n * c];
  embeddings_forward(out, ids, pos, types, fwte, fwpe, ftte, n, c, LAYER_THREADS);
  double d = 0;
  for (int r = 0; r < n; r++)
    for (int i = 0; i < c; i++)
      d = fmax(d, fabs(out[r * c + i] - ((double)fwte[ids[r] * c + i] + ftte[types[r] * c + i] + fwpe[pos[r] * c + i])));
  check(d < 1e-6, N("layer_embeddings_forward"), "%.3g", d);
  /* Gradient: the linear map's exact adjoint; rows equal to the skip ids get nothing. */
  float dwte[V * c] = {0}, dwpe[P * c] = {0}, dtte[TT * c] = {0};
  embeddings_backward(dwte, dwpe, dtte, fd, ids, pos, types, n, c, 2, 1, LAYER_THREADS);
  double ew = 0, ep = 0, et = 0;
  for (int v = 0; v < V; v++)
    for (int i = 0; i < c; i++) {
      double s = 0;
      for (int r = 0; r < n; r++) if (ids[r] == v && v != 2) s += fd[r * c + i];
      ew = fmax(ew, fabs(dwte[v * c + i] - s));
    }
  for (int p = 0; p < P; p++)
    for (int i = 0; i < c; i++) {
      double s = 0;
      for (int r = 0; r < n; r++) if (pos[r] == p && p != 1) s += fd[r * c + i];
      ep = fmax(ep, fabs(dwpe[p * c + i] - s));
    }
  for (int t = 0; t < TT; t++)
    for (int i = 0; i < c; i++) {
      double s = 0;
      for (int r = 0; r < n; r++) if (types[r] == t) s += fd[r * c + i];
      et = fmax(et, fabs(dtte[t * c + i] - s));
    }
  check(ew < 1e-5 && ep < 1e-5 && et < 1e-5, N("layer_embeddings_backward_with_padding_idx"), "%.3g %.3g %.3g", ew, ep, et);
  free(wte); free(wpe); free(tte); free(dout); free(fwte); free(fwpe); free(ftte); free(fd);
}

/* ------------------------------------------------------ cross-entropy */
/* torch's CrossEntropyLoss(label_smoothing=s), summed over rows: (1-s) times the
** label's -log p plus s/v times the sum of every class's -log p, from log-softmax. */
typedef struct { int m, v; double *logits; const int32_t *labels; double smoothing; } CE;
static double ce_ref(void *ctx) {
  CE *c = ctx;
  double L = 0;
  for (int r = 0; r < c->m; r++) {
    const double *l = c->logits + (size_t)r * c->v;
    double mx = -INFINITY, s = 0, all = 0;
    for (int j = 0; j < c->v; j++) mx = fmax(mx, l[j]);
    for (int j = 0; j < c->v; j++) s += exp(l[j] - mx);
    double lse = log(s) + mx;
    for (int j = 0; j < c->v; j++) all += lse - l[j];
    L += (1 - c->smoothing) * (lse - l[c->labels[r]]) + c->smoothing / c->v * all;
  }
  return L;
}
static void test_crossentropy(float smoothing) {
  enum { m = 4, v = 33 };
  int32_t labels[m] = {3, 0, 32, 7};
  CE c = {m, v, rnd(m * v, 3), labels, smoothing};
  round_to_float(c.logits, m * v);
  c.logits[1 * v + 0] = 50;   /* row 1 predicts its label: one correct */
  float *lg = tof(c.logits, m * v), probs[m * v];
  double loss = 0;
  int correct = 0;
  char fw[64], bw[64];
  snprintf(fw, sizeof fw, "layer_crossentropy_forward%s", smoothing > 0 ? "_smoothed" : "");
  snprintf(bw, sizeof bw, "layer_crossentropy_backward%s", smoothing > 0 ? "_smoothed" : "");
  crossentropy_forward(probs, lg, labels, m, v, smoothing, &loss, &correct, LAYER_THREADS);
  double want = ce_ref(&c);
  int want_correct = 0;
  for (int r = 0; r < m; r++) {
    int am = 0;
    for (int j = 1; j < v; j++) if (c.logits[r * v + j] > c.logits[r * v + am]) am = j;
    want_correct += am == labels[r];
  }
  check(fabs(loss - want) < 1e-5 * fabs(want) && correct == want_correct, N(fw),
        "loss %.8g want %.8g, correct %d want %d", loss, want, correct, want_correct);
  /* In place (probs_out == logits, as training runs it): the same loss, the same softmax. */
  float inplace[m * v];
  memcpy(inplace, lg, sizeof inplace);
  double loss2 = 0;
  int correct2 = 0;
  crossentropy_forward(inplace, inplace, labels, m, v, smoothing, &loss2, &correct2, LAYER_THREADS);
  char ip[80];
  snprintf(ip, sizeof ip, "%s_in_place", fw);
  check(loss2 == loss && correct2 == correct && memcmp(inplace, probs, sizeof inplace) == 0, N(ip),
        "loss %.8g against %.8g", loss2, loss);
  float dl[m * v];
  crossentropy_backward(dl, probs, labels, m, v, smoothing, 0.5f, LAYER_THREADS);
  for (int i = 0; i < m * v; i++) dl[i] *= 2;
  double e = fd_compare(ce_ref, &c, c.logits, dl, m * v);
  check(e < 1e-5, N(bw), "%.3g", e);
  free(c.logits); free(lg);
}

int main(void) {
  for (int isa = CPU_ISA_GENERIC; isa <= CPU_ISA_AVX512; isa++) {   /* avx512bf16's float kernels are avx512's */
    Err err = {0};
    char name[64];
    snprintf(name, sizeof name, "layer_checks_%s", cpu_isa_name((CpuIsa)isa));
    if (cpu_isa_select((CpuIsa)isa, &err)) { check_skip(name, err.msg); continue; }
    level = cpu_isa_name((CpuIsa)isa);
    rng_seed(&rng, 2026);   /* every level sees the same inputs */
    test_matmul();
    test_layernorm();
    test_gelu();
    test_attention(0.0f, "");
    test_attention(0.3f, "_dropout");
    test_attention_rows(0.0f, "");
    test_attention_rows(0.3f, "_dropout");
    test_dropout();
    test_residual_layernorm();
    test_embeddings();
    test_crossentropy(0);
    test_crossentropy(0.1f);
  }
  return check_exit();
}
