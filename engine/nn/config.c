/* config.json <-> ModelConfig. Reading follows transformers' BertConfig /
** RobertaConfig: a field that is absent takes the class default, keys we do not
** use are ignored (real configs carry many), and anything that would make the
** model compute something other than the HF model is refused by name. */
#include "engine/core/json_text.h"
#include "engine/nn/config.h"
#include "engine/core/buf.h"
#include "engine/core/files.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each dimension and each tensor stays below 2^31 elements so that the model's
** int arithmetic on rows and columns cannot overflow. */
#define CONFIG_MAX_DIM (1 << 24)
#define CONFIG_MAX_TENSOR ((int64_t)INT32_MAX)

/* The defaults of transformers' BertConfig.__init__; RobertaConfig has the same
** ones except the special-token ids (pad 1, bos 0, eos 2). */
static void config_hf_defaults(ModelType type, ModelConfig *c) {
  memset(c, 0, sizeof *c);
  c->model_type = type;
  c->vocab_size = 30522;
  c->hidden_size = 768;
  c->num_hidden_layers = 12;
  c->num_attention_heads = 12;
  c->intermediate_size = 3072;
  c->max_position_embeddings = 512;
  c->type_vocab_size = 2;
  c->layer_norm_eps = 1e-12;
  c->hidden_dropout_prob = 0.1;
  c->attention_probs_dropout_prob = 0.1;
  c->initializer_range = 0.02;
  c->classifier_dropout = -1;
  if (type == MODEL_ROBERTA) {
    c->pad_token_id = 1; c->bos_token_id = 0; c->eos_token_id = 2;
  } else {
    c->pad_token_id = 0; c->bos_token_id = -1; c->eos_token_id = -1;
  }
}

static const char *json_type_name(const json_t *v) {
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
  }
  return "?";
}

/* Integer field: absent keeps *out; null allowed only when null_value is given
** (bos/eos may be null in HF configs). A real with an integral value (2.0) is
** accepted because Python's json writes what the user put in. */
static int get_int(json_t *o, const char *key, int *out, const int *null_value, Err *err) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (json_is_null(v) && null_value) { *out = *null_value; return 0; }
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < INT32_MIN || i > INT32_MAX) return err_set(err, "config: %s: %lld is out of range", key, (long long)i);
    *out = (int)i;
    return 0;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d == floor(d) && fabs(d) <= INT32_MAX) { *out = (int)d; return 0; }
  }
  return err_set(err, "config: %s: expected an integer, got %s", key, json_type_name(v));
}

static int get_num(json_t *o, const char *key, double *out, Err *err) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (!json_is_number(v)) return err_set(err, "config: %s: expected a number, got %s", key, json_type_name(v));
  *out = json_number_value(v);
  return 0;
}

/* A string field that must equal one accepted value (when present). */
static int want_string(json_t *o, const char *key, const char *accepted, const char *why, Err *err) {
  json_t *v = json_object_get(o, key);
  if (!v) return 0;
  if (!json_is_string(v)) return err_set(err, "config: %s: expected a string, got %s", key, json_type_name(v));
  if (strcmp(json_string_value(v), accepted) != 0)
    return err_set(err, "config: %s: \"%s\" is not supported (%s)", key, json_string_value(v), why);
  return 0;
}

/* A boolean field that must have one value (when present and not null). */
static int want_bool(json_t *o, const char *key, int accepted, const char *why, Err *err) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) return 0;
  if (!json_is_boolean(v)) return err_set(err, "config: %s: expected a boolean, got %s", key, json_type_name(v));
  if (json_is_true(v) != accepted)
    return err_set(err, "config: %s: %s is not supported (%s)", key, accepted ? "false" : "true", why);
  return 0;
}

/* The class names of id2label ({"0": name, ...}: every id from 0 to n-1 once). */
static int parse_id2label(json_t *map, ModelConfig *c, Err *err) {
  if (!json_is_object(map)) return err_set(err, "config: id2label: expected an object, got %s", json_type_name(map));
  size_t n = json_object_size(map);
  if (n < 2 || n > CONFIG_MAX_LABELS)
    return err_set(err, "config: id2label: %zu labels, a classifier needs 2 to %d", n, CONFIG_MAX_LABELS);
  const char **names = calloc(n, sizeof *names);
  if (!names) return err_setk(err, ERR_NOMEM, "config: out of memory");
  const char *key;
  json_t *v;
  int rc = 0;
  json_object_foreach(map, key, v) {
    char *end;
    errno = 0;
    long id = strtol(key, &end, 10);
    if (!*key || *end || errno || id < 0 || (size_t)id >= n || names[id]) {
      rc = err_set(err, "config: id2label: key \"%s\" is not one of the ids 0..%zu (each once)", key, n - 1);
      break;
    }
    if (!json_is_string(v)) { rc = err_set(err, "config: id2label: %s: expected a string, got %s", key, json_type_name(v)); break; }
    names[id] = json_string_value(v);
  }
  if (!rc) rc = config_set_labels(c, (int)n, names, err);
  free(names);
  if (rc) err_prefix(err, "config");
  return rc;
}

/* architectures, id2label / num_labels, problem_type and classifier_dropout: what makes
** a config a sequence classifier (transformers takes num_labels from id2label when
** both are given, names the classes LABEL_i when only num_labels is, and has 2 of them
** when neither is). */
static int parse_task(json_t *root, ModelConfig *c, Err *err) {
  json_t *arch = json_object_get(root, "architectures");
  if (arch && !json_is_null(arch)) {
    if (!json_is_array(arch) || json_array_size(arch) != 1 || !json_is_string(json_array_get(arch, 0)))
      return err_set(err, "config: architectures: expected a list of one name");
    const char *a = json_string_value(json_array_get(arch, 0));
    const char *fam = c->model_type == MODEL_ROBERTA ? "Roberta" : "Bert";
    size_t fl = strlen(fam);
    if (strncmp(a, fam, fl) != 0)
      return err_set(err, "config: architectures: \"%s\" does not match model_type %s", a, c->model_type == MODEL_ROBERTA ? "roberta" : "bert");
    int task = config_task_of_architecture(a);
    if (task < 0)
      return err_set(err, "config: architectures: \"%s\" is not supported (expected %sForMaskedLM, %sForSequenceClassification or %sModel)", a, fam, fam, fam);
    c->task = (ModelTask)task;
  }
  /* Every config's (HF's RobertaConfig and BertConfig hold it): a masked LM's is what a
  ** classifier fine-tuned from it starts with. */
  json_t *cd = json_object_get(root, "classifier_dropout");
  if (cd && !json_is_null(cd) && get_num(root, "classifier_dropout", &c->classifier_dropout, err)) return -1;
  if (c->task != MODEL_TASK_SEQ_CLS) return 0;
  json_t *map = json_object_get(root, "id2label");
  /* PretrainedConfig's default is 2 labels (LABEL_0, LABEL_1), and save_pretrained leaves
  ** id2label out for exactly that default (num_labels is never written): every binary
  ** classifier transformers saves with default names has neither field. */
  int n = 2;
  if (get_int(root, "num_labels", &n, NULL, err)) return -1;
  if (map && !json_is_null(map)) {
    if (parse_id2label(map, c, err)) return -1;
  } else {
    if (n < 2 || n > CONFIG_MAX_LABELS)
      return err_set(err, "config: num_labels: %d labels, a classifier needs 2 to %d", n, CONFIG_MAX_LABELS);
    char buf[32];
    const char **names = calloc((size_t)n, sizeof *names);
    char *text = malloc((size_t)n * sizeof buf);
    if (!names || !text) { free(names); free(text); return err_setk(err, ERR_NOMEM, "config: out of memory"); }
    for (int i = 0; i < n; i++) {
      snprintf(text + (size_t)i * sizeof buf, sizeof buf, "LABEL_%d", i);
      names[i] = text + (size_t)i * sizeof buf;
    }
    int rc = config_set_labels(c, n, names, err);
    free(names); free(text);
    if (rc) return -1;
  }
  json_t *pt = json_object_get(root, "problem_type");
  if (pt && !json_is_null(pt)) {
    const char *p = json_is_string(pt) ? json_string_value(pt) : "";
    if (!strcmp(p, "single_label_classification")) c->problem_type = MODEL_SINGLE_LABEL;
    else if (!strcmp(p, "multi_label_classification")) c->problem_type = MODEL_MULTI_LABEL;
    else return err_set(err, "config: problem_type: expected \"single_label_classification\" or \"multi_label_classification\"");
  }
  return 0;
}

/* The CONFIG_STATED_* bit of each field a run may take from its tokenizer. */
static const struct { const char *key; unsigned bit; } stated_keys[] = {
  {"vocab_size", CONFIG_STATED_VOCAB}, {"pad_token_id", CONFIG_STATED_PAD}, {"bos_token_id", CONFIG_STATED_BOS},
  {"eos_token_id", CONFIG_STATED_EOS}, {"max_position_embeddings", CONFIG_STATED_MAX_POS},
};

/* config_parse's work; with stated given, also which of stated_keys the text has
** (null included), and the fields' joint validation is left to the caller. */
static int parse_config(const char *json_text, ModelConfig *out, unsigned *stated, Err *err) {
  if (!json_text) return err_setk(err, ERR_BAD_INPUT, "config: no text");
  json_error_t je;
  json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
  if (!root) return err_setk(err, ERR_BAD_INPUT, "config: malformed JSON at line %d, column %d: %s", je.line, je.column, json_error_message(&je));
  int rc = -1;
  ModelConfig c;
  if (!json_is_object(root)) { err_set(err, "config: expected a JSON object, got %s", json_type_name(root)); goto done; }

  json_t *mt = json_object_get(root, "model_type");
  if (!mt) { err_set(err, "config: model_type: missing (expected \"roberta\" or \"bert\")"); goto done; }
  if (!json_is_string(mt)) { err_set(err, "config: model_type: expected a string, got %s", json_type_name(mt)); goto done; }
  const char *mts = json_string_value(mt);
  if (strcmp(mts, "roberta") == 0) config_hf_defaults(MODEL_ROBERTA, &c);
  else if (strcmp(mts, "bert") == 0) config_hf_defaults(MODEL_BERT, &c);
  else { err_set(err, "config: model_type: \"%s\" is not supported (expected \"roberta\" or \"bert\")", mts); goto done; }

  const int absent = -1;
  if (get_int(root, "vocab_size", &c.vocab_size, NULL, err) ||
      get_int(root, "hidden_size", &c.hidden_size, NULL, err) ||
      get_int(root, "num_hidden_layers", &c.num_hidden_layers, NULL, err) ||
      get_int(root, "num_attention_heads", &c.num_attention_heads, NULL, err) ||
      get_int(root, "intermediate_size", &c.intermediate_size, NULL, err) ||
      get_int(root, "max_position_embeddings", &c.max_position_embeddings, NULL, err) ||
      get_int(root, "type_vocab_size", &c.type_vocab_size, NULL, err) ||
      get_int(root, "pad_token_id", &c.pad_token_id, NULL, err) ||
      get_int(root, "bos_token_id", &c.bos_token_id, &absent, err) ||
      get_int(root, "eos_token_id", &c.eos_token_id, &absent, err) ||
      get_num(root, "layer_norm_eps", &c.layer_norm_eps, err) ||
      get_num(root, "hidden_dropout_prob", &c.hidden_dropout_prob, err) ||
      get_num(root, "attention_probs_dropout_prob", &c.attention_probs_dropout_prob, err) ||
      get_num(root, "initializer_range", &c.initializer_range, err))
    goto done;

  /* Settings that change the computation away from the model the engine implements;
  ** each may be absent (BertConfig's defaults are the accepted values). */
  if (want_string(root, "hidden_act", "gelu", "only \"gelu\", the exact erf GELU, is implemented", err) ||
      want_string(root, "position_embedding_type", "absolute", "only absolute position embeddings are implemented", err) ||
      want_bool(root, "is_decoder", 0, "the engine is a bidirectional encoder", err) ||
      want_bool(root, "add_cross_attention", 0, "the engine has no cross-attention", err) ||
      want_bool(root, "tie_word_embeddings", 1, "the MLM decoder is always tied to the word embeddings", err))
    goto done;
  if (parse_task(root, &c, err)) goto done;
  if (stated) {
    *stated = 0;
    for (size_t i = 0; i < sizeof stated_keys / sizeof stated_keys[0]; i++)
      if (json_object_get(root, stated_keys[i].key)) *stated |= stated_keys[i].bit;
  } else if (config_validate(&c, err)) {
    goto done;
  }
  *out = c;
  rc = 0;
done:
  json_decref(root);
  if (rc) err_kind_default(err, ERR_BAD_INPUT);  /* the text is refused, whatever the check */
  return rc;
}

int config_parse(const char *json_text, ModelConfig *out, Err *err) { return parse_config(json_text, out, NULL, err); }

int config_parse_stated(const char *json_text, ModelConfig *out, unsigned *stated, Err *err) {
  unsigned ignored;
  return parse_config(json_text, out, stated ? stated : &ignored, err);
}

static int load_config(const char *path, ModelConfig *out, unsigned *stated, Err *err) {
  size_t n;
  char *buf = files_read_all(path, CONFIG_MAX_FILE, &n, err);
  if (!buf) return -1;
  if (strlen(buf) != n) { free(buf); return err_setk(err, ERR_BAD_INPUT, "%s: contains a NUL byte, not a config.json", path); }
  int rc = parse_config(buf, out, stated, err);
  free(buf);
  if (rc) err_prefix(err, path);
  return rc;
}

int config_load(const char *path, ModelConfig *out, Err *err) { return load_config(path, out, NULL, err); }

int config_load_stated(const char *path, ModelConfig *out, unsigned *stated, Err *err) {
  unsigned ignored;
  return load_config(path, out, stated ? stated : &ignored, err);
}

static int check_size(const char *name, int v, int min, Err *err) {
  if (v < min) return err_set(err, "config: %s: %d must be at least %d", name, v, min);
  if (v > CONFIG_MAX_DIM) return err_set(err, "config: %s: %d is larger than the supported %d", name, v, CONFIG_MAX_DIM);
  return 0;
}

static int check_prob(const char *name, double p, Err *err) {
  if (!(p >= 0 && p < 1)) return err_set(err, "config: %s: %g must be in [0, 1)", name, p);
  return 0;
}

int config_validate(const ModelConfig *c, Err *err) {
  if (c->model_type != MODEL_ROBERTA && c->model_type != MODEL_BERT)
    return err_set(err, "config: model_type: unknown value %d", (int)c->model_type);
  if (check_size("vocab_size", c->vocab_size, 1, err) ||
      check_size("hidden_size", c->hidden_size, 1, err) ||
      check_size("num_hidden_layers", c->num_hidden_layers, 1, err) ||
      check_size("num_attention_heads", c->num_attention_heads, 1, err) ||
      check_size("intermediate_size", c->intermediate_size, 1, err) ||
      check_size("max_position_embeddings", c->max_position_embeddings, 1, err) ||
      check_size("type_vocab_size", c->type_vocab_size, 1, err))
    return -1;
  if (c->num_hidden_layers > 1024) return err_set(err, "config: num_hidden_layers: %d is larger than the supported 1024", c->num_hidden_layers);
  if (c->hidden_size % c->num_attention_heads != 0)
    return err_set(err, "config: hidden_size: %d is not a multiple of num_attention_heads (%d)", c->hidden_size, c->num_attention_heads);
  int64_t h = c->hidden_size;
  if ((int64_t)c->vocab_size * h > CONFIG_MAX_TENSOR)
    return err_set(err, "config: vocab_size: %d x hidden_size %d is more than 2^31 elements", c->vocab_size, c->hidden_size);
  if ((int64_t)c->intermediate_size * h > CONFIG_MAX_TENSOR)
    return err_set(err, "config: intermediate_size: %d x hidden_size %d is more than 2^31 elements", c->intermediate_size, c->hidden_size);
  if ((int64_t)c->max_position_embeddings * h > CONFIG_MAX_TENSOR)
    return err_set(err, "config: max_position_embeddings: %d x hidden_size %d is more than 2^31 elements", c->max_position_embeddings, c->hidden_size);
  if (c->pad_token_id < 0 || c->pad_token_id >= c->vocab_size)
    return err_set(err, "config: pad_token_id: %d is outside the vocabulary [0, %d)", c->pad_token_id, c->vocab_size);
  if (c->bos_token_id < -1 || c->bos_token_id >= c->vocab_size)
    return err_set(err, "config: bos_token_id: %d is outside the vocabulary [0, %d)", c->bos_token_id, c->vocab_size);
  if (c->eos_token_id < -1 || c->eos_token_id >= c->vocab_size)
    return err_set(err, "config: eos_token_id: %d is outside the vocabulary [0, %d)", c->eos_token_id, c->vocab_size);
  /* RoBERTa numbers real tokens from pad_token_id + 1, so the table needs room past it. */
  if (c->model_type == MODEL_ROBERTA && c->max_position_embeddings <= c->pad_token_id + 1)
    return err_set(err, "config: max_position_embeddings: %d leaves no position for RoBERTa (positions start at pad_token_id + 1 = %d)",
                   c->max_position_embeddings, c->pad_token_id + 1);
  if (!(c->layer_norm_eps > 0 && c->layer_norm_eps < 1))
    return err_set(err, "config: layer_norm_eps: %g must be in (0, 1)", c->layer_norm_eps);
  if (check_prob("hidden_dropout_prob", c->hidden_dropout_prob, err) ||
      check_prob("attention_probs_dropout_prob", c->attention_probs_dropout_prob, err))
    return -1;
  if (!(c->initializer_range > 0 && c->initializer_range <= 10))
    return err_set(err, "config: initializer_range: %g must be in (0, 10]", c->initializer_range);
  if (c->task == MODEL_TASK_MLM || c->task == MODEL_TASK_ENCODER) {
    if (c->num_labels != 0) return err_set(err, "config: num_labels: %d on a %s", c->num_labels, c->task == MODEL_TASK_MLM ? "masked LM" : "base model");
    return 0;
  }
  if (c->task != MODEL_TASK_SEQ_CLS) return err_set(err, "config: task: unknown value %d", (int)c->task);
  if (c->num_labels < 2 || c->num_labels > CONFIG_MAX_LABELS)
    return err_set(err, "config: num_labels: %d, a classifier needs 2 to %d", c->num_labels, CONFIG_MAX_LABELS);
  if (c->problem_type != MODEL_SINGLE_LABEL && c->problem_type != MODEL_MULTI_LABEL)
    return err_set(err, "config: problem_type: unknown value %d", (int)c->problem_type);
  if (c->classifier_dropout >= 0 && check_prob("classifier_dropout", c->classifier_dropout, err)) return -1;
  /* The names: num_labels of them, NUL-terminated, inside the buffer. */
  size_t at = 0;
  for (int i = 0; i < c->num_labels; i++) {
    const char *z = memchr(c->label_names + at, 0, CONFIG_LABEL_BYTES - at);
    if (!z || z == c->label_names + at) return err_set(err, "config: id2label: label %d is missing or empty", i);
    at = (size_t)(z - c->label_names) + 1;
    if (i + 1 < c->num_labels && at >= CONFIG_LABEL_BYTES) return err_set(err, "config: id2label: label %d is missing", i + 1);
  }
  return 0;
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
static int utf8_valid(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    unsigned c = u[i];
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || len - i <= (size_t)extra) return 0;
    unsigned cp = extra ? c & (0x3F >> extra) : c;
    for (int k = 1; k <= extra; k++) {
      if ((u[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + k] & 0x3F);
    }
    static const unsigned min[4] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += 1 + (size_t)extra;
  }
  return 1;
}

int config_set_labels(ModelConfig *c, int n, const char *const *names, Err *err) {
  /* The limits are the config's fixed arrays; the messages give the count and the limit. */
  if (n < 2) return err_setk(err, ERR_INVALID, "%d label%s; a classifier needs at least 2", n, n == 1 ? "" : "s");
  if (n > CONFIG_MAX_LABELS)
    return err_setk(err, ERR_INVALID, "%d labels, more than the limit of %d labels a classifier may have", n, CONFIG_MAX_LABELS);
  size_t bytes = 0;
  for (int i = 0; i < n; i++) bytes += (names[i] ? strlen(names[i]) : 0) + 1;
  if (bytes > CONFIG_LABEL_BYTES)
    return err_setk(err, ERR_INVALID, "the %d label names take %zu bytes (one NUL after each), more than the limit of %d bytes (32 KiB)",
                    n, bytes, CONFIG_LABEL_BYTES);
  for (int i = 0; i < n; i++) {
    size_t len = names[i] ? strlen(names[i]) : 0;
    if (!len) return err_setk(err, ERR_INVALID, "label %d is empty", i);
    if (!utf8_valid(names[i], len)) return err_setk(err, ERR_INVALID, "label %d is not UTF-8", i);
    for (int j = 0; j < i; j++)
      if (!strcmp(names[i], names[j])) return err_setk(err, ERR_INVALID, "label \"%s\" is given twice (ids %d and %d)", names[i], j, i);
  }
  size_t at;
  memset(c->label_names, 0, sizeof c->label_names);
  at = 0;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(names[i]);
    memcpy(c->label_names + at, names[i], len + 1);
    at += len + 1;
  }
  c->task = MODEL_TASK_SEQ_CLS;
  c->num_labels = n;
  c->problem_type = MODEL_SINGLE_LABEL;
  return 0;
}

const char *config_label(const ModelConfig *c, int id) {
  if (c->task != MODEL_TASK_SEQ_CLS || id < 0 || id >= c->num_labels) return NULL;
  const char *p = c->label_names;
  for (int i = 0; i < id; i++) p += strlen(p) + 1;
  return p;
}

void config_label_list(const ModelConfig *c, const char **names) {
  const char *p = c->label_names;
  for (int i = 0; i < c->num_labels; i++) {
    names[i] = p;
    p += strlen(p) + 1;
  }
}

const char *config_architecture(const ModelConfig *c) {
  int rob = c->model_type == MODEL_ROBERTA, cls = c->task == MODEL_TASK_SEQ_CLS;
  if (c->task == MODEL_TASK_ENCODER) return rob ? "RobertaModel" : "BertModel";
  return rob ? (cls ? "RobertaForSequenceClassification" : "RobertaForMaskedLM")
             : (cls ? "BertForSequenceClassification" : "BertForMaskedLM");
}

int config_task_of_architecture(const char *name) {
  if (!name) return MODEL_TASK_MLM;
  static const char *const families[] = {"Roberta", "Bert"};
  for (size_t f = 0; f < sizeof families / sizeof families[0]; f++) {
    size_t fl = strlen(families[f]);
    if (strncmp(name, families[f], fl)) continue;
    const char *tail = name + fl;
    if (!strcmp(tail, "ForSequenceClassification")) return MODEL_TASK_SEQ_CLS;
    /* BertModel / RobertaModel checkpoints are bare encoders: kept to be fine-tuned, never served. */
    if (!strcmp(tail, "Model")) return MODEL_TASK_ENCODER;
    /* BertForPreTraining carries the MLM head (and NSP's, unused): a masked LM here. */
    if (!strcmp(tail, "ForMaskedLM") || !strcmp(tail, "ForPreTraining")) return MODEL_TASK_MLM;
  }
  return -1;
}

const char *config_task_pipeline(int task) {
  return task == MODEL_TASK_MLM ? "fill-mask" : task == MODEL_TASK_SEQ_CLS ? "text-classification" : NULL;
}

int config_preset(const char *name, ModelConfig *out, Err *err) {
  ModelConfig c;
  /* HF roberta-base's fields (max_position_embeddings 514, type_vocab_size 1,
  ** layer_norm_eps 1e-5, dropout 0.1, initializer_range 0.02) with our sizes. */
  config_hf_defaults(MODEL_ROBERTA, &c);
  c.max_position_embeddings = 514;
  c.type_vocab_size = 1;
  c.layer_norm_eps = 1e-5;
  /* Special-token ids are those of our Unigram tokenizer ([CLS]=0, [SEP]=1,
  ** <pad>=3), not roberta-base's (<s>=0, <pad>=1, </s>=2). RoBERTa's position ids
  ** treat pad_token_id as padding, so copying roberta-base's pad 1 would make every
  ** [SEP] count as padding (the seed's trap, ../shared/reference/NOTES.md §3.8).
  ** With pad 3 real tokens get positions from 4, so 514 positions hold sequences of up to 510 tokens. */
  c.pad_token_id = 3;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  c.vocab_size = 8000;
  if (!name) return err_set(err, "config: preset: no name");
  if (strcmp(name, "tiny") == 0) {
    c.hidden_size = 128; c.num_hidden_layers = 2; c.num_attention_heads = 2; c.intermediate_size = 512;
  } else if (strcmp(name, "small") == 0) {
    c.hidden_size = 256; c.num_hidden_layers = 4; c.num_attention_heads = 4; c.intermediate_size = 1024;
  } else if (strcmp(name, "base") == 0) {
    c.vocab_size = 32000;
    c.hidden_size = 768; c.num_hidden_layers = 12; c.num_attention_heads = 12; c.intermediate_size = 3072;
  } else {
    return err_set(err, "config: preset: \"%s\" is not one of tiny, small, base", name);
  }
  *out = c;
  return 0;
}

/* Python's repr() of a float (what json.dumps writes): the shortest digits that
** read back to the same double, in positional form when the exponent is in
** [-4, 16), else d.ddde-XX. */
static void py_float(char *buf, size_t size, double x) {
  if (x == 0) { snprintf(buf, size, "%s", signbit(x) ? "-0.0" : "0.0"); return; }
  if (!isfinite(x)) { snprintf(buf, size, "%s", isnan(x) ? "NaN" : x > 0 ? "Infinity" : "-Infinity"); return; }
  int p;
  char e[64];
  for (p = 1; p <= 17; p++) {
    snprintf(e, sizeof e, "%.*e", p - 1, x);
    if (strtod(e, NULL) == x) break;
  }
  if (p > 17) p = 17;
  int exp10 = atoi(strchr(e, 'e') + 1);
  if (exp10 >= -4 && exp10 < 16) {
    int decimals = p - 1 - exp10;
    if (decimals < 1) decimals = 1;
    snprintf(buf, size, "%.*f", decimals, x);
  } else {
    snprintf(buf, size, "%s", e);
  }
}

char *config_to_json(const ModelConfig *c) { return config_to_json_dtype(c, "float32"); }

/* A JSON string as Python's json.dumps writes it (ensure_ascii): \" \\ \n \r \t \b \f,
** other controls and every non-ASCII code point as \\uXXXX (surrogate pairs above
** U+FFFF). s is valid UTF-8 (config_set_labels checks). */
static void py_json_string(Buf *b, const char *s) {
  buf_puts(b, "\"");
  const unsigned char *u = (const unsigned char *)s;
  while (*u) {
    unsigned c = *u;
    int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
    if (extra) c &= 0x3F >> extra;
    for (int k = 1; k <= extra; k++) c = (c << 6) | (u[k] & 0x3F);
    u += 1 + extra;
    switch (c) {
      case '"': buf_puts(b, "\\\""); break;
      case '\\': buf_puts(b, "\\\\"); break;
      case '\n': buf_puts(b, "\\n"); break;
      case '\r': buf_puts(b, "\\r"); break;
      case '\t': buf_puts(b, "\\t"); break;
      case '\b': buf_puts(b, "\\b"); break;
      case '\f': buf_puts(b, "\\f"); break;
      default:
        if (c >= 0x20 && c < 0x80) buf_put(b, (const char *)&(char){(char)c}, 1);
        else if (c < 0x10000) buf_printf(b, "\\u%04x", c);
        else buf_printf(b, "\\u%04x\\u%04x", 0xD800 + ((c - 0x10000) >> 10), 0xDC00 + ((c - 0x10000) & 0x3FF));
    }
  }
  buf_puts(b, "\"");
}

/* Python's sort_keys order of the id2label keys ("0" < "1" < "10" < "2") and of label2id's names. */
static int cmp_decimal_text(const void *a, const void *b) {
  char x[16], y[16];
  snprintf(x, sizeof x, "%d", *(const int *)a);
  snprintf(y, sizeof y, "%d", *(const int *)b);
  return strcmp(x, y);
}

/* "  \"id2label\": {...},\n" or label2id, as json.dumps(indent=2, sort_keys=True) nests them. */
static void labels_json(Buf *b, const ModelConfig *c, int label2id) {
  int n = c->num_labels;
  const char **names = malloc((size_t)n * sizeof *names);
  int *order = malloc((size_t)n * sizeof *order);
  if (!names || !order) { b->oom = 1; free(names); free(order); return; }
  config_label_list(c, names);
  for (int i = 0; i < n; i++) order[i] = i;
  /* An insertion sort: qsort's comparator could not see the names without a global. */
  for (int i = 1; i < n; i++) {
    int v = order[i], j = i - 1;
    while (j >= 0 && (label2id ? strcmp(names[order[j]], names[v]) : cmp_decimal_text(&order[j], &v)) > 0) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = v;
  }
  buf_printf(b, "  \"%s\": {\n", label2id ? "label2id" : "id2label");
  for (int k = 0; k < n; k++) {
    int i = order[k];
    buf_puts(b, "    ");
    if (label2id) { py_json_string(b, names[i]); buf_printf(b, ": %d", i); }
    else { buf_printf(b, "\"%d\": ", i); py_json_string(b, names[i]); }
    buf_puts(b, k + 1 < n ? ",\n" : "\n");
  }
  buf_puts(b, "  },\n");
  free(names);
  free(order);
}

char *config_to_json_dtype(const ModelConfig *c, const char *torch_dtype) {
  /* The layout of save_pretrained: json.dumps(indent=2, sort_keys=True) + "\n". */
  char lne[64], hdp[64], adp[64], ir[64], cd[64] = "null";
  py_float(lne, sizeof lne, c->layer_norm_eps);
  py_float(hdp, sizeof hdp, c->hidden_dropout_prob);
  py_float(adp, sizeof adp, c->attention_probs_dropout_prob);
  py_float(ir, sizeof ir, c->initializer_range);
  if (c->classifier_dropout >= 0) py_float(cd, sizeof cd, c->classifier_dropout);
  int roberta = c->model_type == MODEL_ROBERTA, cls = c->task == MODEL_TASK_SEQ_CLS;
  Buf b = {0};
  buf_printf(&b, "{\n  \"architectures\": [\n    \"%s\"\n  ],\n", config_architecture(c));
  buf_printf(&b, "  \"attention_probs_dropout_prob\": %s,\n", adp);
  /* An absent id (-1) is written as transformers writes None: left out where the class
  ** default is None too (BERT), null where it is not (RoBERTa's 0 and 2), so that the
  ** file reads back as -1 and not as the class default. */
  if (c->bos_token_id >= 0) buf_printf(&b, "  \"bos_token_id\": %d,\n", c->bos_token_id);
  else if (roberta) buf_puts(&b, "  \"bos_token_id\": null,\n");
  buf_printf(&b, "  \"classifier_dropout\": %s,\n", cd);
  if (c->eos_token_id >= 0) buf_printf(&b, "  \"eos_token_id\": %d,\n", c->eos_token_id);
  else if (roberta) buf_puts(&b, "  \"eos_token_id\": null,\n");
  buf_printf(&b, "  \"hidden_act\": \"gelu\",\n  \"hidden_dropout_prob\": %s,\n  \"hidden_size\": %d,\n", hdp,
             c->hidden_size);
  if (cls) labels_json(&b, c, 0);
  buf_printf(&b, "  \"initializer_range\": %s,\n  \"intermediate_size\": %d,\n", ir, c->intermediate_size);
  if (cls) labels_json(&b, c, 1);
  buf_printf(&b,
             "  \"layer_norm_eps\": %s,\n"
             "  \"max_position_embeddings\": %d,\n"
             "  \"model_type\": \"%s\",\n"
             "  \"num_attention_heads\": %d,\n"
             "  \"num_hidden_layers\": %d,\n"
             "  \"pad_token_id\": %d,\n"
             "  \"position_embedding_type\": \"absolute\",\n",
             lne, c->max_position_embeddings, roberta ? "roberta" : "bert", c->num_attention_heads,
             c->num_hidden_layers, c->pad_token_id);
  if (cls)
    buf_printf(&b, "  \"problem_type\": \"%s\",\n",
               c->problem_type == MODEL_MULTI_LABEL ? "multi_label_classification" : "single_label_classification");
  buf_printf(&b,
             "  \"torch_dtype\": \"%s\",\n"
             "  \"transformers_version\": \"4.46.3\",\n"
             "  \"type_vocab_size\": %d,\n"
             "  \"use_cache\": true,\n"
             "  \"vocab_size\": %d\n"
             "}\n",
             torch_dtype, c->type_vocab_size, c->vocab_size);
  if (b.oom) { buf_free(&b); return NULL; }
  return b.p;
}

int config_save(const ModelConfig *c, const char *path, Err *err) { return config_save_dtype(c, "float32", path, err); }

int config_save_dtype(const ModelConfig *c, const char *torch_dtype, const char *path, Err *err) {
  if (config_validate(c, err)) return -1;
  char *s = config_to_json_dtype(c, torch_dtype);
  if (!s) return err_set(err, "%s: out of memory", path);
  int rc = files_write_atomic(path, s, strlen(s), err);
  free(s);
  return rc;
}

int config_position_offset(const ModelConfig *c) { return c->model_type == MODEL_ROBERTA ? c->pad_token_id + 1 : 0; }

int config_max_tokens(const ModelConfig *c) { return c->max_position_embeddings - config_position_offset(c); }

int config_head_dim(const ModelConfig *c) {
  return c->num_attention_heads > 0 ? c->hidden_size / c->num_attention_heads : 0;
}
