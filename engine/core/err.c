#include "engine/core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vset(Err *e, ErrKind kind, const char *fmt, va_list ap) {
  vsnprintf(e->msg, sizeof e->msg, fmt, ap);
  e->kind = kind;
}

int err_set(Err *e, const char *fmt, ...) {
  if (!e) return -1;
  va_list ap;
  va_start(ap, fmt);
  vset(e, ERR_INTERNAL, fmt, ap);
  va_end(ap);
  return -1;
}

int err_setk(Err *e, ErrKind kind, const char *fmt, ...) {
  if (!e) return -1;
  va_list ap;
  va_start(ap, fmt);
  vset(e, kind, fmt, ap);
  va_end(ap);
  return -1;
}

int err_prefix(Err *e, const char *prefix) {
  if (!e) return -1;
  char old[sizeof e->msg];
  memcpy(old, e->msg, sizeof old);
  size_t n = strlen(prefix);
  if (n > sizeof e->msg - 3) n = sizeof e->msg - 3;
  memcpy(e->msg, prefix, n);
  memcpy(e->msg + n, ": ", 2);
  size_t room = sizeof e->msg - n - 3;  /* the old message is cut to what still fits */
  size_t m = strnlen(old, room);
  memcpy(e->msg + n + 2, old, m);
  e->msg[n + 2 + m] = '\0';
  return -1;
}

int err_kind_default(Err *e, ErrKind k) {
  if (e && (e->kind == ERR_NONE || e->kind == ERR_INTERNAL)) e->kind = k;
  return -1;
}

const char *err_kind_name(ErrKind k) {
  switch (k) {
    case ERR_NONE: return "none";
    case ERR_INTERNAL: return "internal";
    case ERR_BAD_INPUT: return "bad_input";
    case ERR_INVALID: return "invalid";
    case ERR_NOT_FOUND: return "not_found";
    case ERR_CONFLICT: return "conflict";
    case ERR_TOO_LARGE: return "too_large";
    case ERR_IO: return "io";
    case ERR_NOMEM: return "nomem";
    case ERR_BUSY: return "busy";
  }
  return "unknown";
}
