/* The fill-mask pipeline: what Hugging Face transformers' pipeline("fill-mask")
** answers, number for number and string for string (NOTES.md §3.1). Inputs are
** encoded with [CLS] ... [SEP], every mask position gets a softmax over the whole
** vocabulary, the top_k (optionally among targets) come back as
** {"score","token","token_str","sequence"} objects. Several inputs go through
** the model in one padded forward pass; the answer equals what HF computes for
** each input alone. Results are jansson values; fillmask_dumps() prints them with
** scores written as Python's json does (the float32 score widened to double,
** shortest repr), which jansson's own real formatting cannot do. */
#ifndef MASKD_FILLMASK_H
#define MASKD_FILLMASK_H
#include <jansson.h>
#include "engine/err.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

#define FILLMASK_DEFAULT_TOP_K 5

typedef struct FillMask FillMask;

/* What tokenizer_config.json / special_tokens_map.json say about the tokenizer. */
typedef struct FillMaskOptions {
  const char *mask_token;        /* NULL = "[MASK]" */
  const char *pad_token;         /* NULL = "<pad>"; removed from sequences as HF does */
  int clean_up_spaces;           /* clean_up_tokenization_spaces: 1 (maskd writes true), 0 */
  int max_batch;                 /* inputs per forward pass; <= 0 = 32 */
  /* Receives HF's warnings (a target replaced or ignored); NULL = dropped. */
  void (*warn)(void *ctx, const char *msg);
  void *warn_ctx;
} FillMaskOptions;

/* Default options: "[MASK]", "<pad>", clean-up on, batches of 32, no warnings. */
void fillmask_options_default(FillMaskOptions *o);
/* A pipeline over a model and a tokenizer; with own != 0 it frees them (also on
** failure). Refuses a tokenizer without the mask token ("The tokenizer does not
** define a `mask_token`.") and a vocabulary larger than the model's. */
FillMask *fillmask_new(Model *m, Tokenizer *t, const FillMaskOptions *o, int own, Err *err);
/* tokenizer_config.json and special_tokens_map.json are a few hundred bytes; no more than this is read. */
#define FILLMASK_MAX_SIDE_FILE ((size_t)1 << 20)
/* A pipeline from an HF folder: config.json, model.safetensors, tokenizer.json,
** and when present tokenizer_config.json (clean_up_tokenization_spaces, mask and
** pad tokens) and special_tokens_map.json (each a regular file of at most
** FILLMASK_MAX_SIDE_FILE bytes). o may be NULL (defaults). */
FillMask *fillmask_load_dir(const char *dir, const FillMaskOptions *o, Err *err);
/* Frees the pipeline (and the model and tokenizer when it owns them); NULL allowed. */
void fillmask_free(FillMask *fm);
/* The model and tokenizer the pipeline uses. */
Model *fillmask_model(FillMask *fm);
const Tokenizer *fillmask_tokenizer(const FillMask *fm);
/* The pipeline plans the model for its batches and keeps that plan between
** calls; code that plans the same model itself must call this afterwards. */
void fillmask_forget_plan(FillMask *fm);
/* Largest number of tokens (with [CLS]/[SEP]) an input may have: the model's positions. */
int fillmask_max_tokens(const FillMask *fm);

/* Runs texts[0..n): is_list says the caller passed a list (results are then a
** list, a 1-element list unwrapped as HF does; an empty list gives []); top_k >= 1,
** capped at the number of targets as HF does and at the vocabulary (where torch's
** topk would fail); targets may be NULL. One mask gives a list of objects, several
** masks a list per mask. Inputs longer than fillmask_max_tokens() are refused. */
json_t *fillmask_run(FillMask *fm, const char *const *texts, int n, int is_list, int top_k,
                     const char *const *targets, int n_targets, Err *err);
/* The HTTP/Inference-API form: inputs is a string or a list of strings;
** parameters (may be NULL) is an object with optional top_k (integer >= 1) and
** targets (string or list of strings); unknown parameters are refused by name. */
json_t *fillmask_call(FillMask *fm, const json_t *inputs, const json_t *parameters, Err *err);

/* Python repr() of a double (shortest round-trip digits, "1e-05" style exponents,
** "1.0" for integers) into buf (>= 32 bytes); returns buf. */
char *fillmask_repr_double(double x, char *buf);
/* JSON text of v (malloc'd): reals as Python repr()s, strings and the rest as
** jansson writes them; indent 0 = Python's json.dumps separators (", " and ": "),
** indent > 0 = that many spaces per level. ensure_ascii escapes non-ASCII as \uXXXX
** (Python's default). NULL on failure (non-finite reals, out of memory). */
char *fillmask_dumps(const json_t *v, int indent, int ensure_ascii);

#endif
