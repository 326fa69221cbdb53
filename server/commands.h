/* The maskd subcommands. Each takes the arguments after its own name
** (argv[0] is the subcommand name) and returns the process exit status. */
#ifndef MASKD_COMMANDS_H
#define MASKD_COMMANDS_H

#include "engine/fillmask.h"
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

/* A fill-mask pipeline over a store revision ("NAME", "NAME@main", "NAME@N", "NAME@<commit>"). */
FillMask *fillmask_from_store(Store *s, const char *spec, const FillMaskOptions *o, Err *err);

#endif
