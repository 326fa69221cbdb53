/* POST /fill-mask: the Hugging Face Inference API's request shape
** ({"inputs": str | [str], "parameters": {"top_k", "targets"}, "model": "name[@rev]"})
** answered exactly as pipeline("fill-mask") does (engine/infer/fillmask.h), over model
** revisions from the store that are loaded once and kept in a small cache. The same
** cache, queues and request path serve POST /text-classification and POST
** /models/{name} (routes_textclass.c): an entry holds a loaded revision with the
** pipeline of its task, fill-mask or text-classification.
**
** A request is parsed, encoded and checked against the limits in its own thread
** (fillmask_prepare: every refusal happens there, before any model work), then
** queued on its model. Each loaded model has one runner thread that answers the
** queue in arrival order: a pass takes the oldest requests up to a token budget
** and runs them through shared padded forward passes (fillmask_answer). A request
** is never overtaken by a later one, and the wait behind a pass is bounded by the
** budget, so latency under load is even: p99 within a small factor of p50. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/infer/fillmask.h"
#include "engine/infer/textclass.h"
#include "engine/core/now.h"
#include "store/load.h"
#include "server/app/fill_queue.h"
#include "server/app/app.h"

/* Tokens one pass may carry when --max-tokens sets no limit (else that limit). */
#define FILL_PASS_TOKENS 512
/* Requests one pass may carry. */
#define FILL_PASS_REQUESTS 64

/* One request waiting for its model. */
typedef struct Job {
  void *req;                /* a FillMaskRequest or a TextClassRequest, by its entry's pipeline */
  json_t *result;           /* when answered: the answer, or NULL and fe says why */
  FillMaskError fe;
} Job;

/* A loaded revision and its queue. refs keeps the entry alive while requests use
** it; an entry with no refs has an empty queue and may be evicted. */
typedef struct Entry {
  char key[256];            /* "model@commit" */
  ModelPrecision weights;   /* how fm keeps its weights: part of the key, so a revision is never
                            ** answered at a precision it was not asked at */
  AppPipeline kind;         /* which of fm and tc is loaded: part of the key too */
  FillMask *fm;
  TextClass *tc;
  struct FillCache *cache;
  FillQueue *queue;
  int refs;                 /* guarded by the cache's mu */
  double used;
} Entry;

struct FillCache {
  Metrics *metrics;
  FillMaskLimits limits;    /* every loaded pipeline checks requests against these */
  TextClassLimits tc_limits;  /* and every loaded text classifier against these */
  int batch;                /* 0: one request per pass */
  int window_us;            /* how long a pass waits for more requests to join it */
  int threads;              /* threads of each loaded model's forward pass */
  long pass_tokens;         /* a pass takes requests up to this many tokens (at least one request) */
  pthread_mutex_t mu;       /* guards e, n, refs, used */
  pthread_cond_t idle;      /* signalled (with mu) when an entry's last reference is released */
  pthread_mutex_t load;     /* one load at a time: two requests for a new model load it once */
  pthread_mutex_t store_mu; /* guards store */
  Store *store;             /* the connection that resolves models, kept open: opening the
                            ** store per request cost more than the pass under load (SQLite
                            ** opens and closes contend; p99 over 1 s at 64 clients) */
  Entry **e;
  int n, cap;
  ModelPrecision precision;      /* weights of a model not named in models */
  char **models;                 /* repository names with a precision of their own, at per[i] */
  ModelPrecision *per;
  int n_models;
  /* The pipeline of recently asked commits (a commit's config never changes), for the
  ** default of a request that names no model: reading each config per request cost
  ** 1.5-2 ms (guarded by store_mu, as the store). */
  struct { char commit[41]; AppPipeline pipeline; } memo[64];
  int n_memo, next_memo;
};

FillCache *fill_cache_new(int capacity, int batch, int window_us, int threads, const FillMaskLimits *limits,
                          Metrics *metrics) {
  FillCache *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->window_us = batch ? window_us : 0;
  c->metrics = metrics;
  c->batch = batch;
  c->threads = threads;
  c->limits = *limits;
  TextClassOptions tco;
  textclass_options_default(&tco);
  c->tc_limits = tco.limits;
  c->pass_tokens = limits->max_tokens > 0 ? limits->max_tokens : FILL_PASS_TOKENS;
  c->e = calloc((size_t)capacity, sizeof *c->e);
  if (!c->e) { free(c); return NULL; }
  c->cap = capacity;
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t ca;   /* deadlines are now_monotonic()'s */
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->idle, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&c->load, NULL);
  pthread_mutex_init(&c->store_mu, NULL);
  return c;
}

int fill_cache_set_precision(FillCache *c, ModelPrecision def, const char *const *models, const ModelPrecision *per, int n) {
  c->precision = def;
  if (n <= 0) return 0;
  c->models = calloc((size_t)n, sizeof *c->models);
  c->per = calloc((size_t)n, sizeof *c->per);
  if (!c->models || !c->per) return -1;
  for (int i = 0; i < n; i++) {
    if (!(c->models[i] = strdup(models[i]))) return -1;
    c->per[i] = per[i];
    c->n_models = i + 1;
  }
  return 0;
}

void fill_cache_set_textclass_limits(FillCache *c, const TextClassLimits *limits) { c->tc_limits = *limits; }

ModelPrecision fill_cache_precision_of(const FillCache *c, const char *model) {
  /* The last naming wins, as a repeated flag's last value does. */
  for (int i = c->n_models - 1; i >= 0; i--)
    if (!strcmp(c->models[i], model)) return c->per[i];
  return c->precision;
}

/* The default only: /healthz is open to clients without the token and runs on the
** event loop, so it names no repository (--auth-reads hides them) and takes no lock
** (the cache's is held while a model is evicted). The startup line gives the rest. */
json_t *fill_precision_json(const FillCache *c) {
  return json_pack("{s:s}", "default", model_precision_name(c->precision));
}

json_t *textclass_limits_json(const FillCache *c) {
  return json_pack("{s:i, s:i}", "max_inputs", c->tc_limits.max_inputs, "max_tokens", c->tc_limits.max_tokens);
}

json_t *fill_limits_json(const FillCache *c) {
  return json_pack("{s:i, s:i, s:i, s:i, s:I}", "max_inputs", c->limits.max_inputs, "max_tokens", c->limits.max_tokens,
                   "max_masks", c->limits.max_masks, "max_top_k", c->limits.max_top_k, "max_answer_bytes",
                   (json_int_t)c->limits.max_answer_bytes);
}

/* A pass, in the entry's runner thread: the requests share padded forward passes. */
static void answer_pass(void *ctx, FillJob *const *jobs, int n) {
  Entry *e = ctx;
  void *reqs[FILL_PASS_REQUESTS];
  json_t *results[FILL_PASS_REQUESTS];
  FillMaskError errors[FILL_PASS_REQUESTS];
  for (int i = 0; i < n; i++) reqs[i] = ((Job *)jobs[i]->data)->req;
  /* The count is the model's own (its passes pass it on): no other model or thread sees it. */
  if (e->kind == APP_TEXT_CLASSIFICATION) {
    model_set_threads(textclass_model(e->tc), e->cache->threads);
    textclass_answer(e->tc, (TextClassRequest *const *)reqs, n, results, errors);
  } else {
    model_set_threads(fillmask_model(e->fm), e->cache->threads);
    fillmask_answer(e->fm, (FillMaskRequest *const *)reqs, n, results, errors);
  }
  for (int i = 0; i < n; i++) {
    Job *j = jobs[i]->data;
    j->result = results[i];
    j->fe = errors[i];
  }
  if (e->kind == APP_TEXT_CLASSIFICATION) metrics_textclass_pass(e->cache->metrics, n);
  else metrics_fill_pass(e->cache->metrics, n);
}

static void entry_free(Entry *e) {
  fill_queue_stop(e->queue);
  fillmask_free(e->fm);
  textclass_free(e->tc);
  free(e);
}

void fill_cache_free(FillCache *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) entry_free(c->e[i]);
  free(c->e);
  store_close(c->store);
  for (int i = 0; i < c->n_models; i++) free(c->models[i]);
  free(c->models);
  free(c->per);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->idle);
  pthread_mutex_destroy(&c->load);
  pthread_mutex_destroy(&c->store_mu);
  free(c);
}

static Entry *cache_find(FillCache *c, const char *key, ModelPrecision weights, AppPipeline kind) {
  Entry *hit = NULL;
  pthread_mutex_lock(&c->mu);
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->e[i]->key, key) && c->e[i]->weights == weights && c->e[i]->kind == kind) { hit = c->e[i]; hit->refs++; hit->used = now_monotonic(); break; }
  pthread_mutex_unlock(&c->mu);
  return hit;
}

static void cache_release(FillCache *c, Entry *e) {
  pthread_mutex_lock(&c->mu);
  if (--e->refs == 0) pthread_cond_broadcast(&c->idle);
  pthread_mutex_unlock(&c->mu);
}

/* Makes room for one more entry before a load (the caller holds c->load, so nothing
** else adds one until it does): when the cache is full, evicts the least recently used
** idle entry, waiting for one to become idle while every entry is in use, as a request
** waits behind a busy model. So a load is never thrown away for want of a place (with
** --cache 2 and three models in use, 15% of requests were 503 after a whole load), and
** --cache N models at most are in memory, the one loading included. 0, or -1 when
** deadline (now_monotonic seconds; 0: none) passed first. */
static int cache_make_room(FillCache *c, double deadline) {
  int rc = 0;
  pthread_mutex_lock(&c->mu);
  while (c->n == c->cap) {
    int victim = -1;
    for (int i = 0; i < c->n; i++)
      if (c->e[i]->refs == 0 && (victim < 0 || c->e[i]->used < c->e[victim]->used)) victim = i;
    if (victim >= 0) {
      entry_free(c->e[victim]);   /* no refs: its queue is empty and its runner idle */
      c->e[victim] = c->e[--c->n];
      break;
    }
    if (deadline <= 0) { pthread_cond_wait(&c->idle, &c->mu); continue; }
    struct timespec ts = {(time_t)deadline, (long)((deadline - (double)(time_t)deadline) * 1e9)};
    if (pthread_cond_timedwait(&c->idle, &c->mu, &ts) == ETIMEDOUT) { rc = -1; break; }
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* Adds a loaded pipeline (fm or tc, by kind) with its queue, evicting the least
** recently used idle entry when full (cache_make_room has made room before the load:
** this is for a caller that did not); returns it referenced, or NULL (the pipeline
** freed) when every entry is in use or the queue's thread cannot start. */
static Entry *cache_add(FillCache *c, const char *key, ModelPrecision weights, AppPipeline kind, FillMask *fm,
                        TextClass *tc) {
  Entry *e = calloc(1, sizeof *e);
  if (!e) { fillmask_free(fm); textclass_free(tc); return NULL; }
  snprintf(e->key, sizeof e->key, "%s", key);
  e->weights = weights;
  e->kind = kind;
  e->fm = fm;
  e->tc = tc;
  e->cache = c;
  e->refs = 1;
  e->used = now_monotonic();
  if (!(e->queue = fill_queue_start(answer_pass, e, c->batch ? FILL_PASS_REQUESTS : 1, c->pass_tokens, c->window_us, NULL))) {
    fillmask_free(fm);
    textclass_free(tc);
    free(e);
    return NULL;
  }
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

/* Why there is no model to answer kind with: none at all (-1, ERR_NOT_FOUND), or a
** training job queued or running that will push the first one (-2, the message
** saying where it is): `make run` serves while its demonstration model trains. A
** fine-tuning job (its params have a "task") makes a text classifier, any other
** train job a masked LM. */
static int no_model_yet(Store *s, AppPipeline kind, Err *err) {
  json_t *jobs = store_jobs_list(s, err);
  size_t i;
  json_t *j;
  const char *why = NULL;
  int64_t run = 0;
  json_array_foreach(jobs, i, j) {
    const char *st = json_string_value(json_object_get(j, "status"));
    if (strcmp(json_string_value(json_object_get(j, "kind")), "train") || !st || (strcmp(st, "running") && strcmp(st, "queued")))
      continue;
    int finetune = json_object_get(json_object_get(j, "params"), "task") != NULL;   /* (params: decoded by the store) */
    if (finetune != (kind == APP_TEXT_CLASSIFICATION)) continue;
    why = st;
    run = json_integer_value(json_object_get(j, "run"));
    break;
  }
  int rc;
  const char *task = app_pipeline_name(kind == APP_TEXT_CLASSIFICATION ? APP_TEXT_CLASSIFICATION : APP_FILL_MASK);
  if (!why) {
    rc = err_setk(err, ERR_NOT_FOUND, "the store holds no model yet: train one (POST /runs) or import one");
  } else {
    json_t *r = run > 0 ? store_run_get(s, run, err) : NULL;
    long long total = r ? (long long)json_integer_value(json_object_get(r, "total_steps")) : 0;
    if (total > 0)
      err_setk(err, ERR_CONFLICT, "the first model is still training (run %lld, step %lld of %lld): %s answers from its first revision",
               (long long)run, (long long)json_integer_value(json_object_get(r, "step")), total, task);
    else if (r)
      err_setk(err, ERR_CONFLICT, "the first model's run %lld is starting: %s answers from its first revision", (long long)run, task);
    else
      err_setk(err, ERR_CONFLICT, "the first model's training job is %s: %s answers from its first revision", why, task);
    json_decref(r);
    rc = -2;
  }
  json_decref(jobs);
  return rc;
}

/* The pipeline a revision serves, as its config says (engine/nn/config.c's rule,
** the one loading applies): APP_PIPELINE_ANY for a bare encoder, which serves
** neither, or a spec that does not resolve or whose config does not parse. */
static AppPipeline spec_pipeline(FillCache *c, Store *s, const char *spec) {
  StoreRevision r;
  ModelConfig cfg;
  Err e = {0};
  if (store_resolve(s, spec, &r, &e)) return APP_PIPELINE_ANY;
  for (int i = 0; i < c->n_memo; i++)
    if (!strcmp(c->memo[i].commit, r.commit)) return c->memo[i].pipeline;
  char at[200];
  snprintf(at, sizeof at, "%s@%s", r.model, r.commit);
  if (store_load_config(s, at, &r, &cfg, &e)) return APP_PIPELINE_ANY;   /* (not remembered: a store error may pass) */
  AppPipeline p = cfg.task == MODEL_TASK_SEQ_CLS ? APP_TEXT_CLASSIFICATION
                  : cfg.task == MODEL_TASK_MLM   ? APP_FILL_MASK
                                                 : APP_PIPELINE_ANY;
  int slot = c->n_memo < 64 ? c->n_memo++ : (c->next_memo++ % 64);
  snprintf(c->memo[slot].commit, sizeof c->memo[slot].commit, "%s", r.commit);
  c->memo[slot].pipeline = p;
  return p;
}

/* The spec of the model to use: the request's; else the server's default (--model)
** unless it serves the other task; else the newest revision of the most recently pushed model
** that serves kind. Each route has its own default, as the Inference API has one per
** task: a fine-tuned classifier pushed after a masked LM does not take fill-mask's
** requests that name no model. APP_PIPELINE_ANY (POST /models/{name}) always names one. */
static int pick_model(App *a, Store *s, AppPipeline kind, const char *given, char *spec, size_t cap, Err *err) {
  if (given) { snprintf(spec, cap, "%s", given); return 0; }
  /* A default that does not resolve (or serves nothing) is used anyway: its 404 or
  ** refusal tells the operator, where skipping it would hide the mistake. */
  AppPipeline dp = a->default_model ? spec_pipeline(a->fill, s, a->default_model) : APP_PIPELINE_ANY;
  if (a->default_model && (kind == APP_PIPELINE_ANY || dp == kind || dp == APP_PIPELINE_ANY)) {
    snprintf(spec, cap, "%s", a->default_model);
    return 0;
  }
  json_t *models = store_models_list(s, err);
  if (!models) return -1;
  /* Newest first; a config is read only until one serves kind. */
  json_t *newest = json_array();
  size_t i, j;
  json_t *m;
  json_array_foreach(models, i, m) {
    json_t *t = json_object_get(m, "last_created");
    if (!json_is_number(t)) continue;
    for (j = 0; j < json_array_size(newest); j++)
      if (json_number_value(json_object_get(json_array_get(newest, j), "last_created")) < json_number_value(t)) break;
    json_array_insert(newest, j, m);
  }
  const char *best = NULL;
  int others = 0;
  json_array_foreach(newest, i, m) {
    const char *name = json_string_value(json_object_get(m, "name"));
    if (spec_pipeline(a->fill, s, name) == kind) { best = name; break; }
    others++;
  }
  if (best) snprintf(spec, cap, "%s", best);
  json_decref(newest);
  json_decref(models);
  if (best) return 0;
  /* A job of kind's task coming (503), else none (404, saying what the store holds). */
  int rc = no_model_yet(s, kind, err);
  if (rc == -2 || !others) return rc;
  return err_setk(err, ERR_NOT_FOUND, "the store holds no %s model (%d other model%s): name one with \"model\", or "
                  "train one", app_pipeline_name(kind), others, others == 1 ? "" : "s");
}

/* The cache key "model@commit" of the request's model (given, else kind's default:
** pick_model) into key and the precision
** its repository is served at into *weights; on failure answers (404 for no such
** model, 500 when the store fails) and returns -1. Runs on the cache's own store
** connection. */
static int resolve_model(App *a, AppPipeline kind, const char *given, char *key, size_t cap, ModelPrecision *weights, HttpRes *rs) {
  FillCache *c = a->fill;
  Err e = {0};
  char spec[300];
  StoreRevision r;
  int rc = -1;
  pthread_mutex_lock(&c->store_mu);
  if (!c->store && !(c->store = store_open(a->db_path, &e))) {
    http_error_from(rs, &e, "cannot open the store", json_string(e.msg));
  } else if ((rc = pick_model(a, c->store, kind, given, spec, sizeof spec, &e)) == -2) {
    /* Not an error of the request: the model is coming. 503 with Retry-After, as a
    ** Hub endpoint answers while its model loads. */
    http_error(rs, 503, "no model to answer with yet", json_string(e.msg));
    http_res_header(rs, "Retry-After", "5");
    rc = -1;
  } else if (rc) {
    http_error_from(rs, &e, "no model to answer with", json_string(e.msg));
  } else if ((rc = store_resolve(c->store, spec, &r, &e)) != 0) {
    http_error_from(rs, &e, "unknown model or revision", json_pack("{s:s, s:s}", "model", spec, "why", e.msg));
    rc = -1;
  } else {
    snprintf(key, cap, "%s@%s", r.model, r.commit);
    *weights = fill_cache_precision_of(c, r.model);
    rc = 0;
  }
  pthread_mutex_unlock(&c->store_mu);
  return rc;
}

const char *app_pipeline_name(AppPipeline kind) {
  return kind == APP_TEXT_CLASSIFICATION ? "text-classification" : "fill-mask";
}

/* The loaded pipeline of kind for key, loading it (on a store connection of its own)
** when it is not cached; answers and returns NULL on failure: a revision of the other
** task gets 400, naming the route that answers it. */
static Entry *load_model(App *a, const char *key, ModelPrecision weights, AppPipeline kind, HttpRes *rs) {
  FillCache *c = a->fill;
  Entry *ent = cache_find(c, key, weights, kind);
  if (ent) return ent;
  pthread_mutex_lock(&c->load);
  ent = cache_find(c, key, weights, kind);  /* another request may have loaded it meanwhile */
  if (!ent) {
    Err e = {0};
    /* The wait for a place is a wait behind other models' passes: --request-timeout bounds it. */
    if (cache_make_room(c, a->request_timeout > 0 ? now_monotonic() + a->request_timeout : 0)) {
      pthread_mutex_unlock(&c->load);
      http_error(rs, 503, "every cached model stayed busy past the request time limit; try again",
                 json_pack("{s:s, s:i, s:f}", "model", key, "cache", c->cap, "timeout_s", a->request_timeout));
      http_res_header(rs, "Retry-After", "1");
      return NULL;
    }
    Store *s = app_store(a, rs);
    if (!s) { pthread_mutex_unlock(&c->load); return NULL; }
    FillMask *fm = NULL;
    TextClass *tc = NULL;
    if (kind == APP_TEXT_CLASSIFICATION) {
      TextClassOptions o;
      textclass_options_default(&o);
      o.limits = c->tc_limits;
      o.weights = weights;
      tc = store_load_textclass(s, key, &o, &e);
    } else {
      FillMaskOptions o;
      fillmask_options_default(&o);
      o.limits = c->limits;
      o.weights = weights;
      fm = store_load_fillmask(s, key, &o, &e);
    }
    if (!fm && !tc) {
      pthread_mutex_unlock(&c->load);
      if (e.kind == ERR_BAD_INPUT) {
        /* The revision is another task's: the message says which; the detail, where to ask. */
        AppPipeline other = kind == APP_TEXT_CLASSIFICATION ? APP_FILL_MASK : APP_TEXT_CLASSIFICATION;
        char route[64];
        snprintf(route, sizeof route, "POST /%s", app_pipeline_name(other));
        http_error_from(rs, &e, NULL, json_pack("{s:s, s:s, s:s}", "model", key, "pipeline", app_pipeline_name(other),
                                                "route", route));
      } else {
        http_error_from(rs, &e, "cannot load the model", json_pack("{s:s, s:s}", "model", key, "why", e.msg));
      }
      return NULL;
    }
    if (!(ent = cache_add(c, key, weights, kind, fm, tc))) http_error(rs, 503, "every cached model is busy; try again", NULL);
  }
  pthread_mutex_unlock(&c->load);
  return ent;
}

/* The task of the revision key is for: a loaded entry says it, else its config.json
** (on the cache's store connection). Answers and returns -1 on failure. */
static int model_pipeline(App *a, const char *key, ModelPrecision weights, AppPipeline *kind, HttpRes *rs) {
  FillCache *c = a->fill;
  for (int k = APP_FILL_MASK; k <= APP_TEXT_CLASSIFICATION; k++) {
    Entry *e = cache_find(c, key, weights, (AppPipeline)k);
    if (e) { cache_release(c, e); *kind = (AppPipeline)k; return 0; }
  }
  Err e = {0};
  StoreRevision r;
  ModelConfig cfg;
  int rc;
  pthread_mutex_lock(&c->store_mu);
  rc = c->store ? store_load_config(c->store, key, &r, &cfg, &e) : err_setk(&e, ERR_INTERNAL, "the store is not open");
  pthread_mutex_unlock(&c->store_mu);
  if (rc) {
    http_error_from(rs, &e, "cannot read the model's config", json_pack("{s:s, s:s}", "model", key, "why", e.msg));
    return -1;
  }
  *kind = cfg.task == MODEL_TASK_SEQ_CLS ? APP_TEXT_CLASSIFICATION : APP_FILL_MASK;
  return 0;
}

/* A pipeline refusal answered with the status of its kind (server/http's table: the
** request's shape 422, a text the pipeline refuses 400, a limit 413); a limit's
** answer names the limit and maskd serve's flag for it. */
static void fill_refusal(HttpRes *rs, const FillMaskError *fe, const char *model, AppPipeline kind) {
  json_t *detail = json_pack("{s:s}", "model", model);
  if (fe->err.kind == ERR_TOO_LARGE && fe->limit) {
    /* maskd serve's flag: --max-tokens for fill-mask's max_tokens, --classify-max-tokens for text-classification's. */
    char flag[64];
    int n = snprintf(flag, sizeof flag, "--%s%s", kind == APP_TEXT_CLASSIFICATION ? "classify-" : "", fe->limit);
    for (int i = 2; i < n && i < (int)sizeof flag && flag[i]; i++) if (flag[i] == '_') flag[i] = '-';
    json_object_set_new(detail, "limit", json_string(fe->limit));
    json_object_set_new(detail, "flag", json_string(flag));
    json_object_set_new(detail, "max", json_integer((json_int_t)fe->max));
    json_object_set_new(detail, "got", json_integer((json_int_t)fe->got));
  }
  char failed[64], msg[sizeof fe->err.msg + 48];
  snprintf(failed, sizeof failed, "%s failed", app_pipeline_name(kind));
  snprintf(msg, sizeof msg, "%s%s", fe->err.msg[0] ? fe->err.msg : failed,
           fe->truncation_helps ? " (parameters.truncation: true cuts it)" : "");
  http_error_from(rs, &fe->err, msg, detail);
}

void app_serve_pipeline(App *a, AppPipeline kind, const char *path_model, HttpReq *rq, HttpRes *rs) {
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
  } else if (model && path_model) {
    http_error(rs, 422, "field 'model': the path names the model", json_pack("{s:s, s:s}", "field", "model", "path", path_model));
  } else if (model && !json_is_string(model)) {
    http_error(rs, 422, "field 'model' must be a string \"name[@revision]\"",
               json_pack("{s:s, s:s}", "field", "model", "got", http_json_type(model)));
  }
  if (rs->status) { json_decref(body); return; }

  double t0 = now_monotonic();
  char ckey[256];
  Entry *ent = NULL;
  ModelPrecision weights = MODEL_FP32;
  /* POST /models/{name} answers the pipeline the model is for (kind < 0: ask its config). */
  if (resolve_model(a, kind, path_model ? path_model : model ? json_string_value(model) : NULL, ckey, sizeof ckey, &weights, rs) ||
      (kind == APP_PIPELINE_ANY && model_pipeline(a, ckey, weights, &kind, rs)) || !(ent = load_model(a, ckey, weights, kind, rs))) {
    json_decref(body);
    return;
  }
  /* Everything is checked here, in this thread, before the request can wait for the model. */
  Job job;
  memset(&job, 0, sizeof job);
  int cost = 0;
  if (kind == APP_TEXT_CLASSIFICATION) {
    TextClassRequest *r = textclass_prepare(ent->tc, inputs, params, &job.fe);
    if (r) cost = textclass_request_tokens(r);
    job.req = r;
  } else {
    FillMaskRequest *r = fillmask_prepare(ent->fm, inputs, params, &job.fe);
    if (r) cost = fillmask_request_tokens(r);
    job.req = r;
  }
  json_decref(body);
  if (!job.req) {
    cache_release(a->fill, ent);
    fill_refusal(rs, &job.fe, ckey, kind);
    return;
  }
  FillJob fj = {.data = &job, .cost = cost};
  /* The limit is on the wait for the model's runner, which starts here: resolving and
  ** loading the model (seconds for a base model, on the first request after every cold
  ** load or new revision) and checking the request are this request's own work, not a
  ** wait behind others', and an idle runner answers it whatever the time. */
  int late = fill_queue_submit(ent->queue, &fj, a->request_timeout > 0 ? now_monotonic() + a->request_timeout : 0);
  cache_release(a->fill, ent);
  if (kind == APP_TEXT_CLASSIFICATION) textclass_request_free(job.req);
  else fillmask_request_free(job.req);
  json_t *res = job.result;
  char *text = res ? fillmask_dumps(res, 0, 0) : NULL;
  json_decref(res);
  if (late) {
    http_error(rs, 503, "the model was busy past the request time limit; try again",
               json_pack("{s:s, s:f}", "model", ckey, "timeout_s", a->request_timeout));
  } else if (!res) {
    fill_refusal(rs, &job.fe, ckey, kind);
  } else if (!text) {
    http_error(rs, 500, "cannot write the answer", NULL);
  } else {
    free(rs->body);
    rs->body = text;
    rs->len = strlen(text);
    rs->status = 200;
    rs->content_type = "application/json";
    if (kind == APP_TEXT_CLASSIFICATION) metrics_textclass(a->metrics, now_monotonic() - t0);
    else metrics_fill_mask(a->metrics, now_monotonic() - t0);
  }
}

void route_fill_mask(void *app, HttpReq *rq, HttpRes *rs) { app_serve_pipeline(app, APP_FILL_MASK, NULL, rq, rs); }
