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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/io/checkpoint.h"
#include "engine/core/now.h"
#include "engine/core/files.h"
#include "engine/core/platform.h"
#include "engine/train/run_config.h"
#include "engine/tok/tokenizer.h"
#include "engine/train/trainer.h"
#include "server/cli/commands.h"
#include "server/cli/progress.h"
#include "server/cli/train_job.h"
#include "store/store.h"

static void train_usage(FILE *f) {
  fprintf(f,
          "usage: maskd train [--db PATH] --name NAME --tokenizer T --train DIR [--validation DIR]\n"
          "                   --config config.json|tiny|small|base [options]\n"
          "       maskd train [--db PATH] --resume RUN\n"
          "       maskd train [--db PATH] --name NAME [the run's options] --resume\n"
          "       maskd train --db PATH --job ID --work-dir DIR [--data-dir DIR]   (maskd serve's worker)\n"
          "\n"
          "Trains a masked language model from scratch. Each epoch is evaluated on the\n"
          "validation shards and pushed as a revision of the model NAME in the store.\n"
          "\n"
          "  --db PATH              the store (default $MASKD_DB, else ./maskd.db)\n"
          "  --run FILE             a run description (JSON object with the keys below); flags override it\n"
          "  --resume RUN           continue run RUN (id or name) from its newest checkpoint; as the\n"
          "                         last flag, --resume alone continues the newest run named NAME,\n"
          "                         whose stored description the other options must then match\n"
          "  --out DIR              also write the final model folder (config.json, model.safetensors,\n"
          "                         tokenizer files) to DIR\n"
          "  --quiet                no progress line\n"
          "  --job ID               run training job ID of the store's queue, as maskd serve's worker\n"
          "                         does: its description comes from the job (names resolved inside\n"
          "                         --work-dir and --data-dir, the server's folders) and its run is\n"
          "                         linked to the job when it is made; no other run options\n"
          "  --name NAME            run and model repository name\n"
          "  --tokenizer T          tokenizer.json (vocab_size, [MASK], <pad> come from it)\n"
          "  --train DIR            training shards        --validation DIR   evaluation shards\n"
          "  --config C             config.json or a preset (vocab_size from the tokenizer)\n"
          "  --epochs N (1)         --max-steps N (0: epochs x steps per epoch)\n"
          "  --batch B (8)          --grad-accum K (1): micro-batches per step\n"
          "  --lr X (1e-4)          --weight-decay X (1e-3)   --warmup-steps N (-1: total // 20)\n"
          "  --clip-norm X (0: off) --min-lr-ratio X (0)      --adam-beta1/--adam-beta2/--adam-epsilon\n"
          "  --seed N (42)          --eval-seed N (1234)      --threads N (0: all CPUs, fixed\n"
          "                         when the run is created, so a resumed run uses the same count)\n"
          "  --eval-batches N (0: all)   --checkpoint-steps N (0: epochs only)\n"
          "  --checkpoint-epochs N (1)   --keep-last N (2): checkpoints that keep optimizer state\n"
          "  --mlm-probability X (0.15)\n"
          "\n"
          "Values may also be written --option=VALUE (so a value may start with '-');\n"
          "--resume=RUN always takes RUN as the run.\n");
}

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

typedef struct TrainCtx {
  Store *db;
  int64_t run;
  const RunConfig *rc;
  const char *tokenizer_json;   /* the bytes validation read */
  Progress prog;
  long total;
  int epochs;
  StoreStepMetric buf[64];
  int nbuf;
  double last_flush;
  Err err;                 /* the first store error of a callback without one */
  int failed;
} TrainCtx;

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
  /* Metrics go in batches (one transaction each); the checkpoint callback flushes too,
  ** so whatever a checkpoint covers is in the store before it. */
  if (c->nbuf == (int)(sizeof c->buf / sizeof c->buf[0]) || now_monotonic() - c->last_flush > 5.0) {
    if (flush_steps(c, &c->err) || store_run_progress(c->db, c->run, s->step, s->total_steps, s->epoch, &c->err)) c->failed = 1;
  }
}

static void cb_eval(void *ctx, const TrainerEval *e) {
  TrainCtx *c = ctx;
  if (isnan(e->loss)) progress_line(&c->prog, "epoch %d/%d: loss %.4f (no validation set)", e->epoch + 1, c->epochs, e->train_loss);
  else
    progress_line(&c->prog, "epoch %d/%d: loss %.4f - val_loss %.4f - val_accuracy %.4f - val_perplexity %.3f (eval %.1fs)",
                  e->epoch + 1, c->epochs, e->train_loss, e->loss, e->accuracy, e->perplexity, e->seconds);
  StoreEpochMetric m = {e->epoch, e->train_loss, e->loss, e->accuracy, e->perplexity, e->seconds, 0};
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

static int cb_checkpoint(void *ctx, const TrainerCheckpoint *k, Err *err) {
  TrainCtx *c = ctx;
  unsigned char *w = NULL, *s = NULL;
  size_t wl = 0, sl = 0;
  if (flush_steps(c, err)) return -1;
  if (trainer_checkpoint_bytes(k, &w, &wl, &s, &sl, err)) return -1;
  char msg[128], metrics[512];
  if (k->kind == TRAINER_CKPT_EPOCH) snprintf(msg, sizeof msg, "Training in progress epoch %d", k->epochs_done);
  else if (k->kind == TRAINER_CKPT_STOP) snprintf(msg, sizeof msg, "Interrupted at step %ld", k->step);
  else snprintf(msg, sizeof msg, "Training in progress step %ld", k->step);
  if (k->eval && isfinite(k->eval->loss))
    snprintf(metrics, sizeof metrics,
             "{\"epoch\": %d, \"step\": %ld, \"train_loss\": %.9g, \"eval_loss\": %.9g, \"eval_accuracy\": %.9g, \"perplexity\": %.9g}",
             k->epochs_done, k->step, k->eval->train_loss, k->eval->loss, k->eval->accuracy, k->eval->perplexity);
  else snprintf(metrics, sizeof metrics, "{\"epoch\": %d, \"step\": %ld}", k->epochs_done, k->step);
  char *cfg = config_to_json(model_config(k->model));
  StorePush p = {msg, cfg, w, wl, s, sl, c->tokenizer_json, c->run, k->step, k->epochs_done, metrics};
  int r = cfg ? store_push(c->db, c->rc->name, &p, NULL, err) : err_set(err, "checkpoint: out of memory");
  free(cfg); free(w); free(s);
  if (r == 0) r = store_run_progress(c->db, c->run, k->step, c->total, k->epochs_done, err);
  if (r == 0) r = prune(c, err);
  if (r == 0 && k->kind != TRAINER_CKPT_STEPS) progress_line(&c->prog, "pushed %s", msg);
  return r;
}

static int cb_should_stop(void *ctx) {
  TrainCtx *c = ctx;
  return stop_signal != 0 || c->failed;
}

/* The final model as an HF folder with the files of the tokenizer validation read. */
static int write_out(Trainer *t, const Tokenizer *tok, const char *dir, Err *err) {
  if (ckpt_save_model(trainer_model(t), dir, 0, err)) return -1;
  return tokenizer_save_pretrained(tok, dir, err);
}

/* With --name ... --resume the options given must describe the stored run; names the first key that differs. */
static int differing_key(const RunConfig *stored, const RunConfig *given, Err *err) {
  char *a = run_config_to_json(stored), *b = run_config_to_json(given);
  json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
  int r = 0;
  const char *k;
  json_t *v;
  if (!ja || !jb) r = err_set(err, "out of memory");
  else
    json_object_foreach(ja, k, v) {
      if (!json_equal(v, json_object_get(jb, k))) {
        r = err_set(err, "%s: differs from the stored run's (resume takes the run as it was described)", k);
        break;
      }
    }
  json_decref(ja); json_decref(jb);
  free(a); free(b);
  return r;
}

/* The command line: the store, the run's options (applied after --run's file whatever
** their order, so collected first) and what to do. */
typedef struct TrainArgs {
  const char *db_path, *run_file, *resume, *out;
  const char *job, *data_dir, *work_dir;   /* --job: a queued job, its names resolved inside these */
  int resume_flag;     /* --resume without a value: the run named by --name */
  int quiet;
  int nk;
  char **keys;         /* "--key" of each run option (owned) */
  const char **vals;
} TrainArgs;

static void train_args_free(TrainArgs *t) {
  for (int i = 0; i < t->nk; i++) free(t->keys[i]);
  free(t->keys);
  free(t->vals);
}

/* 0: parsed; 1: --help printed; -1: refused (a line on stderr). Values are taken as
** cli_flag_value() says, so a value can never be read as an option. */
static int train_args(int argc, char **argv, TrainArgs *t) {
  memset(t, 0, sizeof *t);
  t->db_path = cli_db_path(NULL);
  t->keys = calloc((size_t)argc + 1, sizeof *t->keys);
  t->vals = calloc((size_t)argc + 1, sizeof *t->vals);
  if (!t->keys || !t->vals) { fprintf(stderr, "maskd train: out of memory\n"); return -1; }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    int r;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { train_usage(stdout); return 1; }
    if (!strcmp(a, "--quiet")) { t->quiet = 1; continue; }
    /* --resume alone (last, or before another option) continues the run named by --name. */
    if (!strcmp(a, "--resume") && (i + 1 >= argc || cli_looks_like_flag(argv[i + 1]))) { t->resume_flag = 1; continue; }
    if ((r = cli_flag_value("train", argc, argv, &i, "--db", &v))) t->db_path = v;
    else if ((r = cli_flag_value("train", argc, argv, &i, "--run", &v))) t->run_file = v;
    else if ((r = cli_flag_value("train", argc, argv, &i, "--resume", &v))) t->resume = v;
    else if ((r = cli_flag_value("train", argc, argv, &i, "--out", &v))) t->out = v;
    else if ((r = cli_flag_value("train", argc, argv, &i, "--job", &v))) t->job = v;
    else if ((r = cli_flag_value("train", argc, argv, &i, "--data-dir", &v))) t->data_dir = v;
    else if ((r = cli_flag_value("train", argc, argv, &i, "--work-dir", &v))) t->work_dir = v;
    else if (!strncmp(a, "--", 2)) {
      const char *eq = strchr(a, '=');
      char *key = eq ? strndup(a, (size_t)(eq - a)) : strdup(a);
      if (!key || !run_config_has_key(key)) {
        fprintf(stderr, "maskd train: unknown option %s (maskd train --help)\n", key ? key : a);
        free(key);
        return -1;
      }
      t->keys[t->nk] = key;
      if ((r = cli_flag_value("train", argc, argv, &i, key, &v)) == 1) t->vals[t->nk] = v;
      t->nk++;
    } else {
      fprintf(stderr, "maskd train: unknown option %s (maskd train --help)\n", a);
      return -1;
    }
    if (r < 0) return -1;
  }
  if (t->resume && !*t->resume) { fprintf(stderr, "maskd train: --resume= needs a run id or name\n"); return -1; }
  return 0;
}

/* --job: the run's description, or the run to resume, comes from the queued job. */
static int job_description(const TrainArgs *a, Store *db, RunConfig *rc, int64_t *job, char *resume, size_t cap,
                           Err *e) {
  long id;
  if (cli_parse_long(a->job, 1, LONG_MAX, &id)) return err_set(e, "--job: \"%s\" is not a job id", a->job);
  if (!a->work_dir) return err_set(e, "--job needs --work-dir (the server's work folder)");
  *job = id;
  return train_job_read(db, id, a->data_dir, a->work_dir, rc, resume, cap, e);
}

int cmd_train(int argc, char **argv) {
  TrainArgs args;
  int parsed = train_args(argc, argv, &args);
  if (parsed) { train_args_free(&args); return parsed > 0 ? 0 : 2; }
  const char *db_path = args.db_path, *run_file = args.run_file, *resume = args.resume, *out = args.out;
  int resume_flag = args.resume_flag, quiet = args.quiet, nk = args.nk;
  const char *const *keys = (const char *const *)args.keys, *const *vals = args.vals;
  RunConfig rc;
  run_config_defaults(&rc);
  Err e = {{0}};
  int status = 1;
  Store *db = NULL;
  Trainer *t = NULL;
  char *cfg_json = NULL;
  void *wbuf = NULL, *sbuf = NULL;
  int64_t run = -1, job = 0;
  char job_resume[32];
  RunPlan plan;
  memset(&plan, 0, sizeof plan);

  if (resume_flag && resume) {
    fprintf(stderr, "maskd train: --resume given twice\n");
    train_args_free(&args);
    return 2;
  }
  if (args.job && (resume || resume_flag || run_file || nk || out)) {
    fprintf(stderr, "maskd train: --job runs the training job as it was queued; it takes no other run options\n");
    train_args_free(&args);
    return 2;
  }
  if (!args.job && (args.data_dir || args.work_dir)) {
    fprintf(stderr, "maskd train: --data-dir and --work-dir go with --job\n");
    train_args_free(&args);
    return 2;
  }
  if (resume && (run_file || nk)) {
    fprintf(stderr, "maskd train: --resume continues the run as it was described; it takes no other run options\n");
    train_args_free(&args);
    return 2;
  }
  RunConfig given = rc;
  if (!resume) {
    if (run_file && run_config_load(&rc, run_file, &e)) goto fail_early;
    for (int i = 0; i < nk; i++)
      if (run_config_set(&rc, keys[i], vals[i], &e)) goto fail_early;
    given = rc;
    if (resume_flag) {
      if (!rc.name[0]) { err_set(&e, "--resume without a run needs --name"); goto fail_early; }
      resume = given.name;   /* the copy: rc is reset to take the stored description */
      run_config_defaults(&rc);
    }
  }
  db = store_open(db_path, &e);
  if (!db) goto fail_early;
  int recovered = 0;
  if (store_runs_recover(db, &recovered, &e)) goto fail_early;
  if (args.job) {
    if (job_description(&args, db, &rc, &job, job_resume, sizeof job_resume, &e)) goto fail_early;
    if (job_resume[0]) resume = job_resume;
  }
  if (resume) {
    run = store_run_find(db, resume, &e);
    if (run < 0) goto fail_early;
    /* A resume job works on its run from here on (cancel, /metrics), whatever follows. */
    if (job && store_job_set_run(db, job, run, &e)) goto fail_early;
    json_t *rj = store_run_get(db, run, &e);
    if (!rj) goto fail_early;
    StoreStatus st = STORE_STATUS_CREATED;
    store_status_parse(json_string_value(json_object_get(rj, "status")), &st);
    int running = st == STORE_STATUS_RUNNING, done = st == STORE_STATUS_DONE;
    json_t *stored = json_object_get(rj, "config");
    if (running || done) {
      json_decref(rj);
      err_set(&e, "run %s is %s; only a stopped run can be resumed", resume, running ? "still running" : "already done");
      goto fail_early;
    }
    int r = json_is_object(stored) ? run_config_apply_object(&rc, stored, &e)
                                   : err_set(&e, "run %s has no stored description", resume);
    json_decref(rj);
    if (r) goto fail_early;
    if (resume_flag && given.threads == 0) given.threads = rc.threads;   /* "all CPUs" was resolved when stored */
    if (resume_flag && differing_key(&rc, &given, &e)) goto fail_early;
  }
  /* Validation opens the tokenizer and the shard sets once; the run uses what it opened. */
  if (run_config_open(&rc, &plan, &e)) goto fail_early;

  /* Everything is checked; from here on failures are the run's and are recorded. */
  if (run < 0) {
    rc.threads = plan.train.threads;   /* stored resolved: a resumed run computes with the same threads */
    cfg_json = run_config_to_json(&rc);
    run = job ? store_job_run_create(db, job, rc.name, cfg_json, &e) : store_run_create(db, rc.name, cfg_json, &e);
    if (run < 0) goto fail_early;
  }
  if (store_run_set_status(db, run, STORE_STATUS_RUNNING, NULL, &e)) goto fail_early;
  t = trainer_new_loaders(&plan.model, &plan.train, plan.train_loader, plan.valid_loader, &e);
  plan.train_loader = plan.valid_loader = NULL;   /* the trainer's now */
  if (!t) goto fail_run;
  if (resume) {
    StoreRevision rev;
    int have = store_run_checkpoint(db, run, &rev, &e);
    if (have < 0) goto fail_run;
    if (have == 0) {
      size_t wl, sl;
      if (store_revision_file(db, &rev, "model.safetensors", &wbuf, &wl, &e) ||
          store_revision_file(db, &rev, "optimizer.safetensors", &sbuf, &sl, &e) ||
          trainer_restore(t, wbuf, wl, sbuf, sl, &e))
        goto fail_run;
      free(wbuf); free(sbuf);
      wbuf = sbuf = NULL;
    }
  }

  TrainCtx *c = calloc(1, sizeof *c);
  if (!c) { err_set(&e, "out of memory"); goto fail_run; }
  c->db = db; c->run = run; c->rc = &rc; c->tokenizer_json = plan.tokenizer_json;
  c->total = trainer_total_steps(t);
  c->epochs = (int)((c->total + trainer_steps_per_epoch(t) - 1) / trainer_steps_per_epoch(t));
  c->last_flush = now_monotonic();
  progress_init(&c->prog, stderr, quiet, trainer_step(t));
  progress_line(&c->prog, "run %lld \"%s\": %ld steps (%ld per epoch, warm-up %ld), batch %ld x %ld x %d tokens, %zu parameters%s",
                (long long)run, rc.name, c->total, trainer_steps_per_epoch(t), trainer_warmup_steps(t), rc.batch, rc.grad_accum,
                trainer_seq_len(t), model_num_params(trainer_model(t)), trainer_step(t) ? ", resumed" : "");
  if (trainer_step(t)) progress_line(&c->prog, "resuming at step %ld (epoch %d)", trainer_step(t), trainer_epoch(t) + 1);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int, old_term;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  TrainerCallbacks cb = {c, cb_step, cb_eval, cb_checkpoint, cb_should_stop};
  double t0 = now_monotonic();
  int r = trainer_run(t, &cb, &e);
  progress_done(&c->prog);
  Err fe = {{0}};
  if (r >= 0 && flush_steps(c, &fe)) { e = fe; r = -1; }
  if (r >= 0 && c->failed) { e = c->err; r = -1; }
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  char el[32];
  progress_format_duration(el, sizeof el, now_monotonic() - t0);
  if (r == TRAINER_DONE) {
    if (out && write_out(t, plan.tokenizer, out, &e)) r = -1;
  }
  if (r == TRAINER_DONE) {
    if (store_run_set_status(db, run, STORE_STATUS_DONE, NULL, &e)) r = -1;
    else {
      if (!quiet) fprintf(stderr, "run %lld done in %s\n", (long long)run, el);
      status = 0;
    }
  } else if (r == TRAINER_STOPPED) {
    const char *why = stop_signal == SIGTERM ? "stopped by SIGTERM" : "stopped by SIGINT";
    if (store_run_set_status(db, run, STORE_STATUS_INTERRUPTED, why, &e) == 0) {
      fprintf(stderr, "maskd train: run %lld interrupted at step %ld (checkpoint saved; maskd train --resume %lld)\n",
              (long long)run, trainer_step(t), (long long)run);
      status = 130;
    }
  }
  if (r < 0) {
    store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
    fprintf(stderr, "maskd train: %s\n", e.msg);
    status = 1;
  }
  free(c);
  goto cleanup;

fail_run:
  store_run_set_status(db, run, STORE_STATUS_FAILED, e.msg, NULL);
fail_early:
  fprintf(stderr, "maskd train: %s\n", e.msg);
  status = 1;
cleanup:
  free(wbuf); free(sbuf);
  trainer_free(t);
  store_close(db);
  run_plan_close(&plan);
  free(cfg_json);
  train_args_free(&args);
  return status;
}
