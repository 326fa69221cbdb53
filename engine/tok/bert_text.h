/* Layer: engine/tok/ (this folder: Unigram model and trainer, suffix array,
** tokenizer.json) uses engine/core only. (ARCHITECTURE.md)
**
** The BERT text pipeline of HF tokenizers before the model: BertNormalizer and
** BertPreTokenizer (normalizers/bert.rs, pre_tokenizers/bert.rs), on UTF-8 bytes,
** with byte offsets. The character properties are engine/tok/unicode.h's, which
** follow HF's crates code point by code point (tests/cli/test_unicode_hf.sh).
**
** Invariants: the input is valid UTF-8 (the caller checked it) and under 2 GB
** (offsets are int32_t), and every output is valid UTF-8; nothing here allocates or keeps state, so every function is thread-safe. */
#ifndef MASKD_BERT_TEXT_H
#define MASKD_BERT_TEXT_H
#include <stddef.h>
#include <stdint.h>

/* BertNormalizer's options; strip_accents is 1, 0, or -1 for JSON null (then it
** follows lowercase, as HF does). */
typedef struct BertNormalizer {
  int clean_text, handle_chinese_chars, strip_accents, lowercase;
} BertNormalizer;

/* The most output bytes bert_normalize writes for n input bytes. */
size_t bert_normalize_bound(size_t n);
/* The bytes of scratch memory bert_normalize needs for n input bytes. */
size_t bert_normalize_scratch_bytes(size_t n);
/* Normalises s[0..n) as HF does (clean_text, then spaces around CJK ideographs, then
** NFD over the whole text and removal of nonspacing marks, then to_lowercase per
** character) into out (bert_normalize_bound(n) bytes); from[j] (same room) is the
** byte offset in s of the character output byte j came from. Returns the output length. */
size_t bert_normalize(const BertNormalizer *bn, const char *s, size_t n, char *out, int32_t *from, void *scratch);

/* Splits s[0..n) into words as BertPreTokenizer does: whitespace separates and is
** dropped, each punctuation character is a word of its own. Writes [start, end)
** byte ranges as bounds[2k], bounds[2k+1] (room for 2n) and returns the count. */
size_t bert_pretokenize(const char *s, size_t n, int32_t *bounds);

/* HF's is_chinese_char: the CJK ideograph blocks handle_chinese_chars isolates. */
int bert_is_chinese_char(uint32_t c);
/* BertPreTokenizer's punctuation: ASCII punctuation or Unicode P*. */
int bert_is_punctuation(uint32_t c);

#endif
