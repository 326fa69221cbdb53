/* Layer: store/ (ARCHITECTURE.md). Not for callers outside store/: store.h is the API.
**
** What the store's own files share: the connection, its transactions, statements
** and rows as JSON (store.c), and the few pieces one concept's file lends another
** (a blob written or read inside the caller's transaction, a run's existence, a
** registered thing's provenance). Each runs inside whatever transaction its
** caller holds, except where its contract below says it begins or ends one. */
#ifndef MASKD_STORE_DB_H
#define MASKD_STORE_DB_H
#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/err.h"
#include "store/store.h"

struct Store {
  sqlite3 *db;
  char path[512];
  int busy_ms;        /* the busy timeout store_open set: restored after a write that would not wait */
  int alive_fd;       /* PATH-alive, whose byte locks say which runs live (runs.c); -1 until opened */
};

/* Blobs are stored in chunks: SQLite caps one value at 1e9 bytes, and a base
** model's optimizer state comes close to that. */
#define CHUNK_BYTES (16 << 20)

/* ---- the connection (store.c) ---- */

/* Fills err (ERR_IO) with "store: WHAT: " and the database's message; returns -1. */
int sdb_fail(Store *s, Err *err, const char *what);
/* Runs SQL text that returns no rows; 0, or -1 with err filled (ERR_IO). */
int sdb_exec(Store *s, const char *sql, Err *err);
/* A prepared statement, or NULL with err filled. */
sqlite3_stmt *sdb_prep(Store *s, const char *sql, Err *err);
/* BEGIN IMMEDIATE: takes the write lock up front (a busy database waits, up to the busy timeout). */
int sdb_begin(Store *s, Err *err);
/* COMMIT; on failure rolls back and returns -1. */
int sdb_commit(Store *s, Err *err);
/* Rolls back the open transaction, if any; always returns -1, for `return sdb_rollback(s);`. */
int sdb_rollback(Store *s);
/* Runs a statement that returns no rows and finalizes it; -1 with the database's message on error. */
int sdb_step_done(Store *s, sqlite3_stmt *st, Err *err, const char *what);
/* Binds text, or NULL for a NULL v. */
void sdb_bind_text(sqlite3_stmt *st, int i, const char *v);
/* Binds a finite double; NaN and infinities become NULL (JSON cannot carry them). */
void sdb_bind_real(sqlite3_stmt *st, int i, double v);
/* 0 when text is a JSON object, else -1 with err (ERR_INVALID) naming what. */
int sdb_check_json_object(const char *what, const char *text, Err *err);
/* 0 when text is a JSON array, else -1 with err (ERR_INVALID) naming what. */
int sdb_check_json_array(const char *what, const char *text, Err *err);
/* 1 when v is one of the NULL-terminated set's strings. */
int sdb_one_of(const char *v, const char *const *set);
/* All rows of a prepared, bound statement as an array (finalizes it); JSON-text columns parsed. */
json_t *sdb_rows_json(Store *s, sqlite3_stmt *st, Err *err);

/* ---- lent by one concept's file to another ---- */

/* blobs.c: inserts a blob under its sha256 hex (no-op when present). */
int sdb_blob_put_tx(Store *s, const void *data, size_t len, const char *hex, Err *err);
/* blobs.c: writes a streamed blob under a temporary key (key receives it; hex its sha256),
** outside any transaction: each chunk in a short write transaction of its own, so other
** writers wait one chunk at most. Nothing refers to the rows until sdb_stream_finish_tx;
** on failure they are dropped (or left to sdb_sweep_streams when that fails too). */
int sdb_stream_blob(Store *s, const StoreStream *in, char key[65], char hex[65], Err *err);
/* blobs.c: inside the caller's write transaction, moves a stream's rows from its temporary
** key to hex (len bytes), or drops them when that content is stored already; -1 when the
** rows are not all there (swept meanwhile). */
int sdb_stream_finish_tx(Store *s, const char *key, const char *hex, size_t len, Err *err);
/* blobs.c: drops a stream's temporary rows in a transaction of its own (key "" : none); best effort. */
void sdb_stream_drop(Store *s, const char *key);
/* blobs.c: drops temporary stream rows left by a process that is gone (killed mid-push), or
** untouched for an hour (stuck, or its pid reused); never another live process's. Takes the
** write lock only when there is something to drop, and never waits for it (a busy store is
** swept later); best effort, no error. */
void sdb_sweep_streams(Store *s);
/* blobs.c: 1 when h is min..max lower-case hex digits. */
int sdb_is_hex(const char *h, size_t min, size_t max);
/* blobs.c: reads a blob inside the caller's read snapshot, with a reader's checks, whole. */
int sdb_blob_get_tx(Store *s, const char *hex, void **data, size_t *len, Err *err);
/* tokenizers.c: a registered thing's provenance: NULL, or a JSON object; job 0 (none) or an id. */
int sdb_check_source(const char *what, const char *source_json, int64_t job, Err *err);
/* tokenizers.c: binds a job id, or NULL for 0. */
void sdb_bind_job(sqlite3_stmt *st, int i, int64_t job);
/* tokenizers.c: the one row of a query by name, or NULL with "<what> "NAME" does not exist". */
json_t *sdb_one_named(Store *s, sqlite3_stmt *st, const char *what, const char *name, Err *err);
/* runs.c: runs the prepared one-row UPDATE st (NULL: its prepare failed, err filled) and ends the
** transaction the caller began: COMMIT, or ROLLBACK with "what N does not exist" when no row changed. */
int sdb_update_one(Store *s, sqlite3_stmt *st, const char *what, int64_t id, Err *err);
/* runs.c: marks rows of table still "running" whose pid is gone as "interrupted", in a write
** transaction of its own taken only when a read found such rows; *n counts them. */
int sdb_recover(Store *s, const char *table, int *n, Err *err);
/* runs.c: when process pid started, in clock ticks after boot (/proc/PID/stat's starttime); -1
** when it cannot be read (no such process). With the pid, it names one process. */
int64_t sdb_process_start(int64_t pid);
/* runs.c: 1 when the process recorded as (pid, start) runs no more: no such pid, a zombie, or
** another process that got the pid since (its start differs; start < 0: not compared). */
int sdb_pid_gone(int64_t pid, int64_t start);
/* runs.c: the file PATH-alive beside the database (PATH as SQLite names its file), where each
** process running a run holds a read lock (open file description locks, released by the kernel
** when the process ends) on one byte, the run's id, from before its row says "running".
** Unlike the pid, it is seen from every pid namespace on the machine (a run trained in a
** container was judged by a process of the host's instead). Best effort: a store whose folder
** is read-only keeps no locks, and its runs are judged by their pids alone. */
void sdb_alive_hold(Store *s, int64_t run);
void sdb_alive_release(Store *s, int64_t run);
/* runs.c: 1 when some open file description other than this store's holds run's lock. */
int sdb_alive_held(Store *s, int64_t run);
/* runs.c: binds this process's sdb_process_start (NULL when unreadable) as parameter i. */
void sdb_bind_process_start(sqlite3_stmt *st, int i);
/* runs.c: 0 when run exists, else -1 with ERR_NOT_FOUND (foreign-key failures name what was missing). */
int sdb_run_exists(Store *s, int64_t run, Err *err);
/* runs.c: the first row of a one-row query as an object, or NULL with "<what> N does not exist". */
json_t *sdb_one_row(Store *s, sqlite3_stmt *st, const char *what, int64_t id, Err *err);

#endif
