/* Host, Origin, token and UTF-8 rules of maskd serve (server/http/http_guard.h). */
#include "server/http/http_guard.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

/* One name the server answers to: a lowercase host name, or a numeric address
** (family != 0), with a port or -1 for any. */
typedef struct HostRule {
  char name[256];
  int family;
  unsigned char addr[16];
  long port;
} HostRule;

struct HttpGuard {
  int port;
  HostRule *rules;
  int n_rules;
  int any_host;             /* "*" among the allowed hosts */
  int any_numeric;          /* bound to every interface: any numeric address with the port */
  char **origins;           /* lowercase, without a trailing slash */
  int n_origins;
  char *token;
  char *cookie_value;       /* a random session key of this process, never the token (see http_guard_new) */
  char cookie_name[32];
  char *set_cookie;
};

/* ---- UTF-8 ---- */

/* The length of the valid UTF-8 sequence at p (n bytes left), 0 when invalid. */
static size_t utf8_seq(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) len = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;  /* no surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;  /* nothing past U+10FFFF */
  } else {
    return 0;
  }
  if (n < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if (p[i] < 0x80 || p[i] > 0xBF) return 0;
  return len;
}

int http_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    size_t k = utf8_seq(p + i, n - i);
    if (!k) return 0;
    i += k;
  }
  return 1;
}

char *http_utf8_escape(const char *s) {
  size_t n = strlen(s);
  char *out = malloc(4 * n + 1);
  if (!out) return NULL;
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0, o = 0;
  while (i < n) {
    size_t k = utf8_seq(p + i, n - i);
    if (k) {
      memcpy(out + o, p + i, k);
      o += k;
      i += k;
    } else {
      o += (size_t)snprintf(out + o, 5, "\\x%02X", p[i]);
      i++;
    }
  }
  out[o] = '\0';
  return out;
}

/* ---- hosts ---- */

/* Splits a Host value ("name", "name:port", "[v6]", "[v6]:port") into a lowercase
** name (brackets dropped for IPv6) and a port (-1 when absent); -1 when malformed. */
static int split_host(const char *v, char *name, size_t cap, long *port, int *family, unsigned char *addr) {
  const char *end;
  *port = -1;
  *family = 0;
  if (v[0] == '[') {
    end = strchr(v, ']');
    if (!end || (size_t)(end - v - 1) >= cap) return -1;
    memcpy(name, v + 1, (size_t)(end - v - 1));
    name[end - v - 1] = '\0';
    if (inet_pton(AF_INET6, name, addr) != 1) return -1;
    *family = AF_INET6;
    end++;
  } else {
    size_t n = strcspn(v, ":");
    if (n == 0 || n >= cap) return -1;
    for (size_t i = 0; i < n; i++) {
      unsigned char ch = (unsigned char)v[i];
      if (!isalnum(ch) && ch != '-' && ch != '.' && ch != '_') return -1;
      name[i] = (char)tolower(ch);
    }
    name[n] = '\0';
    end = v + n;
    if (inet_pton(AF_INET, name, addr) == 1) *family = AF_INET;
  }
  if (*end == ':') {
    char *stop;
    if (!isdigit((unsigned char)end[1])) return -1;
    long p = strtol(end + 1, &stop, 10);
    if (*stop || p < 1 || p > 65535) return -1;
    *port = p;
  } else if (*end) {
    return -1;
  }
  return 0;
}

static int add_rule(HttpGuard *g, const char *value, long default_port) {
  HostRule r;
  memset(&r, 0, sizeof r);
  if (split_host(value, r.name, sizeof r.name, &r.port, &r.family, r.addr)) return -1;
  if (r.port < 0) r.port = default_port;
  HostRule *rules = realloc(g->rules, (size_t)(g->n_rules + 1) * sizeof *rules);
  if (!rules) return -1;
  g->rules = rules;
  g->rules[g->n_rules++] = r;
  return 0;
}

int http_guard_host_ok(const HttpGuard *g, const char *host) {
  if (!host || g->any_host) return 1;
  HostRule h;
  if (split_host(host, h.name, sizeof h.name, &h.port, &h.family, h.addr)) return 0;
  if (h.port < 0) h.port = 80;
  if (h.family && g->any_numeric && h.port == g->port) return 1;
  for (int i = 0; i < g->n_rules; i++) {
    const HostRule *r = &g->rules[i];
    if (r->port >= 0 && r->port != h.port) continue;
    if (r->family ? (r->family == h.family && !memcmp(r->addr, h.addr, r->family == AF_INET ? 4 : 16))
                  : !strcmp(r->name, h.name))
      return 1;
  }
  return 0;
}

int http_guard_origin_listed(const HttpGuard *g, const char *origin) {
  if (!origin) return 0;
  size_t n = strlen(origin);
  while (n && origin[n - 1] == '/') n--;
  for (int i = 0; i < g->n_origins; i++)
    if (strlen(g->origins[i]) == n && !strncasecmp(g->origins[i], origin, n)) return 1;
  return 0;
}

/* An Origin is this server's own when it is http://HOST with HOST passing the Host rule. */
static int origin_own(const HttpGuard *g, const char *origin) {
  if (strncasecmp(origin, "http://", 7)) return 0;
  const char *hp = origin + 7;
  if (strpbrk(hp, "/@?#")) return 0;
  return hp[0] && http_guard_host_ok(g, hp);
}

const char *http_guard_request(const HttpGuard *g, const char *method, const char *host, const char *origin,
                               const char *fetch_site, const char *fetch_mode, const char *fetch_dest) {
  if (!http_guard_host_ok(g, host))
    return "the Host header does not name this server (a DNS-rebinding guard: give --allowed-host NAME to serve "
           "another name)";
  int listed = http_guard_origin_listed(g, origin);
  if (origin && !listed && !origin_own(g, origin))
    return "cross-origin request refused: the Origin is not this server's (give --allowed-origin to accept one)";
  if (fetch_site && (!strcasecmp(fetch_site, "cross-site") || !strcasecmp(fetch_site, "same-site")) && !listed) {
    int navigation = !strcmp(method, "GET") && fetch_mode && !strcasecmp(fetch_mode, "navigate") && fetch_dest &&
                     !strcasecmp(fetch_dest, "document");
    if (!navigation) return "cross-site request refused (Sec-Fetch-Site): only following a link to the page is allowed";
  }
  return NULL;
}

/* ---- the token ---- */

/* Constant-time comparison, so the secret cannot be guessed byte by byte from timings. */
static int secret_eq(const char *given, const char *want) {
  size_t n = strlen(want), m = strlen(given);
  unsigned char diff = (unsigned char)(n != m);
  for (size_t i = 0; i < n; i++) diff |= (unsigned char)(want[i] ^ (i < m ? given[i] : 0));
  return diff == 0;
}

int http_guard_token_ok(const HttpGuard *g, const char *given) {
  return g->token && given && secret_eq(given, g->token);
}

const char *http_guard_cookie_name(const HttpGuard *g) { return g->cookie_name; }

int http_guard_cookie_ok(const HttpGuard *g, const char *value) {
  return g->cookie_value && value && secret_eq(value, g->cookie_value);
}

const char *http_guard_set_cookie(const HttpGuard *g) { return g->set_cookie; }

static int unreserved(unsigned char c) { return isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~'; }

/* Characters a redirect keeps as they came: RFC 3986's pchar and '/', '?'. No
** backslash (browsers read it as '/'), no space, no quote. */
static int url_char(unsigned char c) { return unreserved(c) || (c && strchr("!$&'()*+,;=:@/?%", c)); }

char *http_guard_strip_token(const char *raw_uri) {
  size_t plen = strcspn(raw_uri, "?");
  int path_ok = plen >= 1 && raw_uri[0] == '/' && !(plen >= 2 && raw_uri[1] == '/');
  for (size_t i = 0; path_ok && i < plen; i++) path_ok = url_char((unsigned char)raw_uri[i]) && raw_uri[i] != '?';
  char *out = malloc(strlen(raw_uri) + 2);
  if (!out) return NULL;
  size_t o = 0;
  if (path_ok) {
    memcpy(out, raw_uri, plen);
    o = plen;
  } else {
    out[o++] = '/';
  }
  const char *q = raw_uri[plen] == '?' ? raw_uri + plen + 1 : NULL;
  int first = 1;
  while (q && *q) {
    size_t n = strcspn(q, "&");
    size_t name = strcspn(q, "=&");
    int keep = n > 0 && !(name == 5 && !strncmp(q, "token", 5));
    for (size_t i = 0; keep && i < n; i++) keep = url_char((unsigned char)q[i]);
    if (keep) {
      out[o++] = first ? '?' : '&';
      memcpy(out + o, q, n);
      o += n;
      first = 0;
    }
    q += n;
    if (*q == '&') q++;
  }
  out[o] = '\0';
  return out;
}

/* ---- construction ---- */

HttpGuard *http_guard_new(const char *bind_host, int port, const char *token, const char *const *hosts, int n_hosts,
                          const char *const *origins, int n_origins, Err *err) {
  HttpGuard *g = calloc(1, sizeof *g);
  if (!g) { err_set(err, "out of memory"); return NULL; }
  g->port = port;
  unsigned char a[16];
  char bracketed[80];
  int v6 = strchr(bind_host, ':') != NULL;
  int ok = inet_pton(v6 ? AF_INET6 : AF_INET, bind_host, a) == 1;
  static const unsigned char any6[16] = {0}, loop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  int loopback = ok && (v6 ? !memcmp(a, loop6, 16) : a[0] == 127);
  g->any_numeric = ok && (v6 ? !memcmp(a, any6, 16) : !memcmp(a, any6, 4));
  snprintf(bracketed, sizeof bracketed, v6 ? "[%s]" : "%s", bind_host);
  int bad = !ok || add_rule(g, bracketed, port);
  if (loopback)
    bad = bad || add_rule(g, "localhost", port) || add_rule(g, "127.0.0.1", port) || add_rule(g, "[::1]", port);
  for (int i = 0; !bad && i < n_hosts; i++) {
    if (!strcmp(hosts[i], "*")) g->any_host = 1;
    else if (add_rule(g, hosts[i], -1)) {
      err_set(err, "--allowed-host '%s' is not NAME or NAME:PORT", hosts[i]);
      http_guard_free(g);
      return NULL;
    }
  }
  if (bad) {
    err_set(err, "cannot derive the allowed hosts from '%s'", bind_host);
    http_guard_free(g);
    return NULL;
  }
  g->origins = calloc((size_t)n_origins + 1, sizeof *g->origins);
  for (int i = 0; g->origins && i < n_origins; i++) {
    const char *o = origins[i];
    if (strncasecmp(o, "http://", 7) && strncasecmp(o, "https://", 8)) {
      err_set(err, "--allowed-origin '%s' must be http://HOST[:PORT] or https://HOST[:PORT]", o);
      http_guard_free(g);
      return NULL;
    }
    size_t n = strlen(o);
    while (n && o[n - 1] == '/') n--;
    if (!(g->origins[i] = strndup(o, n))) break;
    g->n_origins++;
  }
  snprintf(g->cookie_name, sizeof g->cookie_name, "maskd_session_%d", port);
  if (token && *token) {
    g->token = strdup(token);
    /* The cookie holds a key drawn now, not the token: browsers send a host's cookies to
    ** every port of it (RFC 6265 8.5), so any other local server the user visits reads
    ** it. Such a reader gets a key that ends with this process, not the token the CLI,
    ** the Hub clients and the next start of the server use. */
    unsigned char key[32];
    if (getrandom(key, sizeof key, 0) != (ssize_t)sizeof key) {
      err_set(err, "cannot draw the login cookie's random key (getrandom)");
      http_guard_free(g);
      return NULL;
    }
    if ((g->cookie_value = malloc(2 * sizeof key + 1)))
      for (size_t i = 0; i < sizeof key; i++) snprintf(g->cookie_value + 2 * i, 3, "%02x", key[i]);
    size_t n = strlen(g->cookie_name) + 2 * sizeof key + 64;
    if (g->cookie_value && (g->set_cookie = malloc(n)))
      snprintf(g->set_cookie, n, "%s=%s; Path=/; HttpOnly; SameSite=Strict", g->cookie_name, g->cookie_value);
  }
  if (!g->origins || g->n_origins != n_origins || (token && *token && (!g->token || !g->cookie_value || !g->set_cookie))) {
    err_set(err, "out of memory");
    http_guard_free(g);
    return NULL;
  }
  return g;
}

void http_guard_free(HttpGuard *g) {
  if (!g) return;
  free(g->rules);
  for (int i = 0; i < g->n_origins; i++) free(g->origins[i]);
  free(g->origins);
  free(g->token);
  free(g->cookie_value);
  free(g->set_cookie);
  free(g);
}
