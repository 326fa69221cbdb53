/* Who may talk to maskd serve, as pure string decisions (the rules are stated in
** server/http/http.h): the Host and Origin rules against cross-site use and DNS
** rebinding, the token and its login cookie, the URL a login redirects to, UTF-8. */
#ifndef MASKD_HTTP_GUARD_H
#define MASKD_HTTP_GUARD_H
#include <stddef.h>
#include "engine/core/err.h"

typedef struct HttpGuard HttpGuard;

/* The rules for a server bound to bind_host (numeric) on port, with token (NULL or
** "": none) and the operator's extra hosts and origins; NULL with err when one of
** them is malformed. */
HttpGuard *http_guard_new(const char *bind_host, int port, const char *token, const char *const *hosts, int n_hosts,
                          const char *const *origins, int n_origins, Err *err);
void http_guard_free(HttpGuard *g);
/* 1 when the Host header value names this server (NULL, an absent header, passes). */
int http_guard_host_ok(const HttpGuard *g, const char *host);
/* NULL when a request with these headers (each NULL when absent) may proceed, else
** why not, for a 403. method is the request's ("HEAD" counts as "GET"). */
const char *http_guard_request(const HttpGuard *g, const char *method, const char *host, const char *origin,
                               const char *fetch_site, const char *fetch_mode, const char *fetch_dest);
/* 1 when origin (NULL: 0) is one of the operator's allowed origins, compared without case
** and without trailing slashes: the origins that get CORS answers (http.h). */
int http_guard_origin_listed(const HttpGuard *g, const char *origin);
/* 1 when given is the token (constant time in the token's length). */
int http_guard_token_ok(const HttpGuard *g, const char *given);
/* The login cookie's name ("maskd_session_PORT"); its value is a random key drawn by
** http_guard_new, never the token. */
const char *http_guard_cookie_name(const HttpGuard *g);
/* 1 when a cookie value is the login cookie's (NULL: 0). */
int http_guard_cookie_ok(const HttpGuard *g, const char *value);
/* The Set-Cookie value that logs a browser in (owned by g). */
const char *http_guard_set_cookie(const HttpGuard *g);
/* The relative URL a login redirects to: raw_uri (as sent, with its query) without
** its token arguments; "/" when the path is not a plain local path. malloc'd. */
char *http_guard_strip_token(const char *raw_uri);
/* 1 when the n bytes at s are valid UTF-8 (no overlong forms, no surrogates). */
int http_utf8_valid(const char *s, size_t n);
/* A malloc'd copy of s with each byte that is not part of valid UTF-8 written as \xNN. */
char *http_utf8_escape(const char *s);

#endif
