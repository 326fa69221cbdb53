/* The store's runs: training and fine-tuning runs, their status, progress,
** results and per-step and per-epoch metrics (see store.h). */
#include "store/store.h"
#include "store/store_db.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/now.h"

/* A new run; with job > 0 that job, which must be running, is linked to it in the same transaction. */
static int64_t run_create(Store *s, int64_t job, const char *name, const char *config_json, Err *err) {
  if (store_check_run_name(name, err) || sdb_check_json_object("run config", config_json, err)) return -1;
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO runs(name, config, status, created) VALUES (?, ?, 'created', ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, config_json, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "run")) return sdb_rollback(s);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (job > 0) {
    st = sdb_prep(s, "UPDATE jobs SET run_id = ? WHERE id = ? AND status = 'running'", err);
    if (!st) return sdb_rollback(s);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, job);
    if (sdb_step_done(s, st, err, "job")) return sdb_rollback(s);
    if (sqlite3_changes(s->db) != 1) { err_setk(err, ERR_CONFLICT, "job %lld does not exist or is not running", (long long)job); return sdb_rollback(s); }
  }
  if (sdb_commit(s, err)) return -1;
  return id;
}

int64_t store_run_create(Store *s, const char *name, const char *config_json, Err *err) {
  return run_create(s, 0, name, config_json, err);
}

int64_t store_job_run_create(Store *s, int64_t job, const char *name, const char *config_json, Err *err) {
  if (job < 1) return err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job);
  return run_create(s, job, name, config_json, err);
}

/* Runs one UPDATE on a single row in its own transaction; "what N does not exist" when no row changed. */
int sdb_update_one(Store *s, sqlite3_stmt *st, const char *what, int64_t id, Err *err) {
  if (!st) return sdb_rollback(s);
  if (sdb_step_done(s, st, err, what)) return sdb_rollback(s);
  if (sqlite3_changes(s->db) != 1) { err_setk(err, ERR_NOT_FOUND, "%s %lld does not exist", what, (long long)id); return sdb_rollback(s); }
  return sdb_commit(s, err);
}

int store_run_set_status(Store *s, int64_t run, StoreStatus status, const char *error, Err *err) {
  if (status != STORE_STATUS_RUNNING && !store_status_ended(status))
    return err_setk(err, ERR_INVALID, "run status \"%s\": expected running, done, failed, interrupted or cancelled", store_status_name(status));
  if (sdb_begin(s, err)) return -1;
  int running = status == STORE_STATUS_RUNNING;
  sqlite3_stmt *st = sdb_prep(s,
                          running ? "UPDATE runs SET status = ?1, started = COALESCE(started, ?2), claimed = ?2, finished = NULL,"
                                    " error = ?3, pid = ?4, pid_start = ?6 WHERE id = ?5"
                                  : "UPDATE runs SET status = ?1, finished = ?2, error = ?3, pid = ?4, pid_start = ?6 WHERE id = ?5",
                          err);
  if (st) {
    sqlite3_bind_text(st, 1, store_status_name(status), -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, now_wall());
    sdb_bind_text(st, 3, error);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)getpid());
    sqlite3_bind_int64(st, 5, run);
    sdb_bind_process_start(st, 6);
  }
  /* The lock before the row says "running", so that no process in between finds the row
  ** running with its lock free (from another pid namespace: gone); dropped if it fails. */
  if (running) sdb_alive_hold(s, run);
  int rc = sdb_update_one(s, st, "run", run, err);
  if (rc != 0 ? running : !running) sdb_alive_release(s, run);
  return rc;
}


int store_run_claim(Store *s, int64_t run, Err *err) {
  if (sdb_begin(s, err)) return -1;
  /* Read and changed under one write lock: of two processes claiming a run at once, the
  ** second sees the first's claim. A status read before (what --resume checks) and a
  ** store_run_set_status after let both through, and both trained and pushed. */
  sqlite3_stmt *st = sdb_prep(s, "SELECT status, pid, pid_start FROM runs WHERE id = ?", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_int64(st, 1, run);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE) err_setk(err, ERR_NOT_FOUND, "run %lld does not exist", (long long)run);
    else sdb_fail(s, err, "run");
    sqlite3_finalize(st);
    return sdb_rollback(s);
  }
  StoreStatus status = STORE_STATUS_COUNT;
  store_status_parse((const char *)sqlite3_column_text(st, 0), &status);
  sqlite3_int64 pid = sqlite3_column_int64(st, 1);
  int64_t start = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 2);
  sqlite3_finalize(st);
  /* A "running" run whose process is gone (killed before it could say so) is free. */
  if (status == STORE_STATUS_RUNNING && (sdb_alive_held(s, run) || !sdb_pid_gone(pid, start))) {
    err_setk(err, ERR_CONFLICT, "run %lld is already running (pid %lld)", (long long)run, (long long)pid);
    return sdb_rollback(s);
  }
  if (status == STORE_STATUS_DONE) {
    err_setk(err, ERR_CONFLICT, "run %lld is already done; only a stopped run can be resumed", (long long)run);
    return sdb_rollback(s);
  }
  st = sdb_prep(s, "UPDATE runs SET status = 'running', started = COALESCE(started, ?1), claimed = ?1, finished = NULL,"
                   " error = NULL, pid = ?2, pid_start = ?4 WHERE id = ?3", err);
  if (st) {
    sqlite3_bind_double(st, 1, now_wall());
    sqlite3_bind_int64(st, 2, (sqlite3_int64)getpid());
    sqlite3_bind_int64(st, 3, run);
    sdb_bind_process_start(st, 4);
  }
  sdb_alive_hold(s, run);   /* before the row says "running", as in store_run_set_status */
  if (sdb_update_one(s, st, "run", run, err)) {
    sdb_alive_release(s, run);
    return -1;
  }
  return 0;
}

int store_run_progress(Store *s, int64_t run, int64_t step, int64_t total_steps, int64_t epoch, Err *err) {
  if (step < 0 || total_steps < 0 || epoch < 0) return err_setk(err, ERR_INVALID, "run progress: negative step, total or epoch");
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "UPDATE runs SET step = ?, total_steps = ?, epoch = ? WHERE id = ?", err);
  if (st) {
    sqlite3_bind_int64(st, 1, step);
    sqlite3_bind_int64(st, 2, total_steps);
    sqlite3_bind_int64(st, 3, epoch);
    sqlite3_bind_int64(st, 4, run);
  }
  return sdb_update_one(s, st, "run", run, err);
}

/* Replaces one of a run's JSON columns (its name from a fixed list, never from input)
** with an object. */
static int run_set_json(Store *s, int64_t run, const char *column, const char *json, Err *err) {
  if (sdb_check_json_object(column, json, err)) return -1;
  if (sdb_begin(s, err)) return -1;
  char sql[64];
  snprintf(sql, sizeof sql, "UPDATE runs SET %s = ? WHERE id = ?", column);
  sqlite3_stmt *st = sdb_prep(s, sql, err);
  if (st) {
    sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, run);
  }
  return sdb_update_one(s, st, "run", run, err);
}

int store_run_set_results(Store *s, int64_t run, const char *results_json, Err *err) {
  return run_set_json(s, run, "results", results_json, err);
}

int store_run_set_config(Store *s, int64_t run, const char *config_json, Err *err) {
  return run_set_json(s, run, "config", config_json, err);
}

int store_run_set_dist(Store *s, int64_t run, const char *dist_json, Err *err) {
  return run_set_json(s, run, "dist", dist_json, err);
}

/* Process pid's /proc/PID/stat after its name (which may hold spaces and ')'): the
** state, then the fields from ppid on; NULL when there is no such process. */
static const char *stat_after_name(int64_t pid, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  size_t n = fread(buf, 1, cap - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close = strrchr(buf, ')');
  return close && close[1] == ' ' ? close + 2 : NULL;
}

int64_t sdb_process_start(int64_t pid) {
  char buf[1024];
  const char *p = stat_after_name(pid, buf, sizeof buf);
  /* starttime is field 22; p is at field 3 (the state). */
  for (int field = 3; p && field < 22; field++) {
    p = strchr(p, ' ');
    if (p) p++;
  }
  if (!p) return -1;
  char *end;
  long long t = strtoll(p, &end, 10);
  return end != p && t >= 0 ? (int64_t)t : -1;
}

int sdb_pid_gone(int64_t pid, int64_t start) {
  if (pid <= 0) return 1;
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
  char buf[1024];
  const char *p = stat_after_name(pid, buf, sizeof buf);
  if (!p) return 0;   /* it exists (kill said so) but cannot be read: alive */
  /* A killed process whose parent died too (an mpirun rank) may linger as a zombie
  ** until init reaps it: it runs no more. */
  if (*p == 'Z') return 1;
  /* Another process with the pid: in a container maskd is pid 1 after every start, and a
  ** run killed there would otherwise read as running for ever. */
  int64_t now = start >= 0 ? sdb_process_start(pid) : -1;
  return now >= 0 && now != start;
}

/* PATH-alive, opened (created, with the database's mode, as SQLite makes its -wal) once;
** -1 when it cannot be (a read-only folder). PATH is the database's file as SQLite names it,
** links resolved: beside it, as -wal and -shm are, whatever path the store was opened by. A
** read lock is all a process holds, so a file it may only read still takes its locks. */
static int alive_fd(Store *s) {
  if (s->alive_fd >= 0) return s->alive_fd;
  const char *db = sqlite3_db_filename(s->db, "main");
  if (!db || !db[0]) return -1;
  size_t n = strlen(db) + sizeof "-alive";
  char *path = malloc(n);
  if (!path) return -1;
  snprintf(path, n, "%s-alive", db);
  struct stat st;
  mode_t mode = stat(db, &st) == 0 ? st.st_mode & 0666 : 0644;
  s->alive_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode);
  if (s->alive_fd < 0) s->alive_fd = open(path, O_RDONLY | O_CLOEXEC);
  free(path);
  return s->alive_fd;
}

/* F_OFD_SETLK or F_OFD_GETLK (type F_RDLCK, F_WRLCK or F_UNLCK) on run's byte; the fcntl result, the lock in *fl. */
static int alive_lock(Store *s, int cmd, short type, int64_t run, struct flock *fl) {
  int fd = alive_fd(s);
  if (fd < 0 || run <= 0) return -1;
  memset(fl, 0, sizeof *fl);
  fl->l_type = type;
  fl->l_whence = SEEK_SET;
  fl->l_start = (off_t)run;
  fl->l_len = 1;
  return fcntl(fd, cmd, fl);
}

void sdb_alive_hold(Store *s, int64_t run) {
  struct flock fl;
  alive_lock(s, F_OFD_SETLK, F_RDLCK, run, &fl);
}

void sdb_alive_release(Store *s, int64_t run) {
  struct flock fl;
  if (s->alive_fd >= 0) alive_lock(s, F_OFD_SETLK, F_UNLCK, run, &fl);
}

int sdb_alive_held(Store *s, int64_t run) {
  struct flock fl;   /* a write lock would conflict with any other's read lock: none, F_UNLCK */
  return alive_lock(s, F_OFD_GETLK, F_WRLCK, run, &fl) == 0 && fl.l_type != F_UNLCK;
}

/* Binds this process's start time (NULL when it cannot be read) at i. */
void sdb_bind_process_start(sqlite3_stmt *st, int i) {
  int64_t t = sdb_process_start((int64_t)getpid());
  if (t >= 0) sqlite3_bind_int64(st, i, t);
  else sqlite3_bind_null(st, i);
}

/* Marks rows of table still "running" whose pid is gone as "interrupted". */
/* The ids of table's rows still "running" whose process is gone, into *ids (malloc'd). */
static int gone_rows(Store *s, const char *table, int64_t **ids, int *k, Err *err) {
  char sql[200];
  snprintf(sql, sizeof sql, "SELECT id, pid, pid_start FROM %s WHERE status = 'running'", table);
  sqlite3_stmt *st = sdb_prep(s, sql, err);
  *ids = NULL;
  *k = 0;
  if (!st) return -1;
  int cap = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    int64_t start = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 2);
    if (!sdb_pid_gone(sqlite3_column_int64(st, 1), start)) continue;
    if (!strcmp(table, "runs") && sdb_alive_held(s, sqlite3_column_int64(st, 0))) continue;   /* another pid namespace's */
    if (*k == cap) {
      int64_t *more = realloc(*ids, (size_t)(cap = cap ? 2 * cap : 16) * sizeof **ids);
      if (!more) { sqlite3_finalize(st); return err_setk(err, ERR_NOMEM, "store: out of memory"); }
      *ids = more;
    }
    (*ids)[(*k)++] = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : sdb_fail(s, err, table);
}

int sdb_recover(Store *s, const char *table, int *n, Err *err) {
  if (n) *n = 0;
  /* Read first, and take the write lock only when a row needs it: maskd train and the
  ** server recover on every start, and a start waited behind any other process's write
  ** transaction (and failed when it outlasted the busy timeout) though nothing was to do.
  ** Under the lock the rows are read again: another process may have claimed (resumed)
  ** one in between, under a pid that may even be the same. */
  int64_t *ids = NULL;
  int k = 0;
  int rc = gone_rows(s, table, &ids, &k, err);
  free(ids);
  if (rc || k == 0) return rc;
  if (sdb_begin(s, err)) return -1;
  if (gone_rows(s, table, &ids, &k, err)) { free(ids); return sdb_rollback(s); }
  char sql[200];
  snprintf(sql, sizeof sql,
           "UPDATE %s SET status = 'interrupted', finished = ?, error = COALESCE(error, 'the process ended while running')"
           " WHERE id = ?", table);
  for (int i = 0; i < k; i++) {
    sqlite3_stmt *st = sdb_prep(s, sql, err);
    if (!st) { free(ids); return sdb_rollback(s); }
    sqlite3_bind_double(st, 1, now_wall());
    sqlite3_bind_int64(st, 2, ids[i]);
    if (sdb_step_done(s, st, err, table)) { free(ids); return sdb_rollback(s); }
  }
  free(ids);
  if (sdb_commit(s, err)) return -1;
  if (n) *n = k;
  return 0;
}

int store_runs_recover(Store *s, int *n, Err *err) { return sdb_recover(s, "runs", n, err); }

/* Foreign-key failures name what was missing. */
int sdb_run_exists(Store *s, int64_t run, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT 1 FROM runs WHERE id = ?", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, run);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "run %lld does not exist", (long long)run) : sdb_fail(s, err, "run");
}

int store_step_metrics_add(Store *s, int64_t run, const StoreStepMetric *m, int n, Err *err) {
  if (n < 0 || (n > 0 && !m)) return err_setk(err, ERR_INVALID, "step metrics: bad count");
  for (int i = 0; i < n; i++)
    if (m[i].step < 0) return err_setk(err, ERR_INVALID, "step metrics: negative step %lld", (long long)m[i].step);
  if (sdb_begin(s, err)) return -1;
  if (sdb_run_exists(s, run, err)) return sdb_rollback(s);
  sqlite3_stmt *st = sdb_prep(s,
                          "INSERT OR REPLACE INTO step_metrics(run_id, step, epoch, loss, lr, grad_norm, tokens_per_s, time)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", err);
  if (!st) return sdb_rollback(s);
  double t = now_wall();
  for (int i = 0; i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, m[i].step);
    sdb_bind_real(st, 3, m[i].epoch);
    sdb_bind_real(st, 4, m[i].loss);
    sdb_bind_real(st, 5, m[i].lr);
    sdb_bind_real(st, 6, m[i].grad_norm);
    sdb_bind_real(st, 7, m[i].tokens_per_s);
    sqlite3_bind_double(st, 8, m[i].time > 0 && isfinite(m[i].time) ? m[i].time : t);
    if (sqlite3_step(st) != SQLITE_DONE) { sdb_fail(s, err, "step metrics"); sqlite3_finalize(st); return sdb_rollback(s); }
  }
  sqlite3_finalize(st);
  return sdb_commit(s, err);
}

int store_epoch_metrics_add(Store *s, int64_t run, const StoreEpochMetric *m, Err *err) {
  if (!m || m->epoch < 0) return err_setk(err, ERR_INVALID, "epoch metrics: negative epoch");
  if (m->cls && m->confusion_json && sdb_check_json_array("epoch metrics: confusion", m->confusion_json, err)) return -1;
  if (sdb_begin(s, err)) return -1;
  if (sdb_run_exists(s, run, err)) return sdb_rollback(s);
  sqlite3_stmt *st = sdb_prep(s,
                          "INSERT OR REPLACE INTO epoch_metrics(run_id, epoch, train_loss, eval_loss, eval_accuracy,"
                          " perplexity, eval_runtime, time, macro_f1, weighted_f1, confusion)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_int64(st, 2, m->epoch);
  sdb_bind_real(st, 3, m->train_loss);
  sdb_bind_real(st, 4, m->eval_loss);
  sdb_bind_real(st, 5, m->eval_accuracy);
  sdb_bind_real(st, 6, m->perplexity);
  sdb_bind_real(st, 7, m->eval_runtime);
  sqlite3_bind_double(st, 8, m->time > 0 && isfinite(m->time) ? m->time : now_wall());
  sdb_bind_real(st, 9, m->cls ? m->macro_f1 : NAN);
  sdb_bind_real(st, 10, m->cls ? m->weighted_f1 : NAN);
  if (m->cls && m->confusion_json) sqlite3_bind_text(st, 11, m->confusion_json, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, 11);
  if (sdb_step_done(s, st, err, "epoch metrics")) return sdb_rollback(s);
  return sdb_commit(s, err);
}

int64_t store_run_find(Store *s, const char *id_or_name, Err *err) {
  if (!id_or_name || !*id_or_name) return err_setk(err, ERR_NOT_FOUND, "run: empty id or name");
  int digits = 1;
  for (const char *p = id_or_name; *p; p++) digits &= isdigit((unsigned char)*p) != 0;
  sqlite3_stmt *st = sdb_prep(s, digits ? "SELECT id FROM runs WHERE id = ?" : "SELECT id FROM runs WHERE name = ? ORDER BY id DESC LIMIT 1", err);
  if (!st) return -1;
  if (digits) sqlite3_bind_int64(st, 1, strtoll(id_or_name, NULL, 10));
  else sqlite3_bind_text(st, 1, id_or_name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (id < 0) return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "run \"%s\" does not exist", id_or_name) : sdb_fail(s, err, "run");
  return id;
}

/* The first row of a one-row query as an object, or NULL with "<what> N does not exist". */
json_t *sdb_one_row(Store *s, sqlite3_stmt *st, const char *what, int64_t id, Err *err) {
  json_t *rows = sdb_rows_json(s, st, err);
  if (!rows) return NULL;
  json_t *o = json_incref(json_array_get(rows, 0));
  json_decref(rows);
  if (!o) err_setk(err, ERR_NOT_FOUND, "%s %lld does not exist", what, (long long)id);
  return o;
}

json_t *store_run_get(Store *s, int64_t run, Err *err) {
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT id, name, status, config, created, started, finished, error, step, total_steps, epoch, pid, dist,"
                          " results, claimed FROM runs WHERE id = ?", err);
  if (!st) return NULL;
  sqlite3_bind_int64(st, 1, run);
  return sdb_one_row(s, st, "run", run, err);
}

json_t *store_runs_list(Store *s, Err *err) {
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT r.id, r.name, r.status, r.created, r.started, r.finished, r.step, r.total_steps, r.epoch,"
                          " r.error,"
                          " (SELECT loss FROM step_metrics WHERE run_id = r.id ORDER BY step DESC LIMIT 1) AS last_loss,"
                          " (SELECT eval_loss FROM epoch_metrics WHERE run_id = r.id ORDER BY epoch DESC LIMIT 1) AS eval_loss"
                          " FROM runs r ORDER BY r.id DESC", err);
  return st ? sdb_rows_json(s, st, err) : NULL;
}

json_t *store_run_metrics(Store *s, int64_t run, int64_t since_step, Err *err) {
  if (sdb_exec(s, "BEGIN", err)) return NULL;
  json_t *out = NULL;
  if (sdb_run_exists(s, run, err)) goto done;
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT step, epoch, loss, lr, grad_norm, tokens_per_s, time FROM step_metrics"
                          " WHERE run_id = ? AND step > ? ORDER BY step", err);
  if (!st) goto done;
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_int64(st, 2, since_step);
  json_t *steps = sdb_rows_json(s, st, err);
  if (!steps) goto done;
  st = sdb_prep(s,
            "SELECT epoch, train_loss, eval_loss, eval_accuracy, perplexity, eval_runtime, time,"
            " macro_f1 AS eval_macro_f1, weighted_f1 AS eval_weighted_f1, confusion FROM epoch_metrics"
            " WHERE run_id = ? ORDER BY epoch", err);
  json_t *epochs = st ? (sqlite3_bind_int64(st, 1, run), sdb_rows_json(s, st, err)) : NULL;
  if (!epochs) { json_decref(steps); goto done; }
  /* A masked LM's epochs have no classification scores: their entries stay as they were. */
  size_t i;
  json_t *ep;
  json_array_foreach(epochs, i, ep) {
    if (!json_is_null(json_object_get(ep, "eval_macro_f1")) || !json_is_null(json_object_get(ep, "confusion"))) continue;
    json_object_del(ep, "eval_macro_f1");
    json_object_del(ep, "eval_weighted_f1");
    json_object_del(ep, "confusion");
  }
  out = json_pack("{s:o,s:o}", "steps", steps, "epochs", epochs);
done:
  sdb_exec(s, "COMMIT", NULL);
  return out;
}
