/* maskd finetune: a masked LM's encoder from a store revision -> a sequence classifier
** trained on text-classification data (CSV or JSON Lines) with the engine's fine-tuning
** loop (engine/train/finetune.h), as transformers' Trainer runs it. Every epoch is
** evaluated on the validation set (given, or a seeded share held out of train) and
** pushed as a revision of the model repository NAME ("Training in progress epoch N");
** the revision with the best validation macro-F1 is marked the repository's best
** (NAME@best), and the test set is scored once at the end with its weights (Trainer's
** load_best_model_at_end). The run, its epochs (F1 scores, the most frequent
** confusions) and the test metrics go to the store. SIGINT/SIGTERM stop at the next
** step boundary (the run is "interrupted"; fine-tuning runs are not resumed).
** --job runs a text-classification job that maskd serve queued (server/cli/job_read.h);
** --export-plan writes what the PyTorch comparison needs and trains nothing. */
#include <assert.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/files.h"
#include "engine/core/now.h"
#include "engine/core/platform.h"
#include "engine/data/textcls.h"
#include "engine/io/checkpoint.h"
#include "engine/io/safetensors.h"
#include "engine/nn/config.h"
#include "engine/tok/tokenizer.h"
#include "engine/train/cls_metrics.h"
#include "engine/train/finetune.h"
#include "server/cli/cls_examples.h"
#include "server/cli/commands.h"
#include "server/cli/job_read.h"
#include "server/cli/progress.h"
#include "store/load.h"
#include "store/store.h"

typedef struct FtArgs {
  const char *db_path, *model, *train, *validation, *test, *text_column, *label_column, *labels, *name;
  int epochs, batch, eval_batch, max_length, length_grouped, threads;
  double lr, weight_decay, warmup_ratio, clip_norm, label_smoothing, validation_fraction;
  long warmup_steps, max_steps;
  long long seed;
  long long dropout_seed;   /* -1: the seed's */
  /* The encoder's and head's dropout over the base model's config, as keywords of HF's
  ** from_pretrained override it: -1 keeps the config's. */
  double hidden_dropout, attention_dropout, classifier_dropout;
  const char *precision, *export_plan;
  int json, quiet;
  const char *job, *data_dir, *work_dir;   /* --job: a queued job, its names resolved inside these */
} FtArgs;

static void ft_defaults(void *p) {
  FtArgs *a = p;
  memset(a, 0, sizeof *a);
  a->text_column = "text";
  a->label_column = "label";
  a->epochs = 3;
  a->lr = 2e-5;
  a->batch = 32;
  a->eval_batch = 64;
  a->max_length = 0;   /* unset: 128, or the model's positions where it has fewer */
  a->weight_decay = 0.01;
  a->warmup_ratio = 0;
  a->warmup_steps = 0;
  a->clip_norm = 1.0;
  a->seed = 42;
  a->dropout_seed = -1;
  a->hidden_dropout = a->attention_dropout = a->classifier_dropout = -1;
  a->precision = "fp32";
  a->validation_fraction = 0.1;
}

#define OFF(f) offsetof(FtArgs, f)
static const CliOpt ft_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = OFF(db_path), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--model", .kind = CLI_STRING, .off = OFF(model), .arg = "NAME[@REV]",
   .help = "the masked LM whose encoder is fine-tuned (a store revision)"},
  {.name = "--train", .kind = CLI_STRING, .off = OFF(train), .arg = "FILE",
   .help = "training examples: CSV with a header row, or JSON Lines (.jsonl, .json)"},
  {.name = "--validation", .kind = CLI_STRING, .off = OFF(validation), .arg = "FILE",
   .help = "evaluation examples (default: a seeded share of --train, held out)"},
  {.name = "--test", .kind = CLI_STRING, .off = OFF(test), .arg = "FILE",
   .help = "examples scored once at the end, with the best epoch's weights"},
  {.name = "--text-column", .kind = CLI_STRING, .off = OFF(text_column), .arg = "NAME", .def = CLI_DEFAULT,
   .help = "the field holding the text"},
  {.name = "--label-column", .kind = CLI_STRING, .off = OFF(label_column), .arg = "NAME", .def = CLI_DEFAULT,
   .help = "the field holding the label's name"},
  {.name = "--labels", .kind = CLI_STRING, .off = OFF(labels), .arg = "FILE",
   .help = "the label order: a JSON array of names or {\"names\": [...]} (HF's\n"
           "ClassLabel); default: the training labels, sorted"},
  {.name = "--name", .kind = CLI_STRING, .off = OFF(name), .arg = "NEW",
   .help = "run and model repository name of the classifier"},
  {.name = "--epochs", .kind = CLI_INT, .off = OFF(epochs), .lo = 1, .hi = 100000, .arg = "N", .def = CLI_DEFAULT,
   .help = "epochs"},
  {.name = "--lr", .kind = CLI_DOUBLE, .off = OFF(lr), .flo = 0, .fhi = 10, .arg = "X", .def = CLI_DEFAULT,
   .help = "peak learning rate (linear warm-up, then linear decay to 0)"},
  {.name = "--batch", .kind = CLI_INT, .off = OFF(batch), .lo = 1, .hi = 65536, .arg = "B", .def = CLI_DEFAULT,
   .help = "training examples per step"},
  {.name = "--eval-batch", .kind = CLI_INT, .off = OFF(eval_batch), .lo = 1, .hi = 65536, .arg = "B",
   .def = CLI_DEFAULT, .help = "evaluation examples padded together"},
  {.name = "--max-length", .kind = CLI_INT, .off = OFF(max_length), .lo = 2, .hi = 1 << 20, .arg = "N",
   .def = "128, or the model's positions where it has fewer",
   .help = "tokens per example, [CLS] and [SEP] included (longer texts are cut)"},
  {.name = "--weight-decay", .kind = CLI_DOUBLE, .off = OFF(weight_decay), .flo = 0, .fhi = 10, .arg = "X",
   .def = CLI_DEFAULT, .help = "AdamW weight decay (not on biases and LayerNorm)"},
  {.name = "--warmup-ratio", .kind = CLI_DOUBLE, .off = OFF(warmup_ratio), .flo = 0, .fhi = 1, .arg = "X",
   .def = CLI_DEFAULT, .help = "warm-up steps as a share of all steps (rounded up)"},
  {.name = "--warmup-steps", .kind = CLI_LONG, .off = OFF(warmup_steps), .lo = -1, .hi = 1L << 40, .arg = "N",
   .def = "0: from --warmup-ratio", .help = "warm-up steps; 0 (or -1) takes them from --warmup-ratio, as\n"
   "HF Trainer's warmup_steps"},
  {.name = "--clip-norm", .kind = CLI_DOUBLE, .off = OFF(clip_norm), .flo = 0, .fhi = 1e9, .arg = "X",
   .def = CLI_DEFAULT, .help = "gradient clipping norm (0: none)"},
  {.name = "--label-smoothing", .kind = CLI_DOUBLE, .off = OFF(label_smoothing), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_HI, .arg = "X", .def = CLI_DEFAULT,
   .help = "label smoothing of the loss, in training and evaluation (HF Trainer's\n"
           "label_smoothing_factor: the target (1-X) one-hot + X/labels)"},
  {.name = "--seed", .kind = CLI_I64, .off = OFF(seed), .lo = 0, .hi = INT64_MAX, .arg = "N", .def = CLI_DEFAULT,
   .help = "seed of the head's weights, the order, the dropout and the held-out split"},
  {.name = "--dropout-seed", .kind = CLI_I64, .off = OFF(dropout_seed), .lo = 0, .hi = INT64_MAX, .arg = "N",
   .def = "--seed", .help = "seed of the dropout masks alone (same plan, other masks: to measure seed noise)"},
  {.name = "--hidden-dropout-prob", .kind = CLI_DOUBLE, .off = OFF(hidden_dropout), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_HI, .arg = "X", .def = "the model's",
   .help = "dropout after the embeddings, each attention output and feed-forward\n"
           "(HF config's hidden_dropout_prob; 0 and the two below 0: no dropout)"},
  {.name = "--attention-probs-dropout-prob", .kind = CLI_DOUBLE, .off = OFF(attention_dropout), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_HI, .arg = "X", .def = "the model's", .help = "dropout on the attention probabilities"},
  {.name = "--classifier-dropout", .kind = CLI_DOUBLE, .off = OFF(classifier_dropout), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_HI, .arg = "X", .def = "the model's, else the hidden dropout",
   .help = "dropout before the head's layers (HF config's classifier_dropout)"},
  {.name = "--length-grouped", .kind = CLI_FLAG, .off = OFF(length_grouped),
   .help = "batches of examples of similar length (HF's group_by_length)"},
  {.name = "--precision", .kind = CLI_STRING, .off = OFF(precision), .arg = "P", .def = CLI_DEFAULT,
   .help = "fp32, or bf16 (the Linear layers' products from bfloat16 inputs)"},
  {.name = "--threads", .kind = CLI_INT, .off = OFF(threads), .lo = 0, .hi = 1024, .arg = "N", .def = "0: all CPUs",
   .help = "threads"},
  {.name = "--max-steps", .kind = CLI_LONG, .off = OFF(max_steps), .lo = 0, .hi = 1000000000, .arg = "N",
   .def = "0: epochs x steps per epoch", .help = "steps in all (the schedule ends there)"},
  {.name = "--validation-fraction", .kind = CLI_DOUBLE, .off = OFF(validation_fraction), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_HI, .arg = "X", .def = CLI_DEFAULT,
   .help = "the share of --train held out when no --validation is given; 0: none,\n"
           "every example trains and the last epoch is NEW@best (to retrain\n"
           "on all of train once the split has chosen the hyper-parameters)"},
  {.name = "--export-plan", .kind = CLI_STRING, .off = OFF(export_plan), .arg = "DIR",
   .help = "write DIR/plan.json (labels, token ids, every step's rows,\n"
           "hyper-parameters) and DIR/init (the classifier before any step),\n"
           "then stop: for the PyTorch comparison (scripts/torch_finetune.py)"},
  {.name = "--json", .kind = CLI_FLAG, .off = OFF(json), .help = "print a JSON summary on stdout at the end"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = OFF(quiet), .help = "no progress lines"},
  {.name = "--job", .kind = CLI_STRING, .off = OFF(job), .arg = "ID",
   .help = "run text-classification job ID of the store's queue, as maskd\n"
           "serve's worker does: its description comes from the job (files\n"
           "named inside --data-dir); no other options but --db and --quiet"},
  CLI_JOB_DIR_OPTS(FtArgs),
};
#undef OFF

const CliSpec cli_spec_finetune = {
  .name = "finetune",
  .usage = "usage: maskd finetune [--db PATH] --model NAME[@REV] --train FILE [--validation FILE] [--test FILE]\n"
           "                      --name NEW [options]\n"
           "       maskd finetune --db PATH --job ID --work-dir DIR [--data-dir DIR]   (maskd serve's worker)\n"
           "\n"
           "Fine-tunes a masked language model's encoder for text classification (a\n"
           "*ForSequenceClassification head). Each epoch is evaluated (loss, accuracy,\n"
           "macro-F1, weighted-F1) and pushed as a revision of the model NEW; the best by\n"
           "validation macro-F1 becomes NEW@best, and scores --test at the end.\n"
           "\n",
  .tail = "\n"
          "Values may also be written --option=VALUE (so a value may start with '-').\n",
  .opts = ft_opts,
  .n_opts = (int)(sizeof ft_opts / sizeof ft_opts[0]),
  .args_size = sizeof(FtArgs),
  .defaults = ft_defaults,
  .col = 28,
};

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

/* ---- data ---- */

/* Everything read and derived from the files, freed by data_free. */
typedef struct FtData {
  TextClsRaw raw[3];          /* train, validation, test as read */
  TextClsLabels labels;
  int32_t *label_ids[3];
  TextClsSet set[3];          /* tokenized: train, validation (given or held out), test */
  int have[3];
  size_t *split_train, *split_valid;   /* the held-out split's indices, ascending */
  size_t n_split_train, n_split_valid;
  char split_sha256[65];      /* of the held-out indices as decimal text joined by "," */
  char rows_sha256[65];       /* of the held-out rows' texts and labels (cls_examples_rows_sha256) */
} FtData;

enum { S_TRAIN = 0, S_VALID = 1, S_TEST = 2 };

/* Whether the run is evaluated each epoch: a --validation file, or a share of train held out. */
static int has_validation(const FtArgs *a, const FtData *d) { return d->have[S_VALID] || a->validation_fraction > 0; }
static const char *const set_names[3] = {"train", "validation", "test"};

static void data_free(FtData *d) {
  for (int i = 0; i < 3; i++) {
    textcls_raw_free(&d->raw[i]);
    free(d->label_ids[i]);
    textcls_set_free(&d->set[i]);
  }
  textcls_labels_free(&d->labels);
  free(d->split_train);
  free(d->split_valid);
}

/* Reads the files, the labels and the split; the texts are tokenized later (the
** tokenizer comes from the store). */
static int read_data(const FtArgs *a, FtData *d, Err *e) {
  const char *paths[3] = {a->train, a->validation, a->test};
  for (int i = 0; i < 3; i++) {
    if (!paths[i]) continue;
    if (textcls_read(paths[i], a->text_column, a->label_column, &d->raw[i], e)) return err_prefix(e, set_names[i]);
    d->have[i] = 1;
  }
  if (a->labels ? textcls_labels_load(a->labels, &d->labels, e) : textcls_labels_sorted(&d->raw[S_TRAIN], &d->labels, e))
    return err_prefix(e, a->labels ? "labels" : "train");
  const TextClsRaw *files[3];
  int which[3], n_files = 0, bad;
  for (int i = 0; i < 3; i++)
    if (d->have[i]) { which[n_files] = i; files[n_files++] = &d->raw[i]; }
  TextClsReading how;
  if (textcls_label_reading(files, n_files, &d->labels, a->labels ? TEXTCLS_IDS_AGREEING : TEXTCLS_NAMES_ONLY,
                            &how, &bad, e))
    return err_prefix(e, bad >= 0 ? set_names[which[bad]] : "labels");
  for (int i = 0; i < 3; i++) {
    if (!d->have[i]) continue;
    if (!(d->label_ids[i] = malloc((d->raw[i].n ? d->raw[i].n : 1) * sizeof(int32_t))))
      return err_setk(e, ERR_NOMEM, "out of memory");
    if (textcls_map_labels(&d->raw[i], &d->labels, how, d->label_ids[i], e)) return err_prefix(e, set_names[i]);
  }
  if (!d->have[S_VALID] && a->validation_fraction > 0) {
    if (textcls_split(d->raw[S_TRAIN].n, a->validation_fraction, (uint64_t)a->seed, &d->split_train, &d->n_split_train,
                      &d->split_valid, &d->n_split_valid, e))
      return err_prefix(e, "train: the held-out split");
    /* What the split was, checkable without the list (maskd evaluate --held-out-of checks it). */
    if (cls_examples_split_sha256(d->split_valid, d->n_split_valid, d->split_sha256, e)) return -1;
    cls_examples_rows_sha256(&d->raw[S_TRAIN], d->split_valid, d->n_split_valid, d->rows_sha256);
  }
  return 0;
}

/* ---- the base model ---- */

/* A classifier base's labels against the new ones: the same in the same order, the
** same in another order, or others (a base that is no classifier: others). */
typedef enum { HEAD_LABELS_OTHER = 0, HEAD_LABELS_SAME, HEAD_LABELS_REORDERED } HeadLabels;

/* The base revision's config, tokenizer and the classifier built on them (head
** initialised from the seed, encoder loaded from the revision). */
typedef struct FtModel {
  StoreRevision base;
  ModelConfig base_cfg, cfg;
  char *tokenizer_json;
  size_t tokenizer_len;
  Tokenizer *tok;
  Model *m;
  int head_loaded;     /* head tensors taken from the base revision (classifier.*, BERT's pooler) */
  HeadLabels labels_vs_base;   /* how the new labels stand to a classifier base's */
} FtModel;

static void model_part_free(FtModel *fm) {
  free(fm->tokenizer_json);
  tokenizer_free(fm->tok);
  model_free(fm->m);
}

static int load_base(Store *db, const char *spec, FtModel *fm, Err *e) {
  if (store_load_config(db, spec, &fm->base, &fm->base_cfg, e)) return err_prefix(e, "--model");
  if (!fm->base.tokenizer[0]) return err_setk(e, ERR_INVALID, "--model: %s@%lld has no tokenizer", fm->base.model, (long long)fm->base.seq);
  void *tj = NULL;
  if (store_revision_file(db, &fm->base, "tokenizer.json", &tj, &fm->tokenizer_len, e)) return err_prefix(e, "--model");
  fm->tokenizer_json = malloc(fm->tokenizer_len + 1);
  if (!fm->tokenizer_json) { free(tj); return err_setk(e, ERR_NOMEM, "out of memory"); }
  memcpy(fm->tokenizer_json, tj, fm->tokenizer_len);
  fm->tokenizer_json[fm->tokenizer_len] = '\0';
  free(tj);
  if (!(fm->tok = tokenizer_from_json(fm->tokenizer_json, fm->tokenizer_len, e))) return err_prefix(e, "--model: tokenizer.json");
  return 0;
}

/* base_id[i]: the base classifier's id of the new label i, where the base has exactly
** the new labels; the relation of the two lists (at most CONFIG_MAX_LABELS each). */
static HeadLabels labels_vs_base(const ModelConfig *base, const TextClsLabels *labels, int *base_id) {
  if (base->task != MODEL_TASK_SEQ_CLS || base->num_labels != labels->n) return HEAD_LABELS_OTHER;
  const char *names[CONFIG_MAX_LABELS];
  config_label_list(base, names);
  int same = 1;
  for (int i = 0; i < labels->n; i++) {
    base_id[i] = -1;
    for (int j = 0; j < base->num_labels && base_id[i] < 0; j++)
      if (!strcmp(names[j], labels->names[i])) base_id[i] = j;
    if (base_id[i] < 0) return HEAD_LABELS_OTHER;
    same &= base_id[i] == i;
  }
  return same ? HEAD_LABELS_SAME : HEAD_LABELS_REORDERED;   /* (names are unique: base_id is a permutation) */
}

/* The output layer's weight then bias, out of params into buf (back 0) or back in (1). */
static void out_layer_copy(float *buf, float *params, const ModelTensor *const out[2], int back) {
  for (int t = 0, at = 0; t < 2; at += (int)out[t]->numel, t++) {
    float *p = params + out[t]->offset;
    memcpy(back ? p : buf + at, back ? buf + at : p, out[t]->numel * sizeof *buf);
  }
}

/* The classifier: the base config with the labels, weights from the seed (HF's
** _init_weights, the head's), then the encoder (and every head tensor of a matching
** shape) from the base revision. The output layer (a row per label)
** is kept only where its rows mean the new labels: a classifier base of the same
** labels gives its rows, reordered to the new ids where its order differs; for other
** labels (of the same count, which the shapes cannot tell) the layer starts new. */
static int build_classifier(Store *db, FtModel *fm, const TextClsLabels *labels, const FtArgs *a, Err *e) {
  uint64_t seed = (uint64_t)a->seed;
  fm->cfg = fm->base_cfg;
  /* The dropout given over the config's; the pushed config.json says what trained. */
  if (a->hidden_dropout >= 0) fm->cfg.hidden_dropout_prob = a->hidden_dropout;
  if (a->attention_dropout >= 0) fm->cfg.attention_probs_dropout_prob = a->attention_dropout;
  if (a->classifier_dropout >= 0) fm->cfg.classifier_dropout = a->classifier_dropout;
  if (config_set_labels(&fm->cfg, labels->n, (const char *const *)labels->names, e)) return err_prefix(e, "labels");
  if (!(fm->m = model_new(&fm->cfg, e))) return -1;
  model_init_weights(fm->m, seed);
  int rob = fm->cfg.model_type == MODEL_ROBERTA;
  const ModelTensor *out[2] = {model_tensor_by_name(fm->m, rob ? "classifier.out_proj.weight" : "classifier.weight"),
                               model_tensor_by_name(fm->m, rob ? "classifier.out_proj.bias" : "classifier.bias")};
  assert(out[0] && out[1] && out[0]->shape[0] == labels->n && out[1]->numel == (size_t)labels->n);
  float *params = model_params(fm->m);
  size_t row = (size_t)out[0]->shape[1], n_out = out[0]->numel + out[1]->numel;
  float *kept = malloc(n_out * sizeof *kept);
  int *base_id = malloc((size_t)labels->n * sizeof *base_id);
  if (!kept || !base_id) { free(kept); free(base_id); return err_setk(e, ERR_NOMEM, "out of memory"); }
  /* The output layer as initialised, for labels the base's rows do not mean. */
  out_layer_copy(kept, params, out, 0);
  fm->labels_vs_base = labels_vs_base(&fm->base_cfg, labels, base_id);
  /* Read in place from the store, tensor by tensor; the bytes hashed on the way. */
  int rc = store_load_encoder(db, &fm->base, fm->m, &fm->head_loaded, e);
  if (rc) {
    err_prefix(e, "--model: model.safetensors");
  } else if (fm->labels_vs_base == HEAD_LABELS_REORDERED) {
    /* Row i of the new layer is the base's row of the same label. */
    out_layer_copy(kept, params, out, 0);
    for (int i = 0; i < labels->n; i++) {
      memcpy(params + out[0]->offset + (size_t)i * row, kept + (size_t)base_id[i] * row, row * sizeof *kept);
      params[out[1]->offset + (size_t)i] = kept[out[0]->numel + (size_t)base_id[i]];
    }
  } else if (fm->labels_vs_base == HEAD_LABELS_OTHER) {
    out_layer_copy(kept, params, out, 1);
  }
  free(kept);
  free(base_id);
  return rc;
}

/* The line that says which head tensors came from the base revision, if any did. */
static void head_origin_line(Progress *p, const FtModel *fm) {
  const char *base = fm->base.model;
  long long seq = (long long)fm->base.seq;
  if (!fm->head_loaded) return;
  if (fm->base_cfg.task != MODEL_TASK_SEQ_CLS)
    progress_line(p, "the pooler (%d tensors) comes from %s@%lld; the classifier is new", fm->head_loaded, base, seq);
  else if (fm->labels_vs_base == HEAD_LABELS_SAME)
    progress_line(p, "the classifier head (%d tensors) comes from %s@%lld, which has the same labels", fm->head_loaded, base,
                  seq);
  else if (fm->labels_vs_base == HEAD_LABELS_REORDERED)
    progress_line(p, "the classifier head (%d tensors) comes from %s@%lld, which has the same labels in another order: "
                  "its output rows follow the new ids", fm->head_loaded, base, seq);
  else
    progress_line(p, "the classifier head comes from %s@%lld but for its output layer, which is new: %s has other "
                  "labels (%d of them)", base, seq, base, fm->base_cfg.num_labels);
}

/* ---- the run description ---- */

static json_t *labels_json(const TextClsLabels *l) {
  json_t *a = json_array();
  for (int i = 0; i < l->n; i++) json_array_append_new(a, json_string(l->names[i]));
  return a;
}

/* A job's data files: the names it was given and the paths they resolved to. */
typedef struct JobNames {
  int n;
  char name[4][WORKSPACE_PATH_MAX], path[4][WORKSPACE_PATH_MAX];
} JobNames;

/* A file as the run shows it: the job's name for a path it resolved (a job's run
** shows no host path), else the path as given on the command line. */
static const char *shown(const JobNames *jn, const char *path) {
  for (int i = 0; path && jn && i < jn->n; i++)
    if (!strcmp(jn->path[i], path)) return jn->name[i];
  return path;
}

/* What the run was: the base model, the data, the split, the labels and every option. */
static char *run_config_text(const FtArgs *a, const FtModel *fm, const FtData *d, const Finetune *f, int threads,
                             const JobNames *jn) {
  char base[200];
  snprintf(base, sizeof base, "%s@%s", fm->base.model, fm->base.commit);
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "task", "text-classification", "name", a->name, "model",
                        a->model, "base_revision", base, "train", shown(jn, a->train), "text_column", a->text_column,
                        "label_column", a->label_column);
  if (!o) return NULL;
  json_object_set_new(o, "validation", a->validation ? json_string(shown(jn, a->validation)) : json_null());
  json_object_set_new(o, "test", a->test ? json_string(shown(jn, a->test)) : json_null());
  json_object_set_new(o, "labels_file", a->labels ? json_string(shown(jn, a->labels)) : json_null());
  json_object_set_new(o, "labels", labels_json(&d->labels));
  json_object_set_new(o, "epochs", json_integer(a->epochs));
  json_object_set_new(o, "lr", json_real(a->lr));
  json_object_set_new(o, "batch", json_integer(a->batch));
  json_object_set_new(o, "eval_batch", json_integer(a->eval_batch));
  json_object_set_new(o, "max_length", json_integer(a->max_length));
  json_object_set_new(o, "weight_decay", json_real(a->weight_decay));
  json_object_set_new(o, "warmup_ratio", json_real(a->warmup_ratio));
  json_object_set_new(o, "warmup_steps", json_integer(finetune_warmup_steps(f)));
  json_object_set_new(o, "clip_norm", json_real(a->clip_norm));
  json_object_set_new(o, "label_smoothing", json_real(a->label_smoothing));
  json_object_set_new(o, "seed", json_integer(a->seed));
  json_object_set_new(o, "dropout_seed", json_integer(a->dropout_seed >= 0 ? a->dropout_seed : a->seed));
  json_object_set_new(o, "hidden_dropout_prob", json_real(fm->cfg.hidden_dropout_prob));
  json_object_set_new(o, "attention_probs_dropout_prob", json_real(fm->cfg.attention_probs_dropout_prob));
  json_object_set_new(o, "classifier_dropout",
                      fm->cfg.classifier_dropout >= 0 ? json_real(fm->cfg.classifier_dropout) : json_null());
  json_object_set_new(o, "length_grouped", json_boolean(a->length_grouped));
  json_object_set_new(o, "precision", json_string(a->precision));
  json_object_set_new(o, "threads", json_integer(threads));
  json_object_set_new(o, "max_steps", json_integer(a->max_steps));
  json_object_set_new(o, "total_steps", json_integer(finetune_total_steps(f)));
  json_object_set_new(o, "adam_beta1", json_real(0.9));
  json_object_set_new(o, "adam_beta2", json_real(0.999));
  json_object_set_new(o, "adam_epsilon", json_real(1e-8));
  json_t *sizes = json_pack("{s:I, s:I, s:I}", "train", (json_int_t)d->set[S_TRAIN].n, "validation",
                            (json_int_t)d->set[S_VALID].n, "test", (json_int_t)(d->have[S_TEST] ? d->set[S_TEST].n : 0));
  json_object_set_new(o, "examples", sizes);
  if (!has_validation(a, d)) json_object_set_new(o, "split", json_null());
  else if (!d->have[S_VALID])
    json_object_set_new(o, "split", json_pack("{s:I, s:f, s:I, s:I, s:s, s:s}", "seed", (json_int_t)a->seed, "fraction",
                                              a->validation_fraction, "train", (json_int_t)d->n_split_train,
                                              "validation", (json_int_t)d->n_split_valid, "validation_indices_sha256",
                                              d->split_sha256, "validation_rows_sha256", d->rows_sha256));
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return text;
}

/* ---- --export-plan ---- */

static json_t *set_json(const TextClsSet *s) {
  json_t *ids = json_array(), *labels = json_array();
  for (size_t i = 0; i < s->n; i++) {
    json_t *row = json_array();
    for (size_t k = s->starts[i]; k < s->starts[i + 1]; k++) json_array_append_new(row, json_integer(s->ids[k]));
    json_array_append_new(ids, row);
    json_array_append_new(labels, json_integer(s->labels[i]));
  }
  return json_pack("{s:o, s:o}", "ids", ids, "labels", labels);
}

/* plan.json as scripts/torch_finetune.py reads it ("maskd-finetune-plan" version 1):
** labels, pad_id, hyper, sets {train, valid, test} (ids with [CLS] ... [SEP], cut), and
** order: per epoch the training batches, each the list of its rows' train-set indices,
** exactly the steps this run takes (cut at max_steps); split: null, or for a share held
** out of --train {seed, fraction, train_rows, valid_rows}, the training file's (0-based)
** rows each set holds, in set order (to keep the held-out text out of a pretraining
** corpus, say). init/ is the classifier before any step. */
static int export_plan(const char *dir, const FtArgs *a, FtModel *fm, const FtData *d, Finetune *f, Err *e) {
  if (files_make_dirs(dir, e)) return -1;
  json_t *o = json_pack("{s:s, s:i}", "format", "maskd-finetune-plan", "version", 1);
  json_object_set_new(o, "labels", labels_json(&d->labels));
  json_object_set_new(o, "pad_id", json_integer(fm->cfg.pad_token_id));
  json_t *sets = json_object();
  json_object_set_new(sets, "train", set_json(&d->set[S_TRAIN]));
  json_object_set_new(sets, "valid", has_validation(a, d) ? set_json(&d->set[S_VALID]) : json_null());
  json_object_set_new(sets, "test", d->have[S_TEST] ? set_json(&d->set[S_TEST]) : json_null());
  json_object_set_new(o, "sets", sets);
  json_t *split = json_null();
  if (d->split_valid) {
    json_t *rows[2] = {json_array(), json_array()};
    for (size_t i = 0; i < d->n_split_train; i++) json_array_append_new(rows[0], json_integer((json_int_t)d->split_train[i]));
    for (size_t i = 0; i < d->n_split_valid; i++) json_array_append_new(rows[1], json_integer((json_int_t)d->split_valid[i]));
    split = json_pack("{s:I, s:f, s:o, s:o}", "seed", (json_int_t)a->seed, "fraction", a->validation_fraction,
                      "train_rows", rows[0], "valid_rows", rows[1]);
  }
  json_object_set_new(o, "split", split);
  long spe = finetune_steps_per_epoch(f), total = finetune_total_steps(f);
  int epochs = (int)((total + spe - 1) / spe);
  size_t *order = malloc((d->set[S_TRAIN].n ? d->set[S_TRAIN].n : 1) * sizeof *order);
  if (!order) { json_decref(o); return err_setk(e, ERR_NOMEM, "out of memory"); }
  json_t *orders = json_array();
  long left = total;
  for (int ep = 0; ep < epochs; ep++) {
    size_t n = finetune_epoch_order(f, ep, order);
    json_t *batches = json_array();
    /* The batcher's batches are the order's rows, batch at a time, the last one shorter. */
    for (size_t k = 0; k < n && left > 0; k += (size_t)a->batch, left--) {
      json_t *b = json_array();
      for (size_t i = k; i < n && i < k + (size_t)a->batch; i++) json_array_append_new(b, json_integer((json_int_t)order[i]));
      json_array_append_new(batches, b);
    }
    json_array_append_new(orders, batches);
  }
  free(order);
  json_object_set_new(o, "order", orders);
  json_t *h = json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:s}",
                        "lr", a->lr, "weight_decay", a->weight_decay, "beta1", 0.9, "beta2", 0.999, "eps", 1e-8,
                        "clip_norm", a->clip_norm, "label_smoothing", a->label_smoothing, "warmup_steps",
                        (json_int_t)finetune_warmup_steps(f), "total_steps", (json_int_t)total, "steps_per_epoch",
                        (json_int_t)spe, "batch", (json_int_t)a->batch, "eval_batch", (json_int_t)a->eval_batch,
                        "epochs", (json_int_t)epochs, "seed", (json_int_t)a->seed, "max_length",
                        (json_int_t)a->max_length, "length_grouped", a->length_grouped, "precision", a->precision);
  json_object_set_new(o, "hyper", h);
  char *text = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  if (!text) return err_setk(e, ERR_NOMEM, "out of memory");
  char *path = files_join(dir, "plan.json"), *init = files_join(dir, "init");
  int r = path && init ? files_write_atomic(path, text, strlen(text), e) : err_setk(e, ERR_NOMEM, "out of memory");
  free(text);
  if (r == 0) r = ckpt_save_model(fm->m, init, 0, e);
  free(path);
  free(init);
  return r;
}

/* ---- the run ---- */

typedef struct FtCtx {
  Store *db;
  int64_t run;
  const FtArgs *a;
  FtModel *fm;
  FtData *d;
  Finetune *f;
  Progress prog;
  int epochs;
  long steps_done;         /* the last step taken: what --json reports, stopped or not */
  StoreStepMetric buf[64];
  int nbuf;
  double last_flush;
  Err err;                 /* the first store error of a callback without one */
  int failed;
  float *best_params;      /* the best epoch's weights (load_best_model_at_end) */
  double best_f1;
  int best_epoch;
  int64_t best_rev_id, best_seq;
  char best_metrics[1024];
  json_t *epoch_log;       /* [{epoch, step, train_loss, eval_loss, ...}] for --json */
} FtCtx;

static int flush_steps(FtCtx *c, Err *err) {
  if (c->nbuf == 0) return 0;
  int r = store_step_metrics_add(c->db, c->run, c->buf, c->nbuf, err);
  c->nbuf = 0;
  c->last_flush = now_monotonic();
  return r;
}

static void cb_step(void *ctx, const FinetuneStep *s) {
  FtCtx *c = ctx;
  c->steps_done = s->step;
  progress_step_rate(&c->prog, s->epoch, c->epochs, s->step, s->total_steps, s->loss, s->examples_per_s, "ex/s", s->seconds);
  c->buf[c->nbuf++] = (StoreStepMetric){s->step, s->epoch_frac, s->loss, s->lr, s->grad_norm, s->tokens_per_s, 0};
  if (c->nbuf == (int)(sizeof c->buf / sizeof c->buf[0]) || now_monotonic() - c->last_flush > 5.0) {
    if (flush_steps(c, &c->err) || store_run_progress(c->db, c->run, s->step, s->total_steps, s->epoch, &c->err))
      c->failed = 1;
  }
}

/* The top confusions of an evaluation as JSON text [{"true", "pred", "count"}] (malloc'd). */
static char *confusions_text(const FinetuneEval *e, const ModelConfig *cfg) {
  json_t *a = cls_examples_confusions_json(e, cfg);
  char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return t;
}

/* A number for a JSON text: non-finite values are null. */
static void num(char *buf, size_t cap, double v) {
  if (isfinite(v)) snprintf(buf, cap, "%.9g", v);
  else snprintf(buf, cap, "null");
}

/* model.safetensors into a push's blob (ctx: the model). */
static int weights_produce(void *ctx, StoreBlobWriter *w, Err *err) {
  CkptSink sink = {store_blob_sink, w};
  return ckpt_weights_stream(ctx, 0, &sink, err);
}

static int cb_epoch(void *ctx, Model *m, int epoch, const FinetuneEval *e, Err *err) {
  FtCtx *c = ctx;
  if (c->failed) { *err = c->err; return -1; }
  if (flush_steps(c, err)) return -1;
  char tl[32], el[32], ea[32], mf[32], wf[32];
  num(tl, sizeof tl, e->train_loss);
  num(el, sizeof el, e->loss);
  num(ea, sizeof ea, e->metrics.accuracy);
  num(mf, sizeof mf, e->metrics.macro_f1);
  num(wf, sizeof wf, e->metrics.weighted_f1);
  int evaluated = has_validation(c->a, c->d);
  if (evaluated)
    progress_line(&c->prog, "epoch %d/%d: loss %.4f - val_loss %.4f - val_accuracy %.4f - val_macro_f1 %.4f - "
                  "val_weighted_f1 %.4f (eval %.1fs)", epoch + 1, c->epochs, e->train_loss, e->loss, e->metrics.accuracy,
                  e->metrics.macro_f1, e->metrics.weighted_f1, e->seconds);
  else
    progress_line(&c->prog, "epoch %d/%d: loss %.4f (no validation)", epoch + 1, c->epochs, e->train_loss);
  char *conf = confusions_text(e, model_config(m));
  StoreEpochMetric em = {.epoch = epoch, .train_loss = e->train_loss, .eval_loss = e->loss,
                         .eval_accuracy = e->metrics.accuracy, .perplexity = NAN, .eval_runtime = e->seconds,
                         .cls = 1, .macro_f1 = e->metrics.macro_f1, .weighted_f1 = e->metrics.weighted_f1,
                         .confusion_json = conf};
  int r = conf ? store_epoch_metrics_add(c->db, c->run, &em, err) : err_setk(err, ERR_NOMEM, "out of memory");
  free(conf);
  if (r) return -1;
  char msg[128], metrics[1024];
  snprintf(msg, sizeof msg, "Training in progress epoch %d", epoch + 1);
  snprintf(metrics, sizeof metrics,
           "{\"epoch\": %d, \"step\": %ld, \"train_loss\": %s, \"eval_loss\": %s, \"eval_accuracy\": %s, "
           "\"eval_macro_f1\": %s, \"eval_weighted_f1\": %s}",
           epoch + 1, e->step, tl, el, ea, mf, wf);
  char *cfg = config_to_json(model_config(m));
  /* The weights stream into the store as they are serialised: no copy of the model. */
  StoreStream ws = {ckpt_weights_size(m, 0), weights_produce, m};
  StoreRevision rev;
  StorePush p = {.message = msg, .config_json = cfg, .weights_stream = &ws, .tokenizer_json = c->fm->tokenizer_json,
                 .run = c->run, .step = e->step, .epoch = epoch + 1, .metrics_json = metrics};
  r = cfg && ws.len ? store_push(c->db, c->a->name, &p, &rev, err) : err_setk(err, ERR_NOMEM, "checkpoint: out of memory");
  free(cfg);
  if (r == 0) r = store_run_progress(c->db, c->run, e->step, finetune_total_steps(c->f), epoch + 1, err);
  if (r) return -1;
  /* Trainer's metric_for_best_model "eval_macro_f1", greater is better: the first epoch, then any strictly better.
  ** Without validation there is nothing to choose by: the last epoch is the model (Trainer without an eval set). */
  double f1 = e->metrics.macro_f1;
  if (!evaluated || c->best_epoch < 0 || (isfinite(f1) && (!isfinite(c->best_f1) || f1 > c->best_f1))) {
    memcpy(c->best_params, model_params(m), model_num_params(m) * sizeof(float));
    c->best_f1 = f1;
    c->best_epoch = epoch;
    c->best_rev_id = rev.id;
    c->best_seq = rev.seq;
    snprintf(c->best_metrics, sizeof c->best_metrics, "%s", metrics);
    if (store_model_set_best(c->db, rev.id, err)) return -1;
  }
  json_t *ej = json_loads(metrics, 0, NULL);
  if (ej) {
    json_object_set_new(ej, "revision", json_integer(rev.seq));
    json_array_append_new(c->epoch_log, ej);
  }
  progress_line(&c->prog, "pushed %s (%s@%lld)%s", msg, c->a->name, (long long)rev.seq,
                c->best_epoch == epoch ? ", best so far" : "");
  return 0;
}

static int cb_should_stop(void *ctx) {
  FtCtx *c = ctx;
  return stop_signal != 0 || c->failed;
}

/* After the last epoch: the best weights back, the test set scored, the results stored
** in the run and in the best revision's metrics. *summary receives the test metrics. */
static int score_test(FtCtx *c, json_t **summary, Err *e) {
  *summary = NULL;
  if (!c->d->have[S_TEST] || c->best_epoch < 0) return 0;
  Model *m = c->fm->m;
  memcpy(model_params(m), c->best_params, model_num_params(m) * sizeof(float));
  FinetuneEval ev;
  if (finetune_evaluate(c->f, &c->d->set[S_TEST], &ev, e)) return err_prefix(e, "test");
  progress_line(&c->prog, "test (best epoch %d, %s@%lld): loss %.4f - accuracy %.4f - macro_f1 %.4f - weighted_f1 %.4f",
                c->best_epoch + 1, c->a->name, (long long)c->best_seq, ev.loss, ev.metrics.accuracy, ev.metrics.macro_f1,
                ev.metrics.weighted_f1);
  json_t *t = cls_examples_eval_json(&ev, c->d->set[S_TEST].n);
  json_t *cj = cls_examples_confusions_json(&ev, model_config(m));
  json_object_set_new(t, "confusion", cj ? cj : json_array());
  json_t *res = json_pack("{s:O, s:I, s:I}", "test", t, "best_revision", (json_int_t)c->best_seq, "best_epoch",
                          (json_int_t)(c->best_epoch + 1));
  char *text = res ? json_dumps(res, JSON_COMPACT) : NULL;
  int r = text ? store_run_set_results(c->db, c->run, text, e) : err_setk(e, ERR_NOMEM, "out of memory");
  free(text);
  json_decref(res);
  /* The best revision's metrics.json gains the test scores, as Trainer's final evaluate() reports them. */
  json_t *bm = json_loads(c->best_metrics, 0, NULL);
  const char *k;
  json_t *v;
  json_object_foreach(t, k, v) {
    if (!strcmp(k, "confusion") || !strcmp(k, "examples")) continue;
    char key[64];
    snprintf(key, sizeof key, "test_%s", k);
    json_object_set(bm, key, v);
  }
  text = bm ? json_dumps(bm, JSON_COMPACT) : NULL;
  json_decref(bm);
  if (r == 0) r = text ? store_revision_set_metrics(c->db, c->best_rev_id, text, e) : err_setk(e, ERR_NOMEM, "out of memory");
  free(text);
  if (r) { json_decref(t); return -1; }
  *summary = t;
  return 0;
}

/* Trains; the run's final status; the exit status. */
static int run_loop(FtCtx *c, double t0) {
  Err e = {0};
  int status = 1;
  struct sigaction sa, old[2];
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old[0]);
  sigaction(SIGTERM, &sa, &old[1]);
  FinetuneCallbacks cb = {c, cb_step, cb_epoch, cb_should_stop};
  int r = finetune_run(c->f, &cb, &e);
  progress_done(&c->prog);
  Err fe = {0};
  if (r >= 0 && flush_steps(c, &fe)) { e = fe; r = -1; }
  if (r >= 0 && c->failed) { e = c->err; r = -1; }
  json_t *test = NULL;
  if (r == FINETUNE_DONE && score_test(c, &test, &e)) r = -1;
  sigaction(SIGINT, &old[0], NULL);
  sigaction(SIGTERM, &old[1], NULL);
  char el[32];
  progress_format_duration(el, sizeof el, now_monotonic() - t0);
  if (r == FINETUNE_DONE) {
    if (store_run_set_status(c->db, c->run, STORE_STATUS_DONE, NULL, &e)) r = -1;
    else {
      if (!c->a->quiet) fprintf(stderr, "run %lld done in %s; best: %s@best (epoch %d)\n", (long long)c->run, el,
                                c->a->name, c->best_epoch + 1);
      status = 0;
    }
  } else if (r == FINETUNE_STOPPED) {
    const char *why = stop_signal == SIGTERM ? "stopped by SIGTERM" : "stopped by SIGINT";
    if (store_run_set_status(c->db, c->run, STORE_STATUS_INTERRUPTED, why, &e) == 0) {
      fprintf(stderr, "maskd finetune: run %lld interrupted (%s); the epochs pushed so far are kept\n", (long long)c->run, why);
      status = 130;
    } else r = -1;
  }
  if (r < 0) {
    store_run_set_status(c->db, c->run, STORE_STATUS_FAILED, e.msg, NULL);
    fprintf(stderr, "maskd finetune: %s\n", e.msg);
    status = 1;
  }
  if (c->a->json && status != 1) {
    /* "steps" is what was done (a stopped run's fewer than planned), "total_steps" the plan. */
    json_t *o = json_pack("{s:I, s:s, s:s, s:I, s:I, s:O}", "run", (json_int_t)c->run, "model", c->a->name, "status",
                          status == 0 ? "done" : "interrupted", "steps", (json_int_t)c->steps_done, "total_steps",
                          (json_int_t)finetune_total_steps(c->f), "epochs", c->epoch_log);
    if (status != 0)
      json_object_set_new(o, "stopped_by", json_string(stop_signal == SIGTERM ? "SIGTERM" : "SIGINT"));
    if (c->best_epoch >= 0)
      json_object_set_new(o, "best", json_pack("{s:I, s:I, s:o}", "revision", (json_int_t)c->best_seq, "epoch",
                                               (json_int_t)(c->best_epoch + 1), "eval_macro_f1",
                                               isfinite(c->best_f1) ? json_real(c->best_f1) : json_null()));
    json_object_set_new(o, "test", test ? json_incref(test) : json_null());
    json_object_set_new(o, "seconds", json_real(now_monotonic() - t0));
    char *text = json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(10));
    if (text) printf("%s\n", text);
    free(text);
    json_decref(o);
  }
  json_decref(test);
  return status;
}

/* ---- the command ---- */

/* With --job the job is the whole description: no option but these. */
static const char *const job_options[] = {"--job", "--db", "--work-dir", "--data-dir", "--quiet", NULL};

/* A job's error names its files as the job did: the API never shows a host path. */
static void hide_paths(const JobNames *jn, Err *e) {
  for (int i = 0; i < jn->n; i++) {
    char *at = strstr(e->msg, jn->path[i]);
    if (!at || !jn->path[i][0]) continue;
    char out[sizeof e->msg];
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - e->msg), e->msg, jn->name[i], at + strlen(jn->path[i]));
    snprintf(e->msg, sizeof e->msg, "%s", out);
  }
}

/* --job: the job's description as command-line values, parsed by the same table (so the
** job is checked as the command line is); the strings live in *owned (freed by the caller). */
static int from_job(FtArgs *a, json_t **owned, JobNames *jn, Err *e) {
  int64_t id;
  if (job_read_id(a->job, a->work_dir, &id, e)) return -1;
  Store *db = store_open(cli_db_path(a->db_path), e);
  if (!db) return -1;
  json_t *p = NULL;
  int r = job_read_finetune(db, id, a->data_dir, a->work_dir, &p, e);
  if (r == 0) {
    /* The names as submitted, beside the paths they resolved to. */
    json_t *j = store_job_get(db, id, NULL), *given = json_object_get(j, "params");
    static const char *const files[] = JOB_FINETUNE_FILES;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
      const char *name = json_string_value(json_object_get(given, files[i]));
      const char *path = json_string_value(json_object_get(p, files[i]));
      if (!name || !path || jn->n >= 4) continue;
      snprintf(jn->name[jn->n], sizeof jn->name[0], "%s", name);
      snprintf(jn->path[jn->n], sizeof jn->path[0], "%s", path);
      jn->n++;
    }
    json_decref(j);
  }
  store_close(db);
  if (r) return -1;
  json_t *argv_strings = json_array();
  const char *k;
  json_t *v;
  /* The command's own options are not a job's: where it writes and what it reads stay the worker's. */
  static const char *const not_job[] = {"db", "job", "work_dir", "data_dir", "export_plan", "json", "quiet", NULL};
  json_object_foreach(p, k, v) {
    if (!strcmp(k, "task")) continue;
    for (int i = 0; not_job[i] && r == 0; i++)
      if (!strcmp(k, not_job[i])) r = err_setk(e, ERR_INVALID, "job %lld: %s is not a job's field", (long long)id, k);
    if (r) break;
    char flag[80], arg[4200];
    snprintf(flag, sizeof flag, "--%s", k);
    for (char *q = flag; *q; q++) if (*q == '_') *q = '-';
    if (json_is_true(v)) snprintf(arg, sizeof arg, "%s", flag);
    else if (json_is_false(v)) continue;
    else if (json_is_string(v)) snprintf(arg, sizeof arg, "%s=%s", flag, json_string_value(v));
    else if (json_is_integer(v)) snprintf(arg, sizeof arg, "%s=%lld", flag, (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(arg, sizeof arg, "%s=%.17g", flag, json_real_value(v));
    else { r = err_setk(e, ERR_INVALID, "job %lld: %s: not a string, number or boolean", (long long)id, k); break; }
    json_array_append_new(argv_strings, json_string(arg));
  }
  json_decref(p);
  *owned = argv_strings;
  if (r) return -1;
  size_t n = json_array_size(argv_strings);
  const char **v2 = calloc(n + 1, sizeof *v2);
  if (!v2) return err_setk(e, ERR_NOMEM, "out of memory");
  v2[0] = "finetune";
  for (size_t i = 0; i < n; i++) v2[i + 1] = json_string_value(json_array_get(argv_strings, i));
  /* The job's own values over the defaults; --db, --job and the folders stay as given. */
  FtArgs given = *a;
  ft_defaults(a);
  a->db_path = given.db_path; a->job = given.job; a->work_dir = given.work_dir; a->data_dir = given.data_dir;
  a->quiet = given.quiet;
  int parsed = cli_parse(&cli_spec_finetune, "finetune", -1, (int)n + 1, (char **)v2, 1, a, NULL, NULL);
  free(v2);
  if (parsed) return err_setk(e, ERR_INVALID, "job %lld: its description is refused (above)", (long long)id);
  a->job = given.job;
  return 0;
}

int cmd_finetune(int argc, char **argv) {
  FtArgs a;
  ft_defaults(&a);
  int parsed = cli_parse(&cli_spec_finetune, "finetune", -1, argc, argv, 1, &a, NULL, NULL);
  if (parsed) return parsed > 0 ? 0 : 2;
  if (a.job) {
    const char *bad = cli_option_outside(argc, argv, 1, job_options);
    if (bad) {
      fprintf(stderr, "maskd finetune: --job runs the job as it was queued; it takes no %s\n", bad);
      return 2;
    }
  } else if (a.data_dir || a.work_dir) {
    fprintf(stderr, "maskd finetune: --data-dir and --work-dir go with --job\n");
    return 2;
  }
  Err e = {0};
  json_t *job_strings = NULL;
  int64_t job = 0;
  static JobNames jn;
  if (a.job) {
    if (from_job(&a, &job_strings, &jn, &e)) {
      fprintf(stderr, "maskd finetune: %s\n", e.msg);
      json_decref(job_strings);
      return 1;
    }
    long id;
    cli_parse_long(a.job, 1, LONG_MAX, &id);
    job = id;
  }
  ModelPrecision prec;
  if (!a.model) { fprintf(stderr, "maskd finetune: --model is required (a masked LM in the store: NAME[@REV])\n"); return 2; }
  if (!a.train) { fprintf(stderr, "maskd finetune: --train is required\n"); return 2; }
  if (!a.name && !a.export_plan) { fprintf(stderr, "maskd finetune: --name is required (the new model repository)\n"); return 2; }
  if (model_precision_parse(a.precision, &prec)) {
    fprintf(stderr, "maskd finetune: --precision: expected fp32 or bf16, got '%s'\n", a.precision);
    return 2;
  }
  if (a.name && store_check_run_name(a.name, &e)) { fprintf(stderr, "maskd finetune: --name: %s\n", e.msg); return 2; }

  int status = 1;
  FtData d;
  memset(&d, 0, sizeof d);
  FtModel fm;
  memset(&fm, 0, sizeof fm);
  Store *db = NULL;
  Finetune *f = NULL;
  FtCtx *c = NULL;
  char *cfg_text = NULL;
  int64_t run = -1;
  double t0 = now_monotonic();
  int threads = a.threads > 0 ? a.threads : platform_cpu_count();

  /* What needs no store first: the data files, the labels. */
  if (read_data(&a, &d, &e)) goto fail;
  if (!(db = cli_store_open_existing(a.db_path, &e))) goto fail;
  int recovered = 0;
  if (store_runs_recover(db, &recovered, &e)) goto fail;
  if (load_base(db, a.model, &fm, &e)) goto fail;
  /* What POST /runs refuses before it queues a job, by the same function: the base's own
  ** repository as --name, a repository of another pipeline, --max-length past the positions. */
  {
    const char *field;
    if (store_finetune_check(db, &fm.base, &fm.base_cfg, a.name, a.max_length, &field, &e)) {
      if (field) err_prefix(&e, !strcmp(field, "max_length") ? "--max-length" : "--name");
      goto fail;
    }
    int positions = config_max_tokens(&fm.base_cfg);
    if (a.max_length == 0) a.max_length = positions < 128 ? positions : 128;
  }
  /* The texts with [CLS] ... [SEP], cut to --max-length; the held-out split from train's own ids. */
  {
    const size_t *idx[2] = {d.split_train, d.split_valid};
    size_t nidx[2] = {d.n_split_train, d.n_split_valid};
    TextClsSet *out[2] = {&d.set[S_TRAIN], &d.set[S_VALID]};
    if (cls_examples_tokenize(fm.tok, &d.raw[S_TRAIN], d.label_ids[S_TRAIN], threads, a.max_length, idx, nidx, out,
                 d.have[S_VALID] || !has_validation(&a, &d) ? 1 : 2, &e))
      goto fail;
    for (int i = S_VALID; i <= S_TEST; i++) {
      if (!d.have[i]) continue;
      const size_t *all[2] = {NULL, NULL};
      TextClsSet *one[2] = {&d.set[i], NULL};
      if (cls_examples_tokenize(fm.tok, &d.raw[i], d.label_ids[i], threads, a.max_length, all, nidx, one, 1, &e)) goto fail;
    }
  }
  if (build_classifier(db, &fm, &d.labels, &a, &e)) goto fail;

  FinetuneOptions o = finetune_default_options();
  o.batch = a.batch; o.eval_batch = a.eval_batch; o.epochs = a.epochs; o.max_steps = a.max_steps;
  o.lr = a.lr; o.weight_decay = a.weight_decay; o.clip_norm = a.clip_norm; o.label_smoothing = a.label_smoothing;
  o.warmup_ratio = a.warmup_ratio; o.warmup_steps = a.warmup_steps; o.length_grouped = a.length_grouped;
  o.seed = (uint64_t)a.seed; o.has_dropout_seed = a.dropout_seed >= 0; o.dropout_seed = (uint64_t)a.dropout_seed;
  o.threads = threads; o.pad_id = fm.cfg.pad_token_id; o.precision = prec;
  o.max_seq = d.have[S_TEST] ? d.set[S_TEST].max_len : 0;
  if (!(f = finetune_new(fm.m, &d.set[S_TRAIN], has_validation(&a, &d) ? &d.set[S_VALID] : NULL, &o, &e))) goto fail;
  if (threads == platform_cpu_count()) platform_pin_threads(threads);

  if (a.export_plan) {
    if (export_plan(a.export_plan, &a, &fm, &d, f, &e)) goto fail;
    if (!a.quiet) fprintf(stderr, "wrote %s/plan.json and %s/init\n", a.export_plan, a.export_plan);
    status = 0;
    goto done;
  }

  /* Everything is checked; from here on failures are the run's and are recorded. */
  if (!(cfg_text = run_config_text(&a, &fm, &d, f, threads, &jn))) { err_setk(&e, ERR_NOMEM, "out of memory"); goto fail; }
  run = job ? store_job_run_create(db, job, a.name, cfg_text, &e) : store_run_create(db, a.name, cfg_text, &e);
  if (run < 0 || store_run_set_status(db, run, STORE_STATUS_RUNNING, NULL, &e)) goto fail;
  if (!(c = calloc(1, sizeof *c)) || !(c->best_params = malloc(model_num_params(fm.m) * sizeof(float))) ||
      !(c->epoch_log = json_array())) {
    err_setk(&e, ERR_NOMEM, "out of memory");
    store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
    goto fail;
  }
  c->db = db; c->run = run; c->a = &a; c->fm = &fm; c->d = &d; c->f = f;
  c->best_epoch = -1; c->best_f1 = NAN;
  long spe = finetune_steps_per_epoch(f), total = finetune_total_steps(f);
  c->epochs = (int)((total + spe - 1) / spe);
  c->last_flush = now_monotonic();
  progress_init(&c->prog, stderr, a.quiet, 0);
  char valid_text[64];
  if (has_validation(&a, &d))
    snprintf(valid_text, sizeof valid_text, "%zu validation%s", d.set[S_VALID].n, d.have[S_VALID] ? "" : " (held out)");
  else
    snprintf(valid_text, sizeof valid_text, "no validation");
  progress_line(&c->prog, "run %lld \"%s\": %s (%s@%lld) -> %d labels; %zu train, %s, %zu test examples",
                (long long)run, a.name, a.model, fm.base.model, (long long)fm.base.seq, d.labels.n, d.set[S_TRAIN].n,
                valid_text, d.have[S_TEST] ? d.set[S_TEST].n : 0);
  progress_line(&c->prog, "%ld steps (%ld per epoch, warm-up %ld), batch %d, up to %d tokens, %zu parameters%s", total, spe,
                finetune_warmup_steps(f), a.batch, d.set[S_TRAIN].max_len, model_num_params(fm.m),
                prec == MODEL_BF16 ? ", bf16 products" : "");
  head_origin_line(&c->prog, &fm);
  status = run_loop(c, t0);
  goto done;

fail:
  hide_paths(&jn, &e);
  fprintf(stderr, "maskd finetune: %s\n", e.msg);
  if (run > 0 && !c) store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
  status = 1;
done:
  if (c) {
    free(c->best_params);
    json_decref(c->epoch_log);
    free(c);
  }
  free(cfg_text);
  finetune_free(f);
  model_part_free(&fm);
  store_close(db);
  data_free(&d);
  json_decref(job_strings);
  return status;
}
