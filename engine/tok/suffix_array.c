/* Suffix array by prefix doubling. The texts it sees (the distinct words of a
** corpus, a few hundred thousand to a few million symbols, with short repeats)
** settle after a handful of rounds, so the simple O(n log n) method is as fast as
** SA-IS here and much easier to trust. */
#include "engine/tok/suffix_array.h"

#include <stdlib.h>
#include <string.h>

int sa_build(const int32_t *t, int32_t n, int32_t k, int32_t *sa, Err *err) {
  if (n <= 0) return 0;
  if (k <= 0) return err_set(err, "suffix array: alphabet size %d", (int)k);
  int32_t nc = k > n ? k : n;
  int32_t *rank = malloc((size_t)n * sizeof *rank), *tmp = malloc((size_t)n * sizeof *tmp);
  int32_t *cnt = malloc(((size_t)nc + 1) * sizeof *cnt);
  if (!rank || !tmp || !cnt) { free(rank); free(tmp); free(cnt); return err_set(err, "suffix array: out of memory (%d symbols)", (int)n); }
  for (int32_t i = 0; i < n; i++)
    if (t[i] < 0 || t[i] >= k) { free(rank); free(tmp); free(cnt); return err_set(err, "suffix array: symbol %d out of [0,%d)", (int)t[i], (int)k); }

  /* Round 0: bucket by the first symbol. */
  memset(cnt, 0, ((size_t)k + 1) * sizeof *cnt);
  for (int32_t i = 0; i < n; i++) cnt[t[i] + 1]++;
  for (int32_t c = 0; c < k; c++) cnt[c + 1] += cnt[c];
  for (int32_t i = 0; i < n; i++) sa[cnt[t[i]]++] = i;
  int32_t classes = 1;
  rank[sa[0]] = 0;
  for (int32_t i = 1; i < n; i++) { if (t[sa[i]] != t[sa[i - 1]]) classes++; rank[sa[i]] = classes - 1; }

  /* Round h: sort by (rank[i], rank[i+h]) with a missing second half smallest.
  ** The order by second key comes for free from the previous suffix array. */
  for (int32_t h = 1; classes < n; h *= 2) {
    int32_t p = 0;
    for (int32_t i = n - h < 0 ? 0 : n - h; i < n; i++) tmp[p++] = i;
    for (int32_t j = 0; j < n; j++) if (sa[j] >= h) tmp[p++] = sa[j] - h;
    memset(cnt, 0, ((size_t)classes + 1) * sizeof *cnt);
    for (int32_t i = 0; i < n; i++) cnt[rank[i] + 1]++;
    for (int32_t c = 0; c < classes; c++) cnt[c + 1] += cnt[c];
    for (int32_t j = 0; j < n; j++) sa[cnt[rank[tmp[j]]]++] = tmp[j];
    int32_t r = 0;
    tmp[sa[0]] = 0;
    for (int32_t i = 1; i < n; i++) {
      int32_t a = sa[i - 1], b = sa[i];
      int32_t ra = a + h < n ? rank[a + h] : -1, rb = b + h < n ? rank[b + h] : -1;
      if (rank[a] != rank[b] || ra != rb) r++;
      tmp[b] = r;
    }
    int32_t *sw = rank; rank = tmp; tmp = sw;
    classes = r + 1;
    if (h > n / 2 + 1 && classes < n) break;  /* cannot happen; guards against a logic error looping */
  }
  free(rank); free(tmp); free(cnt);
  return 0;
}

int sa_lcp(const int32_t *t, const int32_t *sa, int32_t n, int32_t *lcp, Err *err) {
  if (n <= 0) return 0;
  int32_t *inv = malloc((size_t)n * sizeof *inv);
  if (!inv) return err_set(err, "suffix array: out of memory for the LCP array");
  for (int32_t i = 0; i < n; i++) inv[sa[i]] = i;
  int32_t h = 0;
  lcp[0] = 0;
  for (int32_t i = 0; i < n; i++) {
    if (inv[i] == 0) { h = 0; continue; }
    int32_t j = sa[inv[i] - 1];
    while (i + h < n && j + h < n && t[i + h] == t[j + h]) h++;
    lcp[inv[i]] = h;
    if (h > 0) h--;
  }
  free(inv);
  return 0;
}

/* The bottom-up traversal of LCP intervals with a stack, as esaxx does it: a
** leaf is pushed for every suffix so that intervals of one suffix are never
** emitted, and an interval is emitted when a smaller LCP closes it. */
int64_t sa_nodes(const int32_t *sa, const int32_t *lcp, int32_t n, SaNode **out, Err *err) {
  *out = NULL;
  if (n <= 0) return 0;
  SaNode *nodes = malloc((size_t)n * sizeof *nodes);
  int32_t *st_first = malloc(((size_t)n * 2 + 2) * sizeof *st_first);
  int64_t *st_depth = malloc(((size_t)n * 2 + 2) * sizeof *st_depth);
  if (!nodes || !st_first || !st_depth) {
    free(nodes); free(st_first); free(st_depth);
    return err_set(err, "suffix array: out of memory for suffix tree nodes");
  }
  int64_t top = 0, count = 0;
  st_first[0] = -1; st_depth[0] = -1;
  for (int32_t i = 0;; i++) {
    int32_t cur_first = i;
    int64_t cur_depth = (i == n) ? -1 : (i == 0 ? -1 : lcp[i]);
    while (st_depth[top] > cur_depth) {
      if (i - st_first[top] > 1) {
        nodes[count].left = st_first[top];
        nodes[count].right = i;
        nodes[count].depth = (int32_t)st_depth[top];
        count++;
      }
      cur_first = st_first[top];
      top--;
    }
    if (st_depth[top] < cur_depth) { top++; st_first[top] = cur_first; st_depth[top] = cur_depth; }
    if (i == n) break;
    top++; st_first[top] = i; st_depth[top] = (int64_t)n - sa[i] + 1;
  }
  free(st_first); free(st_depth);
  *out = nodes;
  return count;
}
