/* libmicrohttpd wrapper (server/http/http.h): the event loop, the handler pool, routing,
** limits, deadlines and the cross-site guards.
**
** Who touches what. libmicrohttpd runs in "external polling" mode: one thread of
** ours (loop_main) waits on libmicrohttpd's epoll descriptor and calls MHD_run(), so
** every libmicrohttpd callback (requests, completions, connection notices, stream
** readers, response frees) runs on it, and so do our deadline checks. Handler
** threads touch libmicrohttpd in one way only: MHD_resume_connection(), which takes
** the daemon's mutex and is safe from any thread; in external mode libmicrohttpd has
** no channel to wake its poller, so they then ring our eventfd, which the loop waits
** on beside libmicrohttpd's descriptor (resume() below).
**
** A request's life: its request line arrives (uri_logged: a ReqState is made and
** becomes libmicrohttpd's per-request pointer); its headers complete (begin: route,
** guards, token, declared size); its body arrives (appended); then dispatch either
** answers on the loop (HTTP_INLINE) or suspends the connection and queues the
** request for the pool. A handler thread runs it and resumes the connection; the
** loop is called again (finish) and queues the answer. on_completed frees it.
** While suspended, libmicrohttpd neither times out nor closes a connection, even if
** its client has gone, so a ReqState a handler thread works on cannot be freed under
** it; a gone client is noticed when the answer is written. MHD_stop_daemon() must
** not find a suspended connection: http_stop() answers every queued request (503),
** ends every waiting stream, lets running handlers finish and joins the pool first.
**
** Streams: the reader (loop) hands out what the last fill produced; when it has
** nothing it suspends the connection and queues a fill for the pool, which calls the
** handler's HttpStreamFn and resumes the connection, or, when the function had
** nothing, parks the stream; the loop's tick queues parked streams again when due.
**
** Uploads: begin opens the temporary file, the loop appends each piece of the body to
** it (its Conn in C_UPLOAD, whose deadline each piece moves on), dispatch closes it and
** queues the request; the file is unlinked after the handler (run_request) and again,
** for every other end, in req_free, each time only while the name still holds the
** file this request made (a handler that renamed it away leaves the name free, and
** another upload's mkstemp may take it). */
#include "server/http/http.h"
#include "engine/core/buf.h"
#include "engine/core/json_text.h"
#include "engine/core/now.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "server/http/http_guard.h"

#define TICK_MS 100         /* how often the loop checks deadlines and parked streams */
#define STREAM_FILL 65536   /* what one fill of a stream may gather (a run's whole history at once) */

typedef struct HttpServer HttpServer;

/* A unit of work for the handler pool: a request to handle or a stream to fill. */
typedef struct Job Job;
struct Job {
  Job *next;
  void (*run)(HttpServer *s, Job *j);
  void (*cancel)(HttpServer *s, Job *j);  /* the pool closed before it ran: answer without running */
};

#define CONTAINER(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* A connection, from accept to close (the loop only): what its deadline counts from. */
enum { C_HEADERS, C_BODY, C_BUSY, C_UPLOAD };
typedef struct Conn {
  struct Conn *prev, *next;
  int fd;
  int state;                /* C_HEADERS: waiting for a request's headers; C_BODY: for its body;
                            ** C_UPLOAD: for an upload's next bytes */
  int closing;              /* shut down for missing a deadline */
  double since;             /* when the current state began */
  unsigned char ip[16];
  size_t ip_len;
} Conn;

typedef struct Kv {
  int header;               /* a header (1) or a query argument (0) */
  char *key, *value;
} Kv;

/* The phases of a request; the only field a handler thread and the loop both touch. */
enum { R_NEW, R_BODY, R_QUEUED, R_READY, R_ANSWERED };

typedef struct ReqState {
  Job job;
  HttpServer *s;
  struct MHD_Connection *c;
  Conn *conn;               /* NULL when it could not be tracked (out of memory) */
  char *raw_uri;            /* as sent: percent-encoded, with the query */
  const HttpRoute *route;   /* NULL: static fallback */
  atomic_int phase;
  int too_big, head;
  Buf body;                 /* as it arrives */
  char *path;               /* decoded */
  char *segs;               /* copy of the path split at '/', params point into it */
  const char *params[HTTP_MAX_PARAMS];
  int n_params;
  const char *label;        /* route label for the observer */
  char method[16];
  Kv *kv;                   /* headers and query arguments, copied for the handler */
  size_t n_kv, cap_kv;
  HttpRes res;              /* the handler's answer */
  int status;
  double t0;                /* the request line came */
  double t_queued;          /* its answer was queued: the observer's end, since an event stream
                            ** or a slow download completes minutes later */
  /* HTTP_UPLOAD: the temporary file, while this request has one */
  int upload_fd;            /* -1 once closed */
  char *upload_path;        /* NULL once unlinked (or never made) */
  dev_t upload_dev;
  ino_t upload_ino;
  unsigned long long upload_bytes;
  int upload_counted;       /* counted in n_uploads */
  int upload_refused;       /* 413 or 507/500: the file is gone, the rest of the body is dropped */
  int upload_errno;         /* why the write failed */
  char cors_origin[256];    /* the Origin as sent when it is an allowed one (CORS answers); "" otherwise */
  int auth;                 /* HttpAuth: what the request's credentials are worth (HttpReq.auth) */
} ReqState;

typedef struct Stream {
  Job job;
  HttpServer *s;
  struct MHD_Connection *c;
  HttpStreamFn fn;
  void *ctx;
  void (*free_fn)(void *ctx);
  char buf[STREAM_FILL];
  size_t len, off;          /* what the last fill produced, and how much went out */
  atomic_int ended;
  double due;               /* parked until */
  struct Stream *next_parked;
  unsigned char ip[16];
  size_t ip_len;
  int counted;              /* an event stream, counted against the limits (a download is not) */
} Stream;

/* A handler thread. Idle ones wait on their own condition, stacked, and the most
** recently idle is woken first: under light load one thread, with its caches and
** its OpenMP state warm, serves request after request (measured: fill-mask at one
** client lost 4-6% of its requests per second when any idle thread was woken). */
typedef struct Worker {
  HttpServer *s;
  pthread_t t;
  pthread_cond_t cv;
  int woken;
} Worker;

typedef struct IpCount {
  unsigned char ip[16];
  size_t len;
  unsigned n;
} IpCount;

struct HttpServer {
  HttpConfig cfg;
  HttpGuard *guard;
  struct MHD_Daemon *d;
  int port;
  atomic_int stopping, loop_quit;
  pthread_t loop;
  int wake_fd;              /* eventfd: a handler thread resumed a connection */
  int poll_fd;              /* epoll over libmicrohttpd's epoll descriptor and wake_fd */
  Worker *workers;
  unsigned n_workers;       /* started */
  unsigned n_cv;            /* workers whose condition is initialised */
  pthread_mutex_t mu;       /* the queue, the idle workers, parked streams, stream counts */
  Job *head, *tail;         /* FIFO */
  Worker **idle;            /* a stack: the last to go idle is woken first */
  unsigned n_idle;
  int closed;               /* the pool takes no more work */
  Stream *parked;
  IpCount *stream_ips;      /* max_streams entries */
  unsigned n_streams;
  atomic_uint n_uploads;    /* uploads with a temporary file */
  Conn *conns;              /* the loop only */
  pthread_mutex_t log_mu;
  double log_second;
  unsigned log_lines, log_dropped;
};

HttpConfig http_default_config(void) {
  HttpConfig c;
  memset(&c, 0, sizeof c);
  c.host = "127.0.0.1";
  c.port = 8080;
  c.max_body = 1u << 20;
  c.max_conns = 1024;
  c.max_conns_per_ip = 128;
  c.max_streams = 64;
  c.max_streams_per_ip = 16;
  c.handler_threads = 16;
  c.timeout_s = 60;
  c.header_timeout_s = 10;
  c.body_timeout_s = 30;
  c.stream_poll_s = 1;
  c.max_upload = 1ull << 30;
  c.max_uploads = 8;
  c.upload_idle_s = 30;
  return c;
}

/* ---- responses ---- */

static void res_reset(HttpRes *rs) {
  free(rs->body);
  rs->body = NULL;
  rs->len = 0;
}

/* The Link header lives apart from headers[]: a next page's URL holds the request's query
** and outgrows their 160 bytes. Its length is bounded here, not by the caller's input. */
#define HTTP_MAX_LINK 4096

int http_res_link(HttpRes *rs, const char *value) {
  if (!value || strlen(value) >= HTTP_MAX_LINK) return -1;
  char *v = strdup(value);
  if (!v) return -1;
  free(rs->link);
  rs->link = v;
  return 0;
}

int http_res_header(HttpRes *rs, const char *name, const char *value) {
  int i = 0;
  while (i < rs->n_headers && strcasecmp(rs->headers[i].name, name)) i++;
  if (i == HTTP_MAX_HEADERS || strlen(name) >= sizeof rs->headers[0].name || strlen(value) >= sizeof rs->headers[0].value)
    return -1;
  snprintf(rs->headers[i].name, sizeof rs->headers[i].name, "%s", name);
  snprintf(rs->headers[i].value, sizeof rs->headers[i].value, "%s", value);
  if (i == rs->n_headers) rs->n_headers++;
  return 0;
}

void http_res_clear_headers(HttpRes *rs) {
  rs->n_headers = 0;
  free(rs->link);
  rs->link = NULL;
}

void http_bytes(HttpRes *rs, int status, const char *content_type, const void *data, size_t len) {
  res_reset(rs);
  rs->status = status;
  rs->content_type = content_type;
  rs->body = malloc(len ? len : 1);
  if (!rs->body) { rs->status = 500; rs->len = 0; return; }
  if (len) memcpy(rs->body, data, len);
  rs->len = len;
}

void http_json(HttpRes *rs, int status, json_t *v) {
  res_reset(rs);
  /* JSON_ENCODE_ANY: lists and scalars are valid answers too (fill-mask answers a list). */
  char *s = json_dumps(v ? v : json_null(), JSON_ENCODE_ANY | JSON_COMPACT);
  json_decref(v);
  if (!s) {
    static const char oom[] = "{\"error\":\"out of memory\",\"detail\":null}";
    http_bytes(rs, 500, "application/json", oom, sizeof oom - 1);
    return;
  }
  rs->status = status;
  rs->content_type = "application/json";
  rs->body = s;
  rs->len = strlen(s);
}

json_t *http_json_text(const char *s) {
  if (!s) return json_null();
  if (http_utf8_valid(s, strlen(s))) return json_string(s);
  char *e = http_utf8_escape(s);
  json_t *v = e ? json_string(e) : NULL;
  free(e);
  return v ? v : json_string("(not UTF-8)");
}

void http_error(HttpRes *rs, int status, const char *error, json_t *detail) {
  json_t *o = json_object();
  json_object_set_new(o, "error", http_json_text(error));
  json_object_set_new(o, "detail", detail ? detail : json_null());
  http_json(rs, status, o);
}

/* The one table from an error's kind to the status that answers it: routes pass
** the Err and never choose a status from its text. Out of memory and I/O are the
** server's failures (500) like anything unclassified; a busy store (another process's
** write transaction outlasted the busy timeout) is no failure of the request or the
** server: 503, which clients retry, with Retry-After (http_error_from). */
static const struct { ErrKind kind; int status; } STATUS_OF[] = {
  {ERR_BAD_INPUT, 400},   /* malformed input, a text the pipeline refuses */
  {ERR_NOT_FOUND, 404},
  {ERR_CONFLICT, 409},
  {ERR_TOO_LARGE, 413},   /* a limit exceeded */
  {ERR_INVALID, 422},     /* a wrong field in well-formed JSON */
  {ERR_INTERNAL, 500},
  {ERR_IO, 500},
  {ERR_NOMEM, 500},
  {ERR_BUSY, 503},
};

int http_status_of(ErrKind kind) {
  for (size_t i = 0; i < sizeof STATUS_OF / sizeof STATUS_OF[0]; i++)
    if (STATUS_OF[i].kind == kind) return STATUS_OF[i].status;
  return 500;  /* ERR_NONE: a failure that did not say why */
}

void http_error_from(HttpRes *rs, const Err *e, const char *error, json_t *detail) {
  int status = http_status_of(e ? e->kind : ERR_INTERNAL);
  http_error(rs, status, error ? error : e && e->msg[0] ? e->msg : "internal error", detail);
  if (status == 503) http_res_header(rs, "Retry-After", HTTP_BUSY_RETRY_AFTER);
}

void http_errorf(HttpRes *rs, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  http_error(rs, status, msg, NULL);
}

const char *http_json_type(const json_t *v) {
  if (!v) return "missing";   /* json_object_get of an absent key */
  switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE: case JSON_FALSE: return "boolean";
    default: return "null";
  }
}

json_t *http_body_object(const HttpReq *rq, HttpRes *rs) {
  json_error_t je;
  if (rq->body_len == 0) {
    http_error(rs, 400, "empty body: a JSON object is expected", NULL);
    return NULL;
  }
  /* JSON_DISABLE_EOF_CHECK off: trailing garbage after the value is malformed JSON. */
  json_t *v = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
  if (!v) {
    json_t *d = json_pack("{s:s, s:i, s:i}", "message", json_error_message(&je), "line", je.line, "column", je.column);
    http_error(rs, 400, "malformed JSON", d);
    return NULL;
  }
  if (!json_is_object(v)) {
    http_errorf(rs, 422, "the body must be a JSON object, not %s", http_json_type(v));
    json_decref(v);
    return NULL;
  }
  return v;
}

static const char *kv_find(const HttpReq *rq, int header, const char *key) {
  const ReqState *st = rq->conn;
  if (!st) return NULL;
  for (size_t i = 0; i < st->n_kv; i++) {
    const Kv *k = &st->kv[i];
    if (k->header == header && (header ? !strcasecmp(k->key, key) : !strcmp(k->key, key)))
      return k->value ? k->value : "";
  }
  return NULL;
}

const char *http_query(const HttpReq *rq, const char *key) { return kv_find(rq, 0, key); }

const char *http_query_nth(const HttpReq *rq, const char *key, size_t n) {
  const ReqState *st = rq->conn;
  if (!st) return NULL;
  for (size_t i = 0; i < st->n_kv; i++) {
    const Kv *k = &st->kv[i];
    if (!k->header && !strcmp(k->key, key) && n-- == 0) return k->value ? k->value : "";
  }
  return NULL;
}

const char *http_header(const HttpReq *rq, const char *key) { return kv_find(rq, 1, key); }

/* ---- routing ---- */

/* Matches path against pattern segment by segment; {x} takes one non-empty segment,
** and a last {x+} the rest of the path, slashes included (one or more segments).
** On a match, params point into segs (a writable copy of path split at '/'). */
static int route_match(const char *pattern, const char *path, char *segs, const char **params, int *n_params) {
  strcpy(segs, path);
  const char *p = pattern;
  char *s = segs;
  int np = 0, rest = 0;
  while (*p == '/' && *s == '/') {
    p++; s++;
    size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
    if (plen >= 2 && p[0] == '{' && p[plen - 1] == '}') {
      if (slen == 0 || np >= HTTP_MAX_PARAMS) return 0;
      params[np++] = s;
      if (p[plen - 2] == '+' && !p[plen]) {   /* the rest: no empty segment in it, no trailing '/' */
        if (strstr(s, "//") || s[strlen(s) - 1] == '/') return 0;
        rest = 1;
        p += plen;
        s += strlen(s);
        break;
      }
    } else if (plen != slen || strncmp(p, s, plen) != 0) {
      return 0;
    }
    p += plen;
    s += slen;
  }
  if (*p || *s) return 0;
  /* Cut the captured segments apart only now: the walk above needs the slashes. */
  for (int i = 0; i < np - rest; i++) ((char *)params[i])[strcspn(params[i], "/")] = '\0';
  *n_params = np;
  return 1;
}

/* ---- the handler pool ---- */

/* Wakes the most recently idle worker, if any (s->mu held). */
static void wake_one_locked(HttpServer *s) {
  if (!s->n_idle) return;  /* all busy: each looks at the queue before going idle */
  Worker *w = s->idle[--s->n_idle];
  w->woken = 1;
  pthread_cond_signal(&w->cv);
}

/* Appends j to the queue and wakes a worker for it (s->mu held). */
static void append_locked(HttpServer *s, Job *j) {
  j->next = NULL;
  if (s->tail) s->tail->next = j;
  else s->head = j;
  s->tail = j;
  wake_one_locked(s);
}

/* Closes the pool: idle workers wake and leave; busy ones leave after their job. */
static void pool_close(HttpServer *s) {
  pthread_mutex_lock(&s->mu);
  s->closed = 1;
  while (s->n_idle) wake_one_locked(s);
  pthread_mutex_unlock(&s->mu);
}

/* Queues j at the tail; -1 (nothing queued) once the pool is closed. */
static int pool_push(HttpServer *s, Job *j) {
  pthread_mutex_lock(&s->mu);
  if (s->closed) { pthread_mutex_unlock(&s->mu); return -1; }
  append_locked(s, j);
  pthread_mutex_unlock(&s->mu);
  return 0;
}

/* Resumes c from any thread and wakes the loop to serve it. */
static void resume(HttpServer *s, struct MHD_Connection *c) {
  MHD_resume_connection(c);
  uint64_t one = 1;
  ssize_t n = write(s->wake_fd, &one, sizeof one);
  (void)n;  /* a full counter means the loop is being woken anyway */
}

static void *worker_main(void *arg) {
  Worker *w = arg;
  HttpServer *s = w->s;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    Job *j = s->head;
    if (j) {
      s->head = j->next;
      if (!s->head) s->tail = NULL;
      pthread_mutex_unlock(&s->mu);
      j->run(s, j);
      pthread_mutex_lock(&s->mu);
      continue;
    }
    if (s->closed) break;  /* closed and drained */
    w->woken = 0;
    s->idle[s->n_idle++] = w;
    while (!w->woken) pthread_cond_wait(&w->cv, &s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ---- requests ---- */

static ReqState *req_new(HttpServer *s, const char *raw_uri) {
  ReqState *st = calloc(1, sizeof *st);
  if (!st) return NULL;
  st->raw_uri = strdup(raw_uri ? raw_uri : "");
  if (!st->raw_uri) { free(st); return NULL; }
  st->s = s;
  st->t0 = now_monotonic();
  st->label = "unmatched";
  st->upload_fd = -1;
  atomic_init(&st->phase, R_NEW);
  return st;
}

/* Removes the upload's temporary file, if its name still holds the file this request
** made, and closes it; idempotent. */
static void upload_discard(ReqState *st) {
  if (st->upload_fd >= 0) close(st->upload_fd);
  st->upload_fd = -1;
  if (st->upload_path) {
    struct stat sb;
    if (lstat(st->upload_path, &sb) == 0 && sb.st_dev == st->upload_dev && sb.st_ino == st->upload_ino)
      unlink(st->upload_path);
    free(st->upload_path);
    st->upload_path = NULL;
  }
  if (st->upload_counted) atomic_fetch_sub(&st->s->n_uploads, 1);
  st->upload_counted = 0;
}

static void req_free(ReqState *st) {
  upload_discard(st);
  free(st->raw_uri);
  buf_free(&st->body);
  free(st->path);
  free(st->segs);
  for (size_t i = 0; i < st->n_kv; i++) { free(st->kv[i].key); free(st->kv[i].value); }
  free(st->kv);
  if (st->res.stream_free) st->res.stream_free(st->res.stream_ctx);
  free(st->res.body);
  free(st->res.link);
  free(st);
}

static enum MHD_Result copy_value(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
  ReqState *st = cls;
  if (!key) return MHD_YES;
  if (st->n_kv == st->cap_kv) {
    size_t cap = st->cap_kv ? 2 * st->cap_kv : 16;
    Kv *kv = realloc(st->kv, cap * sizeof *kv);
    if (!kv) return MHD_NO;
    st->kv = kv;
    st->cap_kv = cap;
  }
  Kv *k = &st->kv[st->n_kv];
  k->header = kind == MHD_HEADER_KIND;
  k->key = strdup(key);
  k->value = value ? strdup(value) : NULL;
  if (!k->key || (value && !k->value)) { free(k->key); free(k->value); return MHD_NO; }
  st->n_kv++;
  return MHD_YES;
}

/* Runs the route's handler (or the static fallback) into st->res. */
static void handle(HttpServer *s, ReqState *st) {
  HttpReq rq;
  memset(&rq, 0, sizeof rq);
  rq.method = st->head ? "GET" : st->method;
  rq.head = st->head;
  rq.path = st->path;
  rq.pattern = st->label;
  memcpy(rq.params, st->params, sizeof rq.params);
  rq.n_params = st->n_params;
  rq.body = st->body.p ? st->body.p : "";
  rq.body_len = st->body.len;
  rq.upload_path = st->upload_path;
  rq.upload_bytes = st->upload_bytes;
  rq.conn = st;
  rq.auth = st->auth;
  HttpRes *rs = &st->res;
  if (st->route) {
    st->route->fn(s->cfg.app, &rq, rs);
  } else if (s->cfg.fallback(s->cfg.app, &rq, rs) != 0) {
    st->label = "unmatched";
    http_error(rs, 404, "not found", json_pack("{s:o, s:o}", "method", http_json_text(st->method), "path",
                                               http_json_text(st->path)));
  }
  if (!rs->status) http_error(rs, 500, "internal error: the handler gave no answer", NULL);
}

static void run_request(HttpServer *s, Job *j) {
  ReqState *st = CONTAINER(j, ReqState, job);
  handle(s, st);
  upload_discard(st);  /* what the handler left: not kept while the answer goes out */
  atomic_store(&st->phase, R_READY);
  resume(s, st->c);  /* the last touch: the loop may answer and free st from here on */
}

static void cancel_request(HttpServer *s, Job *j) {
  ReqState *st = CONTAINER(j, ReqState, job);
  http_error(&st->res, 503, "the server is shutting down", NULL);
  atomic_store(&st->phase, R_READY);
  resume(s, st->c);
}

/* ---- streams ---- */

static int ip_eq(const IpCount *e, const unsigned char *ip, size_t len) {
  return e->n && e->len == len && !memcmp(e->ip, ip, len);
}

/* Counts a new stream from ip: 0, or the status that refuses it (429: this address has its
** share, which it is told even when all are taken; 503: all are taken). */
static int streams_take(HttpServer *s, const unsigned char *ip, size_t len) {
  int refuse = 0;
  pthread_mutex_lock(&s->mu);
  IpCount *slot = NULL, *free_slot = NULL;
  for (unsigned i = 0; i < s->cfg.max_streams; i++) {
    if (ip_eq(&s->stream_ips[i], ip, len)) slot = &s->stream_ips[i];
    else if (!s->stream_ips[i].n && !free_slot) free_slot = &s->stream_ips[i];
  }
  if (slot && slot->n >= s->cfg.max_streams_per_ip) refuse = 429;
  else if (s->n_streams >= s->cfg.max_streams) refuse = 503;
  else {
    if (!slot) {
      slot = free_slot;  /* there is one: fewer streams than entries */
      memcpy(slot->ip, ip, len);
      slot->len = len;
    }
    slot->n++;
    s->n_streams++;
  }
  pthread_mutex_unlock(&s->mu);
  return refuse;
}

static void streams_release(HttpServer *s, const unsigned char *ip, size_t len) {
  pthread_mutex_lock(&s->mu);
  for (unsigned i = 0; i < s->cfg.max_streams; i++)
    if (ip_eq(&s->stream_ips[i], ip, len)) {
      s->stream_ips[i].n--;
      s->n_streams--;
      break;
    }
  pthread_mutex_unlock(&s->mu);
}

/* One fill: the stream function is called until it has nothing more or the buffer is
** full, so a long backlog crosses the pool once, not once per call. */
static void run_stream(HttpServer *s, Job *j) {
  Stream *ss = CONTAINER(j, Stream, job);
  size_t got = 0;
  ssize_t n = 0;
  while (!atomic_load(&s->stopping) && got + 512 <= sizeof ss->buf) {
    n = ss->fn(ss->ctx, ss->buf + got, sizeof ss->buf - got);
    if (n <= 0) break;
    got += (size_t)n < sizeof ss->buf - got ? (size_t)n : sizeof ss->buf - got;
  }
  if (atomic_load(&s->stopping)) n = -1;
  if (got) {  /* what came first goes out; an end seen after it ends the stream next */
    ss->len = got;
    ss->off = 0;
    if (n < 0) atomic_store(&ss->ended, 1);
    resume(s, ss->c);
    return;
  }
  if (n == 0) {
    pthread_mutex_lock(&s->mu);
    if (!s->closed) {  /* nothing yet: wait, still suspended, for the loop's tick */
      ss->due = now_monotonic() + s->cfg.stream_poll_s;
      ss->next_parked = s->parked;
      s->parked = ss;
      pthread_mutex_unlock(&s->mu);
      return;
    }
    pthread_mutex_unlock(&s->mu);
    n = -1;
  }
  atomic_store(&ss->ended, 1);
  resume(s, ss->c);
}

static void end_stream(HttpServer *s, Job *j) {
  Stream *ss = CONTAINER(j, Stream, job);
  atomic_store(&ss->ended, 1);
  resume(s, ss->c);
}

/* libmicrohttpd's content reader, on the loop: never waits. */
static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  Stream *ss = cls;
  HttpServer *s = ss->s;
  if (ss->off < ss->len) {
    size_t n = ss->len - ss->off;
    if (n > max) n = max;
    memcpy(buf, ss->buf + ss->off, n);
    ss->off += n;
    return (ssize_t)n;
  }
  if (atomic_load(&ss->ended) || atomic_load(&s->stopping)) return MHD_CONTENT_READER_END_OF_STREAM;
  MHD_suspend_connection(ss->c);
  if (pool_push(s, &ss->job)) end_stream(s, &ss->job);
  return 0;  /* suspended: asked again once resumed */
}

/* A stream's context, released on a handler thread (stream_destroy). */
typedef struct StreamRelease {
  Job job;
  void (*free_fn)(void *ctx);
  void *ctx;
} StreamRelease;

static void run_release(HttpServer *s, Job *j) {
  (void)s;
  StreamRelease *r = CONTAINER(j, StreamRelease, job);
  r->free_fn(r->ctx);
  free(r);
}

/* libmicrohttpd's end of a stream's response, on the loop. Its context may have store
** work left (a download drops its blob's pin: a write, which waits up to the busy
** timeout for another process's write transaction), and the loop must never wait: every
** connection, /healthz's too, would wait with it. So a handler thread releases it; once
** the pool has closed (the server stopping, its handlers gone), this thread does. */
static void stream_destroy(void *cls) {
  Stream *ss = cls;
  if (ss->counted) streams_release(ss->s, ss->ip, ss->ip_len);
  if (ss->free_fn) {
    StreamRelease *r = malloc(sizeof *r);
    if (r) {
      r->job.run = r->job.cancel = run_release;
      r->free_fn = ss->free_fn;
      r->ctx = ss->ctx;
    }
    if (!r || pool_push(ss->s, &r->job)) {
      free(r);
      ss->free_fn(ss->ctx);
    }
  }
  free(ss);
}

/* ---- the libmicrohttpd side ---- */

static Conn *conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

static void conn_state(Conn *k, int state) {
  if (!k) return;
  k->state = state;
  k->since = now_monotonic();
}

/* The headers every answer to an allowed origin carries (http.h, CORS): without
** Expose-Headers a page could not read the Hub's commit, a download's ETag or range,
** or how long to wait after a 503. */
static void cors_headers(struct MHD_Response *r, const char *origin) {
  MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
  MHD_add_response_header(r, "Vary", "Origin");
  MHD_add_response_header(r, "Access-Control-Expose-Headers",
                          "ETag, X-Repo-Commit, X-Linked-Size, X-Linked-Etag, X-Error-Code, Content-Range, "
                          "Accept-Ranges, Content-Length, Location, Retry-After, Allow, Link, X-Total-Count");
}

/* 1 when v is a comma-separated list of header names (RFC 9110 tokens), as a
** preflight's Access-Control-Request-Headers is: only such a list is echoed. */
static int header_name_list(const char *v) {
  size_t n = strlen(v);
  if (n == 0 || n > 1000) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)v[i];
    if (!isalnum(ch) && !strchr("!#$%&'*+-.^_`|~, ", ch)) return 0;
  }
  return 1;
}

static const char *hdr(struct MHD_Connection *c, const char *name);

/* Answers st at once with r, a response made here rather than from an HttpRes (a
** preflight, a login's redirect), and releases r. */
static enum MHD_Result answer_bare(ReqState *st, struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
  atomic_store(&st->phase, R_ANSWERED);
  conn_state(st->conn, C_BUSY);
  enum MHD_Result ok = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  st->status = (int)status;
  st->t_queued = now_monotonic();
  return ok;
}

/* A CORS preflight from an allowed origin: 204 with the methods of the path (allow)
** and the request headers it asked for; nothing runs until the real request comes. */
static enum MHD_Result preflight(ReqState *st, struct MHD_Connection *c, const char *allow) {
  struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  cors_headers(r, st->cors_origin);
  MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
  const char *want = hdr(c, "Access-Control-Request-Headers");
  if (want && header_name_list(want)) MHD_add_response_header(r, "Access-Control-Allow-Headers", want);
  const char *pna = hdr(c, "Access-Control-Request-Private-Network");
  if (pna && !strcasecmp(pna, "true")) MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
  MHD_add_response_header(r, "Access-Control-Max-Age", "600");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  return answer_bare(st, c, MHD_HTTP_NO_CONTENT, r);
}

/* The body of a HEAD of an event stream, never read (libmicrohttpd sends a HEAD's
** headers alone): it gives the answer GET's headers, chunked with no Content-Length,
** where a buffer would claim an empty body. */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)cls, (void)pos, (void)buf, (void)max;
  return MHD_CONTENT_READER_END_OF_STREAM;
}

/* Queues rs on c (the loop only). A stream is counted against the limits here. */
static enum MHD_Result queue(HttpServer *s, struct MHD_Connection *c, HttpRes *rs, ReqState *st) {
  struct MHD_Response *r;
  if (rs->stream && (rs->stream_sized || !st->head)) {
    static const unsigned char none[1] = {0};
    const unsigned char *ip = st->conn ? st->conn->ip : none;
    size_t ip_len = st->conn ? st->conn->ip_len : 0;
    int refuse = rs->stream_sized ? 0 : streams_take(s, ip, ip_len);
    Stream *ss = refuse ? NULL : calloc(1, sizeof *ss);
    if (!ss) {
      if (!refuse && !rs->stream_sized) streams_release(s, ip, ip_len);
      if (rs->stream_free) rs->stream_free(rs->stream_ctx);
      rs->stream = NULL;
      rs->stream_free = NULL;
      if (refuse == 429)
        http_error(rs, 429, "too many event streams from this address", json_pack("{s:I}", "limit",
                                                                                    (json_int_t)s->cfg.max_streams_per_ip));
      else if (refuse == 503)
        http_error(rs, 503, "too many event streams open on the server; try again later",
                   json_pack("{s:I}", "limit", (json_int_t)s->cfg.max_streams));
      else
        http_error(rs, 500, "out of memory", NULL);
      return queue(s, c, rs, st);
    }
    ss->s = s;
    ss->c = c;
    ss->fn = rs->stream;
    ss->ctx = rs->stream_ctx;
    ss->free_fn = rs->stream_free;
    ss->job.run = run_stream;
    ss->job.cancel = end_stream;
    atomic_init(&ss->ended, 0);
    memcpy(ss->ip, ip, ip_len);
    ss->ip_len = ip_len;
    ss->counted = !rs->stream_sized;
    rs->stream_free = NULL;  /* the stream owns the context now */
    r = MHD_create_response_from_callback(rs->stream_sized ? rs->stream_len : MHD_SIZE_UNKNOWN, sizeof ss->buf,
                                          stream_reader, ss, stream_destroy);
    if (!r) { stream_destroy(ss); return MHD_NO; }
  } else {
    int unsized_head = rs->stream != NULL;   /* a HEAD of an event stream: GET's headers, no body */
    if (rs->stream && rs->stream_free) rs->stream_free(rs->stream_ctx);
    rs->stream_free = NULL;
    r = unsized_head ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64, no_body, NULL, NULL)
                     : MHD_create_response_from_buffer(rs->len, rs->body ? rs->body : (void *)"", MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
  }
  int status = rs->status ? rs->status : 500;
  if (rs->content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rs->content_type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, rs->cache ? rs->cache : "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  if (rs->allow[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rs->allow);
  if (rs->location[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, rs->location);
  for (int i = 0; i < rs->n_headers; i++) MHD_add_response_header(r, rs->headers[i].name, rs->headers[i].value);
  if (rs->link) MHD_add_response_header(r, "Link", rs->link);
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"maskd\"");
  if (st->cors_origin[0]) cors_headers(r, st->cors_origin);
  enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  st->status = status;
  st->t_queued = now_monotonic();
  return ok;
}

/* Answers st with its res (the loop only). */
static enum MHD_Result finish(HttpServer *s, struct MHD_Connection *c, ReqState *st) {
  atomic_store(&st->phase, R_ANSWERED);
  conn_state(st->conn, C_BUSY);
  enum MHD_Result ok = queue(s, c, &st->res, st);
  res_reset(&st->res);
  return ok;
}

/* Answers at once (before the body is read) with an error. */
static enum MHD_Result refuse(HttpServer *s, struct MHD_Connection *c, ReqState *st, int status, const char *error,
                              json_t *detail) {
  http_error(&st->res, status, error, detail);
  return finish(s, c, st);
}

/* GET /anything?token=T: a valid T logs the browser in with the cookie and sends it
** on to the same URL without the token (303); a wrong one is a 401 and sets nothing. */
static enum MHD_Result login(HttpServer *s, struct MHD_Connection *c, ReqState *st, const char *given) {
  if (!http_guard_token_ok(s->guard, given))
    return refuse(s, c, st, 401, "invalid token in the URL: use the link `make run` printed, or the token the server "
                                 "was started with (--token, $MASKD_TOKEN)", NULL);
  char *to = http_guard_strip_token(st->raw_uri);
  struct MHD_Response *r = to ? MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT) : NULL;
  if (!r) { free(to); return MHD_NO; }
  MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, to);
  MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, http_guard_set_cookie(s->guard));
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
  free(to);
  return answer_bare(st, c, MHD_HTTP_SEE_OTHER, r);
}

static int authorized(HttpServer *s, struct MHD_Connection *c) {
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (h) return !strncasecmp(h, "Bearer ", 7) && http_guard_token_ok(s->guard, h + 7);
  return http_guard_cookie_ok(s->guard,
                              MHD_lookup_connection_value(c, MHD_COOKIE_KIND, http_guard_cookie_name(s->guard)));
}

static int is_body_method(const char *m) {
  return !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH") || !strcmp(m, "DELETE");
}

/* The media type ct names is type ("application/json"), any case, optionally followed by
** parameters (charset). */
static int is_type(const char *ct, const char *type) {
  if (!ct) return 0;
  size_t n = strlen(type);
  while (*ct == ' ') ct++;
  if (strncasecmp(ct, type, n)) return 0;
  ct += n;
  while (*ct == ' ' || *ct == '\t') ct++;
  return *ct == '\0' || *ct == ';';
}

/* "%00" anywhere in the URI: a NUL would cut the decoded path or argument short. */
static int has_encoded_nul(const char *raw) {
  for (const char *p = strchr(raw, '%'); p; p = strchr(p + 1, '%'))
    if (p[1] == '0' && p[2] == '0') return 1;
  return 0;
}

static const char *hdr(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* An upload's headers are in and its token checked: its type and declared size, then
** its temporary file. */
static enum MHD_Result upload_begin(HttpServer *s, struct MHD_Connection *c, ReqState *st, const char *ctype) {
  if (!is_type(ctype, "application/octet-stream"))
    return refuse(s, c, st, 415, "Content-Type must be application/octet-stream (the file's raw bytes as the body)",
                  json_pack("{s:o}", "content_type", http_json_text(ctype)));
  const char *cl = hdr(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    if (*end || errno || n > s->cfg.max_upload)
      return refuse(s, c, st, 413, "upload too large", json_pack("{s:I}", "max_bytes", (json_int_t)s->cfg.max_upload));
  }
  if (!s->cfg.upload_dir) return refuse(s, c, st, 500, "this server has no folder for uploads", NULL);
  if (atomic_fetch_add(&s->n_uploads, 1) >= s->cfg.max_uploads) {
    atomic_fetch_sub(&s->n_uploads, 1);
    return refuse(s, c, st, 503, "too many uploads in progress; try again later",
                  json_pack("{s:I}", "limit", (json_int_t)s->cfg.max_uploads));
  }
  st->upload_counted = 1;
  size_t len = strlen(s->cfg.upload_dir) + sizeof "/upload-XXXXXX";
  st->upload_path = malloc(len);
  if (!st->upload_path) return MHD_NO;
  snprintf(st->upload_path, len, "%s/upload-XXXXXX", s->cfg.upload_dir);
  /* O_CLOEXEC: the jobs the app starts must not inherit it. mkostemp makes it 0600. */
  st->upload_fd = mkostemp(st->upload_path, O_CLOEXEC);
  struct stat sb;
  if (st->upload_fd < 0 || fstat(st->upload_fd, &sb)) {
    int e = errno;
    if (st->upload_fd >= 0) unlink(st->upload_path);
    free(st->upload_path);
    st->upload_path = NULL;
    upload_discard(st);
    return refuse(s, c, st, e == ENOSPC || e == EDQUOT ? 507 : 500,
                  e == ENOSPC || e == EDQUOT ? "the server's disk is full: the upload cannot be stored"
                                             : "cannot create the upload's temporary file",
                  json_pack("{s:s}", "why", strerror(e)));
  }
  st->upload_dev = sb.st_dev;
  st->upload_ino = sb.st_ino;
  atomic_store(&st->phase, R_BODY);
  conn_state(st->conn, C_UPLOAD);
  return MHD_YES;
}

/* The upload is refused mid-body (413, or a write that failed with errno e): its file
** goes now, and the rest of the body is dropped within the ordinary body deadline. */
static void upload_refuse(ReqState *st, int status, int e) {
  st->upload_refused = status;
  st->upload_errno = e;
  upload_discard(st);
  conn_state(st->conn, C_BODY);
}

/* Appends a piece of an upload's body to its file. */
static void upload_piece(HttpServer *s, ReqState *st, const char *data, size_t n) {
  if (st->upload_refused) return;
  if (n > s->cfg.max_upload - st->upload_bytes) { upload_refuse(st, 413, 0); return; }
  for (size_t done = 0; done < n;) {
    ssize_t w = write(st->upload_fd, data + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { upload_refuse(st, 500, w < 0 ? errno : EIO); return; }
    done += (size_t)w;
  }
  st->upload_bytes += n;
  conn_state(st->conn, C_UPLOAD);  /* the next bytes are due within upload_idle_s of these */
}

/* The answer to an upload refused mid-body, or whose file cannot be closed. */
static enum MHD_Result upload_failed(HttpServer *s, struct MHD_Connection *c, ReqState *st) {
  int e = st->upload_errno;
  if (st->upload_refused == 413)
    return refuse(s, c, st, 413, "upload too large", json_pack("{s:I}", "max_bytes", (json_int_t)s->cfg.max_upload));
  if (e == ENOSPC || e == EDQUOT)
    return refuse(s, c, st, 507, "the server's disk is full: the upload was not stored", NULL);
  return refuse(s, c, st, 500, "cannot write the upload", json_pack("{s:s}", "why", strerror(e)));
}

/* First call for a request (headers complete): path checks, route, guards, token,
** content type and declared size. Refusals are answered at once. */
static enum MHD_Result begin(HttpServer *s, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, ReqState *st) {
  st->c = c;
  st->conn = conn_of(c);
  conn_state(st->conn, C_BODY);
  snprintf(st->method, sizeof st->method, "%s", method);
  st->head = !strcmp(method, "HEAD");
  const char *m = st->head ? "GET" : method;
  size_t ulen = strlen(url);
  st->path = strdup(url);
  st->segs = malloc(ulen + 1);
  if (!st->path || !st->segs) return MHD_NO;
  if (atomic_load(&s->stopping)) return refuse(s, c, st, 503, "the server is shutting down", NULL);
  /* HTTP/1.1 requires Host (RFC 9112, 3.2), and the guard's Host check (DNS rebinding)
  ** can only judge one that is there; HTTP/1.0 may leave it out. */
  if (version && !strcmp(version, MHD_HTTP_VERSION_1_1) && !hdr(c, MHD_HTTP_HEADER_HOST))
    return refuse(s, c, st, 400, "an HTTP/1.1 request needs a Host header", NULL);
  if (has_encoded_nul(st->raw_uri))
    return refuse(s, c, st, 400, "the URL holds an encoded NUL (%00)", json_pack("{s:o}", "url",
                                                                                 http_json_text(st->raw_uri)));
  if (url[0] != '/') return refuse(s, c, st, 400, "bad request path", json_pack("{s:o}", "path", http_json_text(url)));
  if (!http_utf8_valid(url, ulen))
    return refuse(s, c, st, 400, "the path is not valid UTF-8", json_pack("{s:o}", "path", http_json_text(url)));
  char allow[64] = "";
  for (int i = 0; i < s->cfg.n_routes; i++) {
    const HttpRoute *r = &s->cfg.routes[i];
    const char *params[HTTP_MAX_PARAMS] = {0};
    int np = 0;
    if (!route_match(r->pattern, url, st->segs, params, &np)) continue;
    if (strcmp(r->method, m) != 0) {
      /* Same path, other method: remember it for the Allow header. */
      if (!strstr(allow, r->method) && strlen(allow) + strlen(r->method) + 8 < sizeof allow) {
        if (allow[0]) strcat(allow, ", ");
        strcat(allow, r->method);
        if (!strcmp(r->method, "GET")) strcat(allow, ", HEAD");
      }
      continue;
    }
    st->route = r;
    st->label = r->pattern;
    memcpy(st->params, params, sizeof params);
    st->n_params = np;
    break;
  }
  const char *origin = hdr(c, "Origin");
  if (origin && strlen(origin) < sizeof st->cors_origin && http_guard_origin_listed(s->guard, origin))
    snprintf(st->cors_origin, sizeof st->cors_origin, "%s", origin);
  int open = st->route && (st->route->flags & HTTP_OPEN);
  if (!open) {
    const char *why = http_guard_request(s->guard, m, hdr(c, MHD_HTTP_HEADER_HOST), origin,
                                         hdr(c, "Sec-Fetch-Site"), hdr(c, "Sec-Fetch-Mode"), hdr(c, "Sec-Fetch-Dest"));
    if (why)
      return refuse(s, c, st, 403, why, json_pack("{s:o, s:o}", "host", http_json_text(hdr(c, MHD_HTTP_HEADER_HOST)),
                                                  "origin", http_json_text(origin)));
  }
  if (!st->route && !strcmp(method, "OPTIONS") && st->cors_origin[0] && hdr(c, "Access-Control-Request-Method")) {
    if (allow[0]) return preflight(st, c, allow);
    if (s->cfg.fallback) return preflight(st, c, "GET, HEAD");
  }
  if (!st->route) {
    if (allow[0]) {
      HttpRes *rs = &st->res;
      snprintf(rs->allow, sizeof rs->allow, "%s", allow);
      char msg[300];
      snprintf(msg, sizeof msg, "method %s not allowed on %s", method, url);
      return refuse(s, c, st, 405, msg, json_pack("{s:s}", "allow", allow));
    }
    if (strcmp(m, "GET") != 0 || !s->cfg.fallback)
      return refuse(s, c, st, 404, "not found", json_pack("{s:o, s:o}", "method", http_json_text(method), "path",
                                                          http_json_text(url)));
    st->label = "static";
  }
  const char *given = s->cfg.token && !strcmp(m, "GET") ? MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token")
                                                        : NULL;
  if (given) return login(s, c, st, given);
  /* The fallback (the page's own files, which hold no data) is open even with auth_reads:
  ** behind a 401 the browser never got the page, so never its login form. */
  int needs_token = s->cfg.token && st->route && ((st->route->flags & HTTP_WRITE) || (s->cfg.auth_reads && !open));
  int authed = s->cfg.token && authorized(s, c);
  st->auth = !s->cfg.token ? HTTP_AUTH_NO_TOKEN : authed ? HTTP_AUTH_OK
             : hdr(c, MHD_HTTP_HEADER_AUTHORIZATION) ? HTTP_AUTH_WRONG : HTTP_AUTH_MISSING;
  if (needs_token && !authed) {
    const char *h = hdr(c, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *cookie = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, http_guard_cookie_name(s->guard));
    return refuse(s, c, st, 401,
                  h ? "invalid bearer token"
                    : cookie ? "invalid session cookie: the server restarted since this browser logged in; log in again with the link "
                               "`make run` printed (/?token=TOKEN)"
                             : "missing token: send 'Authorization: Bearer TOKEN', or open /?token=TOKEN (the link "
                               "`make run` prints) to log the browser in",
                  NULL);
  }
  /* A form is what a page may post anywhere without asking: only routes that change nothing take one. */
  const char *ctype = hdr(c, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (st->route && (st->route->flags & HTTP_UPLOAD)) return upload_begin(s, c, st, ctype);
  int form_ok = st->route && (st->route->flags & HTTP_FORM) && ctype &&
                !strncasecmp(ctype, "application/x-www-form-urlencoded", 33);
  if (is_body_method(method) && !form_ok && !is_type(ctype, "application/json"))
    return refuse(s, c, st, 415, "Content-Type must be application/json",
                  json_pack("{s:o}", "content_type", http_json_text(hdr(c, MHD_HTTP_HEADER_CONTENT_TYPE))));
  const char *cl = hdr(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (*end || n > s->cfg.max_body)
      return refuse(s, c, st, 413, "request body too large", json_pack("{s:I}", "max_bytes",
                                                                       (json_int_t)s->cfg.max_body));
    if (n > 0 && !is_body_method(method)) {
      char msg[64];
      snprintf(msg, sizeof msg, "%s requests take no body", m);
      return refuse(s, c, st, 400, msg, NULL);
    }
  }
  atomic_store(&st->phase, R_BODY);
  return MHD_YES;
}

/* The request is complete: answer it on the loop (HTTP_INLINE) or queue it for the pool. */
static enum MHD_Result dispatch(HttpServer *s, struct MHD_Connection *c, ReqState *st) {
  conn_state(st->conn, C_BUSY);
  if (st->too_big)
    return refuse(s, c, st, 413, "request body too large", json_pack("{s:I}", "max_bytes",
                                                                     (json_int_t)s->cfg.max_body));
  if (st->upload_refused) return upload_failed(s, c, st);
  if (st->upload_fd >= 0) {
    int fd = st->upload_fd;
    st->upload_fd = -1;
    if (close(fd)) { upload_refuse(st, 500, errno); return upload_failed(s, c, st); }
  }
  if (MHD_get_connection_values(c, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND, copy_value, st) < 0) return MHD_NO;
  if (st->route && (st->route->flags & HTTP_INLINE)) {
    handle(s, st);
    return finish(s, c, st);
  }
  atomic_store(&st->phase, R_QUEUED);
  st->job.run = run_request;
  st->job.cancel = cancel_request;
  MHD_suspend_connection(c);
  if (pool_push(s, &st->job)) cancel_request(s, &st->job);
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  HttpServer *s = cls;
  ReqState *st = *con_cls;
  if (!st) {  /* uri_logged could not allocate */
    if (!(st = req_new(s, NULL))) return MHD_NO;
    *con_cls = st;
  }
  switch (atomic_load(&st->phase)) {
    case R_NEW:
      return begin(s, c, url, method, version, st);
    case R_BODY:
      if (!*upload_size) return dispatch(s, c, st);
      if (st->upload_path || st->upload_refused) {
        upload_piece(s, st, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
      }
      {
        size_t n = *upload_size;
        *upload_size = 0;
        if (st->too_big || st->body.len + n > s->cfg.max_body) {  /* chunked bodies have no Content-Length */
          st->too_big = 1;
          return MHD_YES;
        }
        buf_put(&st->body, upload, n);
        return st->body.oom ? MHD_NO : MHD_YES;
      }
    case R_READY:
      return finish(s, c, st);
    default:  /* answered early (swallow what still arrives), or queued */
      *upload_size = 0;
      return MHD_YES;
  }
}

/* The request line is in: its state starts here, with the URI as the client sent it. */
static void *uri_logged(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)c;
  return req_new(cls, uri);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)c; (void)toe;
  HttpServer *s = cls;
  ReqState *st = *con_cls;
  if (!st) return;
  /* (whatever sets status queued the answer and set t_queued with it) */
  if (s->cfg.observe && st->status) s->cfg.observe(s->cfg.app, st->label, st->method, st->status, st->t_queued - st->t0);
  conn_state(st->conn, C_HEADERS);  /* the next request's headers are due from now */
  req_free(st);
  *con_cls = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  HttpServer *s = cls;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    Conn *k = calloc(1, sizeof *k);
    if (!k) return;  /* untracked: only the idle timeout applies to it */
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    k->fd = fd ? fd->connect_fd : -1;
    const struct sockaddr *sa = ad ? ad->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
      memcpy(k->ip, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
      k->ip_len = 4;
    } else if (sa && sa->sa_family == AF_INET6) {
      memcpy(k->ip, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
      k->ip_len = 16;
    }
    conn_state(k, C_HEADERS);
    k->next = s->conns;
    if (s->conns) s->conns->prev = k;
    s->conns = k;
    *socket_context = k;
  } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
    Conn *k = *socket_context;
    if (!k) return;
    if (k->prev) k->prev->next = k->next;
    else s->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    free(k);
    *socket_context = NULL;
  }
}

/* libmicrohttpd's messages (refused connections, errors), at most 10 a second so a
** flood of refused clients cannot flood the log. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  HttpServer *s = cls;
  pthread_mutex_lock(&s->log_mu);
  double t = now_monotonic();
  if (t - s->log_second >= 1) {
    if (s->log_dropped) fprintf(stderr, "maskd serve: %u more libmicrohttpd messages left out\n", s->log_dropped);
    s->log_second = t;
    s->log_lines = s->log_dropped = 0;
  }
  if (s->log_lines++ < 10) {
    fputs("maskd serve: ", stderr);
    vfprintf(stderr, fmt, ap);
  } else {
    s->log_dropped++;
  }
  pthread_mutex_unlock(&s->log_mu);
}

/* ---- the loop ---- */

/* Every tick: queue the parked streams that are due, and close the connections past
** their header or body deadline. libmicrohttpd's own timeout is an idle timeout that
** every byte resets, and it has no call to close a connection, so a late connection
** is shut down (shutdown(2), both directions) here, on the loop thread: its socket
** is still open (libmicrohttpd closes sockets only on this thread, after telling
** on_connection), the client sees the end of the stream, and libmicrohttpd's next
** read of it returns end-of-file, so it closes and frees the connection itself. */
/* 1 when an upload's client has gone: it closed its side, nothing it sent is left unread
** and no bytes came for a second. libmicrohttpd (0.9.75, edge-triggered epoll) can miss
** an end of stream that arrives with the last bytes, which would keep the connection and
** its temporary file until the idle rule; this notices it within a tick or so. */
static int upload_client_gone(const Conn *k, double now) {
  if (now - k->since < 1.0) return 0;
  struct pollfd p = {.fd = k->fd, .events = POLLRDHUP};
  int unread = 0;
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP)) && ioctl(k->fd, FIONREAD, &unread) == 0 && unread == 0;
}

static void loop_tick(HttpServer *s, double now) {
  pthread_mutex_lock(&s->mu);
  for (Stream **pp = &s->parked; *pp;) {
    Stream *ss = *pp;
    if (ss->due > now) { pp = &ss->next_parked; continue; }
    *pp = ss->next_parked;
    append_locked(s, &ss->job);
  }
  pthread_mutex_unlock(&s->mu);
  for (Conn *k = s->conns; k; k = k->next) {
    if (k->closing || k->fd < 0) continue;
    double limit = k->state == C_HEADERS ? s->cfg.header_timeout_s
                   : k->state == C_BODY  ? s->cfg.body_timeout_s
                   : k->state == C_UPLOAD ? s->cfg.upload_idle_s
                                          : 0;
    if ((limit > 0 && now - k->since > limit) || (k->state == C_UPLOAD && upload_client_gone(k, now))) {
      shutdown(k->fd, SHUT_RDWR);
      k->closing = 1;
    }
  }
}

static int any_busy(const HttpServer *s) {
  for (const Conn *k = s->conns; k; k = k->next)
    if (k->state == C_BUSY && !k->closing) return 1;
  return 0;
}

/* Waits up to max_ms, or less when libmicrohttpd has work due sooner, for network
** events or a wake-up, then lets libmicrohttpd do what is ready. */
static void loop_turn(HttpServer *s, int max_ms) {
  MHD_UNSIGNED_LONG_LONG due;
  int ms = max_ms;
  if (MHD_get_timeout(s->d, &due) == MHD_YES && due < (MHD_UNSIGNED_LONG_LONG)ms) ms = (int)due;
  struct epoll_event ev[2];
  int n = epoll_wait(s->poll_fd, ev, 2, ms);
  for (int i = 0; i < n; i++)
    if (ev[i].data.fd == s->wake_fd) {
      uint64_t count;
      ssize_t r = read(s->wake_fd, &count, sizeof count);
      (void)r;
    }
  MHD_run(s->d);
}

static void *loop_main(void *arg) {
  HttpServer *s = arg;
  double next = now_monotonic();
  while (!atomic_load(&s->loop_quit)) {
    loop_turn(s, TICK_MS);
    double t = now_monotonic();
    if (t >= next) {
      loop_tick(s, t);
      next = t + TICK_MS / 1e3;
    }
  }
  /* Stopping: a moment for the last answers (503s, the ends of streams) to go out. */
  double end = now_monotonic() + 0.5;
  while (any_busy(s) && now_monotonic() < end) loop_turn(s, 10);
  return NULL;
}

/* ---- start and stop ---- */

static void server_free(HttpServer *s) {
  if (s->wake_fd >= 0) close(s->wake_fd);
  if (s->poll_fd >= 0) close(s->poll_fd);
  http_guard_free(s->guard);
  for (unsigned i = 0; i < s->n_cv; i++) pthread_cond_destroy(&s->workers[i].cv);
  free(s->workers);
  free(s->idle);
  free(s->stream_ips);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->log_mu);
  free(s);
}

/* Removes the temporary files a crashed server left in the upload folder: named as
** upload_begin names them and untouched for an hour (a live upload writes at least
** every upload_idle_s, and another server may share the folder). */
static void sweep_uploads(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  time_t old = time(NULL) - 3600;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "upload-", 7) || strlen(e->d_name) != 13) continue;
    struct stat sb;
    if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sb.st_mode) && sb.st_mtime < old)
      unlinkat(dirfd(d), e->d_name, 0);
  }
  closedir(d);
}

HttpServer *http_start(const HttpConfig *cfg, Err *err) {
  if (cfg->port < 0 || cfg->port > 65535) { err_set(err, "port %d out of range", cfg->port); return NULL; }
  if (cfg->upload_dir) {
    struct stat sb;
    if (stat(cfg->upload_dir, &sb) || !S_ISDIR(sb.st_mode)) {
      err_setk(err, ERR_IO, "upload folder %s: not a folder", cfg->upload_dir);
      return NULL;
    }
    sweep_uploads(cfg->upload_dir);
  }
  HttpServer *s = calloc(1, sizeof *s);
  if (!s) { err_set(err, "out of memory"); return NULL; }
  s->wake_fd = s->poll_fd = -1;
  s->cfg = *cfg;
  if (!s->cfg.host || !*s->cfg.host) s->cfg.host = "127.0.0.1";
  if (s->cfg.token && !*s->cfg.token) s->cfg.token = NULL;
  if (!s->cfg.handler_threads) s->cfg.handler_threads = 1;
  if (!s->cfg.max_streams) s->cfg.max_streams = 1;
  if (!s->cfg.max_uploads) s->cfg.max_uploads = 1;
  if (!(s->cfg.stream_poll_s > 0)) s->cfg.stream_poll_s = 1;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->log_mu, NULL);
  s->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  s->poll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (s->wake_fd < 0 || s->poll_fd < 0) { server_free(s); err_set(err, "cannot create the event loop's descriptors"); return NULL; }
  if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) != MHD_YES) {
    server_free(s);
    err_set(err, "this libmicrohttpd has no epoll support");
    return NULL;
  }
  s->stream_ips = calloc(s->cfg.max_streams, sizeof *s->stream_ips);
  s->workers = calloc(s->cfg.handler_threads, sizeof *s->workers);
  s->idle = calloc(s->cfg.handler_threads, sizeof *s->idle);
  if (!s->stream_ips || !s->workers || !s->idle) { server_free(s); err_set(err, "out of memory"); return NULL; }
  for (; s->n_cv < s->cfg.handler_threads; s->n_cv++) {
    s->workers[s->n_cv].s = s;
    pthread_cond_init(&s->workers[s->n_cv].cv, NULL);
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  /* External polling with epoll: loop_main waits on its descriptor and runs it. */
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (strchr(s->cfg.host, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET6, s->cfg.host, &a->sin6_addr) != 1) goto bad_host;
    flags |= MHD_USE_IPv6;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)cfg->port);
    if (inet_pton(AF_INET, s->cfg.host, &a->sin_addr) != 1) goto bad_host;
  }
  s->d = MHD_start_daemon(flags, (uint16_t)cfg->port, NULL, NULL, on_request, s,
                          MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->cfg.max_conns,
                          MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)s->cfg.max_conns_per_ip,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->cfg.timeout_s,
                          MHD_OPTION_URI_LOG_CALLBACK, uri_logged, s,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                          MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                          MHD_OPTION_END);
  if (!s->d) {
    err_set(err, "cannot listen on %s:%d (in use, or not an address of this machine)", s->cfg.host, cfg->port);
    server_free(s);
    return NULL;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = di ? di->port : cfg->port;
  const union MHD_DaemonInfo *ei = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
  struct epoll_event ev = {.events = EPOLLIN};
  ev.data.fd = ei ? ei->epoll_fd : -1;
  int polled = ei && epoll_ctl(s->poll_fd, EPOLL_CTL_ADD, ei->epoll_fd, &ev) == 0;
  ev.data.fd = s->wake_fd;
  if (!polled || epoll_ctl(s->poll_fd, EPOLL_CTL_ADD, s->wake_fd, &ev) != 0) {
    MHD_stop_daemon(s->d);
    server_free(s);
    err_set(err, "cannot watch libmicrohttpd's descriptors");
    return NULL;
  }
  s->guard = http_guard_new(s->cfg.host, s->port, s->cfg.token, s->cfg.allowed_hosts, s->cfg.n_allowed_hosts,
                            s->cfg.allowed_origins, s->cfg.n_allowed_origins, err);
  if (!s->guard) {
    MHD_stop_daemon(s->d);
    server_free(s);
    return NULL;
  }
  for (; s->n_workers < s->cfg.handler_threads; s->n_workers++)
    if (pthread_create(&s->workers[s->n_workers].t, NULL, worker_main, &s->workers[s->n_workers])) break;
  if (s->n_workers < s->cfg.handler_threads || pthread_create(&s->loop, NULL, loop_main, s)) {
    pool_close(s);
    for (unsigned i = 0; i < s->n_workers; i++) pthread_join(s->workers[i].t, NULL);
    MHD_stop_daemon(s->d);
    server_free(s);
    err_set(err, "cannot start the server's threads");
    return NULL;
  }
  return s;
bad_host:
  err_set(err, "--host '%s' is not a numeric IPv4 or IPv6 address", s->cfg.host);
  server_free(s);
  return NULL;
}

int http_port(const HttpServer *s) { return s->port; }

int http_stopping(const HttpServer *s) { return atomic_load(&s->stopping); }

void http_stop(HttpServer *s) {
  if (!s) return;
  atomic_store(&s->stopping, 1);
  /* Close the pool; what it has not started is answered (503) or ended without running. */
  pthread_mutex_lock(&s->mu);
  Job *queued = s->head;
  s->head = s->tail = NULL;
  Stream *parked = s->parked;
  s->parked = NULL;
  s->closed = 1;
  while (s->n_idle) wake_one_locked(s);
  pthread_mutex_unlock(&s->mu);
  while (queued) {
    Job *next = queued->next;
    queued->cancel(s, queued);
    queued = next;
  }
  while (parked) {
    Stream *next = parked->next_parked;
    end_stream(s, &parked->job);
    parked = next;
  }
  /* Running handlers finish and resume their connections; nothing is suspended after. */
  for (unsigned i = 0; i < s->n_workers; i++) pthread_join(s->workers[i].t, NULL);
  atomic_store(&s->loop_quit, 1);
  uint64_t one = 1;
  ssize_t n = write(s->wake_fd, &one, sizeof one);
  (void)n;
  pthread_join(s->loop, NULL);
  MHD_stop_daemon(s->d);
  server_free(s);
}
