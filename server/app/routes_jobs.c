/* Jobs: POST /runs, /tokenizers, /datasets check a description (names and ranges; no
** file is read here) and queue it in the store (202 with the job's id); one worker
** thread takes queued jobs one at a time, oldest first, and runs each as a child maskd
** process, so a job reports to the store exactly as the command line does, and a crash
** or a long training step never touches the server. Every job is handed over by its
** id (maskd train, maskd tokenizer train, maskd prepare, each with --job ID): the child
** reads the description from the store and resolves its names itself. maskd train
** validates it once, trains on what it opened, and links the run it makes to the job;
** a tokenizer or prepare job writes into the output folder the worker made for it, and
** when it succeeds the worker registers what it made in the store (server/app/registry.h:
** GET /tokenizers and /datasets answer from there), or fails it saying why.
** Cancelling a running job sends SIGTERM: maskd train then checkpoints at the step
** boundary and stops.
** Because the queue lives in the store, a restarted server neither loses queued jobs
** nor runs one twice: a job that was running when the server died is marked
** "interrupted" when the server starts again; its run keeps its checkpoints and
** can be continued with POST /runs {"resume": RUN}. With `serve --on-restart resume`
** or a job's "on_restart": "resume", an interrupted training job is queued once more
** as a new job {"resume": RUN, "requeued_from": JOB}: training continues exactly
** where its newest checkpoint left it, and the interrupted job is not run again. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/core/now.h"
#include "engine/train/run_config.h"
#include "server/app/app.h"
#include "server/app/job_hosts.h"
#include "server/app/registry.h"
#include "server/app/workspace.h"
#include "store/load.h"

/* Why a job the server's stop interrupted is "interrupted": recovery finds them by it. */
#define SERVER_STOPPED "the server stopped"

extern char **environ;

struct Worker {
  App *app;
  pthread_t thread;
  atomic_int stop;
};

/* ---- submission ---- */

static void accepted(App *a, HttpRes *rs, const char *kind, const char *params) {
  Store *s = app_store(a, rs);
  if (!s) return;
  Err e = {0};
  int64_t id = store_job_submit(s, kind, params, &e);
  if (id < 1) { http_error_from(rs, &e, "cannot queue the job", json_string(e.msg)); return; }
  snprintf(rs->location, sizeof rs->location, "/jobs/%lld", (long long)id);
  http_json(rs, 202, json_pack("{s:I, s:s, s:s, s:s}", "id", (json_int_t)id, "kind", kind, "status",
                               store_status_name(STORE_STATUS_QUEUED),
                               "location", rs->location));
}

/* Answers a name that did not resolve with the status of e's kind (the workspace
** says ERR_INVALID for a bad or unknown input, ERR_CONFLICT for an output name
** already taken). */
static void workspace_refusal(HttpRes *rs, const Err *e, const char *field) {
  http_error_from(rs, e, e->msg, json_pack("{s:s}", "field", field));
}

/* A job row's params as an object (a new reference; NULL when unreadable): the store's
** rows carry them as an object or as the JSON text. */
static json_t *job_params(json_t *j) {
  json_t *params = json_object_get(j, "params");
  return json_is_string(params) ? json_loads(json_string_value(params), 0, NULL) : json_incref(params);
}

/* 1 when job j (a row of store_jobs_list) works on run: it made the run, or it resumes
** it (a resume job names its run by id, and links to it only once its process starts). */
static int job_targets_run(json_t *j, int64_t run) {
  if (json_integer_value(json_object_get(j, "run")) == run) return 1;
  json_t *p = job_params(j);
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)run);
  int hit = !strcmp(json_string_value(json_object_get(p, "resume")) ?: "", id);
  json_decref(p);
  return hit;
}

static int job_live(json_t *j) {
  StoreStatus st = STORE_STATUS_DONE;
  store_status_parse(json_string_value(json_object_get(j, "status")), &st);
  return st == STORE_STATUS_QUEUED || st == STORE_STATUS_RUNNING;
}

/* "resume": a run id or name that the store knows, that is not running and that no
** queued or running job already resumes (two would train it twice, and a cancel reached
** only one); on success id_text receives the run's id, which is all the job passes on. */
static int resume_target(App *a, HttpRes *rs, const json_t *resume, char *id_text, size_t cap) {
  Err e = {0};
  const char *v = json_string_value(resume);
  if (!v || json_string_length(resume) != strlen(v) || store_check_name("run", v, &e)) {
    http_error(rs, 422, "\"resume\" takes a run id or name", json_pack("{s:s, s:s}", "field", "resume", "why",
                                                                        v ? e.msg : "not a string"));
    return -1;
  }
  Store *s = app_store(a, rs);
  if (!s) return -1;
  int64_t run = store_run_find(s, v, &e);
  if (run < 1) { http_error(rs, 422, "no such run to resume", json_pack("{s:s, s:s}", "field", "resume", "run", v)); return -1; }
  /* What maskd train --resume refuses, refused here, before a job is queued to fail; a
  ** run whose process is gone (killed outright) is interrupted first, as --resume finds it. */
  store_runs_recover(s, NULL, &e);
  json_t *rj = store_run_get(s, run, &e);
  if (!rj) { http_error_from(rs, &e, "cannot read the run", json_string(e.msg)); return -1; }
  StoreStatus st = STORE_STATUS_CREATED;
  store_status_parse(json_string_value(json_object_get(rj, "status")), &st);
  json_decref(rj);
  if (st == STORE_STATUS_RUNNING || st == STORE_STATUS_DONE) {
    http_error(rs, 409, st == STORE_STATUS_DONE ? "the run is already done; only a stopped run can be resumed"
                                                : "the run is still running; only a stopped run can be resumed",
               json_pack("{s:s, s:s, s:s}", "field", "resume", "run", v, "status", store_status_name(st)));
    return -1;
  }
  json_t *jobs = store_jobs_list(s, &e);
  if (!jobs) { http_error_from(rs, &e, "cannot read the jobs", json_string(e.msg)); return -1; }
  int64_t live = 0;
  size_t i;
  json_t *j;
  json_array_foreach(jobs, i, j)
    if (!live && job_live(j) && job_targets_run(j, run)) live = json_integer_value(json_object_get(j, "id"));
  json_decref(jobs);
  if (live > 0) {
    http_error(rs, 409, "a job already resumes this run; cancel it or wait for it",
               json_pack("{s:s, s:s, s:I}", "field", "resume", "run", v, "job", (json_int_t)live));
    return -1;
  }
  snprintf(id_text, cap, "%lld", (long long)run);
  return 0;
}

/* A run's hosts must be ones the operator allows (server/app/job_hosts.h): else 403 naming
** the first host refused and, to this client that may post runs, the allowed list. what
** prefixes the message ("resume: the run's description" for a stored one), or is NULL. */
static int hosts_allowed(App *a, HttpRes *rs, const char *hosts, const char *what) {
  Err e = {0};
  char refused[JOB_HOSTS_NAME_MAX + 1];
  if (job_hosts_allow(hosts, a->job_hosts, refused, sizeof refused, &e) == 0) return 0;
  if (what) err_prefix(&e, what);
  char msg[sizeof e.msg + 64];
  if (a->job_hosts) snprintf(msg, sizeof msg, "%s; allowed: %s", e.msg, a->job_hosts);
  else snprintf(msg, sizeof msg, "%s", e.msg);
  http_error(rs, 403, msg, json_pack("{s:s, s:s, s:s}", "field", what ? "resume" : "hosts", "host", refused, "allowed",
                                     a->job_hosts ? a->job_hosts : ""));
  return -1;
}

/* A resumed run launches with its stored description: its hosts are checked against
** today's list, which may be narrower than the one it was posted under. */
static int stored_hosts_allowed(App *a, HttpRes *rs, const char *run_id) {
  Store *s = app_store(a, rs);
  if (!s) return -1;
  Err e = {0};
  json_t *r = store_run_get(s, strtoll(run_id, NULL, 10), &e);
  if (!r) { http_error_from(rs, &e, "cannot read the run to resume", json_string(e.msg)); return -1; }
  const char *hosts = json_string_value(json_object_get(json_object_get(r, "config"), "hosts"));
  int rc = hosts_allowed(a, rs, hosts ? hosts : "", "resume: the run's description");
  json_decref(r);
  return rc;
}

static const char out_hint_runs[] = "unknown field: runs submitted over HTTP are kept in the store (export them with maskd export)";

/* The names of a run description (tokenizer, train, validation, a config that is no
** preset) must resolve now, so a typo is refused at once; the job resolves them again. */
static int run_names_resolve(App *a, HttpRes *rs, const RunConfig *rc) {
  char path[WORKSPACE_PATH_MAX];
  Err e = {0};
  int st;
  if ((st = workspace_tokenizer(&a->ws, "tokenizer", rc->tokenizer, path, sizeof path, &e))) {
    workspace_refusal(rs, &e, "tokenizer");
  } else if ((st = workspace_dataset(&a->ws, "train", rc->train, path, sizeof path, &e))) {
    workspace_refusal(rs, &e, "train");
  } else if (rc->validation[0] && (st = workspace_dataset(&a->ws, "validation", rc->validation, path, sizeof path, &e))) {
    workspace_refusal(rs, &e, "validation");
  } else if (!run_config_is_preset(rc->config) &&
             (st = workspace_config(&a->ws, "config", rc->config, path, sizeof path, &e))) {
    workspace_refusal(rs, &e, "config");
  }
  return rs->status ? -1 : 0;
}

/* ---- text-classification jobs: POST /runs {"task": "text-classification", ...} ---- */

/* A fine-tuning job's fields, each with its kind and range: the options of maskd
** finetune, which checks them again when the job runs (job_read_finetune, then its
** option table). Data files are named under the data folder, as corpora are. */
typedef enum { FT_TASK, FT_MODEL, FT_NAME, FT_FILE, FT_TEXT, FT_INT, FT_NUM, FT_BOOL, FT_PRECISION } FtKind;
typedef struct FtField {
  const char *key;
  FtKind kind;
  double lo, hi;      /* FT_INT, FT_NUM: the range (FT_NUM's open ends in open) */
  int open;           /* 1: lo excluded, 2: hi excluded */
  int required;
} FtField;

static const FtField ft_fields[] = {
  {"task", FT_TASK, 0, 0, 0, 1},
  {"model", FT_MODEL, 0, 0, 0, 1},
  {"name", FT_NAME, 0, 0, 0, 1},
  {"train", FT_FILE, 0, 0, 0, 1},
  {"validation", FT_FILE, 0, 0, 0, 0},
  {"test", FT_FILE, 0, 0, 0, 0},
  {"labels", FT_FILE, 0, 0, 0, 0},
  {"text_column", FT_TEXT, 0, 0, 0, 0},
  {"label_column", FT_TEXT, 0, 0, 0, 0},
  {"epochs", FT_INT, 1, 100000, 0, 0},
  {"lr", FT_NUM, 0, 10, 0, 0},
  {"batch", FT_INT, 1, 65536, 0, 0},
  {"eval_batch", FT_INT, 1, 65536, 0, 0},
  {"max_length", FT_INT, 2, 1 << 20, 0, 0},
  {"weight_decay", FT_NUM, 0, 10, 0, 0},
  {"warmup_ratio", FT_NUM, 0, 1, 0, 0},
  {"warmup_steps", FT_INT, -1, 1099511627776.0, 0, 0},
  {"clip_norm", FT_NUM, 0, 1e9, 0, 0},
  {"label_smoothing", FT_NUM, 0, 1, 2, 0},
  {"seed", FT_INT, 0, 9007199254740992.0, 0, 0},
  {"dropout_seed", FT_INT, 0, 9007199254740992.0, 0, 0},
  {"hidden_dropout_prob", FT_NUM, 0, 1, 2, 0},           /* over the base model's config, as from_pretrained's keywords */
  {"attention_probs_dropout_prob", FT_NUM, 0, 1, 2, 0},
  {"classifier_dropout", FT_NUM, 0, 1, 2, 0},
  {"length_grouped", FT_BOOL, 0, 0, 0, 0},
  {"precision", FT_PRECISION, 0, 0, 0, 0},
  {"threads", FT_INT, 0, 1024, 0, 0},
  {"max_steps", FT_INT, 0, 1000000000, 0, 0},
  {"validation_fraction", FT_NUM, 0, 1, 2, 0},   /* 0: no validation, train on all */
};

/* 422 naming the field and what it must be. */
static void ft_refuse(HttpRes *rs, const char *field, const char *must, const json_t *got) {
  http_error(rs, 422, "invalid fine-tuning job", json_pack("{s:s, s:s, s:s}", "field", field, "expected", must, "got",
                                                          got ? http_json_type(got) : "missing"));
}

/* One field's value, checked; names resolved now (the job resolves them again). */
static int ft_field(App *a, HttpRes *rs, const FtField *f, json_t *v) {
  const char *str = json_string_value(v);
  int is_name = str && *str && json_string_length(v) == strlen(str);
  char path[WORKSPACE_PATH_MAX], buf[160];
  Err e = {0};
  switch (f->kind) {
    case FT_TASK:
      if (!str || strcmp(str, "text-classification")) { ft_refuse(rs, f->key, "\"text-classification\"", v); return -1; }
      return 0;
    case FT_MODEL: {
      if (!is_name) { ft_refuse(rs, f->key, "a model in the store: NAME[@REVISION]", v); return -1; }
      Store *s = app_store(a, rs);
      if (!s) return -1;
      StoreRevision r;
      if (store_resolve(s, str, &r, &e)) {
        http_error(rs, 422, "no such model to fine-tune", json_pack("{s:s, s:s, s:s}", "field", f->key, "model", str, "why", e.msg));
        return -1;
      }
      return 0;
    }
    case FT_NAME:
      if (!is_name || store_check_run_name(str, &e)) {   /* the run's name and its model's */
        http_error(rs, 422, "invalid fine-tuning job", json_pack("{s:s, s:s}", "field", f->key, "why", is_name ? e.msg : "not a name"));
        return -1;
      }
      return 0;
    case FT_FILE:
      if (!is_name) { ft_refuse(rs, f->key, "a file's name under the server's data folder", v); return -1; }
      if (workspace_corpus(&a->ws, f->key, str, path, sizeof path, &e)) { workspace_refusal(rs, &e, f->key); return -1; }
      return 0;
    case FT_TEXT:
      if (!is_name || strlen(str) > 256) { ft_refuse(rs, f->key, "a column name", v); return -1; }
      return 0;
    case FT_BOOL:
      if (!json_is_boolean(v)) { ft_refuse(rs, f->key, "true or false", v); return -1; }
      return 0;
    case FT_PRECISION:
      if (!str || (strcmp(str, "fp32") && strcmp(str, "bf16"))) { ft_refuse(rs, f->key, "\"fp32\" or \"bf16\"", v); return -1; }
      return 0;
    case FT_INT:
    case FT_NUM: {
      int ok = f->kind == FT_INT ? json_is_integer(v) : json_is_number(v);
      double x = json_number_value(v);
      ok = ok && (f->open & 1 ? x > f->lo : x >= f->lo) && (f->open & 2 ? x < f->hi : x <= f->hi);
      if (!ok) {
        snprintf(buf, sizeof buf, "%s in %c%.17g, %.17g%c", f->kind == FT_INT ? "an integer" : "a number", f->open & 1 ? '(' : '[',
                 f->lo, f->hi, f->open & 2 ? ')' : ']');
        ft_refuse(rs, f->key, buf, v);
        return -1;
      }
      return 0;
    }
  }
  return -1;
}

/* POST /runs with "task": "text-classification": every field known and checked, the
** named files and model present now; queued as a train job that maskd finetune runs. */
static void submit_finetune(App *a, HttpRes *rs, json_t *body) {
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v) {
    const FtField *f = NULL;
    for (size_t i = 0; i < sizeof ft_fields / sizeof ft_fields[0]; i++)
      if (!strcmp(ft_fields[i].key, k)) f = &ft_fields[i];
    if (!f) {
      http_error(rs, 422, !strcmp(k, "on_restart") ? "unknown field: a fine-tuning job is not resumed (submit it again)"
                          : !strcmp(k, "out") ? out_hint_runs : "unknown field",
                 json_pack("{s:s}", "field", k));
      return;
    }
  }
  for (size_t i = 0; i < sizeof ft_fields / sizeof ft_fields[0]; i++) {
    json_t *fv = json_object_get(body, ft_fields[i].key);
    if (!fv) {
      if (ft_fields[i].required) { ft_refuse(rs, ft_fields[i].key, "a value (required)", NULL); return; }
      continue;
    }
    if (ft_field(a, rs, &ft_fields[i], fv)) return;
  }
  /* What the job's maskd finetune would refuse once it ran, refused now by its own check
  ** (store_finetune_check): the base's repository as the name, a repository holding
  ** another pipeline, max_length past the base's positions. */
  Store *s = app_store(a, rs);
  if (!s) return;
  StoreRevision base;
  ModelConfig base_cfg;
  const char *field = NULL;
  Err e = {0};
  json_t *ml = json_object_get(body, "max_length");
  /* FT_MODEL resolved the name above: what fails here is a model gone since (422) or the
  ** store, or its config, failing (the error's own status, not the user's 422). */
  if (store_load_config(s, json_string_value(json_object_get(body, "model")), &base, &base_cfg, &e)) {
    if (e.kind != ERR_NOT_FOUND) { http_error_from(rs, &e, "cannot read the model to fine-tune", NULL); return; }
    http_error(rs, 422, "no such model to fine-tune", json_pack("{s:s, s:s, s:s}", "field", "model", "model",
                                                               json_string_value(json_object_get(body, "model")), "why", e.msg));
    return;
  }
  if (store_finetune_check(s, &base, &base_cfg, json_string_value(json_object_get(body, "name")),
                           ml ? (int)json_integer_value(ml) : 0, &field, &e)) {
    if (field) http_error(rs, 422, "invalid fine-tuning job", json_pack("{s:s, s:s}", "field", field, "why", e.msg));
    else http_error_from(rs, &e, "cannot check the fine-tuning job", NULL);
    return;
  }
  char *text = json_dumps(body, JSON_COMPACT);
  if (!text) http_error(rs, 500, "out of memory", NULL);
  else accepted(a, rs, "train", text);
  free(text);
}

void route_submit_run(void *app, HttpReq *rq, HttpRes *rs) {
  App *a = app;
  json_t *body = http_body_object(rq, rs);
  if (!body) return;
  if (json_object_get(body, "task")) {
    submit_finetune(a, rs, body);
    json_decref(body);
    return;
  }
  /* "on_restart" is the queue's, not the run's: kept beside the description, never given to maskd train. */
  json_t *on_restart = json_incref(json_object_get(body, "on_restart"));
  json_t *resume = json_object_get(body, "resume");
  json_t *queued = NULL;
  char *text = NULL;
  RunConfig rc;
  Err e = {0};
  if (on_restart && (!json_is_string(on_restart) || (strcmp(json_string_value(on_restart), "resume") &&
                                                     strcmp(json_string_value(on_restart), "interrupt")))) {
    http_error(rs, 422, "\"on_restart\" must be \"resume\" or \"interrupt\"",
               json_pack("{s:s, s:s}", "field", "on_restart", "got", http_json_type(on_restart)));
    goto done;
  }
  json_object_del(body, "on_restart");
  /* Every field is one the job uses: anything else, or a field that would be ignored, is
  ** refused by name rather than looking accepted. */
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v) {
    if (resume && strcmp(k, "resume")) {
      http_error(rs, 422, "\"resume\" takes a run id or name and nothing else but \"on_restart\" (a resumed run keeps its description)",
                 json_pack("{s:s}", "field", k));
      goto done;
    }
    if (!resume && !strcmp(k, "out")) {
      http_error(rs, 422, "unknown field: runs submitted over HTTP are kept in the store (export them with maskd export)",
                 json_pack("{s:s}", "field", "out"));
      goto done;
    }
    if (!resume && !run_config_json_key(k)) {
      http_error(rs, 422, "unknown field", json_pack("{s:s}", "field", k));
      goto done;
    }
  }
  if (resume) {  /* {"resume": RUN}: continue a stopped run from its newest checkpoint */
    char id[32];
    if (resume_target(a, rs, resume, id, sizeof id) || stored_hosts_allowed(a, rs, id)) goto done;
    queued = json_pack("{s:s}", "resume", id);
  } else {
    run_config_defaults(&rc);
    /* More ranks on this machine than maskd train would start are refused now, where the
    ** client can act on it, not as a failed job. */
    if (run_config_apply_object(&rc, body, &e) || run_config_check(&rc, &e) || run_config_check_local_ranks(&rc, &e)) {
      http_error(rs, 422, "invalid run description", json_string(e.msg));
      goto done;
    }
    if (store_check_run_name(rc.name, &e)) { http_error(rs, 422, "invalid run description", json_string(e.msg)); goto done; }
    /* What the job's maskd train refuses at its start, refused now by the same check: a name
    ** whose repository holds a classifier (the push would fail after the first epoch). */
    Store *s = app_store(a, rs);
    if (!s) goto done;
    if (store_check_repo_task(s, rc.name, MODEL_TASK_MLM, &e)) {
      if (e.kind == ERR_CONFLICT) http_error(rs, 422, "invalid run description", json_pack("{s:s, s:s}", "field", "name", "why", e.msg));
      else http_error_from(rs, &e, "cannot check the run's name", NULL);
      goto done;
    }
    /* Both given, they must agree, as on the command line: the hosts' slots are the ranks. */
    if (json_object_get(body, "ranks") && rc.hosts[0] && rc.ranks != run_config_host_slots(rc.hosts)) {
      http_error(rs, 422, "invalid run description",
                 json_sprintf("ranks %ld, but hosts %s has %ld slots: give the hosts alone (their slots are the ranks), "
                              "or ranks alone on this machine", rc.ranks, rc.hosts, run_config_host_slots(rc.hosts)));
      goto done;
    }
    if (hosts_allowed(a, rs, rc.hosts, NULL)) goto done;
    if (run_names_resolve(a, rs, &rc)) goto done;
    /* The whole description, defaults filled in, is what the job runs. */
    if (!(queued = run_config_to_object(&rc))) { http_error(rs, 500, "out of memory", NULL); goto done; }
    json_object_del(queued, "out");
  }
  if (on_restart) json_object_set(queued, "on_restart", on_restart);
  text = json_dumps(queued, JSON_COMPACT);
  if (!text) http_error(rs, 500, "out of memory", NULL);
  else accepted(a, rs, "train", text);
done:
  json_decref(queued);
  json_decref(on_restart);
  json_decref(body);
  free(text);
}

/* A string field, or a list of strings when list is set; answers 422 naming it. */
static int want_strings(HttpRes *rs, json_t *o, const char *field, int list, int required) {
  json_t *v = json_object_get(o, field);
  int ok = v ? (json_is_string(v) && json_string_length(v) > 0) : !required;
  if (v && list && json_is_array(v) && json_array_size(v) > 0 && json_array_size(v) <= APP_JOB_MAX_INPUTS) {
    ok = 1;
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) ok &= json_is_string(x) && json_string_length(x) > 0;
  }
  if (!ok)
    http_error(rs, 422, list ? "field must be a non-empty string or a list of 1 to 64 strings" : "field must be a non-empty string",
               json_pack("{s:s, s:s}", "field", field, "got", v ? http_json_type(v) : "missing"));
  return ok;
}

static int want_int(HttpRes *rs, json_t *o, const char *field, long lo, long hi, int required) {
  json_t *v = json_object_get(o, field);
  int ok = v ? json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi : !required;
  if (!ok)
    http_error(rs, 422, "field must be an integer in range",
               json_pack("{s:s, s:I, s:I, s:s}", "field", field, "min", (json_int_t)lo, "max", (json_int_t)hi, "got",
                         v ? http_json_type(v) : "missing"));
  return ok;
}

/* Unknown fields are refused by name: a field that would be ignored ("out" from an
** older client, say) must not look accepted. */
static int only_fields(HttpRes *rs, json_t *o, const char *const *names, const char *hint) {
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    int known = 0;
    for (int i = 0; names[i]; i++) known |= !strcmp(k, names[i]);
    if (!known) {
      http_error(rs, 422, !strcmp(k, "out") ? hint : "unknown field", json_pack("{s:s}", "field", k));
      return 0;
    }
  }
  return 1;
}

static const char out_hint[] =
    "unknown field: the server chooses where a job writes, under its work folder, by the job's \"name\"";

/* Each input names a corpus under the data root (a string or a list of them). */
static int corpora_resolve(App *a, HttpRes *rs, json_t *o, const char *field) {
  json_t *v = json_object_get(o, field);
  json_t *list = json_is_string(v) ? json_pack("[O]", v) : json_incref(v);
  size_t i;
  json_t *x;
  json_array_foreach(list, i, x) {
    char path[WORKSPACE_PATH_MAX];
    Err e = {0};
    int st = json_string_length(x) != strlen(json_string_value(x))
                 ? (err_setk(&e, ERR_INVALID, "%s: a name cannot hold a NUL character", field), WORKSPACE_BAD_NAME)
                 : workspace_corpus(&a->ws, field, json_string_value(x), path, sizeof path, &e);
    if (st) { workspace_refusal(rs, &e, field); break; }
  }
  json_decref(list);
  return rs->status ? 0 : 1;
}

/* The output name is free now (a second job of the same name fails when it runs). */
static int output_free(App *a, HttpRes *rs, json_t *o, const char *kind) {
  char path[WORKSPACE_PATH_MAX];
  Err e = {0};
  const char *name = json_string_value(json_object_get(o, "name"));
  int st = strlen(name) != json_string_length(json_object_get(o, "name"))
               ? (err_setk(&e, ERR_INVALID, "name: cannot hold a NUL character"), WORKSPACE_BAD_NAME)
               : workspace_output(&a->ws, kind, name, path, sizeof path, &e);
  if (st) { workspace_refusal(rs, &e, "name"); return 0; }
  /* The store may know the name though its folder is gone (removed by hand): the job
  ** would run and then fail to register; refused now, as a taken folder is. */
  Store *s = app_store(a, rs);
  if (!s) return 0;
  int tok = !strcmp(kind, "tokenizers");
  json_t *known = tok ? store_tokenizer_info(s, name, &e) : store_dataset_get(s, name, &e);
  if (known) {
    json_decref(known);
    http_error(rs, 409, tok ? "a tokenizer of this name is registered" : "a dataset of this name is registered",
               json_pack("{s:s, s:s}", "field", "name", "name", name));
    return 0;
  }
  if (e.kind != ERR_NOT_FOUND) { http_error_from(rs, &e, "cannot read the store", NULL); return 0; }
  return 1;
}

void route_submit_tokenizer(void *app, HttpReq *rq, HttpRes *rs) {
  static const char *const fields[] = {"name", "input", "vocab_size", NULL};
  App *a = app;
  json_t *b = http_body_object(rq, rs);
  if (!b) return;
  if (only_fields(rs, b, fields, out_hint) && want_strings(rs, b, "name", 0, 1) && want_strings(rs, b, "input", 1, 1) &&
      want_int(rs, b, "vocab_size", APP_JOB_VOCAB_MIN, APP_JOB_VOCAB_MAX, 1) && output_free(a, rs, b, "tokenizers") &&
      corpora_resolve(a, rs, b, "input")) {
    char *p = json_dumps(b, JSON_COMPACT);
    accepted(app, rs, "tokenizer", p);
    free(p);
  }
  json_decref(b);
}

void route_submit_dataset(void *app, HttpReq *rq, HttpRes *rs) {
  static const char *const fields[] = {"name", "tokenizer", "input", "split", "seq_len", NULL};
  App *a = app;
  json_t *b = http_body_object(rq, rs);
  if (!b) return;
  if (only_fields(rs, b, fields, out_hint) && want_strings(rs, b, "name", 0, 1) &&
      want_strings(rs, b, "tokenizer", 0, 1) && want_strings(rs, b, "input", 0, 1) &&
      want_strings(rs, b, "split", 0, 0) && want_int(rs, b, "seq_len", APP_JOB_SEQ_LEN_MIN, APP_JOB_SEQ_LEN_MAX, 0) &&
      output_free(a, rs, b, "datasets") && corpora_resolve(a, rs, b, "input")) {
    const char *split = json_string_value(json_object_get(b, "split"));
    char path[WORKSPACE_PATH_MAX];
    Err e = {0};
    int st;
    if (split && !workspace_name_ok(split)) {
      http_error(rs, 422, "split: not a name (letters, digits, - _ .)", json_pack("{s:s}", "field", "split"));
    } else if ((st = workspace_tokenizer(&a->ws, "tokenizer", json_string_value(json_object_get(b, "tokenizer")), path,
                                         sizeof path, &e))) {
      workspace_refusal(rs, &e, "tokenizer");
    } else {
      char *p = json_dumps(b, JSON_COMPACT);
      accepted(app, rs, "prepare", p);
      free(p);
    }
  }
  json_decref(b);
}

/* GET /corpora: the corpora a job may name. */
void route_corpora(void *app, HttpReq *rq, HttpRes *rs) {
  (void)rq;
  json_t *l = workspace_corpora(&((App *)app)->ws, 1000);
  if (!l) { http_error(rs, 500, "out of memory", NULL); return; }
  http_json(rs, 200, l);
}

/* GET /tokenizers, /datasets and one of them by name: the store's registry (what jobs
** made, and output folders adopted at start-up), without the store's row ids. */
static json_t *registry_entry(json_t *o) {
  json_object_del(o, "id");
  return o;
}

static void registry_list(App *a, HttpRes *rs, int datasets) {
  Store *s = app_store(a, rs);
  if (!s) return;
  Err e = {0};
  json_t *l = datasets ? store_datasets_list(s, &e) : store_tokenizers_list(s, &e);
  if (!l) { http_error_from(rs, &e, datasets ? "cannot list datasets" : "cannot list tokenizers", json_string(e.msg)); return; }
  size_t i;
  json_t *x;
  json_array_foreach(l, i, x) registry_entry(x);
  http_json(rs, 200, l);
}

static void registry_one(App *a, HttpReq *rq, HttpRes *rs, int datasets) {
  Store *s = app_store(a, rs);
  if (!s) return;
  Err e = {0};
  const char *name = rq->params[0];
  json_t *o = datasets ? store_dataset_get(s, name, &e) : store_tokenizer_info(s, name, &e);
  if (!o) {
    http_error_from(rs, &e, datasets ? "no such dataset" : "no such tokenizer", json_pack("{s:s}", "why", e.msg));
    return;
  }
  http_json(rs, 200, registry_entry(o));
}

void route_tokenizers(void *app, HttpReq *rq, HttpRes *rs) { (void)rq; registry_list(app, rs, 0); }
void route_datasets(void *app, HttpReq *rq, HttpRes *rs) { (void)rq; registry_list(app, rs, 1); }
void route_tokenizer(void *app, HttpReq *rq, HttpRes *rs) { registry_one(app, rq, rs, 0); }
void route_dataset(void *app, HttpReq *rq, HttpRes *rs) { registry_one(app, rq, rs, 1); }

/* ---- reading and cancelling ---- */

void route_jobs(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  json_t *j = store_jobs_list(s, &e);
  if (!j) { http_error_from(rs, &e, "cannot list jobs", json_string(e.msg)); return; }
  http_json(rs, 200, workspace_scrub_json(&((App *)app)->ws, j));
}

static int64_t parse_id(const char *s) {
  char *end;
  errno = 0;   /* past INT64_MAX strtoll answers INT64_MAX: another job's number */
  long long v = strtoll(s, &end, 10);
  return *s && !*end && !errno && v > 0 ? (int64_t)v : -1;
}

void route_job(void *app, HttpReq *rq, HttpRes *rs) {
  int64_t id = parse_id(rq->params[0]);
  if (id < 1) { http_error(rs, 404, "no such job", json_pack("{s:s}", "job", rq->params[0])); return; }
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  json_t *j = store_job_get(s, id, &e);
  if (!j) { http_error_from(rs, &e, "no such job", json_pack("{s:s, s:s}", "job", rq->params[0], "why", e.msg)); return; }
  http_json(rs, 200, workspace_scrub_json(&((App *)app)->ws, j));
}

static void cancel_job(Store *s, HttpRes *rs, int64_t job) {
  Err e = {0};
  json_t *j = store_job_get(s, job, &e);
  const char *name = json_string_value(json_object_get(j, "status"));
  StoreStatus st = STORE_STATUS_DONE;
  store_status_parse(name, &st);
  if (!j) {
    http_error_from(rs, &e, "no such job", json_string(e.msg));
  } else if (st != STORE_STATUS_QUEUED && st != STORE_STATUS_RUNNING) {
    http_error(rs, 409, "the job has already ended", json_pack("{s:I, s:s}", "job", (json_int_t)job, "status", name ?: "?"));
  } else if (store_job_cancel(s, job, &e)) {
    http_error_from(rs, &e, "cannot cancel", json_string(e.msg));
  } else {
    http_json(rs, 202, json_pack("{s:I, s:s}", "job", (json_int_t)job, "status",
                                 st == STORE_STATUS_QUEUED ? store_status_name(STORE_STATUS_CANCELLED) : "cancelling"));
  }
  json_decref(j);
}

void route_cancel_job(void *app, HttpReq *rq, HttpRes *rs) {
  int64_t id = parse_id(rq->params[0]);
  if (id < 1) { http_error(rs, 404, "no such job", json_pack("{s:s}", "job", rq->params[0])); return; }
  Store *s = app_store(app, rs);
  if (!s) return;
  cancel_job(s, rs, id);
}

void route_cancel_run(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  int64_t run = store_run_find(s, rq->params[0], &e);
  if (run < 1) {
    http_error_from(rs, &e, "no such run", json_pack("{s:s}", "run", rq->params[0]));
    return;
  }
  /* Every queued or running job of the run is cancelled (a resume queued behind the one
  ** running would train it on after the cancel); the answer is the newest's. With none
  ** live, the newest that made or resumed it says it has ended. */
  json_t *jobs = store_jobs_list(s, &e);
  int64_t job = -1, newest = -1;
  size_t i;
  json_t *j;
  json_array_foreach(jobs, i, j) {
    if (!job_targets_run(j, run)) continue;
    int64_t id = json_integer_value(json_object_get(j, "id"));
    if (newest < 1) newest = id;
    if (!job_live(j)) continue;
    Err e2 = {0};
    if (job < 1) job = id;
    else store_job_cancel(s, id, &e2);
  }
  json_decref(jobs);
  if (job < 1) job = newest;
  if (job < 1) http_error(rs, 409, "this run was not started by the server's job queue (stop it where it runs)",
                          json_pack("{s:I}", "run", (json_int_t)run));
  else cancel_job(s, rs, job);
}

/* ---- the worker ---- */


/* The last non-empty line of a log, for the job's error: only the log's last
** LOG_TAIL bytes are read, however long the log has grown. */
#define LOG_TAIL 65536
static void last_line(const char *path, char *out, size_t cap) {
  out[0] = '\0';
  Err e;
  uint64_t size;
  int fd = files_open_regular(path, &size, &e);
  if (fd < 0) return;
  char *buf = malloc(LOG_TAIL + 1);
  off_t from = size > LOG_TAIL ? (off_t)(size - LOG_TAIL) : 0;
  ssize_t n = buf ? pread(fd, buf, LOG_TAIL, from) : -1;
  close(fd);
  if (n <= 0) { free(buf); return; }
  buf[n] = '\0';
  for (ssize_t i = 0; i < n; i++)
    if (buf[i] == '\0') buf[i] = ' ';
  /* Lines end at '\n'; progress lines overwrite themselves with '\r'. */
  char *end = buf + n;
  while (end > buf && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' ')) *--end = '\0';
  char *start = end;
  while (start > buf && start[-1] != '\n' && start[-1] != '\r') start--;
  snprintf(out, cap, "%s", start);
  free(buf);
}

typedef struct Argv { char *v[64]; int n; } Argv;
static void arg(Argv *a, const char *s) { if (a->n < 62) a->v[a->n++] = strdup(s); }
static void args_free(Argv *a) { for (int i = 0; i < a->n; i++) free(a->v[i]); a->n = 0; }

/* What a tokenizer or prepare job makes: its output folder, removed again when the job
** fails so that the name is free for another try. */
_Static_assert(sizeof ((RegistryPlan *)0)->corpora / sizeof ((RegistryPlan *)0)->corpora[0] == APP_JOB_MAX_INPUTS,
               "a registry plan holds every input a job may name");
typedef struct JobPlan {
  char out_dir[WORKSPACE_PATH_MAX];
  RegistryPlan *reg;   /* what it reads, hashed before it runs; registered when it succeeds */
} JobPlan;

/* Every value on a job's command line is a resolved absolute path, a number, or a
** checked name, and it travels inside its flag's argument ("--flag=VALUE"), which the
** commands read as that flag's value whatever it starts with: no value from a request
** can become a flag, and no flag can swallow the next argument. */
static void arg_pair(Argv *av, const char *flag, const char *value) {
  size_t n = strlen(flag) + strlen(value) + 2;
  char *a = av->n < 62 ? malloc(n) : NULL;
  if (!a) return;
  snprintf(a, n, "%s=%s", flag, value);
  av->v[av->n++] = a;
}

/* Every job is handed over by its id: the child (maskd train, maskd tokenizer train or
** maskd prepare with --job) reads the description from the store and resolves its
** names inside the same folders (server/cli/job_read.h). */
static void job_id_args(Worker *w, int64_t job, Argv *av) {
  App *a = w->app;
  char id[32];
  snprintf(id, sizeof id, "%lld", (long long)job);
  arg_pair(av, "--db", a->db_path);
  arg_pair(av, "--job", id);
  arg_pair(av, "--work-dir", a->ws.work_root);
  if (a->ws.data_root) arg_pair(av, "--data-dir", a->ws.data_root);
}

/* A tokenizer or prepare job's output folder, made here before the child starts, so that
** the worker knows what the job made and removes it when the job fails; a name taken
** since the job was queued fails the job and removes nothing. The child writes into it. */
static int output_dir(Worker *w, const char *params, const char *kind, JobPlan *plan, Err *e) {
  json_t *p = json_loads(params, 0, NULL);
  if (!p) return err_set(e, "the job's description is not JSON");
  const char *name = json_string_value(json_object_get(p, "name"));
  int r = 0;
  if (workspace_output(&w->app->ws, kind, name ? name : "", plan->out_dir, sizeof plan->out_dir, e)) {
    plan->out_dir[0] = '\0';   /* not this job's: a failed job removes only what it made */
    r = -1;
  } else if (mkdir(plan->out_dir, 0700)) {
    plan->out_dir[0] = '\0';
    r = err_set(e, "cannot make the output folder: %s", strerror(errno));
  }
  json_decref(p);
  return r;
}

/* 1 when a train job's description is a fine-tuning one (it has a "task"): maskd finetune runs it. */
static int job_is_finetune(const char *params) {
  json_t *p = params ? json_loads(params, 0, NULL) : NULL;
  int r = json_object_get(p, "task") != NULL;
  json_decref(p);
  return r;
}

/* The command line for a job; on failure e says why and the job fails with it. */
static int job_argv(Worker *w, int64_t job, const char *kind, const char *params, Argv *av, JobPlan *plan, Err *e) {
  int train = !strcmp(kind, "train"), tokenizer = !strcmp(kind, "tokenizer"), prepare = !strcmp(kind, "prepare");
  int rc = 0;
  arg(av, w->app->exe);
  int finetune = train && job_is_finetune(params);
  if (finetune) arg(av, "finetune");
  else if (train) arg(av, "train");
  else if (tokenizer) { arg(av, "tokenizer"); arg(av, "train"); }
  else if (prepare) arg(av, "prepare");
  else rc = err_set(e, "unknown job kind %s", kind);
  if (rc == 0) {
    job_id_args(w, job, av);
    /* maskd train and maskd prepare log no progress line; the tokenizer trainer's goes to the job's log. */
    if (!tokenizer) arg(av, "--quiet");
    /* maskd train --job refuses hosts outside this list (none without it), whatever the
    ** job was queued under: a job queued before a restart is checked against today's. */
    if (train && !finetune && w->app->job_hosts) arg_pair(av, "--job-hosts", w->app->job_hosts);
    if (!train) rc = output_dir(w, params, tokenizer ? "tokenizers" : "datasets", plan, e);
    if (!train && rc == 0) {
      plan->reg = malloc(sizeof *plan->reg);
      rc = !plan->reg ? err_setk(e, ERR_NOMEM, "out of memory")
                      : registry_plan(&w->app->ws, kind, params, plan->reg, e) < 0 ? -1 : 0;
    }
  }
  av->v[av->n] = NULL;
  return rc;
}

/* Removes a failed job's output folder (flat: a tokenizer.json, or shards and a
** manifest) and the temporaries its command may have left beside it when it was
** killed (".NAME.tmp-XXXXXX", engine/core/files.h), so nothing half-written stays. */
static void remove_output(const char *dir) {
  if (!dir[0]) return;
  files_remove_flat_dir(dir);
  char parent[WORKSPACE_PATH_MAX];
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (!slash) return;
  *slash = '\0';
  const char *name = slash + 1;
  size_t n = strlen(name);
  DIR *d = opendir(parent);
  struct dirent *ent;
  while (d && (ent = readdir(d))) {
    if (!files_is_temp_name(ent->d_name) || strncmp(ent->d_name + 1, name, n) || strncmp(ent->d_name + 1 + n, ".tmp-", 5)) continue;
    char p[WORKSPACE_PATH_MAX + 300];
    snprintf(p, sizeof p, "%s/%s", parent, ent->d_name);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) files_remove_flat_dir(p);
    else unlink(p);
  }
  if (d) closedir(d);
}

/* 1 when name (n bytes) is the output name of a job still running (a live server's worker runs it). */
static int name_running(json_t *running, const char *name, size_t n) {
  size_t i;
  json_t *j;
  json_array_foreach(running, i, j) {
    json_t *p = job_params(j);
    const char *jn = json_string_value(json_object_get(p, "name"));
    int same = jn && strlen(jn) == n && !strncmp(jn, name, n);
    json_decref(p);
    if (same) return 1;
  }
  return 0;
}

/* At start-up this worker runs no job yet: what a server that died left in the work
** folder's output folders goes (temporaries, and output folders with no finished output
** in them), except the names of jobs another live server's worker is running. A finished
** folder the store does not know (an older server's, or one the command line made) is
** registered with source null (registry_adopt). */
static void sweep_outputs(const Workspace *ws, Store *s) {
  Err e = {0};
  json_t *jobs = store_jobs_list(s, &e), *running = json_array();
  size_t i;
  json_t *j;
  StoreStatus js;
  json_array_foreach(jobs, i, j)
    if (!store_status_parse(json_string_value(json_object_get(j, "status")), &js) && js == STORE_STATUS_RUNNING)
      json_array_append(running, j);
  json_decref(jobs);
  static const char *const kinds[] = {"tokenizers", "datasets"};
  static const char *const done_file[] = {"tokenizer.json", "manifest.json"};
  for (int k = 0; k < 2; k++) {
    char dir[WORKSPACE_PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", ws->work_root, kinds[k]);
    DIR *d = opendir(dir);
    struct dirent *ent;
    while (d && (ent = readdir(d))) {
      if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, "..")) continue;
      char p[WORKSPACE_PATH_MAX + 300], f[WORKSPACE_PATH_MAX + 400];
      snprintf(p, sizeof p, "%s/%s", dir, ent->d_name);
      struct stat st;
      if (lstat(p, &st) != 0) continue;
      int temp = files_is_temp_name(ent->d_name);
      const char *name = temp ? ent->d_name + 1 : ent->d_name;
      if (name_running(running, name, temp ? strlen(name) - 11 : strlen(name))) continue;
      if (temp) {
        if (S_ISDIR(st.st_mode)) files_remove_flat_dir(p);
        else unlink(p);
        continue;
      }
      if (!S_ISDIR(st.st_mode) || !workspace_name_ok(ent->d_name)) continue;
      snprintf(f, sizeof f, "%s/%s", p, done_file[k]);
      if (lstat(f, &st) == 0) {   /* finished: kept, and registered when the store does not know it */
        if (registry_adopt(s, kinds[k], ent->d_name, p, &e))
          fprintf(stderr, "maskd serve: %s/%s is not registered: %s\n", kinds[k], ent->d_name, e.msg);
        continue;
      }
      files_remove_flat_dir(p);
    }
    if (d) closedir(d);
  }
  json_decref(running);
}

/* Runs one claimed job to its end. */
/* The status in a job's or run's JSON; STORE_STATUS_COUNT when absent or unknown. */
static StoreStatus status_of(const json_t *o) {
  StoreStatus st = STORE_STATUS_COUNT;
  store_status_parse(json_string_value(json_object_get(o, "status")), &st);
  return st;
}

/* Starts a job's process: argv with stdout and stderr into log, stdin /dev/null.
** 0 and *pid, or an errno (the child's exec failed, or fork did).
** A server killed outright (kill -9, the OOM killer) cannot stop its job: the child
** would train on as an orphan nothing can cancel (the restarted server marks the job
** interrupted) beside the new server's jobs. So the child asks for SIGTERM when the
** server dies (maskd train then checkpoints at the step boundary and marks its run
** interrupted, ready to resume; prepare and tokenizer jobs stop too). The death signal
** follows the thread that forked, this worker, which outlives its child. The server
** may die before the request is made: getppid() then no longer names it, and the
** child goes without running anything. Hence fork, not posix_spawn, and between fork
** and exec only async-signal-safe calls (the server has other threads). */
static int spawn_job(char *const *argv, const char *log, pid_t *pid) {
  /* The server blocks SIGINT/SIGTERM for sigwait(); the child must get them back. */
  sigset_t none;
  sigemptyset(&none);
  pid_t server = getpid();
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC)) return errno;
  pid_t c = fork();
  if (c == 0) {
    int e = 0;
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) e = errno;
    else if (getppid() != server) _exit(1);
    int fd = e ? -1 : open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = fd < 0 ? -1 : open("/dev/null", O_RDONLY);
    if (!e && (fd < 0 || in < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || dup2(in, 0) < 0)) e = errno;
    if (!e) {
      if (fd > 2) close(fd);
      if (in > 2) close(in);
      sigprocmask(SIG_SETMASK, &none, NULL);
      execv(argv[0], argv);
      e = errno;
    }
    ssize_t w = write(pfd[1], &e, sizeof e);
    _exit(w < 0 ? 126 : 127);
  }
  int fork_errno = errno;
  close(pfd[1]);
  if (c < 0) { close(pfd[0]); return fork_errno; }
  int child_errno = 0;
  ssize_t got;
  do got = read(pfd[0], &child_errno, sizeof child_errno);   /* 0 bytes: exec succeeded */
  while (got < 0 && errno == EINTR);
  close(pfd[0]);
  if (got > 0) {
    waitpid(c, NULL, 0);
    return child_errno ? child_errno : EIO;
  }
  *pid = c;
  return 0;
}

/* A resume queued at start-up for a run whose process still lived (the server was killed
** outright and its job's maskd train, sent SIGTERM by the kernel, was still checkpointing)
** waits for that process to end before it starts: maskd train --resume refuses a running
** run, and the run would stay interrupted with nothing to resume it. It waits while the
** run says "running" and its process lives (store_runs_recover marks a dead one's run
** interrupted), polling as a running job does; cancelled or stopping, the job ends here.
** 1 when the job has ended here (cancelled, the server stopping, its run done: nothing
** left to train, or failed or cancelled: not resumed, as at start-up), else 0: start it.
** Other jobs go on at once. */
static int wait_for_old_process(Worker *w, Store *s, int64_t job, const char *params) {
  json_t *p = json_loads(params, 0, NULL);
  const char *resumed = json_string_value(json_object_get(p, "resume"));
  Err e = {0};
  int64_t run = resumed && json_object_get(p, "requeued_from") ? store_run_find(s, resumed, &e) : 0;
  json_decref(p);
  if (run < 1) return 0;
  StoreStatus st;
  for (int said = 0;; said = 1) {
    Err e2 = {0};
    store_runs_recover(s, NULL, &e2);
    json_t *rj = store_run_get(s, run, &e2);
    st = status_of(rj);
    json_decref(rj);
    if (st != STORE_STATUS_RUNNING) break;
    if (!said) fprintf(stderr, "maskd serve: job %lld waits for run %lld's process to stop\n", (long long)job, (long long)run);
    if (store_job_cancel_requested(s, job, &e2) == 1) { store_job_finish(s, job, STORE_STATUS_CANCELLED, NULL, &e2); return 1; }
    if (atomic_load(&w->stop)) { store_job_finish(s, job, STORE_STATUS_INTERRUPTED, SERVER_STOPPED, &e2); return 1; }
    usleep(200 * 1000);
  }
  if (st == STORE_STATUS_INTERRUPTED) return 0;
  if (st == STORE_STATUS_DONE) {
    store_job_finish(s, job, STORE_STATUS_DONE, NULL, &e);   /* its process trained the last step */
  } else {   /* failed or cancelled: as requeue_interrupted leaves such a run, not resumed */
    char why[96];
    snprintf(why, sizeof why, "not resumed: its run %lld is %s", (long long)run,
             st == STORE_STATUS_COUNT ? "gone" : store_status_name(st));
    store_job_finish(s, job, STORE_STATUS_FAILED, why, &e);
  }
  return 1;
}

static void run_job(Worker *w, Store *s, int64_t job, const char *kind, const char *params) {
  Err e = {0};
  if (!strcmp(kind, "train") && wait_for_old_process(w, s, job, params)) return;
  Argv av = {{0}, 0};
  char log[WORKSPACE_PATH_MAX], logname[64];
  snprintf(logname, sizeof logname, "job-%lld.log", (long long)job);
  JobPlan plan;
  memset(&plan, 0, sizeof plan);
  if (workspace_job_file(&w->app->ws, logname, log, sizeof log, &e) || job_argv(w, job, kind, params, &av, &plan, &e)) {
    store_job_finish(s, job, STORE_STATUS_FAILED, e.msg, &e);
    args_free(&av);
    remove_output(plan.out_dir);
    free(plan.reg);
    return;
  }
  pid_t pid = 0;
  int err = spawn_job(av.v, log, &pid);
  args_free(&av);
  if (err) {
    store_job_finish(s, job, STORE_STATUS_FAILED, strerror(err), &e);
    remove_output(plan.out_dir);
    free(plan.reg);
    return;
  }
  int train = !strcmp(kind, "train"), cancelled = 0, killed = 0, status = 0, polls = 0;
  double stop_sent = 0;
  int64_t run = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (train && run < 1) {  /* maskd train links its run to the job when it makes (or resumes) it */
      Err e2 = {0};
      run = store_job_run(s, job, &e2);
    }
    if (run > 0 && ++polls % 5 == 0) {  /* tokens/s of the newest step, for /metrics */
      Err e2 = {0};
      json_t *rj = store_run_get(s, run, &e2);
      json_int_t step = json_integer_value(json_object_get(rj, "step"));
      json_t *m = rj ? store_run_metrics(s, run, step > 0 ? step - 1 : 0, &e2) : NULL;
      json_t *steps = json_object_get(m, "steps");
      json_t *tps = json_object_get(json_array_get(steps, json_array_size(steps) - 1), "tokens_per_s");
      if (json_is_number(tps)) metrics_training(w->app->metrics, json_number_value(tps));
      json_decref(m);
      json_decref(rj);
    }
    if (!cancelled && (store_job_cancel_requested(s, job, &e) == 1 || atomic_load(&w->stop))) {
      cancelled = 1 + atomic_load(&w->stop);
      stop_sent = now_wall();
      /* maskd train checkpoints at the step boundary, prepare stops at the next line,
      ** tokenizer train ends at once; none leaves a file half-written. */
      kill(pid, SIGTERM);
    }
    if (cancelled && !killed && atomic_load(&w->stop) && now_wall() - stop_sent > w->app->job_stop_grace) {
      killed = 1;   /* the server is stopping and the job did not: it goes now */
      kill(pid, SIGKILL);
    }
    usleep(cancelled ? 50 * 1000 : 200 * 1000);
  }
  /* A Ctrl-C at a terminal reaches the job's process too (one process group): it can stop
  ** and be reaped between two looks at w->stop, and is then the server's stop all the same. */
  if (!cancelled && atomic_load(&w->stop) && (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 130)))
    cancelled = 2;
  if (train) { Err e2 = {0}; run = store_job_run(s, job, &e2); }   /* it may have linked it since the last poll */
  /* A killed maskd train could not mark its run: the run says "running" with a pid that is
  ** gone. Killed by this server past the grace period, or by anyone else (the OOM killer, a
  ** kill -9): the run becomes "interrupted", so it can be resumed; it stayed "running",
  ** refusing cancel and resume, until the server restarted. Runs whose process lives on
  ** (a rank still winding down) are left to it. */
  if (run > 0) { Err e2 = {0}; store_runs_recover(s, NULL, &e2); }
  metrics_training(w->app->metrics, 0);
  char why[512];
  last_line(log, why, sizeof why);
  if (WIFSIGNALED(status))   /* its last line is a progress line, not why it ended */
    snprintf(why, sizeof why, "the job's process was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  /* A cancel that reached a run after its last step changed nothing: the run is done (its
  ** last revision pushed) and stays so, and so does the job; one that failed stays failed. */
  StoreStatus run_status = STORE_STATUS_COUNT;
  if (cancelled == 1 && run > 0) {
    Err e2 = {0};
    json_t *rj = store_run_get(s, run, &e2);
    run_status = status_of(rj);
    json_decref(rj);
  }
  /* Exit status 130 is maskd train stopping for the cancel: then the job is cancelled, and
  ** the run too if this job had it going; a run it never started (a resume of a failed run
  ** stopped before its first step) stays as it was. */
  int stopped = WIFEXITED(status) && WEXITSTATUS(status) == 130;
  if (cancelled == 1 && !stopped && run_status == STORE_STATUS_DONE) {
    store_job_finish(s, job, STORE_STATUS_DONE, NULL, &e);
  } else if (cancelled == 1 && !stopped && run_status == STORE_STATUS_FAILED) {
    store_job_finish(s, job, STORE_STATUS_FAILED, why[0] ? why : "the job's process failed", &e);
  } else if (cancelled == 1) {
    if (run > 0 && (run_status == STORE_STATUS_RUNNING || run_status == STORE_STATUS_INTERRUPTED || run_status == STORE_STATUS_COUNT))
      store_run_set_status(s, run, STORE_STATUS_CANCELLED, "cancelled over HTTP", &e);
    store_job_finish(s, job, STORE_STATUS_CANCELLED, NULL, &e);
  } else if (cancelled == 2) {
    store_job_finish(s, job, STORE_STATUS_INTERRUPTED,
                     killed ? SERVER_STOPPED " (the job was killed after the grace period)" : SERVER_STOPPED, &e);
  } else if (stopped) {   /* a signal to the job's own process (its run checkpointed): resumable, not failed */
    store_job_finish(s, job, STORE_STATUS_INTERRUPTED, why[0] ? why : "the job's process was stopped", &e);
  } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    /* What a tokenizer or prepare job made is registered, or the job fails with why. */
    Err re = {0};
    if (plan.reg && registry_register(s, plan.reg, plan.out_dir, job, &re)) {
      store_job_finish(s, job, STORE_STATUS_FAILED, re.msg, &e);
    } else {
      store_job_finish(s, job, STORE_STATUS_DONE, NULL, &e);
      plan.out_dir[0] = '\0';  /* kept: the job made it */
    }
  } else {
    store_job_finish(s, job, STORE_STATUS_FAILED, why[0] ? why : "the job's process failed", &e);
  }
  remove_output(plan.out_dir);
  free(plan.reg);
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  while (!atomic_load(&w->stop)) {
    Err e = {0};
    /* The worker thread's own connection, kept between polls (closed when it ends). */
    Store *s = app_thread_store(w->app, &e);
    if (!s) { fprintf(stderr, "maskd serve: worker: %s\n", e.msg); sleep(1); continue; }
    int64_t job;
    char *kind = NULL, *params = NULL;
    int rc = store_job_claim(s, &job, &kind, &params, &e);
    if (rc == 0) run_job(w, s, job, kind, params);
    else if (rc < 0) fprintf(stderr, "maskd serve: worker: %s\n", e.msg);
    free(kind);
    free(params);
    if (rc != 0)
      for (int i = 0; i < 5 && !atomic_load(&w->stop); i++) usleep(100 * 1000);
  }
  return NULL;
}

/* A training job the server's stop or death interrupted (j, its row), whose policy is
** resume, queued again as a resume of its run. A run whose process still lives
** (status still "running": the server died, its maskd train is checkpointing on the
** SIGTERM its death sent) is queued too, and the resume waits for that process to end;
** a run already ended needs nothing. */
static void requeue_job(App *a, Store *s, json_t *j) {
  int64_t job = json_integer_value(json_object_get(j, "id"));
  Err e = {0};
  json_t *p = job_params(j);
  const char *policy = json_string_value(json_object_get(p, "on_restart"));
  int resume = policy ? !strcmp(policy, "resume") : a->on_restart_resume;
  /* A new run is linked to its job in the transaction that makes it: a job with no run
  ** made none. A resume job names its run by id. */
  int64_t run = json_integer_value(json_object_get(j, "run"));
  const char *resumed = json_string_value(json_object_get(p, "resume"));
  if (resume && run < 1 && resumed) run = store_run_find(s, resumed, &e);  /* it died before it linked the run */
  json_t *next = NULL;
  if (!resume) {
  } else if (run > 0 && json_object_get(p, "task")) {
    err_set(&e, "a fine-tuning run is not resumed (its epochs so far are kept; submit the job again)");
  } else if (run > 0) {
    json_t *r = store_run_get(s, run, &e);
    const char *st = json_string_value(json_object_get(r, "status")) ?: "";
    /* Still running: its process outlived the server (killed outright) and is stopping
    ** on its SIGTERM; the resume waits for it (wait_for_old_process). */
    if (status_of(r) == STORE_STATUS_INTERRUPTED || status_of(r) == STORE_STATUS_RUNNING) {
      char id[32];
      snprintf(id, sizeof id, "%lld", (long long)run);
      next = json_pack("{s:s, s:s, s:I}", "resume", id, "on_restart", "resume", "requeued_from", (json_int_t)job);
    } else {
      err_set(&e, "its run %lld is %s", (long long)run, st[0] ? st : "gone");
    }
    json_decref(r);
  } else if (p) {  /* no run was made yet: the same description, from the start */
    next = json_copy(p);
    json_object_set_new(next, "on_restart", json_string("resume"));
    json_object_set_new(next, "requeued_from", json_integer(job));
  }
  char *text = next ? json_dumps(next, JSON_COMPACT) : NULL;
  int64_t id = text ? store_job_submit(s, "train", text, &e) : 0;
  if (id > 0) fprintf(stderr, "maskd serve: job %lld was interrupted; queued again as job %lld\n", (long long)job, (long long)id);
  else if (resume) fprintf(stderr, "maskd serve: job %lld was interrupted and is not resumed%s%s\n", (long long)job,
                           e.msg[0] ? ": " : "", e.msg);
  free(text);
  json_decref(next);
  json_decref(p);
}

/* 1 when a job of `jobs` was queued again from job id (its "requeued_from"). */
static int requeued_already(json_t *jobs, int64_t id) {
  size_t i;
  json_t *j;
  json_array_foreach(jobs, i, j) {
    json_t *p = job_params(j);
    int hit = json_integer_value(json_object_get(p, "requeued_from")) == id;
    json_decref(p);
    if (hit) return 1;
  }
  return 0;
}

/* After recovery, the training jobs a server's end interrupted go to requeue_job: those
** that were running (in `before`) and are now "interrupted" (the server died), and those
** a stop (SIGTERM, SIGINT) marked interrupted, whose run is still interrupted; each once:
** none that a job was already queued from. A stop leaves the choice to the next start,
** as a death does: its --on-restart, or the job's own "on_restart". */
static void requeue_interrupted(App *a, Store *s, json_t *before) {
  size_t i;
  json_t *j;
  json_array_foreach(before, i, j) {
    if (strcmp(json_string_value(json_object_get(j, "kind")) ?: "", "train")) continue;
    int64_t id = json_integer_value(json_object_get(j, "id"));
    Err e = {0};
    if (status_of(j) == STORE_STATUS_RUNNING) {
      json_t *now = store_job_get(s, id, &e);
      int interrupted = status_of(now) == STORE_STATUS_INTERRUPTED;
      json_decref(now);
      if (interrupted) requeue_job(a, s, j);
    } else if (status_of(j) == STORE_STATUS_INTERRUPTED &&
               !strncmp(json_string_value(json_object_get(j, "error")) ?: "", SERVER_STOPPED, strlen(SERVER_STOPPED)) &&
               !requeued_already(before, id)) {
      int64_t run = json_integer_value(json_object_get(j, "run"));
      json_t *r = run > 0 ? store_run_get(s, run, &e) : NULL;
      int open = run < 1 || status_of(r) == STORE_STATUS_INTERRUPTED;   /* resumed by hand since, or gone: left */
      json_decref(r);
      /* Only the run's newest job: one resumed by hand since and stopped again is the one. */
      size_t k;
      json_t *later;
      json_array_foreach(before, k, later)
        if (run > 0 && json_integer_value(json_object_get(later, "id")) > id && job_targets_run(later, run)) open = 0;
      if (open) requeue_job(a, s, j);
    }
  }
}

Worker *worker_start(App *a, Err *err) {
  Worker *w = calloc(1, sizeof *w);
  if (!w) { err_set(err, "out of memory"); return NULL; }
  w->app = a;
  Store *s = store_open(a->db_path, err);
  if (!s) { free(w); return NULL; }
  json_t *before = store_jobs_list(s, err);
  int n = 0;
  store_jobs_recover(s, &n, err);
  store_runs_recover(s, &n, err);
  requeue_interrupted(a, s, before);
  json_decref(before);
  sweep_outputs(&a->ws, s);
  store_close(s);
  if (pthread_create(&w->thread, NULL, worker_main, w)) { err_set(err, "cannot start the worker"); free(w); return NULL; }
  return w;
}

void worker_stop(Worker *w) {
  if (!w) return;
  atomic_store(&w->stop, 1);
  pthread_join(w->thread, NULL);
  free(w);
}
