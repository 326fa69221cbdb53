/* Small file-system helpers shared by the modules that read and write folders. */
#ifndef MASKD_FILES_H
#define MASKD_FILES_H
#include "engine/err.h"

/* "dir/name" in a new malloc'd string (NULL when out of memory). */
char *files_join(const char *dir, const char *name);
/* mkdir -p: creates dir and its missing parents; an existing directory is fine. */
int files_make_dirs(const char *dir, Err *err);

#endif
