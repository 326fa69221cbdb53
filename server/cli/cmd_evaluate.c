/* maskd evaluate: a classifier revision scored on labelled examples, as maskd finetune
** scores its validation and test sets (engine/train/finetune.h's evaluation: loss,
** accuracy, macro-F1, weighted-F1, the most confused pairs), for a model no run scored:
** a model soup (maskd average), an imported classifier, a run's model on new data.
**
** --held-out-of RUN rebuilds the rows fine-tuning run RUN held out of its training file
** (textcls_split with the run's seed and share) and checks them against the hash of their
** indices the run recorded, so a soup of RUN's plan is scored on exactly the rows that chose
** RUN's own best epoch: its figure is comparable to theirs. */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/platform.h"
#include "engine/data/textcls.h"
#include "engine/nn/config.h"
#include "engine/tok/tokenizer.h"
#include "engine/train/cls_metrics.h"
#include "engine/train/finetune.h"
#include "server/cli/cls_examples.h"
#include "server/cli/commands.h"
#include "store/load.h"
#include "store/store.h"

typedef struct EvalArgs {
  const char *db, *model, *data, *held_out_of, *train, *text_column, *label_column, *precision;
  int max_length, batch, eval_batch, threads, json;
  double label_smoothing;
} EvalArgs;

/* -1 / NAN: not given (the run's value with --held-out-of, else the defaults below). */
static void eval_defaults(void *p) {
  EvalArgs *a = p;
  memset(a, 0, sizeof *a);
  a->max_length = -1; a->batch = -1; a->eval_batch = -1;
  a->label_smoothing = NAN;
}

static const CliOpt eval_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = offsetof(EvalArgs, db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--model", .kind = CLI_STRING, .off = offsetof(EvalArgs, model), .arg = "NAME[@REV]",
   .help = "the classifier (a store revision; REV: main, best, a number or a commit)"},
  {.name = "--data", .kind = CLI_STRING, .off = offsetof(EvalArgs, data), .arg = "FILE",
   .help = "labelled examples: CSV with a header row, or JSON Lines / a JSON array"},
  {.name = "--held-out-of", .kind = CLI_STRING, .off = offsetof(EvalArgs, held_out_of), .arg = "RUN",
   .help = "instead of --data: the rows fine-tuning run RUN (name or id) held out of its\n"
           "training file, checked against the hashes it recorded of their indices and of their\n"
           "texts and labels (runs before 2026-11-29: the indices only); its columns, max length,\n"
           "label smoothing and batches unless given"},
  {.name = "--train", .kind = CLI_STRING, .off = offsetof(EvalArgs, train), .arg = "FILE",
   .help = "with --held-out-of: RUN's training file, where its recorded path does not reach it"},
  {.name = "--text-column", .kind = CLI_STRING, .off = offsetof(EvalArgs, text_column), .arg = "NAME", .def = "text",
   .help = "the field holding the text"},
  {.name = "--label-column", .kind = CLI_STRING, .off = offsetof(EvalArgs, label_column), .arg = "NAME", .def = "label",
   .help = "the field holding the label's name (one of the model's id2label)"},
  {.name = "--max-length", .kind = CLI_INT, .off = offsetof(EvalArgs, max_length), .lo = 2, .hi = 1 << 20, .arg = "N",
   .def = "128, or the model's positions where it has fewer", .help = "tokens per example, [CLS] and [SEP] included"},
  {.name = "--label-smoothing", .kind = CLI_DOUBLE, .off = offsetof(EvalArgs, label_smoothing), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_HI, .arg = "X", .def = "0", .help = "of the loss, as fine-tuning's"},
  {.name = "--batch", .kind = CLI_INT, .off = offsetof(EvalArgs, batch), .lo = 1, .hi = 65536, .arg = "B", .def = "32",
   .help = "rows per forward pass"},
  {.name = "--eval-batch", .kind = CLI_INT, .off = offsetof(EvalArgs, eval_batch), .lo = 1, .hi = 65536, .arg = "B",
   .def = "64", .help = "examples padded together"},
  {.name = "--precision", .kind = CLI_STRING, .off = offsetof(EvalArgs, precision), .arg = "fp32|bf16", .def = "fp32",
   .help = "the Linear layers' products, as fine-tuning's --precision (RUN's with --held-out-of)"},
  {.name = "--threads", .kind = CLI_INT, .off = offsetof(EvalArgs, threads), .lo = 0, .hi = 4096, .arg = "N",
   .def = "0: all CPUs", .help = "threads"},
  {.name = "--json", .kind = CLI_FLAG, .off = offsetof(EvalArgs, json), .help = "print a JSON summary on stdout"},
};

const CliSpec cli_spec_evaluate = {
  .name = "evaluate",
  .usage =
    "usage: maskd evaluate [--db PATH] --model NAME[@REV] (--data FILE | --held-out-of RUN [--train FILE]) [options]\n"
    "Scores a classifier on labelled examples as maskd finetune scores its validation and test sets:\n"
    "loss, accuracy, macro-F1 and weighted-F1 (scikit-learn's), and the most confused label pairs.\n"
    "The labels are the model's (config.json's id2label): each label cell names one of them, or,\n"
    "when every cell is an integer and some is no name, is its id. --held-out-of RUN scores the rows\n"
    "that fine-tuning run RUN held out of its training file (the same seed and share, checked\n"
    "against the hashes of the rows it recorded), with RUN's columns, max length, label smoothing and\n"
    "batches: the validation figure of a model soup of RUN's plan (maskd average), comparable\n"
    "with RUN's own.\n",
  .opts = eval_opts,
  .n_opts = (int)(sizeof eval_opts / sizeof eval_opts[0]),
  .positional = 0,
  .args_size = sizeof(EvalArgs),
  .defaults = eval_defaults,
  .col = 24,
};

/* What --held-out-of RUN takes from the run's recorded config. */
typedef struct HeldOut {
  const char *train, *text_column, *label_column;   /* into cfg */
  double fraction, label_smoothing;
  const char *precision;
  uint64_t seed;
  int max_length, batch, eval_batch;
  const char *indices_sha256;
  const char *rows_sha256;      /* NULL for a run recorded before it was */
  json_t *run;                                        /* owns the strings */
} HeldOut;

static const char *obj_text(json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

static int read_run(Store *s, const char *spec, HeldOut *h, Err *err) {
  int64_t id = store_run_find(s, spec, err);
  if (id < 0) return err_prefix(err, "--held-out-of");
  if (!(h->run = store_run_get(s, id, err))) return err_prefix(err, "--held-out-of");
  json_t *c = json_object_get(h->run, "config"), *split = json_object_get(c, "split");
  const char *name = obj_text(h->run, "name");
  if (!c || strcmp(obj_text(c, "task") ? obj_text(c, "task") : "", "text-classification"))
    return err_setk(err, ERR_INVALID, "--held-out-of: run %s is no fine-tuning run", name ? name : spec);
  if (!json_is_object(split))
    return err_setk(err, ERR_INVALID, "--held-out-of: run %s held nothing out of its training file (%s)", name ? name : spec,
                    json_is_string(json_object_get(c, "validation")) ? "it had a validation file" : "no split recorded");
  h->train = obj_text(c, "train");
  h->text_column = obj_text(c, "text_column");
  h->label_column = obj_text(c, "label_column");
  h->indices_sha256 = obj_text(split, "validation_indices_sha256");
  h->rows_sha256 = obj_text(split, "validation_rows_sha256");
  json_t *seed = json_object_get(split, "seed"), *fr = json_object_get(split, "fraction");
  if (!h->train || !h->text_column || !h->label_column || !h->indices_sha256 || !json_is_integer(seed) || !json_is_number(fr))
    return err_setk(err, ERR_INTERNAL, "--held-out-of: run %s's recorded config lacks its split", name ? name : spec);
  h->seed = (uint64_t)json_integer_value(seed);
  h->fraction = json_number_value(fr);
  json_t *ls = json_object_get(c, "label_smoothing");
  h->label_smoothing = json_is_number(ls) ? json_number_value(ls) : 0;
  h->precision = obj_text(c, "precision");
  h->max_length = (int)json_integer_value(json_object_get(c, "max_length"));
  h->batch = (int)json_integer_value(json_object_get(c, "batch"));
  h->eval_batch = (int)json_integer_value(json_object_get(c, "eval_batch"));
  return 0;
}

static int evaluate(const EvalArgs *a, json_t **summary, Err *err) {
  int rc = -1;
  Store *s = NULL;
  StoreRevision r;
  ModelConfig cfg;
  Tokenizer *tok = NULL;
  Model *m = NULL;
  Finetune *f = NULL;
  TextClsRaw raw = {0};
  TextClsLabels labels = {0};
  TextClsSet set = {0};
  HeldOut h = {0};
  int32_t *ids = NULL;
  size_t *tr_idx = NULL, *va_idx = NULL, n_tr = 0, n_va = 0;
  void *tj = NULL;
  size_t tj_len = 0;
  if (!(s = cli_store_open_existing(a->db, err))) goto done;
  if (store_load_config(s, a->model, &r, &cfg, err)) { err_prefix(err, "--model"); goto done; }
  if (cfg.task != MODEL_TASK_SEQ_CLS) {
    err_setk(err, ERR_INVALID, "--model: %s is a %s model; evaluate scores text classifiers", a->model,
             cfg.task == MODEL_TASK_MLM ? "fill-mask" : "base (no head)");
    goto done;
  }
  if (a->held_out_of && read_run(s, a->held_out_of, &h, err)) goto done;
  const char *file = a->held_out_of ? (a->train ? a->train : h.train) : a->data;
  const char *text_col = a->text_column ? a->text_column : h.text_column ? h.text_column : "text";
  const char *label_col = a->label_column ? a->label_column : h.label_column ? h.label_column : "label";
  if (textcls_read(file, text_col, label_col, &raw, err)) { err_prefix(err, a->held_out_of ? "--held-out-of's training file" : "--data"); goto done; }
  /* The model's labels, in id order, are the label set. */
  labels.n = cfg.num_labels;
  if (!(labels.names = calloc((size_t)labels.n, sizeof *labels.names))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  for (int i = 0; i < labels.n; i++)
    if (!(labels.names[i] = strdup(config_label(&cfg, i)))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  const TextClsRaw *files[1] = {&raw};
  TextClsReading how;
  int bad;
  if (!(ids = malloc((raw.n ? raw.n : 1) * sizeof *ids))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  if (textcls_label_reading(files, 1, &labels, TEXTCLS_NAMES_FIRST, &how, &bad, err) || textcls_map_labels(&raw, &labels, how, ids, err)) {
    err_prefix(err, a->held_out_of ? "--held-out-of's training file" : "--data");
    goto done;
  }
  if (a->held_out_of) {
    char hex[65];
    if (textcls_split(raw.n, h.fraction, h.seed, &tr_idx, &n_tr, &va_idx, &n_va, err) ||
        cls_examples_split_sha256(va_idx, n_va, hex, err))
      goto done;
    if (strcmp(hex, h.indices_sha256)) {
      err_setk(err, ERR_INVALID, "--held-out-of: %s is not the training file run %s split (%zu rows; its held-out rows "
               "hash otherwise)", file, obj_text(h.run, "name"), raw.n);
      goto done;
    }
    /* The same indices can hold other rows (a shuffled or edited file of as many rows):
    ** their texts and labels are checked too, where the run recorded them. */
    cls_examples_rows_sha256(&raw, va_idx, n_va, hex);
    if (h.rows_sha256 && strcmp(hex, h.rows_sha256)) {
      err_setk(err, ERR_INVALID, "--held-out-of: %s is not the training file run %s split: its %zu held-out rows "
               "(texts and labels) differ from those the run held out", file, obj_text(h.run, "name"), n_va);
      goto done;
    }
  }
  /* The tokenizer and the weights of the revision. */
  if (!r.tokenizer[0]) { err_setk(err, ERR_INVALID, "--model: %s@%lld has no tokenizer", r.model, (long long)r.seq); goto done; }
  if (store_revision_file(s, &r, "tokenizer.json", &tj, &tj_len, err)) { err_prefix(err, "--model"); goto done; }
  if (!(tok = tokenizer_from_json(tj, tj_len, err))) { err_prefix(err, "--model: tokenizer.json"); goto done; }
  int positions = config_max_tokens(&cfg);
  int max_len = a->max_length > 0 ? a->max_length : h.max_length > 0 ? h.max_length : positions < 128 ? positions : 128;
  if (max_len > positions) {
    err_setk(err, ERR_INVALID, "--max-length: %d is more than the model's %d positions", max_len, positions);
    goto done;
  }
  int threads = a->threads > 0 ? a->threads : platform_cpu_count();
  {
    const size_t *idx[1] = {va_idx};
    size_t n_idx[1] = {n_va};
    TextClsSet *out[1] = {&set};
    if (cls_examples_tokenize(tok, &raw, ids, threads, max_len, idx, n_idx, out, 1, err)) goto done;
  }
  if (set.n == 0) { err_setk(err, ERR_BAD_INPUT, "%s: no examples", file); goto done; }
  if (!(m = model_new(&cfg, err))) goto done;
  if (store_load_weights(s, &r, m, err)) { err_prefix(err, "--model: model.safetensors"); goto done; }
  FinetuneOptions o = finetune_default_options();
  o.batch = a->batch > 0 ? a->batch : h.batch > 0 ? h.batch : o.batch;
  o.eval_batch = a->eval_batch > 0 ? a->eval_batch : h.eval_batch > 0 ? h.eval_batch : o.eval_batch;
  o.label_smoothing = !isnan(a->label_smoothing) ? a->label_smoothing : a->held_out_of ? h.label_smoothing : 0;
  o.threads = threads;
  o.pad_id = cfg.pad_token_id;
  const char *prec = a->precision ? a->precision : h.precision ? h.precision : "fp32";
  if (model_precision_parse(prec, &o.precision)) {
    err_setk(err, ERR_INVALID, "--precision: expected fp32 or bf16, got '%s'", prec);
    goto done;
  }
  o.max_seq = set.max_len;
  FinetuneEval ev;
  if (!(f = finetune_evaluator_new(m, &o, err)) || finetune_evaluate(f, &set, &ev, err)) goto done;

  json_t *res = cls_examples_eval_json(&ev, set.n), *conf = cls_examples_confusions_json(&ev, &cfg);
  if (!res || !conf || json_object_update_new(res, json_pack("{s:s, s:I, s:s, s:s}", "model", r.model, "revision",
                                                          (json_int_t)r.seq, "commit", r.commit, "data", file))) {
    json_decref(res); json_decref(conf);
    err_setk(err, ERR_NOMEM, "out of memory");
    goto done;
  }
  if (a->held_out_of) json_object_set_new(res, "held_out_of", json_string(obj_text(h.run, "name")));
  json_object_set_new(res, "confusion", conf);
  *summary = res;
  rc = 0;
done:
  finetune_free(f);
  model_free(m);
  tokenizer_free(tok);
  free(tj);
  textcls_set_free(&set);
  free(ids);
  free(tr_idx);
  free(va_idx);
  textcls_labels_free(&labels);
  textcls_raw_free(&raw);
  json_decref(h.run);
  store_close(s);
  return rc;
}

int cmd_evaluate(int argc, char **argv) {
  EvalArgs a;
  eval_defaults(&a);
  int parsed = cli_parse(&cli_spec_evaluate, "evaluate", -1, argc, argv, 1, &a, NULL, NULL);
  if (parsed) return parsed > 0 ? 0 : 2;
  if (!a.model) { fprintf(stderr, "maskd evaluate: --model is required (a classifier in the store: NAME[@REV])\n"); return 2; }
  if (!a.data == !a.held_out_of) {
    fprintf(stderr, "maskd evaluate: give one of --data FILE and --held-out-of RUN\n");
    return 2;
  }
  if (a.train && !a.held_out_of) { fprintf(stderr, "maskd evaluate: --train goes with --held-out-of\n"); return 2; }
  ModelPrecision prec;
  if (a.precision && model_precision_parse(a.precision, &prec)) {
    fprintf(stderr, "maskd evaluate: --precision: expected fp32 or bf16, got '%s'\n", a.precision);
    return 2;
  }
  Err err = {0};
  json_t *res = NULL;
  if (evaluate(&a, &res, &err)) {
    fprintf(stderr, "maskd evaluate: %s\n", err.msg);
    return 1;
  }
  if (a.json) {
    char *text = json_dumps(res, JSON_INDENT(2));
    if (text) printf("%s\n", text);
    free(text);
  } else {
    printf("%s@%lld on %lld examples of %s%s%s: loss %.4f - accuracy %.4f - macro_f1 %.4f - weighted_f1 %.4f\n",
           json_string_value(json_object_get(res, "model")), (long long)json_integer_value(json_object_get(res, "revision")),
           (long long)json_integer_value(json_object_get(res, "examples")), json_string_value(json_object_get(res, "data")),
           a.held_out_of ? " held out by " : "", a.held_out_of ? json_string_value(json_object_get(res, "held_out_of")) : "",
           json_number_value(json_object_get(res, "loss")), json_number_value(json_object_get(res, "accuracy")),
           json_number_value(json_object_get(res, "macro_f1")), json_number_value(json_object_get(res, "weighted_f1")));
    json_t *conf = json_object_get(res, "confusion");
    size_t i;
    json_t *c;
    if (json_array_size(conf)) printf("most confused:");
    json_array_foreach(conf, i, c) {
      if (i == 5) break;
      printf("%s %s -> %s (%lld)", i ? "," : "", json_string_value(json_object_get(c, "true")),
             json_string_value(json_object_get(c, "pred")), (long long)json_integer_value(json_object_get(c, "count")));
    }
    if (json_array_size(conf)) printf("\n");
  }
  json_decref(res);
  return 0;
}
