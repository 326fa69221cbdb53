/* Helpers shared by the subcommands' argument parsing (declared in server/commands.h). */
#include <errno.h>
#include <stdlib.h>

#include "server/commands.h"

const char *cli_db_path(const char *flag) {
  if (flag) return flag;
  const char *e = getenv("MASKD_DB");
  return e && *e ? e : "maskd.db";
}

int cli_parse_long(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}
