/* The store's datasets: token shards registered by name, split and tokenizer (see store.h). */
#include "store/store.h"
#include "store/store_db.h"


#include "engine/core/now.h"

int64_t store_dataset_add(Store *s, const char *name, const char *tokenizer, int seq_len, const StoreShard *shards,
                          int n_shards, const char *source_json, int64_t job, Err *err) {
  if (store_check_name("dataset", name, err) || sdb_check_source("dataset source", source_json, job, err)) return -1;
  if (seq_len <= 0) return err_setk(err, ERR_INVALID, "dataset: seq_len %d must be positive", seq_len);
  if (n_shards <= 0 || !shards) return err_setk(err, ERR_INVALID, "dataset: no shards");
  for (int i = 0; i < n_shards; i++) {
    if (store_check_name("split", shards[i].split, err)) return -1;
    if (!shards[i].path || !*shards[i].path) return err_setk(err, ERR_INVALID, "dataset: shard %d has no path", i);
    if (shards[i].n_samples < 0) return err_setk(err, ERR_INVALID, "dataset: shard %s has a negative sample count", shards[i].path);
  }
  if (sdb_begin(s, err)) return -1;
  sqlite3_int64 tok_id = 0;
  if (tokenizer) {
    sqlite3_stmt *st = sdb_prep(s, "SELECT id FROM tokenizers WHERE name = ?", err);
    if (!st) return sdb_rollback(s);
    sqlite3_bind_text(st, 1, tokenizer, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) tok_id = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (!tok_id) { err_setk(err, ERR_NOT_FOUND, "dataset: tokenizer \"%s\" does not exist", tokenizer); return sdb_rollback(s); }
  }
  sqlite3_stmt *st = sdb_prep(s, "INSERT INTO datasets(name, tokenizer_id, seq_len, created, source, job_id) VALUES (?, ?, ?, ?, ?, ?)", err);
  if (!st) return sdb_rollback(s);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  if (tok_id) sqlite3_bind_int64(st, 2, tok_id);
  else sqlite3_bind_null(st, 2);
  sqlite3_bind_int(st, 3, seq_len);
  sqlite3_bind_double(st, 4, now_wall());
  sdb_bind_text(st, 5, source_json);
  sdb_bind_job(st, 6, job);
  if (sqlite3_step(st) != SQLITE_DONE) {
    if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_UNIQUE) err_setk(err, ERR_CONFLICT, "dataset \"%s\" already exists", name);
    else sdb_fail(s, err, "dataset");
    sqlite3_finalize(st);
    return sdb_rollback(s);
  }
  sqlite3_finalize(st);
  int64_t id = sqlite3_last_insert_rowid(s->db);
  for (int i = 0; i < n_shards; i++) {
    st = sdb_prep(s, "INSERT INTO dataset_shards(dataset_id, split, path, n_samples) VALUES (?, ?, ?, ?)", err);
    if (!st) return sdb_rollback(s);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_text(st, 2, shards[i].split, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, shards[i].path, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, shards[i].n_samples);
    if (sqlite3_step(st) != SQLITE_DONE) {
      if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
        err_setk(err, ERR_INVALID, "dataset: shard %s listed twice in split %s", shards[i].path, shards[i].split);
      else sdb_fail(s, err, "dataset shard");
      sqlite3_finalize(st);
      return sdb_rollback(s);
    }
    sqlite3_finalize(st);
  }
  if (sdb_commit(s, err)) return -1;
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
  json_t *d = sdb_one_named(s, sdb_prep(s, DATASET_COLS " WHERE d.name = ?", err), "dataset", name, err);
  if (!d) return NULL;
  sqlite3_stmt *st = sdb_prep(s, "SELECT split, path AS file, n_samples AS samples FROM dataset_shards WHERE dataset_id = ?"
                             " ORDER BY split, path", err);
  json_t *files = st ? (sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(d, "id"))), sdb_rows_json(s, st, err)) : NULL;
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
  sqlite3_stmt *st = sdb_prep(s, DATASET_COLS " ORDER BY d.id", err);
  return st ? sdb_rows_json(s, st, err) : NULL;
}
