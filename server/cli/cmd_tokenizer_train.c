/* maskd tokenizer train: a Unigram tokenizer from text files, written as HF's
** tokenizer.json (plus tokenizer_config.json and special_tokens_map.json when the
** output is named tokenizer.json, as transformers' save_pretrained lays them out).
** With --job it trains a tokenizer job that maskd serve queued (server/cli/job_read.h). */
#include <errno.h>
#include <libgen.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/core/files.h"
#include "engine/core/platform.h"
#include "engine/core/now.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/unigram_trainer.h"
#include "server/cli/commands.h"
#include "server/cli/job_progress.h"
#include "server/cli/job_read.h"
#include "store/store.h"

#define MAX_SPECIAL 64

#define MAX_INPUTS 1024

typedef struct TokTrainArgs {
  const char *inputs[MAX_INPUTS];
  int n_inputs;
  const char *out, *unk, *special;
  int vocab_size, max_piece_length, seed_size, sub_iterations, threads, hf_seeds, quiet;
  double shrinking_factor;
  const char *db_path, *job, *data_dir, *work_dir;   /* --job: a queued job, its names resolved inside these */
} TokTrainArgs;

static void tt_defaults(void *p) {
  TokTrainArgs *a = p;
  memset(a, 0, sizeof *a);
  UtOptions o;
  ut_options_default(&o);
  a->unk = "<unk>";
  a->max_piece_length = o.max_piece_length;
  a->seed_size = o.seed_size;
  a->sub_iterations = o.n_sub_iterations;
  a->shrinking_factor = o.shrinking_factor;
}

#define OFF(f) offsetof(TokTrainArgs, f)
static const CliOpt tt_opts[] = {
  {.name = "--input", .kind = CLI_FILES, .off = OFF(inputs), .off2 = OFF(n_inputs), .hi = MAX_INPUTS, .arg = "FILE",
   .help = "text files (UTF-8, regular files), one or more; --input=FILE\n"
           "names one whatever it starts with (repeatable); a line may\nhave up to 64 MiB"},
  {.name = "--vocab-size", .kind = CLI_INT, .off = OFF(vocab_size), .lo = 1, .hi = 10000000, .arg = "N",
   .help = "final vocabulary size, special tokens included"},
  {.name = "--out", .kind = CLI_STRING, .off = OFF(out), .arg = "PATH",
   .help = "tokenizer.json to write; when named tokenizer.json, its folder\n"
           "also gets tokenizer_config.json and special_tokens_map.json\n"
           "(written to temporaries beside them and renamed into place)"},
  {.name = "--special-tokens", .kind = CLI_STRING, .off = OFF(special), .arg = "A,B,..",
   .def = "[CLS],[SEP],<unk>,<pad>,[MASK]", .help = "special tokens, first ids"},
  {.name = "--unk-token", .kind = CLI_STRING, .off = OFF(unk), .arg = "T", .def = CLI_DEFAULT,
   .help = "unknown token (added first if not a special token)"},
  {.name = "--max-piece-length", .kind = CLI_INT, .off = OFF(max_piece_length), .lo = 1, .hi = 255, .arg = "N",
   .def = CLI_DEFAULT, .help = "longest piece in characters"},
  {.name = "--shrinking-factor", .kind = CLI_DOUBLE, .off = OFF(shrinking_factor), .flo = 0, .fhi = 1,
   .open = CLI_OPEN_LO | CLI_OPEN_HI, .arg = "X", .def = CLI_DEFAULT, .help = "share of pieces one pruning keeps"},
  {.name = "--seed-size", .kind = CLI_INT, .off = OFF(seed_size), .lo = 1, .hi = 100000000, .arg = "N",
   .def = CLI_DEFAULT, .help = "seed pieces from the suffix array"},
  {.name = "--sub-iterations", .kind = CLI_INT, .off = OFF(sub_iterations), .lo = 1, .hi = 100, .arg = "N",
   .def = CLI_DEFAULT, .help = "EM iterations between prunings"},
  {.name = "--threads", .kind = CLI_INT, .off = OFF(threads), .lo = 1, .hi = 1024, .arg = "N", .def = "all CPUs",
   .help = "threads"},
  {.name = "--hf-seeds", .kind = CLI_FLAG, .off = OFF(hf_seeds),
   .help = "count seed substrings once per distinct word, exactly as HF\n"
           "tokenizers does (default: every occurrence, as SentencePiece)"},
  {.name = "--quiet", .kind = CLI_FLAG, .off = OFF(quiet), .help = "no progress on stderr"},
  {.name = "--job", .kind = CLI_STRING, .off = OFF(job), .arg = "ID",
   .help = "train tokenizer job ID of the store's queue, as maskd serve's\n"
           "worker does: its corpora and vocabulary size come from the job\n"
           "(names resolved inside --work-dir and --data-dir, the server's\n"
           "folders) and it writes the folder the worker made for the job's\n"
           "name; no other options but --db and --quiet"},
  {.name = "--db", .kind = CLI_STRING, .off = OFF(db_path), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "with --job: the store"},
  CLI_JOB_DIR_OPTS(TokTrainArgs),
};
#undef OFF

const CliSpec cli_spec_tokenizer_train = {
  .name = "tokenizer train",
  .usage =
    "usage: maskd tokenizer train --input FILE... --vocab-size N --out tokenizer.json [options]\n"
    "       maskd tokenizer train --db PATH --job ID --work-dir DIR [--data-dir DIR]   (maskd serve's worker)\n"
    "\n"
    "Trains a Unigram tokenizer (the algorithm of SentencePiece / HF UnigramTrainer) on the\n"
    "lines of the input files, with the seed recipe: normalizer Replace(``->\") Replace(''->\"),\n"
    "Metaspace pre-tokenizer and decoder, TemplateProcessing \"[CLS] $A [SEP]\".\n"
    "\n",
  .opts = tt_opts,
  .n_opts = (int)(sizeof tt_opts / sizeof tt_opts[0]),
  .args_size = sizeof(TokTrainArgs),
  .defaults = tt_defaults,
  .col = 29,
};

/* With --job the job is the whole description: no option but these. */
static const char *const job_options[] = {"--job", "--db", "--work-dir", "--data-dir", "--quiet", NULL};

/* --job: the corpora, vocabulary size and output come from the queued job; t keeps the paths. */
static int from_job(TokTrainArgs *a, JobReadTokenizer *t, int64_t *job_id, Err *e) {
  int64_t id;
  if (job_read_id(a->job, a->work_dir, &id, e)) return -1;
  *job_id = id;
  Store *db = store_open(cli_db_path(a->db_path), e);
  if (!db) return -1;
  int r = job_read_tokenizer(db, id, a->data_dir, a->work_dir, t, e);
  store_close(db);
  if (r) return -1;
  for (int i = 0; i < t->n_inputs; i++) a->inputs[i] = t->inputs[i];
  a->n_inputs = t->n_inputs;
  a->vocab_size = t->vocab_size;
  a->out = t->out;
  return 0;
}

int cmd_tokenizer_train(int argc, char **argv) {
  TokTrainArgs *args = malloc(sizeof *args);
  if (!args) { fprintf(stderr, "maskd tokenizer train: out of memory\n"); return 1; }
  tt_defaults(args);
  int parsed = cli_parse(&cli_spec_tokenizer_train, "tokenizer train", -1, argc, argv, 1, args, NULL, NULL);
  if (parsed) { free(args); return parsed > 0 ? 0 : 2; }
  const char *extra = NULL;
  if (args->job && (extra = cli_option_outside(argc, argv, 1, job_options))) {
    fprintf(stderr, "maskd tokenizer train: --job trains the tokenizer job as it was queued; it takes no other options but --db and --quiet (not %s)\n", extra);
    free(args);
    return 2;
  }
  if (!args->job && (args->db_path || args->data_dir || args->work_dir)) {
    fprintf(stderr, "maskd tokenizer train: --db, --data-dir and --work-dir go with --job\n");
    free(args);
    return 2;
  }
  JobReadTokenizer *job = calloc(1, sizeof *job);
  Err je = {0};
  int64_t job_id = 0;
  /* A job's progress goes to its record in the store (GET /jobs/ID). */
  JobProgress jp;
  memset(&jp, 0, sizeof jp);
  if (!job) { fprintf(stderr, "maskd tokenizer train: out of memory\n"); free(args); return 1; }
  if (args->job && from_job(args, job, &job_id, &je)) {
    fprintf(stderr, "maskd tokenizer train: %s\n", je.msg);
    job_read_tokenizer_free(job);
    free(job);
    free(args);
    return 1;
  }
  const char **inputs = args->inputs, *out = args->out, *unk = args->unk;
  int n_inputs = args->n_inputs;
  char *special_buf = NULL;
  const char *special[MAX_SPECIAL] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"};
  int n_special = 5;
  UtOptions o;
  ut_options_default(&o);
  o.progress = !args->quiet;
  o.seed_distinct = args->hf_seeds;
  o.vocab_size = args->vocab_size;
  o.max_piece_length = args->max_piece_length;
  o.seed_size = args->seed_size;
  o.n_sub_iterations = args->sub_iterations;
  o.shrinking_factor = args->shrinking_factor;
  if (args->threads) o.threads = args->threads;
  if (job_id > 0) {
    job_progress_open(&jp, cli_db_path(args->db_path), job_id);
    o.report = job_progress_report;
    o.report_ctx = &jp;
  }
  int rc = 2;
  if (args->special) {
    special_buf = strdup(args->special);
    if (!special_buf) { fprintf(stderr, "maskd tokenizer train: out of memory\n"); rc = 1; goto done; }
    n_special = 0;
    for (char *save = NULL, *tok = strtok_r(special_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      if (n_special == MAX_SPECIAL) { fprintf(stderr, "maskd tokenizer train: more than %d special tokens\n", MAX_SPECIAL); goto done; }
      special[n_special++] = tok;
    }
  }
  if (!n_inputs) { fprintf(stderr, "maskd tokenizer train: --input is required\n"); goto done; }
  if (!o.vocab_size) { fprintf(stderr, "maskd tokenizer train: --vocab-size is required\n"); goto done; }
  if (!out) { fprintf(stderr, "maskd tokenizer train: --out is required\n"); goto done; }
  o.special_tokens = special;
  o.n_special = n_special;
  o.unk_token = unk[0] ? unk : NULL;

  /* The output folder, made (with its parents) before spending time on training, as
  ** prepare's and export's are: the README's pipeline writes tok/tokenizer.json into a
  ** tok/ nothing made. A training that fails takes the folders it made back. */
  char *outdup = strdup(out), *dir = dirname(outdup);
  struct stat st;
  Err derr = {0};
  FilesMadeDirs made = {0};
  if (files_make_dirs_undoable(dir, &made, &derr) || stat(dir, &st) || !S_ISDIR(st.st_mode)) {
    files_made_dirs_remove(&made);
    if (derr.msg[0]) fprintf(stderr, "maskd tokenizer train: --out: %s\n", derr.msg);
    else fprintf(stderr, "maskd tokenizer train: --out: %s: not a directory\n", dir);
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
  double bytes = 0, total_bytes = 0;
  for (int i = 0; i < n_inputs; i++)
    if (!stat(inputs[i], &st)) total_bytes += (double)st.st_size;
  for (int i = 0; i < n_inputs; i++) {
    if (o.report) ut_words_set_report(w, o.report, o.report_ctx, bytes, total_bytes);
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
  if (o.report) o.report(o.report_ctx, "writing", r.n, r.n, "pieces");
  const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
  /* Written atomically; a stop signal waits until the files are in place (or not). */
  sigset_t old_mask;
  cli_block_stop_signals(&old_mask);
  int ok = !strcmp(base, "tokenizer.json") ? tokenizer_save_pretrained(tok, 0, dir, &err) : tokenizer_save(tok, out, &err);
  cli_restore_signals(&old_mask);
  if (ok < 0) { fprintf(stderr, "maskd tokenizer train: %s\n", err.msg); goto done_dir; }
  if (o.progress) fprintf(stderr, "tokenizer train: wrote %s (%d pieces) in %.2fs\n", out, r.n, now_monotonic() - t0);
  rc = 0;
done_dir:
  if (rc) files_made_dirs_remove(&made);
  else files_made_dirs_keep(&made);
  tokenizer_free(tok);
  ut_result_free(&r);
  ut_words_free(w);
  free(outdup);
done:
  job_progress_close(&jp);
  free(special_buf);
  free(args);
  job_read_tokenizer_free(job);
  free(job);
  return rc;
}
