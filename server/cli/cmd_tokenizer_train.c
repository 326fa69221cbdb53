/* maskd tokenizer train: a Unigram tokenizer from text files, written as HF's
** tokenizer.json (plus tokenizer_config.json and special_tokens_map.json when the
** output is named tokenizer.json, as transformers' save_pretrained lays them out). */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/platform.h"
#include "engine/core/now.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/unigram_trainer.h"
#include "server/cli/commands.h"

#define MAX_SPECIAL 64

static void usage(FILE *f) {
  fprintf(f,
    "usage: maskd tokenizer train --input FILE... --vocab-size N --out tokenizer.json [options]\n"
    "\n"
    "Trains a Unigram tokenizer (the algorithm of SentencePiece / HF UnigramTrainer) on the\n"
    "lines of the input files, with the seed recipe: normalizer Replace(``->\") Replace(''->\"),\n"
    "Metaspace pre-tokenizer and decoder, TemplateProcessing \"[CLS] $A [SEP]\".\n"
    "\n"
    "  --input FILE...           text files (UTF-8, regular files), one or more; --input=FILE\n"
    "                            names one whatever it starts with (repeatable); a line may\n"
    "                            have up to 64 MiB\n"
    "  --vocab-size N            final vocabulary size, special tokens included\n"
    "  --out PATH                tokenizer.json to write; when named tokenizer.json, its folder\n"
    "                            also gets tokenizer_config.json and special_tokens_map.json\n"
    "                            (written to temporaries beside them and renamed into place)\n"
    "  --special-tokens A,B,..   special tokens, first ids (default [CLS],[SEP],<unk>,<pad>,[MASK])\n"
    "  --unk-token T             unknown token (default <unk>; added first if not a special token)\n"
    "  --max-piece-length N      longest piece in characters (default 16)\n"
    "  --shrinking-factor X      share of pieces one pruning keeps (default 0.75)\n"
    "  --seed-size N             seed pieces from the suffix array (default 1000000)\n"
    "  --sub-iterations N        EM iterations between prunings (default 2)\n"
    "  --threads N               threads (default: all CPUs)\n"
    "  --hf-seeds                count seed substrings once per distinct word, exactly as HF\n"
    "                            tokenizers does (default: every occurrence, as SentencePiece)\n"
    "  --quiet                   no progress on stderr\n");
}

int cmd_tokenizer_train(int argc, char **argv) {
  const char *inputs[1024], *out = NULL, *unk = "<unk>";
  int n_inputs = 0;
  char *special_buf = NULL;
  const char *special[MAX_SPECIAL] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"};
  int n_special = 5;
  UtOptions o;
  ut_options_default(&o);
  o.progress = 1;
  o.vocab_size = 0;
  int rc = 2;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = NULL;
    long n;
    int r;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); free(special_buf); return 0; }
    else if (!strcmp(a, "--hf-seeds")) o.seed_distinct = 1;
    else if (!strcmp(a, "--quiet")) o.progress = 0;
    else if ((r = cli_flag_value("tokenizer train", argc, argv, &i, "--input", &v))) {
      if (r < 0) goto done;
      /* "--input A B C": the files up to the next option; "--input=A" is one file, whatever its name. */
      int more = strcmp(a, "--input") == 0;
      for (;;) {
        if (n_inputs == 1024) { fprintf(stderr, "maskd tokenizer train: more than 1024 input files\n"); goto done; }
        inputs[n_inputs++] = v;
        if (!more || i + 1 >= argc || cli_looks_like_flag(argv[i + 1])) break;
        v = argv[++i];
      }
    }
    else if ((r = cli_flag_value("tokenizer train", argc, argv, &i, "--out", &v))) { if (r < 0) goto done; out = v; }
    else if ((r = cli_flag_value("tokenizer train", argc, argv, &i, "--unk-token", &v))) { if (r < 0) goto done; unk = v; }
    else if ((r = cli_flag_value("tokenizer train", argc, argv, &i, "--special-tokens", &v))) {
      if (r < 0) goto done;
      free(special_buf);
      special_buf = strdup(v);
      n_special = 0;
      for (char *save = NULL, *tok = strtok_r(special_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n_special == MAX_SPECIAL) { fprintf(stderr, "maskd tokenizer train: more than %d special tokens\n", MAX_SPECIAL); goto done; }
        special[n_special++] = tok;
      }
    }
    else if ((r = cli_flag_value("tokenizer train", argc, argv, &i, "--shrinking-factor", &v))) {
      if (r < 0) goto done;
      char *end;
      double x = strtod(v, &end);
      if (*end || !(x > 0 && x < 1)) { fprintf(stderr, "maskd tokenizer train: --shrinking-factor wants a number in (0, 1)\n"); goto done; }
      o.shrinking_factor = x;
    }
    else {
      static const struct { const char *flag; long lo, hi; } nums[] = {
        {"--vocab-size", 1, 10000000}, {"--max-piece-length", 1, 255}, {"--seed-size", 1, 100000000},
        {"--sub-iterations", 1, 100}, {"--threads", 1, 1024}};
      int *dst[] = {&o.vocab_size, &o.max_piece_length, &o.seed_size, &o.n_sub_iterations, &o.threads};
      r = 0;
      for (size_t k = 0; !r && k < sizeof nums / sizeof *nums; k++) {
        if ((r = cli_flag_value("tokenizer train", argc, argv, &i, nums[k].flag, &v)) != 1) continue;
        if (cli_parse_long(v, nums[k].lo, nums[k].hi, &n)) {
          fprintf(stderr, "maskd tokenizer train: %s wants a number from %ld to %ld\n", nums[k].flag, nums[k].lo, nums[k].hi);
          goto done;
        }
        *dst[k] = (int)n;
      }
      if (r < 0) goto done;
      if (r == 0) { fprintf(stderr, "maskd tokenizer train: unknown option or missing value: %s (maskd tokenizer train --help)\n", a); goto done; }
    }
  }
  if (!n_inputs) { fprintf(stderr, "maskd tokenizer train: --input is required\n"); goto done; }
  if (!o.vocab_size) { fprintf(stderr, "maskd tokenizer train: --vocab-size is required\n"); goto done; }
  if (!out) { fprintf(stderr, "maskd tokenizer train: --out is required\n"); goto done; }
  o.special_tokens = special;
  o.n_special = n_special;
  o.unk_token = unk[0] ? unk : NULL;

  /* Check the output folder before spending time on training. */
  char *outdup = strdup(out), *dir = dirname(outdup);
  struct stat st;
  if (stat(dir, &st) || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "maskd tokenizer train: output folder %s does not exist\n", dir);
    free(outdup);
    goto done;
  }

  rc = 1;
  Err err;
  double t0 = now_monotonic();
  UtWords *w = ut_words_new();
  UtResult r = {0};
  Tokenizer *tok = NULL;
  if (!w) { fprintf(stderr, "maskd tokenizer train: out of memory\n"); goto done_dir; }
  double bytes = 0;
  for (int i = 0; i < n_inputs; i++) {
    if (ut_words_add_file(w, inputs[i], o.threads, &err)) { fprintf(stderr, "maskd tokenizer train: %s\n", err.msg); goto done_dir; }
    if (!stat(inputs[i], &st)) bytes += (double)st.st_size;
  }
  if (o.progress) {
    double dt = now_monotonic() - t0;
    fprintf(stderr, "tokenizer train: read %d file(s), %.1f MB in %.2fs (%.0f MB/s)\n", n_inputs, bytes / 1e6, dt, bytes / 1e6 / (dt > 0 ? dt : 1e-9));
  }
  if (ut_train(w, &o, &r, &err)) { fprintf(stderr, "maskd tokenizer train: %s\n", err.msg); goto done_dir; }
  int added_unk = o.unk_token != NULL;  /* the trainer puts the unk token first unless it is a special token */
  for (int i = 0; i < n_special; i++) if (o.unk_token && !strcmp(special[i], o.unk_token)) added_unk = 0;
  tok = tokenizer_new_seed(r.n, (const char *const *)r.pieces, r.scores, r.unk_id, n_special + added_unk, &err);
  if (!tok) { fprintf(stderr, "maskd tokenizer train: %s\n", err.msg); goto done_dir; }
  const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
  /* Written atomically; a stop signal waits until the files are in place (or not). */
  sigset_t old_mask;
  cli_block_stop_signals(&old_mask);
  int ok = !strcmp(base, "tokenizer.json") ? tokenizer_save_pretrained(tok, dir, &err) : tokenizer_save(tok, out, &err);
  cli_restore_signals(&old_mask);
  if (ok < 0) { fprintf(stderr, "maskd tokenizer train: %s\n", err.msg); goto done_dir; }
  if (o.progress) fprintf(stderr, "tokenizer train: wrote %s (%d pieces) in %.2fs\n", out, r.n, now_monotonic() - t0);
  rc = 0;
done_dir:
  tokenizer_free(tok);
  ut_result_free(&r);
  ut_words_free(w);
  free(outdup);
done:
  free(special_buf);
  return rc;
}
