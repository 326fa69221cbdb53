/* A model folder's tokenizer as transformers reads it: tokenizer.json when there is
** one, else the files of the slow tokenizers it converts (transformers'
** convert_slow_tokenizer: BertConverter from vocab.txt, RobertaConverter from
** vocab.json + merges.txt), with tokenizer_config.json and special_tokens_map.json
** beside them; then what the fast class's __init__ changes (BertTokenizerFast: the
** BertNormalizer's options; RobertaTokenizerFast: add_prefix_space, trim_offsets). The side files also carry what transformers, not the tokenizer,
** decides: the mask and pad tokens' names and clean_up_tokenization_spaces. */
#ifndef MASKD_TOKENIZER_FILES_H
#define MASKD_TOKENIZER_FILES_H
#include <stddef.h>
#include "engine/core/err.h"
#include "engine/tok/tokenizer.h"

/* The largest tokenizer_config.json / special_tokens_map.json read. */
#define TOKENIZER_MAX_SIDE_FILE ((size_t)1 << 20)
/* The largest vocab.txt, vocab.json or merges.txt read. */
#define TOKENIZER_MAX_VOCAB_FILE ((size_t)64 << 20)

/* What the side files say; special_tokens_map.json's roles win over tokenizer_config.json's,
** as transformers reads them in that order. */
typedef struct TokenizerSide {
  char mask_token[256], pad_token[256];   /* "" when neither file names one */
  int clean_up_spaces;                    /* 1, 0, or -1 when tokenizer_config.json does not say */
} TokenizerSide;

/* Parses the two side files' texts (either may be NULL); a text that is not a JSON object,
** or a clean_up_tokenization_spaces that is not a boolean, is ERR_BAD_INPUT. */
int tokenizer_side_parse(const char *config, size_t clen, const char *map, size_t mlen, TokenizerSide *side, Err *err);
/* Reads DIR/tokenizer_config.json and DIR/special_tokens_map.json (each optional: NULL when
** absent; a present one must be a regular file of at most TOKENIZER_MAX_SIDE_FILE bytes). */
int tokenizer_side_read(const char *dir, char **config, size_t *clen, char **map, size_t *mlen, Err *err);
/* The tokenizer of a folder: tokenizer.json, else vocab.txt, else vocab.json + merges.txt;
** a folder with none of them is ERR_NOT_FOUND, naming the files looked for. */
Tokenizer *tokenizer_load_dir(const char *dir, Err *err);
/* tokenizer_load() for a tokenizer.json file, tokenizer_load_dir() for a folder. */
Tokenizer *tokenizer_load_path(const char *path, Err *err);

#endif
