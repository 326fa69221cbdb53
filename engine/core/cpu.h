/* Which instruction-set level the numeric kernels run at.
**
** maskd is built for a baseline x86-64 (x86-64-v2: SSE4.2, POPCNT) so that one
** binary starts on every 64-bit x86 CPU; the kernels that decide its speed are
** also compiled for higher levels, each in its own object, and the level is
** chosen once per process from cpuid (and the OS's saving of the wider
** registers): the highest the CPU has, or a lower one named by MASKD_ISA
** (generic | avx2 | avx512 | avx512bf16), for tests and comparisons. Levels,
** lowest first:
**   generic     baseline C (and OpenBLAS, which picks its own kernels, for products)
**   avx2        x86-64-v3: AVX2, FMA, BMI1, BMI2, F16C, MOVBE, LZCNT
**   avx512      x86-64-v4: AVX-512 F, CD, BW, DQ, VL
**   avx512bf16  avx512 and AVX512_BF16: the bf16 products by vdpbf16ps (the float
**               kernels are avx512's; below this level bf16 products are emulated
**               in float, with the same bits)
** Room is left above for AMX. */
#ifndef MASKD_CPU_H
#define MASKD_CPU_H

#include "engine/core/err.h"

typedef enum CpuIsa { CPU_ISA_GENERIC = 0, CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_AVX512BF16, CPU_ISA_COUNT } CpuIsa;

/* The highest level this CPU (and OS) can run. */
CpuIsa cpu_isa_best(void);

/* The level the kernels run at: MASKD_ISA when set and runnable, else cpu_isa_best().
** Fixed at the first call (thread-safe); cpu_isa_select() may change it later. */
CpuIsa cpu_isa(void);

/* Makes `isa` the level from now on; -1 (ERR_INVALID, the message names what the
** CPU lacks) when the CPU cannot run it. For tests that run every level in turn. */
int cpu_isa_select(CpuIsa isa, Err *err);

/* Checks MASKD_ISA: 0 when unset or a level this CPU runs; -1 with a one-line
** message (an unknown name, or a level the CPU lacks) otherwise. main() calls it
** so that a wrong setting stops the program instead of being ignored. */
int cpu_isa_check_env(Err *err);

/* "generic", "avx2", "avx512", "avx512bf16". */
const char *cpu_isa_name(CpuIsa isa);

/* 0 and *out when name is one of cpu_isa_name()'s; -1 otherwise. */
int cpu_isa_parse(const char *name, CpuIsa *out);

/* Whether the CPU has AVX512-BF16 (vdpbf16ps), whatever level is chosen. */
int cpu_has_avx512_bf16(void);

/* The CPU's model name as /proc/cpuinfo gives it ("AMD EPYC 9B45"), into buf; "unknown" when unreadable. */
void cpu_model_name(char *buf, int cap);

#endif
