#include "engine/nn/layers.h"

#include "engine/core/rng.h"
#include "engine/nn/fastmath.h"
#include "engine/nn/gemm.h"
#include <math.h>
#include <omp.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

static inline uint64_t dropout_key(const LayerDropout *d) {
  return rng_mix64(d->seed ^ rng_mix64(d->site + 0x632be59bd9b4e019ULL));
}

/* The top 24 bits of the element's hash, compared with p * 2^24. */
static inline uint32_t dropout_threshold(const LayerDropout *d) {
  return (uint32_t)((double)d->p * 16777216.0);
}

static inline float dropout_factor(uint64_t key, uint32_t thresh, float scale, size_t i) {
  uint32_t r = (uint32_t)(rng_mix64(key + (uint64_t)i * RNG_GOLDEN_GAMMA) >> 40);
  return r >= thresh ? scale : 0.0f;
}

int layer_dropout_keep(const LayerDropout *d, size_t i) {
  if (!d || d->p <= 0) return 1;
  return dropout_factor(dropout_key(d), dropout_threshold(d), 1.0f, i) != 0.0f;
}

static inline int dropout_on(const LayerDropout *d) { return d && d->p > 0; }

/* A dropout site's constants for one call: whether it drops, and the key,
** threshold and kept-value scale that dropout_factor needs. */
typedef struct DropoutMask { int on; uint64_t key; uint32_t th; float scale; } DropoutMask;

static inline DropoutMask dropout_mask(const LayerDropout *d) {
  DropoutMask m = {0, 0, 0, 1.0f};
  if (dropout_on(d)) m = (DropoutMask){1, dropout_key(d), dropout_threshold(d), 1.0f / (1.0f - d->p)};
  return m;
}

/* What dropout multiplies element i of the site's full tensor by: 0 or 1/(1-p). */
static inline float mask_factor(DropoutMask m, size_t i) { return dropout_factor(m.key, m.th, m.scale, i); }

float layer_expf(float x) { return fast_expf(x); }
float layer_erff(float x) { return fast_erff(x); }

/* ----------------------------------------------------------------- matmul */

void matmul_forward(float *out, const float *in, const float *w, const float *bias, int n, int k, int o, int threads) {
  gemm_f32_bias(0, 1, n, o, k, in, k, w, k, bias, out, NULL, o, threads);
}

void matmul_gelu_forward(float *pre, float *act, const float *in, const float *w, const float *bias, int n, int k,
                         int o, int threads) {
  gemm_f32_bias(0, 1, n, o, k, in, k, w, k, bias, pre, act, o, threads);
}

/* db[c] (+)= sum_r dout[r, c], parallel over column blocks so no two threads share an output. */
static void column_sums(float *db, const float *dout, int n, int o, int accumulate, int threads) {
  int nb = (o + 63) / 64;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int bi = 0; bi < nb; bi++) {
    int c0 = bi * 64, c1 = c0 + 64 < o ? c0 + 64 : o;
    float acc[64] = {0};
    for (int r = 0; r < n; r++) {
      const float *row = dout + (size_t)r * o;
      for (int c = c0; c < c1; c++) acc[c - c0] += row[c];
    }
    for (int c = c0; c < c1; c++) db[c] = (accumulate ? db[c] : 0.0f) + acc[c - c0];
  }
}

static void param_grads(float *dw, float *db, const float *dout, const float *in, int n, int k, int o, int accumulate,
                        int threads) {
  if (db) column_sums(db, dout, n, o, accumulate, threads);
  if (dw) gemm_f32(1, 0, o, k, n, 1.0f, dout, o, in, k, accumulate ? 1.0f : 0.0f, dw, k, threads);
}

void matmul_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *w,
                     int n, int k, int o, int din_accumulate, int params_accumulate, int threads) {
  param_grads(dw, db, dout, in, n, k, o, params_accumulate, threads);
  if (din)
    gemm_f32(0, 0, n, k, o, 1.0f, dout, o, w, k, din_accumulate ? 1.0f : 0.0f, din, k, threads);
}

void gelu_matmul_backward(float *dpre, float *dw, float *db, const float *dout, const float *act, const float *pre,
                          const float *w, int n, int k, int o, int params_accumulate, int threads) {
  param_grads(dw, db, dout, act, n, k, o, params_accumulate, threads);
  gemm_f32_gelu_grad(0, 0, n, k, o, dout, o, w, k, pre, dpre, k, threads);
}

/* -------------------------------------------------------------- layernorm */

/* LayerNorm of one row of c values; y may equal x. */
static inline void layernorm_row(float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                                 int c, float eps) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < c; i++) s += x[i];
  float mu = s / c, v = 0;
  /* Two passes, as torch does: the variance of centred values loses nothing to cancellation. */
#pragma omp simd reduction(+ : v)
  for (int i = 0; i < c; i++) { float d = x[i] - mu; v += d * d; }
  float rs = 1.0f / sqrtf(v / c + eps);
  for (int i = 0; i < c; i++) y[i] = (x[i] - mu) * rs * w[i] + b[i];
  *mean = mu;
  *rstd = rs;
}

void layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                       int n, int c, float eps, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < n; r++)
    layernorm_row(out + (size_t)r * c, mean + r, rstd + r, in + (size_t)r * c, w, b, c, eps);
}

void layernorm_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *mean,
                        const float *rstd, const float *w, int n, int c, int din_accumulate, int params_accumulate,
                        int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < n; r++) {
    const float *x = in + (size_t)r * c, *dy = dout + (size_t)r * c;
    float *dx = din + (size_t)r * c;
    float mu = mean[r], rs = rstd[r], a = 0, bsum = 0;
#pragma omp simd reduction(+ : a, bsum)
    for (int i = 0; i < c; i++) {
      float g = dy[i] * w[i];
      a += g;
      bsum += g * (x[i] - mu) * rs;
    }
    a /= c;
    bsum /= c;
    if (din_accumulate)
      for (int i = 0; i < c; i++) dx[i] += rs * (dy[i] * w[i] - a - (x[i] - mu) * rs * bsum);
    else
      for (int i = 0; i < c; i++) dx[i] = rs * (dy[i] * w[i] - a - (x[i] - mu) * rs * bsum);
  }
  int nb = (c + 63) / 64;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int bi = 0; bi < nb; bi++) {
    int c0 = bi * 64, c1 = c0 + 64 < c ? c0 + 64 : c;
    float aw[64] = {0}, ab[64] = {0};
    for (int r = 0; r < n; r++) {
      const float *x = in + (size_t)r * c, *dy = dout + (size_t)r * c;
      float mu = mean[r], rs = rstd[r];
      for (int i = c0; i < c1; i++) {
        aw[i - c0] += dy[i] * (x[i] - mu) * rs;
        ab[i - c0] += dy[i];
      }
    }
    for (int i = c0; i < c1; i++) {
      dw[i] = (params_accumulate ? dw[i] : 0.0f) + aw[i - c0];
      db[i] = (params_accumulate ? db[i] : 0.0f) + ab[i - c0];
    }
  }
}

/* ------------------------------------------------------------------- gelu */

void gelu_backward(float *din, const float *dout, const float *in, size_t n, int threads) {
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (size_t i = 0; i < n; i++) din[i] = dout[i] * fast_gelu_grad(in[i]);
}

/* ---------------------------------------------------------------- dropout */

/* Where row r of a site's elements starts in its full tensor: with d->rows the
** rows are some rows of the full tensor (the last layer's labelled rows), and
** take those rows' masks. */
static inline size_t mask_row_base(const LayerDropout *d, size_t r, size_t cols) {
  return (d->rows ? (size_t)d->rows[r] : r) * cols;
}

/* out = in * mask over n elements of a site that drops. */
static void masked_copy(float *out, const float *in, size_t n, const LayerDropout *d, int threads) {
  DropoutMask m = dropout_mask(d);
  if (d->rows) {
    size_t cols = (size_t)d->cols, nr = n / cols;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (size_t r = 0; r < nr; r++) {
      size_t base = mask_row_base(d, r, cols), o = r * cols;
      for (size_t c = 0; c < cols; c++) out[o + c] = in[o + c] * mask_factor(m, base + c);
    }
    return;
  }
#pragma omp parallel for simd num_threads(threads) schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = in[i] * mask_factor(m, i);
}

void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd, const float *x, const float *y,
                                const float *w, const float *b, int n, int c, float eps, const LayerDropout *d,
                                int threads) {
  DropoutMask m = dropout_mask(d);
  /* One pass per row: the sum is normalised while it is still in L1, instead
  ** of being written out whole and read back by a second pass. */
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < n; r++) {
    size_t o = (size_t)r * c;
    float *sum = (res ? res : out) + o;
    const float *xr = x + o, *yr = y + o;
    if (m.on) {
      size_t base = mask_row_base(d, (size_t)r, (size_t)c);
      for (int i = 0; i < c; i++) sum[i] = xr[i] + yr[i] * mask_factor(m, base + i);
    } else {
#pragma omp simd
      for (int i = 0; i < c; i++) sum[i] = xr[i] + yr[i];
    }
    layernorm_row(out + o, mean + r, rstd + r, sum, w, b, c, eps);
  }
}

void dropout_backward(float *din, const float *dout, size_t n, const LayerDropout *d, int threads) {
  if (dropout_on(d)) masked_copy(din, dout, n, d, threads);
  else if (din != dout) memcpy(din, dout, n * sizeof(float));
}

void dropout_forward_inplace(float *x, size_t n, const LayerDropout *d, int threads) {
  if (dropout_on(d)) dropout_backward(x, x, n, d, threads);
}

/* ------------------------------------------------------------- embeddings */

void embeddings_forward(float *out, const int32_t *ids, const int32_t *pos, const int32_t *types,
                        const float *wte, const float *wpe, const float *tte, int n, int c, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < n; r++) {
    const float *a = wte + (size_t)ids[r] * c, *p = wpe + (size_t)pos[r] * c;
    const float *t = tte + (size_t)(types ? types[r] : 0) * c;
    float *y = out + (size_t)r * c;
    for (int i = 0; i < c; i++) y[i] = a[i] + t[i] + p[i];
  }
}

void embeddings_backward(float *dwte, float *dwpe, float *dtte, const float *dout, const int32_t *ids,
                         const int32_t *pos, const int32_t *types, int n, int c, int skip_wte, int skip_wpe,
                         int threads) {
  /* Parallel over column blocks: repeated ids then never race on a row. */
  int nb = (c + 31) / 32;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int bi = 0; bi < nb; bi++) {
    int c0 = bi * 32, c1 = c0 + 32 < c ? c0 + 32 : c;
    for (int r = 0; r < n; r++) {
      const float *g = dout + (size_t)r * c;
      float *a = ids[r] == skip_wte ? NULL : dwte + (size_t)ids[r] * c;
      float *p = pos[r] == skip_wpe ? NULL : dwpe + (size_t)pos[r] * c;
      float *t = dtte + (size_t)(types ? types[r] : 0) * c;
      for (int i = c0; i < c1; i++) t[i] += g[i];
      if (a) for (int i = c0; i < c1; i++) a[i] += g[i];
      if (p) for (int i = c0; i < c1; i++) p[i] += g[i];
    }
  }
}

/* -------------------------------------------------------------- attention */

/* Softmax backward in place, g (rows x T) from dP to dS = P (dP - <dP, P>) per
** row, p the probabilities; the additive mask has no gradient. */
static void softmax_rows_backward(float *g, const float *p, int rows, int T) {
  for (int r = 0; r < rows; r++) {
    const float *pr = p + (size_t)r * T;
    float *gr = g + (size_t)r * T;
    float dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < T; j++) dot += gr[j] * pr[j];
    for (int j = 0; j < T; j++) gr[j] = pr[j] * (gr[j] - dot);
  }
}

/* Row-wise softmax of s (rows x T) after adding the key mask; fully masked rows
** become uniform, exactly as softmax over equal float32 minima does in torch. */
static void softmax_rows_masked(float *s, const float *mask_add, int rows, int T) {
  for (int q = 0; q < rows; q++) {
    float *row = s + (size_t)q * T;
    if (mask_add)
      for (int k = 0; k < T; k++) row[k] += mask_add[k];
    float mx = row[0];
#pragma omp simd reduction(max : mx)
    for (int k = 1; k < T; k++) mx = row[k] > mx ? row[k] : mx;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int k = 0; k < T; k++) { float e = fast_expf(row[k] - mx); row[k] = e; sum += e; }
    float inv = 1.0f / sum;
    for (int k = 0; k < T; k++) row[k] *= inv;
  }
}

void attention_forward(float *ctx, float *att, const float *qkv, const float *mask_add, int B, int T, int C,
                       int A, const LayerDropout *d, float *scratch, int threads) {
  int hd = C / A, ld = 3 * C;
  float scale = 1.0f / sqrtf((float)hd);
  DropoutMask m = dropout_mask(d);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int bh = 0; bh < B * A; bh++) {
    int b = bh / A, h = bh % A;
    const float *q = qkv + (size_t)b * T * ld + h * hd, *k = q + C, *v = q + 2 * C;
    float *own = scratch + (size_t)omp_get_thread_num() * 2 * T * T;
    float *s = att ? att + (size_t)bh * T * T : own + (size_t)T * T;
    gemm_f32(0, 1, T, T, hd, scale, q, ld, k, ld, 0.0f, s, T, 1);
    softmax_rows_masked(s, mask_add ? mask_add + (size_t)b * T : NULL, T, T);
    const float *p = s;
    if (m.on) {
      float *pd = own;
      size_t base = (size_t)bh * T * T;
      for (size_t i = 0; i < (size_t)T * T; i++) pd[i] = s[i] * mask_factor(m, base + i);
      p = pd;
    }
    gemm_f32(0, 0, T, hd, T, 1.0f, p, T, v, ld, 0.0f, ctx + (size_t)b * T * C + h * hd, C, 1);
  }
}

void attention_backward(float *dqkv, const float *dctx, const float *qkv, const float *att, int B, int T, int C,
                        int A, const LayerDropout *d, float *scratch, int threads) {
  int hd = C / A, ld = 3 * C;
  float scale = 1.0f / sqrtf((float)hd);
  DropoutMask m = dropout_mask(d);
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int bh = 0; bh < B * A; bh++) {
    int b = bh / A, h = bh % A;
    size_t off = (size_t)b * T * ld + h * hd;
    const float *q = qkv + off, *k = q + C, *v = q + 2 * C;
    float *dq = dqkv + off, *dk = dq + C, *dv = dq + 2 * C;
    const float *dc = dctx + (size_t)b * T * C + h * hd;
    const float *p = att + (size_t)bh * T * T;
    float *s1 = scratch + (size_t)omp_get_thread_num() * 2 * T * T, *dp = s1 + (size_t)T * T;
    size_t base = (size_t)bh * T * T;
    const float *pd = p;
    if (m.on) {
      for (size_t i = 0; i < (size_t)T * T; i++) s1[i] = p[i] * mask_factor(m, base + i);
      pd = s1;
    }
    /* ctx = Pd V: dV = Pd^T dctx, dPd = dctx V^T. */
    gemm_f32(1, 0, T, hd, T, 1.0f, pd, T, dc, C, 0.0f, dv, ld, 1);
    gemm_f32(0, 1, T, T, hd, 1.0f, dc, C, v, ld, 0.0f, dp, T, 1);
    if (m.on)
      for (size_t i = 0; i < (size_t)T * T; i++) dp[i] *= mask_factor(m, base + i);
    softmax_rows_backward(dp, p, T, T);
    /* S = scale Q K^T: dQ = scale dS K, dK = scale dS^T Q. */
    gemm_f32(0, 0, T, hd, T, scale, dp, T, k, ld, 0.0f, dq, ld, 1);
    gemm_f32(1, 0, T, hd, T, scale, dp, T, q, ld, 0.0f, dk, ld, 1);
  }
}

void attention_rows_forward(float *ctx, float *att, const float *q, const float *kv, const int32_t *qrows,
                            const int32_t *qstart, const float *mask_add, int B, int T, int C, int A, int M,
                            const LayerDropout *d, float *scratch, int threads) {
  int hd = C / A, ld = 2 * C;
  float scale = 1.0f / sqrtf((float)hd);
  DropoutMask m = dropout_mask(d);
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int bh = 0; bh < B * A; bh++) {
    int b = bh / A, h = bh % A, r0 = qstart[b], mb = qstart[b + 1] - r0;
    if (mb == 0) continue;
    const float *qb = q + (size_t)r0 * C + h * hd, *k = kv + (size_t)b * T * ld + h * hd, *v = k + C;
    float *own = scratch + (size_t)omp_get_thread_num() * 2 * T * T;
    float *s = att ? att + ((size_t)h * M + r0) * T : own + (size_t)T * T;
    gemm_f32(0, 1, mb, T, hd, scale, qb, C, k, ld, 0.0f, s, T, 1);
    softmax_rows_masked(s, mask_add ? mask_add + (size_t)b * T : NULL, mb, T);
    const float *p = s;
    if (m.on) {
      float *pd = own;
      for (int i = 0; i < mb; i++) {
        int t = qrows[r0 + i] - b * T;
        size_t base = (((size_t)b * A + h) * T + t) * T;
        for (int j = 0; j < T; j++) pd[(size_t)i * T + j] = s[(size_t)i * T + j] * mask_factor(m, base + j);
      }
      p = pd;
    }
    gemm_f32(0, 0, mb, hd, T, 1.0f, p, T, v, ld, 0.0f, ctx + (size_t)r0 * C + h * hd, C, 1);
  }
}

void attention_rows_backward(float *dq, float *dkv, const float *dctx, const float *q, const float *kv,
                             const float *att, const int32_t *qrows, const int32_t *qstart, int B, int T, int C,
                             int A, int M, const LayerDropout *d, float *scratch, int threads) {
  int hd = C / A, ld = 2 * C;
  float scale = 1.0f / sqrtf((float)hd);
  DropoutMask m = dropout_mask(d);
#pragma omp parallel for num_threads(threads) schedule(dynamic)
  for (int bh = 0; bh < B * A; bh++) {
    int b = bh / A, h = bh % A, r0 = qstart[b], mb = qstart[b + 1] - r0;
    const float *k = kv + (size_t)b * T * ld + h * hd, *v = k + C;
    float *dk = dkv + (size_t)b * T * ld + h * hd, *dv = dk + C;
    if (mb == 0) {   /* no query of this row: its keys and values get no gradient */
      for (int t = 0; t < T; t++) {
        memset(dk + (size_t)t * ld, 0, (size_t)hd * sizeof(float));
        memset(dv + (size_t)t * ld, 0, (size_t)hd * sizeof(float));
      }
      continue;
    }
    const float *qb = q + (size_t)r0 * C + h * hd, *dc = dctx + (size_t)r0 * C + h * hd;
    const float *p = att + ((size_t)h * M + r0) * T;
    float *s1 = scratch + (size_t)omp_get_thread_num() * 2 * T * T, *dp = s1 + (size_t)T * T;
    const float *pd = p;
    if (m.on) {
      for (int i = 0; i < mb; i++) {
        size_t base = (((size_t)b * A + h) * T + (qrows[r0 + i] - b * T)) * T;
        for (int j = 0; j < T; j++) s1[(size_t)i * T + j] = p[(size_t)i * T + j] * mask_factor(m, base + j);
      }
      pd = s1;
    }
    gemm_f32(1, 0, T, hd, mb, 1.0f, pd, T, dc, C, 0.0f, dv, ld, 1);
    gemm_f32(0, 1, mb, T, hd, 1.0f, dc, C, v, ld, 0.0f, dp, T, 1);
    if (m.on)
      for (int i = 0; i < mb; i++) {
        size_t base = (((size_t)b * A + h) * T + (qrows[r0 + i] - b * T)) * T;
        for (int j = 0; j < T; j++) dp[(size_t)i * T + j] *= mask_factor(m, base + j);
      }
    softmax_rows_backward(dp, p, mb, T);
    gemm_f32(0, 0, mb, hd, T, scale, dp, T, k, ld, 0.0f, dq + (size_t)r0 * C + h * hd, C, 1);
    gemm_f32(1, 0, T, hd, mb, scale, dp, T, qb, C, 0.0f, dk, ld, 1);
  }
}

/* ---------------------------------------------------------- cross-entropy */

void crossentropy_forward(float *probs_out, const float *logits, const int32_t *labels, int m, int v,
                          double *loss_sum, int *n_correct, int threads) {
  double loss = 0;
  int correct = 0;
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : loss, correct)
  for (int r = 0; r < m; r++) {
    const float *l = logits + (size_t)r * v;
    /* The maximum by a vector reduction, then its first index (torch's argmax on ties). */
    float mx = l[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < v; j++) mx = l[j] > mx ? l[j] : mx;
    int am = 0;
    while (am < v - 1 && l[am] != mx) am++;
    int lab = labels[r];
    float target = l[lab];
    float sum = 0;
    if (probs_out) {
      float *p = probs_out + (size_t)r * v;
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < v; j++) { float e = fast_expf(l[j] - mx); p[j] = e; sum += e; }
      float inv = 1.0f / sum;
      for (int j = 0; j < v; j++) p[j] *= inv;
    } else {
#pragma omp simd reduction(+ : sum)
      for (int j = 0; j < v; j++) sum += fast_expf(l[j] - mx);
    }
    loss += log((double)sum) + (double)mx - (double)target;
    correct += am == lab;
  }
  *loss_sum += loss;
  *n_correct += correct;
}

void crossentropy_backward(float *dlogits, const float *probs, const int32_t *labels, int m, int v, float scale,
                           int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int r = 0; r < m; r++) {
    const float *p = probs + (size_t)r * v;
    float *g = dlogits + (size_t)r * v;
    for (int j = 0; j < v; j++) g[j] = p[j] * scale;
    g[labels[r]] -= scale;
  }
}
