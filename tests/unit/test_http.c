/* The HTTP layer (server/http/http.h) driven over real sockets by a small raw client:
** routing and captures, 404/405/401/400/422/413/415 as JSON errors, chunked bodies,
** HEAD, server-sent streams; and the attacks it must stand, each as the attacker's
** request with the refusal and what must not have happened: cross-site requests
** (foreign Host, Origin, Sec-Fetch-Site, form content types), %00 and non-UTF-8
** paths, slow clients past the header and body deadlines, too many connections
** or streams from one address, every handler thread busy (/healthz still answers,
** others wait their turn in arrival order), clients that leave while queued, and
** stopping under all of it at once. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "engine/core/now.h"
#include "server/http/http.h"
#include "server/http/http_guard.h"
#include "server/http/http_ranged.h"
#include "server/http/metrics.h"
#include "tests/unit/check.h"

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
}

/* ---- test routes ---- */

static HttpServer *server;
static atomic_int writes;   /* POST /json handled: a refused request must not move it */

static void h_echo2(void *app, HttpReq *rq, HttpRes *rs) {
  const char *q = http_query(rq, "q");
  http_json(rs, 200, json_pack("{s:s, s:s, s:s?, s:i}", "a", rq->params[0], "b", rq->params[1], "q", q, "n",
                               rq->n_params));
}
static void h_echo1(void *app, HttpReq *rq, HttpRes *rs) {
  http_json(rs, 200, json_pack("{s:s, s:i}", "a", rq->params[0], "n", rq->n_params));
}
static void h_health(void *app, HttpReq *rq, HttpRes *rs) { http_json(rs, 200, json_pack("{s:s}", "status", "ok")); }
static void h_json(void *app, HttpReq *rq, HttpRes *rs) {
  json_t *o = http_body_object(rq, rs);
  if (!o) return;
  json_t *n = json_object_get(o, "n");
  if (!json_is_integer(n)) {
    http_error(rs, 422, "field 'n' must be an integer",
               json_pack("{s:s, s:s}", "field", "n", "got", n ? http_json_type(n) : "missing"));
  } else {
    atomic_fetch_add(&writes, 1);
    http_json(rs, 200, json_pack("{s:I, s:I}", "n", json_integer_value(n), "len", (json_int_t)rq->body_len));
  }
  json_decref(o);
}
static void h_slow(void *app, HttpReq *rq, HttpRes *rs) {
  usleep(400 * 1000);
  http_json(rs, 200, json_pack("{s:b}", "slept", 1));
}
static void h_silent(void *app, HttpReq *rq, HttpRes *rs) { /* answers nothing: the layer must */ }

/* GET /block: holds its handler thread until released (or the server stops). */
static pthread_mutex_t block_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t block_cv = PTHREAD_COND_INITIALIZER;
static int block_open;
static atomic_int blocked;
static void h_block(void *app, HttpReq *rq, HttpRes *rs) {
  atomic_fetch_add(&blocked, 1);
  pthread_mutex_lock(&block_mu);
  while (!block_open && !http_stopping(server)) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 20 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&block_cv, &block_mu, &ts);
  }
  pthread_mutex_unlock(&block_mu);
  atomic_fetch_sub(&blocked, 1);
  http_json(rs, 200, json_pack("{s:b}", "released", 1));
}
static void block_set(int open) {
  pthread_mutex_lock(&block_mu);
  block_open = open;
  pthread_cond_broadcast(&block_cv);
  pthread_mutex_unlock(&block_mu);
}

/* GET /order/{n}: records the order handlers ran in. */
static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static char order[64];
static void h_order(void *app, HttpReq *rq, HttpRes *rs) {
  pthread_mutex_lock(&order_mu);
  strncat(order, rq->params[0], sizeof order - strlen(order) - 1);
  pthread_mutex_unlock(&order_mu);
  http_json(rs, 200, json_pack("{s:s}", "n", rq->params[0]));
}

/* GET /stream: three events, with a "nothing yet" before each, then the end. */
typedef struct Stream { int i, idle; int forever; } Stream;
static atomic_int streams_freed;
static ssize_t stream_fn(void *ctx, char *buf, size_t max) {
  Stream *s = ctx;
  if (s->forever) return ++s->idle % 2 ? 0 : snprintf(buf, max, ": keep-alive\n\n");
  if (s->i == 3) return -1;
  if (!s->idle) { s->idle = 1; return 0; }
  s->idle = 0;
  return snprintf(buf, max, "event: tick\ndata: {\"i\":%d}\n\n", s->i++);
}
static void stream_free_fn(void *ctx) { free(ctx); atomic_fetch_add(&streams_freed, 1); }
static void h_stream(void *app, HttpReq *rq, HttpRes *rs) {
  Stream *s = calloc(1, sizeof *s);
  s->forever = !strcmp(rq->path, "/forever");
  rs->status = 200;
  rs->content_type = "text/event-stream";
  rs->stream = stream_fn;
  rs->stream_ctx = s;
  rs->stream_free = stream_free_fn;
}

static atomic_int observed[600];
/* The seconds the observer was given for the last GET /forever (-1: none yet). */
static pthread_mutex_t forever_mu = PTHREAD_MUTEX_INITIALIZER;
static double forever_seconds = -1;
static void observe(void *app, const char *route, const char *method, int status, double s) {
  if (status >= 0 && status < 600) atomic_fetch_add(&observed[status], 1);
  if (!strcmp(route, "/forever")) {
    pthread_mutex_lock(&forever_mu);
    forever_seconds = s;
    pthread_mutex_unlock(&forever_mu);
  }
}

static const HttpRoute routes[] = {
  {"GET", "/echo/{a}/{b}", h_echo2, 0},
  {"GET", "/echo/{a}", h_echo1, 0},
  {"GET", "/rest/{a}/{b+}", h_echo2, 0},
  {"POST", "/json", h_json, HTTP_WRITE},
  {"PUT", "/json", h_json, 0},
  {"GET", "/slow", h_slow, 0},
  {"GET", "/block", h_block, 0},
  {"GET", "/order/{n}", h_order, 0},
  {"GET", "/silent", h_silent, 0},
  {"GET", "/stream", h_stream, 0},
  {"GET", "/forever", h_stream, 0},
  {"GET", "/healthz", h_health, HTTP_OPEN | HTTP_INLINE},
};

/* POST /upload (HTTP_UPLOAD): what the handler saw of the temporary file; ?keep=1
** renames it to "kept" beside it (a handler may move the file away). */
static char upload_dir[256];
static void h_upload(void *app, HttpReq *rq, HttpRes *rs) {
  struct stat sb;
  char text[64] = "";
  int ok = rq->upload_path && stat(rq->upload_path, &sb) == 0 && (sb.st_mode & 0777) == 0600 &&
           (unsigned long long)sb.st_size == rq->upload_bytes && rq->body_len == 0;
  FILE *f = rq->upload_path ? fopen(rq->upload_path, "rb") : NULL;
  if (f) { text[fread(text, 1, sizeof text - 1, f)] = '\0'; fclose(f); }
  if (http_query(rq, "keep")) {
    char to[300];
    snprintf(to, sizeof to, "%s/kept", upload_dir);
    ok = ok && rename(rq->upload_path, to) == 0;
  }
  http_json(rs, 200, json_pack("{s:b, s:I, s:s}", "ok", ok, "bytes", (json_int_t)rq->upload_bytes, "text", text));
}
static const HttpRoute upload_routes[] = {
  {"POST", "/upload", h_upload, HTTP_WRITE | HTTP_UPLOAD},
  {"GET", "/healthz", h_health, HTTP_OPEN | HTTP_INLINE},
};

/* ---- a raw client ---- */

static int port;

/* A connection from the loopback address src (all of 127/8 is this machine). */
static int dial_from(const char *src, double timeout) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (src) {
    struct sockaddr_in b = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &b.sin_addr);
    if (bind(fd, (struct sockaddr *)&b, sizeof b) != 0) { close(fd); return -1; }
  }
  struct timeval tv = {(time_t)timeout, (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
  return fd;
}
static int dial(void) { return dial_from(NULL, 5); }

typedef struct Resp {
  int status;
  char raw[65536];
  size_t len;
  const char *body;
  double seconds;
} Resp;

/* Reads until the server closes (requests say Connection: close). */
static void slurp(int fd, Resp *r) {
  r->len = 0;
  for (;;) {
    ssize_t n = recv(fd, r->raw + r->len, sizeof r->raw - 1 - r->len, 0);
    if (n <= 0) break;
    r->len += (size_t)n;
  }
  r->raw[r->len] = '\0';
  r->status = 0;
  sscanf(r->raw, "HTTP/1.%*d %d", &r->status);
  const char *e = strstr(r->raw, "\r\n\r\n");
  r->body = e ? e + 4 : "";
}

static void send_all(int fd, const char *raw, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = send(fd, raw + off, len - off, MSG_NOSIGNAL);
    if (n <= 0) break;  /* the server may answer and close before it all went out (413) */
    off += (size_t)n;
  }
}

static int request_from(const char *src, const char *raw, size_t len, Resp *r) {
  memset(r, 0, sizeof *r);
  r->body = "";
  double t0 = now_monotonic();
  int fd = dial_from(src, 5);
  if (fd < 0) return -1;
  send_all(fd, raw, len);
  slurp(fd, r);
  close(fd);
  r->seconds = now_monotonic() - t0;
  return 0;
}
static int request(const char *raw, size_t len, Resp *r) { return request_from(NULL, raw, len, r); }

/* METHOD PATH with the right Host, Connection: close, headers (each ending \r\n), and a
** body when given (Content-Length, and application/json unless headers name a type). */
static int get(const char *method, const char *path, const char *headers, const char *body, Resp *r) {
  char buf[8192];
  int n = snprintf(buf, sizeof buf, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s", method,
                   path, port, headers ? headers : "");
  if (body)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%sContent-Length: %zu\r\n\r\n%s",
                  headers && strcasestr(headers, "Content-Type:") ? "" : "Content-Type: application/json\r\n",
                  strlen(body), body);
  else
    n += snprintf(buf + n, sizeof buf - (size_t)n, "\r\n");
  return request(buf, (size_t)n, r);
}

/* The same with every header given (no Host added). */
static int raw_get(const char *src, const char *method, const char *path, const char *headers, Resp *r) {
  char buf[4096];
  int n = snprintf(buf, sizeof buf, "%s %s HTTP/1.1\r\nConnection: close\r\n%s\r\n", method, path, headers);
  return request_from(src, buf, (size_t)n, r);
}

static const char *header(const Resp *r, const char *name) {
  static char v[512];
  const char *h = r->raw;
  size_t nl = strlen(name);
  while ((h = strstr(h, "\r\n")) && h < r->body) {
    h += 2;
    if (!strncasecmp(h, name, nl) && h[nl] == ':') {
      const char *s = h + nl + 1;
      while (*s == ' ') s++;
      size_t k = strcspn(s, "\r");
      if (k >= sizeof v) k = sizeof v - 1;
      memcpy(v, s, k);
      v[k] = '\0';
      return v;
    }
  }
  return NULL;
}

/* The body as JSON, or NULL. */
static json_t *body_json(const Resp *r) { return json_loads(r->body, JSON_DECODE_ANY, NULL); }

/* An error answer: the status, a JSON object with a string "error" containing
** want (may be NULL) and a "detail" member. */
static int is_error(const Resp *r, int status, const char *want) {
  json_t *j = body_json(r);
  int ok = r->status == status && json_is_object(j) && json_is_string(json_object_get(j, "error")) &&
           json_object_get(j, "detail") != NULL &&
           (!want || strstr(json_string_value(json_object_get(j, "error")), want));
  json_decref(j);
  return ok;
}

static int healthy(void) {
  Resp r;
  return get("GET", "/echo/up", NULL, NULL, &r) == 0 && r.status == 200;
}

/* /healthz from 127.0.0.1 within a second. */
static int healthz_fast(double *took) {
  Resp r;
  double t0 = now_monotonic();
  int ok = get("GET", "/healthz", NULL, NULL, &r) == 0 && r.status == 200;
  *took = now_monotonic() - t0;
  return ok && *took < 1.0;
}

typedef struct Call {
  pthread_t t;
  const char *path;
  Resp r;
} Call;
static void *call_thread(void *arg) {
  Call *c = arg;
  get("GET", c->path, NULL, NULL, &c->r);
  return NULL;
}
static void call_start(Call *c, const char *path) {
  c->path = path;
  pthread_create(&c->t, NULL, call_thread, c);
}

/* http.h's comment of http_default_config() states its limits: its numbers are the
** code's (it said 64 connections per address where the code, README and --help say 128). */
static void test_default_config_doc(void) {
  FILE *f = fopen("server/http/http.h", "r");
  char text[65536], flat[65536];
  size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
  if (f) fclose(f);
  text[n] = '\0';
  const char *doc = strstr(text, "/* Defaults:");
  const char *end = doc ? strstr(doc, "*/") : NULL;
  size_t m = 0;
  /* The comment as one line: its line breaks, leading stars and runs of spaces one space. */
  for (const char *p = doc; p && p < end; p++) {
    char ch = (*p == '\n' || *p == '*') ? ' ' : *p;
    if (ch == ' ' && m && flat[m - 1] == ' ') continue;
    flat[m++] = ch;
  }
  flat[m] = '\0';
  HttpConfig c = http_default_config();
  char conns[96], streams[96], threads[64];
  snprintf(conns, sizeof conns, "%u connections and %u per address", c.max_conns, c.max_conns_per_ip);
  snprintf(streams, sizeof streams, "%u streams and %u per address", c.max_streams, c.max_streams_per_ip);
  snprintf(threads, sizeof threads, "%u handler threads", c.handler_threads);
  check(doc && end && strstr(flat, conns) && strstr(flat, streams) && strstr(flat, threads), "default_config_doc",
        "http.h says \"%s\"; the code: %s, %s, %s", flat, conns, streams, threads);
}

/* An info family's label values are escaped as the text format requires (a CPU
** model name is outside text as far as the exporter knows); a bad name is refused;
** setting it again replaces it. */
static void test_metrics_info(void) {
  Metrics *m = metrics_new();
  const char *labels[] = {"isa", "avx2", "cpu", "Odd \"CPU\" \\ v2\nx", NULL};
  int rc = m ? metrics_info(m, "maskd_test_info", "A test.", labels) : -1;
  char *text = rc == 0 ? metrics_render(m, NULL) : NULL;
  check(text && strstr(text, "# TYPE maskd_test_info gauge\nmaskd_test_info{isa=\"avx2\",cpu=\"Odd \\\"CPU\\\" \\\\ v2\\nx\"} 1\n"),
        "metrics_info_escapes_labels", "%s", text ? text : "(no text)");
  free(text);
  const char *bad_key[] = {"cpu model", "x", NULL};
  check(m && metrics_info(m, "maskd_bad", "", bad_key) == -1 && metrics_info(m, "9bad", "", NULL) == -1,
        "metrics_info_refuses_bad_names", "accepted");
  const char *again[] = {"isa", "avx512", NULL};
  text = m && metrics_info(m, "maskd_test_info", "A test.", again) == 0 ? metrics_render(m, NULL) : NULL;
  check(text && strstr(text, "maskd_test_info{isa=\"avx512\"} 1\n") && !strstr(text, "avx2") &&
        !strstr(text, "maskd_bad"), "metrics_info_replaces", "%s", text ? text : "(no text)");
  free(text);
  metrics_free(m);
}

/* An error message that is not valid UTF-8 (a name cut inside a character by "%.64s",
** as tests/fuzz/fuzz_routes found) still reaches the client as "error", each bad byte
** written as \xNN; valid text passes unchanged. */
static void test_error_text(void) {
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  http_error(&rs, 422, "no corpus named \"caf\xc3\" here \xe2\x96", json_pack("{s:s}", "field", "input"));
  json_t *v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
  const char *e = json_string_value(json_object_get(v, "error"));
  check(rs.status == 422 && e && !strcmp(e, "no corpus named \"caf\\xC3\" here \\xE2\\x96") &&
            json_is_object(json_object_get(v, "detail")),
        "http_error_keeps_non_utf8_message", "%s", rs.body ? rs.body : "(no body)");
  json_decref(v);
  free(rs.body);
  memset(&rs, 0, sizeof rs);
  http_errorf(&rs, 400, "plain \xc3\xa9 text %d", 7);
  v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
  e = json_string_value(json_object_get(v, "error"));
  check(rs.status == 400 && e && !strcmp(e, "plain \xc3\xa9 text 7"), "http_error_utf8_message_unchanged", "%s", rs.body ? rs.body : "");
  json_decref(v);
  free(rs.body);
}

/* Range headers (RFC 9110 14.1.2) over a 100-byte body: each single-range form, the
** clamped end, what is unsatisfiable (-1: 416), and what is ignored (0: the whole body);
** If-None-Match lists; http_res_header replacing a header of the same name. */
static void test_ranges(void) {
  static const struct { const char *h; size_t len; int r; size_t off, n; } want[] = {
    {NULL, 100, 0, 0, 0}, {"bytes=0-0", 100, 1, 0, 1}, {"bytes=10-19", 100, 1, 10, 10}, {"bytes=90-", 100, 1, 90, 10},
    {"bytes=-5", 100, 1, 95, 5}, {"bytes=-500", 100, 1, 0, 100}, {"bytes=50-999", 100, 1, 50, 50},
    {"BYTES=1-2", 100, 1, 1, 2}, {"bytes=100-", 100, -1, 0, 0}, {"bytes=100-200", 100, -1, 0, 0},
    {"bytes=-0", 100, -1, 0, 0}, {"bytes=0-", 0, -1, 0, 0}, {"bytes=5-1", 100, 0, 0, 0}, {"bytes=0-1,5-6", 100, 0, 0, 0},
    {"items=0-1", 100, 0, 0, 0}, {"bytes=x-1", 100, 0, 0, 0}, {"bytes=1-2x", 100, 0, 0, 0}, {"bytes=-", 100, 0, 0, 0},
    /* Numbers past 64 bits are as large as any: an end clamped, a suffix the whole, a start past the body. */
    {"bytes=0-99999999999999999999", 100, 1, 0, 100}, {"bytes=-99999999999999999999", 100, 1, 0, 100},
    {"bytes=99999999999999999999-", 100, -1, 0, 0}, {"bytes=99999999999999999999-99999999999999999999", 100, -1, 0, 0}};
  int bad = -1;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    size_t off = 0, n = 0;
    int r = http_range_parse(want[i].h, want[i].len, &off, &n);
    if (r != want[i].r || (r == 1 && (off != want[i].off || n != want[i].n))) { bad = (int)i; break; }
  }
  check(bad < 0, "http_range_parse_forms", "case %d (%s)", bad, bad >= 0 && want[bad].h ? want[bad].h : "");
  check(http_etag_matches("\"a\"", "\"a\"") && http_etag_matches("\"b\", W/\"a\"", "\"a\"") &&
            http_etag_matches("*", "\"a\"") && !http_etag_matches("\"b\"", "\"a\"") && !http_etag_matches(NULL, "\"a\"") &&
            !http_etag_matches("\"ab\"", "\"a\""),
        "http_etag_matches_lists", "");
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  http_res_header(&rs, "X-A", "1");
  http_res_header(&rs, "x-a", "2");
  check(rs.n_headers == 1 && !strcmp(rs.headers[0].value, "2"), "http_res_header_replaces", "%d", rs.n_headers);
}

/* The one table from an error's kind to its status (http_status_of), and
** http_error_from answering with it: a route hands over the Err, never a status. */
static void test_error_kinds(void) {
  static const struct { ErrKind kind; int status; } want[] = {
    {ERR_BAD_INPUT, 400}, {ERR_NOT_FOUND, 404}, {ERR_CONFLICT, 409}, {ERR_TOO_LARGE, 413}, {ERR_INVALID, 422},
    {ERR_INTERNAL, 500}, {ERR_IO, 500}, {ERR_NOMEM, 500}, {ERR_NONE, 500}, {ERR_BUSY, 503}};
  int bad = -1;
  for (size_t i = 0; i < sizeof want / sizeof want[0] && bad < 0; i++)
    if (http_status_of(want[i].kind) != want[i].status) bad = (int)i;
  check(bad < 0, "http_status_of_table", "%s gives %d", bad < 0 ? "" : err_kind_name(want[bad].kind),
        bad < 0 ? 0 : http_status_of(want[bad].kind));
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  Err e = {0};
  err_setk(&e, ERR_NOT_FOUND, "run \"x\" does not exist");
  err_prefix(&e, "resume");
  http_error_from(&rs, &e, NULL, json_pack("{s:s}", "run", "x"));
  json_t *v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
  const char *m = json_string_value(json_object_get(v, "error"));
  check(rs.status == 404 && m && !strcmp(m, "resume: run \"x\" does not exist") && json_is_object(json_object_get(v, "detail")),
        "http_error_from_kind_and_message", "%d %s", rs.status, rs.body ? rs.body : "(no body)");
  json_decref(v);
  free(rs.body);
  memset(&rs, 0, sizeof rs);
  err_set(&e, "something unclassified");
  http_error_from(&rs, &e, "cannot list runs", NULL);
  v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
  m = json_string_value(json_object_get(v, "error"));
  check(rs.status == 500 && m && !strcmp(m, "cannot list runs"), "http_error_from_unclassified_is_500", "%d %s", rs.status,
        rs.body ? rs.body : "(no body)");
  json_decref(v);
  free(rs.body);
  /* A busy store (another process's write transaction outlasted the busy timeout) is
  ** no server failure: 503 with Retry-After, which clients retry. */
  memset(&rs, 0, sizeof rs);
  err_setk(&e, ERR_BUSY, "store: database is locked");
  http_error_from(&rs, &e, NULL, NULL);
  const char *ra = NULL;
  for (int i = 0; i < rs.n_headers; i++)
    if (!strcasecmp(rs.headers[i].name, "Retry-After")) ra = rs.headers[i].value;
  check(rs.status == 503 && ra && atoi(ra) > 0, "http_error_from_busy_is_503_retry_after", "%d, Retry-After %s", rs.status,
        ra ? ra : "(none)");
  free(rs.body);
}

/* Seconds until the server closes fd (recv returns 0 or an error), at most limit. */
static double until_closed(int fd, double limit) {
  double t0 = now_monotonic();
  char b[512];
  while (now_monotonic() - t0 < limit) {
    ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return now_monotonic() - t0;
    sleep_s(0.01);
  }
  return limit;
}

/* A slow client: sends one byte of a request line then header bytes every gap
** seconds, until the server closes it; returns how long it was kept. */
static double drip(int fd, const char *text, double gap, double limit) {
  double t0 = now_monotonic();
  for (size_t i = 0; now_monotonic() - t0 < limit; i = (i + 1) % strlen(text)) {
    if (send(fd, text + i, 1, MSG_NOSIGNAL) != 1) break;
    char b[512];
    ssize_t n = recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) break;
    sleep_s(gap);
  }
  return now_monotonic() - t0;
}

/* ---- the checks ---- */

static void test_routing(void) {
  Resp r;
  json_t *j;
  get("GET", "/echo/x%20y/b?q=hello%21", NULL, NULL, &r);
  j = body_json(&r);
  check(r.status == 200 && j && !strcmp(json_string_value(json_object_get(j, "a")), "x y") &&
            !strcmp(json_string_value(json_object_get(j, "b")), "b") &&
            !strcmp(json_string_value(json_object_get(j, "q")), "hello!") &&
            json_integer_value(json_object_get(j, "n")) == 2,
        "route_captures", "status %d body %s", r.status, r.body);
  json_decref(j);
  check(header(&r, "Content-Type") && !strcmp(header(&r, "Content-Type"), "application/json"), "json_content_type",
        "%s", header(&r, "Content-Type"));
  get("GET", "/echo/one", NULL, NULL, &r);
  j = body_json(&r);
  check(r.status == 200 && json_integer_value(json_object_get(j, "n")) == 1, "route_shorter_pattern", "%d %s",
        r.status, r.body);
  json_decref(j);
  get("GET", "/echo/a/b/c", NULL, NULL, &r);
  check(is_error(&r, 404, "not found"), "404_longer_path", "%d %s", r.status, r.body);
  get("GET", "/echo//b", NULL, NULL, &r);
  check(is_error(&r, 404, NULL), "404_empty_segment", "%d %s", r.status, r.body);
  /* A last {b+} takes the rest of the path, decoded slashes too; never an empty segment. */
  get("GET", "/rest/x/p/q%2Fr/s", NULL, NULL, &r);
  j = body_json(&r);
  check(r.status == 200 && j && !strcmp(json_string_value(json_object_get(j, "a")), "x") &&
            !strcmp(json_string_value(json_object_get(j, "b")), "p/q/r/s") && json_integer_value(json_object_get(j, "n")) == 2,
        "route_rest_capture", "%d %s", r.status, r.body);
  json_decref(j);
  get("GET", "/rest/x/p", NULL, NULL, &r);
  j = body_json(&r);
  check(r.status == 200 && j && !strcmp(json_string_value(json_object_get(j, "b")), "p"), "route_rest_one_segment", "%d %s",
        r.status, r.body);
  json_decref(j);
  int bad = 0;
  const char *empty[] = {"/rest/x", "/rest/x/", "/rest/x/p/", "/rest/x/p//q", "/rest//p"};
  for (size_t i = 0; i < sizeof empty / sizeof *empty; i++) {
    get("GET", empty[i], NULL, NULL, &r);
    if (r.status != 404) bad = 1;
  }
  check(!bad, "route_rest_no_empty_segment", "%d %s", r.status, r.body);
  get("GET", "/nope", NULL, NULL, &r);
  check(is_error(&r, 404, "not found"), "404_unknown", "%d %s", r.status, r.body);
  get("GET", "/jsonx", NULL, NULL, &r);
  check(is_error(&r, 404, NULL), "404_prefix_is_not_a_match", "%d %s", r.status, r.body);

  /* Wrong methods: 405 with Allow listing what the path takes. */
  get("DELETE", "/echo/a/b", NULL, NULL, &r);
  check(is_error(&r, 405, "DELETE") && header(&r, "Allow") && !strcmp(header(&r, "Allow"), "GET, HEAD"),
        "405_allow_get", "%d allow=%s %s", r.status, header(&r, "Allow"), r.body);
  get("GET", "/json", NULL, NULL, &r);
  check(is_error(&r, 405, NULL) && header(&r, "Allow") && !strcmp(header(&r, "Allow"), "POST, PUT"),
        "405_allow_post_put", "%d allow=%s", r.status, header(&r, "Allow"));
}

static const char *auth = "Authorization: Bearer sekrit\r\n";

static void test_token_and_bodies(void) {
  Resp r;
  json_t *j;
  /* The token: state-changing routes need it, others and HTTP_OPEN don't. */
  get("POST", "/json", NULL, "{\"n\":1}", &r);
  check(is_error(&r, 401, "missing") && header(&r, "WWW-Authenticate"), "401_missing_token", "%d %s", r.status,
        r.body);
  get("POST", "/json", "Authorization: Bearer sekrix\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 401, "invalid"), "401_wrong_token", "%d %s", r.status, r.body);
  get("POST", "/json", "Authorization: Bearer sekri\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 401, NULL), "401_token_prefix", "%d %s", r.status, r.body);
  get("POST", "/json", "Authorization: Basic c2Vrcml0\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 401, NULL), "401_not_bearer", "%d %s", r.status, r.body);
  check(atomic_load(&writes) == 0, "401_nothing_written", "%d writes", atomic_load(&writes));
  get("POST", "/json", auth, "{\"n\":7}", &r);
  j = body_json(&r);
  check(r.status == 200 && json_integer_value(json_object_get(j, "n")) == 7 &&
            json_integer_value(json_object_get(j, "len")) == 7,
        "200_with_token", "%d %s", r.status, r.body);
  json_decref(j);
  get("PUT", "/json", NULL, "{\"n\":8}", &r);
  check(r.status == 200, "no_token_needed_without_write_flag", "%d %s", r.status, r.body);

  /* Bodies: malformed JSON, wrong shapes, wrong types. */
  get("POST", "/json", auth, "{\"n\":", &r);
  j = body_json(&r);
  check(is_error(&r, 400, "malformed JSON") && json_is_integer(json_object_get(json_object_get(j, "detail"), "column")),
        "400_malformed_json", "%d %s", r.status, r.body);
  json_decref(j);
  get("POST", "/json", auth, "{\"n\":1} trailing", &r);
  check(is_error(&r, 400, "malformed"), "400_trailing_garbage", "%d %s", r.status, r.body);
  get("POST", "/json", auth, "{\"n\":1,\"n\":2}", &r);
  check(is_error(&r, 400, "malformed"), "400_duplicate_keys", "%d %s", r.status, r.body);
  get("POST", "/json", auth, "", &r);
  check(is_error(&r, 400, "empty"), "400_empty_body", "%d %s", r.status, r.body);
  get("POST", "/json", auth, "[1,2]", &r);
  check(is_error(&r, 422, "object"), "422_not_an_object", "%d %s", r.status, r.body);
  get("POST", "/json", auth, "{\"n\":\"7\"}", &r);
  j = body_json(&r);
  check(is_error(&r, 422, "'n'") &&
            !strcmp(json_string_value(json_object_get(json_object_get(j, "detail"), "got")) ?: "", "string"),
        "422_wrong_type_names_field", "%d %s", r.status, r.body);
  json_decref(j);
  get("POST", "/json", auth, "{\"n\":1,\"s\":\"\\u0000\"}", &r);
  check(is_error(&r, 400, "malformed"), "400_nul_in_string", "%d %s", r.status, r.body);
  get("GET", "/echo/a/b", NULL, "xyz", &r);
  check(is_error(&r, 400, "no body"), "400_body_on_get", "%d %s", r.status, r.body);

  /* Size limits: declared (answered before reading) and chunked (counted as it comes). */
  static char big[20000];
  int n = snprintf(big, sizeof big,
                   "POST /json HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                   "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n", port, auth);
  memset(big + n, 'a', 5000);
  request(big, (size_t)n + 5000, &r);
  j = body_json(&r);
  check(is_error(&r, 413, "too large") && json_integer_value(json_object_get(json_object_get(j, "detail"),
                                                                              "max_bytes")) == 1000,
        "413_content_length", "%d %s", r.status, r.body);
  json_decref(j);
  const char *chunked = "POST /json HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
  n = snprintf(big, sizeof big, chunked, port, auth);
  for (int k = 0; k < 4; k++) {
    n += snprintf(big + n, sizeof big - (size_t)n, "190\r\n");
    memset(big + n, ' ', 400);
    n += 400;
    n += snprintf(big + n, sizeof big - (size_t)n, "\r\n");
  }
  n += snprintf(big + n, sizeof big - (size_t)n, "0\r\n\r\n");
  request(big, (size_t)n, &r);
  check(is_error(&r, 413, "too large"), "413_chunked", "%d %s", r.status, r.body);
  n = snprintf(big, sizeof big, chunked, port, auth);
  n += snprintf(big + n, sizeof big - (size_t)n, "4\r\n{\"n\"\r\n4\r\n:42}\r\n0\r\n\r\n");
  request(big, (size_t)n, &r);
  j = body_json(&r);
  check(r.status == 200 && json_integer_value(json_object_get(j, "n")) == 42 &&
            json_integer_value(json_object_get(j, "len")) == 8,
        "chunked_body_joined", "%d %s", r.status, r.body);
  json_decref(j);
  check(healthy(), "up_after_bodies", "server stopped answering");

  /* HEAD: GET's headers, no body. */
  get("HEAD", "/echo/a/b", NULL, NULL, &r);
  check(r.status == 200 && r.body[0] == '\0' && header(&r, "Content-Length") &&
            atoi(header(&r, "Content-Length")) > 0,
        "head", "%d len=%s body='%s'", r.status, header(&r, "Content-Length"), r.body);

  /* A handler that forgets to answer gets a 500, not a hang. */
  get("GET", "/silent", NULL, NULL, &r);
  check(is_error(&r, 500, "no answer"), "500_no_answer", "%d %s", r.status, r.body);
}

/* 1 when r's header name is exactly want (NULL: absent). */
static int header_is(const Resp *r, const char *name, const char *want) {
  const char *v = header(r, name);
  return want ? v && !strcmp(v, want) : v == NULL;
}

/* CORS: an allowed origin's page may use the API from the browser (preflight, then the
** request, each answer naming the origin); every other origin gets nothing to read. */
static void test_cors(void) {
  Resp r;
  char h[512];
  const char *pre = "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\n";
  snprintf(h, sizeof h, "Origin: https://proxy.example\r\n%s", pre);
  int before = atomic_load(&writes);
  get("OPTIONS", "/json", h, NULL, &r);
  check(r.status == 204 && header_is(&r, "Access-Control-Allow-Origin", "https://proxy.example") &&
            header_is(&r, "Access-Control-Allow-Headers", "authorization,content-type") && header_is(&r, "Vary", "Origin") &&
            header(&r, "Access-Control-Allow-Methods") && strstr(header(&r, "Access-Control-Allow-Methods"), "POST") &&
            header_is(&r, "Access-Control-Allow-Private-Network", NULL) && header_is(&r, "Access-Control-Allow-Credentials", NULL),
        "cors_preflight_allowed_origin", "%d %.300s", r.status, r.raw);
  check(atomic_load(&writes) == before, "cors_preflight_runs_nothing", "%d writes", atomic_load(&writes) - before);
  snprintf(h, sizeof h, "Origin: https://proxy.example\r\n%sAccess-Control-Request-Private-Network: true\r\n", pre);
  get("OPTIONS", "/echo/a", h, NULL, &r);
  check(r.status == 204 && header_is(&r, "Access-Control-Allow-Private-Network", "true") &&
            header_is(&r, "Access-Control-Allow-Methods", "GET, HEAD"),
        "cors_preflight_private_network", "%d %.300s", r.status, r.raw);
  snprintf(h, sizeof h, "Origin: https://proxy.example\r\nAccess-Control-Request-Method: GET\r\n"
                        "Access-Control-Request-Headers: x-a, x-b(c)\r\n");
  get("OPTIONS", "/echo/a", h, NULL, &r);
  check(r.status == 204 && header_is(&r, "Access-Control-Allow-Headers", NULL), "cors_preflight_odd_headers_not_echoed",
        "%d %.300s", r.status, r.raw);
  snprintf(h, sizeof h, "Origin: http://evil.example\r\n%s", pre);
  get("OPTIONS", "/json", h, NULL, &r);
  check(is_error(&r, 403, "Origin") && header_is(&r, "Access-Control-Allow-Origin", NULL), "cors_preflight_other_origin_403",
        "%d %.300s", r.status, r.raw);
  snprintf(h, sizeof h, "Origin: https://proxy.example\r\n%s", pre);
  get("OPTIONS", "/nowhere", h, NULL, &r);
  check(r.status == 404, "cors_preflight_unknown_path_404", "%d %.300s", r.status, r.raw);
  get("OPTIONS", "/json", "Origin: https://proxy.example\r\n", NULL, &r);
  check(r.status == 405, "cors_options_without_request_method_405", "%d %.300s", r.status, r.raw);

  /* The request itself, and an error a page must be able to read (the 401 says why). */
  snprintf(h, sizeof h, "Origin: https://proxy.example\r\n%s", auth);
  get("POST", "/json", h, "{\"n\":1}", &r);
  check(r.status == 200 && header_is(&r, "Access-Control-Allow-Origin", "https://proxy.example") &&
            header(&r, "Access-Control-Expose-Headers") && strstr(header(&r, "Access-Control-Expose-Headers"), "X-Repo-Commit") &&
            header_is(&r, "Access-Control-Allow-Credentials", NULL),
        "cors_request_allowed_origin", "%d %.400s", r.status, r.raw);
  get("POST", "/json", "Origin: https://PROXY.example/\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 401, NULL) && header_is(&r, "Access-Control-Allow-Origin", "https://PROXY.example/"),
        "cors_error_readable", "%d %.400s", r.status, r.raw);
  snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d\r\n", port);
  get("GET", "/echo/a", h, NULL, &r);
  check(r.status == 200 && header_is(&r, "Access-Control-Allow-Origin", NULL), "cors_none_for_own_origin", "%d %.300s",
        r.status, r.raw);
  get("GET", "/echo/a", NULL, NULL, &r);
  check(r.status == 200 && header_is(&r, "Access-Control-Allow-Origin", NULL), "cors_none_without_origin", "%d %.300s",
        r.status, r.raw);
}

/* Cross-site requests: what a page on another site can make a browser send. */
static void test_cross_site(void) {
  Resp r;
  char h[512];
  int before = atomic_load(&writes);
  /* A form on http://evil.example posting to the API (a "simple" request: no preflight). */
  get("POST", "/json", "Origin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\nContent-Type: text/plain\r\n",
      "{\"n\":1}", &r);
  check(is_error(&r, 403, "Origin"), "403_cross_site_text_plain", "%d %s", r.status, r.body);
  get("POST", "/json",
      "Origin: http://evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\n"
      "Authorization: Bearer sekrit\r\n",
      "n=1", &r);
  check(is_error(&r, 403, "Origin"), "403_cross_site_form_even_with_token", "%d %s", r.status, r.body);
  get("POST", "/json", "Origin: null\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 403, NULL), "403_origin_null", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d.evil.example\r\n%s", port, auth);
  get("POST", "/json", h, "{\"n\":1}", &r);
  check(is_error(&r, 403, NULL), "403_origin_lookalike", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Origin: http://127.0.0.1:%d\r\nSec-Fetch-Site: same-origin\r\n%s", port, auth);
  get("POST", "/json", h, "{\"n\":1}", &r);
  check(r.status == 200, "own_origin_accepted", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Origin: https://proxy.example\r\n%s", auth);
  get("POST", "/json", h, "{\"n\":1}", &r);
  check(r.status == 200, "allowed_origin_accepted", "%d %s", r.status, r.body);
  /* Without an Origin (curl, older browsers' forms): the content type still refuses it. */
  get("POST", "/json", "Content-Type: text/plain\r\nAuthorization: Bearer sekrit\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 415, "application/json"), "415_text_plain", "%d %s", r.status, r.body);
  get("POST", "/json", "Content-Type: application/x-www-form-urlencoded\r\nAuthorization: Bearer sekrit\r\n",
      "{\"n\":1}", &r);
  check(is_error(&r, 415, NULL), "415_form_urlencoded", "%d %s", r.status, r.body);
  get("POST", "/json", "Content-Type: multipart/form-data; boundary=x\r\nAuthorization: Bearer sekrit\r\n", "{}", &r);
  check(is_error(&r, 415, NULL), "415_multipart", "%d %s", r.status, r.body);
  get("POST", "/json", "Content-Type: application/jsonx\r\nAuthorization: Bearer sekrit\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 415, NULL), "415_lookalike_type", "%d %s", r.status, r.body);
  get("PUT", "/json", "Content-Type: Application/JSON; charset=utf-8\r\n", "{\"n\":1}", &r);
  check(r.status == 200, "json_type_with_charset", "%d %s", r.status, r.body);
  char raw[512];
  snprintf(raw, sizeof raw, "POST /json HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                            "Content-Length: 7\r\n\r\n{\"n\":1}", port, auth);
  request(raw, strlen(raw), &r);
  check(is_error(&r, 415, NULL), "415_no_content_type", "%d %s", r.status, r.body);
  /* Written: the own origin's, the allowed origin's and the PUT with a charset. */
  check(atomic_load(&writes) == before + 3, "cross_site_nothing_written", "%d writes, 3 expected",
        atomic_load(&writes) - before);

  /* DNS rebinding: the attacker's name resolves to 127.0.0.1; the Host says so. */
  raw_get(NULL, "GET", "/echo/a", "Host: evil.example\r\n", &r);
  check(is_error(&r, 403, "Host"), "403_rebinding_host", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Host: evil.example:%d\r\nContent-Type: application/json\r\nContent-Length: 7\r\n%s", port,
           auth);
  {
    char req[1024];
    int n = snprintf(req, sizeof req, "POST /json HTTP/1.1\r\nConnection: close\r\n%s\r\n{\"n\":1}", h);
    request(req, (size_t)n, &r);
  }
  check(is_error(&r, 403, "Host") && atomic_load(&writes) == before + 3, "403_rebinding_post", "%d %s", r.status,
        r.body);
  raw_get(NULL, "GET", "/echo/a", "Host: 127.0.0.1:1\r\n", &r);
  check(is_error(&r, 403, NULL), "403_host_other_port", "%d %s", r.status, r.body);
  raw_get(NULL, "GET", "/echo/a", "Host: 127.0.0.1\r\n", &r);
  check(is_error(&r, 403, NULL), "403_host_default_port", "%d %s", r.status, r.body);
  const char *fine[] = {"localhost", "LOCALHOST", "127.0.0.1", "[::1]", "[0:0::1]"};
  for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
    snprintf(h, sizeof h, "Host: %s:%d\r\n", fine[i], port);
    raw_get(NULL, "GET", "/echo/a", h, &r);
    check(r.status == 200, "host_loopback_accepted", "%s: %d %s", fine[i], r.status, r.body);
  }
  raw_get(NULL, "GET", "/echo/a", "Host: maskd.example\r\n", &r);
  check(r.status == 200, "allowed_host_any_port", "%d %s", r.status, r.body);
  raw_get(NULL, "GET", "/healthz", "Host: evil.example\r\nOrigin: http://evil.example\r\n", &r);
  check(r.status == 200, "healthz_any_host", "%d %s", r.status, r.body);
  {
    char req[] = "GET /echo/a HTTP/1.0\r\n\r\n";
    request(req, strlen(req), &r);
    check(r.status == 200, "http10_without_host", "%d %s", r.status, r.body);
  }

  /* Sec-Fetch-Site: a cross-site fetch or frame is refused, following a link is not. */
  snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: no-cors\r\n"
                        "Sec-Fetch-Dest: script\r\n", port);
  raw_get(NULL, "GET", "/echo/a", h, &r);
  check(is_error(&r, 403, "cross-site"), "403_cross_site_script", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n"
                        "Sec-Fetch-Dest: iframe\r\n", port);
  raw_get(NULL, "GET", "/echo/a", h, &r);
  check(is_error(&r, 403, NULL), "403_cross_site_frame", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nSec-Fetch-Site: same-site\r\nSec-Fetch-Mode: cors\r\n"
                        "Sec-Fetch-Dest: empty\r\n", port);
  raw_get(NULL, "GET", "/echo/a", h, &r);
  check(is_error(&r, 403, NULL), "403_same_site_other_port", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nSec-Fetch-Site: cross-site\r\nSec-Fetch-Mode: navigate\r\n"
                        "Sec-Fetch-Dest: document\r\n", port);
  raw_get(NULL, "GET", "/echo/a", h, &r);
  check(r.status == 200, "cross_site_link_followed", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Host: 127.0.0.1:%d\r\nSec-Fetch-Site: same-origin\r\nSec-Fetch-Mode: cors\r\n", port);
  raw_get(NULL, "GET", "/echo/a", h, &r);
  check(r.status == 200, "same_origin_fetch", "%d %s", r.status, r.body);
}

/* The token by URL and cookie, the way notebook servers log a browser in. */
static void test_login(void) {
  Resp r;
  char h[512], want[128], key[65] = "";
  int before = atomic_load(&writes);
  get("GET", "/echo/a?q=1&token=sekrit&z=%2F", NULL, NULL, &r);
  /* The cookie's value is a random key of 64 hex digits, not the token: a browser sends
  ** the cookies of 127.0.0.1 to every port, where any other server reads them. */
  int name_len = snprintf(want, sizeof want, "maskd_session_%d=", port);
  const char *cookie = header(&r, "Set-Cookie");
  int key_ok = cookie && !strncmp(cookie, want, (size_t)name_len) && strspn(cookie + name_len, "0123456789abcdef") == 64 &&
               !strcmp(cookie + name_len + 64, "; Path=/; HttpOnly; SameSite=Strict");
  if (key_ok) memcpy(key, cookie + name_len, 64);
  check(r.status == 303 && key_ok, "login_sets_cookie", "%d Set-Cookie: %s", r.status, cookie ? cookie : "(none)");
  const char *loc = header(&r, "Location");
  check(loc && !strcmp(loc, "/echo/a?q=1&z=%2F"), "login_redirects_without_token", "Location: %s",
        loc ? loc : "(none)");
  get("GET", "/echo/a?token=sekrix", NULL, NULL, &r);
  check(is_error(&r, 401, "token") && !header(&r, "Set-Cookie"), "login_wrong_token_401_no_cookie", "%d %s",
        r.status, r.raw);
  snprintf(h, sizeof h, "Cookie: other=1; maskd_session_%d=%s\r\n", port, key);
  get("POST", "/json", h, "{\"n\":3}", &r);
  check(r.status == 200 && atomic_load(&writes) == before + 1, "cookie_authenticates", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Cookie: maskd_session_%d=old\r\n", port);
  get("POST", "/json", h, "{\"n\":3}", &r);
  check(is_error(&r, 401, "cookie"), "cookie_wrong_401", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Cookie: maskd_session_%d=sekrit\r\n", port);
  get("POST", "/json", h, "{\"n\":3}", &r);
  check(is_error(&r, 401, "cookie"), "cookie_holding_the_token_401", "%d %s", r.status, r.body);
  snprintf(h, sizeof h, "Cookie: maskd_session_%d=%s\r\n", port + 1, key);
  get("POST", "/json", h, "{\"n\":3}", &r);
  check(is_error(&r, 401, NULL), "cookie_of_other_port_401", "%d %s", r.status, r.body);
  check(atomic_load(&writes) == before + 1, "login_nothing_else_written", "%d", atomic_load(&writes) - before);

  /* Where a login may send the browser: only a plain local path. */
  struct { const char *in, *out; } cases[] = {
    {"/?token=t", "/"},
    {"/runs?token=t&x=1", "/runs?x=1"},
    {"/a?x=1&token=t&token=u&y", "/a?x=1&y"},
    {"//evil.example/?token=t", "/"},
    {"/\\evil.example?token=t", "/"},
    {"/a b?token=t", "/"},
    {"/ok?x=\"<script>&token=t", "/ok"},
    {"/a?tokens=1&token", "/a?tokens=1"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = http_guard_strip_token(cases[i].in);
    check(got && !strcmp(got, cases[i].out), "login_redirect_target", "%s -> %s, not %s", cases[i].in,
          got ? got : "NULL", cases[i].out);
    free(got);
  }
}

/* Paths that would lose bytes or break the JSON of an answer. */
static void test_paths(void) {
  Resp r;
  get("GET", "/echo/a%00b", NULL, NULL, &r);
  check(is_error(&r, 400, "NUL"), "400_encoded_nul_path", "%d %s", r.status, r.body);
  get("GET", "/echo/a?q=x%00y", NULL, NULL, &r);
  check(is_error(&r, 400, "NUL"), "400_encoded_nul_query", "%d %s", r.status, r.body);
  get("GET", "/echo/%ff%fe", NULL, NULL, &r);
  check(is_error(&r, 400, "UTF-8"), "400_path_not_utf8", "%d %s", r.status, r.body);
  get("DELETE", "/echo/%c0%80", NULL, NULL, &r);
  check(is_error(&r, 400, "UTF-8"), "delete_overlong_utf8_json_error", "%d %s", r.status, r.body);
  get("GET", "/echo/%e2%82%ac", NULL, NULL, &r);
  check(r.status == 200 && strstr(r.body, "\xe2\x82\xac"), "utf8_path_fine", "%d %s", r.status, r.body);
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  http_error(&rs, 400, "bad \xff name", NULL);
  json_t *j = rs.body ? json_loadb(rs.body, rs.len, 0, NULL) : NULL;
  check(j && !strcmp(json_string_value(json_object_get(j, "error")) ?: "", "bad \\xFF name"), "error_text_escaped",
        "%.*s", (int)rs.len, rs.body ? rs.body : "");
  json_decref(j);
  free(rs.body);
}

static void test_stream(void) {
  Resp r;
  get("GET", "/stream", NULL, NULL, &r);
  check(r.status == 200 && strstr(r.raw, "text/event-stream") && strstr(r.body, "data: {\"i\":0}") &&
            strstr(r.body, "data: {\"i\":2}") && strstr(r.body, "data: {\"i\":0}") < strstr(r.body, "data: {\"i\":2}"),
        "sse_stream", "%d %s", r.status, r.raw);
  check(r.seconds < 1.0, "sse_stream_waits_are_ticks", "took %.2fs", r.seconds);
  sleep_s(0.05);
  check(atomic_load(&streams_freed) == 1, "sse_freed", "freed %d", atomic_load(&streams_freed));
}

/* An event stream held open 1.2 s is observed (the request-duration histogram of
** /metrics) with the time to its queued answer, not its whole life: one client's
** hour-long stream made the histogram's sum an hour. */
static void test_stream_observed_when_queued(void) {
  char req[256];
  int n = snprintf(req, sizeof req, "GET /forever HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);
  int fd = dial();
  send_all(fd, req, (size_t)n);
  char b[256];
  ssize_t got = recv(fd, b, sizeof b - 1, 0);
  sleep_s(1.2);
  close(fd);
  double seen = -1;
  for (int i = 0; i < 100 && seen < 0; i++) {   /* the server notices at its next keep-alive write */
    sleep_s(0.05);
    pthread_mutex_lock(&forever_mu);
    seen = forever_seconds;
    pthread_mutex_unlock(&forever_mu);
  }
  check(got > 0 && seen >= 0 && seen < 0.5, "sse_observed_when_queued", "a stream held 1.2 s observed as %.3f s", seen);
}

/* Every handler thread busy: /healthz (inline) answers, others wait their turn. */
static void test_pool(void) {
  /* A handler thread's answer goes out at once, not at the loop's next tick. */
  double t0 = now_monotonic();
  int ok = 1;
  for (int i = 0; i < 20; i++) ok &= healthy();
  double each = (now_monotonic() - t0) / 20;
  check(ok && each < 0.05, "pool_answer_prompt", "%.1f ms a request", each * 1e3);

  block_set(0);
  Call b[2], q;
  call_start(&b[0], "/block");
  call_start(&b[1], "/block");
  for (int i = 0; i < 200 && atomic_load(&blocked) < 2; i++) sleep_s(0.01);
  check(atomic_load(&blocked) == 2, "pool_all_busy", "%d handlers blocked", atomic_load(&blocked));
  call_start(&q, "/echo/queued");
  double took;
  int fast = 1;
  for (int i = 0; i < 5; i++) fast &= healthz_fast(&took);
  check(fast, "healthz_while_pool_busy", "last took %.2fs", took);
  sleep_s(0.2);
  check(q.r.status == 0, "queued_waits_for_a_thread", "answered %d while every thread was busy", q.r.status);
  block_set(1);
  pthread_join(b[0].t, NULL);
  pthread_join(b[1].t, NULL);
  pthread_join(q.t, NULL);
  check(b[0].r.status == 200 && b[1].r.status == 200 && q.r.status == 200, "pool_drains", "%d %d %d", b[0].r.status,
        b[1].r.status, q.r.status);

  /* Two overlap: two slow requests take about one's time. */
  Call s1, s2;
  t0 = now_monotonic();
  call_start(&s1, "/slow");
  call_start(&s2, "/slow");
  pthread_join(s1.t, NULL);
  pthread_join(s2.t, NULL);
  double dt = now_monotonic() - t0;
  check(s1.r.status == 200 && s2.r.status == 200 && dt < 0.75, "concurrent_requests", "statuses %d %d in %.3fs",
        s1.r.status, s2.r.status, dt);

  /* A client that leaves while its request waits, or while it runs: nothing leaks
  ** (ASan), the server goes on. */
  block_set(0);
  call_start(&b[0], "/block");
  call_start(&b[1], "/block");
  for (int i = 0; i < 200 && atomic_load(&blocked) < 2; i++) sleep_s(0.01);
  for (int k = 0; k < 3; k++) {
    int fd = dial();
    char req[256];
    int n = snprintf(req, sizeof req, "GET /echo/gone HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);
    send_all(fd, req, (size_t)n);
    sleep_s(0.02);
    close(fd);
  }
  block_set(1);
  pthread_join(b[0].t, NULL);
  pthread_join(b[1].t, NULL);
  check(healthy(), "up_after_clients_left_queued", "server stopped answering");
}

/* First in, first served: with one handler thread, requests run in arrival order. */
static void test_fifo(void) {
  block_set(0);
  Call b, o[5];
  call_start(&b, "/block");
  for (int i = 0; i < 200 && atomic_load(&blocked) < 1; i++) sleep_s(0.01);
  static const char *paths[] = {"/order/1", "/order/2", "/order/3", "/order/4", "/order/5"};
  for (int i = 0; i < 5; i++) {
    call_start(&o[i], paths[i]);
    sleep_s(0.05);
  }
  block_set(1);
  pthread_join(b.t, NULL);
  for (int i = 0; i < 5; i++) pthread_join(o[i].t, NULL);
  check(!strcmp(order, "12345"), "fifo_order", "ran in order %s", order);
}

/* Slow clients: the header and body deadlines hold however slowly bytes come. */
static void test_deadlines(void) {
  int fd = dial();
  double kept = drip(fd, "GET /echo/a HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0.2, 6);
  close(fd);
  check(kept > 0.8 && kept < 2.5, "header_deadline_slow_bytes", "a client sending a byte every 0.2s was kept %.2fs "
        "(header deadline 1s, idle timeout 3s)", kept);
  fd = dial();
  char req[256];
  int n = snprintf(req, sizeof req, "PUT /json HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                                    "Content-Length: 500\r\n\r\n", port);
  send_all(fd, req, (size_t)n);
  kept = drip(fd, "{\"n\":1,\"pad\":\"aaaaaaaaaaaaaaaaaa", 0.2, 6);
  close(fd);
  check(kept > 0.8 && kept < 2.5, "body_deadline_slow_bytes", "a body sent a byte every 0.2s was kept %.2fs", kept);
  /* Keep-alive: after its answer, a connection has the header deadline for its next request. */
  fd = dial();
  n = snprintf(req, sizeof req, "GET /echo/a HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);
  send_all(fd, req, (size_t)n);
  char b[1024];
  ssize_t got = recv(fd, b, sizeof b, 0);
  double idle = until_closed(fd, 6);
  close(fd);
  check(got > 0 && idle > 0.8 && idle < 2.5, "idle_keepalive_closed_at_header_deadline", "got %zd, closed after %.2fs",
        got, idle);
  check(healthy(), "up_after_slow_clients", "server stopped answering");
}

/* The files in upload_dir but "kept", counted. */
static int upload_files(void) {
  DIR *d = opendir(upload_dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    if (e->d_name[0] != '.' && strcmp(e->d_name, "kept")) n++;
  if (d) closedir(d);
  return n;
}

/* HTTP_UPLOAD (a server of its own: max_upload 5000, upload_idle_s 1): the body in a
** 0600 file the handler reads or moves, gone after; 415, 413 by Content-Length and
** chunked, 401; an upload that stalls is closed by the idle rule; nothing left behind. */
static void test_upload(void) {
  Resp r;
  json_t *j;
  const char *oct = "Authorization: Bearer sekrit\r\nContent-Type: application/octet-stream\r\n";
  get("POST", "/upload", oct, "hello upload", &r);
  j = body_json(&r);
  check(r.status == 200 && json_is_true(json_object_get(j, "ok")) && json_integer_value(json_object_get(j, "bytes")) == 12 &&
            !strcmp(json_string_value(json_object_get(j, "text")) ? json_string_value(json_object_get(j, "text")) : "", "hello upload"),
        "upload_handler_gets_file", "%d %s", r.status, r.body);
  json_decref(j);
  check(upload_files() == 0, "upload_file_removed_after", "%d files left", upload_files());
  get("POST", "/upload?keep=1", oct, "kept body", &r);
  char kept[300];
  snprintf(kept, sizeof kept, "%s/kept", upload_dir);
  struct stat sb;
  check(r.status == 200 && stat(kept, &sb) == 0 && sb.st_size == 9 && upload_files() == 0, "upload_handler_may_move_it",
        "%d %s", r.status, r.body);
  unlink(kept);
  get("POST", "/upload", "Authorization: Bearer sekrit\r\n", "{\"n\":1}", &r);
  check(is_error(&r, 415, "application/octet-stream"), "upload_415_json", "%d %s", r.status, r.body);
  get("POST", "/upload", "Content-Type: application/octet-stream\r\n", "text", &r);
  check(is_error(&r, 401, NULL), "upload_401_without_token", "%d %s", r.status, r.body);
  static char big[6001];
  memset(big, 'a', 6000);
  get("POST", "/upload", oct, big, &r);
  check(is_error(&r, 413, "too large") && r.seconds < 2, "upload_413_content_length", "%d %s", r.status, r.body);
  char raw[8192];
  int n = snprintf(raw, sizeof raw, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%s"
                   "Transfer-Encoding: chunked\r\n\r\n", port, oct);
  for (int i = 0; i < 3; i++) n += snprintf(raw + n, sizeof raw - (size_t)n, "7d0\r\n%.2000s\r\n", big);
  n += snprintf(raw + n, sizeof raw - (size_t)n, "0\r\n\r\n");
  request(raw, (size_t)n, &r);
  check(is_error(&r, 413, "too large"), "upload_413_chunked", "%d %s", r.status, r.body);
  check(upload_files() == 0, "upload_413_leaves_nothing", "%d files left", upload_files());
  /* A stalled upload: closed by the idle rule (1 s here), its file removed. */
  int fd = dial();
  n = snprintf(raw, sizeof raw, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sContent-Length: 100\r\n\r\nabc", port, oct);
  send_all(fd, raw, (size_t)n);
  double kept_s = until_closed(fd, 6);
  close(fd);
  check(kept_s > 0.8 && kept_s < 2.5, "upload_idle_rule", "a stalled upload was kept %.2fs (idle rule 1s)", kept_s);
  double t0 = now_monotonic();
  while (upload_files() && now_monotonic() - t0 < 2) sleep_s(0.05);
  check(upload_files() == 0, "upload_stalled_leaves_nothing", "%d files left", upload_files());
  /* max_uploads (2 here) receiving at once: a third answers 503; once they go, one passes. */
  int held[2];
  n = snprintf(raw, sizeof raw, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%sContent-Length: 100\r\n\r\nabc", port, oct);
  for (int i = 0; i < 2; i++) { held[i] = dial(); send_all(held[i], raw, (size_t)n); }
  t0 = now_monotonic();
  while (upload_files() < 2 && now_monotonic() - t0 < 2) sleep_s(0.02);
  get("POST", "/upload", oct, "third", &r);
  check(is_error(&r, 503, "too many uploads"), "upload_503_past_max_uploads", "%d %s", r.status, r.body);
  for (int i = 0; i < 2; i++) close(held[i]);
  t0 = now_monotonic();
  while (upload_files() && now_monotonic() - t0 < 4) sleep_s(0.05);
  check(upload_files() == 0, "upload_gone_clients_leave_nothing", "%d files left", upload_files());
  get("POST", "/upload", oct, "fourth", &r);
  check(r.status == 200, "upload_after_gone_clients", "%d %s", r.status, r.body);
  /* A slow upload that keeps sending outlives the body deadline (1 s). */
  fd = dial();
  n = snprintf(raw, sizeof raw, "POST /upload HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n%sContent-Length: 8\r\n\r\n",
               port, oct);
  send_all(fd, raw, (size_t)n);
  for (int i = 0; i < 8; i++) { send_all(fd, "x", 1); sleep_s(0.3); }
  slurp(fd, &r);
  close(fd);
  check(r.status == 200, "upload_slow_but_steady_kept", "%d %s", r.status, r.body);
  get("GET", "/healthz", NULL, NULL, &r);
  check(r.status == 200, "up_after_uploads", "%d %s", r.status, r.body);
}

/* One address's clients cannot take every connection or stream. */
static void test_per_address(void) {
  enum { PER_IP = 16 };
  int fds[PER_IP + 4];
  for (int i = 0; i < PER_IP + 4; i++) fds[i] = dial_from("127.0.0.2", 2);
  sleep_s(0.1);
  int refused = 0;
  for (int i = PER_IP; i < PER_IP + 4; i++) refused += fds[i] >= 0 && until_closed(fds[i], 1) < 0.5;
  check(refused == 4, "per_address_connection_limit", "%d of 4 connections past the limit closed at once", refused);
  double took;
  check(healthz_fast(&took), "healthz_while_one_address_is_full", "took %.2fs", took);
  Resp r;
  char h[64];
  snprintf(h, sizeof h, "Host: localhost:%d\r\n", port);
  raw_get("127.0.0.3", "GET", "/echo/a", h, &r);
  check(r.status == 200, "other_address_served", "%d %s", r.status, r.body);
  for (int i = 0; i < PER_IP + 4; i++)
    if (fds[i] >= 0) close(fds[i]);

  /* Streams: 2 per address, 4 in all. */
  int s[6];
  char req[256];
  const char *src[] = {"127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.4", "127.0.0.4", "127.0.0.5"};
  int n = snprintf(req, sizeof req, "GET /forever HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);
  Resp third, sixth;
  for (int i = 0; i < 6; i++) {
    s[i] = dial_from(src[i], 2);
    send_all(s[i], req, (size_t)n);
    sleep_s(0.05);
    if (i == 2 || i == 5) {
      Resp *x = i == 2 ? &third : &sixth;
      slurp(s[i], x);
      close(s[i]);
      s[i] = -1;
    }
  }
  check(is_error(&third, 429, "streams"), "stream_limit_per_address_429", "%d %s", third.status, third.body);
  check(is_error(&sixth, 503, "streams"), "stream_limit_total_503", "%d %s", sixth.status, sixth.body);
  check(healthz_fast(&took), "healthz_while_streams_full", "took %.2fs", took);
  for (int i = 0; i < 6; i++)
    if (s[i] >= 0) close(s[i]);
  sleep_s(1.0);  /* the server notices at its next keep-alive writes */
  int fd = dial_from("127.0.0.5", 2);
  send_all(fd, req, (size_t)n);
  char b[256];
  ssize_t got = recv(fd, b, sizeof b - 1, 0);
  b[got > 0 ? got : 0] = '\0';
  close(fd);
  check(got > 0 && strstr(b, "200 OK"), "stream_slots_released", "%s", b);
}

/* Stopping under every load at once: streams open, slow clients, handlers busy,
** requests queued. Prompt, the queued get a 503, nothing leaks (ASan). */
static void test_stop_under_load(void) {
  int st[2], slow[4];
  char req[256];
  int n = snprintf(req, sizeof req, "GET /forever HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", port);
  for (int i = 0; i < 2; i++) {
    st[i] = dial();
    send_all(st[i], req, (size_t)n);
  }
  sleep_s(0.1);
  block_set(0);
  Call b[2], q[3];
  call_start(&b[0], "/block");
  call_start(&b[1], "/block");
  for (int i = 0; i < 200 && atomic_load(&blocked) < 2; i++) sleep_s(0.01);
  for (int i = 0; i < 3; i++) call_start(&q[i], "/echo/queued");
  for (int i = 0; i < 4; i++) {
    slow[i] = dial();
    send_all(slow[i], "GET /echo/a HT", 14);
  }
  sleep_s(0.2);
  double t0 = now_monotonic();
  http_stop(server);
  double dt = now_monotonic() - t0;
  check(dt < 2.0, "stop_under_load_prompt", "stop took %.2fs", dt);
  for (int i = 0; i < 2; i++) pthread_join(b[i].t, NULL);
  int answered = 0;
  for (int i = 0; i < 3; i++) {
    pthread_join(q[i].t, NULL);
    answered += is_error(&q[i].r, 503, "shutting down");
  }
  check(answered == 3, "stop_answers_queued_503", "%d of 3 queued requests got 503: %d %s", answered, q[0].r.status,
        q[0].r.body);
  int ended = 0;
  for (int i = 0; i < 2; i++) {
    Resp r;
    slurp(st[i], &r);
    ended += r.status == 200 && strstr(r.body, "0\r\n\r\n") != NULL;
    close(st[i]);
  }
  check(ended == 2, "stop_ends_streams", "%d of 2 streams ended cleanly", ended);
  int closed = 0;
  for (int i = 0; i < 4; i++) {
    closed += until_closed(slow[i], 1) < 1;
    close(slow[i]);
  }
  check(closed == 4, "stop_closes_slow_clients", "%d of 4 closed", closed);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_error_text();
  test_error_kinds();
  test_ranges();
  test_metrics_info();
  test_default_config_doc();
  static const char *hosts[] = {"maskd.example"};
  static const char *origins[] = {"https://proxy.example/"};
  HttpConfig c = http_default_config();
  c.port = 0;
  c.token = "sekrit";
  c.max_body = 1000;
  c.max_conns = 64;
  c.max_conns_per_ip = 16;
  c.max_streams = 4;
  c.max_streams_per_ip = 2;
  c.handler_threads = 2;
  c.timeout_s = 3;
  c.header_timeout_s = 1;
  c.body_timeout_s = 1;
  c.stream_poll_s = 0.05;
  c.allowed_hosts = hosts;
  c.n_allowed_hosts = 1;
  c.allowed_origins = origins;
  c.n_allowed_origins = 1;
  c.routes = routes;
  c.n_routes = (int)(sizeof routes / sizeof routes[0]);
  c.observe = observe;
  Err err = {0};
  server = http_start(&c, &err);
  check(server != NULL, "start", "%s", err.msg);
  if (!server) return check_exit();
  port = http_port(server);
  check(port > 0, "port", "bound port %d", port);

  test_routing();
  test_token_and_bodies();
  test_cross_site();
  test_cors();
  test_login();
  test_paths();
  test_stream();
  test_stream_observed_when_queued();
  test_pool();
  test_deadlines();
  test_per_address();
  check(atomic_load(&observed[413]) == 2 && atomic_load(&observed[405]) == 3 && atomic_load(&observed[415]) == 5 &&
            atomic_load(&observed[303]) == 1,
        "observer_counts", "413:%d 405:%d 415:%d 303:%d", atomic_load(&observed[413]), atomic_load(&observed[405]),
        atomic_load(&observed[415]), atomic_load(&observed[303]));
  test_stop_under_load();

  /* One handler thread: first in, first served. */
  {
    HttpConfig c1 = c;
    c1.handler_threads = 1;
    server = http_start(&c1, &err);
    port = server ? http_port(server) : 0;
    if (server) test_fifo();
    http_stop(server);
  }
  /* Uploads, on a server of their own. */
  {
    HttpConfig cu = c;
    snprintf(upload_dir, sizeof upload_dir, "%s", "/tmp/test_http_upload.XXXXXX");
    check(mkdtemp(upload_dir) != NULL, "upload_dir", "%s", strerror(errno));
    cu.routes = upload_routes;
    cu.n_routes = (int)(sizeof upload_routes / sizeof upload_routes[0]);
    cu.upload_dir = upload_dir;
    cu.max_upload = 5000;
    cu.upload_idle_s = 1;
    cu.max_uploads = 2;
    /* What a crashed server left: swept at start when untouched for an hour, else kept. */
    char old[300], fresh[300], other[300];
    snprintf(old, sizeof old, "%s/upload-AAAAAA", upload_dir);
    snprintf(fresh, sizeof fresh, "%s/upload-BBBBBB", upload_dir);
    snprintf(other, sizeof other, "%s/notes.txt", upload_dir);
    const char *made[] = {old, fresh, other};
    for (int i = 0; i < 3; i++) { FILE *f = fopen(made[i], "w"); if (f) fclose(f); }
    struct timeval two_hours_ago[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
    utimes(old, two_hours_ago);
    utimes(other, two_hours_ago);
    server = http_start(&cu, &err);
    check(server != NULL, "upload_start", "%s", err.msg);
    check(access(old, F_OK) != 0 && access(fresh, F_OK) == 0 && access(other, F_OK) == 0, "upload_stale_swept_at_start",
          "old %d fresh %d other %d", access(old, F_OK), access(fresh, F_OK), access(other, F_OK));
    unlink(fresh);
    unlink(other);
    port = server ? http_port(server) : 0;
    if (server) test_upload();
    http_stop(server);
    rmdir(upload_dir);
  }
  /* Connection limit, on a server of its own: with 4 connections open a 5th gets no
  ** answer (it waits to be accepted); the server answers again once they go. */
  {
    HttpConfig c3 = c;
    c3.max_conns = 4;
    c3.header_timeout_s = 30;
    c3.timeout_s = 30;
    server = http_start(&c3, &err);
    port = server ? http_port(server) : 0;
    int fds[4];
    for (int i = 0; i < 4; i++) fds[i] = dial();
    usleep(200 * 1000);
    Resp extra;
    memset(&extra, 0, sizeof extra);
    int fd = dial_from(NULL, 1);
    char req[128];
    int n = snprintf(req, sizeof req, "GET /echo/a HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", port);
    if (fd >= 0) {
      send_all(fd, req, (size_t)n);
      slurp(fd, &extra);
      close(fd);
    }
    check(server && extra.status == 0, "connection_limit", "5th connection answered %d", extra.status);
    for (int i = 0; i < 4; i++) close(fds[i]);
    int up = 0;
    for (int i = 0; i < 20 && !up; i++) { usleep(100 * 1000); up = healthy(); }
    check(up, "up_after_connection_limit", "server stopped answering");
    http_stop(server);
  }
  /* A second server on a taken port fails with a message. */
  {
    HttpConfig c2 = c;
    HttpServer *a = http_start(&c2, &err);
    c2.port = a ? http_port(a) : 0;
    HttpServer *b = a ? http_start(&c2, &err) : NULL;
    check(a && !b && strstr(err.msg, "cannot listen"), "port_in_use", "%s", err.msg);
    http_stop(b);
    http_stop(a);
    c2.host = "localhost";
    c2.port = 0;
    b = http_start(&c2, &err);
    check(!b && strstr(err.msg, "numeric"), "host_must_be_numeric", "%s", err.msg);
    http_stop(b);
    static const char *bad_hosts[] = {"evil example"};
    c2.host = "127.0.0.1";
    c2.allowed_hosts = bad_hosts;
    b = http_start(&c2, &err);
    check(!b && strstr(err.msg, "--allowed-host"), "bad_allowed_host_refused", "%s", err.msg);
    http_stop(b);
  }
  return check_exit();
}
