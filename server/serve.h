/* What the handlers of maskd serve share (server/routes_*.c, server/cmd_serve.c). */
#ifndef MASKD_SERVE_H
#define MASKD_SERVE_H
#include "server/http.h"
#include "server/metrics.h"

typedef struct App {
  HttpServer *http;
  Metrics *metrics;
  char *static_root;        /* canonical path of the page's directory */
  const char *db_path;
  double started;           /* unix seconds */
  int quiet;                /* no access log */
} App;

/* routes_core.c: health, metrics, the page. */
double wall_now(void);  /* unix seconds */
void route_healthz(void *app, HttpReq *rq, HttpRes *rs);
void route_metrics(void *app, HttpReq *rq, HttpRes *rs);
int route_static(void *app, HttpReq *rq, HttpRes *rs);
void route_observe(void *app, const char *route, const char *method, int status, double seconds);

#endif
