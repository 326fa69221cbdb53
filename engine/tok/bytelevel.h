/* The byte-level pieces of HF tokenizers (GPT-2 / RoBERTa): the byte<->char
** alphabet, the ByteLevel pre-tokenizer's split regex, the ByteLevel decoder and
** the offset trimming of RobertaProcessing / the ByteLevel post-processor
** (tokenizers 0.23, pre_tokenizers/byte_level.rs and processors/roberta.rs).
**
** Invariants: the alphabet maps every byte to one code point below 324 (bytes
** 33..126, 161..172, 174..255 to themselves, the other 68 to 256, 257, ... in byte
** order), so a byte-level token is 1 or 2 UTF-8 bytes per raw byte. Offsets are
** byte offsets into the original text (HF's are char offsets).
**
** RobertaProcessing's type ids are all 0, for a single text and for a pair alike
** (`<s> A </s></s> B </s>`: node tokenizers 0.23.2 gives 0 for every position). */
#ifndef MASKD_BYTELEVEL_H
#define MASKD_BYTELEVEL_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/buf.h"

/* Writes the UTF-8 of byte b's alphabet char into out; returns its length (1 or 2). */
int bytelevel_char_of_byte(unsigned char b, char out[2]);
/* The byte whose alphabet char is code point c, or -1 when c is outside the alphabet. */
int bytelevel_byte_of_char(uint32_t c);
/* Turns the byte-level token tok[0..len) back into raw bytes in out (room for len
** bytes); returns the byte count, or -1 when a char is outside the alphabet or the
** text is not valid UTF-8. */
int bytelevel_token_bytes(const char *tok, size_t len, char *out);

/* Splits s[0..n) as HF's ByteLevel pre-tokenizer does with use_regex (the GPT-2
** pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
** matched leftmost-first): the pieces cover s contiguously, so only each piece's
** start byte is written (starts has room for n entries); returns the piece count.
** Invalid UTF-8 is taken one byte at a time as a char of no class (never crashes). */
size_t bytelevel_split(const char *s, size_t n, int32_t *starts);

/* HF's ByteLevel decoder: each token becomes its raw bytes when every char is in the
** alphabet, else its own UTF-8; the concatenation is appended to out converted as
** Rust's String::from_utf8_lossy (each maximal invalid subsequence -> U+FFFD).
** Returns 0, or -1 when memory ran out. */
int bytelevel_decode(Buf *out, const char *const *tokens, int n);

/* Appends raw[0..n) to out as Rust's String::from_utf8_lossy converts it. */
void bytelevel_utf8_lossy(Buf *out, const char *raw, size_t n);

/* Widens each token's byte offsets (offsets[2i], offsets[2i+1]) into s[0..n) to whole
** UTF-8 chars: HF's offsets count chars, so a token holding part of a multi-byte char
** reports the whole char (the start moves back to the char's lead byte, the end on
** past the char's last byte). Apply before bytelevel_trim_offsets, as HF does. */
void bytelevel_char_offsets(const char *s, size_t n, int32_t *offsets, int count);

/* HF's process_offsets (trim_offsets): for token i, leading and trailing 'Ġ' (or
** whitespace) chars move offsets[2i] right and offsets[2i+1] left (never past each
** other); the first token (i == 0 or starting at 0) keeps exactly one leading 'Ġ' when
** add_prefix_space. With the text the offsets point into (text may be NULL), they move
** by that many chars of it, as HF's char offsets do; without, by bytes ('Ġ' counts 1
** byte, a whitespace char its UTF-8 length). */
void bytelevel_trim_offsets(const char *const *tokens, int32_t *offsets, int n, int add_prefix_space, const char *text, size_t text_len);

#endif
