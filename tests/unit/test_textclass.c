/* Unit tests of engine/infer/textclass: the scores against numpy itself (softmax,
** sigmoid, none, bit for bit, as transformers' postprocess computes them), and the
** pipeline on a tiny random classifier: HF's answer shapes for top_k absent (legacy),
** an integer and null, for a string and a list; function_to_apply and the model's
** default; scores equal to the functions of model_classify's logits; ordering (ties in
** label order); truncation; every refusal with its kind; the limits at their value
** and one past; answers that do not depend on the batch; the loaders (an HF folder, a
** store revision) giving the same answers, and each refusing the other task's model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/infer/fillmask.h"
#include "engine/infer/textclass.h"
#include "engine/io/checkpoint.h"
#include "store/load.h"
#include "store/store.h"
#include "engine/nn/config.h"
#include "engine/nn/model.h"
#include "engine/tok/tokenizer.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

/* ---- the scores against numpy ---- */

/* Logits of every kind a classifier gives (small, large, ties, one huge), n per vector. */
static void fill_logits(float *x, int n, unsigned seed) {
  unsigned s = seed * 2654435761u + 1;
  for (int i = 0; i < n; i++) {
    s = s * 1103515245u + 12345u;
    double u = ((s >> 8) & 0xffffff) / (double)0x1000000;
    double scale = seed % 4 == 0 ? 0.05 : seed % 4 == 1 ? 3 : seed % 4 == 2 ? 20 : 90;
    x[i] = (float)((u - 0.5) * 2 * scale);
    if (seed % 7 == 3 && i % 3 == 1) x[i] = x[i - 1];   /* ties */
  }
}

static void test_numpy(void) {
  static const int sizes[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 77, 127, 128, 129, 200, 256, 300, 1024};
  enum { NS = sizeof sizes / sizeof sizes[0], REPS = 12 };
  const char *path = "/tmp/maskd_textclass_numpy.txt";
  FILE *f = fopen(path, "w");
  if (!f) { check(0, "textclass_numpy_setup", "cannot write %s", path); return; }
  float x[1024];
  for (int k = 0; k < NS; k++)
    for (int r = 0; r < REPS; r++) {
      fill_logits(x, sizes[k], (unsigned)(k * REPS + r));
      fprintf(f, "%d", sizes[k]);
      for (int i = 0; i < sizes[k]; i++) fprintf(f, " %a", (double)x[i]);
      fprintf(f, "\n");
    }
  fclose(f);
  /* transformers' softmax() and sigmoid() (pipelines/text_classification.py) on a float32 array. */
  const char *prog =
    "import numpy as np, sys\n"
    "def softmax(o):\n"
    "    m = np.max(o, axis=-1, keepdims=True)\n"
    "    e = np.exp(o - m)\n"
    "    return e / e.sum(axis=-1, keepdims=True)\n"
    "def sigmoid(o):\n"
    "    return 1.0 / (1.0 + np.exp(-o))\n"
    "np.seterr(all='ignore')\n"
    "from numpy.core._multiarray_umath import __cpu_features__ as f\n"
    "print('simd', int(bool(f.get('AVX2') and f.get('FMA3')) or bool(f.get('AVX512F'))))\n"
    "for line in open(sys.argv[1]):\n"
    "    p = line.split()\n"
    "    x = np.array([float.fromhex(v) for v in p[1:]], dtype=np.float32)\n"
    "    for y in (softmax(x), sigmoid(x)):\n"
    "        assert y.dtype == np.float32\n"
    "        print(' '.join(float(v).hex() for v in y))\n";
  FILE *pf = fopen("/tmp/maskd_textclass_numpy.py", "w");
  if (!pf) { check(0, "textclass_numpy_setup", "cannot write the script"); return; }
  fputs(prog, pf);
  fclose(pf);
  FILE *p = popen("/usr/bin/python3 /tmp/maskd_textclass_numpy.py /tmp/maskd_textclass_numpy.txt", "r");
  if (!p) { check(0, "textclass_numpy_setup", "cannot run /usr/bin/python3"); return; }
  int vectors = 0, bad_soft = 0, bad_sig = 0, bad_none = 0, simd = 0;
  if (fscanf(p, " simd %d", &simd) != 1) { check(0, "textclass_numpy_read", "no numpy"); pclose(p); return; }
  char first[300] = "";
  float got[1024], none[1024];
  for (int k = 0; k < NS; k++)
    for (int r = 0; r < REPS; r++) {
      int n = sizes[k];
      fill_logits(x, n, (unsigned)(k * REPS + r));
      for (int fn = 0; fn < 2; fn++) {
        textclass_scores(x, n, fn == 0 ? TEXTCLASS_FN_SOFTMAX : TEXTCLASS_FN_SIGMOID, got);
        for (int i = 0; i < n; i++) {
          char hex[64];
          if (fscanf(p, "%63s", hex) != 1) { check(0, "textclass_numpy_read", "python ended early"); pclose(p); return; }
          float want = (float)strtod(hex, NULL);
          if (memcmp(&want, &got[i], sizeof want)) {
            if (!bad_soft && !bad_sig)
              snprintf(first, sizeof first, "%s n=%d i=%d x=%a numpy %a ours %a", fn ? "sigmoid" : "softmax", n, i,
                       (double)x[i], (double)want, (double)got[i]);
            if (fn) bad_sig++; else bad_soft++;
          }
        }
      }
      textclass_scores(x, n, TEXTCLASS_FN_NONE, none);
      bad_none += memcmp(none, x, sizeof(float) * (size_t)n) != 0;
      vectors++;
    }
  int rc = pclose(p);
  remove(path);
  remove("/tmp/maskd_textclass_numpy.py");
  /* numpy's own exp is its SIMD loop's only on a CPU with AVX2+FMA or AVX-512 (else libm's expf). */
  if (!simd) {
    check_skip("textclass_softmax_is_numpys", "numpy runs no SIMD exp on this CPU (no AVX2+FMA, no AVX-512)");
    check_skip("textclass_sigmoid_is_numpys", "numpy runs no SIMD exp on this CPU (no AVX2+FMA, no AVX-512)");
  } else {
    check(rc == 0 && vectors == NS * REPS && bad_soft == 0, "textclass_softmax_is_numpys", "%d values differ (first: %s)",
          bad_soft, first);
    check(rc == 0 && bad_sig == 0, "textclass_sigmoid_is_numpys", "%d values differ (first: %s)", bad_sig, first);
  }
  check(bad_none == 0, "textclass_none_is_the_logits", "%d vectors changed", bad_none);
  check(textclass_scores(x, 3, TEXTCLASS_FN_DEFAULT, got) == -1 && textclass_scores(x, 0, TEXTCLASS_FN_NONE, got) == -1,
        "textclass_scores_refuses_default_and_empty", "accepted");
}

/* ---- a tiny classifier ---- */

#define SP "\xe2\x96\x81"   /* the Metaspace replacement */

static const char *pieces[] = {
  "[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", "\xe2\x96\x81", SP "the", SP "a", SP "cat",
  SP "sat", SP "on", SP "mat", ".", ",", "s", "e", "t", "a", "c", "h", "o", "n", "m",
  SP "dog", SP "caf\xc3\xa9", "x", SP "big", "'", SP "was", "d",
};
#define NP ((int)(sizeof pieces / sizeof pieces[0]))

static const char *label_names[] = {"negative", "neutral", "positive", "caf\xc3\xa9", "LABEL_4"};
#define NL 5

static Tokenizer *make_tok(void) {
  double sc[NP];
  for (int i = 0; i < NP; i++) sc[i] = i < 5 ? 0.0 : -1.0 - 0.1 * i;
  Err err = {0};
  Tokenizer *t = tokenizer_new_seed(NP, pieces, sc, 2, 5, &err);
  if (!t) printf("tokenizer: %s\n", err.msg);
  return t;
}

/* scale 0: every parameter zero (every logit 0: a tie of every label). */
static Model *make_model(ModelProblem problem, float scale) {
  ModelConfig c = fixture_tiny(NP);   /* 24 positions, pad 3: inputs of up to 20 tokens */
  Err err = {0};
  if (config_set_labels(&c, NL, label_names, &err)) { printf("labels: %s\n", err.msg); return NULL; }
  c.problem_type = problem;
  Model *m = model_new(&c, &err);
  if (!m) { printf("model: %s\n", err.msg); return NULL; }
  model_init_weights(m, 5);
  float *w = model_params(m);
  for (size_t i = 0; i < model_num_params(m); i++) w[i] *= scale;
  return m;
}

static TextClass *make_pipeline(ModelProblem problem, float scale, const TextClassLimits *limits, int max_batch) {
  Model *m = make_model(problem, scale);
  Tokenizer *t = make_tok();
  if (!m || !t) { model_free(m); tokenizer_free(t); return NULL; }
  TextClassOptions o;
  textclass_options_default(&o);
  if (limits) o.limits = *limits;
  if (max_batch) o.max_batch = max_batch;
  Err err = {0};
  TextClass *tc = textclass_new(m, t, &o, 1, &err);
  if (!tc) printf("textclass_new: %s\n", err.msg);
  return tc;
}

/* A result as text for a failure message (truncated). */
static const char *show(const json_t *v, const char *alt) {
  static char buf[2048];
  if (!v) return alt;
  char *s = fillmask_dumps(v, 0, 0);
  snprintf(buf, sizeof buf, "%s", s ? s : "(unprintable)");
  free(s);
  return buf;
}

/* inputs and parameters from JSON text. */
static json_t *call(TextClass *tc, const char *inputs, const char *params, FillMaskError *fe) {
  json_t *in = json_loads(inputs, JSON_DECODE_ANY, NULL), *pa = params ? json_loads(params, JSON_DECODE_ANY, NULL) : NULL;
  if (!in || (params && !pa)) { printf("bad test JSON: %s / %s\n", inputs, params ? params : ""); exit(2); }
  json_t *r = textclass_call(tc, in, pa, fe);
  json_decref(in);
  json_decref(pa);
  return r;
}

/* {"label": <a label>, "score": <a float32 value>}, keys in that order. */
static int is_label_object(const json_t *o) {
  if (!json_is_object(o) || json_object_size(o) != 2) return 0;
  void *it = json_object_iter((json_t *)o);
  if (!it || strcmp(json_object_iter_key(it), "label")) return 0;
  it = json_object_iter_next((json_t *)o, it);
  if (!it || strcmp(json_object_iter_key(it), "score")) return 0;
  const char *l = json_string_value(json_object_get(o, "label"));
  int known = 0;
  for (int i = 0; l && i < NL; i++) known |= !strcmp(l, label_names[i]);
  double s = json_real_value(json_object_get(o, "score"));
  return known && json_is_real(json_object_get(o, "score")) && (double)(float)s == s;
}

static int label_id(const json_t *o) {
  const char *l = json_string_value(json_object_get(o, "label"));
  for (int i = 0; l && i < NL; i++) if (!strcmp(l, label_names[i])) return i;
  return -1;
}

/* A sorted list of k label objects, distinct labels. */
static int is_sorted_list(const json_t *a, int k) {
  if (!json_is_array(a) || (int)json_array_size(a) != k) return 0;
  int seen[NL] = {0};
  double prev = INFINITY;
  for (int i = 0; i < k; i++) {
    const json_t *o = json_array_get(a, (size_t)i);
    int id = label_id(o);
    if (!is_label_object(o) || id < 0 || seen[id]++) return 0;
    double s = json_real_value(json_object_get(o, "score"));
    if (s > prev) return 0;
    prev = s;
  }
  return 1;
}

/* The logits model_classify gives for a text alone. */
static int logits_of(TextClass *tc, const char *text, float *out) {
  Encoding enc = {0};
  Err err = {0};
  int rc = tokenizer_encode(textclass_tokenizer(tc), text, strlen(text), 1, &enc, &err);
  ModelBatch b = {.batch = 1, .seq = enc.n, .input_ids = enc.ids};
  Model *m = textclass_model(tc);
  rc = rc || model_plan(m, 1, enc.n, 1, 0, &err) || model_classify(m, &b, out, &err);
  textclass_forget_plan(tc);
  encoding_free(&enc);
  if (rc) printf("logits_of: %s\n", err.msg);
  return rc;
}

static void test_shapes(void) {
  TextClassLimits none = {0};
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &none, 0);
  if (!tc) { check(0, "textclass_setup", "no pipeline"); return; }
  FillMaskError fe = {0};
  check(textclass_max_tokens(tc) == 20, "textclass_max_tokens_roberta", "got %d", textclass_max_tokens(tc));
  check(textclass_default_function(tc) == TEXTCLASS_FN_SOFTMAX, "textclass_default_softmax", "got %s",
        textclass_function_name(textclass_default_function(tc)));
  const char *text = "the cat sat on the mat .";

  /* Legacy (no top_k): a string gives [ {label, score} ]; the best label. */
  json_t *r = call(tc, "\"the cat sat on the mat .\"", NULL, &fe);
  check(json_is_array(r) && json_array_size(r) == 1 && is_label_object(json_array_get(r, 0)), "textclass_legacy_string",
        "%s", show(r, fe.err.msg));
  json_t *all = call(tc, "\"the cat sat on the mat .\"", "{\"top_k\": null}", &fe);
  check(is_sorted_list(all, NL), "textclass_top_k_null_string", "%s", show(all, fe.err.msg));
  check(r && all && json_equal(json_array_get(r, 0), json_array_get(all, 0)), "textclass_legacy_is_the_best",
        "legacy %s", show(r, fe.err.msg));
  json_t *p = call(tc, "\"the cat sat on the mat .\"", "{}", &fe);
  json_t *q = call(tc, "\"the cat sat on the mat .\"", "null", &fe);
  check(p && q && json_equal(p, r) && json_equal(q, r), "textclass_empty_parameters_are_legacy", "%s", show(p, fe.err.msg));
  json_decref(p); json_decref(q);

  /* Scores = softmax of model_classify's logits (numpy's arithmetic, checked above; in double here). */
  float lg[NL], sm[NL];
  int ok = !logits_of(tc, text, lg);
  double mx = -INFINITY, z = 0, maxdiff = 0, sum = 0;
  for (int i = 0; i < NL; i++) mx = fmax(mx, lg[i]);
  for (int i = 0; i < NL; i++) z += exp(lg[i] - mx);
  textclass_scores(lg, NL, TEXTCLASS_FN_SOFTMAX, sm);
  int bits = 1;
  for (size_t i = 0; ok && i < json_array_size(all); i++) {
    json_t *o = json_array_get(all, i);
    int id = label_id(o);
    double s = json_real_value(json_object_get(o, "score"));
    maxdiff = fmax(maxdiff, fabs(s - exp(lg[id] - mx) / z));
    bits &= s == (double)sm[id];
    sum += s;
  }
  check(ok && bits && maxdiff < 1e-6 && fabs(sum - 1) < 1e-5, "textclass_scores_are_softmax_of_logits",
        "max diff %.3g, sum %.9f, bits %d", maxdiff, sum, bits);
  /* The logits differ (the test means something). */
  check(ok && fabs(lg[0] - lg[1]) > 1e-3, "textclass_logits_differ", "%g %g", lg[0], lg[1]);

  /* top_k = k: that many, a prefix of the full ranking; past the labels: every label. */
  json_t *k2 = call(tc, "\"the cat sat on the mat .\"", "{\"top_k\": 2}", &fe);
  ok = is_sorted_list(k2, 2) && json_equal(json_array_get(k2, 0), json_array_get(all, 0)) &&
       json_equal(json_array_get(k2, 1), json_array_get(all, 1));
  check(ok, "textclass_top_k_int_string", "%s", show(k2, fe.err.msg));
  json_t *k1 = call(tc, "\"the cat sat on the mat .\"", "{\"top_k\": 1}", &fe);
  check(is_sorted_list(k1, 1), "textclass_top_k_1_is_a_list", "%s", show(k1, fe.err.msg));
  json_t *big = call(tc, "\"the cat sat on the mat .\"", "{\"top_k\": 9223372036854775807}", &fe);
  check(big && json_equal(big, all), "textclass_top_k_huge_is_every_label", "%s", show(big, fe.err.msg));
  json_decref(k1); json_decref(big);

  /* Lists: legacy gives one dict per input (no unwrapping of one), top_k a list per input. */
  json_t *l3 = call(tc, "[\"the cat sat on the mat .\", \"a dog\", \"the big cat was on a mat\"]", NULL, &fe);
  ok = json_is_array(l3) && json_array_size(l3) == 3;
  for (size_t i = 0; ok && i < 3; i++) ok = is_label_object(json_array_get(l3, i));
  check(ok && json_equal(json_array_get(l3, 0), json_array_get(r, 0)), "textclass_legacy_list", "%s", show(l3, fe.err.msg));
  json_t *l1 = call(tc, "[\"the cat sat on the mat .\"]", NULL, &fe);
  check(l1 && json_equal(l1, r), "textclass_legacy_list_of_one", "%s", show(l1, fe.err.msg));
  json_t *lk = call(tc, "[\"the cat sat on the mat .\", \"a dog\"]", "{\"top_k\": 2}", &fe);
  check(json_is_array(lk) && json_array_size(lk) == 2 && json_equal(json_array_get(lk, 0), k2) &&
        is_sorted_list(json_array_get(lk, 1), 2), "textclass_top_k_list", "%s", show(lk, fe.err.msg));
  json_t *lk1 = call(tc, "[\"the cat sat on the mat .\"]", "{\"top_k\": null}", &fe);
  check(json_is_array(lk1) && json_array_size(lk1) == 1 && json_equal(json_array_get(lk1, 0), all),
        "textclass_top_k_list_of_one", "%s", show(lk1, fe.err.msg));
  json_t *e0 = call(tc, "[]", NULL, &fe), *e1 = call(tc, "[]", "{\"top_k\": 3}", &fe);
  check(json_is_array(e0) && json_array_size(e0) == 0 && json_is_array(e1) && json_array_size(e1) == 0,
        "textclass_empty_list", "%s", show(e0, fe.err.msg));
  json_decref(l3); json_decref(l1); json_decref(lk); json_decref(lk1); json_decref(e0); json_decref(e1);

  /* function_to_apply: none = the logits widened; sigmoid = numpy's; any case. */
  json_t *fn = call(tc, "\"the cat sat on the mat .\"", "{\"top_k\": null, \"function_to_apply\": \"NONE\"}", &fe);
  float sg[NL];
  textclass_scores(lg, NL, TEXTCLASS_FN_SIGMOID, sg);
  ok = is_sorted_list(fn, NL);
  for (size_t i = 0; ok && i < NL; i++) {
    json_t *o = json_array_get(fn, i);
    ok = json_real_value(json_object_get(o, "score")) == (double)lg[label_id(o)];
  }
  check(ok, "textclass_function_none_is_logits", "%s", show(fn, fe.err.msg));
  json_decref(fn);
  fn = call(tc, "\"the cat sat on the mat .\"", "{\"top_k\": null, \"function_to_apply\": \"Sigmoid\"}", &fe);
  ok = is_sorted_list(fn, NL);
  for (size_t i = 0; ok && i < NL; i++) {
    json_t *o = json_array_get(fn, i);
    double s = json_real_value(json_object_get(o, "score"));
    ok = s == (double)sg[label_id(o)] && fabs(s - 1 / (1 + exp(-(double)lg[label_id(o)]))) < 1e-6;
  }
  check(ok, "textclass_function_sigmoid", "%s", show(fn, fe.err.msg));
  json_decref(fn);
  fn = call(tc, "\"the cat sat on the mat .\"", "{\"function_to_apply\": \"softmax\", \"top_k\": null}", &fe);
  check(fn && json_equal(fn, all), "textclass_function_softmax_explicit", "%s", show(fn, fe.err.msg));
  json_decref(fn);

  /* The C form gives the same. */
  json_t *c1 = textclass_run(tc, &text, 1, 0, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_DEFAULT, 0, &fe);
  json_t *c2 = textclass_run(tc, &text, 1, 0, TEXTCLASS_TOP_K_LEGACY, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(c1 && c2 && json_equal(c1, all) && json_equal(c2, r), "textclass_run_c_form", "%s", show(c1, fe.err.msg));
  json_decref(c1); json_decref(c2);

  /* The JSON text: HF's keys, Python's float repr. */
  char *s = fillmask_dumps(r, 0, 0);
  ok = s && !strncmp(s, "[{\"label\": \"", 12) && strstr(s, "\", \"score\": 0.") && s[strlen(s) - 1] == ']';
  check(ok, "textclass_dumps_shape", "%s", s ? s : "(null)");
  free(s);
  json_decref(r); json_decref(all); json_decref(k2);
  textclass_free(tc);
}

static void test_default_and_ties(void) {
  /* A multi-label model's default is sigmoid. */
  TextClass *tc = make_pipeline(MODEL_MULTI_LABEL, 15.0f, NULL, 0);
  FillMaskError fe = {0};
  if (!tc) { check(0, "textclass_setup_multi", "no pipeline"); return; }
  check(textclass_default_function(tc) == TEXTCLASS_FN_SIGMOID, "textclass_default_multi_label_sigmoid", "got %s",
        textclass_function_name(textclass_default_function(tc)));
  json_t *a = call(tc, "\"a cat\"", "{\"top_k\": null}", &fe);
  json_t *b = call(tc, "\"a cat\"", "{\"top_k\": null, \"function_to_apply\": \"sigmoid\"}", &fe);
  check(a && b && json_equal(a, b), "textclass_multi_label_scores_sigmoid", "%s", show(a, fe.err.msg));
  json_decref(a); json_decref(b);
  textclass_free(tc);

  /* Every parameter zero: every logit 0, every score equal; the order is the labels' (a stable sort). */
  tc = make_pipeline(MODEL_SINGLE_LABEL, 0.0f, NULL, 0);
  if (!tc) { check(0, "textclass_setup_zero", "no pipeline"); return; }
  json_t *t = call(tc, "\"the cat\"", "{\"top_k\": null}", &fe);
  int ok = json_is_array(t) && json_array_size(t) == NL;
  for (int i = 0; ok && i < NL; i++) {
    json_t *o = json_array_get(t, (size_t)i);
    ok = label_id(o) == i && json_real_value(json_object_get(o, "score")) == (double)0.2f;
  }
  check(ok, "textclass_ties_in_label_order", "%s", show(t, fe.err.msg));
  json_decref(t);
  t = call(tc, "\"the cat\"", NULL, &fe);
  check(json_is_array(t) && label_id(json_array_get(t, 0)) == 0, "textclass_legacy_tie_first_label", "%s", show(t, fe.err.msg));
  json_decref(t);
  textclass_free(tc);
}

/* n words of "the cat sat on the mat a" (one token each), into buf. */
static const char *words(char *buf, size_t cap, int n) {
  static const char *w[] = {"the", "cat", "sat", "on", "the", "mat", "a"};
  size_t k = 0;
  buf[0] = 0;
  for (int i = 0; i < n && k + 8 < cap; i++) k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? " " : "", w[i % 7]);
  return buf;
}

static void test_truncation(void) {
  TextClassLimits none = {0};
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &none, 0);
  if (!tc) { check(0, "textclass_setup_trunc", "no pipeline"); return; }
  FillMaskError fe = {0};
  char longt[512], cut[512], fit[512];
  words(longt, sizeof longt, 30);   /* 32 tokens with [CLS]/[SEP] */
  words(cut, sizeof cut, 18);       /* the 20 that fit */
  words(fit, sizeof fit, 18);
  const char *t1 = longt, *t2 = cut;
  json_t *r = textclass_run(tc, &t1, 1, 0, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(!r && fe.err.kind == ERR_BAD_INPUT && strstr(fe.err.msg, "32 tokens") && strstr(fe.err.msg, "20"),
        "textclass_too_long_refused", "%s (%s)", show(r, fe.err.msg), err_kind_name(fe.err.kind));
  json_decref(r);
  json_t *a = textclass_run(tc, &t1, 1, 0, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_DEFAULT, 1, &fe);
  json_t *b = textclass_run(tc, &t2, 1, 0, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(a && b && json_equal(a, b), "textclass_truncation_keeps_the_head", "%s vs %s", show(a, fe.err.msg), "");
  json_decref(a); json_decref(b);
  /* The JSON form, with the words in a list: index in the message. */
  char in[1200];
  snprintf(in, sizeof in, "[\"a cat\", \"%s\"]", longt);
  r = call(tc, in, NULL, &fe);
  check(!r && fe.err.kind == ERR_BAD_INPUT && strstr(fe.err.msg, "inputs[1]"), "textclass_too_long_list_names_index", "%s",
        show(r, fe.err.msg));
  json_decref(r);
  const char *ok_forms[] = {"{\"truncation\": true}", "{\"truncation\": \"longest_first\"}", "{\"truncation\": \"only_first\"}"};
  for (int i = 0; i < 3; i++) {
    r = call(tc, in, ok_forms[i], &fe);
    char name[48];
    snprintf(name, sizeof name, "textclass_truncation_form_%d", i);
    check(json_is_array(r) && json_array_size(r) == 2, name, "%s: %s", ok_forms[i], show(r, fe.err.msg));
    json_decref(r);
  }
  r = call(tc, in, "{\"truncation\": \"do_not_truncate\"}", &fe);
  check(!r && fe.err.kind == ERR_BAD_INPUT, "textclass_do_not_truncate", "%s", show(r, fe.err.msg));
  json_decref(r);
  /* A text that fits is the same with truncation on. */
  const char *t3 = fit;
  a = textclass_run(tc, &t3, 1, 0, 2, TEXTCLASS_FN_DEFAULT, 1, &fe);
  b = textclass_run(tc, &t3, 1, 0, 2, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(a && b && json_equal(a, b), "textclass_truncation_of_a_fitting_text", "%s", show(a, fe.err.msg));
  json_decref(a); json_decref(b);
  textclass_free(tc);
}

static void test_refusals(void) {
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, NULL, 0);
  if (!tc) { check(0, "textclass_setup_refusals", "no pipeline"); return; }
  struct { const char *in, *params; ErrKind kind; const char *needle; } cases[] = {
    {"3", NULL, ERR_INVALID, "inputs"},
    {"null", NULL, ERR_INVALID, "inputs"},
    {"{\"text_pair\": \"a\"}", NULL, ERR_INVALID, "inputs: a dict input needs \"text\""},
    {"{\"text\": 3}", NULL, ERR_INVALID, "inputs.text: expected a string, got a number"},
    {"{\"text\": \"a\", \"pair\": \"b\"}", NULL, ERR_INVALID, "inputs: unknown key 'pair' (text, text_pair)"},
    {"[\"a\", {\"text\": \"b\", \"text_pair\": null}]", NULL, ERR_INVALID, "inputs[1].text_pair: expected a string, got null"},
    {"{\"text\": \"a\", \"text_pair\": \"b\"}", "{\"truncation\": \"only_third\"}", ERR_INVALID, "truncation"},
    {"[\"a\", 3]", NULL, ERR_INVALID, "inputs[1]"},
    {"[[\"a\"]]", NULL, ERR_INVALID, "inputs[0]"},
    {"\"a\"", "[1]", ERR_INVALID, "parameters"},
    {"\"a\"", "\"top_k\"", ERR_INVALID, "parameters"},
    {"\"a\"", "{\"top_k\": 0}", ERR_INVALID, "top_k"},
    {"\"a\"", "{\"top_k\": -1}", ERR_INVALID, "top_k"},
    {"\"a\"", "{\"top_k\": \"3\"}", ERR_INVALID, "top_k"},
    {"\"a\"", "{\"top_k\": 1.5}", ERR_INVALID, "top_k"},
    {"\"a\"", "{\"top_k\": true}", ERR_INVALID, "top_k"},
    {"\"a\"", "{\"function_to_apply\": \"softmaxx\"}", ERR_INVALID, "function_to_apply"},
    {"\"a\"", "{\"function_to_apply\": 1}", ERR_INVALID, "function_to_apply"},
    {"\"a\"", "{\"function_to_apply\": \"\"}", ERR_INVALID, "function_to_apply"},
    {"\"a\"", "{\"truncation\": 3}", ERR_INVALID, "truncation"},
    {"\"a\"", "{\"truncation\": \"yes\"}", ERR_INVALID, "truncation"},
    {"\"a\"", "{\"targets\": [\"a\"]}", ERR_INVALID, "targets"},
    {"\"a\"", "{\"padding\": true}", ERR_INVALID, "padding"},
  };
  int bad = 0;
  char first[2600] = "";
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FillMaskError fe = {0};
    json_t *r = call(tc, cases[i].in, cases[i].params, &fe);
    if (r || fe.err.kind != cases[i].kind || !strstr(fe.err.msg, cases[i].needle)) {
      if (!bad++)
        snprintf(first, sizeof first, "%s / %s: %s (%s)", cases[i].in, cases[i].params ? cases[i].params : "-",
                 show(r, fe.err.msg), err_kind_name(fe.err.kind));
    }
    json_decref(r);
  }
  check(bad == 0, "textclass_refusals_json", "%d wrong (first: %s)", bad, first);

  /* Not UTF-8 (the C form: JSON strings always are). */
  FillMaskError fe = {0};
  const char *bin[] = {"the \xff cat"};
  json_t *r = textclass_run(tc, bin, 1, 0, TEXTCLASS_TOP_K_LEGACY, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(!r && fe.err.kind == ERR_BAD_INPUT && strstr(fe.err.msg, "UTF-8"), "textclass_not_utf8", "%s (%s)",
        show(r, fe.err.msg), err_kind_name(fe.err.kind));
  json_decref(r);
  const char *two[] = {"a", "b"};
  r = textclass_run(tc, two, 2, 0, TEXTCLASS_TOP_K_LEGACY, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(!r && fe.err.kind == ERR_INVALID, "textclass_single_must_be_one", "%s", show(r, fe.err.msg));
  r = textclass_run(tc, two, 1, 0, -7, TEXTCLASS_FN_DEFAULT, 0, &fe);
  check(!r && fe.err.kind == ERR_INVALID, "textclass_c_top_k_refused", "%s", show(r, fe.err.msg));
  /* An empty text is [CLS] [SEP]: answered. */
  json_t *em = call(tc, "\"\"", NULL, &fe);
  check(json_is_array(em) && json_array_size(em) == 1, "textclass_empty_text", "%s", show(em, fe.err.msg));
  json_decref(em);
  textclass_free(tc);

  /* Each pipeline refuses the other's model. */
  Err err = {0};
  ModelConfig c = fixture_tiny(NP);
  Model *mlm = model_new(&c, &err);
  TextClass *no = mlm ? textclass_new(mlm, make_tok(), NULL, 1, &err) : NULL;
  check(!no && err.kind == ERR_BAD_INPUT && strstr(err.msg, "fill-mask model"), "textclass_refuses_masked_lm", "%s (%s)",
        err.msg, err_kind_name(err.kind));
  textclass_free(no);
  memset(&err, 0, sizeof err);
  FillMask *fm = fillmask_new(make_model(MODEL_SINGLE_LABEL, 1.0f), make_tok(), NULL, 1, &err);
  check(!fm && err.kind == ERR_BAD_INPUT && strstr(err.msg, "text classifier"), "fillmask_refuses_classifier", "%s (%s)",
        err.msg, err_kind_name(err.kind));
  fillmask_free(fm);
}

static void test_limits(void) {
  TextClassLimits lim = {.max_inputs = 3, .max_tokens = 12};
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &lim, 0);
  if (!tc) { check(0, "textclass_setup_limits", "no pipeline"); return; }
  FillMaskError fe = {0};
  /* "a cat" is 4 tokens with [CLS]/[SEP]: three of them are 12. */
  json_t *r = call(tc, "[\"a cat\", \"a cat\", \"a cat\"]", NULL, &fe);
  check(json_is_array(r) && json_array_size(r) == 3, "textclass_limits_at_value", "%s", show(r, fe.err.msg));
  json_decref(r);
  r = call(tc, "[\"a cat\", \"a cat\", \"a cat\", \"a\"]", NULL, &fe);
  check(!r && fe.err.kind == ERR_TOO_LARGE && fe.limit && !strcmp(fe.limit, "max_inputs") && fe.max == 3 && fe.got == 4,
        "textclass_max_inputs", "%s (%s)", show(r, fe.err.msg), fe.limit ? fe.limit : "-");
  json_decref(r);
  r = call(tc, "[\"a cat\", \"a cat\", \"a cat mat\"]", NULL, &fe);
  check(!r && fe.err.kind == ERR_TOO_LARGE && fe.limit && !strcmp(fe.limit, "max_tokens") && fe.max == 12 && fe.got == 13,
        "textclass_max_tokens", "%s (%s)", show(r, fe.err.msg), fe.limit ? fe.limit : "-");
  json_decref(r);
  const TextClassLimits *l = textclass_limits(tc);
  check(l->max_inputs == 3 && l->max_tokens == 12, "textclass_limits_kept", "%d %d", l->max_inputs, l->max_tokens);
  textclass_free(tc);
  TextClassOptions o;
  textclass_options_default(&o);
  check(o.limits.max_inputs == TEXTCLASS_DEFAULT_MAX_INPUTS && o.limits.max_tokens == TEXTCLASS_DEFAULT_MAX_TOKENS &&
        o.max_batch == 32 && o.weights == MODEL_FP32, "textclass_options_default", "wrong defaults");
}

static void test_batching(void) {
  TextClassLimits none = {0};
  /* Passes of at most 2 inputs, so a request spans several passes. */
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &none, 2);
  if (!tc) { check(0, "textclass_setup_batch", "no pipeline"); return; }
  const char *texts[] = {"the cat sat on the mat .", "a dog", "the big cat was on a mat , a big dog sat", "x", "caf\xc3\xa9 ."};
  enum { N = 5 };
  json_t *alone[N];
  FillMaskError fe = {0};
  for (int i = 0; i < N; i++) alone[i] = textclass_run(tc, &texts[i], 1, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe);
  /* One list request. */
  json_t *list = textclass_run(tc, texts, N, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe);
  int ok = json_is_array(list) && json_array_size(list) == N;
  for (int i = 0; ok && i < N; i++) ok = alone[i] && json_equal(json_array_get(list, (size_t)i), json_array_get(alone[i], 0));
  check(ok, "textclass_list_equals_alone", "%s", show(list, fe.err.msg));
  json_decref(list);
  /* Several requests answered together (bits equal: logits, none applied). */
  TextClassRequest *reqs[N];
  json_t *res[N];
  FillMaskError errs[N];
  for (int i = 0; i < N; i++)
    reqs[i] = textclass_prepare_texts(tc, &texts[N - 1 - i], 1, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe);
  textclass_answer(tc, reqs, N, res, errs);
  ok = 1;
  for (int i = 0; i < N; i++) {
    ok = ok && res[i] && json_equal(res[i], alone[N - 1 - i]) && reqs[i] && textclass_request_tokens(reqs[i]) > 0;
    json_decref(res[i]);
    textclass_request_free(reqs[i]);
  }
  check(ok, "textclass_requests_together_equal_alone", "differ");
  /* A larger batch size, one pass: the same. */
  textclass_free(tc);
  tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &none, 0);
  list = tc ? textclass_run(tc, texts, N, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe) : NULL;
  ok = json_is_array(list) && json_array_size(list) == N;
  for (int i = 0; ok && i < N; i++) ok = json_equal(json_array_get(list, (size_t)i), json_array_get(alone[i], 0));
  check(ok, "textclass_one_pass_equals_alone", "%s", show(list, fe.err.msg));
  json_decref(list);
  for (int i = 0; i < N; i++) json_decref(alone[i]);
  textclass_free(tc);
}

/* ---- random requests: never a crash, always an answer or a refusal of a request kind ---- */

static unsigned rnd_state = 12345;
static unsigned rnd(unsigned n) { rnd_state = rnd_state * 1103515245u + 12345u; return (rnd_state >> 8) % n; }

static json_t *rnd_text(void) {
  static const char *words[] = {"the", "cat", "sat", "mat", ".", "caf\xc3\xa9", "\xe6\x9d\xb1", "[MASK]", "[CLS]", "<pad>",
                                "\xf0\x9f\x98\x80", " ", "\t", "x", ""};
  char buf[400];
  size_t k = 0;
  int n = (int)rnd(30);
  buf[0] = 0;
  for (int i = 0; i < n && k + 12 < sizeof buf; i++)
    k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? " " : "", words[rnd(sizeof words / sizeof words[0])]);
  return json_string(buf);
}

static json_t *rnd_value(int depth) {
  switch (rnd(depth > 1 ? 7 : 9)) {
    case 0: return json_null();
    case 1: return json_boolean(rnd(2));
    case 2: return json_integer((json_int_t)rnd(12) - 3);
    case 3: return json_real(rnd(5) * 0.7 - 1);
    case 4: case 5: case 6: return rnd_text();
    case 7: {
      json_t *a = json_array();
      for (int i = (int)rnd(5); i > 0; i--) json_array_append_new(a, rnd(4) ? rnd_text() : rnd_value(depth + 1));
      return a;
    }
    default: {
      json_t *o = json_object();
      json_object_set_new(o, "k", rnd_value(depth + 1));
      return o;
    }
  }
}

static json_t *rnd_params(void) {
  if (rnd(6) == 0) return rnd_value(1);
  json_t *p = json_object();
  static const char *fns[] = {"softmax", "SIGMOID", "none", "None", "relu", ""};
  if (rnd(2)) json_object_set_new(p, "top_k", rnd(3) ? json_integer((json_int_t)rnd(9) - 1) : rnd_value(1));
  if (rnd(2)) json_object_set_new(p, "function_to_apply", rnd(4) ? json_string(fns[rnd(6)]) : rnd_value(1));
  if (rnd(2)) json_object_set_new(p, "truncation", rnd(3) ? json_boolean(rnd(2)) : rnd_value(1));
  if (rnd(8) == 0) json_object_set_new(p, "other", json_null());
  return p;
}

static void test_random_requests(void) {
  TextClassLimits lim = {.max_inputs = 4, .max_tokens = 60};
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &lim, 3);
  if (!tc) { check(0, "textclass_setup_random", "no pipeline"); return; }
  int answered = 0, refused = 0, bad = 0;
  char first[800] = "";
  for (int i = 0; i < 3000; i++) {
    json_t *in = rnd(5) ? rnd_value(0) : rnd_text(), *pa = rnd(4) ? rnd_params() : NULL;
    FillMaskError fe;
    memset(&fe, 0x5a, sizeof fe);   /* every field must be set by the call */
    json_t *r = textclass_call(tc, in, pa, &fe);
    char *text = r ? fillmask_dumps(r, 0, 0) : NULL;
    int ok = r ? fe.err.kind == ERR_NONE && text != NULL
               : (fe.err.kind == ERR_INVALID || fe.err.kind == ERR_BAD_INPUT || fe.err.kind == ERR_TOO_LARGE) &&
                 fe.err.msg[0] && memchr(fe.err.msg, 0, sizeof fe.err.msg) && !strchr(fe.err.msg, '\n');
    if (r) answered++; else refused++;
    if (!ok && !bad++) {
      char *a = json_dumps(in, JSON_ENCODE_ANY), *b = pa ? json_dumps(pa, JSON_ENCODE_ANY) : NULL;
      snprintf(first, sizeof first, "%s / %s -> %s (%d)", a, b ? b : "-", r ? "answer" : fe.err.msg, (int)fe.err.kind);
      free(a); free(b);
    }
    free(text);
    json_decref(r); json_decref(in); json_decref(pa);
  }
  check(bad == 0 && answered > 200 && refused > 200, "textclass_random_requests", "%d bad of %d answered, %d refused (first: %s)",
        bad, answered, refused, first);
  textclass_free(tc);
}

/* Pushes m (its config, weights) and t as a revision of name. */
static int push(Store *s, const char *name, Model *m, const Tokenizer *t, Err *err) {
  char *cfg = config_to_json(model_config(m)), *tj = tokenizer_to_json(t, err);
  unsigned char *wb = NULL;
  size_t wl = 0;
  int rc = -1;
  if (cfg && tj && !ckpt_weights_bytes(m, 0, &wb, &wl, err)) {
    StorePush p = {.message = "test", .config_json = cfg, .weights = wb, .weights_len = wl, .tokenizer_json = tj};
    StoreRevision r;
    rc = store_push(s, name, &p, &r, err);
  }
  free(cfg); free(tj); free(wb);
  return rc;
}

static void test_loading(void) {
  char dir[256], path[700];
  if (fixture_tmpdir(dir, sizeof dir, "maskd_textclass")) { check(0, "textclass_load_setup", "cannot make %s", dir); return; }
  TextClassLimits none = {0};
  TextClass *tc = make_pipeline(MODEL_SINGLE_LABEL, 15.0f, &none, 0);
  Tokenizer *t = make_tok();
  Err err = {0};
  FillMaskError fe = {0};
  if (!tc || !t) { check(0, "textclass_load_setup", "no pipeline"); textclass_free(tc); tokenizer_free(t); return; }
  const char *texts[] = {"the cat sat on the mat .", "a dog", "caf\xc3\xa9"};
  json_t *want = textclass_run(tc, texts, 3, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe);

  /* An HF folder: config.json, model.safetensors, tokenizer.json. */
  char folder[300];
  snprintf(folder, sizeof folder, "%s/cls", dir);
  snprintf(path, sizeof path, "%s/tokenizer.json", folder);
  int ok = !ckpt_save_model(textclass_model(tc), folder, 0, &err) && !tokenizer_save(t, path, &err);
  TextClass *fromdir = ok ? textclass_load_dir(folder, NULL, &err) : NULL;
  json_t *got = fromdir ? textclass_run(fromdir, texts, 3, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe) : NULL;
  check(want && got && json_equal(want, got), "textclass_load_dir_same_answers", "%s / %s", err.msg, show(got, fe.err.msg));
  json_decref(got);
  textclass_free(fromdir);

  /* A store with a classifier's revision and a masked LM's. */
  snprintf(path, sizeof path, "%s/hub.db", dir);
  Store *s = store_open(path, &err);
  ModelConfig c = fixture_tiny(NP);
  Model *mlm = model_new(&c, &err);
  if (mlm) model_init_weights(mlm, 3);
  ok = s && mlm && !push(s, "cls", textclass_model(tc), t, &err) && !push(s, "mlm", mlm, t, &err);
  check(ok, "textclass_store_setup", "%s", err.msg);
  TextClass *fromstore = ok ? store_load_textclass(s, "cls", NULL, &err) : NULL;
  got = fromstore ? textclass_run(fromstore, texts, 3, 1, TEXTCLASS_TOP_K_ALL, TEXTCLASS_FN_NONE, 0, &fe) : NULL;
  check(want && got && json_equal(want, got), "textclass_store_load_same_answers", "%s / %s", err.msg, show(got, fe.err.msg));
  json_decref(got);
  textclass_free(fromstore);
  if (s) {
    StoreRevision r;
    ModelConfig rc;
    memset(&err, 0, sizeof err);
    check(!store_load_config(s, "cls", &r, &rc, &err) && rc.task == MODEL_TASK_SEQ_CLS && rc.num_labels == NL &&
          !strcmp(r.model, "cls"), "textclass_store_load_config", "%s", err.msg);
    memset(&err, 0, sizeof err);
    TextClass *no = store_load_textclass(s, "mlm@main", NULL, &err);
    check(!no && err.kind == ERR_BAD_INPUT && strstr(err.msg, "is a fill-mask model"), "textclass_store_refuses_masked_lm",
          "%s (%s)", err.msg, err_kind_name(err.kind));
    textclass_free(no);
    memset(&err, 0, sizeof err);
    FillMask *fm = store_load_fillmask(s, "cls", NULL, &err);
    check(!fm && err.kind == ERR_BAD_INPUT && strstr(err.msg, "is a text-classification model"),
          "fillmask_store_refuses_classifier", "%s (%s)", err.msg, err_kind_name(err.kind));
    fillmask_free(fm);
    memset(&err, 0, sizeof err);
    fm = store_load_fillmask(s, "mlm", NULL, &err);
    check(fm != NULL, "fillmask_store_loads_masked_lm", "%s", err.msg);
    fillmask_free(fm);
    memset(&err, 0, sizeof err);
    no = store_load_textclass(s, "nosuch", NULL, &err);
    check(!no && err.kind == ERR_NOT_FOUND, "textclass_store_unknown_model", "%s (%s)", err.msg, err_kind_name(err.kind));
  }
  store_close(s);
  model_free(mlm);
  json_decref(want);
  tokenizer_free(t);
  textclass_free(tc);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd)) printf("could not remove %s\n", dir);
}

int main(void) {
  test_numpy();
  test_shapes();
  test_default_and_ties();
  test_truncation();
  test_refusals();
  test_limits();
  test_batching();
  test_loading();
  test_random_requests();
  return check_exit();
}
