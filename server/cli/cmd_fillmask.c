/* maskd fill-mask: the HF fill-mask pipeline from the command line, on a model
** revision in the store (NAME[@REV]) or on an HF folder (--model-dir). Prints
** the pipeline's JSON as Python's json.dumps writes it. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/infer/fillmask.h"
#include "engine/core/platform.h"
#include "server/cli/commands.h"
#include "store/load.h"
#include "store/store.h"

typedef struct FillArgs {
  const char *db, *model, *dir, *targets;
  int top_k, indent, ascii, threads, quiet, force_list, precision;
  FillMaskLimits limits;
} FillArgs;

static void fill_defaults(void *p) {
  FillArgs *a = p;
  memset(a, 0, sizeof *a);
  FillMaskOptions o;
  fillmask_options_default(&o);
  a->top_k = FILLMASK_DEFAULT_TOP_K;
  a->limits = o.limits;
}

#define OFF(f) offsetof(FillArgs, f)
static const CliOpt fill_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = OFF(db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--model", .kind = CLI_STRING, .off = OFF(model), .arg = "NAME[@REV]",
   .help = "a model revision in the store (@main = newest, @N, @<commit>)"},
  {.name = "--model-dir", .kind = CLI_STRING, .off = OFF(dir), .arg = "DIR",
   .help = "an HF folder: config.json, model.safetensors, tokenizer.json (+ tokenizer_config.json)"},
  {.name = "--top-k", .kind = CLI_INT, .off = OFF(top_k), .lo = 1, .hi = 1000000000, .arg = "K", .def = CLI_DEFAULT,
   .help = "candidates per mask"},
  {.name = "--targets", .kind = CLI_STRING, .off = OFF(targets), .arg = "a,b",
   .help = "restrict the candidates to these tokens (comma-separated)"},
  {.name = "--list", .kind = CLI_FLAG, .off = OFF(force_list), .help = "treat the texts as a list input even when there is one"},
  {.name = "--indent", .kind = CLI_INT, .off = OFF(indent), .lo = 0, .hi = 1000000000, .arg = "N",
   .help = "pretty-print with N spaces"},
  {.name = "--ascii", .kind = CLI_FLAG, .off = OFF(ascii), .help = "escape non-ASCII as Python does"},
  {.name = "--threads", .kind = CLI_INT, .off = OFF(threads), .lo = 1, .hi = 1024, .arg = "N", .def = "all CPUs",
   .help = "threads for the model"},
  {.name = "--precision", .kind = CLI_CHOICE, .off = OFF(precision), .arg = "fp32|bf16", .def = "fp32",
   .help = "how the weight matrices are kept: float, or bfloat16 (half the memory;\n"
           "the products read them as they are, sums stay float)"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = OFF(quiet), .help = "do not print the pipeline's warnings"},
  {.kind = CLI_TEXT, .help = "Limits of one call (as maskd serve's, for each request):"},
  CLI_FILL_LIMIT_OPTS(FillArgs, limits),
};
#undef OFF

const CliSpec cli_spec_fillmask = {
  .name = "fill-mask",
  .usage =
    "usage: maskd fill-mask [--db PATH] --model NAME[@REV] [options] \"text with [MASK]\" [more texts...]\n"
    "       maskd fill-mask --model-dir DIR [options] \"text with [MASK]\" ...\n"
    "Prints what transformers' pipeline(\"fill-mask\") returns, as JSON: one mask gives a list of\n"
    "{score, token, token_str, sequence}, several masks one list per mask, several texts a list of those.\n",
  .tail = "Texts after \"--\" are taken as texts whatever they start with.\n",
  .opts = fill_opts,
  .n_opts = (int)(sizeof fill_opts / sizeof fill_opts[0]),
  .positional = -1,
  .args_size = sizeof(FillArgs),
  .defaults = fill_defaults,
  .col = 21,
};

static void warn_stderr(void *ctx, const char *msg) {
  (void)ctx;
  fprintf(stderr, "warning: %s\n", msg);
}

int cmd_fillmask(int argc, char **argv) {
  const char **texts = calloc((size_t)argc + 1, sizeof *texts);
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
  FillArgs args;
  fill_defaults(&args);
  int parsed = cli_parse(&cli_spec_fillmask, "fill-mask", -1, argc, argv, 1, &args, texts, &n);
  if (parsed) { status = parsed > 0 ? 0 : 2; goto done; }
  const char *db = args.db, *model = args.model, *dir = args.dir, *targets_arg = args.targets;
  int top_k = args.top_k, indent = args.indent, ascii = args.ascii, threads = args.threads;
  int quiet = args.quiet, force_list = args.force_list;
  o.limits = args.limits;
  o.weights = args.precision ? MODEL_BF16 : MODEL_FP32;
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
    if (!(s = cli_store_open_existing(db, &err))) { fprintf(stderr, "maskd fill-mask: %s\n", err.msg); goto done; }
    fm = store_load_fillmask(s, model, &o, &err);
  }
  if (!fm) { fprintf(stderr, "maskd fill-mask: %s\n", err.msg); goto done; }
  if (threads) model_set_threads(fillmask_model(fm), threads);
  platform_pin_threads(model_threads(fillmask_model(fm)));
  res = fillmask_run(fm, texts, n, n > 1 || force_list, top_k, targets, n_targets, &fe);
  if (!res) { cli_pipeline_refusal("fill-mask", &fe); goto done; }
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
