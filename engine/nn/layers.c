/* The layers (layers.h): the matrix products go to gemm.h, which picks its own
** kernels; every other loop runs from the table of cpu_isa()'s level
** (layer_kernels.h), compiled once per level from layer_kernels.inc. */
#include "engine/nn/layers.h"

#include <math.h>

#include "engine/core/cpu.h"
#include "engine/core/bf16.h"
#include "engine/nn/fastmath.h"
#include "engine/nn/gemm.h"
#include "engine/nn/layer_kernels.h"

const LayerKernels *layer_kernels(void) {
  switch (cpu_isa()) {
  case CPU_ISA_AVX512BF16:
  case CPU_ISA_AVX512: return &layer_kernels_avx512;
  case CPU_ISA_AVX2: return &layer_kernels_avx2;
  default: return &layer_kernels_generic;
  }
}

int layer_dropout_keep(const LayerDropout *d, size_t i) {
  if (!d || d->p <= 0) return 1;
  return dropout_factor(dropout_key(d), dropout_threshold(d), 1.0f, i) != 0.0f;
}

float layer_expf(float x) { return fast_expf(x); }
float layer_erff(float x) { return fast_erff(x); }

/* ----------------------------------------------------------------- matmul */

/* The products at a precision: gemm.h's float or bf16 entry points. */
static void product(LayerPrecision prec, int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                    int ldb, float beta, float *C, int ldc, int threads) {
  if (prec == LAYER_BF16) gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, threads);
  else gemm_f32(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc, threads);
}

static void product_bias(LayerPrecision prec, const float *in, const float *w, const float *bias, float *pre,
                         float *act, int n, int k, int o, int threads) {
  if (prec == LAYER_BF16) gemm_bf16_bias(0, 1, n, o, k, in, k, w, k, bias, pre, act, o, threads);
  else gemm_f32_bias(0, 1, n, o, k, in, k, w, k, bias, pre, act, o, threads);
}

void matmul_forward(LayerPrecision prec, float *out, const float *in, const float *w, const float *bias, int n, int k,
                    int o, int threads) {
  product_bias(prec, in, w, bias, out, NULL, n, k, o, threads);
}

void matmul_gelu_forward(LayerPrecision prec, float *pre, float *act, const float *in, const float *w,
                         const float *bias, int n, int k, int o, int threads) {
  product_bias(prec, in, w, bias, pre, act, n, k, o, threads);
}

void matmul_forward_bf16w(float *out, const float *in, const uint16_t *w, const float *bias, int n, int k, int o,
                          int threads) {
  gemm_bf16w_bias(n, o, k, in, k, w, k, bias, out, NULL, o, threads);
}

void matmul_gelu_forward_bf16w(float *pre, float *act, const float *in, const uint16_t *w, const float *bias, int n,
                               int k, int o, int threads) {
  gemm_bf16w_bias(n, o, k, in, k, w, k, bias, pre, act, o, threads);
}

static void param_grads(LayerPrecision prec, float *dw, float *db, const float *dout, const float *in, int n, int k,
                        int o, int accumulate, int threads) {
  if (db) layer_kernels()->column_sums(db, dout, n, o, accumulate, threads);
  if (dw) product(prec, 1, 0, o, k, n, dout, o, in, k, accumulate ? 1.0f : 0.0f, dw, k, threads);
}

void matmul_backward(LayerPrecision prec, float *din, float *dw, float *db, const float *dout, const float *in,
                     const float *w, int n, int k, int o, int din_accumulate, int params_accumulate, int threads) {
  param_grads(prec, dw, db, dout, in, n, k, o, params_accumulate, threads);
  if (din) product(prec, 0, 0, n, k, o, dout, o, w, k, din_accumulate ? 1.0f : 0.0f, din, k, threads);
}

void gelu_matmul_backward(LayerPrecision prec, float *dpre, float *dw, float *db, const float *dout, const float *act,
                          const float *pre, const float *w, int n, int k, int o, int params_accumulate, int threads) {
  param_grads(prec, dw, db, dout, act, n, k, o, params_accumulate, threads);
  if (prec == LAYER_BF16) gemm_bf16_gelu_grad(0, 0, n, k, o, dout, o, w, k, pre, dpre, k, threads);
  else gemm_f32_gelu_grad(0, 0, n, k, o, dout, o, w, k, pre, dpre, k, threads);
}

/* ----------------------------------------------------- per-level loops */

void layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b, int n,
                       int c, float eps, int threads) {
  layer_kernels()->layernorm_forward(out, mean, rstd, in, w, b, n, c, eps, threads);
}

void layernorm_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *mean,
                        const float *rstd, const float *w, int n, int c, int din_accumulate, int params_accumulate,
                        int threads) {
  layer_kernels()->layernorm_backward(din, dw, db, dout, in, mean, rstd, w, n, c, din_accumulate, params_accumulate,
                                      threads);
}

void gelu_backward(float *din, const float *dout, const float *in, size_t n, int threads) {
  layer_kernels()->gelu_backward(din, dout, in, n, threads);
}

void tanh_forward(float *out, const float *in, size_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; i++) out[i] = tanhf(in[i]);
}

void tanh_backward(float *din, const float *dout, const float *out, size_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; i++) din[i] = (1.0f - out[i] * out[i]) * dout[i];
}

void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd, const float *x, const float *y,
                                const float *w, const float *b, int n, int c, float eps, const LayerDropout *d,
                                int threads) {
  layer_kernels()->residual_layernorm_forward(res, out, mean, rstd, x, y, w, b, n, c, eps, d, threads);
}

void dropout_backward(float *din, const float *dout, size_t n, const LayerDropout *d, int threads) {
  layer_kernels()->dropout_backward(din, dout, n, d, threads);
}

void dropout_forward_inplace(float *x, size_t n, const LayerDropout *d, int threads) {
  layer_kernels()->dropout_forward_inplace(x, n, d, threads);
}

void embeddings_forward(float *out, const int32_t *ids, const int32_t *pos, const int32_t *types, const float *wte,
                        const float *wpe, const float *tte, int n, int c, int threads) {
  layer_kernels()->embeddings_forward(out, ids, pos, types, wte, wpe, tte, n, c, threads);
}

void embeddings_forward_bf16w(float *out, const int32_t *ids, const int32_t *pos, const int32_t *types,
                              const uint16_t *wte, const uint16_t *wpe, const uint16_t *tte, int n, int c,
                              int threads) {
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 1)
  for (int i = 0; i < n; i++) {
    const uint16_t *a = wte + (size_t)ids[i] * c, *b = wpe + (size_t)pos[i] * c;
    const uint16_t *t = tte + (size_t)(types ? types[i] : 0) * c;
    float *o = out + (size_t)i * c;
    for (int j = 0; j < c; j++) o[j] = bf16_to_f32(a[j]) + bf16_to_f32(t[j]) + bf16_to_f32(b[j]);   /* HF's order */
  }
}

void embeddings_backward(float *dwte, float *dwpe, float *dtte, const float *dout, const int32_t *ids,
                         const int32_t *pos, const int32_t *types, int n, int c, int skip_wte, int skip_wpe,
                         int threads) {
  layer_kernels()->embeddings_backward(dwte, dwpe, dtte, dout, ids, pos, types, n, c, skip_wte, skip_wpe, threads);
}

void attention_forward(LayerPrecision prec, float *ctx, float *att, const float *qkv, const float *mask_add, int B,
                       int T, int C, int A, const LayerDropout *d, float *scratch, int threads) {
  layer_kernels()->attention_forward(prec, ctx, att, qkv, mask_add, B, T, C, A, d, scratch, threads);
}

void attention_backward(LayerPrecision prec, float *dqkv, const float *dctx, const float *qkv, const float *att, int B,
                        int T, int C, int A, const LayerDropout *d, float *scratch, int threads) {
  layer_kernels()->attention_backward(prec, dqkv, dctx, qkv, att, B, T, C, A, d, scratch, threads);
}

void attention_rows_forward(LayerPrecision prec, float *ctx, float *att, const float *q, const float *kv,
                            const int32_t *qrows, const int32_t *qstart, const float *mask_add, int B, int T, int C,
                            int A, int M, const LayerDropout *d, float *scratch, int threads) {
  layer_kernels()->attention_rows_forward(prec, ctx, att, q, kv, qrows, qstart, mask_add, B, T, C, A, M, d, scratch,
                                          threads);
}

void attention_rows_backward(LayerPrecision prec, float *dq, float *dkv, const float *dctx, const float *q,
                             const float *kv, const float *att, const int32_t *qrows, const int32_t *qstart, int B,
                             int T, int C, int A, int M, const LayerDropout *d, float *scratch, int threads) {
  layer_kernels()->attention_rows_backward(prec, dq, dkv, dctx, q, kv, att, qrows, qstart, B, T, C, A, M, d, scratch,
                                           threads);
}

void crossentropy_forward(float *probs_out, const float *logits, const int32_t *labels, int m, int v, float smoothing,
                          double *loss_sum, int *n_correct, int threads) {
  layer_kernels()->crossentropy_forward(probs_out, logits, labels, m, v, smoothing, loss_sum, n_correct, threads);
}

void crossentropy_backward(float *dlogits, const float *probs, const int32_t *labels, int m, int v, float smoothing,
                           float scale, int threads) {
  layer_kernels()->crossentropy_backward(dlogits, probs, labels, m, v, smoothing, scale, threads);
}
