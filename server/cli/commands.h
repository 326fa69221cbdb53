/* Layer: server/cli/ (this folder: main, one cmd_*.c per command, option tables, progress)
** uses everything below it. (ARCHITECTURE.md)
**
** The maskd subcommands. Each takes the arguments after its own name
** (argv[0] is the subcommand name) and returns the process exit status. */
#ifndef MASKD_COMMANDS_H
#define MASKD_COMMANDS_H

#include <signal.h>
#include <stddef.h>
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
int cmd_finetune(int argc, char **argv);
int cmd_fillmask(int argc, char **argv);
int cmd_classify(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_average(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_bench(int argc, char **argv);

/* A pipeline's refusal on stderr, "maskd CMD: message", with the flag that would have let
** the call through: --truncation, or the limit's --max-... flag and its value. */
void cli_pipeline_refusal(const char *cmd, const FillMaskError *fe);
/* The store path: the --db flag when given (non-NULL), else $MASKD_DB, else ./maskd.db. */
const char *cli_db_path(const char *flag);
/* Opens the store of cli_db_path(flag) for a command that reads from it: NULL with ERR_NOT_FOUND
** "no store at PATH" when the file is absent (a mistyped --db must not create an empty store),
** else store_open's result. */
Store *cli_store_open_existing(const char *flag, Err *err);
/* Parses a whole decimal number in [lo, hi] into *out; -1 (and *out untouched) otherwise. */
int cli_parse_long(const char *s, long lo, long hi, long *out);
/* 1 when s reads as an option: '-' and then anything but a digit or '.' ("-" alone, "-1"
** and "-0.5" are values). */
int cli_looks_like_flag(const char *s);
/* The first option in argv[first..argc) (before any "--") whose name ("--db" of "--db=x")
** is not in allowed (NULL-terminated), or NULL when every option given is allowed. */
const char *cli_option_outside(int argc, char **argv, int first, const char *const *allowed);
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

/* ---- Option tables ----
** Each command describes its options once, in a table of CliOpt rows: the parser
** (cli_parse) and the --help text (cli_help) both read it, so every option is in the
** help, and every refusal has one wording:
**   maskd CMD: --flag: expected an integer in [lo, hi], got 'x'
**   maskd CMD: --flag needs a value[, not the option --other ...]
**   maskd CMD: unknown option --x (maskd CMD --help)
** Values are written "--flag VALUE" or "--flag=VALUE" (cli_flag_value's rules). A row's
** value goes to its offset in the command's argument struct (offsetof). */
typedef enum CliKind {
  CLI_TEXT,      /* no option: a line of text in the help's option list (help) */
  CLI_FLAG,      /* no value: sets an int to 1 */
  CLI_INT,       /* an int in [lo, hi] */
  CLI_LONG,      /* a long in [lo, hi] */
  CLI_I64,       /* a long long in [lo, hi] */
  CLI_DOUBLE,    /* a double in [flo, fhi], an end left out when open says so */
  CLI_STRING,    /* a const char * (the argv text itself) */
  CLI_CHOICE,    /* one of the words of arg ("resume|interrupt"): its index, an int */
  CLI_LIST,      /* repeatable string: appended to a const char *[hi] array at off, count (int) at off2 */
  CLI_FILES,     /* as CLI_LIST, and "--flag A B C" takes the values up to the next option
                 ** ("--flag=A" is one value, whatever it starts with) */
  CLI_OPTIONAL,  /* a string whose value may be left out: "--flag" alone (last, or before
                 ** an option) sets the int at off2 to 1 instead */
  CLI_PAIR,      /* collected as (name, value) in the CliPairs at off, in order, for a
                 ** later validator; '_' and '-' alike in the name */
  CLI_CUSTOM,    /* parse(value, args): 0, or -1 for "expected <expect>" */
} CliKind;

/* The open ends of a CLI_DOUBLE range. */
#define CLI_OPEN_LO 1
#define CLI_OPEN_HI 2

typedef struct CliOpt {
  const char *name;    /* "--seq-len" */
  CliKind kind;
  size_t off, off2;    /* where the value (and a count or flag) go in the argument struct */
  long long lo, hi;    /* integer range; hi: a CLI_LIST's capacity */
  double flo, fhi;     /* CLI_DOUBLE's range */
  int open;            /* CLI_OPEN_LO | CLI_OPEN_HI */
  const char *arg;     /* the value's name in the help ("N", "DIR"); CLI_CHOICE: "a|b" */
  const char *def;     /* the default the help shows; CLI_DEFAULT: the value the defaults give */
  const char *help;    /* the help text ('\n' starts an indented line) */
  unsigned modes;      /* bit m: allowed in the spec's mode m; 0: in all */
  int (*parse)(const char *value, void *args);   /* CLI_CUSTOM */
  const char *expect;  /* CLI_CUSTOM: what a value must be, for the refusal */
} CliOpt;

/* The help shows the value the command's defaults give (numbers, strings). */
extern const char CLI_DEFAULT[];

/* The most (name, value) pairs of CLI_PAIR rows one command line gives. */
#define CLI_MAX_PAIRS 256
/* The --work-dir and --data-dir rows of a command that runs one of the server's jobs
** (--job), for an argument struct T with fields work_dir and data_dir. */
#define CLI_JOB_DIR_OPTS(T) \
  {.name = "--work-dir", .kind = CLI_STRING, .off = offsetof(T, work_dir), .arg = "DIR", \
   .help = "with --job: the server's work folder"}, \
  {.name = "--data-dir", .kind = CLI_STRING, .off = offsetof(T, data_dir), .arg = "DIR", \
   .help = "with --job: the server's data folder"}

typedef struct CliPairs {
  int n;
  const char *key[CLI_MAX_PAIRS];   /* the row's name ("--grad-accum") */
  const char *val[CLI_MAX_PAIRS];
} CliPairs;

typedef struct CliSpec {
  const char *name;          /* "prepare", "tokenizer train" */
  const char *usage;         /* the help's opening: usage lines and paragraphs */
  const char *tail;          /* the help's closing paragraphs (or NULL) */
  const CliOpt *opts;
  int n_opts;
  const char *const *modes;  /* the words of the spec's modes (NULL: none), for CliOpt.modes */
  int n_modes;
  int positional;            /* how many positional arguments it takes (-1: any number) */
  size_t args_size;          /* its argument struct, and the defaults that fill it */
  void (*defaults)(void *args);
  int col;                   /* the help's column for the option texts (0: 22) */
} CliSpec;

/* Parses argv[first..argc) by spec into args (already holding the defaults), "who"
** naming the command in refusals ("tokenizer encode"); mode is the index of the spec's
** mode in use (-1: none). Positional arguments go to pos (room for argc), their count
** to *n_pos ("--" ends the options when the spec takes them). "--help" or "-h" before
** any "--" prints the help on stdout and returns 1; 0 when parsed; -1 after one line
** on stderr. */
int cli_parse(const CliSpec *spec, const char *who, int mode, int argc, char **argv, int first, void *args,
              const char **pos, int *n_pos);
/* Writes spec's help: its usage, the options (value, text, mode, default) and its tail. */
void cli_help(FILE *f, const CliSpec *spec);
/* The index of word in the spec's modes, -1 when it is none of them. */
int cli_mode(const CliSpec *spec, const char *word);

/* Every command's spec, for tests and tools that read them. */
extern const CliSpec *const cli_specs[];
extern const int cli_n_specs;
extern const CliSpec cli_spec_tokenizer, cli_spec_tokenizer_train, cli_spec_prepare, cli_spec_train,
    cli_spec_finetune, cli_spec_fillmask, cli_spec_classify, cli_spec_export, cli_spec_import, cli_spec_average, cli_spec_evaluate, cli_spec_runs,
    cli_spec_models, cli_spec_serve, cli_spec_bench;

/* The fill-mask limit flags, shared by maskd serve and maskd fill-mask: --max-inputs,
** --max-tokens, --max-masks, --max-top-k, --max-answer-bytes (0 = no limit), as rows
** of a table whose argument struct S holds a FillMaskLimits named `member`. */
#define CLI_FILL_LIMIT_OPTS(S, member)                                                                       \
  {.name = "--max-inputs", .kind = CLI_INT, .off = offsetof(S, member.max_inputs), .hi = 1000000, .arg = "N",  \
   .def = CLI_DEFAULT, .help = "texts in one fill-mask request"},                                              \
  {.name = "--max-tokens", .kind = CLI_INT, .off = offsetof(S, member.max_tokens), .hi = 1000000000,           \
   .arg = "N", .def = CLI_DEFAULT,                                                                             \
   .help = "tokens of a request's texts together, [CLS]/[SEP] counted: the work of its\n"                      \
           "forward pass (the default is about 0.4 s of one core, base preset)"},                              \
  {.name = "--max-masks", .kind = CLI_INT, .off = offsetof(S, member.max_masks), .hi = 1000000000, .arg = "N", \
   .def = CLI_DEFAULT, .help = "mask tokens in one request, all its texts together"},                          \
  {.name = "--max-top-k", .kind = CLI_INT, .off = offsetof(S, member.max_top_k), .hi = 1000000000, .arg = "N", \
   .def = CLI_DEFAULT, .help = "largest top_k a request may ask for"},                                         \
  {.name = "--max-answer-bytes", .kind = CLI_I64, .off = offsetof(S, member.max_answer_bytes), .hi = 1LL << 40, \
   .arg = "N", .def = CLI_DEFAULT, .help = "largest answer, in bytes of its JSON"},                            \
  {.kind = CLI_TEXT, .help = "For each, 0 = no limit; a request over a limit is refused, naming it."}

#endif
