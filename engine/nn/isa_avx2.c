/* engine/nn's loops (all but the products, which have gemm_*.c) compiled for
** AVX2 + FMA (x86-64-v3): the layers (layer_kernels.inc) and AdamW's update (adam_kernels.inc). */
#define LAYER_KERNELS_TABLE layer_kernels_avx2
#include "engine/nn/layer_kernels.inc"
#define ADAM_KERNELS_TABLE adam_kernels_avx2
#include "engine/nn/adam_kernels.inc"
