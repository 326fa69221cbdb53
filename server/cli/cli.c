/* Helpers shared by the subcommands' argument parsing (declared in server/cli/commands.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/cli/commands.h"

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
int cli_fill_limit(const char *cmd, const char *flag, const char *value, FillMaskLimits *l) {
  static const struct { const char *flag; long max; } flags[] = {
    {"--max-inputs", 1000000}, {"--max-tokens", 1000000000}, {"--max-masks", 1000000000},
    {"--max-top-k", 1000000000}, {"--max-answer-bytes", 1L << 40},
  };
  int which = -1;
  for (int i = 0; i < (int)(sizeof flags / sizeof flags[0]); i++) if (!strcmp(flag, flags[i].flag)) which = i;
  if (which < 0) return 0;
  long v;
  if (cli_parse_long(value, 0, flags[which].max, &v)) {
    fprintf(stderr, "maskd %s: %s must be 0 (no limit) to %ld, not '%s'\n", cmd, flag, flags[which].max, value ? value : "");
    return -1;
  }
  switch (which) {
    case 0: l->max_inputs = (int)v; break;
    case 1: l->max_tokens = (int)v; break;
    case 2: l->max_masks = (int)v; break;
    case 3: l->max_top_k = (int)v; break;
    default: l->max_answer_bytes = v; break;
  }
  return 1;
}

void cli_fill_limits_help(FILE *f) {
  fprintf(f,
          "  --max-inputs N    texts in one fill-mask request (default %d)\n"
          "  --max-tokens N    tokens of a request's texts together, [CLS]/[SEP] counted: the work\n"
          "                    of its forward pass (default %d: about 0.4 s of one core, base preset)\n"
          "  --max-masks N     mask tokens in one request, all its texts together (default %d)\n"
          "  --max-top-k N     largest top_k a request may ask for (default %d)\n"
          "  --max-answer-bytes N  largest answer, in bytes of its JSON (default %lld)\n"
          "                    For each, 0 = no limit; a request over a limit is refused, naming it.\n",
          FILLMASK_DEFAULT_MAX_INPUTS, FILLMASK_DEFAULT_MAX_TOKENS, FILLMASK_DEFAULT_MAX_MASKS,
          FILLMASK_DEFAULT_MAX_TOP_K, FILLMASK_DEFAULT_MAX_ANSWER_BYTES);
}
