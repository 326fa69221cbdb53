/* Parity with PyTorch: scripts/torch_reference.py builds the same tiny RoBERTa
** and BERT masked-LM models from torch's own modules and dumps weights, a padded
** batch, logits at every position, the loss, every gradient and the losses of 10
** AdamW steps. This test loads the same weights into maskd's model and compares:
** logits and loss within 1e-4 absolute, each gradient within 1e-3 of its
** tensor's largest magnitude, the 10 losses within 1e-4 (dropout off).
**
** usage: test_model_parity [DIR]   DIR holds roberta.safetensors and bert.safetensors;
** without DIR the dumps are generated into $MASKD_TMP/parity (or reused from
** there) by running /usr/bin/python3 scripts/torch_reference.py from the
** repository root. No torch means FAIL, never a silent skip. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/nn/config.h"
#include "engine/nn/model.h"
#include "engine/nn/optim.h"
#include "engine/io/safetensors.h"
#include "tests/unit/check.h"

static float *read_f32(const StFile *f, const char *name, int64_t numel, Err *err) {
  const StTensor *t = st_find(f, name);
  if (!t) { err_set(err, "no tensor %s in the dump", name); return NULL; }
  if (numel < 0) numel = t->numel;
  float *out = malloc((size_t)(numel ? numel : 1) * sizeof(float));
  if (st_read_f32(t, out, numel, err)) { free(out); return NULL; }
  return out;
}

static int32_t *read_i32(const StFile *f, const char *name, int64_t numel, Err *err) {
  const StTensor *t = st_find(f, name);
  if (!t) { err_set(err, "no tensor %s in the dump", name); return NULL; }
  int64_t *tmp = malloc((size_t)numel * sizeof(int64_t));
  if (st_read_i64(t, tmp, numel, err)) { free(tmp); return NULL; }
  int32_t *out = malloc((size_t)numel * sizeof(int32_t));
  for (int64_t i = 0; i < numel; i++) out[i] = (int32_t)tmp[i];
  free(tmp);
  return out;
}

static double jnum(json_t *o, const char *k, double dflt) {
  json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : dflt;
}

static void run_type(const char *dir, const char *type) {
  char path[1024], name[160];
  snprintf(path, sizeof path, "%s/%s.safetensors", dir, type);
  Err err = {0};
  StFile *f = st_open(path, &err);
  snprintf(name, sizeof name, "parity_%s_open", type);
  check(f != NULL, name, "%s", err.msg);
  if (!f) return;
  ModelConfig cfg;
  const char *cfg_text = st_metadata(f, "config"), *steps_text = st_metadata(f, "steps_config");
  snprintf(name, sizeof name, "parity_%s_config", type);
  int ok = cfg_text && steps_text && config_parse(cfg_text, &cfg, &err) == 0;
  check(ok, name, "config/steps_config metadata: %s", cfg_text && steps_text ? err.msg : "missing");
  if (!ok) { st_close(f); return; }
  Model *m = model_new(&cfg, &err);
  if (!m) { check(0, name, "model_new: %s", err.msg); st_close(f); return; }

  /* Weights, by HF name and shape. */
  int loaded = 1;
  for (int i = 0; i < model_tensor_count(m); i++) {
    const ModelTensor *mt = model_tensor(m, i);
    const StTensor *t = st_find(f, mt->name);
    int shape_ok = t && t->ndim == mt->ndim && t->shape[0] == mt->shape[0] && (mt->ndim == 1 || t->shape[1] == mt->shape[1]);
    if (!shape_ok || st_read_f32(t, model_params(m) + mt->offset, (int64_t)mt->numel, &err)) {
      printf("  %s: %s\n", mt->name, t ? (shape_ok ? err.msg : "shape differs") : "missing");
      loaded = 0;
    }
  }
  snprintf(name, sizeof name, "parity_%s_load_weights", type);
  check(loaded, name, "some tensors could not be loaded");
  const StTensor *tid = st_find(f, "input_ids");
  if (!loaded || !tid || tid->ndim != 2) { model_free(m); st_close(f); return; }
  int B = (int)tid->shape[0], T = (int)tid->shape[1], N = B * T, V = cfg.vocab_size;
  int32_t *ids = read_i32(f, "input_ids", N, &err), *mask = read_i32(f, "attention_mask", N, &err);
  int32_t *labels = read_i32(f, "labels", N, &err);
  float *ref_logits = read_f32(f, "logits", (int64_t)N * V, &err), *ref_loss = read_f32(f, "loss", -1, &err);
  float *ref_losses = read_f32(f, "adamw_losses", 10, &err);
  float *ref_norms = st_find(f, "adamw_grad_norms") ? read_f32(f, "adamw_grad_norms", 10, &err) : NULL;
  snprintf(name, sizeof name, "parity_%s_read_dump", type);
  ok = ids && mask && labels && ref_logits && ref_loss && ref_losses;
  check(ok, name, "%s", err.msg);
  ModelBatch batch = {B, T, ids, mask, NULL, labels};
  snprintf(name, sizeof name, "parity_%s_plan", type);
  if (ok) { ok = model_plan(m, B, T, N, 1, &err) == 0; check(ok, name, "%s", err.msg); }

  if (ok) {
    /* Logits at every position, padding included. */
    int32_t *pos = malloc((size_t)N * sizeof(int32_t));
    for (int i = 0; i < N; i++) pos[i] = i;
    float *logits = malloc((size_t)N * V * sizeof(float));
    int rc = model_logits_at(m, &batch, pos, N, logits, &err);
    double d = rc ? INFINITY : check_max_abs_diff(logits, ref_logits, (size_t)N * V);
    snprintf(name, sizeof name, "parity_%s_logits", type);
    check(d < 1e-4, name, "max |logit - torch| %.3g (rc %d %s)", d, rc, err.msg);
    printf("  %s logits: max diff %.2g (max |logit| %.2f)\n", type, d, check_max_abs(ref_logits, (size_t)N * V));
    free(pos); free(logits);

    /* Loss and gradients; torch's loss is the mean, so backward scales by 1/count. */
    ModelLoss ml;
    rc = model_forward(m, &batch, &ml, &err);
    double loss = rc || !ml.n_labels ? NAN : ml.loss_sum / ml.n_labels;
    snprintf(name, sizeof name, "parity_%s_loss", type);
    check(fabs(loss - ref_loss[0]) < 1e-4, name, "loss %.7f torch %.7f (rc %d %s)", loss, ref_loss[0], rc, err.msg);
    printf("  %s loss: %.7f torch %.7f (%d labels)\n", type, loss, ref_loss[0], ml.n_labels);
    model_zero_grad(m);
    model_backward(m, 1.0f / (float)ml.n_labels);
    /* A tensor whose gradient is zero in exact arithmetic (the attention key
    ** bias: softmax ignores a shift of all of a query's scores) holds only
    ** rounding noise in both programs; it is compared against 1e-3 of the
    ** largest gradient of the whole model instead of its own. */
    double gmax_all = 0;
    float **refg = calloc((size_t)model_tensor_count(m), sizeof(float *));
    for (int i = 0; i < model_tensor_count(m); i++) {
      const ModelTensor *mt = model_tensor(m, i);
      char gname[128];
      snprintf(gname, sizeof gname, "grad.%s", mt->name);
      refg[i] = read_f32(f, gname, (int64_t)mt->numel, &err);
      if (refg[i]) gmax_all = fmax(gmax_all, check_max_abs(refg[i], mt->numel));
    }
    int grads_ok = 1;
    double worst = 0;
    const char *worst_name = "";
    for (int i = 0; i < model_tensor_count(m); i++) {
      const ModelTensor *mt = model_tensor(m, i);
      if (!refg[i]) { printf("  grad.%s: missing\n", mt->name); grads_ok = 0; continue; }
      double gmax = check_max_abs(refg[i], mt->numel);
      double gd = check_max_abs_diff(model_grads(m) + mt->offset, refg[i], mt->numel);
      double scale = gmax < 1e-5 * gmax_all ? gmax_all : gmax;
      double rel = gd / scale;
      if (rel > worst) { worst = rel; worst_name = mt->name; }
      if (!(rel <= 1e-3)) {
        grads_ok = 0;
        printf("  grad.%s: max diff %.3g, max |torch| %.3g\n", mt->name, gd, gmax);
      }
      free(refg[i]);
    }
    free(refg);
    snprintf(name, sizeof name, "parity_%s_gradients", type);
    check(grads_ok, name, "worst %.3g of the tensor's max, in %s", worst, worst_name);
    printf("  %s gradients: worst difference %.2g of the tensor's max (%s)\n", type, worst, worst_name);

    /* Ten AdamW steps on the same batch with the dump's schedule, decay and clipping. */
    json_t *sj = json_loads(steps_text, 0, NULL);
    AdamWConfig oc = adamw_defaults();
    oc.lr = jnum(sj, "lr", oc.lr);
    oc.weight_decay = jnum(sj, "weight_decay", 0);
    oc.warmup_steps = (long)jnum(sj, "warmup_steps", 0);
    oc.total_steps = (long)jnum(sj, "total_steps", 10);
    oc.clip_norm = jnum(sj, "clip_norm", 0);
    oc.beta1 = jnum(sj, "beta1", 0.9);
    oc.beta2 = jnum(sj, "beta2", 0.999);
    oc.eps = jnum(sj, "eps", 1e-8);
    oc.min_lr_ratio = jnum(sj, "min_lr_ratio", 0);
    json_decref(sj);
    int nt = model_tensor_count(m);
    AdamWSegment *segs = malloc((size_t)nt * sizeof *segs);
    for (int i = 0; i < nt; i++) {
      const ModelTensor *mt = model_tensor(m, i);
      segs[i] = (AdamWSegment){mt->offset, mt->numel, mt->decay};
    }
    AdamW *opt = adamw_new(&oc, model_num_params(m), segs, nt, &err);
    free(segs);
    double dl = 0, dn = 0;
    int steps_ok = opt != NULL;
    for (int s = 0; s < 10 && steps_ok; s++) {
      if (model_forward(m, &batch, &ml, &err)) { steps_ok = 0; break; }
      double l = ml.loss_sum / ml.n_labels;
      dl = fmax(dl, fabs(l - ref_losses[s]));
      printf("  %s step %d: loss %.6f torch %.6f\n", type, s, l, ref_losses[s]);
      model_zero_grad(m);
      model_backward(m, 1.0f / (float)ml.n_labels);
      double norm = adamw_step(opt, model_params(m), model_grads(m));
      if (ref_norms) dn = fmax(dn, fabs(norm - ref_norms[s]) / ref_norms[s]);
    }
    snprintf(name, sizeof name, "parity_%s_adamw_10_losses", type);
    check(steps_ok && dl < 1e-4, name, "max |loss - torch| over 10 steps %.3g (%s)", dl, steps_ok ? "" : err.msg);
    if (ref_norms) {
      snprintf(name, sizeof name, "parity_%s_adamw_grad_norms", type);
      check(steps_ok && dn < 1e-4, name, "max relative gradient-norm difference %.3g", dn);
    }
    adamw_free(opt);
  }
  free(ids); free(mask); free(labels); free(ref_logits); free(ref_loss); free(ref_losses); free(ref_norms);
  model_free(m);
  st_close(f);
}

static int exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

int main(int argc, char **argv) {
  char dir[900];
  if (argc > 1) {
    snprintf(dir, sizeof dir, "%s", argv[1]);
  } else {
    const char *tmp = getenv("MASKD_TMP");
    snprintf(dir, sizeof dir, "%s/parity", tmp && *tmp ? tmp : "/tmp");
    char a[1000], b[1000];
    snprintf(a, sizeof a, "%s/roberta.safetensors", dir);
    snprintf(b, sizeof b, "%s/bert.safetensors", dir);
    if (!exists(a) || !exists(b)) {
      /* The generator needs Debian's python3-torch; its absence is a failure. */
      char cmd[2048];
      snprintf(cmd, sizeof cmd, "/usr/bin/python3 scripts/torch_reference.py '%s' >/dev/null", dir);
      int rc = system(cmd);
      check(rc == 0 && exists(a) && exists(b), "parity_torch_reference_generated",
            "'%s' failed (status %d): is python3-torch installed (scripts/setup) and is the test run from the "
            "repository root?", cmd, rc);
      if (rc != 0) return check_exit();
    }
  }
  run_type(dir, "roberta");
  run_type(dir, "bert");
  return check_exit();
}
