/* Suffix array, LCP and suffix-tree nodes against brute force on random texts:
** the suffix array against qsort of all suffixes, the LCP against direct
** comparison, and the nodes against the definition (substrings occurring at least
** twice that are right-branching or end the text, with their rank interval). */
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/tok/suffix_array.h"
#include "tests/unit/check.h"

static const int32_t *g_t;
static int32_t g_n;

/* Lexicographic order of suffixes a and b, a proper prefix first. */
static int suffix_cmp(const void *pa, const void *pb) {
  int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
  while (a < g_n && b < g_n) {
    if (g_t[a] != g_t[b]) return g_t[a] < g_t[b] ? -1 : 1;
    a++; b++;
  }
  return a == g_n ? (b == g_n ? 0 : -1) : 1;
}

/* Compares suffix j with string s[0..len): <0, 0 when s is a prefix of it, >0. */
static int suffix_vs(const int32_t *t, int32_t n, int32_t j, const int32_t *s, int32_t len) {
  for (int32_t k = 0; k < len; k++) {
    if (j + k >= n) return -1;
    if (t[j + k] != s[k]) return t[j + k] < s[k] ? -1 : 1;
  }
  return 0;
}

static int node_cmp(const void *pa, const void *pb) {
  const SaNode *a = pa, *b = pb;
  if (a->left != b->left) return a->left < b->left ? -1 : 1;
  if (a->right != b->right) return a->right < b->right ? -1 : 1;
  return (a->depth > b->depth) - (a->depth < b->depth);
}

/* The nodes by their definition, found without the suffix array. */
static int brute_nodes(const int32_t *t, int32_t n, SaNode *out) {
  int cnt = 0;
  for (int32_t len = 0; len <= n; len++)
    for (int32_t i = 0; i + len <= n; i++) {
      const int32_t *s = t + i;
      int first = 1;  /* only the first occurrence of s enumerates it */
      for (int32_t j = 0; j < i && first; j++) if (j + len <= n && !memcmp(t + j, s, (size_t)len * 4)) first = 0;
      if (!first) continue;
      int occ = 0, at_end = 0, smaller = 0;
      int32_t follow = -2; int branching = 0;
      for (int32_t j = 0; j < n; j++) {
        int c = suffix_vs(t, n, j, s, len);
        if (c < 0) smaller++;
        if (c != 0) continue;
        occ++;
        if (j + len == n) at_end = 1;
        else if (follow == -2) follow = t[j + len];
        else if (t[j + len] != follow) branching = 1;
      }
      if (occ >= 2 && (branching || at_end)) { out[cnt].left = smaller; out[cnt].right = smaller + occ; out[cnt].depth = len; cnt++; }
    }
  return cnt;
}

int main(void) {
  Rng r;
  rng_seed(&r, 1234);
  int sa_ok = 1, lcp_ok = 1, nodes_ok = 1, trials = 0;
  char why[600] = "";
  for (int trial = 0; trial < 400; trial++) {
    int32_t n = 1 + (int32_t)rng_below(&r, trial < 300 ? 40 : 300);
    int32_t k = 1 + (int32_t)rng_below(&r, trial % 3 == 0 ? 2 : 6);
    int32_t *t = malloc((size_t)n * 4), *sa = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4), *lcp = malloc((size_t)n * 4);
    for (int32_t i = 0; i < n; i++) t[i] = (int32_t)rng_below(&r, (uint32_t)k);
    if (trial % 5 == 0) for (int32_t i = 0; i < n; i++) t[i] = (i % 7 == 6) ? 0 : 1 + (i % 3 == 0);  /* periodic */
    Err err;
    if (sa_build(t, n, k > 2 ? k : 3, sa, &err) || sa_lcp(t, sa, n, lcp, &err)) { sa_ok = 0; snprintf(why, sizeof why, "%s", err.msg); }
    g_t = t; g_n = n;
    for (int32_t i = 0; i < n; i++) ref[i] = i;
    qsort(ref, (size_t)n, 4, suffix_cmp);
    if (memcmp(ref, sa, (size_t)n * 4) && sa_ok) { sa_ok = 0; snprintf(why, sizeof why, "trial %d n=%d differs", trial, (int)n); }
    for (int32_t i = 1; i < n && lcp_ok; i++) {
      int32_t h = 0;
      while (sa[i] + h < n && sa[i - 1] + h < n && t[sa[i] + h] == t[sa[i - 1] + h]) h++;
      if (h != lcp[i]) lcp_ok = 0;
    }
    if (n <= 60) {
      SaNode *nodes = NULL, *want = malloc(sizeof(SaNode) * (size_t)(n * n + 2));
      int64_t got = sa_nodes(sa, lcp, n, &nodes, &err);
      int cw = brute_nodes(t, n, want);
      if (got != cw) nodes_ok = 0;
      else {
        qsort(nodes, (size_t)got, sizeof *nodes, node_cmp);
        qsort(want, (size_t)cw, sizeof *want, node_cmp);
        if (cw && memcmp(nodes, want, sizeof(SaNode) * (size_t)cw)) nodes_ok = 0;
      }
      free(nodes); free(want);
      trials++;
    }
    free(t); free(sa); free(ref); free(lcp);
  }
  check(sa_ok, "sa_matches_qsort", "%s", why);
  check(lcp_ok, "lcp_matches_direct", "an LCP value differs");
  check(nodes_ok && trials > 100, "nodes_match_definition", "node sets differ (%d trials)", trials);

  /* A larger text: doubling must finish and agree with qsort (long repeats). */
  int32_t n = getenv("MASKD_ASAN") ? 10000 : 60000;
  int32_t *t = malloc((size_t)n * 4), *sa = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4);
  for (int32_t i = 0; i < n; i++) t[i] = (i / 300) % 2 ? t[i - 300] : (int32_t)rng_below(&r, 50);  /* blocks of 300 repeated */
  int ok = sa_build(t, n, 50, sa, NULL) == 0;
  g_t = t; g_n = n;
  for (int32_t i = 0; i < n; i++) ref[i] = i;
  qsort(ref, (size_t)n, 4, suffix_cmp);
  check(ok && !memcmp(ref, sa, (size_t)n * 4), "sa_large_repeated_text", "differs from qsort");
  Err err;
  check(sa_build(t, n, 10, sa, &err) == -1 && strstr(err.msg, "out of"), "sa_rejects_symbol_out_of_range", "got '%s'", err.msg);
  free(t); free(sa); free(ref);
  return check_exit();
}
