/* The store's models and revisions: a Hub-style repository per model, a revision
** per pushed checkpoint, resolved by name, revision or "best" (see store.h). */
#include "store/store.h"
#include "store/store_db.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/now.h"
#include "engine/nn/config.h"
#include "store/sha256.h"

/* The repository's id, made when missing; must_be_new: ERR_CONFLICT when it exists. */
static int64_t model_id_tx(Store *s, const char *name, int must_be_new, Err *err) {
  /* A new repository's name must be one the Hub's URLs can reach (an existing one stays). */
  sqlite3_stmt *st = sdb_prep(s, "SELECT 1 FROM models WHERE name = ?", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int exists = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  if (exists && must_be_new) return err_setk(err, ERR_CONFLICT, "push: a repository named %s exists", name);
  if (!exists && store_check_new_repo_name("model", name, err)) return -1;
  st = sdb_prep(s, "INSERT OR IGNORE INTO models(name, created) VALUES (?, ?)", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 2, now_wall());
  if (sdb_step_done(s, st, err, "model")) return -1;
  st = sdb_prep(s, "SELECT id FROM models WHERE name = ?", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  int64_t id = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (id < 0) sdb_fail(s, err, "model");
  return id;
}

int64_t store_model_create(Store *s, const char *name, Err *err) {
  if (store_check_name("model", name, err)) return -1;
  if (sdb_begin(s, err)) return -1;
  int64_t id = model_id_tx(s, name, 0, err);
  if (id < 0) return sdb_rollback(s);
  if (sdb_commit(s, err)) return -1;
  return id;
}

#define REV_COLUMNS                                                                                            \
  "r.id, r.model_id, r.seq, m.name, r.commit_id, r.weights, COALESCE(r.optimizer, ''), COALESCE(r.tokenizer, ''), " \
  "r.message, COALESCE(r.run_id, 0), r.step, r.epoch, r.created, m.created"

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
  r->model_created = sqlite3_column_double(st, 13);
}

/* 1 when an architectures name (NULL: none) is a sequence classifier's, by config_parse's rule. */
static int config_is_classifier(const char *arch) { return config_task_of_architecture(arch) == MODEL_TASK_SEQ_CLS; }

/* Inside the push's transaction: one repository serves one pipeline, so a revision
** whose task group (sequence classifier; masked LM or base model) differs from the
** repository's newest is refused. store_check_repo_task says the same before a run
** starts, but outside any transaction: a training and a fine-tuning of one name started
** together both passed it, and the repository ended mixed. */
static int check_task_tx(Store *s, int64_t mid, const char *model, const char *config_json, Err *err) {
  sqlite3_stmt *st = sdb_prep(s, "SELECT seq, json_extract(config, '$.architectures[0]'), json_extract(?, '$.architectures[0]')"
                                 " FROM revisions WHERE model_id = ? ORDER BY seq DESC LIMIT 1", err);
  if (!st) return -1;
  sqlite3_bind_text(st, 1, config_json, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, mid);
  int rc = sqlite3_step(st), ok = 1;
  if (rc == SQLITE_ROW) {
    const char *have = (const char *)sqlite3_column_text(st, 1), *push = (const char *)sqlite3_column_text(st, 2);
    if (config_is_classifier(have) != config_is_classifier(push)) {
      ok = 0;
      err_setk(err, ERR_CONFLICT, "model repository \"%s\" holds a %s (%s@%lld); push a %s to another name", model,
              have ? have : "masked LM", model,
              (long long)sqlite3_column_int64(st, 0), push ? push : "model of another task");
    }
  } else if (rc != SQLITE_DONE) {
    ok = 0;
    sdb_fail(s, err, "revision");
  }
  sqlite3_finalize(st);
  return ok ? 0 : -1;
}

/* Before a push streams: a read of what its transaction will check (the run exists, a
** new repository's name, the repository's task), so a push that will be refused is
** refused before it writes its blobs. */
static int precheck(Store *s, const char *model, const StorePush *p, Err *err) {
  if (sdb_exec(s, "BEGIN", err)) return -1;
  int rc = p->run ? sdb_run_exists(s, p->run, err) : 0;
  sqlite3_stmt *st = rc ? NULL : sdb_prep(s, "SELECT id FROM models WHERE name = ?", err);
  if (!rc && !st) rc = -1;
  if (st) {
    sqlite3_bind_text(st, 1, model, -1, SQLITE_STATIC);
    int src = sqlite3_step(st);
    int64_t mid = src == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
    sqlite3_finalize(st);
    if (src != SQLITE_ROW && src != SQLITE_DONE) rc = sdb_fail(s, err, "model");
    else if (mid == 0) rc = store_check_new_repo_name("model", model, err);
    else if (p->new_repo) rc = err_setk(err, ERR_CONFLICT, "push: a repository named %s exists", model);
    else rc = check_task_tx(s, mid, model, p->config_json, err);
  }
  sdb_exec(s, "COMMIT", NULL);
  return rc;
}

int store_push(Store *s, const char *model, const StorePush *p, StoreRevision *out, Err *err) {
  if (store_check_name("model", model, err)) return -1;
  if (!p) return err_setk(err, ERR_INVALID, "push: nothing to push");
  if (sdb_check_json_object("config.json", p->config_json, err)) return -1;
  if (p->weights_stream ? p->weights || p->weights_len : !p->weights || p->weights_len == 0)
    return err_setk(err, ERR_INVALID, p->weights_stream ? "push: weights given both as bytes and as a stream" : "push: no model weights");
  if (!p->optimizer && p->optimizer_len) return err_setk(err, ERR_INVALID, "push: optimizer length without data");
  if (p->optimizer && p->optimizer_stream) return err_setk(err, ERR_INVALID, "push: optimizer state given both as bytes and as a stream");
  if (p->tokenizer_json && sdb_check_json_object("tokenizer.json", p->tokenizer_json, err)) return -1;
  if (p->tokenizer_config_json && sdb_check_json_object("tokenizer_config.json", p->tokenizer_config_json, err)) return -1;
  if (p->special_tokens_map_json && sdb_check_json_object("special_tokens_map.json", p->special_tokens_map_json, err)) return -1;
  if (p->metrics_json && sdb_check_json_object("metrics", p->metrics_json, err)) return -1;
  if (p->step < 0 || p->epoch < 0 || p->run < 0) return err_setk(err, ERR_INVALID, "push: negative step, epoch or run");
  const char *message = p->message && *p->message ? p->message : "Upload model";
  if (strlen(message) >= sizeof out->message) return err_setk(err, ERR_INVALID, "push: message longer than %zu bytes", sizeof out->message - 1);
  /* Hashing the bytes before taking the write lock keeps the lock short; streams are
  ** hashed as they are written, before it too (sdb_stream_blob). */
  char wh[65] = "", oh[65] = "", th[65] = "";
  int has_opt = p->optimizer || p->optimizer_stream;
  if (!p->weights_stream) store_sha256_hex(p->weights, p->weights_len, wh);
  if (p->optimizer) store_sha256_hex(p->optimizer, p->optimizer_len, oh);
  if (p->tokenizer_json) store_sha256_hex(p->tokenizer_json, strlen(p->tokenizer_json), th);

  /* Streams are written first, each chunk in a short transaction of its own under a
  ** temporary key, and only the last transaction below makes them the revision's: a big
  ** push held the write lock for minutes, and every other writer failed after the busy
  ** timeout. A push that would be refused is refused before it streams (checked again
  ** under the lock: another push may come between). */
  char wkey[65] = "", okey[65] = "";
  if (p->weights_stream || p->optimizer_stream) {
    sdb_sweep_streams(s);
    if (precheck(s, model, p, err) || (p->weights_stream && sdb_stream_blob(s, p->weights_stream, wkey, wh, err)) ||
        (p->optimizer_stream && sdb_stream_blob(s, p->optimizer_stream, okey, oh, err)))
      goto fail;
  }
  if (sdb_begin(s, err)) goto fail;
  if (p->run && sdb_run_exists(s, p->run, err)) goto fail;
  int64_t mid = model_id_tx(s, model, p->new_repo, err);
  if (mid < 0 || check_task_tx(s, mid, model, p->config_json, err) ||
      (wkey[0] ? sdb_stream_finish_tx(s, wkey, wh, p->weights_stream->len, err) : sdb_blob_put_tx(s, p->weights, p->weights_len, wh, err)) ||
      (p->optimizer && sdb_blob_put_tx(s, p->optimizer, p->optimizer_len, oh, err)) ||
      (okey[0] && sdb_stream_finish_tx(s, okey, oh, p->optimizer_stream->len, err)) ||
      (p->tokenizer_json && sdb_blob_put_tx(s, p->tokenizer_json, strlen(p->tokenizer_json), th, err)))
    goto fail;
  sqlite3_stmt *st = sdb_prep(s, "SELECT COALESCE(MAX(seq), 0) + 1, (SELECT created FROM models WHERE id = ?1)"
                                 " FROM revisions WHERE model_id = ?1", err);
  if (!st) goto fail;
  sqlite3_bind_int64(st, 1, mid);
  int row = sqlite3_step(st) == SQLITE_ROW;
  int64_t seq = row ? sqlite3_column_int64(st, 0) : 1;
  double model_created = row ? sqlite3_column_double(st, 1) : 0;
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
  st = sdb_prep(s,
            "INSERT INTO revisions(model_id, seq, commit_id, message, config, weights, optimizer, tokenizer, run_id, step,"
            " epoch, metrics, created, tokenizer_config, special_tokens_map) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", err);
  if (!st) goto fail;
  sqlite3_bind_int64(st, 1, mid);
  sqlite3_bind_int64(st, 2, seq);
  sqlite3_bind_text(st, 3, commit_hex, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, message, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, p->config_json, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 6, wh, -1, SQLITE_STATIC);
  sdb_bind_text(st, 7, has_opt ? oh : NULL);
  sdb_bind_text(st, 8, p->tokenizer_json ? th : NULL);
  if (p->run) sqlite3_bind_int64(st, 9, p->run);
  else sqlite3_bind_null(st, 9);
  sqlite3_bind_int64(st, 10, p->step);
  sqlite3_bind_int64(st, 11, p->epoch);
  sdb_bind_text(st, 12, p->metrics_json);
  sqlite3_bind_double(st, 13, created);
  sdb_bind_text(st, 14, p->tokenizer_config_json);
  sdb_bind_text(st, 15, p->special_tokens_map_json);
  if (sdb_step_done(s, st, err, "revision")) goto fail;
  int64_t rid = sqlite3_last_insert_rowid(s->db);
  if (p->best) {
    if (!(st = sdb_prep(s, "UPDATE models SET best_revision = ? WHERE id = ?", err))) goto fail;
    sqlite3_bind_int64(st, 1, rid);
    sqlite3_bind_int64(st, 2, mid);
    if (sdb_step_done(s, st, err, "best revision")) goto fail;
  }
  if (sdb_commit(s, err)) goto fail;
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
    out->model_created = model_created;
  }
  return 0;
fail:
  /* Nothing of the push is visible: the transaction rolls back, and the streams'
  ** temporary rows go (or stay for sdb_sweep_streams, should this fail too). */
  sdb_rollback(s);
  sdb_stream_drop(s, wkey);
  sdb_stream_drop(s, okey);
  return -1;
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
    st = sdb_prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1"
                 " ORDER BY r.seq DESC LIMIT 1", err);
  } else if (strcmp(rev, "best") == 0) {
    st = sdb_prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1"
                 " AND r.id = m.best_revision", err);
  } else if (digits && strlen(rev) < 7) {
    st = sdb_prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1 AND r.seq = ?2", err);
  } else if (sdb_is_hex(rev, 4, 40)) {
    st = sdb_prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id WHERE m.name = ?1"
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
    if (rc != SQLITE_DONE) return sdb_fail(s, err, "resolve");
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
  sqlite3_stmt *st = sdb_prep(s, sql, err);
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
  sqlite3_stmt *st = sdb_prep(s, "SELECT " REV_COLUMNS " FROM revisions r JOIN models m ON m.id = r.model_id"
                             " WHERE r.run_id = ? AND r.optimizer IS NOT NULL ORDER BY r.step DESC, r.id DESC LIMIT 1", err);
  if (!st) return -1;
  sqlite3_bind_int64(st, 1, run);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) read_revision(st, out);
  sqlite3_finalize(st);
  if (rc == SQLITE_ROW) return 0;
  return rc == SQLITE_DONE ? 1 : sdb_fail(s, err, "checkpoint");
}

int store_revision_drop_optimizer(Store *s, int64_t revision_id, Err *err) {
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "UPDATE revisions SET optimizer = NULL WHERE id = ?", err);
  if (st) sqlite3_bind_int64(st, 1, revision_id);
  return sdb_update_one(s, st, "revision", revision_id, err);
}

int store_revision_set_metrics(Store *s, int64_t revision_id, const char *metrics_json, Err *err) {
  if (sdb_check_json_object("revision metrics", metrics_json, err)) return -1;
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "UPDATE revisions SET metrics = ? WHERE id = ?", err);
  if (st) {
    sqlite3_bind_text(st, 1, metrics_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, revision_id);
  }
  return sdb_update_one(s, st, "revision", revision_id, err);
}

int store_model_set_best(Store *s, int64_t revision_id, Err *err) {
  if (sdb_begin(s, err)) return -1;
  /* The revision names its repository: a revision can only be the best of its own. */
  sqlite3_stmt *st = sdb_prep(s, "UPDATE models SET best_revision = ?1 WHERE id = (SELECT model_id FROM revisions WHERE id = ?1)", err);
  if (st) sqlite3_bind_int64(st, 1, revision_id);
  return sdb_update_one(s, st, "revision", revision_id, err);
}

int store_revision_delete(Store *s, int64_t revision_id, Err *err) {
  if (sdb_begin(s, err)) return -1;
  sqlite3_stmt *st = sdb_prep(s, "DELETE FROM revisions WHERE id = ?", err);
  if (st) sqlite3_bind_int64(st, 1, revision_id);
  return sdb_update_one(s, st, "revision", revision_id, err);
}

json_t *store_models_list(Store *s, Err *err) {
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT m.id, m.name, m.created,"
                          " (SELECT COUNT(*) FROM revisions WHERE model_id = m.id) AS revisions,"
                          " (SELECT seq FROM revisions WHERE id = m.best_revision) AS best,"
                          " l.commit_id AS last_commit, l.message AS last_message, l.created AS last_created"
                          " FROM models m LEFT JOIN revisions l ON l.id ="
                          " (SELECT id FROM revisions WHERE model_id = m.id ORDER BY seq DESC LIMIT 1)"
                          " ORDER BY m.name", err);
  return st ? sdb_rows_json(s, st, err) : NULL;
}

json_t *store_model_get(Store *s, const char *name, Err *err) {
  if (sdb_exec(s, "BEGIN", err)) return NULL;
  json_t *out = NULL;
  sqlite3_stmt *st = sdb_prep(s,
                          "SELECT id, name, created, (SELECT seq FROM revisions WHERE id = m.best_revision) AS best"
                          " FROM models m WHERE name = ?", err);
  if (!st) goto done;
  sdb_bind_text(st, 1, name);
  json_t *rows = sdb_rows_json(s, st, err);
  if (!rows) goto done;
  out = json_incref(json_array_get(rows, 0));
  json_decref(rows);
  if (!out) { err_setk(err, ERR_NOT_FOUND, "model \"%s\" does not exist", name ? name : ""); goto done; }
  st = sdb_prep(s,
            "SELECT seq, commit_id AS \"commit\", message, created, run_id AS run, step, epoch, metrics,"
            " optimizer IS NOT NULL AS has_optimizer, tokenizer IS NOT NULL AS has_tokenizer"
            " FROM revisions WHERE model_id = ? ORDER BY seq DESC", err);
  json_t *revs = st ? (sqlite3_bind_int64(st, 1, json_integer_value(json_object_get(out, "id"))), sdb_rows_json(s, st, err)) : NULL;
  if (!revs) { json_decref(out); out = NULL; goto done; }
  json_object_set_new(out, "revisions", revs);
done:
  sdb_exec(s, "COMMIT", NULL);
  return out;
}

/* The newest revision of each repository, with what the Hub's listing filters on: the pipeline
** its config serves (maskd_pipeline, store.c: config_parse's rule, as model info and serving
** read it). ?1 search, ?2 author, ?3 pipeline; NULL matches any. */
#define MODELS_MATCHING                                                                                              \
  "WITH l AS (SELECT m.name AS name, m.created AS created, r.created AS last_modified, r.commit_id AS \"commit\","    \
  " r.seq AS seq, r.tokenizer IS NOT NULL AS has_tokenizer,"                                                         \
  " json_extract(r.config, '$.architectures') AS architectures, json_extract(r.config, '$.model_type') AS model_type," \
  " maskd_pipeline(json_type(r.config, '$.architectures'), json_extract(r.config, '$.architectures[0]'))"             \
  "   AS pipeline_tag"                                                                                                \
  " FROM models m JOIN revisions r ON r.id = (SELECT id FROM revisions WHERE model_id = m.id ORDER BY seq DESC LIMIT 1)" \
  " WHERE (?1 IS NULL OR instr(lower(m.name), lower(?1)) > 0)"                                                        \
  " AND (?2 IS NULL OR substr(m.name, 1, length(?2) + 1) = ?2 || '/'))"                                               \
  " SELECT * FROM l WHERE (?3 IS NULL OR pipeline_tag = ?3)"

static void bind_query(sqlite3_stmt *st, const StoreModelQuery *q) {
  sdb_bind_text(st, 1, q->search);
  sdb_bind_text(st, 2, q->author);
  sdb_bind_text(st, 3, q->pipeline);
}

json_t *store_models_query(Store *s, const StoreModelQuery *q, int64_t *total, Err *err) {
  if (q->offset < 0 || q->limit < 0) { err_setk(err, ERR_INVALID, "models query: negative offset or limit"); return NULL; }
  static const char *const by[] = {"name", "created", "last_modified"};
  if ((unsigned)q->sort >= sizeof by / sizeof by[0]) { err_setk(err, ERR_INVALID, "models query: unknown sort"); return NULL; }
  char sql[2048];
  snprintf(sql, sizeof sql, "%s ORDER BY %s %s, name LIMIT ?4 OFFSET ?5", MODELS_MATCHING, by[q->sort],
           q->descending ? "DESC" : "ASC");
  /* One read transaction: the count and the page see the same repositories. */
  if (sdb_exec(s, "BEGIN", err)) return NULL;
  json_t *rows = NULL;
  sqlite3_stmt *st = sdb_prep(s, "SELECT COUNT(*) FROM (" MODELS_MATCHING ")", err);
  if (!st) goto done;
  bind_query(st, q);
  int rc = sqlite3_step(st);
  int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (n < 0) { sdb_fail(s, err, "models"); goto done; }
  if (total) *total = n;
  if (!(st = sdb_prep(s, sql, err))) goto done;
  bind_query(st, q);
  sqlite3_bind_int64(st, 4, q->limit);
  sqlite3_bind_int64(st, 5, q->offset);
  if (!(rows = sdb_rows_json(s, st, err))) goto done;
  /* json_extract gives an array as its JSON text: hand it back as the array. */
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    json_t *a = json_object_get(row, "architectures");
    json_t *parsed = json_is_string(a) ? json_loads(json_string_value(a), JSON_DECODE_ANY, NULL) : NULL;
    json_object_set_new(row, "architectures", json_is_array(parsed) ? parsed : (json_decref(parsed), json_null()));
  }
done:
  sdb_exec(s, "COMMIT", NULL);
  return rows;
}

json_t *store_revision_history(Store *s, int64_t model_id, int64_t seq, int64_t offset, int64_t limit, int64_t *total,
                               Err *err) {
  if (offset < 0 || limit < 0) { err_setk(err, ERR_INVALID, "revision history: negative offset or limit"); return NULL; }
  if (sdb_exec(s, "BEGIN", err)) return NULL;
  json_t *rows = NULL;
  sqlite3_stmt *st = sdb_prep(s, "SELECT COUNT(*) FROM revisions WHERE model_id = ? AND seq <= ?", err);
  if (!st) goto done;
  sqlite3_bind_int64(st, 1, model_id);
  sqlite3_bind_int64(st, 2, seq);
  int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
  sqlite3_finalize(st);
  if (n < 0) { sdb_fail(s, err, "revisions"); goto done; }
  if (total) *total = n;
  st = sdb_prep(s, "SELECT seq, commit_id AS \"commit\", message, created FROM revisions"
                   " WHERE model_id = ? AND seq <= ? ORDER BY seq DESC LIMIT ? OFFSET ?", err);
  if (!st) goto done;
  sqlite3_bind_int64(st, 1, model_id);
  sqlite3_bind_int64(st, 2, seq);
  sqlite3_bind_int64(st, 3, limit);
  sqlite3_bind_int64(st, 4, offset);
  rows = sdb_rows_json(s, st, err);
done:
  sdb_exec(s, "COMMIT", NULL);
  return rows;
}
