/* maskd prepare: a text file -> token ids -> fixed-length shards + manifest (engine/data/prepare.h).
** With --job it prepares a dataset job that maskd serve queued (server/cli/job_read.h). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/files.h"
#include "engine/data/prepare.h"
#include "engine/data/shards.h"
#include "engine/tok/tokenizer.h"
#include "server/cli/commands.h"
#include "server/cli/job_progress.h"
#include "server/cli/job_read.h"
#include "store/store.h"

typedef struct PrepareArgs {
  const char *input, *out, *split, *hash, *tokenizer;
  long seq_len, shard_size, vocab, group;
  int ids_mode, keep_empty, overwrite, quiet;
  const char *db_path, *job, *data_dir, *work_dir;   /* --job: a queued job, its names resolved inside these */
} PrepareArgs;

static void prepare_defaults(void *p) {
  PrepareArgs *a = p;
  memset(a, 0, sizeof *a);
  a->split = "train";
  a->seq_len = 128;
  a->shard_size = 5000;
}

#define OFF(f) offsetof(PrepareArgs, f)
static const CliOpt prepare_opts[] = {
  {.name = "--tokenizer", .kind = CLI_STRING, .off = OFF(tokenizer), .arg = "T",
   .help = "a tokenizer.json; its vocabulary size and hash go into the shards"},
  {.name = "--input", .kind = CLI_STRING, .off = OFF(input), .arg = "FILE",
   .help = "input lines, a regular file ('-' for stdin); a line may have up to 64 MiB"},
  {.name = "--ids", .kind = CLI_FLAG, .off = OFF(ids_mode),
   .help = "instead of a tokenizer: each input line holds one text's ids,\n"
           "[CLS] ... [SEP] included, as decimal numbers separated by blanks\n"
           "(what maskd tokenizer encode prints)"},
  {.name = "--vocab-size", .kind = CLI_LONG, .off = OFF(vocab), .lo = 1, .hi = INT32_MAX, .arg = "V",
   .help = "vocabulary size with --ids (every id must be below it)"},
  {.name = "--split", .kind = CLI_STRING, .off = OFF(split), .arg = "NAME", .def = CLI_DEFAULT,
   .help = "split name in the shard names"},
  {.name = "--seq-len", .kind = CLI_LONG, .off = OFF(seq_len), .lo = 1, .hi = 1 << 20, .arg = "N", .def = CLI_DEFAULT,
   .help = "tokens per sample"},
  {.name = "--out", .kind = CLI_STRING, .off = OFF(out), .arg = "DIR",
   .help = "output directory (created; must not hold a set already)"},
  {.name = "--shard-size", .kind = CLI_LONG, .off = OFF(shard_size), .lo = 1, .hi = 1L << 30, .arg = "N",
   .def = CLI_DEFAULT, .help = "samples per shard"},
  {.name = "--group-lines", .kind = CLI_LONG, .off = OFF(group), .lo = 0, .hi = 1L << 30, .arg = "N",
   .def = "0: one stream, only the final tail is dropped",
   .help = "drop the remainder after every N lines as the seed does with\n1000"},
  {.name = "--keep-empty", .kind = CLI_FLAG, .off = OFF(keep_empty), .help = "encode blank lines too (default: skip them)"},
  {.name = "--tokenizer-hash", .kind = CLI_STRING, .off = OFF(hash), .arg = "H",
   .help = "record H as the manifest's tokenizer_hash"},
  {.name = "--overwrite", .kind = CLI_FLAG, .off = OFF(overwrite), .help = "replace an existing set of this split in DIR"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = OFF(quiet), .help = "no progress on stderr"},
  {.name = "--job", .kind = CLI_STRING, .off = OFF(job), .arg = "ID",
   .help = "run prepare job ID of the store's queue, as maskd serve's worker\n"
           "does: its tokenizer, input, split and sequence length come from\n"
           "the job (names resolved inside --work-dir and --data-dir, the\n"
           "server's folders) and it writes the folder the worker made for\n"
           "the job's name; no other options but --db and --quiet"},
  {.name = "--db", .kind = CLI_STRING, .off = OFF(db_path), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "with --job: the store"},
  CLI_JOB_DIR_OPTS(PrepareArgs),
};
#undef OFF

const CliSpec cli_spec_prepare = {
  .name = "prepare",
  .usage = "usage: maskd prepare --tokenizer T --input FILE --split NAME --seq-len N --out DIR [options]\n"
           "       maskd prepare --ids --vocab-size V --input FILE --split NAME --seq-len N --out DIR [options]\n"
           "       maskd prepare --db PATH --job ID --work-dir DIR [--data-dir DIR]   (maskd serve's worker)\n"
           "\n"
           "Encodes each input line as [CLS] ... [SEP], concatenates the ids, cuts them into\n"
           "samples of N tokens (the tail is dropped) and writes shards\n"
           "(<split>-<index>-samples-<n>.shard) and a manifest.json into DIR.\n"
           "\n",
  .tail = "\n"
          "Values may also be written --option=VALUE (so a value may start with '-').\n"
          "The set appears whole or not at all: it is written into a temporary folder beside\n"
          "DIR and renamed into place; SIGINT/SIGTERM stop with nothing written.\n",
  .opts = prepare_opts,
  .n_opts = (int)(sizeof prepare_opts / sizeof prepare_opts[0]),
  .args_size = sizeof(PrepareArgs),
  .defaults = prepare_defaults,
};

static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

/* The --ids encoder: the line's numbers as they are. */
static int ids_encode(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err) {
  (void)ctx;
  int n = 0;
  size_t i = 0;
  while (i < len) {
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\r')) i++;
    if (i >= len) break;
    int64_t v = 0;
    size_t j = i;
    while (j < len && text[j] >= '0' && text[j] <= '9' && v <= INT32_MAX) { v = v * 10 + (text[j] - '0'); j++; }
    if (j == i || v > INT32_MAX || (j < len && text[j] != ' ' && text[j] != '\t' && text[j] != '\r'))
      return err_set(err, "'%.*s' is not an id", (int)((j < len ? j + 1 : j) - i), text + i);
    if (n < cap) ids[n] = (int32_t)v;
    n++;
    i = j;
  }
  return n;
}

/* The --tokenizer encoder: HF's encode(text) with the post-processor's [CLS] ... [SEP]. */
typedef struct TokCtx { Tokenizer *tok; Encoding enc; } TokCtx;

static int tok_encode(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err) {
  TokCtx *c = ctx;
  if (tokenizer_encode(c->tok, text, len, 1, &c->enc, err) != 0) return -1;
  int n = c->enc.n;
  memcpy(ids, c->enc.ids, (size_t)(n < cap ? n : cap) * sizeof *ids);
  return n;
}

/* With --job the job is the whole description: no option but these. */
static const char *const job_options[] = {"--job", "--db", "--work-dir", "--data-dir", "--quiet", NULL};

/* --job: the tokenizer, input, split, sequence length and output come from the queued
** job; p keeps the paths. */
static int from_job(PrepareArgs *a, JobReadPrepare *p, int64_t *job_id, Err *e) {
  int64_t id;
  if (job_read_id(a->job, a->work_dir, &id, e)) return -1;
  *job_id = id;
  Store *db = store_open(cli_db_path(a->db_path), e);
  if (!db) return -1;
  int r = job_read_prepare(db, id, a->data_dir, a->work_dir, p, e);
  store_close(db);
  if (r) return -1;
  a->tokenizer = p->tokenizer;
  a->input = p->input;
  a->split = p->split;
  if (p->seq_len) a->seq_len = p->seq_len;
  a->out = p->out;
  return 0;
}

int cmd_prepare(int argc, char **argv) {
  PrepareArgs args;
  prepare_defaults(&args);
  int parsed = cli_parse(&cli_spec_prepare, "prepare", -1, argc, argv, 1, &args, NULL, NULL);
  if (parsed) return parsed > 0 ? 0 : 2;
  const char *extra = NULL;
  if (args.job && (extra = cli_option_outside(argc, argv, 1, job_options))) {
    fprintf(stderr, "maskd prepare: --job runs the prepare job as it was queued; it takes no other options but --db and --quiet (not %s)\n", extra);
    return 2;
  }
  if (!args.job && (args.db_path || args.data_dir || args.work_dir)) {
    fprintf(stderr, "maskd prepare: --db, --data-dir and --work-dir go with --job\n");
    return 2;
  }
  JobReadPrepare job;
  Err je = {0};
  int64_t job_id = 0;
  if (args.job && from_job(&args, &job, &job_id, &je)) { fprintf(stderr, "maskd prepare: %s\n", je.msg); return 1; }
  const char *input = args.input, *out = args.out, *split = args.split, *hash = args.hash, *tokenizer = args.tokenizer;
  long seq_len = args.seq_len, vocab = args.vocab;
  int ids_mode = args.ids_mode;
  if (!input) { fprintf(stderr, "maskd prepare: --input is required\n"); return 2; }
  if (!out) { fprintf(stderr, "maskd prepare: --out is required\n"); return 2; }
  if (!ids_mode == !tokenizer) { fprintf(stderr, "maskd prepare: give either --tokenizer T or --ids (input already encoded)\n"); return 2; }
  if (ids_mode && !vocab) { fprintf(stderr, "maskd prepare: --ids needs --vocab-size\n"); return 2; }
  if (tokenizer && hash) { fprintf(stderr, "maskd prepare: --tokenizer-hash is for --ids; with --tokenizer the file's hash is recorded\n"); return 2; }

  Err err = {0};
  TokCtx tc;
  memset(&tc, 0, sizeof tc);
  char tok_hash[32];
  if (tokenizer) {
    tc.tok = tokenizer_load(tokenizer, &err);
    if (!tc.tok) { fprintf(stderr, "maskd prepare: %s\n", err.msg); return 1; }
    if (prepare_file_hash(tokenizer, tok_hash, sizeof tok_hash, &err)) { fprintf(stderr, "maskd prepare: %s\n", err.msg); tokenizer_free(tc.tok); return 1; }
    long tv = tokenizer_vocab_size(tc.tok);
    if (vocab && vocab != tv) {
      fprintf(stderr, "maskd prepare: --vocab-size %ld differs from the tokenizer's %ld\n", vocab, tv);
      tokenizer_free(tc.tok);
      return 2;
    }
    vocab = tv;
    hash = tok_hash;
  }

  /* A named input must be a regular file ("-" reads stdin, which may be a pipe). */
  uint64_t total = 0;
  FILE *in = strcmp(input, "-") ? files_fopen_regular(input, &total, &err) : stdin;
  if (!in) { fprintf(stderr, "maskd prepare: %s\n", err.msg); tokenizer_free(tc.tok); return 1; }
  struct stat st;
  if (in == stdin) total = fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;

  PrepareOptions o = prepare_default_options(split, (int)seq_len, (uint32_t)vocab);
  o.shard_size = (int)args.shard_size;
  o.group_lines = (int)args.group;
  o.keep_empty = args.keep_empty;
  o.overwrite = args.overwrite;
  o.tokenizer_hash = hash;
  o.source = input;
  o.progress = !args.quiet;
  /* SIGINT/SIGTERM stop the run at the next line with nothing written (no half set, no temporary). */
  struct sigaction sa, old_int, old_term;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  o.stop = &stop_signal;
  /* A job's progress goes to its record in the store (GET /jobs/ID). */
  JobProgress jp;
  memset(&jp, 0, sizeof jp);
  if (job_id > 0) {
    job_progress_open(&jp, cli_db_path(args.db_path), job_id);
    o.report = job_progress_report;
    o.report_ctx = &jp;
  }
  PrepareStats s;
  int rc = tokenizer ? prepare_run(in, total, out, &o, tok_encode, &tc, &s, &err)
                     : prepare_run(in, total, out, &o, ids_encode, NULL, &s, &err);
  job_progress_close(&jp);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  if (in != stdin) fclose(in);
  encoding_free(&tc.enc);
  tokenizer_free(tc.tok);
  if (rc) { fprintf(stderr, "maskd prepare: %s\n", err.msg); return stop_signal ? 130 : 1; }
  printf("%s: %" PRIu64 " samples of %ld tokens in %d shards (%" PRIu64 " lines, %" PRIu64 " skipped, %" PRIu64 " tokens, %" PRIu64 " dropped)\n",
         out, s.samples, seq_len, s.shards, s.lines, s.lines_skipped, s.tokens, s.tokens_dropped);
  return 0;
}
