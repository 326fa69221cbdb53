#include "engine/core/platform.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* Core types whose kernels stop at AVX2 or below (OpenBLAS's names). */
static const char *const pre_avx512_cores[] = {
  "Haswell", "Zen", "SandyBridge", "Sandybridge", "Nehalem", "Core2", "Penryn", "Dunnington",
  "Atom", "Prescott", "Barcelona", "Bulldozer", "Piledriver", "Steamroller", "Excavator",
  "Opteron", "Nano", "Katmai", "Coppermine", "Northwood", "Banias", NULL,
};

void platform_fix_openblas_env(char **argv) {
  const char *core = getenv("OPENBLAS_CORETYPE");
  if (!core || !*core) return;
  const char *keep = getenv("MASKD_KEEP_OPENBLAS_CORETYPE");
  if (keep && strcmp(keep, "1") == 0) return;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return;
  int slow = 0;
  for (int i = 0; pre_avx512_cores[i]; i++)
    if (strcasecmp(core, pre_avx512_cores[i]) == 0) slow = 1;
  if (!slow) return;
  fprintf(stderr,
          "maskd: note: OPENBLAS_CORETYPE=%s would force AVX2 kernels on this AVX-512 CPU (about half "
          "the matrix speed); running without it (set MASKD_KEEP_OPENBLAS_CORETYPE=1 to keep it)\n", core);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("OPENBLAS_L2_SIZE");
  execv("/proc/self/exe", argv);
  fprintf(stderr, "maskd: warning: could not re-execute without OPENBLAS_CORETYPE; "
                  "run `env -u OPENBLAS_CORETYPE maskd ...` for full speed\n");
}

float *platform_alloc_floats(size_t n) {
  size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63, huge = (size_t)2 << 20;
  if (bytes < huge) return aligned_alloc(64, bytes ? bytes : 64);
  bytes = (bytes + huge - 1) & ~(huge - 1);
  float *p = aligned_alloc(huge, bytes);
  if (p) (void)madvise(p, bytes, MADV_HUGEPAGE);   /* advice only: without it, plain pages */
  return p;
}

long platform_page_size(void) {
  long n = sysconf(_SC_PAGESIZE);
  return n > 0 ? n : 4096;
}

void platform_release_pages(void *p, size_t bytes) { (void)madvise(p, bytes, MADV_DONTNEED); }

void platform_small_pages(void *p, size_t bytes) { (void)madvise(p, bytes, MADV_NOHUGEPAGE); }

int platform_cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int platform_pin_threads(int threads) {
  const char *pin = getenv("MASKD_PIN_THREADS");
  if (threads < 2 || (pin && strcmp(pin, "0") == 0)) return 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < threads) return 0;
  int cpus[CPU_SETSIZE], n = 0;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
  int bound = 0;
#pragma omp parallel num_threads(threads) reduction(+ : bound)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[omp_get_thread_num()], &one);
    bound = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  }
  return bound;
}
