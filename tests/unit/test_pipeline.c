/* Unit tests of engine/infer/pipeline: how the inputs of requests answered together
** are sorted and cut into padded forward passes. The pass sizes are checked against
** the rule written out again here by brute force (a pass grows while its padding stays
** under half of its work, up to max_batch), over random length mixes; the sort is
** checked for order and stability (arrival order among equal lengths) against an
** insertion sort; the padding element by element. And the inputs reader's refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/infer/pipeline.h"
#include "tests/unit/check.h"

/* The rule of pipeline_pass_size written out: the largest b (1 <= b <= max, b <= remaining)
** such that every prefix 2..b kept its padding under half: b * len[b-1] <= 2 * sum(len[0..b-1]). */
static int pass_size_brute(const int *len, int remaining, int max_batch) {
  int b = 1;
  long long sum = len[0];
  while (b < remaining && b < max_batch) {
    if ((long long)(b + 1) * len[b] > 2 * (sum + len[b])) break;
    sum += len[b];
    b++;
  }
  return b;
}

/* Sorted shortest first, equal lengths by (req, index): a stable insertion sort of the arrival order. */
static void sort_brute(PipelineSlot *s, int n) {
  for (int i = 1; i < n; i++) {
    PipelineSlot x = s[i];
    int j = i - 1;
    while (j >= 0 && s[j].n > x.n) { s[j + 1] = s[j]; j--; }
    s[j + 1] = x;
  }
}

static unsigned rnd_state = 12345;
static unsigned rnd(void) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (rnd_state >> 8) & 0xffffff;
}

int main(void) {
  enum { N = 64 };
  static int32_t tokens[N][40];
  for (int i = 0; i < N; i++)
    for (int t = 0; t < 40; t++) tokens[i][t] = 1000 * i + t;

  /* Sort: shortest first; equal lengths in arrival order, whatever qsort does. */
  int sort_ok = 1, pass_ok = 1, cover_ok = 1;
  for (int round = 0; round < 200; round++) {
    PipelineSlot s[N], ref[N];
    int n = 1 + (int)(rnd() % N), distinct = 1 + (int)(rnd() % 6);
    for (int i = 0; i < n; i++) {
      int len = 1 + (int)(rnd() % distinct) * (1 + (int)(rnd() % 7));
      if (len > 40) len = 40;
      s[i] = (PipelineSlot){tokens[i], len, i / 4, i % 4, NULL};   /* arrival order: request i/4, index i%4 */
    }
    memcpy(ref, s, sizeof s);
    pipeline_sort(s, n);
    sort_brute(ref, n);
    for (int i = 0; i < n; i++)
      sort_ok &= s[i].n == ref[i].n && s[i].req == ref[i].req && s[i].index == ref[i].index && s[i].ids == ref[i].ids;
    /* Passes: each size as the rule gives it, every input in exactly one pass. */
    int len[N], max_batch = 1 + (int)(rnd() % 16), covered = 0;
    for (int i = 0; i < n; i++) len[i] = s[i].n;
    for (int at = 0; at < n;) {
      int b = pipeline_pass_size(s + at, n - at, max_batch);
      pass_ok &= b >= 1 && b <= max_batch && b == pass_size_brute(len + at, n - at, max_batch);
      if (b < 1) break;
      at += b;
      covered += b;
    }
    cover_ok &= covered == n;
  }
  check(sort_ok, "pipeline_sort_shortest_first_in_arrival_order", "differs from a stable insertion sort");
  check(pass_ok, "pipeline_pass_size_keeps_padding_under_half", "a pass size differs from the rule");
  check(cover_ok, "pipeline_passes_cover_every_input_once", "the passes do not add up to the inputs");

  /* Fixed cases: equal lengths fill max_batch; one long input after short ones starts its own pass. */
  PipelineSlot eq[8], mix[3];
  for (int i = 0; i < 8; i++) eq[i] = (PipelineSlot){tokens[i], 5, 0, i, NULL};
  mix[0] = (PipelineSlot){tokens[0], 2, 0, 0, NULL};
  mix[1] = (PipelineSlot){tokens[1], 3, 0, 1, NULL};
  mix[2] = (PipelineSlot){tokens[2], 30, 0, 2, NULL};
  check(pipeline_pass_size(eq, 8, 4) == 4 && pipeline_pass_size(eq, 3, 4) == 3 && pipeline_pass_size(eq, 8, 1) == 1,
        "pipeline_pass_size_equal_lengths", "sizes %d %d %d", pipeline_pass_size(eq, 8, 4), pipeline_pass_size(eq, 3, 4),
        pipeline_pass_size(eq, 8, 1));
  check(pipeline_pass_size(mix, 3, 8) == 2 && pipeline_pass_size(mix + 2, 1, 8) == 1, "pipeline_pass_size_long_input_alone",
        "size %d", pipeline_pass_size(mix, 3, 8));

  /* Padding: each row its ids with mask 1, then the pad id with mask 0, to T. */
  int32_t ids[3 * 32], att[3 * 32];
  memset(ids, 0x7f, sizeof ids);
  memset(att, 0x7f, sizeof att);
  pipeline_pad(mix, 2, 32, -7, ids, att);
  int pad_ok = 1;
  for (int r = 0; r < 2; r++)
    for (int t = 0; t < 32; t++) {
      int in = t < mix[r].n;
      pad_ok &= ids[r * 32 + t] == (in ? mix[r].ids[t] : -7) && att[r * 32 + t] == in;
    }
  pad_ok &= ids[2 * 32] == 0x7f7f7f7f;   /* nothing past b rows */
  check(pad_ok, "pipeline_pad_ids_then_pad_id", "a padded element differs");

  /* inputs: a string, a list of strings; anything else refused naming the element. */
  FillMaskError fe;
  const char **texts, *one;
  int n, is_list;
  json_t *str = json_string("a [MASK]"), *list = json_pack("[s,s]", "x", "y"), *bad = json_pack("[s,i]", "x", 3);
  int r1 = pipeline_inputs(str, &texts, &one, &n, &is_list, &fe);
  int ok1 = r1 == 0 && n == 1 && !is_list && texts == &one && !strcmp(texts[0], "a [MASK]");
  int r2 = pipeline_inputs(list, &texts, &one, &n, &is_list, &fe);
  int ok2 = r2 == 0 && n == 2 && is_list && !strcmp(texts[1], "y");
  if (r2 == 0 && texts != &one) free(texts);
  memset(&fe, 0, sizeof fe);
  int r3 = pipeline_inputs(bad, &texts, &one, &n, &is_list, &fe);
  int ok3 = r3 == -1 && fe.err.kind == ERR_INVALID && strstr(fe.err.msg, "1");
  check(ok1 && ok2 && ok3, "pipeline_inputs_string_list_and_refusal", "%d %d %d: %s", ok1, ok2, ok3, fe.err.msg);
  json_decref(str);
  json_decref(list);
  json_decref(bad);
  return check_exit();
}
