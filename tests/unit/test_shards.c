/* Shard format: byte layout decoded independently here, FNV-1a 64 against its published
** test vectors, round trips at both token widths, and refusal of every damaged or foreign
** file with a message that names it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/core/files.h"
#include "engine/core/rng.h"
#include "engine/data/shards.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char dir[512];

static uint64_t le(const unsigned char *p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static unsigned char *slurp(const char *path, long *n) {
  size_t len = 0;
  unsigned char *b = (unsigned char *)files_read_all(path, (size_t)1 << 30, &len, NULL);
  *n = (long)len;
  return b;
}

static void spit(const char *path, const unsigned char *b, long n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, (size_t)n, f);
  fclose(f);
}

/* Expects shard_open(path) to fail with a message naming the file and containing want. */
static void expect_refused(const char *name, const char *path, const char *want) {
  Err e = {0};
  Shard *s = shard_open(path, &e);
  int ok = s == NULL && strstr(e.msg, path) && strstr(e.msg, want);
  check(ok, name, "open gave %p, message '%s' (want '%s' and the path)", (void *)s, e.msg, want);
  shard_close(s);
  ShardInfo h;
  Err e2 = {0};
  /* The header-only reader refuses the same files, except data-only damage it cannot see. */
  if (strstr(want, "data") == NULL && strstr(want, "vocabulary") == NULL) {
    char nm[128];
    snprintf(nm, sizeof nm, "%s_header_reader", name);
    check(shard_read_header(path, &h, &e2) == -1 && strstr(e2.msg, path), nm, "header reader accepted it: '%s'", e2.msg);
  }
}

int main(void) {
  if (fixture_tmpdir(dir, sizeof dir, "test_shards")) { check(0, "mkdtemp", "%s", dir); return check_exit(); }

  /* Published FNV-1a 64 vectors (Fowler/Noll/Vo test suite). */
  check(shard_fnv1a64(SHARD_FNV_INIT, "", 0) == 0xcbf29ce484222325ULL &&
        shard_fnv1a64(SHARD_FNV_INIT, "a", 1) == 0xaf63dc4c8601ec8cULL &&
        shard_fnv1a64(SHARD_FNV_INIT, "foobar", 6) == 0x85944171f73967e8ULL,
        "fnv1a64_vectors", "FNV-1a 64 differs from the published vectors");
  check(shard_fnv1a64(shard_fnv1a64(SHARD_FNV_INIT, "foo", 3), "bar", 3) == 0x85944171f73967e8ULL,
        "fnv1a64_incremental", "continuing a hash differs from hashing at once");

  char name[256];
  Err e = {0};
  check(shard_name(name, sizeof name, "train", 3, 5000, &e) == 0 && strcmp(name, "train-00003-samples-5000.shard") == 0,
        "shard_name", "got '%s'", name);
  check(shard_name(name, sizeof name, "a/b", 0, 1, &e) == -1 && shard_name(name, sizeof name, "", 0, 1, &e) == -1 &&
        shard_name(name, 10, "train", 0, 1, &e) == -1, "shard_name_refuses", "bad split or small buffer accepted");
  size_t sl; int idx; uint64_t cnt;
  int p1 = shard_parse_name("/x/y/my-split-00012-samples-77.shard", &sl, &idx, &cnt);
  check(p1 == 0 && sl == 8 && idx == 12 && cnt == 77, "parse_name", "rc %d split_len %zu index %d count %llu", p1, sl, idx, (unsigned long long)cnt);
  check(shard_parse_name("train-00001-samples-.shard", 0, 0, 0) == -1 && shard_parse_name("train-samples-5.shard", 0, 0, 0) == -1 &&
        shard_parse_name("train-00001-samples-5.shar", 0, 0, 0) == -1 && shard_parse_name("-00001-samples-5.shard", 0, 0, 0) == -1 &&
        shard_parse_name("train-00001-sample-5.shard", 0, 0, 0) == -1,
        "parse_name_refuses", "a malformed name was accepted");
  check(shard_token_width(65536) == 2 && shard_token_width(65537) == 4 && shard_token_width(8000) == 2, "token_width", "wrong width");

  /* Round trip at width 2 (vocab 8000) and width 4 (vocab 70000), ids drawn across the range. */
  for (int wide = 0; wide < 2; wide++) {
    uint32_t V = wide ? 70000 : 8000, L = 16, N = 37;
    int32_t *ids = malloc(sizeof *ids * N * L), *back = malloc(sizeof *back * L);
    Rng r; rng_seed(&r, 11 + wide);
    for (uint32_t i = 0; i < N * L; i++) ids[i] = (int32_t)rng_below(&r, V);
    ids[0] = 0; ids[1] = (int32_t)V - 1;
    char path[768];
    snprintf(path, sizeof path, "%s/rt%d-00000-samples-%u.shard", dir, wide, N);
    ShardInfo wi;
    int rc = shard_write(path, ids, N, L, V, &wi, &e);
    check(rc == 0, wide ? "write_width4" : "write_width2", "%s", e.msg);
    char tmpname[800];
    snprintf(tmpname, sizeof tmpname, "%s.tmp", path);
    check(access(tmpname, F_OK) != 0, wide ? "no_tmp_left4" : "no_tmp_left2", "%s remains", tmpname);

    /* Independent decode of the bytes on disk. */
    long n; unsigned char *b = slurp(path, &n);
    uint32_t W = wide ? 4 : 2;
    int hdr = b && n == 64 + (long)(N * L * W) && memcmp(b, "MASKDSHD", 8) == 0 && le(b + 8, 4) == 1 && le(b + 12, 4) == 64 &&
              le(b + 16, 4) == L && le(b + 20, 4) == W && le(b + 24, 8) == N && le(b + 32, 4) == V && le(b + 36, 4) == 0 &&
              le(b + 48, 8) == 0;
    check(hdr, wide ? "layout_header4" : "layout_header2", "header bytes differ from the documented layout (size %ld)", n);
    int data = 1;
    for (uint32_t i = 0; b && i < N * L; i++) data &= le(b + 64 + i * W, (int)W) == (uint64_t)ids[i];
    check(data, wide ? "layout_data4" : "layout_data2", "token bytes differ");
    uint64_t h = SHARD_FNV_INIT;
    for (long i = 64; b && i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
    uint64_t hh = SHARD_FNV_INIT;
    for (long i = 0; b && i < 56; i++) { hh ^= b[i]; hh *= 0x100000001b3ULL; }
    check(b && le(b + 40, 8) == h && le(b + 56, 8) == hh && wi.checksum == h, wide ? "layout_checksums4" : "layout_checksums2",
          "stored checksums differ from FNV-1a 64 of the bytes");
    free(b);

    Shard *s = shard_open(path, &e);
    int same = s != NULL;
    for (uint32_t i = 0; s && i < N; i++) {
      shard_sample(s, i, back);
      same &= memcmp(back, ids + i * L, L * sizeof *back) == 0;
    }
    check(same && s && shard_info(s)->n_samples == N && shard_info(s)->seq_len == L && shard_info(s)->vocab_size == V &&
          shard_info(s)->token_width == W && strcmp(shard_path(s), path) == 0,
          wide ? "round_trip_width4" : "round_trip_width2", "%s", s ? "ids or header differ" : e.msg);
    shard_close(s);
    free(ids); free(back);
  }

  /* Writer refusals. */
  {
    int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    char path[768];
    snprintf(path, sizeof path, "%s/w-00000-samples-2.shard", dir);
    check(shard_write(path, ids, 2, 4, 8, NULL, &e) == -1 && strstr(e.msg, "id 8"), "write_refuses_id_ge_vocab", "'%s'", e.msg);
    ids[3] = -1;
    check(shard_write(path, ids, 2, 4, 9, NULL, &e) == -1 && strstr(e.msg, "id -1"), "write_refuses_negative_id", "'%s'", e.msg);
    ids[3] = 4;
    check(shard_write(path, ids, 1, 8, 9, NULL, &e) == -1 && strstr(e.msg, "name says 2"), "write_refuses_name_count", "'%s'", e.msg);
    snprintf(path, sizeof path, "%s/plain.bin", dir);
    check(shard_write(path, ids, 2, 4, 9, NULL, &e) == -1 && access(path, F_OK) != 0, "write_refuses_bad_name", "'%s'", e.msg);
    snprintf(path, sizeof path, "%s/nodir/w-00000-samples-2.shard", dir);
    check(shard_write(path, ids, 2, 4, 9, NULL, &e) == -1 && strstr(e.msg, "nodir"), "write_reports_io_error", "'%s'", e.msg);
  }

  /* A good shard, then damaged copies of it. */
  uint32_t V = 500, L = 8, N = 10;
  int32_t ids[80];
  for (int i = 0; i < 80; i++) ids[i] = (i * 37) % 499;
  char good[768];
  snprintf(good, sizeof good, "%s/good-00000-samples-10.shard", dir);
  shard_write(good, ids, N, L, V, NULL, &e);
  long n; unsigned char *b = slurp(good, &n);
  unsigned char *c = malloc((size_t)n + 16);
  char path[768];
#define VARIANT(label, count) snprintf(path, sizeof path, "%s/%s-00000-samples-%d.shard", dir, label, count)

  VARIANT("trunc", 10); spit(path, b, n - 1);
  expect_refused("refuses_truncated_data", path, "truncated shard");
  VARIANT("trunchdr", 10); spit(path, b, 40);
  expect_refused("refuses_truncated_header", path, "truncated shard");
  VARIANT("empty", 10); spit(path, b, 0);
  expect_refused("refuses_empty_file", path, "truncated shard");
  memcpy(c, b, (size_t)n); c[n] = 0;
  VARIANT("trailing", 10); spit(path, c, n + 1);
  expect_refused("refuses_trailing_bytes", path, "trailing bytes");
  VARIANT("foreign", 10);
  { const char *txt = "this is a text file, not a shard, and it is long enough to hold a header of 64 bytes.\n";
    spit(path, (const unsigned char *)txt, (long)strlen(txt)); }
  expect_refused("refuses_foreign_file", path, "bad magic");
  VARIANT("foreignshort", 10); spit(path, (const unsigned char *)"hello world\n", 12);
  expect_refused("refuses_short_foreign_file", path, "bad magic");
  memcpy(c, b, (size_t)n); c[8] = 2;
  VARIANT("version", 10); spit(path, c, n);
  expect_refused("refuses_other_version", path, "version 2");
  memcpy(c, b, (size_t)n); c[16] ^= 1;  /* seq_len 8 -> 9: caught by the header checksum */
  VARIANT("hdrflip", 10); spit(path, c, n);
  expect_refused("refuses_corrupt_header", path, "corrupt shard header");
  memcpy(c, b, (size_t)n); c[64 + 5] ^= 0x10;
  VARIANT("dataflip", 10); spit(path, c, n);
  expect_refused("refuses_corrupt_data", path, "corrupt shard data");
  VARIANT("misnamed", 9); spit(path, b, n);
  expect_refused("refuses_name_count_mismatch", path, "name says 9");
  snprintf(path, sizeof path, "%s/noname.bin", dir); spit(path, b, n);
  expect_refused("refuses_unpatterned_name", path, "-samples-");
  /* A consistent header and checksums but a vocabulary too small for the ids. */
  memcpy(c, b, (size_t)n);
  c[32] = 100; c[33] = 0;  /* vocab 500 -> 100; ids go up to 498 */
  uint64_t hh = shard_fnv1a64(SHARD_FNV_INIT, c, 56);
  for (int i = 0; i < 8; i++) c[56 + i] = (unsigned char)(hh >> (8 * i));
  VARIANT("smallvocab", 10); spit(path, c, n);
  expect_refused("refuses_id_ge_vocab", path, "vocabulary size 100");
  /* A vocabulary above 2^31 with an id past INT32_MAX: the id came out of shard_sample
  ** negative (found by tests/fuzz/fuzz_shards). Refused, and never written. */
  {
    unsigned char w[68] = "MASKDSHD";
    uint32_t f32[] = {1, 64, 1, 4};            /* version, header size, seq_len, width */
    for (int k = 0; k < 4; k++) for (int i = 0; i < 4; i++) w[8 + 4 * k + i] = (unsigned char)(f32[k] >> (8 * i));
    w[24] = 1;                                  /* one sample */
    w[32] = 0xF0; w[33] = w[34] = w[35] = 0xFF; /* vocab 0xFFFFFFF0 */
    w[64] = w[65] = w[66] = 0; w[67] = 0x80;    /* id 0x80000000 */
    uint64_t dh = shard_fnv1a64(SHARD_FNV_INIT, w + 64, 4);
    for (int i = 0; i < 8; i++) w[40 + i] = (unsigned char)(dh >> (8 * i));
    uint64_t h2 = shard_fnv1a64(SHARD_FNV_INIT, w, 56);
    for (int i = 0; i < 8; i++) w[56 + i] = (unsigned char)(h2 >> (8 * i));
    VARIANT("hugevocab", 1); spit(path, w, 68);
    expect_refused("refuses_vocab_past_int32", path, "vocabulary size 4294967280");
    ShardInfo hi;
    check(shard_read_header(path, &hi, &e) == -1 && strstr(e.msg, "4294967280"), "refuses_vocab_past_int32_header_reader", "%s", e.msg);
    VARIANT("hugevocabw", 1);
    int32_t one = 5;
    check(shard_write(path, &one, 1, 1, 0x80000001u, NULL, &e) == -1 && strstr(e.msg, "vocabulary size"),
          "write_refuses_vocab_past_int32", "%s", e.msg);
    VARIANT("maxvocab", 1);
    one = INT32_MAX;
    Shard *mx = shard_write(path, &one, 1, 1, 0x80000000u, NULL, &e) == 0 ? shard_open(path, &e) : NULL;
    int32_t got = 0;
    if (mx) shard_sample(mx, 0, &got);
    check(mx && got == INT32_MAX, "vocab_2_pow_31_round_trip", "%s", e.msg);
    shard_close(mx);
  }
  VARIANT("missing", 10);
  expect_refused("refuses_missing_file", path, "cannot open");

  Shard *s = shard_open(good, &e);
  check(s != NULL, "good_copy_still_opens", "%s", e.msg);
  shard_close(s);
  free(b); free(c);
  return check_exit();
}
