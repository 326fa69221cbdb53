/* Unit tests of server/app/registry and server/cli/job_progress: a planned job's inputs
** hashed as sha256sum would; what it made registered with its source and job, or
** refused (a corpus or tokenizer changed since the plan, a broken output, a name taken)
** with a one-line reason that names no host path; unknown output folders adopted with
** source null (a dataset's tokenizer found by its file's hash); a job's progress written
** at most twice a second, its newest report kept when it closes, and never written for
** a job that is not running (which fails nothing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/data/prepare.h"
#include "engine/tok/tokenizer.h"
#include "server/app/registry.h"
#include "server/cli/job_progress.h"
#include "store/store.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char dir[300];

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (f) { fputs(text, f); fclose(f); }
}

/* A small seed-recipe tokenizer written to path; its vocabulary size. */
static int write_tokenizer(const char *path) {
  static const char *const pieces[] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", "\xe2\x96\x81", "a", "b", "c",
                                       "\xe2\x96\x81" "a", "l", "i", "n", "e", "o", "t", "h", "r", " "};
  int n = (int)(sizeof pieces / sizeof pieces[0]);
  double scores[32];
  for (int i = 0; i < n; i++) scores[i] = i < 5 ? 0.0 : -1.0 - i * 0.1;
  Err e = {0};
  Tokenizer *t = tokenizer_new_seed(n, pieces, scores, 2, 5, &e);
  int ok = t && tokenizer_save(t, path, &e) == 0;
  tokenizer_free(t);
  if (!ok) printf("# tokenizer: %s\n", e.msg);
  return ok ? n : -1;
}

/* The encoder of a prepared set: the tokenizer's ids with [CLS] ... [SEP]. */
typedef struct TokCtx { Tokenizer *tok; Encoding enc; } TokCtx;
static int tok_encode(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err) {
  TokCtx *c = ctx;
  if (tokenizer_encode(c->tok, text, len, 1, &c->enc, err) != 0) return -1;
  int n = c->enc.n;
  memcpy(ids, c->enc.ids, (size_t)(n < cap ? n : cap) * sizeof *ids);
  return n;
}

/* Prepares corpus with the tokenizer at tok into out (seq 4, 3 samples a shard). */
static int prepare_set(const char *tok, const char *corpus, const char *out) {
  Err e = {0};
  TokCtx c;
  memset(&c, 0, sizeof c);
  c.tok = tokenizer_load(tok, &e);
  char hash[32];
  FILE *in = fopen(corpus, "rb");
  int rc = c.tok && in && !prepare_file_hash(tok, hash, sizeof hash, &e) ? 0 : -1;
  if (rc == 0) {
    PrepareOptions o = prepare_default_options("train", 4, (uint32_t)tokenizer_vocab_size(c.tok));
    o.shard_size = 3;
    o.tokenizer_hash = hash;
    rc = prepare_run(in, 0, out, &o, tok_encode, &c, NULL, &e);
  }
  if (rc) printf("# prepare: %s\n", e.msg);
  if (in) fclose(in);
  encoding_free(&c.enc);
  tokenizer_free(c.tok);
  return rc;
}

static const char *sha(const char *path, char hex[65]) {
  size_t len = 0;
  Err e = {0};
  char *data = files_read_all(path, 1 << 20, &len, &e);
  store_sha256_hex(data ? data : "", data ? len : 0, hex);
  free(data);
  return hex;
}

static int no_host_path(const char *msg) { return !strstr(msg, dir); }

static void registry_tests(void) {
  char data[400], work[400], corpus[500], db[400], p[600], q[700], hex[65];
  snprintf(data, sizeof data, "%s/data", dir);
  snprintf(work, sizeof work, "%s/work", dir);
  snprintf(db, sizeof db, "%s/hub.db", dir);
  mkdir(data, 0700);
  snprintf(corpus, sizeof corpus, "%s/c.txt", data);
  write_text(corpus, "a line\nanother line\nthe third line\nbac cab abc\na b c a b c\n");
  Err e = {0};
  Workspace ws;
  memset(&ws, 0, sizeof ws);
  Store *s = store_open(db, &e);
  if (!s || workspace_open(&ws, data, work, &e)) { check(0, "registry_setup", "%s", e.msg); store_close(s); return; }
  RegistryPlan *plan = malloc(sizeof *plan);

  /* A tokenizer job: planned (inputs hashed), its output registered with source and job. */
  int rc = registry_plan(&ws, "tokenizer", "{\"name\": \"t\", \"input\": [\"c.txt\"], \"vocab_size\": 100}", plan, &e);
  check(rc == 0 && plan->n_corpora == 1 && !strcmp(plan->corpora[0].sha256, sha(corpus, hex)) &&
            plan->corpora[0].bytes == 59 && !strcmp(plan->corpora[0].name, "c.txt") && !plan->dataset,
        "registry_plan_tokenizer", "rc %d: %s", rc, e.msg);
  check(registry_plan(&ws, "train", "{}", plan, &e) == 1, "registry_plan_train_is_not_registered", "planned");
  rc = registry_plan(&ws, "tokenizer", "{\"name\": \"t\", \"input\": \"nope.txt\"}", plan, &e);
  check(rc == -1 && no_host_path(e.msg) && strstr(e.msg, "input"), "registry_plan_missing_corpus", "%s", e.msg);
  registry_plan(&ws, "tokenizer", "{\"name\": \"t\", \"input\": [\"c.txt\"], \"vocab_size\": 100}", plan, &e);
  snprintf(p, sizeof p, "%s/tokenizers/t", work);
  mkdir(p, 0700);
  rc = registry_register(s, plan, p, 5, &e);
  check(rc == -1 && no_host_path(e.msg) && strstr(e.msg, "tokenizer.json"), "registry_refuses_missing_output", "%s", e.msg);
  snprintf(q, sizeof q, "%s/tokenizer.json", p);
  write_text(q, "{\"not\": \"a tokenizer\"}");
  rc = registry_register(s, plan, p, 5, &e);
  check(rc == -1 && no_host_path(e.msg) && strstr(e.msg, "tokenizer.json"), "registry_refuses_broken_output", "%s", e.msg);
  int vocab = write_tokenizer(q);
  rc = registry_register(s, plan, p, 5, &e);
  json_t *t = store_tokenizer_info(s, "t", &e);
  json_t *c0 = json_array_get(json_object_get(json_object_get(t, "source"), "corpora"), 0);
  check(rc == 0 && t && json_integer_value(json_object_get(t, "vocab_size")) == vocab &&
            !strcmp(json_string_value(json_object_get(t, "sha256")) ?: "", sha(q, hex)) &&
            json_integer_value(json_object_get(t, "job")) == 5 && json_integer_value(json_object_get(c0, "bytes")) == 59 &&
            !strcmp(json_string_value(json_object_get(c0, "sha256")) ?: "", plan->corpora[0].sha256),
        "registry_registers_tokenizer", "rc %d: %s", rc, e.msg);
  json_decref(t);
  rc = registry_register(s, plan, p, 6, &e);
  check(rc == -1 && e.kind == ERR_CONFLICT && strstr(e.msg, "already exists"), "registry_refuses_taken_name", "%s", e.msg);

  /* A dataset job with the registered tokenizer, then one with a file of the data folder. */
  char tokfile[500];
  snprintf(tokfile, sizeof tokfile, "%s/tok.json", data);
  write_tokenizer(tokfile);
  RegistryPlan *dplan = malloc(sizeof *dplan);
  rc = registry_plan(&ws, "prepare", "{\"name\": \"d\", \"tokenizer\": \"t\", \"input\": \"c.txt\"}", dplan, &e);
  check(rc == 0 && dplan->dataset && !strcmp(dplan->tokenizer.sha256, sha(q, hex)), "registry_plan_dataset", "%s", e.msg);
  snprintf(p, sizeof p, "%s/datasets/d", work);
  int prc = prepare_set(q, corpus, p);
  rc = prc ? -1 : registry_register(s, dplan, p, 7, &e);
  json_t *d = store_dataset_get(s, "d", &e);
  json_t *dt = json_object_get(json_object_get(d, "source"), "tokenizer");
  check(rc == 0 && d && !strcmp(json_string_value(json_object_get(d, "tokenizer")) ?: "", "t") &&
            !strcmp(json_string_value(json_object_get(d, "split")) ?: "", "train") &&
            json_integer_value(json_object_get(d, "seq_len")) == 4 && json_integer_value(json_object_get(d, "shards")) >= 1 &&
            json_integer_value(json_object_get(d, "samples")) >= 3 && json_integer_value(json_object_get(d, "job")) == 7 &&
            !strcmp(json_string_value(json_object_get(dt, "name")) ?: "", "t") &&
            !strcmp(json_string_value(json_object_get(dt, "sha256")) ?: "", dplan->tokenizer.sha256) &&
            !strchr(json_string_value(json_object_get(json_array_get(json_object_get(d, "files"), 0), "file")) ?: "/", '/'),
        "registry_registers_dataset", "rc %d: %s", rc, e.msg);
  json_decref(d);
  rc = registry_plan(&ws, "prepare", "{\"name\": \"d2\", \"tokenizer\": \"tok.json\", \"input\": \"c.txt\"}", dplan, &e);
  snprintf(p, sizeof p, "%s/datasets/d2", work);
  rc = rc || prepare_set(tokfile, corpus, p) ? -1 : registry_register(s, dplan, p, 8, &e);
  d = store_dataset_get(s, "d2", &e);
  check(rc == 0 && d && json_is_null(json_object_get(d, "tokenizer")) &&
            !strcmp(json_string_value(json_object_get(json_object_get(json_object_get(d, "source"), "tokenizer"), "name")) ?: "", "tok.json"),
        "registry_dataset_unregistered_tokenizer_is_null", "rc %d: %s", rc, e.msg);
  json_decref(d);
  /* A shard that does not match its manifest: refused, with file names only. */
  rc = registry_plan(&ws, "prepare", "{\"name\": \"d3\", \"tokenizer\": \"t\", \"input\": \"c.txt\"}", dplan, &e);
  snprintf(p, sizeof p, "%s/datasets/d3", work);
  if (rc == 0 && prepare_set(q, corpus, p) == 0) {
    snprintf(q, sizeof q, "%s/datasets/d3/train-00000-samples-3.shard", work);
    FILE *f = fopen(q, "r+b");
    if (f) { fseek(f, -2, SEEK_END); fputc(0x7f, f); fclose(f); }
    rc = registry_register(s, dplan, p, 9, &e);
    check(rc == -1 && no_host_path(e.msg) && !store_dataset_get(s, "d3", NULL), "registry_refuses_damaged_shards", "%s", e.msg);
  } else {
    check(0, "registry_refuses_damaged_shards", "setup: %s", e.msg);
  }

  /* An input that changed since the plan fails the job: a corpus, a tokenizer. */
  rc = registry_plan(&ws, "tokenizer", "{\"name\": \"t2\", \"input\": \"c.txt\"}", plan, &e);
  write_text(corpus, "a line\nanother line\nthe third line\nbac cab abc\na b c a b c\nmore\n");
  snprintf(p, sizeof p, "%s/tokenizers/t", work);
  rc = rc ? -1 : registry_register(s, plan, p, 10, &e);
  check(rc == -1 && !strcmp(e.msg, "corpus c.txt changed while the job read it") && !store_tokenizer_info(s, "t2", NULL),
        "registry_refuses_changed_corpus", "%s", e.msg);
  rc = registry_plan(&ws, "prepare", "{\"name\": \"d4\", \"tokenizer\": \"tok.json\", \"input\": \"c.txt\"}", dplan, &e);
  write_tokenizer(tokfile);
  FILE *f = fopen(tokfile, "ab");
  if (f) { fputs("\n", f); fclose(f); }
  snprintf(p, sizeof p, "%s/datasets/d2", work);
  rc = rc ? -1 : registry_register(s, dplan, p, 11, &e);
  check(rc == -1 && strstr(e.msg, "tokenizer tok.json changed"), "registry_refuses_changed_tokenizer", "%s", e.msg);

  /* Adoption: a folder the store does not know, with source null; a known one is left. */
  snprintf(p, sizeof p, "%s/tokenizers/old", work);
  mkdir(p, 0700);
  snprintf(q, sizeof q, "%s/tokenizer.json", p);
  write_tokenizer(q);
  char tokjson[700];
  snprintf(tokjson, sizeof tokjson, "%s", q);
  snprintf(q, sizeof q, "%s/tokenizers/t", work);
  int a1 = registry_adopt(s, "tokenizers", "old", p, &e), a2 = registry_adopt(s, "tokenizers", "t", q, &e);
  t = store_tokenizer_info(s, "old", &e);
  json_t *tt = store_tokenizer_info(s, "t", &e);
  check(a1 == 0 && a2 == 0 && t && json_is_null(json_object_get(t, "source")) && json_is_null(json_object_get(t, "job")) &&
            json_integer_value(json_object_get(tt, "job")) == 5,
        "registry_adopts_tokenizer", "%d %d: %s", a1, a2, e.msg);
  json_decref(t);
  json_decref(tt);
  snprintf(p, sizeof p, "%s/datasets/old-ds", work);
  write_text(corpus, "a line\nanother line\nthe third line\nbac cab abc\na b c a b c\n");
  rc = prepare_set(tokjson, corpus, p) ? -1 : registry_adopt(s, "datasets", "old-ds", p, &e);
  d = store_dataset_get(s, "old-ds", &e);
  /* "old" and "t" are the same file: the first registered with that hash is named. */
  check(rc == 0 && d && json_is_null(json_object_get(d, "source")) &&
            !strcmp(json_string_value(json_object_get(d, "tokenizer")) ?: "", "t"),
        "registry_adopts_dataset_with_its_tokenizer", "rc %d: %s", rc, e.msg);
  json_decref(d);

  free(plan);
  free(dplan);
  workspace_close(&ws);
  store_close(s);
}

static void progress_tests(void) {
  char db[400];
  snprintf(db, sizeof db, "%s/progress.db", dir);
  Err e = {0};
  Store *s = store_open(db, &e);
  int64_t job = s ? store_job_submit(s, "prepare", "{}", &e) : -1, id = 0;
  char *kind = NULL, *params = NULL;
  if (!s || store_job_claim(s, &id, &kind, &params, &e) != 0) { check(0, "progress_setup", "%s", e.msg); store_close(s); return; }
  free(kind);
  free(params);
  JobProgress jp;
  job_progress_open(&jp, db, job);
  job_progress_report(&jp, "encoding", 10, 100, "bytes");
  json_t *j = store_job_get(s, job, &e);
  json_t *pr = json_object_get(j, "progress");
  check(pr && json_real_value(json_object_get(pr, "done")) == 10 && json_real_value(json_object_get(pr, "total")) == 100 &&
            !strcmp(json_string_value(json_object_get(pr, "unit")) ?: "", "bytes") && json_object_get(pr, "rate") &&
            json_object_get(pr, "eta_s"),
        "job_progress_first_report_written", "%s", e.msg);
  json_decref(j);
  for (int i = 11; i <= 60; i++) job_progress_report(&jp, "encoding", i, 100, "bytes");
  j = store_job_get(s, job, &e);
  check(json_real_value(json_object_get(json_object_get(j, "progress"), "done")) == 10, "job_progress_throttled", "written at once");
  json_decref(j);
  usleep(600 * 1000);
  job_progress_report(&jp, "encoding", 70, 100, "bytes");
  j = store_job_get(s, job, &e);
  pr = json_object_get(j, "progress");
  double rate = json_number_value(json_object_get(pr, "rate")), eta = json_number_value(json_object_get(pr, "eta_s"));
  check(json_real_value(json_object_get(pr, "done")) == 70 && rate > 50 && rate < 200 && eta > 0.1 && eta < 1.0,
        "job_progress_rate_and_eta", "rate %g, eta %g", rate, eta);
  json_decref(j);
  job_progress_report(&jp, "seeding", 0, -1, "pieces");
  job_progress_close(&jp);
  j = store_job_get(s, job, &e);
  pr = json_object_get(j, "progress");
  check(!strcmp(json_string_value(json_object_get(pr, "phase")) ?: "", "seeding") && json_is_null(json_object_get(pr, "total")) &&
            json_is_null(json_object_get(pr, "eta_s")),
        "job_progress_close_writes_the_last", "%s", e.msg);
  json_decref(j);
  /* A job that ended: its progress stays, and reports are dropped without failing. */
  store_job_finish(s, job, STORE_STATUS_DONE, NULL, &e);
  job_progress_open(&jp, db, job);
  for (int i = 0; i < 10; i++) { job_progress_report(&jp, "other", i, 10, "x"); usleep(i == 0 ? 0 : 1000); }
  job_progress_close(&jp);
  JobProgress none;
  job_progress_open(&none, "/nonexistent/dir/x.db", 1);
  job_progress_report(&none, "p", 1, 2, "x");
  job_progress_close(&none);
  j = store_job_get(s, job, &e);
  check(!strcmp(json_string_value(json_object_get(json_object_get(j, "progress"), "phase")) ?: "", "seeding"),
        "job_progress_not_running_dropped", "%s", e.msg);
  json_decref(j);
  store_close(s);
}

int main(void) {
  if (fixture_tmpdir(dir, sizeof dir, "registry")) { check(0, "registry_tmpdir", "%s", dir); return check_exit(); }
  registry_tests();
  progress_tests();
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) printf("# could not remove %s\n", dir);
  return check_exit();
}
