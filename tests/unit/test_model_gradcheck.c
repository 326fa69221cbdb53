/* The whole tiny model against an independent double-precision reference
** written here from the HF definition (RobertaForMaskedLM / BertForMaskedLM):
** the float forward must match the reference's logits and loss, and the float
** backward must match central finite differences of the reference, for every
** parameter, for both model types, with and without dropout.
**
** Tolerances. The reference runs in double and differentiates with h = 1e-5,
** so its own error is ~h^2 |f'''| + 1e-16/h, below 1e-9 here. The float model
** carries float32 rounding (6e-8 relative per operation) through ~20 chained
** operations whose LayerNorms amplify relative error by at most ~10, so its
** values and gradients agree to ~1e-5 relative; 1e-4 (values) and 1e-3 of the
** tensor's largest gradient (gradients) leave a margin while any real mistake
** (a missing term, a wrong index, a transposed matrix) is O(1) relative. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/layers.h"
#include "engine/nn/model.h"
#include "engine/core/rng.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

enum { B = 3, T = 6 };

typedef struct Ref {
  const Model *m;
  const ModelConfig *c;
  const double *p;        /* parameters being differentiated */
  const double *frozen;   /* unperturbed copy: padding rows of the lookups read it (no gradient) */
  const int32_t *ids, *mask, *types, *labels;
  int drop;               /* dropout on, with the model's site convention */
  uint64_t seed;
  double smoothing;       /* label smoothing of the loss (torch's CrossEntropyLoss(label_smoothing=)) */
} Ref;

/* One row's loss as torch's CrossEntropyLoss(label_smoothing=s) defines it: (1-s) times
** the label's -log p plus s/v times the sum over the v classes of -log p. */
static double row_loss(const double *lg, int v, int lab, double smoothing) {
  double mx = lg[0], s = 0, all = 0;
  for (int j = 1; j < v; j++) mx = lg[j] > mx ? lg[j] : mx;
  for (int j = 0; j < v; j++) s += exp(lg[j] - mx);
  double lse = log(s) + mx;
  for (int j = 0; j < v; j++) all += lse - lg[j];
  return (1 - smoothing) * (lse - lg[lab]) + smoothing / v * all;
}

static const double *P(const Ref *r, const char *fmt, int layer, const double *base) {
  char name[128], full[160];
  snprintf(name, sizeof name, fmt, layer);
  snprintf(full, sizeof full, "%s%s", r->c->model_type == MODEL_ROBERTA ? "roberta." : "bert.", name);
  int own = !strncmp(name, "lm_head", 7) || !strncmp(name, "cls.", 4) || !strncmp(name, "classifier", 10);
  const ModelTensor *t = model_tensor_by_name(r->m, own ? name : full);
  if (!t) { fprintf(stderr, "no tensor %s\n", full); exit(2); }
  return base + t->offset;
}

static void linear(double *out, const double *in, const double *w, const double *b, int n, int k, int o) {
  for (int r = 0; r < n; r++)
    for (int j = 0; j < o; j++) {
      double s = b[j];
      for (int i = 0; i < k; i++) s += in[r * k + i] * w[j * k + i];
      out[r * o + j] = s;
    }
}

static void layernorm(double *x, const double *w, const double *b, int n, int c, double eps) {
  for (int r = 0; r < n; r++) {
    double mu = 0, var = 0;
    for (int i = 0; i < c; i++) mu += x[r * c + i];
    mu /= c;
    for (int i = 0; i < c; i++) var += (x[r * c + i] - mu) * (x[r * c + i] - mu);
    var /= c;
    for (int i = 0; i < c; i++) x[r * c + i] = (x[r * c + i] - mu) / sqrt(var + eps) * w[i] + b[i];
  }
}

static double gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

static double keep(const Ref *r, int site, double p, size_t i) {
  if (!r->drop || p <= 0) return 1;
  LayerDropout d = {(float)p, r->seed, (uint64_t)site, NULL, 0};
  return layer_dropout_keep(&d, i) ? 1.0 / (1.0 - (double)(float)p) : 0.0;
}

/* The classifier head (HF's RobertaClassificationHead, or BERT's pooler and
** classifier) on each row's first token of the encoder output x (B*T, H): the
** summed loss over labelled rows; logits (B, C) of every row when asked. The
** head's dropout index counts labelled rows, as the model's (M, H) buffer does. */
static double cls_ref_head(const Ref *r, const double *x, double *logits_all) {
  const ModelConfig *c = r->c;
  int H = c->hidden_size, C = c->num_labels, L = c->num_hidden_layers, rob = c->model_type == MODEL_ROBERTA;
  double p = c->classifier_dropout >= 0 ? c->classifier_dropout : c->hidden_dropout_prob;
  const double *dw = P(r, rob ? "classifier.dense.weight" : "pooler.dense.weight", 0, r->p);
  const double *db = P(r, rob ? "classifier.dense.bias" : "pooler.dense.bias", 0, r->p);
  const double *ow = P(r, rob ? "classifier.out_proj.weight" : "classifier.weight", 0, r->p);
  const double *ob = P(r, rob ? "classifier.out_proj.bias" : "classifier.bias", 0, r->p);
  double in[64], hh[64], lg[64], loss = 0;
  int mi = 0;
  for (int b = 0; b < B; b++) {
    int lab = r->labels ? r->labels[b] : MODEL_IGNORE_LABEL;
    if (lab == MODEL_IGNORE_LABEL && !logits_all) continue;
    for (int j = 0; j < H; j++) in[j] = x[(size_t)b * T * H + j] * (rob ? keep(r, 3 * L + 1, p, (size_t)mi * H + j) : 1);
    linear(hh, in, dw, db, 1, H, H);
    for (int j = 0; j < H; j++) hh[j] = tanh(hh[j]) * keep(r, 3 * L + 2, p, (size_t)mi * H + j);
    linear(lg, hh, ow, ob, 1, H, C);
    if (logits_all) memcpy(logits_all + (size_t)b * C, lg, (size_t)C * sizeof(double));
    if (lab == MODEL_IGNORE_LABEL) continue;
    loss += row_loss(lg, C, lab, r->smoothing);
    mi++;
  }
  return loss;
}

/* Returns the summed loss over labelled positions; logits (B*T, V) when asked. */
static double ref_forward(const Ref *r, double *logits_all) {
  const ModelConfig *c = r->c;
  int H = c->hidden_size, A = c->num_attention_heads, I = c->intermediate_size, V = c->vocab_size, N = B * T;
  int d = H / A, pad = c->pad_token_id, rob = c->model_type == MODEL_ROBERTA;
  double eps = c->layer_norm_eps;
  double *x = calloc((size_t)N * H, sizeof(double)), *q = calloc((size_t)N * H, sizeof(double));
  double *k = calloc((size_t)N * H, sizeof(double)), *v = calloc((size_t)N * H, sizeof(double));
  double *ctx = calloc((size_t)N * H, sizeof(double)), *t1 = calloc((size_t)N * H, sizeof(double));
  double *f = calloc((size_t)N * I, sizeof(double)), *hh = calloc((size_t)H, sizeof(double));
  double *h2 = calloc((size_t)H, sizeof(double)), *lg = calloc((size_t)V, sizeof(double));
  const double *wte = P(r, "embeddings.word_embeddings.weight", 0, r->p);
  const double *wte_frozen = P(r, "embeddings.word_embeddings.weight", 0, r->frozen);
  const double *wpe = P(r, "embeddings.position_embeddings.weight", 0, r->p);
  const double *wpe_frozen = P(r, "embeddings.position_embeddings.weight", 0, r->frozen);
  const double *tte = P(r, "embeddings.token_type_embeddings.weight", 0, r->p);
  for (int b = 0; b < B; b++) {
    int count = 0;
    for (int t = 0; t < T; t++) {
      int i = b * T + t, id = r->ids[i];
      int pos = t;
      if (rob) { count += id != pad; pos = id != pad ? count + pad : pad; }
      const double *we = (id == pad ? wte_frozen : wte) + (size_t)id * H;
      const double *pe = (rob && pos == pad ? wpe_frozen : wpe) + (size_t)pos * H;
      const double *te = tte + (size_t)(r->types ? r->types[i] : 0) * H;
      for (int j = 0; j < H; j++) x[i * H + j] = we[j] + te[j] + pe[j];
    }
  }
  layernorm(x, P(r, "embeddings.LayerNorm.weight", 0, r->p), P(r, "embeddings.LayerNorm.bias", 0, r->p), N, H, eps);
  for (int i = 0; i < N * H; i++) x[i] *= keep(r, 0, c->hidden_dropout_prob, (size_t)i);
  for (int l = 0; l < c->num_hidden_layers; l++) {
    linear(q, x, P(r, "encoder.layer.%d.attention.self.query.weight", l, r->p),
           P(r, "encoder.layer.%d.attention.self.query.bias", l, r->p), N, H, H);
    linear(k, x, P(r, "encoder.layer.%d.attention.self.key.weight", l, r->p),
           P(r, "encoder.layer.%d.attention.self.key.bias", l, r->p), N, H, H);
    linear(v, x, P(r, "encoder.layer.%d.attention.self.value.weight", l, r->p),
           P(r, "encoder.layer.%d.attention.self.value.bias", l, r->p), N, H, H);
    for (int b = 0; b < B; b++)
      for (int h = 0; h < A; h++)
        for (int tq = 0; tq < T; tq++) {
          double s[T], mx = -INFINITY, sum = 0;
          for (int tk = 0; tk < T; tk++) {
            double dot = 0;
            for (int j = 0; j < d; j++) dot += q[(b * T + tq) * H + h * d + j] * k[(b * T + tk) * H + h * d + j];
            /* A padding key scores the float32 minimum, as HF's (1 - mask) * finfo.min does once rounded. */
            s[tk] = r->mask && !r->mask[b * T + tk] ? -(double)FLT_MAX : dot / sqrt((double)d);
            mx = s[tk] > mx ? s[tk] : mx;
          }
          for (int tk = 0; tk < T; tk++) { s[tk] = exp(s[tk] - mx); sum += s[tk]; }
          for (int j = 0; j < d; j++) {
            double acc = 0;
            for (int tk = 0; tk < T; tk++) {
              size_t di = (((size_t)b * A + h) * T + tq) * T + tk;
              acc += s[tk] / sum * keep(r, 1 + 3 * l, c->attention_probs_dropout_prob, di) * v[(b * T + tk) * H + h * d + j];
            }
            ctx[(b * T + tq) * H + h * d + j] = acc;
          }
        }
    linear(t1, ctx, P(r, "encoder.layer.%d.attention.output.dense.weight", l, r->p),
           P(r, "encoder.layer.%d.attention.output.dense.bias", l, r->p), N, H, H);
    for (int i = 0; i < N * H; i++) x[i] += t1[i] * keep(r, 2 + 3 * l, c->hidden_dropout_prob, (size_t)i);
    layernorm(x, P(r, "encoder.layer.%d.attention.output.LayerNorm.weight", l, r->p),
              P(r, "encoder.layer.%d.attention.output.LayerNorm.bias", l, r->p), N, H, eps);
    linear(f, x, P(r, "encoder.layer.%d.intermediate.dense.weight", l, r->p),
           P(r, "encoder.layer.%d.intermediate.dense.bias", l, r->p), N, H, I);
    for (int i = 0; i < N * I; i++) f[i] = gelu(f[i]);
    linear(t1, f, P(r, "encoder.layer.%d.output.dense.weight", l, r->p),
           P(r, "encoder.layer.%d.output.dense.bias", l, r->p), N, I, H);
    for (int i = 0; i < N * H; i++) x[i] += t1[i] * keep(r, 3 + 3 * l, c->hidden_dropout_prob, (size_t)i);
    layernorm(x, P(r, "encoder.layer.%d.output.LayerNorm.weight", l, r->p),
              P(r, "encoder.layer.%d.output.LayerNorm.bias", l, r->p), N, H, eps);
  }
  if (c->task == MODEL_TASK_SEQ_CLS) {
    double loss = cls_ref_head(r, x, logits_all);
    free(x); free(q); free(k); free(v); free(ctx); free(t1); free(f); free(hh); free(h2); free(lg);
    return loss;
  }
  const char *hn[5] = {"lm_head.dense.weight", "lm_head.dense.bias", "lm_head.layer_norm.weight",
                       "lm_head.layer_norm.bias", "lm_head.bias"};
  const char *hb[5] = {"cls.predictions.transform.dense.weight", "cls.predictions.transform.dense.bias",
                       "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
                       "cls.predictions.bias"};
  const double *hp[5];
  for (int j = 0; j < 5; j++) hp[j] = P(r, rob ? hn[j] : hb[j], 0, r->p);
  double loss = 0;
  for (int i = 0; i < N; i++) {
    int lab = r->labels ? r->labels[i] : MODEL_IGNORE_LABEL;
    if (lab == MODEL_IGNORE_LABEL && !logits_all) continue;
    linear(hh, x + (size_t)i * H, hp[0], hp[1], 1, H, H);
    for (int j = 0; j < H; j++) hh[j] = gelu(hh[j]);
    layernorm(hh, hp[2], hp[3], 1, H, eps);
    linear(lg, hh, wte, hp[4], 1, H, V);   /* the tied decoder reads the live table */
    if (logits_all) memcpy(logits_all + (size_t)i * V, lg, (size_t)V * sizeof(double));
    if (lab == MODEL_IGNORE_LABEL) continue;
    loss += row_loss(lg, V, lab, r->smoothing);
  }
  (void)h2;
  free(x); free(q); free(k); free(v); free(ctx); free(t1); free(f); free(hh); free(h2); free(lg);
  return loss;
}

static void run_case(ModelType type, int dropout, int layers, int classes, double smoothing, const char *tag) {
  ModelConfig c = fixture_config(type, 11, 8, layers, 2, 12, type == MODEL_ROBERTA ? T + 3 : T);
  c.hidden_dropout_prob = dropout ? 0.2 : 0; c.attention_probs_dropout_prob = dropout ? 0.3 : 0;
  Err err = {0};
  if (classes) {
    const char *names[] = {"alpha", "beta", "gamma", "delta", "epsilon"};
    check(config_set_labels(&c, classes, names, &err) == 0, "gradcheck_cls_labels", "%s", err.msg);
    /* RoBERTa: its own rate; BERT: null, so the hidden rate applies (HF). */
    c.classifier_dropout = type == MODEL_ROBERTA ? (dropout ? 0.25 : 0) : -1;
  }
  Model *m = model_new(&c, &err);
  char name[128];
  snprintf(name, sizeof name, "gradcheck_%s_new", tag);
  check(m != NULL, name, "%s", err.msg);
  if (!m) return;
  model_init_weights(m, 5);
  /* Large weights and every LayerNorm/bias moved off 1/0, so each gradient is non-trivial. */
  Rng rng;
  rng_seed(&rng, 77);
  size_t n = model_num_params(m);
  float *pf = model_params(m);
  for (size_t i = 0; i < n; i++) pf[i] = (float)(rng_normal(&rng) * 0.5);
  for (int t = 0; t < model_tensor_count(m); t++) {
    const ModelTensor *mt = model_tensor(m, t);
    if (strstr(mt->name, "LayerNorm.weight") || strstr(mt->name, "layer_norm.weight"))
      for (size_t i = 0; i < mt->numel; i++) pf[mt->offset + i] += 1.0f;
  }
  /* Row 0: all real but holds the pad id mid-sequence; row 1: two pads at the
  ** end; row 2: only padding (fully masked attention rows, no labels). */
  int32_t ids[B * T] = {0, 5, 1, 7, 2, 9, 3, 4, 10, 6, 1, 1, 1, 1, 1, 1, 1, 1};
  int32_t mask[B * T] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  int32_t types[B * T] = {0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0};
  int32_t labels[B * T] = {-100, 8, 3, -100, -100, 4, 2, -100, 0, -100, -100, -100, -100, -100, -100, -100, -100, -100};
  if (type == MODEL_ROBERTA) memset(types, 0, sizeof types);
  /* A classifier's labels are per row; the all-padding row 2 takes no part (a real
  ** row always has its [CLS], and a fully masked row's scores absorb the query's
  ** change in float: finite differences see no gradient where autograd does). */
  int32_t row_labels[B] = {classes - 1, 1, MODEL_IGNORE_LABEL};
  ModelBatch batch = {B, T, ids, mask, types, classes ? row_labels : labels};
  snprintf(name, sizeof name, "gradcheck_%s_plan", tag);
  check(model_plan(m, B, T, B * T, 1, &err) == 0, name, "%s", err.msg);
  model_set_dropout(m, dropout, 1234);
  model_set_label_smoothing(m, (float)smoothing);

  double *pd = malloc(n * sizeof(double)), *frozen = malloc(n * sizeof(double));
  for (size_t i = 0; i < n; i++) pd[i] = frozen[i] = pf[i];
  Ref ref = {m, &c, pd, frozen, ids, mask, types, batch.labels, dropout, 1234, (float)smoothing};

  ModelLoss ml;
  int rc = model_forward(m, &batch, &ml, &err);
  double rl = ref_forward(&ref, NULL);
  snprintf(name, sizeof name, "gradcheck_%s_loss", tag);
  check(rc == 0 && ml.n_labels == (classes ? 2 : 5) && fabs(ml.loss_sum - rl) < 1e-4 * (1 + fabs(rl)), name,
        "model %.8f (%d labels, rc %d %s) reference %.8f", ml.loss_sum, ml.n_labels, rc, err.msg, rl);
  model_zero_grad(m);
  model_backward(m, 1.0f);
  const float *g = model_grads(m);

  /* Finite differences of the double reference, one parameter at a time. */
  double worst = 0;
  const char *worst_name = "";
  int all_ok = 1;
  for (int t = 0; t < model_tensor_count(m); t++) {
    const ModelTensor *mt = model_tensor(m, t);
    double *fd = malloc(mt->numel * sizeof(double)), gmax = 0, dmax = 0;
    for (size_t i = 0; i < mt->numel; i++) {
      size_t j = mt->offset + i;
      double h = 1e-5, save = pd[j];
      pd[j] = save + h; double lp = ref_forward(&ref, NULL);
      pd[j] = save - h; double lm = ref_forward(&ref, NULL);
      pd[j] = save;
      fd[i] = (lp - lm) / (2 * h);
      if (fabs(fd[i]) > gmax) gmax = fabs(fd[i]);
    }
    for (size_t i = 0; i < mt->numel; i++) {
      double dd = fabs(fd[i] - g[mt->offset + i]);
      if (dd > dmax) dmax = dd;
    }
    /* The key biases' true gradient is exactly zero (softmax ignores a per-row
    ** shift); the float backward leaves rounding noise there, of the size of
    ** float32 epsilon times the other gradients, so such tensors are checked
    ** in absolute terms. */
    int zero = gmax < 1e-7;
    double rel = zero ? dmax / 1e-2 : dmax / gmax;
    if (!zero && rel > worst) { worst = rel; worst_name = mt->name; }
    if (rel > 1e-3) {
      all_ok = 0;
      printf("  %s: max |grad - fd| %.3g, max |fd| %.3g\n", mt->name, dmax, gmax);
    }
    free(fd);
  }
  snprintf(name, sizeof name, "gradcheck_%s_all_grads", tag);
  check(all_ok, name, "worst relative error %.3g in %s", worst, worst_name);
  printf("  %s: worst gradient error %.2g of the tensor's max (%s)\n", tag, worst, worst_name);

  /* The first backward after model_zero_grad writes the gradients, a second one
  ** adds: the same batch again must give twice (to rounding: scatter-adds into
  ** the embeddings sum in another order). And zeroed gradients with no
  ** backward since read as zeros. */
  float *once = malloc(n * sizeof(float));
  memcpy(once, g, n * sizeof(float));
  rc = model_forward(m, &batch, &ml, &err);
  model_backward(m, 1.0f);
  g = model_grads(m);
  int zeros = 1;
  double gmax_all = 0, dev = 0;
  for (size_t i = 0; i < n; i++) {
    gmax_all = fmax(gmax_all, fabs(once[i]));
    dev = fmax(dev, fabs(g[i] - 2.0 * once[i]));
  }
  int twice = rc == 0 && dev <= 1e-6 * gmax_all;
  /* Zeroed over those sums, a backward must give the first gradients again, bit for bit. */
  model_zero_grad(m);
  rc |= model_forward(m, &batch, &ml, &err);
  model_backward(m, 1.0f);
  g = model_grads(m);
  int again = rc == 0 && memcmp(g, once, n * sizeof(float)) == 0;
  model_zero_grad(m);
  g = model_grads(m);
  for (size_t i = 0; i < n; i++) zeros &= g[i] == 0;
  snprintf(name, sizeof name, "gradcheck_%s_backward_accumulates", tag);
  check(twice && again && zeros, name,
        "second backward off twice the first by %.3g (of %.3g); after zeroing %s; zeroed gradients %s zero", dev,
        gmax_all, again ? "the same" : "different", zeros ? "read" : "do not read");
  free(once);

  /* Logits at every position (padding and the fully masked row included), dropout off. */
  if (!dropout && classes) {
    float lf[B * 8];
    double ld[B * 8], md = 0;
    rc = model_classify(m, &batch, lf, &err);
    ref_forward(&ref, ld);
    for (int i = 0; i < B * classes; i++) md = fmax(md, fabs(lf[i] - ld[i]));
    snprintf(name, sizeof name, "gradcheck_%s_logits_every_row", tag);
    check(rc == 0 && md < 1e-4, name, "max |logit diff| %.3g (rc %d %s)", md, rc, err.msg);
  } else if (!dropout) {
    int V = c.vocab_size;
    int32_t positions[B * T];
    for (int i = 0; i < B * T; i++) positions[i] = i;
    float *lf = malloc(sizeof(float) * B * T * V);
    double *ld = malloc(sizeof(double) * B * T * V);
    rc = model_logits_at(m, &batch, positions, B * T, lf, &err);
    ref_forward(&ref, ld);
    double md = 0;
    for (int i = 0; i < B * T * V; i++) md = fmax(md, fabs(lf[i] - ld[i]));
    snprintf(name, sizeof name, "gradcheck_%s_logits_all_positions", tag);
    check(rc == 0 && md < 1e-4, name, "max |logit diff| %.3g (rc %d %s)", md, rc, err.msg);
    free(lf); free(ld);
  }
  free(pd); free(frozen);
  model_free(m);
}

int main(void) {
  run_case(MODEL_ROBERTA, 0, 2, 0, 0, "roberta");
  run_case(MODEL_BERT, 0, 2, 0, 0, "bert");
  run_case(MODEL_ROBERTA, 1, 2, 0, 0, "roberta_dropout");
  run_case(MODEL_BERT, 1, 2, 0, 0, "bert_dropout");
  /* One layer: the last layer (computed at the labelled rows only) reads the embeddings. */
  run_case(MODEL_BERT, 1, 1, 0, 0, "bert_1layer_dropout");
  /* Sequence classifiers (issue 16): the head at each labelled row's first token. */
  run_case(MODEL_ROBERTA, 0, 2, 5, 0, "roberta_cls");
  run_case(MODEL_BERT, 0, 2, 5, 0, "bert_cls");
  run_case(MODEL_ROBERTA, 1, 2, 5, 0, "roberta_cls_dropout");
  run_case(MODEL_BERT, 1, 1, 5, 0, "bert_cls_1layer_dropout");
  /* Label smoothing (HF Trainer's label_smoothing_factor), a masked LM and a classifier. */
  run_case(MODEL_ROBERTA, 0, 2, 0, 0.1, "roberta_smoothed");
  run_case(MODEL_BERT, 1, 2, 5, 0.2, "bert_cls_dropout_smoothed");
  return check_exit();
}
