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
  /* Every status a job can have, in the order /metrics has always listed them. */
  static const StoreStatus states[] = {STORE_STATUS_QUEUED, STORE_STATUS_RUNNING, STORE_STATUS_DONE,
                                       STORE_STATUS_FAILED, STORE_STATUS_INTERRUPTED, STORE_STATUS_CANCELLED};
  enum { N_STATES = sizeof states / sizeof states[0] };
  int count[STORE_STATUS_COUNT] = {0};
  Err e = {0};
  Store *s = store_open(a->db_path, &e);
  json_t *jobs = s ? store_jobs_list(s, &e) : NULL;
  store_close(s);
  size_t i;
  json_t *j;
  StoreStatus st;
  json_array_foreach(jobs, i, j)
    if (store_status_parse(json_string_value(json_object_get(j, "status")), &st) == 0) count[st]++;
  json_decref(jobs);
  char *out = malloc(1024);
  if (!out) return NULL;
  int n = snprintf(out, 1024, "# HELP maskd_jobs Jobs in the store by state.\n# TYPE maskd_jobs gauge\n");
  for (int k = 0; k < N_STATES; k++)
    n += snprintf(out + n, 1024 - (size_t)n, "maskd_jobs{state=\"%s\"} %d\n", store_status_name(states[k]), count[states[k]]);
  return out;
}
