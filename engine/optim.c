#include "engine/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

AdamWConfig adamw_defaults(void) {
  AdamWConfig c = {1e-4, 0.9, 0.999, 1e-8, 0.0, 0.0, 0, 0, 0.0};
  return c;
}

AdamW *adamw_new(const AdamWConfig *cfg, size_t n, const AdamWSegment *segs, int n_segs, Err *err) {
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
  o->m = calloc(n ? n : 1, sizeof(float));
  o->v = calloc(n ? n : 1, sizeof(float));
  o->decay = calloc(n ? n : 1, 1);
  if (!o->m || !o->v || !o->decay) {
    adamw_free(o);
    err_set(err, "adamw: out of memory for %zu parameters", n);
    return NULL;
  }
  for (int i = 0; i < n_segs; i++) {
    if (segs[i].offset > n || segs[i].count > n - segs[i].offset) {
      adamw_free(o);
      err_set(err, "adamw: segment %d (%zu + %zu) runs past %zu parameters", i, segs[i].offset, segs[i].count, n);
      return NULL;
    }
    memset(o->decay + segs[i].offset, segs[i].decay ? 1 : 0, segs[i].count);
  }
  return o;
}

void adamw_free(AdamW *o) {
  if (!o) return;
  free(o->m); free(o->v); free(o->decay);
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

double adamw_grad_norm(const float *grads, size_t n) {
  double s = 0;
#pragma omp parallel for reduction(+ : s) schedule(static)
  for (size_t i = 0; i < n; i++) s += (double)grads[i] * grads[i];
  return sqrt(s);
}

double adamw_step(AdamW *o, float *params, float *grads) {
  const AdamWConfig *c = &o->cfg;
  double norm = adamw_grad_norm(grads, o->n);
  /* torch.nn.utils.clip_grad_norm_: scale by max_norm / (norm + 1e-6) when that is below 1. */
  float gscale = 1.0f;
  if (c->clip_norm > 0) {
    double coef = c->clip_norm / (norm + 1e-6);
    if (coef < 1) gscale = (float)coef;
  }
  long t = o->step + 1;
  double lr = adamw_lr_at(c, o->step);
  double bc1 = 1.0 - pow(c->beta1, (double)t), bc2 = 1.0 - pow(c->beta2, (double)t);
  /* torch.optim.AdamW: p *= 1 - lr*wd; m, v updated; p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps). */
  float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps;
  float step_size = (float)(lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
  float decay_mul = (float)(1.0 - lr * c->weight_decay);
  float *m = o->m, *v = o->v;
  const unsigned char *dec = o->decay;
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < o->n; i++) {
    float g = grads[i] * gscale;
    float p = dec[i] ? params[i] * decay_mul : params[i];
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] = p - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
  }
  o->step = t;
  return norm;
}
