/* Text-classification examples made model input (server/cli/cls_examples.h). */
#include <stdlib.h>
#include <string.h>

#include "server/cli/cls_examples.h"

/* The ids of the examples idx[0..n) (all of them when idx is NULL) into s, each cut to
** max_len tokens as HF's truncation=True does: text tokens dropped from the end, the
** template's last token ([SEP]) kept last. */
static int make_set(const int32_t *ids, const size_t *starts, const int32_t *labels, const size_t *idx, size_t n,
                    int max_len, TextClsSet *s, Err *e) {
  memset(s, 0, sizeof *s);
  size_t total = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = idx ? idx[k] : k, len = starts[i + 1] - starts[i];
    total += len < (size_t)max_len ? len : (size_t)max_len;
  }
  s->ids = malloc((total ? total : 1) * sizeof *s->ids);
  s->starts = malloc((n + 1) * sizeof *s->starts);
  s->labels = malloc((n ? n : 1) * sizeof *s->labels);
  if (!s->ids || !s->starts || !s->labels) {
    textcls_set_free(s);
    return err_setk(e, ERR_NOMEM, "out of memory for %zu examples", n);
  }
  size_t at = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = idx ? idx[k] : k, len = starts[i + 1] - starts[i];
    const int32_t *src = ids + starts[i];
    s->starts[k] = at;
    if (len <= (size_t)max_len) {
      memcpy(s->ids + at, src, len * sizeof *src);
      at += len;
    } else {
      memcpy(s->ids + at, src, (size_t)(max_len - 1) * sizeof *src);
      s->ids[at + (size_t)max_len - 1] = src[len - 1];
      at += (size_t)max_len;
    }
    if ((int)(at - s->starts[k]) > s->max_len) s->max_len = (int)(at - s->starts[k]);
    s->labels[k] = labels[i];
  }
  s->starts[n] = at;
  s->n = n;
  return 0;
}

int cls_examples_tokenize(const Tokenizer *tok, const TextClsRaw *raw, const int32_t *labels, int threads, int max_len,
                          const size_t *const idx[], const size_t n_idx[], TextClsSet *const out[], int n_out, Err *e) {
  size_t *lens = malloc((raw->n ? raw->n : 1) * sizeof *lens);
  if (!lens) return err_setk(e, ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < raw->n; i++) lens[i] = strlen(raw->texts[i]);
  int32_t *ids = NULL;
  size_t *starts = NULL;
  int r = tokenizer_encode_many(tok, (const char *const *)raw->texts, lens, raw->n, 1, threads, &ids, &starts, e);
  free(lens);
  for (int k = 0; r == 0 && k < n_out; k++)
    r = make_set(ids, starts, labels, idx[k], idx[k] ? n_idx[k] : raw->n, max_len, out[k], e);
  free(ids);
  free(starts);
  return r;
}

