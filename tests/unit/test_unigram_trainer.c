/* The Unigram trainer, each step against an independent reference: digamma
** against known values, seeds against HF's own unit test, the E-step against
** enumeration of every segmentation, pruning against a direct re-derivation
** with brute-force Viterbi, word counting against hand-made cases. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/tok/tokenizer.h"
#include "engine/tok/unigram.h"
#include "engine/tok/unigram_trainer.h"
#include "tests/unit/check.h"

/* ---- brute force over segmentations ---------------------------------------- */

typedef struct Toy {
  int n;                 /* pieces, 0 = unk */
  const char *p[512];
  size_t len[512];
  double score[512];
  double unk;            /* min score - 10 */
} Toy;

static void toy_from_state(Toy *t, const UtState *s) {
  t->n = ut_state_size(s);
  double m = INFINITY;
  for (int i = 0; i < t->n; i++) {
    t->p[i] = ut_state_piece(s, i, &t->len[i]);
    t->score[i] = ut_state_score(s, i);
    if (i > 0 && t->score[i] < m) m = t->score[i];
  }
  t->unk = m - 10.0;
}

static size_t utf8_char_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

/* Piece ids covering exactly the character at w[pos]: does any exist? */
static int has_single(const Toy *t, const char *w, size_t pos) {
  size_t m = utf8_char_len((unsigned char)w[pos]);
  for (int i = 1; i < t->n; i++) if (t->len[i] == m && !memcmp(t->p[i], w + pos, m)) return 1;
  return 0;
}

/* Enumerates all segmentations of w[pos..n); for each complete one calls back
** with the ids and the total score. */
typedef void (*SegFn)(const int *ids, int k, double score, void *ctx);
static void enumerate(const Toy *t, const char *w, size_t n, size_t pos, int *ids, int k, double sc, SegFn fn, void *ctx) {
  if (pos == n) { fn(ids, k, sc, ctx); return; }
  for (int i = 1; i < t->n; i++)
    if (t->len[i] <= n - pos && !memcmp(t->p[i], w + pos, t->len[i])) {
      ids[k] = i;
      enumerate(t, w, n, pos + t->len[i], ids, k + 1, sc + t->score[i], fn, ctx);
    }
  if (!has_single(t, w, pos)) {
    ids[k] = 0;
    enumerate(t, w, n, pos + utf8_char_len((unsigned char)w[pos]), ids, k + 1, sc + t->unk, fn, ctx);
  }
}

typedef struct ZCtx { double z; double *acc; } ZCtx;
static void add_z(const int *ids, int k, double sc, void *ctx) {
  ZCtx *c = ctx;
  double p = exp(sc);
  c->z += p;
  for (int i = 0; i < k; i++) c->acc[ids[i]] += p;
}

typedef struct BestCtx { double best; int ids[64]; int k; int have; int banned_single; } BestCtx;
static void keep_best(const int *ids, int k, double sc, void *ctx) {
  BestCtx *c = ctx;
  if (c->banned_single >= 0 && k == 1 && ids[0] == c->banned_single) return;
  if (!c->have || sc > c->best) { c->have = 1; c->best = sc; c->k = k; memcpy(c->ids, ids, (size_t)k * sizeof *ids); }
}

/* Expected counts and sum of count x log Z by enumeration. */
static double brute_estep(const Toy *t, const UtWords *w, double *expected) {
  double ll = 0;
  for (int i = 0; i < t->n; i++) expected[i] = 0;
  double *acc = calloc((size_t)t->n, sizeof *acc);
  for (size_t j = 0; j < ut_words_unique(w); j++) {
    size_t len; uint64_t cnt;
    const char *s = ut_words_get(w, j, &len, &cnt);
    memset(acc, 0, (size_t)t->n * sizeof *acc);
    ZCtx c = {0, acc};
    int ids[64];
    enumerate(t, s, len, 0, ids, 0, 0.0, add_z, &c);
    for (int i = 0; i < t->n; i++) expected[i] += (double)cnt * acc[i] / c.z;
    ll += (double)cnt * log(c.z);
  }
  free(acc);
  return ll;
}

static double max_rel_diff(const double *a, const double *b, int n) {
  double m = 0;
  for (int i = 0; i < n; i++) {
    double d = fabs(a[i] - b[i]) / (fabs(b[i]) > 1e-3 ? fabs(b[i]) : 1e-3);
    if (d > m || d != d) m = d;
  }
  return m;
}

static UtWords *toy_words(const char *const *ws, const uint64_t *counts, int n) {
  UtWords *w = ut_words_new();
  for (int i = 0; i < n; i++) ut_words_add(w, ws[i], strlen(ws[i]), counts[i], NULL);
  return w;
}

static int has_piece(const UtResult *r, const char *p) {
  for (int i = 0; i < r->n; i++) if (!strcmp(r->pieces[i], p)) return 1;
  return 0;
}

/* ---- tests ----------------------------------------------------------------- */

static void count_word(void *ctx, const char *w, size_t n) { ut_words_add(ctx, w, n, 1, NULL); }

/* The trainer's one-pass front end against the tokenizer's own normalizer and
** Metaspace (engine/tok/tokenizer.c, written independently): same words, same counts. */
static void test_words_vs_tokenizer_pretokenize(void) {
  const char *pieces[] = {"<unk>", "a"};
  double scores[] = {0, -1};
  Err err;
  Tokenizer *t = tokenizer_new_seed(2, pieces, scores, 0, 1, &err);
  const char *lines[] = {" = Valkyria Chronicles III = \n", "\n", "  two  spaces  \n", "``quoted'' and '''triple''' ```x``` \n",
                         "▁already▁metaspace ▁ ▁▁ x\n", "tab\there, naïve café 東京 😀 \n", "no newline", " ' ` '' `` \n"};
  UtWords *a = ut_words_new(), *b = ut_words_new();
  int ok = t != NULL;
  for (int r = 0; ok && r < 3; r++)
    for (size_t i = 0; ok && i < sizeof lines / sizeof lines[0]; i++) {
      ok &= ut_words_add_text(a, lines[i], strlen(lines[i]), &err) == 0;
      ok &= tokenizer_pretokenize(t, lines[i], strlen(lines[i]), count_word, b, &err) == 0;
    }
  ok &= ut_words_unique(a) == ut_words_unique(b) && ut_words_total(a) == ut_words_total(b);
  for (size_t i = 0; ok && i < ut_words_unique(a); i++) {
    size_t la, lb; uint64_t ca, cb;
    const char *pa = ut_words_get(a, i, &la, &ca), *pb = ut_words_get(b, i, &lb, &cb);
    ok = la == lb && !memcmp(pa, pb, la) && ca == cb;
  }
  check(ok, "words_match_tokenizer_pretokenize", "%zu/%zu words, %llu/%llu total", ut_words_unique(a), ut_words_unique(b),
        (unsigned long long)ut_words_total(a), (unsigned long long)ut_words_total(b));
  tokenizer_free(t);
  ut_words_free(a); ut_words_free(b);
}

static void test_digamma(void) {
  /* Reference values: psi(1) = -gamma, psi(1/2) = -gamma - 2 ln 2, psi(10) =
  ** H_9 - gamma, psi(1e6) ~ ln(1e6) - 1/(2e6) - 1/(12e12). */
  const double g = 0.57721566490153286;
  double h9 = 0;
  for (int k = 1; k <= 9; k++) h9 += 1.0 / k;
  struct { double x, want; } v[] = {
    {1.0, -g}, {0.5, -g - 2 * log(2.0)}, {10.0, h9 - g}, {7.0, 1 + 0.5 + 1.0 / 3 + 0.25 + 0.2 + 1.0 / 6 - g},
    {1e6, log(1e6) - 1 / 2e6 - 1 / 12e12}, {0.001, -1000.5755719318103},
  };
  double worst = 0;
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
    double d = fabs(ut_digamma(v[i].x) - v[i].want);
    if (d > worst) worst = d;
  }
  check(worst < 1e-9, "digamma_known_values", "max error %g", worst);
  /* The recurrence psi(x+1) = psi(x) + 1/x must hold across the x = 7 switch. */
  double rec = 0;
  for (double x = 0.3; x < 20; x += 0.37) { double d = fabs(ut_digamma(x + 1) - ut_digamma(x) - 1 / x); if (d > rec) rec = d; }
  check(rec < 1e-10, "digamma_recurrence", "max error %g", rec);
}

static void test_seeds_match_hf(void) {
  /* tokenizers/src/models/unigram/trainer.rs, test_unigram_chars. */
  const char *ws[] = {"This is a", "こんにちは友達"};
  uint64_t cnt[] = {1, 1};
  UtWords *w = toy_words(ws, cnt, 2);
  UtOptions o; ut_options_default(&o); o.seed_distinct = 1; o.threads = 1;
  Err err;
  UtState *s = ut_state_new(w, &o, &err);
  const char *want[] = {"s", "i", " ", "達", "友", "ん", "は", "に", "ち", "こ", "h", "a", "T", "is ", "s "};
  double want_sc[] = {-2.5649493574615367, -2.5649493574615367, -2.5649493574615367, -3.258096538021482, -3.258096538021482,
                      -3.258096538021482, -3.258096538021482, -3.258096538021482, -3.258096538021482, -3.258096538021482,
                      -3.258096538021482, -3.258096538021482, -3.258096538021482, -1.4663370687934272, -1.8718021769015916};
  int ok = s && ut_state_size(s) == 16, at = -1;
  for (int i = 0; ok && i < 15; i++) {
    size_t len;
    const char *p = ut_state_piece(s, i + 1, &len);
    if (len != strlen(want[i]) || memcmp(p, want[i], len) || fabs(ut_state_score(s, i + 1) - want_sc[i]) > 1e-12) { ok = 0; at = i; }
  }
  check(ok, "seeds_match_hf_unit_test", "%s; size %d, first difference at %d", s ? "" : err.msg, s ? ut_state_size(s) : -1, at);
  size_t len;
  const char *p0 = s ? ut_state_piece(s, 0, &len) : "";
  check(s && len == 5 && !memcmp(p0, "<UNK>", 5) && isnan(ut_state_score(s, 0)), "seed_piece0_is_training_unk", "piece 0 wrong");
  ut_state_free(s);
  /* Weighted seeds: "is " occurs twice in a word of count 3: frequency 6, score 18. */
  ut_words_free(w);
  uint64_t cnt3[] = {3, 1};
  w = toy_words(ws, cnt3, 2);
  o.seed_distinct = 0;
  s = ut_state_new(w, &o, &err);
  int found = 0;
  double total = 3.0 * 9 + 7 + 18 + 12;  /* characters weighted by count, then "is " and "s " */
  for (int i = 1; s && i < ut_state_size(s); i++) {
    p0 = ut_state_piece(s, i, &len);
    if (len == 3 && !memcmp(p0, "is ", 3)) found = fabs(ut_state_score(s, i) - log(18.0 / total)) < 1e-12;
  }
  check(found, "seeds_weighted_by_word_count", "score of 'is ' is not log(18/%g)", total);
  ut_state_free(s);
  ut_words_free(w);
}

static const char *corpus[] = {"▁the", "▁then", "▁there", "▁other", "▁these", "▁theme", "▁he", "▁her", "▁here",
                               "▁hello", "▁hell", "▁shell", "▁she", "▁sheet", "▁eth", "▁ère", "▁thé", "▁été", "▁tête"};
static const uint64_t counts[] = {50, 12, 9, 7, 5, 2, 30, 11, 6, 4, 3, 3, 8, 1, 1, 2, 1, 3, 1};
#define NCORPUS ((int)(sizeof corpus / sizeof corpus[0]))

static void test_estep_brute_force(void) {
  UtWords *w = toy_words(corpus, counts, NCORPUS);
  UtOptions o; ut_options_default(&o); o.threads = 2; o.vocab_size = 20;
  Err err;
  UtState *s = ut_state_new(w, &o, &err);
  if (!s) { check(0, "estep_state", "%s", err.msg); ut_words_free(w); return; }
  int n = ut_state_size(s);
  double *got = malloc((size_t)n * sizeof *got), *want = malloc((size_t)n * sizeof *want), *logsp = malloc((size_t)n * sizeof *logsp);
  Toy t;
  toy_from_state(&t, s);
  double ll = ut_state_estep(s, got), llb = brute_estep(&t, w, want);
  check(max_rel_diff(got, want, n) < 1e-9 && fabs(ll - llb) < 1e-9 * fabs(llb), "estep_seed_model_vs_enumeration",
        "max rel diff %g, loglik %.12f vs %.12f", max_rel_diff(got, want, n), ll, llb);
  ut_state_set_logspace(s, 1);
  double ll2 = ut_state_estep(s, logsp);
  ut_state_set_logspace(s, 0);
  check(max_rel_diff(logsp, want, n) < 1e-9 && fabs(ll2 - llb) < 1e-9 * fabs(llb), "estep_logspace_vs_enumeration",
        "max rel diff %g", max_rel_diff(logsp, want, n));

  /* Drop two characters ("o" and "é") with a crafted M-step so unknown nodes
  ** appear, then compare again (this also checks the digamma update). */
  for (int i = 0; i < n; i++) {
    size_t len;
    const char *p = ut_state_piece(s, i, &len);
    got[i] = 1.0 + (i * 7919 % 13);
    if ((len == 1 && p[0] == 'o') || (len == 2 && !memcmp(p, "é", 2))) got[i] = 0.2;
  }
  double sum = 0;
  for (int i = 1; i < n; i++) if (got[i] >= 0.5) sum += got[i];
  int kept_o = 0, n2 = 0, score_ok = 1;
  if (ut_state_mstep(s, got, &err) == 0) {
    n2 = ut_state_size(s);
    for (int i = 1; i < n2; i++) {
      size_t len;
      const char *p = ut_state_piece(s, i, &len);
      if (len == 1 && p[0] == 'o') kept_o = 1;
      /* every surviving score is digamma(count) - digamma(sum) for a count in 1..13 */
      int match = 0;
      for (int c = 1; c <= 13; c++) match |= fabs(ut_state_score(s, i) - (ut_digamma(c) - ut_digamma(sum))) < 1e-12;
      score_ok &= match;
    }
  }
  check(n2 == n - 2 && !kept_o && score_ok && isnan(ut_state_score(s, 0)), "mstep_threshold_and_digamma",
        "size %d -> %d, 'o' kept %d, scores %d", n, n2, kept_o, score_ok);
  toy_from_state(&t, s);
  ll = ut_state_estep(s, got);
  llb = brute_estep(&t, w, want);
  check(max_rel_diff(got, want, n2) < 1e-9 && fabs(ll - llb) < 1e-9 * fabs(llb) && want[0] > 0, "estep_with_unknowns_vs_enumeration",
        "max rel diff %g, unk expected %g", max_rel_diff(got, want, n2), want[0]);
  /* The same E-step through the Unigram model's forward-backward (engine/tok/unigram.c,
  ** written independently): the training <UNK> gets score 0 so min_score is the
  ** pieces' own; unknown nodes count for id 0 in both. */
  const char **pp = malloc((size_t)n2 * sizeof *pp);
  char **owned = calloc((size_t)n2, sizeof *owned);
  double *sc = malloc((size_t)n2 * sizeof *sc), *viau = calloc((size_t)n2, sizeof *viau), llu = 0;
  for (int i = 0; i < n2; i++) {
    size_t len;
    const char *p = ut_state_piece(s, i, &len);
    owned[i] = strndup(p, len); pp[i] = owned[i];
    sc[i] = i ? ut_state_score(s, i) : 0.0;
  }
  Unigram *u = unigram_new(n2, pp, sc, 0, &err);
  for (size_t j = 0; u && j < ut_words_unique(w); j++) {
    size_t len; uint64_t cnt;
    const char *str = ut_words_get(w, j, &len, &cnt);
    llu += (double)cnt * unigram_expected_counts(u, str, len, (double)cnt, viau);
  }
  check(u && max_rel_diff(got, viau, n2) < 1e-9 && fabs(ll - llu) < 1e-9 * fabs(llu), "estep_vs_unigram_forward_backward",
        "max rel diff %g, loglik %.12f vs %.12f", u ? max_rel_diff(got, viau, n2) : -1.0, ll, llu);
  unigram_free(u);
  for (int i = 0; i < n2; i++) free(owned[i]);
  free(owned); free(pp); free(sc); free(viau);
  free(got); free(want); free(logsp);
  ut_state_free(s);
  ut_words_free(w);
}

/* Pruning re-derived: brute-force Viterbi per word, 2-best per piece, HF's loss. */
static void test_prune_vs_rederivation(void) {
  UtWords *w = toy_words(corpus, counts, NCORPUS);
  UtOptions o; ut_options_default(&o); o.threads = 2; o.vocab_size = 2; o.shrinking_factor = 0.63;
  Err err;
  UtState *s = ut_state_new(w, &o, &err);
  if (!s) { check(0, "prune_state", "%s", err.msg); ut_words_free(w); return; }
  int n = ut_state_size(s);
  double *ex = malloc((size_t)n * sizeof *ex);
  ut_state_estep(s, ex);
  ut_state_mstep(s, ex, &err);
  n = ut_state_size(s);
  Toy t;
  toy_from_state(&t, s);

  double *freq = calloc((size_t)n, sizeof *freq), vsum = 0;
  for (size_t j = 0; j < ut_words_unique(w); j++) {
    size_t len; uint64_t cnt;
    const char *str = ut_words_get(w, j, &len, &cnt);
    BestCtx b = {.banned_single = -1};
    int ids[64];
    enumerate(&t, str, len, 0, ids, 0, 0.0, keep_best, &b);
    for (int k = 0; k < b.k; k++) freq[b.ids[k]] += (double)cnt;
    vsum += (double)cnt;
  }
  double sum = 0;
  for (int i = 0; i < n; i++) sum += freq[i];
  /* expected survivors: kept-for-sure in id order, then candidates by loss */
  int *keep = malloc((size_t)n * sizeof *keep), nk = 0, nc = 0;
  double *loss = malloc((size_t)n * sizeof *loss);
  int *cid = malloc((size_t)n * sizeof *cid);
  keep[nk++] = 0;
  for (int i = 1; i < n; i++) {
    BestCtx b1 = {.banned_single = -1}, b2 = {.banned_single = i};
    int ids[64];
    enumerate(&t, t.p[i], t.len[i], 0, ids, 0, 0.0, keep_best, &b1);
    int single_char = t.len[i] == utf8_char_len((unsigned char)t.p[i][0]);
    int always = 1, nalt = 0;
    if (!single_char) {
      if (b1.k >= 2) always = 0;
      else { enumerate(&t, t.p[i], t.len[i], 0, ids, 0, 0.0, keep_best, &b2); nalt = b2.k; }
    }
    if (freq[i] == 0 && !always) continue;
    if (nalt == 0) { keep[nk++] = i; continue; }
    if (freq[i] == 0) continue;
    double lsp = log(freq[i]) - log(sum), lalt = 0, lsa = log(sum + freq[i] * (n - 1));
    for (int k = 0; k < nalt; k++) lalt += log(freq[b2.ids[k]] + freq[i]) - lsa;
    loss[nc] = freq[i] / vsum * (lsp - lalt); cid[nc++] = i;
  }
  for (int a = 1; a < nc; a++)  /* stable insertion sort, loss descending */
    for (int b = a; b > 0 && loss[b] > loss[b - 1]; b--) {
      double tl = loss[b]; loss[b] = loss[b - 1]; loss[b - 1] = tl;
      int ti = cid[b]; cid[b] = cid[b - 1]; cid[b - 1] = ti;
    }
  int target = (int)(n * 0.63);  /* the desired size 2 * 1.1 is below it */
  int nsure = nk;
  for (int k = 0; k < nc && nk != target; k++) keep[nk++] = cid[k];

  const char *before[512]; size_t blen[512];
  for (int i = 0; i < n; i++) { before[i] = t.p[i]; blen[i] = t.len[i]; }
  int rc = ut_state_prune(s, &err);
  int ok = rc == 0 && ut_state_size(s) == nk;
  for (int i = 0; ok && i < nk; i++) {
    size_t len;
    const char *p = ut_state_piece(s, i, &len);
    ok = len == blen[keep[i]] && !memcmp(p, before[keep[i]], len);
  }
  check(ok && nk < n && nk - nsure >= 3 && nc - (nk - nsure) >= 3, "prune_matches_rederivation",
        "rc %d, size %d -> %d, expected %d (%d kept for sure, %d of %d candidates)", rc, n, ut_state_size(s), nk, nsure, nk - nsure, nc);
  free(ex); free(freq); free(keep); free(loss); free(cid);
  ut_state_free(s);
  ut_words_free(w);
}

static void test_words(void) {
  UtWords *w = ut_words_new();
  Err err;
  const char *line = " a  b ``q'' ▁c\n";
  int rc = ut_words_add_text(w, line, strlen(line), &err);
  const char *want[] = {"▁a", "▁", "▁b", "▁\"q\"", "▁", "▁c\n"};
  int ok = rc == 0 && ut_words_unique(w) == 5 && ut_words_total(w) == 6;
  for (size_t i = 0, j = 0; ok && i < 6; i++) {
    if (i == 4) continue;  /* the second "▁" counts the first */
    size_t len; uint64_t c;
    const char *p = ut_words_get(w, j++, &len, &c);
    ok = len == strlen(want[i]) && !memcmp(p, want[i], len) && c == (i == 1 ? 2u : 1u);
  }
  check(ok, "words_metaspace_and_replace", "rc %d, %zu unique, %llu total", rc, ut_words_unique(w), (unsigned long long)ut_words_total(w));
  rc = ut_words_add_text(w, "x", 1, &err);
  size_t len;
  const char *p = ut_words_get(w, ut_words_unique(w) - 1, &len, NULL);
  check(rc == 0 && len == 4 && !memcmp(p, "▁x", 4), "words_prepend_when_missing", "got '%.*s'", (int)len, p);
  rc = ut_words_add_text(w, "```'''", 6, &err);
  p = ut_words_get(w, ut_words_unique(w) - 1, &len, NULL);
  check(rc == 0 && len == 7 && !memcmp(p, "▁\"`\"'", 7), "words_replace_leftmost_pairs", "got '%.*s'", (int)len, p);
  check(ut_words_add_text(w, "ab\xC3(", 4, &err) == -1 && strstr(err.msg, "invalid UTF-8 at byte 2"), "words_invalid_utf8", "got '%s'", err.msg);
  check(ut_words_add_text(w, "a\0b", 3, &err) == -1 && strstr(err.msg, "NUL"), "words_nul_byte", "got '%s'", err.msg);
  check(ut_words_add_text(w, "\xED\xA0\x80", 3, &err) == -1, "words_surrogate_rejected", "accepted a UTF-8 surrogate");

  char path[256];
  snprintf(path, sizeof path, "%s/ut_bad_%d.txt", getenv("MASKD_TMP") ? getenv("MASKD_TMP") : "/tmp", (int)getpid());
  FILE *f = fopen(path, "wb");
  fputs("good line\nstill good\nbad \xFF here\n", f);
  fclose(f);
  char want_msg[300];
  snprintf(want_msg, sizeof want_msg, "%s:3: invalid UTF-8 at byte 4", path);
  rc = ut_words_add_file(w, path, 1, &err);
  check(rc == -1 && !strcmp(err.msg, want_msg), "words_file_error_names_file_and_line", "got '%s'", err.msg);
  remove(path);
  check(ut_words_add_file(w, "/nonexistent/corpus.txt", 2, &err) == -1 && strstr(err.msg, "/nonexistent/corpus.txt"),
        "words_missing_file", "got '%s'", err.msg);
  ut_words_free(w);

  /* Blocks and threads: a file read in small blocks on 1, 2 and 3 threads gives
  ** the same table (words in first-seen order, same counts) as line-by-line
  ** counting, and an error deep in the file names its line. */
  snprintf(path, sizeof path, "%s/ut_big_%d.txt", getenv("MASKD_TMP") ? getenv("MASKD_TMP") : "/tmp", (int)getpid());
  f = fopen(path, "wb");
  UtWords *ref = ut_words_new();
  char buf[256];
  int nlines = getenv("MASKD_ASAN") ? 3000 : 20000;
  for (int i = 0; i < nlines; i++) {
    int k = snprintf(buf, sizeof buf, " w%d and w%d `` x%d '' %s\n", i % 997, (i * 31) % 1013, i, i % 3 ? "é" : "  ");
    fputs(buf, f);
    ut_words_add_text(ref, buf, (size_t)k, NULL);
  }
  fputs("tail without newline", f);
  ut_words_add_text(ref, "tail without newline", 20, NULL);
  fclose(f);
  int same = 1;
  for (int threads = 1; threads <= 3; threads++) {
    ut_words_set_read_block(4096 + 77 * (size_t)threads);
    UtWords *got = ut_words_new();
    rc = ut_words_add_file(got, path, threads, &err);
    same &= rc == 0 && ut_words_unique(got) == ut_words_unique(ref) && ut_words_total(got) == ut_words_total(ref);
    for (size_t i = 0; same && i < ut_words_unique(ref); i++) {
      size_t la, lb; uint64_t ca, cb;
      const char *pa = ut_words_get(got, i, &la, &ca), *pb = ut_words_get(ref, i, &lb, &cb);
      same = la == lb && !memcmp(pa, pb, la) && ca == cb;
    }
    ut_words_free(got);
  }
  check(same, "words_file_blocks_and_threads_match_lines", "tables differ");
  f = fopen(path, "ab");
  fputs("\nline after\nbad \xC0\x80 overlong\n", f);
  fclose(f);
  ut_words_set_read_block(5000);
  w = ut_words_new();
  rc = ut_words_add_file(w, path, 2, &err);
  snprintf(want_msg, sizeof want_msg, "%s:%d: invalid UTF-8 at byte 4", path, nlines + 3);
  check(rc == -1 && !strcmp(err.msg, want_msg), "words_file_error_line_across_blocks", "got '%s' want '%s'", err.msg, want_msg);
  ut_words_free(w);
  ut_words_free(ref);
  ut_words_set_read_block(0);
  remove(path);
}

static void test_train_end_to_end(void) {
  /* A small corpus with repeated words (42 seeds): the result has exactly vocab_size pieces,
  ** specials first with score 0, every character, scores sorted. */
  UtWords *w = ut_words_new();
  const char *lines[] = {"the theme of the thesis is there\n", "she sells sea shells by the sea shore\n",
                         "hello there, hello world\n", "été, tête, thé\n"};
  for (int r = 0; r < 30; r++)
    for (int i = 0; i < 4; i++) ut_words_add_text(w, lines[i], strlen(lines[i]), NULL);
  const char *sp[] = {"[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"};
  UtOptions o; ut_options_default(&o);
  o.vocab_size = 30; o.special_tokens = sp; o.n_special = 5; o.unk_token = "<unk>"; o.threads = 2;
  UtResult r;
  Err err;
  int rc = ut_train(w, &o, &r, &err);
  int ok = rc == 0 && r.n == 30 && r.unk_id == 2;
  for (int i = 0; ok && i < 5; i++) ok = !strcmp(r.pieces[i], sp[i]) && r.scores[i] == 0.0;
  for (int i = 6; ok && i < r.n; i++) ok = r.scores[i] <= r.scores[i - 1] && r.scores[i] < 0;
  const char *chars[] = {"t", "h", "é", "ê", ",", "\n", "▁", "w", "y"};
  for (size_t i = 0; ok && i < sizeof chars / sizeof chars[0]; i++) ok = has_piece(&r, chars[i]);
  int dup = 0;
  for (int i = 0; ok && i < r.n; i++) for (int j = 0; j < i; j++) dup |= !strcmp(r.pieces[i], r.pieces[j]);
  check(ok && !dup, "train_specials_alphabet_size_order", "%s", rc ? err.msg : "layout wrong");
  check(rc == 0 && has_piece(&r, "▁the") && has_piece(&r, "▁there"), "train_learns_frequent_words", "'▁the' or '▁there' missing");
  if (rc == 0) ut_result_free(&r);

  /* unk not among the specials: inserted at id 0 */
  o.special_tokens = sp; o.n_special = 2; o.unk_token = "[UNK]";
  rc = ut_train(w, &o, &r, &err);
  check(rc == 0 && r.unk_id == 0 && !strcmp(r.pieces[0], "[UNK]") && !strcmp(r.pieces[1], "[CLS]") && r.n == 30,
        "train_unk_added_first", "%s", rc ? err.msg : "layout wrong");
  if (rc == 0) ut_result_free(&r);

  o.vocab_size = 20; o.n_special = 5; o.unk_token = "<unk>";
  rc = ut_train(w, &o, &r, &err);
  check(rc == -1 && strstr(err.msg, "smaller than the alphabet"), "train_vocab_smaller_than_alphabet", "got rc %d '%s'", rc, err.msg);
  ut_words_free(w);

  w = ut_words_new();
  o.vocab_size = 100;
  rc = ut_train(w, &o, &r, &err);
  check(rc == -1 && strstr(err.msg, "empty corpus"), "train_empty_corpus", "got rc %d '%s'", rc, err.msg);
  o.shrinking_factor = 1.5;
  ut_words_add_text(w, "a b", 3, NULL);
  rc = ut_train(w, &o, &r, &err);
  check(rc == -1 && strstr(err.msg, "shrinking"), "train_bad_option", "got rc %d '%s'", rc, err.msg);
  ut_words_free(w);
}

static void test_train_same_on_any_thread_count(void) {
  /* 40000 distinct words (many E-step chunks in every lane): the vocabulary and every
  ** score have the same bits on 1, 2, 3, 8 and 17 threads. Summing per thread gave
  ** scores one unit apart between 1 and 2 threads, and sometimes other pieces. */
  UtWords *w = ut_words_new();
  uint64_t x = 88172645463325252ull;
  char word[16];
  for (int i = 0; i < 40000; i++) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    int len = 2 + (int)(x % 7);
    for (int j = 0; j < len; j++) word[j] = "etaoinshrdlucmfw"[(x >> (8 + 4 * j)) & 15];
    ut_words_add(w, word, (size_t)len, 1 + (x >> 40) % 97, NULL);
  }
  UtOptions o; ut_options_default(&o);
  o.vocab_size = 600;
  UtResult ref, r;
  Err err;
  o.threads = 1;
  int rc = ut_train(w, &o, &ref, &err);
  check(rc == 0 && ref.n == 600, "train_many_words", "%s", rc ? err.msg : "wrong size");
  int threads[] = {2, 3, 8, 17};
  for (size_t k = 0; rc == 0 && k < sizeof threads / sizeof threads[0]; k++) {
    o.threads = threads[k];
    int rc2 = ut_train(w, &o, &r, &err), same = rc2 == 0 && r.n == ref.n, at = -1;
    for (int i = 0; same && i < r.n; i++)
      if (strcmp(r.pieces[i], ref.pieces[i]) || memcmp(&r.scores[i], &ref.scores[i], sizeof(double))) { same = 0; at = i; }
    char name[64];
    snprintf(name, sizeof name, "train_same_bits_on_%d_threads", threads[k]);
    check(same, name, "%s; first difference at piece %d", rc2 ? err.msg : "", at);
    if (rc2 == 0) ut_result_free(&r);
  }
  if (rc == 0) ut_result_free(&ref);
  ut_words_free(w);
}

int main(void) {
  test_digamma();
  test_seeds_match_hf();
  test_estep_brute_force();
  test_prune_vs_rederivation();
  test_words();
  test_words_vs_tokenizer_pretokenize();
  test_train_end_to_end();
  test_train_same_on_any_thread_count();
  return check_exit();
}
