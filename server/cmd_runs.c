/* maskd runs / maskd models: what the store holds, as a table (or --json, the HTTP
** API's JSON). maskd runs ID shows one run with its epoch metrics. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/commands.h"
#include "store/store.h"

static const char *when(json_t *v, char *buf, size_t cap) {
  if (!json_is_number(v)) return "-";
  time_t t = (time_t)json_number_value(v);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, cap, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

static const char *num(json_t *v, const char *fmt, char *buf, size_t cap) {
  if (!json_is_number(v)) return "-";
  snprintf(buf, cap, fmt, json_number_value(v));
  return buf;
}

/* Shared flag parsing: --db PATH, --json, one optional positional argument. */
static int list_args(const char *cmd, int argc, char **argv, const char **db, int *as_json, const char **arg) {
  *db = getenv("MASKD_DB");
  if (!*db || !**db) *db = "maskd.db";
  *as_json = 0;
  *arg = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: maskd %s [--db PATH] [--json]%s\n", cmd, strcmp(cmd, "runs") ? " [NAME]" : " [RUN]");
      return 1;
    }
    if (!strcmp(argv[i], "--json")) *as_json = 1;
    else if (!strcmp(argv[i], "--db") && i + 1 < argc) *db = argv[++i];
    else if (argv[i][0] != '-' && !*arg) *arg = argv[i];
    else { fprintf(stderr, "maskd %s: unknown option %s\n", cmd, argv[i]); return 2; }
  }
  return 0;
}

static int print_json(json_t *v) {
  char *s = json_dumps(v, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (s) puts(s);
  free(s);
  return s ? 0 : 1;
}

int cmd_runs(int argc, char **argv) {
  const char *dbp, *arg;
  int as_json, r = list_args("runs", argc, argv, &dbp, &as_json, &arg);
  if (r) return r == 1 ? 0 : r;
  Err e = {{0}};
  Store *db = store_open(dbp, &e);
  if (!db) { fprintf(stderr, "maskd runs: %s\n", e.msg); return 1; }
  int status = 0;
  if (arg) {
    int64_t id = store_run_find(db, arg, &e);
    json_t *run = id > 0 ? store_run_get(db, id, &e) : NULL;
    json_t *met = run ? store_run_metrics(db, id, 0, &e) : NULL;
    if (!met) { fprintf(stderr, "maskd runs: %s\n", e.msg); json_decref(run); store_close(db); return 1; }
    if (as_json) {
      json_object_set(run, "metrics", met);
      print_json(run);
    } else {
      char b1[32], b2[32];
      printf("run %lld \"%s\": %s, step %lld/%lld, epoch %lld, started %s, finished %s%s%s\n",
             (long long)json_integer_value(json_object_get(run, "id")), json_string_value(json_object_get(run, "name")),
             json_string_value(json_object_get(run, "status")), (long long)json_integer_value(json_object_get(run, "step")),
             (long long)json_integer_value(json_object_get(run, "total_steps")),
             (long long)json_integer_value(json_object_get(run, "epoch")), when(json_object_get(run, "started"), b1, sizeof b1),
             when(json_object_get(run, "finished"), b2, sizeof b2), json_is_string(json_object_get(run, "error")) ? ", error: " : "",
             json_is_string(json_object_get(run, "error")) ? json_string_value(json_object_get(run, "error")) : "");
      printf("%-6s %-10s %-10s %-10s %-12s\n", "epoch", "loss", "val_loss", "val_acc", "perplexity");
      size_t i;
      json_t *m;
      json_array_foreach(json_object_get(met, "epochs"), i, m) {
        char a[32], b[32], c[32], d[32];
        printf("%-6lld %-10s %-10s %-10s %-12s\n", (long long)json_integer_value(json_object_get(m, "epoch")) + 1,
               num(json_object_get(m, "train_loss"), "%.4f", a, sizeof a), num(json_object_get(m, "eval_loss"), "%.4f", b, sizeof b),
               num(json_object_get(m, "eval_accuracy"), "%.4f", c, sizeof c), num(json_object_get(m, "perplexity"), "%.3f", d, sizeof d));
      }
    }
    json_decref(met);
    json_decref(run);
    store_close(db);
    return 0;
  }
  json_t *runs = store_runs_list(db, &e);
  if (!runs) { fprintf(stderr, "maskd runs: %s\n", e.msg); store_close(db); return 1; }
  if (as_json) status = print_json(runs);
  else {
    printf("%-5s %-24s %-12s %-13s %-6s %-9s %-9s %s\n", "id", "name", "status", "step", "epoch", "loss", "val_loss", "created");
    size_t i;
    json_t *v;
    json_array_foreach(runs, i, v) {
      char steps[40], a[32], b[32], c[32];
      snprintf(steps, sizeof steps, "%lld/%lld", (long long)json_integer_value(json_object_get(v, "step")),
               (long long)json_integer_value(json_object_get(v, "total_steps")));
      printf("%-5lld %-24s %-12s %-13s %-6lld %-9s %-9s %s\n", (long long)json_integer_value(json_object_get(v, "id")),
             json_string_value(json_object_get(v, "name")), json_string_value(json_object_get(v, "status")), steps,
             (long long)json_integer_value(json_object_get(v, "epoch")), num(json_object_get(v, "last_loss"), "%.4f", a, sizeof a),
             num(json_object_get(v, "eval_loss"), "%.4f", b, sizeof b), when(json_object_get(v, "created"), c, sizeof c));
    }
  }
  json_decref(runs);
  store_close(db);
  return status;
}

int cmd_models(int argc, char **argv) {
  const char *dbp, *arg;
  int as_json, r = list_args("models", argc, argv, &dbp, &as_json, &arg);
  if (r) return r == 1 ? 0 : r;
  Err e = {{0}};
  Store *db = store_open(dbp, &e);
  if (!db) { fprintf(stderr, "maskd models: %s\n", e.msg); return 1; }
  json_t *v = arg ? store_model_get(db, arg, &e) : store_models_list(db, &e);
  if (!v) { fprintf(stderr, "maskd models: %s\n", e.msg); store_close(db); return 1; }
  int status = 0;
  if (as_json) status = print_json(v);
  else if (arg) {
    printf("%-5s %-10s %-8s %-6s %-20s %s\n", "seq", "commit", "step", "epoch", "created", "message");
    size_t i;
    json_t *rv;
    json_array_foreach(json_object_get(v, "revisions"), i, rv) {
      char c[32];
      const char *commit = json_string_value(json_object_get(rv, "commit"));
      printf("%-5lld %-10.8s %-8lld %-6lld %-20s %s%s\n", (long long)json_integer_value(json_object_get(rv, "seq")),
             commit ? commit : "-", (long long)json_integer_value(json_object_get(rv, "step")),
             (long long)json_integer_value(json_object_get(rv, "epoch")), when(json_object_get(rv, "created"), c, sizeof c),
             json_string_value(json_object_get(rv, "message")),
             json_integer_value(json_object_get(rv, "has_optimizer")) || json_is_true(json_object_get(rv, "has_optimizer"))
                 ? " [+optimizer]" : "");
    }
  } else {
    printf("%-24s %-9s %-10s %-20s %s\n", "name", "revisions", "commit", "updated", "last message");
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m) {
      char c[32];
      const char *commit = json_string_value(json_object_get(m, "last_commit"));
      printf("%-24s %-9lld %-10.8s %-20s %s\n", json_string_value(json_object_get(m, "name")),
             (long long)json_integer_value(json_object_get(m, "revisions")), commit ? commit : "-",
             when(json_object_get(m, "last_created"), c, sizeof c),
             json_is_string(json_object_get(m, "last_message")) ? json_string_value(json_object_get(m, "last_message")) : "-");
    }
  }
  json_decref(v);
  store_close(db);
  return status;
}
