/* maskd fill-mask: the HF fill-mask pipeline from the command line, on a model
** revision in the store (NAME[@REV]) or on an HF folder (--model-dir). Prints
** the pipeline's JSON as Python's json.dumps writes it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/infer/fillmask.h"
#include "engine/core/platform.h"
#include "server/cli/commands.h"
#include "store/load.h"
#include "store/store.h"

static void usage(FILE *f) {
  fprintf(f,
    "usage: maskd fill-mask [--db PATH] --model NAME[@REV] [options] \"text with [MASK]\" [more texts...]\n"
    "       maskd fill-mask --model-dir DIR [options] \"text with [MASK]\" ...\n"
    "Prints what transformers' pipeline(\"fill-mask\") returns, as JSON: one mask gives a list of\n"
    "{score, token, token_str, sequence}, several masks one list per mask, several texts a list of those.\n"
    "  --db PATH          the store (default $MASKD_DB, else ./maskd.db)\n"
    "  --model NAME[@REV] a model revision in the store (@main = newest, @N, @<commit>)\n"
    "  --model-dir DIR    an HF folder: config.json, model.safetensors, tokenizer.json (+ tokenizer_config.json)\n"
    "  --top-k K          candidates per mask (default 5)\n"
    "  --targets a,b      restrict the candidates to these tokens (comma-separated)\n"
    "  --list             treat the texts as a list input even when there is one\n"
    "  --indent N         pretty-print with N spaces; --ascii escapes non-ASCII as Python does\n"
    "  --threads N        threads for the model (default: all CPUs)\n"
    "  --quiet            do not print the pipeline's warnings\n"
    "Limits of one call (as maskd serve's, for each request):\n");
  cli_fill_limits_help(f);
}

static void warn_stderr(void *ctx, const char *msg) {
  (void)ctx;
  fprintf(stderr, "warning: %s\n", msg);
}

static int parse_int(const char *s, int lo, int *out) {
  long v;
  if (cli_parse_long(s, lo, 1000000000, &v)) return -1;
  *out = (int)v;
  return 0;
}

int cmd_fillmask(int argc, char **argv) {
  const char *db = NULL, *model = NULL, *dir = NULL, *targets_arg = NULL;
  int top_k = FILLMASK_DEFAULT_TOP_K, indent = 0, ascii = 0, threads = 0, quiet = 0, force_list = 0;
  const char **texts = calloc((size_t)argc, sizeof *texts);
  int n = 0, status = 1;
  char *targets_buf = NULL, *out = NULL;
  const char **targets = NULL;
  int n_targets = 0;
  Store *s = NULL;
  FillMask *fm = NULL;
  json_t *res = NULL;
  Err err = {0};
  FillMaskError fe = {0};
  FillMaskOptions o;
  fillmask_options_default(&o);
  if (!texts) { fprintf(stderr, "maskd fill-mask: out of memory\n"); return 1; }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int has = i + 1 < argc, lim;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); status = 0; goto done; }
    else if (has && (lim = cli_fill_limit("fill-mask", a, argv[i + 1], &o.limits))) {
      if (lim < 0) { status = 2; goto done; }
      i++;
    }
    else if (!strcmp(a, "--db") && has) db = argv[++i];
    else if (!strcmp(a, "--model") && has) model = argv[++i];
    else if (!strcmp(a, "--model-dir") && has) dir = argv[++i];
    else if (!strcmp(a, "--targets") && has) targets_arg = argv[++i];
    else if (!strcmp(a, "--top-k") && has) {
      if (parse_int(argv[++i], 1, &top_k)) { fprintf(stderr, "maskd fill-mask: --top-k: expected a positive integer, got '%s'\n", argv[i]); status = 2; goto done; }
    } else if (!strcmp(a, "--indent") && has) {
      if (parse_int(argv[++i], 0, &indent)) { fprintf(stderr, "maskd fill-mask: --indent: expected an integer >= 0, got '%s'\n", argv[i]); status = 2; goto done; }
    } else if (!strcmp(a, "--threads") && has) {
      if (parse_int(argv[++i], 1, &threads)) { fprintf(stderr, "maskd fill-mask: --threads: expected a positive integer, got '%s'\n", argv[i]); status = 2; goto done; }
    } else if (!strcmp(a, "--ascii")) ascii = 1;
    else if (!strcmp(a, "--quiet")) quiet = 1;
    else if (!strcmp(a, "--list")) force_list = 1;
    else if (!strcmp(a, "--")) { while (++i < argc) texts[n++] = argv[i]; }
    else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "maskd fill-mask: unknown option or missing value: %s (maskd fill-mask --help)\n", a);
      status = 2;
      goto done;
    } else texts[n++] = a;
  }
  if (!!model == !!dir) { fprintf(stderr, "maskd fill-mask: give exactly one of --model NAME[@REV] and --model-dir DIR\n"); status = 2; goto done; }
  if (n == 0) { fprintf(stderr, "maskd fill-mask: no input text (maskd fill-mask --help)\n"); status = 2; goto done; }
  if (targets_arg) {
    /* "a,b" -> {"a","b"}; empty items stay (HF ignores targets that encode to nothing, with a warning). */
    targets_buf = strdup(targets_arg);
    targets = calloc(strlen(targets_arg) + 1, sizeof *targets);
    if (!targets_buf || !targets) { fprintf(stderr, "maskd fill-mask: out of memory\n"); goto done; }
    char *p = targets_buf;
    for (;;) {
      targets[n_targets++] = p;
      char *c = strchr(p, ',');
      if (!c) break;
      *c = 0;
      p = c + 1;
    }
  }
  if (!quiet) o.warn = warn_stderr;
  if (dir) {
    fm = fillmask_load_dir(dir, &o, &err);
  } else {
    const char *path = cli_db_path(db);
    struct stat st;
    if (stat(path, &st)) { fprintf(stderr, "maskd fill-mask: no store at %s (--db PATH or MASKD_DB)\n", path); goto done; }
    if (!(s = store_open(path, &err))) { fprintf(stderr, "maskd fill-mask: %s\n", err.msg); goto done; }
    fm = store_load_fillmask(s, model, &o, &err);
  }
  if (!fm) { fprintf(stderr, "maskd fill-mask: %s\n", err.msg); goto done; }
  if (threads) model_set_threads(fillmask_model(fm), threads);
  platform_pin_threads(model_threads(fillmask_model(fm)));
  res = fillmask_run(fm, texts, n, n > 1 || force_list, top_k, targets, n_targets, &fe);
  if (!res) { fprintf(stderr, "maskd fill-mask: %s\n", fe.err.msg); goto done; }
  if (!(out = fillmask_dumps(res, indent, ascii))) { fprintf(stderr, "maskd fill-mask: cannot write the JSON\n"); goto done; }
  printf("%s\n", out);
  status = 0;
done:
  free(out);
  json_decref(res);
  fillmask_free(fm);
  store_close(s);
  free(targets);
  free(targets_buf);
  free(texts);
  return status;
}
