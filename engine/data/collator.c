#include "engine/data/collator.h"

#include <stdlib.h>
#include <string.h>

struct Collator {
  double mlm_prob, mask_prob, random_cond;  /* random_cond = random_prob / (1 - mask_prob) */
  int32_t mask_id, vocab_size;
  unsigned char *special;  /* vocab_size flags, so the per-position test is one load */
};

MlmOptions mlm_default_options(int32_t mask_id, int32_t vocab_size, const int32_t *special_ids, int n_special) {
  MlmOptions o = {0.15, 0.8, 0.1, mask_id, vocab_size, special_ids, n_special};
  return o;
}

static int prob_ok(double p) { return p >= 0.0 && p <= 1.0; }  /* also false for NaN */

Collator *collator_new(const MlmOptions *o, Err *err) {
  if (!prob_ok(o->mlm_prob)) { err_set(err, "mlm probability %g is outside [0, 1]", o->mlm_prob); return NULL; }
  if (!prob_ok(o->mask_prob)) { err_set(err, "mask replace probability %g is outside [0, 1]", o->mask_prob); return NULL; }
  if (!prob_ok(o->random_prob)) { err_set(err, "random replace probability %g is outside [0, 1]", o->random_prob); return NULL; }
  if (o->mask_prob + o->random_prob > 1.0 + 1e-12) {
    err_set(err, "mask (%g) + random (%g) replace probabilities exceed 1", o->mask_prob, o->random_prob);
    return NULL;
  }
  if (o->vocab_size <= 0) { err_set(err, "vocabulary size %d must be > 0", (int)o->vocab_size); return NULL; }
  if (o->mask_id < 0 || o->mask_id >= o->vocab_size) { err_set(err, "mask id %d is outside [0, %d)", (int)o->mask_id, (int)o->vocab_size); return NULL; }
  if (o->n_special < 0 || (o->n_special > 0 && !o->special_ids)) { err_set(err, "special ids missing"); return NULL; }
  Collator *c = calloc(1, sizeof *c);
  if (c) c->special = calloc((size_t)o->vocab_size, 1);
  if (!c || !c->special) { collator_free(c); err_set(err, "out of memory"); return NULL; }
  for (int i = 0; i < o->n_special; i++) {
    int32_t id = o->special_ids[i];
    if (id < 0 || id >= o->vocab_size) {
      err_set(err, "special id %d is outside [0, %d)", (int)id, (int)o->vocab_size);
      collator_free(c);
      return NULL;
    }
    c->special[id] = 1;
  }
  c->mlm_prob = o->mlm_prob;
  c->mask_prob = o->mask_prob;
  /* HF draws "random" among the chosen positions not replaced by [MASK]; with mask_prob = 1
  ** nothing is left, so the conditional chance is 0 rather than 0/0. */
  c->random_cond = o->mask_prob < 1.0 ? o->random_prob / (1.0 - o->mask_prob) : 0.0;
  if (c->random_cond > 1.0) c->random_cond = 1.0;
  c->mask_id = o->mask_id;
  c->vocab_size = o->vocab_size;
  return c;
}

void collator_free(Collator *c) {
  if (!c) return;
  free(c->special);
  free(c);
}

long collator_apply(const Collator *c, Rng *rng, const int32_t *ids, const int32_t *attn, long n,
                    int32_t *inputs, int32_t *labels) {
  long chosen = 0;
  for (long i = 0; i < n; i++) {
    int32_t id = ids[i];
    inputs[i] = id;
    labels[i] = MLM_IGNORE;
    /* Padding and specials are never candidates; an id outside the vocabulary (which the
    ** loader never yields) is treated as special rather than read out of bounds. */
    if (attn && attn[i] == 0) continue;
    if (id < 0 || id >= c->vocab_size || c->special[id]) continue;
    if (!(rng_uniform(rng) < c->mlm_prob)) continue;
    labels[i] = id;
    chosen++;
    if (rng_uniform(rng) < c->mask_prob) inputs[i] = c->mask_id;
    else if (rng_uniform(rng) < c->random_cond) inputs[i] = (int32_t)rng_below(rng, (uint32_t)c->vocab_size);
  }
  return chosen;
}
