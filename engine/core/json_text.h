/* jansson's error texts, worded for a user. */
#ifndef MASKD_JSON_TEXT_H
#define MASKD_JSON_TEXT_H
#include <jansson.h>

/* je's text, except where it names a jansson flag the user never set: a "\u0000" in a
** string ("\u0000 is not allowed without JSON_ALLOW_NUL") says what is refused. */
const char *json_error_message(const json_error_t *je);

#endif
