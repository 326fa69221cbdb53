/* The server's shared state (server/app/app.h): what every route may ask of the App. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/app/app.h"
#include "engine/nn/kernels_info.h"

/* One store connection per thread. An open (the file, WAL, the schema version
** and its migrations) cost every request before; a thread now pays it once. It
** is held under a pthread key, not _Thread_local, so that it is closed when its
** thread ends. */
typedef struct ThreadStore {
  Store *s;
  char *path;            /* the db_path it was opened for */
  dev_t dev;             /* the file it opened: one removed or replaced since */
  ino_t ino;             /* is opened anew, as an open per request would have */
} ThreadStore;

static pthread_key_t store_key;
static pthread_once_t store_once = PTHREAD_ONCE_INIT;

static void thread_store_drop(ThreadStore *t) {
  store_close(t->s);
  free(t->path);
  t->s = NULL;
  t->path = NULL;
}
static void thread_store_free(void *v) {
  thread_store_drop(v);
  free(v);
}
static void store_key_make(void) { (void)pthread_key_create(&store_key, thread_store_free); }

/* 1 when t's connection may serve db_path now. */
static int thread_store_usable(const ThreadStore *t, const char *db_path) {
  struct stat st;
  /* A transaction left open would hold SQLite's locks across requests (no store
  ** function leaves one; closing rolls it back). */
  return t->s && !strcmp(t->path, db_path) && stat(db_path, &st) == 0 && st.st_dev == t->dev &&
         st.st_ino == t->ino && !store_in_transaction(t->s);
}

Store *app_thread_store(App *a, Err *err) {
  pthread_once(&store_once, store_key_make);
  ThreadStore *t = pthread_getspecific(store_key);
  if (!t) {
    if (!(t = calloc(1, sizeof *t))) { err_set(err, "out of memory"); return NULL; }
    if (pthread_setspecific(store_key, t)) {
      free(t);
      err_set(err, "cannot keep a store connection for this thread");
      return NULL;
    }
  }
  if (thread_store_usable(t, a->db_path)) return t->s;
  thread_store_drop(t);
  Store *s = store_open(a->db_path, err);
  if (!s) return NULL;
  struct stat st;
  if (!(t->path = strdup(a->db_path))) { store_close(s); err_set(err, "out of memory"); return NULL; }
  t->s = s;
  /* When it cannot be stat'ed (it opened, though), the next call opens it again. */
  int known = stat(a->db_path, &st) == 0;
  t->dev = known ? st.st_dev : 0;
  t->ino = known ? st.st_ino : 0;
  return s;
}

Store *app_store(App *a, HttpRes *rs) {
  Err e = {0};
  Store *s = app_thread_store(a, &e);
  if (!s) http_error_from(rs, &e, "cannot open the store", json_string(e.msg));
  return s;
}

int app_path_repo(const HttpReq *rq, int trailing, char *out, size_t cap) {
  out[0] = '\0';
  size_t used = 0;
  for (int i = 0; i < rq->n_params - trailing; i++) {
    int n = snprintf(out + used, cap - used, "%s%s", i ? "/" : "", rq->params[i]);
    if (n < 0 || (size_t)n >= cap - used) return -1;
    used += (size_t)n;
  }
  return 0;
}

char *app_jobs_metrics_text(App *a) {
  /* Every status a job can have, in the order /metrics has always listed them. */
  static const StoreStatus states[] = {STORE_STATUS_QUEUED, STORE_STATUS_RUNNING, STORE_STATUS_DONE,
                                       STORE_STATUS_FAILED, STORE_STATUS_INTERRUPTED, STORE_STATUS_CANCELLED};
  enum { N_STATES = sizeof states / sizeof states[0] };
  int count[STORE_STATUS_COUNT] = {0};
  Err e = {0};
  Store *s = app_thread_store(a, &e);
  json_t *jobs = s ? store_jobs_list(s, &e) : NULL;
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

/* server/http knows no kernels; the app hands it the labels, fixed for the process. */
int app_metrics_kernels_info(Metrics *m) {
  KernelsInfo k;
  kernels_info(&k);
  const char *labels[] = {"isa", k.isa, "best", k.best, "gemm", k.gemm, "gemm_bf16", k.gemm_bf16, "avx512_bf16", k.avx512_bf16 ? "1" : "0",
                          "cpu", k.cpu, NULL};
  return metrics_info(m, "maskd_kernels_info",
                      "The numeric kernels this server runs: instruction-set level, the CPU's best, the matrix-product "
                      "backend, the bf16 products' backend, AVX512-BF16, the CPU model.", labels);
}
