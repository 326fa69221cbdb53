/* libFuzzer harness: request bodies as the HTTP API's handlers receive them, without
** HTTP: POST /runs, /tokenizers, /datasets (server/app/routes_jobs.c) and /fill-mask
** (server/app/routes_fill.c), called with the same App a server has: a store (in a private
** folder, holding a tiny model and a run), a data root with a corpus, a tokenizer, a
** dataset and a config, and a work root with a registered tokenizer and dataset.
** The first byte picks the route, the rest is the body.
** The operator allows the job hosts h1 and h2 (maskd serve --job-hosts), so a run's
** "hosts" is queued or refused (403) by the list.
** Checks: the answer is one of the statuses a bad request may get (never 500: bad input
** is the client's error), its body is JSON and an error is {"error": str, ...}; a 202
** queued a job whose stored description parses (and for a run applies as a run
** description and passes its checks); submitting writes nothing into the roots. */
#include <dirent.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/io/checkpoint.h"
#include "engine/nn/config.h"
#include "engine/core/files.h"
#include "engine/train/run_config.h"
#include "engine/data/shards.h"
#include "engine/tok/tokenizer.h"
#include "server/app/app.h"
#include "store/store.h"
#include "tests/fuzz/fuzz_common.h"

#define SP "\xe2\x96\x81"
static const char *pieces[] = {
  "[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", SP, SP "the", SP "a", SP "cat", SP "sat", SP "on", SP "mat", ".",
  "s", "e", "t", "a", "c", "h", "o", "n", "m", "x", "d",
};
#define NP ((int)(sizeof pieces / sizeof pieces[0]))

static App app;
static char db[600], data_root[600], work_root[600];

static void mkdir_p(const char *fmt, const char *a, const char *b) {
  char p[1200];
  snprintf(p, sizeof p, fmt, a, b);
  Err err = {0};
  FUZZ_CHECK(files_make_dirs(p, &err) == 0, "%s", err.msg);
}

static void put(const char *dir, const char *name, const void *bytes, size_t n) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  fuzz_write_file(p, bytes, n);
}

/* A shard set of `count` samples of 8 ids into dir. */
static void shards(const char *dir) {
  int32_t ids[4 * 8];
  for (int i = 0; i < 4 * 8; i++) ids[i] = i % NP;
  char p[1200];
  snprintf(p, sizeof p, "%s/train-00000-samples-4.shard", dir);
  Err err = {0};
  FUZZ_CHECK(shard_write(p, ids, 4, 8, NP, NULL, &err) == 0, "%s", err.msg);
}

static void setup(void) {
  const char *d = fuzz_dir();
  snprintf(db, sizeof db, "%s/maskd.db", d);
  snprintf(data_root, sizeof data_root, "%s/data", d);
  snprintf(work_root, sizeof work_root, "%s/work", d);
  Err err = {0};
  double sc[NP];
  for (int i = 0; i < NP; i++) sc[i] = i < 5 ? 0.0 : -1.0 - 0.1 * i;
  Tokenizer *t = tokenizer_new_seed(NP, pieces, sc, 2, 5, &err);
  FUZZ_CHECK(t, "tokenizer: %s", err.msg);
  char *tj = tokenizer_to_json(t, &err);
  tokenizer_free(t);
  ModelConfig c;
  config_preset("tiny", &c, &err);
  c.vocab_size = NP; c.hidden_size = 8; c.num_attention_heads = 2; c.num_hidden_layers = 1; c.intermediate_size = 16;
  c.max_position_embeddings = 24;
  char *cj = config_to_json(&c);

  /* The data root: a corpus, a tokenizer folder, a dataset folder, a config. */
  mkdir_p("%s/%s", data_root, "sub");
  mkdir_p("%s/%s", data_root, "tok");
  mkdir_p("%s/%s", data_root, "ds");
  static const char corpus[] = "the cat sat on the mat\nthe dog sat\n";
  put(data_root, "c.txt", corpus, strlen(corpus));
  put(data_root, "sub/d.txt", corpus, strlen(corpus));
  put(data_root, "tok/tokenizer.json", tj, strlen(tj));
  put(data_root, "cfg.json", cj, strlen(cj));
  char p[1200];
  snprintf(p, sizeof p, "%s/ds", data_root);
  shards(p);
  FUZZ_CHECK(workspace_open(&app.ws, data_root, work_root, &err) == 0, "workspace: %s", err.msg);
  /* The work root: a registered tokenizer and dataset. */
  mkdir_p("%s/tokenizers/%s", work_root, "rt");
  mkdir_p("%s/datasets/%s", work_root, "rd");
  snprintf(p, sizeof p, "%s/tokenizers/rt", work_root);
  put(p, "tokenizer.json", tj, strlen(tj));
  snprintf(p, sizeof p, "%s/datasets/rd", work_root);
  shards(p);

  /* The store: a model with a revision (for fill-mask) and a run (for resume). */
  Store *s = store_open(db, &err);
  FUZZ_CHECK(s, "store: %s", err.msg);
  Model *m = model_new(&c, &err);
  FUZZ_CHECK(m, "model: %s", err.msg);
  model_init_weights(m, 5);
  unsigned char *w;
  size_t wl;
  FUZZ_CHECK(ckpt_weights_bytes(m, 0, &w, &wl, &err) == 0, "%s", err.msg);
  model_free(m);
  StorePush push = {.message = "fuzz", .config_json = cj, .weights = w, .weights_len = wl, .tokenizer_json = tj};
  FUZZ_CHECK(store_push(s, "m", &push, NULL, &err) == 0, "push: %s", err.msg);
  FUZZ_CHECK(store_run_create(s, "r1", "{\"name\": \"r1\"}", &err) > 0, "run: %s", err.msg);
  store_close(s);
  free(w);
  free(tj);
  free(cj);

  app.db_path = db;
  app.metrics = metrics_new();
  FillMaskOptions fill_defaults;
  fillmask_options_default(&fill_defaults);
  app.fill = fill_cache_new(2, 0, 0, 1, &fill_defaults.limits, app.metrics);
  app.quiet = 1;
  app.job_hosts = "h1,h2";
  FUZZ_CHECK(app.metrics && app.fill, "oom");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  setup();
  return 0;
}

/* Entries under dir, recursively (a submission must not add any). */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    n++;
    if (e->d_type == DT_DIR && strcmp(e->d_name, "jobs")) {
      char p[1200];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      n += count_entries(p);
    }
  }
  closedir(d);
  return n;
}

static void check_job(json_int_t id, const char *kind) {
  Err err = {0};
  Store *s = store_open(db, &err);
  FUZZ_CHECK(s, "store: %s", err.msg);
  json_t *job = store_job_get(s, id, &err);
  FUZZ_CHECK(job, "job %lld is not in the store: %s", (long long)id, err.msg);
  const char *params = json_string_value(json_object_get(job, "params"));
  json_t *p = params ? json_loads(params, JSON_REJECT_DUPLICATES, NULL) : json_incref(json_object_get(job, "params"));
  FUZZ_CHECK(json_is_object(p), "job %lld's description is not a JSON object", (long long)id);
  if (!strcmp(kind, "train") && !json_object_get(p, "resume")) {
    json_object_del(p, "on_restart");
    char *text = json_dumps(p, JSON_COMPACT);
    RunConfig rc;
    run_config_defaults(&rc);
    FUZZ_CHECK(run_config_apply_json(&rc, text, &err) == 0 && run_config_check(&rc, &err) == 0,
               "a queued run's description is refused: %s", err.msg);
    free(text);
  }
  json_decref(p);
  json_decref(job);
  store_close(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  static const HttpHandler routes[] = {route_submit_run, route_submit_tokenizer, route_submit_dataset, route_fill_mask};
  static const char *const patterns[] = {"/runs", "/tokenizers", "/datasets", "/fill-mask"};
  int r = data[0] % 4;
  char *body = fuzz_cstr(data + 1, size - 1);
  HttpReq rq = {.method = "POST", .path = patterns[r], .pattern = patterns[r], .body = body, .body_len = size - 1};
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  int before_data = count_entries(data_root), before_work = count_entries(work_root);
  routes[r](&app, &rq, &rs);

  int st = rs.status;
  FUZZ_CHECK(st == 200 || st == 202 || st == 400 || st == 403 || st == 404 || st == 409 || st == 413 || st == 422 ||
                 st == 503,
             "%s answered %d: %.*s", patterns[r], st, (int)rs.len, rs.body ? rs.body : "");
  FUZZ_CHECK(rs.body && rs.len == strlen(rs.body), "%s answered %d without a body", patterns[r], st);
  json_error_t je;
  json_t *ans = json_loadb(rs.body, rs.len, JSON_DECODE_ANY, &je);
  FUZZ_CHECK(ans, "%s answered %d with invalid JSON (%s): %.200s", patterns[r], st, je.text, rs.body);
  if (st >= 400) {
    FUZZ_CHECK(json_is_object(ans) && json_is_string(json_object_get(ans, "error")), "%s answered %d without \"error\": %.200s",
               patterns[r], st, rs.body);
  } else if (st == 202) {
    FUZZ_CHECK(r < 3, "fill-mask answered 202");
    json_t *id = json_object_get(ans, "id");
    FUZZ_CHECK(json_is_integer(id), "202 without a job id: %.200s", rs.body);
    check_job(json_integer_value(id), json_string_value(json_object_get(ans, "kind")));
  } else {
    FUZZ_CHECK(r == 3 && json_is_array(ans), "%s answered 200 with %.200s", patterns[r], rs.body);
  }
  json_decref(ans);
  FUZZ_CHECK(count_entries(data_root) == before_data && count_entries(work_root) == before_work,
             "%s (%d) wrote into the data or work root", patterns[r], st);
  free(rs.body);
  free(body);
  return 0;
}
