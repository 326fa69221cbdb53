/* Does AMX's tdpbf16ps add as vdpbf16ps does? maskd's bf16 products are defined by
** vdpbf16ps's order (gemm_bf16_kernels.h: for each pair, acc += odd product, then
** += even product, each sum rounded to float), which its float emulation repeats bit
** for bit on every CPU. This probe multiplies random 16 x 32 by 32 x 16 bf16 tiles into
** random C with tdpbf16ps and counts the results that match each candidate order,
** first with one pair of K, then with 2, 4 and all 16 (BENCHMARKS.md, issue 15:
** "On an Intel Xeon"). Needs a CPU and kernel with AMX (amx_bf16 in /proc/cpuinfo):
**
**   gcc -O2 -mamx-tile -mamx-bf16 -o /tmp/probe-amx scripts/probe-amx-bf16.c -lm && /tmp/probe-amx
*/
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18, TRIALS = 2000 };

typedef struct {
  uint8_t palette, start;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} __attribute__((packed)) TileConfig;

static uint16_t to_bf16(float f) {   /* round to nearest even, as bf16.h does (no NaNs here) */
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float random_value(void) {   /* mantissas of both signs, exponents -10 .. 9: sums that round */
  return ldexpf((float)rand() / RAND_MAX * 2 - 1, rand() % 20 - 10);
}

int main(void) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
    fprintf(stderr, "probe-amx-bf16: the kernel grants no AMX tile data to this process\n");
    return 1;
  }
  TileConfig cfg = {.palette = 1};
  for (int t = 0; t < 3; t++) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  static uint16_t A[16 * 32], B[16 * 32];
  static float C[256], C0[256];
  static const char *names[] = {"odd then even, each rounded (vdpbf16ps)", "even then odd, each rounded",
                                "each pair summed exactly, then added", "one rounding of the exact sum"};
  for (int pairs = 1; pairs <= 16; pairs *= pairs == 4 ? 4 : 2) {
    long match[4] = {0}, n = 0;
    srand(7);
    for (int trial = 0; trial < TRIALS; trial++) {
      for (int i = 0; i < 512; i++) A[i] = to_bf16(random_value()), B[i] = to_bf16(random_value());
      for (int m = 0; m < 16; m++)
        for (int k = pairs; k < 16; k++) A[m * 32 + 2 * k] = A[m * 32 + 2 * k + 1] = 0;
      for (int i = 0; i < 256; i++) C0[i] = C[i] = random_value();
      _tile_loadd(0, C, 64);
      _tile_loadd(1, A, 64);
      _tile_loadd(2, B, 64);
      _tile_dpbf16ps(0, 1, 2);
      _tile_stored(0, C, 64);
      for (int m = 0; m < 16; m++)
        for (int j = 0; j < 16; j++) {
          float odd_first = C0[m * 16 + j], even_first = odd_first, pairwise = odd_first;
          double exact = odd_first;
          for (int k = 0; k < pairs; k++) {
            float ae = from_bf16(A[m * 32 + 2 * k]), ao = from_bf16(A[m * 32 + 2 * k + 1]);
            float be = from_bf16(B[k * 32 + 2 * j]), bo = from_bf16(B[k * 32 + 2 * j + 1]);
            odd_first = fmaf(ae, be, fmaf(ao, bo, odd_first));
            even_first = fmaf(ao, bo, fmaf(ae, be, even_first));
            pairwise = pairwise + (float)((double)ae * be + (double)ao * bo);
            exact += (double)ae * be + (double)ao * bo;
          }
          float got = C[m * 16 + j], want[4] = {odd_first, even_first, pairwise, (float)exact};
          for (int c = 0; c < 4; c++) match[c] += !memcmp(&got, &want[c], 4);
          n++;
        }
    }
    printf("%2d pair%s of K, %ld results:\n", pairs, pairs > 1 ? "s" : "", n);
    for (int c = 0; c < 4; c++) printf("  %-42s %6.2f%% match\n", names[c], 100.0 * match[c] / n);
  }
  _tile_release();
  return 0;
}
