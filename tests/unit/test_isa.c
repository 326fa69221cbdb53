/* The kernels of every instruction-set level (engine/nn/layer_kernels.h,
** adam_kernels.h) and the choice between them (engine/core/cpu.c).
**
** For each level this CPU runs, each LayerKernels entry is called directly on
** random inputs whose sizes leave vector tails (77 columns, 1003 elements, T = 13)
** and compared with the generic level's output and, where the layer has a short
** definition, with a double-precision reference written here. Reductions add in
** another order at another vector width, so results may differ in the last bits:
** 1e-5 of the largest entry (1e-6 for element-wise work) is the bound, where a
** wrong index or a lost tail gives O(1). AdamW's update is specified to give the
** same bits at every level (each vector lane does the scalar loop's operations):
** memcmp. A level the CPU lacks is one SKIP line. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/cpu.h"
#include "engine/core/rng.h"
#include "engine/nn/adam_kernels.h"
#include "engine/nn/layer_kernels.h"
#include "tests/unit/check.h"

enum { THREADS = 2 };

/* avx512bf16 runs avx512's float loops (its own kernels are the bf16 products, test_gemm_bf16). */
static const LayerKernels *const tables[CPU_ISA_COUNT] = {&layer_kernels_generic, &layer_kernels_avx2,
                                                          &layer_kernels_avx512, &layer_kernels_avx512};
static const AdamKernels *const adam_tables[CPU_ISA_COUNT] = {&adam_kernels_generic, &adam_kernels_avx2,
                                                             &adam_kernels_avx512, &adam_kernels_avx512};

static Rng rng;

static float *frand(size_t n, double scale, double offset) {
  float *x = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = (float)(rng_normal(&rng) * scale + offset);
  return x;
}
static float *fdup(const float *x, size_t n) {
  float *y = malloc(n * sizeof(float));
  memcpy(y, x, n * sizeof(float));
  return y;
}

/* max |a - b| / max |b|: the error relative to the result's scale. */
static double rel_f(const float *a, const float *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) { d = fmax(d, fabs((double)a[i] - b[i])); m = fmax(m, fabs((double)b[i])); }
  if (d != d) return INFINITY;
  return d / (m > 1e-30 ? m : 1e-30);
}
static double rel_d(const float *a, const double *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) { d = fmax(d, fabs((double)a[i] - b[i])); m = fmax(m, fabs(b[i])); }
  if (d != d) return INFINITY;
  return d / (m > 1e-30 ? m : 1e-30);
}

/* One check of an entry at a level: its distance from the generic level's output
** and (ref >= 0) from the double reference, each within tol. The generic level
** against itself with no reference would be a check that cannot fail: none is
** made (test_layers_gradcheck holds those entries to finite differences). */
static void report(const char *entry, CpuIsa isa, double vs_generic, double vs_ref, double tol) {
  if (isa == CPU_ISA_GENERIC && vs_ref < 0) return;
  char name[96];
  snprintf(name, sizeof name, "isa_%s_%s", entry, cpu_isa_name(isa));
  int ok = vs_generic <= tol && (vs_ref < 0 || vs_ref <= tol);
  if (vs_ref < 0) check(ok, name, "%.3g from the generic level (bound %.1g)", vs_generic, tol);
  else check(ok, name, "%.3g from the generic level, %.3g from the double reference (bound %.1g)", vs_generic, vs_ref, tol);
}

/* ------------------------------------------------------------ references */

static void ln_ref(double *out, double *mean, double *rstd, const float *in, const float *w, const float *b, int n,
                   int c, double eps) {
  for (int r = 0; r < n; r++) {
    double mu = 0, var = 0;
    for (int i = 0; i < c; i++) mu += in[r * c + i];
    mu /= c;
    for (int i = 0; i < c; i++) var += (in[r * c + i] - mu) * (in[r * c + i] - mu);
    double rs = 1 / sqrt(var / c + eps);
    if (mean) mean[r] = mu, rstd[r] = rs;
    for (int i = 0; i < c; i++) out[r * c + i] = (in[r * c + i] - mu) * rs * w[i] + b[i];
  }
}

/* --------------------------------------------------------------- entries */

static void test_column_sums(CpuIsa isa) {
  enum { n = 37, o = 77 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  float *dout = frand(n * o, 1, 0), *db0 = frand(o, 1, 0);
  float *k1 = fdup(db0, o), *g1 = fdup(db0, o), k0[o], g0[o];
  double ref1[o], ref0[o];
  K->column_sums(k1, dout, n, o, 1, THREADS);
  G->column_sums(g1, dout, n, o, 1, THREADS);
  K->column_sums(k0, dout, n, o, 0, THREADS);
  G->column_sums(g0, dout, n, o, 0, THREADS);
  for (int j = 0; j < o; j++) {
    ref0[j] = 0;
    for (int r = 0; r < n; r++) ref0[j] += dout[r * o + j];
    ref1[j] = ref0[j] + db0[j];
  }
  report("column_sums", isa, fmax(rel_f(k1, g1, o), rel_f(k0, g0, o)), fmax(rel_d(k1, ref1, o), rel_d(k0, ref0, o)), 1e-5);
  free(dout); free(db0); free(k1); free(g1);
}

static void test_layernorm(CpuIsa isa) {
  enum { n = 9, c = 77 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  float *in = frand(n * c, 2, 3), *w = frand(c, 1, 0), *b = frand(c, 1, 0), *dout = frand(n * c, 1, 0);
  float ko[n * c], go[n * c], km[n], gm[n], kr[n], gr[n];
  double ro[n * c], rm[n], rr[n];
  K->layernorm_forward(ko, km, kr, in, w, b, n, c, 1e-5f, THREADS);
  G->layernorm_forward(go, gm, gr, in, w, b, n, c, 1e-5f, THREADS);
  ln_ref(ro, rm, rr, in, w, b, n, c, 1e-5);
  double vg = fmax(rel_f(ko, go, n * c), fmax(rel_f(km, gm, n), rel_f(kr, gr, n)));
  double vr = fmax(rel_d(ko, ro, n * c), fmax(rel_d(km, rm, n), rel_d(kr, rr, n)));
  report("layernorm_forward", isa, vg, vr, 1e-5);

  /* Backward from the same saved statistics (the generic level's), adding into din,
  ** dw and db: din += rstd (w dout - mean(w dout) - xhat mean(w dout xhat)). */
  float *din0 = frand(n * c, 1, 0), *dw0 = frand(c, 1, 0), *db0 = frand(c, 1, 0);
  float *kdin = fdup(din0, n * c), *gdin = fdup(din0, n * c), *kdw = fdup(dw0, c), *gdw = fdup(dw0, c);
  float *kdb = fdup(db0, c), *gdb = fdup(db0, c);
  K->layernorm_backward(kdin, kdw, kdb, dout, in, gm, gr, w, n, c, 1, 1, THREADS);
  G->layernorm_backward(gdin, gdw, gdb, dout, in, gm, gr, w, n, c, 1, 1, THREADS);
  double rdin[n * c], rdw[c], rdb[c];
  for (int i = 0; i < c; i++) rdw[i] = dw0[i], rdb[i] = db0[i];
  for (int r = 0; r < n; r++) {
    double m1 = 0, m2 = 0;
    for (int i = 0; i < c; i++) {
      double xh = (in[r * c + i] - (double)gm[r]) * gr[r], g = (double)w[i] * dout[r * c + i];
      m1 += g;
      m2 += g * xh;
      rdw[i] += dout[r * c + i] * xh;
      rdb[i] += dout[r * c + i];
    }
    m1 /= c, m2 /= c;
    for (int i = 0; i < c; i++) {
      double xh = (in[r * c + i] - (double)gm[r]) * gr[r], g = (double)w[i] * dout[r * c + i];
      rdin[r * c + i] = din0[r * c + i] + gr[r] * (g - m1 - xh * m2);
    }
  }
  vg = fmax(rel_f(kdin, gdin, n * c), fmax(rel_f(kdw, gdw, c), rel_f(kdb, gdb, c)));
  vr = fmax(rel_d(kdin, rdin, n * c), fmax(rel_d(kdw, rdw, c), rel_d(kdb, rdb, c)));
  report("layernorm_backward", isa, vg, vr, 1e-5);
  free(in); free(w); free(b); free(dout); free(din0); free(dw0); free(db0);
  free(kdin); free(gdin); free(kdw); free(gdw); free(kdb); free(gdb);
}

static void test_gelu_backward(CpuIsa isa) {
  enum { n = 1003 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  float *in = frand(n, 3, 0), *dout = frand(n, 1, 0), kd[n], gd[n];
  in[0] = 0, in[1] = -12, in[2] = 12;
  K->gelu_backward(kd, dout, in, n, THREADS);
  G->gelu_backward(gd, dout, in, n, THREADS);
  double ref[n];
  for (int i = 0; i < n; i++) {
    double x = in[i];
    ref[i] = dout[i] * (0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI));
  }
  report("gelu_backward", isa, rel_f(kd, gd, n), rel_d(kd, ref, n), 1e-6);
  free(in); free(dout);
}

static void test_residual_layernorm(CpuIsa isa) {
  enum { n = 9, c = 77 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  float *x = frand(n * c, 1, 2), *y = frand(n * c, 1, 0), *w = frand(c, 1, 0), *b = frand(c, 1, 0);
  float kres[n * c], gres[n * c], ko[n * c], go[n * c], km[n], gm[n], kr[n], gr[n];
  LayerDropout d = {0.1f, 5, 3, NULL, 0};
  K->residual_layernorm_forward(kres, ko, km, kr, x, y, w, b, n, c, 1e-5f, &d, THREADS);
  G->residual_layernorm_forward(gres, go, gm, gr, x, y, w, b, n, c, 1e-5f, &d, THREADS);
  float res[n * c];
  double rres[n * c], ro[n * c];
  for (int i = 0; i < n * c; i++) {
    res[i] = x[i] + (layer_dropout_keep(&d, i) ? y[i] * (1.0f / 0.9f) : 0.0f);
    rres[i] = res[i];
  }
  ln_ref(ro, NULL, NULL, res, w, b, n, c, 1e-5);
  double vg = fmax(rel_f(kres, gres, n * c), rel_f(ko, go, n * c));
  double vr = fmax(rel_d(kres, rres, n * c), rel_d(ko, ro, n * c));
  report("residual_layernorm_forward", isa, vg, vr, 1e-5);
  free(x); free(y); free(w); free(b);
}

static void test_dropout(CpuIsa isa) {
  enum { n = 1003 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  LayerDropout d = {0.3f, 7, 11, NULL, 0};
  float *x = frand(n, 1, 0), *kf = fdup(x, n), *gf = fdup(x, n), kb[n], gb[n];
  K->dropout_forward_inplace(kf, n, &d, THREADS);
  G->dropout_forward_inplace(gf, n, &d, THREADS);
  K->dropout_backward(kb, x, n, &d, THREADS);
  G->dropout_backward(gb, x, n, &d, THREADS);
  double ref[n];
  for (int i = 0; i < n; i++) ref[i] = layer_dropout_keep(&d, i) ? x[i] * (1.0f / 0.7f) : 0.0f;
  report("dropout_forward_inplace", isa, rel_f(kf, gf, n), rel_d(kf, ref, n), 0);
  report("dropout_backward", isa, rel_f(kb, gb, n), rel_d(kb, ref, n), 0);
  free(x); free(kf); free(gf);
}

static void test_embeddings(CpuIsa isa) {
  enum { n = 11, c = 77, V = 6, P = 9, TT = 2 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  int32_t ids[n], pos[n], types[n];
  for (int r = 0; r < n; r++) ids[r] = (r * 5) % V, pos[r] = (r * 7) % P, types[r] = r % TT;
  float *wte = frand(V * c, 1, 0), *wpe = frand(P * c, 1, 0), *tte = frand(TT * c, 1, 0), *dout = frand(n * c, 1, 0);
  float ko[n * c], go[n * c];
  K->embeddings_forward(ko, ids, pos, types, wte, wpe, tte, n, c, THREADS);
  G->embeddings_forward(go, ids, pos, types, wte, wpe, tte, n, c, THREADS);
  double ro[n * c];
  for (int r = 0; r < n; r++)
    for (int i = 0; i < c; i++)
      ro[r * c + i] = (double)wte[ids[r] * c + i] + tte[types[r] * c + i] + wpe[pos[r] * c + i];
  report("embeddings_forward", isa, rel_f(ko, go, n * c), rel_d(ko, ro, n * c), 1e-6);
  float kw[V * c] = {0}, gw[V * c] = {0}, kp[P * c] = {0}, gp[P * c] = {0}, kt[TT * c] = {0}, gt[TT * c] = {0};
  K->embeddings_backward(kw, kp, kt, dout, ids, pos, types, n, c, 2, 1, THREADS);
  G->embeddings_backward(gw, gp, gt, dout, ids, pos, types, n, c, 2, 1, THREADS);
  double rw[V * c] = {0}, rp[P * c] = {0}, rt[TT * c] = {0};
  for (int r = 0; r < n; r++)
    for (int i = 0; i < c; i++) {
      if (ids[r] != 2) rw[ids[r] * c + i] += dout[r * c + i];
      if (pos[r] != 1) rp[pos[r] * c + i] += dout[r * c + i];
      rt[types[r] * c + i] += dout[r * c + i];
    }
  double vg = fmax(rel_f(kw, gw, V * c), fmax(rel_f(kp, gp, P * c), rel_f(kt, gt, TT * c)));
  double vr = fmax(rel_d(kw, rw, V * c), fmax(rel_d(kp, rp, P * c), rel_d(kt, rt, TT * c)));
  report("embeddings_backward", isa, vg, vr, 1e-6);
  free(wte); free(wpe); free(tte); free(dout);
}

/* Attention with B = 2, T = 13, C = 40 over A = 4 heads (head size 10): rows and
** heads that are no multiple of a vector; batch row 1 pads its last 4 keys. */
enum { AB = 2, AT = 13, AC = 40, AA = 4, AM = 7 };

static void test_attention(CpuIsa isa) {
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  int hd = AC / AA;
  float mask[AB * AT] = {0};
  for (int t = AT - 4; t < AT; t++) mask[AT + t] = -FLT_MAX;
  float *qkv = frand(AB * AT * 3 * AC, 1, 0), *dctx = frand(AB * AT * AC, 1, 0);
  float *scratch = malloc(sizeof(float) * 8 * 2 * AT * AT);
  static float kc[AB * AT * AC], gc[AB * AT * AC], ka[AB * AA * AT * AT], ga[AB * AA * AT * AT];
  static float kd[AB * AT * 3 * AC], gd[AB * AT * 3 * AC];
  static double rc[AB * AT * AC], ra[AB * AA * AT * AT];
  LayerDropout none = {0, 0, 0, NULL, 0}, drop = {0.1f, 99, 4, NULL, 0};
  /* Forward without dropout against softmax(Q K^T / sqrt(d) + mask) V in double. */
  K->attention_forward(LAYER_FP32, kc, ka, qkv, mask, AB, AT, AC, AA, &none, scratch, THREADS);
  G->attention_forward(LAYER_FP32, gc, ga, qkv, mask, AB, AT, AC, AA, &none, scratch, THREADS);
  for (int b = 0; b < AB; b++)
    for (int h = 0; h < AA; h++)
      for (int q = 0; q < AT; q++) {
        double s[AT], mx = -INFINITY, sum = 0;
        for (int k = 0; k < AT; k++) {
          double dot = 0;
          for (int j = 0; j < hd; j++)
            dot += (double)qkv[(b * AT + q) * 3 * AC + h * hd + j] * qkv[(b * AT + k) * 3 * AC + AC + h * hd + j];
          s[k] = mask[b * AT + k] != 0 ? -INFINITY : dot / sqrt((double)hd);
          mx = fmax(mx, s[k]);
        }
        for (int k = 0; k < AT; k++) sum += s[k] = exp(s[k] - mx);
        for (int k = 0; k < AT; k++) ra[(((size_t)b * AA + h) * AT + q) * AT + k] = s[k] / sum;
        for (int j = 0; j < hd; j++) {
          double acc = 0;
          for (int k = 0; k < AT; k++) acc += s[k] / sum * qkv[(b * AT + k) * 3 * AC + 2 * AC + h * hd + j];
          rc[(b * AT + q) * AC + h * hd + j] = acc;
        }
      }
  int n_ctx = AB * AT * AC, n_att = AB * AA * AT * AT;
  report("attention_forward", isa, fmax(rel_f(kc, gc, n_ctx), rel_f(ka, ga, n_att)),
         fmax(rel_d(kc, rc, n_ctx), rel_d(ka, ra, n_att)), 1e-5);
  /* With dropout, forward and backward against the generic level (test_layers_gradcheck
  ** holds them to finite differences of a reference). */
  K->attention_forward(LAYER_FP32, kc, ka, qkv, mask, AB, AT, AC, AA, &drop, scratch, THREADS);
  G->attention_forward(LAYER_FP32, gc, ga, qkv, mask, AB, AT, AC, AA, &drop, scratch, THREADS);
  report("attention_forward_dropout", isa, fmax(rel_f(kc, gc, n_ctx), rel_f(ka, ga, n_att)), -1, 1e-5);
  K->attention_backward(LAYER_FP32, kd, dctx, qkv, ga, AB, AT, AC, AA, &drop, scratch, THREADS);
  G->attention_backward(LAYER_FP32, gd, dctx, qkv, ga, AB, AT, AC, AA, &drop, scratch, THREADS);
  report("attention_backward", isa, rel_f(kd, gd, AB * AT * 3 * AC), -1, 1e-5);

  /* The same on AM of the 26 query rows. */
  const int32_t qrows[AM] = {0, 5, 12, AT + 1, AT + 2, AT + 8, AT + 12}, qstart[AB + 1] = {0, 3, AM};
  float *q = malloc(sizeof(float) * AM * AC), *kv = malloc(sizeof(float) * AB * AT * 2 * AC);
  for (int r = 0; r < AB * AT; r++) memcpy(kv + r * 2 * AC, qkv + r * 3 * AC + AC, 2 * AC * sizeof(float));
  for (int m = 0; m < AM; m++) memcpy(q + m * AC, qkv + qrows[m] * 3 * AC, AC * sizeof(float));
  static float krc[AM * AC], grc[AM * AC], kra[AA * AM * AT], gra[AA * AM * AT];
  static float kdq[AM * AC], gdq[AM * AC], kdkv[AB * AT * 2 * AC], gdkv[AB * AT * 2 * AC];
  K->attention_rows_forward(LAYER_FP32, krc, kra, q, kv, qrows, qstart, mask, AB, AT, AC, AA, AM, &drop, scratch, THREADS);
  G->attention_rows_forward(LAYER_FP32, grc, gra, q, kv, qrows, qstart, mask, AB, AT, AC, AA, AM, &drop, scratch, THREADS);
  report("attention_rows_forward", isa, fmax(rel_f(krc, grc, AM * AC), rel_f(kra, gra, AA * AM * AT)), -1, 1e-5);
  K->attention_rows_backward(LAYER_FP32, kdq, kdkv, dctx, q, kv, gra, qrows, qstart, AB, AT, AC, AA, AM, &drop, scratch, THREADS);
  G->attention_rows_backward(LAYER_FP32, gdq, gdkv, dctx, q, kv, gra, qrows, qstart, AB, AT, AC, AA, AM, &drop, scratch, THREADS);
  report("attention_rows_backward", isa, fmax(rel_f(kdq, gdq, AM * AC), rel_f(kdkv, gdkv, AB * AT * 2 * AC)), -1, 1e-5);
  free(q); free(kv); free(qkv); free(dctx); free(scratch);
}

/* Smoothing s as torch's CrossEntropyLoss(label_smoothing=s): every level against
** the generic one and against the same loss in double precision. */
static void test_crossentropy(CpuIsa isa, float smoothing) {
  enum { m = 7, v = 1003 };
  const LayerKernels *K = tables[isa], *G = tables[CPU_ISA_GENERIC];
  int32_t labels[m] = {3, 0, 1002, 500, 17, 999, 64};
  float *logits = frand(m * v, 3, 0);
  logits[1 * v + 0] = 40;   /* row 1 predicts its label */
  float *kp = malloc(sizeof(float) * m * v), *gp = malloc(sizeof(float) * m * v);
  double kl = 0, gl = 0, rl = 0;
  int kn = 0, gn = 0, rn = 0;
  K->crossentropy_forward(kp, logits, labels, m, v, smoothing, &kl, &kn, THREADS);
  G->crossentropy_forward(gp, logits, labels, m, v, smoothing, &gl, &gn, THREADS);
  double *rp = malloc(sizeof(double) * m * v);
  for (int r = 0; r < m; r++) {
    const float *l = logits + r * v;
    int am = 0;
    for (int j = 1; j < v; j++) if (l[j] > l[am]) am = j;
    double s = 0, all = 0;
    for (int j = 0; j < v; j++) s += exp((double)l[j] - l[am]);
    for (int j = 0; j < v; j++) rp[r * v + j] = exp((double)l[j] - l[am]) / s;
    double lse = log(s) + l[am];
    for (int j = 0; j < v; j++) all += lse - l[j];
    rl += (1 - (double)smoothing) * (lse - l[labels[r]]) + (double)smoothing / v * all;
    rn += am == labels[r];
  }
  const char *sfx = smoothing > 0 ? "_smoothed" : "";
  char fw[64], bw[64];
  snprintf(fw, sizeof fw, "crossentropy_forward%s", sfx);
  snprintf(bw, sizeof bw, "crossentropy_backward%s", sfx);
  double vg = fmax(rel_f(kp, gp, m * v), fabs(kl - gl) / fabs(gl)), vr = fmax(rel_d(kp, rp, m * v), fabs(kl - rl) / fabs(rl));
  report(fw, isa, kn == gn ? vg : INFINITY, kn == rn ? vr : INFINITY, 1e-5);
  float *kd = malloc(sizeof(float) * m * v), *gd = malloc(sizeof(float) * m * v);
  K->crossentropy_backward(kd, gp, labels, m, v, smoothing, 0.25f, THREADS);
  G->crossentropy_backward(gd, gp, labels, m, v, smoothing, 0.25f, THREADS);
  for (int i = 0; i < m * v; i++) rp[i] = (gp[i] - (double)smoothing / v) * 0.25;
  for (int r = 0; r < m; r++) rp[r * v + labels[r]] -= (1 - (double)smoothing) * 0.25;
  report(bw, isa, rel_f(kd, gd, m * v), rel_d(kd, rp, m * v), 1e-6);
  free(logits); free(kp); free(gp); free(rp); free(kd); free(gd);
}

/* ----------------------------------------------------------------- AdamW */

/* Every level's update on the same random state, over spans that start and end off
** the vector boundaries, decayed or not: the same bits as the generic level's. */
static void test_adam(CpuIsa isa) {
  static const size_t lens[] = {1, 7, 15, 17, 33, 1003};
  int same = 1;
  char why[160] = "";
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (int decayed = 0; decayed <= 1; decayed++) {
      size_t n = lens[li] + 5, glo = 1000 + 3, ghi = glo + lens[li];   /* the span starts at element 3 */
      float *g = frand(n, 1e-2, 0), *p0 = frand(n, 1, 0), *m0 = frand(n, 1e-3, 0), *v0 = frand(n, 1e-4, 0);
      for (size_t i = 0; i < n; i++) v0[i] = fabsf(v0[i]);
      float *p[2] = {fdup(p0, n), fdup(p0, n)}, *mm[2] = {fdup(m0, n), fdup(m0, n)}, *vv[2] = {fdup(v0, n), fdup(v0, n)};
      for (int k = 0; k < 2; k++) {
        AdamRange r = {p[k], g, mm[k], vv[k], 1000, 0.5f, 0.9f, 0.999f, 1e-8f, 1e-3f * 1.2f, 1.01f, 1.0f - 1e-3f * 0.01f};
        adam_tables[k ? isa : CPU_ISA_GENERIC]->range(&r, glo, ghi, decayed);
      }
      if (memcmp(p[0], p[1], n * sizeof(float)) || memcmp(mm[0], mm[1], n * sizeof(float)) ||
          memcmp(vv[0], vv[1], n * sizeof(float))) {
        if (same) snprintf(why, sizeof why, "length %zu, decayed %d: p, m or v differs from the generic level's", lens[li], decayed);
        same = 0;
      }
      int changed = memcmp(p[0] + 3, p0 + 3, lens[li] * sizeof(float)) != 0;
      int outside = memcmp(p[1], p0, 3 * sizeof(float)) || memcmp(p[1] + 3 + lens[li], p0 + 3 + lens[li], 2 * sizeof(float));
      if (!changed || outside) {
        if (same) snprintf(why, sizeof why, "length %zu: the span %s", lens[li], changed ? "spilled over" : "did not change");
        same = 0;
      }
      free(g); free(p0); free(m0); free(v0);
      for (int k = 0; k < 2; k++) free(p[k]), free(mm[k]), free(vv[k]);
    }
  char name[64];
  snprintf(name, sizeof name, "isa_adam_range_bits_%s", cpu_isa_name(isa));
  check(same, name, "%s", why);
}

/* The clipping norm's sum of squares: every level's bits are the generic level's,
** at lengths around the 8 lanes, on values of mixed sizes; and the generic level's
** value is the sum within 1e-12 of a long double sum (the reference). */
static void test_sumsq(CpuIsa isa) {
  static const size_t lens[] = {0, 1, 7, 8, 9, 15, 16, 17, 1003, 4096};
  int same = 1, close = 1;
  char why[160] = "";
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
    size_t n = lens[li];
    float *g = frand(n + 1, 1, 0);
    for (size_t i = 0; i < n; i++) g[i] *= (i % 3 == 0) ? 1e3f : (i % 3 == 1) ? 1e-3f : 1.0f;
    double a = adam_kernels_generic.sumsq(g, n), b = adam_tables[isa]->sumsq(g, n);
    long double ref = 0;
    for (size_t i = 0; i < n; i++) ref += (long double)g[i] * (long double)g[i];
    if (memcmp(&a, &b, sizeof a)) {
      if (same && close) snprintf(why, sizeof why, "length %zu: %.17g against the generic level's %.17g", n, b, a);
      same = 0;
    }
    if (fabsl((long double)a - ref) > 1e-12L * ref) {
      if (same && close) snprintf(why, sizeof why, "length %zu: %.17g against the long double sum %.17Lg", n, a, ref);
      close = 0;
    }
    free(g);
  }
  char name[64];
  snprintf(name, sizeof name, "isa_adam_sumsq_bits_%s", cpu_isa_name(isa));
  check(same && close, name, "%s", why);
}

/* ------------------------------------------------------------- cpu.c */

static void test_cpu(void) {
  int round = 1;
  for (int i = 0; i < CPU_ISA_COUNT; i++) {
    CpuIsa back = CPU_ISA_COUNT;
    round &= cpu_isa_parse(cpu_isa_name((CpuIsa)i), &back) == 0 && back == (CpuIsa)i;
  }
  CpuIsa dummy;
  int refused = cpu_isa_parse("AVX2", &dummy) && cpu_isa_parse("", &dummy) && cpu_isa_parse(NULL, &dummy) &&
                cpu_isa_parse("avx5120", &dummy);
  check(round && refused, "cpu_isa_parse_round_trips", "round trip %d, junk refused %d", round, refused);

  CpuIsa best = cpu_isa_best();
  Err e = {0};
  int ok = cpu_isa_select(CPU_ISA_GENERIC, &e) == 0 && cpu_isa() == CPU_ISA_GENERIC && cpu_isa_select(best, &e) == 0 &&
           cpu_isa() == best;
  check(ok, "cpu_isa_select_switches", "%s", e.msg);
  Err e2 = {0}, e3 = {0};
  ok = cpu_isa_select(CPU_ISA_COUNT, &e2) == -1 && e2.kind == ERR_INVALID && cpu_isa_select((CpuIsa)-1, &e3) == -1 &&
       e3.kind == ERR_INVALID && cpu_isa() == best;
  check(ok, "cpu_isa_select_refuses_unknown", "%s / %s", e2.msg, e3.msg);
  if (best < CPU_ISA_AVX512) {
    Err e4 = {0};
    CpuIsa above = (CpuIsa)(best + 1);
    ok = cpu_isa_select(above, &e4) == -1 && e4.kind == ERR_INVALID && strstr(e4.msg, cpu_isa_name(above)) &&
         cpu_isa() == best;
    check(ok, "cpu_isa_select_refuses_above_best", "%s", e4.msg);
  } else {
    check_skip("cpu_isa_select_refuses_above_best", "this CPU runs every level");
  }

  Err e5 = {0}, e6 = {0}, e7 = {0};
  setenv("MASKD_ISA", "sse9", 1);
  ok = cpu_isa_check_env(&e5) == -1 && e5.kind == ERR_INVALID && strstr(e5.msg, "MASKD_ISA=sse9") && !strchr(e5.msg, '\n');
  Err e9 = {0};
  setenv("MASKD_ISA", "avx2\nsecond line", 1);
  ok &= cpu_isa_check_env(&e9) == -1 && !strchr(e9.msg, '\n');
  setenv("MASKD_ISA", "generic", 1);
  ok &= cpu_isa_check_env(&e6) == 0;
  unsetenv("MASKD_ISA");
  ok &= cpu_isa_check_env(&e7) == 0;
  check(ok, "cpu_isa_check_env_refuses_junk", "%s | %s | %s | %s", e5.msg, e9.msg, e6.msg, e7.msg);
  if (best < CPU_ISA_AVX512) {
    Err e8 = {0};
    setenv("MASKD_ISA", cpu_isa_name((CpuIsa)(best + 1)), 1);
    ok = cpu_isa_check_env(&e8) == -1 && strstr(e8.msg, "MASKD_ISA=");
    unsetenv("MASKD_ISA");
    check(ok, "cpu_isa_check_env_refuses_above_best", "%s", e8.msg);
  } else {
    check_skip("cpu_isa_check_env_refuses_above_best", "this CPU runs every level");
  }
  char model[128];
  cpu_model_name(model, sizeof model);
  check(model[0] != 0 && !strchr(model, '\n'), "cpu_model_name_one_line", "'%s'", model);
  printf("# best level %s, avx512-bf16 %s, CPU %s\n", cpu_isa_name(best), cpu_has_avx512_bf16() ? "yes" : "no", model);
}

/* A sequence's attention has the same bits alone (T = n, no mask) as padded to a
** longer T in a batch (keys n..T-1 masked): the server batches concurrent requests
** so, and answers each as if alone. Lengths on both sides of 8, 16 and 32 (the
** vector widths, and where a reduction's tail starts); the rows path too (fill-mask's
** last layer runs only the masked positions' queries). */
static void test_attention_padding(CpuIsa isa) {
  char name[96];
  snprintf(name, sizeof name, "isa_attention_padding_changes_no_bit_%s", cpu_isa_name(isa));
  if (isa == CPU_ISA_GENERIC) {   /* not a promise there: README.md, text-classification */
    check_skip(name, "the generic level's per-head products are OpenBLAS's, whose order along K follows T");
    return;
  }
  static const int lens[][2] = {{7, 15}, {7, 23}, {13, 40}, {21, 40}, {16, 33}, {5, 8}};
  enum { MAXT = 40 };
  const LayerKernels *K = tables[isa];
  LayerDropout none = {0, 0, 0, NULL, 0};
  float *scratch = malloc(sizeof(float) * 8 * 2 * MAXT * MAXT);
  static float qkv_alone[MAXT * 3 * AC], qkv_pad[MAXT * 3 * AC], mask[MAXT];
  static float c1[MAXT * AC], c2[MAXT * AC], a1[AA * MAXT * MAXT], a2[AA * MAXT * MAXT];
  static float kv1[MAXT * 2 * AC], kv2[MAXT * 2 * AC], q[MAXT * AC], r1[MAXT * AC], r2[MAXT * AC];
  int bad = 0;
  for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
    int n = lens[c][0], T = lens[c][1];
    float *x = frand(T * 3 * AC, 1, 0);
    memcpy(qkv_pad, x, sizeof(float) * T * 3 * AC);
    memcpy(qkv_alone, x, sizeof(float) * n * 3 * AC);
    free(x);
    for (int k = 0; k < T; k++) mask[k] = k < n ? 0.0f : -FLT_MAX;
    K->attention_forward(LAYER_FP32, c1, a1, qkv_alone, NULL, 1, n, AC, AA, &none, scratch, THREADS);
    K->attention_forward(LAYER_FP32, c2, a2, qkv_pad, mask, 1, T, AC, AA, &none, scratch, THREADS);
    int same = !memcmp(c1, c2, sizeof(float) * n * AC);
    for (int h = 0; h < AA; h++)
      for (int i = 0; i < n; i++)
        same &= !memcmp(a1 + ((size_t)h * n + i) * n, a2 + ((size_t)h * T + i) * T, sizeof(float) * n);
    /* The rows path: queries 0 and n - 1 only, against every key. */
    for (int r = 0; r < T; r++) {
      if (r < n) memcpy(kv1 + r * 2 * AC, qkv_alone + r * 3 * AC + AC, 2 * AC * sizeof(float));
      memcpy(kv2 + r * 2 * AC, qkv_pad + r * 3 * AC + AC, 2 * AC * sizeof(float));
    }
    const int32_t rows[2] = {0, n - 1}, start[2] = {0, 2};
    memcpy(q, qkv_alone, AC * sizeof(float));
    memcpy(q + AC, qkv_alone + (n - 1) * 3 * AC, AC * sizeof(float));
    K->attention_rows_forward(LAYER_FP32, r1, NULL, q, kv1, rows, start, NULL, 1, n, AC, AA, 2, &none, scratch, THREADS);
    K->attention_rows_forward(LAYER_FP32, r2, NULL, q, kv2, rows, start, mask, 1, T, AC, AA, 2, &none, scratch, THREADS);
    same &= !memcmp(r1, r2, sizeof(float) * 2 * AC);
    if (!same && !bad) printf("# first difference: %d keys alone against %d padded\n", n, T);
    bad += !same;
  }
  check(bad == 0, name, "%d of %d lengths differ alone and padded", bad, (int)(sizeof lens / sizeof lens[0]));
  free(scratch);
}

int main(void) {
  test_cpu();
  for (int i = 0; i <= CPU_ISA_AVX512; i++) {   /* avx512bf16's float loops are avx512's */
    CpuIsa isa = (CpuIsa)i;
    Err err = {0};
    char name[64];
    snprintf(name, sizeof name, "isa_kernels_%s", cpu_isa_name(isa));
    /* The level's products too (the attention's go through gemm), so a table is
    ** exercised as the process would run it. */
    if (cpu_isa_select(isa, &err)) { check_skip(name, err.msg); continue; }
    rng_seed(&rng, 14);   /* every level sees the same inputs */
    test_column_sums(isa);
    test_layernorm(isa);
    test_gelu_backward(isa);
    test_residual_layernorm(isa);
    test_dropout(isa);
    test_embeddings(isa);
    test_attention(isa);
    test_crossentropy(isa, 0);
    test_crossentropy(isa, 0.1f);
    test_adam(isa);
    test_sumsq(isa);
    test_attention_padding(isa);
  }
  return check_exit();
}
