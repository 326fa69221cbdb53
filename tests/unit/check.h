/* A minimal test harness: every check prints "PASS name" or "FAIL name: why"
** (the format tests/run counts), or "SKIP name: why" for one this machine
** cannot run, and check_exit() gives the exit status. */
#ifndef MASKD_TESTS_CHECK_H
#define MASKD_TESTS_CHECK_H
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int check_failures;

/* Records one named check: prints PASS, or FAIL with the printf-style reason. */
static inline void check(int ok, const char *name, const char *why_fmt, ...) {
  if (ok) { printf("PASS %s\n", name); fflush(stdout); return; }
  va_list ap; va_start(ap, why_fmt);
  printf("FAIL %s: ", name); vprintf(why_fmt, ap); printf("\n");
  va_end(ap); fflush(stdout);
  check_failures++;
}

/* Records a check this machine cannot run, by name and why (a kernel for an
** instruction set the CPU lacks): tests/run lists it, never as passed. */
static inline void check_skip(const char *name, const char *why) {
  printf("SKIP %s: %s\n", name, why);
  fflush(stdout);
}

/* Largest |a[i]-b[i]| over n floats. */
static inline double check_max_abs_diff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) { double d = fabs((double)a[i] - (double)b[i]); if (d > m || d != d) m = d; }
  return m;
}

/* Largest |a[i]| over n floats. */
static inline double check_max_abs(const float *a, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) { double d = fabs((double)a[i]); if (d > m) m = d; }
  return m;
}

/* Exit status for main(): 0 when every check passed. */
static inline int check_exit(void) { return check_failures ? 1 : 0; }

#endif
