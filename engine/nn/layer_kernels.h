/* The layers' loops as one table per instruction-set level (internal to
** engine/nn): layer_kernels.inc compiled for generic, AVX2 and AVX-512 code
** (isa_*.c). Each entry has the contract of layers.h's function of
** the same name; column_sums(db, dout, n, o, accumulate) is db[c] (+)= the sum of
** dout's n rows. Below the table: dropout's mask, which layers.c's
** layer_dropout_keep and the loops compute the same way. */
#ifndef MASKD_LAYER_KERNELS_H
#define MASKD_LAYER_KERNELS_H

#include "engine/core/rng.h"
#include "engine/nn/layers.h"

typedef struct LayerKernels {
  void (*column_sums)(float *db, const float *dout, int n, int o, int accumulate, int threads);
  void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *in, const float *w, const float *b,
                            int n, int c, float eps, int threads);
  void (*layernorm_backward)(float *din, float *dw, float *db, const float *dout, const float *in, const float *mean,
                             const float *rstd, const float *w, int n, int c, int din_accumulate, int params_accumulate,
                             int threads);
  void (*gelu_backward)(float *din, const float *dout, const float *in, size_t n, int threads);
  void (*residual_layernorm_forward)(float *res, float *out, float *mean, float *rstd, const float *x, const float *y,
                                     const float *w, const float *b, int n, int c, float eps, const LayerDropout *d,
                                     int threads);
  void (*dropout_backward)(float *din, const float *dout, size_t n, const LayerDropout *d, int threads);
  void (*dropout_forward_inplace)(float *x, size_t n, const LayerDropout *d, int threads);
  void (*embeddings_forward)(float *out, const int32_t *ids, const int32_t *pos, const int32_t *types, const float *wte,
                             const float *wpe, const float *tte, int n, int c, int threads);
  void (*embeddings_backward)(float *dwte, float *dwpe, float *dtte, const float *dout, const int32_t *ids,
                              const int32_t *pos, const int32_t *types, int n, int c, int skip_wte, int skip_wpe,
                              int threads);
  void (*attention_forward)(LayerPrecision prec, float *ctx, float *att, const float *qkv, const float *mask_add, int B,
                            int T, int C, int A, const LayerDropout *d, float *scratch, int threads);
  void (*attention_backward)(LayerPrecision prec, float *dqkv, const float *dctx, const float *qkv, const float *att,
                             int B, int T, int C, int A, const LayerDropout *d, float *scratch, int threads);
  void (*attention_rows_forward)(LayerPrecision prec, float *ctx, float *att, const float *q, const float *kv,
                                 const int32_t *qrows, const int32_t *qstart, const float *mask_add, int B, int T,
                                 int C, int A, int M, const LayerDropout *d, float *scratch, int threads);
  void (*attention_rows_backward)(LayerPrecision prec, float *dq, float *dkv, const float *dctx, const float *q,
                                  const float *kv, const float *att, const int32_t *qrows, const int32_t *qstart, int B,
                                  int T, int C, int A, int M, const LayerDropout *d, float *scratch, int threads);
  void (*crossentropy_forward)(float *probs_out, const float *logits, const int32_t *labels, int m, int v,
                               float smoothing, double *loss_sum, int *n_correct, int threads);
  void (*crossentropy_backward)(float *dlogits, const float *probs, const int32_t *labels, int m, int v,
                                float smoothing, float scale, int threads);
} LayerKernels;

extern const LayerKernels layer_kernels_generic, layer_kernels_avx2, layer_kernels_avx512;

/* The table of cpu_isa()'s level. */
const LayerKernels *layer_kernels(void);

/* ---------------------------------------------------------------- dropout */

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

#endif
