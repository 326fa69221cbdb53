/* Set-up shared by the C tests: the small model configs they build models from, and
** a private temporary folder. Each test changes what it needs on the copy it gets. */
#ifndef MASKD_TESTS_FIXTURES_H
#define MASKD_TESTS_FIXTURES_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/config.h"

/* Makes a private folder NAME.XXXXXX under $MASKD_TMP (tests/run's, removed after the
** run), else under /tmp, and writes its path into dir (size bytes): 0, or -1 when it
** cannot (dir then holds the template, for the message). */
static inline int fixture_tmpdir(char *dir, size_t size, const char *name) {
  const char *tmp = getenv("MASKD_TMP");
  snprintf(dir, size, "%s/%s.XXXXXX", tmp ? tmp : "/tmp", name);
  return mkdtemp(dir) ? 0 : -1;
}

/* The "tiny" preset (RoBERTa, pad 3, [CLS] 0, [SEP] 1, layer_norm_eps 1e-5, dropout
** 0.1, initializer_range 0.02) cut down to a model that runs in milliseconds: `vocab`
** ids, hidden 16, 2 layers of 2 heads, intermediate 32, 24 positions (inputs of up to
** 20 tokens, RoBERTa's positions starting after pad 3). */
static inline ModelConfig fixture_tiny(int vocab) {
  ModelConfig c;
  config_preset("tiny", &c, NULL);
  c.vocab_size = vocab;
  c.hidden_size = 16; c.num_hidden_layers = 2; c.num_attention_heads = 2; c.intermediate_size = 32;
  c.max_position_embeddings = 24;
  return c;
}

/* A config with every field set here, none from a preset: the shapes given, the
** type's token-type count (1 for RoBERTa, 2 for BERT) and layer_norm_eps (1e-5,
** 1e-12), pad 1, bos/eos 0, initializer_range 0.02, no dropout. */
static inline ModelConfig fixture_config(ModelType type, int vocab, int hidden, int layers, int heads,
                                         int intermediate, int positions) {
  ModelConfig c = {0};
  c.model_type = type;
  c.vocab_size = vocab; c.hidden_size = hidden; c.num_hidden_layers = layers; c.num_attention_heads = heads;
  c.intermediate_size = intermediate; c.max_position_embeddings = positions;
  c.type_vocab_size = type == MODEL_BERT ? 2 : 1;
  c.pad_token_id = 1;
  c.layer_norm_eps = type == MODEL_BERT ? 1e-12 : 1e-5;
  c.initializer_range = 0.02;
  return c;
}

#endif
