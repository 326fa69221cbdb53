/* Layer: engine/train/ (this folder: trainer loops, run description, metrics) uses
** engine/core, nn, tok, data, io, dist. (ARCHITECTURE.md)
**
** The fine-tuning loop for sequence classification, as transformers' Trainer (and
** the accelerate guide's loop) runs it: batches from a TextClsBatcher (padded to
** the longest row of each batch; optionally length-grouped), cross-entropy averaged
** over the batch's rows, AdamW (optim.h) with linear warm-up and linear decay to 0
** over epochs x batches-per-epoch steps, gradient clipping at clip_norm, dropout
** as the config gives it (seeded per step from the seed). After every epoch the
** model is evaluated on the validation set (loss, accuracy, macro-F1, weighted-F1,
** the confusion matrix) and the checkpoint callback is called with the live model.
**
** The model is the caller's: a classifier (MODEL_TASK_SEQ_CLS) with its weights
** loaded (encoder from a masked LM, head initialised). finetune_new plans it for
** (batch, the longest example) and allocates everything; finetune_run allocates
** nothing per step. Same seed, same data, same options: the same bits. */
#ifndef MASKD_FINETUNE_H
#define MASKD_FINETUNE_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/data/textcls.h"
#include "engine/nn/model.h"
#include "engine/train/cls_metrics.h"

typedef struct FinetuneOptions {
  int batch;                     /* training rows per step (32) */
  int eval_batch;                /* evaluation rows per forward (64) */
  int epochs;                    /* >= 1 (3) */
  long max_steps;                /* > 0: stop (and end the schedule) here; 0: epochs x batches */
  double lr;                     /* peak rate (2e-5) */
  double weight_decay;           /* decoupled, not on biases and LayerNorm (0.01, torch's AdamW default) */
  double beta1, beta2, eps;      /* 0.9, 0.999, 1e-8 */
  double clip_norm;              /* 1.0 (Trainer's max_grad_norm); 0 = none */
  double label_smoothing;        /* in [0, 1): Trainer's label_smoothing_factor, in the training and
                                 ** the evaluation loss alike, as Trainer's (0) */
  double warmup_ratio;           /* warm-up steps = ceil(ratio x total) when warmup_steps <= 0 (0) */
  long warmup_steps;             /* > 0 overrides the ratio; 0 (or -1) = use the ratio, as Trainer (0) */
  int length_grouped;            /* LengthGroupedSampler order for training batches (0) */
  uint64_t seed;                 /* the order, and the dropout unless has_dropout_seed (42) */
  uint64_t dropout_seed;         /* dropout alone when has_dropout_seed (seed noise apart from the plan) */
  int has_dropout_seed;          /* 0: dropout from seed */
  int threads;                   /* >= 1 */
  int32_t pad_id;                /* the tokenizer's (and the config's) padding id */
  ModelPrecision precision;      /* MODEL_FP32 or MODEL_BF16 (autocast, as training) */
  int max_seq;                   /* the plan's sequence length: at least the longest example of train
                                 ** and valid, more for a set evaluated later (a test set); 0: just that */
} FinetuneOptions;

/* The defaults above; pad_id and threads still to set. */
FinetuneOptions finetune_default_options(void);

typedef struct FinetuneStep {
  long step, total_steps;        /* 1-based update count; the schedule's length */
  int epoch;                     /* 0-based */
  double epoch_frac;             /* epochs done after this step */
  double loss;                   /* mean cross-entropy over the step's rows */
  double lr, grad_norm;          /* the rate this update used; the norm before clipping */
  double examples_per_s, tokens_per_s;   /* rows and real tokens of the step / its wall time */
  double seconds;
} FinetuneStep;

typedef struct FinetuneEval {
  int epoch;                     /* 0-based epoch just finished (-1: an evaluation outside run) */
  long step;
  double train_loss;             /* mean of the epoch's step losses (NaN outside run) */
  double loss;                   /* mean cross-entropy over the set's rows */
  ClsMetrics metrics;            /* accuracy, macro/weighted F1, ... */
  int n_labels;
  const int64_t *confusion;      /* n_labels x n_labels (true, predicted), valid during the callback */
  const int32_t *predictions;    /* the set's n predicted ids, valid during the callback */
  double seconds;
} FinetuneEval;

typedef struct FinetuneCallbacks {
  void *ctx;
  void (*on_step)(void *ctx, const FinetuneStep *s);                 /* may be NULL */
  /* After each epoch's evaluation: persist the model; -1 (err set) stops the run with
  ** that error. Without a validation set e holds only epoch, step and train_loss (loss
  ** and metrics NaN, confusion and predictions NULL). May be NULL. */
  int (*on_epoch)(void *ctx, Model *m, int epoch, const FinetuneEval *e, Err *err);
  int (*should_stop)(void *ctx);                                     /* polled per step; may be NULL */
} FinetuneCallbacks;

typedef struct Finetune Finetune;

enum { FINETUNE_DONE = 0, FINETUNE_STOPPED = 1 };

/* Plans m for training and builds the optimizer and batchers. train and valid (valid
** may be NULL) are kept by pointer and must outlive the Finetune; their labels must
** lie in [0, num_labels). ERR_INVALID for bad options or a model that is not a
** classifier; ERR_BAD_INPUT for a label out of range or an example longer than the model. */
Finetune *finetune_new(Model *m, const TextClsSet *train, const TextClsSet *valid, const FinetuneOptions *o,
                       Err *err);
/* An evaluator only (finetune_evaluate; no training: finetune_run refuses it): m planned
** for inference over o->batch rows of up to o->max_seq tokens (> 0: the longest example it
** will see), o->eval_batch rows padded together, o->label_smoothing in the loss, threads
** and precision as o says; the optimizer and training options are not read. The same
** predictions and loss as a finetune's evaluation of the same weights. Errors as
** finetune_new's. */
Finetune *finetune_evaluator_new(Model *m, const FinetuneOptions *o, Err *err);
void finetune_free(Finetune *f);
/* Runs from the start to the end: FINETUNE_DONE, FINETUNE_STOPPED, or -1 with err
** (ERR_INVALID for an evaluator). */
int finetune_run(Finetune *f, const FinetuneCallbacks *cb, Err *err);
/* Evaluates the current weights on set (no dropout, set order, eval_batch rows padded
** together, forwarded in pieces of at most batch rows): fills out (epoch -1, confusion
** and predictions pointing into the Finetune's buffers, valid until the next call; an
** unlabelled row (MODEL_IGNORE_LABEL) is predicted -1 and scored by nothing). ERR_BAD_INPUT for a
** set with a label out of range or an example longer than the plan (max_seq). */
int finetune_evaluate(Finetune *f, const TextClsSet *set, FinetuneEval *out, Err *err);
/* Steps of the schedule, per epoch, the warm-up used. */
long finetune_total_steps(const Finetune *f);
long finetune_steps_per_epoch(const Finetune *f);
long finetune_warmup_steps(const Finetune *f);
/* The training order of epoch e as set indices (batches of o->batch, back to back);
** returns the count. For references that must see the same batches. */
size_t finetune_epoch_order(const Finetune *f, int epoch, size_t *order);

#endif
