#include "engine/train/trainer.h"
#include "engine/core/now.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/loader.h"
#include "engine/core/platform.h"
#include "engine/core/rng.h"
#include "engine/train/divergence.h"
#include "engine/train/grad_sync.h"

/* Words of CkptState.extra: the loader's six, the epoch's running train-loss sum
** (a double's bits), a shape word (batch, ranks x grad_accum, sequence length), so a
** state is refused by a run of another shape, then the ranks and grad_accum that wrote
** it, then how many steps the sum holds (a step that drew no masked token has no loss).
** States of one-process runs before data parallelism stop at the shape word (V1), those
** before the step count at grad_accum (V2: the sum is read as over every step, as then). */
enum { X_LOADER = 0, X_LOSS_SUM = 6, X_SHAPE = 7, X_RANKS = 8, X_ACCUM = 9, X_LOSS_STEPS = 10, X_WORDS = 11,
       X_WORDS_V2 = 10, X_WORDS_V1 = 8 };

struct Trainer {
  TrainerOptions opt;
  ModelConfig cfg;
  Model *m;
  GradSync *gs;            /* the gradient sum and the (sharded) optimizer */
  Dist *d;
  int W, me;               /* ranks, this rank */
  Loader *train, *valid;
  Collator *col;
  Rng rng;                 /* the masks' key: split by (epoch, sample); never advanced */
  Rng eval_rng;            /* evaluation's masks' key: split by sample */
  int seq;
  size_t n;                /* batch * seq */
  int32_t *ids, *attn, *inputs, *labels;   /* grad_accum micro-batches each */
  int64_t *samples;        /* grad_accum * batch: each row's sample index */
  double *micro_loss;      /* ranks * grad_accum: the step's loss sums by micro-batch j, then */
  double *rank_tps;        /* ranks: tokens/s of each rank in the last step (micro_loss's tail) */
  double *ev_loss;         /* validation batches: loss sums; then labels and correct counts */
  int64_t *ev_count;
  long ev_batches;
  long step, total, spe, warmup;
  int epoch;               /* epochs completed */
  long pos;                /* steps done in the current epoch */
  double loss_sum;         /* sum of the current epoch's step losses */
  long loss_steps;         /* the steps in it: those with a loss (a step may draw no masked token) */
};

TrainerOptions trainer_default_options(void) {
  TrainerOptions o;
  memset(&o, 0, sizeof o);
  o.batch = 8; o.grad_accum = 1; o.epochs = 1; o.max_steps = 0;
  o.lr = 1e-4; o.weight_decay = 1e-3; o.beta1 = 0.9; o.beta2 = 0.999; o.eps = 1e-8;
  o.clip_norm = 0; o.min_lr_ratio = 0; o.warmup_steps = -1;
  o.seed = 42; o.eval_seed = 1234; o.threads = 1;
  o.checkpoint_epochs = 1; o.mlm_prob = 0.15;
  o.mask_id = -1; o.pad_id = -1;
  return o;
}

/* One splitmix64 step from x: a well-mixed word from a few, for per-micro-batch dropout seeds. */
static uint64_t mix64(uint64_t x) { return rng_splitmix64(&x); }

/* Bit 56 of the shape word: a bf16 run's. An fp32 run's word is what it was before
** precisions existed, so older checkpoints resume as fp32 runs. */
#define SHAPE_BF16 ((uint64_t)1 << 56)

static uint64_t shape_word(const TrainerOptions *o, int ranks, int seq) {
  return ((uint64_t)o->batch << 32) | ((uint64_t)(ranks * o->grad_accum) << 16) | (uint64_t)(seq & 0xffff) |
         (o->precision == MODEL_BF16 ? SHAPE_BF16 : 0);
}

void trainer_free(Trainer *t) {
  if (!t) return;
  gsync_free(t->gs);
  model_free(t->m);
  loader_close(t->train);
  loader_close(t->valid);
  collator_free(t->col);
  free(t->ids); free(t->attn); free(t->inputs); free(t->labels);
  free(t->samples); free(t->micro_loss); free(t->ev_loss); free(t->ev_count);
  free(t);
}

/* What trainer_new and trainer_new_loaders check before anything is opened or allocated. */
static int check_new(const ModelConfig *cfg, const TrainerOptions *opt, Err *err) {
  if (opt->batch < 1 || opt->grad_accum < 1 || opt->epochs < 1 || opt->max_steps < 0 || opt->threads < 1 ||
      opt->checkpoint_epochs < 1 || opt->checkpoint_steps < 0 || opt->eval_batches < 0)
    return err_set(err, "trainer: batch, grad_accum, epochs, threads, checkpoint_epochs must be >= 1 and max_steps, "
                        "checkpoint_steps, eval_batches >= 0");
  if (!opt->train_path) return err_set(err, "trainer: no train shards");
  if (config_validate(cfg, err)) return -1;
  if (cfg->task != MODEL_TASK_MLM)
    return err_setk(err, ERR_INVALID, "trainer: the config is a %s; masked-LM training needs a *ForMaskedLM config "
                    "(a classifier is trained by maskd finetune)", config_architecture(cfg));
  if (opt->mask_id < 0 || opt->mask_id >= cfg->vocab_size)
    return err_set(err, "trainer: mask id %d is outside the vocabulary of %d", opt->mask_id, cfg->vocab_size);
  return 0;
}

/* A shard set as the trainer reads it: the train set shuffled from the run's seed with
** the last partial batch dropped; the validation set in order, its last batch padded
** (every validation sample counts; pad rows are never masked). vocab and seq (0: any)
** are what the set must have. */
static Loader *open_loader(const TrainerOptions *opt, int validation, uint32_t vocab, uint32_t seq, Err *err) {
  Rng base, lseed;
  rng_seed(&base, opt->seed);
  lseed = rng_split(&base, 1);
  LoaderOptions lo = loader_default_options(opt->batch);
  lo.pad_id = opt->pad_id;
  lo.vocab_size = vocab;
  /* The train set: rank r's k-th batch is batch k*N + r of the permutation all build.
  ** The validation set is read whole by each rank, which evaluates its share of batches. */
  lo.rank = validation ? 0 : dist_rank(opt->dist);
  lo.world = validation ? 1 : dist_world(opt->dist);
  if (validation) {
    lo.shuffle = 0;
    lo.drop_last = 0;
    lo.seq_len = seq;
  }
  Loader *l = loader_open(validation ? opt->valid_path : opt->train_path, &lo, &lseed, err);
  if (!l) err_prefix(err, validation ? "validation" : "train");
  return l;
}

Loader *trainer_open_loader(const TrainerOptions *opt, int validation, Err *err) {
  if (opt->batch < 1) { err_set(err, "trainer: batch must be >= 1"); return NULL; }
  if (!(validation ? opt->valid_path : opt->train_path)) { err_set(err, "trainer: no %s shards", validation ? "validation" : "train"); return NULL; }
  return open_loader(opt, validation, 0, 0, err);
}

static Trainer *build(const ModelConfig *cfg, const TrainerOptions *opt, Loader *train, Loader *valid, Err *err);

Trainer *trainer_new(const ModelConfig *cfg, const TrainerOptions *opt, Err *err) {
  if (check_new(cfg, opt, err)) return NULL;
  Loader *train = open_loader(opt, 0, (uint32_t)cfg->vocab_size, 0, err), *valid = NULL;
  if (!train) return NULL;
  if (opt->valid_path && !(valid = open_loader(opt, 1, (uint32_t)cfg->vocab_size, loader_seq_len(train), err))) {
    loader_close(train);
    return NULL;
  }
  return build(cfg, opt, train, valid, err);
}

Trainer *trainer_new_loaders(const ModelConfig *cfg, const TrainerOptions *opt, Loader *train, Loader *valid, Err *err) {
  int rc = check_new(cfg, opt, err);
  /* Whoever opened them, the sets must be what trainer_new would have accepted. */
  if (rc == 0 && !train) rc = err_set(err, "trainer: no train shards");
  if (rc == 0 && !valid != !opt->valid_path) rc = err_set(err, "trainer: validation shards given without a path, or a path without them");
  if (rc == 0 && loader_vocab_size(train) != (uint32_t)cfg->vocab_size)
    rc = err_set(err, "train: shards have vocabulary size %u, the model %d", loader_vocab_size(train), cfg->vocab_size);
  if (rc == 0 && valid && loader_vocab_size(valid) != (uint32_t)cfg->vocab_size)
    rc = err_set(err, "validation: shards have vocabulary size %u, the model %d", loader_vocab_size(valid), cfg->vocab_size);
  if (rc == 0 && valid && loader_seq_len(valid) != loader_seq_len(train))
    rc = err_set(err, "validation: shards have sequence length %u, the train shards %u", loader_seq_len(valid), loader_seq_len(train));
  if (rc) {
    loader_close(train);
    loader_close(valid);
    return NULL;
  }
  return build(cfg, opt, train, valid, err);
}

/* The trainer over opened shard sets (taken, closed on failure). */
static Trainer *build(const ModelConfig *cfg, const TrainerOptions *opt, Loader *train, Loader *valid, Err *err) {
  Trainer *t = calloc(1, sizeof *t);
  if (!t) {
    loader_close(train);
    loader_close(valid);
    err_set(err, "trainer: out of memory");
    return NULL;
  }
  t->opt = *opt;
  t->opt.train_path = t->opt.valid_path = NULL;   /* not kept: the caller's strings */
  t->opt.special_ids = NULL;
  t->cfg = *cfg;
  t->d = opt->dist;
  t->W = dist_world(t->d);
  t->me = dist_rank(t->d);

  Rng base;
  rng_seed(&base, opt->seed);
  t->rng = rng_split(&base, 2);
  rng_seed(&t->eval_rng, opt->eval_seed);
  t->train = train;
  t->valid = valid;
  t->seq = (int)loader_seq_len(t->train);
  t->spe = (long)(loader_batches_per_epoch(t->train) / (uint64_t)opt->grad_accum);
  if (t->spe < 1) {
    err_set(err, "train: %llu batches of %d x %d ranks per epoch are fewer than grad_accum %d",
            (unsigned long long)loader_batches_per_epoch(t->train), opt->batch, t->W, opt->grad_accum);
    goto fail;
  }
  t->total = opt->max_steps > 0 ? opt->max_steps : (long)opt->epochs * t->spe;
  t->warmup = opt->warmup_steps >= 0 ? opt->warmup_steps : t->total / 20;

  t->m = model_new(cfg, err);
  if (!t->m) goto fail;
  model_init_weights(t->m, opt->seed);
  model_set_threads(t->m, opt->threads);
  model_set_precision(t->m, opt->precision);
  model_set_label_smoothing(t->m, (float)opt->label_smoothing);
  /* Ranks sharing a machine would pin their threads to the same cores; leave them to the OS. */
  if (t->W == 1) platform_pin_threads(model_threads(t->m));
  t->n = (size_t)opt->batch * (size_t)t->seq;
  /* The head runs at labelled rows only; planning for every row makes any mask fit. */
  if (model_plan(t->m, opt->batch, t->seq, (int)t->n, 1, err)) goto fail;

  int nt = model_tensor_count(t->m);
  AdamWSegment *segs = malloc((size_t)nt * sizeof *segs);
  if (!segs) { err_set(err, "trainer: out of memory"); goto fail; }
  size_t covered = 0;
  for (int i = 0; i < nt; i++) {
    const ModelTensor *mt = model_tensor(t->m, i);
    segs[i] = (AdamWSegment){mt->offset, mt->numel, mt->decay};
    covered += mt->numel;
  }
  AdamWConfig ac = adamw_defaults();
  ac.lr = opt->lr; ac.beta1 = opt->beta1; ac.beta2 = opt->beta2; ac.eps = opt->eps;
  ac.weight_decay = opt->weight_decay; ac.clip_norm = opt->clip_norm;
  ac.warmup_steps = t->warmup; ac.total_steps = t->total; ac.min_lr_ratio = opt->min_lr_ratio;
  if (covered != model_num_params(t->m)) {
    free(segs);
    err_set(err, "trainer: tensors cover %zu of %zu parameters", covered, model_num_params(t->m));
    goto fail;
  }
  t->gs = gsync_new(t->m, &ac, segs, nt, opt->grad_accum, t->d, err);
  free(segs);
  if (!t->gs) goto fail;

  MlmOptions mo = mlm_default_options(opt->mask_id, cfg->vocab_size, opt->special_ids, opt->n_special);
  mo.mlm_prob = opt->mlm_prob;
  t->col = collator_new(&mo, err);
  if (!t->col) goto fail;

  size_t all = t->n * (size_t)opt->grad_accum;
  t->ids = malloc(all * sizeof(int32_t));
  t->attn = malloc(all * sizeof(int32_t));
  t->inputs = malloc(all * sizeof(int32_t));
  t->labels = malloc(all * sizeof(int32_t));
  t->samples = malloc((size_t)opt->batch * (size_t)opt->grad_accum * sizeof(int64_t));
  /* One array, so the step's loss sums and the ranks' rates travel in one collective. */
  t->micro_loss = calloc((size_t)t->W * (size_t)(opt->grad_accum + 1), sizeof(double));
  t->rank_tps = t->micro_loss ? t->micro_loss + (size_t)t->W * (size_t)opt->grad_accum : NULL;
  t->ev_batches = t->valid ? (long)loader_batches_per_epoch(t->valid) : 0;
  t->ev_loss = malloc((size_t)(t->ev_batches + 1) * sizeof(double));
  t->ev_count = malloc((size_t)(t->ev_batches + 1) * 2 * sizeof(int64_t));
  if (!t->ids || !t->attn || !t->inputs || !t->labels || !t->samples || !t->micro_loss || !t->ev_loss ||
      !t->ev_count) {
    err_set(err, "trainer: out of memory for %zu-token batches", all);
    goto fail;
  }
  return t;
fail:
  trainer_free(t);
  return NULL;
}

long trainer_total_steps(const Trainer *t) { return t->total; }
long trainer_steps_per_epoch(const Trainer *t) { return t->spe; }
long trainer_step(const Trainer *t) { return t->step; }
int trainer_epoch(const Trainer *t) { return t->epoch; }
int trainer_seq_len(const Trainer *t) { return t->seq; }
long trainer_warmup_steps(const Trainer *t) { return t->warmup; }
Model *trainer_model(Trainer *t) { return t->m; }
const AdamW *trainer_optim(const Trainer *t) { return gsync_optim(t->gs); }
int trainer_rank(const Trainer *t) { return t->me; }
int trainer_ranks(const Trainer *t) { return t->W; }

/* The state a checkpoint taken now holds. */
static void current_state(const Trainer *t, CkptState *s) {
  memset(s, 0, sizeof *s);
  s->step = gsync_optim(t->gs)->step;
  s->epoch = t->epoch;
  s->position = t->pos;
  s->rng = t->rng;
  LoaderState ls;
  loader_get_state(t->train, &ls);
  uint64_t w[LOADER_STATE_WORDS];
  loader_state_pack(&ls, w);
  s->n_extra = X_WORDS;
  for (int i = 0; i < LOADER_STATE_WORDS; i++) s->extra[X_LOADER + i] = w[i];
  memcpy(&s->extra[X_LOSS_SUM], &t->loss_sum, sizeof(double));
  s->extra[X_SHAPE] = shape_word(&t->opt, t->W, t->seq);
  s->extra[X_RANKS] = (uint64_t)t->W;
  s->extra[X_ACCUM] = (uint64_t)t->opt.grad_accum;
  s->extra[X_LOSS_STEPS] = (uint64_t)t->loss_steps;
}

int trainer_checkpoint_bytes(const TrainerCheckpoint *c, unsigned char **weights, size_t *wlen,
                             unsigned char **state, size_t *slen, Err *err) {
  *weights = *state = NULL;
  if (ckpt_weights_bytes(c->model, 0, weights, wlen, err)) return -1;
  /* The state through the same stream a store push uses, with the moments wherever they are. */
  CkptMoments src = c->optim ? ckpt_moments_of(c->optim) : (CkptMoments){c->read_moments, c->moments_ctx};
  CkptMemorySink m = {NULL, 0, ckpt_state_size(c->model, c->state), "checkpoint: the state is longer than its size said"};
  CkptSink sink = ckpt_memory_sink(&m);
  int rc = m.cap && (m.p = malloc(m.cap)) ? ckpt_state_stream(c->model, &src, c->state, &sink, err)
                                          : err_setk(err, ERR_NOMEM, "checkpoint: out of memory");
  if (rc == 0 && m.len != m.cap) rc = err_set(err, "checkpoint: the state is shorter than its size said");
  if (rc) {
    free(m.p);
    free(*weights);
    *weights = NULL;
    return -1;
  }
  *state = m.p;
  *slen = m.len;
  return 0;
}

/* What rank 0 decided on resume, for every rank. */
typedef struct Resumed {
  int failed;
  Err err;
  int64_t step, epoch, position;
  uint64_t loader[LOADER_STATE_WORDS];
  double loss_sum;
  int64_t loss_steps;
} Resumed;

/* A checkpoint whose step shape (shape_word) is not this run's: names what the run's
** global batch was and what this resume gives, and the --grad-accum (or --ranks) that
** keeps it. saved_ranks: the checkpoint's (0 when an older one does not say). */
static int shape_refusal(const Trainer *t, uint64_t saved, long saved_ranks, Err *err) {
  long seq = (long)(saved & 0xffff), per = (long)((saved >> 16) & 0xffff), batch = (long)((saved >> 32) & 0xffffff);
  if (seq != t->seq)
    return err_set(err, "resume: the checkpoint was trained on samples of %ld tokens, these shards have %d", seq, t->seq);
  long global = batch * per, b = t->opt.batch, r = t->W, a = t->opt.grad_accum, mine = r * b * a;
  char was[96], hint[64] = "";
  if (saved_ranks > 0 && per % saved_ranks == 0)
    snprintf(was, sizeof was, "%ld ranks x %ld batch x %ld grad_accum", saved_ranks, batch, per / saved_ranks);
  else snprintf(was, sizeof was, "%ld batch x %ld (ranks x grad_accum)", batch, per);
  if (global % (r * b) == 0) snprintf(hint, sizeof hint, ": give --grad-accum %ld", global / (r * b));
  else if (global % (b * a) == 0) snprintf(hint, sizeof hint, ": give --ranks %ld", global / (b * a));
  else if (batch != b) snprintf(hint, sizeof hint, " (its batch was %ld)", batch);
  return err_set(err, "resume: the run's global batch is %s = %ld sequences; this resume gives %ld x %ld x %ld = %ld%s", was,
                 global, r, b, a, mine, hint);
}

/* Rank 0: checks and parses the checkpoint into r, the weights into the model and the
** moments into tmp (a whole-parameter AdamW), leaving the trainer as it was on failure. */
static int restore_parse(Trainer *t, const void *weights, size_t wlen, const void *state, size_t slen, AdamW **tmp,
                         Resumed *r, Err *err) {
  AdamWSegment none = {0, 0, 0};
  *tmp = adamw_new(&gsync_optim(t->gs)->cfg, model_num_params(t->m), &none, 0, err);
  if (!*tmp) return -1;
  CkptState s;
  if (ckpt_load_state_memory(t->m, *tmp, &s, state, slen, err)) return err_prefix(err, "resume");
  int v1 = s.n_extra == X_WORDS_V1, v2 = s.n_extra == X_WORDS_V2;
  /* The products' precision decides every bit after the first step: a bf16 run goes on in bf16. */
  uint64_t want = shape_word(&t->opt, t->W, t->seq);
  if ((s.n_extra == X_WORDS || v2 || v1) && (s.extra[X_SHAPE] ^ want) == SHAPE_BF16)
    return err_set(err, "resume: the checkpoint was trained with precision %s, this run is %s",
                   model_precision_name((s.extra[X_SHAPE] & SHAPE_BF16) ? MODEL_BF16 : MODEL_FP32),
                   model_precision_name(t->opt.precision));
  if (s.n_extra != X_WORDS && !v2 && !v1)
    return err_set(err, "resume: the checkpoint's state has %d words, not %d", s.n_extra, X_WORDS);
  if (s.extra[X_SHAPE] != want) return shape_refusal(t, s.extra[X_SHAPE], v1 ? 0 : (long)s.extra[X_RANKS], err);
  /* A finished run's last epoch may be partial (max_steps), so step == total is always consistent. */
  if (s.step < 0 || s.step > t->total || s.position < 0 || s.position >= t->spe || s.epoch < 0 ||
      (s.step != s.epoch * t->spe + s.position && s.step != t->total))
    return err_set(err, "resume: step %lld (epoch %lld, position %lld) does not fit this run's %ld steps of %ld per epoch",
                   (long long)s.step, (long long)s.epoch, (long long)s.position, t->total, t->spe);
  uint64_t w[LOADER_STATE_WORDS];
  for (int i = 0; i < LOADER_STATE_WORDS; i++) w[i] = s.extra[X_LOADER + i];
  LoaderState ls;
  loader_state_unpack(w, &ls);
  long saved_accum = v1 ? (long)((s.extra[X_SHAPE] >> 16) & 0xffff) : (long)s.extra[X_ACCUM];
  if (ls.epoch != (uint64_t)s.epoch || ls.batch != (uint64_t)(s.position * saved_accum))
    return err_set(err, "resume: loader position (%llu, %llu) disagrees with step position (%lld, %lld)",
                   (unsigned long long)ls.epoch, (unsigned long long)ls.batch, (long long)s.epoch, (long long)s.position);
  if (ckpt_load_weights_memory(t->m, weights, wlen, err)) return err_prefix(err, "resume");
  r->step = s.step;
  r->epoch = s.epoch;
  r->position = s.position;
  memcpy(r->loader, w, sizeof w);
  memcpy(&r->loss_sum, &s.extra[X_LOSS_SUM], sizeof(double));
  r->loss_steps = v1 || v2 ? s.position : (int64_t)s.extra[X_LOSS_STEPS];
  if (r->loss_steps < 0 || r->loss_steps > s.position)
    return err_set(err, "resume: %lld steps with a loss, more than the epoch's %lld", (long long)r->loss_steps,
                   (long long)s.position);
  return 0;
}

int trainer_restore(Trainer *t, const void *weights, size_t wlen, const void *state, size_t slen, Err *err) {
  Resumed r;
  memset(&r, 0, sizeof r);
  AdamW *tmp = NULL;
  if (t->me == 0 && restore_parse(t, weights, wlen, state, slen, &tmp, &r, &r.err)) r.failed = 1;
  if (dist_bcast(t->d, &r, sizeof r, 0, err)) { adamw_free(tmp); return -1; }
  if (r.failed) {
    adamw_free(tmp);
    if (err) *err = r.err;
    return -1;
  }
  /* Every rank's position: the same epoch and step, at its own part of the permutation. */
  LoaderState ls;
  loader_state_unpack(r.loader, &ls);
  ls.batch = (uint64_t)(r.position * t->opt.grad_accum);
  int rc = loader_set_state(t->train, &ls, err);
  if (rc == 0) rc = gsync_load(t->gs, tmp ? tmp->m : NULL, tmp ? tmp->v : NULL, err);
  adamw_free(tmp);
  if (rc) return err_prefix(err, "resume");
  gsync_optim(t->gs)->step = (long)r.step;
  t->step = (long)r.step;
  t->epoch = (int)r.epoch;
  t->pos = (long)r.position;
  t->loss_sum = r.loss_sum;
  t->loss_steps = (long)r.loss_steps;
  return 0;
}

/* Masks rows [0, rows) of ids into inputs/labels, each row from its own key; returns the labels. */
static long mask_rows(Trainer *t, const Rng *key, const int64_t *samples, int rows, const int32_t *ids,
                      const int32_t *attn, int32_t *inputs, int32_t *labels) {
  long chosen = 0;
  for (int r = 0; r < rows; r++) {
    size_t off = (size_t)r * (size_t)t->seq;
    Rng rr = rng_split(key, samples[r] < 0 ? UINT64_MAX : (uint64_t)samples[r]);
    chosen += collator_apply(t->col, &rr, ids + off, attn + off, t->seq, inputs + off, labels + off);
  }
  return chosen;
}

int trainer_evaluate(Trainer *t, TrainerEval *out, Err *err) {
  if (!t->valid) return err_set(err, "evaluate: no validation shards");
  double t0 = now_monotonic();
  long nb = t->ev_batches;
  if (t->opt.eval_batches > 0 && t->opt.eval_batches < nb) nb = t->opt.eval_batches;
  model_set_dropout(t->m, 0, 0);
  memset(t->ev_loss, 0, (size_t)nb * sizeof(double));
  memset(t->ev_count, 0, (size_t)nb * 2 * sizeof(int64_t));
  /* Rank r evaluates batches r, r + N, ...; the sums are folded in batch order. */
  for (long b = t->me; b < nb; b += t->W) {
    LoaderState ls;
    loader_get_state(t->valid, &ls);
    ls.epoch = 0;
    ls.batch = (uint64_t)b;
    if (loader_set_state(t->valid, &ls, err)) return -1;
    loader_next_samples(t->valid, t->ids, t->attn, t->samples);
    mask_rows(t, &t->eval_rng, t->samples, t->opt.batch, t->ids, t->attn, t->inputs, t->labels);
    ModelBatch mb = {t->opt.batch, t->seq, t->inputs, t->attn, NULL, t->labels};
    ModelLoss ml;
    if (model_forward(t->m, &mb, &ml, err)) return err_prefix(err, "evaluate");
    t->ev_loss[b] = ml.loss_sum;
    t->ev_count[2 * b] = ml.n_labels;
    t->ev_count[2 * b + 1] = ml.n_correct;
  }
  if (dist_merge_f64(t->d, t->ev_loss, (size_t)nb, err) || dist_sum_i64(t->d, t->ev_count, (size_t)nb * 2, err)) return -1;
  double sum = 0;
  long labels = 0, correct = 0;
  for (long b = 0; b < nb; b++) {
    sum += t->ev_loss[b];
    labels += (long)t->ev_count[2 * b];
    correct += (long)t->ev_count[2 * b + 1];
  }
  memset(out, 0, sizeof *out);
  out->epoch = t->epoch;
  out->step = t->step;
  out->loss = labels ? sum / (double)labels : NAN;
  out->accuracy = labels ? (double)correct / (double)labels : NAN;
  out->perplexity = exp(out->loss);
  out->labels = labels;
  out->evaluated = 1;
  out->train_loss = NAN;
  out->seconds = now_monotonic() - t0;
  return 0;
}

/* One optimizer step over every rank's grad_accum micro-batches. */
static int train_step(Trainer *t, TrainerStep *st, Err *err) {
  double t0 = now_monotonic();
  int accum = t->opt.grad_accum, B = t->opt.batch;
  /* Mask every micro-batch first: the loss scale needs the step's total label count. */
  Rng epoch_key = rng_split(&t->rng, (uint64_t)t->epoch);
  int64_t counts[2] = {0, 0};   /* labels, real tokens: this rank's, then the run's */
  for (int k = 0; k < accum; k++) {
    size_t off = (size_t)k * t->n;
    int64_t *samples = t->samples + (size_t)k * (size_t)B;
    loader_next_samples(t->train, t->ids + off, t->attn + off, samples);
    counts[0] += mask_rows(t, &epoch_key, samples, B, t->ids + off, t->attn + off, t->inputs + off, t->labels + off);
    for (size_t i = 0; i < t->n; i++) counts[1] += t->attn[off + i] != 0;
  }
  int64_t mine = counts[1];
  if (dist_sum_i64(t->d, counts, 2, err)) return -1;
  long labels = (long)counts[0];
  float scale = labels ? (float)(1.0 / (double)labels) : 0.0f;
  memset(t->micro_loss, 0, (size_t)t->W * (size_t)(accum + 1) * sizeof(double));
  for (int k = 0; k < accum; k++) {
    size_t off = (size_t)k * t->n;
    int j = k * t->W + t->me;   /* the micro-batch's number in the step, whoever computes it */
    gsync_micro_begin(t->gs, k);
    model_set_dropout(t->m, 1, mix64(t->opt.seed ^ mix64((uint64_t)t->step * 0x10000u + (uint64_t)j)));
    ModelBatch mb = {B, t->seq, t->inputs + off, t->attn + off, NULL, t->labels + off};
    ModelLoss ml;
    if (model_forward(t->m, &mb, &ml, err)) return err_prefix(err, "train step");
    t->micro_loss[j] = ml.loss_sum;
    if (labels) model_backward(t->m, scale);
    gsync_micro_end(t->gs);
  }
  double lr = 0;
  double norm = gsync_step(t->gs, &lr);
  t->step = gsync_optim(t->gs)->step;
  double dt = now_monotonic() - t0;
  t->rank_tps[t->me] = dt > 0 ? (double)mine / dt : 0;
  /* Every slot is this rank's or another's alone: merged exactly, then folded in j order. */
  if (dist_merge_f64(t->d, t->micro_loss, (size_t)t->W * (size_t)(accum + 1), err)) return -1;
  double sum = 0;
  for (int j = 0; j < t->W * accum; j++) sum += t->micro_loss[j];
  GsyncStats cs = gsync_stats(t->gs);
  memset(st, 0, sizeof *st);
  st->step = t->step;
  st->total_steps = t->total;
  st->epoch = t->epoch;
  st->loss = labels ? sum / (double)labels : NAN;
  st->lr = lr;
  st->grad_norm = norm;
  st->labels = labels;
  st->seconds = dt;
  st->tokens_per_s = dt > 0 ? (double)counts[1] / dt : 0;
  st->ranks = t->W;
  st->rank_tokens_per_s = t->rank_tps;
  st->comm_exchange_s = cs.exchange_s;
  st->comm_exposed_s = cs.exposed_s;
  st->comm_inline_s = cs.inline_s;
  st->comm_gather_s = cs.gather_s;
  return 0;
}

static int read_moments(void *ctx, int which, size_t offset, size_t count, float *dst, Err *err) {
  return gsync_moments_read(ctx, which, offset, count, dst, err);
}

/* Collective: rank 0's callback persists the checkpoint while the others answer its
** requests for their moments; every rank returns rank 0's verdict. Weights that are not
** finite are never saved: every rank holds the same parameters, so every rank refuses. */
static int checkpoint(Trainer *t, const TrainerCallbacks *cb, TrainerCkptKind kind, const TrainerEval *ev, Err *err) {
  if (divergence_check_weights(t->m, "training", t->step, err)) return -1;
  if (t->me != 0) return gsync_moments_serve(t->gs, err);
  int rc = 0;
  if (cb && cb->on_checkpoint) {
    CkptState s;
    current_state(t, &s);
    TrainerCheckpoint c = {kind, t->m, gsync_holds_all(t->gs) ? gsync_optim(t->gs) : NULL, &s, t->epoch, t->step, ev,
                           read_moments, t->gs};
    rc = cb->on_checkpoint(cb->ctx, &c, err);
  }
  return gsync_moments_end(t->gs, rc != 0, err);
}

/* Rank 0's callbacks' wish to stop, for every rank. */
static int should_stop(Trainer *t, const TrainerCallbacks *cb) {
  int stop = t->me == 0 && cb && cb->should_stop && cb->should_stop(cb->ctx);
  dist_bcast(t->d, &stop, sizeof stop, 0, NULL);
  return stop;
}

int trainer_run(Trainer *t, const TrainerCallbacks *cb, Err *err) {
  const TrainerCallbacks *lead = t->me == 0 ? cb : NULL;   /* what rank 0 reports */
  while (t->step < t->total) {
    if (should_stop(t, cb)) {
      if (checkpoint(t, cb, TRAINER_CKPT_STOP, NULL, err)) return -1;
      return TRAINER_STOPPED;
    }
    TrainerStep st;
    if (train_step(t, &st, err)) return -1;
    t->pos++;
    if (!isnan(st.loss)) { t->loss_sum += st.loss; t->loss_steps++; }
    st.epoch_frac = (double)t->epoch + (double)t->pos / (double)t->spe;
    if (lead && lead->on_step) lead->on_step(lead->ctx, &st);
    if (divergence_check_step("training", st.step, st.loss, st.grad_norm, err)) return -1;
    int saved = 0;   /* an epoch checkpoint at this step: no step checkpoint beside it */
    if (t->pos == t->spe || t->step == t->total) {
      TrainerEval ev;
      int have_eval = t->valid != NULL;
      if (have_eval && trainer_evaluate(t, &ev, err)) return -1;
      if (!have_eval) { memset(&ev, 0, sizeof ev); ev.loss = ev.accuracy = ev.perplexity = NAN; ev.step = t->step; }
      ev.epoch = t->epoch;
      ev.train_loss = t->loss_steps ? t->loss_sum / (double)t->loss_steps : NAN;
      /* The next epoch starts at its first batch, whatever micro-batches were left over. */
      t->epoch++;
      t->pos = 0;
      t->loss_sum = 0;
      t->loss_steps = 0;
      LoaderState ls;
      loader_get_state(t->train, &ls);
      ls.epoch = (uint64_t)t->epoch;
      ls.batch = 0;
      if (loader_set_state(t->train, &ls, err)) return -1;
      if (lead && lead->on_eval) lead->on_eval(lead->ctx, &ev);
      if (t->epoch % t->opt.checkpoint_epochs == 0 || t->step == t->total) {
        if (checkpoint(t, cb, TRAINER_CKPT_EPOCH, have_eval ? &ev : NULL, err)) return -1;
        saved = 1;
      }
    }
    /* Every checkpoint_steps steps, an epoch's end included where that epoch makes none
    ** (--checkpoint-epochs 2 ends epoch 1 without one). */
    if (!saved && t->opt.checkpoint_steps > 0 && t->step % t->opt.checkpoint_steps == 0)
      if (checkpoint(t, cb, TRAINER_CKPT_STEPS, NULL, err)) return -1;
  }
  return TRAINER_DONE;
}
