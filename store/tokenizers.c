/* The store's tokenizers: tokenizer.json files registered by name (see store.h). */
#include "store/store.h"
#include "store/store_db.h"

#include <stdio.h>
#include <string.h>

#include "engine/core/now.h"
#include "store/sha256.h"

/* A registered thing's provenance: NULL, or a JSON object; job 0 (none) or an id. */
int sdb_check_source(const char *what, const char *source_json, int64_t job, Err *err) {
  if (source_json && sdb_check_json_object(what, source_json, err)) return -1;
  if (job < 0) return err_setk(err, ERR_INVALID, "%s: job %lld is not a job id", what, (long long)job);
  return 0;
}

void sdb_bind_job(sqlite3_stmt *st, int i, int64_t job) {
  if (job > 0) sqlite3_bind_int64(st, i, job);
  else sqlite3_bind_null(st, i);
}

int64_t store_tokenizer_add(Store *s, const char *name, const char *tokenizer_json, int vocab_size,
                            const char *source_json, int64_t job, Err *err) {
  if (store_check_name("tokenizer", name, err) || sdb_check_json_object("tokenizer.json", tokenizer_json, err) ||
      sdb_check_source("tokenizer source", source_json, job, err))
    return -1;
  if (vocab_size <= 0) return err_setk(err, ERR_INVALID, "tokenizer: vocab_size %d must be positive", vocab_size);
  char hex[65];
  size_t len = strlen(tokenizer_json);
  store_sha256_hex(tokenizer_json, len, hex);
  if (sdb_begin(s, err)) return -1;
  if (sdb_blob_put_tx(s, tokenizer_json, len, hex, err)) return sdb_rollback(s);
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO tokenizers(name, vocab_size, blob, created, source, job_id) VALUES (?, ?, ?, ?, ?, ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, vocab_size);
  sqlite3_bind_text(st, 3, hex, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 4, now_wall());
  sdb_bind_text(st, 5, source_json);
  sdb_bind_job(st, 6, job);
  if (sqlite3_step(st) != SQLITE_DONE) {
    int code = sqlite3_extended_errcode(s->db);
    if (code == SQLITE_CONSTRAINT_UNIQUE) err_setk(err, ERR_CONFLICT, "tokenizer \"%s\" already exists", name);
    else sdb_fail(s, err, "tokenizer");
    sqlite3_finalize(st);
    return sdb_rollback(s);
  }
  sqlite3_finalize(st);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  if (sdb_commit(s, err)) return -1;
  return id;
}

int store_tokenizer_get(Store *s, const char *name, char **tokenizer_json, int64_t *id, Err *err) {
  *tokenizer_json = NULL;
  if (sdb_exec(s, "BEGIN", err)) return -1;
  int rc = -1;
  sqlite3_stmt *st = sdb_prep(s, "SELECT id, blob FROM tokenizers WHERE name = ?", err);
  if (st) {
    sdb_bind_text(st, 1, name);
    int r = sqlite3_step(st);
    if (r == SQLITE_ROW) {
      char hex[65];
      snprintf(hex, sizeof hex, "%s", (const char *)sqlite3_column_text(st, 1));
      if (id) *id = sqlite3_column_int64(st, 0);
      void *data;
      size_t len;
      if (sdb_blob_get_tx(s, hex, &data, &len, err) == 0) { *tokenizer_json = data; rc = 0; }
    } else if (r == SQLITE_DONE) {
      err_setk(err, ERR_NOT_FOUND, "tokenizer \"%s\" does not exist", name ? name : "");
    } else {
      sdb_fail(s, err, "tokenizer");
    }
    sqlite3_finalize(st);
  }
  sdb_exec(s, "COMMIT", NULL);
  return rc;
}

#define TOKENIZER_COLS "SELECT id, name, vocab_size, blob AS sha256, created, job_id AS job, source FROM tokenizers"

json_t *store_tokenizers_list(Store *s, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, TOKENIZER_COLS " ORDER BY id", err);
  return st ? sdb_rows_json(s, st, err) : NULL;
}

/* The one row of a query by name, or NULL with "<what> "NAME" does not exist". */
json_t *sdb_one_named(Store *s, sqlite3_stmt *st, const char *what, const char *name, Err *err) {
  if (!st) return NULL;
  sdb_bind_text(st, 1, name);
  json_t *rows = sdb_rows_json(s, st, err);
  if (!rows) return NULL;
  json_t *o = json_incref(json_array_get(rows, 0));
  json_decref(rows);
  if (!o) err_setk(err, ERR_NOT_FOUND, "%s \"%.128s\" does not exist", what, name ? name : "");
  return o;
}

json_t *store_tokenizer_info(Store *s, const char *name, Err *err) {
  return sdb_one_named(s, sdb_prep(s, TOKENIZER_COLS " WHERE name = ?", err), "tokenizer", name, err);
}
