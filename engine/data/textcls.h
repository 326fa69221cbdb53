/* Layer: engine/data/ (this folder: shards, loader, collator, preparation, text
** classification data) uses engine/core only. (ARCHITECTURE.md)
**
** Text-classification data: examples (a text and a label name) read from CSV or JSON
** Lines, the label set, a seeded held-out split, and batches padded to the longest
** row of each batch, as HF's DataCollatorWithPadding gives them.
**
** The texts are tokenized by the caller (engine/data knows no tokenizer): a
** TextClsSet holds each example's ids, already with [CLS] ... [SEP] and truncated.
** Order is keyed, never streamed: the permutation of epoch e comes from
** rng_split(seed, e), so a resumed run or another process sees the same batches. */
#ifndef MASKD_TEXTCLS_H
#define MASKD_TEXTCLS_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

/* The largest data file read (BANKING77's train.csv is under 1 MB). */
#define TEXTCLS_MAX_FILE ((size_t)1 << 30)

/* Examples as read: texts and label names, in file order. */
typedef struct TextClsRaw {
  size_t n;
  char **texts;      /* n NUL-terminated UTF-8 strings */
  char **labels;     /* n NUL-terminated label names */
} TextClsRaw;

/* Reads a CSV file (RFC 4180: a header row, quoted fields with "" escapes and
** embedded newlines, CRLF or LF) or a JSON Lines file (one object per line; the
** label may be a string or an integer, written as its decimal text): ".jsonl" or
** ".json" read as JSON Lines, anything else as CSV. text_column and label_column
** name the fields. ERR_BAD_INPUT, with the file, line and reason, for a missing
** column, a row with the wrong field count, a text that is not UTF-8 or is empty,
** an empty file; ERR_IO when it cannot be read. */
int textcls_read(const char *path, const char *text_column, const char *label_column, TextClsRaw *out, Err *err);
/* Frees what textcls_read filled (not the struct); a zeroed struct is allowed. */
void textcls_raw_free(TextClsRaw *r);

/* A label set: names in id order. */
typedef struct TextClsLabels {
  int n;
  char **names;
} TextClsLabels;

/* The label order of a file as HF datasets' ClassLabel gives it: a JSON array of
** names (["activate_my_card", ...]) or an object {"names": [...]} (dataset_info's
** features.label). ERR_BAD_INPUT for duplicates, non-strings or fewer than 2. */
int textcls_labels_load(const char *path, TextClsLabels *out, Err *err);
/* The sorted (bytewise) distinct label names of r. ERR_BAD_INPUT when fewer than 2. */
int textcls_labels_sorted(const TextClsRaw *r, TextClsLabels *out, Err *err);
/* Id of name, or -1. */
int textcls_label_id(const TextClsLabels *l, const char *name);
/* Frees the names (not the struct). */
void textcls_labels_free(TextClsLabels *l);
/* Label ids of every example of r into ids[r->n]; ERR_BAD_INPUT naming the first
** label not in l (and its row). */
int textcls_map_labels(const TextClsRaw *r, const TextClsLabels *l, int32_t *ids, Err *err);

/* A seeded held-out split of n examples: the first n_valid = max(1, round(n *
** fraction)) of the permutation rng_split(seed, TEXTCLS_SPLIT_STREAM) of [0, n) are
** validation, the rest training; both lists come back in ascending order
** (malloc'd). ERR_INVALID when fraction is not in (0, 1) or n < 2. */
#define TEXTCLS_SPLIT_STREAM 0x73706c6974ULL /* "split" */
int textcls_split(size_t n, double fraction, uint64_t seed, size_t **train_idx, size_t *n_train, size_t **valid_idx,
                  size_t *n_valid, Err *err);

/* Tokenized examples: example i is ids[starts[i] .. starts[i+1]), label labels[i]. */
typedef struct TextClsSet {
  size_t n;
  int32_t *ids;
  size_t *starts;    /* n + 1 */
  int32_t *labels;   /* n; MODEL_IGNORE_LABEL (-100) allowed for unlabelled rows */
  int max_len;       /* the longest example */
} TextClsSet;

/* Frees the arrays (not the struct). */
void textcls_set_free(TextClsSet *s);

/* Batches of a set, in an order fixed by (seed, epoch). */
typedef struct TextClsBatcher TextClsBatcher;

typedef struct TextClsBatcherOptions {
  int batch;             /* rows per batch, >= 1 */
  int shuffle;           /* 1: a new permutation per epoch; 0: the set's order (evaluation) */
  int length_grouped;    /* 1: HF's LengthGroupedSampler: the permutation cut into megabatches of
                         ** 50 x batch, each sorted by length (longest first), so batches hold
                         ** rows of similar length (less padding); needs shuffle */
  int drop_last;         /* 1: a last batch shorter than batch is skipped */
  int32_t pad_id;        /* padding id */
  uint64_t seed;
} TextClsBatcherOptions;

/* A batcher over s (kept by pointer: s must outlive it). ERR_INVALID for bad options. */
TextClsBatcher *textcls_batcher_new(const TextClsSet *s, const TextClsBatcherOptions *o, Err *err);
void textcls_batcher_free(TextClsBatcher *b);
/* Batches per epoch. */
long textcls_batches_per_epoch(const TextClsBatcher *b);
/* Starts epoch e (its order from the seed and e) at batch `position` (for resume). */
void textcls_batcher_seek(TextClsBatcher *b, int epoch, long position);
/* The next batch of the epoch: fills rows (<= batch), seq (the longest row of this
** batch), ids and attention_mask (rows x seq, row-major, pad_id / 0 after each row's
** end), labels (rows) and, when examples is not NULL, the set indices of its rows;
** the arrays must hold batch x s->max_len (ids, mask) and batch (labels, examples).
** Returns 1, or 0 at the epoch's end. */
int textcls_batcher_next(TextClsBatcher *b, int *rows, int *seq, int32_t *ids, int32_t *attention_mask,
                         int32_t *labels, size_t *examples);
/* The epoch's order as set indices: order[0 .. n) (n = the rows the epoch visits). */
size_t textcls_batcher_order(const TextClsBatcher *b, int epoch, size_t *order);

#endif
