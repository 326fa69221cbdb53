/* The SQLite store. Each public function that writes runs as one BEGIN IMMEDIATE
** transaction (taking the write lock up front, so a busy database waits instead
** of failing half-way) and rolls back on any error. Inputs are validated before
** the transaction starts, and CHECK / FOREIGN KEY constraints in the schema catch
** whatever slips through, so bad input is refused without touching the data. */
#include "store/store.h"
#include "engine/core/now.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/sha256.h"

struct Store {
  sqlite3 *db;
  char path[512];
  uint64_t streams;   /* streamed blobs written on this connection: names their temporary keys */
};

/* Blobs are stored in chunks: SQLite caps one value at 1e9 bytes, and a base
** model's optimizer state comes close to that. */
#define CHUNK_BYTES (16 << 20)

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
};
#define N_MIGRATIONS ((int)(sizeof MIGRATIONS / sizeof MIGRATIONS[0]))
_Static_assert(N_MIGRATIONS == STORE_SCHEMA_VERSION, "one migration per schema version");

/* ---- helpers ---- */

static int db_err(Store *s, Err *err, const char *what) {
  return err_setk(err, ERR_IO, "store: %s: %s", what, sqlite3_errmsg(s->db));
}

static int exec(Store *s, const char *sql, Err *err) {
  char *msg = NULL;
  if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    err_setk(err, ERR_IO, "store: %s", msg ? msg : sqlite3_errmsg(s->db));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

static sqlite3_stmt *prep(Store *s, const char *sql, Err *err) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
    db_err(s, err, "prepare");
    return NULL;
  }
  return st;
}

static int begin(Store *s, Err *err) { return exec(s, "BEGIN IMMEDIATE", err); }
static int commit(Store *s, Err *err) {
  if (exec(s, "COMMIT", err) == 0) return 0;
  sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}
static int rollback(Store *s) {
  if (!sqlite3_get_autocommit(s->db)) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
  return -1;
}

/* Runs a statement that returns no rows; -1 with the database's message on error. */
static int step_done(Store *s, sqlite3_stmt *st, Err *err, const char *what) {
  int rc = sqlite3_step(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) { db_err(s, err, what); sqlite3_finalize(st); return -1; }
  sqlite3_finalize(st);
  return 0;
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
  if (v) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

/* SQLite turns NaN into NULL anyway; infinities would become REALs JSON cannot
** carry, so every non-finite value is stored as NULL. */
static void bind_real(sqlite3_stmt *st, int i, double v) {
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

/* A JSON text that must hold an object. */
static int check_json_object(const char *what, const char *text, Err *err) {
  if (!text) return err_setk(err, ERR_INVALID, "%s: missing", what);
  json_error_t je;
  /* Integers as reals: a valid file may hold one past int64 (tokenizer_config.json's
  ** model_max_length is 1e30 written out), and SQLite's json_valid takes it too. */
  json_t *v = json_loads(text, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
  if (!v) return err_setk(err, ERR_INVALID, "%s: malformed JSON at line %d, column %d: %s", what, je.line, je.column, je.text);
  int ok = json_is_object(v);
  json_decref(v);
  return ok ? 0 : err_setk(err, ERR_INVALID, "%s: expected a JSON object", what);
}

/* text is a JSON array (the confusion list of an epoch). */
static int check_json_array(const char *what, const char *text, Err *err) {
  json_error_t je;
  json_t *v = json_loads(text, 0, &je);
  if (!v) return err_setk(err, ERR_INVALID, "%s: malformed JSON at line %d, column %d: %s", what, je.line, je.column, je.text);
  int ok = json_is_array(v);
  json_decref(v);
  return ok ? 0 : err_setk(err, ERR_INVALID, "%s: expected a JSON array", what);
}

static int one_of(const char *v, const char *const *set) {
  for (; *set; set++)
    if (v && strcmp(v, *set) == 0) return 1;
  return 0;
}

static const char *const JOB_KINDS[] = {"tokenizer", "prepare", "train", NULL};

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
      if (one_of(sqlite3_column_name(st, i), json_cols)) {
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
static json_t *rows_json(Store *s, sqlite3_stmt *st, Err *err) {
  json_t *a = json_array();
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) json_array_append_new(a, row_json(st));
  if (rc != SQLITE_DONE) { db_err(s, err, "query"); json_decref(a); a = NULL; }
  sqlite3_finalize(st);
  return a;
}

/* ---- open, migrate, check ---- */

static int user_version(Store *s, int *v, Err *err) {
  sqlite3_stmt *st = prep(s, "PRAGMA user_version", err);
  if (!st) return -1;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) { db_err(s, err, "user_version"); sqlite3_finalize(st); return -1; }
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
    if (begin(s, err)) return -1;
    /* Another process may have migrated while we waited for the lock. */
    if (user_version(s, &v, err)) return rollback(s);
    if (v >= STORE_SCHEMA_VERSION) { commit(s, err); break; }
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
    if (exec(s, MIGRATIONS[v], err) || exec(s, pragma, err)) { err_prefix(err, "migration"); return rollback(s); }
    if (commit(s, err)) return -1;
    v++;
  }
  return 0;
}

Store *store_open(const char *path, Err *err) {
  Store *s = calloc(1, sizeof *s);
  if (!s) { err_setk(err, ERR_NOMEM, "store: out of memory"); return NULL; }
  snprintf(s->path, sizeof s->path, "%s", path);
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) != SQLITE_OK) {
    err_setk(err, ERR_IO, "%s: %s", path, s->db ? sqlite3_errmsg(s->db) : "cannot open");
    store_close(s);
    return NULL;
  }
  sqlite3_busy_timeout(s->db, 30000);
  sqlite3_extended_result_codes(s->db, 1);
  /* Checkpoints are big and keep-last-N deletes them, so freed pages must go back
  ** to the file system: incremental auto-vacuum (only takes effect on a new file,
  ** before the first table) and a WAL truncated back to 64 MiB after it grew for a
  ** large push. */
  if (exec(s, "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA journal_size_limit = 67108864", err)) {
    err_prefix(err, path);
    store_close(s);
    return NULL;
  }
  /* WAL: readers never block the writer and a killed writer leaves the last
  ** committed state. synchronous=NORMAL is durable across process crashes (only
  ** a power loss can drop the newest transactions, never corrupt). */
  char *mode = NULL;
  sqlite3_stmt *st = prep(s, "PRAGMA journal_mode = WAL", err);
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
  if (exec(s, "PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL", err) || migrate(s, err)) {
    err_prefix(err, path);
    store_close(s);
    return NULL;
  }
  return s;
}

void store_close(Store *s) {
  if (!s) return;
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
  sqlite3_stmt *st = prep(s, "PRAGMA integrity_check", err);
  if (!st) return -1;
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
    err_set(err, "store: integrity_check: %s", rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 0) : sqlite3_errmsg(s->db));
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(st);
  st = prep(s, "PRAGMA foreign_key_check", err);
  if (!st) return -1;
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    err_set(err, "store: foreign_key_check: table %s row %lld refers to a missing %s", sqlite3_column_text(st, 0),
            (long long)sqlite3_column_int64(st, 1), sqlite3_column_text(st, 2));
    sqlite3_finalize(st);
    return -1;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : db_err(s, err, "foreign_key_check");
}

/* ---- blobs ---- */

/* Inserts a blob inside the caller's transaction (no-op when present). */
static int blob_put_tx(Store *s, const void *data, size_t len, const char *hex, Err *err) {
  if ((uint64_t)len > STORE_MAX_BLOB) return err_setk(err, ERR_TOO_LARGE, "store: blob of %zu bytes, more than a blob may hold", len);
  sqlite3_stmt *st = prep(s, "INSERT OR IGNORE INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)len);
  sqlite3_bind_double(st, 3, now_wall());
  if (step_done(s, st, err, "blob")) return -1;
  if (sqlite3_changes(s->db) == 0) return 0;   /* the same content is already there */
  const unsigned char *p = data;
  size_t idx = 0, off = 0;
  do {
    size_t n = len - off < CHUNK_BYTES ? len - off : CHUNK_BYTES;
    st = prep(s, "INSERT INTO blob_chunks(sha256, idx, data) VALUES (?, ?, ?)", err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)idx);
    sqlite3_bind_blob64(st, 3, n ? p + off : (const void *)"", n, SQLITE_STATIC);
    if (step_done(s, st, err, "blob chunk")) return -1;
    off += n;
    idx++;
  } while (off < len);
  return 0;
}

/* A streamed blob: chunks are written under a temporary key as the bytes arrive and
** hashed on the way; stream_blob_tx moves them to the real key at the end. */
struct StoreBlobWriter {
  Store *s;
  StoreSha256 sha;
  unsigned char *buf;     /* one chunk */
  size_t fill, written, len;
  int64_t idx;
  const char *key;
  int failed;
};

static int chunk_insert(Store *s, const char *key, int64_t idx, const void *data, size_t n, Err *err) {
  sqlite3_stmt *st = prep(s, "INSERT INTO blob_chunks(sha256, idx, data) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)idx);
  sqlite3_bind_blob64(st, 3, n ? data : (const void *)"", n, SQLITE_STATIC);
  return step_done(s, st, err, "blob chunk");
}

int store_blob_write(StoreBlobWriter *w, const void *data, size_t n, Err *err) {
  if (w->failed) return err_setk(err, ERR_INVALID, "store: blob stream: write after a failed write");
  if (n > w->len - w->written) {
    w->failed = 1;
    return err_setk(err, ERR_INVALID, "store: blob stream: more than the %zu bytes announced", w->len);
  }
  const unsigned char *p = data;
  store_sha256_update(&w->sha, p, n);
  w->written += n;
  while (n) {
    size_t k = CHUNK_BYTES - w->fill < n ? CHUNK_BYTES - w->fill : n;
    memcpy(w->buf + w->fill, p, k);
    w->fill += k;
    p += k;
    n -= k;
    /* Full chunks go out at once, so the rows match blob_put_tx's chunking. */
    if (w->fill == CHUNK_BYTES) {
      if (chunk_insert(w->s, w->key, w->idx, w->buf, w->fill, err)) { w->failed = 1; return -1; }
      w->idx++;
      w->fill = 0;
    }
  }
  return 0;
}

int store_blob_sink(void *w, const void *data, size_t n, Err *err) { return store_blob_write(w, data, n, err); }

/* Writes a streamed blob inside the caller's transaction; hex receives its sha256.
** Content already stored is kept once: the temporary rows are dropped. */
static int stream_blob_tx(Store *s, const StoreStream *in, char hex[65], Err *err) {
  if (!in->produce) return err_setk(err, ERR_INVALID, "push: a stream without a producer");
  if (in->len == 0) return err_setk(err, ERR_INVALID, "push: an empty stream");
  if ((uint64_t)in->len > STORE_MAX_BLOB)
    return err_setk(err, ERR_TOO_LARGE, "store: blob of %zu bytes, more than a blob may hold", in->len);
  /* The key must pass CHECK (length = 64) and the foreign key, and can never be a
  ** sha256 ('~' is not hex); the counter keeps two streams of one push apart. */
  char key[65];
  int k = snprintf(key, sizeof key, "~stream-%d-%llu", (int)getpid(), (unsigned long long)++s->streams);
  memset(key + k, '~', 64 - (size_t)k);
  key[64] = '\0';
  sqlite3_stmt *st = prep(s, "INSERT INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)in->len);
  sqlite3_bind_double(st, 3, now_wall());
  if (step_done(s, st, err, "blob")) return -1;
  StoreBlobWriter w = {.s = s, .len = in->len, .key = key, .buf = malloc(CHUNK_BYTES)};
  if (!w.buf) return err_setk(err, ERR_NOMEM, "store: out of memory for a blob chunk");
  store_sha256_init(&w.sha);
  int rc = in->produce(in->ctx, &w, err);
  if (rc == 0 && w.failed) rc = err_setk(err, ERR_INVALID, "store: blob stream: the producer ignored a failed write");
  if (rc == 0 && w.written != w.len)
    rc = err_setk(err, ERR_INVALID, "store: blob stream: %zu bytes of the %zu announced", w.written, w.len);
  if (rc == 0 && w.fill) rc = chunk_insert(s, key, w.idx, w.buf, w.fill, err);
  free(w.buf);
  if (rc) return -1;
  unsigned char d[32];
  store_sha256_final(&w.sha, d, hex);
  st = prep(s, "INSERT OR IGNORE INTO blobs(sha256, size, created) VALUES (?, ?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, (sqlite3_int64)in->len);
  sqlite3_bind_double(st, 3, now_wall());
  if (step_done(s, st, err, "blob")) return -1;
  if (sqlite3_changes(s->db) == 1) {
    st = prep(s, "UPDATE blob_chunks SET sha256 = ? WHERE sha256 = ?", err);
    if (!st) return -1;
    sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if (step_done(s, st, err, "blob chunks")) return -1;
  }
  /* Cascades to the chunks left under the key when the content was there already. */
  st = prep(s, "DELETE FROM blobs WHERE sha256 = ?", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  return step_done(s, st, err, "blob");
}

int store_blob_put(Store *s, const void *data, size_t len, char hex[65], Err *err) {
  if (!data && len) return err_set(err, "store: blob: no data");
  store_sha256_hex(data ? data : "", len, hex);
  if (begin(s, err)) return -1;
  if (blob_put_tx(s, data ? data : "", len, hex, err)) return rollback(s);
  return commit(s, err);
}

static int is_hex(const char *h, size_t min, size_t max) {
  size_t n = h ? strlen(h) : 0;
  if (n < min || n > max) return 0;
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)h[i]) || isupper((unsigned char)h[i])) return 0;
  return 1;
}

/* ---- a blob read in place ---- */

struct StoreBlobReader {
  Store *s;
  char hex[65];
  uint64_t len;
  int n;                  /* chunks */
  int64_t *rowid;         /* chunk i's row in blob_chunks */
  uint64_t *start;        /* chunk i's first byte in the blob; start[n] = len */
  sqlite3_blob *blob;     /* chunk cur's value, open for reading */
  int cur;
  StoreSha256 sha;        /* the bytes [0, hashed) so far, hashed as they were read in order */
  uint64_t hashed;
  int own_snapshot;       /* the reader began the read snapshot, and close ends it */
};

void store_blob_close(StoreBlobReader *r) {
  if (!r) return;
  if (r->blob) sqlite3_blob_close(r->blob);
  if (r->own_snapshot) exec(r->s, "COMMIT", NULL);   /* ends the read snapshot */
  free(r->rowid);
  free(r->start);
  free(r);
}

/* store_blob_open(), which begins its own read snapshot when own_snapshot is set;
** else the reader reads inside the caller's transaction and leaves it open. */
static StoreBlobReader *reader_open(Store *s, const char *hex, int own_snapshot, uint64_t *len, Err *err) {
  if (!is_hex(hex, 64, 64)) { err_set(err, "store: blob \"%.70s\": not a sha256", hex ? hex : ""); return NULL; }
  StoreBlobReader *r = calloc(1, sizeof *r);
  if (!r) { err_setk(err, ERR_NOMEM, "out of memory"); return NULL; }
  /* One read snapshot for every read: a writer running meanwhile changes nothing we see. */
  if (own_snapshot && exec(s, "BEGIN", err)) { free(r); return NULL; }
  r->own_snapshot = own_snapshot;
  r->s = s;
  r->cur = -1;
  snprintf(r->hex, sizeof r->hex, "%s", hex);
  store_sha256_init(&r->sha);
  sqlite3_stmt *st =
      prep(s, "SELECT size, (SELECT count(*) FROM blob_chunks WHERE sha256 = ?1) FROM blobs WHERE sha256 = ?1", err);
  if (!st) goto fail;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    if (rc == SQLITE_DONE) err_set(err, "store: blob %.12s is missing", hex);
    else db_err(s, err, "blob");
    goto fail;
  }
  sqlite3_int64 size = sqlite3_column_int64(st, 0), chunks = sqlite3_column_int64(st, 1);
  sqlite3_finalize(st);
  /* Chunks are CHUNK_BYTES each: more than one per KiB is damage (and would size the tables below). */
  if (size < 0 || (uint64_t)size > STORE_MAX_BLOB || chunks < 0 || chunks > (size / 1024 + 2)) {
    err_set(err, "store: blob %.12s is damaged (its size %lld or %lld chunks are out of range)", hex, (long long)size,
            (long long)chunks);
    goto fail;
  }
  r->len = (uint64_t)size;
  r->rowid = malloc(((size_t)chunks + 1) * sizeof *r->rowid);
  r->start = malloc(((size_t)chunks + 1) * sizeof *r->start);
  if (!r->rowid || !r->start) { err_setk(err, ERR_NOMEM, "out of memory"); goto fail; }
  /* length() reads a value's size from its record header, not its bytes. */
  if (!(st = prep(s, "SELECT id, idx, length(data) FROM blob_chunks WHERE sha256 = ? ORDER BY idx", err))) goto fail;
  sqlite3_bind_text(st, 1, hex, -1, SQLITE_STATIC);
  uint64_t at = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && r->n < chunks) {
    sqlite3_int64 n = sqlite3_column_int64(st, 2);
    if (sqlite3_column_int64(st, 1) != r->n || n < 0 || (uint64_t)n > r->len - at) break;
    r->rowid[r->n] = sqlite3_column_int64(st, 0);
    r->start[r->n++] = at;
    at += (uint64_t)n;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) { db_err(s, err, "blob"); goto fail; }
  if (rc == SQLITE_ROW || r->n != chunks || at != r->len) {
    err_set(err, "store: blob %.12s is damaged (chunks do not add up)", hex);
    goto fail;
  }
  r->start[r->n] = at;
  *len = r->len;
  return r;
fail:
  store_blob_close(r);
  return NULL;
}

StoreBlobReader *store_blob_open(Store *s, const char *hex, uint64_t *len, Err *err) { return reader_open(s, hex, 1, len, err); }

int store_blob_read(StoreBlobReader *r, uint64_t offset, void *dst, size_t n, Err *err) {
  if (offset > r->len || n > r->len - offset)
    return err_setk(err, ERR_INVALID, "store: blob %.12s: bytes [%llu, +%zu) past its %llu", r->hex, (unsigned long long)offset, n,
                    (unsigned long long)r->len);
  unsigned char *p = dst;
  uint64_t at = offset;
  size_t left = n;
  while (left) {
    /* The chunk holding byte at: the current one, its next, or a binary search. */
    int c = r->cur;
    if (c < 0 || at < r->start[c] || at >= r->start[c + 1]) {
      int lo = 0, hi = r->n - 1;
      while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (r->start[mid] <= at) lo = mid; else hi = mid - 1;
      }
      c = lo;
      int rc = r->blob ? sqlite3_blob_reopen(r->blob, r->rowid[c])
                       : sqlite3_blob_open(r->s->db, "main", "blob_chunks", "data", r->rowid[c], 0, &r->blob);
      if (rc != SQLITE_OK) { r->cur = -1; return db_err(r->s, err, "blob chunk"); }
      r->cur = c;
    }
    size_t k = (size_t)(r->start[c + 1] - at) < left ? (size_t)(r->start[c + 1] - at) : left;
    if (sqlite3_blob_read(r->blob, p, (int)k, (int)(at - r->start[c])) != SQLITE_OK) return db_err(r->s, err, "blob chunk");
    p += k;
    at += k;
    left -= k;
  }
  /* Reads that continue the hashed prefix extend it: a front-to-back reader gets the check for free. */
  if (offset <= r->hashed && offset + n > r->hashed) {
    store_sha256_update(&r->sha, (const unsigned char *)dst + (r->hashed - offset), (size_t)(offset + n - r->hashed));
    r->hashed = offset + n;
  }
  return 0;
}

int store_blob_verify(StoreBlobReader *r, Err *err) {
  unsigned char *buf = malloc(1 << 20);
  if (!buf) return err_setk(err, ERR_NOMEM, "out of memory");
  while (r->hashed < r->len) {
    size_t k = r->len - r->hashed < (1u << 20) ? (size_t)(r->len - r->hashed) : (size_t)1 << 20;
    if (store_blob_read(r, r->hashed, buf, k, err)) { free(buf); return -1; }
  }
  free(buf);
  unsigned char digest[32];
  char got[65];
  StoreSha256 sha = r->sha;
  store_sha256_final(&sha, digest, got);
  if (strcmp(got, r->hex) != 0) return err_set(err, "store: blob %.12s is damaged (sha256 differs)", r->hex);
  return 0;
}

/* Reads a blob inside the caller's read snapshot: a reader's checks, read whole. */
static int blob_get_tx(Store *s, const char *hex, void **data, size_t *len, Err *err) {
  *data = NULL;
  *len = 0;
  uint64_t size;
  StoreBlobReader *r = reader_open(s, hex, 0, &size, err);
  if (!r) return -1;
  unsigned char *buf = malloc((size_t)size + 1);
  int rc = -1;
  if (!buf) err_setk(err, ERR_NOMEM, "store: out of memory for a blob of %lld bytes", (long long)size);
  else if (store_blob_read(r, 0, buf, (size_t)size, err) == 0 && store_blob_verify(r, err) == 0) rc = 0;
  store_blob_close(r);
  if (rc) { free(buf); return -1; }
  buf[size] = '\0';   /* text blobs (tokenizer.json) can be used as C strings */
  *data = buf;
  *len = (size_t)size;
  return 0;
}

int store_blob_get(Store *s, const char *hex, void **data, size_t *len, Err *err) {
  /* A read transaction: the chunks come from one snapshot even if a writer runs. */
  if (exec(s, "BEGIN", err)) return -1;
  int rc = blob_get_tx(s, hex, data, len, err);
  exec(s, "COMMIT", NULL);
  return rc;
}

int store_gc(Store *s, int64_t *removed, Err *err) {
  if (begin(s, err)) return -1;
  if (exec(s,
           "DELETE FROM blobs WHERE sha256 NOT IN ("
           " SELECT weights FROM revisions"
           " UNION SELECT optimizer FROM revisions WHERE optimizer IS NOT NULL"
           " UNION SELECT tokenizer FROM revisions WHERE tokenizer IS NOT NULL"
           " UNION SELECT blob FROM tokenizers)",
           err))
    return rollback(s);
  int64_t n = sqlite3_changes(s->db);
  if (commit(s, err)) return -1;
  /* Give the freed pages back (its own transaction; harmless when there are none). */
  if (n > 0 && exec(s, "PRAGMA incremental_vacuum", err)) return -1;
  if (removed) *removed = n;
  return 0;
}

/* ---- tokenizers ---- */

/* A registered thing's provenance: NULL, or a JSON object; job 0 (none) or an id. */
static int check_source(const char *what, const char *source_json, int64_t job, Err *err) {
  if (source_json && check_json_object(what, source_json, err)) return -1;
  if (job < 0) return err_setk(err, ERR_INVALID, "%s: job %lld is not a job id", what, (long long)job);
  return 0;
}

static void bind_job(sqlite3_stmt *st, int i, int64_t job) {
  if (job > 0) sqlite3_bind_int64(st, i, job);
  else sqlite3_bind_null(st, i);
}

int64_t store_tokenizer_add(Store *s, const char *name, const char *tokenizer_json, int vocab_size,
                            const char *source_json, int64_t job, Err *err) {
  if (store_check_name("tokenizer", name, err) || check_json_object("tokenizer.json", tokenizer_json, err) ||
      check_source("tokenizer source", source_json, job, err))
    return -1;
  if (vocab_size <= 0) return err_setk(err, ERR_INVALID, "tokenizer: vocab_size %d must be positive", vocab_size);
  char hex[65];
  size_t len = strlen(tokenizer_json);
  store_sha256_hex(tokenizer_json, len, hex);
  if (begin(s, err)) return -1;
  if (blob_put_tx(s, tokenizer_json, len, hex, err)) return rollback(s);
  sqlite3_stmt *st = prep(s, "INSERT INTO tokenizers(name, vocab_size, blob, created, source, job_id) VALUES (?, ?, ?, ?, ?, ?)", err);
  if (!st) return rollback(s);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, vocab_size);
  sqlite3_bind_text(st, 3, hex, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 4, now_wall());
  bind_text(st, 5, source_json);
  bind_job(st, 6, job);
  if (sqlite3_step(st) != SQLITE_DONE) {
    int code = sqlite3_extended_errcode(s->db);
    if (code == SQLITE_CONSTRAINT_UNIQUE) err_setk(err, ERR_CONFLICT, "tokenizer \"%s\" already exists", name);
    else db_err(s, err, "tokenizer");
    sqlite3_finalize(st);
    return rollback(s);
  }
  sqlite3_finalize(st);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (commit(s, err)) return -1;
  return id;
}

int store_tokenizer_get(Store *s, const char *name, char **tokenizer_json, int64_t *id, Err *err) {
  *tokenizer_json = NULL;
  if (exec(s, "BEGIN", err)) return -1;
  int rc = -1;
  sqlite3_stmt *st = prep(s, "SELECT id, blob FROM tokenizers WHERE name = ?", err);
  if (st) {
    bind_text(st, 1, name);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
      char hex[65];
      snprintf(hex, sizeof hex, "%s", (const char *)sqlite3_column_text(st, 1));
      if (id) *id = sqlite3_column_int64(st, 0);
      void *data;
      size_t len;
      if (blob_get_tx(s, hex, &data, &len, err) == 0) { *tokenizer_json = data; rc = 0; }
    } else if (r == SQLITE_DONE) {
      err_setk(err, ERR_NOT_FOUND, "tokenizer \"%s\" does not exist", name ? name : "");
    } else {
      db_err(s, err, "tokenizer");
    }
    sqlite3_finalize(st);
  }
  exec(s, "COMMIT", NULL);
  return rc;
}

#define TOKENIZER_COLS "SELECT id, name, vocab_size, blob AS sha256, created, job_id AS job, source FROM tokenizers"

json_t *store_tokenizers_list(Store *s, Err *err) {
  sqlite3_stmt *st = prep(s, TOKENIZER_COLS " ORDER BY id", err);
  return st ? rows_json(s, st, err) : NULL;
}

/* The one row of a query by name, or NULL with "<what> "NAME" does not exist". */
static json_t *one_named(Store *s, sqlite3_stmt *st, const char *what, const char *name, Err *err) {
  if (!st) return NULL;
  bind_text(st, 1, name);
  json_t *rows = rows_json(s, st, err);
  if (!rows) return NULL;
  json_t *o = json_incref(json_array_get(rows, 0));
  json_decref(rows);
  if (!o) err_setk(err, ERR_NOT_FOUND, "%s \"%.128s\" does not exist", what, name ? name : "");
  return o;
}

json_t *store_tokenizer_info(Store *s, const char *name, Err *err) {
  return one_named(s, prep(s, TOKENIZER_COLS " WHERE name = ?", err), "tokenizer", name, err);
}

/* ---- datasets ---- */

int64_t store_dataset_add(Store *s, const char *name, const char *tokenizer, int seq_len, const StoreShard *shards,
                          int n_shards, const char *source_json, int64_t job, Err *err) {
  if (store_check_name("dataset", name, err) || check_source("dataset source", source_json, job, err)) return -1;
  if (seq_len <= 0) return err_setk(err, ERR_INVALID, "dataset: seq_len %d must be positive", seq_len);
  if (n_shards <= 0 || !shards) return err_setk(err, ERR_INVALID, "dataset: no shards");
  for (int i = 0; i < n_shards; i++) {
    if (store_check_name("split", shards[i].split, err)) return -1;
    if (!shards[i].path || !*shards[i].path) return err_setk(err, ERR_INVALID, "dataset: shard %d has no path", i);
    if (shards[i].n_samples < 0) return err_setk(err, ERR_INVALID, "dataset: shard %s has a negative sample count", shards[i].path);
  }
  if (begin(s, err)) return -1;
  sqlite3_int64 tok_id = 0;
  if (tokenizer) {
    sqlite3_stmt *st = prep(s, "SELECT id FROM tokenizers WHERE name = ?", err);
    if (!st) return rollback(s);
    sqlite3_bind_text(st, 1, tokenizer, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) tok_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (!tok_id) { err_setk(err, ERR_NOT_FOUND, "dataset: tokenizer \"%s\" does not exist", tokenizer); return rollback(s); }
  }
  sqlite3_stmt *st = prep(s, "INSERT INTO datasets(name, tokenizer_id, seq_len, created, source, job_id) VALUES (?, ?, ?, ?, ?, ?)", err);
  if (!st) return rollback(s);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  if (tok_id) sqlite3_bind_int64(st, 2, tok_id);
  else sqlite3_bind_null(st, 2);
  sqlite3_bind_int(st, 3, seq_len);
  sqlite3_bind_double(st, 4, now_wall());
  bind_text(st, 5, source_json);
  bind_job(st, 6, job);
  if (sqlite3_step(st) != SQLITE_DONE) {
    if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_UNIQUE) err_setk(err, ERR_CONFLICT, "dataset \"%s\" already exists", name);
    else db_err(s, err, "dataset");
    sqlite3_finalize(st);
    return rollback(s);
  }
  sqlite3_finalize(st);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  for (int i = 0; i < n_shards; i++) {
    st = prep(s, "INSERT INTO dataset_shards(dataset_id, split, path, n_samples) VALUES (?, ?, ?, ?)", err);
    if (!st) return rollback(s);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, shards[i].split, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, shards[i].path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, shards[i].n_samples);
    if (sqlite3_step(st) != SQLITE_DONE) {
      if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
        err_setk(err, ERR_INVALID, "dataset: shard %s listed twice in split %s", shards[i].path, shards[i].split);
      else db_err(s, err, "dataset shard");
      sqlite3_finalize(st);
      return rollback(s);
    }
    sqlite3_finalize(st);
  }
  if (commit(s, err)) return -1;
  return id;
}

/* A dataset's row: its split (the one split of its shards; NULL when several), the
** sample and shard counts summed over its shards. */
#define DATASET_COLS                                                                                              \
  "SELECT d.id, d.name, t.name AS tokenizer,"                                                                     \
  " (SELECT CASE WHEN COUNT(DISTINCT split) = 1 THEN MIN(split) END FROM dataset_shards WHERE dataset_id = d.id)" \
  " AS split, d.seq_len,"                                                                                         \
  " (SELECT COALESCE(SUM(n_samples), 0) FROM dataset_shards WHERE dataset_id = d.id) AS samples,"                \
  " (SELECT COUNT(*) FROM dataset_shards WHERE dataset_id = d.id) AS shards,"                                    \
  " d.created, d.job_id AS job, d.source FROM datasets d LEFT JOIN tokenizers t ON t.id = d.tokenizer_id"

json_t *store_dataset_get(Store *s, const char *name, Err *err) {
  json_t *d = one_named(s, prep(s, DATASET_COLS " WHERE d.name = ?", err), "dataset", name, err);
  if (!d) return NULL;
  sqlite3_stmt *st = prep(s, "SELECT split, path AS file, n_samples AS samples FROM dataset_shards WHERE dataset_id = ?"
                             " ORDER BY split, path", err);
  json_t *files = st ? (sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(d, "id"))), rows_json(s, st, err)) : NULL;
  if (!files) { json_decref(d); return NULL; }
  json_t *splits = json_object();
  size_t i;
  json_t *sh;
  json_array_foreach(files, i, sh) {
    const char *split = json_string_value(json_object_get(sh, "split"));
    json_t *agg = json_object_get(splits, split);
    if (!agg) { agg = json_pack("{s:i,s:i}", "shards", 0, "samples", 0); json_object_set_new(splits, split, agg); }
    json_object_set_new(agg, "shards", json_integer(json_integer_value(json_object_get(agg, "shards")) + 1));
    json_object_set_new(agg, "samples", json_integer(json_integer_value(json_object_get(agg, "samples")) +
                                                     json_integer_value(json_object_get(sh, "samples"))));
  }
  json_object_set_new(d, "splits", splits);
  json_object_set_new(d, "files", files);
  return d;
}

json_t *store_datasets_list(Store *s, Err *err) {
  sqlite3_stmt *st = prep(s, DATASET_COLS " ORDER BY d.id", err);
  return st ? rows_json(s, st, err) : NULL;
}

/* ---- runs ---- */

/* A new run; with job > 0 that job, which must be running, is linked to it in the same transaction. */
static int64_t run_create(Store *s, int64_t job, const char *name, const char *config_json, Err *err) {
  if (store_check_name("run", name, err) || check_json_object("run config", config_json, err)) return -1;
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "INSERT INTO runs(name, config, status, created) VALUES (?, ?, 'created', ?)", err);
  if (!st) return rollback(s);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, config_json, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, now_wall());
  if (step_done(s, st, err, "run")) return rollback(s);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (job > 0) {
    st = prep(s, "UPDATE jobs SET run_id = ? WHERE id = ? AND status = 'running'", err);
    if (!st) return rollback(s);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, job);
    if (step_done(s, st, err, "job")) return rollback(s);
    if (sqlite3_changes(s->db) != 1) { err_setk(err, ERR_CONFLICT, "job %lld does not exist or is not running", (long long)job); return rollback(s); }
  }
  if (commit(s, err)) return -1;
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
static int update_one(Store *s, sqlite3_stmt *st, const char *what, int64_t id, Err *err) {
  if (!st) return rollback(s);
  if (step_done(s, st, err, what)) return rollback(s);
  if (sqlite3_changes(s->db) != 1) { err_setk(err, ERR_NOT_FOUND, "%s %lld does not exist", what, (long long)id); return rollback(s); }
  return commit(s, err);
}

int store_run_set_status(Store *s, int64_t run, StoreStatus status, const char *error, Err *err) {
  if (status != STORE_STATUS_RUNNING && !store_status_ended(status))
    return err_setk(err, ERR_INVALID, "run status \"%s\": expected running, done, failed, interrupted or cancelled", store_status_name(status));
  if (begin(s, err)) return -1;
  int running = status == STORE_STATUS_RUNNING;
  sqlite3_stmt *st = prep(s,
                          running ? "UPDATE runs SET status = ?1, started = COALESCE(started, ?2), finished = NULL,"
                                    " error = ?3, pid = ?4 WHERE id = ?5"
                                  : "UPDATE runs SET status = ?1, finished = ?2, error = ?3, pid = ?4 WHERE id = ?5",
                          err);
  if (st) {
    sqlite3_bind_text(st, 1, store_status_name(status), -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, now_wall());
    bind_text(st, 3, error);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)getpid());
    sqlite3_bind_int64(st, 5, run);
  }
  return update_one(s, st, "run", run, err);
}

int store_run_progress(Store *s, int64_t run, int64_t step, int64_t total_steps, int64_t epoch, Err *err) {
  if (step < 0 || total_steps < 0 || epoch < 0) return err_setk(err, ERR_INVALID, "run progress: negative step, total or epoch");
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "UPDATE runs SET step = ?, total_steps = ?, epoch = ? WHERE id = ?", err);
  if (st) {
    sqlite3_bind_int64(st, 1, step);
    sqlite3_bind_int64(st, 2, total_steps);
    sqlite3_bind_int64(st, 3, epoch);
    sqlite3_bind_int64(st, 4, run);
  }
  return update_one(s, st, "run", run, err);
}

/* Replaces one of a run's JSON columns (its name from a fixed list, never from input)
** with an object. */
static int run_set_json(Store *s, int64_t run, const char *column, const char *json, Err *err) {
  if (check_json_object(column, json, err)) return -1;
  if (begin(s, err)) return -1;
  char sql[64];
  snprintf(sql, sizeof sql, "UPDATE runs SET %s = ? WHERE id = ?", column);
  sqlite3_stmt *st = prep(s, sql, err);
  if (st) {
    sqlite3_bind_text(st, 1, json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, run);
  }
  return update_one(s, st, "run", run, err);
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

static int pid_gone(sqlite3_int64 pid) {
  if (pid <= 0) return 1;
  if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) return 1;
  /* A killed process whose parent died too (an mpirun rank) may linger as a zombie
  ** until init reaps it: it runs no more. */
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%lld/stat", (long long)pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *close = strrchr(buf, ')');
  return close && close[1] == ' ' && close[2] == 'Z';
}

/* Marks rows of table still "running" whose pid is gone as "interrupted". */
static int recover(Store *s, const char *table, int *n, Err *err) {
  if (n) *n = 0;
  if (begin(s, err)) return -1;
  char sql[160];
  snprintf(sql, sizeof sql, "SELECT id, pid FROM %s WHERE status = 'running'", table);
  sqlite3_stmt *st = prep(s, sql, err);
  if (!st) return rollback(s);
  int64_t *ids = NULL;
  int k = 0, cap = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (!pid_gone(sqlite3_column_int64(st, 1))) continue;
    if (k == cap) {
      int64_t *more = realloc(ids, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *ids);
      if (!more) { free(ids); sqlite3_finalize(st); err_setk(err, ERR_NOMEM, "store: out of memory"); return rollback(s); }
      ids = more;
    }
    ids[k++] = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  for (int i = 0; i < k; i++) {
    snprintf(sql, sizeof sql,
             "UPDATE %s SET status = 'interrupted', finished = ?, error = COALESCE(error, 'the process ended while running')"
             " WHERE id = ?", table);
    st = prep(s, sql, err);
    if (!st) { free(ids); return rollback(s); }
    sqlite3_bind_double(st, 1, now_wall());
    sqlite3_bind_int64(st, 2, ids[i]);
    if (step_done(s, st, err, table)) { free(ids); return rollback(s); }
  }
  free(ids);
  if (commit(s, err)) return -1;
  if (n) *n = k;
  return 0;
}

int store_runs_recover(Store *s, int *n, Err *err) { return recover(s, "runs", n, err); }

/* Foreign-key failures name what was missing. */
static int run_exists(Store *s, int64_t run, Err *err) {
  sqlite3_stmt *st = prep(s, "SELECT 1 FROM runs WHERE id = ?", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, run);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "run %lld does not exist", (long long)run) : db_err(s, err, "run");
}

int store_step_metrics_add(Store *s, int64_t run, const StoreStepMetric *m, int n, Err *err) {
  if (n < 0 || (n > 0 && !m)) return err_setk(err, ERR_INVALID, "step metrics: bad count");
  for (int i = 0; i < n; i++)
    if (m[i].step < 0) return err_setk(err, ERR_INVALID, "step metrics: negative step %lld", (long long)m[i].step);
  if (begin(s, err)) return -1;
  if (run_exists(s, run, err)) return rollback(s);
  sqlite3_stmt *st = prep(s,
                          "INSERT OR REPLACE INTO step_metrics(run_id, step, epoch, loss, lr, grad_norm, tokens_per_s, time)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", err);
  if (!st) return rollback(s);
  double t = now_wall();
  for (int i = 0; i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, m[i].step);
    bind_real(st, 3, m[i].epoch);
    bind_real(st, 4, m[i].loss);
    bind_real(st, 5, m[i].lr);
    bind_real(st, 6, m[i].grad_norm);
    bind_real(st, 7, m[i].tokens_per_s);
    sqlite3_bind_double(st, 8, m[i].time > 0 && isfinite(m[i].time) ? m[i].time : t);
    if (sqlite3_step(st) != SQLITE_DONE) { db_err(s, err, "step metrics"); sqlite3_finalize(st); return rollback(s); }
  }
  sqlite3_finalize(st);
  return commit(s, err);
}

int store_epoch_metrics_add(Store *s, int64_t run, const StoreEpochMetric *m, Err *err) {
  if (!m || m->epoch < 0) return err_setk(err, ERR_INVALID, "epoch metrics: negative epoch");
  if (m->cls && m->confusion_json && check_json_array("epoch metrics: confusion", m->confusion_json, err)) return -1;
  if (begin(s, err)) return -1;
  if (run_exists(s, run, err)) return rollback(s);
  sqlite3_stmt *st = prep(s,
                          "INSERT OR REPLACE INTO epoch_metrics(run_id, epoch, train_loss, eval_loss, eval_accuracy,"
                          " perplexity, eval_runtime, time, macro_f1, weighted_f1, confusion)"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", err);
  if (!st) return rollback(s);
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_int64(st, 2, m->epoch);
  bind_real(st, 3, m->train_loss);
  bind_real(st, 4, m->eval_loss);
  bind_real(st, 5, m->eval_accuracy);
  bind_real(st, 6, m->perplexity);
  bind_real(st, 7, m->eval_runtime);
  sqlite3_bind_double(st, 8, m->time > 0 && isfinite(m->time) ? m->time : now_wall());
  bind_real(st, 9, m->cls ? m->macro_f1 : NAN);
  bind_real(st, 10, m->cls ? m->weighted_f1 : NAN);
  if (m->cls && m->confusion_json) sqlite3_bind_text(st, 11, m->confusion_json, -1, SQLITE_STATIC);
  else sqlite3_bind_null(st, 11);
  if (step_done(s, st, err, "epoch metrics")) return rollback(s);
  return commit(s, err);
}

int64_t store_run_find(Store *s, const char *id_or_name, Err *err) {
  if (!id_or_name || !*id_or_name) return err_setk(err, ERR_NOT_FOUND, "run: empty id or name");
  int digits = 1;
  for (const char *p = id_or_name; *p; p++) digits &= isdigit((unsigned char)*p) != 0;
  sqlite3_stmt *st = prep(s, digits ? "SELECT id FROM runs WHERE id = ?" : "SELECT id FROM runs WHERE name = ? ORDER BY id DESC LIMIT 1", err);
  if (!st) return -1;
  if (digits) sqlite3_bind_int64(st, 1, strtoll(id_or_name, NULL, 10));
  else sqlite3_bind_text(st, 1, id_or_name, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (id < 0) return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "run \"%s\" does not exist", id_or_name) : db_err(s, err, "run");
  return id;
}

/* The first row of a one-row query as an object, or NULL with "<what> N does not exist". */
static json_t *one_row(Store *s, sqlite3_stmt *st, const char *what, int64_t id, Err *err) {
  json_t *rows = rows_json(s, st, err);
  if (!rows) return NULL;
  json_t *o = json_incref(json_array_get(rows, 0));
  json_decref(rows);
  if (!o) err_setk(err, ERR_NOT_FOUND, "%s %lld does not exist", what, (long long)id);
  return o;
}

json_t *store_run_get(Store *s, int64_t run, Err *err) {
  sqlite3_stmt *st = prep(s,
                          "SELECT id, name, status, config, created, started, finished, error, step, total_steps, epoch, pid, dist,"
                          " results FROM runs WHERE id = ?", err);
  if (!st) return NULL;
  sqlite3_bind_int64(st, 1, run);
  return one_row(s, st, "run", run, err);
}

json_t *store_runs_list(Store *s, Err *err) {
  sqlite3_stmt *st = prep(s,
                          "SELECT r.id, r.name, r.status, r.created, r.started, r.finished, r.step, r.total_steps, r.epoch,"
                          " r.error,"
                          " (SELECT loss FROM step_metrics WHERE run_id = r.id ORDER BY step DESC LIMIT 1) AS last_loss,"
                          " (SELECT eval_loss FROM epoch_metrics WHERE run_id = r.id ORDER BY epoch DESC LIMIT 1) AS eval_loss"
                          " FROM runs r ORDER BY r.id DESC", err);
  return st ? rows_json(s, st, err) : NULL;
}

json_t *store_run_metrics(Store *s, int64_t run, int64_t since_step, Err *err) {
  if (exec(s, "BEGIN", err)) return NULL;
  json_t *out = NULL;
  if (run_exists(s, run, err)) goto done;
  sqlite3_stmt *st = prep(s,
                          "SELECT step, epoch, loss, lr, grad_norm, tokens_per_s, time FROM step_metrics"
                          " WHERE run_id = ? AND step > ? ORDER BY step", err);
  if (!st) goto done;
  sqlite3_bind_int64(st, 1, run);
  sqlite3_bind_int64(st, 2, since_step);
  json_t *steps = rows_json(s, st, err);
  if (!steps) goto done;
  st = prep(s,
            "SELECT epoch, train_loss, eval_loss, eval_accuracy, perplexity, eval_runtime, time,"
            " macro_f1 AS eval_macro_f1, weighted_f1 AS eval_weighted_f1, confusion FROM epoch_metrics"
            " WHERE run_id = ? ORDER BY epoch", err);
  json_t *epochs = st ? (sqlite3_bind_int64(st, 1, run), rows_json(s, st, err)) : NULL;
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
  exec(s, "COMMIT", NULL);
  return out;
}

/* ---- models and revisions ---- */

static int64_t model_id_tx(Store *s, const char *name, Err *err) {
  sqlite3_stmt *st = prep(s, "INSERT OR IGNORE INTO models(name, created) VALUES (?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 2, now_wall());
  if (step_done(s, st, err, "model")) return -1;
  st = prep(s, "SELECT id FROM models WHERE name = ?", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int64_t id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (id < 0) db_err(s, err, "model");
  return id;
}

int64_t store_model_create(Store *s, const char *name, Err *err) {
  if (store_check_name("model", name, err)) return -1;
  if (begin(s, err)) return -1;
  int64_t id = model_id_tx(s, name, err);
  if (id < 0) return rollback(s);
  if (commit(s, err)) return -1;
  return id;
}

#define REV_COLUMNS                                                                                            \
  "r.id, r.model_id, r.seq, m.name, r.commit_id, r.weights, COALESCE(r.optimizer, ''), COALESCE(r.tokenizer, ''), " \
  "r.message, COALESCE(r.run_id, 0), r.step, r.epoch, r.created"

static void read_revision(sqlite3_stmt *st, StoreRevision *r) {
  memset(r, 0, sizeof *r);
  r->id = sqlite3_column_int64(st, 0);
  r->model_id = sqlite3_column_int64(st, 1);
  r->seq = sqlite3_column_int64(st, 2);
  snprintf(r->model, sizeof r->model, "%s", (const char *)sqlite3_column_text(st, 3));
  snprintf(r->commit, sizeof r->commit, "%s", (const char *)sqlite3_column_text(st, 4));
  snprintf(r->weights, sizeof r->weights, "%s", (const char *)sqlite3_column_text(st, 5));
  snprintf(r->optimizer, sizeof r->optimizer, "%s", (const char *)sqlite3_column_text(st, 6));
  snprintf(r->tokenizer, sizeof r->tokenizer, "%s", (const char *)sqlite3_column_text(st, 7));
  snprintf(r->message, sizeof r->message, "%s", (const char *)sqlite3_column_text(st, 8));
  r->run = sqlite3_column_int64(st, 9);
  r->step = sqlite3_column_int64(st, 10);
  r->epoch = sqlite3_column_int64(st, 11);
  r->created = sqlite3_column_double(st, 12);
}

int store_push(Store *s, const char *model, const StorePush *p, StoreRevision *out, Err *err) {
  if (store_check_name("model", model, err)) return -1;
  if (!p) return err_setk(err, ERR_INVALID, "push: nothing to push");
  if (check_json_object("config.json", p->config_json, err)) return -1;
  if (p->weights_stream ? p->weights || p->weights_len : !p->weights || p->weights_len == 0)
    return err_setk(err, ERR_INVALID, p->weights_stream ? "push: weights given both as bytes and as a stream" : "push: no model weights");
  if (!p->optimizer && p->optimizer_len) return err_setk(err, ERR_INVALID, "push: optimizer length without data");
  if (p->optimizer && p->optimizer_stream) return err_setk(err, ERR_INVALID, "push: optimizer state given both as bytes and as a stream");
  if (p->tokenizer_json && check_json_object("tokenizer.json", p->tokenizer_json, err)) return -1;
  if (p->tokenizer_config_json && check_json_object("tokenizer_config.json", p->tokenizer_config_json, err)) return -1;
  if (p->special_tokens_map_json && check_json_object("special_tokens_map.json", p->special_tokens_map_json, err)) return -1;
  if (p->metrics_json && check_json_object("metrics", p->metrics_json, err)) return -1;
  if (p->step < 0 || p->epoch < 0 || p->run < 0) return err_setk(err, ERR_INVALID, "push: negative step, epoch or run");
  const char *message = p->message && *p->message ? p->message : "Upload model";
  if (strlen(message) >= sizeof out->message) return err_setk(err, ERR_INVALID, "push: message longer than %zu bytes", sizeof out->message - 1);
  /* Hashing the bytes before taking the write lock keeps the lock short; streams
  ** can only be hashed as they are written, under the lock. */
  char wh[65] = "", oh[65] = "", th[65] = "";
  int has_opt = p->optimizer || p->optimizer_stream;
  if (!p->weights_stream) store_sha256_hex(p->weights, p->weights_len, wh);
  if (p->optimizer) store_sha256_hex(p->optimizer, p->optimizer_len, oh);
  if (p->tokenizer_json) store_sha256_hex(p->tokenizer_json, strlen(p->tokenizer_json), th);

  if (begin(s, err)) return -1;
  if (p->run && run_exists(s, p->run, err)) return rollback(s);
  int64_t mid = model_id_tx(s, model, err);
  if (mid < 0 ||
      (p->weights_stream ? stream_blob_tx(s, p->weights_stream, wh, err) : blob_put_tx(s, p->weights, p->weights_len, wh, err)) ||
      (p->optimizer && blob_put_tx(s, p->optimizer, p->optimizer_len, oh, err)) ||
      (p->optimizer_stream && stream_blob_tx(s, p->optimizer_stream, oh, err)) ||
      (p->tokenizer_json && blob_put_tx(s, p->tokenizer_json, strlen(p->tokenizer_json), th, err)))
    return rollback(s);
  sqlite3_stmt *st = prep(s, "SELECT COALESCE(MAX(seq), 0) + 1 FROM revisions WHERE model_id = ?", err);
  if (!st) return rollback(s);
  sqlite3_bind_int64(st, 1, mid);
  int64_t seq = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 1;
  sqlite3_finalize(st);
  /* The commit id hashes what the revision is, like a git commit: repository,
  ** number, content, message and time. */
  double created = now_wall();
  char basis[512], commit_hex[65];
  snprintf(basis, sizeof basis, "%s\n%lld\n%s\n%s\n%s\n%s\n%.6f\n%.200s", model, (long long)seq, wh, oh, th,
           p->config_json ? "c" : "", created, message);
  StoreSha256 c;
  unsigned char d[32];
  store_sha256_init(&c);
  store_sha256_update(&c, basis, strlen(basis));
  store_sha256_update(&c, p->config_json, strlen(p->config_json));
  if (p->tokenizer_config_json) store_sha256_update(&c, p->tokenizer_config_json, strlen(p->tokenizer_config_json));
  if (p->special_tokens_map_json) store_sha256_update(&c, p->special_tokens_map_json, strlen(p->special_tokens_map_json));
  store_sha256_final(&c, d, commit_hex);
  commit_hex[40] = '\0';
  st = prep(s,
            "INSERT INTO revisions(model_id, seq, commit_id, message, config, weights, optimizer, tokenizer, run_id, step,"
            " epoch, metrics, created, tokenizer_config, special_tokens_map) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", err);
  if (!st) return rollback(s);
  sqlite3_bind_int64(st, 1, mid);
  sqlite3_bind_int64(st, 2, seq);
  sqlite3_bind_text(st, 3, commit_hex, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, message, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, p->config_json, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, wh, -1, SQLITE_STATIC);
  bind_text(st, 7, has_opt ? oh : NULL);
  bind_text(st, 8, p->tokenizer_json ? th : NULL);
  if (p->run) sqlite3_bind_int64(st, 9, p->run);
  else sqlite3_bind_null(st, 9);
  sqlite3_bind_int64(st, 10, p->step);
  sqlite3_bind_int64(st, 11, p->epoch);
  bind_text(st, 12, p->metrics_json);
  sqlite3_bind_double(st, 13, created);
  bind_text(st, 14, p->tokenizer_config_json);
  bind_text(st, 15, p->special_tokens_map_json);
  if (step_done(s, st, err, "revision")) return rollback(s);
  int64_t rid = sqlite3_last_insert_rowid(s->db);
  if (commit(s, err)) return -1;
  if (out) {
    memset(out, 0, sizeof *out);
    out->id = rid;
    out->model_id = mid;
    out->seq = seq;
    snprintf(out->model, sizeof out->model, "%s", model);
    memcpy(out->commit, commit_hex, 41);
    memcpy(out->weights, wh, 65);
    memcpy(out->optimizer, oh, 65);
    memcpy(out->tokenizer, th, 65);
    snprintf(out->message, sizeof out->message, "%s", message);
    out->run = p->run;
    out->step = p->step;
    out->epoch = p->epoch;
    out->created = created;
  }
  return 0;
}

int store_resolve(Store *s, const char *spec, StoreRevision *out, Err *err) {
  if (!spec) return err_setk(err, ERR_NOT_FOUND, "model: no name");
  char name[160];
  const char *at = strchr(spec, '@');
  size_t n = at ? (size_t)(at - spec) : strlen(spec);
  if (n >= sizeof name) return err_setk(err, ERR_NOT_FOUND, "model name: too long");
  memcpy(name, spec, n);
  name[n] = '\0';
  /* A lookup: a name no model can have names nothing, like an unknown one. */
  if (store_check_name("model", name, err)) { if (err) err->kind = ERR_NOT_FOUND; return -1; }
  const char *rev = at ? at + 1 : "main";
  int digits = *rev != '\0';
  for (const char *p = rev; *p; p++) digits &= isdigit((unsigned char)*p) != 0;
  sqlite3_stmt *st;
  if (!*rev || strcmp(rev, "main") == 0) {
    st = prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1"
                 " ORDER BY r.seq DESC LIMIT 1", err);
  } else if (strcmp(rev, "best") == 0) {
    st = prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1"
                 " AND r.id = m.best_revision", err);
  } else if (digits && strlen(rev) < 7) {
    st = prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1 AND r.seq = ?2", err);
  } else if (is_hex(rev, 4, 40)) {
    st = prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1"
                 " AND substr(r.commit_id, 1, length(?2)) = ?2 LIMIT 2", err);
  } else {
    return err_setk(err, ERR_NOT_FOUND, "revision \"%.64s\": expected main, best, a number or a commit id", rev);
  }
  if (!st) return -1;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  if (digits && strlen(rev) < 7) sqlite3_bind_int64(st, 2, strtoll(rev, NULL, 10));
  else sqlite3_bind_text(st, 2, rev, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) return db_err(s, err, "resolve");
    return at ? err_setk(err, ERR_NOT_FOUND, "model \"%s\" has no revision \"%.64s\"", name, rev)
              : err_setk(err, ERR_NOT_FOUND, "model \"%s\" does not exist or has no revision", name);
  }
  StoreRevision r;
  read_revision(st, &r);
  rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return err_setk(err, ERR_NOT_FOUND, "revision \"%s\" of model \"%s\" is ambiguous", rev, name);
  *out = r;
  return 0;
}

int store_revision_file(Store *s, const StoreRevision *r, const char *file, void **data, size_t *len, Err *err) {
  *data = NULL;
  *len = 0;
  const char *blob = NULL;
  if (!file) return err_setk(err, ERR_INVALID, "revision file: no name");
  if (!strcmp(file, "model.safetensors")) blob = r->weights;
  else if (!strcmp(file, "optimizer.safetensors")) blob = r->optimizer;
  else if (!strcmp(file, "tokenizer.json")) blob = r->tokenizer;
  else if (strcmp(file, "config.json") && strcmp(file, "metrics.json") && strcmp(file, "tokenizer_config.json") &&
           strcmp(file, "special_tokens_map.json"))
    return err_setk(err, ERR_INVALID, "revision file \"%.64s\": not one of config.json, model.safetensors, tokenizer.json, "
                        "optimizer.safetensors, metrics.json, tokenizer_config.json, special_tokens_map.json", file);
  if (blob) {
    if (!*blob) return err_setk(err, ERR_NOT_FOUND, "%s@%lld has no %s", r->model, (long long)r->seq, file);
    return store_blob_get(s, blob, data, len, err);
  }
  const char *sql = !strcmp(file, "config.json") ? "SELECT config FROM revisions WHERE id = ?"
                    : !strcmp(file, "metrics.json") ? "SELECT COALESCE(metrics, '{}') FROM revisions WHERE id = ?"
                    : !strcmp(file, "tokenizer_config.json") ? "SELECT tokenizer_config FROM revisions WHERE id = ?"
                    : "SELECT special_tokens_map FROM revisions WHERE id = ?";
  sqlite3_stmt *st = prep(s, sql, err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, r->id);
  if (sqlite3_step(st) != SQLITE_ROW) { sqlite3_finalize(st); return err_setk(err, ERR_NOT_FOUND, "revision %lld does not exist", (long long)r->id); }
  if (sqlite3_column_type(st, 0) == SQLITE_NULL) {
    sqlite3_finalize(st);
    return err_setk(err, ERR_NOT_FOUND, "%s@%lld has no %s", r->model, (long long)r->seq, file);
  }
  int n = sqlite3_column_bytes(st, 0);
  char *t = malloc((size_t)n + 1);
  if (t) { memcpy(t, sqlite3_column_text(st, 0), (size_t)n); t[n] = '\0'; }
  sqlite3_finalize(st);
  if (!t) return err_setk(err, ERR_NOMEM, "store: out of memory");
  *data = t;
  *len = (size_t)n;
  return 0;
}

int store_run_checkpoint(Store *s, int64_t run, StoreRevision *out, Err *err) {
  sqlite3_stmt *st = prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id"
                             " WHERE r.run_id = ? AND r.optimizer IS NOT NULL ORDER BY r.step DESC, r.id DESC LIMIT 1", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, run);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) read_revision(st, out);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? 1 : db_err(s, err, "checkpoint");
}

int store_revision_drop_optimizer(Store *s, int64_t revision_id, Err *err) {
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "UPDATE revisions SET optimizer = NULL WHERE id = ?", err);
  if (st) sqlite3_bind_int64(st, 1, revision_id);
  return update_one(s, st, "revision", revision_id, err);
}

int store_revision_set_metrics(Store *s, int64_t revision_id, const char *metrics_json, Err *err) {
  if (check_json_object("revision metrics", metrics_json, err)) return -1;
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "UPDATE revisions SET metrics = ? WHERE id = ?", err);
  if (st) {
    sqlite3_bind_text(st, 1, metrics_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, revision_id);
  }
  return update_one(s, st, "revision", revision_id, err);
}

int store_model_set_best(Store *s, int64_t revision_id, Err *err) {
  if (begin(s, err)) return -1;
  /* The revision names its repository: a revision can only be the best of its own. */
  sqlite3_stmt *st = prep(s, "UPDATE models SET best_revision = ?1 WHERE id = (SELECT model_id FROM revisions WHERE id = ?1)", err);
  if (st) sqlite3_bind_int64(st, 1, revision_id);
  return update_one(s, st, "revision", revision_id, err);
}

int store_revision_delete(Store *s, int64_t revision_id, Err *err) {
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "DELETE FROM revisions WHERE id = ?", err);
  if (st) sqlite3_bind_int64(st, 1, revision_id);
  return update_one(s, st, "revision", revision_id, err);
}

json_t *store_models_list(Store *s, Err *err) {
  sqlite3_stmt *st = prep(s,
                          "SELECT m.id, m.name, m.created,"
                          " (SELECT COUNT(*) FROM revisions WHERE model_id = m.id) AS revisions,"
                          " (SELECT seq FROM revisions WHERE id = m.best_revision) AS best,"
                          " l.commit_id AS last_commit, l.message AS last_message, l.created AS last_created"
                          " FROM models m LEFT JOIN revisions l ON l.id ="
                          " (SELECT id FROM revisions WHERE model_id = m.id ORDER BY seq DESC LIMIT 1)"
                          " ORDER BY m.name", err);
  return st ? rows_json(s, st, err) : NULL;
}

json_t *store_model_get(Store *s, const char *name, Err *err) {
  if (exec(s, "BEGIN", err)) return NULL;
  json_t *out = NULL;
  sqlite3_stmt *st = prep(s,
                          "SELECT id, name, created, (SELECT seq FROM revisions WHERE id = m.best_revision) AS best"
                          " FROM models m WHERE name = ?", err);
  if (!st) goto done;
  bind_text(st, 1, name);
  json_t *rows = rows_json(s, st, err);
  if (!rows) goto done;
  out = json_incref(json_array_get(rows, 0));
  json_decref(rows);
  if (!out) { err_setk(err, ERR_NOT_FOUND, "model \"%s\" does not exist", name ? name : ""); goto done; }
  st = prep(s,
            "SELECT seq, commit_id AS \"commit\", message, created, run_id AS run, step, epoch, metrics,"
            " optimizer IS NOT NULL AS has_optimizer, tokenizer IS NOT NULL AS has_tokenizer"
            " FROM revisions WHERE model_id = ? ORDER BY seq DESC", err);
  json_t *revs = st ? (sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(out, "id"))), rows_json(s, st, err)) : NULL;
  if (!revs) { json_decref(out); out = NULL; goto done; }
  json_object_set_new(out, "revisions", revs);
done:
  exec(s, "COMMIT", NULL);
  return out;
}

/* ---- jobs ---- */

int64_t store_job_submit(Store *s, const char *kind, const char *params_json, Err *err) {
  if (!one_of(kind, JOB_KINDS)) return err_setk(err, ERR_INVALID, "job kind \"%s\": expected tokenizer, prepare or train", kind ? kind : "");
  if (check_json_object("job parameters", params_json, err)) return -1;
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "INSERT INTO jobs(kind, status, params, created) VALUES (?, 'queued', ?, ?)", err);
  if (!st) return rollback(s);
  sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, params_json, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 3, now_wall());
  if (step_done(s, st, err, "job")) return rollback(s);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (commit(s, err)) return -1;
  return id;
}

int store_job_claim(Store *s, int64_t *job, char **kind, char **params_json, Err *err) {
  *kind = *params_json = NULL;
  if (begin(s, err)) return -1;
  sqlite3_stmt *st = prep(s, "SELECT id, kind, params FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1", err);
  if (!st) return rollback(s);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) { db_err(s, err, "job claim"); return rollback(s); }
    return commit(s, err) ? -1 : 1;
  }
  int64_t id = sqlite3_column_int64(st, 0);
  char *k = strdup((const char *)sqlite3_column_text(st, 1)), *p = strdup((const char *)sqlite3_column_text(st, 2));
  sqlite3_finalize(st);
  st = prep(s, "UPDATE jobs SET status = 'running', started = ?, pid = ? WHERE id = ?", err);
  if (!k || !p || !st) { free(k); free(p); sqlite3_finalize(st); if (!k || !p) err_setk(err, ERR_NOMEM, "store: out of memory"); return rollback(s); }
  sqlite3_bind_double(st, 1, now_wall());
  sqlite3_bind_int64(st, 2, (sqlite3_int64)getpid());
  sqlite3_bind_int64(st, 3, id);
  if (step_done(s, st, err, "job claim") || commit(s, err)) { free(k); free(p); return rollback(s); }
  *job = id;
  *kind = k;
  *params_json = p;
  return 0;
}

int store_job_set_run(Store *s, int64_t job, int64_t run, Err *err) {
  if (begin(s, err)) return -1;
  if (run_exists(s, run, err)) return rollback(s);
  sqlite3_stmt *st = prep(s, "UPDATE jobs SET run_id = ? WHERE id = ?", err);
  if (st) { sqlite3_bind_int64(st, 1, run); sqlite3_bind_int64(st, 2, job); }
  return update_one(s, st, "job", job, err);
}

/* The status of a job into *out; 0, or -1 when it does not exist. */
static int job_status(Store *s, int64_t job, StoreStatus *out, Err *err) {
  sqlite3_stmt *st = prep(s, "SELECT status FROM jobs WHERE id = ?", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, job);
  int rc = sqlite3_step(st), bad = rc == SQLITE_ROW && store_status_parse((const char *)sqlite3_column_text(st, 0), out);
  sqlite3_finalize(st);
  if (bad) return err_set(err, "job %lld has a status this maskd does not know", (long long)job);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job) : db_err(s, err, "job");
}

int store_job_finish(Store *s, int64_t job, StoreStatus status, const char *error, Err *err) {
  if (!store_status_ended(status))
    return err_setk(err, ERR_INVALID, "job status \"%s\": expected done, failed, interrupted or cancelled", store_status_name(status));
  if (begin(s, err)) return -1;
  StoreStatus cur;
  if (job_status(s, job, &cur, err)) return rollback(s);
  if (cur != STORE_STATUS_RUNNING) { err_setk(err, ERR_CONFLICT, "job %lld is %s, not running", (long long)job, store_status_name(cur)); return rollback(s); }
  sqlite3_stmt *st = prep(s, "UPDATE jobs SET status = ?, finished = ?, error = ? WHERE id = ?", err);
  if (st) {
    sqlite3_bind_text(st, 1, store_status_name(status), -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 2, now_wall());
    bind_text(st, 3, error);
    sqlite3_bind_int64(st, 4, job);
  }
  return update_one(s, st, "job", job, err);
}

int store_job_cancel(Store *s, int64_t job, Err *err) {
  if (begin(s, err)) return -1;
  StoreStatus cur;
  if (job_status(s, job, &cur, err)) return rollback(s);
  sqlite3_stmt *st;
  if (cur == STORE_STATUS_QUEUED) {
    st = prep(s, "UPDATE jobs SET status = 'cancelled', finished = ?, cancel_requested = 1 WHERE id = ?", err);
    if (st) { sqlite3_bind_double(st, 1, now_wall()); sqlite3_bind_int64(st, 2, job); }
  } else if (cur == STORE_STATUS_RUNNING) {
    st = prep(s, "UPDATE jobs SET cancel_requested = 1 WHERE id = ?", err);
    if (st) sqlite3_bind_int64(st, 1, job);
  } else {
    err_setk(err, ERR_CONFLICT, "job %lld is already %s", (long long)job, store_status_name(cur));
    return rollback(s);
  }
  return update_one(s, st, "job", job, err);
}

/* The first column of `sql`'s first row, as 0 or 1, in *flag, for the one id it
** binds; returns sqlite3_step's code (SQLITE_ROW when there was a row), or -1
** when the statement cannot be prepared. */
static int query_flag(Store *s, const char *sql, int64_t id, int *flag, Err *err) {
  sqlite3_stmt *st = prep(s, sql, err);
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
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job) : db_err(s, err, "job");
}

int store_run_has_running_job(Store *s, int64_t run, Err *err) {
  int v = 0, rc = query_flag(s, "SELECT EXISTS (SELECT 1 FROM jobs WHERE run_id = ? AND status = 'running')", run, &v,
                             err);
  if (rc < 0) return -1;
  return rc == SQLITE_ROW ? v : db_err(s, err, "jobs");
}

int store_jobs_recover(Store *s, int *n, Err *err) { return recover(s, "jobs", n, err); }

int store_job_progress(Store *s, int64_t job, const char *progress_json, Err *err) {
  if (progress_json && check_json_object("job progress", progress_json, err)) return -1;
  if (strlen(progress_json ? progress_json : "") > 4096) return err_setk(err, ERR_TOO_LARGE, "job progress: longer than 4096 bytes");
  sqlite3_stmt *st = prep(s, "UPDATE jobs SET progress = ? WHERE id = ? AND status = 'running'", err);
  if (!st) return -1;
  bind_text(st, 1, progress_json);
  sqlite3_bind_int64(st, 2, job);
  if (step_done(s, st, err, "job progress")) return -1;
  if (sqlite3_changes(s->db) == 1) return 0;
  StoreStatus cur;
  if (job_status(s, job, &cur, err)) return -1;
  return err_setk(err, ERR_CONFLICT, "job %lld is %s, not running", (long long)job, store_status_name(cur));
}

int64_t store_job_run(Store *s, int64_t job, Err *err) {
  sqlite3_stmt *st = prep(s, "SELECT run_id FROM jobs WHERE id = ?", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, job);
  int rc = sqlite3_step(st);
  int64_t run = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;   /* NULL reads as 0 */
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return run;
  return rc == SQLITE_DONE ? err_setk(err, ERR_NOT_FOUND, "job %lld does not exist", (long long)job) : db_err(s, err, "job");
}

json_t *store_job_get(Store *s, int64_t job, Err *err) {
  sqlite3_stmt *st = prep(s,
                          "SELECT id, kind, status, params, run_id AS run, created, started, finished, error, cancel_requested,"
                          " progress FROM jobs WHERE id = ?", err);
  if (!st) return NULL;
  sqlite3_bind_int64(st, 1, job);
  return one_row(s, st, "job", job, err);
}

json_t *store_jobs_list(Store *s, Err *err) {
  sqlite3_stmt *st = prep(s,
                          "SELECT id, kind, status, params, run_id AS run, created, started, finished, error, cancel_requested,"
                          " progress FROM jobs ORDER BY id DESC", err);
  return st ? rows_json(s, st, err) : NULL;
}
