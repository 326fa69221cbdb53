/* The SQLite store: the connection, its schema and migrations, and the helpers
** every concept's file uses (store_db.h); blobs, tokenizers, datasets, runs,
** models and jobs each live in a file of their own.
**
** Each public function that writes runs as one BEGIN IMMEDIATE
** transaction (taking the write lock up front, so a busy database waits instead
** of failing half-way) and rolls back on any error. Inputs are validated before
** the transaction starts, and CHECK / FOREIGN KEY constraints in the schema catch
** whatever slips through, so bad input is refused without touching the data. */
#include "engine/core/json_text.h"
#include "engine/nn/config.h"
#include "store/store.h"
#include "store/store_db.h"

#include <ctype.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- migrations: MIGRATIONS[v - 1] takes the schema from v - 1 to v ---- */

static const char *const MIGRATIONS[] = {
    /* 1: the initial schema. */
    "CREATE TABLE blobs ("
    "  sha256 TEXT PRIMARY KEY CHECK (length(sha256) = 64),"
    "  size INTEGER NOT NULL CHECK (size >= 0),"
    "  created REAL NOT NULL) STRICT;"
    "CREATE TABLE blob_chunks ("
    "  id INTEGER PRIMARY KEY,"
    "  sha256 TEXT NOT NULL REFERENCES blobs(sha256) ON DELETE CASCADE,"
    "  idx INTEGER NOT NULL CHECK (idx >= 0),"
    "  data BLOB NOT NULL,"
    "  UNIQUE (sha256, idx)) STRICT;"
    "CREATE TABLE tokenizers ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  vocab_size INTEGER NOT NULL CHECK (vocab_size > 0),"
    "  blob TEXT NOT NULL REFERENCES blobs(sha256),"
    "  created REAL NOT NULL) STRICT;"
    "CREATE TABLE datasets ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  tokenizer_id INTEGER REFERENCES tokenizers(id),"
    "  seq_len INTEGER NOT NULL CHECK (seq_len > 0),"
    "  created REAL NOT NULL) STRICT;"
    "CREATE TABLE dataset_shards ("
    "  dataset_id INTEGER NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,"
    "  split TEXT NOT NULL,"
    "  path TEXT NOT NULL CHECK (length(path) > 0),"
    "  n_samples INTEGER NOT NULL CHECK (n_samples >= 0),"
    "  PRIMARY KEY (dataset_id, split, path)) STRICT;"
    "CREATE TABLE runs ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL,"
    "  config TEXT NOT NULL CHECK (json_valid(config)),"
    "  status TEXT NOT NULL CHECK (status IN ('created','running','done','failed','interrupted','cancelled')),"
    "  created REAL NOT NULL, started REAL, finished REAL,"
    "  error TEXT, pid INTEGER,"
    "  step INTEGER NOT NULL DEFAULT 0 CHECK (step >= 0),"
    "  total_steps INTEGER NOT NULL DEFAULT 0 CHECK (total_steps >= 0),"
    "  epoch INTEGER NOT NULL DEFAULT 0 CHECK (epoch >= 0)) STRICT;"
    "CREATE INDEX runs_by_name ON runs(name);"
    "CREATE TABLE step_metrics ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  step INTEGER NOT NULL CHECK (step >= 0),"
    "  epoch REAL, loss REAL, lr REAL, grad_norm REAL, tokens_per_s REAL,"
    "  time REAL NOT NULL,"
    "  PRIMARY KEY (run_id, step)) STRICT, WITHOUT ROWID;"
    "CREATE TABLE epoch_metrics ("
    "  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,"
    "  epoch INTEGER NOT NULL CHECK (epoch >= 0),"
    "  train_loss REAL, eval_loss REAL, eval_accuracy REAL, perplexity REAL, eval_runtime REAL,"
    "  time REAL NOT NULL,"
    "  PRIMARY KEY (run_id, epoch)) STRICT, WITHOUT ROWID;"
    "CREATE TABLE models ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  created REAL NOT NULL) STRICT;"
    "CREATE TABLE revisions ("
    "  id INTEGER PRIMARY KEY,"
    "  model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    "  seq INTEGER NOT NULL CHECK (seq > 0),"
    "  commit_id TEXT NOT NULL UNIQUE CHECK (length(commit_id) = 40),"
    "  message TEXT NOT NULL,"
    "  config TEXT NOT NULL CHECK (json_valid(config)),"
    "  weights TEXT NOT NULL REFERENCES blobs(sha256),"
    "  optimizer TEXT REFERENCES blobs(sha256),"
    "  tokenizer TEXT REFERENCES blobs(sha256),"
    "  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
    "  step INTEGER NOT NULL DEFAULT 0, epoch INTEGER NOT NULL DEFAULT 0,"
    "  metrics TEXT CHECK (metrics IS NULL OR json_valid(metrics)),"
    "  created REAL NOT NULL,"
    "  UNIQUE (model_id, seq)) STRICT;"
    "CREATE INDEX revisions_by_run ON revisions(run_id);"
    "CREATE INDEX revisions_by_weights ON revisions(weights);"
    "CREATE INDEX revisions_by_optimizer ON revisions(optimizer);"
    "CREATE INDEX revisions_by_tokenizer ON revisions(tokenizer);"
    "CREATE TABLE jobs ("
    "  id INTEGER PRIMARY KEY,"
    "  kind TEXT NOT NULL CHECK (kind IN ('tokenizer','prepare','train','finetune')),"
    "  status TEXT NOT NULL CHECK (status IN ('queued','running','done','failed','interrupted','cancelled')),"
    "  params TEXT NOT NULL CHECK (json_valid(params)),"
    "  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
    "  pid INTEGER,"
    "  cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  created REAL NOT NULL, started REAL, finished REAL, error TEXT) STRICT;"
    "CREATE INDEX jobs_by_status ON jobs(status, id);",
    /* 2: the job kinds are what the worker runs; "finetune" was named but never
    ** implemented, and store_job_submit never accepted it, so no row can hold it.
    ** SQLite cannot change a CHECK in place: the table is rebuilt. */
    "CREATE TABLE jobs_v2 ("
    "  id INTEGER PRIMARY KEY,"
    "  kind TEXT NOT NULL CHECK (kind IN ('tokenizer','prepare','train')),"
    "  status TEXT NOT NULL CHECK (status IN ('queued','running','done','failed','interrupted','cancelled')),"
    "  params TEXT NOT NULL CHECK (json_valid(params)),"
    "  run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
    "  pid INTEGER,"
    "  cancel_requested INTEGER NOT NULL DEFAULT 0,"
    "  created REAL NOT NULL, started REAL, finished REAL, error TEXT) STRICT;"
    "INSERT INTO jobs_v2 SELECT id, kind, status, params, run_id, pid, cancel_requested, created, started, finished, error"
    "  FROM jobs;"
    "DROP TABLE jobs;"
    "ALTER TABLE jobs_v2 RENAME TO jobs;"
    "CREATE INDEX jobs_by_status ON jobs(status, id);",
    /* 3: a data-parallel run's ranks, hosts and rates (store_run_set_dist). */
    "ALTER TABLE runs ADD COLUMN dist TEXT CHECK (dist IS NULL OR json_valid(dist));",
    /* 4: fine-tuning (text classification): an epoch's F1 scores and most frequent
    ** confusions, a run's results beside its epochs (the test set's metrics), and the
    ** best revision of a model repository (NAME@best). */
    "ALTER TABLE epoch_metrics ADD COLUMN macro_f1 REAL;"
    "ALTER TABLE epoch_metrics ADD COLUMN weighted_f1 REAL;"
    "ALTER TABLE epoch_metrics ADD COLUMN confusion TEXT CHECK (confusion IS NULL OR json_valid(confusion));"
    "ALTER TABLE runs ADD COLUMN results TEXT CHECK (results IS NULL OR json_valid(results));"
    "ALTER TABLE models ADD COLUMN best_revision INTEGER REFERENCES revisions(id) ON DELETE SET NULL;",
    /* 5: an imported model's tokenizer_config.json and special_tokens_map.json, kept as
    ** they came (the mask token's name, clean_up_tokenization_spaces, the tokenizer class). */
    ("ALTER TABLE revisions ADD COLUMN tokenizer_config TEXT CHECK (tokenizer_config IS NULL OR json_valid(tokenizer_config));"
     "ALTER TABLE revisions ADD COLUMN special_tokens_map TEXT CHECK (special_tokens_map IS NULL OR json_valid(special_tokens_map));"),
    /* 6: the registry: where a tokenizer or dataset came from (its corpora's sha256 and
    ** size, its tokenizer's; NULL when unknown, as for rows of older versions) and the job
    ** that made it, and a running job's progress. job_id is no foreign key: jobs are never
    ** deleted, and a column in a foreign key could not be dropped by a later migration. */
    ("ALTER TABLE tokenizers ADD COLUMN source TEXT CHECK (source IS NULL OR json_valid(source));"
     "ALTER TABLE tokenizers ADD COLUMN job_id INTEGER CHECK (job_id IS NULL OR job_id > 0);"
     "ALTER TABLE datasets ADD COLUMN source TEXT CHECK (source IS NULL OR json_valid(source));"
     "ALTER TABLE datasets ADD COLUMN job_id INTEGER CHECK (job_id IS NULL OR job_id > 0);"
     "ALTER TABLE jobs ADD COLUMN progress TEXT CHECK (progress IS NULL OR json_valid(progress));"),
    /* 7: a running run's or job's process is its pid and its start time (clock ticks after
    ** boot, /proc/PID/stat): a pid alone named another process once it was reused, as it
    ** always is in a container, where maskd is pid 1 after every start (sdb_pid_gone).
    ** NULL for rows of older versions: their pid alone is compared. */
    ("ALTER TABLE runs ADD COLUMN pid_start INTEGER;"
     "ALTER TABLE jobs ADD COLUMN pid_start INTEGER;"),
    /* 8: blobs being read by a download (store_blob_pin), which store_gc keeps: a training
    ** run's keep-last drops step checkpoints while their weights may be downloading. key
    ** names the reading process as a stream's temporary key does (sdb_sweep_streams takes
    ** a dead one's). No foreign key: a pin never holds back a delete but gc's. */
    "CREATE TABLE blob_readers (key TEXT PRIMARY KEY, sha256 TEXT NOT NULL, created REAL NOT NULL);",
    /* 9: when the process running a run took it (its start, or its resume): the rate an
    ** ETA is taken from counts only the steps since, not the time the run lay stopped. */
    "ALTER TABLE runs ADD COLUMN claimed REAL;",
};
#define N_MIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))
_Static_assert(N_MIGRATIONS == STORE_SCHEMA_VERSION, "one migration per schema version");

/* ---- helpers ---- */

/* ERR_BUSY for a database another connection holds locked past the busy timeout (the
** same call may succeed later: HTTP answers 503 with Retry-After), else ERR_IO. */
static ErrKind kind_of(int rc) {
  rc &= 0xff;   /* extended result codes are on: SQLITE_BUSY_SNAPSHOT, SQLITE_LOCKED_SHAREDCACHE, ... */
  return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? ERR_BUSY : ERR_IO;
}

int sdb_fail(Store *s, Err *err, const char *what) {
  return err_setk(err, kind_of(sqlite3_extended_errcode(s->db)), "store: %s: %s", what, sqlite3_errmsg(s->db));
}

int sdb_exec(Store *s, const char *sql, Err *err) {
  char *msg = NULL;
  int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) {
    err_setk(err, kind_of(rc), "store: %s", msg ? msg : sqlite3_errmsg(s->db));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

sqlite3_stmt *sdb_prep(Store *s, const char *sql, Err *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
    sdb_fail(s, err, "prepare");
    return NULL;
  }
  return st;
}

int sdb_begin(Store *s, Err *err) { return sdb_exec(s, "BEGIN IMMEDIATE", err); }
int sdb_commit(Store *s, Err *err) {
  if (sdb_exec(s, "COMMIT", err) == 0) return 0;
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}
int sdb_rollback(Store *s) {
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}

/* Runs a statement that returns no rows; -1 with the database's message on error. */
int sdb_step_done(Store *s, sqlite3_stmt *st, Err *err, const char *what) {
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) { sdb_fail(s, err, what); sqlite3_finalize(st); return -1; }
  sqlite3_finalize(st);
  return 0;
}

void sdb_bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

/* SQLite turns NaN into NULL anyway; infinities would become REALs JSON cannot
** carry, so every non-finite value is stored as NULL. */
void sdb_bind_real(sqlite3_stmt *st, int i, double v) {
  if (isfinite(v)) sqlite3_bind_double(st, i, v);
  else sqlite3_bind_null(st, i);
}

/* Names of runs, models, tokenizers, datasets: what a Hub repository name allows
** (letters, digits, - _ . and one namespace /), so they are safe in URLs and paths. */
int store_check_name(const char *what, const char *name, Err *err) {
  if (!name || !*name) return err_setk(err, ERR_INVALID, "%s name: empty", what);
  size_t n = strlen(name);
  if (n > 128) return err_setk(err, ERR_INVALID, "%s name: longer than 128 characters", what);
  int slashes = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c == '/') { slashes++; continue; }
    if (!isalnum(c) && c != '-' && c != '_' && c != '.')
      return err_setk(err, ERR_INVALID, "%s name \"%.64s\": character '%c' not allowed (letters, digits, - _ . and one /)", what, name,
                     isprint(c) ? c : '?');
  }
  if (slashes > 1 || name[0] == '/' || name[n - 1] == '/' || name[0] == '.' || name[0] == '-' || strstr(name, "..") ||
      strstr(name, "/."))
    return err_setk(err, ERR_INVALID, "%s name \"%.64s\": not a valid repository-style name", what, name);
  return 0;
}

int store_check_new_repo_name(const char *what, const char *name, Err *err) {
  if (store_check_name(what, name, err)) return -1;
  /* The Hub's URLs put a repository type before a repo (/models/x/..., /datasets/x/...):
  ** an owner named like one would make /models/{name}/... ambiguous, and the Hub refuses
  ** it. Only for a new repository: one a store already holds stays reachable by name. */
  static const char *const types[] = {"models/", "datasets/", "spaces/"};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (!strncmp(name, types[i], strlen(types[i])))
      return err_setk(err, ERR_INVALID, "%s name \"%.64s\": the owner %.*s is a Hub repository type, not a namespace", what,
                      name, (int)strlen(types[i]) - 1, types[i]);
  return 0;
}

int store_check_run_name(const char *name, Err *err) {
  if (store_check_new_repo_name("run", name, err)) return -1;
  for (const char *p = name; *p; p++)
    if (!isdigit((unsigned char)*p)) return 0;
  return err_setk(err, ERR_INVALID, "run name \"%.64s\": all digits, which reads as a run's id; add a letter", name);
}

/* A JSON text that must hold an object. */
int sdb_check_json_object(const char *what, const char *text, Err *err) {
  if (!text) return err_setk(err, ERR_INVALID, "%s: missing", what);
  json_error_t je;
  /* Integers as reals: a valid file may hold one past int64 (tokenizer_config.json's
  ** model_max_length is 1e30 written out), and SQLite's json_valid takes it too. */
  json_t *v = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
  if (!v) return err_setk(err, ERR_INVALID, "%s: malformed JSON at line %d, column %d: %s", what, je.line, je.column, json_error_message(&je));
  int ok = json_is_object(v);
  json_decref(v);
  return ok ? 0 : err_setk(err, ERR_INVALID, "%s: expected a JSON object", what);
}

/* text is a JSON array (the confusion list of an epoch). */
int sdb_check_json_array(const char *what, const char *text, Err *err) {
  json_error_t je;
  json_t *v = json_loads(text, 0, &je);
  if (!v) return err_setk(err, ERR_INVALID, "%s: malformed JSON at line %d, column %d: %s", what, je.line, je.column, json_error_message(&je));
  int ok = json_is_array(v);
  json_decref(v);
  return ok ? 0 : err_setk(err, ERR_INVALID, "%s: expected a JSON array", what);
}

int sdb_one_of(const char *v, const char *const *set) {
  for (; *set; set++)
    if (v && strcmp(v, *set) == 0) return 1;
  return 0;
}

/* In StoreStatus order; the schema's CHECKs name the same words. */
static const char *const STATUS_NAMES[STORE_STATUS_COUNT] = {"created", "queued", "running", "done", "failed",
                                                              "interrupted", "cancelled"};

const char *store_status_name(StoreStatus status) {
  return (unsigned)status < STORE_STATUS_COUNT ? STATUS_NAMES[status] : "unknown";
}

int store_status_parse(const char *name, StoreStatus *out) {
  for (int i = 0; name && i < STORE_STATUS_COUNT; i++)
    if (!strcmp(name, STATUS_NAMES[i])) { *out = (StoreStatus)i; return 0; }
  return -1;
}

int store_status_ended(StoreStatus status) {
  return status == STORE_STATUS_DONE || status == STORE_STATUS_FAILED || status == STORE_STATUS_INTERRUPTED ||
         status == STORE_STATUS_CANCELLED;
}

/* A column as JSON; the columns named in json_cols hold JSON text and are parsed. */
static json_t *col_json(sqlite3_stmt *st, int i) {
  static const char *const json_cols[] = {"config", "params", "metrics", "dist", "results", "confusion", "source", "progress", NULL};
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: return json_integer(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT: return json_real(sqlite3_column_double(st, i));
    case SQLITE_TEXT: {
      const char *t = (const char *)sqlite3_column_text(st, i);
      if (sdb_one_of(sqlite3_column_name(st, i), json_cols)) {
        json_t *v = json_loads(t, 0, NULL);
        if (v) return v;
      }
      return json_string(t);
    }
    case SQLITE_NULL: return json_null();
    default: return json_null();   /* no BLOB column is ever listed */
  }
}

static json_t *row_json(sqlite3_stmt *st) {
  json_t *o = json_object();
  for (int i = 0; i < sqlite3_column_count(st); i++) json_object_set_new(o, sqlite3_column_name(st, i), col_json(st, i));
  return o;
}

/* All rows of a prepared, bound statement as an array (finalizes it). */
json_t *sdb_rows_json(Store *s, sqlite3_stmt *st, Err *err) {
  json_t *a = json_array();
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) json_array_append_new(a, row_json(st));
  if (rc != SQLITE_DONE) { sdb_fail(s, err, "query"); json_decref(a); a = NULL; }
  sqlite3_finalize(st);
  return a;
}

/* ---- open, migrate, check ---- */

static int user_version(Store *s, int *v, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "PRAGMA user_version", err);
  if (!st) return -1;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) { sdb_fail(s, err, "user_version"); sqlite3_finalize(st); return -1; }
  *v = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  return 0;
}

static int migrate(Store *s, Err *err) {
  int v;
  if (user_version(s, &v, err)) return -1;
  if (v > STORE_SCHEMA_VERSION)
    return err_set(err, "store: schema version %d is newer than this maskd understands (%d)", v, STORE_SCHEMA_VERSION);
  while (v < STORE_SCHEMA_VERSION) {
    if (sdb_begin(s, err)) return -1;
    /* Another process may have migrated while we waited for the lock. */
    if (user_version(s, &v, err)) return sdb_rollback(s);
    if (v >= STORE_SCHEMA_VERSION) { sdb_commit(s, err); break; }
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
    if (sdb_exec(s, MIGRATIONS[v], err) || sdb_exec(s, pragma, err)) { err_prefix(err, "migration"); return sdb_rollback(s); }
    if (sdb_commit(s, err)) return -1;
    v++;
  }
  return 0;
}

/* maskd_pipeline(json_type(config, '$.architectures'), json_extract(config, '$.architectures[0]')):
** the pipeline a config's architectures serve (config_task_of_architecture of the first name, or
** of none when the list is absent or null; config_task_pipeline), NULL for none or for a list that
** holds no name first: the Hub's listing filters and pages on it in SQL and answers what model
** info (hub_pipeline_of) and serving answer for the same config. */
static void sql_pipeline(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const char *type = (const char *)sqlite3_value_text(argv[0]);
  const char *p = NULL;
  if (!type || !strcmp(type, "null")) p = config_task_pipeline(config_task_of_architecture(NULL));
  else if (!strcmp(type, "array") && sqlite3_value_type(argv[1]) == SQLITE_TEXT)
    p = config_task_pipeline(config_task_of_architecture((const char *)sqlite3_value_text(argv[1])));
  if (p) sqlite3_result_text(ctx, p, -1, SQLITE_STATIC);
  else sqlite3_result_null(ctx);
}

/* 1 (err set, ERR_BAD_INPUT) when s holds tables but no maskd schema (user_version 0):
** another program's database, which migrating would fill with maskd's tables and switch
** to WAL for good. Checked before any pragma that writes. */
static int foreign_database(Store *s, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT (SELECT user_version FROM pragma_user_version), "
                                 "(SELECT count(*) FROM sqlite_schema)", err);
  if (!st) return 1;
  int rc = sqlite3_step(st), foreign = 0;
  if (rc != SQLITE_ROW) sdb_fail(s, err, "reading the schema");
  else if (sqlite3_column_int64(st, 0) == 0 && sqlite3_column_int64(st, 1) > 0)
    foreign = err_setk(err, ERR_BAD_INPUT, "%s is an SQLite database without maskd's schema (another program's?): "
                       "maskd will not write into it; give --db a new path or a maskd store", s->path) != 0;
  sqlite3_finalize(st);
  return rc != SQLITE_ROW || foreign;
}

Store *store_open(const char *path, Err *err) {
  Store *s = calloc(1, sizeof *s);
  if (!s) { err_setk(err, ERR_NOMEM, "store: out of memory"); return NULL; }
  snprintf(s->path, sizeof s->path, "%s", path);
  s->alive_fd = -1;
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    err_setk(err, ERR_IO, "%s: %s", path, s->db ? sqlite3_errmsg(s->db) : "cannot open");
    store_close(s);
    return NULL;
  }
  /* How long a write waits for another connection's write transaction before it fails
  ** with ERR_BUSY: 30 s, or MASKD_BUSY_TIMEOUT_MS (tests make a busy store answer at once). */
  const char *bt = getenv("MASKD_BUSY_TIMEOUT_MS");
  char *end = NULL;
  long ms = bt && *bt ? strtol(bt, &end, 10) : -1;
  s->busy_ms = end && !*end && ms >= 0 && ms <= 3600000 ? (int)ms : 30000;
  sqlite3_busy_timeout(s->db, s->busy_ms);
  sqlite3_extended_result_codes(s->db, 1);
  if (sqlite3_create_function(s->db, "maskd_pipeline", 2, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
                              sql_pipeline, NULL, NULL) != SQLITE_OK) {
    err_setk(err, ERR_NOMEM, "%s: %s", path, sqlite3_errmsg(s->db));
    store_close(s);
    return NULL;
  }
  /* Checkpoints are big and keep-last-N deletes them, so freed pages must go back
  ** to the file system: incremental auto-vacuum and a WAL truncated back to 64 MiB
  ** after it grew for a large push. auto_vacuum is set only on a file with no pages
  ** yet (it takes effect only before the first table anyway): on an existing file the
  ** pragma takes the write lock, so every open waited out any other writer's
  ** transaction (and failed after the busy timeout), and a read-only file could not
  ** be opened at all. Reading page_count takes no lock in WAL mode. */
  sqlite3_stmt *pc = sdb_prep(s, "PRAGMA page_count", err);
  int pc_rc = pc ? sqlite3_step(pc) : SQLITE_ERROR;
  /* A WAL store is read through its -shm file, which SQLite makes beside it: a reader
  ** that may not write the folder (and finds no -shm there) gets "attempt to write a
  ** readonly database", which names neither. */
  if (pc_rc != SQLITE_ROW && (sqlite3_errcode(s->db) & 0xff) == SQLITE_READONLY) {
    sqlite3_finalize(pc);
    err_setk(err, ERR_IO, "%s: cannot read this store: SQLite needs to make its -shm file beside it, in a folder this "
             "user may not write (a WAL store's readers need the folder writable)", path);
    store_close(s);
    return NULL;
  }
  int fresh = pc_rc == SQLITE_ROW && sqlite3_column_int64(pc, 0) == 0;
  if (pc && pc_rc != SQLITE_ROW) sdb_fail(s, err, "page_count");
  sqlite3_finalize(pc);
  if (pc_rc == SQLITE_ROW && !fresh && foreign_database(s, err)) {
    store_close(s);
    return NULL;
  }
  if (pc_rc != SQLITE_ROW || (fresh && sdb_exec(s, "PRAGMA auto_vacuum = INCREMENTAL", err)) ||
      sdb_exec(s, "PRAGMA journal_size_limit = 67108864", err)) {
    err_prefix(err, path);
    store_close(s);
    return NULL;
  }
  /* WAL: readers never block the writer and a killed writer leaves the last
  ** committed state. synchronous=NORMAL is durable across process crashes (only
  ** a power loss can drop the newest transactions, never corrupt). */
  char *mode = NULL;
  sqlite3_stmt *st = sdb_prep(s, "PRAGMA journal_mode = WAL", err);
  if (st && sqlite3_step(st) == SQLITE_ROW) mode = strdup((const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  if (!mode || strcmp(mode, "wal") != 0) {
    if (st) err_setk(err, ERR_IO, "cannot use WAL mode (%s)", mode ? mode : sqlite3_errmsg(s->db));
    err_prefix(err, path);
    free(mode);
    store_close(s);
    return NULL;
  }
  free(mode);
  /* secure_delete FAST, not the ON that Debian's SQLite (SQLITE_SECURE_DELETE) starts with:
  ** ON writes zeros over every page a delete frees, and a checkpoint's blob is hundreds of
  ** MB of overflow pages, so dropping one held the write lock for seconds (8 s for 224 MB
  ** here) while training waited and every other writer queued. FAST clears deleted rows
  ** from the b-tree pages it writes anyway and leaves freed overflow pages as they were,
  ** until they are reused or store_gc's incremental_vacuum cuts them off the file. */
  if (sdb_exec(s, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA secure_delete = FAST", err) ||
      migrate(s, err)) {
    err_prefix(err, path);
    store_close(s);
    return NULL;
  }
  /* A push killed mid-stream leaves its temporary rows: taken here when their process is
  ** gone (only reads when there are none, and never waits for the lock). */
  sdb_sweep_streams(s);
  return s;
}

void store_close(Store *s) {
  if (!s) return;
  if (s->alive_fd >= 0) close(s->alive_fd);   /* releases the runs' locks it held */
  sqlite3_close(s->db);
  free(s);
}

int store_in_transaction(const Store *s) { return s && !sqlite3_get_autocommit(s->db); }

int store_schema_version(Store *s) {
  int v = -1;
  user_version(s, &v, NULL);
  return v;
}

int store_integrity_check(Store *s, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "PRAGMA integrity_check", err);
  if (!st) return -1;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
    err_set(err, "store: integrity_check: %s", rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(st);
  st = sdb_prep(s, "PRAGMA foreign_key_check", err);
  if (!st) return -1;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    err_set(err, "store: foreign_key_check: table %s row %lld refers to a missing %s", sqlite3_column_text(st, 0),
            (long long)sqlite3_column_int64(st, 1), sqlite3_column_text(st, 2));
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : sdb_fail(s, err, "foreign_key_check");
}
