/* Runs and models over the store: GET /runs, /runs/{id}, /runs/{id}/metrics,
** /runs/{id}/events (server-sent events), /models, /models/{name}. A revision's files
** (/models/{name}/resolve/...) are the Hub protocol's: routes_hub.c. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/buf.h"
#include "engine/core/now.h"
#include "server/app/app.h"

static int terminal(const char *status) {
  StoreStatus st;
  return store_status_parse(status, &st) == 0 && store_status_ended(st);
}

static double num(const json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_number(v) ? json_number_value(v) : NAN;
}

static void set_num(json_t *o, const char *k, double v) {
  json_object_set_new(o, k, isfinite(v) ? json_real(v) : json_null());
}

/* The run named by the path's first parameter (id or name); answers 404 and returns -1 if none. */
static int64_t path_run(Store *s, HttpReq *rq, HttpRes *rs) {
  Err e = {0};
  int64_t id = store_run_find(s, rq->params[0], &e);
  if (id < 1) http_error_from(rs, &e, "no such run", json_pack("{s:s, s:s}", "run", rq->params[0], "why", e.msg));
  return id;
}

/* The lowest validation loss over a run's epochs (NaN when none). */
static double best_eval_loss(const json_t *metrics) {
  double best = NAN;
  size_t i;
  json_t *ep;
  json_array_foreach(json_object_get(metrics, "epochs"), i, ep) {
    double v = num(ep, "eval_loss");
    if (isfinite(v) && !(v >= best)) best = v;
  }
  return best;
}

/* What the table and the run page show beyond the stored row: the model's preset or
** config file, the best validation loss, the duration, and from the newest steps the
** loss, tokens/s and an ETA from the recent step rate. */
static void run_summary(Store *s, json_t *run, int64_t id, double now) {
  Err e = {0};
  int64_t step = (int64_t)json_integer_value(json_object_get(run, "step"));
  /* The newest ETA_WINDOW steps: more than two of maskd train's blocks of metrics (64
  ** steps at most, or 5 s), so that a rate from the end of the window's first block to
  ** its last row spans at least one whole block. */
  enum { ETA_WINDOW = 200 };
  json_t *m = store_run_metrics(s, id, step > ETA_WINDOW ? step - ETA_WINDOW : 0, &e);
  json_t *epochs_only = store_run_metrics(s, id, INT64_MAX, &e);
  set_num(run, "best_eval_loss", best_eval_loss(epochs_only));
  json_decref(epochs_only);
  json_t *steps = json_object_get(m, "steps");
  size_t n = json_array_size(steps);
  double loss = NAN, tps = NAN, eta = NAN;
  /* Only the steps recorded since the run's process took it count (when the store
  ** knows when: runs.claimed): a resumed run's window held steps from before it
  ** stopped, and after a kill -9 steps past its checkpoint, recorded before, stay in the
  ** store until it trains them again. */
  double claimed = num(run, "claimed");
  size_t f = 0, l = n;   /* the rows since the claim: [f, l) in step order */
  if (isfinite(claimed)) {
    while (f < n && num(json_array_get(steps, f), "time") < claimed) f++;
    l = f;
    while (l < n && num(json_array_get(steps, l), "time") >= claimed) l++;
    if (f == l) f = 0, l = n;   /* none yet: the newest there are */
  }
  if (l > f) {
    json_t *last = json_array_get(steps, l - 1), *first = json_array_get(steps, f);
    loss = num(last, "loss");
    tps = num(last, "tokens_per_s");
    /* Step metrics are written in blocks that share a time, the block's last step's: the
    ** rate runs from the end of the first block (from its first row, the steps of that
    ** block done before its time counted as done after it, and an ETA of 1 s was 8). */
    size_t g = f;
    while (g + 1 < l && num(json_array_get(steps, g + 1), "time") == num(first, "time")) g++;
    json_t *anchor = json_array_get(steps, g);
    double dt = num(last, "time") - num(anchor, "time");
    double ds = num(last, "step") - num(anchor, "step");
    double total = num(run, "total_steps");
    StoreStatus status = STORE_STATUS_COUNT;
    store_status_parse(json_string_value(json_object_get(run, "status")), &status);
    /* One block since the claim: the rate since the claim over the steps trained since
    ** (the window reaches back to the claim: it holds more than a block), or, for a
    ** store of an older version with no claim, since the run started. */
    if (!(ds > 0 && dt > 0)) {
      int since_claim = isfinite(claimed) && num(first, "time") >= claimed && f > 0;
      dt = num(last, "time") - (since_claim ? claimed : num(run, "started"));
      ds = since_claim ? num(last, "step") - num(first, "step") + 1 : num(last, "step");
    }
    if (ds > 0 && dt > 0 && isfinite(total) && status == STORE_STATUS_RUNNING)
      eta = (total - num(last, "step")) * dt / ds;
  }
  json_decref(m);
  json_object_del(run, "claimed");   /* the store's bookkeeping, not the API's */
  set_num(run, "loss", loss);
  set_num(run, "tokens_per_s", tps);
  set_num(run, "eta_s", eta);
  double started = num(run, "started"), finished = num(run, "finished");
  set_num(run, "duration_s", isfinite(started) ? (isfinite(finished) ? finished : now) - started : NAN);
  json_t *cfg = json_object_get(run, "config");
  json_t *model = json_object_get(cfg, "config");
  /* A fine-tuning run names its task, and its model is the base it started from. */
  json_t *task = json_object_get(cfg, "task");
  if (json_is_string(task)) {
    json_object_set(run, "task", task);
    model = json_object_get(cfg, "model");
  }
  if (json_is_string(model)) json_object_set(run, "model", model);
}

/* Runs whose process is gone (a maskd train killed outright) are marked interrupted
** before any is reported, as `maskd runs` does: else the API showed one running, its
** ETA frozen, and refused to resume it. A read unless one is found; best effort. */
static void recover_runs(Store *s) {
  Err e = {0};
  store_runs_recover(s, NULL, &e);
}

void route_runs(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  recover_runs(s);
  Err e = {0};
  json_t *runs = store_runs_list(s, &e);
  if (!runs) { http_error_from(rs, &e, "cannot list runs", json_string(e.msg)); return; }
  double now = now_wall();
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) {
    int64_t id = (int64_t)json_integer_value(json_object_get(r, "id"));
    json_t *full = store_run_get(s, id, &e);
    if (full) json_object_set(r, "config", json_object_get(full, "config"));
    if (full) json_object_set(r, "claimed", json_object_get(full, "claimed"));   /* for the ETA */
    json_decref(full);
    run_summary(s, r, id, now);
    json_object_del(r, "config");
  }
  http_json(rs, 200, workspace_scrub_json(&((App *)app)->ws, runs));
}

/* The revisions a run pushed, newest first. */
static json_t *run_revisions(Store *s, const char *model, int64_t id) {
  Err e = {0};
  json_t *out = json_array();
  json_t *m = store_model_get(s, model, &e);
  size_t i;
  json_t *rev;
  json_array_foreach(json_object_get(m, "revisions"), i, rev)
    if (json_integer_value(json_object_get(rev, "run")) == id) json_array_append(out, rev);
  json_decref(m);
  return out;
}

void route_run(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  int64_t id = path_run(s, rq, rs);
  if (id < 1) { return; }
  recover_runs(s);
  Err e = {0};
  json_t *run = store_run_get(s, id, &e);
  if (!run) { http_error_from(rs, &e, "cannot read the run", json_string(e.msg)); return; }
  run_summary(s, run, id, now_wall());
  const char *name = json_string_value(json_object_get(run, "name"));
  json_object_set_new(run, "revisions", run_revisions(s, name ? name : "", id));
  http_json(rs, 200, workspace_scrub_json(&((App *)app)->ws, run));
}

void route_run_metrics(void *app, HttpReq *rq, HttpRes *rs) {
  const char *since = http_query(rq, "since");
  long long since_step = 0;
  if (since) {
    char *end;
    errno = 0;   /* past INT64_MAX strtoll answers INT64_MAX, the store's "epochs only" */
    since_step = strtoll(since, &end, 10);
    if (!*since || *end || errno || since_step < 0) {
      http_error(rs, 400, "query parameter 'since' must be a step number >= 0", json_pack("{s:s}", "since", since));
      return;
    }
  }
  Store *s = app_store(app, rs);
  if (!s) return;
  int64_t id = path_run(s, rq, rs);
  if (id < 1) { return; }
  Err e = {0};
  json_t *m = store_run_metrics(s, id, since_step, &e);
  if (!m) { http_error_from(rs, &e, "cannot read metrics", json_string(e.msg)); return; }
  http_json(rs, 200, m);
}

/* ---- GET /runs/{id}/events: one "progress" event whenever the run's row changes,
** a "metrics" event with the steps and epochs recorded since the last one, and an
** "end" event once the run has finished; comments keep the connection alive. ---- */

typedef struct Events {
  App *app;
  int64_t run;
  int64_t since;            /* last step sent */
  size_t epochs_sent;
  char *last_progress;      /* last progress JSON sent, to send changes only */
  int ended;
  int quiet;                /* polls in a row that found nothing to send */
  double polled;            /* when the store was last polled (monotonic seconds) */
  Buf pending;              /* text not yet handed out: pending.p[pending_off, pending.len) */
  size_t pending_off;
} Events;

static void events_free(void *ctx) {
  Events *ev = ctx;
  free(ev->last_progress);
  buf_free(&ev->pending);
  free(ev);
}

static void append(Events *ev, const char *event, const char *data) {
  buf_printf(&ev->pending, "event: %s\ndata: %s\n\n", event, data);
}

/* Polls the store once and queues the events that are due. */
static void events_poll(Events *ev) {
  Err e = {0};
  Store *s = app_thread_store(ev->app, &e);
  if (!s) { append(ev, "error", "{\"error\":\"cannot open the store\"}"); ev->ended = 1; return; }
  recover_runs(s);   /* a run whose process was killed outright ends its page's stream */
  json_t *run = store_run_get(s, ev->run, &e);
  if (!run) { append(ev, "error", "{\"error\":\"the run is gone\"}"); ev->ended = 1; return; }
  json_t *m = store_run_metrics(s, ev->run, ev->since, &e);
  run_summary(s, run, ev->run, now_wall());
  /* A run cancelled over HTTP is first "interrupted" by its own process, then
  ** "cancelled" by the worker once that process has exited: the stream ends only
  ** when no job still works on the run, so the page sees the final status. */
  int working = store_run_has_running_job(s, ev->run, &e) == 1;
  json_object_del(run, "config");
  json_object_del(run, "duration_s");  /* changes every second; the page computes it */
  workspace_scrub_json(&ev->app->ws, run);
  char *prog = json_dumps(run, JSON_COMPACT | JSON_SORT_KEYS);
  if (prog && (!ev->last_progress || strcmp(prog, ev->last_progress))) {
    append(ev, "progress", prog);
    free(ev->last_progress);
    ev->last_progress = prog;
  } else {
    free(prog);
  }
  json_t *steps = json_object_get(m, "steps"), *epochs = json_object_get(m, "epochs");
  if (json_array_size(steps) || json_array_size(epochs) > ev->epochs_sent) {
    json_t *out = json_pack("{s:O, s:[]}", "steps", steps, "epochs");
    for (size_t i = ev->epochs_sent; i < json_array_size(epochs); i++)
      json_array_append(json_object_get(out, "epochs"), json_array_get(epochs, i));
    ev->epochs_sent = json_array_size(epochs);
    size_t n = json_array_size(steps);
    if (n) ev->since = (int64_t)json_integer_value(json_object_get(json_array_get(steps, n - 1), "step"));
    char *t = json_dumps(out, JSON_COMPACT);
    if (t) append(ev, "metrics", t);
    free(t);
    json_decref(out);
  }
  if (terminal(json_string_value(json_object_get(run, "status"))) && !working) {
    append(ev, "end", "{}");
    ev->ended = 1;
  }
  json_decref(m);
  json_decref(run);
}

/* The layer calls this on a handler thread, again about a second after it returned 0
** (server/http/http.h): at most one poll of the store a second, a keep-alive comment after
** three quiet polls so a gone client is noticed, -1 once the end was handed out. */
static ssize_t events_read(void *ctx, char *buf, size_t max) {
  Events *ev = ctx;
  if (ev->pending_off == ev->pending.len) {
    buf_free(&ev->pending);
    ev->pending_off = 0;
    if (ev->ended || http_stopping(ev->app->http)) return -1;
    double t = now_monotonic();
    if (t - ev->polled < 0.9) return 0;  /* just sent what the last poll found */
    ev->polled = t;
    events_poll(ev);
    if (ev->pending.len == 0) {
      if (++ev->quiet < 3) return 0;
      ev->quiet = 0;
      return snprintf(buf, max, ": keep-alive\n\n");
    }
    ev->quiet = 0;
  }
  size_t n = ev->pending.len - ev->pending_off;
  if (n > max) n = max;
  memcpy(buf, ev->pending.p + ev->pending_off, n);
  ev->pending_off += n;
  return (ssize_t)n;
}

void route_run_events(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  int64_t id = path_run(s, rq, rs);
  if (id < 1) return;
  Events *ev = calloc(1, sizeof *ev);
  if (!ev) { http_error(rs, 500, "out of memory", NULL); return; }
  ev->app = app;
  ev->run = id;
  rs->status = 200;
  rs->content_type = "text/event-stream";
  rs->stream = events_read;
  rs->stream_ctx = ev;
  rs->stream_free = events_free;
}

/* ---- models ---- */

void route_models(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  json_t *m = store_models_list(s, &e);
  if (!m) { http_error_from(rs, &e, "cannot list models", json_string(e.msg)); return; }
  http_json(rs, 200, m);
}

void route_model(void *app, HttpReq *rq, HttpRes *rs) {
  Store *s = app_store(app, rs);
  if (!s) return;
  Err e = {0};
  char name[260];
  if (app_path_repo(rq, 0, name, sizeof name)) { http_error(rs, 404, "no such model (the name is too long)", NULL); return; }
  json_t *m = store_model_get(s, name, &e);
  if (!m) { http_error_from(rs, &e, "no such model", json_pack("{s:s, s:s}", "model", name, "why", e.msg)); return; }
  http_json(rs, 200, m);
}
