/* Layer: engine/infer/ (this folder: the fill-mask and text-classification
** pipelines) uses engine/core, nn, tok and io; never engine/train. (ARCHITECTURE.md)
**
** The text-classification pipeline: what Hugging Face transformers'
** pipeline("text-classification") answers, number for number. Each input (a text,
** or a text pair) is encoded with the tokenizer's template ([CLS] ... [SEP]; an input
** longer than the model's positions is refused, as HF's forward fails on it, unless
** parameters.truncation cuts it, as the tokenizer's truncation does:
** tokenizer_encode_truncated), the classifier's logits go
** through function_to_apply ("softmax" by default for a single-label model with
** more than one label, "sigmoid" for a multi-label one, or "none") and the labels
** come back as {"label", "score"} objects, best first:
**   - top_k absent: the best label only, {"label","score"} per input; a string input
**     gives [ {..} ], a list of n gives [ {..}, ... ] (one dict per input), as the
**     pipeline's legacy top_k default does;
**   - top_k = k (integer >= 1, capped at num_labels): a list of k dicts per input
**     (a string input: that list; a list input: a list of lists), sorted by score
**     with ties in label order (Python's stable sort); a top_k below 1, which HF
**     would slice with ([:0] gives [], [:-1] all but the last), is refused;
**   - top_k = null: every label, as top_k = num_labels.
** Truncation cuts to the model's positions (HF's truncation=True cuts to the
** tokenizer's model_max_length, which maskd's exported tokenizer_config says is them).
** Several inputs share padded forward passes; each answer equals what HF computes
** for the input alone. Scores are float32 widened to double, printed by
** fillmask_dumps() as Python's json does. */
#ifndef MASKD_TEXTCLASS_H
#define MASKD_TEXTCLASS_H
#include <jansson.h>
#include "engine/core/err.h"
#include "engine/infer/fillmask.h"
#include "engine/nn/model.h"
#include "engine/tok/tokenizer.h"

/* What one request may ask for (0 = no limit); the defaults bound a request on the
** base preset to about a second of one core. */
typedef struct TextClassLimits {
  int max_inputs;               /* texts in one request */
  int max_tokens;               /* tokens of all its texts together, after truncation */
} TextClassLimits;

#define TEXTCLASS_DEFAULT_MAX_INPUTS 64
#define TEXTCLASS_DEFAULT_MAX_TOKENS 4096

typedef struct TextClassOptions {
  int max_batch;                 /* inputs per forward pass; <= 0 = 32 */
  int max_length;                /* truncation length with [CLS]/[SEP]; <= 0 = the model's positions */
  TextClassLimits limits;
  ModelPrecision weights;        /* as FillMaskOptions.weights */
} TextClassOptions;

typedef struct TextClass TextClass;
typedef struct TextClassRequest TextClassRequest;

/* function_to_apply: HF's ClassificationFunction; DEFAULT = the model's (sigmoid for a
** multi-label model or one label, softmax otherwise). */
typedef enum TextClassFunction {
  TEXTCLASS_FN_DEFAULT = 0, TEXTCLASS_FN_SOFTMAX, TEXTCLASS_FN_SIGMOID, TEXTCLASS_FN_NONE
} TextClassFunction;
/* top_k's two non-numbers in the C form: absent (the legacy answer) and null (every label). */
#define TEXTCLASS_TOP_K_LEGACY 0
#define TEXTCLASS_TOP_K_ALL (-1)

/* Defaults: batches of 32, the model's length, the default limits, fp32 weights. */
void textclass_options_default(TextClassOptions *o);
/* A pipeline over a classifier (model_config(m)->task == MODEL_TASK_SEQ_CLS) and its
** tokenizer; with own != 0 it frees them (also on failure). ERR_BAD_INPUT for a masked
** LM ("... is a fill-mask model, not a text classifier") or a vocabulary larger than the model's. */
TextClass *textclass_new(Model *m, Tokenizer *t, const TextClassOptions *o, int own, Err *err);
/* A pipeline from an HF folder (config.json, model.safetensors, tokenizer.json); o may be NULL. */
TextClass *textclass_load_dir(const char *dir, const TextClassOptions *o, Err *err);
/* Frees the pipeline (and the model and tokenizer when it owns them); NULL allowed. */
void textclass_free(TextClass *tc);
Model *textclass_model(TextClass *tc);
const Tokenizer *textclass_tokenizer(const TextClass *tc);
const TextClassLimits *textclass_limits(const TextClass *tc);
/* Largest number of tokens (with [CLS]/[SEP]) an input may have: the model's positions. */
int textclass_max_tokens(const TextClass *tc);
/* The function a request without function_to_apply gets (never DEFAULT). */
TextClassFunction textclass_default_function(const TextClass *tc);
/* The pipeline plans the model and keeps that plan; code that plans it itself calls this after. */
void textclass_forget_plan(TextClass *tc);

/* "softmax", "sigmoid", "none" in any case (HF's ClassificationFunction[name.upper()]) into *out: 0, else -1. */
int textclass_function_parse(const char *name, TextClassFunction *out);
/* "softmax", "sigmoid", "none" ("default" for DEFAULT). */
const char *textclass_function_name(TextClassFunction f);
/* out[0..n) = fn(logits[0..n)) in numpy's float32 arithmetic, as the pipeline's
** postprocess computes it (exp as numpy's SIMD float32 exp, the softmax's sum as
** numpy's pairwise sum): bit for bit numpy's. fn DEFAULT is refused: returns -1. */
int textclass_scores(const float *logits, int n, TextClassFunction fn, float *out);

/* Parses and encodes one request (the HTTP form: inputs a string, a dict {"text",
** "text_pair"} (a text pair; text_pair optional), or a list of either; a single dict's
** legacy answer is its dict, not a list, as the pipeline's __call__ gives it; a pair's
** type ids go to a BERT model, as BertTokenizerFast returns them, not to a RoBERTa one;
** parameters NULL or an object with top_k (integer >= 1 or null), function_to_apply
** ("softmax", "sigmoid", "none", any case as HF's enum lookup) and truncation (bool:
** longest_first or none, or a strategy's name: tokenizer_truncation_parse); unknown
** parameters refused by name). Errors as FillMaskError's kinds (ERR_INVALID fields,
** ERR_BAD_INPUT texts, ERR_TOO_LARGE limits). Reads the pipeline only: any thread. */
TextClassRequest *textclass_prepare(const TextClass *tc, const json_t *inputs, const json_t *parameters,
                                    FillMaskError *fe);
/* The same from C values: texts[0..n) (is_list: the caller passed a list, even of one);
** top_k >= 1, TEXTCLASS_TOP_K_LEGACY or TEXTCLASS_TOP_K_ALL; truncation != 0 cuts long texts. */
TextClassRequest *textclass_prepare_texts(const TextClass *tc, const char *const *texts, int n, int is_list,
                                          long long top_k, TextClassFunction fn, int truncation, FillMaskError *fe);
/* Its tokens (the forward's cost). */
int textclass_request_tokens(const TextClassRequest *r);
/* Frees a request; NULL allowed. */
void textclass_request_free(TextClassRequest *r);
/* Answers reqs[0..n) together (one thread at a time per pipeline); results[i] a new
** reference, or NULL with errors[i] filled. */
void textclass_answer(TextClass *tc, TextClassRequest *const *reqs, int n, json_t **results, FillMaskError *errors);
/* prepare + answer of one request. */
json_t *textclass_call(TextClass *tc, const json_t *inputs, const json_t *parameters, FillMaskError *fe);
/* prepare_texts + answer of one request. */
json_t *textclass_run(TextClass *tc, const char *const *texts, int n, int is_list, long long top_k,
                      TextClassFunction fn, int truncation, FillMaskError *fe);

#endif
