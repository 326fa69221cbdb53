/* maskd classify: the HF text-classification pipeline from the command line, on a
** classifier revision in the store (NAME[@REV]) or an HF folder (--model-dir). Prints
** the pipeline's JSON as Python's json.dumps writes it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/platform.h"
#include "engine/infer/textclass.h"
#include "server/cli/commands.h"
#include "store/load.h"
#include "store/store.h"

typedef struct ClassifyArgs {
  const char *db, *model, *dir;
  long long top_k;             /* TEXTCLASS_TOP_K_LEGACY unless --top-k */
  int fn;                      /* TextClassFunction */
  int truncation, indent, ascii, threads, force_list, precision;
  TextClassLimits limits;
} ClassifyArgs;

static void classify_defaults(void *p) {
  ClassifyArgs *a = p;
  memset(a, 0, sizeof *a);
  TextClassOptions o;
  textclass_options_default(&o);
  a->top_k = TEXTCLASS_TOP_K_LEGACY;
  a->fn = TEXTCLASS_FN_DEFAULT;
  a->limits = o.limits;
}

/* --top-k K (an integer >= 1) or "all" (HF's top_k=None). */
static int parse_top_k(const char *v, void *args) {
  ClassifyArgs *a = args;
  if (!strcmp(v, "all")) { a->top_k = TEXTCLASS_TOP_K_ALL; return 0; }
  long k;
  if (cli_parse_long(v, 1, 1000000000, &k)) return -1;
  a->top_k = k;
  return 0;
}

static int parse_function(const char *v, void *args) {
  TextClassFunction f;
  if (textclass_function_parse(v, &f)) return -1;
  ((ClassifyArgs *)args)->fn = f;
  return 0;
}

#define OFF(f) offsetof(ClassifyArgs, f)
static const CliOpt classify_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = OFF(db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--model", .kind = CLI_STRING, .off = OFF(model), .arg = "NAME[@REV]",
   .help = "a classifier's revision in the store (@main = newest, @N, @<commit>)"},
  {.name = "--model-dir", .kind = CLI_STRING, .off = OFF(dir), .arg = "DIR",
   .help = "an HF folder: config.json, model.safetensors, tokenizer.json"},
  {.name = "--top-k", .kind = CLI_CUSTOM, .arg = "K|all", .parse = parse_top_k,
   .expect = "an integer in [1, 1000000000] or all", .def = "the best label only, as HF's default",
   .help = "the K best labels (all: every label), sorted, a list per text"},
  {.name = "--function", .kind = CLI_CUSTOM, .arg = "softmax|sigmoid|none", .parse = parse_function,
   .expect = "softmax, sigmoid or none", .def = "sigmoid for a multi-label model, else softmax",
   .help = "function_to_apply on the logits"},
  {.name = "--truncation", .kind = CLI_FLAG, .off = OFF(truncation),
   .help = "cut texts longer than the model to its length (else they are refused)"},
  {.name = "--list", .kind = CLI_FLAG, .off = OFF(force_list), .help = "treat the texts as a list input even when there is one"},
  {.name = "--indent", .kind = CLI_INT, .off = OFF(indent), .lo = 0, .hi = 1000000000, .arg = "N",
   .help = "pretty-print with N spaces"},
  {.name = "--ascii", .kind = CLI_FLAG, .off = OFF(ascii), .help = "escape non-ASCII as Python does"},
  {.name = "--threads", .kind = CLI_INT, .off = OFF(threads), .lo = 1, .hi = 1024, .arg = "N", .def = "all CPUs",
   .help = "threads for the model"},
  {.name = "--precision", .kind = CLI_CHOICE, .off = OFF(precision), .arg = "fp32|bf16", .def = "fp32",
   .help = "how the weight matrices are kept: float, or bfloat16"},
  {.kind = CLI_TEXT, .help = "Limits of one call (0 = no limit):"},
  {.name = "--max-inputs", .kind = CLI_INT, .off = OFF(limits.max_inputs), .hi = 1000000, .arg = "N", .def = CLI_DEFAULT,
   .help = "texts in one call"},
  {.name = "--max-tokens", .kind = CLI_INT, .off = OFF(limits.max_tokens), .hi = 1000000000, .arg = "N",
   .def = CLI_DEFAULT, .help = "tokens of all its texts together, [CLS]/[SEP] counted"},
};
#undef OFF

const CliSpec cli_spec_classify = {
  .name = "classify",
  .usage =
    "usage: maskd classify [--db PATH] --model NAME[@REV] [options] \"text\" [more texts...]\n"
    "       maskd classify --model-dir DIR [options] \"text\" ...\n"
    "Prints what transformers' pipeline(\"text-classification\") returns, as JSON: without --top-k\n"
    "the best {label, score} of each text (one text: a list of one), with --top-k a sorted list of\n"
    "{label, score} per text (one text: that list).\n",
  .tail = "Texts after \"--\" are taken as texts whatever they start with.\n",
  .opts = classify_opts,
  .n_opts = (int)(sizeof classify_opts / sizeof classify_opts[0]),
  .positional = -1,
  .args_size = sizeof(ClassifyArgs),
  .defaults = classify_defaults,
  .col = 24,
};

int cmd_classify(int argc, char **argv) {
  const char **texts = calloc((size_t)argc + 1, sizeof *texts);
  int n = 0, status = 1;
  char *out = NULL;
  Store *s = NULL;
  TextClass *tc = NULL;
  json_t *res = NULL;
  Err err = {0};
  FillMaskError fe = {0};
  TextClassOptions o;
  textclass_options_default(&o);
  if (!texts) { fprintf(stderr, "maskd classify: out of memory\n"); return 1; }
  ClassifyArgs args;
  classify_defaults(&args);
  int parsed = cli_parse(&cli_spec_classify, "classify", -1, argc, argv, 1, &args, texts, &n);
  if (parsed) { status = parsed > 0 ? 0 : 2; goto done; }
  o.limits = args.limits;
  o.weights = args.precision ? MODEL_BF16 : MODEL_FP32;
  if (!!args.model == !!args.dir) {
    fprintf(stderr, "maskd classify: give exactly one of --model NAME[@REV] and --model-dir DIR\n");
    status = 2;
    goto done;
  }
  if (n == 0) { fprintf(stderr, "maskd classify: no input text (maskd classify --help)\n"); status = 2; goto done; }
  if (args.dir) {
    tc = textclass_load_dir(args.dir, &o, &err);
  } else {
    if (!(s = cli_store_open_existing(args.db, &err))) { fprintf(stderr, "maskd classify: %s\n", err.msg); goto done; }
    tc = store_load_textclass(s, args.model, &o, &err);
  }
  if (!tc) { fprintf(stderr, "maskd classify: %s\n", err.msg); goto done; }
  if (args.threads) model_set_threads(textclass_model(tc), args.threads);
  platform_pin_threads(model_threads(textclass_model(tc)));
  res = textclass_run(tc, texts, n, n > 1 || args.force_list, args.top_k, (TextClassFunction)args.fn, args.truncation, &fe);
  if (!res) { cli_pipeline_refusal("classify", &fe); goto done; }
  if (!(out = fillmask_dumps(res, args.indent, args.ascii))) {
    fprintf(stderr, "maskd classify: cannot write the JSON\n");
    goto done;
  }
  printf("%s\n", out);
  status = 0;
done:
  free(out);
  json_decref(res);
  textclass_free(tc);
  store_close(s);
  free(texts);
  return status;
}
