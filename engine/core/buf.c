#include "engine/core/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int buf_reserve(Buf *b, size_t n) {
  if (b->oom) return -1;
  if (n > SIZE_MAX - 1 - b->len) { b->oom = 1; return -1; }
  size_t need = b->len + n + 1;
  if (need <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  char *p = realloc(b->p, cap);
  if (!p) { b->oom = 1; return -1; }
  b->p = p;
  b->cap = cap;
  return 0;
}

void buf_put(Buf *b, const void *s, size_t n) {
  if (buf_reserve(b, n)) return;
  if (n) memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void buf_puts(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

void buf_printf(Buf *b, const char *fmt, ...) {
  /* Formats into the room there is; when it does not fit, makes room and formats again. */
  if (buf_reserve(b, 0)) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) { b->oom = 1; b->p[b->len] = '\0'; return; }
    if ((size_t)n < b->cap - b->len) { b->len += (size_t)n; return; }
    if (buf_reserve(b, (size_t)n)) { b->p[b->len] = '\0'; return; }
  }
}

void buf_free(Buf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
  b->oom = 0;
}
