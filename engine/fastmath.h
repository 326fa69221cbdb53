/* Branch-free float exp, erf and GELU that loops vectorise (gcc -O3), shared
** by the layers and by the product kernel's fused GELU, so that both compute
** the same bits. */
#ifndef MASKD_FASTMATH_H
#define MASKD_FASTMATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>

/* exp by range reduction x = n ln2 + r, |r| <= ln2/2, and a degree-6 Taylor
** polynomial (truncation < 2.5e-8 relative); 2^n is built in the exponent bits.
** Branch-free so loops over it vectorise; below -87.3 it returns exactly 0,
** which softmax of masked scores relies on. */
static inline float fast_expf(float x) {
  float xc = x < -87.3f ? -87.3f : (x > 88.7f ? 88.7f : x);
  float t = xc * 1.44269504f + 12582912.0f;   /* adding 1.5*2^23 rounds to an integer */
  float n = t - 12582912.0f;
  float r = xc - n * 0.693145751953125f;
  r = r - n * 1.428606765330187e-06f;
  float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
            r * (8.3333338e-3f + r * 1.3888889e-3f)))));
  int32_t ni = (int32_t)n;
  int32_t bits = (ni + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  float y = p * scale;
  return x < -87.3f ? 0.0f : y;
}

/* erf from Numerical Recipes' erfc Chebyshev fit (fractional error < 1.2e-7). */
static inline float fast_erff(float x) {
  float z = fabsf(x);
  float t = 1.0f / (1.0f + 0.5f * z);
  float poly = -1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
               t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f))))))));
  float erfc = t * fast_expf(-z * z + poly);
  float r = 1.0f - erfc;
  return x < 0 ? -r : r;
}

#define GELU_INV_SQRT2 0.70710678118654752f
#define GELU_INV_SQRT2PI 0.39894228040143268f

/* GELU with the exact erf, x * Phi(x), as torch's gelu(approximate='none'). */
static inline float fast_gelu(float x) { return 0.5f * x * (1.0f + fast_erff(x * GELU_INV_SQRT2)); }

#endif
