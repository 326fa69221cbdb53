/* The fill-mask pipeline (see fillmask.h). The semantics follow transformers'
** FillMaskPipeline (pipelines/fill_mask.py): preprocess = tokenizer(text) with
** special tokens and a check for the mask; postprocess = softmax over the full
** vocabulary at every mask position, probabilities restricted to the targets,
** topk, then one {"score","token","token_str","sequence"} per candidate. HF runs
** each input alone; we pad several into one batch, which changes nothing for
** the real tokens (padding is masked out of attention and RoBERTa's position ids
** skip pad ids). */
#include "engine/infer/fillmask.h"
#include "engine/tok/tokenizer_files.h"
#include "engine/core/files.h"
#include "engine/core/buf.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/infer/pipeline.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/config.h"

struct FillMask {
  Model *model;
  Tokenizer *tok;
  int own;
  int mask_id, pad_id;            /* pad_id: the tokenizer's pad (-1 when it has none) */
  char *mask_token;
  int clean_up;
  int max_batch;
  FillMaskLimits limits;
  int V;                          /* the model's vocabulary: the softmax width */
  int max_tokens;
  int plan_b, plan_t, plan_m;     /* the model's current inference plan (0 = none) */
  void (*warn)(void *ctx, const char *msg);
  void *warn_ctx;
};

void fillmask_options_default(FillMaskOptions *o) {
  memset(o, 0, sizeof *o);
  o->clean_up_spaces = 1;
  o->max_batch = 32;
  o->limits.max_inputs = FILLMASK_DEFAULT_MAX_INPUTS;
  o->limits.max_tokens = FILLMASK_DEFAULT_MAX_TOKENS;
  o->limits.max_masks = FILLMASK_DEFAULT_MAX_MASKS;
  o->limits.max_top_k = FILLMASK_DEFAULT_MAX_TOP_K;
  o->limits.max_answer_bytes = FILLMASK_DEFAULT_MAX_ANSWER_BYTES;
}

FillMask *fillmask_new(Model *m, Tokenizer *t, const FillMaskOptions *o, int own, Err *err) {
  FillMaskOptions def;
  if (!o) { fillmask_options_default(&def); o = &def; }
  FillMask *fm = NULL;
  if (!m || !t) { err_set(err, "fill-mask: a model and a tokenizer are required"); goto fail; }
  /* A classifier has no MLM head: say so before anything about its tokenizer. */
  if (model_config(m)->task == MODEL_TASK_SEQ_CLS) {
    err_setk(err, ERR_BAD_INPUT, "the model is a text classifier (%s), not a fill-mask model",
             config_architecture(model_config(m)));
    goto fail;
  }
  /* Unstated, the roles are the family's: [MASK] / <mask>, <pad> / [PAD]. */
  const char *mask = o->mask_token ? o->mask_token : tokenizer_mask_token(t);
  const char *pad = o->pad_token ? o->pad_token : tokenizer_pad_token(t);
  int mask_id = mask ? tokenizer_token_to_id(t, mask) : -1;
  if (mask_id < 0) { err_set(err, "The tokenizer does not define a `mask_token`. (no token '%s')", mask ? mask : "[MASK] or <mask>"); goto fail; }
  const ModelConfig *c = model_config(m);
  if (tokenizer_vocab_size(t) > c->vocab_size) {
    err_set(err, "fill-mask: the tokenizer has %d ids, the model's vocabulary only %d", tokenizer_vocab_size(t),
            c->vocab_size);
    goto fail;
  }
  fm = calloc(1, sizeof *fm);
  if (!fm || !(fm->mask_token = strdup(mask))) { err_setk(err, ERR_NOMEM, "out of memory"); goto fail; }
  fm->model = m;
  fm->tok = t;
  fm->own = own;
  fm->mask_id = mask_id;
  fm->pad_id = pad ? tokenizer_token_to_id(t, pad) : -1;
  fm->clean_up = o->clean_up_spaces != 0;
  fm->max_batch = o->max_batch > 0 ? o->max_batch : 32;
  fm->limits = o->limits;
  fm->V = c->vocab_size;
  fm->max_tokens = config_max_tokens(c);
  fm->warn = o->warn;
  fm->warn_ctx = o->warn_ctx;
  return fm;
fail:
  if (fm) free(fm->mask_token);
  free(fm);
  if (own) { model_free(m); tokenizer_free(t); }
  return NULL;
}

void fillmask_free(FillMask *fm) {
  if (!fm) return;
  if (fm->own) { model_free(fm->model); tokenizer_free(fm->tok); }
  free(fm->mask_token);
  free(fm);
}

Model *fillmask_model(FillMask *fm) { return fm->model; }
const Tokenizer *fillmask_tokenizer(const FillMask *fm) { return fm->tok; }
int fillmask_max_tokens(const FillMask *fm) { return fm->max_tokens; }
const FillMaskLimits *fillmask_limits(const FillMask *fm) { return &fm->limits; }
void fillmask_forget_plan(FillMask *fm) { fm->plan_b = fm->plan_t = fm->plan_m = 0; }

/* ---- loading an HF folder ---- */

FillMask *fillmask_load_dir(const char *dir, const FillMaskOptions *o, Err *err) {
  FillMaskOptions opt;
  if (o) opt = *o; else fillmask_options_default(&opt);
  char *ct = NULL, *mt = NULL;
  size_t cl = 0, ml = 0;
  TokenizerSide side;
  FillMask *fm = NULL;
  Model *m = NULL;
  Tokenizer *t = NULL;
  /* Both side files are optional (a bare tokenizer.json is enough); when present they must parse. */
  if (tokenizer_side_read(dir, &ct, &cl, &mt, &ml, err) || tokenizer_side_parse(ct, cl, mt, ml, &side, err)) goto done;
  if (side.clean_up_spaces >= 0) opt.clean_up_spaces = side.clean_up_spaces;
  if (!opt.mask_token && side.mask_token[0]) opt.mask_token = side.mask_token;
  if (!opt.pad_token && side.pad_token[0]) opt.pad_token = side.pad_token;
  if (!(t = tokenizer_load_dir(dir, err))) goto done;
  if (!(m = ckpt_load_model_as(dir, opt.weights, err))) goto done;
  fm = fillmask_new(m, t, &opt, 1, err);
  m = NULL;
  t = NULL;
done:
  model_free(m);
  tokenizer_free(t);
  free(ct);
  free(mt);
  return fm;
}

/* ---- decoding as transformers' PreTrainedTokenizerFast.decode does ---- */

/* The text and its length in *len: a byte-level token may decode to a NUL byte, which
** HF's JSON carries as \u0000 (a C string would end there). */
static char *decode(const FillMask *fm, const int32_t *ids, int n, int skip_special, size_t *len, Err *err) {
  char *s = tokenizer_decode_len(fm->tok, ids, n, skip_special, len, err);
  if (s && fm->clean_up) *len = tokenizer_clean_up_spaces(s, *len);   /* transformers' clean_up_tokenization */
  return s;
}

/* ---- Python's float repr ---- */

/* Digits of x (> 0, finite) with p significant digits, correctly rounded: the
** digit string into d (no dot) and the decimal exponent of the first digit. */
static void digits_of(double x, int p, char *d, int *exp10) {
  char buf[64];
  snprintf(buf, sizeof buf, "%.*e", p - 1, x);
  int k = 0;
  const char *q = buf;
  for (; *q && *q != 'e'; q++) if (*q >= '0' && *q <= '9') d[k++] = *q;
  d[k] = 0;
  *exp10 = atoi(q + 1);
}

/* Value of the digit string d with the first digit at 10^e. */
static double value_of(const char *d, int e) {
  char buf[64];
  snprintf(buf, sizeof buf, "%c.%se%d", d[0], d + 1, e);
  return strtod(buf, NULL);
}

/* Adds delta (+1 or -1) to the last digit of d, with carry; the exponent moves
** when the length of the number changes. Returns 0 when the result is not a
** p-digit string (it became zero). */
static int bump(char *d, int *e, int delta) {
  int p = (int)strlen(d);
  int i = p - 1;
  if (delta > 0) {
    while (i >= 0 && d[i] == '9') d[i--] = '0';
    if (i < 0) { memmove(d + 1, d, (size_t)p); d[0] = '1'; d[p] = 0; ++*e; return 1; }
    d[i]++;
  } else {
    while (i >= 0 && d[i] == '0') d[i--] = '9';
    if (i < 0) return 0;
    d[i]--;
    if (d[0] == '0') {
      if (p == 1) return 0;
      memmove(d, d + 1, (size_t)p); d[p - 1] = '9'; d[p] = 0; --*e;
    }
  }
  return 1;
}

char *fillmask_repr_double(double x, char *buf) {
  if (isnan(x)) { strcpy(buf, "NaN"); return buf; }
  if (isinf(x)) { strcpy(buf, x > 0 ? "Infinity" : "-Infinity"); return buf; }
  char *o = buf;
  if (signbit(x)) { *o++ = '-'; x = -x; }
  if (x == 0) { strcpy(o, "0.0"); return buf; }
  /* The shortest digit string that reads back as x; among those of that length,
  ** the nearest to x (what repr() prints). The correctly rounded p digits are the
  ** nearest p-digit string; only next to a power of two, where the gap below x is
  ** half the gap above, can its neighbour round-trip while it does not. */
  char d[40] = "";
  int e = 0;
  for (int p = 1; p <= 17; p++) {
    digits_of(x, p, d, &e);
    if (value_of(d, e) == x) break;
    int found = 0;
    for (int s = -1; s <= 1 && !found; s += 2) {
      char d2[40];
      int e2 = e;
      memcpy(d2, d, sizeof d2);
      if (bump(d2, &e2, s) && (int)strlen(d2) == p && value_of(d2, e2) == x) {
        memcpy(d, d2, sizeof d); e = e2; found = 1;
      }
    }
    if (found) break;
  }
  int n = (int)strlen(d);
  while (n > 1 && d[n - 1] == '0') d[--n] = 0;
  int decpt = e + 1;   /* x = 0.d1d2... x 10^decpt */
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      o += sprintf(o, "0.");
      for (int i = 0; i < -decpt; i++) *o++ = '0';
      strcpy(o, d);
    } else if (decpt >= n) {
      strcpy(o, d); o += n;
      for (int i = 0; i < decpt - n; i++) *o++ = '0';
      strcpy(o, ".0");
    } else {
      memcpy(o, d, (size_t)decpt); o += decpt;
      *o++ = '.';
      strcpy(o, d + decpt);
    }
  } else {
    *o++ = d[0];
    if (n > 1) { *o++ = '.'; memcpy(o, d + 1, (size_t)n - 1); o += n - 1; }
    sprintf(o, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
  }
  return buf;
}

/* ---- JSON text as Python's json.dumps writes it ---- */

/* The text goes to b, or with count set is only measured (n bytes). */
typedef struct Out { Buf b; size_t n; int count; } Out;

static void out_put(Out *o, const char *s, size_t n) {
  if (o->count) o->n += n;
  else buf_put(&o->b, s, n);
}
static void out_puts(Out *o, const char *s) { out_put(o, s, strlen(s)); }

/* Python's py_encode_basestring(_ascii): \" \\ \n \r \t \b \f, other controls as
** \u00XX; with ensure_ascii every code point outside ' '..'~' as \uXXXX
** (surrogate pairs above U+FFFF). Input is valid UTF-8 (jansson checks). */
static void put_string(Out *o, const char *s, size_t len, int ensure_ascii) {
  out_put(o, "\"", 1);
  const unsigned char *p = (const unsigned char *)s, *end = p + len;
  char esc[16];
  while (p < end) {
    unsigned c = *p;
    const char *rep = NULL;
    switch (c) {
      case '"': rep = "\\\""; break;
      case '\\': rep = "\\\\"; break;
      case '\n': rep = "\\n"; break;
      case '\r': rep = "\\r"; break;
      case '\t': rep = "\\t"; break;
      case '\b': rep = "\\b"; break;
      case '\f': rep = "\\f"; break;
      default: break;
    }
    if (rep) { out_puts(o, rep); p++; continue; }
    if (c < 0x20) { snprintf(esc, sizeof esc, "\\u%04x", c); out_puts(o, esc); p++; continue; }
    if (c < 0x7f || (!ensure_ascii)) { out_put(o, (const char *)p, 1); p++; continue; }
    if (c == 0x7f) { out_puts(o, "\\u007f"); p++; continue; }
    /* A multi-byte sequence: decode the code point. */
    unsigned cp; int k;
    if (c >= 0xf0) { cp = c & 0x07; k = 3; }
    else if (c >= 0xe0) { cp = c & 0x0f; k = 2; }
    else { cp = c & 0x1f; k = 1; }
    p++;
    for (int i = 0; i < k && p < end; i++, p++) cp = (cp << 6) | (*p & 0x3f);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
      snprintf(esc, sizeof esc, "\\u%04x", cp);
    }
    out_puts(o, esc);
  }
  out_put(o, "\"", 1);
}

static void newline(Out *o, int indent, int level) {
  out_put(o, "\n", 1);
  for (int i = 0; i < indent * level; i++) out_put(o, " ", 1);
}

static int put_value(Out *o, const json_t *v, int indent, int level, int ascii) {
  char buf[64];
  switch (json_typeof(v)) {
    case JSON_OBJECT: {
      if (json_object_size(v) == 0) { out_puts(o, "{}"); return 0; }
      out_puts(o, "{");
      const char *key;
      json_t *val;
      int first = 1;
      json_object_foreach((json_t *)v, key, val) {
        if (!first) out_puts(o, indent ? "," : ", ");
        if (indent) newline(o, indent, level + 1);
        first = 0;
        put_string(o, key, strlen(key), ascii);
        out_puts(o, ": ");
        if (put_value(o, val, indent, level + 1, ascii)) return -1;
      }
      if (indent) newline(o, indent, level);
      out_puts(o, "}");
      return 0;
    }
    case JSON_ARRAY: {
      if (json_array_size(v) == 0) { out_puts(o, "[]"); return 0; }
      out_puts(o, "[");
      for (size_t i = 0; i < json_array_size(v); i++) {
        if (i) out_puts(o, indent ? "," : ", ");
        if (indent) newline(o, indent, level + 1);
        if (put_value(o, json_array_get(v, i), indent, level + 1, ascii)) return -1;
      }
      if (indent) newline(o, indent, level);
      out_puts(o, "]");
      return 0;
    }
    case JSON_STRING: put_string(o, json_string_value(v), json_string_length(v), ascii); return 0;
    case JSON_INTEGER: snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); out_puts(o, buf); return 0;
    case JSON_REAL:
      if (!isfinite(json_real_value(v))) return -1;   /* Python writes NaN/Infinity: not JSON */
      out_puts(o, fillmask_repr_double(json_real_value(v), buf));
      return 0;
    case JSON_TRUE: out_puts(o, "true"); return 0;
    case JSON_FALSE: out_puts(o, "false"); return 0;
    case JSON_NULL: out_puts(o, "null"); return 0;
  }
  return -1;
}

char *fillmask_dumps(const json_t *v, int indent, int ensure_ascii) {
  if (!v) return NULL;
  Out o = {0};
  if (put_value(&o, v, indent > 0 ? indent : 0, 0, ensure_ascii) || o.b.oom) { buf_free(&o.b); return NULL; }
  if (!o.b.p) out_puts(&o, "");
  return o.b.p;
}

/* strlen(fillmask_dumps(v, 0, 0)) without writing it; -1 where dumps fails. */
static long long dumps_len(const json_t *v) {
  Out o = {.count = 1};
  return put_value(&o, v, 0, 0, 0) ? -1 : (long long)o.n;
}

/* ---- the pipeline ---- */

static void warnf(const FillMask *fm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(const FillMask *fm, const char *fmt, ...) {
  if (!fm->warn) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fm->warn(fm->warn_ctx, msg);
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* get_target_ids: vocabulary lookup (added tokens included), else the first id
** of the target encoded without special tokens; nothing -> skipped; set(). */
static int target_ids(const FillMask *fm, const char *const *targets, int n, int **out, int *n_out, FillMaskError *fe) {
  int *ids = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1)), k = 0;
  if (!ids) { pipeline_fail(fe, ERR_NOMEM, "out of memory"); return -1; }
  Encoding enc = {0};
  for (int i = 0; i < n; i++) {
    int id = tokenizer_token_to_id(fm->tok, targets[i]);
    if (id < 0) {
      if (tokenizer_encode(fm->tok, targets[i], strlen(targets[i]), 0, &enc, &fe->err)) {
        err_prefix(&fe->err, "targets");
        err_kind_default(&fe->err, ERR_BAD_INPUT);
        free(ids); encoding_free(&enc);
        return -1;
      }
      if (enc.n == 0) {
        warnf(fm, "The specified target token `%s` does not exist in the model vocabulary. "
                  "We cannot replace it with anything meaningful, ignoring it", targets[i]);
        continue;
      }
      id = enc.ids[0];
      const char *piece = tokenizer_id_to_token(fm->tok, id);
      warnf(fm, "The specified target token `%s` does not exist in the model vocabulary. Replacing with `%s`.",
            targets[i], piece ? piece : "None");
    }
    ids[k++] = id;
  }
  encoding_free(&enc);
  qsort(ids, (size_t)k, sizeof *ids, cmp_int);
  int u = 0;
  for (int i = 0; i < k; i++) if (u == 0 || ids[u - 1] != ids[i]) ids[u++] = ids[i];
  if (u == 0) { free(ids); pipeline_fail(fe, ERR_BAD_INPUT, "At least one target must be provided when passed."); return -1; }
  for (int i = 0; i < u; i++)
    if (ids[i] >= fm->V) {
      pipeline_fail(fe, ERR_INTERNAL, "targets: id %d is outside the model's vocabulary of %d", ids[i], fm->V);
      free(ids);
      return -1;
    }
  *out = ids;
  *n_out = u;
  return 0;
}

/* One candidate: its probability (as torch holds it, a float) and id. */
typedef struct Cand { float p; int id; } Cand;

/* Descending probability; equal probabilities by ascending id. */
static int cmp_cand(const void *a, const void *b) {
  const Cand *x = a, *y = b;
  if (x->p != y->p) return x->p < y->p ? 1 : -1;
  return (x->id > y->id) - (x->id < y->id);
}

/* The k best of c[0..n) into c[0..k), sorted. */
static void top_k(Cand *c, int n, int k) {
  if (k >= 16 || k >= n) { qsort(c, (size_t)n, sizeof *c, cmp_cand); return; }
  for (int i = 0; i < k; i++) {   /* selection: k passes, k small */
    int best = i;
    for (int j = i + 1; j < n; j++) if (cmp_cand(&c[j], &c[best]) < 0) best = j;
    Cand t = c[i]; c[i] = c[best]; c[best] = t;
  }
}

/* One encoded input waiting for the model. */
typedef struct Item {
  int32_t *ids;
  int n;
  int *masks, n_masks;
} Item;

struct FillMaskRequest {
  int n, is_list;
  int k;                    /* candidates per mask: top_k capped at the targets and the vocabulary */
  int *tids, n_tids;        /* the targets' ids (sorted, unique), or NULL: the whole vocabulary */
  Item *items;
  int tokens, masks;
  long long frame;          /* the answer's brackets and separators, in bytes */
};

/* The smallest candidate object fillmask_dumps() can write, for a lower bound of an answer. */
#define MIN_OBJECT_BYTES ((long long)sizeof "{\"score\": 0.0, \"token\": 0, \"token_str\": \"\", \"sequence\": \"\"}" - 1)

/* Bytes of an input's result around its objects: "[o, o]", or "[[o, o], [o, o]]" for several masks. */
static long long item_frame(int n_masks, int k) {
  long long row = 2 + 2LL * (k - 1);
  return n_masks == 1 ? row : 2 + 2LL * (n_masks - 1) + (long long)n_masks * row;
}

void fillmask_request_free(FillMaskRequest *r) {
  if (!r) return;
  for (int i = 0; r->items && i < r->n; i++) { free(r->items[i].ids); free(r->items[i].masks); }
  free(r->items);
  free(r->tids);
  free(r);
}

int fillmask_request_tokens(const FillMaskRequest *r) { return r->tokens; }

FillMaskRequest *fillmask_prepare_texts(const FillMask *fm, const char *const *texts, int n, int is_list, long long top_k,
                                        const char *const *targets, int n_targets, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  memset(fe, 0, sizeof *fe);
  const FillMaskLimits *lim = &fm->limits;
  if (n < 0 || (n > 0 && !texts)) return pipeline_fail(fe, ERR_INVALID, "fill-mask: no inputs");
  if (!is_list && n != 1) return pipeline_fail(fe, ERR_INVALID, "fill-mask: a single input must be exactly one text");
  if (top_k < 1) return pipeline_fail(fe, ERR_INVALID, "top_k: must be a positive integer, got %lld", top_k);
  /* The cheap limits first: nothing is encoded for a request refused by them. */
  if (lim->max_top_k > 0 && top_k > lim->max_top_k) {
    pipeline_fail(fe, ERR_TOO_LARGE, "top_k: %lld is more than the limit of %d (max_top_k)", top_k, lim->max_top_k);
    return pipeline_limit_hit(fe, "max_top_k", lim->max_top_k, top_k);
  }
  if (lim->max_inputs > 0 && n > lim->max_inputs) {
    pipeline_fail(fe, ERR_TOO_LARGE, "inputs: %d texts in one request, more than the limit of %d (max_inputs)", n,
         lim->max_inputs);
    return pipeline_limit_hit(fe, "max_inputs", lim->max_inputs, n);
  }
  FillMaskRequest *r = calloc(1, sizeof *r);
  if (!r || !(r->items = calloc((size_t)(n > 0 ? n : 1), sizeof *r->items))) {
    free(r);
    return pipeline_fail(fe, ERR_NOMEM, "out of memory");
  }
  r->n = n;
  r->is_list = is_list;
  if (targets && target_ids(fm, targets, n_targets, &r->tids, &r->n_tids, fe)) goto refused;
  int width = r->tids ? r->n_tids : fm->V;
  r->k = top_k < width ? (int)top_k : width;

  Encoding enc = {0};
  for (int i = 0; i < n; i++) {
    const char *tx = texts[i];
    if (!tx) { pipeline_fail(fe, ERR_INVALID, "inputs[%d]: not a string", i); goto refused_enc; }
    if (tokenizer_encode(fm->tok, tx, strlen(tx), 1, &enc, &fe->err)) {
      if (is_list) { char p[32]; snprintf(p, sizeof p, "inputs[%d]", i); err_prefix(&fe->err, p); }
      err_kind_default(&fe->err, ERR_BAD_INPUT);
      goto refused_enc;
    }
    Item *it = &r->items[i];
    it->n = enc.n;
    it->ids = malloc(sizeof(int32_t) * (size_t)(enc.n > 0 ? enc.n : 1));
    it->masks = malloc(sizeof(int) * (size_t)(enc.n > 0 ? enc.n : 1));
    if (!it->ids || !it->masks) { pipeline_fail(fe, ERR_NOMEM, "out of memory"); goto refused_enc; }
    memcpy(it->ids, enc.ids, sizeof(int32_t) * (size_t)enc.n);
    for (int t = 0; t < enc.n; t++) if (enc.ids[t] == fm->mask_id) it->masks[it->n_masks++] = t;
    if (it->n_masks == 0) { pipeline_fail(fe, ERR_BAD_INPUT, "No mask_token (%s) found on the input", fm->mask_token); goto refused_enc; }
    if (enc.n > fm->max_tokens) {
      char where[32] = "";
      if (is_list) snprintf(where, sizeof where, "inputs[%d]: ", i);
      pipeline_fail(fe, ERR_BAD_INPUT, "%sinput of %d tokens is longer than the model's maximum of %d positions", where, enc.n,
           fm->max_tokens);
      goto refused_enc;
    }
    for (int t = 0; t < enc.n; t++)
      if (enc.ids[t] >= fm->V) {
        pipeline_fail(fe, ERR_INTERNAL, "input id %d is outside the model's vocabulary of %d", enc.ids[t], fm->V);
        goto refused_enc;
      }
    r->tokens += enc.n;
    r->masks += it->n_masks;
    if (lim->max_tokens > 0 && r->tokens > lim->max_tokens) {
      pipeline_fail(fe, ERR_TOO_LARGE, "inputs: at least %d tokens in one request, more than the limit of %d (max_tokens)",
           r->tokens, lim->max_tokens);
      pipeline_limit_hit(fe, "max_tokens", lim->max_tokens, r->tokens);
      goto refused_enc;
    }
    if (lim->max_masks > 0 && r->masks > lim->max_masks) {
      pipeline_fail(fe, ERR_TOO_LARGE, "inputs: at least %d mask tokens in one request, more than the limit of %d (max_masks)",
           r->masks, lim->max_masks);
      pipeline_limit_hit(fe, "max_masks", lim->max_masks, r->masks);
      goto refused_enc;
    }
  }
  encoding_free(&enc);

  /* The answer's exact frame, and a lower bound of its size (every object as small
  ** as one can be), so a request whose answer cannot fit is refused before the model runs. */
  if (n == 0) r->frame = 2;
  else if (!is_list || n == 1) r->frame = item_frame(r->items[0].n_masks, r->k);
  else {
    r->frame = 2 + 2LL * (n - 1);
    for (int i = 0; i < n; i++) r->frame += item_frame(r->items[i].n_masks, r->k);
  }
  long long least = r->frame + (long long)r->masks * r->k * MIN_OBJECT_BYTES;
  if (lim->max_answer_bytes > 0 && least > lim->max_answer_bytes) {
    pipeline_fail(fe, ERR_TOO_LARGE, "the answer would be at least %lld bytes, more than the limit of %lld (max_answer_bytes)",
         least, lim->max_answer_bytes);
    pipeline_limit_hit(fe, "max_answer_bytes", lim->max_answer_bytes, least);
    goto refused;
  }
  return r;
refused_enc:
  encoding_free(&enc);
refused:
  fillmask_request_free(r);
  return NULL;
}

FillMaskRequest *fillmask_prepare(const FillMask *fm, const json_t *inputs, const json_t *parameters, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  memset(fe, 0, sizeof *fe);
  long long top_k = FILLMASK_DEFAULT_TOP_K;
  int n = 0, is_list = 0, nt = 0;
  const char **texts = NULL, **targets = NULL;
  const char *one = NULL, *one_target = NULL;
  FillMaskRequest *r = NULL;
  if (json_is_string(inputs)) { one = json_string_value(inputs); texts = &one; n = 1; }
  else if (json_is_array(inputs)) {
    is_list = 1;
    n = (int)json_array_size(inputs);
    texts = malloc(sizeof(char *) * (size_t)(n > 0 ? n : 1));
    if (!texts) return pipeline_fail(fe, ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
      const json_t *x = json_array_get(inputs, i);
      if (!json_is_string(x)) { pipeline_fail(fe, ERR_INVALID, "inputs[%d]: expected a string", i); goto done; }
      texts[i] = json_string_value(x);
    }
  } else {
    return pipeline_fail(fe, ERR_INVALID, "inputs: expected a string or a list of strings");
  }
  if (parameters && !json_is_null(parameters)) {
    if (!json_is_object(parameters)) { pipeline_fail(fe, ERR_INVALID, "parameters: expected an object"); goto done; }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)parameters, key, v) {
      if (!strcmp(key, "top_k")) {
        if (json_is_null(v)) continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
          pipeline_fail(fe, ERR_INVALID, "parameters.top_k: expected a positive integer");
          goto done;
        }
        top_k = json_integer_value(v);
      } else if (!strcmp(key, "targets")) {
        if (json_is_null(v)) continue;
        if (json_is_string(v)) { one_target = json_string_value(v); targets = &one_target; nt = 1; continue; }
        if (!json_is_array(v)) { pipeline_fail(fe, ERR_INVALID, "parameters.targets: expected a string or a list of strings"); goto done; }
        nt = (int)json_array_size(v);
        targets = malloc(sizeof(char *) * (size_t)(nt > 0 ? nt : 1));
        if (!targets) { pipeline_fail(fe, ERR_NOMEM, "out of memory"); goto done; }
        for (int i = 0; i < nt; i++) {
          const json_t *x = json_array_get(v, i);
          if (!json_is_string(x)) { pipeline_fail(fe, ERR_INVALID, "parameters.targets[%d]: expected a string", i); goto done; }
          targets[i] = json_string_value(x);
        }
      } else {
        pipeline_fail(fe, ERR_INVALID, "parameters: unknown parameter '%s' (top_k, targets)", key);
        goto done;
      }
    }
  }
  r = fillmask_prepare_texts(fm, texts, n, is_list, top_k, targets, nt, fe);
done:
  if (texts != &one) free(texts);
  if (targets != &one_target) free(targets);
  return r;
}

/* The result for one input: a list of candidates per mask position. Adds each
** object's bytes to *bytes and refuses the request once they pass max_answer_bytes. */
static json_t *item_result(FillMask *fm, const FillMaskRequest *r, const Item *it, const float *logits, Cand *cand,
                           int32_t *seq, long long *bytes, FillMaskError *fe) {
  int single = it->n_masks == 1;
  int width = r->tids ? r->n_tids : fm->V;
  int k = r->k;
  long long max_bytes = fm->limits.max_answer_bytes;
  json_t *res = json_array();
  if (!res) return pipeline_fail(fe, ERR_NOMEM, "out of memory");
  for (int mi = 0; mi < it->n_masks; mi++) {
    const float *l = logits + (size_t)mi * fm->V;
    /* logits.softmax(-1), accumulated in double, stored as float as torch does. */
    float mx = l[0];
    for (int v = 1; v < fm->V; v++) if (l[v] > mx) mx = l[v];
    double sum = 0;
    for (int v = 0; v < fm->V; v++) sum += exp((double)l[v] - (double)mx);
    for (int j = 0; j < width; j++) {
      int id = r->tids ? r->tids[j] : j;
      cand[j].id = id;
      cand[j].p = (float)(exp((double)l[id] - (double)mx) / sum);
      /* A NaN or infinite logit anywhere (weights holding NaN, a run that diverged)
      ** leaves no score to rank or to write: JSON has no NaN, and json_real refusing it
      ** was reported as text that is not UTF-8. */
      if (!isfinite(cand[j].p)) {
        json_decref(res);
        return pipeline_fail(fe, ERR_INTERNAL,
                             "fill-mask: the model's score for token %d is not finite (NaN or infinite logits: "
                             "its weights are damaged, or its training diverged)", id);
      }
    }
    top_k(cand, width, k);
    json_t *row = json_array();
    if (!row || json_array_append_new(res, row)) { json_decref(res); return pipeline_fail(fe, ERR_NOMEM, "out of memory"); }
    for (int j = 0; j < k; j++) {
      int id = cand[j].id, ns = 0;
      for (int t = 0; t < it->n; t++) {
        int32_t x = t == it->masks[mi] ? id : it->ids[t];
        if (x != fm->pad_id) seq[ns++] = x;   /* "Filter padding out" */
      }
      int32_t one = id;
      fe->err.msg[0] = 0;
      size_t tl = 0, sl = 0;
      char *ts = decode(fm, &one, 1, 0, &tl, &fe->err);
      char *ss = ts ? decode(fm, seq, ns, single, &sl, &fe->err) : NULL;
      json_t *o = json_object();
      int bad = !ts || !ss || !o;
      if (!bad) {
        json_t *js = json_stringn(ts, tl), *jq = json_stringn(ss, sl);
        bad = !js || !jq;
        bad |= json_object_set_new(o, "score", json_real((double)cand[j].p));
        bad |= json_object_set_new(o, "token", json_integer(id));
        bad |= js ? json_object_set_new(o, "token_str", js) : -1;
        bad |= jq ? json_object_set_new(o, "sequence", jq) : -1;
        if (!bad) bad = json_array_append(row, o);
      }
      long long len = bad ? 0 : dumps_len(o);
      json_decref(o);
      free(ts); free(ss);
      if (bad || len < 0) {
        json_decref(res);
        if (!fe->err.msg[0]) return pipeline_fail(fe, ERR_INTERNAL, "fill-mask: decoded text is not valid UTF-8 or out of memory");
        fe->err.kind = ERR_INTERNAL;
        return NULL;
      }
      *bytes += len;
      if (max_bytes > 0 && *bytes > max_bytes) {
        json_decref(res);
        pipeline_fail(fe, ERR_TOO_LARGE, "the answer is more than %lld bytes, the limit (max_answer_bytes)", max_bytes);
        return pipeline_limit_hit(fe, "max_answer_bytes", max_bytes, *bytes);
      }
    }
  }
  if (single) {
    json_t *only = json_incref(json_array_get(res, 0));
    json_decref(res);
    return only;
  }
  return res;
}

/* Keeps the model's plan large enough for batch x seq with heads at m rows. */
static int ensure_plan(FillMask *fm, int b, int t, int m, Err *err) {
  if (fm->plan_b >= b && fm->plan_t >= t && fm->plan_m >= m) return 0;
  int nb = b > fm->plan_b ? b : fm->plan_b, nt = t > fm->plan_t ? t : fm->plan_t, nm = m > fm->plan_m ? m : fm->plan_m;
  fm->plan_b = fm->plan_t = fm->plan_m = 0;
  if (model_plan(fm->model, nb, nt, nm, 0, err)) return -1;
  fm->plan_b = nb; fm->plan_t = nt; fm->plan_m = nm;
  return 0;
}

void fillmask_answer(FillMask *fm, FillMaskRequest *const *reqs, int n, json_t **results, FillMaskError *errors) {
  json_t **parts = calloc((size_t)(n > 0 ? n : 1), sizeof *parts);   /* each request's results, by input */
  long long *bytes = calloc((size_t)(n > 0 ? n : 1), sizeof *bytes);
  int total = 0, maxlen = 1;
  for (int i = 0; i < n; i++) {
    results[i] = NULL;
    memset(&errors[i], 0, sizeof errors[i]);
    total += reqs[i]->n;
    for (int j = 0; j < reqs[i]->n; j++) if (reqs[i]->items[j].n > maxlen) maxlen = reqs[i]->items[j].n;
  }
  PipelineSlot *slots = malloc(sizeof *slots * (size_t)(total > 0 ? total : 1));
  Cand *cand = malloc(sizeof(Cand) * (size_t)fm->V);
  int32_t *seqbuf = malloc(sizeof(int32_t) * (size_t)maxlen);
  int32_t *ids = NULL, *att = NULL, *pos = NULL;
  float *logits = NULL;
  if (!parts || !bytes || !slots || !cand || !seqbuf) {
    for (int i = 0; i < n; i++) pipeline_fail(&errors[i], ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0, k = 0; i < n; i++) {
    const FillMaskRequest *r = reqs[i];
    bytes[i] = r->frame;
    if (!(parts[i] = json_array())) { pipeline_fail(&errors[i], ERR_NOMEM, "out of memory"); continue; }
    for (int j = 0; j < r->n; j++) {
      const Item *it = &r->items[j];
      slots[k++] = (PipelineSlot){it->ids, it->n, i, j, it};
      if (json_array_append_new(parts[i], json_null())) pipeline_fail(&errors[i], ERR_NOMEM, "out of memory");
    }
  }
  /* Inputs of similar lengths share a forward pass, padded to its longest. */
  pipeline_sort(slots, total);
  for (int s = 0; s < total;) {
    PipelineSlot *batch = slots + s;
    int b = pipeline_pass_size(batch, total - s, fm->max_batch), T = batch[b - 1].n, M = 0;
    for (int r = 0; r < b; r++) M += ((const Item *)batch[r].item)->n_masks;
    s += b;
    int live = 0;
    for (int r = 0; r < b; r++) live += errors[batch[r].req].err.kind == ERR_NONE;
    if (!live) continue;   /* every request in it already refused (its answer grew too large) */
    free(ids); free(att); free(pos); free(logits);
    ids = malloc(sizeof(int32_t) * (size_t)b * T);
    att = malloc(sizeof(int32_t) * (size_t)b * T);
    pos = malloc(sizeof(int32_t) * (size_t)M);
    logits = malloc(sizeof(float) * (size_t)M * fm->V);
    Err e = {0};
    if (!ids || !att || !pos || !logits) err_setk(&e, ERR_NOMEM, "out of memory for %d mask positions", M);
    int k = 0;
    if (!e.msg[0]) pipeline_pad(batch, b, T, model_config(fm->model)->pad_token_id, ids, att);
    for (int r = 0; !e.msg[0] && r < b; r++) {
      const Item *it = batch[r].item;
      for (int q = 0; q < it->n_masks; q++) pos[k++] = r * T + it->masks[q];
    }
    ModelBatch mb = {.batch = b, .seq = T, .input_ids = ids, .attention_mask = att};
    if (e.msg[0] || ensure_plan(fm, b, T, M, &e) || model_logits_at(fm->model, &mb, pos, M, logits, &e)) {
      for (int i = 0; i < n; i++)
        if (errors[i].err.kind == ERR_NONE) pipeline_fail(&errors[i], e.kind, "%s", e.msg);
      goto done;
    }
    k = 0;
    for (int r = 0; r < b; r++) {
      const PipelineSlot *sl = &batch[r];
      const Item *it = sl->item;
      FillMaskError *fe = &errors[sl->req];
      if (fe->err.kind == ERR_NONE) {
        json_t *one = item_result(fm, reqs[sl->req], it, logits + (size_t)k * fm->V, cand, seqbuf, &bytes[sl->req], fe);
        if (one && json_array_set_new(parts[sl->req], (size_t)sl->index, one)) pipeline_fail(fe, ERR_NOMEM, "out of memory");
      }
      k += it->n_masks;
    }
  }
  for (int i = 0; i < n; i++) {
    if (errors[i].err.kind != ERR_NONE) continue;
    /* A single text gives its own result; so does a list of one (FillMaskPipeline.__call__). */
    if (!reqs[i]->is_list || reqs[i]->n == 1) results[i] = json_incref(json_array_get(parts[i], 0));
    else results[i] = json_incref(parts[i]);
  }
done:
  for (int i = 0; parts && i < n; i++) json_decref(parts[i]);
  free(parts); free(bytes); free(slots); free(cand); free(seqbuf);
  free(ids); free(att); free(pos); free(logits);
}

json_t *fillmask_run(FillMask *fm, const char *const *texts, int n, int is_list, int top_k,
                     const char *const *targets, int n_targets, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  FillMaskRequest *r = fillmask_prepare_texts(fm, texts, n, is_list, top_k, targets, n_targets, fe);
  json_t *res = NULL;
  if (r) fillmask_answer(fm, &r, 1, &res, fe);
  fillmask_request_free(r);
  return res;
}

json_t *fillmask_call(FillMask *fm, const json_t *inputs, const json_t *parameters, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  FillMaskRequest *r = fillmask_prepare(fm, inputs, parameters, fe);
  json_t *res = NULL;
  if (r) fillmask_answer(fm, &r, 1, &res, fe);
  fillmask_request_free(r);
  return res;
}
