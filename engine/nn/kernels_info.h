/* Which numeric kernels this process runs, in one place, for whoever reports
** it: `maskd bench`, `maskd version`, the service's /metrics, a run's record,
** and the data-parallel check that every rank runs the same ones. The level
** comes from engine/core/cpu.c, the products' backend from gemm.c. */
#ifndef MASKD_KERNELS_INFO_H
#define MASKD_KERNELS_INFO_H

typedef struct KernelsInfo {
  const char *isa;    /* the level in use: cpu_isa_name(cpu_isa()) */
  const char *best;   /* the highest level the CPU runs */
  const char *gemm;   /* gemm_backend(): "avx512-blocked", "openblas", ... */
  const char *gemm_bf16;   /* gemm_bf16_backend(): "avx512bf16-blocked", "avx2-bf16-emulated", ... */
  int avx512_bf16;    /* 1 when the CPU has AVX512-BF16 */
  char cpu[128];      /* the CPU's model name, "unknown" when unreadable */
} KernelsInfo;

/* Fills *k with the current process's kernels (reads /proc/cpuinfo once per call). */
void kernels_info(KernelsInfo *k);

/* One line for people, into buf: "kernels avx512bf16 (best avx512bf16, avx512-bf16
** yes), gemm avx512-blocked, bf16 gemm avx512bf16-blocked, CPU AMD EPYC 9B45". */
void kernels_info_line(char *buf, int cap);

#endif
