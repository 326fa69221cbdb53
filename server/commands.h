/* The maskd subcommands. Each takes the arguments after its own name
** (argv[0] is the subcommand name) and returns the process exit status. */
#ifndef MASKD_COMMANDS_H
#define MASKD_COMMANDS_H

typedef struct Command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} Command;

int cmd_tokenizer(int argc, char **argv);
int cmd_prepare(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_tokenizer_train(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_fillmask(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);

#endif
