/* The store: SHA-256 against the standard's vectors and Python's hashlib,
** migrations from nothing (and refusal of a newer schema or a non-database), every
** API with its refusals, blobs across chunks and damage detection, a reader in
** another process while a writer commits, kill -9 in the middle of writes, and
** PRAGMA integrity_check / foreign_key_check clean after all of it. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/rng.h"
#include "store/store_db.h"
#include "engine/core/now.h"
#include "store/git_oid.h"
#include "store/sha256.h"
#include "store/store.h"
#include "store/store_db.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char tmpdir[200];

/* One integer from a query on a separate, raw connection (what another tool sees). */
static long long q1(const char *db, const char *sql) {
  sqlite3 *h;
  long long v = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_busy_timeout(h, 10000);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK) {
      if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
    }
  }
  sqlite3_close(h);
  return v;
}

static int rawexec(const char *db, const char *sql) {
  sqlite3 *h;
  int rc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  if (rc == SQLITE_OK) { sqlite3_busy_timeout(h, 10000); rc = sqlite3_exec(h, sql, NULL, NULL, NULL); }
  sqlite3_close(h);
  return rc;
}

static void sha_tests(void) {
  char hex[65];
  store_sha256_hex("", 0, hex);
  check(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "sha256_empty", "%s", hex);
  /* Git's blob ids (`git hash-object`): an empty file, "hello\n", and 1 MB crossing many blocks. */
  char oid[41];
  store_git_blob_oid("", 0, oid);
  check(!strcmp(oid, "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"), "git_blob_oid_empty", "%s", oid);
  store_git_blob_oid("hello\n", 6, oid);
  check(!strcmp(oid, "ce013625030ba8dba906f756967f9e9ca394464a"), "git_blob_oid_hello", "%s", oid);
  {
    static char mb[1000003];
    for (size_t i = 0; i < sizeof mb; i++) mb[i] = (char)(i * 7 + i / 251);
    store_git_blob_oid(mb, sizeof mb, oid);
    /* Python: hashlib.sha1(b"blob 1000003\0" + bytes((i * 7 + i // 251) & 255 for i in range(1000003))) */
    check(!strcmp(oid, "c9f53601b1e7d188abe54f6fc6585b15f0d7973b"), "git_blob_oid_1mb", "%s", oid);
  }
  store_sha256_hex("abc", 3, hex);
  check(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256_abc", "%s", hex);
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  store_sha256_hex(two, strlen(two), hex);
  check(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "sha256_two_blocks", "%s", hex);
  /* A million 'a' fed in uneven pieces (streaming across block boundaries). */
  StoreSha256 c;
  store_sha256_init(&c);
  char a[1024];
  memset(a, 'a', sizeof a);
  size_t left = 1000000, piece = 1;
  while (left) { size_t n = piece < left ? piece : left; store_sha256_update(&c, a, n); left -= n; piece = piece % 997 + 7; }
  unsigned char d[32];
  store_sha256_final(&c, d, hex);
  check(!strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "sha256_million_a", "%s", hex);

  /* Every length 0..300 of pseudo-random bytes against Python's hashlib. */
  char path[300], cmd[800];
  snprintf(path, sizeof path, "%s/sha_input.bin", tmpdir);
  unsigned char buf[300];
  Rng r;
  rng_seed(&r, 3);
  for (int i = 0; i < 300; i++) buf[i] = (unsigned char)rng_below(&r, 256);
  FILE *f = fopen(path, "wb");
  fwrite(buf, 1, sizeof buf, f);
  fclose(f);
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import hashlib,sys; b=open(sys.argv[1],\"rb\").read();"
           " print(\"\\n\".join(hashlib.sha256(b[:n]).hexdigest() for n in range(301)))' %s", path);
  FILE *p = popen(cmd, "r");
  int same = p != NULL, lines = 0;
  char line[128];
  while (p && fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    store_sha256_hex(buf, (size_t)lines, hex);
    same &= strcmp(line, hex) == 0;
    lines++;
  }
  if (p) same &= pclose(p) == 0;
  check(same && lines == 301, "sha256_matches_python_hashlib", "%d lines, same %d", lines, same);
}

static char *make_db_path(const char *name) {
  static char path[400];
  snprintf(path, sizeof path, "%s/%s", tmpdir, name);
  return path;
}

static void open_tests(void) {
  Err e = {0};
  char db[400];
  snprintf(db, sizeof db, "%s", make_db_path("open.db"));
  Store *s = store_open(db, &e);
  check(s && store_schema_version(s) == STORE_SCHEMA_VERSION, "store_migrates_from_nothing", "%s", e.msg);
  check(q1(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN ('blobs','blob_chunks','tokenizers',"
               "'datasets','dataset_shards','runs','step_metrics','epoch_metrics','models','revisions','jobs')") == 11,
        "store_tables_created", "tables missing");
  check(q1(db, "PRAGMA user_version") == STORE_SCHEMA_VERSION, "store_user_version", "wrong");
  check(s && store_integrity_check(s, &e) == 0, "store_integrity_fresh", "%s", e.msg);
  store_close(s);
  /* journal_mode is persistent in the file: WAL. */
  sqlite3 *h;
  sqlite3_open(db, &h);
  sqlite3_stmt *st;
  sqlite3_prepare_v2(h, "PRAGMA journal_mode", -1, &st, NULL);
  sqlite3_step(st);
  check(!strcmp((const char *)sqlite3_column_text(st, 0), "wal"), "store_wal_mode", "%s", sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(h);

  s = store_open(db, &e);
  check(s && store_schema_version(s) == STORE_SCHEMA_VERSION, "store_reopen", "%s", e.msg);
  store_close(s);
  rawexec(db, "PRAGMA user_version = 99");
  s = store_open(db, &e);
  check(!s && strstr(e.msg, "newer") && strstr(e.msg, db), "store_refuses_newer_schema", "%s", e.msg);
  store_close(s);

  /* An empty file is a database with no schema; text is not a database. */
  char empty[400], junk[400];
  snprintf(empty, sizeof empty, "%s", make_db_path("empty.db"));
  fclose(fopen(empty, "wb"));
  s = store_open(empty, &e);
  check(s && store_schema_version(s) == STORE_SCHEMA_VERSION, "store_migrates_empty_file", "%s", e.msg);
  store_close(s);
  /* A version-1 store (its jobs table allowed a "finetune" kind nothing ran) migrates:
  ** its jobs are kept and the kind is refused by the schema itself. */
  /* A version-1 file: the jobs table of then, no runs.dist (version 3), none of version 4's
  ** columns (epoch F1 scores and confusions, run results, a model's best revision), none of
  ** version 5's (an imported revision's tokenizer side files), and a run with an epoch
  ** record that must come through. */
  int v1rc = rawexec(empty, "ALTER TABLE tokenizers DROP COLUMN source; ALTER TABLE tokenizers DROP COLUMN job_id;"
                 "ALTER TABLE datasets DROP COLUMN source; ALTER TABLE datasets DROP COLUMN job_id;"
                 "ALTER TABLE revisions DROP COLUMN tokenizer_config; ALTER TABLE revisions DROP COLUMN special_tokens_map;"
                 "ALTER TABLE runs DROP COLUMN dist; ALTER TABLE runs DROP COLUMN pid_start; DROP TABLE jobs; DROP TABLE blob_readers;"
                 "ALTER TABLE runs DROP COLUMN claimed;"
                 "ALTER TABLE runs DROP COLUMN results; ALTER TABLE epoch_metrics DROP COLUMN macro_f1;"
                 "ALTER TABLE epoch_metrics DROP COLUMN weighted_f1; ALTER TABLE epoch_metrics DROP COLUMN confusion;"
                 "DROP TABLE models; CREATE TABLE models (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
                 " created REAL NOT NULL) STRICT;"
                 "INSERT INTO runs(id, name, config, status, created) VALUES (1, 'old', '{}', 'done', 1);"
                 "INSERT INTO epoch_metrics(run_id, epoch, train_loss, eval_loss, time) VALUES (1, 0, 2.5, 2.25, 1);"
                 "CREATE TABLE jobs (id INTEGER PRIMARY KEY,"
                 " kind TEXT NOT NULL CHECK (kind IN ('tokenizer','prepare','train','finetune')),"
                 " status TEXT NOT NULL CHECK (status IN ('queued','running','done','failed','interrupted','cancelled')),"
                 " params TEXT NOT NULL CHECK (json_valid(params)), run_id INTEGER REFERENCES runs(id) ON DELETE SET NULL,"
                 " pid INTEGER, cancel_requested INTEGER NOT NULL DEFAULT 0,"
                 " created REAL NOT NULL, started REAL, finished REAL, error TEXT) STRICT;"
                 "CREATE INDEX jobs_by_status ON jobs(status, id);"
                 "INSERT INTO jobs(kind, status, params, created) VALUES ('prepare', 'done', '{\"name\": \"v1\"}', 1);"
                 "PRAGMA user_version = 1;");
  s = store_open(empty, &e);
  json_t *v1job = s ? store_job_get(s, 1, &e) : NULL;
  json_t *v1m = s ? store_run_metrics(s, 1, 0, &e) : NULL;
  json_t *v1ep = json_array_get(json_object_get(v1m, "epochs"), 0);
  check(v1ep && json_real_value(json_object_get(v1ep, "eval_loss")) == 2.25 && !json_object_get(v1ep, "eval_macro_f1") &&
            q1(empty, "SELECT COUNT(*) FROM pragma_table_info('epoch_metrics') WHERE name IN ('macro_f1', 'weighted_f1', 'confusion')") == 3 &&
            q1(empty, "SELECT COUNT(*) FROM pragma_table_info('models') WHERE name = 'best_revision'") == 1 &&
            q1(empty, "SELECT COUNT(*) FROM pragma_table_info('revisions') WHERE name IN ('tokenizer_config', 'special_tokens_map')") == 2,
        "store_migrates_v3_epochs_to_v4", "%s", e.msg);
  json_decref(v1m);
  store_close(s);
  sqlite3 *h1;
  sqlite3_open(empty, &h1);
  int finetune_rc = sqlite3_exec(h1, "INSERT INTO jobs(kind, status, params, created) VALUES ('finetune', 'queued', '{}', 1)",
                                 NULL, NULL, NULL);
  sqlite3_close(h1);
  check(v1rc == SQLITE_OK && s && q1(empty, "PRAGMA user_version") == STORE_SCHEMA_VERSION && v1job &&
            !strcmp(json_string_value(json_object_get(json_object_get(v1job, "params"), "name")) ?: "", "v1") &&
            finetune_rc != SQLITE_OK && q1(empty, "SELECT COUNT(*) FROM jobs") == 1 &&
            q1(empty, "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = 'dist'") == 1 &&
            q1(empty, "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name = 'claimed'") == 1,
        "store_migrates_v1_jobs", "%s", e.msg);
  json_decref(v1job);
  /* A version-5 file (no registry columns, no job progress) with a tokenizer, a dataset and a
  ** job: they come through with source, job and progress null. */
  char v5[400];
  snprintf(v5, sizeof v5, "%s", make_db_path("v5.db"));
  s = store_open(v5, &e);
  store_close(s);
  int v5rc = rawexec(v5, "ALTER TABLE tokenizers DROP COLUMN source; ALTER TABLE tokenizers DROP COLUMN job_id;"
                         "ALTER TABLE datasets DROP COLUMN source; ALTER TABLE datasets DROP COLUMN job_id;"
                         "ALTER TABLE jobs DROP COLUMN progress;"
                         "ALTER TABLE runs DROP COLUMN pid_start; ALTER TABLE jobs DROP COLUMN pid_start; DROP TABLE blob_readers;"
                         "ALTER TABLE runs DROP COLUMN claimed;"
                         "INSERT INTO blobs(sha256, size, created) VALUES ('" "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" "', 0, 1);"
                         "INSERT INTO tokenizers(name, vocab_size, blob, created) VALUES ('old-tok', 100,"
                         " 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 1);"
                         "INSERT INTO datasets(name, tokenizer_id, seq_len, created) VALUES ('old-ds', 1, 64, 1);"
                         "INSERT INTO dataset_shards VALUES (1, 'train', 'train-0.shard', 10), (1, 'valid', 'valid-0.shard', 2);"
                         "INSERT INTO jobs(kind, status, params, created) VALUES ('prepare', 'done', '{}', 1);"
                         "PRAGMA user_version = 5;");
  s = store_open(v5, &e);
  json_t *v5t = s ? store_tokenizer_info(s, "old-tok", &e) : NULL, *v5d = s ? store_dataset_get(s, "old-ds", &e) : NULL;
  json_t *v5j = s ? store_job_get(s, 1, &e) : NULL;
  check(v5rc == SQLITE_OK && s && store_schema_version(s) == STORE_SCHEMA_VERSION && v5t && json_is_null(json_object_get(v5t, "source")) &&
            json_is_null(json_object_get(v5t, "job")) && v5d && json_is_null(json_object_get(v5d, "source")) &&
            json_is_null(json_object_get(v5d, "split")) && json_integer_value(json_object_get(v5d, "shards")) == 2 &&
            json_integer_value(json_object_get(v5d, "samples")) == 12 && v5j && json_is_null(json_object_get(v5j, "progress")) &&
            q1(v5, "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'blob_readers'") == 1,
        "store_migrates_v5_registry", "%s", e.msg);
  json_decref(v5t);
  json_decref(v5d);
  json_decref(v5j);
  store_close(s);
  snprintf(junk, sizeof junk, "%s", make_db_path("junk.db"));
  FILE *f = fopen(junk, "wb");
  for (int i = 0; i < 100; i++) fputs("this is not a database at all\n", f);
  fclose(f);
  s = store_open(junk, &e);
  check(!s && strstr(e.msg, junk), "store_refuses_non_database", "%s", e.msg);
  store_close(s);
  s = store_open("/nonexistent/dir/x.db", &e);
  check(!s && strstr(e.msg, "/nonexistent/dir/x.db"), "store_refuses_bad_path", "%s", e.msg);
  store_close(s);
}

/* Runs fn(db) in a child process (as user nobody when this is root and as_nobody is
** set) that must finish within secs: its exit status, 124 when it did not finish, 125
** when it could not become nobody. */
static int in_child(int (*fn)(const char *), const char *db, int secs, int as_nobody) {
  pid_t pid = fork();
  if (pid == 0) {
    if (as_nobody && geteuid() == 0 && (setgid(65534) || setuid(65534))) _exit(125);
    alarm((unsigned)secs);   /* SIGALRM kills a child stuck on the lock */
    _exit(fn(db));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 124;
}

/* Opens db and lists its models: 0 when both work and the model "held" is there. */
static int open_and_list(const char *db) {
  Err e = {0};
  Store *s = store_open(db, &e);
  json_t *ml = s ? store_models_list(s, &e) : NULL;
  int ok = ml && json_array_size(ml) == 1;
  if (!ok) fprintf(stderr, "open_and_list %s: %s\n", db, e.msg);
  json_decref(ml);
  store_close(s);
  return ok ? 0 : 1;
}

/* Opens db read-only as it is and reads its blob as a download does: pinned where the
** store can be written, unpinned (an empty key) where it cannot. 0 when it reads "w". */
static int pin_and_read(const char *db) {
  Err e = {0};
  Store *s = store_open(db, &e);
  StoreRevision r;
  char key[65] = "x";
  int ok = s && store_resolve(s, "held", &r, &e) == 0 && store_blob_pin(s, r.weights, key, &e) == 0;
  uint64_t total = 0;
  StoreBlobReader *br = ok ? store_blob_open(s, r.weights, &total, &e) : NULL;
  ok = br && total == 1;
  store_blob_close(br);
  if (ok) store_blob_unpin(s, key);
  if (!ok) fprintf(stderr, "pin_and_read %s: %s\n", db, e.msg);
  store_close(s);
  return ok ? 0 : 1;
}

/* Opens db expecting the refusal of a WAL store whose folder the user may not write:
** 0 when it says so (the -shm file, the folder), not SQLite's "readonly database". */
static int refused_for_shm(const char *db) {
  Err e = {0};
  Store *s = store_open(db, &e);
  int ok = !s && strstr(e.msg, "needs to make its -shm file beside it") && strstr(e.msg, "folder");
  if (!ok) fprintf(stderr, "refused_for_shm %s: %s\n", db, s ? "opened" : e.msg);
  store_close(s);
  return ok ? 0 : 1;
}

/* Opening a store reads: it neither waits on another connection's write transaction
** (a training's push, a CLI command's) nor needs a writable file. */
static void open_busy_tests(void) {
  Err e = {0};
  char db[400], rodir[400], ro[500];
  snprintf(db, sizeof db, "%s", make_db_path("busy.db"));
  Store *s = store_open(db, &e);
  StorePush p = {.message = "m", .config_json = "{}", .weights = "w", .weights_len = 1};
  int rc = s ? store_push(s, "held", &p, NULL, &e) : -1;
  store_close(s);
  sqlite3 *h = NULL;
  int lrc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  if (lrc == SQLITE_OK) lrc = sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int crc = in_child(open_and_list, db, 5, 0);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(h);
  check(rc == 0 && lrc == SQLITE_OK && crc == 0 && secs < 4, "store_open_does_not_wait_on_a_writer",
        "push %d, lock %d, child exit %d after %.1f s (124: still waiting)", rc, lrc, crc, secs);

  /* A database file the user may only read, in a folder it may write (where SQLite
  ** makes the -shm and -wal files a reader of a WAL database needs). As root, the
  ** reader is user nobody, so the folder is one nobody can reach: under /tmp, not
  ** under the test's own (private) folder. */
  snprintf(rodir, sizeof rodir, "/tmp/maskd-ro.XXXXXX");
  int prc = -1;
  if (mkdtemp(rodir)) {
    snprintf(ro, sizeof ro, "%s/ro.db", rodir);
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "cp %s %s && chmod 777 %s && chmod 444 %s", db, ro, rodir, ro);
    prc = system(cmd);
  }
  crc = prc == 0 ? in_child(open_and_list, ro, 20, 1) : -1;
  if (crc == 125) check_skip("store_open_read_only_file", "cannot run as user nobody");
  else check(crc == 0, "store_open_read_only_file", "child exit %d (setup %d)", crc, prc);
  /* ... and its blobs download there: the pin, a write, is left out (it failed the
  ** download with 500 "attempt to write a readonly database"). */
  crc = prc == 0 ? in_child(pin_and_read, ro, 20, 1) : -1;
  if (crc == 125) check_skip("store_blob_pin_read_only_file", "cannot run as user nobody");
  else check(crc == 0, "store_blob_pin_read_only_file", "child exit %d (setup %d)", crc, prc);
  /* In a folder it may not write either, SQLite cannot make the -shm file a WAL reader
  ** needs: said so (it said "attempt to write a readonly database"). */
  char shut[1600];
  snprintf(shut, sizeof shut, "chmod 755 %s && rm -f %s-wal %s-shm", rodir, ro, ro);
  crc = prc == 0 && system(shut) == 0 ? in_child(refused_for_shm, ro, 20, 1) : -1;
  if (crc == 125) check_skip("store_open_read_only_folder_says_why", "cannot run as user nobody");
  else check(crc == 0, "store_open_read_only_folder_says_why", "child exit %d (setup %d)", crc, prc);
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf %s", rodir);
  if (prc == 0 && system(rm) != 0) fprintf(stderr, "could not remove %s\n", rodir);
}

/* The Hub's listings: store_models_query filters by name (any case), owner and pipeline
** (the newest revision's), sorts with ties by name, pages with a total; a repository without
** a revision is not listed. store_revision_history walks back from a revision, newest first. */
static void hub_list_tests(void) {
  Err e = {0};
  Store *s = store_open(make_db_path("hublist.db"), &e);
  const char *mlm = "{\"architectures\": [\"RobertaForMaskedLM\"], \"model_type\": \"roberta\"}",
             *cls = "{\"architectures\": [\"BertForSequenceClassification\"], \"model_type\": \"bert\"}";
  StorePush pm = {.message = "first\nbody", .config_json = mlm, .weights = "w", .weights_len = 1};
  StorePush pc = {.message = "cls", .config_json = cls, .weights = "c", .weights_len = 1};
  int rc = s ? 0 : -1;
  rc |= s ? store_push(s, "Alpha", &pm, NULL, &e) : -1;
  rc |= s ? store_push(s, "team/beta", &pm, NULL, &e) : -1;
  rc |= s ? store_push(s, "team/alpha-cls", &pc, NULL, &e) : -1;
  rc |= s ? store_push(s, "Alpha", &pm, NULL, &e) : -1;
  rc |= s ? store_push(s, "Alpha", &pm, NULL, &e) : -1;
  rc |= s && store_model_create(s, "empty", &e) > 0 ? 0 : -1;
  check(rc == 0, "hub_list_setup", "%s", e.msg);
  int64_t total = -1;
  StoreModelQuery q = {.limit = 10};
  json_t *a = s ? store_models_query(s, &q, &total, &e) : NULL;
  const char *n0 = json_string_value(json_object_get(json_array_get(a, 0), "name"));
  check(json_array_size(a) == 3 && total == 3 && n0 && !strcmp(n0, "Alpha") &&
            json_integer_value(json_object_get(json_array_get(a, 0), "seq")) == 3 &&
            json_is_array(json_object_get(json_array_get(a, 0), "architectures")),
        "store_models_query_all_with_revisions", "%zu %lld %s", json_array_size(a), (long long)total, n0 ? n0 : "-");
  json_decref(a);
  q = (StoreModelQuery){.search = "ALPHA", .limit = 10};
  a = s ? store_models_query(s, &q, &total, &e) : NULL;
  check(json_array_size(a) == 2 && total == 2, "store_models_query_search_any_case", "%zu", json_array_size(a));
  json_decref(a);
  q = (StoreModelQuery){.author = "team", .pipeline = "text-classification", .limit = 10};
  a = s ? store_models_query(s, &q, &total, &e) : NULL;
  const char *pt = json_string_value(json_object_get(json_array_get(a, 0), "pipeline_tag"));
  check(json_array_size(a) == 1 && pt && !strcmp(pt, "text-classification"), "store_models_query_author_pipeline", "%zu",
        json_array_size(a));
  json_decref(a);
  q = (StoreModelQuery){.author = "tea", .limit = 10};   /* an owner, not a prefix */
  a = s ? store_models_query(s, &q, &total, &e) : NULL;
  check(a && json_array_size(a) == 0 && total == 0, "store_models_query_author_whole_owner", "%zu", json_array_size(a));
  json_decref(a);
  q = (StoreModelQuery){.sort = STORE_SORT_NAME, .descending = 1, .offset = 1, .limit = 1};
  a = s ? store_models_query(s, &q, &total, &e) : NULL;
  const char *n1 = json_string_value(json_object_get(json_array_get(a, 0), "name"));
  check(json_array_size(a) == 1 && total == 3 && n1 && !strcmp(n1, "team/alpha-cls"), "store_models_query_page", "%s",
        n1 ? n1 : "-");
  json_decref(a);
  q = (StoreModelQuery){.limit = -1};
  e = (Err){0};
  a = s ? store_models_query(s, &q, &total, &e) : NULL;
  check(!a && e.kind == ERR_INVALID, "store_models_query_refuses_negative_limit", "%s", e.msg);
  StoreRevision r;
  e = (Err){0};
  rc = s ? store_resolve(s, "Alpha@2", &r, &e) : -1;
  json_t *h = rc ? NULL : store_revision_history(s, r.model_id, r.seq, 0, 10, &total, &e);
  check(json_array_size(h) == 2 && total == 2 && json_integer_value(json_object_get(json_array_get(h, 0), "seq")) == 2 &&
            json_integer_value(json_object_get(json_array_get(h, 1), "seq")) == 1 &&
            !strcmp(json_string_value(json_object_get(json_array_get(h, 0), "message")) ? json_string_value(json_object_get(json_array_get(h, 0), "message")) : "", "first\nbody"),
        "store_revision_history_newest_first", "%zu %lld", json_array_size(h), (long long)total);
  json_decref(h);
  h = rc ? NULL : store_revision_history(s, r.model_id, r.seq, 1, 1, &total, &e);
  check(json_array_size(h) == 1 && total == 2 && json_integer_value(json_object_get(json_array_get(h, 0), "seq")) == 1,
        "store_revision_history_page", "%zu", json_array_size(h));
  json_decref(h);
  store_close(s);
}

/* The listing's pipeline is the one serving and model info give (config_parse's rule): a
** config without architectures and a BertForPreTraining import are masked LMs (fill-mask),
** a bare encoder serves none, nor does a name maskd does not know. */
static void hub_list_pipeline_tests(void) {
  Err e = {0};
  Store *s = store_open(make_db_path("hubpipe.db"), &e);
  static const struct { const char *repo, *config, *pipeline; } repos[] = {
    {"noarch", "{\"model_type\": \"bert\"}", "fill-mask"},
    {"nullarch", "{\"model_type\": \"bert\", \"architectures\": null}", "fill-mask"},
    {"pretraining", "{\"architectures\": [\"BertForPreTraining\"]}", "fill-mask"},
    {"encoder", "{\"architectures\": [\"RobertaModel\"]}", NULL},
    {"classifier", "{\"architectures\": [\"RobertaForSequenceClassification\"]}", "text-classification"},
    {"unknown", "{\"architectures\": [\"XForMaskedLM\"]}", NULL},
    {"empty", "{\"architectures\": []}", NULL},
  };
  int rc = s ? 0 : -1;
  for (size_t i = 0; i < sizeof repos / sizeof repos[0] && !rc; i++) {
    StorePush p = {.message = "m", .config_json = repos[i].config, .weights = "w", .weights_len = 1};
    rc = store_push(s, repos[i].repo, &p, NULL, &e);
  }
  check(rc == 0, "hub_list_pipeline_setup", "%s", e.msg);
  StoreModelQuery q = {.limit = 10};
  json_t *a = rc ? NULL : store_models_query(s, &q, NULL, &e);
  for (size_t i = 0; i < sizeof repos / sizeof repos[0]; i++) {
    const char *got = "(not listed)";
    size_t j;
    json_t *row;
    json_array_foreach(a, j, row) {
      if (strcmp(json_string_value(json_object_get(row, "name")), repos[i].repo)) continue;
      json_t *pt = json_object_get(row, "pipeline_tag");
      got = json_is_string(pt) ? json_string_value(pt) : NULL;
    }
    char name[80];
    snprintf(name, sizeof name, "store_models_query_pipeline_%s", repos[i].repo);
    check(repos[i].pipeline ? got && !strcmp(got, repos[i].pipeline) : !got, name, "%s", got ? got : "null");
  }
  json_decref(a);
  int64_t total = -1;
  q = (StoreModelQuery){.pipeline = "fill-mask", .limit = 10};
  a = rc ? NULL : store_models_query(s, &q, &total, &e);
  check(json_array_size(a) == 3 && total == 3, "store_models_query_filters_fill_mask_by_the_rule", "%zu", json_array_size(a));
  json_decref(a);
  store_close(s);
}

/* One repository serves one pipeline: store_push itself refuses a classifier's revision
** over a masked LM's and the other way round (a training and a fine-tuning of one name
** started together both passed the check made when they started). */
static void repo_task_tests(void) {
  Err e = {0};
  Store *s = store_open(make_db_path("task.db"), &e);
  const char *mlm = "{\"architectures\": [\"RobertaForMaskedLM\"]}", *cls = "{\"architectures\": [\"RobertaForSequenceClassification\"]}",
             *base = "{\"architectures\": [\"RobertaModel\"]}";
  StorePush pm = {.message = "mlm", .config_json = mlm, .weights = "w", .weights_len = 1};
  StorePush pc = {.message = "cls", .config_json = cls, .weights = "w", .weights_len = 1};
  StorePush pb = {.message = "base", .config_json = base, .weights = "w", .weights_len = 1};
  int r1 = s ? store_push(s, "mix", &pm, NULL, &e) : -1;
  e = (Err){0};
  int r2 = s ? store_push(s, "mix", &pc, NULL, &e) : -1;
  json_t *mg = s ? store_model_get(s, "mix", NULL) : NULL;
  check(r1 == 0 && r2 == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "RobertaForMaskedLM (mix@1)") &&
            json_array_size(json_object_get(mg, "revisions")) == 1,
        "store_push_refuses_classifier_over_mlm", "%d %d (%s)", r1, r2, e.msg);
  json_decref(mg);
  e = (Err){0};
  int r3 = s ? store_push(s, "mix", &pb, NULL, &e) : -1, r4 = s ? store_push(s, "mix", &pm, NULL, &e) : -1;
  int r5 = s ? store_push(s, "cls", &pc, NULL, &e) : -1, r6 = s ? store_push(s, "cls", &pc, NULL, &e) : -1;
  e = (Err){0};
  int r7 = s ? store_push(s, "cls", &pm, NULL, &e) : -1;
  check(r3 == 0 && r4 == 0 && r5 == 0 && r6 == 0 && r7 == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "ForSequenceClassification"),
        "store_push_keeps_one_task_per_repo", "%d %d %d %d %d (%s)", r3, r4, r5, r6, r7, e.msg);
  store_close(s);
}

/* StorePush.new_repo refuses a repository that exists (with or without revisions; bytes or a
** stream), writing nothing; StorePush.best makes the revision its repository's best. */
static void push_new_repo_tests(void) {
  Err e = {0};
  Store *s = store_open(make_db_path("newrepo.db"), &e);
  if (!s) { check(0, "store_new_repo_open", "%s", e.msg); return; }
  const char *cfg = "{\"architectures\": [\"RobertaForMaskedLM\"]}";
  StorePush p = {.message = "one", .config_json = cfg, .weights = "w1", .weights_len = 2, .new_repo = 1, .best = 1};
  StoreRevision r1, best;
  int a = store_push(s, "fresh", &p, &r1, &e);
  int b = a ? -1 : store_resolve(s, "fresh@best", &best, &e);
  check(a == 0 && b == 0 && best.id == r1.id && r1.seq == 1, "store_push_best_marks_the_revision", "%d %d (%s)", a, b, e.msg);
  e = (Err){0};
  p.weights = "w2";
  int c = store_push(s, "fresh", &p, NULL, &e);
  json_t *m = store_model_get(s, "fresh", NULL);
  check(c == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "fresh exists") && json_array_size(json_object_get(m, "revisions")) == 1,
        "store_push_new_repo_refuses_an_existing_one", "%d %s: %s", c, err_kind_name(e.kind), e.msg);
  json_decref(m);
  /* A repository without revisions (store_model_create) exists too; a streamed push is refused before it streams. */
  int64_t id = store_model_create(s, "empty", &e);
  StoreStream st = {2, NULL, NULL};
  StorePush ps = {.message = "two", .config_json = cfg, .weights_stream = &st, .new_repo = 1};
  e = (Err){0};
  int d = id > 0 ? store_push(s, "empty", &ps, NULL, &e) : -1;
  check(d == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "empty exists"), "store_push_new_repo_refuses_an_empty_one",
        "%lld %d %s: %s", (long long)id, d, err_kind_name(e.kind), e.msg);
  store_close(s);
}

/* An import keeps the folder's tokenizer side files as they came; other revisions have none. */
static void side_file_tests(void) {
  Err e = {0};
  char db[400];
  snprintf(db, sizeof db, "%s", make_db_path("side.db"));
  Store *s = store_open(db, &e);
  if (!s) { check(0, "store_side_open", "%s", e.msg); return; }
  const char *tj = "{\"version\": \"1.0\"}";
  /* model_max_length as transformers writes it: an integer past int64. */
  const char *tc = "{\n  \"do_lower_case\": true,\n  \"mask_token\": \"[MASK]\",\n  \"model_max_length\": 1000000000000000019884624838656\n}\n", *side_map = "{\"mask_token\": \"[MASK]\"}";
  StorePush p = {.message = "Import", .config_json = "{\"model_type\": \"bert\"}", .weights = "w", .weights_len = 1,
                 .tokenizer_json = tj};
  StoreRevision plain, imp;
  void *d1 = NULL, *d2 = NULL;
  size_t l1 = 0, l2 = 0;
  int rc = store_push(s, "user/own", &p, &plain, &e);
  check(rc == 0 && store_revision_file(s, &plain, "tokenizer_config.json", &d1, &l1, &e) == -1 && e.kind == ERR_NOT_FOUND,
        "store_revision_side_file_absent", "%s: %s", err_kind_name(e.kind), e.msg);
  p.tokenizer_config_json = tc;
  p.special_tokens_map_json = side_map;
  rc = store_push(s, "user/imported", &p, &imp, &e);
  int g1 = rc ? -1 : store_revision_file(s, &imp, "tokenizer_config.json", &d1, &l1, &e);
  int g2 = rc ? -1 : store_revision_file(s, &imp, "special_tokens_map.json", &d2, &l2, &e);
  check(rc == 0 && g1 == 0 && g2 == 0 && l1 == strlen(tc) && !memcmp(d1, tc, l1) && l2 == strlen(side_map) && !memcmp(d2, side_map, l2),
        "store_revision_side_files_kept", "%s", e.msg);
  free(d1); free(d2);
  p.tokenizer_config_json = "[1]";
  check(store_push(s, "user/imported", &p, NULL, &e) == -1 && strstr(e.msg, "tokenizer_config.json"),
        "store_push_refuses_bad_side_file", "%s", e.msg);
  store_close(s);
}

static void api_tests(void) {
  Err e = {0};
  char db[400];
  snprintf(db, sizeof db, "%s", make_db_path("api.db"));
  Store *s = store_open(db, &e);
  if (!s) { check(0, "store_api_open", "%s", e.msg); return; }

  /* Blobs. */
  char h1[65], h2[65], h3[65];
  int rc = store_blob_put(s, "hello", 5, h1, &e);
  rc |= store_blob_put(s, "hello", 5, h2, &e);
  void *data;
  size_t len;
  rc |= store_blob_get(s, h1, &data, &len, &e);
  check(rc == 0 && !strcmp(h1, h2) && len == 5 && !memcmp(data, "hello", 5) &&
            q1(db, "SELECT COUNT(*) FROM blobs") == 1,
        "store_blob_round_trip_dedup", "%s", e.msg);
  free(data);
  rc = store_blob_put(s, NULL, 0, h3, &e) | store_blob_get(s, h3, &data, &len, &e);
  check(rc == 0 && len == 0, "store_blob_empty", "%s", e.msg);
  free(data);
  size_t big = (16u << 20) + 5;
  unsigned char *b = malloc(big);
  for (size_t i = 0; i < big; i++) b[i] = (unsigned char)(i * 31 + (i >> 12));
  char hb[65];
  rc = store_blob_put(s, b, big, hb, &e) | store_blob_get(s, hb, &data, &len, &e);
  char qs[200];
  snprintf(qs, sizeof qs, "SELECT COUNT(*) FROM blob_chunks WHERE sha256 = '%s'", hb);
  check(rc == 0 && len == big && !memcmp(data, b, big) && q1(db, qs) == 2, "store_blob_chunked", "%s", e.msg);
  free(data);
  /* Read in place: ranges inside a chunk and across the two, front to back (hashed on
  ** the way), then out of order (verify reads the rest), past the end refused. */
  {
    uint64_t blen = 0;
    StoreBlobReader *r = store_blob_open(s, hb, &blen, &e);
    unsigned char *got = malloc(big);
    int same = r && got && blen == big;
    size_t step = (1u << 20) + 3;
    for (size_t at = 0; same && at < big; at += step) {
      size_t n = big - at < step ? big - at : step;
      same = store_blob_read(r, at, got + at, n, &e) == 0 && !memcmp(got + at, b + at, n);
    }
    check(same && store_blob_verify(r, &e) == 0, "store_blob_reader_in_order", "%s", e.msg);
    store_blob_close(r);
    r = store_blob_open(s, hb, &blen, &e);
    size_t across = (16u << 20) - 7;
    same = r && store_blob_read(r, across, got, 10, &e) == 0 && !memcmp(got, b + across, 10) &&
           store_blob_read(r, 3, got, 10, &e) == 0 && !memcmp(got, b + 3, 10);
    check(same && store_blob_verify(r, &e) == 0, "store_blob_reader_out_of_order", "%s", e.msg);
    rc = r ? store_blob_read(r, big - 2, got, 3, &e) : 0;
    check(rc == -1 && e.kind == ERR_INVALID && strstr(e.msg, "past"), "store_blob_reader_refuses_past_end", "%s", e.msg);
    store_blob_close(r);
    r = store_blob_open(s, "0000000000000000000000000000000000000000000000000000000000000000", &blen, &e);
    check(!r && strstr(e.msg, "missing"), "store_blob_reader_missing", "%s", e.msg);
    /* The readers' snapshots ended: a write transaction starts (the bytes are there already). */
    char hx[65];
    check(store_blob_put(s, "hello", 5, hx, &e) == 0, "store_blob_reader_closes_snapshot", "%s", e.msg);
    /* A changed byte: the reader returns the bytes, verify refuses them. */
    char upd[300];
    snprintf(upd, sizeof upd, "UPDATE blob_chunks SET data = CAST(X'FF' || substr(data, 2) AS BLOB) WHERE sha256 = '%s' AND idx = 1", hb);
    rawexec(db, upd);
    r = store_blob_open(s, hb, &blen, &e);
    rc = r ? store_blob_verify(r, &e) : 0;
    check(rc == -1 && strstr(e.msg, "damaged (sha256 differs)"), "store_blob_reader_detects_damage", "%s", e.msg);
    store_blob_close(r);
    free(got);
  }
  free(b);
  rc = store_blob_get(s, "00", &data, &len, &e);
  check(rc == -1 && strstr(e.msg, "sha256"), "store_blob_refuses_bad_hash", "%s", e.msg);
  rc = store_blob_get(s, "0000000000000000000000000000000000000000000000000000000000000000", &data, &len, &e);
  check(rc == -1 && strstr(e.msg, "missing"), "store_blob_missing", "%s", e.msg);
  char sql[400];
  snprintf(sql, sizeof sql, "UPDATE blob_chunks SET data = X'00' WHERE sha256 = '%s'", h1);
  rawexec(db, sql);
  rc = store_blob_get(s, h1, &data, &len, &e);
  check(rc == -1 && strstr(e.msg, "damaged"), "store_blob_detects_damage", "%s", e.msg);

  /* Tokenizers. */
  const char *tj = "{\"version\": \"1.0\", \"model\": {\"type\": \"Unigram\", \"vocab\": [[\"<unk>\", 0.0]]}}";
  int64_t tid = store_tokenizer_add(s, "wiki-8k", tj, 8000, "{\"corpora\": [{\"name\": \"c.txt\", \"bytes\": 5, \"sha256\": \"ab\"}]}", 0, &e);
  char *text = NULL;
  int64_t tid2 = 0;
  rc = store_tokenizer_get(s, "wiki-8k", &text, &tid2, &e);
  check(tid > 0 && rc == 0 && tid2 == tid && text && !strcmp(text, tj), "store_tokenizer_round_trip", "%s", e.msg);
  free(text);
  check(store_tokenizer_add(s, "wiki-8k", tj, 8000, NULL, 0, &e) == -1 && strstr(e.msg, "already exists"), "store_tokenizer_refuses_duplicate", "%s", e.msg);
  check(e.kind == ERR_CONFLICT, "store_kind_name_taken_is_conflict", "%s: %s", err_kind_name(e.kind), e.msg);
  check(store_tokenizer_add(s, "t2", "{\"a\":", 10, NULL, 0, &e) == -1 && strstr(e.msg, "malformed"), "store_tokenizer_refuses_bad_json", "%s", e.msg);
  check(store_tokenizer_add(s, "bad name", tj, 10, NULL, 0, &e) == -1 && strstr(e.msg, "name"), "store_tokenizer_refuses_bad_name", "%s", e.msg);
  check(store_tokenizer_add(s, "t3", tj, 0, NULL, 0, &e) == -1 && strstr(e.msg, "vocab_size"), "store_tokenizer_refuses_zero_vocab", "%s", e.msg);
  check(store_tokenizer_get(s, "nope", &text, NULL, &e) == -1 && strstr(e.msg, "nope"), "store_tokenizer_missing", "%s", e.msg);
  check(store_tokenizer_add(s, "t4", tj, 10, "[1]", 0, &e) == -1 && strstr(e.msg, "object") && e.kind == ERR_INVALID &&
            store_tokenizer_add(s, "t4", tj, 10, "{", 0, &e) == -1 && store_tokenizer_add(s, "t4", tj, 10, NULL, -3, &e) == -1,
        "store_tokenizer_refuses_bad_source", "%s", e.msg);
  int64_t tid5 = store_tokenizer_add(s, "t5", tj, 10, NULL, 42, &e);
  json_t *list = store_tokenizers_list(s, &e);
  json_t *t0 = json_array_get(list, 0), *t1 = json_array_get(list, 1);
  check(tid5 > tid && list && json_array_size(list) == 2 && json_integer_value(json_object_get(t0, "vocab_size")) == 8000 &&
            !strcmp(json_string_value(json_object_get(t0, "name")), "wiki-8k") &&
            json_string_length(json_object_get(t0, "sha256")) == 64 && json_is_null(json_object_get(t0, "job")) &&
            json_integer_value(json_object_get(json_array_get(json_object_get(json_object_get(t0, "source"), "corpora"), 0), "bytes")) == 5 &&
            json_integer_value(json_object_get(t1, "job")) == 42 && json_is_null(json_object_get(t1, "source")),
        "store_tokenizers_list", "%s", e.msg);
  json_decref(list);
  json_t *ti = store_tokenizer_info(s, "t5", &e);
  check(ti && json_integer_value(json_object_get(ti, "job")) == 42 && json_integer_value(json_object_get(ti, "vocab_size")) == 10,
        "store_tokenizer_info", "%s", e.msg);
  json_decref(ti);
  ti = store_tokenizer_info(s, "nope", &e);
  check(!ti && e.kind == ERR_NOT_FOUND && strstr(e.msg, "nope"), "store_tokenizer_info_missing", "%s", e.msg);

  /* Datasets. */
  StoreShard shards[] = {{"train", "/d/train-00000-5000.shard", 5000}, {"train", "/d/train-00001-1234.shard", 1234},
                         {"validation", "/d/validation-00000-600.shard", 600}};
  int64_t did = store_dataset_add(s, "wikitext-128", "wiki-8k", 128, shards, 3,
                                  "{\"corpora\": [], \"tokenizer\": {\"name\": \"wiki-8k\", \"sha256\": \"ab\"}}", 7, &e);
  json_t *ds = store_dataset_get(s, "wikitext-128", &e);
  json_t *tr = ds ? json_object_get(json_object_get(ds, "splits"), "train") : NULL;
  check(did > 0 && ds && json_integer_value(json_object_get(tr, "samples")) == 6234 &&
            json_integer_value(json_object_get(tr, "shards")) == 2 &&
            !strcmp(json_string_value(json_object_get(ds, "tokenizer")), "wiki-8k") &&
            json_array_size(json_object_get(ds, "files")) == 3 && json_integer_value(json_object_get(ds, "shards")) == 3 &&
            json_is_null(json_object_get(ds, "split")) && json_integer_value(json_object_get(ds, "job")) == 7 &&
            !strcmp(json_string_value(json_object_get(json_object_get(json_object_get(ds, "source"), "tokenizer"), "name")) ?: "", "wiki-8k"),
        "store_dataset_round_trip", "%s", e.msg);
  json_decref(ds);
  StoreShard dup[] = {{"train", "/x", 1}, {"train", "/x", 2}};
  long long before = q1(db, "SELECT COUNT(*) FROM datasets");
  check(store_dataset_add(s, "d2", NULL, 128, dup, 2, NULL, 0, &e) == -1 && strstr(e.msg, "twice") &&
            q1(db, "SELECT COUNT(*) FROM datasets") == before,
        "store_dataset_refuses_duplicate_shard_atomically", "%s", e.msg);
  check(store_dataset_add(s, "d3", "nope", 128, shards, 1, NULL, 0, &e) == -1 && strstr(e.msg, "nope"), "store_dataset_refuses_unknown_tokenizer", "%s", e.msg);
  StoreShard neg[] = {{"train", "/x", -1}};
  check(store_dataset_add(s, "d4", NULL, 128, neg, 1, NULL, 0, &e) == -1, "store_dataset_refuses_negative_count", "accepted");
  check(store_dataset_add(s, "d5", NULL, 0, shards, 1, NULL, 0, &e) == -1 && strstr(e.msg, "seq_len"), "store_dataset_refuses_zero_seq", "%s", e.msg);
  check(store_dataset_add(s, "d6", NULL, 128, shards, 1, "\"x\"", 0, &e) == -1 && strstr(e.msg, "dataset source"),
        "store_dataset_refuses_bad_source", "%s", e.msg);
  int64_t did7 = store_dataset_add(s, "d7", NULL, 64, shards, 2, NULL, 0, &e);
  list = store_datasets_list(s, &e);
  json_t *dl0 = json_array_get(list, 0), *dl1 = json_array_get(list, 1);
  check(did7 > did && list && json_array_size(list) == 2 && json_integer_value(json_object_get(dl0, "samples")) == 6834 &&
            json_integer_value(json_object_get(dl0, "shards")) == 3 && json_is_null(json_object_get(dl0, "split")) &&
            json_is_object(json_object_get(dl0, "source")) &&
            !strcmp(json_string_value(json_object_get(dl1, "split")) ?: "", "train") &&
            json_integer_value(json_object_get(dl1, "shards")) == 2 && json_is_null(json_object_get(dl1, "tokenizer")) &&
            json_is_null(json_object_get(dl1, "source")) && json_is_null(json_object_get(dl1, "job")),
        "store_datasets_list", "%s", e.msg);
  json_decref(list);
  ds = store_dataset_get(s, "nope", &e);
  check(!ds && e.kind == ERR_NOT_FOUND, "store_dataset_get_missing", "%s", e.msg);

  /* Runs and metrics. */
  int64_t run = store_run_create(s, "small-wiki", "{\"epochs\": 3, \"lr\": 0.0001}", &e);
  rc = store_run_set_status(s, run, STORE_STATUS_RUNNING, NULL, &e);
  rc |= store_run_progress(s, run, 10, 300, 1, &e);
  StoreStepMetric sm[100];
  for (int i = 0; i < 100; i++) sm[i] = (StoreStepMetric){i + 1, (i + 1) / 100.0, 9.0 - i * 0.01, 1e-4, 1.5, 2000, 0};
  sm[50].loss = NAN;
  sm[51].grad_norm = INFINITY;
  rc |= store_step_metrics_add(s, run, sm, 100, &e);
  StoreEpochMetric em = {.epoch = 1, .train_loss = 8.5, .eval_loss = 7.9, .eval_accuracy = 0.05, .perplexity = 2697.28, .eval_runtime = 3.5};
  rc |= store_epoch_metrics_add(s, run, &em, &e);
  em.eval_loss = 7.5;
  rc |= store_epoch_metrics_add(s, run, &em, &e);   /* a resumed run re-evaluates epoch 1 */
  json_t *m = store_run_metrics(s, run, 90, &e);
  json_t *steps = m ? json_object_get(m, "steps") : NULL, *epochs = m ? json_object_get(m, "epochs") : NULL;
  check(rc == 0 && run > 0 && steps && json_array_size(steps) == 10 &&
            json_integer_value(json_object_get(json_array_get(steps, 0), "step")) == 91 && json_array_size(epochs) == 1 &&
            json_real_value(json_object_get(json_array_get(epochs, 0), "eval_loss")) == 7.5,
        "store_run_metrics", "%s", e.msg);
  json_decref(m);
  m = store_run_metrics(s, run, 0, &e);
  json_t *s51 = json_array_get(json_object_get(m, "steps"), 50), *s52 = json_array_get(json_object_get(m, "steps"), 51);
  check(m && json_is_null(json_object_get(s51, "loss")) && json_is_null(json_object_get(s52, "grad_norm")) &&
            json_real_value(json_object_get(s52, "loss")) == sm[51].loss,
        "store_nonfinite_metrics_are_null", "%s", e.msg);
  json_decref(m);
  /* A classifier's epoch: F1 scores and its confusion list come back in the epoch's entry;
  ** a masked LM's entries have none of them. Test metrics go to the run's results. */
  StoreEpochMetric ce = {.epoch = 0, .train_loss = 1.5, .eval_loss = 1.25, .eval_accuracy = 0.75, .eval_runtime = 1,
                         .perplexity = NAN, .cls = 1, .macro_f1 = 0.5, .weighted_f1 = 0.625,
                         .confusion_json = "[{\"true\": \"a\", \"pred\": \"b\", \"count\": 3}]"};
  rc = store_epoch_metrics_add(s, run, &ce, &e);
  StoreEpochMetric bad_ce = ce;
  bad_ce.confusion_json = "{\"x\": 1}";
  int badc = store_epoch_metrics_add(s, run, &bad_ce, &e);
  m = store_run_metrics(s, run, 1000, &e);
  json_t *e1 = json_array_get(json_object_get(m, "epochs"), 1), *e2 = json_array_get(json_object_get(m, "epochs"), 0);
  json_t *conf = json_object_get(e2, "confusion");
  check(rc == 0 && badc == -1 && e1 && !json_object_get(e1, "eval_macro_f1") && !json_object_get(e1, "confusion") &&
            json_real_value(json_object_get(e2, "eval_macro_f1")) == 0.5 &&
            json_real_value(json_object_get(e2, "eval_weighted_f1")) == 0.625 && json_is_array(conf) &&
            json_integer_value(json_object_get(json_array_get(conf, 0), "count")) == 3,
        "store_epoch_classification_metrics", "%s", e.msg);
  json_decref(m);
  rc = store_run_set_results(s, run, "{\"test\": {\"accuracy\": 0.9}}", &e);
  json_t *res = store_run_get(s, run, &e);
  check(rc == 0 && json_real_value(json_object_get(json_object_get(json_object_get(res, "results"), "test"), "accuracy")) == 0.9 &&
            store_run_set_results(s, run, "[]", &e) == -1,
        "store_run_results", "%s", e.msg);
  json_decref(res);
  /* A data-parallel run's record: an object, returned parsed; anything else refused. */
  json_t *d0 = store_run_get(s, run, &e);
  check(d0 && json_is_null(json_object_get(d0, "dist")), "store_run_dist_starts_null", "%s", e.msg);
  json_decref(d0);
  int drc = store_run_set_dist(s, run, "{\"ranks\": 2, \"tokens_per_s\": [10.5, 11.5]}", &e);
  int bad1 = store_run_set_dist(s, run, "[1, 2]", &e), bad2 = store_run_set_dist(s, run, "{", &e);
  int bad3 = store_run_set_dist(s, run + 1000, "{}", &e);
  d0 = store_run_get(s, run, &e);
  json_t *dj = json_object_get(d0, "dist");
  check(drc == 0 && bad1 == -1 && bad2 == -1 && bad3 == -1 && json_integer_value(json_object_get(dj, "ranks")) == 2 &&
            json_real_value(json_array_get(json_object_get(dj, "tokens_per_s"), 1)) == 11.5,
        "store_run_dist", "%s", e.msg);
  json_decref(d0);
  json_t *rj = store_run_get(s, run, &e);
  check(rj && !strcmp(json_string_value(json_object_get(rj, "status")), "running") &&
            json_integer_value(json_object_get(json_object_get(rj, "config"), "epochs")) == 3 &&
            json_integer_value(json_object_get(rj, "total_steps")) == 300 &&
            json_integer_value(json_object_get(rj, "pid")) == getpid() && json_is_real(json_object_get(rj, "started")),
        "store_run_get", "%s", e.msg);
  json_decref(rj);
  /* A resumed run's new description replaces the old one; only an object is taken, and
  ** only for a run that exists (ERR_NOT_FOUND). */
  int crc = store_run_set_config(s, run, "{\"epochs\": 3, \"ranks\": 1, \"grad_accum\": 2}", &e);
  int cbad1 = store_run_set_config(s, run, "[]", &e), cbad2 = store_run_set_config(s, run, "{\"a\":", &e);
  int cbad3 = store_run_set_config(s, run + 1000, "{}", &e);
  ErrKind cbad3_kind = e.kind;
  rj = store_run_get(s, run, &e);
  json_t *cj = json_object_get(rj, "config");
  check(crc == 0 && cbad1 == -1 && cbad2 == -1 && cbad3 == -1 && cbad3_kind == ERR_NOT_FOUND &&
            json_integer_value(json_object_get(cj, "grad_accum")) == 2 &&
            json_integer_value(json_object_get(cj, "epochs")) == 3 &&
            !strcmp(json_string_value(json_object_get(rj, "status")), "running"),
        "store_run_set_config", "%s", e.msg);
  json_decref(rj);
  int64_t run2 = store_run_create(s, "small-wiki", "{}", &e);
  check(store_run_find(s, "small-wiki", &e) == run2 && store_run_find(s, "1", &e) == run &&
            store_run_find(s, "nope", &e) == -1 && strstr(e.msg, "nope") && store_run_find(s, "999", &e) == -1,
        "store_run_find", "%s", e.msg);
  store_run_find(s, "nope", &e);
  check(e.kind == ERR_NOT_FOUND, "store_kind_unknown_run_is_not_found", "%s: %s", err_kind_name(e.kind), e.msg);
  rc = store_run_set_status(s, run, STORE_STATUS_DONE, NULL, &e);
  list = store_runs_list(s, &e);
  json_t *r0 = json_array_get(list, 1);
  check(rc == 0 && list && json_array_size(list) == 2 && json_integer_value(json_object_get(r0, "id")) == run &&
            !strcmp(json_string_value(json_object_get(r0, "status")), "done") &&
            json_real_value(json_object_get(r0, "last_loss")) == sm[99].loss &&
            json_real_value(json_object_get(r0, "eval_loss")) == 7.5 && json_is_real(json_object_get(r0, "finished")),
        "store_runs_list", "%s", e.msg);
  json_decref(list);
  /* A status is an enum now: a word no status has does not parse, and a value outside
  ** the enum, or one a run never takes (queued), is refused by name. */
  StoreStatus parsed = STORE_STATUS_DONE;
  check(store_status_parse("exploded", &parsed) == -1 && parsed == STORE_STATUS_DONE &&
            store_run_set_status(s, run, (StoreStatus)99, NULL, &e) == -1 && strstr(e.msg, "unknown") &&
            store_run_set_status(s, run, STORE_STATUS_QUEUED, NULL, &e) == -1 && strstr(e.msg, "queued"),
        "store_run_refuses_bad_status", "%s", e.msg);
  int names_ok = 1;
  for (int i = 0; i < STORE_STATUS_COUNT; i++)
    names_ok &= store_status_parse(store_status_name((StoreStatus)i), &parsed) == 0 && parsed == (StoreStatus)i;
  check(names_ok && !strcmp(store_status_name(STORE_STATUS_INTERRUPTED), "interrupted") &&
            store_status_parse(NULL, &parsed) == -1 && store_status_ended(STORE_STATUS_CANCELLED) &&
            !store_status_ended(STORE_STATUS_RUNNING) && !store_status_ended(STORE_STATUS_QUEUED),
        "store_status_names_round_trip", "a name does not parse back");
  check(store_run_set_status(s, 999, STORE_STATUS_DONE, NULL, &e) == -1 && strstr(e.msg, "999"), "store_run_refuses_unknown_run", "%s", e.msg);
  check(store_step_metrics_add(s, 999, sm, 1, &e) == -1 && strstr(e.msg, "999"), "store_metrics_refuse_unknown_run", "%s", e.msg);
  check(store_run_create(s, "r", "[1]", &e) == -1 && strstr(e.msg, "object"), "store_run_refuses_non_object_config", "%s", e.msg);
  check(store_run_create(s, "r", "{\"a\":1,\"a\":2}", &e) == -1, "store_run_refuses_duplicate_keys", "accepted");
  check(store_run_create(s, "../etc", "{}", &e) == -1, "store_run_refuses_path_name", "accepted");
  /* A number is a run's id where runs are looked up (GET /runs/{id}, cancel, resume). */
  check(store_run_create(s, "2024", "{}", &e) == -1 && e.kind == ERR_INVALID && strstr(e.msg, "all digits"),
        "store_run_refuses_all_digit_name", "%s", e.msg);
  check(store_check_run_name("v2024", &e) == 0 && store_check_run_name("2024.1", &e) == 0 &&
            store_check_run_name("acme/7", &e) == 0 && store_check_run_name("0", &e) == -1,
        "store_check_run_name_digits_only", "%s", e.msg);

  /* A run left "running" by a dead process is recovered as interrupted; a live one is not. */
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  int64_t dead = store_run_create(s, "dead", "{}", &e);
  store_run_set_status(s, dead, STORE_STATUS_RUNNING, NULL, &e);
  snprintf(sql, sizeof sql, "UPDATE runs SET pid = %d WHERE id = %lld", (int)child, (long long)dead);
  rawexec(db, sql);
  int64_t live = store_run_create(s, "live", "{}", &e);
  store_run_set_status(s, live, STORE_STATUS_RUNNING, NULL, &e);
  int nrec = -1;
  rc = store_runs_recover(s, &nrec, &e);
  snprintf(sql, sizeof sql, "SELECT status = 'interrupted' FROM runs WHERE id = %lld", (long long)dead);
  long long dead_ok = q1(db, sql);
  snprintf(sql, sizeof sql, "SELECT status = 'running' FROM runs WHERE id = %lld", (long long)live);
  check(rc == 0 && nrec == 1 && dead_ok == 1 && q1(db, sql) == 1, "store_runs_recover", "n %d (%s)", nrec, e.msg);

  /* store_run_claim: of 4 processes claiming an interrupted run at once, exactly one gets it
  ** (the others: ERR_CONFLICT naming the winner's pid); a claimed run whose process is gone
  ** can be claimed again; a done run cannot. Each child stays alive until all have tried. */
  {
    int64_t cr = store_run_create(s, "claimed", "{}", &e);
    store_run_set_status(s, cr, STORE_STATUS_INTERRUPTED, "stopped by SIGTERM", &e);
    int go[2], rp[2], hold[2];
    int piped = pipe(go) == 0 && pipe(rp) == 0 && pipe(hold) == 0;
    pid_t kids[4];
    for (int k = 0; piped && k < 4; k++) {
      kids[k] = fork();
      if (kids[k] == 0) {
        close(go[1]);
        close(hold[1]);
        char c, line[300];
        Err ke = {0};
        Store *cs = store_open(db, &ke);
        if (read(go[0], &c, 1) < 0) _exit(3);   /* all start together */
        int krc = cs ? store_run_claim(cs, cr, &ke) : -1;
        snprintf(line, sizeof line, "%d %d %.200s\n", krc, (int)ke.kind, krc ? ke.msg : "");
        if (write(rp[1], line, 299) != 299) _exit(4);
        if (read(hold[0], &c, 1) < 0) _exit(5);   /* alive until the parent has all answers */
        store_close(cs);
        _exit(0);
      }
    }
    int wins = 0, conflicts = 0;
    if (piped) {
      close(go[0]);
      close(go[1]);   /* EOF: every child's read returns */
      for (int k = 0; k < 4; k++) {
        char line[300] = {0};
        if (read(rp[0], line, 299) != 299) continue;
        int krc = 0, kind = 0;
        sscanf(line, "%d %d", &krc, &kind);
        wins += krc == 0;
        conflicts += krc == -1 && kind == ERR_CONFLICT && strstr(line, "is already running (pid ");
      }
      close(hold[1]);
      for (int k = 0; k < 4; k++) waitpid(kids[k], NULL, 0);
      close(hold[0]);
      close(rp[0]);
      close(rp[1]);
    }
    check(piped && wins == 1 && conflicts == 3, "store_run_claim_one_of_many", "%d claims won, %d refused as running", wins,
          conflicts);
    /* The claim's time is the run's (an ETA counts the steps since): after the winner's. */
    snprintf(sql, sizeof sql, "SELECT CAST(claimed * 1000 AS INTEGER) FROM runs WHERE id = %lld", (long long)cr);
    long long first_claim = q1(db, sql);
    usleep(20000);
    int again = store_run_claim(s, cr, &e);
    long long second_claim = q1(db, sql);
    snprintf(sql, sizeof sql, "SELECT pid = %d AND status = 'running' AND error IS NULL FROM runs WHERE id = %lld",
             (int)getpid(), (long long)cr);
    check(again == 0 && q1(db, sql) == 1, "store_run_claim_after_its_process_is_gone", "%s", e.msg);
    check(first_claim > 0 && second_claim > first_claim, "store_run_claim_time", "%lld then %lld", first_claim, second_claim);
    int twice = store_run_claim(s, cr, &e);
    check(twice == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "already running"), "store_run_claim_refuses_running",
          "%d (%s)", twice, e.msg);
    /* The row's process is its pid and start time: a run left "running" under this pid by
    ** another process (a pid reused, as maskd's 1 in a container after every start) is gone,
    ** recovered and claimable; it read as running for ever. */
    snprintf(sql, sizeof sql, "UPDATE runs SET pid_start = pid_start + 1 WHERE id = %lld AND pid_start > 0", (long long)cr);
    int reused = rawexec(db, sql) == SQLITE_OK;
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM runs WHERE id = %lld AND pid_start = %lld + 1", (long long)cr,
             (long long)sdb_process_start(getpid()));
    reused = reused && q1(db, sql) == 1;
    int recovered = 0;
    int rrc = store_runs_recover(s, &recovered, &e);
    snprintf(sql, sizeof sql, "SELECT status = 'interrupted' FROM runs WHERE id = %lld", (long long)cr);
    check(reused && rrc == 0 && recovered == 1 && q1(db, sql) == 1, "store_recover_pid_of_another_process",
          "reused %d, rc %d, %d recovered (%s)", reused, rrc, recovered, e.msg);
    check(store_run_claim(s, cr, &e) == 0, "store_run_claim_pid_of_another_process", "%s", e.msg);
    store_run_set_status(s, cr, STORE_STATUS_DONE, NULL, &e);
    int done = store_run_claim(s, cr, &e), none = store_run_claim(s, 9999, &e);
    check(done == -1 && none == -1 && e.kind == ERR_NOT_FOUND, "store_run_claim_refuses_done_and_unknown", "%d %d (%s)", done,
          none, e.msg);
  }

  /* Models and revisions. */
  StoreRevision rv[3];
  char w[3][64];
  rc = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(w[i], sizeof w[i], "weights of epoch %d", i + 1);
    char msg[64], metrics[64];
    snprintf(msg, sizeof msg, "Training in progress epoch %d", i + 1);
    snprintf(metrics, sizeof metrics, "{\"eval_loss\": %g}", 7.0 - i);
    StorePush p = {.message = msg, .config_json = "{\"model_type\": \"roberta\"}", .weights = w[i],
                   .weights_len = strlen(w[i]), .optimizer = i < 2 ? "adam state" : NULL,
                   .optimizer_len = i < 2 ? 10 : 0, .tokenizer_json = tj, .run = run, .step = 100 * (i + 1),
                   .epoch = i + 1, .metrics_json = metrics};
    rc |= store_push(s, "user/small-wiki", &p, &rv[i], &e);
  }
  StoreRevision got;
  int r1 = store_resolve(s, "user/small-wiki", &got, &e);
  check(rc == 0 && r1 == 0 && got.seq == 3 && !strcmp(got.commit, rv[2].commit) && got.epoch == 3 && got.run == run &&
            !strcmp(got.message, "Training in progress epoch 3") && got.optimizer[0] == '\0',
        "store_push_resolve_latest", "%s", e.msg);
  r1 = store_resolve(s, "user/small-wiki@1", &got, &e);
  int r2 = r1 == 0 && got.seq == 1 ? store_resolve(s, "user/small-wiki@main", &got, &e) : -1;
  int r2ok = r2 == 0 && got.seq == 3;
  char spec[200];
  snprintf(spec, sizeof spec, "user/small-wiki@%.8s", rv[1].commit);
  int r3 = store_resolve(s, spec, &got, &e);
  check(r1 == 0 && r2ok && r3 == 0 && got.seq == 2 && strlen(got.commit) == 40, "store_resolve_seq_main_commit", "%s", e.msg);
  check(store_resolve(s, "user/small-wiki@9", &got, &e) == -1 && strstr(e.msg, "no revision"), "store_resolve_unknown_revision", "%s", e.msg);
  check(store_resolve(s, "nobody", &got, &e) == -1 && strstr(e.msg, "nobody"), "store_resolve_unknown_model", "%s", e.msg);
  check(store_resolve(s, "user/small-wiki@zz!", &got, &e) == -1, "store_resolve_bad_revision", "accepted");
  {
    /* A lookup of a name that names nothing is "not found", malformed or not (a 404 over HTTP). */
    static const char *specs[] = {"nobody", "user/small-wiki@9", "user/small-wiki@zz!", "bad name!", "-x@main"};
    int kinds_ok = 1;
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++)
      kinds_ok &= store_resolve(s, specs[i], &got, &e) == -1 && e.kind == ERR_NOT_FOUND;
    check(kinds_ok, "store_kind_resolve_not_found", "%s: %s", err_kind_name(e.kind), e.msg);
  }
  store_resolve(s, "user/small-wiki@2", &got, &e);
  int ok = 1;
  const char *files[] = {"config.json", "model.safetensors", "tokenizer.json", "optimizer.safetensors", "metrics.json"};
  const char *want[] = {"{\"model_type\": \"roberta\"}", w[1], tj, "adam state", "{\"eval_loss\": 6}"};
  for (int i = 0; i < 5; i++) {
    rc = store_revision_file(s, &got, files[i], &data, &len, &e);
    ok &= rc == 0 && len == strlen(want[i]) && !memcmp(data, want[i], len);
    free(data);
  }
  check(ok, "store_revision_files", "%s", e.msg);
  store_resolve(s, "user/small-wiki", &got, &e);
  check(store_revision_file(s, &got, "optimizer.safetensors", &data, &len, &e) == -1 && strstr(e.msg, "no optimizer"),
        "store_revision_file_absent", "%s", e.msg);
  check(store_revision_file(s, &got, "../etc/passwd", &data, &len, &e) == -1, "store_revision_file_refuses_unknown", "accepted");
  rc = store_run_checkpoint(s, run, &got, &e);
  check(rc == 0 && got.seq == 2 && got.step == 200, "store_run_checkpoint", "rc %d seq %lld (%s)", rc, (long long)got.seq, e.msg);
  check(store_run_checkpoint(s, run2, &got, &e) == 1, "store_run_checkpoint_none", "found one");

  json_t *ml = store_models_list(s, &e);
  json_t *mg = store_model_get(s, "user/small-wiki", &e);
  json_t *revs = mg ? json_object_get(mg, "revisions") : NULL;
  check(ml && json_array_size(ml) == 1 && json_integer_value(json_object_get(json_array_get(ml, 0), "revisions")) == 3 &&
            !strcmp(json_string_value(json_object_get(json_array_get(ml, 0), "last_commit")), rv[2].commit) && revs &&
            json_array_size(revs) == 3 && json_integer_value(json_object_get(json_array_get(revs, 0), "seq")) == 3 &&
            json_integer_value(json_object_get(json_array_get(revs, 2), "has_optimizer")) == 1 &&
            json_number_value(json_object_get(json_object_get(json_array_get(revs, 0), "metrics"), "eval_loss")) == 5.0,
        "store_models_list_and_get", "%s", e.msg);
  json_decref(ml);
  json_decref(mg);
  check(store_model_get(s, "nope", &e) == NULL && strstr(e.msg, "nope"), "store_model_get_unknown", "%s", e.msg);

  /* A fine-tuning run's best revision: NAME@best, "best" in the model's records; a revision's metrics replaced. */
  check(store_resolve(s, "user/small-wiki@best", &got, &e) == -1 && e.kind == ERR_NOT_FOUND, "store_resolve_best_unset",
        "%s", e.msg);
  int brc = store_model_set_best(s, rv[1].id, &e);
  int brc2 = brc == 0 ? store_resolve(s, "user/small-wiki@best", &got, &e) : -1;
  ml = store_models_list(s, &e);
  mg = store_model_get(s, "user/small-wiki", &e);
  check(brc == 0 && brc2 == 0 && got.seq == 2 && json_integer_value(json_object_get(json_array_get(ml, 0), "best")) == 2 &&
            json_integer_value(json_object_get(mg, "best")) == 2 && store_model_set_best(s, 99999, &e) == -1,
        "store_model_best", "%s", e.msg);
  json_decref(ml);
  json_decref(mg);
  int mrc = store_revision_set_metrics(s, rv[1].id, "{\"eval_loss\": 6, \"test_accuracy\": 0.5}", &e);
  store_resolve(s, "user/small-wiki@2", &got, &e);
  data = NULL;
  int mrc2 = mrc == 0 ? store_revision_file(s, &got, "metrics.json", &data, &len, &e) : -1;
  check(mrc2 == 0 && strstr(data, "test_accuracy") && store_revision_set_metrics(s, rv[1].id, "[1]", &e) == -1,
        "store_revision_set_metrics", "%s", e.msg);
  free(data);

  /* Refused pushes write nothing. */
  long long nrev = q1(db, "SELECT COUNT(*) FROM revisions"), nblob = q1(db, "SELECT COUNT(*) FROM blobs");
  StorePush bad = {.message = "m", .config_json = "{\"model_type\": \"roberta\"}", .weights = "new weights!",
                 .weights_len = 12, .run = 999};
  int refused = store_push(s, "user/small-wiki", &bad, NULL, &e) == -1 && strstr(e.msg, "999");
  bad.run = 0;
  bad.config_json = "{oops";
  refused &= store_push(s, "user/small-wiki", &bad, NULL, &e) == -1 && strstr(e.msg, "config.json");
  bad.config_json = "{}";
  bad.weights_len = 0;
  refused &= store_push(s, "user/small-wiki", &bad, NULL, &e) == -1 && strstr(e.msg, "weights");
  bad.weights_len = 12;
  bad.metrics_json = "3";
  refused &= store_push(s, "user/small-wiki", &bad, NULL, &e) == -1 && strstr(e.msg, "metrics");
  bad.metrics_json = NULL;
  refused &= store_push(s, "a@b", &bad, NULL, &e) == -1;
  refused &= store_push(s, "x/y/z", &bad, NULL, &e) == -1;
  check(refused && q1(db, "SELECT COUNT(*) FROM revisions") == nrev && q1(db, "SELECT COUNT(*) FROM blobs") == nblob,
        "store_push_refusals_write_nothing", "%s", e.msg);

  /* Keep-last-N: drop old optimizer state, delete a revision, collect blobs. */
  int64_t removed = -1;
  rc = store_revision_drop_optimizer(s, rv[0].id, &e) | store_revision_drop_optimizer(s, rv[1].id, &e);
  rc |= store_revision_delete(s, rv[0].id, &e);
  rc |= store_gc(s, &removed, &e);
  /* Gone: "adam state", epoch-1 weights, the damaged "hello", the empty blob and the big one. */
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM blobs WHERE sha256 = '%s'", rv[1].weights);
  check(rc == 0 && removed == 5 && q1(db, sql) == 1 && store_resolve(s, "user/small-wiki@1", &got, &e) == -1 &&
            q1(db, "SELECT COUNT(*) FROM blob_chunks WHERE sha256 NOT IN (SELECT sha256 FROM blobs)") == 0,
        "store_drop_delete_gc", "removed %lld (%s)", (long long)removed, e.msg);
  /* The 16 MiB blob's pages stay free for the next push (a training's next checkpoint
  ** reuses them); store_compact gives them back: no free pages left, the file far below
  ** 16 MiB, the bytes counted. */
  long long psize = q1(db, "PRAGMA page_size"), free_after_gc = q1(db, "PRAGMA freelist_count");
  check(free_after_gc * psize >= (16 << 20), "store_gc_leaves_pages_for_reuse", "%lld free pages", free_after_gc);
  /* The delete that freed them did not write zeros over 16 MiB (Debian's SQLite starts
  ** with secure_delete ON; store_open sets FAST, 2). */
  sqlite3_stmt *sd = NULL;
  long long secure = -1;
  if (sqlite3_prepare_v2(s->db, "PRAGMA secure_delete", -1, &sd, NULL) == SQLITE_OK && sqlite3_step(sd) == SQLITE_ROW)
    secure = sqlite3_column_int64(sd, 0);
  sqlite3_finalize(sd);
  check(secure == 2, "store_open_secure_delete_fast", "secure_delete %lld", secure);
  int64_t freed = -1;
  rc = store_compact(s, &freed, &e);
  long long pages = q1(db, "PRAGMA page_count");
  check(rc == 0 && q1(db, "PRAGMA auto_vacuum") == 2 && q1(db, "PRAGMA freelist_count") == 0 && pages * psize < (4 << 20) &&
            freed == free_after_gc * psize,
        "store_compact_returns_space", "rc %d, auto_vacuum %lld, free %lld, %lld bytes, freed %lld (%s)", rc,
        q1(db, "PRAGMA auto_vacuum"), q1(db, "PRAGMA freelist_count"), pages * psize, (long long)freed, e.msg);
  freed = -1;
  check(store_compact(s, &freed, &e) == 0 && freed == 0, "store_compact_nothing_to_do", "freed %lld", (long long)freed);
  {
    /* A file made without incremental auto-vacuum (by an older maskd, or by hand): its free
    ** pages cannot be given back this way, and store_compact says so by freeing none, at once.
    ** (Its filler table is dropped: a file holding another program's tables is refused.) */
    const char *plain = make_db_path("plain.db");
    sqlite3 *h;
    int prc = sqlite3_open(plain, &h) == SQLITE_OK &&
              sqlite3_exec(h, "PRAGMA auto_vacuum = NONE; CREATE TABLE filler(x BLOB);"
                              "INSERT INTO filler VALUES (zeroblob(4000000)); DROP TABLE filler;", NULL, NULL, NULL) == SQLITE_OK;
    sqlite3_close(h);
    Store *p = prc ? store_open(plain, &e) : NULL;
    freed = -1;
    double started = (double)time(NULL);
    int comp = p ? store_compact(p, &freed, &e) : -1;
    check(prc && comp == 0 && freed == 0 && q1(plain, "PRAGMA freelist_count") > 0 && (double)time(NULL) - started < 5,
          "store_compact_without_auto_vacuum_returns", "rc %d freed %lld (%s)", comp, (long long)freed, e.msg);
    store_close(p);
  }
  check(store_revision_delete(s, 12345, &e) == -1 && strstr(e.msg, "12345"), "store_revision_delete_unknown", "%s", e.msg);
  snprintf(sql, sizeof sql, "DELETE FROM blobs WHERE sha256 = '%s'", rv[2].weights);
  {
    sqlite3 *h;
    sqlite3_open(db, &h);
    sqlite3_exec(h, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    int frc = sqlite3_exec(h, sql, NULL, NULL, NULL);
    sqlite3_close(h);
    check(frc != SQLITE_OK, "store_foreign_keys_guard_blobs", "a referenced blob could be deleted");
  }

  /* Jobs. */
  int64_t j1 = store_job_submit(s, "train", "{\"name\": \"a\"}", &e), j2 = store_job_submit(s, "prepare", "{}", &e);
  int64_t j3 = store_job_submit(s, "tokenizer", "{}", &e);
  int64_t jid;
  char *kind, *params;
  int c1 = store_job_claim(s, &jid, &kind, &params, &e);
  check(j1 > 0 && c1 == 0 && jid == j1 && !strcmp(kind, "train") && !strcmp(params, "{\"name\": \"a\"}"), "store_job_claim_fifo", "%s", e.msg);
  free(kind);
  free(params);
  int working_before = store_run_has_running_job(s, run, &e);
  rc = store_job_set_run(s, j1, run, &e);
  int working = store_run_has_running_job(s, run, &e);
  rc |= store_job_cancel(s, j1, &e);
  int req = store_job_cancel_requested(s, j1, &e);
  int working_cancelling = store_run_has_running_job(s, run, &e);
  rc |= store_job_finish(s, j1, STORE_STATUS_CANCELLED, NULL, &e);
  int working_after = store_run_has_running_job(s, run, &e);
  check(working_before == 0 && working == 1 && working_cancelling == 1 && working_after == 0 &&
            store_run_has_running_job(s, run + 1000, &e) == 0,
        "store_run_has_running_job", "before %d, linked %d, cancelling %d, finished %d", working_before, working,
        working_cancelling, working_after);
  json_t *jj = store_job_get(s, j1, &e);
  check(rc == 0 && req == 1 && jj && !strcmp(json_string_value(json_object_get(jj, "status")), "cancelled") &&
            json_integer_value(json_object_get(jj, "run")) == run &&
            !strcmp(json_string_value(json_object_get(json_object_get(jj, "params"), "name")), "a"),
        "store_job_cancel_running", "%s", e.msg);
  json_decref(jj);
  rc = store_job_cancel(s, j2, &e);
  jj = store_job_get(s, j2, &e);
  check(rc == 0 && !strcmp(json_string_value(json_object_get(jj, "status")), "cancelled"), "store_job_cancel_queued", "%s", e.msg);
  json_decref(jj);
  check(store_job_cancel(s, j2, &e) == -1 && strstr(e.msg, "already cancelled"), "store_job_cancel_twice", "%s", e.msg);
  check(e.kind == ERR_CONFLICT, "store_kind_cancel_twice_is_conflict", "%s: %s", err_kind_name(e.kind), e.msg);
  c1 = store_job_claim(s, &jid, &kind, &params, &e);
  free(kind);
  free(params);
  int c2 = store_job_claim(s, &jid, &kind, &params, &e);
  check(c1 == 0 && jid == j3 && c2 == 1, "store_job_claim_skips_cancelled_then_empty", "c1 %d c2 %d", c1, c2);
  /* A job's run is made and linked in one transaction; a job that is not running gets none. */
  long long runs_before = q1(db, "SELECT COUNT(*) FROM runs");
  int64_t jr0 = store_job_run(s, j3, &e), jrun = store_job_run_create(s, j3, "job-run", "{}", &e);
  int64_t jr1 = store_job_run(s, j3, &e), jrefused = store_job_run_create(s, j2, "job-run", "{}", &e);
  check(jr0 == 0 && jrun > 0 && jr1 == jrun && jrefused == -1 && strstr(e.msg, "not running") &&
            q1(db, "SELECT COUNT(*) FROM runs") == runs_before + 1 && store_job_run(s, 777, &e) == -1,
        "store_job_run_create_links", "before %lld, made %lld, linked %lld, refused %lld (%s)", (long long)jr0,
        (long long)jrun, (long long)jr1, (long long)jrefused, e.msg);
  check(store_job_finish(s, j2, STORE_STATUS_DONE, NULL, &e) == -1 && strstr(e.msg, "not running"), "store_job_finish_refuses_not_running", "%s", e.msg);
  /* Progress: a running job's, kept after it ends; refused for a job not running. */
  int p1 = store_job_progress(s, j3, "{\"phase\": \"reading\", \"done\": 5, \"total\": 10, \"unit\": \"bytes\"}", &e);
  int p2 = store_job_progress(s, j3, "{\"phase\": \"encoding\", \"done\": 7, \"total\": null}", &e);
  jj = store_job_get(s, j3, &e);
  check(p1 == 0 && p2 == 0 && jj && !strcmp(json_string_value(json_object_get(json_object_get(jj, "progress"), "phase")) ?: "", "encoding"),
        "store_job_progress", "%s", e.msg);
  json_decref(jj);
  check(store_job_progress(s, j2, "{}", &e) == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "not running") &&
            store_job_progress(s, 777, "{}", &e) == -1 && e.kind == ERR_NOT_FOUND &&
            store_job_progress(s, j3, "[]", &e) == -1 && e.kind == ERR_INVALID,
        "store_job_progress_refusals", "%s", e.msg);
  list = store_jobs_list(s, &e);
  check(list && json_is_null(json_object_get(json_array_get(list, 2), "progress")) && json_is_object(json_object_get(json_array_get(list, 0), "progress")),
        "store_jobs_list_progress", "%s", e.msg);
  json_decref(list);
  check(store_status_parse("sideways", &parsed) == -1 && store_job_finish(s, j3, (StoreStatus)-1, NULL, &e) == -1 &&
            store_job_finish(s, j3, STORE_STATUS_RUNNING, NULL, &e) == -1,
        "store_job_finish_refuses_bad_status", "accepted");
  check(store_job_submit(s, "mine-bitcoin", "{}", &e) == -1 && strstr(e.msg, "mine-bitcoin"), "store_job_refuses_bad_kind", "%s", e.msg);
  check(store_job_submit(s, "finetune", "{}", &e) == -1 && strstr(e.msg, "finetune"), "store_job_refuses_finetune", "%s", e.msg);
  check(store_job_submit(s, "train", "not json", &e) == -1, "store_job_refuses_bad_params", "accepted");
  check(store_job_cancel_requested(s, 777, &e) == -1 && store_job_set_run(s, j3, 999, &e) == -1, "store_job_unknown_ids", "%s", e.msg);
  json_decref(store_job_get(s, 777, &e));
  check(e.kind == ERR_NOT_FOUND, "store_kind_unknown_job_is_not_found", "%s: %s", err_kind_name(e.kind), e.msg);
  snprintf(sql, sizeof sql, "UPDATE jobs SET pid = %d WHERE id = %lld", (int)child, (long long)j3);
  rawexec(db, sql);
  rc = store_jobs_recover(s, &nrec, &e);
  jj = store_job_get(s, j3, &e);
  check(rc == 0 && nrec == 1 && !strcmp(json_string_value(json_object_get(jj, "status")), "interrupted"), "store_jobs_recover", "%s", e.msg);
  json_decref(jj);
  list = store_jobs_list(s, &e);
  check(list && json_array_size(list) == 3 && json_integer_value(json_object_get(json_array_get(list, 0), "id")) == j3,
        "store_jobs_list", "%s", e.msg);
  json_decref(list);

  /* Junk in every argument: refused, and the database stays consistent. */
  long long runs0 = q1(db, "SELECT COUNT(*) FROM runs"), steps0 = q1(db, "SELECT COUNT(*) FROM step_metrics");
  Rng r;
  rng_seed(&r, 5);
  int refused_all = 1;
  for (int i = 0; i < 200; i++) {
    char junk[40];
    for (int k = 0; k < 39; k++) junk[k] = (char)(1 + rng_below(&r, 255));
    junk[39] = '\0';
    refused_all &= store_run_create(s, junk, "{}", &e) == -1;
    refused_all &= store_run_create(s, "ok", junk, &e) == -1;
    refused_all &= store_tokenizer_add(s, junk, "{}", 5, NULL, 0, &e) == -1;
    refused_all &= store_resolve(s, junk, &got, &e) == -1;
    refused_all &= store_job_submit(s, junk, "{}", &e) == -1;
  }
  StoreStepMetric negstep = {-1, 0, 1, 1, 1, 1, 0};
  refused_all &= store_step_metrics_add(s, run, &negstep, 1, &e) == -1;
  check(refused_all && q1(db, "SELECT COUNT(*) FROM runs") == runs0 && q1(db, "SELECT COUNT(*) FROM step_metrics") == steps0,
        "store_junk_refused", "%s", e.msg);
  check(store_integrity_check(s, &e) == 0, "store_integrity_after_api", "%s", e.msg);
  store_close(s);
}

/* A writer process commits batches of 10 step metrics; this process reads and
** must only ever see whole batches, growing, never an error. */
static void concurrency_test(void) {
  Err e = {0};
  char db[400];
  snprintf(db, sizeof db, "%s", make_db_path("conc.db"));
  Store *s = store_open(db, &e);
  int64_t run = store_run_create(s, "conc", "{}", &e);
  int batches = getenv("MASKD_ASAN") ? 60 : 200;
  pid_t child = fork();
  if (child == 0) {
    Err ce;
    Store *w = store_open(db, &ce);
    if (!w) _exit(3);
    for (int b = 0; b < batches; b++) {
      StoreStepMetric m[10];
      for (int i = 0; i < 10; i++) m[i] = (StoreStepMetric){b * 10 + i, 0, 1, 1, 1, 1, 0};
      if (store_step_metrics_add(w, run, m, 10, &ce)) _exit(4);
      struct timespec pause = {0, 1000000L};   /* spread the writes so reads fall between them */
      nanosleep(&pause, NULL);
    }
    store_close(w);
    _exit(0);
  }
  int whole = 1, monotonic = 1, errors = 0, reads = 0, middle = 0;
  size_t last = 0;
  for (;;) {
    json_t *m = store_run_metrics(s, run, -1, &e);
    if (!m) { errors++; } else {
      size_t n = json_array_size(json_object_get(m, "steps"));
      whole &= n % 10 == 0;
      middle += n > 0 && n < (size_t)batches * 10;
      monotonic &= n >= last;
      last = n;
      json_decref(m);
    }
    reads++;
    int status;
    if (waitpid(child, &status, WNOHANG) == child) {
      json_t *fin = store_run_metrics(s, run, -1, &e);
      size_t n = fin ? json_array_size(json_object_get(fin, "steps")) : 0;
      json_decref(fin);
      /* middle > 0: some reads really did run while the writer was half-way. */
      check(WIFEXITED(status) && WEXITSTATUS(status) == 0 && n == (size_t)batches * 10 && whole && monotonic && errors == 0 &&
                middle > 0,
            "store_reader_sees_whole_transactions", "exit %d, final %zu, whole %d, monotonic %d, errors %d (%s), %d reads, %d mid-way",
            WEXITSTATUS(status), n, whole, monotonic, errors, e.msg, reads, middle);
      break;
    }
  }
  /* Two writers at once (a CLI run and a server job, say): both finish, nothing lost. */
  int64_t run2 = store_run_create(s, "conc2", "{}", &e);
  pid_t kids[2];
  for (int w = 0; w < 2; w++) {
    kids[w] = fork();
    if (kids[w] == 0) {
      Err ce;
      Store *ws = store_open(db, &ce);
      if (!ws) _exit(3);
      for (int b = 0; b < 50; b++) {
        StoreStepMetric m[10];
        for (int i = 0; i < 10; i++) m[i] = (StoreStepMetric){w * 100000 + b * 10 + i, 0, 1, 1, 1, 1, 0};
        if (store_step_metrics_add(ws, run2, m, 10, &ce)) _exit(4);
        StorePush p = {.message = "x", .config_json = "{}", .weights = m, .weights_len = sizeof m, .step = b};
        if (b % 10 == 0 && store_push(ws, "conc-model", &p, NULL, &ce)) _exit(5);
      }
      store_close(ws);
      _exit(0);
    }
  }
  int exits_ok = 1;
  for (int w = 0; w < 2; w++) {
    int status;
    waitpid(kids[w], &status, 0);
    exits_ok &= WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  json_t *all = store_run_metrics(s, run2, -1, &e);
  json_t *mg = store_model_get(s, "conc-model", &e);
  check(exits_ok && all && json_array_size(json_object_get(all, "steps")) == 1000 && mg &&
            json_array_size(json_object_get(mg, "revisions")) == 10,
        "store_two_writers", "exits ok %d (%s)", exits_ok, e.msg);
  json_decref(all);
  json_decref(mg);
  check(store_integrity_check(s, &e) == 0, "store_integrity_after_concurrency", "%s", e.msg);
  store_close(s);
}

/* kill -9 a process in the middle of pushes and metric writes, several times:
** the database opens, passes the checks, and every revision's blobs are whole. */
static void kill_test(void) {
  Err e = {0};
  char db[400];
  snprintf(db, sizeof db, "%s", make_db_path("kill.db"));
  Store *s = store_open(db, &e);
  int64_t run = store_run_create(s, "killed", "{}", &e);
  store_close(s);
  int rounds = getenv("MASKD_ASAN") ? 2 : 4, all_ok = 1;
  Rng r;
  rng_seed(&r, 8);
  char why[600] = "";
  for (int k = 0; k < rounds; k++) {
    /* The child says when its first push is in, so the kill always lands while it
    ** is writing (however slow the machine), not before it started. */
    int ready[2];
    if (pipe(ready) != 0) { check(0, "store_survives_kill_9", "pipe"); return; }
    pid_t child = fork();
    if (child == 0) {
      close(ready[0]);
      Err ce;
      Store *w = store_open(db, &ce);
      if (!w) _exit(3);
      size_t n = 1u << 20;
      unsigned char *bytes = calloc(1, n);
      for (int i = 0;; i++) {
        for (size_t j = 0; j < n; j += 4096) bytes[j] = (unsigned char)(i + j);
        StorePush p = {.message = "Training in progress", .config_json = "{}", .weights = bytes, .weights_len = n,
                       .optimizer = bytes, .optimizer_len = n / 2, .run = run, .step = i};
        store_push(w, "killed-model", &p, NULL, &ce);
        StoreStepMetric m[50];
        for (int j = 0; j < 50; j++) m[j] = (StoreStepMetric){(int64_t)k * 1000000 + i * 50 + j, 0, 1, 1, 1, 1, 0};
        store_step_metrics_add(w, run, m, 50, &ce);
        if (i == 0 && (write(ready[1], "x", 1) != 1 || close(ready[1]) != 0)) _exit(5);
      }
    }
    close(ready[1]);
    char byte;
    if (read(ready[0], &byte, 1) != 1) all_ok = 0;
    close(ready[0]);
    struct timespec ts = {0, (long)(20 + rng_below(&r, 200)) * 1000000L};
    nanosleep(&ts, NULL);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    s = store_open(db, &e);
    int ok = s && store_integrity_check(s, &e) == 0;
    json_t *mg = ok ? store_model_get(s, "killed-model", &e) : NULL;
    size_t nrev = mg ? json_array_size(json_object_get(mg, "revisions")) : 0;
    for (size_t i = 0; ok && i < nrev; i++) {
      char spec[64];
      StoreRevision rv;
      void *data;
      size_t len;
      snprintf(spec, sizeof spec, "killed-model@%lld",
               (long long)json_integer_value(json_object_get(json_array_get(json_object_get(mg, "revisions"), i), "seq")));
      ok &= store_resolve(s, spec, &rv, &e) == 0 && store_revision_file(s, &rv, "model.safetensors", &data, &len, &e) == 0;
      if (ok) free(data);
    }
    json_decref(mg);
    long long steps = q1(db, "SELECT COUNT(*) FROM step_metrics");
    ok &= steps % 50 == 0;
    if (!ok && !why[0]) snprintf(why, sizeof why, "round %d: %s (steps %lld)", k, e.msg, steps);
    all_ok &= ok;
    store_close(s);
  }
  long long revs = q1(db, "SELECT COUNT(*) FROM revisions"), steps = q1(db, "SELECT COUNT(*) FROM step_metrics");
  check(all_ok && revs > 0 && steps > 0, "store_survives_kill_9", "%s (%lld revisions, %lld steps written before the kills)", why, revs, steps);
}

/* Runs a maskd command line; its stdout (malloc'd) and exit status. */
static char *run_maskd(const char *args, int *status) {
  const char *bin = getenv("MASKD");
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "MASKD_KEEP_OPENBLAS_CORETYPE=1 %s %s 2>&1", bin && *bin ? bin : "build/maskd", args);
  FILE *p = popen(cmd, "r");
  if (!p) { *status = -1; return NULL; }
  size_t cap = 1 << 16, n = 0;
  char *out = malloc(cap);
  size_t r;
  while ((r = fread(out + n, 1, cap - 1 - n, p)) > 0) n += r;
  out[n] = '\0';
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

/* maskd runs / maskd models read what the API wrote. */
static void cli_test(void) {
  Err e = {0};
  char db[400], args[600];
  snprintf(db, sizeof db, "%s", make_db_path("cli.db"));
  Store *s = store_open(db, &e);
  int64_t run = store_run_create(s, "cli-run", "{\"epochs\": 1}", &e);
  store_run_set_status(s, run, STORE_STATUS_RUNNING, NULL, &e);
  store_run_progress(s, run, 40, 120, 1, &e);
  StoreStepMetric m = {40, 0.3, 6.25, 1e-4, 1, 100, 0};
  store_step_metrics_add(s, run, &m, 1, &e);
  StorePush p = {.message = "Training in progress epoch 1", .config_json = "{}", .weights = "w", .weights_len = 1,
                 .run = run, .step = 40, .epoch = 1};
  StoreRevision rv;
  store_push(s, "cli-model", &p, &rv, &e);
  store_close(s);
  int st;
  snprintf(args, sizeof args, "runs --db %s", db);
  char *out = run_maskd(args, &st);
  check(st == 0 && out && strstr(out, "cli-run") && strstr(out, "running") && strstr(out, "40/120") && strstr(out, "6.2500"),
        "cli_runs_table", "status %d:\n%s", st, out ? out : "");
  free(out);
  snprintf(args, sizeof args, "runs --json --db %s", db);
  out = run_maskd(args, &st);
  json_t *j = out ? json_loads(out, 0, NULL) : NULL;
  check(st == 0 && json_is_array(j) && json_array_size(j) == 1 &&
            json_integer_value(json_object_get(json_array_get(j, 0), "step")) == 40,
        "cli_runs_json", "status %d:\n%s", st, out ? out : "");
  json_decref(j);
  free(out);
  snprintf(args, sizeof args, "models --db %s", db);
  out = run_maskd(args, &st);
  check(st == 0 && out && strstr(out, "cli-model") && strstr(out, "Training in progress epoch 1"), "cli_models_table",
        "status %d:\n%s", st, out ? out : "");
  free(out);
  snprintf(args, sizeof args, "models --db %s cli-model", db);
  out = run_maskd(args, &st);
  char shortc[13];
  snprintf(shortc, sizeof shortc, "%.12s", rv.commit);
  check(st == 0 && out && strstr(out, shortc), "cli_models_revisions", "status %d:\n%s", st, out ? out : "");
  free(out);
  snprintf(args, sizeof args, "models --db %s nobody", db);
  out = run_maskd(args, &st);
  check(st == 1 && out && strstr(out, "nobody"), "cli_models_unknown", "status %d: %s", st, out ? out : "");
  free(out);
  snprintf(args, sizeof args, "runs --db %s/none.db", tmpdir);
  out = run_maskd(args, &st);
  check(st == 1 && out && strstr(out, "no store at"), "cli_runs_no_database", "status %d: %s", st, out ? out : "");
  free(out);
  out = run_maskd("runs --bogus", &st);
  check(st == 2 && out && strstr(out, "--bogus"), "cli_runs_bad_flag", "status %d: %s", st, out ? out : "");
  free(out);
}

/* ---- streamed blobs ---- */

#define TEST_CHUNK ((size_t)16 << 20)   /* store_db.h's CHUNK_BYTES: the layout a reader sees */

/* Writes data in uneven pieces (crossing chunk borders mid-piece); mode 1 fails
** halfway, 2 writes one byte short, 3 one byte long, 4 one byte long but returns 0. */
typedef struct { const unsigned char *data; size_t len; int mode; } Producer;

static int produce(void *ctx, StoreBlobWriter *w, Err *err) {
  const Producer *p = ctx;
  size_t n = p->mode == 2 ? p->len - 1 : p->len, off = 0, piece = 1000003;
  while (off < n) {
    if (p->mode == 1 && off >= n / 2) return err_set(err, "producer gave up");
    size_t k = n - off < piece ? n - off : piece;
    if (store_blob_write(w, p->data + off, k, err)) return -1;
    off += k;
    piece = piece * 3 % 7000001 + 1;
  }
  if (p->mode == 3 || p->mode == 4) {
    int rc = store_blob_write(w, "x", 1, err);
    if (p->mode == 3) return rc;
  }
  return 0;
}

static int file_is(Store *s, const StoreRevision *r, const char *file, const void *want, size_t len) {
  void *d = NULL;
  size_t n = 0;
  Err e = {0};
  int ok = store_revision_file(s, r, file, &d, &n, &e) == 0 && n == len && memcmp(d, want, len) == 0;
  free(d);
  return ok;
}

static void stream_tests(void) {
  char *db = make_db_path("stream.db"), hw[65], ho[65], sql[300];
  Err e = {0};
  Store *s = store_open(db, &e);
  size_t wl = 2 * TEST_CHUNK + 12345, ol = 2 * TEST_CHUNK;   /* a partial last chunk, and none */
  unsigned char *w = malloc(wl), *o = malloc(ol);
  Rng r;
  rng_seed(&r, 11);
  for (size_t i = 0; i < wl; i++) w[i] = (unsigned char)(rng_u64(&r) >> 56);
  for (size_t i = 0; i < ol; i++) o[i] = (unsigned char)(rng_u64(&r) >> 56);
  store_sha256_hex(w, wl, hw);
  store_sha256_hex(o, ol, ho);
  Producer pw = {w, wl, 0}, po = {o, ol, 0};
  StoreStream ws = {wl, produce, &pw}, os = {ol, produce, &po};
  StorePush p = {.message = "streamed", .config_json = "{}", .step = 1, .weights_stream = &ws, .optimizer_stream = &os};
  StoreRevision r1, r2, r3;
  int rc = store_push(s, "s-model", &p, &r1, &e);
  check(rc == 0 && !strcmp(r1.weights, hw) && !strcmp(r1.optimizer, ho) && file_is(s, &r1, "model.safetensors", w, wl) &&
            file_is(s, &r1, "optimizer.safetensors", o, ol),
        "store_stream_push_same_blobs", "rc %d (%s)", rc, e.msg);
  snprintf(sql, sizeof sql,
           "SELECT COUNT(*) FROM blob_chunks WHERE sha256 = '%s' AND (length(data) != %zu OR idx > 2) AND idx != 2", hw,
           TEST_CHUNK);
  long long odd = q1(db, sql);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM blob_chunks WHERE sha256 IN ('%s', '%s')", hw, ho);
  check(odd == 0 && q1(db, sql) == 5 && q1(db, "SELECT COUNT(*) FROM blobs WHERE sha256 GLOB '*[^0-9a-f]*'") == 0,
        "store_stream_chunks_like_bytes", "%lld odd chunks, %lld chunks", odd, q1(db, sql));

  /* The same content as bytes, and streamed again: stored once. */
  long long blobs = q1(db, "SELECT COUNT(*) FROM blobs"), chunks = q1(db, "SELECT COUNT(*) FROM blob_chunks");
  StorePush pb = {.message = "bytes", .config_json = "{}", .weights = w, .weights_len = wl, .optimizer = o, .optimizer_len = ol};
  rc = store_push(s, "b-model", &pb, &r2, &e) | store_push(s, "s-model", &p, &r3, &e);
  check(rc == 0 && !strcmp(r2.weights, hw) && !strcmp(r2.optimizer, ho) && !strcmp(r3.weights, hw) &&
            q1(db, "SELECT COUNT(*) FROM blobs") == blobs && q1(db, "SELECT COUNT(*) FROM blob_chunks") == chunks &&
            file_is(s, &r3, "model.safetensors", w, wl),
        "store_stream_dedupes", "rc %d (%s)", rc, e.msg);

  /* Failures roll the whole push back. */
  long long revs = q1(db, "SELECT COUNT(*) FROM revisions");
  unsigned char fresh[3000];
  for (size_t i = 0; i < sizeof fresh; i++) fresh[i] = (unsigned char)i;
  const char *what[] = {"fails", "short", "long", "long_ignored"};
  for (int mode = 1; mode <= 4; mode++) {
    Producer bad = {mode == 1 ? w : fresh, mode == 1 ? wl : sizeof fresh, mode};
    StoreStream bs = {bad.len, produce, &bad};
    Producer good = {fresh, 100, 0};
    StoreStream gs = {100, produce, &good};
    StorePush pf = {.message = "bad", .config_json = "{}", .weights_stream = mode % 2 ? &bs : &gs,
                    .optimizer_stream = mode % 2 ? &gs : &bs};
    e = (Err){0};
    rc = store_push(s, "s-model", &pf, NULL, &e);
    char name[64];
    snprintf(name, sizeof name, "store_stream_%s_leaves_nothing", what[mode - 1]);
    check(rc == -1 && e.msg[0] && !store_in_transaction(s) && q1(db, "SELECT COUNT(*) FROM blobs") == blobs &&
              q1(db, "SELECT COUNT(*) FROM blob_chunks") == chunks && q1(db, "SELECT COUNT(*) FROM revisions") == revs,
          name, "rc %d (%s), %lld blobs", rc, e.msg, q1(db, "SELECT COUNT(*) FROM blobs"));
  }
  StoreStream empty = {0, produce, &pw};
  StorePush pe = {.message = "empty", .config_json = "{}", .weights_stream = &empty};
  StorePush both = {.message = "both", .config_json = "{}", .weights = w, .weights_len = 1, .weights_stream = &ws};
  StorePush obth = {.message = "both", .config_json = "{}", .weights = w, .weights_len = 1, .optimizer = o, .optimizer_len = 1,
                    .optimizer_stream = &os};
  int r_empty = store_push(s, "s-model", &pe, NULL, &e), r_both = store_push(s, "s-model", &both, NULL, &e),
      r_obth = store_push(s, "s-model", &obth, NULL, &e);
  check(r_empty == -1 && r_both == -1 && r_obth == -1 && e.kind == ERR_INVALID && q1(db, "SELECT COUNT(*) FROM blobs") == blobs &&
            q1(db, "SELECT COUNT(*) FROM revisions") == revs,
        "store_stream_refuses_empty_or_both", "%d %d %d (%s)", r_empty, r_both, r_obth, e.msg);

  /* One push whose two streams hold the same bytes: one blob. */
  Producer same = {fresh, sizeof fresh, 0};
  StoreStream s1 = {sizeof fresh, produce, &same}, s2 = {sizeof fresh, produce, &same};
  StorePush ps = {.message = "same", .config_json = "{}", .weights_stream = &s1, .optimizer_stream = &s2};
  StoreRevision r4;
  rc = store_push(s, "t-model", &ps, &r4, &e);
  check(rc == 0 && !strcmp(r4.weights, r4.optimizer) && q1(db, "SELECT COUNT(*) FROM blobs") == blobs + 1 &&
            file_is(s, &r4, "optimizer.safetensors", fresh, sizeof fresh),
        "store_stream_twice_in_one_push", "rc %d (%s)", rc, e.msg);

  /* gc collects streamed blobs like any other. */
  int64_t removed = 0;
  rc = store_revision_delete(s, r1.id, &e) | store_revision_delete(s, r2.id, &e) | store_revision_delete(s, r3.id, &e) |
       store_gc(s, &removed, &e) | store_integrity_check(s, &e);
  check(rc == 0 && removed == 2 && q1(db, "SELECT COUNT(*) FROM blobs") == 1 && q1(db, "SELECT COUNT(*) FROM blob_chunks") == 1,
        "store_stream_gc", "rc %d, removed %lld (%s)", rc, (long long)removed, e.msg);
  store_close(s);
  free(w);
  free(o);
}

static double mono_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* SQLITE_BUSY (another connection's write transaction outlasted the busy timeout) is
** ERR_BUSY, which HTTP answers 503 with Retry-After (it was ERR_IO: 500), and the busy
** timeout is MASKD_BUSY_TIMEOUT_MS when set (tests need not wait 30 s). */
static void busy_tests(void) {
  char *db = make_db_path("busykind.db");
  Err e = {0};
  Store *s = store_open(db, &e);
  store_close(s);
  sqlite3 *h = NULL;
  int lrc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  if (lrc == SQLITE_OK) lrc = sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  setenv("MASKD_BUSY_TIMEOUT_MS", "200", 1);
  double t0 = mono_now();
  s = store_open(db, &e);
  int64_t run = s ? store_run_create(s, "busy", "{}", &e) : 0;
  double secs = mono_now() - t0;
  unsetenv("MASKD_BUSY_TIMEOUT_MS");
  sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(h);
  check(lrc == SQLITE_OK && s && run == -1 && e.kind == ERR_BUSY && secs < 3, "store_busy_is_err_busy",
        "lock %d, run %lld, kind %s after %.1f s (%s)", lrc, (long long)run, err_kind_name(e.kind), secs, e.msg);
  e = (Err){0};
  run = s ? store_run_create(s, "free", "{}", &e) : -1;
  check(run > 0, "store_busy_then_free", "%s", e.msg);
  store_close(s);

  /* Recovery with nothing to recover only reads: a maskd train start does not wait behind
  ** another process's write transaction. With a dead process's run, it marks it. */
  lrc = sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL);
  if (lrc == SQLITE_OK) lrc = sqlite3_exec(h, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  setenv("MASKD_BUSY_TIMEOUT_MS", "200", 1);
  s = store_open(db, &e);
  unsetenv("MASKD_BUSY_TIMEOUT_MS");
  int nrec = -1, rrc = s ? store_runs_recover(s, &nrec, &e) : -1, jrc = s ? store_jobs_recover(s, &nrec, &e) : -1;
  sqlite3_exec(h, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(h);
  check(lrc == SQLITE_OK && rrc == 0 && jrc == 0 && nrec == 0, "store_recover_reads_first", "lock %d, runs %d, jobs %d, n %d (%s)", lrc,
        rrc, jrc, nrec, e.msg);
  store_close(s);
}

/* A stream that, once its first chunk is written, has another connection write (a run
** and a small push) and times it, then writes the rest. */
typedef struct BesideProducer {
  const unsigned char *data;
  size_t len;
  const char *db;
  double secs;
  int rc;
  char why[512];
} BesideProducer;

static int produce_and_write_beside(void *ctx, StoreBlobWriter *w, Err *err) {
  BesideProducer *p = ctx;
  if (store_blob_write(w, p->data, TEST_CHUNK + 10, err)) return -1;
  double t0 = mono_now();
  Err e = {0};
  Store *o = store_open(p->db, &e);
  StorePush sp = {.message = "beside", .config_json = "{}", .weights = "x", .weights_len = 1};
  int64_t run = o ? store_run_create(o, "beside", "{}", &e) : -1;
  p->rc = run > 0 ? store_push(o, "beside", &sp, NULL, &e) : -1;
  p->secs = mono_now() - t0;
  snprintf(p->why, sizeof p->why, "%s", e.msg);
  store_close(o);
  return store_blob_write(w, p->data + TEST_CHUNK + 10, p->len - TEST_CHUNK - 10, err);
}

/* A stream that writes its first chunk, says so on fd say, waits for a byte on fd go
** (killed there, or told to go on), then writes the rest. */
typedef struct PausedProducer {
  const unsigned char *data;
  size_t len;
  int say, go;
} PausedProducer;

static int produce_paused(void *ctx, StoreBlobWriter *w, Err *err) {
  PausedProducer *p = ctx;
  char b = 'x';
  if (store_blob_write(w, p->data, TEST_CHUNK + 10, err)) return -1;
  if (write(p->say, &b, 1) != 1 || read(p->go, &b, 1) != 1) return err_set(err, "pipe");
  return store_blob_write(w, p->data + TEST_CHUNK + 10, p->len - TEST_CHUNK - 10, err);
}

/* Forks a child that pushes len bytes of data to model "k" through produce_paused; returns
** its pid once its first chunk is in the store, with *go the fd that lets it go on. */
static pid_t paused_push(const char *db, const unsigned char *data, size_t len, int *go) {
  int said[2], gos[2];
  if (pipe(said) || pipe(gos)) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(said[0]);
    close(gos[1]);
    Err e = {0};
    Store *w = store_open(db, &e);
    PausedProducer pp = {data, len, said[1], gos[0]};
    StoreStream ss = {len, produce_paused, &pp};
    StorePush p = {.message = "paused", .config_json = "{}", .weights_stream = &ss};
    int rc = w ? store_push(w, "k", &p, NULL, &e) : -1;
    if (rc) fprintf(stderr, "paused push: %s\n", e.msg);
    store_close(w);
    _exit(rc ? 1 : 0);
  }
  close(said[1]);
  close(gos[0]);
  char b;
  if (read(said[0], &b, 1) != 1) { close(said[0]); close(gos[1]); return -1; }
  close(said[0]);
  *go = gos[1];
  return pid;
}

/* A streamed push holds the write lock only for each chunk's insert and for its last
** transaction: a big push held it for minutes, and every other writer (a training's
** metrics, HTTP writes) failed after the busy timeout. Its temporary rows are invisible,
** kept while their process lives (gc, opens and pushes of others leave them), and swept
** once it is gone (killed mid-stream); earlier revisions stay whole. */
static void stream_lock_tests(void) {
  char *db = make_db_path("streamlock.db");
  Err e = {0};
  Store *s = store_open(db, &e);
  size_t n = TEST_CHUNK + 70000;
  unsigned char *a = malloc(n), *b = malloc(n);
  for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(i * 7 + 3), b[i] = (unsigned char)(i * 13 + 1);
  BesideProducer bp = {a, n, db, 0, -1, ""};
  StoreStream ss = {n, produce_and_write_beside, &bp};
  StorePush p = {.message = "slow", .config_json = "{}", .weights_stream = &ss};
  StoreRevision r1;
  int rc = s ? store_push(s, "slow", &p, &r1, &e) : -1;
  check(rc == 0 && bp.rc == 0 && bp.secs < 1.0 && file_is(s, &r1, "model.safetensors", a, n), "store_push_stream_lets_others_write",
        "push %d (%s); the other connection's run and push: %d after %.2f s (%s)", rc, e.msg, bp.rc, bp.secs, bp.why);

  /* A live process's stream is kept by others' opens, gc and pushes, then lands whole. */
  StorePush p0 = {.message = "first", .config_json = "{}", .weights = b, .weights_len = 100};
  rc = store_push(s, "k", &p0, NULL, &e);
  int go = -1;
  pid_t live = rc ? -1 : paused_push(db, a, n, &go);
  long long tmp_live = q1(db, "SELECT COUNT(*) FROM blobs WHERE sha256 GLOB '~stream-*'");
  Err oe = {0};
  Store *o = store_open(db, &oe);
  int64_t removed = -1;
  int orc = o ? store_gc(o, &removed, &oe) : -1;
  if (orc == 0) orc = store_push(o, "k-other", &p0, NULL, &oe);
  long long tmp_kept = q1(db, "SELECT COUNT(*) FROM blobs WHERE sha256 GLOB '~stream-*'");
  store_close(o);
  int status = -1;
  if (live > 0) {
    if (write(go, "x", 1) != 1) kill(live, SIGKILL);
    close(go);
    waitpid(live, &status, 0);
  }
  json_t *mg = store_model_get(s, "k", &e);
  check(live > 0 && tmp_live == 1 && orc == 0 && tmp_kept == 1 && WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
            json_array_size(json_object_get(mg, "revisions")) == 2 &&
            q1(db, "SELECT COUNT(*) FROM blobs WHERE sha256 GLOB '~stream-*'") == 0,
        "store_push_stream_of_a_live_process_kept", "child %lld, temporary %lld then %lld, gc and push %d (%s), child status %d",
        (long long)live, tmp_live, tmp_kept, orc, oe.msg, status);
  json_decref(mg);

  /* Killed mid-stream: no revision, earlier ones whole, and the orphan rows swept by the next open. */
  long long revs = q1(db, "SELECT COUNT(*) FROM revisions"), chunks = q1(db, "SELECT COUNT(*) FROM blob_chunks"),
            blobs = q1(db, "SELECT COUNT(*) FROM blobs");
  pid_t killed = paused_push(db, b, n, &go);
  if (killed > 0) {
    kill(killed, SIGKILL);
    close(go);
    waitpid(killed, NULL, 0);
  }
  long long orphans = q1(db, "SELECT COUNT(*) FROM blob_chunks WHERE sha256 GLOB '~stream-*'");
  int still = q1(db, "SELECT COUNT(*) FROM revisions") == revs;
  StoreRevision rv;
  void *data = NULL;
  size_t len = 0;
  Store *after = store_open(db, &e);
  int whole = after && store_resolve(after, "k@1", &rv, &e) == 0 && store_revision_file(after, &rv, "model.safetensors", &data, &len, &e) == 0 &&
              len == 100 && !memcmp(data, b, 100) && store_resolve(after, "k@2", &rv, &e) == 0 && file_is(after, &rv, "model.safetensors", a, n);
  free(data);
  check(killed > 0 && orphans == 1 && still && whole && q1(db, "SELECT COUNT(*) FROM blob_chunks") == chunks &&
            q1(db, "SELECT COUNT(*) FROM blobs") == blobs && store_integrity_check(after, &e) == 0,
        "store_push_killed_mid_stream_swept", "child %lld, %lld orphan chunks before the open, revisions kept %d, whole %d, chunks %lld of %lld (%s)",
        (long long)killed, orphans, still, whole, q1(db, "SELECT COUNT(*) FROM blob_chunks"), chunks, e.msg);
  store_close(after);

  /* A stream's key names its process by pid namespace, pid and start time. One left by a
  ** killed process that had this pid (a container's maskd is pid 1 at every start) is
  ** swept, though the pid lives; one of another pid namespace, where a pid means nothing
  ** here, is kept until stale (kill() answered ESRCH there, and a live push lost its rows). */
  struct stat nst;
  unsigned long long ns = stat("/proc/self/ns/pid", &nst) == 0 ? (unsigned long long)nst.st_ino : 0;
  char reused[65], foreign[65], sql[400];
  snprintf(reused, sizeof reused, "~stream-%llx-%d-%llx-1", ns, (int)getpid(), (unsigned long long)sdb_process_start(getpid()) + 1);
  snprintf(foreign, sizeof foreign, "~stream-%llx-%d-%llx-1", ns + 1, 999999, 5ULL);
  for (char *k = reused; k; k = k == reused ? foreign : NULL) {
    size_t kl = strlen(k);
    memset(k + kl, '~', 64 - kl);
    k[64] = '\0';
  }
  snprintf(sql, sizeof sql, "INSERT INTO blobs(sha256, size, created) VALUES ('%s', 1, %f), ('%s', 1, %f)", reused, now_wall(),
           foreign, now_wall());
  int ins = rawexec(db, sql);
  Store *sweeper = store_open(db, &e);
  store_close(sweeper);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM blobs WHERE sha256 = '%s'", reused);
  long long reused_left = q1(db, sql);
  snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM blobs WHERE sha256 = '%s'", foreign);
  long long foreign_left = q1(db, sql);
  check(ns && ins == SQLITE_OK && sweeper && reused_left == 0 && foreign_left == 1, "store_sweep_streams_by_namespace_pid_and_start",
        "ns %llx, insert %d, rows left: the reused pid's %lld (want 0), another namespace's %lld (want 1)", ns, ins, reused_left,
        foreign_left);
  snprintf(sql, sizeof sql, "DELETE FROM blobs WHERE sha256 = '%s'", foreign);
  rawexec(db, sql);
  store_close(s);
  free(a);
  free(b);
}

/* PRAGMA wal_checkpoint(TRUNCATE) on a raw connection that waits for nobody: 0 when it
** checkpointed the whole log (busy 0, every frame copied back), else -1; *why says. */
static int checkpoint_truncate(const char *db, char *why, size_t cap) {
  sqlite3 *h;
  int ok = -1;
  if (sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(h, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &st, NULL) == SQLITE_OK) {
      if (sqlite3_step(st) == SQLITE_ROW) {
        long long busy = sqlite3_column_int64(st, 0), log = sqlite3_column_int64(st, 1), done = sqlite3_column_int64(st, 2);
        snprintf(why, cap, "busy %lld, log %lld frames, %lld checkpointed", busy, log, done);
        if (busy == 0 && log == done) ok = 0;
      } else {
        snprintf(why, cap, "checkpoint: %s", sqlite3_errmsg(h));
      }
      sqlite3_finalize(st);
    }
  }
  sqlite3_close(h);
  return ok;
}

/* A blob reader holds no read transaction between reads: a slow download no longer keeps
** a WAL checkpoint from reaching the end of the log (the -wal file grew past a GB while
** a client downloaded and a training pushed). Chunks are found by key and index at each
** read, so a blob collected mid-read fails the read, clearly, and one pushed again (new
** rowids, its old ones taken by another blob) reads right. */
static void reader_tests(void) {
  char *db = make_db_path("reader.db");
  Err e = {0};
  Store *s = store_open(db, &e), *w = store_open(db, &e);
  size_t n = TEST_CHUNK + 5000;
  unsigned char *a = malloc(n), *b = malloc(n), *got = malloc(n);
  Rng r;
  rng_seed(&r, 21);
  for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(rng_u64(&r) >> 56), b[i] = (unsigned char)(rng_u64(&r) >> 56);
  StorePush pa = {.message = "a", .config_json = "{}", .weights = a, .weights_len = n};
  StoreRevision ra;
  int rc = s && w ? store_push(w, "rd", &pa, &ra, &e) : -1;
  uint64_t len = 0;
  StoreBlobReader *br = rc ? NULL : store_blob_open(s, ra.weights, &len, &e);
  rc = br ? store_blob_read(br, 0, got, 1000, &e) : -1;
  int64_t run = rc ? -1 : store_run_create(w, "after-the-read", "{}", &e);   /* frames past the reader's first read */
  char why[200] = "";
  int cp = run > 0 ? checkpoint_truncate(db, why, sizeof why) : -1;
  int rest = br ? store_blob_read(br, 1000, got + 1000, n - 1000, &e) | store_blob_verify(br, &e) : -1;
  check(rc == 0 && run > 0 && cp == 0 && rest == 0 && !memcmp(got, a, n) && !store_in_transaction(s), "blob_reader_lets_checkpoint_finish",
        "%s; reads %d %d (%s)", why, rc, rest, e.msg);
  store_blob_close(br);

  /* Collected mid-read: the next read says so. Pushed again after another blob took its
  ** rowids: a reader opened before reads the blob's own bytes. */
  br = store_blob_open(s, ra.weights, &len, &e);
  rc = br ? store_blob_read(br, 0, got, 10, &e) : -1;
  int64_t removed = 0;
  int del = store_revision_delete(w, ra.id, &e) | store_gc(w, &removed, &e);
  Err re = {0};
  int gone = br ? store_blob_read(br, TEST_CHUNK, got, 10, &re) : 0;
  check(rc == 0 && del == 0 && removed == 1 && gone == -1 && re.kind == ERR_NOT_FOUND && strstr(re.msg, "deleted while it was read"),
        "blob_reader_fails_on_a_deleted_blob", "%d %d %lld %d (%s)", rc, del, (long long)removed, gone, re.msg);
  StorePush pb = {.message = "b", .config_json = "{}", .weights = b, .weights_len = n};
  rc = store_push(w, "rd-other", &pb, NULL, &e) | store_push(w, "rd", &pa, NULL, &e);
  Err ve = {0};
  int again = br ? store_blob_read(br, 0, got, n, &ve) | store_blob_verify(br, &ve) : -1;
  check(rc == 0 && again == 0 && !memcmp(got, a, n), "blob_reader_reads_a_blob_pushed_again", "%d %d (%s)", rc, again, ve.msg);
  store_blob_close(br);

  /* Pinned (as a download pins what it streams): the revision deleted and collected on
  ** another connection, the blob stays and reads whole; unpinned, the next gc takes it. */
  StoreRevision rb;
  char pin[65] = "";
  rc = store_resolve(w, "rd", &rb, &e) | store_blob_pin(s, rb.weights, pin, &e);
  /* A revision says when its repository was made, pushed (ra) or resolved (rb, a later one). */
  check(rc == 0 && ra.model_created > 0 && rb.model_created == ra.model_created && rb.created > ra.created,
        "revision_model_created", "%.6f %.6f %.6f", ra.model_created, rb.model_created, rb.created);
  br = rc ? NULL : store_blob_open(s, rb.weights, &len, &e);
  removed = -1;
  del = store_revision_delete(w, rb.id, &e) | store_gc(w, &removed, &e);
  Err pe = {0};
  int whole = br ? store_blob_read(br, 0, got, n, &pe) | store_blob_verify(br, &pe) : -1;
  store_blob_close(br);
  check(rc == 0 && del == 0 && removed == 0 && whole == 0 && !memcmp(got, a, n) && pin[0] == '~',
        "blob_pin_keeps_a_blob_from_gc", "%d %d %lld %d (%s %s)", rc, del, (long long)removed, whole, e.msg, pe.msg);
  store_blob_unpin(s, pin);
  int64_t removed2 = -1;
  rc = store_gc(w, &removed2, &e);
  check(rc == 0 && removed2 == 1, "blob_unpin_lets_gc_take_it", "%lld (%s)", (long long)removed2, e.msg);
  Err me = {0};
  rc = store_blob_pin(s, rb.weights, pin, &me);
  check(rc == -1 && me.kind == ERR_NOT_FOUND && !pin[0], "blob_pin_of_a_collected_blob_not_found", "%d (%s)", rc, me.msg);
  /* A pin whose process is gone (a dead pid, this pid namespace) is swept at the next open. */
  char hp[65], dead[200];
  rc = store_blob_put(w, "pinned by the dead", 18, hp, &e);
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0);
  struct stat ns;
  snprintf(dead, sizeof dead, "INSERT INTO blob_readers VALUES ('~read-%llx-%d-1-1', '%s', 1)",
           stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long long)ns.st_ino : 0ULL, (int)child, hp);
  rawexec(db, dead);
  int held = (int)q1(db, "SELECT COUNT(*) FROM blob_readers");
  store_close(store_open(db, &e));
  check(rc == 0 && held == 1 && q1(db, "SELECT COUNT(*) FROM blob_readers") == 0, "blob_pin_of_a_dead_process_swept",
        "%d pins before, %lld after (%s)", held, (long long)q1(db, "SELECT COUNT(*) FROM blob_readers"), e.msg);
  store_close(s);
  store_close(w);
  free(a);
  free(b);
  free(got);
}

int main(void) {
  if (fixture_tmpdir(tmpdir, sizeof tmpdir, "store")) return 1;
  char cmd[300];
  sha_tests();
  open_tests();
  open_busy_tests();
  api_tests();
  side_file_tests();
  repo_task_tests();
  push_new_repo_tests();
  hub_list_tests();
  hub_list_pipeline_tests();
  stream_tests();
  reader_tests();
  stream_lock_tests();
  busy_tests();
  concurrency_test();
  kill_test();
  cli_test();
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) return 1;
  return check_exit();
}
