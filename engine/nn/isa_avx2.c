/* engine/nn's loops (all but the products, which have gemm_*.c) compiled for
** AVX2 + FMA (x86-64-v3): the layers (layer_kernels.inc) and AdamW's update (adam_kernels.inc). */
#define LAYER_KERNELS_TABLE layer_kernels_avx2
#include "engine/nn/layer_kernels.inc"
#define ADAM_RANGE_FN adam_range_avx2
#define ADAM_SUMSQ_FN adam_sumsq_avx2
#include "engine/nn/adam_kernels.inc"
