/* The bf16 product emulated in float (gemm_bf16_emu.inc), compiled for the generic level. */
#define EMU_TABLE gemm_bf16_kernels_generic
#define EMU_BACKEND "generic-bf16-emulated"
#define EMU_MR 4
#define EMU_NR 16
#define EMU_FEW_ROWS 6
#include "engine/nn/gemm_bf16_emu.inc"
