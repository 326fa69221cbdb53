/* libFuzzer harness: the fill-mask request (engine/infer/fillmask.h, fillmask_call) over a
** tiny random model and a seed-recipe tokenizer built in the process. The input is a
** request body as the HTTP API receives it: {"inputs": str | [str], "parameters":
** {"top_k", "targets"}} (any other JSON value is passed as "inputs"). Checks on an
** answer: its shape (a list of predictions per mask, nested as HF nests them), each
** prediction {score, token, token_str, sequence} with a token in the vocabulary, a
** score in [0, 1], scores in descending order, at most top_k of them; and
** fillmask_dumps writes JSON that reads back equal to the answer (compact and
** indented, with and without ensure_ascii). */
#include <stdint.h>
#include <string.h>

#include "engine/nn/config.h"
#include "engine/infer/fillmask.h"
#include "engine/nn/model.h"
#include "engine/tok/tokenizer.h"
#include "tests/fuzz/fuzz_common.h"

#define SP "\xe2\x96\x81"
static const char *pieces[] = {
  "[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]", SP, SP "the", SP "a", SP "cat", SP "sat", SP "on", SP "mat", ".", ",",
  "s", "e", "t", "a", "c", "h", "o", "n", "m", SP "dog", SP "caf\xc3\xa9", "x", SP "big", "'", SP "was", "d",
};
#define NP ((int)(sizeof pieces / sizeof pieces[0]))
#define MAX_POS 24   /* RoBERTa with pad 3: inputs of up to 20 tokens */

static FillMask *fm;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  double sc[NP];
  for (int i = 0; i < NP; i++) sc[i] = i < 5 ? 0.0 : -1.0 - 0.1 * i;
  Err err = {0};
  Tokenizer *t = tokenizer_new_seed(NP, pieces, sc, 2, 5, &err);
  FUZZ_CHECK(t, "tokenizer: %s", err.msg);
  ModelConfig c;
  config_preset("tiny", &c, &err);
  c.vocab_size = NP; c.hidden_size = 8; c.num_attention_heads = 2; c.num_hidden_layers = 1; c.intermediate_size = 16;
  c.max_position_embeddings = MAX_POS;
  Model *m = model_new(&c, &err);
  FUZZ_CHECK(m, "model: %s", err.msg);
  model_init_weights(m, 11);
  float *w = model_params(m);
  for (size_t i = 0; i < model_num_params(m); i++) w[i] *= 15.0f;
  model_set_threads(m, 1);
  FillMaskOptions o;
  fillmask_options_default(&o);
  o.max_batch = 4;   /* several forward passes for longer lists */
  fm = fillmask_new(m, t, &o, 1, &err);
  FUZZ_CHECK(fm, "fillmask_new: %s", err.msg);
  return 0;
}

/* A list of predictions: objects with the four keys, sorted by score, at most top_k. */
static void check_predictions(const json_t *list, int top_k) {
  FUZZ_CHECK(json_is_array(list), "predictions are not a list");
  size_t n = json_array_size(list);
  FUZZ_CHECK(n >= 1 && n <= (size_t)top_k && n <= (size_t)NP, "%zu predictions for top_k %d", n, top_k);
  double prev = 2;
  size_t i;
  json_t *p;
  json_array_foreach(list, i, p) {
    FUZZ_CHECK(json_is_object(p) && json_object_size(p) == 4, "prediction %zu is not {score, token, token_str, sequence}", i);
    json_t *score = json_object_get(p, "score"), *token = json_object_get(p, "token");
    FUZZ_CHECK(json_is_real(score) && json_is_integer(token) && json_is_string(json_object_get(p, "token_str")) &&
                   json_is_string(json_object_get(p, "sequence")),
               "prediction %zu has a field of the wrong type", i);
    double s = json_real_value(score);
    FUZZ_CHECK(s >= 0 && s <= 1, "score %g", s);
    FUZZ_CHECK(s <= prev, "scores not in descending order");
    prev = s;
    json_int_t id = json_integer_value(token);
    FUZZ_CHECK(id >= 0 && id < NP, "token %lld outside the vocabulary", (long long)id);
  }
}

/* One input's answer: a prediction list (one mask) or a list of them (several). */
static void check_input(const json_t *r, int top_k) {
  FUZZ_CHECK(json_is_array(r) && json_array_size(r) > 0, "an input's answer is not a non-empty list");
  if (json_is_array(json_array_get(r, 0))) {
    size_t i;
    json_t *x;
    json_array_foreach(r, i, x) check_predictions(x, top_k);
  } else {
    check_predictions(r, top_k);
  }
}

static void check_dumps(const json_t *res) {
  for (int k = 0; k < 4; k++) {
    char *text = fillmask_dumps(res, k & 1 ? 2 : 0, k >> 1);
    FUZZ_CHECK(text, "fillmask_dumps failed");
    json_error_t je;
    json_t *back = json_loads(text, JSON_DECODE_ANY, &je);
    FUZZ_CHECK(back, "fillmask_dumps wrote invalid JSON (%s): %.200s", je.text, text);
    FUZZ_CHECK(json_equal(back, (json_t *)res), "fillmask_dumps text reads back different: %.200s", text);
    json_decref(back);
    free(text);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
  if (!body) return 0;
  const json_t *inputs = body, *params = NULL;
  if (json_is_object(body)) {
    inputs = json_object_get(body, "inputs");
    params = json_object_get(body, "parameters");
  }
  FillMaskError fe;
  memset(&fe, 0, sizeof fe);
  json_t *res = fillmask_call(fm, inputs, params, &fe);
  if (!res) {
    FUZZ_CHECK(fe.err.msg[0], "a refusal without a message");
    FUZZ_CHECK(fe.err.kind == ERR_INVALID || fe.err.kind == ERR_BAD_INPUT || fe.err.kind == ERR_TOO_LARGE ||
                   fe.err.kind == ERR_INTERNAL || fe.err.kind == ERR_NOMEM, "a refusal of kind %d", (int)fe.err.kind);
    FUZZ_CHECK(fe.err.kind != ERR_INTERNAL && fe.err.kind != ERR_NOMEM, "an internal error: %s", fe.err.msg);
    FUZZ_CHECK(fe.err.kind != ERR_TOO_LARGE || (fe.limit && fe.got > fe.max), "a limit refusal without its limit: %s",
               fe.err.msg);
    json_decref(body);
    return 0;
  }
  json_t *k = json_is_object(params) ? json_object_get(params, "top_k") : NULL;
  int top_k = json_is_integer(k) ? (int)json_integer_value(k) : FILLMASK_DEFAULT_TOP_K;
  if (json_is_string(inputs) || (json_is_array(inputs) && json_array_size(inputs) == 1)) {
    check_input(res, top_k);
  } else {
    FUZZ_CHECK(json_is_array(res) && json_array_size(res) == json_array_size(inputs), "%zu answers for %zu inputs",
               json_array_size(res), json_array_size(inputs));
    size_t i;
    json_t *x;
    json_array_foreach(res, i, x) check_input(x, top_k);
  }
  check_dumps(res);
  json_decref(res);
  json_decref(body);
  return 0;
}
