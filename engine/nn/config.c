/* config.json <-> ModelConfig. Reading follows transformers' BertConfig /
** RobertaConfig: a field that is absent takes the class default, keys we do not
** use are ignored (real configs carry many), and anything that would make the
** model compute something other than the HF model is refused by name. */
#include "engine/nn/config.h"
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

int config_parse(const char *json_text, ModelConfig *out, Err *err) {
  if (!json_text) return err_setk(err, ERR_BAD_INPUT, "config: no text");
  json_error_t je;
  json_t *root = json_loads(json_text, JSON_REJECT_DUPLICATES, &je);
  if (!root) return err_setk(err, ERR_BAD_INPUT, "config: malformed JSON at line %d, column %d: %s", je.line, je.column, je.text);
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
  if (config_validate(&c, err)) goto done;
  *out = c;
  rc = 0;
done:
  json_decref(root);
  if (rc) err_kind_default(err, ERR_BAD_INPUT);  /* the text is refused, whatever the check */
  return rc;
}

int config_load(const char *path, ModelConfig *out, Err *err) {
  size_t n;
  char *buf = files_read_all(path, CONFIG_MAX_FILE, &n, err);
  if (!buf) return -1;
  if (strlen(buf) != n) { free(buf); return err_setk(err, ERR_BAD_INPUT, "%s: contains a NUL byte, not a config.json", path); }
  int rc = config_parse(buf, out, err);
  free(buf);
  if (rc) err_prefix(err, path);
  return rc;
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
  return 0;
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

char *config_to_json_dtype(const ModelConfig *c, const char *torch_dtype) {
  /* The layout of save_pretrained: json.dumps(indent=2, sort_keys=True) + "\n". */
  char lne[64], hdp[64], adp[64], ir[64];
  py_float(lne, sizeof lne, c->layer_norm_eps);
  py_float(hdp, sizeof hdp, c->hidden_dropout_prob);
  py_float(adp, sizeof adp, c->attention_probs_dropout_prob);
  py_float(ir, sizeof ir, c->initializer_range);
  int roberta = c->model_type == MODEL_ROBERTA;
  /* An absent id (-1) is written as transformers writes None: left out where the class
  ** default is None too (BERT), null where it is not (RoBERTa's 0 and 2), so that the
  ** file reads back as -1 and not as the class default. */
  char bos[48] = "", eos[48] = "";
  if (c->bos_token_id >= 0) snprintf(bos, sizeof bos, "  \"bos_token_id\": %d,\n", c->bos_token_id);
  else if (roberta) snprintf(bos, sizeof bos, "  \"bos_token_id\": null,\n");
  if (c->eos_token_id >= 0) snprintf(eos, sizeof eos, "  \"eos_token_id\": %d,\n", c->eos_token_id);
  else if (roberta) snprintf(eos, sizeof eos, "  \"eos_token_id\": null,\n");
  const char *fmt =
      "{\n"
      "  \"architectures\": [\n"
      "    \"%s\"\n"
      "  ],\n"
      "  \"attention_probs_dropout_prob\": %s,\n"
      "%s"
      "  \"classifier_dropout\": null,\n"
      "%s"
      "  \"hidden_act\": \"gelu\",\n"
      "  \"hidden_dropout_prob\": %s,\n"
      "  \"hidden_size\": %d,\n"
      "  \"initializer_range\": %s,\n"
      "  \"intermediate_size\": %d,\n"
      "  \"layer_norm_eps\": %s,\n"
      "  \"max_position_embeddings\": %d,\n"
      "  \"model_type\": \"%s\",\n"
      "  \"num_attention_heads\": %d,\n"
      "  \"num_hidden_layers\": %d,\n"
      "  \"pad_token_id\": %d,\n"
      "  \"position_embedding_type\": \"absolute\",\n"
      "  \"torch_dtype\": \"%s\",\n"
      "  \"transformers_version\": \"4.46.3\",\n"
      "  \"type_vocab_size\": %d,\n"
      "  \"use_cache\": true,\n"
      "  \"vocab_size\": %d\n"
      "}\n";
#define CONFIG_ARGS                                                                                  \
  roberta ? "RobertaForMaskedLM" : "BertForMaskedLM", adp, bos, eos, hdp, c->hidden_size, ir,         \
      c->intermediate_size, lne, c->max_position_embeddings, roberta ? "roberta" : "bert",            \
      c->num_attention_heads, c->num_hidden_layers, c->pad_token_id, torch_dtype, c->type_vocab_size, c->vocab_size
  int n = snprintf(NULL, 0, fmt, CONFIG_ARGS);
  if (n < 0) return NULL;
  char *s = malloc((size_t)n + 1);
  if (s) snprintf(s, (size_t)n + 1, fmt, CONFIG_ARGS);
#undef CONFIG_ARGS
  return s;
}

int config_save(const ModelConfig *c, const char *path, Err *err) {
  if (config_validate(c, err)) return -1;
  char *s = config_to_json(c);
  if (!s) return err_set(err, "%s: out of memory", path);
  int rc = files_write_atomic(path, s, strlen(s), err);
  free(s);
  return rc;
}

int config_head_dim(const ModelConfig *c) {
  return c->num_attention_heads > 0 ? c->hidden_size / c->num_attention_heads : 0;
}
