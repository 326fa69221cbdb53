/* Error reporting for the engine: a fallible function takes an Err* (may be
** NULL), writes one human-readable line into it and returns -1 (or NULL). */
#ifndef MASKD_ERR_H
#define MASKD_ERR_H

typedef struct Err { char msg[512]; } Err;

/* Formats a message into e (when e is not NULL) and returns -1. */
int err_set(Err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes e's message with "prefix: " (for context such as a file name); returns -1. */
int err_prefix(Err *e, const char *prefix);

#endif
