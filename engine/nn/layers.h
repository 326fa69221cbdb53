/* The layers of the masked-LM model as forward/backward pairs on float arrays
** (llm.c style). Rows are tokens: an activation of N rows and C columns is
** row-major (N, C). Linear weights are PyTorch's (out, in). Every backward
** ADDS into parameter gradients (dw, db) (or overwrites them when told: the
** first backward after zeroing) and OVERWRITES input gradients (din) unless
** its comment says otherwise. Each takes the number of threads it may use
** (threads, at least 1: the model's own count, never a process-wide setting):
** its loops are OpenMP-parallel over that many, and its matrix products go
** through gemm_f32 with it. */
#ifndef MASKD_LAYERS_H
#define MASKD_LAYERS_H
#include <stddef.h>
#include <stdint.h>

/* Dropout is a pure function of (seed, site, element index): forward and
** backward recompute the same keep decision, so no mask is stored, and the
** result does not depend on the thread count. */
typedef struct LayerDropout {
  float p;              /* drop probability; 0 = identity */
  uint64_t seed;        /* per-step seed */
  uint64_t site;        /* distinct per dropout site of the network */
  /* When rows != NULL the data are a subset of the rows of a (?, cols) tensor:
  ** row r of the data is row rows[r] there, and the masks are that row's, so a
  ** layer computed on a subset of rows drops exactly what the full layer would. */
  const int32_t *rows;
  int cols;
} LayerDropout;

/* 1 when element i is kept by dropout d (always 1 when d->p == 0). */
int layer_dropout_keep(const LayerDropout *d, size_t i);

/* Vectorisable exp and erf in float (exp about 2 ulp; erf within 4e-7 absolute). */
float layer_expf(float x);
float layer_erff(float x);

/* The arithmetic of a Linear layer's three products (forward, both gradients):
** LAYER_FP32, float (gemm_f32); LAYER_BF16, PyTorch autocast's (gemm_bf16:
** weights, activations and gradients rounded to bfloat16 as they enter a
** product, products exact, sums and results in float). Bias sums stay float. */
typedef enum LayerPrecision { LAYER_FP32 = 0, LAYER_BF16 } LayerPrecision;

/* out[n,o] = sum_k in[n,k] w[o,k] + bias[o]  (bias may be NULL). */
void matmul_forward(LayerPrecision prec, float *out, const float *in, const float *w, const float *bias, int n, int k,
                    int o, int threads);
/* act = GELU(in w^T + bias) in the product's own pass; pre receives in w^T + bias
** (for backward) unless pre == act. */
void matmul_gelu_forward(LayerPrecision prec, float *pre, float *act, const float *in, const float *w,
                         const float *bias, int n, int k, int o, int threads);
/* dw += dout^T in; db += column sums of dout (NULL skips), or = when not
** params_accumulate; din = dout w, or din += dout w when din_accumulate (din NULL skips). */
void matmul_backward(LayerPrecision prec, float *din, float *dw, float *db, const float *dout, const float *in,
                     const float *w, int n, int k, int o, int din_accumulate, int params_accumulate, int threads);
/* Backward of out = GELU(pre) w^T + bias, whose input act = GELU(pre) was kept:
** dpre = (dout w) GELU'(pre), written as the product stores (no pass of its
** own); dw and db as matmul_backward. */
void gelu_matmul_backward(LayerPrecision prec, float *dpre, float *dw, float *db, const float *dout, const float *act,
                          const float *pre, const float *w, int n, int k, int o, int params_accumulate, int threads);
/* matmul_forward and matmul_gelu_forward at LAYER_BF16 with the weight held in
** bfloat16 (w (o, k)): a model serving from bf16 weights. */
void matmul_forward_bf16w(float *out, const float *in, const uint16_t *w, const float *bias, int n, int k, int o,
                          int threads);
void matmul_gelu_forward_bf16w(float *pre, float *act, const float *in, const uint16_t *w, const float *bias, int n,
                               int k, int o, int threads);

/* out = LayerNorm(in) * w + b per row of c; saves mean and 1/std per row. */
void layernorm_forward(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                       int n, int c, float eps, int threads);
/* din = dLN/din dout (overwrite, or add when din_accumulate); dw, db += (= when
** not params_accumulate). */
void layernorm_backward(float *din, float *dw, float *db, const float *dout, const float *in, const float *mean,
                        const float *rstd, const float *w, int n, int c, int din_accumulate, int params_accumulate,
                        int threads);

/* out = tanh(in) (a classifier head's: (rows, H), too small to need a kernel per ISA). */
void tanh_forward(float *out, const float *in, size_t n, int threads);
/* din = (1 - out^2) * dout, from tanh's output (din may equal dout). */
void tanh_backward(float *din, const float *dout, const float *out, size_t n, int threads);
/* din = gelu'(in) * dout (din may equal dout). */
void gelu_backward(float *din, const float *dout, const float *in, size_t n, int threads);

/* res = x + dropout(y) and out = LayerNorm(res) with weight w and bias b, over
** n rows of c, in one pass; mean and rstd as layernorm_forward. res NULL: the
** sum is not kept (out receives it first). Dropout element i of
** row r is element r*c+i (or rows[r]*c+i with d->rows) of its site. */
void residual_layernorm_forward(float *res, float *out, float *mean, float *rstd, const float *x, const float *y,
                                const float *w, const float *b, int n, int c, float eps, const LayerDropout *d,
                                int threads);
/* din = dropout'(dout) (din may equal dout). */
void dropout_backward(float *din, const float *dout, size_t n, const LayerDropout *d, int threads);
/* x = dropout(x) in place. */
void dropout_forward_inplace(float *x, size_t n, const LayerDropout *d, int threads);

/* out[n,:] = wte[ids[n]] + wpe[pos[n]] + tte[types[n]] (types NULL = type 0). */
void embeddings_forward(float *out, const int32_t *ids, const int32_t *pos, const int32_t *types,
                        const float *wte, const float *wpe, const float *tte, int n, int c, int threads);
/* embeddings_forward with the three tables held in bfloat16 (widened to float exactly). */
void embeddings_forward_bf16w(float *out, const int32_t *ids, const int32_t *pos, const int32_t *types,
                              const uint16_t *wte, const uint16_t *wpe, const uint16_t *tte, int n, int c, int threads);
/* Scatters dout into the three tables; rows equal to skip_wte (or skip_wpe)
** get no gradient, as nn.Embedding's padding_idx (-1 = none). */
void embeddings_backward(float *dwte, float *dwpe, float *dtte, const float *dout, const int32_t *ids,
                         const int32_t *pos, const int32_t *types, int n, int c, int skip_wte, int skip_wpe,
                         int threads);

/* Multi-head self-attention on a fused qkv (B*T, 3C) = [Q | K | V]:
** ctx (B*T, C) = softmax(Q K^T / sqrt(d) + mask_add[b, key]) V per head, with
** dropout on the probabilities. att (B, A, T, T) receives the probabilities
** before dropout (NULL: not kept, as inference needs); mask_add (B, T) is 0 for
** real keys and the float32 minimum for padding (NULL = none). scratch holds
** 2*T*T floats for each of the threads. */
void attention_forward(LayerPrecision prec, float *ctx, float *att, const float *qkv, const float *mask_add, int B,
                       int T, int C, int A, const LayerDropout *d, float *scratch, int threads);
/* dqkv (B*T, 3C) = gradient of the above given dctx; scratch 2*T*T per thread. */
void attention_backward(LayerPrecision prec, float *dqkv, const float *dctx, const float *qkv, const float *att, int B,
                        int T, int C, int A, const LayerDropout *d, float *scratch, int threads);

/* Attention for a subset of the queries (sorted by batch row): q (M, C) holds
** the queries of flat positions qrows[0..M), grouped so that batch b's are
** qrows[qstart[b]..qstart[b+1]); kv (B*T, 2C) = [K | V] of every position.
** ctx (M, C); att (A, M, T) receives the probabilities before dropout (NULL:
** not kept), whose masks are those of the full attention at the same (b, h,
** query, key); scratch 2*T*T per thread. */
void attention_rows_forward(LayerPrecision prec, float *ctx, float *att, const float *q, const float *kv,
                            const int32_t *qrows, const int32_t *qstart, const float *mask_add, int B, int T, int C,
                            int A, int M, const LayerDropout *d, float *scratch, int threads);
/* dq (M, C) and dkv (B*T, 2C) (overwritten) from dctx (M, C); scratch 2*T*T per thread. */
void attention_rows_backward(LayerPrecision prec, float *dq, float *dkv, const float *dctx, const float *q,
                             const float *kv, const float *att, const int32_t *qrows, const int32_t *qstart, int B,
                             int T, int C, int A, int M, const LayerDropout *d, float *scratch, int threads);

/* Cross-entropy of each row of logits (m, v) against labels, smoothed as torch's
** CrossEntropyLoss(label_smoothing=s) (the target (1-s) onehot + s/v, s in [0, 1);
** 0: the plain loss, to the bit): adds the losses to *loss_sum and the argmax hits
** to *n_correct; when probs_out != NULL the rows' softmax is written there (may
** equal logits) for crossentropy_backward. */
void crossentropy_forward(float *probs_out, const float *logits, const int32_t *labels, int m, int v, float smoothing,
                          double *loss_sum, int *n_correct, int threads);
/* dlogits = (probs - (1-s) onehot(label) - s/v) * scale (dlogits may equal probs). */
void crossentropy_backward(float *dlogits, const float *probs, const int32_t *labels, int m, int v, float smoothing,
                           float scale, int threads);

#endif
