/* libFuzzer harness: config.json (engine/nn/config.h), as text (config_parse) and as a
** file (config_load: size and NUL checks). An accepted config passes config_validate,
** and what config_to_json writes for it parses back to the same fields (doubles bit
** for bit), so a model saved and loaded again is the same model. config_parse_stated
** reads the same fields (its validation left to the caller), and what config_to_json
** writes states every field a run would otherwise take from its tokenizer. */
#include <stdint.h>
#include <string.h>

#include "engine/nn/config.h"
#include "tests/fuzz/fuzz_common.h"

static void check_same(const ModelConfig *a, const ModelConfig *b) {
#define SAME_INT(f) FUZZ_CHECK(a->f == b->f, #f ": %d written, %d read back", (int)a->f, (int)b->f)
#define SAME_DBL(f) FUZZ_CHECK(!memcmp(&a->f, &b->f, sizeof a->f), #f ": %.17g written, %.17g read back", a->f, b->f)
  SAME_INT(model_type); SAME_INT(vocab_size); SAME_INT(hidden_size); SAME_INT(num_hidden_layers);
  SAME_INT(num_attention_heads); SAME_INT(intermediate_size); SAME_INT(max_position_embeddings);
  SAME_INT(type_vocab_size); SAME_INT(pad_token_id); SAME_INT(bos_token_id); SAME_INT(eos_token_id);
  SAME_DBL(layer_norm_eps); SAME_DBL(hidden_dropout_prob); SAME_DBL(attention_probs_dropout_prob);
  SAME_DBL(initializer_range);
  SAME_INT(task); SAME_INT(num_labels); SAME_INT(problem_type); SAME_DBL(classifier_dropout);
  FUZZ_CHECK(!memcmp(a->label_names, b->label_names, sizeof a->label_names), "label names differ after a round trip");
#undef SAME_INT
#undef SAME_DBL
}

/* Seeds: what config_to_json writes for the presets, a BERT config, and both kinds of classifier. */
static void write_seeds(const char *dir) {
  const char *presets[] = {"tiny", "small", "base"}, *seed_names[] = {"bert", "roberta_cls", "bert_cls"};
  for (int i = 0; i < 6; i++) {
    ModelConfig c;
    Err err = {0};
    config_preset(presets[i < 3 ? i : 0], &c, &err);
    if (i == 3 || i == 5) { c.model_type = MODEL_BERT; c.pad_token_id = 0; c.bos_token_id = -1; c.eos_token_id = -1; c.type_vocab_size = 2; }
    if (i >= 4) {
      const char *labels[] = {"card_arrival", "caf\xc3\xa9 \"quoted\"", "top_up_failed"};
      config_set_labels(&c, 3, labels, &err);
      if (i == 4) c.classifier_dropout = 0.25;
    }
    char *json = config_to_json(&c), name[64];
    snprintf(name, sizeof name, "%s.json", i < 3 ? presets[i] : seed_names[i - 3]);
    fuzz_write_file(fuzz_seed_path(dir, name), json, strlen(json));
    free(json);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  ModelConfig c, fc;
  Err err = {0}, ferr = {0};
  int rc = config_parse(text, &c, &err);
  int frc = config_load(fuzz_memfd_path(data, size), &fc, &ferr);
  int has_nul = strlen(text) != size;
  if (!has_nul && size <= (1u << 20)) {
    FUZZ_CHECK(rc == frc, "text %s, file %s", rc ? err.msg : "accepted", frc ? ferr.msg : "accepted");
    if (rc == 0) check_same(&c, &fc);
  } else {
    FUZZ_CHECK(frc != 0, "config_load accepted a file with a NUL byte or over 1 MiB");
  }
  ModelConfig sc;
  unsigned stated = 0;
  Err serr = {0};
  int src = config_parse_stated(text, &sc, &stated, &serr);
  FUZZ_CHECK(stated <= 31u, "stated bits 0x%x outside CONFIG_STATED_*", stated);
  if (src == 0) {
    /* config_parse is config_parse_stated then config_validate. */
    int vrc = config_validate(&sc, &serr);
    FUZZ_CHECK((vrc == 0) == (rc == 0), "stated parse then validate %s, config_parse %s", vrc ? serr.msg : "accepted",
               rc ? err.msg : "accepted");
    if (rc == 0) check_same(&c, &sc);
  } else {
    FUZZ_CHECK(rc != 0, "config_parse accepted what config_parse_stated refuses: %s", serr.msg);
  }
  free(text);
  if (rc) {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(config_validate(&c, &err) == 0, "config_parse accepted what config_validate refuses: %s", err.msg);
  FUZZ_CHECK(config_head_dim(&c) * c.num_attention_heads == c.hidden_size, "head size");
  char *json = config_to_json(&c);
  FUZZ_CHECK(json, "config_to_json failed");
  ModelConfig back;
  FUZZ_CHECK(config_parse(json, &back, &err) == 0, "the written config.json is refused: %s\n%s", err.msg, json);
  check_same(&c, &back);
  /* Written out, every id is stated (an absent bos / eos of RoBERTa as null; BERT's is left out, its class default). */
  FUZZ_CHECK(config_parse_stated(json, &back, &stated, &err) == 0, "the written config.json is refused: %s", err.msg);
  unsigned want = CONFIG_STATED_VOCAB | CONFIG_STATED_PAD | CONFIG_STATED_MAX_POS;
  if (c.model_type == MODEL_ROBERTA || c.bos_token_id >= 0) want |= CONFIG_STATED_BOS;
  if (c.model_type == MODEL_ROBERTA || c.eos_token_id >= 0) want |= CONFIG_STATED_EOS;
  FUZZ_CHECK(stated == want, "the written config.json states 0x%x, expected 0x%x\n%s", stated, want, json);
  free(json);
  return 0;
}
