/* The Unigram language model of SentencePiece / HF tokenizers: pieces with log
** probabilities, a trie over them, and the lattice algorithms on one word
** (an already normalised, pre-tokenised byte string): Viterbi for encoding,
** forward-backward for EM training. Unknown characters score min_score - 10
** and consecutive unknowns fuse into one <unk>, as HF's Unigram model does. */
#ifndef MASKD_UNIGRAM_H
#define MASKD_UNIGRAM_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

typedef struct Unigram Unigram;

/* Builds a model from n pieces (UTF-8) and scores; unk_id in [0,n) or -1 for none. */
Unigram *unigram_new(int n, const char *const *pieces, const double *scores, int unk_id, Err *err);
/* Frees the model; NULL allowed. */
void unigram_free(Unigram *u);
/* Number of pieces. */
int unigram_size(const Unigram *u);
/* The piece with this id (NUL-terminated). */
const char *unigram_piece(const Unigram *u, int id);
/* The score (log probability) of this id. */
double unigram_score(const Unigram *u, int id);
/* The id of this exact piece, or -1. */
int unigram_piece_id(const Unigram *u, const char *piece, size_t len);
/* The unknown id, or -1. */
int unigram_unk_id(const Unigram *u);
/* The smallest score over all pieces (unknown characters score this minus 10). */
double unigram_min_score(const Unigram *u);

/* Viterbi segmentation of s[0..len): writes up to cap ids and byte start offsets
** (starts may be NULL); returns the number of tokens, or -1 when cap is too small
** or s contains a character no piece covers and there is no unk id. */
int unigram_encode(const Unigram *u, const char *s, size_t len, int32_t *ids, int32_t *starts, int cap);
/* Like unigram_encode, but the single piece `banned_id` may not be used (pruning's
** "best segmentation without this piece"); returns -1 when none exists. Unknown
** nodes are not fused here, and a banned single-character piece still counts as
** covering its character (no unk node replaces it), so a one-character piece has
** no alternative, as in HF's 2-best. */
int unigram_encode_without(const Unigram *u, const char *s, size_t len, int banned_id, int32_t *ids, int cap);
/* Forward-backward over the lattice of s: adds freq * marginal count of each piece
** into expected[0..size) (unknown nodes count for the unk id; expected may be NULL);
** returns log Z (the log-partition of the lattice), -inf when no path exists
** (an uncovered character and no unk id), 0 for the empty string. Thread-safe. */
double unigram_expected_counts(const Unigram *u, const char *s, size_t len, double freq, double *expected);

#endif
