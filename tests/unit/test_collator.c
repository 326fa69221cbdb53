/* MLM collator against DataCollatorForLanguageModeling's contract: the proportions hold
** statistically (z and chi-square bounds at a fixed seed, so the test is deterministic but
** would fail for a wrong rule), specials and padding are never chosen, labels are the
** original ids exactly where chosen, random ids are uniform over [0, V), masking is fresh per
** batch and reproducible per seed. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data/collator.h"
#include "tests/unit/check.h"

enum { V = 1000, PAD = 1, CLS = 0, SEP = 2, UNK = 3, MASK = 4 };
static const int32_t specials[] = {CLS, PAD, SEP, UNK, MASK};

/* A batch shaped like real data: [CLS] words [SEP] runs, some <unk>, and padded rows. */
static void make_batch(Rng *r, int B, int L, int32_t *ids, int32_t *attn) {
  for (int b = 0; b < B; b++) {
    int real = (b % 4 == 3) ? L / 2 : L;  /* every fourth row half padding */
    for (int t = 0; t < L; t++) {
      int32_t id;
      if (t >= real) id = PAD;
      else if (t == 0 || rng_below(r, 20) == 0) id = CLS;
      else if (rng_below(r, 20) == 0) id = SEP;
      else if (rng_below(r, 50) == 0) id = UNK;
      else id = 5 + (int32_t)rng_below(r, V - 5);
      ids[b * L + t] = id;
      attn[b * L + t] = t < real;
    }
  }
}

typedef struct Tally { long cand, chosen, to_mask, kept, to_other, special_hits, bad; long buckets[10]; long special_random; } Tally;

static void tally(Tally *t, const int32_t *ids, const int32_t *attn, const int32_t *in, const int32_t *lab, long n, int32_t mask_id) {
  for (long i = 0; i < n; i++) {
    int special = 0;
    for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) special |= ids[i] == specials[k];
    int cand = attn[i] && !special;
    t->cand += cand;
    if (lab[i] == MLM_IGNORE) {
      if (in[i] != ids[i]) t->bad++;  /* an unchosen position must be untouched */
      continue;
    }
    if (!cand) { t->special_hits++; continue; }
    if (lab[i] != ids[i]) t->bad++;
    t->chosen++;
    if (in[i] == mask_id) t->to_mask++;
    else if (in[i] == ids[i]) t->kept++;
    else {
      t->to_other++;
      if (in[i] < 0 || in[i] >= V) t->bad++;
      else { t->buckets[in[i] * 10 / V]++; if (in[i] < 5) t->special_random++; }
    }
  }
}

/* Runs the collator over many batches with these options and checks the proportions. */
static void proportions(const char *label, double p, double pm, double pr, int batches) {
  MlmOptions o = mlm_default_options(MASK, V, specials, 5);
  o.mlm_prob = p; o.mask_prob = pm; o.random_prob = pr;
  Err e = {0};
  Collator *c = collator_new(&o, &e);
  if (!c) { check(0, label, "collator_new: %s", e.msg); return; }
  int B = 16, L = 128;
  long n = (long)B * L;
  int32_t *ids = malloc(sizeof *ids * n), *attn = malloc(sizeof *attn * n), *in = malloc(sizeof *in * n), *lab = malloc(sizeof *lab * n);
  Rng data, mrng;
  rng_seed(&data, 1);
  rng_seed(&mrng, 2024);
  Tally t;
  memset(&t, 0, sizeof t);
  long returned = 0, counted = 0;
  for (int k = 0; k < batches; k++) {
    make_batch(&data, B, L, ids, attn);
    returned += collator_apply(c, &mrng, ids, attn, n, in, lab);
    for (long i = 0; i < n; i++) counted += lab[i] != MLM_IGNORE;
    tally(&t, ids, attn, in, lab, n, MASK);
  }
  char name[160];
  snprintf(name, sizeof name, "%s_specials_and_pads_never_chosen", label);
  check(t.special_hits == 0, name, "%ld special or padding positions chosen", t.special_hits);
  snprintf(name, sizeof name, "%s_labels_and_untouched", label);
  check(t.bad == 0 && returned == counted, name, "%ld bad positions; returned %ld vs %ld labelled", t.bad, returned, counted);

  /* Chosen ~ Binomial(cand, p). */
  double z = (t.chosen - p * t.cand) / sqrt(t.cand * p * (1 - p) + 1e-300);
  snprintf(name, sizeof name, "%s_chosen_rate", label);
  check(p == 0 ? t.chosen == 0 : fabs(z) < 5, name, "%ld of %ld chosen (%.4f, want %.4f, z=%.2f)", t.chosen, t.cand,
        (double)t.chosen / t.cand, p, z);

  /* Among chosen, three observable outcomes. A random draw can land on the original id or
  ** on [MASK] (1/V each), so the expected shares include those hits. */
  double rc = pm < 1 ? pr / (1 - pm) : 0, prand = (1 - pm) * rc;
  double e_mask = pm + prand / V, e_kept = (1 - pm) * (1 - rc) + prand / V, e_other = prand * (V - 2.0) / V;
  double obs[3] = {(double)t.to_mask, (double)t.kept, (double)t.to_other}, exp_[3] = {e_mask, e_kept, e_other};
  double chi2 = 0;
  int cells = 0, exact = 1;
  for (int i = 0; i < 3; i++) {
    double ex = exp_[i] * t.chosen;
    if (ex > 0) { chi2 += (obs[i] - ex) * (obs[i] - ex) / ex; cells++; }
    else exact &= obs[i] == 0;
  }
  /* 2 degrees of freedom: P(chi2 > 25) ~ 4e-6. */
  snprintf(name, sizeof name, "%s_mask_random_keep_split", label);
  check(exact && chi2 < 25, name, "mask/kept/other %ld/%ld/%ld of %ld (shares %.4f/%.4f/%.4f, want %.4f/%.4f/%.4f), chi2 %.2f over %d cells",
        t.to_mask, t.kept, t.to_other, t.chosen, obs[0] / t.chosen, obs[1] / t.chosen, obs[2] / t.chosen, e_mask, e_kept, e_other, chi2, cells);

  if (t.to_other > 2000) {
    /* Random ids uniform over [0, V): 10 equal buckets, 9 degrees of freedom (P(chi2 > 40) ~ 7e-6);
    ** the original id and [MASK] are missing from "other", a 2/V dent that is far below this bound. */
    double u = 0;
    for (int i = 0; i < 10; i++) { double ex = t.to_other / 10.0; u += (t.buckets[i] - ex) * (t.buckets[i] - ex) / ex; }
    snprintf(name, sizeof name, "%s_random_ids_uniform", label);
    check(u < 40, name, "chi2 %.2f over 10 buckets", u);
    snprintf(name, sizeof name, "%s_random_ids_include_specials", label);
    check(t.special_random > 0, name, "no random id below 5 in %ld draws (the range is [0, V) as len(tokenizer))", t.to_other);
  }
  if (t.chosen) printf("# %s: %ld candidates, %ld chosen (%.4f), mask %.4f kept %.4f other %.4f\n", label, t.cand, t.chosen,
         (double)t.chosen / t.cand, obs[0] / t.chosen, obs[1] / t.chosen, obs[2] / t.chosen);
  free(ids); free(attn); free(in); free(lab);
  collator_free(c);
}

int main(void) {
  int asan = getenv("MASKD_ASAN") != NULL;
  int batches = asan ? 100 : 600;  /* 600 x 2048 positions: ~1.2M candidates */
  proportions("hf_default", 0.15, 0.8, 0.1, batches);
  proportions("custom", 0.3, 0.5, 0.3, batches / 2);
  proportions("all_mask", 0.2, 1.0, 0.0, batches / 4);
  proportions("none", 0.0, 0.8, 0.1, 10);

  /* Reproducible per seed, fresh per batch, and no use of unlisted specials or pads. */
  MlmOptions o = mlm_default_options(MASK, V, specials, 5);
  Err e = {0};
  Collator *c = collator_new(&o, &e);
  int B = 8, L = 64;
  long n = (long)B * L;
  int32_t ids[512], attn[512], in1[512], lab1[512], in2[512], lab2[512], in3[512], lab3[512];
  Rng d; rng_seed(&d, 5);
  make_batch(&d, B, L, ids, attn);
  Rng a, b;
  rng_seed(&a, 77); rng_seed(&b, 77);
  collator_apply(c, &a, ids, attn, n, in1, lab1);
  collator_apply(c, &b, ids, attn, n, in2, lab2);
  check(!memcmp(in1, in2, sizeof in1) && !memcmp(lab1, lab2, sizeof lab1) && !memcmp(&a, &b, sizeof a), "same_seed_same_masks", "differ");
  collator_apply(c, &a, ids, attn, n, in3, lab3);
  check(memcmp(lab1, lab3, sizeof lab1) != 0, "fresh_masks_each_batch", "the second batch repeated the first's masks");
  rng_seed(&b, 78);
  collator_apply(c, &b, ids, attn, n, in2, lab2);
  check(memcmp(lab1, lab2, sizeof lab1) != 0, "other_seed_other_masks", "seeds 77 and 78 agree");

  /* attn NULL: every position real; pads are still specials (their id is listed). */
  int32_t ids2[4000], in4[4000], lab4[4000];
  for (int i = 0; i < 4000; i++) ids2[i] = i % 2 ? PAD : 100 + i % 50;
  rng_seed(&a, 3);
  long k = collator_apply(c, &a, ids2, NULL, 4000, in4, lab4);
  int pad_hit = 0;
  for (int i = 1; i < 4000; i += 2) pad_hit |= lab4[i] != MLM_IGNORE || in4[i] != PAD;
  check(k > 150 && k < 450 && !pad_hit, "no_attention_mask", "%ld chosen of 2000, pad touched %d", k, pad_hit);
  collator_free(c);

  /* Bad options are refused with a message. */
  MlmOptions bad = o; bad.mlm_prob = 1.5;
  check(!collator_new(&bad, &e) && strstr(e.msg, "mlm probability"), "refuses_prob_above_1", "'%s'", e.msg);
  bad = o; bad.mask_prob = NAN;
  check(!collator_new(&bad, &e) && strstr(e.msg, "mask replace"), "refuses_nan_prob", "'%s'", e.msg);
  bad = o; bad.mask_prob = 0.8; bad.random_prob = 0.3;
  check(!collator_new(&bad, &e) && strstr(e.msg, "exceed 1"), "refuses_sum_above_1", "'%s'", e.msg);
  bad = o; bad.mask_id = V;
  check(!collator_new(&bad, &e) && strstr(e.msg, "mask id"), "refuses_mask_id_out_of_range", "'%s'", e.msg);
  int32_t sp[2] = {0, V + 3};
  bad = o; bad.special_ids = sp; bad.n_special = 2;
  check(!collator_new(&bad, &e) && strstr(e.msg, "special id"), "refuses_special_out_of_range", "'%s'", e.msg);
  return check_exit();
}
