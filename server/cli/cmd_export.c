/* maskd export / maskd import: a store revision to and from a Hugging Face model
** folder (config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
** special_tokens_map.json) that transformers' from_pretrained loads as
** RobertaForMaskedLM / BertForMaskedLM (or RobertaModel / BertModel for a base
** checkpoint) with an AlbertTokenizerFast-style Unigram tokenizer. Import reads the
** Hub's weight layouts through engine/io/hf_weights.h and stores every tensor it
** keeps; export writes every stored tensor back. Both directions validate everything
** (the weights are loaded as the revision will be loaded) before writing anything. */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/io/checkpoint.h"
#include "engine/io/hf_weights.h"
#include "engine/nn/config.h"
#include "engine/infer/fillmask.h"
#include "engine/core/files.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/tokenizer_files.h"
#include "server/cli/commands.h"
#include "store/load.h"
#include "store/store.h"


static const char *const folder_files[] = {"config.json", "model.safetensors", "tokenizer.json",
                                           "tokenizer_config.json", "special_tokens_map.json"};
#define N_FOLDER_FILES (sizeof folder_files / sizeof folder_files[0])

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* ---- the weights' check ---- */

/* An StSource over bytes in memory (ctx: the bytes; the reader keeps reads inside len). */
static int memory_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  (void)err;
  memcpy(dst, (const unsigned char *)ctx + offset, n);
  return 0;
}

/* f loads as the revision of config c will be loaded: a masked LM's (or a classifier's)
** weights into its model; a base model's encoder into a classifier started from it,
** as maskd finetune does. Nothing else is kept. */
static int check_weights(const ModelConfig *c, const StFile *f, Err *err) {
  ModelConfig k = *c;
  static const char *const two[] = {"a", "b"};
  if (k.task == MODEL_TASK_ENCODER && config_set_labels(&k, 2, two, err)) return -1;
  Model *m = model_new(&k, err);
  if (!m) return -1;
  int head = 0;
  int rc = c->task == MODEL_TASK_ENCODER ? ckpt_load_encoder(m, f, &head, err) : ckpt_load_weights(m, f, err);
  model_free(m);
  return rc;
}

/* ---- export ---- */

/* A stop signal (SIGINT, SIGTERM, SIGHUP) while the files are written is caught, not
** left to its default action: that would end the process with the temporaries (and a
** folder the export made) behind. The writes see the flag and fail, the failure path
** removes what was written, and the command exits with 128 + the signal. */
static const int stop_signals[3] = {SIGINT, SIGTERM, SIGHUP};
static volatile sig_atomic_t stop_signal;
static void on_stop(int sig) { stop_signal = sig; }

/* Catches the stop signals, old[] getting their actions; one ignored at the start (nohup,
** a script's background job) stays ignored, as the caller asked. */
static void catch_stops(struct sigaction old[3]) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; i++) {
    sigaction(stop_signals[i], NULL, &old[i]);
    if (old[i].sa_handler != SIG_IGN) sigaction(stop_signals[i], &sa, NULL);
  }
}

static void restore_stops(const struct sigaction old[3]) {
  for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &old[i], NULL);
}

static const char *stop_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP"; }

/* -1 with err saying so when a stop signal came, else 0. */
static int stopped(const char *dir, Err *err) {
  if (!stop_signal) return 0;
  return err_set(err, "stopped by %s before the files were in place; %s is as it was", stop_name(stop_signal), dir);
}

/* The weights' sink: files_atomic_write, refused once a stop signal came. */
typedef struct StopSink {
  FilesAtomic *f;
  const char *dir;
} StopSink;

static int stop_sink_write(void *ctx, const void *data, size_t n, Err *err) {
  StopSink *k = ctx;
  if (stopped(k->dir, err)) return -1;
  return files_atomic_write(k->f, data, n, err);
}

/* bf16 != 0: model.safetensors in BF16 and config.json's torch_dtype "bfloat16". */
static int do_export(Store *s, const char *spec, const char *dir, int force, int bf16, Err *err) {
  StoreRevision r;
  void *cfg = NULL, *tj = NULL;
  size_t cfg_len = 0, tj_len = 0;
  char *cfg_s = NULL, *path = NULL;
  void *wbytes = NULL;
  size_t wlen = 0;
  StFile *wf = NULL;
  Tokenizer *t = NULL;
  ModelConfig c;
  char *text[N_FOLDER_FILES] = {NULL};
  size_t len[N_FOLDER_FILES] = {0};
  FilesAtomic f[N_FOLDER_FILES];
  memset(f, 0, sizeof f);
  for (size_t i = 0; i < N_FOLDER_FILES; i++) f[i].fd = -1;
  sigset_t old_mask;
  struct sigaction old_stops[3];
  FilesMadeDirs made = {0};
  int rc = -1, absent = 0, catching = 0;
  if (store_resolve(s, spec, &r, err)) return -1;
  if (!r.tokenizer[0]) return err_set(err, "%s: revision %s has no tokenizer; export needs one", r.model, r.commit);
  if (store_revision_file(s, &r, "config.json", &cfg, &cfg_len, err)) goto done;
  if (store_revision_file(s, &r, "tokenizer.json", &tj, &tj_len, err)) goto done;
  if (!(cfg_s = malloc(cfg_len + 1))) { err_set(err, "out of memory"); goto done; }
  memcpy(cfg_s, cfg, cfg_len);
  cfg_s[cfg_len] = 0;
  /* Everything is checked before the folder is touched. */
  if (config_parse(cfg_s, &c, err)) { err_prefix(err, "stored config.json"); goto done; }
  /* The stored weights, checked as the revision's loader will check them, then
  ** written back whole: an import's kept tensors (the pooler, NSP) go out too. */
  if (store_revision_file(s, &r, "model.safetensors", &wbytes, &wlen, err)) goto done;
  StSource src = {memory_read, wbytes, wlen};
  if (!(wf = st_open_source(&src, err)) || check_weights(&c, wf, err)) { err_prefix(err, "stored model.safetensors"); goto done; }
  if (!(t = tokenizer_from_json(tj, tj_len, err))) { err_prefix(err, "stored tokenizer.json"); goto done; }
  if (tokenizer_vocab_size(t) > c.vocab_size) {
    err_set(err, "the tokenizer has %d ids, the model's vocabulary only %d", tokenizer_vocab_size(t), c.vocab_size);
    goto done;
  }
  if (!(absent = !exists(dir)) && !force) {
    for (size_t i = 0; i < N_FOLDER_FILES; i++) {
      free(path);
      if (!(path = files_join(dir, folder_files[i]))) { err_set(err, "out of memory"); goto done; }
      if (exists(path)) { err_set(err, "%s exists (use --force to overwrite)", path); goto done; }
    }
  }
  /* A name that a rename cannot replace (a directory in its place) is refused before
  ** anything is written: found at its rename, the files renamed before it would have
  ** stayed, a mixed folder. A symlink is replaced (the link, not its target). */
  for (size_t i = 0; !absent && i < N_FOLDER_FILES; i++) {
    struct stat st;
    free(path);
    if (!(path = files_join(dir, folder_files[i]))) { err_set(err, "out of memory"); goto done; }
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      err_set(err, "%s is %s, not a file: nothing was written", path, S_ISDIR(st.st_mode) ? "a directory" : "something else");
      goto done;
    }
  }
  catch_stops(old_stops);
  catching = 1;
  /* Every level made here is recorded: a failed export takes DIR's new parents back too. */
  if (files_make_dirs_undoable(dir, &made, err)) goto done;
  /* config.json as maskd writes it (architectures, model_type, every field); the
  ** stored tensors as ckpt writes them: F32 or BF16, HF names, tied decoder left out,
  ** format "pt", streamed into their file (text[1] stays NULL) from the stored bytes. */
  if (!(text[0] = config_to_json_dtype(&c, bf16 ? "bfloat16" : "float32"))) { err_set(err, "out of memory"); goto done; }
  len[0] = strlen(text[0]);
  if (!(text[2] = tokenizer_to_json(t, err)) || tokenizer_pretrained_json(t, config_max_tokens(&c), &text[3], &text[4], err)) goto done;
  /* An import's own side files go back as they came. */
  for (size_t i = 3; i < 5; i++) {
    void *kept = NULL;
    size_t kl = 0;
    Err e = {0};
    if (store_revision_file(s, &r, folder_files[i], &kept, &kl, &e) == 0) {
      free(text[i]);
      text[i] = kept;
    } else if (e.kind != ERR_NOT_FOUND) { *err = e; goto done; }
  }
  for (size_t i = 2; i < N_FOLDER_FILES; i++) len[i] = strlen(text[i]);
  /* All five are written beside their names first and renamed into place only when every
  ** one is whole: a full disk, or a stop signal, leaves the folder as it was, with no
  ** temporary behind. A stop signal during the renames waits until they are done, and
  ** then acts as it would have without this export's handlers. */
  for (size_t i = 0; i < N_FOLDER_FILES; i++) {
    free(path);
    if (!(path = files_join(dir, folder_files[i]))) { err_set(err, "out of memory"); goto done; }
    StopSink k = {&f[i], dir};
    CkptSink sink = {stop_sink_write, &k};
    if (stopped(dir, err) || files_atomic_open(&f[i], path, err) ||
        (text[i] ? files_atomic_write(&f[i], text[i], len[i], err) : ckpt_file_stream(wf, bf16, &sink, err)) ||
        files_atomic_finish(&f[i], err))
      goto done;
  }
  cli_block_stop_signals(&old_mask);
  if (stopped(dir, err)) { cli_restore_signals(&old_mask); goto done; }
  for (size_t i = 0; i < N_FOLDER_FILES; i++)
    if (files_atomic_commit(&f[i], err)) { cli_restore_signals(&old_mask); goto done; }
  restore_stops(old_stops);   /* still blocked: one that came during the renames acts now */
  catching = 0;
  cli_restore_signals(&old_mask);
  files_made_dirs_keep(&made);
  printf("exported %s@%s (revision %lld) to %s\n", r.model, r.commit, (long long)r.seq, dir);
  rc = 0;
done:
  for (size_t i = 0; i < N_FOLDER_FILES; i++) { files_atomic_abort(&f[i]); free(text[i]); }
  files_made_dirs_remove(&made);   /* the folders this export made and could not fill go again */
  if (catching) restore_stops(old_stops);
  st_close(wf);
  tokenizer_free(t);
  free(cfg); free(tj); free(cfg_s); free(path); free(wbytes);
  return rc;
}

/* ---- import ---- */

static int do_import(Store *s, const char *dir, const char *name, const char *message, Err *err) {
  char *cp = files_join(dir, "config.json");
  char *cfg_json = NULL, *tok_json = NULL, *side_cfg = NULL, *side_map = NULL, msg[512];
  size_t side_cfg_len = 0, side_map_len = 0;
  unsigned char *wb = NULL;
  size_t wb_len = 0;
  HfWeights *w = NULL;
  StFile *wf = NULL;
  Tokenizer *t = NULL;
  TokenizerSide side;
  ModelConfig c;
  int rc = -1;
  if (!cp) { err_set(err, "out of memory"); goto done; }
  if (!exists(cp)) { err_set(err, "%s: missing (an HF model folder needs config.json, weights and a tokenizer)", cp); goto done; }
  if (config_load(cp, &c, err)) goto done;   /* its message names the file */
  /* One repository, one pipeline, as train and finetune push: a classifier imported
  ** over a masked LM's revisions would take its name (and fill-mask's default) away.
  ** The config's task is the weights' group already (a masked LM without its head is a
  ** base model, of the same group). */
  if (store_check_repo_task(s, name, c.task, err)) goto done;
  /* The tokenizer as transformers reads the folder: tokenizer.json, else the slow
  ** tokenizers' files converted; the side files are kept as they are, and say which
  ** token fill-mask looks for and whether decoding cleans up spaces. */
  if (!(t = tokenizer_load_dir(dir, err))) goto done;
  if (tokenizer_side_read(dir, &side_cfg, &side_cfg_len, &side_map, &side_map_len, err) ||
      tokenizer_side_parse(side_cfg, side_cfg_len, side_map, side_map_len, &side, err)) { err_prefix(err, dir); goto done; }
  if (tokenizer_vocab_size(t) > c.vocab_size) {
    err_set(err, "%s: the tokenizer has %d ids, config.json's vocab_size is %d", dir, tokenizer_vocab_size(t), c.vocab_size);
    goto done;
  }
  /* The folder's weights under HF's names (any Hub layout), every kept tensor in
  ** F32; a masked LM's config without an MLM head in the files becomes a base model. */
  if (!(w = hfw_read_dir(dir, &c, err))) goto done;
  if (c.task == MODEL_TASK_MLM) {
    const char *mask = side.mask_token[0] ? side.mask_token : tokenizer_mask_token(t);
    if (!mask || tokenizer_token_to_id(t, mask) < 0) {
      err_set(err, "%s: the tokenizer has no mask token (%s), which fill-mask needs", dir, mask ? mask : "[MASK] or <mask>");
      goto done;
    }
  }
  if (hfw_serialize(w, &wb, &wb_len, err)) goto done;
  hfw_drop_data(w);   /* the file holds them now; the check below builds a model beside it */
  StSource src = {memory_read, wb, wb_len};
  if (!(wf = st_open_source(&src, err)) || check_weights(&c, wf, err)) { err_prefix(err, "weights"); goto done; }
  /* Stored in maskd's canonical form, so what is exported later is what maskd writes. */
  if (!(cfg_json = config_to_json(&c))) { err_set(err, "out of memory"); goto done; }
  if (!(tok_json = tokenizer_to_json(t, err))) goto done;
  snprintf(msg, sizeof msg, "%s", message ? message : "Import from ");
  if (!message) snprintf(msg, sizeof msg, "Import from %s", dir);
  StorePush p = {.message = msg, .config_json = cfg_json, .weights = wb, .weights_len = wb_len,
                 .tokenizer_json = tok_json, .tokenizer_config_json = side_cfg, .special_tokens_map_json = side_map};
  StoreRevision r;
  if (store_push(s, name, &p, &r, err)) goto done;
  printf("weights: %s, %d tensors stored\n", hfw_source(w), hfw_count(w));
  if (*hfw_ignored(w)) printf("ignored: %s\n", hfw_ignored(w));
  if (*hfw_unused(w)) printf("not used by %s (kept): %s\n", config_architecture(&c), hfw_unused(w));
  if (c.task == MODEL_TASK_ENCODER)
    printf("no masked-LM head: stored as a %s (fine-tune it with maskd finetune; fill-mask needs a *ForMaskedLM model)\n",
           config_architecture(&c));
  printf("tokenizer: %s (%s)%s\n", tokenizer_class_name(t), tokenizer_family(t) == TOKENIZER_WORDPIECE ? "WordPiece" :
         tokenizer_family(t) == TOKENIZER_BPE ? "byte-level BPE" : "Unigram",
         side_cfg || side_map ? ", tokenizer_config.json and special_tokens_map.json kept" : "");
  printf("imported %s as %s@%s (revision %lld)\n", dir, r.model, r.commit, (long long)r.seq);
  rc = 0;
done:
  st_close(wf);
  hfw_free(w);
  tokenizer_free(t);
  free(cp); free(cfg_json); free(tok_json); free(wb); free(side_cfg); free(side_map);
  return rc;
}

/* ---- commands ---- */

typedef struct MoveArgs {
  const char *db, *message;
  int force;
  int dtype;           /* export's --dtype: 0 F32, 1 BF16 */
} MoveArgs;

static void move_defaults(void *p) { memset(p, 0, sizeof(MoveArgs)); }

static const CliOpt export_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = offsetof(MoveArgs, db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--force", .kind = CLI_FLAG, .off = offsetof(MoveArgs, force),
   .help = "overwrite those files when DIR already has them"},
  {.name = "--dtype", .kind = CLI_CHOICE, .off = offsetof(MoveArgs, dtype), .arg = "fp32|bf16", .def = "fp32",
   .help = "model.safetensors' numbers: F32, or BF16 (half the size, rounded to\n"
           "nearest even; config.json then says torch_dtype \"bfloat16\")"},
};

const CliSpec cli_spec_export = {
  .name = "export",
  .usage =
    "usage: maskd export [--db PATH] [--force] [--dtype fp32|bf16] NAME[@REV] DIR\n"
    "Writes DIR/config.json, model.safetensors (F32, or BF16), tokenizer.json, tokenizer_config.json and\n"
    "special_tokens_map.json: a folder transformers loads with from_pretrained (the model's class from\n"
    "config.json; the tokenizer's family's fast class, or an import's own side files as they came).\n"
    "REV: main (newest, default), a revision number or a commit.\n",
  .tail = "The five files are written beside their names and renamed into place together, so a\n"
          "failure (a full disk) leaves DIR as it was; so does SIGINT, SIGTERM or SIGHUP while they\n"
          "are written (the exit status is then 128 + the signal's number).\n",
  .opts = export_opts,
  .n_opts = (int)(sizeof export_opts / sizeof export_opts[0]),
  .positional = 2,
  .args_size = sizeof(MoveArgs),
  .defaults = move_defaults,
  .col = 21,
};

static const CliOpt import_opts[] = {
  {.name = "--db", .kind = CLI_STRING, .off = offsetof(MoveArgs, db), .arg = "PATH", .def = "$MASKD_DB, else ./maskd.db",
   .help = "the store"},
  {.name = "--message", .kind = CLI_STRING, .off = offsetof(MoveArgs, message), .arg = "TEXT",
   .def = "Import from DIR", .help = "the revision's message"},
};

const CliSpec cli_spec_import = {
  .name = "import",
  .usage =
    "usage: maskd import [--db PATH] [--message TEXT] DIR NAME\n"
    "Reads an HF model folder (config.json, weights, a tokenizer, optional tokenizer_config.json /\n"
    "special_tokens_map.json, kept as they are) and pushes it as a new revision of model NAME.\n"
    "The tokenizer: tokenizer.json (Unigram, WordPiece or byte-level BPE), else BERT's vocab.txt or\n"
    "RoBERTa's vocab.json + merges.txt, converted as transformers converts them.\n"
    "Weights as the Hub ships them: model.safetensors (F32, F16, BF16 or F64), sharded safetensors\n"
    "(model.safetensors.index.json), pytorch_model.bin (torch.save's zip, read without Python) or\n"
    "its shards; stored as F32 under transformers' names. Tensors a masked LM does not use (the\n"
    "pooler, BERT's NSP head) are kept and listed; a checkpoint without an MLM head is stored as\n"
    "BertModel/RobertaModel, for maskd finetune. Other tokenizer pipelines are refused by name.\n",
  .opts = import_opts,
  .n_opts = (int)(sizeof import_opts / sizeof import_opts[0]),
  .positional = 2,
  .args_size = sizeof(MoveArgs),
  .defaults = move_defaults,
  .col = 17,
};

static Store *open_store(const char *db, const char *cmd, int must_exist) {
  Err err = {0};
  Store *s = must_exist ? cli_store_open_existing(db, &err) : store_open(cli_db_path(db), &err);
  if (!s) fprintf(stderr, "maskd %s: %s\n", cmd, err.msg);
  return s;
}

/* The two commands' shared command line: options, then exactly two positional arguments. */
static int move_args(const CliSpec *spec, int argc, char **argv, MoveArgs *args, const char **pos, const char *want) {
  int np = 0;
  move_defaults(args);
  int parsed = cli_parse(spec, spec->name, -1, argc, argv, 1, args, pos, &np);
  if (parsed == 0 && np != 2) {
    fprintf(stderr, "maskd %s: expected %s (maskd %s --help)\n", spec->name, want, spec->name);
    parsed = -1;
  }
  return parsed;
}

int cmd_export(int argc, char **argv) {
  MoveArgs a;
  const char *pos[2];
  int parsed = move_args(&cli_spec_export, argc, argv, &a, pos, "NAME[@REV] and DIR");
  if (parsed) return parsed > 0 ? 0 : 2;
  Store *s = open_store(a.db, "export", 1);
  if (!s) return 1;
  Err err = {0};
  int rc = do_export(s, pos[0], pos[1], a.force, a.dtype, &err);
  if (rc) fprintf(stderr, "maskd export: %s\n", err.msg);
  store_close(s);
  /* Stopped by a signal: the shell's status for a process it ended (130 for SIGINT). */
  return rc ? (stop_signal ? 128 + stop_signal : 1) : 0;
}

int cmd_import(int argc, char **argv) {
  MoveArgs a;
  const char *pos[2];
  int parsed = move_args(&cli_spec_import, argc, argv, &a, pos, "DIR and NAME");
  if (parsed) return parsed > 0 ? 0 : 2;
  /* A folder that is not there is said so, before any store is opened (or made). */
  struct stat st;
  if (stat(pos[0], &st) || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "maskd import: %s: %s\n", pos[0], stat(pos[0], &st) ? strerror(errno) : "not a directory");
    return 1;
  }
  Store *s = open_store(a.db, "import", 0);
  if (!s) return 1;
  Err err = {0};
  int rc = do_import(s, pos[0], pos[1], a.message, &err);
  if (rc) fprintf(stderr, "maskd import: %s\n", err.msg);
  store_close(s);
  return rc ? 1 : 0;
}
