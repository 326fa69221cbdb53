/* The BPE model of HF tokenizers (models/bpe), byte-level only: the vocabulary of
** byte-level token strings (GPT-2's alphabet, engine/tok/bytelevel.h), the ranked
** merges, and BPE of one pre-token given as RAW bytes.
**
** Invariants: ids are unique and in [0, bpe_size()); every merge's parts and
** result are in the vocabulary; a pair of ids has at most one merge (a repeated
** merge keeps its last rank, as HF's HashMap does). A word starts as one symbol per
** byte (the byte's alphabet char as a token); a byte whose char is not a token
** becomes the unk token (consecutive ones fused when fuse_unk) or, without an unk
** token, is dropped, as HF does. Then the adjacent pair with the lowest rank merges,
** the leftmost of equal ones first, until no pair has a merge. Tokens whose strings
** hold chars outside the alphabet keep their ids but no byte sequence reaches them.
**
** Refused by name (ERR_BAD_INPUT): dropout other than null or 0, a non-empty
** continuing_subword_prefix or end_of_word_suffix, byte_fallback true, a merge
** whose parts or result are not tokens (as HF refuses), an unk_token that is not a
** token (HF refuses it only when a text needs it), two tokens with one id (HF
** keeps either). */
#ifndef MASKD_BPE_H
#define MASKD_BPE_H
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

typedef struct Bpe Bpe;

/* Builds the model from tokenizer.json's "model" object ({"type":"BPE", "vocab":
** {tok: id}, "merges": ["a b", ...] or [["a","b"], ...] (node tokenizers 0.23 writes
** pairs), "unk_token", "fuse_unk", "ignore_merges", ...}); NULL with err when refused. */
Bpe *bpe_from_json(const json_t *model, Err *err);
/* Builds the model from the legacy files' texts: vocab.json ({tok: id}) and
** merges.txt (one "a b" per line, "\n" or "\r\n"; lines starting "#version" are
** skipped; any other line, a blank one included, that is not two parts split on one
** space is refused with its line number among the merges, as HF's BPE::from_file). */
Bpe *bpe_from_files_text(const char *vocab_json, size_t vlen, const char *merges_txt, size_t mlen, Err *err);
/* Frees; NULL allowed. */
void bpe_free(Bpe *b);

/* Max id + 1. */
int bpe_size(const Bpe *b);
/* The id of the token whose byte-level string is tok[0..len), or -1. */
int bpe_token_id(const Bpe *b, const char *tok, size_t len);
/* The byte-level string of token id (NUL-terminated), or NULL when no token has it. */
const char *bpe_token(const Bpe *b, int id);
/* The unk token's string, or NULL when the model has none. */
const char *bpe_unk(const Bpe *b);
/* Number of merges (ranks are 0 .. this - 1, with gaps where a merge repeated). */
int bpe_merge_count(const Bpe *b);

/* Bytes of scratch bpe_encode needs for a word of len bytes (aligned as malloc's). */
size_t bpe_scratch_bytes(size_t len);
/* BPE of one pre-token's raw bytes s[0..len): writes the token ids and each token's
** byte span within s (spans[2i] start, spans[2i+1] end; spans may be NULL); returns
** the count (0 for len 0), or -1 when more than cap tokens result. The spans tile s
** unless bytes were dropped (no unk token): then they are HF's, which shift the
** tokens after a dropped byte left. With ignore_merges a word that is a token is that
** token. Allocates nothing; scratch holds bpe_scratch_bytes(len). Thread-safe. */
int bpe_encode(const Bpe *b, const char *s, size_t len, int32_t *ids, int32_t *spans, int cap, void *scratch);

#endif
