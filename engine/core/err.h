/* Layer: engine/core/ (this folder: errors, clocks, rng, platform, files, buffers, cpu) uses
** libc only, and every layer uses it. (ARCHITECTURE.md)
**
** Error reporting for the engine: a fallible function takes an Err* (may be
** NULL), writes one human-readable line into it and returns -1 (or NULL). The
** Err also says what kind of failure it was, so a caller that must answer
** (server/http maps kinds to HTTP statuses in one table) never reads the text. */
#ifndef MASKD_ERR_H
#define MASKD_ERR_H

/* What went wrong, as a caller must react to it. ERR_NONE is a zeroed Err's kind. */
typedef enum ErrKind {
  ERR_NONE = 0,
  ERR_INTERNAL,   /* a failure nobody classified, a bug, a broken invariant; err_set()'s kind */
  ERR_BAD_INPUT,  /* input refused as it stands: malformed text, a parse error, a text the model cannot take */
  ERR_INVALID,    /* a well-formed request with a wrong field: a type, a value, an unknown or missing name */
  ERR_NOT_FOUND,  /* what was named does not exist: a file, a run, a model, a revision, a job */
  ERR_CONFLICT,   /* the name is taken, or the thing is in a state that forbids the action */
  ERR_TOO_LARGE,  /* more than a limit allows (a file's size, a request's work) */
  ERR_IO,         /* the file system or the database failed */
  ERR_NOMEM,      /* out of memory */
  ERR_BUSY        /* busy for now (the database locked by another writer): the same call may succeed later */
} ErrKind;

typedef struct Err {
  char msg[512];
  ErrKind kind;
} Err;

/* Formats a message into e (when e is not NULL) with kind ERR_INTERNAL and returns -1. */
int err_set(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Formats a message into e (when e is not NULL) with the given kind and returns -1. */
int err_setk(Err *e, ErrKind kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prefixes e's message with "prefix: " (for context such as a file name), keeping its kind; returns -1. */
int err_prefix(Err *e, const char *prefix);

/* Gives e the kind k when it holds an unclassified failure (ERR_INTERNAL or none):
** a parser's boundary says "bad input" without hiding an inner ERR_NOMEM or ERR_IO. Returns -1. */
int err_kind_default(Err *e, ErrKind k);

/* The kind's name in snake case ("not_found"), for messages and tests. */
const char *err_kind_name(ErrKind k);

#endif
