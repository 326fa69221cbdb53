/* bfloat16: the upper 16 bits of a float (8-bit exponent, 8-bit significand).
**
** The conversion from float is the one AVX512-BF16's vcvtneps2bf16 makes, bit
** for bit, so that code converting in C and code converting with the
** instruction agree: round to nearest, ties to even; subnormals become a zero
** of the same sign (the instruction treats them as zero); a NaN stays a quiet
** NaN. tests/unit/test_gemm_bf16.c checks it against the instruction where the
** CPU has it. The product of two bfloat16 values is exact in float (8 + 8
** significant bits), which is what lets a float emulation of vdpbf16ps give
** its bits.
**
** A file written for PyTorch (maskd export --dtype bf16) rounds as torch does
** instead, bf16_from_f32_torch: the same but for subnormals, which torch rounds
** like any other value (1e-39 is 0x000b, not zero). */
#ifndef MASKD_BF16_H
#define MASKD_BF16_H

#include <stdint.h>
#include <string.h>

/* x rounded to bfloat16 (see above). */
static inline uint16_t bf16_from_f32(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);   /* NaN: quiet */
  if ((u & 0x7f800000u) == 0) return (uint16_t)(u >> 16 & 0x8000);          /* zero, subnormal: signed zero */
  u += 0x7fffu + (u >> 16 & 1);
  return (uint16_t)(u >> 16);
}

/* x rounded to bfloat16 as torch's float to bfloat16 conversion rounds it (c10's
** round_to_nearest_even): to nearest, ties to even, subnormals included, past the
** largest bfloat16 to infinity; a NaN stays a quiet NaN (its sign and top payload
** bits kept: torch's own NaN bits differ between its scalar and vector paths). */
static inline uint16_t bf16_from_f32_torch(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(u >> 16 | 0x40);   /* NaN: quiet */
  u += 0x7fffu + (u >> 16 & 1);
  return (uint16_t)(u >> 16);
}

/* The float whose upper half is h (exact). */
static inline float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

/* x rounded to bfloat16 and back: what a bf16 product sees of x. */
static inline float bf16_round(float x) { return bf16_to_f32(bf16_from_f32(x)); }

#endif
