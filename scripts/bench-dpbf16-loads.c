/* How a broadcast load per vdpbf16ps bounds a loop of them: the measurement behind the
** bf16 few-row kernel's limit (BENCHMARKS.md, "bf16 mixed precision"). Four loops of 16
** independent vdpbf16ps chains on one thread, data in L1: operands in registers; a
** vector load per instruction; a 32-bit broadcast load per instruction (the few-row
** kernel at 16 rows); one broadcast shared by two instructions (its 32-row case).
**
**   gcc -O2 -march=x86-64-v4 -mavx512bf16 scripts/bench-dpbf16-loads.c -o /tmp/dpbf16 && /tmp/dpbf16
**
** Prints vdpbf16ps per ns and GFLOP/s for each loop, twice. On a CPU without
** AVX512_BF16 it says so and exits 1. */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

enum { CHAINS = 16 };
static uint32_t buf[4096] __attribute__((aligned(64)));

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sink(__m512 *acc, float *out) {
  for (int i = 1; i < CHAINS; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
  _mm512_storeu_ps(out, acc[0]);
}

__attribute__((noinline)) static void in_registers(long it, float *out) {
  __m512 acc[CHAINS];
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3f003f00);
  for (long k = 0; k < it; k++)
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  sink(acc, out);
}

__attribute__((noinline)) static void vector_load(long it, float *out) {
  __m512 acc[CHAINS];
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  for (long k = 0; k < it; k++) {
    const uint32_t *b = buf + (k & 7) * 256;
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, (__m512bh)_mm512_load_si512(b + 16 * i));
  }
  sink(acc, out);
}

__attribute__((noinline)) static void broadcast_each(long it, float *out) {
  __m512 acc[CHAINS];
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  for (long k = 0; k < it; k++) {
    const uint32_t *b = buf + (k & 63) * 32;
#pragma GCC unroll 16
    for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_dpbf16_ps(acc[i], x, (__m512bh)_mm512_set1_epi32((int)b[i]));
  }
  sink(acc, out);
}

__attribute__((noinline)) static void broadcast_shared(long it, float *out) {
  __m512 acc[CHAINS];
  for (int i = 0; i < CHAINS; i++) acc[i] = _mm512_setzero_ps();
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x3f003f00);
  for (long k = 0; k < it; k++) {
    const uint32_t *b = buf + (k & 63) * 32;
#pragma GCC unroll 8
    for (int i = 0; i < CHAINS / 2; i++) {
      __m512bh w = (__m512bh)_mm512_set1_epi32((int)b[i]);
      acc[2 * i] = _mm512_dpbf16_ps(acc[2 * i], x, w);
      acc[2 * i + 1] = _mm512_dpbf16_ps(acc[2 * i + 1], y, w);
    }
  }
  sink(acc, out);
}

int main(void) {
  if (!__builtin_cpu_supports("avx512bf16")) {
    fprintf(stderr, "bench-dpbf16-loads: this CPU has no AVX512_BF16; nothing measured\n");
    return 1;
  }
  static const struct { const char *name; void (*f)(long, float *); } loops[] = {
    {"operands in registers", in_registers}, {"vector load each", vector_load},
    {"broadcast load each", broadcast_each}, {"broadcast per two", broadcast_shared}};
  const long it = 20000000;
  float out[16];
  for (int round = 0; round < 2; round++)
    for (size_t j = 0; j < sizeof loops / sizeof loops[0]; j++) {
      double t = now();
      loops[j].f(it, out);
      t = now() - t;
      printf("%-22s %.2f vdpbf16ps/ns  %.1f GFLOP/s\n", loops[j].name, (double)it * CHAINS / t * 1e-9,
             (double)it * CHAINS * 64 / t * 1e-9);
    }
  return out[0] == 12345.0f;   /* keeps the sums */
}
