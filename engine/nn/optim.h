/* AdamW with the schedule of transformers' create_optimizer: linear warm-up from
** 0, then linear decay to min_lr_ratio*lr (power 1). The update is PyTorch's
** torch.optim.AdamW (decoupled decay p -= lr_t*wd*p, then the bias-corrected
** Adam step), with optional global-norm clipping as torch's clip_grad_norm_.
** Decay applies only to the segments marked so (not LayerNorm, not biases). */
#ifndef MASKD_OPTIM_H
#define MASKD_OPTIM_H
#include <stddef.h>
#include "engine/core/err.h"

typedef struct AdamWConfig {
  double lr;              /* peak learning rate */
  double beta1, beta2, eps;
  double weight_decay;
  double clip_norm;       /* max global gradient norm; 0 = no clipping */
  long warmup_steps;
  long total_steps;       /* schedule length; the rate reaches min_lr_ratio*lr here */
  double min_lr_ratio;    /* 0 in create_optimizer's default */
} AdamWConfig;

/* A run of parameters sharing the decay flag (one per named tensor, usually). */
typedef struct AdamWSegment { size_t offset, count; int decay; } AdamWSegment;

typedef struct AdamW {
  AdamWConfig cfg;
  size_t n;               /* parameters */
  size_t n_state;         /* moments held here: n, or a data-parallel rank's share of them */
  float *m, *v;           /* first and second moments, n_state floats each */
  size_t *run_start;      /* [0, n) in runs of one decay flag: run i starts here, */
  unsigned char *run_decay; /* with this flag (n_runs of each) */
  int n_runs;
  long step;              /* updates done so far */
  int threads;            /* adamw_step's threads (adamw_new: omp_get_max_threads()); the caller's to set */
} AdamW;

/* Defaults: lr 1e-4, betas 0.9/0.999, eps 1e-8, wd 0, no clipping, no warm-up. */
AdamWConfig adamw_defaults(void);
/* Allocates moments (zero) for n parameters with the given decay segments. */
AdamW *adamw_new(const AdamWConfig *cfg, size_t n, const AdamWSegment *segs, int n_segs, Err *err);
/* adamw_new holding only n_state moments (a rank's share; decay flags still for all n). */
AdamW *adamw_new_sharded(const AdamWConfig *cfg, size_t n, const AdamWSegment *segs, int n_segs, size_t n_state,
                         Err *err);
/* Frees the optimizer; NULL allowed. */
void adamw_free(AdamW *o);
/* Scheduled learning rate for an update made after `step` previous updates. */
double adamw_lr_at(const AdamWConfig *cfg, long step);
/* Euclidean norm of n gradients (accumulated in double, in an order fixed by n alone), on
** omp_get_max_threads() threads. */
double adamw_grad_norm(const float *grads, size_t n);
/* One update: clip (if configured), decay, Adam; returns the pre-clip gradient norm. The
** result has the same bits on any o->threads. */
double adamw_step(AdamW *o, float *params, float *grads);

/* The same update in parts, for a trainer that owns only some ranges (data-parallel)
** and needs the result not to depend on how the ranges are cut: */
/* Sum of squares of n gradients in double, in one fixed order (8 lanes, then the lanes
** in order), so equal inputs give equal bits wherever they lie in memory. */
double adamw_sumsq(const float *g, size_t n);
/* The scalars of the update after o->step updates, given the pre-clip gradient norm. */
typedef struct AdamWUpdate {
  double lr;              /* the scheduled rate of this update */
  float gscale;           /* clipping factor (1 when not clipping) */
  float b1, b2, eps, step_size, inv_sqrt_bc2, decay_mul;
} AdamWUpdate;
AdamWUpdate adamw_update_at(const AdamW *o, double grad_norm);
/* Applies u to parameters [lo, lo + n) (lo indexes the decay flags): p, g, m, v point at
** element lo's value. Each element's result depends on its own values only. */
void adamw_apply(const AdamW *o, const AdamWUpdate *u, float *p, const float *g, float *m, float *v, size_t lo,
                 size_t n, int threads);

#endif
