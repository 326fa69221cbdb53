/* The bf16 product emulated in float (gemm_bf16_emu.inc), compiled for the avx2 level. */
#define EMU_TABLE gemm_bf16_kernels_avx2
#define EMU_BACKEND "avx2-bf16-emulated"
#define EMU_MR 4
#define EMU_NR 16
#define EMU_FEW_ROWS 6
#include "engine/nn/gemm_bf16_emu.inc"
