/* Layer: engine/train/ (this folder: trainer loops, run description, metrics) uses
** engine/core, nn, tok, data, io, dist. (ARCHITECTURE.md)
**
** Classification metrics as scikit-learn computes them from true and predicted
** ids: accuracy_score, f1_score(average="macro" | "weighted"), precision and recall
** (macro), the confusion matrix. As sklearn does without labels=, the averages run
** over the labels that occur in y_true or y_pred; a label with no prediction (or
** no true example) has precision (recall) 0, sklearn's zero_division default. */
#ifndef MASKD_CLS_METRICS_H
#define MASKD_CLS_METRICS_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

typedef struct ClsMetrics {
  size_t n;                  /* examples scored */
  double accuracy;
  double macro_f1, weighted_f1;
  double macro_precision, macro_recall;
} ClsMetrics;

/* Metrics of n predictions over n_labels classes (ids in [0, n_labels)); confusion,
** when not NULL, receives the n_labels x n_labels counts (row: true, column:
** predicted, sklearn's confusion_matrix with labels=range(n_labels)). ERR_INVALID for
** an id out of range, n = 0 or n_labels < 1; ERR_NOMEM. */
int cls_metrics(const int32_t *y_true, const int32_t *y_pred, size_t n, int n_labels, ClsMetrics *out,
                int64_t *confusion, Err *err);

/* One off-diagonal cell of a confusion matrix. */
typedef struct ClsConfusion {
  int true_id, pred_id;
  int64_t count;
} ClsConfusion;

/* The k largest off-diagonal cells (count > 0), largest first, ties by (true, pred)
** ascending, into out; returns how many (<= k). */
int cls_top_confusions(const int64_t *confusion, int n_labels, int k, ClsConfusion *out);

#endif
