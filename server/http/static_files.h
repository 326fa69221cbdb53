/* The web page's files: serves a directory (static/) read-only, nothing outside it. */
#ifndef MASKD_STATIC_FILES_H
#define MASKD_STATIC_FILES_H
#include "engine/core/err.h"
#include "server/http/http.h"

/* The canonical absolute path of dir (malloc'd), which must be a directory. */
char *static_root(const char *dir, Err *err);
/* Answers GET path from root ("/" is index.html): 0 when it answered (200, or 400
** for a path that tries to leave root or name a hidden file), 1 when no such file. */
int static_serve(const char *root, const HttpReq *rq, HttpRes *rs);
/* The Content-Type for a file name, from its extension. */
const char *static_content_type(const char *name);

#endif
