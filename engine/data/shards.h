/* Dataset shards: fixed-length token chunks in a small checked binary file.
**
** Format, version 1 (all integers little-endian; the header is 64 bytes):
**
**   offset size  field
**        0    8  magic, the bytes "MASKDSHD"
**        8    4  version (1)
**       12    4  header size in bytes (64; the token data starts here)
**       16    4  sequence length L (tokens per sample, > 0)
**       20    4  token width W in bytes: 2 (uint16) when vocab_size <= 65536, else 4 (uint32)
**       24    8  sample count N
**       32    4  vocab size V (every id is < V)
**       36    4  reserved, 0
**       40    8  FNV-1a 64 of the N*L*W token bytes exactly as stored
**       48    8  reserved, 0
**       56    8  FNV-1a 64 of header bytes [0, 56), so a damaged header is told apart
**                from damaged data
**       64  N*L*W  the ids, sample after sample, each W bytes little-endian
**
** A shard's file size is exactly 64 + N*L*W. The file name carries the sample count:
**
**   <split>-<index, 5 digits>-samples-<N>.shard      e.g. train-00003-samples-5000.shard
**
** as the seed's TFRecords ("dataset-<i>-<count>.tfrecord") do. The total number of shards
** is not in the name, so shards can be written while the input streams; a set's
** completeness is recorded by the manifest that prepare writes last (engine/data/prepare.h).
**
** A shard file is at most SHARD_MAX_FILE bytes (the writer refuses more, the reader
** refuses a header that claims more). The writer writes a temporary beside <path> and
** renames it over <path> after fsync, so a final name never holds a half-written shard. The reader refuses, with one line naming the file, a
** file that is too short or too long, a foreign file (magic), an unknown version, a header
** or data checksum mismatch, a name whose sample count differs from the header's, and an
** id >= V. FNV-1a 64: h = 0xcbf29ce484222325; for each byte b: h ^= b; h *= 0x100000001b3. */
#ifndef MASKD_SHARDS_H
#define MASKD_SHARDS_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

#define SHARD_MAGIC "MASKDSHD"
#define SHARD_VERSION 1u
#define SHARD_HEADER_SIZE 64u
#define SHARD_FNV_INIT 0xcbf29ce484222325ULL
/* The largest shard file: 4 GiB, 400 times the default 5,000 samples of 512 tokens. */
#define SHARD_MAX_FILE ((uint64_t)4 << 30)

typedef struct ShardInfo {
  uint32_t version, header_size, seq_len, token_width, vocab_size;
  uint64_t n_samples;
  uint64_t checksum;  /* FNV-1a 64 of the token bytes */
} ShardInfo;

typedef struct Shard Shard;

/* FNV-1a 64 of p[0..n) continued from h (start with SHARD_FNV_INIT). */
uint64_t shard_fnv1a64(uint64_t h, const void *p, size_t n);

/* Token width the format uses for this vocabulary size: 2 or 4. */
uint32_t shard_token_width(uint32_t vocab_size);

/* Writes "<split>-<index:05d>-samples-<n>.shard" into buf; returns -1 when it does not fit
** or split is empty or holds '/'. */
int shard_name(char *buf, size_t cap, const char *split, int index, uint64_t n_samples, Err *err);

/* Parses a shard file name (a path's last component); sets *split_len (chars before
** "-<index>"), *index and *n_samples. Returns -1 when the name does not follow the pattern. */
int shard_parse_name(const char *path, size_t *split_len, int *index, uint64_t *n_samples);

/* Writes n_samples * seq_len ids (each in [0, vocab_size)) as a shard at path, through
** a temporary beside it and a rename. On success *info (may be NULL) receives the header written. */
int shard_write(const char *path, const int32_t *ids, uint64_t n_samples, uint32_t seq_len,
                uint32_t vocab_size, ShardInfo *info, Err *err);

/* Reads and validates a shard's header and its file size only (no data read). */
int shard_read_header(const char *path, ShardInfo *info, Err *err);

/* Opens a shard: reads it whole into memory and validates everything listed above. */
Shard *shard_open(const char *path, Err *err);
/* Frees the shard; NULL allowed. */
void shard_close(Shard *s);
/* The validated header. */
const ShardInfo *shard_info(const Shard *s);
/* The path it was opened from. */
const char *shard_path(const Shard *s);
/* Copies sample i (< n_samples) as seq_len int32 ids into out. */
void shard_sample(const Shard *s, uint64_t i, int32_t *out);

#endif
