/* The text-classification pipeline (see textclass.h). The semantics follow
** transformers 4.46's TextClassificationPipeline (pipelines/text_classification.py):
** preprocess = tokenizer(text, truncation=...) with special tokens; forward = the
** classifier's logits; postprocess = softmax / sigmoid / none over the logits in
** numpy float32, then the best label (top_k absent, "legacy") or the labels sorted
** by score, cut to top_k. HF runs each input alone; we pad several into one batch,
** which changes nothing for the real tokens (padding is masked out of attention, and
** the head reads each row's first token). */
#include "engine/infer/textclass.h"
#include "engine/tok/tokenizer_files.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "engine/core/files.h"
#include "engine/infer/pipeline.h"
#include "engine/io/checkpoint.h"
#include "engine/nn/config.h"

struct TextClass {
  Model *model;
  Tokenizer *tok;
  int own;
  int max_batch;
  int max_tokens;                 /* the model's positions: the longest input */
  int cut_to;                     /* truncation's length, [CLS]/[SEP] counted */
  TextClassLimits limits;
  int num_labels;
  const char **labels;            /* id2label, pointers into the model's config */
  char (*fallback)[24];           /* "LABEL_i" where the config names none */
  TextClassFunction default_fn;
  int plan_b, plan_t;             /* the model's current inference plan (0 = none) */
};

void textclass_options_default(TextClassOptions *o) {
  memset(o, 0, sizeof *o);
  o->max_batch = 32;
  o->limits.max_inputs = TEXTCLASS_DEFAULT_MAX_INPUTS;
  o->limits.max_tokens = TEXTCLASS_DEFAULT_MAX_TOKENS;
}

TextClass *textclass_new(Model *m, Tokenizer *t, const TextClassOptions *o, int own, Err *err) {
  TextClassOptions def;
  if (!o) { textclass_options_default(&def); o = &def; }
  TextClass *tc = NULL;
  if (!m || !t) { err_set(err, "text-classification: a model and a tokenizer are required"); goto fail; }
  const ModelConfig *c = model_config(m);
  if (c->task != MODEL_TASK_SEQ_CLS) {
    err_setk(err, ERR_BAD_INPUT, "the model is a fill-mask model (%s), not a text classifier", config_architecture(c));
    goto fail;
  }
  if (c->num_labels < 1 || c->num_labels > CONFIG_MAX_LABELS) {
    err_setk(err, ERR_BAD_INPUT, "text-classification: the model has %d labels", c->num_labels);
    goto fail;
  }
  if (tokenizer_vocab_size(t) > c->vocab_size) {
    err_setk(err, ERR_BAD_INPUT, "text-classification: the tokenizer has %d ids, the model's vocabulary only %d",
             tokenizer_vocab_size(t), c->vocab_size);
    goto fail;
  }
  tc = calloc(1, sizeof *tc);
  if (!tc || !(tc->labels = calloc((size_t)c->num_labels, sizeof *tc->labels)) ||
      !(tc->fallback = calloc((size_t)c->num_labels, sizeof *tc->fallback))) {
    err_setk(err, ERR_NOMEM, "out of memory");
    goto fail;
  }
  tc->model = m;
  tc->tok = t;
  tc->own = own;
  tc->max_batch = o->max_batch > 0 ? o->max_batch : 32;
  tc->limits = o->limits;
  tc->num_labels = c->num_labels;
  tc->max_tokens = config_max_tokens(c);
  tc->cut_to = o->max_length > 0 && o->max_length < tc->max_tokens ? o->max_length : tc->max_tokens;
  for (int i = 0; i < c->num_labels; i++) {
    const char *name = config_label(c, i);
    /* HF's PretrainedConfig names an unnamed class LABEL_i. */
    if (!name || !name[0]) { snprintf(tc->fallback[i], sizeof tc->fallback[i], "LABEL_%d", i); name = tc->fallback[i]; }
    tc->labels[i] = name;
  }
  /* postprocess(): sigmoid for multi_label_classification or num_labels == 1, else softmax. */
  tc->default_fn = c->problem_type == MODEL_MULTI_LABEL || c->num_labels == 1 ? TEXTCLASS_FN_SIGMOID : TEXTCLASS_FN_SOFTMAX;
  return tc;
fail:
  if (tc) { free(tc->labels); free(tc->fallback); }
  free(tc);
  if (own) { model_free(m); tokenizer_free(t); }
  return NULL;
}

TextClass *textclass_load_dir(const char *dir, const TextClassOptions *o, Err *err) {
  TextClassOptions opt;
  if (o) opt = *o; else textclass_options_default(&opt);
  char *cp = files_join(dir, "config.json");
  TextClass *tc = NULL;
  Model *m = NULL;
  Tokenizer *t = NULL;
  ModelConfig c;
  if (!cp) { err_setk(err, ERR_NOMEM, "out of memory"); goto done; }
  /* A masked LM is refused from its config, before its weights are read. */
  if (config_load(cp, &c, err)) goto done;
  if (c.task != MODEL_TASK_SEQ_CLS) {
    err_setk(err, ERR_BAD_INPUT, "%s: the model is a fill-mask model (%s), not a text classifier", dir, config_architecture(&c));
    goto done;
  }
  if (!(t = tokenizer_load_dir(dir, err))) goto done;
  if (!(m = ckpt_load_model_as(dir, opt.weights, err))) goto done;
  tc = textclass_new(m, t, &opt, 1, err);
  m = NULL;
  t = NULL;
done:
  model_free(m);
  tokenizer_free(t);
  free(cp);
  return tc;
}

void textclass_free(TextClass *tc) {
  if (!tc) return;
  if (tc->own) { model_free(tc->model); tokenizer_free(tc->tok); }
  free(tc->labels);
  free(tc->fallback);
  free(tc);
}

Model *textclass_model(TextClass *tc) { return tc->model; }
const Tokenizer *textclass_tokenizer(const TextClass *tc) { return tc->tok; }
const TextClassLimits *textclass_limits(const TextClass *tc) { return &tc->limits; }
int textclass_max_tokens(const TextClass *tc) { return tc->max_tokens; }
TextClassFunction textclass_default_function(const TextClass *tc) { return tc->default_fn; }
void textclass_forget_plan(TextClass *tc) { tc->plan_b = tc->plan_t = 0; }

int textclass_function_parse(const char *name, TextClassFunction *out) {
  static const char *names[] = {"softmax", "sigmoid", "none"};
  for (int i = 0; i < 3; i++)
    if (name && !strcasecmp(name, names[i])) { *out = (TextClassFunction)(TEXTCLASS_FN_SOFTMAX + i); return 0; }
  return -1;
}

const char *textclass_function_name(TextClassFunction f) {
  switch (f) {
    case TEXTCLASS_FN_SOFTMAX: return "softmax";
    case TEXTCLASS_FN_SIGMOID: return "sigmoid";
    case TEXTCLASS_FN_NONE: return "none";
    default: return "default";
  }
}

/* ---- numpy's float32 arithmetic ---- */

/* np.exp on float32 as numpy's SIMD loop computes it (AVX2/AVX-512 builds,
** loops_exponent_log: Cody-Waite reduction by ln 2, a 5/2-order rational
** approximation, scaled by 2^k). It is not the correctly rounded exp (it differs in
** the last bit for about a third of inputs), so a score printed to the shortest
** repr would differ from HF's without it. The quotient's rounding to an integer is
** one fused multiply-add with the 1.5 * 2^23 trick, so ties follow the exact
** product, as numpy's does. */
static float np_expf(float x) {
  if (x != x) return x;
  if (x >= 88.72283935546875f) return INFINITY;
  if (x <= -103.97208404541015625f) return 0.0f;
  const float magic = 0x1.8p+23f;
  float q = fmaf(x, 1.442695040888963407359924681001892137f, magic) - magic;
  float r = fmaf(q, -6.93145752e-1f, x);
  r = fmaf(q, -1.42860677e-6f, r);
  r = fmaf(q, 0.0f, r);
  float num = fmaf(5.082762527590693718096e-04f, r, 6.757896990527504603057e-03f);
  num = fmaf(num, r, 5.114512081637298353406e-02f);
  num = fmaf(num, r, 2.473615434895520810817e-01f);
  num = fmaf(num, r, 7.257664613233124478488e-01f);
  num = fmaf(num, r, 9.999999999980870924916e-01f);
  float den = fmaf(2.159509375685829852307e-02f, r, -2.742335390411667452936e-01f);
  den = fmaf(den, r, 1.0f);
  return ldexpf(num / den, (int)q);
}

/* np.sum of float32 values: numpy's pairwise summation (8 running sums in blocks of
** up to 128, halves above), in float. */
static float np_pairwise_sum(const float *a, long n) {
  if (n < 8) {
    float res = 0.0f;
    for (long i = 0; i < n; i++) res += a[i];
    return res;
  }
  if (n <= 128) {
    float r[8];
    for (int j = 0; j < 8; j++) r[j] = a[j];
    long i;
    for (i = 8; i < n - (n % 8); i += 8)
      for (int j = 0; j < 8; j++) r[j] += a[i + j];
    float res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
  }
  long n2 = n / 2;
  n2 -= n2 % 8;
  return np_pairwise_sum(a, n2) + np_pairwise_sum(a + n2, n - n2);
}

int textclass_scores(const float *logits, int n, TextClassFunction fn, float *out) {
  if (n < 1) return -1;
  switch (fn) {
    case TEXTCLASS_FN_SOFTMAX: {
      /* maxes = np.max(x); e = np.exp(x - maxes); e / e.sum() */
      float mx = logits[0];
      for (int i = 1; i < n; i++) if (logits[i] > mx || logits[i] != logits[i]) mx = logits[i];
      for (int i = 0; i < n; i++) out[i] = np_expf(logits[i] - mx);
      float sum = np_pairwise_sum(out, n);
      for (int i = 0; i < n; i++) out[i] = out[i] / sum;
      return 0;
    }
    case TEXTCLASS_FN_SIGMOID:
      /* 1.0 / (1.0 + np.exp(-x)), every step in float32 (a Python float does not widen numpy's array). */
      for (int i = 0; i < n; i++) out[i] = 1.0f / (1.0f + np_expf(-logits[i]));
      return 0;
    case TEXTCLASS_FN_NONE:
      memcpy(out, logits, sizeof(float) * (size_t)n);
      return 0;
    default:
      return -1;
  }
}

/* ---- requests ---- */

/* One input's tokens; type_ids NULL when all are 0 (or the model takes none). */
typedef struct TcItem { int32_t *ids, *type_ids; int n; } TcItem;
/* One input: a text, or a text and its pair (pair NULL: none). */
typedef struct TcInput { const char *text, *pair; } TcInput;

struct TextClassRequest {
  int n, is_list;
  int one_dict;             /* a single {"text"[, "text_pair"]} input: the legacy answer is its dict, not [dict] */
  long long top_k;          /* >= 1, TEXTCLASS_TOP_K_LEGACY or TEXTCLASS_TOP_K_ALL */
  TextClassFunction fn;     /* never DEFAULT */
  TcItem *items;
  int tokens;
};

void textclass_request_free(TextClassRequest *r) {
  if (!r) return;
  for (int i = 0; r->items && i < r->n; i++) { free(r->items[i].ids); free(r->items[i].type_ids); }
  free(r->items);
  free(r);
}

int textclass_request_tokens(const TextClassRequest *r) { return r->tokens; }

/* "inputs[i]: " for a list's element, "" for a single text. */
static const char *where(char *buf, size_t cap, int is_list, int i) {
  if (is_list) snprintf(buf, cap, "inputs[%d]: ", i);
  else buf[0] = 0;
  return buf;
}

/* The request of inputs[0..n) (see textclass_prepare_texts; truncation is HF's strategy). */
static TextClassRequest *prepare_inputs(const TextClass *tc, const TcInput *inputs, int n, int is_list, long long top_k,
                                        TextClassFunction fn, TokTruncation truncation, FillMaskError *fe) {
  const TextClassLimits *lim = &tc->limits;
  char w[48];
  if (n < 0 || (n > 0 && !inputs)) return pipeline_fail(fe, ERR_INVALID, "text-classification: no inputs");
  if (!is_list && n != 1) return pipeline_fail(fe, ERR_INVALID, "text-classification: a single input must be exactly one text");
  if (top_k < 1 && top_k != TEXTCLASS_TOP_K_LEGACY && top_k != TEXTCLASS_TOP_K_ALL)
    return pipeline_fail(fe, ERR_INVALID, "top_k: must be a positive integer or null, got %lld", top_k);
  if (fn < TEXTCLASS_FN_DEFAULT || fn > TEXTCLASS_FN_NONE)
    return pipeline_fail(fe, ERR_INVALID, "function_to_apply: unknown function %d", (int)fn);
  if (lim->max_inputs > 0 && n > lim->max_inputs) {
    pipeline_fail(fe, ERR_TOO_LARGE, "inputs: %d texts in one request, more than the limit of %d (max_inputs)", n,
                  lim->max_inputs);
    return pipeline_limit_hit(fe, "max_inputs", lim->max_inputs, n);
  }
  TextClassRequest *r = calloc(1, sizeof *r);
  if (!r || !(r->items = calloc((size_t)(n > 0 ? n : 1), sizeof *r->items))) {
    free(r);
    return pipeline_fail(fe, ERR_NOMEM, "out of memory");
  }
  r->n = n;
  r->is_list = is_list;
  /* HF slices the sorted list ([:top_k]): a top_k past the labels is every label. */
  r->top_k = top_k > tc->num_labels ? tc->num_labels : top_k;
  r->fn = fn == TEXTCLASS_FN_DEFAULT ? tc->default_fn : fn;
  const ModelConfig *cfg = model_config(tc->model);
  const int V = cfg->vocab_size;
  /* The type ids the tokenizer gives go to the model where HF's tokenizer returns them:
  ** BertTokenizerFast's model_input_names hold token_type_ids, RobertaTokenizerFast's do not. */
  const int takes_types = cfg->model_type == MODEL_BERT;
  Encoding enc = {0};
  for (int i = 0; i < n; i++) {
    const char *tx = inputs[i].text, *px = inputs[i].pair;
    if (!tx) { pipeline_fail(fe, ERR_INVALID, "%snot a string", where(w, sizeof w, 1, i)); goto refused; }
    /* truncation=True cuts to the model's positions (HF: the tokenizer's model_max_length,
    ** which maskd's exported tokenizer_config says is them); without it a longer input is
    ** refused, as HF's forward fails on it. */
    if (tokenizer_encode_truncated(tc->tok, tx, strlen(tx), px, px ? strlen(px) : 0, tc->cut_to, truncation, &enc,
                                   &fe->err)) {
      if (is_list) { char p[32]; snprintf(p, sizeof p, "inputs[%d]", i); err_prefix(&fe->err, p); }
      err_kind_default(&fe->err, ERR_BAD_INPUT);
      goto refused;
    }
    TcItem *it = &r->items[i];
    if (enc.n > tc->max_tokens) {
      pipeline_fail(fe, ERR_BAD_INPUT,
                    "%sinput of %d tokens is longer than the model's maximum of %d positions", where(w, sizeof w, is_list, i),
                    enc.n, tc->max_tokens);
      fe->truncation_helps = 1;
      goto refused;
    }
    it->n = enc.n;
    if (!(it->ids = malloc(sizeof(int32_t) * (size_t)(it->n > 0 ? it->n : 1)))) {
      pipeline_fail(fe, ERR_NOMEM, "out of memory");
      goto refused;
    }
    memcpy(it->ids, enc.ids, sizeof(int32_t) * (size_t)it->n);
    int typed = 0;
    for (int t = 0; takes_types && t < it->n; t++) typed |= enc.type_ids[t] != 0;
    if (typed) {
      if (!(it->type_ids = malloc(sizeof(int32_t) * (size_t)it->n))) {
        pipeline_fail(fe, ERR_NOMEM, "out of memory");
        goto refused;
      }
      memcpy(it->type_ids, enc.type_ids, sizeof(int32_t) * (size_t)it->n);
      for (int t = 0; t < it->n; t++)
        if (it->type_ids[t] < 0 || it->type_ids[t] >= cfg->type_vocab_size) {
          pipeline_fail(fe, ERR_BAD_INPUT, "%sthe tokenizer gives token type %d, but the model has %d (type_vocab_size)",
                        where(w, sizeof w, is_list, i), it->type_ids[t], cfg->type_vocab_size);
          goto refused;
        }
    }
    if (it->n == 0) {
      /* A tokenizer without a template gives nothing for "": the model cannot run on no token. */
      pipeline_fail(fe, ERR_BAD_INPUT, "%sthe input encodes to no token", where(w, sizeof w, is_list, i));
      goto refused;
    }
    for (int t = 0; t < it->n; t++)
      if (it->ids[t] < 0 || it->ids[t] >= V) {
        pipeline_fail(fe, ERR_INTERNAL, "input id %d is outside the model's vocabulary of %d", it->ids[t], V);
        goto refused;
      }
    r->tokens += it->n;
    if (lim->max_tokens > 0 && r->tokens > lim->max_tokens) {
      pipeline_fail(fe, ERR_TOO_LARGE, "inputs: at least %d tokens in one request, more than the limit of %d (max_tokens)",
                    r->tokens, lim->max_tokens);
      pipeline_limit_hit(fe, "max_tokens", lim->max_tokens, r->tokens);
      goto refused;
    }
  }
  encoding_free(&enc);
  return r;
refused:
  encoding_free(&enc);
  textclass_request_free(r);
  return NULL;
}

TextClassRequest *textclass_prepare_texts(const TextClass *tc, const char *const *texts, int n, int is_list,
                                          long long top_k, TextClassFunction fn, int truncation, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  memset(fe, 0, sizeof *fe);
  if (n < 0 || (n > 0 && !texts)) return pipeline_fail(fe, ERR_INVALID, "text-classification: no inputs");
  TcInput *in = calloc((size_t)(n > 0 ? n : 1), sizeof *in);
  if (!in) return pipeline_fail(fe, ERR_NOMEM, "out of memory");
  for (int i = 0; i < n; i++) in[i].text = texts[i];
  TextClassRequest *r = prepare_inputs(tc, in, n, is_list, top_k, fn, truncation ? TOK_TRUNC_LONGEST_FIRST : TOK_TRUNC_NONE, fe);
  free(in);
  return r;
}

/* One input of the HTTP form: a string, or {"text": str, "text_pair": str} (HF's dict
** input, text_pair optional). -1 with fe filled. */
static int read_input(const json_t *x, const char *at, TcInput *out, FillMaskError *fe) {
  out->pair = NULL;
  if (json_is_string(x)) { out->text = json_string_value(x); return 0; }
  if (!json_is_object(x)) {
    pipeline_fail(fe, ERR_INVALID, "%s: expected a string or {\"text\", \"text_pair\"}, got %s", at, pipeline_json_kind(x));
    return -1;
  }
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)x, key, v) {
    if (strcmp(key, "text") && strcmp(key, "text_pair")) {
      pipeline_fail(fe, ERR_INVALID, "%s: unknown key '%s' (text, text_pair)", at, key);
      return -1;
    }
    if (!json_is_string(v)) {
      pipeline_fail(fe, ERR_INVALID, "%s.%s: expected a string, got %s", at, key, pipeline_json_kind(v));
      return -1;
    }
  }
  const json_t *t = json_object_get(x, "text"), *p = json_object_get(x, "text_pair");
  if (!t) { pipeline_fail(fe, ERR_INVALID, "%s: a dict input needs \"text\"", at); return -1; }
  out->text = json_string_value(t);
  out->pair = p ? json_string_value(p) : NULL;
  return 0;
}

TextClassRequest *textclass_prepare(const TextClass *tc, const json_t *inputs, const json_t *parameters,
                                    FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  memset(fe, 0, sizeof *fe);
  long long top_k = TEXTCLASS_TOP_K_LEGACY;
  TextClassFunction fn = TEXTCLASS_FN_DEFAULT;
  TokTruncation truncation = TOK_TRUNC_NONE;
  int n = 0, is_list = json_is_array(inputs), one_dict = json_is_object(inputs);
  TextClassRequest *r = NULL;
  size_t m = is_list ? json_array_size(inputs) : 1;
  if (m > (size_t)1 << 30) return pipeline_fail(fe, ERR_TOO_LARGE, "inputs: %zu texts", m);
  TcInput *in = calloc(m > 0 ? m : 1, sizeof *in);
  if (!in) return pipeline_fail(fe, ERR_NOMEM, "out of memory");
  n = (int)m;
  for (size_t i = 0; i < m; i++) {
    char at[40];
    if (is_list) snprintf(at, sizeof at, "inputs[%zu]", i);
    else snprintf(at, sizeof at, "inputs");
    if (read_input(is_list ? json_array_get(inputs, i) : inputs, at, &in[i], fe)) goto done;
  }
  if (parameters && !json_is_null(parameters)) {
    if (!json_is_object(parameters)) { pipeline_fail(fe, ERR_INVALID, "parameters: expected an object"); goto done; }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)parameters, key, v) {
      if (!strcmp(key, "top_k")) {
        /* An integer or None: both leave the legacy answer (HF's isinstance(top_k, int) or top_k is None). */
        if (json_is_null(v)) { top_k = TEXTCLASS_TOP_K_ALL; continue; }
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
          pipeline_fail(fe, ERR_INVALID, "parameters.top_k: expected a positive integer or null");
          goto done;
        }
        top_k = json_integer_value(v);
      } else if (!strcmp(key, "function_to_apply")) {
        if (json_is_null(v)) continue;
        if (!json_is_string(v) || textclass_function_parse(json_string_value(v), &fn)) {
          pipeline_fail(fe, ERR_INVALID, "parameters.function_to_apply: expected \"softmax\", \"sigmoid\" or \"none\"");
          goto done;
        }
      } else if (!strcmp(key, "truncation")) {
        if (json_is_null(v)) continue;
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        if (json_is_boolean(v)) truncation = json_is_true(v) ? TOK_TRUNC_LONGEST_FIRST : TOK_TRUNC_NONE;
        else if (!s || tokenizer_truncation_parse(s, &truncation)) {
          pipeline_fail(fe, ERR_INVALID, "parameters.truncation: expected true, false, \"longest_first\", \"only_first\", "
                                         "\"only_second\" or \"do_not_truncate\"");
          goto done;
        }
      } else {
        pipeline_fail(fe, ERR_INVALID, "parameters: unknown parameter '%s' (top_k, function_to_apply, truncation)", key);
        goto done;
      }
    }
  }
  r = prepare_inputs(tc, in, n, is_list, top_k, fn, truncation, fe);
  if (r) r->one_dict = one_dict;
done:
  free(in);
  return r;
}

/* ---- answers ---- */

/* Keeps the model's plan large enough for batch x seq. */
static int ensure_plan(TextClass *tc, int b, int t, Err *err) {
  if (tc->plan_b >= b && tc->plan_t >= t) return 0;
  int nb = b > tc->plan_b ? b : tc->plan_b, nt = t > tc->plan_t ? t : tc->plan_t;
  tc->plan_b = tc->plan_t = 0;
  /* head_rows is a masked LM's; a classifier ignores it. */
  if (model_plan(tc->model, nb, nt, nb, 0, err)) return -1;
  tc->plan_b = nb;
  tc->plan_t = nt;
  return 0;
}

typedef struct Cand { float s; int id; } Cand;

/* Descending score; equal scores in label order (Python's sort is stable). */
static int cmp_cand(const void *a, const void *b) {
  const Cand *x = a, *y = b;
  if (x->s != y->s) return x->s < y->s ? 1 : -1;
  return (x->id > y->id) - (x->id < y->id);
}

static json_t *label_object(const TextClass *tc, int id, float score) {
  json_t *o = json_object();
  if (!o || json_object_set_new(o, "label", json_string(tc->labels[id])) ||
      json_object_set_new(o, "score", json_real((double)score))) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* One input's result from its scores: a dict (legacy) or a sorted, cut list. */
static json_t *item_result(const TextClass *tc, const TextClassRequest *r, const float *scores, Cand *cand, FillMaskError *fe) {
  int L = tc->num_labels;
  for (int i = 0; i < L; i++)
    if (!isfinite(scores[i]))
      return pipeline_fail(fe, ERR_INTERNAL, "text-classification: the model's score for label %d is not finite", i);
  if (r->top_k == TEXTCLASS_TOP_K_LEGACY) {
    /* scores.argmax(): the first of the largest. */
    int best = 0;
    for (int i = 1; i < L; i++) if (scores[i] > scores[best]) best = i;
    json_t *o = label_object(tc, best, scores[best]);
    return o ? o : pipeline_fail(fe, ERR_NOMEM, "out of memory");
  }
  for (int i = 0; i < L; i++) cand[i] = (Cand){scores[i], i};
  qsort(cand, (size_t)L, sizeof *cand, cmp_cand);
  int k = r->top_k == TEXTCLASS_TOP_K_ALL ? L : (int)r->top_k;
  json_t *list = json_array();
  if (!list) return pipeline_fail(fe, ERR_NOMEM, "out of memory");
  for (int j = 0; j < k; j++) {
    json_t *o = label_object(tc, cand[j].id, cand[j].s);
    if (!o || json_array_append_new(list, o)) { json_decref(list); return pipeline_fail(fe, ERR_NOMEM, "out of memory"); }
  }
  return list;
}

void textclass_answer(TextClass *tc, TextClassRequest *const *reqs, int n, json_t **results, FillMaskError *errors) {
  const int L = tc->num_labels;
  json_t **parts = calloc((size_t)(n > 0 ? n : 1), sizeof *parts);
  int total = 0;
  for (int i = 0; i < n; i++) {
    results[i] = NULL;
    memset(&errors[i], 0, sizeof errors[i]);
    total += reqs[i]->n;
  }
  PipelineSlot *slots = malloc(sizeof *slots * (size_t)(total > 0 ? total : 1));
  Cand *cand = malloc(sizeof *cand * (size_t)L);
  float *scores = malloc(sizeof(float) * (size_t)L);
  int32_t *ids = NULL, *att = NULL, *types = NULL;
  float *logits = NULL;
  if (!parts || !slots || !cand || !scores) {
    for (int i = 0; i < n; i++) pipeline_fail(&errors[i], ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0, k = 0; i < n; i++) {
    const TextClassRequest *r = reqs[i];
    if (!(parts[i] = json_array())) { pipeline_fail(&errors[i], ERR_NOMEM, "out of memory"); continue; }
    for (int j = 0; j < r->n; j++) {
      slots[k++] = (PipelineSlot){r->items[j].ids, r->items[j].n, i, j, &r->items[j]};
      if (json_array_append_new(parts[i], json_null())) pipeline_fail(&errors[i], ERR_NOMEM, "out of memory");
    }
  }
  /* Inputs of similar lengths share a forward pass, padded to its longest. */
  pipeline_sort(slots, total);
  const int32_t pad = model_config(tc->model)->pad_token_id;
  for (int s = 0; s < total;) {
    PipelineSlot *batch = slots + s;
    int b = pipeline_pass_size(batch, total - s, tc->max_batch), T = batch[b - 1].n;
    s += b;
    int live = 0;
    for (int r = 0; r < b; r++) live += errors[batch[r].req].err.kind == ERR_NONE;
    if (!live) continue;
    free(ids); free(att); free(types); free(logits);
    ids = malloc(sizeof(int32_t) * (size_t)b * T);
    att = malloc(sizeof(int32_t) * (size_t)b * T);
    types = NULL;
    logits = malloc(sizeof(float) * (size_t)b * L);
    Err e = {0};
    if (!ids || !att || !logits) err_setk(&e, ERR_NOMEM, "out of memory for a batch of %d x %d tokens", b, T);
    if (!e.msg[0]) pipeline_pad(batch, b, T, pad, ids, att);
    /* Type ids where some input of the pass has them (a pair's second text), 0 elsewhere
    ** and on padding, as HF pads token_type_ids. */
    int typed = 0;
    for (int k = 0; k < b; k++) typed |= ((const TcItem *)batch[k].item)->type_ids != NULL;
    if (!e.msg[0] && typed && !(types = calloc((size_t)b * T, sizeof *types)))
      err_setk(&e, ERR_NOMEM, "out of memory for a batch of %d x %d tokens", b, T);
    for (int k = 0; types && k < b; k++) {
      const TcItem *it = batch[k].item;
      if (it->type_ids) memcpy(types + (size_t)k * T, it->type_ids, sizeof *types * (size_t)it->n);
    }
    ModelBatch mb = {.batch = b, .seq = T, .input_ids = ids, .attention_mask = att, .token_type_ids = types};
    if (e.msg[0] || ensure_plan(tc, b, T, &e) || model_classify(tc->model, &mb, logits, &e)) {
      for (int i = 0; i < n; i++)
        if (errors[i].err.kind == ERR_NONE) pipeline_fail(&errors[i], e.kind ? e.kind : ERR_INTERNAL, "%s", e.msg);
      goto done;
    }
    for (int r = 0; r < b; r++) {
      const PipelineSlot *sl = &batch[r];
      FillMaskError *fe = &errors[sl->req];
      if (fe->err.kind != ERR_NONE) continue;
      textclass_scores(logits + (size_t)r * L, L, reqs[sl->req]->fn, scores);
      json_t *one = item_result(tc, reqs[sl->req], scores, cand, fe);
      if (one && json_array_set_new(parts[sl->req], (size_t)sl->index, one)) pipeline_fail(fe, ERR_NOMEM, "out of memory");
    }
  }
  for (int i = 0; i < n; i++) {
    if (errors[i].err.kind != ERR_NONE) continue;
    const TextClassRequest *r = reqs[i];
    if (r->is_list) results[i] = json_incref(parts[i]);
    else if (r->top_k == TEXTCLASS_TOP_K_LEGACY && !r->one_dict) results[i] = json_incref(parts[i]);   /* [ {..} ]: HF's [result] */
    else results[i] = json_incref(json_array_get(parts[i], 0));
  }
done:
  for (int i = 0; parts && i < n; i++) json_decref(parts[i]);
  free(parts); free(slots); free(cand); free(scores);
  free(ids); free(att); free(types); free(logits);
}

json_t *textclass_run(TextClass *tc, const char *const *texts, int n, int is_list, long long top_k,
                      TextClassFunction fn, int truncation, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  TextClassRequest *r = textclass_prepare_texts(tc, texts, n, is_list, top_k, fn, truncation, fe);
  json_t *res = NULL;
  if (r) textclass_answer(tc, &r, 1, &res, fe);
  textclass_request_free(r);
  return res;
}

json_t *textclass_call(TextClass *tc, const json_t *inputs, const json_t *parameters, FillMaskError *fe) {
  FillMaskError ignored;
  if (!fe) fe = &ignored;
  TextClassRequest *r = textclass_prepare(tc, inputs, parameters, fe);
  json_t *res = NULL;
  if (r) textclass_answer(tc, &r, 1, &res, fe);
  textclass_request_free(r);
  return res;
}
