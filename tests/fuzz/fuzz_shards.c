/* libFuzzer harness: shard files (engine/data/shards.h). The input is a shard's bytes,
** written to a file named after the sample count its header holds (so the name check
** passes and the fuzzer reaches the rest). Two checksums would otherwise stop almost
** every mutation at the header, so a checksum field that is all zero is filled in
** with the right value first; a non-zero one is left as the input has it (and the
** mismatch refusals stay reachable). Checks: shard_open and shard_read_header agree
** on the header; an accepted shard's size is 64 + N*L*W and its ids are below the
** vocabulary; its samples written again with shard_write read back the same. The
** input is also tried as a shard file name (shard_parse_name), whose parts must
** survive being written with shard_name and parsed again. */
#include <inttypes.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "engine/data/shards.h"
#include "tests/fuzz/fuzz_common.h"

static uint64_t get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }

/* Field by field (the struct has padding). */
static int same_info(const ShardInfo *a, const ShardInfo *b) {
  return a->version == b->version && a->header_size == b->header_size && a->seq_len == b->seq_len &&
         a->token_width == b->token_width && a->vocab_size == b->vocab_size && a->n_samples == b->n_samples &&
         a->checksum == b->checksum;
}

static void check_name(const uint8_t *data, size_t size) {
  char *name = fuzz_cstr(data, size > 200 ? 200 : size);
  size_t split_len;
  int index;
  uint64_t count;
  if (shard_parse_name(name, &split_len, &index, &count) == 0) {
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    FUZZ_CHECK(split_len >= 1 && split_len < strlen(base) && index >= 0, "parsed split %zu, index %d of \"%s\"", split_len, index, name);
    char split[256], again[512];
    snprintf(split, sizeof split, "%.*s", (int)split_len, base);
    Err err = {0};
    if (!strchr(split, '/') && shard_name(again, sizeof again, split, index, count, &err) == 0) {
      size_t s2;
      int i2;
      uint64_t c2;
      FUZZ_CHECK(shard_parse_name(again, &s2, &i2, &c2) == 0 && s2 == split_len && i2 == index && c2 == count,
                 "\"%s\" -> \"%s\" parses differently", name, again);
    }
  }
  free(name);
}

/* Seeds: shards shard_write makes (2- and 4-byte ids, and an empty one). */
static void write_seeds(const char *dir) {
  int32_t ids[12];
  for (int i = 0; i < 12; i++) ids[i] = i * 7;
  struct { uint64_t n; uint32_t seq, vocab; } s[] = {{3, 4, 100}, {2, 3, 70000}, {0, 5, 10}};
  for (int i = 0; i < 3; i++) {
    char p[1024], name[64];
    snprintf(p, sizeof p, "%s/tmp-00000-samples-%" PRIu64 ".shard", fuzz_dir(), s[i].n);
    Err err = {0};
    FUZZ_CHECK(shard_write(p, ids, s[i].n, s[i].seq, s[i].vocab, NULL, &err) == 0, "%s", err.msg);
    FILE *f = fopen(p, "rb");
    unsigned char b[256];
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    snprintf(name, sizeof name, "n%" PRIu64 "_l%u_v%u.shard", s[i].n, s[i].seq, s[i].vocab);
    fuzz_write_file(fuzz_seed_path(dir, name), b, n);
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_name(data, size);
  static char path[512], copy_path[512];
  if (path[0]) unlink(path);
  unsigned char *buf = malloc(size ? size : 1);
  FUZZ_CHECK(buf, "oom");
  if (size) memcpy(buf, data, size);
  uint64_t n_named = size >= 32 ? get64(buf + 24) : 0;
  if (size >= 64) {
    if (get64(buf + 40) == 0) put64(buf + 40, shard_fnv1a64(SHARD_FNV_INIT, buf + 64, size - 64));
    if (get64(buf + 56) == 0) put64(buf + 56, shard_fnv1a64(SHARD_FNV_INIT, buf, 56));
  }
  snprintf(path, sizeof path, "%s/train-00000-samples-%" PRIu64 ".shard", fuzz_dir(), n_named);
  fuzz_write_file(path, buf, size);
  free(buf);

  Err err = {0}, herr = {0};
  ShardInfo hinfo;
  int hrc = shard_read_header(path, &hinfo, &herr);
  Shard *s = shard_open(path, &err);
  if (!s) {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
    return 0;
  }
  FUZZ_CHECK(hrc == 0, "shard_open accepts what shard_read_header refuses: %s", herr.msg);
  const ShardInfo *in = shard_info(s);
  FUZZ_CHECK(same_info(in, &hinfo), "shard_open and shard_read_header read different headers");
  FUZZ_CHECK(in->seq_len > 0 && in->vocab_size > 0 && in->token_width == shard_token_width(in->vocab_size), "bad header accepted");
  FUZZ_CHECK((uint64_t)size == SHARD_HEADER_SIZE + in->n_samples * in->seq_len * in->token_width, "size %zu disagrees with the header", size);
  FUZZ_CHECK(in->n_samples == n_named, "sample count %" PRIu64 " but the name says %" PRIu64, in->n_samples, n_named);

  size_t total = (size_t)(in->n_samples * in->seq_len);
  int32_t *ids = malloc((total ? total : 1) * sizeof *ids);
  FUZZ_CHECK(ids, "oom");
  for (uint64_t i = 0; i < in->n_samples; i++) shard_sample(s, i, ids + i * in->seq_len);
  for (size_t i = 0; i < total; i++) FUZZ_CHECK(ids[i] >= 0 && (uint32_t)ids[i] < in->vocab_size, "id %d >= vocab %u", ids[i], in->vocab_size);

  /* Written again, read back: same header fields and samples. */
  snprintf(copy_path, sizeof copy_path, "%s/copy-00000-samples-%" PRIu64 ".shard", fuzz_dir(), in->n_samples);
  ShardInfo winfo;
  FUZZ_CHECK(shard_write(copy_path, ids, in->n_samples, in->seq_len, in->vocab_size, &winfo, &err) == 0,
             "shard_write refuses an accepted shard's samples: %s", err.msg);
  Shard *c = shard_open(copy_path, &err);
  FUZZ_CHECK(c, "the written shard is refused: %s", err.msg);
  const ShardInfo *out = shard_info(c);
  FUZZ_CHECK(same_info(out, in) && same_info(out, &winfo), "the written shard's header differs");
  /* (seq_len is only bounded by the file size when there are samples.) */
  int32_t *row = in->n_samples ? malloc(in->seq_len * sizeof *row) : NULL;
  FUZZ_CHECK(row || !in->n_samples, "oom");
  for (uint64_t i = 0; i < in->n_samples; i++) {
    shard_sample(c, i, row);
    FUZZ_CHECK(!memcmp(row, ids + i * in->seq_len, in->seq_len * sizeof *row), "sample %" PRIu64 " changed", i);
  }
  free(row);
  free(ids);
  shard_close(c);
  unlink(copy_path);
  shard_close(s);
  return 0;
}
