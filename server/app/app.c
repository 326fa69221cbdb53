/* The server's shared state (server/app/app.h): what every route may ask of the App. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/app/app.h"

Store *app_store(App *a, HttpRes *rs) {
  Err e = {0};
  Store *s = store_open(a->db_path, &e);
  if (!s) http_error_from(rs, &e, "cannot open the store", json_string(e.msg));
  return s;
}

char *app_jobs_metrics_text(App *a) {
  static const char *states[] = {"queued", "running", "done", "failed", "interrupted", "cancelled"};
  int count[6] = {0};
  Err e = {0};
  Store *s = store_open(a->db_path, &e);
  json_t *jobs = s ? store_jobs_list(s, &e) : NULL;
  store_close(s);
  size_t i;
  json_t *j;
  json_array_foreach(jobs, i, j)
    for (int k = 0; k < 6; k++)
      if (!strcmp(json_string_value(json_object_get(j, "status")) ?: "", states[k])) count[k]++;
  json_decref(jobs);
  char *out = malloc(1024);
  if (!out) return NULL;
  int n = snprintf(out, 1024, "# HELP maskd_jobs Jobs in the store by state.\n# TYPE maskd_jobs gauge\n");
  for (int k = 0; k < 6; k++) n += snprintf(out + n, 1024 - (size_t)n, "maskd_jobs{state=\"%s\"} %d\n", states[k], count[k]);
  return out;
}
