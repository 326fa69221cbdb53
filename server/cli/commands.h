/* The maskd subcommands. Each takes the arguments after its own name
** (argv[0] is the subcommand name) and returns the process exit status. */
#ifndef MASKD_COMMANDS_H
#define MASKD_COMMANDS_H

#include <signal.h>
#include <stdio.h>

#include "engine/infer/fillmask.h"
#include "store/store.h"

typedef struct Command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} Command;

int cmd_tokenizer(int argc, char **argv);
int cmd_tokenizer_train(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_fillmask(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* The store path: the --db flag when given (non-NULL), else $MASKD_DB, else ./maskd.db. */
const char *cli_db_path(const char *flag);
/* Parses a whole decimal number in [lo, hi] into *out; -1 (and *out untouched) otherwise. */
int cli_parse_long(const char *s, long lo, long hi, long *out);
/* 1 when s reads as an option: '-' and then anything but a digit or '.' ("-" alone, "-1"
** and "-0.5" are values). */
int cli_looks_like_flag(const char *s);
/* A flag that takes a value, so that no value is ever read as a flag and no flag as a
** value: "--flag=VALUE" gives VALUE as written (whatever it starts with); "--flag VALUE"
** takes the next argument unless it looks like a flag. Returns 1 with *value set and *i
** past the value, 0 when argv[*i] is not this flag, -1 (one line on stderr, "maskd cmd:
** ...") when the value is missing. */
int cli_flag_value(const char *cmd, int argc, char **argv, int *i, const char *flag, const char **value);
/* Blocks SIGINT, SIGTERM and SIGHUP (old receives the mask before), for the short
** stretch where files are put in place: a stop then waits until they are whole. */
void cli_block_stop_signals(sigset_t *old);
void cli_restore_signals(const sigset_t *old);

/* The fill-mask limit flags, shared by maskd serve and maskd fill-mask: --max-inputs,
** --max-tokens, --max-masks, --max-top-k, --max-answer-bytes (0 = no limit). Returns 1
** when flag is one (value parsed into l), 0 when it is not, -1 on a bad value (said on
** stderr as "maskd CMD: ..."). */
int cli_fill_limit(const char *cmd, const char *flag, const char *value, FillMaskLimits *l);
/* Their lines for --help, with the defaults. */
void cli_fill_limits_help(FILE *f);

#endif
