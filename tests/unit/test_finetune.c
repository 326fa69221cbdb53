/* The fine-tuning loop (engine/train/finetune.h): a tiny classifier learns a separable
** synthetic task to 100% validation accuracy; the same seed gives the same bits; nothing
** is allocated inside the steps; the evaluation's metrics are cls_metrics of its own
** predictions; the schedule is the formula's; stop at a step boundary; refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/nn/optim.h"
#include "engine/train/finetune.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

/* Allocation counting for "nothing allocated inside the step" (as test_trainer.c). */
#ifndef __SANITIZE_ADDRESS__
#define COUNT_ALLOCS 1
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
static int counting;
static long n_allocs;
void *malloc(size_t n) {
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED)) __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t size) {
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED)) __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
  return __libc_calloc(n, size);
}
void *realloc(void *p, size_t n) {
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED)) __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED);
  return __libc_realloc(p, n);
}
#endif

enum { V = 48, CLASSES = 3, NTRAIN = 60, NVALID = 30, MAXLEN = 10 };
static const char *const names[CLASSES] = {"low", "mid", "high"};

/* n examples [CLS] t t ... [SEP] whose tokens all lie in class y's range (ids 8 + 12y ..
** 8 + 12y + 11), 2 to MAXLEN - 2 of them: separable by any token. */
static void make_set(TextClsSet *s, size_t n, uint64_t seed, int longest) {
  Rng r;
  rng_seed(&r, seed);
  s->n = n;
  s->ids = malloc(n * (size_t)longest * sizeof *s->ids);
  s->starts = malloc((n + 1) * sizeof *s->starts);
  s->labels = malloc(n * sizeof *s->labels);
  s->max_len = 0;
  size_t at = 0;
  for (size_t i = 0; i < n; i++) {
    int y = (int)(i % CLASSES), len = 2 + (int)rng_below(&r, (uint32_t)(longest - 3));
    s->starts[i] = at;
    s->ids[at++] = 0;
    for (int k = 0; k < len; k++) s->ids[at++] = 8 + 12 * y + (int32_t)rng_below(&r, 12);
    s->ids[at++] = 2;
    s->labels[i] = y;
    if (len + 2 > s->max_len) s->max_len = len + 2;
  }
  s->starts[n] = at;
}

static void free_set(TextClsSet *s) {
  free(s->ids); free(s->starts); free(s->labels);
  memset(s, 0, sizeof *s);
}

static ModelConfig cls_config(double dropout) {
  ModelConfig c = fixture_tiny(V);
  c.max_position_embeddings = 32;
  c.hidden_dropout_prob = c.attention_probs_dropout_prob = dropout;
  Err e = {0};
  config_set_labels(&c, CLASSES, names, &e);
  return c;
}

static FinetuneOptions opts(const ModelConfig *c) {
  FinetuneOptions o = finetune_default_options();
  o.batch = 8; o.eval_batch = 12; o.epochs = 12; o.lr = 3e-3; o.weight_decay = 0.01;
  o.warmup_steps = 4; o.seed = 11; o.threads = 1; o.pad_id = c->pad_token_id;
  return o;
}

/* What a run records through its callbacks. */
typedef struct Rec {
  long steps;
  int epochs;
  double last_acc, last_f1, first_loss, last_loss;
  int metrics_match;       /* every epoch's metrics equal cls_metrics of its predictions */
  const TextClsSet *valid;
  double lr[512];
  double norm[512];        /* each step's gradient norm, as reported */
  long stop_after;         /* > 0: should_stop after this many steps */
  long spe;
  long allocs;             /* allocations during epoch 0's steps 2..spe */
} Rec;

static void on_step(void *ctx, const FinetuneStep *s) {
  Rec *r = ctx;
  if (r->steps < 512) r->lr[r->steps] = s->lr, r->norm[r->steps] = s->grad_norm;
  r->steps++;
  if (s->step == 1) r->first_loss = s->loss;
  r->last_loss = s->loss;
#ifdef COUNT_ALLOCS
  if (s->step == 1) { n_allocs = 0; __atomic_store_n(&counting, 1, __ATOMIC_RELAXED); }
  if (s->step == r->spe) { __atomic_store_n(&counting, 0, __ATOMIC_RELAXED); r->allocs = n_allocs; }
#endif
}

static int on_epoch(void *ctx, Model *m, int epoch, const FinetuneEval *e, Err *err) {
  Rec *r = ctx;
  (void)m;
  r->epochs = epoch + 1;
  r->last_acc = e->metrics.accuracy;
  r->last_f1 = e->metrics.macro_f1;
  ClsMetrics want;
  int64_t conf[CLASSES * CLASSES];
  Err e2 = {0};
  int ok = cls_metrics(r->valid->labels, e->predictions, r->valid->n, CLASSES, &want, conf, &e2) == 0 &&
           want.accuracy == e->metrics.accuracy && want.macro_f1 == e->metrics.macro_f1 &&
           want.weighted_f1 == e->metrics.weighted_f1 && !memcmp(conf, e->confusion, sizeof conf) &&
           e->n_labels == CLASSES && isfinite(e->loss) && isfinite(e->train_loss);
  if (!ok) r->metrics_match = 0;
  return 0;
}

static int should_stop(void *ctx) {
  Rec *r = ctx;
  return r->stop_after > 0 && r->steps >= r->stop_after;
}

/* A fresh classifier (seeded weights) fine-tuned with o; the final weights into *params (malloc'd). */
static int run(const ModelConfig *c, const FinetuneOptions *o, const TextClsSet *tr, const TextClsSet *va, Rec *rec,
               float **params, size_t *np, Err *e) {
  Model *m = model_new(c, e);
  if (!m) return -1;
  model_init_weights(m, 5);
  Finetune *f = finetune_new(m, tr, va, o, e);
  if (!f) { model_free(m); return -1; }
  rec->valid = va;
  rec->metrics_match = 1;
  rec->spe = finetune_steps_per_epoch(f);
  FinetuneCallbacks cb = {rec, on_step, on_epoch, should_stop};
  int r = finetune_run(f, &cb, e);
  *np = model_num_params(m);
  *params = malloc(*np * sizeof(float));
  memcpy(*params, model_params(m), *np * sizeof(float));
  finetune_free(f);
  model_free(m);
  return r;
}

int main(void) {
  Err e = {0};
  TextClsSet tr, va, longer;
  make_set(&tr, NTRAIN, 1, MAXLEN);
  make_set(&va, NVALID, 2, MAXLEN);
  make_set(&longer, 9, 3, 20);
  ModelConfig c = cls_config(0.1);
  FinetuneOptions o = opts(&c);

  /* Learns, the metrics are the predictions' own, and no step allocates. */
  Rec a;
  memset(&a, 0, sizeof a);
  float *pa = NULL, *pb = NULL;
  size_t np = 0;
  int ra = run(&c, &o, &tr, &va, &a, &pa, &np, &e);
  check(ra == FINETUNE_DONE && a.epochs == o.epochs && a.steps == (long)o.epochs * ((NTRAIN + 7) / 8),
        "finetune_runs_all_epochs", "rc %d (%s), %d epochs, %ld steps", ra, e.msg, a.epochs, a.steps);
  check(a.last_acc == 1.0 && a.last_f1 == 1.0 && a.last_loss < a.first_loss, "finetune_learns_separable_task",
        "accuracy %g, macro-F1 %g, loss %g -> %g", a.last_acc, a.last_f1, a.first_loss, a.last_loss);
  check(a.metrics_match, "finetune_eval_metrics_are_cls_metrics", "an epoch's metrics differ from its predictions'");
#ifdef COUNT_ALLOCS
  check(a.allocs == 0, "finetune_steps_allocate_nothing", "%ld allocations in epoch 0's steps", a.allocs);
#endif
  /* The schedule: linear warm-up from 0 over 4 steps, then linear decay to 0. */
  {
    AdamWConfig ac = adamw_defaults();
    ac.lr = o.lr; ac.warmup_steps = 4; ac.total_steps = a.steps;
    int ok = 1;
    for (long s = 0; s < a.steps && s < 512; s++) ok &= a.lr[s] == adamw_lr_at(&ac, s);
    check(ok && a.lr[0] == 0 && a.lr[4] == o.lr, "finetune_schedule", "lr[0] %g lr[4] %g", a.lr[0], a.lr[4]);
  }

  /* Same seed, same bits; another seed, other bits. */
  Rec b;
  memset(&b, 0, sizeof b);
  int rb = run(&c, &o, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_DONE && !memcmp(pa, pb, np * sizeof(float)), "finetune_same_seed_same_bits", "runs differ");
  free(pb);
  /* The same run on 2 threads: the same parameters and the same reported gradient norms, bit
  ** for bit (the norm decides the clipping; summed in an order that followed the thread
  ** count, its last bits did, and a clipping factor could round the other way). */
  FinetuneOptions o2 = o;
  o2.threads = 2;
  memset(&b, 0, sizeof b);
  rb = run(&c, &o2, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_DONE && !memcmp(pa, pb, np * sizeof(float)) && !memcmp(a.norm, b.norm, sizeof a.norm),
        "finetune_same_bits_on_1_and_2_threads", "runs differ (first norms %.17g %.17g)", a.norm[0], b.norm[0]);
  free(pb);
  o2 = o;
  o2.seed = 12;
  memset(&b, 0, sizeof b);
  rb = run(&c, &o2, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_DONE && memcmp(pa, pb, np * sizeof(float)), "finetune_other_seed_other_bits", "runs equal");
  free(pb);
  /* A dropout seed of its own: equal to the seed, the seed's bits; another, other masks
  ** only (without dropout, another dropout seed changes nothing: the plan is the seed's). */
  o2 = o;
  o2.has_dropout_seed = 1;
  o2.dropout_seed = o.seed;
  memset(&b, 0, sizeof b);
  rb = run(&c, &o2, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_DONE && !memcmp(pa, pb, np * sizeof(float)), "finetune_dropout_seed_default_bits", "runs differ");
  free(pb);
  o2.dropout_seed = o.seed + 1;
  memset(&b, 0, sizeof b);
  rb = run(&c, &o2, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_DONE && memcmp(pa, pb, np * sizeof(float)), "finetune_dropout_seed_other_masks", "runs equal");
  free(pb);
  {
    ModelConfig c0 = cls_config(0.0);
    FinetuneOptions n0 = opts(&c0), n1 = n0;
    n1.has_dropout_seed = 1;
    n1.dropout_seed = n0.seed + 1;
    float *q0 = NULL, *q1 = NULL;
    size_t nq = 0;
    Rec r0, r1;
    memset(&r0, 0, sizeof r0);
    memset(&r1, 0, sizeof r1);
    int a0 = run(&c0, &n0, &tr, &va, &r0, &q0, &nq, &e), a1 = run(&c0, &n1, &tr, &va, &r1, &q1, &nq, &e);
    check(a0 == FINETUNE_DONE && a1 == FINETUNE_DONE && q0 && q1 && !memcmp(q0, q1, nq * sizeof(float)),
          "finetune_dropout_seed_only_dropout", "without dropout, another dropout seed changed the run");
    free(q0);
    free(q1);
  }
  free(pa);

  /* LengthGroupedSampler's order: learns too, same bits again. Sixty examples are one
  ** megabatch (50 x batch), sorted by length each epoch, so the batches change little
  ** from one epoch to the next and learning takes more of them. */
  {
    FinetuneOptions og = o;
    og.length_grouped = 1;
    og.epochs = 24;
    Rec r1, r2;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    float *p1 = NULL, *p2 = NULL;
    int a1 = run(&c, &og, &tr, &va, &r1, &p1, &np, &e), a2 = run(&c, &og, &tr, &va, &r2, &p2, &np, &e);
    check(a1 == FINETUNE_DONE && a2 == FINETUNE_DONE && r1.last_acc == 1.0 && !memcmp(p1, p2, np * sizeof(float)),
          "finetune_length_grouped", "rc %d/%d, accuracy %g (%s)", a1, a2, r1.last_acc, e.msg);
    free(p1);
    free(p2);
  }

  /* max_steps ends the schedule; should_stop stops at a step boundary. */
  FinetuneOptions o3 = o;
  o3.max_steps = 10;
  memset(&b, 0, sizeof b);
  rb = run(&c, &o3, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_DONE && b.steps == 10 && b.epochs == 2, "finetune_max_steps", "rc %d, %ld steps, %d epochs", rb,
        b.steps, b.epochs);
  free(pb);
  memset(&b, 0, sizeof b);
  b.stop_after = 3;
  rb = run(&c, &o, &tr, &va, &b, &pb, &np, &e);
  check(rb == FINETUNE_STOPPED && b.steps == 3, "finetune_stops_at_step_boundary", "rc %d after %ld steps", rb, b.steps);
  free(pb);

  /* Warm-up as transformers' get_warmup_steps: warmup_steps if > 0, else ceil(total x
  ** warmup_ratio): 0 steps (Trainer's default) takes the ratio, and so does -1. */
  {
    Model *m = model_new(&c, &e);
    model_init_weights(m, 5);
    long got[3], total = 0, given[3] = {0, -1, 5};
    for (int k = 0; k < 3; k++) {
      FinetuneOptions w = o;
      w.warmup_steps = given[k];
      w.warmup_ratio = 0.1;
      Finetune *f = finetune_new(m, &tr, &va, &w, &e);
      got[k] = f ? finetune_warmup_steps(f) : -2;
      if (f) total = finetune_total_steps(f);
      finetune_free(f);
    }
    long want = (long)ceil(0.1 * (double)total);
    check(total > 0 && want > 0 && got[0] == want && got[1] == want && got[2] == 5, "finetune_warmup_zero_takes_ratio",
          "total %ld: warm-up %ld / %ld / %ld for steps 0 / -1 / 5 with ratio 0.1, want %ld / %ld / 5 (%s)", total, got[0],
          got[1], got[2], want, want, e.msg);
    model_free(m);
  }

  /* Without validation: each epoch still reports its train loss. */
  memset(&b, 0, sizeof b);
  FinetuneOptions o4 = o;
  o4.epochs = 1;
  {
    Model *m = model_new(&c, &e);
    model_init_weights(m, 5);
    Finetune *f = finetune_new(m, &tr, NULL, &o4, &e);
    b.valid = &va;
    FinetuneCallbacks cb = {&b, on_step, NULL, NULL};
    int r = f ? finetune_run(f, &cb, &e) : -1;
    check(r == FINETUNE_DONE && b.steps == (NTRAIN + 7) / 8, "finetune_without_validation", "rc %d (%s)", r, e.msg);
    /* A set longer than the plan is refused; its own evaluation works with max_seq. */
    FinetuneEval ev;
    check(f && finetune_evaluate(f, &longer, &ev, &e) == -1 && e.kind == ERR_BAD_INPUT, "finetune_eval_refuses_longer_set",
          "%s", e.msg);
    finetune_free(f);
    o4.max_seq = longer.max_len;
    f = finetune_new(m, &tr, NULL, &o4, &e);
    int re = f ? finetune_evaluate(f, &longer, &ev, &e) : -1;
    check(re == 0 && ev.metrics.n == longer.n && ev.predictions && ev.epoch == -1 && isfinite(ev.loss),
          "finetune_eval_with_max_seq", "%s", e.msg);
    /* The epoch order is a permutation of the train set. */
    size_t order[NTRAIN], n = f ? finetune_epoch_order(f, 1, order) : 0;
    int seen[NTRAIN] = {0}, perm = n == NTRAIN;
    for (size_t i = 0; perm && i < n; i++) perm = order[i] < NTRAIN && !seen[order[i]]++;
    check(perm, "finetune_epoch_order", "%zu rows, not a permutation", n);
    finetune_free(f);
    model_free(m);
  }

  /* Evaluation does not depend on how the set is cut: eval_batch rows padded together and
  ** forwarded in pieces of the plan's rows give the predictions of one row at a time. */
  {
    Model *m = model_new(&c, &e);
    model_init_weights(m, 9);
    FinetuneOptions w = o;
    w.eval_batch = 20;   /* 20 rows padded together, forwarded as 8 + 8 + 4 */
    Finetune *f = finetune_new(m, &tr, &va, &w, &e);
    FinetuneEval ev;
    int32_t pred_big[NVALID];
    double loss_big = NAN;
    if (f && finetune_evaluate(f, &va, &ev, &e) == 0) {
      memcpy(pred_big, ev.predictions, sizeof pred_big);
      loss_big = ev.loss;
    }
    finetune_free(f);
    w.eval_batch = 1;
    f = finetune_new(m, &tr, &va, &w, &e);
    int same = f && finetune_evaluate(f, &va, &ev, &e) == 0 && !memcmp(pred_big, ev.predictions, sizeof pred_big) &&
               fabs(ev.loss - loss_big) < 1e-5;
    check(same, "finetune_eval_independent_of_batching", "loss %.9g vs %.9g (%s)", loss_big, f ? ev.loss : NAN, e.msg);
    finetune_free(f);
    model_free(m);
  }

  /* bf16 products (autocast): learns too, and is deterministic. */
  {
    FinetuneOptions ob = o;
    ob.precision = MODEL_BF16;
    Rec r1, r2;
    memset(&r1, 0, sizeof r1);
    memset(&r2, 0, sizeof r2);
    float *p1 = NULL, *p2 = NULL;
    int a1 = run(&c, &ob, &tr, &va, &r1, &p1, &np, &e), a2 = run(&c, &ob, &tr, &va, &r2, &p2, &np, &e);
    check(a1 == FINETUNE_DONE && a2 == FINETUNE_DONE && r1.last_acc == 1.0 && !memcmp(p1, p2, np * sizeof(float)),
          "finetune_bf16_learns_deterministically", "rc %d/%d, accuracy %g (%s)", a1, a2, r1.last_acc, e.msg);
    free(p1);
    free(p2);
  }

  /* Refusals: a masked LM, a label out of range, bad options. */
  {
    ModelConfig mlm = fixture_tiny(V);
    Model *m = model_new(&mlm, &e);
    check(finetune_new(m, &tr, &va, &o, &e) == NULL && e.kind == ERR_INVALID, "finetune_refuses_mlm", "%s", e.msg);
    model_free(m);
    m = model_new(&c, &e);
    model_init_weights(m, 5);
    va.labels[3] = CLASSES;
    check(finetune_new(m, &tr, &va, &o, &e) == NULL && e.kind == ERR_BAD_INPUT && strstr(e.msg, "validation"),
          "finetune_refuses_label_out_of_range", "%s", e.msg);
    va.labels[3] = 0;
    FinetuneOptions bad = o;
    bad.batch = 0;
    check(finetune_new(m, &tr, &va, &bad, &e) == NULL && e.kind == ERR_INVALID, "finetune_refuses_bad_options", "%s", e.msg);
    bad = o;
    bad.pad_id = V;
    check(finetune_new(m, &tr, &va, &bad, &e) == NULL && e.kind == ERR_INVALID, "finetune_refuses_bad_pad", "%s", e.msg);
    model_free(m);
  }
  /* Weights that stop being finite end the run with ERR_INVALID before an epoch's callback
  ** (the push) sees them: lr 1e300 overflows the first update; its gradient norm was finite,
  ** so one step is caught by the epoch's check of the weights, two by the second step's NaN. */
  for (long steps = 1; steps <= 2; steps++) {
    FinetuneOptions big = o;
    big.lr = 1e300;
    big.warmup_steps = 0;
    big.max_steps = steps;
    Rec d;
    memset(&d, 0, sizeof d);
    float *pd = NULL;
    Err de = {0};
    int rd = run(&c, &big, &tr, &va, &d, &pd, &np, &de);
    const char *want = steps == 1 ? "fine-tuning diverged by step 1: " : "fine-tuning diverged at step 2: loss nan";
    check(rd == -1 && de.kind == ERR_INVALID && d.epochs == 0 && d.steps == steps && strstr(de.msg, want),
          steps == 1 ? "finetune_diverged_weights_not_pushed_1_step" : "finetune_diverged_weights_not_pushed_2_steps",
          "rc %d, %d epochs seen, %ld steps: %s", rd, d.epochs, d.steps, de.msg);
    free(pd);
  }
  free_set(&tr);
  free_set(&va);
  free_set(&longer);
  return check_exit();
}
