/* Helpers shared by the subcommands' argument parsing (declared in server/commands.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int cli_looks_like_flag(const char *s) {
  return s[0] == '-' && s[1] != '\0' && !(s[1] >= '0' && s[1] <= '9') && s[1] != '.';
}

int cli_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag, const char **value) {
  const char *a = argv[*i];
  size_t n = strlen(flag);
  if (strncmp(a, flag, n) != 0) return 0;
  if (a[n] == '=') { *value = a + n + 1; return 1; }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc || cli_looks_like_flag(argv[*i + 1])) {
    fprintf(stderr, "maskd %s: %s needs a value%s%s%s\n", cmd, flag, *i + 1 < argc ? ", not the option " : "",
            *i + 1 < argc ? argv[*i + 1] : "", *i + 1 < argc ? " (write --flag=VALUE for a value that starts with '-')" : "");
    return -1;
  }
  *value = argv[++*i];
  return 1;
}

void cli_block_stop_signals(sigset_t *old) {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop, old);
}

void cli_restore_signals(const sigset_t *old) { sigprocmask(SIG_SETMASK, old, NULL); }
