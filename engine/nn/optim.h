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
  float *m, *v;           /* first and second moments, n floats each */
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
/* Frees the optimizer; NULL allowed. */
void adamw_free(AdamW *o);
/* Scheduled learning rate for an update made after `step` previous updates. */
double adamw_lr_at(const AdamWConfig *cfg, long step);
/* Euclidean norm of n gradients (accumulated in double), on omp_get_max_threads() threads. */
double adamw_grad_norm(const float *grads, size_t n);
/* One update: clip (if configured), decay, Adam; returns the pre-clip gradient norm. */
double adamw_step(AdamW *o, float *params, float *grads);

#endif
