/* The bf16 product emulated in float (gemm_bf16_emu.inc), compiled for the avx2
** level, its few-row product in AVX2 + FMA intrinsics (gemm_bf16_emu_few_rows.inc). */
#define EMU_TABLE gemm_bf16_kernels_avx2
#define EMU_BACKEND "avx2-bf16-emulated"
/* The blocked tile is gemm_avx2.c's fp32 tile, of 6 x 16, on wide panels (gemm_bf16_emu.inc). */
#define EMU_FP32_TILE gemm_kernels_avx2
#define EMU_MR 6
#define EMU_NR 16

#include "engine/nn/gemm_avx2_common.h"

#include <immintrin.h>

/* 16 registers (measured, 1 to 32 rows of A): 8 rows of A take a unit's 12 rows
** at once, x's odd half from memory; 16 rows take 4 at a time, all of x in
** registers; 24 and 32 rows take 3 and 2, x's odd half from memory. The
** #ifndef lets a build try others. */
#define FR_LANES 8
#ifndef FR_ROWS
#define FR_ROWS(NV) ((NV) == 1 ? 12 : (NV) == 2 ? 4 : (NV) == 3 ? 3 : 2)
#endif
#ifndef FR_X_MEM
#define FR_X_MEM(NV) ((NV) == 2 ? 0 : 1)
#endif
#define FR_VEC __m256
#define FR_VECI __m256i
#define FR_ZERO() _mm256_setzero_ps()
#define FR_LOADU(p) _mm256_loadu_ps(p)
#define FR_STORE(p, v) _mm256_store_ps(p, v)
#define FR_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FR_FMA_MEM(a, p, c) fr_fma_mem(a, p, c)
/* a b + c with b read from memory by the instruction itself: the compiler would
** otherwise keep b in a register, which the accumulators need. */
static inline __m256 fr_fma_mem(__m256 a, const float *b, __m256 c) {
  __asm__("vfmadd231ps %2, %1, %0" : "+x"(c) : "x"(a), "m"(*(const float(*)[8])b));
  return c;
}
#define FR_STORE_TILE few_rows_store_avx2
#define FR_PAIR(u) _mm256_set1_epi32((int)(u))
#define FR_EVEN(v) _mm256_castsi256_ps(_mm256_slli_epi32(v, 16))
#define FR_ODD(v, m) _mm256_castsi256_ps(_mm256_and_si256(v, m))
#include "engine/nn/gemm_bf16_emu_few_rows.inc"

#include "engine/nn/gemm_bf16_emu.inc"
