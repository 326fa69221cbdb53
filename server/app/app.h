/* The maskd service: the state its routes share (App, owned by app.c and set up by
** server/cli/cmd_serve.c) and the route handlers, one file per group of routes. */
#ifndef MASKD_SERVE_H
#define MASKD_SERVE_H
#include <pthread.h>
#include "engine/core/err.h"
#include "engine/core/now.h"
#include "engine/infer/fillmask.h"
#include "engine/infer/textclass.h"
#include "server/http/http.h"
#include "server/http/metrics.h"
#include "server/app/workspace.h"
#include "store/store.h"

typedef struct FillCache FillCache;
typedef struct Worker Worker;

typedef struct App {
  HttpServer *http;
  Metrics *metrics;
  char *static_root;        /* canonical path of the page's directory */
  const char *db_path;
  Workspace ws;             /* what jobs may read (--data-dir) and where they write (--work-dir) */
  double started;           /* unix seconds */
  int quiet;                /* no access log */
  const char *default_model;  /* a request naming no model: this where it serves the route's task, else the newest model that does */
  FillCache *fill;
  Worker *worker;
  const char *exe;          /* this maskd binary, which the worker runs for jobs */
  unsigned long long max_upload;  /* bytes of one corpus upload (for /healthz) */
  double request_timeout;   /* seconds a fill-mask or text-classification request may wait behind its
                            ** loaded model's busy runner (0: no limit); loading is not counted */
  double job_stop_grace;    /* seconds a running job gets to stop after SIGTERM when the server stops */
  int on_restart_resume;    /* a training job found running at start-up is queued again as a resume
                            ** of its run (else it stays "interrupted"); a job's "on_restart" wins */
  const char *job_hosts;    /* the hosts a training job may start ranks on, comma-separated
                            ** (--job-hosts, server/app/job_hosts.h); NULL: this machine only */
} App;

/* The calling thread's store connection (a Store is single-threaded): opened on
** a thread's first use, kept for its next requests and closed when the thread
** ends (http_stop joins the handler threads). The caller must not close it; it
** stays valid until the thread's next app_store or app_thread_store call. NULL
** with the reason in err when the store cannot be opened. */
Store *app_thread_store(App *a, Err *err);
/* app_thread_store for a request: answers 500 "cannot open the store" and returns
** NULL when it cannot be opened. */
Store *app_store(App *a, HttpRes *rs);
/* The repository a route's path names: its first n_params - trailing parameters joined
** by '/' ("name" or "owner/name", as the Hub's paths have it) into out; -1 if too long. */
int app_path_repo(const HttpReq *rq, int trailing, char *out, size_t cap);
/* The job-state gauges for /metrics (malloc'd text), from the store. */
char *app_jobs_metrics_text(App *a);
/* Registers maskd_kernels_info (the kernels' level, the CPU's best, the gemm
** backend, AVX512-BF16, the CPU model) with m; 0, or -1 when out of memory. */
int app_metrics_kernels_info(Metrics *m);

/* routes_store.c: runs and models over the store. */
void route_runs(void *app, HttpReq *rq, HttpRes *rs);
void route_run(void *app, HttpReq *rq, HttpRes *rs);
void route_run_metrics(void *app, HttpReq *rq, HttpRes *rs);
void route_run_events(void *app, HttpReq *rq, HttpRes *rs);
void route_models(void *app, HttpReq *rq, HttpRes *rs);
void route_model(void *app, HttpReq *rq, HttpRes *rs);

/* routes_hub.c: the Hugging Face Hub's protocol for model repositories ("name" or "owner/name":
** the repo is the leading path parameters joined by '/'; a 404 carries X-Error-Code). */
/* GET|HEAD .../{repo}/resolve|raw/{rev}/{file}: the file, with ETag, Range, X-Repo-Commit, X-Linked-*. */
void route_hub_file(void *app, HttpReq *rq, HttpRes *rs);
/* GET /api/models/{repo}[/revision/{rev}]: model info (?blobs=true: sizes and sha256s). */
void route_hub_model_info(void *app, HttpReq *rq, HttpRes *rs);
/* GET /api/models/{repo}/tree/{rev}[/{path}]: the revision's files (listFiles). */
void route_hub_tree(void *app, HttpReq *rq, HttpRes *rs);
/* POST /api/models/{repo}/paths-info/{rev} ({"paths", "expand"} or a form): those files' entries. */
void route_hub_paths_info(void *app, HttpReq *rq, HttpRes *rs);
/* Shared by routes_hub.c and routes_hub_list.c. */
/* Answers 404 {"error", "detail"} with the Hub's X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound). */
void hub_not_found(HttpRes *rs, const char *code, const char *error, json_t *detail);
/* Resolves repo at rev (main, HEAD, a number, a commit) into r; else answers the 404 with its code (or the store's error) and returns -1. */
int hub_revision(Store *s, HttpRes *rs, const char *repo, const char *rev, StoreRevision *r);
/* Unix seconds as the Hub writes dates: ISO 8601 UTC with milliseconds ("2026-11-28T10:00:00.000Z"). */
void hub_iso_date(double t, char out[48]);
/* The pipeline config.json's architectures (NULL: absent) serve by config_parse's rule
** (config_task_of_architecture of the first name): "fill-mask", "text-classification", or NULL. */
const char *hub_pipeline_of(json_t *archs);
/* Answers model info of repo at rev (route_hub_model_info's answer). */
void hub_model_info(void *app, HttpReq *rq, HttpRes *rs, const char *repo, const char *rev);
/* A repository's _id as the Hub shapes it (24 hex), stable for its name. */
void hub_object_id(const char *name, char out[25]);

/* routes_hub_list.c: the Hub's listings and identity. */
/* GET /api/models: the repositories (listModels): search, author, pipeline_tag, filter, sort, direction,
** limit, p, full, config, expand; a next page in Link. */
void route_hub_models(void *app, HttpReq *rq, HttpRes *rs);
/* GET /api/models/{repo}/commits/{rev}: rev's history newest first (listCommits), p and limit, X-Total-Count, Link. */
void route_hub_commits(void *app, HttpReq *rq, HttpRes *rs);
/* GET /api/models/{repo}/refs: {branches: [main], tags: [], converts: []}; for "/api/models/{name}/refs"
** the model info of a repository named "{name}/refs" when there is one (that path is its model info's too). */
void route_hub_refs(void *app, HttpReq *rq, HttpRes *rs);
/* GET /api/whoami-v2: the server's one user for the token (401 without it or with another). */
void route_hub_whoami(void *app, HttpReq *rq, HttpRes *rs);

/* routes_fill.c: POST /fill-mask with a cache of loaded models, each answered in arrival order. */
/* capacity models kept loaded; batch != 0 joins queued requests into one pass (up to a
** token budget), whose start waits window_us for more to join; threads per model forward
** pass; limits: what one request may ask for (engine/infer/fillmask.h). */
FillCache *fill_cache_new(int capacity, int batch, int window_us, int threads, const FillMaskLimits *limits,
                          Metrics *metrics);
void fill_cache_free(FillCache *c);
/* How loaded models keep their weights (FillMaskOptions.weights): models[i] (a
** repository name) at per[i], every other model at def. The arrays are copied;
** 0, or -1 when out of memory. Call before serving. */
int fill_cache_set_precision(FillCache *c, ModelPrecision def, const char *const *models, const ModelPrecision *per, int n);
/* The precision a model repository is loaded at. */
ModelPrecision fill_cache_precision_of(const FillCache *c, const char *model);
/* {"default": "fp32"|"bf16"}, for /healthz (no repository names, no lock). */
json_t *fill_precision_json(const FillCache *c);
/* The limits as a JSON object, for /healthz. */
json_t *fill_limits_json(const FillCache *c);
/* The limits of each text-classification request (default: TEXTCLASS_DEFAULT_MAX_*). Call before serving. */
void fill_cache_set_textclass_limits(FillCache *c, const TextClassLimits *limits);
/* The text-classification limits as a JSON object, for /healthz. */
json_t *textclass_limits_json(const FillCache *c);
void route_fill_mask(void *app, HttpReq *rq, HttpRes *rs);

/* The pipelines the cache loads a revision for; ANY: the one its config.json names. */
typedef enum AppPipeline { APP_PIPELINE_ANY = -1, APP_FILL_MASK = 0, APP_TEXT_CLASSIFICATION = 1 } AppPipeline;
/* "fill-mask", "text-classification": the route's and HF's name of the task. */
const char *app_pipeline_name(AppPipeline kind);
/* Answers a pipeline request ({"inputs", "parameters", "model"?, "options"?}) with the
** model the path names (path_model, "name[@revision]"; the body may then not name one)
** or the body's, or the default of kind's task: resolved, loaded into the cache for kind, checked in
** this thread, then queued on the model and answered in a shared pass (routes_fill.c).
** A revision of another task than kind gets 400, naming the route that answers it. */
void app_serve_pipeline(App *a, AppPipeline kind, const char *path_model, HttpReq *rq, HttpRes *rs);

/* routes_textclass.c: POST /text-classification, as HF pipeline("text-classification")
** answers (engine/infer/textclass.h); POST /models/{name} and /models/{owner}/{name}, the pipeline the model is for. */
void route_text_classification(void *app, HttpReq *rq, HttpRes *rs);
void route_model_pipeline(void *app, HttpReq *rq, HttpRes *rs);

/* routes_jobs.c: job submission, cancellation, and the worker that runs jobs one at a time. */
/* What a tokenizer or dataset job may ask for: POST /tokenizers and /datasets check it
** when they queue the job, and the job's process (server/cli/job_read.c) when it reads it. */
#define APP_JOB_MAX_INPUTS 64
#define APP_JOB_VOCAB_MIN 8
#define APP_JOB_VOCAB_MAX 1000000
#define APP_JOB_SEQ_LEN_MIN 8
#define APP_JOB_SEQ_LEN_MAX 65536
Worker *worker_start(App *a, Err *err);
void worker_stop(Worker *w);
void route_submit_run(void *app, HttpReq *rq, HttpRes *rs);
void route_submit_tokenizer(void *app, HttpReq *rq, HttpRes *rs);
void route_submit_dataset(void *app, HttpReq *rq, HttpRes *rs);
void route_cancel_run(void *app, HttpReq *rq, HttpRes *rs);
void route_cancel_job(void *app, HttpReq *rq, HttpRes *rs);
void route_jobs(void *app, HttpReq *rq, HttpRes *rs);
void route_job(void *app, HttpReq *rq, HttpRes *rs);
/* GET /corpora: the corpora a job may name (server/app/workspace.h). */
void route_corpora(void *app, HttpReq *rq, HttpRes *rs);
/* GET /tokenizers, /datasets (oldest first) and /tokenizers/{name}, /datasets/{name}: the
** store's registry of what jobs made (server/app/registry.h), with each one's source and
** job; no answer holds a host path (a dataset's shards are named by file name). */
void route_tokenizers(void *app, HttpReq *rq, HttpRes *rs);
void route_datasets(void *app, HttpReq *rq, HttpRes *rs);
void route_tokenizer(void *app, HttpReq *rq, HttpRes *rs);
void route_dataset(void *app, HttpReq *rq, HttpRes *rs);

/* routes_corpora.c: POST /corpora?name=NAME (HTTP_UPLOAD): the body, UTF-8 text, stored as the
** uploaded corpus NAME (work root corpora/NAME): 201 {name, bytes, sha256, uploaded}. */
void route_upload_corpus(void *app, HttpReq *rq, HttpRes *rs);
/* GET /corpora/{name}: an uploaded corpus or a file at the top of the data folder, {name,
** bytes, uploaded} and for an upload its sha256 (null if it was not kept); 404 otherwise. */
void route_corpus(void *app, HttpReq *rq, HttpRes *rs);

/* routes_core.c: health, metrics, the page. */
double now_wall(void);  /* unix seconds */
void route_healthz(void *app, HttpReq *rq, HttpRes *rs);
void route_metrics(void *app, HttpReq *rq, HttpRes *rs);
int route_static(void *app, HttpReq *rq, HttpRes *rs);
void route_observe(void *app, const char *route, const char *method, int status, double seconds);

#endif
