/* Run descriptions: JSON and flags, the JSON round trip, and every refusal naming its
** field before any work starts (unknown keys, types, ranges, missing shards, vocabulary
** mismatches between tokenizer, shards and model config, positions, sequence lengths);
** a config.json's left-out vocab_size, special ids and positions taken from the
** tokenizer and the shards, a stated one that disagrees refused naming both values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/train/run_config.h"
#include "engine/core/platform.h"
#include "engine/data/shards.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/tokenizer_files.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

enum { V = 40 };
static char root[512], tok_path[700], train_dir[700], valid_dir[700], wrongv_dir[700], seq_dir[700];

static int put_set(const char *dir, const char *split, int n, int seq, int vocab) {
  char name[256], path[1024];
  Err e = {0};
  mkdir(dir, 0755);
  int32_t *ids = malloc(sizeof *ids * (size_t)n * (size_t)seq);
  for (int i = 0; i < n * seq; i++) ids[i] = 5 + i % (vocab - 5);
  shard_name(name, sizeof name, split, 0, (uint64_t)n, &e);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int rc = shard_write(path, ids, (uint64_t)n, (uint32_t)seq, (uint32_t)vocab, NULL, &e);
  free(ids);
  return rc;
}

static int put_tokenizer(void) {
  const char *pieces[V];
  double scores[V];
  char buf[V][16];
  const char *sp[] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"};
  for (int i = 0; i < V; i++) {
    if (i < 5) pieces[i] = sp[i];
    else { snprintf(buf[i], sizeof buf[i], "\xe2\x96\x81w%d", i); pieces[i] = buf[i]; }
    scores[i] = i < 5 ? 0 : -(double)i;
  }
  Err e = {0};
  Tokenizer *t = tokenizer_new_seed(V, pieces, scores, 2, 5, &e);
  if (!t) { printf("# tokenizer: %s\n", e.msg); return -1; }
  int rc = tokenizer_save(t, tok_path, &e);
  tokenizer_free(t);
  return rc;
}

static void put_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (f) { fputs(text, f); fclose(f); }
}

/* A RoBERTa-style byte-level BPE tokenizer (<s> 0, <pad> 1, </s> 2, <mask> 9) made from
** vocab.json + merges.txt, saved as tokenizer.json at path: 10 ids. */
static int put_bpe_tokenizer(const char *dir, const char *path) {
  char p[1024];
  mkdir(dir, 0755);
  snprintf(p, sizeof p, "%s/vocab.json", dir);
  put_text(p, "{\"<s>\": 0, \"<pad>\": 1, \"</s>\": 2, \"<unk>\": 3, \"h\": 4, \"i\": 5, \"\xc4\xa0\": 6, \"hi\": 7, "
              "\"\xc4\xa0hi\": 8, \"<mask>\": 9}");
  snprintf(p, sizeof p, "%s/merges.txt", dir);
  put_text(p, "#version: 0.2\nh i\n\xc4\xa0 hi\n");
  Err e = {0};
  Tokenizer *t = tokenizer_load_dir(dir, &e);
  if (!t) { printf("# bpe tokenizer: %s\n", e.msg); return -1; }
  int rc = tokenizer_save(t, path, &e);
  tokenizer_free(t);
  return rc;
}

static RunConfig good(void) {
  RunConfig rc;
  run_config_defaults(&rc);
  snprintf(rc.name, sizeof rc.name, "t");
  snprintf(rc.tokenizer, sizeof rc.tokenizer, "%s", tok_path);
  snprintf(rc.train, sizeof rc.train, "%s", train_dir);
  snprintf(rc.validation, sizeof rc.validation, "%s", valid_dir);
  snprintf(rc.config, sizeof rc.config, "tiny");
  rc.batch = 4;
  return rc;
}

/* Validation must fail with a message containing needle. */
static void refused(const char *name, const RunConfig *rc, const char *needle) {
  RunPlan p;
  Err e = {0};
  int r = run_config_validate(rc, &p, &e);
  check(r == -1 && strstr(e.msg, needle) != NULL, name, "rc %d, message \"%s\" (wanted \"%s\")", r, e.msg, needle);
}

static void json_refused(const char *name, const char *json, const char *needle) {
  RunConfig rc;
  run_config_defaults(&rc);
  RunConfig before = rc;
  Err e = {0};
  int r = run_config_apply_json(&rc, json, &e);
  check(r == -1 && strstr(e.msg, needle) && memcmp(&rc, &before, sizeof rc) == 0, name,
        "rc %d, message \"%s\" (wanted \"%s\")", r, e.msg, needle);
}

int main(void) {
  if (fixture_tmpdir(root, sizeof root, "runcfg")) { check(0, "mkdtemp", "%s", root); return check_exit(); }
  snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", root);
  snprintf(train_dir, sizeof train_dir, "%s/train", root);
  snprintf(valid_dir, sizeof valid_dir, "%s/valid", root);
  snprintf(wrongv_dir, sizeof wrongv_dir, "%s/wrongv", root);
  snprintf(seq_dir, sizeof seq_dir, "%s/seq", root);
  if (put_tokenizer() || put_set(train_dir, "train", 20, 16, V) || put_set(valid_dir, "validation", 8, 16, V) ||
      put_set(wrongv_dir, "train", 20, 16, V + 10) || put_set(seq_dir, "validation", 8, 24, V)) {
    check(0, "run_config_setup", "could not write fixtures");
    return check_exit();
  }

  /* JSON then flags; flags override. */
  RunConfig rc;
  run_config_defaults(&rc);
  Err e = {0};
  int r = run_config_apply_json(&rc, "{\"name\": \"x\", \"lr\": 5e-4, \"epochs\": 3, \"grad_accum\": 2, \"seed\": 9}", &e);
  r |= run_config_set(&rc, "--lr", "2e-4", &e);
  r |= run_config_set(&rc, "--grad-accum", "4", &e);
  check(r == 0 && rc.lr == 2e-4 && rc.epochs == 3 && rc.grad_accum == 4 && rc.seed == 9 && !strcmp(rc.name, "x") &&
            rc.weight_decay == 1e-3 && rc.warmup_steps == -1,
        "run_config_json_and_flags", "rc %d: %s", r, e.msg);

  /* to_json -> apply gives the same description, every field. */
  rc = good();
  rc.clip_norm = 1.5; rc.max_steps = 77; rc.eval_seed = 5; rc.mlm_probability = 0.2; rc.adam_epsilon = 1e-6;
  rc.label_smoothing = 0.1;
  char *js = run_config_to_json(&rc);
  RunConfig back;
  run_config_defaults(&back);
  r = run_config_apply_json(&back, js, &e);
  check(r == 0 && memcmp(&rc, &back, sizeof rc) == 0, "run_config_json_round_trip", "rc %d: %s", r, e.msg);
  free(js);

  json_refused("run_config_refuses_unknown_key", "{\"learning_rate\": 1e-4}", "learning_rate");
  json_refused("run_config_refuses_wrong_type", "{\"epochs\": \"three\"}", "epochs");
  json_refused("run_config_refuses_fraction_for_integer", "{\"batch\": 2.5}", "batch");
  json_refused("run_config_refuses_non_object", "[1]", "object");
  json_refused("run_config_refuses_bad_json", "{\"lr\": }", "JSON");
  json_refused("run_config_refuses_duplicate_key", "{\"lr\": 1, \"lr\": 2}", "JSON");
  run_config_defaults(&rc);
  r = run_config_set(&rc, "--learning-rate", "1", &e);
  check(r == -1 && strstr(e.msg, "learning-rate"), "run_config_refuses_unknown_flag", "%s", e.msg);
  r = run_config_set(&rc, "--seed", "-1", &e);
  check(r == -1 && strstr(e.msg, "seed"), "run_config_refuses_negative_seed", "%s", e.msg);
  r = run_config_set(&rc, "--lr", "abc", &e);
  check(r == -1 && strstr(e.msg, "lr"), "run_config_refuses_bad_number", "%s", e.msg);
  /* What a flag sets must survive the JSON the run is stored as (tests/fuzz/fuzz_run_config
  ** found both): a path that is not UTF-8 text vanished from it, a seed above INT64_MAX came
  ** back as a negative number that resuming refused. */
  run_config_defaults(&rc);
  r = run_config_set(&rc, "--train", "data\xff/train", &e);
  check(r == -1 && strstr(e.msg, "train") && strstr(e.msg, "UTF-8") && rc.train[0] == 0, "run_config_refuses_non_utf8_flag",
        "rc %d: %s", r, e.msg);
  r = run_config_set(&rc, "--seed", "18446744073709551615", &e);
  check(r == -1 && strstr(e.msg, "seed") && rc.seed == 42, "run_config_refuses_seed_past_int64", "rc %d: %s", r, e.msg);
  r = run_config_set(&rc, "--seed", "9223372036854775807", &e);
  js = run_config_to_json(&rc);
  run_config_defaults(&back);
  int r2 = run_config_apply_json(&back, js, &e);
  check(r == 0 && r2 == 0 && back.seed == 9223372036854775807ULL, "run_config_largest_seed_round_trip", "rc %d %d: %s", r, r2, e.msg);
  free(js);

  /* A good description resolves: the preset takes the tokenizer's vocabulary and ids. */
  rc = good();
  RunPlan p;
  r = run_config_validate(&rc, &p, &e);
  check(r == 0 && p.model.vocab_size == V && p.train.mask_id == 4 && p.train.pad_id == 3 && p.n_special == 5 &&
            p.seq_len == 16 && p.train_samples == 20 && p.valid_samples == 8 && p.model.hidden_size == 128 &&
            p.train.weight_decay == 1e-3 && p.train.lr == 1e-4,
        "run_config_validates_and_resolves", "rc %d: %s (vocab %d, mask %d, pad %d, specials %d)", r, e.msg,
        p.model.vocab_size, p.train.mask_id, p.train.pad_id, p.n_special);
  check(r == 0 && !p.tokenizer && !p.tokenizer_json && !p.train_loader && !p.valid_loader, "run_config_validate_keeps_nothing",
        "something was left open");
  /* run_config_open keeps what it read for the run: the tokenizer file's bytes and the
  ** tokenizer from them, and both shard sets as the trainer reads them. */
  size_t tok_len = 0;
  char *tok_bytes = files_read_all(rc.tokenizer, 1 << 20, &tok_len, &e);
  r = run_config_open(&rc, &p, &e);
  check(r == 0 && p.tokenizer && tokenizer_vocab_size(p.tokenizer) == V && tok_bytes && p.tokenizer_json_len == tok_len &&
            !memcmp(p.tokenizer_json, tok_bytes, tok_len) && p.train_loader && p.valid_loader &&
            loader_n_samples(p.train_loader) == 20 && loader_n_samples(p.valid_loader) == 8 &&
            p.train.valid_path && p.model.vocab_size == V,
        "run_config_open_keeps_what_it_read", "rc %d: %s", r, e.msg);
  run_plan_close(&p);
  run_plan_close(&p);
  check(!p.tokenizer && !p.tokenizer_json && !p.train_loader && !p.valid_loader, "run_plan_close_frees", "left open");
  free(tok_bytes);
  RunConfig bad = rc;
  bad.batch = 64;   /* 20 samples: no full batch */
  r = run_config_open(&bad, &p, &e);
  check(r != 0 && !p.tokenizer && !p.tokenizer_json && !p.train_loader && !p.valid_loader, "run_config_open_keeps_nothing_on_refusal",
        "rc %d: %s", r, e.msg);

  RunConfig b;
  b = good(); b.lr = -1e-4; refused("run_config_refuses_negative_lr", &b, "lr");
  b = good(); b.weight_decay = -1; refused("run_config_refuses_negative_weight_decay", &b, "weight_decay");
  b = good(); b.epochs = 0; refused("run_config_refuses_zero_epochs", &b, "epochs");
  b = good(); snprintf(b.hosts, sizeof b.hosts, "-oProxyCommand=x"); refused("run_config_refuses_host_option", &b, "starts with '-'");
  b = good(); snprintf(b.hosts, sizeof b.hosts, "h1:1,:2"); refused("run_config_refuses_host_without_name", &b, "names no host");
  b = good(); snprintf(b.hosts, sizeof b.hosts, "h1,,h2"); refused("run_config_refuses_empty_host_entry", &b, "names no host");
  b = good(); snprintf(b.hosts, sizeof b.hosts, ":1"); refused("run_config_refuses_leading_slots", &b, "names no host");
  b = good(); snprintf(b.hosts, sizeof b.hosts, "h1:2,"); refused("run_config_refuses_trailing_empty_host", &b, "names no host");
  /* Slots are ranks: a whole number in [1, 4096] each and in all (mpirun said "all nodes
  ** are already filled" or "negative number of processes"). */
  {
    static const struct { const char *hosts, *needle; } slots[] = {
      {"localhost:0", "localhost: slots 0 must be in [1, 4096]"},
      {"localhost:", "localhost: no slot count after ':'"},
      {"localhost:x", "localhost: slots \"x\" is not a whole number"},
      {"localhost:-1", "localhost: slots \"-1\" is not a whole number"},
      {"h1:2,localhost:99999999999999999999", "localhost: slots 99999999999999999999 must be in [1, 4096]"},
      {"h1:4097", "h1: slots 4097 must be in [1, 4096]"},
      {"h1:4000,h2:97", "4097 slots in all: at most 4096"},
    };
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
      char name[96];
      snprintf(name, sizeof name, "run_config_refuses_host_slots[%s]", slots[i].hosts);
      b = good(); snprintf(b.hosts, sizeof b.hosts, "%s", slots[i].hosts); refused(name, &b, slots[i].needle);
    }
    Err e2 = {0};
    b = good(); snprintf(b.hosts, sizeof b.hosts, "h1:4000,h2,h3:95");
    check(run_config_check(&b, &e2) == 0 && run_config_host_slots(b.hosts) == 4096, "run_config_host_slots_sum",
          "%s, %ld slots", e2.msg, run_config_host_slots(b.hosts));
    /* The slots of hosts that are this machine meet --ranks' cap (twice the CPUs); others do not. */
    char big[64];
    snprintf(big, sizeof big, "localhost:%d", 2 * platform_cpu_count() + 1);
    b = good(); snprintf(b.hosts, sizeof b.hosts, "%s", big);
    int r1 = run_config_check_local_ranks(&b, &e2);
    check(r1 == -1 && strstr(e2.msg, "slots on this machine's"), "run_config_caps_local_host_slots", "rc %d: %s", r1, e2.msg);
    snprintf(big, sizeof big, "127.0.0.1:1,h1:%d", 2 * platform_cpu_count() + 1);
    b = good(); snprintf(b.hosts, sizeof b.hosts, "%s", big);
    check(run_config_check_local_ranks(&b, &e2) == 0, "run_config_leaves_other_hosts_uncapped", "%s", e2.msg);
    b = good(); b.ranks = 2 * platform_cpu_count() + 1;
    r1 = run_config_check_local_ranks(&b, &e2);
    check(r1 == -1 && strstr(e2.msg, "ranks: ") && strstr(e2.msg, "at most"), "run_config_caps_local_ranks", "rc %d: %s", r1, e2.msg);
  }
  b = good(); b.batch = 0; refused("run_config_refuses_zero_batch", &b, "batch");
  b = good(); b.warmup_steps = -2; refused("run_config_refuses_bad_warmup", &b, "warmup_steps");
  b = good(); b.adam_beta2 = 1; refused("run_config_refuses_beta2_one", &b, "adam_beta2");
  b = good(); b.name[0] = 0; refused("run_config_refuses_no_name", &b, "name");
  b = good(); snprintf(b.train, sizeof b.train, "%s/missing", root); refused("run_config_refuses_missing_train", &b, "train");
  b = good(); snprintf(b.validation, sizeof b.validation, "%s/missing", root);
  refused("run_config_refuses_missing_validation", &b, "validation");
  b = good(); snprintf(b.tokenizer, sizeof b.tokenizer, "%s/missing.json", root);
  refused("run_config_refuses_missing_tokenizer", &b, "tokenizer");
  b = good(); snprintf(b.train, sizeof b.train, "%s", wrongv_dir);
  refused("run_config_refuses_shard_vocab_mismatch", &b, "train: shards have vocabulary size 50 but the tokenizer has 40");
  b = good(); snprintf(b.validation, sizeof b.validation, "%s", seq_dir);
  refused("run_config_refuses_seq_mismatch", &b, "validation: sequence length 24");
  b = good(); snprintf(b.config, sizeof b.config, "huge"); refused("run_config_refuses_unknown_preset", &b, "config");
  b = good(); b.batch = 6; b.grad_accum = 4; refused("run_config_refuses_too_few_samples", &b, "train");

  /* The precision: fp32 unless asked, bf16 reaches the trainer, anything else is refused by name. */
  rc = good();
  check(!strcmp(rc.precision, "fp32") && p.train.precision == MODEL_FP32, "run_config_precision_defaults_to_fp32",
        "\"%s\"", rc.precision);
  r = run_config_set(&rc, "--precision", "bf16", &e);
  if (r == 0) r = run_config_validate(&rc, &p, &e);
  check(r == 0 && p.train.precision == MODEL_BF16, "run_config_precision_bf16_reaches_trainer", "rc %d: %s", r, e.msg);
  b = good(); snprintf(b.precision, sizeof b.precision, "fp16");
  refused("run_config_refuses_unknown_precision", &b, "precision: \"fp16\" must be fp32 or bf16");
  json_refused("run_config_refuses_precision_number", "{\"precision\": 16}", "precision");

  /* Label smoothing: off unless asked, in [0, 1) reaches the trainer, else refused by name. */
  rc = good();
  r = run_config_validate(&rc, &p, &e);
  check(r == 0 && rc.label_smoothing == 0 && p.train.label_smoothing == 0, "run_config_label_smoothing_defaults_to_0",
        "rc %d: %g", r, rc.label_smoothing);
  r = run_config_set(&rc, "--label-smoothing", "0.1", &e);
  if (r == 0) r = run_config_validate(&rc, &p, &e);
  check(r == 0 && p.train.label_smoothing == 0.1, "run_config_label_smoothing_reaches_trainer", "rc %d: %s", r, e.msg);
  b = good(); b.label_smoothing = 1; refused("run_config_refuses_label_smoothing_1", &b, "label_smoothing: 1 must be in [0, 1)");
  b = good(); b.label_smoothing = -0.1; refused("run_config_refuses_negative_label_smoothing", &b, "label_smoothing");
  json_refused("run_config_refuses_label_smoothing_text", "{\"label_smoothing\": \"0.1\"}", "label_smoothing");

  /* A config.json whose vocab_size or pad id disagree with the tokenizer; too few positions. */
  ModelConfig mc;
  config_preset("tiny", &mc, &e);
  char cpath[800];
  snprintf(cpath, sizeof cpath, "%s/config.json", root);
  mc.vocab_size = V + 1; mc.pad_token_id = 3;
  config_save(&mc, cpath, &e);
  b = good(); snprintf(b.config, sizeof b.config, "%s", cpath);
  refused("run_config_refuses_config_vocab_mismatch", &b, "config: vocab_size 41");
  mc.vocab_size = V; mc.pad_token_id = 1;
  config_save(&mc, cpath, &e);
  refused("run_config_refuses_config_pad_mismatch", &b, "pad_token_id");
  mc.pad_token_id = 3; mc.max_position_embeddings = 18;
  config_save(&mc, cpath, &e);
  refused("run_config_refuses_short_positions", &b, "max_position_embeddings");
  mc.max_position_embeddings = 20;
  config_save(&mc, cpath, &e);
  r = run_config_validate(&b, &p, &e);
  check(r == 0 && p.model.max_position_embeddings == 20, "run_config_accepts_config_file", "rc %d: %s", r, e.msg);

  /* A config.json of sizes only (the TPU guide's way): the tokenizer's vocabulary, <pad>,
  ** [CLS] and [SEP]; positions for the shards' 16 tokens past RoBERTa's pad 3. */
  const char *sizes = "\"hidden_size\": 16, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"intermediate_size\": 32";
  char text[1024];
  snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s}", sizes);
  put_text(cpath, text);
  r = run_config_validate(&b, &p, &e);
  check(r == 0 && p.model.vocab_size == V && p.model.pad_token_id == 3 && p.model.bos_token_id == 0 &&
            p.model.eos_token_id == 1 && p.model.max_position_embeddings == 16 + 3 + 1 && p.model.hidden_size == 16,
        "run_config_config_takes_tokenizer_ids", "rc %d: %s (vocab %d pad %d bos %d eos %d positions %d)", r, e.msg,
        p.model.vocab_size, p.model.pad_token_id, p.model.bos_token_id, p.model.eos_token_id, p.model.max_position_embeddings);
  /* BERT numbers positions from 0: exactly the shards' length. */
  snprintf(text, sizeof text, "{\"model_type\": \"bert\", %s}", sizes);
  put_text(cpath, text);
  r = run_config_validate(&b, &p, &e);
  check(r == 0 && p.model.model_type == MODEL_BERT && p.model.vocab_size == V && p.model.pad_token_id == 3 &&
            p.model.bos_token_id == 0 && p.model.eos_token_id == 1 && p.model.max_position_embeddings == 16,
        "run_config_bert_config_takes_tokenizer_ids", "rc %d: %s (pad %d positions %d)", r, e.msg, p.model.pad_token_id,
        p.model.max_position_embeddings);
  /* Stated and agreeing: kept; an explicit null eos ("no such token") too. */
  snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s, \"vocab_size\": %d, \"pad_token_id\": 3, "
           "\"bos_token_id\": 0, \"eos_token_id\": null, \"max_position_embeddings\": 30}", sizes, V);
  put_text(cpath, text);
  r = run_config_validate(&b, &p, &e);
  check(r == 0 && p.model.bos_token_id == 0 && p.model.eos_token_id == -1 && p.model.max_position_embeddings == 30,
        "run_config_config_keeps_stated_ids", "rc %d: %s (bos %d eos %d positions %d)", r, e.msg, p.model.bos_token_id,
        p.model.eos_token_id, p.model.max_position_embeddings);
  /* Stated and disagreeing: refused naming the field and both values. */
  snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s, \"vocab_size\": 50265}", sizes);
  put_text(cpath, text);
  refused("run_config_refuses_stated_vocab", &b, "vocab_size 50265 in");
  refused("run_config_refuses_stated_vocab_names_tokenizer_size", &b, "differs from the tokenizer's 40");
  snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s, \"pad_token_id\": 1}", sizes);
  put_text(cpath, text);
  refused("run_config_refuses_stated_pad", &b, "pad_token_id 1 in");
  refused("run_config_refuses_stated_pad_names_tokenizer_pad", &b, "is not the tokenizer's pad id 3 (<pad>)");
  snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s, \"bos_token_id\": 2}", sizes);
  put_text(cpath, text);
  refused("run_config_refuses_stated_bos", &b, "bos_token_id 2 in");
  refused("run_config_refuses_stated_bos_names_cls", &b, "is not the tokenizer's [CLS] id 0");
  snprintf(text, sizeof text, "{\"model_type\": \"bert\", %s, \"eos_token_id\": 2}", sizes);
  put_text(cpath, text);
  refused("run_config_refuses_stated_eos", &b, "eos_token_id 2 in");
  refused("run_config_refuses_stated_eos_names_sep", &b, "is not the tokenizer's [SEP] id 1");
  snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s, \"max_position_embeddings\": 12}", sizes);
  put_text(cpath, text);
  refused("run_config_refuses_stated_short_positions", &b, "max_position_embeddings 12 holds 8 tokens, the shards have 16");
  /* The file's own nonsense is still refused by name, with the file named. */
  put_text(cpath, "{\"model_type\": \"roberta\", \"hidden_size\": 15, \"num_attention_heads\": 2}");
  refused("run_config_refuses_config_nonsense", &b, "hidden_size: 15 is not a multiple");
  refused("run_config_refuses_config_nonsense_names_file", &b, cpath);

  /* RoBERTa's byte-level BPE: <pad> 1, <s> 0, </s> 2, as roberta-base; a preset takes them too. */
  char bpe_dir[800], bpe_tok[800], bpe_train[800];
  snprintf(bpe_dir, sizeof bpe_dir, "%s/bpe", root);
  snprintf(bpe_tok, sizeof bpe_tok, "%s/bpe-tokenizer.json", root);
  snprintf(bpe_train, sizeof bpe_train, "%s/bpe-train", root);
  if (put_bpe_tokenizer(bpe_dir, bpe_tok) || put_set(bpe_train, "train", 20, 16, 10)) {
    check(0, "run_config_bpe_setup", "could not write the BPE fixtures");
  } else {
    b = good();
    snprintf(b.tokenizer, sizeof b.tokenizer, "%s", bpe_tok);
    snprintf(b.train, sizeof b.train, "%s", bpe_train);
    b.validation[0] = 0;
    r = run_config_validate(&b, &p, &e);
    check(r == 0 && p.model.vocab_size == 10 && p.model.pad_token_id == 1 && p.model.bos_token_id == 0 &&
              p.model.eos_token_id == 2 && p.train.mask_id == 9,
          "run_config_preset_takes_bpe_ids", "rc %d: %s (vocab %d pad %d bos %d eos %d)", r, e.msg, p.model.vocab_size,
          p.model.pad_token_id, p.model.bos_token_id, p.model.eos_token_id);
    snprintf(b.config, sizeof b.config, "%s", cpath);
    snprintf(text, sizeof text, "{\"model_type\": \"roberta\", %s}", sizes);
    put_text(cpath, text);
    r = run_config_validate(&b, &p, &e);
    check(r == 0 && p.model.vocab_size == 10 && p.model.pad_token_id == 1 && p.model.bos_token_id == 0 &&
              p.model.eos_token_id == 2 && p.model.max_position_embeddings == 16 + 2,
          "run_config_config_takes_bpe_ids", "rc %d: %s (pad %d bos %d eos %d positions %d)", r, e.msg, p.model.pad_token_id,
          p.model.bos_token_id, p.model.eos_token_id, p.model.max_position_embeddings);
  }

  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd)) {}
  return check_exit();
}
