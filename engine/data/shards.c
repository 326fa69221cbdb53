#include "engine/data/shards.h"
#include "engine/core/files.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct Shard {
  ShardInfo info;
  char *path;
  unsigned char *data;  /* n_samples * seq_len * token_width bytes, little-endian ids */
};

uint64_t shard_fnv1a64(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
  return h;
}

uint32_t shard_token_width(uint32_t vocab_size) { return vocab_size <= 65536u ? 2u : 4u; }

/* Byte packing, so the file is little-endian whatever the host is. */
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
/* Ids are int32 in memory (shard_sample, the loader, the model), so every id < V must fit. */
#define SHARD_MAX_VOCAB 0x80000000u

static uint32_t get32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = v << 8 | p[i]; return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = v << 8 | p[i]; return v; }

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

int shard_name(char *buf, size_t cap, const char *split, int index, uint64_t n_samples, Err *err) {
  if (!split || !*split || strchr(split, '/')) return err_set(err, "shard split name must be non-empty and hold no '/'");
  if (index < 0) return err_set(err, "shard index %d is negative", index);
  int n = snprintf(buf, cap, "%s-%05d-samples-%" PRIu64 ".shard", split, index, n_samples);
  if (n < 0 || (size_t)n >= cap) return err_set(err, "shard name for split '%s' is too long", split);
  return 0;
}

int shard_parse_name(const char *path, size_t *split_len, int *index, uint64_t *n_samples) {
  const char *name = base_name(path);
  size_t len = strlen(name);
  static const char ext[] = ".shard", mid[] = "-samples-";
  if (len < sizeof ext || strcmp(name + len - (sizeof ext - 1), ext) != 0) return -1;
  /* Scan back over the count digits, then "-samples-", then the index digits. */
  size_t end = len - (sizeof ext - 1), p = end;
  while (p > 0 && name[p - 1] >= '0' && name[p - 1] <= '9') p--;
  if (p == end || end - p > 19) return -1;
  uint64_t count = 0;
  for (size_t i = p; i < end; i++) count = count * 10 + (uint64_t)(name[i] - '0');
  if (p < sizeof mid - 1 || memcmp(name + p - (sizeof mid - 1), mid, sizeof mid - 1) != 0) return -1;
  size_t iend = p - (sizeof mid - 1), q = iend;
  while (q > 0 && name[q - 1] >= '0' && name[q - 1] <= '9') q--;
  if (q == iend || iend - q > 9 || q < 2 || name[q - 1] != '-') return -1;
  int idx = 0;
  for (size_t i = q; i < iend; i++) idx = idx * 10 + (name[i] - '0');
  if (split_len) *split_len = q - 1;
  if (index) *index = idx;
  if (n_samples) *n_samples = count;
  return 0;
}

/* Token bytes for n ids or 0 on overflow (the count is then refused). */
static uint64_t data_bytes(uint64_t n_samples, uint32_t seq_len, uint32_t width) {
  if (seq_len == 0 || width == 0) return 0;
  if (n_samples > UINT64_MAX / seq_len / width) return 0;
  return n_samples * seq_len * width;
}

int shard_write(const char *path, const int32_t *ids, uint64_t n_samples, uint32_t seq_len,
                uint32_t vocab_size, ShardInfo *info, Err *err) {
  if (seq_len == 0) return err_set(err, "%s: sequence length must be > 0", path);
  if (vocab_size == 0) return err_set(err, "%s: vocabulary size must be > 0", path);
  if (vocab_size > SHARD_MAX_VOCAB) return err_set(err, "%s: vocabulary size %" PRIu32 " is above %u (ids are int32)", path, vocab_size, SHARD_MAX_VOCAB);
  uint32_t w = shard_token_width(vocab_size);
  uint64_t nbytes = data_bytes(n_samples, seq_len, w);
  if (n_samples > 0 && nbytes == 0) return err_set(err, "%s: %" PRIu64 " samples overflow the size", path, n_samples);
  if (nbytes > SIZE_MAX) return err_set(err, "%s: too large for this machine", path);
  uint64_t name_count;
  if (shard_parse_name(path, NULL, NULL, &name_count) != 0)
    return err_set(err, "%s: shard file name must end in -<index>-samples-<count>.shard", path);
  if (name_count != n_samples)
    return err_set(err, "%s: name says %" PRIu64 " samples but %" PRIu64 " are written", path, name_count, n_samples);

  if (SHARD_HEADER_SIZE + nbytes > SHARD_MAX_FILE) {
    char cap[32];
    return err_set(err, "%s: %" PRIu64 " bytes of ids, more than a shard may hold (%s); use fewer samples per shard", path,
                   nbytes, files_size_text(SHARD_MAX_FILE, cap, sizeof cap));
  }
  unsigned char *buf = malloc(SHARD_HEADER_SIZE + (size_t)nbytes);
  if (!buf) return err_set(err, "%s: out of memory", path);

  unsigned char *d = buf + SHARD_HEADER_SIZE;
  uint64_t n = n_samples * seq_len;
  for (uint64_t i = 0; i < n; i++) {
    if (ids[i] < 0 || (uint32_t)ids[i] >= vocab_size) {
      int rc = err_set(err, "%s: id %" PRId32 " at sample %" PRIu64 " position %" PRIu64 " is outside [0, %" PRIu32 ")",
                       path, ids[i], i / seq_len, i % seq_len, vocab_size);
      free(buf);
      return rc;
    }
    uint32_t v = (uint32_t)ids[i];
    if (w == 2) { d[2 * i] = (unsigned char)v; d[2 * i + 1] = (unsigned char)(v >> 8); }
    else put32(d + 4 * i, v);
  }
  ShardInfo h = {SHARD_VERSION, SHARD_HEADER_SIZE, seq_len, w, vocab_size, n_samples,
                 shard_fnv1a64(SHARD_FNV_INIT, d, (size_t)nbytes)};
  memset(buf, 0, SHARD_HEADER_SIZE);
  memcpy(buf, SHARD_MAGIC, 8);
  put32(buf + 8, h.version); put32(buf + 12, h.header_size); put32(buf + 16, h.seq_len);
  put32(buf + 20, h.token_width); put64(buf + 24, h.n_samples); put32(buf + 32, h.vocab_size);
  put64(buf + 40, h.checksum);
  put64(buf + 56, shard_fnv1a64(SHARD_FNV_INIT, buf, 56));

  int rc = files_write_atomic(path, buf, SHARD_HEADER_SIZE + (size_t)nbytes, err);
  free(buf);
  if (rc == 0 && info) *info = h;
  return rc;
}

/* Decodes and checks the 64 header bytes against the file size and name. */
static int parse_header(const char *path, const unsigned char *b, uint64_t file_size, ShardInfo *out, Err *err) {
  if (memcmp(b, SHARD_MAGIC, 8) != 0) return err_set(err, "%s: not a maskd shard (bad magic)", path);
  ShardInfo h;
  h.version = get32(b + 8);
  if (h.version != SHARD_VERSION)
    return err_set(err, "%s: shard version %" PRIu32 " is not supported (this build reads %u)", path, h.version, SHARD_VERSION);
  if (get64(b + 56) != shard_fnv1a64(SHARD_FNV_INIT, b, 56)) return err_set(err, "%s: corrupt shard header (checksum mismatch)", path);
  h.header_size = get32(b + 12); h.seq_len = get32(b + 16); h.token_width = get32(b + 20);
  h.n_samples = get64(b + 24); h.vocab_size = get32(b + 32); h.checksum = get64(b + 40);
  if (h.header_size != SHARD_HEADER_SIZE) return err_set(err, "%s: header size %" PRIu32 " != %u", path, h.header_size, SHARD_HEADER_SIZE);
  if (h.seq_len == 0) return err_set(err, "%s: sequence length is 0", path);
  if (h.vocab_size == 0) return err_set(err, "%s: vocabulary size is 0", path);
  if (h.vocab_size > SHARD_MAX_VOCAB)
    return err_set(err, "%s: vocabulary size %" PRIu32 " is above %u (ids are int32)", path, h.vocab_size, SHARD_MAX_VOCAB);
  if (h.token_width != shard_token_width(h.vocab_size))
    return err_set(err, "%s: token width %" PRIu32 " does not fit vocabulary size %" PRIu32, path, h.token_width, h.vocab_size);
  uint64_t nbytes = data_bytes(h.n_samples, h.seq_len, h.token_width);
  if (h.n_samples > 0 && nbytes == 0) return err_set(err, "%s: sample count %" PRIu64 " overflows", path, h.n_samples);
  if (file_size > SHARD_MAX_FILE || nbytes > SHARD_MAX_FILE - SHARD_HEADER_SIZE) {
    char cap[32];
    return err_set(err, "%s: more than the %s a shard may have", path, files_size_text(SHARD_MAX_FILE, cap, sizeof cap));
  }
  if (file_size != SHARD_HEADER_SIZE + nbytes)
    return err_set(err, "%s: %s: file has %" PRIu64 " bytes, header says %" PRIu64 " (%" PRIu64 " samples x %" PRIu32 " tokens x %" PRIu32 " bytes + %u)",
                   path, file_size < SHARD_HEADER_SIZE + nbytes ? "truncated shard" : "trailing bytes after shard",
                   file_size, SHARD_HEADER_SIZE + nbytes, h.n_samples, h.seq_len, h.token_width, SHARD_HEADER_SIZE);
  uint64_t name_count;
  if (shard_parse_name(path, NULL, NULL, &name_count) != 0)
    return err_set(err, "%s: shard file name must end in -<index>-samples-<count>.shard", path);
  if (name_count != h.n_samples)
    return err_set(err, "%s: name says %" PRIu64 " samples, header says %" PRIu64, path, name_count, h.n_samples);
  *out = h;
  return 0;
}

/* Opens path and reads its header; returns the FILE positioned after it. */
static FILE *open_header(const char *path, ShardInfo *info, Err *err) {
  uint64_t size;
  FILE *f = files_fopen_regular(path, &size, err);
  if (!f) return NULL;
  unsigned char b[SHARD_HEADER_SIZE];
  if (size < SHARD_HEADER_SIZE) {
    size_t got = fread(b, 1, sizeof b, f);
    if (got >= 8 && memcmp(b, SHARD_MAGIC, 8) != 0) err_set(err, "%s: not a maskd shard (bad magic)", path);
    else err_set(err, "%s: truncated shard: %" PRIu64 " bytes, the header alone needs %u", path, size, SHARD_HEADER_SIZE);
    fclose(f);
    return NULL;
  }
  if (fread(b, 1, sizeof b, f) != sizeof b) { err_set(err, "%s: read error: %s", path, strerror(errno)); fclose(f); return NULL; }
  if (parse_header(path, b, size, info, err) != 0) { fclose(f); return NULL; }
  return f;
}

int shard_read_header(const char *path, ShardInfo *info, Err *err) {
  FILE *f = open_header(path, info, err);
  if (!f) return -1;
  fclose(f);
  return 0;
}

Shard *shard_open(const char *path, Err *err) {
  ShardInfo h;
  FILE *f = open_header(path, &h, err);
  if (!f) return NULL;
  uint64_t nbytes = data_bytes(h.n_samples, h.seq_len, h.token_width);
  if (nbytes > SIZE_MAX - 1) { err_set(err, "%s: too large for this machine", path); fclose(f); return NULL; }
  Shard *s = calloc(1, sizeof *s);
  if (s) { s->path = strdup(path); s->data = malloc((size_t)nbytes + 1); }
  if (!s || !s->path || !s->data) { err_set(err, "%s: out of memory", path); fclose(f); shard_close(s); return NULL; }
  s->info = h;
  size_t got = fread(s->data, 1, (size_t)nbytes, f);
  fclose(f);
  if (got != nbytes) { err_set(err, "%s: read %zu of %" PRIu64 " data bytes (file changed while reading?)", path, got, nbytes); shard_close(s); return NULL; }
  if (shard_fnv1a64(SHARD_FNV_INIT, s->data, (size_t)nbytes) != h.checksum) {
    err_set(err, "%s: corrupt shard data (checksum mismatch)", path);
    shard_close(s);
    return NULL;
  }
  uint64_t n = h.n_samples * h.seq_len;
  for (uint64_t i = 0; i < n; i++) {
    uint32_t v = h.token_width == 2 ? (uint32_t)(s->data[2 * i] | s->data[2 * i + 1] << 8) : get32(s->data + 4 * i);
    if (v >= h.vocab_size) {
      err_set(err, "%s: id %" PRIu32 " at sample %" PRIu64 " is >= the vocabulary size %" PRIu32, path, v, i / h.seq_len, h.vocab_size);
      shard_close(s);
      return NULL;
    }
  }
  return s;
}

void shard_close(Shard *s) {
  if (!s) return;
  free(s->path);
  free(s->data);
  free(s);
}

const ShardInfo *shard_info(const Shard *s) { return &s->info; }
const char *shard_path(const Shard *s) { return s->path; }

void shard_sample(const Shard *s, uint64_t i, int32_t *out) {
  uint32_t L = s->info.seq_len;
  if (s->info.token_width == 2) {
    const unsigned char *p = s->data + 2 * i * L;
    for (uint32_t t = 0; t < L; t++) out[t] = (int32_t)(p[2 * t] | p[2 * t + 1] << 8);
  } else {
    const unsigned char *p = s->data + 4 * i * L;
    for (uint32_t t = 0; t < L; t++) out[t] = (int32_t)get32(p + 4 * t);
  }
}
