/* The HTTP layer of maskd serve: a thin wrapper over libmicrohttpd that routes a
** request by method and path pattern to a handler, hands it the whole body, and
** sends back what the handler put in an HttpRes. Everything that protects the
** process lives here, so no handler can forget it: a body size limit (413), a
** connection limit, an idle timeout per connection, the bearer token for routes
** that change state (401), JSON errors for unknown paths (404) and wrong methods
** (405 with Allow). Errors are always {"error": "...", "detail": ...}.
**
** Threads: one per connection (libmicrohttpd's thread-per-connection mode), so a
** slow handler (a fill-mask forward pass) or a long stream (server-sent events)
** never holds up other clients; handlers must therefore be thread-safe. */
#ifndef MASKD_HTTP_H
#define MASKD_HTTP_H
#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>
#include "engine/err.h"

#define HTTP_MAX_PARAMS 4

typedef struct HttpReq {
  const char *method;       /* "GET", "POST", ... (HEAD arrives as "GET"; the body is dropped) */
  const char *path;         /* decoded path, without the query */
  const char *pattern;      /* the matched route's pattern, e.g. "/runs/{id}" */
  const char *params[HTTP_MAX_PARAMS];  /* the {name} segments of the pattern, in order */
  int n_params;
  const char *body;         /* NUL-terminated copy of the body ("" when none) */
  size_t body_len;
  void *conn;               /* the libmicrohttpd connection (for http_query/http_header) */
} HttpReq;

/* A streamed body (server-sent events): fills buf with up to max bytes and returns
** the count, or -1 at the end of the stream. It may block (a second or so at a time:
** return a ": keep-alive\n\n" comment when nothing happened, so a gone client is
** noticed). free_fn is called once when the connection ends, whatever the reason. */
typedef ssize_t (*HttpStreamFn)(void *ctx, char *buf, size_t max);

typedef struct HttpRes {
  int status;
  const char *content_type;
  char *body;               /* malloc'd, owned by the response */
  size_t len;
  char allow[64];           /* Allow header, for 405 */
  char location[256];       /* Location header, for 202 */
  const char *cache;        /* Cache-Control; "no-store" unless a handler says otherwise */
  HttpStreamFn stream;      /* set to stream instead of body */
  void *stream_ctx;
  void (*stream_free)(void *ctx);
} HttpRes;

typedef void (*HttpHandler)(void *app, HttpReq *rq, HttpRes *rs);

enum {
  HTTP_WRITE = 1,           /* changes state: needs the bearer token when one is set */
  HTTP_OPEN = 2             /* never needs a token (health checks), even with auth_reads */
};

typedef struct HttpRoute {
  const char *method;       /* "GET" or "POST" */
  const char *pattern;      /* "/runs/{id}/metrics": literal segments and {name} captures */
  HttpHandler fn;
  int flags;
} HttpRoute;

/* Called for every finished request, for metrics and the access log: the route's
** pattern ("static" for static files, "unmatched" for 404s), the method and status
** and the handler's wall time in seconds. */
typedef void (*HttpObserver)(void *app, const char *route, const char *method, int status, double seconds);

typedef struct HttpConfig {
  const char *host;         /* numeric IPv4 or IPv6 address to bind; "127.0.0.1" by default */
  int port;                 /* 0: a free port, see http_port() */
  const char *token;        /* bearer token; NULL or "": no authentication */
  int auth_reads;           /* with a token, every route but HTTP_OPEN ones needs it */
  size_t max_body;          /* bytes; larger bodies get 413 */
  unsigned max_conns;       /* simultaneous connections; more are refused at accept */
  unsigned timeout_s;       /* a connection idle this long is closed */
  const HttpRoute *routes;
  int n_routes;
  /* Serves GET/HEAD paths no route matches (static files); NULL: 404. Returns 0 when
  ** it answered, 1 when there is no such file (the layer answers 404 then). */
  int (*fallback)(void *app, HttpReq *rq, HttpRes *rs);
  HttpObserver observe;     /* may be NULL */
  void *app;                /* passed to handlers */
} HttpConfig;

typedef struct HttpServer HttpServer;

/* Defaults: 127.0.0.1:8080, no token, 1 MiB bodies, 256 connections, 60 s idle. */
HttpConfig http_default_config(void);
/* Binds and starts serving on background threads. */
HttpServer *http_start(const HttpConfig *cfg, Err *err);
/* The port actually bound (useful with port 0). */
int http_port(const HttpServer *s);
/* Non-zero once http_stop() has begun: long streams end when they see it. */
int http_stopping(const HttpServer *s);
/* Stops accepting, waits for open connections to end, frees; NULL allowed. */
void http_stop(HttpServer *s);

/* ---- helpers for handlers ---- */

/* A query-string argument or a request header; NULL when absent. */
const char *http_query(const HttpReq *rq, const char *key);
const char *http_header(const HttpReq *rq, const char *key);
/* Answers status with v serialised (v is stolen; NULL answers "null"). */
void http_json(HttpRes *rs, int status, json_t *v);
/* Answers {"error": error, "detail": detail} (detail stolen; NULL gives null). */
void http_error(HttpRes *rs, int status, const char *error, json_t *detail);
/* The same with a formatted error line and no detail. */
void http_errorf(HttpRes *rs, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Answers with bytes (copied) of the given content type. */
void http_bytes(HttpRes *rs, int status, const char *content_type, const void *data, size_t len);
/* Parses the body as a JSON object. On failure answers 400 (malformed JSON, with the
** line and column) or 422 (valid JSON that is not an object) and returns NULL. */
json_t *http_body_object(const HttpReq *rq, HttpRes *rs);
/* The JSON name of a value's type ("string", "integer", ...), for error details. */
const char *http_json_type(const json_t *v);

#endif
