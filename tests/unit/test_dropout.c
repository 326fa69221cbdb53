/* Dropout: in training it depends on the seed (and only on it, not on the
** thread count), keeps the expectation (kept fraction 1-p, kept values scaled by
** 1/(1-p)); off, or in an evaluation plan, the model is deterministic and equal
** to the same model with dropout probabilities zero. */
#include <math.h>
#include <string.h>

#include "engine/nn/layers.h"
#include "engine/nn/model.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

/* Threads for every layer call (each attention scratch below has room for 4). */
enum { LAYER_THREADS = 2 };

enum { B = 2, T = 16 };

static ModelConfig tiny(double p) {
  ModelConfig c = fixture_config(MODEL_ROBERTA, 50, 32, 2, 4, 64, T + 4);
  c.hidden_dropout_prob = p; c.attention_probs_dropout_prob = p; c.initializer_range = 0.2;
  return c;
}

static int32_t ids[B * T], labels[B * T], mask[B * T], pos[B * T];

static double train_loss(Model *m, int dropout, uint64_t seed) {
  ModelBatch b = {B, T, ids, mask, NULL, labels};
  ModelLoss l;
  model_set_dropout(m, dropout, seed);
  Err err;
  if (model_forward(m, &b, &l, &err)) return NAN;
  return l.loss_sum;
}

int main(void) {
  for (int i = 0; i < B * T; i++) {
    ids[i] = 3 + (i * 7) % 40; mask[i] = 1; labels[i] = i % 3 == 0 ? (i * 5) % 50 : -100; pos[i] = i;
  }
  ids[B * T - 1] = 1; mask[B * T - 1] = 0;
  Err err;
  ModelConfig cd = tiny(0.1), c0 = tiny(0.0);
  Model *m = model_new(&cd, &err), *m0 = model_new(&c0, &err);
  model_init_weights(m, 9);
  memcpy(model_params(m0), model_params(m), model_num_params(m) * sizeof(float));
  model_plan(m, B, T, B * T, 1, &err);
  model_plan(m0, B, T, B * T, 1, &err);

  double a = train_loss(m, 1, 100), a2 = train_loss(m, 1, 100), b = train_loss(m, 1, 101);
  double off = train_loss(m, 0, 100), ref = train_loss(m0, 0, 0);
  check(a == a2, "dropout_same_seed_same_output", "%.9g vs %.9g", a, a2);
  check(a != b, "dropout_other_seed_other_output", "seeds 100 and 101 both give %.9g", a);
  check(a != off, "dropout_on_changes_output", "dropout on and off both give %.9g", a);
  check(off == ref, "dropout_off_equals_dropout_free_model", "%.9g vs %.9g", off, ref);

  /* The masks are a function of (seed, site, index): one thread or two, same numbers. */
  model_set_threads(m, 1);
  double one = train_loss(m, 1, 100);
  model_set_threads(m, 2);
  double two = train_loss(m, 1, 100);
  /* (equal up to the summation order of the loss reduction, which the thread count changes) */
  check(fabs(one - two) < 1e-6 * fabs(one) && fabs(one - a) < 1e-6 * fabs(one), "dropout_independent_of_threads", "1 thread %.9g, 2 threads %.9g", one, two);

  /* Evaluation plan: dropout requested but not applied; logits equal the dropout-free model's. */
  Model *e = model_new(&cd, &err);
  memcpy(model_params(e), model_params(m), model_num_params(m) * sizeof(float));
  model_plan(e, B, T, B * T, 0, &err);
  model_set_dropout(e, 1, 5);
  float le[B * T * 50], l0[B * T * 50];
  ModelBatch bb = {B, T, ids, mask, NULL, labels};
  int rc = model_logits_at(e, &bb, pos, B * T, le, &err) | model_logits_at(m0, &bb, pos, B * T, l0, &err);
  check(rc == 0 && memcmp(le, l0, sizeof le) == 0, "dropout_eval_plan_is_deterministic_and_dropout_free",
        "max diff %.3g", check_max_abs_diff(le, l0, B * T * 50));

  ModelLoss le_loss, l0_loss;
  rc = model_forward(e, &bb, &le_loss, &err) | model_forward(m0, &bb, &l0_loss, &err);
  check(rc == 0 && le_loss.loss_sum == l0_loss.loss_sum && le_loss.n_labels == l0_loss.n_labels,
        "dropout_eval_plan_loss_equals_dropout_free", "%.9g vs %.9g", le_loss.loss_sum, l0_loss.loss_sum);

  /* Expectation, per layer: over 2^20 ones, the kept fraction is 1-p within 5
  ** sigma and the mean output is 1 within 5 sigma. */
  size_t n = 1 << 20;
  static float ones[1 << 20], out[1 << 20], back[1 << 20];
  for (size_t i = 0; i < n; i++) ones[i] = out[i] = 1;
  LayerDropout d = {0.1f, 42, 7, NULL, 0};
  dropout_forward_inplace(out, n, &d, LAYER_THREADS);
  double kept = 0, mean = 0;
  int values_ok = 1;
  for (size_t i = 0; i < n; i++) {
    kept += out[i] != 0; mean += out[i];
    values_ok &= out[i] == 0 || fabsf(out[i] - 1 / 0.9f) < 1e-6f;
  }
  kept /= n; mean /= n;
  double sk = sqrt(0.1 * 0.9 / n), sm = sqrt(0.1 / 0.9 / n);
  check(fabs(kept - 0.9) < 5 * sk && values_ok, "dropout_keeps_1_minus_p", "kept %.5f (sigma %.1g)", kept, sk);
  check(fabs(mean - 1) < 5 * sm, "dropout_keeps_expectation", "mean %.5f (sigma %.1g)", mean, sm);
  /* Backward applies the very same mask. */
  dropout_backward(back, ones, n, &d, LAYER_THREADS);
  check(memcmp(back, out, n * sizeof(float)) == 0, "dropout_backward_same_mask", "masks differ");
  /* Attention-probability dropout keeps each row's expected sum at 1. */
  LayerDropout da = {0.3f, 42, 8, NULL, 0};
  float qkv[1 * 64 * 3 * 8], ctx[64 * 8], att[64 * 64], scratch[4 * 2 * 64 * 64];
  for (int i = 0; i < 64 * 24; i++) qkv[i] = (i % 24) >= 16 ? 1.0f : 0.01f * (float)((i * 37) % 11);
  attention_forward(LAYER_FP32, ctx, att, qkv, NULL, 1, 64, 8, 1, &da, scratch, LAYER_THREADS);
  double cm = 0;
  for (int i = 0; i < 64 * 8; i++) cm += ctx[i];
  cm /= 64 * 8;   /* V is all ones, so each context entry is the row's kept probability mass / 0.7 */
  check(fabs(cm - 1) < 5 * sqrt(0.3 / 0.7 / 64 / 64) + 0.01, "dropout_attention_keeps_expectation", "mean %.4f", cm);
  model_free(m); model_free(m0); model_free(e);
  return check_exit();
}
