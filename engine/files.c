#include "engine/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *files_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

int files_make_dirs(const char *dir, Err *err) {
  if (!*dir) return err_set(err, "empty directory name");
  char *p = strdup(dir);
  if (!p) return err_set(err, "out of memory");
  for (char *s = p + 1;; s++) {
    if (*s != '/' && *s != '\0') continue;
    char c = *s;
    *s = '\0';
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
      int rc = err_set(err, "%s: cannot create directory: %s", p, strerror(errno));
      free(p);
      return rc;
    }
    *s = c;
    if (c == '\0') break;
  }
  free(p);
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return err_set(err, "%s: not a directory", dir);
  return 0;
}
