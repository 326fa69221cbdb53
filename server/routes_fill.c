/* POST /fill-mask: the Hugging Face Inference API's request shape
** ({"inputs": str | [str], "parameters": {"top_k", "targets"}, "model": "name[@rev]"})
** answered exactly as pipeline("fill-mask") does (engine/fillmask.h), over model
** revisions from the store that are loaded once and kept in a small cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/fillmask.h"
#include "server/serve.h"

/* server/cmd_fillmask.c: a pipeline over a store revision. */
FillMask *fillmask_from_store(Store *s, const char *spec, const FillMaskOptions *o, Err *err);

#define FILL_MAX_INPUTS 256

/* A loaded revision. A FillMask holds the model's activation buffers, so one request
** at a time uses it (lock); refs keeps it alive while a request holds it unlocked. */
typedef struct Entry {
  char key[256];            /* "model@commit" */
  FillMask *fm;
  pthread_mutex_t lock;
  int refs;
  double used;
} Entry;

struct FillCache {
  pthread_mutex_t mu;
  pthread_mutex_t load;     /* one load at a time: two requests for a new model load it once */
  Entry **e;
  int n, cap;
};

FillCache *fill_cache_new(int capacity) {
  FillCache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
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
  pthread_mutex_lock(&ent->lock);
  json_t *res = fillmask_call(ent->fm, inputs, json_is_null(params) ? NULL : params, &e);
  char *text = res ? fillmask_dumps(res, 0, 0) : NULL;
  pthread_mutex_unlock(&ent->lock);
  cache_release(a->fill, ent);
  json_decref(res);
  if (!res) {
    http_error(rs, fill_status(e.msg), e.msg, json_pack("{s:s}", "model", ckey));
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
