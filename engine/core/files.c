#include "engine/core/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

char *files_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

/* mkdir -p that records the prefixes of dir it created (made->ends) and, when it fails
** part-way, removes them again: a caller told -1 cannot know what to take back. */
int files_make_dirs_undoable(const char *dir, FilesMadeDirs *made, Err *err) {
  FilesMadeDirs m = {0};
  if (made) *made = m;
  if (!*dir) return err_setk(err, ERR_BAD_INPUT, "empty directory name");
  m.path = strdup(dir);
  m.ends = malloc((strlen(dir) + 1) * sizeof *m.ends);   /* a level per character at most */
  if (!m.path || !m.ends) { files_made_dirs_keep(&m); return err_setk(err, ERR_NOMEM, "out of memory"); }
  char *p = m.path;
  int rc = 0;
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0755) == 0) m.ends[m.n++] = (size_t)(s - p);
    else if (errno != EEXIST) rc = err_setk(err, ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
    *s = c;
    if (rc || c == '\0') break;
  }
  struct stat st;
  if (!rc && (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))) rc = err_setk(err, ERR_IO, "%s: not a directory", dir);
  if (rc) files_made_dirs_remove(&m);
  else if (made) *made = m;
  else files_made_dirs_keep(&m);
  return rc;
}

int files_make_dirs(const char *dir, Err *err) { return files_make_dirs_undoable(dir, NULL, err); }

void files_made_dirs_remove(FilesMadeDirs *made) {
  /* Innermost first; a folder something else has put a file in stays, and so do those
  ** around it. */
  for (int i = made->n - 1; i >= 0; i--) {
    made->path[made->ends[i]] = '\0';
    if (rmdir(made->path) != 0) break;
  }
  files_made_dirs_keep(made);
}

void files_made_dirs_keep(FilesMadeDirs *made) {
  free(made->path);
  free(made->ends);
  memset(made, 0, sizeof *made);
}

const char *files_size_text(uint64_t bytes, char *buf, size_t cap) {
  static const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  uint64_t v = bytes;
  while (u < 4 && v >= 1024 && v % 1024 == 0) { v /= 1024; u++; }
  snprintf(buf, cap, "%" PRIu64 " %s", v, units[u]);
  return buf;
}

/* ---- bounded reading ---- */

static const char *kind_of(mode_t m) {
  return S_ISDIR(m) ? "a folder" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device" : S_ISBLK(m) ? "a block device"
         : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

int files_open_regular(const char *path, uint64_t *size, Err *err) {
  /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return err_setk(err, errno == ENOENT ? ERR_NOT_FOUND : ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int rc = err_setk(err, ERR_IO, "%s: %s", path, strerror(errno));
    close(fd);
    return rc;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return err_setk(err, ERR_BAD_INPUT, "%s: %s, not a regular file", path, kind_of(st.st_mode));
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (size) *size = (uint64_t)st.st_size;
  return fd;
}

FILE *files_fopen_regular(const char *path, uint64_t *size, Err *err) {
  int fd = files_open_regular(path, size, err);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (!f) { err_setk(err, ERR_IO, "%s: %s", path, strerror(errno)); close(fd); }
  return f;
}

static int too_large(const char *name, uint64_t have, int at_least, size_t cap, Err *err) {
  char c[32];
  files_size_text(cap, c, sizeof c);
  if (at_least) return err_setk(err, ERR_TOO_LARGE, "%s: more than %s, the limit for this file", name, c);
  return err_setk(err, ERR_TOO_LARGE, "%s: %" PRIu64 " bytes, more than %s, the limit for this file", name, have, c);
}

ssize_t files_read_full(int fd, void *buf, size_t n) {
  char *p = buf;
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

char *files_read_all(const char *path, size_t cap, size_t *len, Err *err) {
  uint64_t size;
  int fd = files_open_regular(path, &size, err);
  if (fd < 0) return NULL;
  if (size > cap) { close(fd); too_large(path, size, 0, cap, err); return NULL; }
  /* One byte more than the size: a file that grew since fstat shows it. */
  char *buf = malloc((size_t)size + 2);
  if (!buf) { close(fd); err_setk(err, ERR_NOMEM, "%s: out of memory for %" PRIu64 " bytes", path, size); return NULL; }
  ssize_t got = files_read_full(fd, buf, (size_t)size + 1);
  int saved = errno;
  close(fd);
  if (got < 0) { free(buf); err_setk(err, ERR_IO, "%s: read error: %s", path, strerror(saved)); return NULL; }
  if ((uint64_t)got != size) {
    free(buf);
    err_setk(err, ERR_IO, "%s: changed while being read (%zd bytes, %" PRIu64 " expected)", path, got, size);
    return NULL;
  }
  buf[got] = '\0';
  *len = (size_t)got;
  return buf;
}

char *files_read_stream(FILE *f, const char *name, size_t cap, size_t *len, Err *err) {
  size_t n = 0, room = cap < 65535 ? cap + 1 : 65536;
  char *buf = malloc(room + 1);
  if (!buf) { err_setk(err, ERR_NOMEM, "%s: out of memory", name); return NULL; }
  for (;;) {
    if (n == room) {
      if (room > cap) { free(buf); too_large(name, 0, 1, cap, err); return NULL; }
      size_t grow = room > cap / 2 ? cap + 1 : room * 2;   /* never more than cap + 1 bytes read */
      char *nb = realloc(buf, grow + 1);
      if (!nb) { free(buf); err_setk(err, ERR_NOMEM, "%s: out of memory after %zu bytes", name, n); return NULL; }
      buf = nb;
      room = grow;
    }
    size_t got = fread(buf + n, 1, room - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) { free(buf); err_setk(err, ERR_IO, "%s: read error: %s", name, strerror(errno)); return NULL; }
  if (n > cap) { free(buf); too_large(name, 0, 1, cap, err); return NULL; }
  buf[n] = '\0';
  *len = n;
  return buf;
}

void files_lines_init(FilesLines *r, FILE *f, size_t max) {
  memset(r, 0, sizeof *r);
  r->f = f;
  r->max = max;
}

void files_lines_free(FilesLines *r) {
  free(r->buf);
  r->buf = NULL;
  r->cap = r->start = r->end = 0;
}

int files_lines_next(FilesLines *r, char **line, size_t *len, Err *err) {
  for (;;) {
    char *nl = r->end > r->start ? memchr(r->buf + r->start, '\n', r->end - r->start) : NULL;
    size_t have = r->end - r->start;
    if (nl || (r->eof && have > 0)) {
      size_t n = nl ? (size_t)(nl - (r->buf + r->start)) : have;
      if (n > r->max) return err_setk(err, ERR_TOO_LARGE, "a line of more than %zu bytes (the limit for one line)", r->max);
      *line = r->buf + r->start;
      *len = n;
      r->buf[r->start + n] = '\0';   /* the '\n', or the spare byte kept past end */
      r->start += n + (nl != NULL);
      r->bytes += n + (nl != NULL);
      return 1;
    }
    if (r->eof) return 0;
    if (have > r->max) return err_setk(err, ERR_TOO_LARGE, "a line of more than %zu bytes (the limit for one line)", r->max);
    /* Room to read: move the partial line to the front, grow while it is shorter than max + 1. */
    if (r->start > 0) {
      memmove(r->buf, r->buf + r->start, have);
      r->start = 0;
      r->end = have;
    }
    if (r->cap == 0 || r->end + 1 >= r->cap) {
      size_t want = r->cap ? r->cap * 2 : 65536;
      if (want > r->max + 2) want = r->max + 2;
      if (want < r->end + 2) want = r->end + 2;
      char *nb = realloc(r->buf, want);
      if (!nb) return err_setk(err, ERR_NOMEM, "out of memory for a line of %zu bytes", have);
      r->buf = nb;
      r->cap = want;
    }
    size_t got = fread(r->buf + r->end, 1, r->cap - 1 - r->end, r->f);
    r->end += got;
    if (got == 0) {
      if (ferror(r->f)) return err_setk(err, ERR_IO, "read error: %s", strerror(errno));
      r->eof = 1;
    }
  }
}

/* ---- atomic writing ---- */

/* ".NAME.tmp-XXXXXX" beside path; six characters from a per-process counter, the pid
** and the clock, tried again on a collision by the caller. */
static char *temp_name(const char *path) {
  static atomic_uint counter;
  static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const char *slash = strrchr(path, '/');
  size_t dir_len = slash ? (size_t)(slash - path) + 1 : 0;
  const char *base = path + dir_len;
  size_t base_len = strlen(base);
  if (base_len > 200) base_len = 200;   /* the name must stay under NAME_MAX */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32 ^
               (uint64_t)atomic_fetch_add(&counter, 1) * 0xbf58476d1ce4e5b9ULL ^ (uint64_t)ts.tv_sec;
  char *t = malloc(dir_len + base_len + 16);
  if (!t) return NULL;
  memcpy(t, path, dir_len);
  t[dir_len] = '.';
  memcpy(t + dir_len + 1, base, base_len);
  char *p = t + dir_len + 1 + base_len;
  memcpy(p, ".tmp-", 5);
  p += 5;
  for (int i = 0; i < 6; i++) { p[i] = digits[x % 62]; x /= 62; }
  p[6] = '\0';
  return t;
}

int files_is_temp_name(const char *name) {
  size_t n = strlen(name);
  return n > 12 && name[0] == '.' && !memcmp(name + n - 11, ".tmp-", 5);
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return strdup(".");
  if (slash == path) return strdup("/");
  return strndup(path, (size_t)(slash - path));
}

int files_sync_dir(const char *dir, Err *err) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return err_setk(err, ERR_IO, "%s: %s", dir, strerror(errno));
  /* Some file systems cannot sync a folder (EINVAL); the rename is then as durable as they make it. */
  int rc = fsync(fd) != 0 && errno != EINVAL && errno != EROFS ? err_setk(err, ERR_IO, "%s: fsync: %s", dir, strerror(errno)) : 0;
  close(fd);
  return rc;
}

int files_sync_parent(const char *path, Err *err) {
  char *d = dir_of(path);
  if (!d) return err_setk(err, ERR_NOMEM, "out of memory");
  int rc = files_sync_dir(d, err);
  free(d);
  return rc;
}

int files_atomic_open(FilesAtomic *a, const char *path, Err *err) {
  a->fd = -1;
  a->tmp = NULL;
  if (!(a->path = strdup(path))) return err_setk(err, ERR_NOMEM, "%s: out of memory", path);
  for (int tries = 0; tries < 100; tries++) {
    free(a->tmp);
    if (!(a->tmp = temp_name(path))) break;
    a->fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (a->fd >= 0) return 0;
    if (errno != EEXIST) {
      int rc = err_setk(err, ERR_IO, "%s: cannot create a file beside it: %s", path, strerror(errno));
      free(a->tmp); free(a->path);
      a->tmp = a->path = NULL;
      return rc;
    }
  }
  free(a->tmp); free(a->path);
  a->tmp = a->path = NULL;
  return err_setk(err, ERR_IO, "%s: cannot create a temporary file beside it", path);
}

int files_atomic_write(FilesAtomic *a, const void *data, size_t n, Err *err) {
  const char *p = data;
  if (a->fd < 0) return err_set(err, "%s: not open for writing", a->path ? a->path : "file");
  while (n > 0) {
    ssize_t w = write(a->fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return err_setk(err, ERR_IO, "%s: write failed: %s", a->path, strerror(w < 0 ? errno : ENOSPC));
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

int files_atomic_finish(FilesAtomic *a, Err *err) {
  if (a->fd < 0) return a->tmp ? 0 : err_set(err, "%s: not open for writing", a->path ? a->path : "file");
  int rc = 0;
  if (fsync(a->fd) != 0) rc = err_setk(err, ERR_IO, "%s: write failed: %s", a->path, strerror(errno));
  if (close(a->fd) != 0 && rc == 0) rc = err_setk(err, ERR_IO, "%s: write failed: %s", a->path, strerror(errno));
  a->fd = -1;
  return rc;
}

int files_atomic_commit(FilesAtomic *a, Err *err) {
  if (!a->tmp) return err_set(err, "%s: nothing to commit", a->path ? a->path : "file");
  if (files_atomic_finish(a, err)) { files_atomic_abort(a); return -1; }
  if (rename(a->tmp, a->path) != 0) {
    int rc = err_setk(err, ERR_IO, "%s: cannot rename into place: %s", a->path, strerror(errno));
    files_atomic_abort(a);
    return rc;
  }
  free(a->tmp);
  a->tmp = NULL;
  int rc = files_sync_parent(a->path, err);
  free(a->path);
  a->path = NULL;
  return rc;
}

void files_atomic_abort(FilesAtomic *a) {
  if (a->fd >= 0) close(a->fd);
  a->fd = -1;
  if (a->tmp) unlink(a->tmp);
  free(a->tmp);
  free(a->path);
  a->tmp = a->path = NULL;
}

int files_write_atomic(const char *path, const void *data, size_t n, Err *err) {
  FilesAtomic a;
  if (files_atomic_open(&a, path, err)) return -1;
  if (files_atomic_write(&a, data, n, err)) { files_atomic_abort(&a); return -1; }
  return files_atomic_commit(&a, err);
}

int files_make_temp_dir(const char *path, char **tmp, Err *err) {
  *tmp = NULL;
  for (int tries = 0; tries < 100; tries++) {
    char *t = temp_name(path);
    if (!t) return err_setk(err, ERR_NOMEM, "out of memory");
    if (mkdir(t, 0777) == 0) { *tmp = t; return 0; }
    int e = errno;
    free(t);
    if (e != EEXIST) return err_setk(err, ERR_IO, "%s: cannot create a folder beside it: %s", path, strerror(e));
  }
  return err_setk(err, ERR_IO, "%s: cannot create a temporary folder beside it", path);
}

void files_remove_flat_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char *p = files_join(dir, e->d_name);
    if (p) unlink(p);
    free(p);
  }
  if (d) closedir(d);
  rmdir(dir);
}
