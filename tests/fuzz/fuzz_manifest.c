/* libFuzzer harness: a shard folder's manifest.json (engine/data/loader.h, the format of
** engine/data/prepare.h). Once per process, prepare_run writes a real set (two shards and
** its manifest) into a private folder; each input replaces manifest.json and the set
** is opened by the manifest's path and by the folder's. Checks: both agree; an accepted
** set holds the samples the manifest's total says, with the shards' sequence length
** and vocabulary; its batches hold ids below the vocabulary (padding rows pad_id);
** a saved position restores to the same next batch. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "engine/data/loader.h"
#include "engine/data/prepare.h"
#include "tests/fuzz/fuzz_common.h"

#define SEQ 8
#define VOCAB 50
#define BATCH 3

/* Each byte of a line is one id (mod the vocabulary), between [CLS]=0 and [SEP]=1. */
static int encode_bytes(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err) {
  (void)ctx; (void)err;
  int n = (int)len + 2;
  if (n > cap) return n;
  ids[0] = 0;
  for (size_t i = 0; i < len; i++) ids[i + 1] = 2 + (unsigned char)text[i] % (VOCAB - 2);
  ids[len + 1] = 1;
  return n;
}

static char set_dir[600], manifest[700], seed_manifest[4096];

static void make_set(void) {
  snprintf(set_dir, sizeof set_dir, "%s/set", fuzz_dir());
  snprintf(manifest, sizeof manifest, "%s/manifest.json", set_dir);
  static char text[] = "the cat sat on the mat\nand the dog sat on the log\nthen both of them slept all day long\n";
  FILE *in = fmemopen(text, strlen(text), "r");
  PrepareOptions o = prepare_default_options("train", SEQ, VOCAB);
  o.shard_size = 5;
  o.tokenizer_hash = "fnv1a64:0123456789abcdef";
  o.source = "fuzz.txt";
  Err err = {0};
  FUZZ_CHECK(in && prepare_run(in, 0, set_dir, &o, encode_bytes, NULL, NULL, &err) == 0, "prepare_run: %s", err.msg);
  fclose(in);
  FILE *f = fopen(manifest, "rb");
  size_t n = f ? fread(seed_manifest, 1, sizeof seed_manifest - 1, f) : 0;
  if (f) fclose(f);
  seed_manifest[n] = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  make_set();
  const char *seeds = getenv("MASKD_FUZZ_SEEDS");
  if (seeds) {  /* writes the seed corpus (the real manifest) and stops */
    char p[1024];
    snprintf(p, sizeof p, "%s/prepare_manifest.json", seeds);
    fuzz_write_file(p, seed_manifest, strlen(seed_manifest));
    exit(0);
  }
  return 0;
}

static void check_loader(Loader *l) {
  FUZZ_CHECK(loader_seq_len(l) == SEQ && loader_vocab_size(l) == VOCAB, "sequence length %u, vocabulary %u", loader_seq_len(l), loader_vocab_size(l));
  FUZZ_CHECK(loader_batches_per_epoch(l) > 0, "no batch");
  json_t *m = json_load_file(manifest, 0, NULL);   /* as the loader reads it */
  FUZZ_CHECK(m, "an accepted manifest is not JSON");
  json_int_t total = json_integer_value(json_object_get(m, "total_samples"));
  FUZZ_CHECK((uint64_t)total == loader_n_samples(l), "total_samples %lld, the set holds %llu", (long long)total, (unsigned long long)loader_n_samples(l));
  FUZZ_CHECK((size_t)loader_n_shards(l) == json_array_size(json_object_get(m, "shards")), "shard count");
  json_decref(m);
  int32_t ids[BATCH * SEQ], attn[BATCH * SEQ], ids2[BATCH * SEQ];
  LoaderState st;
  for (int b = 0; b < 4; b++) {
    if (b == 2) loader_get_state(l, &st);
    int real = loader_next(l, ids, attn);
    FUZZ_CHECK(real >= 0 && real <= BATCH, "%d real rows", real);
    for (int i = 0; i < BATCH * SEQ; i++) {
      FUZZ_CHECK(ids[i] >= 0 && ids[i] < VOCAB, "id %d", ids[i]);
      FUZZ_CHECK(attn[i] == (i / SEQ < real), "attention mask of row %d", i / SEQ);
    }
  }
  Err err = {0};
  FUZZ_CHECK(loader_set_state(l, &st, &err) == 0, "restoring a saved position: %s", err.msg);
  loader_next(l, ids2, NULL);
  loader_set_state(l, &st, &err);
  loader_next(l, ids, NULL);
  FUZZ_CHECK(!memcmp(ids, ids2, sizeof ids), "a restored position yields another batch");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write_file(manifest, data, size);
  LoaderOptions o = loader_default_options(BATCH);
  o.drop_last = 0;
  Rng seed;
  rng_seed(&seed, 7);
  Err e1 = {0}, e2 = {0};
  Loader *a = loader_open(manifest, &o, &seed, &e1);
  Loader *b = loader_open(set_dir, &o, &seed, &e2);
  FUZZ_CHECK(!a == !b, "by file %s, by folder %s", a ? "accepted" : e1.msg, b ? "accepted" : e2.msg);
  if (!a) {
    FUZZ_CHECK(e1.msg[0] && e2.msg[0], "a refusal without a message");
    return 0;
  }
  check_loader(a);
  FUZZ_CHECK(loader_n_samples(a) == loader_n_samples(b), "by file and by folder differ");
  loader_close(a);
  loader_close(b);
  return 0;
}
