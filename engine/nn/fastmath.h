/* Branch-free float exp, erf and GELU that loops vectorise (gcc -O3), shared
** by the layers and by the product kernel's fused GELU, so that both compute
** the same bits. */
#ifndef MASKD_FASTMATH_H
#define MASKD_FASTMATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 Taylor
** polynomial (truncation < 2.5e-8 relative) in fused multiply-adds; 2^n is
** built in the exponent bits. Branch-free so loops over it vectorise; below
** -87.3 it returns exactly 0, which softmax of masked scores relies on. */
static inline float fast_expf(float x) {
  float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  float t = fmaf(xc, 1.44269504f, 12582912.0f);   /* adding 1.5*2^23 rounds to an integer */
  float n = t - 12582912.0f;
  float r = fmaf(-n, 0.693145751953125f, xc);
  r = fmaf(-n, 1.428606765330187e-06f, r);
  float p = fmaf(r, 1.3888889e-3f, 8.3333338e-3f);
  p = fmaf(p, r, 4.1666668e-2f);
  p = fmaf(p, r, 1.6666667e-1f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  /* Below -87.3 the scale's bits are cleared (scale +0, y exactly 0) by a mask,
  ** not by a final `x < -87.3f ? 0 : y`: gcc threads that second test on x
  ** into a branch around the polynomial, and without AVX-512's masks it then
  ** cannot vectorise the loop at all (AVX2: softmax and the loss 3x slower).
  ** 2^n's exponent is taken from t's bits, not by converting n to int: t = 1.5*2^23 + n
  ** holds n in its low bits (|n| <= 128 keeps t in [2^23, 2^24), where they step by
  ** 1), and unsigned arithmetic is defined whatever t holds. A NaN x (a damaged or
  ** diverged model's) makes n NaN, whose conversion is undefined (x86 gave INT_MIN,
  ** whose shift is undefined too); here its scale is masked to 0 and p * 0 stays NaN. */
  uint32_t tb;
  memcpy(&tb, &t, sizeof tb);
  uint32_t bits = ((tb - 0x4B400000u + 127u) << 23) & (0u - (uint32_t)(x >= -87.3f));
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* erf(z) for z >= 0 by Abramowitz and Stegun 7.1.26 (absolute error < 1.5e-7),
** 1 - t P(t) e with t = 1 / (1 + 0.3275911 z), given e = exp(-z^2): the same
** formula as PyTorch's vectorised erf, which its CPU GELU uses. */
static inline float erf_nonneg(float z, float e) {
  float t = 1.0f / fmaf(0.3275911f, z, 1.0f);
  float p = fmaf(t, 1.061405429f, -1.453152027f);
  p = fmaf(p, t, 1.421413741f);
  p = fmaf(p, t, -0.284496736f);
  p = fmaf(p, t, 0.254829592f);
  return fmaf(-(p * t), e, 1.0f);
}
/* erf, odd in x. */
static inline float fast_erff(float x) {
  float z = fabsf(x);
  float r = erf_nonneg(z, fast_expf(-z * z));
  return x < 0 ? -r : r;
}
#define GELU_INV_SQRT2 0.70710678118654752f
#define GELU_INV_SQRT2PI 0.39894228040143268f

/* GELU with the exact erf, x * Phi(x), as torch's gelu(approximate='none'). */
static inline float fast_gelu(float x) { return 0.5f * x * (1.0f + fast_erff(x * GELU_INV_SQRT2)); }
/* Its derivative Phi(x) + x phi(x). exp(-x^2/2) serves both terms: erf's
** exp(-z^2) at z = |x|/sqrt(2) is the same number, so one exp instead of two. */
static inline float fast_gelu_grad(float x) {
  float e = fast_expf(-0.5f * x * x);
  float r = erf_nonneg(fabsf(x) * GELU_INV_SQRT2, e);
  float cdf = 0.5f * (1.0f + (x < 0 ? -r : r));
  return fmaf(x * GELU_INV_SQRT2PI, e, cdf);
}

#endif
