/* Sequence-classifier parity with PyTorch (issue 16): scripts/torch_cls_reference.py
** builds a tiny RobertaForSequenceClassification and BertForSequenceClassification
** from torch's own modules (scripts/torch_cls.py) and dumps weights, a batch padded to
** its longest row (rows of 12, 7, 2, 9 and 5 real tokens, one row labelled -100, BERT
** token types), the logits of every row, the loss, every gradient and the losses of 10
** AdamW steps. This test reads the config from the dump's metadata (config_parse:
** architectures, id2label), loads the weights by HF name into maskd's model, and
** compares, dropout off:
**   - the config: a classifier of 5 classes named as id2label, single-label;
**   - the tensors: the dump's parameters and the model's are the same names;
**   - logits of every row from model_classify, in an inference plan and in a training
**     plan, and from a narrower batch of 4 of the rows (padding width must not matter);
**   - model_forward's loss (mean over the 4 labelled rows), its label and correct
**     counts, model_class_scores (the logits of the labelled rows in an inference plan,
**     their softmax in a training plan);
**   - every gradient after model_backward(m, 1 / n_labels);
**   - the losses and gradient norms of 10 AdamW steps (parity_common.h's set-up from
**     the dump's steps_config, as test_model_parity.c).
** Tolerance, the issue's: |maskd - torch| <= 1e-4 + 1e-3 |torch| for every logit, the
** loss, every gradient element and each step's loss; gradients are also held, as in
** test_model_parity.c, to 1e-3 of their tensor's largest magnitude (of the model's for
** a tensor whose gradient is zero in exact arithmetic: the attention key bias).
** torch's float32 and float64 runs agree to 2e-7 on these dumps (--check).
**
** usage: test_model_cls_parity [DIR]   DIR holds roberta_cls.safetensors and
** bert_cls.safetensors; without DIR they are generated into $MASKD_TMP/parity (or
** reused from there) by /usr/bin/python3 scripts/torch_cls_reference.py, run from the
** repository root. No torch means FAIL, never a silent skip. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/io/safetensors.h"
#include "engine/nn/config.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"
#include "tests/unit/check.h"
#include "tests/unit/parity_common.h"

#define ATOL 1e-4
#define RTOL 1e-3

/* How close n values are to torch's: the largest |a - r|, and the largest
** |a - r| / (ATOL + RTOL |r|) (<= 1: within the tolerance). */
typedef struct Close {
  double max_abs, worst;
} Close;

static Close closeness(const float *a, const float *r, size_t n) {
  Close c = {0, 0};
  for (size_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - (double)r[i]);
    if (d != d) d = INFINITY;
    c.max_abs = fmax(c.max_abs, d);
    c.worst = fmax(c.worst, d / (ATOL + RTOL * fabs((double)r[i])));
  }
  return c;
}

/* A dump's batch and reference values. */
typedef struct Dump {
  int B, T, C;
  int32_t *ids, *mask, *types, *labels;
  float *logits, *loss, *losses, *norms;
} Dump;

static void dump_free(Dump *d) {
  free(d->ids); free(d->mask); free(d->types); free(d->labels);
  free(d->logits); free(d->loss); free(d->losses); free(d->norms);
}

/* The names of the dump's parameter tensors: all but the batch, the results and grad.*. */
static int is_param_name(const char *n) {
  static const char *const other[] = {"input_ids", "attention_mask", "token_type_ids", "labels", "logits", "loss",
                                      "adamw_losses", "adamw_grad_norms"};
  for (size_t i = 0; i < sizeof other / sizeof *other; i++)
    if (!strcmp(n, other[i])) return 0;
  return strncmp(n, "grad.", 5) != 0;
}

/* The config read from the dump against the JSON it came from. */
static int check_config(const char *type, const ModelConfig *cfg, const char *cfg_text, int C) {
  char name[160];
  json_t *j = json_loads(cfg_text, 0, NULL);
  json_t *id2label = json_object_get(j, "id2label");
  int labels_ok = json_is_object(id2label) && (int)json_object_size(id2label) == C;
  for (int i = 0; labels_ok && i < C; i++) {
    char key[16];
    snprintf(key, sizeof key, "%d", i);
    const char *want = json_string_value(json_object_get(id2label, key)), *got = config_label(cfg, i);
    labels_ok = want && got && !strcmp(want, got);
    if (!labels_ok) printf("  class %d: config_label %s, id2label %s\n", i, got ? got : "NULL", want ? want : "NULL");
  }
  json_decref(j);
  snprintf(name, sizeof name, "cls_parity_%s_config_is_classifier", type);
  int ok = cfg->task == MODEL_TASK_SEQ_CLS && cfg->num_labels == C && cfg->problem_type == MODEL_SINGLE_LABEL &&
           labels_ok && !strcmp(config_architecture(cfg), cfg->model_type == MODEL_ROBERTA
                                                              ? "RobertaForSequenceClassification"
                                                              : "BertForSequenceClassification");
  check(ok, name, "task %d, num_labels %d (dump: %d classes), problem_type %d, labels %s, architecture %s", cfg->task,
        cfg->num_labels, C, cfg->problem_type, labels_ok ? "as id2label" : "differ", config_architecture(cfg));
  return ok;
}

/* model_classify on every row, and on rows [1, B) cut to their own longest row. */
static void check_classify(const char *type, const char *plan, Model *m, const Dump *d) {
  char name[160];
  Err err = {0};
  int B = d->B, T = d->T, C = d->C;
  ModelBatch batch = {B, T, d->ids, d->mask, d->types, NULL};
  float *logits = malloc((size_t)B * C * sizeof(float));
  int rc = model_classify(m, &batch, logits, &err);
  Close c = closeness(logits, d->logits, (size_t)B * C);
  snprintf(name, sizeof name, "cls_parity_%s_%s_classify_logits", type, plan);
  check(rc == 0 && c.worst <= 1, name, "max |logit - torch| %.3g, %.3g of the tolerance (%s)", c.max_abs, c.worst,
        rc ? err.msg : "");
  printf("  %s %s plan: logits of %d rows: max diff %.2g (max |logit| %.2f)\n", type, plan, B, c.max_abs,
         check_max_abs(d->logits, (size_t)B * C));

  /* Rows 1.. alone, as wide as their longest: the same logits (padding takes no part). */
  int rows = B - 1, seq = 0;
  for (int b = 1; b < B; b++) {
    int n = 0;
    for (int t = 0; t < T; t++) n += d->mask[b * T + t] != 0;
    if (n > seq) seq = n;
  }
  int32_t *ids = malloc((size_t)rows * seq * sizeof(int32_t)), *mask = malloc((size_t)rows * seq * sizeof(int32_t));
  int32_t *types = malloc((size_t)rows * seq * sizeof(int32_t));
  for (int b = 0; b < rows; b++)
    for (int t = 0; t < seq; t++) {
      ids[b * seq + t] = d->ids[(b + 1) * T + t];
      mask[b * seq + t] = d->mask[(b + 1) * T + t];
      types[b * seq + t] = d->types[(b + 1) * T + t];
    }
  ModelBatch narrow = {rows, seq, ids, mask, types, NULL};
  rc = model_classify(m, &narrow, logits, &err);
  c = closeness(logits, d->logits + C, (size_t)rows * C);
  snprintf(name, sizeof name, "cls_parity_%s_%s_classify_narrower_batch", type, plan);
  check(rc == 0 && c.worst <= 1, name, "rows 1..%d at width %d: max |logit - torch| %.3g (%s)", B - 1, seq, c.max_abs,
        rc ? err.msg : "");
  free(ids); free(mask); free(types); free(logits);
}

/* model_forward's loss, counts and scores; training: scores are the softmax. */
static int check_forward(const char *type, const char *plan, Model *m, const Dump *d, int training, ModelLoss *ml) {
  char name[160];
  Err err = {0};
  int B = d->B, C = d->C;
  ModelBatch batch = {B, d->T, d->ids, d->mask, d->types, d->labels};
  int rc = model_forward(m, &batch, ml, &err);
  int n_labels = 0, n_correct = 0;
  float *want = malloc((size_t)B * C * sizeof(float));
  for (int b = 0; b < B; b++) {
    if (d->labels[b] == MODEL_IGNORE_LABEL) continue;
    const float *l = d->logits + (size_t)b * C;
    float *w = want + (size_t)n_labels * C;
    int arg = 0;
    double mx = l[0], z = 0;
    for (int k = 1; k < C; k++)
      if (l[k] > l[arg]) { arg = k; mx = l[k]; }
    for (int k = 0; k < C; k++) z += exp((double)l[k] - mx);
    for (int k = 0; k < C; k++) w[k] = training ? (float)(exp((double)l[k] - mx) / z) : l[k];
    n_correct += arg == d->labels[b];
    n_labels++;
  }
  double loss = rc == 0 && ml->n_labels ? ml->loss_sum / ml->n_labels : NAN;
  double dl = fabs(loss - d->loss[0]);
  snprintf(name, sizeof name, "cls_parity_%s_%s_forward_loss", type, plan);
  check(rc == 0 && ml->n_labels == n_labels && dl <= ATOL + RTOL * fabs(d->loss[0]), name,
        "loss %.7f torch %.7f over %d rows (torch: %d) (%s)", loss, d->loss[0], rc ? -1 : ml->n_labels, n_labels,
        rc ? err.msg : "");
  printf("  %s %s plan: loss %.7f torch %.7f (diff %.2g), %d labelled rows, %d correct\n", type, plan, loss,
         d->loss[0], dl, rc ? -1 : ml->n_labels, rc ? -1 : ml->n_correct);
  snprintf(name, sizeof name, "cls_parity_%s_%s_forward_correct", type, plan);
  check(rc == 0 && ml->n_correct == n_correct, name, "n_correct %d, torch's argmax %d", rc ? -1 : ml->n_correct,
        n_correct);
  const float *scores = rc == 0 ? model_class_scores(m) : NULL;
  Close c = scores ? closeness(scores, want, (size_t)n_labels * C) : (Close){INFINITY, INFINITY};
  snprintf(name, sizeof name, "cls_parity_%s_%s_class_scores", type, plan);
  check(scores && c.worst <= 1, name, "%s of the labelled rows: max diff %.3g%s", training ? "softmax" : "logits",
        c.max_abs, scores ? "" : " (model_class_scores is NULL)");
  free(want);
  return rc;
}

/* Gradients against torch's: per element within ATOL + RTOL |g|, and per tensor within
** 1e-3 of the tensor's largest (of the model's largest for a zero tensor). */
static void check_gradients(const char *type, Model *m, float *const *refg) {
  char name[160];
  double gmax_all = 0, worst_close = 0, worst_rel = 0, max_abs = 0;
  const char *worst_close_name = "", *worst_rel_name = "";
  int nt = model_tensor_count(m);
  for (int i = 0; i < nt; i++) gmax_all = fmax(gmax_all, check_max_abs(refg[i], model_tensor(m, i)->numel));
  int head_nonzero = 1;
  for (int i = 0; i < nt; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    const float *g = model_grads(m) + mt->offset;
    Close c = closeness(g, refg[i], mt->numel);
    double gmax = check_max_abs(refg[i], mt->numel);
    double rel = c.max_abs / (gmax < 1e-5 * gmax_all ? gmax_all : gmax);
    max_abs = fmax(max_abs, c.max_abs);
    if (c.worst > worst_close || c.worst != c.worst) { worst_close = c.worst; worst_close_name = mt->name; }
    if (rel > worst_rel || rel != rel) { worst_rel = rel; worst_rel_name = mt->name; }
    if (!strncmp(mt->name, "classifier.", 11) || strstr(mt->name, "pooler"))
      head_nonzero &= check_max_abs(g, mt->numel) > 0;
  }
  snprintf(name, sizeof name, "cls_parity_%s_gradients", type);
  check(worst_close <= 1 && worst_rel <= 1e-3, name,
        "worst %.3g of the tolerance (%s); worst %.3g of the tensor's max (%s); max abs diff %.3g", worst_close,
        worst_close_name, worst_rel, worst_rel_name, max_abs);
  snprintf(name, sizeof name, "cls_parity_%s_head_gradients_nonzero", type);
  check(head_nonzero, name, "a classifier-head tensor has an all-zero gradient");
  printf("  %s gradients (%d tensors): max abs diff %.2g (largest gradient %.2g); worst %.2g of the tolerance (%s), "
         "%.2g of the tensor's max (%s)\n", type, nt, max_abs, gmax_all, worst_close, worst_close_name, worst_rel,
         worst_rel_name);
}

static void run_type(const char *dir, const char *type) {
  char path[1024], name[160];
  snprintf(path, sizeof path, "%s/%s.safetensors", dir, type);
  Err err = {0};
  StFile *f = st_open(path, &err);
  snprintf(name, sizeof name, "cls_parity_%s_open", type);
  check(f != NULL, name, "%s", err.msg);
  if (!f) return;
  const char *cfg_text = st_metadata(f, "config"), *steps_text = st_metadata(f, "steps_config");
  const StTensor *tid = st_find(f, "input_ids"), *tlog = st_find(f, "logits");
  ModelConfig cfg;
  snprintf(name, sizeof name, "cls_parity_%s_config", type);
  int ok = cfg_text && steps_text && tid && tid->ndim == 2 && tlog && tlog->ndim == 2 &&
           config_parse(cfg_text, &cfg, &err) == 0;
  check(ok, name, "config/steps_config metadata, input_ids, logits: %s",
        cfg_text && steps_text && tid && tlog ? err.msg : "missing");
  if (!ok) { st_close(f); return; }
  Dump d = {0};
  d.B = (int)tid->shape[0];
  d.T = (int)tid->shape[1];
  d.C = (int)tlog->shape[1];
  int B = d.B, N = d.B * d.T;
  if (!check_config(type, &cfg, cfg_text, d.C)) { st_close(f); return; }

  /* Two models from the dump's weights: one planned for inference, one for training. */
  Model *mi = model_new(&cfg, &err), *m = mi ? model_new(&cfg, &err) : NULL;
  snprintf(name, sizeof name, "cls_parity_%s_load_weights", type);
  if (!m) { check(0, name, "model_new: %s", err.msg); model_free(mi); st_close(f); return; }
  int loaded = parity_load_weights(mi, f) && parity_load_weights(m, f);
  check(loaded, name, "some tensors could not be loaded");
  int n_params = 0, unknown = 0;
  for (int i = 0; i < st_count(f); i++) {
    const char *tn = st_tensor(f, i)->name;
    if (!is_param_name(tn)) continue;
    n_params++;
    if (!model_tensor_by_name(m, tn)) { printf("  %s: in the dump, not in the model\n", tn); unknown++; }
  }
  snprintf(name, sizeof name, "cls_parity_%s_same_tensor_names", type);
  check(!unknown && n_params == model_tensor_count(m), name, "dump %d parameters (%d unknown), model %d", n_params,
        unknown, model_tensor_count(m));

  d.ids = parity_read_i32(f, "input_ids", N, &err);
  d.mask = parity_read_i32(f, "attention_mask", N, &err);
  d.types = st_find(f, "token_type_ids") ? parity_read_i32(f, "token_type_ids", N, &err) : calloc((size_t)N, 4);
  d.labels = parity_read_i32(f, "labels", B, &err);
  d.logits = parity_read_f32(f, "logits", (int64_t)B * d.C, &err);
  d.loss = parity_read_f32(f, "loss", 1, &err);
  d.losses = parity_read_f32(f, "adamw_losses", 10, &err);
  d.norms = parity_read_f32(f, "adamw_grad_norms", 10, &err);
  int nt = model_tensor_count(m);
  float **refg = calloc((size_t)nt, sizeof(float *));
  ok = loaded && d.ids && d.mask && d.types && d.labels && d.logits && d.loss && d.losses && d.norms;
  for (int i = 0; ok && i < nt; i++) {
    char gname[128];
    snprintf(gname, sizeof gname, "grad.%s", model_tensor(m, i)->name);
    refg[i] = parity_read_f32(f, gname, (int64_t)model_tensor(m, i)->numel, &err);
    if (!refg[i]) { printf("  %s: missing\n", gname); ok = 0; }
  }
  snprintf(name, sizeof name, "cls_parity_%s_read_dump", type);
  check(ok, name, "%s", err.msg);

  /* Inference plan: logits of every row, the loss, scores = logits. */
  snprintf(name, sizeof name, "cls_parity_%s_plan", type);
  if (ok) {
    ok = model_plan(mi, B, d.T, B, 0, &err) == 0 && model_plan(m, B, d.T, B, 1, &err) == 0;
    check(ok, name, "%s", err.msg);
  }
  ModelLoss ml;
  if (ok) {
    check_classify(type, "inference", mi, &d);
    check_forward(type, "inference", mi, &d, 0, &ml);
    /* Training plan: the same, then the gradients. */
    check_classify(type, "training", m, &d);
    if (check_forward(type, "training", m, &d, 1, &ml) == 0 && ml.n_labels > 0) {
      model_zero_grad(m);
      model_backward(m, 1.0f / (float)ml.n_labels);
      check_gradients(type, m, refg);
    }

    /* Ten AdamW steps on the same batch with the dump's schedule, decay and clipping. */
    AdamWConfig oc = parity_adamw_config(steps_text);
    AdamW *opt = parity_adamw_new(m, &oc, &err);
    ModelBatch batch = {B, d.T, d.ids, d.mask, d.types, d.labels};
    double dl = 0, dn = 0, worst = 0;
    int steps_ok = opt != NULL;
    for (int s = 0; s < 10 && steps_ok; s++) {
      if (model_forward(m, &batch, &ml, &err) || !ml.n_labels) { steps_ok = 0; break; }
      double l = ml.loss_sum / ml.n_labels;
      dl = fmax(dl, fabs(l - d.losses[s]));
      worst = fmax(worst, fabs(l - d.losses[s]) / (ATOL + RTOL * fabs(d.losses[s])));
      printf("  %s step %d: loss %.6f torch %.6f\n", type, s, l, d.losses[s]);
      model_zero_grad(m);
      model_backward(m, 1.0f / (float)ml.n_labels);
      double norm = adamw_step(opt, model_params(m), model_grads(m));
      dn = fmax(dn, fabs(norm - d.norms[s]) / d.norms[s]);
    }
    printf("  %s 10 steps: max loss diff %.2g, max relative grad-norm diff %.2g\n", type, dl, dn);
    snprintf(name, sizeof name, "cls_parity_%s_adamw_10_losses", type);
    check(steps_ok && worst <= 1, name, "max |loss - torch| over 10 steps %.3g (%s)", dl, steps_ok ? "" : err.msg);
    snprintf(name, sizeof name, "cls_parity_%s_adamw_grad_norms", type);
    check(steps_ok && dn < RTOL, name, "max relative gradient-norm difference %.3g", dn);
    adamw_free(opt);
  }
  for (int i = 0; i < nt; i++) free(refg[i]);
  free(refg);
  dump_free(&d);
  model_free(m);
  model_free(mi);
  st_close(f);
}

int main(int argc, char **argv) {
  char dir[900];
  parity_dir(argc, argv, dir, sizeof dir);
  if (argc <= 1 && parity_generate(dir, "scripts/torch_cls_reference.py", "roberta_cls", "bert_cls",
                                   "cls_parity_torch_reference_generated"))
    return check_exit();
  run_type(dir, "roberta_cls");
  run_type(dir, "bert_cls");
  return check_exit();
}
