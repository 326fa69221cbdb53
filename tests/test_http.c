/* The HTTP layer (server/http.h) driven over real sockets by a small raw client:
** routing and captures, 404/405/401/400/422/413 as JSON errors, chunked bodies,
** HEAD, server-sent streams, concurrency, the idle timeout and the connection
** limit, and that the server keeps answering after each abuse. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "server/http.h"
#include "tests/check.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- test routes ---- */

static void h_echo2(void *app, HttpReq *rq, HttpRes *rs) {
  const char *q = http_query(rq, "q");
  http_json(rs, 200, json_pack("{s:s, s:s, s:s?, s:i}", "a", rq->params[0], "b", rq->params[1], "q", q, "n",
                               rq->n_params));
}
static void h_echo1(void *app, HttpReq *rq, HttpRes *rs) {
  http_json(rs, 200, json_pack("{s:s, s:i}", "a", rq->params[0], "n", rq->n_params));
}
static void h_json(void *app, HttpReq *rq, HttpRes *rs) {
  json_t *o = http_body_object(rq, rs);
  if (!o) return;
  json_t *n = json_object_get(o, "n");
  if (!json_is_integer(n))
    http_error(rs, 422, "field 'n' must be an integer",
               json_pack("{s:s, s:s}", "field", "n", "got", n ? http_json_type(n) : "missing"));
  else
    http_json(rs, 200, json_pack("{s:I, s:I}", "n", json_integer_value(n), "len", (json_int_t)rq->body_len));
  json_decref(o);
}
static void h_slow(void *app, HttpReq *rq, HttpRes *rs) {
  usleep(400 * 1000);
  http_json(rs, 200, json_pack("{s:b}", "slept", 1));
}
static void h_silent(void *app, HttpReq *rq, HttpRes *rs) { /* answers nothing: the layer must */ }

static HttpServer *server;
typedef struct Stream { int i; } Stream;
static atomic_int streams_freed;
static ssize_t stream_fn(void *ctx, char *buf, size_t max) {
  Stream *s = ctx;
  if (s->i == 3 || http_stopping(server)) return -1;
  usleep(20 * 1000);
  return snprintf(buf, max, "event: tick\ndata: {\"i\":%d}\n\n", s->i++);
}
static void stream_free_fn(void *ctx) { free(ctx); atomic_fetch_add(&streams_freed, 1); }
static void h_stream(void *app, HttpReq *rq, HttpRes *rs) {
  rs->status = 200;
  rs->content_type = "text/event-stream";
  rs->stream = stream_fn;
  rs->stream_ctx = calloc(1, sizeof(Stream));
  rs->stream_free = stream_free_fn;
}

static atomic_int observed[600];
static void observe(void *app, const char *route, const char *method, int status, double s) {
  if (status >= 0 && status < 600) atomic_fetch_add(&observed[status], 1);
}

static const HttpRoute routes[] = {
  {"GET", "/echo/{a}/{b}", h_echo2, 0},
  {"GET", "/echo/{a}", h_echo1, 0},
  {"POST", "/json", h_json, HTTP_WRITE},
  {"PUT", "/json", h_json, 0},
  {"GET", "/slow", h_slow, 0},
  {"GET", "/silent", h_silent, 0},
  {"GET", "/stream", h_stream, 0},
  {"GET", "/healthz", h_echo1, HTTP_OPEN},
};

/* ---- a raw client ---- */

static int port;

static int dial(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) { close(fd); return -1; }
  return fd;
}

typedef struct Resp {
  int status;
  char raw[65536];
  size_t len;
  const char *body;
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

static int request(const char *raw, size_t len, Resp *r) {
  memset(r, 0, sizeof *r);
  r->body = "";
  int fd = dial();
  if (fd < 0) return -1;
  size_t off = 0;
  while (off < len) {
    ssize_t n = send(fd, raw + off, len - off, MSG_NOSIGNAL);
    if (n <= 0) break;  /* the server may answer and close before it all went out (413) */
    off += (size_t)n;
  }
  slurp(fd, r);
  close(fd);
  return 0;
}

static int get(const char *method, const char *path, const char *headers, const char *body, Resp *r) {
  char buf[8192];
  int n = snprintf(buf, sizeof buf, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s", method, path,
                   headers ? headers : "");
  if (body) n += snprintf(buf + n, sizeof buf - (size_t)n, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
  else n += snprintf(buf + n, sizeof buf - (size_t)n, "\r\n");
  return request(buf, (size_t)n, r);
}

static const char *header(const Resp *r, const char *name) {
  static char v[256];
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

static void *slow_thread(void *arg) {
  Resp *r = arg;
  get("GET", "/slow", NULL, NULL, r);
  return NULL;
}

/* An error message that is not valid UTF-8 (a name cut inside a character by "%.64s",
** as tests/fuzz/fuzz_routes found) still reaches the client as "error", the bad bytes
** replaced by U+FFFD; valid text passes unchanged. */
static void test_error_text(void) {
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  http_error(&rs, 422, "no corpus named \"caf\xc3\" here \xe2\x96", json_pack("{s:s}", "field", "input"));
  json_t *v = rs.body ? json_loads(rs.body, 0, NULL) : NULL;
  const char *e = json_string_value(json_object_get(v, "error"));
  check(rs.status == 422 && e && !strcmp(e, "no corpus named \"caf\xef\xbf\xbd\" here \xef\xbf\xbd\xef\xbf\xbd") &&
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

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_error_text();
  HttpConfig c = http_default_config();
  c.port = 0;
  c.token = "sekrit";
  c.max_body = 1000;
  c.max_conns = 8;
  c.timeout_s = 1;
  c.routes = routes;
  c.n_routes = (int)(sizeof routes / sizeof routes[0]);
  c.observe = observe;
  Err err = {{0}};
  server = http_start(&c, &err);
  check(server != NULL, "start", "%s", err.msg);
  if (!server) return check_exit();
  port = http_port(server);
  check(port > 0, "port", "bound port %d", port);

  Resp r;
  json_t *j;

  /* Routing and captures. */
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
  const char *auth = "Authorization: Bearer sekrit\r\n";
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
  {
    static char big[20000];
    int n = snprintf(big, sizeof big,
                     "POST /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%sContent-Length: 5000\r\n\r\n", auth);
    memset(big + n, 'a', 5000);
    request(big, (size_t)n + 5000, &r);
    j = body_json(&r);
    check(is_error(&r, 413, "too large") && json_integer_value(json_object_get(json_object_get(j, "detail"),
                                                                                "max_bytes")) == 1000,
          "413_content_length", "%d %s", r.status, r.body);
    json_decref(j);
    n = snprintf(big, sizeof big,
                 "POST /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%sTransfer-Encoding: chunked\r\n\r\n", auth);
    for (int k = 0; k < 4; k++) {
      n += snprintf(big + n, sizeof big - (size_t)n, "190\r\n");
      memset(big + n, ' ', 400);
      n += 400;
      n += snprintf(big + n, sizeof big - (size_t)n, "\r\n");
    }
    n += snprintf(big + n, sizeof big - (size_t)n, "0\r\n\r\n");
    request(big, (size_t)n, &r);
    check(is_error(&r, 413, "too large"), "413_chunked", "%d %s", r.status, r.body);
    n = snprintf(big, sizeof big,
                 "POST /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%sTransfer-Encoding: chunked\r\n\r\n"
                 "4\r\n{\"n\"\r\n4\r\n:42}\r\n0\r\n\r\n", auth);
    request(big, (size_t)n, &r);
    j = body_json(&r);
    check(r.status == 200 && json_integer_value(json_object_get(j, "n")) == 42 &&
              json_integer_value(json_object_get(j, "len")) == 8,
          "chunked_body_joined", "%d %s", r.status, r.body);
    json_decref(j);
    check(healthy(), "up_after_bodies", "server stopped answering");
  }

  /* HEAD: GET's headers, no body. */
  get("HEAD", "/echo/a/b", NULL, NULL, &r);
  check(r.status == 200 && r.body[0] == '\0' && header(&r, "Content-Length") &&
            atoi(header(&r, "Content-Length")) > 0,
        "head", "%d len=%s body='%s'", r.status, header(&r, "Content-Length"), r.body);

  /* A handler that forgets to answer gets a 500, not a hang. */
  get("GET", "/silent", NULL, NULL, &r);
  check(is_error(&r, 500, "no answer"), "500_no_answer", "%d %s", r.status, r.body);

  /* Server-sent stream: three events in order, then the end; the context is freed. */
  get("GET", "/stream", NULL, NULL, &r);
  check(r.status == 200 && strstr(r.raw, "text/event-stream") && strstr(r.body, "data: {\"i\":0}") &&
            strstr(r.body, "data: {\"i\":2}") && strstr(r.body, "data: {\"i\":0}") < strstr(r.body, "data: {\"i\":2}"),
        "sse_stream", "%d %s", r.status, r.raw);
  usleep(50 * 1000);
  check(atomic_load(&streams_freed) == 1, "sse_freed", "freed %d", atomic_load(&streams_freed));

  /* Thread per connection: two slow requests overlap. */
  {
    Resp r1, r2;
    pthread_t t1, t2;
    double t0 = now();
    pthread_create(&t1, NULL, slow_thread, &r1);
    pthread_create(&t2, NULL, slow_thread, &r2);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    double dt = now() - t0;
    check(r1.status == 200 && r2.status == 200 && dt < 0.75, "concurrent_requests", "statuses %d %d in %.3fs",
          r1.status, r2.status, dt);
  }

  /* Idle timeout: a client that sends half a request is cut off. */
  {
    int fd = dial();
    const char *half = "GET /echo/a HTTP/1.1\r\nHost: x\r\n";
    send(fd, half, strlen(half), MSG_NOSIGNAL);
    double t0 = now();
    char b[256];
    ssize_t n = recv(fd, b, sizeof b, 0);
    double dt = now() - t0;
    check(n <= 0 && dt < 4.0, "idle_timeout", "recv %zd after %.2fs", n, dt);
    close(fd);
  }

  check(atomic_load(&observed[401]) == 4 && atomic_load(&observed[413]) == 2 && atomic_load(&observed[405]) == 2,
        "observer_counts", "401:%d 413:%d 405:%d", atomic_load(&observed[401]), atomic_load(&observed[413]),
        atomic_load(&observed[405]));

  /* Stopping with a stream open ends it. */
  {
    double t0 = now();
    http_stop(server);
    check(now() - t0 < 3.0, "stop", "stop took %.2fs", now() - t0);
  }
  /* Connection limit, on a server of its own (no connection left over from the tests
  ** above, an idle timeout far longer than the test): with 4 idle connections open a
  ** 5th gets no answer; the server answers again once they go. */
  {
    HttpConfig c3 = c;
    c3.port = 0;
    c3.max_conns = 4;
    c3.timeout_s = 30;
    server = http_start(&c3, &err);
    port = server ? http_port(server) : 0;
    int fds[4];
    for (int i = 0; i < 4; i++) fds[i] = dial();
    usleep(200 * 1000);
    Resp extra;
    get("GET", "/echo/a", NULL, NULL, &extra);
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
    c2.port = 0;
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
  }
  return check_exit();
}
