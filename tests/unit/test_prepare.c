/* prepare: lines -> [CLS] ids [SEP] -> chunks -> shards + manifest, checked against a direct
** recomputation in this file (encode every kept line, concatenate, cut), for the default
** stream, blank-line keeping, per-group remainders (the seed's 1000-line batches), shard
** splitting, refusals and clean-up after failure. The encoder is a toy word hasher: the
** tokenizer itself is tested by its own module. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/loader.h"
#include "engine/data/prepare.h"
#include "engine/data/shards.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

enum { V = 3000, CLS = 0, SEP = 2 };
static char root[512];

/* [CLS] one id per space-separated word [SEP]; "FAIL" fails; "BIG" gives an id >= V. */
static int toy_encode(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err) {
  int *calls = ctx;
  if (calls) (*calls)++;
  int n = 0;
  if (n < cap) ids[n] = CLS;
  n++;
  size_t i = 0;
  while (i < len) {
    while (i < len && text[i] == ' ') i++;
    if (i >= len) break;
    size_t j = i;
    uint32_t h = 2166136261u;
    while (j < len && text[j] != ' ') { h = (h ^ (unsigned char)text[j]) * 16777619u; j++; }
    if (j - i == 4 && !memcmp(text + i, "FAIL", 4)) return err_set(err, "toy encoder failure");
    int32_t id = (j - i == 3 && !memcmp(text + i, "BIG", 3)) ? V + 5 : 5 + (int32_t)(h % (V - 5));
    if (n < cap) ids[n] = id;
    n++;
    i = j;
  }
  if (n < cap) ids[n] = SEP;
  n++;
  return n;
}

/* Reference: the expected chunks of text under (keep_empty, group). */
static int32_t *expected(const char *text, int L, int keep_empty, int group, long *n_samples) {
  size_t cap = strlen(text) * 2 + 64, n = 0;
  int32_t *all = malloc(cap * sizeof *all), tmp[8192];
  const char *p = text;
  long line = 0;
  size_t kept_at_group_start = 0;
  (void)kept_at_group_start;
  while (*p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    size_t l2 = len;
    if (l2 && p[l2 - 1] == '\r') l2--;
    int blank = 1;
    for (size_t i = 0; i < l2; i++) blank &= p[i] == ' ' || p[i] == '\t';
    if (keep_empty || !blank) {
      int k = toy_encode(NULL, p, l2, tmp, 8192, NULL);
      memcpy(all + n, tmp, (size_t)k * sizeof *tmp);
      n += (size_t)k;
    }
    line++;
    if (group && line % group == 0) n -= n % (size_t)L;
    p += len + (nl ? 1 : 0);
  }
  n -= n % (size_t)L;
  *n_samples = (long)(n / (size_t)L);
  return all;
}

/* A WikiText-like text: headings, sentences, blank lines, a CRLF line. */
static char *make_text(int lines, unsigned seed) {
  char *t = malloc((size_t)lines * 200 + 1), *q = t;
  Rng r;
  rng_seed(&r, seed);
  for (int i = 0; i < lines; i++) {
    int kind = (int)rng_below(&r, 6);
    if (kind == 0) q += sprintf(q, " \n");
    else if (kind == 1) q += sprintf(q, "\n");
    else if (kind == 2) q += sprintf(q, " = Heading %d = \r\n", i);
    else {
      int words = 3 + (int)rng_below(&r, 30);
      for (int w = 0; w < words; w++) q += sprintf(q, " w%u", rng_below(&r, 400));
      q += sprintf(q, " \n");
    }
  }
  *q = 0;
  return t;
}

/* Reads the set back in shard order through the loader (no shuffle, batch 1). */
static int32_t *read_back(const char *dir, int L, long *n_samples, Err *e) {
  LoaderOptions lo = loader_default_options(1);
  lo.shuffle = 0;
  Rng r; rng_seed(&r, 1);
  Loader *l = loader_open(dir, &lo, &r, e);
  if (!l) return NULL;
  *n_samples = (long)loader_n_samples(l);
  int32_t *out = malloc(sizeof *out * (size_t)(*n_samples) * (size_t)L + 1);
  for (long i = 0; i < *n_samples; i++) loader_next(l, out + i * L, NULL);
  loader_close(l);
  return out;
}

static int run_prepare(const char *text, const char *dir, PrepareOptions *o, PrepareStats *st, Err *e) {
  FILE *f = fmemopen((void *)text, strlen(text), "r");
  int rc = prepare_run(f, strlen(text), dir, o, toy_encode, NULL, st, e);
  fclose(f);
  return rc;
}

static void case_matches(const char *label, const char *text, int L, int shard_size, int keep_empty, int group) {
  char dir[768], name[200];
  snprintf(dir, sizeof dir, "%s/%s/out", root, label);  /* two levels: prepare makes both */
  PrepareOptions o = prepare_default_options("train", L, V);
  o.shard_size = shard_size; o.keep_empty = keep_empty; o.group_lines = group;
  o.tokenizer_hash = "fnv1a64:0123456789abcdef"; o.source = "toy.txt";
  PrepareStats st;
  Err e = {0};
  int rc = run_prepare(text, dir, &o, &st, &e);
  snprintf(name, sizeof name, "%s_runs", label);
  check(rc == 0, name, "%s", e.msg);
  if (rc) return;
  long n_exp, n_got = 0;
  int32_t *exp_ids = expected(text, L, keep_empty, group, &n_exp);
  int32_t *got = read_back(dir, L, &n_got, &e);
  snprintf(name, sizeof name, "%s_ids_match_reference", label);
  check(got && n_got == n_exp && !memcmp(got, exp_ids, sizeof *got * (size_t)n_exp * (size_t)L), name,
        "%ld samples vs %ld expected%s%s", n_got, n_exp, got ? "" : ": ", got ? "" : e.msg);

  /* Shard names and counts, and the manifest. */
  char path[1024];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  json_t *m = json_load_file(path, 0, NULL);
  json_t *shards = json_object_get(m, "shards");
  long want_shards = (n_exp + shard_size - 1) / shard_size;
  int ok = m && (long)json_array_size(shards) == want_shards && st.shards == want_shards && st.samples == (uint64_t)n_exp &&
           json_integer_value(json_object_get(m, "total_samples")) == n_exp &&
           json_integer_value(json_object_get(m, "seq_len")) == L && json_integer_value(json_object_get(m, "vocab_size")) == V &&
           !strcmp(json_string_value(json_object_get(m, "tokenizer_hash")), o.tokenizer_hash) &&
           !strcmp(json_string_value(json_object_get(m, "split")), "train");
  for (long i = 0; ok && i < want_shards; i++) {
    json_t *s = json_array_get(shards, (size_t)i);
    long cnt = i < want_shards - 1 ? shard_size : n_exp - (want_shards - 1) * shard_size;
    char want[256];
    snprintf(want, sizeof want, "train-%05ld-samples-%ld.shard", i, cnt);
    ok &= !strcmp(json_string_value(json_object_get(s, "file")), want) && json_integer_value(json_object_get(s, "samples")) == cnt;
    snprintf(path, sizeof path, "%s/%s", dir, want);
    ShardInfo h;
    char hex[17];
    ok &= shard_read_header(path, &h, NULL) == 0;
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h.checksum);
    ok &= !strcmp(json_string_value(json_object_get(s, "checksum")), hex);
  }
  snprintf(name, sizeof name, "%s_shards_and_manifest", label);
  check(ok, name, "manifest or shard names/counts differ (%ld shards expected)", want_shards);
  /* tokens = kept lines' ids; tokens_dropped = tokens - samples*L. */
  snprintf(name, sizeof name, "%s_token_accounting", label);
  check(st.tokens - st.tokens_dropped == (uint64_t)n_exp * (uint64_t)L && (group || st.tokens_dropped < (uint64_t)L), name,
        "tokens %llu dropped %llu samples %ld", (unsigned long long)st.tokens, (unsigned long long)st.tokens_dropped, n_exp);
  json_decref(m);
  free(exp_ids);
  free(got);
}

static int count_files(const char *dir) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "ls -A '%s' 2>/dev/null | wc -l", dir);
  FILE *p = popen(cmd, "r");
  int n = -1;
  if (p) { if (fscanf(p, "%d", &n) != 1) n = -1; pclose(p); }
  return n;
}

int main(void) {
  if (fixture_tmpdir(root, sizeof root, "test_prepare")) { check(0, "mkdtemp", "%s", root); return check_exit(); }

  char *text = make_text(3000, 9);
  case_matches("stream", text, 32, 50, 0, 0);
  case_matches("keep_empty", text, 32, 50, 1, 0);
  case_matches("group1000", text, 32, 50, 0, 1000);
  case_matches("group7", text, 16, 13, 0, 7);
  case_matches("one_shard", text, 64, 100000, 0, 0);

  /* Blank lines skipped: counted in stats; keep_empty gives more tokens. */
  PrepareOptions o = prepare_default_options("valid", 32, V);
  o.shard_size = 100;
  PrepareStats st;
  Err e = {0};
  char dir[768];
  snprintf(dir, sizeof dir, "%s/again", root);
  int rc = run_prepare(text, dir, &o, &st, &e);
  long blanks = 0;
  for (const char *p = text; *p; ) {
    const char *nl = strchr(p, '\n');
    int blank = 1;
    for (const char *q = p; q < nl; q++) blank &= *q == ' ';
    blanks += blank;
    p = nl + 1;
  }
  check(rc == 0 && st.lines == 3000 && (long)st.lines_skipped == blanks, "skips_blank_lines", "lines %llu skipped %llu, blanks %ld: %s",
        (unsigned long long)st.lines, (unsigned long long)st.lines_skipped, blanks, e.msg);

  /* A second run into the same directory is refused; overwrite replaces the set, stale shards included. */
  rc = run_prepare(text, dir, &o, &st, &e);
  check(rc == -1 && strstr(e.msg, "already exists"), "refuses_existing_set", "rc %d '%s'", rc, e.msg);
  int before = count_files(dir);
  o.overwrite = 1; o.seq_len = 128;
  rc = run_prepare(text, dir, &o, &st, &e);
  int after = count_files(dir);
  check(rc == 0 && after == st.shards + 1 && before > after, "overwrite_replaces_set", "rc %d, %d files before, %d after, %d shards: %s",
        rc, before, after, st.shards, e.msg);

  /* Too little text for one chunk: refused, nothing written. */
  snprintf(dir, sizeof dir, "%s/short", root);
  o = prepare_default_options("train", 128, V);
  rc = run_prepare(" a b c \n\n d e \n", dir, &o, &st, &e);
  check(rc == -1 && strstr(e.msg, "no full chunk") && count_files(dir) == 0, "refuses_too_short", "rc %d '%s'", rc, e.msg);

  /* An encoder failure after shards were written removes them and writes no manifest. */
  char *bad = malloc(strlen(text) + 64);
  sprintf(bad, "%s FAIL here\n", text);
  snprintf(dir, sizeof dir, "%s/fail", root);
  o = prepare_default_options("train", 16, V);
  o.shard_size = 10;
  rc = run_prepare(bad, dir, &o, &st, &e);
  check(rc == -1 && strstr(e.msg, "toy encoder failure") && strstr(e.msg, "line 3001: encode") && count_files(dir) == 0,
        "encoder_error_cleans_up", "rc %d '%s', %d files left", rc, e.msg, count_files(dir));
  sprintf(bad, " a b \n c BIG d \n");
  rc = run_prepare(bad, dir, &o, &st, &e);
  check(rc == -1 && strstr(e.msg, "line 2") && strstr(e.msg, "outside the vocabulary"), "refuses_id_out_of_vocab", "'%s'", e.msg);

  /* A line longer than the encoder's first buffer (4096 ids). */
  char *longline = malloc(6000 * 6 + 8), *q = longline;
  for (int i = 0; i < 6000; i++) q += sprintf(q, " x%d", i % 500);
  sprintf(q, " \n");
  snprintf(dir, sizeof dir, "%s/long", root);
  o = prepare_default_options("train", 100, V);
  rc = run_prepare(longline, dir, &o, &st, &e);
  long n_exp, n_got;
  int32_t *want = expected(longline, 100, 0, 0, &n_exp), *got = rc == 0 ? read_back(dir, 100, &n_got, &e) : NULL;
  check(rc == 0 && got && n_got == n_exp && n_exp == 60 && !memcmp(got, want, sizeof *got * 6000), "long_line",
        "rc %d, %ld samples vs %ld: %s", rc, got ? n_got : -1, n_exp, e.msg);
  free(want); free(got); free(longline);

  /* The tokenizer hash: FNV-1a 64 of the file's bytes ("foobar" is a published vector). */
  {
    char hp[768], hash[32];
    snprintf(hp, sizeof hp, "%s/hashme", root);
    FILE *hf = fopen(hp, "w");
    fputs("foobar", hf);
    fclose(hf);
    int hr = prepare_file_hash(hp, hash, sizeof hash, &e);
    check(hr == 0 && !strcmp(hash, "fnv1a64:85944171f73967e8"), "file_hash", "'%s' %s", hash, e.msg);
    check(prepare_file_hash("/nonexistent/tok.json", hash, sizeof hash, &e) == -1 && strstr(e.msg, "/nonexistent/tok.json"),
          "file_hash_missing", "'%s'", e.msg);
  }

  /* Option refusals. */
  o = prepare_default_options("train", 0, V);
  check(run_prepare(text, dir, &o, &st, &e) == -1 && strstr(e.msg, "sequence length"), "refuses_seq_len_0", "'%s'", e.msg);
  o = prepare_default_options("a/b", 8, V);
  check(run_prepare(text, dir, &o, &st, &e) == -1 && strstr(e.msg, "split"), "refuses_bad_split", "'%s'", e.msg);
  o = prepare_default_options("train", 8, V); o.shard_size = 0;
  check(run_prepare(text, dir, &o, &st, &e) == -1 && strstr(e.msg, "shard size"), "refuses_shard_size_0", "'%s'", e.msg);

  free(bad);
  free(text);
  return check_exit();
}
