/* Unigram tokenizer training, the algorithm of HF tokenizers' UnigramTrainer
** (models/unigram/trainer.rs, itself SentencePiece's unigram_model_trainer.cc):
** words with counts -> seed pieces (all characters + frequent substrings from a
** suffix array) -> rounds of EM (forward-backward expected counts, digamma
** update) and loss-based pruning -> a vocabulary with log-probability scores.
**
** Input text goes through the seed tokenizer's front end before counting: the
** normalizer Replace("``" -> "\"") then Replace("''" -> "\""), then Metaspace
** (spaces become U+2581 "▁", one is prepended when the text does not start with
** it, and the text splits before every "▁"). A line keeps its "\n", as HF's
** file trainer reads it. */
#ifndef MASKD_UNIGRAM_TRAINER_H
#define MASKD_UNIGRAM_TRAINER_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/core/report.h"

typedef struct UtOptions {
  int vocab_size;                    /* final size, special tokens included (8000) */
  int max_piece_length;              /* in characters (16) */
  double shrinking_factor;           /* share of pieces kept by one pruning (0.75) */
  int seed_size;                     /* seed pieces, characters included (1,000,000) */
  int n_sub_iterations;              /* EM rounds between prunings (2) */
  int threads;                       /* 0: one per CPU; the result is the same on any count */
  const char *const *special_tokens; /* placed first with score 0, in this order */
  int n_special;
  const char *unk_token;             /* NULL: none; added at id 0 when not a special token */
  int progress;                      /* progress lines on stderr */
  int seed_distinct;                 /* 1: a substring's seed frequency counts distinct words (HF);
                                        0: every occurrence, weighted by word count (default) */
  ReportFn report;                   /* NULL, or told each phase: "seeding", "EM iterations" (k of
                                        the expected n), "pruning" (round k of n) */
  void *report_ctx;
} UtOptions;

/* Fills the defaults above, with no special tokens, unk_token NULL, progress off. */
void ut_options_default(UtOptions *o);

/* ---- word counts ---------------------------------------------------------- */

typedef struct UtWords UtWords;

/* An empty word-count table; NULL when out of memory. */
UtWords *ut_words_new(void);
/* Frees the table; NULL allowed. */
void ut_words_free(UtWords *w);
/* Adds `count` occurrences of one already pre-tokenised word (valid UTF-8, no NUL). */
int ut_words_add(UtWords *w, const char *word, size_t len, uint64_t count, Err *err);
/* Normalises and pre-tokenises text (valid UTF-8, no NUL: checked) and counts its words. */
int ut_words_add_text(UtWords *w, const char *text, size_t len, Err *err);
/* The longest line ut_words_add_file() reads: one document per line is fine, a gigabyte
** without a newline (or /dev/zero) is not. */
#define UT_MAX_LINE ((size_t)64 << 20)
/* Counts the words of every line of a file on `threads` threads (0: one per CPU);
** the table ends up as a sequential read would leave it. Errors name the file and line.
** path must be a regular file (a FIFO or a device is refused before reading); a line
** over UT_MAX_LINE bytes is refused. */
int ut_words_add_file(UtWords *w, const char *path, int threads, Err *err);
/* ut_words_add_file() reports each block it has counted to fn (NULL: none) as "reading":
** base + the file's bytes counted so far, of total, in bytes. Set it again for each file. */
void ut_words_set_report(UtWords *w, ReportFn fn, void *ctx, double base, double total);
/* Reads files in blocks of this many bytes (default 32 MiB; 0 restores it); for tests. */
void ut_words_set_read_block(size_t bytes);
/* Number of distinct words. */
size_t ut_words_unique(const UtWords *w);
/* Total number of words counted. */
uint64_t ut_words_total(const UtWords *w);
/* The i-th distinct word (insertion order) and its count; *len gets its byte length. */
const char *ut_words_get(const UtWords *w, size_t i, size_t *len, uint64_t *count);

/* ---- training ------------------------------------------------------------- */

typedef struct UtResult {
  int n;            /* vocabulary size */
  char **pieces;    /* NUL-terminated UTF-8 */
  double *scores;
  int unk_id;       /* -1 when there is no unknown token */
} UtResult;

/* Trains a vocabulary on the counted words. Returns 0 or -1 (empty corpus, vocab
** smaller than specials plus alphabet, bad options, out of memory). */
int ut_train(const UtWords *w, const UtOptions *o, UtResult *out, Err *err);
/* Frees a result's arrays (the struct itself is the caller's). */
void ut_result_free(UtResult *r);

/* ---- the steps, for tests ------------------------------------------------- */

/* Digamma as HF computes it: recurrence up to x >= 7, then the asymptotic series. */
double ut_digamma(double x);

typedef struct UtState UtState;

/* Seeds a training state: piece 0 is the training-only "<UNK>" (score NaN), then
** characters by count, then substrings by count x length. NULL on error. */
UtState *ut_state_new(const UtWords *w, const UtOptions *o, Err *err);
/* Frees the state; NULL allowed. */
void ut_state_free(UtState *s);
/* Current number of pieces (the training <UNK> included). */
int ut_state_size(const UtState *s);
/* Piece i as UTF-8 (not NUL-terminated) and its byte length. */
const char *ut_state_piece(const UtState *s, int i, size_t *len);
/* Score (log probability) of piece i. */
double ut_state_score(const UtState *s, int i);
/* Forces the log-space forward-backward (the default switches to it only for
** words long enough to underflow probabilities); for tests. */
void ut_state_set_logspace(UtState *s, int on);
/* E-step: expected[0..size) gets each piece's expected count over the corpus
** (count-weighted marginals); returns sum over words of count x log Z. */
double ut_state_estep(UtState *s, double *expected);
/* M-step: drops pieces whose expected count is below 0.5 (<UNK> stays) and sets
** score = digamma(count) - digamma(total). Returns 0 or -1. */
int ut_state_mstep(UtState *s, const double *expected, Err *err);
/* One pruning round (alternatives, Viterbi frequencies, loss, keep the best
** max(1.1 vocab, shrinking x size)). Returns 0 or -1. */
int ut_state_prune(UtState *s, Err *err);
/* Final vocabulary: specials, required characters, best pieces up to vocab_size. */
int ut_state_finalize(UtState *s, UtResult *out, Err *err);

#endif
