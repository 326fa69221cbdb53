/* The bf16 product emulated in float (gemm_bf16_emu.inc), compiled for the avx512 level. */
#define EMU_TABLE gemm_bf16_kernels_avx512
#define EMU_BACKEND "avx512-bf16-emulated"
#define EMU_MR 8
#define EMU_NR 32
#define EMU_FEW_ROWS 12
#include "engine/nn/gemm_bf16_emu.inc"
