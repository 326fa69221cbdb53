/* Text-classification examples made model input (server/cli/cls_examples.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/train/cls_metrics.h"
#include "server/cli/cls_examples.h"
#include "store/sha256.h"
#include "store/store.h"

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


int cls_examples_split_sha256(const size_t *idx, size_t n, char hex[65], Err *e) {
  size_t cap = n * 21 + 1, at = 0;
  char *text = malloc(cap);
  if (!text) return err_setk(e, ERR_NOMEM, "out of memory");
  text[0] = '\0';
  for (size_t k = 0; k < n; k++) at += (size_t)snprintf(text + at, cap - at, "%s%zu", k ? "," : "", idx[k]);
  store_sha256_hex(text, at, hex);
  free(text);
  return 0;
}

void cls_examples_rows_sha256(const TextClsRaw *raw, const size_t *idx, size_t n, char hex[65]) {
  StoreSha256 c;
  unsigned char digest[32];
  store_sha256_init(&c);
  for (size_t k = 0; k < n; k++) {
    store_sha256_update(&c, raw->texts[idx[k]], strlen(raw->texts[idx[k]]) + 1);
    store_sha256_update(&c, raw->labels[idx[k]], strlen(raw->labels[idx[k]]) + 1);
  }
  store_sha256_final(&c, digest, hex);
}

json_t *cls_examples_eval_json(const FinetuneEval *ev, size_t n) {
  json_t *o = json_object();
  if (!o) return NULL;
  struct { const char *k; double v; } f[] = {
    {"loss", ev->loss}, {"accuracy", ev->metrics.accuracy}, {"macro_f1", ev->metrics.macro_f1},
    {"weighted_f1", ev->metrics.weighted_f1}, {"macro_precision", ev->metrics.macro_precision},
    {"macro_recall", ev->metrics.macro_recall}, {"runtime", ev->seconds}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
    json_object_set_new(o, f[i].k, isfinite(f[i].v) ? json_real(f[i].v) : json_null());
  json_object_set_new(o, "examples", json_integer((json_int_t)n));
  return o;
}

json_t *cls_examples_confusions_json(const FinetuneEval *ev, const ModelConfig *cfg) {
  ClsConfusion top[10];
  int n = ev->confusion ? cls_top_confusions(ev->confusion, ev->n_labels, 10, top) : 0;
  json_t *a = json_array();
  for (int i = 0; a && i < n; i++)
    json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "true", config_label(cfg, top[i].true_id), "pred",
                                       config_label(cfg, top[i].pred_id), "count", (json_int_t)top[i].count));
  return a;
}
