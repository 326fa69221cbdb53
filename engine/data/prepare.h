/* Text lines -> token ids -> fixed-length chunks -> shards (engine/data/shards.h) + manifest.
**
** Each input line (without its "\n" or "\r\n") is encoded by the caller's encoder, which
** adds [CLS] ... [SEP] as the tokenizer's post-processor does. Lines that are empty or only
** blanks are skipped by default (WikiText's blank separator lines would otherwise add a bare
** "[CLS] [SEP]" pair each; the seed's prepare_tfrecord_shards.py encodes them, keep_empty = 1
** does the same). The ids are concatenated and cut into seq_len chunks; the tail shorter than
** seq_len is dropped. The seed concatenates per map() batch of 1000 dataset rows and drops
** each batch's remainder; group_lines = 1000 mirrors that (groups count input lines, blank
** ones included), group_lines = 0 (the default) concatenates the whole input and drops only
** the final tail, which loses less text. (The seed's num_proc=4 also restarts batches at
** each of its 4 process slices; that accident is not mirrored.)
**
** Chunks are written shard_size to a shard, named <split>-<index>-samples-<n>.shard in out_dir
** (the last shard holds the rest). After the last shard, out_dir/manifest.json is written,
** so its presence marks a complete set:
**
**   {"format": "maskd-shards", "version": 1, "split": S, "seq_len": L, "vocab_size": V,
**    "token_width": 2|4, "tokenizer_hash": H (see prepare_file_hash), "source": FILE, "total_samples": N,
**    "lines": .., "lines_skipped": .., "tokens": .., "tokens_dropped": ..,
**    "group_lines": .., "shard_size": ..,
**    "shards": [{"file": NAME, "samples": n, "checksum": "<16 hex digits, FNV-1a 64>"}, ...]}
**
** The set appears complete or not at all: shards and manifest are written into a temporary
** folder beside out_dir (".NAME.tmp-XXXXXX"), which replaces out_dir in one rename when
** out_dir is missing (its parents are created) or empty; into a folder holding other files
** the shards are moved first and the manifest last. An out_dir that is a mount point, or
** whose parent cannot be written, gets the temporary inside it (".set.tmp-XXXXXX"), and
** the files move in on its own filesystem. On any error, or when *stop is set,
** the temporary folder is removed and out_dir is left as it was. out_dir must not already
** hold a manifest.json or .shard files of this split (unless overwrite is set, in which case
** they are removed when the new set is put in place; a manifest.json of another split, or
** one whose split cannot be read, is refused even then).
**
** Limits: an input line of at most PREPARE_MAX_LINE bytes (a longer one is refused after
** reading that much of it), shards of at most SHARD_MAX_FILE bytes (shard_size * seq_len
** ids are checked before anything is read), a manifest of at most PREPARE_MAX_MANIFEST. */
#ifndef MASKD_PREPARE_H
#define MASKD_PREPARE_H
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include "engine/core/err.h"
#include "engine/core/report.h"

/* One input line: a long document on one line is fine, a gigabyte without a newline is not. */
#define PREPARE_MAX_LINE ((size_t)64 << 20)
/* A manifest lists its shards, about 100 bytes each: 16 MiB is over 100,000 shards. */
#define PREPARE_MAX_MANIFEST ((size_t)16 << 20)
/* prepare_file_hash() hashes tokenizer files: nothing larger is one. */
#define PREPARE_MAX_HASHED ((uint64_t)1 << 30)

/* Encodes text[0..len) (not NUL-terminated) into at most cap ids; returns the number of
** ids the full encoding has (when that exceeds cap, it is called again with a larger
** buffer), or -1 with err set. */
typedef int (*PrepareEncodeFn)(void *ctx, const char *text, size_t len, int32_t *ids, int cap, Err *err);

typedef struct PrepareOptions {
  const char *split;          /* split name in the file names, e.g. "train" */
  int seq_len;                /* tokens per chunk (> 0) */
  int shard_size;             /* chunks per shard (> 0; 5000 as the seed's README) */
  uint32_t vocab_size;        /* every id must be below it */
  int group_lines;            /* 0: one stream; N: drop the remainder after every N lines */
  int keep_empty;             /* 1: encode blank lines too */
  int overwrite;              /* 1: remove an existing set of this split first */
  const char *tokenizer_hash; /* recorded in the manifest ("" when NULL) */
  const char *source;         /* the input's name: recorded in the manifest, named in errors */
  int progress;               /* 1: progress lines (lines, rate, ETA) on stderr */
  ReportFn report;            /* NULL, or told "encoding": bytes of the input read of total_bytes
                              ** (unknown when 0), about twice a second, and once at the end */
  void *report_ctx;
  const volatile sig_atomic_t *stop;  /* when set (a signal handler's flag), stop: nothing is written */
} PrepareOptions;

typedef struct PrepareStats {
  uint64_t lines, lines_skipped, tokens, tokens_dropped, samples;
  int shards;
  double seconds;
} PrepareStats;

/* The tokenizer_hash prepare records for a tokenizer file: "fnv1a64:" and 16 hex digits of
** FNV-1a 64 over the file's bytes (cap >= 25). The trainer compares it with
** loader_tokenizer_hash() to refuse shards made with another tokenizer. */
int prepare_file_hash(const char *path, char *out, size_t cap, Err *err);
/* The same hash of bytes already read (a tokenizer file's, read once). */
int prepare_bytes_hash(const void *data, size_t len, char *out, size_t cap, Err *err);

/* Options: split, seq_len, vocab_size given; shard_size 5000; the rest 0/NULL. */
PrepareOptions prepare_default_options(const char *split, int seq_len, uint32_t vocab_size);

/* Reads lines from in (total_bytes: its size for the ETA, 0 when unknown), writes the shard
** set into out_dir. Refuses input that yields no full chunk. stats may be NULL. */
int prepare_run(FILE *in, uint64_t total_bytes, const char *out_dir, const PrepareOptions *opt,
                PrepareEncodeFn encode, void *ctx, PrepareStats *stats, Err *err);

#endif
