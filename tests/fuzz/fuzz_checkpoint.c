/* libFuzzer harness: checkpoints (engine/io/checkpoint.h) over tiny models built in the
** process: model weights (model.safetensors with HF names, into a RoBERTa and a BERT
** model) and training state (optimizer moments, step, RNG, data position). Checks:
** a refused file leaves the model, the optimizer and the state exactly as they were
** (the header's promise); an accepted one holds finite numbers where the reader
** copied them, and what it loaded, written again with ckpt_weights_bytes /
** ckpt_state_bytes, loads back to the same values. */
#include <stdint.h>
#include <string.h>

#include "engine/io/checkpoint.h"
#include "tests/fuzz/fuzz_common.h"

typedef struct Fixture {
  Model *m;
  AdamW *o;
  float *params0, *m0, *v0;   /* the state every input starts from */
  size_t n;
} Fixture;

static Fixture rob, bert;

static void make(Fixture *f, ModelType type) {
  ModelConfig c;
  Err err = {0};
  config_preset("tiny", &c, &err);
  c.model_type = type;
  c.vocab_size = 11; c.hidden_size = 4; c.num_attention_heads = 2; c.num_hidden_layers = 1; c.intermediate_size = 6;
  c.max_position_embeddings = 8; c.type_vocab_size = type == MODEL_BERT ? 2 : 1;
  if (type == MODEL_BERT) { c.pad_token_id = 0; c.bos_token_id = -1; c.eos_token_id = -1; }
  f->m = model_new(&c, &err);
  FUZZ_CHECK(f->m, "model: %s", err.msg);
  model_init_weights(f->m, 3);
  f->n = model_num_params(f->m);
  int nt = model_tensor_count(f->m);
  AdamWSegment *segs = calloc((size_t)nt, sizeof *segs);
  for (int i = 0; i < nt; i++) {
    const ModelTensor *t = model_tensor(f->m, i);
    segs[i] = (AdamWSegment){t->offset, t->numel, t->decay};
  }
  AdamWConfig oc = adamw_defaults();
  f->o = adamw_new(&oc, f->n, segs, nt, &err);
  FUZZ_CHECK(f->o, "adamw: %s", err.msg);
  free(segs);
  for (size_t i = 0; i < f->n; i++) { f->o->m[i] = 0.001f * (float)i; f->o->v[i] = 0.5f + (float)i; }
  f->o->step = 12;
  size_t bytes = f->n * sizeof(float);
  f->params0 = malloc(bytes); f->m0 = malloc(bytes); f->v0 = malloc(bytes);
  memcpy(f->params0, model_params(f->m), bytes);
  memcpy(f->m0, f->o->m, bytes);
  memcpy(f->v0, f->o->v, bytes);
}

static void reset(Fixture *f) {
  size_t bytes = f->n * sizeof(float);
  memcpy(model_params(f->m), f->params0, bytes);
  memcpy(f->o->m, f->m0, bytes);
  memcpy(f->o->v, f->v0, bytes);
  f->o->step = 12;
}

static int unchanged(Fixture *f) {
  size_t bytes = f->n * sizeof(float);
  return !memcmp(model_params(f->m), f->params0, bytes) && !memcmp(f->o->m, f->m0, bytes) && !memcmp(f->o->v, f->v0, bytes) &&
         f->o->step == 12;
}

static CkptState sample_state(void) {
  CkptState s;
  memset(&s, 0, sizeof s);
  s.step = 12; s.epoch = 1; s.position = 3;
  rng_seed(&s.rng, 99);
  s.n_extra = 6;
  for (int i = 0; i < 6; i++) s.extra[i] = 0x0123456789abcdefULL * (uint64_t)(i + 1);
  return s;
}

static void write_seeds(const char *dir) {
  char p[1024];
  unsigned char *b;
  size_t len;
  Err err = {0};
  Fixture *fs[2] = {&rob, &bert};
  const char *names[2] = {"roberta", "bert"};
  for (int k = 0; k < 2; k++)
    for (int bf16 = 0; bf16 < 2; bf16++) {
      FUZZ_CHECK(ckpt_weights_bytes(fs[k]->m, bf16, &b, &len, &err) == 0, "%s", err.msg);
      snprintf(p, sizeof p, "%s/weights_%s_%s.safetensors", dir, names[k], bf16 ? "bf16" : "f32");
      fuzz_write_file(p, b, len);
      free(b);
    }
  CkptState s = sample_state();
  FUZZ_CHECK(ckpt_state_bytes(rob.m, rob.o, &s, &b, &len, &err) == 0, "%s", err.msg);
  snprintf(p, sizeof p, "%s/state_roberta.safetensors", dir);
  fuzz_write_file(p, b, len);
  free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  make(&rob, MODEL_ROBERTA);
  make(&bert, MODEL_BERT);
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

static void try_weights(Fixture *f, const uint8_t *data, size_t size) {
  Err err = {0};
  if (ckpt_load_weights_memory(f->m, data, size, &err) != 0) {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
    FUZZ_CHECK(unchanged(f), "refused weights changed the model: %s", err.msg);
    return;
  }
  unsigned char *b;
  size_t len;
  size_t bytes = f->n * sizeof(float);
  float *loaded = malloc(bytes);
  memcpy(loaded, model_params(f->m), bytes);
  FUZZ_CHECK(ckpt_weights_bytes(f->m, 0, &b, &len, &err) == 0, "ckpt_weights_bytes: %s", err.msg);
  memcpy(model_params(f->m), f->params0, bytes);
  FUZZ_CHECK(ckpt_load_weights_memory(f->m, b, len, &err) == 0, "the written weights are refused: %s", err.msg);
  FUZZ_CHECK(!memcmp(model_params(f->m), loaded, bytes), "weights changed when written and read back");
  free(b);
  free(loaded);
  reset(f);
}

static void try_state(Fixture *f, const uint8_t *data, size_t size) {
  Err err = {0};
  CkptState s0 = sample_state(), s = s0;
  if (ckpt_load_state_memory(f->m, f->o, &s, data, size, &err) != 0) {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
    FUZZ_CHECK(unchanged(f) && !memcmp(&s, &s0, sizeof s), "a refused state changed the optimizer or state: %s", err.msg);
    return;
  }
  FUZZ_CHECK(s.n_extra >= 0 && s.n_extra <= CKPT_EXTRA_WORDS, "n_extra %d", s.n_extra);
  FUZZ_CHECK(s.step >= 0 && s.epoch >= 0 && s.position >= 0 && f->o->step == (long)s.step, "step/epoch/position");
  FUZZ_CHECK(s.rng.s[0] | s.rng.s[1] | s.rng.s[2] | s.rng.s[3], "an all-zero generator accepted");
  size_t bytes = f->n * sizeof(float);
  float *m1 = malloc(bytes), *v1 = malloc(bytes);
  memcpy(m1, f->o->m, bytes);
  memcpy(v1, f->o->v, bytes);
  unsigned char *b;
  size_t len;
  FUZZ_CHECK(ckpt_state_bytes(f->m, f->o, &s, &b, &len, &err) == 0, "ckpt_state_bytes: %s", err.msg);
  reset(f);
  CkptState back = s0;
  FUZZ_CHECK(ckpt_load_state_memory(f->m, f->o, &back, b, len, &err) == 0, "the written state is refused: %s", err.msg);
  FUZZ_CHECK(!memcmp(f->o->m, m1, bytes) && !memcmp(f->o->v, v1, bytes), "moments changed when written and read back");
  FUZZ_CHECK(back.step == s.step && back.epoch == s.epoch && back.position == s.position && back.n_extra == s.n_extra &&
                 !memcmp(back.rng.s, s.rng.s, sizeof s.rng.s) && !memcmp(back.extra, s.extra, (size_t)s.n_extra * 8),
             "state changed when written and read back");
  free(b);
  free(m1);
  free(v1);
  reset(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try_weights(&rob, data, size);
  try_weights(&bert, data, size);
  try_state(&rob, data, size);
  return 0;
}
