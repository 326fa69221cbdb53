/* A model folder's weights, read whole into float32 and put under the names
** transformers would load them by (engine/io/hf_weights.h). Raw tensors are gathered
** first (every layout gives the same raw set), then the name rules run once, then
** the set is checked against the config's model table. */
#include "engine/core/json_text.h"
#include "engine/io/hf_weights.h"

#include "engine/core/buf.h"
#include "engine/core/files.h"
#include "engine/io/torch_pickle.h"
#include "engine/nn/model.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct HfWeights {
  int n, cap;
  HfTensor *t;
  int sorted;              /* t is in name order (apply_rules sorted it): find() searches by halves */
  char **buffers;          /* the buffers left out, by name: a sharded index's check looks them up */
  size_t nbuf, capbuf;
  char source[160];
  Buf unused, ignored;
};

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static int has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static void list_add(Buf *b, const char *item) {
  if (b->len) buf_puts(b, ", ");
  buf_puts(b, item);
}

void hfw_free(HfWeights *w) {
  if (!w) return;
  for (int i = 0; i < w->n; i++) { free(w->t[i].name); free(w->t[i].data); }
  free(w->t);
  for (size_t i = 0; i < w->nbuf; i++) free(w->buffers[i]);
  free(w->buffers);
  buf_free(&w->unused);
  buf_free(&w->ignored);
  free(w);
}

void hfw_drop_data(HfWeights *w) {
  for (int i = 0; i < w->n; i++) { free(w->t[i].data); w->t[i].data = NULL; }
}

HfWeights *hfw_new(void) { return calloc(1, sizeof(HfWeights)); }

int hfw_count(const HfWeights *w) { return w->n; }
const HfTensor *hfw_tensor(const HfWeights *w, int i) { return i >= 0 && i < w->n ? &w->t[i] : NULL; }
const char *hfw_source(const HfWeights *w) { return w->source; }
const char *hfw_unused(const HfWeights *w) { return w->unused.p ? w->unused.p : ""; }
const char *hfw_ignored(const HfWeights *w) { return w->ignored.p ? w->ignored.p : ""; }

int hfw_is_unused_name(const ModelConfig *c, const char *name) {
  const char *pooler = c->model_type == MODEL_ROBERTA ? "roberta.pooler." : "bert.pooler.";
  return has_prefix(name, pooler) || has_prefix(name, "cls.seq_relationship.");
}

void hfw_note_ignored(HfWeights *w, const char *name, const char *why) {
  list_add(&w->ignored, name);
  buf_printf(&w->ignored, " (%s)", why);
}

/* A buffer left out (never loaded): listed as ignored, and its name kept. */
static int note_buffer(HfWeights *w, const char *name, Err *err) {
  if (w->nbuf == w->capbuf) {
    size_t cap = w->capbuf ? 2 * w->capbuf : 16;
    char **b = realloc(w->buffers, cap * sizeof *b);
    if (!b) return err_setk(err, ERR_NOMEM, "out of memory");
    w->buffers = b;
    w->capbuf = cap;
  }
  if (!(w->buffers[w->nbuf] = strdup(name))) return err_setk(err, ERR_NOMEM, "out of memory");
  w->nbuf++;
  hfw_note_ignored(w, name, "a buffer");
  return 0;
}

int hfw_add_raw(HfWeights *w, const char *name, int ndim, const int64_t *shape, float *data, Err *err) {
  if (ndim < 0 || ndim > ST_MAX_DIMS) { free(data); return err_setk(err, ERR_BAD_INPUT, "tensor \"%s\": %d dimensions", name, ndim); }
  if (w->n == w->cap) {
    int cap = w->cap ? 2 * w->cap : 64;
    HfTensor *t = realloc(w->t, (size_t)cap * sizeof *t);
    if (!t) { free(data); return err_setk(err, ERR_NOMEM, "out of memory"); }
    w->t = t;
    w->cap = cap;
  }
  HfTensor *t = &w->t[w->n];
  memset(t, 0, sizeof *t);
  if (!(t->name = strdup(name))) { free(data); return err_setk(err, ERR_NOMEM, "out of memory"); }
  t->ndim = ndim;
  t->numel = 1;
  for (int d = 0; d < ndim; d++) { t->shape[d] = shape[d]; t->numel *= shape[d]; }
  t->data = data;
  w->n++;
  w->sorted = 0;
  return 0;
}

/* Buffers transformers registers (not parameters): never loaded, whatever their dtype. */
int hfw_is_buffer_name(const char *name) { return has_suffix(name, ".position_ids") || has_suffix(name, ".token_type_ids"); }

static int torch_tensor(void *w, const char *name, int ndim, const int64_t *shape, float *data, Err *err) {
  return hfw_add_raw(w, name, ndim, shape, data, err);
}

/* Integer storages hold buffers; nothing else may use one. */
static int torch_int64_tensor(void *w, const char *name, Err *err) {
  if (!hfw_is_buffer_name(name)) return err_setk(err, ERR_BAD_INPUT, "tensor \"%.100s\": int64, not a weight", name);
  return note_buffer(w, name, err);
}

TpSink hfw_torch_sink(HfWeights *w) { return (TpSink){torch_tensor, torch_int64_tensor, w}; }

static int find(const HfWeights *w, const char *name);

/* ---- safetensors layouts ---- */

/* Adds every tensor of the safetensors file at path. index (may be NULL): the
** weight_map of a sharded folder, and shard the file's name in it: each tensor
** must be mapped to this very shard. dtypes: F32/F16/BF16/F64 seen, as a bit set;
** *seen counts the file's tensors. */
static int read_st_file(HfWeights *w, const char *path, json_t *index, const char *shard, unsigned *dtypes, size_t *seen, Err *err) {
  StFile *f = st_open_stream(path, err);
  if (!f) return err_kind_default(err, ERR_BAD_INPUT);
  int rc = -1;
  for (int i = 0; i < st_count(f); i++) {
    const StTensor *t = st_tensor(f, i);
    if (index) {
      json_t *where = json_object_get(index, t->name);
      if (!json_is_string(where)) {
        err_setk(err, ERR_BAD_INPUT, "%s: tensor \"%s\" is not in the index's weight_map", path, t->name);
        goto done;
      }
      if (strcmp(json_string_value(where), shard)) {
        err_setk(err, ERR_BAD_INPUT, "%s: tensor \"%s\" is in this shard but the index maps it to %s", path, t->name,
                 json_string_value(where));
        goto done;
      }
    }
    (*seen)++;
    if (hfw_is_buffer_name(t->name)) {
      if (note_buffer(w, t->name, err)) goto done;
      continue;
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64) {
      err_setk(err, ERR_BAD_INPUT, "%s: tensor \"%s\": dtype %s, expected F32, F16, BF16 or F64", path, t->name, st_dtype_name(t->dtype));
      goto done;
    }
    *dtypes |= 1u << t->dtype;
    float *data = malloc((size_t)(t->numel ? t->numel : 1) * sizeof *data);
    if (!data) { err_setk(err, ERR_NOMEM, "out of memory for tensor \"%s\"", t->name); goto done; }
    if (st_read_f32_range(f, t, 0, t->numel, data, err)) { free(data); err_prefix(err, path); goto done; }
    if (hfw_add_raw(w, t->name, t->ndim, t->shape, data, err)) goto done;
  }
  rc = 0;
done:
  st_close(f);
  return rc;
}

static void dtype_text(unsigned dtypes, char *buf, size_t size) {
  size_t at = 0;
  buf[0] = 0;
  for (int d = 0; d < ST_NDTYPES && at < size; d++)
    if (dtypes & (1u << d)) at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? "+" : "", st_dtype_name((StDtype)d));
}

/* A shard's file name: a plain name inside the folder (no path, not . or ..), so that
** an index cannot name a file elsewhere; the file itself may be a symlink, followed as
** every file of the folder is (check_target). */
static int check_shard_name(const char *index_path, const char *name, Err *err) {
  if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/') || strchr(name, '\\'))
    return err_setk(err, ERR_BAD_INPUT, "%s: shard \"%s\" is not a file name inside the folder", index_path, name);
  return 0;
}

/* path, found by lstat, can be opened: every weights file is followed when it is a
** symlink, as config.json and the tokenizer's files are (a Hugging Face cache snapshot
** links each file to ../../blobs/<hash>); what it reaches is read only if it is a
** regular file of a bounded size (files_open_regular). A link whose target is missing
** (a snapshot whose blob was never downloaded) is said to be so. */
static int check_target(const char *path, Err *err) {
  struct stat st;
  if (stat(path, &st) == 0) return 0;
  int e = errno;
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
    return err_setk(err, ERR_NOT_FOUND, "%s: a symlink whose target is missing (%s)", path, strerror(e));
  return err_setk(err, ERR_NOT_FOUND, "%s: missing (%s)", path, strerror(e));
}

/* One pickle shard of a sharded .bin: its tensors moved into w, each checked against
** the index as read_st_file checks a safetensors shard's. */
static int read_bin_shard(HfWeights *w, const char *path, json_t *index, const char *shard, size_t *seen, Err *err) {
  HfWeights *part = hfw_new();
  if (!part) return err_setk(err, ERR_NOMEM, "out of memory");
  TpSink sink = hfw_torch_sink(part);
  int rc = tp_read_state_dict(path, &sink, err);
  for (int i = 0; rc == 0 && i < part->n; i++) {
    HfTensor *t = &part->t[i];
    json_t *where = json_object_get(index, t->name);
    if (!json_is_string(where)) rc = err_setk(err, ERR_BAD_INPUT, "%s: tensor \"%s\" is not in the index's weight_map", path, t->name);
    else if (strcmp(json_string_value(where), shard))
      rc = err_setk(err, ERR_BAD_INPUT, "%s: tensor \"%s\" is in this shard but the index maps it to %s", path, t->name,
                    json_string_value(where));
    else {
      (*seen)++;
      rc = hfw_add_raw(w, t->name, t->ndim, t->shape, t->data, err);
      t->data = NULL;   /* w owns it now, whatever hfw_add_raw said */
    }
  }
  /* Buffers the pickle reader left out (listed there) are listed here. */
  for (size_t i = 0; rc == 0 && i < part->nbuf; i++) rc = note_buffer(w, part->buffers[i], err);
  hfw_free(part);
  return rc;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }
static int cmp_tensor(const void *a, const void *b) { return strcmp(((const HfTensor *)a)->name, ((const HfTensor *)b)->name); }

/* Sorts w's tensors by name, once: find() then searches by halves. */
static void sort_tensors(HfWeights *w) {
  if (!w->sorted) qsort(w->t, (size_t)w->n, sizeof *w->t, cmp_tensor);
  w->sorted = 1;
}

/* name is one of the buffers left out; w->buffers sorted. */
static int is_buffer_left_out(const HfWeights *w, const char *name) {
  return hfw_is_buffer_name(name) && w->nbuf && bsearch(&name, w->buffers, w->nbuf, sizeof *w->buffers, cmp_cstr);
}

/* A sharded folder: index_path's weight_map names each tensor's shard (bin: pickle
** shards, else safetensors). */
static int read_sharded(HfWeights *w, const char *dir, const char *index_path, int bin, Err *err) {
  size_t n;
  char *text = files_read_all(index_path, HFW_MAX_INDEX, &n, err);
  if (!text) return -1;
  json_error_t je;
  json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
  free(text);
  int rc = -1;
  const char **shards = NULL;
  char *path = NULL;
  if (!root) { err_setk(err, ERR_BAD_INPUT, "%s: malformed JSON: %s", index_path, json_error_message(&je)); goto done; }
  json_t *map = json_object_get(root, "weight_map");
  if (!json_is_object(map) || !json_object_size(map)) {
    err_setk(err, ERR_BAD_INPUT, "%s: no weight_map object naming the shards", index_path);
    goto done;
  }
  /* The distinct shard names, each checked before any file is opened: sorted, then
  ** one of each (a scan per entry made an index of many names take minutes). */
  size_t ns = 0;
  if (!(shards = calloc(json_object_size(map), sizeof *shards))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  const char *key;
  json_t *v;
  json_object_foreach(map, key, v) {
    if (!json_is_string(v)) { err_setk(err, ERR_BAD_INPUT, "%s: weight_map \"%s\" is not a file name", index_path, key); goto done; }
    const char *s = json_string_value(v);
    if (check_shard_name(index_path, s, err)) goto done;
    shards[ns++] = s;
  }
  qsort(shards, ns, sizeof *shards, cmp_cstr);
  size_t distinct = 0;
  for (size_t k = 0; k < ns; k++)
    if (k == 0 || strcmp(shards[k - 1], shards[k])) shards[distinct++] = shards[k];
  ns = distinct;
  if (ns > HFW_MAX_SHARDS) {
    err_setk(err, ERR_BAD_INPUT, "%s: %zu shards, more than the %d a model's index names here", index_path, ns, HFW_MAX_SHARDS);
    goto done;
  }
  unsigned dtypes = 0;
  size_t seen = 0;
  for (size_t k = 0; k < ns; k++) {
    free(path);
    if (!(path = files_join(dir, shards[k]))) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
    if (check_target(path, err) ||
        (bin ? read_bin_shard(w, path, map, shards[k], &seen, err) : read_st_file(w, path, map, shards[k], &dtypes, &seen, err)))
      goto done;
  }
  /* Each tensor read was mapped to its own shard (so none is in two), and a file's
  ** names are unique: every mapped one must have been read (or be a buffer left out).
  ** Both lists sorted, each name is found by halves (a scan per name made an index of
  ** 80000 tensors take half a minute). */
  sort_tensors(w);
  if (w->nbuf) qsort(w->buffers, w->nbuf, sizeof *w->buffers, cmp_cstr);
  json_object_foreach(map, key, v) {
    if (find(w, key) < 0 && !is_buffer_left_out(w, key)) {
      err_setk(err, ERR_BAD_INPUT, "%s: tensor \"%s\" is not in its shard %s", index_path, key, json_string_value(v));
      goto done;
    }
  }
  char dt[64];
  dtype_text(dtypes, dt, sizeof dt);
  snprintf(w->source, sizeof w->source, "%zu shards of %s%s%s%s", ns, bin ? "pytorch_model.bin.index.json" : "model.safetensors.index.json",
           bin ? "" : " (", bin ? "" : dt, bin ? "" : ")");
  rc = 0;
done:
  free(path);
  free(shards);
  json_decref(root);
  return rc;
}

/* ---- the numbers ---- */

static void shape_text(char *buf, size_t size, int ndim, const int64_t *shape) {
  size_t at = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && at < size; d++) at += (size_t)snprintf(buf + at, size - at, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (at < size) snprintf(buf + at, size - at, "]");
}

/* Every number of every tensor read is finite. One NaN or infinity in a weight makes
** the model's every score NaN (fill-mask then has nothing to answer), so such a file
** is refused here, once for every layout, naming the tensor as the file has it and
** its first such element (flat index, and by dimension). Scanned in blocks with no
** early exit inside, which vectorises; the element is looked for only in a bad block. */
static int check_finite(const HfWeights *w, Err *err) {
  enum { BLOCK = 4096 };
  for (int i = 0; i < w->n; i++) {
    const HfTensor *t = &w->t[i];
    for (int64_t b = 0; b < t->numel; b += BLOCK) {
      int64_t e = t->numel - b < BLOCK ? t->numel : b + BLOCK;
      int bad = 0;
      for (int64_t j = b; j < e; j++) bad |= !isfinite(t->data[j]);
      if (!bad) continue;
      int64_t j = b;
      while (isfinite(t->data[j])) j++;
      char at[160] = "";
      if (t->ndim > 1) {
        int64_t idx[ST_MAX_DIMS], rest = j;
        for (int d = t->ndim - 1; d >= 0; d--) { idx[d] = t->shape[d] ? rest % t->shape[d] : 0; rest = t->shape[d] ? rest / t->shape[d] : 0; }
        shape_text(at, sizeof at, t->ndim, idx);
      }
      float v = t->data[j];
      return err_setk(err, ERR_BAD_INPUT, "tensor \"%s\": element %lld%s%s is %s (a weight must be a finite number)", t->name,
                      (long long)j, *at ? " " : "", at, isnan(v) ? "NaN" : v > 0 ? "+Inf" : "-Inf");
    }
  }
  return 0;
}

/* ---- the name rules ---- */

static int rename_tensor(HfTensor *t, const char *prefix, const char *old_suffix, const char *new_suffix, Err *err) {
  size_t n = strlen(t->name) - strlen(old_suffix);
  size_t size = strlen(prefix) + n + strlen(new_suffix) + 1;
  char *s = malloc(size);
  if (!s) return err_setk(err, ERR_NOMEM, "out of memory");
  snprintf(s, size, "%s%.*s%s", prefix, (int)n, t->name, new_suffix);
  free(t->name);
  t->name = s;
  return 0;
}

static void drop(HfWeights *w, int i) {
  free(w->t[i].name);
  free(w->t[i].data);
  w->t[i] = w->t[--w->n];
  w->sorted = 0;   /* the last one moved into i */
}

static int find(const HfWeights *w, const char *name) {
  if (w->sorted) {
    HfTensor key = {.name = (char *)name};
    const HfTensor *t = bsearch(&key, w->t, (size_t)w->n, sizeof *w->t, cmp_tensor);
    return t ? (int)(t - w->t) : -1;
  }
  for (int i = 0; i < w->n; i++)
    if (!strcmp(w->t[i].name, name)) return i;
  return -1;
}

static int apply_rules(HfWeights *w, const ModelConfig *c, Err *err) {
  int rob = c->model_type == MODEL_ROBERTA;
  const char *pre = rob ? "roberta." : "bert.";
  w->sorted = 0;   /* the renames below change the order */
  /* Legacy LayerNorm names (TF-era BERT): gamma/beta. */
  for (int i = 0; i < w->n; i++) {
    if (has_suffix(w->t[i].name, ".gamma") && rename_tensor(&w->t[i], "", "gamma", "weight", err)) return -1;
    if (has_suffix(w->t[i].name, ".beta") && rename_tensor(&w->t[i], "", "beta", "bias", err)) return -1;
  }
  /* A base model saved on its own has no prefix: transformers matches it to the prefixed model. */
  int any_prefixed = 0;
  for (int i = 0; i < w->n; i++) any_prefixed |= has_prefix(w->t[i].name, pre);
  if (!any_prefixed)
    for (int i = 0; i < w->n; i++)
      if (rename_tensor(&w->t[i], pre, "", "", err)) return -1;
  /* Tied decoder weight: the word embeddings win (HF ties after loading). */
  const char *dec_w = rob ? "lm_head.decoder.weight" : "cls.predictions.decoder.weight";
  int i = find(w, dec_w);
  if (i >= 0) {
    hfw_note_ignored(w, dec_w, rob ? "tied to roberta.embeddings.word_embeddings.weight" : "tied to bert.embeddings.word_embeddings.weight");
    drop(w, i);
  }
  /* The decoder's bias is the head's bias (one parameter, two names). */
  const char *bias = rob ? "lm_head.bias" : "cls.predictions.bias";
  const char *dec_b = rob ? "lm_head.decoder.bias" : "cls.predictions.decoder.bias";
  int jb = find(w, dec_b), ib = find(w, bias);
  if (jb >= 0 && ib < 0) {
    if (rename_tensor(&w->t[jb], "", dec_b, bias, err)) return -1;
  } else if (jb >= 0) {
    const HfTensor *a = &w->t[ib], *b = &w->t[jb];
    if (a->numel != b->numel || memcmp(a->data, b->data, (size_t)a->numel * sizeof(float)))
      return err_setk(err, ERR_BAD_INPUT, "tensor \"%s\" differs from \"%s\" (one parameter in transformers)", dec_b, bias);
    hfw_note_ignored(w, dec_b, "the same as the head's bias");
    drop(w, jb);
  }
  /* One tensor per name once the rules have run. */
  sort_tensors(w);
  for (int k = 1; k < w->n; k++)
    if (!strcmp(w->t[k - 1].name, w->t[k].name))
      return err_setk(err, ERR_BAD_INPUT, "tensor \"%s\" is given twice (two files, or two names for it)", w->t[k].name);
  return 0;
}

static int same_shape(const HfTensor *t, const ModelTensor *mt) {
  if (t->ndim != mt->ndim) return 0;
  for (int d = 0; d < mt->ndim; d++)
    if (t->shape[d] != mt->shape[d]) return 0;
  return 1;
}


/* Checks w against the model of c (the MLM's table for a masked LM or a base model). */
static int check_against(HfWeights *w, ModelConfig *c, Err *err) {
  ModelConfig mc = *c;
  if (mc.task == MODEL_TASK_ENCODER) mc.task = MODEL_TASK_MLM;   /* the table: the encoder's tensors and the head's */
  Model *m = model_new(&mc, err);
  if (!m) return -1;
  const char *pre = c->model_type == MODEL_ROBERTA ? "roberta." : "bert.";
  int rc = -1, n = model_tensor_count(m), heads = 0, head_present = 0;
  char *is_model = calloc((size_t)w->n + 1, 1);
  Buf missing = {0};
  int n_missing = 0;
  if (!is_model) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    int head = c->task != MODEL_TASK_SEQ_CLS && !has_prefix(mt->name, pre);
    heads += head;
    int j = find(w, mt->name);
    if (j >= 0) {
      is_model[j] = 1;
      head_present |= head;
      if (!same_shape(&w->t[j], mt)) {
        char want[64], got[64];
        int64_t s[2] = {mt->shape[0], mt->shape[1]};
        shape_text(want, sizeof want, mt->ndim, s);
        shape_text(got, sizeof got, w->t[j].ndim, w->t[j].shape);
        err_setk(err, ERR_BAD_INPUT, "tensor \"%s\": shape %s, the config needs %s", mt->name, got, want);
        goto done;
      }
    }
  }
  /* No MLM head at all: a base model, whatever architectures said (BertForPreTraining's NSP-only files too). */
  if (c->task == MODEL_TASK_MLM && heads && !head_present) c->task = MODEL_TASK_ENCODER;
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    int head = c->task != MODEL_TASK_SEQ_CLS && !has_prefix(mt->name, pre);
    if ((head && c->task == MODEL_TASK_ENCODER) || find(w, mt->name) >= 0) continue;
    if (n_missing++ < 6) list_add(&missing, mt->name);
  }
  if (n_missing) {
    err_setk(err, ERR_BAD_INPUT, "%d tensor%s the %s needs %s missing: %s%s", n_missing, n_missing > 1 ? "s" : "",
             config_architecture(c), n_missing > 1 ? "are" : "is", missing.p ? missing.p : "", n_missing > 6 ? ", ..." : "");
    goto done;
  }
  for (int j = 0; j < w->n; j++) {
    const char *name = w->t[j].name;
    int kept = is_model[j] ? c->task == MODEL_TASK_ENCODER && !has_prefix(name, pre) : hfw_is_unused_name(c, name);
    if (!is_model[j] && !kept) {
      err_setk(err, ERR_BAD_INPUT, "tensor \"%s\" is not part of a %s model", name, config_architecture(c));
      goto done;
    }
    if (kept) list_add(&w->unused, name);
  }
  if (w->unused.oom || w->ignored.oom || missing.oom) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  rc = 0;
done:
  buf_free(&missing);
  free(is_model);
  model_free(m);
  return rc;
}

HfWeights *hfw_read_dir(const char *dir, ModelConfig *c, Err *err) {
  HfWeights *w = hfw_new();
  char *st = files_join(dir, "model.safetensors"), *idx = files_join(dir, "model.safetensors.index.json"),
       *bin = files_join(dir, "pytorch_model.bin"), *binx = files_join(dir, "pytorch_model.bin.index.json");
  struct stat sb;
  int rc = -1;
  if (!w || !st || !idx || !bin || !binx) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  /* transformers' order of preference: safetensors (whole, then sharded), then pickle. */
  if (lstat(st, &sb) == 0) {
    unsigned dtypes = 0;
    size_t seen = 0;
    char dt[64];
    if (check_target(st, err) || read_st_file(w, st, NULL, NULL, &dtypes, &seen, err)) goto done;
    dtype_text(dtypes, dt, sizeof dt);
    snprintf(w->source, sizeof w->source, "model.safetensors (%s)", dt);
  } else if (lstat(idx, &sb) == 0) {
    if (check_target(idx, err) || read_sharded(w, dir, idx, 0, err)) goto done;
  } else if (lstat(bin, &sb) == 0) {
    TpSink sink = hfw_torch_sink(w);
    if (check_target(bin, err) || tp_read_state_dict(bin, &sink, err)) goto done;
    snprintf(w->source, sizeof w->source, "pytorch_model.bin");
  } else if (lstat(binx, &sb) == 0) {
    if (check_target(binx, err) || read_sharded(w, dir, binx, 1, err)) goto done;
  } else {
    err_setk(err, ERR_NOT_FOUND, "%s: missing (and no model.safetensors.index.json or pytorch_model.bin: the folder has no weights)", st);
    goto done;
  }
  if (check_finite(w, err) || apply_rules(w, c, err) || check_against(w, c, err)) goto done;
  rc = 0;
done:
  free(st); free(idx); free(bin); free(binx);
  if (rc) { hfw_free(w); return NULL; }
  return w;
}

int hfw_serialize(const HfWeights *w, unsigned char **out, size_t *len, Err *err) {
  StWriteTensor *ts = calloc((size_t)w->n + 1, sizeof *ts);
  if (!ts) return err_setk(err, ERR_NOMEM, "out of memory");
  for (int i = 0; i < w->n; i++) {
    ts[i].name = w->t[i].name;
    ts[i].dtype = ST_F32;
    ts[i].ndim = w->t[i].ndim;
    memcpy(ts[i].shape, w->t[i].shape, sizeof ts[i].shape);
    ts[i].data = w->t[i].data;
  }
  int rc = st_serialize(ts, w->n, NULL, 0, out, len, err);
  free(ts);
  return rc;
}
