/* Model folders and optimizer state as safetensors. Loading validates the whole
** file against the model's tensor table before it copies a single number, so a
** refused file leaves the model as it was. */
#include "engine/core/bf16.h"
#include "engine/io/checkpoint.h"
#include "engine/io/hf_weights.h"
#include "engine/core/files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#define STATE_KIND "maskd-optimizer-state"

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static int has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* ---- weights ---- */

static int is_float_dtype(StDtype d) { return d == ST_F32 || d == ST_BF16 || d == ST_F16 || d == ST_F64; }

/* The model's tensors as writer entries: views of the model's own storage where it
** holds the dtype written (float tensors for F32, the bf16 copy's matrices for
** BF16), else no data: weight_fill converts those chunk by chunk. */
static int weight_entries(Model *m, int bf16, StWriteTensor **ts_out, Err *err) {
  int n = model_tensor_count(m);
  StWriteTensor *ts = calloc((size_t)n + 1, sizeof *ts);
  if (!ts) return err_setk(err, ERR_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    const ModelTensor *t = model_tensor(m, i);
    float *f32;
    uint16_t *half;
    model_tensor_storage(m, i, &f32, &half);   /* a bf16-weights model's matrices live only in its bf16 copy */
    ts[i].name = t->name;
    ts[i].dtype = bf16 ? ST_BF16 : ST_F32;
    ts[i].ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) ts[i].shape[d] = t->shape[d];
    ts[i].data = bf16 ? (const void *)half : (const void *)f32;
  }
  *ts_out = ts;
  return 0;
}

static int memory_write(void *ctx, const void *data, size_t n, Err *err) {
  CkptMemorySink *m = ctx;
  if (n > m->cap - m->len) return err_setk(err, ERR_INTERNAL, "%s", m->overflow);
  memcpy(m->p + m->len, data, n);
  m->len += n;
  return 0;
}

CkptSink ckpt_memory_sink(CkptMemorySink *m) { return (CkptSink){memory_write, m}; }

int ckpt_weights_bytes(Model *m, int bf16, unsigned char **out, size_t *len, Err *err) {
  *out = NULL;
  *len = 0;
  size_t size = ckpt_weights_size(m, bf16);
  if (!size) return err_setk(err, ERR_NOMEM, "weights: out of memory for the file's layout");
  CkptMemorySink o = {malloc(size), 0, size, "weights: more bytes than the file's size"};
  if (!o.p) return err_setk(err, ERR_NOMEM, "out of memory for %zu bytes of weights", size);
  /* The stream's bytes, so the two can never differ (and BF16 needs no second copy). */
  CkptSink sink = ckpt_memory_sink(&o);
  if (ckpt_weights_stream(m, bf16, &sink, err)) { free(o.p); return -1; }
  if (o.len != size) {   /* a short stream would leave garbage at the end */
    free(o.p);
    return err_setk(err, ERR_INTERNAL, "weights: %zu bytes streamed, the file's size is %zu", o.len, size);
  }
  *out = o.p;
  *len = size;
  return 0;
}

size_t ckpt_weights_size(Model *m, int bf16) {
  StWriteTensor *ts;
  size_t len = 0;
  if (weight_entries(m, bf16, &ts, NULL)) return 0;
  /* save_pretrained writes only {"format": "pt"}; transformers requires it. */
  if (st_serialized_size(ts, model_tensor_count(m), NULL, 0, &len, NULL)) len = 0;
  free(ts);
  return len;
}

/* Fills a weight tensor whose storage is not the dtype written, through a bounded
** scratch: float parameters rounded to BF16, or a bf16-weights model's matrices
** widened to F32 (exactly). */
typedef struct {
  Model *m;
  const StWriteTensor *base;   /* weight_entries' table: entry i is model tensor i */
  float *scratch;              /* CKPT_STREAM_FLOATS floats (or as many bf16s) */
} WeightFill;

static int weight_fill(void *ctx, const StWriteTensor *t, StWriteFn write, void *wctx, Err *err) {
  WeightFill *f = ctx;
  int i = (int)(t - f->base);
  const ModelTensor *mt = model_tensor(f->m, i);
  float *f32;
  uint16_t *half;
  model_tensor_storage(f->m, i, &f32, &half);
  for (size_t off = 0; off < mt->numel; off += CKPT_STREAM_FLOATS) {
    size_t cnt = mt->numel - off < CKPT_STREAM_FLOATS ? mt->numel - off : CKPT_STREAM_FLOATS;
    int rc;
    if (t->dtype == ST_BF16) {
      uint16_t *h = (uint16_t *)f->scratch;
      for (size_t j = 0; j < cnt; j++) h[j] = bf16_from_f32(f32[off + j]);
      rc = write(wctx, h, cnt * sizeof *h, err);
    } else {
      for (size_t j = 0; j < cnt; j++) f->scratch[j] = bf16_to_f32(half[off + j]);
      rc = write(wctx, f->scratch, cnt * sizeof *f->scratch, err);
    }
    if (rc) return -1;
  }
  return 0;
}

int ckpt_weights_stream(Model *m, int bf16, const CkptSink *sink, Err *err) {
  StWriteTensor *ts;
  if (weight_entries(m, bf16, &ts, err)) return -1;
  WeightFill f = {m, ts, malloc((size_t)CKPT_STREAM_FLOATS * sizeof(float))};
  if (!f.scratch) {
    free(ts);
    return err_setk(err, ERR_NOMEM, "out of memory");
  }
  int rc = st_serialize_stream(ts, model_tensor_count(m), NULL, 0, weight_fill, &f, sink->write, sink->ctx, err);
  free(f.scratch);
  free(ts);
  return rc;
}

/* Fills tensor i of the copy from tensor i of the source file, a scratch at a time. */
typedef struct {
  const StFile *f;
  const StWriteTensor *base;
  float *scratch;              /* CKPT_STREAM_FLOATS floats */
  uint16_t *half;              /* CKPT_STREAM_FLOATS bf16s (a BF16 copy only) */
} FileFill;

static int file_fill(void *ctx, const StWriteTensor *t, StWriteFn write, void *wctx, Err *err) {
  FileFill *c = ctx;
  const StTensor *src = st_tensor(c->f, (int)(t - c->base));
  for (int64_t off = 0; off < src->numel; off += (int64_t)CKPT_STREAM_FLOATS) {
    int64_t cnt = src->numel - off < (int64_t)CKPT_STREAM_FLOATS ? src->numel - off : (int64_t)CKPT_STREAM_FLOATS;
    int rc;
    if (t->dtype != ST_BF16) {
      rc = st_read_f32_range(c->f, src, off, cnt, c->scratch, err) || write(wctx, c->scratch, (size_t)cnt * 4, err);
    } else if (src->dtype == ST_BF16) {
      rc = st_read_bf16_range(c->f, src, off, cnt, c->half, err) || write(wctx, c->half, (size_t)cnt * 2, err);
    } else {
      /* Through float and torch's rounding, not st_read_bf16's (the kernels' conversion,
      ** which flushes subnormals to zero): the file is read by PyTorch. */
      rc = st_read_f32_range(c->f, src, off, cnt, c->scratch, err);
      for (int64_t j = 0; !rc && j < cnt; j++) c->half[j] = bf16_from_f32_torch(c->scratch[j]);
      rc = rc || write(wctx, c->half, (size_t)cnt * 2, err);
    }
    if (rc) return -1;
  }
  return 0;
}

int ckpt_file_stream(const StFile *f, int bf16, const CkptSink *sink, Err *err) {
  int n = st_count(f);
  StWriteTensor *ts = calloc((size_t)n + 1, sizeof *ts);
  FileFill c = {f, ts, malloc((size_t)CKPT_STREAM_FLOATS * sizeof(float)),
                bf16 ? malloc((size_t)CKPT_STREAM_FLOATS * sizeof(uint16_t)) : NULL};
  int rc = -1;
  if (!ts || !c.scratch || (bf16 && !c.half)) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  for (int i = 0; i < n; i++) {
    const StTensor *t = st_tensor(f, i);
    if (!is_float_dtype(t->dtype)) {
      err_set(err, "tensor \"%s\": dtype %s is not a float type", t->name, st_dtype_name(t->dtype));
      goto done;
    }
    ts[i].name = t->name;
    ts[i].dtype = bf16 ? ST_BF16 : ST_F32;
    ts[i].ndim = t->ndim;
    memcpy(ts[i].shape, t->shape, sizeof ts[i].shape);
  }
  rc = st_serialize_stream(ts, n, NULL, 0, file_fill, &c, sink->write, sink->ctx, err);
done:
  free(c.scratch);
  free(c.half);
  free(ts);
  return rc;
}

static int atomic_write(void *ctx, const void *data, size_t n, Err *err) { return files_atomic_write(ctx, data, n, err); }

CkptSink ckpt_atomic_sink(FilesAtomic *f) { return (CkptSink){atomic_write, f}; }

int ckpt_save_model(Model *m, const char *dir, int bf16, Err *err) {
  if (files_make_dirs(dir, err)) return -1;
  char *cfg = files_join(dir, CKPT_CONFIG_FILE), *w = files_join(dir, CKPT_WEIGHTS_FILE);
  FilesAtomic f = {.fd = -1};
  int rc = -1;
  if (!cfg || !w) { err_set(err, "out of memory"); goto done; }
  CkptSink sink = ckpt_atomic_sink(&f);
  if (files_atomic_open(&f, w, err) || ckpt_weights_stream(m, bf16, &sink, err) || files_atomic_commit(&f, err)) goto done;
  if (config_save_dtype(model_config(m), bf16 ? "bfloat16" : "float32", cfg, err)) goto done;
  rc = 0;
done:
  files_atomic_abort(&f);
  free(cfg);
  free(w);
  return rc;
}

/* Elements compared at a time by same_values (two float buffers of this many). */
#define SAME_VALUES_PIECE ((int64_t)1 << 16)

/* Equal values (bitwise after conversion, so -0 != 0 and NaN == same NaN), read a
** piece at a time so a streamed file needs no copy of either; -1 when a read fails. */
static int same_values(const StFile *f, const StTensor *a, const StTensor *b, Err *err) {
  if (a->numel != b->numel) return 0;
  float *x = malloc(2 * SAME_VALUES_PIECE * sizeof *x);
  if (!x) return err_setk(err, ERR_NOMEM, "out of memory");
  float *y = x + SAME_VALUES_PIECE;
  int same = 1;
  for (int64_t at = 0; same == 1 && at < a->numel; at += SAME_VALUES_PIECE) {
    int64_t k = a->numel - at < SAME_VALUES_PIECE ? a->numel - at : SAME_VALUES_PIECE;
    if (st_read_f32_range(f, a, at, k, x, err) || st_read_f32_range(f, b, at, k, y, err)) same = -1;
    else if (memcmp(x, y, (size_t)k * sizeof *x) != 0) same = 0;
  }
  free(x);
  return same;
}

static int same_shape(const StTensor *t, const ModelTensor *mt) {
  if (t->ndim != mt->ndim) return 0;
  for (int d = 0; d < mt->ndim; d++)
    if (t->shape[d] != mt->shape[d]) return 0;
  return 1;
}

static void shape_str(char *buf, size_t size, int ndim, const int64_t *shape) {
  size_t at = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < ndim && at < size; d++) at += (size_t)snprintf(buf + at, size - at, d ? ", %lld" : "%lld", (long long)shape[d]);
  if (at < size) snprintf(buf + at, size - at, "]");
}

/* The file's tensor for a model name; old BERT checkpoints say gamma/beta for LayerNorm. */
static const StTensor *find_weight(const StFile *f, const char *name) {
  const StTensor *t = st_find(f, name);
  if (t) return t;
  char alt[160];
  size_t n = strlen(name);
  if (has_suffix(name, "LayerNorm.weight") && n + 1 < sizeof alt) {
    snprintf(alt, sizeof alt, "%.*sgamma", (int)(n - strlen("weight")), name);
    return st_find(f, alt);
  }
  if (has_suffix(name, "LayerNorm.bias") && n + 1 < sizeof alt) {
    snprintf(alt, sizeof alt, "%.*sbeta", (int)(n - strlen("bias")), name);
    return st_find(f, alt);
  }
  return NULL;
}

/* A classifier's head tensors: what a masked LM's file does not have. */
static int is_cls_head(const ModelConfig *c, const char *name) {
  return c->task == MODEL_TASK_SEQ_CLS && (has_prefix(name, "classifier.") || has_prefix(name, "bert.pooler."));
}

/* ckpt_load_weights (encoder 0) and ckpt_load_encoder (encoder 1, *head_loaded counted). */
static int load_weights(Model *m, const StFile *f, int encoder, int *head_loaded, Err *err) {
  const ModelConfig *c = model_config(m);
  int rob = c->model_type == MODEL_ROBERTA, n = model_tensor_count(m), nf = st_count(f);
  const char *word = rob ? "roberta.embeddings.word_embeddings.weight" : "bert.embeddings.word_embeddings.weight";
  const char *bias = rob ? "lm_head.bias" : "cls.predictions.bias";
  const char *dec_w = rob ? "lm_head.decoder.weight" : "cls.predictions.decoder.weight";
  const char *dec_b = rob ? "lm_head.decoder.bias" : "cls.predictions.decoder.bias";
  /* used[j]: file tensor j is accounted for; model_of[j]: the model tensor it fills, or -1. */
  char *used = calloc((size_t)nf + 1, 1);
  int *model_of = malloc(((size_t)nf + 1) * sizeof *model_of);
  if (!used || !model_of) { free(used); free(model_of); return err_setk(err, ERR_NOMEM, "out of memory"); }
  for (int j = 0; j < nf; j++) model_of[j] = -1;
  int rc = -1;
  const StTensor *base = nf ? st_tensor(f, 0) : NULL;
  char want[64], got[64];
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    const StTensor *t = find_weight(f, mt->name);
    int head = encoder && is_cls_head(c, mt->name);
    /* A new head stays as the caller initialised it; one of another shape (other labels) too. */
    if (head && (!t || !same_shape(t, mt))) continue;
    if (!t) { err_set(err, "tensor \"%s\" is missing", mt->name); goto done; }
    if (!is_float_dtype(t->dtype)) {
      err_set(err, "tensor \"%s\": dtype %s, expected F32 (or BF16/F16/F64)", mt->name, st_dtype_name(t->dtype));
      goto done;
    }
    if (!same_shape(t, mt)) {
      int64_t s[2] = {mt->shape[0], mt->shape[1]};
      shape_str(want, sizeof want, mt->ndim, s);
      shape_str(got, sizeof got, t->ndim, t->shape);
      err_set(err, "tensor \"%s\": shape %s, the config needs %s", mt->name, got, want);
      goto done;
    }
    used[t - base] = 1;
    model_of[t - base] = i;
    if (head) (*head_loaded)++;
  }
  /* Tied copies must hold the values they are tied to, as they do in a file
  ** transformers saved without removing them. */
  const StTensor *tw = st_find(f, dec_w), *tb = st_find(f, dec_b);
  if (tw) {
    const StTensor *w = find_weight(f, word);
    int same = is_float_dtype(tw->dtype) && tw->ndim == w->ndim && tw->shape[0] == w->shape[0] && tw->shape[1] == w->shape[1]
                 ? same_values(f, tw, w, err) : 0;
    if (same < 0) goto done;
    if (!same) {
      err_set(err, "tensor \"%s\" differs from \"%s\"; untied decoders are not supported", dec_w, word);
      goto done;
    }
    used[tw - base] = 1;
  }
  if (tb) {
    const StTensor *b = st_find(f, bias);
    int same = b && is_float_dtype(tb->dtype) && tb->ndim == 1 && tb->shape[0] == b->shape[0] ? same_values(f, tb, b, err) : 0;
    if (same < 0) goto done;
    if (!same) {
      err_set(err, "tensor \"%s\" differs from \"%s\"", dec_b, bias);
      goto done;
    }
    used[tb - base] = 1;
  }
  for (int i = 0; i < nf; i++) {
    const char *name = st_tensor(f, i)->name;
    if (used[i] || has_suffix(name, ".position_ids") || has_suffix(name, ".token_type_ids") || hfw_is_unused_name(c, name))
      continue;
    /* Starting a classifier: the file's own head (masked LM or other labels) is not used. */
    if (encoder && (has_prefix(name, "lm_head.") || has_prefix(name, "cls.") || has_prefix(name, "classifier."))) continue;
    err_set(err, "tensor \"%s\" is not part of a %s model", name, config_architecture(c));
    goto done;
  }
  /* In the file's order, so a streamed file is read front to back, once. */
  for (int j = 0; j < nf; j++) {
    int i = model_of[j];
    if (i < 0) continue;
    const ModelTensor *mt = model_tensor(m, i);
    const StTensor *t = st_tensor(f, j);
    float *f32;
    uint16_t *bf16;
    model_tensor_storage(m, i, &f32, &bf16);   /* a model serving from bf16 weights takes its matrices rounded */
    int64_t numel = (int64_t)mt->numel;
    if (f32 ? st_read_f32_range(f, t, 0, numel, f32, err) : st_read_bf16_range(f, t, 0, numel, bf16, err)) goto done;
  }
  rc = 0;
done:
  free(used);
  free(model_of);
  return rc;
}

int ckpt_load_weights(Model *m, const StFile *f, Err *err) { return load_weights(m, f, 0, NULL, err); }

int ckpt_load_encoder(Model *m, const StFile *f, int *head_loaded, Err *err) {
  int n = 0;
  if (model_config(m)->task != MODEL_TASK_SEQ_CLS)
    return err_setk(err, ERR_INVALID, "loading an encoder: the model is not a sequence classifier");
  int rc = load_weights(m, f, 1, &n, err);
  if (head_loaded) *head_loaded = n;
  return rc;
}

int ckpt_load_encoder_source(Model *m, const StSource *src, int *head_loaded, Err *err) {
  StFile *f = st_open_source(src, err);
  if (!f) return -1;
  int rc = ckpt_load_encoder(m, f, head_loaded, err);
  st_close(f);
  return rc;
}

int ckpt_load_weights_file(Model *m, const char *path, Err *err) {
  /* Read, not mapped: the file's pages never join the model's in memory. */
  StFile *f = st_open_stream(path, err);
  if (!f) return -1;
  int rc = ckpt_load_weights(m, f, err);
  st_close(f);
  if (rc) err_prefix(err, path);
  return rc;
}

/* An StSource over bytes in memory (ctx: the bytes). */
static int memory_read(void *ctx, uint64_t offset, void *dst, size_t n, Err *err) {
  (void)err;
  memcpy(dst, (const unsigned char *)ctx + offset, n);
  return 0;
}

int ckpt_load_weights_memory(Model *m, const void *buf, size_t len, Err *err) {
  /* Read in place through a source: no copy of a model-sized buffer. */
  StSource src = {memory_read, (void *)(uintptr_t)buf, len};
  return ckpt_load_weights_source(m, &src, err);
}

int ckpt_load_weights_source(Model *m, const StSource *src, Err *err) {
  StFile *f = st_open_source(src, err);
  if (!f) return -1;
  int rc = ckpt_load_weights(m, f, err);
  st_close(f);
  return rc;
}

Model *ckpt_load_model(const char *dir, Err *err) { return ckpt_load_model_as(dir, MODEL_FP32, err); }

Model *ckpt_load_model_as(const char *dir, ModelPrecision weights, Err *err) {
  char *cfg = files_join(dir, CKPT_CONFIG_FILE), *w = files_join(dir, CKPT_WEIGHTS_FILE);
  Model *m = NULL;
  ModelConfig c;
  if (!cfg || !w) { err_set(err, "out of memory"); goto done; }
  if (config_load(cfg, &c, err)) goto done;
  m = model_new(&c, err);
  if (!m) { err_prefix(err, cfg); goto done; }
  /* Before the load, so the matrices go straight into their bf16 copy. */
  if ((weights == MODEL_BF16 && model_keep_bf16_weights(m, 0, err)) || ckpt_load_weights_file(m, w, err)) {
    model_free(m);
    m = NULL;
  }
done:
  free(cfg);
  free(w);
  return m;
}

/* ---- optimizer state ---- */

/* The optimizer-state file's table: exp_avg / exp_avg_sq of model tensor i at
** entries 2i / 2i + 1 (views of o's moments, or no data when o is NULL), then the
** five state tensors, and the metadata. Lives where the caller put it (meta and
** entries point into it). */
typedef struct {
  StWriteTensor *ts;
  char (*names)[112];
  int k;
  int64_t rng[4];
  char step[32], params[32];
  const char *meta[6];
} StateTable;

static void state_table_free(StateTable *t) {
  free(t->ts);
  free(t->names);
}

static int state_table(Model *m, const AdamW *o, const CkptState *s, StateTable *t, Err *err) {
  memset(t, 0, sizeof *t);
  if (s->n_extra < 0 || s->n_extra > CKPT_EXTRA_WORDS) return err_set(err, "state: n_extra %d outside [0, %d]", s->n_extra, CKPT_EXTRA_WORDS);
  int n = model_tensor_count(m), k = 0;
  t->ts = calloc((size_t)2 * n + 5, sizeof *t->ts);
  t->names = calloc((size_t)2 * n + 1, sizeof *t->names);
  if (!t->ts || !t->names) { state_table_free(t); return err_set(err, "out of memory"); }
  StWriteTensor *ts = t->ts;
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    for (int j = 0; j < 2; j++) {
      snprintf(t->names[k], sizeof t->names[k], "%s%s", j ? "exp_avg_sq." : "exp_avg.", mt->name);
      ts[k].name = t->names[k];
      ts[k].dtype = ST_F32;
      ts[k].ndim = mt->ndim;
      for (int d = 0; d < mt->ndim; d++) ts[k].shape[d] = mt->shape[d];
      ts[k].data = o ? (j ? o->v : o->m) + mt->offset : NULL;
      k++;
    }
  }
  memcpy(t->rng, s->rng.s, sizeof t->rng);   /* the generator's u64 words, bit for bit */
  ts[k++] = (StWriteTensor){"state.step", ST_I64, 1, {1}, &s->step};
  ts[k++] = (StWriteTensor){"state.epoch", ST_I64, 1, {1}, &s->epoch};
  ts[k++] = (StWriteTensor){"state.position", ST_I64, 1, {1}, &s->position};
  ts[k++] = (StWriteTensor){"state.rng", ST_I64, 1, {4}, t->rng};
  /* u64 words are stored as I64 with the same bits (safetensors readers lack U64 often). */
  ts[k++] = (StWriteTensor){"state.extra", ST_I64, 1, {s->n_extra}, s->extra};
  t->k = k;
  snprintf(t->step, sizeof t->step, "%lld", (long long)s->step);
  snprintf(t->params, sizeof t->params, "%zu", model_num_params(m));
  const char *meta[] = {"kind", STATE_KIND, "step", t->step, "num_params", t->params};
  memcpy(t->meta, meta, sizeof meta);
  return 0;
}

int ckpt_state_bytes(Model *m, const AdamW *o, const CkptState *s, unsigned char **out, size_t *len, Err *err) {
  if (o->n != model_num_params(m)) return err_set(err, "optimizer has %zu parameters, the model %zu", o->n, model_num_params(m));
  StateTable t;
  if (state_table(m, o, s, &t, err)) return -1;
  int rc = st_serialize(t.ts, t.k, t.meta, 3, out, len, err);
  state_table_free(&t);
  return rc;
}

size_t ckpt_state_size(Model *m, const CkptState *s) {
  StateTable t;
  size_t len = 0;
  if (state_table(m, NULL, s, &t, NULL)) return 0;
  if (st_serialized_size(t.ts, t.k, t.meta, 3, &len, NULL)) len = 0;
  state_table_free(&t);
  return len;
}

/* Fills a moment tensor from the source, one scratch chunk at a time. */
typedef struct {
  Model *m;
  const CkptMoments *src;
  const StWriteTensor *base;   /* state_table's entries: 2i + which is model tensor i */
  float *buf;                  /* CKPT_STREAM_FLOATS floats */
} MomentFill;

static int moment_fill(void *ctx, const StWriteTensor *t, StWriteFn write, void *wctx, Err *err) {
  MomentFill *f = ctx;
  int k = (int)(t - f->base), which = k % 2;
  const ModelTensor *mt = model_tensor(f->m, k / 2);
  for (size_t off = 0; off < mt->numel; off += CKPT_STREAM_FLOATS) {
    size_t cnt = mt->numel - off < CKPT_STREAM_FLOATS ? mt->numel - off : CKPT_STREAM_FLOATS;
    if (f->src->read(f->src->ctx, which, mt->offset + off, cnt, f->buf, err)) return -1;
    if (write(wctx, f->buf, cnt * sizeof *f->buf, err)) return -1;
  }
  return 0;
}

int ckpt_state_stream(Model *m, const CkptMoments *src, const CkptState *s, const CkptSink *sink, Err *err) {
  StateTable t;
  if (state_table(m, NULL, s, &t, err)) return -1;
  MomentFill f = {m, src, t.ts, malloc((size_t)CKPT_STREAM_FLOATS * sizeof(float))};
  int rc = f.buf ? st_serialize_stream(t.ts, t.k, t.meta, 3, moment_fill, &f, sink->write, sink->ctx, err)
                 : err_set(err, "out of memory");
  free(f.buf);
  state_table_free(&t);
  return rc;
}

static int adamw_read(void *ctx, int which, size_t offset, size_t count, float *dst, Err *err) {
  const AdamW *o = ctx;
  if (which < 0 || which > 1 || offset > o->n || count > o->n - offset)
    return err_set(err, "moments: range [%zu, +%zu) of %d outside the optimizer's %zu", offset, count, which, o->n);
  memcpy(dst, (which ? o->v : o->m) + offset, count * sizeof *dst);
  return 0;
}

CkptMoments ckpt_moments_of(const AdamW *o) {
  /* Only read through the const pointer; ctx is void * for every source. */
  return (CkptMoments){adamw_read, (void *)(uintptr_t)o};
}

int ckpt_save_state(Model *m, const AdamW *o, const CkptState *s, const char *path, Err *err) {
  unsigned char *bytes;
  size_t len;
  if (ckpt_state_bytes(m, o, s, &bytes, &len, err)) return err_prefix(err, path);
  int rc = st_write_bytes(path, bytes, len, err);
  free(bytes);
  return rc;
}

static const StTensor *state_i64(const StFile *f, const char *name, int64_t numel, Err *err) {
  const StTensor *t = st_find(f, name);
  if (!t) { err_set(err, "tensor \"%s\" is missing", name); return NULL; }
  if (t->dtype != ST_I64 || t->ndim != 1 || t->numel != numel) {
    err_set(err, "tensor \"%s\": expected I64 of %lld elements", name, (long long)numel);
    return NULL;
  }
  return t;
}

int ckpt_load_state(Model *m, AdamW *o, CkptState *s, const StFile *f, Err *err) {
  const char *kind = st_metadata(f, "kind");
  if (!kind || strcmp(kind, STATE_KIND) != 0) return err_set(err, "not an optimizer-state file (metadata kind is not \"%s\")", STATE_KIND);
  if (o->n != model_num_params(m)) return err_set(err, "optimizer has %zu parameters, the model %zu", o->n, model_num_params(m));
  int n = model_tensor_count(m);
  char name[112], want[64], got[64];
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    for (int j = 0; j < 2; j++) {
      snprintf(name, sizeof name, "%s%s", j ? "exp_avg_sq." : "exp_avg.", mt->name);
      const StTensor *t = st_find(f, name);
      if (!t) return err_set(err, "tensor \"%s\" is missing", name);
      if (t->dtype != ST_F32) return err_set(err, "tensor \"%s\": dtype %s, expected F32", name, st_dtype_name(t->dtype));
      if (!same_shape(t, mt)) {
        int64_t sh[2] = {mt->shape[0], mt->shape[1]};
        shape_str(want, sizeof want, mt->ndim, sh);
        shape_str(got, sizeof got, t->ndim, t->shape);
        return err_set(err, "tensor \"%s\": shape %s, the model needs %s", name, got, want);
      }
    }
  }
  const StTensor *ts = state_i64(f, "state.step", 1, err), *te = ts ? state_i64(f, "state.epoch", 1, err) : NULL,
                 *tp = te ? state_i64(f, "state.position", 1, err) : NULL, *tr = tp ? state_i64(f, "state.rng", 4, err) : NULL;
  if (!tr) return -1;
  const StTensor *tx = st_find(f, "state.extra");
  if (!tx || tx->dtype != ST_I64 || tx->ndim != 1 || tx->numel > CKPT_EXTRA_WORDS)
    return err_set(err, "tensor \"state.extra\": missing, or not I64 of at most %d elements", CKPT_EXTRA_WORDS);
  /* An extra tensor (say, of another model's layer) means the file is not ours. */
  int expected = 2 * n + 5;
  if (st_count(f) != expected) return err_set(err, "%d tensors, expected %d for this model", st_count(f), expected);
  CkptState ns;
  memset(&ns, 0, sizeof ns);
  int64_t rng[4];
  int64_t extra[CKPT_EXTRA_WORDS];
  if (st_read_i64(ts, &ns.step, 1, err) || st_read_i64(te, &ns.epoch, 1, err) || st_read_i64(tp, &ns.position, 1, err) ||
      st_read_i64(tr, rng, 4, err) || st_read_i64(tx, extra, tx->numel, err))
    return -1;
  memcpy(ns.extra, extra, (size_t)tx->numel * sizeof *extra);
  if (ns.step < 0 || ns.epoch < 0 || ns.position < 0) return err_set(err, "state: negative step, epoch or position");
  if (!(rng[0] | rng[1] | rng[2] | rng[3])) return err_set(err, "tensor \"state.rng\": all zero, not a generator state");
  memcpy(ns.rng.s, rng, sizeof rng);
  ns.n_extra = (int)tx->numel;
  for (int i = 0; i < n; i++) {
    const ModelTensor *mt = model_tensor(m, i);
    snprintf(name, sizeof name, "exp_avg.%s", mt->name);
    st_read_f32(st_find(f, name), o->m + mt->offset, (int64_t)mt->numel, NULL);
    snprintf(name, sizeof name, "exp_avg_sq.%s", mt->name);
    st_read_f32(st_find(f, name), o->v + mt->offset, (int64_t)mt->numel, NULL);
  }
  o->step = (long)ns.step;
  *s = ns;
  return 0;
}

int ckpt_load_state_file(Model *m, AdamW *o, CkptState *s, const char *path, Err *err) {
  StFile *f = st_open(path, err);
  if (!f) return -1;
  int rc = ckpt_load_state(m, o, s, f, err);
  st_close(f);
  if (rc) err_prefix(err, path);
  return rc;
}

int ckpt_load_state_memory(Model *m, AdamW *o, CkptState *s, const void *buf, size_t len, Err *err) {
  StFile *f = st_open_memory(buf, len, err);
  if (!f) return -1;
  int rc = ckpt_load_state(m, o, s, f, err);
  st_close(f);
  return rc;
}
