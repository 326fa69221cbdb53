/* Bounded reads and atomic writes (issue 11): every reader of a file maskd did not
** write refuses, at once and without reading it, /dev/zero, a FIFO (with no writer:
** a blocking open would hang the test, which an alarm turns into a failure) and a file
** one byte over its cap (sparse files made with truncate(), so nothing large is
** written); a file at the cap is read. Every writer, made to fail mid-file by
** RLIMIT_FSIZE (SIGXFSZ ignored: the write fails with EFBIG, as on a full disk), leaves
** the previous file or set exactly as it was and no temporary beside it; a write that
** succeeds replaces it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/buf.h"
#include "engine/tok/tokenizer_files.h"
#include "engine/nn/config.h"
#include "engine/core/files.h"
#include "engine/infer/fillmask.h"
#include "engine/data/loader.h"
#include "engine/data/prepare.h"
#include "engine/train/run_config.h"
#include "engine/io/safetensors.h"
#include "engine/data/shards.h"
#include "engine/tok/tokenizer.h"
#include "engine/tok/unigram_trainer.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char root[512];

static char *at(const char *name) {
  static char buf[8][1024];
  static int k;
  char *p = buf[k++ % 8];
  snprintf(p, 1024, "%s/%s", root, name);
  return p;
}

/* A file of size bytes, sparse (no data written) after its first bytes. */
static void sparse(const char *path, const char *head, off_t size) {
  FILE *f = fopen(path, "wb");
  if (head) fputs(head, f);
  fclose(f);
  if (truncate(path, size) != 0) printf("# truncate %s: %s\n", path, strerror(errno));
}

static void put(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  fputs(text, f);
  fclose(f);
}

static char *slurp(const char *path) {
  size_t n;
  return files_read_all(path, (size_t)1 << 30, &n, NULL);
}

static int file_is(const char *path, const char *text) {
  char *t = slurp(path);
  int same = t && !strcmp(t, text);
  free(t);
  return same;
}

/* Names in dir that are this module's temporaries (".X.tmp-XXXXXX"). */
static int temporaries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) n += files_is_temp_name(e->d_name);
  if (d) closedir(d);
  return n;
}

/* A refused read: -1 (or NULL), at once, with needle in the message. */
#define REFUSED(name, call, needle)                                                                   \
  do {                                                                                                \
    Err e_ = {0};                                                                                     \
    alarm(20);                                                                                        \
    int bad_ = (call);                                                                                \
    alarm(0);                                                                                         \
    check(bad_ && strstr(e_.msg, needle) != NULL, name, "not refused or message \"%s\" lacks \"%s\"", \
          e_.msg, needle);                                                                            \
  } while (0)
#define E (&e_)

static Tokenizer *small_tokenizer(void) {
  const char *pieces[12] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"};
  char buf[12][16];
  double scores[12];
  for (int i = 0; i < 12; i++) {
    if (i >= 5) { snprintf(buf[i], sizeof buf[i], "\xe2\x96\x81w%d", i); pieces[i] = buf[i]; }
    scores[i] = i < 5 ? 0 : -(double)i;
  }
  return tokenizer_new_seed(12, pieces, scores, 2, 5, NULL);
}

static void test_helper(void) {
  size_t n;
  char *t;
  /* /dev/zero, a FIFO, a folder: refused by kind, nothing read. */
  REFUSED("read_all_dev_zero", !(t = files_read_all("/dev/zero", 1 << 20, &n, E)), "character device");
  REFUSED("read_all_fifo", !(t = files_read_all(at("fifo"), 1 << 20, &n, E)), "FIFO");
  REFUSED("read_all_folder", !(t = files_read_all(root, 1 << 20, &n, E)), "folder");
  REFUSED("read_all_missing", !(t = files_read_all(at("missing"), 1 << 20, &n, E)), "cannot open");
  /* At the cap it is read; one byte over, refused before reading. */
  sparse(at("cap"), "x", 4096);
  t = files_read_all(at("cap"), 4096, &n, NULL);
  check(t && n == 4096 && t[0] == 'x' && t[4096] == '\0', "read_all_at_cap", "%zu bytes", t ? n : 0);
  free(t);
  sparse(at("cap1"), "x", 4097);
  REFUSED("read_all_over_cap", !(t = files_read_all(at("cap1"), 4096, &n, E)), "4097 bytes, more than 4 KiB");

  /* Each refusal says its kind: a missing file "not found", one over its cap "too
  ** large", a FIFO where a file is read "bad input" (server/http's table maps them). */
  {
    Err ek = {0};
    int ok = !files_read_all(at("missing"), 1 << 20, &n, &ek) && ek.kind == ERR_NOT_FOUND;
    check(ok, "read_all_missing_kind_not_found", "%s: %s", err_kind_name(ek.kind), ek.msg);
    ok = !files_read_all(at("cap1"), 4096, &n, &ek) && ek.kind == ERR_TOO_LARGE;
    check(ok, "read_all_over_cap_kind_too_large", "%s: %s", err_kind_name(ek.kind), ek.msg);
    ok = !files_read_all(at("fifo"), 1 << 20, &n, &ek) && ek.kind == ERR_BAD_INPUT;
    check(ok, "read_all_fifo_kind_bad_input", "%s: %s", err_kind_name(ek.kind), ek.msg);
    /* err_set's kind is "internal"; err_prefix keeps a kind; err_kind_default fills only an unclassified one. */
    err_set(&ek, "x");
    int k1 = ek.kind == ERR_INTERNAL;
    err_kind_default(&ek, ERR_BAD_INPUT);
    int k2 = ek.kind == ERR_BAD_INPUT;
    err_setk(&ek, ERR_NOMEM, "out of memory");
    err_prefix(&ek, "tokenizer.json");
    err_kind_default(&ek, ERR_BAD_INPUT);
    check(k1 && k2 && ek.kind == ERR_NOMEM && !strcmp(ek.msg, "tokenizer.json: out of memory"), "err_kinds_set_prefix_default",
          "%d %d %s: %s", k1, k2, err_kind_name(ek.kind), ek.msg);
  }

  /* A stream (stdin, a pipe): refused once cap + 1 bytes have come. */
  FILE *z = fopen("/dev/zero", "rb");
  REFUSED("read_stream_endless", !(t = files_read_stream(z, "stdin", 100000, &n, E)), "more than 100000 bytes");
  fclose(z);
  char text[] = "0123456789";
  FILE *m = fmemopen(text, 10, "r");
  t = files_read_stream(m, "mem", 10, &n, NULL);
  check(t && n == 10 && !strcmp(t, text), "read_stream_at_cap", "%zu", t ? n : 0);
  free(t);
  fclose(m);

  /* Lines: each at most max bytes; a longer one is an error, the last needs no '\n'. */
  char lines[] = "ab\n\ncdef\r\n0123456789\nxyz";
  m = fmemopen(lines, strlen(lines), "r");
  FilesLines r;
  files_lines_init(&r, m, 10);
  char *line;
  size_t len;
  char got[200] = "";
  int k;
  Err e = {0};
  while ((k = files_lines_next(&r, &line, &len, &e)) > 0) { strncat(got, line, len); strcat(got, "|"); }
  check(k == 0 && !strcmp(got, "ab||cdef\r|0123456789|xyz|") && r.bytes == strlen(lines), "lines_split",
        "'%s' (%d, %s)", got, k, e.msg);
  files_lines_free(&r);
  fclose(m);
  char longer[] = "ok\n01234567890\nnever";
  m = fmemopen(longer, strlen(longer), "r");
  files_lines_init(&r, m, 10);
  k = files_lines_next(&r, &line, &len, &e);
  int k2 = files_lines_next(&r, &line, &len, &e);
  check(k == 1 && k2 == -1 && strstr(e.msg, "more than 10 bytes"), "lines_over_max", "%d %d %s", k, k2, e.msg);
  files_lines_free(&r);
  fclose(m);
  z = fopen("/dev/zero", "rb");   /* no newline ever: refused after max + 1 bytes, not at the end */
  files_lines_init(&r, z, 1 << 20);
  alarm(20);
  k = files_lines_next(&r, &line, &len, &e);
  alarm(0);
  check(k == -1 && strstr(e.msg, "more than 1048576 bytes") && r.cap <= (1 << 20) + 2, "lines_endless_line", "%d %s", k, e.msg);
  files_lines_free(&r);
  fclose(z);

  /* Atomic writes: the temporary is named after the file and goes away. */
  check(files_write_atomic(at("a.txt"), "first", 5, &e) == 0 && (t = slurp(at("a.txt"))) && !strcmp(t, "first") &&
            temporaries(root) == 0, "atomic_write", "%s", e.msg);
  free(t);
  check(files_write_atomic(at("a.txt"), "second", 6, &e) == 0 && (t = slurp(at("a.txt"))) && !strcmp(t, "second") &&
            temporaries(root) == 0, "atomic_replace", "%s", e.msg);
  free(t);
  FilesAtomic a;
  int ok = files_atomic_open(&a, at("a.txt"), &e) == 0 && files_is_temp_name(strrchr(a.tmp, '/') + 1) &&
           strstr(a.tmp, "/.a.txt.tmp-") && files_atomic_write(&a, "third", 5, &e) == 0 && temporaries(root) == 1;
  files_atomic_abort(&a);
  check(ok && (t = slurp(at("a.txt"))) && !strcmp(t, "second") && temporaries(root) == 0, "atomic_abort", "%s", e.msg);
  free(t);
  check(files_is_temp_name(".x.tmp-abcdef") && !files_is_temp_name("x.tmp-abcdef") && !files_is_temp_name(".tmp-abcdef") &&
        !files_is_temp_name("manifest.json"), "temp_names", "");
}

/* Each engine reader, given /dev/zero, a FIFO, and a file one byte over its cap. */
static void test_readers(void) {
  ModelConfig c;
  RunConfig rc;
  /* tokenizer.json */
  REFUSED("tokenizer_dev_zero", !tokenizer_load("/dev/zero", E), "not a regular file");
  REFUSED("tokenizer_fifo", !tokenizer_load(at("fifo"), E), "FIFO");
  sparse(at("tokenizer.json"), "{", (off_t)TOKENIZER_MAX_FILE + 1);
  REFUSED("tokenizer_over_cap", !tokenizer_load(at("tokenizer.json"), E), "more than 256 MiB");
  /* config.json */
  REFUSED("config_dev_zero", (config_load("/dev/zero", &c, E)), "not a regular file");
  REFUSED("config_fifo", (config_load(at("fifo"), &c, E)), "FIFO");
  sparse(at("config.json"), "{", (off_t)CONFIG_MAX_FILE + 1);
  REFUSED("config_over_cap", (config_load(at("config.json"), &c, E)), "more than 1 MiB");
  /* run descriptions */
  run_config_defaults(&rc);
  REFUSED("run_description_dev_zero", (run_config_load(&rc, "/dev/zero", E)), "not a regular file");
  REFUSED("run_description_fifo", (run_config_load(&rc, at("fifo"), E)), "FIFO");
  sparse(at("run.json"), "{", (off_t)RUN_CONFIG_MAX_FILE + 1);
  REFUSED("run_description_over_cap", (run_config_load(&rc, at("run.json"), E)), "more than 1 MiB");
  /* safetensors (mapped, so the cap is on the whole file) */
  REFUSED("safetensors_dev_zero", !st_open("/dev/zero", E), "not a regular file");
  REFUSED("safetensors_fifo", !st_open(at("fifo"), E), "FIFO");
  sparse(at("big.safetensors"), "\x02\0\0\0\0\0\0\0{}", (off_t)ST_MAX_FILE + 1);
  REFUSED("safetensors_over_cap", !st_open(at("big.safetensors"), E), "more than the 64 GiB");
  unlink(at("big.safetensors"));
  /* shards: a valid header on a file past the cap */
  int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  Err e = {0};
  check(shard_write(at("train-00000-samples-2.shard"), ids, 2, 4, 10, NULL, &e) == 0, "shard_written", "%s", e.msg);
  if (truncate(at("train-00000-samples-2.shard"), (off_t)SHARD_MAX_FILE + 1)) printf("# truncate: %s\n", strerror(errno));
  REFUSED("shard_over_cap", !shard_open(at("train-00000-samples-2.shard"), E), "more than the 4 GiB");
  unlink(at("train-00000-samples-2.shard"));
  REFUSED("shard_fifo", !shard_open(at("fifo-00000-samples-2.shard"), E), "FIFO");
  REFUSED("shard_writer_over_cap", (shard_write(at("big-00000-samples-1000000000.shard"), ids, 1000000000, 4, 10, NULL, E)),
          "more than a shard may hold");
  /* a shard set's manifest.json: a FIFO, a link to /dev/zero, one byte over */
  LoaderOptions lo = loader_default_options(1);
  Rng rng;
  rng_seed(&rng, 1);
  mkdir(at("m1"), 0755);
  mkfifo(at("m1/manifest.json"), 0600);
  REFUSED("manifest_fifo", !loader_open(at("m1"), &lo, &rng, E), "FIFO");
  mkdir(at("m2"), 0755);
  symlink("/dev/zero", at("m2/manifest.json"));
  REFUSED("manifest_dev_zero", !loader_open(at("m2"), &lo, &rng, E), "not a regular file");
  mkdir(at("m3"), 0755);
  sparse(at("m3/manifest.json"), "{", (off_t)PREPARE_MAX_MANIFEST + 1);
  REFUSED("manifest_over_cap", !loader_open(at("m3"), &lo, &rng, E), "more than 16 MiB");
  /* the tokenizer hash prepare records */
  char hash[64];
  REFUSED("hash_dev_zero", (prepare_file_hash("/dev/zero", hash, sizeof hash, E)), "not a regular file");
  REFUSED("hash_fifo", (prepare_file_hash(at("fifo"), hash, sizeof hash, E)), "FIFO");
  sparse(at("huge.json"), "{", (off_t)PREPARE_MAX_HASHED + 1);
  REFUSED("hash_over_cap", (prepare_file_hash(at("huge.json"), hash, sizeof hash, E)), "more than 1 GiB");
  /* fill-mask's JSON side files, read before anything else in the folder */
  mkdir(at("fm1"), 0755);
  mkfifo(at("fm1/tokenizer_config.json"), 0600);
  REFUSED("side_file_fifo", !fillmask_load_dir(at("fm1"), NULL, E), "FIFO");
  mkdir(at("fm2"), 0755);
  symlink("/dev/zero", at("fm2/special_tokens_map.json"));
  REFUSED("side_file_dev_zero", !fillmask_load_dir(at("fm2"), NULL, E), "not a regular file");
  mkdir(at("fm3"), 0755);
  sparse(at("fm3/tokenizer_config.json"), "{", (off_t)TOKENIZER_MAX_SIDE_FILE + 1);
  REFUSED("side_file_over_cap", !fillmask_load_dir(at("fm3"), NULL, E), "more than 1 MiB");
  /* corpus lines: the tokenizer trainer's reader and prepare's */
  UtWords *w = ut_words_new();
  REFUSED("corpus_dev_zero", (ut_words_add_file(w, "/dev/zero", 1, E)), "not a regular file");
  REFUSED("corpus_fifo", (ut_words_add_file(w, at("fifo"), 1, E)), "FIFO");
  sparse(at("oneline.txt"), "a", (off_t)UT_MAX_LINE + 1);
  REFUSED("corpus_line_over_cap", (ut_words_add_file(w, at("oneline.txt"), 1, E)), "a line of more than 67108864 bytes");
  ut_words_free(w);
  sparse(at("oneline.txt"), "a", (off_t)PREPARE_MAX_LINE + 1);
  FILE *f = fopen(at("oneline.txt"), "rb");
  PrepareOptions po = prepare_default_options("train", 4, 10);
  REFUSED("prepare_line_over_cap", (prepare_run(f, 0, at("never"), &po, NULL, NULL, NULL, E)),
          "a line of more than 67108864 bytes");
  fclose(f);
  unlink(at("oneline.txt"));
  check(access(at("never"), F_OK) != 0 && temporaries(root) == 0, "prepare_refusal_writes_nothing", "");
  REFUSED("prepare_input_fifo", !files_fopen_regular(at("fifo"), NULL, E), "FIFO");
}

/* The ids encoder of these tests: each blank-separated number. */
static int number_encode(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err) {
  (void)ctx; (void)err;
  int n = 0;
  for (size_t i = 0; i < len;) {
    while (i < len && text[i] == ' ') i++;
    if (i >= len) break;
    int v = 0;
    while (i < len && text[i] != ' ') v = v * 10 + (text[i++] - '0');
    if (n < cap) ids[n] = v;
    n++;
  }
  return n;
}

static int run_prepare(const char *text, const char *dir, int overwrite, Err *e) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  PrepareOptions o = prepare_default_options("train", 4, 10);
  o.shard_size = 30;
  o.overwrite = overwrite;
  int rc = prepare_run(f, 0, dir, &o, number_encode, NULL, NULL, e);
  fclose(f);
  return rc;
}

/* A folder's files and their bytes, as one string, to compare before and after. */
static char *listing(const char *dir) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cd '%s' && for f in $(ls -A | sort); do printf '%%s:' \"$f\"; cksum < \"$f\"; done", dir);
  FILE *p = popen(cmd, "r");
  char *out = calloc(1, 65536);
  if (p && out) { size_t n = fread(out, 1, 65535, p); out[n] = '\0'; }
  if (p) pclose(p);
  return out;
}

static void limit_fsize(rlim_t bytes) {
  struct rlimit rl;
  getrlimit(RLIMIT_FSIZE, &rl);
  rl.rlim_cur = bytes;
  setrlimit(RLIMIT_FSIZE, &rl);
}

/* Each writer fails mid-file past a file-size limit: the old file is intact, no temporary. */
static void test_writers(void) {
  Err e = {0};
  signal(SIGXFSZ, SIG_IGN);
  Tokenizer *tok = small_tokenizer();
  char *before, *after;
  mkdir(at("w"), 0755);
  /* tokenizer.json: the old one stays when the new cannot be written whole */
  put(at("w/tokenizer.json"), "old tokenizer");
  limit_fsize(100);
  int r = tokenizer_save(tok, at("w/tokenizer.json"), &e);
  limit_fsize(RLIM_INFINITY);
  check(r == -1 && strstr(e.msg, "File too large") && file_is(at("w/tokenizer.json"), "old tokenizer") &&
        temporaries(at("w")) == 0, "tokenizer_save_full_disk", "rc %d %s", r, e.msg);
  /* the three files of save_pretrained change together or not at all */
  put(at("w/tokenizer_config.json"), "old config");
  put(at("w/special_tokens_map.json"), "old map");
  before = listing(at("w"));
  limit_fsize(500);   /* tokenizer.json (over 500 bytes) fails, after nothing was renamed */
  r = tokenizer_save_pretrained(tok, 0, at("w"), &e);
  limit_fsize(RLIM_INFINITY);
  after = listing(at("w"));
  check(r == -1 && !strcmp(before, after) && temporaries(at("w")) == 0, "save_pretrained_full_disk", "rc %d %s: %s / %s", r, e.msg,
        before, after);
  free(after);
  r = tokenizer_save_pretrained(tok, 0, at("w"), &e);
  Tokenizer *back = tokenizer_load(at("w/tokenizer.json"), &e);
  after = slurp(at("w/tokenizer_config.json"));
  check(r == 0 && back && after && strstr(after, "AlbertTokenizer") && temporaries(at("w")) == 0, "save_pretrained_replaces", "%s", e.msg);
  free(after); free(before);
  tokenizer_free(back);
  /* config.json */
  ModelConfig c;
  config_preset("tiny", &c, NULL);
  put(at("w/config.json"), "old config.json");
  limit_fsize(50);
  r = config_save(&c, at("w/config.json"), &e);
  limit_fsize(RLIM_INFINITY);
  check(r == -1 && file_is(at("w/config.json"), "old config.json") && temporaries(at("w")) == 0,
        "config_save_full_disk", "rc %d %s", r, e.msg);
  check(config_save(&c, at("w/config.json"), &e) == 0 && config_load(at("w/config.json"), &c, &e) == 0, "config_save_replaces", "%s", e.msg);
  /* safetensors */
  float data[256] = {0};
  StWriteTensor t = {"w", ST_F32, 1, {256}, data};
  put(at("w/model.safetensors"), "old weights");
  limit_fsize(512);
  r = st_write(at("w/model.safetensors"), &t, 1, NULL, 0, &e);
  limit_fsize(RLIM_INFINITY);
  check(r == -1 && file_is(at("w/model.safetensors"), "old weights") && temporaries(at("w")) == 0,
        "st_write_full_disk", "rc %d %s", r, e.msg);
  /* a shard */
  int32_t ids[400];
  for (int i = 0; i < 400; i++) ids[i] = i % 10;
  put(at("w/train-00000-samples-100.shard"), "old shard");
  limit_fsize(300);
  r = shard_write(at("w/train-00000-samples-100.shard"), ids, 100, 4, 10, NULL, &e);
  limit_fsize(RLIM_INFINITY);
  check(r == -1 && file_is(at("w/train-00000-samples-100.shard"), "old shard") && temporaries(at("w")) == 0,
        "shard_write_full_disk", "rc %d %s", r, e.msg);
  tokenizer_free(tok);

  /* A prepared set appears whole or not at all: the first run makes it; with overwrite, a
  ** run that fails mid-way (a shard past the limit) leaves the old set and no temporary. */
  char text[4000] = "";
  for (int i = 0; i < 300; i++) strcat(text, i % 2 ? "1 2 3 4 5\n" : "6 7 8\n");
  r = run_prepare(text, at("set/ds"), 0, &e);
  before = listing(at("set/ds"));
  check(r == 0 && strstr(before, "manifest.json") && temporaries(at("set")) == 0, "prepare_set_made", "%s", e.msg);
  limit_fsize(60);   /* the 64-byte header alone is over it */
  r = run_prepare(text, at("set/ds"), 1, &e);
  limit_fsize(RLIM_INFINITY);
  after = listing(at("set/ds"));
  check(r == -1 && !strcmp(before, after) && temporaries(at("set")) == 0, "prepare_full_disk_keeps_set", "rc %d %s", r, e.msg);
  free(after);
  /* A set into a missing folder: none appears when the run fails. */
  limit_fsize(60);
  r = run_prepare(text, at("set/new"), 0, &e);
  limit_fsize(RLIM_INFINITY);
  check(r == -1 && access(at("set/new"), F_OK) != 0 && temporaries(at("set")) == 0, "prepare_full_disk_no_folder", "rc %d %s", r, e.msg);
  /* ... nor do the parents it made for it. */
  limit_fsize(60);
  r = run_prepare(text, at("set/p1/p2/new"), 0, &e);
  limit_fsize(RLIM_INFINITY);
  check(r == -1 && access(at("set/p1"), F_OK) != 0 && temporaries(at("set")) == 0, "prepare_full_disk_no_parents", "rc %d %s", r, e.msg);
  /* Stopped (a signal's flag) before the end: nothing written. */
  volatile sig_atomic_t stop = 1;
  FILE *f = fmemopen(text, strlen(text), "r");
  PrepareOptions o = prepare_default_options("train", 4, 10);
  o.stop = &stop;
  r = prepare_run(f, 0, at("set/stopped"), &o, number_encode, NULL, NULL, &e);
  fclose(f);
  check(r == -1 && strstr(e.msg, "stopped") && access(at("set/stopped"), F_OK) != 0 && temporaries(at("set")) == 0,
        "prepare_stop_writes_nothing", "rc %d %s", r, e.msg);
  /* Overwrite that succeeds replaces the set; one into an empty folder fills it. */
  strcat(text, "9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9\n");
  r = run_prepare(text, at("set/ds"), 1, &e);
  after = listing(at("set/ds"));
  check(r == 0 && strcmp(before, after) && temporaries(at("set")) == 0, "prepare_overwrite_replaces", "%s", e.msg);
  free(after); free(before);
  mkdir(at("set/empty"), 0700);
  r = run_prepare(text, at("set/empty"), 0, &e);
  after = listing(at("set/empty"));
  check(r == 0 && strstr(after, "manifest.json") && temporaries(at("set")) == 0, "prepare_into_empty_folder", "%s", e.msg);
  free(after);
  /* A folder holding other files keeps them; the set is moved in, the manifest last. */
  mkdir(at("set/other"), 0755);
  put(at("set/other/README"), "mine");
  r = run_prepare(text, at("set/other"), 0, &e);
  after = listing(at("set/other"));
  check(r == 0 && strstr(after, "README") && strstr(after, "manifest.json") && strstr(after, "train-00000") &&
        temporaries(at("set")) == 0 && temporaries(at("set/other")) == 0, "prepare_into_folder_with_files", "%s: %s", e.msg, after);
  free(after);
}

static int is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p that a failed writer can take back: the folders made are recorded, and removed
** innermost first, only those, and only while empty; one that fails part-way removes
** what it made itself. */
static void test_make_dirs(void) {
  Err e = {0};
  FilesMadeDirs m;
  mkdir(at("md"), 0755);
  int r = files_make_dirs_undoable(at("md/a/b//c/"), &m, &e);
  check(r == 0 && m.n == 3 && is_dir(at("md/a/b/c")), "make_dirs_records_levels", "rc %d, %d made: %s", r, m.n, e.msg);
  files_made_dirs_remove(&m);
  check(access(at("md/a"), F_OK) != 0 && is_dir(at("md")) && !m.path && !m.n, "make_dirs_remove_takes_all_back", "md/a is %s",
        access(at("md/a"), F_OK) ? "gone" : "there");
  /* md/old was there: the path goes through it, and it stays. */
  mkdir(at("md/old"), 0755);
  r = files_make_dirs_undoable(at("md/new/../old/x"), &m, &e);
  check(r == 0 && m.n == 2 && is_dir(at("md/old/x")), "make_dirs_through_existing", "rc %d, %d made: %s", r, m.n, e.msg);
  files_made_dirs_remove(&m);
  check(is_dir(at("md/old")) && access(at("md/old/x"), F_OK) != 0 && access(at("md/new"), F_OK) != 0,
        "make_dirs_remove_keeps_existing", "old %d, old/x %d, new %d", is_dir(at("md/old")), is_dir(at("md/old/x")), is_dir(at("md/new")));
  /* A level that holds something since stays, and so do those around it. */
  r = files_make_dirs_undoable(at("md/p/q/r"), &m, &e);
  put(at("md/p/q/file"), "x");
  files_made_dirs_remove(&m);
  check(r == 0 && access(at("md/p/q/r"), F_OK) != 0 && file_is(at("md/p/q/file"), "x"), "make_dirs_remove_keeps_filled",
        "rc %d %s", r, e.msg);
  /* Kept: the folders stay, the record is freed. */
  r = files_make_dirs_undoable(at("md/k/l"), &m, &e);
  files_made_dirs_keep(&m);
  check(r == 0 && is_dir(at("md/k/l")) && !m.path, "make_dirs_keep", "rc %d %s", r, e.msg);
  /* Failing part-way (a name over NAME_MAX under a folder it made): nothing made stays. */
  char longname[600] = "md/f/";
  memset(longname + 5, 'x', 300);
  strcpy(longname + 305, "/z");
  r = files_make_dirs_undoable(at(longname), &m, &e);
  check(r == -1 && strstr(e.msg, "cannot create directory") && access(at("md/f"), F_OK) != 0 && !m.n,
        "make_dirs_failure_takes_back", "rc %d %s", r, e.msg);
  r = files_make_dirs(at(longname), &e);
  check(r == -1 && access(at("md/f"), F_OK) != 0, "make_dirs_plain_failure_takes_back", "rc %d %s", r, e.msg);
}

/* engine/core/buf: appends across growth keep every byte and the NUL; free empties. */
static void test_buf(void) {
  Buf b = {0};
  buf_put(&b, "", 0);
  check(b.p && b.len == 0 && b.p[0] == '\0' && !b.oom, "buf_empty_put_gives_text", "len %zu", b.len);
  char want[2000] = "";
  size_t n = 0;
  for (int i = 0; i < 100; i++) {
    buf_printf(&b, "%d,", i);
    n += (size_t)snprintf(want + n, sizeof want - n, "%d,", i);
    buf_puts(&b, "ab");
    buf_put(&b, "xyz", 1);
    n += (size_t)snprintf(want + n, sizeof want - n, "abx");
  }
  check(!b.oom && b.len == n && b.len == strlen(b.p) && !strcmp(b.p, want) && b.cap > b.len, "buf_grows_keeping_text",
        "len %zu of %zu, cap %zu", b.len, n, b.cap);
  buf_free(&b);
  check(!b.p && !b.len && !b.cap && !b.oom, "buf_free_empties", "len %zu cap %zu", b.len, b.cap);
}

int main(void) {
  if (fixture_tmpdir(root, sizeof root, "test_files")) { check(0, "mkdtemp", "%s", root); return check_exit(); }
  if (mkfifo(at("fifo"), 0600) || mkfifo(at("fifo-00000-samples-2.shard"), 0600)) { check(0, "mkfifo", "%s", strerror(errno)); return check_exit(); }
  test_buf();
  test_helper();
  test_readers();
  test_writers();
  test_make_dirs();
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("# could not remove %s\n", root);
  return check_exit();
}
