/* Model configuration: the fields of a Hugging Face BertConfig / RobertaConfig
** that change the numbers, read from and written to config.json. */
#ifndef MASKD_CONFIG_H
#define MASKD_CONFIG_H
#include <stddef.h>
#include "engine/core/err.h"

typedef enum { MODEL_ROBERTA = 0, MODEL_BERT = 1 } ModelType;

/* What sits on the encoder (config.json's "architectures"): the masked-LM head
** (*ForMaskedLM, the default when absent; *ForPreTraining reads as one), a sequence
** classifier (*ForSequenceClassification: RoBERTa's classifier.dense + tanh + out_proj
** on the first token, BERT's pooler + classifier), or nothing (BertModel /
** RobertaModel, MODEL_TASK_ENCODER: an imported base checkpoint, kept to be
** fine-tuned; model_new refuses it, since there is no head to compute). */
typedef enum { MODEL_TASK_MLM = 0, MODEL_TASK_SEQ_CLS = 1, MODEL_TASK_ENCODER = 2 } ModelTask;

/* config.json's problem_type for a classifier: single-label (softmax, cross-entropy:
** the default for num_labels > 1, what fine-tuning trains) or multi-label (sigmoid;
** served, not trained). */
typedef enum { MODEL_SINGLE_LABEL = 0, MODEL_MULTI_LABEL = 1 } ModelProblem;

/* The most classes, and the bytes of all their names (NUL-terminated, back to back)
** a config holds: BANKING77's 77 names take about 2 KB. */
#define CONFIG_MAX_LABELS 1024
#define CONFIG_LABEL_BYTES 32768

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
  ModelTask task;                /* MODEL_TASK_MLM unless architectures names a classifier */
  int num_labels;                /* classes of a classifier (>= 2); 0 for a masked LM */
  ModelProblem problem_type;
  double classifier_dropout;     /* < 0: null (the classifier uses hidden_dropout_prob, as HF) */
  /* id2label: the names of classes 0..num_labels-1, each NUL-terminated, back to back
  ** (config_label() finds one); names are unique, non-empty UTF-8. */
  char label_names[CONFIG_LABEL_BYTES];
} ModelConfig;

/* Parses config.json text; refuses nonsense with a message naming the field (ERR_BAD_INPUT).
** A field the text leaves out takes BertConfig's / RobertaConfig's default. */
int config_parse(const char *json_text, ModelConfig *out, Err *err);
/* A config.json is a few hundred bytes; anything over 1 MiB is not one. */
#define CONFIG_MAX_FILE ((size_t)1 << 20)
/* Reads and parses a config.json file (a regular file of at most CONFIG_MAX_FILE bytes). */
int config_load(const char *path, ModelConfig *out, Err *err);

/* The fields a training run may take from its tokenizer when the config.json leaves
** them out (config_parse_stated says which the text stated). An explicit null for
** bos_token_id / eos_token_id is stated: transformers keeps None, "no such token". */
enum {
  CONFIG_STATED_VOCAB = 1 << 0,     /* vocab_size */
  CONFIG_STATED_PAD = 1 << 1,       /* pad_token_id */
  CONFIG_STATED_BOS = 1 << 2,       /* bos_token_id */
  CONFIG_STATED_EOS = 1 << 3,       /* eos_token_id */
  CONFIG_STATED_MAX_POS = 1 << 4    /* max_position_embeddings */
};
/* config_parse, and *stated gets the CONFIG_STATED_* bits of the fields the text
** states. The fields it leaves out hold the class defaults, and the ranges that depend
** on them are not checked here: the caller fills those fields (from the tokenizer)
** and then applies config_validate(). */
int config_parse_stated(const char *json_text, ModelConfig *out, unsigned *stated, Err *err);
/* config_load with config_parse_stated's *stated (and its deferred validation). */
int config_load_stated(const char *path, ModelConfig *out, unsigned *stated, Err *err);
/* Checks sizes and ranges (hidden divisible by heads, positive sizes, ...): the one validator, which config_parse() and model_new() both apply. */
int config_validate(const ModelConfig *c, Err *err);
/* Fills a named preset: "tiny", "small" or "base" (RoBERTa, vocab 8000 unless changed). */
int config_preset(const char *name, ModelConfig *out, Err *err);
/* HF config.json text (architectures, model_type, all fields; a classifier's
** id2label, label2id, problem_type and classifier_dropout too); caller frees. */
char *config_to_json(const ModelConfig *c);
/* The same with "torch_dtype" given ("float32", "bfloat16": what model.safetensors holds). */
char *config_to_json_dtype(const ModelConfig *c, const char *torch_dtype);
/* Writes config_to_json() to path, atomically (a temporary beside it, then a rename). */
int config_save(const ModelConfig *c, const char *path, Err *err);
/* config_save() of config_to_json_dtype(c, torch_dtype). */
int config_save_dtype(const ModelConfig *c, const char *torch_dtype, const char *path, Err *err);
/* Makes c a classifier of n classes named names[0..n) (id order): task, num_labels,
** label_names (single-label problem). ERR_INVALID for n outside [2, CONFIG_MAX_LABELS],
** an empty, duplicate or non-UTF-8 name, or names longer than CONFIG_LABEL_BYTES in all. */
int config_set_labels(ModelConfig *c, int n, const char *const *names, Err *err);
/* The name of class id (0 <= id < num_labels), else NULL. O(id). */
const char *config_label(const ModelConfig *c, int id);
/* Fills names[0..num_labels) with pointers into c->label_names (valid while c is). */
void config_label_list(const ModelConfig *c, const char **names);
/* The HF architecture name: "RobertaForMaskedLM", "BertForSequenceClassification", "BertModel", ... */
const char *config_architecture(const ModelConfig *c);
/* The task an architecture name gives, the one rule config_parse, the store and the
** Hub's listings share: Roberta or Bert followed by ForMaskedLM or ForPreTraining (a
** masked LM; NULL, no name, too), ForSequenceClassification, or Model; -1 for any
** other name. (config_parse also refuses a family that differs from model_type.) */
int config_task_of_architecture(const char *name);
/* The Hugging Face pipeline a task serves: "fill-mask", "text-classification", or
** NULL for a bare encoder (and a task < 0), which serves none. */
const char *config_task_pipeline(int task);

/* Positions before a sequence's first token's: RoBERTa's pad_token_id + 1 (its position
** ids start after the padding index), BERT's 0. */
int config_position_offset(const ModelConfig *c);
/* Tokens a sequence may hold: max_position_embeddings less config_position_offset. */
int config_max_tokens(const ModelConfig *c);
/* Size of each attention head: hidden_size / num_attention_heads. */
int config_head_dim(const ModelConfig *c);

#endif
