/* Small file-system helpers shared by the modules that read and write folders:
** bounded reads of files maskd did not write (every reader passes the cap that suits
** what it reads; non-regular files are refused before a byte is read), a bounded line
** reader for corpora, and atomic replacement of files and folders (a temporary beside
** the target, fsync, rename, fsync of the folder), so a reader never sees half a file
** and a failed write leaves what was there before. Errors carry their kind: a missing
** file ERR_NOT_FOUND, one over its cap (or a line over max) ERR_TOO_LARGE, a FIFO or a
** folder where a file is read ERR_BAD_INPUT, a failed read or write ERR_IO, ERR_NOMEM. */
#ifndef MASKD_FILES_H
#define MASKD_FILES_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include "engine/core/err.h"

/* "dir/name" in a new malloc'd string (NULL when out of memory). */
char *files_join(const char *dir, const char *name);
/* mkdir -p: creates dir and its missing parents; an existing directory is fine. On a
** failure the folders it made are removed again. */
int files_make_dirs(const char *dir, Err *err);
/* The folders one files_make_dirs_undoable() created, so that a writer that fails after it
** can leave the tree as it was. Zeroed: nothing made. */
typedef struct FilesMadeDirs {
  char *path;                /* a copy of dir (NULL when nothing is held) */
  size_t *ends;              /* path[0, ends[i]) is a folder this call created, outermost first */
  int n;
} FilesMadeDirs;
/* files_make_dirs(), and *made gets the folders it created (none when it fails). */
int files_make_dirs_undoable(const char *dir, FilesMadeDirs *made, Err *err);
/* Removes made's folders innermost first, each only while empty (rmdir; a folder holding
** something stops it), then frees made. */
void files_made_dirs_remove(FilesMadeDirs *made);
/* Frees made, its folders kept (the writer succeeded); a no-op on a zeroed one. */
void files_made_dirs_keep(FilesMadeDirs *made);
/* "256 MiB", "1 MiB", "512 bytes": a cap for messages (into buf[cap], returned). */
const char *files_size_text(uint64_t bytes, char *buf, size_t cap);

/* ---- bounded reading ---- */

/* Opens path read-only when it is a regular file; *size (may be NULL) gets its size.
** A FIFO, a device (/dev/zero), a socket or a folder is refused without blocking and
** without reading. Returns the descriptor, or -1 with err naming path. */
int files_open_regular(const char *path, uint64_t *size, Err *err);
/* files_open_regular() as a stdio stream ("rb"). */
FILE *files_fopen_regular(const char *path, uint64_t *size, Err *err);
/* A regular file's bytes, whole: malloc'd with a NUL after the *len bytes. A file over
** cap bytes is refused before anything is read, and at most cap + 1 bytes are ever read
** (a file growing while read is refused too). */
char *files_read_all(const char *path, size_t cap, size_t *len, Err *err);
/* Reads n bytes from fd into buf, retrying short reads and EINTR: returns n, fewer
** only at the end of the file, or -1 with errno set on a read error. */
ssize_t files_read_full(int fd, void *buf, size_t n);
/* A stream's bytes up to its end (stdin, a pipe): as files_read_all(), refusing more than
** cap bytes once cap + 1 have been read; name is for messages. */
char *files_read_stream(FILE *f, const char *name, size_t cap, size_t *len, Err *err);

/* Lines of a stream, each at most max bytes (a longer one is an error, found after
** reading max + 1 bytes of it, never by holding the whole line). */
typedef struct FilesLines {
  FILE *f;
  size_t max;
  char *buf;
  size_t cap, start, end;    /* unread bytes are buf[start, end) */
  int eof;
  uint64_t bytes;            /* bytes consumed so far, newlines included */
} FilesLines;
void files_lines_init(FilesLines *r, FILE *f, size_t max);
/* The next line without its '\n' (NUL-terminated in place, valid until the next call):
** 1 with *line, *len set; 0 at the end; -1 on a read error, a line over max or out of memory. */
int files_lines_next(FilesLines *r, char **line, size_t *len, Err *err);
void files_lines_free(FilesLines *r);

/* ---- atomic writing ---- */

/* A file being written: a temporary ".NAME.tmp-XXXXXX" beside NAME, renamed over
** it by commit. Usage: open, write..., commit (or abort on any error). Several files
** that must change together: open and write all, finish all, then commit each. */
typedef struct FilesAtomic {
  int fd;                    /* -1 once finished */
  char *path, *tmp;          /* NULL once committed or aborted */
} FilesAtomic;
/* Creates the temporary (mode 0666 less the umask) in path's folder. */
int files_atomic_open(FilesAtomic *a, const char *path, Err *err);
/* Appends n bytes (a short write or ENOSPC/EFBIG is an error naming path). */
int files_atomic_write(FilesAtomic *a, const void *data, size_t n, Err *err);
/* fsync and close the temporary: after this only the rename is left. */
int files_atomic_finish(FilesAtomic *a, Err *err);
/* finish() when not yet done, rename over path, fsync the folder. The temporary is
** removed and path left as it was on any failure. */
int files_atomic_commit(FilesAtomic *a, Err *err);
/* Removes the temporary; a no-op after commit or abort, and on a zeroed FilesAtomic. */
void files_atomic_abort(FilesAtomic *a);
/* The whole sequence for bytes in memory. */
int files_write_atomic(const char *path, const void *data, size_t n, Err *err);

/* fsync of a folder, so renames and new names in it are durable. */
int files_sync_dir(const char *dir, Err *err);
/* files_sync_dir() of the folder holding path. */
int files_sync_parent(const char *path, Err *err);
/* Makes an empty temporary folder ".NAME.tmp-XXXXXX" beside path (mode 0777 less the
** umask), for a folder that must appear complete or not at all; *tmp is malloc'd. */
int files_make_temp_dir(const char *path, char **tmp, Err *err);
/* Removes dir's plain files and then dir (the shape of a temporary folder); best effort. */
void files_remove_flat_dir(const char *dir);
/* 1 when name is one of this module's temporaries (".X.tmp-XXXXXX"), for sweeps. */
int files_is_temp_name(const char *name);

#endif
