/* The fine-tuning loop for sequence classification (engine/train/finetune.h). */
#include "engine/train/finetune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/now.h"
#include "engine/core/rng.h"
#include "engine/nn/optim.h"
#include "engine/train/divergence.h"

struct Finetune {
  FinetuneOptions o;
  Model *m;
  const ModelConfig *cfg;
  int nl;                        /* classes */
  const TextClsSet *train, *valid;
  TextClsBatcher *tb, *vb;       /* training order; validation in set order */
  AdamW *opt;
  int seq;                       /* the plan's sequence length */
  int plan_rows;                 /* the plan's batch: rows per forward */
  int io_rows;                   /* rows the batch arrays hold: max(batch, eval_batch) */
  int32_t *ids, *mask, *labels;  /* io_rows x seq, io_rows */
  size_t *examples;              /* io_rows */
  /* Evaluation's buffers, for sets of up to ev_cap rows (grown only by finetune_evaluate). */
  size_t ev_cap;
  int32_t *pred, *ytrue, *ypred;
  int64_t *confusion;            /* nl x nl */
  long spe, total, warmup;
};

FinetuneOptions finetune_default_options(void) {
  FinetuneOptions o;
  memset(&o, 0, sizeof o);
  o.batch = 32; o.eval_batch = 64; o.epochs = 3; o.max_steps = 0;
  o.lr = 2e-5; o.weight_decay = 0.01; o.beta1 = 0.9; o.beta2 = 0.999; o.eps = 1e-8;
  o.clip_norm = 1.0; o.warmup_ratio = 0; o.warmup_steps = 0;
  o.length_grouped = 0; o.seed = 42; o.threads = 1; o.pad_id = -1; o.precision = MODEL_FP32;
  return o;
}

/* One splitmix64 step from x: a well-mixed word, for the per-step dropout seeds. */
static uint64_t mix64(uint64_t x) { return rng_splitmix64(&x); }

void finetune_free(Finetune *f) {
  if (!f) return;
  textcls_batcher_free(f->tb);
  textcls_batcher_free(f->vb);
  adamw_free(f->opt);
  free(f->ids); free(f->mask); free(f->labels); free(f->examples);
  free(f->pred); free(f->ytrue); free(f->ypred); free(f->confusion);
  free(f);
}

/* A set's labels in [0, nl) or MODEL_IGNORE_LABEL, its examples within max_len and not empty. */
static int check_set(const TextClsSet *s, const char *what, int nl, int max_len, Err *err) {
  if (!s || s->n == 0) return err_setk(err, ERR_BAD_INPUT, "%s: no examples", what);
  for (size_t i = 0; i < s->n; i++) {
    int32_t y = s->labels[i];
    if (y != MODEL_IGNORE_LABEL && (y < 0 || y >= nl))
      return err_setk(err, ERR_BAD_INPUT, "%s: example %zu has label %d, outside the model's %d classes", what, i, y, nl);
    size_t len = s->starts[i + 1] - s->starts[i];
    if (len == 0) return err_setk(err, ERR_BAD_INPUT, "%s: example %zu has no tokens", what, i);
    if (len > (size_t)max_len)
      return err_setk(err, ERR_BAD_INPUT, "%s: example %zu has %zu tokens, more than the %d the model was planned for",
                      what, i, len, max_len);
  }
  return 0;
}

/* Evaluation buffers for sets of n rows (kept when large enough). */
static int ev_reserve(Finetune *f, size_t n, Err *err) {
  if (n <= f->ev_cap) return 0;
  int32_t *p = realloc(f->pred, n * sizeof *p);
  if (p) f->pred = p;
  int32_t *t = p ? realloc(f->ytrue, n * sizeof *t) : NULL;
  if (t) f->ytrue = t;
  int32_t *q = t ? realloc(f->ypred, n * sizeof *q) : NULL;
  if (q) f->ypred = q;
  if (!q) return err_setk(err, ERR_NOMEM, "finetune: out of memory for %zu predictions", n);
  f->ev_cap = n;
  return 0;
}

/* The batch arrays (io_rows x seq) and the confusion matrix, for f's io_rows, seq and nl. */
static int batch_buffers(Finetune *f, Err *err) {
  size_t cells = (size_t)f->io_rows * (size_t)f->seq;
  f->ids = malloc(cells * sizeof *f->ids);
  f->mask = malloc(cells * sizeof *f->mask);
  f->labels = malloc((size_t)f->io_rows * sizeof *f->labels);
  f->examples = malloc((size_t)f->io_rows * sizeof *f->examples);
  f->confusion = malloc((size_t)f->nl * (size_t)f->nl * sizeof *f->confusion);
  if (!f->ids || !f->mask || !f->labels || !f->examples || !f->confusion)
    return err_setk(err, ERR_NOMEM, "finetune: out of memory for batches of %d x %d", f->io_rows, f->seq);
  return 0;
}

Finetune *finetune_new(Model *m, const TextClsSet *train, const TextClsSet *valid, const FinetuneOptions *o,
                       Err *err) {
  const ModelConfig *c = m ? model_config(m) : NULL;
  if (!c || c->task != MODEL_TASK_SEQ_CLS || c->num_labels < 2) {
    err_setk(err, ERR_INVALID, "finetune: the model is not a sequence classifier");
    return NULL;
  }
  if (o->batch < 1 || o->eval_batch < 1 || o->epochs < 1 || o->max_steps < 0 || o->threads < 1 || o->max_seq < 0) {
    err_setk(err, ERR_INVALID, "finetune: batch, eval_batch, epochs and threads must be >= 1, max_steps and max_seq >= 0");
    return NULL;
  }
  if (!(o->lr >= 0) || !(o->weight_decay >= 0) || !(o->clip_norm >= 0) || !(o->eps > 0) || !(o->beta1 >= 0 && o->beta1 < 1) ||
      !(o->beta2 >= 0 && o->beta2 < 1) || !(o->warmup_ratio >= 0 && o->warmup_ratio <= 1) || o->warmup_steps < -1 ||
      !(o->label_smoothing >= 0 && o->label_smoothing < 1)) {
    err_setk(err, ERR_INVALID, "finetune: lr, weight_decay, clip_norm >= 0, eps > 0, betas, warmup_ratio and "
                               "label_smoothing in [0, 1), warmup_steps >= -1");
    return NULL;
  }
  if (o->pad_id < 0 || o->pad_id >= c->vocab_size) {
    err_setk(err, ERR_INVALID, "finetune: padding id %d is outside the vocabulary of %d", o->pad_id, c->vocab_size);
    return NULL;
  }
  if (o->precision != MODEL_FP32 && o->precision != MODEL_BF16) {
    err_setk(err, ERR_INVALID, "finetune: unknown precision");
    return NULL;
  }
  int longest = train ? train->max_len : 0;
  if (valid && valid->max_len > longest) longest = valid->max_len;
  int seq = o->max_seq > longest ? o->max_seq : longest;
  if (seq > config_max_tokens(c)) {
    err_setk(err, ERR_BAD_INPUT, "finetune: examples of %d tokens are longer than the model's %d positions", seq,
             config_max_tokens(c));
    return NULL;
  }
  if (check_set(train, "train", c->num_labels, seq, err) || (valid && check_set(valid, "validation", c->num_labels, seq, err)))
    return NULL;

  Finetune *f = calloc(1, sizeof *f);
  if (!f) { err_setk(err, ERR_NOMEM, "finetune: out of memory"); return NULL; }
  f->o = *o;
  f->m = m;
  f->cfg = c;
  f->nl = c->num_labels;
  f->train = train;
  f->valid = valid;
  f->seq = seq;
  f->plan_rows = o->batch;
  f->io_rows = o->batch > o->eval_batch ? o->batch : o->eval_batch;

  TextClsBatcherOptions bo = {o->batch, 1, o->length_grouped, 0, o->pad_id, o->seed};
  if (!(f->tb = textcls_batcher_new(train, &bo, err))) goto fail;
  if (valid) {
    TextClsBatcherOptions vo = {o->eval_batch, 0, 0, 0, o->pad_id, o->seed};
    if (!(f->vb = textcls_batcher_new(valid, &vo, err))) goto fail;
  }
  f->spe = textcls_batches_per_epoch(f->tb);
  if (f->spe < 1) { err_setk(err, ERR_BAD_INPUT, "finetune: the train set gives no batch"); goto fail; }
  f->total = o->max_steps > 0 ? o->max_steps : (long)o->epochs * f->spe;
  /* transformers' get_warmup_steps: warmup_steps if warmup_steps > 0 else ceil(total x
  ** ratio). 0 (Trainer's default) means "use the ratio", not "no warm-up"; -1 too (the
  ** old default, still accepted). */
  f->warmup = o->warmup_steps > 0 ? o->warmup_steps : (long)ceil(o->warmup_ratio * (double)f->total);

  model_set_threads(m, o->threads);
  model_set_label_smoothing(m, (float)o->label_smoothing);
  model_set_precision(m, o->precision);
  /* One plan for training and evaluation: evaluation forwards its batches in pieces of plan_rows. */
  if (model_plan(m, f->plan_rows, seq, f->plan_rows, 1, err)) goto fail;

  int nt = model_tensor_count(m);
  AdamWSegment *segs = malloc((size_t)nt * sizeof *segs);
  if (!segs) { err_setk(err, ERR_NOMEM, "finetune: out of memory"); goto fail; }
  for (int i = 0; i < nt; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    segs[i] = (AdamWSegment){mt->offset, mt->numel, mt->decay};
  }
  AdamWConfig ac = adamw_defaults();
  ac.lr = o->lr; ac.beta1 = o->beta1; ac.beta2 = o->beta2; ac.eps = o->eps;
  ac.weight_decay = o->weight_decay; ac.clip_norm = o->clip_norm;
  ac.warmup_steps = f->warmup; ac.total_steps = f->total; ac.min_lr_ratio = 0;
  f->opt = adamw_new(&ac, model_num_params(m), segs, nt, err);
  free(segs);
  if (!f->opt) goto fail;
  f->opt->threads = o->threads;

  if (batch_buffers(f, err)) goto fail;
  if (valid && ev_reserve(f, valid->n, err)) goto fail;
  return f;
fail:
  finetune_free(f);
  return NULL;
}

Finetune *finetune_evaluator_new(Model *m, const FinetuneOptions *o, Err *err) {
  const ModelConfig *c = m ? model_config(m) : NULL;
  if (!c || c->task != MODEL_TASK_SEQ_CLS || c->num_labels < 2)
    return err_setk(err, ERR_INVALID, "evaluate: the model is not a sequence classifier"), NULL;
  if (o->batch < 1 || o->eval_batch < 1 || o->threads < 1 || o->max_seq < 1 ||
      !(o->label_smoothing >= 0 && o->label_smoothing < 1) || (o->precision != MODEL_FP32 && o->precision != MODEL_BF16))
    return err_setk(err, ERR_INVALID, "evaluate: batch, eval_batch, threads and max_seq must be >= 1, "
                                      "label_smoothing in [0, 1), a known precision"), NULL;
  if (o->pad_id < 0 || o->pad_id >= c->vocab_size)
    return err_setk(err, ERR_INVALID, "evaluate: padding id %d is outside the vocabulary of %d", o->pad_id, c->vocab_size), NULL;
  if (o->max_seq > config_max_tokens(c))
    return err_setk(err, ERR_BAD_INPUT, "evaluate: examples of %d tokens are longer than the model's %d positions", o->max_seq,
                    config_max_tokens(c)), NULL;
  Finetune *f = calloc(1, sizeof *f);
  if (!f) return err_setk(err, ERR_NOMEM, "evaluate: out of memory"), NULL;
  f->o = *o;
  f->m = m;
  f->cfg = c;
  f->nl = c->num_labels;
  f->seq = o->max_seq;
  f->plan_rows = o->batch;
  f->io_rows = o->batch > o->eval_batch ? o->batch : o->eval_batch;
  model_set_threads(m, o->threads);
  model_set_label_smoothing(m, (float)o->label_smoothing);
  model_set_precision(m, o->precision);
  if (model_plan(m, f->plan_rows, f->seq, f->plan_rows, 0, err)) goto fail;
  if (batch_buffers(f, err)) goto fail;
  return f;
fail:
  finetune_free(f);
  return NULL;
}

long finetune_total_steps(const Finetune *f) { return f->total; }
long finetune_steps_per_epoch(const Finetune *f) { return f->spe; }
long finetune_warmup_steps(const Finetune *f) { return f->warmup; }

size_t finetune_epoch_order(const Finetune *f, int epoch, size_t *order) {
  return f->tb ? textcls_batcher_order(f->tb, epoch, order) : 0;
}

/* The prediction of one row of scores: the first largest. */
static int32_t argmax(const float *s, int n) {
  int32_t best = 0;
  for (int j = 1; j < n; j++)
    if (s[j] > s[best]) best = j;
  return best;
}

/* Evaluation over a batcher of set (set order), into out; no dropout. */
static int evaluate(Finetune *f, const TextClsSet *set, TextClsBatcher *b, FinetuneEval *out, Err *err) {
  double t0 = now_monotonic();
  if (ev_reserve(f, set->n, err)) return -1;
  model_set_dropout(f->m, 0, 0);
  textcls_batcher_seek(b, 0, 0);
  double loss_sum = 0;
  long labelled = 0;
  int rows, seq;
  for (size_t i = 0; i < set->n; i++) f->pred[i] = -1;
  while (textcls_batcher_next(b, &rows, &seq, f->ids, f->mask, f->labels, f->examples)) {
    /* The batch is padded as a whole (HF's eval batch); it is forwarded in pieces of the plan's rows. */
    for (int r0 = 0; r0 < rows; r0 += f->plan_rows) {
      int n = rows - r0 < f->plan_rows ? rows - r0 : f->plan_rows;
      size_t off = (size_t)r0 * (size_t)seq;
      ModelBatch mb = {n, seq, f->ids + off, f->mask + off, NULL, f->labels + r0};
      ModelLoss ml;
      if (model_forward(f->m, &mb, &ml, err)) return err_prefix(err, "evaluate");
      loss_sum += ml.loss_sum;
      labelled += ml.n_labels;
      const float *scores = ml.n_labels ? model_class_scores(f->m) : NULL;
      int k = 0;   /* the scores hold the labelled rows, in batch order */
      for (int r = 0; r < n; r++) {
        if (f->labels[r0 + r] == MODEL_IGNORE_LABEL) continue;
        f->pred[f->examples[r0 + r]] = argmax(scores + (size_t)k * (size_t)f->nl, f->nl);
        k++;
      }
    }
  }
  size_t ns = 0;
  for (size_t i = 0; i < set->n; i++) {
    if (set->labels[i] == MODEL_IGNORE_LABEL) continue;
    f->ytrue[ns] = set->labels[i];
    f->ypred[ns] = f->pred[i];
    ns++;
  }
  memset(out, 0, sizeof *out);
  memset(f->confusion, 0, (size_t)f->nl * (size_t)f->nl * sizeof *f->confusion);
  if (ns > 0) {
    if (cls_metrics(f->ytrue, f->ypred, ns, f->nl, &out->metrics, f->confusion, err)) return err_prefix(err, "evaluate");
  } else {
    out->metrics.accuracy = out->metrics.macro_f1 = out->metrics.weighted_f1 = NAN;
    out->metrics.macro_precision = out->metrics.macro_recall = NAN;
  }
  out->epoch = -1;
  out->step = f->opt ? f->opt->step : 0;
  out->train_loss = NAN;
  out->loss = labelled ? loss_sum / (double)labelled : NAN;
  out->n_labels = f->nl;
  out->confusion = f->confusion;
  out->predictions = f->pred;
  out->seconds = now_monotonic() - t0;
  return 0;
}

int finetune_evaluate(Finetune *f, const TextClsSet *set, FinetuneEval *out, Err *err) {
  if (set == f->valid && f->vb) return evaluate(f, set, f->vb, out, err);
  if (check_set(set, "evaluate", f->nl, f->seq, err)) return -1;
  TextClsBatcherOptions vo = {f->o.eval_batch, 0, 0, 0, f->o.pad_id, f->o.seed};
  TextClsBatcher *b = textcls_batcher_new(set, &vo, err);
  if (!b) return -1;
  int r = evaluate(f, set, b, out, err);
  textcls_batcher_free(b);
  return r;
}

/* One update from the batcher's next batch; 0 at the epoch's end (nothing done), 1 after a step. */
static int train_step(Finetune *f, int epoch, FinetuneStep *st, Err *err) {
  double t0 = now_monotonic();
  int rows, seq;
  if (!textcls_batcher_next(f->tb, &rows, &seq, f->ids, f->mask, f->labels, NULL)) return 0;
  long labelled = 0, tokens = 0;
  for (int r = 0; r < rows; r++) labelled += f->labels[r] != MODEL_IGNORE_LABEL;
  for (size_t i = 0; i < (size_t)rows * (size_t)seq; i++) tokens += f->mask[i] != 0;
  long step = f->opt->step;
  /* Dropout from the seed and the update's number: a run's masks never depend on what ran before. */
  uint64_t dseed = f->o.has_dropout_seed ? f->o.dropout_seed : f->o.seed;
  model_set_dropout(f->m, 1, mix64(dseed ^ mix64((uint64_t)step + 0x66696e65ULL)));
  model_zero_grad(f->m);
  ModelBatch mb = {rows, seq, f->ids, f->mask, NULL, f->labels};
  ModelLoss ml;
  if (model_forward(f->m, &mb, &ml, err)) return err_prefix(err, "train step");
  /* The mean over the step's labelled rows (CrossEntropyLoss's "mean"). */
  if (labelled) model_backward(f->m, (float)(1.0 / (double)labelled));
  float *grads = model_grads(f->m);   /* zeros when nothing was labelled */
  double lr = adamw_lr_at(&f->opt->cfg, f->opt->step);
  double norm = adamw_step(f->opt, model_params(f->m), grads);
  double dt = now_monotonic() - t0;
  memset(st, 0, sizeof *st);
  st->step = f->opt->step;
  st->total_steps = f->total;
  st->epoch = epoch;
  st->loss = labelled ? ml.loss_sum / (double)labelled : NAN;
  st->lr = lr;
  st->grad_norm = norm;
  st->examples_per_s = dt > 0 ? (double)rows / dt : 0;
  st->tokens_per_s = dt > 0 ? (double)tokens / dt : 0;
  st->seconds = dt;
  return 1;
}

int finetune_run(Finetune *f, const FinetuneCallbacks *cb, Err *err) {
  if (!f->opt) return err_setk(err, ERR_INVALID, "finetune: an evaluator does not train");
  FinetuneCallbacks none = {0};
  if (!cb) cb = &none;
  for (int epoch = 0; f->opt->step < f->total; epoch++) {
    textcls_batcher_seek(f->tb, epoch, 0);
    double loss_sum = 0;
    long pos = 0, counted = 0;
    while (f->opt->step < f->total) {
      if (cb->should_stop && cb->should_stop(cb->ctx)) return FINETUNE_STOPPED;
      FinetuneStep st;
      int r = train_step(f, epoch, &st, err);
      if (r < 0) return -1;
      if (r == 0) break;
      pos++;
      if (!isnan(st.loss)) { loss_sum += st.loss; counted++; }
      st.epoch_frac = (double)epoch + (double)pos / (double)f->spe;
      if (cb->on_step) cb->on_step(cb->ctx, &st);
      if (divergence_check_step("fine-tuning", st.step, st.loss, st.grad_norm, err)) return -1;
    }
    FinetuneEval ev;
    if (f->valid) {
      if (evaluate(f, f->valid, f->vb, &ev, err)) return -1;
    } else {
      memset(&ev, 0, sizeof ev);
      ev.loss = ev.metrics.accuracy = ev.metrics.macro_f1 = ev.metrics.weighted_f1 = NAN;
      ev.metrics.macro_precision = ev.metrics.macro_recall = NAN;
      ev.step = f->opt->step;
      ev.n_labels = f->nl;
    }
    ev.epoch = epoch;
    ev.train_loss = counted ? loss_sum / (double)counted : NAN;
    if (divergence_check_weights(f->m, "fine-tuning", f->opt->step, err)) return -1;
    if (cb->on_epoch && cb->on_epoch(cb->ctx, f->m, epoch, &ev, err)) return -1;
  }
  return FINETUNE_DONE;
}
