/* config.json: HF configs as published parse to the right numbers, absent fields
** take BertConfig/RobertaConfig defaults, presets and round trips are exact, what
** we write is byte-for-byte Python's json.dumps(indent=2, sort_keys=True), and
** every kind of nonsense is refused with a message naming the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/nn/config.h"
#include "engine/nn/model.h"
#include "tests/unit/check.h"

/* FacebookAI/roberta-base config.json as published on the Hub. */
static const char *ROBERTA_BASE =
    "{\n"
    "  \"architectures\": [\n    \"RobertaForMaskedLM\"\n  ],\n"
    "  \"attention_probs_dropout_prob\": 0.1,\n"
    "  \"bos_token_id\": 0,\n"
    "  \"eos_token_id\": 2,\n"
    "  \"hidden_act\": \"gelu\",\n"
    "  \"hidden_dropout_prob\": 0.1,\n"
    "  \"hidden_size\": 768,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 3072,\n"
    "  \"layer_norm_eps\": 1e-05,\n"
    "  \"max_position_embeddings\": 514,\n"
    "  \"model_type\": \"roberta\",\n"
    "  \"num_attention_heads\": 12,\n"
    "  \"num_hidden_layers\": 12,\n"
    "  \"pad_token_id\": 1,\n"
    "  \"type_vocab_size\": 1,\n"
    "  \"vocab_size\": 50265\n"
    "}\n";

/* google-bert/bert-base-uncased config.json as published (with its extra keys). */
static const char *BERT_BASE_UNCASED =
    "{\n"
    "  \"architectures\": [\n    \"BertForMaskedLM\"\n  ],\n"
    "  \"attention_probs_dropout_prob\": 0.1,\n"
    "  \"gradient_checkpointing\": false,\n"
    "  \"hidden_act\": \"gelu\",\n"
    "  \"hidden_dropout_prob\": 0.1,\n"
    "  \"hidden_size\": 768,\n"
    "  \"initializer_range\": 0.02,\n"
    "  \"intermediate_size\": 3072,\n"
    "  \"layer_norm_eps\": 1e-12,\n"
    "  \"max_position_embeddings\": 512,\n"
    "  \"model_type\": \"bert\",\n"
    "  \"num_attention_heads\": 12,\n"
    "  \"num_hidden_layers\": 12,\n"
    "  \"pad_token_id\": 0,\n"
    "  \"position_embedding_type\": \"absolute\",\n"
    "  \"transformers_version\": \"4.6.0.dev0\",\n"
    "  \"type_vocab_size\": 2,\n"
    "  \"use_cache\": true,\n"
    "  \"vocab_size\": 30522\n"
    "}\n";

static int same_config(const ModelConfig *a, const ModelConfig *b) {
  return a->model_type == b->model_type && a->vocab_size == b->vocab_size && a->hidden_size == b->hidden_size &&
         a->num_hidden_layers == b->num_hidden_layers && a->num_attention_heads == b->num_attention_heads &&
         a->intermediate_size == b->intermediate_size && a->max_position_embeddings == b->max_position_embeddings &&
         a->type_vocab_size == b->type_vocab_size && a->pad_token_id == b->pad_token_id &&
         a->bos_token_id == b->bos_token_id && a->eos_token_id == b->eos_token_id &&
         a->layer_norm_eps == b->layer_norm_eps && a->hidden_dropout_prob == b->hidden_dropout_prob &&
         a->attention_probs_dropout_prob == b->attention_probs_dropout_prob &&
         a->initializer_range == b->initializer_range;
}

/* A refusal: parsing must fail and the message must contain `needle` (the field). */
static void refuse(const char *name, const char *json, const char *needle) {
  ModelConfig c;
  Err e = {0};
  int rc = config_parse(json, &c, &e);
  check(rc == -1 && strstr(e.msg, needle) != NULL, name, "rc %d, message \"%s\" lacks \"%s\"", rc, e.msg, needle);
}

/* A roberta-base config with one field replaced by `field_json` (e.g. "\"hidden_size\": 7"). */
static void refuse_field(const char *name, const char *field_json, const char *needle) {
  char buf[2048];
  snprintf(buf, sizeof buf,
           "{\"model_type\": \"roberta\", \"vocab_size\": 100, \"hidden_size\": 64, \"num_attention_heads\": 4,"
           " \"num_hidden_layers\": 2, \"intermediate_size\": 128, %s}", field_json);
  refuse(name, buf, needle);
}

/* Python's own json.dumps(indent=2, sort_keys=True) of our text must equal our text. */
static void check_python_layout(const char *name, const char *text) {
  char path[256];
  const char *tmp = getenv("MASKD_TMP");
  snprintf(path, sizeof path, "%s/test_config_%d.json", tmp ? tmp : "/tmp", (int)getpid());
  FILE *f = fopen(path, "wb");
  if (!f) { check(0, name, "cannot write %s", path); return; }
  fputs(text, f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import json,sys; t=open(sys.argv[1]).read();"
           " sys.exit(0 if json.dumps(json.loads(t), indent=2, sort_keys=True) + \"\\n\" == t else 3)' %s", path);
  int rc = system(cmd);
  remove(path);
  check(rc == 0, name, "python3 re-dumps the text differently (status %d)", rc);
}

int main(void) {
  Err e = {0};
  ModelConfig c, d;

  /* Published configs. */
  int rc = config_parse(ROBERTA_BASE, &c, &e);
  check(rc == 0 && c.model_type == MODEL_ROBERTA && c.vocab_size == 50265 && c.hidden_size == 768 &&
            c.num_hidden_layers == 12 && c.num_attention_heads == 12 && c.intermediate_size == 3072 &&
            c.max_position_embeddings == 514 && c.type_vocab_size == 1 && c.pad_token_id == 1 &&
            c.bos_token_id == 0 && c.eos_token_id == 2 && c.layer_norm_eps == 1e-5 &&
            c.hidden_dropout_prob == 0.1 && c.attention_probs_dropout_prob == 0.1 && c.initializer_range == 0.02,
        "config_roberta_base", "rc %d (%s)", rc, e.msg);
  check(config_head_dim(&c) == 64, "config_head_dim", "%d", config_head_dim(&c));
  rc = config_parse(BERT_BASE_UNCASED, &c, &e);
  check(rc == 0 && c.model_type == MODEL_BERT && c.vocab_size == 30522 && c.max_position_embeddings == 512 &&
            c.type_vocab_size == 2 && c.pad_token_id == 0 && c.bos_token_id == -1 && c.eos_token_id == -1 &&
            c.layer_norm_eps == 1e-12,
        "config_bert_base_uncased", "rc %d (%s)", rc, e.msg);

  /* Defaults of BertConfig / RobertaConfig for absent fields. */
  rc = config_parse("{\"model_type\": \"bert\"}", &c, &e);
  check(rc == 0 && c.vocab_size == 30522 && c.hidden_size == 768 && c.num_hidden_layers == 12 &&
            c.num_attention_heads == 12 && c.intermediate_size == 3072 && c.max_position_embeddings == 512 &&
            c.type_vocab_size == 2 && c.layer_norm_eps == 1e-12 && c.hidden_dropout_prob == 0.1 &&
            c.attention_probs_dropout_prob == 0.1 && c.initializer_range == 0.02 && c.pad_token_id == 0 &&
            c.bos_token_id == -1 && c.eos_token_id == -1,
        "config_bert_defaults", "rc %d (%s)", rc, e.msg);
  rc = config_parse("{\"model_type\": \"roberta\"}", &c, &e);
  check(rc == 0 && c.vocab_size == 30522 && c.max_position_embeddings == 512 && c.type_vocab_size == 2 &&
            c.layer_norm_eps == 1e-12 && c.pad_token_id == 1 && c.bos_token_id == 0 && c.eos_token_id == 2,
        "config_roberta_defaults", "rc %d (%s)", rc, e.msg);
  rc = config_parse("{\"model_type\": \"roberta\", \"bos_token_id\": null, \"eos_token_id\": null, \"foo\": [1, {}],"
                    " \"hidden_dropout_prob\": 0, \"vocab_size\": 8000.0}", &c, &e);
  check(rc == 0 && c.bos_token_id == -1 && c.eos_token_id == -1 && c.hidden_dropout_prob == 0 && c.vocab_size == 8000,
        "config_nulls_extras_integral_reals", "rc %d (%s)", rc, e.msg);

  /* Presets. */
  rc = config_preset("tiny", &c, &e);
  check(rc == 0 && c.model_type == MODEL_ROBERTA && c.vocab_size == 8000 && c.hidden_size == 128 &&
            c.num_hidden_layers == 2 && c.num_attention_heads == 2 && c.intermediate_size == 512 &&
            c.max_position_embeddings == 514 && c.type_vocab_size == 1 && c.layer_norm_eps == 1e-5 &&
            c.pad_token_id == 3 && c.bos_token_id == 0 && c.eos_token_id == 1 && config_validate(&c, &e) == 0,
        "config_preset_tiny", "rc %d (%s)", rc, e.msg);
  rc = config_preset("small", &c, &e);
  check(rc == 0 && c.vocab_size == 8000 && c.hidden_size == 256 && c.num_hidden_layers == 4 &&
            c.num_attention_heads == 4 && c.intermediate_size == 1024, "config_preset_small", "rc %d (%s)", rc, e.msg);
  rc = config_preset("base", &c, &e);
  check(rc == 0 && c.vocab_size == 32000 && c.hidden_size == 768 && c.num_hidden_layers == 12 &&
            c.num_attention_heads == 12 && c.intermediate_size == 3072, "config_preset_base", "rc %d (%s)", rc, e.msg);
  rc = config_preset("large", &c, &e);
  check(rc == -1 && strstr(e.msg, "large"), "config_preset_unknown", "rc %d (%s)", rc, e.msg);

  /* Round trips: preset, published configs, awkward floats; and Python's layout. */
  const char *names[] = {"tiny", "small", "base"};
  for (int i = 0; i < 3; i++) {
    config_preset(names[i], &c, &e);
    char *s = config_to_json(&c);
    char tn[64];
    snprintf(tn, sizeof tn, "config_round_trip_%s", names[i]);
    rc = config_parse(s, &d, &e);
    check(s && rc == 0 && same_config(&c, &d), tn, "rc %d (%s)", rc, e.msg);
    free(s);
  }
  const char *texts[] = {ROBERTA_BASE, BERT_BASE_UNCASED};
  for (int i = 0; i < 2; i++) {
    config_parse(texts[i], &c, &e);
    char *s = config_to_json(&c);
    rc = config_parse(s, &d, &e);
    check(rc == 0 && same_config(&c, &d), i ? "config_round_trip_bert" : "config_round_trip_roberta", "rc %d (%s)", rc, e.msg);
    check(strstr(s, i ? "\"BertForMaskedLM\"" : "\"RobertaForMaskedLM\"") && strstr(s, "\"hidden_act\": \"gelu\"") &&
              strstr(s, "\"position_embedding_type\": \"absolute\"") && strstr(s, "\"torch_dtype\": \"float32\"") &&
              strstr(s, "\"transformers_version\"") && (i ? strstr(s, "\"layer_norm_eps\": 1e-12,") : strstr(s, "\"layer_norm_eps\": 1e-05,")) &&
              (i ? !strstr(s, "bos_token_id") : strstr(s, "\"bos_token_id\": 0,") != NULL),
          i ? "config_hf_fields_bert" : "config_hf_fields_roberta", "%s", s);
    check_python_layout(i ? "config_python_layout_bert" : "config_python_layout_roberta", s);
    free(s);
  }
  config_preset("tiny", &c, &e);
  c.layer_norm_eps = 1.0 / 3e7;
  c.hidden_dropout_prob = 0.30000000000000004;
  c.attention_probs_dropout_prob = 0.0;
  c.initializer_range = 1.0;
  char *s = config_to_json(&c);
  rc = config_parse(s, &d, &e);
  check(rc == 0 && same_config(&c, &d), "config_round_trip_awkward_floats", "rc %d (%s)\n%s", rc, e.msg, s);
  check_python_layout("config_python_layout_awkward_floats", s);
  free(s);
  /* A RoBERTa config without bos/eos ids (null in the file): written as null, as
  ** transformers writes None where the class default is not None, so it reads back
  ** as absent and not as RoBERTa's defaults 0 and 2 (found by tests/fuzz/fuzz_config). */
  rc = config_parse("{\"model_type\": \"roberta\", \"bos_token_id\": null, \"eos_token_id\": null}", &c, &e);
  s = config_to_json(&c);
  int rc_back = config_parse(s, &d, &e);
  check(rc == 0 && rc_back == 0 && same_config(&c, &d) && d.bos_token_id == -1 && d.eos_token_id == -1 &&
            strstr(s, "\"bos_token_id\": null,") && strstr(s, "\"eos_token_id\": null,"),
        "config_round_trip_roberta_null_bos_eos", "rc %d %d, bos %d eos %d (%s)\n%s", rc, rc_back, d.bos_token_id, d.eos_token_id, e.msg, s);
  check_python_layout("config_python_layout_null_bos_eos", s);
  free(s);

  /* Which of the tokenizer's fields the text states (config_parse_stated): roberta-base
  ** states all five; a config of sizes only, none (their class defaults in place); an
  ** explicit null bos / eos is stated (None, "no such token"); BERT's default-less
  ** bos / eos left out are not. */
  unsigned stated = 99;
  const unsigned all5 = CONFIG_STATED_VOCAB | CONFIG_STATED_PAD | CONFIG_STATED_BOS | CONFIG_STATED_EOS | CONFIG_STATED_MAX_POS;
  rc = config_parse_stated(ROBERTA_BASE, &c, &stated, &e);
  check(rc == 0 && stated == all5 && c.vocab_size == 50265 && c.pad_token_id == 1 && c.max_position_embeddings == 514,
        "config_stated_roberta_base", "rc %d stated 0x%x (%s)", rc, stated, e.msg);
  rc = config_parse_stated(BERT_BASE_UNCASED, &c, &stated, &e);
  check(rc == 0 && stated == (CONFIG_STATED_VOCAB | CONFIG_STATED_PAD | CONFIG_STATED_MAX_POS) && c.bos_token_id == -1,
        "config_stated_bert_base_uncased", "rc %d stated 0x%x (%s)", rc, stated, e.msg);
  const char *sizes_only = "{\"model_type\": \"roberta\", \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                           " \"num_attention_heads\": 2, \"intermediate_size\": 128}";
  rc = config_parse_stated(sizes_only, &c, &stated, &e);
  check(rc == 0 && stated == 0 && c.vocab_size == 30522 && c.pad_token_id == 1 && c.bos_token_id == 0 && c.eos_token_id == 2 &&
            c.max_position_embeddings == 512 && c.hidden_size == 64,
        "config_stated_sizes_only", "rc %d stated 0x%x (%s)", rc, stated, e.msg);
  rc = config_parse_stated("{\"model_type\": \"roberta\", \"bos_token_id\": null, \"eos_token_id\": 5}", &c, &stated, &e);
  check(rc == 0 && stated == (CONFIG_STATED_BOS | CONFIG_STATED_EOS) && c.bos_token_id == -1 && c.eos_token_id == 5,
        "config_stated_null_bos_is_stated", "rc %d stated 0x%x bos %d eos %d (%s)", rc, stated, c.bos_token_id, c.eos_token_id, e.msg);
  /* What config_parse accepts, config_parse_stated reads the same; what config_parse
  ** refuses for ranges that depend on the tokenizer's fields is left to the caller's
  ** config_validate (pad 40000 fits a 50,000-token tokenizer, not the default 30522). */
  rc = config_parse(ROBERTA_BASE, &d, &e);
  config_parse_stated(ROBERTA_BASE, &c, &stated, &e);
  check(rc == 0 && same_config(&c, &d), "config_stated_reads_the_same", "rc %d (%s)", rc, e.msg);
  const char *big_pad = "{\"model_type\": \"bert\", \"pad_token_id\": 40000}";
  rc = config_parse(big_pad, &c, &e);
  check(rc == -1 && strstr(e.msg, "pad_token_id"), "config_parse_validates_pad", "rc %d (%s)", rc, e.msg);
  rc = config_parse_stated(big_pad, &c, &stated, &e);
  int vrc = rc == 0 ? config_validate(&c, &e) : 0;
  c.vocab_size = 50000;
  check(rc == 0 && stated == CONFIG_STATED_PAD && vrc == -1 && config_validate(&c, &e) == 0,
        "config_stated_defers_validation", "rc %d stated 0x%x validate %d (%s)", rc, stated, vrc, e.msg);
  e = (Err){0};
  rc = config_parse_stated("{\"model_type\": \"roberta\", \"vocab_size\": \"big\"}", &c, &stated, &e);
  check(rc == -1 && strstr(e.msg, "vocab_size") && e.kind == ERR_BAD_INPUT, "config_stated_still_refuses_types", "rc %d (%s)", rc, e.msg);
  rc = config_parse_stated("{\"model_type\": \"roberta\"}", &c, NULL, &e);
  check(rc == 0, "config_stated_null_out", "rc %d (%s)", rc, e.msg);

  /* Files. */
  char path[256];
  const char *tmp = getenv("MASKD_TMP");
  snprintf(path, sizeof path, "%s/test_config_save_%d.json", tmp ? tmp : "/tmp", (int)getpid());
  config_preset("small", &c, &e);
  rc = config_save(&c, path, &e);
  int rc2 = config_load(path, &d, &e);
  check(rc == 0 && rc2 == 0 && same_config(&c, &d), "config_save_load", "rc %d %d (%s)", rc, rc2, e.msg);
  FILE *f = fopen(path, "wb");
  fputs("{\"model_type\": \"roberta\",\n \"hidden_size\": 7}", f);
  fclose(f);
  rc = config_load(path, &d, &e);
  check(rc == -1 && strstr(e.msg, path) && strstr(e.msg, "hidden_size"), "config_load_names_file_and_field", "%s", e.msg);
  remove(path);
  rc = config_load("/nonexistent/config.json", &d, &e);
  check(rc == -1 && strstr(e.msg, "/nonexistent/config.json"), "config_load_missing_file", "%s", e.msg);
  f = fopen(path, "wb");
  fputs("{\"model_type\": \"roberta\", \"vocab_size\": 8000, \"eos_token_id\": 1}", f);
  fclose(f);
  rc = config_load_stated(path, &d, &stated, &e);
  check(rc == 0 && stated == (CONFIG_STATED_VOCAB | CONFIG_STATED_EOS) && d.vocab_size == 8000 && d.eos_token_id == 1,
        "config_load_stated", "rc %d stated 0x%x (%s)", rc, stated, e.msg);
  remove(path);
  rc = config_load_stated("/nonexistent/config.json", &d, &stated, &e);
  check(rc == -1 && strstr(e.msg, "/nonexistent/config.json"), "config_load_stated_missing_file", "%s", e.msg);
  c.num_attention_heads = 3;
  rc = config_save(&c, path, &e);
  check(rc == -1 && strstr(e.msg, "num_attention_heads") && access(path, F_OK) != 0, "config_save_refuses_invalid", "%s", e.msg);

  /* Refusals: each names its field. */
  refuse("config_refuse_malformed", "{\"model_type\": \"roberta\",\n  \"hidden_size\": }", "line 2");
  refuse("config_refuse_truncated", "{\"model_type\": \"roberta\"", "malformed JSON");
  refuse("config_refuse_empty", "", "malformed JSON");
  refuse("config_refuse_not_object", "[1, 2]", "JSON object");
  refuse("config_refuse_duplicate_key", "{\"model_type\": \"roberta\", \"model_type\": \"bert\"}", "malformed JSON");
  /* A \u0000 in a string is said as what it is, not as jansson's JSON_ALLOW_NUL flag. */
  refuse("config_refuse_nul_said_plainly", "{\"model_type\": \"rob\\u0000erta\"}", "a NUL character (\\u0000) in a string");
  refuse("config_refuse_missing_model_type", "{\"hidden_size\": 768}", "model_type");
  refuse("config_refuse_unknown_model_type", "{\"model_type\": \"gpt2\"}", "model_type");
  refuse("config_refuse_model_type_type", "{\"model_type\": 3}", "model_type");
  refuse("config_refuse_indivisible_heads", "{\"model_type\": \"bert\", \"hidden_size\": 64, \"num_attention_heads\": 5}", "hidden_size");
  refuse_field("config_refuse_zero_hidden", "\"hidden_size\": 0", "hidden_size");
  refuse_field("config_refuse_negative_layers", "\"num_hidden_layers\": -1", "num_hidden_layers");
  refuse("config_refuse_zero_heads", "{\"model_type\": \"bert\", \"num_attention_heads\": 0}", "num_attention_heads");
  refuse_field("config_refuse_zero_intermediate", "\"intermediate_size\": 0", "intermediate_size");
  refuse_field("config_refuse_zero_vocab", "\"vocab_size\": 0, \"pad_token_id\": 0", "vocab_size");
  refuse_field("config_refuse_zero_positions", "\"max_position_embeddings\": 0", "max_position_embeddings");
  refuse_field("config_refuse_positions_before_pad", "\"max_position_embeddings\": 2", "max_position_embeddings");
  refuse_field("config_refuse_zero_type_vocab", "\"type_vocab_size\": 0", "type_vocab_size");
  refuse_field("config_refuse_huge_vocab", "\"vocab_size\": 2000000000", "vocab_size");
  refuse_field("config_refuse_huge_int", "\"hidden_size\": 99999999999", "hidden_size");
  refuse_field("config_refuse_huge_product", "\"vocab_size\": 16000000, \"hidden_size\": 256", "vocab_size");
  refuse_field("config_refuse_pad_outside_vocab", "\"pad_token_id\": 100", "pad_token_id");
  refuse_field("config_refuse_pad_negative", "\"pad_token_id\": -1", "pad_token_id");
  refuse_field("config_refuse_pad_null", "\"pad_token_id\": null", "pad_token_id");
  refuse_field("config_refuse_bos_outside_vocab", "\"bos_token_id\": 1000", "bos_token_id");
  refuse_field("config_refuse_eos_outside_vocab", "\"eos_token_id\": -7", "eos_token_id");
  refuse_field("config_refuse_dropout_one", "\"hidden_dropout_prob\": 1.0", "hidden_dropout_prob");
  refuse_field("config_refuse_dropout_negative", "\"attention_probs_dropout_prob\": -0.1", "attention_probs_dropout_prob");
  refuse_field("config_refuse_eps_zero", "\"layer_norm_eps\": 0", "layer_norm_eps");
  refuse_field("config_refuse_init_negative", "\"initializer_range\": -0.02", "initializer_range");
  refuse_field("config_refuse_gelu_new", "\"hidden_act\": \"gelu_new\"", "hidden_act");
  refuse_field("config_refuse_relu", "\"hidden_act\": \"relu\"", "\"relu\"");
  refuse_field("config_refuse_act_type", "\"hidden_act\": 1", "hidden_act");
  refuse_field("config_refuse_relative_positions", "\"position_embedding_type\": \"relative_key\"", "position_embedding_type");
  refuse_field("config_refuse_decoder", "\"is_decoder\": true", "is_decoder");
  refuse_field("config_refuse_cross_attention", "\"add_cross_attention\": true", "add_cross_attention");
  refuse_field("config_refuse_untied", "\"tie_word_embeddings\": false", "tie_word_embeddings");
  refuse_field("config_refuse_string_size", "\"hidden_size\": \"768\"", "hidden_size");
  refuse_field("config_refuse_fractional_size", "\"num_hidden_layers\": 2.5", "num_hidden_layers");
  refuse_field("config_refuse_bool_size", "\"intermediate_size\": true", "intermediate_size");
  refuse_field("config_refuse_string_prob", "\"hidden_dropout_prob\": \"0.1\"", "hidden_dropout_prob");
  refuse_field("config_refuse_null_eps", "\"layer_norm_eps\": null", "layer_norm_eps");
  refuse("config_refuse_null_text", NULL, "config");
  /* Sequence classifiers (issue 16): architectures, id2label / label2id in Python's
  ** key order, problem_type and classifier_dropout written, and read back the same. */
  for (int type = 0; type < 2; type++) {
    ModelConfig k;
    config_preset("tiny", &k, &e);
    k.model_type = type ? MODEL_BERT : MODEL_ROBERTA;
    /* 12 labels: "10" sorts before "2"; a quote, a backslash, accents and an emoji to escape. */
    const char *lbl[12] = {"card_arrival", "b", "with \"quote\"", "back\\slash", "caf\xc3\xa9", "emoji \xf0\x9f\x98\x80",
                             "g", "h", "i", "j", "k", "Zed"};
    rc = config_set_labels(&k, 12, lbl, &e);
    check(rc == 0 && k.task == MODEL_TASK_SEQ_CLS && k.num_labels == 12, "config_cls_set_labels", "%s", e.msg);
    k.classifier_dropout = type ? -1 : 0.25;
    char *js = config_to_json(&k);
    check(js && strstr(js, type ? "\"BertForSequenceClassification\"" : "\"RobertaForSequenceClassification\"") &&
              strstr(js, "\"problem_type\": \"single_label_classification\"") &&
              strstr(js, type ? "\"classifier_dropout\": null" : "\"classifier_dropout\": 0.25"),
          type ? "config_cls_json_bert" : "config_cls_json_roberta", "%s", js ? js : "(null)");
    check_python_layout(type ? "config_python_layout_cls_bert" : "config_python_layout_cls_roberta", js);
    ModelConfig back;
    rc = config_parse(js, &back, &e);
    int same = rc == 0 && back.task == MODEL_TASK_SEQ_CLS && back.num_labels == 12 &&
               back.classifier_dropout == k.classifier_dropout && back.problem_type == MODEL_SINGLE_LABEL;
    for (int i = 0; same && i < 12; i++) same = !strcmp(config_label(&back, i), lbl[i]);
    check(same, type ? "config_cls_roundtrip_bert" : "config_cls_roundtrip_roberta", "rc %d %s", rc, e.msg);
    free(js);
  }
  /* A masked LM's classifier_dropout is read and written back too (HF's configs hold it for
  ** every architecture; fine-tuning starts from it). */
  {
    ModelConfig k, back;
    config_preset("tiny", &k, &e);
    k.classifier_dropout = 0.3;
    char *js = config_to_json(&k);
    rc = js ? config_parse(js, &back, &e) : -1;
    check(rc == 0 && back.task != MODEL_TASK_SEQ_CLS && back.classifier_dropout == 0.3, "config_mlm_classifier_dropout",
          "rc %d, read %g: %s", rc, rc == 0 ? back.classifier_dropout : -1.0, js ? js : "(null)");
    free(js);
  }
  {
    ModelConfig k;
    config_preset("tiny", &k, &e);
    const char *dup[3] = {"a", "b", "a"}, *empty[2] = {"a", ""}, *bad[2] = {"a", "\xff"};
    check(config_set_labels(&k, 3, dup, &e) == -1 && e.kind == ERR_INVALID && strstr(e.msg, "twice"), "config_cls_refuses_duplicate", "%s", e.msg);
    check(config_set_labels(&k, 2, empty, &e) == -1 && strstr(e.msg, "empty"), "config_cls_refuses_empty", "%s", e.msg);
    check(config_set_labels(&k, 2, bad, &e) == -1 && strstr(e.msg, "UTF-8"), "config_cls_refuses_non_utf8", "%s", e.msg);
    check(config_set_labels(&k, 1, dup, &e) == -1, "config_cls_refuses_one_label", "%s", e.msg);
    check(k.task == MODEL_TASK_MLM && config_label(&k, 0) == NULL, "config_cls_refusal_leaves_mlm", "task %d", (int)k.task);
  }
  /* Reading HF's shapes: num_labels alone names LABEL_i; id2label wins; bad ids refused. */
  rc = config_parse("{\"model_type\": \"bert\", \"architectures\": [\"BertForSequenceClassification\"], \"num_labels\": 3}", &c, &e);
  check(rc == 0 && c.num_labels == 3 && !strcmp(config_label(&c, 2), "LABEL_2"), "config_cls_num_labels_only", "%s", e.msg);
  /* transformers' default binary classifier: save_pretrained writes neither id2label nor
  ** num_labels for PretrainedConfig's 2 labels, which are LABEL_0 and LABEL_1. */
  rc = config_parse("{\"model_type\": \"roberta\", \"architectures\": [\"RobertaForSequenceClassification\"]}", &c, &e);
  check(rc == 0 && c.task == MODEL_TASK_SEQ_CLS && c.num_labels == 2 && !strcmp(config_label(&c, 0), "LABEL_0") &&
        !strcmp(config_label(&c, 1), "LABEL_1"), "config_cls_default_two_labels", "%s", rc ? e.msg : "other labels");
  refuse("config_cls_refuses_one_num_label",
         "{\"model_type\": \"bert\", \"architectures\": [\"BertForSequenceClassification\"], \"num_labels\": 1}",
         "num_labels");
  refuse("config_cls_refuses_gap_in_ids",
         "{\"model_type\": \"bert\", \"architectures\": [\"BertForSequenceClassification\"], \"id2label\": {\"0\": \"a\", \"2\": \"b\"}}",
         "id2label");
  refuse("config_cls_refuses_unknown_architecture",
         "{\"model_type\": \"bert\", \"architectures\": [\"BertForTokenClassification\"]}", "BertForTokenClassification");
  refuse("config_cls_refuses_problem_type",
         "{\"model_type\": \"bert\", \"architectures\": [\"BertForSequenceClassification\"], \"num_labels\": 2, \"problem_type\": \"regression\"}",
         "problem_type");
  rc = config_parse("{\"model_type\": \"roberta\", \"architectures\": [\"RobertaForMaskedLM\"]}", &c, &e);
  check(rc == 0 && c.task == MODEL_TASK_MLM && c.num_labels == 0, "config_mlm_architecture", "%s", e.msg);
  /* The one rule for an architectures name, which the store's listing and model info use too:
  ** every name config_parse takes gives its task, every name it refuses -1. */
  static const struct { const char *name; int task; const char *pipeline; } arch_names[] = {
    {NULL, MODEL_TASK_MLM, "fill-mask"},
    {"RobertaForMaskedLM", MODEL_TASK_MLM, "fill-mask"},
    {"BertForPreTraining", MODEL_TASK_MLM, "fill-mask"},
    {"BertForSequenceClassification", MODEL_TASK_SEQ_CLS, "text-classification"},
    {"RobertaModel", MODEL_TASK_ENCODER, NULL},
    {"BertForTokenClassification", -1, NULL},
    {"DistilBertForMaskedLM", -1, NULL},
    {"RobertaForMaskedLMHead", -1, NULL},
    {"ForMaskedLM", -1, NULL},
  };
  for (size_t i = 0; i < sizeof arch_names / sizeof arch_names[0]; i++) {
    int t = config_task_of_architecture(arch_names[i].name);
    const char *p = config_task_pipeline(t);
    char name[96];
    snprintf(name, sizeof name, "config_task_of_architecture_%s", arch_names[i].name ? arch_names[i].name : "none");
    check(t == arch_names[i].task && (p && arch_names[i].pipeline ? !strcmp(p, arch_names[i].pipeline) : p == arch_names[i].pipeline), name,
          "task %d, pipeline %s", t, p ? p : "none");
    if (!arch_names[i].name) continue;
    char text[256];
    const char *family = !strncmp(arch_names[i].name, "Roberta", 7) ? "roberta" : "bert";
    snprintf(text, sizeof text, "{\"model_type\": \"%s\", \"architectures\": [\"%s\"]}", family, arch_names[i].name);
    e = (Err){0};
    rc = config_parse(text, &c, &e);
    snprintf(name, sizeof name, "config_parse_agrees_on_%s", arch_names[i].name);
    check(t < 0 ? rc != 0 : rc == 0 && (int)c.task == t, name, "rc %d task %d (%s)", rc, rc ? -1 : (int)c.task, e.msg);
  }
  /* The Hub's configs as they are (bert-base-uncased, roberta-base), with torch_dtype. */
  static const char *const bert_base =
    "{\"architectures\":[\"BertForMaskedLM\"],\"attention_probs_dropout_prob\":0.1,\"gradient_checkpointing\":false,"
    "\"hidden_act\":\"gelu\",\"hidden_dropout_prob\":0.1,\"hidden_size\":768,\"initializer_range\":0.02,"
    "\"intermediate_size\":3072,\"layer_norm_eps\":1e-12,\"max_position_embeddings\":512,\"model_type\":\"bert\","
    "\"num_attention_heads\":12,\"num_hidden_layers\":12,\"pad_token_id\":0,\"position_embedding_type\":\"absolute\","
    "\"transformers_version\":\"4.6.0.dev0\",\"type_vocab_size\":2,\"use_cache\":true,\"vocab_size\":30522}";
  static const char *const roberta_base =
    "{\"architectures\":[\"RobertaForMaskedLM\"],\"attention_probs_dropout_prob\":0.1,\"bos_token_id\":0,\"eos_token_id\":2,"
    "\"hidden_act\":\"gelu\",\"hidden_dropout_prob\":0.1,\"hidden_size\":768,\"initializer_range\":0.02,"
    "\"intermediate_size\":3072,\"layer_norm_eps\":1e-05,\"max_position_embeddings\":514,\"model_type\":\"roberta\","
    "\"num_attention_heads\":12,\"num_hidden_layers\":12,\"pad_token_id\":1,\"type_vocab_size\":1,\"vocab_size\":50265%s}";
  rc = config_parse(bert_base, &c, &e);
  check(rc == 0 && c.task == MODEL_TASK_MLM && c.vocab_size == 30522 && c.type_vocab_size == 2 && c.pad_token_id == 0 &&
            c.layer_norm_eps == 1e-12, "config_hub_bert_base_uncased", "%s", e.msg);
  static const char *const dtypes[] = {"", ",\"torch_dtype\":\"float32\"", ",\"torch_dtype\":\"float16\"", ",\"torch_dtype\":\"bfloat16\""};
  for (int i = 0; i < 4; i++) {
    char text[2048], name[64];
    snprintf(text, sizeof text, roberta_base, dtypes[i]);
    snprintf(name, sizeof name, "config_hub_roberta_base_dtype_%d", i);
    rc = config_parse(text, &c, &e);
    check(rc == 0 && c.model_type == MODEL_ROBERTA && c.max_position_embeddings == 514 && c.pad_token_id == 1 &&
              c.bos_token_id == 0 && c.eos_token_id == 2 && c.vocab_size == 50265, name, "%s", e.msg);
  }
  /* A base model (BertModel / RobertaModel): its own task, written back as such, and
  ** never built (nothing computes a model without a head). */
  for (int type = 0; type < 2; type++) {
    const char *arch = type ? "BertModel" : "RobertaModel";
    char text[256];
    snprintf(text, sizeof text, "{\"model_type\": \"%s\", \"architectures\": [\"%s\"]}", type ? "bert" : "roberta", arch);
    rc = config_parse(text, &c, &e);
    check(rc == 0 && c.task == MODEL_TASK_ENCODER && c.num_labels == 0 && !strcmp(config_architecture(&c), arch),
          type ? "config_base_model_bert" : "config_base_model_roberta", "rc %d task %d %s", rc, (int)c.task, e.msg);
    char *js = config_to_json(&c);
    char want[64];
    snprintf(want, sizeof want, "\"architectures\": [\n    \"%s\"\n  ]", arch);
    check(js && strstr(js, want), type ? "config_base_model_json_bert" : "config_base_model_json_roberta", "%s", js ? js : "(null)");
    check_python_layout(type ? "config_python_layout_base_bert" : "config_python_layout_base_roberta", js);
    ModelConfig back;
    check(js && config_parse(js, &back, &e) == 0 && back.task == MODEL_TASK_ENCODER,
          type ? "config_base_model_roundtrip_bert" : "config_base_model_roundtrip_roberta", "%s", e.msg);
    free(js);
    Model *m = model_new(&c, &e);
    check(!m && e.kind == ERR_INVALID && strstr(e.msg, arch) && strstr(e.msg, "no head"),
          type ? "config_base_model_not_built_bert" : "config_base_model_not_built_roberta", "%s", e.msg);
    model_free(m);
    ModelConfig k = c;
    const char *two[2] = {"x", "y"};
    check(config_set_labels(&k, 2, two, &e) == 0 && k.task == MODEL_TASK_SEQ_CLS,
          type ? "config_base_model_to_classifier_bert" : "config_base_model_to_classifier_roberta", "%s", e.msg);
  }
  rc = config_parse("{\"model_type\": \"bert\", \"architectures\": [\"BertForPreTraining\"]}", &c, &e);
  check(rc == 0 && c.task == MODEL_TASK_MLM, "config_pretraining_is_mlm", "%s", e.msg);
  refuse("config_refuses_relative_key_query",
         "{\"model_type\": \"bert\", \"position_embedding_type\": \"relative_key_query\"}", "relative_key_query");
  return check_exit();
}
