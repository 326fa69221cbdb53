/* Layer: engine/data/ (this folder: shards, loader, MLM collator, prepare) uses
** engine/core only. (ARCHITECTURE.md)
**
** The shard loader: fixed-shape (batch, seq) int32 batches from a shard set, shuffled from
** a seed, with a position that can be saved and restored exactly.
**
** A shard set is a directory (its manifest.json when present, else every *.shard in it,
** which must share one split name and number 0..n-1 without gaps), a manifest file, or a
** single .shard file. Every shard is read and validated when the set is opened (sizes,
** checksums, ids, names against headers, manifest against shards: each entry's samples and
** checksum; one sequence length and one vocabulary size throughout), so a bad set is
** refused before any training work.
**
** Order: with shuffle on, epoch e visits the N samples of the set in one uniform random
** permutation (Fisher-Yates driven by rng_split(state.rng, e)), which also mixes shard
** order; with shuffle off, in shard order. The k-th batch of an epoch takes the permuted
** samples [k*B*W + r*B, k*B*W + (r+1)*B) for rank r of W (data-parallel: every rank builds the
** same permutation). drop_last: the N mod (B*W) samples left over each epoch are skipped
** (different ones each epoch when shuffled) and batches_per_epoch = floor(N / (B*W)); else the
** last batch is padded with rows of pad_id whose attention mask is 0, and batches_per_epoch
** = ceil(N / (B*W)). Full chunks have attention mask 1 everywhere.
**
** State: (epoch, batch within the epoch, the base Rng). Restoring a saved state makes the
** following batches identical to those an uninterrupted loader would have yielded. */
#ifndef MASKD_LOADER_H
#define MASKD_LOADER_H
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/core/rng.h"

typedef struct LoaderOptions {
  int batch;             /* rows per batch on this rank, > 0 */
  int shuffle;           /* 1: a new permutation every epoch; 0: shard order */
  int drop_last;         /* 1: skip the incomplete last batch; 0: pad it */
  int32_t pad_id;        /* id of padding rows (when drop_last is 0) */
  int rank, world;       /* this rank and the number of ranks (0 and 1 when alone) */
  uint32_t seq_len;      /* 0, or the sequence length the set must have */
  uint32_t vocab_size;   /* 0, or the vocabulary size the set must have */
} LoaderOptions;

typedef struct LoaderState {
  uint64_t epoch;        /* epochs completed */
  uint64_t batch;        /* batches yielded in the current epoch */
  Rng rng;               /* the base generator the permutations derive from (never advanced) */
} LoaderState;

typedef struct Loader Loader;

/* Options with batch B, shuffle on, drop_last on, rank 0 of 1, pad id 0, no expectations. */
LoaderOptions loader_default_options(int batch);

/* Opens and validates a shard set; the permutations derive from *seed (copied, not advanced). */
Loader *loader_open(const char *path, const LoaderOptions *opt, const Rng *seed, Err *err);
/* Frees; NULL allowed. */
void loader_close(Loader *l);

/* Sequence length L of every sample. */
uint32_t loader_seq_len(const Loader *l);
/* Vocabulary size recorded in the shards. */
uint32_t loader_vocab_size(const Loader *l);
/* Samples in the set. */
uint64_t loader_n_samples(const Loader *l);
/* Shards in the set. */
int loader_n_shards(const Loader *l);
/* The set's identity: FNV-1a 64 over each shard's header checksum and sample count, in
** the order the set is read (data-parallel ranks compare it: same counts, other tokens). */
uint64_t loader_set_id(const Loader *l);
/* Batches this rank yields per epoch (> 0; opening refuses a set too small for one). */
uint64_t loader_batches_per_epoch(const Loader *l);
/* The manifest's tokenizer_hash, or "" when the set has no manifest or none recorded. */
const char *loader_tokenizer_hash(const Loader *l);

/* Fills ids and attn (batch*L int32 each; attn may be NULL) with the next batch, moving to
** the next epoch after the last batch of one. Returns the number of real (unpadded) rows,
** which is the batch size unless drop_last is 0 (then it may be less, even 0 on a rank). */
int loader_next(Loader *l, int32_t *ids, int32_t *attn);
/* loader_next, also writing each row's sample index in the set (0 <= index <
** loader_n_samples) to samples[0..batch), or -1 for a padding row: what keys the row's masks. */
int loader_next_samples(Loader *l, int32_t *ids, int32_t *attn, int64_t *samples);

/* The current position (what the next loader_next yields). */
void loader_get_state(const Loader *l, LoaderState *st);
/* Moves to a saved position; refuses a batch index past the epoch's end. */
int loader_set_state(Loader *l, const LoaderState *st, Err *err);

/* A state as LOADER_STATE_WORDS plain words (epoch, batch, rng.s[0..3]), for checkpoints. */
#define LOADER_STATE_WORDS 6
void loader_state_pack(const LoaderState *st, uint64_t out[LOADER_STATE_WORDS]);
void loader_state_unpack(const uint64_t in[LOADER_STATE_WORDS], LoaderState *st);

#endif
