/* maskd tokenizer encode|decode: one input line in, one output line out. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "engine/core/files.h"
#include "engine/core/platform.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/tokenizer_files.h"
#include "server/cli/commands.h"

typedef struct TokArgs {
  const char *tokenizer, *input, *out;
  int pieces, offsets, no_special, skip_special, threads, jsonl, pair, type_ids, max_length, truncation;
} TokArgs;

static void tok_defaults(void *p) {
  memset(p, 0, sizeof(TokArgs));
  ((TokArgs *)p)->truncation = -1;   /* not given: longest_first when --max-length is */
}

/* The modes: the verbs of maskd tokenizer (train has its own spec). */
enum { TOK_ENCODE, TOK_DECODE, TOK_EXPORT };
static const char *const tok_verbs[] = {"encode", "decode", "export"};
#define OFF(f) offsetof(TokArgs, f)
static const CliOpt tok_opts[] = {
  {.name = "--tokenizer", .kind = CLI_STRING, .off = OFF(tokenizer), .arg = "T",
   .help = "a Hugging Face tokenizer.json, or a model folder"},
  {.name = "--input", .kind = CLI_STRING, .off = OFF(input), .arg = "FILE", .def = "stdin",
   .help = "the input, read whole, up to 1 GiB (a named input must be a regular file)",
   .modes = 1u << TOK_ENCODE | 1u << TOK_DECODE},
  {.name = "--out", .kind = CLI_STRING, .off = OFF(out), .arg = "DIR", .help = "the folder to write",
   .modes = 1u << TOK_EXPORT},
  {.name = "--pieces", .kind = CLI_FLAG, .off = OFF(pieces), .help = "print the pieces instead of the ids",
   .modes = 1u << TOK_ENCODE},
  {.name = "--offsets", .kind = CLI_FLAG, .off = OFF(offsets), .help = "print start:end byte offsets into the line",
   .modes = 1u << TOK_ENCODE},
  {.name = "--no-special-tokens", .kind = CLI_FLAG, .off = OFF(no_special), .help = "do not add [CLS] ... [SEP]",
   .modes = 1u << TOK_ENCODE},
  {.name = "--threads", .kind = CLI_INT, .off = OFF(threads), .lo = 1, .hi = 1024, .arg = "N", .def = "all CPUs",
   .help = "encoding threads"},
  {.name = "--jsonl", .kind = CLI_FLAG, .off = OFF(jsonl), .help = "each input line is a JSON string",
   .modes = 1u << TOK_ENCODE},
  {.name = "--pair", .kind = CLI_FLAG, .off = OFF(pair),
   .help = "each line is two texts separated by a tab (with --jsonl: a JSON list of two strings),\n"
           "encoded as a pair", .modes = 1u << TOK_ENCODE},
  {.name = "--max-length", .kind = CLI_INT, .off = OFF(max_length), .lo = 1, .hi = 1 << 30, .arg = "N",
   .help = "cut each input to N tokens, special tokens included (HF's truncation)", .modes = 1u << TOK_ENCODE},
  {.name = "--truncation", .kind = CLI_CHOICE, .off = OFF(truncation),
   .arg = "do_not_truncate|longest_first|only_first|only_second", .def = "longest_first with --max-length",
   .help = "how --max-length cuts (HF's TruncationStrategy)", .modes = 1u << TOK_ENCODE},
  {.name = "--type-ids", .kind = CLI_FLAG, .off = OFF(type_ids), .help = "print the token type ids instead of the ids",
   .modes = 1u << TOK_ENCODE},
  {.name = "--skip-special-tokens", .kind = CLI_FLAG, .off = OFF(skip_special), .help = "leave special tokens out",
   .modes = 1u << TOK_DECODE},
};
#undef OFF

const CliSpec cli_spec_tokenizer = {
  .name = "tokenizer",
  .usage =
    "usage: maskd tokenizer train --input FILE... --vocab-size N --out tokenizer.json [options]\n"
    "       maskd tokenizer encode --tokenizer T [--input FILE] [--pieces | --offsets]\n"
    "                              [--no-special-tokens] [--threads N] [--jsonl] [--pair]\n"
    "                              [--max-length N [--truncation STRATEGY]] [--type-ids]\n"
    "       maskd tokenizer decode --tokenizer T [--input FILE] [--skip-special-tokens]\n"
    "       maskd tokenizer export --tokenizer T --out DIR\n"
    "\n"
    "encode: prints the ids of each input line (space separated, one line per line);\n"
    "        --pieces prints the pieces instead, --offsets start:end byte offsets into the line.\n"
    "        Special tokens ([CLS] ... [SEP]) are added as HF's encode() does unless\n"
    "        --no-special-tokens. --threads: encoding threads (default: all CPUs).\n"
    "        --jsonl: each input line is a JSON string (for texts holding newlines).\n"
    "        --pair: each line holds two texts (tab between them, or --jsonl's [a, b]),\n"
    "        encoded as HF's encode(a, b) does; --max-length N cuts to N tokens as HF's\n"
    "        truncation does (--truncation: the strategy); --type-ids prints type ids.\n"
    "decode: reads space-separated ids per line and prints the decoded text.\n"
    "export: writes DIR/tokenizer.json (HF's layout), tokenizer_config.json and\n"
    "        special_tokens_map.json (as transformers saves the family's fast tokenizer:\n"
    "        AlbertTokenizerFast, BertTokenizerFast or RobertaTokenizerFast).\n"
    "train: see maskd tokenizer train --help.\n"
    "T is a Hugging Face tokenizer.json (Unigram, WordPiece or byte-level BPE), or a model folder\n"
    "holding one, or BERT's vocab.txt, or RoBERTa's vocab.json + merges.txt (converted as\n"
    "transformers converts them). Input defaults to stdin; it is read\n"
    "whole, up to 1 GiB (a named input must be a regular file).\n"
    "\n",
  .opts = tok_opts,
  .n_opts = (int)(sizeof tok_opts / sizeof tok_opts[0]),
  .modes = tok_verbs,
  .n_modes = 3,
  .args_size = sizeof(TokArgs),
  .defaults = tok_defaults,
  .col = 25,
};

/* The most text encode/decode reads (a file or stdin), held whole in memory. */
#define TEXT_MAX ((size_t)1 << 30)

/* Whole file (a regular file) or stdin into memory, at most TEXT_MAX bytes. */
static char *slurp(const char *path, size_t *len, Err *err) {
  return path ? files_read_all(path, TEXT_MAX, len, err) : files_read_stream(stdin, "stdin", TEXT_MAX, len, err);
}

/* Splits at '\n' (a final unterminated line counts; a final '\n' ends the last line). */
static size_t split_lines(char *text, size_t len, const char ***lines, size_t **lens) {
  size_t n = 0;
  for (const char *p = text, *end = text + len; (p = memchr(p, '\n', (size_t)(end - p))); p++) n++;
  if (len > 0 && text[len - 1] != '\n') n++;
  *lines = malloc((n + 1) * sizeof **lines);
  *lens = malloc((n + 1) * sizeof **lens);
  if (!*lines || !*lens) return (size_t)-1;
  size_t k = 0, start = 0;
  for (const char *p = text, *end = text + len; (p = memchr(p, '\n', (size_t)(end - p))); p++) {
    size_t i = (size_t)(p - text);
    (*lines)[k] = text + start; (*lens)[k] = i - start; k++; start = i + 1;
  }
  if (start < len) { (*lines)[k] = text + start; (*lens)[k] = len - start; k++; }
  return k;
}

/* A big stdout buffer: the output is as large as the input. */
typedef struct Out { char *p; size_t n, cap; } Out;
static void out_flush(Out *o) { fwrite(o->p, 1, o->n, stdout); o->n = 0; }
static void out_put(Out *o, const char *s, size_t n) {
  if (o->n + n > o->cap) out_flush(o);
  if (n > o->cap) { fwrite(s, 1, n, stdout); return; }
  memcpy(o->p + o->n, s, n);
  o->n += n;
}
/* Decimal digits, two at a time (printing ids is a fair share of encode's time). */
static void out_int(Out *o, long v) {
  static const char pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
  char tmp[24];
  int k = 24;
  unsigned long u = v < 0 ? (unsigned long)-v : (unsigned long)v;
  while (u >= 100) { unsigned d = (unsigned)(u % 100) * 2; u /= 100; tmp[--k] = pairs[d + 1]; tmp[--k] = pairs[d]; }
  if (u >= 10) { unsigned d = (unsigned)u * 2; tmp[--k] = pairs[d + 1]; tmp[--k] = pairs[d]; }
  else tmp[--k] = (char)('0' + u);
  if (v < 0) tmp[--k] = '-';
  out_put(o, tmp + k, (size_t)(24 - k));
}

/* --jsonl: replaces every line by the string it encodes (kept alive in *vals); with
** pairs (seconds != NULL) each line is a list of two strings, the second into seconds. */
static int decode_jsonl(const char **lines, size_t *lens, size_t n, json_t **vals, const char **seconds,
                        size_t *second_lens) {
  for (size_t i = 0; i < n; i++) {
    json_error_t je;
    json_t *v = json_loadb(lines[i], lens[i], JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    vals[i] = v;
    json_t *a = seconds ? json_array_get(v, 0) : v, *b = seconds ? json_array_get(v, 1) : NULL;
    if (!v || !json_is_string(a) || (seconds && (json_array_size(v) != 2 || !json_is_string(b)))) {
      fprintf(stderr, "maskd tokenizer encode: line %zu: not a JSON %s%s%s\n", i + 1,
              seconds ? "list of two strings" : "string", v ? "" : ": ", v ? "" : je.text);
      return -1;
    }
    lines[i] = json_string_value(a);
    lens[i] = json_string_length(a);
    if (seconds) { seconds[i] = json_string_value(b); second_lens[i] = json_string_length(b); }
  }
  return 0;
}

/* --pair without --jsonl: cuts every line at its first tab into two texts. */
static int split_tabs(const char **lines, size_t *lens, size_t n, const char **seconds, size_t *second_lens) {
  for (size_t i = 0; i < n; i++) {
    const char *tab = memchr(lines[i], '\t', lens[i]);
    if (!tab) {
      fprintf(stderr, "maskd tokenizer encode: line %zu: no tab between the pair's two texts (--pair)\n", i + 1);
      return -1;
    }
    seconds[i] = tab + 1;
    second_lens[i] = lens[i] - (size_t)(tab + 1 - lines[i]);
    lens[i] = (size_t)(tab - lines[i]);
  }
  return 0;
}

/* What encode prints and how it cuts. */
typedef struct EncodeHow {
  int pieces, offsets, type_ids, add_special, threads, jsonl, pair, max_length;
  TokTruncation truncation;
} EncodeHow;

static int cmd_encode(Tokenizer *t, char *text, size_t len, const EncodeHow *how) {
  const char **lines, **seconds = NULL;
  size_t *lens, *second_lens = NULL;
  size_t n = split_lines(text, len, &lines, &lens);
  if (n == (size_t)-1) { fprintf(stderr, "maskd tokenizer encode: out of memory\n"); return 1; }
  Out o = {malloc(1 << 20), 0, 1 << 20};
  int rc = 0, pieces = how->pieces, offsets = how->offsets;
  Err err;
  json_t **vals = how->jsonl ? calloc(n + 1, sizeof *vals) : NULL;
  if (how->pair) {
    seconds = malloc(sizeof *seconds * (n + 1));
    second_lens = malloc(sizeof *second_lens * (n + 1));
  }
  if (!o.p || (how->jsonl && !vals) || (how->pair && (!seconds || !second_lens))) {
    fprintf(stderr, "maskd tokenizer encode: out of memory\n");
    rc = 1;
    goto done;
  }
  if (how->jsonl && decode_jsonl(lines, lens, n, vals, seconds, second_lens) < 0) { rc = 1; goto done; }
  if (how->pair && !how->jsonl && split_tabs(lines, lens, n, seconds, second_lens) < 0) { rc = 1; goto done; }
  if (!pieces && !offsets && !how->type_ids && !how->pair && !how->max_length) {
    /* Blocks of lines, so the id arrays stay small and warm in cache. */
    const size_t block = 16384;
    for (size_t b0 = 0; b0 < n; b0 += block) {
      size_t nb = n - b0 < block ? n - b0 : block;
      int32_t *ids;
      size_t *starts;
      if (tokenizer_encode_many(t, lines + b0, lens + b0, nb, how->add_special, how->threads, &ids, &starts, &err) < 0) {
        /* "text N" is 0-based within the block; lines are 1-based for people. */
        long long bad = -1;
        if (sscanf(err.msg, "text %lld:", &bad) == 1) {
          const char *why = strchr(err.msg, ':');
          fprintf(stderr, "maskd tokenizer encode: line %lld%s\n", bad + 1 + (long long)b0, why ? why : "");
        } else fprintf(stderr, "maskd tokenizer encode: %s\n", err.msg);
        rc = 1;
        goto done;
      }
      for (size_t i = 0; i < nb; i++) {
        for (size_t j = starts[i]; j < starts[i + 1]; j++) {
          if (j > starts[i]) out_put(&o, " ", 1);
          out_int(&o, ids[j]);
        }
        out_put(&o, "\n", 1);
      }
      free(ids); free(starts);
    }
  } else {
    Encoding e = {0};
    for (size_t i = 0; i < n; i++) {
      /* Pairs and cut inputs as HF's encode(a, b) with truncation set (the template always
      ** added: --no-special-tokens is refused with them); single texts as before. */
      int r = how->max_length || how->pair
                ? tokenizer_encode_truncated(t, lines[i], lens[i], how->pair ? seconds[i] : NULL,
                                             how->pair ? second_lens[i] : 0, how->max_length,
                                             how->max_length ? how->truncation : TOK_TRUNC_NONE, &e, &err)
                : tokenizer_encode(t, lines[i], lens[i], how->add_special, &e, &err);
      if (r < 0) {
        fprintf(stderr, "maskd tokenizer encode: line %zu: %s\n", i + 1, err.msg);
        rc = 1;
        break;
      }
      for (int j = 0; j < e.n; j++) {
        if (j) out_put(&o, " ", 1);
        if (offsets) { out_int(&o, e.offsets[2 * j]); out_put(&o, ":", 1); out_int(&o, e.offsets[2 * j + 1]); }
        else if (how->type_ids) out_int(&o, e.type_ids[j]);
        else if (!pieces) out_int(&o, e.ids[j]);
        else { size_t pl; const char *p = tokenizer_token_string(t, &e, j, lines[i], &pl); out_put(&o, p, pl); }
      }
      out_put(&o, "\n", 1);
    }
    encoding_free(&e);
  }
done:
  if (o.p) { if (rc == 0) out_flush(&o); free(o.p); }
  if (vals) { for (size_t i = 0; i < n; i++) json_decref(vals[i]); free(vals); }
  free(lines); free(lens); free(seconds); free(second_lens);
  return rc;
}

static int cmd_decode(Tokenizer *t, char *text, size_t len, int skip_special) {
  const char **lines;
  size_t *lens;
  size_t n = split_lines(text, len, &lines, &lens);
  if (n == (size_t)-1) { fprintf(stderr, "maskd tokenizer decode: out of memory\n"); return 1; }
  int rc = 0, cap = 256;
  int32_t *ids = malloc((size_t)cap * sizeof *ids);
  Out o = {malloc(1 << 20), 0, 1 << 20};
  Err err;
  for (size_t i = 0; i < n && rc == 0; i++) {
    char *p = (char *)lines[i], *end = p + lens[i];
    int k = 0;
    while (p < end) {
      while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
      if (p >= end) break;
      char *q;
      errno = 0;
      long v = strtol(p, &q, 10);
      if (q == p || (q < end && *q != ' ' && *q != '\t' && *q != '\r') || errno || v < 0 || v > 0x7fffffff) {
        fprintf(stderr, "maskd tokenizer decode: line %zu: not a token id: \"%.*s\"\n", i + 1, (int)(strcspn(p, " \t\r\n") > 40 ? 40 : strcspn(p, " \t\r\n")), p);
        rc = 1;
        break;
      }
      if (k == cap) { int32_t *nb = realloc(ids, (size_t)(cap *= 2) * sizeof *ids); if (!nb) { rc = 1; break; } ids = nb; }
      ids[k++] = (int32_t)v;
      p = q;
    }
    if (rc) break;
    size_t sl;
    char *s = tokenizer_decode_len(t, ids, k, skip_special, &sl, &err);
    if (!s) { fprintf(stderr, "maskd tokenizer decode: line %zu: %s\n", i + 1, err.msg); rc = 1; break; }
    out_put(&o, s, sl);
    out_put(&o, "\n", 1);
    free(s);
  }
  if (rc == 0) out_flush(&o);
  free(o.p); free(ids); free(lines); free(lens);
  return rc;
}

int cmd_tokenizer(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    cli_help(argc < 2 ? stderr : stdout, &cli_spec_tokenizer);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "train")) return cmd_tokenizer_train(argc - 1, argv + 1);
  const char *verb = argv[1];
  int mode = cli_mode(&cli_spec_tokenizer, verb);
  if (mode < 0) {
    fprintf(stderr, "maskd tokenizer: unknown verb '%s' (train, encode, decode, export; maskd tokenizer --help)\n", verb);
    return 2;
  }
  char who[32];
  snprintf(who, sizeof who, "tokenizer %s", verb);
  TokArgs args;
  tok_defaults(&args);
  int parsed = cli_parse(&cli_spec_tokenizer, who, mode, argc, argv, 2, &args, NULL, NULL);
  if (parsed) return parsed > 0 ? 0 : 2;
  const char *tok_path = args.tokenizer, *input = args.input, *out_dir = args.out;
  int pieces = args.pieces, offsets = args.offsets, add_special = !args.no_special, skip_special = args.skip_special;
  int threads = args.threads, jsonl = args.jsonl;
  if (!tok_path) { fprintf(stderr, "maskd tokenizer %s: --tokenizer is required\n", verb); return 2; }
  if (pieces + offsets + args.type_ids > 1) {
    fprintf(stderr, "maskd tokenizer encode: --pieces, --offsets and --type-ids exclude each other\n");
    return 2;
  }
  if (args.pair && (pieces || offsets)) {
    fprintf(stderr, "maskd tokenizer encode: --pieces and --offsets are for single texts, not --pair\n");
    return 2;
  }
  if ((args.pair || args.max_length) && !add_special) {
    fprintf(stderr, "maskd tokenizer encode: --pair and --max-length add the special tokens; leave out --no-special-tokens\n");
    return 2;
  }
  if (args.truncation >= 0 && !args.max_length) {
    fprintf(stderr, "maskd tokenizer encode: --truncation needs --max-length (the length to cut to)\n");
    return 2;
  }
  if (mode == TOK_EXPORT && !out_dir) { fprintf(stderr, "maskd tokenizer export: --out is required\n"); return 2; }
  if (mode == TOK_EXPORT && !out_dir[0]) { fprintf(stderr, "maskd tokenizer export: --out: empty directory name\n"); return 2; }
  Err err;
  Tokenizer *t = tokenizer_load_path(tok_path, &err);
  if (!t) { fprintf(stderr, "maskd tokenizer %s: %s\n", verb, err.msg); return 1; }
  if (mode == TOK_EXPORT) {
    if (mkdir(out_dir, 0777) < 0 && errno != EEXIST) {
      fprintf(stderr, "maskd tokenizer export: %s: %s\n", out_dir, strerror(errno));
      tokenizer_free(t);
      return 1;
    }
    int rc = tokenizer_save_pretrained(t, 0, out_dir, &err) < 0;
    if (rc) fprintf(stderr, "maskd tokenizer export: %s\n", err.msg);
    tokenizer_free(t);
    return rc;
  }
  size_t len = 0;
  char *text = slurp(input, &len, &err);
  if (!text) {
    fprintf(stderr, "maskd tokenizer %s: %s\n", verb, err.msg);
    tokenizer_free(t);
    return 1;
  }
  if (threads == 0) threads = platform_cpu_count();
  EncodeHow how = {.pieces = pieces, .offsets = offsets, .type_ids = args.type_ids, .add_special = add_special,
                   .threads = threads, .jsonl = jsonl, .pair = args.pair, .max_length = args.max_length,
                   .truncation = args.truncation >= 0 ? (TokTruncation)args.truncation : TOK_TRUNC_LONGEST_FIRST};
  int rc = mode == TOK_ENCODE ? cmd_encode(t, text, len, &how) : cmd_decode(t, text, len, skip_special);
  free(text);
  tokenizer_free(t);
  return rc;
}
