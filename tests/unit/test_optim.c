/* AdamW and its schedule against an independent double-precision transcription
** of torch.optim.AdamW, torch.nn.utils.clip_grad_norm_ and transformers' linear
** warm-up/decay schedule. */
#include <math.h>
#include <string.h>

#include "engine/nn/optim.h"
#include "engine/core/rng.h"
#include "tests/unit/check.h"

static AdamWConfig cfg_of(double lr, double wd, double clip, long warm, long total, double min_ratio) {
  AdamWConfig c = adamw_defaults();
  c.lr = lr; c.weight_decay = wd; c.clip_norm = clip; c.warmup_steps = warm; c.total_steps = total;
  c.min_lr_ratio = min_ratio;
  return c;
}

int main(void) {
  /* Schedule: warm-up 3, total 10, lr 1: 0, 1/3, 2/3, then (10-s)/7, then 0. */
  AdamWConfig c = cfg_of(1.0, 0, 0, 3, 10, 0);
  double want[12] = {0, 1.0 / 3, 2.0 / 3, 1, 6.0 / 7, 5.0 / 7, 4.0 / 7, 3.0 / 7, 2.0 / 7, 1.0 / 7, 0, 0};
  double worst = 0;
  for (int s = 0; s < 12; s++) worst = fmax(worst, fabs(adamw_lr_at(&c, s) - want[s]));
  check(worst < 1e-12, "optim_linear_schedule", "worst difference %.3g", worst);
  c = cfg_of(2.0, 0, 0, 0, 4, 0.25);   /* no warm-up: the first update has the full rate; floor 0.5 */
  check(fabs(adamw_lr_at(&c, 0) - 2.0) < 1e-12 && fabs(adamw_lr_at(&c, 2) - 1.25) < 1e-12 &&
        fabs(adamw_lr_at(&c, 9) - 0.5) < 1e-12, "optim_schedule_min_lr_ratio", "%g %g %g",
        adamw_lr_at(&c, 0), adamw_lr_at(&c, 2), adamw_lr_at(&c, 9));

  /* Five updates of 1000 parameters, decay on the first 600 only, clipping active. */
  enum { N = 1000 };
  static float p[N], g[N];
  static double pd[N], md[N], vd[N];
  Rng r;
  rng_seed(&r, 3);
  for (int i = 0; i < N; i++) pd[i] = p[i] = (float)rng_normal(&r);
  c = cfg_of(1e-2, 0.1, 5.0, 2, 6, 0);
  AdamWSegment segs[2] = {{0, 600, 1}, {600, 400, 0}};
  Err err;
  AdamW *o = adamw_new(&c, N, segs, 2, &err);
  check(o != NULL, "optim_new", "%s", err.msg);
  double werr = 0, nerr = 0;
  int clipped = 0;
  for (int s = 0; s < 5 && o; s++) {
    for (int i = 0; i < N; i++) g[i] = (float)(rng_normal(&r) * (1 + (i % 7)));
    double norm = 0;
    for (int i = 0; i < N; i++) norm += (double)g[i] * g[i];
    norm = sqrt(norm);
    double got = adamw_step(o, p, g);
    nerr = fmax(nerr, fabs(got - norm) / norm);
    double coef = c.clip_norm / (norm + 1e-6);
    if (coef > 1) coef = 1; else clipped++;
    double lr = s < 2 ? 1e-2 * s / 2.0 : 1e-2 * (6.0 - s) / 4.0;
    double t = s + 1;
    for (int i = 0; i < N; i++) {
      double gi = g[i] * coef;
      if (i < 600) pd[i] *= 1 - lr * 0.1;
      md[i] = 0.9 * md[i] + 0.1 * gi;
      vd[i] = 0.999 * vd[i] + 0.001 * gi * gi;
      double mhat = md[i] / (1 - pow(0.9, t)), denom = sqrt(vd[i]) / sqrt(1 - pow(0.999, t)) + 1e-8;
      pd[i] -= lr * mhat / denom;
    }
    for (int i = 0; i < N; i++) werr = fmax(werr, fabs(p[i] - pd[i]));
  }
  check(clipped == 5, "optim_clipping_active", "clipping applied at %d of 5 steps", clipped);
  check(nerr < 1e-6, "optim_returns_preclip_norm", "relative error %.3g", nerr);
  /* After 5 updates of size <= lr, float rounding of |p| ~ 3 leaves ~1e-6. */
  check(werr < 5e-6, "optim_matches_torch_adamw", "max |p - reference| %.3g", werr);
  check(o && o->step == 5, "optim_counts_steps", "step %ld", o ? o->step : -1);
  adamw_free(o);

  /* The first warm-up update has lr 0, so it must leave the parameters alone (but fill the moments). */
  c = cfg_of(1e-2, 0.1, 0, 3, 10, 0);
  float q[4] = {1, -2, 3, -4}, gq[4] = {0.5f, 0.5f, -1, 2};
  AdamWSegment all = {0, 4, 1};
  o = adamw_new(&c, 4, &all, 1, &err);
  adamw_step(o, q, gq);
  check(q[0] == 1 && q[1] == -2 && q[2] == 3 && q[3] == -4 && o->m[0] != 0, "optim_first_warmup_step_is_noop",
        "params %g %g %g %g", q[0], q[1], q[2], q[3]);
  adamw_free(o);

  AdamWSegment bad = {3, 5, 1};
  check(adamw_new(&c, 4, &bad, 1, &err) == NULL && strstr(err.msg, "segment"), "optim_rejects_bad_segment",
        "accepted a segment past the end");
  c.eps = 0;
  check(adamw_new(&c, 4, &all, 1, &err) == NULL, "optim_rejects_bad_config", "accepted eps 0");
  /* The same update on 1, 2 and 3 threads: norm and parameters bit for bit (clipping acts,
  ** so the norm's last bits reach the parameters), and the norm within 1e-12 of a sum in
  ** long double. 2M + 3 gradients of magnitudes 1e-3..1e3, so the order of a sum shows. */
  {
    enum { M = 2000003 };
    static float pg[3][M], gg[M];
    rng_seed(&r, 9);
    long double ref = 0;
    for (int i = 0; i < M; i++) {
      gg[i] = (float)(rng_normal(&r) * pow(10.0, 6.0 * rng_uniform(&r) - 3.0));
      ref += (long double)gg[i] * gg[i];
      pg[0][i] = pg[1][i] = pg[2][i] = (float)rng_normal(&r);
    }
    c = cfg_of(1e-3, 0.01, 1.0, 0, 10, 0);
    AdamWSegment one = {0, M, 1};
    double norms[3];
    for (int t = 0; t < 3; t++) {
      AdamW *ot = adamw_new(&c, M, &one, 1, &err);
      ot->threads = t + 1;
      norms[t] = adamw_step(ot, pg[t], gg);
      adamw_free(ot);
    }
    check(!memcmp(&norms[0], &norms[1], sizeof(double)) && !memcmp(&norms[0], &norms[2], sizeof(double)) &&
          !memcmp(pg[0], pg[1], sizeof pg[0]) && !memcmp(pg[0], pg[2], sizeof pg[0]),
          "optim_same_bits_on_1_2_and_3_threads", "norms %.17g %.17g %.17g", norms[0], norms[1], norms[2]);
    double exact = sqrt((double)ref);
    check(fabs(norms[0] - exact) / exact < 1e-12, "optim_grad_norm_of_many", "%.17g against %.17g", norms[0], exact);
  }
  float z[3] = {3, 4, 12};
  check(fabs(adamw_grad_norm(z, 3) - 13) < 1e-12, "optim_grad_norm", "%g", adamw_grad_norm(z, 3));
  return check_exit();
}
