#include "engine/core/json_text.h"

const char *json_error_message(const json_error_t *je) {
  /* Texts and labels are C strings: a NUL would cut them short, so none is read. */
  if (json_error_code(je) == json_error_null_character) return "a NUL character (\\u0000) in a string is not allowed";
  return je->text;
}
