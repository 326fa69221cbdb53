/* The model's contract outside the numbers: the HF tensor table covers the one
** parameter buffer exactly, HF initialisation, bad input refused with a
** message (never a crash), and a thread count that belongs to its model alone. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/model.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static ModelConfig cfg(ModelType t) {
  ModelConfig c = fixture_config(t, 300, 64, 3, 4, 128, 40);
  c.pad_token_id = t == MODEL_BERT ? 0 : 1; c.layer_norm_eps = 1e-12;
  return c;
}

/* Edit k of a valid config into one that config_validate() refuses (0 past the last). */
static int spoil(ModelConfig *c, int k) {
  switch (k) {
    case 0: c->hidden_size = 256; c->vocab_size = 1 << 24; return 1;   /* 2^32 elements in one tensor */
    case 1: c->hidden_size = 256; c->intermediate_size = 1 << 24; return 1;
    case 2: c->hidden_size = 256; c->max_position_embeddings = 1 << 24; return 1;
    case 3: c->type_vocab_size = (1 << 24) + 1; return 1;                 /* one dimension over 2^24 */
    case 4: c->num_hidden_layers = 1025; return 1;
    case 5: c->bos_token_id = c->vocab_size; return 1;
    case 6: c->eos_token_id = -2; return 1;
    case 7: c->initializer_range = 0; return 1;
    case 8: c->layer_norm_eps = 1; return 1;
    case 9: c->attention_probs_dropout_prob = 1; return 1;
    case 10: c->model_type = (ModelType)7; return 1;
    case 11: c->max_position_embeddings = c->pad_token_id + 1; return c->model_type == MODEL_ROBERTA;
  }
  return -1;
}

/* One training pass (forward with labels, backward) of a model, as a thread's work. */
enum { PASS_B = 4, PASS_T = 32, PASS_ROUNDS = 3 };
typedef struct Pass {
  Model *m;
  int32_t ids[PASS_B * PASS_T], lab[PASS_B * PASS_T];
  double loss;
  float *grads;     /* a copy of the gradients, model_num_params floats */
  int failed;
} Pass;

static void *pass_run(void *arg) {
  Pass *p = arg;
  Err e = {0};
  ModelBatch b = {PASS_B, PASS_T, p->ids, NULL, NULL, p->lab};
  ModelLoss l;
  model_zero_grad(p->m);
  if (model_forward(p->m, &b, &l, &e)) { p->failed = 1; return NULL; }
  model_backward(p->m, 1.0f);
  p->loss = l.loss_sum;
  memcpy(p->grads, model_grads(p->m), model_num_params(p->m) * sizeof(float));
  return NULL;
}

/* Two models with different thread counts: setting one's count changes neither
** the other's nor the caller's (OpenMP or OpenBLAS), and passes run at the same
** time on two threads give, bit for bit, what each gives alone. */
static void threads_are_per_model(void) {
  Err err = {0};
  ModelConfig ca = cfg(MODEL_ROBERTA), cb = cfg(MODEL_BERT);
  Model *a = model_new(&ca, &err), *b = model_new(&cb, &err);
  model_init_weights(a, 11);
  model_init_weights(b, 12);
  int omp_before = omp_get_max_threads(), blas_before = openblas_get_num_threads();
  model_set_threads(a, 1);
  model_set_threads(b, 2);
  model_set_threads(b, 3);
  model_set_threads(b, 2);
  check(model_threads(a) == 1 && model_threads(b) == 2 && omp_get_max_threads() == omp_before &&
        openblas_get_num_threads() == blas_before, "model_threads_are_per_model",
        "a %d, b %d; the caller's OpenMP count %d -> %d, OpenBLAS's %d -> %d", model_threads(a), model_threads(b),
        omp_before, omp_get_max_threads(), blas_before, openblas_get_num_threads());
  Pass *pa = calloc(1, sizeof *pa), *pb = calloc(1, sizeof *pb);
  Pass *ra = calloc(1, sizeof *ra), *rb = calloc(1, sizeof *rb);
  pa->m = ra->m = a;
  pb->m = rb->m = b;
  int planned = model_plan(a, PASS_B, PASS_T, PASS_B * PASS_T, 1, &err) == 0 &&
                model_plan(b, PASS_B, PASS_T, PASS_B * PASS_T, 1, &err) == 0;
  for (int i = 0; i < PASS_B * PASS_T; i++) {
    pa->ids[i] = ra->ids[i] = 3 + (i * 7) % 290;
    pb->ids[i] = rb->ids[i] = 3 + (i * 11) % 290;
    pa->lab[i] = ra->lab[i] = i % 5 ? MODEL_IGNORE_LABEL : (i * 13) % 300;
    pb->lab[i] = rb->lab[i] = i % 4 ? MODEL_IGNORE_LABEL : (i * 17) % 300;
  }
  pa->grads = malloc(model_num_params(a) * sizeof(float));
  ra->grads = malloc(model_num_params(a) * sizeof(float));
  pb->grads = malloc(model_num_params(b) * sizeof(float));
  rb->grads = malloc(model_num_params(b) * sizeof(float));
  /* Each alone, then both at once, a few times. */
  pass_run(ra);
  pass_run(rb);
  int same = planned && !ra->failed && !rb->failed, rounds = 0;
  for (int r = 0; r < PASS_ROUNDS && same; r++, rounds++) {
    pthread_t ta, tb;
    int sa = pthread_create(&ta, NULL, pass_run, pa) == 0, sb = pthread_create(&tb, NULL, pass_run, pb) == 0;
    if (sa) pthread_join(ta, NULL);
    if (sb) pthread_join(tb, NULL);
    same = sa && sb && !pa->failed && !pb->failed && pa->loss == ra->loss && pb->loss == rb->loss &&
           !memcmp(pa->grads, ra->grads, model_num_params(a) * sizeof(float)) &&
           !memcmp(pb->grads, rb->grads, model_num_params(b) * sizeof(float));
  }
  check(same && model_threads(a) == 1 && model_threads(b) == 2, "model_threads_concurrent_passes_match_alone",
        "%s; round %d: loss %.9g / %.9g (alone %.9g / %.9g)", err.msg, rounds, pa->loss, pb->loss, ra->loss, rb->loss);
  free(pa->grads); free(ra->grads); free(pb->grads); free(rb->grads);
  free(pa); free(pb); free(ra); free(rb);
  model_free(a);
  model_free(b);
}

/* The activation plan's table against its allocations: every buffer lies inside
** its arena, float buffers start on 64-byte lines, none overlaps the next, the
** arenas are exactly the buffers' sum, and the sizes are the shapes' (training
** keeps a slot per layer and the attention probabilities; inference neither). */
static void activation_table_fits(void) {
  static const struct { int bert, batch, seq, head_rows, training; } plans[] = {
    {0, 2, 8, 3, 1}, {1, 3, 16, 5, 0}, {0, 4, 32, 128, 1}, {1, 1, 1, 0, 0}};
  for (size_t k = 0; k < sizeof plans / sizeof plans[0]; k++) {
    Err err = {0};
    ModelConfig c = cfg(plans[k].bert ? MODEL_BERT : MODEL_ROBERTA);
    Model *m = model_new(&c, &err);
    int B = plans[k].batch, T = plans[k].seq, M = plans[k].head_rows ? plans[k].head_rows : 1, tr = plans[k].training;
    size_t N = (size_t)B * T, H = 64, V = 300, FF = 128;   /* (cblas.h defines I) */
    int bad = model_activation_count(m) != 0 || model_plan(m, B, T, plans[k].head_rows, tr, &err) != 0;
    const void *fa, *ia;
    size_t fbytes, ibytes, fsum = 0, isum = 0;
    model_activation_arenas(m, &fa, &fbytes, &ia, &ibytes);
    const char *fend = NULL, *iend = NULL;
    int qkv = 0, att = 0, sizes = 1, n = model_activation_count(m);
    char why[160] = "";
    for (int i = 0; i < n && !bad; i++) {
      ModelActivation a;
      if (model_activation(m, i, &a)) { bad = 1; break; }
      const char *lo = a.is_int ? ia : fa, *hi = lo + (a.is_int ? ibytes : fbytes), *d = a.data;
      const char **end = a.is_int ? &iend : &fend;
      if (a.is_int) isum += a.bytes;
      else fsum += (a.bytes + 63) & ~(size_t)63;
      if (!d) { sizes &= a.bytes == 0; continue; }
      if (d < lo || d + a.bytes > hi || (*end && d < *end) || (!a.is_int && (uintptr_t)d % 64)) {
        snprintf(why, sizeof why, "%s (layer %d) at %td, %zu bytes, outside or overlapping", a.name, a.layer,
                 d - lo, a.bytes);
        bad = 1;
      }
      *end = d + a.bytes;
      if (!strcmp(a.name, "qkv")) { qkv++; sizes &= a.bytes == N * 3 * H * sizeof(float); }
      if (!strcmp(a.name, "att")) { att++; sizes &= a.bytes == (size_t)B * 4 * T * T * sizeof(float); }
      if (!strcmp(a.name, "ffact")) sizes &= a.bytes == (tr ? N * FF * sizeof(float) : 0);
      if (!strcmp(a.name, "logits")) sizes &= a.bytes == (size_t)M * V * sizeof(float);
      if (!strcmp(a.name, "qstart")) sizes &= a.bytes == (size_t)(B + 1) * sizeof(int32_t);
    }
    ModelActivation past;
    char name[96];
    snprintf(name, sizeof name, "model_activation_table_fits_%zu", k);
    check(!bad && n > 0 && fsum == fbytes && isum == ibytes && sizes && qkv == (tr ? 3 : 1) && att == (tr ? 3 : 0) &&
          model_activation(m, n, &past) == -1, name,
          "%s%s; floats %zu of %zu bytes, ints %zu of %zu; %d qkv, %d att, sizes %s", why, err.msg, fsum, fbytes,
          isum, ibytes, qkv, att, sizes ? "right" : "wrong");
    model_free(m);
  }
}

/* model_logits_at computes the last layer at positions given in increasing order
** only (fill-mask's): each position's logits have the bits the whole layer gives,
** with padding in the batch, positions in one row or spread over rows, a plan
** sized to them, and in bf16 too. The FFN is wider than one 768-deep slice of K,
** so its product runs in slices on both paths. Positions out of order take the
** whole layer and agree as well. */
static void logits_at_rows_same_bits(void) {
  enum { B = 3, T = 24, N = B * T, V = 300 };
  static const int32_t few[] = {5}, one_row[] = {26, 27, 40}, spread[] = {0, 3, 9, 23, 24, 30, 40, 48, 50, 56, 70, 71},
                       backwards[] = {50, 7, 31};
  static const struct { const char *name; const int32_t *pos; int n; } cases[] = {
      {"one", few, 1}, {"one_row", one_row, 3}, {"spread", spread, 12}, {"out_of_order", backwards, 3}};
  int32_t ids[N], att[N], all[N];
  for (int i = 0; i < N; i++) {
    int r = i / T, t = i % T, len = r == 0 ? T : r == 1 ? 17 : 9;
    ids[i] = t < len ? (int32_t)(5 + (i * 37) % (V - 5)) : 1;
    att[i] = t < len;
    all[i] = i;
  }
  float *full = malloc(sizeof(float) * N * V), *part = malloc(sizeof(float) * 12 * V);
  for (int ty = 0; ty < 2; ty++)
    for (int prec = 0; prec < 2; prec++) {
      Err err = {0};
      ModelConfig c = fixture_config(ty ? MODEL_BERT : MODEL_ROBERTA, V, 64, 3, 4, 1600, 40);
      c.pad_token_id = 1;
      Model *m = model_new(&c, &err);
      model_init_weights(m, 5);
      model_set_precision(m, prec ? MODEL_BF16 : MODEL_FP32);
      ModelBatch b = {B, T, ids, att, NULL, NULL};
      int rc = model_plan(m, B, T, N, 0, &err) || model_logits_at(m, &b, all, N, full, &err);
      for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char name[96];
        snprintf(name, sizeof name, "model_logits_at_%s_%s_%s_same_bits", cases[k].name, ty ? "bert" : "roberta",
                 model_precision_name(prec ? MODEL_BF16 : MODEL_FP32));
        int n = cases[k].n, bad = -1;
        int rk = rc || model_plan(m, B, T, n, 0, &err) || model_logits_at(m, &b, cases[k].pos, n, part, &err);
        for (int i = 0; !rk && i < n && bad < 0; i++)
          if (memcmp(part + (size_t)i * V, full + (size_t)cases[k].pos[i] * V, sizeof(float) * V)) bad = cases[k].pos[i];
        check(!rk && bad < 0, name, "%s; first position differing from the whole layer's: %d", rk ? err.msg : "ran",
              bad);
      }
      model_free(m);
    }
  free(full);
  free(part);
}

/* A pass gives the same bits on one thread and on two, for a short text (whose
** LayerNorm, embeddings and attention run on one thread even when two are given:
** layer_kernels.inc's team_pays) and for a batch large enough to split them among
** the threads (4 x 128 rows of 128 values: 2^19 operations of LayerNorm, 8.4 M
** multiply-adds of attention): the forward with its loss, and the last layer's
** logits at every position (model_logits_at, fill-mask's path). */
static void threads_same_bits(void) {
  enum { V = 300, H = 128, BMAX = 4, TMAX = 128 };
  static const struct { const char *name; int B, T; } sizes[] = {{"short", 1, 16}, {"batch", BMAX, TMAX}};
  static int32_t ids[BMAX * TMAX], lab[BMAX * TMAX], pos[BMAX * TMAX];
  float *logits[2];
  for (int t = 0; t < 2; t++) logits[t] = malloc(sizeof(float) * BMAX * TMAX * V);
  for (int ty = 0; ty < 2; ty++)
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      int B = sizes[k].B, T = sizes[k].T, N = B * T, rc = 0;
      double loss[2] = {0, 0};
      for (int i = 0; i < N; i++) {
        ids[i] = (int32_t)(5 + (i * 37) % (V - 5));
        lab[i] = i % 7 ? MODEL_IGNORE_LABEL : (int32_t)((i * 13) % V);
        pos[i] = i;
      }
      Err err = {0};
      ModelConfig c = fixture_config(ty ? MODEL_BERT : MODEL_ROBERTA, V, H, 2, 4, 2 * H, TMAX + 2);
      Model *m = model_new(&c, &err);
      rc = !m;
      if (m) model_init_weights(m, 9);
      for (int t = 0; t < 2 && !rc; t++) {
        model_set_threads(m, t + 1);
        ModelBatch bl = {B, T, ids, NULL, NULL, lab}, bi = {B, T, ids, NULL, NULL, NULL};
        ModelLoss l;
        rc = model_plan(m, B, T, N, 1, &err) || model_forward(m, &bl, &l, &err) ||
             model_plan(m, B, T, N, 0, &err) || model_logits_at(m, &bi, pos, N, logits[t], &err);
        loss[t] = rc ? 0 : l.loss_sum;
      }
      char name[96];
      snprintf(name, sizeof name, "model_%s_%s_same_bits_on_1_and_2_threads", ty ? "bert" : "roberta", sizes[k].name);
      check(!rc && loss[0] == loss[1] && !memcmp(logits[0], logits[1], sizeof(float) * N * V), name,
            "%s; loss %.9g (1 thread) against %.9g (2)", rc ? err.msg : "ran", loss[0], loss[1]);
      if (m) model_free(m);
    }
  for (int t = 0; t < 2; t++) free(logits[t]);
}

int main(void) {
  Err err = {0};
  for (int ty = 0; ty < 2; ty++) {
    ModelConfig c = cfg(ty ? MODEL_BERT : MODEL_ROBERTA);
    const char *tag = ty ? "bert" : "roberta";
    char name[96];
    Model *m = model_new(&c, &err);
    model_init_weights(m, 1);
    /* Every float belongs to exactly one named tensor. */
    size_t n = model_num_params(m);
    unsigned char *seen = calloc(n, 1);
    int overlap = 0;
    size_t covered = 0;
    for (int i = 0; i < model_tensor_count(m); i++) {
      const ModelTensor *t = model_tensor(m, i);
      for (size_t j = 0; j < t->numel; j++) overlap |= seen[t->offset + j]++;
      covered += t->numel;
    }
    snprintf(name, sizeof name, "model_%s_table_covers_buffer", tag);
    check(!overlap && covered == n && model_tensor_count(m) == 5 + 16 * 3 + 5, name,
          "overlap %d, covered %zu of %zu, %d tensors", overlap, covered, n, model_tensor_count(m));
    free(seen);
    const char *pre = ty ? "bert" : "roberta";
    char want[128];
    snprintf(want, sizeof want, "%s.encoder.layer.2.attention.self.value.weight", pre);
    const ModelTensor *v = model_tensor_by_name(m, want);
    snprintf(want, sizeof want, "%s.encoder.layer.2.attention.self.query.weight", pre);
    const ModelTensor *q = model_tensor_by_name(m, want);
    const ModelTensor *hb = model_tensor_by_name(m, ty ? "cls.predictions.bias" : "lm_head.bias");
    const ModelTensor *hl = model_tensor_by_name(m, ty ? "cls.predictions.transform.LayerNorm.weight" : "lm_head.layer_norm.weight");
    snprintf(name, sizeof name, "model_%s_hf_names", tag);
    check(v && q && hb && hl && v->offset == q->offset + 2 * 64 * 64 && v->shape[0] == 64 && v->shape[1] == 64 &&
          hb->ndim == 1 && hb->shape[0] == 300 && !hb->decay && v->decay && !hl->decay &&
          !model_tensor_by_name(m, "lm_head.decoder.weight") && !model_tensor_by_name(m, "cls.predictions.decoder.weight"),
          name, "names, fused QKV views, shapes or decay flags wrong");
    /* HF init: N(0, 0.02) weights, zero biases, LayerNorm 1/0, padding rows zero. */
    const float *p = model_params(m);
    snprintf(want, sizeof want, "%s.encoder.layer.0.intermediate.dense.weight", pre);
    const ModelTensor *w = model_tensor_by_name(m, want);
    double s = 0, s2 = 0;
    for (size_t j = 0; j < w->numel; j++) { s += p[w->offset + j]; s2 += p[w->offset + j] * p[w->offset + j]; }
    double sd = sqrt(s2 / w->numel - (s / w->numel) * (s / w->numel));
    snprintf(want, sizeof want, "%s.embeddings.word_embeddings.weight", pre);
    const ModelTensor *we = model_tensor_by_name(m, want);
    snprintf(want, sizeof want, "%s.embeddings.position_embeddings.weight", pre);
    const ModelTensor *pe = model_tensor_by_name(m, want);
    int pad = c.pad_token_id, padzero = 1, posrow = 0;
    for (int j = 0; j < 64; j++) {
      padzero &= p[we->offset + (size_t)pad * 64 + j] == 0;
      posrow |= p[pe->offset + (size_t)pad * 64 + j] != 0;
    }
    snprintf(name, sizeof name, "model_%s_hf_init", tag);
    check(fabs(sd - 0.02) < 0.001 && fabs(s / w->numel) < 0.001 && padzero && (ty ? posrow : !posrow) &&
          p[hl->offset] == 1 && p[hb->offset] == 0, name, "std %.4f, pad row zero %d, position pad row set %d", sd,
          padzero, posrow);

    /* Refusals. */
    int32_t ids[2 * 8], lab[2 * 8];
    for (int i = 0; i < 16; i++) { ids[i] = 5 + i; lab[i] = -100; }
    ModelBatch b = {2, 8, ids, NULL, NULL, lab};
    ModelLoss l;
    snprintf(name, sizeof name, "model_%s_refuses_unplanned", tag);
    check(model_forward(m, &b, &l, &err) == -1 && strstr(err.msg, "plan"), name, "%s", err.msg);
    snprintf(name, sizeof name, "model_%s_refuses_seq_beyond_positions", tag);
    check(model_plan(m, 2, 41, 4, 1, &err) == -1 && strstr(err.msg, "max_position_embeddings"), name, "%s", err.msg);
    model_plan(m, 2, 8, 3, 1, &err);
    ids[3] = 300;
    snprintf(name, sizeof name, "model_%s_refuses_bad_id", tag);
    check(model_forward(m, &b, &l, &err) == -1 && strstr(err.msg, "vocabulary"), name, "%s", err.msg);
    ids[3] = 7; lab[2] = 300;
    snprintf(name, sizeof name, "model_%s_refuses_bad_label", tag);
    check(model_forward(m, &b, &l, &err) == -1 && strstr(err.msg, "label"), name, "%s", err.msg);
    lab[2] = 4; lab[5] = 4; lab[9] = 4; lab[12] = 4;
    snprintf(name, sizeof name, "model_%s_refuses_more_labels_than_planned", tag);
    check(model_forward(m, &b, &l, &err) == -1 && strstr(err.msg, "labelled"), name, "%s", err.msg);
    lab[12] = -100;
    ModelBatch big = {3, 8, ids, NULL, NULL, lab};
    snprintf(name, sizeof name, "model_%s_refuses_batch_beyond_plan", tag);
    check(model_forward(m, &big, &l, &err) == -1, name, "accepted a batch of 3 in a plan of 2");
    int32_t types[16] = {0};
    types[1] = 2;
    ModelBatch bt = {2, 8, ids, NULL, types, lab};
    snprintf(name, sizeof name, "model_%s_refuses_bad_token_type", tag);
    check(model_forward(m, &bt, &l, &err) == -1 && strstr(err.msg, "token type"), name, "%s", err.msg);
    int32_t badpos[1] = {16};
    float out[300];
    snprintf(name, sizeof name, "model_%s_refuses_bad_position", tag);
    check(model_logits_at(m, &b, badpos, 1, out, &err) == -1, name, "accepted position 16 of 16");
    /* A shorter batch than planned works, and gives 3 labels. */
    ModelBatch shortb = {1, 8, ids, NULL, NULL, lab};
    snprintf(name, sizeof name, "model_%s_smaller_batch_ok", tag);
    check(model_forward(m, &shortb, &l, &err) == 0 && l.n_labels == 2 && isfinite(l.loss_sum), name, "%s", err.msg);
    model_free(m);
  }
  ModelConfig c = cfg(MODEL_BERT);
  c.num_attention_heads = 5;
  check(model_new(&c, &err) == NULL && strstr(err.msg, "num_attention_heads"), "model_refuses_heads_not_dividing",
        "%s", err.msg);
  c = cfg(MODEL_BERT);
  c.intermediate_size = 0;
  check(model_new(&c, &err) == NULL && strstr(err.msg, "intermediate_size"), "model_refuses_zero_size", "%s", err.msg);
  /* One validator: model_new refuses what config_validate refuses, in its words
  ** (the 2^31-element caps too, which model_new once lacked). */
  for (int ty = 0; ty < 2; ty++)
    for (int k = 0;; k++) {
      ModelConfig bad = cfg(ty ? MODEL_BERT : MODEL_ROBERTA);
      int r = spoil(&bad, k);
      if (r < 0) break;
      if (!r) continue;
      Err ev = {0}, em = {0};
      int rv = config_validate(&bad, &ev);
      Model *m = model_new(&bad, &em);
      char name[96];
      snprintf(name, sizeof name, "model_new_validates_like_config_%s_%d", ty ? "bert" : "roberta", k);
      check(rv == -1 && !m && !strcmp(ev.msg, em.msg), name, "config_validate %d (%s), model_new %s (%s)", rv, ev.msg,
            m ? "accepted" : "refused", em.msg);
      model_free(m);
    }
  model_free(NULL);
  threads_are_per_model();
  activation_table_fits();
  logits_at_rows_same_bits();
  threads_same_bits();
  return check_exit();
}
