/* Layer: engine/tok/ (this folder: Unigram, WordPiece and byte-level BPE models,
** the Unigram trainer, suffix array, tokenizer.json) uses engine/core only. (ARCHITECTURE.md)
**
** The tokenizer pipeline of HF tokenizers, read from and written to tokenizer.json,
** for the three families a BERT / RoBERTa / ALBERT-style masked LM ships with:
**   added/special tokens matched in the raw text;
**   normalizer: a Sequence of string Replace, or BertNormalizer (bert_text.h);
**   pre-tokenizer: Metaspace, BertPreTokenizer, or ByteLevel (bytelevel.h);
**   model: Unigram (unigram.h), WordPiece (wordpiece.h), or byte-level BPE (bpe.h);
**   post-processor: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel;
**   decoder: Metaspace, WordPiece, or ByteLevel.
** Anything else in a tokenizer.json is refused by name, never approximated.
** Offsets are byte offsets into the original text, as HF computes them (HF counts
** characters; the spans are the same). A Unigram tokenizer is written back in HF's
** layout from its parts; a WordPiece or BPE one as the JSON it was read from. */
#ifndef MASKD_TOKENIZER_H
#define MASKD_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/tok/unigram.h"

typedef struct Tokenizer Tokenizer;

/* The model a tokenizer runs, which also says how transformers wraps it. */
typedef enum {
  TOKENIZER_UNIGRAM = 0,   /* maskd's own (the TPU guide's recipe): AlbertTokenizerFast */
  TOKENIZER_WORDPIECE,     /* BERT: BertTokenizerFast */
  TOKENIZER_BPE            /* RoBERTa's byte-level BPE: RobertaTokenizerFast */
} TokenizerFamily;

/* One encoded text; reused across calls (arrays and scratch grow, never shrink). */
typedef struct Encoding {
  int n;                 /* tokens */
  int32_t *ids;
  int32_t *type_ids;
  int32_t *offsets;      /* 2 per token: byte start, end in the original text ((0,0) for template tokens) */
  int32_t *cut;          /* 2 per token: an added token's span of the text it was matched in, its stripped
                         ** whitespace included (trim_offsets may narrow offsets); for a normalized one
                         ** -2 - k and a length: its normalized text, at k of the private strings;
                         ** -1, -1 for other tokens */
  uint8_t *special;      /* 1 for tokens the post-processor added */
  int cap;
  void *work;            /* private scratch */
} Encoding;

/* The largest tokenizer.json read: a 250,000-piece vocabulary is under 20 MB. */
#define TOKENIZER_MAX_FILE ((size_t)256 << 20)

/* Reads a tokenizer.json file (a regular file of at most TOKENIZER_MAX_FILE bytes). */
Tokenizer *tokenizer_load(const char *path, Err *err);
/* Parses tokenizer.json text; a refusal is ERR_BAD_INPUT. */
Tokenizer *tokenizer_from_json(const char *text, size_t len, Err *err);
/* The seed recipe around a Unigram vocabulary: normalizer Replace ``->" and ''->",
** Metaspace ("▁", prepend always, split) pre-tokenizer and decoder, pieces[0..n_special)
** as special added tokens ("[MASK]" with lstrip, as AlbertTokenizerFast saves it),
** TemplateProcessing "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B:1 [SEP]:1" when both exist. */
Tokenizer *tokenizer_new_seed(int n, const char *const *pieces, const double *scores, int unk_id, int n_special, Err *err);
/* Frees; NULL allowed. */
void tokenizer_free(Tokenizer *t);

/* tokenizer.json text in HF's layout and key order (malloc'd, NUL-terminated). */
char *tokenizer_to_json(const Tokenizer *t, Err *err);
/* Writes tokenizer.json to path, atomically (a temporary beside it, then a rename). */
int tokenizer_save(const Tokenizer *t, const char *path, Err *err);
/* The texts of tokenizer_config.json and special_tokens_map.json as transformers saves
** them for the fast tokenizer of t's family (tokenizer_class_name) around t (both malloc'd).
** max_length: the model's most tokens (config_max_tokens), written as model_max_length,
** which truncation=True cuts to in transformers; 0 for a tokenizer without a model,
** which gets transformers' own "no limit" (int(1e30)). */
int tokenizer_pretrained_json(const Tokenizer *t, int max_length, char **config, char **special_map, Err *err);
/* Writes tokenizer.json, tokenizer_config.json and special_tokens_map.json into dir
** (which must exist): all three or, on any error, none of them is replaced. max_length
** as tokenizer_pretrained_json's. */
int tokenizer_save_pretrained(const Tokenizer *t, int max_length, const char *dir, Err *err);

/* The Unigram model, or NULL for a WordPiece or BPE tokenizer. */
const Unigram *tokenizer_model(const Tokenizer *t);
/* Which model the tokenizer runs. */
TokenizerFamily tokenizer_family(const Tokenizer *t);
/* transformers' class for this family ("AlbertTokenizer", "BertTokenizer", "RobertaTokenizer"). */
const char *tokenizer_class_name(const Tokenizer *t);
/* The special token fill-mask looks for: "[MASK]" or "<mask>" (whichever is a special
** added token, "[MASK]" first), or NULL when there is none. */
const char *tokenizer_mask_token(const Tokenizer *t);
/* The padding token: "<pad>" (maskd's, RoBERTa's) or "[PAD]" (BERT's), whichever the vocabulary
** has, "<pad>" first; NULL when neither. */
const char *tokenizer_pad_token(const Tokenizer *t);
/* The family's sequence-start and separator tokens, which a model config takes as its
** bos_token_id and eos_token_id: "[CLS]" and "[SEP]" (Unigram: AlbertTokenizer's bos
** and eos; WordPiece), "<s>" and "</s>" (byte-level BPE: RobertaTokenizer's), when the
** vocabulary has it; else NULL. */
const char *tokenizer_cls_token(const Tokenizer *t);
const char *tokenizer_sep_token(const Tokenizer *t);
/* Vocabulary size with added tokens (max id + 1). */
int tokenizer_vocab_size(const Tokenizer *t);
/* Id of a token (added tokens first, then model pieces), or -1. */
int tokenizer_token_to_id(const Tokenizer *t, const char *token);
/* Text of an id (added tokens first; a normalized one's normalized, as HF's map holds
** it), or NULL when out of range. */
const char *tokenizer_id_to_token(const Tokenizer *t, int id);
/* 1 when id is a special added token. */
int tokenizer_is_special(const Tokenizer *t, int id);
/* The content of added token id as its file gives it, or NULL when id is no added token.
** (A normalized one's tokenizer_id_to_token is its normalized text, which need not look
** up again: HF's token_to_id finds contents and model pieces only.) */
const char *tokenizer_added_content(const Tokenizer *t, int id);

/* Encodes text[0..len) (must be valid UTF-8); add_special applies the post-processor. */
int tokenizer_encode(const Tokenizer *t, const char *text, size_t len, int add_special, Encoding *enc, Err *err);
/* Encodes a pair (type ids 0/1 as the pair template says). */
int tokenizer_encode_pair(const Tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                          int add_special, Encoding *enc, Err *err);
/* How a too-long input is cut (HF tokenizers' TruncationStrategy; the cut is always
** from the right, HF's default direction). */
typedef enum TokTruncation {
  TOK_TRUNC_NONE = 0,          /* do_not_truncate */
  TOK_TRUNC_LONGEST_FIRST,     /* the longer sequence first; both halved when both must go */
  TOK_TRUNC_ONLY_FIRST,        /* the first sequence only */
  TOK_TRUNC_ONLY_SECOND        /* the second sequence only */
} TokTruncation;
/* The tokens the post-processor adds around one sequence (pair 0) or a pair (pair 1). */
int tokenizer_added_tokens(const Tokenizer *t, int pair);
/* Encodes a (b NULL: alone) or the pair a, b with special tokens, cut first by `how`
** to at most max_len tokens with the template's own counted, as HF's encode() does with
** truncation set (the cut sequences then get the template). ERR_BAD_INPUT, with HF's
** reasons, when it cannot: max_len under the template's tokens, only_first/only_second
** on a sequence too short to give up enough, only_second without a second sequence. */
int tokenizer_encode_truncated(const Tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                               int max_len, TokTruncation how, Encoding *enc, Err *err);
/* "longest_first", "only_first", "only_second", "do_not_truncate" into *out: 0, else -1. */
int tokenizer_truncation_parse(const char *name, TokTruncation *out);
/* Encoding.getTokens()'s string of token i of e (encoded from text, one sequence):
** the vocabulary's, except that an added token's is the text it was cut from (the
** whitespace lstrip / rstrip took included; for a normalized one, that text
** normalized), as HF reports it. *len gets its length
** (the string is not NUL-terminated in the text's case). */
const char *tokenizer_token_string(const Tokenizer *t, const Encoding *e, int i, const char *text, size_t *len);
/* Frees an Encoding's arrays (not the struct). */
void encoding_free(Encoding *enc);

/* Ids of many texts, encoded on `threads` threads (0: all CPUs). On success
** *ids_out holds all ids back to back and *starts_out[i]..[i+1] delimits text i
** (n+1 entries, malloc'd). On failure err names the first failing text's index. */
int tokenizer_encode_many(const Tokenizer *t, const char *const *texts, const size_t *lens, size_t n,
                          int add_special, int threads, int32_t **ids_out, size_t **starts_out, Err *err);

/* Decodes ids to text (malloc'd): ids to tokens, special tokens dropped when
** skip_special, then the decoder (or tokens joined by spaces without one).
** Unknown ids are skipped, as HF does. */
char *tokenizer_decode(const Tokenizer *t, const int32_t *ids, int n, int skip_special, Err *err);
/* tokenizer_decode() with the text's length in *len: a byte-level text may hold NUL bytes. */
char *tokenizer_decode_len(const Tokenizer *t, const int32_t *ids, int n, int skip_special, size_t *len, Err *err);

/* transformers' clean_up_tokenization (applied by decode when the tokenizer config
** says clean_up_tokenization_spaces): " ." -> ".", " ?", " !", " ,", " ' " -> "'",
** " n't", " 'm", " 's", " 've", " 're", each replaced left to right in that order.
** Rewrites the n bytes at s in place (it only shrinks; NUL bytes are text like any
** other, as a byte-level decode may hold them) and returns the new length, after
** which it puts a NUL. */
size_t tokenizer_clean_up_spaces(char *s, size_t n);

/* What training sees of a text, as HF's trainer does: the normalizer then the
** pre-tokenizer over the whole text (no added-token matching); calls word() for
** every pre-token. Returns 0, or -1 on invalid UTF-8. */
int tokenizer_pretokenize(const Tokenizer *t, const char *text, size_t len,
                          void (*word)(void *ctx, const char *w, size_t n), void *ctx, Err *err);

/* 1 when s[0..len) is valid UTF-8 (no surrogates, no overlongs); else 0 and the
** byte offset of the first bad byte in *bad (may be NULL). */
int tokenizer_utf8_valid(const char *s, size_t len, size_t *bad);

#endif
