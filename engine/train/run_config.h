/* The description of a training run: a JSON object (a file given with --run, or the
** config stored with a run) and/or command-line flags, checked as a whole before any
** work starts. Every refusal names the field: unknown keys, wrong types, negative
** rates, missing shards, vocabulary sizes that disagree between the tokenizer, the
** shards and the model config, a pad or mask token the tokenizer lacks.
**
** Keys (JSON) and flags (--key, '-' or '_' alike) are the same names:
**   name, tokenizer, train, validation, config (config.json path or preset name),
**   out (run directory when no store is used), epochs, max_steps, batch, grad_accum,
**   lr, weight_decay, warmup_steps (-1: total // 20), clip_norm, min_lr_ratio,
**   adam_beta1, adam_beta2, adam_epsilon, seed, eval_seed, threads, eval_batches,
**   checkpoint_steps, checkpoint_epochs, keep_last, mlm_probability, label_smoothing
**   (in [0, 1): HF Trainer's label_smoothing_factor, on the training and evaluation loss), ranks (processes
**   of a data-parallel run, each with batch x grad_accum of the step), hosts,
**   precision ("fp32", or "bf16": the Linear layers' products in bfloat16).
**
** The model config and the tokenizer agree on the fields transformers reads the
** tokenizer's ids from: a config.json that leaves out vocab_size, pad_token_id,
** bos_token_id or eos_token_id takes the tokenizer's (its size; its <pad> / [PAD]; its
** family's [CLS] / [SEP] or <s> / </s>), and one that states a different value is
** refused naming both (an explicit null bos / eos is kept: no such token). Left out,
** max_position_embeddings is the train shards' sequence length, past RoBERTa's padding
** index (+ pad_token_id + 1: 512-token shards, pad 1 -> 514); stated, it must hold the
** shards' sequences. A preset takes all four ids from the tokenizer. The resolved
** config (RunPlan.model) is what every pushed revision's config.json holds. */
#ifndef MASKD_RUN_CONFIG_H
#define MASKD_RUN_CONFIG_H
#include <jansson.h>
#include <stdint.h>
#include "engine/nn/config.h"
#include "engine/nn/model.h"
#include "engine/core/err.h"
#include "engine/data/loader.h"
#include "engine/tok/tokenizer.h"
#include "engine/train/trainer.h"

/* The longest path a run description holds. A build given another (-DRUN_PATH_MAX=N) lays
** RunConfig out otherwise, and its ranks cannot run with this one's: server/cli/rank_identity.h
** refuses the mix (tests/cli/test_dist.sh builds such a maskd to check that). */
#ifndef RUN_PATH_MAX
#define RUN_PATH_MAX 1024
#endif
#define RUN_MAX_SPECIAL 64

typedef struct RunConfig {
  char name[128];
  char tokenizer[RUN_PATH_MAX];
  char train[RUN_PATH_MAX];
  char validation[RUN_PATH_MAX];   /* "" = no evaluation */
  char config[RUN_PATH_MAX];       /* a config.json file or "tiny" / "small" / "base" */
  char out[RUN_PATH_MAX];
  long epochs, max_steps, batch, grad_accum;
  double lr, weight_decay;
  long warmup_steps;
  double clip_norm, min_lr_ratio, adam_beta1, adam_beta2, adam_epsilon;
  uint64_t seed, eval_seed;
  long threads, eval_batches, checkpoint_steps, checkpoint_epochs, keep_last;
  double mlm_probability;
  double label_smoothing;          /* in [0, 1); 0: the plain cross-entropy */
  long ranks;                      /* processes of a data-parallel run (1: this process alone) */
  char hosts[RUN_PATH_MAX];        /* "" = this machine; else mpirun's "host:slots,host:slots" */
  char precision[16];              /* "fp32" or "bf16" (run_config_model_precision) */
} RunConfig;

/* What validation resolves: the model config (the tokenizer's ids and the positions
** filled in as the rule above says) and trainer options whose paths point into the RunConfig (keep it alive). */
typedef struct RunPlan {
  ModelConfig model;
  TrainerOptions train;
  int32_t special_ids[RUN_MAX_SPECIAL];
  int n_special;
  int vocab_size;
  int seq_len;
  uint64_t train_samples, valid_samples;
  /* Each shard set's identity: FNV-1a 64 over its shards' token checksums and sample
  ** counts, in the order the loader reads them (0: no validation set). Ranks compare
  ** it, since sets of the same size may hold other tokens. */
  uint64_t train_id, valid_id;
  /* What run_config_open read, for the run to use as it is (run_plan_close frees what
  ** is still here): the tokenizer file's bytes (read once: parsed, hashed, and pushed
  ** with every checkpoint), the tokenizer made from them, and the shard sets, opened
  ** and checked as the trainer reads them (trainer_new_loaders takes them). */
  char *tokenizer_json;
  size_t tokenizer_json_len;
  Tokenizer *tokenizer;
  Loader *train_loader, *valid_loader;
} RunPlan;

/* Defaults: epochs 1, batch 8, grad_accum 1, lr 1e-4, weight decay 1e-3, warm-up -1
** (total // 20), no clipping, betas 0.9/0.999, eps 1e-8, seed 42, eval seed 1234,
** threads 0 (all CPUs), checkpoint every epoch, keep_last 2, mlm 0.15, no label
** smoothing, config "small", precision "fp32". */
void run_config_defaults(RunConfig *rc);
/* Applies a JSON object's keys over rc; unknown keys and wrong types are refused by name. */
int run_config_apply_json(RunConfig *rc, const char *json_text, Err *err);
/* The same for a JSON object already parsed (a request's body, a stored job's description). */
int run_config_apply_object(RunConfig *rc, const json_t *object, Err *err);
/* A run description is a few hundred bytes; anything over 1 MiB is not one. */
#define RUN_CONFIG_MAX_FILE ((size_t)1 << 20)
/* Reads a JSON file (a regular file of at most RUN_CONFIG_MAX_FILE bytes) and applies it. */
int run_config_load(RunConfig *rc, const char *path, Err *err);
/* Sets one key from text (a flag's value); "--lr" and "lr", "grad-accum" and "grad_accum" alike. */
int run_config_set(RunConfig *rc, const char *key, const char *value, Err *err);
/* 0 when value is one key can take on its own (its type and range; how it goes with
** the other keys is run_config_check's), else -1 and *want says what it must be, as
** "an integer in [1, 65536]" or "a number >= 0 (0: no clipping)". */
int run_config_value_ok(const char *key, const char *value, char *want, size_t cap);
/* 1 when key (with or without "--", '-' or '_') names a field. */
int run_config_has_key(const char *key);
/* 1 when key is exactly one of a JSON description's keys ("grad_accum", not "grad-accum"). */
int run_config_json_key(const char *key);
/* The whole description as a JSON object's text (malloc'd), every key present. */
char *run_config_to_json(const RunConfig *rc);
/* The same as a JSON object (NULL when out of memory); the caller json_decref()s it. */
json_t *run_config_to_object(const RunConfig *rc);
/* 1 when s names a built-in model config ("tiny", "small", "base"), not a config.json. */
int run_config_is_preset(const char *s);
/* The model precision rc->precision names; -1 with err naming the field when it is neither. */
int run_config_model_precision(const RunConfig *rc, ModelPrecision *out, Err *err);
/* Checks what needs no file: required fields present and every number in its range. */
int run_config_check(const RunConfig *rc, Err *err);
/* The slots of a host list run_config_check accepted ("a:2,b,c:3": 6; a host without a count has one). */
long run_config_host_slots(const char *hosts);
/* Refuses more ranks on this machine (--ranks alone, or the slots of hosts that name it:
** localhost, 127.x, its host name) than twice its CPUs: more only slow the run, and a job
** posted over HTTP must not start thousands of processes. rc passed run_config_check. */
int run_config_check_local_ranks(const RunConfig *rc, Err *err);
/* Checks everything that can be checked before training: ranges, the tokenizer, the
** model config, both shard sets (opened and validated) and their agreement. */
int run_config_validate(const RunConfig *rc, RunPlan *plan, Err *err);
/* run_config_validate, keeping what it opened in plan for the run (the caller closes
** it with run_plan_close); on failure nothing is kept. */
int run_config_open(const RunConfig *rc, RunPlan *plan, Err *err);
/* run_config_open for one rank of a data-parallel run: the train set is read as that
** rank reads it (its part of every global batch). */
int run_config_open_ranks(const RunConfig *rc, Dist *dist, RunPlan *plan, Err *err);
/* Frees what run_config_open kept and is still in plan; safe to call twice. */
void run_plan_close(RunPlan *plan);

#endif
