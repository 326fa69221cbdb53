#include "engine/nn/optim.h"

#include "engine/core/platform.h"

#include "engine/core/cpu.h"
#include "engine/nn/adam_kernels.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

AdamWConfig adamw_defaults(void) {
  AdamWConfig c = {1e-4, 0.9, 0.999, 1e-8, 0.0, 0.0, 0, 0, 0.0};
  return c;
}

AdamW *adamw_new(const AdamWConfig *cfg, size_t n, const AdamWSegment *segs, int n_segs, Err *err) {
  return adamw_new_sharded(cfg, n, segs, n_segs, n, err);
}

AdamW *adamw_new_sharded(const AdamWConfig *cfg, size_t n, const AdamWSegment *segs, int n_segs, size_t ns,
                         Err *err) {
  if (!(cfg->lr >= 0) || !(cfg->beta1 >= 0 && cfg->beta1 < 1) || !(cfg->beta2 >= 0 && cfg->beta2 < 1) ||
      !(cfg->eps > 0) || !(cfg->weight_decay >= 0) || !(cfg->clip_norm >= 0) || cfg->warmup_steps < 0 ||
      cfg->total_steps < 0 || !(cfg->min_lr_ratio >= 0)) {
    err_set(err, "adamw: lr, betas in [0,1), eps > 0, weight decay, clip norm, steps must be non-negative");
    return NULL;
  }
  AdamW *o = calloc(1, sizeof *o);
  if (!o) { err_set(err, "adamw: out of memory"); return NULL; }
  o->cfg = *cfg;
  o->n = n;
  o->n_state = ns;
  o->threads = omp_get_max_threads();
  o->m = platform_alloc_floats(ns ? ns : 1);
  o->v = platform_alloc_floats(ns ? ns : 1);
  if (o->m) memset(o->m, 0, (ns ? ns : 1) * sizeof(float));
  if (o->v) memset(o->v, 0, (ns ? ns : 1) * sizeof(float));
  /* The flags as runs, not one byte per parameter: the update then reads
  ** 7 floats' worth per parameter, not 7 and a byte. Later segments win where
  ** segments overlap (a fused tensor and its views); uncovered entries do not decay. */
  unsigned char *flag = calloc(n ? n : 1, 1);
  if (!o->m || !o->v || !flag) {
    free(flag);
    adamw_free(o);
    err_set(err, "adamw: out of memory for %zu parameters", n);
    return NULL;
  }
  for (int i = 0; i < n_segs; i++) {
    if (segs[i].offset > n || segs[i].count > n - segs[i].offset) {
      free(flag);
      adamw_free(o);
      err_set(err, "adamw: segment %d (%zu + %zu) runs past %zu parameters", i, segs[i].offset, segs[i].count, n);
      return NULL;
    }
    memset(flag + segs[i].offset, segs[i].decay ? 1 : 0, segs[i].count);
  }
  int runs = 1;
  for (size_t i = 1; i < n; i++) runs += flag[i] != flag[i - 1];
  o->run_start = malloc(sizeof(size_t) * (size_t)runs);
  o->run_decay = malloc((size_t)runs);
  if (!o->run_start || !o->run_decay) {
    free(flag);
    adamw_free(o);
    err_set(err, "adamw: out of memory");
    return NULL;
  }
  o->run_start[0] = 0;
  o->run_decay[0] = flag[0];
  o->n_runs = 1;
  for (size_t i = 1; i < n; i++)
    if (flag[i] != flag[i - 1]) {
      o->run_start[o->n_runs] = i;
      o->run_decay[o->n_runs++] = flag[i];
    }
  free(flag);
  return o;
}

void adamw_free(AdamW *o) {
  if (!o) return;
  free(o->m); free(o->v); free(o->run_start); free(o->run_decay);
  free(o);
}

double adamw_lr_at(const AdamWConfig *c, long step) {
  /* transformers' WarmUp(PolynomialDecay): step/warmup * lr while step < warmup
  ** (so the first update has lr 0), then a power-1 decay to min_lr_ratio * lr
  ** over total - warmup steps, held there afterwards. */
  if (step < c->warmup_steps) return c->lr * (double)step / (double)c->warmup_steps;
  double end = c->lr * c->min_lr_ratio;
  long decay_steps = c->total_steps - c->warmup_steps;
  if (decay_steps <= 0) return end;
  double frac = (double)(step - c->warmup_steps) / (double)decay_steps;
  if (frac > 1) frac = 1;
  return (c->lr - end) * (1.0 - frac) + end;
}

/* The norm on `threads` threads, the same bits on any count: NORM_BLOCKS blocks cut by n
** alone, each summed by adamw_sumsq on one thread, then the blocks' sums in order. (A
** reduction over threads would add in an order that follows their number, and a fine-tuning
** run's clipping, so its parameters, would follow --threads.) */
enum { NORM_BLOCKS = 256 };
static double grad_norm(const float *grads, size_t n, int threads) {
  double part[NORM_BLOCKS];
  size_t per = (n + NORM_BLOCKS - 1) / NORM_BLOCKS;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int b = 0; b < NORM_BLOCKS; b++) {
    size_t lo = (size_t)b * per < n ? (size_t)b * per : n, hi = lo + per < n ? lo + per : n;
    part[b] = adamw_sumsq(grads + lo, hi - lo);
  }
  double s = 0;
  for (int b = 0; b < NORM_BLOCKS; b++) s += part[b];
  return sqrt(s);
}

double adamw_grad_norm(const float *grads, size_t n) { return grad_norm(grads, n, omp_get_max_threads()); }

static const AdamKernels *adam_kernels(void) {
  switch (cpu_isa()) {
  case CPU_ISA_AVX512BF16:
  case CPU_ISA_AVX512: return &adam_kernels_avx512;
  case CPU_ISA_AVX2: return &adam_kernels_avx2;
  default: return &adam_kernels_generic;
  }
}

/* The update over [base, base + n) on `threads` threads, cut at the decay runs. */
static void apply_ranges(const AdamW *o, const AdamRange *r, size_t n, int threads) {
  AdamRangeFn *range = adam_kernels()->range;
#pragma omp parallel num_threads(threads)
  {
    /* One contiguous slice per thread, 16-float aligned so slices share no cache line. */
    size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    size_t per = ((n + nt - 1) / nt + 15) & ~(size_t)15;
    size_t lo = id * per < n ? id * per : n, hi = lo + per < n ? lo + per : n;
    lo += r->base;
    hi += r->base;
    for (int k = 0; k < o->n_runs && lo < hi; k++) {
      size_t end = k + 1 < o->n_runs ? o->run_start[k + 1] : o->n;
      if (end <= lo) continue;
      size_t stop = end < hi ? end : hi;
      range(r, lo, stop, o->run_decay[k]);
      lo = stop;
    }
  }
}

AdamWUpdate adamw_update_at(const AdamW *o, double norm) {
  const AdamWConfig *c = &o->cfg;
  /* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1. */
  float gscale = 1.0f;
  if (c->clip_norm > 0) {
    double coef = c->clip_norm / (norm + 1e-6);
    if (coef < 1) gscale = (float)coef;
  }
  long t = o->step + 1;
  double lr = adamw_lr_at(c, o->step);
  double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
  AdamWUpdate u = {lr, gscale, (float)c->beta1, (float)c->beta2, (float)c->eps,
                   (float)(lr / bc1), (float)(1.0 / sqrt(bc2)), (float)(1.0 - lr * c->weight_decay)};
  return u;
}

void adamw_apply(const AdamW *o, const AdamWUpdate *u, float *p, const float *g, float *m, float *v, size_t lo,
                 size_t n, int threads) {
  AdamRange r = {p, g, m, v, lo, u->gscale, u->b1, u->b2, u->eps, u->step_size, u->inv_sqrt_bc2, u->decay_mul};
  apply_ranges(o, &r, n, threads < 1 ? 1 : threads);
}

double adamw_sumsq(const float *g, size_t n) {
  /* Eight running sums, each over every eighth element, then added in lane order:
  ** adam_kernels.h's, at the level in use (the same bits at each). */
  return adam_kernels()->sumsq(g, n);
}

double adamw_step(AdamW *o, float *params, float *grads) {
  int threads = o->threads < 1 ? 1 : o->threads;
  double norm = grad_norm(grads, o->n, threads);
  AdamWUpdate u = adamw_update_at(o, norm);
  adamw_apply(o, &u, params, grads, o->m, o->v, 0, o->n, threads);
  o->step++;
  return norm;
}
