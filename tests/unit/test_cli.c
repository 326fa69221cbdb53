/* The commands' option tables (server/cli/commands.h): every command's --help lists
** every option of its table and is the help cli_help writes from it; a bad value for
** each numeric (and choice) option is refused by the command with the one wording,
** exit status 2 and one line; train's table names every run option; and the parser's
** rules (--flag=VALUE, no value read as a flag, lists, optional values, positionals). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "engine/train/run_config.h"
#include "server/cli/commands.h"
#include "tests/unit/check.h"

static char tmpdir[300];

/* The command that runs a spec (its first word). */
static int (*command_of(const CliSpec *s))(int, char **) {
  static const struct { const char *name; int (*run)(int, char **); } cmds[] = {
    {"tokenizer", cmd_tokenizer}, {"prepare", cmd_prepare}, {"train", cmd_train}, {"fill-mask", cmd_fillmask},
    {"classify", cmd_classify},
    {"export", cmd_export}, {"import", cmd_import}, {"runs", cmd_runs}, {"models", cmd_models},
    {"serve", cmd_serve}, {"bench", cmd_bench}, {"finetune", cmd_finetune}, {"average", cmd_average}, {"evaluate", cmd_evaluate},
  };
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strncmp(s->name, cmds[i].name, strlen(cmds[i].name)) &&
        (s->name[strlen(cmds[i].name)] == '\0' || s->name[strlen(cmds[i].name)] == ' '))
      return cmds[i].run;
  return NULL;
}

/* Runs spec's command with its words, mode word (mode >= 0) and extra arguments; what it
** wrote on fd (1 or 2) comes back (malloc'd), its status in *status. */
static char *run_cmd(const CliSpec *s, int mode, int fd, int *status, int n_extra, const char *const *extra) {
  char words[64];
  snprintf(words, sizeof words, "%s", s->name);
  char *argv[16];
  int argc = 0;
  for (char *save = NULL, *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) argv[argc++] = w;
  if (mode >= 0) argv[argc++] = (char *)s->modes[mode];
  for (int i = 0; i < n_extra; i++) argv[argc++] = (char *)extra[i];
  argv[argc] = NULL;
  char path[400];
  snprintf(path, sizeof path, "%s/out", tmpdir);
  fflush(stdout); fflush(stderr);
  int saved = dup(fd), out = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, fd);
  close(out);
  *status = command_of(s)(argc, argv);
  fflush(stdout); fflush(stderr);
  dup2(saved, fd);
  close(saved);
  FILE *f = fopen(path, "rb");
  char *text = calloc(1, 1 << 16);
  if (f) { size_t n = fread(text, 1, (1 << 16) - 1, f); text[n] = '\0'; fclose(f); }
  return text;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* The first mode an option is allowed in (-1: the spec has no modes). */
static int mode_for(const CliSpec *s, const CliOpt *o) {
  if (!s->n_modes) return -1;
  for (int m = 0; m < s->n_modes; m++) if (!o->modes || (o->modes & (1u << m))) return m;
  return 0;
}

static int is_checked_value(CliKind k) {
  return k == CLI_INT || k == CLI_LONG || k == CLI_I64 || k == CLI_DOUBLE || k == CLI_CHOICE || k == CLI_CUSTOM;
}

/* "maskd WHO: --flag: expected ..., got 'value'" and nothing else. */
static int one_wording(const char *err, const char *flag, const char *value) {
  char suffix[200];
  snprintf(suffix, sizeof suffix, ": %s: expected ", flag);
  const char *p = strstr(err, suffix);
  char tail[200];
  snprintf(tail, sizeof tail, ", got '%s'\n", value);
  size_t n = strlen(err), t = strlen(tail);
  return !strncmp(err, "maskd ", 6) && p && count_lines(err) == 1 && n > t && !strcmp(err + n - t, tail);
}

static void help_and_refusals(void) {
  for (int k = 0; k < cli_n_specs; k++) {
    const CliSpec *s = cli_specs[k];
    char name[120];
    /* --help prints what cli_help writes, with every option of the table in it. */
    int st;
    const char *help_arg[] = {"--help"};
    char *out = run_cmd(s, s->n_modes ? 0 : -1, 1, &st, 1, help_arg);
    char *want = NULL;
    size_t want_len = 0;
    FILE *m = open_memstream(&want, &want_len);
    cli_help(m, s);
    fclose(m);
    snprintf(name, sizeof name, "cli_help_is_the_table:%s", s->name);
    check(st == 0 && !strcmp(out, want), name, "status %d, help:\n%s\nwanted:\n%s", st, out, want);
    char missing[400] = "";
    for (int i = 0; i < s->n_opts; i++) {
      const CliOpt *o = &s->opts[i];
      if (o->kind == CLI_TEXT) continue;
      char line[80];
      snprintf(line, sizeof line, "  %s", o->name);   /* at the start of an option line */
      const char *p = out;
      while ((p = strstr(p, line)) && p[strlen(line)] != ' ' && p[strlen(line)] != '\n') p++;
      if (!p)
        snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", o->name);
    }
    snprintf(name, sizeof name, "cli_help_lists_every_option:%s", s->name);
    check(!missing[0], name, "not in --help:%s", missing);
    free(out);
    free(want);

    /* A bad value, in both spellings and out of range, gets the one wording; train's
    ** run options too, wherever the run description refuses "x" (numbers, precision). */
    for (int i = 0; i < s->n_opts; i++) {
      const CliOpt *o = &s->opts[i];
      char want_pair[160];
      if (!is_checked_value(o->kind) && !(o->kind == CLI_PAIR && run_config_value_ok(o->name, "x", want_pair, sizeof want_pair)))
        continue;
      char eq[80], big[40], small[40];
      snprintf(eq, sizeof eq, "%s=x", o->name);
      const char *a1[] = {o->name, "x"}, *a2[] = {eq};
      char *e1 = run_cmd(s, mode_for(s, o), 2, &st, 2, a1);
      int st2;
      char *e2 = run_cmd(s, mode_for(s, o), 2, &st2, 1, a2);
      int ok = st == 2 && st2 == 2 && one_wording(e1, o->name, "x") && one_wording(e2, o->name, "x");
      char why[600];
      snprintf(why, sizeof why, "status %d/%d: '%s' / '%s'", st, st2, e1, e2);
      free(e1); free(e2);
      if (ok && (o->kind == CLI_INT || o->kind == CLI_LONG || o->kind == CLI_I64 || o->kind == CLI_DOUBLE)) {
        if (o->kind == CLI_DOUBLE) {
          snprintf(big, sizeof big, "%g", o->fhi * 2 + 1);
          snprintf(small, sizeof small, "%g", o->flo - 1);
        } else {
          snprintf(big, sizeof big, "%lld", o->hi + (o->hi < 0x7fffffffffffffffLL));
          snprintf(small, sizeof small, "%lld", o->lo - 1);
        }
        const char *a3[] = {o->name, big}, *a4[] = {o->name, small};
        e1 = run_cmd(s, mode_for(s, o), 2, &st, 2, a3);
        e2 = run_cmd(s, mode_for(s, o), 2, &st2, 2, a4);
        ok = st == 2 && st2 == 2 && (o->hi == 0x7fffffffffffffffLL || one_wording(e1, o->name, big)) && one_wording(e2, o->name, small);
        snprintf(why, sizeof why, "status %d/%d: '%s' / '%s'", st, st2, e1, e2);
        free(e1); free(e2);
      }
      snprintf(name, sizeof name, "cli_bad_value_one_wording:%s:%s", s->name, o->name);
      check(ok, name, "%s", why);
    }
  }
}

/* Every run option of a JSON description is a flag of maskd train (but "out", which the
** command keeps for its own --out), and every run flag is a run option; the defaults the
** help shows are run_config_defaults'. */
static void train_table(void) {
  RunConfig rc;
  run_config_defaults(&rc);
  char *text = run_config_to_json(&rc);
  json_t *j = text ? json_loads(text, 0, NULL) : NULL;
  free(text);
  char missing[600] = "", wrong_def[600] = "";
  const char *key;
  json_t *v;
  json_object_foreach(j, key, v) {
    if (!strcmp(key, "out")) continue;
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", key);
    for (char *p = flag; *p; p++) if (*p == '_') *p = '-';
    const CliOpt *o = NULL;
    for (int i = 0; i < cli_spec_train.n_opts; i++)
      if (cli_spec_train.opts[i].name && !strcmp(cli_spec_train.opts[i].name, flag)) o = &cli_spec_train.opts[i];
    if (!o || o->kind != CLI_PAIR) { snprintf(missing + strlen(missing), sizeof missing - strlen(missing), " %s", flag); continue; }
    /* A shown default starts with the value (a number, or the text of a string). */
    if (json_is_number(v) && (!o->def || strtod(o->def, NULL) != json_number_value(v)))
      snprintf(wrong_def + strlen(wrong_def), sizeof wrong_def - strlen(wrong_def), " %s", flag);
    if (json_is_string(v) && json_string_length(v) && (!o->def || strcmp(o->def, json_string_value(v))))
      snprintf(wrong_def + strlen(wrong_def), sizeof wrong_def - strlen(wrong_def), " %s", flag);
  }
  json_decref(j);
  check(!missing[0], "cli_train_lists_every_run_option", "run options without a flag:%s", missing);
  check(!wrong_def[0], "cli_train_defaults_are_run_config_defaults", "help defaults that differ:%s", wrong_def);
  char unknown[400] = "";
  for (int i = 0; i < cli_spec_train.n_opts; i++) {
    const CliOpt *o = &cli_spec_train.opts[i];
    if (o->kind == CLI_PAIR && !run_config_has_key(o->name))
      snprintf(unknown + strlen(unknown), sizeof unknown - strlen(unknown), " %s", o->name);
  }
  check(!unknown[0], "cli_train_run_flags_are_run_options", "not run options:%s", unknown);
}

/* ---- the parser's rules, on a table of every kind ---- */

typedef struct TArgs {
  int flag, n, on_opt, choice;
  long l;
  double d;
  const char *s, *opt, *list[3];
  int n_list;
  CliPairs pairs;
} TArgs;

static int parse_even(const char *v, void *args) {
  long x;
  if (cli_parse_long(v, 0, 100, &x) || x % 2) return -1;
  ((TArgs *)args)->n = (int)x;
  return 0;
}

#define OFF(f) offsetof(TArgs, f)
static const CliOpt t_opts[] = {
  {.name = "--flag", .kind = CLI_FLAG, .off = OFF(flag), .help = "a flag"},
  {.name = "--long", .kind = CLI_LONG, .off = OFF(l), .lo = -5, .hi = 5, .arg = "N", .def = CLI_DEFAULT, .help = "a long"},
  {.name = "--num", .kind = CLI_DOUBLE, .off = OFF(d), .flo = 0, .fhi = 1, .open = CLI_OPEN_LO, .arg = "X", .help = "a number"},
  {.name = "--str", .kind = CLI_STRING, .off = OFF(s), .arg = "S", .help = "a string", .modes = 2},
  {.name = "--opt", .kind = CLI_OPTIONAL, .off = OFF(opt), .off2 = OFF(on_opt), .arg = "V", .help = "optional"},
  {.name = "--list", .kind = CLI_FILES, .off = OFF(list), .off2 = OFF(n_list), .hi = 3, .arg = "F", .help = "files"},
  {.name = "--pick", .kind = CLI_CHOICE, .off = OFF(choice), .arg = "a|b|c", .def = CLI_DEFAULT, .help = "a choice"},
  {.name = "--even", .kind = CLI_CUSTOM, .parse = parse_even, .expect = "an even number in [0, 100]", .help = "custom"},
  {.name = "--run-key", .kind = CLI_PAIR, .off = OFF(pairs), .arg = "K", .help = "a pair"},
};
#undef OFF
static const char *const t_modes[] = {"one", "two"};
static void t_defaults(void *p) { memset(p, 0, sizeof(TArgs)); ((TArgs *)p)->l = 3; ((TArgs *)p)->choice = 1; }
static const CliSpec t_spec = {.name = "t", .usage = "usage: maskd t\n", .opts = t_opts,
                               .n_opts = (int)(sizeof t_opts / sizeof t_opts[0]), .modes = t_modes, .n_modes = 2,
                               .positional = 2, .args_size = sizeof(TArgs), .defaults = t_defaults};

/* Parses argv (NULL-terminated, argv[0] the command) into *a; stderr's text in err. */
static int t_parse(const char **args, TArgs *a, int mode, const char **pos, int *np, char *err, size_t size) {
  int argc = 0;
  while (args[argc]) argc++;
  t_defaults(a);
  char path[400];
  snprintf(path, sizeof path, "%s/err", tmpdir);
  fflush(stderr);
  int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  close(fd);
  int r = cli_parse(&t_spec, "t", mode, argc, (char **)args, 1, a, pos, np);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(err, 1, size - 1, f) : 0;
  err[n] = '\0';
  if (f) fclose(f);
  return r;
}

static void parser_rules(void) {
  TArgs a;
  char err[400];
  const char *pos[8];
  int np;
  const char *v1[] = {"t", "--flag", "--long", "-2", "--num=0.5", "--str=-x", "p1", "--list", "a", "b", "--pick", "c",
                      "--even", "4", "--run_key", "7", "--opt", "--", "p2", NULL};
  int r = t_parse(v1, &a, 1, pos, &np, err, sizeof err);
  check(r == 0 && a.flag && a.l == -2 && a.d == 0.5 && !strcmp(a.s, "-x") && a.n_list == 2 && !strcmp(a.list[1], "b") &&
            a.choice == 2 && a.n == 4 && a.pairs.n == 1 && !strcmp(a.pairs.key[0], "--run-key") &&
            !strcmp(a.pairs.val[0], "7") && a.on_opt == 1 && !a.opt && np == 2 && !strcmp(pos[0], "p1") &&
            !strcmp(pos[1], "p2"),
        "cli_parse_every_kind", "r %d, err '%s', np %d", r, err, np);
  const char *v2[] = {"t", "--opt", "run", "--list=-a", "b", NULL};
  r = t_parse(v2, &a, 0, pos, &np, err, sizeof err);
  check(r == 0 && a.opt && !strcmp(a.opt, "run") && !a.on_opt && a.n_list == 1 && !strcmp(a.list[0], "-a") && np == 1 &&
            !strcmp(pos[0], "b"),
        "cli_parse_optional_value_and_one_list_value", "r %d, err '%s'", r, err);
  const char *v3[] = {"t", "--str", "--flag", NULL};
  r = t_parse(v3, &a, 1, pos, &np, err, sizeof err);
  check(r == -1 && strstr(err, "maskd t: --str needs a value, not the option --flag") && count_lines(err) == 1,
        "cli_parse_no_value_read_as_a_flag", "r %d, err '%s'", r, err);
  const char *v4[] = {"t", "--bogus=1", NULL};
  r = t_parse(v4, &a, 1, pos, &np, err, sizeof err);
  check(r == -1 && !strcmp(err, "maskd t: unknown option --bogus (maskd t --help)\n"), "cli_parse_unknown_option",
        "r %d, err '%s'", r, err);
  const char *v5[] = {"t", "--str", "s", NULL};
  r = t_parse(v5, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && strstr(err, "--str is not an option of one") && count_lines(err) == 1, "cli_parse_mode_refused",
        "r %d, err '%s'", r, err);
  const char *v6[] = {"t", "a", "b", "c", NULL};
  r = t_parse(v6, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && strstr(err, "one argument too many: 'c'") && count_lines(err) == 1, "cli_parse_too_many_arguments",
        "r %d, err '%s'", r, err);
  const char *v7[] = {"t", "--list", "a", "b", "c", "d", NULL};
  r = t_parse(v7, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && !strcmp(err, "maskd t: --list: at most 3 values\n"), "cli_parse_list_full", "r %d, err '%s'", r, err);
  const char *v8[] = {"t", "--even", "3", NULL};
  r = t_parse(v8, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && !strcmp(err, "maskd t: --even: expected an even number in [0, 100], got '3'\n"), "cli_parse_custom_wording",
        "r %d, err '%s'", r, err);
  const char *v9[] = {"t", "--num", "0", NULL};
  r = t_parse(v9, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && !strcmp(err, "maskd t: --num: expected a number in (0, 1], got '0'\n"), "cli_parse_open_range",
        "r %d, err '%s'", r, err);
  const char *v10[] = {"t", "--flag=1", NULL};
  r = t_parse(v10, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && !strcmp(err, "maskd t: --flag takes no value\n"), "cli_parse_flag_takes_no_value", "r %d, err '%s'", r, err);
  const char *v11[] = {"t", "--pick", "d", NULL};
  r = t_parse(v11, &a, 0, pos, &np, err, sizeof err);
  check(r == -1 && !strcmp(err, "maskd t: --pick: expected one of a, b, c, got 'd'\n"), "cli_parse_choice_wording",
        "r %d, err '%s'", r, err);
  char *h = NULL;
  size_t hl = 0;
  FILE *m = open_memstream(&h, &hl);
  cli_help(m, &t_spec);
  fclose(m);
  check(strstr(h, "  --long N") && strstr(h, "a long (default: 3)") && strstr(h, "a choice (default: b)") &&
            strstr(h, "a string (two only)") && strstr(h, "  --opt [V]") && strstr(h, "  --list F..."),
        "cli_help_shows_defaults_and_modes", "%s", h);
  free(h);
}

/* cli_option_outside: what --job refuses is named; values, "--x=v" and "--" are read as the parser reads them. */
static void option_outside_tests(void) {
  static const char *const allowed[] = {"--job", "--db", "--quiet", NULL};
  char *ok[] = {"cmd", "--job", "3", "--db=/x", "--quiet", "-1", "--", "--out"};
  char *bad[] = {"cmd", "--job=3", "--out", "dir"};
  char *eq[] = {"cmd", "--db=--out", "--dbx=1"};
  check(cli_option_outside(8, ok, 1, allowed) == NULL, "cli_option_outside_allows", "refused");
  const char *b = cli_option_outside(4, bad, 1, allowed), *e = cli_option_outside(3, eq, 1, allowed);
  check(b && !strcmp(b, "--out"), "cli_option_outside_names_first", "%s", b ? b : "(none)");
  check(e && !strcmp(e, "--dbx=1"), "cli_option_outside_whole_name", "%s", e ? e : "(none)");
}

int main(void) {
  option_outside_tests();
  const char *t = getenv("MASKD_TMP");
  snprintf(tmpdir, sizeof tmpdir, "%s/cli_%d", t ? t : "/tmp", (int)getpid());
  char cmd[400];
  snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
  if (system(cmd) != 0) return 1;
  help_and_refusals();
  train_table();
  parser_rules();
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
  if (system(cmd) != 0) return 1;
  return check_exit();
}
