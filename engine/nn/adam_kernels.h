/* AdamW's element-wise update and the clipping norm's sum of squares, one table
** per instruction-set level (internal to engine/nn): adam_kernels.inc compiled for
** generic, AVX2 and AVX-512 code (isa_*.c); optim.c calls cpu_isa()'s level's. Every
** level gives every element the same bits: the vector loops do the scalar
** loop's operations one by one, fused where it fuses. */
#ifndef MASKD_ADAM_KERNELS_H
#define MASKD_ADAM_KERNELS_H

#include <stddef.h>

typedef struct AdamRange {
  float *p; const float *g; float *m, *v;   /* at global element `base` */
  size_t base;
  float gscale, b1, b2, eps, step_size, inv_sqrt_bc2, decay_mul;
} AdamRange;

/* The update of elements [glo, ghi) (global indices, within r's span); decayed
** says whether weight decay applies to them. */
typedef void AdamRangeFn(const AdamRange *r, size_t glo, size_t ghi, int decayed);

/* The sum of squares of g[0, n) as adamw_sumsq defines it (optim.h): eight running
** double sums, sum j over g[j], g[j + 8], ... in order (each square exact in double),
** then the eight added in order. The vector levels keep each sum in its own lane, so
** every level gives the same bits; the generic level's scalar loop is the
** definition. Why per level: built for x86-64-v2, the eight chains ran under the
** memory's rate; per level, base's optimizer phase took 95-104 ms instead of
** 116-120 on an Intel Xeon (BENCHMARKS.md, issue 14's Intel section). */
typedef double AdamSumsqFn(const float *g, size_t n);

/* A level's two loops (adam_kernels.inc, compiled once per level by isa_*.c). */
typedef struct AdamKernels {
  AdamRangeFn *range;
  AdamSumsqFn *sumsq;
} AdamKernels;
extern const AdamKernels adam_kernels_generic, adam_kernels_avx2, adam_kernels_avx512;

#endif
