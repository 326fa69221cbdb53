/* The Unigram lattice against independent references: exhaustive enumeration of
** every segmentation on small random vocabularies (best path, log Z, marginals),
** a naive O(n^2) dynamic programme without the trie on long strings, and the trie
** against a linear scan of the pieces. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/tok/unigram.h"
#include "tests/unit/check.h"

/* Characters of 1, 2, 3 and 4 bytes so unknowns must span whole characters. */
static const char *alphabet[] = {"a", "b", "c", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80"};
#define NALPHA 6
#define MAXP 40

typedef struct Vocab {
  int n, unk;
  char text[MAXP][32];
  const char *ptr[MAXP];
  double score[MAXP];
} Vocab;

static size_t clen(const char *s) {
  unsigned char c = (unsigned char)*s;
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* The id HF gives to the string s[0..len): the last piece with that text, or -1. */
static int ref_id(const Vocab *v, const char *s, size_t len) {
  int id = -1;
  for (int i = 0; i < v->n; i++)
    if (strlen(v->text[i]) == len && !memcmp(v->text[i], s, len)) id = i;
  return id;
}

static double min_score(const Vocab *v) {
  double m = v->score[0];
  for (int i = 1; i < v->n; i++) if (v->score[i] < m) m = v->score[i];
  return m;
}

static void random_vocab(Rng *r, Vocab *v, int n, int with_unk) {
  v->n = 0;
  v->unk = -1;
  if (with_unk) { strcpy(v->text[0], "<unk>"); v->score[0] = 0; v->unk = 0; v->n = 1; }
  while (v->n < n) {
    int nc = 1 + (int)rng_below(r, 3);
    char *t = v->text[v->n];
    t[0] = 0;
    for (int k = 0; k < nc; k++) strcat(t, alphabet[rng_below(r, NALPHA)]);
    v->score[v->n] = -1 - 7 * rng_uniform(r);
    v->n++;
  }
  /* A duplicate now and then: HF keeps the last id for a repeated piece. */
  if (v->n > 3 && rng_below(r, 3) == 0) { strcpy(v->text[v->n - 1], v->text[v->n - 2]); }
  for (int i = 0; i < v->n; i++) v->ptr[i] = v->text[i];
}

static void random_text(Rng *r, char *out, int nchars) {
  out[0] = 0;
  for (int k = 0; k < nchars; k++) strcat(out, alphabet[rng_below(r, NALPHA)]);
}

/* Exhaustive enumeration: every path through the lattice of s from position pos.
** Nodes: pieces (not banned) and, where no piece is exactly the next character,
** an unk node over it. Tracks the best score, log-sum-exp of all, and marginals. */
typedef struct Enum {
  const Vocab *v;
  const char *s;
  size_t len;
  int banned;
  double unk_score;
  double best;
  int path[256], npath;
  double sumw;            /* sum of exp(score) */
  double count[MAXP];     /* sum over paths of exp(score) * occurrences */
} Enum;

static void enumerate(Enum *e, size_t pos, double score) {
  if (pos == e->len) {
    if (score > e->best) e->best = score;
    double w = exp(score);
    e->sumw += w;
    for (int i = 0; i < e->npath; i++) e->count[e->path[i]] += w;
    return;
  }
  size_t mb = clen(e->s + pos);
  int single = 0;
  for (size_t end = pos + 1; end <= e->len; end++) {
    int id = ref_id(e->v, e->s + pos, end - pos);
    if (id < 0) continue;
    if (end - pos == mb) single = 1;
    if (id == e->banned) continue;
    e->path[e->npath++] = id;
    enumerate(e, end, score + e->v->score[id]);
    e->npath--;
  }
  if (!single && e->v->unk >= 0) {
    e->path[e->npath++] = e->v->unk;
    enumerate(e, pos + mb, score + e->unk_score);
    e->npath--;
  }
}

static void enum_run(Enum *e, const Vocab *v, const char *s, int banned) {
  memset(e, 0, sizeof *e);
  e->v = v; e->s = s; e->len = strlen(s); e->banned = banned;
  e->unk_score = min_score(v) - 10;
  e->best = -INFINITY;
  enumerate(e, 0, 0);
}

/* Score of an encode() result: unk tokens cover only unknown characters here. */
static double path_score(const Vocab *v, const char *s, size_t len, const int32_t *ids, const int32_t *starts, int n, int *consistent) {
  double unk_score = min_score(v) - 10, total = 0;
  *consistent = n == 0 || starts[0] == 0;
  for (int i = 0; i < n; i++) {
    size_t a = (size_t)starts[i], b = i + 1 < n ? (size_t)starts[i + 1] : len;
    if (b <= a) { *consistent = 0; return 0; }
    if (ids[i] == v->unk) {
      if (i > 0 && ids[i - 1] == v->unk) *consistent = 0;  /* unknowns must have fused */
      for (size_t p = a; p < b; p += clen(s + p)) total += unk_score;
    } else {
      if (ref_id(v, s + a, b - a) != ids[i]) *consistent = 0;
      total += v->score[ids[i]];
    }
  }
  return total;
}

/* Naive Viterbi score and log Z without a trie: every substring tested by scan. */
static void naive_dp(const Vocab *v, const char *s, size_t len, double *best, double *logz) {
  double *b = malloc((len + 1) * sizeof *b), *a = malloc((len + 1) * sizeof *a);
  double unk_score = min_score(v) - 10;
  for (size_t i = 0; i <= len; i++) { b[i] = -INFINITY; a[i] = -INFINITY; }
  b[0] = 0; a[0] = 0;
  for (size_t pos = 0; pos < len; pos += clen(s + pos)) {
    size_t mb = clen(s + pos);
    int single = 0;
    for (int i = 0; i < v->n; i++) {
      size_t l = strlen(v->text[i]);
      if (l == 0 || pos + l > len || memcmp(v->text[i], s + pos, l)) continue;
      if (ref_id(v, v->text[i], l) != i) continue;  /* shadowed duplicate */
      if (l == mb) single = 1;
      if (b[pos] + v->score[i] > b[pos + l]) b[pos + l] = b[pos] + v->score[i];
      double x = a[pos] + v->score[i], y = a[pos + l];
      a[pos + l] = y == -INFINITY ? x : fmax(x, y) + log(1 + exp(-fabs(x - y)));
    }
    if (!single) {
      if (b[pos] + unk_score > b[pos + mb]) b[pos + mb] = b[pos] + unk_score;
      double x = a[pos] + unk_score, y = a[pos + mb];
      a[pos + mb] = y == -INFINITY ? x : fmax(x, y) + log(1 + exp(-fabs(x - y)));
    }
  }
  *best = b[len]; *logz = a[len];
  free(a); free(b);
}

/* Models built on several threads at once (as the server's handlers build a revision's
** tokenizer for its side files): each thread's pieces differ, and every one must still be
** found under its own id. Unigram's constructor once sorted through a global pointer to
** the model, so a thread's sort compared another thread's (freed) pieces. */
#define PAR_THREADS 4
#define PAR_PIECES 30000
typedef struct ParJob { int seed, rounds, ok; } ParJob;
static void *build_models(void *arg) {
  ParJob *j = arg;
  char (*text)[16] = malloc(sizeof *text * PAR_PIECES);
  const char **ptr = malloc(sizeof *ptr * PAR_PIECES);
  double *score = malloc(sizeof *score * PAR_PIECES);
  j->ok = text && ptr && score;
  for (int round = 0; j->ok && round < j->rounds; round++) {
    for (int i = 0; i < PAR_PIECES; i++) {
      /* Distinct pieces whose order by bytes is not their id order. */
      static const int mult[PAR_THREADS] = {7919, 7927, 7933, 7937};   /* each thread its own order */
      snprintf(text[i], sizeof text[i], "t%d_%05d", j->seed, (int)(((long)i * mult[j->seed]) % PAR_PIECES));
      ptr[i] = text[i];
      score[i] = -1.0 - i % 17;
    }
    Err err;
    Unigram *u = unigram_new(PAR_PIECES, ptr, score, -1, &err);
    if (!u) { j->ok = 0; break; }
    for (int i = 0; i < PAR_PIECES; i++) j->ok &= unigram_piece_id(u, text[i], strlen(text[i])) == i;
    unigram_free(u);
  }
  free(text); free(ptr); free(score);
  return NULL;
}

int main(void) {
  Rng r;
  rng_seed(&r, 2024);
  Err err;

  /* Trie lookups against a linear scan, including prefixes and non-pieces. */
  {
    int ok = 1, trials = 0;
    for (int t = 0; t < 200; t++) {
      Vocab v;
      random_vocab(&r, &v, 5 + (int)rng_below(&r, 30), rng_below(&r, 2));
      Unigram *u = unigram_new(v.n, v.ptr, v.score, v.unk, &err);
      if (!u) { ok = 0; break; }
      for (int q = 0; q < 50; q++) {
        char s[64];
        random_text(&r, s, 1 + (int)rng_below(&r, 3));
        ok &= unigram_piece_id(u, s, strlen(s)) == ref_id(&v, s, strlen(s));
        trials++;
      }
      for (int i = 0; i < v.n; i++) ok &= unigram_piece_id(u, v.text[i], strlen(v.text[i])) == ref_id(&v, v.text[i], strlen(v.text[i]));
      unigram_free(u);
    }
    check(ok && trials > 0, "unigram_trie_lookup", "trie lookup differs from a linear scan");
  }

  {
    pthread_t th[PAR_THREADS];
    ParJob jobs[PAR_THREADS];
    int started = 0, ok = 1;
    for (int i = 0; i < PAR_THREADS; i++) {
      jobs[i] = (ParJob){.seed = i, .rounds = 6};
      if (pthread_create(&th[i], NULL, build_models, &jobs[i]) == 0) started++;
      else break;
    }
    for (int i = 0; i < started; i++) { pthread_join(th[i], NULL); ok &= jobs[i].ok; }
    check(ok && started == PAR_THREADS, "unigram_built_on_threads_at_once",
          "a model built while other threads built theirs lost pieces (%d threads started)", started);
  }

  /* Viterbi, encode_without and forward-backward against enumeration. */
  {
    int vit_ok = 1, wo_ok = 1, z_ok = 1, m_ok = 1, fuse_seen = 0, unk_seen = 0, n_cases = 0;
    double worst_z = 0, worst_m = 0;
    for (int t = 0; t < 300; t++) {
      Vocab v;
      random_vocab(&r, &v, 4 + (int)rng_below(&r, 14), 1);
      Unigram *u = unigram_new(v.n, v.ptr, v.score, v.unk, &err);
      if (!u) { vit_ok = 0; break; }
      for (int q = 0; q < 5; q++) {
        char s[128];
        random_text(&r, s, 1 + (int)rng_below(&r, 9));
        size_t len = strlen(s);
        Enum e;
        enum_run(&e, &v, s, -1);
        int32_t ids[64], starts[64];
        int n = unigram_encode(u, s, len, ids, starts, 64);
        int consistent;
        double got = n < 0 ? NAN : path_score(&v, s, len, ids, starts, n, &consistent);
        if (n < 0 || !consistent || fabs(got - e.best) > 1e-9) vit_ok = 0;
        for (int i = 0; i < n; i++) if (ids[i] == v.unk) { unk_seen = 1; if ((i + 1 < n ? starts[i + 1] : (int)len) - starts[i] > (int)clen(s + starts[i])) fuse_seen = 1; }

        double expected[MAXP] = {0};
        double z = unigram_expected_counts(u, s, len, 2.0, expected);
        double rz = log(e.sumw);
        if (fabs(z - rz) > 1e-9 * fmax(1, fabs(rz))) z_ok = 0;
        if (fabs(z - rz) > worst_z) worst_z = fabs(z - rz);
        for (int i = 0; i < v.n; i++) {
          double want = 2.0 * e.count[i] / e.sumw;
          double d = fabs(expected[i] - want);
          if (d > 1e-9 * fmax(1, want)) m_ok = 0;
          if (d > worst_m) worst_m = d;
        }

        /* Without one of the pieces the path uses (or a random one). */
        int banned = n > 0 && ids[0] != v.unk ? ids[0] : 1 + (int)rng_below(&r, (uint32_t)v.n - 1);
        Enum eb;
        enum_run(&eb, &v, s, banned);
        int32_t wids[64];
        int wn = unigram_encode_without(u, s, len, banned, wids, 64);
        if (eb.best == -INFINITY) { if (wn != -1) wo_ok = 0; }
        else if (wn < 0) wo_ok = 0;
        else {
          double sc = 0, unk_score = min_score(&v) - 10;
          int uses = 0;
          for (int i = 0; i < wn; i++) { sc += wids[i] == v.unk ? unk_score : v.score[wids[i]]; uses |= wids[i] == banned; }
          if (uses || fabs(sc - eb.best) > 1e-9) wo_ok = 0;
        }
        n_cases++;
      }
      unigram_free(u);
    }
    check(vit_ok, "unigram_viterbi_vs_enumeration", "best path score differs on some of %d cases", n_cases);
    check(unk_seen && fuse_seen, "unigram_unknowns_fused", "cases never produced fused unknowns (unk %d fuse %d)", unk_seen, fuse_seen);
    check(z_ok, "unigram_logz_vs_enumeration", "worst |dlogZ| %g", worst_z);
    check(m_ok, "unigram_marginals_vs_enumeration", "worst marginal error %g", worst_m);
    check(wo_ok, "unigram_encode_without_vs_enumeration", "banned-piece best path differs");
  }

  /* Long strings (heap buffers) against the naive DP. */
  {
    int ok = 1;
    double worst = 0;
    for (int t = 0; t < 20; t++) {
      Vocab v;
      random_vocab(&r, &v, 30, 1);
      Unigram *u = unigram_new(v.n, v.ptr, v.score, v.unk, &err);
      static char s[8192];
      random_text(&r, s, 300 + (int)rng_below(&r, 1200));
      size_t len = strlen(s);
      static int32_t ids[8192], starts[8192];
      int n = unigram_encode(u, s, len, ids, starts, 8192);
      double best, logz, consistent_d;
      naive_dp(&v, s, len, &best, &logz);
      int consistent;
      double got = n < 0 ? NAN : path_score(&v, s, len, ids, starts, n, &consistent);
      consistent_d = consistent;
      double z = unigram_expected_counts(u, s, len, 1.0, NULL);
      if (n < 0 || !consistent_d || fabs(got - best) > 1e-7 * fabs(best) || fabs(z - logz) > 1e-9 * fabs(logz)) ok = 0;
      worst = fmax(worst, fabs(z - logz));
      /* Expected counts of a long word sum to the expected number of tokens, which
      ** is at least the Viterbi-free lower bound of ceil(chars / longest piece). */
      double ex[MAXP] = {0}, sum = 0;
      unigram_expected_counts(u, s, len, 1.0, ex);
      for (int i = 0; i < v.n; i++) { sum += ex[i]; if (!(ex[i] >= 0)) ok = 0; }
      if (!(sum >= 1 && sum <= (double)len)) ok = 0;
      /* Too small a buffer is an error, not an overflow. */
      if (n > 1 && unigram_encode(u, s, len, ids, starts, n - 1) != -1) ok = 0;
      unigram_free(u);
    }
    check(ok, "unigram_long_strings_vs_naive_dp", "worst |dlogZ| %g", worst);
  }

  /* No unk id: an uncovered character makes encoding fail, not crash. */
  {
    const char *p[] = {"a", "b", "ab"};
    double sc[] = {-1, -2, -1.5};
    Unigram *u = unigram_new(3, p, sc, -1, &err);
    int32_t ids[8];
    int n1 = unigram_encode(u, "abab", 4, ids, NULL, 8);
    int ok1 = n1 == 2 && ids[0] == 2 && ids[1] == 2;
    int n2 = unigram_encode(u, "abc", 3, ids, NULL, 8);
    double z = unigram_expected_counts(u, "abc", 3, 1.0, NULL);
    check(ok1 && n2 == -1 && z == -INFINITY, "unigram_no_unk_id", "n1 %d n2 %d z %g", n1, n2, z);
    check(unigram_encode(u, "", 0, ids, NULL, 8) == 0 && unigram_expected_counts(u, "", 0, 1, NULL) == 0, "unigram_empty_word", "empty input not empty");
    unigram_free(u);
  }

  /* HF's unknown score: min over all pieces (specials at 0 included) minus 10; a
  ** single unknown 4-byte character is one token covering all four bytes. */
  {
    const char *p[] = {"<unk>", "\xE2\x96\x81", "a"};
    double sc[] = {0, -3, -4};
    Unigram *u = unigram_new(3, p, sc, 0, &err);
    int32_t ids[8], st[8];
    int n = unigram_encode(u, "\xE2\x96\x81\xF0\x9F\x98\x80" "a", 8, ids, st, 8);
    check(n == 3 && ids[0] == 1 && ids[1] == 0 && ids[2] == 2 && st[1] == 3 && st[2] == 7,
          "unigram_unk_whole_character", "n %d", n);
    double ex[3] = {0};
    double z = unigram_expected_counts(u, "\xF0\x9F\x98\x80", 4, 1.0, ex);
    check(fabs(z - (-14.0)) < 1e-12 && fabs(ex[0] - 1) < 1e-12 && unigram_min_score(u) == -4, "unigram_unk_score", "z %g", z);
    unigram_free(u);
  }

  /* Bad arguments. */
  {
    const char *p[] = {"a"};
    double sc[] = {NAN};
    check(!unigram_new(1, p, sc, 0, &err) && strstr(err.msg, "finite"), "unigram_rejects_nan_score", "%s", err.msg);
    double sc2[] = {-1};
    check(!unigram_new(1, p, sc2, 3, &err) && strstr(err.msg, "unk_id"), "unigram_rejects_bad_unk", "%s", err.msg);
  }

  /* An empty piece is found by its text like any other (HF's token_to_id keeps the last of
  ** duplicates), though the trie cannot hold it and Viterbi never uses it (found by
  ** tests/fuzz/fuzz_tokenizer: "" looked up -1). */
  {
    const char *p[] = {"a", "", "b", ""};
    double sc[] = {-1, -2, -3, -4};
    Unigram *u = unigram_new(4, p, sc, 0, &err);
    Unigram *none = unigram_new(1, p, sc, 0, &err);
    int32_t ids[8];
    check(u && none && unigram_piece_id(u, "", 0) == 3 && unigram_piece_id(none, "", 0) == -1 && unigram_piece_id(u, "b", 1) == 2 &&
              unigram_encode(u, "ab", 2, ids, NULL, 8) == 2 && ids[0] == 0 && ids[1] == 2,
          "unigram_empty_piece_lookup", "%d %d", u ? unigram_piece_id(u, "", 0) : -9, none ? unigram_piece_id(none, "", 0) : -9);
    unigram_free(u);
    unigram_free(none);
  }
  return check_exit();
}
