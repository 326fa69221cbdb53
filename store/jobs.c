/* The store's job queue: submitted, claimed by a worker, finished or cancelled,
** with their progress (see store.h). */
#include "store/store.h"
#include "store/store_db.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/core/now.h"

static const char *const JOB_KINDS[] = {"tokenizer", "prepare", "train", NULL};

int64_t store_job_submit(Store *s, const char *kind, const char *params_json, Err *err) {
  if (!sdb_one_of(kind, JOB_KINDS)) return err_setk(err, ERR_INVALID, "job kind \"%s\": expected tokenizer, prepare or train", kind ? kind : "");
  if (sdb_check_json_object("job parameters", params_json, err)) return -1;
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO jobs(kind, status, params, created) VALUES (?, 'queued', ?, ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, params_json, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, now_wall());
  if (sdb_step_done(s, st, err, "job")) return sdb_rollback(s);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (sdb_commit(s, err)) return -1;
  return id;
}

int store_job_claim(Store *s, int64_t *job, char **kind, char **params_json, Err *err) {
  *kind = *params_json = NULL;
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "SELECT id, kind, params FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1", err);
  if (!st) return sdb_rollback(s);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) { sdb_fail(s, err, "job claim"); return sdb_rollback(s); }
    return sdb_commit(s, err) ? -1 : 1;
  }
  int64_t id = sqlite3_column_int64(st, 0);
  char *k = strdup((const char *)sqlite3_column_text(st, 1)), *p = strdup((const char *)sqlite3_column_text(st, 2));
  sqlite3_finalize(st);
  st = sdb_prep(s, "UPDATE jobs SET status = 'running', started = ?, pid = ?, pid_start = ? WHERE id = ?", err);
  if (!k || !p || !st) { free(k); free(p); sqlite3_finalize(st); if (!k || !p) err_setk(err, ERR_NOMEM, "store: out of memory"); return sdb_rollback(s); }
  sqlite3_bind_double(st, 1, now_wall());
  sqlite3_bind_int64(st, 2, (sqlite3_int64)getpid());
  sdb_bind_process_start(st, 3);
  sqlite3_bind_int64(st, 4, id);
  if (sdb_step_done(s, st, err, "job claim") || sdb_commit(s, err)) { free(k); free(p); return sdb_rollback(s); }
  *job = id;
  *kind = k;
  *params_json = p;
  return 0;
}

int store_job_set_run(Store *s, int64_t job, int64_t run, Err *err) {
  if (sdb_begin(s, err)) return -1;
  if (sdb_run_exists(s, run, err)) return sdb_rollback(s);
  sqlite3_stmt *st = sdb_prep(s, "UPDATE jobs SET run_id = ? WHERE id = ?", err);
  if (st) { sqlite3_bind_int64(st, 1, run); sqlite3_bind_int64(st, 2, job); }
  return sdb_update_one(s, st, "job", job, err);
}

/* The status of a job into *out; 0, or -1 when it does not exist. */
static int job_status(Store *s, int64_t job, StoreStatus *out, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT status FROM jobs WHERE id = ?", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, job);
  int rc = sqlite3_step(st), bad = rc == SQLITE_ROW && store_status_parse((const char *)sqlite3_column_text(st, 0), out);
  sqlite3_finalize(st);
  if (bad) return err_set(err, "job %lld has a status this maskd does not know", (long long)job);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job) : sdb_fail(s, err, "job");
}

int store_job_finish(Store *s, int64_t job, StoreStatus status, const char *error, Err *err) {
  if (!store_status_ended(status))
    return err_setk(err, ERR_INVALID, "job status \"%s\": expected done, failed, interrupted or cancelled", store_status_name(status));
  if (sdb_begin(s, err)) return -1;
  StoreStatus cur;
  if (job_status(s, job, &cur, err)) return sdb_rollback(s);
  if (cur != STORE_STATUS_RUNNING) { err_setk(err, ERR_CONFLICT, "job %lld is %s, not running", (long long)job, store_status_name(cur)); return sdb_rollback(s); }
  sqlite3_stmt *st = sdb_prep(s, "UPDATE jobs SET status = ?, finished = ?, error = ? WHERE id = ?", err);
  if (st) {
    sqlite3_bind_text(st, 1, store_status_name(status), -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, now_wall());
    sdb_bind_text(st, 3, error);
    sqlite3_bind_int64(st, 4, job);
  }
  return sdb_update_one(s, st, "job", job, err);
}

int store_job_cancel(Store *s, int64_t job, Err *err) {
  if (sdb_begin(s, err)) return -1;
  StoreStatus cur;
  if (job_status(s, job, &cur, err)) return sdb_rollback(s);
  sqlite3_stmt *st;
  if (cur == STORE_STATUS_QUEUED) {
    st = sdb_prep(s, "UPDATE jobs SET status = 'cancelled', finished = ?, cancel_requested = 1 WHERE id = ?", err);
    if (st) { sqlite3_bind_double(st, 1, now_wall()); sqlite3_bind_int64(st, 2, job); }
  } else if (cur == STORE_STATUS_RUNNING) {
    st = sdb_prep(s, "UPDATE jobs SET cancel_requested = 1 WHERE id = ?", err);
    if (st) sqlite3_bind_int64(st, 1, job);
  } else {
    err_setk(err, ERR_CONFLICT, "job %lld is already %s", (long long)job, store_status_name(cur));
    return sdb_rollback(s);
  }
  return sdb_update_one(s, st, "job", job, err);
}

/* The first column of `sql`'s first row, as 0 or 1, in *flag, for the one id it
** binds; returns sqlite3_step's code (SQLITE_ROW when there was a row), or -1
** when the statement cannot be prepared. */
static int query_flag(Store *s, const char *sql, int64_t id, int *flag, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, sql, err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *flag = sqlite3_column_int(st, 0) != 0;
  sqlite3_finalize(st);
  return rc;
}

int store_job_cancel_requested(Store *s, int64_t job, Err *err) {
  int v = 0, rc = query_flag(s, "SELECT cancel_requested FROM jobs WHERE id = ?", job, &v, err);
  if (rc < 0) return -1;
  if (rc == SQLITE_ROW) return v;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job) : sdb_fail(s, err, "job");
}

int store_run_has_running_job(Store *s, int64_t run, Err *err) {
  int v = 0, rc = query_flag(s, "SELECT EXISTS (SELECT 1 FROM jobs WHERE run_id = ? AND status = 'running')", run, &v,
                             err);
  if (rc < 0) return -1;
  return rc == SQLITE_ROW ? v : sdb_fail(s, err, "jobs");
}

int store_jobs_recover(Store *s, int *n, Err *err) { return sdb_recover(s, "jobs", n, err); }

int store_job_progress(Store *s, int64_t job, const char *progress_json, Err *err) {
  if (progress_json && sdb_check_json_object("job progress", progress_json, err)) return -1;
  if (strlen(progress_json ? progress_json : "") > 4096) return err_setk(err, ERR_TOO_LARGE, "job progress: longer than 4096 bytes");
  sqlite3_stmt *st = sdb_prep(s, "UPDATE jobs SET progress = ? WHERE id = ? AND status = 'running'", err);
  if (!st) return -1;
  sdb_bind_text(st, 1, progress_json);
  sqlite3_bind_int64(st, 2, job);
  if (sdb_step_done(s, st, err, "job progress")) return -1;
  if (sqlite3_changes(s->db) == 1) return 0;
  StoreStatus cur;
  if (job_status(s, job, &cur, err)) return -1;
  return err_setk(err, ERR_CONFLICT, "job %lld is %s, not running", (long long)job, store_status_name(cur));
}

int64_t store_job_run(Store *s, int64_t job, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT run_id FROM jobs WHERE id = ?", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, job);
  int rc = sqlite3_step(st);
  int64_t run = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;   /* NULL reads as 0 */
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return run;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job) : sdb_fail(s, err, "job");
}

json_t *store_job_get(Store *s, int64_t job, Err *err) {
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT id, kind, status, params, run_id AS run, created, started, finished, error, cancel_requested,"
                          " progress FROM jobs WHERE id = ?", err);
  if (!st) return NULL;
  sqlite3_bind_int64(st, 1, job);
  return sdb_one_row(s, st, "job", job, err);
}

json_t *store_jobs_list(Store *s, Err *err) {
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT id, kind, status, params, run_id AS run, created, started, finished, error, cancel_requested,"
                          " progress FROM jobs ORDER BY id DESC", err);
  return st ? sdb_rows_json(s, st, err) : NULL;
}
