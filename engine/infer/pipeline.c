/* Helpers both pipelines use (pipeline.h). */
#include "engine/infer/pipeline.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void *pipeline_fail(FillMaskError *fe, ErrKind kind, const char *fmt, ...) {
  fe->err.kind = kind;
  fe->limit = NULL;
  fe->max = fe->got = 0;
  fe->truncation_helps = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(fe->err.msg, sizeof fe->err.msg, fmt, ap);
  va_end(ap);
  return NULL;
}

void *pipeline_limit_hit(FillMaskError *fe, const char *limit, long long max, long long got) {
  fe->limit = limit;
  fe->max = max;
  fe->got = got;
  return NULL;
}

/* Shortest first; equal lengths in arrival order (qsort is not stable). */
static int cmp_slot(const void *a, const void *b) {
  const PipelineSlot *x = a, *y = b;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  if (x->req != y->req) return x->req < y->req ? -1 : 1;
  return (x->index > y->index) - (x->index < y->index);
}

void pipeline_sort(PipelineSlot *s, int n) {
  if (n > 1) qsort(s, (size_t)n, sizeof *s, cmp_slot);
}

int pipeline_pass_size(const PipelineSlot *s, int remaining, int max_batch) {
  int b = 0;
  long long real = 0;
  while (b < remaining && b < max_batch) {
    int n = s[b].n;
    if (b > 0 && (long long)(b + 1) * n > 2 * (real + n)) break;
    real += n;
    b++;
  }
  return b;
}

void pipeline_pad(const PipelineSlot *s, int b, int T, int32_t pad_id, int32_t *ids, int32_t *att) {
  for (int r = 0; r < b; r++)
    for (int t = 0; t < T; t++) {
      ids[(size_t)r * T + t] = t < s[r].n ? s[r].ids[t] : pad_id;
      att[(size_t)r * T + t] = t < s[r].n;
    }
}

const char *pipeline_json_kind(const json_t *x) {
  return json_is_object(x) ? "an object" : json_is_array(x) ? "a list" : json_is_null(x) ? "null"
         : json_is_boolean(x) ? "a boolean" : json_is_string(x) ? "a string" : "a number";
}

int pipeline_inputs(const json_t *inputs, const char ***texts, const char **one, int *n, int *is_list, FillMaskError *fe) {
  *texts = NULL;
  *n = 0;
  *is_list = 0;
  if (json_is_string(inputs)) {
    *one = json_string_value(inputs);
    *texts = one;
    *n = 1;
    return 0;
  }
  if (!json_is_array(inputs)) {
    pipeline_fail(fe, ERR_INVALID, "inputs: expected a string or a list of strings");
    return -1;
  }
  size_t m = json_array_size(inputs);
  if (m > (size_t)1 << 30) { pipeline_fail(fe, ERR_TOO_LARGE, "inputs: %zu texts", m); return -1; }
  const char **t = malloc(sizeof(char *) * (m > 0 ? m : 1));
  if (!t) { pipeline_fail(fe, ERR_NOMEM, "out of memory"); return -1; }
  for (size_t i = 0; i < m; i++) {
    const json_t *x = json_array_get(inputs, i);
    if (!json_is_string(x)) {
      free(t);
      pipeline_fail(fe, ERR_INVALID, "inputs[%zu]: expected a string, got %s", i, pipeline_json_kind(x));
      return -1;
    }
    t[i] = json_string_value(x);
  }
  *texts = t;
  *n = (int)m;
  *is_list = 1;
  return 0;
}
