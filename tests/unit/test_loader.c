/* Loader: order (sequential and shuffled), coverage per epoch, uniformity of the shuffle,
** padding and drop-last, data-parallel ranks, exact state restore, and refusal of
** inconsistent sets. Each sample's first token is its global index, so order is visible. */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/data/loader.h"
#include "engine/data/shards.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

enum { V = 5000, L = 8 };
static char root[512];

/* Writes split shards holding samples [first, first+n) of the pattern below. */
static int put_shard(const char *dir, const char *split, int index, int first, int n, uint32_t seq, uint32_t vocab) {
  char name[256], path[1024];
  Err e = {0};
  shard_name(name, sizeof name, split, index, (uint64_t)n, &e);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int32_t *ids = malloc(sizeof *ids * (size_t)n * seq + 1);
  for (int s = 0; s < n; s++)
    for (uint32_t t = 0; t < seq; t++) ids[(size_t)s * seq + t] = t == 0 ? first + s : (int32_t)((first + s) * 7 + t) % (int32_t)vocab;
  int rc = shard_write(path, ids, (uint64_t)n, seq, vocab, NULL, &e);
  if (rc) printf("# put_shard: %s\n", e.msg);
  free(ids);
  return rc;
}

static char *mkdir_in(const char *name) {
  static char bufs[16][768];
  static int k;
  char *d = bufs[k++ % 16];
  snprintf(d, 768, "%s/%s", root, name);
  mkdir(d, 0777);
  return d;
}

static void write_text(const char *dir, const char *file, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  FILE *f = fopen(path, "w");
  fputs(text, f);
  fclose(f);
}

/* A manifest's entry for dir/file as prepare writes it: the shard's header checksum
** (zeros when there is no such file). Eight rotating buffers: a manifest's worth. */
static const char *entry(const char *dir, const char *file, int samples) {
  static char bufs[8][512];
  static int k;
  char *b = bufs[k++ % 8], path[1024];
  ShardInfo h = {0};
  Err e = {0};
  snprintf(path, sizeof path, "%s/%s", dir, file);
  if (shard_read_header(path, &h, &e) != 0) h.checksum = 0;
  snprintf(b, 512, "{\"file\": \"%s\", \"samples\": %d, \"checksum\": \"%016" PRIx64 "\"}", file, samples, h.checksum);
  return b;
}

/* The 103-sample set: shards of 40, 40, 23. */
static const char *standard_set(void) {
  char *d = mkdir_in("std");
  put_shard(d, "train", 0, 0, 40, L, V);
  put_shard(d, "train", 1, 40, 40, L, V);
  put_shard(d, "train", 2, 80, 23, L, V);
  return d;
}

static Loader *open_with(const char *path, int batch, int shuffle, int drop_last, int rank, int world, uint64_t seed, Err *e) {
  LoaderOptions o = loader_default_options(batch);
  o.shuffle = shuffle; o.drop_last = drop_last; o.rank = rank; o.world = world; o.pad_id = 1;
  Rng r;
  rng_seed(&r, seed);
  return loader_open(path, &o, &r, e);
}

/* Each row's pattern is intact (the whole sample was copied, not a mix). */
static int rows_intact(const int32_t *ids, int rows) {
  int ok = 1;
  for (int r = 0; r < rows; r++)
    for (int t = 1; t < L; t++) ok &= ids[r * L + t] == (ids[r * L] * 7 + t) % V;
  return ok;
}

static void refused(const char *name, const char *path, const char *want, int batch) {
  Err e = {0};
  Loader *l = open_with(path, batch, 1, 1, 0, 1, 1, &e);
  check(!l && strstr(e.msg, want), name, "open gave %p, message '%s' (want '%s')", (void *)l, e.msg, want);
  loader_close(l);
}

int main(void) {
  if (fixture_tmpdir(root, sizeof root, "test_loader")) { check(0, "mkdtemp", "%s", root); return check_exit(); }
  const char *set = standard_set();
  Err e = {0};
  int32_t ids[64 * L], attn[64 * L];

  /* Sequential, drop-last: 10 batches of 10 per epoch, samples 0..99 in order, then epoch 2 restarts. */
  Loader *l = open_with(set, 10, 0, 1, 0, 1, 1, &e);
  check(l && loader_n_samples(l) == 103 && loader_n_shards(l) == 3 && loader_seq_len(l) == L && loader_vocab_size(l) == V &&
        loader_batches_per_epoch(l) == 10, "open_dir_glob", "%s", l ? "wrong counts" : e.msg);
  if (!l) return check_exit();
  int ok = 1;
  for (int k = 0; k < 12; k++) {
    int real = loader_next(l, ids, attn);
    ok &= real == 10 && rows_intact(ids, 10);
    for (int r = 0; r < 10; r++) ok &= ids[r * L] == (k % 10) * 10 + r;
    for (int i = 0; i < 10 * L; i++) ok &= attn[i] == 1;
  }
  LoaderState st;
  loader_get_state(l, &st);
  check(ok && st.epoch == 1 && st.batch == 2, "sequential_drop_last", "order, rows or state (epoch %llu batch %llu) wrong",
        (unsigned long long)st.epoch, (unsigned long long)st.batch);
  loader_close(l);

  /* Padding: 11 batches, the last with 3 real rows, pad rows of id 1 with attention 0. */
  l = open_with(set, 10, 0, 0, 0, 1, 1, &e);
  ok = l && loader_batches_per_epoch(l) == 11;
  int real = 0;
  for (int k = 0; l && k < 11; k++) real = loader_next(l, ids, attn);
  ok &= real == 3 && ids[0] == 100 && ids[2 * L] == 102;
  for (int i = 3 * L; i < 10 * L; i++) ok &= ids[i] == 1 && attn[i] == 0;
  for (int i = 0; i < 3 * L; i++) ok &= attn[i] == 1;
  check(ok, "pad_last_batch", "padded batch wrong (real %d)", real);
  loader_close(l);

  /* Shuffled: each epoch visits distinct samples, epochs differ, the seed decides. */
  Loader *a = open_with(set, 10, 1, 1, 0, 1, 42, &e), *b = open_with(set, 10, 1, 1, 0, 1, 42, &e), *c = open_with(set, 10, 1, 1, 0, 1, 43, &e);
  int epochs_distinct = 1, same_seed = 1, other_seed_differs = 0, epochs_differ = 0, intact = 1;
  int32_t prev[100], cur[100], ib[64 * L];
  for (int ep = 0; ep < 5; ep++) {
    unsigned char seen[103] = {0};
    for (int k = 0; k < 10; k++) {
      loader_next(a, ids, NULL);
      loader_next(b, ib, NULL);
      same_seed &= !memcmp(ids, ib, sizeof *ids * 10 * L);
      intact &= rows_intact(ids, 10);
      for (int r = 0; r < 10; r++) {
        int g = ids[r * L];
        if (g < 0 || g >= 103 || seen[g]++) epochs_distinct = 0;
        cur[k * 10 + r] = g;
      }
      loader_next(c, ib, NULL);
      other_seed_differs |= memcmp(ids, ib, sizeof *ids * 10 * L) != 0;
    }
    if (ep > 0) epochs_differ |= memcmp(prev, cur, sizeof cur) != 0;
    memcpy(prev, cur, sizeof cur);
  }
  check(epochs_distinct && intact, "shuffle_epoch_is_a_permutation", "a sample repeated within an epoch or a row was mixed");
  check(same_seed, "shuffle_same_seed_same_order", "two loaders with seed 42 differ");
  check(other_seed_differs, "shuffle_other_seed_other_order", "seeds 42 and 43 agree");
  check(epochs_differ, "shuffle_new_order_each_epoch", "every epoch had the same order");
  loader_close(b); loader_close(c);

  /* Uniformity: which sample comes first in an epoch, over many epochs (103 cells, 102 dof;
  ** mean 102, sd 14.3: the bound 190 is 6 sd). */
  {
    int epochs = getenv("MASKD_ASAN") ? 5000 : 30000;
    long first[103] = {0};
    LoaderState s0;
    loader_get_state(a, &s0);
    for (int ep = 0; ep < epochs; ep++) {
      LoaderState s = s0;
      s.epoch = (uint64_t)ep + 1000; s.batch = 0;
      loader_set_state(a, &s, NULL);
      loader_next(a, ids, NULL);
      first[ids[0]]++;
    }
    double chi2 = 0, ex = epochs / 103.0;
    for (int i = 0; i < 103; i++) chi2 += (first[i] - ex) * (first[i] - ex) / ex;
    check(chi2 < 190, "shuffle_uniform_first_sample", "chi2 %.1f over 103 cells", chi2);
  }
  loader_close(a);

  /* Exact restore: stop after k batches, reopen with another seed, restore, continue: the same
  ** batches as never stopping (k crossing and landing on epoch boundaries). */
  {
    const int total = 37, B = 7;  /* 103 / 7 = 14 batches per epoch */
    int32_t *ref = malloc(sizeof *ref * total * B * L), *cont = malloc(sizeof *cont * B * L);
    Loader *u = open_with(set, B, 1, 1, 0, 1, 9, &e);
    for (int i = 0; i < total; i++) loader_next(u, ref + i * B * L, NULL);
    loader_close(u);
    int ks[] = {0, 1, 13, 14, 15, 28, 36};
    int all = 1;
    for (size_t q = 0; q < sizeof ks / sizeof *ks; q++) {
      int k = ks[q];
      Loader *p = open_with(set, B, 1, 1, 0, 1, 9, &e);
      for (int i = 0; i < k; i++) loader_next(p, cont, NULL);
      LoaderState st0, saved;
      uint64_t words[LOADER_STATE_WORDS];
      loader_get_state(p, &st0);
      loader_state_pack(&st0, words);  /* through the checkpoint form */
      memset(&saved, 0xab, sizeof saved);
      loader_state_unpack(words, &saved);
      loader_close(p);
      Loader *r2 = open_with(set, B, 1, 1, 0, 1, 12345, &e);  /* the state carries the seed */
      int rc = loader_set_state(r2, &saved, &e);
      int same = rc == 0;
      for (int i = k; i < total; i++) {
        loader_next(r2, cont, NULL);
        same &= !memcmp(cont, ref + i * B * L, sizeof *cont * B * L);
      }
      if (!same) printf("# restore after %d batches diverged\n", k);
      all &= same;
      loader_close(r2);
    }
    check(all, "exact_state_restore", "a restored loader diverged from the uninterrupted one");
    free(ref); free(cont);
    Loader *p = open_with(set, B, 1, 1, 0, 1, 9, &e);
    LoaderState bad;
    loader_get_state(p, &bad);
    bad.batch = 15;
    check(loader_set_state(p, &bad, &e) == -1 && strstr(e.msg, "past"), "restore_refuses_bad_batch", "'%s'", e.msg);
    loader_close(p);
  }

  /* Ranks: rank r of 2 with batch 5 gets rows [5r, 5r+5) of the single-rank batch of 10. */
  {
    Loader *one = open_with(set, 10, 1, 1, 0, 1, 5, &e), *r0 = open_with(set, 5, 1, 1, 0, 2, 5, &e), *r1 = open_with(set, 5, 1, 1, 1, 2, 5, &e);
    int same = one && r0 && r1 && loader_batches_per_epoch(r0) == 10 && loader_batches_per_epoch(r1) == 10;
    int32_t x0[5 * L], x1[5 * L];
    for (int k = 0; same && k < 25; k++) {
      loader_next(one, ids, NULL);
      loader_next(r0, x0, NULL);
      loader_next(r1, x1, NULL);
      same &= !memcmp(x0, ids, sizeof x0) && !memcmp(x1, ids + 5 * L, sizeof x1);
    }
    check(same, "data_parallel_ranks", "rank batches are not the slices of the global batch");
    loader_close(one); loader_close(r0); loader_close(r1);
  }

  /* Manifest: listed shards only, counts checked, tokenizer hash exposed. */
  {
    char *d = mkdir_in("man");
    put_shard(d, "valid", 0, 0, 30, L, V);
    put_shard(d, "valid", 1, 30, 12, L, V);
    put_shard(d, "other", 0, 0, 5, L, V);  /* not listed: ignored */
    char text[2048];
    snprintf(text, sizeof text,
             "{\"format\": \"maskd-shards\", \"version\": 1, \"seq_len\": 8, \"vocab_size\": 5000, \"total_samples\": 42,"
             " \"tokenizer_hash\": \"fnv1a64:abc\", \"shards\": [%s, %s]}",
             entry(d, "valid-00000-samples-30.shard", 30), entry(d, "valid-00001-samples-12.shard", 12));
    write_text(d, "manifest.json", text);
    Loader *m = open_with(d, 4, 0, 1, 0, 1, 1, &e);
    check(m && loader_n_samples(m) == 42 && loader_n_shards(m) == 2 && !strcmp(loader_tokenizer_hash(m), "fnv1a64:abc"),
          "open_manifest_dir", "%s", m ? "wrong counts or hash" : e.msg);
    loader_close(m);
    char mp[1024];
    snprintf(mp, sizeof mp, "%s/manifest.json", d);
    m = open_with(mp, 4, 0, 1, 0, 1, 1, &e);
    check(m && loader_n_samples(m) == 42, "open_manifest_file", "%s", e.msg);
    loader_close(m);
    snprintf(mp, sizeof mp, "%s/valid-00001-samples-12.shard", d);
    m = open_with(mp, 4, 0, 1, 0, 1, 1, &e);
    check(m && loader_n_samples(m) == 12 && !strcmp(loader_tokenizer_hash(m), ""), "open_single_shard", "%s", e.msg);
    loader_close(m);

    char *d2 = mkdir_in("man_count");
    put_shard(d2, "valid", 0, 0, 30, L, V);
    const char *head = "{\"format\": \"maskd-shards\", \"version\": 1, \"seq_len\": 8, \"vocab_size\": %d, \"total_samples\": %d,"
                       " \"shards\": [%s%s%s]}";
#define MANIFEST(vocab, total, e1, e2)                                                   \
  do {                                                                                   \
    snprintf(text, sizeof text, head, vocab, total, e1, (e2)[0] ? ", " : "", e2);        \
    write_text(d2, "manifest.json", text);                                               \
  } while (0)
    const char *only = "valid-00000-samples-30.shard";
    MANIFEST(5000, 31, entry(d2, only, 31), "");
    refused("refuses_manifest_count_mismatch", d2, "manifest says 31", 4);
    MANIFEST(5000, 60, entry(d2, only, 30), "");
    refused("refuses_manifest_total_mismatch", d2, "total_samples 60", 4);
    MANIFEST(4000, 30, entry(d2, only, 30), "");
    refused("refuses_manifest_vocab_mismatch", d2, "differ from the shards", 4);
    MANIFEST(5000, 60, entry(d2, only, 30), entry(d2, "valid-00001-samples-30.shard", 30));
    refused("refuses_manifest_missing_shard", d2, "valid-00001-samples-30.shard: cannot open", 4);
    /* The manifest's checksums (prepare has always written them): a shard of the same
    ** size from another set, swapped in under the listed name, is refused by name; an
    ** entry without its checksum too. */
    MANIFEST(5000, 30, entry(d2, only, 30), "");
    Loader *sums = open_with(d2, 4, 0, 1, 0, 1, 1, &e);
    check(sums && loader_n_samples(sums) == 30, "open_manifest_checksums", "%s", e.msg);
    loader_close(sums);
    char *other = mkdir_in("man_other");
    put_shard(other, "valid", 0, 100, 30, L, V);   /* other ids, the same count */
    char from[1024], to[1024];
    snprintf(from, sizeof from, "%s/%s", other, only);
    snprintf(to, sizeof to, "%s/%s", d2, only);
    if (rename(from, to) != 0) printf("# rename failed\n");
    refused("refuses_manifest_swapped_shard", d2, "valid-00000-samples-30.shard: differs from the manifest", 4);
    MANIFEST(5000, 30, "{\"file\": \"valid-00000-samples-30.shard\", \"samples\": 30}", "");
    refused("refuses_manifest_without_checksum", d2, "shard entry 0 (valid-00000-samples-30.shard) lacks its checksum", 4);
#undef MANIFEST
    write_text(d2, "manifest.json", "{\"format\": \"something-else\"}");
    refused("refuses_foreign_manifest", d2, "not a maskd shard manifest", 4);
    write_text(d2, "manifest.json", "{\"format\": ");
    refused("refuses_broken_manifest", d2, "not valid JSON", 4);
  }

  /* Directory sets without a manifest. */
  {
    char *d = mkdir_in("gap");
    put_shard(d, "train", 0, 0, 10, L, V);
    put_shard(d, "train", 2, 10, 10, L, V);
    refused("refuses_missing_index", d, "shard index 1", 4);
    d = mkdir_in("twosplits");
    put_shard(d, "train", 0, 0, 10, L, V);
    put_shard(d, "valid", 0, 0, 10, L, V);
    refused("refuses_two_splits", d, "two splits", 4);
    d = mkdir_in("mixed_len");
    put_shard(d, "train", 0, 0, 10, L, V);
    put_shard(d, "train", 1, 10, 10, L + 1, V);
    refused("refuses_mixed_seq_len", d, "differ from", 4);
    d = mkdir_in("mixed_vocab");
    put_shard(d, "train", 0, 0, 10, L, V);
    put_shard(d, "train", 1, 10, 10, L, V + 1);
    refused("refuses_mixed_vocab", d, "differ from", 4);
    d = mkdir_in("trunc");
    put_shard(d, "train", 0, 0, 10, L, V);
    put_shard(d, "train", 1, 10, 10, L, V);
    char p[1024];
    snprintf(p, sizeof p, "%s/train-00001-samples-10.shard", d);
    if (truncate(p, 100) != 0) printf("# truncate failed\n");
    refused("refuses_truncated_shard_in_set", d, "train-00001-samples-10.shard: truncated shard", 4);
    d = mkdir_in("foreign");
    write_text(d, "train-00000-samples-3.shard", "#!/bin/sh\necho this is not a shard at all, it is a script of some length\n");
    refused("refuses_foreign_shard_in_set", d, "train-00000-samples-3.shard: not a maskd shard", 4);
    d = mkdir_in("emptydir");
    refused("refuses_empty_dir", d, "no manifest.json and no .shard files", 4);
    refused("refuses_missing_path", "/nonexistent/shards", "/nonexistent/shards: cannot open", 4);
    refused("refuses_too_small_for_a_batch", set, "no full batch", 200);
    LoaderOptions o = loader_default_options(4);
    o.vocab_size = 8000;
    Rng r; rng_seed(&r, 1);
    Loader *x = loader_open(set, &o, &r, &e);
    check(!x && strstr(e.msg, "vocabulary size 5000, the tokenizer 8000"), "refuses_vocab_mismatch", "'%s'", e.msg);
    loader_close(x);
    o = loader_default_options(4);
    o.seq_len = 128;
    x = loader_open(set, &o, &r, &e);
    check(!x && strstr(e.msg, "sequence length 8, expected 128"), "refuses_seq_len_mismatch", "'%s'", e.msg);
    loader_close(x);
    o = loader_default_options(0);
    x = loader_open(set, &o, &r, &e);
    check(!x && strstr(e.msg, "batch size"), "refuses_batch_0", "'%s'", e.msg);
    loader_close(x);
  }
  return check_exit();
}
