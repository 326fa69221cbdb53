#include "engine/nn/kernels_info.h"

#include <stdio.h>

#include "engine/core/cpu.h"
#include "engine/nn/gemm.h"

void kernels_info(KernelsInfo *k) {
  k->isa = cpu_isa_name(cpu_isa());
  k->best = cpu_isa_name(cpu_isa_best());
  k->gemm = gemm_backend();
  k->gemm_bf16 = gemm_bf16_backend();
  k->avx512_bf16 = cpu_has_avx512_bf16();
  cpu_model_name(k->cpu, (int)sizeof k->cpu);
}

void kernels_info_line(char *buf, int cap) {
  KernelsInfo k;
  kernels_info(&k);
  snprintf(buf, (size_t)cap, "kernels %s (best %s, avx512-bf16 %s), gemm %s, bf16 gemm %s, CPU %s", k.isa,
           k.best, k.avx512_bf16 ? "yes" : "no", k.gemm, k.gemm_bf16, k.cpu);
}
