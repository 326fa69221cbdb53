/* Layer: server/http/ (knows no maskd concept; uses engine/core only). (ARCHITECTURE.md)
**
** Answers with a file's bytes as a cache or a download manager expects them (RFC 9110):
** a strong ETag, If-None-Match (304), one byte range (206 with Content-Range; 416 with
** "bytes * /LEN" when it lies beyond the end), Accept-Ranges. Several ranges, or a Range
** header that does not parse, get the whole file (200), as the RFC allows. HEAD needs
** nothing here: the layer sends the same headers without the body. */
#ifndef MASKD_HTTP_RANGED_H
#define MASKD_HTTP_RANGED_H
#include <stddef.h>
#include "server/http/http.h"

/* What a Range header asks of a body of len bytes: 0 the whole body (no header, several
** ranges, or one that does not parse), 1 the bytes [*off, *off + *n), -1 unsatisfiable. */
int http_range_parse(const char *range, size_t len, size_t *off, size_t *n);
/* 1 when an If-None-Match header (a list of tags, W/ ignored, or "*") matches etag (quoted). */
int http_etag_matches(const char *if_none_match, const char *etag);
/* Answers data (malloc'd, taken: freed or kept as the body) of len bytes under etag (quoted,
** strong) with the status the request's If-None-Match, Range and If-Range call for. */
void http_bytes_ranged(const HttpReq *rq, HttpRes *rs, const char *content_type, const char *etag, void *data,
                       size_t len);
/* The same answer for a body of total bytes held elsewhere (read only the slice asked):
** 0 when this answered (304 or 416); else the caller reads the n bytes at *off and answers
** them with http_bytes_slice, passing this plan on (1: the whole body, 2: a range). */
int http_ranged_plan(const HttpReq *rq, HttpRes *rs, const char *content_type, const char *etag, size_t total,
                     size_t *off, size_t *n);
/* Answers the slice planned by http_ranged_plan (data malloc'd, taken: the n bytes at off). */
void http_bytes_slice(HttpRes *rs, int plan, void *data, size_t off, size_t n, size_t total);

#endif
