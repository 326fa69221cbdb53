/* Layer: server/http/ (this folder: event loop, guards, metrics, static files) knows no
** maskd concept; uses engine/core only. (ARCHITECTURE.md)
**
** The HTTP layer of maskd serve: a wrapper over libmicrohttpd that routes a request
** by method and path pattern to a handler, hands it the whole body, and sends back
** what the handler put in an HttpRes. Everything that protects the process lives
** here, so no handler can forget it. Errors are always {"error": "...", "detail": ...}.
**
** Threads. One event-loop thread owns every connection (libmicrohttpd's epoll loop,
** run by the layer): an idle or slow connection costs a socket and a little memory,
** never a thread. Handlers run on a fixed pool of handler threads, in the order their
** requests arrived (FIFO): the loop suspends the connection, queues the request, and
** a handler thread resumes it with the answer ready. Routes flagged HTTP_INLINE
** (cheap, never blocking: /healthz) are answered on the loop itself, so they answer
** while every handler thread is busy. Handlers must be thread-safe; they never see
** libmicrohttpd (headers and query arguments are copied for them).
**
** Limits. Bodies (413); connections in total (beyond, new ones wait in the kernel's
** backlog) and per client address (beyond, closed at once); a connection must send
** a request's complete headers within header_timeout of its opening or of its
** previous answer, and its body (uploads aside, see below) within body_timeout of its headers, however slowly
** it keeps sending bytes (it is closed otherwise); a connection with nothing to send
** or read is closed after timeout_s; event streams are counted apart, in total (503)
** and per client address (429).
**
** Cross-site requests (what a web page in the user's browser can make the browser
** send; non-browser clients such as curl send no Origin and are not concerned):
** - Host must name this server: the bound address with its port, and when bound to
**   loopback also localhost, 127.0.0.1 and [::1] with the port; when bound to every
**   interface (0.0.0.0, ::) any numeric address with the port (a numeric address
**   cannot be re-pointed by DNS); plus allowed_hosts ("name" for any port,
**   "name:port", or "*" for any Host). Otherwise 403: this defeats DNS rebinding, in
**   which an attacker's name is made to resolve to 127.0.0.1 so that their page is
**   "same-origin" with the API.
** - Origin, when present, must be this server's own origin, http://HOST where HOST
**   passes the Host rule, or one of allowed_origins (exact, e.g. behind an HTTPS
**   proxy). "null" (sandboxed frames, file: pages) and every other origin get 403.
** - Sec-Fetch-Site (sent by current browsers on every request) of "cross-site" or
**   "same-site" gets 403 unless the Origin is in allowed_origins or the request is a
**   top-level navigation (GET, Sec-Fetch-Mode: navigate, Sec-Fetch-Dest: document:
**   following a link to the page is fine, embedding it or fetching from it is not).
** - Requests with a body method (POST, PUT, PATCH, DELETE) must say
**   Content-Type: application/json (415), which a page can only send to another
**   origin after a CORS preflight, which this server grants to allowed_origins alone. Routes flagged
**   HTTP_FORM (POSTs that change nothing: the Hub's paths-info, which huggingface_hub
**   posts as a form) also take application/x-www-form-urlencoded.
** HTTP_OPEN routes (health checks) skip the Host and Origin rules and the token.
** - CORS, for allowed_origins only (a page the operator named, on another origin, using
**   the API or the Hub's routes from the browser, as transformers.js does with the
**   Hub): every answer to a request whose Origin is listed carries
**   Access-Control-Allow-Origin with that origin, Vary: Origin and the headers a client
**   must read (ETag, X-Repo-Commit, Content-Range, ...) in Access-Control-Expose-Headers;
**   a preflight (OPTIONS with Access-Control-Request-Method) from it answers 204 with
**   the path's methods, the request headers it asked for, and Private Network Access's
**   Access-Control-Allow-Private-Network when asked. No Allow-Credentials: the login
**   cookie is never sent cross-origin, so such a page authenticates with the Bearer
**   token. A preflight from any other origin is 403, as any of its requests is.
**
** Uploads (routes flagged HTTP_UPLOAD). The body must say Content-Type:
** application/octet-stream (415 otherwise; as safe as JSON against cross-site posts,
** since a page cannot send it to another origin without a preflight either). It is
** never held in memory: the loop writes it, as it arrives, to a temporary file
** (mkstemp, mode 0600) in upload_dir, and the handler gets the file's path and size
** (HttpReq.upload_path, upload_bytes). The handler may link or rename the file away;
** whatever is left under the temporary name is unlinked when the handler returns and
** on every other end (the client gone mid-body, a deadline, a refusal, the server
** stopping). Limits: a Content-Length above max_upload answers 413 at once; a chunked
** body that passes it answers 413 at its end, its file removed at once and the rest
** read and dropped (for at most body_timeout_s, then the connection is closed); at most
** max_uploads uploads at once (503 beyond). A write that fails answers 507 when the
** disk is full, else 500, the file removed. Since an upload of hundreds of megabytes
** cannot arrive within body_timeout_s, an upload's body has no overall deadline: it may
** pause at most upload_idle_s between bytes (closed otherwise); a client that closed its
** side mid-body is noticed within about a second. Disk writes happen on
** the loop thread (page-cache writes of at most one read buffer each). Temporary files
** named upload-* that a crashed server left in upload_dir, untouched for an hour, are
** removed by http_start.
**
** The token (notebook-server style). When set, a request is authenticated by
** "Authorization: Bearer TOKEN" or by the cookie maskd_session_PORT. A GET (or HEAD) of
** any page with ?token=TOKEN sets that cookie (HttpOnly, SameSite=Strict, Path=/) to
** a random key of this server process, never the token (a browser sends it to every
** port of the host; the key ends with the process), and answers 303 to the same URL
** without the token; a wrong token there answers
** 401 and sets nothing. Routes flagged HTTP_WRITE need the token; with auth_reads
** every route does but HTTP_OPEN ones. The fallback (the page's files) never does. */
#ifndef MASKD_HTTP_H
#define MASKD_HTTP_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "engine/core/err.h"

#define HTTP_MAX_PARAMS 4

/* What a request's credentials are worth, for a handler that answers by them (the Hub's
** whoami): the token may be sent as "Authorization: Bearer TOKEN" or the login cookie. */
typedef enum HttpAuth {
  HTTP_AUTH_NO_TOKEN = 0,   /* the server has no token: nothing to check */
  HTTP_AUTH_OK,             /* the server's token, or its login cookie */
  HTTP_AUTH_MISSING,        /* neither Authorization nor a valid cookie */
  HTTP_AUTH_WRONG           /* an Authorization header that is not the token */
} HttpAuth;

typedef struct HttpReq {
  const char *method;       /* "GET", "POST", ... (HEAD arrives as "GET"; the body is dropped) */
  const char *path;         /* decoded path, without the query (valid UTF-8, no NUL inside) */
  const char *pattern;      /* the matched route's pattern, e.g. "/runs/{id}" */
  const char *params[HTTP_MAX_PARAMS];  /* the {name} segments of the pattern, in order */
  int n_params;
  const char *body;         /* NUL-terminated copy of the body ("" when none; always so for HTTP_UPLOAD) */
  size_t body_len;
  const char *upload_path;  /* HTTP_UPLOAD: the temporary file holding the body; NULL otherwise */
  unsigned long long upload_bytes;  /* HTTP_UPLOAD: its size */
  int head;                 /* 1 for a HEAD request: no body is sent (a handler may skip making it) */
  int auth;                 /* HttpAuth: the credentials it carries, whatever the route needs */
  void *conn;               /* the layer's request state (for http_query/http_header); opaque */
} HttpReq;

/* A streamed body (server-sent events). Called on a handler thread, one call at a
** time per stream; it must not wait. It fills buf with up to max bytes and returns
** the count (the layer calls it again at once, gathering up to 64 KiB before it
** sends); 0 when there is nothing to send yet (the layer calls it again about
** stream_poll_s later: send a ": keep-alive\n\n" comment now and then, so a gone
** client is noticed); -1 at the end of the stream. free_fn is called once when the
** connection ends, whatever the reason: on a handler thread once the stream has run (so
** it may wait, on the store's lock say); at once, on the loop, for a stream never started
** (refused, no memory for it, a HEAD of an event stream); on the loop or http_stop()'s
** thread once the handlers have closed. The layer ends every stream at http_stop(). */
typedef ssize_t (*HttpStreamFn)(void *ctx, char *buf, size_t max);

#define HTTP_MAX_HEADERS 8

typedef struct HttpRes {
  int status;
  const char *content_type;
  char *body;               /* malloc'd, owned by the response */
  size_t len;
  char allow[64];           /* Allow header, for 405 */
  char location[384];       /* Location header, for 202 and redirects */
  const char *cache;        /* Cache-Control; "no-store" unless a handler says otherwise */
  HttpStreamFn stream;      /* set to stream instead of body */
  void *stream_ctx;
  void (*stream_free)(void *ctx);
  int stream_sized;         /* a download, not an event stream: its body is exactly stream_len
                            ** bytes (sent as Content-Length; a HEAD gets the headers alone and
                            ** the function is never called); it is not counted against the event
                            ** streams' limits; the function never returns 0, and -1 before the
                            ** end cuts the connection, which the client sees as a short body */
  uint64_t stream_len;
  struct { char name[32], value[160]; } headers[HTTP_MAX_HEADERS];  /* more headers (http_res_header) */
  char *link;               /* the Link header (http_res_link), malloc'd, freed by the layer; NULL: none */
  int n_headers;
} HttpRes;

typedef void (*HttpHandler)(void *app, HttpReq *rq, HttpRes *rs);

enum {
  HTTP_WRITE = 1,           /* changes state: needs the token when one is set */
  HTTP_OPEN = 2,            /* never needs a token, even with auth_reads; any Host or Origin */
  HTTP_INLINE = 4,          /* cheap and never blocking: answered on the event loop */
  HTTP_FORM = 8,            /* a POST that changes nothing may also come as a form (x-www-form-urlencoded) */
  HTTP_UPLOAD = 16          /* the body is application/octet-stream, streamed to a file (see Uploads above) */
};

typedef struct HttpRoute {
  const char *method;       /* "GET" or "POST" */
  const char *pattern;      /* "/runs/{id}/metrics": literal segments and {name} captures of one
                            ** segment; a last {name+} captures the rest of the path, '/' and all */
  HttpHandler fn;
  int flags;
} HttpRoute;

/* Called on the event loop for every finished request, for metrics and the access
** log: the route's pattern ("static" for static files, "unmatched" for the rest),
** the method as sent, the status and the seconds from the request line to the
** queued answer: a stream's (an event stream, a download) to its headers, not to its
** last byte, which may come hours later. */
typedef void (*HttpObserver)(void *app, const char *route, const char *method, int status, double seconds);

typedef struct HttpConfig {
  const char *host;         /* numeric IPv4 or IPv6 address to bind; "127.0.0.1" by default */
  int port;                 /* 0: a free port, see http_port() */
  const char *token;        /* NULL or "": no authentication */
  int auth_reads;           /* with a token, every route but HTTP_OPEN ones needs it */
  size_t max_body;          /* bytes; larger bodies get 413 */
  unsigned max_conns;       /* simultaneous connections */
  unsigned max_conns_per_ip;  /* simultaneous connections from one client address (0: no limit) */
  unsigned max_streams;     /* open event streams in total (503 beyond) */
  unsigned max_streams_per_ip;  /* open event streams per client address (429 beyond) */
  unsigned handler_threads; /* the handler pool's size: at most this many handlers run at once */
  unsigned timeout_s;       /* a connection with no traffic this long is closed */
  double header_timeout_s;  /* complete headers within this of the connection's start or last answer */
  double body_timeout_s;    /* the complete body within this of the headers */
  double stream_poll_s;     /* a stream that had nothing is asked again after this */
  const char *upload_dir;   /* HTTP_UPLOAD bodies are written here (NULL: such routes answer 500) */
  unsigned long long max_upload;  /* bytes of one upload (413 beyond) */
  unsigned max_uploads;     /* uploads receiving at once (503 beyond) */
  double upload_idle_s;     /* an upload's body may pause this long between bytes */
  const char *const *allowed_hosts;    /* more Host values to answer (see above) */
  int n_allowed_hosts;
  const char *const *allowed_origins;  /* more Origin values to accept, exactly */
  int n_allowed_origins;
  const HttpRoute *routes;
  int n_routes;
  /* Serves GET/HEAD paths no route matches (static files), on a handler thread;
  ** NULL: 404. Returns 0 when it answered, 1 when there is no such file (404 then). */
  int (*fallback)(void *app, HttpReq *rq, HttpRes *rs);
  HttpObserver observe;     /* may be NULL */
  void *app;                /* passed to handlers */
} HttpConfig;

typedef struct HttpServer HttpServer;

/* Defaults: 127.0.0.1:8080, no token, 1 MiB bodies, 1024 connections and 128 per
** address, 64 streams and 16 per address, 16 handler threads, 60 s idle, headers
** within 10 s, bodies within 30 s, streams polled every second; uploads: no folder,
** 1 GiB each, 8 at once, 30 s between bytes. */
HttpConfig http_default_config(void);
/* Binds and starts serving on background threads (the loop and the handler pool). */
HttpServer *http_start(const HttpConfig *cfg, Err *err);
/* The port actually bound (useful with port 0). */
int http_port(const HttpServer *s);
/* Non-zero once http_stop() has begun. */
int http_stopping(const HttpServer *s);
/* Stops: requests still queued answer 503, running handlers finish, streams end,
** connections close; then frees. Returns within a handler's run time. NULL allowed. */
void http_stop(HttpServer *s);

/* ---- helpers for handlers ---- */

/* A query-string argument ("" when given without a value) or a request header; NULL when absent. */
const char *http_query(const HttpReq *rq, const char *key);
const char *http_header(const HttpReq *rq, const char *key);
/* The n-th (from 0) value of a query argument given several times (expand=a&expand=b); NULL past the last. */
const char *http_query_nth(const HttpReq *rq, const char *key, size_t n);
/* Answers status with v serialised (v is stolen; NULL answers "null"). */
void http_json(HttpRes *rs, int status, json_t *v);
/* Answers {"error": error, "detail": detail} (detail stolen; NULL gives null). Bytes
** of error that are not UTF-8 are written as \xNN, so the answer is always JSON. */
void http_error(HttpRes *rs, int status, const char *error, json_t *detail);
/* The status that answers an error of this kind: 400 bad input, 404 not found, 409
** conflict, 413 too large, 422 invalid, 500 internal, I/O, out of memory (and none),
** 503 busy. */
int http_status_of(ErrKind kind);
/* Seconds a busy answer (503 of ERR_BUSY) asks the client to wait, as its Retry-After. */
#define HTTP_BUSY_RETRY_AFTER "2"
/* http_error() with the status of e's kind; error NULL = e's message. A 503 (ERR_BUSY)
** carries Retry-After: HTTP_BUSY_RETRY_AFTER. */
void http_error_from(HttpRes *rs, const Err *e, const char *error, json_t *detail);
/* The same with a formatted error line and no detail. */
void http_errorf(HttpRes *rs, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Adds a header to the answer (replacing one of the same name); -1 when full or too long. */
int http_res_header(HttpRes *rs, const char *name, const char *value);
/* Drops every header added so far (and the Link header): an answer that turns into an
** error after it described a file must not carry that file's headers. */
void http_res_clear_headers(HttpRes *rs);
/* Sets the Link header (paging: <URL>; rel="next"), copied; -1 when 4096 bytes or more or out of memory. */
int http_res_link(HttpRes *rs, const char *value);
/* Answers with bytes (copied) of the given content type. */
void http_bytes(HttpRes *rs, int status, const char *content_type, const void *data, size_t len);
/* Parses the body as a JSON object. On failure answers 400 (malformed JSON, with the
** line and column) or 422 (valid JSON that is not an object) and returns NULL. */
json_t *http_body_object(const HttpReq *rq, HttpRes *rs);
/* The JSON name of a value's type ("string", "integer", ...), for error details; "missing" for NULL. */
const char *http_json_type(const json_t *v);
/* A JSON string of s, its non-UTF-8 bytes written as \xNN (never NULL but out of memory). */
json_t *http_json_text(const char *s);

#endif
