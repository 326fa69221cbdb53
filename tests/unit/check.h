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

/* Under the sanitizers (MASKD_ASAN set by tests/run) a product's check against its
** double reference may sample: in products of a million multiply-adds or more, only the
** elements in the 8 edge rows and columns and in every 7th row and column. ASan finds
** memory errors while the product runs, and the instrumented reference took most of the
** run; the plain build compares every element. 1 when element (i, j) of an M x N
** product of depth K is compared. */
static inline int check_element_sampled(int i, int j, int M, int N, int K) {
  static int sanitized = -1;
  if (sanitized < 0) sanitized = getenv("MASKD_ASAN") != NULL;
  return !sanitized || (double)M * N * K < 1e6 || ((i < 8 || i >= M - 8 || i % 7 == 0) && (j < 8 || j >= N - 8 || j % 7 == 0));
}

/* Exit status for main(): 0 when every check passed. */
static inline int check_exit(void) { return check_failures ? 1 : 0; }

#endif
