/* GET /healthz, GET /metrics, the page at / and the request observer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/app/app.h"
#include "server/app/job_hosts.h"
#include "engine/core/now.h"
#include "server/http/static_files.h"

void route_healthz(void *app, HttpReq *rq, HttpRes *rs) {
  (void)rq;
  App *a = app;
  json_t *h = json_pack("{s:s, s:f}", "status", "ok", "uptime_s", now_wall() - a->started);
  if (h) json_object_set_new(h, "limits", json_pack("{s:o, s:o, s:{s:I}}", "fill_mask", fill_limits_json(a->fill),
                                                    "text_classification", textclass_limits_json(a->fill), "upload",
                                                    "max_bytes", (json_int_t)a->max_upload));
  if (h) json_object_set_new(h, "precision", json_pack("{s:o}", "fill_mask", fill_precision_json(a->fill)));
  /* How many other machines a training job may use; /healthz is open, so never their names. */
  if (h) json_object_set_new(h, "job_hosts", json_integer(job_hosts_count(a->job_hosts)));
  http_json(rs, 200, h);
}

void route_metrics(void *app, HttpReq *rq, HttpRes *rs) {
  (void)rq;
  App *a = app;
  char *jobs = app_jobs_metrics_text(a);
  char *text = metrics_render(a->metrics, jobs);
  free(jobs);
  if (!text) { http_error(rs, 500, "out of memory", NULL); return; }
  free(rs->body);
  rs->body = text;
  rs->len = strlen(text);
  rs->status = 200;
  rs->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

int route_static(void *app, HttpReq *rq, HttpRes *rs) {
  App *a = app;
  return static_serve(a->static_root, rq, rs);
}

void route_observe(void *app, const char *route, const char *method, int status, double seconds) {
  App *a = app;
  metrics_request(a->metrics, route, method, status, seconds);
  /* The method as counted: a client's arbitrary bytes do not reach the log. */
  if (!a->quiet) fprintf(stderr, "%s %s %d %.1fms\n", metrics_method_label(method), route, status, seconds * 1e3);
}
