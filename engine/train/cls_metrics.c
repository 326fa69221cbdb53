#include "engine/train/cls_metrics.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* sklearn's _prf_divide with zero_division="warn": an ill-defined ratio is 0 (the
** warning has no place here; the header says so). */
static double ratio(int64_t num, int64_t den) { return den == 0 ? 0.0 : (double)num / (double)den; }

int cls_metrics(const int32_t *y_true, const int32_t *y_pred, size_t n, int n_labels, ClsMetrics *out, int64_t *confusion,
                Err *err) {
  memset(out, 0, sizeof *out);
  if (n == 0) return err_setk(err, ERR_INVALID, "no predictions to score");
  if (n_labels < 1) return err_setk(err, ERR_INVALID, "%d labels; need at least 1", n_labels);
  for (size_t i = 0; i < n; i++) {
    if (y_true[i] < 0 || y_true[i] >= n_labels)
      return err_setk(err, ERR_INVALID, "true label %" PRId32 " of example %zu is not in [0, %d)", y_true[i], i, n_labels);
    if (y_pred[i] < 0 || y_pred[i] >= n_labels)
      return err_setk(err, ERR_INVALID, "predicted label %" PRId32 " of example %zu is not in [0, %d)", y_pred[i], i, n_labels);
  }
  /* Per label: true positives, predictions (tp + fp), true examples (support, tp + fn). */
  int64_t *tp = calloc((size_t)n_labels * 3, sizeof *tp);
  if (!tp) return err_setk(err, ERR_NOMEM, "out of memory");
  int64_t *pred = tp + n_labels, *support = pred + n_labels;
  if (confusion) memset(confusion, 0, (size_t)n_labels * (size_t)n_labels * sizeof *confusion);
  int64_t correct = 0;
  for (size_t i = 0; i < n; i++) {
    int t = y_true[i], p = y_pred[i];
    pred[p]++;
    support[t]++;
    if (t == p) { tp[t]++; correct++; }
    if (confusion) confusion[(size_t)t * (size_t)n_labels + (size_t)p]++;
  }
  /* sklearn without labels= averages over unique_labels(y_true, y_pred): a label that
  ** occurs in neither is left out, one that occurs on one side only counts with 0s. */
  double sum_p = 0, sum_r = 0, sum_f = 0, sum_wf = 0;
  int present = 0;
  for (int l = 0; l < n_labels; l++) {
    if (pred[l] == 0 && support[l] == 0) continue;
    present++;
    double p = ratio(tp[l], pred[l]), r = ratio(tp[l], support[l]);
    /* precision_recall_fscore_support's F (beta 1): 2pr / (p + r), 0 when p + r = 0.
    ** sklearn >= 1.3 writes it 2tp / (2tp + fp + fn); the two agree to rounding. */
    double f = p + r == 0 ? 0.0 : 2 * p * r / (p + r);
    sum_p += p;
    sum_r += r;
    sum_f += f;
    sum_wf += f * (double)support[l];
  }
  out->n = n;
  out->accuracy = (double)correct / (double)n;
  out->macro_precision = sum_p / present;
  out->macro_recall = sum_r / present;
  out->macro_f1 = sum_f / present;
  out->weighted_f1 = sum_wf / (double)n;  /* the supports sum to n, never 0 here */
  free(tp);
  return 0;
}

/* 1 when cell a ranks before cell b: larger count, then smaller (true, pred). */
static int ranks_before(const ClsConfusion *a, const ClsConfusion *b) {
  if (a->count != b->count) return a->count > b->count;
  if (a->true_id != b->true_id) return a->true_id < b->true_id;
  return a->pred_id < b->pred_id;
}

int cls_top_confusions(const int64_t *confusion, int n_labels, int k, ClsConfusion *out) {
  if (!confusion || n_labels < 1 || k < 1) return 0;
  int have = 0;
  /* Insertion into a kept top-k list: k is a handful and the matrix small. */
  for (int t = 0; t < n_labels; t++)
    for (int p = 0; p < n_labels; p++) {
      int64_t c = confusion[(size_t)t * (size_t)n_labels + (size_t)p];
      if (t == p || c <= 0) continue;
      ClsConfusion cell = {t, p, c};
      if (have == k && !ranks_before(&cell, &out[k - 1])) continue;
      int at = have < k ? have++ : k - 1;
      while (at > 0 && ranks_before(&cell, &out[at - 1])) { out[at] = out[at - 1]; at--; }
      out[at] = cell;
    }
  return have;
}
