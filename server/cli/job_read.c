/* A queued job's description, from the store, for the process that runs it (server/cli/job_read.h). */
#include "server/cli/job_read.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/commands.h"

int job_read_id(const char *text, const char *work_dir, int64_t *job, Err *err) {
  long id;
  if (cli_parse_long(text, 1, LONG_MAX, &id)) return err_setk(err, ERR_INVALID, "--job: \"%s\" is not a job id", text);
  if (!work_dir) return err_setk(err, ERR_INVALID, "--job needs --work-dir (the server's work folder)");
  *job = id;
  return 0;
}

/* Job `job`'s description (a new reference) when it is a `kind` job that a worker has
** claimed, else NULL with why; what names the kind in words ("a training job"). Only the
** worker runs a job, once: a queued or ended job is refused. */
static json_t *claimed(Store *db, int64_t job, const char *kind, const char *what, Err *err) {
  json_t *j = store_job_get(db, job, err);
  if (!j) return NULL;
  const char *k = json_string_value(json_object_get(j, "kind"));
  StoreStatus st = STORE_STATUS_QUEUED;
  store_status_parse(json_string_value(json_object_get(j, "status")), &st);
  json_t *p = json_object_get(j, "params");
  if (!k || strcmp(k, kind)) {
    err_setk(err, ERR_INVALID, "job %lld is a %s job, not %s", (long long)job, k ? k : "?", what);
    p = NULL;
  } else if (st != STORE_STATUS_RUNNING) {
    err_setk(err, ERR_CONFLICT, "job %lld is %s; only the server's worker runs a job, once it has claimed it", (long long)job,
             store_status_name(st));
    p = NULL;
  } else if (!json_is_object(p)) {
    err_setk(err, ERR_INVALID, "job %lld has no description", (long long)job);
    p = NULL;
  }
  json_incref(p);
  json_decref(j);
  return p;
}

/* The name in a string, as the handler checked it: not empty, no NUL inside; NULL with why. */
static const char *name_of(const json_t *v, const char *field, Err *err) {
  const char *s = json_string_value(v);
  if (!s || !*s || json_string_length(v) != strlen(s)) {
    err_setk(err, ERR_INVALID, "%s: not a name", field);
    return NULL;
  }
  return s;
}

/* An integer field in [lo, hi] into *out; left as it is when the field is absent and optional. */
static int int_field(const json_t *p, const char *field, long lo, long hi, int required, long *out, Err *err) {
  json_t *v = json_object_get(p, field);
  if (!v && !required) return 0;
  if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
    return err_setk(err, ERR_INVALID, "%s: must be an integer in [%ld, %ld]", field, lo, hi);
  *out = (long)json_integer_value(v);
  return 0;
}

/* The description's names, resolved again now: what the submission saw may have changed since. */
static int resolve_names(const char *data_dir, const char *work_dir, RunConfig *rc, Err *err) {
  Workspace ws;
  if (workspace_open(&ws, data_dir, work_dir, err)) return -1;
  struct {
    const char *field;
    char *value;
    int (*fn)(const Workspace *, const char *, const char *, char *, size_t, Err *);
  } names[] = {
    {"tokenizer", rc->tokenizer, workspace_tokenizer},
    {"train", rc->train, workspace_dataset},
    {"validation", rc->validation, workspace_dataset},
    {"config", rc->config, workspace_config},
  };
  int r = 0;
  char path[WORKSPACE_PATH_MAX];
  for (size_t i = 0; r == 0 && i < sizeof names / sizeof names[0]; i++) {
    if (!names[i].value[0] || (!strcmp(names[i].field, "config") && run_config_is_preset(rc->config))) continue;
    if (names[i].fn(&ws, names[i].field, names[i].value, path, sizeof path, err)) r = -1;
    else if (strlen(path) >= RUN_PATH_MAX) r = err_set(err, "%s: its path is too long", names[i].field);
    else strcpy(names[i].value, path);
  }
  workspace_close(&ws);
  return r;
}

int job_read_train(Store *db, int64_t job, const char *data_dir, const char *work_dir, RunConfig *rc, char *resume,
                   size_t cap, Err *err) {
  resume[0] = '\0';
  json_t *p = claimed(db, job, "train", "a training job", err);
  if (!p) return -1;
  if (json_object_get(p, "task")) {
    json_decref(p);
    return err_setk(err, ERR_INVALID, "job %lld is a fine-tuning job (maskd finetune --job runs it)", (long long)job);
  }
  json_t *res = json_object_get(p, "resume");
  int r = 0;
  if (res) {
    /* The submission stored the run's id: digits, which cannot become a flag or a name. */
    const char *id = json_string_value(res);
    if (!id || !*id || strspn(id, "0123456789") != strlen(id) || strlen(id) >= cap) r = err_set(err, "resume: not a run id");
    else snprintf(resume, cap, "%s", id);
  } else {
    /* "on_restart" and "requeued_from" are the queue's, not the run's. */
    json_object_del(p, "on_restart");
    json_object_del(p, "requeued_from");
    r = run_config_apply_object(rc, p, err);
    if (r == 0) {
      rc->out[0] = '\0';
      r = resolve_names(data_dir, work_dir, rc, err);
    }
  }
  json_decref(p);
  return r;
}

int job_read_finetune(Store *db, int64_t job, const char *data_dir, const char *work_dir, json_t **params, Err *err) {
  *params = NULL;
  json_t *p = claimed(db, job, "train", "a fine-tuning job", err);
  if (!p) return -1;
  const char *task = json_string_value(json_object_get(p, "task"));
  if (!task || strcmp(task, JOB_TASK_TEXT_CLASSIFICATION)) {
    json_decref(p);
    return err_setk(err, ERR_INVALID, "job %lld is a training job, not a fine-tuning job (maskd train --job runs it)",
                    (long long)job);
  }
  json_object_del(p, "on_restart");
  json_object_del(p, "requeued_from");
  Workspace ws;
  int r = workspace_open(&ws, data_dir, work_dir, err), opened = r == 0;
  static const char *const files[] = JOB_FINETUNE_FILES;
  char path[WORKSPACE_PATH_MAX];
  for (size_t i = 0; r == 0 && i < sizeof files / sizeof files[0]; i++) {
    json_t *v = json_object_get(p, files[i]);
    if (!v) continue;
    const char *name = name_of(v, files[i], err);
    if (!name || workspace_corpus(&ws, files[i], name, path, sizeof path, err)) r = -1;
    else json_object_set_new(p, files[i], json_string(path));
  }
  if (opened) workspace_close(&ws);
  if (r) { json_decref(p); return -1; }
  *params = p;
  return 0;
}

/* A tokenizer job's corpora: "input", one name or a list of them, each a corpus in the data folder. */
static int tokenizer_inputs(const Workspace *ws, const json_t *in, JobReadTokenizer *t, Err *err) {
  json_t *list = json_is_string(in) ? json_pack("[O]", in) : json_incref((json_t *)in);
  if (!json_is_array(list) || json_array_size(list) < 1 || json_array_size(list) > APP_JOB_MAX_INPUTS) {
    json_decref(list);
    return err_setk(err, ERR_INVALID, "input: a corpus name or a list of 1 to %d of them", APP_JOB_MAX_INPUTS);
  }
  int r = 0;
  size_t i;
  json_t *x;
  char path[WORKSPACE_PATH_MAX];
  json_array_foreach(list, i, x) {
    const char *name = name_of(x, "input", err);
    if (!name || workspace_corpus(ws, "input", name, path, sizeof path, err)) { r = -1; break; }
    if (!(t->inputs[t->n_inputs] = strdup(path))) { r = err_setk(err, ERR_NOMEM, "out of memory"); break; }
    t->n_inputs++;
  }
  json_decref(list);
  return r;
}

/* A tokenizer job's fields, checked as the handler checked them and resolved in ws. */
static int tokenizer_fields(const Workspace *ws, const json_t *d, JobReadTokenizer *t, Err *err) {
  if (tokenizer_inputs(ws, json_object_get(d, "input"), t, err)) return -1;
  long vocab = 0;
  if (int_field(d, "vocab_size", APP_JOB_VOCAB_MIN, APP_JOB_VOCAB_MAX, 1, &vocab, err)) return -1;
  t->vocab_size = (int)vocab;
  const char *name = name_of(json_object_get(d, "name"), "name", err);
  char dir[WORKSPACE_PATH_MAX];
  if (!name || workspace_job_output(ws, "tokenizers", name, dir, sizeof dir, err)) return -1;
  if ((size_t)snprintf(t->out, sizeof t->out, "%s/tokenizer.json", dir) >= sizeof t->out)
    return err_setk(err, ERR_INVALID, "name: the output folder's path is too long");
  return 0;
}

int job_read_tokenizer(Store *db, int64_t job, const char *data_dir, const char *work_dir, JobReadTokenizer *t,
                       Err *err) {
  memset(t, 0, sizeof *t);
  json_t *d = claimed(db, job, "tokenizer", "a tokenizer job", err);
  if (!d) return -1;
  Workspace ws;
  int r = workspace_open(&ws, data_dir, work_dir, err);
  if (r == 0) {
    r = tokenizer_fields(&ws, d, t, err);
    workspace_close(&ws);
  }
  json_decref(d);
  return r;
}

void job_read_tokenizer_free(JobReadTokenizer *t) {
  for (int i = 0; i < t->n_inputs; i++) free(t->inputs[i]);
  t->n_inputs = 0;
}

/* A prepare job's fields, checked as the handler checked them and resolved in ws. */
static int prepare_fields(const Workspace *ws, const json_t *d, JobReadPrepare *p, Err *err) {
  const char *tok = name_of(json_object_get(d, "tokenizer"), "tokenizer", err);
  if (!tok || workspace_tokenizer(ws, "tokenizer", tok, p->tokenizer, sizeof p->tokenizer, err)) return -1;
  const char *in = name_of(json_object_get(d, "input"), "input", err);
  if (!in || workspace_corpus(ws, "input", in, p->input, sizeof p->input, err)) return -1;
  json_t *split = json_object_get(d, "split");
  const char *sp = split ? name_of(split, "split", err) : "train";
  if (!sp) return -1;
  if (!workspace_name_ok(sp)) return err_setk(err, ERR_INVALID, "split: not a name");
  snprintf(p->split, sizeof p->split, "%s", sp);
  if (int_field(d, "seq_len", APP_JOB_SEQ_LEN_MIN, APP_JOB_SEQ_LEN_MAX, 0, &p->seq_len, err)) return -1;
  const char *name = name_of(json_object_get(d, "name"), "name", err);
  if (!name || workspace_job_output(ws, "datasets", name, p->out, sizeof p->out, err)) return -1;
  return 0;
}

int job_read_prepare(Store *db, int64_t job, const char *data_dir, const char *work_dir, JobReadPrepare *p, Err *err) {
  memset(p, 0, sizeof *p);
  json_t *d = claimed(db, job, "prepare", "a prepare job", err);
  if (!d) return -1;
  Workspace ws;
  int r = workspace_open(&ws, data_dir, work_dir, err);
  if (r == 0) {
    r = prepare_fields(&ws, d, p, err);
    workspace_close(&ws);
  }
  json_decref(d);
  return r;
}
