/* Unit tests of engine/fillmask: Python's float repr and json.dumps layout
** against /usr/bin/python3 itself, and the pipeline on a tiny model: result
** shapes and key order, scores against a direct softmax of the model's logits,
** batching invariance, list unwrapping, targets, clean-up, every refusal, the
** limits (each at its value and one past it; answer bytes exact), one refusal kind
** per problem whatever the input's form, several requests answered together, and a
** model whose weights give NaN or infinite logits refused as such.
** (Parity with transformers' pipeline is tests/cli/test_fillmask_ref.sh.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/nn/config.h"
#include "engine/infer/fillmask.h"
#include "engine/nn/model.h"
#include "engine/tok/tokenizer.h"
#include "tests/unit/check.h"
#include "tests/unit/fixtures.h"

/* ---- Python's repr ---- */

static void test_repr(void) {
  /* Python writes float32 values (as the pipeline's scores are) and plain doubles
  ** across magnitudes, with their repr; we read the exact value as a hex float. */
  const char *prog =
    "import random, struct\n"
    "r = random.Random(7)\n"
    "vals = [0.0, -0.0, 1.0, 0.5, 0.1, 1e-4, 1e-5, 9.999e-5, 1e16, 1e17, 123456789012345678.0, 2.0**-30, 2.0**-70,\n"
    "        5e-324, 1.7976931348623157e308, 2.0**60, 0.30000000000000004, 1/3]\n"
    "for i in range(4000):\n"
    "    x = r.random() * 10.0 ** r.randint(-12, 3)\n"
    "    vals.append(struct.unpack('f', struct.pack('f', x))[0] if i % 2 == 0 else x)\n"
    "for k in range(-40, 60):\n"
    "    vals.append(2.0 ** k)\n"
    "    vals.append(struct.unpack('f', struct.pack('f', 2.0 ** k * 1.0000001))[0])\n"
    "for v in vals:\n"
    "    print(v.hex(), repr(v))\n";
  FILE *f = fopen("/tmp/maskd_fillmask_repr.py", "w");
  if (!f) { check(0, "fillmask_repr_python", "cannot write the script"); return; }
  fputs(prog, f);
  fclose(f);
  FILE *p = popen("/usr/bin/python3 /tmp/maskd_fillmask_repr.py", "r");
  if (!p) { check(0, "fillmask_repr_python", "cannot run /usr/bin/python3"); return; }
  char hex[128], want[128], got[64], first_bad[400] = "";
  int n = 0, bad = 0;
  while (fscanf(p, "%127s %127s", hex, want) == 2) {
    double x = strtod(hex, NULL);
    fillmask_repr_double(x, got);
    if (strcmp(got, want)) { if (!bad++) snprintf(first_bad, sizeof first_bad, "%s: python %s, ours %s", hex, want, got); }
    n++;
  }
  pclose(p);
  remove("/tmp/maskd_fillmask_repr.py");
  check(n > 4000 && bad == 0, "fillmask_repr_matches_python", "%d of %d differ (first: %s)", bad, n, first_bad);
}

/* ---- json.dumps layout ---- */

static int python_dumps(const char *json_in, const char *args, char *out, size_t cap) {
  FILE *f = fopen("/tmp/maskd_fillmask_dumps.json", "w");
  if (!f) return -1;
  fputs(json_in, f);
  fclose(f);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import json,sys; sys.stdout.write(json.dumps(json.load(open(\"/tmp/maskd_fillmask_dumps.json\"))%s))'",
           args);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int rc = pclose(p);
  remove("/tmp/maskd_fillmask_dumps.json");
  return rc == 0 ? 0 : -1;
}

static void test_dumps(void) {
  json_t *v = json_loads("[{\"score\": 0.10031872987747192, \"token\": 52, \"token_str\": \"caf\u00e9 \\\"q\\\" \\\\ /\","
                         " \"sequence\": \"tab\\there\\nnew \\u0001 \\u007f \u6771\u4eac \\ud83d\\ude00\"},"
                         " [], {}, [[1, 2.5e-07, 1e16, 123.0, -0.0, true, false, null]], \"\u201cquoted\u201d\", {\"k\u00e9y\": [\"v\"]}]",
                         0, NULL);
  if (!v) { check(0, "fillmask_dumps_setup", "bad test JSON"); return; }
  char *in = json_dumps(v, JSON_PRESERVE_ORDER);
  static char want[8192];
  struct { int indent, ascii; const char *args; } cases[] = {
    {0, 1, ""}, {0, 0, ", ensure_ascii=False"}, {2, 1, ", indent=2"}, {4, 0, ", indent=4, ensure_ascii=False"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = fillmask_dumps(v, cases[i].indent, cases[i].ascii);
    int ok = python_dumps(in, cases[i].args, want, sizeof want) == 0 && got && !strcmp(got, want);
    char name[64];
    snprintf(name, sizeof name, "fillmask_dumps_as_python_%zu", i);
    check(ok, name, "json.dumps(%s):\n%s\nours:\n%s", cases[i].args, want, got ? got : "(null)");
    free(got);
  }
  free(in);
  json_decref(v);
}

/* ---- the pipeline on a tiny model ---- */

#define SP "\xe2\x96\x81"   /* the Metaspace replacement */

static const char *pieces[] = {
  "[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", "\xe2\x96\x81", SP "the", SP "a", SP "cat",
  SP "sat", SP "on", SP "mat", ".", ",", "s", "e", "t", "a", "c", "h", "o", "n", "m",
  SP "dog", SP "caf\xc3\xa9", "x", SP "big", "'", SP "was", "d",
};
#define NP ((int)(sizeof pieces / sizeof pieces[0]))

static Tokenizer *make_tok(int with_mask) {
  const char *p[NP];
  double sc[NP];
  int n = 0;
  for (int i = 0; i < NP; i++) {
    if (!with_mask && i == 4) { p[n] = "[MAZK]"; sc[n++] = 0; continue; }
    p[n] = pieces[i];
    sc[n++] = i < 5 ? 0.0 : -1.0 - 0.1 * i;
  }
  Err err = {0};
  Tokenizer *t = tokenizer_new_seed(n, p, sc, 2, 5, &err);
  if (!t) printf("tokenizer: %s\n", err.msg);
  return t;
}

static Model *make_model(void) {
  ModelConfig c = fixture_tiny(NP);   /* 24 positions, pad 3: inputs of up to 20 tokens */
  Err err = {0};
  Model *m = model_new(&c, &err);
  if (!m) { printf("model: %s\n", err.msg); return NULL; }
  model_init_weights(m, 11);
  /* Spread the weights so that predictions differ clearly. */
  float *w = model_params(m);
  for (size_t i = 0; i < model_num_params(m); i++) w[i] *= 15.0f;
  return m;
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

typedef struct Warns { int n; char last[512]; } Warns;
static void on_warn(void *ctx, const char *msg) {
  Warns *w = ctx;
  w->n++;
  snprintf(w->last, sizeof w->last, "%s", msg);
}

static json_t *run1(FillMask *fm, const char *text, int top_k, FillMaskError *fe) {
  return fillmask_run(fm, &text, 1, 0, top_k, NULL, 0, fe);
}

/* Two results equal in structure, tokens and strings, scores within tol. */
static int same_result(const json_t *a, const json_t *b, double tol) {
  if (json_typeof(a) != json_typeof(b)) return 0;
  if (json_is_array(a)) {
    if (json_array_size(a) != json_array_size(b)) return 0;
    for (size_t i = 0; i < json_array_size(a); i++) if (!same_result(json_array_get(a, i), json_array_get(b, i), tol)) return 0;
    return 1;
  }
  if (json_is_object(a)) {
    const char *k;
    json_t *v;
    if (json_object_size(a) != json_object_size(b)) return 0;
    json_object_foreach((json_t *)a, k, v) if (!same_result(v, json_object_get(b, k), tol)) return 0;
    return 1;
  }
  if (json_is_real(a)) return fabs(json_real_value(a) - json_real_value(b)) <= tol;
  return json_equal((json_t *)a, (json_t *)b);
}

static void test_pipeline(void) {
  Err err = {0};
  FillMaskError fe = {0};
  Model *m = make_model();
  Tokenizer *t = make_tok(1);
  if (!m || !t) { check(0, "fillmask_setup", "no model or tokenizer"); model_free(m); tokenizer_free(t); return; }
  Warns warns = {0};
  FillMaskOptions o;
  fillmask_options_default(&o);
  o.limits = (FillMaskLimits){0};   /* no limits here: test_limits() has them */
  o.warn = on_warn;
  o.warn_ctx = &warns;
  FillMask *fm = fillmask_new(m, t, &o, 1, &err);
  if (!fm) { check(0, "fillmask_new", "%s", err.msg); return; }
  check(fillmask_max_tokens(fm) == 20, "fillmask_max_tokens_roberta", "got %d, want 24 - pad 3 - 1", fillmask_max_tokens(fm));

  /* One mask: a list of top_k objects with HF's keys in HF's order, sorted. */
  const char *text = "the cat sat on the [MASK] .";
  json_t *r = run1(fm, text, 5, &fe);
  int ok = json_is_array(r) && json_array_size(r) == 5;
  const char *keys[] = {"score", "token", "token_str", "sequence"};
  double prev = 2;
  for (size_t i = 0; ok && i < json_array_size(r); i++) {
    json_t *o1 = json_array_get(r, i);
    void *it = json_object_iter(o1);
    for (int k = 0; k < 4; k++, it = json_object_iter_next(o1, it)) ok = ok && it && !strcmp(json_object_iter_key(it), keys[k]);
    double s = json_real_value(json_object_get(o1, "score"));
    ok = ok && s <= prev && s > 0 && (double)(float)s == s;
    prev = s;
    const char *seq = json_string_value(json_object_get(o1, "sequence"));
    ok = ok && seq && !strstr(seq, "[CLS]") && !strstr(seq, "[SEP]") && !strncmp(seq, "the cat sat on the", 18);
  }
  check(ok, "fillmask_single_shape", "%s", show(r, fe.err.msg));

  /* Scores are the softmax of the model's logits at the mask (recomputed here
  ** directly from model_logits_at), and top_k = everything covers the vocabulary. */
  json_t *all = run1(fm, text, 1000, &fe);
  Encoding enc = {0};
  tokenizer_encode(t, text, strlen(text), 1, &enc, &err);
  int mpos = -1;
  for (int i = 0; i < enc.n; i++) if (enc.ids[i] == 4) mpos = i;
  float logits[NP];
  ModelBatch b = {.batch = 1, .seq = enc.n, .input_ids = enc.ids};
  model_plan(m, 1, enc.n, 1, 0, &err);
  int32_t pos = mpos;
  model_logits_at(m, &b, &pos, 1, logits, &err);
  fillmask_forget_plan(fm);
  double mx = -INFINITY, z = 0, maxdiff = 0, sum = 0;
  for (int v = 0; v < NP; v++) mx = fmax(mx, logits[v]);
  for (int v = 0; v < NP; v++) z += exp(logits[v] - mx);
  int seen[NP] = {0};
  ok = json_array_size(all) == NP;
  for (size_t i = 0; ok && i < json_array_size(all); i++) {
    json_t *o1 = json_array_get(all, i);
    int id = (int)json_integer_value(json_object_get(o1, "token"));
    double s = json_real_value(json_object_get(o1, "score"));
    ok = id >= 0 && id < NP && !seen[id];
    if (ok) { seen[id] = 1; maxdiff = fmax(maxdiff, fabs(s - exp(logits[id] - mx) / z)); sum += s; }
  }
  check(ok && maxdiff < 1e-7 && fabs(sum - 1) < 1e-5, "fillmask_scores_are_softmax",
        "%zu candidates, max diff %.3g, sum %.9f", json_array_size(all), maxdiff, sum);
  /* The top-5 are the first five of the full ranking. */
  ok = 1;
  for (size_t i = 0; i < 5; i++) ok = ok && json_equal(json_array_get(r, i), json_array_get(all, i));
  check(ok, "fillmask_top_k_prefix", "top 5 differ from the full ranking's head");
  json_decref(all);
  encoding_free(&enc);

  /* Several masks: one list per mask, specials kept in sequences. */
  json_t *mm = run1(fm, "[MASK] cat sat on the [MASK] .", 3, &fe);
  ok = json_is_array(mm) && json_array_size(mm) == 2 && json_array_size(json_array_get(mm, 0)) == 3;
  const char *s0 = ok ? json_string_value(json_object_get(json_array_get(json_array_get(mm, 1), 0), "sequence")) : NULL;
  check(ok && s0 && strstr(s0, "[CLS]") && strstr(s0, "[MASK]") && strstr(s0, "[SEP]"), "fillmask_multi_mask",
        "%s", show(mm, fe.err.msg));

  /* A batch answers what each input alone answers (padding changes nothing). */
  const char *texts[] = {"the [MASK] .", text, "[MASK] cat sat on the [MASK] .", "a big dog was on a [MASK] mat , the cat sat"};
  json_t *batch = fillmask_run(fm, texts, 4, 1, 4, NULL, 0, &fe);
  ok = json_is_array(batch) && json_array_size(batch) == 4;
  for (int i = 0; ok && i < 4; i++) {
    json_t *one = run1(fm, texts[i], 4, &fe);
    ok = one && same_result(one, json_array_get(batch, i), 1e-5);
    if (!ok) {
      char *x = fillmask_dumps(one, 0, 0), *y = fillmask_dumps(json_array_get(batch, i), 0, 0);
      printf("input %d alone: %.300s\nin the batch: %.300s\n", i, x ? x : fe.err.msg, y ? y : "");
      free(x); free(y);
    }
    json_decref(one);
  }
  check(ok, "fillmask_batch_equals_single", "%s", batch ? "a result differs" : fe.err.msg);
  FillMaskOptions o1 = o;
  o1.max_batch = 1;
  FillMask *fm1 = fillmask_new(m, t, &o1, 0, &err);
  json_t *batch1 = fm1 ? fillmask_run(fm1, texts, 4, 1, 4, NULL, 0, &fe) : NULL;
  check(batch1 && same_result(batch, batch1, 1e-5), "fillmask_max_batch_1", "%s", fe.err.msg);
  json_decref(batch1);
  fillmask_free(fm1);
  fillmask_forget_plan(fm);   /* fm1 planned the shared model */
  json_decref(batch);

  /* A list of one is unwrapped (FillMaskPipeline.__call__); an empty list gives []. */
  json_t *l1 = fillmask_run(fm, &text, 1, 1, 5, NULL, 0, &fe);
  check(l1 && json_equal(l1, r), "fillmask_list_of_one_unwrapped", "%s", fe.err.msg);
  json_decref(l1);
  json_t *l0 = fillmask_run(fm, texts, 0, 1, 5, NULL, 0, &fe);
  check(json_is_array(l0) && json_array_size(l0) == 0, "fillmask_empty_list", "%s", fe.err.msg);
  json_decref(l0);

  /* Targets: "the" is not a piece, encodes to ▁the (warned), duplicates merge; top_k capped. */
  const char *tg[] = {SP "the", "the", SP "the", SP "cat"};
  warns.n = 0;
  json_t *tr = fillmask_run(fm, &text, 1, 0, 5, tg, 4, &fe);
  ok = json_is_array(tr) && json_array_size(tr) == 2 && warns.n == 1 && strstr(warns.last, "Replacing with `\xe2\x96\x81the`");
  for (size_t i = 0; ok && i < 2; i++) {
    int id = (int)json_integer_value(json_object_get(json_array_get(tr, i), "token"));
    ok = id == 6 || id == 8;
  }
  check(ok, "fillmask_targets", "%s (warnings %d: %s)", show(tr, fe.err.msg), warns.n, warns.last);
  json_decref(tr);

  /* Clean-up of tokenization spaces follows the option. */
  json_t *c1 = run1(fm, "the cat , [MASK] .", 1, &fe);
  o1 = o;
  o1.clean_up_spaces = 0;
  fm1 = fillmask_new(m, t, &o1, 0, &err);
  json_t *c0 = fm1 ? run1(fm1, "the cat , [MASK] .", 1, &fe) : NULL;
  const char *q1 = json_string_value(json_object_get(json_array_get(c1, 0), "sequence"));
  const char *q0 = json_string_value(json_object_get(json_array_get(c0, 0), "sequence"));
  check(q1 && q0 && !strncmp(q1, "the cat,", 8) && !strncmp(q0, "the cat ,", 9), "fillmask_clean_up_option",
        "clean %s / raw %s", q1 ? q1 : "-", q0 ? q0 : "-");
  json_decref(c1); json_decref(c0);
  fillmask_free(fm1);
  fillmask_forget_plan(fm);

  /* Refusals. */
  struct { const char *name, *want; json_t *res; } refusals[8];
  int nr = 0;
#define REFUSE(nm, w, call) do { fe.err.msg[0] = 0; refusals[nr].name = nm; refusals[nr].want = w; refusals[nr].res = (call); \
    check(!refusals[nr].res && strstr(fe.err.msg, w), nm, "got %s / '%s'", refusals[nr].res ? "a result" : "NULL", fe.err.msg); \
    json_decref(refusals[nr].res); } while (0)
  REFUSE("fillmask_refuse_no_mask", "No mask_token ([MASK]) found on the input", run1(fm, "the cat sat .", 5, &fe));
  REFUSE("fillmask_refuse_top_k_0", "top_k", run1(fm, text, 0, &fe));
  const char *empty_t[] = {""};
  REFUSE("fillmask_refuse_no_targets_left", "At least one target must be provided when passed.",
         fillmask_run(fm, &text, 1, 0, 5, empty_t, 1, &fe));
  REFUSE("fillmask_refuse_too_long", "longer than the model's maximum of 20 positions",
         run1(fm, "the cat sat on the mat the cat sat on the mat the cat sat on the mat [MASK]", 5, &fe));
  REFUSE("fillmask_refuse_bad_utf8", "UTF-8", run1(fm, "caf\xc3 [MASK]", 5, &fe));
  const char *lst[] = {"one [MASK]", "none"};
  REFUSE("fillmask_refuse_no_mask_in_list", "No mask_token", fillmask_run(fm, lst, 2, 1, 5, NULL, 0, &fe));
  (void)nr;

  /* The Inference-API form: types checked and named. */
  struct { const char *inputs, *params, *want; } calls[] = {
    {"5", "null", "inputs: expected a string or a list of strings"},
    {"[\"a [MASK]\", 1]", "null", "inputs[1]: expected a string"},
    {"\"a [MASK]\"", "{\"top_k\": \"3\"}", "parameters.top_k: expected a positive integer"},
    {"\"a [MASK]\"", "{\"top_k\": 2.0}", "parameters.top_k: expected a positive integer"},
    {"\"a [MASK]\"", "{\"top_k\": 0}", "parameters.top_k: expected a positive integer"},
    {"\"a [MASK]\"", "{\"targets\": 5}", "parameters.targets: expected a string or a list of strings"},
    {"\"a [MASK]\"", "{\"targets\": [\"x\", 1]}", "parameters.targets[1]: expected a string"},
    {"\"a [MASK]\"", "{\"topk\": 3}", "parameters: unknown parameter 'topk'"},
    {"\"a [MASK]\"", "[1]", "parameters: expected an object"},
    {"\"a [MASK]\"", "{\"targets\": []}", "At least one target must be provided when passed."},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    json_t *in = json_loads(calls[i].inputs, JSON_DECODE_ANY, NULL), *pa = json_loads(calls[i].params, JSON_DECODE_ANY, NULL);
    fe.err.msg[0] = 0;
    json_t *res = fillmask_call(fm, in, pa, &fe);
    char name[64];
    snprintf(name, sizeof name, "fillmask_call_refuses_%zu", i);
    check(!res && strstr(fe.err.msg, calls[i].want), name, "%s %s: got '%s', want '%s'", calls[i].inputs, calls[i].params,
          fe.err.msg, calls[i].want);
    json_decref(res); json_decref(in); json_decref(pa);
  }
  json_t *in = json_loads("[\"the [MASK] .\", \"a [MASK]\"]", 0, NULL), *pa = json_loads("{\"top_k\": 2, \"targets\": \"\xe2\x96\x81" "cat\"}", 0, NULL);
  json_t *res = fillmask_call(fm, in, pa, &fe);
  check(json_is_array(res) && json_array_size(res) == 2 && json_array_size(json_array_get(res, 0)) == 1 &&
        json_integer_value(json_object_get(json_array_get(json_array_get(res, 0), 0), "token")) == 8,
        "fillmask_call_list_targets_string", "%s", show(res, fe.err.msg));
  json_decref(res); json_decref(in); json_decref(pa);
  json_decref(mm);
  json_decref(r);
  fillmask_free(fm);

  /* A tokenizer without the mask token cannot make a pipeline. */
  Tokenizer *t2 = make_tok(0);
  Model *m2 = make_model();
  FillMask *bad = fillmask_new(m2, t2, NULL, 1, &err);
  check(!bad && strstr(err.msg, "The tokenizer does not define a `mask_token`."), "fillmask_refuse_no_mask_token",
        "%s", err.msg);
  fillmask_free(bad);
  bad = fillmask_load_dir("/nonexistent/dir", NULL, &err);
  check(!bad && strstr(err.msg, "/nonexistent/dir"), "fillmask_load_dir_missing", "%s", err.msg);
}

/* ---- a model whose numbers are not finite ---- */

/* A pipeline over the tiny model with value v at element at of the tensor whose name
** ends with suffix. */
static FillMask *poisoned(const char *suffix, size_t at, float v) {
  Model *m = make_model();
  Tokenizer *t = make_tok(1);
  if (!m || !t) { model_free(m); tokenizer_free(t); return NULL; }
  for (int i = 0; i < model_tensor_count(m); i++) {
    const ModelTensor *mt = model_tensor(m, i);
    size_t n = strlen(mt->name), k = strlen(suffix);
    if (n >= k && !strcmp(mt->name + n - k, suffix)) model_params(m)[mt->offset + at] = v;
  }
  Err err = {0};
  FillMaskOptions o;
  fillmask_options_default(&o);
  o.limits = (FillMaskLimits){0};
  FillMask *fm = fillmask_new(m, t, &o, 1, &err);
  if (!fm) printf("fillmask_new: %s\n", err.msg);
  return fm;
}

/* A NaN weight (an imported checkpoint's, a diverged run's) or an infinite bias gives
** no score: refused as what it is, not as text that is not UTF-8 (json_real(NaN)
** failing was reported so), on one text and on texts of different lengths (padded:
** the pad embedding's NaN through every layer, which UBSan stopped in fast_expf). */
static void test_non_finite(void) {
  static const struct { const char *suffix; size_t at; float v; const char *name; } cases[] = {
    {"word_embeddings.weight", 25 * 16 + 3, NAN, "fillmask_nan_weight_refused"},          /* the row of "x", not in the text */
    {"word_embeddings.weight", 3 * 16 + 5, NAN, "fillmask_nan_pad_embedding_refused"},    /* pad 3: the padded batch */
    {"lm_head.bias", 9, INFINITY, "fillmask_infinite_bias_refused"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    FillMask *fm = poisoned(cases[i].suffix, cases[i].at, cases[i].v);
    if (!fm) { check(0, cases[i].name, "no pipeline"); continue; }
    const char *texts[2] = {"the cat sat on the [MASK] .", "a [MASK]"};
    FillMaskError fe = {0};
    json_t *r = fillmask_run(fm, texts, i == 1 ? 2 : 1, i == 1, 3, NULL, 0, &fe);
    check(!r && fe.err.kind == ERR_INTERNAL && strstr(fe.err.msg, "fill-mask: the model's score for token ") &&
              strstr(fe.err.msg, "is not finite"),
          cases[i].name, "%s", show(r, fe.err.msg));
    json_decref(r);
    fillmask_free(fm);
  }
}

/* ---- limits, typed refusals, several requests in one answer ---- */

static int n_tokens(Tokenizer *t, const char *text) {
  Encoding enc = {0};
  Err err = {0};
  int n = tokenizer_encode(t, text, strlen(text), 1, &enc, &err) ? -1 : enc.n;
  encoding_free(&enc);
  return n;
}

/* A pipeline over m and t (not owned) with these limits. */
static FillMask *limited(Model *m, Tokenizer *t, FillMaskLimits l) {
  FillMaskOptions o;
  fillmask_options_default(&o);
  o.limits = l;
  Err err = {0};
  FillMask *fm = fillmask_new(m, t, &o, 0, &err);
  if (!fm) printf("fillmask_new: %s\n", err.msg);
  return fm;
}

/* texts as one request under limits l: 1 when answered, 0 when refused for limit
** (with max and got as expected; got < 0: any), -1 for anything else. */
static int under(Model *m, Tokenizer *t, FillMaskLimits l, const char *const *texts, int n, int is_list, int top_k,
                 const char *limit, long long max, long long got, char *why, size_t cap) {
  FillMask *fm = limited(m, t, l);
  FillMaskError fe = {0};
  json_t *r = fm ? fillmask_run(fm, texts, n, is_list, top_k, NULL, 0, &fe) : NULL;
  int res = -1;
  if (r) res = 1;
  else if (fe.err.kind == ERR_TOO_LARGE && fe.limit && !strcmp(fe.limit, limit) && fe.max == max &&
           (got < 0 || fe.got == got) && strstr(fe.err.msg, limit))
    res = 0;
  snprintf(why, cap, "%s (kind %d, limit %s, max %lld, got %lld)", r ? "answered" : fe.err.msg, (int)fe.err.kind,
           fe.limit ? fe.limit : "-", fe.max, fe.got);
  json_decref(r);
  fillmask_free(fm);
  return res;
}

static void test_limits(void) {
  Model *m = make_model();
  Tokenizer *t = make_tok(1);
  if (!m || !t) { check(0, "fillmask_limits_setup", "no model or tokenizer"); model_free(m); tokenizer_free(t); return; }
  const char *A = "the cat sat on the [MASK] .", *B = "[MASK] cat sat on the [MASK] .", *C = "the [MASK] .";
  char why[700];
  FillMaskLimits none = {0}, l;

  /* Each limit: a request at it is answered, one past it refused, naming it. */
  const char *three[] = {A, C, A}, *four[] = {A, C, A, C};
  l = none; l.max_inputs = 3;
  int at = under(m, t, l, three, 3, 1, 5, "max_inputs", 3, 3, why, sizeof why);
  int past = under(m, t, l, four, 4, 1, 5, "max_inputs", 3, 4, why, sizeof why);
  check(at == 1 && past == 0, "fillmask_limit_max_inputs", "%d %d: %s", at, past, why);

  const char *ab[] = {A, B}, *abc[] = {A, B, C};
  l = none; l.max_masks = 3;
  at = under(m, t, l, ab, 2, 1, 5, "max_masks", 3, 3, why, sizeof why);
  past = under(m, t, l, abc, 3, 1, 5, "max_masks", 3, 4, why, sizeof why);
  l.max_masks = 1;
  int single = under(m, t, l, &B, 1, 0, 5, "max_masks", 1, 2, why, sizeof why);
  check(at == 1 && past == 0 && single == 0, "fillmask_limit_max_masks", "%d %d %d: %s", at, past, single, why);

  int tok = n_tokens(t, A) + n_tokens(t, C);
  const char *ac[] = {A, C};
  l = none; l.max_tokens = tok;
  at = under(m, t, l, ac, 2, 1, 5, "max_tokens", tok, tok, why, sizeof why);
  l.max_tokens = tok - 1;
  past = under(m, t, l, ac, 2, 1, 5, "max_tokens", tok - 1, tok, why, sizeof why);
  check(tok > 0 && at == 1 && past == 0, "fillmask_limit_max_tokens", "%d tokens: %d %d: %s", tok, at, past, why);

  l = none; l.max_top_k = 7;
  at = under(m, t, l, &A, 1, 0, 7, "max_top_k", 7, 7, why, sizeof why);
  past = under(m, t, l, &A, 1, 0, 8, "max_top_k", 7, 8, why, sizeof why);
  check(at == 1 && past == 0, "fillmask_limit_max_top_k", "%d %d: %s", at, past, why);

  /* Answer bytes: exact, as fillmask_dumps(v, 0, 0) writes the answer, for every shape. */
  FillMask *free_fm = limited(m, t, none);
  struct { const char *name; const char *const *texts; int n, is_list, top_k; const char *const *targets; int nt; } shapes[] = {
    {"single", &A, 1, 0, 5, NULL, 0}, {"multi", &B, 1, 0, 3, NULL, 0}, {"list", abc, 3, 1, 2, NULL, 0},
    {"list_of_one", &C, 1, 1, 4, NULL, 0}, {"targets", ab, 2, 1, 5, (const char *const[]){SP "cat", SP "the"}, 2},
  };
  /* Every pipeline here plans the one model: each forgets its plan before it runs. */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    FillMaskError fe = {0};
    fillmask_forget_plan(free_fm);
    json_t *r = fillmask_run(free_fm, shapes[i].texts, shapes[i].n, shapes[i].is_list, shapes[i].top_k, shapes[i].targets,
                             shapes[i].nt, &fe);
    char *text = fillmask_dumps(r, 0, 0);
    long long S = text ? (long long)strlen(text) : 0;
    l = none; l.max_answer_bytes = S;
    FillMask *fm = limited(m, t, l);
    json_t *r_at = fillmask_run(fm, shapes[i].texts, shapes[i].n, shapes[i].is_list, shapes[i].top_k, shapes[i].targets,
                                shapes[i].nt, &fe);
    char *text_at = fillmask_dumps(r_at, 0, 0);
    fillmask_free(fm);
    l.max_answer_bytes = S - 1;
    fm = limited(m, t, l);
    json_t *r_past = fillmask_run(fm, shapes[i].texts, shapes[i].n, shapes[i].is_list, shapes[i].top_k, shapes[i].targets,
                                  shapes[i].nt, &fe);
    char name[64];
    snprintf(name, sizeof name, "fillmask_limit_answer_bytes_%s", shapes[i].name);
    check(text && text_at && !strcmp(text, text_at) && !r_past && fe.err.kind == ERR_TOO_LARGE && fe.limit &&
              !strcmp(fe.limit, "max_answer_bytes") && fe.max == S - 1 && fe.got == S,
          name, "%lld bytes: at the limit %s, past it %s (%s, got %lld)", S, text_at ? "answered" : "refused",
          r_past ? "answered" : "refused", fe.err.msg, fe.got);
    fillmask_free(fm);
    json_decref(r); json_decref(r_at); json_decref(r_past);
    free(text); free(text_at);
  }

  /* An answer that cannot fit is refused by prepare, before any model work. */
  l = none; l.max_answer_bytes = 100;
  FillMask *small = limited(m, t, l);
  FillMaskError fe = {0};
  FillMaskRequest *rq = small ? fillmask_prepare_texts(small, &A, 1, 0, 5, NULL, 0, &fe) : NULL;
  check(small && !rq && fe.err.kind == ERR_TOO_LARGE && strstr(fe.err.msg, "would be at least") && fe.got > 100,
        "fillmask_limit_answer_bytes_before_work", "%s", fe.err.msg);
  fillmask_request_free(rq);
  fillmask_free(small);

  /* The defaults: set by fillmask_options_default, and what a NULL options gets. */
  FillMaskOptions o;
  fillmask_options_default(&o);
  check(o.limits.max_inputs == FILLMASK_DEFAULT_MAX_INPUTS && o.limits.max_tokens == FILLMASK_DEFAULT_MAX_TOKENS &&
            o.limits.max_masks == FILLMASK_DEFAULT_MAX_MASKS && o.limits.max_top_k == FILLMASK_DEFAULT_MAX_TOP_K &&
            o.limits.max_answer_bytes == FILLMASK_DEFAULT_MAX_ANSWER_BYTES,
        "fillmask_limits_default", "defaults not set");

  /* One kind per refusal, whatever the input's form: the same too-long text is a text
  ** problem as a string and inside a list; shapes are shapes, limits are limits. */
  const char *too_long = "the cat sat on the mat the cat sat on the mat the cat sat on the mat [MASK]";
  json_t *s_in = json_string(too_long), *l_in = json_pack("[s]", too_long), *l2_in = json_pack("[s, s]", C, too_long);
  FillMaskError f1 = {0}, f2 = {0}, f3 = {0}, f4 = {0}, f5 = {0}, f6 = {0};
  fillmask_forget_plan(free_fm);
  json_t *x1 = fillmask_call(free_fm, s_in, NULL, &f1), *x2 = fillmask_call(free_fm, l_in, NULL, &f2),
         *x3 = fillmask_call(free_fm, l2_in, NULL, &f3);
  check(!x1 && !x2 && !x3 && f1.err.kind == ERR_BAD_INPUT && f2.err.kind == ERR_BAD_INPUT && f3.err.kind == ERR_BAD_INPUT &&
            strstr(f3.err.msg, "inputs[1]") && strstr(f1.err.msg, "longer than"),
        "fillmask_kind_too_long_same_in_list", "kinds %d %d %d: %s / %s / %s", (int)f1.err.kind, (int)f2.err.kind, (int)f3.err.kind,
        f1.err.msg, f2.err.msg, f3.err.msg);
  json_t *bad_k = json_pack("{s:s}", "top_k", "3"), *unknown = json_pack("{s:i}", "topk", 3), *num = json_integer(5);
  json_t *y1 = fillmask_call(free_fm, s_in, bad_k, &f4), *y2 = fillmask_call(free_fm, s_in, unknown, &f5),
         *y3 = fillmask_call(free_fm, num, NULL, &f6);
  check(!y1 && !y2 && !y3 && f4.err.kind == ERR_INVALID && f5.err.kind == ERR_INVALID && f6.err.kind == ERR_INVALID,
        "fillmask_kind_shape", "kinds %d %d %d", (int)f4.err.kind, (int)f5.err.kind, (int)f6.err.kind);
  json_t *nomask = json_string("no mask here");
  json_t *y4 = fillmask_call(free_fm, nomask, NULL, &f4);
  check(!y4 && f4.err.kind == ERR_BAD_INPUT, "fillmask_kind_no_mask", "kind %d: %s", (int)f4.err.kind, f4.err.msg);
  /* The parsers under the pipeline refuse bad text as "bad input" too. */
  Err pe1 = {0}, pe2 = {0}, pe3 = {0};
  ModelConfig pc;
  Tokenizer *pt1 = tokenizer_from_json("{\"model\": 3", 12, &pe1), *pt2 = tokenizer_from_json("{}", 2, &pe2);
  int pr = config_parse("{\"model_type\": \"gpt\"}", &pc, &pe3);
  check(!pt1 && !pt2 && pr == -1 && pe1.kind == ERR_BAD_INPUT && pe2.kind == ERR_BAD_INPUT && pe3.kind == ERR_BAD_INPUT,
        "parsers_kind_bad_input", "%s %s %s: %s / %s / %s", err_kind_name(pe1.kind), err_kind_name(pe2.kind),
        err_kind_name(pe3.kind), pe1.msg, pe2.msg, pe3.msg);
  tokenizer_free(pt1);
  tokenizer_free(pt2);
  json_decref(s_in); json_decref(l_in); json_decref(l2_in); json_decref(bad_k); json_decref(unknown); json_decref(num);
  json_decref(nomask);

  /* Several requests with different parameters answered together, in forward passes of
  ** two inputs: each gets what it gets alone. Prepared requests keep no pointer into
  ** their texts (the buffer is overwritten before the answer). */
  FillMaskOptions o2;
  fillmask_options_default(&o2);
  o2.limits = none;
  o2.max_batch = 2;
  FillMask *fm2 = fillmask_new(m, t, &o2, 0, &fe.err);
  char buf[64];
  snprintf(buf, sizeof buf, "%s", A);
  const char *bufp = buf;
  const char *bc[] = {B, C};
  const char *const tg[] = {SP "the", SP "cat"};
  FillMaskError pe[5] = {{0}};
  FillMaskRequest *reqs[5] = {
    fillmask_prepare_texts(fm2, &bufp, 1, 0, 3, NULL, 0, &pe[0]), fillmask_prepare_texts(fm2, bc, 2, 1, 2, tg, 2, &pe[1]),
    fillmask_prepare_texts(fm2, &C, 1, 0, 5, NULL, 0, &pe[2]), fillmask_prepare_texts(fm2, &A, 1, 1, 1, NULL, 0, &pe[3]),
    fillmask_prepare_texts(fm2, NULL, 0, 1, 5, NULL, 0, &pe[4]),
  };
  memset(buf, 'x', sizeof buf - 1);
  json_t *together[5] = {0};
  FillMaskError te[5];
  int prepared = fm2 != NULL;
  for (int i = 0; i < 5; i++) prepared = prepared && reqs[i];
  if (prepared) fillmask_answer(fm2, reqs, 5, together, te);
  fillmask_forget_plan(free_fm);
  json_t *alone[5] = {
    fillmask_run(free_fm, &A, 1, 0, 3, NULL, 0, NULL), fillmask_run(free_fm, bc, 2, 1, 2, tg, 2, NULL),
    fillmask_run(free_fm, &C, 1, 0, 5, NULL, 0, NULL), fillmask_run(free_fm, &A, 1, 1, 1, NULL, 0, NULL),
    fillmask_run(free_fm, NULL, 0, 1, 5, NULL, 0, NULL),
  };
  int same = prepared;
  for (int i = 0; same && i < 5; i++) same = together[i] && alone[i] && same_result(together[i], alone[i], 1e-5);
  check(same && json_array_size(together[4]) == 0, "fillmask_answer_mixed_requests", "%s",
        prepared ? "an answer differs from the request alone" : pe[0].err.msg);
  for (int i = 0; i < 5; i++) { json_decref(together[i]); json_decref(alone[i]); fillmask_request_free(reqs[i]); }

  /* In a shared answer, a request whose answer grows past the limit is refused alone. */
  FillMaskError e0 = {0};
  fillmask_forget_plan(free_fm);
  json_t *c_alone = fillmask_run(free_fm, &C, 1, 0, 5, NULL, 0, &e0);
  char *c_text = fillmask_dumps(c_alone, 0, 0);
  l = none; l.max_answer_bytes = c_text ? (long long)strlen(c_text) : 1;
  FillMask *fm3 = limited(m, t, l);
  FillMaskRequest *two[2] = {fm3 ? fillmask_prepare_texts(fm3, &A, 1, 0, 5, NULL, 0, &e0) : NULL,
                             fm3 ? fillmask_prepare_texts(fm3, &C, 1, 0, 5, NULL, 0, &e0) : NULL};
  json_t *got[2] = {0};
  FillMaskError ge[2];
  if (two[0] && two[1]) fillmask_answer(fm3, two, 2, got, ge);
  check(two[0] && two[1] && !got[0] && ge[0].err.kind == ERR_TOO_LARGE && got[1] && json_equal(got[1], c_alone),
        "fillmask_answer_bytes_alone_in_pass", "%s / %s", two[0] && two[1] ? ge[0].err.msg : e0.err.msg,
        got[1] ? "second answered" : ge[1].err.msg);
  json_decref(got[0]); json_decref(got[1]); json_decref(c_alone); free(c_text);
  fillmask_request_free(two[0]); fillmask_request_free(two[1]);
  fillmask_free(fm3);
  fillmask_free(fm2);
  fillmask_free(free_fm);
  model_free(m);
  tokenizer_free(t);
}

int main(void) {
  test_repr();
  test_dumps();
  test_pipeline();
  test_non_finite();
  test_limits();
  return check_exit();
}
