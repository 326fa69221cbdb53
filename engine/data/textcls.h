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
  long *lines;       /* n: the line each example starts on (NULL: not known, for a set built in memory) */
  char *path;        /* the file read (NULL: not known) */
} TextClsRaw;

/* Reads a CSV file (RFC 4180: a header row, quoted fields with "" escapes and
** embedded newlines, CRLF, LF or CR line ends, a leading UTF-8 BOM skipped, empty
** lines skipped as Python's DictReader skips them), a JSON Lines file (one object
** per line, blank lines skipped; the label may be a string or an integer, written
** as its decimal text) or a JSON array of such objects (pandas' to_json(orient=
** "records"), HF datasets' to_json(lines=False)): ".jsonl" (any case) is JSON Lines,
** ".json" an array when its first byte after spaces (and a BOM) is '[', else JSON
** Lines; anything else CSV. An array's errors give the line where the record starts
** and its row (its index + 1), as the other formats give theirs. text_column and label_column name the fields. Where Python's csv
** guesses, this refuses: text after a closing quote (`"a"b`); a quote inside an
** unquoted field is a character, as there. ERR_BAD_INPUT, one line naming the file,
** the line where the record starts (and the row) and the reason, for a missing
** column (naming those there are), a column named twice, a row with the wrong field
** count, an unclosed quote, an empty text or label, a text or label that is not
** UTF-8 or holds a NUL, any other field that is not UTF-8, an empty file, a header
** without rows; ERR_INVALID for an empty column name; files_read_all's kinds
** (ERR_NOT_FOUND, ERR_TOO_LARGE, ERR_IO) when it cannot be read. */
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
** features.label). ERR_BAD_INPUT for duplicates, non-strings, empty names or fewer
** than 2, each message "PATH:LINE: ..." (the line of the name, or of the value). */
int textcls_labels_load(const char *path, TextClsLabels *out, Err *err);
/* The distinct label names of r, sorted: by value when every one is an integer ("0".."11"
** give ids 0..11), else bytewise. ERR_BAD_INPUT when fewer than 2. */
int textcls_labels_sorted(const TextClsRaw *r, TextClsLabels *out, Err *err);
/* Id of name, or -1. */
int textcls_label_id(const TextClsLabels *l, const char *name);
/* Frees the names (not the struct). */
void textcls_labels_free(TextClsLabels *l);
/* How a run's label cells name their labels: by name, or as ids 0..n-1 into the names
** (an integer column beside its ClassLabel names, as HF datasets writes it to CSV). */
typedef enum { TEXTCLS_BY_NAME, TEXTCLS_BY_ID } TextClsReading;
/* Whether label cells may be ids, and what wins when every cell could be either. */
typedef enum {
  TEXTCLS_NAMES_ONLY,     /* names only (fine-tuning without a labels file: the names are the cells) */
  TEXTCLS_IDS_AGREEING,   /* ids too (fine-tuning beside a labels file); all names and all ids: the readings must agree */
  TEXTCLS_NAMES_FIRST     /* ids too (scoring against a model's labels); all names: by name, as the run read them */
} TextClsIds;
/* One reading for all n files of a run, so a cell means one label in every file: by id
** only when ids allows it, every cell of every file is an integer, and some cell is no
** name; else by name. Under TEXTCLS_IDS_AGREEING, ERR_BAD_INPUT, *bad_file the file,
** when the cells are all names and all ids and the two readings differ. */
int textcls_label_reading(const TextClsRaw *const *files, int n, const TextClsLabels *l, TextClsIds ids,
                          TextClsReading *out, int *bad_file, Err *err);
/* Label ids of every example of r into ids[r->n], read as how says. A cell names a
** label exactly or, failing that, with the whitespace around it stripped, as HF
** datasets' ClassLabel.str2int retries (so " card_arrival" is card_arrival beside a
** labels file; without one, textcls_labels_sorted keeps cells as they are, as
** class_encode_column does). ERR_BAD_INPUT naming the first label that is no name, or
** no id in [0, l->n), with r's file and line when r has them (and its row). */
int textcls_map_labels(const TextClsRaw *r, const TextClsLabels *l, TextClsReading how, int32_t *ids, Err *err);

/* A seeded held-out split of n examples: the first n_valid = round(n x fraction),
** clamped to [1, n - 1], of the permutation p of [0, n) are validation, the rest
** training; both lists come back in ascending order (malloc'd). p is Fisher-Yates
** from the identity, for i = n-1 down to 1 swapping p[i] and p[rng_below(&r, i+1)],
** with r = rng_split(&g, TEXTCLS_SPLIT_STREAM) where rng_seed(&g, seed). ERR_INVALID
** when fraction is not in (0, 1), n < 2 or n > UINT32_MAX. */
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
  int length_grouped;    /* 1: HF's LengthGroupedSampler (get_length_grouped_indices): the
                         ** permutation cut into megabatches of min(n / (4 x batch), 50) x batch
                         ** (at least batch), each sorted by length, longest first, ties in
                         ** permutation order; then the first row of the megabatch whose first
                         ** row is longest (the earliest such) swaps with row 0, so the first
                         ** batch holds a longest row. Less padding per batch; needs shuffle */
  int drop_last;         /* 1: a last batch shorter than batch is skipped */
  int32_t pad_id;        /* padding id */
  uint64_t seed;
} TextClsBatcherOptions;

/* A batcher over s (kept by pointer: s must outlive it), at epoch 0, batch 0. Epoch e's
** order without length grouping is the Fisher-Yates of textcls_split over
** rng_split(&g, e), rng_seed(&g, seed). Everything is allocated here. ERR_INVALID for
** bad options, an empty set, an example that is empty or longer than s->max_len, or
** drop_last with fewer than batch examples; ERR_NOMEM. */
TextClsBatcher *textcls_batcher_new(const TextClsSet *s, const TextClsBatcherOptions *o, Err *err);
void textcls_batcher_free(TextClsBatcher *b);
/* Batches per epoch: n / batch with drop_last, else rounded up. */
long textcls_batches_per_epoch(const TextClsBatcher *b);
/* Starts epoch e (its order from the seed and e) at batch `position` (for resume),
** clamped to [0, batches per epoch]. */
void textcls_batcher_seek(TextClsBatcher *b, int epoch, long position);
/* The next batch of the epoch: fills rows (<= batch), seq (the longest row of this
** batch), ids and attention_mask (rows x seq, row-major, pad_id / 0 after each row's
** end), labels (rows) and, when examples is not NULL, the set indices of its rows;
** the arrays must hold batch x s->max_len (ids, mask) and batch (labels, examples);
** attention_mask, labels and examples may be NULL. Allocates nothing. Returns 1, or
** 0 at the epoch's end (and again until the next seek). */
int textcls_batcher_next(TextClsBatcher *b, int *rows, int *seq, int32_t *ids, int32_t *attention_mask,
                         int32_t *labels, size_t *examples);
/* Epoch e's order as set indices into order (which must hold s->n); returns the rows
** the epoch visits (n, or batches x batch with drop_last), the first ones of order.
** Uses the batcher's scratch: not concurrently with another call on b. */
size_t textcls_batcher_order(const TextClsBatcher *b, int epoch, size_t *order);

#endif
