/* maskd runs / maskd models: list what the store (store/store.h) holds. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/cli/commands.h"
#include "store/store.h"

typedef struct ListArgs {
  const char *db;
  int json;
} ListArgs;

static void list_defaults(void *p) {
  ListArgs *a = p;
  a->db = cli_db_path(NULL);
  a->json = 0;
}

static const CliOpt list_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = offsetof(ListArgs, db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--json", .kind = CLI_FLAG, .off = offsetof(ListArgs, json), .help = "the list as JSON"},
};

const CliSpec cli_spec_runs = {
  .name = "runs",
  .usage = "usage: maskd runs [--db PATH] [--json]\n\n"
           "Lists training runs, newest first: status, progress, last training loss and\n"
           "last evaluation loss. A run left \"running\" by a process that has ended is\n"
           "marked interrupted first.\n\n",
  .opts = list_opts,
  .n_opts = (int)(sizeof list_opts / sizeof list_opts[0]),
  .args_size = sizeof(ListArgs),
  .defaults = list_defaults,
  .col = 14,
};

const CliSpec cli_spec_models = {
  .name = "models",
  .usage = "usage: maskd models [--db PATH] [--json] [NAME]\n\n"
           "Lists model repositories with their latest revision; with NAME, that model's\n"
           "revisions (newest first). A revision is named NAME@N or NAME@<commit>.\n\n",
  .opts = list_opts,
  .n_opts = (int)(sizeof list_opts / sizeof list_opts[0]),
  .positional = 1,
  .args_size = sizeof(ListArgs),
  .defaults = list_defaults,
  .col = 14,
};

/* Parses [--db PATH] [--json] [NAME]: 1 after --help, -1 after a one-line error. */
static int list_args(const CliSpec *spec, int argc, char **argv, const char **db, int *json, const char **name) {
  ListArgs a;
  const char *pos[1] = {NULL};
  list_defaults(&a);
  int parsed = cli_parse(spec, spec->name, -1, argc, argv, 1, &a, pos, NULL);
  *db = a.db;
  *json = a.json;
  *name = pos[0];
  return parsed;
}

/* Opens an existing store; listing never creates one. */
static Store *open_existing(const char *cmd, const char *db) {
  Err err = {0};
  Store *s = cli_store_open_existing(db, &err);
  if (!s) fprintf(stderr, "maskd %s: %s\n", cmd, err.msg);
  return s;
}

static void fmt_time(char *buf, size_t size, json_t *t) {
  if (!json_is_number(t)) { snprintf(buf, size, "-"); return; }
  time_t secs = (time_t)json_number_value(t);
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(buf, size, "%Y-%m-%d %H:%M", &tm);
}

static void fmt_num(char *buf, size_t size, json_t *v) {
  if (json_is_number(v)) snprintf(buf, size, "%.4f", json_number_value(v));
  else snprintf(buf, size, "-");
}

static int print_json(json_t *v) {
  char *s = json_dumps(v, JSON_INDENT(2) | JSON_REAL_PRECISION(15));
  if (!s) return 1;
  puts(s);
  free(s);
  return 0;
}

int cmd_runs(int argc, char **argv) {
  const char *db, *name;
  int json;
  int parsed = list_args(&cli_spec_runs, argc, argv, &db, &json, &name);
  if (parsed) return parsed > 0 ? 0 : 2;
  Store *s = open_existing("runs", db);
  if (!s) return 1;
  Err err = {0};
  /* A run whose process died without a word (SIGKILL, a crash, the machine) still says
  ** "running": it is marked interrupted first, as maskd serve and maskd train do on start.
  ** Only runs whose process is gone are touched (their pid and its start time), so a live
  ** run of another process stays running. A store this process cannot write is still listed. */
  if (store_runs_recover(s, NULL, &err)) {
    fprintf(stderr, "maskd runs: note: runs whose process has ended may still show as running (%s)\n", err.msg);
    err = (Err){0};
  }
  json_t *runs = store_runs_list(s, &err);
  store_close(s);
  if (!runs) { fprintf(stderr, "maskd runs: %s\n", err.msg); return 1; }
  int rc = 0;
  if (json) {
    rc = print_json(runs);
  } else {
    printf("%-5s %-24s %-11s %-15s %-5s %-9s %-9s %s\n", "ID", "NAME", "STATUS", "STEP", "EPOCH", "LOSS", "EVAL", "CREATED (UTC)");
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
      char step[32], loss[32], eval[32], created[32];
      snprintf(step, sizeof step, "%lld/%lld", (long long)json_integer_value(json_object_get(r, "step")),
               (long long)json_integer_value(json_object_get(r, "total_steps")));
      fmt_num(loss, sizeof loss, json_object_get(r, "last_loss"));
      fmt_num(eval, sizeof eval, json_object_get(r, "eval_loss"));
      fmt_time(created, sizeof created, json_object_get(r, "created"));
      printf("%-5lld %-24s %-11s %-15s %-5lld %-9s %-9s %s\n", (long long)json_integer_value(json_object_get(r, "id")),
             json_string_value(json_object_get(r, "name")), json_string_value(json_object_get(r, "status")), step,
             (long long)json_integer_value(json_object_get(r, "epoch")), loss, eval, created);
    }
  }
  json_decref(runs);
  return rc;
}

int cmd_models(int argc, char **argv) {
  const char *db, *name;
  int json;
  int parsed = list_args(&cli_spec_models, argc, argv, &db, &json, &name);
  if (parsed) return parsed > 0 ? 0 : 2;
  Store *s = open_existing("models", db);
  if (!s) return 1;
  Err err = {0};
  json_t *v = name ? store_model_get(s, name, &err) : store_models_list(s, &err);
  store_close(s);
  if (!v) { fprintf(stderr, "maskd models: %s\n", err.msg); return 1; }
  int rc = 0;
  if (json) {
    rc = print_json(v);
  } else if (name) {
    printf("%-5s %-12s %-7s %-6s %-17s %s\n", "REV", "COMMIT", "EPOCH", "STEP", "CREATED (UTC)", "MESSAGE");
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(v, "revisions"), i, r) {
      char created[32];
      fmt_time(created, sizeof created, json_object_get(r, "created"));
      /* A fine-tuned model's best revision (NAME@best) says so. */
      json_t *best = json_object_get(v, "best");
      int is_best = json_is_integer(best) && json_integer_value(best) == json_integer_value(json_object_get(r, "seq"));
      printf("%-5lld %-12.12s %-7lld %-6lld %-17s %s%s\n", (long long)json_integer_value(json_object_get(r, "seq")),
             json_string_value(json_object_get(r, "commit")), (long long)json_integer_value(json_object_get(r, "epoch")),
             (long long)json_integer_value(json_object_get(r, "step")), created,
             json_string_value(json_object_get(r, "message")), is_best ? " (best)" : "");
    }
  } else {
    printf("%-32s %-9s %-12s %-17s %s\n", "NAME", "REVISIONS", "LAST", "UPDATED (UTC)", "MESSAGE");
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m) {
      char created[32];
      const char *commit = json_string_value(json_object_get(m, "last_commit"));
      const char *msg = json_string_value(json_object_get(m, "last_message"));
      fmt_time(created, sizeof created, json_object_get(m, "last_created"));
      printf("%-32s %-9lld %-12.12s %-17s %s\n", json_string_value(json_object_get(m, "name")),
             (long long)json_integer_value(json_object_get(m, "revisions")), commit ? commit : "-", created, msg ? msg : "");
    }
  }
  json_decref(v);
  return rc;
}
