/* maskd: train and serve masked language models on CPUs. This file only
** dispatches to the subcommands in server/cli/cmd_*.c. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "engine/core/cpu.h"
#include "engine/core/platform.h"
#include "engine/nn/kernels_info.h"
#include "server/cli/commands.h"

#define MASKD_VERSION "0.1.0"

static int cmd_version(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: maskd version   (or maskd --version)\n\nprints the version and the kernels this CPU runs: their level (MASKD_ISA may\n"
           "choose a lower one), the best level this CPU has, the products and the CPU\n");
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "maskd version: takes no arguments (got '%s')\n", argv[1]);
    return 2;
  }
  char kernels[256];
  kernels_info_line(kernels, (int)sizeof kernels);
  printf("maskd %s\n%s\n", MASKD_VERSION, kernels);
  return 0;
}

static const Command commands[] = {
  {"tokenizer", cmd_tokenizer, "train Unigram tokenizers; encode, decode and export any tokenizer.json"},
  {"prepare", cmd_prepare, "cut tokenized text into fixed-length dataset shards"},
  {"train", cmd_train, "train a masked language model (or --resume a stopped run)"},
  {"finetune", cmd_finetune, "fine-tune a model's encoder for text classification (F1 per epoch)"},
  {"fill-mask", cmd_fillmask, "predict masked tokens as HF pipeline(\"fill-mask\") does"},
  {"classify", cmd_classify, "classify texts as HF pipeline(\"text-classification\") does"},
  {"evaluate", cmd_evaluate, "score a classifier on labelled examples (loss, accuracy, F1)"},
  {"export", cmd_export, "write a model revision as a Hugging Face folder"},
  {"import", cmd_import, "add a Hugging Face model folder to the store"},
  {"average", cmd_average, "average revisions' weights into a new model (a model soup)"},
  {"runs", cmd_runs, "list training runs in the store"},
  {"models", cmd_models, "list model repositories and their revisions in the store"},
  {"serve", cmd_serve, "serve the HTTP API and the web page"},
  {"bench", cmd_bench, "benchmark training, inference and sgemm throughput"},
  {"version", cmd_version, "print the version and the kernels this CPU runs (also --version)"},
};
static const int n_commands = (int)(sizeof commands / sizeof commands[0]);

static void usage(FILE *f) {
  fprintf(f, "usage: maskd COMMAND [ARGS...]   (maskd COMMAND --help for its options)\n\ncommands:\n");
  for (int i = 0; i < n_commands; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

/* A command's output that did not reach stdout (a full disk, a closed pipe, a file-size
** limit) makes the command fail: stdio only remembers the error, so look once at the
** end, after the last flush, and turn a success into exit status 1. */
static int output_written(const char *cmd, int rc) {
  errno = 0;
  int flushed = fflush(stdout) == 0;
  if (flushed && !ferror(stdout)) return rc;
  fprintf(stderr, "maskd %s: the output could not be written%s%s\n", cmd, errno ? ": " : "", errno ? strerror(errno) : "");
  return rc ? rc : 1;
}

int main(int argc, char **argv) {
  platform_fix_openblas_env(argv);
  /* A misspelt or unrunnable MASKD_ISA would otherwise be ignored silently
  ** (cpu_isa() falls back to the best level), and a comparison run would
  ** measure the wrong kernels. Its message begins "MASKD_ISA=...". */
  Err isa_err = {0};
  if (cpu_isa_check_env(&isa_err)) {
    fprintf(stderr, "maskd: %s\n", isa_err.msg);
    return 2;
  }
  /* Past a file-size limit (ulimit -f) a write fails with EFBIG, which every writer
  ** reports and cleans up after, instead of the process being killed mid-file. */
  signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) { usage(stderr); return 2; }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return output_written("--help", 0);
  }
  if (!strcmp(argv[1], "--version")) return output_written("version", cmd_version(argc - 1, argv + 1));
  for (int i = 0; i < n_commands; i++)
    if (!strcmp(argv[1], commands[i].name)) return output_written(commands[i].name, commands[i].run(argc - 1, argv + 1));
  fprintf(stderr, "maskd: unknown command '%s' (maskd --help lists them)\n", argv[1]);
  return 2;
}
