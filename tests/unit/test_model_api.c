/* The model's contract outside the numbers: the HF tensor table covers the one
** parameter buffer exactly, HF initialisation, and bad input refused with a
** message (never a crash). */
#include <math.h>
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
  return check_exit();
}
