/* Classification metrics (engine/train/cls_metrics.h) against scikit-learn itself:
** random true and predicted ids over several seeds and shapes (labels absent from both
** sides, present on one side only, one predicted class, perfect predictions, a single
** example) are written to a file, /usr/bin/python3 with sklearn computes accuracy_score,
** f1_score (macro, weighted), precision_score and recall_score (macro) and
** confusion_matrix on them, and every number must agree to 1e-12 (counts exactly).
** No Python or no sklearn is a failure, not a skip. Then a hand-checked case, the
** refusals, and cls_top_confusions' order. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/train/cls_metrics.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

static char root[512];

typedef struct Case {
  const char *name;
  size_t n;
  int n_labels;
  int true_lo, true_hi;    /* y_true drawn from [lo, hi) */
  int pred_lo, pred_hi;    /* wrong predictions drawn from [lo, hi) */
  double p_correct;        /* chance the prediction copies the truth (when in the predicted range) */
  uint64_t seed;
} Case;

static const Case cases[] = {
    {"one_sided_labels", 500, 10, 0, 6, 2, 8, 0.6, 1},      /* 0,1 true only; 6,7 predicted only; 8,9 in neither */
    {"banking77_like", 3080, 77, 0, 77, 0, 77, 0.9, 2},
    {"banking77_missing_classes", 300, 77, 5, 70, 0, 60, 0.5, 3},
    {"noisy", 1000, 12, 0, 12, 0, 12, 0.1, 4},
    {"noisy_seed5", 777, 7, 1, 7, 0, 5, 0.3, 5},
    {"one_predicted_class", 200, 6, 0, 6, 3, 4, 0.0, 6},
    {"perfect", 150, 9, 0, 9, 0, 9, 1.0, 7},
    {"single_example", 1, 4, 2, 3, 1, 2, 0.0, 8},
    {"single_correct", 1, 4, 2, 3, 2, 3, 1.0, 9},
    {"two_labels", 64, 2, 0, 2, 0, 2, 0.7, 10},
    {"one_label_both_sides", 20, 3, 1, 2, 1, 2, 1.0, 11},
    {"seed12", 2000, 30, 0, 25, 5, 30, 0.4, 12},
    {"seed13", 2000, 30, 3, 30, 0, 27, 0.75, 13},
};
enum { N_CASES = sizeof cases / sizeof *cases };

static void draw(const Case *c, int32_t *t, int32_t *p) {
  Rng r;
  rng_seed(&r, c->seed);
  for (size_t i = 0; i < c->n; i++) {
    t[i] = c->true_lo + (int32_t)rng_below(&r, (uint32_t)(c->true_hi - c->true_lo));
    int copy = rng_uniform(&r) < c->p_correct && t[i] >= c->pred_lo && t[i] < c->pred_hi;
    p[i] = copy ? t[i] : c->pred_lo + (int32_t)rng_below(&r, (uint32_t)(c->pred_hi - c->pred_lo));
  }
}

/* Reads the cases file, writes per case one line of five metrics (repr: every bit of the
** double) and one line of the n_labels^2 confusion counts (labels=range(n_labels)). */
static const char py_sklearn[] =
    "import sys, warnings\n"
    "from sklearn.metrics import accuracy_score, f1_score, precision_score, recall_score, confusion_matrix\n"
    "warnings.simplefilter('ignore')\n"
    "words = open(sys.argv[1]).read().split()\n"
    "k = 0\n"
    "out = open(sys.argv[2], 'w')\n"
    "while k < len(words):\n"
    "    n, L = int(words[k]), int(words[k + 1]); k += 2\n"
    "    t = [int(w) for w in words[k : k + n]]; k += n\n"
    "    p = [int(w) for w in words[k : k + n]]; k += n\n"
    "    m = [accuracy_score(t, p), f1_score(t, p, average='macro'), f1_score(t, p, average='weighted'),\n"
    "         precision_score(t, p, average='macro'), recall_score(t, p, average='macro')]\n"
    "    out.write(' '.join(repr(float(x)) for x in m) + '\\n')\n"
    "    out.write(' '.join(str(int(x)) for x in confusion_matrix(t, p, labels=list(range(L))).ravel()) + '\\n')\n";

static void against_sklearn(void) {
  char script[700], in[700], out[700], cmd[2400];
  snprintf(script, sizeof script, "%s/metrics.py", root);
  snprintf(in, sizeof in, "%s/cases.txt", root);
  snprintf(out, sizeof out, "%s/sklearn.txt", root);
  FILE *f = fopen(script, "w");
  if (!f) { check(0, "sklearn_setup", "cannot write %s: %s", script, strerror(errno)); return; }
  fputs(py_sklearn, f);
  fclose(f);
  f = fopen(in, "w");
  int32_t *t[N_CASES], *p[N_CASES];
  for (int c = 0; c < N_CASES; c++) {
    t[c] = malloc(cases[c].n * sizeof *t[c]);
    p[c] = malloc(cases[c].n * sizeof *p[c]);
    draw(&cases[c], t[c], p[c]);
    fprintf(f, "%zu %d\n", cases[c].n, cases[c].n_labels);
    for (size_t i = 0; i < cases[c].n; i++) fprintf(f, "%" PRId32 " ", t[c][i]);
    fputc('\n', f);
    for (size_t i = 0; i < cases[c].n; i++) fprintf(f, "%" PRId32 " ", p[c][i]);
    fputc('\n', f);
  }
  fclose(f);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s' '%s'", script, in, out);
  int st = system(cmd);
  if (st != 0) {
    check(0, "sklearn_reference", "'%s' failed (status %d): /usr/bin/python3 with scikit-learn (python3-sklearn) is needed", cmd, st);
  } else {
    f = fopen(out, "r");
    for (int c = 0; c < N_CASES; c++) {
      const Case *k = &cases[c];
      double ref[5];
      int got = 0;
      for (int i = 0; f && i < 5; i++) got += fscanf(f, "%lf", &ref[i]) == 1;
      size_t cells = (size_t)k->n_labels * (size_t)k->n_labels;
      int64_t *ref_conf = malloc(cells * sizeof *ref_conf), *conf = malloc(cells * sizeof *conf);
      for (size_t i = 0; f && i < cells; i++) got += fscanf(f, "%" SCNd64, &ref_conf[i]) == 1;
      char name[128];
      snprintf(name, sizeof name, "sklearn_%s", k->name);
      if ((size_t)got != 5 + cells) { check(0, name, "read %d of %zu numbers from %s", got, 5 + cells, out); free(ref_conf); free(conf); break; }
      ClsMetrics m;
      Err e = {0};
      /* The confusion buffer starts dirty: cls_metrics must zero it. */
      memset(conf, 0x5a, cells * sizeof *conf);
      int rc = cls_metrics(t[c], p[c], k->n, k->n_labels, &m, conf, &e);
      double mine[5] = {m.accuracy, m.macro_f1, m.weighted_f1, m.macro_precision, m.macro_recall};
      static const char *const what[5] = {"accuracy", "macro_f1", "weighted_f1", "macro_precision", "macro_recall"};
      double worst = 0;
      int at = 0;
      for (int i = 0; i < 5; i++) {
        double d = fabs(mine[i] - ref[i]);
        if (!(d <= worst)) { worst = d; at = i; }
      }
      int conf_ok = memcmp(conf, ref_conf, cells * sizeof *conf) == 0;
      check(rc == 0 && m.n == k->n && worst <= 1e-12 && conf_ok, name, "rc %d [%s]; %s %.17g vs sklearn %.17g (|d| %.3g); confusion %s",
            rc, e.msg, what[at], mine[at], ref[at], worst, conf_ok ? "equal" : "differs");
      printf("# %s: n %zu, accuracy %.6f, macro F1 %.6f, weighted F1 %.6f, largest |d| %.2g\n", k->name, k->n, m.accuracy, m.macro_f1,
             m.weighted_f1, worst);
      free(ref_conf);
      free(conf);
    }
    if (f) fclose(f);
  }
  for (int c = 0; c < N_CASES; c++) { free(t[c]); free(p[c]); }
}

static void hand_checked(void) {
  /* Labels 0..4, 4 in neither side (left out of the averages), 3 predicted only.
  **   true: 0 0 0 1 1 2      pred: 0 0 1 1 3 2
  ** label 0: tp 2, pred 2, true 3 -> p 1,   r 2/3, f 0.8
  ** label 1: tp 1, pred 2, true 2 -> p 1/2, r 1/2, f 1/2
  ** label 2: tp 1, pred 1, true 1 -> p 1,   r 1,   f 1
  ** label 3: tp 0, pred 1, true 0 -> p 0,   r 0 (zero_division), f 0 */
  int32_t t[] = {0, 0, 0, 1, 1, 2}, p[] = {0, 0, 1, 1, 3, 2};
  ClsMetrics m;
  int64_t conf[25];
  Err e = {0};
  int rc = cls_metrics(t, p, 6, 5, &m, conf, &e);
  double mp = (1 + 0.5 + 1 + 0) / 4, mr = (2.0 / 3 + 0.5 + 1 + 0) / 4, mf = (0.8 + 0.5 + 1 + 0) / 4, wf = (0.8 * 3 + 0.5 * 2 + 1 * 1) / 6;
  int ok = rc == 0 && m.n == 6 && fabs(m.accuracy - 4.0 / 6) < 1e-15 && fabs(m.macro_precision - mp) < 1e-15 &&
           fabs(m.macro_recall - mr) < 1e-15 && fabs(m.macro_f1 - mf) < 1e-15 && fabs(m.weighted_f1 - wf) < 1e-15;
  ok &= conf[0 * 5 + 0] == 2 && conf[0 * 5 + 1] == 1 && conf[1 * 5 + 1] == 1 && conf[1 * 5 + 3] == 1 && conf[2 * 5 + 2] == 1;
  int64_t total = 0;
  for (int i = 0; i < 25; i++) total += conf[i];
  check(ok && total == 6, "hand_checked", "rc %d: acc %g mp %g mr %g mf %g wf %g", rc, m.accuracy, m.macro_precision, m.macro_recall,
        m.macro_f1, m.weighted_f1);
  /* Without a confusion buffer the numbers are the same. */
  ClsMetrics m2;
  rc = cls_metrics(t, p, 6, 5, &m2, NULL, &e);
  check(rc == 0 && !memcmp(&m, &m2, sizeof m), "no_confusion_buffer", "rc %d", rc);

  struct { const char *name; int32_t t, p; size_t n; int labels; } bad[] = {
      {"refuses_true_out_of_range", 5, 0, 1, 5, },
      {"refuses_pred_negative", 0, -1, 1, 5},
      {"refuses_n_0", 0, 0, 0, 5},
      {"refuses_no_labels", 0, 0, 1, 0},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    Err be = {0};
    rc = cls_metrics(&bad[i].t, &bad[i].p, bad[i].n, bad[i].labels, &m, NULL, &be);
    check(rc == -1 && be.kind == ERR_INVALID && be.msg[0], bad[i].name, "rc %d kind %s [%s]", rc, err_kind_name(be.kind), be.msg);
  }
}

static void top_confusions(void) {
  /* 4 labels; off-diagonal counts 5 (2,1), 5 (0,3), 3 (1,0), 3 (0,2), 1 (3,3 is diagonal: 9) */
  int64_t c[16] = {0};
  c[2 * 4 + 1] = 5;
  c[0 * 4 + 3] = 5;
  c[1 * 4 + 0] = 3;
  c[0 * 4 + 2] = 3;
  c[3 * 4 + 2] = 1;
  c[3 * 4 + 3] = 9;
  c[1 * 4 + 1] = 7;
  ClsConfusion out[8];
  int k = cls_top_confusions(c, 4, 3, out);
  int ok = k == 3 && out[0].true_id == 0 && out[0].pred_id == 3 && out[0].count == 5 && out[1].true_id == 2 && out[1].pred_id == 1 &&
           out[2].true_id == 0 && out[2].pred_id == 2 && out[2].count == 3;
  check(ok, "top_confusions_order_and_ties", "k %d: (%d,%d) (%d,%d) (%d,%d)", k, out[0].true_id, out[0].pred_id, out[1].true_id,
        out[1].pred_id, out[2].true_id, out[2].pred_id);
  k = cls_top_confusions(c, 4, 8, out);
  ok = k == 5 && out[3].true_id == 1 && out[3].pred_id == 0 && out[4].true_id == 3 && out[4].pred_id == 2 && out[4].count == 1;
  check(ok, "top_confusions_fewer_than_k", "k %d", k);
  check(cls_top_confusions(c, 4, 0, out) == 0 && cls_top_confusions(NULL, 4, 3, out) == 0, "top_confusions_k_0", "returned cells");
  int64_t diag[4] = {3, 0, 0, 4};
  check(cls_top_confusions(diag, 2, 3, out) == 0, "top_confusions_none_off_diagonal", "returned cells");
}

int main(void) {
  if (fixture_tmpdir(root, sizeof root, "test_cls_metrics")) { check(0, "mkdtemp", "%s: %s", root, strerror(errno)); return check_exit(); }
  against_sklearn();
  hand_checked();
  top_confusions();
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) printf("# could not remove %s\n", root);
  return check_exit();
}
