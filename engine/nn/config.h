/* Model configuration: the fields of a Hugging Face BertConfig / RobertaConfig
** that change the numbers, read from and written to config.json. */
#ifndef MASKD_CONFIG_H
#define MASKD_CONFIG_H
#include <stddef.h>
#include "engine/core/err.h"

typedef enum { MODEL_ROBERTA = 0, MODEL_BERT = 1 } ModelType;

typedef struct ModelConfig {
  ModelType model_type;          /* "roberta" or "bert" */
  int vocab_size;
  int hidden_size;
  int num_hidden_layers;
  int num_attention_heads;
  int intermediate_size;
  int max_position_embeddings;
  int type_vocab_size;
  int pad_token_id;
  int bos_token_id;              /* written to config.json; -1 = absent */
  int eos_token_id;              /* written to config.json; -1 = absent */
  double layer_norm_eps;
  double hidden_dropout_prob;
  double attention_probs_dropout_prob;
  double initializer_range;
} ModelConfig;

/* Parses config.json text; refuses nonsense with a message naming the field (ERR_BAD_INPUT). */
int config_parse(const char *json_text, ModelConfig *out, Err *err);
/* A config.json is a few hundred bytes; anything over 1 MiB is not one. */
#define CONFIG_MAX_FILE ((size_t)1 << 20)
/* Reads and parses a config.json file (a regular file of at most CONFIG_MAX_FILE bytes). */
int config_load(const char *path, ModelConfig *out, Err *err);
/* Checks sizes and ranges (hidden divisible by heads, positive sizes, ...): the one validator, which config_parse() and model_new() both apply. */
int config_validate(const ModelConfig *c, Err *err);
/* Fills a named preset: "tiny", "small" or "base" (RoBERTa, vocab 8000 unless changed). */
int config_preset(const char *name, ModelConfig *out, Err *err);
/* HF config.json text (architectures, model_type, all fields); caller frees. */
char *config_to_json(const ModelConfig *c);
/* The same with "torch_dtype" given ("float32", "bfloat16": what model.safetensors holds). */
char *config_to_json_dtype(const ModelConfig *c, const char *torch_dtype);
/* Writes config_to_json() to path, atomically (a temporary beside it, then a rename). */
int config_save(const ModelConfig *c, const char *path, Err *err);
/* Size of each attention head: hidden_size / num_attention_heads. */
int config_head_dim(const ModelConfig *c);

#endif
