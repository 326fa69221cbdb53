/* A queued training job's description, from the store (server/cli/train_job.h). */
#include "server/cli/train_job.h"

#include <stdio.h>
#include <string.h>

#include "server/app/workspace.h"

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

int train_job_read(Store *db, int64_t job, const char *data_dir, const char *work_dir, RunConfig *rc, char *resume,
                   size_t cap, Err *err) {
  resume[0] = '\0';
  json_t *j = store_job_get(db, job, err);
  if (!j) return -1;
  const char *kind = json_string_value(json_object_get(j, "kind"));
  StoreStatus st = STORE_STATUS_QUEUED;
  store_status_parse(json_string_value(json_object_get(j, "status")), &st);
  json_t *p = json_object_get(j, "params");
  json_t *res = json_object_get(p, "resume");
  int r = 0;
  if (!kind || strcmp(kind, "train"))
    r = err_set(err, "job %lld is a %s job, not a training job", (long long)job, kind ? kind : "?");
  else if (st != STORE_STATUS_RUNNING)
    r = err_set(err, "job %lld is %s; only the server's worker runs a job, once it has claimed it", (long long)job,
                store_status_name(st));
  else if (!json_is_object(p))
    r = err_set(err, "job %lld has no description", (long long)job);
  else if (res) {
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
  json_decref(j);
  return r;
}
