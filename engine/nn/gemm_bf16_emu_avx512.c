/* The bf16 product emulated in float (gemm_bf16_emu.inc), compiled for the
** avx512 level (a CPU without AVX512-BF16), its few-row product in AVX-512
** intrinsics (gemm_bf16_emu_few_rows.inc). */
#define EMU_TABLE gemm_bf16_kernels_avx512
#define EMU_BACKEND "avx512-bf16-emulated"
/* The blocked tile is gemm_avx512.c's fp32 tile, of 12 x 32, on wide panels (gemm_bf16_emu.inc). */
#define EMU_FP32_TILE gemm_kernels_avx512
#define EMU_MR 12
#define EMU_NR 32

#include <immintrin.h>

/* 32 registers: a unit's 12 rows at once, 24 accumulators for 32 rows of A,
** both halves of x in registers. */
#define FR_LANES 16
#ifndef FR_ROWS
#define FR_ROWS(NV) 12
#endif
#ifndef FR_X_MEM
#define FR_X_MEM(NV) 0
#endif
#define FR_VEC __m512
#define FR_VECI __m512i
#define FR_ZERO() _mm512_setzero_ps()
#define FR_LOADU(p) _mm512_loadu_ps(p)
#define FR_STORE(p, v) _mm512_store_ps(p, v)
#define FR_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FR_FMA_MEM(a, p, c) _mm512_fmadd_ps(a, _mm512_loadu_ps(p), c)
#define FR_PAIR(u) _mm512_set1_epi32((int)(u))
#define FR_EVEN(v) _mm512_castsi512_ps(_mm512_slli_epi32(v, 16))
#define FR_ODD(v, m) _mm512_castsi512_ps(_mm512_and_si512(v, m))
#include "engine/nn/gemm_bf16_emu_few_rows.inc"

#include "engine/nn/gemm_bf16_emu.inc"
