/* The masked-language-model collator: Hugging Face's DataCollatorForLanguageModeling
** (mlm=True) on a (batch, seq) block of ids, drawing from the run's Rng.
**
** For every position: labels = ids. A position is a candidate when its attention mask is
** non-zero and its id is not one of the special ids given (the tokenizer's all_special_ids:
** [CLS], [SEP], <pad>, <unk>, [MASK]); each candidate is chosen with probability mlm_prob.
** Unchosen positions get label -100 (MLM_IGNORE). A chosen position becomes mask_id with
** probability mask_prob; otherwise, with probability random_prob / (1 - mask_prob), a random
** id uniform in [0, vocab_size) (specials included, as randint(len(tokenizer))); otherwise it
** keeps its id. HF's defaults: 0.15, 0.8, 0.1 => 80% [MASK], 10% random, 10% unchanged.
**
** Each batch is a fresh sample (dynamic masking, also for evaluation). Draw order, so a run
** is reproducible: positions in row-major order; for each candidate one uniform for "chosen",
** then for a chosen one a uniform for "[MASK]", and when that fails a uniform for "random"
** and, when that succeeds, one rng_below(vocab_size) for the id. The Rng is the only state. */
#ifndef MASKD_COLLATOR_H
#define MASKD_COLLATOR_H
#include <stdint.h>
#include "engine/core/err.h"
#include "engine/core/rng.h"

#define MLM_IGNORE (-100)

typedef struct MlmOptions {
  double mlm_prob;      /* chance a candidate position is chosen (0.15) */
  double mask_prob;     /* chance a chosen position becomes mask_id (0.8) */
  double random_prob;   /* chance a chosen position becomes a random id (0.1); mask_prob + random_prob <= 1 */
  int32_t mask_id;      /* the [MASK] id */
  int32_t vocab_size;   /* random ids are drawn from [0, vocab_size) (len(tokenizer)) */
  const int32_t *special_ids;  /* ids never chosen (copied) */
  int n_special;
} MlmOptions;

typedef struct Collator Collator;

/* HF's defaults (0.15 / 0.8 / 0.1) with these ids. */
MlmOptions mlm_default_options(int32_t mask_id, int32_t vocab_size, const int32_t *special_ids, int n_special);

/* Checks the options (probabilities in [0,1], mask_prob + random_prob <= 1, ids in range). */
Collator *collator_new(const MlmOptions *opt, Err *err);
/* Frees; NULL allowed. */
void collator_free(Collator *c);

/* Masks n = batch*seq positions: reads ids and attn (attn may be NULL: all positions real),
** writes inputs and labels (neither may alias ids). Returns the number of chosen positions
** (labels != -100). Allocates nothing. */
long collator_apply(const Collator *c, Rng *rng, const int32_t *ids, const int32_t *attn, long n,
                    int32_t *inputs, int32_t *labels);

#endif
