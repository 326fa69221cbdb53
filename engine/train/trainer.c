#include "engine/train/trainer.h"
#include "engine/core/now.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/loader.h"
#include "engine/core/platform.h"
#include "engine/core/rng.h"

/* Words of CkptState.extra: the loader's six, the epoch's running train-loss sum
** (a double's bits) and a shape word, so a state is refused by a run of another shape. */
enum { X_LOADER = 0, X_LOSS_SUM = 6, X_SHAPE = 7, X_WORDS = 8 };

struct Trainer {
  TrainerOptions opt;
  ModelConfig cfg;
  Model *m;
  AdamW *o;
  Loader *train, *valid;
  Collator *col;
  Rng rng;                 /* the collator's generator: the run's randomness */
  int seq;
  size_t n;                /* batch * seq */
  int32_t *ids, *attn, *inputs, *labels;   /* grad_accum micro-batches each */
  long step, total, spe, warmup;
  int epoch;               /* epochs completed */
  long pos;                /* steps done in the current epoch */
  double loss_sum;         /* sum of the current epoch's step losses */
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

static uint64_t shape_word(const TrainerOptions *o, int seq) {
  return ((uint64_t)o->batch << 32) | ((uint64_t)o->grad_accum << 16) | (uint64_t)(seq & 0xffff);
}

void trainer_free(Trainer *t) {
  if (!t) return;
  model_free(t->m);
  adamw_free(t->o);
  loader_close(t->train);
  loader_close(t->valid);
  collator_free(t->col);
  free(t->ids); free(t->attn); free(t->inputs); free(t->labels);
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

  Rng base;
  rng_seed(&base, opt->seed);
  t->rng = rng_split(&base, 2);
  t->train = train;
  t->valid = valid;
  t->seq = (int)loader_seq_len(t->train);
  t->spe = (long)(loader_batches_per_epoch(t->train) / (uint64_t)opt->grad_accum);
  if (t->spe < 1) {
    err_set(err, "train: %llu batches of %d per epoch are fewer than grad_accum %d",
            (unsigned long long)loader_batches_per_epoch(t->train), opt->batch, opt->grad_accum);
    goto fail;
  }
  t->total = opt->max_steps > 0 ? opt->max_steps : (long)opt->epochs * t->spe;
  t->warmup = opt->warmup_steps >= 0 ? opt->warmup_steps : t->total / 20;

  t->m = model_new(cfg, err);
  if (!t->m) goto fail;
  model_init_weights(t->m, opt->seed);
  model_set_threads(t->m, opt->threads);
  platform_pin_threads(model_threads(t->m));
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
  t->o = adamw_new(&ac, model_num_params(t->m), segs, nt, err);
  free(segs);
  if (!t->o) goto fail;
  t->o->threads = model_threads(t->m);   /* the run's threads, as the model's */

  MlmOptions mo = mlm_default_options(opt->mask_id, cfg->vocab_size, opt->special_ids, opt->n_special);
  mo.mlm_prob = opt->mlm_prob;
  t->col = collator_new(&mo, err);
  if (!t->col) goto fail;

  size_t all = t->n * (size_t)opt->grad_accum;
  t->ids = malloc(all * sizeof(int32_t));
  t->attn = malloc(all * sizeof(int32_t));
  t->inputs = malloc(all * sizeof(int32_t));
  t->labels = malloc(all * sizeof(int32_t));
  if (!t->ids || !t->attn || !t->inputs || !t->labels) {
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
const AdamW *trainer_optim(const Trainer *t) { return t->o; }

/* The state a checkpoint taken now holds. */
static void current_state(const Trainer *t, CkptState *s) {
  memset(s, 0, sizeof *s);
  s->step = t->o->step;
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
  s->extra[X_SHAPE] = shape_word(&t->opt, t->seq);
}

int trainer_checkpoint_bytes(const TrainerCheckpoint *c, unsigned char **weights, size_t *wlen,
                             unsigned char **state, size_t *slen, Err *err) {
  *weights = *state = NULL;
  if (ckpt_weights_bytes(c->model, 0, weights, wlen, err)) return -1;
  if (ckpt_state_bytes(c->model, c->optim, c->state, state, slen, err)) {
    free(*weights);
    *weights = NULL;
    return -1;
  }
  return 0;
}

int trainer_restore(Trainer *t, const void *weights, size_t wlen, const void *state, size_t slen, Err *err) {
  /* Load the state into a scratch optimizer first, so a refused state leaves t as it was. */
  AdamWSegment none = {0, 0, 0};
  AdamW *tmp = adamw_new(&t->o->cfg, t->o->n, &none, 0, err);
  if (!tmp) return -1;
  CkptState s;
  if (ckpt_load_state_memory(t->m, tmp, &s, state, slen, err)) { adamw_free(tmp); return err_prefix(err, "resume"); }
  int bad = s.n_extra != X_WORDS || s.extra[X_SHAPE] != shape_word(&t->opt, t->seq);
  if (bad) {
    adamw_free(tmp);
    return err_set(err, "resume: the checkpoint was made with another batch, grad_accum or sequence length");
  }
  /* A finished run's last epoch may be partial (max_steps), so step == total is always consistent. */
  if (s.step < 0 || s.step > t->total || s.position < 0 || s.position >= t->spe || s.epoch < 0 ||
      (s.step != s.epoch * t->spe + s.position && s.step != t->total)) {
    adamw_free(tmp);
    return err_set(err, "resume: step %lld (epoch %lld, position %lld) does not fit this run's %ld steps of %ld per epoch",
                   (long long)s.step, (long long)s.epoch, (long long)s.position, t->total, t->spe);
  }
  uint64_t w[LOADER_STATE_WORDS];
  for (int i = 0; i < LOADER_STATE_WORDS; i++) w[i] = s.extra[X_LOADER + i];
  LoaderState ls;
  loader_state_unpack(w, &ls);
  if (ls.epoch != (uint64_t)s.epoch || ls.batch != (uint64_t)(s.position * t->opt.grad_accum)) {
    adamw_free(tmp);
    return err_set(err, "resume: loader position (%llu, %llu) disagrees with step position (%lld, %lld)",
                   (unsigned long long)ls.epoch, (unsigned long long)ls.batch, (long long)s.epoch, (long long)s.position);
  }
  LoaderState before;
  loader_get_state(t->train, &before);
  if (loader_set_state(t->train, &ls, err)) { adamw_free(tmp); return err_prefix(err, "resume"); }
  if (ckpt_load_weights_memory(t->m, weights, wlen, err)) {
    loader_set_state(t->train, &before, NULL);
    adamw_free(tmp);
    return err_prefix(err, "resume");
  }
  memcpy(t->o->m, tmp->m, t->o->n * sizeof(float));
  memcpy(t->o->v, tmp->v, t->o->n * sizeof(float));
  t->o->step = tmp->step;
  adamw_free(tmp);
  t->step = (long)s.step;
  t->epoch = (int)s.epoch;
  t->pos = (long)s.position;
  t->rng = s.rng;
  memcpy(&t->loss_sum, &s.extra[X_LOSS_SUM], sizeof(double));
  return 0;
}

int trainer_evaluate(Trainer *t, TrainerEval *out, Err *err) {
  if (!t->valid) return err_set(err, "evaluate: no validation shards");
  double t0 = now_monotonic();
  LoaderState ls;
  loader_get_state(t->valid, &ls);
  ls.epoch = 0; ls.batch = 0;
  if (loader_set_state(t->valid, &ls, err)) return -1;
  Rng er;
  rng_seed(&er, t->opt.eval_seed);
  long nb = (long)loader_batches_per_epoch(t->valid);
  if (t->opt.eval_batches > 0 && t->opt.eval_batches < nb) nb = t->opt.eval_batches;
  model_set_dropout(t->m, 0, 0);
  double sum = 0;
  long labels = 0, correct = 0;
  for (long b = 0; b < nb; b++) {
    loader_next(t->valid, t->ids, t->attn);
    collator_apply(t->col, &er, t->ids, t->attn, (long)t->n, t->inputs, t->labels);
    ModelBatch mb = {t->opt.batch, t->seq, t->inputs, t->attn, NULL, t->labels};
    ModelLoss ml;
    if (model_forward(t->m, &mb, &ml, err)) return err_prefix(err, "evaluate");
    sum += ml.loss_sum;
    labels += ml.n_labels;
    correct += ml.n_correct;
  }
  memset(out, 0, sizeof *out);
  out->epoch = t->epoch;
  out->step = t->step;
  out->loss = labels ? sum / (double)labels : NAN;
  out->accuracy = labels ? (double)correct / (double)labels : NAN;
  out->perplexity = exp(out->loss);
  out->labels = labels;
  out->train_loss = NAN;
  out->seconds = now_monotonic() - t0;
  return 0;
}

/* One optimizer step over grad_accum micro-batches. */
static int train_step(Trainer *t, TrainerStep *st, Err *err) {
  double t0 = now_monotonic();
  int accum = t->opt.grad_accum;
  long labels = 0, tokens = 0;
  /* Mask every micro-batch first: the loss scale needs the step's total label count. */
  for (int k = 0; k < accum; k++) {
    size_t off = (size_t)k * t->n;
    loader_next(t->train, t->ids + off, t->attn + off);
    labels += collator_apply(t->col, &t->rng, t->ids + off, t->attn + off, (long)t->n, t->inputs + off, t->labels + off);
    for (size_t i = 0; i < t->n; i++) tokens += t->attn[off + i] != 0;
  }
  float scale = labels ? (float)(1.0 / (double)labels) : 0.0f;
  model_zero_grad(t->m);
  double sum = 0;
  for (int k = 0; k < accum; k++) {
    size_t off = (size_t)k * t->n;
    model_set_dropout(t->m, 1, mix64(t->opt.seed ^ mix64((uint64_t)t->step * 0x10000u + (uint64_t)k)));
    ModelBatch mb = {t->opt.batch, t->seq, t->inputs + off, t->attn + off, NULL, t->labels + off};
    ModelLoss ml;
    if (model_forward(t->m, &mb, &ml, err)) return err_prefix(err, "train step");
    sum += ml.loss_sum;
    if (labels) model_backward(t->m, scale);
  }
  double lr = adamw_lr_at(&t->o->cfg, t->o->step);
  double norm = adamw_step(t->o, model_params(t->m), model_grads(t->m));
  t->step = t->o->step;
  double dt = now_monotonic() - t0;
  st->step = t->step;
  st->total_steps = t->total;
  st->epoch = t->epoch;
  st->loss = labels ? sum / (double)labels : NAN;
  st->lr = lr;
  st->grad_norm = norm;
  st->labels = labels;
  st->seconds = dt;
  st->tokens_per_s = dt > 0 ? (double)tokens / dt : 0;
  return 0;
}

static int checkpoint(Trainer *t, const TrainerCallbacks *cb, TrainerCkptKind kind, const TrainerEval *ev, Err *err) {
  if (!cb || !cb->on_checkpoint) return 0;
  CkptState s;
  current_state(t, &s);
  TrainerCheckpoint c = {kind, t->m, t->o, &s, t->epoch, t->step, ev};
  return cb->on_checkpoint(cb->ctx, &c, err);
}

int trainer_run(Trainer *t, const TrainerCallbacks *cb, Err *err) {
  while (t->step < t->total) {
    if (cb && cb->should_stop && cb->should_stop(cb->ctx)) {
      if (checkpoint(t, cb, TRAINER_CKPT_STOP, NULL, err)) return -1;
      return TRAINER_STOPPED;
    }
    TrainerStep st;
    if (train_step(t, &st, err)) return -1;
    t->pos++;
    if (!isnan(st.loss)) t->loss_sum += st.loss;
    st.epoch_frac = (double)t->epoch + (double)t->pos / (double)t->spe;
    if (cb && cb->on_step) cb->on_step(cb->ctx, &st);
    if (t->pos == t->spe || t->step == t->total) {
      TrainerEval ev;
      int have_eval = t->valid != NULL;
      if (have_eval && trainer_evaluate(t, &ev, err)) return -1;
      if (!have_eval) { memset(&ev, 0, sizeof ev); ev.loss = ev.accuracy = ev.perplexity = NAN; ev.step = t->step; }
      ev.epoch = t->epoch;
      ev.train_loss = t->loss_sum / (double)t->pos;
      /* The next epoch starts at its first batch, whatever micro-batches were left over. */
      t->epoch++;
      t->pos = 0;
      t->loss_sum = 0;
      LoaderState ls;
      loader_get_state(t->train, &ls);
      ls.epoch = (uint64_t)t->epoch;
      ls.batch = 0;
      if (loader_set_state(t->train, &ls, err)) return -1;
      if (cb && cb->on_eval) cb->on_eval(cb->ctx, &ev);
      if (t->epoch % t->opt.checkpoint_epochs == 0 || t->step == t->total)
        if (checkpoint(t, cb, TRAINER_CKPT_EPOCH, have_eval ? &ev : NULL, err)) return -1;
    } else if (t->opt.checkpoint_steps > 0 && t->step % t->opt.checkpoint_steps == 0) {
      if (checkpoint(t, cb, TRAINER_CKPT_STEPS, NULL, err)) return -1;
    }
  }
  return TRAINER_DONE;
}
