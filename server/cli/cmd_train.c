/* maskd train: a run description (JSON and/or flags) -> validated -> a run in the store
** -> the trainer, whose callbacks draw the progress line, record step and epoch metrics
** and push every checkpoint as a revision of the model repository named after the run
** ("Training in progress epoch N", as PushToHubCallback writes), keeping the optimizer
** state of the last N checkpoints and of the best. SIGINT/SIGTERM stop at the next step
** boundary with a checkpoint and the run marked "interrupted". --resume RUN continues
** from the run's newest checkpoint with the run's stored description. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/nn/gemm.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/kernels_info.h"
#include "engine/core/cpu.h"
#include "engine/core/now.h"
#include "engine/core/files.h"
#include "engine/core/platform.h"
#include "engine/train/run_config.h"
#include "engine/tok/tokenizer.h"
#include "engine/train/trainer.h"
#include "server/cli/commands.h"
#include "server/cli/progress.h"
#include "server/cli/job_read.h"
#include "server/cli/rank_identity.h"
#include "server/cli/rank_launch.h"
#include "server/cli/run_stop.h"
#include "server/app/job_hosts.h"
#include "store/load.h"
#include "store/store.h"
#include "store/sha256.h"
#include "engine/dist/dist.h"
#include <unistd.h>
#include <time.h>

/* The command line: the store, the run's options (applied after --run's file whatever
** their order, so collected first, as (name, value) pairs for run_config_set, which
** checks them as it checks a JSON description) and what to do. */
typedef struct TrainArgs {
  const char *db_path, *run_file, *resume, *out;
  int resume_flag;     /* --resume without a value: the run named by --name */
  int quiet;
  CliPairs run;        /* the run options given, in order */
  const char *job, *data_dir, *work_dir;   /* --job: a queued job, its names resolved inside these */
  const char *job_hosts;                   /* --job: the hosts its ranks may start on (job_hosts.h) */
  const char *hostfile;                    /* mpirun's --hostfile, for --ranks */
} TrainArgs;

static void train_defaults(void *p) {
  TrainArgs *t = p;
  memset(t, 0, sizeof *t);
  t->db_path = cli_db_path(NULL);
}

/* A run option: its value goes to run_config_set (the engine checks it, as it checks
** the same key in a JSON description). def: run_config_defaults' value. */
#define RUN_OPT(flag, argname, dflt, text) \
  {.name = flag, .kind = CLI_PAIR, .off = offsetof(TrainArgs, run), .arg = argname, .def = dflt, .help = text}
static const CliOpt train_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = offsetof(TrainArgs, db_path), .arg = "PATH",
   .def = "$MASKD_DB, else ./maskd.db", .help = "the store"},
  {.name = "--run", .kind = CLI_STRING, .off = offsetof(TrainArgs, run_file), .arg = "FILE",
   .help = "a run description (JSON object with the keys below); flags override it"},
  {.name = "--resume", .kind = CLI_OPTIONAL, .off = offsetof(TrainArgs, resume), .off2 = offsetof(TrainArgs, resume_flag),
   .arg = "RUN",
   .help = "continue run RUN (id or name) from its newest checkpoint; as the\n"
           "last flag, --resume alone continues the newest run named NAME,\n"
           "whose stored description the other options must then match (but\n"
           "--threads, which a resume may change)"},
  {.name = "--out", .kind = CLI_STRING, .off = offsetof(TrainArgs, out), .arg = "DIR",
   .help = "also write the final model folder (config.json, model.safetensors,\ntokenizer files) to DIR (refused when DIR holds a model already)"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = offsetof(TrainArgs, quiet), .help = "no progress line"},
  {.name = "--job", .kind = CLI_STRING, .off = offsetof(TrainArgs, job), .arg = "ID",
   .help = "run training job ID of the store's queue, as maskd serve's worker\n"
           "does: its description comes from the job (names resolved inside\n"
           "--work-dir and --data-dir, the server's folders) and its run is\n"
           "linked to the job when it is made; no other run options"},
  CLI_JOB_DIR_OPTS(TrainArgs),
  {.name = "--job-hosts", .kind = CLI_STRING, .off = offsetof(TrainArgs, job_hosts), .arg = "NAME,NAME",
   .def = "none (this machine only)",
   .help = "with --job: the other machines its ranks may start on (maskd serve\n"
           "--job-hosts); a job whose \"hosts\" names another fails before mpirun"},
  RUN_OPT("--name", "NAME", NULL, "run and model repository name"),
  RUN_OPT("--tokenizer", "T", NULL, "tokenizer.json (vocab_size, [MASK], <pad> come from it)"),
  RUN_OPT("--train", "DIR", NULL, "training shards"),
  RUN_OPT("--validation", "DIR", NULL, "evaluation shards"),
  RUN_OPT("--config", "C", "small",
          "config.json or a preset: tiny, small, base. vocab_size and the pad, bos\n"
          "and eos ids come from the tokenizer (its size; <pad> or [PAD]; [CLS] and\n"
          "[SEP], or <s> and </s>): a preset's always, a config.json's where it\n"
          "leaves them out (one it states must agree, else it is refused). Left\n"
          "out, max_position_embeddings is the shards' sequence length (RoBERTa:\n"
          "+ pad_token_id + 1)"),
  RUN_OPT("--epochs", "N", "1", "epochs"),
  RUN_OPT("--max-steps", "N", "0: epochs x steps per epoch", "steps in all"),
  RUN_OPT("--batch", "B", "8", "sequences per micro-batch"),
  RUN_OPT("--grad-accum", "K", "1", "micro-batches per step"),
  RUN_OPT("--lr", "X", "1e-4", "peak learning rate"),
  RUN_OPT("--weight-decay", "X", "1e-3", "AdamW weight decay"),
  RUN_OPT("--warmup-steps", "N", "-1: total // 20", "linear warm-up steps"),
  RUN_OPT("--clip-norm", "X", "0: off", "gradient clipping norm"),
  RUN_OPT("--min-lr-ratio", "X", "0", "the schedule's last learning rate, as a share of --lr"),
  RUN_OPT("--adam-beta1", "X", "0.9", "AdamW beta1"),
  RUN_OPT("--adam-beta2", "X", "0.999", "AdamW beta2"),
  RUN_OPT("--adam-epsilon", "X", "1e-8", "AdamW epsilon"),
  RUN_OPT("--seed", "N", "42", "seed of the weights, the shuffling and the masking"),
  RUN_OPT("--eval-seed", "N", "1234", "seed of the evaluation's masking"),
  RUN_OPT("--threads", "N", "0: all CPUs",
          "threads; the numbers do not depend on them, so --resume RUN may\ngive another count"),
  RUN_OPT("--eval-batches", "N", "0: all", "evaluation batches"),
  RUN_OPT("--checkpoint-steps", "N", "0: epochs only", "a checkpoint every N steps"),
  RUN_OPT("--checkpoint-epochs", "N", "1", "a checkpoint every N epochs"),
  RUN_OPT("--keep-last", "N", "2", "checkpoints that keep optimizer state"),
  RUN_OPT("--mlm-probability", "X", "0.15", "share of the tokens masked"),
  RUN_OPT("--label-smoothing", "X", "0: off",
          "in [0, 1): the loss against (1-X) one-hot + X/vocab, in training and\n"
          "evaluation, as HF Trainer's label_smoothing_factor (torch's\n"
          "CrossEntropyLoss(label_smoothing=X))"),
  RUN_OPT("--precision", "P", "fp32",
          "fp32, or bf16: every Linear layer's products (forward, dW, dX)\n"
          "from bfloat16 inputs with float sums; weights, optimizer and\n"
          "checkpoints stay fp32. A resumed run keeps its precision"),
  RUN_OPT("--ranks", "N", "1",
          "data-parallel processes: maskd starts them with Open MPI's mpirun\n"
          "(each takes batch x grad-accum of every step; the result does not\n"
          "depend on N). Under mpirun, the processes mpirun started. With\n"
          "--hosts, their slots are the ranks (--ranks, if given, must agree);\n"
          "resuming, --ranks alone runs on this machine, whatever hosts the run had"),
  RUN_OPT("--hosts", "H", "this machine", "the machines and their slots (ranks), as mpirun's --host: a:2,b:2"),
  {.name = "--hostfile", .kind = CLI_STRING, .off = offsetof(TrainArgs, hostfile), .arg = "FILE",
   .help = "the machines for --ranks, as an mpirun hostfile"},
};
#undef RUN_OPT

const CliSpec cli_spec_train = {
  .name = "train",
  .usage = "usage: maskd train [--db PATH] --name NAME --tokenizer T --train DIR [--validation DIR]\n"
           "                   --config config.json|tiny|small|base [options]\n"
           "       maskd train [--db PATH] --resume RUN\n"
           "       maskd train [--db PATH] --name NAME [the run's options] --resume\n"
           "       maskd train --db PATH --job ID --work-dir DIR [--data-dir DIR]   (maskd serve's worker)\n"
           "\n"
           "Trains a masked language model from scratch. Each epoch is evaluated on the\n"
           "validation shards and pushed as a revision of the model NAME in the store.\n"
           "\n",
  .tail = "\n"
          "Values may also be written --option=VALUE (so a value may start with '-');\n"
          "--resume=RUN always takes RUN as the run. The run options may be written with '_'\n"
          "for '-' (--grad_accum), as the keys of a JSON description are.\n",
  .opts = train_opts,
  .n_opts = (int)(sizeof train_opts / sizeof train_opts[0]),
  .args_size = sizeof(TrainArgs),
  .defaults = train_defaults,
  .col = 26,
};

typedef struct TrainCtx {
  Store *db;
  int64_t run;
  const RunConfig *rc;
  const char *tokenizer_json;
  Progress prog;
  long total;
  int epochs;
  StoreStepMetric buf[64];
  int nbuf;
  double last_flush;
  Err err;                 /* the first store error of a callback without one */
  int failed;
  const json_t *hosts;     /* each rank's host */
  TrainerStep last;        /* the last step, for the run's "dist" record */
  double rank_tps[64];     /* its per-rank rates (the first 64 ranks) */
  KernelsInfo kernels;     /* what the rates were measured with, read once */
} TrainCtx;

/* The run's ranks, hosts, the last step's per-rank and global tokens/s and the
** communication times so far, as the store keeps them (GET /runs/{id} "dist"),
** with the kernels' level, gemm backend and rank 0's CPU, without which two runs'
** rates cannot be compared (every rank runs the same level: same_everywhere). */
static int record_dist(TrainCtx *c, Err *err) {
  const TrainerStep *s = &c->last;
  if (s->ranks < 1) return 0;
  json_t *tps = json_array();
  for (int q = 0; q < s->ranks && q < 64; q++) json_array_append_new(tps, json_real(c->rank_tps[q]));
  double hidden = s->comm_exchange_s > 0 ? 1.0 - s->comm_exposed_s / s->comm_exchange_s : 0;
  json_t *o = json_pack("{s:i,s:O,s:o,s:f,s:f,s:f,s:f,s:f,s:f}", "ranks", s->ranks, "hosts", c->hosts, "tokens_per_s", tps,
                        "global_tokens_per_s", s->tokens_per_s, "comm_exchange_s", s->comm_exchange_s,
                        "comm_exposed_s", s->comm_exposed_s, "comm_hidden", hidden < 0 ? 0 : hidden,
                        "comm_inline_s", s->comm_inline_s, "comm_gather_s", s->comm_gather_s);
  if (o && !c->kernels.isa) kernels_info(&c->kernels);
  if (o) {
    json_object_set_new(o, "isa", json_string(c->kernels.isa));
    json_object_set_new(o, "gemm", json_string(c->kernels.gemm));
    json_object_set_new(o, "cpu", json_string(c->kernels.cpu));
  }
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  int r = text ? store_run_set_dist(c->db, c->run, text, err) : err_setk(err, ERR_NOMEM, "out of memory");
  free(text);
  return r;
}

static int flush_steps(TrainCtx *c, Err *err) {
  if (c->nbuf == 0) return 0;
  int r = store_step_metrics_add(c->db, c->run, c->buf, c->nbuf, err);
  c->nbuf = 0;
  c->last_flush = now_monotonic();
  return r;
}

static void cb_step(void *ctx, const TrainerStep *s) {
  TrainCtx *c = ctx;
  progress_step(&c->prog, s->epoch, c->epochs, s->step, s->total_steps, s->loss, s->tokens_per_s, s->seconds);
  c->buf[c->nbuf++] = (StoreStepMetric){s->step, s->epoch_frac, s->loss, s->lr, s->grad_norm, s->tokens_per_s, 0};
  c->last = *s;
  c->last.rank_tokens_per_s = NULL;
  for (int q = 0; q < s->ranks && q < 64; q++) c->rank_tps[q] = s->rank_tokens_per_s[q];
  /* Metrics go in batches (one transaction each); the checkpoint callback flushes too,
  ** so whatever a checkpoint covers is in the store before it. */
  if (c->nbuf == (int)(sizeof c->buf / sizeof c->buf[0]) || now_monotonic() - c->last_flush > 5.0) {
    if (flush_steps(c, &c->err) || store_run_progress(c->db, c->run, s->step, s->total_steps, s->epoch, &c->err) ||
        record_dist(c, &c->err))
      c->failed = 1;
  }
}

static void cb_eval(void *ctx, const TrainerEval *e) {
  TrainCtx *c = ctx;
  if (!e->evaluated)
    progress_line(&c->prog, "epoch %d/%d: loss %.4f (no validation set)", e->epoch + 1, c->epochs, e->train_loss);
  else if (e->labels == 0)
    progress_line(&c->prog, "epoch %d/%d: loss %.4f - no validation metrics: the validation set drew no masked token (eval %.1fs)",
                  e->epoch + 1, c->epochs, e->train_loss, e->seconds);
  else   /* a diverged run's perplexity overflows (inf, as HF's run_mlm reports it): %g, not 300 digits */
    progress_line(&c->prog, "epoch %d/%d: loss %.4f - val_loss %.4f - val_accuracy %.4f - val_perplexity %.*f (eval %.1fs)",
                  e->epoch + 1, c->epochs, e->train_loss, e->loss, e->accuracy, e->perplexity < 1e9 ? 3 : 0,
                  e->perplexity < 1e9 ? e->perplexity : INFINITY, e->seconds);
  StoreEpochMetric m = {.epoch = e->epoch, .train_loss = e->train_loss, .eval_loss = e->loss, .eval_accuracy = e->accuracy,
                       .perplexity = e->perplexity, .eval_runtime = e->seconds};
  if (store_epoch_metrics_add(c->db, c->run, &m, &c->err)) c->failed = 1;
}

/* Keep-last-N plus best: the newest keep_last revisions of this run and the one with the
** lowest eval_loss keep everything; older epoch revisions keep their weights (the
** repository's history) but lose the optimizer state; older step and stop checkpoints go. */
static int prune(TrainCtx *c, Err *err) {
  json_t *m = store_model_get(c->db, c->rc->name, err);
  if (!m) return -1;
  json_t *revs = json_object_get(m, "revisions");   /* newest first */
  long best_seq = -1;
  double best = INFINITY;
  size_t i;
  json_t *r;
  json_array_foreach(revs, i, r) {
    if (json_integer_value(json_object_get(r, "run")) != c->run) continue;
    json_t *mj = json_object_get(r, "metrics");
    json_t *mo = json_is_string(mj) ? json_loads(json_string_value(mj), 0, NULL) : json_incref(mj);
    json_t *el = mo ? json_object_get(mo, "eval_loss") : NULL;
    if (el && json_is_number(el) && json_number_value(el) < best) {
      best = json_number_value(el);
      best_seq = (long)json_integer_value(json_object_get(r, "seq"));
    }
    json_decref(mo);
  }
  long kept = 0;
  int rcode = 0;
  json_array_foreach(revs, i, r) {
    if (json_integer_value(json_object_get(r, "run")) != c->run) continue;
    long seq = (long)json_integer_value(json_object_get(r, "seq"));
    if (kept++ < c->rc->keep_last || seq == best_seq) continue;
    int has_opt = json_is_true(json_object_get(r, "has_optimizer")) || json_integer_value(json_object_get(r, "has_optimizer")) == 1;
    const char *msg = json_string_value(json_object_get(r, "message"));
    int is_epoch = msg && strncmp(msg, "Training in progress epoch", 26) == 0;
    if (is_epoch && !has_opt) continue;
    char spec[200];
    snprintf(spec, sizeof spec, "%s@%ld", c->rc->name, seq);
    StoreRevision rev;
    if (store_resolve(c->db, spec, &rev, err)) { rcode = -1; break; }
    if (is_epoch ? store_revision_drop_optimizer(c->db, rev.id, err) : store_revision_delete(c->db, rev.id, err)) {
      rcode = -1;
      break;
    }
  }
  json_decref(m);
  if (rcode == 0) rcode = store_gc(c->db, NULL, err);
  return rcode;
}

/* After a finished run: the pages its dropped checkpoints freed (left free while it ran,
** for each next checkpoint to reuse) go back to the file system. The run is done
** already; a failure here is said, not the run's. */
static void compact_store(Store *db, int quiet) {
  Err e = {0};
  int64_t bytes = 0;
  double t0 = now_monotonic();
  if (store_compact(db, &bytes, &e)) fprintf(stderr, "maskd train: note: the store was not compacted: %s\n", e.msg);
  else if (!quiet && bytes > 0)
    fprintf(stderr, "store: %.1f MB of dropped checkpoints returned to the file system in %.1fs\n", (double)bytes / 1e6,
            now_monotonic() - t0);
}

/* Streams one checkpoint file into the store as it is serialised (weights, or with
** optimizer != 0 the optimizer state), so a push holds a chunk, not copies of the model. */
typedef struct { const TrainerCheckpoint *k; int optimizer; } CkptBlob;

static int ckpt_blob_produce(void *ctx, StoreBlobWriter *w, Err *err) {
  const CkptBlob *b = ctx;
  CkptSink sink = {store_blob_sink, w};
  if (!b->optimizer) return ckpt_weights_stream(b->k->model, 0, &sink, err);
  /* The trainer's reader: with several ranks it asks them for their shares as the file needs them. */
  CkptMoments src = {b->k->read_moments, b->k->moments_ctx};
  return ckpt_state_stream(b->k->model, &src, b->k->state, &sink, err);
}

/* A number for the store's JSON: one that is not finite is null. */
static json_t *json_finite(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int cb_checkpoint(void *ctx, const TrainerCheckpoint *k, Err *err) {
  TrainCtx *c = ctx;
  if (flush_steps(c, err)) return -1;
  char msg[128];
  if (k->kind == TRAINER_CKPT_EPOCH) snprintf(msg, sizeof msg, "Training in progress epoch %d", k->epochs_done);
  else if (k->kind == TRAINER_CKPT_STOP) snprintf(msg, sizeof msg, "Interrupted at step %ld", k->step);
  else snprintf(msg, sizeof msg, "Training in progress step %ld", k->step);
  /* A value that is not finite is null: a diverged run's perplexity overflows (exp of a
  ** loss past 709.78), and printed with %g it made the push's JSON invalid, failing the
  ** run at its epoch's checkpoint with no revision kept. */
  json_t *mj = json_pack("{s:i, s:I}", "epoch", k->epochs_done, "step", (json_int_t)k->step);
  if (mj && k->eval && k->eval->labels > 0) {
    json_object_set_new(mj, "train_loss", json_finite(k->eval->train_loss));
    json_object_set_new(mj, "eval_loss", json_finite(k->eval->loss));
    json_object_set_new(mj, "eval_accuracy", json_finite(k->eval->accuracy));
    json_object_set_new(mj, "perplexity", json_finite(k->eval->perplexity));
  }
  char *metrics = mj ? json_dumps(mj, JSON_COMPACT | JSON_REAL_PRECISION(9)) : NULL;
  json_decref(mj);
  if (!metrics) return err_setk(err, ERR_NOMEM, "checkpoint: out of memory");
  char *cfg = config_to_json(model_config(k->model));
  CkptBlob wb = {k, 0}, ob = {k, 1};
  StoreStream ws = {ckpt_weights_size(k->model, 0), ckpt_blob_produce, &wb};
  StoreStream os = {ckpt_state_size(k->model, k->state), ckpt_blob_produce, &ob};
  StorePush p = {.message = msg, .config_json = cfg, .tokenizer_json = c->tokenizer_json, .run = c->run, .step = k->step,
                 .epoch = k->epochs_done, .metrics_json = metrics, .weights_stream = &ws, .optimizer_stream = &os};
  int r = cfg && ws.len && os.len ? store_push(c->db, c->rc->name, &p, NULL, err) : err_set(err, "checkpoint: out of memory");
  free(cfg);
  free(metrics);
  if (r == 0) r = store_run_progress(c->db, c->run, k->step, c->total, k->epochs_done, err);
  if (r == 0) r = prune(c, err);
  if (r == 0 && k->kind != TRAINER_CKPT_STEPS) progress_line(&c->prog, "pushed %s", msg);
  return r;
}

static int cb_should_stop(void *ctx) {
  TrainCtx *c = ctx;
  return run_stop_signal != 0 || c->failed;
}

/* The final model as an HF folder with the files of the tokenizer validation read. */
static int write_out(Trainer *t, const Tokenizer *tok, const char *dir, Err *err) {
  if (ckpt_save_model(trainer_model(t), dir, 0, err)) return -1;
  return tokenizer_save_pretrained(tok, config_max_tokens(model_config(trainer_model(t))), dir, err);
}

/* With --name ... --resume the options given must describe the stored run (the thread count aside:
** it may change); names the first key that differs. */
static int differing_key(const RunConfig *stored, const RunConfig *given, Err *err) {
  char *a = run_config_to_json(stored), *b = run_config_to_json(given);
  json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
  int r = 0;
  const char *k;
  json_t *v;
  if (!ja || !jb) r = err_set(err, "out of memory");
  else
    json_object_foreach(ja, k, v) {
      if (!strcmp(k, "threads")) continue;   /* the count may change (resume_override) */
      if (!json_equal(v, json_object_get(jb, k))) {
        r = err_set(err, "%s: differs from the stored run's (resume takes the run as it was described)", k);
        break;
      }
    }
  json_decref(ja); json_decref(jb);
  free(a); free(b);
  return r;
}

/* Part 1, the command line -> the run's description: --run's file, then the flags over
** it. With --resume alone the given options go to *given and *resume names the run (the
** copy's name); with --resume RUN the stored description is taken later. */
static int train_describe(const TrainArgs *args, RunConfig *rc, RunConfig *given, const char **resume, Err *e) {
  run_config_defaults(rc);
  *given = *rc;
  *resume = args->resume;
  if (args->resume) return 0;
  if (args->run_file && run_config_load(rc, args->run_file, e)) return -1;
  for (int i = 0; i < args->run.n; i++)
    if (run_config_set(rc, args->run.key[i], args->run.val[i], e)) return -1;
  *given = *rc;
  if (args->resume_flag) {
    if (!rc->name[0]) return err_set(e, "--resume without a run needs --name");
    *resume = given->name;   /* the copy: rc is reset to take the stored description */
    run_config_defaults(rc);
  }
  return 0;
}

/* Part 2, a resumed run's stored description into rc; with --resume alone the options
** given must describe it. */
static int train_stored(Store *db, int64_t run, const char *resume, int resume_flag, RunConfig *rc, RunConfig *given,
                        int *threads_moved, Err *e) {
  *threads_moved = 0;
  json_t *rj = store_run_get(db, run, e);
  if (!rj) return -1;
  StoreStatus st = STORE_STATUS_CREATED;
  store_status_parse(json_string_value(json_object_get(rj, "status")), &st);
  int running = st == STORE_STATUS_RUNNING, done = st == STORE_STATUS_DONE;
  json_t *stored = json_object_get(rj, "config");
  if (running || done) {
    json_decref(rj);
    return err_set(e, "run %s is %s; only a stopped run can be resumed", resume, running ? "still running" : "already done");
  }
  if (json_object_get(stored, "task")) {
    json_decref(rj);
    return err_set(e, "run %s is a fine-tuning run, which is not resumed: run maskd finetune again", resume);
  }
  int r = json_is_object(stored) ? run_config_apply_object(rc, stored, e)
                                 : err_set(e, "run %s has no stored description", resume);
  json_decref(rj);
  if (r) return -1;
  /* With --name ... --resume, 0 (not given) keeps the stored count ("all CPUs" was resolved
  ** when stored); another count, from a flag or a --run file, replaces it. */
  if (resume_flag && given->threads == 0) given->threads = rc->threads;
  if (resume_flag && differing_key(rc, given, e)) return -1;
  if (resume_flag && given->threads != rc->threads) {
    rc->threads = given->threads;
    *threads_moved = 1;
  }
  return 0;
}

/* Part 3, the trainer, restored from the run's newest checkpoint when resuming.
** Collective over the ranks: rank 0 alone reads the store (db NULL elsewhere). */
static Trainer *train_start(Dist *d, Store *db, int64_t run, RunPlan *plan, int resume, Err *e) {
  Trainer *t = trainer_new_loaders(&plan->model, &plan->train, plan->train_loader, plan->valid_loader, e);
  plan->train_loader = plan->valid_loader = NULL;   /* the trainer's now */
  if (dist_agree(d, !t, e)) { trainer_free(t); return NULL; }
  if (!resume) return t;
  StoreRevision rev;
  void *wbuf = NULL, *sbuf = NULL;
  size_t wl = 0, sl = 0;
  int have = 0;   /* rank 0: 0 a checkpoint, 1 none yet, -1 an error */
  if (dist_rank(d) == 0) {
    have = store_run_checkpoint(db, run, &rev, e);
    if (have == 0 && (store_revision_file(db, &rev, "model.safetensors", &wbuf, &wl, e) ||
                      store_revision_file(db, &rev, "optimizer.safetensors", &sbuf, &sl, e)))
      have = -1;
  }
  int r = dist_agree(d, have < 0, e);
  if (r == 0) dist_bcast(d, &have, sizeof have, 0, NULL);
  if (r == 0 && have == 0) r = trainer_restore(t, wbuf, wl, sbuf, sl, e);
  free(wbuf); free(sbuf);
  if (r) { trainer_free(t); return NULL; }
  return t;
}

/* Part 4, the training loop with the store callbacks and stop signals, and the run's
** final status; returns the exit status (the run is marked failed on an error). */
static int train_loop(Store *db, int64_t run, const RunConfig *rc, Trainer *t, const RunPlan *plan,
                      const TrainArgs *args, const json_t *hosts) {
  int quiet = args->quiet, status = 1;
  Err e = {0};
  TrainCtx *c = calloc(1, sizeof *c);
  if (!c) {
    store_run_set_status(db, run, STORE_STATUS_FAILED, "out of memory", NULL);
    fprintf(stderr, "maskd train: out of memory\n");
    return 1;
  }
  c->db = db; c->run = run; c->rc = rc; c->tokenizer_json = plan->tokenizer_json;
  c->hosts = hosts;
  char where[1024] = "";
  for (size_t q = 0; q < json_array_size(hosts); q++)
    snprintf(where + strlen(where), sizeof where - strlen(where), "%srank %zu on %s", q ? ", " : "", q,
             json_string_value(json_array_get(hosts, q)));
  c->total = trainer_total_steps(t);
  c->epochs = (int)((c->total + trainer_steps_per_epoch(t) - 1) / trainer_steps_per_epoch(t));
  c->last_flush = now_monotonic();
  progress_init(&c->prog, stderr, quiet, trainer_step(t));
  /* The bf16 products' kernels are named: emulated in float (no AVX512-BF16, or
  ** Intel's slow vdpbf16ps) they are no faster than fp32's. */
  char bf16[96] = "";
  if (model_precision(trainer_model(t)) == MODEL_BF16)
    snprintf(bf16, sizeof bf16, ", bf16 products (%s)", gemm_bf16_backend());
  progress_line(&c->prog, "run %lld \"%s\": %ld steps (%ld per epoch, warm-up %ld), batch %ld x %ld x %d tokens, %zu parameters%s%s",
                (long long)run, rc->name, c->total, trainer_steps_per_epoch(t), trainer_warmup_steps(t), rc->batch, rc->grad_accum,
                trainer_seq_len(t), model_num_params(trainer_model(t)), bf16, trainer_step(t) ? ", resumed" : "");
  if (trainer_ranks(t) > 1)
    progress_line(&c->prog, "%d ranks (global batch %d x %ld x %ld): %s", trainer_ranks(t), trainer_ranks(t), rc->batch,
                  rc->grad_accum, where);
  if (trainer_step(t)) progress_line(&c->prog, "resuming at step %ld (epoch %d)", trainer_step(t), trainer_epoch(t) + 1);

  struct sigaction old[4];
  run_stop_catch(old);
  TrainerCallbacks cb = {c, cb_step, cb_eval, cb_checkpoint, cb_should_stop};
  double t0 = now_monotonic();
  int r = trainer_run(t, &cb, &e);
  progress_done(&c->prog);
  Err fe = {0};
  if (r >= 0 && (flush_steps(c, &fe) || record_dist(c, &fe))) { e = fe; r = -1; }
  if (r >= 0 && c->failed) { e = c->err; r = -1; }
  char el[32];
  progress_format_duration(el, sizeof el, now_monotonic() - t0);
  if (r == TRAINER_DONE) {
    if (args->out && write_out(t, plan->tokenizer, args->out, &e)) r = -1;
  }
  if (r == TRAINER_DONE) {
    if (store_run_set_status(db, run, STORE_STATUS_DONE, NULL, &e)) r = -1;
    else {
      if (!quiet) fprintf(stderr, "run %lld done in %s\n", (long long)run, el);
      status = 0;
      /* keep-last once more, and the blobs no revision holds collected: a process killed
      ** during the last push's prune (or a download's pin on a dropped blob then) left
      ** them, and the run's resume comes straight here. Done is done: a failure is said. */
      Err pe = {0};
      if (prune(c, &pe)) fprintf(stderr, "maskd train: run %lld done; tidying its checkpoints failed: %s\n", (long long)run, pe.msg);
      compact_store(db, quiet);
    }
  } else if (r == TRAINER_STOPPED) {
    char why[32];
    snprintf(why, sizeof why, "stopped by %s", run_stop_name(run_stop_signal));
    if (store_run_set_status(db, run, STORE_STATUS_INTERRUPTED, why, &e) == 0) {
      fprintf(stderr, "maskd train: run %lld interrupted at step %ld (checkpoint saved; maskd train --resume %lld)\n",
              (long long)run, trainer_step(t), (long long)run);
      status = 130;
    }
  }
  if (r < 0) {
    /* The steps buffered since the last flush go in first, with the run's progress: a
    ** diverged run's last steps are the ones that show how it went. Best effort: a
    ** store that failed keeps the error already in e. */
    Err fe2 = {0};
    if (c->nbuf && flush_steps(c, &fe2) == 0)
      store_run_progress(db, run, c->last.step, c->last.total_steps, c->last.epoch, &fe2);
    store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
    fprintf(stderr, "maskd train: %s\n", e.msg);
    status = 1;
  }
  /* Only now: a stop that comes after the last step (a cancel racing the end) must not
  ** kill the process before the run is marked done. */
  run_stop_restore(old);
  free(c);
  return status;
}

/* --job: the run's description, or the run to resume, comes from the queued job. */
static int job_description(const TrainArgs *a, Store *db, RunConfig *rc, int64_t *job, char *resume, size_t cap,
                           Err *e) {
  if (job_read_id(a->job, a->work_dir, job, e)) return -1;
  return job_read_train(db, *job, a->data_dir, a->work_dir, rc, resume, cap, e);
}

/* The run options a resumed run may change: where it runs, on how many threads (no sum
** of a step follows their count: tests/cli/test_threads.sh), and how each step is cut
** (ranks x grad_accum must stay what it was; trainer_restore checks). */
static int resume_override(const char *key) {
  while (*key == '-') key++;
  return !strcmp(key, "ranks") || !strcmp(key, "hosts") || !strcmp(key, "grad-accum") || !strcmp(key, "grad_accum") ||
         !strcmp(key, "threads");
}

/* What every rank must agree on: the same program, kernels, data, model and training
** options. The kernels' level decides the bits of the layers' sums and the products
** (vector widths add in other orders), so ranks at different levels would hold replicas
** that drift apart; so would ranks reading other tokens (the same counts are not the same
** shards) or building another model from their own config.json (another width breaks
** the gradient exchange, another dropout trains silently wrong). The host is carried
** only to name it in the message. */
typedef struct Fingerprint {
  char exe[65], tokenizer[65], host[64];
  uint64_t train_samples, valid_samples, train_id, valid_id;
  int seq_len, vocab, isa;
  char model[65];         /* sha256 of the model config as rank 0 would push it */
  char model_diff[200];   /* the first config key where this rank's differs from rank 0's */
  char options[65];       /* sha256 of the trainer options the ranks must share */
} Fingerprint;

/* The first key where config b differs from config a (both config_to_json's text), as
** "key B (rank 0: A)"; "" when none is found. */
static void config_diff(const char *a, const char *b, char *out, size_t cap) {
  json_t *ja = json_loads(a, 0, NULL), *jb = json_loads(b, 0, NULL);
  out[0] = '\0';
  for (int pass = 0; pass < 2 && !out[0] && ja && jb; pass++) {   /* rank 0's keys, then those only b has */
    const char *k;
    json_t *v;
    json_object_foreach(pass ? jb : ja, k, v) {
      json_t *va = pass ? json_object_get(ja, k) : v, *vb = pass ? v : json_object_get(jb, k);
      if (va && vb && json_equal(va, vb)) continue;
      char *ta = va ? json_dumps(va, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
      char *tb = vb ? json_dumps(vb, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
      snprintf(out, cap, "%s is %.60s (rank 0: %.60s)", k, tb ? tb : "absent", ta ? ta : "absent");
      free(ta);
      free(tb);
      break;
    }
  }
  json_decref(ja);
  json_decref(jb);
}

/* The trainer options that decide every step's numbers: rank 0 broadcast the run's
** description, but the ids come from each rank's own tokenizer file. (Not the threads:
** each rank's own, its sums reach the others the same way.) */
static void options_hash(const TrainerOptions *o, char out[65]) {
  char text[2048];
  int n = snprintf(text, sizeof text, "%d %d %d %ld %.17g %.17g %.17g %.17g %.17g %.17g %.17g %ld %llu %llu %ld %ld %d %.17g %.17g %d %d %d %d",
                   o->batch, o->grad_accum, o->epochs, o->max_steps, o->lr, o->weight_decay, o->beta1, o->beta2, o->eps,
                   o->clip_norm, o->min_lr_ratio, o->warmup_steps, (unsigned long long)o->seed,
                   (unsigned long long)o->eval_seed, o->eval_batches, o->checkpoint_steps, o->checkpoint_epochs, o->mlm_prob,
                   o->label_smoothing, o->mask_id, o->pad_id, (int)o->precision, o->n_special);
  for (int i = 0; i < o->n_special && n > 0 && n < (int)sizeof text - 16; i++)
    n += snprintf(text + n, sizeof text - (size_t)n, " %d", o->special_ids[i]);
  store_sha256_hex(text, n > 0 ? (size_t)n : 0, out);
}

/* Collective (rank 0 broadcasts its model config for the others to compare). */
static int fingerprint(Dist *d, const RunPlan *plan, const char *exe, Fingerprint *f, Err *e) {
  memset(f, 0, sizeof *f);
  snprintf(f->host, sizeof f->host, "%s", dist_host(d));
  f->isa = (int)cpu_isa();
  snprintf(f->exe, sizeof f->exe, "%s", exe);
  store_sha256_hex(plan->tokenizer_json, plan->tokenizer_json_len, f->tokenizer);
  f->train_samples = plan->train_samples;
  f->valid_samples = plan->valid_samples;
  f->train_id = plan->train_id;
  f->valid_id = plan->valid_id;
  f->seq_len = plan->seq_len;
  f->vocab = plan->vocab_size;
  options_hash(&plan->train, f->options);
  /* Rank 0's config text, for the others to name the key they differ in (a masked LM's
  ** config is about 1 KB; a longer one is compared by its hash alone past this). */
  char *cfg = config_to_json(&plan->model), zero[8192] = "";
  if (dist_rank(d) == 0 && cfg) snprintf(zero, sizeof zero, "%s", cfg);
  int r = dist_bcast(d, zero, sizeof zero, 0, e);
  if (r == 0 && !cfg) r = err_setk(e, ERR_NOMEM, "out of memory");
  if (r == 0) {
    store_sha256_hex(cfg, strlen(cfg), f->model);
    if (dist_rank(d) != 0 && strcmp(cfg, zero)) config_diff(zero, cfg, f->model_diff, sizeof f->model_diff);
  }
  free(cfg);
  return r;
}

/* Collective: refuses a run whose ranks run different maskd binaries, read different
** data or build different models, naming the first rank that differs and how. */
static int same_everywhere(Dist *d, const RunPlan *plan, const char *exe, Err *e) {
  int W = dist_world(d);
  if (W == 1) return 0;
  Fingerprint mine, *all = calloc((size_t)W, sizeof *all);
  /* fingerprint is collective: every rank calls it, whatever failed before. */
  int failed = fingerprint(d, plan, exe, &mine, e) != 0;
  if (!all) failed = err_setk(e, ERR_NOMEM, "out of memory") != 0;
  if (dist_agree(d, failed, e)) { free(all); return -1; }
  dist_allgather(d, &mine, sizeof mine, all, e);
  int bad = 0, lowest = all[0].isa;
  for (int q = 1; q < W; q++) if (all[q].isa < lowest) lowest = all[q].isa;
  for (int q = 1; q < W && !bad; q++) {
    const Fingerprint *f = &all[q], *z = &all[0];
    if (strcmp(f->exe, z->exe)) bad = err_set(e, "rank %d runs another maskd binary than rank 0 (sha256 %.12s, rank 0 %.12s)", q, f->exe, z->exe);
    else if (f->isa != z->isa)
      bad = err_setk(e, ERR_INVALID,
                     "rank %d on %s runs the %s kernels, rank 0 on %s the %s ones: set MASKD_ISA=%s for the run "
                     "(maskd train --ranks/--hosts passes it to every rank)",
                     q, f->host, cpu_isa_name((CpuIsa)f->isa), z->host, cpu_isa_name((CpuIsa)z->isa),
                     cpu_isa_name((CpuIsa)lowest));
    else if (strcmp(f->tokenizer, z->tokenizer)) bad = err_set(e, "rank %d reads another tokenizer than rank 0", q);
    else if (f->train_samples != z->train_samples || f->valid_samples != z->valid_samples || f->seq_len != z->seq_len ||
             f->vocab != z->vocab)
      bad = err_set(e, "rank %d on %s reads other shards than rank 0 (%llu/%llu samples of %d tokens, rank 0 %llu/%llu of %d)", q,
                    f->host, (unsigned long long)f->train_samples, (unsigned long long)f->valid_samples, f->seq_len,
                    (unsigned long long)z->train_samples, (unsigned long long)z->valid_samples, z->seq_len);
    else if (f->train_id != z->train_id || f->valid_id != z->valid_id)
      bad = err_set(e, "rank %d on %s reads other shards than rank 0 (the %s set: as many samples, other tokens; shard "
                       "checksums %016llx, rank 0 %016llx)", q, f->host, f->train_id != z->train_id ? "train" : "validation",
                    (unsigned long long)(f->train_id != z->train_id ? f->train_id : f->valid_id),
                    (unsigned long long)(f->train_id != z->train_id ? z->train_id : z->valid_id));
    else if (strcmp(f->model, z->model))
      bad = err_set(e, "rank %d on %s builds another model than rank 0: its config's %s", q, f->host,
                    f->model_diff[0] ? f->model_diff : "text differs");
    else if (strcmp(f->options, z->options))
      bad = err_set(e, "rank %d on %s trains with other options than rank 0 (batch, schedule, seeds or token ids)", q,
                    f->host);
  }
  free(all);
  return bad ? -1 : 0;
}

/* 1 when the command line's run options name key ("ranks": --ranks or --ranks=N). */
static int names_key(const CliPairs *given, const char *key) {
  for (int i = 0; i < given->n; i++) {
    const char *k = given->key[i];
    while (*k == '-') k++;
    if (!strcmp(k, key)) return 1;
  }
  return 0;
}

/* The ranks and their hosts as this command gives them. --ranks and --hosts together
** must agree (the hosts' slots are the ranks: mpirun would run either count); resuming,
** an explicit --ranks alone runs on this machine (the stored hosts were the old layout's)
** and --hosts alone runs its slots. given: the run options of the command line. */
static int rank_layout(RunConfig *rc, const CliPairs *given, int resume, Err *e) {
  int ranks = names_key(given, "ranks"), hosts = names_key(given, "hosts");
  if (resume && ranks && !hosts) rc->hosts[0] = '\0';
  if (resume && hosts && !ranks && rc->hosts[0]) rc->ranks = run_config_host_slots(rc->hosts);
  if (ranks && rc->hosts[0] && rc->ranks != run_config_host_slots(rc->hosts))
    return err_set(e, "--ranks %ld, but --hosts %s has %ld slots: give the hosts alone (their slots are the ranks), or "
                      "--ranks alone on this machine", rc->ranks, rc->hosts, run_config_host_slots(rc->hosts));
  return 0;
}

/* -1 (err set) when dir already holds a model's config.json or weights. */
static int out_holds_model(const char *dir, Err *err) {
  static const char *const names[] = {"config.json", "model.safetensors"};
  for (int i = 0; i < 2; i++) {
    char path[4096];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path)
      return err_setk(err, ERR_BAD_INPUT, "--out: the path is too long");
    if (stat(path, &st) == 0)
      return err_setk(err, ERR_BAD_INPUT, "--out: %s exists: a model is there already (give another folder, or remove it)", path);
  }
  return 0;
}

int cmd_train(int argc, char **argv) {
  /* The flags -> a RunConfig -> a run in the store -> the trainer. Under mpirun, rank 0
  ** alone reads and writes the store and hands the description to the other ranks. */
  /* A stop asked for while the run is starting (the ranks opening their data, a cancel
  ** right after the job began) is kept and acted on at the first step boundary: with the
  ** default actions, SIGUSR1 from mpirun killed the ranks ("exited on signal 10"). */
  run_stop_catch(NULL);
  TrainArgs args;
  train_defaults(&args);
  int parsed = cli_parse(&cli_spec_train, "train", -1, argc, argv, 1, &args, NULL, NULL);
  if (parsed) return parsed > 0 ? 0 : 2;
  if (args.resume && !*args.resume) { fprintf(stderr, "maskd train: --resume= needs a run id or name\n"); return 2; }
  if (args.resume_flag && args.resume) { fprintf(stderr, "maskd train: --resume given twice\n"); return 2; }
  /* Each run option's value on its own (its type and range), refused as every command's
  ** flags are; how the values go together is run_config_check's, after --run's file. */
  for (int i = 0; i < args.run.n; i++) {
    char want[160];
    if (run_config_value_ok(args.run.key[i], args.run.val[i], want, sizeof want)) {
      fprintf(stderr, "maskd train: %s: expected %s, got '%s'\n", args.run.key[i], want, args.run.val[i]);
      return 2;
    }
  }
  /* A resumed run may move to other ranks (--ranks, --hosts, --grad-accum) or threads: nothing else changes. */
  CliPairs moved = {0}, described = {0};
  for (int i = 0; i < args.run.n; i++) {
    CliPairs *to = args.resume && resume_override(args.run.key[i]) ? &moved : &described;
    to->key[to->n] = args.run.key[i];
    to->val[to->n++] = args.run.val[i];
  }
  args.run = described;
  if (args.resume && (args.run_file || args.run.n)) {
    fprintf(stderr, "maskd train: --resume continues the run as it was described; it takes no other run options "
                    "(but --ranks, --hosts, --grad-accum and --threads)\n");
    return 2;
  }
  if (args.job && (args.resume || args.resume_flag || args.run_file || args.run.n || args.out)) {
    fprintf(stderr, "maskd train: --job runs the training job as it was queued; it takes no other run options\n");
    return 2;
  }
  if (!args.job && (args.data_dir || args.work_dir || args.job_hosts)) {
    fprintf(stderr, "maskd train: --data-dir, --work-dir and --job-hosts go with --job\n");
    return 2;
  }
  Err e = {0};
  if (args.job_hosts && job_hosts_check_list(args.job_hosts, &e)) {
    fprintf(stderr, "maskd train: --job-hosts: %s\n", e.msg);
    return 2;
  }
  Dist *d = NULL;
  if (dist_launched() && !(d = dist_open(&e))) { fprintf(stderr, "maskd train: %s\n", e.msg); return 1; }
  /* Before any collective whose size is this build's (dist_agree, the RunConfig): ranks of
  ** another maskd aborted there inside MPI (MPI_ERR_TRUNCATE), before same_everywhere. */
  char exe[65];
  if (rank_identity_check(d, exe, &e)) {
    if (dist_rank(d) == 0) fprintf(stderr, "maskd train: %s\n", e.msg);
    dist_close(d);
    return 1;
  }
  int rank = dist_rank(d), world = dist_world(d);
  RunConfig rc, given;
  const char *resume = NULL;
  int status = 1, failed = 0, have_resume = 0, threads_moved = 0;
  Store *db = NULL;
  Trainer *t = NULL;
  char *cfg_json = NULL;
  int64_t run = -1, job = 0;
  char job_resume[32];
  RunPlan plan;
  memset(&plan, 0, sizeof plan);
  run_config_defaults(&rc);

  if (rank == 0) {
    failed = train_describe(&args, &rc, &given, &resume, &e) != 0;
    if (!failed) failed = !(db = store_open(args.db_path, &e));
    int recovered = 0;
    if (!failed) failed = store_runs_recover(db, &recovered, &e) != 0;
    if (!failed && args.job) {
      failed = job_description(&args, db, &rc, &job, job_resume, sizeof job_resume, &e) != 0;
      if (!failed && job_resume[0]) resume = job_resume;
    }
    if (!failed && resume) {
      run = store_run_find(db, resume, &e);
      failed = run < 0;
      /* A resume job works on its run from here on (cancel, /metrics), whatever follows. */
      if (!failed && job) failed = store_job_set_run(db, job, run, &e) != 0;
      if (!failed) failed = train_stored(db, run, resume, args.resume_flag, &rc, &given, &threads_moved, &e) != 0;
      for (int i = 0; !failed && i < moved.n; i++) failed = run_config_set(&rc, moved.key[i], moved.val[i], &e) != 0;
    }
    /* What needs no file is checked before anything starts, mpirun's ranks included. */
    if (!failed) failed = run_config_check(&rc, &e) != 0;
    if (!failed) failed = rank_layout(&rc, resume ? &moved : &args.run, resume != NULL, &e) != 0;
    /* A new run's revisions go to the repository of its name: not one of a classifier. */
    if (!failed && !resume && store_check_repo_task(db, rc.name, MODEL_TASK_MLM, &e)) failed = err_prefix(&e, "--name") != 0;
    /* --out is written when the run ends: a place it cannot be is refused now, not then. */
    if (!failed && args.out) failed = files_make_dirs(args.out, &e) != 0 && err_prefix(&e, "--out") != 0;
    /* ... and a model already there is not overwritten (export's rule, without its --force). */
    if (!failed && args.out) failed = out_holds_model(args.out, &e) != 0;
    /* A job's hosts are the operator's choice, checked against the server's list as it is
    ** now (a resumed run's stored hosts included), before mpirun could reach any. */
    if (!failed && args.job) failed = job_hosts_allow(rc.hosts, args.job_hosts, NULL, 0, &e) != 0;
    if (!failed && d && (rc.ranks != 1 || names_key(&args.run, "ranks") || names_key(&moved, "ranks")) && rc.ranks != world)
      failed = err_set(&e, "--ranks %ld, but mpirun started %d processes", rc.ranks, world);
    if (d) rc.ranks = world;
    have_resume = resume != NULL;
  }
  if (dist_agree(d, failed, &e)) goto fail_early;
  /* Alone and asked for ranks: become mpirun running this same command. */
  if (!d && (rc.ranks > 1 || rc.hosts[0] || args.hostfile)) {
    store_close(db);
    return rank_launch(&rc, resume ? run : 0, args.db_path, args.hostfile, names_key(&args.run, "ranks") || names_key(&moved, "ranks"), argc, argv);
  }
  dist_bcast(d, &rc, sizeof rc, 0, NULL);
  dist_bcast(d, &have_resume, sizeof have_resume, 0, NULL);

  /* Validation opens the tokenizer and the shard sets once; the run uses what it opened.
  ** Every rank opens its own, so a rank that cannot read them stops the run before the
  ** store hears of it. */
  failed = run_config_open_ranks(&rc, d, &plan, &e) != 0;
  if (dist_agree(d, failed, &e)) goto fail_early;
  if (dist_agree(d, same_everywhere(d, &plan, exe, &e) != 0, &e)) goto fail_early;

  /* A resume is held to its checkpoint (the global batch, the sequence length) before the
  ** run is marked running: a refused one leaves the run as it was, interrupted. */
  if (have_resume && !(t = train_start(d, db, run, &plan, 1, &e))) goto fail_early;
  /* A stop that came while the run was starting ends it here, before the store hears of
  ** it (a resumed run stays as it was); after this, the first step boundary stops it. */
  int early = rank == 0 && run_stop_signal != 0;
  if (early) err_set(&e, "stopped by %s before the run began; nothing was recorded", run_stop_name(run_stop_signal));
  if (dist_agree(d, early, &e)) {
    if (rank == 0) fprintf(stderr, "maskd train: %s\n", e.msg);
    status = 130;
    goto cleanup;
  }
  /* Everything is checked; from here on failures are the run's and are recorded. */
  if (rank == 0) {
    if (run < 0) {
      rc.threads = plan.train.threads;   /* stored resolved: a resumed run keeps the count unless told another */
      cfg_json = run_config_to_json(&rc);
      run = job ? store_job_run_create(db, job, rc.name, cfg_json, &e) : store_run_create(db, rc.name, cfg_json, &e);
    }
    /* Claimed, not merely set: two resumes of one run that both passed the status check
    ** above would both train and push; the second is refused here. */
    failed = run < 0 || store_run_claim(db, run, &e) != 0;
  }
  if (dist_agree(d, failed, &e)) goto fail_early;
  if (!t) t = train_start(d, db, run, &plan, 0, &e);
  if (!t) {
    if (rank == 0) store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
    goto fail_early;
  }
  /* A run resumed on other ranks, hosts, grad_accum or threads (trainer_restore has checked that
  ** the global batch stays) is described from now on as it runs: GET /runs/{id}, and
  ** the next --resume, which continues where this one is. */
  if (rank == 0 && have_resume && (moved.n || threads_moved)) {
    rc.threads = plan.train.threads;   /* resolved, as a new run's ("--threads 0": all CPUs) */
    char *json = run_config_to_json(&rc);
    failed = json ? store_run_set_config(db, run, json, &e) != 0 : err_setk(&e, ERR_NOMEM, "out of memory") != 0;
    free(json);
    if (failed) store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
  }
  if (dist_agree(d, failed, &e)) goto fail_early;
  /* Where the ranks run, for the run's first lines and its record. */
  char (*hosts)[64] = calloc((size_t)world, 64), me[64];
  json_t *hostlist = json_array();
  snprintf(me, sizeof me, "%s", dist_host(d));
  if (hosts && dist_allgather(d, me, sizeof me, hosts, &e) == 0)
    for (int q = 0; q < world; q++) json_array_append_new(hostlist, json_string(hosts[q]));
  free(hosts);
  if (rank == 0) status = train_loop(db, run, &rc, t, &plan, &args, hostlist);
  else {
    /* A signal mpirun passes on is rank 0's to act on: it decides at a step boundary for all. */
    run_stop_catch(NULL);
    int r = trainer_run(t, NULL, &e);
    status = r < 0 ? 1 : r == TRAINER_STOPPED ? 130 : 0;
  }
  json_decref(hostlist);
  goto cleanup;

fail_early:
  if (rank == 0) fprintf(stderr, "maskd train: %s\n", e.msg);
  status = 1;
cleanup:
  trainer_free(t);
  store_close(db);
  run_plan_close(&plan);
  free(cfg_json);
  dist_close(d);
  return status;
}
