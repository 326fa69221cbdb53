/* Validators and byte ranges for file answers (http_ranged.h). */
#include "server/http/http_ranged.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Reads digits at *p into *v (no sign); 0 on success. A number past 64 bits reads as the
** largest (strtoull's ERANGE answer): it is a valid range number (RFC 9110 14.1.1 sets no
** limit), larger than any body, so an end is clamped and a start is unsatisfiable. */
static int digits(const char **p, unsigned long long *v) {
  if (!isdigit((unsigned char)**p)) return -1;
  errno = 0;
  char *end;
  *v = strtoull(*p, &end, 10);
  if (errno && errno != ERANGE) return -1;
  *p = end;
  return 0;
}

int http_range_parse(const char *range, size_t len, size_t *off, size_t *n) {
  if (!range) return 0;
  while (*range == ' ') range++;
  if (strncasecmp(range, "bytes=", 6)) return 0;
  const char *p = range + 6;
  if (strchr(p, ',')) return 0;  /* several ranges: the whole body is a valid answer */
  while (*p == ' ') p++;
  unsigned long long a = 0, b = 0;
  if (*p == '-') {  /* the last b bytes */
    p++;
    if (digits(&p, &b)) return 0;
    while (*p == ' ') p++;
    if (*p) return 0;
    if (b == 0 || len == 0) return -1;
    if (b > len) b = len;
    *off = len - (size_t)b;
    *n = (size_t)b;
    return 1;
  }
  if (digits(&p, &a) || *p++ != '-') return 0;
  int open_end = !isdigit((unsigned char)*p);
  if (!open_end && digits(&p, &b)) return 0;
  while (*p == ' ') p++;
  if (*p || (!open_end && b < a)) return 0;  /* does not parse: ignored, as the RFC says */
  if (a >= len) return -1;
  if (open_end || b >= len) b = len - 1;
  *off = (size_t)a;
  *n = (size_t)(b - a + 1);
  return 1;
}

int http_etag_matches(const char *inm, const char *etag) {
  if (!inm) return 0;
  size_t el = strlen(etag);
  const char *p = inm;
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t') p++;
    if (*p == '*') return 1;
    if (!strncmp(p, "W/", 2)) p += 2;  /* weak comparison, as If-None-Match uses */
    size_t tl = strcspn(p, ",");
    while (tl && (p[tl - 1] == ' ' || p[tl - 1] == '\t')) tl--;
    if (tl == el && !strncmp(p, etag, el)) return 1;
    p += strcspn(p, ",");
  }
  return 0;
}

int http_ranged_plan(const HttpReq *rq, HttpRes *rs, const char *content_type, const char *etag, size_t total,
                     size_t *off, size_t *n) {
  free(rs->body);
  rs->body = NULL;
  rs->len = 0;
  rs->content_type = content_type;
  http_res_header(rs, "ETag", etag);
  http_res_header(rs, "Accept-Ranges", "bytes");
  *off = 0;
  *n = total;
  if (http_etag_matches(http_header(rq, "If-None-Match"), etag)) {
    rs->status = 304;
    return 0;
  }
  /* If-Range (RFC 9110 13.1.5): the range only while the file is the one the client
  ** holds part of, by strong comparison; any other validator (another entity tag, a weak
  ** one, a date: no Last-Modified is sent) asks for the whole file, never a splice of two. */
  const char *if_range = http_header(rq, "If-Range");
  int r = if_range && strcmp(if_range, etag) ? 0 : http_range_parse(http_header(rq, "Range"), total, off, n);
  if (r < 0) {
    char cr[64];
    snprintf(cr, sizeof cr, "bytes */%zu", total);
    http_res_header(rs, "Content-Range", cr);
    http_error(rs, 416, "range not satisfiable", json_pack("{s:s, s:I}", "range", http_header(rq, "Range"),
                                                          "size", (json_int_t)total));
    return 0;
  }
  return r == 1 ? 2 : 1;
}

void http_bytes_slice(HttpRes *rs, int plan, void *data, size_t off, size_t n, size_t total) {
  rs->status = 200;
  if (plan == 2) {
    char cr[96];
    rs->status = 206;
    snprintf(cr, sizeof cr, "bytes %zu-%zu/%zu", off, off + n - 1, total);
    http_res_header(rs, "Content-Range", cr);
  }
  rs->body = data;
  rs->len = n;
}

void http_bytes_ranged(const HttpReq *rq, HttpRes *rs, const char *content_type, const char *etag, void *data,
                       size_t len) {
  size_t off, n;
  int plan = http_ranged_plan(rq, rs, content_type, etag, len, &off, &n);
  if (!plan) { free(data); return; }
  if (off) memmove(data, (char *)data + off, n);  /* the slice, in the buffer it came in */
  http_bytes_slice(rs, plan, data, off, n, len);
}
