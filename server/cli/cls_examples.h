/* Text-classification examples made model input, and their scores as JSON: each text
** tokenized with its template ([CLS] ... [SEP]) and cut to a length as HF's truncation=True
** cuts it (text tokens dropped from the end, the template's last token kept last); the hash
** that names a held-out split; an evaluation's metrics and confusions. maskd finetune and
** maskd evaluate share these, so a run's records and a later evaluation read alike. */
#ifndef MASKD_CLS_EXAMPLES_H
#define MASKD_CLS_EXAMPLES_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "engine/core/err.h"
#include "engine/data/textcls.h"
#include "engine/nn/config.h"
#include "engine/tok/tokenizer.h"
#include "engine/train/finetune.h"

/* Tokenizes raw's texts once (threads) and fills out[k] (k < n_out) with the examples
** idx[k][0..n_idx[k]) (all of raw, in order, when idx[k] is NULL), labels[i] the label id
** of raw's example i, each cut to max_len tokens (>= 2). 0, or -1 with e set (ERR_NOMEM,
** the tokenizer's errors); out[k] is empty (freeable) on failure. */
int cls_examples_tokenize(const Tokenizer *tok, const TextClsRaw *raw, const int32_t *labels, int threads, int max_len,
                          const size_t *const idx[], const size_t n_idx[], TextClsSet *const out[], int n_out, Err *e);

/* The sha256 (hex) of held-out indices idx[0..n) written in decimal, comma-separated: what a
** fine-tuning run records of its split, and what maskd evaluate checks a rebuilt split against. */
int cls_examples_split_sha256(const size_t *idx, size_t n, char hex[65], Err *e);
/* The sha256 (hex) of the held-out rows themselves: for each idx[k] in order, its text and
** its label name, each followed by a NUL. A file that splits into the same indices but holds
** other rows there hashes otherwise. */
void cls_examples_rows_sha256(const TextClsRaw *raw, const size_t *idx, size_t n, char hex[65]);
/* An evaluation of n examples as JSON: loss, accuracy, macro/weighted F1, macro precision and
** recall, runtime (null where not finite) and examples; new reference, NULL when out of memory. */
json_t *cls_examples_eval_json(const FinetuneEval *ev, size_t n);
/* Its ten most frequent confusions, [{"true", "pred", "count"}] by cfg's label names; new reference. */
json_t *cls_examples_confusions_json(const FinetuneEval *ev, const ModelConfig *cfg);

#endif
