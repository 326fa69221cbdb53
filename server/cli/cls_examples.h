/* Text-classification examples made model input: each text tokenized with its template
** ([CLS] ... [SEP]) and cut to a length as HF's truncation=True cuts it (text tokens dropped
** from the end, the template's last token kept last). maskd finetune and maskd evaluate
** read their data files (engine/data/textcls.h) and turn them into sets with this. */
#ifndef MASKD_CLS_EXAMPLES_H
#define MASKD_CLS_EXAMPLES_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/data/textcls.h"
#include "engine/tok/tokenizer.h"

/* Tokenizes raw's texts once (threads) and fills out[k] (k < n_out) with the examples
** idx[k][0..n_idx[k]) (all of raw, in order, when idx[k] is NULL), labels[i] the label id
** of raw's example i, each cut to max_len tokens (>= 2). 0, or -1 with e set (ERR_NOMEM,
** the tokenizer's errors); out[k] is empty (freeable) on failure. */
int cls_examples_tokenize(const Tokenizer *tok, const TextClsRaw *raw, const int32_t *labels, int threads, int max_len,
                          const size_t *const idx[], const size_t n_idx[], TextClsSet *const out[], int n_out, Err *e);

#endif
