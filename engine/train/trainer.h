/* Layer: engine/train/ (this folder: trainer loop, run description) uses engine/core, nn,
** tok, data and io. (ARCHITECTURE.md)
**
** The masked-LM training loop: shard loader -> MLM collator -> model forward and
** backward over gradient-accumulation micro-batches -> AdamW with create_optimizer's
** schedule; per epoch an evaluation on the validation shards and a checkpoint.
**
** A step takes grad_accum micro-batches of (batch, seq) from the loader, masks all of
** them first, then runs forward/backward on each with loss_scale = 1 / (labelled
** positions over all the step's micro-batches), so the gradient is that of the mean
** over the step's labelled tokens however it is split (transformers PR #34191). The
** reported step loss is that same mean. An epoch is floor(batches_per_epoch /
** grad_accum) steps; micro-batches left over at an epoch's end are skipped.
**
** Data-parallel (opt.dist with N ranks): the global batch is N x batch x grad_accum.
** Micro-batch a of rank r is the step's micro-batch j = a*N + r, which is loader batch
** step*N*grad_accum + j of the one permutation every rank builds from the seed (so the
** ranks read disjoint samples), and grad_sync.h sums the gradients in j order: N ranks
** with grad_accum k compute what one rank with grad_accum N*k computes, bit for bit.
** Label and token counts are integer sums; the loss and evaluation sums are folded in
** micro-batch (batch) order. Evaluation splits the validation batches over the ranks.
**
** Randomness is keyed, never drawn from a stream that depends on who reads what: a
** sample's masks come from an Rng split from (the run's seed, epoch, sample index in
** the set), evaluation's from (eval_seed, sample index), so every evaluation sees the
** same masks; dropout is seeded per micro-batch from (seed, step, j). The loader's
** permutations derive from the seed as well. A checkpoint (weights, both Adam moments,
** step, epoch, position in the epoch, the loader's state, ranks and grad_accum, the
** epoch's running train-loss sum, whether the products were bf16) makes a resumed run
** continue bit-identically, with any rank count whose ranks x grad_accum is the same:
** every rank's data position is (epoch, position x grad_accum) of its own part of the
** same permutation. In bf16 (opt.precision) the bits are the same at every
** instruction-set level from avx512 up (avx512 emulates vdpbf16ps in float).
**
** The trainer knows nothing about where metrics and checkpoints go: it calls the
** callbacks below. Everything is allocated by trainer_new(); trainer_run() allocates
** nothing per step (checkpoint serialisation, done by the callback, may). */
#ifndef MASKD_TRAINER_H
#define MASKD_TRAINER_H
#include <stddef.h>
#include <stdint.h>
#include "engine/io/checkpoint.h"
#include "engine/data/collator.h"
#include "engine/data/loader.h"
#include "engine/nn/config.h"
#include "engine/core/err.h"
#include "engine/dist/dist.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"

typedef struct TrainerOptions {
  const char *train_path;        /* shard set (directory, manifest or .shard) */
  const char *valid_path;        /* shard set for evaluation, or NULL */
  int batch;                     /* rows per micro-batch, > 0 */
  int grad_accum;                /* micro-batches per optimizer step, >= 1 */
  int epochs;                    /* >= 1 */
  long max_steps;                /* > 0: stop after this many steps (the schedule's total); 0: epochs x steps/epoch */
  double lr, weight_decay, beta1, beta2, eps, clip_norm, min_lr_ratio;
  long warmup_steps;             /* < 0: total // 20 */
  uint64_t seed;
  uint64_t eval_seed;
  int threads;                   /* >= 1 */
  long eval_batches;             /* > 0: evaluate on at most this many batches; 0: the whole set */
  long checkpoint_steps;         /* > 0: also checkpoint every this many steps; 0: at epoch ends only */
  int checkpoint_epochs;         /* checkpoint every this many epochs (>= 1); the last epoch always */
  double mlm_prob;               /* 0.15 */
  double label_smoothing;        /* in [0, 1): the loss's, in training and evaluation (model_set_label_smoothing) */
  int32_t mask_id;               /* [MASK] */
  int32_t pad_id;                /* padding id of the shards and the model */
  const int32_t *special_ids;    /* never masked */
  int n_special;
  Dist *dist;                    /* the run's ranks (NULL: this process alone); grad_accum is per rank */
  ModelPrecision precision;      /* the Linear layers' products, MODEL_FP32 or MODEL_BF16 (weights, moments stay fp32) */
} TrainerOptions;

/* Defaults: batch 8, accumulation 1, 1 epoch, lr 1e-4, weight decay 1e-3, betas
** 0.9/0.999, eps 1e-8, no clipping, warm-up total//20, seed 42, eval seed 1234,
** 1 thread, checkpoints every epoch, mlm 0.15, no label smoothing, fp32. Paths and ids
** must still be set. */
TrainerOptions trainer_default_options(void);

typedef struct TrainerStep {
  long step;                     /* optimizer updates done, this one included (1-based) */
  long total_steps;
  int epoch;                     /* 0-based epoch this step belongs to */
  double epoch_frac;             /* fractional epochs done after this step */
  double loss;                   /* mean cross-entropy over the step's labelled tokens (NaN when none) */
  double lr;                     /* learning rate this update used */
  double grad_norm;              /* before clipping */
  double tokens_per_s;           /* real (unpadded) tokens of the step / its wall time */
  long labels;                   /* labelled positions in the step */
  double seconds;                /* wall time of the step */
  int ranks;                     /* processes of the run */
  const double *rank_tokens_per_s; /* ranks entries: each rank's own real tokens / the step's time */
  double comm_exchange_s;        /* gradient exchange time so far (first bucket sent to last summed) */
  double comm_exposed_s;         /* of it, time waiting once backward was done (not hidden) */
  double comm_inline_s;          /* time backward spent between its layers sending, moving and summing buckets */
  double comm_gather_s;          /* waiting for the updated parameters so far */
} TrainerStep;

typedef struct TrainerEval {
  int epoch;                     /* 0-based epoch just finished */
  long step;
  double train_loss;             /* mean of the epoch's step losses, as Keras' fit reports it (over
                                 ** the steps that drew a masked token; NaN when none did) */
  int evaluated;                 /* 1: a validation set was evaluated (else the next four are NaN) */
  double loss;                   /* mean cross-entropy over all labelled validation tokens (NaN: none) */
  double accuracy;               /* masked-token accuracy */
  double perplexity;             /* exp(loss) */
  long labels;
  double seconds;
} TrainerEval;

typedef enum { TRAINER_CKPT_EPOCH, TRAINER_CKPT_STEPS, TRAINER_CKPT_STOP } TrainerCkptKind;

/* What a checkpoint callback receives: the live model and optimizer and the state
** that goes with them. Serialise with trainer_checkpoint_bytes() or the ckpt_* calls. */
typedef struct TrainerCheckpoint {
  TrainerCkptKind kind;
  Model *model;
  const AdamW *optim;            /* all the moments when this process holds them (one rank), else NULL */
  const CkptState *state;
  int epochs_done;               /* completed epochs (the N of "Training in progress epoch N") */
  long step;
  const TrainerEval *eval;       /* the evaluation just done (epoch checkpoints with validation), else NULL */
  /* The moments, wherever they are: which 0 = exp_avg, 1 = exp_avg_sq, [offset, offset +
  ** count) of the parameters into dst. With several ranks this asks them (collective
  ** with the other ranks, which wait in the trainer meanwhile). */
  int (*read_moments)(void *ctx, int which, size_t offset, size_t count, float *dst, Err *err);
  void *moments_ctx;
} TrainerCheckpoint;

typedef struct TrainerCallbacks {
  void *ctx;
  void (*on_step)(void *ctx, const TrainerStep *s);                  /* may be NULL */
  void (*on_eval)(void *ctx, const TrainerEval *e);                  /* may be NULL */
  /* Persist a checkpoint; returning -1 (with err set) stops the run with that error. May be NULL. */
  int (*on_checkpoint)(void *ctx, const TrainerCheckpoint *c, Err *err);
  /* Polled at every step boundary; non-zero: checkpoint (kind STOP) and return TRAINER_STOPPED. */
  int (*should_stop)(void *ctx);
} TrainerCallbacks;

typedef struct Trainer Trainer;

enum { TRAINER_DONE = 0, TRAINER_STOPPED = 1 };

/* Opens the shard sets, checks them against the model config (sequence length, vocab
** size, positions), builds and initialises the model from the seed, the optimizer
** and every buffer. Paths and ids are read now; nothing is kept from opt's pointers. */
Trainer *trainer_new(const ModelConfig *cfg, const TrainerOptions *opt, Err *err);
/* Opens opt's train set (validation 0) or validation set (1) as the trainer reads it
** (order and seed from opt), with no expectation on vocabulary or length: for a caller
** that checks the set itself and then hands it to trainer_new_loaders. */
Loader *trainer_open_loader(const TrainerOptions *opt, int validation, Err *err);
/* trainer_new over sets already opened with trainer_open_loader (valid NULL when opt has
** no validation path), so they are read once; takes both, closing them on failure. */
Trainer *trainer_new_loaders(const ModelConfig *cfg, const TrainerOptions *opt, Loader *train, Loader *valid, Err *err);
/* Frees everything; NULL allowed. */
void trainer_free(Trainer *t);

/* Restores a checkpoint: model.safetensors bytes and the optimizer-state bytes that
** trainer_checkpoint_bytes() made. Refuses a state from a different run shape: batch,
** sequence length, ranks x grad_accum and precision must match (the rank count may change).
** Collective: rank 0 gives the bytes, the other ranks NULL and 0, and all get rank 0's verdict. */
int trainer_restore(Trainer *t, const void *weights, size_t wlen, const void *state, size_t slen, Err *err);
/* Serialises the checkpoint: model.safetensors (F32) and the optimizer state; caller frees both. */
int trainer_checkpoint_bytes(const TrainerCheckpoint *c, unsigned char **weights, size_t *wlen,
                             unsigned char **state, size_t *slen, Err *err);

/* Trains from the current position to the end: TRAINER_DONE, TRAINER_STOPPED, or -1 with err.
** Collective; the callbacks are called on rank 0 only, whose should_stop decides for all. */
int trainer_run(Trainer *t, const TrainerCallbacks *cb, Err *err);
/* Evaluates the current weights on the validation set (fixed-seed masks); -1 without one. */
int trainer_evaluate(Trainer *t, TrainerEval *out, Err *err);

/* Progress and shape, for progress bars and stores. */
long trainer_total_steps(const Trainer *t);
long trainer_steps_per_epoch(const Trainer *t);
long trainer_step(const Trainer *t);
int trainer_epoch(const Trainer *t);
int trainer_seq_len(const Trainer *t);
/* The warm-up actually used (total // 20 when not given). */
long trainer_warmup_steps(const Trainer *t);
Model *trainer_model(Trainer *t);
/* The optimizer; with several ranks its moments are this rank's share only. */
const AdamW *trainer_optim(const Trainer *t);
/* This process's rank and the rank count. */
int trainer_rank(const Trainer *t);
int trainer_ranks(const Trainer *t);

#endif
