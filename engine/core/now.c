#include "engine/core/now.h"

#include <time.h>

static double seconds(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double now_monotonic(void) { return seconds(CLOCK_MONOTONIC); }
double now_wall(void) { return seconds(CLOCK_REALTIME); }
