/* A growable byte buffer for text built piece by piece (JSON, headers, metrics).
** Appends do not fail one by one: the first allocation that fails sets oom and
** every later append does nothing, so a writer checks once, at the end. Once
** anything was appended the bytes are followed by a NUL. A zeroed Buf is empty. */
#ifndef MASKD_BUF_H
#define MASKD_BUF_H
#include <stddef.h>

typedef struct Buf {
  char *p;          /* the bytes, p[len] == 0; NULL before the first append */
  size_t len, cap;  /* cap counts the NUL's byte */
  int oom;          /* an allocation failed: the text is incomplete */
} Buf;

/* Makes room for n more bytes and the NUL (capacity doubles from 256); 0, or -1 with oom set. */
int buf_reserve(Buf *b, size_t n);
/* Appends n bytes (n may be 0: the buffer then holds at least ""). */
void buf_put(Buf *b, const void *s, size_t n);
/* Appends a NUL-terminated string. */
void buf_puts(Buf *b, const char *s);
/* Appends printf-formatted text. */
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Frees the bytes and empties b (oom cleared). */
void buf_free(Buf *b);

#endif
