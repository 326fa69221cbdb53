/* Helpers shared by the subcommands' argument parsing, and the table-driven option
** parser and --help writer (declared in server/cli/commands.h). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/cli/commands.h"

void cli_pipeline_refusal(const char *cmd, const FillMaskError *fe) {
  if (fe->truncation_helps) {
    fprintf(stderr, "maskd %s: %s (--truncation cuts it)\n", cmd, fe->err.msg);
  } else if (fe->err.kind == ERR_TOO_LARGE && fe->limit) {
    char flag[64];
    int n = snprintf(flag, sizeof flag, "--%s", fe->limit);
    for (int i = 2; i < n && i < (int)sizeof flag && flag[i]; i++) if (flag[i] == '_') flag[i] = '-';
    fprintf(stderr, "maskd %s: %s (%s raises it from %lld)\n", cmd, fe->err.msg, flag, fe->max);
  } else {
    fprintf(stderr, "maskd %s: %s\n", cmd, fe->err.msg);
  }
}

const char *cli_db_path(const char *flag) {
  if (flag) return flag;
  const char *e = getenv("MASKD_DB");
  return e && *e ? e : "maskd.db";
}

Store *cli_store_open_existing(const char *flag, Err *err) {
  const char *path = cli_db_path(flag);
  struct stat st;
  /* An empty file is no store either: opening it would make one. */
  if (stat(path, &st) || (S_ISREG(st.st_mode) && st.st_size == 0)) {
    err_setk(err, ERR_NOT_FOUND, "no store at %s (--db PATH or MASKD_DB)", path);
    return NULL;
  }
  return store_open(path, err);
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

const char *cli_option_outside(int argc, char **argv, int first, const char *const *allowed) {
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--")) return NULL;
    if (!cli_looks_like_flag(a)) continue;   /* a value: the parser never reads one as an option */
    size_t n = strcspn(a, "=");
    int ok = 0;
    for (const char *const *k = allowed; *k && !ok; k++) ok = strlen(*k) == n && !strncmp(a, *k, n);
    if (!ok) return a;
  }
  return NULL;
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

const char CLI_DEFAULT[] = "(the defaults' value)";

const CliSpec *const cli_specs[] = {
  &cli_spec_tokenizer, &cli_spec_tokenizer_train, &cli_spec_prepare, &cli_spec_train, &cli_spec_fillmask,
  &cli_spec_classify, &cli_spec_export, &cli_spec_import, &cli_spec_runs, &cli_spec_models, &cli_spec_serve,
  &cli_spec_bench, &cli_spec_finetune, &cli_spec_average, &cli_spec_evaluate,
};
const int cli_n_specs = (int)(sizeof cli_specs / sizeof cli_specs[0]);

int cli_mode(const CliSpec *spec, const char *word) {
  for (int m = 0; m < spec->n_modes; m++) if (!strcmp(spec->modes[m], word)) return m;
  return -1;
}

static int is_value_kind(CliKind k) { return k != CLI_TEXT && k != CLI_FLAG; }

/* The row named by arg ("--name" or "--name=VALUE"); CLI_PAIR rows take '_' for '-'. */
static const CliOpt *find_opt(const CliSpec *spec, const char *arg) {
  size_t n = strcspn(arg, "=");
  for (int k = 0; k < spec->n_opts; k++) {
    const CliOpt *o = &spec->opts[k];
    if (!o->name || strlen(o->name) != n) continue;
    if (!strncmp(o->name, arg, n)) return o;
    if (o->kind != CLI_PAIR) continue;
    size_t j = 0;
    while (j < n && (arg[j] == o->name[j] || (arg[j] == '_' && o->name[j] == '-'))) j++;
    if (j == n) return o;
  }
  return NULL;
}

/* "an integer in [lo, hi]" and the like: what a value of o must be. */
static void expected(const CliOpt *o, char *buf, size_t size) {
  switch (o->kind) {
    case CLI_INT: case CLI_LONG: case CLI_I64:
      snprintf(buf, size, "an integer in [%lld, %lld]", o->lo, o->hi);
      break;
    case CLI_DOUBLE:
      snprintf(buf, size, "a number in %c%g, %g%c", o->open & CLI_OPEN_LO ? '(' : '[', o->flo, o->fhi,
               o->open & CLI_OPEN_HI ? ')' : ']');
      break;
    case CLI_CHOICE: {
      size_t n = (size_t)snprintf(buf, size, "one of ");
      for (const char *p = o->arg; *p && n + 3 < size; p++) {
        if (*p == '|') { buf[n++] = ','; buf[n++] = ' '; }
        else buf[n++] = *p;
      }
      buf[n < size ? n : size - 1] = '\0';
      break;
    }
    default:
      snprintf(buf, size, "%s", o->expect ? o->expect : "a value");
  }
}

/* Stores value by o's kind; -1 when it is not one (the caller words the refusal). */
static int store_value(const CliOpt *o, const char *v, void *args) {
  char *at = (char *)args + o->off;
  switch (o->kind) {
    case CLI_INT: case CLI_LONG: case CLI_I64: {
      if (!*v) return -1;
      errno = 0;
      char *end;
      long long x = strtoll(v, &end, 10);
      if (errno || *end || x < o->lo || x > o->hi) return -1;
      if (o->kind == CLI_INT) *(int *)at = (int)x;
      else if (o->kind == CLI_LONG) *(long *)at = (long)x;
      else *(long long *)at = x;
      return 0;
    }
    case CLI_DOUBLE: {
      char *end;
      double x = strtod(v, &end);
      if (!*v || *end || isnan(x)) return -1;
      if (o->open & CLI_OPEN_LO ? !(x > o->flo) : !(x >= o->flo)) return -1;
      if (o->open & CLI_OPEN_HI ? !(x < o->fhi) : !(x <= o->fhi)) return -1;
      *(double *)at = x;
      return 0;
    }
    case CLI_CHOICE: {
      size_t n = strlen(v);
      int idx = 0;
      for (const char *p = o->arg;; idx++) {
        size_t w = strcspn(p, "|");
        if (w == n && !strncmp(p, v, n)) { *(int *)at = idx; return 0; }
        if (!p[w]) return -1;
        p += w + 1;
      }
    }
    case CLI_CUSTOM:
      return o->parse(v, args);
    case CLI_STRING: case CLI_OPTIONAL:
      *(const char **)at = v;
      return 0;
    default:
      return -1;
  }
}

/* Appends v to o's list; -1 (said) when it is full. */
static int append(const char *who, const CliOpt *o, const char *v, void *args) {
  int *n = (int *)((char *)args + o->off2);
  if (*n >= o->hi) { fprintf(stderr, "maskd %s: %s: at most %lld values\n", who, o->name, o->hi); return -1; }
  ((const char **)((char *)args + o->off))[(*n)++] = v;
  return 0;
}

int cli_parse(const CliSpec *spec, const char *who, int mode, int argc, char **argv, int first, void *args,
              const char **pos, int *n_pos) {
  int none;
  if (!n_pos) n_pos = &none;
  *n_pos = 0;
  for (int i = first; i < argc && strcmp(argv[i], "--"); i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { cli_help(stdout, spec); return 1; }
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) || !a[2]) {
      /* A positional argument; "--" makes all that follow positional. */
      int rest = !strcmp(a, "--") && spec->positional != 0;
      for (int j = rest ? i + 1 : i; j < (rest ? argc : i + 1); j++) {
        if (spec->positional >= 0 && *n_pos >= spec->positional) {
          fprintf(stderr, "maskd %s: %s '%s' (maskd %s --help)\n", who,
                  spec->positional ? "one argument too many:" : "unexpected argument", argv[j], spec->name);
          return -1;
        }
        pos[(*n_pos)++] = argv[j];
      }
      if (rest) break;
      continue;
    }
    const CliOpt *o = find_opt(spec, a);
    size_t n = strcspn(a, "=");
    if (!o) { fprintf(stderr, "maskd %s: unknown option %.*s (maskd %s --help)\n", who, (int)n, a, spec->name); return -1; }
    if (o->modes && mode >= 0 && !(o->modes & (1u << mode))) {
      fprintf(stderr, "maskd %s: %s is not an option of %s (maskd %s --help)\n", who, o->name, spec->modes[mode], spec->name);
      return -1;
    }
    if (o->kind == CLI_FLAG) {
      if (a[n]) { fprintf(stderr, "maskd %s: %s takes no value\n", who, o->name); return -1; }
      *(int *)((char *)args + o->off) = 1;
      continue;
    }
    if (o->kind == CLI_OPTIONAL && !a[n] && (i + 1 >= argc || cli_looks_like_flag(argv[i + 1]))) {
      *(int *)((char *)args + o->off2) = 1;
      continue;
    }
    /* "--flag=VALUE" as written; "--flag VALUE" by cli_flag_value's rules (a is the
    ** spelling given, which for a CLI_PAIR may have '_' for '-'). */
    const char *v = a + n + 1;
    int eq = a[n] == '=';
    if (!eq && cli_flag_value(who, argc, argv, &i, a, &v) < 0) return -1;
    if (o->kind == CLI_LIST || o->kind == CLI_FILES) {
      if (append(who, o, v, args)) return -1;
      /* "--input A B C": the values up to the next option; "--input=A" is one value. */
      while (o->kind == CLI_FILES && !eq && i + 1 < argc && !cli_looks_like_flag(argv[i + 1]))
        if (append(who, o, argv[++i], args)) return -1;
      continue;
    }
    if (o->kind == CLI_PAIR) {
      CliPairs *p = (CliPairs *)((char *)args + o->off);
      if (p->n == CLI_MAX_PAIRS) { fprintf(stderr, "maskd %s: more than %d options\n", who, CLI_MAX_PAIRS); return -1; }
      p->key[p->n] = o->name;
      p->val[p->n++] = v;
      continue;
    }
    if (store_value(o, v, args)) {
      char want[160];
      expected(o, want, sizeof want);
      fprintf(stderr, "maskd %s: %s: expected %s, got '%s'\n", who, o->name, want, v);
      return -1;
    }
  }
  return 0;
}

/* The default value of o as the spec's defaults give it, in buf ("" when none). */
static void default_text(const CliOpt *o, const void *defs, char *buf, size_t size) {
  buf[0] = '\0';
  if (!defs) return;
  const char *at = (const char *)defs + o->off;
  switch (o->kind) {
    case CLI_INT: snprintf(buf, size, "%d", *(const int *)at); break;
    case CLI_LONG: snprintf(buf, size, "%ld", *(const long *)at); break;
    case CLI_I64: snprintf(buf, size, "%lld", *(const long long *)at); break;
    case CLI_DOUBLE: snprintf(buf, size, "%g", *(const double *)at); break;
    case CLI_STRING: case CLI_OPTIONAL:
      if (*(const char *const *)at) snprintf(buf, size, "%s", *(const char *const *)at);
      break;
    case CLI_CHOICE: {
      const char *p = o->arg;
      for (int k = *(const int *)at; k > 0 && strchr(p, '|'); k--) p = strchr(p, '|') + 1;
      snprintf(buf, size, "%.*s", (int)strcspn(p, "|"), p);
      break;
    }
    default: break;
  }
}

void cli_help(FILE *f, const CliSpec *spec) {
  int col = spec->col ? spec->col : 22;
  void *defs = spec->args_size ? calloc(1, spec->args_size) : NULL;
  if (defs && spec->defaults) spec->defaults(defs);
  fputs(spec->usage, f);
  for (int k = 0; k < spec->n_opts; k++) {
    const CliOpt *o = &spec->opts[k];
    if (o->kind == CLI_TEXT) { fprintf(f, "%s\n", o->help); continue; }
    char left[128];
    const char *arg = o->arg ? o->arg : "";
    if (!is_value_kind(o->kind) || o->kind == CLI_PAIR) arg = o->kind == CLI_PAIR ? (o->arg ? o->arg : "X") : "";
    if (o->kind == CLI_OPTIONAL) snprintf(left, sizeof left, "  %s [%s]", o->name, arg);
    else if (o->kind == CLI_FILES) snprintf(left, sizeof left, "  %s %s...", o->name, arg);
    else snprintf(left, sizeof left, "  %s%s%s", o->name, *arg ? " " : "", arg);
    int w = (int)strlen(left), at = w <= col - 2 ? col : w + 2;   /* at: the output's column */
    fprintf(f, "%s%*s", left, at - w, "");
    for (const char *p = o->help ? o->help : ""; *p;) {
      size_t line = strcspn(p, "\n");
      fwrite(p, 1, line, f);
      at += (int)line;
      p += line;
      if (*p == '\n' && *++p) { fprintf(f, "\n%*s", col, ""); at = col; }
    }
    char note[320] = "", def[256];
    size_t n = 0;
    if (o->modes && spec->n_modes) {
      n += (size_t)snprintf(note + n, sizeof note - n, " (");
      for (int m = 0, first = 1; m < spec->n_modes; m++)
        if (o->modes & (1u << m)) {
          n += (size_t)snprintf(note + n, sizeof note - n, "%s%s", first ? "" : ", ", spec->modes[m]);
          first = 0;
        }
      n += (size_t)snprintf(note + n, sizeof note - n, " only)");
    }
    if (o->def == CLI_DEFAULT) default_text(o, defs, def, sizeof def);
    else snprintf(def, sizeof def, "%s", o->def ? o->def : "");
    if (def[0] && n < sizeof note) snprintf(note + n, sizeof note - n, " (default: %s)", def);
    /* A note that would run past about 100 columns goes on a line of its own. */
    if (note[0] && at + (int)strlen(note) > 100) fprintf(f, "\n%*s%s", col - 1, "", note);
    else fputs(note, f);
    fputc('\n', f);
  }
  if (spec->tail) fputs(spec->tail, f);
  free(defs);
}
