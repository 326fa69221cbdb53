/* Static files (server/http/static_files.h). Two independent guards keep requests
** inside the root: the decoded path is refused if any segment is empty, "." or
** "..", starts with a dot, or holds a backslash or a control byte; and the file's
** real path (symlinks resolved) must still lie under the root's real path. */
#include "server/http/static_files.h"
#include "engine/core/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The page's files are a few hundred KB; nothing larger is served. */
#define STATIC_MAX_FILE ((uint64_t)64 << 20)

char *static_root(const char *dir, Err *err) {
  char *r = realpath(dir, NULL);
  struct stat st;
  if (!r || stat(r, &st) != 0 || !S_ISDIR(st.st_mode)) {
    err_set(err, "static directory %s: %s", dir, r ? "not a directory" : strerror(errno));
    free(r);
    return NULL;
  }
  return r;
}

const char *static_content_type(const char *name) {
  static const struct { const char *ext, *type; } types[] = {
    {".html", "text/html; charset=utf-8"}, {".js", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},   {".json", "application/json"},
    {".svg", "image/svg+xml"},             {".png", "image/png"},
    {".ico", "image/x-icon"},              {".txt", "text/plain; charset=utf-8"},
  };
  const char *dot = strrchr(name, '.');
  if (dot && !strchr(dot, '/'))
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
      if (!strcasecmp(dot, types[i].ext)) return types[i].type;
  return "application/octet-stream";
}

/* 1 when every segment of path is a plain name, 0 when one tries to climb out or
** name a hidden file, -1 when one is empty (no such file). */
static int path_clean(const char *path) {
  if (path[0] != '/') return 0;
  const char *s = path + 1;
  for (;;) {
    size_t n = strcspn(s, "/");
    if (n == 0) return -1;
    if (s[0] == '.') return 0;
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)s[i] < 0x20 || s[i] == '\\' || s[i] == 0x7f) return 0;
    s += n;
    if (!*s) return 1;
    s++;
  }
}

int static_serve(const char *root, const HttpReq *rq, HttpRes *rs) {
  const char *path = strcmp(rq->path, "/") ? rq->path : "/index.html";
  int clean = path_clean(path);
  if (clean < 0) return 1;
  if (!clean) {
    http_error(rs, 400, "bad static path", json_pack("{s:s}", "path", rq->path));
    return 0;
  }
  char full[PATH_MAX];
  if ((size_t)snprintf(full, sizeof full, "%s%s", root, path) >= sizeof full) return 1;
  char *real = realpath(full, NULL);
  if (!real) return 1;
  size_t rl = strlen(root);
  int inside = !strncmp(real, root, rl) && real[rl] == '/';
  /* A regular file only (a FIFO would block the open), of at most STATIC_MAX_FILE bytes. */
  uint64_t size = 0;
  int fd = inside ? files_open_regular(real, &size, NULL) : -1;
  free(real);
  if (fd < 0) return 1;
  if (size > STATIC_MAX_FILE) { close(fd); return 1; }
  char *data = malloc((size_t)size + 1);
  ssize_t got = data ? files_read_full(fd, data, (size_t)size) : -1;
  close(fd);
  if (got != (ssize_t)size) {
    free(data);
    http_errorf(rs, 500, "cannot read static file %s", path);
    return 0;
  }
  free(rs->body);
  rs->body = data;
  rs->len = (size_t)got;
  rs->status = 200;
  rs->content_type = static_content_type(path);
  rs->cache = "no-cache";  /* revalidate: the page changes with the binary, not with time */
  return 0;
}
