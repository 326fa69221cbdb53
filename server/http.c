/* libmicrohttpd wrapper: routing, bodies, limits, token, JSON errors (server/http.h). */
#include "server/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "engine/tokenizer.h"

struct HttpServer {
  HttpConfig cfg;
  struct MHD_Daemon *d;
  int port;
  atomic_int stopping;
};

/* Per-request state, kept in libmicrohttpd's con_cls from the first call of the
** access handler (headers known) to the completion callback. */
typedef struct ReqState {
  const HttpRoute *route;   /* NULL: static fallback */
  int answered;             /* a response was queued before the body was read */
  int too_big;
  char *body;
  size_t len, cap;
  char *segs;               /* copy of the path split at '/', params point into it */
  const char *params[HTTP_MAX_PARAMS];
  int n_params;
  const char *label;        /* route label for the observer */
  char method[16];
  int status;
  double t0;
} ReqState;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

HttpConfig http_default_config(void) {
  HttpConfig c;
  memset(&c, 0, sizeof c);
  c.host = "127.0.0.1";
  c.port = 8080;
  c.max_body = 1u << 20;
  c.max_conns = 256;
  c.timeout_s = 60;
  return c;
}

/* ---- responses ---- */

static void res_reset(HttpRes *rs) {
  free(rs->body);
  rs->body = NULL;
  rs->len = 0;
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

/* s as a JSON string, each byte that is not part of valid UTF-8 replaced by U+FFFD:
** a message may quote a name cut inside a character ("%.64s") or be cut itself at
** Err's size, and jansson refuses such text, which would drop the error's field. */
static json_t *text_json(const char *s) {
  json_t *j = json_string(s);
  if (j || !s) return j;
  size_t n = strlen(s), at = 0, bad;
  char *fixed = malloc(3 * n + 1), *o = fixed;
  if (!fixed) return NULL;
  while (!tokenizer_utf8_valid(s + at, n - at, &bad)) {
    memcpy(o, s + at, bad);
    memcpy(o + bad, "\xEF\xBF\xBD", 3);
    o += bad + 3;
    at += bad + 1;
  }
  memcpy(o, s + at, n - at + 1);
  j = json_string(fixed);
  free(fixed);
  return j;
}

void http_error(HttpRes *rs, int status, const char *error, json_t *detail) {
  json_t *o = json_object();
  json_object_set_new(o, "error", text_json(error));
  json_object_set_new(o, "detail", detail ? detail : json_null());
  http_json(rs, status, o);
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
    json_t *d = json_pack("{s:s, s:i, s:i}", "message", je.text, "line", je.line, "column", je.column);
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

const char *http_query(const HttpReq *rq, const char *key) {
  return MHD_lookup_connection_value((struct MHD_Connection *)rq->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const HttpReq *rq, const char *key) {
  return MHD_lookup_connection_value((struct MHD_Connection *)rq->conn, MHD_HEADER_KIND, key);
}

/* ---- routing ---- */

/* Matches path against pattern segment by segment; {x} takes one non-empty segment.
** On a match, params point into segs (a writable copy of path split at '/'). */
static int route_match(const char *pattern, const char *path, char *segs, const char **params, int *n_params) {
  strcpy(segs, path);
  const char *p = pattern;
  char *s = segs;
  int np = 0;
  while (*p == '/' && *s == '/') {
    p++; s++;
    size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
    if (plen >= 2 && p[0] == '{' && p[plen - 1] == '}') {
      if (slen == 0 || np >= HTTP_MAX_PARAMS) return 0;
      params[np++] = s;
    } else if (plen != slen || strncmp(p, s, plen) != 0) {
      return 0;
    }
    p += plen;
    s += slen;
  }
  if (*p || *s) return 0;
  /* Cut the captured segments apart only now: the walk above needs the slashes. */
  for (int i = 0; i < np; i++) ((char *)params[i])[strcspn(params[i], "/")] = '\0';
  *n_params = np;
  return 1;
}

/* ---- the libmicrohttpd side ---- */

static enum MHD_Result queue(struct MHD_Connection *c, HttpRes *rs, ReqState *st, int head);

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  HttpRes *rs = cls;
  ssize_t n = rs->stream(rs->stream_ctx, buf, max);
  return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void stream_free(void *cls) {
  HttpRes *rs = cls;
  if (rs->stream_free) rs->stream_free(rs->stream_ctx);
  free(rs->body);
  free(rs);
}

static enum MHD_Result queue(struct MHD_Connection *c, HttpRes *rs, ReqState *st, int head) {
  struct MHD_Response *r;
  int status = rs->status ? rs->status : 500;
  if (rs->stream && !head) {
    HttpRes *held = malloc(sizeof *held);
    if (!held) return MHD_NO;
    *held = *rs;
    rs->body = NULL;
    rs->stream_free = NULL;
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_reader, held, stream_free);
    if (!r) { stream_free(held); return MHD_NO; }
  } else {
    if (rs->stream && rs->stream_free) rs->stream_free(rs->stream_ctx);
    rs->stream_free = NULL;
    r = MHD_create_response_from_buffer(rs->len, rs->body ? rs->body : (void *)"", MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
  }
  if (rs->content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, rs->content_type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, rs->cache ? rs->cache : "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  if (rs->allow[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, rs->allow);
  if (rs->location[0]) MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, rs->location);
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"maskd\"");
  enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
  MHD_destroy_response(r);
  if (st) st->status = status;
  return ok;
}

/* Answers at once (before the body is read) with an error. */
static enum MHD_Result answer_now(struct MHD_Connection *c, ReqState *st, HttpRes *rs) {
  st->answered = 1;
  enum MHD_Result ok = queue(c, rs, st, 0);
  free(rs->body);
  return ok;
}

/* Constant-time comparison, so the token cannot be guessed byte by byte from timings. */
static int token_ok(const char *given, const char *want) {
  size_t n = strlen(want), m = strlen(given);
  unsigned char diff = (unsigned char)(n != m);
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(want[i] ^ (i < m ? given[i] : 0));
  return diff == 0;
}

static int authorized(HttpServer *s, struct MHD_Connection *c) {
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return 0;
  return token_ok(h + 7, s->cfg.token);
}

static int is_body_method(const char *m) {
  return !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH") || !strcmp(m, "DELETE");
}

/* First call for a request: choose the route, check method, token and declared size. */
static enum MHD_Result begin(HttpServer *s, struct MHD_Connection *c, const char *url, const char *method,
                             ReqState *st) {
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  const char *m = !strcmp(method, "HEAD") ? "GET" : method;
  size_t ulen = strlen(url);
  st->segs = malloc(ulen + 1);
  if (!st->segs) return MHD_NO;
  if (url[0] != '/') {
    st->label = "unmatched";
    http_error(&rs, 400, "bad request path", NULL);
    return answer_now(c, st, &rs);
  }
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
  if (!st->route) {
    if (allow[0]) {
      st->label = "unmatched";
      snprintf(rs.allow, sizeof rs.allow, "%s", allow);
      char msg[300];
      snprintf(msg, sizeof msg, "method %s not allowed on %s", method, url);
      http_error(&rs, 405, msg, json_pack("{s:s}", "allow", allow));
      return answer_now(c, st, &rs);
    }
    if (strcmp(m, "GET") != 0 || !s->cfg.fallback) {
      st->label = "unmatched";
      http_error(&rs, 404, "not found", json_pack("{s:s, s:s}", "method", method, "path", url));
      return answer_now(c, st, &rs);
    }
    st->label = "static";
  }
  int needs_token = s->cfg.token && s->cfg.token[0] &&
                    (st->route ? ((st->route->flags & HTTP_WRITE) || (s->cfg.auth_reads && !(st->route->flags & HTTP_OPEN)))
                               : s->cfg.auth_reads);
  if (needs_token && !authorized(s, c)) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    http_error(&rs, 401, h ? "invalid bearer token" : "missing bearer token (Authorization: Bearer TOKEN)", NULL);
    return answer_now(c, st, &rs);
  }
  const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (*end || n > s->cfg.max_body) {
      http_error(&rs, 413, "request body too large",
                 json_pack("{s:I}", "max_bytes", (json_int_t)s->cfg.max_body));
      return answer_now(c, st, &rs);
    }
    if (n > 0 && !is_body_method(method)) {
      http_errorf(&rs, 400, "%s requests take no body", method);
      return answer_now(c, st, &rs);
    }
  }
  return MHD_YES;
}

static enum MHD_Result dispatch(HttpServer *s, struct MHD_Connection *c, const char *url, const char *method,
                                ReqState *st) {
  HttpRes rs;
  memset(&rs, 0, sizeof rs);
  if (st->too_big) {
    http_error(&rs, 413, "request body too large", json_pack("{s:I}", "max_bytes", (json_int_t)s->cfg.max_body));
    return answer_now(c, st, &rs);
  }
  HttpReq rq;
  memset(&rq, 0, sizeof rq);
  int head = !strcmp(method, "HEAD");
  rq.method = head ? "GET" : method;
  rq.path = url;
  rq.pattern = st->label;
  memcpy(rq.params, st->params, sizeof rq.params);
  rq.n_params = st->n_params;
  rq.body = st->body ? st->body : "";
  rq.body_len = st->len;
  rq.conn = c;
  if (st->route) {
    st->route->fn(s->cfg.app, &rq, &rs);
  } else if (s->cfg.fallback(s->cfg.app, &rq, &rs) != 0) {
    st->label = "unmatched";
    http_error(&rs, 404, "not found", json_pack("{s:s, s:s}", "method", method, "path", url));
  }
  if (!rs.status) http_error(&rs, 500, "internal error: the handler gave no answer", NULL);
  enum MHD_Result ok = queue(c, &rs, st, head);
  free(rs.body);
  st->answered = 1;
  return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
  (void)version;
  HttpServer *s = cls;
  ReqState *st = *con_cls;
  if (!st) {
    st = calloc(1, sizeof *st);
    if (!st) return MHD_NO;
    st->t0 = now_s();
    st->label = "unmatched";
    snprintf(st->method, sizeof st->method, "%s", method);
    *con_cls = st;
    return begin(s, c, url, method, st);
  }
  if (st->answered) {  /* answered early: swallow whatever body still arrives */
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (st->too_big || st->len + n > s->cfg.max_body) {  /* chunked bodies have no Content-Length */
      st->too_big = 1;
      return MHD_YES;
    }
    if (st->len + n + 1 > st->cap) {
      size_t cap = st->cap ? st->cap : 4096;
      while (cap < st->len + n + 1) cap *= 2;
      char *b = realloc(st->body, cap);
      if (!b) return MHD_NO;
      st->body = b;
      st->cap = cap;
    }
    memcpy(st->body + st->len, upload, n);
    st->len += n;
    st->body[st->len] = '\0';
    return MHD_YES;
  }
  return dispatch(s, c, url, method, st);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
  (void)c; (void)toe;
  HttpServer *s = cls;
  ReqState *st = *con_cls;
  if (!st) return;
  if (s->cfg.observe && st->status) s->cfg.observe(s->cfg.app, st->label, st->method, st->status, now_s() - st->t0);
  free(st->body);
  free(st->segs);
  free(st);
  *con_cls = NULL;
}

HttpServer *http_start(const HttpConfig *cfg, Err *err) {
  HttpServer *s = calloc(1, sizeof *s);
  if (!s) { err_set(err, "out of memory"); return NULL; }
  s->cfg = *cfg;
  if (!s->cfg.host || !*s->cfg.host) s->cfg.host = "127.0.0.1";
  if (cfg->port < 0 || cfg->port > 65535) { free(s); err_set(err, "port %d out of range", cfg->port); return NULL; }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
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
                          MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                          MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_conns,
                          MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout_s,
                          MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                          MHD_OPTION_END);
  if (!s->d) {
    err_set(err, "cannot listen on %s:%d (in use, or not an address of this machine)", s->cfg.host, cfg->port);
    free(s);
    return NULL;
  }
  const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = di ? di->port : cfg->port;
  return s;
bad_host:
  err_set(err, "--host '%s' is not a numeric IPv4 or IPv6 address", s->cfg.host);
  free(s);
  return NULL;
}

int http_port(const HttpServer *s) { return s->port; }

int http_stopping(const HttpServer *s) { return atomic_load(&s->stopping); }

void http_stop(HttpServer *s) {
  if (!s) return;
  atomic_store(&s->stopping, 1);
  MHD_stop_daemon(s->d);
  free(s);
}
