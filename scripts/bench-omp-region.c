/* What one OpenMP parallel region of 2 threads costs here, under the wait policy the
** environment sets: the reason layer_kernels.inc's team_pays keeps a short text's
** LayerNorm and attention on one thread. Each of 2000 regions does nothing; between
** them the calling thread works about as long as a small layer does, so the worker
** has gone to sleep (PASSIVE) or is still spinning (ACTIVE, or the default's spin).
**
**   gcc -O2 -fopenmp scripts/bench-omp-region.c -o /tmp/bench-omp-region
**   OMP_WAIT_POLICY=PASSIVE /tmp/bench-omp-region; OMP_WAIT_POLICY=ACTIVE /tmp/bench-omp-region
**
** Prints the cost of one region (the loop with regions less the same loop without). */
#include <omp.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
  enum { REGIONS = 2000, WORK = 20000 };
  volatile int sink = 0;
  for (int round = 0; round < 3; round++) {
    double t0 = now();
    for (int i = 0; i < REGIONS; i++) {
#pragma omp parallel num_threads(2)
      sink += omp_get_thread_num();
      for (volatile int k = 0; k < WORK; k++) {}
    }
    double t1 = now();
    for (int i = 0; i < REGIONS; i++)
      for (volatile int k = 0; k < WORK; k++) {}
    double t2 = now();
    printf("one region of 2 threads: %.1f us\n", ((t1 - t0) - (t2 - t1)) / REGIONS * 1e6);
  }
  return 0;
}
