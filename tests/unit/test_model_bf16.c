/* The whole model in bf16 (issue 15), RoBERTa and BERT, on a small random model:
**
** - every instruction-set level: avx512's float emulation of vdpbf16ps gives the
**   avx512bf16 level's loss and gradients bit for bit (they share every float loop, and
**   gemm_bf16 is the same bits at every level, test_gemm_bf16), so a bf16 run moves
**   between CPUs with and without AVX512-BF16. avx2 and generic run the layers' own
**   reductions (LayerNorm, softmax, the loss) at another width, whose last bits differ
**   in fp32 as well (ARCHITECTURE.md), so there the check is a tolerance: 1e-3 of the
**   gradients' norm, far below bf16's own error (below) and far above a float
**   reduction order's (~1e-6 relative, which a bf16 rounding can turn into one bf16 ulp
**   of an element, 4e-3 of it, on a few elements);
** - against the fp32 model: the loss within 1e-2 relative and the gradients within 2e-2
**   relative (norm of the difference / norm of the fp32 gradient) all together, 4e-2
**   per tensor (a small tensor averages fewer roundings; 1.7e-2 is the worst here).
**   bf16 keeps 8 significant bits (relative rounding 2^-9 = 2e-3 per input); a product of K terms each rounded twice errs by ~2e-3 * sqrt(2) relative
**   in norm, and the few chained products (Q/K/V -> output -> FFN, twice, then the
**   head and dX back through all of them) add to several 1e-3: a real mistake (a
**   missing term, a wrong transpose, fp32 and bf16 buffers mixed up) is O(1);
** - threads 1 and 2 give the same gradients, bit for bit; the loss, a double sum that
**   crossentropy_forward splits over the threads (in fp32 as well), to 1e-13 relative.
** The numbers against PyTorch are test_model_parity's job (scripts/torch_bf16_reference.py). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/cpu.h"
#include "engine/core/rng.h"
#include "engine/nn/model.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

enum { B = 3, T = 10, V = 53 };

/* One pass's results: the loss sum and every gradient. */
typedef struct Pass {
  double loss;
  float *grads;
} Pass;

/* Forward and backward at the current level with the given precision and threads. */
static int run_pass(Model *m, const ModelBatch *b, ModelPrecision p, int threads, Pass *out) {
  Err err = {0};
  ModelLoss ml;
  model_set_precision(m, p);
  model_set_threads(m, threads);
  if (model_forward(m, b, &ml, &err)) { printf("# forward: %s\n", err.msg); return -1; }
  model_zero_grad(m);
  model_backward(m, 1.0f);
  size_t n = model_num_params(m);
  out->loss = ml.loss_sum;
  out->grads = malloc(n * sizeof(float));
  if (!out->grads) return -1;
  memcpy(out->grads, model_grads(m), n * sizeof(float));
  return 0;
}

static int same_bits(const Pass *a, const Pass *b, size_t n) {
  return memcmp(&a->loss, &b->loss, sizeof a->loss) == 0 && memcmp(a->grads, b->grads, n * sizeof(float)) == 0;
}

/* The sum of squares of a[off, off + n). */
static double sum_sq(const float *a, size_t off, size_t n) {
  double s = 0;
  for (size_t i = off; i < off + n; i++) s += (double)a[i] * (double)a[i];
  return s;
}

/* ||a - b|| / ||b|| over [off, off + n). */
static double rel_norm(const float *a, const float *b, size_t off, size_t n) {
  double d = 0, r = 0;
  for (size_t i = off; i < off + n; i++) {
    double x = (double)a[i] - (double)b[i];
    d += x * x;
    r += (double)b[i] * (double)b[i];
  }
  return r > 0 ? sqrt(d / r) : sqrt(d);
}

static void run_case(ModelType type, const char *tag) {
  ModelConfig c = fixture_config(type, V, 32, 2, 2, 48, type == MODEL_ROBERTA ? T + 3 : T);
  Err err = {0};
  Model *m = model_new(&c, &err);
  char name[128];
  if (!m) { snprintf(name, sizeof name, "model_bf16_%s_new", tag); check(0, name, "%s", err.msg); return; }
  model_init_weights(m, 7);
  /* Weights ten times the initializer's and LayerNorms moved off 1/0, so the logits
  ** spread and every gradient is well above zero. */
  Rng rng;
  rng_seed(&rng, 99);
  size_t n = model_num_params(m);
  float *pf = model_params(m);
  for (size_t i = 0; i < n; i++) pf[i] = (float)(rng_normal(&rng) * 0.2);
  for (int t = 0; t < model_tensor_count(m); t++) {
    const ModelTensor *mt = model_tensor(m, t);
    if (strstr(mt->name, "LayerNorm.weight") || strstr(mt->name, "layer_norm.weight"))
      for (size_t i = 0; i < mt->numel; i++) pf[mt->offset + i] += 1.0f;
  }
  /* Row 0 all real, row 1 padded at the end, row 2 real with many labels. */
  int32_t ids[B * T], mask[B * T], types[B * T], labels[B * T];
  for (int i = 0; i < B * T; i++) {
    ids[i] = 2 + (int32_t)(rng_u64(&rng) % (V - 2));
    mask[i] = !(i / T == 1 && i % T >= 7);
    types[i] = type == MODEL_BERT ? (i % T) >= T / 2 : 0;
    labels[i] = mask[i] && (i % 3 == 0 || i / T == 2) ? (int32_t)(rng_u64(&rng) % V) : -100;
    if (!mask[i]) ids[i] = c.pad_token_id;
  }
  ModelBatch batch = {B, T, ids, mask, types, labels};
  if (model_plan(m, B, T, B * T, 1, &err)) {
    snprintf(name, sizeof name, "model_bf16_%s_plan", tag);
    check(0, name, "%s", err.msg);
    model_free(m);
    return;
  }

  CpuIsa best = cpu_isa_best();
  Pass at[CPU_ISA_COUNT];
  memset(at, 0, sizeof at);
  int ok = 1;
  for (int lv = 0; lv <= (int)best; lv++) {
    ok &= cpu_isa_select((CpuIsa)lv, &err) == 0 && run_pass(m, &batch, MODEL_BF16, 2, &at[lv]) == 0;
  }
  cpu_isa_select(best, NULL);
  snprintf(name, sizeof name, "model_bf16_%s_runs_at_every_level", tag);
  check(ok, name, "a level failed: %s", err.msg);
  if (!ok) goto done;

  /* avx512 (emulated vdpbf16ps) against avx512bf16: the same bits. */
  snprintf(name, sizeof name, "model_bf16_%s_avx512_same_bits_as_avx512bf16", tag);
  if (best >= CPU_ISA_AVX512BF16)
    check(same_bits(&at[CPU_ISA_AVX512], &at[CPU_ISA_AVX512BF16], n), name,
          "loss %.17g vs %.17g, gradients differ by %g",
          at[CPU_ISA_AVX512].loss, at[CPU_ISA_AVX512BF16].loss,
          check_max_abs_diff(at[CPU_ISA_AVX512].grads, at[CPU_ISA_AVX512BF16].grads, n));
  else check_skip(name, "this CPU has no AVX512-BF16");
  /* avx2 and generic: their own float reductions, so a tolerance (above). */
  for (int lv = 0; lv < (int)best && lv < CPU_ISA_AVX512; lv++) {
    double g = rel_norm(at[lv].grads, at[best].grads, 0, n);
    double l = fabs(at[lv].loss - at[best].loss) / fabs(at[best].loss);
    snprintf(name, sizeof name, "model_bf16_%s_%s_close_to_%s", tag, cpu_isa_name((CpuIsa)lv), cpu_isa_name(best));
    check(g < 1e-3 && l < 1e-5, name, "gradients %.3g relative in norm, loss %.3g relative", g, l);
  }

  /* bf16 against fp32, at the best level. */
  Pass f32;
  if (run_pass(m, &batch, MODEL_FP32, 2, &f32)) { ok = 0; goto done; }
  const Pass *bf = &at[best];
  double lrel = fabs(bf->loss - f32.loss) / fabs(f32.loss);
  snprintf(name, sizeof name, "model_bf16_%s_loss_near_fp32", tag);
  check(lrel < 1e-2 && bf->loss != f32.loss, name,
        "bf16 %.9g fp32 %.9g (%.3g relative; equal would mean no bf16 product ran)",
        bf->loss, f32.loss, lrel);
  double worst = 0, all = rel_norm(bf->grads, f32.grads, 0, n);
  const char *worst_name = "";
  double gnorm = sqrt(sum_sq(f32.grads, 0, n));
  for (int t = 0; t < model_tensor_count(m); t++) {
    const ModelTensor *mt = model_tensor(m, t);
    /* The key biases' gradient is zero but for rounding (softmax ignores a number added
    ** to a whole row of scores, and a key bias adds q.b to every score of q's row): its
    ** relative error measures the rounding of terms that cancel, not bf16, so it counts
    ** in `all` only.
    ** A tensor whose gradient is rounding noise is measured against 1e-4 of the whole
    ** gradient's norm instead of its own. */
    if (strstr(mt->name, "attention.self.key.bias")) continue;
    double floor = 1e-4 * gnorm, own = sqrt(sum_sq(f32.grads, mt->offset, mt->numel));
    double r = rel_norm(bf->grads, f32.grads, mt->offset, mt->numel) * own / (own > floor ? own : floor);
    if (r > worst) { worst = r; worst_name = mt->name; }
  }
  printf("# %s: bf16 vs fp32: loss %.3g relative, gradients %.3g relative in norm (worst tensor %.3g, %s)\n", tag, lrel,
         all, worst, worst_name);
  snprintf(name, sizeof name, "model_bf16_%s_gradients_near_fp32", tag);
  check(all < 2e-2 && worst < 4e-2 && all > 0, name, "all %.3g, worst %.3g (%s)", all, worst, worst_name);
  free(f32.grads);

  /* Threads 1 against 2: the same bits. */
  Pass one;
  if (run_pass(m, &batch, MODEL_BF16, 1, &one)) { ok = 0; goto done; }
  snprintf(name, sizeof name, "model_bf16_%s_threads_same_gradient_bits", tag);
  check(memcmp(one.grads, bf->grads, n * sizeof(float)) == 0 && fabs(one.loss - bf->loss) <= 1e-13 * fabs(bf->loss),
        name,
        "loss %.17g vs %.17g, gradients differ by %g", one.loss, bf->loss, check_max_abs_diff(one.grads, bf->grads, n));
  free(one.grads);

done:
  for (int lv = 0; lv < CPU_ISA_COUNT; lv++) free(at[lv].grads);
  model_free(m);
}

int main(void) {
  run_case(MODEL_ROBERTA, "roberta");
  run_case(MODEL_BERT, "bert");
  return check_exit();
}
