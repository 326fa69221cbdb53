/* POST /fill-mask: the Hugging Face Inference API's request shape
** ({"inputs": str | [str], "parameters": {"top_k", "targets"}, "model": "name[@rev]"})
** answered exactly as pipeline("fill-mask") does (engine/fillmask.h), over model
** revisions from the store that are loaded once and kept in a small cache. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/fillmask.h"
#include "server/commands.h"
#include "server/serve.h"

/* server/cmd_fillmask.c: a pipeline over a store revision. */

#define FILL_MAX_INPUTS 256

/* One request waiting for a model. */
typedef struct Job {
  const json_t *inputs, *params;
  json_t *result;           /* set when done and it worked */
  char error[512];          /* set when done and it failed */
  int done;
  struct Job *next;
} Job;

/* A loaded revision. A FillMask holds the model's activation buffers, so one thread
** at a time runs it. Requests queue up; whichever finds the model idle takes the
** whole queue and answers it, requests with the same parameters in one padded
** forward pass (the pipeline's answer for each input does not depend on its batch),
** so under load the per-pass overhead is shared instead of paid per request.
** refs keeps the entry alive while requests use it. */
typedef struct Entry {
  char key[256];            /* "model@commit" */
  FillMask *fm;
  pthread_mutex_t lock;     /* guards queue, busy */
  pthread_cond_t cond;
  Job *queue;
  int busy;
  int refs;
  double used;
} Entry;

struct FillCache {
  Metrics *metrics;
  int batch;                /* 0: one request per forward pass */
  int window_us;            /* how long a pass waits for more requests to join it */
  int threads;              /* threads of each loaded model's forward pass */
  pthread_mutex_t mu;
  pthread_mutex_t load;     /* one load at a time: two requests for a new model load it once */
  Entry **e;
  int n, cap;
};

FillCache *fill_cache_new(int capacity, int batch, int window_us, int threads, Metrics *metrics) {
  FillCache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->window_us = batch ? window_us : 0;
  c->metrics = metrics;
  c->batch = batch;
  c->threads = threads;
  c->e = calloc((size_t)capacity, sizeof *c->e);
  if (!c->e) { free(c); return NULL; }
  c->cap = capacity;
  pthread_mutex_init(&c->mu, NULL);
  pthread_mutex_init(&c->load, NULL);
  return c;
}

static void entry_free(Entry *e) {
  fillmask_free(e->fm);
  pthread_mutex_destroy(&e->lock);
  pthread_cond_destroy(&e->cond);
  free(e);
}

void fill_cache_free(FillCache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) entry_free(c->e[i]);
  free(c->e);
  pthread_mutex_destroy(&c->mu);
  pthread_mutex_destroy(&c->load);
  free(c);
}

static double mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static Entry *cache_find(FillCache *c, const char *key) {
  Entry *hit = NULL;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->e[i]->key, key)) { hit = c->e[i]; hit->refs++; hit->used = mono(); break; }
  pthread_mutex_unlock(&c->mu);
  return hit;
}

static void cache_release(FillCache *c, Entry *e) {
  pthread_mutex_lock(&c->mu);
  e->refs--;
  pthread_mutex_unlock(&c->mu);
}

/* Adds a loaded pipeline, evicting the least recently used idle entry when full;
** returns it referenced, or NULL (fm freed) when every entry is in use. */
static Entry *cache_add(FillCache *c, const char *key, FillMask *fm) {
  Entry *e = calloc(1, sizeof *e);
  if (!e) { fillmask_free(fm); return NULL; }
  snprintf(e->key, sizeof e->key, "%s", key);
  e->fm = fm;
  e->refs = 1;
  e->used = mono();
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cond, NULL);
  pthread_mutex_lock(&c->mu);
  if (c->n == c->cap) {
    int victim = -1;
    for (int i = 0; i < c->n; i++)
      if (c->e[i]->refs == 0 && (victim < 0 || c->e[i]->used < c->e[victim]->used)) victim = i;
    if (victim < 0) { pthread_mutex_unlock(&c->mu); entry_free(e); return NULL; }
    entry_free(c->e[victim]);
    c->e[victim] = c->e[--c->n];
  }
  c->e[c->n++] = e;
  pthread_mutex_unlock(&c->mu);
  return e;
}

/* top_k and targets of a parameters object when they are plain (a valid top_k, targets
** a string or a list of strings, nothing else): 1, else 0 (the job then runs alone and
** fillmask_call() words the refusal). */
static int plain_params(const json_t *p, int *top_k, const char **targets, int *nt, int cap) {
  *top_k = FILLMASK_DEFAULT_TOP_K;
  *nt = 0;
  if (!p) return 1;
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)p, k, v) {
    if (!strcmp(k, "top_k") && json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 1000000)
      *top_k = (int)json_integer_value(v);
    else if (!strcmp(k, "targets") && json_is_string(v)) { targets[0] = json_string_value(v); *nt = 1; }
    else if (!strcmp(k, "targets") && json_is_array(v) && json_array_size(v) > 0 && json_array_size(v) <= (size_t)cap) {
      size_t i;
      json_t *x;
      json_array_foreach(v, i, x) {
        if (!json_is_string(x)) return 0;
        targets[i] = json_string_value(x);
      }
      *nt = (int)json_array_size(v);
    } else return 0;
  }
  return 1;
}

static void run_alone(FillMask *fm, Job *j) {
  Err e = {{0}};
  j->result = fillmask_call(fm, j->inputs, j->params, &e);
  if (!j->result) snprintf(j->error, sizeof j->error, "%s", e.msg[0] ? e.msg : "fill-mask failed");
}

/* Answers jobs[0..n), which share plain parameters, with one call: every input in one
** list, then each job's slice (a list of one unwrapped, as the pipeline does). When
** the joint call fails (one input without a mask, say) each job runs alone, so a
** bad request never fails its neighbours. */
static void run_batch(FillMask *fm, Job **jobs, int n) {
  if (n == 1) { run_alone(fm, jobs[0]); return; }
  int top_k, nt, total = 0;
  const char *targets[256];
  plain_params(jobs[0]->params, &top_k, targets, &nt, 256);
  for (int i = 0; i < n; i++) total += json_is_string(jobs[i]->inputs) ? 1 : (int)json_array_size(jobs[i]->inputs);
  const char **texts = malloc(sizeof *texts * (size_t)(total ? total : 1));
  json_t *all = NULL;
  Err e = {{0}};
  if (texts) {
    int k = 0;
    for (int i = 0; i < n; i++) {
      if (json_is_string(jobs[i]->inputs)) texts[k++] = json_string_value(jobs[i]->inputs);
      else for (size_t t = 0; t < json_array_size(jobs[i]->inputs); t++) texts[k++] = json_string_value(json_array_get(jobs[i]->inputs, t));
    }
    all = fillmask_run(fm, texts, total, 1, top_k, nt ? targets : NULL, nt, &e);
  }
  free(texts);
  if (!all || (size_t)total != json_array_size(all)) {
    json_decref(all);
    for (int i = 0; i < n; i++) run_alone(fm, jobs[i]);
    return;
  }
  int k = 0;
  for (int i = 0; i < n; i++) {
    Job *j = jobs[i];
    if (json_is_string(j->inputs)) { j->result = json_incref(json_array_get(all, (size_t)k++)); continue; }
    size_t m = json_array_size(j->inputs);
    if (m == 1) { j->result = json_incref(json_array_get(all, (size_t)k++)); continue; }
    j->result = json_array();
    for (size_t t = 0; t < m; t++) json_array_append(j->result, json_array_get(all, (size_t)k++));
  }
  json_decref(all);
}

/* Answers a list of taken jobs: batchable ones grouped by their parameters. */
static void answer(FillCache *c, FillMask *fm, Job *list) {
  Job *group[64];
  while (list) {
    int top_k, nt;
    const char *targets[256];
    Job *j = list;
    list = list->next;
    int empty_list = json_is_array(j->inputs) && json_array_size(j->inputs) == 0;
    if (!c->batch || empty_list || !plain_params(j->params, &top_k, targets, &nt, 256)) {
      run_alone(fm, j);
      metrics_fill_pass(c->metrics, 1);
      continue;
    }
    int n = 0;
    group[n++] = j;
    /* Pull every later job with the same parameters out of the list. */
    Job **pp = &list;
    while (*pp && n < 64) {
      Job *o = *pp;
      int same = (o->params == NULL && j->params == NULL) ||
                 (o->params && j->params && json_equal((json_t *)o->params, (json_t *)j->params));
      int ok = same && !(json_is_array(o->inputs) && json_array_size(o->inputs) == 0);
      if (ok) { group[n++] = o; *pp = o->next; }
      else pp = &o->next;
    }
    run_batch(fm, group, n);
    metrics_fill_pass(c->metrics, n);
  }
}

/* Queues a job on the entry and returns 0 once it is answered, or -1 when
** deadline (CLOCK_REALTIME; 0: none) passed while it still waited in the queue:
** it is then taken out, unanswered. A job already taken into a pass is answered
** whatever the time: the forward pass has no point where it could stop, and its
** length is bounded by the input limits (max positions, FILL_MAX_INPUTS). */
static int submit(FillCache *c, Entry *e, Job *job, double deadline) {
  pthread_mutex_lock(&e->lock);
  Job **tail = &e->queue;
  while (*tail) tail = &(*tail)->next;
  *tail = job;
  while (!job->done) {
    if (e->busy) {
      if (deadline <= 0) { pthread_cond_wait(&e->cond, &e->lock); continue; }
      struct timespec ts = {(time_t)deadline, (long)((deadline - (double)(time_t)deadline) * 1e9)};
      if (pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT || job->done) continue;
      Job **pp = &e->queue;
      while (*pp && *pp != job) pp = &(*pp)->next;
      if (!*pp) continue;  /* taken into the running pass: it will be answered */
      *pp = job->next;
      pthread_mutex_unlock(&e->lock);
      return -1;
    }
    e->busy = 1;
    if (c->window_us > 0) {  /* let more requests join this pass */
      pthread_mutex_unlock(&e->lock);
      usleep((useconds_t)c->window_us);
      pthread_mutex_lock(&e->lock);
    }
    Job *taken = e->queue;
    e->queue = NULL;
    pthread_mutex_unlock(&e->lock);
    /* The list is private now; remember its members, answer() relinks them. */
    int n = 0;
    for (Job *j = taken; j; j = j->next) n++;
    Job **members = malloc(sizeof *members * (size_t)n);
    if (members) {
      n = 0;
      for (Job *j = taken; j; j = j->next) members[n++] = j;
      /* OpenMP's thread count is a per-thread setting, and each connection has its
      ** own thread: set it in the one that runs the pass. */
      model_set_threads(fillmask_model(e->fm), c->threads);
      answer(c, e->fm, taken);
    } else {
      for (Job *j = taken; j; j = j->next) snprintf(j->error, sizeof j->error, "out of memory");
    }
    pthread_mutex_lock(&e->lock);
    if (members) for (int i = 0; i < n; i++) members[i]->done = 1;
    else for (Job *j = taken; j; j = j->next) j->done = 1;
    free(members);
    e->busy = 0;
    pthread_cond_broadcast(&e->cond);
  }
  pthread_mutex_unlock(&e->lock);
  return 0;
}

/* The spec of the model to use: the request's, the server's default, or the newest
** revision of the most recently pushed model. */
static int pick_model(App *a, Store *s, const char *given, char *spec, size_t cap, Err *err) {
  if (given) { snprintf(spec, cap, "%s", given); return 0; }
  if (a->default_model) { snprintf(spec, cap, "%s", a->default_model); return 0; }
  json_t *models = store_models_list(s, err);
  if (!models) return -1;
  const char *best = NULL;
  double best_t = -1;
  size_t i;
  json_t *m;
  json_array_foreach(models, i, m) {
    json_t *t = json_object_get(m, "last_created");
    if (json_is_number(t) && json_number_value(t) > best_t) {
      best_t = json_number_value(t);
      best = json_string_value(json_object_get(m, "name"));
    }
  }
  if (best) snprintf(spec, cap, "%s", best);
  json_decref(models);
  return best ? 0 : err_set(err, "the store holds no model yet: train one (POST /runs) or import one");
}

/* Errors of the request's shape name a field and are 422; the rest (no mask, too
** long, unknown target) are about the text and are 400. */
static int fill_status(const char *msg) {
  return !strncmp(msg, "inputs", 6) || !strncmp(msg, "parameters", 10) || !strncmp(msg, "top_k", 5) ? 422 : 400;
}

void route_fill_mask(void *app, HttpReq *rq, HttpRes *rs) {
  App *a = app;
  json_t *body = http_body_object(rq, rs);
  if (!body) return;
  const char *key;
  json_t *v;
  json_object_foreach(body, key, v) {
    if (strcmp(key, "inputs") && strcmp(key, "parameters") && strcmp(key, "model") && strcmp(key, "options")) {
      http_error(rs, 422, "unknown field (inputs, parameters, model, options)", json_pack("{s:s}", "field", key));
      json_decref(body);
      return;
    }
  }
  json_t *inputs = json_object_get(body, "inputs"), *params = json_object_get(body, "parameters");
  json_t *model = json_object_get(body, "model");
  if (!inputs) {
    http_error(rs, 422, "missing field 'inputs'", json_pack("{s:s}", "field", "inputs"));
  } else if (!json_is_string(inputs) && !json_is_array(inputs)) {
    http_error(rs, 422, "field 'inputs' must be a string or a list of strings",
               json_pack("{s:s, s:s}", "field", "inputs", "got", http_json_type(inputs)));
  } else if (json_is_array(inputs) && json_array_size(inputs) > FILL_MAX_INPUTS) {
    http_error(rs, 422, "too many inputs in one request",
               json_pack("{s:s, s:i}", "field", "inputs", "max", FILL_MAX_INPUTS));
  } else if (model && !json_is_string(model)) {
    http_error(rs, 422, "field 'model' must be a string \"name[@revision]\"",
               json_pack("{s:s, s:s}", "field", "model", "got", http_json_type(model)));
  } else if (params && !json_is_object(params) && !json_is_null(params)) {
    http_error(rs, 422, "field 'parameters' must be an object",
               json_pack("{s:s, s:s}", "field", "parameters", "got", http_json_type(params)));
  }
  if (rs->status) { json_decref(body); return; }

  double t0 = mono();
  Err e = {{0}};
  Store *s = app_store(a, rs);
  if (!s) { json_decref(body); return; }
  char spec[300];
  StoreRevision r;
  if (pick_model(a, s, model ? json_string_value(model) : NULL, spec, sizeof spec, &e)) {
    http_error(rs, 404, "no model to fill masks with", json_string(e.msg));
    goto out;
  }
  if (store_resolve(s, spec, &r, &e)) {
    http_error(rs, 404, "unknown model or revision", json_pack("{s:s, s:s}", "model", spec, "why", e.msg));
    goto out;
  }
  char ckey[256];
  snprintf(ckey, sizeof ckey, "%s@%s", r.model, r.commit);
  Entry *ent = cache_find(a->fill, ckey);
  if (!ent) {
    pthread_mutex_lock(&a->fill->load);
    ent = cache_find(a->fill, ckey);  /* another request may have loaded it meanwhile */
    if (!ent) {
      FillMask *fm = fillmask_from_store(s, ckey, NULL, &e);
      if (fm) model_set_threads(fillmask_model(fm), a->fill->threads);
      if (!fm) {
        pthread_mutex_unlock(&a->fill->load);
        http_error(rs, 500, "cannot load the model", json_pack("{s:s, s:s}", "model", ckey, "why", e.msg));
        goto out;
      }
      ent = cache_add(a->fill, ckey, fm);
    }
    pthread_mutex_unlock(&a->fill->load);
    if (!ent) { http_error(rs, 503, "every cached model is busy; try again", NULL); goto out; }
  }
  store_close(s);
  s = NULL;
  Job job;
  memset(&job, 0, sizeof job);
  job.inputs = inputs;
  job.params = json_is_null(params) ? NULL : params;
  double deadline = a->request_timeout > 0 ? wall_now() + a->request_timeout - (mono() - t0) : 0;
  int late = submit(a->fill, ent, &job, deadline);
  cache_release(a->fill, ent);
  json_t *res = job.result;
  char *text = res ? fillmask_dumps(res, 0, 0) : NULL;
  json_decref(res);
  if (late) {
    http_error(rs, 503, "the model was busy past the request time limit; try again",
               json_pack("{s:s, s:f}", "model", ckey, "timeout_s", a->request_timeout));
  } else if (!res) {
    http_error(rs, fill_status(job.error), job.error, json_pack("{s:s}", "model", ckey));
  } else if (!text) {
    http_error(rs, 500, "cannot write the answer", NULL);
  } else {
    free(rs->body);
    rs->body = text;
    rs->len = strlen(text);
    rs->status = 200;
    rs->content_type = "application/json";
    metrics_fill_mask(a->metrics, mono() - t0);
  }
out:
  store_close(s);
  json_decref(body);
}
