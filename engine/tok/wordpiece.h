/* Layer: engine/tok/ (this folder: Unigram model and trainer, suffix array,
** tokenizer.json) uses engine/core only. (ARCHITECTURE.md)
**
** The WordPiece model of HF tokenizers (models/wordpiece/mod.rs) and its decoder
** (decoders/wordpiece.rs): a vocabulary of tokens with ids, where a token that
** continues a word carries the continuing-subword prefix ("##"); a word is split
** greedily, longest token first, from its start; a word that cannot be covered,
** or is longer than max_input_chars_per_word characters, is one unk token.
**
** Invariants: every token is a distinct string with a distinct id in [0, 2^24);
** ids may have gaps (wordpiece_token gives NULL there). A built model is never
** changed, so every function taking a const WordPiece is thread-safe. */
#ifndef MASKD_WORDPIECE_H
#define MASKD_WORDPIECE_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/core/buf.h"
#include "engine/core/err.h"

typedef struct WordPiece WordPiece;

/* The largest id a vocabulary may use, plus one (ids index arrays). */
#define WORDPIECE_MAX_ID (1 << 24)

/* Builds from tokenizer.json's model object {"type":"WordPiece","unk_token",
** "continuing_subword_prefix","max_input_chars_per_word","vocab":{token: id}};
** refuses (ERR_BAD_INPUT) a missing key, a wrong type, a duplicate or out-of-range id. */
WordPiece *wordpiece_from_json(const json_t *model, Err *err);
/* Builds from n tokens with their ids (vocab.txt gives ids 0..n-1); same refusals. */
WordPiece *wordpiece_new(int n, const char *const *tokens, const int32_t *ids, const char *unk_token,
                         const char *prefix, int max_input_chars_per_word, Err *err);
/* Frees; NULL allowed. */
void wordpiece_free(WordPiece *w);

/* Max id + 1 (0 for an empty vocabulary). */
int wordpiece_size(const WordPiece *w);
/* The number of tokens. */
int wordpiece_count(const WordPiece *w);
/* The id of the token tok[0..len), or -1. */
int wordpiece_token_id(const WordPiece *w, const char *tok, size_t len);
/* The token with this id (NUL-terminated), or NULL when no token has it. */
const char *wordpiece_token(const WordPiece *w, int id);
/* The continuing-subword prefix ("##"; may be ""). */
const char *wordpiece_prefix(const WordPiece *w);
/* The unk token's text (which the vocabulary may lack). */
const char *wordpiece_unk(const WordPiece *w);
/* max_input_chars_per_word. */
int wordpiece_max_chars(const WordPiece *w);

/* Splits one word s[0..len) (valid UTF-8): writes up to cap ids and byte starts within
** the word (starts may be NULL). Returns the count (0 for an empty word); -1 when cap
** is too small; -2 when the word needs the unk token and the vocabulary lacks it
** (HF fails the whole encode then: "Missing [UNK] token from the vocabulary"). */
int wordpiece_encode(const WordPiece *w, const char *s, size_t len, int32_t *ids, int32_t *starts, int cap);

/* HF's WordPiece decoder: appends to out the tokens joined: token i > 0 that starts
** with prefix loses it, any other gets a leading space (token 0 is kept as it is,
** prefix and all); then, when cleanup, each token has HF's cleanup replacements
** applied (" ." -> "." and the like, per token, in HF's order). */
void wordpiece_decode(Buf *out, const char *const *tokens, int n, const char *prefix, int cleanup);

#endif
