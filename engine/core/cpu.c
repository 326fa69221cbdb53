#include "engine/core/cpu.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[CPU_ISA_COUNT] = {"generic", "avx2", "avx512", "avx512bf16"};

const char *cpu_isa_name(CpuIsa isa) { return isa >= 0 && isa < CPU_ISA_COUNT ? isa_names[isa] : "?"; }

int cpu_isa_parse(const char *name, CpuIsa *out) {
  for (int i = 0; i < CPU_ISA_COUNT; i++)
    if (name && strcmp(name, isa_names[i]) == 0) {
      *out = (CpuIsa)i;
      return 0;
    }
  return -1;
}

/* F16C, MOVBE and LZCNT, the rest of x86-64-v3 beside AVX2, FMA, BMI1 and BMI2,
** from cpuid itself (clang's __builtin_cpu_supports does not know their names). */
static int has_v3_rest(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)) || !(c & (1u << 22))) return 0;   /* F16C, MOVBE */
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 5));                          /* LZCNT (ABM) */
}

/* The compiler's cpuid reader also checks, through xgetbv, that the OS saves the
** ymm / zmm registers, so a level reported here is one the process may use. The
** levels are x86-64-v3 and -v4 feature by feature (what -march=x86-64-v3 / -v4
** let the compiler emit in the kernels' objects). */
CpuIsa cpu_isa_best(void) {
  __builtin_cpu_init();
  int v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
           __builtin_cpu_supports("bmi2") && has_v3_rest();
  int v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
  int bf16 = v4 && __builtin_cpu_supports("avx512bf16");
  return bf16 ? CPU_ISA_AVX512BF16 : v4 ? CPU_ISA_AVX512 : v3 ? CPU_ISA_AVX2 : CPU_ISA_GENERIC;
}

int cpu_has_avx512_bf16(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") != 0;
}

static int isa_refuse(CpuIsa isa, Err *err) {
  return err_setk(
      err, ERR_INVALID, "this CPU cannot run the %s kernels (it needs %s; the CPU's best is %s)", cpu_isa_name(isa),
      isa == CPU_ISA_AVX512BF16 ? "x86-64-v3, AVX-512 F, CD, BW, DQ, VL and AVX512_BF16"
      : isa == CPU_ISA_AVX512   ? "x86-64-v3 and AVX-512 F, CD, BW, DQ, VL"
                                : "AVX2, FMA, BMI1, BMI2, F16C, MOVBE, LZCNT",
      cpu_isa_name(cpu_isa_best()));
}

int cpu_isa_check_env(Err *err) {
  const char *v = getenv("MASKD_ISA");
  if (!v || !*v) return 0;
  CpuIsa isa;
  if (cpu_isa_parse(v, &isa)) {
    /* The value is echoed, so a control character in it would break the one-line message. */
    for (const char *c = v; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f)
        return err_setk(err, ERR_INVALID, "MASKD_ISA holds a control character: expected generic, avx2, avx512 or avx512bf16");
    return err_setk(err, ERR_INVALID, "MASKD_ISA=%.40s: expected generic, avx2, avx512 or avx512bf16", v);
  }
  if (isa > cpu_isa_best()) {
    isa_refuse(isa, err);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "MASKD_ISA=%s", cpu_isa_name(isa));
    return err_prefix(err, prefix);
  }
  return 0;
}

static _Atomic int chosen = -1;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* MASKD_ISA when it names a level this CPU runs (main() has refused the others
** with a message; a library user gets the best level instead), else the best. */
static void choose(void) {
  CpuIsa best = cpu_isa_best(), isa = best;
  const char *v = getenv("MASKD_ISA");
  if (v && *v && cpu_isa_parse(v, &isa) == 0 && isa <= best) atomic_store(&chosen, (int)isa);
  else atomic_store(&chosen, (int)best);
}

CpuIsa cpu_isa(void) {
  pthread_once(&chosen_once, choose);
  return (CpuIsa)atomic_load(&chosen);
}

int cpu_isa_select(CpuIsa isa, Err *err) {
  if (isa < 0 || isa >= CPU_ISA_COUNT) return err_setk(err, ERR_INVALID, "unknown instruction-set level %d", (int)isa);
  if (isa > cpu_isa_best()) return isa_refuse(isa, err);
  pthread_once(&chosen_once, choose);
  atomic_store(&chosen, (int)isa);
  return 0;
}

void cpu_model_name(char *buf, int cap) {
  snprintf(buf, (size_t)cap, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "model name", 10) == 0) {
      char *v = strchr(line, ':');
      if (v) {
        v += 1 + (v[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        snprintf(buf, (size_t)cap, "%s", v);
      }
      break;
    }
  fclose(f);
}
